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

/* What pod_sets_json makes of "name: k=v, k=v; name: k=v". */
typedef enum {
    SETS_MERGED,  /* every set's pairs in one object; a set needs no "name:" */
    SETS_LIST,    /* [{"name": name, "flavors": {pairs}}, ...] (Kueue's podSetAssignments) */
    SETS_BY_NAME, /* {name: {pairs}, ...} */
} sets_shape;

static json_t *string_value(const char *v)
{
    return json_string(v);
}

static json_t *integer_value(const char *v)
{
    return json_integer(strtoll(v, NULL, 10));
}

/* The pod sets of s ("main: cpu=a, gpu=b; w1: gpu=c", as td_queue_event's
 * flavors and placement say them) as JSON of the given shape, each pair's
 * value made by value. A set without "name:" counts only when merged;
 * pairs without '=' are skipped. NULL out of memory. */
static json_t *pod_sets_json(const char *s, sets_shape shape, json_t *(*value)(const char *))
{
    json_t *out = shape == SETS_LIST ? json_array() : json_object();
    char *buf = strdup(s);
    if (!out || !buf) {
        free(buf);
        json_decref(out);
        return NULL;
    }
    for (char *s1 = NULL, *ps = strtok_r(buf, ";", &s1); ps; ps = strtok_r(NULL, ";", &s1)) {
        char *colon = strchr(ps, ':');
        json_t *set = out;
        if (!colon && shape != SETS_MERGED)
            continue;
        if (shape != SETS_MERGED) {
            *colon = '\0';
            while (*ps == ' ')
                ps++;
            set = json_object();
            if (shape == SETS_LIST)
                json_array_append_new(out, json_pack("{s:s,s:O}", "name", ps, "flavors", set));
            else
                json_object_set(out, ps, set);
            json_decref(set); /* out holds it */
        }
        for (char *s2 = NULL, *it = strtok_r(colon ? colon + 1 : ps, ", ", &s2); it;
             it = strtok_r(NULL, ", ", &s2)) {
            char *eq = strchr(it, '=');
            if (eq) {
                *eq = '\0';
                json_object_set_new(set, it, value(eq + 1));
            }
        }
    }
    free(buf);
    return out;
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
    td_intervals_opts io = {wls, narr, lg->cfg, lg->start_ns, (int64_t)t, true, 0};
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

/* One simulation on its virtual clock: the queue, the arrivals in order,
 * per workload (by queue id) and per ClusterQueue what the report needs. */
typedef struct {
    td_queue *q;
    const arrival *arr;
    size_t narr;
    const sim_ledger *lg;
    sim_wl *w;
    cq_stats *st;
    size_t ncq;
    size_t *ids; /* arrival i's queue id, for i < ai */
    size_t ai;   /* arrivals submitted */
    size_t seen; /* queue events already counted */
    uint64_t t;
} sim;

/* The ClusterQueues' GPU use (and borrowing) from s->t to next. */
static void accrue(sim *s, uint64_t next)
{
    double dt = (double)(next - s->t) / NS;
    for (size_t c = 0; c < s->ncq; c++) {
        s->st[c].gpu_s += gpu_of(s->q, c, false) * dt;
        s->st[c].borrowed_s += gpu_of(s->q, c, true) * dt;
    }
    s->t = next;
}

/* The next instant anything happens: an arrival or a finish; NEVER if none. */
static uint64_t next_instant(const sim *s)
{
    uint64_t next = s->ai < s->narr ? s->arr[s->ai].submit_ns : NEVER;
    for (size_t i = 0; i < s->ai; i++)
        if (s->w[s->ids[i]].finish_ns != NEVER && s->w[s->ids[i]].finish_ns < next)
            next = s->w[s->ids[i]].finish_ns;
    return next;
}

static void finish_due(sim *s)
{
    for (size_t i = 0; i < s->ai; i++) {
        sim_wl *x = &s->w[s->ids[i]];
        if (x->finish_ns == s->t) {
            x->finish_ns = NEVER;
            td_queue_finish(s->q, s->ids[i], s->t, NULL);
        }
    }
}

/* simulate --server: a live admitted workload keeps its recorded flavors
 * and nodes (Kueue's status.admission), not re-decided. */
static int restore_live(sim *s, const json_t *doc, size_t id)
{
    td_err err;
    const json_t *rec = td_json_path(doc, "status.tenantd");
    if (!s->lg->origin_ns || !rec || !td_json_str(rec, "state") ||
        strcmp(td_json_str(rec, "state"), "Admitted") != 0)
        return TD_EXIT_OK;
    if (td_queue_restore_admission(s->q, id, td_json_path(doc, "status.admission"), s->t,
                                   json_is_true(json_object_get(rec, "borrowing")),
                                   &err) != TD_OK) {
        fprintf(stderr, "tenantctl simulate: live workload %s: %s\n",
                td_queue_workload_key(s->q, id), err.msg);
        return TD_EXIT_USAGE;
    }
    sim_wl *x = &s->w[id];
    x->admitted_ns = x->first_admit_ns = s->t;
    x->ever_admitted = true;
    x->finish_ns = s->t + x->remaining_ns;
    return TD_EXIT_OK;
}

/* Submits the arrivals due at s->t, in file order. */
static int submit_due(sim *s)
{
    while (s->ai < s->narr && s->arr[s->ai].submit_ns == s->t) {
        const arrival *a = &s->arr[s->ai];
        td_err err;
        size_t id;
        if (td_queue_submit(s->q, a->doc, a->m, s->t, &id, &err) != TD_OK) {
            fprintf(stderr, "tenantctl simulate: %s\n", err.msg);
            return TD_EXIT_USAGE;
        }
        s->ids[s->ai] = id;
        s->w[id].submit_ns = s->t;
        s->w[id].runtime_ns = s->w[id].remaining_ns = a->runtime_ns;
        s->w[id].finish_ns = NEVER;
        int rc = restore_live(s, a->doc, id);
        if (rc != TD_EXIT_OK)
            return rc;
        s->ai++;
    }
    return TD_EXIT_OK;
}

/* The queue's events since the last call, into the workloads' clocks and
 * the ClusterQueues' counts. */
static void count_events(sim *s)
{
    const td_queue_event *ev;
    size_t ne = td_queue_events(s->q, &ev);
    for (; s->seen < ne; s->seen++) {
        const td_queue_event *e = &ev[s->seen];
        sim_wl *x = &s->w[e->workload];
        cq_stats *c = &s->st[e->cluster_queue];
        if (e->type == TD_QEV_ADMITTED) {
            c->admitted++;
            x->admitted_ns = s->t;
            x->finish_ns = s->t + x->remaining_ns;
            if (!x->ever_admitted) {
                x->ever_admitted = true;
                x->first_admit_ns = s->t;
                double *p = realloc(c->waits, (c->nwaits + 1) * sizeof *p);
                if (p) {
                    c->waits = p;
                    p[c->nwaits++] = (double)(s->t - x->submit_ns) / NS;
                }
            }
        } else if (e->type == TD_QEV_PREEMPTED) {
            c->preempted++;
            if (e->by != TD_QUEUE_NONE)
                s->st[td_queue_workload_cq(s->q, e->by)].caused++;
            x->remaining_ns -= s->t - x->admitted_ns;
            x->finish_ns = NEVER;
        } else if (e->type == TD_QEV_FINISHED) {
            c->finished++;
        }
    }
}

/* Runs the clock until nothing can move or until_ns: at each instant
 * completions, then arrivals, then one admission pass. */
static int run_clock(sim *s, uint64_t until_ns)
{
    int rc;
    for (;;) {
        uint64_t next = next_instant(s);
        if (next == NEVER || (until_ns != NEVER && next > until_ns))
            break;
        accrue(s, next);
        finish_due(s);
        if ((rc = submit_due(s)) != TD_EXIT_OK)
            return rc;
        if (td_queue_schedule(s->q, s->t, NULL) != TD_OK) {
            fprintf(stderr, "tenantctl simulate: out of memory\n");
            return TD_EXIT_USAGE;
        }
        count_events(s);
    }
    if (until_ns != NEVER && until_ns > s->t)
        accrue(s, until_ns);
    return TD_EXIT_OK;
}

static double wait_mean(const cq_stats *c)
{
    double mean = 0;
    for (size_t k = 0; k < c->nwaits; k++)
        mean += c->waits[k] / (double)c->nwaits;
    return mean;
}

static json_t *event_json(const sim *s, const td_queue_event *e)
{
    td_queue *q = s->q;
    json_t *o = json_object();
    json_object_set_new(o, "t", json_real((double)(e->t_ns - s->lg->origin_ns) / NS));
    json_object_set_new(o, "type", json_string(type_name(e->type)));
    json_object_set_new(o, "workload", json_string(td_queue_workload_key(q, e->workload)));
    json_object_set_new(o, "clusterQueue", json_string(td_queue_cq_name(q, e->cluster_queue)));
    json_object_set_new(o, "flavors", pod_sets_json(e->flavors, SETS_MERGED, string_value));
    json_object_set_new(o, "podSetAssignments",
                        pod_sets_json(e->flavors, SETS_LIST, string_value));
    json_object_set_new(o, "borrowing", json_boolean(e->borrowing));
    if (e->type == TD_QEV_ADMITTED)
        json_object_set_new(o, "placement",
                            pod_sets_json(e->placement, SETS_BY_NAME, integer_value));
    if (e->type == TD_QEV_PREEMPTED || e->type == TD_QEV_REQUEUED ||
        e->type == TD_QEV_WOULD_PREEMPT) {
        json_object_set_new(o, "by", json_string(td_queue_workload_key(q, e->by)));
        json_object_set_new(o, "level", json_string(e->level));
    }
    json_object_set_new(o, "reason", json_string(e->reason));
    return o;
}

static json_t *queue_json(const sim *s, size_t c, double span_h)
{
    cq_stats *x = &s->st[c];
    json_t *o = json_object();
    json_object_set_new(o, "admitted", json_integer((json_int_t)x->admitted));
    json_object_set_new(o, "finished", json_integer((json_int_t)x->finished));
    json_object_set_new(o, "preemptedWorkloads", json_integer((json_int_t)x->preempted));
    json_object_set_new(o, "preemptionsCaused", json_integer((json_int_t)x->caused));
    json_object_set_new(o, "gpuHours", json_real(x->gpu_s / 3600.0));
    json_object_set_new(o, "borrowedGpuHours", json_real(x->borrowed_s / 3600.0));
    json_object_set_new(o, "nominalGpuHours", json_real(gpu_nominal(s->q, c) * span_h));
    json_object_set_new(o, "waitMean", json_real(wait_mean(x)));
    json_object_set_new(o, "waitP50", json_real(percentile(x->waits, x->nwaits, 0.5)));
    json_object_set_new(o, "waitP99", json_real(percentile(x->waits, x->nwaits, 0.99)));
    return o;
}

/* --format json: events, queues, pending and utilization, on stdout. */
static void print_json(const sim *s, double span_h, double util)
{
    td_queue *q = s->q;
    json_t *root = json_object(), *events = json_array(), *queues = json_object();
    const td_queue_event *ev;
    size_t ne = td_queue_events(q, &ev);
    for (size_t i = 0; i < ne; i++)
        if (ev[i].t_ns >= s->lg->origin_ns)
            json_array_append_new(events, event_json(s, &ev[i]));
    for (size_t c = 0; c < s->ncq; c++)
        json_object_set_new(queues, td_queue_cq_name(q, c), queue_json(s, c, span_h));
    json_t *pending = json_array();
    for (size_t i = 0; i < td_queue_workload_count(q); i++)
        if (td_queue_workload_state(q, i) == TD_WL_PENDING)
            json_array_append_new(pending, json_pack("{s:s,s:s}", "workload",
                                                     td_queue_workload_key(q, i), "reason",
                                                     td_queue_workload_reason(q, i)));
    json_object_set_new(root, "events", events);
    json_object_set_new(root, "queues", queues);
    json_object_set_new(root, "pending", pending);
    json_object_set_new(root, "utilization", json_real(util));
    json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    fputc('\n', stdout);
    json_decref(root);
}

static void print_events_table(const sim *s)
{
    const td_queue_event *ev;
    size_t ne = td_queue_events(s->q, &ev);
    printf("%-9s %-10s %-24s %-14s %-34s %s\n", "TIME(s)", "EVENT", "WORKLOAD", "CLUSTERQUEUE",
           "FLAVORS", "REASON");
    for (size_t i = 0; i < ne; i++) {
        const td_queue_event *e = &ev[i];
        bool on = e->type == TD_QEV_ADMITTED && *e->placement;
        if (e->t_ns < s->lg->origin_ns)
            continue;
        printf("%-9g %-10s %-24s %-14s %-34s %s%s%s%s%s%s\n",
               (double)(e->t_ns - s->lg->origin_ns) / NS, type_name(e->type),
               td_queue_workload_key(s->q, e->workload), td_queue_cq_name(s->q, e->cluster_queue),
               *e->flavors ? e->flavors : "-", e->reason, *e->level ? " [" : "", e->level,
               *e->level ? "]" : "", on ? "; placed on " : "", on ? e->placement : "");
    }
}

/* The table: the timeline, the per-ClusterQueue summary, utilization and
 * what is still pending, on stdout. */
static void print_table(const sim *s, double span_h, double util)
{
    td_queue *q = s->q;
    print_events_table(s);
    printf("\n%-14s %8s %9s %6s %9s %9s %9s %12s %12s\n", "CLUSTERQUEUE", "ADMITTED",
           "PREEMPTED", "CAUSED", "WAIT-MEAN", "WAIT-P50", "WAIT-P99", "GPU-H USED",
           "GPU-H NOMINAL");
    for (size_t c = 0; c < s->ncq; c++) {
        cq_stats *x = &s->st[c];
        double mean = wait_mean(x);
        double p50 = percentile(x->waits, x->nwaits, 0.5);
        double p99 = percentile(x->waits, x->nwaits, 0.99);
        printf("%-14s %8zu %9zu %6zu %8.1fs %8.1fs %8.1fs %12.3f %12.3f\n", td_queue_cq_name(q, c),
               x->admitted, x->preempted, x->caused, mean, p50, p99, x->gpu_s / 3600.0,
               gpu_nominal(q, c) * span_h);
        if (x->borrowed_s > 0)
            printf("%-14s   of which borrowed: %.3f GPU-h\n", "", x->borrowed_s / 3600.0);
    }
    printf("GPU utilization of nominal quota: %.1f%% over %gs\n", util * 100.0,
           (double)s->t / NS);
    bool header = false;
    for (size_t i = 0; i < td_queue_workload_count(q); i++)
        if (td_queue_workload_state(q, i) == TD_WL_PENDING) {
            if (!header)
                printf("\npending at the end:\n");
            header = true;
            printf("  %-24s %s\n", td_queue_workload_key(q, i), td_queue_workload_reason(q, i));
        }
}

/* Simulates arr (sorted) on q until until_ns (NEVER: until nothing moves),
 * writes the ledger if lg asks, prints the report. An exit status. */
static int run(td_queue *q, arrival *arr, size_t narr, uint64_t until_ns, bool json,
               const sim_ledger *lg)
{
    size_t n = narr ? narr : 1, ncq = td_queue_cq_count(q);
    sim s = {q, arr, narr, lg, calloc(n, sizeof(sim_wl)), calloc(ncq ? ncq : 1, sizeof(cq_stats)),
             ncq, calloc(n, sizeof(size_t)), 0, 0, 0};
    int rc = TD_EXIT_OK;
    if (!s.w || !s.st || !s.ids) {
        fprintf(stderr, "tenantctl simulate: out of memory\n");
        rc = TD_EXIT_USAGE;
    }
    if (rc == TD_EXIT_OK)
        rc = run_clock(&s, until_ns);
    if (rc == TD_EXIT_OK && lg->dir)
        rc = write_ledger(q, arr, s.ids, s.ai, s.t, lg);
    if (rc == TD_EXIT_OK) {
        double span_h = (double)s.t / NS / 3600.0, used_total = 0, nominal_total = 0;
        for (size_t c = 0; c < ncq; c++) {
            used_total += s.st[c].gpu_s / 3600.0;
            nominal_total += gpu_nominal(q, c) * span_h;
        }
        double util = nominal_total > 0 ? used_total / nominal_total : 0;
        if (json)
            print_json(&s, span_h, util);
        else
            print_table(&s, span_h, util);
    }
    for (size_t c = 0; s.st && c < ncq; c++)
        free(s.st[c].waits);
    free(s.st);
    free(s.w);
    free(s.ids);
    return rc;
}

/* The command line of a local simulate. */
typedef struct {
    const char *configs[MAX_FILES], *file;
    size_t nconfigs;
    uint64_t until_ns;
    bool json;
    sim_ledger lg;
} sim_opts;

/* The flags into o; -1 to go on, else the exit status (messages printed). */
static int parse_args(int argc, char **argv, sim_opts *o)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'}, {"file", required_argument, NULL, 'f'},
        {"until", required_argument, NULL, 'u'},  {"format", required_argument, NULL, 'o'},
        {"json", no_argument, NULL, 'j'},         {"help", no_argument, NULL, 'h'},
        {"ledger", required_argument, NULL, 'L'}, {"start", required_argument, NULL, 'S'},
        /* internal, for simulate --server (cmd_simulate_remote.c) */
        {"origin-ns", required_argument, NULL, 'O'},
        {NULL, 0, NULL, 0}};
    const char *start = NULL;
    int c;
    *o = (sim_opts){.until_ns = NEVER};
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:f:o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            if (td_cli_add_file("simulate", o->configs, &o->nconfigs, MAX_FILES, optarg) != 0)
                return TD_EXIT_USAGE;
            break;
        case 'f': o->file = optarg; break;
        case 'u': {
            char *end;
            double d = strtod(optarg, &end);
            if (end == optarg || *end || !(d >= 0) || d > 1e9) {
                fprintf(stderr, "tenantctl simulate: --until: \"%s\" is not seconds >= 0\n",
                        optarg);
                return TD_EXIT_USAGE;
            }
            o->until_ns = (uint64_t)llround(d * NS);
            break;
        }
        case 'o':
            if (td_cli_choice(optarg, "table|json") < 0) {
                fprintf(stderr, "tenantctl simulate: --format: must be table or json\n");
                return TD_EXIT_USAGE;
            }
            o->json = td_cli_choice(optarg, "table|json") == 1;
            break;
        case 'j': o->json = true; break;
        case 'L': o->lg.dir = optarg; break;
        case 'S': start = optarg; break;
        case 'O': o->lg.origin_ns = strtoull(optarg, NULL, 10); break;
        case 'h': usage(stdout); return TD_EXIT_OK;
        default: usage(stderr); return TD_EXIT_USAGE;
        }
    }
    if (!o->file || o->nconfigs == 0 || optind != argc) {
        fprintf(stderr, "tenantctl simulate: -c PLATFORM and -f WORKLOADS are required\n");
        usage(stderr);
        return TD_EXIT_USAGE;
    }
    td_err e;
    if (!start) {
        o->lg.start_ns = (int64_t)time(NULL) / 3600 * 3600 * 1000000000LL;
    } else if (!o->lg.dir) {
        fprintf(stderr, "tenantctl simulate: --start goes with --ledger DIR\n");
        return TD_EXIT_USAGE;
    } else if (td_rfc3339_parse(start, &o->lg.start_ns, &e) != TD_OK) {
        fprintf(stderr, "tenantctl simulate: --start: %s\n", e.msg);
        return TD_EXIT_USAGE;
    }
    return -1;
}

/* What a local simulate loads: the -c files then the -f file, the config
 * builder that checks their envelopes and the queue sealed over them. */
typedef struct {
    td_manifest *ms[MAX_FILES + 1];
    size_t nm;
    td_config_builder *b;
    td_queue *q;
    arrival *arr;
    size_t narr;
} sim_input;

static void input_fini(sim_input *in)
{
    free(in->arr);
    td_queue_destroy(in->q);
    td_config_builder_destroy(in->b);
    for (size_t i = 0; i < in->nm; i++)
        td_manifest_destroy(in->ms[i]);
}

/* Loads the files into in->b and in->q. The config layer checks every
 * object's envelope; the queue the Kueue fields it acts on. Both name
 * file:line. 0, or -1 with the message printed. */
static int load_input(const sim_opts *o, sim_input *in)
{
    td_err err;
    for (size_t i = 0; i <= o->nconfigs; i++) {
        if (td_manifest_load_file(i < o->nconfigs ? o->configs[i] : o->file, &in->ms[in->nm],
                                  &err) != TD_OK)
            goto fail;
        in->nm++;
    }
    if (td_config_builder_create(NULL, &in->b, &err) != TD_OK || td_queue_create(&in->q, &err) != TD_OK)
        goto fail;
    for (size_t i = 0; i < in->nm; i++) {
        if (td_config_builder_add_manifest(in->b, in->ms[i], &err) != TD_OK)
            goto fail;
        for (size_t d = 0; d < td_manifest_count(in->ms[i]); d++)
            if (td_queue_add_object(in->q, td_manifest_doc(in->ms[i], d), in->ms[i], &err) != TD_OK)
                goto fail;
    }
    if (td_queue_seal(in->q, &err) != TD_OK)
        goto fail;
    return 0;
fail:
    fprintf(stderr, "tenantctl simulate: %s\n", err.msg);
    return -1;
}

/* The Workloads of the files as arrivals, sorted by submit time then file
 * order; the -f file's arrive after the live state (origin_ns). 0, or -1
 * with the message printed. */
static int collect_arrivals(const sim_opts *o, sim_input *in)
{
    for (size_t i = 0; i < in->nm; i++)
        for (size_t d = 0; d < td_manifest_count(in->ms[i]); d++) {
            json_t *doc = td_manifest_doc(in->ms[i], d);
            const char *kind = td_json_str(doc, "kind");
            if (!kind || strcmp(kind, "Workload") != 0)
                continue;
            arrival *p = realloc(in->arr, (in->narr + 1) * sizeof *p);
            if (!p) {
                fprintf(stderr, "tenantctl simulate: out of memory\n");
                return -1;
            }
            in->arr = p;
            arrival *a = &p[in->narr];
            *a = (arrival){in->ms[i], doc, 0, 0, in->narr};
            if (parse_seconds(in->ms[i], doc, "tenantd.dev/submit-at-seconds", false,
                              &a->submit_ns) != 0 ||
                parse_seconds(in->ms[i], doc, "tenantd.dev/runtime-seconds", true,
                              &a->runtime_ns) != 0)
                return -1;
            if (i == o->nconfigs) /* the -f file arrives after the live state */
                a->submit_ns += o->lg.origin_ns;
            in->narr++;
        }
    qsort(in->arr, in->narr, sizeof *in->arr, cmp_arrival);
    return 0;
}

int td_cmd_simulate(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--server") == 0 || strcmp(argv[i], "-s") == 0 ||
            strncmp(argv[i], "--server=", 9) == 0)
            return td_cmd_simulate_remote(argc, argv);
    sim_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc != -1)
        return rc;
    sim_input in = {{NULL}, 0, NULL, NULL, NULL, 0};
    rc = TD_EXIT_USAGE;
    if (load_input(&o, &in) == 0 && collect_arrivals(&o, &in) == 0) {
        td_config *cfg = NULL;
        td_err err;
        if (o.lg.dir && td_config_builder_finish(in.b, &cfg, &err) != TD_OK) {
            fprintf(stderr, "tenantctl simulate: %s\n", err.msg);
        } else {
            o.lg.cfg = cfg;
            rc = run(in.q, in.arr, in.narr, o.until_ns, o.json, &o.lg);
        }
        td_config_unref(cfg);
    }
    input_fini(&in);
    return rc;
}
