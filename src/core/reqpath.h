/* reqpath.h - the path of a request target as the gateway routes, bills and
 * forwards it: one normalization (RFC 3986 remove_dot_segments, slashes
 * merged, encoded '.', '/' and '\' refused: Envoy's normalize_path,
 * merge_slashes and path_with_escaped_slashes_action REJECT_REQUEST) and
 * the Route prefix match on segment boundaries. Pure: no allocation. */
#ifndef TENANTD_REQPATH_H
#define TENANTD_REQPATH_H

#include <stdbool.h>
#include <stddef.h>

#include "tenantd/status.h"

/* Normalizes the origin-form target t (n bytes, "/path" or "/path?query",
 * need not be NUL-terminated) in place. Refuses (TD_EINVAL, err naming
 * the offending byte and offset, t unchanged): a target not starting with
 * '/'; control bytes, whitespace, DEL or '#' anywhere; a backslash in the
 * path; a '%' not followed by two hex digits; in the path, an escaped
 * '.', '/', '\' or control byte (%2e %2f %5c %00-%1f %7f, any case: an
 * upstream that decodes them would see other segments than we routed on);
 * a ".." that would climb above the root. Otherwise rewrites the path:
 * runs of '/' become one, "." segments go, each ".." removes the segment
 * before it; a path ending in "/", "/." or "/.." keeps its trailing '/'.
 * Other escapes are kept as they are. The query follows unchanged. On
 * TD_OK, *n_out is the new length (<= n) of t and *path_len that of its
 * path (up to '?'). */
td_status td_reqpath_normalize(char *t, size_t n, size_t *n_out, size_t *path_len, td_err *err);

/* true if the normalized path (n bytes) is under the Route prefix (plen
 * bytes): equal to it, or going on with '/' after it, or the prefix ends
 * in '/' and the path starts with it. "/v1/embeddings" takes
 * "/v1/embeddings" and "/v1/embeddings/x", never "/v1/embeddingsXYZ". */
bool td_reqpath_has_prefix(const char *path, size_t n, const char *prefix, size_t plen);

#endif
