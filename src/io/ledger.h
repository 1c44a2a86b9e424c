/* ledger.h - the usage ledger: every gateway request and every admitted
 * interval of a batch workload, attributed to its owner by the cost labels
 * (team, project, environment) and its tenant. Recorded durably in SQLite
 * (DIR/ledger.db, WAL) by one writer thread that batches many records per
 * transaction; never one transaction per request on the hot path.
 *
 * Records carry an idempotency id: writing a record whose id is already
 * stored changes nothing, so a replay after a crash never double counts.
 * Old raw records are compacted into hourly rollups (same record shape,
 * summed, start/end = the hour) after the configured retention. */
#ifndef TENANTD_LEDGER_H
#define TENANTD_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/ledger_rec.h"
#include "tenantd/status.h"

/* The on-disk schema version this build writes; a ledger written by a
 * newer version is refused (TD_EINVAL naming both versions). Version 2
 * added records.api_key; a version-1 ledger is migrated in place when the
 * writer opens it (its records get api_key ""), and read as is by the
 * reader (api_key "" too). Version 3 added records.model (the request's
 * model), migrated and read the same way (model ""). */
#define TD_LEDGER_SCHEMA 3
#define TD_LEDGER_SCHEMA_STR "3"


/* ---- the writer (the daemon; one per data dir) ---- */

typedef struct td_ledger td_ledger;

typedef struct {
    size_t max_buffered;     /* records held in memory before append drops (counted) */
    int64_t flush_ms;        /* commit at least this often while records wait */
    int64_t retention_ns;    /* raw records older than this are compacted into hourly rollups; 0 = keep */
    /* Called on the writer thread, after the commit, once for each record
     * that was new (not for a replayed id); may be NULL. Must not call
     * back into the ledger. */
    void (*on_commit)(const td_ledger_rec *r, void *ud);
    void *on_commit_ud;
    /* The shared ledger of replicas: a PostgreSQL URL (whose schema the
     * object store created), or NULL. Every new record is also spooled in
     * DIR/ledger.db's spool table (same transaction) and shipped from there
     * by a thread of its own, idempotently: a request record's id there is
     * "REPLICA|ID" (replica, below, must be unique per replica), an
     * interval's is its own (every replica meters the same intervals; the
     * first stored wins). At most spool_max records wait (0: the default
     * TD_LEDGER_SPOOL_MAX); past it a new record stays in this replica's
     * ledger only, counted (td_ledger_spool_overflow). */
    const char *database;
    const char *replica;
    size_t spool_max;
} td_ledger_opts;

#define TD_LEDGER_SPOOL_MAX 1000000

/* Opens (creating) DIR/ledger.db and starts the writer thread. opts may be
 * NULL for defaults. TD_EIO naming the path; TD_EINVAL for a newer schema. */
td_status td_ledger_open(const char *dir, const td_ledger_opts *opts, td_ledger **out, td_err *err);
/* Thread-safe and non-blocking: queues r (copied) for the next batch.
 * false when the buffer is full; the record is then counted as dropped. */
bool td_ledger_append(td_ledger *l, const td_ledger_rec *r);
/* Blocks until everything appended before the call is committed. */
td_status td_ledger_flush(td_ledger *l, td_err *err);
/* Records committed and dropped so far. */
uint64_t td_ledger_committed(const td_ledger *l);
uint64_t td_ledger_dropped(const td_ledger *l);
/* The shared ledger (opts.database): records waiting in the spool, records
 * the shipper stored there (new or already there: a retry), new records
 * that did not fit the spool, and 1 while the database is unreachable.
 * All 0 without a database. */
uint64_t td_ledger_spooled(const td_ledger *l);
uint64_t td_ledger_shipped(const td_ledger *l);
uint64_t td_ledger_spool_overflow(const td_ledger *l);
int td_ledger_database_degraded(const td_ledger *l);
/* Compacts now: raw request records that started before the hour
 * boundary at or below now_ns - retention_ns are summed into hourly rollups
 * (per hour x tenant x team/project/environment x route x api_key x
 * outcome; count =
 * records summed) and deleted, in one transaction. Interval records stay
 * raw: they are one per admission, and summing them across different
 * durations would lose their resource-seconds. Idempotent: a second call
 * with the same now_ns changes nothing, and a raw request record older than
 * the compacted horizon is refused by the writer (counted as dropped), so a
 * replay never counts twice. The writer also compacts on its own clock
 * (CLOCK_REALTIME) every 10 minutes when retention_ns > 0. */
td_status td_ledger_compact(td_ledger *l, int64_t now_ns, td_err *err);
/* Flushes, stops the writer, closes. NULL is a no-op. */
void td_ledger_close(td_ledger *l);

/* ---- the reader (reports; any process) ---- */

/* Calls cb for every record (raw or rollup) of DIR/ledger.db (or, when dir
 * is a postgres:// URL, of the shared ledger there, every replica's) whose
 * [start_ns, end_ns] overlaps [from_ns, to_ns), in (start_ns, id) order,
 * on a read-only connection. cb returns non-zero to stop (TD_OK still).
 * TD_ENOTFOUND naming the path when there is no ledger; TD_EINVAL for a
 * ledger of a newer schema. */
td_status td_ledger_read(const char *dir, int64_t from_ns, int64_t to_ns, td_ledger_cb cb,
                         void *ud, td_err *err);

/* Records gathered by a walk (td_ledger_read, td_ledger_intervals): pass
 * td_ledger_vec_push as cb and the vec as ud. Start from {0} with max set
 * (0: as many as memory holds); past max records or out of memory the walk
 * stops with full set. The caller frees v. */
typedef struct {
    td_ledger_rec *v;
    size_t n, cap, max;
    int full;
} td_ledger_vec;
int td_ledger_vec_push(const td_ledger_rec *r, void *vec);

#endif
