/* kinds.c - the batch queue's kinds: NodePool (tenantd's: nodes of one
 * flavor, kept for tenants by a taint or a nodeSelector) and Kueue's
 * (ResourceFlavor, ClusterQueue, LocalQueue, Cohort, Workload,
 * WorkloadPriorityClass, Configuration), which the queue parses in full
 * when it loads a snapshot (load.c). */
#include <string.h>

#include "queue/kinds.h"
#include "queue/kinds_internal.h"
#include "core/config.h"
#include "core/kind.h"
#include "core/validate.h"

td_status td__queue_validate_nodepool(td_vctx *v)
{
    static const char *const top[] = {"apiVersion", "kind", "metadata", "spec", NULL};
    static const char *const spec[] = {"flavor",       "nodes",   "capacity",  "taint",
                                       "nodeSelector", "tenants", "dedicated", NULL};
    static const char *const taint[] = {"key", "value", "effect", NULL};
    TD_TRY(td_v_fields(v, v->obj, "", top));
    json_t *s = json_object_get(v->obj, "spec");
    if (!json_is_object(s))
        return td_vfail(v, s, "spec", "required: a mapping");
    TD_TRY(td_v_fields(v, s, "spec", spec));
    TD_TRY(td_v_int_range(v, json_object_get(s, "nodes"), "spec.nodes", 0, TD_QUEUE_MAX_NODES));
    TD_TRY(td_v_quantity_map(v, json_object_get(s, "capacity"), "spec.capacity"));
    json_t *t = json_object_get(s, "taint");
    if (t) {
        TD_TRY(td_v_fields(v, t, "spec.taint", taint));
        if (!td_json_str(t, "key"))
            return td_vfail(v, t, "spec.taint.key", "required");
        const char *eff = td_json_str(t, "effect");
        static const char *const effects[] = {"NoSchedule", "PreferNoSchedule", "NoExecute", NULL};
        if (!td_in_list(eff, effects))
            return td_vfail(v, t, "spec.taint.effect",
                            "must be NoSchedule, PreferNoSchedule or NoExecute");
    }
    TD_TRY(td_v_string_map(v, json_object_get(s, "nodeSelector"), "spec.nodeSelector"));
    TD_TRY(td_v_string_array(v, json_object_get(s, "tenants"), "spec.tenants"));
    if (!t && !json_object_size(json_object_get(s, "nodeSelector")))
        return td_vfail(v, s, "spec",
                        "a NodePool needs a taint or a nodeSelector to keep other "
                        "tenants off it");
    return TD_OK;
}

#define KUEUE_API "kueue.x-k8s.io/v1beta1,kueue.x-k8s.io/v1beta2"

static const td_kind_def kinds[] = {
    {"ResourceFlavor", KUEUE_API, false, "rf,flavor,flavors,resourceflavor,resourceflavors", NULL,
     NULL, 0, NULL},
    {"ClusterQueue", KUEUE_API, false, "cq,clusterqueue,clusterqueues", NULL, NULL, 0, NULL},
    {"LocalQueue", KUEUE_API, true, "lq,queue,queues,localqueue,localqueues", NULL, NULL, 0, NULL},
    {"Cohort", "kueue.x-k8s.io/v1alpha1," KUEUE_API, false, "cohort,cohorts", NULL, NULL, 0, NULL},
    {"Workload", KUEUE_API, true, "wl,workload,workloads", NULL, NULL, 0, NULL},
    {"WorkloadPriorityClass", KUEUE_API, false, "wpc,workloadpriorityclass,workloadpriorityclasses",
     NULL, NULL, 0, NULL},
    /* Kueue's own Configuration (the queue reads fairSharing) */
    {"Configuration", "config.kueue.x-k8s.io/v1beta1,config.kueue.x-k8s.io/v1beta2", false,
     "configuration,configurations", NULL, NULL, 0, "kueue"},
    {"NodePool", TD_API_TENANTD, false, "pool,pools,nodepool,nodepools",
     td__queue_validate_nodepool, NULL, 0, NULL},
};

const td_kind_def *td_queue_kinds(size_t *n)
{
    *n = sizeof kinds / sizeof kinds[0];
    return kinds;
}
