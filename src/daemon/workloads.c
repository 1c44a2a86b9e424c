/* workloads.c - the daemon's view of the batch queue. Kueue persists each
 * admission; tenantd, for now, replays the stored Workloads in submission
 * order through the scheduler on every read, so a workload's state is a
 * pure function of the stored objects (deleting a workload finishes it). */
#include "daemon/workloads.h"

#include <stdlib.h>
#include <string.h>

#include "tenantd/queue.h"

static const char *const setup_kinds[] = {"ResourceFlavor", "Cohort", "ClusterQueue",
                                          "LocalQueue", "PriorityClass",
                                          "WorkloadPriorityClass", "NodePool"};

static uint64_t submitted_at(const json_t *wl)
{
    const char *s = json_string_value(
        json_object_get(td_json_path(wl, "metadata.annotations"), TD_SUBMITTED_AT));
    return s ? strtoull(s, NULL, 10) : 0;
}

static int by_submission(const void *a, const void *b)
{
    uint64_t ta = submitted_at(*(json_t *const *)a), tb = submitted_at(*(json_t *const *)b);
    return ta < tb ? -1 : ta > tb ? 1 : 0;
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
    json_t **order = malloc((n ? n : 1) * sizeof *order);
    if (st == TD_OK && !order)
        st = td_err_set(err, TD_ENOMEM, "out of memory");
    if (st == TD_OK && n) {
        memcpy(order, wls, n * sizeof *order);
        qsort(order, n, sizeof *order, by_submission); /* stable enough: ties keep key order */
    }
    for (size_t i = 0; st == TD_OK && i < n; i++) {
        uint64_t t = submitted_at(order[i]);
        st = td_queue_submit(q, order[i], NULL, t, NULL, err);
        if (st == TD_OK)
            st = td_queue_schedule(q, t, NULL);
    }
    if (st != TD_OK) {
        free(order);
        td_queue_destroy(q);
        return st;
    }
    *out_q = q;
    *out_wls = order;
    *out_n = n;
    return TD_OK;
}

td_status td_workloads_view(const td_config *cfg, const char *namespace_, json_t **out,
                            td_err *err)
{
    td_queue *q = NULL;
    json_t **order = NULL;
    size_t n = 0;
    td_status st = td_workloads_replay(cfg, &q, &order, &n, err);
    json_t *arr = st == TD_OK ? json_array() : NULL;
    for (size_t id = 0; arr && id < td_queue_workload_count(q); id++) {
        const char *key = td_queue_workload_key(q, id);
        const char *slash = strchr(key, '/');
        size_t nslen = slash ? (size_t)(slash - key) : 0;
        if (namespace_ && *namespace_ &&
            (strlen(namespace_) != nslen || strncmp(key, namespace_, nslen) != 0))
            continue;
        size_t cq = td_queue_workload_cq(q, id);
        td_wl_state ws = td_queue_workload_state(q, id);
        json_array_append_new(
            arr, json_pack("{s:s%, s:s, s:s, s:s, s:s, s:s, s:i, s:s}", "namespace", key, nslen, "name",
                           slash ? slash + 1 : key, "state",
                           ws == TD_WL_ADMITTED ? "Admitted"
                           : ws == TD_WL_PENDING ? "Pending"
                                                 : "Finished",
                           "clusterQueue", cq == TD_QUEUE_NONE ? "" : td_queue_cq_name(q, cq),
                           "flavors", td_queue_workload_flavors(q, id), "reason",
                           td_queue_workload_reason(q, id), "priority",
                           (int)td_queue_workload_priority(q, id), "placement",
                           td_queue_workload_placement(q, id)));
    }
    if (st == TD_OK && !arr)
        st = td_err_set(err, TD_ENOMEM, "out of memory");
    free(order);
    td_queue_destroy(q);
    if (st == TD_OK)
        *out = arr;
    return st;
}
