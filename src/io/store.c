/* store.c - the object store's logic over its backends (store_sqlite.c,
 * store_pg.c): objects to JSON rows and back, validation on load, and the
 * generation this handle has seen, so a replica learns that another one
 * committed. */
#include "io/store.h"

#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonfast.h"
#include "io/store_internal.h"

/* One expectation of td_store_expect. */
typedef struct {
    char *kind, *namespace_, *name;
    char rv[TD_STORE_RV_LEN];
} expectation;

struct td_store {
    const td__store_backend *ops;
    void *be;
    /* the generation of what this handle serves: the one it loaded, or the
     * one its own commit made when that commit followed it directly */
    int64_t seen;
    expectation *expect; /* td_store_expect's, until td_store_expect_clear */
    size_t nexpect;
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
    td_store_expect_clear(s);
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

void td_store_resource_version(const json_t *obj, char rv[TD_STORE_RV_LEN])
{
    /* a shallow copy without the field: obj may be shared with readers */
    json_t *meta = json_object_get(obj, "metadata");
    json_t *copy = json_is_object(meta) && json_object_get(meta, "resourceVersion")
                       ? json_copy((json_t *)obj)
                       : NULL;
    json_t *mcopy = copy ? json_copy(meta) : NULL;
    if (mcopy) {
        json_object_del(mcopy, "resourceVersion");
        json_object_set_new(copy, "metadata", mcopy);
    }
    char *text = json_dumps(copy ? copy : obj, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(copy);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (!text || !EVP_Digest(text, strlen(text), md, &n, EVP_sha256(), NULL) || n < 8) {
        snprintf(rv, TD_STORE_RV_LEN, "0");
    } else {
        for (int i = 0; i < 8; i++)
            snprintf(rv + 2 * i, 3, "%02x", md[i]);
    }
    free(text);
}

td_status td__store_check_expect(const char *name, const td__store_row *row, const char *stored,
                                 td_err *err)
{
    char now[TD_STORE_RV_LEN] = "";
    json_t *obj = stored ? json_loads(stored, 0, NULL) : NULL;
    if (obj)
        td_store_resource_version(obj, now);
    json_decref(obj);
    if (!stored)
        return td_err_set(err, TD_EEXIST,
                          "%s: %s %s%s%s: resourceVersion \"%s\" names a version that is gone: "
                          "the object is not stored (deleted meanwhile?); nothing was applied",
                          name, row->kind, row->namespace_, *row->namespace_ ? "/" : "", row->name,
                          row->expect);
    if (strcmp(now, row->expect) != 0)
        return td_err_set(err, TD_EEXIST,
                          "%s: %s %s%s%s was changed by another apply: resourceVersion \"%s\" "
                          "is stale, the stored one is \"%s\"; nothing was applied (get it "
                          "again, then apply over that)",
                          name, row->kind, row->namespace_, *row->namespace_ ? "/" : "", row->name,
                          row->expect, now);
    return TD_OK;
}

td_status td_store_expect(td_store *s, td_object_id id, const char *rv, td_err *err)
{
    expectation *v = realloc(s->expect, (s->nexpect + 1) * sizeof *v);
    if (!v)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    s->expect = v;
    expectation *e = &v[s->nexpect];
    e->kind = strdup(id.kind ? id.kind : "");
    e->namespace_ = strdup(id.namespace_ ? id.namespace_ : "");
    e->name = strdup(id.name ? id.name : "");
    snprintf(e->rv, sizeof e->rv, "%s", rv);
    if (!e->kind || !e->namespace_ || !e->name) {
        free(e->kind);
        free(e->namespace_);
        free(e->name);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    s->nexpect++;
    return TD_OK;
}

void td_store_expect_clear(td_store *s)
{
    for (size_t i = 0; s && i < s->nexpect; i++) {
        free(s->expect[i].kind);
        free(s->expect[i].namespace_);
        free(s->expect[i].name);
    }
    if (s) {
        free(s->expect);
        s->expect = NULL;
        s->nexpect = 0;
    }
}

/* The version a write of id must find stored, or NULL. Only the first row
 * of a write for id (the client's object; a pass's record of it may follow
 * in the same commit) is checked: used marks those taken. */
static const char *expected(const td_store *s, td_object_id id, bool *used)
{
    for (size_t i = 0; i < s->nexpect; i++) {
        const expectation *e = &s->expect[i];
        if (!used[i] && strcmp(e->kind, id.kind) == 0 && strcmp(e->name, id.name) == 0 &&
            strcmp(e->namespace_, id.namespace_ ? id.namespace_ : "") == 0) {
            used[i] = true;
            return e->rv;
        }
    }
    return NULL;
}

/* Writes objs (and dels) through the backend, fenced when fence is not
 * NULL; keeps seen current when the commit lay right on top of it. */
static td_status write_rows(td_store *s, json_t *const *objs, size_t nobjs,
                            const td_object_id *dels, size_t ndels, td__store_fence *fence,
                            td_err *err)
{
    td__store_row *rows = calloc(nobjs ? nobjs : 1, sizeof *rows);
    bool *used = calloc(s->nexpect ? s->nexpect : 1, sizeof *used);
    if (!rows || !used) {
        free(rows);
        free(used);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
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
        /* the pass's own rows (fenced) never carry a client's expectation */
        const char *expect = fence && n >= fence->first_checked ? NULL : expected(s, id, used);
        rows[n] = (td__store_row){id.kind, id.namespace_, id.name, body, expect};
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
    free(used);
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
