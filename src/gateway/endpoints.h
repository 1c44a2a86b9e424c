/* endpoints.h - which endpoint of a Route's pool a request goes to, and
 * when an endpoint is out of it: weighted power of two
 * choices over requests in flight (leastRequests) or smooth weighted round
 * robin (roundRobin), among the endpoints neither ejected nor marked
 * unhealthy; passive outlier ejection (consecutive connect failures or
 * 5xx eject an endpoint for a back-off that doubles with each ejection in
 * a row, never more than half the pool at once); the thresholds of active
 * health checks. Pure: time comes in as now_ns, randomness from a seed the
 * caller gives. Single-owner: each gateway worker has its own pool state
 * (as it has its own share of the route's queue).
 *
 * Membership: each slot of a pool came from one configured endpoint (its
 * source); a source that is a DNS name gives one slot per address it
 * resolves to (td_ep_resolved), and an address that vanishes is drained:
 * no new requests, its slot freed once nothing is in flight there. */
#ifndef TENANTD_ENDPOINTS_H
#define TENANTD_ENDPOINTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tenantd/status.h"

#define TD_EP_MAX 64 /* endpoints in one pool */
#define TD_EP_KEY 20 /* bytes of an address key (opaque here) */

/* Where a slot is in its life: FREE slots hold nothing (ep[i] of a pool
 * of n may be free when a name's addresses shrank); DRAINING ones take no
 * new request and wait for their in-flight ones to end. */
typedef enum { TD_EP_ACTIVE = 0, TD_EP_DRAINING = 1, TD_EP_FREE = 2 } td_ep_member;

/* An endpoint's address as the caller encodes it (family, port, address
 * bytes, zero padded): compared bytewise, never interpreted. */
typedef struct {
    uint8_t b[TD_EP_KEY];
} td_ep_key;

typedef enum {
    TD_BALANCE_LEAST_REQUESTS = 0,
    TD_BALANCE_ROUND_ROBIN = 1,
    TD_BALANCE_QUEUE_DEPTH = 2
} td_balance;

/* "leastRequests", "roundRobin" or "queueDepth"; TD_EINVAL otherwise. */
td_status td_balance_parse(const char *s, td_balance *out);
const char *td_balance_name(td_balance b);

/* Outlier ejection and health-check thresholds. Zeros take the defaults
 * (td_ep_pool_init says which). */
typedef struct {
    uint32_t consecutive_failures; /* failures in a row that eject (3) */
    uint64_t base_ejection_ns;     /* first ejection (1 s); doubles for each in a row */
    uint64_t max_ejection_ns;      /* the longest (30 s) */
    uint32_t unhealthy_threshold;  /* failed checks in a row that mark it unhealthy (2) */
    uint32_t healthy_threshold;    /* passed checks in a row that mark it healthy again (1) */
} td_ep_policy;

typedef struct {
    uint32_t weight;           /* > 0 */
    uint32_t inflight;         /* requests sent to it and not yet ended */
    uint32_t failures;         /* consecutive failures (passive) */
    uint32_t ejections;        /* ejections in a row: the back-off is base << (ejections - 1) */
    uint64_t ejected_until_ns; /* 0: not ejected */
    bool probation;            /* its ejection ran out and no request has succeeded since:
                                * one more failure ejects it again */
    bool unhealthy;            /* marked by active health checks */
    uint32_t checks_ok, checks_failed; /* consecutive check results */
    int64_t rr_current;                /* smooth weighted round robin */
    /* queueDepth: the endpoint's own figures as last scraped, and our
     * requests in flight there at that moment */
    double waiting, kv_usage;
    uint32_t inflight_at_scrape;
    /* membership */
    td_ep_member member;
    uint32_t src;  /* the configured endpoint it came from */
    td_ep_key key; /* its address (all zero: not known yet) */
    /* totals since it joined, for explain and /metrics */
    uint64_t requests; /* td_ep_start calls */
    uint64_t ejections_total;
} td_ep;

/* What td_ep_resolved changed: slots that joined (new, or back from
 * draining: the caller sets their address), slots that began draining
 * (the caller closes their idle connections), and addresses left out for
 * want of a free slot. */
typedef struct {
    size_t joined[TD_EP_MAX], njoined;
    size_t drained[TD_EP_MAX], ndrained;
    size_t dropped;
} td_ep_change;

typedef struct {
    td_ep ep[TD_EP_MAX];
    size_t n;
    td_balance balance;
    td_ep_policy policy;
    uint64_t rng; /* xorshift64* state, never 0 */
} td_ep_pool;

/* One endpoint slot as one gateway worker sees it, for `tenantctl explain
 * request` and /metrics (the state is per worker: views are published by
 * each worker and merged by the reader). */
typedef struct {
    uint32_t route;   /* route slot */
    uint32_t worker;  /* the gateway worker's index */
    uint32_t workers; /* after td_ep_views_merge: how many were merged */
    char address[64]; /* the address connected to, "127.0.0.2:8000" */
    char source[128]; /* the endpoint as configured, "fleet.test:8000" */
    bool from_name;   /* source is a DNS name */
    td_ep_member member;
    bool unhealthy;          /* marked by health checks */
    uint64_t ejected_for_ns; /* left of its ejection at the snapshot (0: not ejected) */
    uint32_t inflight, failures;
    uint64_t requests, ejections;
    bool scraped; /* queueDepth: a scrape has answered */
    double waiting, kv_usage;
    uint64_t scrape_age_ns;   /* at the snapshot */
    uint64_t resolved_age_ns; /* of the source's last good lookup (0: none or not a name) */
    uint64_t lookups_failed;
    bool lookup_failing;
    uint64_t snapshot_age_ns; /* filled in by the reader */
} td_ep_view;

/* Gives a malloc'd array of the views of every worker, *out, and its
 * length (0 and NULL when there are none or out of memory). */
typedef size_t (*td_ep_view_fn)(void *ctx, td_ep_view **out);

/* The state of an endpoint view in one word: "draining", "unhealthy",
 * "ejected" or "healthy". */
const char *td_ep_view_state(const td_ep_view *v);

/* Merges views of the same route and address (one per worker) into the
 * first of them, in place: in flight, requests and ejections summed; the
 * longest ejection, the most consecutive failures, the most recent scrape
 * and lookup; unhealthy or draining if any worker says so; workers counts
 * them. Returns the new length; order of first appearance is kept. */
size_t td_ep_views_merge(td_ep_view *v, size_t n);

/* Sets up p for n endpoints (1..TD_EP_MAX) with weights w (NULL: all 1;
 * a weight of 0 counts as 1), balance b, policy pol (NULL: defaults; zero
 * fields take their defaults) and the RNG seed (0 is replaced). TD_EINVAL
 * when n is out of range. */
td_status td_ep_pool_init(td_ep_pool *p, size_t n, const uint32_t *w, td_balance b,
                          const td_ep_policy *pol, uint64_t seed);

/* true if endpoint i may be picked at now_ns: an active member, not
 * ejected (or its ejection has run out) and not marked unhealthy. */
bool td_ep_available(const td_ep_pool *p, size_t i, uint64_t now_ns);

/* The endpoint for the next request, or -1 when none is available.
 * exclude (-1: none) is not picked unless it is the only one available
 * and allow_same; cap (0: none) is the in-flight count an endpoint should
 * stay under: endpoints under it are preferred, and when every available
 * one is at it the least loaded is still picked (the caller's queue
 * already admitted the request). Does not count the request: call
 * td_ep_start. queueDepth picks the available endpoint with the least
 * waiting work per unit of weight (see td_ep_scraped), then the least KV
 * cache in use, then at random. */
int td_ep_pick(td_ep_pool *p, uint64_t now_ns, int exclude, bool allow_same, uint32_t cap);

void td_ep_start(td_ep_pool *p, size_t i);
void td_ep_finish(td_ep_pool *p, size_t i);

/* Passive outcome of a request at endpoint i: ok resets its failures and
 * its back-off; a failure (connect refused or reset, a 5xx) counts, and
 * the consecutive_failures-th in a row (or the first on probation) ejects
 * it for base << (ejections in a row), at most max, unless that would
 * leave more than half the pool (n / 2, rounded down) ejected: then it
 * stays in and its failures keep counting. true if it was ejected now. */
bool td_ep_report(td_ep_pool *p, size_t i, bool ok, uint64_t now_ns);

/* Active health check result of endpoint i: unhealthy after
 * unhealthy_threshold failures in a row, healthy again after
 * healthy_threshold passes in a row (which also end an ejection).
 * true if its state changed. */
bool td_ep_check(td_ep_pool *p, size_t i, bool ok, uint64_t now_ns);

/* A scrape of endpoint i's metrics (queueDepth): waiting requests and KV
 * cache in use (0..1). Until the next, its waiting work counts as
 * waiting plus the requests this pool sent there since. */
void td_ep_scraped(td_ep_pool *p, size_t i, double waiting, double kv_usage);

/* Prometheus text exposition text[0..len): the sums of the samples of
 * the metric named waiting_name and of kv_name (any labels) into
 * *waiting and *kv. TD_ENOTFOUND when waiting_name has no sample (*kv
 * is 0 when kv_name has none). Lines that do not parse are skipped. */
td_status td_ep_parse_metrics(const char *text, size_t len, const char *waiting_name,
                              const char *kv_name, double *waiting, double *kv);

/* Sets the address key of slot i (the source's first address, known when
 * the pool is made) without changing any other state. */
void td_ep_set_key(td_ep_pool *p, size_t i, const td_ep_key *key);

/* A lookup of source src (weight w, 0 counts as 1) answered keys[0..n):
 * the source's active slots whose address is among them stay as they are
 * (in flight, ejection, health, scrape kept); the others start draining;
 * each address not among them rejoins its draining slot if it has one
 * (its state kept) or takes a free slot (fresh state; the pool grows up
 * to TD_EP_MAX slots), else it is counted in ch->dropped. Repeated keys
 * count once. TD_EINVAL for n == 0 (a lookup that found nothing: the
 * caller keeps the last good set) and nothing changes. */
td_status td_ep_resolved(td_ep_pool *p, uint32_t src, uint32_t w, const td_ep_key *keys, size_t n,
                         td_ep_change *ch);

/* Frees slot i if it is draining and nothing is in flight there (the
 * caller has closed its connections); true if it was freed. */
bool td_ep_reclaim(td_ep_pool *p, size_t i);

/* Active members of the pool. */
size_t td_ep_members(const td_ep_pool *p);

/* Endpoints ejected at now_ns. */
size_t td_ep_ejected(const td_ep_pool *p, uint64_t now_ns);

/* How long until some endpoint becomes available again, in ns (0: one is
 * available now; UINT64_MAX: only a health check can bring one back). */
uint64_t td_ep_wait_ns(const td_ep_pool *p, uint64_t now_ns);

#endif
