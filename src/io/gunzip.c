/* gunzip.c - gzip request bodies inflated under a bound (gunzip.h). The
 * output buffer grows by doubling and never past max + 1 bytes: the extra
 * byte is how a body that inflates past max is told from one that fills
 * it exactly. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "io/gunzip.h"

void td_gunzip_coding(const char *value, td_coding *acc, char *bad, size_t cap)
{
    for (const char *p = value; p && *p && *acc != TD_CODING_OTHER;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        size_t k = strcspn(p, ", \t");
        /* a coding has no parameters (RFC 9110 8.4.1); whitespace inside a
         * member reads as a second member, which is then refused */
        if (k == 0)
            break;
        if (k == 8 && strncasecmp(p, "identity", 8) == 0) {
            /* nothing */
        } else if (*acc == TD_CODING_IDENTITY && ((k == 4 && strncasecmp(p, "gzip", 4) == 0) ||
                                                  (k == 6 && strncasecmp(p, "x-gzip", 6) == 0))) {
            *acc = TD_CODING_GZIP;
        } else {
            *acc = TD_CODING_OTHER;
            if (bad && cap) {
                size_t m = k < cap - 1 ? k : cap - 1;
                memcpy(bad, p, m);
                bad[m] = '\0';
            }
        }
        p += k;
    }
}

/* Makes room for more output: doubles *cap, at most to max + 1. 0, or -1
 * when *cap is already max + 1 (the caller reports the bound), -2 when
 * out of memory. */
static int grow(char **buf, size_t *cap, size_t max)
{
    size_t limit = max == SIZE_MAX ? SIZE_MAX : max + 1;
    if (*cap >= limit)
        return -1;
    size_t ncap = *cap > limit / 2 ? limit : *cap * 2;
    char *nb = realloc(*buf, ncap + 1); /* + 1: the NUL past the data */
    if (!nb)
        return -2;
    *buf = nb;
    *cap = ncap;
    return 0;
}

/* Runs inflate over every member in z's input; *len counts the output. */
static td_status inflate_all(z_stream *z, const unsigned char *in, size_t n, size_t max,
                             char **buf, size_t *cap, size_t *len, td_err *err)
{
    size_t fed = 0;
    for (;;) {
        if (*len == *cap) {
            int g = grow(buf, cap, max);
            if (g == -1)
                return td_err_set(err, TD_EQUOTA,
                                  "the gzip body inflates to more than %zu bytes", max);
            if (g == -2)
                return td_err_set(err, TD_ENOMEM, "out of memory inflating the gzip body");
        }
        if (z->avail_in == 0 && fed < n) {
            size_t k = n - fed < UINT_MAX ? n - fed : UINT_MAX;
            z->next_in = (Bytef *)(in + fed);
            z->avail_in = (uInt)k;
            fed += k;
        }
        size_t room = *cap - *len < UINT_MAX ? *cap - *len : UINT_MAX;
        z->next_out = (Bytef *)(*buf + *len);
        z->avail_out = (uInt)room;
        int rc = inflate(z, Z_NO_FLUSH);
        *len += room - z->avail_out;
        size_t at = fed - z->avail_in; /* input consumed so far */
        if (rc == Z_STREAM_END) {
            if (at == n)
                return TD_OK;
            /* another member must follow, starting with gzip's magic */
            if (n - at < 2 || in[at] != 0x1f || in[at + 1] != 0x8b)
                return td_err_set(err, TD_EINVAL,
                                  "the gzip body has %zu bytes after its end at byte %zu that "
                                  "are not another gzip member",
                                  n - at, at);
            if (inflateReset(z) != Z_OK)
                return td_err_set(err, TD_EINVAL, "the gzip body cannot be inflated");
            continue;
        }
        if (rc == Z_MEM_ERROR)
            return td_err_set(err, TD_ENOMEM, "out of memory inflating the gzip body");
        if (rc == Z_BUF_ERROR && z->avail_out > 0 && z->avail_in == 0 && fed == n)
            return td_err_set(err, TD_EINVAL, "the gzip body ends early (truncated after %zu bytes)",
                              n);
        if (rc != Z_OK && rc != Z_BUF_ERROR)
            return td_err_set(err, TD_EINVAL, "the gzip body is corrupt near byte %zu: %s", at,
                              z->msg ? z->msg : "bad data");
    }
}

td_status td_gunzip(const void *in, size_t n, size_t max, char **out, size_t *out_len,
                    td_err *err)
{
    *out = NULL;
    *out_len = 0;
    size_t cap = n < 4096 ? 4096 : n < SIZE_MAX / 4 ? n * 4 : n;
    if (max != SIZE_MAX && cap > max + 1)
        cap = max + 1;
    char *buf = malloc(cap + 1);
    if (!buf)
        return td_err_set(err, TD_ENOMEM, "out of memory inflating the gzip body");
    size_t len = 0;
    td_status st = TD_OK;
    if (n > 0) {
        z_stream z;
        memset(&z, 0, sizeof z);
        /* 16 + MAX_WBITS: a gzip wrapper only (no zlib or raw deflate) */
        if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
            free(buf);
            return td_err_set(err, TD_ENOMEM, "out of memory inflating the gzip body");
        }
        st = inflate_all(&z, in, n, max, &buf, &cap, &len, err);
        inflateEnd(&z);
    }
    if (st == TD_OK && len > max) /* the last member filled the extra byte */
        st = td_err_set(err, TD_EQUOTA, "the gzip body inflates to more than %zu bytes", max);
    if (st != TD_OK) {
        free(buf);
        return st;
    }
    buf[len] = '\0';
    *out = buf;
    *out_len = len;
    return TD_OK;
}
