/* priority.c - Kubernetes' Priority admission plugin: a pod's
 * priorityClassName (or the global default class) becomes spec.priority
 * and spec.preemptionPolicy. Messages as plugin/pkg/admission/priority. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "admission/policy.h"

static const struct {
    const char *name;
    long long value;
} builtin[] = {
    {"system-node-critical", 2000001000LL},
    {"system-cluster-critical", 2000000000LL},
};

td_status td_priority_mutate(const td_config *cfg, json_t *pod, td_err *err)
{
    json_t *spec = json_object_get(pod, "spec");
    if (!json_is_object(spec))
        return td_err_set(err, TD_EINVAL, "spec: must be a mapping");
    const char *name = json_string_value(json_object_get(spec, "priorityClassName"));
    long long value = 0;
    const char *preemption = "PreemptLowerPriority";
    int found = 0;
    if (name && *name) {
        json_t *pc = td_config_get(cfg, "PriorityClass", NULL, name);
        if (pc) {
            value = (long long)json_integer_value(json_object_get(pc, "value"));
            const char *pp = json_string_value(json_object_get(pc, "preemptionPolicy"));
            if (pp)
                preemption = pp;
            found = 1;
        }
        for (size_t i = 0; !found && i < sizeof builtin / sizeof builtin[0]; i++)
            if (strcmp(builtin[i].name, name) == 0) {
                value = builtin[i].value;
                found = 1;
            }
        if (!found)
            return td_err_set(err, TD_EFORBIDDEN, "no PriorityClass with name %s was found", name);
    } else {
        json_t *const *pcs;
        size_t n = td_config_list(cfg, "PriorityClass", NULL, &pcs);
        for (size_t i = 0; i < n; i++) {
            if (!json_is_true(json_object_get(pcs[i], "globalDefault")))
                continue;
            value = (long long)json_integer_value(json_object_get(pcs[i], "value"));
            const char *pp = td_json_str(pcs[i], "preemptionPolicy");
            if (pp)
                preemption = pp;
            json_object_set_new(spec, "priorityClassName",
                                json_string(td_json_str(pcs[i], "metadata.name")));
            found = 1;
            break;
        }
    }
    json_t *given = json_object_get(spec, "priority");
    int32_t gv;
    td_err e;
    if (given && td_json_int32(given, &gv, &e) != TD_OK) /* an int32 in the Pod's schema */
        return td_err_set(err, TD_EINVAL, "spec.priority: %s", e.msg);
    if (given && json_integer_value(given) != value)
        return td_err_set(err, TD_EFORBIDDEN,
                          "the integer value of priority (%lld) must not be provided in pod spec; "
                          "priority admission controller computed %lld from the given "
                          "PriorityClass name",
                          (long long)json_integer_value(given), value);
    json_object_set_new(spec, "priority", json_integer(value));
    if (found && !json_object_get(spec, "preemptionPolicy"))
        json_object_set_new(spec, "preemptionPolicy", json_string(preemption));
    return TD_OK;
}

/* ---- Workloads ----------------------------------------------------------- */

/* Whether a PriorityClass scope expression {operator, values} matches the
 * class name (Kubernetes' podMatchesScopeFunc for PriorityClass; "" is no
 * class). */
static bool scope_matches(const json_t *expr, const char *name)
{
    const char *op = td_json_str(expr, "operator");
    if (!op)
        return false;
    if (strcmp(op, "Exists") == 0)
        return *name != '\0';
    if (strcmp(op, "DoesNotExist") == 0)
        return *name == '\0';
    bool in = false;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(expr, "values"), i, v)
        in = in || (json_is_string(v) && strcmp(json_string_value(v), name) == 0);
    return strcmp(op, "In") == 0 ? in : strcmp(op, "NotIn") == 0 ? !in : false;
}

static bool is_priority_scope(const json_t *expr)
{
    const char *s = td_json_str(expr, "scopeName");
    return s && strcmp(s, "PriorityClass") == 0;
}

/* Go's %v of a ScopedResourceSelectorRequirement: {PriorityClass In [a b]}. */
static void format_scope(char *buf, size_t n, const json_t *expr)
{
    size_t len = (size_t)snprintf(buf, n, "{PriorityClass %s [", td_json_str(expr, "operator"));
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(expr, "values"), i, v)
        if (len < n)
            len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? " " : "",
                                    json_is_string(v) ? json_string_value(v) : "");
    if (len < n)
        snprintf(buf + len, n - len, "]}");
}

/* A class matched by a limited scope is usable in ns only if one of its
 * ResourceQuotas selects pods of that class by a PriorityClass scope (and
 * every PriorityClass scope of that quota matches). */
td_status td_priority_class_usable(const td_config *cfg, const char *ns, const char *name,
                                   td_err *err)
{
    json_t *pol = td_config_admission_policy(cfg);
    json_t *limited = td_json_path(pol, "spec.resourceQuota.limitedResources");
    if (!limited)
        return TD_OK; /* the common case, on every review: nothing limited */
    if (!name)
        name = "";
    json_t *const *quotas;
    size_t nq = td_config_list(cfg, "ResourceQuota", ns, &quotas);
    size_t i, k;
    json_t *lr, *ms;
    json_array_foreach(limited, i, lr)
    {
        const char *res = td_json_str(lr, "resource");
        if (!res || strcmp(res, "pods") != 0)
            continue;
        json_array_foreach(json_object_get(lr, "matchScopes"), k, ms)
        {
            if (!is_priority_scope(ms) || !scope_matches(ms, name))
                continue;
            bool covered = false;
            for (size_t q = 0; q < nq && !covered; q++) {
                json_t *exprs = td_json_path(quotas[q], "spec.scopeSelector.matchExpressions");
                bool any = false, all = true;
                size_t e;
                json_t *x;
                json_array_foreach(exprs, e, x)
                    if (is_priority_scope(x)) {
                        any = true;
                        all = all && scope_matches(x, name);
                    }
                covered = any && all;
            }
            if (!covered) {
                char shown[200];
                format_scope(shown, sizeof shown, ms);
                return td_err_set(err, TD_EFORBIDDEN,
                                  "insufficient quota to match these scopes: [%s]", shown);
            }
        }
    }
    return TD_OK;
}

td_status td_priority_workload(const td_config *cfg, const json_t *wl, td_err *err)
{
    const json_t *spec = json_object_get(wl, "spec");
    const char *ns = td_json_str(wl, "metadata.namespace");
    const char *name = td_json_str(spec, "priorityClassName");
    const char *source = td_json_str(spec, "priorityClassSource");
    bool wpc = source && strcmp(source, "kueue.x-k8s.io/workloadpriorityclass") == 0;
    const char *label = json_string_value(
        json_object_get(td_json_path(wl, "metadata.labels"), "kueue.x-k8s.io/priority-class"));
    if (!name && label) {
        name = label;
        wpc = true;
    }
    if (!name)
        name = json_string_value(td_json_path(json_array_get(td_json_path(spec, "podSets"), 0),
                                              "template.spec.priorityClassName"));
    long long value = 0;
    if (name && *name) {
        json_t *pc = td_config_get(cfg, wpc ? "WorkloadPriorityClass" : "PriorityClass", NULL, name);
        if (!pc)
            return td_err_set(err, TD_EFORBIDDEN, "no %s with name %s was found",
                              wpc ? "WorkloadPriorityClass" : "PriorityClass", name);
        value = (long long)json_integer_value(json_object_get(pc, "value"));
    } else {
        json_t *const *pcs;
        size_t n = td_config_list(cfg, "PriorityClass", NULL, &pcs);
        for (size_t i = 0; i < n; i++)
            if (json_is_true(json_object_get(pcs[i], "globalDefault"))) {
                value = (long long)json_integer_value(json_object_get(pcs[i], "value"));
                name = td_json_str(pcs[i], "metadata.name");
                break;
            }
    }
    td_status st = td_priority_class_usable(cfg, ns && *ns ? ns : "default", name, err);
    if (st != TD_OK)
        return st;
    json_t *given = json_object_get(spec, "priority");
    int32_t gv;
    td_err e;
    if (given && td_json_int32(given, &gv, &e) != TD_OK)
        return td_err_set(err, TD_EINVAL, "spec.priority: %s", e.msg);
    if (given && gv != value)
        return td_err_set(err, TD_EFORBIDDEN,
                          "the integer value of priority (%d) must not be provided in workload "
                          "spec; priority admission controller computed %lld from the given "
                          "PriorityClass name",
                          (int)gv, value);
    return TD_OK;
}
