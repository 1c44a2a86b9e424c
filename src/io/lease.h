/* lease.h - the scheduling lease of replicas sharing one PostgreSQL
 * database: one row (tenantd_leader) naming the holder, a term that grows
 * by one at every takeover, and an expiry on the server's clock. Writes of
 * a scheduling pass carry the term and the database refuses a stale one
 * (td_store_write_fenced). */
#ifndef TENANTD_LEASE_H
#define TENANTD_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include "tenantd/status.h"

typedef struct td_lease td_lease;

/* How long a lease lasts after the holder's last renewal, and how often
 * the daemon renews it (or, not holding it, tries to take it). A holder
 * killed outright is replaced within TD_LEASE_MS + TD_LEASE_TICK_MS. */
#define TD_LEASE_MS      3000
#define TD_LEASE_TICK_MS 1000

/* A lease handle on url's database (whose schema td_store_open created)
 * for holder (copied; the replica's name, 1-200 bytes). Its own
 * connection, made on the first td_lease_tick. TD_EINVAL for a URL that
 * does not parse. */
td_status td_lease_open(const char *url, const char *holder, td_lease **out, td_err *err);

/* Releases the lease if held (a successor need not wait for its expiry),
 * then closes. NULL: nothing. Blocking, at most 1.5 s. */
void td_lease_close(td_lease *l);

/* Renews the lease if this handle holds it, else takes it if it expired
 * (or its holder has this handle's name: a restart of the same replica).
 * *term: the term held now (0: not held); leader (n bytes, may be NULL):
 * who holds it. TD_EIO naming the server when it cannot be asked: the
 * caller keeps its term only until the lease it last renewed expires
 * (td_lease_valid_until). Blocking, each wait (connect, statement) at most
 * 1.5 s on tenantd's clock: the daemon calls it on a thread of its own. */
td_status td_lease_tick(td_lease *l, int64_t *term, char *leader, size_t n, td_err *err);

/* The monotonic time (ns) until which the term held is certainly still
 * current: the start of the last successful renewal plus TD_LEASE_MS;
 * 0 when not held. */
int64_t td_lease_valid_until(const td_lease *l);

#endif
