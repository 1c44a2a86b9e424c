/* jsonfast.h - a faster json_loadb for the webhook's request bodies: the
 * same jansson values, built without jansson's per-byte stream reader. */
#ifndef TENANTD_JSONFAST_H
#define TENANTD_JSONFAST_H

#include <jansson.h>
#include <stddef.h>

/* Parses buf[0..len) exactly as json_loadb(buf, len, 0, error) does: the
 * same values (a top-level object or array; duplicate keys keep the last
 * value in the first one's place; integers as json_int_t, numbers with a
 * fraction or exponent as reals), made with jansson's constructors, so
 * they come from the open request arena when there is one (jsonarena.h).
 * Input it does not take on itself (anything invalid, non-ASCII bytes,
 * \u escapes of NUL, integers of 19 digits or more, nesting deeper than
 * 512, reals that overflow) is handed to json_loadb, so the result and, on
 * failure, the error are jansson's own. A new reference, or NULL with
 * *error set by jansson (error may be NULL). buf is borrowed. */
json_t *td_json_loadb(const char *buf, size_t len, json_error_t *error);

/* td_json_loadb for an AdmissionReview body, leaving out of the tree the
 * members no admission decision or answer reads: every member of request
 * but uid, kind, namespace, operation, subResource and object (so
 * oldObject, options, userInfo, resource, requestKind, requestResource,
 * dryRun, name...), and request.object.metadata.managedFields (their text
 * is still checked: a body jansson rejects is rejected the same way). They
 * would only be built to be freed; oldObject and managedFields are large.
 * On input this parser hands to json_loadb they are kept, so a caller must
 * not depend on their absence either. */
json_t *td_json_loadb_review(const char *buf, size_t len, json_error_t *error);

#endif
