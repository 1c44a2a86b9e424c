/* pg_internal.h - what tenantd's PostgreSQL backends share (pg_conn.c): a
 * URL's printable name, connections with tenantd's bounds, libpq messages
 * on one line. The object store (store_pg.c), the scheduling lease
 * (leader_pg.c) and the ledger use it. */
#ifndef TENANTD_PG_INTERNAL_H
#define TENANTD_PG_INTERNAL_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

#include "tenantd/status.h"

/* Writes "PostgreSQL HOST:PORT/DB" of url into name (n bytes), from the
 * URL's own parts: never the user or the password. TD_EINVAL ("--database:
 * not a PostgreSQL URL: ...") when libpq cannot parse url. */
td_status td__pg_name(const char *url, char *name, size_t n, td_err *err);

/* How long tenantd waits on PostgreSQL, on its own clock: a server that
 * stops answering (frozen, or its network silent while the kernel still
 * acknowledges) is never waited on longer. The server's own bounds
 * (statement_timeout, lock_timeout) are set shorter on every session, so a
 * slow but living server answers with its own error first. */
#define TD_PG_STATEMENT_TIMEOUT_MS 5000 /* statement_timeout */
#define TD_PG_LOCK_TIMEOUT_MS      2000 /* lock_timeout */
#define TD_PG_CONNECT_MS           3000 /* a connection made for a caller who waits */
#define TD_PG_WAIT_MS              6000 /* a statement a caller waits for */

/* A new connection to url with tenantd's bounds, or NULL with err (may be
 * NULL) set naming name: connected within timeout_ms on tenantd's clock,
 * tcp_user_timeout 10 s, keepalives (a silent peer found in about 11 s),
 * statement_timeout and lock_timeout through the startup packet's options,
 * each unless the URL sets its own. Blocks at most timeout_ms (plus name
 * resolution). */
PGconn *td__pg_connect(const char *url, const char *name, int timeout_ms, td_err *err);

/* The same connection started without waiting: NULL only when out of
 * memory. Advance it with td__pg_connect_step. */
PGconn *td__pg_connect_start(const char *url);

/* Advances a started connection, waiting at most wait_ms for the socket
 * (0: not at all): 1 connected, 0 still connecting, -1 failed (the reason
 * in PQerrorMessage). */
int td__pg_connect_step(PGconn *c, int wait_ms);

/* As PQexecParams (nparams > 0 or p non-NULL) or PQexec (sql may then hold
 * several statements; the last result is returned, an error one first), but
 * waiting at most timeout_ms for the whole round trip. NULL when no answer
 * came in time: the connection is then cut (CONNECTION_BAD), since the
 * statement's outcome is unknown and a late answer must never be read as
 * the next one's. The caller PQclears a result. */
PGresult *td__pg_exec(PGconn *c, const char *sql, int nparams, const char *const *p,
                      int timeout_ms);

/* Why r (from td__pg_exec on c) failed, on one line in buf; returns buf. */
const char *td__pg_res_msg(PGconn *c, const PGresult *r, int timeout_ms, char *buf, size_t n);

/* In c's open transaction: TD_OK if term is the current scheduling term
 * (tenantd_leader), holding a share lock on its row until the transaction
 * ends (a takeover waits for it); else TD_EFORBIDDEN naming the term and
 * who leads now. name: the server's, for messages (leader_pg.c). */
td_status td__lease_pg_check(PGconn *c, int64_t term, const char *name, td_err *err);

/* msg (libpq's, possibly several lines) on one line in buf; returns buf. */
const char *td__pg_one_line(const char *msg, char *buf, size_t n);

#endif
