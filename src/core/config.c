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
    json_t *kref;    /* the JSON string holding key */
    json_t *obj;
} entry;

/* Objects live in chunks of consecutive keys, shared by every snapshot
 * (and builder) that holds them, and copied only by a builder that changes
 * one: a commit of a few objects over n stored copies O(log n) chunks'
 * worth of pointers (the directory) and the chunks it touches, never the
 * n objects. A chunk holds one reference on each key and object. */
#define CHUNK_MAX 256

typedef struct {
    atomic_int refs;
    size_t n;
    entry items[CHUNK_MAX];   /* in key order */
    json_t *objs[CHUNK_MAX];  /* items' objects, for borrowed runs */
} chunk;

struct td_config_builder {
    chunk **ch; /* in key order, none empty; one reference each */
    size_t nch, cap;
    size_t n;
    /* an object of another kind than Workload added or deleted (or no
     * base): the cross-checks, which read no Workload, run again */
    bool others_changed;
};

struct td_config {
    atomic_int refs;
    chunk **ch;    /* one reference each */
    size_t *first; /* index of each chunk's first object; first[nch] == n */
    size_t nch, n;
    _Atomic(json_t **) flat; /* every object in order, made by the first reader that needs it */
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

/* ---- chunks ------------------------------------------------------------ */

static chunk *chunk_ref(chunk *k)
{
    atomic_fetch_add_explicit(&k->refs, 1, memory_order_relaxed);
    return k;
}

static void chunk_unref(chunk *k)
{
    if (!k || atomic_fetch_sub_explicit(&k->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < k->n; i++) {
        json_decref(k->items[i].kref);
        json_decref(k->items[i].obj);
    }
    free(k);
}

/* A new chunk holding references to k's entries [from, to). */
static chunk *chunk_copy(const chunk *k, size_t from, size_t to)
{
    chunk *c = malloc(sizeof *c);
    if (!c)
        return NULL;
    atomic_init(&c->refs, 1);
    c->n = to - from;
    for (size_t i = 0; i < c->n; i++) {
        c->items[i] = k->items[from + i];
        c->objs[i] = c->items[i].obj;
        json_incref(c->items[i].kref);
        json_incref(c->items[i].obj);
    }
    return c;
}

/* The first of k's entries whose key is not below key. */
static size_t chunk_lower_bound(const chunk *k, const char *key)
{
    size_t lo = 0, hi = k->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(k->items[mid].key, key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The chunk of ch[0, nch) where key is or would go: the last whose first
 * key is not above key (0 when key is below them all). */
static size_t chunk_for(chunk *const *ch, size_t nch, const char *key)
{
    size_t lo = 1, hi = nch; /* chunk 0 takes what is below them all */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(ch[mid]->items[0].key, key) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

/* ---- builder ----------------------------------------------------------- */

td_status td_config_builder_create(const td_config *base, td_config_builder **out, td_err *err)
{
    td_config_builder *b = calloc(1, sizeof *b);
    if (!b)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    b->others_changed = !base;
    if (base && base->nch) {
        b->ch = malloc(base->nch * sizeof *b->ch);
        if (!b->ch) {
            free(b);
            return td_err_set(err, TD_ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < base->nch; i++)
            b->ch[i] = chunk_ref(base->ch[i]);
        b->nch = b->cap = base->nch;
        b->n = base->n;
    }
    *out = b;
    return TD_OK;
}

void td_config_builder_destroy(td_config_builder *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->nch; i++)
        chunk_unref(b->ch[i]);
    free(b->ch);
    free(b);
}

/* Makes b's chunk i its own (copied if a snapshot shares it): 0, or -1 out
 * of memory (then nothing changed). */
static int chunk_own(td_config_builder *b, size_t i)
{
    if (atomic_load_explicit(&b->ch[i]->refs, memory_order_acquire) == 1)
        return 0;
    chunk *c = chunk_copy(b->ch[i], 0, b->ch[i]->n);
    if (!c)
        return -1;
    chunk_unref(b->ch[i]);
    b->ch[i] = c;
    return 0;
}

/* Room for one more chunk in b's directory: 0, or -1 out of memory. */
static int dir_reserve(td_config_builder *b)
{
    if (b->nch < b->cap)
        return 0;
    size_t ncap = b->cap ? b->cap * 2 : 8;
    chunk **nc = realloc(b->ch, ncap * sizeof *nc);
    if (!nc)
        return -1;
    b->ch = nc;
    b->cap = ncap;
    return 0;
}

/* Puts e (its references taken over) at its place in b: a new key goes
 * into its chunk, split in two when full. 0, or -1 out of memory (then
 * nothing changed and e is still the caller's). */
static int builder_put(td_config_builder *b, entry e)
{
    if (dir_reserve(b) != 0)
        return -1;
    if (b->nch == 0) {
        chunk *c = malloc(sizeof *c);
        if (!c)
            return -1;
        atomic_init(&c->refs, 1);
        c->n = 1;
        c->items[0] = e;
        c->objs[0] = e.obj;
        b->ch[b->nch++] = c;
        b->n++;
        return 0;
    }
    size_t ci = chunk_for(b->ch, b->nch, e.key);
    if (chunk_own(b, ci) != 0)
        return -1;
    chunk *k = b->ch[ci];
    size_t at = chunk_lower_bound(k, e.key);
    if (at < k->n && strcmp(k->items[at].key, e.key) == 0) {
        json_decref(e.kref);
        json_decref(k->items[at].obj);
        k->items[at].obj = k->objs[at] = e.obj;
        return 0;
    }
    if (k->n == CHUNK_MAX) {
        /* split: the upper half into a new chunk after k */
        chunk *hi = chunk_copy(k, CHUNK_MAX / 2, CHUNK_MAX);
        if (!hi)
            return -1;
        for (size_t i = CHUNK_MAX / 2; i < CHUNK_MAX; i++) {
            json_decref(k->items[i].kref);
            json_decref(k->items[i].obj);
        }
        k->n = CHUNK_MAX / 2;
        memmove(&b->ch[ci + 2], &b->ch[ci + 1], (b->nch - ci - 1) * sizeof *b->ch);
        b->ch[ci + 1] = hi;
        b->nch++;
        if (at > k->n) {
            k = hi;
            at -= CHUNK_MAX / 2;
        }
    }
    memmove(&k->items[at + 1], &k->items[at], (k->n - at) * sizeof *k->items);
    memmove(&k->objs[at + 1], &k->objs[at], (k->n - at) * sizeof *k->objs);
    k->items[at] = e;
    k->objs[at] = e.obj;
    k->n++;
    b->n++;
    return 0;
}

/* The key as a shared JSON string (make_key's buffer freed). */
static json_t *key_ref(char *key)
{
    json_t *k = key ? json_string_nocheck(key) : NULL;
    free(key);
    return k;
}

/* Adds obj (validated) as copy (a new reference, taken over). */
static td_status builder_add_as(td_config_builder *b, const json_t *obj, json_t *copy,
                                td_err *err)
{
    td_object_id id = td_object_identity(obj);
    json_t *kref = copy ? key_ref(make_key(id.kind, id.namespace_, id.name)) : NULL;
    if (!kref || builder_put(b, (entry){json_string_value(kref), kref, copy}) != 0) {
        json_decref(kref);
        json_decref(copy);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    if (strcmp(id.kind, "Workload") != 0)
        b->others_changed = true;
    return TD_OK;
}

td_status td_config_builder_add(td_config_builder *b, json_t *obj, const td_manifest *src,
                                td_err *err)
{
    /* validated first: validation may fill in a default name */
    TD_TRY(validate_object(obj, src, err));
    return builder_add_as(b, obj, json_deep_copy(obj), err);
}

td_status td_config_builder_put(td_config_builder *b, json_t *obj, const td_manifest *src,
                                td_err *err)
{
    TD_TRY(validate_object(obj, src, err));
    return builder_add_as(b, obj, json_incref(obj), err);
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
    size_t ci = b->nch ? chunk_for(b->ch, b->nch, key) : 0;
    size_t at = b->nch ? chunk_lower_bound(b->ch[ci], key) : 0;
    bool found = b->nch && at < b->ch[ci]->n && strcmp(b->ch[ci]->items[at].key, key) == 0;
    free(key);
    if (!found)
        return td_err_set(err, TD_ENOTFOUND, "%s %s%s%s not found", k, ns, *ns ? "/" : "", name);
    if (chunk_own(b, ci) != 0)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    chunk *c = b->ch[ci];
    json_decref(c->items[at].kref);
    json_decref(c->items[at].obj);
    memmove(&c->items[at], &c->items[at + 1], (c->n - at - 1) * sizeof *c->items);
    memmove(&c->objs[at], &c->objs[at + 1], (c->n - at - 1) * sizeof *c->objs);
    c->n--;
    b->n--;
    if (c->n == 0) {
        chunk_unref(c);
        memmove(&b->ch[ci], &b->ch[ci + 1], (b->nch - ci - 1) * sizeof *b->ch);
        b->nch--;
    }
    if (strcmp(k, "Workload") != 0)
        b->others_changed = true;
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

static size_t lower_bound(const td_config *c, const char *prefix);
static json_t *const *flat_objs(const td_config *c);

/* The cross-checks over c's objects but its Workloads (no registered
 * cross-check reads one, kind.h: they are one run of the sorted keys,
 * skipped whatever their number). */
static td_status check_all_but_workloads(const td_config *c, td_err *err)
{
    size_t ws = lower_bound(c, "Workload\x1f"), we = lower_bound(c, "Workload\x20");
    json_t *const *all = flat_objs(c);
    json_t **rest = malloc((c->n - (we - ws) + 1) * sizeof *rest);
    if (!rest || (c->n && !all)) {
        free(rest);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    if (c->n) {
        memcpy(rest, all, ws * sizeof *rest);
        memcpy(rest + ws, all + we, (c->n - we) * sizeof *rest);
    }
    td_status st = cross_check(rest, c->n - (we - ws), err);
    free(rest);
    return st;
}

td_status td_config_builder_finish(td_config_builder *b, td_config **out, td_err *err)
{
    td_config *c = calloc(1, sizeof *c);
    if (!c)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    atomic_init(&c->refs, 1);
    atomic_init(&c->flat, NULL);
    for (int i = 0; i < TD_CONFIG_ATTACH_MAX; i++)
        atomic_init(&c->attach[i], NULL);
    c->ch = malloc((b->nch ? b->nch : 1) * sizeof *c->ch);
    c->first = malloc((b->nch + 1) * sizeof *c->first);
    if (!c->ch || !c->first) {
        free(c->ch);
        free(c->first);
        free(c);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < b->nch; i++) {
        c->ch[i] = chunk_ref(b->ch[i]);
        c->first[i] = c->n;
        c->n += b->ch[i]->n;
    }
    c->nch = b->nch;
    c->first[c->nch] = c->n;
    /* A builder over a snapshot (already checked) that changed only
     * Workloads changed nothing a cross-check reads. */
    td_status st = b->others_changed ? check_all_but_workloads(c, err) : TD_OK;
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
    for (size_t i = 0; i < c->nch; i++)
        chunk_unref(c->ch[i]);
    free(c->ch);
    free(c->first);
    free(atomic_load_explicit(&c->flat, memory_order_acquire));
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

/* The chunk holding object index i of c (i < c->n). */
static size_t chunk_of_index(const td_config *c, size_t i)
{
    size_t lo = 0, hi = c->nch;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->first[mid] <= i)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* First index whose key is not below prefix (keys are sorted). */
static size_t lower_bound(const td_config *c, const char *prefix)
{
    if (!c->nch)
        return 0;
    size_t ci = chunk_for(c->ch, c->nch, prefix);
    return c->first[ci] + chunk_lower_bound(c->ch[ci], prefix);
}

/* Every object of c in key order, one array made by the first reader
 * that needs a run across chunks (NULL out of memory, or when c is
 * empty). Thread-safe: racing readers both build, one array is kept. */
static json_t *const *flat_objs(const td_config *c)
{
    _Atomic(json_t **) *slot = (_Atomic(json_t **) *)&c->flat;
    json_t **f = atomic_load_explicit(slot, memory_order_acquire);
    if (f || !c->n)
        return f;
    json_t **mine = malloc(c->n * sizeof *mine);
    if (!mine)
        return NULL;
    for (size_t i = 0; i < c->nch; i++)
        memcpy(mine + c->first[i], c->ch[i]->objs, c->ch[i]->n * sizeof *mine);
    json_t **expected = NULL;
    if (atomic_compare_exchange_strong_explicit(slot, &expected, mine, memory_order_acq_rel,
                                                memory_order_acquire))
        return mine;
    free(mine);
    return expected;
}

/* Objects [i, j) of c as one borrowed array: inside one chunk, the
 * chunk's own; across chunks, the flat array (NULL out of memory). */
static json_t *const *run_of(const td_config *c, size_t i, size_t j)
{
    size_t ci = chunk_of_index(c, i);
    if (j <= c->first[ci + 1])
        return &c->ch[ci]->objs[i - c->first[ci]];
    json_t *const *f = flat_objs(c);
    return f ? f + i : NULL;
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
    if (!c || !kind || !c->n)
        return 0;
    char prefix[512];
    size_t plen = 0;
    key_append(prefix, sizeof prefix, &plen, kind, 1);
    if (namespace_ && td_kind_namespaced(kind))
        key_append(prefix, sizeof prefix, &plen, namespace_, 1);
    size_t i = lower_bound(c, prefix);
    /* the keys with the prefix end before the prefix whose last separator
     * is the next byte up (names hold no byte below it) */
    prefix[plen - 1] = '\x20';
    size_t j = lower_bound(c, prefix);
    if (j <= i)
        return 0;
    *out = run_of(c, i, j);
    return *out ? j - i : 0;
}

size_t td_config_all(const td_config *c, json_t *const **out)
{
    *out = c && c->n ? flat_objs(c) : NULL;
    return *out ? c->n : 0;
}

json_t *td_config_get(const td_config *c, const char *kind, const char *namespace_,
                      const char *name)
{
    if (!c || !kind || !name || !c->nch)
        return NULL;
    char key[1024];
    size_t klen = 0;
    key_append(key, sizeof key, &klen, kind, 1);
    key_append(key, sizeof key, &klen, td_kind_namespaced(kind) && namespace_ ? namespace_ : "", 1);
    key_append(key, sizeof key, &klen, name, 0);
    const chunk *k = c->ch[chunk_for(c->ch, c->nch, key)];
    size_t i = chunk_lower_bound(k, key);
    return i < k->n && strcmp(k->items[i].key, key) == 0 ? k->items[i].obj : NULL;
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
