/* config.c - validated, immutable snapshots of tenantd's objects, and the
 * kind registry (kind.h) that says which kinds they hold and who validates
 * each. Objects are kept as JSON (they are Kubernetes objects, and are
 * served back as such), sorted by (kind, namespace, name) so that a
 * namespace's objects of one kind are one contiguous run. Core checks the
 * envelope; the kind's owner checks the rest. A failed add leaves the
 * builder as it was. */
#include "core/config.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/kind.h"
#include "core/validate.h"

typedef struct {
    const char *key; /* "Kind\x1fnamespace\x1fname": sorts as (kind, ns, name) */
    json_t *kref;    /* the JSON string holding key: shared, not copied, by snapshots */
    json_t *obj;
} entry;

struct td_config_builder {
    entry *items;
    size_t n, cap;
    size_t nsorted; /* items[0, nsorted) are in key order (the base's) */
};

struct td_config {
    atomic_int refs;
    entry *items;  /* sorted by key */
    json_t **objs; /* same order, for borrowed runs */
    size_t n;
    /* Derived values built lazily by readers: the snapshot is immutable, so
     * they never go stale; freed with it. */
    _Atomic(td_config_attachment *) attach[TD_CONFIG_ATTACH_MAX];
};

/* ---- the kind registry ------------------------------------------------- */

/* Written under reg_lock, read without it: an entry is stored before the
 * count that covers it is published (release), and never changes after. */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static const td_kind_def *reg[TD_KINDS_MAX];
static atomic_size_t nreg;

static int in_csv(const char *csv, const char *word)
{
    size_t n = strlen(word);
    const char *p = csv;
    while (p && *p) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == n && strncmp(p, word, n) == 0)
            return 1;
        p = c ? c + 1 : NULL;
    }
    return 0;
}

/* true if a user writing word (any case) means d's kind. */
static bool spelled_by(const td_kind_def *d, const char *word)
{
    char low[64];
    size_t n = strlen(word);
    if (n >= sizeof low)
        return false;
    for (size_t i = 0; i <= n; i++)
        low[i] = (char)tolower((unsigned char)word[i]);
    return strcasecmp(d->kind, word) == 0 || in_csv(d->aliases, low);
}

/* true if a word of a (its name or an alias) means b's kind. */
static bool words_clash(const td_kind_def *a, const td_kind_def *b)
{
    if (spelled_by(b, a->kind))
        return true;
    const char *p = a->aliases;
    while (p && *p) {
        char w[64];
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        snprintf(w, sizeof w, "%.*s", (int)len, p);
        if (spelled_by(b, w))
            return true;
        p = c ? c + 1 : NULL;
    }
    return false;
}

static bool is_registered(const td_kind_def *d, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (reg[i] == d)
            return true;
    return false;
}

/* The first clash of new (defs[k]) with a registered kind or an earlier
 * new one, set in err; TD_OK if none. */
static td_status check_clash(const td_kind_def *defs, size_t k, size_t have, td_err *err)
{
    const td_kind_def *d = &defs[k];
    for (size_t i = 0; i < have + k; i++) {
        const td_kind_def *o = i < have ? reg[i] : &defs[i - have];
        if (words_clash(d, o) || words_clash(o, d))
            return td_err_set(err, TD_EEXIST,
                              "kind %s: its name or an alias is already taken by kind %s", d->kind,
                              o->kind);
    }
    return TD_OK;
}

td_status td_kind_register(const td_kind_def *defs, size_t n, td_err *err)
{
    pthread_mutex_lock(&reg_lock);
    size_t have = atomic_load_explicit(&nreg, memory_order_relaxed), add = 0;
    td_status st = TD_OK;
    const td_kind_def *fresh[TD_KINDS_MAX];
    for (size_t k = 0; k < n && st == TD_OK; k++) {
        if (is_registered(&defs[k], have))
            continue;
        if (!defs[k].kind || !defs[k].api_versions)
            st = td_err_set(err, TD_EINVAL, "a kind definition needs a name and apiVersions");
        else if (have + add >= TD_KINDS_MAX)
            st = td_err_set(err, TD_ENOMEM, "kind %s: more than %d kinds", defs[k].kind,
                            TD_KINDS_MAX);
        else
            st = check_clash(defs, k, have, err);
        if (st == TD_OK)
            fresh[add++] = &defs[k];
    }
    if (st == TD_OK) {
        for (size_t i = 0; i < add; i++)
            reg[have + i] = fresh[i];
        atomic_store_explicit(&nreg, have + add, memory_order_release);
    }
    pthread_mutex_unlock(&reg_lock);
    return st;
}

const td_kind_def *td_kind_at(size_t i)
{
    return i < atomic_load_explicit(&nreg, memory_order_acquire) ? reg[i] : NULL;
}

const td_kind_def *td_kind_find(const char *kind)
{
    const td_kind_def *d;
    for (size_t i = 0; kind && (d = td_kind_at(i)); i++)
        if (strcmp(d->kind, kind) == 0)
            return d;
    return NULL;
}

const char *td_kind_canonical(const char *user_kind)
{
    if (!user_kind || strlen(user_kind) >= 64)
        return NULL;
    const td_kind_def *d;
    for (size_t i = 0; (d = td_kind_at(i)); i++)
        if (spelled_by(d, user_kind))
            return d->kind;
    return NULL;
}

bool td_kind_is(const json_t *obj, const char *kind)
{
    const char *k = td_json_str(obj, "kind");
    return k && strcmp(k, kind) == 0;
}

json_t *td_kind_objs_find(json_t *const *objs, size_t n, const char *kind, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (td_kind_is(objs[i], kind) && strcmp(td_json_str(objs[i], "metadata.name"), name) == 0)
            return objs[i];
    return NULL;
}

bool td_kind_namespaced(const char *kind)
{
    const td_kind_def *k = td_kind_find(kind);
    return k && k->namespaced;
}

td_object_id td_object_identity(const json_t *obj)
{
    td_object_id id;
    id.kind = td_json_str(obj, "kind");
    id.namespace_ = td_json_str(obj, "metadata.namespace");
    id.name = td_json_str(obj, "metadata.name");
    if (!id.kind)
        id.kind = "";
    if (!id.namespace_ || !td_kind_namespaced(id.kind))
        id.namespace_ = "";
    if (!id.name)
        id.name = "";
    return id;
}

static char *make_key(const char *kind, const char *ns, const char *name)
{
    size_t n = strlen(kind) + strlen(ns) + strlen(name) + 3;
    char *k = malloc(n);
    if (k)
        snprintf(k, n, "%s\x1f%s\x1f%s", kind, ns, name);
    return k;
}

/* "unknown kind" with what is known: the registered kinds, in order. */
static td_status unknown_kind(td_vctx *v, const json_t *kindj, const char *kind)
{
    char known[1024] = "";
    const td_kind_def *d;
    for (size_t i = 0; (d = td_kind_at(i)); i++) {
        strncat(known, i ? ", " : "", sizeof known - strlen(known) - 1);
        strncat(known, d->kind, sizeof known - strlen(known) - 1);
    }
    if (!*known)
        return td_vfail(v, kindj, "kind",
                        "unknown kind \"%s\"; no kinds are registered (the program must call "
                        "td_kinds_register_builtin first)",
                        kind);
    return td_vfail(v, kindj, "kind", "unknown kind \"%s\"; tenantd knows %s", kind, known);
}

/* Checks the envelope every object shares, then the kind's own rules. */
static td_status validate_object(json_t *obj, const td_manifest *src, td_err *err)
{
    td_vctx v = {.src = src, .obj = obj, .kind = NULL, .who = "object", .err = err};
    if (!json_is_object(obj))
        return td_manifest_err(src, obj, err, TD_EINVAL, "an object must be a mapping");
    json_t *kindj = json_object_get(obj, "kind");
    const char *kind = json_string_value(kindj);
    if (!kind)
        return td_vfail(&v, obj, "kind", "required (e.g. ResourceQuota, Tenant)");
    const td_kind_def *k = td_kind_find(kind);
    if (!k)
        return unknown_kind(&v, kindj, kind);
    v.kind = k->kind;
    if (k->default_name && !json_object_get(obj, "metadata"))
        json_object_set_new(obj, "metadata", json_pack("{s:s}", "name", k->default_name));
    const char *name = td_json_str(obj, "metadata.name");
    const char *ns = td_json_str(obj, "metadata.namespace");
    snprintf(v.who, sizeof v.who, "%s %s%s%s", k->kind, k->namespaced && ns ? ns : "",
             k->namespaced && ns ? "/" : "", name ? name : "(unnamed)");
    json_t *av = json_object_get(obj, "apiVersion");
    if (!json_is_string(av))
        return td_vfail(&v, obj, "apiVersion", "required (%s)", k->api_versions);
    if (!in_csv(k->api_versions, json_string_value(av)))
        return td_vfail(&v, av, "apiVersion", "\"%s\" is not served for %s; use %s",
                        json_string_value(av), k->kind, k->api_versions);
    json_t *meta = json_object_get(obj, "metadata");
    if (!json_is_object(meta))
        return td_vfail(&v, obj, "metadata", "required: a mapping with a name");
    if (!name)
        return td_vfail(&v, meta, "metadata.name", "required");
    if (!td_dns_subdomain(name))
        return td_vfail(&v, json_object_get(meta, "name"), "metadata.name",
                        "\"%s\" is not a valid name (lowercase letters, digits, '-' and '.')",
                        name);
    if (k->namespaced) {
        if (!ns)
            return td_vfail(&v, meta, "metadata.namespace",
                            "required for a %s (tenantd has no current namespace)", k->kind);
        if (!td_dns_label(ns))
            return td_vfail(&v, json_object_get(meta, "namespace"), "metadata.namespace",
                            "\"%s\" is not a valid namespace name", ns);
    }
    TD_TRY(td_v_string_map(&v, json_object_get(meta, "labels"), "metadata.labels"));
    TD_TRY(td_v_string_map(&v, json_object_get(meta, "annotations"), "metadata.annotations"));
    return k->validate ? k->validate(&v) : TD_OK;
}

/* ---- builder ----------------------------------------------------------- */

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->key, ((const entry *)b)->key);
}

td_status td_config_builder_create(const td_config *base, td_config_builder **out, td_err *err)
{
    td_config_builder *b = calloc(1, sizeof *b);
    if (!b)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    if (base && base->n) {
        b->items = calloc(base->n, sizeof *b->items);
        if (!b->items) {
            free(b);
            return td_err_set(err, TD_ENOMEM, "out of memory");
        }
        b->cap = base->n;
        for (size_t i = 0; i < base->n; i++) {
            b->items[i] = base->items[i];
            json_incref(b->items[i].kref);
            json_incref(b->items[i].obj);
        }
        b->n = b->nsorted = base->n;
    }
    *out = b;
    return TD_OK;
}

void td_config_builder_destroy(td_config_builder *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->n; i++) {
        json_decref(b->items[i].kref);
        json_decref(b->items[i].obj);
    }
    free(b->items);
    free(b);
}

/* The first of items[0, n) (in key order) whose key is not below key. */
static size_t entry_lower_bound(const entry *items, size_t n, const char *key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(items[mid].key, key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Sorts what was added into the sorted part once it outgrows it (a load
 * that adds every object): adds stay O(log n) amortized. 0, or -1 out of
 * memory (then nothing changed). */
static int builder_compact(td_config_builder *b)
{
    size_t m = b->n - b->nsorted;
    if (m <= 64 || m <= b->nsorted)
        return 0;
    entry *tmp = malloc(b->n * sizeof *tmp);
    if (!tmp)
        return -1;
    qsort(b->items + b->nsorted, m, sizeof *b->items, entry_cmp);
    size_t i = 0, j = b->nsorted, k = 0;
    while (i < b->nsorted && j < b->n)
        tmp[k++] = strcmp(b->items[i].key, b->items[j].key) <= 0 ? b->items[i++] : b->items[j++];
    while (i < b->nsorted)
        tmp[k++] = b->items[i++];
    while (j < b->n)
        tmp[k++] = b->items[j++];
    memcpy(b->items, tmp, b->n * sizeof *tmp);
    free(tmp);
    b->nsorted = b->n;
    return 0;
}

/* Binary search over the base's part, a scan of what was added since:
 * a commit of a few objects over a large snapshot stays cheap. */
static size_t builder_find(const td_config_builder *b, const char *key)
{
    size_t i = entry_lower_bound(b->items, b->nsorted, key);
    if (i < b->nsorted && strcmp(b->items[i].key, key) == 0)
        return i;
    for (i = b->nsorted; i < b->n; i++)
        if (strcmp(b->items[i].key, key) == 0)
            return i;
    return (size_t)-1;
}

/* The key as a shared JSON string (make_key's buffer freed). */
static json_t *key_ref(char *key)
{
    json_t *k = key ? json_string_nocheck(key) : NULL;
    free(key);
    return k;
}

td_status td_config_builder_add(td_config_builder *b, json_t *obj, const td_manifest *src,
                                td_err *err)
{
    TD_TRY(validate_object(obj, src, err));
    td_object_id id = td_object_identity(obj);
    json_t *kref = key_ref(make_key(id.kind, id.namespace_, id.name));
    json_t *copy = json_deep_copy(obj);
    if (!kref || !copy) {
        json_decref(kref);
        json_decref(copy);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    size_t at = builder_compact(b) == 0 ? builder_find(b, json_string_value(kref)) : (size_t)-1;
    if (at == (size_t)-1 && b->n - b->nsorted > 64 && b->n - b->nsorted > b->nsorted) {
        json_decref(kref); /* no memory to keep the search fast */
        json_decref(copy);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    if (at != (size_t)-1) {
        json_decref(kref);
        json_decref(b->items[at].obj);
        b->items[at].obj = copy;
        return TD_OK;
    }
    if (b->n == b->cap) {
        size_t ncap = b->cap ? b->cap * 2 : 16;
        entry *ni = realloc(b->items, ncap * sizeof *ni);
        if (!ni) {
            json_decref(kref);
            json_decref(copy);
            return td_err_set(err, TD_ENOMEM, "out of memory");
        }
        b->items = ni;
        b->cap = ncap;
    }
    b->items[b->n].key = json_string_value(kref);
    b->items[b->n].kref = kref;
    b->items[b->n].obj = copy;
    b->n++;
    return TD_OK;
}

td_status td_config_builder_add_manifest(td_config_builder *b, const td_manifest *m, td_err *err)
{
    for (size_t i = 0; i < td_manifest_count(m); i++)
        TD_TRY(td_config_builder_add(b, td_manifest_doc(m, i), m, err));
    return TD_OK;
}

td_status td_config_builder_delete(td_config_builder *b, const char *kind, const char *namespace_,
                                   const char *name, td_err *err)
{
    const char *k = td_kind_canonical(kind);
    if (!k)
        return td_err_set(err, TD_EINVAL, "unknown kind \"%s\"", kind);
    const char *ns = td_kind_namespaced(k) ? (namespace_ ? namespace_ : "") : "";
    if (td_kind_namespaced(k) && !*ns)
        return td_err_set(err, TD_EINVAL, "%s is namespaced: give a namespace", k);
    char *key = make_key(k, ns, name);
    if (!key)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    size_t at = builder_find(b, key);
    free(key);
    if (at == (size_t)-1)
        return td_err_set(err, TD_ENOTFOUND, "%s %s%s%s not found", k, ns, *ns ? "/" : "", name);
    json_decref(b->items[at].kref);
    json_decref(b->items[at].obj);
    memmove(&b->items[at], &b->items[at + 1], (b->n - at - 1) * sizeof *b->items);
    b->n--;
    if (at < b->nsorted)
        b->nsorted--;
    return TD_OK;
}

/* Rules that span objects: the registered kinds' cross-checks, in rank
 * order (ties in registration order). */
static td_status cross_check(json_t *const *objs, size_t n, td_err *err)
{
    const td_kind_def *run[TD_KINDS_MAX];
    size_t nrun = 0;
    const td_kind_def *d;
    for (size_t i = 0; (d = td_kind_at(i)); i++) {
        if (!d->cross_check)
            continue;
        size_t at = nrun++;
        while (at > 0 && run[at - 1]->check_rank > d->check_rank) {
            run[at] = run[at - 1];
            at--;
        }
        run[at] = d;
    }
    for (size_t i = 0; i < nrun; i++)
        TD_TRY(run[i]->cross_check(objs, n, err));
    return TD_OK;
}

td_status td_config_builder_finish(td_config_builder *b, td_config **out, td_err *err)
{
    td_config *c = calloc(1, sizeof *c);
    if (!c)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    atomic_init(&c->refs, 1);
    for (int i = 0; i < TD_CONFIG_ATTACH_MAX; i++)
        atomic_init(&c->attach[i], NULL);
    if (b->n) {
        c->items = calloc(b->n, sizeof *c->items);
        c->objs = calloc(b->n, sizeof *c->objs);
        if (!c->items || !c->objs) {
            free(c->items);
            free(c->objs);
            free(c);
            return td_err_set(err, TD_ENOMEM, "out of memory");
        }
        /* what was added, sorted, merged into the base's sorted part */
        qsort(b->items + b->nsorted, b->n - b->nsorted, sizeof *b->items, entry_cmp);
        size_t i = 0, j = b->nsorted;
        while (i < b->nsorted || j < b->n) {
            size_t run = b->nsorted - i;
            if (j < b->n)
                run = entry_lower_bound(b->items + i, b->nsorted - i, b->items[j].key);
            memcpy(c->items + c->n, b->items + i, run * sizeof *c->items);
            c->n += run;
            i += run;
            if (j < b->n)
                c->items[c->n++] = b->items[j++];
        }
        for (size_t k = 0; k < c->n; k++) {
            json_incref(c->items[k].kref);
            json_incref(c->items[k].obj);
            c->objs[k] = c->items[k].obj;
        }
    }
    /* No registered cross-check reads a Workload (kind.h): the checks run
     * over the other objects, whatever the number of Workloads stored. The
     * Workloads are one run of the sorted snapshot. */
    size_t ws = entry_lower_bound(c->items, c->n, "Workload\x1f");
    size_t we = entry_lower_bound(c->items, c->n, "Workload\x20");
    json_t **rest = malloc((c->n - (we - ws) + 1) * sizeof *rest);
    if (!rest) {
        td_config_unref(c);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    if (c->n) {
        memcpy(rest, c->objs, ws * sizeof *rest);
        memcpy(rest + ws, c->objs + we, (c->n - we) * sizeof *rest);
    }
    td_status st = cross_check(rest, c->n - (we - ws), err);
    free(rest);
    if (st != TD_OK) {
        td_config_unref(c);
        return st;
    }
    *out = c;
    return TD_OK;
}

td_config *td_config_ref(td_config *c)
{
    if (c)
        atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    return c;
}

void td_config_unref(td_config *c)
{
    if (!c || atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < c->n; i++) {
        json_decref(c->items[i].kref);
        json_decref(c->items[i].obj);
    }
    free(c->items);
    free(c->objs);
    for (int i = 0; i < TD_CONFIG_ATTACH_MAX; i++) {
        td_config_attachment *a = atomic_load_explicit(&c->attach[i], memory_order_acquire);
        if (a)
            a->destroy(a);
    }
    free(c);
}

td_config_attachment *td_config_attachment_get(const td_config *c, td_config_attach_slot slot,
                                               td_config_attachment *(*build)(const td_config *c))
{
    if (!c || slot < 0 || slot >= TD_CONFIG_ATTACH_MAX)
        return NULL;
    /* The slot is the one mutable field of a snapshot; it only goes from
     * NULL to a finished value, once. */
    _Atomic(td_config_attachment *) *slotp = (_Atomic(td_config_attachment *) *)&c->attach[slot];
    td_config_attachment *a = atomic_load_explicit(slotp, memory_order_acquire);
    if (a)
        return a;
    return td_config_attachment_offer(c, slot, build(c));
}

td_config_attachment *td_config_attachment_offer(const td_config *c, td_config_attach_slot slot,
                                                 td_config_attachment *mine)
{
    if (!mine)
        return NULL;
    if (!c || slot < 0 || slot >= TD_CONFIG_ATTACH_MAX) {
        mine->destroy(mine);
        return NULL;
    }
    _Atomic(td_config_attachment *) *slotp = (_Atomic(td_config_attachment *) *)&c->attach[slot];
    td_config_attachment *expected = NULL;
    if (atomic_compare_exchange_strong_explicit(slotp, &expected, mine, memory_order_acq_rel,
                                                memory_order_acquire))
        return mine;
    mine->destroy(mine);
    return expected;
}

td_status td_config_empty(td_config **out, td_err *err)
{
    td_config_builder *b = NULL;
    TD_TRY(td_config_builder_create(NULL, &b, err));
    td_status st = td_config_builder_finish(b, out, err);
    td_config_builder_destroy(b);
    return st;
}

td_status td_config_load_files(const char *const *paths, size_t n, td_config **out, td_err *err)
{
    td_config_builder *b = NULL;
    TD_TRY(td_config_builder_create(NULL, &b, err));
    td_status st = TD_OK;
    for (size_t i = 0; i < n && st == TD_OK; i++) {
        td_manifest *m = NULL;
        st = td_manifest_load_file(paths[i], &m, err);
        if (st == TD_OK)
            st = td_config_builder_add_manifest(b, m, err);
        td_manifest_destroy(m);
    }
    if (st == TD_OK)
        st = td_config_builder_finish(b, out, err);
    td_config_builder_destroy(b);
    return st;
}

td_status td_config_load_text(const char *name, const char *text, size_t len, td_config **out,
                              td_err *err)
{
    td_manifest *m = NULL;
    TD_TRY(td_manifest_parse(name, text, len, &m, err));
    td_config_builder *b = NULL;
    td_status st = td_config_builder_create(NULL, &b, err);
    if (st == TD_OK)
        st = td_config_builder_add_manifest(b, m, err);
    if (st == TD_OK)
        st = td_config_builder_finish(b, out, err);
    td_config_builder_destroy(b);
    td_manifest_destroy(m);
    return st;
}

/* First index whose key starts with prefix (keys are sorted). */
static size_t lower_bound(const td_config *c, const char *prefix)
{
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(c->items[mid].key, prefix) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Appends s (and the \x1f separator if sep) to key[*len], truncating as
 * snprintf would; key stays NUL-terminated. Lookups build keys per
 * admission review, so without snprintf. */
static void key_append(char *key, size_t cap, size_t *len, const char *s, int sep)
{
    size_t n = strlen(s);
    if (*len + n >= cap)
        n = cap - 1 - *len;
    memcpy(key + *len, s, n);
    *len += n;
    if (sep && *len + 1 < cap)
        key[(*len)++] = '\x1f';
    key[*len] = '\0';
}

size_t td_config_list(const td_config *c, const char *kind, const char *namespace_,
                      json_t *const **out)
{
    *out = NULL;
    if (!c || !kind)
        return 0;
    char prefix[512];
    size_t plen = 0;
    key_append(prefix, sizeof prefix, &plen, kind, 1);
    if (namespace_ && td_kind_namespaced(kind))
        key_append(prefix, sizeof prefix, &plen, namespace_, 1);
    size_t i = lower_bound(c, prefix), j = i;
    while (j < c->n && strncmp(c->items[j].key, prefix, plen) == 0)
        j++;
    if (j > i)
        *out = &c->objs[i];
    return j - i;
}

size_t td_config_all(const td_config *c, json_t *const **out)
{
    *out = c && c->n ? c->objs : NULL;
    return c ? c->n : 0;
}

json_t *td_config_get(const td_config *c, const char *kind, const char *namespace_,
                      const char *name)
{
    if (!c || !kind || !name)
        return NULL;
    char key[1024];
    size_t klen = 0;
    key_append(key, sizeof key, &klen, kind, 1);
    key_append(key, sizeof key, &klen, td_kind_namespaced(kind) && namespace_ ? namespace_ : "", 1);
    key_append(key, sizeof key, &klen, name, 0);
    size_t i = lower_bound(c, key);
    return i < c->n && strcmp(c->items[i].key, key) == 0 ? c->items[i].obj : NULL;
}

json_t *td_config_tenant_for_namespace(const td_config *c, const char *ns)
{
    json_t *const *tenants;
    size_t n = td_config_list(c, "Tenant", NULL, &tenants);
    for (size_t i = 0; ns && i < n; i++) {
        size_t k;
        json_t *x;
        json_array_foreach(td_json_path(tenants[i], "spec.namespaces"), k, x)
        {
            if (strcmp(json_string_value(x), ns) == 0)
                return tenants[i];
        }
    }
    return NULL;
}

json_t *td_config_admission_policy(const td_config *c)
{
    json_t *p = td_config_get(c, "AdmissionPolicy", NULL, "default");
    if (p)
        return p;
    json_t *const *all;
    return td_config_list(c, "AdmissionPolicy", NULL, &all) ? all[0] : NULL;
}
