/* explain.h - the daemon's answers to "why did tenantd do that?" for the
 * gateway: a tenant's limits as enforced now, what it could spend this
 * instant, and its latest refusals with the rule and numbers of each. */
#ifndef TENANTD_DAEMON_EXPLAIN_H
#define TENANTD_DAEMON_EXPLAIN_H

#include <jansson.h>
#include <stdint.h>

#include "core/authz.h"
#include "core/config.h"
#include "gateway/gateway.h"
#include "tenantd/status.h"

/* A new JSON object for tenant (see docs/daemon.md, "Why did tenantd do
 * that?"). now_ns is the gateway's monotonic clock. TD_ENOTFOUND naming the
 * tenant when the gateway serves no such tenant; TD_ENOMEM. */
td_status td_explain_request(td_gateway *g, const char *tenant, uint64_t now_ns, json_t **out,
                             td_err *err);

/* A new string: text with every occurrence of each of the n workload keys
 * ("namespace/name") in hidden replaced by "another tenant's workload", so
 * a reason never names what its reader may not see. NULL when out of
 * memory. */
char *td_redact_keys(const char *text, const char *const *hidden, size_t n);

/* Every stored Workload of cfg that p may not see, as "namespace/name"
 * (none for the admin): malloc'd strings in a malloc'd array, *n of them,
 * freed with td_hidden_free. NULL with *n 0 when out of memory. */
char **td_hidden_workloads(const td_config *cfg, const td_principal *p, size_t *n);
void td_hidden_free(char **hidden, size_t n);

/* Why is workload ns/name where it is? A new JSON object: its state and
 * reason, ClusterQueue, flavors and placement; when pending, its position
 * in its ClusterQueue (priority first, then submission order) with the
 * workloads ahead of it that p may see (others only counted); its history
 * (admitted, preempted by whom at which level, requeued, finished) and the
 * workloads it preempted; its ClusterQueue's quota and usage per resource.
 * TD_ENOTFOUND naming the workload; TD_EINVAL when the queue cannot take
 * cfg (as td_workloads_view); TD_ENOMEM. */
td_status td_explain_workload(const td_config *cfg, const char *ns, const char *name,
                              const td_principal *p, json_t **out, td_err *err);

#endif
