/* test_jsonarena.c - the per-request jansson arena: values made while it is
 * open come from it and are released with it, values made before or on
 * other threads are freed as usual, and an admission review decided inside
 * an arena answers byte for byte what it answers without one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kinds/builtin.h"
#include "admission/admit.h"
#include "core/jsonarena.h"
#include "core/kind.h"

static void test_lifecycle(void **state)
{
    (void)state;
    json_t *before = json_pack("{s:s}", "made", "before the arena");
    assert_true(td_json_arena_begin());
    assert_false(td_json_arena_begin()); /* no nesting */
    size_t used0 = td_json_arena_used();
    json_t *a = json_pack("{s:[i,i,s]}", "x", 1, 2, "three");
    assert_true(td_json_arena_used() > used0);
    /* a value from before is freed with free() while the arena is open */
    json_decref(before);
    /* larger than the arena's block limit: malloc'd, and freed */
    char *big = malloc(100000);
    memset(big, 'y', 99999);
    big[99999] = '\0';
    json_t *s = json_string(big);
    free(big);
    assert_int_equal(strlen(json_string_value(s)), 99999);
    json_decref(s);
    /* more than one chunk */
    json_t *arr = json_array();
    for (int i = 0; i < 20000; i++)
        json_array_append_new(arr, json_pack("{s:i}", "i", i));
    assert_int_equal(json_integer_value(json_object_get(json_array_get(arr, 19999), "i")), 19999);
    char *dump = json_dumps(a, JSON_COMPACT);
    assert_string_equal(dump, "{\"x\":[1,2,\"three\"]}");
    td_json_free(dump);
    json_decref(arr);
    json_decref(a);
    td_json_arena_end();
    assert_int_equal(td_json_arena_used(), 0);
    /* after the arena: plain malloc again */
    json_t *after = json_pack("{s:i}", "n", 1);
    char *d2 = json_dumps(after, JSON_COMPACT);
    free(d2);
    json_decref(after);
}

static const char platform[] =
    "apiVersion: v1\nkind: Namespace\nmetadata: {name: a, labels: {team: a, project: p, "
    "environment: dev, pod-security.kubernetes.io/enforce: baseline}}\n---\n"
    "apiVersion: v1\nkind: LimitRange\nmetadata: {name: lr, namespace: a}\n"
    "spec: {limits: [{type: Container, default: {cpu: 500m, memory: 1Gi}, "
    "defaultRequest: {cpu: 250m, memory: 512Mi}, max: {cpu: '2'}}]}\n---\n"
    "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q1, namespace: a}\n"
    "spec: {hard: {requests.cpu: '1', limits.memory: 4Gi, pods: '3'}}\n";

static const char *const reviews[] = {
    "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":"
    "\"u1\",\"namespace\":\"a\",\"operation\":\"CREATE\",\"object\":{\"kind\":\"Pod\","
    "\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"x\"}]}}}}",
    "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":"
    "\"u2\",\"namespace\":\"a\",\"operation\":\"CREATE\",\"object\":{\"kind\":\"Pod\","
    "\"metadata\":{\"name\":\"p\"},\"spec\":{\"hostNetwork\":true,\"containers\":[{\"name\":"
    "\"x\"}]}}}}",
    "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":"
    "\"u3\",\"namespace\":\"a\",\"operation\":\"CREATE\",\"object\":{\"kind\":\"Pod\","
    "\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"x\",\"resources\":"
    "{\"requests\":{\"cpu\":\"2\"}}}]}}}}",
};

static char *decide(const td_config *c, const char *body, bool arena)
{
    if (arena)
        assert_true(td_json_arena_begin());
    json_error_t je;
    json_t *in = json_loads(body, 0, &je);
    assert_non_null(in);
    json_t *out = NULL;
    int code;
    assert_int_equal(td_admission_review(c, in, TD_REVIEW_MUTATE_AND_VALIDATE, NULL, &out, &code),
                     TD_OK);
    char *s = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
    char *copy = strdup(s);
    td_json_free(s);
    json_decref(out);
    json_decref(in);
    if (arena)
        td_json_arena_end();
    return copy;
}

/* td_json_arena_forget: inside an arena the tree is not walked and its
 * memory, blocks over the arena's limit included, goes with the arena (the
 * sanitizer build's leak check fails this test otherwise); a large block
 * freed before the end is freed once. Without an arena it is a decref. */
static void test_forget(void **state)
{
    (void)state;
    size_t n = 200000;
    char *text = malloc(n + 16);
    assert_non_null(text);
    memcpy(text, "[\"", 2);
    memset(text + 2, 'z', n);
    memcpy(text + 2 + n, "\",1]", 5);
    assert_true(td_json_arena_begin());
    json_t *v = json_loads(text, 0, NULL); /* a 200 kB string: a large block */
    assert_non_null(v);
    assert_int_equal(json_string_length(json_array_get(v, 0)), n);
    json_t *dropped = json_loads(text, 0, NULL); /* freed before the end */
    json_decref(dropped);
    td_json_arena_forget(v);
    td_json_arena_end();
    json_t *plain = json_loads(text, 0, NULL);
    assert_non_null(plain);
    td_json_arena_forget(plain); /* no arena: released at once */
    td_json_arena_forget(NULL);
    free(text);
}

static void test_review_same_bytes(void **state)
{
    (void)state;
    td_manifest *m = NULL;
    td_err err;
    td_config_builder *b = NULL;
    td_config *c = NULL;
    assert_int_equal(td_manifest_parse("p.yaml", platform, strlen(platform), &m, &err), TD_OK);
    assert_int_equal(td_config_builder_create(NULL, &b, &err), TD_OK);
    assert_int_equal(td_config_builder_add_manifest(b, m, &err), TD_OK);
    assert_int_equal(td_config_builder_finish(b, &c, &err), TD_OK);
    td_config_builder_destroy(b);
    td_manifest_destroy(m);
    for (size_t i = 0; i < sizeof reviews / sizeof reviews[0]; i++) {
        /* the first decision in an arena also builds the admission index */
        char *in_arena = decide(c, reviews[i], true);
        char *plain = decide(c, reviews[i], false);
        char *again = decide(c, reviews[i], true);
        assert_string_equal(in_arena, plain);
        assert_string_equal(again, plain);
        free(in_arena);
        free(plain);
        free(again);
    }
    td_config_unref(c);
}

int main(void)
{
    if (td_kinds_register_builtin(NULL) != TD_OK)
        return 1;
    td_json_arena_install();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lifecycle),
        cmocka_unit_test(test_review_same_bytes),
        cmocka_unit_test(test_forget),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    td_json_arena_release();
    return rc;
}
