/* proxy_internal.h - what the three parts of the gateway's data listener
 * share: proxy.c (workers, listeners, client connections and their HTTP
 * parsing), proxy_request.c (the decision for each request: tenant, route,
 * cost, limits, criticality queue, and its end: reconciliation, metrics,
 * access log) and proxy_upstream.c (per-route connection pools, forwarding,
 * streaming the response back). Everything here belongs to one worker
 * thread and is touched only from its loop. */
#ifndef TENANTD_PROXY_INTERNAL_H
#define TENANTD_PROXY_INTERNAL_H

#include <http_parser.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>
#include <uv.h>

#include "gateway/decide.h"
#include "io/hresp.h"
#include "io/http_internal.h"
#include "gateway/estimate.h"
#include "gateway/flood.h"
#include "gateway/endpoints.h"
#include "gateway/gateway.h"
#include "tenantd/http.h"
#include "io/proxy.h"

/* An OpenAI-shaped error body as a literal: {"error":{"message","type",
 * "code","param":null}} (docs/gateway.md "Errors"); type is the one
 * td_gw_error_type gives the status and code. */
#define PX_ERROR_BODY(message, type, code)                                                        \
    "{\"error\":{\"message\":\"" message "\",\"type\":\"" type "\",\"code\":\"" code           \
    "\",\"param\":null}}"

#define PX_BODY_TOO_LARGE                                                                          \
    PX_ERROR_BODY("the request body is larger than the gateway accepts",            \
                  "invalid_request_error", "body_too_large")

#define PX_HEADER_MAX        TD_HTTP_MAX_HEADER_BYTES /* request line + headers; more -> 431 */
#define PX_MAX_HEADERS       TD_HTTP_MAX_HEADERS      /* fields; more -> 431 */
#define PX_HEADER_TIMEOUT_MS 10000u  /* a request's headers must arrive within this */
#define PX_BODY_TIMEOUT_MS   30000u  /* longest silence while a body arrives */
#define PX_BODY_TOTAL_MS     120000u /* longest time for a whole body */
#define PX_IDLE_TIMEOUT_MS   60000u  /* keep-alive connection with no request */
#define PX_LINGER_MS         2000u /* drain a client we are closing on, so no RST eats the answer */
#define PX_UP_IDLE_MS        30000u /* idle pooled upstream connection */
#define PX_READ_BUF          (64u * 1024u)
#define PX_WRITE_HIGH        ((size_t)1 << 20) /* stop reading the upstream above this backlog */
#define PX_WRITE_LOW         ((size_t)256 << 10)
#define PX_MAX_CONNS         16384u /* client connections per worker */
/* Descriptors: connections that have shown no valid key
 * are closed this long after accept, and each client address (an IPv4
 * address, an IPv6 /64) may hold PX_UNAUTH_PER_ADDR of them by default.
 * Client connections are capped at the open-file limit less a reserve of
 * a quarter of it (at least PX_FD_RESERVE_MIN) for upstream connections,
 * the admin listener, stores and logs. */
#define PX_AUTH_TIMEOUT_MS   10000u
#define PX_UNAUTH_PER_ADDR   64u
#define PX_FD_RESERVE_MIN    128u
#define PX_ADDR_BUCKETS      4096u

typedef struct px_worker px_worker;
typedef struct px_conn px_conn;
typedef struct px_up px_up;
typedef struct px_route px_route;
typedef struct px_cfg px_cfg;
typedef struct px_addrs px_addrs;

struct td_proxy {
    td_gateway *g;
    td_limiter *limiter;
    td_metrics *metrics;
    const td_gw_rate_backend *shared; /* NULL without --redis */
    FILE *access_log;
    size_t max_body;
    td_ledger *ledger; /* NULL: no metering */
    char replica_id[40];
    SSL_CTX *tls; /* our reference, or NULL: plain HTTP */
    unsigned nworkers;
    int port;
    px_worker **workers;
    /* client connections (proxy_conns.c) */
    px_addrs *addrs;             /* unauthenticated connections per address, all workers */
    unsigned unauth_per_addr;    /* 0: no cap */
    uint64_t auth_timeout_ms;
    size_t conn_limit;           /* over all workers */
    td_flood_opts flood;         /* what retrying 429s at once costs a connection */
    struct px_views *views;      /* endpoint state published by the workers (proxy_upstream.c) */
};

/* A worker's reference to one config view, counted per request without
 * atomics; the view is released when no request of the worker uses it and
 * a newer one is current. */
struct px_cfg {
    td_gw_config *c;
    unsigned nreq;
    px_cfg *next; /* in w->cfg_old */
};

/* A route as one worker serves it: its share of the route's capacity and
 * queue (see proxy.c's header for why the split), and its idle upstream
 * connections. Replaced when a reload changes the upstream or the sizes;
 * the old one lives on (retired) until its requests and connections end. */
typedef struct px_check px_check;

/* One configured endpoint of a route (spec.upstream.endpoints[i] or the
 * address): an IP address is one slot of the pool; a DNS name is one slot
 * per address it resolves to, looked up again every resolveEvery off the
 * worker's loop (getaddrinfo on a thread of its own). */
typedef struct {
    char *host;
    uint16_t port;
    uint32_t weight;
    int is_name;           /* host is not an IP address: re-resolved */
    int failing;           /* its last lookup failed (logged once per transition) */
    uint64_t next_ns;      /* when the next lookup starts */
    uint64_t resolved_ns;  /* the last good answer (0: none yet) */
    uint64_t lookups_failed;
    void *gai;             /* the lookup in flight (px_lookup), or NULL */
} px_src;

/* One slot of a route's pool as a worker serves it (see endpoints.h): its
 * address, its idle connections and its active health check. */
typedef struct {
    const char *host; /* its source's */
    uint16_t port;
    uint32_t weight;
    struct sockaddr_storage addr;
    int addr_ok;
    px_up *idle; /* most recently used first */
    size_t n_idle;
    size_t n_conns;      /* open to it, idle or busy */
    px_check *hc;       /* the check in flight, or NULL */
    uint64_t hc_next_ns; /* when the next check starts */
    px_check *sc;       /* the metrics scrape in flight (queueDepth), or NULL */
    uint64_t sc_next_ns;
    uint64_t scraped_ns; /* the last scrape that answered (0: none) */
} px_ep;

struct px_route {
    px_worker *w;
    char *name; /* the Route's, for the log */
    uint32_t slot;
    uint64_t generation; /* the config generation it was last matched against */
    uint32_t route_capacity, route_queue; /* as configured, to notice changes */
    uint32_t cap;                         /* this worker's share of an endpoint's capacity */
    px_ep *eps;    /* neps slots (TD_EP_MAX when a source is a name); pool.n in use */
    size_t neps;
    px_src *srcs;  /* nsrcs, as the route's endpoints */
    size_t nsrcs;
    int has_names;
    uint64_t resolve_every_ns;
    size_t n_lookups; /* lookups in flight */
    int is_pool;   /* spec.upstream.endpoints (else the one address) */
    td_ep_pool pool; /* choice, ejection: this worker's view */
    td_critqueue *q; /* capacity cap * active endpoints (qcap_now), at most qcap_max */
    uint32_t qcap_now, qcap_max;
    size_t n_idle;  /* over all endpoints */
    size_t n_conns; /* upstream connections open, idle or busy */
    size_t n_checks; /* health-check connections open */
    /* spec.upstream.healthCheck (hc_path NULL: none) */
    char *hc_path;
    uint64_t hc_interval_ns, hc_timeout_ns;
    /* balance queueDepth: what is scraped (metrics_path NULL: nothing) */
    char *metrics_path, *waiting_metric, *kv_metric;
    uint64_t scrape_every_ns;
    unsigned refs;  /* requests holding it */
    int retired;
    int pumping, pump_again;
    px_route *next_retired;
};

typedef enum {
    RQ_IDLE = 0, /* no request (between requests) */
    RQ_READING,  /* headers or body arriving */
    RQ_QUEUED,   /* waiting in the route's criticality queue */
    RQ_UPSTREAM, /* forwarded; waiting for or streaming the response */
} px_rq_state;

/* Where the one timer of a client connection points. */
#define PX_UP_HEAD_MAX (2 * PX_HEADER_MAX + 4096) /* an upstream request head */

typedef enum {
    TM_NONE = 0,
    TM_HEADER,   /* request headers must be complete by then */
    TM_BODY,     /* silence while reading a body */
    TM_IDLE,     /* keep-alive idle */
    TM_QUEUE,    /* the request's deadline while queued */
    TM_UPSTREAM, /* the request's deadline while waiting for response headers */
    TM_STREAM,   /* silence from the upstream while streaming the body */
    TM_LINGER,
    TM_TARPIT, /* a held 429 is sent (gateway/flood.h) */
} px_timer_mode;

/* The request being served on a connection (one at a time: pipelined
 * requests wait in the connection's input until it ends). */
typedef struct {
    px_rq_state state;
    /* parsing */
    td__buf url;     /* the target as received */
    size_t path_off; /* of the path in url (SIZE_MAX: none, i.e. "/") */
    size_t path_len; /* up to '?'; normalized in place at step (b) */
    td__buf hdr;     /* "name\0value\0" per field */
    td__hdr_ix ix[PX_MAX_HEADERS];
    size_t n_ix;
    size_t header_bytes;
    int in_value, headers_done;
    td__buf body;
    int err_status;    /* set by a parser callback that refused input */
    int reject_status; /* decided at the headers: answer at the end, body discarded */
    const char *reject_error;
    const char *reject_extra; /* header lines of the refusal (Allow), or NULL */
    char reject_body[512];    /* a refusal's body when it names what was wrong */
    char allow_hdr[200];      /* "Allow: ...\r\n" of a 405 */
    int route_by_model;       /* the path's route depends on the body's "model" */
    int models_list;          /* GET /v1/models, answered by tenantd */
    char model[256];          /* the body's "model", "" if it names none or was not read */
    td_outcome reject_outcome;
    int expect_continue;
    /* headers we act on (into hdr; valid from headers complete) */
    const char *h_auth, *h_xtenant, *h_crit, *h_timeout, *h_gpu, *h_connection, *h_host, *h_xff;
    int n_connection; /* Connection fields (h_connection is the first) */
    int method;
    int http_minor;
    int keep_alive;
    /* the decision */
    px_cfg *cfg;
    const td_gw_tenant *tenant;
    const td_gw_route *route;
    px_route *rs;
    td_criticality crit;
    double estimate, actual;
    uint64_t deadline_ns;
    uint64_t t_start, t_decided, t_started, t_first_byte, t_end, t_body_start;
    int cq_started, queued;
    const char *shadow; /* the shadow limit that would have refused it, or NULL */
    /* key level: the key's own entry (NULL or unnamed: none) */
    const td_gw_key *key;
    /* the limits' holds (the tenant's, the key's, the body's model's),
     * given back at the end (td_gw_charges_release) */
    td_gw_charges ch;
    /* budgets reserved (the tenant's and the key's own), settled at the end */
    td_gw_budget_hold bud;
    double prompt_est; /* the estimate's prompt tokens (tokens routes) */
    /* Settlement (px_req_end): the tokens the budgets reserved (the
     * estimate, or prompt + the route's maxOutputTokens when the body names
     * no max_tokens), what a stream's extensions of that reservation added
     * (already counted as spent), whether the request reached the upstream
     * and whether an early end is charged. */
    double reserve_tokens;
    double covered_tokens; /* what the holds (reservation, extensions) pay for */
    int64_t bud_extra_nano;
    int sent;       /* the request was handed to an upstream connection */
    int charged;    /* ended early and charged what it was delivered */
    int cut_check;  /* the stream is held to its budget as it goes */
    int cut_pending; /* no room for more: finishing the event in progress */
    int budget_cut;  /* ... finished: cut */
    size_t cut_slack; /* bytes forwarded to finish that event */
    int usage_counted; /* the response named no usage: tokens counted from its text */
    /* upstream */
    px_up *up;
    int retried;
    int ep;        /* the endpoint it is sent to (counted in flight there), or -1 */
    int ep_failed; /* the endpoint a retry leaves, or -1 */
    int resp_started; /* response head handed to the client */
    int resp_chunked; /* we chunk the body for the client */
    int resp_close;   /* the client connection closes after this response */
    int resp_status;
    int scan_on;
    td_cost_scanner scan;
    char gpu_hdr[32];
    int have_gpu_hdr;
    /* reconciled usage, for the ledger */
    int64_t tokens_in, tokens_out, gpu_milli_seconds;
    const char *outcome_name; /* for the access log */
    int status;               /* what the client got */
    /* CORS and the body's Content-Encoding (proxy_request.c) */
    const td_gw_cors *cors; /* the route's policy (the path's before the route), or NULL */
    const char *h_origin;   /* Origin, in hdr, or NULL; cleared when the request ends */
    int preflight;          /* a CORS preflight tenantd answers itself (204) */
    int path_normalized;    /* normalize_target has run (it runs once) */
    int body_gzip;          /* Content-Encoding: gzip: inflated before the decision */
    int body_inflated;      /* body holds the inflated bytes: sent without Content-Encoding */
} px_req;

struct px_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_shutdown_t shutdown_req;
    px_worker *w;
    px_conn *prev, *next;
    http_parser parser;
    td__buf in; /* received, not yet parsed */
    size_t in_off;
    td__buf out; /* response bytes not yet handed to libuv */
    px_req rq;
    px_timer_mode timer_mode;
    uint64_t timer_due;   /* loop ms at which timer_mode's deadline falls */
    uint64_t timer_armed; /* loop ms the libuv timer is armed for (while active) */
    char peer[64];
    td__tls *tls; /* NULL on a plain-HTTP listener */
    int open_handles;
    uint32_t conn_tenant;   /* the tenant slot the connection counts for */
    unsigned conn_counted : 1; /* conn_tenant holds one of its connections */
    unsigned closing : 1;   /* uv_close called */
    unsigned finishing : 1; /* no more requests; shutting down */
    unsigned shut_done : 1;
    unsigned peer_eof : 1;
    unsigned read_paused : 1; /* too much pipelined input waiting */
    unsigned in_parser : 1;   /* inside http_parser_execute */
    unsigned stop : 1;        /* parse nothing more */
    unsigned up_paused : 1;   /* the upstream's reading stopped for our backlog */
    unsigned counted : 1;     /* in w->n_open (accepted and admitted) */
    unsigned authed : 1;      /* a request on it showed a valid key */
    unsigned in_unauth : 1;   /* in w's list of unauthenticated connections */
    unsigned addr_held : 1;   /* holds one of its address's unauthenticated places */
    unsigned held : 1;        /* its answer (a 429) waits for the TM_TARPIT timer */
    unsigned close_held : 1;  /* ... and then the connection is closed */
    px_conn *ua_prev, *ua_next; /* that list, oldest first */
    uint64_t accepted_ms;       /* loop time of accept */
    uint8_t addr_key[16];       /* the client address as capped (IPv6: its /64) */
    /* a chunked body's framing, checked ahead of the parser (hreq.h) */
    td__chunk_gate gate;
    /* The API key of the connection's last identified request and what it
     * resolved to (td_gw_decide_auth): a client sending the same key again
     * skips the SHA-256 and the lookup. Wiped when the connection is freed. */
    td_gw_key_cache auth;
    /* the refusal streak (gateway/flood.h), and the Retry-After of the
     * answer being sent if it is a rate or concurrency 429 (else 0) */
    td_flood_conn flood;
    uint64_t refusal_retry_ns;
};

struct px_up {
    uv_tcp_t tcp;
    uv_connect_t connect_req;
    px_route *rs;
    int ep; /* its endpoint in rs->eps */
    px_up *prev, *next; /* idle list */
    px_conn *c;         /* the client whose request it carries; NULL when idle */
    td_hresp resp;      /* the response reader (hresp.h) */
    uint64_t idle_since;
    unsigned closing : 1;
    unsigned connected : 1;
    unsigned reused : 1;    /* it served a request before this one */
    unsigned got_bytes : 1; /* any of this response arrived */
    unsigned bad : 1;       /* not reusable */
    unsigned idle : 1;      /* in rs->idle */
    unsigned reading : 1;   /* uv_read_start is in effect */
    unsigned retry_5xx : 1; /* the endpoint answered 502/503: the request goes to another */
};

/* The requests of one tenant, route, API key and outcome since the last
 * flush, metered as one ledger record (count = requests, tokens and
 * GPU-seconds summed): the ledger writes a record per aggregate every
 * PX_METER_FLUSH_MS, never one per request. */
#define PX_METER_AGG 32
#define PX_METER_FLUSH_MS 250 /* how often aggregates go to the ledger */
typedef struct {
    uint32_t tenant_slot, route_slot; /* route_slot TD_METRICS_NONE: no route */
    int used;
    td_ledger_rec rec; /* labels, outcome, first start, last end, count, sums */
} px_meter_agg;

struct px_worker {
    td_proxy *p;
    unsigned index;
    pthread_t thread;
    int thread_started;
    uv_loop_t loop;
    int loop_ok;
    uv_tcp_t listener;
    uv_async_t stop_async;
    uv_timer_t tick;
    unsigned ticks;
    uint64_t warm_generation; /* the config whose DNS routes were made ahead (proxy_upstream.c) */
    uv_check_t log_check;
    int fd;
    int stopping;
    px_conn *conns;
    size_t n_conns;
    size_t n_open, max_open; /* admitted client connections, and this worker's share of the cap */
    px_conn *ua_head, *ua_tail; /* unauthenticated connections, oldest first */
    px_route **routes; /* [TD_GW_MAX_ROUTES], by route slot */
    px_route *retired;
    td_gw_config *held;
    px_cfg *cfg_cur, *cfg_old;
    td__buf log;
    td__buf up_head; /* the upstream request head being built, reused */
    uint64_t ledger_seq; /* ledger record ids: replica-worker-seq */
    px_meter_agg agg[PX_METER_AGG];
    time_t date_sec;
    char date[40];
    char rbuf[PX_READ_BUF];
};

/* ---- proxy.c ---- */

/* Hands c->out to libuv (tries a direct write first). 0, or -1 if the
 * connection failed (it is then closing). */
int px_flush(px_conn *c);
/* Closes c at once (reset semantics): its request, if any, is aborted. */
void px_conn_close(px_conn *c);
/* The request on c has ended: continue with pipelined input, or wait. */
void px_conn_request_done(px_conn *c);
void px_timer_set(px_conn *c, px_timer_mode mode, uint64_t ms);
const char *px_date(px_worker *w);
uint64_t px_now(void);

/* ---- proxy_conns.c ---- */

/* What the per-address cap counts sa as (NULL or another family: one
 * key of zeros): an IPv4 address as ::ffff:a.b.c.d, an IPv4-mapped IPv6
 * address the same, any other IPv6 address as its /64 (the rest zero). */
void px_addr_key(const struct sockaddr *sa, uint8_t key[16]);
td_status px_addrs_create(px_addrs **out);
void px_addrs_destroy(px_addrs *a);
/* Admits c, just accepted from peer (NULL: unknown): takes a place of its
 * address's unauthenticated share, and one of the worker's, evicting the
 * oldest unauthenticated connection when the worker is at its share of
 * the cap. 0; -1 if c must be closed (counted in the metrics). */
int px_conn_admit(px_conn *c, const struct sockaddr *peer);
/* A request on c showed a valid key: c leaves the unauthenticated list
 * and gives back its address's place. */
void px_conn_authenticated(px_conn *c);
/* c is closing: gives back whatever it holds. Idempotent. */
void px_conn_forget(px_conn *c);
/* The oldest unauthenticated connection of w if it has passed the
 * deadline at now_ms, taken out of the list (it is then closed by the
 * caller), else NULL. */
px_conn *px_conn_expired(px_worker *w, uint64_t now_ms);

/* ---- proxy_request.c ---- */

/* Steps a and b at the end of the headers; the body is read next. */
void px_req_headers(px_conn *c);
/* The request is complete (body read): steps c-f. On return the request
 * has either been answered (c->rq.state == RQ_IDLE) or is queued / upstream. */
void px_req_message(px_conn *c);
/* Appends a whole JSON error response to c->out. */
void px_respond(px_conn *c, int status, const char *extra_headers, const char *body);
/* Ends the request: reconciles cost, releases limits and the queue slot,
 * counts metrics, logs. outcome < 0: the client went away (no metric). */
void px_req_end(px_conn *c, int outcome);
/* Timer of a queued or upstream request fired. */
void px_req_timeout(px_conn *c);
/* The client connection is going away with a request in progress. */
void px_req_abort(px_conn *c);
/* Starts queued requests while the route's worker share has room. */
void px_route_pump(px_route *rs);
void px_cfg_release(px_worker *w, px_cfg *pc);
/* Appends the aggregated rejected/shed records and clears them (the
 * worker's tick, and its stop). */
void px_meter_flush(px_worker *w);
void px_log_flush(px_worker *w);
/* A stream has counted `tokens` so far: extends the request's budget
 * holds to cover their price (and some more) when they pass
 * covered_tokens. 0 when covered (or no budget holds); -1 when an
 * enforced budget has no room: the stream is to be cut. */
int px_budget_extend(px_conn *c, double tokens);

/* ---- proxy_upstream.c ---- */

/* The worker's state of route r (made or replaced as needed), or NULL when
 * out of memory. */
px_route *px_route_get(px_worker *w, const td_gw_config *cfg, const td_gw_route *r);
void px_route_unref(px_route *rs);
/* Retires every route state and closes idle upstream connections (worker
 * stop); frees what is no longer used. */
void px_routes_shutdown(px_worker *w);
void px_routes_free(px_worker *w);
/* Closes pooled connections idle too long. */
void px_routes_sweep(px_worker *w, uint64_t now_ns);
/* Starts the health checks that are due and fails those past their
 * timeout (the worker's tick: both to its resolution). */
void px_routes_check(px_worker *w, uint64_t now_ns);
/* Sends c's request upstream (step g). Failures are answered (502) here. */
void px_forward(px_conn *c);
/* Detaches and closes the request's upstream connection, if any. */
void px_up_abandon(px_conn *c);
/* Endpoint views (see td_ep_view): each worker publishes its pools' state
 * every tick; the gateway reads them through td_gateway_endpoint_view.
 * start after the workers exist, unhook before they stop, free after. */
td_status px_views_start(td_proxy *p);
void px_views_unhook(td_proxy *p);
void px_views_free(td_proxy *p);

/* The request no longer counts in flight at its endpoint (its end). */
void px_ep_release(px_conn *c);
/* The client's backlog drained: read the upstream again. */
void px_up_resume(px_conn *c);

#endif
