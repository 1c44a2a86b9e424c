/* server.c - simmodel's HTTP/1.1 server: one libuv loop, keep-alive and
 * pipelining (one request answered at a time per connection), request
 * bodies up to 4 MiB, SSE streaming with chunked encoding, and the fault
 * modes the tests ask for with X-Simmodel-Fault. An inference request holds
 * a GPU slot (gpu.c) for its service time, measured by a uv timer. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "io/hreq.h"
#include "io/http_server.h"
#include "simmodel/simmodel.h"

#define MAX_BODY        (4u << 20)
#define MAX_URL         8192
#define READ_HIGH_WATER (1u << 20) /* unparsed input that stops reading */
#define LINGER_MS       2000       /* how long a closing connection drains input */
#define READ_BUF_SIZE   65536

typedef enum { CONN_OPEN, CONN_LINGER, CONN_CLOSED } conn_state;

/* What a request asked for with X-Simmodel-Fault. */
typedef enum {
    FAULT_NONE,
    FAULT_RESET,  /* RST instead of an answer */
    FAULT_HANG,   /* no answer, connection left open */
    FAULT_CLOSE,  /* half the headers, then FIN */
    FAULT_SLOW,   /* twice the service time */
    FAULT_STATUS, /* this status, at once */
    FAULT_UNKNOWN
} fault;

/* A growable byte buffer with a maximum fixed at creation (io/http_buf.h). */
typedef td__buf buf;

typedef struct conn conn;

struct td_sim_server {
    uv_loop_t *loop;
    td_sim_config cfg;
    uv_tcp_t listener;
    int port;
    int stopping;
    td_sim_gpu gpu;
    conn *conns; /* every open connection, for shutdown */
    size_t n_conns;
    uint64_t next_id;
    /* counters for /stats */
    uint64_t served, rejected, cancelled, prompt_tokens, completion_tokens;
    double gpu_seconds;
    char read_buf[READ_BUF_SIZE];
};

struct conn {
    uv_tcp_t tcp;
    uv_timer_t timer; /* the GPU slot's clock, then the lingering close's */
    uv_shutdown_t shutdown;
    td_sim_server *srv;
    conn *prev, *next;
    int handles_open;
    conn_state state;
    int reading;
    int driving;

    td_hreq rq; /* the request reader (io/hreq.h) */
    buf in;     /* received, not yet parsed */
    size_t in_off;
    char fault_value[64]; /* the request's X-Simmodel-Fault */

    /* the request being answered */
    int active;     /* parsed and not yet answered: parsing is paused */
    int keep_alive; /* after this response */
    int http10;
    td_sim_job job;
    td_sim_request req;
    td_sim_reply reply;
    int streaming;
    int chunked;
    uint64_t start_ns; /* when the slot was taken */
    double service_ms;
    double prefill_ms, token_ms; /* after the slow fault */
    unsigned emitted;            /* stream chunks written */
};

/* ---- closing ---- */

static void start_next_job(td_sim_job *job);
static void conn_drive(conn *c);

static void on_handle_closed(uv_handle_t *h)
{
    conn *c = h->data;
    if (--c->handles_open > 0)
        return;
    td__buf_fini(&c->in);
    td_hreq_fini(&c->rq);
    free(c);
}

/* Gives the connection's GPU slot or queue place back; the request is
 * abandoned, as a real server aborts generation when the client goes. */
static void abandon_job(conn *c)
{
    if (c->job.state == TD_SIM_JOB_IDLE)
        return;
    c->srv->cancelled++;
    uv_timer_stop(&c->timer);
    td_sim_gpu_release(&c->srv->gpu, &c->job);
}

/* Closes c now; with rst, by a TCP reset (SO_LINGER 0). Idempotent. */
static void conn_close(conn *c, int rst)
{
    if (c->state == CONN_CLOSED)
        return;
    c->state = CONN_CLOSED;
    abandon_job(c);
    td_sim_server *s = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->n_conns--;
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
    if (!rst || uv_tcp_close_reset(&c->tcp, on_handle_closed) != 0)
        uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
}

static void on_linger_timeout(uv_timer_t *t)
{
    conn_close(t->data, 0);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    conn *c = req->data;
    if (status == UV_ECANCELED || c->state == CONN_CLOSED)
        return;
    if (status < 0)
        conn_close(c, 0);
}

/* Ends the connection politely once queued writes are out: FIN, then
 * reading and dropping whatever the client still sends until it closes or
 * LINGER_MS pass. Closing with unread input would send a RST that can
 * destroy the response before the client reads it. */
static void conn_linger(conn *c)
{
    if (c->state != CONN_OPEN)
        return;
    abandon_job(c);
    c->state = CONN_LINGER;
    c->in.len = c->in_off = 0;
    c->shutdown.data = c;
    if (uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
        conn_close(c, 0);
        return;
    }
    uv_timer_start(&c->timer, on_linger_timeout, LINGER_MS, 0);
    if (!c->reading)
        conn_drive(c); /* restarts reading */
}

/* ---- writing ---- */

typedef struct {
    uv_write_t req;
    char data[];
} write_req;

static void on_write(uv_write_t *req, int status)
{
    conn *c = req->data;
    free(req);
    if (status < 0 && status != UV_ECANCELED)
        conn_close(c, 0);
}

/* Queues the n parts, copied into one write, for an open c; cb (which
 * frees the request) runs when it is out. On failure c is closed. */
static void conn_send(conn *c, const uv_buf_t *parts, int n, uv_write_cb cb)
{
    if (c->state != CONN_OPEN)
        return;
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += parts[i].len;
    write_req *w = malloc(sizeof *w + len);
    if (!w) {
        conn_close(c, 0);
        return;
    }
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        memcpy(w->data + at, parts[i].base, parts[i].len);
        at += parts[i].len;
    }
    w->req.data = c;
    uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, cb) != 0) {
        free(w);
        conn_close(c, 0);
    }
}

static void conn_write(conn *c, const char *data, size_t n)
{
    uv_buf_t b = uv_buf_init((char *)data, (unsigned)n);
    conn_send(c, &b, 1, on_write);
}

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 413:
        return "Payload Too Large";
    case 414:
        return "URI Too Long";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    }
    return "Status";
}

/* The status line and headers up to the blank line, into out (size n).
 * extra is more header lines, each ending in CRLF. Returns the length. */
static size_t format_head(conn *c, char *out, size_t n, int status, const char *content_type,
                          long long content_length, const char *extra)
{
    char clen[48] = "";
    if (content_length >= 0)
        snprintf(clen, sizeof clen, "Content-Length: %lld\r\n", content_length);
    const char *connection = "";
    if (!c->keep_alive)
        connection = "Connection: close\r\n";
    else if (c->http10)
        connection = "Connection: keep-alive\r\n";
    int len =
        snprintf(out, n, "HTTP/1.1 %d %s\r\nServer: simmodel\r\nContent-Type: %s\r\n%s%s%s\r\n",
                 status, reason(status), content_type, clen, connection, extra);
    return len < 0 ? 0 : (size_t)len >= n ? n - 1 : (size_t)len;
}

static void response_done(conn *c);

/* A whole response with a body; ends the request. */
static void respond(conn *c, int status, const char *content_type, const char *body, size_t n,
                    const char *extra)
{
    char head[1024];
    size_t hn = format_head(c, head, sizeof head, status, content_type, (long long)n, extra);
    uv_buf_t parts[] = {uv_buf_init(head, (unsigned)hn), uv_buf_init((char *)body, (unsigned)n)};
    conn_send(c, parts, 2, on_write);
    response_done(c);
}

static void respond_error(conn *c, int status, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* An OpenAI error body; 429 and 503 say when to retry. */
static void respond_error(conn *c, int status, const char *type, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char *body = td_sim_error_json(msg, type);
    const char *extra = status == 429 || status == 503 ? "Retry-After: 1\r\n" : "";
    if (!body) {
        conn_close(c, 0);
        return;
    }
    respond(c, status, "application/json", body, strlen(body), extra);
    free(body);
}

/* Writes one SSE event (payload plus the blank line), chunk-framed if the
 * response is chunked. */
static void write_event(conn *c, const char *json)
{
    size_t jn = strlen(json);
    char size[32] = "";
    if (c->chunked)
        snprintf(size, sizeof size, "%zx\r\n", jn + 8);
    uv_buf_t parts[] = {uv_buf_init(size, (unsigned)strlen(size)), uv_buf_init("data: ", 6),
                        uv_buf_init((char *)json, (unsigned)jn),
                        uv_buf_init(c->chunked ? "\n\n\r\n" : "\n\n", c->chunked ? 4 : 2)};
    conn_send(c, parts, 4, on_write);
}

/* ---- serving inference ---- */

static uint64_t ms_to_ns(double ms)
{
    return (uint64_t)llround(ms * 1e6);
}

/* libuv's timers count whole milliseconds. Rounding every wait up would
 * lengthen each job by half a millisecond on average (3% of a 16 ms job,
 * and of the GPU's capacity), so waits round to the nearest millisecond and
 * a deadline counts as reached up to EARLY_NS before it: each event is off
 * by at most half a millisecond either way. Deadlines are absolute (from
 * start_ns), so the errors never add up along a stream. */
#define EARLY_NS 500000

/* Arms the slot timer for deadline_ns (uv_hrtime scale). */
static void arm(conn *c, uint64_t deadline_ns, uv_timer_cb cb)
{
    uv_update_time(c->srv->loop);
    uint64_t now = uv_hrtime();
    uint64_t ms = deadline_ns > now ? (deadline_ns - now + 500000) / 1000000 : 0;
    uv_timer_start(&c->timer, cb, ms, 0);
}

static void finish_job(conn *c)
{
    td_sim_server *s = c->srv;
    s->served++;
    s->prompt_tokens += c->req.prompt_tokens;
    s->completion_tokens += c->req.output_tokens;
    s->gpu_seconds += c->reply.gpu_seconds;
    td_sim_gpu_release(&s->gpu, &c->job);
}

static void on_stream_tick(uv_timer_t *t)
{
    conn *c = t->data;
    uint64_t now = uv_hrtime() + EARLY_NS;
    uint64_t first = c->start_ns + ms_to_ns(c->prefill_ms);
    while (c->emitted < c->req.output_tokens &&
           first + ms_to_ns(c->token_ms * (c->emitted + 1)) <= now) {
        char *json = td_sim_chunk_json(&c->req, &c->reply, c->emitted);
        if (!json) {
            conn_close(c, 0);
            return;
        }
        write_event(c, json);
        free(json);
        if (c->state != CONN_OPEN)
            return;
        c->emitted++;
    }
    uint64_t end = c->start_ns + ms_to_ns(c->service_ms);
    if (c->emitted < c->req.output_tokens) {
        arm(c, first + ms_to_ns(c->token_ms * (c->emitted + 1)), on_stream_tick);
        return;
    }
    if (end > now) {
        arm(c, end, on_stream_tick);
        return;
    }
    char *json = td_sim_chunk_json(&c->req, &c->reply, c->req.output_tokens);
    if (!json) {
        conn_close(c, 0);
        return;
    }
    write_event(c, json);
    free(json);
    write_event(c, "[DONE]");
    if (c->chunked)
        conn_write(c, "0\r\n\r\n", 5);
    if (c->state != CONN_OPEN)
        return;
    finish_job(c);
    response_done(c);
}

static void on_service_done(uv_timer_t *t)
{
    conn *c = t->data;
    uint64_t end = c->start_ns + ms_to_ns(c->service_ms);
    if (end > uv_hrtime() + EARLY_NS) {
        arm(c, end, on_service_done);
        return;
    }
    char *body = td_sim_response_json(&c->req, &c->reply);
    if (!body) {
        conn_close(c, 0);
        return;
    }
    char extra[64];
    snprintf(extra, sizeof extra, "X-GPU-Seconds: %.6f\r\n", c->reply.gpu_seconds);
    finish_job(c);
    respond(c, 200, "application/json", body, strlen(body), extra);
    free(body);
}

/* The job got its slot: the service time starts now. */
static void start_job(conn *c)
{
    c->start_ns = uv_hrtime();
    if (c->streaming)
        arm(c, c->start_ns + ms_to_ns(c->prefill_ms + (c->req.output_tokens ? c->token_ms : 0)),
            on_stream_tick);
    else
        arm(c, c->start_ns + ms_to_ns(c->service_ms), on_service_done);
}

static void start_next_job(td_sim_job *job)
{
    conn *c = (conn *)((char *)job - offsetof(conn, job));
    start_job(c);
}

static void serve_inference(conn *c, td_sim_kind kind, int slow)
{
    td_sim_server *s = c->srv;
    td_err err;
    if (td_sim_request_parse(kind, c->rq.body.p ? c->rq.body.p : "", c->rq.body.len,
                             s->cfg.default_max_tokens, &c->req, &err) != TD_OK) {
        respond_error(c, 400, "invalid_request_error", "%s", err.msg);
        return;
    }
    c->prefill_ms = (double)c->req.prompt_tokens * s->cfg.prefill_ms_per_token * (slow ? 2 : 1);
    c->token_ms = s->cfg.ms_per_token * (slow ? 2 : 1);
    c->service_ms = td_sim_service_ms(&s->cfg, &c->req, slow);
    c->reply.id = ++s->next_id;
    c->reply.created = (int64_t)time(NULL);
    c->reply.gpu_seconds = c->service_ms / 1000.0;
    c->streaming = c->req.stream;
    c->emitted = 0;

    c->job.on_start = start_next_job;
    if (td_sim_gpu_submit(&s->gpu, &c->job) != TD_OK) {
        s->rejected++;
        respond_error(c, 503, "server_error",
                      "the model is overloaded: %u requests running, %zu waiting", s->gpu.busy,
                      s->gpu.queued);
        return;
    }
    if (c->streaming) {
        /* The headers go out at once, as a real server's do; the wait for
         * a slot shows as time to the first token. */
        char extra[128];
        c->chunked = !c->http10;
        if (c->http10)
            c->keep_alive = 0;
        snprintf(extra, sizeof extra, "Cache-Control: no-cache\r\n%sX-GPU-Seconds: %.6f\r\n",
                 c->chunked ? "Transfer-Encoding: chunked\r\n" : "", c->reply.gpu_seconds);
        char head[512];
        size_t hn = format_head(c, head, sizeof head, 200, "text/event-stream", -1, extra);
        conn_write(c, head, hn);
        if (c->state != CONN_OPEN)
            return;
    }
    if (c->job.state == TD_SIM_JOB_RUNNING)
        start_job(c);
}

/* ---- routing ---- */

static void serve_stats(conn *c)
{
    td_sim_server *s = c->srv;
    char body[512];
    int n =
        snprintf(body, sizeof body,
                 "{\"slots\":%u,\"busy\":%u,\"queued\":%zu,\"served\":%" PRIu64
                 ",\"rejected\":%" PRIu64 ",\"cancelled\":%" PRIu64 ",\"prompt_tokens\":%" PRIu64
                 ",\"completion_tokens\":%" PRIu64 ",\"gpu_seconds\":%.6f,\"connections\":%zu}\n",
                 s->gpu.slots, s->gpu.busy, s->gpu.queued, s->served, s->rejected, s->cancelled,
                 s->prompt_tokens, s->completion_tokens, s->gpu_seconds, s->n_conns);
    respond(c, 200, "application/json", body, (size_t)n, "");
}

/* GET /metrics: the two series of vLLM's Prometheus endpoint that an
 * endpoint picker reads (the Gateway API Inference Extension's): requests
 * waiting for a slot, and the share of the KV cache in use, here the share
 * of slots busy (a slot holds one request's cache). */
static void serve_metrics(conn *c)
{
    td_sim_server *s = c->srv;
    char body[512];
    double usage = s->gpu.slots ? (double)s->gpu.busy / s->gpu.slots : 0;
    int n = snprintf(body, sizeof body,
                     "# HELP vllm:num_requests_waiting Requests waiting to be processed.\n"
                     "# TYPE vllm:num_requests_waiting gauge\n"
                     "vllm:num_requests_waiting{model_name=\"simmodel\"} %zu\n"
                     "# HELP vllm:num_requests_running Requests being processed.\n"
                     "# TYPE vllm:num_requests_running gauge\n"
                     "vllm:num_requests_running{model_name=\"simmodel\"} %u\n"
                     "# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent.\n"
                     "# TYPE vllm:gpu_cache_usage_perc gauge\n"
                     "vllm:gpu_cache_usage_perc{model_name=\"simmodel\"} %.6f\n",
                     s->gpu.queued, s->gpu.busy, usage);
    respond(c, 200, "text/plain; version=0.0.4", body, (size_t)n, "");
}

/* The fault named by header value v (trailing blanks trimmed in place). */
static fault parse_fault(char *v, int *status)
{
    size_t n = strlen(v);
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        v[--n] = '\0';
    if (!*v)
        return FAULT_NONE;
    if (!strcasecmp(v, "reset"))
        return FAULT_RESET;
    if (!strcasecmp(v, "hang"))
        return FAULT_HANG;
    if (!strcasecmp(v, "close"))
        return FAULT_CLOSE;
    if (!strcasecmp(v, "slow"))
        return FAULT_SLOW;
    if (!strncasecmp(v, "status:", 7)) {
        char *end;
        long n = strtol(v + 7, &end, 10);
        if (end != v + 7 && !*end && n >= 200 && n <= 599) {
            *status = (int)n;
            return FAULT_STATUS;
        }
    }
    return FAULT_UNKNOWN;
}

static void on_fault_written(uv_write_t *req, int status)
{
    conn *c = req->data;
    free(req);
    if (status != UV_ECANCELED)
        conn_close(c, 1);
}

/* Half of a plausible 200 response's headers, then a reset. (After a FIN
 * instead, curl takes the headers it has as a whole response and exits 0.) */
static void serve_fault_close(conn *c)
{
    char head[512];
    size_t n = format_head(c, head, sizeof head, 200, "application/json", 512,
                           "X-GPU-Seconds: 0.032000\r\n");
    uv_buf_t half = uv_buf_init(head, (unsigned)(n / 2));
    conn_send(c, &half, 1, on_fault_written);
}

/* Answers the request just parsed. Every path ends in response_done,
 * conn_linger or conn_close, or leaves a job that will. */
static void dispatch(conn *c)
{
    int fault_status = 0;
    fault f = parse_fault(c->fault_value, &fault_status);
    switch (f) {
    case FAULT_RESET:
        conn_close(c, 1);
        return;
    case FAULT_HANG:
        return; /* active forever; the client's close or shutdown ends it */
    case FAULT_CLOSE:
        serve_fault_close(c);
        return;
    case FAULT_STATUS:
        respond_error(c, fault_status,
                      fault_status >= 500 ? "server_error" : "invalid_request_error",
                      "injected fault: status %d", fault_status);
        return;
    case FAULT_NONE:
    case FAULT_SLOW:
        break;
    case FAULT_UNKNOWN:
        respond_error(c, 400, "invalid_request_error",
                      "X-Simmodel-Fault: want reset, hang, close, slow or status:NNN");
        return;
    }

    char *path = c->rq.url.p ? c->rq.url.p : "";
    char *q = strchr(path, '?');
    if (q)
        *q = '\0';
    int get = c->rq.method == HTTP_GET;
    int post = c->rq.method == HTTP_POST;
    static const struct {
        const char *path;
        td_sim_kind kind;
    } routes[] = {{"/v1/chat/completions", TD_SIM_CHAT},
                  {"/v1/completions", TD_SIM_COMPLETION},
                  {"/v1/embeddings", TD_SIM_EMBEDDING}};
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (strcmp(path, routes[i].path) != 0)
            continue;
        if (!post) {
            respond_error(c, 405, "invalid_request_error", "%s takes POST", path);
            return;
        }
        serve_inference(c, routes[i].kind, f == FAULT_SLOW);
        return;
    }
    if ((!strcmp(path, "/healthz") || !strcmp(path, "/health")) && get) {
        respond(c, 200, "text/plain", "ok\n", 3, "");
    } else if (!strcmp(path, "/stats") && get) {
        serve_stats(c);
    } else if (!strcmp(path, "/metrics") && get) {
        serve_metrics(c);
    } else if (!strcmp(path, "/v1/models") && get) {
        static const char models[] = "{\"object\":\"list\",\"data\":[{\"id\":\"simmodel\","
                                     "\"object\":\"model\",\"owned_by\":\"simmodel\"}]}\n";
        respond(c, 200, "application/json", models, sizeof models - 1, "");
    } else if (!strcmp(path, "/healthz") || !strcmp(path, "/health") || !strcmp(path, "/stats") ||
               !strcmp(path, "/metrics") ||
               !strcmp(path, "/v1/models")) {
        respond_error(c, 405, "invalid_request_error", "%s takes GET", path);
    } else {
        respond_error(c, 404, "invalid_request_error", "no such path: %s", path);
    }
}

/* The request is answered (its bytes may still be on their way): go on
 * with the next one, or end the connection. */
static void response_done(conn *c)
{
    if (c->state != CONN_OPEN)
        return;
    c->active = 0;
    if (!c->keep_alive) {
        conn_linger(c);
        return;
    }
    td_hreq_resume(&c->rq);
    conn_drive(c);
}

/* ---- parsing ---- */

/* The request's head is read: the fault it asks for, and 100 Continue
 * when the client waits for it. */
static int on_head(td_hreq *r, void *user)
{
    conn *c = user;
    const char *f = td_hreq_header(r, "x-simmodel-fault");
    snprintf(c->fault_value, sizeof c->fault_value, "%s", f ? f : "");
    c->http10 = r->http_major == 1 && r->http_minor == 0;
    if (r->expect_continue) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        conn_write(c, cont, sizeof cont - 1);
    }
    return 0;
}

/* The request is complete: conn_drive answers it, one at a time. */
static int on_request(td_hreq *r, void *user)
{
    conn *c = user;
    c->active = 1;
    c->keep_alive = r->keep_alive;
    return 1;
}

static const td_hreq_callbacks READER = {.on_head = on_head, .on_request = on_request};

/* Answers input the reader refused, and ends the connection after. */
static void respond_bad_request(conn *c)
{
    int status = c->rq.err_status;
    c->keep_alive = 0;
    c->active = 1;
    if (status == 413 || status == 414)
        respond_error(c, status, "invalid_request_error",
                      status == 413 ? "the request body is over %u bytes"
                                    : "the URL is over %u bytes",
                      status == 414 ? MAX_URL : MAX_BODY);
    else
        respond_error(c, status, status >= 500 ? "server_error" : "invalid_request_error",
                      "bad HTTP request: %s", c->rq.err_text);
}

/* ---- reading ---- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    conn *c = h->data;
    (void)suggested;
    /* One buffer serves every connection: on_read copies out of it. */
    *b = uv_buf_init(c->srv->read_buf, sizeof c->srv->read_buf);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *b)
{
    conn *c = stream->data;
    if (nread == 0 || c->state == CONN_CLOSED)
        return;
    if (nread < 0) {
        /* EOF or error: the client is gone, or done after a linger. */
        conn_close(c, 0);
        return;
    }
    if (c->state == CONN_LINGER)
        return;
    if (td__buf_append(&c->in, b->base, (size_t)nread) != TD_OK) {
        conn_close(c, 0);
        return;
    }
    conn_drive(c);
}

/* Feeds unparsed input to the parser while no request is being answered,
 * and reads more only while the unparsed input is small. */
static void conn_drive(conn *c)
{
    if (c->driving || c->state == CONN_CLOSED)
        return;
    c->driving = 1;
    while (c->state == CONN_OPEN && !c->active && c->in_off < c->in.len) {
        size_t avail = c->in.len - c->in_off;
        size_t n = td_hreq_feed(&c->rq, c->in.p + c->in_off, avail);
        c->in_off += n;
        td_hreq_state st = td_hreq_status(&c->rq);
        if (st == TD_HREQ_ERROR)
            respond_bad_request(c);
        else if (st == TD_HREQ_PAUSED && c->active)
            dispatch(c);
        else if (st == TD_HREQ_UPGRADE || n < avail)
            conn_close(c, 0);
    }
    if (c->state != CONN_CLOSED) {
        if (c->in_off == c->in.len) {
            c->in.len = c->in_off = 0;
            if (c->in.cap > READ_HIGH_WATER)
                td__buf_fini(&c->in);
        } else if (c->in_off > 65536) {
            memmove(c->in.p, c->in.p + c->in_off, c->in.len - c->in_off);
            c->in.len -= c->in_off;
            c->in_off = 0;
        }
        int want = c->state == CONN_LINGER || c->in.len - c->in_off < READ_HIGH_WATER;
        if (want && !c->reading) {
            if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0)
                c->reading = 1;
        } else if (!want && c->reading) {
            uv_read_stop((uv_stream_t *)&c->tcp);
            c->reading = 0;
        }
    }
    c->driving = 0;
}

/* ---- accepting ---- */

static void on_connection(uv_stream_t *listener, int status)
{
    td_sim_server *s = listener->data;
    if (status < 0 || s->stopping)
        return;
    conn *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->srv = s;
    c->tcp.data = c->timer.data = c;
    uv_tcp_init(s->loop, &c->tcp);
    uv_timer_init(s->loop, &c->timer);
    c->handles_open = 2;
    td__buf_init(&c->in, MAX_BODY + MAX_URL + READ_HIGH_WATER + READ_BUF_SIZE);
    /* the header limits pass what the gateway forwards (its own limits
     * plus the fields it adds) */
    static const td_hreq_limits limits = {.max_url = MAX_URL,
                                          .max_header_bytes = 4 * TD_HTTP_MAX_HEADER_BYTES,
                                          .max_headers = 4 * TD_HTTP_MAX_HEADERS,
                                          .max_body = MAX_BODY};
    td_hreq_init(&c->rq, &limits, &READER, c);
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->n_conns++;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
        conn_close(c, 0);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1); /* stream chunks are small and latency is the point */
    conn_drive(c);
}

/* ---- the server ---- */

static td_status parse_listen(const char *listen, struct sockaddr_storage *addr, td_err *err)
{
    char host[128];
    const char *colon = strrchr(listen, ':');
    if (!colon || (size_t)(colon - listen) >= sizeof host)
        return td_err_set(err, TD_EINVAL, "--listen %s: want ADDR:PORT", listen);
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end || port < 0 || port > 65535)
        return td_err_set(err, TD_EINVAL, "--listen %s: bad port", listen);
    size_t hn = strlen(host);
    if (hn >= 2 && host[0] == '[' && host[hn - 1] == ']') {
        host[hn - 1] = '\0';
        if (uv_ip6_addr(host + 1, (int)port, (struct sockaddr_in6 *)addr) == 0)
            return TD_OK;
    } else if (uv_ip4_addr(hn ? host : "0.0.0.0", (int)port, (struct sockaddr_in *)addr) == 0) {
        return TD_OK;
    }
    return td_err_set(err, TD_EINVAL, "--listen %s: not an IP address", listen);
}

td_status td_sim_server_create(uv_loop_t *loop, const td_sim_config *cfg, td_sim_server **out,
                               td_err *err)
{
    struct sockaddr_storage addr;
    memset(&addr, 0, sizeof addr);
    td_status st = parse_listen(cfg->listen, &addr, err);
    if (st != TD_OK)
        return st;
    td_sim_server *s = calloc(1, sizeof *s);
    if (!s)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    s->loop = loop;
    s->cfg = *cfg;
    s->cfg.listen = NULL;
    td_sim_gpu_init(&s->gpu, cfg->slots, cfg->max_queue);
    uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    int rc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&s->listener, 4096, on_connection);
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    if (rc == 0)
        rc = uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &blen);
    if (rc != 0) {
        st = td_err_set(err, TD_EIO, "--listen %s: %s", cfg->listen, uv_strerror(rc));
        s->stopping = 1;
        uv_close((uv_handle_t *)&s->listener, NULL);
        uv_run(loop, UV_RUN_NOWAIT); /* lets the close finish before s goes */
        free(s);
        return st;
    }
    s->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                : ((struct sockaddr_in *)&bound)->sin_port);
    *out = s;
    return TD_OK;
}

int td_sim_server_port(const td_sim_server *s)
{
    return s->port;
}

void td_sim_server_stop(td_sim_server *s)
{
    if (s->stopping)
        return;
    s->stopping = 1;
    uv_close((uv_handle_t *)&s->listener, NULL);
    while (s->conns)
        conn_close(s->conns, 0);
}

void td_sim_server_destroy(td_sim_server *s)
{
    free(s);
}
