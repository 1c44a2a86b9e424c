/* test_admit_shadow.c - admission rules in shadow (AdmissionPolicy
 * spec.enforcement): a shadowed rule's denial becomes a warning and an
 * audit annotation and the pod is admitted, the others still deny; the
 * step trace behind `tenantctl explain pod`; and the same input giving the
 * same JSONPatch bytes every time, traced or not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission/admit.h"

#include "testutil.h"

static const char base[] =
    "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n"
    "  labels: {team: a, environment: dev, project: p, pod-security.kubernetes.io/enforce: "
    "baseline}\n---\n"
    "apiVersion: v1\nkind: Namespace\nmetadata: {name: bare}\n---\n"
    "apiVersion: v1\nkind: LimitRange\nmetadata: {name: lr, namespace: a}\n"
    "spec: {limits: [{type: Container, defaultRequest: {cpu: 100m}, default: {cpu: 500m}}]}\n";

static td_config *load(const char *policy)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s%s", base, policy ? policy : "");
    return test_config("p.yaml", buf);
}

static const char privileged[] =
    "{\"metadata\":{\"name\":\"x\",\"namespace\":\"a\"},\"spec\":{\"containers\":[{\"name\":\"c\","
    "\"securityContext\":{\"privileged\":true}}]}}";
static const char unlabelled[] =
    "{\"metadata\":{\"name\":\"y\",\"namespace\":\"bare\"},\"spec\":{\"containers\":[{\"name\":"
    "\"c\"}]}}";

static json_t *review(const td_config *c, const char *pod)
{
    json_t *in = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}, s:o}}", "apiVersion",
                           "admission.k8s.io/v1", "kind", "AdmissionReview", "request", "uid",
                           "u1", "operation", "CREATE", "kind", "kind", "Pod", "object",
                           json_loads(pod, 0, NULL));
    json_t *out = NULL;
    int code = 0;
    assert_int_equal(td_admission_review(c, in, TD_REVIEW_MUTATE_AND_VALIDATE, NULL, &out, &code),
                     TD_OK);
    json_decref(in);
    return out;
}

static void test_enforced_by_default(void **state)
{
    (void)state;
    td_config *c = load(NULL);
    json_t *out = review(c, privileged);
    json_t *resp = json_object_get(out, "response");
    assert_false(json_is_true(json_object_get(resp, "allowed")));
    assert_string_equal(td_json_str(resp, "status.details.kind"), "PodSecurity");
    assert_null(json_object_get(resp, "warnings"));
    json_decref(out);
    td_config_unref(c);
}

static void test_one_rule_in_shadow(void **state)
{
    (void)state;
    td_config *c = load("---\napiVersion: tenantd.dev/v1alpha1\nkind: AdmissionPolicy\n"
                        "metadata: {name: p}\nspec: {enforcement: {PodSecurity: shadow}}\n");
    json_t *out = review(c, privileged);
    json_t *resp = json_object_get(out, "response");
    assert_true(json_is_true(json_object_get(resp, "allowed")));
    json_t *w = json_object_get(resp, "warnings");
    assert_int_equal(json_array_size(w), 1);
    const char *w0 = json_string_value(json_array_get(w, 0));
    assert_non_null(strstr(w0, "tenantd shadow: PodSecurity would deny: violates PodSecurity "
                               "\"baseline:latest\": privileged"));
    const char *audit = json_string_value(
        json_object_get(json_object_get(resp, "auditAnnotations"), "tenantd.dev/shadow-PodSecurity"));
    assert_non_null(audit);
    assert_non_null(strstr(audit, "privileged"));
    /* the mutations still happen under shadow */
    assert_non_null(json_object_get(resp, "patch"));
    json_decref(out);
    /* another rule is still enforced */
    out = review(c, unlabelled);
    resp = json_object_get(out, "response");
    assert_false(json_is_true(json_object_get(resp, "allowed")));
    assert_string_equal(td_json_str(resp, "status.details.kind"), "CostLabels");
    json_decref(out);
    td_config_unref(c);
}

static void test_everything_in_shadow(void **state)
{
    (void)state;
    td_config *c = load("---\napiVersion: tenantd.dev/v1alpha1\nkind: AdmissionPolicy\n"
                        "metadata: {name: p}\nspec: {enforcement: shadow}\n");
    td_admit_result r;
    json_t *pod = json_loads(unlabelled, 0, NULL);
    assert_int_equal(td_admit_pod(c, pod, NULL, NULL, &r), TD_OK);
    assert_true(r.allowed);
    assert_int_equal(json_array_size(r.shadowed), 1);
    assert_string_equal(td_json_str(json_array_get(r.shadowed, 0), "rule"), "CostLabels");
    td_admit_result_fini(&r);
    json_decref(pod);
    td_config_unref(c);
}

static void test_trace_and_order(void **state)
{
    (void)state;
    td_config *c = load("---\napiVersion: tenantd.dev/v1alpha1\nkind: AdmissionPolicy\n"
                        "metadata: {name: p}\nspec: {enforcement: {PodSecurity: shadow}}\n");
    json_t *pod = json_loads(privileged, 0, NULL);
    td_admit_opts o = {0};
    o.trace = true;
    td_admit_result r;
    assert_int_equal(td_admit_pod(c, pod, NULL, &o, &r), TD_OK);
    static const char *const want[][3] = {
        {"mutate", "Defaults", "unchanged"},     {"mutate", "LimitRange", "changed"},
        {"mutate", "Priority", "changed"},       {"mutate", "CostLabels", "changed"},
        {"mutate", "NodePool", "unchanged"},     {"mutate", "Sandbox", "unchanged"},
        {"validate", "LimitRange", "passed"},    {"validate", "PodSecurity", "shadow-denied"},
        {"validate", "CostLabels", "passed"},    {"validate", "NodePool", "passed"},
        {"validate", "Sandbox", "passed"},       {"validate", "Storage", "passed"},
        {"validate", "ResourceQuota", "skipped"}};
    size_t n = sizeof want / sizeof want[0];
    assert_int_equal(json_array_size(r.trace), n);
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(r.trace, i);
        assert_string_equal(td_json_str(s, "phase"), want[i][0]);
        assert_string_equal(td_json_str(s, "step"), want[i][1]);
        if (strcmp(td_json_str(s, "result"), want[i][2]) != 0)
            fail_msg("step %zu %s: %s, want %s", i, want[i][1], td_json_str(s, "result"), want[i][2]);
    }
    /* LimitRange's changes are its own: requests and limits of cpu */
    json_t *lr = json_object_get(json_array_get(r.trace, 1), "changes");
    char *lrs = json_dumps(lr, JSON_COMPACT);
    assert_non_null(strstr(lrs, "\"path\":\"/spec/containers/0/resources\""));
    assert_non_null(strstr(lrs, "500m"));
    free(lrs);
    assert_true(r.allowed);
    /* the trace's per-step changes add up to the patch */
    size_t ops = 0;
    for (size_t i = 0; i < n; i++)
        ops += json_array_size(json_object_get(json_array_get(r.trace, i), "changes"));
    assert_true(ops >= json_array_size(r.patch));
    td_admit_result_fini(&r);
    json_decref(pod);
    td_config_unref(c);
}

static void test_patch_bytes_deterministic(void **state)
{
    (void)state;
    td_config *c = load(NULL);
    json_t *pod = json_loads(unlabelled, 0, NULL);
    json_object_set_new(json_object_get(pod, "metadata"), "namespace", json_string("a"));
    char *first = NULL;
    for (int i = 0; i < 50; i++) {
        td_admit_opts o = {0};
        o.trace = i % 2;
        td_admit_result r;
        assert_int_equal(td_admit_pod(c, pod, NULL, &o, &r), TD_OK);
        assert_true(r.allowed);
        char *s = json_dumps(r.patch, JSON_COMPACT);
        if (!first)
            first = s;
        else {
            assert_string_equal(s, first);
            free(s);
        }
        td_admit_result_fini(&r);
    }
    free(first);
    json_decref(pod);
    td_config_unref(c);
}

static void test_bad_enforcement_refused(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"spec: {enforcement: {Bogus: shadow}}", "spec.enforcement: unknown field \"Bogus\""},
        {"spec: {enforcement: {PodSecurity: audit}}", "spec.enforcement.PodSecurity: must be enforce or shadow"},
        {"spec: {enforcement: warn}", "spec.enforcement: must be enforce or shadow"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char buf[512];
        snprintf(buf, sizeof buf,
                 "apiVersion: tenantd.dev/v1alpha1\nkind: AdmissionPolicy\nmetadata: {name: p}\n%s\n",
                 bad[i][0]);
        td_manifest *m = NULL;
        td_err err;
        td_config_builder *b = NULL;
        assert_int_equal(td_manifest_parse("p.yaml", buf, strlen(buf), &m, &err), TD_OK);
        assert_int_equal(td_config_builder_create(NULL, &b, &err), TD_OK);
        assert_int_equal(td_config_builder_add_manifest(b, m, &err), TD_EINVAL);
        if (!strstr(err.msg, bad[i][1]) || !strstr(err.msg, "p.yaml:4"))
            fail_msg("row %zu: %s", i, err.msg);
        td_config_builder_destroy(b);
        td_manifest_destroy(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enforced_by_default),
        cmocka_unit_test(test_one_rule_in_shadow),
        cmocka_unit_test(test_everything_in_shadow),
        cmocka_unit_test(test_trace_and_order),
        cmocka_unit_test(test_patch_bytes_deterministic),
        cmocka_unit_test(test_bad_enforcement_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
