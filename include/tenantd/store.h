/* store.h - durable state in SQLite (WAL) under the daemon's data dir: the
 * objects applied to tenantd. One writer; each apply is one transaction, so
 * an apply is stored whole or not at all. */
#ifndef TENANTD_STORE_H
#define TENANTD_STORE_H

#include <jansson.h>

#include "tenantd/config.h"
#include "tenantd/status.h"

typedef struct td_store td_store;

/* Opens (creating dir and the schema if needed) DIR/tenantd.db in WAL mode.
 * TD_EIO naming the path on failure. */
td_status td_store_open(const char *dir, td_store **out, td_err *err);
void td_store_close(td_store *s);

/* Adds every stored object to b (validating each, as an apply would). */
td_status td_store_load(td_store *s, td_config_builder *b, td_err *err);

/* In one transaction: upserts objs (borrowed) and deletes the identities in
 * dels. All or nothing. */
td_status td_store_write(td_store *s, json_t *const *objs, size_t nobjs,
                         const td_object_id *dels, size_t ndels, td_err *err);

#endif
