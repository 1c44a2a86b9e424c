/* store_internal.h - what a backend of the object store provides to
 * store.c. store.c keeps the logic (JSON in and out, validation on load,
 * which generation this handle has seen); a backend only moves rows, in
 * one transaction per write, as Redis keeps ae_epoll.c beside ae_kqueue.c. */
#ifndef TENANTD_STORE_INTERNAL_H
#define TENANTD_STORE_INTERNAL_H

#include <stdint.h>

#include "io/store.h"

/* One stored object: its identity and its body as compact JSON. */
typedef struct {
    const char *kind, *namespace_, *name, *body;
    const char *expect; /* the stored version it must have (td_store_expect), or NULL */
} td__store_row;

/* A backend, in the write's transaction, for a row with expect: stored is
 * the object's body as stored now (NULL: none). TD_OK when it matches;
 * else TD_EEXIST naming the object (name: the store's, for the message). */
td_status td__store_check_expect(const char *name, const td__store_row *row, const char *stored,
                                 td_err *err);

/* Called with each stored row, in the order objects were first written;
 * the row is borrowed for the call. Non-TD_OK stops the read with it. */
typedef td_status (*td__store_row_fn)(const td__store_row *row, void *ud, td_err *err);

/* What a fenced write checks (td_store_write_fenced). */
typedef struct td__store_fence {
    int64_t term;         /* the scheduling term the writer holds */
    int64_t seen;         /* the generation the writer's rows were read at */
    size_t first_checked; /* ups from this index on are the pass's */
} td__store_fence;

typedef struct {
    /* "SQLite PATH", "PostgreSQL host:port/db": what errors name. */
    const char *(*name)(void *be);
    /* Reads every row, and (if the backend counts commits) the generation
     * of that same snapshot into *gen (else 0). */
    td_status (*load)(void *be, td__store_row_fn fn, void *ud, int64_t *gen, td_err *err);
    /* In one transaction: upserts ups, deletes dels; *before and *after
     * are the generation just before and just after this commit (0 when
     * the backend does not count). Nothing changed on error. */
    td_status (*write)(void *be, const td__store_row *ups, size_t nups, const td_object_id *dels,
                       size_t ndels, int64_t *before, int64_t *after, td_err *err);
    /* The committed generation now. NULL: one process owns the store. */
    td_status (*generation)(void *be, int64_t *gen, td_err *err);
    /* The descriptor that turns readable when another process may have
     * committed (connecting it if needed); -1 if there is none now. */
    int (*watch_fd)(void *be);
    /* Consumes what arrived on watch_fd; *notified = 1 if a commit was
     * announced. TD_EIO: the watch is lost (the caller stops polling the
     * descriptor, then calls watch_reset). */
    td_status (*watch_drain)(void *be, int *notified, td_err *err);
    void (*watch_reset)(void *be);
    void (*close)(void *be);
    /* As write, fenced (td_store_write_fenced): ups[fence->first_checked..]
     * only over rows at most fence->seen (or written by this very commit),
     * and only while fence->term is current. TD_EFORBIDDEN (stale term) or
     * TD_EAGAIN (a row changed), nothing written. NULL: one process writes
     * the store, and write serves. */
    td_status (*write_fenced)(void *be, const td__store_row *ups, size_t nups,
                              const td_object_id *dels, size_t ndels,
                              const struct td__store_fence *fence, int64_t *before,
                              int64_t *after, td_err *err);
} td__store_backend;

/* DIR/tenantd.db, SQLite in WAL mode (store_sqlite.c). */
td_status td__store_sqlite_open(const char *dir, void **be, td_err *err);
extern const td__store_backend td__store_sqlite;

/* A postgres:// or postgresql:// URL (store_pg.c). */
td_status td__store_pg_open(const char *url, void **be, td_err *err);
extern const td__store_backend td__store_pg;

#endif
