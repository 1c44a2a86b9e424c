/* gateway.c - the gateway's view of a config snapshot and the state its
 * workers share. A view is immutable and reference-counted; a reload builds
 * a whole new one and publishes it under a generation number, so that a
 * worker's check for a new view is one atomic load. Tenant and route slots
 * are handed out once per name and never reused, so limiter and metrics
 * state survive reloads. */
#include "gateway/gateway.h"

#include <ctype.h>
#include <math.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/duration.h"
#include "core/reqpath.h"
#include "core/hex.h"
#include "gateway/kinds_internal.h"

typedef struct {
    char **names; /* slot -> name; entries are set once, before n grows past them */
    _Atomic size_t n;
    size_t max;
} slot_table;

typedef struct {
    unsigned char sha[32];
    size_t tenant; /* index into tenants */
    size_t key;    /* index into that tenant's keys */
} key_entry;

/* The view's private part: keys sorted by hash for lookup, and SHA-256
 * fetched once per view (OpenSSL 3's one-shot SHA256() fetches it under a
 * lock on every call, which cost more than the hash of a short key). */
typedef struct {
    td_gw_config pub;
    key_entry *keys;
    size_t nkeys;
    EVP_MD *sha256; /* NULL: fetch failed, SHA256() is used */
} view;

/* A budget a reload added: slot's counter (a key's when key) of period p
 * was forgotten at since_ns; the ledger's records of tenant (and key)
 * started before since_ns count in it. */
typedef struct {
    bool key;
    uint32_t slot;
    td_period period;
    int64_t since_ns;
    char *tenant, *key_name;
    char *models; /* a model budget's (key slot, key_name NULL): its models joined by ',' */
} added_budget;

struct td_gateway {
    pthread_mutex_t lock; /* reloads and the swap of `current` */
    td_gw_config *current;
    _Atomic uint64_t generation;
    slot_table tenants, routes, keys;
    td_limiter *limiter;
    td_limiter *key_limiter;
    td_budgets *budgets;
    td_budgets *key_budgets; /* by key slot */
    td_gw_backends be;       /* shared by replicas (--redis): all four contexts or none */
    td_metrics *metrics;
    td_recent *recent;
    _Atomic uint32_t *conns; /* [TD_GW_MAX_TENANTS] client connections per tenant */
    bool allow_x_tenant;
    /* budgets added by reloads, not yet caught up from the ledger (under
     * lock): td_gateway_budget_catch_up */
    added_budget *added;
    size_t nadded, added_cap;
    /* the proxy's endpoint views (td_gateway_set_endpoint_view) */
    pthread_mutex_t view_lock;
    td_ep_view_fn view_fn;
    void *view_ctx;
};

/* ---- slots ------------------------------------------------------------- */

static td_status slots_init(slot_table *t, size_t max)
{
    t->names = calloc(max, sizeof *t->names);
    atomic_init(&t->n, 0);
    t->max = max;
    return t->names ? TD_OK : TD_ENOMEM;
}

static void slots_fini(slot_table *t)
{
    size_t n = atomic_load(&t->n);
    for (size_t i = 0; i < n; i++)
        free(t->names[i]);
    free(t->names);
}

/* The slot of name, allocating one if new. Called under the gateway lock. */
static td_status slot_of(slot_table *t, const char *name, uint32_t *slot)
{
    size_t n = atomic_load(&t->n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(t->names[i], name) == 0) {
            *slot = (uint32_t)i;
            return TD_OK;
        }
    if (n == t->max)
        return TD_EQUOTA;
    t->names[n] = strdup(name);
    if (!t->names[n])
        return TD_ENOMEM;
    atomic_store(&t->n, n + 1);
    *slot = (uint32_t)n;
    return TD_OK;
}

const char *td_gateway_slot_name(void *arg, char kind, uint32_t slot)
{
    td_gateway *g = arg;
    slot_table *t = kind == 't' ? &g->tenants : kind == 'k' ? &g->keys : &g->routes;
    return slot < atomic_load(&t->n) ? t->names[slot] : NULL;
}

/* ---- views ------------------------------------------------------------- */

static void models_free(char **m, size_t n)
{
    for (size_t i = 0; m && i < n; i++)
        free(m[i]);
    free(m);
}

/* A list of model names or prefixes (validated by the config) into *out,
 * *n; a missing list leaves *out NULL (no restriction). */
static td_status parse_models(const json_t *list, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!json_is_array(list))
        return TD_OK;
    size_t cnt = json_array_size(list);
    char **m = calloc(cnt ? cnt : 1, sizeof *m);
    if (!m)
        return TD_ENOMEM;
    for (size_t i = 0; i < cnt; i++) {
        const char *s = json_string_value(json_array_get(list, i));
        m[i] = strdup(s ? s : "");
        if (!m[i]) {
            models_free(m, i);
            return TD_ENOMEM;
        }
    }
    *out = m;
    *n = cnt;
    return TD_OK;
}

static void view_free(view *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->pub.ntenants; i++) {
        free(v->pub.tenants[i].name);
        free(v->pub.tenants[i].key_sha256);
        for (size_t k = 0; v->pub.tenants[i].keys && k < v->pub.tenants[i].nkeys; k++) {
            free(v->pub.tenants[i].keys[k].name);
            models_free(v->pub.tenants[i].keys[k].models, v->pub.tenants[i].keys[k].nmodels);
        }
        models_free(v->pub.tenants[i].models, v->pub.tenants[i].nmodels);
        for (size_t k = 0; k < v->pub.tenants[i].nmodel_limits; k++)
            free(v->pub.tenants[i].model_limits[k].model);
        free(v->pub.tenants[i].model_limits);
        for (size_t k = 0; k < v->pub.tenants[i].nmodel_budgets; k++) {
            models_free(v->pub.tenants[i].model_budgets[k].models,
                        v->pub.tenants[i].model_budgets[k].nmodels);
            free(v->pub.tenants[i].model_budgets[k].name);
        }
        free(v->pub.tenants[i].model_budgets);
        free(v->pub.tenants[i].keys);
        free(v->pub.tenants[i].team);
        free(v->pub.tenants[i].project);
        free(v->pub.tenants[i].environment);
    }
    for (size_t i = 0; i < v->pub.nroutes; i++) {
        td_gw_route *r = &v->pub.routes[i];
        free(r->name);
        free(r->path_prefix);
        free(r->upstream);
        free(r->upstream_host);
        for (size_t e = 0; r->endpoints && e < r->nendpoints; e++) {
            free(r->endpoints[e].address);
            free(r->endpoints[e].host);
        }
        free(r->endpoints);
        free(r->hc_path);
        free(r->metrics_path);
        free(r->waiting_metric);
        free(r->kv_metric);
        for (size_t m = 0; m < r->nmethods; m++)
            free(r->methods[m]);
        free(r->methods);
        free(r->allow);
        models_free(r->models, r->nmodels);
        td_gw_cors_destroy(r->cors);
        if (r->upstream_authorization)
            OPENSSL_cleanse(r->upstream_authorization, strlen(r->upstream_authorization));
        free(r->upstream_authorization);
    }
    free(v->pub.tenants);
    free(v->pub.routes);
    td_costpolicy_destroy(v->pub.cost_policy);
    free(v->keys);
    EVP_MD_free(v->sha256);
    free(v);
}

void td_gw_config_unref(td_gw_config *c)
{
    if (c && atomic_fetch_sub(&c->refs, 1) == 1)
        view_free((view *)c);
}

static double num_or(const json_t *j, double def)
{
    return json_is_number(j) ? json_number_value(j) : def;
}

/* spec.budgets (or a key's, at field) of the Tenant obj into out[*n], by
 * the parser that validated them when they were added (kinds.c). */
static td_status parse_budgets(const json_t *obj, const json_t *bs, const char *field,
                               td_gw_budget *out, size_t *n, td_err *err)
{
    td_vctx v = {.obj = obj, .kind = "Tenant", .err = err};
    snprintf(v.who, sizeof v.who, "Tenant %s", td_json_str(obj, "metadata.name"));
    return td__gw_budgets(&v, bs, field, out, n);
}

/* {cost, per, burst} into r; no mapping: unlimited. */
static td_status parse_rate(const json_t *rate, td_rate *r, td_err *err)
{
    r->cost = num_or(json_object_get(rate, "cost"), 0);
    int64_t per = 1000000000LL;
    const char *pers = json_string_value(json_object_get(rate, "per"));
    if (pers && td_duration_parse(pers, &per, err) != TD_OK)
        return TD_EINVAL;
    if (per <= 0)
        return td_err_set(err, TD_EINVAL, "must be > 0");
    r->per_ns = (uint64_t)per;
    r->burst = num_or(json_object_get(rate, "burst"), r->cost);
    return TD_OK;
}

/* spec.budgets[] with models (validated by the config) into t's model
 * budgets, each with the key slot of "tenant/budget:MODELS". */
static td_status build_model_budgets(td_gateway *g, const json_t *obj, td_gw_tenant *t,
                                     td_err *err)
{
    const json_t *bs = td_json_path(obj, "spec.budgets");
    size_t n = 0, i;
    json_t *b;
    json_array_foreach((json_t *)bs, i, b)
    {
        n += json_object_get(b, "models") != NULL;
    }
    if (!n)
        return TD_OK;
    t->model_budgets = calloc(n, sizeof *t->model_budgets);
    if (!t->model_budgets)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    json_array_foreach((json_t *)bs, i, b)
    {
        const json_t *ms = json_object_get(b, "models");
        if (!ms)
            continue;
        td_gw_model_budget *m = &t->model_budgets[t->nmodel_budgets++];
        /* one budget, as td__gw_budgets reads it */
        json_t *one = json_array();
        json_t *copy = json_copy(b);
        if (!one || !copy || json_object_del(copy, "models") != 0 ||
            json_array_append_new(one, copy) != 0) {
            json_decref(one);
            return td_err_set(err, TD_ENOMEM, "out of memory");
        }
        size_t got = 0;
        char f[64];
        snprintf(f, sizeof f, "spec.budgets[%zu]", i);
        td_status st = parse_budgets(obj, one, f, &m->b, &got, err);
        json_decref(one);
        if (st != TD_OK)
            return st;
        if (parse_models(ms, &m->models, &m->nmodels) != TD_OK)
            return td_err_set(err, TD_ENOMEM, "out of memory");
        size_t len = 1;
        for (size_t k = 0; k < m->nmodels; k++)
            len += strlen(m->models[k]) + 1;
        m->name = calloc(1, len);
        if (!m->name)
            return td_err_set(err, TD_ENOMEM, "out of memory");
        for (size_t k = 0; k < m->nmodels; k++) {
            if (k)
                strcat(m->name, ",");
            strcat(m->name, m->models[k]);
        }
        char full[1200];
        snprintf(full, sizeof full, "%s/budget:%s", t->name, m->name);
        st = slot_of(&g->keys, full, &m->slot);
        if (st != TD_OK)
            return td_err_set(err, st, "Tenant %s: more than %d named keys and model limits",
                              t->name, TD_GW_MAX_KEYS);
    }
    return TD_OK;
}

static td_status build_tenant(td_gateway *g, json_t *obj, td_gw_tenant *t, td_err *err)
{
    const char *name = td_json_str(obj, "metadata.name");
    json_t *gw = td_json_path(obj, "spec.gateway");
    t->name = strdup(name);
    if (!t->name)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    td_status st = slot_of(&g->tenants, name, &t->slot);
    if (st != TD_OK)
        return td_err_set(err, st, "Tenant %s: more than %d tenants", name, TD_GW_MAX_TENANTS);
    const char *team = td_json_str(obj, "spec.labels.team");
    const char *project = td_json_str(obj, "spec.labels.project");
    const char *env = td_json_str(obj, "spec.labels.environment");
    t->team = strdup(team ? team : "");
    t->project = strdup(project ? project : "");
    t->environment = strdup(env ? env : "");
    if (!t->team || !t->project || !t->environment)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    json_t *rate = json_object_get(gw, "rate");
    t->rate.cost = num_or(json_object_get(rate, "cost"), 0);
    int64_t per = 1000000000LL;
    const char *pers = json_string_value(json_object_get(rate, "per"));
    if (pers && td_duration_parse(pers, &per, err) != TD_OK)
        return td_err_prefix(err, TD_EINVAL, "Tenant %s: spec.gateway.rate.per", name);
    if (per <= 0)
        return td_err_set(err, TD_EINVAL, "Tenant %s: spec.gateway.rate.per must be > 0", name);
    t->rate.per_ns = (uint64_t)per;
    t->rate.burst = num_or(json_object_get(rate, "burst"), t->rate.cost);
    t->concurrency = (uint32_t)num_or(json_object_get(gw, "concurrency"), 0);
    t->max_connections = (uint32_t)num_or(json_object_get(gw, "maxConnections"), 0);
    t->weight = num_or(json_object_get(gw, "weight"), 1);
    if (t->weight <= 0)
        t->weight = 1;
    /* enforcement: "shadow" | "enforce" for every limit, or a mapping
     * {rate: M, concurrency: M} (validated by the config). */
    json_t *enf = json_object_get(gw, "enforcement");
    const char *all = json_string_value(enf);
    const char *er = all ? all : json_string_value(json_object_get(enf, "rate"));
    const char *ec = all ? all : json_string_value(json_object_get(enf, "concurrency"));
    t->shadow_rate = er && strcmp(er, "shadow") == 0;
    t->shadow_concurrency = ec && strcmp(ec, "shadow") == 0;
    if (parse_budgets(obj, td_json_path(obj, "spec.budgets"), "spec.budgets", t->budgets,
                      &t->nbudgets, err) != TD_OK)
        return TD_EINVAL;
    if ((st = build_model_budgets(g, obj, t, err)) != TD_OK)
        return st;
    t->criticality = TD_CRIT_CRITICAL;
    const char *crit = json_string_value(json_object_get(gw, "criticality"));
    if (crit && td_criticality_parse(crit, &t->criticality) != TD_OK)
        return td_err_set(err, TD_EINVAL, "Tenant %s: spec.gateway.criticality \"%s\" is unknown",
                          name, crit);
    const char *tier = td_json_str(obj, "spec.tenancy");
    t->customer = tier && strcmp(tier, "customer") == 0;
    if (parse_models(td_json_path(obj, "spec.models"), &t->models, &t->nmodels) != TD_OK)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    json_t *ml = json_object_get(gw, "models");
    size_t nml = json_array_size(ml);
    if (nml) {
        t->model_limits = calloc(nml, sizeof *t->model_limits);
        if (!t->model_limits)
            return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < nml; i++) {
        json_t *mo = json_array_get(ml, i);
        td_gw_model_limit *l = &t->model_limits[i];
        const char *mn = json_string_value(json_object_get(mo, "model"));
        char full[600];
        snprintf(full, sizeof full, "%s/model:%s", name, mn ? mn : "");
        l->model = strdup(mn ? mn : "");
        if (!l->model)
            return td_err_set(err, TD_ENOMEM, "out of memory");
        t->nmodel_limits = i + 1;
        st = slot_of(&g->keys, full, &l->slot);
        if (st != TD_OK)
            return td_err_set(err, st, "Tenant %s: more than %d named keys and model limits", name,
                              TD_GW_MAX_KEYS);
        if (parse_rate(json_object_get(mo, "rate"), &l->rate, err) != TD_OK)
            return td_err_prefix(err, TD_EINVAL, "Tenant %s: spec.gateway.models[%zu].rate.per",
                                 name, i);
        l->concurrency = (uint32_t)num_or(json_object_get(mo, "concurrency"), 0);
    }
    json_t *keys = td_json_path(obj, "spec.apiKeys");
    t->nkeys = json_array_size(keys);
    if (t->nkeys) {
        t->key_sha256 = calloc(t->nkeys, sizeof *t->key_sha256);
        t->keys = calloc(t->nkeys, sizeof *t->keys);
        if (!t->key_sha256 || !t->keys)
            return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    for (size_t k = 0; k < t->nkeys; k++) {
        json_t *ko = json_array_get(keys, k);
        const char *kname = td_json_str(ko, "name");
        td_gw_key *gk = &t->keys[k];
        gk->criticality = t->criticality;
        if (kname) {
            char full[300];
            snprintf(full, sizeof full, "%s/%s", name, kname);
            gk->name = strdup(kname);
            if (!gk->name)
                return td_err_set(err, TD_ENOMEM, "out of memory");
            st = slot_of(&g->keys, full, &gk->slot);
            if (st != TD_OK)
                return td_err_set(err, st, "Tenant %s: more than %d named keys", name,
                                  TD_GW_MAX_KEYS);
            if (parse_rate(json_object_get(ko, "rate"), &gk->rate, err) != TD_OK)
                return td_err_prefix(err, TD_EINVAL, "Tenant %s: spec.apiKeys[%zu].rate.per", name,
                                     k);
            gk->concurrency = (uint32_t)num_or(json_object_get(ko, "concurrency"), 0);
            const char *kc = json_string_value(json_object_get(ko, "criticality"));
            if (kc && td_criticality_parse(kc, &gk->criticality) != TD_OK)
                return td_err_set(err, TD_EINVAL,
                                  "Tenant %s: spec.apiKeys[%zu].criticality \"%s\" is unknown",
                                  name, k, kc);
            if (gk->criticality < t->criticality)
                return td_err_set(err, TD_EINVAL,
                                  "Tenant %s: spec.apiKeys[%zu].criticality %s is above the "
                                  "tenant's spec.gateway.criticality %s; a key may only be lower",
                                  name, k, td_criticality_name(gk->criticality),
                                  td_criticality_name(t->criticality));
            char bf[64];
            snprintf(bf, sizeof bf, "spec.apiKeys[%zu].budgets", k);
            if (parse_budgets(obj, json_object_get(ko, "budgets"), bf, gk->budgets,
                              &gk->nbudgets, err) != TD_OK)
                return TD_EINVAL;
            if (parse_models(json_object_get(ko, "models"), &gk->models, &gk->nmodels) != TD_OK)
                return td_err_set(err, TD_ENOMEM, "out of memory");
        }
        const char *hex = td_json_str(ko, "sha256");
        for (size_t i = 0; hex && i < 32; i++) {
            int hi = td_hexval(hex[2 * i]), lo = td_hexval(hex[2 * i + 1]);
            if (hi < 0 || lo < 0)
                return td_err_set(err, TD_EINVAL, "Tenant %s: apiKeys[%zu].sha256 is not hex",
                                  name, k);
            t->key_sha256[k][i] = (unsigned char)(hi << 4 | lo);
        }
    }
    return TD_OK;
}

/* "host:port" or "[v6]:port" into parts. */
static td_status split_hostport(const char *addr, char **host, uint16_t *port)
{
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr)
        return TD_EINVAL;
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || p <= 0 || p > 65535)
        return TD_EINVAL;
    const char *h = addr;
    size_t n = (size_t)(colon - addr);
    if (h[0] == '[') {
        if (n < 3 || h[n - 1] != ']')
            return TD_EINVAL;
        h++;
        n -= 2;
    }
    *host = strndup(h, n);
    if (!*host)
        return TD_ENOMEM;
    *port = (uint16_t)p;
    return TD_OK;
}

/* The pool: spec.upstream.endpoints[] or the one spec.upstream.address
 * (first, already copied to r->upstream). */
static td_status route_endpoints(td_gw_route *r, const char *name, json_t *eps, const char *first,
                                 td_err *err)
{
    td_status st;
    size_t ne = r->pool ? json_array_size(eps) : 1;
    if (ne == 0 || ne > TD_EP_MAX)
        return td_err_set(err, TD_EINVAL, "Route %s: spec.upstream.endpoints: 1 to %d endpoints",
                          name, TD_EP_MAX);
    r->endpoints = calloc(ne, sizeof *r->endpoints);
    if (!r->endpoints)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    for (size_t i = 0; i < ne; i++) {
        td_gw_endpoint *e = &r->endpoints[i];
        json_t *eo = r->pool ? json_array_get(eps, i) : NULL;
        const char *a = eo ? td_json_str(eo, "address") : first;
        if (!a)
            return td_err_set(err, TD_EINVAL, "Route %s: spec.upstream.address is required", name);
        e->address = strdup(a);
        if (!e->address)
            return td_err_set(err, TD_ENOMEM, "out of memory");
        r->nendpoints = i + 1;
        st = split_hostport(a, &e->host, &e->port);
        if (st != TD_OK)
            return td_err_set(err, st, "Route %s: %s \"%s\" is not HOST:PORT", name,
                              r->pool ? "spec.upstream.endpoints[].address"
                                      : "spec.upstream.address",
                              a);
        e->weight = eo ? (uint32_t)num_or(json_object_get(eo, "weight"), 1) : 1;
        if (e->weight < 1)
            e->weight = 1;
    }
    return TD_OK;
}

/* spec.upstream.healthCheck, when given: active checks of each endpoint. */
static td_status route_health_check(td_gw_route *r, const char *name, json_t *s, td_err *err)
{
    json_t *hc = td_json_path(s, "upstream.healthCheck");
    if (json_is_object(hc)) {
        r->health_check = true;
        const char *hp = td_json_str(hc, "path");
        r->hc_path = strdup(hp ? hp : "/health");
        if (!r->hc_path)
            return td_err_set(err, TD_ENOMEM, "out of memory");
        int64_t iv = 5000000000LL, to = 1000000000LL;
        const char *ivs = td_json_str(hc, "interval"), *tos = td_json_str(hc, "timeout");
        if (ivs && td_duration_parse(ivs, &iv, err) != TD_OK)
            return td_err_prefix(err, TD_EINVAL, "Route %s: spec.upstream.healthCheck.interval",
                                 name);
        if (tos && td_duration_parse(tos, &to, err) != TD_OK)
            return td_err_prefix(err, TD_EINVAL, "Route %s: spec.upstream.healthCheck.timeout",
                                 name);
        r->hc_interval_ns = iv > 0 ? (uint64_t)iv : 5000000000ULL;
        r->hc_timeout_ns = to > 0 ? (uint64_t)to : 1000000000ULL;
        r->hc_unhealthy = (uint32_t)num_or(json_object_get(hc, "unhealthyThreshold"), 2);
        r->hc_healthy = (uint32_t)num_or(json_object_get(hc, "healthyThreshold"), 1);
    }
    return TD_OK;
}

/* spec.upstream.balance, and what queueDepth scrapes. */
static td_status route_balance(td_gw_route *r, const char *name, json_t *s, td_err *err)
{
    r->balance = TD_BALANCE_LEAST_REQUESTS;
    const char *bal = td_json_str(s, "upstream.balance");
    if (bal && td_balance_parse(bal, &r->balance) != TD_OK)
        return td_err_set(err, TD_EINVAL,
                          "Route %s: spec.upstream.balance \"%s\" is not leastRequests, "
                          "roundRobin or queueDepth",
                          name, bal);
    int64_t re = 5000000000LL; /* spec.upstream.resolveEvery: names looked up again */
    const char *res = td_json_str(s, "upstream.resolveEvery");
    if (res && td_duration_parse(res, &re, err) != TD_OK)
        return td_err_prefix(err, TD_EINVAL, "Route %s: spec.upstream.resolveEvery", name);
    r->resolve_every_ns = re > 0 ? (uint64_t)re : 5000000000ULL;
    if (r->balance == TD_BALANCE_QUEUE_DEPTH) {
        int64_t se = 1000000000LL;
        const char *ses = td_json_str(s, "upstream.scrapeEvery");
        if (ses && td_duration_parse(ses, &se, err) != TD_OK)
            return td_err_prefix(err, TD_EINVAL, "Route %s: spec.upstream.scrapeEvery", name);
        r->scrape_every_ns = se > 0 ? (uint64_t)se : 1000000000ULL;
        const char *mp = td_json_str(s, "upstream.metrics.path");
        const char *wm = td_json_str(s, "upstream.metrics.waiting");
        const char *km = td_json_str(s, "upstream.metrics.kvCache");
        r->metrics_path = strdup(mp ? mp : "/metrics");
        r->waiting_metric = strdup(wm ? wm : "vllm:num_requests_waiting");
        r->kv_metric = strdup(km ? km : "vllm:gpu_cache_usage_perc");
        if (!r->metrics_path || !r->waiting_metric || !r->kv_metric)
            return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    return TD_OK;
}

/* spec.methods (default GET, POST) and the Allow header a 405 carries. */
static td_status route_methods(td_gw_route *r, const char *name, json_t *s, td_err *err)
{
    /* spec.methods: the config validated the names (no TRACE, CONNECT) */
    static const char *const defaults[] = {"GET", "POST"};
    json_t *ms = json_object_get(s, "methods");
    size_t nm = json_is_array(ms) && json_array_size(ms) ? json_array_size(ms) : 2;
    r->methods = calloc(nm, sizeof *r->methods);
    if (!r->methods)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    size_t allow_len = 1;
    for (size_t i = 0; i < nm; i++) {
        const char *m = json_is_array(ms) && json_array_size(ms)
                            ? json_string_value(json_array_get(ms, i))
                            : defaults[i];
        if (!m)
            return td_err_set(err, TD_EINVAL, "Route %s: spec.methods[%zu] is not a string", name,
                              i);
        r->methods[i] = strdup(m);
        if (!r->methods[i])
            return td_err_set(err, TD_ENOMEM, "out of memory");
        r->nmethods = i + 1;
        allow_len += strlen(m) + 2;
    }
    r->allow = malloc(allow_len);
    if (!r->allow)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    r->allow[0] = '\0';
    for (size_t i = 0; i < r->nmethods; i++) {
        if (i)
            strcat(r->allow, ", ");
        strcat(r->allow, r->methods[i]);
    }
    return TD_OK;
}

/* spec.upstream.authorization.fromEnv: the header the upstream gets. */
static td_status route_authorization(td_gw_route *r, const char *name, json_t *s, td_err *err)
{
    /* The upstream's own credential comes from the environment, so that
     * the secret stays out of the config text (and out of the stored
     * objects and the control API that show it). */
    const char *env = td_json_str(s, "upstream.authorization.fromEnv");
    if (env) {
        const char *val = getenv(env);
        if (!val || !*val)
            return td_err_set(err, TD_EINVAL,
                              "Route %s: spec.upstream.authorization.fromEnv: the environment "
                              "variable %s is not set (or empty)",
                              name, env);
        for (const char *q = val; *q; q++)
            if ((unsigned char)*q < 0x20 || *q == 0x7f)
                return td_err_set(err, TD_EINVAL,
                                  "Route %s: spec.upstream.authorization.fromEnv: %s holds a "
                                  "control byte; it must be one header value",
                                  name, env);
        r->upstream_authorization = strdup(val);
        if (!r->upstream_authorization)
            return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    return TD_OK;
}

static td_status build_route(td_gateway *g, json_t *obj, td_gw_route *r, td_err *err)
{
    const char *name = td_json_str(obj, "metadata.name");
    json_t *s = json_object_get(obj, "spec");
    r->name = strdup(name);
    /* spec.match.pathPrefix may be left out when spec.match.models says
     * which requests the route serves: every path then */
    const char *prefix = td_json_str(s, "match.pathPrefix");
    r->path_prefix = strdup(prefix ? prefix : "/");
    if (parse_models(td_json_path(s, "match.models"), &r->models, &r->nmodels) != TD_OK)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    json_t *eps = td_json_path(s, "upstream.endpoints");
    r->pool = json_is_array(eps);
    const char *first = r->pool ? td_json_str(json_array_get(eps, 0), "address")
                                : td_json_str(s, "upstream.address");
    r->upstream = first ? strdup(first) : NULL;
    if (!r->name || !r->path_prefix || (first && !r->upstream))
        return td_err_set(err, TD_ENOMEM, "out of memory");
    td_status st = slot_of(&g->routes, name, &r->slot);
    if (st != TD_OK)
        return td_err_set(err, st, "Route %s: more than %d routes", name, TD_GW_MAX_ROUTES);
    st = route_endpoints(r, name, eps, first, err);
    if (st != TD_OK)
        return st;
    st = split_hostport(r->upstream, &r->upstream_host, &r->upstream_port);
    if (st != TD_OK)
        return td_err_set(err, st, "Route %s: spec.upstream.address \"%s\" is not HOST:PORT", name,
                          r->upstream);
    if ((st = route_health_check(r, name, s, err)) != TD_OK ||
        (st = route_balance(r, name, s, err)) != TD_OK)
        return st;
    r->capacity = (uint32_t)num_or(td_json_path(s, "upstream.capacity"), 64);
    r->queue = (uint32_t)num_or(td_json_path(s, "upstream.queue"), 256);
    const char *model = td_json_str(s, "cost.model");
    r->cost_model = !model || strcmp(model, "tokens") == 0 ? TD_COST_TOKENS
                    : strcmp(model, "gpuSeconds") == 0     ? TD_COST_GPU_SECONDS
                                                           : TD_COST_REQUESTS;
    r->default_gpu_seconds = num_or(td_json_path(s, "cost.gpuSecondsEstimate"), 1);
    r->max_output_tokens = (uint32_t)num_or(td_json_path(s, "cost.maxOutputTokens"), 0);
    int64_t timeout = 30000000000LL;
    const char *ts = td_json_str(s, "timeout");
    if (ts && td_duration_parse(ts, &timeout, err) != TD_OK)
        return td_err_prefix(err, TD_EINVAL, "Route %s: spec.timeout", name);
    r->timeout_ns = (uint64_t)timeout;
    if ((st = route_methods(r, name, s, err)) != TD_OK)
        return st;
    if ((st = td_gw_cors_build(json_object_get(s, "cors"), name, &r->cors, err)) != TD_OK)
        return st;
    return route_authorization(r, name, s, err);
}

/* Longest prefix first; at the same prefix length, a route that matches
 * models before one that takes any request on its path (the more
 * specific match wins, as in Envoy's header matchers), then by name so
 * the order does not depend on qsort. */
static int route_cmp(const void *a, const void *b)
{
    const td_gw_route *ra = a, *rb = b;
    size_t la = strlen(ra->path_prefix), lb = strlen(rb->path_prefix);
    if (la != lb)
        return la < lb ? 1 : -1;
    if ((ra->nmodels > 0) != (rb->nmodels > 0))
        return ra->nmodels ? -1 : 1;
    return strcmp(ra->name, rb->name);
}

static int key_cmp(const void *a, const void *b)
{
    return memcmp(((const key_entry *)a)->sha, ((const key_entry *)b)->sha, 32);
}

/* Called under g->lock. */
static td_status build_view(td_gateway *g, const td_config *cfg, view **out, td_err *err)
{
    view *v = calloc(1, sizeof *v);
    if (!v)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    atomic_init(&v->pub.refs, 1);
    v->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    json_t *const *tenants, *const *routes;
    size_t nt = td_config_list(cfg, "Tenant", NULL, &tenants);
    size_t nr = td_config_list(cfg, "Route", NULL, &routes);
    v->pub.tenants = nt ? calloc(nt, sizeof *v->pub.tenants) : NULL;
    v->pub.routes = nr ? calloc(nr, sizeof *v->pub.routes) : NULL;
    td_status st = (nt && !v->pub.tenants) || (nr && !v->pub.routes) ? TD_ENOMEM : TD_OK;
    if (st != TD_OK)
        td_err_set(err, st, "out of memory");
    size_t nkeys = 0;
    for (size_t i = 0; st == TD_OK && i < nt; i++) {
        v->pub.ntenants = i + 1;
        st = build_tenant(g, tenants[i], &v->pub.tenants[i], err);
        nkeys += v->pub.tenants[i].nkeys;
    }
    for (size_t i = 0; st == TD_OK && i < nr; i++) {
        v->pub.nroutes = i + 1;
        st = build_route(g, routes[i], &v->pub.routes[i], err);
        if (st == TD_OK && v->pub.routes[i].nmodels)
            v->pub.nmodel_routes++;
    }
    if (st == TD_OK && nkeys) {
        v->keys = calloc(nkeys, sizeof *v->keys);
        if (!v->keys)
            st = td_err_set(err, TD_ENOMEM, "out of memory");
        for (size_t i = 0; st == TD_OK && i < v->pub.ntenants; i++)
            for (size_t k = 0; k < v->pub.tenants[i].nkeys; k++) {
                memcpy(v->keys[v->nkeys].sha, v->pub.tenants[i].key_sha256[k], 32);
                v->keys[v->nkeys].key = k;
                v->keys[v->nkeys++].tenant = i;
            }
        if (st == TD_OK) {
            qsort(v->keys, v->nkeys, sizeof *v->keys, key_cmp);
            for (size_t i = 1; i < v->nkeys; i++)
                if (memcmp(v->keys[i - 1].sha, v->keys[i].sha, 32) == 0)
                    st = td_err_set(err, TD_EINVAL,
                                    "Tenant %s and Tenant %s share an API key; a key names one "
                                    "tenant",
                                    v->pub.tenants[v->keys[i - 1].tenant].name,
                                    v->pub.tenants[v->keys[i].tenant].name);
        }
    }
    if (st == TD_OK && td_config_list(cfg, "CostPolicy", NULL, &routes) > 0 &&
        td_costpolicy_from_config(cfg, &v->pub.cost_policy, err) != TD_OK)
        st = TD_EINVAL;
    if (st != TD_OK) {
        view_free(v);
        return st;
    }
    if (v->pub.nroutes > 1)
        qsort(v->pub.routes, v->pub.nroutes, sizeof *v->pub.routes, route_cmp);
    *out = v;
    return TD_OK;
}

/* ---- lookups ----------------------------------------------------------- */

const td_gw_tenant *td_gw_tenant_by_key(const td_gw_config *c, const char *key, size_t len)
{
    return td_gw_tenant_by_key_ex(c, key, len, NULL);
}

const td_gw_tenant *td_gw_tenant_by_key_ex(const td_gw_config *c, const char *key, size_t len,
                                           const td_gw_key **k)
{
    const view *v = (const view *)c;
    if (k)
        *k = NULL;
    unsigned char sha[32];
    if (!v || !v->nkeys)
        return NULL;
    if (!v->sha256 || !EVP_Digest(key, len, sha, NULL, v->sha256, NULL))
        SHA256((const unsigned char *)key, len, sha);
    /* The search runs over hashes of secrets, so its timing tells nothing
     * about a key; the final comparison is constant-time anyway. */
    size_t lo = 0, hi = v->nkeys;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (memcmp(v->keys[mid].sha, sha, 32) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < v->nkeys && CRYPTO_memcmp(v->keys[lo].sha, sha, 32) == 0) {
        const td_gw_tenant *t = &v->pub.tenants[v->keys[lo].tenant];
        if (k && t->keys)
            *k = &t->keys[v->keys[lo].key];
        return t;
    }
    return NULL;
}

const td_gw_tenant *td_gw_tenant_by_name(const td_gw_config *c, const char *name)
{
    for (size_t i = 0; c && name && i < c->ntenants; i++)
        if (strcmp(c->tenants[i].name, name) == 0)
            return &c->tenants[i];
    return NULL;
}

const td_gw_route *td_gw_route_match(const td_gw_config *c, const char *path)
{
    size_t n = path ? strlen(path) : 0;
    for (size_t i = 0; c && path && i < c->nroutes; i++)
        if (td_reqpath_has_prefix(path, n, c->routes[i].path_prefix,
                                  strlen(c->routes[i].path_prefix)))
            return &c->routes[i];
    return NULL;
}

bool td_gw_route_allows(const td_gw_route *r, const char *m)
{
    for (size_t i = 0; r && m && i < r->nmethods; i++)
        if (strcmp(r->methods[i], m) == 0)
            return true;
    return false;
}

/* ---- the gateway ------------------------------------------------------- */

static int same_rate(const td_rate *a, const td_rate *b)
{
    return a->cost == b->cost && a->per_ns == b->per_ns && a->burst == b->burst;
}

static bool has_period(const td_gw_budget *b, size_t n, td_period p)
{
    for (size_t i = 0; i < n; i++)
        if (b[i].period == p)
            return true;
    return false;
}

static void note_added(td_gateway *g, bool key, uint32_t slot, td_period p, int64_t now_ns,
                       const char *tenant, const char *key_name, const char *models)
{
    /* noted already (added, removed and added again before a catch-up):
     * one entry, or the ledger would count twice */
    for (size_t i = 0; i < g->nadded; i++)
        if (g->added[i].key == key && g->added[i].slot == slot && g->added[i].period == p) {
            g->added[i].since_ns = now_ns;
            td_budgets_reset(key ? g->key_budgets : g->budgets, slot, p);
            return;
        }
    if (g->nadded == g->added_cap) {
        size_t cap = g->added_cap ? g->added_cap * 2 : 16;
        added_budget *a = realloc(g->added, cap * sizeof *a);
        if (!a)
            return; /* counts from the process's spend, as before; never fails a reload */
        g->added = a;
        g->added_cap = cap;
    }
    added_budget *a = &g->added[g->nadded];
    a->tenant = strdup(tenant);
    a->key_name = key_name ? strdup(key_name) : NULL;
    a->models = models ? strdup(models) : NULL;
    if (!a->tenant || (key_name && !a->key_name) || (models && !a->models)) {
        free(a->tenant);
        free(a->key_name);
        free(a->models);
        return;
    }
    a->key = key;
    a->slot = slot;
    a->period = p;
    a->since_ns = now_ns;
    g->nadded++;
    td_budgets_reset(key ? g->key_budgets : g->budgets, slot, p);
}

/* Under the lock, before next is published: the budgets of next that old
 * had not (by tenant, key name and period), on this process's counters
 * (not those shared through Redis), are forgotten and noted for
 * td_gateway_budget_catch_up. Nobody reserved at them under old. */
static void note_added_budgets(td_gateway *g, const td_gw_config *old, const td_gw_config *next)
{
    if (!old)
        return; /* at start, seed_budgets replays the ledger for all */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    for (size_t i = 0; i < next->ntenants; i++) {
        const td_gw_tenant *t = &next->tenants[i];
        const td_gw_tenant *was = td_gw_tenant_by_name(old, t->name);
        for (size_t b = 0; !g->be.tenant_budget.ctx && b < t->nbudgets; b++)
            if (!was || !has_period(was->budgets, was->nbudgets, t->budgets[b].period))
                note_added(g, false, t->slot, t->budgets[b].period, now_ns, t->name, NULL, NULL);
        for (size_t b = 0; !g->be.key_budget.ctx && b < t->nmodel_budgets; b++) {
            const td_gw_model_budget *m = &t->model_budgets[b];
            bool had = false;
            for (size_t j = 0; was && j < was->nmodel_budgets && !had; j++)
                had = was->model_budgets[j].slot == m->slot &&
                      was->model_budgets[j].b.period == m->b.period;
            if (!had)
                note_added(g, true, m->slot, m->b.period, now_ns, t->name, NULL, m->name);
        }
        for (size_t k = 0; !g->be.key_budget.ctx && t->keys && k < t->nkeys; k++) {
            const td_gw_key *key = &t->keys[k];
            const td_gw_key *wk = NULL;
            for (size_t j = 0; key->name && was && was->keys && j < was->nkeys && !wk; j++)
                if (was->keys[j].name && strcmp(was->keys[j].name, key->name) == 0)
                    wk = &was->keys[j];
            for (size_t b = 0; key->name && b < key->nbudgets; b++)
                if (!wk || !has_period(wk->budgets, wk->nbudgets, key->budgets[b].period))
                    note_added(g, true, key->slot, key->budgets[b].period, now_ns, t->name,
                               key->name, NULL);
        }
    }
}

static void publish(td_gateway *g, view *v)
{
    td_gw_config *old = g->current;
    for (size_t i = 0; old && i < v->pub.ntenants; i++) {
        const td_gw_tenant *was = td_gw_tenant_by_name(old, v->pub.tenants[i].name);
        if (was && !same_rate(&was->rate, &v->pub.tenants[i].rate))
            td_limiter_reset(g->limiter, v->pub.tenants[i].slot);
        /* a key whose own rate changed starts afresh, as a tenant does */
        const td_gw_tenant *t = &v->pub.tenants[i];
        for (size_t k = 0; was && k < t->nkeys; k++) {
            if (!t->keys[k].name)
                continue;
            for (size_t j = 0; j < was->nkeys; j++)
                if (was->keys[j].name && strcmp(was->keys[j].name, t->keys[k].name) == 0 &&
                    !same_rate(&was->keys[j].rate, &t->keys[k].rate))
                    td_limiter_reset(g->key_limiter, t->keys[k].slot);
        }
        for (size_t k = 0; was && k < t->nmodel_limits; k++)
            for (size_t j = 0; j < was->nmodel_limits; j++)
                if (was->model_limits[j].slot == t->model_limits[k].slot &&
                    !same_rate(&was->model_limits[j].rate, &t->model_limits[k].rate))
                    td_limiter_reset(g->key_limiter, t->model_limits[k].slot);
    }
    note_added_budgets(g, old, &v->pub);
    v->pub.generation = atomic_load(&g->generation) + 1;
    g->current = &v->pub;
    atomic_store(&g->generation, v->pub.generation);
    td_gw_config_unref(old);
}

td_status td_gateway_create(const td_config *cfg, const td_gateway_opts *o, td_gateway **out,
                            td_err *err)
{
    td_gateway *g = calloc(1, sizeof *g);
    if (!g)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    pthread_mutex_init(&g->lock, NULL);
    pthread_mutex_init(&g->view_lock, NULL);
    atomic_init(&g->generation, 0);
    g->allow_x_tenant = o && o->allow_x_tenant;
    td_status st = slots_init(&g->tenants, TD_GW_MAX_TENANTS);
    if (st == TD_OK)
        st = slots_init(&g->routes, TD_GW_MAX_ROUTES);
    if (st == TD_OK)
        st = slots_init(&g->keys, TD_GW_MAX_KEYS);
    if (st == TD_OK)
        st = td_limiter_create(TD_GW_MAX_TENANTS, &g->limiter);
    if (st == TD_OK)
        st = td_limiter_create(TD_GW_MAX_KEYS, &g->key_limiter);
    if (st == TD_OK)
        st = td_budgets_create(TD_GW_MAX_TENANTS, &g->budgets);
    if (st == TD_OK)
        st = td_budgets_create(TD_GW_MAX_KEYS, &g->key_budgets);
    if (st == TD_OK)
        st = td_metrics_create(TD_GW_MAX_TENANTS, TD_GW_MAX_ROUTES, &g->metrics);
    if (st == TD_OK)
        st = td_recent_create(TD_GW_RECENT_RINGS, 256, TD_GW_MAX_TENANTS, &g->recent);
    if (st == TD_OK && !(g->conns = calloc(TD_GW_MAX_TENANTS, sizeof *g->conns)))
        st = TD_ENOMEM; /* zero bytes are valid atomics on our targets */
    if (st != TD_OK) {
        td_gateway_destroy(g);
        return td_err_set(err, st, "out of memory");
    }
    view *v = NULL;
    st = build_view(g, cfg, &v, err);
    if (st != TD_OK) {
        td_gateway_destroy(g);
        return st;
    }
    publish(g, v);
    *out = g;
    return TD_OK;
}

void td_gateway_destroy(td_gateway *g)
{
    if (!g)
        return;
    if (g->be.tenant_rate.ctx) {
        g->be.tenant_rate.destroy(g->be.tenant_rate.ctx);
        g->be.key_rate.destroy(g->be.key_rate.ctx);
        /* give leases back; before the budgets */
        g->be.tenant_budget.destroy(g->be.tenant_budget.ctx);
        g->be.key_budget.destroy(g->be.key_budget.ctx);
    }
    td_gw_config_unref(g->current);
    for (size_t i = 0; i < g->nadded; i++) {
        free(g->added[i].tenant);
        free(g->added[i].key_name);
        free(g->added[i].models);
    }
    free(g->added);
    td_metrics_destroy(g->metrics);
    td_recent_destroy(g->recent);
    free((void *)g->conns);
    td_limiter_destroy(g->limiter);
    td_limiter_destroy(g->key_limiter);
    td_budgets_destroy(g->budgets);
    td_budgets_destroy(g->key_budgets);
    slots_fini(&g->tenants);
    slots_fini(&g->routes);
    if (g->keys.names)
        slots_fini(&g->keys);
    pthread_mutex_destroy(&g->lock);
    pthread_mutex_destroy(&g->view_lock);
    free(g);
}

td_status td_gateway_reload(td_gateway *g, const td_config *cfg, td_err *err)
{
    pthread_mutex_lock(&g->lock);
    view *v = NULL;
    td_status st = build_view(g, cfg, &v, err);
    if (st == TD_OK)
        publish(g, v);
    pthread_mutex_unlock(&g->lock);
    return st;
}

const td_gw_config *td_gateway_config(td_gateway *g, td_gw_config **held)
{
    uint64_t gen = atomic_load_explicit(&g->generation, memory_order_acquire);
    if (*held && (*held)->generation == gen)
        return *held;
    pthread_mutex_lock(&g->lock);
    td_gw_config *cur = g->current;
    atomic_fetch_add(&cur->refs, 1);
    pthread_mutex_unlock(&g->lock);
    td_gw_config_unref(*held);
    *held = cur;
    return cur;
}

td_limiter *td_gateway_limiter(td_gateway *g)
{
    return g->limiter;
}

td_metrics *td_gateway_metrics(td_gateway *g)
{
    return g->metrics;
}

bool td_gateway_conn_acquire(td_gateway *g, uint32_t slot, uint32_t max)
{
    if (slot >= TD_GW_MAX_TENANTS)
        return false;
    uint32_t n = atomic_load_explicit(&g->conns[slot], memory_order_relaxed);
    do {
        if (max && n >= max)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(&g->conns[slot], &n, n + 1,
                                                    memory_order_relaxed, memory_order_relaxed));
    return true;
}

void td_gateway_conn_release(td_gateway *g, uint32_t slot)
{
    if (slot < TD_GW_MAX_TENANTS)
        atomic_fetch_sub_explicit(&g->conns[slot], 1, memory_order_relaxed);
}

uint32_t td_gateway_conn_count(td_gateway *g, uint32_t slot)
{
    return slot < TD_GW_MAX_TENANTS ? atomic_load_explicit(&g->conns[slot], memory_order_relaxed)
                                    : 0;
}

td_recent *td_gateway_recent(td_gateway *g)
{
    return g->recent;
}

void td_gateway_set_endpoint_view(td_gateway *g, td_ep_view_fn fn, void *ctx)
{
    pthread_mutex_lock(&g->view_lock);
    g->view_fn = fn;
    g->view_ctx = ctx;
    pthread_mutex_unlock(&g->view_lock);
}

size_t td_gateway_endpoint_view(td_gateway *g, td_ep_view **out)
{
    size_t n = 0;
    *out = NULL;
    pthread_mutex_lock(&g->view_lock);
    if (g->view_fn)
        n = g->view_fn(g->view_ctx, out);
    pthread_mutex_unlock(&g->view_lock);
    return n;
}

/* Per-endpoint series, summed over the workers (each keeps its own view
 * of a pool): in flight, requests, ejections, healthy (1 when no worker
 * has it ejected or unhealthy), and failed lookups per DNS name. */
static void endpoint_metrics(td_gateway *g, td_metrics_text *b)
{
    td_ep_view *v = NULL;
    size_t n = td_gateway_endpoint_view(g, &v);
    n = td_ep_views_merge(v, n);
    static const struct {
        const char *name, *type, *help;
    } fam[] = {
        {"tenantd_gateway_endpoint_inflight", "gauge",
         "Requests in flight at an endpoint of a Route's pool, over all workers."},
        {"tenantd_gateway_endpoint_requests_total", "counter",
         "Requests sent to an endpoint (retries count again); reset when it leaves the pool."},
        {"tenantd_gateway_endpoint_ejections_total", "counter",
         "Passive outlier ejections of an endpoint, summed over the workers."},
        {"tenantd_gateway_endpoint_healthy", "gauge",
         "1 when no worker has the endpoint ejected, unhealthy or draining."},
    };
    for (size_t f = 0; f < 4; f++) {
        td_metrics_text_family(b, fam[f].name, fam[f].type, fam[f].help);
        for (size_t i = 0; i < n; i++) {
            const char *route = td_gateway_slot_name(g, 'r', v[i].route);
            if (!route)
                continue;
            uint64_t x = f == 0   ? v[i].inflight
                         : f == 1 ? v[i].requests
                         : f == 2 ? v[i].ejections
                                  : strcmp(td_ep_view_state(&v[i]), "healthy") == 0;
            td_metrics_text_puts(b, fam[f].name);
            td_metrics_text_puts(b, "{");
            td_metrics_text_label(b, "route", route, true);
            td_metrics_text_label(b, "endpoint", v[i].address, false);
            td_metrics_text_printf(b, "} %llu\n", (unsigned long long)x);
        }
    }
    td_metrics_text_family(b, "tenantd_gateway_dns_lookup_failures_total", "counter",
                           "Failed lookups of an endpoint's DNS name (the last addresses "
                           "are kept), summed over the workers.");
    for (size_t i = 0; i < n; i++) {
        const char *route = td_gateway_slot_name(g, 'r', v[i].route);
        size_t j = 0; /* once per route and name */
        while (j < i && !(v[j].route == v[i].route && strcmp(v[j].source, v[i].source) == 0))
            j++;
        if (!route || !v[i].from_name || j < i)
            continue;
        td_metrics_text_puts(b, "tenantd_gateway_dns_lookup_failures_total{");
        td_metrics_text_label(b, "route", route, true);
        td_metrics_text_label(b, "name", v[i].source, false);
        td_metrics_text_printf(b, "} %llu\n", (unsigned long long)v[i].lookups_failed);
    }
    free(v);
}

td_status td_gateway_set_backends(td_gateway *g, const td_gw_backends *b, td_err *err)
{
    if (!b->tenant_rate.ctx || !b->key_rate.ctx || !b->tenant_budget.ctx || !b->key_budget.ctx ||
        g->be.tenant_rate.ctx)
        return td_err_set(err, TD_EINVAL,
                          "gateway backends: all four (tenant and key rates and budgets) are "
                          "needed, once");
    g->be = *b;
    return TD_OK;
}

const td_gw_rate_backend *td_gateway_shared(td_gateway *g)
{
    return g->be.tenant_rate.ctx ? &g->be.tenant_rate : NULL;
}

td_limiter *td_gateway_key_limiter(td_gateway *g)
{
    return g->key_limiter;
}

const td_gw_rate_backend *td_gateway_key_shared(td_gateway *g)
{
    return g->be.key_rate.ctx ? &g->be.key_rate : NULL;
}

td_budgets *td_gateway_budgets(td_gateway *g)
{
    return g->budgets;
}

td_budgets *td_gateway_key_budgets(td_gateway *g)
{
    return g->key_budgets;
}

const td_gw_budget_backend *td_gateway_budget_shared(td_gateway *g)
{
    return g->be.tenant_budget.ctx ? &g->be.tenant_budget : NULL;
}

const td_gw_budget_backend *td_gateway_key_budget_shared(td_gateway *g)
{
    return g->be.key_budget.ctx ? &g->be.key_budget : NULL;
}

td_status td_gw_price(const td_gw_config *c, const td_ledger_rec *r, int64_t *nano, td_err *err)
{
    if (!c || !c->cost_policy)
        return td_err_set(err, TD_ENOTFOUND, "no CostPolicy");
    td_charge ch[TD_CHARGE_MAX];
    size_t n = 0;
    td_status st = td_chargeback_price(c->cost_policy, r, INT64_MIN, INT64_MAX, ch, &n, err);
    if (st != TD_OK)
        return st;
    int64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += ch[i].amount_nano;
    *nano = sum;
    return TD_OK;
}

void td_gateway_budget_replay(td_gateway *g, const td_ledger_rec *r, int64_t now_ns)
{
    /* what the live settlement charged: completed requests ("ok") and
     * those ended early after they were sent ("client_closed", "cut") */
    if (r->kind != TD_LEDGER_REQUEST ||
        (strcmp(r->outcome, "ok") != 0 && strcmp(r->outcome, "client_closed") != 0 &&
         strcmp(r->outcome, "cut") != 0))
        return;
    td_gw_config *held = NULL;
    const td_gw_config *c = td_gateway_config(g, &held);
    const td_gw_tenant *t = td_gw_tenant_by_name(c, r->tenant);
    int64_t nano = 0;
    if (t && td_gw_price(c, r, &nano, NULL) == TD_OK) {
        int64_t start_s = r->start_ns >= 0 ? r->start_ns / 1000000000LL
                                           : -((-r->start_ns + 999999999LL) / 1000000000LL);
        /* the key's own spend: records carrying the name of one of its
         * tenant's named keys (a key's slot is its "tenant/name") */
        const td_gw_key *k = NULL;
        for (size_t i = 0; r->api_key[0] && t->keys && i < t->nkeys && !k; i++)
            if (t->keys[i].name && strncmp(t->keys[i].name, r->api_key, sizeof r->api_key) == 0)
                k = &t->keys[i];
        for (int p = 0; p < TD_PERIOD_COUNT; p++) {
            td_budgets_replay(g->budgets, t->slot, (td_period)p, start_s, nano,
                              now_ns / 1000000000LL);
            if (k)
                td_budgets_replay(g->key_budgets, k->slot, (td_period)p, start_s, nano,
                                  now_ns / 1000000000LL);
        }
        for (size_t i = 0; i < t->nmodel_budgets; i++)
            if (td_gw_model_budget_applies(&t->model_budgets[i], r->model))
                td_budgets_replay(g->key_budgets, t->model_budgets[i].slot,
                                  t->model_budgets[i].b.period, start_s, nano,
                                  now_ns / 1000000000LL);
    }
    td_gw_config_unref(held);
}

/* true if model matches one of the ','-separated patterns of joined (a
 * model budget's name). */
static bool joined_match(const char *joined, const char *model)
{
    char one[256];
    for (const char *p = joined; model[0] && *p;) {
        size_t n = strcspn(p, ",");
        if (n < sizeof one) {
            memcpy(one, p, n);
            one[n] = '\0';
            if (td_gw_model_match(one, model))
                return true;
        }
        p += n + (p[n] == ',');
    }
    return false;
}

typedef struct {
    td_gateway *g;
    const added_budget *a;
    size_t n;
    int64_t now_s;
    td_gw_config *held; /* the configuration that prices the records */
} catch_up_ctx;

static int catch_up_one(const td_ledger_rec *r, void *ud)
{
    catch_up_ctx *cx = ud;
    /* what the live settlement charged, as td_gateway_budget_replay */
    if (r->kind != TD_LEDGER_REQUEST ||
        (strcmp(r->outcome, "ok") != 0 && strcmp(r->outcome, "client_closed") != 0 &&
         strcmp(r->outcome, "cut") != 0))
        return 0;
    const td_gw_config *c = td_gateway_config(cx->g, &cx->held);
    int64_t nano = 0;
    bool priced = false;
    int64_t start_s = r->start_ns >= 0 ? r->start_ns / 1000000000LL
                                       : -((-r->start_ns + 999999999LL) / 1000000000LL);
    for (size_t i = 0; i < cx->n; i++) {
        const added_budget *a = &cx->a[i];
        /* started after the reload: reserved at the new budget itself */
        if (r->start_ns >= a->since_ns || strncmp(a->tenant, r->tenant, sizeof r->tenant) != 0 ||
            (a->key && a->key_name && strncmp(a->key_name, r->api_key, sizeof r->api_key) != 0) ||
            (a->models && !joined_match(a->models, r->model)))
            continue;
        if (!priced) {
            if (td_gw_price(c, r, &nano, NULL) != TD_OK)
                break;
            priced = true;
        }
        td_budgets_replay(a->key ? cx->g->key_budgets : cx->g->budgets, a->slot, a->period,
                          start_s, nano, cx->now_s);
    }
    return 0;
}

bool td_gateway_budgets_added(td_gateway *g)
{
    pthread_mutex_lock(&g->lock);
    bool any = g->nadded > 0;
    pthread_mutex_unlock(&g->lock);
    return any;
}

td_status td_gateway_budget_catch_up(td_gateway *g, td_gw_ledger_scan scan, void *ud, size_t *n,
                                     td_err *err)
{
    pthread_mutex_lock(&g->lock);
    added_budget *a = g->added;
    size_t na = g->nadded;
    g->added = NULL;
    g->nadded = g->added_cap = 0;
    pthread_mutex_unlock(&g->lock);
    if (n)
        *n = na;
    if (!na || !scan) { /* no ledger: they count from the reload */
        for (size_t i = 0; i < na; i++) {
            free(a[i].tenant);
            free(a[i].key_name);
            free(a[i].models);
        }
        free(a);
        return TD_OK;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t from_s = INT64_MAX, until_ns = INT64_MIN;
    for (size_t i = 0; i < na; i++) {
        int64_t s, e;
        td_period_bounds(a[i].period, (int64_t)ts.tv_sec, &s, &e);
        if (s < from_s)
            from_s = s;
        if (a[i].since_ns > until_ns)
            until_ns = a[i].since_ns;
    }
    catch_up_ctx cx = {g, a, na, (int64_t)ts.tv_sec, NULL};
    td_status st = scan(ud, from_s * 1000000000LL, until_ns, catch_up_one, &cx, err);
    td_gw_config_unref(cx.held);
    for (size_t i = 0; i < na; i++) {
        free(a[i].tenant);
        free(a[i].key_name);
        free(a[i].models);
    }
    free(a);
    return st;
}

bool td_gateway_allow_x_tenant(const td_gateway *g)
{
    return g->allow_x_tenant;
}

/* One budget gauge sample: name{tenant,[key,]period} and the money v
 * (nano units) as an exact decimal. */
static void budget_sample(td_metrics_text *b, const char *name, const td_gw_tenant *t,
                          const td_gw_key *k, const char *models, td_period p, int64_t v)
{
    td_metrics_text_puts(b, name);
    td_metrics_text_puts(b, "{");
    td_metrics_text_label(b, "tenant", t->name, true);
    if (k)
        td_metrics_text_label(b, "key", k->name, false);
    if (models)
        td_metrics_text_label(b, "models", models, false);
    td_metrics_text_label(b, "period", td_period_name(p), false);
    uint64_t a = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    uint64_t frac = a % TD_MONEY_NANO;
    char f[16] = "";
    if (frac) {
        snprintf(f, sizeof f, ".%09llu", (unsigned long long)frac);
        size_t n = strlen(f);
        while (n > 1 && f[n - 1] == '0') /* frac != 0: a digit stays */
            f[--n] = '\0';
    }
    td_metrics_text_printf(b, "} %s%llu%s\n", v < 0 ? "-" : "",
                           (unsigned long long)(a / TD_MONEY_NANO), f);
}

td_status td_gateway_metrics_text(td_gateway *g, char **out, size_t *len)
{
    if (g->be.tenant_rate.ctx)
        td_metrics_shared_degraded(g->metrics, g->be.tenant_rate.degraded(g->be.tenant_rate.ctx));
    size_t n0 = 0;
    td_status st = td_metrics_render(g->metrics, td_gateway_slot_name, g, out, &n0);
    if (st != TD_OK)
        return st;
    /* budgets: amount and spend of each tenant's and named key's budgeted
     * periods, current now (bounded: keys are configured names) */
    td_gw_config *held = NULL;
    const td_gw_config *c = td_gateway_config(g, &held);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    td_metrics_text b = {*out, n0, n0 + 1, false};
    td_metrics_text_family(&b, "tenantd_budget_amount", "gauge",
                           "A tenant's money budget of a period, in the CostPolicy's currency.");
    for (size_t i = 0; c && i < c->ntenants; i++)
        for (size_t k = 0; k < c->tenants[i].nbudgets; k++)
            budget_sample(&b, "tenantd_budget_amount", &c->tenants[i], NULL, NULL,
                          c->tenants[i].budgets[k].period, c->tenants[i].budgets[k].amount_nano);
    td_metrics_text_family(&b, "tenantd_budget_spent", "gauge",
                           "Spend of a tenant's budget in its current period, in the "
                           "CostPolicy's currency (reserved estimates included).");
    for (size_t i = 0; c && i < c->ntenants; i++) {
        const td_gw_tenant *t = &c->tenants[i];
        for (size_t k = 0; k < t->nbudgets; k++)
            budget_sample(&b, "tenantd_budget_spent", t, NULL, NULL, t->budgets[k].period,
                          td_gateway_budget_spent(g, t, NULL, t->budgets[k].period,
                                                  (int64_t)ts.tv_sec, false));
    }
    td_metrics_text_family(&b, "tenantd_key_budget_amount", "gauge",
                           "A named API key's own money budget of a period, in the "
                           "CostPolicy's currency.");
    for (size_t i = 0; c && i < c->ntenants; i++) {
        const td_gw_tenant *t = &c->tenants[i];
        for (size_t j = 0; t->keys && j < t->nkeys; j++)
            for (size_t q = 0; t->keys[j].name && q < t->keys[j].nbudgets; q++)
                budget_sample(&b, "tenantd_key_budget_amount", t, &t->keys[j], NULL,
                              t->keys[j].budgets[q].period, t->keys[j].budgets[q].amount_nano);
    }
    td_metrics_text_family(&b, "tenantd_key_budget_spent", "gauge",
                           "Spend of a named API key's own budget in its current period, in "
                           "the CostPolicy's currency (reserved estimates included).");
    for (size_t i = 0; c && i < c->ntenants; i++) {
        const td_gw_tenant *t = &c->tenants[i];
        for (size_t j = 0; t->keys && j < t->nkeys; j++) {
            const td_gw_key *k = &t->keys[j];
            for (size_t q = 0; k->name && q < k->nbudgets; q++)
                budget_sample(&b, "tenantd_key_budget_spent", t, k, NULL, k->budgets[q].period,
                              td_gateway_budget_spent(g, t, k, k->budgets[q].period,
                                                      (int64_t)ts.tv_sec, false));
        }
    }
    td_metrics_text_family(&b, "tenantd_model_budget_amount", "gauge",
                           "A tenant's money budget of a period for the requests naming its "
                           "models, in the CostPolicy's currency.");
    for (size_t i = 0; c && i < c->ntenants; i++)
        for (size_t q = 0; q < c->tenants[i].nmodel_budgets; q++) {
            const td_gw_model_budget *m = &c->tenants[i].model_budgets[q];
            budget_sample(&b, "tenantd_model_budget_amount", &c->tenants[i], NULL, m->name,
                          m->b.period, m->b.amount_nano);
        }
    td_metrics_text_family(&b, "tenantd_model_budget_spent", "gauge",
                           "Spend of a tenant's budget for models in its current period, in the "
                           "CostPolicy's currency (reserved estimates included).");
    for (size_t i = 0; c && i < c->ntenants; i++)
        for (size_t q = 0; q < c->tenants[i].nmodel_budgets; q++) {
            const td_gw_model_budget *m = &c->tenants[i].model_budgets[q];
            budget_sample(&b, "tenantd_model_budget_spent", &c->tenants[i], NULL, m->name,
                          m->b.period,
                          td_gateway_model_budget_spent(g, m, (int64_t)ts.tv_sec, false));
        }
    const td_gw_budget_backend *tb = &g->be.tenant_budget, *kb = &g->be.key_budget;
    if (tb->ctx)
        td_metrics_text_printf(
            &b,
            "# HELP tenantd_budget_shared_degraded 1 while budgets shared through Redis are "
            "unreachable and each replica keeps to budget/replicas.\n"
            "# TYPE tenantd_budget_shared_degraded gauge\n"
            "tenantd_budget_shared_degraded %d\n"
            "# HELP tenantd_budget_fallback_total Budget reservations decided locally at "
            "budget/replicas because Redis was unreachable.\n"
            "# TYPE tenantd_budget_fallback_total counter\n"
            "tenantd_budget_fallback_total %llu\n"
            "# HELP tenantd_budget_redis_calls_total Redis calls of shared budgets that "
            "answered (leases, give-backs, refreshes).\n"
            "# TYPE tenantd_budget_redis_calls_total counter\n"
            "tenantd_budget_redis_calls_total %llu\n",
            tb->degraded(tb->ctx) || kb->degraded(kb->ctx),
            (unsigned long long)(tb->fallbacks(tb->ctx) + kb->fallbacks(kb->ctx)),
            (unsigned long long)(tb->calls(tb->ctx) + kb->calls(kb->ctx)));
    endpoint_metrics(g, &b);
    td_gw_config_unref(held);
    if (b.oom) {
        free(b.p);
        *out = NULL;
        return TD_ENOMEM;
    }
    *out = b.p;
    if (len)
        *len = b.len;
    return TD_OK;
}
