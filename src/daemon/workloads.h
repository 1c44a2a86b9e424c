/* workloads.h - the batch queue behind the daemon. As Kueue does, each
 * decision is written on the stored Workload (status.admission, conditions,
 * and tenantd's record in status.tenantd) by a scheduling pass over the
 * queue kept in memory between commits (td_wlqueue), whose view hangs on
 * the snapshot it published (queueview.h); a replay rebuilds it from the
 * records through the scheduler `tenantctl simulate` uses. */
#ifndef TENANTD_DAEMON_WORKLOADS_H
#define TENANTD_DAEMON_WORKLOADS_H

#include <jansson.h>
#include <stdbool.h>
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

/* The rows of td_workloads_view for the Workloads ids (kind Workload; n of
 * them, borrowed; one absent from cfg is left out), in its order, read
 * from their records alone: O(n log n), whatever cfg holds. TD_ENOTFOUND
 * when one has no record yet (then td_workloads_view has them); TD_ENOMEM. */
td_status td_workloads_view_some(const td_config *cfg, const td_object_id *ids, size_t n,
                                 json_t **out, td_err *err);

/* The queue rebuilt from cfg's Workloads and their records, no pass run:
 * submitted in queue-time order, admitted ones restored on their recorded
 * admission (td_queue_restore_admission), pending ones with their recorded
 * reason, and the recorded history as the queue's events (what explain and
 * the ledger's intervals read). *q (the caller destroys it) and *wls, the
 * Workload objects by queue id (a malloc'd array of borrowed objects; the
 * caller frees the array). TD_EINVAL as td_workloads_view. */
td_status td_workloads_replay(const td_config *cfg, td_queue **q, json_t ***wls, size_t *n,
                              td_err *err);

/* One scheduling pass at now_ns over cfg's queue rebuilt from its records:
 * *changed is a new JSON array of copies of the Workloads whose status the
 * pass changed (status.admission {clusterQueue, podSetAssignments},
 * status.conditions QuotaReserved/Admitted/Evicted/Finished, status.tenantd
 * {state, queuedAt, admittedAt, borrowing, flavors, reason, evicted,
 * history}), to be stored in one transaction. With wake_all every pending
 * workload is tried again; without, the recorded pending ones stay parked
 * where the pass that wrote them left them, and only what arrived since
 * (Workloads without a record, finishes) and what a finish wakes are tried,
 * as the queue kept in memory does (td_workloads_commit). A record that no
 * longer fits the objects (its ClusterQueue or node gone) is evicted at
 * now_ns. *q (may be NULL: not wanted) is the queue after the pass, which
 * the caller destroys: what a replay of cfg with the changed statuses
 * stored would give. TD_EINVAL as td_workloads_view. */
td_status td_workloads_full_pass(const td_config *cfg, uint64_t now_ns, bool wake_all,
                                 json_t **changed, td_queue **q, td_err *err);

/* td_workloads_full_pass with wake_all: every pending workload tried. */
td_status td_workloads_pass(const td_config *cfg, uint64_t now_ns, json_t **changed,
                            td_queue **q, td_err *err);

/* The batch queue kept in memory between commits, and the snapshot whose
 * records it is. Loop thread only (the one that commits). */
typedef struct td_wlqueue td_wlqueue;

/* The process's queue (starts empty: the first commit rebuilds it). */
td_wlqueue *td_workloads_live(void);

/* What a commit of objs (borrowed; nobjs of them) and ndels deletions over
 * cur (the snapshot served, borrowed) into next (cur with them, borrowed)
 * decides, at now_ns: *changed as td_workloads_full_pass gives it. When lq
 * is cur's queue and objs are only new Workloads, finishes (the
 * finished-at annotation added) and objects the queue does not read, they
 * run on lq's queue and only the workloads they touch are looked at: the
 * arrivals, those with new events, and those parked again with another
 * reason. Otherwise (an apply or delete of a ResourceFlavor, Cohort,
 * ClusterQueue, LocalQueue, priority class or NodePool, a delete or change
 * of a pending Workload, a commit of nothing, no queue kept) lq's queue is
 * rebuilt from next's records with a full pass (td_workloads_full_pass;
 * wake_all unless only Workloads arrived). Either way, the caller then
 * stores the change and *changed in one transaction and calls
 * td_workloads_publish, or td_workloads_abandon if that failed. On error lq
 * is dropped (the next commit rebuilds) and nothing else changed. */
td_status td_workloads_commit(td_wlqueue *lq, const td_config *cur, const td_config *next,
                              json_t *const *objs, size_t nobjs, size_t ndels, uint64_t now_ns,
                              json_t **changed, td_err *err);

/* The commit was stored: final (borrowed; a reference is kept) is the
 * snapshot with its records, which lq's queue now is. */
void td_workloads_publish(td_wlqueue *lq, td_config *final);

/* The commit was not stored: lq's queue is dropped. */
void td_workloads_abandon(td_wlqueue *lq);

/* Makes q (taken over; a queue of td_workloads_pass) lq's queue, the one
 * of cfg's records (borrowed; a reference is kept). */
void td_workloads_adopt(td_wlqueue *lq, td_config *cfg, td_queue *q);

/* lq's queue if it is cfg's records (borrowed until the next commit), else
 * NULL; *gen is lq's generation, which every commit and drop changes. */
const td_queue *td_workloads_live_queue(const td_wlqueue *lq, const td_config *cfg,
                                        unsigned long long *gen);
unsigned long long td_workloads_live_gen(const td_wlqueue *lq);

/* Frees lq's queue (at exit). */
void td_workloads_live_release(td_wlqueue *lq);

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
