/* intervals.c - admitted intervals of a batch queue's workloads as ledger
 * records (see intervals.h). Walks the queue's events: ADMITTED opens an
 * interval, PREEMPTED closes it as evicted, FINISHED as finished. Part of
 * the queue module: it reads each pod set's requests from the queue's own
 * workload state. */
#include "queue/intervals.h"

#include "queue/queue_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t admitted; /* queue time, -1: not admitted */
    size_t cq;
    const char *flavors; /* the Admitted event's (the queue's events outlive the walk) */
} open_iv;

static bool is_gpu(const char *r)
{
    size_t n = strlen(r);
    return n >= 4 && strcmp(r + n - 4, "/gpu") == 0;
}

static void copy(char *dst, size_t n, const char *s)
{
    snprintf(dst, n, "%s", s ? s : "");
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static bool interruptible(const td_config *cfg, const json_t *wl)
{
    if (!cfg || !wl)
        return false;
    const char *pc = td_json_str(wl, "spec.priorityClassName");
    if (!pc)
        pc = json_string_value(
            json_object_get(td_json_path(wl, "metadata.labels"), "kueue.x-k8s.io/priority-class"));
    if (!pc)
        return false;
    json_t *const *ps;
    size_t n = td_config_list(cfg, "CostPolicy", NULL, &ps);
    for (size_t i = 0; i < n; i++) {
        json_t *classes = td_json_path(ps[i], "spec.interruptible.priorityClasses");
        for (size_t k = 0; k < json_array_size(classes); k++) {
            const char *s = json_string_value(json_array_get(classes, k));
            if (s && strcmp(s, pc) == 0)
                return true;
        }
    }
    return false;
}

static const char *label(const json_t *wl, const json_t *ns_obj, const char *key)
{
    const char *v = json_string_value(json_object_get(td_json_path(wl, "metadata.labels"), key));
    if (!v && ns_obj)
        v = json_string_value(json_object_get(td_json_path(ns_obj, "metadata.labels"), key));
    return v;
}

typedef struct {
    char flavor[TD_LEDGER_STR];
    int64_t gpu_milli, cpu_milli, memory_bytes, storage_bytes;
} flavor_sum;

/* Adds requests of pod set ps for "res=fl, res=fl" (one pod set's part of
 * an event's flavors string) into the per-flavor sums. */
static void add_podset(const td_queue *q, const workload *wk, size_t ps, const char *p,
                       const char *end, flavor_sum *sums, size_t *nsums, size_t max)
{
    while (p < end) {
        while (p < end && (*p == ' ' || *p == ','))
            p++;
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (!eq)
            return;
        const char *fe = eq + 1;
        while (fe < end && *fe != ',')
            fe++;
        size_t rl = (size_t)(eq - p), fl = (size_t)(fe - eq - 1);
        for (size_t r = 0; r < q->nres; r++) {
            if (strlen(q->resource_names[r]) != rl || memcmp(q->resource_names[r], p, rl) != 0)
                continue;
            size_t k = 0;
            while (k < *nsums && (strlen(sums[k].flavor) != fl ||
                                  memcmp(sums[k].flavor, eq + 1, fl) != 0))
                k++;
            if (k == *nsums) {
                if (*nsums == max || fl >= TD_LEDGER_STR)
                    break;
                memset(&sums[k], 0, sizeof sums[k]);
                memcpy(sums[k].flavor, eq + 1, fl);
                (*nsums)++;
            }
            int64_t m = wk->requests[ps * q->nres + r];
            const char *res = q->resource_names[r];
            if (is_gpu(res))
                sums[k].gpu_milli += m;
            else if (strcmp(res, "cpu") == 0)
                sums[k].cpu_milli += m;
            else if (strcmp(res, "memory") == 0)
                sums[k].memory_bytes += m / 1000;
            else if (strcmp(res, "ephemeral-storage") == 0 || strcmp(res, "storage") == 0)
                sums[k].storage_bytes += m / 1000;
            break;
        }
        p = fe;
    }
}

/* Emits one record per distinct flavor of w's interval [admitted, end):
 * the event's flavors string ("ps: res=fl, res=fl; ps2: ...", pod sets in
 * order) says which flavor each pod set's resources were given. */
/* The workload's measured GPU utilization, 0..1, as its job runner reported
 * it (annotation TD_GPU_UTILIZATION, e.g. DCGM's average over the run via
 * `tenantctl finish --gpu-utilization`), or -1 when unknown or malformed. */
static double gpu_utilization(const json_t *wl)
{
    const char *s = json_string_value(
        json_object_get(td_json_path(wl, "metadata.annotations"), TD_GPU_UTILIZATION));
    char *end = NULL;
    double v = s ? strtod(s, &end) : -1;
    return s && end != s && *end == '\0' && v >= 0 && v <= 1 ? v : -1;
}

static int emit(const td_queue *q, const td_intervals_opts *o, size_t w, const open_iv *iv,
                int64_t end, const char *outcome, td_ledger_cb cb, void *ud)
{
    const char *key = td_queue_workload_key(q, w);
    const workload *wk = &q->wls[w];
    const json_t *wl = w < o->nworkloads ? o->workloads[w] : NULL;
    char ns[TD_LEDGER_STR] = "";
    const char *slash = strchr(key, '/');
    if (slash)
        snprintf(ns, sizeof ns, "%.*s", (int)(slash - key), key);
    const json_t *ns_obj = o->cfg && *ns ? td_config_get(o->cfg, "Namespace", NULL, ns) : NULL;
    flavor_sum sums[16];
    size_t nsums = 0;
    const char *p = iv->flavors;
    for (size_t ps = 0; ps < wk->npodsets && *p; ps++) {
        const char *seg_end = strstr(p, "; ");
        if (!seg_end)
            seg_end = p + strlen(p);
        const char *colon = memchr(p, ':', (size_t)(seg_end - p));
        if (colon)
            add_podset(q, wk, ps, colon + 1, seg_end, sums, &nsums, 16);
        p = *seg_end ? seg_end + 2 : seg_end;
    }
    for (size_t k = 0; k < nsums; k++) {
        const char *fl = sums[k].flavor;
        td_ledger_rec r;
        memset(&r, 0, sizeof r);
        r.kind = TD_LEDGER_INTERVAL;
        r.start_ns = iv->admitted + o->offset_ns;
        r.end_ns = end + o->offset_ns;
        char id[512];
        snprintf(id, sizeof id, "%s@%lld/%s", key, (long long)r.start_ns, fl);
        if (strlen(id) < sizeof r.id)
            copy(r.id, sizeof r.id, id);
        else
            snprintf(r.id, sizeof r.id, "wl-%016llx@%lld/%.32s", (unsigned long long)fnv1a(id),
                     (long long)r.start_ns, fl);
        copy(r.tenant, sizeof r.tenant,
             o->cfg && *ns ? td_json_str(td_config_tenant_for_namespace(o->cfg, ns), "metadata.name")
                           : NULL);
        copy(r.team, sizeof r.team, label(wl, ns_obj, "team"));
        copy(r.project, sizeof r.project, label(wl, ns_obj, "project"));
        copy(r.environment, sizeof r.environment, label(wl, ns_obj, "environment"));
        copy(r.workload, sizeof r.workload, key);
        copy(r.cluster_queue, sizeof r.cluster_queue,
             iv->cq == TD_QUEUE_NONE ? "" : td_queue_cq_name(q, iv->cq));
        copy(r.flavor, sizeof r.flavor, fl);
        copy(r.outcome, sizeof r.outcome, outcome);
        r.interruptible = interruptible(o->cfg, wl);
        r.count = 1;
        r.gpu_milli = sums[k].gpu_milli;
        double util = gpu_utilization(wl);
        r.gpu_used_milli = util >= 0 && r.gpu_milli > 0 ? (int64_t)(util * (double)r.gpu_milli + 0.5)
                                                        : -1;
        r.cpu_milli = sums[k].cpu_milli;
        r.memory_bytes = sums[k].memory_bytes;
        r.storage_bytes = sums[k].storage_bytes;
        if (cb(&r, ud) != 0)
            return 1;
    }
    return 0;
}

td_status td_ledger_intervals(const td_queue *q, const td_intervals_opts *o, td_ledger_cb cb,
                              void *ud, td_err *err)
{
    size_t n = td_queue_workload_count(q);
    open_iv *iv = calloc(n ? n : 1, sizeof *iv);
    if (!iv)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        iv[i].admitted = -1;
    const td_queue_event *ev;
    size_t ne = td_queue_events(q, &ev);
    int stop = 0;
    for (size_t i = 0; i < ne && !stop; i++) {
        const td_queue_event *e = &ev[i];
        if (e->workload >= n)
            continue;
        open_iv *v = &iv[e->workload];
        if (e->type == TD_QEV_ADMITTED) {
            v->admitted = (int64_t)e->t_ns;
            v->cq = e->cluster_queue;
            v->flavors = e->flavors;
        } else if (v->admitted >= 0 &&
                   (e->type == TD_QEV_PREEMPTED || e->type == TD_QEV_FINISHED)) {
            if (!o->closed_since_ns || (int64_t)e->t_ns >= o->closed_since_ns)
                stop = emit(q, o, e->workload, v, (int64_t)e->t_ns,
                            e->type == TD_QEV_PREEMPTED ? "evicted" : "finished", cb, ud);
            v->admitted = -1;
        }
    }
    for (size_t w = 0; w < n && !stop && o->running; w++)
        if (iv[w].admitted >= 0)
            stop = emit(q, o, w, &iv[w], o->now_ns, "running", cb, ud);
    free(iv);
    return TD_OK;
}
