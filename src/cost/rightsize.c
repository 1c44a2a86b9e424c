/* rightsize.c - quotas against measured use: time-weighted p50/p95 of what
 * each owner requested and really used, the quota it holds, a recommended
 * quota, GPU-hours that could have run interruptible, and routes nobody
 * called (scale-to-zero candidates). */
#include "chargeback_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/quantity.h"

#define NS_PER_MS 1000000LL
#define MS_PER_HOUR 3600000LL
#define GIB (1LL << 30)

typedef struct {
    int64_t t, delta;
} event;

typedef struct {
    int64_t level, dur;
} segment;

static int cmp_event(const void *a, const void *b)
{
    const event *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

static int cmp_segment(const void *a, const void *b)
{
    const segment *x = a, *y = b;
    return x->level < y->level ? -1 : x->level > y->level;
}

td_status td_pctl_time_weighted(const int64_t *starts, const int64_t *ends, const int64_t *values,
                                size_t n, int64_t from_ns, int64_t to_ns, int permille,
                                int64_t *out, td_err *err)
{
    if (to_ns <= from_ns)
        return td_err_set(err, TD_EINVAL, "percentile: empty or inverted period");
    if (permille < 0 || permille > 1000)
        return td_err_set(err, TD_EINVAL, "percentile: %d is not a permille", permille);
    event *ev = malloc((2 * n + 1) * sizeof *ev);
    segment *seg = malloc((2 * n + 2) * sizeof *seg);
    if (!ev || !seg) {
        free(ev);
        free(seg);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    size_t ne = 0, ns = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t s = starts[i] > from_ns ? starts[i] : from_ns;
        int64_t e = ends[i] < to_ns ? ends[i] : to_ns;
        if (e <= s || values[i] == 0)
            continue;
        ev[ne++] = (event){s, values[i]};
        ev[ne++] = (event){e, -values[i]};
    }
    qsort(ev, ne, sizeof *ev, cmp_event);
    int64_t level = 0, t = from_ns;
    for (size_t i = 0; i <= ne; i++) {
        int64_t next = i < ne ? ev[i].t : to_ns;
        if (next > t) {
            seg[ns++] = (segment){level, next - t};
            t = next;
        }
        if (i < ne)
            level += ev[i].delta;
    }
    qsort(seg, ns, sizeof *seg, cmp_segment);
    td_i128 total = (td_i128)(to_ns - from_ns), cum = 0;
    int64_t v = 0;
    for (size_t i = 0; i < ns; i++) {
        cum += seg[i].dur;
        v = seg[i].level;
        if (cum * 1000 >= total * permille)
            break;
    }
    free(ev);
    free(seg);
    *out = v;
    return TD_OK;
}

/* ---- per owner ---- */

typedef struct {
    char owner[TD_ITEM_MAX];
    int64_t *s, *e, *gpu, *used, *cpu, *mem;
    size_t n, cap;
    bool estimated;
    int64_t candidate_milli_hours;
    td_i128 saving_nano;
} series;

typedef struct {
    series *v;
    size_t n, cap;
    size_t *slots; /* open addressing by owner name: index + 1, 0 empty */
    size_t nslots; /* a power of two, at least twice n */
} series_set;

static size_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (size_t)h;
}

static int set_rehash(series_set *ss, size_t nslots)
{
    size_t *ns = calloc(nslots, sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; i < ss->n; i++) {
        size_t h = name_hash(ss->v[i].owner) & (nslots - 1);
        while (ns[h])
            h = (h + 1) & (nslots - 1);
        ns[h] = i + 1;
    }
    free(ss->slots);
    ss->slots = ns;
    ss->nslots = nslots;
    return 0;
}

static void set_free(series_set *ss)
{
    free(ss->slots);
    for (size_t i = 0; i < ss->n; i++) {
        free(ss->v[i].s);
        free(ss->v[i].e);
        free(ss->v[i].gpu);
        free(ss->v[i].used);
        free(ss->v[i].cpu);
        free(ss->v[i].mem);
    }
    free(ss->v);
}

static series *series_get(series_set *ss, const char *owner)
{
    size_t h = ss->nslots ? name_hash(owner) & (ss->nslots - 1) : 0;
    while (ss->nslots && ss->slots[h]) {
        if (strcmp(ss->v[ss->slots[h] - 1].owner, owner) == 0)
            return &ss->v[ss->slots[h] - 1];
        h = (h + 1) & (ss->nslots - 1);
    }
    if (2 * (ss->n + 1) > ss->nslots && set_rehash(ss, ss->nslots ? 2 * ss->nslots : 64) < 0)
        return NULL;
    if (ss->n == ss->cap) {
        size_t nc = ss->cap ? 2 * ss->cap : 16;
        series *nv = realloc(ss->v, nc * sizeof *nv);
        if (!nv)
            return NULL;
        ss->v = nv;
        ss->cap = nc;
    }
    series *x = &ss->v[ss->n];
    memset(x, 0, sizeof *x);
    snprintf(x->owner, sizeof x->owner, "%s", owner);
    h = name_hash(x->owner) & (ss->nslots - 1);
    while (ss->slots[h])
        h = (h + 1) & (ss->nslots - 1);
    ss->slots[h] = ++ss->n;
    return x;
}

static int series_push(series *x, const td_ledger_rec *r)
{
    if (x->n == x->cap) {
        size_t nc = x->cap ? 2 * x->cap : 16;
        int64_t **arrs[6] = {&x->s, &x->e, &x->gpu, &x->used, &x->cpu, &x->mem};
        for (int k = 0; k < 6; k++) {
            int64_t *na = realloc(*arrs[k], nc * sizeof *na);
            if (!na)
                return -1;
            *arrs[k] = na;
        }
        x->cap = nc;
    }
    x->s[x->n] = r->start_ns;
    x->e[x->n] = r->end_ns;
    x->gpu[x->n] = r->gpu_milli;
    x->used[x->n] = r->gpu_used_milli >= 0 ? r->gpu_used_milli : r->gpu_milli;
    if (r->gpu_used_milli < 0 && r->gpu_milli > 0)
        x->estimated = true;
    x->cpu[x->n] = r->cpu_milli;
    x->mem[x->n] = r->memory_bytes;
    x->n++;
    return 0;
}

static int in_strs(char **l, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(l[i], s) == 0)
            return 1;
    return 0;
}

static const char *label_key(td_chargeback_by by)
{
    return by == TD_BY_TEAM ? "team" : by == TD_BY_PROJECT ? "project" : "environment";
}

/* Does namespace ns belong to owner under by? */
static int ns_of_owner(const td_config *c, td_chargeback_by by, const char *owner, const char *ns)
{
    if (by == TD_BY_NAMESPACE)
        return strcmp(ns, owner) == 0;
    if (by == TD_BY_MODEL)
        return 0; /* a model owns no namespace */
    json_t *t = td_config_tenant_for_namespace(c, ns);
    if (by == TD_BY_TENANT)
        return t && strcmp(td_json_str(t, "metadata.name"), owner) == 0;
    json_t *nso = td_config_get(c, "Namespace", "", ns);
    const char *v = NULL;
    if (nso)
        v = json_string_value(json_object_get(td_json_path(nso, "metadata.labels"), label_key(by)));
    if (!v && t)
        v = json_string_value(json_object_get(td_json_path(t, "spec.labels"), label_key(by)));
    return v && strcmp(v, owner) == 0;
}

static int64_t hard_value(const json_t *hard, const char *k1, const char *k2, int milli)
{
    json_t *v = json_object_get(hard, k1);
    if (!v)
        v = json_object_get(hard, k2);
    if (!v)
        return -1;
    char buf[64];
    const char *s = json_string_value(v);
    if (!s && json_is_integer(v)) {
        snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        s = buf;
    }
    td_quantity q;
    if (!s || td_quantity_parse(s, &q, NULL) != TD_OK)
        return -1;
    return milli ? td_quantity_milli_value(&q) : td_quantity_value(&q);
}

static void add_quota(int64_t *acc, int64_t v)
{
    if (v < 0)
        return;
    *acc = *acc < 0 ? v : *acc + v;
}

/* Quota of owner: unscoped ResourceQuotas of its namespaces, summed. */
static void owner_quota(const td_config *c, td_chargeback_by by, td_rightsize_row *row)
{
    row->gpu_quota_milli = row->cpu_quota_milli = row->memory_quota_bytes = -1;
    if (!c)
        return;
    json_t *const *qs;
    size_t nq = td_config_list(c, "ResourceQuota", NULL, &qs);
    for (size_t i = 0; i < nq; i++) {
        const char *ns = td_json_str(qs[i], "metadata.namespace");
        if (!ns || !ns_of_owner(c, by, row->owner, ns))
            continue;
        if (td_json_path(qs[i], "spec.scopes") || td_json_path(qs[i], "spec.scopeSelector"))
            continue;
        json_t *hard = td_json_path(qs[i], "spec.hard");
        add_quota(&row->gpu_quota_milli,
                  hard_value(hard, "requests.nvidia.com/gpu", "nvidia.com/gpu", 1));
        add_quota(&row->cpu_quota_milli, hard_value(hard, "requests.cpu", "cpu", 1));
        add_quota(&row->memory_quota_bytes, hard_value(hard, "requests.memory", "memory", 0));
    }
}

/* Owners the configuration knows even when they used nothing. */
static int config_owners(const td_config *c, td_chargeback_by by, series_set *ss)
{
    if (!c || by == TD_BY_MODEL)
        return 0;
    json_t *const *objs;
    if (by == TD_BY_NAMESPACE) {
        size_t n = td_config_list(c, "ResourceQuota", NULL, &objs);
        for (size_t i = 0; i < n; i++)
            if (!series_get(ss, td_json_str(objs[i], "metadata.namespace")))
                return -1;
        return 0;
    }
    size_t n = td_config_list(c, "Tenant", NULL, &objs);
    for (size_t i = 0; i < n; i++) {
        const char *o = by == TD_BY_TENANT
                            ? td_json_str(objs[i], "metadata.name")
                            : json_string_value(json_object_get(
                                  td_json_path(objs[i], "spec.labels"), label_key(by)));
        if (o && !series_get(ss, o))
            return -1;
    }
    return 0;
}

static int cmp_row(const void *a, const void *b)
{
    return strcmp(((const td_rightsize_row *)a)->owner, ((const td_rightsize_row *)b)->owner);
}

void td_rightsize_destroy(td_rightsize *r)
{
    if (!r)
        return;
    free(r->rows);
    free(r->idle_routes);
    free(r);
}

static int64_t ceil_div(td_i128 a, td_i128 b)
{
    return (int64_t)((a + b - 1) / b);
}

static td_status pctl2(const series *x, const int64_t *vals, int64_t from, int64_t to,
                       td_pctl2 *out, td_err *err)
{
    td_status st = td_pctl_time_weighted(x->s, x->e, vals, x->n, from, to, 500, &out->p50, err);
    if (st == TD_OK)
        st = td_pctl_time_weighted(x->s, x->e, vals, x->n, from, to, 950, &out->p95, err);
    return st;
}

static td_status rightsize(const td_config *c, const td_costpolicy *p, const td_ledger_rec *recs,
                           size_t n, int64_t from_ns, int64_t to_ns, td_chargeback_by by,
                           series_set *ss, td_rightsize *rs, td_err *err)
{
    if (config_owners(c, by, ss) < 0)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const td_ledger_rec *r = &recs[i];
        if (r->kind != TD_LEDGER_INTERVAL || r->end_ns <= from_ns || r->start_ns >= to_ns)
            continue;
        char key[TD_ITEM_MAX];
        series *x = series_get(ss, td_chargeback_owner(r, by, key, sizeof key));
        if (!x || series_push(x, r) < 0)
            return td_err_set(err, TD_ENOMEM, "out of memory");
        bool protected_env = p ? in_strs(p->protected_envs, p->nprotected_envs, r->environment)
                               : (strcmp(r->environment, "prod") == 0 ||
                                  strcmp(r->environment, "production") == 0);
        if (r->interruptible || protected_env || r->gpu_milli <= 0)
            continue;
        int64_t s = r->start_ns > from_ns ? r->start_ns : from_ns;
        int64_t e = r->end_ns < to_ns ? r->end_ns : to_ns;
        int64_t dms = (e - s) / NS_PER_MS;
        x->candidate_milli_hours += (int64_t)((td_i128)r->gpu_milli * dms / MS_PER_HOUR);
        const gpu_price *g = p ? td__gpu_price(p, r->flavor) : NULL;
        if (g)
            x->saving_nano += (td_i128)r->gpu_milli * dms * g->per_hour / 1000 / MS_PER_HOUR *
                              p->discount_nano / TD_MONEY_NANO;
    }
    rs->rows = calloc(ss->n ? ss->n : 1, sizeof *rs->rows);
    if (!rs->rows)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    for (size_t i = 0; i < ss->n; i++) {
        const series *x = &ss->v[i];
        td_rightsize_row *row = &rs->rows[rs->nrows++];
        snprintf(row->owner, sizeof row->owner, "%s", x->owner);
        td_status st;
        if ((st = pctl2(x, x->gpu, from_ns, to_ns, &row->gpu_requested, err)) != TD_OK ||
            (st = pctl2(x, x->used, from_ns, to_ns, &row->gpu_used, err)) != TD_OK ||
            (st = pctl2(x, x->cpu, from_ns, to_ns, &row->cpu_requested, err)) != TD_OK ||
            (st = pctl2(x, x->mem, from_ns, to_ns, &row->memory_requested, err)) != TD_OK)
            return st;
        row->gpu_used_estimated = x->estimated;
        owner_quota(c, by, row);
        /* headroom 1.2 over p95 */
        row->recommended_gpus = ceil_div((td_i128)row->gpu_used.p95 * 12, 10 * 1000);
        row->recommended_cpu_milli = ceil_div((td_i128)row->cpu_requested.p95 * 12, 10 * 1000) * 1000;
        row->recommended_memory_bytes =
            ceil_div((td_i128)row->memory_requested.p95 * 12, (td_i128)10 * GIB) * GIB;
        row->interruptible_candidate_gpu_milli_hours = x->candidate_milli_hours;
        row->interruptible_saving_cents = (int64_t)td__div_round(x->saving_nano, 10000000);
    }
    qsort(rs->rows, rs->nrows, sizeof *rs->rows, cmp_row);
    /* routes nobody called */
    json_t *const *routes;
    size_t nr = c ? td_config_list(c, "Route", NULL, &routes) : 0;
    rs->idle_routes = calloc(nr ? nr : 1, sizeof *rs->idle_routes);
    if (!rs->idle_routes)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    for (size_t k = 0; k < nr; k++) {
        const char *name = td_json_str(routes[k], "metadata.name");
        int called = 0;
        for (size_t i = 0; i < n && !called; i++)
            called = recs[i].kind == TD_LEDGER_REQUEST && recs[i].start_ns >= from_ns &&
                     recs[i].start_ns < to_ns && strcmp(recs[i].route, name) == 0;
        if (!called)
            snprintf(rs->idle_routes[rs->nidle_routes++], TD_LEDGER_STR, "%s", name);
    }
    return TD_OK;
}

td_status td_rightsize_compute(const td_config *c, const td_costpolicy *p,
                               const td_ledger_rec *recs, size_t n, int64_t from_ns,
                               int64_t to_ns, td_chargeback_by by, td_rightsize **out,
                               td_err *err)
{
    if (to_ns <= from_ns)
        return td_err_set(err, TD_EINVAL,
                          "right-sizing: the period is %s (--from must be before --to)",
                          to_ns == from_ns ? "empty" : "inverted");
    td_rightsize *rs = calloc(1, sizeof *rs);
    if (!rs)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    series_set ss = {0};
    td_status st = rightsize(c, p, recs, n, from_ns, to_ns, by, &ss, rs, err);
    set_free(&ss);
    if (st != TD_OK) {
        td_rightsize_destroy(rs);
        return st;
    }
    *out = rs;
    return TD_OK;
}
