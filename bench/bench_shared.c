/* bench_shared.c - shared limits on Redis: tenantd's leased scheme
 * (td_shared, src/io/shared.c) against the naive design (one pipelined
 * INCR + EXPIRE round trip per request on a fixed one-second window key, as
 * envoyproxy/ratelimit does per descriptor), two replicas in one process:
 * two td_shared instances (each with its own Redis connection and refill
 * thread) or two hiredis connections, one hammering thread each.
 *
 * Two modes per design, both against one real redis-server:
 *   throughput  the limit far above the offered load: decisions per second
 *               summed over both replicas (every decision admitted).
 *   enforce     rate R per second, burst B, offered far above it for T
 *               seconds: admitted versus what the limit allows (B + R T),
 *               the excess is the over-admission.
 *
 * Usage: bench_shared HOST:PORT SECONDS
 * Prints one JSON object on stdout. Build: see scripts/bench.sh. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "io/shared.h"

#define REPLICAS 2

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec;
}

typedef struct {
    const char *host;
    int port;
    const char *addr;
    int naive;
    double rate, burst; /* per second */
    double seconds;
    const char *tag;    /* key prefix, unique per run */
    pthread_barrier_t *start;
    uint64_t decisions, admitted;
    int failed;
} replica;

static void *run_leased(void *arg)
{
    replica *r = arg;
    td_shared *s = NULL;
    td_err err;
    td_shared_opts o = {r->addr, REPLICAS, 0, 50, r->tag};
    if (td_shared_create(&o, 1, &s, &err) != TD_OK) {
        fprintf(stderr, "td_shared_create: %s\n", err.msg);
        r->failed = 1;
        pthread_barrier_wait(r->start);
        return NULL;
    }
    const td_rate rate = {r->rate, 1000000000ull, r->burst};
    pthread_barrier_wait(r->start);
    uint64_t t0 = mono_ns(), end = t0 + (uint64_t)(r->seconds * 1e9), now = t0;
    uint64_t n = 0, ok = 0;
    while (now < end) {
        for (int k = 0; k < 64; k++, n++)
            ok += td_shared_take(s, 0, "bench-tenant", &rate, 1, now, NULL) == TD_OK;
        now = mono_ns();
    }
    r->decisions = n;
    r->admitted = ok;
    td_shared_destroy(s);
    return NULL;
}

static void *run_naive(void *arg)
{
    replica *r = arg;
    struct timeval tv = {0, 50000};
    redisContext *c = redisConnectWithTimeout(r->host, r->port, tv);
    if (!c || c->err) {
        fprintf(stderr, "redis connect: %s\n", c ? c->errstr : "out of memory");
        r->failed = 1;
        pthread_barrier_wait(r->start);
        if (c)
            redisFree(c);
        return NULL;
    }
    pthread_barrier_wait(r->start);
    uint64_t t0 = mono_ns(), end = t0 + (uint64_t)(r->seconds * 1e9);
    uint64_t n = 0, ok = 0;
    char key[128];
    while (mono_ns() < end) {
        snprintf(key, sizeof key, "%s:bench-tenant:%llu", r->tag, (unsigned long long)wall_s());
        redisAppendCommand(c, "INCR %s", key);
        redisAppendCommand(c, "EXPIRE %s 2", key);
        redisReply *a = NULL, *b = NULL;
        if (redisGetReply(c, (void **)&a) != REDIS_OK || redisGetReply(c, (void **)&b) != REDIS_OK) {
            r->failed = 1;
            break;
        }
        n++;
        if (a->type == REDIS_REPLY_INTEGER && (double)a->integer <= r->rate)
            ok++;
        freeReplyObject(a);
        freeReplyObject(b);
    }
    r->decisions = n;
    r->admitted = ok;
    redisFree(c);
    return NULL;
}

/* One run of one design and mode; totals over the replicas. */
static int measure(const char *addr, const char *host, int port, int naive, double rate,
                   double burst, double seconds, const char *tag, uint64_t *decisions,
                   uint64_t *admitted, double *elapsed)
{
    replica r[REPLICAS];
    pthread_t th[REPLICAS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, REPLICAS);
    for (int i = 0; i < REPLICAS; i++) {
        r[i] = (replica){host, port, addr, naive, rate, burst, seconds, tag, &start, 0, 0, 0};
        pthread_create(&th[i], NULL, naive ? run_naive : run_leased, &r[i]);
    }
    uint64_t t0 = mono_ns();
    int failed = 0;
    *decisions = *admitted = 0;
    for (int i = 0; i < REPLICAS; i++) {
        pthread_join(th[i], NULL);
        failed |= r[i].failed;
        *decisions += r[i].decisions;
        *admitted += r[i].admitted;
    }
    *elapsed = (double)(mono_ns() - t0) / 1e9;
    if (*elapsed > seconds)
        *elapsed = seconds; /* setup and teardown are not decisions */
    pthread_barrier_destroy(&start);
    return failed;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: bench_shared HOST:PORT SECONDS\n");
        return 2;
    }
    const char *addr = argv[1];
    double seconds = atof(argv[2]);
    char host[64];
    const char *colon = strrchr(addr, ':');
    if (!colon || (size_t)(colon - addr) >= sizeof host || seconds <= 0) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = 0;
    int port = atoi(colon + 1);

    /* enforce: R = 5000/s, B = 1000; the naive design's window limit is R. */
    const double R = 5000, B = 1000;
    printf("{\"replicas\": %d, \"seconds\": %g, \"enforce_rate\": %g, \"enforce_burst\": %g",
           REPLICAS, seconds, R, B);
    for (int naive = 0; naive <= 1; naive++) {
        uint64_t d, a;
        double el;
        char tag[64];
        snprintf(tag, sizeof tag, "bench:%s:tp:%llu:", naive ? "naive" : "leased",
                 (unsigned long long)mono_ns());
        if (measure(addr, host, port, naive, 1e12, 1e12, seconds, tag, &d, &a, &el))
            return 1;
        double dps = (double)d / el;
        snprintf(tag, sizeof tag, "bench:%s:en:%llu:", naive ? "naive" : "leased",
                 (unsigned long long)mono_ns());
        uint64_t d2, a2;
        double el2;
        if (measure(addr, host, port, naive, R, B, seconds, tag, &d2, &a2, &el2))
            return 1;
        /* The naive design has no burst: a window admits R; a run of T
         * seconds touches ceil(T)+1 windows at most, so count what the
         * token bucket allows for both, which is what the user asked for. */
        double allowed = B + R * el2;
        printf(", \"%s\": {\"decisions_per_s\": %.0f, \"enforce_decisions\": %llu, "
               "\"enforce_admitted\": %llu, \"enforce_allowed\": %.0f, "
               "\"over_admission\": %.0f, \"over_admission_pct\": %.2f}",
               naive ? "naive" : "leased", dps, (unsigned long long)d2, (unsigned long long)a2,
               allowed, (double)a2 - allowed, 100.0 * ((double)a2 - allowed) / allowed);
    }
    printf("}\n");
    return 0;
}
