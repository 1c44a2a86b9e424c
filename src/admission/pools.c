/* pools.c - GPU node pools. A NodePool is a set of nodes behind a taint and
 * a node selector, open to the tenants it lists. A GPU pod gets the
 * toleration and selector of the pools its tenant may use; a pod that
 * tolerates or selects another tenant's pool is denied. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "admission/policy.h"
#include "admission/tenancy_internal.h"

static const char *str_or(const char *s, const char *def)
{
    return s ? s : def;
}

/* A member's string value, as td_json_str(o, key) for a key without a dot. */
static const char *member_str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

int td_toleration_tolerates(const json_t *t, const char *key, const char *value,
                            const char *effect)
{
    const char *teffect = member_str(t, "effect");
    if (teffect && *teffect && strcmp(teffect, effect) != 0)
        return 0;
    const char *tkey = str_or(member_str(t, "key"), "");
    const char *op = str_or(member_str(t, "operator"), "Equal");
    if (*tkey && strcmp(tkey, key) != 0)
        return 0;
    if (strcmp(op, "Exists") == 0)
        return 1; /* an empty key with Exists tolerates every taint */
    if (!*tkey)
        return 0;
    return strcmp(op, "Equal") == 0 && strcmp(str_or(member_str(t, "value"), ""), value) == 0;
}

/* The pod's spec.tolerations and spec.nodeSelector, read once per rule. */
typedef struct {
    json_t *tolerations;
    json_t *selector;
} pod_sched;

static pod_sched sched_of(const json_t *pod)
{
    json_t *spec = json_object_get(pod, "spec");
    pod_sched s = {json_object_get(spec, "tolerations"), json_object_get(spec, "nodeSelector")};
    return s;
}

/* The NodePools of cfg: the index's, or (without one) entries made from
 * the snapshot into *owned, which the caller frees. -1 if out of memory. */
static long pools_of(const td_config *cfg, const td__tenancy_index *ix,
                     const td__tenancy_pool **out, td__tenancy_pool **owned)
{
    *owned = NULL;
    if (ix)
        return (long)td__tenancy_pools(ix, out);
    json_t *const *objs;
    size_t n = td_config_list(cfg, "NodePool", NULL, &objs);
    *out = NULL;
    if (!n)
        return 0;
    if (!(*owned = calloc(n, sizeof **owned)))
        return -1;
    for (size_t i = 0; i < n; i++)
        td__tenancy_pool_fill(&(*owned)[i], objs[i]);
    *out = *owned;
    return (long)n;
}

/* A customer tenant (tenancy.h) may use only pools listed for it alone;
 * a pool open to "*" or shared with another tenant is not its. */
static int pool_allows(const td__tenancy_pool *pool, const char *tenant, int customer)
{
    if (customer)
        return td_pool_dedicated_to(pool->obj, tenant);
    size_t i;
    json_t *x;
    json_array_foreach(pool->tenants, i, x)
    {
        const char *t = json_string_value(x);
        if (strcmp(t, "*") == 0 || (tenant && strcmp(t, tenant) == 0))
            return 1;
    }
    return 0;
}

static int pod_tolerates_pool(const pod_sched *pod, const td__tenancy_pool *pool)
{
    if (!pool->taint)
        return 0;
    const char *key = pool->taint_key;
    const char *value = str_or(pool->taint_value, "");
    const char *effect = pool->taint_effect;
    if (strcmp(effect, "PreferNoSchedule") == 0)
        return 0; /* a soft taint keeps no one out */
    size_t i;
    json_t *t;
    json_array_foreach(pod->tolerations, i, t)
    {
        if (td_toleration_tolerates(t, key, value, effect))
            return 1;
    }
    return 0;
}

static int pod_selects_pool(const pod_sched *pod, const td__tenancy_pool *pool)
{
    json_t *sel = pool->selector;
    if (!json_object_size(sel))
        return 0;
    json_t *podsel = pod->selector;
    const char *k;
    json_t *v;
    json_object_foreach(sel, k, v)
    {
        if (!json_equal(json_object_get(podsel, k), v))
            return 0;
    }
    return 1;
}

static int is_accelerator(const td__tenancy_pool *pools, size_t n, const char *resource)
{
    if (strcmp(resource, "nvidia.com/gpu") == 0)
        return 1;
    if (!strchr(resource, '/'))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (json_object_get(pools[i].capacity, resource))
            return 1;
    return 0;
}

static int containers_want(const td__tenancy_pool *pools, size_t n, const json_t *list)
{
    size_t i;
    json_t *c;
    json_array_foreach((json_t *)list, i, c)
    {
        static const char *const parts[] = {"requests", "limits"};
        json_t *res = json_object_get(c, "resources");
        for (int p = 0; p < 2; p++) {
            const char *k;
            json_t *v;
            json_object_foreach(json_object_get(res, parts[p]), k, v)
            {
                if (is_accelerator(pools, n, k))
                    return 1;
            }
        }
    }
    return 0;
}

static int wants_accelerator(const td__tenancy_pool *pools, size_t n, const json_t *pod)
{
    json_t *spec = json_object_get(pod, "spec");
    return containers_want(pools, n, json_object_get(spec, "containers")) ||
           containers_want(pools, n, json_object_get(spec, "initContainers"));
}

int td_pools_pod_wants_accelerator(const td_config *cfg, const json_t *pod)
{
    const td__tenancy_pool *pools;
    td__tenancy_pool *owned;
    long n = pools_of(cfg, td__tenancy_index_get(cfg), &pools, &owned);
    /* out of memory: the pools' capacity cannot be read; nvidia.com/gpu
     * still counts */
    int r = wants_accelerator(pools, n < 0 ? 0 : (size_t)n, pod);
    free(owned);
    return r;
}

static json_t *ensure(json_t *parent, const char *key, json_t *(*make)(void))
{
    json_t *x = json_object_get(parent, key);
    if (x)
        return x;
    x = make();
    if (!x || json_object_set_new(parent, key, x) < 0)
        return NULL;
    return x;
}

static td_status add_toleration(json_t *spec, const td__tenancy_pool *pool, td_err *err)
{
    json_t *taint = pool->taint;
    if (!taint)
        return TD_OK;
    json_t *tols = ensure(spec, "tolerations", json_array);
    if (!json_is_array(tols))
        return td_err_set(err, TD_EINVAL, "spec.tolerations: must be a list");
    json_t *t = json_object();
    if (!t)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    /* literal keys and operators: no UTF-8 check; the pool's strings are
     * checked as before */
    json_object_set_new_nocheck(t, "key", json_string(pool->taint_key));
    const char *value = pool->taint_value;
    json_object_set_new_nocheck(t, "operator", value ? json_stringn_nocheck("Equal", 5)
                                                     : json_stringn_nocheck("Exists", 6));
    if (value)
        json_object_set_new_nocheck(t, "value", json_string(value));
    json_object_set_new_nocheck(t, "effect", json_string(pool->taint_effect));
    if (json_array_append_new(tols, t) < 0)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    return TD_OK;
}

static td_status mutate_with(const td_config *cfg, const td__tenancy_index *ix,
                             const td__tenancy_pool *pools, size_t n, const char *ns, json_t *pod,
                             td_err *err);

td_status td_pools_mutate(const td_config *cfg, const char *ns, json_t *pod, td_err *err)
{
    const td__tenancy_index *ix = td__tenancy_index_get(cfg);
    const td__tenancy_pool *pools;
    td__tenancy_pool *owned;
    long ln = pools_of(cfg, ix, &pools, &owned);
    if (ln < 0)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    td_status st = mutate_with(cfg, ix, pools, (size_t)ln, ns, pod, err);
    free(owned);
    return st;
}

static td_status mutate_with(const td_config *cfg, const td__tenancy_index *ix,
                             const td__tenancy_pool *pools, size_t n, const char *ns, json_t *pod,
                             td_err *err)
{
    if (!wants_accelerator(pools, n, pod))
        return TD_OK;
    td__tenancy_ns spare;
    const td__tenancy_ns *tn = td__tenancy_ns_get(ix, cfg, ns, &spare);
    int customer = tn->customer;
    const char *tenant = tn->tenant_name;
    pod_sched ps = sched_of(pod);
    /* A pod that already chose a pool keeps its choice; validation judges it. */
    for (size_t i = 0; i < n; i++)
        if (pod_selects_pool(&ps, &pools[i]) || pod_tolerates_pool(&ps, &pools[i]))
            return TD_OK;
    const td__tenancy_pool *allowed[64];
    size_t na = 0;
    for (size_t i = 0; i < n && na < 64; i++)
        if (pool_allows(&pools[i], tenant, customer))
            allowed[na++] = &pools[i];
    if (na == 0)
        return TD_OK; /* validation denies it with the reason */
    json_t *spec = json_object_get(pod, "spec");
    if (!json_is_object(spec))
        return td_err_set(err, TD_EINVAL, "spec: must be a mapping");
    for (size_t i = 0; i < na; i++) {
        td_status st = add_toleration(spec, allowed[i], err);
        if (st != TD_OK)
            return st;
    }
    if (na == 1) {
        json_t *sel = allowed[0]->selector;
        if (!json_object_size(sel))
            return TD_OK;
        json_t *podsel = ensure(spec, "nodeSelector", json_object);
        if (!json_is_object(podsel))
            return td_err_set(err, TD_EINVAL, "spec.nodeSelector: must be a map of strings");
        const char *k;
        json_t *v;
        json_object_foreach(sel, k, v)
        {
            json_object_set_new(podsel, k, td_json_copy(v));
        }
        return TD_OK;
    }
    /* Several pools: one node selector term per pool (terms are ORed). A
     * pod with its own required affinity keeps it untouched. */
    if (td_json_path(pod, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"))
        return TD_OK;
    json_t *terms = json_array();
    for (size_t i = 0; terms && i < na; i++) {
        json_t *sel = allowed[i]->selector;
        if (!json_object_size(sel))
            continue;
        json_t *exprs = json_array();
        const char *k;
        json_t *v;
        json_object_foreach(sel, k, v)
        {
            json_t *e = json_pack("{s:s, s:s, s:[O]}", "key", k, "operator", "In", "values", v);
            json_array_append_new(exprs, e);
        }
        json_array_append_new(terms, json_pack("{s:o}", "matchExpressions", exprs));
    }
    if (!terms)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    if (json_array_size(terms) == 0) {
        json_decref(terms);
        return TD_OK;
    }
    json_t *aff = ensure(spec, "affinity", json_object);
    json_t *na_ = aff ? ensure(aff, "nodeAffinity", json_object) : NULL;
    if (!json_is_object(na_)) {
        json_decref(terms);
        return td_err_set(err, TD_EINVAL, "spec.affinity.nodeAffinity: must be a mapping");
    }
    json_object_set_new(na_, "requiredDuringSchedulingIgnoredDuringExecution",
                        json_pack("{s:o}", "nodeSelectorTerms", terms));
    return TD_OK;
}

static td_status validate_with(const td_config *cfg, const td__tenancy_index *ix,
                               const td__tenancy_pool *pools, size_t n, const char *ns,
                               const json_t *pod, td_err *err)
{
    td__tenancy_ns spare;
    const td__tenancy_ns *tn = td__tenancy_ns_get(ix, cfg, ns, &spare);
    int customer = tn->customer;
    const char *tenant = tn->tenant_name;
    pod_sched ps = sched_of(pod);
    const pod_sched *podp = &ps;
    size_t allowed = 0;
    for (size_t i = 0; i < n; i++) {
        const td__tenancy_pool *pool = &pools[i];
        const char *name = pool->name;
        if (pool_allows(pool, tenant, customer)) {
            allowed++;
            continue;
        }
        json_t *taint = pool->taint;
        if (customer && pool_allows(pool, tenant, 0) &&
            (pod_tolerates_pool(podp, pool) || pod_selects_pool(podp, pool)))
            return td_err_set(err, TD_EFORBIDDEN,
                              "pod %s NodePool \"%s\", which is shared with other tenants; "
                              "customer tenant \"%s\" may only use NodePools dedicated to it "
                              "(spec.tenants: [%s])",
                              pod_tolerates_pool(podp, pool) ? "tolerates the taint of"
                                                             : "selects",
                              name, tenant, tenant);
        if (pod_tolerates_pool(podp, pool))
            return td_err_set(err, TD_EFORBIDDEN,
                              "pod tolerates the taint %s=%s:%s of NodePool \"%s\", which %s%s%s "
                              "may not use (spec.tenants of the NodePool); remove the toleration",
                              td_json_str(taint, "key"), str_or(td_json_str(taint, "value"), ""),
                              td_json_str(taint, "effect"), name, tenant ? "tenant \"" : "",
                              tenant ? tenant : "a namespace with no Tenant", tenant ? "\"" : "");
        if (pod_selects_pool(podp, pool))
            return td_err_set(err, TD_EFORBIDDEN,
                              "pod's nodeSelector selects NodePool \"%s\", which %s%s%s may not "
                              "use (spec.tenants of the NodePool); remove the selector",
                              name, tenant ? "tenant \"" : "",
                              tenant ? tenant : "a namespace with no Tenant", tenant ? "\"" : "");
    }
    if (n && allowed == 0 && customer && wants_accelerator(pools, n, pod))
        return td_err_set(err, TD_EFORBIDDEN,
                          "pod requests a GPU but customer tenant \"%s\" has no dedicated "
                          "NodePool (one whose spec.tenants is [%s]); shared pools are for teams",
                          tenant, tenant);
    if (n && allowed == 0 && wants_accelerator(pools, n, pod))
        return td_err_set(err, TD_EFORBIDDEN,
                          "pod requests a GPU but %s%s%s may use no NodePool; ask the platform "
                          "team to add it to a NodePool's spec.tenants",
                          tenant ? "tenant \"" : "", tenant ? tenant : "a namespace with no Tenant",
                          tenant ? "\"" : "");
    return TD_OK;
}

td_status td_pools_validate(const td_config *cfg, const char *ns, const json_t *pod, td_err *err)
{
    const td__tenancy_index *ix = td__tenancy_index_get(cfg);
    const td__tenancy_pool *pools;
    td__tenancy_pool *owned;
    long n = pools_of(cfg, ix, &pools, &owned);
    if (n < 0)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    td_status st = validate_with(cfg, ix, pools, (size_t)n, ns, pod, err);
    free(owned);
    return st;
}
