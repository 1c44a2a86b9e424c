/* objuri.h - object-store locations and key prefixes, segment-aware.
 * Pure: no sockets, files or clocks. */
#ifndef TENANTD_OBJURI_H
#define TENANTD_OBJURI_H

#include <stdbool.h>

#include "tenantd/status.h"

/* An object-store location: scheme (s3, s3a, gs), bucket and key path
 * (after the bucket's '/', percent-decoded). */
typedef struct {
    char scheme[8];
    char bucket[64];
    char path[1024];
} td_object_uri;

/* Parses "s3://bucket/some/key" (also s3a://, gs://). Rejects other
 * schemes, a bucket that is not a DNS-style bucket name (so no userinfo or
 * port), bad or encoded '/' escapes, NUL, and any "." or ".." path
 * segment: they would let a textual prefix test be fooled. TD_EINVAL with
 * the reason. */
td_status td_object_uri_parse(const char *s, td_object_uri *u, td_err *err);

/* true if u lies in bucket under prefix ("" = the whole bucket; else ends
 * with '/'); "s3://b/team-a" counts as the prefix "team-a/" itself.
 * "team-a-evil/x" is not under "team-a/". */
bool td_object_uri_within(const td_object_uri *u, const char *bucket, const char *prefix);

/* true if two (bucket, prefix) pairs share any key. */
bool td_storage_overlap(const char *bucket1, const char *prefix1, const char *bucket2,
                        const char *prefix2);

/* Checks a storage prefix as written in a Tenant: "" or segments ending
 * with '/', no leading '/', no "." or ".." segments, no '%'. NULL if fine,
 * else a static reason. */
const char *td_storage_prefix_problem(const char *prefix);

#endif
