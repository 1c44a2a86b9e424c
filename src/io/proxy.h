/* proxy.h - the gateway's data listener: an HTTP/1.1 reverse proxy on N
 * worker threads, each with its own libuv loop and SO_REUSEPORT listener,
 * deciding every request with the shared td_gateway state (tenant by API
 * key, cost estimate, rate and concurrency limits, criticality queue) and
 * forwarding it over pooled keep-alive upstream connections. */
#ifndef TENANTD_PROXY_H
#define TENANTD_PROXY_H

#include <stdint.h>
#include <stdio.h>

#include "gateway/flood.h"
#include "gateway/gateway.h"
#include "io/ledger.h"
#include "tenantd/status.h"

typedef struct td_proxy td_proxy;
typedef struct ssl_ctx_st SSL_CTX; /* as in http.h */

typedef struct {
    const char *listen;  /* "127.0.0.1:8080"; port 0 picks a free one (all workers share it) */
    unsigned workers;    /* >= 1 */
    FILE *access_log;    /* one line per request; NULL: none */
    size_t max_body;     /* request bodies larger get 413 (default 1 MiB) */
    td_ledger *ledger;   /* borrowed; NULL: no metering. Every request of a known tenant
                            that ends (any outcome but the client going away) is appended */
    const char *replica_id; /* prefix of ledger record ids, unique per daemon start */
    SSL_CTX *tls;        /* serve HTTPS with it (the proxy takes its own reference); NULL: HTTP */
    /* Client connections that have shown no valid API key yet, per client
     * address (IPv4 address, IPv6 /64): 0 is the default (64), -1 no cap.
     * Every connection must show a valid key within 10 s of accept; all
     * client connections together stay a reserve below the open-file
     * limit (td_proxy_conn_limit). */
    int unauth_per_addr;
    /* What a client retrying 429s before their Retry-After costs itself
     * (gateway/flood.h: answers held, then the connection closed); NULL:
     * td_flood_opts_default. Copied. */
    const td_flood_opts *flood;
} td_proxy_opts;

/* Binds, then starts the worker threads. g is borrowed and must outlive
 * the proxy. TD_EIO naming the address if it cannot be bound. */
td_status td_proxy_start(td_gateway *g, const td_proxy_opts *o, td_proxy **out, td_err *err);

/* The bound port. */
int td_proxy_port(const td_proxy *p);

/* The cap on client connections over all workers, set at start from the
 * soft open-file limit less the reserve (a quarter of it, at least 128)
 * kept for upstream connections, the admin listener, stores and logs. */
size_t td_proxy_conn_limit(const td_proxy *p);

/* Stops accepting, closes connections, joins the workers, frees p. */
void td_proxy_stop(td_proxy *p);

#endif
