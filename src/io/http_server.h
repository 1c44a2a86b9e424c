/* http_server.h - the HTTP/1.1 server of tenantd's admin listener
 * (admission webhook, control API) on a caller's libuv loop, plain or TLS,
 * one address served by one loop or several. Bodies are whole buffers: the
 * server hands a handler the complete request and sends its complete
 * response, with Content-Length; nothing is streamed. */
#ifndef TENANTD_IO_HTTP_SERVER_H
#define TENANTD_IO_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tenantd/status.h"

/* Repeated from uv.h and openssl/types.h (C11 allows an identical typedef
 * twice) so that users of this header need neither. */
typedef struct uv_loop_s uv_loop_t;
typedef struct ssl_ctx_st SSL_CTX;

#define TD_HTTP_MAX_HEADER_BYTES (64u * 1024u) /* request line + headers; more -> 431 */
#define TD_HTTP_MAX_HEADERS      128u          /* header fields; more -> 431 */
#define TD_HTTP_IDLE_TIMEOUT_MS  60000u        /* default idle timeout per connection */
#define TD_HTTP_HEADER_TIMEOUT_MS 10000u /* a begun request's headers must be in by then; else 408 */
#define TD_HTTP_REQUEST_TIMEOUT_MS 60000u /* and the whole request (body too); else 408 */

typedef struct {
    const char *name;  /* as the client spelled it */
    const char *value; /* leading and trailing blanks removed */
} td_http_header_field;

/* A complete request, valid only during the handler call. Every string is
 * NUL-terminated; body is NUL-terminated too (body[body_len] == 0) and is
 * "" when there is no body. path and query are raw (not percent-decoded). */
typedef struct {
    const char *method; /* "GET", "POST", ... */
    const char *path;   /* "/v1/admit"; for an absolute-form target, its path */
    const char *query;  /* after '?', without it; "" if none */
    int version_major, version_minor;
    const td_http_header_field *headers;
    size_t n_headers;
    const char *body;
    size_t body_len;
    /* What td_http_multi_opts.prepare made of this request, off the loops
     * (e.g. its body parsed), or NULL; borrowed, released after the
     * handler returns. */
    void *prepared;
} td_http_request;

/* Filled in by a handler. The server starts it zeroed. status 0, or one
 * outside 200..599, is sent as 500. body is malloc'd by the handler and
 * taken over by the server (freed after it is copied out), also when the
 * connection has gone away meanwhile. content_type and extra_headers are
 * borrowed until the handler returns; extra_headers is zero or more full
 * header lines, each ending in "\r\n" (e.g. "Retry-After: 1\r\n"). The
 * server adds Date, Content-Length and, when it will close, Connection. */
typedef struct {
    int status;
    const char *content_type; /* NULL: no Content-Type header */
    char *body;               /* NULL with body_len 0: empty body */
    size_t body_len;
    const char *extra_headers; /* NULL: none */
} td_http_response;

/* Called on the loop thread, once per request, in the order the requests
 * arrived on the connection. It may call td_http_server_stop. */
typedef void (*td_http_handler)(const td_http_request *req, td_http_response *resp, void *user);

typedef struct td_http_server td_http_server;

/* Value of the first header named name (case-insensitive), or NULL. */
const char *td_http_header(const td_http_request *req, const char *name);

/* Starts listening on addr ("127.0.0.1:8081", "[::1]:0", "0.0.0.0:443";
 * port 0 picks a free one, see td_http_server_port) on loop, serving
 * HTTP/1.1 with keep-alive and pipelining. tls NULL serves plain HTTP;
 * otherwise TLS with that context, on which the server takes its own
 * reference (the caller may free its own at once). Request bodies larger
 * than max_body get 413 without calling h; header sections larger than
 * TD_HTTP_MAX_HEADER_BYTES get 431; malformed requests get 400; each of
 * these then closes the connection. If SIGPIPE is at its default
 * disposition, it is set to ignored, as a peer that resets a connection
 * must not kill the daemon.
 * loop, h and user are borrowed until the server has stopped; addr is
 * only read during the call.
 * TD_OK with *out set; TD_EINVAL if addr is not host:port; TD_EIO if the
 * address cannot be bound (the message names it). On failure nothing is
 * left registered on loop. */
td_status td_http_server_start(uv_loop_t *loop, const char *addr, SSL_CTX *tls, size_t max_body,
                               td_http_handler h, void *user, td_http_server **out, td_err *err);

/* The port the server listens on. */
int td_http_server_port(const td_http_server *s);

/* Sets the idle timeout: a connection that has neither sent nor received
 * anything for idle_ms is closed (counted from each connection's next
 * activity). 0 restores TD_HTTP_IDLE_TIMEOUT_MS. Call on the loop thread. */
void td_http_server_set_idle_timeout(td_http_server *s, uint64_t idle_ms);

/* Closes the listener and every connection (responses not yet written are
 * dropped); when all handles are closed, frees s and calls done(arg) on the
 * loop thread (done may be NULL). Call on the loop thread, once. */
void td_http_server_stop(td_http_server *s, void (*done)(void *), void *arg);

/* ---- one address served by several loops ---- */

#define TD_HTTP_MAX_LOOPS 64u

typedef struct {
    unsigned loops; /* loops serving the address, the caller's included (1 = it alone) */
    SSL_CTX *const *tls; /* NULL: plain HTTP; else `loops` contexts, one per loop
                          * (the caller's first); each server takes its own reference */
    size_t max_body;
    td_http_handler handler; /* on the caller's loop, or on any loop when anywhere says so */
    void *user;
    /* true: the request is answered on the loop that read it (the handler
     * must be thread-safe for it); false: it is handed to the caller's loop
     * and its response handed back. NULL: every request on the caller's loop. */
    bool (*anywhere)(const td_http_request *req, void *user);
    void (*thread_exit)(void *user); /* on each extra thread as it ends; may be NULL */
    /* Work a request needs before its handler, done on threads of its own
     * so that no loop waits for it (a body's parse: seconds for a large
     * one). For a request that anywhere() does not accept and that
     * wants_prepare() (NULL: every such request; called on the loop that
     * read it, so cheap) wants prepared, prepare() runs on one of
     * prepare_threads threads, concurrently with the handler of other
     * requests, and what it returns is req->prepared when the handler
     * runs on the caller's loop; release() (may be NULL) frees it after
     * the handler returns, or if the request is dropped. prepare NULL: no
     * threads, as before. */
    bool (*wants_prepare)(const td_http_request *req, void *user);
    void *(*prepare)(const td_http_request *req, void *user);
    void (*release)(void *prepared, void *user);
    unsigned prepare_threads; /* 0: 2 */
    /* The requests handed to the caller's loop in one turn (n > 1, in
     * arrival order; from different connections, so concurrent), answered
     * in one call: resps[i] (zeroed) is reqs[i]'s answer, each handed to
     * its connection only once the call returns (tenantd commits a turn's
     * submits in one transaction). NULL: the handler, once per request. */
    void (*handle_batch)(const td_http_request *const *reqs, td_http_response *resps, size_t n,
                         void *user);
} td_http_multi_opts;

typedef struct td_http_multi td_http_multi;

/* Serves addr from o->loops libuv loops: the caller's loop and o->loops - 1
 * threads with their own loops, each with its own listening socket bound
 * with SO_REUSEPORT (the kernel spreads connections over them) and its own
 * connections and TLS context. A request that anywhere() accepts is
 * answered on the loop that read it; every other one is copied to the
 * caller's loop (a locked queue and uv_async_send), answered there by the
 * handler as if the connection were its own, and its response handed back
 * to the connection's loop to be written; the connection reads nothing
 * more meanwhile, so pipelined requests keep their order. A request that
 * wants preparing (o->prepare) goes through a prepare thread first, from
 * every loop, the caller's included. With one loop no
 * thread is started and the socket is bound as td_http_server_start binds
 * it. Errors as td_http_server_start's (a port in use is TD_EIO: a probe
 * socket without SO_REUSEPORT checks it). On failure nothing is left
 * running. Signals stay with the caller's thread. */
td_status td_http_multi_start(uv_loop_t *loop, const char *addr, const td_http_multi_opts *o,
                              td_http_multi **out, td_err *err);

int td_http_multi_port(const td_http_multi *m);

/* Closes every listener and connection; the threads end (joined here) and,
 * once the caller's loop has closed its handles, m is freed and done(arg)
 * runs there. Requests handed over and not yet answered are dropped. Call
 * on the caller's loop, once. */
void td_http_multi_stop(td_http_multi *m, void (*done)(void *), void *arg);

#endif
