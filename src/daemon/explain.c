/* explain.c - see explain.h. */
#include "daemon/explain.h"

#include <stdio.h>
#include <time.h>

static const char *mode_name(bool shadow)
{
    return shadow ? "shadow" : "enforce";
}

td_status td_explain_request(td_gateway *g, const char *tenant, uint64_t now_ns, json_t **out,
                             td_err *err)
{
    td_gw_config *held = NULL;
    const td_gw_config *c = td_gateway_config(g, &held);
    const td_gw_tenant *t = td_gw_tenant_by_name(c, tenant);
    if (!t) {
        td_gw_config_unref(held);
        return td_err_set(err, TD_ENOTFOUND,
                          "tenant %s is not served by the gateway (no Tenant of that name)",
                          tenant);
    }
    td_limiter *l = td_gateway_limiter(g);
    json_t *rate = t->rate.cost > 0
                       ? json_pack("{s:f, s:f, s:f, s:s, s:f}", "cost", t->rate.cost, "perSeconds",
                                   (double)t->rate.per_ns / 1e9, "burst", t->rate.burst,
                                   "enforcement", mode_name(t->shadow_rate), "availableNow",
                                   td_limiter_available(l, t->slot, &t->rate, now_ns))
                       : json_pack("{s:b}", "unlimited", 1);
    json_t *conc = t->concurrency
                       ? json_pack("{s:i, s:i, s:s}", "limit", (json_int_t)t->concurrency,
                                   "inFlight", (json_int_t)td_limiter_inflight(l, t->slot),
                                   "enforcement", mode_name(t->shadow_concurrency))
                       : json_pack("{s:b, s:i}", "unlimited", 1, "inFlight",
                                   (json_int_t)td_limiter_inflight(l, t->slot));
    json_t *o = json_pack("{s:s, s:{s:o, s:o, s:s, s:f}, s:b}", "tenant", t->name, "limits",
                          "rate", rate, "concurrency", conc, "criticality",
                          td_criticality_name(t->criticality), "weight", t->weight,
                          "sharedLimits", td_gateway_shared(g) != NULL);
    json_t *list = json_array();
    enum { MAX = 20 };
    td_rejection rs[MAX];
    size_t n = td_recent_of(td_gateway_recent(g), t->slot, rs, MAX);
    for (size_t i = 0; o && list && i < n; i++) {
        char when[40];
        time_t s = (time_t)(rs[i].wall_ns / 1000000000ULL);
        struct tm tm;
        gmtime_r(&s, &tm);
        size_t k = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(when + k, sizeof when - k, ".%03uZ",
                 (unsigned)(rs[i].wall_ns % 1000000000ULL / 1000000));
        json_array_append_new(list, json_pack("{s:s, s:i, s:s, s:s, s:s}", "time", when, "status",
                                              (int)rs[i].status, "reason", rs[i].reason, "mode",
                                              mode_name(rs[i].shadow), "detail", rs[i].detail));
    }
    td_gw_config_unref(held);
    if (!o || !list || json_object_set_new(o, "recentRefusals", list) < 0) {
        json_decref(o);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    json_object_set_new(o, "sampling",
                        json_string("refusals are kept at most 100 per second per tenant"));
    *out = o;
    return TD_OK;
}
