/* jsonpatch.c - JSON Patch (RFC 6902) diff and apply, on jansson values. */
#include "tenantd/jsonpatch.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tenantd/config.h"

#define MAX_POINTER 4096

void td_jsonpointer_escape(const char *token, char *out, size_t n)
{
    size_t o = 0;
    for (const char *p = token; *p && o + 3 < n; p++) {
        if (*p == '~') {
            out[o++] = '~';
            out[o++] = '0';
        } else if (*p == '/') {
            out[o++] = '~';
            out[o++] = '1';
        } else {
            out[o++] = *p;
        }
    }
    if (n)
        out[o < n ? o : n - 1] = '\0';
}

static int add_op(json_t *ops, const char *op, const char *path, const json_t *value)
{
    json_t *o = json_object();
    if (!o)
        return -1;
    int rc = json_object_set_new(o, "op", json_string(op));
    rc |= json_object_set_new(o, "path", json_string(path));
    if (value)
        rc |= json_object_set_new(o, "value", td_json_copy(value));
    if (rc || json_array_append_new(ops, o) < 0) {
        json_decref(o);
        return -1;
    }
    return 0;
}

/* Appends "/" and key k, escaped, to path[plen]: the bytes added, or -1 if
 * the pointer would not fit (as the snprintf it replaces, which was a tenth
 * of a review's diff). */
static int append_token(char *path, size_t plen, const char *k)
{
    char tok[1024];
    td_jsonpointer_escape(k, tok, sizeof tok);
    size_t n = strlen(tok);
    if (plen + 1 + n >= MAX_POINTER)
        return -1;
    path[plen] = '/';
    memcpy(path + plen + 1, tok, n + 1);
    return (int)(n + 1);
}

/* append_token for a key of kn bytes: most keys need no escaping and are
 * copied as they are (what td_jsonpointer_escape would write for them). */
static int append_key(char *path, size_t plen, const char *k, size_t kn)
{
    if (kn > 1000 || memchr(k, '~', kn) || memchr(k, '/', kn))
        return append_token(path, plen, k);
    if (plen + 1 + kn >= MAX_POINTER)
        return -1;
    path[plen] = '/';
    memcpy(path + plen + 1, k, kn);
    path[plen + 1 + kn] = '\0';
    return (int)(kn + 1);
}

/* "/" and i in decimal, as snprintf's "/%zu". */
static int append_index(char *path, size_t plen, size_t i)
{
    char digits[24];
    int nd = 0;
    do {
        digits[nd++] = (char)('0' + i % 10);
        i /= 10;
    } while (i);
    if (plen + 1 + (size_t)nd >= MAX_POINTER)
        return -1;
    path[plen] = '/';
    for (int d = 0; d < nd; d++)
        path[plen + 1 + d] = digits[nd - 1 - d];
    path[plen + 1 + nd] = '\0';
    return nd + 1;
}

static int diff(const json_t *a, const json_t *b, char *path, size_t plen, json_t *ops)
{
    /* Two objects, or two arrays, are compared member by member below (equal
     * ones yield no op); comparing them whole first as well made the diff
     * quadratic in the depth. */
    if (a == b)
        return 0; /* a node the copy shares with the original */
    bool both_objects = json_is_object(a) && json_is_object(b);
    bool both_arrays = json_is_array(a) && json_is_array(b);
    if (!both_objects && !both_arrays && json_equal(a, b))
        return 0;
    if (json_is_object(a) && json_is_object(b)) {
        /* b is usually a's copy, mutated: walk the two in step while their
         * keys line up, and look the key up only where they do not. When
         * every key of b was met, b adds none and its second walk is
         * skipped. Ops come out in the same order either way. */
        size_t met = 0;
        void *ib = json_object_iter((json_t *)b);
        for (void *ia = json_object_iter((json_t *)a); ia; ia = json_object_iter_next((json_t *)a, ia)) {
            const char *k = json_object_iter_key(ia);
            size_t kn = json_object_iter_key_len(ia);
            json_t *va = json_object_iter_value(ia);
            json_t *vb;
            if (ib && json_object_iter_key_len(ib) == kn && memcmp(json_object_iter_key(ib), k, kn) == 0)
                vb = json_object_iter_value(ib);
            else
                vb = json_object_get(b, k);
            if (ib)
                ib = json_object_iter_next((json_t *)b, ib);
            int n = append_key(path, plen, k, kn);
            if (n < 0)
                return -1;
            if (vb)
                met++;
            int rc = vb ? diff(va, vb, path, plen + (size_t)n, ops) : add_op(ops, "remove", path, NULL);
            path[plen] = '\0';
            if (rc)
                return rc;
        }
        if (met == json_object_size(b))
            return 0;
        const char *k;
        json_t *vb;
        json_object_foreach((json_t *)b, k, vb)
        {
            if (json_object_get(a, k))
                continue;
            int n = append_token(path, plen, k);
            if (n < 0)
                return -1;
            int rc = add_op(ops, "add", path, vb);
            path[plen] = '\0';
            if (rc)
                return rc;
        }
        return 0;
    }
    if (json_is_array(a) && json_is_array(b) && json_array_size(a) <= json_array_size(b)) {
        size_t na = json_array_size(a), nb = json_array_size(b);
        for (size_t i = 0; i < nb; i++) {
            int n = i < na ? append_index(path, plen, i) : append_key(path, plen, "-", 1);
            if (n < 0)
                return -1;
            int rc = i < na ? diff(json_array_get(a, i), json_array_get(b, i), path,
                                   plen + (size_t)n, ops)
                            : add_op(ops, "add", path, json_array_get(b, i));
            path[plen] = '\0';
            if (rc)
                return rc;
        }
        return 0;
    }
    return add_op(ops, "replace", plen ? path : "", b);
}

td_status td_jsonpatch_diff(const json_t *from, const json_t *to, json_t **ops, td_err *err)
{
    json_t *a = json_array();
    char *path = malloc(MAX_POINTER);
    if (!a || !path) {
        json_decref(a);
        free(path);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    path[0] = '\0';
    int rc = diff(from, to, path, 0, a);
    free(path);
    if (rc) {
        json_decref(a);
        return td_err_set(err, TD_EINVAL, "json patch: path too long or out of memory");
    }
    *ops = a;
    return TD_OK;
}

/* Splits the pointer into parent container and last token. */
static json_t *resolve_parent(json_t *doc, const char *path, char *last, size_t lastn)
{
    if (path[0] != '/')
        return NULL;
    json_t *cur = doc;
    const char *p = path + 1;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        char tok[1024];
        size_t o = 0;
        for (size_t i = 0; i < n && o < sizeof tok - 1; i++) {
            if (p[i] == '~' && i + 1 < n && (p[i + 1] == '0' || p[i + 1] == '1')) {
                tok[o++] = p[i + 1] == '0' ? '~' : '/';
                i++;
            } else {
                tok[o++] = p[i];
            }
        }
        tok[o] = '\0';
        if (!slash) {
            snprintf(last, lastn, "%s", tok);
            return cur;
        }
        if (json_is_object(cur)) {
            cur = json_object_get(cur, tok);
        } else if (json_is_array(cur)) {
            char *end;
            unsigned long idx = strtoul(tok, &end, 10);
            cur = *end ? NULL : json_array_get(cur, idx);
        } else {
            return NULL;
        }
        if (!cur)
            return NULL;
        p = slash + 1;
    }
}

td_status td_jsonpatch_apply(json_t *doc, const json_t *ops, td_err *err)
{
    size_t i;
    json_t *op;
    json_array_foreach((json_t *)ops, i, op)
    {
        const char *kind = json_string_value(json_object_get(op, "op"));
        const char *path = json_string_value(json_object_get(op, "path"));
        json_t *value = json_object_get(op, "value");
        char last[1024];
        json_t *parent = path ? resolve_parent(doc, path, last, sizeof last) : NULL;
        if (!kind || !parent)
            return td_err_set(err, TD_EINVAL, "patch operation %zu: path \"%s\" does not resolve",
                              i, path ? path : "");
        int rc = -1;
        if (json_is_object(parent)) {
            if (strcmp(kind, "remove") == 0)
                rc = json_object_del(parent, last);
            else if ((strcmp(kind, "add") == 0 ||
                      (strcmp(kind, "replace") == 0 && json_object_get(parent, last))) &&
                     value)
                rc = json_object_set_new(parent, last, json_deep_copy(value));
        } else if (json_is_array(parent)) {
            char *end;
            size_t idx = strcmp(last, "-") == 0 ? json_array_size(parent) : strtoul(last, &end, 10);
            if (strcmp(kind, "remove") == 0)
                rc = json_array_remove(parent, idx);
            else if (strcmp(kind, "add") == 0 && value)
                rc = json_array_insert_new(parent, idx, json_deep_copy(value));
            else if (strcmp(kind, "replace") == 0 && value)
                rc = json_array_set_new(parent, idx, json_deep_copy(value));
        }
        if (rc)
            return td_err_set(err, TD_EINVAL, "patch operation %zu (%s %s) failed", i, kind, path);
    }
    return TD_OK;
}
