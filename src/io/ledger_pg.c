/* ledger_pg.c - the shared ledger on PostgreSQL (tenantd_ledger, created by
 * the store's schema): a shipper thread per replica sends the records
 * spooled in DIR/ledger.db (ledger.c puts every new one there, in the
 * transaction that records it) in batches, idempotently, and deletes them
 * from the spool once PostgreSQL committed them; and the reader of
 * `tenantctl report --database`. PostgreSQL down: records wait in the
 * spool (bounded by ledger.c), one log line per transition. */
#include <errno.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "io/ledger_internal.h"
#include "io/pg_internal.h"

#define BATCH      500
#define TICK_MS    250
#define RETRY_MS   1000
#define STOP_MS    2000 /* a shipper that hangs on a silent server is cut then */

struct td__ledger_ship {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    bool stop, woken, exited;
    int sock;    /* conn's socket, for a stop to cut (under mu); -1: none */
    int wait_ms; /* bound of BEGIN and COMMIT */
    char *path, *url, *replica;
    char name[512];
    size_t spool_max;
    sqlite3 *db;
    PGconn *conn;
    td__ledger_counters *counters;
    td_ledger_rec *batch;
    int64_t *seqs;
};

#define NPARAM 26  /* parameters per row */
#define ROWS   100 /* rows per INSERT: 2,600 parameters, well under 65,535 */

static const char insert_head[] =
    "INSERT INTO tenantd_ledger(id, replica, kind, rollup, start_ns, end_ns, tenant, team, "
    "project, environment, route, workload, cluster_queue, flavor, outcome, interruptible, "
    "count, tokens_in, tokens_out, gpu_milli_seconds, gpu_milli, cpu_milli, memory_bytes, "
    "storage_bytes, gpu_used_milli, api_key, model) VALUES ";

/* The type of each parameter of a row; rollup (0) follows the third. */
static const char *const param_cast[NPARAM] = {
    "",         "",         "::smallint", "::bigint", "::bigint", "",         "",
    "",         "",         "",           "",         "",         "",         "",
    "::smallint", "::bigint", "::bigint", "::bigint", "::bigint", "::bigint", "::bigint",
    "::bigint", "::bigint", "::bigint", "",         ""};

/* The text of one record's parameters (libpq sends text). */
typedef struct {
    char id[512];
    char num[13][24];
} row_text;

/* The record's row in tenantd_ledger: a request's id carries the replica's
 * name (the local id carries its boot: a restart never reuses one); an
 * interval's is the same on every replica, so that it is stored once. */
static void make_id(const td__ledger_ship *s, const td_ledger_rec *r, char *id, size_t n)
{
    if (r->kind == TD_LEDGER_REQUEST)
        snprintf(id, n, "%s|%s", s->replica, r->id);
    else
        snprintf(id, n, "%s", r->id);
}

/* Points p[0..NPARAM) at r's values, formatted into t. */
static void row_params(const td__ledger_ship *s, const td_ledger_rec *r, row_text *t,
                       const char **p)
{
    const int64_t v[13] = {r->kind,          r->start_ns,  r->end_ns,     r->interruptible,
                           r->count > 0 ? r->count : 1, r->tokens_in, r->tokens_out,
                           r->gpu_milli_seconds, r->gpu_milli,   r->cpu_milli,
                           r->memory_bytes,  r->storage_bytes, r->gpu_used_milli};
    for (int i = 0; i < 13; i++)
        snprintf(t->num[i], sizeof t->num[i], "%lld", (long long)v[i]);
    make_id(s, r, t->id, sizeof t->id);
    const char *q[NPARAM] = {t->id,       s->replica,  t->num[0], t->num[1],      t->num[2],
                             r->tenant,   r->team,     r->project, r->environment, r->route,
                             r->workload, r->cluster_queue, r->flavor, r->outcome, t->num[3],
                             t->num[4],   t->num[5],   t->num[6], t->num[7],      t->num[8],
                             t->num[9],   t->num[10],  t->num[11], t->num[12],    r->api_key,
                             r->model};
    memcpy(p, q, sizeof q);
}

/* "INSERT ... VALUES ($1, ...), (...) ON CONFLICT ..." for n rows into sql
 * (SQL_SIZE bytes hold ROWS rows). */
#define SQL_SIZE (sizeof insert_head + ROWS * 512 + 64)
static void insert_sql(size_t n, char *sql)
{
    size_t off = (size_t)snprintf(sql, SQL_SIZE, "%s", insert_head);
    for (size_t row = 0; row < n; row++) {
        off += (size_t)snprintf(sql + off, SQL_SIZE - off, "%s(", row ? ", " : "");
        for (int i = 0; i < NPARAM; i++) {
            off += (size_t)snprintf(sql + off, SQL_SIZE - off, "%s$%zu%s", i ? ", " : "",
                                    row * NPARAM + (size_t)i + 1, param_cast[i]);
            if (i == 2)
                off += (size_t)snprintf(sql + off, SQL_SIZE - off, ", 0");
        }
        off += (size_t)snprintf(sql + off, SQL_SIZE - off, ")");
    }
    snprintf(sql + off, SQL_SIZE - off, " ON CONFLICT (id) DO NOTHING");
}

/* Sends recs[0..n) (n <= ROWS) as one INSERT, bounded by the shipper's
 * wait as BEGIN and COMMIT are: one round trip per ROWS records. */
static td_status insert_rows(td__ledger_ship *s, const td_ledger_rec *recs, size_t n,
                             td_err *err)
{
    row_text *t = malloc(n * sizeof *t);
    const char **p = malloc(n * NPARAM * sizeof *p);
    char *sql = malloc(SQL_SIZE);
    td_status st = TD_OK;
    if (!t || !p || !sql) {
        st = td_err_set(err, TD_ENOMEM, "%s: out of memory for a ledger batch", s->name);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        row_params(s, &recs[i], &t[i], p + i * NPARAM);
    insert_sql(n, sql);
    PGresult *res = td__pg_exec(s->conn, sql, (int)(n * NPARAM), p, s->wait_ms);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        char line[200];
        st = td_err_set(err, TD_EIO, "%s: cannot store ledger records: %s", s->name,
                        td__pg_res_msg(s->conn, res, s->wait_ms, line, sizeof line));
    }
    PQclear(res);
out:
    free(t);
    free(p);
    free(sql);
    return st;
}

/* Up to BATCH spooled records, oldest first, into s->batch; *n of them. */
static td_status read_spool(td__ledger_ship *s, size_t *n, td_err *err)
{
    char sql[1024];
    snprintf(sql, sizeof sql, "SELECT %s, seq FROM spool ORDER BY seq LIMIT %d", td__ledger_cols,
             BATCH);
    sqlite3_stmt *q = NULL;
    *n = 0;
    if (sqlite3_prepare_v2(s->db, sql, -1, &q, NULL) != SQLITE_OK)
        return td_err_set(err, TD_EIO, "%s: cannot read the spool: %s", s->path,
                          sqlite3_errmsg(s->db));
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW && *n < BATCH) {
        td__ledger_row(q, &s->batch[*n]);
        s->seqs[(*n)++] = sqlite3_column_int64(q, TD__LEDGER_NCOLS);
    }
    td_status st = TD_OK;
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        st = td_err_set(err, TD_EIO, "%s: cannot read the spool: %s", s->path,
                        sqlite3_errmsg(s->db));
    sqlite3_finalize(q);
    return st;
}

static td_status pg_exec(td__ledger_ship *s, const char *sql, td_err *err)
{
    PGresult *r = td__pg_exec(s->conn, sql, 0, NULL, s->wait_ms);
    td_status st = TD_OK;
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        char line[200];
        st = td_err_set(err, TD_EIO, "%s: %s: %s", s->name, sql,
                        td__pg_res_msg(s->conn, r, s->wait_ms, line, sizeof line));
    }
    PQclear(r);
    return st;
}

/* Replaces the connection, publishing its socket for a stop to cut. */
static void set_conn(td__ledger_ship *s, PGconn *c)
{
    pthread_mutex_lock(&s->mu);
    PQfinish(s->conn);
    s->conn = c;
    s->sock = c ? PQsocket(c) : -1;
    pthread_mutex_unlock(&s->mu);
}

/* One batch: PostgreSQL first (one transaction), then out of the spool.
 * A crash in between sends the batch again, which stores nothing twice.
 * *n: records sent (0: the spool was empty). */
static td_status ship_batch(td__ledger_ship *s, size_t *n, td_err *err)
{
    td_status st = read_spool(s, n, err);
    if (st != TD_OK || *n == 0)
        return st;
    if (!s->conn || PQstatus(s->conn) != CONNECTION_OK) {
        set_conn(s, td__pg_connect(s->url, s->name, TD_PG_CONNECT_MS, err));
        if (!s->conn)
            return TD_EIO;
    }
    st = pg_exec(s, "BEGIN", err);
    for (size_t i = 0; st == TD_OK && i < *n; i += ROWS)
        st = insert_rows(s, &s->batch[i], *n - i < ROWS ? *n - i : ROWS, err);
    if (st == TD_OK)
        st = pg_exec(s, "COMMIT", err);
    if (st != TD_OK) {
        if (PQstatus(s->conn) == CONNECTION_OK)
            PQclear(td__pg_exec(s->conn, "ROLLBACK", 0, NULL, s->wait_ms));
        else
            set_conn(s, NULL);
        return st;
    }
    sqlite3_stmt *del = NULL;
    if (sqlite3_prepare_v2(s->db, "DELETE FROM spool WHERE seq <= ?1", -1, &del, NULL) !=
            SQLITE_OK ||
        (sqlite3_bind_int64(del, 1, s->seqs[*n - 1]), sqlite3_step(del)) != SQLITE_DONE) {
        st = td_err_set(err, TD_EIO, "%s: cannot empty the spool: %s", s->path,
                        sqlite3_errmsg(s->db));
    }
    sqlite3_finalize(del);
    if (st == TD_OK) {
        atomic_fetch_sub(&s->counters->spooled, *n);
        atomic_fetch_add(&s->counters->shipped, *n);
    }
    return st;
}

/* Sends batches until the spool is empty or a batch fails; logs the
 * transitions of PostgreSQL's reachability. false: it failed. */
static bool drain(td__ledger_ship *s)
{
    td_err err;
    size_t n = 0;
    td_status st;
    do {
        st = ship_batch(s, &n, &err);
        if (st == TD_OK && n && atomic_load(&s->counters->degraded)) {
            atomic_store(&s->counters->degraded, 0);
            fprintf(stderr, "tenantd: ledger: %s reachable again; sending the spooled records "
                            "(%llu waiting)\n",
                    s->name, (unsigned long long)atomic_load(&s->counters->spooled) + n);
        }
    } while (st == TD_OK && n == BATCH);
    if (st != TD_OK && !atomic_load(&s->counters->degraded)) {
        atomic_store(&s->counters->degraded, 1);
        fprintf(stderr, "tenantd: ledger: %s; spooling in %s (at most %zu records, the rest "
                        "counted in tenantd_ledger_spool_overflow_total)\n",
                err.msg, s->path, s->spool_max);
    }
    return st == TD_OK;
}

static void *ship_main(void *arg)
{
    td__ledger_ship *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        if (!s->woken) {
            int64_t ms = atomic_load(&s->counters->degraded) ? RETRY_MS : TICK_MS;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            int64_t ns = ts.tv_nsec + ms * 1000000LL;
            ts.tv_sec += (time_t)(ns / 1000000000LL);
            ts.tv_nsec = (long)(ns % 1000000000LL);
            pthread_cond_timedwait(&s->wake, &s->mu, &ts);
        }
        s->woken = false;
        if (s->stop)
            break;
        pthread_mutex_unlock(&s->mu);
        if (atomic_load(&s->counters->spooled) > 0)
            drain(s);
        pthread_mutex_lock(&s->mu);
        /* degraded: wait out RETRY_MS even if woken meanwhile */
        if (atomic_load(&s->counters->degraded))
            s->woken = false;
    }
    s->exited = true;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void ship_free(td__ledger_ship *s)
{
    PQfinish(s->conn);
    sqlite3_close(s->db);
    free(s->batch);
    free(s->seqs);
    free(s->path);
    free(s->url);
    free(s->replica);
    free(s);
}

td_status td__ledger_ship_start(const char *path, const char *url, const char *replica,
                                size_t spool_max, td__ledger_counters *counters,
                                td__ledger_ship **out, td_err *err)
{
    td__ledger_ship *s = calloc(1, sizeof *s);
    if (!s)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    s->path = strdup(path);
    s->url = strdup(url);
    s->replica = strdup(replica && *replica ? replica : "tenantd");
    s->batch = calloc(BATCH, sizeof *s->batch);
    s->seqs = calloc(BATCH, sizeof *s->seqs);
    s->counters = counters;
    s->spool_max = spool_max;
    s->sock = -1;
    s->wait_ms = TD_PG_WAIT_MS;
    td_status st = TD_OK;
    if (!s->path || !s->url || !s->replica || !s->batch || !s->seqs)
        st = td_err_set(err, TD_ENOMEM, "out of memory");
    if (st == TD_OK)
        st = td__pg_name(url, s->name, sizeof s->name, err);
    if (st == TD_OK && sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
        st = td_err_set(err, TD_EIO, "%s: cannot open for the shipper: %s", path,
                        sqlite3_errmsg(s->db));
    if (st == TD_OK)
        sqlite3_busy_timeout(s->db, 5000);
    if (st != TD_OK) {
        ship_free(s);
        return st;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&s->thread, NULL, ship_main, s) != 0) {
        pthread_cond_destroy(&s->wake);
        pthread_mutex_destroy(&s->mu);
        ship_free(s);
        return td_err_set(err, TD_EIO, "%s: cannot start the ledger shipper thread", path);
    }
    *out = s;
    return TD_OK;
}

void td__ledger_ship_wake(td__ledger_ship *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->woken = true;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
}

void td__ledger_ship_stop(td__ledger_ship *s)
{
    if (!s)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += STOP_MS / 1000;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_broadcast(&s->wake);
    while (!s->exited && pthread_cond_timedwait(&s->wake, &s->mu, &ts) != ETIMEDOUT)
        ;
    /* still in a batch: the server does not answer; cut its connection */
    bool cut = !s->exited && s->sock >= 0;
    if (cut)
        shutdown(s->sock, SHUT_RDWR);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    s->wait_ms = STOP_MS;
    if (cut)
        fprintf(stderr, "tenantd: ledger: %s did not answer within %d ms; its connection was "
                        "cut\n",
                s->name, STOP_MS);
    if (atomic_load(&s->counters->spooled) > 0 && (cut || !drain(s)))
        fprintf(stderr, "tenantd: ledger: %llu records stay spooled in %s for the next start\n",
                (unsigned long long)atomic_load(&s->counters->spooled), s->path);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->mu);
    ship_free(s);
}

td_status td__ledger_pg_read(const char *url, int64_t from_ns, int64_t to_ns, td_ledger_cb cb,
                             void *ud, td_err *err)
{
    char name[512];
    td_status st = td__pg_name(url, name, sizeof name, err);
    if (st != TD_OK)
        return st;
    PGconn *c = td__pg_connect(url, name, TD_PG_CONNECT_MS, err);
    if (!c)
        return TD_EIO;
    char sql[1024], from[24], to[24];
    snprintf(sql, sizeof sql,
             "SELECT %s FROM tenantd_ledger WHERE start_ns < $1::bigint AND end_ns >= $2::bigint "
             "ORDER BY start_ns, id",
             td__ledger_cols);
    snprintf(to, sizeof to, "%lld", (long long)to_ns);
    snprintf(from, sizeof from, "%lld", (long long)from_ns);
    const char *p[2] = {to, from};
    PGresult *r = PQexecParams(c, sql, 2, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        char line[200];
        st = td_err_set(err, TD_EIO, "%s: cannot read the ledger: %s", name,
                        td__pg_one_line(PQresultErrorMessage(r), line, sizeof line));
        PQclear(r);
        PQfinish(c);
        return st;
    }
    td_ledger_rec rec;
    for (int i = 0, n = PQntuples(r); i < n; i++) {
        memset(&rec, 0, sizeof rec);
        int k = 0;
#define TXT(f) snprintf(rec.f, sizeof rec.f, "%s", PQgetvalue(r, i, k++))
#define NUM(f) rec.f = strtoll(PQgetvalue(r, i, k++), NULL, 10)
        TXT(id);
        rec.kind = strtol(PQgetvalue(r, i, k++), NULL, 10) == 1 ? TD_LEDGER_INTERVAL
                                                                : TD_LEDGER_REQUEST;
        k++; /* rollup */
        NUM(start_ns);
        NUM(end_ns);
        TXT(tenant);
        TXT(team);
        TXT(project);
        TXT(environment);
        TXT(route);
        TXT(workload);
        TXT(cluster_queue);
        TXT(flavor);
        TXT(outcome);
        rec.interruptible = strtol(PQgetvalue(r, i, k++), NULL, 10) != 0;
        NUM(count);
        NUM(tokens_in);
        NUM(tokens_out);
        NUM(gpu_milli_seconds);
        NUM(gpu_milli);
        NUM(cpu_milli);
        NUM(memory_bytes);
        NUM(storage_bytes);
        NUM(gpu_used_milli);
        TXT(api_key);
        TXT(model);
#undef TXT
#undef NUM
        if (cb(&rec, ud) != 0)
            break;
    }
    PQclear(r);
    PQfinish(c);
    return TD_OK;
}
