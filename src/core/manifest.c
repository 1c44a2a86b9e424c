/* manifest.c - YAML documents to jansson, with a side table of source lines.
 * libfyaml parses into events; we build JSON from them, typing plain
 * scalars as YAML 1.2's core schema does, and resolve anchors, aliases and
 * merge keys ourselves within a budget (see the builder below). */
#include "core/manifest.h"

#include <errno.h>
#include <inttypes.h>
#include <libfyaml.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const json_t *node;
    int line;
} line_entry;

struct td_manifest {
    char *name;
    json_t **docs;
    size_t ndocs;
    line_entry *lines; /* open addressing, keyed by pointer */
    size_t lines_cap;
    size_t lines_n;
    const char *src; /* the text being parsed, during td_manifest_parse only */
    size_t src_len;
    size_t nodes, alias_nodes; /* JSON values made, and of them by aliases */
};

#define MAX_DEPTH 64

static size_t hash_ptr(const void *p)
{
    /* MurmurHash3's fmix64, whole: without its second round, the heap's
     * evenly spaced pointers clustered (a third of a 3 MiB parse probing) */
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (size_t)x;
}

static int lines_grow(td_manifest *m)
{
    size_t ncap = m->lines_cap ? m->lines_cap * 2 : 256;
    line_entry *n = calloc(ncap, sizeof *n);
    if (!n)
        return -1;
    for (size_t i = 0; i < m->lines_cap; i++) {
        if (!m->lines[i].node)
            continue;
        size_t h = hash_ptr(m->lines[i].node) & (ncap - 1);
        while (n[h].node)
            h = (h + 1) & (ncap - 1);
        n[h] = m->lines[i];
    }
    free(m->lines);
    m->lines = n;
    m->lines_cap = ncap;
    return 0;
}

static int lines_put(td_manifest *m, const json_t *node, int line)
{
    if ((m->lines_n + 1) * 2 > m->lines_cap && lines_grow(m) < 0)
        return -1;
    size_t h = hash_ptr(node) & (m->lines_cap - 1);
    while (m->lines[h].node && m->lines[h].node != node)
        h = (h + 1) & (m->lines_cap - 1);
    if (!m->lines[h].node)
        m->lines_n++;
    m->lines[h].node = node;
    m->lines[h].line = line;
    return 0;
}

int td_manifest_line(const td_manifest *m, const json_t *node)
{
    if (!m || !node || !m->lines_cap)
        return 0;
    size_t h = hash_ptr(node) & (m->lines_cap - 1);
    while (m->lines[h].node) {
        if (m->lines[h].node == node)
            return m->lines[h].line;
        h = (h + 1) & (m->lines_cap - 1);
    }
    return 0;
}

static int is_match(const char *s, const char *const *words)
{
    for (; *words; words++)
        if (strcmp(s, *words) == 0)
            return 1;
    return 0;
}

/* Types a plain (unquoted) scalar as YAML 1.2's core schema does. */
static json_t *plain_scalar(const char *s)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"true", "True", "TRUE", NULL};
    static const char *const falses[] = {"false", "False", "FALSE", NULL};
    if (is_match(s, nulls))
        return json_null();
    if (is_match(s, trues))
        return json_true();
    if (is_match(s, falses))
        return json_false();

    const char *p = s;
    if (*p == '-' || *p == '+')
        p++;
    if (*p >= '0' && *p <= '9') {
        size_t digits = strspn(p, "0123456789");
        if (p[digits] == '\0') {
            errno = 0;
            long long v = strtoll(s, NULL, 10);
            if (errno == 0)
                return json_integer((json_int_t)v);
            return json_string(s); /* too large for an integer: keep the text */
        }
        /* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
        const char *q = p + digits;
        if (*q == '.')
            q += 1 + strspn(q + 1, "0123456789");
        if (*q == 'e' || *q == 'E') {
            const char *e = q + 1;
            if (*e == '-' || *e == '+')
                e++;
            size_t ed = strspn(e, "0123456789");
            q = ed ? e + ed : q;
        }
        if (*q == '\0') {
            char *end;
            double d = strtod(s, &end);
            if (*end == '\0')
                return json_real(d);
        }
    } else if (*p == '.' && p[1] >= '0' && p[1] <= '9') {
        char *end;
        double d = strtod(s, &end);
        if (*end == '\0')
            return json_real(d);
    }
    return json_string(s);
}

/* Folds and unescapes the inside of a single-quoted scalar (YAML 1.2
 * 7.3.2): '' is ', a line break between text is a space, n+1 breaks are n
 * newlines, blanks around breaks go. Writes at most n bytes to o. */
static size_t single_quoted(const char *p, size_t n, char *o)
{
    size_t k = 0, keep = 0, i = 0;
    while (i < n) {
        if (p[i] == '\'' && i + 1 < n && p[i + 1] == '\'') {
            o[k++] = '\'';
            keep = k;
            i += 2;
        } else if (p[i] == '\n' || p[i] == '\r') {
            while (k > keep && (o[k - 1] == ' ' || o[k - 1] == '\t'))
                k--;
            size_t breaks = 0;
            while (i < n && (p[i] == '\n' || p[i] == '\r')) {
                i += p[i] == '\r' && i + 1 < n && p[i + 1] == '\n' ? 2 : 1;
                breaks++;
                while (i < n && (p[i] == ' ' || p[i] == '\t'))
                    i++;
            }
            if (breaks == 1)
                o[k++] = ' ';
            for (size_t b = 1; b < breaks; b++)
                o[k++] = '\n';
            keep = k;
        } else {
            o[k++] = p[i++];
        }
    }
    return k;
}

/* The text of scalar node fyn, malloc'd and NUL-terminated, its length in
 * *len; NULL when out of memory. libfyaml 0.7.12 leaks the buffer it
 * formats a single-quoted scalar ending in a run of escaped quotes into
 * (b and ten escaped quotes: found by fuzz_scenario), so a single-quoted scalar
 * with an escape is decoded here from the source text instead. */
static char *scalar_text(const td_manifest *m, struct fy_token *t, size_t *len)
{
    const struct fy_mark *a = t ? fy_token_start_mark(t) : NULL;
    const struct fy_mark *b = t ? fy_token_end_mark(t) : NULL;
    /* the marks span the inside, between the quotes */
    if (fy_token_scalar_style(t) == FYSS_SINGLE_QUOTED && a && b && m->src && a->input_pos >= 1 &&
        a->input_pos <= b->input_pos && b->input_pos < m->src_len &&
        m->src[a->input_pos - 1] == '\'' && m->src[b->input_pos] == '\'') {
        const char *in = m->src + a->input_pos;
        size_t n = b->input_pos - a->input_pos;
        int escaped = 0;
        for (size_t i = 0; i + 1 < n && !escaped; i++)
            escaped = in[i] == '\'' && in[i + 1] == '\'';
        if (escaped) {
            char *o = malloc(n + 1);
            if (!o)
                return NULL;
            *len = single_quoted(in, n, o);
            o[*len] = '\0';
            return o;
        }
    }
    const char *s = t ? fy_token_get_text(t, len) : NULL;
    if (!s)
        *len = 0;
    return strndup(s ? s : "", *len);
}

/* ---- from libfyaml's events to jansson ----------------------------------
 *
 * The text is read as a stream of events (fy_parser_parse), never as
 * libfyaml's document tree: the tree cost about 340 bytes a node before a
 * single JSON value existed (a 3 MiB body: 508 MB), and with
 * FYPCF_RESOLVE_DOCUMENT libfyaml expanded every alias into it with no
 * bound (a 475-byte Workload of 5 levels of 10 aliases: 665 MB and 1.7 s;
 * 10 levels: 24 GB). Here only the JSON is built, and aliases are expanded
 * by copying what their anchor made, within a budget (td_manifest_opts). */

typedef struct {
    char *name;
    json_t *v;    /* a reference */
    size_t nodes; /* JSON values in v */
    size_t bytes; /* of its strings and keys */
} anchor_ent;

typedef struct {
    json_t *v; /* the container being filled */
    int line;
    char *anchor;        /* its anchor's name, registered when it is complete */
    size_t made_before;  /* nodes made before it, to count its own */
    size_t bytes_before; /* likewise string bytes */
    /* a mapping's key waiting for its value */
    char *key;
    int key_line;
    int key_is_merge; /* the key is a plain << */
    int has_merge;
    json_t *merges; /* values of its << key, merged in at its end */
} frame;

typedef struct {
    td_manifest *m;
    unsigned flags;
    td_err *err;
    td_status st;
    frame stack[MAX_DEPTH + 1];
    int depth;
    anchor_ent *anchors; /* of the current document */
    size_t nanchors, anchors_cap;
    size_t direct;       /* JSON values made from the text's own nodes */
    size_t copied;       /* JSON values made by expanding aliases */
    size_t lined_copies; /* copied scalars given their line */
    size_t bytes;        /* of the strings and keys made, copies included */
    size_t copied_bytes; /* of them by aliases */
    json_t *root;        /* the document's, once complete */
    int root_line;
} builder;

static int fail(builder *b, td_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(builder *b, td_status s, const char *fmt, ...)
{
    if (b->st != TD_OK)
        return -1;
    b->st = s;
    if (b->err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b->err->msg, sizeof b->err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int oom(builder *b)
{
    return fail(b, TD_ENOMEM, "%s: out of memory", b->m->name);
}

static int token_line(struct fy_token *t)
{
    const struct fy_mark *mk = t ? fy_token_start_mark(t) : NULL;
    return mk ? mk->line + 1 : 0;
}

static int event_line(struct fy_event *e)
{
    const struct fy_mark *mk = fy_event_start_mark(e);
    return mk ? mk->line + 1 : 0;
}

static char *token_name(struct fy_token *t)
{
    size_t n = 0;
    const char *s = t ? fy_token_get_text(t, &n) : NULL;
    return strndup(s ? s : "", s ? n : 0);
}

static void clear_anchors(builder *b)
{
    for (size_t i = 0; i < b->nanchors; i++) {
        free(b->anchors[i].name);
        json_decref(b->anchors[i].v);
    }
    b->nanchors = 0;
}

/* The latest anchor of that name, as YAML says an alias refers to the
 * most recent node before it with that anchor. */
static anchor_ent *find_anchor(builder *b, const char *name)
{
    for (size_t i = b->nanchors; i-- > 0;)
        if (strcmp(b->anchors[i].name, name) == 0)
            return &b->anchors[i];
    return NULL;
}

/* Takes over name. */
static int add_anchor(builder *b, char *name, json_t *v, size_t nodes, size_t bytes)
{
    if (b->nanchors == b->anchors_cap) {
        size_t ncap = b->anchors_cap ? b->anchors_cap * 2 : 16;
        anchor_ent *na = realloc(b->anchors, ncap * sizeof *na);
        if (!na) {
            free(name);
            return oom(b);
        }
        b->anchors = na;
        b->anchors_cap = ncap;
    }
    b->anchors[b->nanchors++] = (anchor_ent){name, json_incref(v), nodes, bytes};
    return 0;
}

/* How many JSON values aliases may add: TD_MANIFEST_ALIAS_RATIO times
 * what the text itself made so far, and at least TD_MANIFEST_ALIAS_MIN. */
static size_t alias_allowance(const builder *b)
{
    size_t r = b->direct * TD_MANIFEST_ALIAS_RATIO;
    return r > TD_MANIFEST_ALIAS_MIN ? r : TD_MANIFEST_ALIAS_MIN;
}

/* Whether v has its line already. Only true, false and null (jansson's
 * shared singletons, which keep their first line) and copies can: a
 * new value is looked up in the table for nothing, and on a 3 MiB text
 * those lookups were a third of the parse (a cache miss each). */
static int line_known(const td_manifest *m, const json_t *v)
{
    return (json_is_true(v) || json_is_false(v) || json_is_null(v)) && td_manifest_line(m, v);
}

/* And how many bytes of strings and keys: TD_MANIFEST_ALIAS_RATIO times
 * the text's length, and at least TD_MANIFEST_ALIAS_MIN_BYTES. */
static size_t byte_allowance(const builder *b)
{
    size_t r = b->m->src_len * TD_MANIFEST_ALIAS_RATIO;
    return r > TD_MANIFEST_ALIAS_MIN_BYTES ? r : TD_MANIFEST_ALIAS_MIN_BYTES;
}

/* A copy of v (made by an anchor) with its source lines, depth levels
 * below the document's root; NULL with b->st set on failure. */
static json_t *copy_tree(builder *b, json_t *v, int depth)
{
    if ((json_is_object(v) || json_is_array(v)) && depth >= MAX_DEPTH) { /* as in the text */
        fail(b, TD_EINVAL, "%s:%d: nesting deeper than %d levels (through an alias)", b->m->name,
             td_manifest_line(b->m, v), MAX_DEPTH);
        return NULL;
    }
    json_t *c = NULL;
    if (json_is_object(v)) {
        c = json_object();
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x)
        {
            json_t *cx = c ? copy_tree(b, x, depth + 1) : NULL;
            if (!cx || json_object_set_new(c, k, cx) < 0) {
                json_decref(c);
                c = NULL;
                break;
            }
        }
    } else if (json_is_array(v)) {
        c = json_array();
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x)
        {
            json_t *cx = c ? copy_tree(b, x, depth + 1) : NULL;
            if (!cx || json_array_append_new(c, cx) < 0) {
                json_decref(c);
                c = NULL;
                break;
            }
        }
    } else {
        c = json_copy(v); /* true, false and null are shared singletons */
        /* Each line is a random access into a table of every value (a
         * cache and TLB miss once it is large: copying 4.7 million
         * values with their lines took 13.8 s, without 0.3 s). Containers
         * keep theirs; scalars the first TD_MANIFEST_ALIAS_MIN copies
         * only, which covers any config's anchors. */
        if (b->lined_copies >= TD_MANIFEST_ALIAS_MIN)
            goto done;
        b->lined_copies++;
    }
    int line = td_manifest_line(b->m, v);
    if (c && line && !line_known(b->m, c) && lines_put(b->m, c, line) < 0) {
        json_decref(c);
        c = NULL;
    }
done:
    if (!c) {
        if (b->st == TD_OK)
            oom(b);
        return NULL;
    }
    return c;
}

/* The text of a scalar event's token as JSON: plain and untagged typed by
 * the core schema, every other a string. */
static json_t *scalar_value(builder *b, struct fy_token *t, int tagged, int line)
{
    size_t len;
    char *z = scalar_text(b->m, t, &len);
    if (!z) {
        oom(b);
        return NULL;
    }
    if (memchr(z, '\0', len)) {
        free(z);
        fail(b, TD_EINVAL, "%s:%d: NUL byte in a scalar", b->m->name, line);
        return NULL;
    }
    json_t *v =
        fy_token_scalar_style(t) == FYSS_PLAIN && !tagged ? plain_scalar(z) : json_stringn(z, len);
    free(z);
    if (!v)
        fail(b, TD_EINVAL, "%s:%d: scalar is not valid UTF-8", b->m->name, line);
    return v;
}

/* Puts a complete value (taken over) where it belongs: the document's
 * root, the next item of a sequence, or the value of a mapping's pending
 * key. */
static int place(builder *b, json_t *v, int line)
{
    if (line && !line_known(b->m, v) && lines_put(b->m, v, line) < 0) {
        json_decref(v);
        return oom(b);
    }
    if (b->depth == 0) {
        b->root = v;
        b->root_line = line;
        return 0;
    }
    frame *f = &b->stack[b->depth - 1];
    if (json_is_array(f->v)) {
        if (json_array_append_new(f->v, v) < 0)
            return oom(b);
        return 0;
    }
    char *key = f->key;
    f->key = NULL;
    if (f->key_is_merge) {
        f->key_is_merge = 0;
        if (!f->merges && !(f->merges = json_array())) {
            free(key);
            json_decref(v);
            return oom(b);
        }
        free(key);
        return json_array_append_new(f->merges, v) < 0 ? oom(b) : 0;
    }
    if (json_object_get(f->v, key)) {
        json_decref(v);
        fail(b, TD_EINVAL, "%s:%d: duplicate key \"%s\"", b->m->name, f->key_line, key);
        free(key);
        return -1;
    }
    if (json_object_set_new(f->v, key, v) < 0) {
        fail(b, TD_EINVAL, "%s:%d: key is not valid UTF-8", b->m->name, f->key_line);
        free(key);
        return -1;
    }
    free(key);
    return 0;
}

/* YAML's merge key: the mappings given to << (one, or a list, earlier
 * ones first) lend the keys that the mapping does not set itself. */
static int apply_merges(builder *b, frame *f)
{
    json_t *list = f->merges;
    f->merges = NULL;
    size_t n = json_array_size(list);
    for (size_t i = 0; i < n; i++) {
        json_t *mv = json_array_get(list, i);
        size_t parts = json_is_array(mv) ? json_array_size(mv) : 1;
        for (size_t p = 0; p < parts; p++) {
            json_t *src = json_is_array(mv) ? json_array_get(mv, p) : mv;
            if (!json_is_object(src)) {
                json_decref(list);
                return fail(
                    b, TD_EINVAL, "%s:%d: a merge key (<<) takes a mapping or a list of mappings",
                    b->m->name, td_manifest_line(b->m, mv) ? td_manifest_line(b->m, mv) : f->line);
            }
            const char *k;
            json_t *x;
            /* the merged values are this parse's own copies, used once */
            json_object_foreach(src, k, x)
            {
                if (!json_object_get(f->v, k) && json_object_set(f->v, k, x) < 0) {
                    json_decref(list);
                    return oom(b);
                }
            }
        }
    }
    json_decref(list);
    return 0;
}

static void free_frame(frame *f)
{
    json_decref(f->v);
    json_decref(f->merges);
    free(f->key);
    free(f->anchor);
    memset(f, 0, sizeof *f);
}

/* The event handlers below: each takes the event, the innermost open
 * container (NULL at the document's root) and whether that container is a
 * mapping waiting for a key; 0, or -1 with b->st and the message set. */

/* A scalar as the key of the mapping top: kept until its value comes (the
 * merge key << noted); anchored, it is an anchor for an alias as a key. */
static int on_key_scalar(builder *b, struct fy_event *e, frame *top, int line)
{
    td_manifest *m = b->m;
    struct fy_token *t = e->scalar.value;
    size_t klen;
    char *key = scalar_text(m, t, &klen);
    if (!key)
        return oom(b);
    if (memchr(key, '\0', klen)) {
        free(key);
        return fail(b, TD_EINVAL, "%s:%d: NUL byte in a scalar", m->name, line);
    }
    int merge = fy_token_scalar_style(t) == FYSS_PLAIN && !e->scalar.tag && strcmp(key, "<<") == 0;
    if (merge && top->has_merge) {
        free(key);
        return fail(b, TD_EINVAL, "%s:%d: duplicate key \"<<\"", m->name, line);
    }
    top->has_merge |= merge;
    b->bytes += klen;
    top->key = key;
    top->key_line = line;
    top->key_is_merge = merge;
    if (!e->scalar.anchor)
        return 0;
    char *name = token_name(e->scalar.anchor);
    json_t *kv = json_string(key);
    int rc = name && kv ? add_anchor(b, name, kv, 1, klen) : (free(name), oom(b));
    json_decref(kv);
    return rc;
}

static int on_scalar(builder *b, struct fy_event *e, frame *top, int want_key)
{
    struct fy_token *t = e->scalar.value;
    int line = token_line(t);
    if (!line)
        line = top ? top->line : 1;
    if (want_key)
        return on_key_scalar(b, e, top, line);
    json_t *v = scalar_value(b, t, e->scalar.tag != NULL, line);
    if (!v)
        return -1;
    b->direct++;
    size_t sbytes = json_is_string(v) ? json_string_length(v) : 0;
    b->bytes += sbytes;
    if (e->scalar.anchor) {
        char *name = token_name(e->scalar.anchor);
        if (!name || add_anchor(b, name, v, 1, sbytes) < 0) {
            json_decref(v);
            return name ? -1 : oom(b);
        }
    }
    return place(b, v, line);
}

/* Whether the alias *name of anchor a may be expanded: the whole
 * expansion, values and string bytes, is counted before anything is
 * copied. 0, or -1 with the message set. */
static int alias_allowed(builder *b, const anchor_ent *a, const char *name, int line)
{
    td_manifest *m = b->m;
    if (a->nodes > alias_allowance(b) - b->copied)
        return fail(b, TD_EINVAL,
                    "%s:%d: excessive aliasing: *%s would add %zu values to the %zu that aliases "
                    "added so far; aliases may add at most %zu here (%u times the %zu values "
                    "written out, or %u)",
                    m->name, line, name, a->nodes, b->copied, alias_allowance(b),
                    TD_MANIFEST_ALIAS_RATIO, b->direct, TD_MANIFEST_ALIAS_MIN);
    /* and their strings: a 1 MiB string aliased 10,000 times is few
     * values but 10 GB */
    if (a->bytes > byte_allowance(b) - b->copied_bytes)
        return fail(b, TD_EINVAL,
                    "%s:%d: excessive aliasing: *%s would add %zu bytes of strings to the %zu "
                    "that aliases added so far; aliases may add at most %zu here (%u times the "
                    "%zu bytes of the text, or %u)",
                    m->name, line, name, a->bytes, b->copied_bytes, byte_allowance(b),
                    TD_MANIFEST_ALIAS_RATIO, m->src_len, TD_MANIFEST_ALIAS_MIN_BYTES);
    return 0;
}

/* An alias as a value: a copy of its anchor's value, within the allowance. */
static int alias_value(builder *b, const anchor_ent *a, frame *top, int line)
{
    td_manifest *m = b->m;
    b->copied += a->nodes;
    b->copied_bytes += a->bytes;
    b->bytes += a->bytes;
    json_t *c = copy_tree(b, a->v, b->depth);
    if (!c)
        return -1;
    /* a container that is a mapping's value takes its key's line */
    int cline = td_manifest_line(m, c);
    if (top && json_is_object(top->v) && (json_is_object(c) || json_is_array(c))) {
        if (lines_put(m, c, top->key_line) < 0) {
            json_decref(c);
            return oom(b);
        }
        cline = top->key_line;
    }
    return place(b, c, cline ? cline : line);
}

static int on_alias(builder *b, struct fy_event *e, frame *top, int want_key)
{
    td_manifest *m = b->m;
    int line = event_line(e);
    if (!line)
        line = top ? top->line : 1;
    char *name = token_name(e->alias.anchor);
    if (!name)
        return oom(b);
    anchor_ent *a = NULL;
    int rc = 0;
    if (b->flags & TD_MANIFEST_NO_ALIASES)
        rc = fail(b, TD_EINVAL, "%s:%d: aliases are not accepted here (*%s): write the value out",
                  m->name, line, name);
    else if (!(a = find_anchor(b, name)))
        rc = fail(b, TD_EINVAL, "%s:%d: alias *%s names no anchor (&%s) before it", m->name,
                  line, name, name);
    else if (want_key && !json_is_string(a->v))
        rc = fail(b, TD_EINVAL, "%s:%d: mapping keys must be scalars (*%s is not a string)",
                  m->name, line, name);
    else if (!want_key)
        rc = alias_allowed(b, a, name, line);
    free(name);
    if (rc < 0)
        return rc;
    if (!want_key)
        return alias_value(b, a, top, line);
    if (!(top->key = strdup(json_string_value(a->v))))
        return oom(b);
    top->key_line = line;
    top->key_is_merge = 0;
    return 0;
}

/* A sequence or mapping opens: a new frame, which takes the line of its
 * key when it is a mapping's value (where a reader looks). */
static int on_container_start(builder *b, struct fy_event *e, frame *top, int want_key)
{
    td_manifest *m = b->m;
    int line = event_line(e);
    if (want_key)
        return fail(b, TD_EINVAL, "%s:%d: mapping keys must be scalars", m->name,
                    line ? line : top->line);
    if (b->depth >= MAX_DEPTH)
        return fail(b, TD_EINVAL, "%s:%d: nesting deeper than %d levels", m->name,
                    line ? line : top->line, MAX_DEPTH);
    if (top && json_is_object(top->v))
        line = top->key_line;
    if (!line)
        line = top ? top->line : 1;
    int seq = e->type == FYET_SEQUENCE_START;
    struct fy_token *at = seq ? e->sequence_start.anchor : e->mapping_start.anchor;
    frame *f = &b->stack[b->depth];
    memset(f, 0, sizeof *f);
    f->v = seq ? json_array() : json_object();
    f->line = line;
    f->made_before = b->direct + b->copied;
    f->bytes_before = b->bytes;
    if (at && !(f->anchor = token_name(at))) {
        json_decref(f->v);
        return oom(b);
    }
    if (!f->v) {
        free(f->anchor);
        return oom(b);
    }
    b->direct++;
    b->depth++;
    return 0;
}

/* The innermost container closes: merge keys applied, its anchor noted
 * with what it holds, and the container placed in its parent. */
static int on_container_end(builder *b, frame *f)
{
    if (!f)
        return 0;
    if (f->merges && apply_merges(b, f) < 0)
        return -1;
    json_t *v = f->v;
    char *anchor = f->anchor;
    size_t nodes = b->direct + b->copied - f->made_before;
    size_t bytes = b->bytes - f->bytes_before;
    int line = f->line;
    f->v = NULL;
    f->anchor = NULL;
    free_frame(f);
    b->depth--;
    if (anchor && add_anchor(b, anchor, v, nodes, bytes) < 0) {
        json_decref(v);
        return -1;
    }
    return place(b, v, line);
}

/* One event. 0, or -1 with b->st and the message set. */
static int on_event(builder *b, struct fy_event *e)
{
    frame *top = b->depth ? &b->stack[b->depth - 1] : NULL;
    int want_key = top && json_is_object(top->v) && !top->key;
    switch (e->type) {
    case FYET_DOCUMENT_START:
        clear_anchors(b);
        b->root = NULL;
        return 0;
    case FYET_SCALAR: return on_scalar(b, e, top, want_key);
    case FYET_ALIAS: return on_alias(b, e, top, want_key);
    case FYET_SEQUENCE_START:
    case FYET_MAPPING_START: return on_container_start(b, e, top, want_key);
    case FYET_SEQUENCE_END:
    case FYET_MAPPING_END: return on_container_end(b, top);
    default: return 0;
    }
}

typedef struct {
    int have;
    int line, column;
    char msg[256];
} first_diag;

/* libfyaml formats "<input>:LINE:COL: error: MESSAGE\n<source excerpt>";
 * keep the position and message of the first error only. */
static void diag_capture(struct fy_diag *diag, void *user, const char *buf, size_t len)
{
    (void)diag;
    first_diag *fd = user;
    if (fd->have)
        return;
    char tmp[1024];
    size_t n = len < sizeof tmp - 1 ? len : sizeof tmp - 1;
    memcpy(tmp, buf, n);
    tmp[n] = '\0';
    char *e = strstr(tmp, ": error: ");
    if (!e)
        return;
    char *msg = e + 9;
    msg[strcspn(msg, "\n")] = '\0';
    *e = '\0';
    char *c = strrchr(tmp, ':');
    if (!c)
        return;
    *c = '\0';
    char *l = strrchr(tmp, ':');
    if (!l)
        return;
    fd->line = atoi(l + 1);
    fd->column = atoi(c + 1);
    snprintf(fd->msg, sizeof fd->msg, "%s", msg);
    fd->have = 1;
}

static void diag_message(const first_diag *fd, const char *name, td_err *err)
{
    if (fd->have)
        td_err_set(err, TD_EINVAL, "%s:%d:%d: %s", name, fd->line, fd->column, fd->msg);
    else
        td_err_set(err, TD_EINVAL, "%s: invalid YAML", name);
}

/* Offset of the first byte that is not well-formed UTF-8 (RFC 3629: no
 * overlongs, no surrogates, at most U+10FFFF), or len if all is well.
 * YAML is UTF-8; libfyaml 0.7 may loop forever on some invalid input, so
 * nothing invalid reaches it. */
static size_t utf8_invalid_at(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        size_t n;
        unsigned cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            n = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3;
            cp = c & 0x07;
        } else {
            return i;
        }
        for (size_t k = 1; k <= n; k++) {
            if (i + k >= len || (s[i + k] & 0xc0) != 0x80)
                return i;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return i;
        i += n + 1;
    }
    return len;
}

void td_manifest_destroy(td_manifest *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->ndocs; i++)
        json_decref(m->docs[i]);
    free(m->docs);
    free(m->lines);
    free(m->name);
    free(m);
}

td_status td_manifest_parse(const char *name, const char *buf, size_t len, td_manifest **out,
                            td_err *err)
{
    return td_manifest_parse_opts(name, buf, len, NULL, out, err);
}

td_status td_manifest_parse_opts(const char *name, const char *buf, size_t len,
                                 const td_manifest_opts *o, td_manifest **out, td_err *err)
{
    if (len > TD_MANIFEST_MAX)
        return td_err_set(err, TD_EINVAL, "%s: larger than %u bytes", name, TD_MANIFEST_MAX);
    td_manifest *m = calloc(1, sizeof *m);
    if (!m || !(m->name = strdup(name))) {
        free(m);
        return td_err_set(err, TD_ENOMEM, "%s: out of memory", name);
    }
    struct fy_diag_cfg dcfg;
    memset(&dcfg, 0, sizeof dcfg);
    dcfg.fp = NULL;
    first_diag fd = {0, 0, 0, {0}};
    dcfg.output_fn = diag_capture; /* the first error becomes our message */
    dcfg.user = &fd;
    dcfg.show_position = true;
    dcfg.level = FYET_ERROR;
    struct fy_diag *diag = fy_diag_create(&dcfg);
    if (!diag) {
        td_manifest_destroy(m);
        return td_err_set(err, TD_ENOMEM, "%s: out of memory", name);
    }
    /* No FYPCF_RESOLVE_DOCUMENT: aliases and merge keys are resolved by
     * the builder, within its budget. */
    struct fy_parse_cfg cfg = {
        .search_path = "",
        .flags = FYPCF_JSON_NONE | FYPCF_DEFAULT_VERSION_1_2,
        .userdata = NULL,
        .diag = diag,
    };
    struct fy_parser *fyp = fy_parser_create(&cfg);
    fy_diag_unref(diag); /* the parser holds its own reference */
    if (!fyp) {
        td_manifest_destroy(m);
        return td_err_set(err, TD_ENOMEM, "%s: cannot create YAML parser", name);
    }
    /* fy_parser_set_string wants NUL-free input it can keep; copy it. */
    char *copy = malloc(len + 1);
    if (!copy) {
        fy_parser_destroy(fyp);
        td_manifest_destroy(m);
        return td_err_set(err, TD_ENOMEM, "%s: out of memory", name);
    }
    memcpy(copy, buf, len);
    copy[len] = '\0';
    if (memchr(copy, '\0', len)) {
        free(copy);
        fy_parser_destroy(fyp);
        td_manifest_destroy(m);
        return td_err_set(err, TD_EINVAL, "%s: contains a NUL byte; not a YAML text", name);
    }
    size_t bad = utf8_invalid_at((const unsigned char *)copy, len);
    if (bad < len) {
        int line = 1, col = 1;
        for (size_t i = 0; i < bad; i++) {
            col = copy[i] == '\n' ? 1 : col + 1;
            line += copy[i] == '\n';
        }
        free(copy);
        fy_parser_destroy(fyp);
        td_manifest_destroy(m);
        return td_err_set(err, TD_EINVAL, "%s:%d:%d: invalid UTF-8 (YAML text must be UTF-8)",
                          name, line, col);
    }
    builder b;
    memset(&b, 0, sizeof b);
    b.m = m;
    b.flags = o ? o->flags : 0;
    b.err = err;
    b.st = TD_OK;
    m->src = copy;
    m->src_len = len;
    size_t cap = 0;
    if (fy_parser_set_string(fyp, copy, len) != 0)
        fail(&b, TD_EINVAL, "%s: cannot read input", name);
    while (b.st == TD_OK) {
        struct fy_event *e = fy_parser_parse(fyp);
        if (!e) {
            if (fy_parser_get_stream_error(fyp)) {
                diag_message(&fd, name, err);
                b.st = TD_EINVAL;
            }
            break;
        }
        int end = e->type == FYET_DOCUMENT_END;
        int rc = on_event(&b, e);
        fy_parser_event_free(fyp, e);
        if (rc < 0 || !end)
            continue;
        json_t *j = b.root;
        b.root = NULL;
        clear_anchors(&b);
        if (!j || json_is_null(j)) {
            json_decref(j);
            continue;
        }
        if (!json_is_object(j)) {
            int doc_line = td_manifest_line(m, j);
            json_decref(j);
            fail(&b, TD_EINVAL, "%s:%d: document %zu is not a mapping (an object)", name,
                 doc_line ? doc_line : 1, m->ndocs + 1);
            break;
        }
        if (m->ndocs == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            json_t **nd = realloc(m->docs, ncap * sizeof *nd);
            if (!nd) {
                json_decref(j);
                oom(&b);
                break;
            }
            m->docs = nd;
            cap = ncap;
        }
        m->docs[m->ndocs++] = j;
    }
    while (b.depth > 0)
        free_frame(&b.stack[--b.depth]);
    json_decref(b.root);
    clear_anchors(&b);
    free(b.anchors);
    m->nodes = b.direct + b.copied;
    m->alias_nodes = b.copied;
    m->src = NULL;
    m->src_len = 0;
    fy_parser_destroy(fyp);
    free(copy);
    if (b.st != TD_OK) {
        td_manifest_destroy(m);
        return b.st;
    }
    *out = m;
    return TD_OK;
}

td_status td_manifest_load_file(const char *path, td_manifest **out, td_err *err)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f)
        return td_err_set(err, TD_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        if (f != stdin)
            fclose(f);
        return td_err_set(err, TD_ENOMEM, "%s: out of memory", path);
    }
    for (;;) {
        if (len == cap) {
            if (cap > TD_MANIFEST_MAX) {
                free(buf);
                if (f != stdin)
                    fclose(f);
                return td_err_set(err, TD_EINVAL, "%s: larger than %u bytes", path,
                                  TD_MANIFEST_MAX);
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                if (f != stdin)
                    fclose(f);
                return td_err_set(err, TD_ENOMEM, "%s: out of memory", path);
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (r == 0)
            break;
    }
    int bad = ferror(f);
    if (f != stdin)
        fclose(f);
    if (bad) {
        free(buf);
        return td_err_set(err, TD_EIO, "%s: read error", path);
    }
    td_status st = td_manifest_parse(strcmp(path, "-") == 0 ? "<stdin>" : path, buf, len, out,
                                     err);
    free(buf);
    return st;
}

size_t td_manifest_nodes(const td_manifest *m, size_t *from_aliases)
{
    if (from_aliases)
        *from_aliases = m ? m->alias_nodes : 0;
    return m ? m->nodes : 0;
}

size_t td_manifest_count(const td_manifest *m)
{
    return m ? m->ndocs : 0;
}

json_t *td_manifest_doc(const td_manifest *m, size_t i)
{
    return m && i < m->ndocs ? m->docs[i] : NULL;
}

const char *td_manifest_name(const td_manifest *m)
{
    return m ? m->name : "";
}

td_status td_manifest_err(const td_manifest *m, const json_t *node, td_err *err, td_status s,
                          const char *fmt, ...)
{
    if (!err)
        return s;
    char msg[TD_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line = td_manifest_line(m, node);
    if (m && line)
        snprintf(err->msg, sizeof err->msg, "%s:%d: %s", m->name, line, msg);
    else if (m)
        snprintf(err->msg, sizeof err->msg, "%s: %s", m->name, msg);
    else
        snprintf(err->msg, sizeof err->msg, "%s", msg);
    return s;
}

/* A string may be written plain if reading it back yields the same string:
 * not empty, not typed otherwise by the core schema (null, bool, number),
 * no indicator first, only "safe" characters. */
static int plain_safe(const char *s)
{
    if (!*s || strchr("-?:,[]{}#&*!|>'\"%@` ", s[0]))
        return 0;
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20 || c == 0x7f || c == '#' || c == '\'' || c == '"' || c == '\\')
            return 0;
        if (c == ':' && (p[1] == ' ' || p[1] == '\0'))
            return 0;
        if (c == ' ' && (p[1] == '#' || p[1] == ' ' || p[1] == '\0'))
            return 0;
    }
    json_t *typed = plain_scalar(s);
    int same = json_is_string(typed) && strcmp(json_string_value(typed), s) == 0;
    json_decref(typed);
    return same;
}

static int write_scalar(const json_t *v, FILE *f)
{
    if (json_is_string(v) && plain_safe(json_string_value(v)))
        return fputs(json_string_value(v), f) < 0 ? -1 : 0;
    return json_dumpf(v, f, JSON_ENCODE_ANY | JSON_COMPACT);
}

static int write_key(const char *k, FILE *f)
{
    if (plain_safe(k))
        return fputs(k, f) < 0 ? -1 : 0;
    json_t *s = json_string(k);
    int rc = s ? json_dumpf(s, f, JSON_ENCODE_ANY) : -1;
    json_decref(s);
    return rc;
}

static int is_empty_container(const json_t *v)
{
    return (json_is_object(v) && json_object_size(v) == 0) ||
           (json_is_array(v) && json_array_size(v) == 0);
}

static int write_node(const json_t *v, int indent, FILE *f)
{
    int rc = 0;
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        int first = 1;
        json_object_foreach((json_t *)v, k, x)
        {
            if (!first)
                fprintf(f, "%*s", indent, "");
            first = 0;
            rc |= write_key(k, f);
            if (is_empty_container(x)) {
                rc |= fputs(json_is_object(x) ? ": {}\n" : ": []\n", f) < 0;
            } else if (json_is_object(x)) {
                fprintf(f, ":\n%*s", indent + 2, "");
                rc |= write_node(x, indent + 2, f);
            } else if (json_is_array(x)) {
                fprintf(f, ":\n%*s", indent, "");
                rc |= write_node(x, indent, f);
            } else {
                fputs(": ", f);
                rc |= write_scalar(x, f);
                fputc('\n', f);
            }
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach((json_t *)v, i, x)
        {
            if (i)
                fprintf(f, "%*s", indent, "");
            fputs("- ", f);
            if (is_empty_container(x)) {
                rc |= fputs(json_is_object(x) ? "{}\n" : "[]\n", f) < 0;
            } else if (json_is_object(x) || json_is_array(x)) {
                rc |= write_node(x, indent + 2, f);
            } else {
                rc |= write_scalar(x, f);
                fputc('\n', f);
            }
        }
    } else {
        rc |= write_scalar(v, f);
        fputc('\n', f);
    }
    return rc ? -1 : 0;
}

int td_yaml_write(const json_t *v, FILE *f)
{
    if (is_empty_container(v))
        return fputs(json_is_object(v) ? "{}\n" : "[]\n", f) < 0 ? -1 : 0;
    int rc = write_node(v, 0, f);
    return rc || ferror(f) ? -1 : 0;
}
