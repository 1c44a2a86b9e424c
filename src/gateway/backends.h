/* backends.h - the shared state the gateway decides with when several
 * replicas share their limits and budgets: function pointers and their
 * context, implemented in io (Redis: shared.c, shared_budget.c), made by
 * the daemon and handed to the gateway, which includes nothing of io. */
#ifndef TENANTD_GW_BACKENDS_H
#define TENANTD_GW_BACKENDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/budget.h"
#include "core/limiter.h"
#include "tenantd/status.h"

/* A rate limit shared by replicas, by slot (a tenant's, or a key's and a
 * model limit's keyed "tenant/name"). take: non-blocking, TD_OK or
 * TD_EAGAIN with *retry_after_ns (TD_LIMITER_NEVER: cost over the burst).
 * adjust: delta > 0 spends more, < 0 gives back. */
typedef struct {
    void *ctx; /* NULL: no backend, the gateway's own limiter decides */
    td_status (*take)(void *ctx, size_t slot, const char *name, const td_rate *r, double cost,
                      uint64_t now_ns, uint64_t *retry_after_ns);
    void (*adjust)(void *ctx, size_t slot, double delta);
    bool (*degraded)(const void *ctx); /* true while the local fallback decides */
    void (*destroy)(void *ctx);
} td_gw_rate_backend;

/* Money budgets shared by replicas, by slot, as td_gateway_budget_reserve
 * uses them (the contract of each is that of td_shbudget_* in io's
 * shared_budget.h): reserve TD_OK / TD_EQUOTA, settle a reservation, the
 * spend across replicas, and the counters /metrics shows. */
typedef struct {
    void *ctx; /* NULL: no backend, this process's td_budgets decide */
    td_status (*reserve)(void *ctx, size_t slot, const char *name, td_period p, int64_t limit_nano,
                         int64_t cost_nano, bool force, int64_t now_s, int64_t *period_start_s,
                         int64_t *spent_nano, bool *leased);
    void (*settle)(void *ctx, size_t slot, td_period p, int64_t period_start_s, int64_t delta_nano,
                   bool leased);
    int64_t (*spent)(void *ctx, size_t slot, const char *name, td_period p, int64_t now_s,
                     bool refresh);
    bool (*degraded)(const void *ctx);
    uint64_t (*fallbacks)(const void *ctx);
    uint64_t (*calls)(const void *ctx);
    void (*destroy)(void *ctx);
} td_gw_budget_backend;

/* All four or none: the tenants' and keys' rates, the tenants' and keys'
 * budgets. The budgets' backends keep this replica's own spend in the
 * gateway's td_budgets (td_gateway_budgets, td_gateway_key_budgets), so
 * they are made after td_gateway_create and attached with
 * td_gateway_set_backends. */
typedef struct {
    td_gw_rate_backend tenant_rate, key_rate;
    td_gw_budget_backend tenant_budget, key_budget;
} td_gw_backends;

#endif
