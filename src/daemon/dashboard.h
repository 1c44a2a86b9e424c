/* dashboard.h - the JSON behind /ui: GET /v1/usage (the numbers of the
 * tenants' table) and GET /v1/dashboard (those, the last hour of each
 * tenant, the batch queue's ClusterQueues and the budgets), scoped on the
 * server: a tenant's API key sees its own tenant and is refused others'. */
#ifndef TENANTD_DAEMON_DASHBOARD_H
#define TENANTD_DAEMON_DASHBOARD_H

#include "daemon/control.h"
#include "core/authz.h"

/* GET /v1/usage[?tenant=NAME]: td_metering_usage's object for every
 * tenant (the admin) or the one named; a tenant's key gets its own tenant,
 * 403 when it names another. 503 without metering. Loop thread. */
void td_dashboard_usage(td_control *c, const td_http_request *req, td_http_response *resp,
                        const td_principal *p);

/* GET /v1/dashboard[?tenant=NAME]: /v1/usage's object (scoped the same
 * way) with "principal" {kind, tenant}, "history" (TD_HISTORY_BUCKETS
 * buckets of TD_HISTORY_BUCKET_S seconds per tenant: requests by outcome
 * group, p99 ms, cost), "clusterQueues" (GPUs nominal/used/borrowed as
 * `tenantctl get clusterqueues` shows them, workloads pending and admitted,
 * the oldest pending one's age, why inactive; a tenant sees those its
 * LocalQueues use) and "budgets" (spent, remaining, forecast for the end of
 * the period at the burn rate of the last 30 minutes, or of the period so
 * far while the history is younger than 5 minutes). Loop thread. */
void td_dashboard_get(td_control *c, const td_http_request *req, td_http_response *resp,
                      const td_principal *p);

#endif
