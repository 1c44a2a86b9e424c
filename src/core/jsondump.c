/* jsondump.c - compact JSON text from jansson values, as jansson's own
 * json_dumpb(…, JSON_COMPACT) writes it. jansson calls a callback for every
 * token and, for its loop check, formats each container's address and
 * inserts it in a hash table; the webhook's answers (a base64 JSON Patch of
 * 1-2 kB) spent a quarter of a review there. The rules below are jansson
 * 2.14's dump.c, utf.c and strconv.c (jsonp_dtostr). */
#include "core/jsondump.h"

#include "jsonscan.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Containers nested deeper than this are written by json_dumpb itself
 * (the result is the same; it only bounds this writer's stack). */
#define MAX_DEPTH 256

bool td_jbuf_reserve(td_jbuf *b, size_t n)
{
    if (b->failed)
        return false;
    if (n > b->max || b->len + n + 1 > b->max) {
        b->failed = true;
        return false;
    }
    if (b->len + n + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1)
        cap *= 2;
    if (cap > b->max)
        cap = b->max;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->failed = true;
        return false;
    }
    b->s = s;
    b->cap = cap;
    return true;
}

void td_jbuf_put(td_jbuf *b, const char *s, size_t n)
{
    if (!td_jbuf_reserve(b, n))
        return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void td_jbuf_puts(td_jbuf *b, const char *s)
{
    td_jbuf_put(b, s, strlen(s));
}

void td_jbuf_int(td_jbuf *b, long long v)
{
    /* "%lld", as jansson prints json_int_t */
    char t[24], *e = t + sizeof t, *d = e;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do
        *--d = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0)
        *--d = '-';
    td_jbuf_put(b, d, (size_t)(e - d));
}

void td_jbuf_fini(td_jbuf *b)
{
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
    b->failed = false;
}

/* The length of the UTF-8 sequence at s[0..n) jansson accepts (utf8.c:
 * no overlong forms, no surrogates, nothing past U+10FFFF), 0 if none. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char u = s[0];
    size_t count;
    int32_t v;
    if (u < 0x80)
        return 1;
    if (u >= 0xC2 && u <= 0xDF)
        count = 2, v = u & 0x1F;
    else if (u >= 0xE0 && u <= 0xEF)
        count = 3, v = u & 0xF;
    else if (u >= 0xF0 && u <= 0xF4)
        count = 4, v = u & 0x7;
    else
        return 0;
    if (count > n)
        return 0;
    for (size_t i = 1; i < count; i++) {
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
        v = (v << 6) + (s[i] & 0x3F);
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) || (count == 3 && v < 0x800) ||
        (count == 4 && v < 0x10000))
        return 0;
    return count;
}

bool td_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        if (*p < 0x80) {
            p++;
            continue;
        }
        size_t k = utf8_seq(p, (size_t)(end - p));
        if (!k)
            return false;
        p += k;
    }
    return true;
}

/* Appends n bytes known to fit (td_jbuf_reserve'd). */
static inline void put_fit(td_jbuf *b, const void *s, size_t n)
{
    memcpy(b->s + b->len, s, n);
    b->len += n;
}

/* jansson's dump_string: the text between escapes is written when an
 * escape or the end is reached, so on a byte that is not UTF-8 what was
 * written so far stays and the pending run does not (which matters for a
 * key, whose failure jansson ignores). false on such a byte. */
static bool dump_string(td_jbuf *b, const char *str, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *p = (const unsigned char *)str, *end = p + len, *run = p;
    td_jbuf_put(b, "\"", 1);
    for (;;) {
        p = td__json_plain_run(p, end);
        if (p >= end)
            break;
        unsigned char c = *p;
        if (c >= 0x80) {
            size_t k = utf8_seq(p, (size_t)(end - p));
            if (!k)
                return false;
            p += k;
            continue;
        }
        if (!td_jbuf_reserve(b, (size_t)(p - run) + 6))
            return false;
        put_fit(b, run, (size_t)(p - run));
        char esc[6] = {'\\', 0};
        size_t n = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            esc[1] = 'u', esc[2] = '0', esc[3] = '0', esc[4] = hex[c >> 4], esc[5] = hex[c & 15];
            n = 6;
        }
        put_fit(b, esc, n);
        b->s[b->len] = '\0';
        run = ++p;
    }
    if (td_jbuf_reserve(b, (size_t)(p - run) + 1)) {
        put_fit(b, run, (size_t)(p - run));
        put_fit(b, "\"", 1);
        b->s[b->len] = '\0';
    }
    return true;
}

bool td_jbuf_string(td_jbuf *b, const char *s, size_t n)
{
    if (!td_utf8_valid(s, n))
        return false;
    return dump_string(b, s, n);
}

/* jansson's jsonp_dtostr with precision 17 (the C locale's '.'). */
static bool dump_real(td_jbuf *b, double value)
{
    char buf[100];
    int ret = snprintf(buf, sizeof buf, "%.17g", value);
    if (ret < 0 || (size_t)ret >= sizeof buf)
        return false;
    size_t length = (size_t)ret;
    if (!strchr(buf, '.') && !strchr(buf, 'e')) {
        if (length + 3 >= sizeof buf)
            return false;
        buf[length++] = '.';
        buf[length++] = '0';
        buf[length] = '\0';
    }
    char *start = strchr(buf, 'e');
    if (start) {
        start++;
        char *end = start + 1;
        if (*start == '-')
            start++;
        while (*end == '0')
            end++;
        if (end != start) {
            memmove(start, end, length - (size_t)(end - buf));
            length -= (size_t)(end - start);
        }
    }
    td_jbuf_put(b, buf, length);
    return true;
}

/* A container too deep for this writer's stack: jansson writes it. */
static bool dump_by_jansson(td_jbuf *b, const json_t *v)
{
    size_t n = json_dumpb(v, NULL, 0, JSON_COMPACT);
    if (!n || !td_jbuf_reserve(b, n))
        return false;
    if (json_dumpb(v, b->s + b->len, n, JSON_COMPACT) != n)
        return false;
    b->len += n;
    b->s[b->len] = '\0';
    return true;
}

static bool dump_value(td_jbuf *b, const json_t *v, int depth)
{
    switch (json_typeof(v)) {
    case JSON_NULL:
        td_jbuf_put(b, "null", 4);
        return true;
    case JSON_TRUE:
        td_jbuf_put(b, "true", 4);
        return true;
    case JSON_FALSE:
        td_jbuf_put(b, "false", 5);
        return true;
    case JSON_INTEGER:
        td_jbuf_int(b, (long long)json_integer_value(v));
        return true;
    case JSON_REAL:
        return dump_real(b, json_real_value(v));
    case JSON_STRING:
        return dump_string(b, json_string_value(v), json_string_length(v));
    case JSON_ARRAY: {
        if (depth >= MAX_DEPTH)
            return dump_by_jansson(b, v);
        size_t n = json_array_size(v);
        td_jbuf_put(b, "[", 1);
        for (size_t i = 0; i < n; i++) {
            if (i)
                td_jbuf_put(b, ",", 1);
            if (!dump_value(b, json_array_get(v, i), depth + 1))
                return false;
        }
        td_jbuf_put(b, "]", 1);
        return true;
    }
    case JSON_OBJECT: {
        if (depth >= MAX_DEPTH)
            return dump_by_jansson(b, v);
        td_jbuf_put(b, "{", 1);
        bool first = true;
        for (void *it = json_object_iter((json_t *)v); it;
             it = json_object_iter_next((json_t *)v, it)) {
            if (!first)
                td_jbuf_put(b, ",", 1);
            first = false;
            /* jansson ignores a key's failure: its text so far stays */
            (void)dump_string(b, json_object_iter_key(it), json_object_iter_key_len(it));
            td_jbuf_put(b, ":", 1);
            if (!dump_value(b, json_object_iter_value(it), depth + 1))
                return false;
        }
        td_jbuf_put(b, "}", 1);
        return true;
    }
    }
    return false;
}

bool td_json_dump_compact(td_jbuf *b, const json_t *v)
{
    if (!json_is_object(v) && !json_is_array(v))
        return false;
    return dump_value(b, v, 0) && !b->failed;
}

void td_json_escape_to(char *dst, size_t cap, const char *s)
{
    size_t k = 0;
    for (; *s && k + 7 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            dst[k++] = '\\';
            dst[k++] = (char)ch;
        } else if (ch < 0x20) {
            k += (size_t)snprintf(dst + k, cap - k, "\\u%04x", ch);
        } else {
            dst[k++] = (char)ch;
        }
    }
    dst[k] = '\0';
}
