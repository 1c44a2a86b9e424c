/* test_jsonfast.c - td_json_loadb against json_loadb(…, 0, …): one row per
 * input, valid and invalid; the values must be equal member for member,
 * in the same order and of the same types, and a failure must carry
 * jansson's own error text. The webhook fixtures are rows too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonarena.h"
#include "core/jsonfast.h"

/* Same answer as jansson for buf[0..len), with or without an arena. */
static void same_as_jansson(const char *name, const char *buf, size_t len)
{
    json_error_t je1, je2;
    memset(&je1, 0, sizeof je1);
    memset(&je2, 0, sizeof je2);
    json_t *want = json_loadb(buf, len, 0, &je1);
    json_t *got = td_json_loadb(buf, len, &je2);
    if (!want) {
        if (got)
            fail_msg("%s: jansson rejects (%s), td_json_loadb accepts", name, je1.text);
        if (strcmp(je1.text, je2.text) != 0 || je1.line != je2.line)
            fail_msg("%s: error \"%s\" line %d, want \"%s\" line %d", name, je2.text, je2.line,
                     je1.text, je1.line);
        return;
    }
    if (!got)
        fail_msg("%s: jansson accepts, td_json_loadb fails (%s)", name, je2.text);
    char *a = json_dumps(want, JSON_COMPACT | JSON_ENCODE_ANY);
    char *b = json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!json_equal(want, got) || strcmp(a, b) != 0)
        fail_msg("%s: got %s, want %s", name, b, a);
    free(a);
    free(b);
    json_decref(want);
    json_decref(got);
}

static const struct {
    const char *name, *text;
} rows[] = {
    {"empty object", "{}"},
    {"empty array", " [ ] "},
    {"nested", "{\"a\":{\"b\":[1,2,{\"c\":null}]},\"d\":true,\"e\":false}"},
    {"whitespace everywhere", "\r\n\t{ \"a\" : [ 1 , 2 ] , \"b\" :\"x\" }\n"},
    {"member order kept", "{\"z\":1,\"a\":2,\"m\":3}"},
    {"duplicate key: last value, first place", "{\"a\":1,\"b\":2,\"a\":3}"},
    {"integers", "[0,-0,1,-1,123456789012345678,-123456789012345678]"},
    {"19 digits: jansson decides", "[1234567890123456789]"},
    {"integer overflow", "[99999999999999999999]"},
    {"negative overflow", "[-99999999999999999999]"},
    {"reals", "[0.5,-0.0,1e3,1E-3,2.5e+10,123.456e-7,1e-400]"},
    {"real overflow", "[1e400]"},
    {"leading zero", "[01]"},
    {"bare minus", "[-]"},
    {"dot without digits", "[1.]"},
    {"exponent without digits", "[1e]"},
    {"plus sign", "[+1]"},
    {"escapes", "[\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"]"},
    {"unicode escapes", "[\"\\u00e9\\u20AC\\ud83d\\ude00x\"]"},
    {"escaped key", "{\"k:{\\\"uid\\\":\\\"x\\\"}\":{}}"},
    {"escaped NUL", "[\"a\\u0000b\"]"},
    {"escaped NUL in key", "{\"a\\u0000\":1}"},
    {"lone high surrogate", "[\"\\ud83dx\"]"},
    {"lone low surrogate", "[\"\\ude00\"]"},
    {"bad escape", "[\"\\x\"]"},
    {"short unicode escape", "[\"\\u12\"]"},
    {"raw control character", "[\"a\tb\"]"},
    {"utf-8", "[\"caf\xc3\xa9\"]"},
    {"invalid utf-8", "[\"\xff\"]"},
    {"literals", "[true,false,null]"},
    {"literal run", "[truex]"},
    {"capitalised literal", "[True]"},
    {"top-level scalar", "1"},
    {"top-level string", "\"x\""},
    {"trailing comma in array", "[1,]"},
    {"trailing comma in object", "{\"a\":1,}"},
    {"missing colon", "{\"a\" 1}"},
    {"non-string key", "{1:2}"},
    {"trailing garbage", "{} x"},
    {"two documents", "{}{}"},
    {"unterminated", "{\"a\":[1,2"},
    {"unterminated string", "[\"abc"},
    {"empty input", ""},
    {"only whitespace", "  \n"},
    {"long key with escapes",
     "{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\\n\":\"v\\n\"}"},
};

static void test_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        same_as_jansson(rows[i].name, rows[i].text, strlen(rows[i].text));
    /* a NUL byte inside the buffer */
    same_as_jansson("NUL byte", "{\"a\":1}\0", 8);
    same_as_jansson("NUL in string", "[\"a\0b\"]", 7);
}

/* The string scanner reads eight bytes at a time: every stop byte (quote,
 * escape, control byte, non-ASCII, NUL) at every offset of strings of 0 to
 * 24 bytes, at every alignment and with the buffer ending right after. */
static void test_string_positions(void **state)
{
    (void)state;
    static const char *const stops[] = {"\\\"", "\\n", "\\u00e9", "\x01", "\x1f", "\xc3\xa9",
                                        "\xff", "\x7f", "\"", " ", "\\", "\x80"};
    char buf[128], name[64];
    for (size_t st = 0; st < sizeof stops / sizeof stops[0]; st++)
        for (size_t len = 0; len <= 24; len++)
            for (size_t at = 0; at <= len; at++)
                for (size_t pad = 0; pad < 3; pad++) {
                    size_t n = 0;
                    memcpy(buf + n, "[   ", 1 + pad);
                    n += 1 + pad;
                    buf[n++] = '"';
                    for (size_t i = 0; i < len; i++) {
                        if (i == at)
                            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s", stops[st]);
                        buf[n++] = (char)('a' + i % 26);
                    }
                    if (at == len)
                        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s", stops[st]);
                    buf[n++] = '"';
                    buf[n++] = ']';
                    snprintf(name, sizeof name, "stop %zu at %zu of %zu", st, at, len);
                    same_as_jansson(name, buf, n);
                    same_as_jansson(name, buf, n - 1); /* unterminated at the end */
                    same_as_jansson(name, buf, n - 2);
                }
}

static void test_depth(void **state)
{
    (void)state;
    for (int depth = 500; depth <= 2100; depth += 800) {
        char *buf = malloc((size_t)depth * 2 + 1);
        assert_non_null(buf);
        memset(buf, '[', (size_t)depth);
        memset(buf + depth, ']', (size_t)depth);
        buf[depth * 2] = 0;
        same_as_jansson("deep arrays", buf, (size_t)depth * 2);
        free(buf);
    }
}

/* td_json_loadb_review: rows of body and the tree it must give (compact,
 * in order), or NULL: jansson's error, the same text and line. */
static const struct {
    const char *name, *text, *want;
} review_rows[] = {
    {"skipped members",
     "{\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"object\":{\"metadata\":{\"name\":\"p\","
     "\"managedFields\":[{\"manager\":\"kubectl\",\"fieldsV1\":{\"f:spec\":{}}}],\"labels\":{}}},"
     "\"oldObject\":{\"a\":[1,2.5,true,null]},\"options\":{\"kind\":\"CreateOptions\"},\"dryRun\":false}}",
     "{\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\",\"object\":{\"metadata\":{\"name\":\"p\","
     "\"labels\":{}}}}}"},
    {"request keeps what the decision reads",
     "{\"request\":{\"uid\":\"u\",\"kind\":{\"kind\":\"Pod\"},\"resource\":{\"resource\":\"pods\"},"
     "\"requestKind\":{\"kind\":\"Pod\"},\"requestResource\":{},\"subResource\":\"\",\"name\":\"n\","
     "\"namespace\":\"ns\",\"operation\":\"CREATE\",\"userInfo\":{\"username\":\"x\",\"groups\":[\"g\"]},"
     "\"object\":{\"status\":{},\"metadata\":{\"ownerReferences\":[]}},\"dryRun\":true}}",
     "{\"request\":{\"uid\":\"u\",\"kind\":{\"kind\":\"Pod\"},\"subResource\":\"\",\"namespace\":"
     "\"ns\",\"operation\":\"CREATE\",\"object\":{\"status\":{},\"metadata\":{\"ownerReferences\":[]}}}}"},
    {"request that is not an object", "{\"request\":[{\"userInfo\":1}]}",
     "{\"request\":[{\"userInfo\":1}]}"},
    {"only at their paths",
     "{\"oldObject\":1,\"request\":[{\"oldObject\":2}],\"x\":{\"request\":{\"options\":3}}}",
     "{\"oldObject\":1,\"request\":[{\"oldObject\":2}],\"x\":{\"request\":{\"options\":3}}}"},
    {"duplicates of a skipped member", "{\"request\":{\"options\":1,\"uid\":\"a\",\"options\":{}}}",
     "{\"request\":{\"uid\":\"a\"}}"},
    {"bad text in a skipped member", "{\"request\":{\"oldObject\":{\"a\":tru}}}", NULL},
    {"bad number in a skipped member", "{\"request\":{\"options\":[01]}}", NULL},
    {"unclosed skipped member", "{\"request\":{\"oldObject\":{\"a\":[1,2}}}", NULL},
    {"control byte in a skipped string", "{\"request\":{\"options\":\"a\x01\"}}", NULL},
};

static void test_review_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof review_rows / sizeof review_rows[0]; i++) {
        const char *t = review_rows[i].text;
        json_error_t je1, je2;
        memset(&je1, 0, sizeof je1);
        memset(&je2, 0, sizeof je2);
        print_message("review row: %s\n", review_rows[i].name);
        json_t *got = td_json_loadb_review(t, strlen(t), &je2);
        if (!review_rows[i].want) {
            assert_null(json_loadb(t, strlen(t), 0, &je1));
            if (got)
                fail_msg("%s: accepted what jansson rejects", review_rows[i].name);
            assert_string_equal(je1.text, je2.text);
            assert_int_equal(je1.line, je2.line);
            continue;
        }
        assert_non_null(got);
        char *d = json_dumps(got, JSON_COMPACT | JSON_PRESERVE_ORDER);
        assert_string_equal(d, review_rows[i].want);
        free(d);
        json_decref(got);
    }
}

/* The fixture through td_json_loadb_review: the full tree less the
 * members it leaves out; its truncations fail as jansson fails. */
static void review_same_as_jansson(const char *name, const char *buf, size_t len)
{
    json_error_t je1, je2;
    memset(&je1, 0, sizeof je1);
    memset(&je2, 0, sizeof je2);
    json_t *want = json_loadb(buf, len, 0, &je1);
    json_t *got = td_json_loadb_review(buf, len, &je2);
    if (!want) {
        if (got)
            fail_msg("%s: jansson rejects (%s), td_json_loadb_review accepts", name, je1.text);
        if (strcmp(je1.text, je2.text) != 0 || je1.line != je2.line)
            fail_msg("%s: error \"%s\", want \"%s\"", name, je2.text, je1.text);
        return;
    }
    assert_non_null(got);
    /* what the webhook's parse leaves out (jsonfast.h) */
    static const char *const dropped[] = {"oldObject",   "options",         "userInfo", "resource",
                                          "requestKind", "requestResource", "dryRun",   "name"};
    json_t *req = json_object_get(want, "request");
    for (size_t i = 0; i < sizeof dropped / sizeof dropped[0]; i++)
        json_object_del(req, dropped[i]);
    json_object_del(json_object_get(json_object_get(req, "object"), "metadata"), "managedFields");
    if (!json_equal(want, got))
        fail_msg("%s: td_json_loadb_review differs beyond the skipped members", name);
    assert_null(json_object_get(json_object_get(got, "request"), "options"));
    json_decref(want);
    json_decref(got);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(1 << 20);
    *len = buf ? fread(buf, 1, 1 << 20, f) : 0;
    fclose(f);
    return buf;
}

static void test_fixtures(void **state)
{
    (void)state;
    const char *files[] = {"bench/fixtures/review.json", "examples/pods/review.json"};
    const char *root = getenv("TD_SOURCE_DIR") ? getenv("TD_SOURCE_DIR") : ".";
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        size_t len = 0;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", root, files[i]);
        char *buf = slurp(path, &len);
        assert_non_null(buf);
        same_as_jansson(files[i], buf, len);
        /* inside the request arena, as the webhook parses it */
        assert_true(td_json_arena_begin());
        json_t *v = td_json_loadb(buf, len, NULL);
        assert_non_null(v);
        assert_true(td_json_arena_used() > 0);
        json_decref(v);
        td_json_arena_end();
        /* every truncation fails as jansson fails */
        for (size_t cut = 0; cut < len; cut += 97)
            same_as_jansson("truncated fixture", buf, cut);
        review_same_as_jansson(files[i], buf, len);
        for (size_t cut = 0; cut < len; cut += 31)
            review_same_as_jansson("truncated fixture (review)", buf, cut);
        free(buf);
    }
}

int main(void)
{
    td_json_arena_install();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_depth),
        cmocka_unit_test(test_string_positions),
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_review_rows),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    td_json_arena_release();
    return rc;
}
