/* test_jsonpatch.c - diff produces the expected operations, and applying
 * them turns the source into the target; the diff gives what the plain
 * implementation it replaced (ref_diff, kept here) gave, byte for byte, on
 * random documents, long keys and pointers near the length limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/jsonpatch.h"

static const struct {
    const char *name, *from, *to, *ops;
} rows[] = {
    {"equal", "{\"a\":1}", "{\"a\":1}", "[]"},
    {"add key", "{\"a\":1}", "{\"a\":1,\"b\":{\"c\":2}}",
     "[{\"op\": \"add\", \"path\": \"/b\", \"value\": {\"c\": 2}}]"},
    {"escape slash and tilde", "{\"l\":{}}", "{\"l\":{\"nvidia.com/gpu\":\"1\",\"a~b\":\"x\"}}",
     "[{\"op\": \"add\", \"path\": \"/l/nvidia.com~1gpu\", \"value\": \"1\"}, "
     "{\"op\": \"add\", \"path\": \"/l/a~0b\", \"value\": \"x\"}]"},
    {"replace scalar", "{\"a\":{\"b\":1}}", "{\"a\":{\"b\":2}}",
     "[{\"op\": \"replace\", \"path\": \"/a/b\", \"value\": 2}]"},
    {"remove key", "{\"a\":1,\"b\":2}", "{\"a\":1}", "[{\"op\": \"remove\", \"path\": \"/b\"}]"},
    {"array element changed", "{\"c\":[{\"n\":\"x\"},{\"n\":\"y\"}]}",
     "{\"c\":[{\"n\":\"x\"},{\"n\":\"y\",\"r\":{}}]}",
     "[{\"op\": \"add\", \"path\": \"/c/1/r\", \"value\": {}}]"},
    {"array appended", "{\"t\":[1]}", "{\"t\":[1,2]}",
     "[{\"op\": \"add\", \"path\": \"/t/-\", \"value\": 2}]"},
    {"array shrunk is replaced", "{\"t\":[1,2]}", "{\"t\":[1]}",
     "[{\"op\": \"replace\", \"path\": \"/t\", \"value\": [1]}]"},
    {"type change", "{\"t\":\"x\"}", "{\"t\":[1]}",
     "[{\"op\": \"replace\", \"path\": \"/t\", \"value\": [1]}]"},
};

static void test_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        json_t *from = json_loads(rows[i].from, 0, NULL);
        json_t *to = json_loads(rows[i].to, 0, NULL);
        assert_non_null(from);
        assert_non_null(to);
        json_t *ops = NULL;
        assert_int_equal(td_jsonpatch_diff(from, to, &ops, NULL), TD_OK);
        char *s = json_dumps(ops, JSON_PRESERVE_ORDER);
        json_t *want = json_loads(rows[i].ops, 0, NULL);
        if (!json_equal(ops, want))
            fail_msg("%s: got %s", rows[i].name, s);
        free(s);
        json_t *copy = json_deep_copy(from);
        td_err err;
        if (td_jsonpatch_apply(copy, ops, &err) != TD_OK)
            fail_msg("%s: apply: %s", rows[i].name, err.msg);
        if (!json_equal(copy, to))
            fail_msg("%s: apply does not reach the target", rows[i].name);
        json_decref(copy);
        json_decref(want);
        json_decref(ops);
        json_decref(from);
        json_decref(to);
    }
}

static void test_apply_bad_path(void **state)
{
    (void)state;
    json_t *doc = json_loads("{\"a\":1}", 0, NULL);
    json_t *ops = json_loads("[{\"op\":\"add\",\"path\":\"/x/y\",\"value\":1}]", 0, NULL);
    td_err err;
    assert_int_equal(td_jsonpatch_apply(doc, ops, &err), TD_EINVAL);
    assert_non_null(strstr(err.msg, "/x/y"));
    json_decref(doc);
    json_decref(ops);
}


/* ---- the reference: the diff as it was before pointers were built lazily */

#define REF_MAX_POINTER 4096

static int ref_add_op(json_t *ops, const char *op, const char *path, const json_t *value)
{
    json_t *o = json_object();
    if (!o)
        return -1;
    int rc = json_object_set_new(o, "op", json_string(op));
    rc |= json_object_set_new(o, "path", json_string(path));
    if (value)
        rc |= json_object_set_new(o, "value", td_json_copy(value));
    if (rc || json_array_append_new(ops, o) < 0) {
        json_decref(o);
        return -1;
    }
    return 0;
}

static int ref_append_token(char *path, size_t plen, const char *k)
{
    char tok[1024];
    td_jsonpointer_escape(k, tok, sizeof tok);
    size_t n = strlen(tok);
    if (plen + 1 + n >= REF_MAX_POINTER)
        return -1;
    path[plen] = '/';
    memcpy(path + plen + 1, tok, n + 1);
    return (int)(n + 1);
}

static int ref_append_key(char *path, size_t plen, const char *k, size_t kn)
{
    if (kn > 1000 || memchr(k, '~', kn) || memchr(k, '/', kn))
        return ref_append_token(path, plen, k);
    if (plen + 1 + kn >= REF_MAX_POINTER)
        return -1;
    path[plen] = '/';
    memcpy(path + plen + 1, k, kn);
    path[plen + 1 + kn] = '\0';
    return (int)(kn + 1);
}

static int ref_diff(const json_t *a, const json_t *b, char *path, size_t plen, json_t *ops)
{
    if (a == b)
        return 0;
    bool both_objects = json_is_object(a) && json_is_object(b);
    bool both_arrays = json_is_array(a) && json_is_array(b);
    if (!both_objects && !both_arrays && json_equal(a, b))
        return 0;
    if (both_objects) {
        size_t met = 0;
        void *ib = json_object_iter((json_t *)b);
        for (void *ia = json_object_iter((json_t *)a); ia;
             ia = json_object_iter_next((json_t *)a, ia)) {
            const char *k = json_object_iter_key(ia);
            size_t kn = json_object_iter_key_len(ia);
            json_t *va = json_object_iter_value(ia);
            json_t *vb;
            if (ib && json_object_iter_key_len(ib) == kn &&
                memcmp(json_object_iter_key(ib), k, kn) == 0)
                vb = json_object_iter_value(ib);
            else
                vb = json_object_get(b, k);
            if (ib)
                ib = json_object_iter_next((json_t *)b, ib);
            int n = ref_append_key(path, plen, k, kn);
            if (n < 0)
                return -1;
            if (vb)
                met++;
            int rc = vb ? ref_diff(va, vb, path, plen + (size_t)n, ops)
                        : ref_add_op(ops, "remove", path, NULL);
            path[plen] = '\0';
            if (rc)
                return rc;
        }
        if (met == json_object_size(b))
            return 0;
        const char *k;
        json_t *vb;
        json_object_foreach((json_t *)b, k, vb)
        {
            if (json_object_get(a, k))
                continue;
            int n = ref_append_token(path, plen, k);
            if (n < 0)
                return -1;
            int rc = ref_add_op(ops, "add", path, vb);
            path[plen] = '\0';
            if (rc)
                return rc;
        }
        return 0;
    }
    if (both_arrays && json_array_size(a) <= json_array_size(b)) {
        size_t na = json_array_size(a), nb = json_array_size(b);
        for (size_t i = 0; i < nb; i++) {
            char idx[32];
            snprintf(idx, sizeof idx, "%zu", i);
            int n = i < na ? ref_append_key(path, plen, idx, strlen(idx))
                           : ref_append_key(path, plen, "-", 1);
            if (n < 0)
                return -1;
            int rc = i < na ? ref_diff(json_array_get(a, i), json_array_get(b, i), path,
                                       plen + (size_t)n, ops)
                            : ref_add_op(ops, "add", path, json_array_get(b, i));
            path[plen] = '\0';
            if (rc)
                return rc;
        }
        return 0;
    }
    return ref_add_op(ops, "replace", plen ? path : "", b);
}

/* td_jsonpatch_diff and ref_diff agree: status, and the ops' text. */
static void expect_same_diff(const json_t *a, const json_t *b, const char *what)
{
    char *path = malloc(REF_MAX_POINTER);
    json_t *ref = json_array(), *ops = NULL;
    assert_non_null(path);
    path[0] = '\0';
    int rrc = ref_diff(a, b, path, 0, ref);
    td_err err;
    td_status st = td_jsonpatch_diff(a, b, &ops, &err);
    if ((rrc == 0) != (st == TD_OK))
        fail_msg("%s: reference %d, diff %d", what, rrc, (int)st);
    if (st == TD_OK) {
        char *x = json_dumps(ref, JSON_COMPACT | JSON_PRESERVE_ORDER);
        char *y = json_dumps(ops, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (strcmp(x, y) != 0)
            fail_msg("%s:\nreference %s\n     diff %s", what, x, y);
        free(x);
        free(y);
    }
    json_decref(ops);
    json_decref(ref);
    free(path);
}

static uint64_t rng_state = 88172645463325252ULL;

static unsigned rnd(unsigned n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (unsigned)(rng_state % n);
}

static const char *const keys[] = {"a", "b", "name", "nvidia.com/gpu", "a~b", "~1", "/", "",
                                   "resources", "k\xc3\xa9y", "limits", "x/y~z", "a\0b", "a\0"};
static const size_t keylen[] = {1, 1, 4, 14, 3, 2, 1, 0, 9, 4, 6, 5, 3, 2};
#define NKEYS 14

static json_t *random_json(int depth)
{
    switch (depth <= 0 ? rnd(4) : rnd(7)) {
    case 0: return json_integer(rnd(3));
    case 1: return json_string(keys[rnd(12)]);
    case 2: return rnd(2) ? json_true() : json_null();
    case 3: return json_real(0.5);
    case 4:
    case 5: {
        json_t *o = json_object();
        unsigned n = rnd(5);
        for (unsigned i = 0; i < n; i++) {
            unsigned k = rnd(NKEYS);
            json_object_setn_new(o, keys[k], keylen[k], random_json(depth - 1));
        }
        return o;
    }
    default: {
        json_t *a = json_array();
        unsigned n = rnd(4);
        for (unsigned i = 0; i < n; i++)
            json_array_append_new(a, random_json(depth - 1));
        return a;
    }
    }
}

/* A copy of v as the admission steps make one: containers shared or
 * copied at random, then some members changed, removed or added. */
static json_t *mutated(json_t *v, int depth)
{
    if (rnd(4) == 0)
        return json_incref(v); /* shared, as the webhook's copy shares */
    if (rnd(10) == 0)
        return random_json(depth);
    if (json_is_object(v)) {
        json_t *o = json_object();
        for (void *it = json_object_iter(v); it; it = json_object_iter_next(v, it)) {
            if (rnd(8) == 0)
                continue; /* removed */
            json_object_setn_new(o, json_object_iter_key(it), json_object_iter_key_len(it),
                                 mutated(json_object_iter_value(it), depth - 1));
        }
        if (rnd(4) == 0) {
            unsigned k = rnd(NKEYS);
            json_object_setn_new(o, keys[k], keylen[k], random_json(depth - 1));
        }
        return o;
    }
    if (json_is_array(v)) {
        json_t *a = json_array();
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x)
        {
            json_array_append_new(a, mutated(x, depth - 1));
        }
        if (rnd(3) == 0)
            json_array_append_new(a, random_json(depth - 1));
        if (rnd(6) == 0 && json_array_size(a))
            json_array_remove(a, 0);
        return a;
    }
    return json_incref(v);
}

static void test_diff_random(void **state)
{
    (void)state;
    for (int i = 0; i < 20000; i++) {
        json_t *a = random_json(5);
        json_t *b = mutated(a, 5);
        char what[64];
        snprintf(what, sizeof what, "random pair %d", i);
        expect_same_diff(a, b, what);
        json_decref(a);
        json_decref(b);
    }
}

/* Keys that need escaping, keys over 1000 bytes (the escape cuts them),
 * and nests whose pointers run past MAX_POINTER, changed at the bottom or
 * only shared below: where the limit bites, both fail at the same node. */
static void test_diff_long_pointers(void **state)
{
    static const size_t keylens[] = {1, 60, 99, 300, 511, 512, 700, 1000, 1001, 1500, 2100};
    static const char fill[] = {'k', '~', '/', 'x'};
    (void)state;
    for (size_t f = 0; f < sizeof fill; f++)
        for (size_t l = 0; l < sizeof keylens / sizeof keylens[0]; l++)
            for (int depth = 1; depth <= 80; depth += (depth < 10 ? 1 : 7)) {
                char *key = malloc(keylens[l] + 1);
                memset(key, 'a', keylens[l]);
                for (size_t i = 0; i < keylens[l]; i += 3)
                    key[i] = fill[f];
                key[keylens[l]] = '\0';
                for (int bottom = 0; bottom < 4; bottom++) {
                    json_t *a = json_integer(1), *b = json_integer(bottom == 1 ? 1 : 2);
                    if (bottom == 2) { /* b's leaf is the same node as a's */
                        json_decref(b);
                        b = json_incref(a);
                    }
                    for (int d = 0; d < depth; d++) {
                        json_t *na = json_object(), *nb = json_object();
                        if (d % 3 == 2) {
                            json_t *aa = json_array(), *ab = json_array();
                            json_array_append_new(aa, json_integer(0));
                            json_array_append_new(ab, json_integer(0));
                            json_array_append_new(aa, a);
                            json_array_append_new(ab, b);
                            if (bottom == 3)
                                json_array_append_new(ab, json_integer(9));
                            a = aa;
                            b = ab;
                        }
                        json_object_set_new(na, key, a);
                        json_object_set_new(nb, key, b);
                        if (bottom == 3 && d == depth - 1)
                            json_object_set_new(nb, "new", json_integer(3));
                        a = na;
                        b = nb;
                    }
                    char what[96];
                    snprintf(what, sizeof what, "fill %c key %zu depth %d case %d", fill[f],
                             keylens[l], depth, bottom);
                    expect_same_diff(a, b, what);
                    json_decref(a);
                    json_decref(b);
                }
                free(key);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_apply_bad_path),
        cmocka_unit_test(test_diff_random),
        cmocka_unit_test(test_diff_long_pointers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
