/* http.h - the small blocking HTTP/1.1 client (plain or TLS) under the
 * client library (client.h), tenantctl and the tests: one request, one
 * response, whole buffers. tenantd's HTTP server is internal to it
 * (src/io/http_server.h). */
#ifndef TENANTD_HTTP_H
#define TENANTD_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "tenantd/status.h"

typedef struct {
    const char *ca_file;      /* PEM CA bundle to verify the server; NULL: system default */
    bool insecure;            /* do not verify the server's certificate or name */
    const char *cert_file;    /* client certificate chain (PEM) for mTLS; NULL: none */
    const char *key_file;     /* its private key (PEM); NULL: in cert_file */
    int timeout_ms;           /* for the whole exchange; <= 0: 30000 */
    const char *bearer_token; /* sent as "Authorization: Bearer ..."; NULL: none */
    size_t max_response;      /* largest response body accepted; 0: 64 MiB */
    const char *const *extra_headers; /* NULL-terminated "Name: value" lines; NULL: none */
} td_http_client_opts;

/* Sends one request to url ("http://host:port/path?query" or https://, IPv6
 * hosts in brackets) and waits for the response, on a new connection that
 * is closed afterwards. Every argument is borrowed for the call only.
 * content_type may be NULL; body (body_len bytes) may be NULL when body_len
 * is 0; opts may be NULL. For https, the server's certificate must chain
 * to ca_file and name the URL's host (DNS name or IP address) unless
 * insecure.
 * TD_OK with *status set and, if resp_body is not NULL, *resp_body a
 * malloc'd NUL-terminated copy of the body (the caller frees it) and
 * *resp_len its length; any HTTP status is TD_OK. TD_EINVAL for a bad URL
 * or argument; TD_EIO if the server cannot be reached, TLS fails or the
 * response is malformed, with a message naming host:port; TD_EAGAIN on
 * timeout. On failure the out-parameters are untouched. */
td_status td_http_request_do(const char *url, const char *method, const char *content_type,
                             const char *body, size_t body_len, const td_http_client_opts *opts,
                             int *status, char **resp_body, size_t *resp_len, td_err *err);

#endif
