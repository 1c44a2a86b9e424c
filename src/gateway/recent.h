/* recent.h - the last refusals of each tenant, for `tenantctl explain
 * request`: a few rings (one per gateway worker, so workers never contend),
 * each a fixed array overwritten oldest first. A refusal is noted in O(1)
 * under the ring's own mutex; readers merge the rings newest first. */
#ifndef TENANTD_RECENT_H
#define TENANTD_RECENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tenantd/status.h"

typedef struct {
    uint64_t wall_ns;  /* CLOCK_REALTIME, ns since the epoch */
    uint32_t tenant;   /* slot */
    uint16_t status;   /* the HTTP status it got (or would have, in shadow) */
    bool shadow;       /* a shadow limit: it would have been refused and went on */
    char reason[32];   /* rate_limited, concurrency_limited, budget_exceeded, shed, ... */
    char key[48];      /* the key whose own limit refused ("" = the tenant's limit) */
    char model[64];    /* the body's "model" ("" when it named none or was not read) */
    char detail[160];  /* the numbers: "cost 120 > available 35 of burst 600 (600 per 1m)" */
} td_rejection;

typedef struct td_recent td_recent;

/* nrings rings of per_ring entries each, for tenant slots below ntenants.
 * TD_EINVAL for 0, TD_ENOMEM. */
td_status td_recent_create(size_t nrings, size_t per_ring, size_t ntenants, td_recent **out);

/* Sampling, so that an abuser's flood costs the reject path almost
 * nothing: true at most once per TD_RECENT_EVERY_NS per tenant (one relaxed
 * load, and a CAS when due). Callers format and note only when true. */
#define TD_RECENT_EVERY_NS 10000000ULL /* 10 ms: at most 100 refusals/s/tenant kept */
bool td_recent_due(td_recent *r, uint32_t tenant, uint64_t mono_ns);
void td_recent_destroy(td_recent *r);

/* Notes one refusal in ring (taken modulo the ring count). */
void td_recent_note(td_recent *r, unsigned ring, const td_rejection *x);

/* Copies up to max refusals of tenant slot, newest first; returns how many. */
size_t td_recent_of(td_recent *r, uint32_t tenant, td_rejection *out, size_t max);

#endif
