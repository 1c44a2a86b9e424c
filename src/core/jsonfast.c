/* jsonfast.c - JSON text to jansson values in one pass over a buffer.
 * jansson's decoder reads a byte at a time through a stream callback and
 * copies each token before it builds the value; for the webhook's 5-10 kB
 * reviews that was a third of a review's CPU. This parser builds the same
 * values with jansson's own constructors and gives anything unusual back to
 * json_loadb, so results and error messages stay jansson's. */
#include "core/jsonfast.h"

#include "jsonscan.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "core/hex.h"

#define MAX_DEPTH 512
#define MAX_REAL_TEXT 64

typedef struct {
    const unsigned char *p, *end;
    char *scratch; /* for strings with escapes; grown on demand */
    size_t scratch_cap;
} parser;

/* Every blank is at most ' ' and every token's first byte above it, so a
 * compact body (the API server's) costs one compare per call. */
static inline void skip_ws(parser *ps)
{
    while (ps->p < ps->end && *ps->p <= ' ' &&
           (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\r' || *ps->p == '\t'))
        ps->p++;
}

static bool read_u4(parser *ps, int32_t *out)
{
    if (ps->end - ps->p < 4)
        return false;
    int32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = td_hexval(ps->p[i]);
        if (h < 0)
            return false;
        v = v * 16 + h;
    }
    ps->p += 4;
    *out = v;
    return true;
}

static bool scratch_reserve(parser *ps, size_t n)
{
    if (n <= ps->scratch_cap)
        return true;
    size_t cap = ps->scratch_cap ? ps->scratch_cap : 256;
    while (cap < n)
        cap *= 2;
    char *nb = realloc(ps->scratch, cap);
    if (!nb)
        return false;
    ps->scratch = nb;
    ps->scratch_cap = cap;
    return true;
}

static bool parse_escaped(parser *ps, const char **s, size_t *n);

/* At the opening quote. On success *s and *n give the decoded bytes
 * (inside buf when there is no escape, else in the scratch buffer) and the
 * cursor is past the closing quote. false: not for this parser. */
static inline bool parse_string(parser *ps, const char **s, size_t *n)
{
    const unsigned char *start = ++ps->p, *q = td__json_plain_run(start, ps->end);
    if (q < ps->end && *q == '"') {
        *s = (const char *)start;
        *n = (size_t)(q - start);
        ps->p = q + 1;
        return true;
    }
    if (q >= ps->end || *q != '\\')
        return false;
    return parse_escaped(ps, s, n);
}

/* parse_string's string with escapes, the cursor on its first byte:
 * decoded into scratch, plain runs copied whole; each escape shrinks or
 * keeps the size except \uXXXX pairs, which never exceed their 12 source
 * bytes. Out of line: the common string has none. */
static bool parse_escaped(parser *ps, const char **s, size_t *n)
{
    size_t len = 0;
    for (;;) {
        const unsigned char *q = td__json_plain_run(ps->p, ps->end);
        size_t run = (size_t)(q - ps->p);
        if (!scratch_reserve(ps, len + run + 8))
            return false;
        memcpy(ps->scratch + len, ps->p, run);
        len += run;
        ps->p = q;
        if (ps->p >= ps->end)
            return false;
        unsigned char c = *ps->p;
        if (c == '"') {
            ps->p++;
            break;
        }
        if (c < 0x20 || c >= 0x80)
            return false;
        if (++ps->p >= ps->end)
            return false;
        c = *ps->p++;
        switch (c) {
        case '"': case '\\': case '/':
            ps->scratch[len++] = (char)c;
            break;
        case 'b': ps->scratch[len++] = '\b'; break;
        case 'f': ps->scratch[len++] = '\f'; break;
        case 'n': ps->scratch[len++] = '\n'; break;
        case 'r': ps->scratch[len++] = '\r'; break;
        case 't': ps->scratch[len++] = '\t'; break;
        case 'u': {
            int32_t v;
            if (!read_u4(ps, &v) || v == 0)
                return false;
            if (v >= 0xD800 && v <= 0xDBFF) {
                int32_t lo;
                if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u')
                    return false;
                ps->p += 2;
                if (!read_u4(ps, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                    return false;
                v = ((v - 0xD800) << 10) + (lo - 0xDC00) + 0x10000;
            } else if (v >= 0xDC00 && v <= 0xDFFF) {
                return false;
            }
            char *t = ps->scratch + len;
            if (v < 0x80) {
                t[0] = (char)v;
                len += 1;
            } else if (v < 0x800) {
                t[0] = (char)(0xC0 | (v >> 6));
                t[1] = (char)(0x80 | (v & 0x3F));
                len += 2;
            } else if (v < 0x10000) {
                t[0] = (char)(0xE0 | (v >> 12));
                t[1] = (char)(0x80 | ((v >> 6) & 0x3F));
                t[2] = (char)(0x80 | (v & 0x3F));
                len += 3;
            } else {
                t[0] = (char)(0xF0 | (v >> 18));
                t[1] = (char)(0x80 | ((v >> 12) & 0x3F));
                t[2] = (char)(0x80 | ((v >> 6) & 0x3F));
                t[3] = (char)(0x80 | (v & 0x3F));
                len += 4;
            }
            break;
        }
        default:
            return false;
        }
    }
    *s = ps->scratch;
    *n = len;
    return true;
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static json_t *parse_number(parser *ps)
{
    const unsigned char *start = ps->p, *q = ps->p;
    bool neg = false;
    if (*q == '-') {
        neg = true;
        q++;
    }
    if (q >= ps->end || !is_digit(*q))
        return NULL;
    const unsigned char *digits = q;
    if (*q == '0') {
        q++;
        if (q < ps->end && is_digit(*q))
            return NULL;
    } else {
        while (q < ps->end && is_digit(*q))
            q++;
    }
    size_t nd = (size_t)(q - digits);
    if (q >= ps->end || (*q != '.' && *q != 'e' && *q != 'E')) {
        if (nd > 18)
            return NULL; /* strtoll's range checks are jansson's */
        int64_t v = 0;
        for (const unsigned char *d = digits; d < q; d++)
            v = v * 10 + (*d - '0');
        ps->p = q;
        return json_integer(neg ? -v : v);
    }
    if (*q == '.') {
        q++;
        if (q >= ps->end || !is_digit(*q))
            return NULL;
        while (q < ps->end && is_digit(*q))
            q++;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < ps->end && (*q == '+' || *q == '-'))
            q++;
        if (q >= ps->end || !is_digit(*q))
            return NULL;
        while (q < ps->end && is_digit(*q))
            q++;
    }
    size_t n = (size_t)(q - start);
    if (n >= MAX_REAL_TEXT)
        return NULL;
    char text[MAX_REAL_TEXT];
    memcpy(text, start, n);
    text[n] = 0;
    errno = 0;
    char *e;
    double d = strtod(text, &e); /* tenantd runs in the C locale: '.' is the point */
    if (e != text + n || (errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL)))
        return NULL;
    ps->p = q;
    return json_real(d);
}

/* Members a review's decision never reads, left out of the tree (see
 * td_json_loadb_review). A table names members of one object: each is
 * kept whole, dropped (its text still checked) or looked into with its own
 * table; its last entry (key NULL) says what happens to the members it does
 * not name. */
typedef enum { KEEP, DROP, DESCEND } skip_action;

typedef struct skip_node {
    const char *key;
    skip_action action;
    const struct skip_node *children; /* for DESCEND */
} skip_node;

static const skip_node skip_metadata[] = {{"managedFields", DROP, NULL}, {NULL, KEEP, NULL}};
static const skip_node skip_object[] = {{"metadata", DESCEND, skip_metadata}, {NULL, KEEP, NULL}};
/* What review_decide (admit.c) reads of the request; nothing else does */
static const skip_node skip_request[] = {
    {"uid", KEEP, NULL},         {"kind", KEEP, NULL},        {"namespace", KEEP, NULL},
    {"operation", KEEP, NULL},   {"subResource", KEEP, NULL}, {"object", DESCEND, skip_object},
    {NULL, DROP, NULL}};
static const skip_node skip_review[] = {{"request", DESCEND, skip_request}, {NULL, KEEP, NULL}};

static const skip_node *skip_find(const skip_node *sk, const char *k, size_t kn)
{
    for (; sk->key; sk++)
        if (strlen(sk->key) == kn && memcmp(sk->key, k, kn) == 0)
            return sk;
    return sk;
}

static json_t *parse_value(parser *ps, int depth, const skip_node *sk);
static bool skip_value(parser *ps, int depth);

/* At '{' or '[': steps past it; true (and past the close) if it is empty. */
static bool open_empty(parser *ps, unsigned char close)
{
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return true;
    }
    return false;
}

/* At a member's key: *k, *kn as parse_string gives them, the cursor past
 * the ':' and the blanks after it. false: not for this parser. */
static bool member_key(parser *ps, const char **k, size_t *kn)
{
    if (ps->p >= ps->end || *ps->p != '"' || !parse_string(ps, k, kn))
        return false;
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != ':')
        return false;
    ps->p++;
    skip_ws(ps);
    return true;
}

/* After a member or element: 1 at ',' (the cursor on the next one), 0 at
 * close (the cursor past it), -1 at anything else. */
static int next_item(parser *ps, unsigned char close)
{
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ',') {
        ps->p++;
        skip_ws(ps);
        return 1;
    }
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return 0;
    }
    return -1;
}

static json_t *parse_object(parser *ps, int depth, const skip_node *sk)
{
    json_t *obj = json_object();
    if (!obj)
        return NULL;
    if (open_empty(ps, '}'))
        return obj;
    for (;;) {
        const char *k;
        size_t kn;
        if (!member_key(ps, &k, &kn))
            goto fail;
        /* The key may sit in the scratch buffer, which the value's strings
         * reuse: keep a copy on the stack when it is short, else give up. */
        char kbuf[256];
        if (k == ps->scratch) {
            if (kn > sizeof kbuf)
                goto fail;
            memcpy(kbuf, k, kn);
            k = kbuf;
        }
        const skip_node *node = sk ? skip_find(sk, k, kn) : NULL;
        if (node && node->action == DROP) {
            if (!skip_value(ps, depth))
                goto fail;
        } else {
            json_t *v =
                parse_value(ps, depth, node && node->action == DESCEND ? node->children : NULL);
            if (!v || json_object_setn_new_nocheck(obj, k, kn, v) != 0)
                goto fail;
        }
        int more = next_item(ps, '}');
        if (more == 0)
            return obj;
        if (more < 0)
            goto fail;
    }
fail:
    json_decref(obj);
    return NULL;
}

static json_t *parse_array(parser *ps, int depth)
{
    json_t *arr = json_array();
    if (!arr)
        return NULL;
    if (open_empty(ps, ']'))
        return arr;
    for (;;) {
        json_t *v = parse_value(ps, depth, NULL);
        if (!v || json_array_append_new(arr, v) != 0)
            goto fail;
        int more = next_item(ps, ']');
        if (more == 0)
            return arr;
        if (more < 0)
            goto fail;
    }
fail:
    json_decref(arr);
    return NULL;
}

static bool literal(parser *ps, const char *word, size_t n)
{
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return false;
    /* jansson scans a whole run of letters as one token ("truex" is invalid) */
    if ((size_t)(ps->end - ps->p) > n) {
        unsigned char c = ps->p[n];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            return false;
    }
    ps->p += n;
    return true;
}

static json_t *parse_value(parser *ps, int depth, const skip_node *sk)
{
    if (ps->p >= ps->end)
        return NULL;
    switch (*ps->p) {
    case '{':
        return depth >= MAX_DEPTH ? NULL : parse_object(ps, depth + 1, sk);
    case '[':
        return depth >= MAX_DEPTH ? NULL : parse_array(ps, depth + 1);
    case '"': {
        const char *s;
        size_t n;
        if (!parse_string(ps, &s, &n))
            return NULL;
        return json_stringn_nocheck(s, n);
    }
    case 't':
        return literal(ps, "true", 4) ? json_true() : NULL;
    case 'f':
        return literal(ps, "false", 5) ? json_false() : NULL;
    case 'n':
        return literal(ps, "null", 4) ? json_null() : NULL;
    default:
        return parse_number(ps);
    }
}

/* Checks a value as parse_value would take it, building nothing: the same
 * grammar, so whatever it accepts jansson accepts too (numbers, rare here,
 * are built and dropped to share parse_number's checks). */
static bool skip_value(parser *ps, int depth)
{
    if (ps->p >= ps->end)
        return false;
    const char *s;
    size_t n;
    switch (*ps->p) {
    case '{':
    case '[': {
        if (depth >= MAX_DEPTH)
            return false;
        unsigned char close = *ps->p == '{' ? '}' : ']';
        bool obj = close == '}';
        if (open_empty(ps, close))
            return true;
        for (;;) {
            if (obj && !member_key(ps, &s, &n))
                return false;
            if (!skip_value(ps, depth + 1))
                return false;
            int more = next_item(ps, close);
            if (more <= 0)
                return more == 0;
        }
    }
    case '"':
        return parse_string(ps, &s, &n);
    case 't':
        return literal(ps, "true", 4);
    case 'f':
        return literal(ps, "false", 5);
    case 'n':
        return literal(ps, "null", 4);
    default: {
        json_t *v = parse_number(ps);
        json_decref(v);
        return v != NULL;
    }
    }
}

static json_t *load(const char *buf, size_t len, const skip_node *sk, json_error_t *error)
{
    if (buf) {
        parser ps = {.p = (const unsigned char *)buf, .end = (const unsigned char *)buf + len};
        skip_ws(&ps);
        json_t *v = NULL;
        if (ps.p < ps.end && (*ps.p == '{' || *ps.p == '['))
            v = parse_value(&ps, 0, sk);
        if (v) {
            skip_ws(&ps);
            if (ps.p != ps.end) {
                json_decref(v);
                v = NULL;
            }
        }
        free(ps.scratch);
        if (v)
            return v;
    }
    return json_loadb(buf, len, 0, error);
}

json_t *td_json_loadb(const char *buf, size_t len, json_error_t *error)
{
    return load(buf, len, NULL, error);
}

json_t *td_json_loadb_review(const char *buf, size_t len, json_error_t *error)
{
    return load(buf, len, skip_review, error);
}
