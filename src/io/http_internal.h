/* http_internal.h - the socket-free parts of tenantd's HTTP stack, shared by
 * http_server.c, http_client.c, tls.c, the unit tests and the fuzzer: a
 * bounded byte buffer, one connection's HTTP/1.1 request processing (bytes
 * in, response bytes out), and a TLS engine over OpenSSL memory BIOs. */
#ifndef TENANTD_HTTP_INTERNAL_H
#define TENANTD_HTTP_INTERNAL_H

#include <http_parser.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "io/http_server.h"
#include "tenantd/status.h"

/* The byte buffer (http_buf.h), the request reader and the pieces it
 * shares with the gateway (hreq.h). */
#include "io/http_buf.h"
#include "io/hreq.h"

/* ---- one connection's HTTP/1.1 request processing ---- */

/* Private to http_server.c; here so that callers can embed it. */
typedef struct {
    td_hreq rq; /* the request reader */
    size_t max_body;
    td_http_handler handler;
    void *user;

    int stop;        /* process no more requests (closing or closed) */
    int close_after; /* close the connection once out has been written */

    td__buf out; /* response bytes not yet handed to the transport */
    time_t date_sec;
    char date[40];

    /* A request whose answer comes later (td__http_conn_defer): parsing is
     * paused after it, the input already read waits in pending_in, and the
     * response is written by td__http_conn_resume with these. */
    int defer_asked; /* the handler asked, during this dispatch */
    int deferred;    /* waiting for td__http_conn_resume */
    int later_keep, later_http10, later_head;
    td__buf pending_in;
} td__http_conn;

/* Prepares c for a new connection. Borrows handler and user. */
void td__http_conn_init(td__http_conn *c, size_t max_body, td_http_handler h, void *user);
void td__http_conn_fini(td__http_conn *c);

/* Processes n bytes a client sent, calling the handler for each complete
 * request and appending the responses to c->out. After it returns, the
 * caller writes out c->out; if c->close_after, it then closes the
 * connection, and it feeds no more bytes once c->stop is set. Errors in the
 * input become 4xx responses, never failures of this call. */
void td__http_conn_feed(td__http_conn *c, const char *data, size_t n);

/* Called by a handler during its call: its request is answered later,
 * by td__http_conn_resume; no request after it is processed until then. */
void td__http_conn_defer(td__http_conn *c);

/* Appends the deferred request's response to c->out (body taken over, as
 * from a handler), then processes the input that waited behind it (which
 * may defer again). */
void td__http_conn_resume(td__http_conn *c, td_http_response *resp);

/* Runs one connection's worth of input through a fresh td__http_conn, as
 * the pieces arrived (n_pieces buffers), and returns everything the server
 * would write in *out (malloc'd, caller frees, NUL-terminated) and whether
 * it would then close. For tests and the fuzzer. */
td_status td__http_serve_pieces(const char *const *pieces, const size_t *lens, size_t n_pieces,
                                size_t max_body, td_http_handler h, void *user, char **out,
                                size_t *out_len, int *closes);

/* ---- answering later, and several loops (http_multi.c) ---- */

typedef struct td__http_later td__http_later; /* a deferred request's connection */

/* From inside s's handler: the request being handled is answered later by
 * td__http_later_resume on s's loop. The connection (kept allocated while
 * a deferral is out, even if it closes meanwhile) reads nothing more
 * until then. */
td__http_later *td__http_server_defer(td_http_server *s);

/* On s's loop: answers the deferred request with resp (its body taken
 * over), or if resp is NULL only gives the connection back (the server
 * is stopping). A connection that closed meanwhile is freed. */
void td__http_later_resume(td__http_later *l, td_http_response *resp);

/* td_http_server_start with SO_REUSEPORT set on the socket when reuseport
 * (several loops' listeners on one address) and, when port > 0, that port
 * in place of addr's. */
td_status td__http_server_start_ex(uv_loop_t *loop, const char *addr, int port, int reuseport,
                                   SSL_CTX *tls, size_t max_body, td_http_handler h, void *user,
                                   td_http_server **out, td_err *err);

/* ---- TLS over memory BIOs ---- */

/* Parses a listen address ("127.0.0.1:8081", "[::1]:0", "*:80",
 * "localhost:8080") into *ss (and its length into *alen unless NULL).
 * TD_EINVAL naming what is wrong with it. Shared by the admin listener and
 * the gateway's workers. */
td_status td__listen_addr_parse(const char *addr, struct sockaddr_storage *ss, socklen_t *alen,
                                td_err *err);

typedef struct td__tls td__tls;

/* A TLS endpoint for one connection, server side if is_server. Takes a
 * reference on ctx. Ciphertext from the network goes in with
 * td__tls_feed; ciphertext for the network comes out of td__tls_out. */
td_status td__tls_create(SSL_CTX *ctx, int is_server, td__tls **out, td_err *err);
void td__tls_destroy(td__tls *t);
struct ssl_st *td__tls_ssl(td__tls *t);
/* Hands n bytes received from the peer to OpenSSL. TD_OK or TD_ENOMEM. */
td_status td__tls_feed(td__tls *t, const char *data, size_t n);
/* Advances the handshake. TD_OK once complete; TD_EAGAIN if it needs more
 * input (first write out what td__tls_out has); TD_EIO if it failed, with
 * the reason in err (and an alert may be waiting in td__tls_out). */
td_status td__tls_handshake(td__tls *t, td_err *err);
int td__tls_handshake_done(const td__tls *t);
/* Decrypts into buf. TD_OK with *n > 0 bytes, or *n == 0 when the peer
 * sent close_notify; TD_EAGAIN when it needs more input; TD_EIO on error. */
td_status td__tls_read(td__tls *t, char *buf, size_t cap, size_t *n, td_err *err);
/* Encrypts all n bytes into the output. TD_OK; TD_EIO on error. */
td_status td__tls_write(td__tls *t, const char *data, size_t n, td_err *err);
/* Queues close_notify. */
void td__tls_shutdown(td__tls *t);
/* Bytes waiting to be sent to the peer. */
size_t td__tls_out_pending(const td__tls *t);
/* Moves up to cap waiting bytes into buf; returns how many. */
size_t td__tls_out(td__tls *t, char *buf, size_t cap);
/* Describes the last OpenSSL error on this thread (and clears the queue). */
const char *td__tls_last_error(char *buf, size_t n);

#endif
