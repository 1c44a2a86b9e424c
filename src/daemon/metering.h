/* metering.h - the daemon's usage metering and what the dashboard shows:
 * batch intervals go into the ledger from a replay of the queue every tick
 * (gateway requests are appended by the proxy itself); what the ledger
 * commits is priced with the CostPolicy in force and summed per owner
 * (tenantd_cost_total) and per tenant for the current period (the calendar
 * month, UTC); GET /v1/usage answers with the per-tenant picture. */
#ifndef TENANTD_DAEMON_METERING_H
#define TENANTD_DAEMON_METERING_H

#include <jansson.h>
#include <stdint.h>
#include <uv.h>

#include "daemon/control.h"
#include "gateway/history.h"
#include "io/ledger.h"

typedef struct td_metering td_metering;

/* An idle metering for c (borrowed, must outlive it). TD_ENOMEM only. */
td_status td_metering_create(td_control *c, td_metering **out, td_err *err);

/* The ledger's on_commit (ud is the td_metering): prices r into the sums.
 * Any thread. */
void td_metering_on_commit(const td_ledger_rec *r, void *ud);

/* Reads the current period's records of dir's ledger into the sums,
 * priced with cfg's CostPolicy. Call before anything is appended to the
 * ledger (before the proxy starts): records appended later are counted by
 * on_commit, so none is counted twice. TD_OK when there is no ledger yet. */
td_status td_metering_load(td_metering *m, td_config *cfg, const char *dir, td_err *err);

/* Loop thread. l may be NULL (--ledger off: nothing is written, the
 * dashboard still shows traffic and GPUs). Runs a first tick, then one
 * every tick_ms on loop. */
void td_metering_start(td_metering *m, uv_loop_t *loop, td_ledger *l, uint64_t tick_ms);

/* One replay of the queue at now_ns (ns since the epoch): appends the
 * intervals that closed, and those of workloads deleted since the last tick
 * as finished now; refreshes GPUs in use, quotas and pending workloads.
 * Loop thread. */
void td_metering_tick(td_metering *m, int64_t now_ns);

/* The last hour of every tenant (the dashboard's charts), sampled at the
 * end of each tick: requests by outcome and latency from the gateway's
 * counters, cost as "cost this period" moves (committed and running),
 * the spend of the tenant's first budget. Borrowed; loop thread. */
const td_history *td_metering_history(const td_metering *m);

/* Stops the timer (loop thread); the loop must run once more to close it. */
void td_metering_stop(td_metering *m);
void td_metering_destroy(td_metering *m);

/* The dashboard's JSON (a new object): every tenant, or only the one
 * named (tenant != NULL). Loop thread. */
json_t *td_metering_usage(td_metering *m, const char *tenant, int64_t now_ns);

/* Appends the cost and usage series in Prometheus text to *text (malloc'd,
 * may be NULL) and *len. Loop thread. TD_ENOMEM only. */
td_status td_metering_metrics(td_metering *m, char **text, size_t *len);

#endif
