/* hreq.h - tenantd's one HTTP/1.1 request reader (admin listener, simmodel):
 * http_parser wrapped once, with header limits, strict field characters, a
 * strict chunked-framing check, body limits and keep-alive rules; bytes in,
 * one callback per request. Also the pieces the gateway's parser shares. */
#ifndef TENANTD_HREQ_H
#define TENANTD_HREQ_H

#include <http_parser.h>
#include <stddef.h>
#include <stdint.h>

#include "io/http_buf.h"
#include "tenantd/status.h"

/* ---- pieces the gateway's own request parser shares ---- */

/* 1 if s[0..n) holds only token characters (RFC 9110 5.1: a field name).
 * http-parser, built lenient, lets a space into a name ("Transfer-Encoding
 * : chunked"), which an upstream may read otherwise: a smuggling vector. */
int td__http_token_chars(const char *s, size_t n);

/* 1 if s[0..n) holds no control byte but HTAB (no NUL, CR, LF: a lenient
 * parser passes obs-fold and bare LF through inside a value). */
int td__http_value_chars(const char *s, size_t n);

typedef struct {
    size_t name_off, value_off; /* into a "name\0value\0..." buffer */
} td__hdr_ix;

/* A message's header fields as http_parser hands them over in pieces. */
typedef struct {
    td__buf buf; /* "name\0value\0" for every field */
    td__hdr_ix *ix;
    size_t n, cap;
    size_t max;   /* fields */
    int in_value; /* 0 before any field, 1 inside a name, 2 inside a value */
} td__hdrs;

/* Empty fields: at most max_fields, their names and values in max_bytes. */
void td__hdrs_init(td__hdrs *h, size_t max_bytes, size_t max_fields);
void td__hdrs_fini(td__hdrs *h);
/* Forgets the fields (for the next message); keeps up to 64 KiB of memory. */
void td__hdrs_clear(td__hdrs *h);
/* Appends a piece of a field's name or of its value. TD_OK; TD_EQUOTA over
 * a limit; TD_ENOMEM. */
td_status td__hdrs_name(td__hdrs *h, const char *at, size_t n);
td_status td__hdrs_value(td__hdrs *h, const char *at, size_t n);
/* Closes the last field. Values come without their trailing whitespace. */
td_status td__hdrs_end(td__hdrs *h);
/* The value of the first field called name (any case), or NULL. */
const char *td__hdrs_get(const td__hdrs *h, const char *name);

/* A strict check of a chunked body's framing (RFC 9112 7.1, http_chunked.c),
 * fed the body's raw bytes before http-parser is: chunk-size lines, the
 * chunk-ext grammar, the CRLF after each chunk's data and the trailer
 * lines must all be exact, a bare LF anywhere is refused. A chunk-size
 * line (with its extensions) longer than TD_HTTP_CHUNK_LINE_MAX is refused
 * too: http-parser bounds neither. */
#define TD_HTTP_CHUNK_LINE_MAX 4096
typedef struct {
    int state;
    uint64_t left; /* the chunk's size while on its line, then its bytes still due */
    size_t line;   /* bytes of the chunk-size line so far */
} td__chunked;

void td__chunked_init(td__chunked *ck);
/* Checks n more bytes of the body. 0: all n are valid framing and more is
 * due; 1: the message ends after the first *used bytes (the rest belong to
 * the next one); -1: invalid (400). Once 1 or -1, it stays so. */
int td__chunked_scan(td__chunked *ck, const char *data, size_t n, size_t *used);

/* The chunk check in front of http_parser_execute. A parser's
 * on_headers_complete arms it (td__chunk_gate_arm) for a chunked body and
 * pauses; td__chunk_gate_execute then feeds the parser only bytes the
 * check has passed. */
typedef struct {
    td__chunked ck;
    unsigned begin : 1; /* armed at the headers; the parser is paused */
    unsigned on : 1;    /* the body is being read */
    unsigned final : 1; /* the check has found the message's end */
    size_t scanned;     /* bytes past the parser's position already checked */
} td__chunk_gate;

/* From on_headers_complete of a message with a chunked body: pauses p. */
void td__chunk_gate_arm(td__chunk_gate *g, http_parser *p);
/* Forgets any message in progress (at a message's beginning). */
void td__chunk_gate_reset(td__chunk_gate *g);
/* http_parser_execute(p, s, data, n) with the check in front: a pause the
 * gate asked for is taken and undone here, any other pause or error is
 * left for the caller, which sees it in HTTP_PARSER_ERRNO(p). Returns the
 * bytes the parser consumed; *bad is set when the framing is invalid (the
 * caller answers 400 and stops). in_message(p) tells whether the message
 * whose headers just ended is still being read (an upgrade ends it). */
size_t td__chunk_gate_execute(td__chunk_gate *g, http_parser *p, const http_parser_settings *s,
                              const char *data, size_t n, int (*in_message)(http_parser *p),
                              int *bad);

/* ---- the request reader ---- */

typedef struct td_hreq td_hreq;

typedef struct {
    size_t max_url;          /* the request target; more -> 414 */
    size_t max_header_bytes; /* target, field names and values together; more -> 431 */
    size_t max_headers;      /* header fields; more -> 431 */
    size_t max_body;         /* the body; more -> 413 */
} td_hreq_limits;

typedef struct {
    /* Optional. The request's head is read: method, target, headers (values
     * trimmed), expect_continue. 0 reads its body; an HTTP status >= 400
     * refuses the request (the reader stops in TD_HREQ_ERROR with it). */
    int (*on_head)(td_hreq *r, void *user);
    /* The request is complete, its body in r->body. 0 reads on; 1 pauses
     * the reader after it (TD_HREQ_PAUSED) until td_hreq_resume, with the
     * request's fields kept readable until then. */
    int (*on_request)(td_hreq *r, void *user);
} td_hreq_callbacks;

typedef enum {
    TD_HREQ_MORE,    /* every byte fed is consumed; more is welcome */
    TD_HREQ_PAUSED,  /* on_request asked to pause: bytes after it are not consumed */
    TD_HREQ_ERROR,   /* the input is not acceptable: answer r->err_status and close */
    TD_HREQ_UPGRADE, /* the client switched to another protocol: close */
} td_hreq_state;

/* Private but for reading: callers embed it and read the request's fields
 * from their callbacks. */
struct td_hreq {
    http_parser parser;
    td_hreq_limits lim;
    const td_hreq_callbacks *cb;
    void *user;

    /* the request being read, valid in the callbacks */
    td__buf url;   /* the target as sent, NUL-terminated */
    td__hdrs hdrs; /* the header fields */
    td__buf body;
    int method;                  /* enum http_method */
    int http_major, http_minor;  /* 1.0 or 1.1 */
    int keep_alive;              /* the connection may carry another request */
    int expect_continue;         /* "Expect: 100-continue" with a body due */

    unsigned long begun; /* requests begun on this connection */
    int in_request;      /* a request has begun and is not complete yet */
    int err_status;      /* 400, 413, 414, 431, 503, 505 once TD_HREQ_ERROR */
    const char *err_text; /* why, for a message: static */

    size_t header_bytes;
    int headers_done; /* header callbacks now are trailers: counted, not kept */
    int pause_asked;
    td_hreq_state state;
    td__chunk_gate gate;
};

/* Prepares r for a new connection. Borrows cb and user; copies lim. */
void td_hreq_init(td_hreq *r, const td_hreq_limits *lim, const td_hreq_callbacks *cb, void *user);
void td_hreq_fini(td_hreq *r);

/* Reads n bytes a client sent, calling back for each request. Returns the
 * bytes consumed; the state says why fewer than n: TD_HREQ_PAUSED (feed
 * the rest after td_hreq_resume), TD_HREQ_ERROR or TD_HREQ_UPGRADE (feed
 * nothing more). Bad input is a state, never a failure of this call. */
size_t td_hreq_feed(td_hreq *r, const char *data, size_t n);

/* TD_HREQ_MORE, TD_HREQ_PAUSED, TD_HREQ_ERROR or TD_HREQ_UPGRADE. */
td_hreq_state td_hreq_status(const td_hreq *r);

/* After TD_HREQ_PAUSED: the reader takes input again. */
void td_hreq_resume(td_hreq *r);

/* The value of the request's first header field called name (any case),
 * or NULL. Valid from on_head until the next request begins. */
const char *td_hreq_header(const td_hreq *r, const char *name);

/* The method's name ("GET"). */
const char *td_hreq_method(const td_hreq *r);

#endif
