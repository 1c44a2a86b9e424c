/* test_jsondump.c - td_json_dump_compact against json_dumpb(…, JSON_COMPACT):
 * one row per value (parsed from text, or built where the parser cannot
 * make it: NUL and control bytes, invalid UTF-8, odd reals); the bytes and
 * the failures must be jansson's. Also the string writer and the buffer's
 * maximum. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsondump.h"

/* jansson's compact text of v, or NULL if its dump fails. */
static char *jansson_text(const json_t *v, size_t *len)
{
    size_t n = json_dumpb(v, NULL, 0, JSON_COMPACT);
    *len = n;
    if (!n)
        return NULL;
    char *s = malloc(n);
    assert_non_null(s);
    assert_int_equal(json_dumpb(v, s, n, JSON_COMPACT), n);
    return s;
}

static void same_as_jansson(const char *name, const json_t *v)
{
    size_t wn;
    char *want = jansson_text(v, &wn);
    td_jbuf b = TD_JBUF_INIT(1 << 24);
    bool ok = td_json_dump_compact(&b, v);
    if (!want) {
        if (ok)
            fail_msg("%s: jansson fails, td_json_dump_compact gives %s", name, b.s);
    } else {
        if (!ok)
            fail_msg("%s: jansson gives %.*s, td_json_dump_compact fails", name, (int)wn, want);
        if (b.len != wn || memcmp(b.s, want, wn) != 0)
            fail_msg("%s: got %s, want %.*s", name, b.s, (int)wn, want);
        assert_int_equal(b.s[b.len], '\0');
    }
    free(want);
    td_jbuf_fini(&b);
}

static const struct {
    const char *name, *text;
} rows[] = {
    {"empty object", "{}"},
    {"empty array", "[]"},
    {"nested", "{\"a\":{\"b\":[1,2,{\"c\":null}]},\"d\":true,\"e\":false,\"f\":[[],{}]}"},
    {"member order kept", "{\"z\":1,\"a\":2,\"m\":3}"},
    {"integers", "[0,-1,9223372036854775807,-9223372036854775808,42]"},
    {"reals", "[0.5,-0.0,1e3,1E-3,2.5e+10,123.456e-7,1e-300,1.7976931348623157e308,0.1,100.0,"
              "3.0e20,1e17,1e16,123456789012345678.0,5e-324]"},
    {"escapes", "[\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u0001\\u001f\\u007f\"]"},
    {"non-ASCII", "[\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\",\"\\u2028\"]"},
    {"escaped key", "{\"k:{\\\"uid\\\":\\\"x\\\"}\\n\":{}}"},
    {"a JSON Patch", "[{\"op\":\"add\",\"path\":\"/spec/tolerations/-\",\"value\":{\"key\":"
                     "\"nvidia.com/gpu\",\"operator\":\"Equal\",\"value\":\"a100\",\"effect\":"
                     "\"NoSchedule\"}},{\"op\":\"replace\",\"path\":\"/metadata/labels/team\","
                     "\"value\":\"a\"}]"},
};

static void test_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        json_error_t je;
        json_t *v = json_loads(rows[i].text, 0, &je);
        if (!v)
            fail_msg("%s: row does not parse: %s", rows[i].name, je.text);
        same_as_jansson(rows[i].name, v);
        json_decref(v);
    }
}

/* Values the parser cannot give: NUL and other bytes in strings and keys
 * (jansson's dump fails on a value that is not UTF-8 and ignores a key's
 * failure, keeping the text it wrote), reals by value, scalars at the top. */
static void test_built(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        const char *s;
        size_t n;
    } strs[] = {
        {"NUL", "a\0b", 3},
        {"all controls", "\x01\x02\x08\x09\x0a\x0b\x0c\x0d\x1e\x1f", 10},
        {"invalid byte", "ab\xff", 3},
        {"escape then invalid", "a\nb\xc3", 4},
        {"overlong", "\xc0\x80", 2},
        {"surrogate", "\xed\xa0\x80", 3},
        {"past U+10FFFF", "\xf4\x90\x80\x80", 4},
        {"truncated sequence", "\xe2\x82", 2},
        {"4-byte", "\xf0\x9f\x98\x80", 4},
        {"DEL", "\x7f", 1},
    };
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        char name[96];
        json_t *arr = json_array();
        json_array_append_new(arr, json_stringn_nocheck(strs[i].s, strs[i].n));
        snprintf(name, sizeof name, "string: %s", strs[i].name);
        same_as_jansson(name, arr);
        json_t *obj = json_object();
        json_object_setn_new_nocheck(obj, strs[i].s, strs[i].n, json_integer(1));
        json_object_set_new(obj, "after", json_true());
        snprintf(name, sizeof name, "key: %s", strs[i].name);
        same_as_jansson(name, obj);
        json_decref(arr);
        json_decref(obj);
    }
    static const double reals[] = {0.0, -0.0, 1.0, -2.0, 1e21, 1e22, 1e-5, 123456.789, 1.0 / 3,
                                   2e-308, 4.9e-324, 9007199254740993.0, 1e100};
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
        json_t *arr = json_pack("[f]", reals[i]);
        same_as_jansson("real", arr);
        json_decref(arr);
    }
    json_t *s = json_string("top");
    same_as_jansson("a string at the top", s);
    json_decref(s);
    same_as_jansson("null at the top", json_null());
}

/* Deeper than the writer recurses: handed to json_dumpb, same bytes. */
static void test_deep(void **state)
{
    (void)state;
    json_t *top = json_array(), *cur = top;
    for (int i = 0; i < 1000; i++) {
        json_t *next = i % 2 ? json_array() : json_object();
        if (json_is_array(cur))
            json_array_append_new(cur, next);
        else
            json_object_set_new(cur, "k", next);
        cur = next;
    }
    json_array_append_new(top, json_string("end"));
    same_as_jansson("1000 levels", top);
    json_decref(top);
}

static void test_string_writer(void **state)
{
    (void)state;
    td_jbuf b = TD_JBUF_INIT(64);
    assert_true(td_jbuf_string(&b, "a\"b", 3));
    assert_false(td_jbuf_string(&b, "x\xff", 2)); /* refused whole: nothing appended */
    assert_string_equal(b.s, "\"a\\\"b\"");
    assert_true(td_utf8_valid("caf\xc3\xa9", 5));
    assert_false(td_utf8_valid("caf\xc3", 4));
    assert_false(b.failed);
    /* the maximum: a failed append leaves failed set and the text as it was */
    char big[80];
    memset(big, 'x', sizeof big);
    td_jbuf_put(&b, big, sizeof big);
    assert_true(b.failed);
    assert_string_equal(b.s, "\"a\\\"b\"");
    td_jbuf_puts(&b, "y");
    assert_string_equal(b.s, "\"a\\\"b\"");
    td_jbuf_fini(&b);
    /* a dump over the maximum fails */
    td_jbuf small = TD_JBUF_INIT(8);
    json_t *v = json_pack("[s]", "0123456789");
    assert_false(td_json_dump_compact(&small, v));
    json_decref(v);
    td_jbuf_fini(&small);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_built),
        cmocka_unit_test(test_deep),
        cmocka_unit_test(test_string_writer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
