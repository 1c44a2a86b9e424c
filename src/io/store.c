/* store.c - the object store's logic over its backends (store_sqlite.c,
 * store_pg.c): objects to JSON rows and back, validation on load, and the
 * generation this handle has seen, so a replica learns that another one
 * committed. */
#include "io/store.h"

#include <stdlib.h>
#include <string.h>

#include "core/jsonfast.h"
#include "io/store_internal.h"

struct td_store {
    const td__store_backend *ops;
    void *be;
    /* the generation of what this handle serves: the one it loaded, or the
     * one its own commit made when that commit followed it directly */
    int64_t seen;
};

bool td_store_is_url(const char *where)
{
    return strncmp(where, "postgres://", 11) == 0 || strncmp(where, "postgresql://", 13) == 0;
}

td_status td_store_open(const char *where, td_store **out, td_err *err)
{
    td_store *s = calloc(1, sizeof *s);
    if (!s)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    td_status st;
    if (td_store_is_url(where)) {
        s->ops = &td__store_pg;
        st = td__store_pg_open(where, &s->be, err);
    } else {
        s->ops = &td__store_sqlite;
        st = td__store_sqlite_open(where, &s->be, err);
    }
    if (st != TD_OK) {
        free(s);
        return st;
    }
    *out = s;
    return TD_OK;
}

void td_store_close(td_store *s)
{
    if (!s)
        return;
    s->ops->close(s->be);
    free(s);
}

const char *td_store_name(const td_store *s)
{
    return s->ops->name(s->be);
}

typedef struct {
    td_store *s;
    td_config_builder *b;
} load_ctx;

static td_status load_row(const td__store_row *row, void *ud, td_err *err)
{
    load_ctx *c = ud;
    json_error_t je;
    json_t *obj = td_json_loadb(row->body, strlen(row->body), &je);
    if (!obj)
        return td_err_set(err, TD_EIO, "%s: stored %s %s/%s is not JSON: %s", td_store_name(c->s),
                          row->kind, row->namespace_, row->name, je.text);
    td_status rc = td_config_builder_put(c->b, obj, NULL, err); /* parsed for it: no copy */
    json_decref(obj);
    if (rc != TD_OK)
        td_err_prefix(err, rc, "%s: stored object", td_store_name(c->s));
    return rc;
}

td_status td_store_load(td_store *s, td_config_builder *b, td_err *err)
{
    load_ctx c = {s, b};
    int64_t gen = 0;
    td_status st = s->ops->load(s->be, load_row, &c, &gen, err);
    /* A generation whose objects do not validate is seen all the same: it
     * is logged once, not reloaded on every check until the next commit. */
    if (st == TD_OK || st == TD_EINVAL)
        s->seen = gen;
    return st;
}

/* Writes objs (and dels) through the backend, fenced when fence is not
 * NULL; keeps seen current when the commit lay right on top of it. */
static td_status write_rows(td_store *s, json_t *const *objs, size_t nobjs,
                            const td_object_id *dels, size_t ndels, td__store_fence *fence,
                            td_err *err)
{
    td__store_row *rows = calloc(nobjs ? nobjs : 1, sizeof *rows);
    if (!rows)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    td_status st = TD_OK;
    size_t n = 0;
    for (; n < nobjs; n++) {
        td_object_id id = td_object_identity(objs[n]);
        /* fields in the order they were applied: an object reads back after
         * a restart exactly as it was served before */
        char *body = json_dumps(objs[n], JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!body) {
            st = td_err_set(err, TD_ENOMEM, "out of memory");
            break;
        }
        rows[n] = (td__store_row){id.kind, id.namespace_, id.name, body};
    }
    int64_t before = 0, after = 0;
    if (st == TD_OK && fence && s->ops->write_fenced) {
        fence->seen = s->seen;
        st = s->ops->write_fenced(s->be, rows, nobjs, dels, ndels, fence, &before, &after, err);
    } else if (st == TD_OK) {
        st = s->ops->write(s->be, rows, nobjs, dels, ndels, &before, &after, err);
    }
    /* Only a commit right on top of what this handle serves keeps it
     * current; one on top of another replica's commit leaves that one to
     * be picked up (td_store_changed then says so). */
    if (st == TD_OK && before == s->seen)
        s->seen = after;
    for (size_t i = 0; i < n; i++)
        free((char *)rows[i].body);
    free(rows);
    return st;
}

td_status td_store_write(td_store *s, json_t *const *objs, size_t nobjs, const td_object_id *dels,
                         size_t ndels, td_err *err)
{
    return write_rows(s, objs, nobjs, dels, ndels, NULL, err);
}

td_status td_store_write_fenced(td_store *s, json_t *const *objs, size_t nobjs, size_t npass,
                                const td_object_id *dels, size_t ndels, int64_t term,
                                td_err *err)
{
    td__store_fence fence = {term, 0, nobjs};
    return write_rows(s, objs, nobjs + npass, dels, ndels, &fence, err);
}

td_status td_store_changed(td_store *s, bool *changed, td_err *err)
{
    *changed = false;
    if (!s->ops->generation)
        return TD_OK;
    int64_t gen;
    td_status st = s->ops->generation(s->be, &gen, err);
    if (st == TD_OK)
        *changed = gen != s->seen;
    return st;
}

int td_store_watch_fd(td_store *s)
{
    return s->ops->watch_fd ? s->ops->watch_fd(s->be) : -1;
}

td_status td_store_watch_drain(td_store *s, bool *notified, td_err *err)
{
    int n = 0;
    td_status st = s->ops->watch_drain ? s->ops->watch_drain(s->be, &n, err) : TD_OK;
    *notified = n != 0;
    return st;
}

void td_store_watch_reset(td_store *s)
{
    if (s->ops->watch_reset)
        s->ops->watch_reset(s->be);
}
