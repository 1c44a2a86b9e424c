/* kinds.c - admission's kinds: Kubernetes' own (Namespace, ResourceQuota,
 * LimitRange, PriorityClass, RuntimeClass, Pod and the kinds stored as
 * given) and AdmissionPolicy, validated as Kubernetes validates them (a
 * ResourceQuota by quota.c, which parses it), and the isolation tiers'
 * rules across objects (tenancy.h). */
#include <stdio.h>
#include <string.h>

#include "admission/kinds.h"
#include "admission/admit.h"
#include "admission/quota.h"
#include "core/config.h"
#include "core/kind.h"
#include "admission/tenancy.h"
#include "core/validate.h"

static td_status validate_namespace(td_vctx *v)
{
    const char *name = td_json_str(v->obj, "metadata.name");
    if (!td_dns_label(name))
        return td_vfail(v, td_json_path(v->obj, "metadata.name"), "metadata.name",
                        "\"%s\" is not a valid namespace name (a DNS-1123 label: lowercase "
                        "letters, digits and '-', at most 63)",
                        name);
    return TD_OK;
}

static td_status validate_limitrange(td_vctx *v)
{
    json_t *limits = td_json_path(v->obj, "spec.limits");
    if (!json_is_array(limits))
        return td_vfail(v, limits, "spec.limits", "required: a list of limits");
    size_t i;
    json_t *l;
    json_array_foreach(limits, i, l)
    {
        char f[128];
        snprintf(f, sizeof f, "spec.limits[%zu]", i);
        if (!json_is_object(l))
            return td_vfail(v, l, f, "must be a mapping");
        const char *type = td_json_str(l, "type");
        static const char *const types[] = {"Container", "Pod", "PersistentVolumeClaim", NULL};
        if (!td_in_list(type, types))
            return td_vfail(v, l, f, "type must be Container, Pod or PersistentVolumeClaim");
        static const char *const maps[] = {
            "max", "min", "default", "defaultRequest", "maxLimitRequestRatio", NULL};
        for (const char *const *m = maps; *m; m++) {
            char mf[160];
            snprintf(mf, sizeof mf, "%s.%s", f, *m);
            TD_TRY(td_v_quantity_map(v, json_object_get(l, *m), mf));
        }
        if (strcmp(type, "Container") != 0 &&
            (json_object_get(l, "default") || json_object_get(l, "defaultRequest")))
            return td_vfail(v, l, f,
                            "default and defaultRequest may only be set for type "
                            "Container");
    }
    return TD_OK;
}

static td_status validate_priorityclass(td_vctx *v)
{
    json_t *value = json_object_get(v->obj, "value");
    if (!value)
        return td_vfail(v, value, "value", "required: an integer priority");
    int32_t x;
    td_err e;
    if (td_json_int32(value, &x, &e) != TD_OK)
        return td_vfail(v, value, "value", "%s", e.msg);
    if (x > 1000000000LL && strncmp(td_json_str(v->obj, "metadata.name"), "system-", 7) != 0)
        return td_vfail(v, value, "value", "must be at most 1000000000 for user classes");
    json_t *gd = json_object_get(v->obj, "globalDefault");
    if (gd && !json_is_boolean(gd))
        return td_vfail(v, gd, "globalDefault", "must be true or false");
    const char *pp = td_json_str(v->obj, "preemptionPolicy");
    if (json_object_get(v->obj, "preemptionPolicy") &&
        !(pp && (strcmp(pp, "Never") == 0 || strcmp(pp, "PreemptLowerPriority") == 0)))
        return td_vfail(v, json_object_get(v->obj, "preemptionPolicy"), "preemptionPolicy",
                        "must be Never or PreemptLowerPriority");
    return TD_OK;
}

/* node.k8s.io/v1 RuntimeClass: handler is required, a DNS-1123 label. */
static td_status validate_runtimeclass(td_vctx *v)
{
    json_t *h = json_object_get(v->obj, "handler");
    if (!json_is_string(h) || !td_dns_label(json_string_value(h)))
        return td_vfail(v, h, "handler",
                        "required: the CRI handler, a DNS-1123 label (e.g. runsc for gVisor)");
    json_t *sched = json_object_get(v->obj, "scheduling");
    if (sched && !json_is_object(sched))
        return td_vfail(v, sched, "scheduling", "must be a mapping");
    TD_TRY(td_v_string_map(v, json_object_get(sched, "nodeSelector"), "scheduling.nodeSelector"));
    json_t *tols = json_object_get(sched, "tolerations");
    if (tols && !json_is_array(tols))
        return td_vfail(v, tols, "scheduling.tolerations", "must be a list");
    TD_TRY(td_v_quantity_map(v, td_json_path(v->obj, "overhead.podFixed"), "overhead.podFixed"));
    return TD_OK;
}

static td_status validate_pod(td_vctx *v)
{
    json_t *c = td_json_path(v->obj, "spec.containers");
    if (!json_is_array(c) || json_array_size(c) == 0)
        return td_vfail(v, c, "spec.containers", "required: at least one container");
    return TD_OK;
}

static td_status validate_admission_policy(td_vctx *v)
{
    static const char *const top[] = {"apiVersion", "kind", "metadata", "spec", NULL};
    static const char *const spec[] = {"requiredLabels", "inheritLabelsFromNamespace",
                                       "sandbox",        "enforcement",
                                       "resourceQuota",  NULL};
    static const char *const sandbox[] = {"runtimeClassName", "untrustedWorkloads", NULL};
    TD_TRY(td_v_fields(v, v->obj, "", top));
    json_t *s = json_object_get(v->obj, "spec");
    TD_TRY(td_v_fields(v, s, "spec", spec));
    json_t *sb = json_object_get(s, "sandbox");
    TD_TRY(td_v_fields(v, sb, "spec.sandbox", sandbox));
    json_t *rc = json_object_get(sb, "runtimeClassName");
    if (rc && (!json_is_string(rc) || !td_dns_subdomain(json_string_value(rc))))
        return td_vfail(v, rc, "spec.sandbox.runtimeClassName", "must be a RuntimeClass name");
    TD_TRY(td_v_string_array(v, json_object_get(sb, "untrustedWorkloads"),
                             "spec.sandbox.untrustedWorkloads"));
    TD_TRY(td_v_string_array(v, json_object_get(s, "requiredLabels"), "spec.requiredLabels"));
    /* ResourceQuotaConfiguration's limitedResources: a class matched here
     * is usable only in a namespace with a ResourceQuota selecting it. */
    static const char *const rq[] = {"limitedResources", NULL};
    static const char *const lrk[] = {"resource", "matchContains", "matchScopes", NULL};
    json_t *rqc = json_object_get(s, "resourceQuota");
    TD_TRY(td_v_fields(v, rqc, "spec.resourceQuota", rq));
    json_t *lrs = json_object_get(rqc, "limitedResources");
    if (lrs && !json_is_array(lrs))
        return td_vfail(v, lrs, "spec.resourceQuota.limitedResources", "must be a list");
    size_t li;
    json_t *lr;
    json_array_foreach(lrs, li, lr)
    {
        char f[96];
        snprintf(f, sizeof f, "spec.resourceQuota.limitedResources[%zu]", li);
        TD_TRY(td_v_fields(v, lr, f, lrk));
        if (!td_json_str(lr, "resource"))
            return td_vfail(v, lr, f, "resource: required (e.g. pods)");
        char g[128];
        snprintf(g, sizeof g, "%s.matchContains", f);
        TD_TRY(td_v_string_array(v, json_object_get(lr, "matchContains"), g));
        snprintf(g, sizeof g, "%s.matchScopes", f);
        TD_TRY(td_quota_validate_scope_exprs(v, json_object_get(lr, "matchScopes"), g));
    }
    json_t *inh = json_object_get(s, "inheritLabelsFromNamespace");
    if (inh && !json_is_boolean(inh))
        return td_vfail(v, inh, "spec.inheritLabelsFromNamespace", "must be true or false");
    /* enforcement: "enforce" | "shadow", or {RULE: MODE} for the
     * validating rules (see admit.h). */
    return td_v_enforcement(v, json_object_get(s, "enforcement"), "spec.enforcement",
                            td_admit_validating_rules,
                            "a mapping of rule to mode (rules: LimitRange, CostLabels, "
                            "PodSecurity, NodePool, Sandbox, Storage, ResourceQuota)");
}

/* ---- across objects ---------------------------------------------------- */

/* One PriorityClass at most is the global default. */
static td_status priority_cross_check(json_t *const *objs, size_t n, td_err *err)
{
    const char *global_default = NULL;
    for (size_t i = 0; i < n; i++) {
        json_t *o = objs[i];
        if (td_kind_is(o, "PriorityClass") && json_is_true(json_object_get(o, "globalDefault"))) {
            if (global_default)
                return td_err_set(err, TD_EINVAL,
                                  "PriorityClass %s: globalDefault: PriorityClass %s is already "
                                  "the global default; only one may be",
                                  td_json_str(o, "metadata.name"), global_default);
            global_default = td_json_str(o, "metadata.name");
        }
    }
    return TD_OK;
}

/* The isolation tiers' rules across objects (tenancy.h): a customer is on
 * no NodePool shared with another tenant, the sandbox RuntimeClass exists
 * once there is a customer, and no two tenants' storage overlaps. */
static td_status tenancy_cross_check(json_t *const *objs, size_t n, td_err *err)
{
    const json_t *customer = NULL;
    for (size_t i = 0; i < n; i++) {
        json_t *t = objs[i];
        if (!td_kind_is(t, "Tenant"))
            continue;
        const char *name = td_json_str(t, "metadata.name");
        if (td_tenancy_of(t) == TD_TENANCY_CUSTOMER) {
            if (!customer)
                customer = t;
            for (size_t j = 0; j < n; j++) {
                json_t *pool = objs[j];
                if (!td_kind_is(pool, "NodePool"))
                    continue;
                json_t *ts = td_json_path(pool, "spec.tenants");
                int listed = 0;
                size_t k;
                json_t *x;
                json_array_foreach(ts, k, x)
                {
                    listed |= strcmp(json_string_value(x), name) == 0;
                }
                if (listed && json_array_size(ts) > 1)
                    return td_err_set(err, TD_EINVAL,
                                      "NodePool %s: spec.tenants: customer tenant \"%s\" shares "
                                      "this pool with other tenants; a customer's pools are "
                                      "dedicated (spec.tenants: [%s])",
                                      td_json_str(pool, "metadata.name"), name, name);
            }
        }
        const char *b1 = td_json_str(t, "spec.storage.bucket");
        const char *p1 = td_json_str(t, "spec.storage.prefix");
        for (size_t j = i + 1; b1 && j < n; j++) {
            json_t *u = objs[j];
            if (!td_kind_is(u, "Tenant"))
                continue;
            const char *b2 = td_json_str(u, "spec.storage.bucket");
            const char *p2 = td_json_str(u, "spec.storage.prefix");
            if (td_storage_overlap(b1, p1 ? p1 : "", b2, p2 ? p2 : ""))
                return td_err_set(err, TD_EINVAL,
                                  "Tenant %s: spec.storage: %s/%s overlaps tenant %s's %s/%s; "
                                  "storage prefixes of tenants must be disjoint",
                                  td_json_str(u, "metadata.name"), b2, p2 ? p2 : "", name, b1,
                                  p1 ? p1 : "");
        }
    }
    if (customer) {
        json_t *pol = td_kind_objs_find(objs, n, "AdmissionPolicy", "default");
        for (size_t i = 0; !pol && i < n; i++)
            if (td_kind_is(objs[i], "AdmissionPolicy"))
                pol = objs[i];
        const char *rc = td_json_str(pol, "spec.sandbox.runtimeClassName");
        if (!rc || !*rc)
            rc = TD_SANDBOX_RUNTIME_CLASS;
        if (!td_kind_objs_find(objs, n, "RuntimeClass", rc))
            return td_err_set(err, TD_EINVAL,
                              "Tenant %s: spec.tenancy: customer pods run in the sandbox "
                              "RuntimeClass \"%s\", which is not defined; add a RuntimeClass "
                              "%s (node.k8s.io/v1, handler %s for gVisor), as `tenantctl "
                              "provision --tenancy customer` emits it",
                              td_json_str(customer, "metadata.name"), rc, rc, TD_SANDBOX_HANDLER);
    }
    return TD_OK;
}

/* ---- the table --------------------------------------------------------- */

/* Cross-checks run in rank order: the PriorityClass rule first, the
 * tenancy rules after the gateway's Tenant rules (ranks 20, 30). */
static const td_kind_def kinds[] = {
    {"Namespace", "v1", false, "ns,namespace,namespaces", validate_namespace, NULL, 0, NULL},
    {"ResourceQuota", "v1", true, "quota,resourcequota,resourcequotas", td_quota_validate, NULL,
     0, NULL},
    {"LimitRange", "v1", true, "limits,limitrange,limitranges", validate_limitrange, NULL, 0, NULL},
    {"PriorityClass", "scheduling.k8s.io/v1", false, "pc,priorityclass,priorityclasses",
     validate_priorityclass, priority_cross_check, 10, NULL},
    {"Pod", "v1", true, "po,pod,pods", validate_pod, NULL, 0, NULL},
    {"RoleBinding", "rbac.authorization.k8s.io/v1", true, "rolebinding,rolebindings", NULL, NULL, 0,
     NULL},
    {"NetworkPolicy", "networking.k8s.io/v1", true, "netpol,networkpolicy,networkpolicies", NULL,
     NULL, 0, NULL},
    {"RuntimeClass", "node.k8s.io/v1", false, "runtimeclass,runtimeclasses", validate_runtimeclass,
     NULL, 0, NULL},
    {"Role", "rbac.authorization.k8s.io/v1", true, "role,roles", NULL, NULL, 0, NULL},
    {"ServiceAccount", "v1", true, "sa,serviceaccount,serviceaccounts", NULL, NULL, 0, NULL},
    {"ConfigMap", "v1", true, "cm,configmap,configmaps", NULL, NULL, 0, NULL},
    {"HelmChart", "helm.cattle.io/v1", true, "helmchart,helmcharts", NULL, NULL, 0, NULL},
    {"AdmissionPolicy", TD_API_TENANTD, false, "admissionpolicy,admissionpolicies",
     validate_admission_policy, tenancy_cross_check, 40, NULL},
};

const td_kind_def *td_admission_kinds(size_t *n)
{
    *n = sizeof kinds / sizeof kinds[0];
    return kinds;
}
