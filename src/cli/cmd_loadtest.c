/* cmd_loadtest.c - `tenantctl loadtest`: an open-loop load generator for
 * tenantd's gateway. One libuv loop; per tenant, Poisson arrivals at its
 * rate and a pool of keep-alive HTTP/1.1 connections. Well-behaved tenants
 * go through the client library (adaptive throttling, retry budget,
 * backoff); abusive ones retry rejections at once. Latency is measured from
 * each request's scheduled arrival, so a slow target cannot hide load
 * (no coordinated omission). Prints one row per tenant. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "cli/cli.h"
#include "cli/htmlpage.h"
#include "io/hresp.h"
#include "tenantd/client.h"
#include "core/config.h"
#include "gateway/critqueue.h"
#include "core/duration.h"
#include "core/manifest.h"
#include "client/scenario.h"

#define MS  1000000ull
#define SEC 1000000000ull

#define MAX_TENANTS     TD_SCENARIO_MAX_TENANTS
#define MAX_RATE        100000.0
#define MAX_TOKENS      100000
#define MAX_CONNECTIONS 1024
#define MAX_PENDING     100000 /* queued for a connection, per tenant; beyond: error */
#define MAX_LATENCIES   (16u << 20)
#define DEFAULT_CONNS   16
#define DEFAULT_TIMEOUT (10 * SEC)
#define DRAIN_GRACE     (3 * SEC)
#define BODY_KEEP       2048
#define MAX_SERIES_SECS 86400 /* per-second series of --html, at most a day */

/* The built-in scenario, also examples/scenarios/abusive.yaml: three
 * well-behaved tenants at 20 requests/s and one abuser at 100 requests/s,
 * 20x the 5 requests/s (600 tokens/s) that examples/scenarios/gateway.yaml
 * grants it, retrying every rejection at once. */
static const char builtin_abusive[] =
    "apiVersion: tenantd.dev/v1alpha1\n"
    "kind: LoadScenario\n"
    "metadata: {name: abusive}\n"
    "spec:\n"
    "  target: http://127.0.0.1:8080\n"
    "  duration: 10s\n"
    "  tenants:\n"
    "  - {name: team-a, key: key-a, rate: 20, criticality: {critical: 0.8, sheddable: 0.2},\n"
    "     promptTokens: 100, maxTokens: 20, client: wellBehaved, slo: {p99: 500ms, success: "
    "0.999}}\n"
    "  - {name: team-b, key: key-b, rate: 20, criticality: {critical: 0.8, sheddable: 0.2},\n"
    "     promptTokens: 100, maxTokens: 20, client: wellBehaved, slo: {p99: 500ms, success: "
    "0.999}}\n"
    "  - {name: team-c, key: key-c, rate: 20, criticality: {critical: 1},\n"
    "     promptTokens: 100, maxTokens: 20, client: wellBehaved, slo: {p99: 500ms, success: "
    "0.999}}\n"
    "  - {name: abuser, key: key-abuser, rate: 100, criticality: {critical: 1},\n"
    "     promptTokens: 100, maxTokens: 20, client: abusive, connections: 4}\n";

/* ---- the scenario (src/client/scenario.c) ---- */

typedef td_scenario_tenant tenant_spec;
typedef td_scenario scenario;
#define scenario_free td_scenario_free
#define load_scenario td_scenario_load

/* ---- the run ---- */

typedef struct lt_tenant lt_tenant;
typedef struct lt_conn lt_conn;
typedef struct lt_req lt_req;

enum { C_CONNECTING, C_IDLE, C_BUSY, C_CLOSING };
enum { OUT_OK, OUT_FAILED, OUT_DROPPED, OUT_DEADLINE, OUT_UNFINISHED };

struct lt_req {
    lt_tenant *t;
    uint64_t arrival_ns; /* scheduled, not actual: open loop */
    uint64_t deadline_ns;
    td_client_call call;
    int crit;
    bool has_timer;
    uv_timer_t timer;
    lt_conn *conn;
    lt_req *next_pending;
    lt_req *prev_live, *next_live;
};

struct lt_conn {
    uv_tcp_t tcp;
    uv_connect_t connect;
    uv_write_t write;
    lt_tenant *t;
    int slot;
    int state;
    lt_req *req;
    td_hresp resp; /* the response reader (io/hresp.h) */
    char body[BODY_KEEP + 1];
    size_t body_len;
    char rbuf[16384];
};

/* What one second of the run saw, per tenant: attempts by outcome, at
 * the second their answer (or local drop) came. */
enum { S_OK, S_429, S_503, S_ERR, S_DROP, S_KINDS };

typedef struct {
    uint64_t requests, sent, ok, r429, r503, r401, errors, dropped, retries, deadline, unfinished,
        failed;
    uint32_t *lat_us;
    size_t n_lat, cap_lat;
    /* --html only: per-second outcome counts, and each success as
     * (second << 32 | latency_us), capped at MAX_LATENCIES like lat_us */
    uint32_t (*per_sec)[S_KINDS];
    uint64_t *lat_at;
    size_t n_lat_at, cap_lat_at;
} lt_stats;

typedef struct lt_run lt_run;

struct lt_tenant {
    lt_run *run;
    const tenant_spec *spec;
    td_client *client;
    uv_timer_t arrivals;
    uint64_t next_arrival_ns;
    uint64_t rng;
    char *wire[TD_CRIT_COUNT]; /* the whole request, per criticality */
    size_t wire_len[TD_CRIT_COUNT];
    lt_conn **slots;
    int open;
    lt_req *pending_head, *pending_tail;
    size_t n_pending;
    lt_stats st;
};

struct lt_run {
    uv_loop_t *loop;
    struct sockaddr_storage addr;
    const scenario *sc;
    lt_tenant *t;
    size_t n;
    uint64_t start_ns, end_ns, timeout_ns;
    bool stopping, stopped;
    lt_req *live;
    size_t n_live;
    uv_timer_t tick;
    int tick_count;
    bool progress;
    size_t n_secs; /* length of each tenant's per_sec; 0 without --html */
};

static uint64_t now_ns(void)
{
    return uv_hrtime();
}

static double urand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* The second of the run now falls in, for the --html series. */
static size_t sec_index(const lt_run *run)
{
    uint64_t d = (now_ns() - run->start_ns) / SEC;
    return d < run->n_secs ? (size_t)d : run->n_secs - 1;
}

static void series_note(lt_tenant *t, int kind)
{
    if (t->run->n_secs)
        t->st.per_sec[sec_index(t->run)][kind]++;
}

/* Keeps one success for the per-second percentiles; drops it silently
 * past MAX_LATENCIES or when memory runs out (the chart thins, the run
 * goes on). */
static void series_latency(lt_tenant *t, uint64_t us)
{
    lt_stats *s = &t->st;
    if (!t->run->n_secs)
        return;
    if (s->n_lat_at == s->cap_lat_at && s->cap_lat_at < MAX_LATENCIES) {
        size_t cap = s->cap_lat_at ? s->cap_lat_at * 2 : 1024;
        uint64_t *p = realloc(s->lat_at, cap * sizeof *p);
        if (p) {
            s->lat_at = p;
            s->cap_lat_at = cap;
        }
    }
    if (s->n_lat_at < s->cap_lat_at)
        s->lat_at[s->n_lat_at++] =
            (uint64_t)sec_index(t->run) << 32 | (us > UINT32_MAX ? UINT32_MAX : us);
}

static void attempt(lt_req *r);
static void dispatch(lt_req *r);
static void conn_close(lt_conn *c);
static void retry_timer(uv_timer_t *h);

static void req_freed(uv_handle_t *h)
{
    free(h->data);
}

/* Ends r with outcome: counts it, records the latency of a success. */
static void finish(lt_req *r, int outcome)
{
    lt_tenant *t = r->t;
    lt_run *run = t->run;
    switch (outcome) {
    case OUT_OK: {
        t->st.ok++;
        uint64_t us = (now_ns() - r->arrival_ns) / 1000;
        if (t->st.n_lat == t->st.cap_lat && t->st.cap_lat < MAX_LATENCIES) {
            size_t cap = t->st.cap_lat ? t->st.cap_lat * 2 : 1024;
            uint32_t *p = realloc(t->st.lat_us, cap * sizeof *p);
            if (p) {
                t->st.lat_us = p;
                t->st.cap_lat = cap;
            }
        }
        if (t->st.n_lat < t->st.cap_lat)
            t->st.lat_us[t->st.n_lat++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
        series_latency(t, us);
        break;
    }
    case OUT_FAILED:
        t->st.failed++;
        break;
    case OUT_DROPPED:
        t->st.dropped++;
        series_note(t, S_DROP);
        break;
    case OUT_DEADLINE:
        t->st.deadline++;
        break;
    default:
        t->st.unfinished++;
        break;
    }
    if (r->prev_live)
        r->prev_live->next_live = r->next_live;
    else
        run->live = r->next_live;
    if (r->next_live)
        r->next_live->prev_live = r->prev_live;
    run->n_live--;
    if (r->has_timer) {
        r->timer.data = r;
        uv_close((uv_handle_t *)&r->timer, req_freed);
    } else {
        free(r);
    }
}

/* Counts the attempt's outcome and decides what follows. status is the
 * HTTP status or TD_CLIENT_ECONNECT / TD_CLIENT_ETIMEOUT. */
static void on_result(lt_req *r, int status, uint64_t retry_after_ns)
{
    lt_tenant *t = r->t;
    r->conn = NULL;
    if (status == 429)
        t->st.r429++;
    else if (status == 503)
        t->st.r503++;
    else if (status < 200 || status > 299)
        t->st.errors++;
    series_note(t, status == 429                    ? S_429
                   : status == 503                  ? S_503
                   : status >= 200 && status <= 299 ? S_OK
                                                    : S_ERR);
    if (status == 401)
        t->st.r401++;
    bool ok = status >= 200 && status <= 299;
    if (t->spec->abusive) {
        bool rejected = status == 429 || status == 503 || status == TD_CLIENT_ECONNECT;
        if (ok)
            finish(r, OUT_OK);
        else if (!rejected || t->run->stopping)
            finish(r, OUT_FAILED);
        else {
            t->st.retries++;
            attempt(r);
        }
        return;
    }
    uint64_t wait = 0;
    td_client_decision d =
        td_client_on_result(t->client, &r->call, now_ns(), status, retry_after_ns, &wait);
    if (d == TD_CLIENT_RETRY) {
        t->st.retries++;
        if (!r->has_timer) {
            uv_timer_init(t->run->loop, &r->timer);
            r->has_timer = true;
        }
        r->timer.data = r;
        uv_timer_start(&r->timer, retry_timer, (wait + MS - 1) / MS, 0);
        return;
    }
    if (d == TD_CLIENT_DEADLINE)
        finish(r, OUT_DEADLINE);
    else
        finish(r, ok ? OUT_OK : OUT_FAILED);
}

static void retry_timer(uv_timer_t *h)
{
    attempt(h->data);
}

/* Starts the next attempt of r, through the client's policy if it has one. */
static void attempt(lt_req *r)
{
    lt_tenant *t = r->t;
    if (t->client) {
        td_client_decision d = td_client_should_send(t->client, &r->call, now_ns());
        if (d == TD_CLIENT_DROPPED) {
            finish(r, OUT_DROPPED);
            return;
        }
        if (d == TD_CLIENT_DEADLINE) {
            finish(r, OUT_DEADLINE);
            return;
        }
    }
    t->st.sent++;
    dispatch(r);
}

/* ---- connections ---- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    lt_conn *c = h->data;
    buf->base = c->rbuf;
    buf->len = sizeof c->rbuf;
}

static void conn_freed(uv_handle_t *h)
{
    lt_conn *c = h->data;
    lt_tenant *t = c->t;
    t->slots[c->slot] = NULL;
    t->open--;
    td_hresp_fini(&c->resp);
    free(c);
    /* a freed slot may serve a request that waited for one */
    if (t->pending_head && !t->run->stopped) {
        lt_req *r = t->pending_head;
        t->pending_head = r->next_pending;
        if (!t->pending_head)
            t->pending_tail = NULL;
        t->n_pending--;
        dispatch(r);
    }
}

static void conn_close(lt_conn *c)
{
    if (c->state == C_CLOSING)
        return;
    c->state = C_CLOSING;
    uv_close((uv_handle_t *)&c->tcp, conn_freed);
}

/* The connection failed under its request: close it, report the attempt. */
static void conn_fail(lt_conn *c, int status)
{
    lt_req *r = c->req;
    c->req = NULL;
    conn_close(c);
    if (r)
        on_result(r, status, 0);
}

static void on_written(uv_write_t *w, int status)
{
    lt_conn *c = w->data;
    if (status < 0 && c->state != C_CLOSING)
        conn_fail(c, TD_CLIENT_ECONNECT);
}

static void send_on(lt_conn *c, lt_req *r)
{
    lt_tenant *t = c->t;
    c->req = r;
    r->conn = c;
    c->state = C_BUSY;
    c->body_len = 0;
    td_hresp_start(&c->resp, 0);
    uv_buf_t b = uv_buf_init(t->wire[r->crit], (unsigned)t->wire_len[r->crit]);
    c->write.data = c;
    if (uv_write(&c->write, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0)
        conn_fail(c, TD_CLIENT_ECONNECT);
}

/* The connection is free: serve the oldest waiting request, or idle. */
static void conn_ready(lt_conn *c)
{
    lt_tenant *t = c->t;
    c->state = C_IDLE;
    if (t->pending_head) {
        lt_req *r = t->pending_head;
        t->pending_head = r->next_pending;
        if (!t->pending_head)
            t->pending_tail = NULL;
        t->n_pending--;
        send_on(c, r);
    }
}

/* Keeps the body's first BODY_KEEP bytes, where a rejection's retry
 * hint is. */
static int on_body(td_hresp *resp, const char *at, size_t len, void *user)
{
    lt_conn *c = user;
    (void)resp;
    size_t n = BODY_KEEP - c->body_len;
    if (n > len)
        n = len;
    memcpy(c->body + c->body_len, at, n);
    c->body_len += n;
    return 0;
}

static const td_hresp_callbacks reader_callbacks = {.on_body = on_body};

/* The response to c's request is complete: report it, and serve the next
 * request on the connection when it stays open. */
static void response_done(lt_conn *c, bool more_bytes)
{
    int status = c->resp.status;
    bool keep = c->resp.keep_alive && !more_bytes;
    c->body[c->body_len] = '\0';
    uint64_t ra =
        td_client_parse_retry_after(status, td_hresp_header(&c->resp, "retry-after"), c->body,
                                    c->body_len);
    lt_req *r = c->req;
    c->req = NULL;
    if (keep)
        c->state = C_IDLE;
    else
        conn_close(c);
    on_result(r, status, ra);
    if (keep && c->state == C_IDLE && !c->t->run->stopped)
        conn_ready(c);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    lt_conn *c = s->data;
    if (c->state == C_CLOSING)
        return;
    if (nread < 0) {
        /* a body delimited by the close is complete at it */
        if (nread == UV_EOF && c->req)
            td_hresp_eof(&c->resp);
        if (c->req && td_hresp_status(&c->resp) == TD_HRESP_DONE)
            response_done(c, true);
        else
            conn_fail(c, TD_CLIENT_ECONNECT);
        return;
    }
    if (nread == 0)
        return;
    if (!c->req) { /* bytes nobody asked for */
        conn_close(c);
        return;
    }
    size_t used = td_hresp_feed(&c->resp, buf->base, (size_t)nread);
    td_hresp_state st = td_hresp_status(&c->resp);
    if (st == TD_HRESP_DONE)
        response_done(c, used != (size_t)nread);
    else if (st != TD_HRESP_MORE)
        conn_fail(c, TD_CLIENT_ECONNECT);
}

static void on_connected(uv_connect_t *req, int status)
{
    lt_conn *c = req->data;
    if (c->state == C_CLOSING)
        return;
    if (status < 0 || uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
        conn_fail(c, TD_CLIENT_ECONNECT);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    lt_req *r = c->req;
    send_on(c, r);
}

/* Opens connection number slot of t for r. */
static void conn_open(lt_tenant *t, int slot, lt_req *r)
{
    lt_conn *c = calloc(1, sizeof *c);
    if (!c) {
        on_result(r, TD_CLIENT_ECONNECT, 0);
        return;
    }
    c->t = t;
    c->slot = slot;
    c->state = C_CONNECTING;
    static const td_hresp_limits limits = {.max_header_bytes = 64 * 1024, .max_headers = 256};
    td_hresp_init(&c->resp, &limits, &reader_callbacks, c);
    c->req = r;
    r->conn = c;
    uv_tcp_init(t->run->loop, &c->tcp);
    c->tcp.data = c;
    c->connect.data = c;
    t->slots[slot] = c;
    t->open++;
    if (uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)&t->run->addr,
                       on_connected) != 0)
        conn_fail(c, TD_CLIENT_ECONNECT);
}

/* Puts r on an idle connection, a new one, or the tenant's waiting line. */
static void dispatch(lt_req *r)
{
    lt_tenant *t = r->t;
    int free_slot = -1;
    for (int i = 0; i < (int)t->spec->connections; i++) {
        lt_conn *c = t->slots[i];
        if (c && c->state == C_IDLE) {
            send_on(c, r);
            return;
        }
        if (!c && free_slot < 0)
            free_slot = i;
    }
    if (free_slot >= 0) {
        conn_open(t, free_slot, r);
        return;
    }
    if (t->n_pending >= MAX_PENDING) {
        t->st.errors++;
        series_note(t, S_ERR);
        finish(r, OUT_FAILED);
        return;
    }
    r->next_pending = NULL;
    if (t->pending_tail)
        t->pending_tail->next_pending = r;
    else
        t->pending_head = r;
    t->pending_tail = r;
    t->n_pending++;
}

/* ---- arrivals, timeouts, the end ---- */

static void arrive(lt_tenant *t, uint64_t at)
{
    lt_run *run = t->run;
    lt_req *r = calloc(1, sizeof *r);
    if (!r)
        return;
    r->t = t;
    r->arrival_ns = at;
    r->deadline_ns = at + run->timeout_ns;
    double u = urand(&t->rng), acc = 0;
    r->crit = TD_CRIT_CRITICAL;
    for (int c = 0; c < TD_CRIT_COUNT; c++) {
        acc += t->spec->crit[c];
        if (t->spec->crit[c] > 0 && u < acc) {
            r->crit = c;
            break;
        }
    }
    r->next_live = run->live;
    if (run->live)
        run->live->prev_live = r;
    run->live = r;
    run->n_live++;
    t->st.requests++;
    if (t->client)
        td_client_call_begin(t->client, &r->call, at, r->deadline_ns);
    attempt(r);
}

static void on_arrivals(uv_timer_t *h)
{
    lt_tenant *t = h->data;
    lt_run *run = t->run;
    uint64_t now = now_ns();
    while (t->next_arrival_ns <= now && t->next_arrival_ns < run->end_ns) {
        uint64_t at = t->next_arrival_ns;
        double gap = -log(1 - urand(&t->rng)) / t->spec->rate;
        t->next_arrival_ns = at + (uint64_t)(gap * 1e9) + 1;
        arrive(t, at);
    }
    if (t->next_arrival_ns >= run->end_ns) {
        uv_timer_stop(h);
        return;
    }
    uint64_t ms = (t->next_arrival_ns - now + MS - 1) / MS;
    uv_timer_start(h, on_arrivals, ms, 0);
}

/* Stops everything: no new attempts; what is still open counts as
 * unfinished; every handle closes so uv_run returns. */
static void hard_stop(lt_run *run)
{
    if (run->stopped)
        return;
    run->stopped = true;
    run->stopping = true;
    uv_timer_stop(&run->tick);
    uv_close((uv_handle_t *)&run->tick, NULL);
    for (size_t i = 0; i < run->n; i++) {
        lt_tenant *t = &run->t[i];
        uv_close((uv_handle_t *)&t->arrivals, NULL);
        t->pending_head = t->pending_tail = NULL;
        t->n_pending = 0;
        for (int k = 0; k < (int)t->spec->connections; k++)
            if (t->slots[k]) {
                t->slots[k]->req = NULL;
                conn_close(t->slots[k]);
            }
    }
    while (run->live)
        finish(run->live, OUT_UNFINISHED);
}

static void progress_line(lt_run *run)
{
    uint64_t sent = 0, ok = 0, r429 = 0, r503 = 0, err = 0, drop = 0;
    for (size_t i = 0; i < run->n; i++) {
        lt_stats *s = &run->t[i].st;
        sent += s->sent;
        ok += s->ok;
        r429 += s->r429;
        r503 += s->r503;
        err += s->errors;
        drop += s->dropped;
    }
    fprintf(stderr,
            "loadtest: %3ds  sent %llu  ok %llu  429 %llu  503 %llu  errors %llu  dropped %llu  "
            "in flight %zu\n",
            run->tick_count, (unsigned long long)sent, (unsigned long long)ok,
            (unsigned long long)r429, (unsigned long long)r503, (unsigned long long)err,
            (unsigned long long)drop, run->n_live);
}

static void on_tick(uv_timer_t *h)
{
    lt_run *run = h->data;
    uint64_t now = now_ns();
    /* attempts past their deadline: give up on the connection under them */
    for (size_t i = 0; i < run->n; i++) {
        lt_tenant *t = &run->t[i];
        for (int k = 0; k < (int)t->spec->connections; k++) {
            lt_conn *c = t->slots[k];
            if (c && c->req && c->state != C_CLOSING && now >= c->req->deadline_ns)
                conn_fail(c, TD_CLIENT_ETIMEOUT);
        }
        /* the waiting line is FIFO: its head is the oldest */
        while (t->pending_head && now >= t->pending_head->deadline_ns) {
            lt_req *r = t->pending_head;
            t->pending_head = r->next_pending;
            if (!t->pending_head)
                t->pending_tail = NULL;
            t->n_pending--;
            t->st.errors++;
            series_note(t, S_ERR);
            finish(r, OUT_DEADLINE);
        }
    }
    if (run->progress && now >= run->start_ns + (uint64_t)(run->tick_count + 1) * SEC) {
        run->tick_count++;
        progress_line(run);
    }
    if (!run->stopping && now >= run->end_ns)
        run->stopping = true;
    if (run->stopping && (run->n_live == 0 || now >= run->end_ns + DRAIN_GRACE))
        hard_stop(run);
}

/* ---- the report ---- */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile in milliseconds; NAN when there is no sample. */
static double pct_ms(const lt_stats *s, double p)
{
    if (!s->n_lat)
        return NAN;
    size_t k = (size_t)ceil(p * (double)s->n_lat);
    if (k < 1)
        k = 1;
    return s->lat_us[k - 1] / 1000.0;
}

static double success_ratio(const lt_stats *s)
{
    return s->requests ? (double)s->ok / (double)s->requests : 0;
}

/* 1 met, 0 missed, -1 not judged (abusive or no SLO). */
static int slo_met(const lt_tenant *t)
{
    const tenant_spec *sp = t->spec;
    if (sp->abusive || !sp->has_slo)
        return -1;
    if (t->st.requests == 0)
        return 0;
    if (success_ratio(&t->st) < sp->slo_success)
        return 0;
    if (sp->slo_p99_ns && (!t->st.n_lat || pct_ms(&t->st, 0.99) * 1e6 > (double)sp->slo_p99_ns))
        return 0;
    return 1;
}

static void fmt_ms(char *b, size_t n, double ms)
{
    if (isnan(ms))
        snprintf(b, n, "-");
    else
        snprintf(b, n, "%.1f", ms);
}

static void print_table(lt_run *run, double secs)
{
    printf("%-12s %-11s %8s %8s %8s %8s %6s %6s %7s %7s %9s %8s %8s %8s %8s %s\n", "TENANT",
           "CLIENT", "OFFERED", "SENT", "OK", "429", "503", "ERRORS", "DROPPED", "RETRIES",
           "SUCCESS", "P50MS", "P95MS", "P99MS", "P999MS", "SLO");
    for (size_t i = 0; i < run->n; i++) {
        lt_tenant *t = &run->t[i];
        lt_stats *s = &t->st;
        char p50[16], p95[16], p99[16], p999[16];
        fmt_ms(p50, sizeof p50, pct_ms(s, 0.5));
        fmt_ms(p95, sizeof p95, pct_ms(s, 0.95));
        fmt_ms(p99, sizeof p99, pct_ms(s, 0.99));
        fmt_ms(p999, sizeof p999, pct_ms(s, 0.999));
        int met = slo_met(t);
        printf("%-12s %-11s %8llu %8llu %8llu %8llu %6llu %6llu %7llu %7llu %8.3f%% %8s %8s %8s "
               "%8s %s\n",
               t->spec->name, t->spec->abusive ? "abusive" : "wellBehaved",
               (unsigned long long)s->requests, (unsigned long long)s->sent,
               (unsigned long long)s->ok, (unsigned long long)s->r429, (unsigned long long)s->r503,
               (unsigned long long)s->errors, (unsigned long long)s->dropped,
               (unsigned long long)s->retries, 100 * success_ratio(s), p50, p95, p99, p999,
               met < 0 ? "-"
               : met   ? "yes"
                       : "no");
    }
    printf("duration %.1fs; latency of successful requests from their scheduled arrival\n", secs);
}

static json_t *num_or_null(double v)
{
    return isnan(v) ? json_null() : json_real(round(v * 1000) / 1000);
}

static int print_json(lt_run *run, double secs)
{
    json_t *root = json_object(), *ts = json_object();
    for (size_t i = 0; i < run->n; i++) {
        lt_tenant *t = &run->t[i];
        lt_stats *s = &t->st;
        int met = slo_met(t);
        json_t *o = json_pack(
            "{s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:o,s:o,s:o,s:o,s:o}", "client",
            t->spec->abusive ? "abusive" : "wellBehaved", "offered", (json_int_t)s->requests,
            "sent", (json_int_t)s->sent, "accepted", (json_int_t)s->ok, "rateLimited",
            (json_int_t)s->r429, "shed", (json_int_t)s->r503, "errors", (json_int_t)s->errors,
            "dropped", (json_int_t)s->dropped, "retries", (json_int_t)s->retries, "success",
            success_ratio(s), "p50Ms", num_or_null(pct_ms(s, 0.5)), "p95Ms",
            num_or_null(pct_ms(s, 0.95)), "p99Ms", num_or_null(pct_ms(s, 0.99)), "p999Ms",
            num_or_null(pct_ms(s, 0.999)), "sloMet", met < 0 ? json_null() : json_boolean(met));
        if (!o)
            return -1;
        json_object_set_new(ts, t->spec->name, o);
    }
    json_object_set_new(root, "tenants", ts);
    json_object_set_new(root, "durationS", json_real(round(secs * 1000) / 1000));
    char *txt = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(root);
    if (!txt)
        return -1;
    printf("%s\n", txt);
    free(txt);
    return 0;
}

/* ---- --html ---- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

#define CW 640 /* chart width and height in px, plot area inside margins */
#define CH 200
#define ML 56
#define MR 12
#define MT 12
#define MB 28

/* Axes, grid lines and labels of a chart from 0 to top over secs seconds. */
static void chart_frame(FILE *f, double top, size_t secs, const char *unit)
{
    double pw = CW - ML - MR, ph = CH - MT - MB;
    for (int i = 0; i <= 4; i++) {
        double y = MT + ph - ph * i / 4;
        fprintf(f,
                "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"grid\"/>"
                "<text x=\"%d\" y=\"%.1f\" class=\"ylab\">%g</text>\n",
                ML, y, CW - MR, y, ML - 4, y + 4, top * i / 4);
    }
    size_t step = secs <= 15 ? 1 : secs <= 40 ? 5 : secs <= 120 ? 10 : 60;
    for (size_t s = 0; s <= secs; s += step)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"xlab\">%zus</text>\n",
                ML + pw * (double)s / (double)secs, CH - 8, s);
    fprintf(f, "<text x=\"4\" y=\"%d\" class=\"unit\">%s</text>\n", MT + 4, unit);
}

/* p50 and p99 of each second's successes, NAN where a second had none. */
static void latency_series(lt_stats *s, size_t n_secs, double *p50, double *p99)
{
    for (size_t i = 0; i < n_secs; i++)
        p50[i] = p99[i] = NAN;
    qsort(s->lat_at, s->n_lat_at, sizeof *s->lat_at, cmp_u64);
    for (size_t a = 0, b; a < s->n_lat_at; a = b) {
        size_t sec = (size_t)(s->lat_at[a] >> 32);
        for (b = a; b < s->n_lat_at && (size_t)(s->lat_at[b] >> 32) == sec; b++)
            ;
        size_t n = b - a;
        size_t k50 = (size_t)ceil(0.5 * (double)n), k99 = (size_t)ceil(0.99 * (double)n);
        p50[sec] = (double)(uint32_t)s->lat_at[a + (k50 ? k50 : 1) - 1] / 1000.0;
        p99[sec] = (double)(uint32_t)s->lat_at[a + (k99 ? k99 : 1) - 1] / 1000.0;
    }
}

static void polyline(FILE *f, const double *v, size_t n, double top, const char *cls)
{
    double pw = CW - ML - MR, ph = CH - MT - MB;
    bool open = false;
    for (size_t i = 0; i < n; i++) {
        if (isnan(v[i])) {
            if (open)
                fputs("\"/>\n", f);
            open = false;
            continue;
        }
        double y = v[i] > top ? top : v[i];
        if (!open)
            fprintf(f, "<polyline class=\"%s\" points=\"", cls);
        open = true;
        fprintf(f, "%.1f,%.1f ", ML + pw * ((double)i + 0.5) / (double)n, MT + ph - ph * y / top);
    }
    if (open)
        fputs("\"/>\n", f);
}

static const char *const kind_class[S_KINDS] = {"ok", "r429", "r503", "err", "drop"};
static const char *const kind_label[S_KINDS] = {"ok", "429 rate-limited", "503 shed", "errors",
                                                "dropped locally"};

static const char loadtest_css[] =
    "table{border-collapse:collapse}\n"
    ".yes{color:#1a7f37;font-weight:bold}.no{color:#cf222e;font-weight:bold}\n"
    ".tenant{display:flex;flex-wrap:wrap;gap:16px}\n"
    ".grid{stroke:#ddd}.ylab{font-size:11px;text-anchor:end;fill:#555}"
    ".xlab{font-size:11px;text-anchor:middle;fill:#555}.unit{font-size:11px;fill:#555}\n"
    ".p50{fill:none;stroke:#0969da;stroke-width:2}.p99{fill:none;stroke:#cf222e;"
    "stroke-width:2}.slo{stroke:#cf222e;stroke-dasharray:6 4;opacity:.6}\n"
    ".ok{fill:#2da44e}.r429{fill:#fb8500}.r503{fill:#8250df}.err{fill:#cf222e}"
    ".drop{fill:#8c959f}\n";

/* The summary table, one row per tenant, and the charts' colour key. */
static void html_summary(FILE *f, lt_run *run)
{
    static const char *const heads[] = {"tenant",  "client",  "offered", "sent",
                                        "ok",      "429",     "503",     "errors",
                                        "dropped", "retries", "success", "p50 ms",
                                        "p95 ms",  "p99 ms",  "p99.9 ms", "SLO"};
    td_htmlpage_table(f, NULL, heads, sizeof heads / sizeof heads[0]);
    for (size_t i = 0; i < run->n; i++) {
        lt_tenant *t = &run->t[i];
        lt_stats *s = &t->st;
        char p[4][16];
        fmt_ms(p[0], sizeof p[0], pct_ms(s, 0.5));
        fmt_ms(p[1], sizeof p[1], pct_ms(s, 0.95));
        fmt_ms(p[2], sizeof p[2], pct_ms(s, 0.99));
        fmt_ms(p[3], sizeof p[3], pct_ms(s, 0.999));
        int met = slo_met(t);
        fputs("<tr><td>", f);
        td_htmlpage_text(f, t->spec->name);
        fprintf(f,
                "</td><td>%s</td><td>%llu</td><td>%llu</td><td>%llu</td><td>%llu</td>"
                "<td>%llu</td><td>%llu</td><td>%llu</td><td>%llu</td><td>%.3f%%</td>"
                "<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class=\"%s\">%s</td></tr>\n",
                t->spec->abusive ? "abusive" : "wellBehaved", (unsigned long long)s->requests,
                (unsigned long long)s->sent, (unsigned long long)s->ok, (unsigned long long)s->r429,
                (unsigned long long)s->r503, (unsigned long long)s->errors,
                (unsigned long long)s->dropped, (unsigned long long)s->retries,
                100 * success_ratio(s), p[0], p[1], p[2], p[3],
                met < 0 ? ""
                : met   ? "yes"
                        : "no",
                met < 0 ? "-"
                : met   ? "met"
                        : "missed");
    }
    fputs("</table>\n", f);
    static const char *const colours[] = {"#0969da", "#cf222e", "#2da44e", "#fb8500",
                                          "#8250df", "#cf222e", "#8c959f"};
    const char *labels[2 + S_KINDS] = {"p50", "p99 (dashed: the SLO's p99). Outcomes:"};
    for (int k = 0; k < S_KINDS; k++)
        labels[2 + k] = kind_label[k];
    td_htmlpage_key(f, "Latency: ", colours, labels, 2 + S_KINDS, NULL);
}

/* t's latency chart: p50 and p99 per second, the SLO's p99 dashed. */
static void html_latency(FILE *f, lt_tenant *t, size_t n_secs, double *p50, double *p99)
{
    double ph = CH - MT - MB;
    latency_series(&t->st, n_secs, p50, p99);
    double max = 0;
    for (size_t k = 0; k < n_secs; k++)
        if (!isnan(p99[k]) && p99[k] > max)
            max = p99[k];
    double slo_ms = t->spec->slo_p99_ns ? (double)t->spec->slo_p99_ns / 1e6 : 0;
    double top = td_htmlpage_nice_top((slo_ms > max ? slo_ms : max) * 1.05);
    td_htmlpage_svg_begin(f, NULL, CW, CH, "latency per second");
    chart_frame(f, top, n_secs, "ms");
    if (slo_ms > 0)
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"slo\"/>\n", ML,
                MT + ph - ph * slo_ms / top, CW - MR, MT + ph - ph * slo_ms / top);
    polyline(f, p50, n_secs, top, "p50");
    polyline(f, p99, n_secs, top, "p99");
    td_htmlpage_svg_end(f);
}

/* t's outcomes chart: attempts per second, stacked by outcome. */
static void html_outcomes(FILE *f, lt_tenant *t, size_t n_secs)
{
    lt_stats *s = &t->st;
    double pw = CW - ML - MR, ph = CH - MT - MB;
    double most = 0;
    for (size_t k = 0; k < n_secs; k++) {
        double sum = 0;
        for (int j = 0; j < S_KINDS; j++)
            sum += s->per_sec[k][j];
        if (sum > most)
            most = sum;
    }
    double top = td_htmlpage_nice_top(most);
    td_htmlpage_svg_begin(f, NULL, CW, CH, "outcomes per second");
    chart_frame(f, top, n_secs, "/s");
    double bw = pw / (double)n_secs;
    for (size_t k = 0; k < n_secs; k++) {
        double y = MT + ph;
        for (int j = 0; j < S_KINDS; j++) {
            uint32_t v = s->per_sec[k][j];
            if (!v)
                continue;
            double h = ph * v / top;
            y -= h;
            fprintf(f,
                    "<rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\">"
                    "<title>%zus: %u %s</title></rect>\n",
                    kind_class[j], ML + bw * (double)k + 1, y, bw > 3 ? bw - 2 : bw, h, k, v,
                    kind_label[j]);
        }
    }
    td_htmlpage_svg_end(f);
}

/* Writes the report of run as one self-contained HTML page to f: the
 * summary table, then per tenant latency (p50, p99 per second) and
 * outcomes (stacked per second) as inline SVG. Sorts each tenant's
 * lat_at. 0 on success, -1 on a write error or out of memory. */
static int write_html(FILE *f, lt_run *run, double secs, const char *target)
{
    size_t n_secs = (size_t)ceil(secs);
    if (n_secs < 1)
        n_secs = 1;
    if (n_secs > run->n_secs)
        n_secs = run->n_secs;
    double *p50 = malloc(n_secs * sizeof *p50), *p99 = malloc(n_secs * sizeof *p99);
    if (!p50 || !p99) {
        free(p50);
        free(p99);
        return -1;
    }
    td_htmlpage_begin(f, "tenantctl loadtest", loadtest_css, "tenantctl loadtest");
    fputs("<p>Target ", f);
    td_htmlpage_text(f, target);
    fprintf(f,
            "; %.1f s. Latency of successful requests, from their scheduled arrival "
            "(open loop: a slow answer does not hide load). Outcomes are attempts, retries "
            "included, by the second their answer came.</p>\n",
            secs);
    html_summary(f, run);
    for (size_t i = 0; i < run->n; i++) {
        lt_tenant *t = &run->t[i];
        fputs("<h2>", f);
        td_htmlpage_text(f, t->spec->name);
        fprintf(f, " <small>(%s, %.0f requests/s offered)</small></h2>\n<div class=\"tenant\">\n",
                t->spec->abusive ? "abusive" : "wellBehaved", t->spec->rate);
        html_latency(f, t, n_secs, p50, p99);
        html_outcomes(f, t, n_secs);
        fputs("</div>\n", f);
    }
    td_htmlpage_end(f);
    free(p50);
    free(p99);
    return ferror(f) ? -1 : 0;
}

/* ---- the target ---- */

/* Parses "http://host:port[/]" into a loopback address: the load test
 * never leaves the machine. */
static td_status resolve_target(const char *url, struct sockaddr_storage *out, char *hostport,
                                size_t hp_len, td_err *err)
{
    if (strncmp(url, "http://", 7) != 0)
        return td_err_set(err, TD_EINVAL, "target %s: want http://HOST:PORT", url);
    const char *h = url + 7;
    const char *end = h + strcspn(h, "/");
    if (*end && strcmp(end, "/") != 0)
        return td_err_set(err, TD_EINVAL,
                          "target %s: give no path (the test posts to "
                          "/v1/chat/completions)",
                          url);
    char host[256], port[16];
    const char *colon;
    if (*h == '[') {
        const char *rb = memchr(h, ']', (size_t)(end - h));
        if (!rb || rb[1] != ':')
            return td_err_set(err, TD_EINVAL, "target %s: want http://[ADDR]:PORT", url);
        snprintf(host, sizeof host, "%.*s", (int)(rb - h - 1), h + 1);
        colon = rb + 1;
    } else {
        colon = NULL;
        for (const char *p = h; p < end; p++)
            if (*p == ':')
                colon = p;
        if (!colon || colon - h >= (long)sizeof host)
            return td_err_set(err, TD_EINVAL, "target %s: want http://HOST:PORT", url);
        snprintf(host, sizeof host, "%.*s", (int)(colon - h), h);
    }
    int plen = (int)(end - colon - 1);
    if (plen < 1 || plen > 5)
        return td_err_set(err, TD_EINVAL, "target %s: bad port", url);
    snprintf(port, sizeof port, "%.*s", plen, colon + 1);
    for (const char *p = port; *p; p++)
        if (*p < '0' || *p > '9')
            return td_err_set(err, TD_EINVAL, "target %s: bad port", url);
    if (atoi(port) < 1 || atoi(port) > 65535)
        return td_err_set(err, TD_EINVAL, "target %s: bad port", url);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0)
        return td_err_set(err, TD_EINVAL, "target %s: cannot resolve %s: %s", url, host,
                          gai_strerror(rc));
    bool loop = false;
    if (res->ai_family == AF_INET) {
        uint32_t a = ntohl(((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr);
        loop = (a >> 24) == 127;
    } else if (res->ai_family == AF_INET6) {
        loop = IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr);
    }
    if (loop)
        memcpy(out, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    if (!loop)
        return td_err_set(err, TD_EINVAL,
                          "target %s: %s is not a loopback address; the load "
                          "test only targets this machine",
                          url, host);
    snprintf(hostport, hp_len, "%.*s", (int)(end - h), h);
    return TD_OK;
}

/* One blocking connect, so that a target that is not listening is a clear
 * message at once rather than a run of errors. */
static td_status probe_target(const struct sockaddr_storage *a, const char *url, td_err *err)
{
    int fd = socket(a->ss_family, SOCK_STREAM, 0);
    if (fd < 0)
        return td_err_set(err, TD_EIO, "socket: %s", strerror(errno));
    socklen_t len =
        a->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    int rc = connect(fd, (const struct sockaddr *)a, len);
    int e = errno;
    close(fd);
    if (rc != 0)
        return td_err_set(err, TD_EIO, "target %s: cannot connect: %s", url, strerror(e));
    return TD_OK;
}

/* The request bytes of t, one per criticality. */
static td_status build_wire(lt_tenant *t, const char *hostport)
{
    const tenant_spec *sp = t->spec;
    size_t clen = (size_t)sp->prompt_tokens * 4;
    char *content = malloc(clen + 1);
    if (!content)
        return TD_ENOMEM;
    static const char words[] = "the quick brown fox jumps over a lazy dog ";
    for (size_t i = 0; i < clen; i++)
        content[i] = words[i % (sizeof words - 1)];
    content[clen] = '\0';
    size_t blen = clen + 128;
    char *body = malloc(blen);
    if (!body) {
        free(content);
        return TD_ENOMEM;
    }
    int bn =
        snprintf(body, blen,
                 "{\"model\":\"simmodel\",\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],"
                 "\"max_tokens\":%ld}",
                 content, sp->max_tokens);
    free(content);
    for (int c = 0; c < TD_CRIT_COUNT; c++) {
        size_t n = (size_t)bn + strlen(sp->key) + strlen(hostport) + 256;
        t->wire[c] = malloc(n);
        if (!t->wire[c]) {
            free(body);
            return TD_ENOMEM;
        }
        int w = snprintf(t->wire[c], n,
                         "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\n"
                         "Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
                         "X-Criticality: %s\r\nContent-Length: %d\r\n\r\n%s",
                         hostport, sp->key, td_criticality_name((td_criticality)c), bn, body);
        t->wire_len[c] = (size_t)w;
    }
    free(body);
    return TD_OK;
}

/* ---- the verb ---- */

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: tenantctl loadtest --scenario FILE|abusive [--target URL] [--duration D]\n"
        "                          [--format table|json] [--html FILE] [--timeout D] [--seed N]\n"
        "                          [-q]\n\n"
        "Open-loop load test of tenantd's gateway: per tenant of the LoadScenario,\n"
        "Poisson arrivals at its rate of POST /v1/chat/completions (a prompt of\n"
        "promptTokens*4 characters, max_tokens, X-Criticality drawn from its mix,\n"
        "Authorization: Bearer KEY) over keep-alive connections. wellBehaved tenants\n"
        "use the client library (adaptive throttling, retry budget, jittered backoff\n"
        "honouring Retry-After); abusive ones retry every 429/503 at once.\n\n"
        "  -s, --scenario FILE  a LoadScenario (YAML); \"abusive\" is the built-in one:\n"
        "                       team-a, team-b, team-c (keys key-a, key-b, key-c) at 20\n"
        "                       requests/s and abuser (key-abuser) at 100 requests/s,\n"
        "                       as in examples/scenarios/abusive.yaml\n"
        "  -t, --target URL     the gateway, http://127.0.0.1:PORT (loopback only);\n"
        "                       overrides spec.target\n"
        "  -d, --duration D     how long arrivals go on (\"8s\" or seconds); overrides\n"
        "                       spec.duration; then up to 3 s to drain\n"
        "  -f, --format FMT     table (default) or json; --json is short for json\n"
        "      --html FILE      also write a self-contained HTML report: the table,\n"
        "                       and per tenant p50/p99 latency and outcomes (ok, 429,\n"
        "                       503, errors, local drops) per second as SVG charts\n"
        "      --timeout D      deadline of each request, retries included (default 10s)\n"
        "      --seed N         seed of arrivals, criticality draws and jitter (default 1)\n"
        "  -q, --quiet          no progress line on stderr\n\n"
        "Latencies are of successful requests, from their scheduled arrival.\n"
        "exit status: 0 every wellBehaved tenant met its SLO, 1 one did not,\n"
        "2 bad input, 3 the target is not reachable\n");
}

static td_status parse_cli_duration(const char *s, uint64_t *out, td_err *err)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end != s && *end == '\0' && !errno && v > 0 && v <= 86400) {
        *out = (uint64_t)(v * 1e9);
        return TD_OK;
    }
    int64_t ns;
    if (td_duration_parse(s, &ns, NULL) != TD_OK || ns <= 0)
        return td_err_set(err, TD_EINVAL, "\"%s\" is not a duration (\"8s\", \"500ms\", \"8\")", s);
    *out = (uint64_t)ns;
    return TD_OK;
}

typedef struct {
    const char *scen, *target, *dur, *format, *tmo, *html;
    unsigned long long seed;
    bool quiet;
} lt_opts;

/* Reads the flags into o. -1 to go on; otherwise the exit code. */
static int parse_options(int argc, char **argv, lt_opts *o)
{
    static const struct option longopts[] = {
        {"scenario", required_argument, NULL, 's'},
        {"target", required_argument, NULL, 't'},
        {"duration", required_argument, NULL, 'd'},
        {"format", required_argument, NULL, 'f'},
        {"json", no_argument, NULL, 'j'},
        {"timeout", required_argument, NULL, 'T'},
        {"seed", required_argument, NULL, 'S'},
        {"quiet", no_argument, NULL, 'q'},
        {"html", required_argument, NULL, 'H'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (lt_opts){.format = "table", .seed = 1};
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "s:t:d:f:qh", longopts, NULL)) != -1) {
        switch (opt) {
        case 's':
            o->scen = optarg;
            break;
        case 't':
            o->target = optarg;
            break;
        case 'd':
            o->dur = optarg;
            break;
        case 'f':
            o->format = optarg;
            break;
        case 'j':
            o->format = "json";
            break;
        case 'T':
            o->tmo = optarg;
            break;
        case 'H':
            o->html = optarg;
            break;
        case 'S': {
            char *end;
            errno = 0;
            o->seed = strtoull(optarg, &end, 10);
            if (end == optarg || *end || errno) {
                fprintf(stderr, "tenantctl loadtest: --seed %s: want a whole number\n", optarg);
                return TD_EXIT_USAGE;
            }
            break;
        }
        case 'q':
            o->quiet = true;
            break;
        case 'h':
            usage(stdout);
            return TD_EXIT_OK;
        default:
            usage(stderr);
            return TD_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tenantctl loadtest: unexpected argument \"%s\"\n", argv[optind]);
        return TD_EXIT_USAGE;
    }
    if (!o->scen) {
        fprintf(stderr, "tenantctl loadtest: --scenario FILE|abusive is required\n");
        return TD_EXIT_USAGE;
    }
    if (strcmp(o->format, "table") != 0 && strcmp(o->format, "json") != 0) {
        fprintf(stderr, "tenantctl loadtest: --format %s: want table or json\n", o->format);
        return TD_EXIT_USAGE;
    }
    return -1;
}

/* Loads the scenario into *sc and settles the target and the times. -1
 * to go on (free sc after); otherwise the exit code (sc is freed). */
static int load_run_scenario(lt_opts *o, scenario *sc, uint64_t *timeout_ns,
                             uint64_t *duration_ns)
{
    td_err err;
    *timeout_ns = DEFAULT_TIMEOUT;
    *duration_ns = 0;
    if (o->tmo && parse_cli_duration(o->tmo, timeout_ns, &err) != TD_OK) {
        fprintf(stderr, "tenantctl loadtest: --timeout: %s\n", err.msg);
        return TD_EXIT_USAGE;
    }
    if (o->dur && parse_cli_duration(o->dur, duration_ns, &err) != TD_OK) {
        fprintf(stderr, "tenantctl loadtest: --duration: %s\n", err.msg);
        return TD_EXIT_USAGE;
    }
    td_manifest *m = NULL;
    td_status st = strcmp(o->scen, "abusive") == 0
                       ? td_manifest_parse("abusive (built-in)", builtin_abusive,
                                           sizeof builtin_abusive - 1, &m, &err)
                       : td_manifest_load_file(o->scen, &m, &err);
    if (st == TD_OK) {
        st = load_scenario(m, sc, &err);
        td_manifest_destroy(m);
    }
    if (st != TD_OK) {
        fprintf(stderr, "tenantctl loadtest: %s\n", err.msg);
        return TD_EXIT_USAGE;
    }
    if (!o->target)
        o->target = sc->target;
    if (!*duration_ns)
        *duration_ns = sc->duration_ns;
    if (!o->target || !*duration_ns) {
        fprintf(stderr, "tenantctl loadtest: %s\n",
                !o->target ? "no target: give --target or spec.target"
                           : "no duration: give --duration or spec.duration");
        scenario_free(sc);
        return TD_EXIT_USAGE;
    }
    return -1;
}

/* Each tenant's connections, series, request bytes and client. -1 and a
 * message on failure. */
static int setup_tenants(lt_run *run, const scenario *sc, unsigned long long seed,
                         const char *hostport)
{
    td_err err;
    for (size_t i = 0; i < sc->n; i++) {
        lt_tenant *t = &run->t[i];
        t->run = run;
        t->spec = &sc->t[i];
        t->rng = seed * 0x100000001b3ull + i * 0x9e3779b97f4a7c15ull + 1;
        t->slots = calloc((size_t)t->spec->connections, sizeof *t->slots);
        if (run->n_secs)
            t->st.per_sec = calloc(run->n_secs, sizeof *t->st.per_sec);
        if (!t->slots || (run->n_secs && !t->st.per_sec) || build_wire(t, hostport) != TD_OK) {
            fprintf(stderr, "tenantctl loadtest: out of memory\n");
            return -1;
        }
        if (!t->spec->abusive) {
            td_client_opts o;
            td_client_opts_default(&o);
            o.seed = t->rng ^ 0x5bd1e995ull;
            if (td_client_create(&o, &t->client, &err) != TD_OK) {
                fprintf(stderr, "tenantctl loadtest: %s\n", err.msg);
                return -1;
            }
        }
    }
    return 0;
}

/* Runs the load for duration_ns (and the drain after); returns the
 * seconds it took. */
static double run_load(lt_run *run, uint64_t duration_ns)
{
    run->start_ns = now_ns();
    run->end_ns = run->start_ns + duration_ns;
    for (size_t i = 0; i < run->n; i++) {
        lt_tenant *t = &run->t[i];
        uv_timer_init(run->loop, &t->arrivals);
        t->arrivals.data = t;
        t->next_arrival_ns =
            run->start_ns + (uint64_t)(-log(1 - urand(&t->rng)) / t->spec->rate * 1e9);
        uv_timer_start(&t->arrivals, on_arrivals, (t->next_arrival_ns - run->start_ns) / MS, 0);
    }
    uv_timer_init(run->loop, &run->tick);
    run->tick.data = run;
    uv_timer_start(&run->tick, on_tick, 50, 50);
    uv_run(run->loop, UV_RUN_DEFAULT);
    return (double)(now_ns() - run->start_ns) / 1e9;
}

/* Prints the results (and writes the HTML page to html_f, closing it);
 * returns the exit code. */
static int report(lt_run *run, const lt_opts *o, FILE *html_f, double secs)
{
    for (size_t i = 0; i < run->n; i++) {
        lt_stats *s = &run->t[i].st;
        if (s->n_lat)
            qsort(s->lat_us, s->n_lat, sizeof *s->lat_us, cmp_u32);
    }
    if (strcmp(o->format, "json") == 0)
        print_json(run, secs);
    else
        print_table(run, secs);
    int rc = TD_EXIT_OK;
    if (html_f) {
        int w = write_html(html_f, run, secs, o->target);
        if (fclose(html_f) != 0 || w != 0) {
            fprintf(stderr, "tenantctl loadtest: --html %s: cannot write the report\n", o->html);
            rc = TD_EXIT_USAGE;
        }
    }
    for (size_t i = 0; i < run->n; i++) {
        lt_tenant *t = &run->t[i];
        if (t->st.r401)
            fprintf(stderr,
                    "tenantctl loadtest: tenant %s: %llu responses were 401: the gateway "
                    "rejects its key\n",
                    t->spec->name, (unsigned long long)t->st.r401);
        if (slo_met(t) == 0)
            rc = TD_EXIT_DENIED;
    }
    return rc;
}

static void free_tenants(lt_run *run, size_t n)
{
    if (!run->t)
        return;
    for (size_t i = 0; i < n; i++) {
        lt_tenant *t = &run->t[i];
        td_client_destroy(t->client);
        free(t->slots);
        free(t->st.lat_us);
        free(t->st.per_sec);
        free(t->st.lat_at);
        for (int c = 0; c < TD_CRIT_COUNT; c++)
            free(t->wire[c]);
    }
    free(run->t);
}

int td_cmd_loadtest(int argc, char **argv)
{
    lt_opts o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    scenario sc;
    uint64_t timeout_ns, duration_ns;
    if ((rc = load_run_scenario(&o, &sc, &timeout_ns, &duration_ns)) >= 0)
        return rc;

    td_err err;
    lt_run run;
    memset(&run, 0, sizeof run);
    char hostport[300];
    if (resolve_target(o.target, &run.addr, hostport, sizeof hostport, &err) != TD_OK) {
        fprintf(stderr, "tenantctl loadtest: %s\n", err.msg);
        scenario_free(&sc);
        return TD_EXIT_USAGE;
    }
    if (probe_target(&run.addr, o.target, &err) != TD_OK) {
        fprintf(stderr, "tenantctl loadtest: %s\n", err.msg);
        scenario_free(&sc);
        return TD_EXIT_UNAVAILABLE;
    }
    /* opened before the run, so that a bad path costs no load test */
    FILE *html_f = NULL;
    if (o.html && !(html_f = fopen(o.html, "w"))) {
        fprintf(stderr, "tenantctl loadtest: --html %s: %s\n", o.html, strerror(errno));
        scenario_free(&sc);
        return TD_EXIT_USAGE;
    }
    if (html_f) {
        uint64_t secs = (duration_ns + DRAIN_GRACE + SEC - 1) / SEC + 2;
        run.n_secs = secs > MAX_SERIES_SECS ? MAX_SERIES_SECS : (size_t)secs;
    }

    signal(SIGPIPE, SIG_IGN);

    uv_loop_t loop;
    uv_loop_init(&loop);
    run.loop = &loop;
    run.sc = &sc;
    run.n = sc.n;
    run.timeout_ns = timeout_ns;
    run.progress = !o.quiet && duration_ns >= 3 * SEC;
    run.t = calloc(sc.n, sizeof *run.t);
    rc = TD_EXIT_USAGE;
    if (run.t && setup_tenants(&run, &sc, o.seed, hostport) == 0) {
        double secs = run_load(&run, duration_ns);
        rc = report(&run, &o, html_f, secs);
        html_f = NULL;
    }
    if (html_f)
        fclose(html_f);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    free_tenants(&run, sc.n);
    scenario_free(&sc);
    return rc;
}
