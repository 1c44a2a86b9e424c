/* queueview.h - the batch queue as a config snapshot's records say it is,
 * made once per snapshot and hung on it (td_config_attachment): the queue
 * itself (explain, metering), Kueue's ClusterQueue status and the queue's
 * Prometheus series, computed by the first reader. The commit that
 * publishes a snapshot attaches the queue kept between commits
 * (workloads.h), while it is that snapshot's; a snapshot without one (the
 * one loaded at start, another replica's) or whose queue a later commit
 * moved on gets it rebuilt from its records. Read on the loop thread only
 * (the one that commits); freed with the snapshot. */
#ifndef TENANTD_DAEMON_QUEUEVIEW_H
#define TENANTD_DAEMON_QUEUEVIEW_H

#include <jansson.h>

#include "core/config.h"
#include "daemon/workloads.h"
#include "queue/queue.h"
#include "tenantd/status.h"

typedef struct td_queueview td_queueview;

/* Makes q (taken over) the queue kept between commits, as the queue of
 * cfg's records (the queue of the pass that wrote them, td_workloads_pass),
 * and attaches its view to cfg (borrowed; not yet published, or already
 * holding a view, which then wins). TD_ENOMEM only; cfg's first reader
 * rebuilds then. */
td_status td_queueview_attach(const td_config *cfg, td_queue *q, td_err *err);

/* Attaches to cfg (borrowed; not yet published) a view of lq's queue,
 * which td_workloads_publish made cfg's. TD_ENOMEM only; cfg's first reader
 * rebuilds then. */
td_status td_queueview_attach_live(const td_config *cfg, td_wlqueue *lq, td_err *err);

/* cfg's view in *out (borrowed for cfg's life): the one attached, or one
 * rebuilt now from cfg's records (td_workloads_replay) and attached.
 * TD_EINVAL when the queue cannot take cfg's objects (err names the object
 * and field), TD_ENOMEM; err may be NULL. */
td_status td_queueview_get(const td_config *cfg, const td_queueview **out, td_err *err);

/* The queue, as of cfg (borrowed until the next commit). */
const td_queue *td_queueview_queue(const td_queueview *v);

/* cfg's Workload objects by queue id, n of them (borrowed from cfg; an
 * entry is NULL for no object). */
json_t *const *td_queueview_workloads(const td_queueview *v, size_t *n);

/* Kueue's ClusterQueue status by ClusterQueue name: {pendingWorkloads,
 * reservingWorkloads, admittedWorkloads, usage: {RESOURCE: {nominal, used,
 * borrowed}}} (quantities as numbers, in units: 1.5 = 1500m). Borrowed.
 * Computed by its first reader (loop thread); NULL out of memory. */
const json_t *td_queueview_cq_status(const td_queueview *v);

/* The queue's series in Prometheus text (NUL-terminated, borrowed):
 * tenantd_queue_pending_workloads, tenantd_queue_admitted_workloads and
 * tenantd_queue_preemptions_total by ClusterQueue. Computed by its first
 * reader (loop thread); "" out of memory. */
const char *td_queueview_metrics(const td_queueview *v);

#endif
