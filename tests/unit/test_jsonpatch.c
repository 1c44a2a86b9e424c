/* test_jsonpatch.c - diff produces the expected operations, and applying
 * them turns the source into the target. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "tenantd/jsonpatch.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_apply_bad_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
