/* workloads.h - the batch queue behind the daemon: the state of every
 * submitted Workload, recomputed from the snapshot (Kueue's setup objects
 * and the stored Workloads, replayed in submission order through the same
 * scheduler `tenantctl simulate` uses). */
#ifndef TENANTD_DAEMON_WORKLOADS_H
#define TENANTD_DAEMON_WORKLOADS_H

#include <jansson.h>
#include <stdint.h>

#include "tenantd/config.h"
#include "tenantd/queue.h"
#include "tenantd/status.h"

/* Annotation holding a Workload's submission time (ns since the epoch). */
#define TD_SUBMITTED_AT "tenantd.dev/submitted-at-ns"
/* Annotation set by `tenantctl finish`: when the job runner reported the
 * workload complete (ns since the epoch). The Workload stays stored. */
#define TD_FINISHED_AT "tenantd.dev/finished-at-ns"

/* A new JSON array, one object per Workload of cfg (namespace_ NULL: all):
 * {namespace, name, state: Pending|Admitted|Finished, clusterQueue, flavors,
 * reason, priority, placement}, replaying submissions and finishes in time
 * order (at one instant: finishes first, then submissions in key order). TD_EINVAL, naming the object and field, when the queue cannot
 * take cfg's objects (a malformed ClusterQueue or Workload, an unknown
 * priority class): the same check guards every apply. */
td_status td_workloads_view(const td_config *cfg, const char *namespace_, json_t **out,
                            td_err *err);

/* The queue after replaying cfg's Workloads at their submission times:
 * *q (the caller destroys it) and *wls, the Workload objects by queue id
 * (a malloc'd array of borrowed objects; the caller frees the array).
 * TD_EINVAL as td_workloads_view. */
td_status td_workloads_replay(const td_config *cfg, td_queue **q, json_t ***wls, size_t *n,
                              td_err *err);

/* Kueue's ClusterQueue status, computed from the same replay: a new JSON
 * object mapping each ClusterQueue's name to {pendingWorkloads,
 * reservingWorkloads, admittedWorkloads, usage: {RESOURCE: {nominal, used,
 * borrowed}}} (quantities as numbers, in units: 1.5 = 1500m).
 * TD_EINVAL as td_workloads_view. */
td_status td_workloads_cq_status(const td_config *cfg, json_t **out, td_err *err);

#endif
