/* metrics.c - the gateway's counters, histograms and gauges, lock-free.
 * Tenant x route x outcome is too big to allocate densely (65536 x 1024 x
 * 8), and few tenants use many routes, so each tenant gets a block on its
 * first request (published with one CAS), and within it routes come in
 * chunks of 16, also allocated on first use. After that, recording is a few
 * relaxed atomic adds. Gauges are dense arrays. A failed lazy allocation
 * drops that one sample: metrics never fail a request. Cost is summed in
 * fixed point (millionths of a unit) so that sums are exact and independent
 * of the order in which threads add. */
#include "gateway/metrics.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUTES_PER_CHUNK 16
#define COST_SCALE       1000000.0 /* fixed-point cost: millionths */
#define NBUCKETS         14

_Static_assert(NBUCKETS == TD_METRICS_LATENCY_BUCKETS, "metrics.h names the bucket count");
const uint64_t td_metrics_latency_bounds_ns[NBUCKETS] = {
    500000ULL,     1000000ULL,    2500000ULL,    5000000ULL,    10000000ULL,
    25000000ULL,   50000000ULL,   100000000ULL,  250000000ULL,  500000000ULL,
    1000000000ULL, 2500000000ULL, 5000000000ULL, 10000000000ULL};
static const char *const bucket_le[NBUCKETS] = {"0.0005", "0.001", "0.0025", "0.005", "0.01",
                                                "0.025",  "0.05",  "0.1",    "0.25",  "0.5",
                                                "1",      "2.5",   "5",      "10"};

typedef struct {
    _Atomic uint64_t requests[ROUTES_PER_CHUNK][TD_OUT_COUNT];
    _Atomic uint64_t cost_micro[ROUTES_PER_CHUNK];
    _Atomic uint64_t shed[ROUTES_PER_CHUNK][TD_CRIT_COUNT];
} route_chunk;

typedef struct {
    _Atomic uint64_t buckets[NBUCKETS + 1]; /* per bucket, not cumulative; last is +Inf */
    _Atomic uint64_t sum_ns;
    _Atomic(route_chunk *) chunks[];
} tenant_block;

struct td_metrics {
    size_t max_tenants, max_routes; /* slot max_* stands for TD_METRICS_NONE */
    size_t nchunks;
    _Atomic(tenant_block *) *tenants;
    _Atomic int64_t *inflight;               /* [max_tenants + 1] */
    _Atomic int64_t (*queue)[TD_CRIT_COUNT]; /* [max_routes + 1] */
    _Atomic uint64_t (*limit_rej)[TD_LIMIT_COUNT][2]; /* [max_tenants + 1][limit][shadow] */
    _Atomic int64_t shared_degraded;
    _Atomic uint64_t shared_degradations;
    _Atomic int64_t conns_open, conns_unauth;
    _Atomic uint64_t conn_limit;
    _Atomic uint64_t conns_closed[TD_CONN_REASON_COUNT];
    _Atomic uint64_t tarpitted;
};

static const char *const outcome_names[TD_OUT_COUNT] = {
    "accepted", "rate_limited", "concurrency_limited", "shed",           "upstream_error",
    "timeout",  "bad_request",  "unauthorized",        "budget_exceeded", "client_closed",
    "budget_cut", "no_route"};

const char *td_outcome_name(td_outcome o)
{
    return (unsigned)o < TD_OUT_COUNT ? outcome_names[o] : "unknown";
}

td_status td_metrics_create(size_t max_tenants, size_t max_routes, td_metrics **out)
{
    if (max_tenants == 0 || max_routes == 0 || max_tenants >= (1u << 24) ||
        max_routes >= (1u << 20))
        return TD_EINVAL;
    td_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return TD_ENOMEM;
    m->max_tenants = max_tenants;
    m->max_routes = max_routes;
    m->nchunks = (max_routes + 1 + ROUTES_PER_CHUNK - 1) / ROUTES_PER_CHUNK;
    /* calloc's zero bytes are a valid initial state for lock-free atomics
     * on every target we build for. */
    m->tenants = calloc(max_tenants + 1, sizeof *m->tenants);
    m->inflight = calloc(max_tenants + 1, sizeof *m->inflight);
    m->queue = calloc(max_routes + 1, sizeof *m->queue);
    m->limit_rej = calloc(max_tenants + 1, sizeof *m->limit_rej);
    if (!m->tenants || !m->inflight || !m->queue || !m->limit_rej) {
        td_metrics_destroy(m);
        return TD_ENOMEM;
    }
    *out = m;
    return TD_OK;
}

void td_metrics_destroy(td_metrics *m)
{
    if (!m)
        return;
    if (m->tenants)
        for (size_t t = 0; t <= m->max_tenants; t++) {
            tenant_block *b = atomic_load_explicit(&m->tenants[t], memory_order_acquire);
            if (!b)
                continue;
            for (size_t c = 0; c < m->nchunks; c++)
                free(atomic_load_explicit(&b->chunks[c], memory_order_acquire));
            free(b);
        }
    free(m->tenants);
    free((void *)m->inflight);
    free((void *)m->queue);
    free((void *)m->limit_rej);
    free(m);
}

/* The index of a tenant or route slot (max for TD_METRICS_NONE), or -1 if
 * it is out of range. */
static long slot_index(uint32_t slot, size_t max)
{
    if (slot == TD_METRICS_NONE)
        return (long)max;
    return slot < max ? (long)slot : -1;
}

static tenant_block *tenant_block_get(td_metrics *m, size_t t)
{
    tenant_block *b = atomic_load_explicit(&m->tenants[t], memory_order_acquire);
    if (b)
        return b;
    tenant_block *fresh = calloc(1, sizeof *fresh + m->nchunks * sizeof fresh->chunks[0]);
    if (!fresh)
        return NULL;
    if (atomic_compare_exchange_strong_explicit(&m->tenants[t], &b, fresh, memory_order_acq_rel,
                                                memory_order_acquire))
        return fresh;
    free(fresh); /* another thread published first; b is theirs */
    return b;
}

static route_chunk *route_chunk_get(tenant_block *b, size_t c)
{
    route_chunk *ch = atomic_load_explicit(&b->chunks[c], memory_order_acquire);
    if (ch)
        return ch;
    route_chunk *fresh = calloc(1, sizeof *fresh);
    if (!fresh)
        return NULL;
    if (atomic_compare_exchange_strong_explicit(&b->chunks[c], &ch, fresh, memory_order_acq_rel,
                                                memory_order_acquire))
        return fresh;
    free(fresh);
    return ch;
}

void td_metrics_request(td_metrics *m, uint32_t tenant, uint32_t route, td_outcome o,
                        uint64_t latency_ns, double cost)
{
    long t = slot_index(tenant, m->max_tenants), r = slot_index(route, m->max_routes);
    if (t < 0 || r < 0 || (unsigned)o >= TD_OUT_COUNT)
        return;
    tenant_block *b = tenant_block_get(m, (size_t)t);
    if (!b)
        return;
    route_chunk *ch = route_chunk_get(b, (size_t)r / ROUTES_PER_CHUNK);
    if (!ch)
        return;
    size_t i = (size_t)r % ROUTES_PER_CHUNK;
    atomic_fetch_add_explicit(&ch->requests[i][o], 1, memory_order_relaxed);
    if (cost > 0) {
        double micro = nearbyint(cost * COST_SCALE);
        uint64_t add = micro >= 0x1p63 ? (uint64_t)1 << 63 : (uint64_t)micro;
        atomic_fetch_add_explicit(&ch->cost_micro[i], add, memory_order_relaxed);
    }
    if (o == TD_OUT_ACCEPTED || o == TD_OUT_UPSTREAM_ERROR || o == TD_OUT_TIMEOUT) {
        int k = 0;
        while (k < NBUCKETS && latency_ns > td_metrics_latency_bounds_ns[k])
            k++;
        atomic_fetch_add_explicit(&b->buckets[k], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&b->sum_ns, latency_ns, memory_order_relaxed);
    }
}

void td_metrics_shed(td_metrics *m, uint32_t tenant, uint32_t route, td_criticality c)
{
    long t = slot_index(tenant, m->max_tenants), r = slot_index(route, m->max_routes);
    if (t < 0 || r < 0 || (unsigned)c >= TD_CRIT_COUNT)
        return;
    tenant_block *b = tenant_block_get(m, (size_t)t);
    route_chunk *ch = b ? route_chunk_get(b, (size_t)r / ROUTES_PER_CHUNK) : NULL;
    if (ch)
        atomic_fetch_add_explicit(&ch->shed[(size_t)r % ROUTES_PER_CHUNK][c], 1,
                                  memory_order_relaxed);
}

void td_metrics_queue_add(td_metrics *m, uint32_t route, td_criticality c, int delta)
{
    long r = slot_index(route, m->max_routes);
    if (r >= 0 && (unsigned)c < TD_CRIT_COUNT)
        atomic_fetch_add_explicit(&m->queue[r][c], delta, memory_order_relaxed);
}

void td_metrics_limit_rejection(td_metrics *m, uint32_t tenant, td_limit_kind limit, bool shadow)
{
    long t = slot_index(tenant, m->max_tenants);
    if (t < 0 || (unsigned)limit >= TD_LIMIT_COUNT)
        return;
    atomic_fetch_add_explicit(&m->limit_rej[t][limit][shadow ? 1 : 0], 1, memory_order_relaxed);
}

void td_metrics_inflight_add(td_metrics *m, uint32_t tenant, int delta)
{
    long t = slot_index(tenant, m->max_tenants);
    if (t >= 0)
        atomic_fetch_add_explicit(&m->inflight[t], delta, memory_order_relaxed);
}

void td_metrics_shared_degraded(td_metrics *m, int degraded)
{
    int64_t was =
        atomic_exchange_explicit(&m->shared_degraded, degraded ? 1 : 0, memory_order_relaxed);
    if (degraded && !was)
        atomic_fetch_add_explicit(&m->shared_degradations, 1, memory_order_relaxed);
}

void td_metrics_conn_closed(td_metrics *m, td_conn_reason why)
{
    if ((unsigned)why < TD_CONN_REASON_COUNT)
        atomic_fetch_add_explicit(&m->conns_closed[why], 1, memory_order_relaxed);
}

void td_metrics_tarpitted(td_metrics *m)
{
    atomic_fetch_add_explicit(&m->tarpitted, 1, memory_order_relaxed);
}

void td_metrics_conns_add(td_metrics *m, int open_delta, int unauth_delta)
{
    if (open_delta)
        atomic_fetch_add_explicit(&m->conns_open, open_delta, memory_order_relaxed);
    if (unauth_delta)
        atomic_fetch_add_explicit(&m->conns_unauth, unauth_delta, memory_order_relaxed);
}

void td_metrics_conn_limit(td_metrics *m, uint64_t limit)
{
    atomic_store_explicit(&m->conn_limit, limit, memory_order_relaxed);
}

/* ---- rendering ---- */

typedef td_metrics_text buf;

static void grow(buf *b, size_t need)
{
    if (b->oom || b->len + need < b->cap)
        return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap <= b->len + need)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return;
    }
    b->p = p;
    b->cap = cap;
}

static void put(buf *b, const char *s, size_t n)
{
    grow(b, n);
    if (b->oom)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void puts_(buf *b, const char *s)
{
    put(b, s, strlen(s));
}

void td_metrics_text_puts(td_metrics_text *t, const char *s)
{
    puts_(t, s);
}

static void vprintf_(buf *b, const char *fmt, va_list ap)
{
    char tmp[128];
    va_list cp;
    va_copy(cp, ap);
    int n = vsnprintf(tmp, sizeof tmp, fmt, cp);
    va_end(cp);
    if (n < 0)
        return;
    if ((size_t)n < sizeof tmp) {
        put(b, tmp, (size_t)n);
        return;
    }
    grow(b, (size_t)n + 1);
    if (b->oom)
        return;
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

static void printf_(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void printf_(buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf_(b, fmt, ap);
    va_end(ap);
}

void td_metrics_text_printf(td_metrics_text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf_(t, fmt, ap);
    va_end(ap);
}

/* A label value, escaped as the text format wants: \\, \" and \n. */
static void put_label(buf *b, const char *name, const char *value, bool first)
{
    if (!first)
        put(b, ",", 1);
    puts_(b, name);
    put(b, "=\"", 2);
    for (const char *s = value; *s; s++) {
        if (*s == '\\')
            put(b, "\\\\", 2);
        else if (*s == '"')
            put(b, "\\\"", 2);
        else if (*s == '\n')
            put(b, "\\n", 2);
        else
            put(b, s, 1);
    }
    put(b, "\"", 1);
}

void td_metrics_text_label(td_metrics_text *t, const char *name, const char *value, bool first)
{
    put_label(t, name, value, first);
}

/* A fixed-point value v / 10^digits in the shortest exact decimal. */
static void put_fixed(buf *b, uint64_t v, uint64_t scale, int digits)
{
    uint64_t whole = v / scale, frac = v % scale;
    if (!frac) {
        printf_(b, "%" PRIu64, whole);
        return;
    }
    char f[24];
    snprintf(f, sizeof f, "%0*" PRIu64, digits, frac);
    size_t n = strlen(f);
    while (n > 0 && f[n - 1] == '0')
        n--;
    f[n] = '\0';
    printf_(b, "%" PRIu64 ".%s", whole, f);
}

static void family(buf *b, const char *name, const char *type, const char *help)
{
    printf_(b, "# HELP %s ", name);
    puts_(b, help);
    printf_(b, "\n# TYPE %s %s\n", name, type);
}

void td_metrics_text_family(td_metrics_text *t, const char *name, const char *type,
                            const char *help)
{
    family(t, name, type, help);
}

typedef const char *(*name_fn)(void *arg, char kind, uint32_t slot);

static const char *slot_name(name_fn name_of, void *arg, char kind, size_t i, size_t max)
{
    return i == max ? "" : name_of(arg, kind, (uint32_t)i);
}

static uint64_t load(const _Atomic uint64_t *p)
{
    return atomic_load_explicit((_Atomic uint64_t *)p, memory_order_relaxed);
}

/* A tenant and route pair has its series once it had a request. */
static bool pair_used(const route_chunk *ch, size_t i)
{
    for (int o = 0; o < TD_OUT_COUNT; o++)
        if (load(&ch->requests[i][o]))
            return true;
    return false;
}

/* What a render reads the names through. */
typedef struct {
    const td_metrics *m;
    name_fn name_of;
    void *arg;
    const char **routes; /* each route slot's name, or NULL */
} render_ctx;

/* The series of one used tenant and route pair (route chunk ch, index i). */
typedef void (*pair_fn)(buf *b, const char *tenant, const char *route, const route_chunk *ch,
                        size_t i);

static void pair_requests(buf *b, const char *tenant, const char *route, const route_chunk *ch,
                          size_t i)
{
    for (int o = 0; o < TD_OUT_COUNT; o++) {
        puts_(b, "tenantd_requests_total{");
        put_label(b, "tenant", tenant, true);
        put_label(b, "route", route, false);
        put_label(b, "outcome", outcome_names[o], false);
        printf_(b, "} %" PRIu64 "\n", load(&ch->requests[i][o]));
    }
}

static void pair_cost(buf *b, const char *tenant, const char *route, const route_chunk *ch,
                      size_t i)
{
    puts_(b, "tenantd_cost_units_total{");
    put_label(b, "tenant", tenant, true);
    put_label(b, "route", route, false);
    puts_(b, "} ");
    put_fixed(b, load(&ch->cost_micro[i]), (uint64_t)COST_SCALE, 6);
    puts_(b, "\n");
}

static void pair_shed(buf *b, const char *tenant, const char *route, const route_chunk *ch,
                      size_t i)
{
    for (int c = 0; c < TD_CRIT_COUNT; c++) {
        puts_(b, "tenantd_shed_total{");
        put_label(b, "tenant", tenant, true);
        put_label(b, "route", route, false);
        put_label(b, "criticality", td_criticality_name((td_criticality)c), false);
        printf_(b, "} %" PRIu64 "\n", load(&ch->shed[i][c]));
    }
}

/* The families with a series per tenant and route, in the order they are
 * rendered. */
static const struct {
    const char *name, *type, *help;
    pair_fn series;
} pair_families[] = {
    {"tenantd_requests_total", "counter",
     "Requests finished at the gateway, by tenant, route and outcome.", pair_requests},
    {"tenantd_cost_units_total", "counter",
     "Cost units charged (after reconciliation), in the route's cost model.", pair_cost},
    {"tenantd_shed_total", "counter",
     "Requests shed (503), by tenant, route and the criticality they were served at.",
     pair_shed},
};

/* Each pair family over the tenants and routes that had a request. */
static void render_pairs(buf *b, const render_ctx *x)
{
    const td_metrics *m = x->m;
    for (size_t f = 0; f < sizeof pair_families / sizeof pair_families[0]; f++) {
        family(b, pair_families[f].name, pair_families[f].type, pair_families[f].help);
        for (size_t t = 0; t <= m->max_tenants; t++) {
            tenant_block *tb = atomic_load_explicit(&m->tenants[t], memory_order_acquire);
            const char *tenant =
                tb ? slot_name(x->name_of, x->arg, 't', t, m->max_tenants) : NULL;
            if (!tenant)
                continue;
            for (size_t r = 0; r <= m->max_routes; r++) {
                route_chunk *ch =
                    atomic_load_explicit(&tb->chunks[r / ROUTES_PER_CHUNK], memory_order_acquire);
                if (!ch || !x->routes[r] || !pair_used(ch, r % ROUTES_PER_CHUNK))
                    continue;
                pair_families[f].series(b, tenant, x->routes[r], ch, r % ROUTES_PER_CHUNK);
            }
        }
    }
}

static void render_latency(buf *b, const render_ctx *x)
{
    const td_metrics *m = x->m;
    family(b, "tenantd_request_duration_seconds", "histogram",
           "End-to-end latency of requests that reached the upstream.");
    for (size_t t = 0; t <= m->max_tenants; t++) {
        tenant_block *tb = atomic_load_explicit(&m->tenants[t], memory_order_acquire);
        uint64_t counts[NBUCKETS + 1] = {0}, total = 0;
        for (int k = 0; tb && k <= NBUCKETS; k++)
            total += counts[k] = load(&tb->buckets[k]);
        /* a named tenant always; the unnamed slot only once observed */
        const char *tenant = t == m->max_tenants && !total
                                 ? NULL
                                 : slot_name(x->name_of, x->arg, 't', t, m->max_tenants);
        if (!tenant)
            continue;
        /* _count is the +Inf bucket, so the two always agree even while
         * other threads observe. */
        uint64_t cum = 0;
        for (int k = 0; k <= NBUCKETS; k++) {
            cum += counts[k];
            puts_(b, "tenantd_request_duration_seconds_bucket{");
            put_label(b, "tenant", tenant, true);
            put_label(b, "le", k < NBUCKETS ? bucket_le[k] : "+Inf", false);
            printf_(b, "} %" PRIu64 "\n", cum);
        }
        puts_(b, "tenantd_request_duration_seconds_sum{");
        put_label(b, "tenant", tenant, true);
        puts_(b, "} ");
        put_fixed(b, tb ? load(&tb->sum_ns) : 0, 1000000000ULL, 9);
        puts_(b, "\ntenantd_request_duration_seconds_count{");
        put_label(b, "tenant", tenant, true);
        printf_(b, "} %" PRIu64 "\n", total);
    }
}

/* The criticality queues' depth per route, and the requests in flight per
 * tenant. */
static void render_gauges(buf *b, const render_ctx *x)
{
    const td_metrics *m = x->m;
    family(b, "tenantd_queue_depth", "gauge", "Requests waiting in a route's criticality queue.");
    for (size_t r = 0; r <= m->max_routes; r++) {
        int64_t v[TD_CRIT_COUNT], any = 0;
        for (int c = 0; c < TD_CRIT_COUNT; c++)
            any |= v[c] = atomic_load_explicit(&m->queue[r][c], memory_order_relaxed);
        if (!x->routes[r] || (r == m->max_routes && !any))
            continue;
        for (int c = 0; c < TD_CRIT_COUNT; c++) {
            puts_(b, "tenantd_queue_depth{");
            put_label(b, "route", x->routes[r], true);
            put_label(b, "criticality", td_criticality_name((td_criticality)c), false);
            printf_(b, "} %" PRId64 "\n", v[c]);
        }
    }
    family(b, "tenantd_inflight", "gauge", "Requests of a tenant in flight to upstreams.");
    for (size_t t = 0; t <= m->max_tenants; t++) {
        int64_t v = atomic_load_explicit(&m->inflight[t], memory_order_relaxed);
        const char *tenant = t == m->max_tenants && !v
                                 ? NULL
                                 : slot_name(x->name_of, x->arg, 't', t, m->max_tenants);
        if (!tenant)
            continue;
        puts_(b, "tenantd_inflight{");
        put_label(b, "tenant", tenant, true);
        printf_(b, "} %" PRId64 "\n", v);
    }
}

static void render_limits(buf *b, const render_ctx *x)
{
    static const char *const limit_names[TD_LIMIT_COUNT] = {"rate", "concurrency", "budget",
                                                            "key_rate", "key_concurrency",
                                                            "key_budget"};
    const td_metrics *m = x->m;
    family(b, "tenantd_limit_rejections_total", "counter",
           "Requests a tenant's limit refused: mode=\"enforce\" got 429, mode=\"shadow\" "
           "would have and went on.");
    for (size_t t = 0; t <= m->max_tenants; t++) {
        uint64_t any = 0;
        for (int l = 0; l < TD_LIMIT_COUNT; l++)
            any |= load(&m->limit_rej[t][l][0]) | load(&m->limit_rej[t][l][1]);
        const char *tenant = t == m->max_tenants && !any
                                 ? NULL
                                 : slot_name(x->name_of, x->arg, 't', t, m->max_tenants);
        for (int l = 0; tenant && l < TD_LIMIT_COUNT; l++)
            for (int s = 0; s < 2; s++) {
                uint64_t v = load(&m->limit_rej[t][l][s]);
                puts_(b, "tenantd_limit_rejections_total{");
                put_label(b, "tenant", tenant, true);
                put_label(b, "limit", limit_names[l], false);
                put_label(b, "mode", s ? "shadow" : "enforce", false);
                printf_(b, "} %" PRIu64 "\n", v);
            }
    }
}

/* The gateway-wide series: shared limits' state and client connections.
 * Always present, so that an alert can tell 0 from "not exported". */
static void render_gateway(buf *b, const td_metrics *m)
{
    static const char *const conn_reasons[TD_CONN_REASON_COUNT] = {
        "per_address", "limit", "evicted", "auth_timeout", "ignored_retry_after"};
    family(b, "tenantd_shared_limit_degraded", "gauge",
           "1 while shared (Redis) limits are unreachable and local limits decide.");
    printf_(b, "tenantd_shared_limit_degraded %" PRId64 "\n",
            atomic_load_explicit(&m->shared_degraded, memory_order_relaxed));
    family(b, "tenantd_shared_limit_degradations_total", "counter",
           "Times shared (Redis) limits became unreachable.");
    printf_(b, "tenantd_shared_limit_degradations_total %" PRIu64 "\n",
            load(&m->shared_degradations));
    family(b, "tenantd_gateway_client_connections", "gauge",
           "Client connections open on the data listener, by whether a valid key was seen.");
    int64_t open = atomic_load_explicit(&m->conns_open, memory_order_relaxed);
    int64_t unauth = atomic_load_explicit(&m->conns_unauth, memory_order_relaxed);
    printf_(b, "tenantd_gateway_client_connections{state=\"authenticated\"} %" PRId64 "\n",
            open - unauth);
    printf_(b, "tenantd_gateway_client_connections{state=\"unauthenticated\"} %" PRId64 "\n",
            unauth);
    family(b, "tenantd_gateway_client_connection_limit", "gauge",
           "Client connections the data listener holds at most (open files less the reserve).");
    printf_(b, "tenantd_gateway_client_connection_limit %" PRIu64 "\n", load(&m->conn_limit));
    family(b, "tenantd_gateway_connections_closed_total", "counter",
           "Client connections the gateway refused or closed to keep descriptors for others.");
    for (int i = 0; i < TD_CONN_REASON_COUNT; i++)
        printf_(b, "tenantd_gateway_connections_closed_total{reason=\"%s\"} %" PRIu64 "\n",
                conn_reasons[i], load(&m->conns_closed[i]));
    family(b, "tenantd_gateway_tarpitted_total", "counter",
           "429s held back before they were sent, to a connection that kept retrying at once.");
    printf_(b, "tenantd_gateway_tarpitted_total %" PRIu64 "\n", load(&m->tarpitted));
}

td_status td_metrics_render(const td_metrics *m, name_fn name_of, void *arg, char **out,
                            size_t *len)
{
    buf b = {0};
    if (!m || !name_of || !out)
        return TD_EINVAL;
    const char **routes = malloc((m->max_routes + 1) * sizeof *routes);
    if (!routes)
        return TD_ENOMEM;
    for (size_t r = 0; r <= m->max_routes; r++)
        routes[r] = slot_name(name_of, arg, 'r', r, m->max_routes);
    render_ctx x = {m, name_of, arg, routes};
    grow(&b, 1);
    render_pairs(&b, &x);
    render_latency(&b, &x);
    render_gauges(&b, &x);
    render_limits(&b, &x);
    render_gateway(&b, m);
    free(routes);
    if (b.oom) {
        free(b.p);
        return TD_ENOMEM;
    }
    *out = b.p;
    if (len)
        *len = b.len;
    return TD_OK;
}

void td_metrics_tenant_totals(const td_metrics *m, uint32_t tenant, uint64_t *out,
                              int64_t *inflight)
{
    memset(out, 0, TD_OUT_COUNT * sizeof *out);
    *inflight = 0;
    long t = slot_index(tenant, m->max_tenants);
    if (t < 0)
        return;
    *inflight = atomic_load_explicit(&m->inflight[t], memory_order_relaxed);
    tenant_block *b = atomic_load_explicit(&m->tenants[t], memory_order_acquire);
    if (!b)
        return;
    for (size_t c = 0; c < m->nchunks; c++) {
        route_chunk *ch = atomic_load_explicit(&b->chunks[c], memory_order_acquire);
        for (size_t r = 0; ch && r < ROUTES_PER_CHUNK; r++)
            for (size_t o = 0; o < TD_OUT_COUNT; o++)
                out[o] += atomic_load_explicit(&ch->requests[r][o], memory_order_relaxed);
    }
}

void td_metrics_tenant_latency(const td_metrics *m, uint32_t tenant, uint64_t *counts)
{
    memset(counts, 0, (NBUCKETS + 1) * sizeof *counts);
    long t = slot_index(tenant, m->max_tenants);
    tenant_block *b = t < 0 ? NULL : atomic_load_explicit(&m->tenants[t], memory_order_acquire);
    for (size_t k = 0; b && k <= NBUCKETS; k++)
        counts[k] = atomic_load_explicit(&b->buckets[k], memory_order_relaxed);
}

int64_t td_metrics_route_queue(const td_metrics *m, uint32_t route)
{
    long r = slot_index(route, m->max_routes);
    int64_t n = 0;
    for (size_t c = 0; r >= 0 && c < TD_CRIT_COUNT; c++)
        n += atomic_load_explicit(&m->queue[r][c], memory_order_relaxed);
    return n;
}
