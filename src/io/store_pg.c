/* store_pg.c - the object store's PostgreSQL backend, for replicas that
 * share one database. Versioned schema (tenantd_schema), one transaction
 * per write that bumps tenantd_generation and NOTIFYs tenantd_objects, a
 * second connection that LISTENs. Every wait is bounded (pg_conn.c);
 * parameters are always bound. */
#include <libpq-fe.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/pg_internal.h"
#include "io/store_internal.h"

#define RETRY_NS 2000000000LL /* between reconnects to a lost server */
#define CHANNEL  "tenantd_objects"
/* The version check runs on the daemon's loop every second for nobody
 * waiting: it may hold the loop this long at most, once per outage (the
 * connection is cut, and connections are then made without waiting). */
#define CHECK_MS 1000
/* A connection made without a caller waiting advances this long at most
 * per call: a living server completes it in one (a few ms), a silent one
 * costs the loop no more than this. */
#define STEP_MS 100

typedef struct {
    PGconn *conn;    /* reads and writes, on the caller's thread */
    PGconn *pending; /* a connection being made for conn without waiting */
    PGconn *listen;  /* LISTEN only; NULL until watched, or after it was lost */
    bool listening;  /* listen connected and its LISTEN acknowledged */
    bool listen_sent;
    int64_t pending_since, listen_since; /* monotonic ns */
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
    td_status st = td_err_set(err, TD_EIO, "%s: %s: %s", s->name, what,
                              td__pg_res_msg(s->conn, r, TD_PG_WAIT_MS, line, sizeof line));
    PQclear(r);
    return st;
}

/* A statement someone waits for (an apply, a load): TD_PG_WAIT_MS. */
static PGresult *run(pg_store *s, const char *sql, int n, const char *const *p)
{
    return td__pg_exec(s->conn, sql, n, p, TD_PG_WAIT_MS);
}

/* Runs sql (no parameters; constant text only) expecting want. */
static td_status exec_ok(pg_store *s, const char *sql, ExecStatusType want, td_err *err,
                         const char *what)
{
    PGresult *r = run(s, sql, 0, NULL);
    if (PQresultStatus(r) != want)
        return res_err(s, r, err, what);
    PQclear(r);
    return TD_OK;
}

static void rollback(pg_store *s)
{
    PQclear(run(s, "ROLLBACK", 0, NULL));
}

static void connect_failed(pg_store *s, const char *msg)
{
    size_t skip = strlen(s->name) + 2; /* "NAME: " */
    s->conn_retry_at = mono_ns() + RETRY_NS;
    snprintf(s->last_err, sizeof s->last_err, "%s", strlen(msg) > skip ? msg + skip : msg);
}

/* A background check's connection: made without waiting, one step per
 * call, so that a server that does not answer never holds the daemon's
 * loop. TD_OK once connected. */
static td_status ensure_background(pg_store *s, td_err *err)
{
    if (!s->pending) {
        if (mono_ns() < s->conn_retry_at)
            return td_err_set(err, TD_EIO, "%s: not connected (%s); next attempt within 2 s",
                              s->name, s->last_err);
        if (!(s->pending = td__pg_connect_start(s->url)))
            return td_err_set(err, TD_ENOMEM, "%s: cannot connect: out of memory", s->name);
        s->pending_since = mono_ns();
    }
    int r = td__pg_connect_step(s->pending, STEP_MS);
    if (r == 1) {
        PQfinish(s->conn);
        s->conn = s->pending;
        s->pending = NULL;
        return TD_OK;
    }
    if (r == 0 && mono_ns() - s->pending_since < (int64_t)TD_PG_CONNECT_MS * 1000000)
        return td_err_set(err, TD_EIO, "%s: connecting", s->name);
    char line[200], msg[256];
    snprintf(msg, sizeof msg, "%s: cannot connect: %s", s->name,
             r == 0 ? "no answer within the connect bound"
                    : td__pg_one_line(PQerrorMessage(s->pending), line, sizeof line));
    PQfinish(s->pending);
    s->pending = NULL;
    connect_failed(s, msg);
    return td_err_set(err, TD_EIO, "%s", msg);
}

/* The connection, reconnected if it was lost. The background checks
 * (background) connect without waiting and at most once per RETRY_NS; an
 * apply or a load, which someone waits for, always tries, waiting at most
 * TD_PG_CONNECT_MS. */
static td_status ensure(pg_store *s, bool background, td_err *err)
{
    if (s->conn && PQstatus(s->conn) == CONNECTION_OK)
        return TD_OK;
    if (background)
        return ensure_background(s, err);
    PQfinish(s->pending); /* this one waits, with its own bound */
    s->pending = NULL;
    td_err e;
    PGconn *c = td__pg_connect(s->url, s->name, TD_PG_CONNECT_MS, &e);
    if (!c) {
        connect_failed(s, e.msg);
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
    PGresult *r = run(s, sql, 0, NULL);
    if (PQresultStatus(r) == PGRES_COMMAND_OK) {
        PQclear(r);
        return TD_OK;
    }
    /* no answer at all: the server hangs, a second wait would too */
    if (!r || PQstatus(s->conn) != CONNECTION_BAD)
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
    PGresult *r = run(s, "SELECT pg_advisory_xact_lock(7310575183640944996)", 0, NULL);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        st = res_err(s, r, err, "cannot lock the schema");
        goto fail;
    }
    PQclear(r);
    if ((st = exec_ok(s, "CREATE TABLE IF NOT EXISTS tenantd_schema (version integer NOT NULL)",
                      PGRES_COMMAND_OK, err, "cannot create tenantd_schema")) != TD_OK)
        goto fail;
    r = run(s, "SELECT coalesce(max(version), 0) FROM tenantd_schema", 0, NULL);
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
        PQclear(run(s, "DELETE FROM tenantd_schema", 0, NULL));
        r = run(s, "INSERT INTO tenantd_schema(version) VALUES ($1::integer)", 1, p);
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
    PQfinish(s->pending);
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
    if ((st = read_gen(s, run(s, "SELECT generation FROM tenantd_generation", 0, NULL), gen, err,
                       "cannot read tenantd_generation")) != TD_OK) {
        rollback(s);
        return st;
    }
    PGresult *r =
        run(s, "SELECT kind, namespace, name, body FROM tenantd_objects ORDER BY id", 0, NULL);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        st = res_err(s, r, err, "cannot read objects");
        rollback(s);
        return st;
    }
    for (int i = 0, n = PQntuples(r); st == TD_OK && i < n; i++) {
        td__store_row row = {PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
                             PQgetvalue(r, i, 3), NULL};
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
    PGresult *r = run(s, sql, nparams, p);
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
    PGresult *r = run(s,
                      "UPDATE tenantd_objects SET body = $4, updated_at = now(), "
                      "generation = $5::bigint WHERE kind = $1 AND namespace = $2 "
                      "AND name = $3 AND (generation <= $6::bigint OR generation = $5::bigint)",
                      6, p);
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

/* A client's expectation of the row's version (td_store_expect), checked
 * under the commit's lock on tenantd_generation: no other replica's write
 * can come between the check and this commit. */
static td_status check_expect(pg_store *s, const td__store_row *row, td_err *err)
{
    const char *p[3] = {row->kind, row->namespace_, row->name};
    PGresult *r = run(s,
                      "SELECT body FROM tenantd_objects WHERE kind = $1 AND namespace = $2 "
                      "AND name = $3",
                      3, p);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return res_err(s, r, err, "cannot read an object's version");
    td_status st = td__store_check_expect(s->name, row, PQntuples(r) ? PQgetvalue(r, 0, 0) : NULL,
                                          err);
    PQclear(r);
    return st;
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
    PGresult *r = run(s, "UPDATE tenantd_generation SET generation = generation + 1 "
                                  "RETURNING generation",
                      0, NULL);
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
        if (ups[i].expect && (st = check_expect(s, &ups[i], err)) != TD_OK)
            goto fail;
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
    r = run(s, "COMMIT", 0, NULL);
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

/* The version check of the daemon's loop: at most CHECK_MS per call. */
static td_status pg_generation(void *be, int64_t *gen, td_err *err)
{
    pg_store *s = be;
    const char *sql = "SELECT generation FROM tenantd_generation";
    td_status st = ensure(s, true, err);
    if (st != TD_OK)
        return st;
    PGresult *r = td__pg_exec(s->conn, sql, 0, NULL, CHECK_MS);
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
        *gen = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
        return TD_OK;
    }
    char line[200];
    st = td_err_set(err, TD_EIO, "%s: cannot read tenantd_generation: %s", s->name,
                    td__pg_res_msg(s->conn, r, CHECK_MS, line, sizeof line));
    /* a server restarted since: try a new connection at once (next call) */
    if (r && PQstatus(s->conn) == CONNECTION_BAD)
        s->conn_retry_at = 0;
    else if (!r)
        connect_failed(s, err ? err->msg : "no answer");
    PQclear(r);
    return st;
}

static void listen_drop(pg_store *s)
{
    PQfinish(s->listen);
    s->listen = NULL;
    s->listening = s->listen_sent = false;
}

/* The listener's connection and its LISTEN, made one step per call without
 * waiting (the daemon calls this every second until it returns a
 * descriptor): -1 until LISTEN is acknowledged. */
static int pg_watch_fd(void *be)
{
    pg_store *s = be;
    if (s->listening)
        return PQsocket(s->listen);
    if (!s->listen) {
        if (mono_ns() < s->listen_retry_at)
            return -1;
        s->listen_retry_at = mono_ns() + RETRY_NS;
        if (!(s->listen = td__pg_connect_start(s->url)))
            return -1;
        s->listen_since = mono_ns();
    }
    bool late = mono_ns() - s->listen_since > (int64_t)TD_PG_CONNECT_MS * 1000000;
    int r = td__pg_connect_step(s->listen, STEP_MS);
    if (r == 1 && !s->listen_sent) {
        s->listen_sent = PQsendQuery(s->listen, "LISTEN " CHANNEL) == 1;
        r = s->listen_sent && PQflush(s->listen) >= 0 ? 1 : -1;
    }
    if (r == 1) {
        struct pollfd pfd = {PQsocket(s->listen), POLLIN, 0};
        poll(&pfd, 1, STEP_MS); /* LISTEN's answer: a few ms from a living server */
    }
    if (r == 1 && PQconsumeInput(s->listen) && !PQisBusy(s->listen)) {
        PGresult *res = PQgetResult(s->listen);
        bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
        PQclear(res);
        while (ok && (res = PQgetResult(s->listen)))
            PQclear(res);
        if (ok) {
            s->listening = true;
            return PQsocket(s->listen);
        }
        r = -1;
    }
    if (r < 0 || late || PQstatus(s->listen) == CONNECTION_BAD)
        listen_drop(s);
    return -1;
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
    listen_drop(be);
}

const td__store_backend td__store_pg = {
    pg_name,     pg_load,        pg_write,       pg_generation,
    pg_watch_fd, pg_watch_drain, pg_watch_reset, pg_close,      pg_write_fenced,
};
