/* jsondump.h - jansson values to compact JSON text without jansson's dump
 * machinery (a callback per token and a hash insert per container for its
 * loop check): the webhook's answer and its JSON Patch, byte for byte what
 * json_dumpb(v, …, JSON_COMPACT) writes. */
#ifndef TENANTD_JSONDUMP_H
#define TENANTD_JSONDUMP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* A growable output buffer of malloc'd memory with a hard maximum. After a
 * failed append (out of memory, or over max) `failed` is set and further
 * appends do nothing, so a writer checks once at the end. */
typedef struct {
    char *s; /* NUL-terminated once anything was appended; NULL before */
    size_t len, cap, max;
    bool failed;
} td_jbuf;

#define TD_JBUF_INIT(maxlen) {NULL, 0, 0, (maxlen), false}

/* Makes room for n more bytes (and a NUL); false (and failed set) if not. */
bool td_jbuf_reserve(td_jbuf *b, size_t n);

/* Appends n bytes of s. */
void td_jbuf_put(td_jbuf *b, const char *s, size_t n);

/* Appends the text of a NUL-terminated string. */
void td_jbuf_puts(td_jbuf *b, const char *s);

/* Appends a decimal integer. */
void td_jbuf_int(td_jbuf *b, long long v);

/* Frees the buffer; b may be reused after. */
void td_jbuf_fini(td_jbuf *b);

/* Whether s[0..n) is UTF-8 that jansson accepts (json_string would). */
bool td_utf8_valid(const char *s, size_t n);

/* Appends s[0..n) as a JSON string, quoted and escaped as jansson escapes
 * it (\" \\ \b \f \n \r \t, other control bytes as \u00XX). false, and
 * nothing appended, if s is not valid UTF-8 (json_string refuses it). */
bool td_jbuf_string(td_jbuf *b, const char *s, size_t n);

/* Appends v as json_dumpb(v, buf, size, JSON_COMPACT) writes it (member
 * order as stored, reals as "%.17g" with ".0" or an exponent, strings as
 * above). false when jansson's dump fails too (v not an object or array, a
 * string that is not UTF-8) or on failed; what was appended is then not
 * meaningful. Borrows v. */
bool td_json_dump_compact(td_jbuf *b, const json_t *v);

/* Writes the JSON string contents of s (quotes, backslashes and control
 * bytes escaped; no surrounding quotes) into dst (cap >= 1 bytes),
 * NUL-terminated; cut at a whole character when it would not fit. */
void td_json_escape_to(char *dst, size_t cap, const char *s);

#endif
