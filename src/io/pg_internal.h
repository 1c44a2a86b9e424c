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

/* A new connection to url with tenantd's bounds, or NULL with err (may be
 * NULL) set naming name: connect_timeout 5 s, tcp_user_timeout 10 s,
 * keepalives (a silent peer found in about 11 s) unless the URL sets its
 * own; statement_timeout 5 s on the session. Blocking. */
PGconn *td__pg_connect(const char *url, const char *name, td_err *err);

/* In c's open transaction: TD_OK if term is the current scheduling term
 * (tenantd_leader), holding a share lock on its row until the transaction
 * ends (a takeover waits for it); else TD_EFORBIDDEN naming the term and
 * who leads now. name: the server's, for messages (leader_pg.c). */
td_status td__lease_pg_check(PGconn *c, int64_t term, const char *name, td_err *err);

/* msg (libpq's, possibly several lines) on one line in buf; returns buf. */
const char *td__pg_one_line(const char *msg, char *buf, size_t n);

#endif
