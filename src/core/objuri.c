/* objuri.c - object-store locations ("s3://bucket/key") and key prefixes,
 * compared segment-aware ("team-a-evil/" is not under "team-a/"): what the
 * storage isolation of a Tenant (its validation and pod admission) stands
 * on. No sockets, files or clocks. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/hex.h"
#include "core/objuri.h"

static bool bucket_name(const char *s, size_t n)
{
    if (n < 3 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-' ||
              s[i] == '.' || s[i] == '_'))
            return false;
    return isalnum((unsigned char)s[0]) && isalnum((unsigned char)s[n - 1]);
}

/* A "." or ".." segment anywhere in p (segments split on '/'). */
static bool dot_segment(const char *p)
{
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return true;
        p += n;
        if (*p == '/')
            p++;
    }
    return false;
}

td_status td_object_uri_parse(const char *s, td_object_uri *u, td_err *err)
{
    static const char *const schemes[] = {"s3", "s3a", "gs"};
    memset(u, 0, sizeof *u);
    const char *sep = s ? strstr(s, "://") : NULL;
    size_t sn = sep ? (size_t)(sep - s) : 0;
    for (size_t i = 0; sep && i < sizeof schemes / sizeof schemes[0]; i++)
        if (strlen(schemes[i]) == sn && strncmp(s, schemes[i], sn) == 0)
            memcpy(u->scheme, s, sn);
    if (!u->scheme[0])
        return td_err_set(err, TD_EINVAL, "\"%s\" is not an object-store URI (s3://, s3a:// or "
                                          "gs://BUCKET/PATH)",
                          s ? s : "");
    const char *b = sep + 3;
    const char *slash = strchr(b, '/');
    size_t bn = slash ? (size_t)(slash - b) : strlen(b);
    if (!bucket_name(b, bn))
        return td_err_set(err, TD_EINVAL, "\"%s\": \"%.*s\" is not a bucket name", s,
                          (int)(bn < 64 ? bn : 64), b);
    memcpy(u->bucket, b, bn);
    const char *p = slash ? slash + 1 : "";
    size_t o = 0;
    for (; *p; p++) {
        char c = *p;
        if (c == '%') {
            int hi = td_hexval(p[1]), lo = hi < 0 ? -1 : td_hexval(p[2]);
            if (hi < 0 || lo < 0)
                return td_err_set(err, TD_EINVAL, "\"%s\": bad percent escape", s);
            c = (char)(hi * 16 + lo);
            if (c == '/' || c == '\0' || c == '\\')
                return td_err_set(err, TD_EINVAL, "\"%s\": an encoded '/', '\\\\' or NUL is not "
                                                  "accepted in a data location",
                                  s);
            p += 2;
        } else if (c == '\\') {
            /* Some clients read '\' as '/': refuse rather than guess. */
            return td_err_set(err, TD_EINVAL, "\"%s\": '\\\\' is not accepted in a data location",
                              s);
        }
        if (o + 1 >= sizeof u->path)
            return td_err_set(err, TD_EINVAL, "\"%s\": path too long", s);
        u->path[o++] = c;
    }
    u->path[o] = '\0';
    if (dot_segment(u->path))
        return td_err_set(err, TD_EINVAL, "\"%s\": \".\" and \"..\" segments are not accepted in "
                                          "a data location",
                          s);
    return TD_OK;
}

bool td_object_uri_within(const td_object_uri *u, const char *bucket, const char *prefix)
{
    if (!bucket || strcmp(u->bucket, bucket) != 0)
        return false;
    size_t pn = prefix ? strlen(prefix) : 0;
    if (pn == 0)
        return true;
    if (strncmp(u->path, prefix, pn) == 0)
        return true;
    /* "s3://b/team-a" names the prefix itself. */
    return strlen(u->path) == pn - 1 && strncmp(u->path, prefix, pn - 1) == 0;
}

bool td_storage_overlap(const char *bucket1, const char *prefix1, const char *bucket2,
                        const char *prefix2)
{
    if (!bucket1 || !bucket2 || strcmp(bucket1, bucket2) != 0)
        return false;
    size_t n1 = prefix1 ? strlen(prefix1) : 0, n2 = prefix2 ? strlen(prefix2) : 0;
    size_t n = n1 < n2 ? n1 : n2;
    /* Prefixes end with '/', so a common leading part of the shorter's
     * length means one is the other's ancestor (or they are equal). */
    return n == 0 || strncmp(prefix1, prefix2, n) == 0;
}

const char *td_storage_prefix_problem(const char *prefix)
{
    size_t n = strlen(prefix);
    if (n == 0)
        return NULL;
    if (prefix[0] == '/')
        return "must not start with '/' (it is a key prefix inside the bucket)";
    if (prefix[n - 1] != '/')
        return "must end with '/' (so that \"team-a/\" does not also cover \"team-a-evil/\")";
    if (strstr(prefix, "//"))
        return "must not hold an empty segment (\"//\")";
    if (strchr(prefix, '%') || strchr(prefix, '\\'))
        return "must not hold '%' or '\\'";
    if (dot_segment(prefix))
        return "must not hold \".\" or \"..\" segments";
    return NULL;
}
