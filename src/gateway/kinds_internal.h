/* kinds_internal.h - the Tenant kind's budgets, parsed by the code that
 * validates them (kinds.c) for the gateway's view (gateway.c): one parser,
 * one message per mistake. */
#ifndef TENANTD_GATEWAY_KINDS_INTERNAL_H
#define TENANTD_GATEWAY_KINDS_INTERNAL_H

#include <jansson.h>
#include <stddef.h>

#include "gateway/gateway.h"
#include "core/validate.h"

/* spec.budgets (or a key's, named by field): [{amount: "500", period:
 * day|week|month, enforcement: enforce|shadow, models: [..]}], one budget
 * per period, and one per period and list of models (a tenant's only).
 * bs may be NULL (none). On TD_OK, when out is not NULL, out[0..*n) holds
 * those without models in order (out has room for TD_PERIOD_COUNT). Fails through
 * td_vfail naming field[i].amount, .period or .enforcement. Prices are
 * checked across objects (the Tenant's cross-check). */
td_status td__gw_budgets(td_vctx *v, const json_t *bs, const char *field, td_gw_budget *out,
                         size_t *n);

#endif
