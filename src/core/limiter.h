/* limiter.h - per-tenant cost limits, lock-free across worker threads.
 * Rate: GCRA, one atomic 64-bit "theoretical arrival time" (TAT) per tenant
 * slot, so a decision is one load and one compare-and-swap. Concurrency:
 * one atomic in-flight counter per slot. Pure logic: the caller passes
 * now_ns (any monotonic clock); nothing here reads a clock. */
#ifndef TENANTD_LIMITER_H
#define TENANTD_LIMITER_H

#include <stddef.h>
#include <stdint.h>

#include "tenantd/status.h"

/* A rate: `cost` units per `per_ns`, with a burst of `burst` units (the most
 * that may be taken at once after an idle period; >= the largest single
 * cost you expect). cost <= 0 means unlimited. */
typedef struct {
    double cost;
    uint64_t per_ns;
    double burst;
} td_rate;

typedef struct td_limiter td_limiter;

/* A limiter for slots 0..nslots-1, all idle. */
td_status td_limiter_create(size_t nslots, td_limiter **out);
void td_limiter_destroy(td_limiter *l);
size_t td_limiter_slots(const td_limiter *l);

/* Charges cost units to slot at now_ns under r. TD_OK if admitted;
 * TD_EAGAIN if over the limit, with *retry_after_ns (may be NULL) the wait
 * until the same cost would be admitted, and nothing charged. TD_EINVAL for
 * a slot out of range or a negative cost. Lock-free; safe from any thread. */
td_status td_limiter_take(td_limiter *l, size_t slot, const td_rate *r, double cost,
                          uint64_t now_ns, uint64_t *retry_after_ns);

/* *retry_after_ns of a cost larger than the burst: it never conforms. */
#define TD_LIMITER_NEVER UINT64_MAX

/* Reconciles a charge once the actual cost is known: delta > 0 charges more
 * (never rejects; may push the tenant into debt, delaying later requests),
 * delta < 0 credits back (never below an idle tenant's state). */
void td_limiter_adjust(td_limiter *l, size_t slot, const td_rate *r, double delta,
                       uint64_t now_ns);

/* Units slot could take at now_ns under r without waiting (0..burst);
 * r->burst when unlimited. Read-only. */
double td_limiter_available(const td_limiter *l, size_t slot, const td_rate *r, uint64_t now_ns);

/* Forgets slot's state (a tenant removed, or its limit changed a lot). */
void td_limiter_reset(td_limiter *l, size_t slot);

/* In-flight cap: TD_OK and the slot's count incremented if it was below
 * limit (0 = unlimited); TD_EAGAIN otherwise. Every TD_OK is paired with
 * one td_limiter_release. */
td_status td_limiter_acquire(td_limiter *l, size_t slot, uint32_t limit);
void td_limiter_release(td_limiter *l, size_t slot);
uint32_t td_limiter_inflight(const td_limiter *l, size_t slot);

#endif
