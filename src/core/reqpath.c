/* reqpath.c - request-target normalization and segment-wise prefix match
 * (see reqpath.h). Two passes over the target: the first checks every
 * byte and the depth of every "..", so a refusal leaves the target as it
 * was; the second rewrites the path in place (it only ever shrinks). */
#include "core/reqpath.h"

#include <string.h>
#include "core/hex.h"

/* The bytes of seg (len) are "." or "..": 1 or 2, else 0. */
static int dots(const char *seg, size_t len)
{
    if (len == 1 && seg[0] == '.')
        return 1;
    if (len == 2 && seg[0] == '.' && seg[1] == '.')
        return 2;
    return 0;
}

/* seg is "." or ".." with path parameters (".;x", "..;x"), which Tomcat,
 * Jetty and Envoy's normalize_path read as the dot segment itself. */
static int dot_params(const char *seg, size_t len)
{
    return (len >= 2 && seg[0] == '.' && seg[1] == ';') ||
           (len >= 3 && seg[0] == '.' && seg[1] == '.' && seg[2] == ';');
}

/* First pass over the path (plen bytes of t) and query (the rest). */
static td_status check(const char *t, size_t n, size_t plen, td_err *err)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)t[i];
        if (ch <= 0x20 || ch == 0x7f)
            return td_err_set(err, TD_EINVAL,
                              "the request target has a control byte or whitespace (0x%02x) at "
                              "offset %zu",
                              ch, i);
        if (ch == '#')
            return td_err_set(err, TD_EINVAL,
                              "the request target has a fragment ('#' at offset %zu); a "
                              "fragment is never sent to a server",
                              i);
        if (ch == '%' && i < plen) {
            int hi = i + 2 < n ? td_hexval((unsigned char)t[i + 1]) : -1;
            int lo = hi >= 0 ? td_hexval((unsigned char)t[i + 2]) : -1;
            if (lo < 0)
                return td_err_set(err, TD_EINVAL,
                                  "the path has a '%%' at offset %zu not followed by two hex "
                                  "digits",
                                  i);
            int v = hi << 4 | lo;
            if (v == '.' || v == '/' || v == '\\')
                return td_err_set(err, TD_EINVAL,
                                  "the path has an escaped '%c' (%%%c%c at offset %zu); send "
                                  "it unescaped",
                                  v, t[i + 1], t[i + 2], i);
            if (v < 0x20 || v == 0x7f)
                return td_err_set(err, TD_EINVAL,
                                  "the path has an escaped control byte (%%%c%c at offset %zu)",
                                  t[i + 1], t[i + 2], i);
            i += 2;
        } else if (ch == '\\' && i < plen) {
            return td_err_set(err, TD_EINVAL,
                              "the path has a backslash at offset %zu; some servers read it as "
                              "'/'",
                              i);
        }
    }
    /* the depth each ".." leaves, so that one above the root is refused
     * before anything is rewritten */
    size_t depth = 0;
    for (size_t i = 1; i <= plen;) {
        size_t e = i;
        while (e < plen && t[e] != '/')
            e++;
        int d = dots(t + i, e - i);
        if (dot_params(t + i, e - i))
            return td_err_set(err, TD_EINVAL,
                              "the path has a dot segment with parameters at offset %zu (\"..;\" "
                              "is \"..\" to some servers)",
                              i);
        if (d == 2) {
            if (depth == 0)
                return td_err_set(err, TD_EINVAL,
                                  "the path's \"..\" at offset %zu climbs above the root", i);
            depth--;
        } else if (d == 0 && e > i) {
            depth++;
        }
        i = e + 1;
    }
    return TD_OK;
}

td_status td_reqpath_normalize(char *t, size_t n, size_t *n_out, size_t *path_len, td_err *err)
{
    if (!t || n == 0 || t[0] != '/')
        return td_err_set(err, TD_EINVAL,
                          "the request target must start with '/' (origin-form) "
                          "or be an absolute URL");
    const char *q = memchr(t, '?', n);
    size_t plen = q ? (size_t)(q - t) : n;
    td_status st = check(t, n, plen, err);
    if (st != TD_OK)
        return st;
    /* The output is "/" then each kept segment followed by '/'; the '/'
     * after the last one is dropped unless the input ended in "/", "/." or
     * "/..". The write position w never passes the read position i. */
    size_t w = 1;
    for (size_t i = 1; i <= plen;) {
        size_t e = i;
        while (e < plen && t[e] != '/')
            e++;
        size_t len = e - i;
        int d = dots(t + i, len);
        int last = e >= plen;
        if (d == 2) {
            /* check() saw the depth: there is a segment to remove */
            w--; /* the '/' after the segment */
            while (w > 0 && t[w - 1] != '/')
                w--;
        } else if (d == 0 && len > 0) {
            memmove(t + w, t + i, len);
            w += len;
            if (!last)
                t[w++] = '/';
        }
        i = e + 1;
    }
    size_t qlen = n - plen;
    if (qlen)
        memmove(t + w, t + plen, qlen);
    *path_len = w;
    *n_out = w + qlen;
    return TD_OK;
}

bool td_reqpath_has_prefix(const char *path, size_t n, const char *prefix, size_t plen)
{
    if (plen > n || memcmp(path, prefix, plen) != 0)
        return false;
    return plen == n || (plen > 0 && prefix[plen - 1] == '/') || path[plen] == '/';
}
