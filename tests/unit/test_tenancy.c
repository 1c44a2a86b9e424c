/* test_tenancy.c - isolation tiers: per admission rule an allowed and a
 * denied case (sandbox runtime, dedicated pools, storage prefix, storage
 * classes), the URI arithmetic with its prefix tricks, and the config
 * checks that reject a bad tier setup whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "kinds/builtin.h"
#include "admission/admit.h"
#include "core/jsonpatch.h"
#include "admission/tenancy_internal.h"

#include "testutil.h"
#include "core/kind.h"

#define NS(name, extra)                                                                            \
    "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " name "\n"                               \
    "  labels: {team: x, project: p, environment: prod" extra "}\n---\n"

static const char platform[] =
    NS("team-a-prod", "") NS("cust-prod", ", pod-security.kubernetes.io/enforce: restricted")
    NS("orphan", "")
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: team-a}\n"
    "spec: {namespaces: [team-a-prod], storage: {bucket: ml-data, prefix: team-a/}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: cust}\n"
    "spec:\n  namespaces: [cust-prod]\n  tenancy: customer\n"
    "  storage: {bucket: ml-data, prefix: customers/cust/, storageClasses: [encrypted-ssd],\n"
    "            identity: {gcpServiceAccount: cust@proj.iam.gserviceaccount.com}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: NodePool\nmetadata: {name: shared}\n"
    "spec: {taint: {key: gpu, value: shared, effect: NoSchedule}, nodeSelector: {pool: shared},"
    " tenants: [\"*\"]}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: NodePool\nmetadata: {name: cust-dedicated}\n"
    "spec: {taint: {key: tenantd.dev/tenant, value: cust, effect: NoSchedule},"
    " nodeSelector: {tenantd.dev/tenant: cust}, tenants: [cust]}\n---\n"
    "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: gvisor}\nhandler: runsc\n"
    "scheduling: {nodeSelector: {sandbox: gvisor}}\n";

static td_config *load_text(const char *text, td_err *err, td_status *st)
{
    td_config *c = NULL;
    *st = td_config_load_text("p.yaml", text, strlen(text), &c, err);
    return c;
}

static td_config *load(void)
{
    td_err err;
    td_status st;
    td_config *c = load_text(platform, &err, &st);
    if (!c)
        fail_msg("platform: %s", err.msg);
    return c;
}

/* A container that meets PSS restricted (the customer namespace's level). */
#define CSC "\"securityContext\":{\"allowPrivilegeEscalation\":false,\"capabilities\":{\"drop\":[\"ALL\"]}}"
#define POD(ns, meta, spec)                                                                        \
    "{\"metadata\":{\"namespace\":\"" ns "\"" meta "},\"spec\":{" spec                             \
    "\"containers\":[{\"name\":\"c\"," CSC "}]}}"
#define GPU_POD(ns, spec)                                                                          \
    "{\"metadata\":{\"namespace\":\"" ns "\"},\"spec\":{" spec "\"containers\":[{\"name\":\"c\","  \
    CSC ",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}"
#define ENV_POD(ns, uri)                                                                           \
    "{\"metadata\":{\"namespace\":\"" ns "\"},\"spec\":{\"containers\":[{\"name\":\"train\","      \
    "\"env\":[{\"name\":\"DATA_URI\",\"value\":\"" uri "\"}]}]}}"
#define ANN_POD(ns, uri) POD(ns, ",\"annotations\":{\"tenantd.dev/data-uri\":\"" uri "\"}", "")
#define RESTRICTED "\"securityContext\":{\"runAsNonRoot\":true,\"seccompProfile\":{\"type\":\"RuntimeDefault\"}},"

static const admit_case rows[] = {
    /* Sandbox */
    {"team pod: no runtime class forced", POD("team-a-prod", "", ""), 200, NULL, NULL, NULL},
    {"customer pod: gvisor set, with its scheduling", POD("cust-prod", "", RESTRICTED), 200, NULL,
     NULL, "{\"spec\":{\"runtimeClassName\":\"gvisor\",\"nodeSelector\":{\"sandbox\":\"gvisor\"}}}"},
    {"customer pod naming gvisor itself", POD("cust-prod", "", RESTRICTED "\"runtimeClassName\":\"gvisor\","),
     200, NULL, NULL, "{\"spec\":{\"runtimeClassName\":\"gvisor\"}}"},
    {"customer pod with runc denied", POD("cust-prod", "", RESTRICTED "\"runtimeClassName\":\"runc\","),
     403, "Sandbox",
     "spec.runtimeClassName \"runc\" is not allowed: namespace cust-prod belongs to customer "
     "tenant \"cust\", so the pod must run in the sandbox RuntimeClass \"gvisor\"", NULL},
    {"team notebook: sandboxed", POD("team-a-prod", ",\"labels\":{\"tenantd.dev/workload\":\"notebook\"}", ""),
     200, NULL, NULL, "{\"spec\":{\"runtimeClassName\":\"gvisor\"}}"},
    {"team notebook escaping the sandbox denied",
     POD("team-a-prod", ",\"labels\":{\"tenantd.dev/workload\":\"notebook\"}", "\"runtimeClassName\":\"nvidia\","),
     403, "Sandbox", "labelled tenantd.dev/workload=notebook, an untrusted workload", NULL},
    {"team trainer keeps its runtime class",
     POD("team-a-prod", ",\"labels\":{\"tenantd.dev/workload\":\"training\"}", "\"runtimeClassName\":\"nvidia\","),
     200, NULL, NULL, "{\"spec\":{\"runtimeClassName\":\"nvidia\"}}"},
    /* Dedicated pools */
    {"team gpu pod: shared pool", GPU_POD("team-a-prod", ""), 200, NULL, NULL,
     "{\"spec\":{\"nodeSelector\":{\"pool\":\"shared\"}}}"},
    {"customer gpu pod: its dedicated pool only", GPU_POD("cust-prod", RESTRICTED), 200, NULL, NULL,
     "{\"spec\":{\"nodeSelector\":{\"tenantd.dev/tenant\":\"cust\",\"sandbox\":\"gvisor\"},"
     "\"tolerations\":[{\"key\":\"tenantd.dev/tenant\",\"operator\":\"Equal\",\"value\":\"cust\","
     "\"effect\":\"NoSchedule\"}]}}"},
    {"customer gpu pod selecting the shared pool denied",
     GPU_POD("cust-prod", RESTRICTED "\"nodeSelector\":{\"pool\":\"shared\"},"), 403, "NodePool",
     "selects NodePool \"shared\", which is shared with other tenants; customer tenant \"cust\" "
     "may only use NodePools dedicated to it", NULL},
    {"customer pod tolerating the shared pool denied",
     POD("cust-prod", "", RESTRICTED "\"tolerations\":[{\"key\":\"gpu\",\"operator\":\"Exists\"}],"),
     403, "NodePool", "tolerates the taint of NodePool \"shared\"", NULL},
    {"team pod tolerating the customer's pool denied",
     POD("team-a-prod", "", "\"tolerations\":[{\"key\":\"tenantd.dev/tenant\",\"operator\":\"Exists\"}],"),
     403, "NodePool", "NodePool \"cust-dedicated\", which tenant \"team-a\" may not use", NULL},
    /* Storage prefix */
    {"data-uri inside the prefix", ANN_POD("team-a-prod", "s3://ml-data/team-a/datasets/x"), 200,
     NULL, NULL, NULL},
    {"data-uri naming the prefix itself", ANN_POD("team-a-prod", "gs://ml-data/team-a"), 200, NULL,
     NULL, NULL},
    {"data-uri: sibling prefix trick", ANN_POD("team-a-prod", "s3://ml-data/team-a-evil/x"), 403,
     "Storage", "\"s3://ml-data/team-a-evil/x\" lies outside tenant \"team-a\"'s storage "
     "s3://ml-data/team-a/", NULL},
    {"data-uri: dot-dot escape", ANN_POD("team-a-prod", "s3://ml-data/team-a/../customers/cust/"),
     403, "Storage", "\"..\" segments are not accepted", NULL},
    {"data-uri: encoded dot-dot", ANN_POD("team-a-prod", "s3://ml-data/team-a/%2e%2e/customers/"),
     403, "Storage", "\"..\" segments are not accepted", NULL},
    {"data-uri: other bucket", ANN_POD("team-a-prod", "s3://ml-data-2/team-a/x"), 403, "Storage",
     "lies outside", NULL},
    {"data-uri: userinfo in the bucket", ANN_POD("team-a-prod", "s3://ml-data@evil/team-a/x"), 403,
     "Storage", "is not a bucket name", NULL},
    {"data-uri: not an object store", ANN_POD("team-a-prod", "file:///etc/passwd"), 403, "Storage",
     "is not an object-store URI", NULL},
    {"team env DATA_URI inside", ENV_POD("team-a-prod", "s3://ml-data/team-a/run1"), 200, NULL,
     NULL, NULL},
    {"team env DATA_URI in the customer's prefix denied",
     ENV_POD("team-a-prod", "s3://ml-data/customers/cust/run1"), 403, "Storage",
     "env DATA_URI of container \"train\": \"s3://ml-data/customers/cust/run1\" lies outside "
     "tenant \"team-a\"'s storage s3://ml-data/team-a/", NULL},
    {"env DATA_URI of the customer in the team's prefix denied",
     "{\"metadata\":{\"namespace\":\"cust-prod\"},\"spec\":{" RESTRICTED "\"containers\":[{\"name\":"
     "\"train\"," CSC ",\"env\":[{\"name\":\"DATA_URI\",\"value\":\"s3://ml-data/team-a/x\"}]}]}}",
     403, "Storage", "env DATA_URI of container \"train\": \"s3://ml-data/team-a/x\" lies outside "
     "tenant \"cust\"'s storage", NULL},
    {"env DATA_URI of the customer inside its prefix",
     "{\"metadata\":{\"namespace\":\"cust-prod\"},\"spec\":{" RESTRICTED "\"containers\":[{\"name\":"
     "\"train\"," CSC ",\"env\":[{\"name\":\"DATA_URI\",\"value\":\"s3://ml-data/customers/cust/x\"}]}]}}",
     200, NULL, NULL, NULL},
    {"tenant-less namespace reading a tenant's prefix denied",
     ANN_POD("orphan", "s3://ml-data/customers/cust/secret"), 403, "Storage",
     "lies in tenant \"cust\"'s storage", NULL},
    {"tenant-less namespace, unowned location", ANN_POD("orphan", "s3://public-data/x"), 200, NULL,
     NULL, NULL},
    /* Storage classes of generic ephemeral volumes */
    {"ephemeral volume of an allowed class",
     "{\"metadata\":{\"namespace\":\"cust-prod\"},\"spec\":{" RESTRICTED "\"volumes\":[{\"name\":\"scratch\","
     "\"ephemeral\":{\"volumeClaimTemplate\":{\"spec\":{\"storageClassName\":\"encrypted-ssd\"}}}}],"
     "\"containers\":[{\"name\":\"c\"," CSC "}]}}",
     200, NULL, NULL, NULL},
    {"ephemeral volume of another class denied",
     "{\"metadata\":{\"namespace\":\"cust-prod\"},\"spec\":{" RESTRICTED "\"volumes\":[{\"name\":\"scratch\","
     "\"ephemeral\":{\"volumeClaimTemplate\":{\"spec\":{\"storageClassName\":\"standard\"}}}}],"
     "\"containers\":[{\"name\":\"c\"," CSC "}]}}",
     403, "Storage", "ephemeral volume \"scratch\" uses StorageClass \"standard\", which tenant "
     "\"cust\" may not use (allowed: encrypted-ssd", NULL},
};

static void test_rules(void **state)
{
    (void)state;
    td_config *c = load();
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        check_admit_case(c, &rows[i]);
    td_config_unref(c);
}

/* The patch of a customer pod is the same bytes every time. */
static void test_patch_deterministic(void **state)
{
    (void)state;
    td_config *c = load();
    json_t *pod = json_loads(GPU_POD("cust-prod", RESTRICTED), 0, NULL);
    char *first = NULL;
    for (int i = 0; i < 3; i++) {
        td_admit_result r;
        assert_int_equal(td_admit_pod(c, pod, NULL, NULL, &r), TD_OK);
        assert_true(r.allowed);
        char *s = json_dumps(r.patch, JSON_COMPACT);
        if (!first)
            first = s;
        else {
            assert_string_equal(first, s);
            free(s);
        }
        td_admit_result_fini(&r);
    }
    assert_non_null(strstr(first, "\"path\":\"/spec/runtimeClassName\",\"value\":\"gvisor\""));
    free(first);
    json_decref(pod);
    td_config_unref(c);
}

static void test_pvc(void **state)
{
    (void)state;
    td_config *c = load();
    static const struct {
        const char *name, *ns, *cls;
        int code;
        const char *msg;
    } pvcs[] = {
        {"customer, allowed class", "cust-prod", "encrypted-ssd", 200, NULL},
        {"customer, other class", "cust-prod", "standard", 403,
         "PersistentVolumeClaim \"data\" uses StorageClass \"standard\""},
        {"customer, no class", "cust-prod", NULL, 403, "sets no storageClassName"},
        {"team without a class list: any", "team-a-prod", "standard", 200, NULL},
    };
    for (size_t i = 0; i < sizeof pvcs / sizeof pvcs[0]; i++) {
        json_t *pvc = json_pack("{s:s, s:{s:s, s:s}, s:{s:[s]}}", "kind", "PersistentVolumeClaim",
                                "metadata", "name", "data", "namespace", pvcs[i].ns, "spec",
                                "accessModes", "ReadWriteOnce");
        if (pvcs[i].cls)
            json_object_set_new(json_object_get(pvc, "spec"), "storageClassName",
                                json_string(pvcs[i].cls));
        /* Through the AdmissionReview envelope, as the webhook gets it. */
        json_t *review = json_pack("{s:s, s:s, s:{s:s, s:{s:s}, s:s, s:s, s:O}}", "apiVersion",
                                   "admission.k8s.io/v1", "kind", "AdmissionReview", "request",
                                   "uid", "u1", "kind", "kind", "PersistentVolumeClaim",
                                   "namespace", pvcs[i].ns, "operation", "CREATE", "object", pvc);
        json_t *out = NULL;
        int code = 0;
        assert_int_equal(td_admission_review(c, review, TD_REVIEW_VALIDATE, NULL, &out, &code),
                         TD_OK);
        if (code != pvcs[i].code)
            fail_msg("%s: code %d, want %d", pvcs[i].name, code, pvcs[i].code);
        const char *msg = td_json_str(out, "response.status.message");
        if (pvcs[i].msg && (!msg || !strstr(msg, pvcs[i].msg)))
            fail_msg("%s: message %s", pvcs[i].name, msg ? msg : "(none)");
        if (pvcs[i].code == 403)
            assert_string_equal(td_json_str(out, "response.status.details.kind"), "Storage");
        json_decref(out);
        json_decref(review);
        json_decref(pvc);
    }
    td_config_unref(c);
}

static void test_uri(void **state)
{
    (void)state;
    static const struct {
        const char *uri, *bucket, *prefix;
        int parses, within;
    } u[] = {
        {"s3://ml-data/team-a/x", "ml-data", "team-a/", 1, 1},
        {"s3a://ml-data/team-a/", "ml-data", "team-a/", 1, 1},
        {"gs://ml-data/team-a", "ml-data", "team-a/", 1, 1},
        {"s3://ml-data/team-a-evil/x", "ml-data", "team-a/", 1, 0},
        {"s3://ml-data/team-ab", "ml-data", "team-a/", 1, 0},
        {"s3://ml-data/team", "ml-data", "team-a/", 1, 0},
        {"s3://ml-data/", "ml-data", "team-a/", 1, 0},
        {"s3://ml-data/anything", "ml-data", "", 1, 1},
        {"s3://ml-data-x/team-a/x", "ml-data", "team-a/", 1, 0},
        {"s3://ml-data/team-a/%41", "ml-data", "team-a/", 1, 1},
        {"s3://ml-data/team-a/../b", "ml-data", "team-a/", 0, 0},
        {"s3://ml-data/team-a/./b", "ml-data", "team-a/", 0, 0},
        {"s3://ml-data/team-a/%2E%2E/b", "ml-data", "team-a/", 0, 0},
        {"s3://ml-data/team-a%2fb", "ml-data", "team-a/", 0, 0},
        {"s3://ml-data/team-a/%zz", "ml-data", "team-a/", 0, 0},
        {"s3://ml-data/team-a\\..\\b", "ml-data", "team-a/", 0, 0},
        {"s3://ML-DATA/team-a/x", "ml-data", "team-a/", 0, 0},
        {"s3://ml-data:443/team-a/x", "ml-data", "team-a/", 0, 0},
        {"http://ml-data/team-a/x", "ml-data", "team-a/", 0, 0},
        {"team-a/x", "ml-data", "team-a/", 0, 0},
        {"", "ml-data", "team-a/", 0, 0},
    };
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++) {
        td_object_uri o;
        td_err err;
        int parses = td_object_uri_parse(u[i].uri, &o, &err) == TD_OK;
        if (parses != u[i].parses)
            fail_msg("%s: parses %d, want %d (%s)", u[i].uri, parses, u[i].parses, err.msg);
        if (parses && td_object_uri_within(&o, u[i].bucket, u[i].prefix) != u[i].within)
            fail_msg("%s: within %s/%s wrong", u[i].uri, u[i].bucket, u[i].prefix);
    }
    static const struct {
        const char *b1, *p1, *b2, *p2;
        int overlap;
    } ov[] = {
        {"b", "team-a/", "b", "team-a/", 1},       {"b", "team-a/", "b", "team-a/sub/", 1},
        {"b", "team-a/", "b", "team-a-evil/", 0},  {"b", "", "b", "team-a/", 1},
        {"b", "team-a/", "c", "team-a/", 0},       {"b", "x/y/", "b", "x/z/", 0},
    };
    for (size_t i = 0; i < sizeof ov / sizeof ov[0]; i++) {
        assert_int_equal(td_storage_overlap(ov[i].b1, ov[i].p1, ov[i].b2, ov[i].p2), ov[i].overlap);
        assert_int_equal(td_storage_overlap(ov[i].b2, ov[i].p2, ov[i].b1, ov[i].p1), ov[i].overlap);
    }
}

#define TENANT(name, spec)                                                                         \
    "---\napiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: " name "}\nspec: " spec "\n"
#define GVISOR "---\napiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: gvisor}\nhandler: runsc\n"

static void test_config_rejects(void **state)
{
    (void)state;
    static const struct {
        const char *name, *yaml, *msg; /* msg NULL: accepted */
    } cases[] = {
        {"customer with gvisor defined", TENANT("c", "{namespaces: [c], tenancy: customer}") GVISOR,
         NULL},
        {"unknown tier", TENANT("c", "{namespaces: [c], tenancy: partner}"),
         "p.yaml:5: Tenant c: spec.tenancy: \"partner\" is not a tier; must be team or customer"},
        {"customer without the sandbox RuntimeClass",
         TENANT("c", "{namespaces: [c], tenancy: customer}"),
         "Tenant c: spec.tenancy: customer pods run in the sandbox RuntimeClass \"gvisor\", which "
         "is not defined"},
        {"configured sandbox class missing",
         TENANT("c", "{namespaces: [c], tenancy: customer}") GVISOR
         "---\napiVersion: tenantd.dev/v1alpha1\nkind: AdmissionPolicy\nmetadata: {name: default}\n"
         "spec: {sandbox: {runtimeClassName: kata}}\n",
         "sandbox RuntimeClass \"kata\", which is not defined"},
        {"team tenants need no RuntimeClass", TENANT("t", "{namespaces: [t]}"), NULL},
        {"RuntimeClass without handler",
         "---\napiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: gvisor}\n",
         "RuntimeClass gvisor: handler: required"},
        {"customer sharing a pool",
         TENANT("c", "{namespaces: [c], tenancy: customer}") GVISOR
         "---\napiVersion: tenantd.dev/v1alpha1\nkind: NodePool\nmetadata: {name: a100}\n"
         "spec: {nodeSelector: {p: a}, tenants: [c, t]}\n",
         "NodePool a100: spec.tenants: customer tenant \"c\" shares this pool with other tenants"},
        {"team tenants may share a pool",
         TENANT("c", "{namespaces: [c]}")
         "---\napiVersion: tenantd.dev/v1alpha1\nkind: NodePool\nmetadata: {name: a100}\n"
         "spec: {nodeSelector: {p: a}, tenants: [c, t]}\n",
         NULL},
        {"overlapping prefixes",
         TENANT("a", "{namespaces: [a], storage: {bucket: ml-data, prefix: team-a/}}")
         TENANT("b", "{namespaces: [b], storage: {bucket: ml-data, prefix: team-a/sub/}}"),
         "spec.storage: ml-data/team-a/sub/ overlaps tenant a's ml-data/team-a/"},
        {"whole bucket overlaps any prefix",
         TENANT("a", "{namespaces: [a], storage: {bucket: ml-data}}")
         TENANT("b", "{namespaces: [b], storage: {bucket: ml-data, prefix: b/}}"),
         "overlaps"},
        {"sibling prefixes are disjoint",
         TENANT("a", "{namespaces: [a], storage: {bucket: ml-data, prefix: team-a/}}")
         TENANT("b", "{namespaces: [b], storage: {bucket: ml-data, prefix: team-a-evil/}}"),
         NULL},
        {"prefix without trailing slash",
         TENANT("a", "{namespaces: [a], storage: {bucket: ml-data, prefix: team-a}}"),
         "spec.storage.prefix: \"team-a\" must end with '/'"},
        {"prefix with dot-dot",
         TENANT("a", "{namespaces: [a], storage: {bucket: ml-data, prefix: x/../}}"),
         "must not hold \".\" or \"..\" segments"},
        {"bucket with scheme",
         TENANT("a", "{namespaces: [a], storage: {bucket: \"s3://ml-data\"}}"),
         "spec.storage.bucket: required: a bucket name"},
        {"bad GKE identity",
         TENANT("a", "{namespaces: [a], storage: {bucket: ml-data, identity: {gcpServiceAccount: me}}}"),
         "spec.storage.identity.gcpServiceAccount: must be a Google service account email"},
        {"bad EKS identity",
         TENANT("a", "{namespaces: [a], storage: {bucket: ml-data, identity: {awsRoleArn: role}}}"),
         "spec.storage.identity.awsRoleArn: must be an IAM role ARN"},
        {"unknown storage field",
         TENANT("a", "{namespaces: [a], storage: {bucket: ml-data, region: eu}}"),
         "unknown field \"region\""},
        {"full storage accepted",
         TENANT("a", "{namespaces: [a], storage: {bucket: ml-data, prefix: a/, storageClasses: [ssd],"
                     " identity: {gcpServiceAccount: a@p.iam.gserviceaccount.com,"
                     " awsRoleArn: \"arn:aws:iam::123456789012:role/a\"}}}"),
         NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        td_err err = {{0}};
        td_status st;
        td_config *c = load_text(cases[i].yaml, &err, &st);
        if (!cases[i].msg) {
            if (st != TD_OK)
                fail_msg("%s: rejected: %s", cases[i].name, err.msg);
        } else {
            if (st != TD_EINVAL || c)
                fail_msg("%s: accepted", cases[i].name);
            if (!strstr(err.msg, cases[i].msg))
                fail_msg("%s: message \"%s\" lacks \"%s\"", cases[i].name, err.msg, cases[i].msg);
        }
        td_config_unref(c);
    }
}

/* The sandbox class's scheduling and overhead reach the pod, and the
 * AdmissionPolicy picks the class and the untrusted workloads. */
static void test_sandbox_config(void **state)
{
    (void)state;
    static const char cfgtext[] =
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: t, labels: {team: t, project: p, "
        "environment: e}}\n"
        "---\napiVersion: tenantd.dev/v1alpha1\nkind: AdmissionPolicy\nmetadata: {name: default}\n"
        "spec: {sandbox: {runtimeClassName: kata, untrustedWorkloads: [agent]}}\n"
        "---\napiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: kata}\nhandler: kata\n"
        "scheduling:\n  nodeSelector: {kata: \"yes\"}\n"
        "  tolerations: [{key: sandbox, operator: Exists, effect: NoSchedule}]\n"
        "overhead: {podFixed: {cpu: 250m, memory: 120Mi}}\n";
    td_err err;
    td_status st;
    td_config *c = load_text(cfgtext, &err, &st);
    if (!c)
        fail_msg("%s", err.msg);
    static const struct {
        const char *name, *pod, *final;
        int sandboxed;
    } cases[] = {
        {"configured workload sandboxed in the configured class",
         POD("t", ",\"labels\":{\"tenantd.dev/workload\":\"agent\"}",
             "\"tolerations\":[{\"key\":\"sandbox\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}],"),
         "{\"spec\":{\"runtimeClassName\":\"kata\",\"nodeSelector\":{\"kata\":\"yes\"},"
         "\"tolerations\":[{\"key\":\"sandbox\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}],"
         "\"overhead\":{\"cpu\":\"250m\",\"memory\":\"120Mi\"}}}",
         1},
        {"notebook is no longer in the list",
         POD("t", ",\"labels\":{\"tenantd.dev/workload\":\"notebook\"}", ""), NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *pod = json_loads(cases[i].pod, 0, NULL);
        assert_non_null(pod);
        td_admit_result r;
        assert_int_equal(td_admit_pod(c, pod, NULL, NULL, &r), TD_OK);
        if (!r.allowed)
            fail_msg("%s: denied: %s", cases[i].name, r.message);
        int has = td_json_path(r.pod, "spec.runtimeClassName") != NULL;
        if (has != cases[i].sandboxed)
            fail_msg("%s: runtimeClassName %s", cases[i].name, has ? "set" : "absent");
        if (cases[i].final) {
            json_t *want = json_loads(cases[i].final, 0, NULL);
            /* tolerations: the pod's own one is not duplicated */
            if (!json_subset(want, r.pod)) {
                char *d = json_dumps(r.pod, JSON_COMPACT);
                fail_msg("%s: final pod %s", cases[i].name, d);
            }
            json_decref(want);
        }
        td_admit_result_fini(&r);
        json_decref(pod);
    }
    td_config_unref(c);
}

/* Nothing half-applied: a builder holding a good snapshot plus a bad
 * customer fails at finish, and the base snapshot is untouched. */
static void test_nothing_half_applied(void **state)
{
    (void)state;
    td_config *base = load();
    td_config_builder *b = NULL;
    td_err err;
    assert_int_equal(td_config_builder_create(base, &b, &err), TD_OK);
    assert_int_equal(td_config_builder_delete(b, "RuntimeClass", NULL, "gvisor", &err), TD_OK);
    td_config *next = NULL;
    assert_int_equal(td_config_builder_finish(b, &next, &err), TD_EINVAL);
    assert_null(next);
    assert_non_null(strstr(err.msg, "RuntimeClass \"gvisor\", which is not defined"));
    td_config_builder_destroy(b);
    assert_non_null(td_config_get(base, "RuntimeClass", NULL, "gvisor"));
    td_config_unref(base);
}


/* The per-snapshot index gives what the lookups it replaces give: each
 * namespace's Tenant, Namespace object and tier (known and unknown
 * namespaces, and without an index), each NodePool's fields, the policy. */
static void test_index(void **state)
{
    static const char *const nss[] = {"team-a-prod", "cust-prod", "orphan", "default",
                                      "no-such-ns", ""};
    (void)state;
    td_config *c = load();
    const td__tenancy_index *ix = td__tenancy_index_get(c);
    assert_non_null(ix);
    assert_ptr_equal(td__tenancy_index_get(c), ix); /* built once per snapshot */
    for (size_t i = 0; i < sizeof nss / sizeof nss[0]; i++) {
        for (int with = 0; with < 2; with++) {
            td__tenancy_ns spare;
            const td__tenancy_ns *e = td__tenancy_ns_get(with ? ix : NULL, c, nss[i], &spare);
            json_t *tenant = td_config_tenant_for_namespace(c, nss[i]);
            assert_ptr_equal(e->tenant, tenant);
            assert_ptr_equal(e->nsobj, td_config_get(c, "Namespace", NULL, nss[i]));
            assert_ptr_equal(e->tenant_name, td_json_str(tenant, "metadata.name"));
            assert_ptr_equal(e->ns_labels, td_json_path(e->nsobj, "metadata.labels"));
            assert_ptr_equal(e->tenant_labels, td_json_path(tenant, "spec.labels"));
            assert_int_equal(e->customer, td_tenancy_of(tenant) == TD_TENANCY_CUSTOMER);
        }
    }
    td__tenancy_ns spare;
    assert_string_equal(td__tenancy_ns_get(ix, c, "cust-prod", &spare)->tenant_name, "cust");
    assert_true(td__tenancy_ns_get(ix, c, "cust-prod", &spare)->customer);
    assert_null(td__tenancy_ns_get(ix, c, "orphan", &spare)->tenant);
    assert_non_null(td__tenancy_ns_get(ix, c, "orphan", &spare)->nsobj);

    json_t *const *objs;
    size_t n = td_config_list(c, "NodePool", NULL, &objs);
    const td__tenancy_pool *pools;
    assert_int_equal(td__tenancy_pools(ix, &pools), n);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++) {
        assert_ptr_equal(pools[i].obj, objs[i]);
        assert_ptr_equal(pools[i].name, td_json_str(objs[i], "metadata.name"));
        assert_ptr_equal(pools[i].taint, td_json_path(objs[i], "spec.taint"));
        assert_ptr_equal(pools[i].taint_key, td_json_str(objs[i], "spec.taint.key"));
        assert_ptr_equal(pools[i].taint_value, td_json_str(objs[i], "spec.taint.value"));
        assert_ptr_equal(pools[i].taint_effect, td_json_str(objs[i], "spec.taint.effect"));
        assert_ptr_equal(pools[i].selector, td_json_path(objs[i], "spec.nodeSelector"));
        assert_ptr_equal(pools[i].tenants, td_json_path(objs[i], "spec.tenants"));
        assert_ptr_equal(pools[i].capacity, td_json_path(objs[i], "spec.capacity"));
    }
    td__tenancy_policy pspare;
    const td__tenancy_policy *pol = td__tenancy_policy_get(ix, c, &pspare);
    const td__tenancy_policy *raw = td__tenancy_policy_get(NULL, c, &pspare);
    assert_ptr_equal(pol->policy, td_config_admission_policy(c));
    assert_ptr_equal(raw->policy, pol->policy);
    assert_ptr_equal(raw->required_labels, pol->required_labels);
    assert_ptr_equal(raw->runtime_class, pol->runtime_class);
    assert_null(td__tenancy_index_get(NULL));
    td_config_unref(c);
}

int main(void)
{
    if (td_kinds_register_builtin(NULL) != TD_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),         cmocka_unit_test(test_patch_deterministic),
        cmocka_unit_test(test_pvc),           cmocka_unit_test(test_uri),
        cmocka_unit_test(test_config_rejects), cmocka_unit_test(test_nothing_half_applied),
        cmocka_unit_test(test_sandbox_config), cmocka_unit_test(test_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
