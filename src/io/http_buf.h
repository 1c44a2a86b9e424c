/* http_buf.h - the bounded growable byte buffer of tenantd's HTTP stack
 * (requests, responses, connection input), shared by io, the simulated
 * model server and the load generator. The maximum is fixed at creation. */
#ifndef TENANTD_HTTP_BUF_H
#define TENANTD_HTTP_BUF_H

#include <stddef.h>

#include "tenantd/status.h"

typedef struct {
    char *p; /* NULL until the first append; always NUL-terminated after */
    size_t len;
    size_t cap;
    size_t max; /* appends that would pass max fail */
} td__buf;

/* An empty buffer that will refuse to grow past max bytes. */
void td__buf_init(td__buf *b, size_t max);
void td__buf_fini(td__buf *b);
/* Appends n bytes of d. TD_OK; TD_EQUOTA if len + n > max; TD_ENOMEM. On
 * failure b is unchanged. */
td_status td__buf_append(td__buf *b, const void *d, size_t n);
td_status td__buf_printf(td__buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands the bytes to the caller (free them) and leaves b empty. */
char *td__buf_take(td__buf *b, size_t *len);
/* Empties b; gives its memory back when it had grown past keep bytes. */
void td__buf_clear(td__buf *b, size_t keep);

#endif
