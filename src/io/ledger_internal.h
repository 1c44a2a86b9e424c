/* ledger_internal.h - what the ledger's SQLite side (ledger.c) and its
 * shared PostgreSQL side (ledger_pg.c) share: the record's columns and
 * their binding, the spool's counters, and the shipper that moves spooled
 * records to PostgreSQL. */
#ifndef TENANTD_LEDGER_INTERNAL_H
#define TENANTD_LEDGER_INTERNAL_H

#include <sqlite3.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "io/ledger.h"

/* The columns of a record, in the order td__ledger_bind binds them
 * (rollup given in the SQL as a constant) and td__ledger_row reads them. */
extern const char td__ledger_cols[];
#define TD__LEDGER_NCOLS 26 /* how many td__ledger_cols names */
void td__ledger_bind(sqlite3_stmt *s, const td_ledger_rec *r);
void td__ledger_row(sqlite3_stmt *q, td_ledger_rec *r);

typedef struct {
    _Atomic uint64_t spooled;  /* rows in the spool table */
    _Atomic uint64_t shipped;  /* rows the shipper stored in PostgreSQL */
    _Atomic uint64_t overflow; /* new records that did not fit the spool */
    _Atomic int degraded;      /* PostgreSQL unreachable since the last try */
} td__ledger_counters;

typedef struct td__ledger_ship td__ledger_ship;

/* Starts the thread that sends the spool of path (DIR/ledger.db) to url's
 * tenantd_ledger, oldest first, batch by batch, each batch one PostgreSQL
 * transaction (ON CONFLICT DO NOTHING: a batch sent twice stores nothing
 * twice) then deleted from the spool; every 250 ms, at once when woken.
 * PostgreSQL unreachable: one log line and counters->degraded = 1, a try
 * every second, one line again when it is back. replica and url copied. */
td_status td__ledger_ship_start(const char *path, const char *url, const char *replica,
                                size_t spool_max, td__ledger_counters *counters,
                                td__ledger_ship **out, td_err *err);
/* New rows are in the spool (any thread). NULL: nothing. */
void td__ledger_ship_wake(td__ledger_ship *s);
/* One last attempt to send what is spooled (if the server answers), then
 * stops the thread and frees. What is left stays spooled for the next
 * start. NULL: nothing. */
void td__ledger_ship_stop(td__ledger_ship *s);

/* td_ledger_read over the shared ledger at url. */
td_status td__ledger_pg_read(const char *url, int64_t from_ns, int64_t to_ns, td_ledger_cb cb,
                             void *ud, td_err *err);

#endif
