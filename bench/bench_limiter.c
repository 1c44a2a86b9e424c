/* bench_limiter.c - ns per td_limiter_take at 1k, 100k and 1M tenants, on 1
 * and 2 threads sharing one limiter, against the naive baseline in this
 * file: a token bucket per tenant in doubles behind a pthread mutex.
 * Tenant slots are pre-generated (seeded xorshift), the clock is virtual
 * (each thread's advances by the thread count per call: 1 call per virtual
 * ns overall), and every tenant has 1M units/s with a burst of 100, so
 * nearly every call is admitted: the CAS path, the slower one.
 *
 * Build and run (from the repository root):
 *   cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Iinclude bench/bench_limiter.c \
 *      src/core/limiter.c -lpthread -lm -o /tmp/bench_limiter && /tmp/bench_limiter
 * Add -DTD_LIMITER_SLOT_ALIGN=64 to measure one cache line per slot.
 * Usage: bench_limiter [CALLS_PER_THREAD]; the last line is the same as
 * JSON, prefixed "JSON " (scripts/bench.sh collects it). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/limiter.h"

static uint32_t OPS_PER_THREAD = 20000000u; /* argv[1] overrides */
#define IDX_LEN        (1u << 20) /* pre-generated slots per thread, cycled */
#define REPEATS        3          /* best of */
#define RATE           1e6        /* units per second */
#define BURST          100.0
#ifndef TD_LIMITER_SLOT_ALIGN /* as in limiter.c: the slot size */
#define TD_LIMITER_SLOT_ALIGN 16
#endif

/* ---- the baseline ---- */

typedef struct {
    pthread_mutex_t mu;
    double tokens;
    uint64_t last_ns;
} naive_bucket;

static naive_bucket *naive_create(size_t n)
{
    naive_bucket *b = malloc(n * sizeof *b);
    if (!b)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_init(&b[i].mu, NULL);
        b[i].tokens = BURST;
        b[i].last_ns = 0;
    }
    return b;
}

static int naive_take(naive_bucket *b, double cost, uint64_t now_ns)
{
    int ok;
    pthread_mutex_lock(&b->mu);
    if (now_ns > b->last_ns) {
        b->tokens += (double)(now_ns - b->last_ns) * RATE / 1e9;
        if (b->tokens > BURST)
            b->tokens = BURST;
        b->last_ns = now_ns;
    }
    ok = b->tokens >= cost;
    if (ok)
        b->tokens -= cost;
    pthread_mutex_unlock(&b->mu);
    return ok;
}

/* ---- the harness ---- */

typedef struct {
    int naive;
    td_limiter *lim;
    naive_bucket *buckets;
    const uint32_t *idx;
    pthread_barrier_t *start;
    uint64_t step; /* virtual ns per call */
    double ns;
    uint64_t admitted;
} worker;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *run(void *arg)
{
    worker *w = arg;
    const td_rate rate = {RATE, 1000000000ULL, BURST};
    uint64_t vnow = 1000000000ULL, admitted = 0;
    pthread_barrier_wait(w->start);
    double t0 = now_s();
    if (w->naive) {
        for (uint32_t k = 0; k < OPS_PER_THREAD; k++, vnow += w->step)
            admitted += (uint64_t)naive_take(&w->buckets[w->idx[k & (IDX_LEN - 1)]], 1, vnow);
    } else {
        for (uint32_t k = 0; k < OPS_PER_THREAD; k++, vnow += w->step)
            admitted +=
                td_limiter_take(w->lim, w->idx[k & (IDX_LEN - 1)], &rate, 1, vnow, NULL) == TD_OK;
    }
    w->ns = (now_s() - t0) * 1e9 / OPS_PER_THREAD;
    w->admitted = admitted;
    return NULL;
}

/* One configuration: per-thread ns per call (the slowest thread), best of
 * REPEATS; *admitted_pct of the last run. */
static double measure(int naive, size_t tenants, int threads, uint32_t *const *idx,
                      double *admitted_pct)
{
    double best = 1e30;
    for (int rep = 0; rep < REPEATS; rep++) {
        td_limiter *lim = NULL;
        naive_bucket *buckets = NULL;
        if (naive ? !(buckets = naive_create(tenants))
                  : td_limiter_create(tenants, &lim) != TD_OK) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, (unsigned)threads);
        worker w[2];
        pthread_t th[2];
        for (int t = 0; t < threads; t++) {
            w[t] = (worker){naive, lim, buckets, idx[t], &start, (uint64_t)threads, 0, 0};
            pthread_create(&th[t], NULL, run, &w[t]);
        }
        double worst = 0;
        uint64_t admitted = 0;
        for (int t = 0; t < threads; t++) {
            pthread_join(th[t], NULL);
            worst = w[t].ns > worst ? w[t].ns : worst;
            admitted += w[t].admitted;
        }
        best = worst < best ? worst : best;
        *admitted_pct = 100.0 * (double)admitted / ((double)OPS_PER_THREAD * threads);
        pthread_barrier_destroy(&start);
        td_limiter_destroy(lim);
        if (buckets) {
            for (size_t i = 0; i < tenants; i++)
                pthread_mutex_destroy(&buckets[i].mu);
            free(buckets);
        }
    }
    return best;
}

int main(int argc, char **argv)
{
    if (argc > 1 && atol(argv[1]) > 0)
        OPS_PER_THREAD = (uint32_t)atol(argv[1]);
    char json[4096];
    size_t jn = (size_t)snprintf(json, sizeof json, "JSON [");
    static const size_t sizes[] = {1000, 100000, 1000000};
    static const char *const labels[] = {"1k", "100k", "1M"};
    uint32_t *idx[2];
    for (int t = 0; t < 2; t++) {
        idx[t] = malloc(IDX_LEN * sizeof *idx[t]);
        if (!idx[t])
            return 1;
    }
    printf("td_limiter_take (GCRA, one CAS) vs mutex token bucket; ns per call per thread,\n"
           "best of %d x %u calls per thread; slot size %zu bytes\n\n",
           REPEATS, OPS_PER_THREAD, (size_t)TD_LIMITER_SLOT_ALIGN);
    printf("%-8s %-7s %12s %14s %8s %12s\n", "tenants", "threads", "gcra ns", "mutex-tb ns",
           "ratio", "admitted %");
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        uint64_t x = 0x9E3779B97F4A7C15ULL ^ sizes[s];
        for (int t = 0; t < 2; t++)
            for (uint32_t i = 0; i < IDX_LEN; i++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                idx[t][i] = (uint32_t)(x % sizes[s]);
            }
        for (int threads = 1; threads <= 2; threads++) {
            double pct_g, pct_n;
            double g = measure(0, sizes[s], threads, idx, &pct_g);
            double n = measure(1, sizes[s], threads, idx, &pct_n);
            printf("%-8s %-7d %12.1f %14.1f %7.1fx %12.1f\n", labels[s], threads, g, n, n / g,
                   pct_g);
            if (jn < sizeof json)
                jn += (size_t)snprintf(json + jn, sizeof json - jn,
                                       "%s{\"tenants\": \"%s\", \"threads\": %d, "
                                       "\"gcra_ns\": %.2f, \"mutex_ns\": %.2f, "
                                       "\"ratio\": %.2f, \"admitted_pct\": %.1f}",
                                       jn > 6 ? ", " : "", labels[s], threads, g, n, n / g,
                                       pct_g);
            fflush(stdout);
        }
    }
    printf("%s]\n", json);
    free(idx[0]);
    free(idx[1]);
    return 0;
}
