/* test_reqpath.c - request-target normalization and the segment-wise route
 * prefix: rows of RFC 3986 5.2.4 and 5.4, of Envoy's path_utility_test
 * (NormalizeValidPaths, InvalidPaths, MergeSlashes) where tenantd refuses
 * what Envoy rewrites, and the attacks of issue 17 item 7. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/reqpath.h"

typedef struct {
    const char *name;
    const char *in;
    const char *want; /* NULL: refused (TD_EINVAL) */
} row;

static const row rows[] = {
    /* already normal (Envoy AlreadyNormalPaths) */
    {"root", "/", "/"},
    {"one segment", "/xyz", "/xyz"},
    {"three segments", "/x/y/z", "/x/y/z"},
    {"trailing slash kept", "/x/y/", "/x/y/"},
    {"query kept", "/v1/models?limit=5&x=/../y", "/v1/models?limit=5&x=/../y"},
    {"empty query", "/a?", "/a?"},
    /* RFC 3986 5.2.4 remove_dot_segments and 5.4.1 against /b/c/d;p */
    {"rfc 5.2.4 example", "/a/b/c/./../../g", "/a/g"},
    {"rfc ./g", "/b/c/./g", "/b/c/g"},
    {"rfc g/", "/b/c/g/", "/b/c/g/"},
    {"rfc .", "/b/c/.", "/b/c/"},
    {"rfc ./", "/b/c/./", "/b/c/"},
    {"rfc ..", "/b/c/..", "/b/"},
    {"rfc ../", "/b/c/../", "/b/"},
    {"rfc ../g", "/b/c/../g", "/b/g"},
    {"rfc ../..", "/b/c/../..", "/"},
    {"rfc ../../", "/b/c/../../", "/"},
    {"rfc ../../g", "/b/c/../../g", "/g"},
    {"rfc g;x=1/./y", "/b/c/g;x=1/./y", "/b/c/g;x=1/y"},
    {"rfc g;x=1/../y", "/b/c/g;x=1/../y", "/b/c/y"},
    {"rfc g.", "/b/c/g.", "/b/c/g."},
    {"rfc .g", "/b/c/.g", "/b/c/.g"},
    {"rfc g..", "/b/c/g..", "/b/c/g.."},
    {"rfc ..g", "/b/c/..g", "/b/c/..g"},
    {"rfc ./../g", "/b/c/./../g", "/b/g"},
    {"rfc ./g/.", "/b/c/./g/.", "/b/c/g/"},
    {"rfc g/./h", "/b/c/g/./h", "/b/c/g/h"},
    {"rfc g/../h", "/b/c/g/../h", "/b/c/h"},
    {"rfc abnormal ../../../g (RFC clamps; refused)", "/b/c/../../../g", NULL},
    {"rfc abnormal ../../../../g", "/b/c/../../../../g", NULL},
    /* Envoy NormalizeValidPaths */
    {"envoy parent dir", "/a/b/../c", "/a/c"},
    {"envoy current dir", "/a/b/./c", "/a/b/c"},
    {"envoy non / start (refused)", "a/b/../c", NULL},
    {"envoy out number parent (refused)", "/a/b/../../../../c", NULL},
    {"envoy ..\\ canonicalization (refused)", "/a/..\\c", NULL},
    {"envoy 2-byte unicode kept", "/%c0%af", "/%c0%af"},
    {"envoy %5c (refused)", "/%5c%25", NULL},
    {"envoy %25 kept", "/%25", "/%25"},
    {"envoy %2E%2E (refused)", "/a/b/%2E%2E/c", NULL},
    {"envoy %2E. (refused)", "/a/b/%2E./c", NULL},
    {"envoy %2E (refused)", "/a/b/%2E/c", NULL},
    {"envoy bare .. (refused)", "..", NULL},
    {"envoy /../a/b (refused: above the root)", "/../a/b", NULL},
    {"envoy /./a/b", "/./a/b", "/a/b"},
    {"envoy ..;foo=bar in the middle (refused)", "/xyz/..;foo=bar/abc", NULL},
    {"envoy starting ..;foo=bar (refused)", "/..;foo=bar/abc", NULL},
    {"envoy .;foo=bar (refused)", "/xyz/.;foo=bar/abc", NULL},
    {"parameter after a name kept", "/xyz/a;b=../c", "/xyz/a;b=../c"},
    /* Envoy InvalidPaths */
    {"envoy .%00..", "/xyz/.%00../abc", NULL},
    {"envoy %00.%00.", "/xyz/%00.%00./abc", NULL},
    {"envoy %%0000", "/xyz/AAAAA%%0000/abc", NULL},
    /* Envoy MergeSlashes (and nginx merge_slashes) */
    {"merge //", "//", "/"},
    {"merge ///a//b//c", "///a//b//c", "/a/b/c"},
    {"merge /a//b/", "/a//b/", "/a/b/"},
    {"merge /a///b", "/a///b", "/a/b"},
    {"merge keeps the query's", "/a//b?c//d", "/a/b?c//d"},
    {"merge then dots", "/v1//../chat", "/chat"},
    {"empty segment then ..", "/v1/embeddings//../../chat/completions", "/chat/completions"},
    /* issue 17 item 7 */
    {"dot-dot out of a route", "/v1/embeddings/../chat/completions", "/v1/chat/completions"},
    {"encoded dot-dot", "/v1/embeddings/%2e%2e/chat/completions", NULL},
    {"encoded dot-dot upper", "/v1/embeddings/%2E%2E/chat/completions", NULL},
    {"half-encoded dot-dot", "/v1/embeddings/.%2e/chat/completions", NULL},
    {"encoded slash", "/v1/embeddings%2f..%2fchat", NULL},
    {"encoded slash upper", "/v1/embeddings%2F..%2Fchat", NULL},
    {"encoded backslash", "/v1/embeddings%5c..%5cchat", NULL},
    {"encoded backslash upper", "/v1/embeddings%5C..", NULL},
    {"fragment", "/v1/embeddings#/../chat", NULL},
    {"fragment in the query", "/v1/embeddings?a=1#x", NULL},
    {"space", "/v1/emb eddings", NULL},
    {"tab", "/v1/emb\teddings", NULL},
    {"form feed", "/v1/\fx", NULL},
    {"CR", "/v1/x\r", NULL},
    {"DEL", "/v1/\x7f", NULL},
    {"tab in the query", "/v1/x?a=\t", NULL},
    {"escaped NUL", "/v1/x%00", NULL},
    {"escaped CR LF", "/v1/x%0d%0aHost:%20evil", NULL},
    {"escaped DEL", "/v1/x%7F", NULL},
    {"truncated escape", "/v1/x%2", NULL},
    {"escape at the end", "/v1/x%", NULL},
    {"bad hex", "/v1/x%zz", NULL},
    {"escape before the query", "/v1/x%?a", NULL},
    {"other escapes kept", "/v1/a%20b%41", "/v1/a%20b%41"},
    {"percent in the query kept", "/v1/x?q=100%", "/v1/x?q=100%"},
    {"high bytes kept", "/v1/\xc3\xa9", "/v1/\xc3\xa9"},
    {"asterisk-form", "*", NULL},
    {"empty", "", NULL},
};

static void test_normalize_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row *r = &rows[i];
        char buf[256];
        size_t n = strlen(r->in), out = 0, plen = 0;
        memcpy(buf, r->in, n + 1);
        td_err err = {{0}};
        td_status st = td_reqpath_normalize(buf, n, &out, &plen, &err);
        if (!r->want) {
            if (st != TD_EINVAL)
                fail_msg("%s: \"%s\" not refused (got \"%.*s\")", r->name, r->in, (int)out, buf);
            if (!err.msg[0])
                fail_msg("%s: refused without a message", r->name);
            /* a refusal leaves the target as it was */
            if (memcmp(buf, r->in, n + 1) != 0)
                fail_msg("%s: refusal changed the target", r->name);
            continue;
        }
        if (st != TD_OK)
            fail_msg("%s: \"%s\" refused: %s", r->name, r->in, err.msg);
        if (out != strlen(r->want) || memcmp(buf, r->want, out) != 0)
            fail_msg("%s: \"%s\" -> \"%.*s\", want \"%s\"", r->name, r->in, (int)out, buf, r->want);
        const char *q = strchr(r->want, '?');
        size_t want_plen = q ? (size_t)(q - r->want) : strlen(r->want);
        if (plen != want_plen)
            fail_msg("%s: path length %zu, want %zu", r->name, plen, want_plen);
        /* normalizing is idempotent */
        size_t out2 = 0, plen2 = 0;
        if (td_reqpath_normalize(buf, out, &out2, &plen2, NULL) != TD_OK || out2 != out)
            fail_msg("%s: not idempotent", r->name);
    }
}

typedef struct {
    const char *name, *path, *prefix;
    bool want;
} prefix_row;

static const prefix_row prefix_rows[] = {
    {"equal", "/v1/embeddings", "/v1/embeddings", true},
    {"below", "/v1/embeddings/x", "/v1/embeddings", true},
    {"inside a segment", "/v1/embeddingsXYZ", "/v1/embeddings", false},
    {"inside a segment, longer", "/v1/embeddings-v2/x", "/v1/embeddings", false},
    {"prefix ending in /", "/v1/chat", "/v1/", true},
    {"prefix ending in /, the bare parent", "/v1", "/v1/", false},
    {"root takes all", "/anything", "/", true},
    {"root itself", "/", "/", true},
    {"shorter path", "/v1", "/v1/embeddings", false},
    {"other tree", "/v2/embeddings", "/v1/embeddings", false},
    {"trailing slash under a bare prefix", "/v1/embeddings/", "/v1/embeddings", true},
};

static void test_prefix_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof prefix_rows / sizeof prefix_rows[0]; i++) {
        const prefix_row *r = &prefix_rows[i];
        bool got = td_reqpath_has_prefix(r->path, strlen(r->path), r->prefix, strlen(r->prefix));
        if (got != r->want)
            fail_msg("%s: \"%s\" under \"%s\": %d, want %d", r->name, r->path, r->prefix, got,
                     r->want);
    }
}

/* A NUL-free target that does not end the buffer: only n bytes are read. */
static void test_bounded(void **state)
{
    (void)state;
    char buf[] = "/a/../b%2e"; /* the escape is past n */
    size_t out, plen;
    assert_int_equal(td_reqpath_normalize(buf, 7, &out, &plen, NULL), TD_OK);
    assert_int_equal(out, 2);
    assert_memory_equal(buf, "/b", 2);
    char esc[] = "/a%2";
    assert_int_equal(td_reqpath_normalize(esc, 3, &out, &plen, NULL), TD_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalize_rows),
        cmocka_unit_test(test_prefix_rows),
        cmocka_unit_test(test_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
