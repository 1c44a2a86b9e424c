/* critqueue.h - the bounded queue with criticality in front of one
 * upstream: at most `capacity` requests in flight and `queue_max` waiting.
 * When full, the lowest criticality is shed first, and within a class the
 * tenant furthest over its fair share (queued+in-flight per unit of weight);
 * a request whose deadline would pass before it could start is refused at
 * once. Single-owner: not thread-safe (one per worker, or under a lock).
 * Pure: time comes in as now_ns. */
#ifndef TENANTD_CRITQUEUE_H
#define TENANTD_CRITQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tenantd/status.h"

typedef enum {
    TD_CRIT_CRITICAL_PLUS = 0,
    TD_CRIT_CRITICAL = 1,
    TD_CRIT_SHEDDABLE_PLUS = 2,
    TD_CRIT_SHEDDABLE = 3
} td_criticality;

#define TD_CRIT_COUNT 4

/* "critical_plus" ... "sheddable" (case-insensitive, '-' or '_'); TD_EINVAL
 * otherwise. */
td_status td_criticality_parse(const char *s, td_criticality *out);
const char *td_criticality_name(td_criticality c);

typedef struct {
    void *req;            /* the caller's request; borrowed */
    td_criticality crit;
    uint32_t tenant;      /* tenant slot */
    double weight;        /* tenant's weight (> 0) */
    uint64_t deadline_ns; /* absolute; 0 = none */
    uint64_t enqueued_ns; /* set by the queue */
} td_cq_item;

typedef enum {
    TD_CQ_START,   /* a slot was free: start it now */
    TD_CQ_QUEUED,  /* waiting; td_critqueue_done will hand it out */
    TD_CQ_SHED,    /* refused: the queue is full of equal or more critical work */
    TD_CQ_DEADLINE /* refused: it could not start before its deadline */
} td_cq_outcome;

typedef struct td_critqueue td_critqueue;

td_status td_critqueue_create(uint32_t capacity, uint32_t queue_max, td_critqueue **out);
void td_critqueue_destroy(td_critqueue *q);

/* Changes how many may be in flight to capacity, 1 up to the capacity q
 * was created with (a pool whose endpoints come and go): a larger one
 * starts nothing by itself (the caller pumps with td_critqueue_next); a
 * smaller one lets the requests in flight finish. TD_EINVAL out of range,
 * nothing changed. */
td_status td_critqueue_set_capacity(td_critqueue *q, uint32_t capacity);

/* Offers it at now_ns. On TD_CQ_QUEUED, *evicted (if evicted is not NULL
 * and *had_eviction is set true) is a queued item shed to make room, which
 * the caller must answer 503. */
td_cq_outcome td_critqueue_offer(td_critqueue *q, const td_cq_item *it, uint64_t now_ns,
                                 td_cq_item *evicted, bool *had_eviction);

/* A started request finished after service_ns (feeds the service-time
 * estimate used for deadlines). Frees its slot. */
void td_critqueue_done(td_critqueue *q, uint64_t service_ns);

/* The same, naming the tenant slot of the request that finished, so that
 * fair-share shedding counts each tenant's in-flight requests as well as its
 * queued ones. Use it for every finished request or not at all: after one
 * plain td_critqueue_done the queue stops counting in-flight per tenant. */
void td_critqueue_done_tenant(td_critqueue *q, uint32_t tenant, uint64_t service_ns);

/* Pops the next item to start (most critical first, FIFO within a class)
 * into *next and takes a slot for it; items whose deadline passed are
 * popped into *expired instead (call again). Returns 1 next, 2 expired,
 * 0 nothing to start. */
int td_critqueue_next(td_critqueue *q, uint64_t now_ns, td_cq_item *out);

/* Removes a queued request (its client went away). true if found. */
bool td_critqueue_cancel(td_critqueue *q, const void *req);

uint32_t td_critqueue_inflight(const td_critqueue *q);
uint32_t td_critqueue_depth(const td_critqueue *q, td_criticality c);

#endif
