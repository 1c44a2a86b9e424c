/* pools.c - GPU node pools. A NodePool is a set of nodes behind a taint and
 * a node selector, open to the tenants it lists. A GPU pod gets the
 * toleration and selector of the pools its tenant may use; a pod that
 * tolerates or selects another tenant's pool is denied. */
#include <stdio.h>
#include <string.h>

#include "tenantd/config.h"
#include "tenantd/policy.h"
#include "tenantd/tenancy.h"

static const char *str_or(const char *s, const char *def)
{
    return s ? s : def;
}

int td_toleration_tolerates(const json_t *t, const char *key, const char *value,
                            const char *effect)
{
    const char *teffect = td_json_str(t, "effect");
    if (teffect && *teffect && strcmp(teffect, effect) != 0)
        return 0;
    const char *tkey = str_or(td_json_str(t, "key"), "");
    const char *op = str_or(td_json_str(t, "operator"), "Equal");
    if (*tkey && strcmp(tkey, key) != 0)
        return 0;
    if (strcmp(op, "Exists") == 0)
        return 1; /* an empty key with Exists tolerates every taint */
    if (!*tkey)
        return 0;
    return strcmp(op, "Equal") == 0 && strcmp(str_or(td_json_str(t, "value"), ""), value) == 0;
}

/* A customer tenant (tenancy.h) may use only pools listed for it alone;
 * a pool open to "*" or shared with another tenant is not its. */
static int pool_allows(const json_t *pool, const char *tenant, int customer)
{
    if (customer)
        return td_pool_dedicated_to(pool, tenant);
    size_t i;
    json_t *x;
    json_array_foreach(td_json_path(pool, "spec.tenants"), i, x)
    {
        const char *t = json_string_value(x);
        if (strcmp(t, "*") == 0 || (tenant && strcmp(t, tenant) == 0))
            return 1;
    }
    return 0;
}

static const char *tenant_of(const td_config *cfg, const char *ns, int *customer)
{
    json_t *t = td_config_tenant_for_namespace(cfg, ns);
    *customer = td_tenancy_of(t) == TD_TENANCY_CUSTOMER;
    return td_json_str(t, "metadata.name");
}

static int pod_tolerates_pool(const json_t *pod, const json_t *pool)
{
    json_t *taint = td_json_path(pool, "spec.taint");
    if (!taint)
        return 0;
    const char *key = td_json_str(taint, "key");
    const char *value = str_or(td_json_str(taint, "value"), "");
    const char *effect = td_json_str(taint, "effect");
    if (strcmp(effect, "PreferNoSchedule") == 0)
        return 0; /* a soft taint keeps no one out */
    size_t i;
    json_t *t;
    json_array_foreach(td_json_path(pod, "spec.tolerations"), i, t)
    {
        if (td_toleration_tolerates(t, key, value, effect))
            return 1;
    }
    return 0;
}

static int pod_selects_pool(const json_t *pod, const json_t *pool)
{
    json_t *sel = td_json_path(pool, "spec.nodeSelector");
    if (!json_object_size(sel))
        return 0;
    json_t *podsel = td_json_path(pod, "spec.nodeSelector");
    const char *k;
    json_t *v;
    json_object_foreach(sel, k, v)
    {
        if (!json_equal(json_object_get(podsel, k), v))
            return 0;
    }
    return 1;
}

static int is_accelerator(const td_config *cfg, const char *resource)
{
    if (strcmp(resource, "nvidia.com/gpu") == 0)
        return 1;
    json_t *const *pools;
    size_t n = td_config_list(cfg, "NodePool", NULL, &pools);
    for (size_t i = 0; i < n; i++) {
        json_t *cap = td_json_path(pools[i], "spec.capacity");
        if (strchr(resource, '/') && json_object_get(cap, resource))
            return 1;
    }
    return 0;
}

static int containers_want(const td_config *cfg, const json_t *list)
{
    size_t i;
    json_t *c;
    json_array_foreach((json_t *)list, i, c)
    {
        static const char *const parts[] = {"resources.requests", "resources.limits"};
        for (int p = 0; p < 2; p++) {
            const char *k;
            json_t *v;
            json_object_foreach(td_json_path(c, parts[p]), k, v)
            {
                if (is_accelerator(cfg, k))
                    return 1;
            }
        }
    }
    return 0;
}

int td_pools_pod_wants_accelerator(const td_config *cfg, const json_t *pod)
{
    return containers_want(cfg, td_json_path(pod, "spec.containers")) ||
           containers_want(cfg, td_json_path(pod, "spec.initContainers"));
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

static td_status add_toleration(json_t *spec, const json_t *pool, td_err *err)
{
    json_t *taint = td_json_path(pool, "spec.taint");
    if (!taint)
        return TD_OK;
    json_t *tols = ensure(spec, "tolerations", json_array);
    if (!json_is_array(tols))
        return td_err_set(err, TD_EINVAL, "spec.tolerations: must be a list");
    json_t *t = json_object();
    if (!t)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    json_object_set_new(t, "key", json_string(td_json_str(taint, "key")));
    const char *value = td_json_str(taint, "value");
    json_object_set_new(t, "operator", json_string(value ? "Equal" : "Exists"));
    if (value)
        json_object_set_new(t, "value", json_string(value));
    json_object_set_new(t, "effect", json_string(td_json_str(taint, "effect")));
    if (json_array_append_new(tols, t) < 0)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    return TD_OK;
}

td_status td_pools_mutate(const td_config *cfg, const char *ns, json_t *pod, td_err *err)
{
    if (!td_pools_pod_wants_accelerator(cfg, pod))
        return TD_OK;
    json_t *const *pools;
    size_t n = td_config_list(cfg, "NodePool", NULL, &pools);
    int customer;
    const char *tenant = tenant_of(cfg, ns, &customer);
    /* A pod that already chose a pool keeps its choice; validation judges it. */
    for (size_t i = 0; i < n; i++)
        if (pod_selects_pool(pod, pools[i]) || pod_tolerates_pool(pod, pools[i]))
            return TD_OK;
    json_t *allowed[64];
    size_t na = 0;
    for (size_t i = 0; i < n && na < 64; i++)
        if (pool_allows(pools[i], tenant, customer))
            allowed[na++] = pools[i];
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
        json_t *sel = td_json_path(allowed[0], "spec.nodeSelector");
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
        json_t *sel = td_json_path(allowed[i], "spec.nodeSelector");
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

td_status td_pools_validate(const td_config *cfg, const char *ns, const json_t *pod, td_err *err)
{
    json_t *const *pools;
    size_t n = td_config_list(cfg, "NodePool", NULL, &pools);
    int customer;
    const char *tenant = tenant_of(cfg, ns, &customer);
    size_t allowed = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = td_json_str(pools[i], "metadata.name");
        if (pool_allows(pools[i], tenant, customer)) {
            allowed++;
            continue;
        }
        json_t *taint = td_json_path(pools[i], "spec.taint");
        if (customer && pool_allows(pools[i], tenant, 0) &&
            (pod_tolerates_pool(pod, pools[i]) || pod_selects_pool(pod, pools[i])))
            return td_err_set(err, TD_EFORBIDDEN,
                              "pod %s NodePool \"%s\", which is shared with other tenants; "
                              "customer tenant \"%s\" may only use NodePools dedicated to it "
                              "(spec.tenants: [%s])",
                              pod_tolerates_pool(pod, pools[i]) ? "tolerates the taint of"
                                                                : "selects",
                              name, tenant, tenant);
        if (pod_tolerates_pool(pod, pools[i]))
            return td_err_set(err, TD_EFORBIDDEN,
                              "pod tolerates the taint %s=%s:%s of NodePool \"%s\", which %s%s%s "
                              "may not use (spec.tenants of the NodePool); remove the toleration",
                              td_json_str(taint, "key"), str_or(td_json_str(taint, "value"), ""),
                              td_json_str(taint, "effect"), name, tenant ? "tenant \"" : "",
                              tenant ? tenant : "a namespace with no Tenant", tenant ? "\"" : "");
        if (pod_selects_pool(pod, pools[i]))
            return td_err_set(err, TD_EFORBIDDEN,
                              "pod's nodeSelector selects NodePool \"%s\", which %s%s%s may not "
                              "use (spec.tenants of the NodePool); remove the selector",
                              name, tenant ? "tenant \"" : "",
                              tenant ? tenant : "a namespace with no Tenant", tenant ? "\"" : "");
    }
    if (n && allowed == 0 && customer && td_pools_pod_wants_accelerator(cfg, pod))
        return td_err_set(err, TD_EFORBIDDEN,
                          "pod requests a GPU but customer tenant \"%s\" has no dedicated "
                          "NodePool (one whose spec.tenants is [%s]); shared pools are for teams",
                          tenant, tenant);
    if (n && allowed == 0 && td_pools_pod_wants_accelerator(cfg, pod))
        return td_err_set(err, TD_EFORBIDDEN,
                          "pod requests a GPU but %s%s%s may use no NodePool; ask the platform "
                          "team to add it to a NodePool's spec.tenants",
                          tenant ? "tenant \"" : "", tenant ? tenant : "a namespace with no Tenant",
                          tenant ? "\"" : "");
    return TD_OK;
}
