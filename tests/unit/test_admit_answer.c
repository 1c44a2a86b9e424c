/* test_admit_answer.c - the webhook's answer written straight to bytes
 * (td_admission_review_body) against the tree td_admission_review gives,
 * dumped compact: the same bytes, code and failures for every row, in
 * every mode, and a summary that says what the answer says (allowed, the
 * denying rule, the shadow rules of its auditAnnotations). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission/admit.h"
#include "core/jsonarena.h"
#include "core/jsonfast.h"

#include "testutil.h"

static const char platform[] =
    "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n"
    "  labels: {team: a, environment: dev, project: p, pod-security.kubernetes.io/enforce: "
    "baseline}\n---\n"
    "apiVersion: v1\nkind: Namespace\nmetadata: {name: bare}\n---\n"
    "apiVersion: v1\nkind: LimitRange\nmetadata: {name: lr, namespace: a}\n"
    "spec: {limits: [{type: Container, defaultRequest: {cpu: 100m}, default: {cpu: 500m},"
    " max: {cpu: '2'}}]}\n---\n"
    "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q, namespace: a}\n"
    "spec: {hard: {requests.cpu: '1', pods: '5'}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: NodePool\nmetadata: {name: gpu}\n"
    "spec: {taint: {key: nvidia.com/gpu, value: a100, effect: NoSchedule},"
    " nodeSelector: {pool: a100}, tenants: ['*']}\n";

static const char *const policies[] = {
    "",
    "---\napiVersion: tenantd.dev/v1alpha1\nkind: AdmissionPolicy\nmetadata: {name: p}\n"
    "spec: {enforcement: {PodSecurity: shadow}}\n",
    "---\napiVersion: tenantd.dev/v1alpha1\nkind: AdmissionPolicy\nmetadata: {name: p}\n"
    "spec: {enforcement: shadow}\n",
};

/* Pods as JSON; each goes in bare and in an AdmissionReview. */
static const char *const pods[] = {
    "{\"metadata\":{\"name\":\"ok\",\"namespace\":\"a\"},\"spec\":{\"containers\":[{\"name\":\"c\"}]}}",
    "{\"metadata\":{\"name\":\"priv\",\"namespace\":\"a\"},\"spec\":{\"containers\":[{\"name\":\"c\","
    "\"securityContext\":{\"privileged\":true}}],\"hostNetwork\":true}}",
    "{\"metadata\":{\"name\":\"big\",\"namespace\":\"a\"},\"spec\":{\"containers\":[{\"name\":\"c\","
    "\"resources\":{\"requests\":{\"cpu\":\"3\"},\"limits\":{\"cpu\":\"3\"}}}]}}",
    "{\"metadata\":{\"name\":\"nolabels\",\"namespace\":\"bare\"},\"spec\":{\"containers\":[{\"name\":"
    "\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}",
    "{\"metadata\":{\"name\":\"esc \\\"q\\\" \\u00e9\\n\",\"namespace\":\"a\",\"labels\":{\"x\":\"\\t\"}},"
    "\"spec\":{\"containers\":[{\"name\":\"c\\u2028\",\"image\":\"i\",\"securityContext\":"
    "{\"privileged\":true}}],\"terminationGracePeriodSeconds\":2.5}}",
    "{\"kind\":\"Service\",\"spec\":{\"containers\":[]}}",
    "{\"metadata\":{\"namespace\":\"a\"},\"spec\":{}}",
    "{\"kind\":\"PersistentVolumeClaim\",\"metadata\":{\"namespace\":\"a\"},\"spec\":{}}",
};

/* Other bodies: not a review, bad reviews, operations and kinds that pass. */
static const char *const others[] = {
    "[1,2]",
    "{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1beta1\",\"request\":{}}",
    "{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\"}",
    "{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\",\"request\":{\"uid\":"
    "\"u\\\"1\",\"kind\":{\"kind\":\"Pod\"}}}",
    "{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\",\"request\":{\"uid\":"
    "\"d\",\"operation\":\"DELETE\",\"kind\":{\"kind\":\"Pod\"}}}",
    "{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\",\"request\":{\"uid\":"
    "\"s\",\"operation\":\"CREATE\",\"kind\":{\"kind\":\"Secret\"},\"object\":{}}}",
    "{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\",\"request\":{\"uid\":"
    "\"e\",\"operation\":\"CREATE\",\"kind\":{\"kind\":\"Pod\"},\"subResource\":\"exec\","
    "\"object\":{}}}",
    "{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\",\"request\":{\"uid\":"
    "\"v\",\"operation\":\"CREATE\",\"kind\":{\"kind\":\"PersistentVolumeClaim\"},\"object\":"
    "{\"spec\":{\"storageClassName\":\"x\"}}}}",
};

static const td_review_mode modes[] = {TD_REVIEW_MUTATE_AND_VALIDATE, TD_REVIEW_MUTATE,
                                       TD_REVIEW_VALIDATE};

static int compared, seen_warnings, seen_patch, seen_details;

/* Decodes standard padded base64 s into a malloc'd, NUL-terminated
 * buffer (*n bytes); NULL if s is not such base64. */
static char *b64_decode(const char *s, size_t *n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t len = strlen(s), o = 0;
    if (len % 4 != 0)
        return NULL;
    char *out = malloc(len / 4 * 3 + 1);
    for (size_t i = 0; out && i < len; i += 4) {
        unsigned v = 0;
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            const char *c = s[i + k] == '=' ? NULL : strchr(tab, s[i + k]);
            if (s[i + k] == '=' && i + 4 == len && k >= 2)
                pad++;
            else if (!c || !s[i + k] || pad) {
                free(out);
                return NULL;
            }
            v = v << 6 | (c ? (unsigned)(c - tab) : 0);
        }
        out[o++] = (char)(v >> 16);
        if (pad < 2)
            out[o++] = (char)(v >> 8 & 0xff);
        if (pad < 1)
            out[o++] = (char)(v & 0xff);
    }
    if (out)
        out[o] = '\0';
    *n = o;
    return out;
}

/* The two answers to in agree: bytes, code, failure, and the summary. */
static void check(const char *name, const td_config *c, const json_t *in, td_review_mode mode)
{
    json_t *out = NULL;
    int code1 = -1, code2 = -2;
    char *body = NULL;
    size_t len = 0;
    td_review_summary sum;
    td_status s1 = td_admission_review(c, in, mode, NULL, &out, &code1);
    td_status s2 = td_admission_review_body(c, in, mode, NULL, &body, &len, &code2, &sum);
    if (s1 != s2)
        fail_msg("%s (mode %d): tree %d, bytes %d", name, (int)mode, (int)s1, (int)s2);
    compared++;
    if (s1 != TD_OK)
        return;
    char *want = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_non_null(want);
    if (strlen(want) != len || strcmp(want, body) != 0)
        fail_msg("%s (mode %d):\n got %s\nwant %s", name, (int)mode, body, want);
    assert_int_equal(code1, code2);
    seen_warnings += strstr(body, "\"warnings\":[\"") != NULL;
    seen_patch += strstr(body, "\"patch\":\"") != NULL;
    seen_details += strstr(body, "\"details\":{\"kind\"") != NULL;
    json_t *resp = json_object_get(out, "response");
    /* the patch's bytes are jansson's compact dump of the patch (read
     * back), not only what the body's own dumper writes */
    const char *patch64 = td_json_str(resp, "patch");
    if (patch64) {
        size_t plen = 0;
        char *patch = b64_decode(patch64, &plen);
        assert_non_null(patch);
        json_t *ops = json_loadb(patch, plen, 0, NULL);
        assert_true(json_is_array(ops));
        char *again = json_dumps(ops, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (strlen(again) != plen || memcmp(again, patch, plen) != 0)
            fail_msg("%s (mode %d): patch\n got %s\nwant %s", name, (int)mode, patch, again);
        free(again);
        json_decref(ops);
        free(patch);
    }
    assert_int_equal(sum.allowed, json_is_true(json_object_get(resp, "allowed")));
    const char *kind = td_json_str(resp, "status.details.kind");
    if (!sum.allowed && (kind ? !sum.rule || strcmp(kind, sum.rule) != 0 : sum.rule != NULL))
        fail_msg("%s: summary rule %s, answer %s", name, sum.rule ? sum.rule : "(none)",
                 kind ? kind : "(none)");
    json_t *audit = json_object_get(resp, "auditAnnotations");
    assert_int_equal(sum.nshadow, json_object_size(audit));
    for (size_t i = 0; i < sum.nshadow; i++) {
        char key[96];
        assert_non_null(sum.shadow[i]);
        snprintf(key, sizeof key, "tenantd.dev/shadow-%s", sum.shadow[i]);
        assert_non_null(json_object_get(audit, key));
    }
    free(want);
    free(body);
    json_decref(out);
}

static json_t *as_review(const char *pod, const char *op)
{
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}, s:o}}", "apiVersion",
                     "admission.k8s.io/v1", "kind", "AdmissionReview", "request", "uid",
                     "7f0c", "operation", op, "kind", "kind", "Pod", "object",
                     json_loads(pod, 0, NULL));
}

static void test_rows(void **state)
{
    (void)state;
    for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++) {
        char yaml[8192];
        snprintf(yaml, sizeof yaml, "%s%s", platform, policies[p]);
        td_config *c = test_config("p.yaml", yaml);
        for (size_t m = 0; m < 3; m++) {
            for (size_t i = 0; i < sizeof pods / sizeof pods[0]; i++) {
                json_t *bare = json_loads(pods[i], 0, NULL);
                assert_non_null(bare);
                check(pods[i], c, bare, modes[m]);
                json_t *create = as_review(pods[i], "CREATE");
                check(pods[i], c, create, modes[m]);
                json_t *update = as_review(pods[i], "UPDATE");
                check(pods[i], c, update, modes[m]);
                json_decref(bare);
                json_decref(create);
                json_decref(update);
            }
            for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
                json_t *in = json_loads(others[i], 0, NULL);
                assert_non_null(in);
                check(others[i], c, in, modes[m]);
                json_decref(in);
            }
        }
        td_config_unref(c);
    }
    /* the rows reach every part of an answer */
    assert_true(compared > 200);
    assert_true(seen_warnings > 0 && seen_patch > 0 && seen_details > 0);
}

/* A message jansson refuses (a 2-byte character cut by the 512-byte
 * limit of "apiVersion ... is not served"): both fail, as the daemon's
 * 500 always did. */
static void test_message_not_utf8(void **state)
{
    (void)state;
    td_config *c = test_config("p.yaml", platform);
    /* "apiVersion \"" is 12 bytes: 2-byte characters after it are cut in
     * the middle at byte 511 */
    char av[1200];
    size_t n = 0;
    av[n++] = 'v';
    while (n + 2 < sizeof av) {
        av[n++] = '\xc3';
        av[n++] = '\xa9';
    }
    av[n] = 0;
    json_t *in = json_pack("{s:s, s:s, s:{}}", "kind", "AdmissionReview", "apiVersion", av + 1,
                           "request");
    assert_non_null(in);
    json_t *out = NULL;
    char *body = NULL;
    size_t len;
    int code;
    assert_int_equal(td_admission_review(c, in, TD_REVIEW_VALIDATE, NULL, &out, &code), TD_ENOMEM);
    assert_int_equal(td_admission_review_body(c, in, TD_REVIEW_VALIDATE, NULL, &body, &len, &code,
                                              NULL),
                     TD_ENOMEM);
    assert_null(body);
    /* one byte more in front: the cut falls between characters and both
     * answer */
    json_decref(in);
    in = json_pack("{s:s, s:s, s:{}}", "kind", "AdmissionReview", "apiVersion", av, "request");
    check("apiVersion cut between characters", c, in, TD_REVIEW_VALIDATE);
    json_decref(in);
    assert_int_equal(td_admission_review_reject_body("\xc3", &body, &len), TD_ENOMEM);
    td_config_unref(c);
}

/* The reject answer for a body that is not JSON. */
static void test_reject(void **state)
{
    (void)state;
    char *body = NULL;
    size_t len = 0;
    assert_int_equal(td_admission_review_reject_body("not JSON: \"x\"", &body, &len), TD_OK);
    assert_string_equal(body, "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                              "\"response\":{\"uid\":\"\",\"allowed\":false,\"status\":{\"code\":"
                              "400,\"message\":\"not JSON: \\\"x\\\"\",\"reason\":\"BadRequest\"}}}");
    assert_int_equal(len, strlen(body));
    free(body);
}

/* The fixture review in every mode, parsed as the daemon parses it and
 * inside the request arena: the answer's bytes outlive the arena. */
static void test_fixture_in_arena(void **state)
{
    (void)state;
    const char *root = getenv("TD_SOURCE_DIR") ? getenv("TD_SOURCE_DIR") : ".";
    char cfgp[4096], revp[4096];
    snprintf(cfgp, sizeof cfgp, "%s/bench/fixtures/webhook-platform.yaml", root);
    snprintf(revp, sizeof revp, "%s/bench/fixtures/review.json", root);
    const char *paths[] = {cfgp};
    td_config *c = NULL;
    td_err err;
    if (td_config_load_files(paths, 1, &c, &err) != TD_OK)
        fail_msg("%s", err.msg);
    FILE *f = fopen(revp, "rb");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    for (size_t m = 0; m < 3; m++) {
        json_t *tree = td_json_loadb_review(buf, n, NULL);
        check("fixture", c, tree, modes[m]);
        json_decref(tree);
        assert_true(td_json_arena_begin());
        json_t *in = td_json_loadb_review(buf, n, NULL);
        char *body = NULL;
        size_t len = 0;
        int code = 0;
        assert_int_equal(td_admission_review_body(c, in, modes[m], NULL, &body, &len, &code, NULL),
                         TD_OK);
        json_decref(in);
        td_json_arena_end();
        assert_non_null(strstr(body, "\"allowed\":true"));
        assert_int_equal(strlen(body), len);
        if (modes[m] != TD_REVIEW_VALIDATE)
            assert_non_null(strstr(body, "\"patchType\":\"JSONPatch\",\"patch\":\""));
        free(body);
    }
    td_config_unref(c);
}

int main(void)
{
    td_json_arena_install();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_message_not_utf8),
        cmocka_unit_test(test_reject),
        cmocka_unit_test(test_fixture_in_arena),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    td_json_arena_release();
    return rc;
}
