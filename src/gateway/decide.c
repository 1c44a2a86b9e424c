/* decide.c - the gateway's decision on one request (decide.h): who, where,
 * and with the body the model, estimate, class, limits and budgets, in
 * the order the gateway manual gives. Time comes in; the limiter and
 * budget state is the gateway's (its own, or the backends handed to it). */
#include "gateway/decide.h"

#include <math.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "gateway/estimate.h"
#include "core/limiter.h"
#include "core/jsondump.h"

#define DEFAULT_TIMEOUT_NS 30000000000ULL
#define RETRY_1S           1000000000ULL

/* ---- who ---- */

const td_gw_tenant *td_gw_decide_auth(const td_gw_config *c, const char *authorization,
                                      const char *x_tenant, bool allow_x_tenant,
                                      td_gw_key_cache *cache, const td_gw_key **key)
{
    *key = NULL;
    if (!authorization)
        return x_tenant && allow_x_tenant ? td_gw_tenant_by_name(c, x_tenant) : NULL;
    if (strncasecmp(authorization, "Bearer ", 7) != 0)
        return NULL;
    const char *v = authorization + 7;
    while (*v == ' ')
        v++;
    size_t len = strlen(v);
    const td_gw_tenant *t;
    const td_gw_key *k = NULL;
    if (cache && cache->gen == c->generation && cache->len == len &&
        CRYPTO_memcmp(cache->bytes, v, len) == 0) {
        t = cache->tenant;
        k = cache->key;
    } else {
        t = td_gw_tenant_by_key_ex(c, v, len, &k);
        if (cache) {
            cache->gen = 0;
            if (t && len <= sizeof cache->bytes) {
                memcpy(cache->bytes, v, len);
                cache->len = len;
                cache->tenant = t;
                cache->key = k;
                cache->gen = c->generation;
            }
        }
    }
    if (t && k && k->name)
        *key = k; /* unnamed: the tenant's limits only */
    return t;
}

/* ---- where ---- */

bool td_gw_method_refused(const char *method)
{
    return strcmp(method, "CONNECT") == 0 || strcmp(method, "TRACE") == 0;
}

td_gw_path_verdict td_gw_decide_path(const td_gw_config *c, const td_gw_tenant *t,
                                     const td_gw_key *k, const char *method, const char *path,
                                     const td_gw_route **route)
{
    const td_gw_route *found = NULL;
    td_gw_route_need need = td_gw_route_by_path(c, path, &found);
    *route = NULL;
    if (strcmp(method, "GET") == 0 && strcmp(path, "/v1/models") == 0 &&
        (c->nmodel_routes || t->models || (k && k->models)))
        return TD_GW_PATH_MODELS_LIST;
    if (need == TD_GW_ROUTE_NONE)
        return TD_GW_PATH_NO_ROUTE;
    if (need == TD_GW_ROUTE_BY_MODEL)
        return TD_GW_PATH_BY_MODEL;
    *route = found;
    return td_gw_route_allows(found, method) ? TD_GW_PATH_ROUTE : TD_GW_PATH_METHOD;
}

/* ---- refusals ---- */

/* A refusal with an OpenAI error body; the message, fields and detail are
 * the caller's to fill. */
static void refuse(td_gw_verdict *v, int status, td_gw_form form, td_outcome o, const char *code,
                   const char *reason, td_gw_level level)
{
    v->status = status;
    v->form = form;
    v->outcome = o;
    v->code = code;
    v->reason = reason;
    v->level = level;
    v->param = NULL;
    v->header = NULL;
    v->fields[0] = '\0';
    v->detail[0] = '\0';
}

static void bad_request(td_gw_verdict *v, const char *msg)
{
    refuse(v, 400, TD_GW_FORM_ERROR, TD_OUT_BAD_REQUEST, "bad_request", "bad_request",
           TD_GW_LEVEL_NONE);
    snprintf(v->message, sizeof v->message, "%s", msg);
}

/* 404 model_not_found: also what a customer tenant hears of a model it
 * may not use, so that it cannot tell the two apart. */
static void model_not_found(td_gw_verdict *v, const char *model, const char *reason,
                            td_gw_level level)
{
    refuse(v, 404, TD_GW_FORM_ERROR, TD_OUT_BAD_REQUEST, "model_not_found", reason, level);
    v->param = "model";
    snprintf(v->message, sizeof v->message,
             "The model `%s` does not exist or you do not have access to it.", model ? model : "");
}

/* A 429 of a rate or concurrency limit: retry (TD_LIMITER_NEVER: the
 * cost alone is over the burst). */
static void limited(td_gw_verdict *v, const char *error, uint64_t retry, td_gw_level level,
                    const td_gw_model_limit *ml)
{
    bool rate = error[0] == 'r';
    refuse(v, 429, TD_GW_FORM_LIMITED, rate ? TD_OUT_RATE_LIMITED : TD_OUT_CONCURRENCY_LIMITED,
           retry == TD_LIMITER_NEVER ? "cost_exceeds_burst" : error, error, level);
    v->retry_after_ns = retry;
    v->model_limit = ml;
}

static void event(td_gw_verdict *v, td_limit_kind limit, bool shadow, bool noted,
                  const td_gw_key *k, const char *reason)
{
    if (v->nevents < sizeof v->events / sizeof v->events[0])
        v->events[v->nevents++] = (td_gw_limit_event){limit, shadow, noted, k, reason};
    if (shadow && !v->shadow)
        v->shadow = reason;
}

/* ---- with the body: model, route, access ---- */

static bool bodyless_method(const td_gw_request *rq)
{
    const char *m = rq->method;
    return rq->body_len == 0 && strcmp(m, "POST") != 0 && strcmp(m, "PUT") != 0 &&
           strcmp(m, "PATCH") != 0;
}

/* The body's model, the route it selects and whether the tenant and key
 * may use it. false with the refusal in v. */
static bool decide_model(const td_gw_request *rq, bool bodyless, td_gw_verdict *v,
                         const char **model_out)
{
    const td_gw_tenant *t = rq->tenant;
    const td_gw_key *k = rq->key;
    td_err err;
    bool listed = t->models || (k && k->models);
    /* for a model limit, budget or price alone, a body that names no
     * model (or is not JSON: a requests route's upload) is held to the
     * tenant's limits and priced by its route */
    bool wanted = t->nmodel_limits || t->nmodel_budgets ||
                  td_costpolicy_has_model_prices(rq->cfg->cost_policy);
    if ((rq->by_model || listed || wanted) && rq->body_len &&
        td_gw_body_model(rq->body, rq->body_len, rq->model, rq->model_cap, &err) != TD_OK) {
        if (rq->by_model || listed) {
            bad_request(v, err.msg);
            return false;
        }
        rq->model[0] = '\0';
    }
    const char *model = rq->model[0] ? rq->model : NULL;
    *model_out = model;
    if (rq->by_model) {
        v->route = td_gw_route_select(rq->cfg, rq->path, model);
        if (!v->route && !model) {
            refuse(v, 400, TD_GW_FORM_ERROR, TD_OUT_BAD_REQUEST, "model_required", "model_required",
                   TD_GW_LEVEL_ROUTE);
            v->param = "model";
            snprintf(v->message, sizeof v->message,
                     "the request body names no model, and every route of this path serves "
                     "named models");
            return false;
        }
        if (!v->route) {
            model_not_found(v, model, "model_not_found", TD_GW_LEVEL_ROUTE);
            return false;
        }
        if (!td_gw_route_allows(v->route, rq->method)) {
            refuse(v, 405, TD_GW_FORM_METHOD, TD_OUT_BAD_REQUEST, "method_not_allowed",
                   "method_not_allowed", TD_GW_LEVEL_ROUTE);
            return false;
        }
    }
    /* a bodyless request (GET /v1/files) names no model and needs none; a
     * listed tenant's body that names none is refused, so that it cannot
     * reach an upstream's default model unnamed */
    if (!listed || (!model && bodyless))
        return true;
    td_gw_model_access a = td_gw_model_access_check(t, k, model);
    if (a == TD_GW_MODEL_ALLOWED)
        return true;
    td_gw_level level = k ? TD_GW_LEVEL_KEY : TD_GW_LEVEL_TENANT;
    if (a == TD_GW_MODEL_HIDDEN) {
        model_not_found(v, model, "model_not_allowed", level);
    } else {
        refuse(v, 403, TD_GW_FORM_ERROR, TD_OUT_BAD_REQUEST, "model_not_allowed",
               "model_not_allowed", level);
        char esc[200];
        td_json_escape_to(esc, sizeof esc, t->name);
        snprintf(v->fields, sizeof v->fields, ",\"tenant\":\"%s\"", esc);
        v->param = "model";
        v->header = "x-should-retry: false\r\n";
        if (model)
            snprintf(v->message, sizeof v->message, "%s %s may not use the model `%s`",
                     k ? "this key of tenant" : "tenant", t->name, model);
        else
            snprintf(v->message, sizeof v->message,
                     "tenant %s may use only the models it lists: name one in the body's "
                     "\"model\"",
                     t->name);
    }
    snprintf(v->detail, sizeof v->detail, "model %.200s is not in spec.models%s",
             model ? model : "(none named)", k ? " of the tenant or its key" : "");
    return false;
}

/* A positive integer of milliseconds. */
static int parse_ms(const char *s, uint64_t *ns)
{
    uint64_t v = 0;
    if (!*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > UINT64_MAX / 10000000)
            return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    if (v == 0)
        return -1;
    *ns = v * 1000000;
    return 0;
}

/* The estimate, the class and the timeout: every input checked before
 * anything is charged. false with the refusal in v. */
static bool decide_inputs(const td_gw_request *rq, bool bodyless, td_gw_verdict *v)
{
    const td_gw_route *route = v->route;
    td_err err;
    td_cost_request q = {1, 0, 1, true};
    if (route->cost_model == TD_COST_TOKENS && bodyless) {
        /* GET /v1/models and the like: 1, and no output to reserve */
    } else if (td_cost_inspect(route->cost_model, rq->body, rq->body_len, rq->h_gpu,
                               route->default_gpu_seconds, &q, &err) != TD_OK) {
        bad_request(v, err.msg);
        return false;
    }
    v->estimate = q.estimate;
    v->prompt_tokens = q.prompt;
    v->reserve_tokens = td_cost_reserve_tokens(route->cost_model, &q, route->max_output_tokens);
    /* The configured class (the named key's, else the tenant's) is a
     * ceiling the tenant's own header cannot lift: X-Criticality may only
     * lower a request (Google SRE: criticality is the service's to set).
     * A request naming a higher class is served at the ceiling, not
     * refused, so a client that always sends critical_plus keeps working. */
    td_criticality ceiling = rq->key ? rq->key->criticality : rq->tenant->criticality;
    td_criticality crit = ceiling;
    if (rq->h_criticality && td_criticality_parse(rq->h_criticality, &crit) != TD_OK) {
        bad_request(v, "X-Criticality must be critical_plus, critical, sheddable_plus or "
                       "sheddable");
        return false;
    }
    v->crit = crit < ceiling ? ceiling : crit; /* the enum counts down from CRITICAL_PLUS = 0 */
    uint64_t timeout_ns = route->timeout_ns ? route->timeout_ns : DEFAULT_TIMEOUT_NS, asked;
    if (rq->h_timeout_ms) {
        if (parse_ms(rq->h_timeout_ms, &asked) < 0) {
            bad_request(v, "X-Request-Timeout-Ms must be a positive integer");
            return false;
        }
        /* a client may shorten the route's timeout, not stretch it */
        if (asked < timeout_ns)
            timeout_ns = asked;
    }
    v->timeout_ns = timeout_ns;
    return true;
}

/* ---- the limits ---- */

/* Takes cost at slot of a rate limit: the backend's when there is one
 * (name keys it there), else the gateway's own limiter l. */
static td_status take(const td_gw_rate_backend *be, td_limiter *l, size_t slot, const char *name,
                      const td_rate *r, double cost, uint64_t now, uint64_t *retry)
{
    return be ? be->take(be->ctx, slot, name, r, cost, now, retry)
              : td_limiter_take(l, slot, r, cost, now, retry);
}

/* Concurrency, the key's own cap first, then the tenant's. In shadow a
 * refusal is counted and the request goes on without a slot (it holds
 * none, so it releases none). false with the refusal in v. */
static bool decide_concurrency(td_gateway *g, const td_gw_request *rq, td_gw_verdict *v)
{
    const td_gw_tenant *t = rq->tenant;
    const td_gw_key *k = rq->key;
    bool shadow = t->shadow_concurrency;
    if (k && k->concurrency) {
        if (td_limiter_acquire(td_gateway_key_limiter(g), k->slot, k->concurrency) != TD_OK) {
            event(v, TD_LIMIT_KEY_CONCURRENCY, shadow, shadow, k, "concurrency_limited");
            if (!shadow) {
                limited(v, "concurrency_limited", RETRY_1S, TD_GW_LEVEL_KEY, NULL);
                return false;
            }
        } else {
            v->charged.key_conc_held = true;
        }
    }
    if (td_limiter_acquire(td_gateway_limiter(g), t->slot, t->concurrency) != TD_OK) {
        event(v, TD_LIMIT_CONCURRENCY, shadow, shadow, NULL, "concurrency_limited");
        if (!shadow) {
            limited(v, "concurrency_limited", RETRY_1S, TD_GW_LEVEL_TENANT, NULL);
            return false;
        }
    } else {
        v->charged.conc_held = true;
    }
    return true;
}

/* Rate, the key's own first, then the tenant's. In shadow a refusal
 * charges nothing (the limiter's state is what enforcing would have left)
 * and the request goes on. A refusal after a charge gives the whole
 * estimate back (refund). false with the refusal in v. */
static bool decide_rate(td_gateway *g, const td_gw_request *rq, td_gw_verdict *v)
{
    const td_gw_tenant *t = rq->tenant;
    const td_gw_key *k = rq->key;
    bool shadow = t->shadow_rate;
    uint64_t retry = 0;
    td_status st;
    if (k && k->rate.cost > 0) {
        st = take(td_gateway_key_shared(g), td_gateway_key_limiter(g), k->slot,
                  td_gateway_slot_name(g, 'k', k->slot), &k->rate, v->estimate, rq->now_ns, &retry);
        if (st != TD_OK) {
            event(v, TD_LIMIT_KEY_RATE, shadow, shadow, k, "rate_limited");
            if (!shadow) {
                limited(v, "rate_limited", st == TD_EAGAIN ? retry : RETRY_1S, TD_GW_LEVEL_KEY,
                        NULL);
                return false;
            }
        } else {
            v->charged.key_rate_charged = true;
        }
    }
    st = take(td_gateway_shared(g), td_gateway_limiter(g), t->slot, t->name, &t->rate, v->estimate,
              rq->now_ns, &retry);
    if (st != TD_OK) {
        event(v, TD_LIMIT_RATE, shadow, shadow, NULL, "rate_limited");
        if (!shadow) {
            v->refund = true;
            limited(v, "rate_limited", st == TD_EAGAIN ? retry : RETRY_1S, TD_GW_LEVEL_TENANT,
                    NULL);
            return false;
        }
    } else {
        v->charged.rate_charged = true;
    }
    return true;
}

/* The tenant's own limit for the body's model (spec.gateway.models[]),
 * concurrency then rate, in the tenant's enforcement mode (a shadow
 * refusal is counted, not noted); a refusal gives back what was charged
 * before. false with the refusal in v. */
static bool decide_model_limit(td_gateway *g, const td_gw_request *rq, const char *model,
                               td_gw_verdict *v)
{
    const td_gw_tenant *t = rq->tenant;
    const td_gw_model_limit *ml = td_gw_model_limit_for(t, model);
    if (!ml)
        return true;
    td_limiter *kl = td_gateway_key_limiter(g);
    if (ml->concurrency) {
        if (td_limiter_acquire(kl, ml->slot, ml->concurrency) != TD_OK) {
            event(v, TD_LIMIT_CONCURRENCY, t->shadow_concurrency, false, NULL,
                  "concurrency_limited");
            if (!t->shadow_concurrency) {
                v->refund = true;
                limited(v, "concurrency_limited", RETRY_1S, TD_GW_LEVEL_MODEL, ml);
                return false;
            }
        } else {
            v->charged.model_limit = ml;
            v->charged.model_conc_held = true;
        }
    }
    if (ml->rate.cost > 0) {
        uint64_t retry = 0;
        td_status st =
            take(td_gateway_key_shared(g), kl, ml->slot, td_gateway_slot_name(g, 'k', ml->slot),
                 &ml->rate, v->estimate, rq->now_ns, &retry);
        if (st != TD_OK) {
            event(v, TD_LIMIT_RATE, t->shadow_rate, false, NULL, "rate_limited");
            if (!t->shadow_rate) {
                v->refund = true;
                limited(v, "rate_limited", st == TD_EAGAIN ? retry : RETRY_1S, TD_GW_LEVEL_MODEL,
                        ml);
                return false;
            }
        } else {
            v->charged.model_limit = ml;
            v->charged.model_rate_charged = true;
        }
    }
    return true;
}

/* Budgets: the reservation's price (the estimate; with no max_tokens, the
 * prompt and the route's maxOutputTokens) reserved at every budget of the
 * key's own, then of the tenant's, or at none. Shadow budgets always
 * reserve; those over are in v->budget.shadow. false with the refusal. */
static bool decide_budget(td_gateway *g, const td_gw_request *rq, td_gw_budget_hold *hold,
                          td_gw_verdict *v)
{
    const td_gw_tenant *t = rq->tenant;
    const td_gw_key *k = rq->key;
    if (!(t->nbudgets || t->nmodel_budgets || (k && k->nbudgets)) || !rq->cfg->cost_policy)
        return true;
    int64_t price = td_gw_price_units(rq->cfg, v->route, t, rq->model, v->reserve_tokens);
    td_status st =
        td_gateway_budget_reserve(g, t, k, rq->model, price, rq->now_s, hold, &v->budget);
    if (v->budget.nshadow && !v->shadow)
        v->shadow = "budget_exceeded";
    if (st == TD_OK)
        return true;
    bool key = v->budget.refused.key != NULL;
    event(v, key ? TD_LIMIT_KEY_BUDGET : TD_LIMIT_BUDGET, false, false, v->budget.refused.key,
          "budget_exceeded");
    v->refund = true;
    refuse(v, 429, TD_GW_FORM_BUDGET, TD_OUT_BUDGET_EXCEEDED, "budget_exceeded", "budget_exceeded",
           key ? TD_GW_LEVEL_KEY : TD_GW_LEVEL_TENANT);
    return false;
}

void td_gw_decide(td_gateway *g, const td_gw_request *rq, td_gw_budget_hold *hold, td_gw_verdict *v)
{
    v->status = 0;
    v->route = rq->route;
    v->estimate = v->prompt_tokens = v->reserve_tokens = 0;
    v->crit = TD_CRIT_CRITICAL;
    v->timeout_ns = 0;
    memset(&v->charged, 0, sizeof v->charged);
    v->refund = false;
    v->shadow = NULL;
    v->nevents = 0;
    v->budget.nshadow = 0;
    v->budget.refused.budget = NULL;
    v->level = TD_GW_LEVEL_NONE;
    v->model_limit = NULL;
    if (rq->model_cap)
        rq->model[0] = '\0';
    bool bodyless = bodyless_method(rq);
    const char *model = NULL;
    if (!decide_model(rq, bodyless, v, &model) || !decide_inputs(rq, bodyless, v) ||
        !decide_concurrency(g, rq, v) || !decide_rate(g, rq, v) ||
        !decide_model_limit(g, rq, model, v))
        return;
    decide_budget(g, rq, hold, v);
}

void td_gw_charges_release(td_gateway *g, const td_gw_tenant *t, const td_gw_key *k,
                           td_gw_charges *ch, double estimate, double actual, uint64_t now_ns)
{
    double delta = actual - estimate;
    td_limiter *kl = td_gateway_key_limiter(g);
    const td_gw_rate_backend *ks = td_gateway_key_shared(g);
    if (ch->rate_charged && delta != 0) {
        const td_gw_rate_backend *ts = td_gateway_shared(g);
        if (ts)
            ts->adjust(ts->ctx, t->slot, delta);
        else
            td_limiter_adjust(td_gateway_limiter(g), t->slot, &t->rate, delta, now_ns);
    }
    if (ch->conc_held)
        td_limiter_release(td_gateway_limiter(g), t->slot);
    if (ch->key_rate_charged && delta != 0) {
        if (ks)
            ks->adjust(ks->ctx, k->slot, delta);
        else
            td_limiter_adjust(kl, k->slot, &k->rate, delta, now_ns);
    }
    if (ch->key_conc_held)
        td_limiter_release(kl, k->slot);
    const td_gw_model_limit *ml = ch->model_limit;
    if (ch->model_rate_charged && delta != 0) {
        if (ks)
            ks->adjust(ks->ctx, ml->slot, delta);
        else
            td_limiter_adjust(kl, ml->slot, &ml->rate, delta, now_ns);
    }
    if (ch->model_conc_held)
        td_limiter_release(kl, ml->slot);
    memset(ch, 0, sizeof *ch);
}

int64_t td_gw_price_units(const td_gw_config *c, const td_gw_route *route, const td_gw_tenant *t,
                          const char *model, double units)
{
    td_ledger_rec rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = TD_LEDGER_REQUEST;
    snprintf(rec.route, sizeof rec.route, "%s", route->name);
    snprintf(rec.tenant, sizeof rec.tenant, "%s", t->name);
    snprintf(rec.model, sizeof rec.model, "%s", model ? model : "");
    snprintf(rec.outcome, sizeof rec.outcome, "ok");
    rec.count = 1;
    rec.gpu_used_milli = -1;
    double gpu_s = route->cost_model == TD_COST_GPU_SECONDS ? units : route->default_gpu_seconds;
    rec.gpu_milli_seconds = (int64_t)(gpu_s * 1000 + 0.5);
    int64_t a = 0, b = 0;
    if (route->cost_model == TD_COST_TOKENS)
        rec.tokens_in = (int64_t)ceil(units);
    if (td_gw_price(c, &rec, &a, NULL) != TD_OK)
        a = 0;
    if (route->cost_model == TD_COST_TOKENS) {
        rec.tokens_out = rec.tokens_in;
        rec.tokens_in = 0;
        if (td_gw_price(c, &rec, &b, NULL) != TD_OK)
            b = 0;
    }
    return a > b ? a : b;
}
