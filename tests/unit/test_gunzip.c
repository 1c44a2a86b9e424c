/* test_gunzip.c - gzip request bodies (io/gunzip.c), table-driven: the
 * Content-Encoding verdicts, and inflation under a bound (exact fits, one
 * byte over, a bomb, several members, trailing bytes, truncation, other
 * wrappers) of real streams made with zlib's deflate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "io/gunzip.h"

static void test_coding(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        const char *values[3]; /* the Content-Encoding fields, in order */
        td_coding want;
        const char *bad;
    } cases[] = {
        {"none", {NULL}, TD_CODING_IDENTITY, ""},
        {"identity", {"identity"}, TD_CODING_IDENTITY, ""},
        {"empty", {""}, TD_CODING_IDENTITY, ""},
        {"gzip", {"gzip"}, TD_CODING_GZIP, ""},
        {"GZIP, any case", {"GZip"}, TD_CODING_GZIP, ""},
        {"x-gzip", {"x-gzip"}, TD_CODING_GZIP, ""},
        {"gzip with identity", {"identity, gzip"}, TD_CODING_GZIP, ""},
        {"gzip in two fields, one identity", {"gzip", "identity"}, TD_CODING_GZIP, ""},
        {"br", {"br"}, TD_CODING_OTHER, "br"},
        {"deflate", {"deflate"}, TD_CODING_OTHER, "deflate"},
        {"zstd after gzip", {"gzip, zstd"}, TD_CODING_OTHER, "zstd"},
        {"gzip twice", {"gzip, gzip"}, TD_CODING_OTHER, "gzip"},
        {"gzip in two fields", {"gzip", "gzip"}, TD_CODING_OTHER, "gzip"},
        {"a parameter", {"gzip;q=1"}, TD_CODING_OTHER, "gzip;q=1"},
        {"compress", {"compress"}, TD_CODING_OTHER, "compress"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        td_coding c = TD_CODING_IDENTITY;
        char bad[40] = "";
        for (size_t k = 0; k < 3 && cases[i].values[k]; k++)
            td_gunzip_coding(cases[i].values[k], &c, bad, sizeof bad);
        if (c != cases[i].want || strcmp(bad, cases[i].bad) != 0)
            fail_msg("%s: got %d \"%s\", want %d \"%s\"", cases[i].name, c, bad, cases[i].want,
                     cases[i].bad);
    }
}

/* n bytes of a pattern (compressible, not all alike). */
static unsigned char *plain(size_t n)
{
    unsigned char *p = malloc(n ? n : 1);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)("tenantd gzip body "[i % 18]);
    return p;
}

/* The gzip stream of in (n bytes) at level, malloc'd into *out. */
static size_t gz(const unsigned char *in, size_t n, int level, int wbits, unsigned char **out)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    assert_int_equal(deflateInit2(&z, level, Z_DEFLATED, wbits, 9, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = deflateBound(&z, (uLong)n) + 32;
    *out = malloc(cap);
    assert_non_null(*out);
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    z.next_out = *out;
    z.avail_out = (uInt)cap;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    size_t len = cap - z.avail_out;
    deflateEnd(&z);
    return len;
}

typedef enum { ONE, TWO_MEMBERS, TRAILING, TRUNCATED, ZLIB_WRAPPER, RAW_TEXT, FLIPPED } shape;

static void test_inflate(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        size_t n;      /* plain bytes */
        int level;     /* 0..9 */
        shape how;
        size_t max;
        td_status want;
        size_t want_len;  /* on TD_OK */
        const char *msg;  /* in the error, or NULL */
    } cases[] = {
        {"small", 100, 6, ONE, 1000, TD_OK, 100, NULL},
        {"empty stream", 0, 6, ONE, 1000, TD_OK, 0, NULL},
        {"stored blocks", 5000, 0, ONE, 10000, TD_OK, 5000, NULL},
        {"exactly max", 4096, 9, ONE, 4096, TD_OK, 4096, NULL},
        {"one byte over", 4097, 9, ONE, 4096, TD_EQUOTA, 0, "more than 4096 bytes"},
        {"max 0, empty", 0, 6, ONE, 0, TD_OK, 0, NULL},
        {"max 0, one byte", 1, 6, ONE, 0, TD_EQUOTA, 0, NULL},
        {"bomb: 64 MiB of pattern, max 1 MiB", (size_t)64 << 20, 9, ONE, 1 << 20, TD_EQUOTA, 0,
         "more than 1048576 bytes"},
        {"big but within", 3 << 20, 6, ONE, 4 << 20, TD_OK, 3 << 20, NULL},
        {"two members back to back", 300, 6, TWO_MEMBERS, 1000, TD_OK, 600, NULL},
        {"two members over max together", 300, 6, TWO_MEMBERS, 500, TD_EQUOTA, 0, NULL},
        {"trailing garbage", 300, 6, TRAILING, 1000, TD_EINVAL, 0, "after its end"},
        {"truncated", 5000, 6, TRUNCATED, 10000, TD_EINVAL, 0, NULL},
        {"a zlib stream is not gzip", 300, 6, ZLIB_WRAPPER, 1000, TD_EINVAL, 0, "corrupt"},
        {"plain text labelled gzip", 300, 6, RAW_TEXT, 1000, TD_EINVAL, 0, "corrupt"},
        {"a flipped byte in the data", 5000, 6, FLIPPED, 10000, TD_EINVAL, 0, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned char *p = plain(cases[i].n), *z = NULL;
        size_t zn = 0;
        int wbits = cases[i].how == ZLIB_WRAPPER ? MAX_WBITS : 16 + MAX_WBITS;
        zn = gz(p, cases[i].n, cases[i].level, wbits, &z);
        if (cases[i].how == TWO_MEMBERS || cases[i].how == TRAILING) {
            z = realloc(z, 2 * zn + 8);
            assert_non_null(z);
            if (cases[i].how == TWO_MEMBERS) {
                memcpy(z + zn, z, zn);
                zn *= 2;
            } else {
                memcpy(z + zn, "garbage!", 8);
                zn += 8;
            }
        } else if (cases[i].how == TRUNCATED) {
            zn /= 2;
        } else if (cases[i].how == RAW_TEXT) {
            free(z);
            z = plain(cases[i].n);
            zn = cases[i].n;
        } else if (cases[i].how == FLIPPED) {
            z[zn / 2] ^= 0x55;
        }
        char *out = NULL;
        size_t len = 0;
        td_err err;
        err.msg[0] = '\0';
        td_status st = td_gunzip(z, zn, cases[i].max, &out, &len, &err);
        if (st != cases[i].want)
            fail_msg("%s: got %s (%s), want %s", cases[i].name, td_strerror(st), err.msg,
                     td_strerror(cases[i].want));
        if (st == TD_OK && (len != cases[i].want_len || out[len] != '\0' ||
                            (cases[i].how == ONE && memcmp(out, p, len) != 0)))
            fail_msg("%s: %zu bytes back, want %zu equal to the input", cases[i].name, len,
                     cases[i].want_len);
        if (st != TD_OK && (out || (cases[i].msg && !strstr(err.msg, cases[i].msg))))
            fail_msg("%s: message \"%s\", want \"%s\"", cases[i].name, err.msg,
                     cases[i].msg ? cases[i].msg : "");
        free(out);
        free(z);
        free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coding),
        cmocka_unit_test(test_inflate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
