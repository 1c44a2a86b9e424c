/* test_priority.c - the Priority admission plugin for Workloads
 * (td_priority_workload): the class gives the priority, a disagreeing or
 * wrapping spec.priority is refused in kube-apiserver's words, and a class
 * limited by limitedResources needs a covering ResourceQuota. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "admission/policy.h"
#include "testutil.h"

static const char *const platform =
    "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n"
    "apiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n---\n"
    "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: low}\nvalue: 10\n"
    "globalDefault: true\n---\n"
    "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: urgent}\n"
    "value: 1000\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata: {name: wu}\n"
    "value: 2000\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: AdmissionPolicy\nmetadata: {name: default}\n"
    "spec:\n  resourceQuota:\n    limitedResources:\n    - resource: pods\n      matchScopes:\n"
    "      - {scopeName: PriorityClass, operator: In, values: [urgent, wu]}\n---\n"
    "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q, namespace: b}\n"
    "spec:\n  hard: {pods: '10'}\n  scopeSelector:\n    matchExpressions:\n"
    "    - {scopeName: PriorityClass, operator: In, values: [urgent]}\n";

static void test_rows(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        const char *ns;
        const char *spec; /* JSON members added to spec */
        const char *labels;
        td_status want;
        const char *msg;
    } rows[] = {
        {"no class: the global default", "a", "", "", TD_OK, NULL},
        {"the default's value given", "a", "\"priority\":10", "", TD_OK, NULL},
        {"another value given", "a", "\"priority\":1000000", "", TD_EFORBIDDEN,
         "the integer value of priority (1000000) must not be provided in workload spec; "
         "priority admission controller computed 10 from the given PriorityClass name"},
        {"a value that would wrap", "a", "\"priority\":-2147483649", "", TD_EINVAL,
         "spec.priority: must be an integer in [-2147483648, 2147483647], not -2147483649"},
        {"a real", "a", "\"priority\":1e3", "", TD_EINVAL, "not 1000.0"},
        {"a boolean", "a", "\"priority\":true", "", TD_EINVAL, "must be an integer, not true"},
        {"an unknown class", "a", "\"priorityClassName\":\"nope\"", "", TD_EFORBIDDEN,
         "no PriorityClass with name nope was found"},
        {"an unknown WorkloadPriorityClass", "a",
         "\"priorityClassName\":\"low\",\"priorityClassSource\":"
         "\"kueue.x-k8s.io/workloadpriorityclass\"",
         "", TD_EFORBIDDEN, "no WorkloadPriorityClass with name low was found"},
        {"a limited class, no quota", "a", "\"priorityClassName\":\"urgent\"", "", TD_EFORBIDDEN,
         "insufficient quota to match these scopes: [{PriorityClass In [urgent wu]}]"},
        {"a limited class, covered", "b", "\"priorityClassName\":\"urgent\",\"priority\":1000", "",
         TD_OK, NULL},
        {"a limited WorkloadPriorityClass by label, not covered in b", "b", "",
         "\"kueue.x-k8s.io/priority-class\":\"wu\"", TD_EFORBIDDEN,
         "insufficient quota to match these scopes"},
        {"the pod template's class", "a",
         "\"podSets\":[{\"template\":{\"spec\":{\"priorityClassName\":\"urgent\"}}}]", "",
         TD_EFORBIDDEN, "insufficient quota"},
    };
    td_config *cfg = test_config("p.yaml", platform);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char buf[1024];
        snprintf(buf, sizeof buf,
                 "{\"kind\":\"Workload\",\"metadata\":{\"name\":\"w\",\"namespace\":\"%s\","
                 "\"labels\":{%s}},\"spec\":{\"queueName\":\"q\"%s%s}}",
                 rows[i].ns, rows[i].labels, *rows[i].spec ? "," : "", rows[i].spec);
        json_error_t je;
        json_t *wl = json_loads(buf, 0, &je);
        if (!wl)
            fail_msg("%s: %s", rows[i].name, je.text);
        json_t *before = json_deep_copy(wl);
        td_err err = {{0}};
        td_status st = td_priority_workload(cfg, wl, &err);
        if (st != rows[i].want || (rows[i].msg && !strstr(err.msg, rows[i].msg)))
            fail_msg("%s: status %d (want %d), message \"%s\"", rows[i].name, st, rows[i].want,
                     err.msg);
        assert_true(json_equal(before, wl)); /* borrowed, not changed */
        json_decref(before);
        json_decref(wl);
    }
    td_config_unref(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
