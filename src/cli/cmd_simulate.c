/* cmd_simulate.c - `tenantctl simulate`: the batch queue (src/queue/) on a
 * virtual clock. Workloads arrive at tenantd.dev/submit-at-seconds, run for
 * tenantd.dev/runtime-seconds once admitted, and free their quota; a
 * preempted one goes back to pending and keeps the time it already ran.
 * Same input, same output: there is no real clock and no randomness. */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "core/config.h"
#include "core/duration.h"
#include "queue/intervals.h"
#include "io/ledger.h"
#include "core/manifest.h"
#include "queue/queue.h"

#define NS 1000000000.0
#define NEVER UINT64_MAX
#define MAX_FILES 32

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tenantctl simulate -c PLATFORM.yaml... -f WORKLOADS.yaml [--until SECONDS]\n"
            "                          [--format table|json] [--ledger DIR [--start TIME]]\n\n"
            "Runs tenantd's batch queue (Kueue's ResourceFlavor, ClusterQueue, LocalQueue,\n"
            "WorkloadPriorityClass, Kueue's Configuration for fairSharing, with PriorityClass;\n"
            "tenantd's NodePool for gang placement on nodes) on a virtual clock and prints\n"
            "the timeline of admissions, preemptions, requeues and completions, then a\n"
            "per-ClusterQueue summary and the workloads still pending with why.\n\n"
            "  -c, --config FILE    platform objects (repeatable)\n"
            "  -f, --file FILE      Workloads, each with the annotations\n"
            "                       tenantd.dev/submit-at-seconds (default 0) and\n"
            "                       tenantd.dev/runtime-seconds (required)\n"
            "      --until SECONDS  stop the clock there (default: when nothing can move)\n"
            "      --format FMT     table (default) or json\n"
            "      --ledger DIR     also write every admitted interval (one record per flavor;\n"
            "                       still running at the end: outcome running) into\n"
            "                       DIR/ledger.db, for `tenantctl report --data DIR`\n"
            "      --start TIME     the virtual clock's 0 as an RFC 3339 time for --ledger\n"
            "                       (default: the current hour); the same --start writes\n"
            "                       the same record ids, so a rerun counts nothing twice\n\n"
            "Against a running tenantd (a dry run; nothing changes there):\n"
            "  tenantctl simulate --server URL -f WORKLOADS.yaml [--until S] [--format F]\n"
            "                     [--live-runtime SECONDS] [remote flags as for apply]\n"
            "starts from its live queues: its ClusterQueues, flavors, cohorts and nodes,\n"
            "its admitted workloads (running for --live-runtime, default: past the end)\n"
            "and its pending ones in their order; WORKLOADS then arrive at their\n"
            "submit-at seconds after that state. Only what happens from then on prints.\n\n"
            "At one instant: completions first, then arrivals in file order, then one\n"
            "admission pass whose events keep the order it decided them in.\n\n"
            "exit status: 0 ran, 2 bad input (file:line: field)\n");
}

typedef struct {
    const td_manifest *m;
    json_t *doc;
    uint64_t submit_ns, runtime_ns;
    size_t order; /* file order, to break ties */
} arrival;

typedef struct {
    uint64_t submit_ns, runtime_ns, remaining_ns, admitted_ns, finish_ns, first_admit_ns;
    bool ever_admitted;
} sim_wl;

typedef struct {
    size_t admitted, preempted, caused, finished;
    double gpu_s, borrowed_s, *waits;
    size_t nwaits;
} cq_stats;

static int parse_seconds(const td_manifest *m, json_t *doc, const char *key, bool required,
                         uint64_t *out)
{
    json_t *ann = td_json_path(doc, "metadata.annotations");
    json_t *v = json_object_get(ann, key);
    td_err err;
    if (!v) {
        if (!required) {
            *out = 0;
            return 0;
        }
        td_manifest_err(m, doc, &err, TD_EINVAL, "Workload %s: metadata.annotations.%s: required",
                        td_json_str(doc, "metadata.name"), key);
        fprintf(stderr, "tenantctl simulate: %s\n", err.msg);
        return -1;
    }
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    char *end = NULL;
    double d = s ? strtod(s, &end) : (json_is_number(v) ? json_number_value(v) : -1);
    if ((s && (end == s || *end)) || !(d >= 0) || d > 1e9) {
        td_manifest_err(m, v, &err, TD_EINVAL,
                        "Workload %s: metadata.annotations.%s: must be seconds, a number >= 0",
                        td_json_str(doc, "metadata.name"), key);
        fprintf(stderr, "tenantctl simulate: %s\n", err.msg);
        return -1;
    }
    *out = (uint64_t)llround(d * NS);
    return 0;
}

static int cmp_arrival(const void *a, const void *b)
{
    const arrival *x = a, *y = b;
    if (x->submit_ns != y->submit_ns)
        return x->submit_ns < y->submit_ns ? -1 : 1;
    return x->order < y->order ? -1 : (x->order > y->order);
}

static bool is_gpu(const char *r)
{
    size_t n = strlen(r);
    return strcmp(r, "gpu") == 0 || (n > 4 && strcmp(r + n - 4, "/gpu") == 0);
}

static double gpu_of(const td_queue *q, size_t cq, bool borrowed)
{
    double g = 0;
    for (size_t r = 0; r < td_queue_resource_count(q); r++)
        if (is_gpu(td_queue_resource_name(q, r)))
            g += (double)(borrowed ? td_queue_cq_borrowed_milli(q, cq, td_queue_resource_name(q, r))
                                   : td_queue_cq_usage_milli(q, cq, td_queue_resource_name(q, r))) /
                 1000.0;
    return g;
}

static double gpu_nominal(const td_queue *q, size_t cq)
{
    double g = 0;
    for (size_t r = 0; r < td_queue_resource_count(q); r++)
        if (is_gpu(td_queue_resource_name(q, r)))
            g += (double)td_queue_cq_nominal_milli(q, cq, td_queue_resource_name(q, r)) / 1000.0;
    return g;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : (x > y);
}

static double percentile(double *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)ceil(p * (double)n);
    return v[i ? i - 1 : 0];
}

static const char *type_name(td_queue_event_type t)
{
    return t == TD_QEV_ADMITTED    ? "admitted"
           : t == TD_QEV_PREEMPTED ? "preempted"
           : t == TD_QEV_REQUEUED  ? "requeued"
           : t == TD_QEV_WOULD_PREEMPT ? "wouldPreempt"
                                   : "finished";
}

/* "main: cpu=a, gpu=b; w1: gpu=b" -> {"cpu":"a","gpu":"b"}. */
static json_t *flavors_json(const char *s)
{
    json_t *o = json_object();
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *s1 = NULL, *ps = strtok_r(buf, ";", &s1); ps; ps = strtok_r(NULL, ";", &s1)) {
        char *colon = strchr(ps, ':');
        for (char *s2 = NULL, *it = strtok_r(colon ? colon + 1 : ps, ", ", &s2); it;
             it = strtok_r(NULL, ", ", &s2)) {
            char *eq = strchr(it, '=');
            if (eq) {
                *eq = '\0';
                json_object_set_new(o, it, json_string(eq + 1));
            }
        }
    }
    return o;
}

/* "main: cpu=a, gpu=b; w1: gpu=c" -> Kueue's status.admission shape,
 * [{"name":"main","flavors":{"cpu":"a","gpu":"b"}},{"name":"w1",...}]: one
 * entry per pod set, since pod sets may take different flavors. */
static json_t *pod_set_assignments_json(const char *s)
{
    json_t *a = json_array();
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *s1 = NULL, *ps = strtok_r(buf, ";", &s1); ps; ps = strtok_r(NULL, ";", &s1)) {
        char *colon = strchr(ps, ':');
        if (!colon)
            continue;
        *colon = '\0';
        while (*ps == ' ')
            ps++;
        json_t *fl = json_object();
        for (char *s2 = NULL, *it = strtok_r(colon + 1, ", ", &s2); it;
             it = strtok_r(NULL, ", ", &s2)) {
            char *eq = strchr(it, '=');
            if (eq) {
                *eq = '\0';
                json_object_set_new(fl, it, json_string(eq + 1));
            }
        }
        json_array_append_new(a, json_pack("{s:s,s:o}", "name", ps, "flavors", fl));
    }
    return a;
}

/* "workers: a100-0=1, a100-1=1; launcher: x-0=1" ->
 * {"workers":{"a100-0":1,"a100-1":1},"launcher":{"x-0":1}}. */
static json_t *placement_json(const char *s)
{
    json_t *o = json_object();
    char buf[sizeof ((td_queue_event *)0)->placement];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *s1 = NULL, *ps = strtok_r(buf, ";", &s1); ps; ps = strtok_r(NULL, ";", &s1)) {
        char *colon = strchr(ps, ':');
        if (!colon)
            continue;
        *colon = '\0';
        while (*ps == ' ')
            ps++;
        json_t *nodes = json_object();
        for (char *s2 = NULL, *it = strtok_r(colon + 1, ", ", &s2); it;
             it = strtok_r(NULL, ", ", &s2)) {
            char *eq = strchr(it, '=');
            if (eq) {
                *eq = '\0';
                json_object_set_new(nodes, it, json_integer(strtoll(eq + 1, NULL, 10)));
            }
        }
        json_object_set_new(o, ps, nodes);
    }
    return o;
}

typedef struct {
    const char *dir; /* NULL: no ledger */
    int64_t start_ns;
    const td_config *cfg;
    /* simulate --server: the live state is replayed before origin_ns;
     * events before it are not printed, later times print minus it. */
    uint64_t origin_ns;
} sim_ledger;

static void count_new(const td_ledger_rec *r, void *ud)
{
    (void)r;
    (*(uint64_t *)ud)++;
}

static int append_rec(const td_ledger_rec *r, void *ud)
{
    td_ledger *l = ud;
    while (!td_ledger_append(l, r))
        td_ledger_flush(l, NULL); /* a full buffer here only means: wait for the writer */
    return 0;
}

/* Writes the timeline's admitted intervals into lg->dir/ledger.db. */
static int write_ledger(const td_queue *q, const arrival *arr, const size_t *ids, size_t narr,
                        uint64_t t, const sim_ledger *lg)
{
    const json_t **wls = calloc(narr ? narr : 1, sizeof *wls);
    if (!wls) {
        fprintf(stderr, "tenantctl simulate: out of memory\n");
        return TD_EXIT_USAGE;
    }
    for (size_t i = 0; i < narr; i++)
        if (ids[i] < narr)
            wls[ids[i]] = arr[i].doc;
    td_err err;
    td_ledger *l = NULL;
    uint64_t fresh = 0;
    td_ledger_opts lo = {.max_buffered = 4096, .flush_ms = 50, .on_commit = count_new,
                         .on_commit_ud = &fresh};
    td_status st = td_ledger_open(lg->dir, &lo, &l, &err);
    td_intervals_opts io = {wls, narr, lg->cfg, lg->start_ns, (int64_t)t, true};
    if (st == TD_OK)
        st = td_ledger_intervals(q, &io, append_rec, l, &err);
    if (st == TD_OK)
        st = td_ledger_flush(l, &err);
    uint64_t committed = l ? td_ledger_committed(l) : 0;
    td_ledger_close(l); /* after this, fresh is final */
    free(wls);
    if (st != TD_OK) {
        fprintf(stderr, "tenantctl simulate: --ledger: %s\n", err.msg);
        return TD_EXIT_USAGE;
    }
    fprintf(stderr,
            "tenantctl simulate: %llu interval records in %s/ledger.db (%llu new; ids already "
            "stored are not counted again)\n",
            (unsigned long long)committed, lg->dir, (unsigned long long)fresh);
    return TD_EXIT_OK;
}

static int run(td_queue *q, arrival *arr, size_t narr, uint64_t until_ns, bool json,
               const sim_ledger *lg)
{
    size_t n = narr;
    sim_wl *w = calloc(n ? n : 1, sizeof *w);
    size_t ncq = td_queue_cq_count(q);
    cq_stats *st = calloc(ncq ? ncq : 1, sizeof *st);
    size_t *ids = calloc(n ? n : 1, sizeof *ids);
    if (!w || !st || !ids) {
        fprintf(stderr, "tenantctl simulate: out of memory\n");
        free(w);
        free(st);
        free(ids);
        return TD_EXIT_USAGE;
    }
    uint64_t t = 0;
    size_t ai = 0, seen = 0;
    int rc = TD_EXIT_OK;
    for (;;) {
        uint64_t next = ai < narr ? arr[ai].submit_ns : NEVER;
        for (size_t i = 0; i < ai; i++)
            if (w[ids[i]].finish_ns != NEVER && w[ids[i]].finish_ns < next)
                next = w[ids[i]].finish_ns;
        if (next == NEVER || (until_ns != NEVER && next > until_ns))
            break;
        double dt = (double)(next - t) / NS;
        for (size_t c = 0; c < ncq; c++) {
            st[c].gpu_s += gpu_of(q, c, false) * dt;
            st[c].borrowed_s += gpu_of(q, c, true) * dt;
        }
        t = next;
        for (size_t i = 0; i < ai; i++) {
            sim_wl *x = &w[ids[i]];
            if (x->finish_ns == t) {
                x->finish_ns = NEVER;
                td_queue_finish(q, ids[i], t, NULL);
            }
        }
        while (ai < narr && arr[ai].submit_ns == t) {
            td_err err;
            size_t id;
            if (td_queue_submit(q, arr[ai].doc, arr[ai].m, t, &id, &err) != TD_OK) {
                fprintf(stderr, "tenantctl simulate: %s\n", err.msg);
                rc = TD_EXIT_USAGE;
                goto out;
            }
            ids[ai] = id;
            w[id].submit_ns = t;
            w[id].runtime_ns = w[id].remaining_ns = arr[ai].runtime_ns;
            w[id].finish_ns = NEVER;
            /* simulate --server: a live admitted workload keeps its recorded
             * flavors and nodes (Kueue's status.admission), not re-decided */
            const json_t *rec = td_json_path(arr[ai].doc, "status.tenantd");
            if (lg->origin_ns && rec && td_json_str(rec, "state") &&
                strcmp(td_json_str(rec, "state"), "Admitted") == 0) {
                if (td_queue_restore_admission(q, id, td_json_path(arr[ai].doc, "status.admission"),
                                               t, json_is_true(json_object_get(rec, "borrowing")),
                                               &err) != TD_OK) {
                    fprintf(stderr, "tenantctl simulate: live workload %s: %s\n",
                            td_queue_workload_key(q, id), err.msg);
                    rc = TD_EXIT_USAGE;
                    goto out;
                }
                w[id].admitted_ns = w[id].first_admit_ns = t;
                w[id].ever_admitted = true;
                w[id].finish_ns = t + w[id].remaining_ns;
            }
            ai++;
        }
        if (td_queue_schedule(q, t, NULL) != TD_OK) {
            fprintf(stderr, "tenantctl simulate: out of memory\n");
            rc = TD_EXIT_USAGE;
            goto out;
        }
        const td_queue_event *ev;
        size_t ne = td_queue_events(q, &ev);
        for (; seen < ne; seen++) {
            const td_queue_event *e = &ev[seen];
            sim_wl *x = &w[e->workload];
            cq_stats *s = &st[e->cluster_queue];
            if (e->type == TD_QEV_ADMITTED) {
                s->admitted++;
                x->admitted_ns = t;
                x->finish_ns = t + x->remaining_ns;
                if (!x->ever_admitted) {
                    x->ever_admitted = true;
                    x->first_admit_ns = t;
                    double *p = realloc(s->waits, (s->nwaits + 1) * sizeof *p);
                    if (p) {
                        s->waits = p;
                        p[s->nwaits++] = (double)(t - x->submit_ns) / NS;
                    }
                }
            } else if (e->type == TD_QEV_PREEMPTED) {
                s->preempted++;
                if (e->by != TD_QUEUE_NONE)
                    st[td_queue_workload_cq(q, e->by)].caused++;
                x->remaining_ns -= t - x->admitted_ns;
                x->finish_ns = NEVER;
            } else if (e->type == TD_QEV_FINISHED) {
                s->finished++;
            }
        }
    }
    if (until_ns != NEVER && until_ns > t) {
        double dt = (double)(until_ns - t) / NS;
        for (size_t c = 0; c < ncq; c++) {
            st[c].gpu_s += gpu_of(q, c, false) * dt;
            st[c].borrowed_s += gpu_of(q, c, true) * dt;
        }
        t = until_ns;
    }
    if (lg->dir && (rc = write_ledger(q, arr, ids, ai, t, lg)) != TD_EXIT_OK)
        goto out;

    const td_queue_event *ev;
    size_t ne = td_queue_events(q, &ev);
    double span_h = (double)t / NS / 3600.0, used_total = 0, nominal_total = 0;
    for (size_t c = 0; c < ncq; c++) {
        used_total += st[c].gpu_s / 3600.0;
        nominal_total += gpu_nominal(q, c) * span_h;
    }
    double util = nominal_total > 0 ? used_total / nominal_total : 0;
    if (json) {
        json_t *root = json_object(), *events = json_array(), *queues = json_object();
        for (size_t i = 0; i < ne; i++) {
            const td_queue_event *e = &ev[i];
            if (e->t_ns < lg->origin_ns)
                continue;
            json_t *o = json_object();
            json_object_set_new(o, "t", json_real((double)(e->t_ns - lg->origin_ns) / NS));
            json_object_set_new(o, "type", json_string(type_name(e->type)));
            json_object_set_new(o, "workload", json_string(td_queue_workload_key(q, e->workload)));
            json_object_set_new(o, "clusterQueue",
                                json_string(td_queue_cq_name(q, e->cluster_queue)));
            json_object_set_new(o, "flavors", flavors_json(e->flavors));
            json_object_set_new(o, "podSetAssignments", pod_set_assignments_json(e->flavors));
            json_object_set_new(o, "borrowing", json_boolean(e->borrowing));
            if (e->type == TD_QEV_ADMITTED)
                json_object_set_new(o, "placement", placement_json(e->placement));
            if (e->type == TD_QEV_PREEMPTED || e->type == TD_QEV_REQUEUED ||
                e->type == TD_QEV_WOULD_PREEMPT) {
                json_object_set_new(o, "by", json_string(td_queue_workload_key(q, e->by)));
                json_object_set_new(o, "level", json_string(e->level));
            }
            json_object_set_new(o, "reason", json_string(e->reason));
            json_array_append_new(events, o);
        }
        for (size_t c = 0; c < ncq; c++) {
            cq_stats *s = &st[c];
            json_t *o = json_object();
            json_object_set_new(o, "admitted", json_integer((json_int_t)s->admitted));
            json_object_set_new(o, "finished", json_integer((json_int_t)s->finished));
            json_object_set_new(o, "preemptedWorkloads", json_integer((json_int_t)s->preempted));
            json_object_set_new(o, "preemptionsCaused", json_integer((json_int_t)s->caused));
            json_object_set_new(o, "gpuHours", json_real(s->gpu_s / 3600.0));
            json_object_set_new(o, "borrowedGpuHours", json_real(s->borrowed_s / 3600.0));
            json_object_set_new(o, "nominalGpuHours", json_real(gpu_nominal(q, c) * span_h));
            double mean = 0;
            for (size_t k = 0; k < s->nwaits; k++)
                mean += s->waits[k] / (double)s->nwaits;
            json_object_set_new(o, "waitMean", json_real(mean));
            json_object_set_new(o, "waitP50", json_real(percentile(s->waits, s->nwaits, 0.5)));
            json_object_set_new(o, "waitP99", json_real(percentile(s->waits, s->nwaits, 0.99)));
            json_object_set_new(queues, td_queue_cq_name(q, c), o);
        }
        json_t *pending = json_array();
        for (size_t i = 0; i < td_queue_workload_count(q); i++)
            if (td_queue_workload_state(q, i) == TD_WL_PENDING)
                json_array_append_new(pending,
                                      json_pack("{s:s,s:s}", "workload",
                                                td_queue_workload_key(q, i), "reason",
                                                td_queue_workload_reason(q, i)));
        json_object_set_new(root, "events", events);
        json_object_set_new(root, "queues", queues);
        json_object_set_new(root, "pending", pending);
        json_object_set_new(root, "utilization", json_real(util));
        json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
        fputc('\n', stdout);
        json_decref(root);
    } else {
        printf("%-9s %-10s %-24s %-14s %-34s %s\n", "TIME(s)", "EVENT", "WORKLOAD",
               "CLUSTERQUEUE", "FLAVORS", "REASON");
        for (size_t i = 0; i < ne; i++) {
            const td_queue_event *e = &ev[i];
            bool on = e->type == TD_QEV_ADMITTED && *e->placement;
            if (e->t_ns < lg->origin_ns)
                continue;
            printf("%-9g %-10s %-24s %-14s %-34s %s%s%s%s%s%s\n",
                   (double)(e->t_ns - lg->origin_ns) / NS,
                   type_name(e->type), td_queue_workload_key(q, e->workload),
                   td_queue_cq_name(q, e->cluster_queue), *e->flavors ? e->flavors : "-",
                   e->reason, *e->level ? " [" : "", e->level, *e->level ? "]" : "",
                   on ? "; placed on " : "", on ? e->placement : "");
        }
        printf("\n%-14s %8s %9s %6s %9s %9s %9s %12s %12s\n", "CLUSTERQUEUE", "ADMITTED",
               "PREEMPTED", "CAUSED", "WAIT-MEAN", "WAIT-P50", "WAIT-P99", "GPU-H USED",
               "GPU-H NOMINAL");
        for (size_t c = 0; c < ncq; c++) {
            cq_stats *s = &st[c];
            double mean = 0;
            for (size_t k = 0; k < s->nwaits; k++)
                mean += s->waits[k] / (double)s->nwaits;
            double p50 = percentile(s->waits, s->nwaits, 0.5);
            double p99 = percentile(s->waits, s->nwaits, 0.99);
            printf("%-14s %8zu %9zu %6zu %8.1fs %8.1fs %8.1fs %12.3f %12.3f\n",
                   td_queue_cq_name(q, c), s->admitted, s->preempted, s->caused, mean, p50, p99,
                   s->gpu_s / 3600.0, gpu_nominal(q, c) * span_h);
            if (s->borrowed_s > 0)
                printf("%-14s   of which borrowed: %.3f GPU-h\n", "", s->borrowed_s / 3600.0);
        }
        printf("GPU utilization of nominal quota: %.1f%% over %gs\n", util * 100.0,
               (double)t / NS);
        bool header = false;
        for (size_t i = 0; i < td_queue_workload_count(q); i++)
            if (td_queue_workload_state(q, i) == TD_WL_PENDING) {
                if (!header)
                    printf("\npending at the end:\n");
                header = true;
                printf("  %-24s %s\n", td_queue_workload_key(q, i), td_queue_workload_reason(q, i));
            }
    }
out:
    for (size_t c = 0; c < ncq; c++)
        free(st[c].waits);
    free(st);
    free(w);
    free(ids);
    return rc;
}

int td_cmd_simulate(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--server") == 0 || strcmp(argv[i], "-s") == 0 ||
            strncmp(argv[i], "--server=", 9) == 0)
            return td_cmd_simulate_remote(argc, argv);
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'}, {"file", required_argument, NULL, 'f'},
        {"until", required_argument, NULL, 'u'},  {"format", required_argument, NULL, 'o'},
        {"json", no_argument, NULL, 'j'},         {"help", no_argument, NULL, 'h'},
        {"ledger", required_argument, NULL, 'L'}, {"start", required_argument, NULL, 'S'},
        /* internal, for simulate --server (cmd_simulate_remote.c) */
        {"origin-ns", required_argument, NULL, 'O'},
        {NULL, 0, NULL, 0}};
    const char *configs[MAX_FILES], *file = NULL;
    size_t nconfigs = 0;
    uint64_t until_ns = NEVER;
    bool json = false;
    sim_ledger lg = {NULL, 0, NULL, 0};
    const char *start = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:f:o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            if (nconfigs == MAX_FILES) {
                fprintf(stderr, "tenantctl simulate: at most %d -c files\n", MAX_FILES);
                return TD_EXIT_USAGE;
            }
            configs[nconfigs++] = optarg;
            break;
        case 'f':
            file = optarg;
            break;
        case 'u': {
            char *end;
            double d = strtod(optarg, &end);
            if (end == optarg || *end || !(d >= 0) || d > 1e9) {
                fprintf(stderr, "tenantctl simulate: --until: \"%s\" is not seconds >= 0\n",
                        optarg);
                return TD_EXIT_USAGE;
            }
            until_ns = (uint64_t)llround(d * NS);
            break;
        }
        case 'o':
            if (strcmp(optarg, "json") != 0 && strcmp(optarg, "table") != 0) {
                fprintf(stderr, "tenantctl simulate: --format: must be table or json\n");
                return TD_EXIT_USAGE;
            }
            json = strcmp(optarg, "json") == 0;
            break;
        case 'j':
            json = true;
            break;
        case 'L':
            lg.dir = optarg;
            break;
        case 'S':
            start = optarg;
            break;
        case 'O':
            lg.origin_ns = strtoull(optarg, NULL, 10);
            break;
        case 'h':
            usage(stdout);
            return TD_EXIT_OK;
        default:
            usage(stderr);
            return TD_EXIT_USAGE;
        }
    }
    if (!file || nconfigs == 0 || optind != argc) {
        fprintf(stderr, "tenantctl simulate: -c PLATFORM and -f WORKLOADS are required\n");
        usage(stderr);
        return TD_EXIT_USAGE;
    }

    if (start) {
        td_err e;
        if (!lg.dir) {
            fprintf(stderr, "tenantctl simulate: --start goes with --ledger DIR\n");
            return TD_EXIT_USAGE;
        }
        if (td_rfc3339_parse(start, &lg.start_ns, &e) != TD_OK) {
            fprintf(stderr, "tenantctl simulate: --start: %s\n", e.msg);
            return TD_EXIT_USAGE;
        }
    } else {
        lg.start_ns = (int64_t)time(NULL) / 3600 * 3600 * 1000000000LL;
    }
    td_manifest *ms[MAX_FILES + 1] = {NULL};
    size_t nm = 0;
    td_config_builder *b = NULL;
    td_queue *q = NULL;
    arrival *arr = NULL;
    size_t narr = 0;
    td_err err;
    int rc = TD_EXIT_USAGE;
    for (size_t i = 0; i <= nconfigs; i++) {
        if (td_manifest_load_file(i < nconfigs ? configs[i] : file, &ms[nm], &err) != TD_OK) {
            fprintf(stderr, "tenantctl simulate: %s\n", err.msg);
            goto out;
        }
        nm++;
    }
    /* The config layer checks every object's envelope; the queue the Kueue
     * fields it acts on. Both name file:line. */
    if (td_config_builder_create(NULL, &b, &err) != TD_OK || td_queue_create(&q, &err) != TD_OK) {
        fprintf(stderr, "tenantctl simulate: %s\n", err.msg);
        goto out;
    }
    for (size_t i = 0; i < nm; i++) {
        if (td_config_builder_add_manifest(b, ms[i], &err) != TD_OK) {
            fprintf(stderr, "tenantctl simulate: %s\n", err.msg);
            goto out;
        }
        for (size_t d = 0; d < td_manifest_count(ms[i]); d++)
            if (td_queue_add_object(q, td_manifest_doc(ms[i], d), ms[i], &err) != TD_OK) {
                fprintf(stderr, "tenantctl simulate: %s\n", err.msg);
                goto out;
            }
    }
    if (td_queue_seal(q, &err) != TD_OK) {
        fprintf(stderr, "tenantctl simulate: %s\n", err.msg);
        goto out;
    }
    for (size_t i = 0; i < nm; i++)
        for (size_t d = 0; d < td_manifest_count(ms[i]); d++) {
            json_t *doc = td_manifest_doc(ms[i], d);
            const char *kind = td_json_str(doc, "kind");
            if (!kind || strcmp(kind, "Workload") != 0)
                continue;
            arrival *p = realloc(arr, (narr + 1) * sizeof *p);
            if (!p) {
                fprintf(stderr, "tenantctl simulate: out of memory\n");
                goto out;
            }
            arr = p;
            arr[narr] = (arrival){ms[i], doc, 0, 0, narr};
            if (parse_seconds(ms[i], doc, "tenantd.dev/submit-at-seconds", false,
                              &arr[narr].submit_ns) != 0 ||
                parse_seconds(ms[i], doc, "tenantd.dev/runtime-seconds", true,
                              &arr[narr].runtime_ns) != 0)
                goto out;
            if (i == nconfigs) /* the -f file arrives after the live state */
                arr[narr].submit_ns += lg.origin_ns;
            narr++;
        }
    qsort(arr, narr, sizeof *arr, cmp_arrival);
    td_config *cfg = NULL;
    if (lg.dir) {
        if (td_config_builder_finish(b, &cfg, &err) != TD_OK) {
            fprintf(stderr, "tenantctl simulate: %s\n", err.msg);
            goto out;
        }
        lg.cfg = cfg;
    }
    rc = run(q, arr, narr, until_ns, json, &lg);
    td_config_unref(cfg);
out:
    free(arr);
    td_queue_destroy(q);
    td_config_builder_destroy(b);
    for (size_t i = 0; i < nm; i++)
        td_manifest_destroy(ms[i]);
    return rc;
}
