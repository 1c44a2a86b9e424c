/* fuzz_review.c - libFuzzer target for the webhook's decision path: any
 * bytes jansson accepts as JSON, as an AdmissionReview or a bare Pod, in
 * every mode, against examples/platform.yaml's shape. The response must
 * always be a well-formed AdmissionReview; nothing may crash or leak. The
 * webhook's parse (td_json_loadb_review, which leaves out members no
 * decision reads) must give the same response, byte for byte, and so must
 * the answer the webhook writes without a tree (td_admission_review_body). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kinds/builtin.h"
#include "admission/admit.h"
#include "core/config.h"
#include "core/kind.h"
#include "core/jsonfast.h"
#include "core/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char platform[] =
    "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n"
    "  labels: {team: a, pod-security.kubernetes.io/enforce: restricted}\n---\n"
    "apiVersion: v1\nkind: Namespace\nmetadata: {name: b, labels: {pod-security.kubernetes.io/enforce: baseline}}\n---\n"
    /* Pod Security's versions, warn and audit (and labels that do not parse) */
    "apiVersion: v1\nkind: Namespace\nmetadata: {name: w, labels: {pod-security.kubernetes.io/enforce: baseline,"
    " pod-security.kubernetes.io/enforce-version: v1.18, pod-security.kubernetes.io/warn: restricted,"
    " pod-security.kubernetes.io/audit: restricted, pod-security.kubernetes.io/audit-version: v1.x}}\n---\n"
    "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q, namespace: a}\n"
    "spec: {hard: {requests.cpu: '2', limits.memory: 4Gi, pods: '3', requests.nvidia.com/gpu: '1'},"
    " scopeSelector: {matchExpressions: [{scopeName: PriorityClass, operator: In, values: [high]}]}}\n---\n"
    "apiVersion: v1\nkind: LimitRange\nmetadata: {name: l, namespace: a}\n"
    "spec: {limits: [{type: Container, default: {cpu: '1'}, defaultRequest: {cpu: 100m}, max: {cpu: '2'}}]}\n---\n"
    "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 10\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: ta}\n"
    "spec: {namespaces: [a], labels: {project: p, environment: e}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: NodePool\nmetadata: {name: p}\n"
    "spec: {taint: {key: gpu, value: p, effect: NoSchedule}, nodeSelector: {pool: p}, tenants: [ta]}\n";

static td_config *cfg;

static void load(void)
{
    td_manifest *m = NULL;
    td_config_builder *b = NULL;
    td_err err;
    if (td_manifest_parse("p.yaml", platform, strlen(platform), &m, &err) != TD_OK ||
        td_config_builder_create(NULL, &b, &err) != TD_OK ||
        td_config_builder_add_manifest(b, m, &err) != TD_OK ||
        td_config_builder_finish(b, &cfg, &err) != TD_OK)
        __builtin_trap();
    td_config_builder_destroy(b);
    td_manifest_destroy(m);
}

/* A check that stays in release builds (assert would not). */
#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!cfg && td_kinds_register_builtin(NULL) != TD_OK)
        abort();
    if (!cfg)
        load();
    json_t *in = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!in)
        return 0;
    /* the webhook's own parse: objects and arrays, as json_loadb with no flag */
    json_t *fast = json_is_object(in) || json_is_array(in)
                       ? td_json_loadb_review((const char *)data, size, NULL)
                       : NULL;
    CHECK(fast || !(json_is_object(in) || json_is_array(in)));
    static const td_review_mode modes[] = {TD_REVIEW_MUTATE_AND_VALIDATE, TD_REVIEW_MUTATE,
                                           TD_REVIEW_VALIDATE};
    for (size_t i = 0; i < 3; i++) {
        json_t *out = NULL;
        int code = 0;
        if (td_admission_review(cfg, in, modes[i], NULL, &out, &code) != TD_OK)
            continue; /* out of memory only */
        json_t *resp = json_object_get(out, "response");
        CHECK(json_is_object(resp));
        CHECK(json_is_boolean(json_object_get(resp, "allowed")));
        CHECK(code == 200 || code == 400 || code == 403);
        char *body = NULL;
        size_t blen = 0;
        int bcode = 0;
        td_review_summary sum;
        CHECK(td_admission_review_body(cfg, in, modes[i], NULL, &body, &blen, &bcode, &sum) ==
              TD_OK);
        char *tree = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
        CHECK(tree && strlen(tree) == blen && memcmp(tree, body, blen) == 0 && bcode == code);
        CHECK(sum.allowed == json_is_true(json_object_get(resp, "allowed")));
        /* the summary counts the shadow annotations; Pod Security's
         * (pod-security.kubernetes.io/...) are not rules in shadow */
        size_t nshadow = 0;
        const char *akey;
        json_t *aval;
        json_object_foreach(json_object_get(resp, "auditAnnotations"), akey, aval)
            nshadow += strncmp(akey, "tenantd.dev/shadow-", 19) == 0;
        CHECK(sum.nshadow == nshadow);
        free(tree);
        free(body);
        json_t *out2 = NULL;
        int code2 = 0;
        if (fast && td_admission_review(cfg, fast, modes[i], NULL, &out2, &code2) == TD_OK) {
            char *a = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
            char *b = json_dumps(out2, JSON_COMPACT | JSON_PRESERVE_ORDER);
            CHECK(a && b && strcmp(a, b) == 0 && code == code2);
            free(a);
            free(b);
        }
        json_decref(out2);
        json_decref(out);
    }
    json_decref(fast);
    json_decref(in);
    return 0;
}
