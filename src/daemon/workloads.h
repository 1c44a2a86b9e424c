/* workloads.h - the batch queue behind the daemon. As Kueue does, each
 * decision is written on the stored Workload (status.admission, conditions,
 * and tenantd's record in status.tenantd) by a scheduling pass. The queue
 * those records describe (admitted workloads on their recorded flavors and
 * nodes) is the pass's own, hung on the snapshot it published
 * (queueview.h); a replay rebuilds it from the records through the
 * scheduler `tenantctl simulate` uses, without deciding anything. */
#ifndef TENANTD_DAEMON_WORKLOADS_H
#define TENANTD_DAEMON_WORKLOADS_H

#include <jansson.h>
#include <stdint.h>

#include "core/config.h"
#include "queue/queue.h"
#include "tenantd/status.h"

/* Annotation holding a Workload's submission time (ns since the epoch). */
#define TD_SUBMITTED_AT "tenantd.dev/submitted-at-ns"
/* Annotation set by `tenantctl finish`: when the job runner reported the
 * workload complete (ns since the epoch). The Workload stays stored. */
#define TD_FINISHED_AT "tenantd.dev/finished-at-ns"

/* A new JSON array, one object per Workload of cfg (namespace_ NULL: all):
 * {namespace, name, state: Pending|Admitted|Finished, clusterQueue, flavors,
 * reason, priority, placement}, as the records on the stored Workloads say,
 * in queue-time order. While some Workload has no record yet (a store
 * written before them), from the rebuilt queue instead: then TD_EINVAL,
 * naming the object and field, when the queue cannot take cfg's objects. */
td_status td_workloads_view(const td_config *cfg, const char *namespace_, json_t **out,
                            td_err *err);

/* The queue rebuilt from cfg's Workloads and their records, no pass run:
 * submitted in queue-time order, admitted ones restored on their recorded
 * admission (td_queue_restore_admission), pending ones with their recorded
 * reason, and the recorded history as the queue's events (what explain and
 * the ledger's intervals read). *q (the caller destroys it) and *wls, the
 * Workload objects by queue id (a malloc'd array of borrowed objects; the
 * caller frees the array). TD_EINVAL as td_workloads_view. */
td_status td_workloads_replay(const td_config *cfg, td_queue **q, json_t ***wls, size_t *n,
                              td_err *err);

/* One scheduling pass at now_ns over cfg's rebuilt queue: *changed is a new
 * JSON array of copies of the Workloads whose status the pass changed
 * (status.admission {clusterQueue, podSetAssignments}, status.conditions
 * QuotaReserved/Admitted/Evicted/Finished, status.tenantd {state, queuedAt,
 * admittedAt, borrowing, flavors, reason, evicted, history}), to be stored in
 * one transaction. A record that no longer fits the objects (its
 * ClusterQueue or node gone) is evicted at now_ns. *q (may be NULL: not
 * wanted) is the queue after the pass, which the caller destroys: what a
 * replay of cfg with the changed statuses stored would give. TD_EINVAL as
 * td_workloads_view. */
td_status td_workloads_pass(const td_config *cfg, uint64_t now_ns, json_t **changed,
                            td_queue **q, td_err *err);

/* The queue's records belong to the daemon: a Workload doc (others are left
 * alone) being submitted or applied loses any status it carries and gets
 * the one stored on cur's Workload of that identity, if any (borrowed,
 * shared). TD_EINVAL, doc unchanged, when that Workload holds a quota
 * reservation and doc changes what Kueue keeps immutable then
 * (td_queue_workload_update_check: its pod sets, class, queue): the
 * caller answers 422. TD_ENOMEM. */
td_status td_workloads_keep_status(const td_config *cur, json_t *doc, td_err *err);

/* How many times a queue was rebuilt from records (a pass, a replay or a
 * check), since the process started: tenantd_queue_rebuilds_total. */
unsigned long long td_workloads_rebuilds(void);

#endif
