/* shared_budget.h - money budgets shared by gateway replicas through Redis.
 * Each budget (tenant or "tenant/key", period kind, period start) is one
 * Redis hash holding every replica's claim (spend + unused lease, micro-
 * units) and their total. A replica leases a chunk (td_budget_chunk) with
 * one Lua script that grants only while the total stays within the limit,
 * spends it locally, and goes to Redis again only when its lease misses;
 * so the replicas together never spend past the budget (an unused lease of
 * another replica can refuse a request early, never let one through late).
 * Redis down or slow (timeout_ms): each replica keeps its own period spend
 * to limit/replicas, logs once per transition, and pushes what it spent
 * meanwhile on its next call. Own spend lives in a td_budgets the caller
 * owns (the ledger replay fills it at start). */
#ifndef TENANTD_SHARED_BUDGET_H
#define TENANTD_SHARED_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/backends.h"
#include "gateway/budget.h"
#include "tenantd/status.h"

typedef struct td_shbudget td_shbudget;

typedef struct {
    const char *addr;       /* "host:port" of redis-server */
    uint32_t replicas;      /* for the fallback share (>= 1) */
    uint32_t timeout_ms;    /* per Redis call (default 50) */
    const char *key_prefix; /* default "tenantd:budget:" */
    const char *replica;    /* this replica's stable name (its field in each hash) */
    const char *label;      /* "tenant" or "key", for log lines */
} td_shbudget_opts;

/* Slots 0..nslots-1; own (borrowed, outlives s) keeps this replica's own
 * spend per slot. Connects lazily: an unreachable Redis is not an error.
 * TD_EINVAL for a bad address or missing replica name, TD_ENOMEM. */
td_status td_shbudget_create(const td_shbudget_opts *o, td_budgets *own, size_t nslots,
                             td_shbudget **out, td_err *err);
/* Gives every unused lease of the current periods back to Redis (after
 * pushing this replica's claim), then frees. NULL is a no-op. */
void td_shbudget_destroy(td_shbudget *s);

/* Reserves cost_nano (>= 0) at slot's budget of period p (name: the Redis
 * key's tenant or "tenant/key", borrowed) with limit_nano, at now_s.
 * From the local lease when it covers the cost, else after one Redis call
 * (at most timeout_ms); force (a shadow budget) always reserves. TD_OK:
 * *period_start_s and *leased are for td_shbudget_settle. TD_EQUOTA:
 * nothing reserved. *spent_nano (may be NULL): the spend before, across
 * replicas (or this replica's own while Redis is away). TD_EINVAL for a
 * bad slot or negative cost, TD_ENOMEM. Any thread. */
td_status td_shbudget_reserve(td_shbudget *s, size_t slot, const char *name, td_period p,
                              int64_t limit_nano, int64_t cost_nano, bool force, int64_t now_s,
                              int64_t *period_start_s, int64_t *spent_nano, bool *leased);

/* Adds delta_nano to the reservation's period (as td_budgets_settle) and,
 * when it came from the lease, takes it from the lease (negative: back to
 * it); a lease grown past twice its chunk gives the rest back to Redis. */
void td_shbudget_settle(td_shbudget *s, size_t slot, td_period p, int64_t period_start_s,
                        int64_t delta_nano, bool leased);

/* Spend of slot's period p current at now_s across replicas, as last seen
 * from Redis (refresh: asks Redis now, at most timeout_ms), minus nothing
 * of other replicas' unused leases; this replica's own spend when Redis is
 * away or was never asked. */
int64_t td_shbudget_spent(td_shbudget *s, size_t slot, const char *name, td_period p,
                          int64_t now_s, bool refresh);

bool td_shbudget_degraded(const td_shbudget *s); /* Redis away: deciding at limit/replicas */
uint64_t td_shbudget_fallbacks(const td_shbudget *s); /* reservations decided locally */
uint64_t td_shbudget_calls(const td_shbudget *s);     /* Redis calls that answered */
/* s (taken over by whoever destroys out->ctx) as the gateway's budget
 * backend: the td_shbudget_* functions above. */
void td_shbudget_backend(td_shbudget *s, td_gw_budget_backend *out);

/* The four Redis backends a gateway shares its limits and budgets with
 * (gateway/backends.h), at addr ("host:port") for replicas replicas, this
 * one named replica (its field in the budgets' hashes): rates of ntenants
 * tenant slots and nkeys key slots (keys in Redis as "tenant/key"),
 * budgets over this replica's own spend tenant_own and key_own (borrowed:
 * the gateway's, td_gateway_budgets and td_gateway_key_budgets, which
 * outlive the backends). TD_OK and *out for td_gateway_set_backends; else
 * nothing is left made, TD_EINVAL (address, replica name) or TD_ENOMEM. */
td_status td_redis_backends_create(const char *addr, uint32_t replicas, const char *replica,
                                   td_budgets *tenant_own, size_t ntenants, td_budgets *key_own,
                                   size_t nkeys, td_gw_backends *out, td_err *err);

#endif
