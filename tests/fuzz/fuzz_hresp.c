/* fuzz_hresp.c - libFuzzer target for the response reader (io/hresp.h): one
 * connection's bytes from a server in pieces, read as consecutive responses
 * (collected, or streamed with pauses, as the first byte picks), then the
 * close. Build with -DTD_FUZZ=ON (see fuzz_http.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/hresp.h"

static int on_head(td_hresp *r, void *user)
{
    (void)user;
    /* touch what the reader hands out, so ASan checks it */
    size_t sum = 0;
    for (size_t i = 0; i < r->hdrs.n; i++)
        sum += strlen(r->hdrs.buf.p + r->hdrs.ix[i].name_off) +
               strlen(r->hdrs.buf.p + r->hdrs.ix[i].value_off);
    return (int)(sum % 7 == 0); /* sometimes pause */
}

static int on_body(td_hresp *r, const char *at, size_t n, void *user)
{
    size_t *total = user;
    (void)r;
    for (size_t i = 0; i < n; i++)
        *total += (unsigned char)at[i];
    return (int)(n % 3 == 0);
}

static const td_hresp_callbacks collect = {0};
static const td_hresp_callbacks stream = {.on_head = on_head, .on_body = on_body};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    int mode = data[0] & 1, head = (data[0] >> 1) & 1;
    size_t cut = 1 + (data[0] >> 2); /* piece length, 1..64 */
    data++;
    size--;
    size_t total = 0;
    static const td_hresp_limits lim = {
        .max_header_bytes = 4096, .max_headers = 32, .max_body = 1024};
    td_hresp r;
    td_hresp_init(&r, &lim, mode ? &stream : &collect, &total);
    td_hresp_start(&r, head);
    size_t pos = 0;
    int open = 1;
    while (open && pos < size) {
        size_t n = size - pos < cut ? size - pos : cut;
        const char *p = (const char *)data + pos;
        pos += n;
        while (n) {
            size_t used = td_hresp_feed(&r, p, n);
            if (used > n)
                abort();
            p += used;
            n -= used;
            td_hresp_state st = td_hresp_status(&r);
            if (st == TD_HRESP_DONE) {
                if (r.status < 100 || r.status > 999)
                    abort();
                td_hresp_start(&r, head);
            } else if (st == TD_HRESP_PAUSED) {
                td_hresp_resume(&r);
            } else if (st == TD_HRESP_ERROR) {
                if (!r.err_text)
                    abort();
                open = 0;
                break;
            } else if (used == 0) {
                abort(); /* MORE must take every byte */
            }
        }
    }
    if (open)
        td_hresp_eof(&r);
    td_hresp_fini(&r);
    return 0;
}
