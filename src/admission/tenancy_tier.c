/* tenancy_tier.c - the pure parts of the isolation tiers that config
 * validation and admission share: a Tenant's tier and dedicated pools
 * (object-store URIs and prefixes are core/objuri.c). */
#include <string.h>

#include "admission/tenancy.h"

td_tenancy td_tenancy_of(const json_t *tenant)
{
    const char *t = td_json_str(tenant, "spec.tenancy");
    return t && strcmp(t, "customer") == 0 ? TD_TENANCY_CUSTOMER : TD_TENANCY_TEAM;
}

const char *td_tenancy_name(td_tenancy t)
{
    return t == TD_TENANCY_CUSTOMER ? "customer" : "team";
}

bool td_pool_dedicated_to(const json_t *pool, const char *tenant)
{
    json_t *ts = td_json_path(pool, "spec.tenants");
    return tenant && json_array_size(ts) == 1 &&
           json_is_string(json_array_get(ts, 0)) &&
           strcmp(json_string_value(json_array_get(ts, 0)), tenant) == 0;
}

/* ---- object-store URIs -------------------------------------------------- */
