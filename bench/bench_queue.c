/* bench_queue.c - one full admission pass of the batch queue: N pending
 * workloads over C ClusterQueues in 10 cohorts (two flavors, cpu and
 * nvidia.com/gpu, borrowing allowed), timed with the monotonic clock.
 * Usage: bench_queue [N [C]]  (default 100000 1000; without arguments also
 * 1k and 10k). With --json, one JSON line per run; run one size per process
 * to read that size's peak RSS (VmHWM). With --fingerprint (after --json if
 * both), a hash of every decision and final state on stderr. The pass is
 * timed on the monotonic clock and in CPU time (getrusage); reading every
 * reason afterwards (reasons are worded when read) is timed apart. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "queue/queue.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time (user + system) of this process so far, in seconds: on a
 * shared machine a fairer figure than the wall clock. */
static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* Peak resident set of this process so far, in KiB (VmHWM), or -1. */
static long peak_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

static int json_out;
static int fingerprint;

static double one(size_t n, int ncq)
{
    td_queue *q;
    td_err err;
    double t_setup = now_s();
    if (td_queue_create(&q, &err) != TD_OK)
        exit(1);
    char name[64];
    const char *flavors[] = {"a100", "h100"};
    for (int f = 0; f < 2; f++) {
        json_t *rf = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "kueue.x-k8s.io/v1beta1", "kind",
                               "ResourceFlavor", "metadata", "name", flavors[f]);
        td_queue_add_object(q, rf, NULL, &err);
        json_decref(rf);
    }
    for (int c = 0; c < ncq; c++) {
        snprintf(name, sizeof name, "cq-%d", c);
        char cohort[32];
        snprintf(cohort, sizeof cohort, "cohort-%d", c % 10);
        json_t *fl = json_array();
        for (int f = 0; f < 2; f++)
            json_array_append_new(
                fl, json_pack("{s:s,s:[{s:s,s:i},{s:s,s:i,s:i}]}", "name", flavors[f], "resources",
                              "name", "cpu", "nominalQuota", 64, "name", "nvidia.com/gpu",
                              "nominalQuota", 8, "borrowingLimit", 8));
        json_t *cq = json_pack(
            "{s:s,s:s,s:{s:s},s:{s:s,s:s,s:{s:s,s:s},s:[{s:[s,s],s:o}]}}", "apiVersion",
            "kueue.x-k8s.io/v1beta1", "kind", "ClusterQueue", "metadata", "name", name, "spec",
            "cohort", cohort, "queueingStrategy", c % 2 ? "StrictFIFO" : "BestEffortFIFO",
            "preemption", "withinClusterQueue", "LowerPriority", "reclaimWithinCohort", "Any",
            "resourceGroups", "coveredResources", "cpu", "nvidia.com/gpu", "flavors", fl);
        if (td_queue_add_object(q, cq, NULL, &err) != TD_OK) {
            fprintf(stderr, "%s\n", err.msg);
            exit(1);
        }
        json_decref(cq);
        json_t *lq = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s}}", "apiVersion",
                               "kueue.x-k8s.io/v1beta1", "kind", "LocalQueue", "metadata", "name",
                               name, "namespace", "ns", "spec", "clusterQueue", name);
        td_queue_add_object(q, lq, NULL, &err);
        json_decref(lq);
    }
    if (td_queue_seal(q, &err) != TD_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    /* Seeded, so every run queues the same workloads. */
    unsigned seed = 12345;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        char wl[64], gpus[8];
        snprintf(wl, sizeof wl, "wl-%zu", i);
        snprintf(name, sizeof name, "cq-%u", (seed >> 8) % (unsigned)ncq);
        snprintf(gpus, sizeof gpus, "%u", 1 + (seed >> 20) % 4);
        json_t *w = json_pack(
            "{s:s,s:s,s:{s:s,s:s},s:{s:s,s:i,s:[{s:s,s:i,s:{s:{s:[{s:s,s:{s:{s:s,s:s}}}]}}}]}}",
            "apiVersion", "kueue.x-k8s.io/v1beta1", "kind", "Workload", "metadata", "name", wl,
            "namespace", "ns", "spec", "queueName", name, "priority", (int)((seed >> 4) % 3),
            "podSets", "name", "main", "count", 1 + (int)((seed >> 12) % 2), "template", "spec",
            "containers", "name", "c", "resources", "requests", "cpu", "2", "nvidia.com/gpu",
            gpus);
        if (td_queue_submit(q, w, NULL, 0, NULL, &err) != TD_OK) {
            fprintf(stderr, "%s\n", err.msg);
            exit(1);
        }
        json_decref(w);
    }
    double t0 = now_s(), c0 = cpu_s();
    double setup = t0 - t_setup;
    size_t admitted = 0;
    td_queue_schedule(q, 0, &admitted);
    double dt = now_s() - t0, cpu = cpu_s() - c0;
    /* reading every reason (as the fingerprint and a status writer do):
     * reasons kept as numbers are worded here */
    double r0 = cpu_s();
    size_t reason_bytes = 0;
    for (size_t i = 0; i < td_queue_workload_count(q); i++)
        reason_bytes += strlen(td_queue_workload_reason(q, i));
    double read_cpu = cpu_s() - r0;
    const td_queue_event *ev;
    size_t ne = td_queue_events(q, &ev), pre = 0;
    /* Decision fingerprint: FNV-1a over every event in order (type,
     * workload, queue, preemptor, borrowing, level, flavors, reason), so a
     * change that must not alter a decision can be checked run to run. */
    uint64_t fp = 1469598103934665603ull;
#define FP_BYTES(p, len)                                                                           \
    do {                                                                                           \
        const unsigned char *b_ = (const unsigned char *)(p);                                      \
        for (size_t k_ = 0; k_ < (len); k_++)                                                      \
            fp = (fp ^ b_[k_]) * 1099511628211ull;                                                 \
    } while (0)
    for (size_t i = 0; i < ne; i++) {
        pre += ev[i].type == TD_QEV_PREEMPTED;
        uint64_t v[5] = {(uint64_t)ev[i].type, ev[i].workload, ev[i].cluster_queue, ev[i].by,
                         ev[i].borrowing};
        FP_BYTES(v, sizeof v);
        FP_BYTES(ev[i].level, strlen(ev[i].level) + 1);
        FP_BYTES(ev[i].flavors, strlen(ev[i].flavors) + 1);
        FP_BYTES(ev[i].placement, strlen(ev[i].placement) + 1);
        FP_BYTES(ev[i].reason, strlen(ev[i].reason) + 1);
    }
    /* and the final state and reason of every workload */
    size_t nw = td_queue_workload_count(q);
    for (size_t i = 0; i < nw; i++) {
        uint64_t st = (uint64_t)td_queue_workload_state(q, i);
        FP_BYTES(&st, sizeof st);
        const char *r = td_queue_workload_reason(q, i);
        FP_BYTES(r, strlen(r) + 1);
        const char *f = td_queue_workload_flavors(q, i);
        FP_BYTES(f, strlen(f) + 1);
    }
#undef FP_BYTES
    if (fingerprint)
        fprintf(stderr, "fingerprint n=%zu events=%zu admitted=%zu preempted=%zu %016llx\n", n,
                ne, admitted, pre, (unsigned long long)fp);
    if (json_out)
        printf("{\"workloads\":%zu,\"clusterQueues\":%d,\"cohorts\":10,\"pass_s\":%.6f,"
               "\"pass_cpu_s\":%.6f,\"reasons_read_cpu_s\":%.6f,\"reason_bytes\":%zu,"
               "\"setup_s\":%.3f,\"admitted\":%zu,\"preempted\":%zu,\"pending\":%zu,"
               "\"peak_rss_kb\":%ld}\n",
               n, ncq, dt, cpu, read_cpu, reason_bytes, setup, admitted, pre,
               n - admitted + pre, peak_rss_kb());
    else
        printf("pending=%zu clusterQueues=%d cohorts=10: one pass %.3f s (%.3f s CPU), %zu "
               "admitted, %zu preempted, %zu still pending; reading the reasons %.3f s CPU\n",
               n, ncq, dt, cpu, admitted, pre, n - admitted + pre, read_cpu);
    td_queue_destroy(q);
    return dt;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--json") == 0) {
        json_out = 1;
        argc--;
        argv++;
    }
    if (argc > 1 && strcmp(argv[1], "--fingerprint") == 0) {
        fingerprint = 1;
        argc--;
        argv++;
    }
    size_t n = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 100000;
    int ncq = argc > 2 ? atoi(argv[2]) : 1000;
    if (n == 0 || ncq < 10) {
        fprintf(stderr, "usage: bench_queue [--json] [--fingerprint] [WORKLOADS [CLUSTERQUEUES>=10]]\n");
        return 2;
    }
    if (argc <= 1) {
        one(1000, ncq);
        one(10000, ncq);
    }
    one(n, ncq);
    return 0;
}
