/* fuzz_jsonfast.c - differential libFuzzer target: td_json_loadb must give
 * exactly json_loadb(…, 0, …)'s answer for any bytes: equal values in the
 * same order and of the same types, or the same error. td_json_loadb_review
 * too, once the members it may leave out (request's but uid, kind,
 * namespace, operation, subResource and object, and
 * request.object.metadata.managedFields) are removed from both answers.
 * And td_json_dump_compact must write every value exactly as
 * json_dumpb(…, JSON_COMPACT) does. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsondump.h"
#include "core/jsonfast.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Removes the members td_json_loadb_review may leave out (every duplicate
 * key was already folded into one by the parse): request's members but
 * the six it keeps, and request.object.metadata.managedFields. */
static void drop_skippable(json_t *v)
{
    static const char *const keep[] = {"uid",         "kind",   "namespace", "operation",
                                       "subResource", "object", NULL};
    json_t *req = json_object_get(v, "request");
    const char *k;
    json_t *m;
    void *tmp;
    json_object_foreach_safe(req, tmp, k, m)
    {
        size_t i = 0;
        while (keep[i] && strcmp(keep[i], k) != 0)
            i++;
        if (!keep[i])
            json_object_del(req, k);
    }
    json_object_del(json_object_get(json_object_get(req, "object"), "metadata"), "managedFields");
}

static void compare(json_t *(*load)(const char *, size_t, json_error_t *), int review,
                    const uint8_t *data, size_t size)
{
    json_error_t e1, e2;
    memset(&e1, 0, sizeof e1);
    memset(&e2, 0, sizeof e2);
    json_t *want = json_loadb((const char *)data, size, 0, &e1);
    json_t *got = load((const char *)data, size, &e2);
    if (review && want && got) {
        drop_skippable(want);
        drop_skippable(got);
    }
    if (!want || !got) {
        if (want || got || strcmp(e1.text, e2.text) != 0)
            abort();
        return;
    }
    if (!review) {
        size_t n = json_dumpb(want, NULL, 0, JSON_COMPACT);
        char *d = n ? malloc(n) : NULL;
        td_jbuf out = TD_JBUF_INIT((size_t)1 << 26);
        bool ok = td_json_dump_compact(&out, want);
        if (n && (!d || json_dumpb(want, d, n, JSON_COMPACT) != n))
            abort();
        if (ok != (n > 0) || (ok && (out.len != n || memcmp(out.s, d, n) != 0)))
            abort();
        free(d);
        td_jbuf_fini(&out);
    }
    char *a = json_dumps(want, JSON_COMPACT | JSON_ENCODE_ANY);
    char *b = json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!json_equal(want, got) || !a || !b || strcmp(a, b) != 0)
        abort();
    free(a);
    free(b);
    json_decref(want);
    json_decref(got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    compare(td_json_loadb, 0, data, size);
    compare(td_json_loadb_review, 1, data, size);
    return 0;
}
