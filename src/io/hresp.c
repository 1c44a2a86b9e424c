/* hresp.c - the HTTP/1.1 response reader (hresp.h): http_parser's
 * callbacks collect the head under the limits, skip 1xx answers, and hand
 * the body on (or collect it); the reader pauses at each response's end. */
#include "io/hresp.h"

#include <stdlib.h>
#include <string.h>

static td_hresp *reader_of(http_parser *p)
{
    return p->data;
}

/* Records why a callback stops the parser; the first reason wins. */
static int fail(td_hresp *r, const char *why, int too_big)
{
    if (!r->err_text) {
        r->err_text = why;
        r->too_big = too_big;
    }
    return -1;
}

static int on_message_begin(http_parser *p)
{
    td_hresp *r = reader_of(p);
    td__hdrs_clear(&r->hdrs);
    r->header_bytes = 0;
    r->headers_done = 0;
    r->interim = 0;
    return 0;
}

static int count_header_bytes(td_hresp *r, size_t n)
{
    if (n > r->lim.max_header_bytes - r->header_bytes)
        return fail(r, "the response headers are too large", 0);
    r->header_bytes += n;
    return 0;
}

static int hdrs_failed(td_hresp *r, td_status st)
{
    if (st == TD_ENOMEM)
        return fail(r, "out of memory", 0);
    return fail(r, "the response headers are too large", 0);
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
    td_hresp *r = reader_of(p);
    if (count_header_bytes(r, n))
        return -1;
    if (r->headers_done)
        return 0; /* a chunked body's trailer: counted, not kept */
    td_status st = td__hdrs_name(&r->hdrs, at, n);
    return st == TD_OK ? 0 : hdrs_failed(r, st);
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
    td_hresp *r = reader_of(p);
    if (count_header_bytes(r, n))
        return -1;
    if (r->headers_done)
        return 0;
    td_status st = td__hdrs_value(&r->hdrs, at, n);
    return st == TD_OK ? 0 : hdrs_failed(r, st);
}

/* Returns 1 to tell http_parser that no body follows (a HEAD request's
 * answer), as its on_headers_complete contract has it. */
static int on_headers_complete(http_parser *p)
{
    td_hresp *r = reader_of(p);
    td_status st = td__hdrs_end(&r->hdrs);
    if (st != TD_OK)
        return hdrs_failed(r, st);
    r->headers_done = 1;
    /* http_parser, built lenient, takes "HTTP/1.1 2 OK" */
    if (p->status_code < 100 || p->status_code > 999)
        return fail(r, "the status code is not three digits", 0);
    if (p->status_code >= 100 && p->status_code < 200 && p->status_code != 101) {
        r->interim = 1; /* 100 Continue and friends precede the answer */
        return 0;
    }
    r->status = p->status_code;
    r->chunked = (p->flags & F_CHUNKED) != 0;
    r->has_length = (p->flags & F_CONTENTLENGTH) != 0;
    r->content_length = r->has_length ? p->content_length : 0;
    if (r->cb->on_head) {
        int rc = r->cb->on_head(r, r->user);
        if (rc < 0)
            return fail(r, "refused by the reader's caller", 0);
        if (rc > 0) {
            r->pause_asked = 1;
            http_parser_pause(p, 1);
        }
    }
    return r->head_request ? 1 : 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    td_hresp *r = reader_of(p);
    if (r->interim)
        return 0;
    if (!r->cb->on_body) {
        td_status st = td__buf_append(&r->body, at, n);
        if (st != TD_OK)
            return fail(r, st == TD_EQUOTA ? "the response body is too large" : "out of memory",
                        st == TD_EQUOTA);
        return 0;
    }
    int rc = r->cb->on_body(r, at, n, r->user);
    if (rc < 0)
        return fail(r, "refused by the reader's caller", 0);
    if (rc > 0) {
        r->pause_asked = 1;
        http_parser_pause(p, 1);
    }
    return 0;
}

static int on_message_complete(http_parser *p)
{
    td_hresp *r = reader_of(p);
    if (r->interim) {
        r->interim = 0;
        return 0;
    }
    r->keep_alive = http_should_keep_alive(p) != 0;
    r->state = TD_HRESP_DONE;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings response_settings = {
    .on_message_begin = on_message_begin,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

void td_hresp_init(td_hresp *r, const td_hresp_limits *lim, const td_hresp_callbacks *cb,
                   void *user)
{
    memset(r, 0, sizeof *r);
    r->lim = *lim;
    r->cb = cb;
    r->user = user;
    td__hdrs_init(&r->hdrs, lim->max_header_bytes, lim->max_headers);
    td__buf_init(&r->body, lim->max_body);
    td_hresp_start(r, 0);
}

void td_hresp_fini(td_hresp *r)
{
    td__hdrs_fini(&r->hdrs);
    td__buf_fini(&r->body);
}

void td_hresp_start(td_hresp *r, int head_request)
{
    http_parser_init(&r->parser, HTTP_RESPONSE);
    r->parser.data = r;
    td__hdrs_clear(&r->hdrs);
    td__buf_clear(&r->body, 64 * 1024);
    r->status = 0;
    r->keep_alive = r->chunked = r->has_length = 0;
    r->content_length = 0;
    r->err_text = NULL;
    r->too_big = 0;
    r->head_request = head_request;
    r->interim = 0;
    r->got_bytes = 0;
    r->header_bytes = 0;
    r->pause_asked = 0;
    r->state = TD_HRESP_MORE;
}

/* The state after http_parser_execute stopped, whatever stopped it. */
static void settle(td_hresp *r)
{
    if (r->state == TD_HRESP_DONE)
        return;
    enum http_errno e = HTTP_PARSER_ERRNO(&r->parser);
    if (e == HPE_PAUSED && r->pause_asked) {
        r->state = TD_HRESP_PAUSED;
    } else if (e != HPE_OK) {
        fail(r, http_errno_description(e), 0);
        r->state = TD_HRESP_ERROR;
    }
}

size_t td_hresp_feed(td_hresp *r, const char *data, size_t n)
{
    if (r->state != TD_HRESP_MORE || n == 0)
        return 0;
    r->got_bytes = 1;
    size_t k = http_parser_execute(&r->parser, &response_settings, data, n);
    settle(r);
    if (r->state == TD_HRESP_MORE && k < n) {
        fail(r, "bytes after the response's end", 0);
        r->state = TD_HRESP_ERROR;
    }
    return k;
}

void td_hresp_eof(td_hresp *r)
{
    if (r->state != TD_HRESP_MORE || !r->got_bytes)
        return;
    http_parser_execute(&r->parser, &response_settings, NULL, 0);
    settle(r);
    if (r->state == TD_HRESP_MORE) {
        fail(r, "the connection closed before the response was complete", 0);
        r->state = TD_HRESP_ERROR;
    }
}

td_hresp_state td_hresp_status(const td_hresp *r)
{
    return r->state;
}

void td_hresp_resume(td_hresp *r)
{
    if (r->state != TD_HRESP_PAUSED)
        return;
    r->pause_asked = 0;
    r->state = TD_HRESP_MORE;
    http_parser_pause(&r->parser, 0);
}

const char *td_hresp_header(const td_hresp *r, const char *name)
{
    return td__hdrs_get(&r->hdrs, name);
}
