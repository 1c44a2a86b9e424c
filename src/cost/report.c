/* report.c - showback and chargeback over a period: ledger records grouped
 * by owner, priced per item with one rounding per line, shared items
 * (fixed amounts and idle GPU capacity) split by proportional, even or
 * weighted allocation with the largest-remainder rule, so that the lines add
 * up to the total exactly. */
#include "chargeback_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/quantity.h"

#define NS_PER_MS 1000000LL
#define MS_PER_HOUR 3600000LL
#define CENT_NANO 10000000LL /* nano-units per cent */

/* ---- allocation ---- */

typedef struct {
    size_t i;
    td_i128 rem;
    const char *name;
} remainder;

static int cmp_rem(const void *a, const void *b)
{
    const remainder *x = a, *y = b;
    if (x->rem != y->rem)
        return x->rem > y->rem ? -1 : 1;
    if (x->name && y->name) {
        int c = strcmp(x->name, y->name);
        if (c)
            return c;
    }
    return x->i < y->i ? -1 : x->i > y->i;
}

td_status td_chargeback_allocate(int64_t total, const int64_t *weights, const char *const *names,
                                 size_t n, int64_t *out, td_err *err)
{
    if (total < 0)
        return td_err_set(err, TD_EINVAL, "allocation: negative total %lld", (long long)total);
    td_i128 sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (weights[i] < 0)
            return td_err_set(err, TD_EINVAL, "allocation: negative weight for %s",
                              names ? names[i] : "an owner");
        sum += weights[i];
    }
    if (n == 0 || sum == 0)
        return td_err_set(err, TD_EINVAL, "allocation: every weight is zero");
    remainder *r = malloc(n * sizeof *r);
    if (!r)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    td_i128 given = 0;
    for (size_t i = 0; i < n; i++) {
        td_i128 num = (td_i128)total * weights[i];
        out[i] = (int64_t)(num / sum);
        given += out[i];
        r[i].i = i;
        r[i].rem = num % sum;
        r[i].name = names ? names[i] : NULL;
    }
    qsort(r, n, sizeof *r, cmp_rem);
    /* fewer than n cents are left: each floor lost less than one */
    for (size_t k = 0; given < total; k++, given++)
        out[r[k].i]++;
    free(r);
    return TD_OK;
}

/* ---- grouping ---- */

static const char *const by_names[] = {"tenant",      "team",      "project",
                                       "environment", "namespace", "model"};

td_status td_chargeback_by_parse(const char *s, td_chargeback_by *by, td_err *err)
{
    for (int i = 0; i < 6; i++)
        if (s && strcmp(s, by_names[i]) == 0) {
            *by = (td_chargeback_by)i;
            return TD_OK;
        }
    return td_err_set(err, TD_EINVAL, "--by \"%s\": must be tenant, team, project, environment, "
                                      "namespace or model",
                      s ? s : "");
}

const char *td_chargeback_owner(const td_ledger_rec *r, td_chargeback_by by, char *buf,
                                size_t len)
{
    const char *v = r->tenant;
    switch (by) {
    case TD_BY_TENANT:
        v = r->tenant;
        break;
    case TD_BY_TEAM:
        v = r->team;
        break;
    case TD_BY_PROJECT:
        v = r->project;
        break;
    case TD_BY_ENVIRONMENT:
        v = r->environment;
        break;
    case TD_BY_NAMESPACE:
        if (r->kind == TD_LEDGER_INTERVAL && strchr(r->workload, '/')) {
            size_t n = (size_t)(strchr(r->workload, '/') - r->workload);
            if (n >= len)
                n = len - 1;
            memcpy(buf, r->workload, n);
            buf[n] = '\0';
            return buf;
        }
        v = r->tenant;
        break;
    case TD_BY_MODEL:
        v = r->kind == TD_LEDGER_REQUEST ? r->model : "";
        break;
    }
    snprintf(buf, len, "%s", v[0] ? v : "(none)");
    return buf;
}

td_status td_chargeback_pools(const td_config *c, td_pool_gpus **out, size_t *n, td_err *err)
{
    json_t *const *objs;
    size_t cnt = td_config_list(c, "NodePool", NULL, &objs);
    *out = NULL;
    *n = 0;
    td_pool_gpus *p = calloc(cnt ? cnt : 1, sizeof *p);
    if (!p)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    for (size_t i = 0; i < cnt; i++) {
        const char *name = td_json_str(objs[i], "metadata.name");
        const char *flavor = td_json_str(objs[i], "spec.flavor");
        json_t *nodes = td_json_path(objs[i], "spec.nodes");
        json_t *cap = json_object_get(td_json_path(objs[i], "spec.capacity"), "nvidia.com/gpu");
        snprintf(p[i].pool, sizeof p[i].pool, "%s", name ? name : "");
        snprintf(p[i].flavor, sizeof p[i].flavor, "%s", flavor ? flavor : (name ? name : ""));
        int64_t per_node = 0;
        if (json_is_string(cap)) {
            td_quantity q;
            if (td_quantity_parse(json_string_value(cap), &q, NULL) == TD_OK)
                per_node = td_quantity_value(&q);
        } else if (json_is_integer(cap)) {
            per_node = json_integer_value(cap);
        }
        p[i].gpus = (json_is_integer(nodes) ? json_integer_value(nodes) : 1) * per_node;
    }
    *out = p;
    *n = cnt;
    return TD_OK;
}

/* ---- accumulation ---- */

typedef struct {
    char item[TD_ITEM_MAX];
    char unit[16];
    td_i128 qf;      /* sum of q * factor */
    td_i128 den;
    int64_t price;
    td_i128 qty_num; /* sum, over qty_den */
    td_i128 qty_den;
} acc;

typedef struct {
    td_chargeback_owner_sum sum;
    acc *accs;
    size_t naccs;
    int64_t direct_nano;
    int labels_set;
    td_i128 gpu_mms, cpu_mms, mem_bms; /* milli-units (bytes) x ms, rounded once at the end */
} owner;

/* Owners in the order they appeared, found by name through an open-
 * addressing table of indices (+1; 0 is empty), so a report costs O(n) in
 * records whatever the number of owners. */
typedef struct {
    owner *v;
    size_t n, cap;
    size_t *slots;
    size_t nslots; /* a power of two, at least twice n */
} owners;

static void owners_free(owners *o)
{
    for (size_t i = 0; i < o->n; i++)
        free(o->v[i].accs);
    free(o->v);
    free(o->slots);
}

static size_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (size_t)h;
}

static int owners_rehash(owners *o, size_t nslots)
{
    size_t *ns = calloc(nslots, sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; i < o->n; i++) {
        size_t h = name_hash(o->v[i].sum.owner) & (nslots - 1);
        while (ns[h])
            h = (h + 1) & (nslots - 1);
        ns[h] = i + 1;
    }
    free(o->slots);
    o->slots = ns;
    o->nslots = nslots;
    return 0;
}

static owner *owner_get(owners *o, const char *name, td_err *err)
{
    size_t h = o->nslots ? name_hash(name) & (o->nslots - 1) : 0;
    while (o->nslots && o->slots[h]) {
        if (strcmp(o->v[o->slots[h] - 1].sum.owner, name) == 0)
            return &o->v[o->slots[h] - 1];
        h = (h + 1) & (o->nslots - 1);
    }
    if (2 * (o->n + 1) > o->nslots && owners_rehash(o, o->nslots ? 2 * o->nslots : 64) < 0) {
        td_err_set(err, TD_ENOMEM, "out of memory");
        return NULL;
    }
    if (o->n == o->cap) {
        size_t nc = o->cap ? 2 * o->cap : 16;
        owner *nv = realloc(o->v, nc * sizeof *nv);
        if (!nv) {
            td_err_set(err, TD_ENOMEM, "out of memory");
            return NULL;
        }
        o->v = nv;
        o->cap = nc;
    }
    owner *w = &o->v[o->n];
    memset(w, 0, sizeof *w);
    snprintf(w->sum.owner, sizeof w->sum.owner, "%s", name);
    h = name_hash(w->sum.owner) & (o->nslots - 1);
    while (o->slots[h])
        h = (h + 1) & (o->nslots - 1);
    o->slots[h] = ++o->n;
    return w;
}

static void merge_label(char *dst, const char *src, int first)
{
    if (first)
        snprintf(dst, TD_LEDGER_STR, "%s", src);
    else if (strcmp(dst, src) != 0)
        dst[0] = '\0';
}

static td_status add_measure(owner *w, const measure *m, td_err *err)
{
    acc *a = NULL;
    for (size_t i = 0; i < w->naccs; i++)
        if (strcmp(w->accs[i].item, m->item) == 0)
            a = &w->accs[i];
    if (!a) {
        acc *na = realloc(w->accs, (w->naccs + 1) * sizeof *na);
        if (!na)
            return td_err_set(err, TD_ENOMEM, "out of memory");
        w->accs = na;
        a = &na[w->naccs++];
        memset(a, 0, sizeof *a);
        memcpy(a->item, m->item, sizeof a->item);
        memcpy(a->unit, m->unit, sizeof a->unit);
        a->den = m->den;
        a->price = m->price;
        a->qty_den = m->qty_den;
    }
    td_i128 qf = td__mul(m->q, m->factor);
    if (qf < 0 || a->qf + qf < a->qf)
        return td_err_set(err, TD_EINVAL, "report: the quantity of %s overflows", m->item);
    a->qf += qf;
    a->qty_num += m->qty_num;
    return TD_OK;
}

/* Cents of an accumulator: qf * price / (den * TD_MONEY_NANO * CENT_NANO), half up. */
static td_status acc_amount(const acc *a, int64_t *cents, int64_t *nano, td_err *err)
{
    td_i128 num = td__mul(a->qf, a->price);
    td_i128 den = td__mul(a->den, TD_MONEY_NANO);
    if (num < 0 || den < 0)
        return td_err_set(err, TD_EINVAL, "report: the amount of %s overflows", a->item);
    td_i128 n = td__div_round(num, den);
    td_i128 dc = td__mul(den, CENT_NANO);
    td_i128 c = dc < 0 ? td__div_round(n, CENT_NANO) : td__div_round(num, dc);
    if (n > INT64_MAX || c > INT64_MAX)
        return td_err_set(err, TD_EINVAL, "report: the amount of %s overflows", a->item);
    *cents = (int64_t)c;
    *nano = (int64_t)n;
    return TD_OK;
}

void td_chargeback_report_destroy(td_chargeback_report *r)
{
    if (!r)
        return;
    free(r->lines);
    free(r->owners);
    free(r->shared);
    free(r);
}

static int cmp_owner(const void *a, const void *b)
{
    return strcmp(((const owner *)a)->sum.owner, ((const owner *)b)->sum.owner);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int cmp_line(const void *a, const void *b)
{
    const td_chargeback_line *x = a, *y = b;
    int c = strcmp(x->owner, y->owner);
    if (c)
        return c;
    if (x->shared != y->shared)
        return x->shared ? 1 : -1;
    return strcmp(x->item, y->item);
}

static td_status push_line(td_chargeback_report *rep, size_t *cap, const owner *w,
                           const char *item, const char *unit, int64_t qty_micro, int64_t cents,
                           bool shared, td_err *err)
{
    if (rep->nlines == *cap) {
        size_t nc = *cap ? 2 * *cap : 32;
        td_chargeback_line *nl = realloc(rep->lines, nc * sizeof *nl);
        if (!nl)
            return td_err_set(err, TD_ENOMEM, "out of memory");
        rep->lines = nl;
        *cap = nc;
    }
    td_chargeback_line *l = &rep->lines[rep->nlines++];
    memset(l, 0, sizeof *l);
    memcpy(l->owner, w->sum.owner, sizeof l->owner);
    memcpy(l->tenant, w->sum.tenant, sizeof l->tenant);
    memcpy(l->team, w->sum.team, sizeof l->team);
    memcpy(l->project, w->sum.project, sizeof l->project);
    memcpy(l->environment, w->sum.environment, sizeof l->environment);
    snprintf(l->item, sizeof l->item, "%s", item);
    snprintf(l->unit, sizeof l->unit, "%s", unit);
    l->quantity_micro = qty_micro;
    l->amount_cents = cents;
    l->shared = shared;
    return TD_OK;
}

/* The amount of a shared item over the period, in cents (rounded once). */
static td_status shared_amount(const td_costpolicy *p, const shared_item *s, int64_t period_ms,
                               const td_pool_gpus *pools, size_t npools, const char *const *flv,
                               const td_i128 *held, size_t nflv, int64_t *cents,
                               int64_t *idle_milli_hours, td_err *err)
{
    *idle_milli_hours = 0;
    if (s->kind == SHARED_FIXED) {
        td_i128 num = (td_i128)s->rate_nano * period_ms;
        td_i128 den = (td_i128)s->per_hours * MS_PER_HOUR * CENT_NANO;
        *cents = (int64_t)td__div_round(num, den);
        return TD_OK;
    }
    /* idle GPU: capacity and use per flavor (pools of one flavor add up) */
    td_i128 total_num = 0; /* nano-units x (1000 * MS_PER_HOUR) */
    td_i128 idle_sum = 0;
    for (size_t i = 0; i < npools; i++) {
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            if (strcmp(pools[j].flavor, pools[i].flavor) == 0)
                seen = 1;
        if (seen)
            continue;
        td_i128 cap = 0;
        for (size_t j = i; j < npools; j++)
            if (strcmp(pools[j].flavor, pools[i].flavor) == 0)
                cap += (td_i128)pools[j].gpus * 1000 * period_ms;
        td_i128 used = 0;
        for (size_t k = 0; k < nflv; k++)
            if (strcmp(flv[k], pools[i].flavor) == 0)
                used = held[k];
        td_i128 idle = cap > used ? cap - used : 0;
        if (idle == 0)
            continue;
        const gpu_price *g = td__gpu_price(p, pools[i].flavor);
        if (!g)
            return td_err_set(err, TD_EINVAL,
                              "CostPolicy: shared item %s: no price for nvidia.com/gpu flavor "
                              "%s (NodePool %s)",
                              s->name, pools[i].flavor, pools[i].pool);
        idle_sum += idle;
        td_i128 x = td__mul(idle, g->per_hour);
        if (x < 0)
            return td_err_set(err, TD_EINVAL, "report: idle GPU amount overflows");
        total_num += x;
    }
    *cents = (int64_t)td__div_round(total_num, (td_i128)1000 * MS_PER_HOUR * CENT_NANO);
    *idle_milli_hours = (int64_t)(idle_sum / MS_PER_HOUR);
    return TD_OK;
}

static int cmp_interval(const void *a, const void *b)
{
    const td_ledger_rec *x = *(const td_ledger_rec *const *)a, *y = *(const td_ledger_rec *const *)b;
    int c = strcmp(x->workload, y->workload);
    if (c)
        return c;
    if ((c = strcmp(x->flavor, y->flavor)))
        return c;
    return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

/* A workload holds one flavor's resources once at a time: two intervals of
 * one workload and flavor that overlap would count the same GPUs twice, so
 * they are an error naming both records. */
static td_status check_overlaps(const td_ledger_rec *recs, size_t n, int64_t from_ns,
                                int64_t to_ns, td_err *err)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += recs[i].kind == TD_LEDGER_INTERVAL;
    if (m < 2)
        return TD_OK;
    const td_ledger_rec **v = malloc(m * sizeof *v);
    if (!v)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    m = 0;
    for (size_t i = 0; i < n; i++)
        if (recs[i].kind == TD_LEDGER_INTERVAL && recs[i].start_ns < to_ns &&
            recs[i].end_ns > from_ns)
            v[m++] = &recs[i];
    qsort(v, m, sizeof *v, cmp_interval);
    td_status st = TD_OK;
    for (size_t i = 1; i < m && st == TD_OK; i++)
        if (strcmp(v[i]->workload, v[i - 1]->workload) == 0 &&
            strcmp(v[i]->flavor, v[i - 1]->flavor) == 0 && v[i]->start_ns < v[i - 1]->end_ns)
            st = td_err_set(err, TD_EINVAL,
                            "ledger: intervals %s and %s of workload %s (flavor %s) overlap; "
                            "the same resources would be counted twice",
                            v[i - 1]->id, v[i]->id, v[i]->workload, v[i]->flavor);
    free(v);
    return st;
}

/* The owner a weight's name stands for: a tenant's weight goes to the owner
 * its records in the period belong to (so weights written per tenant work
 * in a report by team); any other name is an owner of the grouping. */
static const char *weight_owner(const td_ledger_rec *recs, size_t n, int64_t from_ns,
                                int64_t to_ns, td_chargeback_by by, const char *name, char *buf,
                                size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(recs[i].tenant, name) == 0 && recs[i].start_ns < to_ns &&
            recs[i].end_ns >= from_ns)
            return td_chargeback_owner(&recs[i], by, buf, len);
    snprintf(buf, len, "%s", name);
    return buf;
}

/* One report being computed: its inputs, the owners found so far, the GPU
 * time held per pooled flavor (for idle capacity) and, once the owners are
 * known, the shared items' allocation. */
typedef struct {
    const td_costpolicy *p;
    const td_ledger_rec *recs;
    size_t n;
    int64_t from_ns, to_ns, period_ms;
    td_chargeback_by by;
    const td_pool_gpus *pools;
    size_t npools;
    owners *os;
    td_chargeback_report *rep;
    const char **flv; /* the pools' flavors, once each */
    td_i128 *held;    /* GPU milli-ms held per flavor */
    size_t nflv;
    /* per owner (os order, after sorting): weights, parts and names for
     * td_chargeback_allocate; per shared item and owner its cents (-1: none) */
    int64_t *wts, *parts;
    const char **names;
    int64_t **shared_cents;
} calc;

static void pool_flavors(calc *c)
{
    for (size_t i = 0; i < c->npools; i++) {
        size_t k;
        for (k = 0; k < c->nflv; k++)
            if (strcmp(c->flv[k], c->pools[i].flavor) == 0)
                break;
        if (k == c->nflv)
            c->flv[c->nflv++] = c->pools[i].flavor;
    }
}

/* Adds record r, if it falls in the period, to its owner: labels, priced
 * measures, requests and tokens or resource time, and its flavor's GPU
 * time held. */
static td_status add_record(calc *c, const td_ledger_rec *r, td_err *err)
{
    measure ms[TD_CHARGE_MAX];
    size_t nm;
    td_status st = td__measures(c->p, r, c->from_ns, c->to_ns, ms, &nm, err);
    if (st != TD_OK)
        return st;
    int in_period = r->kind == TD_LEDGER_REQUEST
                        ? r->start_ns >= c->from_ns && r->start_ns < c->to_ns
                        : r->start_ns < c->to_ns && r->end_ns > c->from_ns;
    if (!in_period)
        return TD_OK;
    char key[TD_ITEM_MAX];
    owner *w = owner_get(c->os, td_chargeback_owner(r, c->by, key, sizeof key), err);
    if (!w)
        return TD_ENOMEM;
    merge_label(w->sum.tenant, r->tenant, !w->labels_set);
    merge_label(w->sum.team, r->team, !w->labels_set);
    merge_label(w->sum.project, r->project, !w->labels_set);
    merge_label(w->sum.environment, r->environment, !w->labels_set);
    w->labels_set = 1;
    for (size_t k = 0; k < nm; k++)
        if ((st = add_measure(w, &ms[k], err)) != TD_OK)
            return st;
    if (r->kind == TD_LEDGER_REQUEST) {
        w->sum.requests += r->count > 0 ? r->count : 1;
        w->sum.tokens_in += r->tokens_in;
        w->sum.tokens_out += r->tokens_out;
        return TD_OK;
    }
    int64_t s = r->start_ns > c->from_ns ? r->start_ns : c->from_ns;
    int64_t e = r->end_ns < c->to_ns ? r->end_ns : c->to_ns;
    int64_t dms = e > s ? (e - s) / NS_PER_MS : 0;
    w->gpu_mms += (td_i128)r->gpu_milli * dms;
    w->cpu_mms += (td_i128)r->cpu_milli * dms;
    w->mem_bms += (td_i128)r->memory_bytes * dms;
    for (size_t k = 0; k < c->nflv; k++)
        if (strcmp(c->flv[k], r->flavor) == 0)
            c->held[k] += (td_i128)r->gpu_milli * dms;
    return TD_OK;
}

/* Each owner's direct lines, one rounding each. */
static td_status direct_sums(calc *c, td_err *err)
{
    for (size_t i = 0; i < c->os->n; i++) {
        owner *w = &c->os->v[i];
        w->sum.gpu_milli_hours = (int64_t)td__div_round(w->gpu_mms, MS_PER_HOUR);
        w->sum.cpu_milli_hours = (int64_t)td__div_round(w->cpu_mms, MS_PER_HOUR);
        w->sum.mem_gib_milli_hours =
            (int64_t)td__div_round(w->mem_bms * 1000, (td_i128)MS_PER_HOUR << 30);
        for (size_t k = 0; k < w->naccs; k++) {
            int64_t cents, nano;
            td_status st = acc_amount(&w->accs[k], &cents, &nano, err);
            if (st != TD_OK)
                return st;
            w->direct_nano += nano;
            w->sum.direct_cents += cents;
        }
    }
    return TD_OK;
}

/* Owners named by shared items' weights join the report (or, with shared
 * items and no owner at all, "(unallocated)"); then the owners are sorted
 * by name and the allocation's arrays made. */
static td_status settle_owners(calc *c, td_err *err)
{
    const td_costpolicy *p = c->p;
    owners *os = c->os;
    for (size_t s = 0; s < p->nshared; s++)
        for (size_t k = 0; p->shared[s].rule == ALLOC_WEIGHTS && k < p->shared[s].nweights; k++) {
            char key[TD_ITEM_MAX];
            if (p->shared[s].weights[k] > 0 &&
                !owner_get(os,
                           weight_owner(c->recs, c->n, c->from_ns, c->to_ns, c->by,
                                        p->shared[s].weight_names[k], key, sizeof key),
                           err))
                return TD_ENOMEM;
        }
    if (p->nshared && os->n == 0 && !owner_get(os, "(unallocated)", err))
        return TD_ENOMEM;
    qsort(os->v, os->n, sizeof *os->v, cmp_owner); /* the name table is stale from here */
    size_t no = os->n ? os->n : 1, ns = p->nshared ? p->nshared : 1;
    c->rep->shared = calloc(ns, sizeof *c->rep->shared);
    c->wts = calloc(no, sizeof *c->wts);
    c->parts = calloc(no, sizeof *c->parts);
    c->names = calloc(no, sizeof *c->names);
    c->shared_cents = calloc(ns, sizeof *c->shared_cents);
    if (!c->rep->shared || !c->wts || !c->parts || !c->names || !c->shared_cents)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    for (size_t i = 0; i < os->n; i++)
        c->names[i] = os->v[i].sum.owner;
    return TD_OK;
}

/* The weights of shared item si per owner: direct cost (proportional), 1
 * (even) or the named weights; all zero falls back to even. */
static void shared_weights(calc *c, const shared_item *si)
{
    owners *os = c->os;
    for (size_t i = 0; i < os->n; i++)
        c->wts[i] = si->rule == ALLOC_PROPORTIONAL ? os->v[i].direct_nano : si->rule == ALLOC_EVEN;
    for (size_t k = 0; si->rule == ALLOC_WEIGHTS && k < si->nweights; k++) {
        char key[TD_ITEM_MAX];
        const char *o = weight_owner(c->recs, c->n, c->from_ns, c->to_ns, c->by,
                                     si->weight_names[k], key, sizeof key);
        const char **hit = bsearch(&o, c->names, os->n, sizeof *c->names, cmp_name);
        if (hit)
            c->wts[hit - c->names] += si->weights[k];
    }
    int any = 0;
    for (size_t i = 0; i < os->n; i++)
        any |= c->wts[i] > 0;
    if (!any) /* nobody used anything: proportional falls back to even */
        for (size_t i = 0; i < os->n; i++)
            c->wts[i] = 1;
}

/* Shared item s: its amount, and its allocation to the owners. */
static td_status allocate_shared(calc *c, size_t s, td_err *err)
{
    const shared_item *si = &c->p->shared[s];
    owners *os = c->os;
    td_chargeback_report *rep = c->rep;
    td_chargeback_shared_sum *ss = &rep->shared[rep->nshared++];
    snprintf(ss->name, sizeof ss->name, "%s", si->name);
    snprintf(ss->kind, sizeof ss->kind, "%s", si->kind == SHARED_FIXED ? "fixed" : "idleGpu");
    snprintf(ss->rule, sizeof ss->rule, "%s",
             si->rule == ALLOC_EVEN      ? "even"
             : si->rule == ALLOC_WEIGHTS ? "weights"
                                         : "proportional");
    td_status st = shared_amount(c->p, si, c->period_ms, c->pools, c->npools, c->flv, c->held,
                                 c->nflv, &ss->amount_cents, &ss->idle_gpu_milli_hours, err);
    if (st != TD_OK)
        return st;
    shared_weights(c, si);
    if ((st = td_chargeback_allocate(ss->amount_cents, c->wts, c->names, os->n, c->parts, err)) !=
        TD_OK)
        return st;
    if (!(c->shared_cents[s] = malloc(os->n * sizeof **c->shared_cents)))
        return td_err_set(err, TD_ENOMEM, "out of memory");
    for (size_t i = 0; i < os->n; i++) {
        c->shared_cents[s][i] = c->wts[i] > 0 ? c->parts[i] : -1; /* -1: no line */
        if (c->wts[i] > 0)
            os->v[i].sum.shared_cents += c->parts[i];
    }
    rep->shared_cents += ss->amount_cents;
    return TD_OK;
}

/* Owner i's lines: one per priced item, one per shared item allocated to
 * it; and its total. */
static td_status owner_lines(calc *c, size_t i, size_t *cap, td_err *err)
{
    owner *w = &c->os->v[i];
    td_chargeback_report *rep = c->rep;
    td_status st;
    for (size_t k = 0; k < w->naccs; k++) {
        int64_t cents, nano;
        acc_amount(&w->accs[k], &cents, &nano, err);
        int64_t qty = (int64_t)(w->accs[k].qty_num * 1000000 / w->accs[k].qty_den);
        if ((st = push_line(rep, cap, w, w->accs[k].item, w->accs[k].unit, qty, cents, false,
                            err)) != TD_OK)
            return st;
    }
    for (size_t s = 0; s < c->p->nshared; s++) {
        if (c->shared_cents[s][i] < 0)
            continue;
        char item[TD_ITEM_MAX];
        snprintf(item, sizeof item, "shared/%s", c->p->shared[s].name);
        int64_t share_micro = rep->shared[s].amount_cents
                                  ? c->shared_cents[s][i] * 1000000 / rep->shared[s].amount_cents
                                  : 0;
        if ((st = push_line(rep, cap, w, item, "share", share_micro, c->shared_cents[s][i], true,
                            err)) != TD_OK)
            return st;
    }
    w->sum.total_cents = w->sum.direct_cents + w->sum.shared_cents;
    rep->direct_cents += w->sum.direct_cents;
    return TD_OK;
}

/* The lines, sorted, the totals and the owners' sums into c->rep. */
static td_status finish_report(calc *c, td_err *err)
{
    td_chargeback_report *rep = c->rep;
    owners *os = c->os;
    size_t cap = 0;
    td_status st;
    for (size_t i = 0; i < os->n; i++)
        if ((st = owner_lines(c, i, &cap, err)) != TD_OK)
            return st;
    qsort(rep->lines, rep->nlines, sizeof *rep->lines, cmp_line);
    for (size_t i = 0; i < rep->nlines; i++)
        rep->total_cents += rep->lines[i].amount_cents;
    rep->owners = calloc(os->n ? os->n : 1, sizeof *rep->owners);
    if (!rep->owners)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    for (size_t i = 0; i < os->n; i++)
        rep->owners[i] = os->v[i].sum;
    rep->nowners = os->n;
    return TD_OK;
}

static td_status compute(const td_costpolicy *p, const td_ledger_rec *recs, size_t n,
                         int64_t from_ns, int64_t to_ns, td_chargeback_by by,
                         const td_pool_gpus *pools, size_t npools, owners *os,
                         td_chargeback_report *rep, td_err *err)
{
    calc c = {.p = p, .recs = recs, .n = n, .from_ns = from_ns, .to_ns = to_ns,
              .period_ms = (to_ns - from_ns) / NS_PER_MS, .by = by, .pools = pools,
              .npools = npools, .os = os, .rep = rep};
    c.flv = calloc(npools ? npools : 1, sizeof *c.flv);
    c.held = calloc(npools ? npools : 1, sizeof *c.held);
    td_status st = TD_OK;
    if (!c.flv || !c.held)
        st = td_err_set(err, TD_ENOMEM, "out of memory");
    if (st == TD_OK)
        st = check_overlaps(recs, n, from_ns, to_ns, err);
    if (st == TD_OK)
        pool_flavors(&c);
    for (size_t i = 0; st == TD_OK && i < n; i++)
        st = add_record(&c, &recs[i], err);
    if (st == TD_OK)
        st = direct_sums(&c, err);
    if (st == TD_OK)
        st = settle_owners(&c, err);
    for (size_t s = 0; st == TD_OK && s < p->nshared; s++)
        st = allocate_shared(&c, s, err);
    if (st == TD_OK)
        st = finish_report(&c, err);
    for (size_t s = 0; c.shared_cents && s < p->nshared; s++)
        free(c.shared_cents[s]);
    free(c.shared_cents);
    free(c.wts);
    free(c.parts);
    free(c.names);
    free(c.flv);
    free(c.held);
    return st;
}

td_status td_chargeback_compute(const td_costpolicy *p, const td_ledger_rec *recs, size_t n,
                                int64_t from_ns, int64_t to_ns, td_chargeback_by by,
                                const td_pool_gpus *pools, size_t npools,
                                td_chargeback_report **out, td_err *err)
{
    if (to_ns <= from_ns)
        return td_err_set(err, TD_EINVAL,
                          "report: the period is %s (--from must be before --to)",
                          to_ns == from_ns ? "empty" : "inverted");
    td_chargeback_report *rep = calloc(1, sizeof *rep);
    if (!rep)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    rep->from_ns = from_ns;
    rep->to_ns = to_ns;
    rep->by = by;
    snprintf(rep->currency, sizeof rep->currency, "%s", p->currency);
    owners os = {0};
    td_status st = compute(p, recs, n, from_ns, to_ns, by, pools, npools, &os, rep, err);
    owners_free(&os);
    if (st != TD_OK) {
        td_chargeback_report_destroy(rep);
        return st;
    }
    *out = rep;
    return TD_OK;
}
