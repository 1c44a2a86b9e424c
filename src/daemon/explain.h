/* explain.h - the daemon's answers to "why did tenantd do that?" for the
 * gateway: a tenant's limits as enforced now, what it could spend this
 * instant, and its latest refusals with the rule and numbers of each. */
#ifndef TENANTD_DAEMON_EXPLAIN_H
#define TENANTD_DAEMON_EXPLAIN_H

#include <jansson.h>
#include <stdint.h>

#include "tenantd/gateway.h"
#include "tenantd/status.h"

/* A new JSON object for tenant (see docs in the README, "Why did tenantd do
 * that?"). now_ns is the gateway's monotonic clock. TD_ENOTFOUND naming the
 * tenant when the gateway serves no such tenant; TD_ENOMEM. */
td_status td_explain_request(td_gateway *g, const char *tenant, uint64_t now_ns, json_t **out,
                             td_err *err);

#endif
