/* ledger.c - the usage ledger in DIR/ledger.db (SQLite, WAL). Appenders
 * copy records into a bounded ring under a mutex and never wait for SQLite;
 * one writer thread writes runs of the ring in batched transactions, in
 * place (the run stays reserved until its commit, so the mutex is never
 * held for more than one record's copy). Records are
 * keyed by their idempotency id (INSERT OR IGNORE), so replays never count
 * twice.
 *
 * Durability: synchronous=NORMAL. In WAL mode a committed transaction
 * survives a crash of the process (the WAL is written before COMMIT
 * returns); only a power loss or kernel crash can lose the last commits
 * before the next checkpoint. Metering is already best-effort between
 * append and commit (a bounded buffer, up to flush_ms), and FULL would add
 * an fsync per batch for no protection against the failure the ledger
 * meets most (a restarted daemon). The object store keeps FULL. */
#include "io/ledger.h"

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io/ledger_internal.h"
#include "io/store.h"

#define HOUR_NS         3600000000000LL
#define DEFAULT_BUFFER  16384
#define DEFAULT_FLUSHMS 200
#define BATCH_MAX       1024
#define COMPACT_EVERY_NS (600LL * 1000000000LL)

struct td_ledger {
    sqlite3 *db;
    char *path;
    td_ledger_opts opts;
    sqlite3_stmt *ins;

    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;       /* ring, counters below, stop */
    pthread_cond_t work;      /* writer: records waiting, flush, stop */
    pthread_cond_t done;      /* flushers: a batch was committed or failed */
    td_ledger_rec *ring;
    size_t cap, head, count;  /* count includes the pending run at head */
    size_t pending;           /* ring[head, head + pending) is being written */
    uint64_t appended;        /* records accepted into the ring */
    uint64_t processed;       /* records committed (or refused as late) and released */
    uint64_t fail_gen;        /* bumped on every failed batch */
    int flush_waiters;
    bool stop;
    td_err last_err;

    pthread_mutex_t dbmu;     /* the connection: writer batches and td_ledger_compact */
    int64_t horizon_ns;       /* raw requests starting before this were compacted */
    _Atomic uint64_t committed, dropped;

    unsigned char *fresh;     /* writer-only: pending record i was inserted (not a replay) */

    /* With a shared ledger (opts.database): every new record is also put
     * in the spool table, in the same transaction, for the shipper to send
     * (ledger_pg.c); at most opts.spool_max wait there, the rest counted */
    sqlite3_stmt *spool_ins;
    td__ledger_ship *ship;
    td__ledger_counters counters;
};

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS records ("
    "  id TEXT PRIMARY KEY, kind INTEGER NOT NULL, rollup INTEGER NOT NULL,"
    "  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,"
    "  tenant TEXT NOT NULL, team TEXT NOT NULL, project TEXT NOT NULL,"
    "  environment TEXT NOT NULL, route TEXT NOT NULL, workload TEXT NOT NULL,"
    "  cluster_queue TEXT NOT NULL, flavor TEXT NOT NULL, outcome TEXT NOT NULL,"
    "  interruptible INTEGER NOT NULL, count INTEGER NOT NULL,"
    "  tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL,"
    "  gpu_milli_seconds INTEGER NOT NULL, gpu_milli INTEGER NOT NULL,"
    "  cpu_milli INTEGER NOT NULL, memory_bytes INTEGER NOT NULL,"
    "  storage_bytes INTEGER NOT NULL, gpu_used_milli INTEGER NOT NULL,"
    "  api_key TEXT NOT NULL DEFAULT '', model TEXT NOT NULL DEFAULT '') WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS records_start ON records(start_ns);";

/* The shared ledger's outbox: what the shipper has yet to send, oldest
 * first. A table of its own, so that the records' schema (and a reader of
 * an older tenantd) is unchanged. */
static const char spool_sql[] =
    "CREATE TABLE IF NOT EXISTS spool ("
    "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  id TEXT NOT NULL, kind INTEGER NOT NULL, rollup INTEGER NOT NULL,"
    "  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,"
    "  tenant TEXT NOT NULL, team TEXT NOT NULL, project TEXT NOT NULL,"
    "  environment TEXT NOT NULL, route TEXT NOT NULL, workload TEXT NOT NULL,"
    "  cluster_queue TEXT NOT NULL, flavor TEXT NOT NULL, outcome TEXT NOT NULL,"
    "  interruptible INTEGER NOT NULL, count INTEGER NOT NULL,"
    "  tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL,"
    "  gpu_milli_seconds INTEGER NOT NULL, gpu_milli INTEGER NOT NULL,"
    "  cpu_milli INTEGER NOT NULL, memory_bytes INTEGER NOT NULL,"
    "  storage_bytes INTEGER NOT NULL, gpu_used_milli INTEGER NOT NULL,"
    "  api_key TEXT NOT NULL, model TEXT NOT NULL DEFAULT '');";

const char td__ledger_cols[] =
    "id, kind, rollup, start_ns, end_ns, tenant, team, project, environment, route, workload,"
    " cluster_queue, flavor, outcome, interruptible, count, tokens_in, tokens_out,"
    " gpu_milli_seconds, gpu_milli, cpu_milli, memory_bytes, storage_bytes, gpu_used_milli, api_key,"
    " model";
/* A version-1 ledger has no api_key column, a version-2 one no model: the
 * reader selects "" instead. */
static const char cols_v1[] =
    "id, kind, rollup, start_ns, end_ns, tenant, team, project, environment, route, workload,"
    " cluster_queue, flavor, outcome, interruptible, count, tokens_in, tokens_out,"
    " gpu_milli_seconds, gpu_milli, cpu_milli, memory_bytes, storage_bytes, gpu_used_milli, '', ''";
static const char cols_v2[] =
    "id, kind, rollup, start_ns, end_ns, tenant, team, project, environment, route, workload,"
    " cluster_queue, flavor, outcome, interruptible, count, tokens_in, tokens_out,"
    " gpu_milli_seconds, gpu_milli, cpu_milli, memory_bytes, storage_bytes, gpu_used_milli,"
    " api_key, ''";

static td_status db_err(sqlite3 *db, const char *path, td_err *err, const char *what)
{
    return td_err_set(err, TD_EIO, "%s: %s: %s", path, what, db ? sqlite3_errmsg(db) : "");
}

static char *join_path(const char *dir)
{
    size_t n = strlen(dir) + sizeof "/ledger.db";
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/ledger.db", dir);
    return p;
}

static int64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Reads meta.schema (0 if absent) and refuses a newer one. */
static td_status check_schema(sqlite3 *db, const char *path, int64_t *version, td_err *err)
{
    sqlite3_stmt *st = NULL;
    *version = 0;
    int rc = sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key='schema'", -1, &st, NULL);
    if (rc != SQLITE_OK) {
        /* no meta table: a fresh file */
        if (strstr(sqlite3_errmsg(db), "no such table"))
            return TD_OK;
        return db_err(db, path, err, "cannot read the schema version");
    }
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *version = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return db_err(db, path, err, "cannot read the schema version");
    if (*version > TD_LEDGER_SCHEMA)
        return td_err_set(err, TD_EINVAL,
                          "%s: ledger schema version %lld was written by a newer tenantd; this "
                          "build reads version %d",
                          path, (long long)*version, TD_LEDGER_SCHEMA);
    return TD_OK;
}

static int64_t meta_get(sqlite3 *db, const char *key)
{
    sqlite3_stmt *st = NULL;
    int64_t v = 0;
    if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key=?", -1, &st, NULL) != SQLITE_OK)
        return 0;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* Brings a version-1 or -2 ledger to version 3 in one transaction: the
 * new columns (api_key from version 1, model from 2; "" for every existing
 * record, in the records and in a shared ledger's spool) and the version
 * number together, or neither. */
static td_status migrate(sqlite3 *db, const char *path, int64_t from, td_err *err)
{
    char *msg = NULL;
    int spool = 0;
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='spool'",
                           -1, &q, NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        spool = 1;
    sqlite3_finalize(q);
    char sql[512];
    snprintf(sql, sizeof sql,
             "BEGIN IMMEDIATE;%s"
             "ALTER TABLE records ADD COLUMN model TEXT NOT NULL DEFAULT '';%s"
             "UPDATE meta SET value = %d WHERE key = 'schema';"
             "COMMIT;",
             from == 1 ? "ALTER TABLE records ADD COLUMN api_key TEXT NOT NULL DEFAULT '';" : "",
             spool ? "ALTER TABLE spool ADD COLUMN model TEXT NOT NULL DEFAULT '';" : "",
             TD_LEDGER_SCHEMA);
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        td_status st = td_err_set(err, TD_EIO, "%s: cannot migrate the ledger from schema version "
                                               "%lld to %d: %s",
                                  path, (long long)from, TD_LEDGER_SCHEMA,
                                  msg ? msg : sqlite3_errmsg(db));
        sqlite3_free(msg);
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return st;
    }
    return TD_OK;
}

static void *writer_main(void *arg);

/* The spool table and its insert, and how many records wait in it. */
static td_status open_spool(td_ledger *l, td_err *err)
{
    char *msg = NULL;
    if (sqlite3_exec(l->db, spool_sql, NULL, NULL, &msg) != SQLITE_OK) {
        td_status st = td_err_set(err, TD_EIO, "%s: cannot create the spool: %s", l->path,
                                  msg ? msg : sqlite3_errmsg(l->db));
        sqlite3_free(msg);
        return st;
    }
    char sql[1024];
    snprintf(sql, sizeof sql,
             "INSERT INTO spool(%s) VALUES (?,?,0,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
             td__ledger_cols);
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(l->db, sql, -1, &l->spool_ins, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(l->db, "SELECT count(*) FROM spool", -1, &q, NULL) != SQLITE_OK) {
        sqlite3_finalize(q);
        return db_err(l->db, l->path, err, "cannot prepare the spool");
    }
    if (sqlite3_step(q) == SQLITE_ROW)
        atomic_store(&l->counters.spooled, (uint64_t)sqlite3_column_int64(q, 0));
    sqlite3_finalize(q);
    return TD_OK;
}

td_status td_ledger_open(const char *dir, const td_ledger_opts *opts, td_ledger **out, td_err *err)
{
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return td_err_set(err, TD_EIO, "%s: cannot create the data directory: %s", dir,
                          strerror(errno));
    td_ledger *l = calloc(1, sizeof *l);
    if (!l)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    l->opts.max_buffered = DEFAULT_BUFFER;
    l->opts.flush_ms = DEFAULT_FLUSHMS;
    if (opts) {
        if (opts->max_buffered)
            l->opts.max_buffered = opts->max_buffered;
        if (opts->flush_ms > 0)
            l->opts.flush_ms = opts->flush_ms;
        l->opts.retention_ns = opts->retention_ns > 0 ? opts->retention_ns : 0;
        l->opts.on_commit = opts->on_commit;
        l->opts.on_commit_ud = opts->on_commit_ud;
        l->opts.database = opts->database;
        l->opts.replica = opts->replica;
        l->opts.spool_max = opts->spool_max ? opts->spool_max : TD_LEDGER_SPOOL_MAX;
    }
    l->cap = l->opts.max_buffered;
    size_t nbatch = l->cap < BATCH_MAX ? l->cap : BATCH_MAX;
    l->path = join_path(dir);
    l->ring = calloc(l->cap, sizeof *l->ring);
    l->fresh = calloc(nbatch, 1);
    td_status st = TD_OK;
    if (!l->path || !l->ring || !l->fresh) {
        st = td_err_set(err, TD_ENOMEM, "out of memory (ledger buffer of %zu records)", l->cap);
        goto fail;
    }
    if (sqlite3_open_v2(l->path, &l->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        st = db_err(l->db, l->path, err, "cannot open");
        goto fail;
    }
    sqlite3_busy_timeout(l->db, 5000);
    int64_t version;
    if ((st = check_schema(l->db, l->path, &version, err)) != TD_OK)
        goto fail;
    char *msg = NULL;
    /* A checkpoint (WAL back into the database, with its fsyncs) every
     * 10,000 pages (~40 MB) rather than SQLite's 1,000: the writer then
     * commits 2-3x more records per second. The WAL is truncated back to
     * 64 MB after a checkpoint. */
    if (sqlite3_exec(l->db,
                     "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                     "PRAGMA wal_autocheckpoint=10000; PRAGMA journal_size_limit=67108864;",
                     NULL, NULL, &msg) != SQLITE_OK ||
        sqlite3_exec(l->db, schema_sql, NULL, NULL, &msg) != SQLITE_OK ||
        sqlite3_exec(l->db,
                     "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', " TD_LEDGER_SCHEMA_STR ");"
                     "INSERT OR IGNORE INTO meta(key, value) VALUES ('horizon_ns', 0);",
                     NULL, NULL, &msg) != SQLITE_OK) {
        st = td_err_set(err, TD_EIO, "%s: cannot initialise: %s", l->path,
                        msg ? msg : sqlite3_errmsg(l->db));
        sqlite3_free(msg);
        goto fail;
    }
    if (version >= 1 && version < TD_LEDGER_SCHEMA &&
        (st = migrate(l->db, l->path, version, err)) != TD_OK)
        goto fail;
    l->horizon_ns = meta_get(l->db, "horizon_ns");
    char sql[1024];
    snprintf(sql, sizeof sql,
             "INSERT OR IGNORE INTO records(%s) VALUES "
             "(?,?,0,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
             td__ledger_cols);
    if (sqlite3_prepare_v2(l->db, sql, -1, &l->ins, NULL) != SQLITE_OK) {
        st = db_err(l->db, l->path, err, "cannot prepare");
        goto fail;
    }
    if (l->opts.database && (st = open_spool(l, err)) != TD_OK)
        goto fail;
    pthread_mutex_init(&l->mu, NULL);
    pthread_mutex_init(&l->dbmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->work, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&l->done, NULL);
    if (pthread_create(&l->thread, NULL, writer_main, l) != 0) {
        st = td_err_set(err, TD_EIO, "%s: cannot start the ledger writer thread", l->path);
        pthread_cond_destroy(&l->work);
        pthread_cond_destroy(&l->done);
        pthread_mutex_destroy(&l->mu);
        pthread_mutex_destroy(&l->dbmu);
        goto fail;
    }
    l->thread_started = true;
    if (l->opts.database &&
        (st = td__ledger_ship_start(l->path, l->opts.database, l->opts.replica,
                                    l->opts.spool_max, &l->counters, &l->ship, err)) != TD_OK) {
        td_ledger_close(l);
        return st;
    }
    *out = l;
    return TD_OK;
fail:
    sqlite3_finalize(l->spool_ins);
    sqlite3_finalize(l->ins);
    sqlite3_close(l->db);
    free(l->ring);
    free(l->fresh);
    free(l->path);
    free(l);
    return st;
}

bool td_ledger_append(td_ledger *l, const td_ledger_rec *r)
{
    pthread_mutex_lock(&l->mu);
    if (l->count == l->cap || l->stop) {
        pthread_mutex_unlock(&l->mu);
        atomic_fetch_add(&l->dropped, 1);
        return false;
    }
    l->ring[(l->head + l->count) % l->cap] = *r;
    l->count++;
    l->appended++;
    /* Wake the writer only when a full batch waits; otherwise it wakes on
     * its flush_ms timer, so the hot path rarely signals. */
    if (l->count == BATCH_MAX || l->count == l->cap)
        pthread_cond_signal(&l->work);
    pthread_mutex_unlock(&l->mu);
    return true;
}

static void bind_text(sqlite3_stmt *st, int i, const char *s, size_t max)
{
    sqlite3_bind_text(st, i, s, (int)strnlen(s, max), SQLITE_STATIC);
}

void td__ledger_bind(sqlite3_stmt *s, const td_ledger_rec *r)
{
    int k = 1;
    bind_text(s, k++, r->id, sizeof r->id);
    sqlite3_bind_int(s, k++, (int)r->kind);
    sqlite3_bind_int64(s, k++, r->start_ns);
    sqlite3_bind_int64(s, k++, r->end_ns);
    bind_text(s, k++, r->tenant, sizeof r->tenant);
    bind_text(s, k++, r->team, sizeof r->team);
    bind_text(s, k++, r->project, sizeof r->project);
    bind_text(s, k++, r->environment, sizeof r->environment);
    bind_text(s, k++, r->route, sizeof r->route);
    bind_text(s, k++, r->workload, sizeof r->workload);
    bind_text(s, k++, r->cluster_queue, sizeof r->cluster_queue);
    bind_text(s, k++, r->flavor, sizeof r->flavor);
    bind_text(s, k++, r->outcome, sizeof r->outcome);
    sqlite3_bind_int(s, k++, r->interruptible ? 1 : 0);
    sqlite3_bind_int64(s, k++, r->count > 0 ? r->count : 1);
    sqlite3_bind_int64(s, k++, r->tokens_in);
    sqlite3_bind_int64(s, k++, r->tokens_out);
    sqlite3_bind_int64(s, k++, r->gpu_milli_seconds);
    sqlite3_bind_int64(s, k++, r->gpu_milli);
    sqlite3_bind_int64(s, k++, r->cpu_milli);
    sqlite3_bind_int64(s, k++, r->memory_bytes);
    sqlite3_bind_int64(s, k++, r->storage_bytes);
    sqlite3_bind_int64(s, k++, r->gpu_used_milli);
    bind_text(s, k++, r->api_key, sizeof r->api_key);
    bind_text(s, k++, r->model, sizeof r->model);
}

static void col_text(sqlite3_stmt *st, int i, char *dst, size_t n)
{
    const unsigned char *s = sqlite3_column_text(st, i);
    snprintf(dst, n, "%s", s ? (const char *)s : "");
}

void td__ledger_row(sqlite3_stmt *q, td_ledger_rec *r)
{
    memset(r, 0, sizeof *r);
    int k = 0;
    col_text(q, k++, r->id, sizeof r->id);
    r->kind = sqlite3_column_int(q, k++) == 1 ? TD_LEDGER_INTERVAL : TD_LEDGER_REQUEST;
    k++; /* rollup */
    r->start_ns = sqlite3_column_int64(q, k++);
    r->end_ns = sqlite3_column_int64(q, k++);
    col_text(q, k++, r->tenant, sizeof r->tenant);
    col_text(q, k++, r->team, sizeof r->team);
    col_text(q, k++, r->project, sizeof r->project);
    col_text(q, k++, r->environment, sizeof r->environment);
    col_text(q, k++, r->route, sizeof r->route);
    col_text(q, k++, r->workload, sizeof r->workload);
    col_text(q, k++, r->cluster_queue, sizeof r->cluster_queue);
    col_text(q, k++, r->flavor, sizeof r->flavor);
    col_text(q, k++, r->outcome, sizeof r->outcome);
    r->interruptible = sqlite3_column_int(q, k++) != 0;
    r->count = sqlite3_column_int64(q, k++);
    r->tokens_in = sqlite3_column_int64(q, k++);
    r->tokens_out = sqlite3_column_int64(q, k++);
    r->gpu_milli_seconds = sqlite3_column_int64(q, k++);
    r->gpu_milli = sqlite3_column_int64(q, k++);
    r->cpu_milli = sqlite3_column_int64(q, k++);
    r->memory_bytes = sqlite3_column_int64(q, k++);
    r->storage_bytes = sqlite3_column_int64(q, k++);
    r->gpu_used_milli = sqlite3_column_int64(q, k++);
    col_text(q, k++, r->api_key, sizeof r->api_key);
    col_text(q, k++, r->model, sizeof r->model);
}

/* Writes the pending run, ring[head, head + pending), in one transaction.
 * Writer thread only: appenders never touch a reserved run, and only the
 * writer moves head. Late request records (older than the compacted
 * horizon) are skipped and counted as dropped. */
static td_status write_batch(td_ledger *l, td_err *err)
{
    const td_ledger_rec *batch = l->ring + l->head;
    pthread_mutex_lock(&l->dbmu);
    sqlite3 *db = l->db;
    uint64_t late = 0, spooled = 0, overflow = 0;
    td_status st = TD_OK;
    if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        st = db_err(db, l->path, err, "cannot begin a transaction");
        goto out;
    }
    for (size_t i = 0; i < l->pending; i++) {
        const td_ledger_rec *r = &batch[i];
        l->fresh[i] = 0;
        if (r->kind == TD_LEDGER_REQUEST && r->start_ns < l->horizon_ns) {
            late++;
            continue;
        }
        sqlite3_stmt *s = l->ins;
        td__ledger_bind(s, r);
        int rc = sqlite3_step(s);
        l->fresh[i] = rc == SQLITE_DONE && sqlite3_changes(db) == 1;
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
        if (rc == SQLITE_DONE && l->fresh[i] && l->spool_ins) {
            /* for the shared ledger, within the spool's bound */
            if (atomic_load(&l->counters.spooled) + spooled >= l->opts.spool_max) {
                overflow++;
            } else {
                td__ledger_bind(l->spool_ins, r);
                rc = sqlite3_step(l->spool_ins);
                sqlite3_reset(l->spool_ins);
                sqlite3_clear_bindings(l->spool_ins);
                spooled++;
            }
        }
        if (rc != SQLITE_DONE) {
            st = db_err(db, l->path, err, "cannot write a ledger record");
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            goto out;
        }
    }
    /* counted before the commit: the shipper may send and subtract the
     * rows as soon as they are committed, and the count must not wrap */
    atomic_fetch_add(&l->counters.spooled, spooled);
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        atomic_fetch_sub(&l->counters.spooled, spooled);
        st = db_err(db, l->path, err, "cannot commit");
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        goto out;
    }
    atomic_fetch_add(&l->committed, l->pending - late);
    atomic_fetch_add(&l->dropped, late);
    atomic_fetch_add(&l->counters.overflow, overflow);
out:
    pthread_mutex_unlock(&l->dbmu);
    if (st == TD_OK && spooled)
        td__ledger_ship_wake(l->ship);
    if (st == TD_OK && l->opts.on_commit)
        for (size_t i = 0; i < l->pending; i++)
            if (l->fresh[i])
                l->opts.on_commit(&batch[i], l->opts.on_commit_ud);
    return st;
}

static td_status compact_locked(td_ledger *l, int64_t now_ns, td_err *err);

static void *writer_main(void *arg)
{
    td_ledger *l = arg;
    size_t nbatch = l->cap < BATCH_MAX ? l->cap : BATCH_MAX;
    int64_t next_compact = 0;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        bool urgent = l->stop || (l->flush_waiters > 0 && l->count > 0) || l->count >= nbatch;
        if (!urgent) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            int64_t ns = ts.tv_nsec + (l->opts.flush_ms % 1000) * 1000000LL;
            ts.tv_sec += (time_t)(l->opts.flush_ms / 1000 + ns / 1000000000LL);
            ts.tv_nsec = (long)(ns % 1000000000LL);
            pthread_cond_timedwait(&l->work, &l->mu, &ts);
        }
        if (l->pending == 0 && l->count > 0) {
            /* a contiguous run: up to nbatch, not past the ring's end */
            size_t n = l->count < nbatch ? l->count : nbatch;
            if (n > l->cap - l->head)
                n = l->cap - l->head;
            l->pending = n;
        }
        bool stopping = l->stop;
        if (l->pending > 0) {
            pthread_mutex_unlock(&l->mu);
            td_err e;
            td_status st = write_batch(l, &e);
            pthread_mutex_lock(&l->mu);
            if (st == TD_OK) {
                l->head = (l->head + l->pending) % l->cap;
                l->count -= l->pending;
                l->processed += l->pending;
                l->pending = 0;
            } else {
                l->fail_gen++;
                l->last_err = e;
                /* Keep the run reserved and retry after flush_ms; appends
                 * keep filling the ring until it is full, then drop
                 * (counted). Stopping, everything left is lost, counted. */
                if (stopping) {
                    atomic_fetch_add(&l->dropped, l->count);
                    l->processed += l->count;
                    l->head = (l->head + l->count) % l->cap;
                    l->pending = 0;
                    l->count = 0;
                }
            }
            pthread_cond_broadcast(&l->done);
            if (st == TD_OK && l->count > 0)
                continue;
            if (st != TD_OK && !stopping) {
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                ts.tv_sec += (time_t)(l->opts.flush_ms / 1000) + 1;
                pthread_cond_timedwait(&l->work, &l->mu, &ts);
                continue;
            }
        }
        if (stopping && l->count == 0)
            break;
        if (l->opts.retention_ns > 0) {
            int64_t now = realtime_ns();
            if (now >= next_compact) {
                next_compact = now + COMPACT_EVERY_NS;
                pthread_mutex_unlock(&l->mu);
                pthread_mutex_lock(&l->dbmu);
                td_err e;
                if (compact_locked(l, now, &e) != TD_OK)
                    fprintf(stderr, "tenantd: ledger compaction: %s\n", e.msg);
                pthread_mutex_unlock(&l->dbmu);
                pthread_mutex_lock(&l->mu);
            }
        }
    }
    pthread_cond_broadcast(&l->done);
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

td_status td_ledger_flush(td_ledger *l, td_err *err)
{
    pthread_mutex_lock(&l->mu);
    uint64_t target = l->appended;
    uint64_t gen = l->fail_gen;
    l->flush_waiters++;
    pthread_cond_signal(&l->work);
    while (l->processed < target && l->fail_gen == gen)
        pthread_cond_wait(&l->done, &l->mu);
    l->flush_waiters--;
    td_status st = TD_OK;
    if (l->processed < target)
        st = td_err_set(err, TD_EIO, "%s", l->last_err.msg);
    pthread_mutex_unlock(&l->mu);
    return st;
}

uint64_t td_ledger_committed(const td_ledger *l)
{
    return atomic_load(&((td_ledger *)l)->committed);
}

uint64_t td_ledger_dropped(const td_ledger *l)
{
    return atomic_load(&((td_ledger *)l)->dropped);
}

uint64_t td_ledger_spooled(const td_ledger *l)
{
    return atomic_load(&((td_ledger *)l)->counters.spooled);
}

uint64_t td_ledger_shipped(const td_ledger *l)
{
    return atomic_load(&((td_ledger *)l)->counters.shipped);
}

uint64_t td_ledger_spool_overflow(const td_ledger *l)
{
    return atomic_load(&((td_ledger *)l)->counters.overflow);
}

int td_ledger_database_degraded(const td_ledger *l)
{
    return atomic_load(&((td_ledger *)l)->counters.degraded);
}

/* With dbmu held. */
static td_status compact_locked(td_ledger *l, int64_t now_ns, td_err *err)
{
    if (l->opts.retention_ns <= 0)
        return TD_OK;
    int64_t edge = now_ns - l->opts.retention_ns;
    if (edge <= 0)
        return TD_OK;
    int64_t cutoff = edge / HOUR_NS * HOUR_NS;
    if (cutoff <= l->horizon_ns)
        return TD_OK;
    sqlite3 *db = l->db;
    /* The rollup id names its group; label values, tenant, route and key
     * names are DNS-label or Kubernetes-label shaped and cannot hold '|'.
     * Records of unnamed keys keep the version-1 id (no key part), those
     * without a model the version-2 id; a model may hold '|', so its part
     * is the last and marked "m=". */
    static const char rollup_sql[] =
        "INSERT INTO records(id, kind, rollup, start_ns, end_ns, tenant, team, project,"
        " environment, route, workload, cluster_queue, flavor, outcome, interruptible, count,"
        " tokens_in, tokens_out, gpu_milli_seconds, gpu_milli, cpu_milli, memory_bytes,"
        " storage_bytes, gpu_used_milli, api_key, model)"
        " SELECT 'h' || h || '|' || tenant || '|' || team || '|' || project || '|' ||"
        "  environment || '|' || route || '|' || outcome ||"
        "  CASE WHEN api_key = '' THEN '' ELSE '|' || api_key END ||"
        "  CASE WHEN model = '' THEN '' ELSE '|m=' || model END, 0, 1, h, h + 3600000000000,"
        "  tenant, team, project, environment, route, '', '', '', outcome, 0, SUM(count),"
        "  SUM(tokens_in), SUM(tokens_out), SUM(gpu_milli_seconds), 0, 0, 0, 0, -1, api_key,"
        "  model"
        " FROM (SELECT (start_ns / 3600000000000) * 3600000000000 AS h, * FROM records"
        "       WHERE rollup = 0 AND kind = 0 AND start_ns < ?1)"
        " WHERE 1 GROUP BY h, tenant, team, project, environment, route, api_key, model, outcome"
        " ON CONFLICT(id) DO UPDATE SET count = count + excluded.count,"
        "  tokens_in = tokens_in + excluded.tokens_in,"
        "  tokens_out = tokens_out + excluded.tokens_out,"
        "  gpu_milli_seconds = gpu_milli_seconds + excluded.gpu_milli_seconds";
    sqlite3_stmt *roll = NULL, *del = NULL, *meta = NULL;
    td_status st = TD_OK;
    if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return db_err(db, l->path, err, "compaction: cannot begin a transaction");
    if (sqlite3_prepare_v2(db, rollup_sql, -1, &roll, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "DELETE FROM records WHERE rollup = 0 AND kind = 0 AND start_ns < ?1",
                           -1, &del, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "UPDATE meta SET value = ?1 WHERE key = 'horizon_ns'", -1, &meta,
                           NULL) != SQLITE_OK) {
        st = db_err(db, l->path, err, "compaction: cannot prepare");
        goto rollback;
    }
    sqlite3_bind_int64(roll, 1, cutoff);
    sqlite3_bind_int64(del, 1, cutoff);
    sqlite3_bind_int64(meta, 1, cutoff);
    if (sqlite3_step(roll) != SQLITE_DONE || sqlite3_step(del) != SQLITE_DONE ||
        sqlite3_step(meta) != SQLITE_DONE) {
        st = db_err(db, l->path, err, "compaction");
        goto rollback;
    }
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        st = db_err(db, l->path, err, "compaction: cannot commit");
        goto rollback;
    }
    l->horizon_ns = cutoff;
    goto out;
rollback:
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
out:
    sqlite3_finalize(roll);
    sqlite3_finalize(del);
    sqlite3_finalize(meta);
    return st;
}

td_status td_ledger_compact(td_ledger *l, int64_t now_ns, td_err *err)
{
    pthread_mutex_lock(&l->dbmu);
    td_status st = compact_locked(l, now_ns, err);
    pthread_mutex_unlock(&l->dbmu);
    return st;
}

void td_ledger_close(td_ledger *l)
{
    if (!l)
        return;
    if (l->thread_started) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_cond_signal(&l->work);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
        pthread_cond_destroy(&l->work);
        pthread_cond_destroy(&l->done);
        pthread_mutex_destroy(&l->mu);
        pthread_mutex_destroy(&l->dbmu);
    }
    /* after the writer's last commit: one more drain, then stop */
    td__ledger_ship_stop(l->ship);
    sqlite3_finalize(l->spool_ins);
    sqlite3_finalize(l->ins);
    sqlite3_close(l->db);
    free(l->ring);
    free(l->fresh);
    free(l->path);
    free(l);
}

/* ---- the reader ---- */

td_status td_ledger_read(const char *dir, int64_t from_ns, int64_t to_ns, td_ledger_cb cb,
                         void *ud, td_err *err)
{
    if (td_store_is_url(dir))
        return td__ledger_pg_read(dir, from_ns, to_ns, cb, ud, err);
    char *path = join_path(dir);
    if (!path)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    td_status st = TD_OK;
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    if (access(path, F_OK) != 0) {
        st = td_err_set(err, TD_ENOTFOUND, "%s: no ledger (is tenantd running with --data %s?)",
                        path, dir);
        goto out;
    }
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        st = db_err(db, path, err, "cannot open");
        goto out;
    }
    sqlite3_busy_timeout(db, 5000);
    int64_t version;
    if ((st = check_schema(db, path, &version, err)) != TD_OK)
        goto out;
    if (version == 0) {
        st = td_err_set(err, TD_ENOTFOUND, "%s: not a ledger (no schema version)", path);
        goto out;
    }
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT %s FROM records WHERE start_ns < ?1 AND end_ns >= ?2 ORDER BY start_ns, id",
             version >= 3 ? td__ledger_cols : version == 2 ? cols_v2 : cols_v1);
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) {
        st = db_err(db, path, err, "cannot read records");
        goto out;
    }
    sqlite3_bind_int64(q, 1, to_ns);
    sqlite3_bind_int64(q, 2, from_ns);
    int rc;
    td_ledger_rec r;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        td__ledger_row(q, &r);
        if (cb(&r, ud) != 0)
            break;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        st = db_err(db, path, err, "cannot read records");
out:
    sqlite3_finalize(q);
    sqlite3_close(db);
    free(path);
    return st;
}

int td_ledger_vec_push(const td_ledger_rec *r, void *vec)
{
    td_ledger_vec *v = vec;
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 64;
        if (v->max && cap > v->max)
            cap = v->max;
        td_ledger_rec *p = cap > v->n ? realloc(v->v, cap * sizeof *p) : NULL;
        if (!p) {
            v->full = 1;
            return 1;
        }
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = *r;
    return 0;
}
