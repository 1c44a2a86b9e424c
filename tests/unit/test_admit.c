/* test_admit.c - the admission pipeline end to end on in-memory objects:
 * order of steps, cost labels, GPU pools, PriorityClass, the
 * AdmissionReview envelope and its JSONPatch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "admission/admit.h"
#include "core/jsonpatch.h"

#include "testutil.h"

static const char platform[] =
    "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n"
    "  labels: {team: a, environment: dev, pod-security.kubernetes.io/enforce: baseline}\n---\n"
    "apiVersion: v1\nkind: Namespace\nmetadata: {name: b, labels: {team: b}}\n---\n"
    "apiVersion: v1\nkind: Namespace\nmetadata: {name: strict, labels: {team: s, project: s, "
    "environment: dev, pod-security.kubernetes.io/enforce: strict}}\n---\n"
    "apiVersion: v1\nkind: Namespace\nmetadata: {name: r, labels: {team: r, project: r, "
    "environment: dev, pod-security.kubernetes.io/enforce: restricted}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: ta}\n"
    "spec: {namespaces: [a], labels: {project: p1, team: from-tenant}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: tb}\n"
    "spec: {namespaces: [b], labels: {project: p2, environment: prod}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: NodePool\nmetadata: {name: pa}\n"
    "spec: {taint: {key: gpu, value: pa, effect: NoSchedule}, nodeSelector: {pool: pa}, "
    "tenants: [ta]}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: NodePool\nmetadata: {name: pb}\n"
    "spec: {taint: {key: gpu, value: pb, effect: NoSchedule}, nodeSelector: {pool: pb}, "
    "tenants: [tb]}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: NodePool\nmetadata: {name: shared}\n"
    "spec: {taint: {key: gpu, value: shared, effect: NoSchedule}, nodeSelector: {pool: shared}, "
    "tenants: [tb]}\n---\n"
    "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n---\n"
    "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: low}\nvalue: 10\n"
    "globalDefault: true\npreemptionPolicy: Never\n";

static td_config *load(void)
{
    return test_config("p.yaml", platform);
}

static const admit_case rows[] = {
    {"labels inherited: namespace first, then tenant",
     "{\"metadata\":{\"name\":\"x\",\"namespace\":\"a\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}",
     200, NULL, NULL,
     "{\"metadata\":{\"labels\":{\"team\":\"a\",\"environment\":\"dev\",\"project\":\"p1\"}}}"},
    {"pod's own label wins",
     "{\"metadata\":{\"namespace\":\"a\",\"labels\":{\"team\":\"own\"}},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}",
     200, NULL, NULL, "{\"metadata\":{\"labels\":{\"team\":\"own\"}}}"},
    {"missing label denied",
     "{\"metadata\":{\"namespace\":\"nowhere\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}",
     403, "CostLabels", "missing required cost label \"team\"", NULL},
    {"global default priority class",
     "{\"metadata\":{\"namespace\":\"a\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}", 200,
     NULL, NULL,
     "{\"spec\":{\"priorityClassName\":\"low\",\"priority\":10,\"preemptionPolicy\":\"Never\"}}"},
    {"named priority class",
     "{\"metadata\":{\"namespace\":\"a\"},\"spec\":{\"priorityClassName\":\"high\",\"containers\":[{\"name\":\"c\"}]}}",
     200, NULL, NULL,
     "{\"spec\":{\"priority\":1000,\"preemptionPolicy\":\"PreemptLowerPriority\"}}"},
    {"unknown priority class",
     "{\"metadata\":{\"namespace\":\"a\"},\"spec\":{\"priorityClassName\":\"nope\",\"containers\":[{\"name\":\"c\"}]}}",
     403, "Priority", "no PriorityClass with name nope was found", NULL},
    {"conflicting spec.priority",
     "{\"metadata\":{\"namespace\":\"a\"},\"spec\":{\"priorityClassName\":\"high\",\"priority\":5,\"containers\":[{\"name\":\"c\"}]}}",
     403, "Priority", "must not be provided in pod spec", NULL},
    {"one allowed pool: toleration and selector",
     "{\"metadata\":{\"namespace\":\"a\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}",
     200, NULL, NULL,
     "{\"spec\":{\"nodeSelector\":{\"pool\":\"pa\"},\"tolerations\":[{\"key\":\"gpu\",\"operator\":\"Equal\",\"value\":\"pa\",\"effect\":\"NoSchedule\"}]}}"},
    {"two allowed pools: node affinity",
     "{\"metadata\":{\"namespace\":\"b\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"1\"},\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}",
     200, NULL, NULL,
     "{\"spec\":{\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"pool\",\"operator\":\"In\",\"values\":[\"pb\"]}]},{\"matchExpressions\":[{\"key\":\"pool\",\"operator\":\"In\",\"values\":[\"shared\"]}]}]}}}}}"},
    {"tolerating another tenant's pool",
     "{\"metadata\":{\"namespace\":\"a\"},\"spec\":{\"tolerations\":[{\"key\":\"gpu\",\"operator\":\"Exists\"}],\"containers\":[{\"name\":\"c\"}]}}",
     403, "NodePool", "NodePool \"pb\", which tenant \"ta\" may not use", NULL},
    {"selecting another tenant's pool",
     "{\"metadata\":{\"namespace\":\"a\"},\"spec\":{\"nodeSelector\":{\"pool\":\"shared\"},\"containers\":[{\"name\":\"c\"}]}}",
     403, "NodePool", "selects NodePool \"shared\"", NULL},
    {"gpu pod without a tenant",
     "{\"metadata\":{\"namespace\":\"z\",\"labels\":{\"team\":\"z\",\"project\":\"z\",\"environment\":\"z\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}",
     403, "NodePool", "may use no NodePool", NULL},
    {"pss baseline denial",
     "{\"metadata\":{\"namespace\":\"a\"},\"spec\":{\"hostIPC\":true,\"containers\":[{\"name\":\"c\"}]}}",
     403, "PodSecurity", "violates PodSecurity \"baseline:latest\": host namespaces (hostIPC=true)",
     NULL},
    {"pss level from the namespace's label: restricted",
     "{\"metadata\":{\"namespace\":\"r\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}",
     403, "PodSecurity", "violates PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false", NULL},
    {"pss level label that is no level",
     "{\"metadata\":{\"namespace\":\"strict\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}",
     400, "PodSecurity", "namespace strict: label pod-security.kubernetes.io/enforce: \"strict\" is not "
     "privileged, baseline or restricted", NULL},
    {"not a pod", "{\"metadata\":{},\"spec\":{}}", 400, "BadRequest", "spec.containers", NULL},
    {"wrong kind", "{\"kind\":\"Service\",\"spec\":{\"containers\":[]}}", 400, "BadRequest",
     "is not a Pod", NULL},
};

static void test_rows(void **state)
{
    (void)state;
    td_config *c = load();
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        check_admit_case(c, &rows[i]);
    td_config_unref(c);
}

static void test_review_envelope(void **state)
{
    (void)state;
    td_config *c = load();
    const char *req = "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                      "\"request\":{\"uid\":\"abc\",\"kind\":{\"kind\":\"Pod\"},\"namespace\":\"a\","
                      "\"operation\":\"CREATE\",\"object\":{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}}";
    json_t *in = json_loads(req, 0, NULL);
    json_t *out = NULL;
    int code = 0;
    assert_int_equal(td_admission_review(c, in, TD_REVIEW_MUTATE, NULL, &out, &code), TD_OK);
    assert_int_equal(code, 200);
    assert_string_equal(td_json_str(out, "response.uid"), "abc");
    assert_true(json_is_true(td_json_path(out, "response.allowed")));
    assert_string_equal(td_json_str(out, "response.patchType"), "JSONPatch");
    assert_non_null(td_json_str(out, "response.patch"));
    json_decref(out);
    /* validate: same pod, no patch */
    assert_int_equal(td_admission_review(c, in, TD_REVIEW_VALIDATE, NULL, &out, &code), TD_OK);
    assert_null(td_json_path(out, "response.patch"));
    json_decref(out);
    json_decref(in);

    /* DELETE passes untouched; other kinds pass; bad envelopes are 400. */
    static const struct {
        const char *json;
        int code;
    } cases[] = {
        {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"operation\":\"DELETE\"}}", 200},
        {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"kind\":{\"kind\":\"Service\"},\"operation\":\"CREATE\",\"object\":{}}}", 200},
        {"{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"kind\":\"AdmissionReview\",\"request\":{}}", 400},
        {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}", 400},
        {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"operation\":\"CREATE\"}}", 400},
        {"[1,2]", 400},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        in = json_loads(cases[i].json, 0, NULL);
        assert_int_equal(td_admission_review(c, in, TD_REVIEW_VALIDATE, NULL, &out, &code), TD_OK);
        if (code != cases[i].code)
            fail_msg("case %zu: code %d want %d", i, code, cases[i].code);
        assert_int_equal(json_is_true(td_json_path(out, "response.allowed")), cases[i].code == 200);
        json_decref(out);
        json_decref(in);
    }
    td_config_unref(c);
}

/* opts.no_patch (the validating endpoint's): the same decision and the
 * same mutated pod for every row, with no patch made. */
static void test_no_patch(void **state)
{
    (void)state;
    td_config *c = load();
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        json_t *pod = json_loads(rows[i].pod, 0, NULL);
        td_admit_opts with = {0}, without = {.no_patch = true};
        td_admit_result a, b;
        td_admit_pod(c, pod, NULL, &with, &a);
        td_admit_pod(c, pod, NULL, &without, &b);
        if (a.code != b.code || a.allowed != b.allowed || strcmp(a.message, b.message) != 0 ||
            (a.rule != b.rule && (!a.rule || !b.rule || strcmp(a.rule, b.rule) != 0)))
            fail_msg("%s: no_patch decides %d %s, the patch-making run %d %s", rows[i].name,
                     b.code, b.message, a.code, a.message);
        if (a.pod && !json_equal(a.pod, b.pod))
            fail_msg("%s: no_patch mutates the pod differently", rows[i].name);
        assert_null(b.patch);
        if (rows[i].code == 200 && rows[i].final)
            assert_non_null(a.patch);
        td_admit_result_fini(&a);
        td_admit_result_fini(&b);
        json_decref(pod);
    }
    td_config_unref(c);
}

static void test_base64(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } rows64[] = {{"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foobar", "Zm9vYmFy"}};
    for (size_t i = 0; i < sizeof rows64 / sizeof rows64[0]; i++) {
        char *s = td_base64_encode((const unsigned char *)rows64[i].in, strlen(rows64[i].in));
        assert_string_equal(s, rows64[i].out);
        free(s);
    }
}

/* kube-apiserver's ResourceQuota admission with limitedResources: a pod of
 * a limited class is admitted only where a quota selects the class. */
static void test_limited_priority_class(void **state)
{
    (void)state;
    static const char extra[] =
        "---\napiVersion: tenantd.dev/v1alpha1\nkind: AdmissionPolicy\nmetadata: {name: default}\n"
        "spec:\n  resourceQuota:\n    limitedResources:\n    - resource: pods\n"
        "      matchScopes: [{scopeName: PriorityClass, operator: In, values: [high]}]\n---\n"
        "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: high-pods, namespace: b}\n"
        "spec:\n  hard: {pods: '10'}\n  scopeSelector:\n    matchExpressions:\n"
        "    - {scopeName: PriorityClass, operator: In, values: [high]}\n";
    static const admit_case cases[] = {
        {"limited class, no quota selecting it",
         "{\"metadata\":{\"namespace\":\"a\"},\"spec\":{\"priorityClassName\":\"high\","
         "\"containers\":[{\"name\":\"c\"}]}}",
         403, "ResourceQuota",
         "insufficient quota to match these scopes: [{PriorityClass In [high]}]", NULL},
        {"limited class where a quota selects it",
         "{\"metadata\":{\"namespace\":\"b\"},\"spec\":{\"priorityClassName\":\"high\","
         "\"containers\":[{\"name\":\"c\"}]}}",
         200, NULL, NULL, "{\"spec\":{\"priority\":1000}}"},
        {"the default class is not limited",
         "{\"metadata\":{\"namespace\":\"a\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}", 200,
         NULL, NULL, "{\"spec\":{\"priorityClassName\":\"low\"}}"},
    };
    char *yaml = malloc(sizeof platform + sizeof extra);
    assert_non_null(yaml);
    memcpy(yaml, platform, sizeof platform - 1);
    memcpy(yaml + sizeof platform - 1, extra, sizeof extra);
    td_config *c = test_config("p.yaml", yaml);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_admit_case(c, &cases[i]);
    td_config_unref(c);
    free(yaml);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_limited_priority_class),
        cmocka_unit_test(test_review_envelope),
        cmocka_unit_test(test_no_patch),
        cmocka_unit_test(test_base64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
