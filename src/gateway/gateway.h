/* gateway.h - what the gateway's workers share: an immutable view of the
 * Tenants and Routes of a config snapshot (keys hashed, limits parsed,
 * routes sorted for longest-prefix match), and the runtime state that
 * outlives reloads (limiter, metrics, shared limits), indexed by slots that
 * stay fixed for a tenant or route name across reloads. Limits and budgets
 * shared by replicas come in as backends (gateway/backends.h). */
#ifndef TENANTD_GATEWAY_H
#define TENANTD_GATEWAY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#include "gateway/backends.h"
#include "gateway/budget.h"
#include "gateway/cors.h"
#include "cost/chargeback.h"
#include "core/config.h"
#include "gateway/critqueue.h"
#include "gateway/endpoints.h"
#include "core/limiter.h"
#include "gateway/metrics.h"
#include "gateway/recent.h"
#include "tenantd/status.h"

#define TD_GW_MAX_TENANTS 65536
#define TD_GW_MAX_ROUTES 1024
#define TD_GW_MAX_KEYS     65536 /* named keys with limits of their own, over all reloads */
#define TD_GW_RECENT_RINGS 16 /* refusal rings, one per worker (mod 16) */

typedef enum { TD_COST_TOKENS, TD_COST_GPU_SECONDS, TD_COST_REQUESTS } td_cost_model;

/* spec.budgets[] and spec.apiKeys[].budgets[]: at most one per period. */
typedef struct {
    td_period period;
    int64_t amount_nano; /* in the CostPolicy's currency */
    bool shadow;         /* counted and noted, never refused */
} td_gw_budget;

/* spec.budgets[] with models: a budget held only by the requests naming
 * one of its models, beside the tenant's budgets (a 70B model with a money
 * budget of its own). Spend by key slot, as a named key's. */
#define TD_GW_MODEL_BUDGETS 16 /* per tenant */
typedef struct {
    td_gw_budget b;
    char **models;  /* exact names, or prefixes ending in '*' */
    size_t nmodels;
    char *name;     /* "m1,m2": the models as the config lists them */
    uint32_t slot;  /* key slot of "tenant/budget:m1,m2" (stable across reloads) */
} td_gw_model_budget;

/* spec.apiKeys[]: a key, with limits of its own when it has a name. */
typedef struct {
    char *name;           /* NULL: unnamed, only the tenant's limits apply */
    uint32_t slot;        /* key slot of "tenant/name" (stable across reloads); valid with a name */
    td_rate rate;         /* rate.cost <= 0: none of its own */
    uint32_t concurrency; /* 0: none of its own */
    /* the highest class its requests get (X-Criticality may only lower
     * it): its own spec.apiKeys[].criticality, else the tenant's */
    td_criticality criticality;
    /* its own budgets (each at most the tenant's of the same period); the
     * tenant's budgets hold for it too. Spend by key slot. */
    td_gw_budget budgets[TD_PERIOD_COUNT];
    size_t nbudgets;
    /* spec.apiKeys[].models: the models it may use, each within the
     * tenant's (exact names, a trailing '*' a prefix); NULL: the tenant's */
    char **models;
    size_t nmodels;
} td_gw_key;

/* spec.gateway.models[]: a limit of the tenant's own for the requests
 * naming a model, held beside the tenant's (an expensive model tighter
 * than a small one). State by key slot, as a named key's. */
typedef struct {
    char *model;          /* exact name, or a prefix ending in '*' */
    uint32_t slot;        /* key slot of "tenant/model:MODEL" (stable across reloads) */
    td_rate rate;         /* rate.cost <= 0: none */
    uint32_t concurrency; /* 0: none */
} td_gw_model_limit;

typedef struct {
    char *name;
    uint32_t slot;              /* stable across reloads */
    td_rate rate;               /* rate.cost <= 0: unlimited */
    uint32_t concurrency;       /* 0: unlimited */
    uint32_t max_connections;   /* client connections open at once, 0: unlimited */
    td_criticality criticality; /* default for its requests */
    double weight;              /* > 0 */
    /* spec.gateway.enforcement: true = shadow, the limit is decided and
     * counted ("would have rejected") but the request proceeds. */
    bool shadow_rate, shadow_concurrency;
    unsigned char (*key_sha256)[32];
    td_gw_key *keys; /* nkeys, parallel to key_sha256 */
    size_t nkeys;
    td_gw_budget budgets[TD_PERIOD_COUNT];
    size_t nbudgets;
    char *team, *project, *environment; /* spec.labels (cost labels), "" if absent */
    /* spec.models: the models it may use (exact names, a trailing '*' a
     * prefix); NULL: every model */
    char **models;
    size_t nmodels;
    bool customer; /* spec.tenancy customer: a model it may not use reads as unknown */
    td_gw_model_limit *model_limits; /* spec.gateway.models[], in order */
    size_t nmodel_limits;
    td_gw_model_budget *model_budgets; /* spec.budgets[] with models, in order */
    size_t nmodel_budgets;
} td_gw_tenant;

/* One endpoint of a Route's pool (spec.upstream.endpoints[], or
 * spec.upstream.address as the only one). */
typedef struct {
    char *address; /* "host:port" as configured */
    char *host;
    uint16_t port;
    uint32_t weight; /* 1..1000 (default 1) */
} td_gw_endpoint;

typedef struct {
    char *name;
    uint32_t slot;       /* stable across reloads */
    char *path_prefix;
    char *upstream;      /* "host:port" of the first endpoint */
    char *upstream_host;
    uint16_t upstream_port;
    /* the pool: at least one, at most TD_EP_MAX; a route with
     * spec.upstream.address has that one (pool false) */
    td_gw_endpoint *endpoints;
    size_t nendpoints;
    bool pool;          /* configured with spec.upstream.endpoints */
    td_balance balance; /* spec.upstream.balance (default leastRequests) */
    uint32_t capacity;   /* in flight to each endpoint (default 64) */
    /* spec.upstream.healthCheck: present -> every endpoint is checked */
    bool health_check;
    char *hc_path;               /* default "/health" */
    uint64_t hc_interval_ns;     /* default 5 s */
    uint64_t hc_timeout_ns;      /* default 1 s */
    uint32_t hc_unhealthy, hc_healthy; /* thresholds (default 2, 1) */
    /* balance queueDepth: spec.upstream.scrapeEvery (default 1 s) and
     * spec.upstream.metrics {path, waiting, kvCache} (vLLM's by default) */
    uint64_t scrape_every_ns;
    /* spec.upstream.resolveEvery (default 5 s): how often an endpoint whose
     * host is a DNS name is looked up again (each address an endpoint) */
    uint64_t resolve_every_ns;
    char *metrics_path, *waiting_metric, *kv_metric;
    uint32_t queue;      /* waiting behind them (default 256) */
    td_cost_model cost_model;
    uint64_t timeout_ns; /* default 30 s */
    double default_gpu_seconds; /* estimate for gpuSeconds routes (default 1) */
    /* spec.methods (default GET, POST): the methods it forwards; others get
     * 405 with allow (e.g. "GET, POST") as the Allow header. */
    char **methods;
    size_t nmethods;
    char *allow;
    /* spec.upstream.authorization.fromEnv: the Authorization value sent to
     * the upstream, read from that variable when the config is loaded;
     * NULL: none (the client's credential is never forwarded). */
    char *upstream_authorization;
    /* spec.cost.maxOutputTokens: output tokens a request naming no
     * max_tokens reserves of its budgets (0: TD_COST_DEFAULT_MAX_OUTPUT_TOKENS) */
    uint32_t max_output_tokens;
    /* spec.match.models: the body's "model" values it serves (exact names,
     * a trailing '*' a prefix); NULL (nmodels 0): any request on its path */
    char **models;
    size_t nmodels;
    td_gw_cors *cors; /* spec.cors, or NULL: no CORS headers, preflights not answered */
} td_gw_route;

typedef struct td_gw_config td_gw_config;
struct td_gw_config {
    atomic_int refs;
    uint64_t generation;
    td_gw_tenant *tenants;
    size_t ntenants;
    td_gw_route *routes; /* longest prefix first; at a tie, those matching models first */
    size_t nroutes;
    size_t nmodel_routes; /* routes with spec.match.models */
    td_costpolicy *cost_policy; /* NULL when the config has none */
};

typedef struct td_gateway td_gateway;

typedef struct {
    bool allow_x_tenant; /* demo mode: trust an X-Tenant header */
} td_gateway_opts;

/* The runtime state, with the gateway view of cfg as its first config;
 * limits and budgets are this process's own until td_gateway_set_backends. */
td_status td_gateway_create(const td_config *cfg, const td_gateway_opts *o, td_gateway **out,
                            td_err *err);
/* Destroys g and the backends it took over (the budgets' first, which give
 * their leases back while g's spend counters still exist). NULL: no-op. */
void td_gateway_destroy(td_gateway *g);
/* Hands g the backends of limits and budgets shared by replicas (b copied,
 * its contexts taken over: destroyed with g), before any request or reload
 * uses g: all four contexts set, or TD_EINVAL and nothing taken. */
td_status td_gateway_set_backends(td_gateway *g, const td_gw_backends *b, td_err *err);

/* Builds the view of cfg and swaps it in (new tenant/route names get new
 * slots; a tenant whose rate changed has its limiter state reset).
 * TD_EINVAL (nothing changed) if a Route or Tenant cannot be served, e.g.
 * an upstream address that is not host:port. Any thread. */
td_status td_gateway_reload(td_gateway *g, const td_config *cfg, td_err *err);

/* A worker's view: returns the current config, keeping *held (the
 * worker's own reference, NULL at first) up to date with one atomic load
 * when nothing changed. The worker releases *held with td_gw_config_unref
 * when it stops. */
const td_gw_config *td_gateway_config(td_gateway *g, td_gw_config **held);
void td_gw_config_unref(td_gw_config *c);

/* The tenant whose key this is (SHA-256, compared in constant time with
 * every configured hash), or NULL. */
const td_gw_tenant *td_gw_tenant_by_key(const td_gw_config *c, const char *key, size_t len);
/* The same, and *k (may be NULL) the key's own entry. */
const td_gw_tenant *td_gw_tenant_by_key_ex(const td_gw_config *c, const char *key, size_t len,
                                           const td_gw_key **k);

/* The price of a request's ledger record r (borrowed) under c's CostPolicy,
 * in nano-units. TD_ENOTFOUND without a CostPolicy; TD_EINVAL naming the
 * route when it has no price (config validation keeps budgeted tenants from
 * reaching that). */
td_status td_gw_price(const td_gw_config *c, const td_ledger_rec *r, int64_t *nano, td_err *err);
const td_gw_tenant *td_gw_tenant_by_name(const td_gw_config *c, const char *name);

/* The route with the longest path prefix matching path (normalized, see
 * reqpath.h) on a segment boundary, or NULL. */
const td_gw_route *td_gw_route_match(const td_gw_config *c, const char *path);
/* The CORS policy of a request on path (normalized) before its route is
 * known (a preflight has no body to route by model with; a refusal may
 * come before the route): the first route in order whose prefix matches
 * with spec.cors, among those up to the first that takes the path whatever
 * the model. NULL: none (cors.c). */
const td_gw_cors *td_gw_cors_for_path(const td_gw_config *c, const char *path);

/* ---- models (models.c): which route serves a model, who may use it ---- */

/* true if model (NUL-terminated) matches pattern: equal, or pattern ends in
 * '*' and model starts with what precedes it ("llama-*" matches
 * "llama-3-70b"; "*" matches every model). */
bool td_gw_model_match(const char *pattern, const char *model);
/* true if model matches one of the n patterns. */
bool td_gw_model_listed(char *const *patterns, size_t n, const char *model);

typedef enum {
    TD_GW_ROUTE_FOUND,     /* the route is known from the path */
    TD_GW_ROUTE_BY_MODEL,  /* it depends on the body's "model" */
    TD_GW_ROUTE_NONE       /* no route has a prefix matching the path */
} td_gw_route_need;
/* Before the body: what the path alone says (path normalized, see
 * reqpath.h). *out is the route with TD_GW_ROUTE_FOUND, NULL otherwise.
 * The path decides when the first route in order (longest prefix first,
 * at a tie those with spec.match.models first) whose prefix matches has
 * no spec.match.models. */
td_gw_route_need td_gw_route_by_path(const td_gw_config *c, const char *path,
                                     const td_gw_route **out);
/* The first route in order whose prefix matches path and whose
 * spec.match.models (when it has any) match model; model NULL (the body
 * names none) matches only routes without spec.match.models. NULL: none. */
const td_gw_route *td_gw_route_select(const td_gw_config *c, const char *path, const char *model);

typedef enum {
    TD_GW_MODEL_ALLOWED,
    TD_GW_MODEL_FORBIDDEN, /* 403 model_not_allowed */
    TD_GW_MODEL_HIDDEN     /* customer tier: 404 model_not_found, as if unknown */
} td_gw_model_access;
/* May tenant t (with its named key k, may be NULL) use model? Within t's
 * spec.models (absent: all) and k's (absent: t's). model NULL (a body that
 * names none) is allowed only when neither lists models: a listed tenant
 * must not reach an upstream's default model unnamed. */
td_gw_model_access td_gw_model_access_check(const td_gw_tenant *t, const td_gw_key *k,
                                            const char *model);

/* The first of t's spec.gateway.models[] whose model matches model, or
 * NULL (model NULL: none). */
const td_gw_model_limit *td_gw_model_limit_for(const td_gw_tenant *t, const char *model);

/* The value of a metrics series' model label for model (bounded by the
 * configuration): model itself when a Route's spec.match.models lists it
 * by name; else the longest Route prefix pattern matching it ("llama-*");
 * else "other"; "" for no model. Points into c (or is static): copy it
 * before c is released. */
const char *td_gw_model_label(const td_gw_config *c, const char *model);

/* The body's "model" string into out (cap bytes, NUL-terminated); "" when
 * the body is empty or names none. TD_EINVAL with a message when the body
 * is not a JSON object, "model" is not a string, or it is longer than
 * cap - 1 bytes. body is borrowed, need not be NUL-terminated. */
td_status td_gw_body_model(const char *body, size_t len, char *out, size_t cap, td_err *err);

/* GET /v1/models for tenant t (key k may be NULL): the OpenAI list
 * {"object":"list","data":[{"id","object":"model","owned_by"}]} of every
 * model a route serves by its exact name, or the tenant or key lists by
 * exact name and a route serves, that t and k may use, each once, in
 * route order. *out (malloc'd, the caller frees) and *len; TD_ENOMEM. */
td_status td_gw_models_list(const td_gw_config *c, const td_gw_tenant *t, const td_gw_key *k,
                            char **out, size_t *len);

/* The OpenAI error "type" of a refusal with HTTP status and tenantd code:
 * invalid_request_error (400, 404, 405, 408, 413, 414, 431, 505),
 * authentication_error (401), permission_error (403), insufficient_quota
 * (budget_exceeded), rate_limit_error (other 429s), server_error (5xx). */
const char *td_gw_error_type(int status, const char *code);

/* true if route r forwards the method named m ("GET"). */
bool td_gw_route_allows(const td_gw_route *r, const char *m);

/* Shared state. */
td_limiter *td_gateway_limiter(td_gateway *g);
td_metrics *td_gateway_metrics(td_gateway *g);
/* The tenants' shared rate backend, NULL without one (--redis). */
const td_gw_rate_backend *td_gateway_shared(td_gateway *g);
td_recent *td_gateway_recent(td_gateway *g);

/* The endpoint state of the gateway's workers (see td_ep_view): fn is set
 * by the proxy when it starts and unset (NULL) before it stops; ctx is
 * borrowed. td_gateway_endpoint_view calls it under a lock, so that an
 * unset waits for a reader: a malloc'd array in *out and its length (0
 * and NULL when no proxy runs). Any thread. */
void td_gateway_set_endpoint_view(td_gateway *g, td_ep_view_fn fn, void *ctx);
size_t td_gateway_endpoint_view(td_gateway *g, td_ep_view **out);

/* Client connections per tenant (counted from a connection's first request
 * of the tenant until it closes): true and counted if slot had fewer than
 * max open (0: unlimited, still counted); false otherwise. Every true is
 * paired with one td_gateway_conn_release. Any thread. */
bool td_gateway_conn_acquire(td_gateway *g, uint32_t slot, uint32_t max);
void td_gateway_conn_release(td_gateway *g, uint32_t slot);
uint32_t td_gateway_conn_count(td_gateway *g, uint32_t slot);
/* Key-level state: limiter and (with --redis) shared limits by key slot. */
td_limiter *td_gateway_key_limiter(td_gateway *g);
const td_gw_rate_backend *td_gateway_key_shared(td_gateway *g); /* NULL without --redis */
/* Budget spend by tenant slot. */
td_budgets *td_gateway_budgets(td_gateway *g);
/* Budget spend of named keys, by key slot (td_gw_key.slot). */
td_budgets *td_gateway_key_budgets(td_gateway *g);
/* Budgets shared through Redis, by tenant slot and by key slot; NULL
 * without --redis. */
const td_gw_budget_backend *td_gateway_budget_shared(td_gateway *g);
const td_gw_budget_backend *td_gateway_key_budget_shared(td_gateway *g);

/* ---- budgets at two levels (budget_levels.c) ----
 * A request of a named key with budgets of its own is held to those and to
 * its tenant's: the estimate's price is reserved at every budget of both
 * levels, or at none, and settled at every one to the real price. */

/* What a request holds of its budgets until it ends. */
typedef struct {
    int64_t reserved_nano; /* the estimate's price, reserved at each */
    int n, nkey, nmodel;   /* held at the tenant's budgets, the key's, the model budgets */
    td_period period[TD_PERIOD_COUNT], key_period[TD_PERIOD_COUNT];
    int64_t start[TD_PERIOD_COUNT], key_start[TD_PERIOD_COUNT];
    bool leased[TD_PERIOD_COUNT], key_leased[TD_PERIOD_COUNT]; /* from a Redis lease */
    /* model budgets: each its own key slot */
    uint32_t model_slot[TD_GW_MODEL_BUDGETS];
    td_period model_period[TD_GW_MODEL_BUDGETS];
    int64_t model_start[TD_GW_MODEL_BUDGETS];
    bool model_leased[TD_GW_MODEL_BUDGETS];
} td_gw_budget_hold;

/* A budget that refused, or in shadow would have: which one, at which
 * level (key NULL: the tenant's; model set: a model budget of the
 * tenant's, budget then &model->b), and its spend before the request. */
typedef struct {
    const td_gw_budget *budget;
    const td_gw_key *key;
    const td_gw_model_budget *model;
    int64_t spent_nano;
} td_gw_budget_note;

typedef struct {
    td_gw_budget_note refused; /* .budget NULL when the request was admitted */
    td_gw_budget_note shadow[2 * TD_PERIOD_COUNT + TD_GW_MODEL_BUDGETS]; /* over, checked before */
    size_t nshadow;
} td_gw_budget_verdict;

/* The model budgets of t that hold a request naming model (NULL or "":
 * none): those listing it (exact, or a prefix). */
bool td_gw_model_budget_applies(const td_gw_model_budget *b, const char *model);

/* Reserves cost_nano (>= 0) at the key k's own budgets (k may be NULL or
 * have none), then at t's model budgets that list model (NULL or "": none),
 * then at t's, at now_s. TD_OK: every reservation is in *h (borrowed
 * storage, overwritten) for td_gateway_budget_settle. TD_EQUOTA: an
 * enforced budget had no room: v->refused names it and its level, and
 * nothing stays reserved at any level (*h is empty). Shadow budgets
 * always reserve; those that would have refused (of the levels checked
 * before any refusal) are listed in v->shadow. Key budgets come first, so
 * a key's tighter budget is the one named, then the model's. Any thread. */
td_status td_gateway_budget_reserve(td_gateway *g, const td_gw_tenant *t, const td_gw_key *k,
                                    const char *model, int64_t cost_nano, int64_t now_s,
                                    td_gw_budget_hold *h, td_gw_budget_verdict *v);
/* Settles every reservation of h (t's and k's, the same t and k as the
 * reserve) to price_nano, the request's real price (0 when it used
 * nothing), and empties h. A settle of an empty hold does nothing. */
void td_gateway_budget_settle(td_gateway *g, const td_gw_tenant *t, const td_gw_key *k,
                              td_gw_budget_hold *h, int64_t price_nano);

/* Spend of budget b of tenant t (k NULL) or of its named key k in the
 * period current at now_s: across replicas with --redis (as last seen, or
 * asked now when refresh), else this process's. */
int64_t td_gateway_budget_spent(td_gateway *g, const td_gw_tenant *t, const td_gw_key *k,
                                td_period p, int64_t now_s, bool refresh);
/* The same for t's model budget m. */
int64_t td_gateway_model_budget_spent(td_gateway *g, const td_gw_model_budget *m, int64_t now_s,
                                      bool refresh);

/* Start-up: counts the priced cost of ledger record r (a completed
 * request, outcome "ok", or one charged for ending early, "client_closed"
 * or "cut") toward its tenant's spend in every period kind
 * current at now_ns, toward its key's when r->api_key names one of the
 * tenant's named keys, and toward each model budget listing r->model, so
 * a restart keeps the period's spend. Records of
 * unknown tenants, other outcomes or unpriced routes are skipped. */
void td_gateway_budget_replay(td_gateway *g, const td_ledger_rec *r, int64_t now_ns);

/* Budgets added by a reload (a tenant's or named key's period that had no
 * budget in the configuration before) count the ledger's spend of their
 * period, as those seeded at start do: the reload forgets the counter and
 * notes the budget; this replays the ledger records of the noted budgets'
 * tenant (and key) that started before the reload. scan(ud, from_ns,
 * until_ns, cb, cb_ud) calls cb for each ledger record over that time
 * (td_ledger_read). Admin thread, never the request path. Without a scan
 * error, TD_OK and *n the budgets caught up. With --redis the budgets
 * shared through Redis are not noted: their spend is Redis'. */
typedef td_status (*td_gw_ledger_scan)(void *ud, int64_t from_ns, int64_t until_ns,
                                       int (*cb)(const td_ledger_rec *r, void *cb_ud),
                                       void *cb_ud, td_err *err);
td_status td_gateway_budget_catch_up(td_gateway *g, td_gw_ledger_scan scan, void *ud, size_t *n,
                                     td_err *err);
/* Whether a reload noted budgets that td_gateway_budget_catch_up has not
 * caught up yet. Any thread. */
bool td_gateway_budgets_added(td_gateway *g);
bool td_gateway_allow_x_tenant(const td_gateway *g);

/* Name of a tenant ('t'), route ('r') or key ('k': "tenant/key") slot, or NULL. */
const char *td_gateway_slot_name(void *g, char kind, uint32_t slot);

/* Renders /metrics. */
td_status td_gateway_metrics_text(td_gateway *g, char **out, size_t *len);

/* The gateway's kinds (Tenant, Route), *n entries, static; registered
 * by src/kinds/builtin.c. */
const td_kind_def *td_gateway_kinds(size_t *n);

#endif
