/* strbuf.c - growable strings with a maximum size. */
#include "core/strbuf.h"

#include <stdlib.h>
#include <string.h>

void td_strbuf_append(td_strbuf *b, const char *text)
{
    size_t n = strlen(text);
    if (b->failed)
        return;
    if (b->len + n + 1 > b->max) {
        b->failed = true;
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 128;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, text, n + 1);
    b->len += n;
}

const char *td_strbuf_str(const td_strbuf *b)
{
    return b->s ? b->s : "";
}

void td_strbuf_fini(td_strbuf *b)
{
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
}
