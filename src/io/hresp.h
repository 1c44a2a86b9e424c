/* hresp.h - tenantd's one HTTP/1.1 response reader (gateway upstreams,
 * http_client, loadtest): http_parser wrapped once, with the status, header
 * limits, 1xx skipped, Content-Length, chunked and close-delimited bodies
 * streamed to a callback or collected under a limit. Bytes in; no sockets. */
#ifndef TENANTD_HRESP_H
#define TENANTD_HRESP_H

#include <http_parser.h>
#include <stddef.h>
#include <stdint.h>

#include "io/hreq.h"

typedef struct td_hresp td_hresp;

typedef struct {
    size_t max_header_bytes; /* field names and values together; more is an error */
    size_t max_headers;      /* header fields; more is an error */
    size_t max_body;         /* collected bodies (no on_body); more is an error */
} td_hresp_limits;

typedef struct {
    /* Optional. A final (not 1xx) response's head is read: r->status and
     * the headers (values trimmed). 0 reads its body; 1 pauses the reader
     * (TD_HRESP_PAUSED); -1 fails it. */
    int (*on_head)(td_hresp *r, void *user);
    /* Optional: without it the body is collected in r->body. n bytes of
     * the body, chunk framing removed. 0 reads on; 1 pauses; -1 fails. */
    int (*on_body)(td_hresp *r, const char *at, size_t n, void *user);
} td_hresp_callbacks;

typedef enum {
    TD_HRESP_MORE,   /* every byte fed is consumed; more is due */
    TD_HRESP_DONE,   /* a response is complete; bytes after it are not consumed */
    TD_HRESP_PAUSED, /* a callback asked to pause: td_hresp_resume goes on */
    TD_HRESP_ERROR,  /* not a valid response, over a limit, or a callback failed it */
} td_hresp_state;

/* Private but for reading: callers embed it and read the response's fields
 * from their callbacks or once it is done. */
struct td_hresp {
    http_parser parser;
    td_hresp_limits lim;
    const td_hresp_callbacks *cb;
    void *user;

    int status;           /* the final status code, once the head is read */
    int keep_alive;       /* once done: the connection may carry another exchange */
    int chunked;          /* the body is chunked */
    int has_length;       /* the body has a Content-Length, content_length */
    uint64_t content_length;
    td__hdrs hdrs;        /* the header fields */
    td__buf body;         /* the collected body, without on_body */
    const char *err_text; /* why TD_HRESP_ERROR, for a message: static */
    int too_big;          /* the error is the body's limit */

    int head_request; /* the request was HEAD: no body follows */
    int interim;      /* a 1xx answer is being read */
    int got_bytes;    /* a byte of the response has come */
    size_t header_bytes;
    int headers_done; /* header callbacks now are trailers: counted, not kept */
    int pause_asked;
    td_hresp_state state;
};

/* Prepares r for a connection. Borrows cb and user; copies lim. */
void td_hresp_init(td_hresp *r, const td_hresp_limits *lim, const td_hresp_callbacks *cb,
                   void *user);
void td_hresp_fini(td_hresp *r);

/* Expects the response to a new request (HEAD if head_request) on the
 * connection: forgets the last one. */
void td_hresp_start(td_hresp *r, int head_request);

/* Reads n bytes the server sent. Returns the bytes consumed; the state
 * says why fewer than n (TD_HRESP_DONE, PAUSED or ERROR). */
size_t td_hresp_feed(td_hresp *r, const char *data, size_t n);

/* The server closed the connection: a body delimited by the close is
 * complete (TD_HRESP_DONE); a response cut short is TD_HRESP_ERROR; with no
 * byte of a response yet the state stays TD_HRESP_MORE. */
void td_hresp_eof(td_hresp *r);

td_hresp_state td_hresp_status(const td_hresp *r);

/* After TD_HRESP_PAUSED: the reader takes input again. */
void td_hresp_resume(td_hresp *r);

/* The value of the response's first header field called name (any case),
 * or NULL. Valid from on_head until td_hresp_start. */
const char *td_hresp_header(const td_hresp *r, const char *name);

#endif
