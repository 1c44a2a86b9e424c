/* budget_lease.h - the arithmetic of money budgets shared by gateway
 * replicas through Redis: how much a replica leases at a time, what it asks
 * for, what Redis grants (the C twin of the Lua script in shared_budget.c),
 * and the lease left after a grant or a settle. Pure logic, no clock.
 * Local amounts are nano-units (TD_MONEY_NANO); Redis holds micro-units,
 * exact as Lua numbers up to 2^53 (9e9 currency units per budget). */
#ifndef TENANTD_BUDGET_LEASE_H
#define TENANTD_BUDGET_LEASE_H

#include <stdbool.h>
#include <stdint.h>

#define TD_LEASE_NANO_PER_MICRO 1000
#define TD_LEASE_FRACTION_DIV   20 /* a chunk is at most 5% of the budget */
#define TD_LEASE_COSTS          64 /* ... and at most 64 request estimates */

/* The lease a replica asks for when its local lease misses: min(5% of
 * limit, 64 x cost), never less than cost (a request is never split), at
 * least 1 micro-unit. Negative inputs count as 0. */
int64_t td_budget_chunk(int64_t limit_nano, int64_t cost_nano);

/* One request to Redis, in micro-units. claimed: this replica's whole
 * claim on the budget (its own spend of the period plus the lease it still
 * holds, rounded up), which Redis raises its record to, so spend decided
 * while Redis was away or lost is never lost; need: the least grant that
 * lets a request of cost through; want: the grant asked (>= need). */
typedef struct {
    int64_t claimed, need, want;
} td_budget_ask;

/* The ask for a request of cost_nano when the replica spent own_nano this
 * period and holds lease_nano (negative: spent past its claims, a debt the
 * claim pays). chunk_nano from td_budget_chunk; cost 0 with chunk 0 is a
 * pure sync (need = want = 0). */
void td_budget_lease_ask(int64_t own_nano, int64_t lease_nano, int64_t cost_nano,
                         int64_t chunk_nano, td_budget_ask *a);

/* What the script decides on a budget record {total, mine} (micro): mine
 * is raised to a->claimed (total with it); what mine holds above the claim
 * (a lease left by an earlier run of this replica) counts toward need; then
 * grant g = min(want', room) if room >= need' (want' and need' net of the
 * surplus; room = limit - total, and cap - mine when cap >= 0), or want'
 * always when force (a shadow budget), else 0. Updates *total and *mine
 * and returns g. cap bounds this replica's claim just after an outage. */
int64_t td_budget_lease_grant(int64_t limit_micro, int64_t cap_micro, int64_t *total,
                              int64_t *mine, const td_budget_ask *a, bool force);

/* The replica's lease after Redis answered mine_micro: mine - own. */
int64_t td_budget_lease_after(int64_t mine_micro, int64_t own_nano);

/* Spend of the budget across replicas as this one sees it: total minus its
 * own unused lease (other replicas' unused leases count as spent). */
int64_t td_budget_shared_spent(int64_t total_micro, int64_t lease_nano);

/* A request reserved from the lease settles at price: the lease gets back
 * reserved - price (negative: it pays the excess). Saturates. */
int64_t td_budget_lease_settle(int64_t lease_nano, int64_t reserved_nano, int64_t price_nano);

/* What to give back to Redis after a settle: lease - chunk (whole micro-
 * units, rounded down) once the lease is above twice the chunk, else 0. */
int64_t td_budget_lease_excess(int64_t lease_nano, int64_t chunk_nano);

/* The spend one replica keeps to while Redis is away: limit / replicas,
 * less the lease it holds (claimed already; spendable when Redis is back),
 * never below 0. */
int64_t td_budget_fallback_limit(int64_t limit_nano, uint32_t replicas, int64_t lease_nano);

#endif
