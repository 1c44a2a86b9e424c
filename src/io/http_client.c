/* http_client.c - a small blocking HTTP/1.1 client for tenantctl and the
 * tests: one request per connection, over plain TCP or TLS (OpenSSL through
 * tls.c's memory-BIO engine, so that every send is MSG_NOSIGNAL and every
 * wait honours one deadline). Responses are read by hresp.c. */
#include "tenantd/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "io/hresp.h"
#include "io/http_internal.h"

#define DEFAULT_TIMEOUT_MS   30000
#define DEFAULT_MAX_RESPONSE ((size_t)64 << 20)

typedef struct {
    int fd;
    td__tls *tls; /* NULL for plain HTTP */
    int64_t deadline_ms;
    int timeout_ms;
    const char *where; /* "host:port", for messages */
} link_t;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until fd is ready for events or the deadline passes. */
static td_status wait_ready(link_t *l, short events, const char *doing, td_err *err)
{
    for (;;) {
        int64_t left = l->deadline_ms - now_ms();
        if (left <= 0)
            return td_err_set(err, TD_EAGAIN, "%s %s: timed out after %d ms", doing, l->where,
                              l->timeout_ms);
        struct pollfd pfd = {.fd = l->fd, .events = events};
        int rc = poll(&pfd, 1, left > 1000000 ? 1000000 : (int)left);
        if (rc > 0)
            return TD_OK;
        if (rc < 0 && errno != EINTR)
            return td_err_set(err, TD_EIO, "%s %s: poll: %s", doing, l->where, strerror(errno));
    }
}

static td_status send_raw(link_t *l, const char *p, size_t n, td_err *err)
{
    while (n > 0) {
        ssize_t w = send(l->fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            td_status st = wait_ready(l, POLLOUT, "cannot send to", err);
            if (st != TD_OK)
                return st;
        } else if (w < 0 && errno != EINTR) {
            return td_err_set(err, TD_EIO, "cannot send to %s: %s", l->where, strerror(errno));
        }
    }
    return TD_OK;
}

/* Reads what has arrived; *got == 0 at end of stream. */
static td_status recv_raw(link_t *l, char *buf, size_t cap, size_t *got, td_err *err)
{
    for (;;) {
        ssize_t r = recv(l->fd, buf, cap, 0);
        if (r >= 0) {
            *got = (size_t)r;
            return TD_OK;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            td_status st = wait_ready(l, POLLIN, "no answer from", err);
            if (st != TD_OK)
                return st;
        } else if (errno != EINTR) {
            return td_err_set(err, TD_EIO, "cannot read from %s: %s", l->where, strerror(errno));
        }
    }
}

static td_status tls_flush(link_t *l, td_err *err)
{
    char buf[16 * 1024];
    size_t n;
    while ((n = td__tls_out(l->tls, buf, sizeof buf)) > 0) {
        td_status st = send_raw(l, buf, n, err);
        if (st != TD_OK)
            return st;
    }
    return TD_OK;
}

/* Feeds the TLS engine from the socket; TD_EIO naming why at end of stream. */
static td_status tls_pull(link_t *l, const char *during, int *eof, td_err *err)
{
    char buf[16 * 1024];
    size_t got = 0;
    td_status st = recv_raw(l, buf, sizeof buf, &got, err);
    if (st != TD_OK)
        return st;
    if (got == 0) {
        if (eof) {
            *eof = 1;
            return TD_OK;
        }
        return td_err_set(err, TD_EIO, "%s: connection closed during %s", l->where, during);
    }
    if (td__tls_feed(l->tls, buf, got) != TD_OK)
        return td_err_set(err, TD_ENOMEM, "out of memory reading from %s", l->where);
    return TD_OK;
}

static td_status link_handshake(link_t *l, td_err *err)
{
    for (;;) {
        td_status st = td__tls_handshake(l->tls, err);
        td_status fst = tls_flush(l, st == TD_OK || st == TD_EAGAIN ? err : NULL);
        if (st == TD_OK)
            return fst;
        if (st != TD_EAGAIN)
            return td_err_prefix(err, st, "%s", l->where);
        if (fst != TD_OK)
            return fst;
        st = tls_pull(l, "the TLS handshake", NULL, err);
        if (st != TD_OK)
            return st;
    }
}

static td_status link_write(link_t *l, const char *p, size_t n, td_err *err)
{
    if (!l->tls)
        return send_raw(l, p, n, err);
    td_status st = td__tls_write(l->tls, p, n, err);
    if (st != TD_OK)
        return td_err_prefix(err, st, "%s", l->where);
    return tls_flush(l, err);
}

/* Reads plaintext; *got == 0 at the end of the stream. */
static td_status link_read(link_t *l, char *buf, size_t cap, size_t *got, td_err *err)
{
    if (!l->tls)
        return recv_raw(l, buf, cap, got, err);
    for (;;) {
        td_status st = td__tls_read(l->tls, buf, cap, got, err);
        if (st == TD_OK)
            return TD_OK;
        if (st != TD_EAGAIN)
            return td_err_prefix(err, st, "%s", l->where);
        int eof = 0;
        st = tls_flush(l, err);
        if (st == TD_OK)
            st = tls_pull(l, "the response", &eof, err);
        if (st != TD_OK)
            return st;
        if (eof) {
            *got = 0; /* no close_notify; the HTTP framing decides */
            return TD_OK;
        }
    }
}

static td_status link_connect(link_t *l, const char *host, int port, td_err *err)
{
    char port_s[16];
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    snprintf(port_s, sizeof port_s, "%d", port);
    int rc = getaddrinfo(host, port_s, &hints, &res);
    if (rc != 0)
        return td_err_set(err, TD_EIO, "cannot resolve %s: %s", host, gai_strerror(rc));

    int last = ECONNREFUSED;
    td_status st = TD_EIO;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            last = errno;
            continue;
        }
        l->fd = fd;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
            if (errno != EINPROGRESS) {
                last = errno;
                close(fd);
                l->fd = -1;
                continue;
            }
            st = wait_ready(l, POLLOUT, "cannot connect to", err);
            if (st != TD_OK) {
                close(fd);
                l->fd = -1;
                freeaddrinfo(res);
                return st;
            }
            int soerr = 0;
            socklen_t len = sizeof soerr;
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
                soerr = errno;
            if (soerr != 0) {
                last = soerr;
                close(fd);
                l->fd = -1;
                continue;
            }
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        freeaddrinfo(res);
        return TD_OK;
    }
    freeaddrinfo(res);
    return td_err_set(err, TD_EIO, "cannot connect to %s: %s", l->where, strerror(last));
}

static td_status tls_setup(link_t *l, const char *host, const td_http_client_opts *o, td_err *err)
{
    char why[256];
    td_status st;
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx)
        return td_err_set(err, TD_ENOMEM, "cannot create TLS context: %s",
                          td__tls_last_error(why, sizeof why));
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (o && o->insecure) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        if (o && o->ca_file) {
            if (SSL_CTX_load_verify_locations(ctx, o->ca_file, NULL) != 1) {
                st = td_err_set(err, TD_EINVAL, "%s: cannot load CA certificates: %s", o->ca_file,
                                td__tls_last_error(why, sizeof why));
                goto fail;
            }
        } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
            ERR_clear_error(); /* no system store: verification will fail and say so */
        }
    }
    if (o && o->cert_file) {
        const char *key = o->key_file ? o->key_file : o->cert_file;
        if (SSL_CTX_use_certificate_chain_file(ctx, o->cert_file) != 1) {
            st = td_err_set(err, TD_EINVAL, "%s: cannot load client certificate: %s", o->cert_file,
                            td__tls_last_error(why, sizeof why));
            goto fail;
        }
        if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
            if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
                ERR_clear_error();
                st = td_err_set(err, TD_EINVAL, "%s: key does not match certificate %s", key,
                                o->cert_file);
            } else {
                st = td_err_set(err, TD_EINVAL, "%s: cannot load client key: %s", key,
                                td__tls_last_error(why, sizeof why));
            }
            goto fail;
        }
        if (SSL_CTX_check_private_key(ctx) != 1) {
            ERR_clear_error();
            st = td_err_set(err, TD_EINVAL, "%s: key does not match certificate %s", key,
                            o->cert_file);
            goto fail;
        }
    }
    st = td__tls_create(ctx, 0, &l->tls, err);
    SSL_CTX_free(ctx); /* the SSL keeps its own reference */
    if (st != TD_OK)
        return st;

    SSL *ssl = td__tls_ssl(l->tls);
    unsigned char ip[16];
    int is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
    int ok = 1;
    if (!is_ip)
        ok = SSL_set_tlsext_host_name(ssl, host) == 1;
    if (ok && !(o && o->insecure)) {
        if (is_ip)
            ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1;
        else
            ok = SSL_set1_host(ssl, host) == 1;
    }
    if (!ok)
        return td_err_set(err, TD_EINVAL, "%s: cannot set the TLS server name: %s", l->where,
                          td__tls_last_error(why, sizeof why));
    return TD_OK;
fail:
    SSL_CTX_free(ctx);
    return st;
}

/* ---- request and response ---- */

/* Reads the response to the request just sent into r (its body collected
 * under r's limit). TD_EIO naming the server when it is not valid HTTP,
 * too large or cut short. */
static td_status read_response(link_t *l, td_hresp *r, td_err *err)
{
    char buf[16 * 1024];
    while (td_hresp_status(r) == TD_HRESP_MORE) {
        size_t got = 0;
        td_status st = link_read(l, buf, sizeof buf, &got, err);
        if (st != TD_OK)
            return st;
        if (got == 0) {
            td_hresp_eof(r);
            if (td_hresp_status(r) == TD_HRESP_MORE)
                return td_err_set(err, TD_EIO,
                                  "%s closed the connection before the response was "
                                  "complete",
                                  l->where);
        } else {
            td_hresp_feed(r, buf, got);
        }
    }
    if (td_hresp_status(r) == TD_HRESP_DONE)
        return TD_OK; /* (bytes after it, with Connection: close, are ignored) */
    if (r->too_big)
        return td_err_set(err, TD_EIO, "response from %s is larger than %zu bytes", l->where,
                          r->body.max);
    return td_err_set(err, TD_EIO, "malformed response from %s: %s", l->where, r->err_text);
}

static int is_token(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!(('A' <= *s && *s <= 'Z') || ('a' <= *s && *s <= 'z') || ('0' <= *s && *s <= '9') ||
              strchr("!#$%&'*+-.^_`|~", *s)))
            return 0;
    return 1;
}

static int has_ctl(const char *s)
{
    for (; s && *s; s++)
        if ((unsigned char)*s < 0x20 && *s != '\t')
            return 1;
    return 0;
}

static td_status build_request(td__buf *req, const char *method, const char *target,
                               const char *hostport, const char *content_type, const char *body,
                               size_t body_len, const td_http_client_opts *o)
{
    int send_length =
        body_len > 0 || !(strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 ||
                          strcmp(method, "DELETE") == 0 || strcmp(method, "OPTIONS") == 0);
    td_status st = td__buf_printf(req,
                                  "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: tenantctl\r\n"
                                  "Accept: */*\r\nConnection: close\r\n",
                                  method, target, hostport);
    if (st == TD_OK && content_type)
        st = td__buf_printf(req, "Content-Type: %s\r\n", content_type);
    if (st == TD_OK && send_length)
        st = td__buf_printf(req, "Content-Length: %zu\r\n", body_len);
    if (st == TD_OK && o && o->bearer_token)
        st = td__buf_printf(req, "Authorization: Bearer %s\r\n", o->bearer_token);
    for (size_t i = 0; st == TD_OK && o && o->extra_headers && o->extra_headers[i]; i++)
        st = td__buf_printf(req, "%s\r\n", o->extra_headers[i]);
    if (st == TD_OK)
        st = td__buf_append(req, "\r\n", 2);
    if (st == TD_OK && body_len)
        st = td__buf_append(req, body, body_len);
    return st;
}

td_status td_http_request_do(const char *url, const char *method, const char *content_type,
                             const char *body, size_t body_len, const td_http_client_opts *opts,
                             int *status, char **resp_body, size_t *resp_len, td_err *err)
{
    struct http_parser_url u;
    char host[256], where[300];
    td__buf target, req;
    td_hresp r;
    link_t l = {.fd = -1};
    td_status st;

    if (!url || !method || !status || (body_len && !body))
        return td_err_set(err, TD_EINVAL, "td_http_request_do: url, method and status needed");
    if (!is_token(method))
        return td_err_set(err, TD_EINVAL, "\"%s\" is not an HTTP method", method);
    if (has_ctl(content_type) || (opts && has_ctl(opts->bearer_token)))
        return td_err_set(err, TD_EINVAL, "control characters in a header for %s", url);
    for (size_t i = 0; opts && opts->extra_headers && opts->extra_headers[i]; i++)
        if (has_ctl(opts->extra_headers[i]) || !strchr(opts->extra_headers[i], ':'))
            return td_err_set(err, TD_EINVAL, "header \"%s\" is not a \"Name: value\" line",
                              opts->extra_headers[i]);

    http_parser_url_init(&u);
    if (http_parser_parse_url(url, strlen(url), 0, &u) != 0 || !(u.field_set & (1 << UF_SCHEMA)) ||
        !(u.field_set & (1 << UF_HOST)))
        return td_err_set(err, TD_EINVAL, "\"%s\" is not an http:// or https:// URL", url);
    const char *scheme = url + u.field_data[UF_SCHEMA].off;
    size_t scheme_len = u.field_data[UF_SCHEMA].len;
    int tls;
    if (scheme_len == 5 && strncasecmp(scheme, "https", 5) == 0)
        tls = 1;
    else if (scheme_len == 4 && strncasecmp(scheme, "http", 4) == 0)
        tls = 0;
    else
        return td_err_set(err, TD_EINVAL, "\"%s\": only http:// and https:// are supported", url);
    if (u.field_data[UF_HOST].len >= sizeof host)
        return td_err_set(err, TD_EINVAL, "\"%s\": host name too long", url);
    memcpy(host, url + u.field_data[UF_HOST].off, u.field_data[UF_HOST].len);
    host[u.field_data[UF_HOST].len] = '\0';
    int port = (u.field_set & (1 << UF_PORT)) ? u.port : (tls ? 443 : 80);
    snprintf(where, sizeof where, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);

    td__buf_init(&target, 64 * 1024);
    td__buf_init(&req, SIZE_MAX);
    static const td_hresp_callbacks collect = {0};
    td_hresp_limits lim = {
        .max_header_bytes = 4 * TD_HTTP_MAX_HEADER_BYTES,
        .max_headers = 8 * TD_HTTP_MAX_HEADERS,
        .max_body = opts && opts->max_response ? opts->max_response : DEFAULT_MAX_RESPONSE};
    td_hresp_init(&r, &lim, &collect, NULL);
    td_hresp_start(&r, strcmp(method, "HEAD") == 0);
    if (u.field_set & (1 << UF_PATH))
        st = td__buf_append(&target, url + u.field_data[UF_PATH].off, u.field_data[UF_PATH].len);
    else
        st = td__buf_append(&target, "/", 1);
    if (st == TD_OK && (u.field_set & (1 << UF_QUERY))) {
        st = td__buf_append(&target, "?", 1);
        if (st == TD_OK)
            st = td__buf_append(&target, url + u.field_data[UF_QUERY].off,
                                u.field_data[UF_QUERY].len);
    }
    if (st == TD_OK)
        st = build_request(&req, method, target.p, where, content_type, body, body_len, opts);
    if (st != TD_OK) {
        st = td_err_set(err, st, "cannot build the request for %s: %s", url, td_strerror(st));
        goto out;
    }

    l.timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : DEFAULT_TIMEOUT_MS;
    l.deadline_ms = now_ms() + l.timeout_ms;
    l.where = where;
    if (tls && (st = tls_setup(&l, host, opts, err)) != TD_OK)
        goto out;
    if ((st = link_connect(&l, host, port, err)) != TD_OK)
        goto out;
    if (tls && (st = link_handshake(&l, err)) != TD_OK)
        goto out;

    td_err send_err = {{0}};
    st = link_write(&l, req.p, req.len, &send_err);
    if (st != TD_OK) {
        /* A server that refuses a body (413) answers and closes before
         * reading it all; its answer is worth more than the send error. */
        if (read_response(&l, &r, NULL) != TD_OK) {
            if (err)
                memcpy(err->msg, send_err.msg, sizeof err->msg);
            goto out;
        }
    } else if ((st = read_response(&l, &r, err)) != TD_OK) {
        goto out;
    }
    st = TD_OK;
    if (resp_body && !r.body.p && td__buf_append(&r.body, "", 0) != TD_OK) {
        st = td_err_set(err, TD_ENOMEM, "out of memory reading from %s", where);
        goto out;
    }
    *status = r.status;
    if (resp_body) {
        size_t n;
        *resp_body = td__buf_take(&r.body, &n);
        if (resp_len)
            *resp_len = n;
    } else if (resp_len) {
        *resp_len = r.body.len;
    }
out:
    if (l.fd >= 0)
        close(l.fd);
    td__tls_destroy(l.tls);
    td__buf_fini(&target);
    td__buf_fini(&req);
    td_hresp_fini(&r);
    return st;
}
