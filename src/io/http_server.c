/* http_server.c - tenantd's HTTP/1.1 server on a libuv loop: keep-alive,
 * pipelining, idle timeouts, optional TLS through tls.c; requests are read
 * by hreq.c (limits, chunked bodies). The request processing
 * (td__http_conn) knows nothing of sockets, so the unit tests and
 * the fuzzer drive it with plain buffers. Responses after the first of a
 * loop iteration are written together at its end (queue_flush): one
 * wake-up of the client per batch rather than one per response. */
#include "io/http_server.h"

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <openssl/ssl.h>

#include "io/http_internal.h"

/* ---- request processing ---- */

#define OUT_MAX ((size_t)1 << 30)
/* Input read behind a deferred request: at most one read's worth (64 KiB,
 * or a TLS record's plaintext) each time, as reading stops meanwhile. */
#define PENDING_IN_MAX ((size_t)1 << 20)

static void buf_clear(td__buf *b)
{
    td__buf_clear(b, 64 * 1024);
}

static int on_head(td_hreq *r, void *user);
static int on_request(td_hreq *r, void *user);

static const td_hreq_callbacks reader_callbacks = {.on_head = on_head, .on_request = on_request};

void td__http_conn_init(td__http_conn *c, size_t max_body, td_http_handler h, void *user)
{
    memset(c, 0, sizeof *c);
    td_hreq_limits lim = {.max_url = TD_HTTP_MAX_HEADER_BYTES,
                          .max_header_bytes = TD_HTTP_MAX_HEADER_BYTES,
                          .max_headers = TD_HTTP_MAX_HEADERS,
                          .max_body = max_body};
    td_hreq_init(&c->rq, &lim, &reader_callbacks, c);
    c->max_body = max_body;
    c->handler = h;
    c->user = user;
    td__buf_init(&c->out, OUT_MAX);
    td__buf_init(&c->pending_in, PENDING_IN_MAX);
}

void td__http_conn_fini(td__http_conn *c)
{
    td_hreq_fini(&c->rq);
    td__buf_fini(&c->out);
    td__buf_fini(&c->pending_in);
}

/* curl sends Expect for larger bodies and waits a second for this unless
 * it comes. */
static int on_head(td_hreq *r, void *user)
{
    td__http_conn *c = user;
    if (r->expect_continue) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (td__buf_append(&c->out, cont, sizeof cont - 1) != TD_OK)
            return 503;
    }
    return 0;
}

static const char *reason_phrase(int status)
{
    const char *r = http_status_str((enum http_status)status);
    if (!r || r[0] == '<') {
        switch (status / 100) {
        case 2:
            return "OK";
        case 3:
            return "Redirection";
        case 4:
            return "Client Error";
        default:
            return "Server Error";
        }
    }
    return r;
}

static const char *date_header(td__http_conn *c)
{
    time_t now = time(NULL);
    if (now != c->date_sec || !c->date[0]) {
        struct tm tm;
        c->date_sec = now;
        if (!gmtime_r(&now, &tm) ||
            strftime(c->date, sizeof c->date, "%a, %d %b %Y %H:%M:%S GMT", &tm) == 0)
            c->date[0] = '\0';
    }
    return c->date;
}

/* Appends one complete response to c->out, or none: on failure out keeps
 * only the responses before this one, and the connection is to close. */
static void write_response(td__http_conn *c, int status, const char *content_type, const char *body,
                           size_t body_len, const char *extra, int keep, int http10, int head)
{
    size_t mark = c->out.len;
    td_status st;
    const char *date = date_header(c);
    int no_body = status == 204 || status == 304;

    /* Built with appends, not td__buf_printf: the webhook answers tens of
     * thousands of reviews a second on one loop. Same bytes as before. */
    char num[24], *d = num + sizeof num;
    unsigned code = status < 0 ? 0u : (unsigned)status;
    do
        *--d = (char)('0' + code % 10);
    while (code /= 10);
    const char *why = reason_phrase(status);
    st = td__buf_append(&c->out, "HTTP/1.1 ", 9);
    if (st == TD_OK)
        st = td__buf_append(&c->out, d, (size_t)(num + sizeof num - d));
    if (st == TD_OK)
        st = td__buf_append(&c->out, " ", 1);
    if (st == TD_OK)
        st = td__buf_append(&c->out, why, strlen(why));
    if (st == TD_OK)
        st = td__buf_append(&c->out, "\r\n", 2);
    if (st == TD_OK && date[0]) {
        st = td__buf_append(&c->out, "Date: ", 6);
        if (st == TD_OK)
            st = td__buf_append(&c->out, date, strlen(date));
        if (st == TD_OK)
            st = td__buf_append(&c->out, "\r\n", 2);
    }
    if (st == TD_OK && content_type) {
        st = td__buf_append(&c->out, "Content-Type: ", 14);
        if (st == TD_OK)
            st = td__buf_append(&c->out, content_type, strlen(content_type));
        if (st == TD_OK)
            st = td__buf_append(&c->out, "\r\n", 2);
    }
    if (st == TD_OK && status != 204) {
        size_t len = no_body ? 0 : body_len;
        d = num + sizeof num;
        do
            *--d = (char)('0' + len % 10);
        while (len /= 10);
        st = td__buf_append(&c->out, "Content-Length: ", 16);
        if (st == TD_OK)
            st = td__buf_append(&c->out, d, (size_t)(num + sizeof num - d));
        if (st == TD_OK)
            st = td__buf_append(&c->out, "\r\n", 2);
    }
    if (st == TD_OK && !keep)
        st = td__buf_append(&c->out, "Connection: close\r\n", 19);
    else if (st == TD_OK && http10)
        st = td__buf_append(&c->out, "Connection: keep-alive\r\n", 24);
    if (st == TD_OK && extra && extra[0]) {
        size_t n = strlen(extra);
        st = td__buf_append(&c->out, extra, n);
        if (st == TD_OK && (n < 2 || extra[n - 2] != '\r' || extra[n - 1] != '\n'))
            st = td__buf_append(&c->out, "\r\n", 2);
    }
    if (st == TD_OK)
        st = td__buf_append(&c->out, "\r\n", 2);
    if (st == TD_OK && !head && !no_body && body_len)
        st = td__buf_append(&c->out, body, body_len);
    if (st != TD_OK) {
        c->out.len = mark;
        if (c->out.p)
            c->out.p[mark] = '\0';
        c->stop = 1;
        c->close_after = 1;
    }
}

/* Answers a request the parser or a limit rejected, and ends the
 * connection: after a broken request the stream cannot be resynchronised. */
static void write_error(td__http_conn *c, int status)
{
    char body[64];
    int n = snprintf(body, sizeof body, "%s\n", reason_phrase(status));
    write_response(c, status, "text/plain; charset=utf-8", body, (size_t)n, NULL, 0, 0, 0);
    c->stop = 1;
    c->close_after = 1;
}

/* Splits the request target into path and query in place. */
static void split_target(char *url, const char **path, const char **query)
{
    char *hash = strchr(url, '#');
    if (hash)
        *hash = '\0';
    char *q = strchr(url, '?');
    if (q) {
        *q = '\0';
        *query = q + 1;
    } else {
        *query = "";
    }
    *path = url;
    if (url[0] != '/') {
        /* absolute-form "http://host/path": keep only the path */
        char *scheme_end = strstr(url, "://");
        if (scheme_end) {
            char *slash = strchr(scheme_end + 3, '/');
            *path = slash ? slash : "/";
        }
    }
}

static void dispatch(td__http_conn *c)
{
    td_hreq *r = &c->rq;
    td_http_header_field *fields = NULL;
    int head = r->method == HTTP_HEAD;
    int keep = r->keep_alive;
    int http10 = r->http_major == 1 && r->http_minor == 0;

    const td__hdrs *h = &r->hdrs;
    if (h->n) {
        fields = malloc(h->n * sizeof *fields);
        if (!fields) {
            write_error(c, 503);
            return;
        }
        for (size_t i = 0; i < h->n; i++) {
            fields[i].name = h->buf.p + h->ix[i].name_off;
            fields[i].value = h->buf.p + h->ix[i].value_off;
        }
    }
    td_http_request req = {
        .method = td_hreq_method(r),
        .version_major = r->http_major,
        .version_minor = r->http_minor,
        .headers = fields,
        .n_headers = h->n,
        .body = r->body.p ? r->body.p : "",
        .body_len = r->body.len,
    };
    split_target(r->url.p, &req.path, &req.query);

    td_http_response resp = {0};
    c->handler(&req, &resp, c->user);
    free(fields);
    if (c->defer_asked) {
        /* answered by td__http_conn_resume; the handler copied what it
         * needs of req */
        c->defer_asked = 0;
        c->deferred = 1;
        c->later_keep = keep;
        c->later_http10 = http10;
        c->later_head = head;
        free(resp.body);
        return;
    }

    int status = resp.status;
    const char *body = resp.body;
    size_t body_len = body ? resp.body_len : 0;
    if (status < 200 || status > 599) {
        status = 500;
        body = NULL;
        body_len = 0;
    }
    /* the handler may have stopped the server */
    if (c->stop)
        keep = 0;
    write_response(c, status, resp.content_type, body, body_len, resp.extra_headers, keep, http10,
                   head);
    free(resp.body);
    if (!keep) {
        c->stop = 1;
        c->close_after = 1;
    }
}

/* The reader's request callback: answer it, and pause the reader when
 * the answer comes later or the connection ends. */
static int on_request(td_hreq *r, void *user)
{
    td__http_conn *c = user;
    (void)r;
    if (!c->stop)
        dispatch(c);
    return c->stop || c->deferred;
}

/* Keeps input that arrived behind a deferred request for its resumption;
 * more than PENDING_IN_MAX (a client that goes on sending while reading
 * has stopped cannot) ends the connection after the deferred answer. */
static void keep_pending(td__http_conn *c, const char *data, size_t n)
{
    if (n && td__buf_append(&c->pending_in, data, n) != TD_OK)
        c->later_keep = 0;
}

void td__http_conn_feed(td__http_conn *c, const char *data, size_t n)
{
    if (c->stop || n == 0)
        return;
    if (c->deferred) {
        keep_pending(c, data, n);
        return;
    }
    size_t used = td_hreq_feed(&c->rq, data, n);
    switch (td_hreq_status(&c->rq)) {
    case TD_HREQ_MORE:
        break;
    case TD_HREQ_PAUSED:
        if (c->deferred && !c->stop) {
            keep_pending(c, data + used, n - used);
        } else {
            c->stop = 1;
            c->close_after = 1;
        }
        break;
    case TD_HREQ_ERROR:
        write_error(c, c->rq.err_status);
        break;
    case TD_HREQ_UPGRADE:
        /* what follows is a protocol we do not speak */
        c->stop = 1;
        c->close_after = 1;
        break;
    }
}

void td__http_conn_defer(td__http_conn *c)
{
    c->defer_asked = 1;
}

void td__http_conn_resume(td__http_conn *c, td_http_response *resp)
{
    if (!c->deferred) {
        free(resp->body);
        return;
    }
    c->deferred = 0;
    int keep = c->later_keep && !c->stop;
    int status = resp->status;
    const char *body = resp->body;
    size_t body_len = body ? resp->body_len : 0;
    if (status < 200 || status > 599) {
        status = 500;
        body = NULL;
        body_len = 0;
    }
    write_response(c, status, resp->content_type, body, body_len, resp->extra_headers, keep,
                   c->later_http10, c->later_head);
    free(resp->body);
    resp->body = NULL;
    if (!keep || c->stop) {
        c->stop = 1;
        c->close_after = 1;
        return;
    }
    td_hreq_resume(&c->rq);
    size_t n;
    char *in = td__buf_take(&c->pending_in, &n);
    if (in)
        td__http_conn_feed(c, in, n);
    free(in);
}

td_status td__http_serve_pieces(const char *const *pieces, const size_t *lens, size_t n_pieces,
                                size_t max_body, td_http_handler h, void *user, char **out,
                                size_t *out_len, int *closes)
{
    td__http_conn c;
    td__buf all;
    td_status st = TD_OK;
    td__http_conn_init(&c, max_body, h, user);
    td__buf_init(&all, SIZE_MAX);
    for (size_t i = 0; i < n_pieces && !c.stop && st == TD_OK; i++) {
        td__http_conn_feed(&c, pieces[i], lens[i]);
        st = td__buf_append(&all, c.out.p ? c.out.p : "", c.out.len);
        buf_clear(&c.out);
    }
    if (st == TD_OK)
        st = td__buf_append(&all, c.out.p ? c.out.p : "", c.out.len);
    int close = c.close_after || c.stop;
    td__http_conn_fini(&c);
    if (st != TD_OK) {
        td__buf_fini(&all);
        return st;
    }
    if (!all.p && td__buf_append(&all, "", 0) != TD_OK)
        return TD_ENOMEM;
    *out = td__buf_take(&all, out_len);
    *closes = close;
    return TD_OK;
}

const char *td_http_header(const td_http_request *req, const char *name)
{
    for (size_t i = 0; i < req->n_headers; i++)
        if (strcasecmp(req->headers[i].name, name) == 0)
            return req->headers[i].value;
    return NULL;
}

/* ---- the libuv server ---- */

#define READ_BUF_SIZE (64 * 1024)
#define WRITE_HIGH    ((size_t)4 << 20) /* stop reading while more is unsent */
#define LINGER_MS     2000              /* drain a closing client this long */
#define MAX_CONNS     4096
/* Output held for the end-of-iteration flush beyond this is written at
 * once: batching saves wake-ups, not memory. */
#define FLUSH_HOLD    ((size_t)64 << 10)

typedef struct conn conn;

struct td_http_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    SSL_CTX *tls; /* our reference, or NULL */
    size_t max_body;
    td_http_handler handler;
    void *user;
    uint64_t idle_ms;
    int port;
    conn *conns;
    size_t n_conns;
    conn *zombies;     /* closed while a deferral was out; freed on its return */
    conn *dispatching; /* the connection whose input is being processed */
    /* Connections with output not yet handed to the kernel, written by
     * flush_check at the end of the loop iteration (see queue_flush). */
    uv_check_t flush_check;
    conn *flush_head, *flush_tail;
    int wrote_this_iter; /* a response went out since flush_check last ran */
    int stopping;
    int listener_closed;
    int check_closed;
    void (*done)(void *);
    void *done_arg;
    /* Every read on the loop is consumed before the next starts, so one
     * buffer serves all connections. */
    char rbuf[READ_BUF_SIZE];
};

struct conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_shutdown_t shutdown_req;
    td_http_server *srv;
    conn *prev, *next;
    conn *fprev, *fnext; /* on srv's flush list while flush_queued */
    int flush_queued;
    td__http_conn core;
    td__tls *tls;
    int open_handles;
    int closing;   /* uv_close called */
    int finishing; /* no more requests; shutting down the write side */
    int shut_done; /* our FIN has been sent */
    int peer_eof;  /* the client will send nothing more */
    int read_paused;
    int tls_failed;
    int refs;   /* deferrals out (td__http_server_defer); loop thread only */
    int zombie; /* closed, on srv->zombies until refs drops to 0 */
    unsigned long begun_seen; /* core.begun when req_start_ms was taken */
    uint64_t req_start_ms;    /* loop time the current request began */
};

typedef struct {
    uv_write_t req;
    conn *c;
    char *data;
} write_req;

static void maybe_done(td_http_server *s)
{
    if (!s->stopping || !s->listener_closed || !s->check_closed || s->conns)
        return;
    /* no deferral returns once the server has stopped (http_multi.c) */
    while (s->zombies) {
        conn *z = s->zombies;
        s->zombies = z->next;
        free(z);
    }
    void (*done)(void *) = s->done;
    void *arg = s->done_arg;
    SSL_CTX_free(s->tls);
    free(s);
    if (done)
        done(arg);
}

static void on_conn_closed(uv_handle_t *h)
{
    conn *c = h->data;
    if (--c->open_handles > 0)
        return;
    td_http_server *s = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->n_conns--;
    td__http_conn_fini(&c->core);
    td__tls_destroy(c->tls);
    c->tls = NULL;
    if (c->refs > 0) {
        /* a handler on another thread still answers it: kept until then */
        c->zombie = 1;
        c->prev = NULL;
        c->next = s->zombies;
        if (s->zombies)
            s->zombies->prev = c;
        s->zombies = c;
    } else {
        free(c);
    }
    maybe_done(s);
}

static void unqueue_flush(conn *c)
{
    if (!c->flush_queued)
        return;
    td_http_server *s = c->srv;
    if (c->fprev)
        c->fprev->fnext = c->fnext;
    else
        s->flush_head = c->fnext;
    if (c->fnext)
        c->fnext->fprev = c->fprev;
    else
        s->flush_tail = c->fprev;
    c->fprev = c->fnext = NULL;
    c->flush_queued = 0;
}

static void conn_close(conn *c)
{
    if (c->closing)
        return;
    unqueue_flush(c);
    c->closing = 1;
    c->core.stop = 1;
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
    uv_close((uv_handle_t *)&c->timer, on_conn_closed);
}

static int flush(conn *c);
static void conn_finish(conn *c);

static void on_timer(uv_timer_t *t)
{
    conn *c = t->data;
    if (c->core.deferred && !c->closing && !c->finishing) {
        /* waiting for its answer is not idleness */
        uv_timer_start(&c->timer, on_timer, c->srv->idle_ms, 0);
        return;
    }
    if (!c->closing && !c->finishing && c->core.rq.in_request && !c->core.stop &&
        (!c->tls || td__tls_handshake_done(c->tls))) {
        /* a request begun and not complete in time (slowloris): 408 */
        write_error(&c->core, 408);
        if (flush(c) == 0)
            conn_finish(c);
        else
            conn_close(c);
        return;
    }
    conn_close(c);
}

/* Arms the connection's timer: the idle timeout, or sooner the deadline of
 * a request in progress (its headers within TD_HTTP_HEADER_TIMEOUT_MS, all
 * of it within TD_HTTP_REQUEST_TIMEOUT_MS), so that a client dribbling a
 * byte now and then cannot hold a connection forever. */
static void restart_idle(conn *c)
{
    if (c->closing || c->finishing)
        return;
    uint64_t ms = c->srv->idle_ms;
    if (c->core.rq.in_request) {
        uint64_t now = uv_now(c->srv->loop);
        if (c->begun_seen != c->core.rq.begun) {
            c->begun_seen = c->core.rq.begun;
            c->req_start_ms = now;
        }
        uint64_t end = c->req_start_ms + (c->core.rq.headers_done ? TD_HTTP_REQUEST_TIMEOUT_MS
                                                               : TD_HTTP_HEADER_TIMEOUT_MS);
        uint64_t left = end > now ? end - now : 1;
        if (left < ms)
            ms = left;
    }
    uv_timer_start(&c->timer, on_timer, ms, 0);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    conn *c = h->data;
    (void)suggested;
    *buf = uv_buf_init(c->srv->rbuf, sizeof c->srv->rbuf);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

/* Reads again on a connection paused for a deferred answer or a full
 * write queue, once neither holds. */
static void resume_reading(conn *c)
{
    if (c->read_paused && !c->finishing && !c->core.deferred &&
        uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) < WRITE_HIGH / 2) {
        c->read_paused = 0;
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
            conn_close(c);
    }
}

static void on_write(uv_write_t *req, int status)
{
    write_req *w = (write_req *)req;
    conn *c = w->c;
    free(w->data);
    free(w);
    if (c->closing)
        return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    restart_idle(c);
    resume_reading(c);
}

/* Writes data (n bytes, taken over) to the client. 0, or -1 on failure. */
static int send_bytes(conn *c, char *data, size_t n)
{
    if (n == 0) {
        free(data);
        return 0;
    }
    size_t off = 0;
    if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) == 0) {
        /* Nothing queued: write now. A response that fits the socket
         * buffer needs no write request, and libuv's queue drained after
         * one costs an epoll_ctl per response. */
        uv_buf_t now = uv_buf_init(data, (unsigned int)n);
        int w = uv_try_write((uv_stream_t *)&c->tcp, &now, 1);
        if (w == (int)n) {
            free(data);
            return 0;
        }
        if (w > 0)
            off = (size_t)w;
        else if (w != UV_EAGAIN && w != UV_ENOSYS) {
            free(data);
            return -1;
        }
    }
    write_req *w = malloc(sizeof *w);
    if (!w) {
        free(data);
        return -1;
    }
    w->c = c;
    w->data = data;
    uv_buf_t b = uv_buf_init(data + off, (unsigned int)(n - off));
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write) < 0) {
        free(data);
        free(w);
        return -1;
    }
    return 0;
}

static int send_tls_output(conn *c)
{
    size_t pending = td__tls_out_pending(c->tls);
    if (pending == 0)
        return 0;
    char *data = malloc(pending);
    if (!data)
        return -1;
    size_t n = td__tls_out(c->tls, data, pending);
    return send_bytes(c, data, n);
}

/* Hands the responses the core produced (and TLS records) to libuv. */
static int flush(conn *c)
{
    if (c->closing)
        return -1;
    if (!c->tls) {
        size_t n;
        char *data = td__buf_take(&c->core.out, &n);
        return send_bytes(c, data, n);
    }
    if (c->core.out.len) {
        td_status st = td__tls_write(c->tls, c->core.out.p, c->core.out.len, NULL);
        buf_clear(&c->core.out);
        if (st != TD_OK)
            return -1;
    }
    return send_tls_output(c);
}

/* Stops reading from a client that pipelines without reading its
 * responses, once more than WRITE_HIGH waits in the kernel's stead. */
static void pause_if_backed_up(conn *c)
{
    if (!c->read_paused && !c->finishing && !c->closing &&
        uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > WRITE_HIGH) {
        c->read_paused = 1;
        uv_read_stop((uv_stream_t *)&c->tcp);
    }
}

/* Holds c's output until the end of the loop iteration, so that the
 * responses to every connection readable in one epoll batch are written
 * back to back: the client is woken once for the batch rather than once
 * per response, and later writes find it running. */
static void queue_flush(conn *c)
{
    td_http_server *s = c->srv;
    if (c->flush_queued)
        return;
    c->flush_queued = 1;
    c->fnext = NULL;
    c->fprev = s->flush_tail;
    if (s->flush_tail)
        s->flush_tail->fnext = c;
    else
        s->flush_head = c;
    s->flush_tail = c;
}

static void on_flush_check(uv_check_t *h)
{
    td_http_server *s = h->data;
    s->wrote_this_iter = 0;
    while (s->flush_head) {
        conn *c = s->flush_head;
        unqueue_flush(c);
        if (flush(c) < 0)
            conn_close(c);
        else
            pause_if_backed_up(c);
    }
}

static void on_check_closed(uv_handle_t *h)
{
    td_http_server *s = h->data;
    s->check_closed = 1;
    maybe_done(s);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    conn *c = req->data;
    if (c->closing)
        return;
    c->shut_done = 1;
    if (status < 0 || c->peer_eof) {
        conn_close(c);
        return;
    }
    /* Closing with unread input makes the kernel send RST, which can
     * destroy the response before the client reads it: drain a while. */
    uv_timer_start(&c->timer, on_timer, LINGER_MS, 0);
    if (c->read_paused) {
        c->read_paused = 0;
        if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
            conn_close(c);
    }
}

/* Ends the connection after what has been queued is written. */
static void conn_finish(conn *c)
{
    if (c->finishing || c->closing)
        return;
    if (c->flush_queued) {
        unqueue_flush(c);
        if (flush(c) < 0) {
            conn_close(c);
            return;
        }
    }
    c->finishing = 1;
    c->core.stop = 1;
    if (c->tls && !c->tls_failed && td__tls_handshake_done(c->tls)) {
        td__tls_shutdown(c->tls);
        if (send_tls_output(c) < 0) {
            conn_close(c);
            return;
        }
    }
    c->shutdown_req.data = c;
    if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, on_shutdown) < 0)
        conn_close(c);
}

static void tls_drain(conn *c);

static void tls_input(conn *c, const char *data, size_t n)
{
    if (td__tls_feed(c->tls, data, n) != TD_OK) {
        c->tls_failed = 1;
        c->core.stop = 1;
        return;
    }
    if (!td__tls_handshake_done(c->tls)) {
        td_status st = td__tls_handshake(c->tls, NULL);
        if (st == TD_EAGAIN)
            return;
        if (st != TD_OK) {
            /* the alert is in the TLS output; flush sends it */
            c->tls_failed = 1;
            c->core.stop = 1;
            return;
        }
    }
    tls_drain(c);
}

/* Decrypts and processes what OpenSSL holds, until a request is deferred
 * (the rest stays in OpenSSL for later) or nothing is left. */
static void tls_drain(conn *c)
{
    char plain[16 * 1024];
    while (!c->core.stop && !c->core.deferred) {
        size_t got = 0;
        td_status st = td__tls_read(c->tls, plain, sizeof plain, &got, NULL);
        if (st == TD_EAGAIN)
            break;
        if (st != TD_OK) {
            c->tls_failed = 1;
            c->core.stop = 1;
            break;
        }
        if (got == 0) { /* close_notify */
            c->core.stop = 1;
            break;
        }
        td__http_conn_feed(&c->core, plain, got);
    }
}

/* After the handler ran on c's input or took a deferred answer: the idle
 * timer restarted, what it queued written, a stopping connection
 * finished. false if c is closing or finishing (nothing more to do). */
static bool after_dispatch(conn *c)
{
    c->srv->dispatching = NULL;
    if (c->closing)
        return false; /* the handler stopped the server */
    restart_idle(c);
    td_http_server *s = c->srv;
    /* The iteration's first response goes out at once (a lone request
     * waits for nothing); the rest wait for flush_check. A connection that
     * ends, or has much output, is written now. */
    if (!s->wrote_this_iter || c->core.stop || c->core.out.len >= FLUSH_HOLD) {
        unqueue_flush(c);
        s->wrote_this_iter = 1;
        if (flush(c) < 0) {
            conn_close(c);
            return false;
        }
    } else {
        queue_flush(c);
    }
    if (c->core.stop) {
        conn_finish(c);
        return false;
    }
    return true;
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    conn *c = st->data;
    if (c->closing || nread == 0)
        return;
    if (nread < 0) {
        if (nread != UV_EOF) {
            conn_close(c);
            return;
        }
        c->peer_eof = 1;
        uv_read_stop(st);
        if (!c->finishing)
            conn_finish(c); /* a half-closed client still gets its responses */
        else if (c->shut_done)
            conn_close(c);
        return;
    }
    if (c->finishing)
        return; /* lingering: discard */
    td_http_server *s = c->srv;
    s->dispatching = c;
    if (c->tls)
        tls_input(c, buf->base, (size_t)nread);
    else
        td__http_conn_feed(&c->core, buf->base, (size_t)nread);
    if (!after_dispatch(c))
        return;
    if (c->core.deferred || uv_stream_get_write_queue_size(st) > WRITE_HIGH) {
        /* a request waits for its answer, or a client pipelines without
         * reading its responses */
        c->read_paused = 1;
        uv_read_stop(st);
    }
}

td__http_later *td__http_server_defer(td_http_server *s)
{
    conn *c = s->dispatching;
    if (!c)
        return NULL;
    td__http_conn_defer(&c->core);
    c->refs++;
    return (td__http_later *)c;
}

void td__http_later_resume(td__http_later *l, td_http_response *resp)
{
    conn *c = (conn *)l;
    c->refs--;
    if (c->closing || !resp) {
        if (resp)
            free(resp->body);
        if (c->zombie && c->refs == 0) {
            td_http_server *s = c->srv;
            if (c->prev)
                c->prev->next = c->next;
            else
                s->zombies = c->next;
            if (c->next)
                c->next->prev = c->prev;
            free(c);
        }
        return;
    }
    td_http_server *s = c->srv;
    s->dispatching = c;
    td__http_conn_resume(&c->core, resp);
    if (c->tls && !c->core.stop && !c->core.deferred)
        tls_drain(c);
    if (after_dispatch(c))
        resume_reading(c);
}

static void on_connection(uv_stream_t *l, int status)
{
    td_http_server *s = l->data;
    if (status < 0 || s->stopping)
        return;
    conn *c = calloc(1, sizeof *c);
    if (!c)
        return; /* out of memory: libuv then stops watching the listener,
                 * so no further connection is accepted (a known gap) */
    c->srv = s;
    td__http_conn_init(&c->core, s->max_body, s->handler, s->user);
    uv_tcp_init(s->loop, &c->tcp);
    uv_timer_init(s->loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    c->open_handles = 2;
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->n_conns++;
    if (uv_accept(l, (uv_stream_t *)&c->tcp) < 0 || s->n_conns > MAX_CONNS ||
        (s->tls && td__tls_create(s->tls, 1, &c->tls, NULL) != TD_OK)) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    restart_idle(c);
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
        conn_close(c);
}

td_status td__listen_addr_parse(const char *addr, struct sockaddr_storage *ss, socklen_t *alen,
                                td_err *err)
{
    char host[INET6_ADDRSTRLEN + 1];
    const char *port_s;
    size_t hlen;
    int v6 = 0;

    if (!addr)
        return td_err_set(err, TD_EINVAL, "listen address missing");
    if (addr[0] == '[') {
        const char *rb = strchr(addr, ']');
        if (!rb || rb[1] != ':')
            return td_err_set(err, TD_EINVAL, "listen address \"%s\": expected [ipv6]:port", addr);
        hlen = (size_t)(rb - addr - 1);
        if (hlen >= sizeof host)
            return td_err_set(err, TD_EINVAL, "listen address \"%s\": bad host", addr);
        memcpy(host, addr + 1, hlen);
        port_s = rb + 2;
        v6 = 1;
    } else {
        const char *colon = strrchr(addr, ':');
        if (!colon)
            return td_err_set(err, TD_EINVAL, "listen address \"%s\": expected host:port", addr);
        hlen = (size_t)(colon - addr);
        if (hlen >= sizeof host || memchr(addr, ':', hlen))
            return td_err_set(err, TD_EINVAL,
                              "listen address \"%s\": bad host (IPv6 needs [brackets])", addr);
        memcpy(host, addr, hlen);
        port_s = colon + 1;
    }
    host[hlen] = '\0';
    if (!v6 && (hlen == 0 || strcmp(host, "*") == 0))
        strcpy(host, "0.0.0.0");
    else if (!v6 && strcmp(host, "localhost") == 0)
        strcpy(host, "127.0.0.1");

    long port = 0;
    if (!*port_s || strlen(port_s) > 5)
        return td_err_set(err, TD_EINVAL, "listen address \"%s\": bad port", addr);
    for (const char *p = port_s; *p; p++) {
        if (*p < '0' || *p > '9')
            return td_err_set(err, TD_EINVAL, "listen address \"%s\": bad port", addr);
        port = port * 10 + (*p - '0');
    }
    if (port > 65535)
        return td_err_set(err, TD_EINVAL, "listen address \"%s\": port out of range", addr);

    memset(ss, 0, sizeof *ss);
    int rc = v6 ? uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss)
                : uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss);
    if (rc != 0)
        return td_err_set(err, TD_EINVAL, "listen address \"%s\": \"%s\" is not an IP address",
                          addr, host);
    if (alen)
        *alen = v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    return TD_OK;
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

static void on_listener_closed(uv_handle_t *h)
{
    td_http_server *s = h->data;
    s->listener_closed = 1;
    maybe_done(s);
}

td_status td_http_server_start(uv_loop_t *loop, const char *addr, SSL_CTX *tls, size_t max_body,
                               td_http_handler h, void *user, td_http_server **out, td_err *err)
{
    return td__http_server_start_ex(loop, addr, 0, 0, tls, max_body, h, user, out, err);
}

td_status td__http_server_start_ex(uv_loop_t *loop, const char *addr, int port, int reuseport,
                                   SSL_CTX *tls, size_t max_body, td_http_handler h, void *user,
                                   td_http_server **out, td_err *err)
{
    struct sockaddr_storage ss;
    td_status st = td__listen_addr_parse(addr, &ss, NULL, err);
    if (st != TD_OK)
        return st;
    if (port > 0 && ss.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
    else if (port > 0)
        ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
    if (!loop || !h || !out)
        return td_err_set(err, TD_EINVAL, "td_http_server_start: loop, handler and out needed");

    /* Bind and listen with plain calls first, so that a busy port leaves no
     * handle behind on the loop. */
    socklen_t alen =
        ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return td_err_set(err, TD_EIO, "cannot listen on %s: %s", addr, strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuseport)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, alen) < 0 || listen(fd, 511) < 0) {
        int e = errno;
        close(fd);
        return td_err_set(err, TD_EIO, "cannot listen on %s: %s", addr, strerror(e));
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    if (getsockname(fd, (struct sockaddr *)&bound, &blen) < 0) {
        int e = errno;
        close(fd);
        return td_err_set(err, TD_EIO, "cannot listen on %s: %s", addr, strerror(e));
    }
    td_http_server *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return td_err_set(err, TD_ENOMEM, "out of memory starting the server on %s", addr);
    }
    s->loop = loop;
    s->max_body = max_body;
    s->handler = h;
    s->user = user;
    s->idle_ms = TD_HTTP_IDLE_TIMEOUT_MS;
    s->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                : ((struct sockaddr_in *)&bound)->sin_port);
    if (uv_tcp_init(loop, &s->listener) < 0) {
        close(fd);
        free(s);
        return td_err_set(err, TD_EIO, "cannot listen on %s: libuv refused a handle", addr);
    }
    s->listener.data = s;
    int rc = uv_tcp_open(&s->listener, fd);
    if (rc < 0)
        close(fd); /* not adopted by the handle */
    else
        rc = uv_listen((uv_stream_t *)&s->listener, 511, on_connection);
    if (rc < 0) {
        /* the handle exists now; it is freed when the loop next runs */
        s->stopping = 1;
        s->check_closed = 1;
        uv_close((uv_handle_t *)&s->listener, on_listener_closed);
        return td_err_set(err, TD_EIO, "cannot listen on %s: %s", addr, uv_strerror(rc));
    }
    uv_check_init(loop, &s->flush_check);
    s->flush_check.data = s;
    uv_check_start(&s->flush_check, on_flush_check);
    uv_unref((uv_handle_t *)&s->flush_check);
    if (tls) {
        SSL_CTX_up_ref(tls);
        s->tls = tls;
    }
    ignore_sigpipe();
    *out = s;
    return TD_OK;
}

int td_http_server_port(const td_http_server *s)
{
    return s->port;
}

void td_http_server_set_idle_timeout(td_http_server *s, uint64_t idle_ms)
{
    s->idle_ms = idle_ms ? idle_ms : TD_HTTP_IDLE_TIMEOUT_MS;
}

void td_http_server_stop(td_http_server *s, void (*done)(void *), void *arg)
{
    if (!s || s->stopping)
        return;
    s->stopping = 1;
    s->done = done;
    s->done_arg = arg;
    for (conn *c = s->conns; c; c = c->next)
        conn_close(c);
    uv_close((uv_handle_t *)&s->flush_check, on_check_closed);
    uv_close((uv_handle_t *)&s->listener, on_listener_closed);
}
