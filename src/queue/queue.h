/* queue.h - the batch queue with Kueue's semantics: ResourceFlavors,
 * ClusterQueues (nominal quota, borrowingLimit, lendingLimit, cohorts,
 * StrictFIFO / BestEffortFIFO, preemption), LocalQueues and Workloads.
 * Pure logic: time comes in as now_ns; no I/O, no clock, no randomness, so
 * the same calls give the same decisions and events every time. */
#ifndef TENANTD_QUEUE_H
#define TENANTD_QUEUE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/manifest.h"
#include "tenantd/status.h"

typedef struct td_queue td_queue;

#define TD_QUEUE_NONE ((size_t)-1)

typedef enum { TD_WL_PENDING = 0, TD_WL_ADMITTED, TD_WL_FINISHED } td_wl_state;

/* A preemption is two events at one instant: PREEMPTED (Kueue's reason),
 * then REQUEUED (the workload is pending again, its reason "Evicted by"). */
typedef enum {
    TD_QEV_ADMITTED = 0,
    TD_QEV_PREEMPTED,
    TD_QEV_FINISHED,
    TD_QEV_REQUEUED,
    /* preemption in shadow (ClusterQueue annotation
     * tenantd.dev/preemption-enforcement: shadow): workload would have been
     * preempted by `by` at `level`; nothing changed. Once per preemptor
     * until it is admitted. */
    TD_QEV_WOULD_PREEMPT
} td_queue_event_type;

/* One decision, in the order it was taken. Strings are owned by the event. */
typedef struct {
    uint64_t t_ns;
    td_queue_event_type type;
    size_t workload;      /* id from td_queue_submit */
    size_t cluster_queue; /* index, see td_queue_cq_name */
    size_t by;            /* preemptor's workload id, or TD_QUEUE_NONE */
    bool borrowing;       /* admitted above nominal quota */
    char level[40];       /* preemption: InClusterQueue, InCohortReclamation,
                           * InCohortReclaimWhileBorrowing */
    char flavors[256];    /* "main: cpu=default, nvidia.com/gpu=a100" */
    char placement[512];  /* "workers: a100-0=1, a100-1=1" on NodePools, else "" */
    char reason[512];
} td_queue_event;

/* An empty queue. TD_ENOMEM only. */
td_status td_queue_create(td_queue **out, td_err *err);
void td_queue_destroy(td_queue *q);

/* Adds one setup object (borrowed; what is needed is copied): ResourceFlavor,
 * ClusterQueue, LocalQueue, Cohort, PriorityClass, WorkloadPriorityClass,
 * NodePool (spec.flavor, spec.nodes, spec.capacity per node);
 * objects of other kinds (Workload included) are ignored. Rejects, with
 * TD_EINVAL naming file:line (src may be NULL) and field, malformed or
 * negative quantities, a flavor listed twice, a resource covered twice, and
 * fields tenantd does not implement (by name). Nothing is added on error.
 * Must come before td_queue_seal. */
td_status td_queue_add_object(td_queue *q, const json_t *obj, const td_manifest *src, td_err *err);

/* Cross-object checks (a LocalQueue naming a missing ClusterQueue, a
 * flavor that is not a ResourceFlavor), then the queue takes workloads. */
td_status td_queue_seal(td_queue *q, td_err *err);

/* Queues a Workload (borrowed) arriving at now_ns. Its queue is
 * metadata.labels["kueue.x-k8s.io/queue-name"] or spec.queueName; its
 * priority spec.priority, or spec.priorityClassName (or the first pod
 * template's) through a WorkloadPriorityClass (priorityClassSource
 * kueue.x-k8s.io/workloadpriorityclass, or the kueue.x-k8s.io/priority-class
 * label) or a PriorityClass. A LocalQueue that does not exist leaves it
 * Pending with that reason, as Kueue does. TD_EINVAL (file:line: field) for
 * a malformed workload or an unknown priority class; nothing queued then.
 * *id (may be NULL) is its id, ids count up from 0 in submission order. */
td_status td_queue_submit(td_queue *q, const json_t *wl, const td_manifest *src, uint64_t now_ns,
                          size_t *id, td_err *err);

/* Kueue's rules for an update of a stored Workload (ValidateWorkloadUpdate
 * and the Workload kind's validation rules): once old holds a quota
 * reservation (its record says Admitted or Finished, or it carries
 * status.admission), upd's spec.podSets must equal old's, and
 * spec.priorityClassSource, spec.priorityClassName and the queue it names
 * stay as they were. A pending old may change in anything. TD_OK, or
 * TD_EINVAL with kube-apiserver's 422 message: `Workload.kueue.x-k8s.io
 * "NAME" is invalid: spec.podSets[0]: Invalid value: {...}: field is
 * immutable`. Borrows both (old may be NULL: a creation). */
td_status td_queue_workload_update_check(const json_t *old, const json_t *upd, td_err *err);

/* One full admission pass at now_ns: Kueue's cycles (the head of each
 * ClusterQueue, ordered by the borrowing level of its flavor assignment,
 * then priority, then queue time), repeated until no head can move. Admits, preempts (the minimal
 * set) and records events. *nadmitted (may be NULL) counts admissions. */
td_status td_queue_schedule(td_queue *q, uint64_t now_ns, size_t *nadmitted);

/* The admitted workload id finished at now_ns: its quota is freed.
 * TD_EINVAL if it is not admitted. */
td_status td_queue_finish(td_queue *q, size_t id, uint64_t now_ns, td_err *err);

/* Pending workload id leaves the queue at now_ns without running (its job
 * was reported complete while the queue had it waiting, e.g. a replay under
 * changed quotas): Finished, no event. TD_EINVAL if it is not pending. */
td_status td_queue_withdraw(td_queue *q, size_t id, uint64_t now_ns, td_err *err);

/* All events so far, oldest first. Borrowed until the next call that
 * changes q. */
size_t td_queue_events(const td_queue *q, const td_queue_event **out);

/* Workloads, by id. Strings are borrowed for q's life (reason and flavors
 * until q changes). */
size_t td_queue_workload_count(const td_queue *q);
const char *td_queue_workload_key(const td_queue *q, size_t id); /* "namespace/name" */
td_wl_state td_queue_workload_state(const td_queue *q, size_t id);
int32_t td_queue_workload_priority(const td_queue *q, size_t id);
/* Pending: why; after a preemption it starts "Evicted by NS/NAME (LEVEL)
 * at Ts; requeued" until admitted again. Admitted: the reservation;
 * Finished: "". */
const char *td_queue_workload_reason(const td_queue *q, size_t id);
/* The flavor of each resource of each pod set when admitted, else "". */
const char *td_queue_workload_flavors(const td_queue *q, size_t id);
/* Admitted on NodePools: pods per node, pod set by pod set,
 * "workers: a100-0=1, a100-1=1; launcher: cpu-0=1"; else "". */
const char *td_queue_workload_placement(const td_queue *q, size_t id);
/* Index of its ClusterQueue, or TD_QUEUE_NONE if its LocalQueue is unknown. */
size_t td_queue_workload_cq(const td_queue *q, size_t id);
/* Total requests of resource (all pod sets, all pods) in milli-units. */
int64_t td_queue_workload_request_milli(const td_queue *q, size_t id, const char *resource);

/* Nodes of the NodePools whose spec.flavor is a ResourceFlavor, ordered by
 * flavor, pool name, node number; named "<pool>-<i>". Placement puts each
 * pod on the most-allocated node it fits (sum over the pod's resources of
 * used/capacity), ties to the first in this order. */
size_t td_queue_node_count(const td_queue *q);
const char *td_queue_node_name(const td_queue *q, size_t node);
/* Capacity and what admitted pods hold of resource, in milli-units. */
int64_t td_queue_node_capacity_milli(const td_queue *q, size_t node, const char *resource);
int64_t td_queue_node_used_milli(const td_queue *q, size_t node, const char *resource);

/* ClusterQueues, in the order they were added. */
size_t td_queue_cq_count(const td_queue *q);
const char *td_queue_cq_name(const td_queue *q, size_t cq);
/* Why ClusterQueue cq is inactive, Kueue's condition message ("Can't admit
 * new workloads: references missing ResourceFlavor(s): f."), or NULL when
 * active. An inactive ClusterQueue admits nothing (its workloads wait with
 * "ClusterQueue NAME is inactive") and lends nothing to its cohort. */
const char *td_queue_cq_inactive(const td_queue *q, size_t cq);
/* Sums over all flavors of resource, in milli-units: nominal quota, usage,
 * and usage above nominal (borrowed), flavor by flavor. */
int64_t td_queue_cq_nominal_milli(const td_queue *q, size_t cq, const char *resource);
int64_t td_queue_cq_usage_milli(const td_queue *q, size_t cq, const char *resource);
int64_t td_queue_cq_borrowed_milli(const td_queue *q, size_t cq, const char *resource);
/* Resource names the ClusterQueues cover, by index < td_queue_resource_count. */
size_t td_queue_resource_count(const td_queue *q);
const char *td_queue_resource_name(const td_queue *q, size_t i);

/* ---- persisted admissions (Kueue's Workload status.admission) ----------- */

/* Kueue's status.admission of admitted workload id, a new object:
 * {clusterQueue, podSetAssignments: [{name, flavors: {RESOURCE: FLAVOR},
 * resourceUsage: {RESOURCE: QUANTITY}, count, topologyAssignment: {levels:
 * ["kubernetes.io/hostname"], domains: [{values: [NODE], count: PODS}]}}]}
 * (topologyAssignment only for pods placed on NodePools). NULL if id is not
 * admitted or out of memory. */
json_t *td_queue_workload_admission(const td_queue *q, size_t id);

/* Re-admits pending workload id (just submitted) exactly as adm (borrowed,
 * the shape above) records it, admitted at admitted_ns: the same flavors and
 * nodes, without deciding anything and whatever the quotas and free
 * capacity are now (Kueue keeps an admission when a quota shrinks). Records
 * no event. TD_EINVAL, naming the workload and field, when the record does
 * not match the workload or q (another ClusterQueue, pod sets, a flavor that
 * is not a ResourceFlavor, a node that is not of its flavor); nothing
 * changes then. */
td_status td_queue_restore_admission(td_queue *q, size_t id, const json_t *adm,
                                     uint64_t admitted_ns, bool borrowing, td_err *err);

/* Gives pending workload id the reason recorded for it (copied); evicted
 * (may be NULL) is its "Evicted by ..." record. TD_EINVAL if not pending. */
td_status td_queue_restore_pending(td_queue *q, size_t id, const char *evicted,
                                   const char *reason, td_err *err);

/* Appends a recorded event (copied; ids are this q's) to the event list,
 * changing no state: the history explain and the ledger read. TD_EINVAL for
 * an unknown workload or ClusterQueue. */
td_status td_queue_restore_event(td_queue *q, const td_queue_event *ev, td_err *err);

/* ---- requeue on release (a queue kept between the daemon's commits) ------ */

/* With on set, q waits as Kueue's queue manager does between passes: a
 * workload found inadmissible stays parked, and a StrictFIFO ClusterQueue
 * whose head did not fit stays blocked, until something is released that
 * it may use: a finish or a preemption in its cohort tree (its
 * ClusterQueue alone without a cohort), or nodes of a flavor it covers. A
 * workload queued between passes is tried at the next one (a StrictFIFO
 * queue unblocks for it). Ties in queue time go by key, so that a queue
 * rebuilt from records orders as the one kept in memory. Off (the
 * default): every pass retries every pending workload, as the simulator
 * does. Set it before the first submission. */
void td_queue_requeue_on_release(td_queue *q, bool on);

/* Parks every pending workload waiting to be tried, as a pass leaves them
 * (BestEffortFIFO: parked; StrictFIFO: its queue blocked): a queue rebuilt
 * from records is then where the pass that wrote them left it. TD_ENOMEM. */
td_status td_queue_park_all(td_queue *q, td_err *err);

/* Puts parked workload id back to be tried at the next pass (a StrictFIFO
 * queue is unblocked). TD_EINVAL if it is not pending in a ClusterQueue. */
td_status td_queue_requeue(td_queue *q, size_t id, td_err *err);

/* Pending workloads whose reason a pass changed without an event (parked
 * again with another reason), since the last td_queue_touched_clear; the
 * array is borrowed until q changes. Only with requeue on release. */
size_t td_queue_touched(const td_queue *q, const size_t **ids);
void td_queue_touched_clear(td_queue *q);

/* Queue time (submission, or the last eviction), admission time (0 unless
 * admitted), whether admitted above nominal quota, the "Evicted by" record
 * of a requeued workload ("" if none), and the id of "namespace/name"
 * (TD_QUEUE_NONE if not submitted). */
uint64_t td_queue_workload_queue_ns(const td_queue *q, size_t id);
uint64_t td_queue_workload_admitted_ns(const td_queue *q, size_t id);
bool td_queue_workload_borrowing(const td_queue *q, size_t id);
const char *td_queue_workload_evicted(const td_queue *q, size_t id);
size_t td_queue_workload_find(const td_queue *q, const char *key);

#endif
