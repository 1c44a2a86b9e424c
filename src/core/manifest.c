/* manifest.c - YAML documents to jansson, with a side table of source lines.
 * libfyaml parses (and resolves anchors and merge keys); we walk its tree
 * once, typing plain scalars as YAML 1.2's core schema does. */
#include "tenantd/manifest.h"

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
};

#define MAX_DEPTH 64

static size_t hash_ptr(const void *p)
{
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
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

static int node_line(struct fy_node *fyn)
{
    struct fy_token *t = NULL;
    if (fy_node_get_type(fyn) == FYNT_SCALAR)
        t = fy_node_get_scalar_token(fyn);
    if (t) {
        const struct fy_mark *mk = fy_token_start_mark(t);
        if (mk)
            return mk->line + 1;
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
static char *scalar_text(const td_manifest *m, struct fy_node *fyn, size_t *len)
{
    struct fy_token *t = fy_node_get_scalar_token(fyn);
    const struct fy_mark *a = t ? fy_token_start_mark(t) : NULL;
    const struct fy_mark *b = t ? fy_token_end_mark(t) : NULL;
    /* the marks span the inside, between the quotes */
    if (fy_node_get_style(fyn) == FYNS_SINGLE_QUOTED && a && b && m->src && a->input_pos >= 1 &&
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
    const char *s = fy_node_get_scalar(fyn, len);
    if (!s)
        *len = 0;
    return strndup(s ? s : "", *len);
}

static json_t *convert(td_manifest *m, struct fy_node *fyn, int depth, int parent_line,
                       td_err *err)
{
    if (depth > MAX_DEPTH) {
        td_err_set(err, TD_EINVAL, "%s:%d: nesting deeper than %d levels", m->name, parent_line,
                   MAX_DEPTH);
        return NULL;
    }
    json_t *out = NULL;
    int line = node_line(fyn);
    if (!line)
        line = parent_line;

    switch (fy_node_get_type(fyn)) {
    case FYNT_SCALAR: {
        size_t len;
        char *z = scalar_text(m, fyn, &len);
        if (!z)
            goto oom;
        if (memchr(z, '\0', len)) {
            free(z);
            td_err_set(err, TD_EINVAL, "%s:%d: NUL byte in a scalar", m->name, line);
            return NULL;
        }
        if (fy_node_get_style(fyn) == FYNS_PLAIN && !fy_node_get_tag(fyn, NULL))
            out = plain_scalar(z);
        else
            out = json_stringn(z, len);
        free(z);
        if (!out) {
            td_err_set(err, TD_EINVAL, "%s:%d: scalar is not valid UTF-8", m->name, line);
            return NULL;
        }
        break;
    }
    case FYNT_SEQUENCE: {
        out = json_array();
        if (!out)
            goto oom;
        void *it = NULL;
        struct fy_node *item;
        int item_line = line;
        while ((item = fy_node_sequence_iterate(fyn, &it)) != NULL) {
            json_t *v = convert(m, item, depth + 1, item_line, err);
            if (!v) {
                json_decref(out);
                return NULL;
            }
            int l = td_manifest_line(m, v);
            if (l)
                item_line = l;
            if (json_array_append_new(out, v) < 0) {
                json_decref(out);
                goto oom;
            }
        }
        break;
    }
    case FYNT_MAPPING: {
        out = json_object();
        if (!out)
            goto oom;
        void *it = NULL;
        struct fy_node_pair *pair;
        int first = 0;
        while ((pair = fy_node_mapping_iterate(fyn, &it)) != NULL) {
            struct fy_node *k = fy_node_pair_key(pair);
            struct fy_node *v = fy_node_pair_value(pair);
            if (!k || fy_node_get_type(k) != FYNT_SCALAR) {
                json_decref(out);
                td_err_set(err, TD_EINVAL, "%s:%d: mapping keys must be scalars", m->name, line);
                return NULL;
            }
            size_t klen;
            char *key = scalar_text(m, k, &klen);
            if (!key) {
                json_decref(out);
                goto oom;
            }
            int kline = node_line(k);
            if (!kline)
                kline = line;
            if (!first)
                first = kline;
            json_t *jv;
            if (v) {
                jv = convert(m, v, depth + 1, kline, err);
            } else {
                jv = json_null();
            }
            if (!jv) {
                free(key);
                json_decref(out);
                return NULL;
            }
            /* Containers take the line of their key, where a reader looks. */
            if (json_is_object(jv) || json_is_array(jv)) {
                if (lines_put(m, jv, kline) < 0) {
                    free(key);
                    json_decref(jv);
                    json_decref(out);
                    goto oom;
                }
            }
            if (json_object_set_new(out, key, jv) < 0) {
                free(key);
                json_decref(out);
                td_err_set(err, TD_EINVAL, "%s:%d: key is not valid UTF-8", m->name, kline);
                return NULL;
            }
            free(key);
        }
        if (first && !td_manifest_line(m, out))
            line = first < line || !line ? first : line;
        break;
    }
    }
    if (out && line && !td_manifest_line(m, out) && lines_put(m, out, line) < 0) {
        json_decref(out);
        goto oom;
    }
    return out;
oom:
    td_err_set(err, TD_ENOMEM, "%s: out of memory", m->name);
    return NULL;
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
    struct fy_parse_cfg cfg = {
        .search_path = "",
        .flags = FYPCF_RESOLVE_DOCUMENT | FYPCF_JSON_NONE |
                 FYPCF_DEFAULT_VERSION_1_2,
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
    td_status st = TD_OK;
    m->src = copy;
    m->src_len = len;
    if (fy_parser_set_string(fyp, copy, len) != 0) {
        st = td_err_set(err, TD_EINVAL, "%s: cannot read input", name);
        goto done;
    }
    size_t cap = 0;
    for (;;) {
        struct fy_document *fyd = fy_parse_load_document(fyp);
        if (!fyd) {
            if (fy_parser_get_stream_error(fyp)) {
                diag_message(&fd, name, err);
                st = TD_EINVAL;
            }
            break;
        }
        struct fy_node *root = fy_document_root(fyd);
        if (!root) {
            fy_parse_document_destroy(fyp, fyd);
            continue;
        }
        int doc_line = 0;
        json_t *j = convert(m, root, 0, 1, err);
        if (j)
            doc_line = td_manifest_line(m, j);
        fy_parse_document_destroy(fyp, fyd);
        if (!j) {
            st = err ? (strstr(err->msg, "out of memory") ? TD_ENOMEM : TD_EINVAL) : TD_EINVAL;
            break;
        }
        if (json_is_null(j)) {
            json_decref(j);
            continue;
        }
        if (!json_is_object(j)) {
            json_decref(j);
            st = td_err_set(err, TD_EINVAL, "%s:%d: document %zu is not a mapping (an object)",
                            name, doc_line ? doc_line : 1, m->ndocs + 1);
            break;
        }
        if (m->ndocs == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            json_t **nd = realloc(m->docs, ncap * sizeof *nd);
            if (!nd) {
                json_decref(j);
                st = td_err_set(err, TD_ENOMEM, "%s: out of memory", name);
                break;
            }
            m->docs = nd;
            cap = ncap;
        }
        m->docs[m->ndocs++] = j;
    }
done:
    m->src = NULL;
    m->src_len = 0;
    fy_parser_destroy(fyp);
    free(copy);
    if (st != TD_OK) {
        td_manifest_destroy(m);
        return st;
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
