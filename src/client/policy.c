/* policy.c - the decision core of the well-behaved client: sliding-window
 * counts for adaptive throttling and the retry budget, and jittered
 * backoff. Pure logic: time comes in as now_ns, randomness from a seeded
 * generator or the caller's. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tenantd/client.h"

#define DEFAULT_K         2.0
#define DEFAULT_WINDOW_NS (120ull * 1000000000ull)
#define DEFAULT_BUCKETS   120u
#define DEFAULT_ATTEMPTS  3u
#define DEFAULT_RATIO     0.1
#define DEFAULT_BASE_NS   (100ull * 1000000ull)
#define DEFAULT_CAP_NS    (10ull * 1000000000ull)
#define DEFAULT_SEED      0x9e3779b97f4a7c15ull
#define MAX_BUCKETS       3600u
#define DEFAULT_PADDING   8

/* One slice of the window; epoch is now_ns / width when it was last reset,
 * so a bucket left over from an earlier lap reads as empty. */
typedef struct {
    uint64_t epoch;
    uint64_t requests, accepts, calls, retries;
} bucket;

struct td_client {
    pthread_mutex_t mu;
    td_client_opts o;
    uint64_t width_ns;
    uint64_t rng;
    bucket *buckets;
    td_client_counters n;
};

void td_client_opts_default(td_client_opts *o)
{
    memset(o, 0, sizeof *o);
    o->k = DEFAULT_K;
    o->window_ns = DEFAULT_WINDOW_NS;
    o->window_buckets = DEFAULT_BUCKETS;
    o->max_attempts = DEFAULT_ATTEMPTS;
    o->retry_ratio = DEFAULT_RATIO;
    o->backoff_base_ns = DEFAULT_BASE_NS;
    o->backoff_cap_ns = DEFAULT_CAP_NS;
    o->padding = DEFAULT_PADDING;
}

td_status td_client_create(const td_client_opts *opts, td_client **out, td_err *err)
{
    td_client_opts o;
    if (opts)
        o = *opts;
    else
        memset(&o, 0, sizeof o);
    /* Zero means "default" field by field. retry_ratio 0 is a real choice
     * (no retries) only when max_attempts says so too, so it defaults. */
    if (o.k == 0)
        o.k = DEFAULT_K;
    if (o.window_ns == 0)
        o.window_ns = DEFAULT_WINDOW_NS;
    if (o.window_buckets == 0)
        o.window_buckets = DEFAULT_BUCKETS;
    if (o.max_attempts == 0)
        o.max_attempts = DEFAULT_ATTEMPTS;
    if (o.retry_ratio == 0)
        o.retry_ratio = DEFAULT_RATIO;
    if (o.backoff_base_ns == 0)
        o.backoff_base_ns = DEFAULT_BASE_NS;
    if (o.backoff_cap_ns == 0)
        o.backoff_cap_ns = DEFAULT_CAP_NS;
    if (o.seed == 0)
        o.seed = DEFAULT_SEED;
    if (o.padding == 0)
        o.padding = DEFAULT_PADDING;
    else if (o.padding < 0)
        o.padding = 0;

    if (!isfinite(o.k) || o.k < 1)
        return td_err_set(err, TD_EINVAL, "client: k %g: want a number >= 1", o.k);
    if (!isfinite(o.retry_ratio) || o.retry_ratio < 0 || o.retry_ratio > 1)
        return td_err_set(err, TD_EINVAL, "client: retry_ratio %g: want 0..1", o.retry_ratio);
    if (o.window_buckets > MAX_BUCKETS)
        return td_err_set(err, TD_EINVAL, "client: window_buckets %u: want at most %u",
                          o.window_buckets, MAX_BUCKETS);
    if (o.window_ns < o.window_buckets)
        return td_err_set(err, TD_EINVAL, "client: window %llu ns is shorter than its buckets",
                          (unsigned long long)o.window_ns);
    if (o.backoff_base_ns > o.backoff_cap_ns)
        return td_err_set(err, TD_EINVAL, "client: backoff base %llu ns is above its cap %llu ns",
                          (unsigned long long)o.backoff_base_ns,
                          (unsigned long long)o.backoff_cap_ns);

    td_client *c = calloc(1, sizeof *c);
    if (!c)
        return td_err_set(err, TD_ENOMEM, "client: out of memory");
    c->buckets = calloc(o.window_buckets, sizeof *c->buckets);
    if (!c->buckets || pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c->buckets);
        free(c);
        return td_err_set(err, TD_ENOMEM, "client: out of memory");
    }
    for (uint32_t i = 0; i < o.window_buckets; i++)
        c->buckets[i].epoch = UINT64_MAX;
    c->o = o;
    c->width_ns = o.window_ns / o.window_buckets;
    c->rng = o.seed;
    *out = c;
    return TD_OK;
}

void td_client_destroy(td_client *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->mu);
    free(c->buckets);
    free(c);
}

void td_client_get_counters(td_client *c, td_client_counters *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->n;
    pthread_mutex_unlock(&c->mu);
}

const char *td_client_decision_name(td_client_decision d)
{
    switch (d) {
    case TD_CLIENT_SEND:
        return "send";
    case TD_CLIENT_DONE:
        return "done";
    case TD_CLIENT_RETRY:
        return "retry";
    case TD_CLIENT_DROPPED:
        return "dropped";
    case TD_CLIENT_NO_ATTEMPTS:
        return "attempts exhausted";
    case TD_CLIENT_NO_BUDGET:
        return "retry budget exhausted";
    case TD_CLIENT_DEADLINE:
        return "deadline exceeded";
    }
    return "?";
}

/* splitmix64: small, seedable, good enough for jitter and drop decisions. */
static double rand01(td_client *c)
{
    if (c->o.rand01) {
        double r = c->o.rand01(c->o.rand_ctx);
        return r < 0 ? 0 : r >= 1 ? nextafter(1.0, 0.0) : r;
    }
    uint64_t z = (c->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* The bucket for now_ns, emptied if it was last used a lap ago. */
static bucket *current(td_client *c, uint64_t now_ns)
{
    uint64_t epoch = now_ns / c->width_ns;
    bucket *b = &c->buckets[epoch % c->o.window_buckets];
    if (b->epoch != epoch) {
        memset(b, 0, sizeof *b);
        b->epoch = epoch;
    }
    return b;
}

/* Sums the buckets whose epoch lies within the window ending at now_ns. */
static bucket totals(const td_client *c, uint64_t now_ns)
{
    uint64_t epoch = now_ns / c->width_ns;
    bucket t = {0, 0, 0, 0, 0};
    for (uint32_t i = 0; i < c->o.window_buckets; i++) {
        const bucket *b = &c->buckets[i];
        if (b->epoch == UINT64_MAX || b->epoch > epoch || epoch - b->epoch >= c->o.window_buckets)
            continue;
        t.requests += b->requests;
        t.accepts += b->accepts;
        t.calls += b->calls;
        t.retries += b->retries;
    }
    return t;
}

static double drop_probability(const td_client *c, uint64_t now_ns)
{
    if (c->o.no_throttle)
        return 0;
    bucket t = totals(c, now_ns);
    double p = ((double)t.requests - c->o.k * (double)t.accepts - (double)c->o.padding) /
               ((double)t.requests + 1);
    return p > 0 ? p : 0;
}

double td_client_drop_probability(td_client *c, uint64_t now_ns)
{
    pthread_mutex_lock(&c->mu);
    double p = drop_probability(c, now_ns);
    pthread_mutex_unlock(&c->mu);
    return p;
}

void td_client_window(td_client *c, uint64_t now_ns, uint64_t *requests, uint64_t *accepts,
                      uint64_t *calls, uint64_t *retries)
{
    pthread_mutex_lock(&c->mu);
    bucket t = totals(c, now_ns);
    pthread_mutex_unlock(&c->mu);
    if (requests)
        *requests = t.requests;
    if (accepts)
        *accepts = t.accepts;
    if (calls)
        *calls = t.calls;
    if (retries)
        *retries = t.retries;
}

void td_client_call_begin(td_client *c, td_client_call *call, uint64_t now_ns, uint64_t deadline_ns)
{
    call->deadline_ns = deadline_ns;
    call->attempts = 0;
    pthread_mutex_lock(&c->mu);
    current(c, now_ns)->calls++;
    pthread_mutex_unlock(&c->mu);
}

td_client_decision td_client_should_send(td_client *c, td_client_call *call, uint64_t now_ns)
{
    td_client_decision d = TD_CLIENT_SEND;
    pthread_mutex_lock(&c->mu);
    double p = drop_probability(c, now_ns);
    current(c, now_ns)->requests++;
    if (call->deadline_ns && now_ns >= call->deadline_ns) {
        c->n.deadline_exceeded++;
        d = TD_CLIENT_DEADLINE;
    } else if (p > 0 && rand01(c) < p) {
        c->n.dropped++;
        d = TD_CLIENT_DROPPED;
    } else {
        c->n.sent++;
        call->attempts++;
    }
    pthread_mutex_unlock(&c->mu);
    return d;
}

/* Full jitter (AWS architecture blog, "Exponential Backoff and Jitter"):
 * uniform in [0, min(cap, base * 2^n)], so retries from many clients
 * spread out instead of arriving in waves. */
static uint64_t backoff(td_client *c, uint32_t n)
{
    uint64_t ceil = c->o.backoff_base_ns;
    for (uint32_t i = 0; i < n && ceil < c->o.backoff_cap_ns; i++)
        ceil = ceil > UINT64_MAX / 2 ? UINT64_MAX : ceil * 2;
    if (ceil > c->o.backoff_cap_ns)
        ceil = c->o.backoff_cap_ns;
    return (uint64_t)(rand01(c) * (double)(ceil + 1));
}

static bool retryable(int status, uint64_t retry_after_ns)
{
    if (retry_after_ns == TD_CLIENT_NEVER)
        return false;
    return status == 429 || status == 503 || status == TD_CLIENT_ECONNECT;
}

td_client_decision td_client_on_result(td_client *c, td_client_call *call, uint64_t now_ns,
                                       int status, uint64_t retry_after_ns, uint64_t *wait_ns)
{
    if (wait_ns)
        *wait_ns = 0;
    pthread_mutex_lock(&c->mu);
    bucket *b = current(c, now_ns);
    bool accepted = status > 0 && status != 429 && status < 500;
    td_client_decision d = TD_CLIENT_DONE;
    if (accepted) {
        b->accepts++;
        c->n.accepted++;
    }
    if (!retryable(status, retry_after_ns))
        goto out;
    if (call->attempts >= c->o.max_attempts) {
        c->n.attempts_exhausted++;
        d = TD_CLIENT_NO_ATTEMPTS;
        goto out;
    }
    bucket t = totals(c, now_ns);
    double allowed = c->o.retry_ratio * (double)t.calls + (double)c->o.retry_min;
    if ((double)(t.retries + 1) > allowed) {
        c->n.budget_exhausted++;
        d = TD_CLIENT_NO_BUDGET;
        goto out;
    }
    uint64_t w = backoff(c, call->attempts ? call->attempts - 1 : 0);
    if (retry_after_ns > w)
        w = retry_after_ns;
    if (call->deadline_ns && (now_ns >= call->deadline_ns || w >= call->deadline_ns - now_ns)) {
        c->n.deadline_exceeded++;
        d = TD_CLIENT_DEADLINE;
        goto out;
    }
    b->retries++;
    c->n.retried++;
    d = TD_CLIENT_RETRY;
    if (wait_ns)
        *wait_ns = w;
out:
    pthread_mutex_unlock(&c->mu);
    return d;
}
