/* tls.h - TLS server contexts for tenantd's listeners (OpenSSL 3), TLS 1.2
 * and later only, optionally requiring client certificates (mTLS). The
 * per-connection engine that drives OpenSSL over memory BIOs is internal,
 * in src/io/http_internal.h. */
#ifndef TENANTD_TLS_H
#define TENANTD_TLS_H

#include "tenantd/status.h"

typedef struct ssl_ctx_st SSL_CTX;

/* Builds a server context from cert_file (PEM chain, leaf first) and
 * key_file (PEM private key). client_ca_file NULL accepts clients without
 * certificates; otherwise every client must present a certificate that
 * chains to a CA in that PEM file. TD_OK with *out set (free it with
 * SSL_CTX_free); TD_EINVAL naming the file that cannot be read or does not
 * fit (e.g. a key that does not match the certificate), *out untouched. */
td_status td_tls_server_ctx(const char *cert_file, const char *key_file, const char *client_ca_file,
                            SSL_CTX **out, td_err *err);

#endif
