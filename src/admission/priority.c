/* priority.c - Kubernetes' Priority admission plugin: a pod's
 * priorityClassName (or the global default class) becomes spec.priority
 * and spec.preemptionPolicy. Messages as plugin/pkg/admission/priority. */
#include <stdio.h>
#include <string.h>

#include "tenantd/policy.h"

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
    if (given && json_is_integer(given) && json_integer_value(given) != value)
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
