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
    /* budgets: the amount, the spend of the current period, when it resets */
    json_t *budgets = json_array();
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    const char *cur = c->cost_policy ? td_costpolicy_currency(c->cost_policy) : "";
    for (size_t i = 0; budgets && i < t->nbudgets; i++) {
        const td_gw_budget *b = &t->budgets[i];
        int64_t start, end;
        td_period_bounds(b->period, (int64_t)wall.tv_sec, &start, &end);
        int64_t spent =
            td_budgets_spent(td_gateway_budgets(g), t->slot, b->period, (int64_t)wall.tv_sec);
        char from[32], resets[32];
        td_rfc3339(start, from, sizeof from);
        td_rfc3339(end, resets, sizeof resets);
        json_array_append_new(
            budgets,
            json_pack("{s:s, s:f, s:f, s:f, s:s, s:s, s:s, s:s}", "period",
                      td_period_name(b->period), "amount", (double)b->amount_nano / TD_MONEY_NANO,
                      "spent", (double)spent / TD_MONEY_NANO, "remaining",
                      (double)(b->amount_nano > spent ? b->amount_nano - spent : 0) / TD_MONEY_NANO,
                      "currency", cur, "periodStart", from, "resetsAt", resets, "enforcement",
                      mode_name(b->shadow)));
    }
    /* keys with limits of their own (the tenant's apply to every key too) */
    json_t *keys = json_array();
    td_limiter *kl = td_gateway_key_limiter(g);
    for (size_t i = 0; keys && i < t->nkeys; i++) {
        const td_gw_key *k = t->keys ? &t->keys[i] : NULL;
        if (!k || !k->name)
            continue;
        json_t *kr =
            k->rate.cost > 0
                ? json_pack("{s:f, s:f, s:f, s:s, s:f}", "cost", k->rate.cost, "perSeconds",
                            (double)k->rate.per_ns / 1e9, "burst", k->rate.burst, "enforcement",
                            mode_name(t->shadow_rate), "availableNow",
                            td_limiter_available(kl, k->slot, &k->rate, now_ns))
                : json_pack("{s:s}", "inherits", "tenant");
        json_t *kc = k->concurrency
                         ? json_pack("{s:i, s:i, s:s}", "limit", (json_int_t)k->concurrency,
                                     "inFlight", (json_int_t)td_limiter_inflight(kl, k->slot),
                                     "enforcement", mode_name(t->shadow_concurrency))
                         : json_pack("{s:s}", "inherits", "tenant");
        json_array_append_new(
            keys, json_pack("{s:s, s:o, s:o}", "name", k->name, "rate", kr, "concurrency", kc));
    }
    if (o && budgets && keys) {
        json_object_set_new(json_object_get(o, "limits"), "budgets", budgets);
        json_object_set_new(json_object_get(o, "limits"), "keys", keys);
        json_object_set_new(json_object_get(o, "limits"), "precedence",
                            json_string("a request passes its key's own concurrency, then the "
                                        "tenant's; its key's own rate, then the tenant's; then "
                                        "every budget of the tenant; the first enforced refusal "
                                        "answers"));
    } else {
        json_decref(budgets);
        json_decref(keys);
    }
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
        json_t *x =
            json_pack("{s:s, s:i, s:s, s:s, s:s, s:s}", "time", when, "status", (int)rs[i].status,
                      "reason", rs[i].reason, "mode", mode_name(rs[i].shadow), "level",
                      rs[i].key[0]          ? "key"
                      : rs[i].status == 429 ? "tenant"
                                            : "route",
                      "detail", rs[i].detail);
        if (x && rs[i].key[0])
            json_object_set_new(x, "key", json_string(rs[i].key));
        json_array_append_new(list, x);
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
