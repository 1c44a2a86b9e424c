/* store.c - SQLite persistence of applied objects. WAL mode, synchronous
 * FULL on commit so an acknowledged apply survives power loss; every write
 * is a single transaction. */
#include "tenantd/store.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct td_store {
    sqlite3 *db;
    char *path;
};

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS objects ("
    "  kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,"
    "  body TEXT NOT NULL, updated_at INTEGER NOT NULL DEFAULT (strftime('%s','now')),"
    "  PRIMARY KEY (kind, namespace, name));";

static td_status db_err(td_store *s, td_err *err, const char *what)
{
    return td_err_set(err, TD_EIO, "%s: %s: %s", s->path, what, sqlite3_errmsg(s->db));
}

td_status td_store_open(const char *dir, td_store **out, td_err *err)
{
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return td_err_set(err, TD_EIO, "%s: cannot create data directory: %s", dir,
                          strerror(errno));
    td_store *s = calloc(1, sizeof *s);
    if (!s)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    size_t n = strlen(dir) + 16;
    s->path = malloc(n);
    if (!s->path) {
        free(s);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    snprintf(s->path, n, "%s/tenantd.db", dir);
    if (sqlite3_open_v2(s->path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        td_status st = db_err(s, err, "cannot open");
        td_store_close(s);
        return st;
    }
    sqlite3_busy_timeout(s->db, 5000);
    char *msg = NULL;
    if (sqlite3_exec(s->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", NULL, NULL,
                     &msg) != SQLITE_OK ||
        sqlite3_exec(s->db, schema, NULL, NULL, &msg) != SQLITE_OK) {
        td_err_set(err, TD_EIO, "%s: %s", s->path, msg ? msg : "cannot initialise");
        sqlite3_free(msg);
        td_store_close(s);
        return TD_EIO;
    }
    *out = s;
    return TD_OK;
}

void td_store_close(td_store *s)
{
    if (!s)
        return;
    sqlite3_close(s->db);
    free(s->path);
    free(s);
}

td_status td_store_load(td_store *s, td_config_builder *b, td_err *err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT kind, namespace, name, body FROM objects ORDER BY rowid",
                           -1, &st, NULL) != SQLITE_OK)
        return db_err(s, err, "cannot read objects");
    td_status rc = TD_OK;
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *body = (const char *)sqlite3_column_text(st, 3);
        json_error_t je;
        json_t *obj = json_loads(body ? body : "", 0, &je);
        if (!obj) {
            rc = td_err_set(err, TD_EIO, "%s: stored %s %s/%s is not JSON: %s", s->path,
                            sqlite3_column_text(st, 0), sqlite3_column_text(st, 1),
                            sqlite3_column_text(st, 2), je.text);
            break;
        }
        rc = td_config_builder_add(b, obj, NULL, err);
        json_decref(obj);
        if (rc != TD_OK) {
            td_err_prefix(err, rc, "%s: stored object", s->path);
            break;
        }
    }
    if (rc == TD_OK && step != SQLITE_DONE)
        rc = db_err(s, err, "cannot read objects");
    sqlite3_finalize(st);
    return rc;
}

td_status td_store_write(td_store *s, json_t *const *objs, size_t nobjs,
                         const td_object_id *dels, size_t ndels, td_err *err)
{
    sqlite3_stmt *up = NULL, *del = NULL;
    td_status rc = TD_OK;
    if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        return db_err(s, err, "cannot begin a transaction");
    if (sqlite3_prepare_v2(s->db,
                           "INSERT INTO objects(kind, namespace, name, body) VALUES (?,?,?,?) "
                           "ON CONFLICT(kind, namespace, name) DO UPDATE SET body=excluded.body, "
                           "updated_at=strftime('%s','now')",
                           -1, &up, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s->db, "DELETE FROM objects WHERE kind=? AND namespace=? AND name=?",
                           -1, &del, NULL) != SQLITE_OK) {
        rc = db_err(s, err, "cannot prepare");
        goto rollback;
    }
    for (size_t i = 0; i < nobjs; i++) {
        td_object_id id = td_object_identity(objs[i]);
        /* fields in the order they were applied: an object reads back after
         * a restart exactly as it was served before */
        char *body = json_dumps(objs[i], JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!body) {
            rc = td_err_set(err, TD_ENOMEM, "out of memory");
            goto rollback;
        }
        sqlite3_bind_text(up, 1, id.kind, -1, SQLITE_STATIC);
        sqlite3_bind_text(up, 2, id.namespace_, -1, SQLITE_STATIC);
        sqlite3_bind_text(up, 3, id.name, -1, SQLITE_STATIC);
        sqlite3_bind_text(up, 4, body, -1, free);
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
