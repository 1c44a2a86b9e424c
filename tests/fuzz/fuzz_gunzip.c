/* fuzz_gunzip.c - libFuzzer target for the bounded gzip inflater of request
 * bodies (src/io/gunzip.c). The first two bytes choose the bound (0..65535),
 * the rest is the body. Checks: an accepted body is at most the bound and
 * NUL-terminated; inflating it again with the bound set to its exact size
 * gives the same bytes, and with one byte less TD_EQUOTA (the bound is
 * exact); a refusal leaves no output. Also folds the input, as text, into
 * a Content-Encoding verdict. Aborts on any mismatch. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gunzip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, __VA_ARGS__);                                                              \
        abort();                                                                                   \
    } while (0)

static void coding(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return;
    memcpy(s, data, size);
    s[size] = '\0';
    td_coding c = TD_CODING_IDENTITY;
    char bad[16];
    bad[0] = '\0';
    td_gunzip_coding(s, &c, bad, sizeof bad);
    if (c == TD_CODING_OTHER && strlen(bad) >= sizeof bad)
        FAIL("the offending coding overran its buffer\n");
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    coding(data, size);
    if (size < 2)
        return 0;
    size_t max = (size_t)data[0] << 8 | data[1];
    const uint8_t *in = data + 2;
    size_t n = size - 2;
    char *out = NULL;
    size_t len = 0;
    td_err err;
    td_status st = td_gunzip(in, n, max, &out, &len, &err);
    if (st != TD_OK) {
        if (out)
            FAIL("a refusal (%d) left output\n", st);
        if (st != TD_EQUOTA && st != TD_EINVAL && st != TD_ENOMEM)
            FAIL("unexpected status %d\n", st);
        return 0;
    }
    if (len > max || out[len] != '\0')
        FAIL("accepted %zu bytes under a bound of %zu\n", len, max);
    char *again = NULL;
    size_t len2 = 0;
    if (td_gunzip(in, n, len, &again, &len2, &err) != TD_OK || len2 != len ||
        memcmp(again, out, len) != 0)
        FAIL("the same body with its exact size as bound differs\n");
    free(again);
    if (len > 0) {
        st = td_gunzip(in, n, len - 1, &again, &len2, &err);
        if (st != TD_EQUOTA || again)
            FAIL("one byte under its size, the body was not refused as too big (%d)\n", st);
    }
    free(out);
    return 0;
}
