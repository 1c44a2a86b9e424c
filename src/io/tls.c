/* tls.c - TLS for tenantd's listeners and client: server contexts (TLS 1.2+,
 * optional mTLS) and a per-connection engine that runs OpenSSL over two
 * memory BIOs, so that the caller moves the ciphertext itself (uv_write on
 * the server, send/recv with a deadline in the client). */
#include "io/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/http_internal.h"

struct td__tls {
    SSL *ssl;
    BIO *rbio; /* ciphertext from the peer; owned by ssl */
    BIO *wbio; /* ciphertext for the peer; owned by ssl */
    int handshake_done;
};

const char *td__tls_last_error(char *buf, size_t n)
{
    unsigned long e = ERR_peek_last_error();
    if (e == 0) {
        snprintf(buf, n, "unknown TLS error");
    } else {
        const char *reason = ERR_reason_error_string(e);
        if (reason)
            snprintf(buf, n, "%s", reason);
        else
            ERR_error_string_n(e, buf, n);
    }
    ERR_clear_error();
    return buf;
}

td_status td_tls_server_ctx(const char *cert_file, const char *key_file, const char *client_ca_file,
                            SSL_CTX **out, td_err *err)
{
    char why[256];
    td_status st;

    if (!cert_file || !key_file)
        return td_err_set(err, TD_EINVAL, "TLS needs both a certificate and a key file");
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
        return td_err_set(err, TD_ENOMEM, "cannot create TLS context: %s",
                          td__tls_last_error(why, sizeof why));
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* Renegotiation would let a peer make SSL_write want to read, which the
     * memory-BIO engine does not expect; tickets buy nothing for the few
     * long-lived connections an admin listener has. */
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                 SSL_OP_NO_TICKET);
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    if (SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20:DHE+AESGCM") != 1) {
        st = td_err_set(err, TD_EIO, "cannot set TLS 1.2 ciphers: %s",
                        td__tls_last_error(why, sizeof why));
        goto fail;
    }
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
        st = td_err_set(err, TD_EINVAL, "%s: cannot load certificate: %s", cert_file,
                        td__tls_last_error(why, sizeof why));
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1) {
        /* OpenSSL compares the key with the certificate already here */
        if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
            ERR_clear_error();
            st = td_err_set(err, TD_EINVAL, "%s: private key does not match certificate %s",
                            key_file, cert_file);
        } else {
            st = td_err_set(err, TD_EINVAL, "%s: cannot load private key: %s", key_file,
                            td__tls_last_error(why, sizeof why));
        }
        goto fail;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        st = td_err_set(err, TD_EINVAL, "%s: private key does not match certificate %s", key_file,
                        cert_file);
        ERR_clear_error();
        goto fail;
    }
    if (client_ca_file) {
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(client_ca_file);
        if (!names || SSL_CTX_load_verify_locations(ctx, client_ca_file, NULL) != 1) {
            sk_X509_NAME_pop_free(names, X509_NAME_free);
            st = td_err_set(err, TD_EINVAL, "%s: cannot load client CA certificates: %s",
                            client_ca_file, td__tls_last_error(why, sizeof why));
            goto fail;
        }
        SSL_CTX_set_client_CA_list(ctx, names); /* takes names */
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
    *out = ctx;
    return TD_OK;
fail:
    SSL_CTX_free(ctx);
    return st;
}

td_status td__tls_create(SSL_CTX *ctx, int is_server, td__tls **out, td_err *err)
{
    char why[256];
    td__tls *t = calloc(1, sizeof *t);
    if (!t)
        return td_err_set(err, TD_ENOMEM, "out of memory for a TLS connection");
    ERR_clear_error();
    t->ssl = SSL_new(ctx);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (!t->ssl || !t->rbio || !t->wbio) {
        BIO_free(t->rbio);
        BIO_free(t->wbio);
        SSL_free(t->ssl);
        free(t);
        return td_err_set(err, TD_ENOMEM, "cannot create a TLS connection: %s",
                          td__tls_last_error(why, sizeof why));
    }
    /* An empty memory BIO reports "retry" rather than EOF, which is what
     * lets SSL_read say WANT_READ instead of a premature end of stream. */
    BIO_set_mem_eof_return(t->rbio, -1);
    SSL_set_bio(t->ssl, t->rbio, t->wbio); /* ssl owns both now */
    if (is_server)
        SSL_set_accept_state(t->ssl);
    else
        SSL_set_connect_state(t->ssl);
    *out = t;
    return TD_OK;
}

void td__tls_destroy(td__tls *t)
{
    if (!t)
        return;
    SSL_free(t->ssl);
    free(t);
}

SSL *td__tls_ssl(td__tls *t)
{
    return t->ssl;
}

td_status td__tls_feed(td__tls *t, const char *data, size_t n)
{
    while (n > 0) {
        int chunk = n > (1u << 30) ? (1 << 30) : (int)n;
        int w = BIO_write(t->rbio, data, chunk);
        if (w <= 0) {
            ERR_clear_error();
            return TD_ENOMEM;
        }
        data += w;
        n -= (size_t)w;
    }
    return TD_OK;
}

/* Turns a failed SSL_* call into TD_EAGAIN or TD_EIO with a reason. */
static td_status ssl_failure(td__tls *t, int rc, const char *what, td_err *err)
{
    char why[256];
    int e = SSL_get_error(t->ssl, rc);
    switch (e) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE: /* memory BIOs never fill, but be safe */
        ERR_clear_error();
        return TD_EAGAIN;
    case SSL_ERROR_SSL: {
        long vr = SSL_get_verify_result(t->ssl);
        if (vr != X509_V_OK) {
            ERR_clear_error();
            return td_err_set(err, TD_EIO, "%s failed: certificate verify failed: %s", what,
                              X509_verify_cert_error_string(vr));
        }
        return td_err_set(err, TD_EIO, "%s failed: %s", what, td__tls_last_error(why, sizeof why));
    }
    case SSL_ERROR_ZERO_RETURN:
        ERR_clear_error();
        return td_err_set(err, TD_EIO, "%s failed: peer closed the TLS session", what);
    default:
        return td_err_set(err, TD_EIO, "%s failed: %s (SSL error %d)", what,
                          td__tls_last_error(why, sizeof why), e);
    }
}

td_status td__tls_handshake(td__tls *t, td_err *err)
{
    if (t->handshake_done)
        return TD_OK;
    ERR_clear_error();
    int rc = SSL_do_handshake(t->ssl);
    if (rc == 1) {
        t->handshake_done = 1;
        return TD_OK;
    }
    return ssl_failure(t, rc, "TLS handshake", err);
}

int td__tls_handshake_done(const td__tls *t)
{
    return t->handshake_done;
}

td_status td__tls_read(td__tls *t, char *buf, size_t cap, size_t *n, td_err *err)
{
    size_t got = 0;
    /* Nothing received and nothing buffered: SSL_read could only say
     * WANT_READ. A drain loop ends on that call after every request, and
     * it cost more than a record's header (error queue, SSL_get_error). */
    if (t->handshake_done && BIO_ctrl_pending(t->rbio) == 0 && !SSL_has_pending(t->ssl) &&
        !(SSL_get_shutdown(t->ssl) & SSL_RECEIVED_SHUTDOWN))
        return TD_EAGAIN;
    ERR_clear_error();
    int rc = SSL_read_ex(t->ssl, buf, cap, &got);
    if (rc == 1) {
        *n = got;
        return TD_OK;
    }
    if (SSL_get_error(t->ssl, rc) == SSL_ERROR_ZERO_RETURN) {
        ERR_clear_error();
        *n = 0;
        return TD_OK;
    }
    return ssl_failure(t, rc, "TLS read", err);
}

td_status td__tls_write(td__tls *t, const char *data, size_t n, td_err *err)
{
    while (n > 0) {
        size_t done = 0;
        ERR_clear_error();
        int rc = SSL_write_ex(t->ssl, data, n, &done);
        if (rc != 1) {
            td_status st = ssl_failure(t, rc, "TLS write", err);
            return st == TD_EAGAIN ? td_err_set(err, TD_EIO, "TLS write stalled") : st;
        }
        data += done;
        n -= done;
    }
    return TD_OK;
}

void td__tls_shutdown(td__tls *t)
{
    if (t->handshake_done) {
        SSL_shutdown(t->ssl);
        ERR_clear_error();
    }
}

size_t td__tls_out_pending(const td__tls *t)
{
    return BIO_ctrl_pending(t->wbio);
}

size_t td__tls_out(td__tls *t, char *buf, size_t cap)
{
    size_t got = 0;
    if (cap == 0 || BIO_ctrl_pending(t->wbio) == 0)
        return 0;
    if (BIO_read_ex(t->wbio, buf, cap, &got) != 1) {
        ERR_clear_error();
        return 0;
    }
    return got;
}
