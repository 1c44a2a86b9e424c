/* decide.h - the gateway's decision on one request: from its facts (the
 * credential, method, path, body, the headers tenantd acts on), the config
 * view, the limiter and budget state and the time passed in, forward
 * (route, estimate, criticality, what was charged) or refuse (status,
 * OpenAI code, level, the reason the access log and metrics use). No
 * sockets, no clock reads, no allocation. */
#ifndef TENANTD_GW_DECIDE_H
#define TENANTD_GW_DECIDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/critqueue.h"
#include "gateway/gateway.h"
#include "gateway/metrics.h"

/* ---- who: the tenant and key of a credential ---- */

#define TD_GW_KEY_CACHE_MAX 128 /* longer API keys are hashed every time */

/* The last key a client connection identified with and what it resolved
 * to under the view of generation gen (0: empty): the same key bytes again
 * (compared in constant time) under the same view skip the SHA-256 and the
 * lookup. Zeroed storage is empty; wipe bytes when done with it. */
typedef struct {
    uint64_t gen;
    size_t len;
    const td_gw_tenant *tenant;
    const td_gw_key *key;
    char bytes[TD_GW_KEY_CACHE_MAX];
} td_gw_key_cache;

/* The tenant of a request: authorization ("Bearer KEY", scheme any case,
 * NULL if absent) names a key of c, or, without authorization and only
 * when allow_x_tenant (demo mode), x_tenant (NULL if absent) a tenant by
 * name. NULL when neither does (401). *key: the key's own entry when it
 * is named (its limits apply), else NULL. cache (may be NULL) is read and
 * updated. All borrowed. */
const td_gw_tenant *td_gw_decide_auth(const td_gw_config *c, const char *authorization,
                                      const char *x_tenant, bool allow_x_tenant,
                                      td_gw_key_cache *cache, const td_gw_key **key);

/* ---- where: what the path says before the body ---- */

/* true for a method no route ever forwards: CONNECT would open a tunnel
 * past every limit and TRACE echoes the request, credentials included,
 * back (405 on any route). method: its name, "CONNECT". */
bool td_gw_method_refused(const char *method);

typedef enum {
    TD_GW_PATH_ROUTE,       /* *route serves it */
    TD_GW_PATH_BY_MODEL,    /* the route depends on the body's "model" (td_gw_decide) */
    TD_GW_PATH_MODELS_LIST, /* GET /v1/models: tenantd answers (td_gw_models_list) */
    TD_GW_PATH_NO_ROUTE,    /* 404 no_route */
    TD_GW_PATH_METHOD       /* 405: *route does not forward method (Allow: route->allow) */
} td_gw_path_verdict;

/* Where a request of tenant t (key k, may be NULL) for method on path
 * (normalized, see reqpath.h; NUL-terminated) goes, before its body.
 * *route: the route with TD_GW_PATH_ROUTE and TD_GW_PATH_METHOD, else
 * NULL. */
td_gw_path_verdict td_gw_decide_path(const td_gw_config *c, const td_gw_tenant *t,
                                     const td_gw_key *k, const char *method, const char *path,
                                     const td_gw_route **route);

/* ---- the rest, with the body ---- */

/* The facts of a request whose head and body are in. All borrowed. */
typedef struct {
    const td_gw_config *cfg;
    const td_gw_tenant *tenant; /* td_gw_decide_auth */
    const td_gw_key *key;       /* NULL or named */
    const td_gw_route *route;   /* td_gw_decide_path's; NULL when by_model */
    bool by_model;              /* TD_GW_PATH_BY_MODEL */
    const char *method;         /* "POST" */
    const char *path;           /* normalized, NUL-terminated (for by_model) */
    const char *body;           /* need not be NUL-terminated */
    size_t body_len;
    /* X-Criticality, X-Request-Timeout-Ms, X-Tenantd-Gpu-Seconds: NULL if absent */
    const char *h_criticality, *h_timeout_ms, *h_gpu;
    uint64_t now_ns; /* the limiters' clock (monotonic) */
    int64_t now_s;   /* wall clock seconds: the budgets' periods */
    char *model;     /* out: the body's "model" ("" when none), model_cap bytes */
    size_t model_cap;
} td_gw_request;

typedef enum {
    TD_GW_LEVEL_NONE,
    TD_GW_LEVEL_TENANT,
    TD_GW_LEVEL_KEY,   /* the named key's own limit or budget */
    TD_GW_LEVEL_MODEL, /* the tenant's spec.gateway.models[] limit */
    TD_GW_LEVEL_ROUTE  /* the route: its methods, its models */
} td_gw_level;

/* How a refusal's body is written (the bytes are io's). */
typedef enum {
    TD_GW_FORM_ERROR,   /* an OpenAI error: code, message, param, fields, header */
    TD_GW_FORM_LIMITED, /* 429 of a rate or concurrency limit at level (tenant, key, model) */
    TD_GW_FORM_BUDGET,  /* 429 budget_exceeded: budget.refused */
    TD_GW_FORM_METHOD   /* 405 method_not_allowed, Allow: route->allow */
} td_gw_form;

/* What a forwarded (or refused) request holds, given back by
 * td_gw_charges_release when it ends. */
typedef struct {
    bool conc_held, rate_charged;             /* the tenant's */
    bool key_conc_held, key_rate_charged;     /* the named key's own */
    bool model_conc_held, model_rate_charged; /* of model_limit */
    const td_gw_model_limit *model_limit;
} td_gw_charges;

/* A limit that refused or, in shadow, would have: the metric to count
 * (td_metrics_limit_rejection) and, when noted, the refusal to record for
 * `tenantctl explain request` (reason, at key, shadow). */
typedef struct {
    td_limit_kind limit;
    bool shadow;
    bool noted;
    const td_gw_key *key;
    const char *reason; /* "rate_limited", "concurrency_limited" */
} td_gw_limit_event;

typedef struct {
    int status; /* 0: forward; else the refusal's HTTP status */
    /* known once the body is read (forward, and refusals from the limits on) */
    const td_gw_route *route;
    double estimate;       /* cost units charged to the rate limits */
    double prompt_tokens;  /* the estimate's prompt tokens (tokens routes) */
    double reserve_tokens; /* tokens the budgets reserved */
    td_criticality crit;
    uint64_t timeout_ns;   /* the route's, shortened by X-Request-Timeout-Ms */
    td_gw_charges charged; /* held also by a refusal: io gives it back */
    bool refund;           /* a refusal after a rate charge: give the whole estimate back */
    const char *shadow;    /* the first shadow limit that would have refused, or NULL */
    td_gw_limit_event events[6];
    size_t nevents;
    td_gw_budget_verdict budget; /* shadow budgets over (nshadow); the refused one */
    /* a refusal */
    td_gw_form form;
    td_outcome outcome;
    const char *code;   /* OpenAI error code: "rate_limited", "model_not_found", ... */
    const char *reason; /* what the access log, metrics and explain call it */
    td_gw_level level;
    uint64_t retry_after_ns; /* FORM_LIMITED; TD_LIMITER_NEVER: the cost is over the burst */
    const td_gw_model_limit *model_limit; /* LEVEL_MODEL */
    /* FORM_ERROR */
    const char *param;  /* the request field at fault, or NULL */
    const char *header; /* extra header lines ("x-should-retry: false\r\n"), or NULL */
    char fields[300];   /* tenantd's own members (",\"tenant\":\"x\""), or "" */
    char message[400];  /* not JSON-escaped */
    char detail[400];   /* "" or the record `tenantctl explain request` keeps */
} td_gw_verdict;

/* Decides request rq with the limiter and budget state of g at rq's
 * times, in this order: the body's model (400), the route by model (400
 * model_required, 404 model_not_found, 405), the models the tenant and key
 * may use (403 model_not_allowed, 404 for a customer tenant), the cost
 * estimate (400), X-Criticality (only lowers the configured class; 400 if
 * unknown), X-Request-Timeout-Ms (only shortens; 400), concurrency (key,
 * tenant), rate (key, tenant), the tenant's model limit (concurrency,
 * rate), budgets (key's, tenant's: 429 budget_exceeded). Limits in shadow
 * are counted in v->events and never refuse. v->status 0: forward to
 * v->route; else refuse. Either way v->charged and hold (caller storage,
 * overwritten) are what the request holds until td_gw_charges_release and
 * td_gateway_budget_settle. */
void td_gw_decide(td_gateway *g, const td_gw_request *rq, td_gw_budget_hold *hold,
                  td_gw_verdict *v);

/* Gives back what ch holds for tenant t and key k: concurrency slots
 * released, rate charges adjusted from estimate to actual (0 gives the
 * whole estimate back) at now_ns; ch empty after. */
void td_gw_charges_release(td_gateway *g, const td_gw_tenant *t, const td_gw_key *k,
                           td_gw_charges *ch, double estimate, double actual, uint64_t now_ns);

/* The price in nano-units of a request of tenant t on route r for model
 * (the body's; NULL or "" when it names none) using units (tokens, GPU
 * seconds or requests, as the route counts) under c's CostPolicy (the
 * model's price before the route's); tokens at the dearer of the input and
 * output prices. 0 without a price. */
int64_t td_gw_price_units(const td_gw_config *c, const td_gw_route *r, const td_gw_tenant *t,
                          const char *model, double units);

#endif
