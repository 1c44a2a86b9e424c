/* metrics.h - the gateway's Prometheus metrics: counters and histograms
 * indexed by tenant slot and route slot, updated lock-free (relaxed atomics)
 * from any worker, rendered in the Prometheus text format (0.0.4). */
#ifndef TENANTD_METRICS_H
#define TENANTD_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/critqueue.h"
#include "tenantd/status.h"

typedef enum {
    TD_OUT_ACCEPTED = 0,        /* proxied, upstream answered */
    TD_OUT_RATE_LIMITED,        /* 429 rate */
    TD_OUT_CONCURRENCY_LIMITED, /* 429 in-flight cap */
    TD_OUT_SHED,                /* 503 shed by the criticality queue (or deadline) */
    TD_OUT_UPSTREAM_ERROR,      /* 502 */
    TD_OUT_TIMEOUT,             /* 504 */
    TD_OUT_BAD_REQUEST,         /* 400/404/413/431 */
    TD_OUT_UNAUTHORIZED,        /* 401: no tenant; counted under tenant "" */
    TD_OUT_BUDGET_EXCEEDED,     /* 429 a money budget of the period is spent */
    TD_OUT_CLIENT_CLOSED,       /* the client closed before the response ended (499) */
    TD_OUT_BUDGET_CUT,          /* a stream cut mid-way: its budget ran out */
    TD_OUT_NO_ROUTE,            /* 404: no route matches the path */
    TD_OUT_COUNT
} td_outcome;

const char *td_outcome_name(td_outcome o); /* "accepted", "rate_limited", ... */

typedef struct td_metrics td_metrics;

/* Room for tenant slots 0..max_tenants-1 and route slots 0..max_routes-1. */
td_status td_metrics_create(size_t max_tenants, size_t max_routes, td_metrics **out);
void td_metrics_destroy(td_metrics *m);

/* A tenant or route slot for a request that has none (no API key, no
 * route matched): counted under the label value "". */
#define TD_METRICS_NONE UINT32_MAX

/* One finished request: outcome, end-to-end latency, cost units charged
 * (actual after reconciliation). Slots out of range are ignored. The
 * latency histogram observes only requests that reached the upstream
 * (accepted, upstream_error, timeout): fast rejections would drag its
 * quantiles towards zero. */
void td_metrics_request(td_metrics *m, uint32_t tenant, uint32_t route, td_outcome o,
                        uint64_t latency_ns, double cost);

/* A request shed (TD_OUT_SHED) at criticality c: counted besides
 * td_metrics_request, as tenantd_shed_total{tenant,route,criticality}. */
void td_metrics_shed(td_metrics *m, uint32_t tenant, uint32_t route, td_criticality c);

/* Gauges: queue depth per route and criticality, in-flight per tenant. */
void td_metrics_queue_add(td_metrics *m, uint32_t route, td_criticality c, int delta);
void td_metrics_inflight_add(td_metrics *m, uint32_t tenant, int delta);

/* A limit of a tenant refused a request: enforced (the request got 429)
 * or in shadow (it would have been refused and went on).
 * tenantd_limit_rejections_total{tenant,limit,mode}. */
typedef enum {
    TD_LIMIT_RATE = 0,
    TD_LIMIT_CONCURRENCY,
    TD_LIMIT_BUDGET,          /* limit="budget" */
    TD_LIMIT_KEY_RATE,        /* limit="key_rate": a key's own rate */
    TD_LIMIT_KEY_CONCURRENCY, /* limit="key_concurrency" */
    TD_LIMIT_KEY_BUDGET,      /* limit="key_budget": a key's own budget */
    TD_LIMIT_COUNT
} td_limit_kind;
void td_metrics_limit_rejection(td_metrics *m, uint32_t tenant, td_limit_kind limit, bool shadow);

/* Counter of shared-limit (Redis) degradations and of reconciliations. */
void td_metrics_shared_degraded(td_metrics *m, int degraded);

/* The data listener's client connections: open now and,
 * of those, not yet authenticated (no request with a valid key yet), the
 * cap on them set at start, and connections the gateway ended because of
 * the caps: tenantd_gateway_connections_closed_total{reason}. */
typedef enum {
    TD_CONN_PER_ADDRESS = 0, /* refused: the client address has its unauthenticated share */
    TD_CONN_LIMIT,           /* refused: at the cap, nothing unauthenticated to evict */
    TD_CONN_EVICTED,         /* the oldest unauthenticated one, closed for a new one */
    TD_CONN_AUTH_TIMEOUT,    /* no valid key within the deadline */
    TD_CONN_IGNORED_RETRY_AFTER, /* kept retrying 429s before their Retry-After (flood.h) */
    TD_CONN_REASON_COUNT
} td_conn_reason;
void td_metrics_conn_closed(td_metrics *m, td_conn_reason why);
/* One 429 held back before it was sent (flood.h): tenantd_gateway_tarpitted_total. */
void td_metrics_tarpitted(td_metrics *m);
void td_metrics_conns_add(td_metrics *m, int open_delta, int unauth_delta);
void td_metrics_conn_limit(td_metrics *m, uint64_t limit);

/* Totals of tenant slot t over all routes: requests by outcome (out has
 * TD_OUT_COUNT entries) and in flight now; what /metrics shows summed over
 * its route label. A slot never used gives zeros. */
void td_metrics_tenant_totals(const td_metrics *m, uint32_t tenant, uint64_t *out,
                              int64_t *inflight);

/* The latency histogram's finite buckets (upper bounds in ns, ascending),
 * TD_METRICS_LATENCY_BUCKETS of them, then +Inf. */
#define TD_METRICS_LATENCY_BUCKETS 14
extern const uint64_t td_metrics_latency_bounds_ns[TD_METRICS_LATENCY_BUCKETS];

/* Tenant slot t's latency histogram as /metrics shows it (all routes): the
 * count of each bucket, not cumulative, TD_METRICS_LATENCY_BUCKETS + 1
 * entries in counts (the last is +Inf). A slot never used gives zeros. */
void td_metrics_tenant_latency(const td_metrics *m, uint32_t tenant, uint64_t *counts);

/* Requests waiting in the criticality queue of route slot r (all classes). */
int64_t td_metrics_route_queue(const td_metrics *m, uint32_t route);

/* Renders the families in the text format. A series that exists is
 * rendered at 0 rather than left out, so that rate() and alerts see it:
 * every named tenant has tenantd_inflight, the latency histogram and its
 * limit rejections; every named route its queue depth per criticality;
 * a tenant and route pair, once it has a request, every outcome, its
 * cost and its sheds per criticality. The unnamed slot (label "") only
 * appears with a non-zero value. name_of(kind, slot) gives the label value
 * of a tenant (kind 't') or route (kind 'r') slot, or NULL for a slot not
 * in use (skipped). *out is malloc'd text. */
td_status td_metrics_render(const td_metrics *m,
                            const char *(*name_of)(void *arg, char kind, uint32_t slot),
                            void *arg, char **out, size_t *len);

/* Text being rendered, for families rendered outside this module (the
 * budgets': gateway.c): malloc'd p of len bytes (NUL-terminated), cap
 * allocated; oom once a growth failed (everything after it is dropped). */
typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} td_metrics_text;
void td_metrics_text_puts(td_metrics_text *t, const char *s);
void td_metrics_text_printf(td_metrics_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* name="value", the value escaped as the text format 0.0.4 wants (\\, \"
 * and \n); a comma first unless first. */
void td_metrics_text_label(td_metrics_text *t, const char *name, const char *value, bool first);
/* # HELP and # TYPE lines. */
void td_metrics_text_family(td_metrics_text *t, const char *name, const char *type,
                            const char *help);

#endif
