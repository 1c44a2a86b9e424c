/* hreq.c - the HTTP/1.1 request reader (hreq.h): http_parser's callbacks
 * collect the target and the header fields under the limits, refuse what
 * a stricter hop could read otherwise, and hand each complete request to
 * the caller; td__chunk_gate_execute checks chunked framing first. */
#include "io/hreq.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- shared pieces ---- */

int td__http_token_chars(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              (ch && strchr("!#$%&'*+-.^_`|~", ch))))
            return 0;
    }
    return 1;
}

int td__http_value_chars(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            return 0;
    }
    return 1;
}

void td__chunk_gate_arm(td__chunk_gate *g, http_parser *p)
{
    g->begin = 1;
    http_parser_pause(p, 1);
}

void td__chunk_gate_reset(td__chunk_gate *g)
{
    g->begin = g->on = 0;
}

size_t td__chunk_gate_execute(td__chunk_gate *g, http_parser *p, const http_parser_settings *s,
                              const char *data, size_t n, int (*in_message)(http_parser *p),
                              int *bad)
{
    size_t done = 0;
    *bad = 0;
    while (done < n) {
        size_t avail = n - done;
        if (g->on) {
            /* the parser reads only what the check has passed, and
             * nothing past the message's end */
            if (!g->final && g->scanned < avail) {
                size_t m;
                int rc = td__chunked_scan(&g->ck, data + done + g->scanned, avail - g->scanned, &m);
                if (rc < 0) {
                    *bad = 1;
                    return done;
                }
                g->scanned += m;
                g->final = rc == 1;
            }
            if (avail > g->scanned)
                avail = g->scanned;
        }
        size_t k = http_parser_execute(p, s, data + done, avail);
        done += k;
        if (g->on) {
            g->scanned -= k;
            if (g->final && g->scanned == 0)
                g->on = 0;
        }
        enum http_errno e = HTTP_PARSER_ERRNO(p);
        if (e == HPE_PAUSED && g->begin) {
            /* paused at the headers' end: the parser has yet to take
             * their last LF; the body's framing is checked from after it */
            g->begin = 0;
            http_parser_pause(p, 0);
            if (done < n && data[done] == '\n') {
                done += http_parser_execute(p, s, data + done, 1);
                if (HTTP_PARSER_ERRNO(p) != HPE_OK)
                    return done;
            }
            /* (an upgrade without a body would have ended the message) */
            if (in_message(p)) {
                td__chunked_init(&g->ck);
                g->on = 1;
                g->final = 0;
                g->scanned = 0;
            }
            continue;
        }
        if (e != HPE_OK || p->upgrade || k < avail)
            return done;
    }
    return done;
}

void td__hdrs_init(td__hdrs *h, size_t max_bytes, size_t max_fields)
{
    memset(h, 0, sizeof *h);
    td__buf_init(&h->buf, max_bytes + 2 * max_fields); /* and a NUL after each */
    h->max = max_fields;
}

void td__hdrs_fini(td__hdrs *h)
{
    td__buf_fini(&h->buf);
    free(h->ix);
    h->ix = NULL;
    h->n = h->cap = 0;
}

void td__hdrs_clear(td__hdrs *h)
{
    td__buf_clear(&h->buf, 64 * 1024);
    h->n = 0;
    h->in_value = 0;
}

/* Closes the field being read so that buf holds "name\0value\0" for it. */
static td_status end_field(td__hdrs *h)
{
    td_status st = TD_OK;
    if (h->in_value == 1) {
        st = td__buf_append(&h->buf, "", 1);
        if (st == TD_OK) {
            h->ix[h->n - 1].value_off = h->buf.len;
            st = td__buf_append(&h->buf, "", 1);
        }
    } else if (h->in_value == 2) {
        /* http_parser keeps a value's trailing whitespace */
        size_t start = h->ix[h->n - 1].value_off;
        while (h->buf.len > start &&
               (h->buf.p[h->buf.len - 1] == ' ' || h->buf.p[h->buf.len - 1] == '\t'))
            h->buf.len--;
        st = td__buf_append(&h->buf, "", 1);
    }
    h->in_value = 0;
    return st;
}

td_status td__hdrs_name(td__hdrs *h, const char *at, size_t n)
{
    if (h->in_value != 1) {
        td_status st = end_field(h);
        if (st != TD_OK)
            return st;
        if (h->n == h->max)
            return TD_EQUOTA;
        if (h->n == h->cap) {
            size_t cap = h->cap ? h->cap * 2 : 16;
            td__hdr_ix *ix = realloc(h->ix, cap * sizeof *ix);
            if (!ix)
                return TD_ENOMEM;
            h->ix = ix;
            h->cap = cap;
        }
        h->ix[h->n].name_off = h->buf.len;
        h->ix[h->n].value_off = h->buf.len;
        h->n++;
        h->in_value = 1;
    }
    return td__buf_append(&h->buf, at, n);
}

td_status td__hdrs_value(td__hdrs *h, const char *at, size_t n)
{
    if (h->in_value == 1) {
        td_status st = td__buf_append(&h->buf, "", 1);
        if (st != TD_OK)
            return st;
        h->ix[h->n - 1].value_off = h->buf.len;
        h->in_value = 2;
    }
    return td__buf_append(&h->buf, at, n);
}

td_status td__hdrs_end(td__hdrs *h)
{
    return end_field(h);
}

const char *td__hdrs_get(const td__hdrs *h, const char *name)
{
    for (size_t i = 0; i < h->n; i++)
        if (strcasecmp(h->buf.p + h->ix[i].name_off, name) == 0)
            return h->buf.p + h->ix[i].value_off;
    return NULL;
}

/* ---- the reader's callbacks ---- */

/* Buffers that a large request grew give their memory back past this. */
#define KEEP_BYTES (64 * 1024)

static td_hreq *reader_of(http_parser *p)
{
    return p->data;
}

/* Records why a callback stops the parser; the first reason wins. */
static int reject(td_hreq *r, int status, const char *why)
{
    if (!r->err_status) {
        r->err_status = status;
        r->err_text = why;
    }
    return -1;
}

static int status_for(td_status st, int if_too_big)
{
    return st == TD_EQUOTA ? if_too_big : 503;
}

static int on_message_begin(http_parser *p)
{
    td_hreq *r = reader_of(p);
    td__buf_clear(&r->url, KEEP_BYTES);
    td__hdrs_clear(&r->hdrs);
    td__buf_clear(&r->body, KEEP_BYTES);
    r->header_bytes = 0;
    r->headers_done = 0;
    r->expect_continue = 0;
    td__chunk_gate_reset(&r->gate);
    r->in_request = 1;
    r->begun++;
    return 0;
}

static int count_header_bytes(td_hreq *r, size_t n)
{
    if (n > r->lim.max_header_bytes - r->header_bytes)
        return reject(r, 431, "the request headers are too large");
    r->header_bytes += n;
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
    td_hreq *r = reader_of(p);
    if (n > r->lim.max_header_bytes - r->header_bytes)
        return reject(r, 414, "the request target is too long");
    r->header_bytes += n;
    td_status st = td__buf_append(&r->url, at, n);
    return st == TD_OK ? 0 : reject(r, status_for(st, 414), "the request target is too long");
}

static int hdrs_failed(td_hreq *r, td_status st)
{
    if (st == TD_EQUOTA && r->hdrs.n == r->hdrs.max)
        return reject(r, 431, "too many header fields");
    return reject(r, status_for(st, 431), "the request headers are too large");
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
    td_hreq *r = reader_of(p);
    if (count_header_bytes(r, n))
        return -1;
    if (!td__http_token_chars(at, n))
        return reject(r, 400, "a header field name holds a character outside a token");
    if (r->headers_done)
        return 0; /* a chunked body's trailer: counted, not kept */
    td_status st = td__hdrs_name(&r->hdrs, at, n);
    return st == TD_OK ? 0 : hdrs_failed(r, st);
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
    td_hreq *r = reader_of(p);
    if (count_header_bytes(r, n))
        return -1;
    if (!td__http_value_chars(at, n))
        return reject(r, 400, "a header field value holds a control character");
    if (r->headers_done)
        return 0;
    td_status st = td__hdrs_value(&r->hdrs, at, n);
    return st == TD_OK ? 0 : hdrs_failed(r, st);
}

static int on_headers_complete(http_parser *p)
{
    td_hreq *r = reader_of(p);
    td_status st = td__hdrs_end(&r->hdrs);
    if (st != TD_OK)
        return hdrs_failed(r, st);
    if (p->http_major != 1 || p->http_minor > 1)
        return reject(r, 505, "HTTP/1.0 or HTTP/1.1 only");
    r->headers_done = 1;
    if (td__buf_append(&r->url, "", 0) != TD_OK || !r->url.p)
        return reject(r, 400, "no request target");
    int has_length = (p->flags & F_CONTENTLENGTH) != 0;
    int chunked = (p->flags & F_CHUNKED) != 0;
    /* RFC 9112 6.1: Transfer-Encoding in an HTTP/1.0 message may be
     * framed otherwise by a 1.0 hop in front; nginx and Envoy refuse it */
    if (p->http_minor == 0 && td_hreq_header(r, "transfer-encoding"))
        return reject(r, 400, "Transfer-Encoding in an HTTP/1.0 request");
    if (has_length && p->content_length > r->lim.max_body)
        return reject(r, 413, "the request body is too large");
    r->method = (int)p->method;
    r->http_major = p->http_major;
    r->http_minor = p->http_minor;
    const char *expect = td_hreq_header(r, "expect");
    /* curl sends Expect for larger bodies and waits a second unless 100
     * Continue comes; a body that is already too big got 413 above */
    r->expect_continue = expect && strncasecmp(expect, "100-continue", 12) == 0 &&
                         p->http_minor >= 1 && (chunked || (has_length && p->content_length > 0));
    if (r->cb->on_head) {
        int status = r->cb->on_head(r, r->user);
        if (status >= 400)
            return reject(r, status, "refused");
    }
    if (chunked)
        td__chunk_gate_arm(&r->gate, p); /* the framing is checked before the parser reads it */
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    td_hreq *r = reader_of(p);
    td_status st = td__buf_append(&r->body, at, n);
    return st == TD_OK ? 0 : reject(r, status_for(st, 413), "the request body is too large");
}

static int on_message_complete(http_parser *p)
{
    td_hreq *r = reader_of(p);
    r->in_request = 0;
    r->keep_alive = http_should_keep_alive(p) && !p->upgrade;
    if (r->cb->on_request(r, r->user)) {
        /* the request stays readable until td_hreq_resume */
        r->pause_asked = 1;
        http_parser_pause(p, 1);
    } else {
        td__buf_clear(&r->body, KEEP_BYTES);
    }
    return 0;
}

static const http_parser_settings request_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- the reader ---- */

void td_hreq_init(td_hreq *r, const td_hreq_limits *lim, const td_hreq_callbacks *cb, void *user)
{
    memset(r, 0, sizeof *r);
    http_parser_init(&r->parser, HTTP_REQUEST);
    r->parser.data = r;
    r->lim = *lim;
    r->cb = cb;
    r->user = user;
    td__buf_init(&r->url, lim->max_url < lim->max_header_bytes ? lim->max_url
                                                                : lim->max_header_bytes);
    td__hdrs_init(&r->hdrs, lim->max_header_bytes, lim->max_headers);
    td__buf_init(&r->body, lim->max_body);
}

void td_hreq_fini(td_hreq *r)
{
    td__buf_fini(&r->url);
    td__hdrs_fini(&r->hdrs);
    td__buf_fini(&r->body);
}

static int reading_message(http_parser *p)
{
    return reader_of(p)->in_request;
}

size_t td_hreq_feed(td_hreq *r, const char *data, size_t n)
{
    if (r->state != TD_HREQ_MORE || n == 0)
        return 0;
    int bad;
    size_t used = td__chunk_gate_execute(&r->gate, &r->parser, &request_settings, data, n,
                                         reading_message, &bad);
    enum http_errno e = HTTP_PARSER_ERRNO(&r->parser);
    if (bad) {
        reject(r, 400, "the chunked body's framing is not valid");
        r->state = TD_HREQ_ERROR;
    } else if (e == HPE_PAUSED && r->pause_asked) {
        r->state = TD_HREQ_PAUSED;
    } else if (e != HPE_OK) {
        if (!r->err_status)
            reject(r, e == HPE_HEADER_OVERFLOW ? 431 : 400, http_errno_description(e));
        r->state = TD_HREQ_ERROR;
    } else if (r->parser.upgrade) {
        r->state = TD_HREQ_UPGRADE; /* what follows is a protocol we do not speak */
    }
    return used;
}

td_hreq_state td_hreq_status(const td_hreq *r)
{
    return r->state;
}

void td_hreq_resume(td_hreq *r)
{
    if (r->state != TD_HREQ_PAUSED)
        return;
    r->pause_asked = 0;
    r->state = TD_HREQ_MORE;
    td__buf_clear(&r->body, KEEP_BYTES);
    http_parser_pause(&r->parser, 0);
}

const char *td_hreq_header(const td_hreq *r, const char *name)
{
    return td__hdrs_get(&r->hdrs, name);
}

const char *td_hreq_method(const td_hreq *r)
{
    return http_method_str((enum http_method)r->method);
}
