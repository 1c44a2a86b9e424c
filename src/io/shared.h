/* shared.h - one global limit per tenant across several tenantd replicas,
 * through Redis, without a Redis round trip per request. Each replica
 * leases cost budget in chunks from a token bucket kept in Redis (an atomic
 * Lua script), spends it locally, and refills asynchronously from a
 * background thread before it runs out. Over-admission is bounded by
 * replicas x chunk per tenant. If Redis is unreachable, each replica falls
 * back to the local limiter at rate/replicas and recovers when Redis
 * returns. */
#ifndef TENANTD_SHARED_H
#define TENANTD_SHARED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/backends.h"
#include "core/limiter.h"
#include "tenantd/status.h"

typedef struct td_shared td_shared;

typedef struct {
    const char *addr;        /* "host:port" of redis-server */
    uint32_t replicas;       /* expected replicas, for the fallback share (>= 1) */
    double chunk_fraction;   /* lease size as a fraction of burst (default 0.05) */
    uint32_t timeout_ms;     /* per Redis call (default 50) */
    const char *key_prefix;  /* default "tenantd:" */
} td_shared_opts;

/* Connects (lazily; an unreachable Redis is not an error here) and starts
 * the refill thread. Slots 0..nslots-1. */
/* "HOST:PORT", "[V6]:PORT" or "HOST" (port 6379): *host malloc'd (the
 * caller frees it), *port; TD_EINVAL naming the address otherwise. */
td_status td_redis_addr_parse(const char *addr, char **host, int *port, td_err *err);

td_status td_shared_create(const td_shared_opts *o, size_t nslots, td_shared **out, td_err *err);
void td_shared_destroy(td_shared *s); /* stops and joins the thread */

/* Takes cost from slot's local lease (tenant's name keys it in Redis).
 * Non-blocking: never waits for Redis. TD_OK or TD_EAGAIN with
 * *retry_after_ns. When degraded, decides with the local limiter at
 * rate/replicas instead. */
td_status td_shared_take(td_shared *s, size_t slot, const char *tenant, const td_rate *r,
                         double cost, uint64_t now_ns, uint64_t *retry_after_ns);

/* Reconciliation: delta > 0 spends more from the lease (may go negative),
 * delta < 0 returns budget to the lease. */
void td_shared_adjust(td_shared *s, size_t slot, double delta);

/* true while Redis is unreachable and the local fallback decides. */
bool td_shared_degraded(const td_shared *s);
/* s (taken over by whoever destroys out->ctx) as the gateway's rate
 * backend: take, adjust, degraded and destroy of this file. */
void td_shared_backend(td_shared *s, td_gw_rate_backend *out);

#endif
