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
#include "admission/apparmor_internal.h"

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

    /* kube-apiserver's pod create copies AppArmor fields and annotations
     * into each other before Pod Security (apparmor.c): a bare pod is
     * worded with both, as on a cluster */
    {"bare pod: an Unconfined field is worded with the annotation it gets",
     "{\"metadata\":{\"name\":\"x\",\"namespace\":\"unlabelled\"},\"spec\":{\"containers\":"
     "[{\"name\":\"c\",\"securityContext\":{\"appArmorProfile\":{\"type\":\"Unconfined\"}}}]}}",
     403, "PodSecurity",
     "forbidden AppArmor profiles (container \"c\" and annotation must not set AppArmor profile "
     "type to \"Unconfined\", \"container.apparmor.security.beta.kubernetes.io/c=\"unconfined\"\")",
     NULL},
    {"bare pod: an unconfined annotation is worded with the field it gets",
     "{\"metadata\":{\"name\":\"x\",\"namespace\":\"unlabelled\",\"annotations\":{"
     "\"container.apparmor.security.beta.kubernetes.io/c\":\"unconfined\"}},\"spec\":"
     "{\"containers\":[{\"name\":\"c\"}]}}",
     403, "PodSecurity",
     "forbidden AppArmor profiles (container \"c\" and annotation must not set AppArmor profile "
     "type to \"Unconfined\", \"container.apparmor.security.beta.kubernetes.io/c=\"unconfined\"\")",
     NULL},
    {"bare pod: a runtime/default annotation becomes the container's field",
     "{\"metadata\":{\"name\":\"x\",\"namespace\":\"warnonly\",\"annotations\":{"
     "\"container.apparmor.security.beta.kubernetes.io/c\":\"runtime/default\"}},\"spec\":"
     "{\"containers\":[{\"name\":\"c\"}]}}",
     200, NULL, NULL,
     "{\"spec\":{\"containers\":[{\"name\":\"c\",\"securityContext\":{\"appArmorProfile\":"
     "{\"type\":\"RuntimeDefault\"}}}]}}"},

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

/* ---- the API server's AppArmor version skew (apparmor.c) ---- */

#define AA "container.apparmor.security.beta.kubernetes.io/"
#define UNCONF "{\"type\":\"Unconfined\"}"
#define RTDEF "{\"type\":\"RuntimeDefault\"}"
#define LOCAL(p) "{\"type\":\"Localhost\",\"localhostProfile\":\"" p "\"}"
#define PSC(prof) "\"securityContext\":{\"appArmorProfile\":" prof "}"
#define ANN(kvs) "\"metadata\":{\"annotations\":{" kvs "}}"

typedef struct {
    const char *name;
    const char *pod;  /* in */
    const char *want; /* the whole pod after the skew */
} skew_case;

/* Ported from kubernetes pkg/registry/core/pod/strategy_test.go
 * TestApplyAppArmorVersionSkew, one row per upstream case (its
 * assertions as the whole pod after), and a few of our own at the end. */
static const skew_case skew_rows[] = {
    {"Security context nil",
     "{\"spec\":{\"initContainers\":[{\"name\":\"init\"}],\"containers\":[{\"name\":\"ctr\"}]}}",
     "{\"spec\":{\"initContainers\":[{\"name\":\"init\"}],\"containers\":[{\"name\":\"ctr\"}]}}"},
    {"Security context not nil",
     "{\"spec\":{\"securityContext\":{},\"initContainers\":[{\"name\":\"init\"}],"
     "\"containers\":[{\"name\":\"ctr\"}]}}",
     "{\"spec\":{\"securityContext\":{},\"initContainers\":[{\"name\":\"init\"}],"
     "\"containers\":[{\"name\":\"ctr\"}]}}"},
    {"Pod field unconfined and no annotation present",
     "{\"spec\":{" PSC(UNCONF) ",\"initContainers\":[{\"name\":\"init\"}],"
     "\"containers\":[{\"name\":\"ctr\"}]}}",
     "{" ANN("\"" AA "init\":\"unconfined\",\"" AA "ctr\":\"unconfined\"") ",\"spec\":{" PSC(
         UNCONF) ",\"initContainers\":[{\"name\":\"init\"}],\"containers\":[{\"name\":\"ctr\"}]}}"},
    {"Pod field default and no annotation present",
     "{\"spec\":{" PSC(RTDEF) ",\"initContainers\":[{\"name\":\"init\"}],"
     "\"containers\":[{\"name\":\"ctr\"}]}}",
     "{" ANN("\"" AA "init\":\"runtime/default\",\"" AA "ctr\":\"runtime/default\"") ",\"spec\":{" PSC(
         RTDEF) ",\"initContainers\":[{\"name\":\"init\"}],\"containers\":[{\"name\":\"ctr\"}]}}"},
    {"Pod field localhost and no annotation present",
     "{\"spec\":{" PSC(LOCAL("test")) ",\"initContainers\":[{\"name\":\"init\"}],"
     "\"containers\":[{\"name\":\"ctr\"}]}}",
     "{" ANN("\"" AA "init\":\"localhost/test\",\"" AA "ctr\":\"localhost/test\"") ",\"spec\":{" PSC(
         LOCAL("test")) ",\"initContainers\":[{\"name\":\"init\"}],\"containers\":[{\"name\":\"ctr\"}]}}"},
    {"Pod field localhost but profile is nil",
     "{\"spec\":{" PSC("{\"type\":\"Localhost\"}") ",\"initContainers\":[{\"name\":\"init\"}],"
     "\"containers\":[{\"name\":\"ctr\"}]}}",
     "{\"spec\":{" PSC("{\"type\":\"Localhost\"}") ",\"initContainers\":[{\"name\":\"init\"}],"
     "\"containers\":[{\"name\":\"ctr\"}]}}"},
    {"Container security context not nil",
     "{\"spec\":{\"containers\":[{\"name\":\"ctr\",\"securityContext\":{}}]}}",
     "{\"spec\":{\"containers\":[{\"name\":\"ctr\",\"securityContext\":{}}]}}"},
    {"Container field RuntimeDefault and no annotation present",
     "{\"spec\":{\"containers\":[{\"name\":\"ctr\"," PSC(RTDEF) "}]}}",
     "{" ANN("\"" AA "ctr\":\"runtime/default\"") ",\"spec\":{\"containers\":[{\"name\":\"ctr\"," PSC(
         RTDEF) "}]}}"},
    {"Container field localhost and no annotation present",
     "{\"spec\":{\"containers\":[{\"name\":\"ctr\"," PSC(LOCAL("test")) "}]}}",
     "{" ANN("\"" AA "ctr\":\"localhost/test\"") ",\"spec\":{\"containers\":[{\"name\":\"ctr\"," PSC(
         LOCAL("test")) "}]}}"},
    {"Container overrides pod profile",
     "{\"spec\":{" PSC(RTDEF) ",\"containers\":[{\"name\":\"ctr\"," PSC(UNCONF) "}]}}",
     "{" ANN("\"" AA "ctr\":\"unconfined\"") ",\"spec\":{" PSC(
         RTDEF) ",\"containers\":[{\"name\":\"ctr\"," PSC(UNCONF) "}]}}"},
    {"Multiple containers with fields (container)",
     "{\"spec\":{\"initContainers\":[{\"name\":\"init\"," PSC(LOCAL("test")) "}],"
     "\"containers\":[{\"name\":\"a\"," PSC(UNCONF) "},{\"name\":\"b\"},{\"name\":\"c\"," PSC(
         RTDEF) "}]}}",
     "{" ANN("\"" AA "init\":\"localhost/test\",\"" AA "a\":\"unconfined\",\"" AA
             "c\":\"runtime/default\"") ",\"spec\":{\"initContainers\":[{\"name\":\"init\"," PSC(
         LOCAL("test")) "}],\"containers\":[{\"name\":\"a\"," PSC(UNCONF) "},{\"name\":\"b\"},"
                        "{\"name\":\"c\"," PSC(RTDEF) "}]}}"},
    {"Annotation 'unconfined' and no fields present",
     "{" ANN("\"" AA "ctr\":\"unconfined\"") ",\"spec\":{\"containers\":[{\"name\":\"ctr\"}]}}",
     "{" ANN("\"" AA "ctr\":\"unconfined\"") ",\"spec\":{\"containers\":[{\"name\":\"ctr\"," PSC(
         UNCONF) "}]}}"},
    {"Annotation for non-existent container",
     "{" ANN("\"" AA "foo-bar\":\"unconfined\"") ",\"spec\":{\"containers\":[{\"name\":\"ctr\"}]}}",
     "{" ANN("\"" AA "foo-bar\":\"unconfined\"") ",\"spec\":{\"containers\":[{\"name\":\"ctr\"}]}}"},
    {"Annotation 'runtime/default' and no fields present",
     "{" ANN("\"" AA "ctr\":\"runtime/default\"") ",\"spec\":{" PSC(
         UNCONF) ",\"containers\":[{\"name\":\"ctr\",\"securityContext\":{}}]}}",
     "{" ANN("\"" AA "ctr\":\"runtime/default\"") ",\"spec\":{" PSC(
         UNCONF) ",\"containers\":[{\"name\":\"ctr\"," PSC(RTDEF) "}]}}"},
    {"Multiple containers by annotations",
     "{" ANN("\"" AA "init\":\"unconfined\",\"" AA "a\":\"localhost/test\",\"" AA
             "c\":\"runtime/default\"") ",\"spec\":{" PSC(
         RTDEF) ",\"initContainers\":[{\"name\":\"init\"}],\"containers\":[{\"name\":\"a\"},"
                "{\"name\":\"b\"},{\"name\":\"c\"}]}}",
     "{" ANN("\"" AA "init\":\"unconfined\",\"" AA "a\":\"localhost/test\",\"" AA
             "c\":\"runtime/default\",\"" AA "b\":\"runtime/default\"") ",\"spec\":{" PSC(
         RTDEF) ",\"initContainers\":[{\"name\":\"init\"," PSC(UNCONF) "}],\"containers\":[{"
                "\"name\":\"a\"," PSC(LOCAL("test")) "},{\"name\":\"b\"},{\"name\":\"c\"}]}}"},
    {"Conflicting field and annotations",
     "{" ANN("\"" AA "ctr\":\"localhost/test\"") ",\"spec\":{\"containers\":[{\"name\":\"ctr\"," PSC(
         RTDEF) "}]}}",
     "{" ANN("\"" AA "ctr\":\"localhost/test\"") ",\"spec\":{\"containers\":[{\"name\":\"ctr\"," PSC(
         RTDEF) "}]}}"},
    {"Pod field and matching annotations",
     "{" ANN("\"" AA "ctr\":\"runtime/default\"") ",\"spec\":{" PSC(
         RTDEF) ",\"containers\":[{\"name\":\"ctr\"}]}}",
     "{" ANN("\"" AA "ctr\":\"runtime/default\"") ",\"spec\":{" PSC(
         RTDEF) ",\"containers\":[{\"name\":\"ctr\"}]}}"},
    {"Annotation overrides pod field",
     "{" ANN("\"" AA "ctr\":\"unconfined\"") ",\"spec\":{" PSC(
         RTDEF) ",\"containers\":[{\"name\":\"ctr\"}]}}",
     "{" ANN("\"" AA "ctr\":\"unconfined\"") ",\"spec\":{" PSC(
         RTDEF) ",\"containers\":[{\"name\":\"ctr\"," PSC(UNCONF) "}]}}"},
    {"Mixed annotations and fields",
     "{" ANN("\"" AA "unconf-annot\":\"unconfined\"") ",\"spec\":{" PSC(
         RTDEF) ",\"containers\":[{\"name\":\"unconf-annot\"},{\"name\":\"unconf-field\"," PSC(
         UNCONF) "},{\"name\":\"default-pod\"}]}}",
     "{" ANN("\"" AA "unconf-annot\":\"unconfined\",\"" AA "unconf-field\":\"unconfined\",\"" AA
             "default-pod\":\"runtime/default\"") ",\"spec\":{" PSC(
         RTDEF) ",\"containers\":[{\"name\":\"unconf-annot\"," PSC(
         UNCONF) "},{\"name\":\"unconf-field\"," PSC(UNCONF) "},{\"name\":\"default-pod\"}]}}"},
    {"Invalid annotation value",
     "{" ANN("\"" AA "ctr\":\"localhost/\"") ",\"spec\":{\"containers\":[{\"name\":\"ctr\"}]}}",
     "{" ANN("\"" AA "ctr\":\"localhost/\"") ",\"spec\":{\"containers\":[{\"name\":\"ctr\"}]}}"},
    /* "Invalid localhost annotation" (a 4096-byte profile) is test_apparmor_skew_long */
    {"Invalid field type",
     "{\"spec\":{" PSC("{\"type\":\"invalid-type\"}") ",\"containers\":[{\"name\":\"ctr\"}]}}",
     "{\"spec\":{" PSC("{\"type\":\"invalid-type\"}") ",\"containers\":[{\"name\":\"ctr\"}]}}"},
    {"Ignore annotations on windows",
     "{" ANN("\"" AA "ctr\":\"runtime/default\"") ",\"spec\":{\"os\":{\"name\":\"windows\"},"
                                                 "\"containers\":[{\"name\":\"ctr\"}]}}",
     "{" ANN("\"" AA "ctr\":\"runtime/default\"") ",\"spec\":{\"os\":{\"name\":\"windows\"},"
                                                 "\"containers\":[{\"name\":\"ctr\"}]}}"},
    /* ours: the API server's validation refuses a padded profile, so it is not copied */
    {"a localhost annotation padded with whitespace is not copied",
     "{" ANN("\"" AA "ctr\":\"localhost/ x\"") ",\"spec\":{\"containers\":[{\"name\":\"ctr\"}]}}",
     "{" ANN("\"" AA "ctr\":\"localhost/ x\"") ",\"spec\":{\"containers\":[{\"name\":\"ctr\"}]}}"},
    {"an unknown annotation value is not copied",
     "{" ANN("\"" AA "ctr\":\"bogus\"") ",\"spec\":{\"containers\":[{\"name\":\"ctr\"}]}}",
     "{" ANN("\"" AA "ctr\":\"bogus\"") ",\"spec\":{\"containers\":[{\"name\":\"ctr\"}]}}"},
    {"an ephemeral container is visited too",
     "{\"spec\":{\"containers\":[{\"name\":\"c\"}],\"ephemeralContainers\":[{\"name\":\"e\"," PSC(
         UNCONF) "}]}}",
     "{" ANN("\"" AA "e\":\"unconfined\"") ",\"spec\":{\"containers\":[{\"name\":\"c\"}],"
                                          "\"ephemeralContainers\":[{\"name\":\"e\"," PSC(UNCONF) "}]}}"},
    {"no metadata, no spec: nothing to do", "{}", "{}"},
    {"containers not a list, metadata not a map: left alone",
     "{\"metadata\":[],\"spec\":{" PSC(RTDEF) ",\"containers\":{\"name\":\"c\"}}}",
     "{\"metadata\":[],\"spec\":{" PSC(RTDEF) ",\"containers\":{\"name\":\"c\"}}}"},
};

static void test_apparmor_skew(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof skew_rows / sizeof skew_rows[0]; i++) {
        const skew_case *t = &skew_rows[i];
        json_t *pod = json_loads(t->pod, 0, NULL), *want = json_loads(t->want, 0, NULL);
        if (!pod || !want)
            fail_msg("%s: bad JSON in the test", t->name);
        td_err err;
        assert_int_equal(td__pod_apparmor_skew(pod, &err), TD_OK);
        if (!json_equal(pod, want)) {
            char *s = json_dumps(pod, JSON_COMPACT);
            fail_msg("%s: got %s", t->name, s);
        }
        json_decref(pod);
        json_decref(want);
    }
}

/* upstream's "Invalid localhost annotation": a profile over 4095 bytes is
 * not copied; 4095 is */
static void test_apparmor_skew_long(void **state)
{
    (void)state;
    for (size_t len = 4095; len <= 4096; len++) {
        char *v = malloc(len + sizeof "localhost/");
        assert_non_null(v);
        memcpy(v, "localhost/", 10);
        memset(v + 10, 'a', len);
        v[10 + len] = '\0';
        json_t *pod = json_pack("{s:{s:{s:s}}, s:{s:[{s:s}]}}", "metadata", "annotations",
                                AA "ctr", v, "spec", "containers", "name", "ctr");
        assert_non_null(pod);
        td_err err;
        assert_int_equal(td__pod_apparmor_skew(pod, &err), TD_OK);
        const json_t *c = json_array_get(td_json_path(pod, "spec.containers"), 0);
        const json_t *f = td_json_path(c, "securityContext.appArmorProfile");
        if (len == 4095)
            assert_int_equal(strlen(td_json_str(f, "localhostProfile")), 4095);
        else
            assert_null(json_object_get(c, "securityContext"));
        json_decref(pod);
        free(v);
    }
}

/* A pod in an AdmissionReview comes from the API server, which did the
 * AppArmor version skew already: it is judged as sent, not skewed again
 * (what reaches a webhook has both; this one, hand-made, has one). */
static void test_apparmor_review_as_sent(void **state)
{
    (void)state;
    td_config *c = load();
    json_t *out = review(c,
                         "{\"metadata\":{\"name\":\"x\",\"namespace\":\"unlabelled\","
                         "\"annotations\":{\"container.apparmor.security.beta.kubernetes.io/c\":"
                         "\"unconfined\"}},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}",
                         TD_REVIEW_VALIDATE);
    assert_false(json_is_true(td_json_path(out, "response.allowed")));
    assert_string_equal(td_json_str(out, "response.status.message"),
                        "violates PodSecurity \"baseline:latest\": "
                        "forbidden AppArmor profile (annotation must not set AppArmor profile "
                        "type to \"container.apparmor.security.beta.kubernetes.io/c="
                        "\"unconfined\"\")");
    json_decref(out);
    td_config_unref(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_warn_and_audit),
        cmocka_unit_test(test_workloads),
        cmocka_unit_test(test_apparmor_skew),
        cmocka_unit_test(test_apparmor_skew_long),
        cmocka_unit_test(test_apparmor_review_as_sent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
