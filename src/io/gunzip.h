/* gunzip.h - request bodies sent with Content-Encoding: gzip, inflated with
 * zlib under a bound on the inflated size, so that a small body that would
 * inflate to gigabytes (a decompression bomb) costs at most that bound. */
#ifndef TENANTD_GUNZIP_H
#define TENANTD_GUNZIP_H

#include <stddef.h>

#include "tenantd/status.h"

typedef enum {
    TD_CODING_IDENTITY = 0, /* no Content-Encoding, or only "identity" */
    TD_CODING_GZIP,         /* exactly one coding, gzip (or x-gzip) */
    TD_CODING_OTHER         /* anything else: br, deflate, zstd, gzip twice, ... */
} td_coding;

/* Folds one Content-Encoding field value (NUL-terminated, a comma list)
 * into *acc, which starts as TD_CODING_IDENTITY for a request: "identity"
 * and empty members change nothing; the first gzip makes it GZIP; any other
 * coding, or a second gzip (a body encoded twice), makes it OTHER. The
 * offending coding's name (at most cap - 1 bytes) goes to bad when it
 * becomes OTHER (bad may be NULL). */
void td_gunzip_coding(const char *value, td_coding *acc, char *bad, size_t cap);

/* Inflates the n bytes at in, one or more gzip members back to back
 * (RFC 1952 2.2), into *out (malloc'd, the caller frees; NUL-terminated
 * past *out_len for convenience). TD_OK; TD_EQUOTA when the inflated bytes
 * would pass max: inflating stops as soon as they do, having allocated at
 * most max + 1 bytes; TD_EINVAL, naming the byte offset where known, when
 * the stream is not gzip, is corrupt or truncated, or has bytes after the
 * last member that are not another; TD_ENOMEM. n == 0 inflates to nothing.
 * On failure *out is NULL. Borrows in. */
td_status td_gunzip(const void *in, size_t n, size_t max, char **out, size_t *out_len,
                    td_err *err);

#endif
