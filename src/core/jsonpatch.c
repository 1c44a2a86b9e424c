/* jsonpatch.c - JSON Patch (RFC 6902) diff and apply, on jansson values. */
#include "core/jsonpatch.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"

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

/* The pointer of the node being compared, as a chain of its reference
 * tokens, root first; its text is written only for an operation that is
 * emitted. The bytes and the too-long check are those of appending each
 * token as it is met (append_key / append_token / append_index): ub bounds
 * the length so far, exact once the text had to be written to tell. */
enum { SEG_ROOT, SEG_KEY, SEG_TOKEN, SEG_INDEX };

typedef struct seg {
    const struct seg *up;
    int kind;
    const char *key; /* SEG_KEY (kn bytes), SEG_TOKEN */
    size_t kn;       /* SEG_KEY: the key's length; SEG_INDEX: the index */
    size_t ub;       /* the pointer's length up to here, or more */
} seg;

typedef struct {
    json_t *ops;
    char *path; /* MAX_POINTER bytes */
    json_t *op_names[3];
} diff_ctx;

enum { OP_ADD, OP_REMOVE, OP_REPLACE };

/* Writes s's pointer into path; its length, or -1 if it does not fit. */
static int seg_write(const seg *s, char *path)
{
    if (s->kind == SEG_ROOT) {
        path[0] = '\0';
        return 0;
    }
    int plen = seg_write(s->up, path);
    if (plen < 0)
        return -1;
    int n = s->kind == SEG_KEY     ? append_key(path, (size_t)plen, s->key, s->kn)
            : s->kind == SEG_TOKEN ? append_token(path, (size_t)plen, s->key)
                                   : append_index(path, (size_t)plen, s->kn);
    return n < 0 ? -1 : plen + n;
}

/* Links s under up and checks that its pointer fits, as appending its token
 * did: 0, or -1 if too long. Writes the pointer only when the bound says
 * it might not fit (a pointer near MAX_POINTER bytes). */
static int seg_push(seg *s, const seg *up, int kind, const char *key, size_t kn, diff_ctx *c)
{
    size_t most;
    s->up = up;
    s->kind = kind;
    s->key = key;
    s->kn = kn;
    if (kind == SEG_INDEX)
        most = 1 + 20; /* "/" and a size_t in decimal */
    else                /* "/" and the key, each byte escaped at most to two, cut at 1022 */
        most = 1 + (kn < 512 ? 2 * kn : 1024);
    s->ub = up->ub + most;
    if (s->ub < MAX_POINTER - 1)
        return 0;
    int n = seg_write(s, c->path);
    if (n < 0)
        return -1;
    s->ub = (size_t)n;
    return 0;
}

/* json_string(path), without its UTF-8 check when path is ASCII (as a
 * Kubernetes object's pointers are), which that check would pass. */
static json_t *pointer_string(const char *path)
{
    size_t n = 0;
    for (; path[n]; n++)
        if ((unsigned char)path[n] >= 0x80)
            return json_string(path);
    return json_stringn_nocheck(path, n);
}

static int add_op(diff_ctx *c, int op, const seg *at, const json_t *value)
{
    if (seg_write(at, c->path) < 0)
        return -1;
    json_t *o = json_object();
    if (!o)
        return -1;
    json_incref(c->op_names[op]);
    int rc = json_object_set_new_nocheck(o, "op", c->op_names[op]);
    rc |= json_object_set_new_nocheck(o, "path", pointer_string(c->path));
    if (value)
        rc |= json_object_set_new_nocheck(o, "value", td_json_copy(value));
    if (rc || json_array_append_new(c->ops, o) < 0) {
        json_decref(o);
        return -1;
    }
    return 0;
}

static int diff(const json_t *a, const json_t *b, const seg *at, diff_ctx *c)
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
    if (both_objects) {
        /* b is usually a's copy, mutated: walk the two in step while their
         * keys line up, and look the key up only where they do not. When
         * every key of b was met, b adds none and its second walk is
         * skipped. Ops come out in the same order either way. */
        size_t met = 0;
        bool in_step = true; /* every key of a so far met at the same place in b */
        /* b can add keys with a met in step only if it is larger */
        bool may_add = json_object_size(b) > json_object_size(a);
        void *ib = json_object_iter((json_t *)b);
        for (void *ia = json_object_iter((json_t *)a); ia; ia = json_object_iter_next((json_t *)a, ia)) {
            const char *k = json_object_iter_key(ia);
            size_t kn = json_object_iter_key_len(ia);
            json_t *va = json_object_iter_value(ia);
            json_t *vb;
            if (ib && json_object_iter_key_len(ib) == kn && memcmp(json_object_iter_key(ib), k, kn) == 0) {
                vb = json_object_iter_value(ib);
                /* the walk below looks keys up as C strings: a key with a
                 * NUL in it is left to it */
                if (may_add && memchr(k, '\0', kn))
                    in_step = false;
            } else {
                vb = json_object_get(b, k);
                in_step = false;
            }
            if (ib)
                ib = json_object_iter_next((json_t *)b, ib);
            seg s;
            if (seg_push(&s, at, SEG_KEY, k, kn, c) < 0)
                return -1;
            if (vb)
                met++;
            int rc = vb ? (va == vb ? 0 : diff(va, vb, &s, c)) : add_op(c, OP_REMOVE, &s, NULL);
            if (rc)
                return rc;
        }
        if (met == json_object_size(b))
            return 0;
        if (in_step) {
            /* b starts with a's keys, in a's order: the keys b adds are
             * the ones after them, in the order the walk below gives */
            for (; ib; ib = json_object_iter_next((json_t *)b, ib)) {
                const char *k = json_object_iter_key(ib);
                if (memchr(k, '\0', json_object_iter_key_len(ib)) && json_object_get(a, k))
                    continue; /* as the walk below decides for such a key */
                seg s;
                if (seg_push(&s, at, SEG_TOKEN, k, strlen(k), c) < 0)
                    return -1;
                int rc = add_op(c, OP_ADD, &s, json_object_iter_value(ib));
                if (rc)
                    return rc;
            }
            return 0;
        }
        const char *k;
        json_t *vb;
        json_object_foreach((json_t *)b, k, vb)
        {
            if (json_object_get(a, k))
                continue;
            seg s;
            if (seg_push(&s, at, SEG_TOKEN, k, strlen(k), c) < 0)
                return -1;
            int rc = add_op(c, OP_ADD, &s, vb);
            if (rc)
                return rc;
        }
        return 0;
    }
    if (both_arrays && json_array_size(a) <= json_array_size(b)) {
        size_t na = json_array_size(a), nb = json_array_size(b);
        for (size_t i = 0; i < nb; i++) {
            seg s;
            if ((i < na ? seg_push(&s, at, SEG_INDEX, NULL, i, c)
                        : seg_push(&s, at, SEG_KEY, "-", 1, c)) < 0)
                return -1;
            int rc = 0;
            if (i >= na)
                rc = add_op(c, OP_ADD, &s, json_array_get(b, i));
            else if (json_array_get(a, i) != json_array_get(b, i))
                rc = diff(json_array_get(a, i), json_array_get(b, i), &s, c);
            if (rc)
                return rc;
        }
        return 0;
    }
    return add_op(c, OP_REPLACE, at, b);
}

td_status td_jsonpatch_diff(const json_t *from, const json_t *to, json_t **ops, td_err *err)
{
    diff_ctx c = {json_array(), malloc(MAX_POINTER),
                  {json_string("add"), json_string("remove"), json_string("replace")}};
    bool ready = c.ops && c.path && c.op_names[0] && c.op_names[1] && c.op_names[2];
    seg root = {NULL, SEG_ROOT, NULL, 0, 0};
    int rc = ready ? diff(from, to, &root, &c) : -1;
    free(c.path);
    for (int i = 0; i < 3; i++)
        json_decref(c.op_names[i]);
    if (rc) {
        json_decref(c.ops);
        if (!ready)
            return td_err_set(err, TD_ENOMEM, "out of memory");
        return td_err_set(err, TD_EINVAL, "json patch: path too long or out of memory");
    }
    *ops = c.ops;
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
