/* jsonpatch.h - RFC 6902 JSON Patch: the difference between two JSON
 * documents as add/replace/remove operations (what a mutating webhook
 * returns), and applying such a patch (to check a round trip). */
#ifndef TENANTD_JSONPATCH_H
#define TENANTD_JSONPATCH_H

#include <jansson.h>

#include "tenantd/status.h"

/* A new JSON array of operations turning from into to (both borrowed).
 * Objects are compared key by key; arrays of equal length element by
 * element, else replaced whole, and appended to when to extends from. */
td_status td_jsonpatch_diff(const json_t *from, const json_t *to, json_t **ops, td_err *err);

/* Applies ops to doc in place (add, remove, replace). TD_EINVAL naming the
 * failing operation if a path does not resolve; doc may then be partly
 * changed, so apply to a copy. */
td_status td_jsonpatch_apply(json_t *doc, const json_t *ops, td_err *err);

/* Escapes a JSON Pointer reference token ('~' -> "~0", '/' -> "~1") into
 * out (size n). */
void td_jsonpointer_escape(const char *token, char *out, size_t n);

#endif
