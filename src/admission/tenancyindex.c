/* tenancyindex.c - per-snapshot index for the tenancy, pools and labels
 * rules: each namespace's Tenant, the NodePools' fields and the
 * AdmissionPolicy's settings, found once per snapshot instead of once or
 * more per pod (a linear search over the Tenants and path walks over the
 * same objects). Every value is what the lookup it replaces returns. */
#include <stdlib.h>
#include <string.h>

#include "admission/tenancy_internal.h"

struct td__tenancy_index {
    td_config_attachment hdr;
    td__tenancy_ns *nss; /* sorted by ns, unique */
    size_t nns;
    td__tenancy_pool *pools;
    size_t npools;
    td__tenancy_policy policy;
};

static void index_destroy(td_config_attachment *a)
{
    td__tenancy_index *ix = (td__tenancy_index *)a;
    free(ix->nss);
    free(ix->pools);
    free(ix);
}

static int ns_cmp(const void *a, const void *b)
{
    return strcmp(((const td__tenancy_ns *)a)->ns, ((const td__tenancy_ns *)b)->ns);
}

static void ns_fill(td__tenancy_ns *e, const td_config *cfg, const char *ns)
{
    e->ns = ns;
    e->tenant = td_config_tenant_for_namespace(cfg, ns);
    e->nsobj = td_config_get(cfg, "Namespace", NULL, ns);
    e->ns_labels = td_json_path(e->nsobj, "metadata.labels");
    e->tenant_labels = td_json_path(e->tenant, "spec.labels");
    e->tenant_name = td_json_str(e->tenant, "metadata.name");
    e->customer = td_tenancy_of(e->tenant) == TD_TENANCY_CUSTOMER;
    e->pss_more = false;
    const char *key;
    json_t *v;
    json_object_foreach(e->ns_labels, key, v)
    {
        static const char prefix[] = "pod-security.kubernetes.io/";
        if (strncmp(key, prefix, sizeof prefix - 1) == 0 &&
            strcmp(key + sizeof prefix - 1, "enforce") != 0)
            e->pss_more = true;
    }
}

void td__tenancy_pool_fill(td__tenancy_pool *p, json_t *pool)
{
    p->obj = pool;
    p->name = td_json_str(pool, "metadata.name");
    p->taint = td_json_path(pool, "spec.taint");
    p->taint_key = td_json_str(p->taint, "key");
    p->taint_value = td_json_str(p->taint, "value");
    p->taint_effect = td_json_str(p->taint, "effect");
    p->selector = td_json_path(pool, "spec.nodeSelector");
    p->tenants = td_json_path(pool, "spec.tenants");
    p->capacity = td_json_path(pool, "spec.capacity");
}

static void policy_fill(td__tenancy_policy *p, const td_config *cfg)
{
    p->policy = td_config_admission_policy(cfg);
    p->required_labels = td_json_path(p->policy, "spec.requiredLabels");
    p->inherit_labels = td_json_path(p->policy, "spec.inheritLabelsFromNamespace");
    p->runtime_class = td_json_str(p->policy, "spec.sandbox.runtimeClassName");
    p->untrusted_workloads = td_json_path(p->policy, "spec.sandbox.untrustedWorkloads");
}

static td_config_attachment *index_build(const td_config *cfg)
{
    json_t *const *nsobjs, *const *tenants, *const *pools;
    size_t nn = td_config_list(cfg, "Namespace", NULL, &nsobjs);
    size_t nt = td_config_list(cfg, "Tenant", NULL, &tenants);
    size_t np = td_config_list(cfg, "NodePool", NULL, &pools);
    size_t cap = nn, n = 0;
    td__tenancy_index *ix = calloc(1, sizeof *ix);
    if (!ix)
        return NULL;
    ix->hdr.destroy = index_destroy;
    for (size_t i = 0; i < nt; i++)
        cap += json_array_size(td_json_path(tenants[i], "spec.namespaces"));
    if ((cap && !(ix->nss = calloc(cap, sizeof *ix->nss))) ||
        (np && !(ix->pools = calloc(np, sizeof *ix->pools)))) {
        index_destroy(&ix->hdr);
        return NULL;
    }
    /* every namespace a lookup can hit: those named by a Namespace object
     * or listed by a Tenant; any other gets the lookups at request time */
    for (size_t i = 0; i < nn; i++) {
        const char *name = td_json_str(nsobjs[i], "metadata.name");
        if (name)
            ix->nss[n++].ns = name;
    }
    for (size_t i = 0; i < nt; i++) {
        size_t k;
        json_t *x;
        json_array_foreach(td_json_path(tenants[i], "spec.namespaces"), k, x)
        {
            if (json_is_string(x))
                ix->nss[n++].ns = json_string_value(x);
        }
    }
    if (n)
        qsort(ix->nss, n, sizeof *ix->nss, ns_cmp);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || strcmp(ix->nss[u - 1].ns, ix->nss[i].ns) != 0)
            ix->nss[u++].ns = ix->nss[i].ns;
    ix->nns = u;
    for (size_t i = 0; i < ix->nns; i++)
        ns_fill(&ix->nss[i], cfg, ix->nss[i].ns);
    for (size_t i = 0; i < np; i++)
        td__tenancy_pool_fill(&ix->pools[i], pools[i]);
    ix->npools = np;
    policy_fill(&ix->policy, cfg);
    return &ix->hdr;
}

const td__tenancy_index *td__tenancy_index_get(const td_config *cfg)
{
    return (const td__tenancy_index *)td_config_attachment_get(cfg, TD_CONFIG_ATTACH_TENANCY,
                                                               index_build);
}

const td__tenancy_ns *td__tenancy_ns_get(const td__tenancy_index *ix, const td_config *cfg,
                                         const char *ns, td__tenancy_ns *spare)
{
    if (ix && ns && ix->nns) {
        td__tenancy_ns key = {.ns = ns};
        const td__tenancy_ns *e = bsearch(&key, ix->nss, ix->nns, sizeof *ix->nss, ns_cmp);
        if (e)
            return e;
    }
    memset(spare, 0, sizeof *spare);
    ns_fill(spare, cfg, ns);
    return spare;
}

size_t td__tenancy_pools(const td__tenancy_index *ix, const td__tenancy_pool **pools)
{
    *pools = ix ? ix->pools : NULL;
    return ix ? ix->npools : 0;
}

const td__tenancy_policy *td__tenancy_policy_get(const td__tenancy_index *ix,
                                                 const td_config *cfg, td__tenancy_policy *spare)
{
    if (ix)
        return &ix->policy;
    policy_fill(spare, cfg);
    return spare;
}
