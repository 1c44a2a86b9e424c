/* store.h - durable state: the objects applied to tenantd (Workloads with
 * the queue's admissions among them). Two backends behind one API: SQLite
 * (WAL) under the daemon's data dir, one writer; or a PostgreSQL database
 * shared by replicas. Each apply is one transaction, stored whole or not. */
#ifndef TENANTD_STORE_H
#define TENANTD_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/config.h"
#include "tenantd/status.h"

typedef struct td_store td_store;

/* PostgreSQL's schema version this build writes (tenantd_schema); an older
 * tenantd refuses a newer one, a newer one migrates in a transaction. */
#define TD_STORE_PG_SCHEMA 4

/* 1 if where is a PostgreSQL URL (postgres:// or postgresql://). */
bool td_store_is_url(const char *where);

/* Opens the store at where: a PostgreSQL URL (connecting, creating or
 * migrating its schema), else a directory, creating it and DIR/tenantd.db
 * in WAL mode. TD_EIO naming the path or the server (host:port/db, never
 * the password) on failure; TD_EINVAL for a URL that does not parse. */
td_status td_store_open(const char *where, td_store **out, td_err *err);
void td_store_close(td_store *s);

/* "PostgreSQL host:port/db" or "SQLite PATH": for logs. Borrowed. */
const char *td_store_name(const td_store *s);

/* Adds every stored object to b (validating each, as an apply would). */
td_status td_store_load(td_store *s, td_config_builder *b, td_err *err);

/* In one transaction: upserts objs (borrowed) and deletes the identities in
 * dels. All or nothing. */
td_status td_store_write(td_store *s, json_t *const *objs, size_t nobjs, const td_object_id *dels,
                         size_t ndels, td_err *err);

/* A scheduling pass's commit, fenced (PostgreSQL; on a store only this
 * process writes it is td_store_write): objs[0..nobjs) (borrowed) are
 * written as td_store_write does, objs[nobjs..nobjs + npass) are the
 * Workloads the pass decided on, written only over the rows this handle
 * last loaded (or wrote itself) and only while term is the current
 * scheduling term in tenantd_leader (leader.h), checked under a lock on
 * that row in the same transaction. Refused, nothing written:
 * TD_EFORBIDDEN when term is stale (another replica leads now),
 * TD_EAGAIN when a row the pass wrote was changed or deleted by another
 * commit since (the caller stores objs alone and schedules again after
 * picking that commit up). */
td_status td_store_write_fenced(td_store *s, json_t *const *objs, size_t nobjs, size_t npass,
                                const td_object_id *dels, size_t ndels, int64_t term,
                                td_err *err);

/* Optimistic concurrency, as Kubernetes' metadata.resourceVersion: an
 * object's version is a digest of it as stored (its fields in any order,
 * without metadata.resourceVersion itself), the same on every replica and
 * either backend. An apply naming one commits only while the stored object
 * still has it; without one, the last writer wins (as kubectl apply). */
#define TD_STORE_RV_LEN 17 /* 16 hex digits and the NUL */

/* obj's version into rv. obj is only read. */
void td_store_resource_version(const json_t *obj, char rv[TD_STORE_RV_LEN]);

/* Until td_store_expect_clear, a write of the object named id commits only
 * while the stored one's version is rv (strings copied); else the whole
 * write is refused, nothing written: TD_EEXIST naming the object and both
 * versions (HTTP 409), or naming it as gone when it is not stored. Loop
 * thread, as the writes. TD_ENOMEM. */
td_status td_store_expect(td_store *s, td_object_id id, const char *rv, td_err *err);
void td_store_expect_clear(td_store *s);

/* *changed = true if another process committed since this handle last
 * loaded (or wrote over exactly what it had loaded); always false for a
 * store only this process writes (SQLite). */
td_status td_store_changed(td_store *s, bool *changed, td_err *err);

/* The descriptor to poll for commits announced by other processes (PostgreSQL
 * LISTEN; connecting the listener if needed), -1 if none now. A descriptor
 * may change after td_store_watch_reset. */
int td_store_watch_fd(td_store *s);

/* After watch_fd turned readable: *notified = true if a commit was
 * announced. TD_EIO if the listener is lost: stop polling its descriptor,
 * then call td_store_watch_reset (the next td_store_watch_fd reconnects). */
td_status td_store_watch_drain(td_store *s, bool *notified, td_err *err);
void td_store_watch_reset(td_store *s);

#endif
