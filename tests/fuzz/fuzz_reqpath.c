/* fuzz_reqpath.c - libFuzzer target for the gateway's request-target
 * normalization (src/core/reqpath.c): a refusal leaves the target as it
 * was; an accepted target comes out no longer, with a path that agrees
 * with a plain segment-stack reading of RFC 3986 remove_dot_segments over
 * merged slashes, holds no byte or escape that was to be refused, and
 * normalizes to itself; the prefix match agrees with a segment-wise one.
 * Aborts on any mismatch. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/reqpath.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, __VA_ARGS__);                                                              \
        abort();                                                                                   \
    } while (0)

/* The reference: segments between '/', empty ones and "." skipped, ".."
 * popping one (NULL if none to pop), joined under "/", a trailing '/' when
 * the last segment was empty, "." or "..". out has room for n + 2. */
static char *reference(const char *p, size_t n, char *out)
{
    size_t starts[4096], lens[4096], depth = 0;
    int last_dir = 0;
    for (size_t i = 1; i <= n;) {
        size_t e = i;
        while (e < n && p[e] != '/')
            e++;
        size_t len = e - i;
        if (len == 0 || (len == 1 && p[i] == '.')) {
            last_dir = 1;
        } else if (len == 2 && p[i] == '.' && p[i + 1] == '.') {
            if (depth == 0)
                return NULL;
            depth--;
            last_dir = 1;
        } else {
            if (depth == sizeof starts / sizeof starts[0])
                return NULL;
            starts[depth] = i;
            lens[depth++] = len;
            last_dir = 0;
        }
        i = e + 1;
    }
    size_t w = 0;
    out[w++] = '/';
    for (size_t d = 0; d < depth; d++) {
        memcpy(out + w, p + starts[d], lens[d]);
        w += lens[d];
        if (d + 1 < depth || last_dir)
            out[w++] = '/';
    }
    out[w] = '\0';
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8000)
        return 0;
    char *t = malloc(size + 1), *orig = malloc(size + 1), *ref = malloc(size + 3);
    if (!t || !orig || !ref)
        goto out;
    memcpy(t, data, size);
    t[size] = '\0';
    memcpy(orig, t, size + 1);
    size_t n_out = 0, plen = 0;
    td_err err;
    if (td_reqpath_normalize(t, size, &n_out, &plen, &err) != TD_OK) {
        if (memcmp(t, orig, size) != 0)
            FAIL("a refusal changed the target\n");
        goto out;
    }
    if (n_out > size || plen > n_out || plen == 0 || t[0] != '/')
        FAIL("lengths: %zu of %zu, path %zu\n", n_out, size, plen);
    const char *q = memchr(orig, '?', size);
    size_t oplen = q ? (size_t)(q - orig) : size;
    if (n_out - plen != size - oplen || memcmp(t + plen, orig + oplen, size - oplen) != 0)
        FAIL("the query changed\n");
    /* the reference reads the original path the same way */
    if (!reference(orig, oplen, ref))
        FAIL("accepted a path the reference refuses (.. above the root)\n");
    if (strlen(ref) != plen || memcmp(ref, t, plen) != 0)
        FAIL("path \"%.*s\", the reference says \"%s\"\n", (int)plen, t, ref);
    for (size_t i = 0; i < n_out; i++) {
        unsigned char ch = (unsigned char)t[i];
        if (ch <= 0x20 || ch == 0x7f || ch == '#')
            FAIL("byte 0x%02x survived at %zu\n", ch, i);
        if (i < plen && ch == '\\')
            FAIL("backslash survived\n");
        if (i < plen && ch == '%' &&
            (i + 2 >= plen || strncasecmp(t + i + 1, "2e", 2) == 0 ||
             strncasecmp(t + i + 1, "2f", 2) == 0 || strncasecmp(t + i + 1, "5c", 2) == 0))
            FAIL("escape survived at %zu\n", i);
    }
    /* normalizing again changes nothing */
    memcpy(ref, t, n_out);
    size_t n2 = 0, p2 = 0;
    if (td_reqpath_normalize(ref, n_out, &n2, &p2, NULL) != TD_OK || n2 != n_out || p2 != plen ||
        memcmp(ref, t, n_out) != 0)
        FAIL("not idempotent\n");
    /* segment-wise prefixes */
    static const char *const prefixes[] = {"/", "/v1/", "/v1/embeddings", "/a", "/a/b/"};
    for (size_t k = 0; k < sizeof prefixes / sizeof prefixes[0]; k++) {
        const char *pf = prefixes[k];
        size_t pl = strlen(pf);
        int want = plen >= pl && memcmp(t, pf, pl) == 0 &&
                   (plen == pl || pf[pl - 1] == '/' || t[pl] == '/');
        if (td_reqpath_has_prefix(t, plen, pf, pl) != want)
            FAIL("prefix %s disagrees on \"%.*s\"\n", pf, (int)plen, t);
    }
out:
    free(t);
    free(orig);
    free(ref);
    return 0;
}
