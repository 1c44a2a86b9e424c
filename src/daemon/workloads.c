/* workloads.c - the daemon's view of the batch queue. Kueue persists each
 * admission; tenantd, for now, replays the stored Workloads (submissions and
 * the finishes `tenantctl finish` records) in time order through the
 * scheduler on every read, so a workload's state is a pure function of the
 * stored objects. Deleting a workload erases it from that history. */
#include "daemon/workloads.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tenantd/queue.h"

static const char *const setup_kinds[] = {"ResourceFlavor", "Cohort", "ClusterQueue",
                                          "LocalQueue", "PriorityClass",
                                          "WorkloadPriorityClass", "NodePool"};

static uint64_t annotation_ns(const json_t *wl, const char *key)
{
    const char *s =
        json_string_value(json_object_get(td_json_path(wl, "metadata.annotations"), key));
    return s ? strtoull(s, NULL, 10) : 0;
}

typedef struct {
    uint64_t t;
    bool finish;
    size_t wl; /* index into the stored list */
} replay_ev;

static int by_time(const void *a, const void *b)
{
    const replay_ev *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    if (x->finish != y->finish)
        return x->finish ? -1 : 1;
    return x->wl < y->wl ? -1 : x->wl > y->wl;
}

td_status td_workloads_replay(const td_config *cfg, td_queue **out_q, json_t ***out_wls,
                              size_t *out_n, td_err *err)
{
    td_queue *q = NULL;
    td_status st = td_queue_create(&q, err);
    for (size_t k = 0; st == TD_OK && k < sizeof setup_kinds / sizeof setup_kinds[0]; k++) {
        json_t *const *objs;
        size_t n = td_config_list(cfg, setup_kinds[k], NULL, &objs);
        for (size_t i = 0; st == TD_OK && i < n; i++)
            st = td_queue_add_object(q, objs[i], NULL, err);
    }
    if (st == TD_OK)
        st = td_queue_seal(q, err);
    json_t *const *wls;
    size_t n = td_config_list(cfg, "Workload", NULL, &wls);
    replay_ev *evs = n ? malloc(2 * n * sizeof *evs) : NULL;
    size_t *qid = n ? malloc(n * sizeof *qid) : NULL;
    size_t nev = 0;
    if (n && (!evs || !qid))
        st = td_err_set(err, TD_ENOMEM, "out of memory");
    for (size_t i = 0; st == TD_OK && i < n; i++) {
        /* td_config_list is in key order, so ties replay the same way */
        evs[nev++] = (replay_ev){annotation_ns(wls[i], TD_SUBMITTED_AT), false, i};
        uint64_t fin = annotation_ns(wls[i], TD_FINISHED_AT);
        if (fin)
            evs[nev++] = (replay_ev){fin, true, i};
        qid[i] = TD_QUEUE_NONE;
    }
    if (st == TD_OK && nev)
        qsort(evs, nev, sizeof *evs, by_time);
    for (size_t i = 0; st == TD_OK && i < nev;) {
        uint64_t t = evs[i].t;
        for (; st == TD_OK && i < nev && evs[i].t == t; i++) {
            size_t w = evs[i].wl;
            if (!evs[i].finish) {
                st = td_queue_submit(q, wls[w], NULL, t, &qid[w], err);
            } else if (qid[w] != TD_QUEUE_NONE) {
                td_wl_state ws = td_queue_workload_state(q, qid[w]);
                /* Under quotas changed since, history may differ: a workload
                 * reported finished while still pending leaves the queue. */
                if (ws == TD_WL_ADMITTED)
                    st = td_queue_finish(q, qid[w], t, err);
                else if (ws == TD_WL_PENDING)
                    st = td_queue_withdraw(q, qid[w], t, err);
            }
        }
        if (st == TD_OK)
            st = td_queue_schedule(q, t, NULL);
    }
    /* the stored Workload of each queue id */
    size_t nq = st == TD_OK ? td_queue_workload_count(q) : 0;
    json_t **by_id = malloc((nq ? nq : 1) * sizeof *by_id);
    if (st == TD_OK && !by_id)
        st = td_err_set(err, TD_ENOMEM, "out of memory");
    for (size_t i = 0; st == TD_OK && i < nq; i++)
        by_id[i] = NULL;
    for (size_t i = 0; st == TD_OK && i < n; i++)
        if (qid[i] != TD_QUEUE_NONE && qid[i] < nq)
            by_id[qid[i]] = wls[i];
    free(evs);
    free(qid);
    if (st != TD_OK) {
        free(by_id);
        td_queue_destroy(q);
        return st;
    }
    *out_q = q;
    *out_wls = by_id;
    *out_n = nq;
    return TD_OK;
}

td_status td_workloads_view(const td_config *cfg, const char *namespace_, json_t **out,
                            td_err *err)
{
    td_queue *q = NULL;
    json_t **by_id = NULL;
    size_t nq = 0;
    td_status st = td_workloads_replay(cfg, &q, &by_id, &nq, err);
    json_t *arr = st == TD_OK ? json_array() : NULL;
    for (size_t id = 0; arr && id < nq; id++) {
        const char *key = td_queue_workload_key(q, id);
        const char *slash = strchr(key, '/');
        size_t nslen = slash ? (size_t)(slash - key) : 0;
        if (namespace_ && *namespace_ &&
            (strlen(namespace_) != nslen || strncmp(key, namespace_, nslen) != 0))
            continue;
        size_t cq = td_queue_workload_cq(q, id);
        td_wl_state ws = td_queue_workload_state(q, id);
        char finished[96] = "";
        if (ws == TD_WL_FINISHED) {
            uint64_t t = annotation_ns(by_id[id], TD_FINISHED_AT);
            time_t secs = (time_t)(t / 1000000000ULL);
            struct tm tm;
            char ts[40] = "?";
            if (gmtime_r(&secs, &tm))
                strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
            snprintf(finished, sizeof finished, "Finished at %s (reported by the job runner)", ts);
        }
        json_array_append_new(
            arr, json_pack("{s:s%, s:s, s:s, s:s, s:s, s:s, s:i, s:s}", "namespace", key, nslen, "name",
                           slash ? slash + 1 : key, "state",
                           ws == TD_WL_ADMITTED ? "Admitted"
                           : ws == TD_WL_PENDING ? "Pending"
                                                 : "Finished",
                           "clusterQueue", cq == TD_QUEUE_NONE ? "" : td_queue_cq_name(q, cq),
                           "flavors", td_queue_workload_flavors(q, id), "reason",
                           *finished ? finished : td_queue_workload_reason(q, id), "priority",
                           (int)td_queue_workload_priority(q, id), "placement",
                           td_queue_workload_placement(q, id)));
    }
    if (st == TD_OK && !arr)
        st = td_err_set(err, TD_ENOMEM, "out of memory");
    free(by_id);
    td_queue_destroy(q);
    if (st == TD_OK)
        *out = arr;
    return st;
}

td_status td_workloads_cq_status(const td_config *cfg, json_t **out, td_err *err)
{
    td_queue *q = NULL;
    json_t **by_id = NULL;
    size_t nq = 0;
    td_status st = td_workloads_replay(cfg, &q, &by_id, &nq, err);
    if (st != TD_OK)
        return st;
    free(by_id);
    size_t ncq = td_queue_cq_count(q);
    size_t *pending = calloc(ncq ? ncq : 1, sizeof *pending);
    size_t *admitted = calloc(ncq ? ncq : 1, sizeof *admitted);
    json_t *o = json_object();
    if (!pending || !admitted || !o)
        st = td_err_set(err, TD_ENOMEM, "out of memory");
    for (size_t i = 0; st == TD_OK && i < nq; i++) {
        size_t cq = td_queue_workload_cq(q, i);
        if (cq == TD_QUEUE_NONE)
            continue;
        td_wl_state ws = td_queue_workload_state(q, i);
        if (ws == TD_WL_PENDING)
            pending[cq]++;
        else if (ws == TD_WL_ADMITTED)
            admitted[cq]++;
    }
    for (size_t c = 0; st == TD_OK && c < ncq; c++) {
        json_t *usage = json_object();
        for (size_t r = 0; usage && r < td_queue_resource_count(q); r++) {
            const char *res = td_queue_resource_name(q, r);
            int64_t nominal = td_queue_cq_nominal_milli(q, c, res);
            int64_t used = td_queue_cq_usage_milli(q, c, res);
            if (nominal || used)
                json_object_set_new(usage, res,
                                    json_pack("{s:f, s:f, s:f}", "nominal",
                                              (double)nominal / 1000, "used",
                                              (double)used / 1000, "borrowed",
                                              (double)td_queue_cq_borrowed_milli(q, c, res) / 1000));
        }
        json_t *one = usage ? json_pack("{s:i, s:i, s:i, s:o}", "pendingWorkloads", (int)pending[c],
                                        "reservingWorkloads", (int)admitted[c],
                                        "admittedWorkloads", (int)admitted[c], "usage", usage)
                            : NULL;
        if (!one || json_object_set_new(o, td_queue_cq_name(q, c), one) < 0)
            st = td_err_set(err, TD_ENOMEM, "out of memory");
    }
    free(pending);
    free(admitted);
    td_queue_destroy(q);
    if (st != TD_OK) {
        json_decref(o);
        return st;
    }
    *out = o;
    return TD_OK;
}
