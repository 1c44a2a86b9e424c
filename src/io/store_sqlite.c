/* store_sqlite.c - the object store's SQLite backend: DIR/tenantd.db in WAL
 * mode, synchronous FULL on commit so an acknowledged apply survives power
 * loss; every write is a single transaction. One process writes it. */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/store_internal.h"

typedef struct {
    sqlite3 *db;
    char *path;
    char *name; /* "SQLite PATH" */
} sqlite_store;

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS objects ("
    "  kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,"
    "  body TEXT NOT NULL, updated_at INTEGER NOT NULL DEFAULT (strftime('%s','now')),"
    "  PRIMARY KEY (kind, namespace, name));";

static td_status db_err(sqlite_store *s, td_err *err, const char *what)
{
    return td_err_set(err, TD_EIO, "%s: %s: %s", s->path, what, sqlite3_errmsg(s->db));
}

static void sqlite_close(void *be)
{
    sqlite_store *s = be;
    if (!s)
        return;
    sqlite3_close(s->db);
    free(s->path);
    free(s->name);
    free(s);
}

td_status td__store_sqlite_open(const char *dir, void **out, td_err *err)
{
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return td_err_set(err, TD_EIO, "%s: cannot create data directory: %s", dir,
                          strerror(errno));
    sqlite_store *s = calloc(1, sizeof *s);
    if (!s)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    size_t n = strlen(dir) + 16;
    s->path = malloc(n);
    s->name = malloc(n + 8);
    if (!s->path || !s->name) {
        sqlite_close(s);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    snprintf(s->path, n, "%s/tenantd.db", dir);
    snprintf(s->name, n + 8, "SQLite %s", s->path);
    if (sqlite3_open_v2(s->path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        td_status st = db_err(s, err, "cannot open");
        sqlite_close(s);
        return st;
    }
    sqlite3_busy_timeout(s->db, 5000);
    char *msg = NULL;
    if (sqlite3_exec(s->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", NULL, NULL,
                     &msg) != SQLITE_OK ||
        sqlite3_exec(s->db, schema, NULL, NULL, &msg) != SQLITE_OK) {
        td_err_set(err, TD_EIO, "%s: %s", s->path, msg ? msg : "cannot initialise");
        sqlite3_free(msg);
        sqlite_close(s);
        return TD_EIO;
    }
    *out = s;
    return TD_OK;
}

static const char *sqlite_name(void *be)
{
    return ((sqlite_store *)be)->name;
}

static td_status sqlite_load(void *be, td__store_row_fn fn, void *ud, int64_t *gen, td_err *err)
{
    sqlite_store *s = be;
    *gen = 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT kind, namespace, name, body FROM objects ORDER BY rowid",
                           -1, &st, NULL) != SQLITE_OK)
        return db_err(s, err, "cannot read objects");
    td_status rc = TD_OK;
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *body = (const char *)sqlite3_column_text(st, 3);
        td__store_row row = {(const char *)sqlite3_column_text(st, 0),
                             (const char *)sqlite3_column_text(st, 1),
                             (const char *)sqlite3_column_text(st, 2), body ? body : "", NULL};
        if ((rc = fn(&row, ud, err)) != TD_OK)
            break;
    }
    if (rc == TD_OK && step != SQLITE_DONE)
        rc = db_err(s, err, "cannot read objects");
    sqlite3_finalize(st);
    return rc;
}

/* A client's expectation of the row's version (td_store_expect), in the
 * write's transaction (BEGIN IMMEDIATE: no other writer meanwhile). */
static td_status check_expect(sqlite_store *s, const td__store_row *row, td_err *err)
{
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT body FROM objects WHERE kind=? AND namespace=? AND name=?",
                           -1, &q, NULL) != SQLITE_OK)
        return db_err(s, err, "cannot read an object's version");
    sqlite3_bind_text(q, 1, row->kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, row->namespace_, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 3, row->name, -1, SQLITE_STATIC);
    int r = sqlite3_step(q);
    td_status st = r == SQLITE_ROW || r == SQLITE_DONE
                       ? td__store_check_expect(s->name, row,
                                                r == SQLITE_ROW
                                                    ? (const char *)sqlite3_column_text(q, 0)
                                                    : NULL,
                                                err)
                       : db_err(s, err, "cannot read an object's version");
    sqlite3_finalize(q);
    return st;
}

static td_status sqlite_write(void *be, const td__store_row *ups, size_t nups,
                              const td_object_id *dels, size_t ndels, int64_t *before,
                              int64_t *after, td_err *err)
{
    sqlite_store *s = be;
    sqlite3_stmt *up = NULL, *del = NULL;
    td_status rc = TD_OK;
    *before = *after = 0;
    if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return db_err(s, err, "cannot begin a transaction");
    if (sqlite3_prepare_v2(s->db,
                           "INSERT INTO objects(kind, namespace, name, body) VALUES (?,?,?,?) "
                           "ON CONFLICT(kind, namespace, name) DO UPDATE SET body=excluded.body, "
                           "updated_at=strftime('%s','now')",
                           -1, &up, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s->db, "DELETE FROM objects WHERE kind=? AND namespace=? AND name=?", -1,
                           &del, NULL) != SQLITE_OK) {
        rc = db_err(s, err, "cannot prepare");
        goto rollback;
    }
    for (size_t i = 0; i < nups; i++) {
        if (ups[i].expect && (rc = check_expect(s, &ups[i], err)) != TD_OK)
            goto rollback;
        sqlite3_bind_text(up, 1, ups[i].kind, -1, SQLITE_STATIC);
        sqlite3_bind_text(up, 2, ups[i].namespace_, -1, SQLITE_STATIC);
        sqlite3_bind_text(up, 3, ups[i].name, -1, SQLITE_STATIC);
        sqlite3_bind_text(up, 4, ups[i].body, -1, SQLITE_STATIC);
        int r = sqlite3_step(up);
        sqlite3_reset(up);
        if (r != SQLITE_DONE) {
            rc = db_err(s, err, "cannot write an object");
            goto rollback;
        }
    }
    for (size_t i = 0; i < ndels; i++) {
        sqlite3_bind_text(del, 1, dels[i].kind, -1, SQLITE_STATIC);
        sqlite3_bind_text(del, 2, dels[i].namespace_, -1, SQLITE_STATIC);
        sqlite3_bind_text(del, 3, dels[i].name, -1, SQLITE_STATIC);
        int r = sqlite3_step(del);
        sqlite3_reset(del);
        if (r != SQLITE_DONE) {
            rc = db_err(s, err, "cannot delete an object");
            goto rollback;
        }
    }
    sqlite3_finalize(up);
    sqlite3_finalize(del);
    if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        rc = db_err(s, err, "cannot commit");
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        return rc;
    }
    return TD_OK;
rollback:
    sqlite3_finalize(up);
    sqlite3_finalize(del);
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/* No generation and no watch: this process is the only writer. */
const td__store_backend td__store_sqlite = {
    sqlite_name, sqlite_load, sqlite_write, NULL, NULL, NULL, NULL, sqlite_close, NULL,
};
