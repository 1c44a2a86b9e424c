/* load.c - Kueue objects into the queue: ResourceFlavor, ClusterQueue,
 * LocalQueue, Cohort, PriorityClass, WorkloadPriorityClass and Workload,
 * validated field by field. What tenantd does not implement is rejected by
 * field name rather than ignored, so a user never runs on a silent guess. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "queue/kinds_internal.h"
#include "queue/queue_internal.h"
#include "core/config.h"
#include "core/quantity.h"
#include "core/validate.h"

/* ---- small containers ---------------------------------------------------- */

char *td__qstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static int smap_grow(smap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 16;
    smap_ent *t = calloc(cap, sizeof *t);
    if (!t)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->t[i].key)
            continue;
        size_t j = hash_str(m->t[i].key) & (cap - 1);
        while (t[j].key)
            j = (j + 1) & (cap - 1);
        t[j] = m->t[i];
    }
    free(m->t);
    m->t = t;
    m->cap = cap;
    return 0;
}

int td__smap_put(smap *m, const char *key, size_t val)
{
    if ((m->n + 1) * 2 > m->cap && smap_grow(m) != 0)
        return -1;
    size_t j = hash_str(key) & (m->cap - 1);
    while (m->t[j].key) {
        if (strcmp(m->t[j].key, key) == 0) {
            m->t[j].val = val;
            return 0;
        }
        j = (j + 1) & (m->cap - 1);
    }
    char *k = td__qstrdup(key);
    if (!k)
        return -1;
    m->t[j].key = k;
    m->t[j].val = val;
    m->n++;
    return 0;
}

size_t td__smap_get(const smap *m, const char *key)
{
    if (!m->cap)
        return QNONE;
    size_t j = hash_str(key) & (m->cap - 1);
    while (m->t[j].key) {
        if (strcmp(m->t[j].key, key) == 0)
            return m->t[j].val;
        j = (j + 1) & (m->cap - 1);
    }
    return QNONE;
}

void td__smap_fini(smap *m)
{
    for (size_t i = 0; i < m->cap; i++)
        free(m->t[i].key);
    free(m->t);
    memset(m, 0, sizeof *m);
}

int td__idvec_push(idvec *v, size_t id)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 8;
        size_t *p = realloc(v->v, cap * sizeof *p);
        if (!p)
            return -1;
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = id;
    return 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 8;
    while (c < need)
        c *= 2;
    void *n = realloc(*p, c * elem);
    if (!n)
        return -1;
    memset((char *)n + *cap * elem, 0, (c - *cap) * elem);
    *p = n;
    *cap = c;
    return 0;
}

/* ---- lifecycle --------------------------------------------------------- */

td_status td_queue_create(td_queue **out, td_err *err)
{
    td_queue *q = calloc(1, sizeof *q);
    if (!q)
        return td_err_set(err, TD_ENOMEM, "queue: out of memory");
    *out = q;
    return TD_OK;
}

static void free_tols(toleration *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(t[i].key);
        free(t[i].value);
        free(t[i].effect);
    }
    free(t);
}

static void free_flavor_spec(flavor_spec *f)
{
    for (size_t i = 0; i < f->ntaints; i++) {
        free(f->taints[i].key);
        free(f->taints[i].value);
        free(f->taints[i].effect);
    }
    free(f->taints);
    free_tols(f->tols, f->ntols);
    for (size_t i = 0; i < f->nlabels; i++) {
        free(f->label_keys[i]);
        free(f->label_vals[i]);
    }
    free(f->label_keys);
    free(f->label_vals);
    memset(f, 0, sizeof *f);
}

static void free_cq(cluster_queue *c)
{
    free(c->name);
    free(c->inactive);
    free(c->where);
    free(c->cohort_name);
    for (size_t g = 0; g < c->ngroups; g++) {
        free(c->groups[g].resources);
        free(c->groups[g].flavors);
        for (size_t f = 0; f < c->groups[g].nflavors; f++)
            free(c->groups[g].flavor_where[f]);
        free(c->groups[g].flavor_where);
    }
    free(c->groups);
    free(c->quota);
    free(c->has);
    free(c->nominal);
    free(c->borrowing_limit);
    free(c->guaranteed);
    free(c->usage);
    free(c->group_of_resource);
    free(c->heap.v);
    free(c->inadmissible.v);
    free(c->admitted.v);
    free(c->sorted.v);
}

static void free_wl(workload *w)
{
    free(w->key);
    free(w->local_queue);
    for (size_t i = 0; i < w->npodsets; i++)
        free(w->podset_names[i]);
    free(w->podset_names);
    free(w->requests);
    free(w->pod_requests);
    free(w->counts);
    free(w->placement);
    free(w->placement_text);
    free(w->unknown_resource);
    free(w->misconfigured);
    free(w->flavor_unmatched);
    for (size_t i = 0; w->tols && i < w->npodsets; i++)
        free_tols(w->tols[i], w->ntols[i]);
    free(w->tols);
    free(w->ntols);
    free(w->assignment);
    free(w->use);
    free(w->reason);
    free(w->why);
    free(w->flavors);
    free(w->evicted);
}

void td_queue_destroy(td_queue *q)
{
    if (!q)
        return;
    td__smap_fini(&q->resource_ids);
    td__smap_fini(&q->flavor_ids);
    td__smap_fini(&q->cq_ids);
    td__smap_fini(&q->lq_ids);
    td__smap_fini(&q->pc_values);
    td__smap_fini(&q->wpc_values);
    td__smap_fini(&q->wl_ids);
    for (size_t i = 0; i < q->nres; i++)
        free(q->resource_names[i]);
    free(q->resource_names);
    free(q->resource_formats);
    for (size_t i = 0; i < q->nflavors; i++)
        free(q->flavor_names[i]);
    free(q->flavor_names);
    free(q->flavor_defined);
    for (size_t i = 0; i < q->nflavor_specs; i++)
        free_flavor_spec(&q->flavor_specs[i]);
    free(q->flavor_specs);
    for (size_t i = 0; i < q->ncqs; i++)
        free_cq(&q->cqs[i]);
    free(q->cqs);
    for (size_t i = 0; i < q->ncohorts; i++) {
        cohort *co = &q->cohorts[i];
        free(co->name);
        free(co->members);
        free(co->all_members);
        free(co->lendable);
        free(co->used);
        free(co->nominal);
        free(co->borrowing_limit);
        free(co->lending_limit);
        free(co->guaranteed);
    }
    free(q->cohorts);
    free(q->touched.v);
    for (size_t i = 0; i < q->ncohort_defs; i++)
        free_cq(&q->cohort_defs[i]);
    free(q->cohort_defs);
    for (size_t i = 0; i < q->nlqs; i++) {
        free(q->lq_keys[i]);
        free(q->lq_targets[i]);
        free(q->lq_where[i]);
    }
    free(q->lq_keys);
    free(q->lq_targets);
    free(q->lq_where);
    free(q->pc_vals);
    free(q->wpc_vals);
    for (size_t i = 0; i < q->nwls; i++)
        free_wl(&q->wls[i]);
    free(q->wls);
    for (size_t i = 0; i < q->npools; i++) {
        pool_def *p = &q->pools[i];
        free(p->name);
        free(p->flavor);
        free(p->where);
        for (size_t k = 0; k < p->ncap; k++)
            free(p->cap_names[k]);
        free(p->cap_names);
        free(p->cap_vals);
    }
    free(q->pools);
    for (size_t i = 0; i < q->nnodes; i++) {
        free(q->nodes[i].name);
        free(q->nodes[i].cap);
        free(q->nodes[i].free);
    }
    free(q->nodes);
    free(q->flavor_node_start);
    free(q->flavor_node_n);
    free(q->flavor_max_cap);
    free(q->scratch_place);
    free(q->tree_version);
    free(q->borrowers);
    free(q->borrow_n);
    free(q->borrow_pos);
    free(q->borrow_base);
    free(q->cohort_h);
    free(q->cohort_root);
    free(q->fr_version);
    free(q->omemo);
    for (int k = 0; k < 3; k++) {
        free(q->cs_runs[k]);
        free(q->cs_heap[k]);
    }
    free(q->cs_nf);
    free(q->cs_rem);
    free(q->or_need);
    free(q->or_as);
    free(q->hc_as);
    free(q->hc_use);
    free(q->pr_need);
    free(q->pr_as);
    free(q->pr_use);
    free(q->events);
    free(q->acc);
    free(q->scratch_assign);
    free(q->scratch_use);
    free(q);
}

/* ---- helpers for validation ------------------------------------------- */

typedef struct {
    td_queue *q;
    const json_t *obj;
    const td_manifest *src;
    td_err *err;
    const char *kind, *name;
} lctx;

static td_status lfail(lctx *l, const json_t *node, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* td_vfail for the object in l: "Kind name: field: msg" at node's line. */
static td_status lfail(lctx *l, const json_t *node, const char *field, const char *fmt, ...)
{
    td_vctx v = {.src = l->src, .obj = l->obj, .kind = l->kind, .err = l->err,
                 .line = TD_VLINE_AS_GIVEN};
    snprintf(v.who, sizeof v.who, "%s %s", l->kind, l->name);
    va_list ap;
    va_start(ap, fmt);
    td_status st = td_vfailv(&v, node, field, fmt, ap);
    va_end(ap);
    return st;
}

static char *where_of(lctx *l, const json_t *node)
{
    char buf[512];
    int line = td_manifest_line(l->src, node);
    if (l->src && line)
        snprintf(buf, sizeof buf, "%s:%d: ", td_manifest_name(l->src), line);
    else if (l->src)
        snprintf(buf, sizeof buf, "%s: ", td_manifest_name(l->src));
    else
        buf[0] = '\0';
    return td__qstrdup(buf);
}

/* Rejects any key of obj not in allowed (NULL-terminated). */
static td_status only_fields(lctx *l, const json_t *obj, const char *path,
                             const char *const *allowed)
{
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)obj, key, val)
    {
        bool ok = false;
        for (size_t i = 0; allowed[i]; i++)
            if (strcmp(allowed[i], key) == 0)
                ok = true;
        if (!ok) {
            char field[256];
            snprintf(field, sizeof field, "%s%s%s", path, *path ? "." : "", key);
            return lfail(l, val, field, "not supported by tenantd's queue");
        }
    }
    return TD_OK;
}

/* Parses a quantity (string or number) into milli-units, >= 0. */
static td_status parse_milli(lctx *l, const json_t *v, const char *field, int64_t *out,
                             td_qformat *fmt)
{
    char buf[64];
    const char *s;
    if (json_is_string(v))
        s = json_string_value(v);
    else if (json_is_integer(v)) {
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
        s = buf;
    } else if (json_is_real(v)) {
        snprintf(buf, sizeof buf, "%.17g", json_real_value(v));
        s = buf;
    } else
        return lfail(l, v, field, "must be a quantity");
    td_quantity qt;
    td_err e;
    if (td_quantity_parse(s, &qt, &e) != TD_OK)
        return lfail(l, v, field, "\"%s\" is not a quantity", s);
    if (td_quantity_sign(&qt) < 0)
        return lfail(l, v, field, "\"%s\" must not be negative", s);
    *out = td_quantity_milli_value(&qt);
    if (fmt)
        *fmt = td_quantity_get_format(&qt);
    return TD_OK;
}

static int intern(smap *m, char ***names, size_t *n, const char *name, size_t *out)
{
    size_t id = td__smap_get(m, name);
    if (id != QNONE) {
        *out = id;
        return 0;
    }
    char **p = realloc(*names, (*n + 1) * sizeof *p);
    if (!p)
        return -1;
    *names = p;
    if (!(p[*n] = td__qstrdup(name)))
        return -1;
    if (td__smap_put(m, name, *n) != 0) {
        free(p[*n]);
        return -1;
    }
    *out = (*n)++;
    return 0;
}

static int intern_resource(td_queue *q, const char *name, td_qformat fmt, int *out)
{
    size_t before = q->nres, id;
    if (intern(&q->resource_ids, &q->resource_names, &q->nres, name, &id) != 0)
        return -1;
    if (q->nres != before) {
        td_qformat *f = realloc(q->resource_formats, q->nres * sizeof *f);
        if (!f)
            return -1;
        q->resource_formats = f;
        f[id] = fmt;
    }
    *out = (int)id;
    return 0;
}

static int intern_flavor(td_queue *q, const char *name, int *out)
{
    size_t before = q->nflavors, id;
    if (intern(&q->flavor_ids, &q->flavor_names, &q->nflavors, name, &id) != 0)
        return -1;
    if (q->nflavors != before) {
        bool *d = realloc(q->flavor_defined, q->nflavors * sizeof *d);
        if (!d)
            return -1;
        q->flavor_defined = d;
        d[id] = false;
        flavor_spec *fs = realloc(q->flavor_specs, q->nflavors * sizeof *fs);
        if (!fs)
            return -1;
        q->flavor_specs = fs;
        memset(&fs[id], 0, sizeof fs[id]);
        q->nflavor_specs = q->nflavors;
    }
    *out = (int)id;
    return 0;
}

/* ---- taints and tolerations ---------------------------------------------- */

static const char *const taint_effects[] = {"NoSchedule", "PreferNoSchedule", "NoExecute", NULL};

static bool is_effect(const char *e)
{
    for (size_t i = 0; taint_effects[i]; i++)
        if (strcmp(taint_effects[i], e) == 0)
            return true;
    return false;
}

/* A string member of o, copied (*out NULL when absent). */
static td_status opt_str(lctx *l, const json_t *o, const char *key, const char *field,
                         char **out)
{
    json_t *v = json_object_get(o, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return TD_OK;
    if (!json_is_string(v))
        return lfail(l, v, field, "must be a string");
    if (!(*out = td__qstrdup(json_string_value(v))))
        return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    return TD_OK;
}

/* A list of Kubernetes tolerations (key, operator Equal or Exists, value,
 * effect, tolerationSeconds) at field into *out, *n; nothing set on error. */
static td_status parse_tolerations(lctx *l, const json_t *list, const char *field,
                                   toleration **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!list || json_is_null(list))
        return TD_OK;
    if (!json_is_array(list))
        return lfail(l, list, field, "must be a list of tolerations");
    size_t cnt = json_array_size(list);
    toleration *t = calloc(cnt ? cnt : 1, sizeof *t);
    if (!t)
        return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    td_status st = TD_OK;
    size_t i;
    for (i = 0; i < cnt && st == TD_OK; i++) {
        json_t *e = json_array_get(list, i);
        char f[300], op_field[320];
        snprintf(f, sizeof f, "%s[%zu]", field, i);
        static const char *const tk[] = {"key", "operator", "value", "effect",
                                         "tolerationSeconds", NULL};
        if (!json_is_object(e)) {
            st = lfail(l, e, f, "must be a mapping");
            break;
        }
        if ((st = only_fields(l, e, f, tk)) != TD_OK)
            break;
        char *op = NULL;
        snprintf(op_field, sizeof op_field, "%s.operator", f);
        if ((st = opt_str(l, e, "key", f, &t[i].key)) != TD_OK ||
            (st = opt_str(l, e, "value", f, &t[i].value)) != TD_OK ||
            (st = opt_str(l, e, "effect", f, &t[i].effect)) != TD_OK ||
            (st = opt_str(l, e, "operator", op_field, &op)) != TD_OK)
            break;
        if (op && strcmp(op, "Exists") != 0 && strcmp(op, "Equal") != 0)
            st = lfail(l, json_object_get(e, "operator"), op_field, "must be Exists or Equal");
        else if (t[i].effect && *t[i].effect && !is_effect(t[i].effect))
            st = lfail(l, json_object_get(e, "effect"), f,
                       "effect must be NoSchedule, PreferNoSchedule or NoExecute");
        t[i].exists = op && strcmp(op, "Exists") == 0;
        free(op);
        if (t[i].effect && !*t[i].effect) {
            free(t[i].effect); /* "" is every effect, as unset */
            t[i].effect = NULL;
        }
        if (t[i].key && !*t[i].key) {
            free(t[i].key);
            t[i].key = NULL;
        }
    }
    if (st != TD_OK) {
        free_tols(t, i);
        return st;
    }
    *out = t;
    *n = cnt;
    return TD_OK;
}

/* ---- node labels against a pod's node selection (Kueue's flavorSelector) -- */

/* spec.nodeLabels of a ResourceFlavor (a mapping of strings) into fs. */
static td_status parse_node_labels(lctx *l, const json_t *o, flavor_spec *fs)
{
    if (!o || json_is_null(o))
        return TD_OK;
    if (!json_is_object(o))
        return lfail(l, o, "spec.nodeLabels", "must be a mapping of label to value");
    size_t n = json_object_size(o);
    fs->label_keys = calloc(n ? n : 1, sizeof *fs->label_keys);
    fs->label_vals = calloc(n ? n : 1, sizeof *fs->label_vals);
    if (!fs->label_keys || !fs->label_vals)
        return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v)
    {
        if (!json_is_string(v))
            return lfail(l, v, "spec.nodeLabels", "label %s: the value must be a string", k);
        fs->label_keys[fs->nlabels] = td__qstrdup(k);
        fs->label_vals[fs->nlabels] = td__qstrdup(json_string_value(v));
        fs->nlabels++;
        if (!fs->label_keys[fs->nlabels - 1] || !fs->label_vals[fs->nlabels - 1])
            return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    }
    return TD_OK;
}

static const char *label_of(const flavor_spec *fs, const char *key)
{
    for (size_t i = 0; i < fs->nlabels; i++)
        if (strcmp(fs->label_keys[i], key) == 0)
            return fs->label_vals[i];
    return NULL;
}

/* Go's strconv.ParseInt(s, 10, 64), as Kubernetes reads Gt and Lt. */
static bool parse_i64(const char *s, long long *out)
{
    char *end;
    if (!*s || (!isdigit((unsigned char)s[0]) && s[0] != '-' && s[0] != '+'))
        return false;
    errno = 0;
    *out = strtoll(s, &end, 10);
    return errno == 0 && *end == '\0' && end != s;
}

/* One matchExpression (validated) against the value v of its key. */
static bool expr_matches(const json_t *e, const char *v)
{
    const char *op = json_string_value(json_object_get(e, "operator"));
    const json_t *vals = json_object_get(e, "values");
    if (strcmp(op, "Exists") == 0 || strcmp(op, "DoesNotExist") == 0)
        return op[0] == 'E'; /* the key is one of the flavor's: present */
    if (strcmp(op, "Gt") == 0 || strcmp(op, "Lt") == 0) {
        long long have, want = 0;
        parse_i64(json_string_value(json_array_get(vals, 0)), &want);
        if (!parse_i64(v, &have))
            return false;
        return op[0] == 'G' ? have > want : have < want;
    }
    bool in = false;
    for (size_t i = 0; i < json_array_size(vals) && !in; i++)
        in = strcmp(json_string_value(json_array_get(vals, i)), v) == 0;
    return strcmp(op, "In") == 0 ? in : !in;
}

/* Whether a pod (spec pod, validated) may run on fs's nodes, as Kueue's
 * flavorSelector and kube-scheduler's NodeAffinity decide it against the
 * flavor's nodeLabels, with only the flavor's own label keys considered:
 * every nodeSelector entry of those keys equals the label; and when every
 * required affinity term names one of them, some term's expressions of
 * those keys all hold (a term naming none of them matches any flavor). */
static bool flavor_matches(const flavor_spec *fs, const json_t *pod)
{
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(pod, "nodeSelector"), k, v)
    {
        const char *have = label_of(fs, k);
        if (have && strcmp(have, json_string_value(v)) != 0)
            return false;
    }
    const json_t *terms = td_json_path(pod, "affinity.nodeAffinity."
                                            "requiredDuringSchedulingIgnoredDuringExecution."
                                            "nodeSelectorTerms");
    size_t nt = json_array_size(terms);
    for (size_t t = 0; t < nt; t++) {
        size_t named = 0;
        const json_t *ex = json_object_get(json_array_get(terms, t), "matchExpressions");
        for (size_t i = 0; i < json_array_size(ex); i++)
            named += label_of(fs, json_string_value(json_object_get(json_array_get(ex, i),
                                                                     "key"))) != NULL;
        if (!named)
            return true;
    }
    for (size_t t = 0; t < nt; t++) {
        const json_t *ex = json_object_get(json_array_get(terms, t), "matchExpressions");
        bool all = true;
        for (size_t i = 0; i < json_array_size(ex) && all; i++) {
            const json_t *e = json_array_get(ex, i);
            const char *have = label_of(fs, json_string_value(json_object_get(e, "key")));
            all = !have || expr_matches(e, have);
        }
        if (all)
            return true;
    }
    return nt == 0;
}

/* One nodeSelectorRequirement at field, as the API server validates it:
 * a key, an operator of Kubernetes', values for In and NotIn, none for
 * Exists and DoesNotExist, one integer for Gt and Lt. */
static td_status check_expr(lctx *l, const json_t *e, const char *field)
{
    static const char *const ek[] = {"key", "operator", "values", NULL};
    if (!json_is_object(e))
        return lfail(l, e, field, "must be a mapping");
    TD_TRY(only_fields(l, e, field, ek));
    const char *key = td_json_str(e, "key"), *op = td_json_str(e, "operator");
    const json_t *vals = json_object_get(e, "values");
    size_t nv = json_array_size(vals);
    if (!key || !*key)
        return lfail(l, e, field, "key: required");
    if (vals && !json_is_null(vals) && !json_is_array(vals))
        return lfail(l, vals, field, "values: must be a list of strings");
    for (size_t i = 0; i < nv; i++)
        if (!json_is_string(json_array_get(vals, i)))
            return lfail(l, json_array_get(vals, i), field, "values: must be a list of strings");
    bool set = op && (strcmp(op, "In") == 0 || strcmp(op, "NotIn") == 0);
    bool ex = op && (strcmp(op, "Exists") == 0 || strcmp(op, "DoesNotExist") == 0);
    bool num = op && (strcmp(op, "Gt") == 0 || strcmp(op, "Lt") == 0);
    long long x;
    if (!set && !ex && !num)
        return lfail(l, e, field, "operator: must be In, NotIn, Exists, DoesNotExist, Gt or Lt");
    if (set && nv == 0)
        return lfail(l, e, field, "values: must be non-empty for operator %s", op);
    if (ex && nv != 0)
        return lfail(l, e, field, "values: must be empty for operator %s", op);
    if (num && (nv != 1 || !parse_i64(json_string_value(json_array_get(vals, 0)), &x)))
        return lfail(l, e, field, "values: must be one integer for operator %s", op);
    return TD_OK;
}

/* Validates pod's nodeSelector and required node affinity (field: the pod
 * spec's place); *selects: whether it has either. */
static td_status check_node_selection(lctx *l, const json_t *pod, const char *field,
                                      bool *selects)
{
    char f[256];
    const json_t *sel = json_object_get(pod, "nodeSelector");
    const char *k;
    json_t *v;
    *selects = false;
    snprintf(f, sizeof f, "%s.nodeSelector", field);
    if (sel && !json_is_null(sel) && !json_is_object(sel))
        return lfail(l, sel, f, "must be a mapping of label to value");
    json_object_foreach((json_t *)sel, k, v)
    {
        if (!json_is_string(v))
            return lfail(l, v, f, "label %s: the value must be a string", k);
        *selects = true;
    }
    const json_t *terms = td_json_path(pod, "affinity.nodeAffinity."
                                            "requiredDuringSchedulingIgnoredDuringExecution."
                                            "nodeSelectorTerms");
    snprintf(f, sizeof f,
             "%s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
             "nodeSelectorTerms",
             field);
    if (terms && !json_is_null(terms) && !json_is_array(terms))
        return lfail(l, terms, f, "must be a list of terms");
    for (size_t t = 0; t < json_array_size(terms); t++) {
        const json_t *term = json_array_get(terms, t), *ex;
        char tf[320];
        snprintf(tf, sizeof tf, "%s[%zu].matchExpressions", f, t);
        if (!json_is_object(term))
            return lfail(l, term, tf, "the term must be a mapping");
        ex = json_object_get(term, "matchExpressions");
        if (ex && !json_is_null(ex) && !json_is_array(ex))
            return lfail(l, ex, tf, "must be a list");
        for (size_t i = 0; i < json_array_size(ex); i++) {
            char ef[340];
            snprintf(ef, sizeof ef, "%s[%zu]", tf, i);
            TD_TRY(check_expr(l, json_array_get(ex, i), ef));
        }
        *selects = true;
    }
    return TD_OK;
}

/* ResourceFlavor: spec.nodeTaints and spec.tolerations count in flavor
 * assignment (a pod set that does not tolerate the taints is not given the
 * flavor), and spec.nodeLabels (a pod set whose nodeSelector or required
 * node affinity contradicts them is not given it); topologyName is
 * accepted. */
static td_status add_resource_flavor(lctx *l)
{
    td_queue *q = l->q;
    json_t *spec = json_object_get(l->obj, "spec");
    static const char *const rfk[] = {"nodeLabels", "nodeTaints", "tolerations", "topologyName",
                                      NULL};
    if (spec)
        TD_TRY(only_fields(l, spec, "spec", rfk));
    flavor_spec fs = {0};
    json_t *nt = json_object_get(spec, "nodeTaints");
    td_status st = TD_OK;
    if (nt && !json_is_null(nt) && !json_is_array(nt))
        return lfail(l, nt, "spec.nodeTaints", "must be a list of taints");
    size_t cnt = json_array_size(nt);
    if (cnt && !(fs.taints = calloc(cnt, sizeof *fs.taints)))
        return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    for (size_t i = 0; i < cnt && st == TD_OK; i++) {
        json_t *e = json_array_get(nt, i);
        char f[64];
        snprintf(f, sizeof f, "spec.nodeTaints[%zu]", i);
        static const char *const tk[] = {"key", "value", "effect", "timeAdded", NULL};
        fs.ntaints = i + 1;
        if (!json_is_object(e)) {
            st = lfail(l, e, f, "must be a mapping");
            break;
        }
        if ((st = only_fields(l, e, f, tk)) != TD_OK ||
            (st = opt_str(l, e, "key", f, &fs.taints[i].key)) != TD_OK ||
            (st = opt_str(l, e, "value", f, &fs.taints[i].value)) != TD_OK ||
            (st = opt_str(l, e, "effect", f, &fs.taints[i].effect)) != TD_OK)
            break;
        if (!fs.taints[i].key || !*fs.taints[i].key)
            st = lfail(l, e, f, "key: required");
        else if (!fs.taints[i].effect || !is_effect(fs.taints[i].effect))
            st = lfail(l, e, f, "effect: required, NoSchedule, PreferNoSchedule or NoExecute");
    }
    if (st == TD_OK)
        st = parse_tolerations(l, json_object_get(spec, "tolerations"), "spec.tolerations",
                               &fs.tols, &fs.ntols);
    if (st == TD_OK)
        st = parse_node_labels(l, json_object_get(spec, "nodeLabels"), &fs);
    int id;
    if (st == TD_OK && intern_flavor(q, l->name, &id) != 0)
        st = td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    if (st != TD_OK) {
        free_flavor_spec(&fs);
        return st;
    }
    q->flavor_defined[id] = true;
    free_flavor_spec(&q->flavor_specs[id]); /* defined again: the last one counts */
    q->flavor_specs[id] = fs;
    return TD_OK;
}

/* ---- ClusterQueue ------------------------------------------------------- */

static const char *const cq_spec_fields[] = {
    "resourceGroups", "cohort", "cohortName", "queueingStrategy", "namespaceSelector",
    "preemption", "flavorFungibility", "fairSharing", "stopPolicy", NULL};

static td_status parse_enum(lctx *l, const json_t *parent, const char *key, const char *field,
                            const char *const *values, int def, int *out)
{
    json_t *v = json_object_get(parent, key);
    *out = def;
    if (!v)
        return TD_OK;
    for (int i = 0; json_is_string(v) && values[i]; i++)
        if (strcmp(values[i], json_string_value(v)) == 0) {
            *out = i;
            return TD_OK;
        }
    char allowed[256] = "";
    for (int i = 0; values[i]; i++)
        snprintf(allowed + strlen(allowed), sizeof allowed - strlen(allowed), "%s%s",
                 i ? ", " : "", values[i]);
    return lfail(l, v, field, "must be one of %s", allowed);
}

static td_status parse_groups(lctx *l, const json_t *spec, cluster_queue *c, bool is_cohort);

/* Parses everything into c (zeroed by the caller); on error the caller frees c. */
static td_status parse_cq(lctx *l, cluster_queue *c)
{
    json_t *spec = json_object_get(l->obj, "spec");
    if (!json_is_object(spec))
        return lfail(l, spec, "spec", "required: a mapping");
    TD_TRY(only_fields(l, spec, "spec", cq_spec_fields));
    if (!(c->name = td__qstrdup(l->name)) || !(c->where = where_of(l, l->obj)))
        return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    c->cohort = QNONE;
    json_t *pe = json_object_get(td_json_path(l->obj, "metadata.annotations"),
                                 "tenantd.dev/preemption-enforcement");
    if (pe) {
        const char *m = json_string_value(pe);
        if (!m || (strcmp(m, "enforce") != 0 && strcmp(m, "shadow") != 0))
            return lfail(l, pe, "metadata.annotations.tenantd.dev/preemption-enforcement",
                         "must be enforce or shadow");
        c->shadow_preemption = strcmp(m, "shadow") == 0;
    }
    const char *cohort = td_json_str(spec, "cohort");
    if (!cohort)
        cohort = td_json_str(spec, "cohortName");
    if (cohort && *cohort && !(c->cohort_name = td__qstrdup(cohort)))
        return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");

    static const char *const strategies[] = {"BestEffortFIFO", "StrictFIFO", NULL};
    int v;
    TD_TRY(parse_enum(l, spec, "queueingStrategy", "spec.queueingStrategy", strategies, 0, &v));
    c->strict_fifo = v == 1;

    json_t *ns = json_object_get(spec, "namespaceSelector");
    if (ns && !(json_is_object(ns) && json_object_size(ns) == 0))
        return lfail(l, ns, "spec.namespaceSelector",
                     "only {} (every namespace) is supported; LocalQueues decide the mapping");
    json_t *stop = json_object_get(spec, "stopPolicy");
    if (stop && !(json_is_string(stop) && strcmp(json_string_value(stop), "None") == 0))
        return lfail(l, stop, "spec.stopPolicy", "only None is supported");
    json_t *ff = json_object_get(spec, "flavorFungibility");
    c->try_next_when_preempt = true; /* Kueue's defaults */
    if (ff) {
        static const char *const ffk[] = {"whenCanBorrow", "whenCanPreempt", "preference", NULL};
        if (!json_is_object(ff))
            return lfail(l, ff, "spec.flavorFungibility", "must be a mapping");
        TD_TRY(only_fields(l, ff, "spec.flavorFungibility", ffk));
        /* v1beta2 names; v1beta1's Borrow and Preempt mean MayStopSearch */
        static const char *const wcb[] = {"MayStopSearch", "TryNextFlavor", "Borrow", NULL};
        static const char *const wcp[] = {"MayStopSearch", "TryNextFlavor", "Preempt", NULL};
        static const char *const pref[] = {"BorrowingOverPreemption", "PreemptionOverBorrowing",
                                           NULL};
        TD_TRY(parse_enum(l, ff, "whenCanBorrow", "spec.flavorFungibility.whenCanBorrow", wcb, 0,
                          &v));
        c->try_next_when_borrow = v == 1;
        TD_TRY(parse_enum(l, ff, "whenCanPreempt", "spec.flavorFungibility.whenCanPreempt", wcp, 1,
                          &v));
        c->try_next_when_preempt = v == 1;
        json_t *pv = json_object_get(ff, "preference");
        TD_TRY(parse_enum(l, ff, "preference", "spec.flavorFungibility.preference", pref, 0, &v));
        c->preference = (ff_preference)v;
        if (pv && !(c->try_next_when_borrow && c->try_next_when_preempt))
            return lfail(l, pv, "spec.flavorFungibility.preference",
                         "preference can only be set when both whenCanBorrow and whenCanPreempt "
                         "are TryNextFlavor");
    }
    json_t *fs = json_object_get(spec, "fairSharing");
    c->fair_weight = 1000;
    if (fs) {
        /* Weights count only with fair sharing enabled in Kueue's
         * Configuration, as in Kueue. */
        static const char *const fsk[] = {"weight", NULL};
        if (!json_is_object(fs))
            return lfail(l, fs, "spec.fairSharing", "must be a mapping");
        TD_TRY(only_fields(l, fs, "spec.fairSharing", fsk));
        json_t *wt = json_object_get(fs, "weight");
        if (wt)
            TD_TRY(parse_milli(l, wt, "spec.fairSharing.weight", &c->fair_weight, NULL));
    }
    json_t *pre = json_object_get(spec, "preemption");
    if (pre) {
        static const char *const pk[] = {"reclaimWithinCohort", "withinClusterQueue",
                                         "borrowWithinCohort", NULL};
        TD_TRY(only_fields(l, pre, "spec.preemption", pk));
        static const char *const reclaim[] = {"Never", "LowerPriority", "Any", NULL};
        static const char *const within[] = {"Never", "LowerPriority",
                                             "LowerOrNewerEqualPriority", NULL};
        TD_TRY(parse_enum(l, pre, "reclaimWithinCohort", "spec.preemption.reclaimWithinCohort",
                          reclaim, 0, &v));
        c->reclaim = (reclaim_policy)v;
        TD_TRY(parse_enum(l, pre, "withinClusterQueue", "spec.preemption.withinClusterQueue",
                          within, 0, &v));
        c->within = (within_policy)v;
        json_t *bwc = json_object_get(pre, "borrowWithinCohort");
        if (bwc) {
            static const char *const bk[] = {"policy", "maxPriorityThreshold", NULL};
            static const char *const bpol[] = {"Never", "LowerPriority", NULL};
            if (!json_is_object(bwc))
                return lfail(l, bwc, "spec.preemption.borrowWithinCohort", "must be a mapping");
            TD_TRY(only_fields(l, bwc, "spec.preemption.borrowWithinCohort", bk));
            TD_TRY(parse_enum(l, bwc, "policy", "spec.preemption.borrowWithinCohort.policy", bpol,
                              0, &v));
            c->bwc = v == 1;
            json_t *mp = json_object_get(bwc, "maxPriorityThreshold");
            if (mp) {
                td_err e;
                if (td_json_int32(mp, &c->bwc_max_priority, &e) != TD_OK)
                    return lfail(l, mp, "spec.preemption.borrowWithinCohort.maxPriorityThreshold",
                                 "%s", e.msg);
                c->bwc_has_max = true;
            }
            /* Kueue's validation: borrowing within the cohort preempts
             * there, which needs reclaimWithinCohort. */
            if (c->bwc && c->reclaim == RECLAIM_NEVER)
                return lfail(l, bwc, "spec.preemption.borrowWithinCohort.policy",
                             "LowerPriority needs reclaimWithinCohort other than Never");
        }
    }

    return parse_groups(l, spec, c, false);
}

/* spec.resourceGroups of a ClusterQueue or (is_cohort) a Cohort into c's
 * groups and quota; c->cohort_name is the cohort or parent, without which
 * borrowingLimit and lendingLimit make no sense. */
static td_status parse_groups(lctx *l, const json_t *spec, cluster_queue *c, bool is_cohort)
{
    td_queue *q = l->q;
    json_t *rgs = json_object_get(spec, "resourceGroups");
    if (rgs && !json_is_array(rgs))
        return lfail(l, rgs, "spec.resourceGroups", "must be a list");
    size_t nrg = json_array_size(rgs);
    if (nrg && !(c->groups = calloc(nrg, sizeof *c->groups)))
        return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    for (size_t g = 0; g < nrg; g++) {
        char field[256];
        json_t *rg = json_array_get(rgs, g);
        resource_group *grp = &c->groups[g];
        c->ngroups = g + 1;
        snprintf(field, sizeof field, "spec.resourceGroups[%zu]", g);
        if (!json_is_object(rg))
            return lfail(l, rg, field, "must be a mapping");
        static const char *const rgk[] = {"coveredResources", "flavors", NULL};
        TD_TRY(only_fields(l, rg, field, rgk));
        json_t *cov = json_object_get(rg, "coveredResources");
        json_t *fls = json_object_get(rg, "flavors");
        snprintf(field, sizeof field, "spec.resourceGroups[%zu].coveredResources", g);
        if (!json_is_array(cov) || json_array_size(cov) == 0)
            return lfail(l, cov, field, "required: a non-empty list of resource names");
        snprintf(field, sizeof field, "spec.resourceGroups[%zu].flavors", g);
        if (!json_is_array(fls) || json_array_size(fls) == 0)
            return lfail(l, fls, field, "required: a non-empty list of flavors");
        grp->resources = calloc(json_array_size(cov), sizeof *grp->resources);
        grp->flavors = calloc(json_array_size(fls), sizeof *grp->flavors);
        grp->flavor_where = calloc(json_array_size(fls), sizeof *grp->flavor_where);
        if (!grp->resources || !grp->flavors || !grp->flavor_where)
            return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
        for (size_t i = 0; i < json_array_size(cov); i++) {
            json_t *r = json_array_get(cov, i);
            snprintf(field, sizeof field, "spec.resourceGroups[%zu].coveredResources[%zu]", g, i);
            if (!json_is_string(r) || !*json_string_value(r))
                return lfail(l, r, field, "must be a resource name");
            for (size_t h = 0; h <= g; h++)
                for (size_t k = 0; k < (h == g ? i : c->groups[h].nresources); k++)
                    if (strcmp(q->resource_names[c->groups[h].resources[k]],
                               json_string_value(r)) == 0)
                        return lfail(l, r, field, "resource %s is covered twice",
                                     json_string_value(r));
            int id;
            if (intern_resource(q, json_string_value(r), TD_QFMT_DECIMAL_SI, &id) != 0)
                return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
            grp->resources[grp->nresources++] = id;
        }
        for (size_t f = 0; f < json_array_size(fls); f++) {
            json_t *fl = json_array_get(fls, f);
            snprintf(field, sizeof field, "spec.resourceGroups[%zu].flavors[%zu]", g, f);
            if (!json_is_object(fl))
                return lfail(l, fl, field, "must be a mapping");
            static const char *const flk[] = {"name", "resources", NULL};
            TD_TRY(only_fields(l, fl, field, flk));
            const char *fname = td_json_str(fl, "name");
            if (!fname || !*fname)
                return lfail(l, fl, field, "name: required");
            int fid;
            if (intern_flavor(q, fname, &fid) != 0)
                return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
            for (size_t h = 0; h <= g; h++)
                for (size_t k = 0; k < (h == g ? f : c->groups[h].nflavors); k++)
                    if (c->groups[h].flavors[k] == fid)
                        return lfail(l, fl, field, "flavor %s is listed twice", fname);
            grp->flavors[f] = fid;
            grp->flavor_where[f] = where_of(l, json_object_get(fl, "name"));
            grp->nflavors = f + 1;
            if (!grp->flavor_where[f])
                return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
            json_t *res = json_object_get(fl, "resources");
            if (!json_is_array(res) || json_array_size(res) != grp->nresources)
                return lfail(l, res ? res : fl, field,
                             "resources must list the %zu covered resources, in order",
                             grp->nresources);
            for (size_t i = 0; i < grp->nresources; i++) {
                json_t *re = json_array_get(res, i);
                char rf[300];
                snprintf(rf, sizeof rf, "%s.resources[%zu]", field, i);
                static const char *const rk[] = {"name", "nominalQuota", "borrowingLimit",
                                                 "lendingLimit", NULL};
                if (!json_is_object(re))
                    return lfail(l, re, rf, "must be a mapping");
                TD_TRY(only_fields(l, re, rf, rk));
                const char *rname = td_json_str(re, "name");
                const char *want = q->resource_names[grp->resources[i]];
                if (!rname || strcmp(rname, want) != 0)
                    return lfail(l, re, rf, "name must be %s (coveredResources order)", want);
                quota_entry e = {fid, grp->resources[i], 0, QUNLIMITED, QUNLIMITED};
                char sub[340];
                td_qformat fmt;
                json_t *nq = json_object_get(re, "nominalQuota");
                snprintf(sub, sizeof sub, "%s.nominalQuota", rf);
                if (!nq)
                    return lfail(l, re, sub, "required");
                TD_TRY(parse_milli(l, nq, sub, &e.nominal, &fmt));
                if (json_is_string(nq))
                    q->resource_formats[e.resource] = fmt;
                json_t *bl = json_object_get(re, "borrowingLimit");
                if (bl) {
                    snprintf(sub, sizeof sub, "%s.borrowingLimit", rf);
                    if (!c->cohort_name)
                        return lfail(l, bl, sub, "must not be set when there is no %s",
                                     is_cohort ? "parent" : "cohort");
                    TD_TRY(parse_milli(l, bl, sub, &e.borrowing_limit, NULL));
                }
                json_t *ll = json_object_get(re, "lendingLimit");
                if (ll) {
                    snprintf(sub, sizeof sub, "%s.lendingLimit", rf);
                    if (!c->cohort_name)
                        return lfail(l, ll, sub, "must not be set when there is no %s",
                                     is_cohort ? "parent" : "cohort");
                    TD_TRY(parse_milli(l, ll, sub, &e.lending_limit, NULL));
                    /* a Cohort lends what its subtree holds, not only its own */
                    if (!is_cohort && e.lending_limit > e.nominal)
                        return lfail(l, ll, sub, "must be less than or equal to nominalQuota");
                }
                quota_entry *qe = realloc(c->quota, (c->nquota + 1) * sizeof *qe);
                if (!qe)
                    return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
                c->quota = qe;
                qe[c->nquota++] = e;
            }
        }
    }
    return TD_OK;
}

/* ---- other kinds --------------------------------------------------------- */

static td_status add_priority(lctx *l, bool workload_class)
{
    td_queue *q = l->q;
    json_t *v = json_object_get(l->obj, "value");
    if (!v)
        return lfail(l, v, "value", "required: an integer priority");
    int32_t val;
    td_err e;
    if (td_json_int32(v, &val, &e) != TD_OK)
        return lfail(l, v, "value", "%s", e.msg); /* never wrapped into another priority */
    smap *m = workload_class ? &q->wpc_values : &q->pc_values;
    int32_t **vals = workload_class ? &q->wpc_vals : &q->pc_vals;
    size_t *n = workload_class ? &q->nwpcs : &q->npcs;
    size_t id = td__smap_get(m, l->name);
    if (id == QNONE) {
        int32_t *p = realloc(*vals, (*n + 1) * sizeof *p);
        if (!p)
            return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
        *vals = p;
        if (td__smap_put(m, l->name, *n) != 0)
            return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
        id = (*n)++;
    }
    (*vals)[id] = val;
    if (!workload_class && json_is_true(json_object_get(l->obj, "globalDefault"))) {
        q->has_default_pc = true;
        q->default_pc = val;
    }
    return TD_OK;
}

static td_status add_local_queue(lctx *l)
{
    td_queue *q = l->q;
    json_t *spec = json_object_get(l->obj, "spec");
    static const char *const lqk[] = {"clusterQueue", "stopPolicy", NULL};
    if (!json_is_object(spec))
        return lfail(l, spec, "spec", "required: a mapping with clusterQueue");
    TD_TRY(only_fields(l, spec, "spec", lqk));
    const char *target = td_json_str(spec, "clusterQueue");
    if (!target || !*target)
        return lfail(l, spec, "spec.clusterQueue", "required");
    const char *ns = td_json_str(l->obj, "metadata.namespace");
    char key[512];
    snprintf(key, sizeof key, "%s/%s", ns ? ns : "default", l->name);
    if (td__smap_get(&q->lq_ids, key) != QNONE)
        return lfail(l, NULL, "metadata.name", "LocalQueue %s is defined twice", key);
    size_t cap = q->caplqs;
    if (grow((void **)&q->lq_keys, &cap, q->nlqs + 1, sizeof(char *)) != 0)
        return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    cap = q->caplqs;
    if (grow((void **)&q->lq_targets, &cap, q->nlqs + 1, sizeof(char *)) != 0)
        return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    cap = q->caplqs;
    if (grow((void **)&q->lq_where, &cap, q->nlqs + 1, sizeof(char *)) != 0)
        return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    q->caplqs = cap;
    q->lq_keys[q->nlqs] = td__qstrdup(key);
    q->lq_targets[q->nlqs] = td__qstrdup(target);
    q->lq_where[q->nlqs] = where_of(l, json_object_get(spec, "clusterQueue"));
    if (!q->lq_keys[q->nlqs] || !q->lq_targets[q->nlqs] || !q->lq_where[q->nlqs] ||
        td__smap_put(&q->lq_ids, key, q->nlqs) != 0)
        return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    q->nlqs++;
    return TD_OK;
}

#define MAX_NODES TD_QUEUE_MAX_NODES

/* NodePool (tenantd kind): the queue reads spec.flavor, spec.nodes and
 * spec.capacity; taint, nodeSelector and tenants belong to admission. The
 * kind's validator (kinds.c) checks the fields, with the messages an
 * apply gives; what is left here is the queue's own rules. */
static td_status add_node_pool(lctx *l)
{
    td_queue *q = l->q;
    td_vctx vc = {.src = l->src, .obj = l->obj, .kind = "NodePool", .err = l->err};
    snprintf(vc.who, sizeof vc.who, "NodePool %s", l->name);
    TD_TRY(td__queue_validate_nodepool(&vc));
    json_t *spec = json_object_get(l->obj, "spec");
    const char *flavor = td_json_str(spec, "flavor");
    json_t *nodes = json_object_get(spec, "nodes");
    json_t *cap = json_object_get(spec, "capacity");
    if (!flavor || !*flavor)
        return TD_OK; /* a pool without a flavor is admission's business only */
    if (!nodes) /* optional to admission, required to place a flavor's workloads */
        return lfail(l, spec, "spec.nodes", "must be an integer in [0, %d]", MAX_NODES);
    int64_t total = json_integer_value(nodes);
    for (size_t i = 0; i < q->npools; i++) {
        if (strcmp(q->pools[i].name, l->name) == 0)
            return lfail(l, NULL, "metadata.name", "NodePool %s is defined twice", l->name);
        total += q->pools[i].nodes;
    }
    if (total > MAX_NODES)
        return lfail(l, nodes, "spec.nodes", "more than %d nodes in all NodePools", MAX_NODES);
    pool_def p = {0};
    p.nodes = json_integer_value(nodes);
    size_t ncap = json_object_size(cap);
    p.cap_names = calloc(ncap ? ncap : 1, sizeof *p.cap_names);
    p.cap_vals = calloc(ncap ? ncap : 1, sizeof *p.cap_vals);
    p.name = td__qstrdup(l->name);
    p.flavor = td__qstrdup(flavor);
    p.where = where_of(l, l->obj);
    td_status st = TD_OK;
    if (!p.cap_names || !p.cap_vals || !p.name || !p.flavor || !p.where)
        st = td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    const char *rname;
    json_t *v;
    if (st == TD_OK)
        json_object_foreach(cap, rname, v)
        {
            char f[300];
            snprintf(f, sizeof f, "spec.capacity.%s", rname);
            if ((st = parse_milli(l, v, f, &p.cap_vals[p.ncap], NULL)) != TD_OK)
                break;
            if (!(p.cap_names[p.ncap] = td__qstrdup(rname))) {
                st = td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
                break;
            }
            p.ncap++;
        }
    pool_def *np = st == TD_OK ? realloc(q->pools, (q->npools + 1) * sizeof *np) : NULL;
    if (st == TD_OK && !np)
        st = td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    if (st != TD_OK) {
        for (size_t k = 0; k < p.ncap; k++)
            free(p.cap_names[k]);
        free(p.cap_names);
        free(p.cap_vals);
        free(p.name);
        free(p.flavor);
        free(p.where);
        return st;
    }
    q->pools = np;
    q->pools[q->npools++] = p;
    return TD_OK;
}

/* Cohort: its own quota (spec.resourceGroups, lent to the members) and its
 * parent (spec.parentName, or spec.parent as in v1alpha1). */
static td_status add_cohort(lctx *l)
{
    td_queue *q = l->q;
    json_t *spec = json_object_get(l->obj, "spec");
    if (spec && !json_is_object(spec))
        return lfail(l, spec, "spec", "must be a mapping");
    static const char *const ck[] = {"resourceGroups", "parentName", "parent", "fairSharing",
                                     NULL};
    if (spec)
        TD_TRY(only_fields(l, spec, "spec", ck));
    for (size_t i = 0; i < q->ncohort_defs; i++)
        if (strcmp(q->cohort_defs[i].name, l->name) == 0)
            return lfail(l, NULL, "metadata.name", "Cohort %s is defined twice", l->name);
    cluster_queue d = {0};
    d.cohort = QNONE;
    const char *parent = td_json_str(spec, "parentName");
    const char *field = "spec.parentName";
    if (!parent) {
        parent = td_json_str(spec, "parent");
        field = "spec.parent";
    }
    td_status st = TD_OK;
    if (parent && strcmp(parent, l->name) == 0)
        st = lfail(l, json_object_get(spec, strchr(field, '.') + 1), field,
                   "cycle: Cohort %s -> %s", l->name, parent);
    if (st == TD_OK && (!(d.name = td__qstrdup(l->name)) || !(d.where = where_of(l, l->obj)) ||
                        (parent && *parent && !(d.cohort_name = td__qstrdup(parent)))))
        st = td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    if (st == TD_OK && spec)
        st = parse_groups(l, spec, &d, true);
    /* a Cohort's fairSharing.weight: its share against its siblings */
    d.fair_weight = 1000;
    json_t *fs = json_object_get(spec, "fairSharing");
    if (st == TD_OK && fs) {
        static const char *const fsk[] = {"weight", NULL};
        if (!json_is_object(fs))
            st = lfail(l, fs, "spec.fairSharing", "must be a mapping");
        if (st == TD_OK)
            st = only_fields(l, fs, "spec.fairSharing", fsk);
        json_t *wt = json_object_get(fs, "weight");
        if (st == TD_OK && wt)
            st = parse_milli(l, wt, "spec.fairSharing.weight", &d.fair_weight, NULL);
    }
    cluster_queue *nd = st == TD_OK ? realloc(q->cohort_defs, (q->ncohort_defs + 1) * sizeof *nd)
                                    : NULL;
    if (st == TD_OK && !nd)
        st = td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    if (st != TD_OK) {
        free_cq(&d);
        return st;
    }
    q->cohort_defs = nd;
    q->cohort_defs[q->ncohort_defs++] = d;
    return TD_OK;
}

/* Kueue's Configuration: fairSharing is what changes admission; the
 * fields that configure Kueue's controller process are accepted and have
 * no meaning here; anything else that would change semantics is refused. */
static td_status add_configuration(lctx *l)
{
    td_queue *q = l->q;
    static const char *const top[] = {
        "apiVersion", "kind", "metadata", "fairSharing", "namespace", "manageJobsWithoutQueueName",
        "managedJobsNamespaceSelector", "internalCertManagement", "clientConnection",
        "integrations", "queueVisibility", "health", "metrics", "webhook", "leaderElection",
        "controller", "pprofBindAddress", "featureGates", NULL};
    TD_TRY(only_fields(l, l->obj, "", top));
    json_t *fs = json_object_get(l->obj, "fairSharing");
    if (!fs)
        return TD_OK;
    static const char *const fsk[] = {"enable", "preemptionStrategies", NULL};
    if (!json_is_object(fs))
        return lfail(l, fs, "fairSharing", "must be a mapping");
    TD_TRY(only_fields(l, fs, "fairSharing", fsk));
    json_t *en = json_object_get(fs, "enable");
    if (en && !json_is_boolean(en))
        return lfail(l, en, "fairSharing.enable", "must be true or false");
    fs_strategy st[2] = {FS_LE_FINAL_SHARE, FS_LT_INITIAL_SHARE};
    size_t n = 2;
    json_t *ps = json_object_get(fs, "preemptionStrategies");
    if (ps) {
        /* Kueue's validation: one of these four lists. */
        static const char *const names[] = {"LessThanOrEqualToFinalShare",
                                            "LessThanInitialShare", NULL};
        if (!json_is_array(ps) || json_array_size(ps) == 0 || json_array_size(ps) > 2)
            return lfail(l, ps, "fairSharing.preemptionStrategies",
                         "must be a list of one or two of LessThanOrEqualToFinalShare, "
                         "LessThanInitialShare");
        n = json_array_size(ps);
        for (size_t i = 0; i < n; i++) {
            json_t *e = json_array_get(ps, i);
            int k = -1;
            for (int j = 0; names[j]; j++)
                if (json_is_string(e) && strcmp(json_string_value(e), names[j]) == 0)
                    k = j;
            char f[64];
            snprintf(f, sizeof f, "fairSharing.preemptionStrategies[%zu]", i);
            if (k < 0)
                return lfail(l, e, f, "must be LessThanOrEqualToFinalShare or LessThanInitialShare");
            st[i] = (fs_strategy)k;
        }
        if (n == 2 && !(st[0] == FS_LE_FINAL_SHARE && st[1] == FS_LT_INITIAL_SHARE))
            return lfail(l, ps, "fairSharing.preemptionStrategies",
                         "two strategies must be [LessThanOrEqualToFinalShare, "
                         "LessThanInitialShare]");
    }
    q->fair_sharing = json_is_true(en);
    q->fs_strategies[0] = st[0];
    q->fs_strategies[1] = st[1];
    q->nfs_strategies = n;
    return TD_OK;
}

td_status td_queue_add_object(td_queue *q, const json_t *obj, const td_manifest *src, td_err *err)
{
    const char *kind = td_json_str(obj, "kind");
    const char *name = td_json_str(obj, "metadata.name");
    lctx l = {q, obj, src, err, kind ? kind : "object", name ? name : "(unnamed)"};
    if (!kind)
        return TD_OK;
    if (q->sealed)
        return td_err_set(err, TD_EINVAL, "queue: objects must be added before the queue is sealed");
    if (strcmp(kind, "Configuration") == 0) {
        l.name = name ? name : "kueue";
        return add_configuration(&l);
    }
    if (!name || !*name)
        return lfail(&l, obj, "metadata.name", "required");
    if (strcmp(kind, "PriorityClass") == 0)
        return add_priority(&l, false);
    if (strcmp(kind, "WorkloadPriorityClass") == 0)
        return add_priority(&l, true);
    if (strcmp(kind, "LocalQueue") == 0)
        return add_local_queue(&l);
    if (strcmp(kind, "ResourceFlavor") == 0)
        return add_resource_flavor(&l);
    if (strcmp(kind, "NodePool") == 0)
        return add_node_pool(&l);
    if (strcmp(kind, "Cohort") == 0)
        return add_cohort(&l);
    if (strcmp(kind, "ClusterQueue") != 0)
        return TD_OK;
    if (td__smap_get(&q->cq_ids, name) != QNONE)
        return lfail(&l, NULL, "metadata.name", "ClusterQueue %s is defined twice", name);
    if (grow((void **)&q->cqs, &q->capcqs, q->ncqs + 1, sizeof *q->cqs) != 0)
        return td_err_set(err, TD_ENOMEM, "queue: out of memory");
    cluster_queue *c = &q->cqs[q->ncqs];
    memset(c, 0, sizeof *c);
    td_status s = parse_cq(&l, c);
    if (s == TD_OK && td__smap_put(&q->cq_ids, name, q->ncqs) != 0)
        s = td_err_set(err, TD_ENOMEM, "queue: out of memory");
    if (s != TD_OK) {
        /* Interned names may remain; they are harmless, unused entries. */
        free_cq(c);
        memset(c, 0, sizeof *c);
        return s;
    }
    q->ncqs++;
    return TD_OK;
}

/* ---- seal ---------------------------------------------------------------- */

static int64_t sadd(int64_t a, int64_t b)
{
    return a > QUNLIMITED - b ? QUNLIMITED : a + b;
}

static size_t find_or_add_cohort(td_queue *q, const char *name)
{
    for (size_t k = 0; k < q->ncohorts; k++)
        if (strcmp(q->cohorts[k].name, name) == 0)
            return k;
    size_t nfr = q->nfr ? q->nfr : 1;
    cohort *p = realloc(q->cohorts, (q->ncohorts + 1) * sizeof *p);
    if (!p)
        return QNONE;
    q->cohorts = p;
    cohort *co = &p[q->ncohorts];
    memset(co, 0, sizeof *co);
    co->parent = QNONE;
    co->def = QNONE;
    co->fair_weight = 1000;
    co->name = td__qstrdup(name);
    co->lendable = calloc(nfr, sizeof(int64_t));
    co->used = calloc(nfr, sizeof(int64_t));
    co->nominal = calloc(nfr, sizeof(int64_t));
    co->borrowing_limit = malloc(nfr * sizeof(int64_t));
    co->lending_limit = malloc(nfr * sizeof(int64_t));
    co->guaranteed = calloc(nfr, sizeof(int64_t));
    q->ncohorts++; /* counted now so destroy frees what exists */
    if (!co->name || !co->lendable || !co->used || !co->nominal || !co->borrowing_limit ||
        !co->lending_limit || !co->guaranteed)
        return QNONE;
    for (size_t fr = 0; fr < nfr; fr++)
        co->borrowing_limit[fr] = co->lending_limit[fr] = QUNLIMITED;
    return q->ncohorts - 1;
}

static int push_id(size_t **v, size_t *n, size_t id)
{
    size_t *p = realloc(*v, (*n + 1) * sizeof *p);
    if (!p)
        return -1;
    *v = p;
    p[(*n)++] = id;
    return 0;
}

/* Cohorts: the defined ones (with quota and parent), the ones ClusterQueues
 * and parents name (implicit, empty), parents linked and cycles refused;
 * then, deepest first, what each subtree holds (Kueue's SubtreeQuota: own
 * nominal plus what every child does not keep for itself) and keeps
 * (guaranteed: subtree - lendingLimit). Usage starts at zero. */
static td_status build_cohorts(td_queue *q, td_err *err)
{
    size_t nfr = q->nfr;
    for (size_t i = 0; i < q->ncohort_defs; i++) {
        size_t co = find_or_add_cohort(q, q->cohort_defs[i].name);
        if (co == QNONE)
            return td_err_set(err, TD_ENOMEM, "queue: out of memory");
        q->cohorts[co].def = i;
        q->cohorts[co].fair_weight = q->cohort_defs[i].fair_weight;
    }
    for (size_t i = 0; i < q->ncqs; i++) {
        cluster_queue *c = &q->cqs[i];
        c->cohort = QNONE;
        /* an inactive ClusterQueue is not in Kueue's snapshot: it lends nothing */
        if (!c->cohort_name || c->inactive)
            continue;
        size_t co = find_or_add_cohort(q, c->cohort_name);
        if (co == QNONE || push_id(&q->cohorts[co].members, &q->cohorts[co].nmembers, i) != 0)
            return td_err_set(err, TD_ENOMEM, "queue: out of memory");
        c->cohort = co;
    }
    for (size_t k = 0; k < q->ncohorts; k++) {
        size_t d = q->cohorts[k].def;
        if (d == QNONE || !q->cohort_defs[d].cohort_name)
            continue;
        size_t p = find_or_add_cohort(q, q->cohort_defs[d].cohort_name);
        if (p == QNONE)
            return td_err_set(err, TD_ENOMEM, "queue: out of memory");
        q->cohorts[k].parent = p;
    }
    for (size_t k = 0; k < q->ncohorts; k++) {
        size_t at = k, steps = 0;
        while (at != QNONE && steps <= q->ncohorts) {
            at = q->cohorts[at].parent;
            steps++;
            if (at == k)
                break;
        }
        if (at != k)
            continue;
        char chain[512] = "";
        at = k;
        do {
            snprintf(chain + strlen(chain), sizeof chain - strlen(chain), "%s -> ",
                     q->cohorts[at].name);
            at = q->cohorts[at].parent;
        } while (at != k);
        snprintf(chain + strlen(chain), sizeof chain - strlen(chain), "%s", q->cohorts[k].name);
        const cluster_queue *d = &q->cohort_defs[q->cohorts[k].def];
        return td_err_set(err, TD_EINVAL, "%sCohort %s: spec.parentName: cycle %s", d->where,
                          d->name, chain);
    }
    size_t *depth = calloc(q->ncohorts ? q->ncohorts : 1, sizeof *depth);
    size_t *order = calloc(q->ncohorts ? q->ncohorts : 1, sizeof *order);
    if (!depth || !order) {
        free(depth);
        free(order);
        return td_err_set(err, TD_ENOMEM, "queue: out of memory");
    }
    for (size_t k = 0; k < q->ncohorts; k++) {
        cohort *co = &q->cohorts[k];
        for (size_t at = co->parent; at != QNONE; at = q->cohorts[at].parent)
            depth[k]++;
        order[k] = k;
        if (co->def != QNONE) {
            const cluster_queue *d = &q->cohort_defs[co->def];
            for (size_t e = 0; e < d->nquota; e++) {
                size_t fr = (size_t)d->quota[e].flavor * q->nres + (size_t)d->quota[e].resource;
                co->nominal[fr] = d->quota[e].nominal;
                co->borrowing_limit[fr] = d->quota[e].borrowing_limit;
                co->lending_limit[fr] = d->quota[e].lending_limit;
            }
        }
        for (size_t fr = 0; fr < nfr; fr++)
            co->lendable[fr] = co->nominal[fr];
    }
    for (size_t i = 0; i < q->ncqs; i++) {
        cluster_queue *c = &q->cqs[i];
        if (c->cohort == QNONE)
            continue;
        for (size_t fr = 0; fr < nfr; fr++)
            if (c->has[fr])
                q->cohorts[c->cohort].lendable[fr] =
                    sadd(q->cohorts[c->cohort].lendable[fr], c->nominal[fr] - c->guaranteed[fr]);
    }
    /* deepest first: a cohort's subtree is complete before it is lent up */
    for (size_t a = 1; a < q->ncohorts; a++)
        for (size_t b = a; b > 0 && depth[order[b - 1]] < depth[order[b]]; b--) {
            size_t t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    for (size_t i = 0; i < q->ncohorts; i++) {
        cohort *co = &q->cohorts[order[i]];
        for (size_t fr = 0; fr < nfr; fr++) {
            int64_t ll = co->lending_limit[fr];
            co->guaranteed[fr] = ll == QUNLIMITED || ll >= co->lendable[fr] ? 0
                                                                            : co->lendable[fr] - ll;
            if (co->parent != QNONE)
                q->cohorts[co->parent].lendable[fr] =
                    sadd(q->cohorts[co->parent].lendable[fr], co->lendable[fr] - co->guaranteed[fr]);
        }
    }
    free(depth);
    free(order);
    /* every ClusterQueue of a tree is a member of its root, for preemption */
    for (size_t i = 0; i < q->ncqs; i++) {
        size_t at = q->cqs[i].cohort;
        if (at == QNONE)
            continue;
        while (q->cohorts[at].parent != QNONE)
            at = q->cohorts[at].parent;
        q->cqs[i].root = at;
        if (push_id(&q->cohorts[at].all_members, &q->cohorts[at].nall, i) != 0)
            return td_err_set(err, TD_ENOMEM, "queue: out of memory");
    }
    return TD_OK;
}

static _Thread_local const td_queue *pool_sort_q;

static int cmp_pools(const void *a, const void *b)
{
    const pool_def *x = a, *y = b;
    size_t fx = td__smap_get(&pool_sort_q->flavor_ids, x->flavor);
    size_t fy = td__smap_get(&pool_sort_q->flavor_ids, y->flavor);
    if (fx != fy)
        return fx < fy ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Nodes of the NodePools whose flavor is a ResourceFlavor the queue knows;
 * a resource a node does not list it has none of (as a kubelet reports). */
static td_status build_nodes(td_queue *q, td_err *err)
{
    size_t nres = q->nres, nf = q->nflavors;
    q->flavor_node_start = calloc(nf ? nf : 1, sizeof(size_t));
    q->flavor_node_n = calloc(nf ? nf : 1, sizeof(size_t));
    q->flavor_max_cap = calloc(q->nfr ? q->nfr : 1, sizeof(int64_t));
    if (!q->flavor_node_start || !q->flavor_node_n || !q->flavor_max_cap)
        return td_err_set(err, TD_ENOMEM, "queue: out of memory");
    pool_sort_q = q;
    if (q->npools)
        qsort(q->pools, q->npools, sizeof *q->pools, cmp_pools);
    size_t total = 0;
    for (size_t i = 0; i < q->npools; i++) {
        size_t f = td__smap_get(&q->flavor_ids, q->pools[i].flavor);
        if (f != QNONE && q->flavor_defined[f])
            total += (size_t)q->pools[i].nodes;
    }
    if (total && !(q->nodes = calloc(total, sizeof *q->nodes)))
        return td_err_set(err, TD_ENOMEM, "queue: out of memory");
    for (size_t i = 0; i < q->npools; i++) {
        const pool_def *p = &q->pools[i];
        size_t f = td__smap_get(&q->flavor_ids, p->flavor);
        if (f == QNONE || !q->flavor_defined[f])
            continue;
        if (q->flavor_node_n[f] == 0)
            q->flavor_node_start[f] = q->nnodes;
        for (int64_t k = 0; k < p->nodes; k++) {
            qnode *n = &q->nodes[q->nnodes];
            char name[300];
            snprintf(name, sizeof name, "%s-%lld", p->name, (long long)k);
            n->flavor = (int)f;
            n->name = td__qstrdup(name);
            n->cap = calloc(nres ? nres : 1, sizeof(int64_t));
            n->free = calloc(nres ? nres : 1, sizeof(int64_t));
            if (!n->name || !n->cap || !n->free) {
                free(n->name);
                free(n->cap);
                free(n->free);
                memset(n, 0, sizeof *n);
                return td_err_set(err, TD_ENOMEM, "queue: out of memory");
            }
            for (size_t c = 0; c < p->ncap; c++) {
                size_t r = td__smap_get(&q->resource_ids, p->cap_names[c]);
                if (r != QNONE)
                    n->cap[r] = n->free[r] = p->cap_vals[c];
            }
            for (size_t r = 0; r < nres; r++)
                if (n->cap[r] > q->flavor_max_cap[f * nres + r])
                    q->flavor_max_cap[f * nres + r] = n->cap[r];
            q->nnodes++;
            q->flavor_node_n[f]++;
        }
    }
    return TD_OK;
}

td_status td_queue_seal(td_queue *q, td_err *err)
{
    if (q->sealed)
        return TD_OK;
    for (size_t i = 0; i < q->nlqs; i++)
        if (td__smap_get(&q->cq_ids, q->lq_targets[i]) == QNONE)
            return td_err_set(err, TD_EINVAL,
                              "%sLocalQueue %s: spec.clusterQueue: ClusterQueue \"%s\" does not "
                              "exist",
                              q->lq_where[i], q->lq_keys[i], q->lq_targets[i]);
    /* A ClusterQueue naming a ResourceFlavor that does not exist is
     * inactive, as in Kueue: its workloads wait until the flavor exists. */
    for (size_t i = 0; i < q->ncqs; i++) {
        cluster_queue *c = &q->cqs[i];
        char missing[512] = "";
        for (size_t g = 0; g < c->ngroups; g++)
            for (size_t f = 0; f < c->groups[g].nflavors; f++)
                if (!q->flavor_defined[c->groups[g].flavors[f]])
                    snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s",
                             *missing ? "," : "", q->flavor_names[c->groups[g].flavors[f]]);
        if (!*missing)
            continue;
        char why[640];
        snprintf(why, sizeof why,
                 "Can't admit new workloads: references missing ResourceFlavor(s): %s.", missing);
        free(c->inactive);
        if (!(c->inactive = td__qstrdup(why)))
            return td_err_set(err, TD_ENOMEM, "queue: out of memory");
    }
    /* A Cohort naming a ResourceFlavor that does not exist is no error, as
     * in Kueue (its cache builds a cohort's quotas whatever the flavors; a
     * Cohort has no active state): the quota is kept, and only a
     * ClusterQueue that names the flavor, inactive until it exists, could
     * use it. */
    size_t nres = q->nres, nfr = q->nflavors * q->nres;
    q->nfr = nfr;
    if (!(q->acc = calloc(nfr ? nfr : 1, sizeof *q->acc)))
        return td_err_set(err, TD_ENOMEM, "queue: out of memory");
    for (size_t i = 0; i < q->ncqs; i++) {
        cluster_queue *c = &q->cqs[i];
        c->has = calloc(nfr ? nfr : 1, sizeof *c->has);
        c->nominal = calloc(nfr ? nfr : 1, sizeof(int64_t));
        c->borrowing_limit = calloc(nfr ? nfr : 1, sizeof(int64_t));
        c->guaranteed = calloc(nfr ? nfr : 1, sizeof(int64_t));
        c->usage = calloc(nfr ? nfr : 1, sizeof(int64_t));
        c->group_of_resource = malloc((nres ? nres : 1) * sizeof(int));
        if (!c->has || !c->nominal || !c->borrowing_limit || !c->guaranteed || !c->usage ||
            !c->group_of_resource)
            return td_err_set(err, TD_ENOMEM, "queue: out of memory");
        for (size_t r = 0; r < nres; r++)
            c->group_of_resource[r] = -1;
        for (size_t g = 0; g < c->ngroups; g++)
            for (size_t k = 0; k < c->groups[g].nresources; k++)
                c->group_of_resource[c->groups[g].resources[k]] = (int)g;
        for (size_t k = 0; k < c->nquota; k++) {
            quota_entry *e = &c->quota[k];
            size_t fr = (size_t)e->flavor * nres + (size_t)e->resource;
            c->has[fr] = true;
            c->nominal[fr] = e->nominal;
            c->borrowing_limit[fr] = e->borrowing_limit;
            int64_t lendable = e->lending_limit < e->nominal ? e->lending_limit : e->nominal;
            c->guaranteed[fr] = e->nominal - lendable;
        }
    }
    td_status st = build_cohorts(q, err);
    if (st != TD_OK)
        return st;
    st = build_nodes(q, err);
    if (st != TD_OK)
        return st;
    if (td__queue_index_cohorts(q) != 0)
        return td_err_set(err, TD_ENOMEM, "queue: out of memory");
    q->sealed = true;
    return TD_OK;
}

/* ---- Workload ------------------------------------------------------------ */

/* Adds the requests of one container list to per (summing) or to max
 * (taking the maximum, for init containers). */
static td_status container_requests(lctx *l, json_t *containers, const char *field, int64_t *acc,
                                    bool take_max, char **unknown)
{
    td_queue *q = l->q;
    if (!containers)
        return TD_OK;
    if (!json_is_array(containers))
        return lfail(l, containers, field, "must be a list");
    size_t i;
    json_t *ct;
    json_array_foreach(containers, i, ct)
    {
        json_t *req = td_json_path(ct, "resources.requests");
        json_t *lim = td_json_path(ct, "resources.limits");
        for (int pass = 0; pass < 2; pass++) {
            json_t *src = pass == 0 ? req : lim;
            if (!json_is_object(src))
                continue;
            const char *rname;
            json_t *v;
            json_object_foreach(src, rname, v)
            {
                /* Requests default to limits, as the API server defaults them. */
                if (pass == 1 && req && json_object_get(req, rname))
                    continue;
                char f[512];
                snprintf(f, sizeof f, "%s[%zu].resources.%s.%s", field, i,
                         pass ? "limits" : "requests", rname);
                int64_t m;
                TD_TRY(parse_milli(l, v, f, &m, NULL));
                size_t r = td__smap_get(&q->resource_ids, rname);
                if (r == QNONE) {
                    if (m > 0 && !*unknown && !(*unknown = td__qstrdup(rname)))
                        return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
                    continue;
                }
                if (take_max)
                    acc[r] = acc[r] > m ? acc[r] : m;
                else
                    acc[r] = acc[r] > QUNLIMITED - m ? QUNLIMITED : acc[r] + m;
            }
        }
    }
    return TD_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Kueue's ValidateResources: a container whose request of a resource
 * exceeds its limit makes the workload misconfigured (never admitted).
 * Appends "FIELD[i]: Invalid value: [\"cpu\"]: requests must not exceed its
 * limits" per such container to errs (a memstream); counts them in *nerr. */
static td_status check_limits(lctx *l, const json_t *containers, const char *field, FILE *errs,
                              size_t *nerr)
{
    size_t i;
    json_t *ct;
    json_array_foreach(containers, i, ct)
    {
        json_t *req = td_json_path(ct, "resources.requests");
        json_t *lim = td_json_path(ct, "resources.limits");
        if (!json_is_object(req) || !json_is_object(lim))
            continue;
        const char *names[64];
        size_t n = 0;
        const char *rname;
        json_t *v;
        json_object_foreach(req, rname, v)
        {
            json_t *lv = json_object_get(lim, rname);
            int64_t a, b;
            /* malformed quantities were refused by container_requests */
            if (!lv || parse_milli(l, v, rname, &a, NULL) != TD_OK ||
                parse_milli(l, lv, rname, &b, NULL) != TD_OK)
                continue;
            if (a > b && n < sizeof names / sizeof names[0])
                names[n++] = rname;
        }
        if (!n)
            continue;
        qsort(names, n, sizeof names[0], cmp_str);
        fprintf(errs, "%s%s[%zu]: Invalid value: [", (*nerr)++ ? ", " : "", field, i);
        for (size_t k = 0; k < n; k++)
            fprintf(errs, "%s\"%s\"", k ? "," : "", names[k]);
        fprintf(errs, "]: requests must not exceed its limits");
    }
    return TD_OK;
}

static td_status workload_priority(lctx *l, const json_t *spec, int32_t *out)
{
    td_queue *q = l->q;
    json_t *p = json_object_get(spec, "priority");
    if (p) {
        td_err e;
        if (td_json_int32(p, out, &e) != TD_OK)
            return lfail(l, p, "spec.priority", "%s", e.msg);
        return TD_OK;
    }
    json_t *labels = td_json_path(l->obj, "metadata.labels");
    json_t *lv = json_object_get(labels, "kueue.x-k8s.io/priority-class");
    const char *label = json_is_string(lv) ? json_string_value(lv) : NULL;
    const char *name = td_json_str(spec, "priorityClassName");
    const json_t *node = json_object_get(spec, "priorityClassName");
    const char *source = td_json_str(spec, "priorityClassSource");
    bool wpc = source && strcmp(source, "kueue.x-k8s.io/workloadpriorityclass") == 0;
    if (!name && label) {
        name = label;
        node = lv;
        wpc = true;
    }
    if (!name) {
        json_t *ps0 = json_array_get(json_object_get(spec, "podSets"), 0);
        node = td_json_path(ps0, "template.spec.priorityClassName");
        name = json_is_string(node) ? json_string_value(node) : NULL;
    }
    if (!name || !*name) {
        *out = q->has_default_pc ? q->default_pc : 0;
        return TD_OK;
    }
    size_t id = td__smap_get(wpc ? &q->wpc_values : &q->pc_values, name);
    if (id == QNONE)
        return lfail(l, node, "spec.priorityClassName", "%s \"%s\" does not exist",
                     wpc ? "WorkloadPriorityClass" : "PriorityClass", name);
    *out = wpc ? q->wpc_vals[id] : q->pc_vals[id];
    return TD_OK;
}

static td_status parse_workload(lctx *l, workload *w)
{
    td_queue *q = l->q;
    json_t *spec = json_object_get(l->obj, "spec");
    if (!json_is_object(spec))
        return lfail(l, spec, "spec", "required: a mapping with podSets");
    static const char *const wk[] = {"podSets", "queueName", "priorityClassName", "priority",
                                     "priorityClassSource", "active",
                                     "maximumExecutionTimeSeconds", NULL};
    TD_TRY(only_fields(l, spec, "spec", wk));
    const char *ns = td_json_str(l->obj, "metadata.namespace");
    if (!ns || !*ns)
        ns = "default";
    json_t *lv = json_object_get(td_json_path(l->obj, "metadata.labels"), "kueue.x-k8s.io/queue-name");
    const char *queue = json_is_string(lv) ? json_string_value(lv) : td_json_str(spec, "queueName");
    if (!queue || !*queue)
        return lfail(l, spec, "spec.queueName",
                     "required (or the label kueue.x-k8s.io/queue-name): the LocalQueue to use");
    char key[512];
    snprintf(key, sizeof key, "%s/%s", ns, l->name);
    if (td__smap_get(&q->wl_ids, key) != QNONE)
        return lfail(l, NULL, "metadata.name", "Workload %s was already submitted", key);
    if (!(w->key = td__qstrdup(key)))
        return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    snprintf(key, sizeof key, "%s/%s", ns, queue);
    if (!(w->local_queue = td__qstrdup(key)))
        return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    TD_TRY(workload_priority(l, spec, &w->priority));

    json_t *pss = json_object_get(spec, "podSets");
    if (!json_is_array(pss) || json_array_size(pss) == 0)
        return lfail(l, pss, "spec.podSets", "required: a non-empty list");
    size_t n = json_array_size(pss), nres = q->nres ? q->nres : 1;
    w->podset_names = calloc(n, sizeof *w->podset_names);
    w->requests = calloc(n * nres, sizeof *w->requests);
    w->assignment = malloc(n * nres * sizeof *w->assignment);
    w->pod_requests = calloc(n * nres, sizeof *w->pod_requests);
    w->counts = calloc(n, sizeof *w->counts);
    w->tols = calloc(n, sizeof *w->tols);
    w->ntols = calloc(n, sizeof *w->ntols);
    if (!w->podset_names || !w->requests || !w->assignment || !w->pod_requests || !w->counts ||
        !w->tols || !w->ntols)
        return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *ps = json_array_get(pss, i);
        char field[128];
        snprintf(field, sizeof field, "spec.podSets[%zu]", i);
        if (!json_is_object(ps))
            return lfail(l, ps, field, "must be a mapping");
        static const char *const psk[] = {"name", "count", "template", NULL};
        TD_TRY(only_fields(l, ps, field, psk));
        const char *psname = td_json_str(ps, "name");
        w->npodsets = i + 1;
        if (!(w->podset_names[i] = td__qstrdup(psname && *psname ? psname : "main")))
            return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
        json_t *cnt = json_object_get(ps, "count");
        long long count = 1;
        td_err e;
        if (cnt && td_json_int(cnt, 0, 1000000, &count, &e) != TD_OK)
            return lfail(l, cnt, "spec.podSets[].count", "%s", e.msg);
        int64_t *per = w->requests + i * nres;
        int64_t init[nres];
        memset(init, 0, sizeof init);
        json_t *pod = td_json_path(ps, "template.spec");
        snprintf(field, sizeof field, "spec.podSets[%zu].template.spec.containers", i);
        TD_TRY(container_requests(l, json_object_get(pod, "containers"), field, per, false,
                                  &w->unknown_resource));
        snprintf(field, sizeof field, "spec.podSets[%zu].template.spec.initContainers", i);
        TD_TRY(container_requests(l, json_object_get(pod, "initContainers"), field, init, true,
                                  &w->unknown_resource));
        snprintf(field, sizeof field, "spec.podSets[%zu].template.spec.tolerations", i);
        TD_TRY(parse_tolerations(l, json_object_get(pod, "tolerations"), field, &w->tols[i],
                                 &w->ntols[i]));
        snprintf(field, sizeof field, "spec.podSets[%zu].template.spec", i);
        bool selects;
        TD_TRY(check_node_selection(l, pod, field, &selects));
        if (selects && !w->flavor_unmatched &&
            !(w->flavor_unmatched = calloc(n * (q->nflavors ? q->nflavors : 1), sizeof(bool))))
            return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
        for (size_t f = 0; selects && f < q->nflavors && f < q->nflavor_specs; f++)
            w->flavor_unmatched[i * q->nflavors + f] = !flavor_matches(&q->flavor_specs[f], pod);
        w->counts[i] = count;
        for (size_t r = 0; r < q->nres; r++) {
            int64_t v = per[r] > init[r] ? per[r] : init[r];
            w->pod_requests[i * nres + r] = v;
            per[r] = count && v > QUNLIMITED / count ? QUNLIMITED : v * count;
        }
    }
    /* check_limits reports only containers with both requests and limits:
     * without any, there is nothing to report and no stream to open */
    bool any_limits = false;
    for (size_t i = 0; i < n && !any_limits; i++) {
        json_t *pod = td_json_path(json_array_get(pss, i), "template.spec");
        const char *keys[] = {"initContainers", "containers"};
        for (int k = 0; k < 2 && !any_limits; k++) {
            size_t j;
            json_t *ct;
            json_array_foreach(json_object_get(pod, keys[k]), j, ct)
            {
                if (json_is_object(td_json_path(ct, "resources.requests")) &&
                    json_is_object(td_json_path(ct, "resources.limits")))
                    any_limits = true;
            }
        }
    }
    if (!any_limits)
        return TD_OK;
    /* Kueue's order: pod set by pod set, init containers, then containers */
    char *msg = NULL;
    size_t len = 0, nerr = 0;
    FILE *errs = open_memstream(&msg, &len);
    if (!errs)
        return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *pod = td_json_path(json_array_get(pss, i), "template.spec");
        char field[128];
        snprintf(field, sizeof field, "spec.podSets[%zu].template.spec.initContainers", i);
        check_limits(l, json_object_get(pod, "initContainers"), field, errs, &nerr);
        snprintf(field, sizeof field, "spec.podSets[%zu].template.spec.containers", i);
        check_limits(l, json_object_get(pod, "containers"), field, errs, &nerr);
    }
    if (fclose(errs) != 0 || !msg) {
        free(msg);
        return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    }
    if (nerr) {
        /* an aggregate of several errors is bracketed, as apimachinery's */
        size_t m = strlen(msg) + 64;
        w->misconfigured = malloc(m);
        if (w->misconfigured)
            snprintf(w->misconfigured, m, "resources validation failed: %s%s%s",
                     nerr > 1 ? "[" : "", msg, nerr > 1 ? "]" : "");
    }
    free(msg);
    if (nerr && !w->misconfigured)
        return td_err_set(l->err, TD_ENOMEM, "queue: out of memory");
    return TD_OK;
}

td_status td_queue_submit(td_queue *q, const json_t *wl, const td_manifest *src, uint64_t now_ns,
                          size_t *id, td_err *err)
{
    const char *name = td_json_str(wl, "metadata.name");
    lctx l = {q, wl, src, err, "Workload", name ? name : "(unnamed)"};
    if (!q->sealed)
        return td_err_set(err, TD_EINVAL, "queue: td_queue_seal must come before a submission");
    if (!name || !*name)
        return lfail(&l, wl, "metadata.name", "required");
    if (grow((void **)&q->wls, &q->capwls, q->nwls + 1, sizeof *q->wls) != 0)
        return td_err_set(err, TD_ENOMEM, "queue: out of memory");
    workload *w = &q->wls[q->nwls];
    memset(w, 0, sizeof *w);
    td_status s = parse_workload(&l, w);
    if (s == TD_OK && td__smap_put(&q->wl_ids, w->key, q->nwls) != 0)
        s = td_err_set(err, TD_ENOMEM, "queue: out of memory");
    if (s != TD_OK) {
        free_wl(w);
        memset(w, 0, sizeof *w);
        return s;
    }
    w->seq = q->nwls;
    w->created_ns = w->queue_ns = now_ns;
    w->state = TD_WL_PENDING;
    w->admitted_pos = QNONE;
    size_t lq = td__smap_get(&q->lq_ids, w->local_queue);
    w->cq = lq == QNONE ? QNONE : td__smap_get(&q->cq_ids, q->lq_targets[lq]);
    char reason[600];
    if (w->cq == QNONE)
        snprintf(reason, sizeof reason, "LocalQueue %s doesn't exist", w->local_queue);
    else
        snprintf(reason, sizeof reason, "Waiting for a scheduling cycle in ClusterQueue %s",
                 q->cqs[w->cq].name);
    w->reason = td__qstrdup(reason);
    w->flavors = td__qstrdup("");
    if (!w->reason || !w->flavors) {
        free_wl(w);
        memset(w, 0, sizeof *w);
        return td_err_set(err, TD_ENOMEM, "queue: out of memory");
    }
    q->nwls++;
    if (id)
        *id = q->nwls - 1;
    if (w->cq != QNONE) {
        if (td__queue_push_pending(q, q->nwls - 1) != 0) {
            /* The only failure is memory for the heap; leave no trace. */
            q->nwls--;
            free_wl(w);
            return td_err_set(err, TD_ENOMEM, "queue: out of memory");
        }
    }
    return TD_OK;
}

/* ---- updates of a stored Workload ---------------------------------------- */

/* Whether wl holds (or held, finished) a quota reservation: the record the
 * daemon keeps in status.tenantd, or Kueue's status.admission. */
static bool reserved_quota(const json_t *wl)
{
    const char *state = td_json_str(wl, "status.tenantd.state");
    if (state)
        return strcmp(state, "Admitted") == 0 || strcmp(state, "Finished") == 0;
    return json_is_object(td_json_path(wl, "status.admission"));
}

/* "Workload.kueue.x-k8s.io "NAME" is invalid: FIELD: Invalid value: V:
 * field is immutable", V the new value as compact JSON (cut to fit). */
static td_status immutable(const json_t *upd, const char *field, const json_t *v, td_err *err)
{
    char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS) : NULL;
    const char *name = td_json_str(upd, "metadata.name");
    td_status st = td_err_set(err, TD_EINVAL,
                              "Workload.kueue.x-k8s.io \"%.64s\" is invalid: %s: Invalid value: "
                              "%.80s%s: field is immutable",
                              name ? name : "", field, s ? s : "null",
                              s && strlen(s) > 80 ? "..." : "");
    free(s);
    return st;
}

/* Where n first differs from o (unequal): the deepest member or element
 * both have that differs, its path appended to field (at len, of size);
 * returns n's value there. A member added or removed, or a type or length
 * changed, stops at its parent, as the field Kubernetes would name. */
static const json_t *first_change(const json_t *o, const json_t *n, char *field, size_t len,
                                  size_t size)
{
    for (;;) {
        const json_t *on = NULL, *nn = NULL;
        char step[80] = "";
        if (json_is_object(o) && json_is_object(n) && json_object_size(o) == json_object_size(n)) {
            const char *k;
            json_t *x;
            json_object_foreach((json_t *)n, k, x)
            {
                const json_t *y = json_object_get(o, k);
                if (!y) {
                    on = nn = NULL; /* a member renamed: the object itself */
                    break;
                }
                if (!on && !json_equal(x, y)) {
                    on = y, nn = x;
                    snprintf(step, sizeof step, strpbrk(k, "./") ? "[%.70s]" : ".%.70s", k);
                }
            }
        } else if (json_is_array(o) && json_is_array(n) && json_array_size(o) == json_array_size(n)) {
            for (size_t i = 0; i < json_array_size(n) && !on; i++)
                if (!json_equal(json_array_get(o, i), json_array_get(n, i))) {
                    on = json_array_get(o, i), nn = json_array_get(n, i);
                    snprintf(step, sizeof step, "[%zu]", i);
                }
        }
        size_t sl = strlen(step);
        if (!nn || len + sl >= size)
            return n;
        memcpy(field + len, step, sl + 1);
        len += sl;
        o = on, n = nn;
    }
}

/* The queue a Workload names, as td_queue_submit reads it. */
static const json_t *queue_name_node(const json_t *wl, const char **field)
{
    const json_t *lv =
        json_object_get(td_json_path(wl, "metadata.labels"), "kueue.x-k8s.io/queue-name");
    *field = lv ? "metadata.labels[kueue.x-k8s.io/queue-name]" : "spec.queueName";
    return lv ? lv : td_json_path(wl, "spec.queueName");
}

td_status td_queue_workload_update_check(const json_t *old, const json_t *upd, td_err *err)
{
    if (!old || !reserved_quota(old))
        return TD_OK; /* pending: any spec change re-queues it with the new spec */
    const json_t *ops = td_json_path(old, "spec.podSets"), *nps = td_json_path(upd, "spec.podSets");
    if (json_array_size(ops) != json_array_size(nps) || !json_is_array(nps))
        return immutable(upd, "spec.podSets", nps, err);
    for (size_t i = 0; i < json_array_size(ops); i++)
        if (!json_equal(json_array_get(ops, i), json_array_get(nps, i))) {
            char field[160];
            int len = snprintf(field, sizeof field, "spec.podSets[%zu]", i);
            const json_t *v = first_change(json_array_get(ops, i), json_array_get(nps, i), field,
                                           (size_t)len, sizeof field);
            return immutable(upd, field, v, err);
        }
    /* Kueue's rules on the Workload kind: the class and the queue stay as
     * admitted (their absence on either side is no change to refuse). */
    static const char *const fields[] = {"spec.priorityClassSource", "spec.priorityClassName"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const json_t *o = td_json_path(old, fields[i]), *n = td_json_path(upd, fields[i]);
        if ((i == 0 || (o && n)) && !(o ? n && json_equal(o, n) : !n))
            return immutable(upd, fields[i], n, err);
    }
    const char *of, *nf;
    const json_t *oq = queue_name_node(old, &of), *nq = queue_name_node(upd, &nf);
    if (oq && nq && !json_equal(oq, nq))
        return immutable(upd, nf, nq, err);
    return TD_OK;
}
