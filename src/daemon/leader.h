/* leader.h - one scheduling leader among replicas sharing a PostgreSQL
 * store: the replica holding the lease (lease.h) runs the batch queue's
 * passes and writes their decisions fenced by its term; the others store
 * submits, finishes and applies and leave the scheduling to it. A daemon
 * on SQLite has no td_leader: it is always the leader, unfenced. */
#ifndef TENANTD_DAEMON_LEADER_H
#define TENANTD_DAEMON_LEADER_H

#include <stdint.h>
#include <uv.h>

#include "daemon/control.h"
#include "tenantd/status.h"

typedef struct td_leader td_leader;

/* Called by the leader to bring the served snapshot up to the store's
 * before a pass (the daemon's pick-up of other replicas' commits). */
typedef void (*td_leader_refresh_fn)(void *ud);

/* Opens the lease on url's database for the replica name (copied), tries
 * once to take it (so a replica starting alone schedules at once), and
 * renews or tries again every TD_LEASE_TICK_MS on loop. control (borrowed) is where passes commit; refresh(ud) picks up the
 * store before each pass it runs on becoming the leader. TD_EINVAL for a
 * bad URL, TD_ENOMEM; an unreachable server is no error (tried again). */
td_status td_leader_start(uv_loop_t *loop, const char *url, const char *name, td_control *control,
                          td_leader_refresh_fn refresh, void *ud, td_leader **out, td_err *err);

/* Stops the timer and gives the lease up (a successor takes over within
 * a tick, not a lease); from then on this replica does not schedule.
 * Loop thread. NULL: nothing. */
void td_leader_stop(td_leader *l);

/* Frees l once its loop has ended (after td_leader_stop, or without the
 * loop ever running). NULL: nothing. */
void td_leader_destroy(td_leader *l);

/* The term this replica schedules under, 0 when it is not the leader.
 * NULL (SQLite): -1, always the leader and unfenced. Loop thread. */
int64_t td_leader_term(const td_leader *l);

/* A fenced write of term was refused by the database: another replica
 * leads; stop scheduling until the lease is ours again. */
void td_leader_refused(td_leader *l, int64_t term);

/* The daemon adopted another replica's commit: the leader schedules what
 * it brought (a submit, a finish), writing the pass's decisions. */
void td_leader_picked_up(td_leader *l);

/* For /metrics: 1 leader, 0 not; the term held (0 if none). */
int td_leader_is(const td_leader *l);

#endif
