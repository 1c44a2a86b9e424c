/* proxy.c - the gateway's data listener: N worker threads, each with its
 * own libuv loop and its own SO_REUSEPORT listening socket on the same
 * address (the kernel spreads connections over them), serving HTTP/1.1
 * with keep-alive and pipelining (requests on one connection are served
 * one after the other), limits on headers (64 KiB -> 431) and bodies
 * (-> 413), and deadlines against slow clients (headers within 10 s, a
 * body within 120 s with no silence over 30 s, 60 s idle keep-alive).
 *
 * Threads share nothing but the gateway (an immutable config view read with
 * one atomic load, the lock-free limiter and metrics). Each worker owns its
 * connections, its upstream pools and its criticality queues.
 *
 * Queue split: a route's capacity and queue are split across the workers,
 * each worker owning a td_critqueue of ceil(capacity/N) in flight and
 * ceil(queue/N) waiting. The alternative, one owner thread per route queue
 * with the others handing requests to it, costs two cross-thread wake-ups
 * (uv_async) and a locked mailbox per request on the hot path, and makes
 * one thread the bottleneck of a busy route; the split costs nothing per
 * request. Its price: a worker may shed while another has room when
 * connections are spread unevenly (SO_REUSEPORT hashes connections, so with
 * many clients the spread is even), and in flight may reach
 * N*ceil(capacity/N) <= capacity + N - 1. Deployments that need the exact
 * bound per route run --workers 1 or size capacity as a multiple of N.
 *
 * The request flow itself is in proxy_request.c, forwarding in
 * proxy_upstream.c. */
#include "io/proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "io/proxy_internal.h"

#define DEFAULT_MAX_BODY ((size_t)1 << 20)
#define MAX_WORKERS      1024u
#define BACKLOG          1024

uint64_t px_now(void)
{
    return uv_hrtime();
}

const char *px_date(px_worker *w)
{
    time_t now = time(NULL);
    if (now != w->date_sec || !w->date[0]) {
        struct tm tm;
        w->date_sec = now;
        if (!gmtime_r(&now, &tm) ||
            strftime(w->date, sizeof w->date, "%a, %d %b %Y %H:%M:%S GMT", &tm) == 0)
            w->date[0] = '\0';
    }
    return w->date;
}

static void buf_clear(td__buf *b)
{
    if (b->cap > 256 * 1024) {
        td__buf_fini(b);
    } else {
        b->len = 0;
        if (b->p)
            b->p[0] = '\0';
    }
}

/* Working for the client, or holding its answer: nothing more is parsed. */
static int busy(const px_conn *c)
{
    return c->rq.state == RQ_QUEUED || c->rq.state == RQ_UPSTREAM || c->held;
}

/* ---- connection lifetime ---- */

static void on_conn_closed(uv_handle_t *h)
{
    px_conn *c = h->data;
    if (--c->open_handles > 0)
        return;
    px_worker *w = c->w;
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    w->n_conns--;
    if (c->conn_counted)
        td_gateway_conn_release(w->p->g, c->conn_tenant);
    td__buf_fini(&c->in);
    td__buf_fini(&c->out);
    td__buf_fini(&c->rq.url);
    td__buf_fini(&c->rq.hdr);
    td__buf_fini(&c->rq.body);
    td__tls_destroy(c->tls);
    OPENSSL_cleanse(c->auth.bytes, sizeof c->auth.bytes);
    free(c);
}

void px_conn_close(px_conn *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    c->stop = 1;
    px_conn_forget(c); /* uv_close closes the descriptor now */
    if (c->rq.state != RQ_IDLE || c->rq.cfg)
        px_req_abort(c);
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
    uv_close((uv_handle_t *)&c->timer, on_conn_closed);
}

static void on_timer(uv_timer_t *t);

/* The timer is re-armed only when the new deadline is earlier than the one
 * it is armed for: a keep-alive request moves through four or five modes,
 * each with a deadline seconds away, and stopping and starting the libuv
 * timer (a heap removal and insertion) for each was a measurable part of a
 * proxied request. A timer that fires before its mode's deadline, or with
 * no mode, re-arms for what is left or does nothing (on_timer). */
void px_timer_set(px_conn *c, px_timer_mode mode, uint64_t ms)
{
    if (c->closing)
        return;
    c->timer_mode = mode;
    if (mode == TM_NONE)
        return;
    uint64_t due = uv_now(&c->w->loop) + ms;
    c->timer_due = due;
    if (uv_is_active((uv_handle_t *)&c->timer) && c->timer_armed <= due)
        return;
    c->timer_armed = due;
    uv_timer_start(&c->timer, on_timer, ms, 0);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    px_conn *c = h->data;
    (void)suggested;
    *buf = uv_buf_init(c->w->rbuf, sizeof c->w->rbuf);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

static void on_shutdown(uv_shutdown_t *req, int status)
{
    px_conn *c = req->data;
    if (c->closing)
        return;
    c->shut_done = 1;
    if (status < 0 || c->peer_eof) {
        px_conn_close(c);
        return;
    }
    /* Closing with unread input makes the kernel send RST, which can
     * destroy the answer before the client reads it: drain a while. */
    px_timer_set(c, TM_LINGER, PX_LINGER_MS);
    if (c->read_paused) {
        c->read_paused = 0;
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
            px_conn_close(c);
    }
}

/* Ends the connection once what has been queued is written. */
static void conn_finish(px_conn *c)
{
    if (c->finishing || c->closing)
        return;
    c->finishing = 1;
    c->stop = 1;
    if (c->rq.state != RQ_IDLE || c->rq.cfg)
        px_req_abort(c);
    px_timer_set(c, TM_LINGER, PX_LINGER_MS + PX_IDLE_TIMEOUT_MS);
    if (c->tls && td__tls_handshake_done(c->tls)) {
        td__tls_shutdown(c->tls); /* close_notify, sent by the flush */
        if (px_flush(c) < 0)
            return;
    }
    c->shutdown_req.data = c;
    if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, on_shutdown) < 0)
        px_conn_close(c);
}

static void tarpit_release(px_conn *c);

static void on_timer(uv_timer_t *t)
{
    px_conn *c = t->data;
    if (c->timer_mode == TM_NONE)
        return;
    uint64_t now = uv_now(&c->w->loop);
    if (now < c->timer_due) { /* armed for an earlier mode's deadline */
        c->timer_armed = c->timer_due;
        uv_timer_start(&c->timer, on_timer, c->timer_due - now, 0);
        return;
    }
    switch (c->timer_mode) {
    case TM_QUEUE:
    case TM_UPSTREAM:
    case TM_STREAM:
        px_req_timeout(c);
        break;
    case TM_HEADER:
    case TM_BODY:
        if (c->rq.state == RQ_READING && !c->stop) {
            /* A request begun and not finished in time (slowloris): say
             * so with 408, then close. A connection that never sent a
             * byte is owed nothing and is just closed. */
            c->stop = 1;
            c->rq.keep_alive = 0;
            px_respond(c, 408, NULL,
                       PX_ERROR_BODY("the request did not arrive in time", "invalid_request_error",
                                     "request_timeout"));
            px_req_end(c, TD_OUT_BAD_REQUEST);
            if (px_flush(c) == 0)
                conn_finish(c);
            break;
        }
        px_conn_close(c);
        break;
    case TM_TARPIT:
        tarpit_release(c);
        break;
    case TM_IDLE:
        if (c->rq.state == RQ_IDLE && uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) == 0) {
            conn_finish(c);
            break;
        }
        px_conn_close(c);
        break;
    default: /* slow headers, a stalled body, lingering: no answer is owed */
        px_conn_close(c);
        break;
    }
}

/* ---- writing ---- */

typedef struct {
    uv_write_t req;
    px_conn *c;
    char *data;
} write_req;

static void on_write(uv_write_t *req, int status)
{
    write_req *wr = (write_req *)req;
    px_conn *c = wr->c;
    free(wr->data);
    free(wr);
    if (c->closing)
        return;
    if (status < 0) {
        px_conn_close(c);
        return;
    }
    /* a slow client that is still reading counts as progress of the
     * stream, not as a silent upstream */
    if (c->timer_mode == TM_STREAM && c->rq.route) {
        uint64_t ms = c->rq.route->timeout_ns / 1000000;
        px_timer_set(c, TM_STREAM, ms ? ms : 30000);
    }
    if (c->up_paused && uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) < PX_WRITE_LOW)
        px_up_resume(c);
}

/* TLS: encrypts what is in c->out, then puts the records to send in its
 * place, so the plain path below writes ciphertext. 0, or -1 on failure. */
static int tls_seal(px_conn *c)
{
    if (c->out.len && td__tls_write(c->tls, c->out.p, c->out.len, NULL) != TD_OK)
        return -1;
    c->out.len = 0;
    size_t pending = td__tls_out_pending(c->tls);
    if (pending == 0)
        return 0;
    char *data = malloc(pending);
    if (!data)
        return -1;
    size_t n = td__tls_out(c->tls, data, pending);
    td_status st = td__buf_append(&c->out, data, n);
    free(data);
    return st == TD_OK ? 0 : -1;
}

int px_flush(px_conn *c)
{
    if (c->closing)
        return -1;
    if (c->held)
        return 0; /* the held answer goes out when its timer fires */
    if (c->tls && tls_seal(c) < 0) {
        px_conn_close(c);
        return -1;
    }
    if (c->out.len == 0)
        return 0;
    size_t off = 0;
    uv_stream_t *st = (uv_stream_t *)&c->tcp;
    if (uv_stream_get_write_queue_size(st) == 0) {
        uv_buf_t b = uv_buf_init(c->out.p, (unsigned int)c->out.len);
        int r = uv_try_write(st, &b, 1);
        if (r >= 0) {
            off = (size_t)r;
        } else if (r != UV_EAGAIN) {
            px_conn_close(c);
            return -1;
        }
    }
    if (off == c->out.len) {
        buf_clear(&c->out);
        return 0;
    }
    write_req *wr = malloc(sizeof *wr);
    char *data = NULL;
    size_t n = c->out.len - off;
    if (wr && off == 0) {
        data = td__buf_take(&c->out, &n);
    } else if (wr) {
        data = malloc(n);
        if (data)
            memcpy(data, c->out.p + off, n);
        buf_clear(&c->out);
    }
    if (!wr || !data) {
        free(wr);
        free(data);
        px_conn_close(c);
        return -1;
    }
    wr->c = c;
    wr->data = data;
    uv_buf_t b = uv_buf_init(data, (unsigned int)n);
    if (uv_write(&wr->req, st, &b, 1, on_write) < 0) {
        free(data);
        free(wr);
        px_conn_close(c);
        return -1;
    }
    return 0;
}

/* ---- parsing requests ---- */

static px_conn *conn_of(http_parser *p)
{
    return p->data;
}

static int refuse(px_conn *c, int status)
{
    if (!c->rq.err_status)
        c->rq.err_status = status;
    return -1;
}

static int on_message_begin(http_parser *p)
{
    px_conn *c = conn_of(p);
    px_req *r = &c->rq;
    buf_clear(&r->url);
    buf_clear(&r->hdr);
    buf_clear(&r->body);
    r->n_ix = 0;
    r->header_bytes = 0;
    r->in_value = 0;
    r->headers_done = 0;
    r->err_status = 0;
    td__chunk_gate_reset(&c->gate);
    r->state = RQ_READING;
    r->t_start = px_now();
    if (c->timer_mode != TM_HEADER)
        px_timer_set(c, TM_HEADER, PX_HEADER_TIMEOUT_MS);
    return 0;
}

static int count_header_bytes(px_conn *c, size_t n)
{
    if (n > PX_HEADER_MAX - c->rq.header_bytes)
        return refuse(c, 431);
    c->rq.header_bytes += n;
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
    px_conn *c = conn_of(p);
    if (n > PX_HEADER_MAX - c->rq.header_bytes)
        return refuse(c, 414);
    c->rq.header_bytes += n;
    return td__buf_append(&c->rq.url, at, n) == TD_OK ? 0 : refuse(c, 414);
}

/* in_value: 0 before any field, 1 inside a name, 2 inside a value. */
static int end_field(px_conn *c)
{
    px_req *r = &c->rq;
    td_status st = TD_OK;
    if (r->in_value == 1) {
        st = td__buf_append(&r->hdr, "", 1);
        if (st == TD_OK) {
            r->ix[r->n_ix - 1].value_off = r->hdr.len;
            st = td__buf_append(&r->hdr, "", 1);
        }
    } else if (r->in_value == 2) {
        st = td__buf_append(&r->hdr, "", 1);
    }
    r->in_value = 0;
    return st == TD_OK ? 0 : refuse(c, 431);
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
    px_conn *c = conn_of(p);
    px_req *r = &c->rq;
    if (count_header_bytes(c, n))
        return -1;
    if (!td__http_token_chars(at, n))
        return refuse(c, 400); /* "Transfer-Encoding : chunked" and kin */
    if (r->headers_done)
        return 0; /* a chunked body's trailer: counted, not kept */
    if (r->in_value != 1) {
        if (end_field(c))
            return -1;
        if (r->n_ix == PX_MAX_HEADERS)
            return refuse(c, 431);
        r->ix[r->n_ix].name_off = r->hdr.len;
        r->ix[r->n_ix].value_off = r->hdr.len;
        r->n_ix++;
        r->in_value = 1;
    }
    return td__buf_append(&r->hdr, at, n) == TD_OK ? 0 : refuse(c, 431);
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
    px_conn *c = conn_of(p);
    px_req *r = &c->rq;
    if (count_header_bytes(c, n))
        return -1;
    if (!td__http_value_chars(at, n))
        return refuse(c, 400); /* obs-fold, bare LF, NUL */
    if (r->headers_done)
        return 0;
    if (r->in_value == 1) {
        if (td__buf_append(&r->hdr, "", 1) != TD_OK)
            return refuse(c, 431);
        r->ix[r->n_ix - 1].value_off = r->hdr.len;
        r->in_value = 2;
    }
    return td__buf_append(&r->hdr, at, n) == TD_OK ? 0 : refuse(c, 431);
}

/* Finds the headers the gateway acts on, trimming values in place. A
 * repeated Authorization, X-Tenant or X-Criticality is ambiguous: 400. */
static int index_headers(px_conn *c)
{
    px_req *r = &c->rq;
    r->h_auth = r->h_xtenant = r->h_crit = r->h_timeout = r->h_gpu = r->h_connection = NULL;
    r->h_host = r->h_xff = NULL;
    r->n_connection = 0;
    r->expect_continue = 0;
    for (size_t i = 0; i < r->n_ix; i++) {
        const char *name = r->hdr.p + r->ix[i].name_off;
        char *value = r->hdr.p + r->ix[i].value_off;
        size_t vlen = strlen(value);
        while (vlen && (value[vlen - 1] == ' ' || value[vlen - 1] == '\t'))
            value[--vlen] = '\0';
        const char **slot = NULL;
        int unique = 0;
        switch (name[0] | 0x20) {
        case 'a':
            if (strcasecmp(name, "authorization") == 0)
                slot = &r->h_auth, unique = 1;
            break;
        case 'c':
            if (strcasecmp(name, "connection") == 0) {
                slot = &r->h_connection;
                r->n_connection++;
            }
            break;
        case 'e':
            if (strcasecmp(name, "expect") == 0 && strcasecmp(value, "100-continue") == 0)
                r->expect_continue = 1;
            break;
        case 'h':
            if (strcasecmp(name, "host") == 0)
                slot = &r->h_host, unique = 1;
            break;
        case 'x':
            if (strcasecmp(name, "x-tenant") == 0)
                slot = &r->h_xtenant, unique = 1;
            else if (strcasecmp(name, "x-criticality") == 0)
                slot = &r->h_crit, unique = 1;
            else if (strcasecmp(name, "x-request-timeout-ms") == 0)
                slot = &r->h_timeout, unique = 1;
            else if (strcasecmp(name, "x-gpu-seconds-estimate") == 0)
                slot = &r->h_gpu, unique = 1;
            else if (strcasecmp(name, "x-forwarded-for") == 0)
                slot = &r->h_xff;
            break;
        }
        if (!slot)
            continue;
        if (*slot && unique)
            return -1;
        if (!*slot)
            *slot = value;
    }
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    px_conn *c = conn_of(p);
    px_req *r = &c->rq;
    if (end_field(c))
        return -1;
    if (p->http_major != 1 || p->http_minor > 1)
        return refuse(c, 505);
    r->headers_done = 1;
    /* RFC 9112 6.1: Transfer-Encoding in an HTTP/1.0 message may be
     * framed otherwise by a 1.0 hop in front; nginx and Envoy refuse it */
    if (p->http_minor == 0)
        for (size_t i = 0; i < r->n_ix; i++)
            if (strcasecmp(r->hdr.p + r->ix[i].name_off, "transfer-encoding") == 0)
                return refuse(c, 400);
    /* the target as received; the path is a part of it (route matching
     * NUL-terminates it in place for the lookup) */
    if (td__buf_append(&r->url, "", 0) != TD_OK || !r->url.p)
        return refuse(c, 400);
    const char *u = r->url.p;
    const char *path = u;
    if (u[0] != '/') { /* absolute-form "http://host/path" */
        const char *se = strstr(u, "://");
        path = se ? strchr(se + 3, '/') : NULL;
    }
    r->path_off = path ? (size_t)(path - u) : SIZE_MAX;
    r->path_len = path ? strcspn(path, "?#") : 0;
    if (index_headers(c) < 0)
        return refuse(c, 400);
    r->method = (int)p->method;
    r->http_minor = p->http_major == 1 ? (int)p->http_minor : 0;
    r->keep_alive = http_should_keep_alive(p) && !p->upgrade;
    int has_body = (p->flags & F_CHUNKED) || ((p->flags & F_CONTENTLENGTH) && p->content_length);
    r->t_body_start = px_now();
    px_timer_set(c, has_body ? TM_BODY : TM_NONE, PX_BODY_TIMEOUT_MS);
    px_req_headers(c);
    if (c->rq.tenant && !c->authed)
        px_conn_authenticated(c); /* a valid key; a wrong one leaves it on the clock */
    if (c->stop)
        http_parser_pause(p, 1);
    else if (p->flags & F_CHUNKED)
        td__chunk_gate_arm(&c->gate, p); /* the body's framing is checked first */
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    px_conn *c = conn_of(p);
    if (c->rq.reject_status)
        return 0;
    td_status st = td__buf_append(&c->rq.body, at, n);
    return st == TD_OK ? 0 : refuse(c, st == TD_EQUOTA ? 413 : 503);
}

/* After an answer made at once: a rate or concurrency 429 to a client
 * that keeps retrying before its Retry-After is held on the connection's
 * timer (no thread waits, nothing more is read into the parser), and at
 * the end of a long streak the connection is closed (gateway/flood.h). */
static void flood_check(px_conn *c, uint64_t arrived_ns, uint32_t tenant)
{
    td_proxy *p = c->w->p;
    uint64_t hold_ns = 0;
    td_flood_action a = td_flood_answer(&p->flood, &c->flood, arrived_ns, tenant,
                                        c->refusal_retry_ns != 0, c->refusal_retry_ns, px_now(),
                                        &hold_ns);
    c->refusal_retry_ns = 0;
    if (a == TD_FLOOD_ANSWER)
        return;
    c->held = 1;
    c->close_held = a == TD_FLOOD_CLOSE;
    td_metrics_tarpitted(p->metrics);
    px_timer_set(c, TM_TARPIT, (hold_ns + 999999) / 1000000);
}

static void tarpit_release(px_conn *c)
{
    c->held = 0;
    if (c->close_held) {
        c->stop = 1;
        td_metrics_conn_closed(c->w->p->metrics, TD_CONN_IGNORED_RETRY_AFTER);
    }
    if (px_flush(c) < 0)
        return;
    if (c->stop)
        conn_finish(c);
    else
        px_conn_request_done(c);
}

static int on_message_complete(http_parser *p)
{
    px_conn *c = conn_of(p);
    px_timer_set(c, TM_NONE, 0);
    uint64_t arrived_ns = c->rq.t_start;
    uint32_t tenant = c->rq.tenant ? c->rq.tenant->slot + 1 : 0;
    c->refusal_retry_ns = 0;
    px_req_message(c);
    if (!busy(c) && !c->stop && !c->closing)
        flood_check(c, arrived_ns, tenant);
    if (busy(c) || c->stop)
        http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings request_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static void parse_error(px_conn *c, enum http_errno e)
{
    int status = c->rq.err_status;
    if (!status)
        status = e == HPE_HEADER_OVERFLOW ? 431 : 400;
#define IRE "invalid_request_error"
    const char *body =
        status == 413   ? PX_BODY_TOO_LARGE
        : status == 431 ? PX_ERROR_BODY("the request headers are too large", IRE,
                                        "headers_too_large")
        : status == 414 ? PX_ERROR_BODY("the request target is too long", IRE, "uri_too_long")
        : status == 503 ? PX_ERROR_BODY("tenantd is overloaded; retry later", "server_error",
                                        "overloaded")
        : status == 505 ? PX_ERROR_BODY("HTTP/1.0 or HTTP/1.1 only", IRE,
                                        "http_version_not_supported")
                        : PX_ERROR_BODY("the request is not valid HTTP", IRE, "bad_request");
#undef IRE
    c->stop = 1;
    c->rq.keep_alive = 0;
    px_respond(c, status, NULL, body);
    px_req_end(c, TD_OUT_BAD_REQUEST);
}

/* For the chunk check: the message whose headers ended is still read. */
static int reading_message(http_parser *p)
{
    return conn_of(p)->rq.state == RQ_READING;
}

/* Parses what input there is while no request is in progress. data (n
 * bytes, borrowed) is new input; what is not parsed now is kept. */
static void conn_process(px_conn *c, const char *data, size_t n)
{
    if (c->closing)
        return;
    if (data && (c->in.len > c->in_off || busy(c) || c->in_parser)) {
        if (!c->stop && td__buf_append(&c->in, data, n) != TD_OK) {
            px_conn_close(c);
            return;
        }
        data = NULL;
    }
    if (c->in_parser)
        return; /* the loop below, further up the stack, goes on */
    /* offsets, not pointers: c->in.p is NULL while nothing is buffered */
    const char *base = data ? data : c->in.p;
    size_t start = data ? 0 : c->in_off, len = data ? n : c->in.len - c->in_off, done = 0;
    c->in_parser = 1;
    while (!c->stop && !c->closing && !busy(c) && done < len) {
        int bad;
        done += td__chunk_gate_execute(&c->gate, &c->parser, &request_settings, base + start + done,
                                       len - done, reading_message, &bad);
        if (bad) {
            refuse(c, 400);
            parse_error(c, HPE_INVALID_CHUNK_SIZE);
            break;
        }
        enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
        if (e == HPE_PAUSED) {
            http_parser_pause(&c->parser, 0);
            continue;
        }
        if (e != HPE_OK) {
            parse_error(c, e);
            break;
        }
        if (c->parser.upgrade) {
            /* what follows the headers is another protocol */
            c->stop = 1;
            break;
        }
    }
    c->in_parser = 0;
    if (c->closing)
        return;
    if (data) {
        if (done < len && !c->stop && td__buf_append(&c->in, data + done, len - done) != TD_OK) {
            px_conn_close(c);
            return;
        }
    } else {
        c->in_off += done;
    }
    if (c->in_off == c->in.len) {
        buf_clear(&c->in);
        c->in_off = 0;
    } else if (c->in_off > 64 * 1024) {
        memmove(c->in.p, c->in.p + c->in_off, c->in.len - c->in_off);
        c->in.len -= c->in_off;
        c->in.p[c->in.len] = '\0';
        c->in_off = 0;
    }
    if (px_flush(c) < 0)
        return;
    if (c->stop && !busy(c)) {
        conn_finish(c);
        return;
    }
    if (c->rq.state == RQ_IDLE && !c->stop && !c->held)
        px_timer_set(c, TM_IDLE, PX_IDLE_TIMEOUT_MS);
    /* a client pipelining far ahead waits for us */
    size_t pending = c->in.len - c->in_off;
    if (!c->read_paused && pending > c->w->p->max_body + 2 * PX_HEADER_MAX) {
        c->read_paused = 1;
        uv_read_stop((uv_stream_t *)&c->tcp);
    }
}

void px_conn_request_done(px_conn *c)
{
    if (c->closing)
        return;
    if (c->in_parser) {
        /* answered from inside the parser: the parse loop goes on */
        return;
    }
    if (c->read_paused && !c->finishing &&
        c->in.len - c->in_off <= c->w->p->max_body + 2 * PX_HEADER_MAX) {
        c->read_paused = 0;
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
            px_conn_close(c);
            return;
        }
    }
    conn_process(c, NULL, 0);
}

/* TLS: ciphertext in; the handshake, then each decrypted piece through
 * conn_process as plain input would go. A failed handshake or record
 * closes the connection (the alert, if any, is flushed first). The
 * handshake must finish within the header timeout set at accept. */
static void tls_input(px_conn *c, const char *data, size_t n)
{
    if (td__tls_feed(c->tls, data, n) != TD_OK) {
        px_conn_close(c);
        return;
    }
    if (!td__tls_handshake_done(c->tls)) {
        td_status st = td__tls_handshake(c->tls, NULL);
        if (st != TD_OK && st != TD_EAGAIN) {
            px_flush(c);
            px_conn_close(c);
            return;
        }
        if (px_flush(c) < 0 || st == TD_EAGAIN)
            return;
    }
    char plain[16 * 1024];
    while (!c->closing && !c->finishing) {
        size_t got = 0;
        td_status st = td__tls_read(c->tls, plain, sizeof plain, &got, NULL);
        if (st == TD_EAGAIN)
            break;
        if (st != TD_OK) {
            px_conn_close(c);
            return;
        }
        if (got == 0) { /* close_notify: as EOF */
            if (busy(c))
                px_conn_close(c);
            else
                conn_finish(c);
            return;
        }
        conn_process(c, plain, got);
    }
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    px_conn *c = st->data;
    if (c->closing || nread == 0)
        return;
    if (nread < 0) {
        if (nread != UV_EOF) {
            px_conn_close(c);
            return;
        }
        c->peer_eof = 1;
        uv_read_stop(st);
        if (busy(c)) {
            /* the client went away (or half-closed) while we work for
             * it: cancel, as nginx does by default */
            px_conn_close(c);
        } else if (c->finishing) {
            if (c->shut_done)
                px_conn_close(c);
        } else {
            conn_finish(c);
        }
        return;
    }
    if (c->finishing)
        return; /* lingering: discard */
    if (c->timer_mode == TM_BODY) {
        /* silence is bounded per read, the whole body in total */
        uint64_t spent = (px_now() - c->rq.t_body_start) / 1000000;
        uint64_t left = spent < PX_BODY_TOTAL_MS ? PX_BODY_TOTAL_MS - spent : 1;
        px_timer_set(c, TM_BODY, left < PX_BODY_TIMEOUT_MS ? left : PX_BODY_TIMEOUT_MS);
    }
    if (c->tls)
        tls_input(c, buf->base, (size_t)nread);
    else
        conn_process(c, buf->base, (size_t)nread);
}

static void on_connection(uv_stream_t *l, int status)
{
    px_worker *w = l->data;
    if (status < 0 || w->stopping)
        return;
    px_conn *c = calloc(1, sizeof *c);
    if (!c)
        return; /* out of memory: libuv stops accepting on this worker (a known gap) */
    c->w = w;
    td__buf_init(&c->in, SIZE_MAX / 2);
    td__buf_init(&c->out, SIZE_MAX / 2);
    td__buf_init(&c->rq.url, 2 * PX_HEADER_MAX + 4);
    td__buf_init(&c->rq.hdr, PX_HEADER_MAX + 2 * PX_MAX_HEADERS);
    td__buf_init(&c->rq.body, w->p->max_body);
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    uv_tcp_init(&w->loop, &c->tcp);
    uv_timer_init(&w->loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    c->open_handles = 2;
    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    w->n_conns++;
    if (uv_accept(l, (uv_stream_t *)&c->tcp) < 0) {
        px_conn_close(c);
        return;
    }
    struct sockaddr_storage ss;
    int slen = sizeof ss;
    int have_peer = uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &slen) == 0;
    /* accepted and closed at once when over a cap: the descriptor is
     * back before the next accept */
    if (px_conn_admit(c, have_peer ? (struct sockaddr *)&ss : NULL) < 0 ||
        (w->p->tls && td__tls_create(w->p->tls, 1, &c->tls, NULL) != TD_OK)) {
        px_conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    strcpy(c->peer, "unknown");
    if (have_peer) {
        if (ss.ss_family == AF_INET)
            uv_ip4_name((struct sockaddr_in *)&ss, c->peer, sizeof c->peer);
        else if (ss.ss_family == AF_INET6)
            uv_ip6_name((struct sockaddr_in6 *)&ss, c->peer, sizeof c->peer);
    }
    px_timer_set(c, TM_HEADER, PX_HEADER_TIMEOUT_MS);
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
        px_conn_close(c);
}

/* ---- workers ---- */

/* Every PX_METER_FLUSH_MS: the metering aggregates go to the ledger; every
 * second: idle routes are swept. */
static void on_tick(uv_timer_t *t)
{
    px_worker *w = t->data;
    /* connections that showed no valid key in time are owed nothing: closed
     * at once, not lingered on, so that their descriptors are back now */
    uint64_t now_ms = uv_now(&w->loop);
    px_conn *c;
    while ((c = px_conn_expired(w, now_ms)) != NULL)
        px_conn_close(c);
    if (++w->ticks % (1000 / PX_METER_FLUSH_MS) == 0)
        px_routes_sweep(w, px_now());
    if (!w->stopping)
        px_routes_check(w, px_now());
    if (w->p->ledger)
        px_meter_flush(w);
}

static void on_log_check(uv_check_t *h)
{
    px_worker *w = h->data;
    if (w->log.len)
        px_log_flush(w);
}

static void noop_close(uv_handle_t *h)
{
    (void)h;
}

/* Closes everything on the worker's loop; the loop then runs dry. */
static void worker_stop_now(px_worker *w)
{
    if (w->stopping)
        return;
    w->stopping = 1;
    uv_handle_t *hs[] = {(uv_handle_t *)&w->listener, (uv_handle_t *)&w->tick,
                         (uv_handle_t *)&w->log_check, (uv_handle_t *)&w->stop_async};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        if (hs[i]->loop == &w->loop && !uv_is_closing(hs[i]))
            uv_close(hs[i], noop_close);
    for (px_conn *c = w->conns; c; c = c->next)
        px_conn_close(c);
    px_routes_shutdown(w);
    if (w->log.len)
        px_log_flush(w);
    if (w->p->ledger)
        px_meter_flush(w);
}

static void on_stop_async(uv_async_t *a)
{
    worker_stop_now(a->data);
}

static void worker_cleanup(px_worker *w)
{
    if (w->loop_ok) {
        uv_run(&w->loop, UV_RUN_DEFAULT);
        if (w->p->ledger)
            px_meter_flush(w); /* requests that ended while the loop ran dry */
        px_routes_free(w);
        if (w->log.len)
            px_log_flush(w);
        uv_loop_close(&w->loop);
        w->loop_ok = 0;
    }
    if (w->cfg_cur) {
        td_gw_config_unref(w->cfg_cur->c);
        free(w->cfg_cur);
        w->cfg_cur = NULL;
    }
    while (w->cfg_old) {
        px_cfg *n = w->cfg_old->next;
        td_gw_config_unref(w->cfg_old->c);
        free(w->cfg_old);
        w->cfg_old = n;
    }
    td_gw_config_unref(w->held);
    w->held = NULL;
    td__buf_fini(&w->log);
    td__buf_fini(&w->up_head);
}

static void *worker_main(void *arg)
{
    px_worker *w = arg;
    uv_run(&w->loop, UV_RUN_DEFAULT);
    worker_cleanup(w);
    return NULL;
}

static void set_port(struct sockaddr_storage *ss, int port)
{
    if (ss->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
}

/* A listening socket on ss with SO_REUSEPORT, so that every worker can
 * have its own. -1 with errno on failure. */
static int listen_socket(const struct sockaddr_storage *ss, socklen_t alen)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0 ||
        bind(fd, (const struct sockaddr *)ss, alen) < 0 || listen(fd, BACKLOG) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* The open-file limit less the reserve (proxy_internal.h): every client
 * connection is a descriptor, and one more than the process may open is
 * refused by the kernel for every listener at once. */
static size_t conn_limit_now(void)
{
    struct rlimit rl;
    uint64_t nofile = 1024; /* unknown: the usual soft limit */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        nofile = rl.rlim_cur == RLIM_INFINITY ? (uint64_t)1 << 20 : (uint64_t)rl.rlim_cur;
    uint64_t reserve = nofile / 4 > PX_FD_RESERVE_MIN ? nofile / 4 : PX_FD_RESERVE_MIN;
    return nofile > reserve + 16 ? (size_t)(nofile - reserve) : 16;
}

static void ignore_sigpipe(void)
{
    struct sigaction sa;
    if (sigaction(SIGPIPE, NULL, &sa) == 0 && !(sa.sa_flags & SA_SIGINFO) &&
        sa.sa_handler == SIG_DFL) {
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_IGN;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGPIPE, &sa, NULL);
    }
}

/* Sets up w's loop and handles around its listening socket (adopted). */
static td_status worker_init(px_worker *w, td_err *err)
{
    if (uv_loop_init(&w->loop) < 0) {
        close(w->fd);
        w->fd = -1;
        return td_err_set(err, TD_EIO, "worker %u: cannot create its event loop", w->index);
    }
    w->loop_ok = 1;
    uv_tcp_init(&w->loop, &w->listener);
    w->listener.data = w;
    int rc = uv_tcp_open(&w->listener, w->fd);
    if (rc < 0)
        close(w->fd);
    w->fd = -1;
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&w->listener, BACKLOG, on_connection);
    uv_async_init(&w->loop, &w->stop_async, on_stop_async);
    w->stop_async.data = w;
    uv_timer_init(&w->loop, &w->tick);
    w->tick.data = w;
    uv_timer_start(&w->tick, on_tick, 0, PX_METER_FLUSH_MS); /* at once: DNS routes warm up */
    uv_check_init(&w->loop, &w->log_check);
    w->log_check.data = w;
    if (w->p->access_log)
        uv_check_start(&w->log_check, on_log_check);
    if (rc < 0)
        return td_err_set(err, TD_EIO, "worker %u: cannot listen: %s", w->index, uv_strerror(rc));
    return TD_OK;
}

td_status td_proxy_start(td_gateway *g, const td_proxy_opts *o, td_proxy **out, td_err *err)
{
    if (!g || !o || !out)
        return td_err_set(err, TD_EINVAL, "td_proxy_start: gateway, options and out needed");
    if (o->workers < 1 || o->workers > MAX_WORKERS)
        return td_err_set(err, TD_EINVAL, "workers must be from 1 to %u", MAX_WORKERS);
    struct sockaddr_storage ss;
    socklen_t alen = 0;
    td_status st = td__listen_addr_parse(o->listen, &ss, &alen, err);
    if (st != TD_OK)
        return st;
    td_proxy *p = calloc(1, sizeof *p);
    if (!p || !(p->workers = calloc(o->workers, sizeof *p->workers))) {
        free(p);
        return td_err_set(err, TD_ENOMEM, "out of memory starting the gateway");
    }
    p->g = g;
    p->limiter = td_gateway_limiter(g);
    p->metrics = td_gateway_metrics(g);
    p->shared = td_gateway_shared(g);
    p->access_log = o->access_log;
    p->max_body = o->max_body ? o->max_body : DEFAULT_MAX_BODY;
    p->ledger = o->ledger;
    snprintf(p->replica_id, sizeof p->replica_id, "%s", o->replica_id ? o->replica_id : "gw");
    if (o->tls) {
        SSL_CTX_up_ref(o->tls);
        p->tls = o->tls;
    }
    p->nworkers = o->workers;
    p->unauth_per_addr = o->unauth_per_addr == 0  ? PX_UNAUTH_PER_ADDR
                         : o->unauth_per_addr < 0 ? 0
                                                  : (unsigned)o->unauth_per_addr;
    p->auth_timeout_ms = PX_AUTH_TIMEOUT_MS;
    if (o->flood)
        p->flood = *o->flood;
    else
        td_flood_opts_default(&p->flood);
    p->conn_limit = conn_limit_now();
    td_metrics_conn_limit(p->metrics, p->conn_limit);
    /* each worker holds its share: a worker never looks at another's
     * connections (the price, as for the queue split above: with an
     * uneven spread one worker may refuse while another has room) */
    size_t share = p->conn_limit / o->workers;
    if (share < 1)
        share = 1;
    if (share > PX_MAX_CONNS)
        share = PX_MAX_CONNS;
    if (px_addrs_create(&p->addrs) != TD_OK) {
        free(p->workers);
        free(p);
        return td_err_set(err, TD_ENOMEM, "out of memory starting the gateway");
    }
    for (unsigned i = 0; i < o->workers; i++) {
        px_worker *w = calloc(1, sizeof *w);
        if (w)
            w->routes = calloc(TD_GW_MAX_ROUTES, sizeof *w->routes);
        if (!w || !w->routes) {
            free(w);
            td_proxy_stop(p);
            return td_err_set(err, TD_ENOMEM, "out of memory starting the gateway");
        }
        w->p = p;
        w->index = i;
        w->fd = -1;
        w->max_open = share;
        td__buf_init(&w->log, (size_t)64 << 20);
        td__buf_init(&w->up_head, PX_UP_HEAD_MAX);
        p->workers[i] = w;
        p->nworkers = i + 1;
    }
    p->nworkers = o->workers;
    /* SO_REUSEPORT would let a second tenantd on the same port share it
     * silently; a probe bound without it fails if anyone holds the port. */
    if (ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port != 0
                                 : ((struct sockaddr_in *)&ss)->sin_port != 0) {
        int probe = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        if (probe >= 0)
            setsockopt(probe, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (probe < 0 || bind(probe, (struct sockaddr *)&ss, alen) < 0) {
            int e = errno;
            if (probe >= 0)
                close(probe);
            td_proxy_stop(p);
            return td_err_set(err, TD_EIO, "cannot listen on %s: %s", o->listen, strerror(e));
        }
        close(probe);
    }
    /* All sockets first, so a busy port fails before any thread exists.
     * Port 0: the first socket picks one, the others take the same. */
    for (unsigned i = 0; i < o->workers; i++) {
        int fd = listen_socket(&ss, alen);
        if (fd < 0) {
            int e = errno;
            td_proxy_stop(p);
            return td_err_set(err, TD_EIO, "cannot listen on %s: %s", o->listen, strerror(e));
        }
        p->workers[i]->fd = fd;
        if (i == 0) {
            struct sockaddr_storage bound;
            socklen_t blen = sizeof bound;
            if (getsockname(fd, (struct sockaddr *)&bound, &blen) < 0) {
                int e = errno;
                td_proxy_stop(p);
                return td_err_set(err, TD_EIO, "cannot listen on %s: %s", o->listen, strerror(e));
            }
            p->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                        : ((struct sockaddr_in *)&bound)->sin_port);
            set_port(&ss, p->port);
        }
    }
    ignore_sigpipe();
    for (unsigned i = 0; i < o->workers; i++) {
        if (worker_init(p->workers[i], err) != TD_OK) {
            td_proxy_stop(p);
            return TD_EIO;
        }
    }
    if (px_views_start(p) != TD_OK) {
        td_proxy_stop(p);
        return td_err_set(err, TD_ENOMEM, "out of memory starting the gateway");
    }
    /* Signals go to the daemon's main thread, not to a worker. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    for (unsigned i = 0; i < o->workers; i++) {
        px_worker *w = p->workers[i];
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            td_proxy_stop(p);
            return td_err_set(err, TD_EIO, "cannot start gateway worker thread %u", i);
        }
        w->thread_started = 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    *out = p;
    return TD_OK;
}

int td_proxy_port(const td_proxy *p)
{
    return p ? p->port : 0;
}

size_t td_proxy_conn_limit(const td_proxy *p)
{
    return p ? p->conn_limit : 0;
}

void td_proxy_stop(td_proxy *p)
{
    if (!p)
        return;
    px_views_unhook(p);
    for (unsigned i = 0; i < p->nworkers; i++) {
        px_worker *w = p->workers[i];
        if (w && w->thread_started)
            uv_async_send(&w->stop_async);
    }
    for (unsigned i = 0; i < p->nworkers; i++) {
        px_worker *w = p->workers[i];
        if (!w)
            continue;
        if (w->thread_started) {
            pthread_join(w->thread, NULL);
        } else {
            if (w->loop_ok)
                worker_stop_now(w);
            worker_cleanup(w);
        }
        if (w->fd >= 0)
            close(w->fd);
        free(w->routes);
        free(w);
    }
    free(p->workers);
    px_views_free(p);
    SSL_CTX_free(p->tls);
    px_addrs_destroy(p->addrs);
    free(p);
}
