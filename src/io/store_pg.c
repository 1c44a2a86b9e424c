/* store_pg.c - the object store's PostgreSQL backend, for replicas that
 * share one database. Versioned schema (tenantd_schema), one transaction
 * per write that bumps tenantd_generation and NOTIFYs tenantd_objects, a
 * second connection that LISTENs. Every wait is bounded (pg_conn.c);
 * parameters are always bound. */
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/pg_internal.h"
#include "io/store_internal.h"

#define RETRY_NS 2000000000LL /* between reconnects to a lost server */
#define CHANNEL  "tenantd_objects"

typedef struct {
    PGconn *conn;   /* reads and writes, on the caller's thread */
    PGconn *listen; /* LISTEN only; NULL until watched, or after it was lost */
    char *url;
    char name[512];                         /* "PostgreSQL host:port/db": no user, no password */
    int64_t conn_retry_at, listen_retry_at; /* monotonic ns; 0: now */
    char last_err[256];                     /* why the last connect failed */
} pg_store;

/* Migration i takes the schema from version i to i + 1, in the transaction
 * that also records the new version. Version 2: the generation of each
 * row's last write (a scheduling pass writes only over rows it read) and
 * the scheduling lease (leader_pg.c). Version 3: the shared ledger
 * (ledger_pg.c). Version 4: the ledger's model column. */
static const char *const migrations[TD_STORE_PG_SCHEMA] = {
    "CREATE TABLE tenantd_objects ("
    "  id bigserial NOT NULL,"
    "  kind text NOT NULL, namespace text NOT NULL, name text NOT NULL,"
    "  body text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(),"
    "  PRIMARY KEY (kind, namespace, name));"
    "CREATE TABLE tenantd_generation (generation bigint NOT NULL);"
    "INSERT INTO tenantd_generation VALUES (0);",
    "ALTER TABLE tenantd_objects ADD COLUMN generation bigint NOT NULL DEFAULT 0;"
    "CREATE TABLE tenantd_leader ("
    "  id integer PRIMARY KEY CHECK (id = 1), holder text NOT NULL,"
    "  term bigint NOT NULL, expires_at timestamptz NOT NULL);"
    "INSERT INTO tenantd_leader VALUES (1, '', 0, '-infinity');",
    "CREATE TABLE tenantd_ledger ("
    "  id text PRIMARY KEY, replica text NOT NULL, kind smallint NOT NULL,"
    "  rollup smallint NOT NULL, start_ns bigint NOT NULL, end_ns bigint NOT NULL,"
    "  tenant text NOT NULL, team text NOT NULL, project text NOT NULL,"
    "  environment text NOT NULL, route text NOT NULL, workload text NOT NULL,"
    "  cluster_queue text NOT NULL, flavor text NOT NULL, outcome text NOT NULL,"
    "  interruptible smallint NOT NULL, count bigint NOT NULL, tokens_in bigint NOT NULL,"
    "  tokens_out bigint NOT NULL, gpu_milli_seconds bigint NOT NULL,"
    "  gpu_milli bigint NOT NULL, cpu_milli bigint NOT NULL, memory_bytes bigint NOT NULL,"
    "  storage_bytes bigint NOT NULL, gpu_used_milli bigint NOT NULL, api_key text NOT NULL,"
    "  stored_at timestamptz NOT NULL DEFAULT now());"
    "CREATE INDEX tenantd_ledger_start ON tenantd_ledger(start_ns);",
    "ALTER TABLE tenantd_ledger ADD COLUMN model text NOT NULL DEFAULT '';",
};

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static td_status conn_err(pg_store *s, PGconn *c, td_err *err, const char *what)
{
    char line[200];
    return td_err_set(err, TD_EIO, "%s: %s: %s", s->name, what,
                      td__pg_one_line(PQerrorMessage(c), line, sizeof line));
}

static td_status res_err(pg_store *s, PGresult *r, td_err *err, const char *what)
{
    char line[200];
    td_status st = td_err_set(
        err, TD_EIO, "%s: %s: %s", s->name, what,
        td__pg_one_line(r ? PQresultErrorMessage(r) : PQerrorMessage(s->conn), line, sizeof line));
    PQclear(r);
    return st;
}

/* Runs sql (no parameters; constant text only) expecting want. */
static td_status exec_ok(pg_store *s, const char *sql, ExecStatusType want, td_err *err,
                         const char *what)
{
    PGresult *r = PQexec(s->conn, sql);
    if (PQresultStatus(r) != want)
        return res_err(s, r, err, what);
    PQclear(r);
    return TD_OK;
}

static void rollback(pg_store *s)
{
    PQclear(PQexec(s->conn, "ROLLBACK"));
}

/* The connection, reconnected if it was lost. The background checks
 * (throttle) try at most once per RETRY_NS, so that a server that is down
 * costs the daemon's loop no blocking connect every second; an apply or a
 * load, which someone waits for, always tries. */
static td_status ensure(pg_store *s, bool throttle, td_err *err)
{
    if (s->conn && PQstatus(s->conn) == CONNECTION_OK)
        return TD_OK;
    if (throttle && mono_ns() < s->conn_retry_at)
        return td_err_set(err, TD_EIO, "%s: not connected (%s); next attempt within 2 s", s->name,
                          s->last_err);
    td_err e;
    PGconn *c = td__pg_connect(s->url, s->name, &e);
    if (!c) {
        s->conn_retry_at = mono_ns() + RETRY_NS;
        size_t skip = strlen(s->name) + 2; /* "NAME: " */
        snprintf(s->last_err, sizeof s->last_err, "%s",
                 strlen(e.msg) > skip ? e.msg + skip : e.msg);
        if (err)
            *err = e;
        return TD_EIO;
    }
    PQfinish(s->conn);
    s->conn = c;
    return TD_OK;
}

/* Begins a transaction with sql. A connection found dead here (a server
 * restarted since the last call: libpq learns it only now) is reconnected
 * once and the BEGIN retried: nothing was sent that could have applied. */
static td_status begin(pg_store *s, const char *sql, td_err *err)
{
    td_status st = ensure(s, false, err);
    if (st != TD_OK)
        return st;
    PGresult *r = PQexec(s->conn, sql);
    if (PQresultStatus(r) == PGRES_COMMAND_OK) {
        PQclear(r);
        return TD_OK;
    }
    if (PQstatus(s->conn) != CONNECTION_BAD)
        return res_err(s, r, err, "cannot begin a transaction");
    PQclear(r);
    if ((st = ensure(s, false, err)) != TD_OK)
        return st;
    return exec_ok(s, sql, PGRES_COMMAND_OK, err, "cannot begin a transaction");
}

/* Creates or migrates the schema in one transaction, under an advisory
 * lock so that replicas starting together migrate once. A schema newer
 * than this build is refused, and nothing changes. */
static td_status migrate(pg_store *s, td_err *err)
{
    td_status st = begin(s, "BEGIN", err);
    if (st != TD_OK)
        return st;
    PGresult *r = PQexec(s->conn, "SELECT pg_advisory_xact_lock(7310575183640944996)");
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        st = res_err(s, r, err, "cannot lock the schema");
        goto fail;
    }
    PQclear(r);
    if ((st = exec_ok(s, "CREATE TABLE IF NOT EXISTS tenantd_schema (version integer NOT NULL)",
                      PGRES_COMMAND_OK, err, "cannot create tenantd_schema")) != TD_OK)
        goto fail;
    r = PQexec(s->conn, "SELECT coalesce(max(version), 0) FROM tenantd_schema");
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        st = res_err(s, r, err, "cannot read the schema version");
        goto fail;
    }
    long version = strtol(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    if (version > TD_STORE_PG_SCHEMA) {
        st = td_err_set(err, TD_EIO,
                        "%s: schema version %ld was written by a newer tenantd; this build "
                        "reads version %d (nothing was changed)",
                        s->name, version, TD_STORE_PG_SCHEMA);
        goto fail;
    }
    for (long v = version; v < TD_STORE_PG_SCHEMA; v++) {
        char what[80];
        snprintf(what, sizeof what, "cannot migrate the schema from version %ld to %ld", v, v + 1);
        if ((st = exec_ok(s, migrations[v], PGRES_COMMAND_OK, err, what)) != TD_OK)
            goto fail;
    }
    if (version < TD_STORE_PG_SCHEMA) {
        char ver[16];
        snprintf(ver, sizeof ver, "%d", TD_STORE_PG_SCHEMA);
        const char *p[1] = {ver};
        PQclear(PQexec(s->conn, "DELETE FROM tenantd_schema"));
        r = PQexecParams(s->conn, "INSERT INTO tenantd_schema(version) VALUES ($1::integer)", 1,
                         NULL, p, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            st = res_err(s, r, err, "cannot record the schema version");
            goto fail;
        }
        PQclear(r);
    }
    return exec_ok(s, "COMMIT", PGRES_COMMAND_OK, err, "cannot commit the schema");
fail:
    rollback(s);
    return st;
}

static void pg_close(void *be)
{
    pg_store *s = be;
    if (!s)
        return;
    PQfinish(s->conn);
    PQfinish(s->listen);
    free(s->url);
    free(s);
}

td_status td__store_pg_open(const char *url, void **out, td_err *err)
{
    pg_store *s = calloc(1, sizeof *s);
    if (!s || !(s->url = strdup(url))) {
        free(s);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    td_status st = td__pg_name(url, s->name, sizeof s->name, err);
    if (st == TD_OK)
        st = ensure(s, false, err);
    if (st == TD_OK)
        st = migrate(s, err);
    if (st != TD_OK) {
        pg_close(s);
        return st;
    }
    *out = s;
    return TD_OK;
}

static const char *pg_name(void *be)
{
    return ((pg_store *)be)->name;
}

/* The generation row's value from r (one row, one column). */
static td_status read_gen(pg_store *s, PGresult *r, int64_t *gen, td_err *err, const char *what)
{
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
        return res_err(s, r, err, what);
    *gen = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return TD_OK;
}

static td_status pg_load(void *be, td__store_row_fn fn, void *ud, int64_t *gen, td_err *err)
{
    pg_store *s = be;
    /* the generation and the rows of one snapshot */
    td_status st = begin(s, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", err);
    if (st != TD_OK)
        return st;
    if ((st = read_gen(s, PQexec(s->conn, "SELECT generation FROM tenantd_generation"), gen, err,
                       "cannot read tenantd_generation")) != TD_OK) {
        rollback(s);
        return st;
    }
    PGresult *r =
        PQexec(s->conn, "SELECT kind, namespace, name, body FROM tenantd_objects ORDER BY id");
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        st = res_err(s, r, err, "cannot read objects");
        rollback(s);
        return st;
    }
    for (int i = 0, n = PQntuples(r); st == TD_OK && i < n; i++) {
        td__store_row row = {PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
                             PQgetvalue(r, i, 3)};
        st = fn(&row, ud, err);
    }
    PQclear(r);
    if (st != TD_OK) {
        rollback(s);
        return st;
    }
    return exec_ok(s, "COMMIT", PGRES_COMMAND_OK, err, "cannot read objects");
}

/* Runs sql with nparams bound text parameters, expecting want. */
static td_status exec_params(pg_store *s, const char *sql, int nparams, const char *const *p,
                             ExecStatusType want, td_err *err, const char *what)
{
    PGresult *r = PQexecParams(s->conn, sql, nparams, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != want)
        return res_err(s, r, err, what);
    PQclear(r);
    return TD_OK;
}

/* One row of a fenced write that the pass decided on: an update of the
 * row as this replica read it (generation at most seen) or as this very
 * commit wrote it; never an insert, so a Workload deleted meanwhile stays
 * deleted. TD_EAGAIN naming the object when no such row is there. */
static td_status write_checked(pg_store *s, const td__store_row *row, const char *gen,
                               const char *seen, td_err *err)
{
    const char *p[6] = {row->kind, row->namespace_, row->name, row->body, gen, seen};
    PGresult *r = PQexecParams(s->conn,
                               "UPDATE tenantd_objects SET body = $4, updated_at = now(), "
                               "generation = $5::bigint WHERE kind = $1 AND namespace = $2 "
                               "AND name = $3 AND (generation <= $6::bigint OR "
                               "generation = $5::bigint)",
                               6, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        return res_err(s, r, err, "cannot write a scheduled object");
    bool hit = strcmp(PQcmdTuples(r), "1") == 0;
    PQclear(r);
    if (!hit)
        return td_err_set(err, TD_EAGAIN,
                          "%s: %s %s/%s was changed or deleted by another commit since "
                          "generation %s; the pass's decisions were not written",
                          s->name, row->kind, row->namespace_, row->name, seen);
    return TD_OK;
}

static td_status write_tx(pg_store *s, const td__store_row *ups, size_t nups,
                          const td_object_id *dels, size_t ndels, const td__store_fence *fence,
                          int64_t *before, int64_t *after, td_err *err)
{
    td_status st = begin(s, "BEGIN", err);
    if (st != TD_OK)
        return st;
    /* first: the row lock on the generation orders concurrent applies of
     * all replicas, and says whether another one committed in between */
    PGresult *r = PQexec(s->conn, "UPDATE tenantd_generation SET generation = generation + 1 "
                                  "RETURNING generation");
    if ((st = read_gen(s, r, after, err, "cannot lock tenantd_generation for the commit")) != TD_OK)
        goto fail;
    *before = *after - 1;
    char gen[24], seen[24];
    snprintf(gen, sizeof gen, "%lld", (long long)*after);
    snprintf(seen, sizeof seen, "%lld", (long long)(fence ? fence->seen : 0));
    /* the term, under a share lock that a takeover's update waits for:
     * no new leader can begin until this commit is in or out */
    if (fence && (st = td__lease_pg_check(s->conn, fence->term, s->name, err)) != TD_OK)
        goto fail;
    for (size_t i = 0; i < nups; i++) {
        const char *p[5] = {ups[i].kind, ups[i].namespace_, ups[i].name, ups[i].body, gen};
        if (fence && i >= fence->first_checked)
            st = write_checked(s, &ups[i], gen, seen, err);
        else
            st = exec_params(s,
                             "INSERT INTO tenantd_objects(kind, namespace, name, body, generation) "
                             "VALUES ($1, $2, $3, $4, $5::bigint) ON CONFLICT (kind, namespace, "
                             "name) DO UPDATE SET body = excluded.body, updated_at = now(), "
                             "generation = excluded.generation",
                             5, p, PGRES_COMMAND_OK, err, "cannot write an object");
        if (st != TD_OK)
            goto fail;
    }
    for (size_t i = 0; i < ndels; i++) {
        const char *p[3] = {dels[i].kind, dels[i].namespace_, dels[i].name};
        if ((st = exec_params(s,
                              "DELETE FROM tenantd_objects WHERE kind = $1 AND namespace = $2 "
                              "AND name = $3",
                              3, p, PGRES_COMMAND_OK, err, "cannot delete an object")) != TD_OK)
            goto fail;
    }
    const char *p[1] = {gen};
    /* delivered to the listeners when, and only if, this commits */
    if ((st = exec_params(s, "SELECT pg_notify('" CHANNEL "', $1)", 1, p, PGRES_TUPLES_OK, err,
                          "cannot notify the other replicas")) != TD_OK)
        goto fail;
    r = PQexec(s->conn, "COMMIT");
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        return res_err(s, r, err,
                       "cannot commit (if the connection was lost, the apply may "
                       "or may not be stored)");
    PQclear(r);
    return TD_OK;
fail:
    rollback(s);
    return st;
}

static td_status pg_write(void *be, const td__store_row *ups, size_t nups, const td_object_id *dels,
                          size_t ndels, int64_t *before, int64_t *after, td_err *err)
{
    return write_tx(be, ups, nups, dels, ndels, NULL, before, after, err);
}

static td_status pg_write_fenced(void *be, const td__store_row *ups, size_t nups,
                                 const td_object_id *dels, size_t ndels,
                                 const td__store_fence *fence, int64_t *before, int64_t *after,
                                 td_err *err)
{
    return write_tx(be, ups, nups, dels, ndels, fence, before, after, err);
}

static td_status pg_generation(void *be, int64_t *gen, td_err *err)
{
    pg_store *s = be;
    td_status st = ensure(s, true, err);
    if (st != TD_OK)
        return st;
    st = read_gen(s, PQexec(s->conn, "SELECT generation FROM tenantd_generation"), gen, err,
                  "cannot read tenantd_generation");
    if (st != TD_OK && PQstatus(s->conn) == CONNECTION_BAD) {
        s->conn_retry_at = 0; /* a read: retried once on a new connection */
        if ((st = ensure(s, true, err)) == TD_OK)
            st = read_gen(s, PQexec(s->conn, "SELECT generation FROM tenantd_generation"), gen, err,
                          "cannot read tenantd_generation");
    }
    return st;
}

static int pg_watch_fd(void *be)
{
    pg_store *s = be;
    if (!s->listen) {
        if (mono_ns() < s->listen_retry_at)
            return -1;
        s->listen_retry_at = mono_ns() + RETRY_NS;
        PGconn *c = td__pg_connect(s->url, s->name, NULL);
        PGresult *r = c ? PQexec(c, "LISTEN " CHANNEL) : NULL;
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            PQclear(r);
            PQfinish(c);
            return -1;
        }
        PQclear(r);
        PQsetnonblocking(c, 1);
        s->listen = c;
    }
    return PQsocket(s->listen);
}

static td_status pg_watch_drain(void *be, int *notified, td_err *err)
{
    pg_store *s = be;
    *notified = 0;
    if (!s->listen)
        return td_err_set(err, TD_EIO, "%s: not listening", s->name);
    if (!PQconsumeInput(s->listen) || PQstatus(s->listen) != CONNECTION_OK)
        return conn_err(s, s->listen, err, "the listener's connection was lost");
    PGnotify *n;
    while ((n = PQnotifies(s->listen))) {
        *notified = 1;
        PQfreemem(n);
    }
    return TD_OK;
}

static void pg_watch_reset(void *be)
{
    pg_store *s = be;
    PQfinish(s->listen);
    s->listen = NULL;
}

const td__store_backend td__store_pg = {
    pg_name,     pg_load,        pg_write,       pg_generation,
    pg_watch_fd, pg_watch_drain, pg_watch_reset, pg_close,      pg_write_fenced,
};
