/* history.h - the last hour of each tenant, for the dashboard's charts: a
 * ring of TD_HISTORY_BUCKETS buckets of TD_HISTORY_BUCKET_S seconds per
 * tenant, fed with samples of sums kept elsewhere (the gateway's counters
 * and histogram, the metered cost, the budget spend). Pure: the caller
 * passes now_ns; one thread records and reads (the daemon's loop). */
#ifndef TENANTD_HISTORY_H
#define TENANTD_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/metrics.h"
#include "tenantd/status.h"

#define TD_HISTORY_BUCKETS  360
#define TD_HISTORY_BUCKET_S 10

/* Cumulative sums of one tenant at one instant. out and latency never go
 * down in a process (a lower value is taken as a restart from 0). Cost and
 * spend are sums of a period, named by cost_period and spend_start: in a
 * new period all of the value is new; within one, only what rises above
 * the highest value seen counts (a dip, a reservation given back or an
 * interval between the queue and the ledger, is no negative cost). */
typedef struct {
    uint64_t out[TD_OUT_COUNT];                            /* requests by outcome */
    uint64_t latency[TD_METRICS_LATENCY_BUCKETS + 1];      /* per bucket, last +Inf */
    int64_t cost_nano;   /* metered cost of the period, in the CostPolicy's currency */
    int64_t cost_period; /* its period (e.g. its start) */
    int64_t spend_nano;  /* spend of the budget of period kind spend_period */
    int64_t spend_start; /* the start of that period */
    int spend_period;    /* td_period of spend_nano; -1: the tenant has no budget */
} td_history_sample;

/* What one bucket holds: requests by group of outcomes, the p99 latency
 * of those that reached the upstream (NaN: none did), cost and budget
 * spend added in the bucket. */
typedef struct {
    uint32_t accepted; /* 2xx from the upstream */
    uint32_t limited;  /* 429: rate, concurrency, budget */
    uint32_t shed;     /* 503 */
    uint32_t errors;   /* 502, 504 */
    uint32_t other;    /* 400, 401, 404, client closed, budget cut */
    float p99_ms;
    int64_t cost_nano;
    int64_t spend_nano;
} td_history_point;

typedef struct td_history td_history;

/* An empty history for at most max_tenants tenants (later ones are not
 * kept). TD_EINVAL for 0, TD_ENOMEM. */
td_status td_history_create(size_t max_tenants, td_history **out);
void td_history_destroy(td_history *h);

/* Adds what tenant's sums s (borrowed) grew by since its last sample to
 * the bucket of now_ns. The first sample of a tenant counts its requests
 * from 0 (the gateway's counters start with the process) and only notes
 * its cost and spend (those were loaded from the ledger: not this hour's).
 * A sample whose spend_period differs from the last one's only notes the
 * spend (a budget added or removed: its catch-up is no burn). A clock that
 * went back counts into the newest bucket. TD_EQUOTA: the tenant is new
 * and max_tenants are kept; TD_ENOMEM; nothing is recorded then. */
td_status td_history_record(td_history *h, const char *tenant, const td_history_sample *s,
                            int64_t now_ns);

/* The TD_HISTORY_BUCKETS buckets of tenant ending with the one of now_ns
 * (oldest first; the last one still filling) into out. false, and out
 * all zero (p99 NaN), for a tenant without samples. */
bool td_history_series(const td_history *h, const char *tenant, int64_t now_ns,
                       td_history_point *out);

/* Budget spend of tenant in the window_ns before now_ns (whole buckets,
 * the current one included), and in *covered_ns the part of that window
 * the history saw (from the tenant's first sample, at least one bucket):
 * spend / covered is the burn rate. 0 and 0 without samples. */
int64_t td_history_spend(const td_history *h, const char *tenant, int64_t now_ns,
                         int64_t window_ns, int64_t *covered_ns);

/* The q-quantile (0 < q < 1) of a histogram of per-bucket counts
 * (nbounds finite upper bounds in ns, then +Inf) in ms, interpolated
 * within its bucket as Prometheus' histogram_quantile does; NaN when
 * empty; the largest bound when it falls in +Inf. */
double td_history_quantile_ms(const uint64_t *counts, const uint64_t *bounds_ns, size_t nbounds,
                              double q);

#endif
