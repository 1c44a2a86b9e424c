/* flood.h - what a client that retries refusals at once costs itself: per
 * connection, the streak of rate/concurrency refusals that came before the
 * Retry-After of the one before, and the answer that streak earns (given
 * now, held on a timer as HAProxy's tarpit does, or held and the connection
 * then closed). Pure: the caller passes the times. */
#ifndef TENANTD_GATEWAY_FLOOD_H
#define TENANTD_GATEWAY_FLOOD_H

#include <stdint.h>

typedef struct {
    uint32_t tarpit_after; /* hold the answer from this many early refusals in a row; 0: never */
    uint32_t close_after;  /* close the connection after this many; 0: never */
    uint64_t min_hold_ns;  /* a held answer waits at least this long */
    uint64_t max_hold_ns;  /* ... and at most this long */
    uint64_t slack_ns;     /* a request this much before the Retry-After is still on time */
} td_flood_opts;

/* The defaults: hold from the 3rd early refusal in a row, for the
 * Retry-After given (50 ms to 1 s), close at the 32nd, 5 ms of slack. */
void td_flood_opts_default(td_flood_opts *o);

/* One connection's state; all zero is a fresh connection. */
typedef struct {
    uint64_t retry_at_ns; /* when the last refusal allowed a retry; 0: none pending */
    uint32_t streak;      /* refusals in a row that came before retry_at_ns */
    uint32_t who;         /* the tenant (slot + 1) the streak is about */
} td_flood_conn;

typedef enum {
    TD_FLOOD_ANSWER = 0, /* send the answer now */
    TD_FLOOD_HOLD,       /* send it after *hold_ns */
    TD_FLOOD_CLOSE       /* send it after *hold_ns, then close the connection */
} td_flood_action;

/* Notes the answer to a request on the connection s and says when to send
 * it. arrived_ns: when the request began to arrive; tenant: its tenant's
 * slot + 1 (0: none known); refused: a rate or concurrency 429 that told
 * the client to retry after retry_after_ns; now_ns: the answer is ready.
 * Any other answer ends the streak. A refusal that arrived slack_ns or more
 * before the previous one's retry time (of the same tenant) adds to it.
 * Never fails; o and s are borrowed, s is updated. */
td_flood_action td_flood_answer(const td_flood_opts *o, td_flood_conn *s, uint64_t arrived_ns,
                                uint32_t tenant, int refused, uint64_t retry_after_ns,
                                uint64_t now_ns, uint64_t *hold_ns);

#endif
