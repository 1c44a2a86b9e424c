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
#include "tenantd/ledger.h"

typedef struct td_metering td_metering;

/* An idle metering for c (borrowed, must outlive it). TD_ENOMEM only. */
td_status td_metering_create(td_control *c, td_metering **out, td_err *err);

/* The ledger's on_commit (ud is the td_metering): prices r into the sums.
 * Any thread. */
void td_metering_on_commit(const td_ledger_rec *r, void *ud);

/* Loop thread. l may be NULL (--ledger off: nothing is written, the
 * dashboard still shows traffic and GPUs). Reads the current period from
 * dir's ledger into the sums, runs a first tick, then ticks every tick_ms
 * on loop. */
td_status td_metering_start(td_metering *m, uv_loop_t *loop, td_ledger *l, const char *dir,
                            uint64_t tick_ms, td_err *err);

/* One replay of the queue at now_ns (ns since the epoch): appends the
 * intervals that closed, and those of workloads deleted since the last tick
 * as finished now; refreshes GPUs in use, quotas and pending workloads.
 * Loop thread. */
void td_metering_tick(td_metering *m, int64_t now_ns);

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
