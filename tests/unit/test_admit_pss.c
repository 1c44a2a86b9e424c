/* test_admit_pss.c - the namespace's Pod Security policy in the admission
 * pipeline: enforce at its pinned version, warn and audit as the answer's
 * warnings and audit annotations, labels that do not parse, as
 * k8s.io/pod-security-admission admission/admission.go (EvaluatePod) and
 * api/helpers.go (PolicyToEvaluate) decide them, at commit
 * 8f84a87c7f617f64a4ddc1aea24aeeb7a2e07cb8. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "admission/admit.h"

#include "testutil.h"

#define NS(name, labels)                                                                           \
    "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " name "\n"                               \
    "  labels: {team: t, project: p, environment: dev, " labels "}\n---\n"

static const char platform[] =
    NS("pinned", "pod-security.kubernetes.io/enforce: restricted, "
                 "pod-security.kubernetes.io/enforce-version: v1.22")
    NS("latest", "pod-security.kubernetes.io/enforce: restricted")
    NS("warned", "pod-security.kubernetes.io/enforce: baseline, "
                 "pod-security.kubernetes.io/warn: restricted, "
                 "pod-security.kubernetes.io/audit: restricted, "
                 "pod-security.kubernetes.io/audit-version: v1.22")
    NS("follows", "pod-security.kubernetes.io/enforce: baseline, "
                  "pod-security.kubernetes.io/enforce-version: v1.33, "
                  "pod-security.kubernetes.io/audit: restricted")
    NS("typo", "pod-security.kubernetes.io/enforce: baseline, "
               "pod-security.kubernetes.io/enforce-version: v1.x, "
               "pod-security.kubernetes.io/warn: strict")
    NS("warnonly", "pod-security.kubernetes.io/warn: baseline, "
                   "pod-security.kubernetes.io/warn-version: v1.33")
    "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: unlabelled\n"
    "  labels: {pod-security.kubernetes.io/enforce: baseline}\n";

static td_config *load(void)
{
    return test_config("pss.yaml", platform);
}

/* restricted at v1.22 but for runAsUser=0, which restricted checks from
 * v1.23 (check_runAsUser.go) */
#define ROOT_POD(ns)                                                                               \
    "{\"metadata\":{\"name\":\"x\",\"namespace\":\"" ns "\"},\"spec\":{\"securityContext\":"       \
    "{\"runAsNonRoot\":true,\"seccompProfile\":{\"type\":\"RuntimeDefault\"}},\"containers\":"     \
    "[{\"name\":\"c\",\"securityContext\":{\"runAsUser\":0,\"allowPrivilegeEscalation\":false,"    \
    "\"capabilities\":{\"drop\":[\"ALL\"]}}}]}}"
#define PLAIN_POD(ns)                                                                              \
    "{\"metadata\":{\"name\":\"x\",\"namespace\":\"" ns "\"},\"spec\":{\"containers\":"            \
    "[{\"name\":\"c\"}]}}"

/* restricted at latest, with the volumes given */
#define VOL_POD(ns, vols)                                                                          \
    "{\"metadata\":{\"name\":\"x\",\"namespace\":\"" ns "\"},\"spec\":{\"securityContext\":"       \
    "{\"runAsNonRoot\":true,\"seccompProfile\":{\"type\":\"RuntimeDefault\"}},\"volumes\":" vols       \
    ",\"containers\":[{\"name\":\"c\",\"securityContext\":{\"allowPrivilegeEscalation\":false,"        \
    "\"capabilities\":{\"drop\":[\"ALL\"]}}}]}}"

static const admit_case rows[] = {
    /* pkg/apis/core/v1/defaults.go SetDefaults_Volume, which upstream's
     * restricted/v1.X/pass/restrictedvolumes0.yaml relies on */
    {"a volume without a source is an emptyDir (restricted allows it)",
     VOL_POD("latest", "[{\"name\":\"v\"},{\"name\":\"w\",\"hostPath\":null},"
                       "{\"name\":\"s\",\"secret\":{\"secretName\":\"x\"}}]"),
     200, NULL, NULL,
     "{\"spec\":{\"volumes\":[{\"name\":\"v\",\"emptyDir\":{}},{\"name\":\"w\",\"hostPath\":null,"
     "\"emptyDir\":{}},{\"name\":\"s\",\"secret\":{\"secretName\":\"x\"}}]}}"},
    {"a volume with a source keeps it", VOL_POD("latest", "[{\"name\":\"n\",\"nfs\":{\"server\":\"h\",\"path\":\"/\"}}]"),
     403, "PodSecurity",
     "restricted volume types (volume \"n\" uses restricted volume type \"nfs\")", NULL},

    {"enforce-version v1.22: runAsUser=0 is not yet checked", ROOT_POD("pinned"), 200, NULL, NULL,
     NULL},
    {"enforce at latest: runAsUser=0 denied", ROOT_POD("latest"), 403, "PodSecurity",
     "violates PodSecurity \"restricted:latest\": runAsUser=0 (container \"c\" must not set "
     "runAsUser=0)",
     NULL},
    {"enforce-version v1.22 named in the denial",
     "{\"metadata\":{\"namespace\":\"pinned\"},\"spec\":{\"hostNetwork\":true,\"containers\":"
     "[{\"name\":\"c\"}]}}",
     403, "PodSecurity", "violates PodSecurity \"restricted:v1.22\": host namespaces (hostNetwork=true)",
     NULL},
    {"an enforce-version that does not parse is latest",
     "{\"metadata\":{\"namespace\":\"typo\"},\"spec\":{\"hostPID\":true,\"containers\":"
     "[{\"name\":\"c\"}]}}",
     403, "PodSecurity", "violates PodSecurity \"baseline:latest\": host namespaces (hostPID=true)",
     NULL},
};

static void test_rows(void **state)
{
    (void)state;
    td_config *c = load();
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        check_admit_case(c, &rows[i]);
    td_config_unref(c);
}

/* The review of pod (JSON) in mode: the tree, checked to be what the
 * written body says byte for byte. */
static json_t *review(td_config *c, const char *pod, td_review_mode mode)
{
    char req[4096];
    snprintf(req, sizeof req,
             "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":"
             "{\"uid\":\"u\",\"kind\":{\"kind\":\"Pod\"},\"operation\":\"CREATE\",\"object\":%s}}",
             pod);
    json_t *in = json_loads(req, 0, NULL), *out = NULL;
    assert_non_null(in);
    int code = 0, code2 = 0;
    assert_int_equal(td_admission_review(c, in, mode, NULL, &out, &code), TD_OK);
    char *body = NULL, *tree = json_dumps(out, JSON_COMPACT);
    size_t len = 0;
    assert_int_equal(td_admission_review_body(c, in, mode, NULL, &body, &len, &code2, NULL), TD_OK);
    assert_int_equal(code, code2);
    assert_string_equal(body, tree);
    free(body);
    free(tree);
    json_decref(in);
    return out;
}

static const char *warning(const json_t *out, size_t i)
{
    return json_string_value(json_array_get(td_json_path(out, "response.warnings"), i));
}

static const char *audit(const json_t *out, const char *key)
{
    return json_string_value(json_object_get(td_json_path(out, "response.auditAnnotations"), key));
}

static void test_warn_and_audit(void **state)
{
    (void)state;
    td_config *c = load();

    /* warn restricted:latest sees runAsUser=0; audit restricted:v1.22 does not */
    json_t *out = review(c, ROOT_POD("warned"), TD_REVIEW_VALIDATE);
    assert_true(json_is_true(td_json_path(out, "response.allowed")));
    assert_string_equal(warning(out, 0), "would violate PodSecurity \"restricted:latest\": "
                                         "runAsUser=0 (container \"c\" must not set runAsUser=0)");
    assert_int_equal(json_array_size(td_json_path(out, "response.warnings")), 1);
    assert_null(audit(out, "pod-security.kubernetes.io/audit-violations"));
    json_decref(out);

    /* both see a plain pod; audit words it at its own version */
    out = review(c, PLAIN_POD("warned"), TD_REVIEW_VALIDATE);
    assert_true(json_is_true(td_json_path(out, "response.allowed")));
    assert_non_null(strstr(warning(out, 0), "would violate PodSecurity \"restricted:latest\": "
                                            "allowPrivilegeEscalation != false"));
    assert_non_null(strstr(audit(out, "pod-security.kubernetes.io/audit-violations"),
                           "would violate PodSecurity \"restricted:v1.22\": "
                           "allowPrivilegeEscalation != false"));
    json_decref(out);

    /* the mutating endpoint leaves them to the validating one */
    out = review(c, PLAIN_POD("warned"), TD_REVIEW_MUTATE);
    assert_null(td_json_path(out, "response.warnings"));
    assert_null(td_json_path(out, "response.auditAnnotations"));
    json_decref(out);

    /* no warning on a pod enforce denies (EvaluatePod), the audit stays */
    out = review(c,
                 "{\"metadata\":{\"namespace\":\"warned\"},\"spec\":{\"hostIPC\":true,"
                 "\"containers\":[{\"name\":\"c\"}]}}",
                 TD_REVIEW_VALIDATE);
    assert_false(json_is_true(td_json_path(out, "response.allowed")));
    assert_null(td_json_path(out, "response.warnings"));
    assert_non_null(strstr(audit(out, "pod-security.kubernetes.io/audit-violations"),
                           "\"restricted:v1.22\": host namespaces (hostIPC=true)"));
    json_decref(out);

    /* no warn label: warn follows enforce, version and all, so a pod that
     * passes enforce gets no warning; audit restricted:latest */
    out = review(c, PLAIN_POD("follows"), TD_REVIEW_VALIDATE);
    assert_null(td_json_path(out, "response.warnings"));
    assert_non_null(strstr(audit(out, "pod-security.kubernetes.io/audit-violations"),
                           "would violate PodSecurity \"restricted:latest\": "));
    json_decref(out);

    /* warn alone, at its version: baseline v1.33 has no probe host check,
     * v1.34 has (check_hostProbesAndhostLifecycle.go) */
    const char *probe = "{\"metadata\":{\"namespace\":\"warnonly\"},\"spec\":{\"hostNetwork\":true,"
                        "\"containers\":[{\"name\":\"c\",\"livenessProbe\":{\"httpGet\":"
                        "{\"host\":\"10.0.0.1\",\"port\":80}}}]}}";
    out = review(c, probe, TD_REVIEW_VALIDATE);
    assert_true(json_is_true(td_json_path(out, "response.allowed")));
    assert_string_equal(warning(out, 0), "would violate PodSecurity \"baseline:v1.33\": "
                                         "host namespaces (hostNetwork=true)");
    json_decref(out);

    /* labels that do not parse: the enforce version is latest, warn fails
     * open to privileged, and the audit annotation says why */
    out = review(c, PLAIN_POD("typo"), TD_REVIEW_VALIDATE);
    assert_true(json_is_true(td_json_path(out, "response.allowed")));
    assert_null(td_json_path(out, "response.warnings"));
    assert_string_equal(audit(out, "pod-security.kubernetes.io/error"),
                        "Failed to parse policy: [metadata.labels[pod-security.kubernetes.io/"
                        "enforce-version]: Invalid value: \"v1.x\": must be \"latest\" or \"v1.x\", "
                        "metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: "
                        "\"strict\": must be one of privileged, baseline, restricted]");
    json_decref(out);

    /* a namespace with enforce alone says nothing more */
    out = review(c, ROOT_POD("pinned"), TD_REVIEW_VALIDATE);
    assert_true(json_is_true(td_json_path(out, "response.allowed")));
    assert_null(td_json_path(out, "response.warnings"));
    assert_null(td_json_path(out, "response.auditAnnotations"));
    json_decref(out);
    td_config_unref(c);
}

/* admission.go ValidatePodController: a workload is never denied; its pod
 * template earns the warn and audit modes (warn following enforce when
 * unlabelled), wherever the kind keeps the template. */
static void test_workloads(void **state)
{
    (void)state;
    td_config *c = load();
    static const char *const objs[] = {
        ("{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"d\","
        "\"namespace\":\"latest\"},\"spec\":{\"template\":{\"spec\":{\"containers\":"
        "[{\"name\":\"c\"}]}}}}"),
        ("{\"apiVersion\":\"batch/v1\",\"kind\":\"CronJob\",\"metadata\":{\"name\":\"cj\","
        "\"namespace\":\"latest\"},\"spec\":{\"jobTemplate\":{\"spec\":{\"template\":{\"spec\":"
        "{\"containers\":[{\"name\":\"c\"}]}}}}}}"),
        ("{\"apiVersion\":\"v1\",\"kind\":\"PodTemplate\",\"metadata\":{\"name\":\"t\","
        "\"namespace\":\"latest\"},\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}"),
    };
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) {
        json_t *out = review(c, objs[i], TD_REVIEW_VALIDATE);
        assert_true(json_is_true(td_json_path(out, "response.allowed")));
        const char *w = warning(out, 0);
        if (!w || !strstr(w, "would violate PodSecurity \"restricted:latest\": "
                             "allowPrivilegeEscalation != false (container \"c\" must set"))
            fail_msg("workload %zu: warning %s", i, w ? w : "(none)");
        json_decref(out);
    }

    /* the same in an AdmissionReview, by request.kind; a template that
     * passes (a volume without a source defaulted as for a pod) says
     * nothing; a namespace pinned to v1.22 warns at v1.22 */
    char req[4096];
    snprintf(req, sizeof req,
             "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":"
             "{\"uid\":\"u\",\"kind\":{\"group\":\"apps\",\"version\":\"v1\",\"kind\":\"StatefulSet\"},"
             "\"namespace\":\"pinned\",\"operation\":\"CREATE\",\"object\":{\"spec\":{\"template\":"
             "{\"spec\":{\"hostPID\":true,\"containers\":[{\"name\":\"c\"}]}}}}}}");
    json_t *in = json_loads(req, 0, NULL), *out = NULL;
    int code = 0;
    assert_int_equal(td_admission_review(c, in, TD_REVIEW_VALIDATE, NULL, &out, &code), TD_OK);
    assert_int_equal(code, 200);
    assert_true(json_is_true(td_json_path(out, "response.allowed")));
    assert_non_null(strstr(warning(out, 0), "would violate PodSecurity \"restricted:v1.22\": "
                                            "host namespaces (hostPID=true)"));
    json_decref(out);
    json_decref(in);

    char good[2048];
    snprintf(good, sizeof good,
             "{\"kind\":\"Job\",\"metadata\":{\"namespace\":\"latest\"},\"spec\":{\"template\":%s}}",
             VOL_POD("latest", "[{\"name\":\"v\"}]"));
    out = review(c, good, TD_REVIEW_VALIDATE);
    assert_true(json_is_true(td_json_path(out, "response.allowed")));
    assert_null(td_json_path(out, "response.warnings"));
    json_decref(out);

    /* no template: nothing to check */
    out = review(c, "{\"kind\":\"Deployment\",\"metadata\":{\"namespace\":\"latest\"},\"spec\":{}}",
                 TD_REVIEW_VALIDATE);
    assert_true(json_is_true(td_json_path(out, "response.allowed")));
    assert_null(td_json_path(out, "response.warnings"));
    json_decref(out);

    /* tenantd's own rules on the template's pods: a warning, not a denial */
    out = review(c,
                 "{\"kind\":\"Deployment\",\"metadata\":{\"namespace\":\"unlabelled\"},\"spec\":"
                 "{\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}}",
                 TD_REVIEW_VALIDATE);
    assert_true(json_is_true(td_json_path(out, "response.allowed")));
    assert_string_equal(warning(out, 0),
                        "tenantd: its pods would be denied by CostLabels: missing required cost "
                        "label \"team\" (required: team, project, environment): set it on the "
                        "pod, or on namespace \"unlabelled\" so that pods inherit it");
    json_decref(out);
    /* the template's own labels satisfy it */
    out = review(c,
                 "{\"kind\":\"Deployment\",\"metadata\":{\"namespace\":\"unlabelled\"},\"spec\":"
                 "{\"template\":{\"metadata\":{\"labels\":{\"team\":\"t\",\"project\":\"p\","
                 "\"environment\":\"e\"}},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}}",
                 TD_REVIEW_VALIDATE);
    assert_true(json_is_true(td_json_path(out, "response.allowed")));
    assert_null(td_json_path(out, "response.warnings"));
    json_decref(out);

    /* a kind that is neither: named as itself */
    out = review(c, "{\"kind\":\"Service\",\"metadata\":{\"namespace\":\"latest\"},\"spec\":{}}",
                 TD_REVIEW_VALIDATE);
    assert_false(json_is_true(td_json_path(out, "response.allowed")));
    assert_non_null(strstr(td_json_str(out, "response.status.message"),
                           "kind Service is not a Pod; "));
    json_decref(out);

    /* td_admit_pod given a Deployment says so, not "spec.containers is required" */
    td_admit_result r;
    json_t *d = json_loads(objs[0], 0, NULL);
    assert_int_equal(td_admit_pod(c, d, NULL, NULL, &r), TD_EINVAL);
    assert_int_equal(r.code, 400);
    assert_non_null(strstr(r.message, "kind Deployment is not a Pod; "));
    td_admit_result_fini(&r);
    json_decref(d);
    td_config_unref(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_warn_and_audit),
        cmocka_unit_test(test_workloads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
