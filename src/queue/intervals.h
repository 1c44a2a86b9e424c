/* intervals.h - a batch queue's history as ledger records: every admitted
 * interval (admitted -> finished or evicted, optionally still running) of
 * every workload, one record per ResourceFlavor it held, attributed to its
 * owner. Pure: reads the queue's events and the objects; no clock. Used by
 * the daemon's metering and by `tenantctl simulate --ledger`. */
#ifndef TENANTD_INTERVALS_H
#define TENANTD_INTERVALS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"
#include "core/ledger_rec.h"
#include "queue/queue.h"

typedef struct {
    const json_t *const *workloads; /* the Workload objects by queue id (borrowed) */
    size_t nworkloads;
    const td_config *cfg; /* may be NULL: Namespace labels, Tenant namespaces and the
                             CostPolicy's interruptible priority classes come from it */
    int64_t offset_ns;    /* added to the queue's times (a virtual clock's start) */
    int64_t now_ns;       /* queue time; intervals still open end here */
    bool running;         /* also emit open intervals (outcome "running", end = now) */
    int64_t closed_since_ns; /* 0: every closed interval; else only those that closed at
                                or after it (queue time): a tick's new ones, not the past */
} td_intervals_opts;

/* Calls cb for each interval record, in event order. Record ids are
 * "<namespace>/<name>@<admitted ns>/<flavor>" (hashed when longer than the
 * id field), so the same history always gives the same ids. Resources are
 * each pod set's requests (all its pods) under the flavor the admission
 * gave that pod set for that resource (a launcher's CPUs on one flavor, its
 * workers' on another). Labels team/project/environment
 * come from the Workload's labels, else from its Namespace's; the tenant
 * is the Tenant listing the namespace in spec.namespaces ("" if none).
 * cb returns non-zero to stop. TD_ENOMEM only. */
td_status td_ledger_intervals(const td_queue *q, const td_intervals_opts *o, td_ledger_cb cb,
                              void *ud, td_err *err);

/* Annotation of a Workload: the share of its GPUs really busy over its run
 * (0..1), reported by the job runner; interval records then carry
 * gpu_used_milli = GPUs held x it (right-sizing's "really used"). */
#define TD_GPU_UTILIZATION "tenantd.dev/gpu-utilization"

#endif
