/* strbuf.h - a growable string with a hard maximum, for building messages.
 * On overflow or out of memory `failed` is set and further appends are
 * ignored, so a caller checks once at the end. */
#ifndef TENANTD_STRBUF_H
#define TENANTD_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *s; /* NUL-terminated once anything was appended; NULL before */
    size_t len, cap, max;
    bool failed;
} td_strbuf;

#define TD_STRBUF_INIT(maxlen) {NULL, 0, 0, (maxlen), false}

void td_strbuf_append(td_strbuf *b, const char *text);

/* The text so far ("" if nothing). Borrowed. */
const char *td_strbuf_str(const td_strbuf *b);

void td_strbuf_fini(td_strbuf *b);

#endif
