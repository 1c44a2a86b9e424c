/* http_buf.c - the bounded growable byte buffer (http_buf.h). */
#include "io/http_buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void td__buf_init(td__buf *b, size_t max)
{
    b->p = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

void td__buf_fini(td__buf *b)
{
    free(b->p);
    td__buf_init(b, b->max);
}

td_status td__buf_append(td__buf *b, const void *d, size_t n)
{
    if (n > b->max || b->len > b->max - n)
        return TD_EQUOTA;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap = cap > SIZE_MAX / 2 ? b->len + n + 1 : cap * 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return TD_ENOMEM;
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, d, n);
    b->len += n;
    b->p[b->len] = '\0';
    return TD_OK;
}

td_status td__buf_printf(td__buf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return TD_EINVAL;
    if ((size_t)n < sizeof small)
        return td__buf_append(b, small, (size_t)n);
    char *big = malloc((size_t)n + 1);
    if (!big)
        return TD_ENOMEM;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    td_status st = td__buf_append(b, big, (size_t)n);
    free(big);
    return st;
}

char *td__buf_take(td__buf *b, size_t *len)
{
    char *p = b->p;
    *len = b->len;
    td__buf_init(b, b->max);
    return p;
}

void td__buf_clear(td__buf *b, size_t keep)
{
    if (b->cap > keep) {
        td__buf_fini(b);
    } else {
        b->len = 0;
        if (b->p)
            b->p[0] = '\0';
    }
}
