/* history.c - per-tenant rings of the last hour (see history.h). A bucket
 * is addressed by its absolute number (now / bucket width) modulo the ring
 * size; the buckets skipped since a tenant's last sample are zeroed when it
 * is next sampled, so a quiet tenant costs nothing between samples. */
#include "gateway/history.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NLAT      (TD_METRICS_LATENCY_BUCKETS + 1)
#define BUCKET_NS ((int64_t)TD_HISTORY_BUCKET_S * 1000000000LL)

typedef struct {
    char *name;
    td_history_sample last;
    uint64_t lat[NLAT]; /* latency observations of bucket last_b */
    int64_t first_b, last_b;
    int64_t first_ns;
    td_history_point ring[TD_HISTORY_BUCKETS];
} entry;

struct td_history {
    entry **e;
    size_t n, max;
};

td_status td_history_create(size_t max_tenants, td_history **out)
{
    if (max_tenants == 0)
        return TD_EINVAL;
    td_history *h = calloc(1, sizeof *h);
    if (!h || !(h->e = calloc(max_tenants, sizeof *h->e))) {
        free(h);
        return TD_ENOMEM;
    }
    h->max = max_tenants;
    *out = h;
    return TD_OK;
}

void td_history_destroy(td_history *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->n; i++) {
        free(h->e[i]->name);
        free(h->e[i]);
    }
    free(h->e);
    free(h);
}

static int64_t bucket_of(int64_t ns)
{
    return ns >= 0 ? ns / BUCKET_NS : (ns - BUCKET_NS + 1) / BUCKET_NS;
}

static td_history_point *slot(entry *e, int64_t b)
{
    int64_t i = b % TD_HISTORY_BUCKETS;
    return &e->ring[i < 0 ? i + TD_HISTORY_BUCKETS : i];
}

static entry *find(const td_history *h, const char *tenant)
{
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->e[i]->name, tenant) == 0)
            return h->e[i];
    return NULL;
}

static uint32_t add32(uint32_t a, uint64_t d)
{
    return d > UINT32_MAX - a ? UINT32_MAX : a + (uint32_t)d;
}

/* What a counter that only grows grew by; a lower value restarted from 0. */
static uint64_t grew(uint64_t now, uint64_t before)
{
    return now >= before ? now - before : now;
}

/* What a period's sum grew by above its highest value *high so far (all
 * of it in a new period); *high follows. */
static int64_t grew_period(int64_t now, int64_t *high, bool new_period)
{
    int64_t d = new_period ? now : now > *high ? now - *high : 0;
    if (new_period || now > *high)
        *high = now;
    return d > 0 ? d : 0;
}

/* Moves e to bucket b: the buckets after its last one up to b start empty. */
static void advance(entry *e, int64_t b)
{
    if (b <= e->last_b)
        return;
    int64_t from = b - e->last_b > TD_HISTORY_BUCKETS ? b - TD_HISTORY_BUCKETS + 1 : e->last_b + 1;
    for (int64_t k = from; k <= b; k++) {
        memset(slot(e, k), 0, sizeof(td_history_point));
        slot(e, k)->p99_ms = NAN;
    }
    memset(e->lat, 0, sizeof e->lat);
    e->last_b = b;
}

static td_status entry_new(td_history *h, const char *tenant, int64_t b, int64_t now_ns,
                           entry **out)
{
    if (h->n == h->max)
        return TD_EQUOTA;
    entry *e = calloc(1, sizeof *e);
    char *name = strdup(tenant);
    if (!e || !name) {
        free(e);
        free(name);
        return TD_ENOMEM;
    }
    e->name = name;
    e->first_b = e->last_b = b;
    e->first_ns = now_ns;
    for (size_t i = 0; i < TD_HISTORY_BUCKETS; i++)
        e->ring[i].p99_ms = NAN;
    h->e[h->n++] = e;
    *out = e;
    return TD_OK;
}

td_status td_history_record(td_history *h, const char *tenant, const td_history_sample *s,
                            int64_t now_ns)
{
    int64_t b = bucket_of(now_ns);
    entry *e = find(h, tenant);
    if (!e) {
        td_status st = entry_new(h, tenant, b, now_ns, &e);
        if (st != TD_OK)
            return st;
        /* requests from 0; cost and spend only noted */
        memset(&e->last, 0, sizeof e->last);
        e->last.cost_nano = s->cost_nano;
        e->last.cost_period = s->cost_period;
        e->last.spend_nano = s->spend_nano;
        e->last.spend_start = s->spend_start;
        e->last.spend_period = s->spend_period;
    }
    advance(e, b);
    td_history_point *p = slot(e, e->last_b);
    uint64_t d[TD_OUT_COUNT];
    for (size_t o = 0; o < TD_OUT_COUNT; o++)
        d[o] = grew(s->out[o], e->last.out[o]);
    p->accepted = add32(p->accepted, d[TD_OUT_ACCEPTED]);
    p->limited = add32(p->limited, d[TD_OUT_RATE_LIMITED] + d[TD_OUT_CONCURRENCY_LIMITED] +
                                       d[TD_OUT_BUDGET_EXCEEDED]);
    p->shed = add32(p->shed, d[TD_OUT_SHED]);
    p->errors = add32(p->errors, d[TD_OUT_UPSTREAM_ERROR] + d[TD_OUT_TIMEOUT]);
    p->other = add32(p->other, d[TD_OUT_BAD_REQUEST] + d[TD_OUT_UNAUTHORIZED] +
                                   d[TD_OUT_CLIENT_CLOSED] + d[TD_OUT_BUDGET_CUT] +
                                   d[TD_OUT_NO_ROUTE]);
    for (size_t k = 0; k < NLAT; k++)
        e->lat[k] += grew(s->latency[k], e->last.latency[k]);
    p->p99_ms = (float)td_history_quantile_ms(e->lat, td_metrics_latency_bounds_ns,
                                              TD_METRICS_LATENCY_BUCKETS, 0.99);
    int64_t cost_high = e->last.cost_nano, spend_high = s->spend_nano;
    p->cost_nano += grew_period(s->cost_nano, &cost_high, s->cost_period != e->last.cost_period);
    if (s->spend_period >= 0 && s->spend_period == e->last.spend_period) {
        spend_high = e->last.spend_nano;
        p->spend_nano += grew_period(s->spend_nano, &spend_high,
                                     s->spend_start != e->last.spend_start);
    }
    e->last = *s;
    e->last.cost_nano = cost_high;
    e->last.spend_nano = spend_high;
    return TD_OK;
}

bool td_history_series(const td_history *h, const char *tenant, int64_t now_ns,
                       td_history_point *out)
{
    memset(out, 0, TD_HISTORY_BUCKETS * sizeof *out);
    for (size_t i = 0; i < TD_HISTORY_BUCKETS; i++)
        out[i].p99_ms = NAN;
    entry *e = find(h, tenant);
    if (!e)
        return false;
    int64_t end = bucket_of(now_ns);
    for (size_t i = 0; i < TD_HISTORY_BUCKETS; i++) {
        int64_t b = end - (TD_HISTORY_BUCKETS - 1) + (int64_t)i;
        /* buckets after the last sample are empty; the ring holds the
         * TD_HISTORY_BUCKETS up to the last sample's */
        if (b <= e->last_b && b > e->last_b - TD_HISTORY_BUCKETS && b >= e->first_b)
            out[i] = *slot(e, b);
    }
    return true;
}

int64_t td_history_spend(const td_history *h, const char *tenant, int64_t now_ns,
                         int64_t window_ns, int64_t *covered_ns)
{
    *covered_ns = 0;
    entry *e = find(h, tenant);
    if (!e || window_ns <= 0)
        return 0;
    int64_t end = bucket_of(now_ns);
    int64_t n = (window_ns + BUCKET_NS - 1) / BUCKET_NS;
    if (n > TD_HISTORY_BUCKETS)
        n = TD_HISTORY_BUCKETS;
    int64_t sum = 0;
    for (int64_t b = end - n + 1; b <= end; b++)
        if (b <= e->last_b && b > e->last_b - TD_HISTORY_BUCKETS && b >= e->first_b)
            sum += slot(e, b)->spend_nano;
    int64_t from = (end - n + 1) * BUCKET_NS;
    if (e->first_ns > from)
        from = e->first_ns;
    *covered_ns = now_ns - from > BUCKET_NS ? now_ns - from : BUCKET_NS;
    return sum;
}

double td_history_quantile_ms(const uint64_t *counts, const uint64_t *bounds_ns, size_t nbounds,
                              double q)
{
    uint64_t total = 0;
    for (size_t k = 0; k <= nbounds; k++)
        total += counts[k];
    if (total == 0 || nbounds == 0)
        return NAN;
    double rank = q * (double)total, below = 0;
    for (size_t k = 0; k <= nbounds; k++) {
        if (below + (double)counts[k] < rank) {
            below += (double)counts[k];
            continue;
        }
        if (k == nbounds)
            break;
        double lo = k ? (double)bounds_ns[k - 1] : 0, hi = (double)bounds_ns[k];
        return (lo + (hi - lo) * (rank - below) / (double)counts[k]) / 1e6;
    }
    return (double)bounds_ns[nbounds - 1] / 1e6;
}
