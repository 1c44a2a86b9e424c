/* sched.c - the admission pass: Kueue's flavor assigner (flavors in listed
 * order, nominal quota, borrowing within the cohort up to borrowingLimit and
 * what others lend), its cycle order, StrictFIFO / BestEffortFIFO, and
 * preemption (withinClusterQueue, reclaimWithinCohort) with Kueue's
 * candidate order and minimal set. A workload is admitted whole or not. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "queue/queue_internal.h"
#include "core/config.h"

static int64_t max0(int64_t v)
{
    return v > 0 ? v : 0;
}

static int64_t sat_add(int64_t a, int64_t b)
{
    return a > QUNLIMITED - b ? QUNLIMITED : a + b;
}

void td__queue_fmt(const td_queue *q, int r, int64_t milli, char *buf, size_t n)
{
    td_quantity qt;
    td_qformat f = r >= 0 && (size_t)r < q->nres ? q->resource_formats[r] : TD_QFMT_DECIMAL_SI;
    td_quantity_from_int(&qt, milli, -3, f);
    td_quantity_format(&qt, buf, n);
}

/* ---- the pending heap of a ClusterQueue ---------------------------------- */

/* Kueue's queue order: higher priority first, then earlier queue time. */
static bool before(const td_queue *q, size_t a, size_t b)
{
    const workload *x = &q->wls[a], *y = &q->wls[b];
    if (x->priority != y->priority)
        return x->priority > y->priority;
    if (x->queue_ns != y->queue_ns)
        return x->queue_ns < y->queue_ns;
    /* Requeued on release (the daemon): a queue rebuilt from records gets
     * other ids than the one kept in memory, so ties go by key. */
    if (q->on_release) {
        int k = strcmp(x->key, y->key);
        if (k)
            return k < 0;
    }
    return x->seq < y->seq;
}

int td__queue_push_pending(td_queue *q, size_t id)
{
    idvec *h = &q->cqs[q->wls[id].cq].heap;
    if (td__idvec_push(h, id) != 0)
        return -1;
    /* an arrival between passes is a new head to try */
    if (q->on_release && !q->in_pass)
        q->cqs[q->wls[id].cq].blocked = false;
    size_t i = h->n - 1;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(q, h->v[i], h->v[p]))
            break;
        size_t t = h->v[i];
        h->v[i] = h->v[p];
        h->v[p] = t;
        i = p;
    }
    return 0;
}

static size_t heap_pop(td_queue *q, idvec *h)
{
    size_t top = h->v[0];
    h->v[0] = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && before(q, h->v[l], h->v[m]))
            m = l;
        if (r < h->n && before(q, h->v[r], h->v[m]))
            m = r;
        if (m == i)
            break;
        size_t t = h->v[i];
        h->v[i] = h->v[m];
        h->v[m] = t;
        i = m;
    }
    return top;
}

/* ---- quota arithmetic ---------------------------------------------------- */

/* Kueue's getNodeHeight: the distance from cohort at to its furthest leaf. */
static int cohort_height_of(const td_queue *q, size_t at)
{
    int h = q->cohorts[at].nmembers ? 1 : 0;
    for (size_t ch = 0; ch < q->ncohorts; ch++)
        if (q->cohorts[ch].parent == at) {
            int k = cohort_height_of(q, ch) + 1;
            h = k > h ? k : h;
        }
    return h;
}

int td__queue_index_cohorts(td_queue *q)
{
    size_t nfr = q->nfr ? q->nfr : 1, slots = 0, nco = q->ncohorts ? q->ncohorts : 1;
    for (size_t i = 0; i < q->ncohorts; i++)
        slots += q->cohorts[i].nmembers * nfr;
    q->borrowers = malloc((slots ? slots : 1) * sizeof *q->borrowers);
    q->borrow_n = calloc(nco * nfr, sizeof *q->borrow_n);
    q->borrow_pos = malloc((q->ncqs ? q->ncqs : 1) * nfr * sizeof *q->borrow_pos);
    q->borrow_base = malloc(nco * sizeof *q->borrow_base);
    q->cohort_h = malloc(nco * sizeof *q->cohort_h);
    q->cohort_root = malloc(nco * sizeof *q->cohort_root);
    q->fr_version = calloc((q->ncohorts + q->ncqs + 1) * nfr, sizeof *q->fr_version);
    q->omemo = calloc((q->ncqs ? q->ncqs : 1) * ORACLE_MEMO, sizeof *q->omemo);
    q->cs_nf = malloc(nfr * sizeof *q->cs_nf);
    q->cs_rem = malloc(nfr * sizeof *q->cs_rem);
    q->or_need = calloc(nfr, sizeof *q->or_need);
    q->pr_need = calloc(nfr, sizeof *q->pr_need);
    q->pr_use = malloc(nfr * sizeof *q->pr_use);
    if (!q->borrowers || !q->borrow_n || !q->borrow_pos || !q->borrow_base || !q->cohort_h ||
        !q->cohort_root || !q->fr_version || !q->omemo || !q->cs_nf || !q->cs_rem || !q->or_need ||
        !q->pr_need || !q->pr_use)
        return -1;
    for (size_t i = 0; i < q->ncqs * nfr; i++)
        q->borrow_pos[i] = UINT32_MAX;
    slots = 0;
    for (size_t i = 0; i < q->ncohorts; i++) {
        q->borrow_base[i] = slots;
        slots += q->cohorts[i].nmembers * nfr;
        q->cohort_h[i] = cohort_height_of(q, i);
        size_t r = i;
        while (q->cohorts[r].parent != QNONE)
            r = q->cohorts[r].parent;
        q->cohort_root[i] = r;
    }
    return 0;
}

/* The list of c's cohort's members above their nominal quota of fr. */
static size_t *borrow_list(const td_queue *q, size_t co, int fr, uint32_t **n)
{
    size_t nfr = q->nfr;
    *n = &q->borrow_n[co * nfr + (size_t)fr];
    return q->borrowers + q->borrow_base[co] + (size_t)fr * q->cohorts[co].nmembers;
}

/* c went above (on) or back within its nominal quota of fr. */
static void borrow_flip(td_queue *q, const cluster_queue *c, int fr, bool on)
{
    uint32_t *n;
    size_t ci = (size_t)(c - q->cqs), *v = borrow_list(q, c->cohort, fr, &n);
    uint32_t *pos = &q->borrow_pos[ci * q->nfr + (size_t)fr];
    if (on) {
        *pos = *n;
        v[(*n)++] = ci;
    } else {
        size_t last = v[--*n];
        v[*pos] = last;
        q->borrow_pos[last * q->nfr + (size_t)fr] = *pos;
        *pos = UINT32_MAX;
    }
}

/* Kueue's resource-node arithmetic over the cohort tree: what a node uses
 * beyond what it keeps (guaranteed) is stored in its parent, and so on up. */
static void add_usage(td_queue *q, cluster_queue *c, int fr, int64_t delta)
{
    int64_t old = c->usage[fr];
    c->usage[fr] += delta;
    if ((old > c->nominal[fr]) != (c->usage[fr] > c->nominal[fr]) && c->cohort != QNONE)
        borrow_flip(q, c, fr, c->usage[fr] > c->nominal[fr]);
    int64_t g = c->guaranteed[fr];
    delta = max0(c->usage[fr] - g) - max0(old - g);
    for (size_t at = c->cohort; at != QNONE && delta != 0;) {
        cohort *co = &q->cohorts[at];
        old = co->used[fr];
        co->used[fr] += delta;
        g = co->guaranteed[fr];
        delta = max0(co->used[fr] - g) - max0(old - g);
        at = co->parent;
    }
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* What a node with subtree quota sub, guaranteed g, usage u, borrowing
 * limit bl can take: its unused guaranteed part plus what its parent has
 * (parent_avail), within bl above what it lends up. */
static int64_t node_available(int64_t sub, int64_t g, int64_t u, int64_t bl, int64_t parent_avail)
{
    if (bl != QUNLIMITED)
        parent_avail = min64(parent_avail, sat_add(sub - g - max0(u - g), bl));
    return max0(g - u) + max0(parent_avail);
}

static int64_t cohort_available(const td_queue *q, size_t at, int fr)
{
    const cohort *co = &q->cohorts[at];
    if (co->parent == QNONE)
        return co->lendable[fr] - co->used[fr];
    return node_available(co->lendable[fr], co->guaranteed[fr], co->used[fr],
                          co->borrowing_limit[fr], cohort_available(q, co->parent, fr));
}

/* What c can still take of fr: its unused guaranteed part plus what its
 * cohort tree has left to lend, within its borrowingLimit. */
static int64_t available(const td_queue *q, const cluster_queue *c, int fr)
{
    if (c->cohort == QNONE)
        return max0(c->nominal[fr] - c->usage[fr]);
    return node_available(c->nominal[fr], c->guaranteed[fr], c->usage[fr], c->borrowing_limit[fr],
                          cohort_available(q, c->cohort, fr));
}

static int64_t cohort_potential(const td_queue *q, size_t at, int fr)
{
    const cohort *co = &q->cohorts[at];
    if (co->parent == QNONE)
        return co->lendable[fr];
    int64_t p = sat_add(co->guaranteed[fr], cohort_potential(q, co->parent, fr));
    if (co->borrowing_limit[fr] != QUNLIMITED)
        p = min64(p, sat_add(co->lendable[fr], co->borrowing_limit[fr]));
    return p;
}

/* The most c could ever hold of fr, were everything else idle. */
static int64_t potential(const td_queue *q, const cluster_queue *c, int fr)
{
    if (c->cohort == QNONE)
        return c->nominal[fr];
    int64_t p = sat_add(c->guaranteed[fr], cohort_potential(q, c->cohort, fr));
    if (c->borrowing_limit[fr] != QUNLIMITED)
        p = min64(p, sat_add(c->nominal[fr], c->borrowing_limit[fr]));
    return p;
}

/* Kueue's DominantResourceShare of a node of the cohort tree (a
 * ClusterQueue: usage over nominal; a Cohort: what its subtree uses over its
 * subtree quota), computed at its own level: for each resource, what the
 * node uses above its quota (all flavors; has, when given, limits the
 * flavor-resources a ClusterQueue counts) per mille of what its parent could
 * make available of that resource (its potential); the largest, divided by
 * the node's weight (per mille of 1). 0 for a root or a node borrowing
 * nothing; INT64_MAX for weight 0. *borrowing_on (may be NULL): whether the
 * node is above its quota in a flavor-resource of use. */
static int64_t node_share(const td_queue *q, const int64_t *usage, const int64_t *quota,
                          const bool *has, size_t parent, int64_t weight, const fr_use *use,
                          size_t nuse, bool *borrowing_on)
{
    if (borrowing_on) {
        *borrowing_on = false;
        for (size_t k = 0; parent != QNONE && k < nuse; k++)
            if ((!has || has[use[k].fr]) && usage[use[k].fr] > quota[use[k].fr])
                *borrowing_on = true;
    }
    if (parent == QNONE)
        return 0;
    if (weight == 0)
        return INT64_MAX;
    size_t nres = q->nres;
    int64_t best = -1;
    for (size_t r = 0; r < nres; r++) {
        int64_t b = 0, lend = 0;
        for (size_t f = 0; f < q->nflavors; f++) {
            size_t fr = f * nres + r;
            if (!has || has[fr])
                b = sat_add(b, max0(usage[fr] - quota[fr]));
            lend = sat_add(lend, cohort_potential(q, parent, (int)fr));
        }
        if (b > 0 && lend > 0) {
            /* double: b * 1000 overflows int64 for memory in the PiB */
            int64_t ratio = (int64_t)((double)b * 1000.0 / (double)lend);
            best = ratio > best ? ratio : best;
        }
    }
    if (best < 0)
        return 0;
    return (int64_t)((double)best * 1000.0 / (double)weight);
}

/* The DominantResourceShare of ClusterQueue c at its cohort's level. */
static int64_t drs(const td_queue *q, const cluster_queue *c)
{
    if (c->cohort == QNONE)
        return 0;
    return node_share(q, c->usage, c->nominal, c->has, c->cohort, c->fair_weight, NULL, 0, NULL);
}

/* drs of c were use added to it. */
static int64_t drs_with(td_queue *q, cluster_queue *c, const fr_use *use, size_t nuse)
{
    for (size_t k = 0; k < nuse; k++)
        add_usage(q, c, use[k].fr, use[k].v);
    int64_t d = drs(q, c);
    for (size_t k = 0; k < nuse; k++)
        add_usage(q, c, use[k].fr, -use[k].v);
    return d;
}

/* ---- flavor assignment --------------------------------------------------- */

/* Why the flavors of one resource group were not taken, in the order
 * found: numbers, worded when read (word_why). More items than fit in a
 * 1024-byte reason never show, so WHY_MAX bounds them. */
#define WHY_MAX 32

typedef struct {
    why_item item[WHY_MAX];
    size_t n;
    char text[1024]; /* the words of WHY_TEXT items */
    size_t ntext;
    bool has_text;
} why_list;

typedef struct {
    fit_mode mode;
    bool borrowing;
    int borrow_level; /* Kueue's Assignment.Borrowing: the largest of its flavors' levels */
    /* the reason: lazy: "couldn't assign flavors to pod set <ps>: <why>",
     * else reason (worded) */
    bool lazy;
    size_t ps;
    why_list why;
    char reason[600];
    fr_use *use; /* q-owned scratch */
    size_t nuse;
    /* in: only whether it fits and borrows matters (the order of heads):
     * the preemption oracle may be skipped where it cannot change that */
    bool order_only;
    bool oracle_skipped; /* out: order_only skipped the oracle for some resource */
} assign_out;

static void append(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Reasons of one pod set are gathered apart (a reason may hold ", ") and
 * given sorted, joined by ", ", as Kueue's Status.Message gives them. */
#define RSEP "\x1f"

static int cmp_reason(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts the RSEP-separated reasons of why in place and joins them. */
static void finish_reasons(char *why, size_t n)
{
    char *parts[64], copy[1024];
    size_t np = 0;
    snprintf(copy, sizeof copy, "%s", why);
    for (char *sv = NULL, *p = strtok_r(copy, RSEP, &sv); p && np < 64; p = strtok_r(NULL, RSEP, &sv))
        parts[np++] = p;
    qsort(parts, np, sizeof parts[0], cmp_reason);
    why[0] = '\0';
    for (size_t k = 0; k < np; k++)
        snprintf(why + strlen(why), n - strlen(why), "%s%s", k ? ", " : "", parts[k]);
}

static void append(char *buf, size_t n, const char *fmt, ...)
{
    size_t len = strlen(buf);
    if (len + 1 >= n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, n - len, fmt, ap);
    va_end(ap);
}

static void why_add(why_list *l, why_item it)
{
    if (l->n < WHY_MAX)
        l->item[l->n++] = it;
}

/* Adds text (worded, without a separator) as the next item of l. */
static void why_text(why_list *l, const char *text)
{
    size_t len = strlen(text), room = sizeof l->text - l->ntext;
    if (l->n >= WHY_MAX || !len)
        return;
    len = len < room ? len : room;
    why_add(l, (why_item){.kind = WHY_TEXT, .off = (uint32_t)l->ntext, .len = (uint32_t)len});
    memcpy(l->text + l->ntext, text, len);
    l->ntext += len;
    l->has_text = true;
}

/* Words items (text: the words of WHY_TEXT ones) into why, sorted and
 * joined as Kueue's Status.Message gives them: byte for byte what
 * appending each reason as it was found into a buffer of cap gives. */
static void word_why(const td_queue *q, const why_item *it, size_t n, const char *text, char *why,
                     size_t cap)
{
    why[0] = '\0';
    for (size_t k = 0; k < n; k++) {
        char a[TD_QUANTITY_STR_MAX], b[TD_QUANTITY_STR_MAX], d[TD_QUANTITY_STR_MAX];
        const char *sep = *why ? RSEP : "";
        const char *rn = it[k].kind <= WHY_UNUSED ? q->resource_names[it[k].r] : "";
        const char *fn = it[k].kind != WHY_TEXT ? q->flavor_names[it[k].f] : "";
        if (it[k].kind == WHY_QUOTA) {
            td__queue_fmt(q, it[k].r, it[k].a, a, sizeof a);
            td__queue_fmt(q, it[k].r, it[k].b, b, sizeof b);
            td__queue_fmt(q, it[k].r, it[k].c, d, sizeof d);
            append(why, cap,
                   "%sinsufficient quota for %s in flavor %s, previously considered "
                   "podsets requests (%s) + current podset request (%s) > maximum "
                   "capacity (%s)",
                   sep, rn, fn, a, b, d);
        } else if (it[k].kind == WHY_UNUSED) {
            td__queue_fmt(q, it[k].r, it[k].a, a, sizeof a);
            append(why, cap, "%sinsufficient unused quota for %s in flavor %s, %s more needed",
                   sep, rn, fn, a);
        } else if (it[k].kind == WHY_AFFINITY) {
            append(why, cap, "%sflavor %s doesn't match node affinity", sep, fn);
        } else if (it[k].kind == WHY_TAINT) {
            const taint *tn = &q->flavor_specs[it[k].f].taints[it[k].tn];
            append(why, cap, "%suntolerated taint {%s %s %s <nil>} in flavor %s", sep, tn->key,
                   tn->value ? tn->value : "", tn->effect, fn);
        } else {
            append(why, cap, "%s%.*s", sep, (int)it[k].len, text + it[k].off);
        }
    }
    finish_reasons(why, cap);
}

/* The reason of a pod set ps of w whose flavors could not be assigned. */
static void word_assign(const td_queue *q, const workload *w, size_t ps, const why_item *it,
                        size_t n, const char *text, char *out, size_t outn)
{
    char why[1024];
    word_why(q, it, n, text, why, sizeof why);
    snprintf(out, outn, "couldn't assign flavors to pod set %s: %s", w->podset_names[ps], why);
}

/* w's reason, worded now if it was kept as numbers (park_assign): as the
 * pass would have worded it, after "<evicted>: " while w is requeued
 * after an eviction. Out of memory leaves it unworded and gives "". */
static const char *reason_of(const td_queue *q, workload *w)
{
    if (!w->reason_lazy)
        return w->reason ? w->reason : "";
    char r[600];
    word_assign(q, w, w->why_ps, w->why, w->nwhy, "", r, sizeof r);
    size_t n = (w->evicted ? strlen(w->evicted) + 2 : 0) + strlen(r) + 1;
    char *p = malloc(n);
    if (!p)
        return "";
    snprintf(p, n, "%s%s%s", w->evicted ? w->evicted : "", w->evicted ? ": " : "", r);
    free(w->reason);
    w->reason = p;
    w->reason_lazy = false;
    return p;
}

/* ---- placement on NodePools ----------------------------------------------- */

/* "8 nvidia.com/gpu, 8 cpu": one pod's request of the resources as gives f. */
static void pod_desc(const td_queue *q, const workload *w, size_t ps, const int16_t *as, int f,
                     char *buf, size_t n)
{
    size_t nres = q->nres;
    buf[0] = '\0';
    for (size_t r = 0; r < nres; r++) {
        int64_t v = w->pod_requests[ps * nres + r];
        if (v > 0 && as[r] == f) {
            char a[TD_QUANTITY_STR_MAX];
            td__queue_fmt(q, (int)r, v, a, sizeof a);
            append(buf, n, "%s%s %s", *buf ? ", " : "", a, q->resource_names[r]);
        }
    }
}

/* Pods of pod set ps (resources in as given flavor f) that fit on node n
 * with free (or, if empty_node, its whole capacity). */
static int64_t pods_fit(const td_queue *q, const workload *w, size_t ps, const int16_t *as,
                        const qnode *n, bool empty_node)
{
    size_t nres = q->nres;
    int64_t k = INT64_MAX;
    for (size_t r = 0; r < nres; r++) {
        int64_t v = w->pod_requests[ps * nres + r];
        if (v <= 0 || as[r] != n->flavor)
            continue;
        int64_t fr = (empty_node ? n->cap[r] : n->free[r]) / v;
        k = fr < k ? fr : k;
    }
    return k;
}

/* A pod of pod set ps cannot fit on any node of f, or the pod set cannot
 * fit on all of f's nodes even when they are empty: writes why. */
static bool never_fits(td_queue *q, const workload *w, size_t ps, const resource_group *grp, int f,
                       char *why, size_t whyn)
{
    size_t nres = q->nres;
    int16_t as[nres ? nres : 1];
    for (size_t r = 0; r < nres; r++)
        as[r] = -1;
    bool any = false;
    for (size_t k = 0; k < grp->nresources; k++) {
        int r = grp->resources[k];
        if (w->pod_requests[ps * nres + (size_t)r] <= 0)
            continue;
        any = true;
        as[r] = (int16_t)f;
        int64_t v = w->pod_requests[ps * nres + (size_t)r], m = q->flavor_max_cap[f * (int)nres + r];
        if (v > m) {
            char a[TD_QUANTITY_STR_MAX], b[TD_QUANTITY_STR_MAX];
            td__queue_fmt(q, r, v, a, sizeof a);
            td__queue_fmt(q, r, m, b, sizeof b);
            append(why, whyn,
                   "%sa pod of pod set %s needs %s %s and the largest node of flavor %s has %s: "
                   "can never fit",
                   *why ? RSEP : "", w->podset_names[ps], a, q->resource_names[r],
                   q->flavor_names[f], b);
            return true;
        }
    }
    if (!any || w->counts[ps] == 0)
        return false;
    int64_t total = 0;
    size_t first = q->flavor_node_start[f], nn = q->flavor_node_n[f];
    for (size_t i = first; i < first + nn && total < w->counts[ps]; i++) {
        int64_t k = pods_fit(q, w, ps, as, &q->nodes[i], true);
        total = k > w->counts[ps] - total ? w->counts[ps] : total + k;
    }
    if (total >= w->counts[ps])
        return false;
    char d[256];
    pod_desc(q, w, ps, as, f, d, sizeof d);
    append(why, whyn,
           "%s%lld pods of %s (pod set %s) need more than the %zu nodes of flavor %s hold even "
           "when empty (%lld pods): can never fit",
           *why ? RSEP : "", (long long)w->counts[ps], d, w->podset_names[ps], nn,
           q->flavor_names[f], (long long)total);
    return true;
}

/* Whether pod set ps (its resources that pas gives flavor f) fits on f's
 * nodes as they are now; if not, appends why ("pod set workers: 4 pods of 8
 * nvidia.com/gpu need 4 nodes of flavor a100 with 8 nvidia.com/gpu free; 2
 * have"). Pods of one set are alike, so counting per node is exact. */
static bool room_now(const td_queue *q, const workload *w, size_t ps, const int16_t *pas, int f,
                     bool name_set, char *why, size_t whyn)
{
    size_t first = q->flavor_node_start[f], nn = q->flavor_node_n[f];
    int64_t can = 0;
    size_t have = 0;
    bool one_per_node = true;
    for (size_t i = first; i < first + nn; i++) {
        int64_t k = pods_fit(q, w, ps, pas, &q->nodes[i], false);
        can = k > INT64_MAX - can ? INT64_MAX : can + k;
        have += k > 0;
        one_per_node &= pods_fit(q, w, ps, pas, &q->nodes[i], true) <= 1;
    }
    if (can >= w->counts[ps])
        return true;
    char d[256];
    pod_desc(q, w, ps, pas, f, d, sizeof d);
    if (one_per_node)
        append(why, whyn, "%s%s%s%s%lld pods of %s need %lld nodes of flavor %s with %s free; %zu have",
               *why ? RSEP : "", name_set ? "pod set " : "", name_set ? w->podset_names[ps] : "",
               name_set ? ": " : "", (long long)w->counts[ps], d,
               (long long)w->counts[ps], q->flavor_names[f], d, have);
    else
        append(why, whyn,
               "%s%s%s%s%lld pods of %s need room on nodes of flavor %s; %lld fit now, on %zu nodes",
               *why ? RSEP : "", name_set ? "pod set " : "", name_set ? w->podset_names[ps] : "",
               name_set ? ": " : "", (long long)w->counts[ps], d,
               q->flavor_names[f], (long long)can, have);
    return false;
}

/* room_now for the resources of group grp given flavor f. */
static bool group_room_now(const td_queue *q, const workload *w, size_t ps,
                           const resource_group *grp, int f, char *why, size_t whyn)
{
    size_t nres = q->nres;
    int16_t pas[nres ? nres : 1];
    bool any = false;
    for (size_t r = 0; r < nres; r++)
        pas[r] = -1;
    for (size_t k = 0; k < grp->nresources; k++)
        if (w->pod_requests[ps * nres + (size_t)grp->resources[k]] > 0) {
            pas[grp->resources[k]] = (int16_t)f;
            any = true;
        }
    return !any || w->counts[ps] == 0 || room_now(q, w, ps, pas, f, false, why, whyn);
}

static bool needs_nodes(const td_queue *q, const workload *w, const int16_t *as)
{
    for (size_t i = 0; i < w->npodsets * q->nres; i++)
        if (as[i] >= 0 && q->flavor_node_n[as[i]] && w->pod_requests[i] > 0 && w->counts[i / q->nres])
            return true;
    return false;
}

/* Adds sign * the pods of p (pod set p->podset of w, resources per as) to
 * the free capacity of its node. */
static void node_adjust(td_queue *q, const workload *w, const int16_t *as, const placed *p,
                        int64_t sign)
{
    size_t nres = q->nres;
    qnode *n = &q->nodes[p->node];
    for (size_t r = 0; r < nres; r++) {
        int64_t v = w->pod_requests[p->podset * nres + r];
        if (v > 0 && as[p->podset * nres + r] == n->flavor)
            n->free[r] += sign * p->pods * v;
    }
}

static void unplace_scratch(td_queue *q, const workload *w, const int16_t *as, size_t from)
{
    while (q->scratch_place_n > from)
        node_adjust(q, w, as, &q->scratch_place[--q->scratch_place_n], 1);
}

static int push_place(td_queue *q, uint32_t node, uint32_t ps, int64_t pods)
{
    if (q->scratch_place_n == q->scratch_place_cap) {
        size_t cap = q->scratch_place_cap ? q->scratch_place_cap * 2 : 16;
        placed *p = realloc(q->scratch_place, cap * sizeof *p);
        if (!p)
            return -1;
        q->scratch_place = p;
        q->scratch_place_cap = cap;
    }
    q->scratch_place[q->scratch_place_n++] = (placed){node, ps, pods};
    return 0;
}

/* Places every pod of w under assignment as on the nodes of the flavors
 * that have NodePools, all or nothing: pod set by pod set, each pod on the
 * most-allocated node it fits (the sum over its resources of used/capacity),
 * ties to the first node in order. 1: placed, taking the nodes' free
 * capacity, pods in q->scratch_place; 0: does not fit, nothing taken, why
 * written (when why is not NULL); -1: out of memory, nothing taken. */
static int place(td_queue *q, const workload *w, const int16_t *as, char *why, size_t whyn)
{
    size_t nres = q->nres;
    q->scratch_place_n = 0;
    for (size_t ps = 0; ps < w->npodsets; ps++) {
        const int16_t *pas = as + ps * nres;
        for (size_t r = 0; r < nres; r++) {
            int f = pas[r];
            if (f < 0 || !q->flavor_node_n[f] || w->pod_requests[ps * nres + r] <= 0)
                continue;
            bool seen = false; /* place once per flavor of the pod set */
            for (size_t r2 = 0; r2 < r && !seen; r2++)
                seen = pas[r2] == f && w->pod_requests[ps * nres + r2] > 0;
            if (seen)
                continue;
            size_t first = q->flavor_node_start[f], nn = q->flavor_node_n[f];
            size_t mark = q->scratch_place_n;
            int64_t left = w->counts[ps];
            while (left > 0) {
                size_t best = QNONE;
                double best_score = -1;
                for (size_t i = first; i < first + nn; i++) {
                    const qnode *n = &q->nodes[i];
                    if (pods_fit(q, w, ps, pas, n, false) < 1)
                        continue;
                    double score = 0;
                    for (size_t k = 0; k < nres; k++)
                        if (w->pod_requests[ps * nres + k] > 0 && pas[k] == f && n->cap[k] > 0)
                            score += (double)(n->cap[k] - n->free[k]) / (double)n->cap[k];
                    if (score > best_score) {
                        best_score = score;
                        best = i;
                    }
                }
                if (best == QNONE)
                    break;
                int64_t k = pods_fit(q, w, ps, pas, &q->nodes[best], false);
                k = k < left ? k : left;
                if (push_place(q, (uint32_t)best, (uint32_t)ps, k) != 0) {
                    unplace_scratch(q, w, as, 0);
                    return -1;
                }
                node_adjust(q, w, as, &q->scratch_place[q->scratch_place_n - 1], -1);
                left -= k;
            }
            if (left == 0)
                continue;
            if (why) {
                /* Say it against the nodes as they are for this pod set. */
                unplace_scratch(q, w, as, mark);
                why[0] = '\0';
                room_now(q, w, ps, pas, f, true, why, whyn);
            }
            unplace_scratch(q, w, as, 0);
            return 0;
        }
    }
    return 1;
}

/* ---- taints: Kubernetes' ToleratesTaint, Kueue's checkFlavorForPodSets ---- */

static bool tolerates(const toleration *t, const taint *x)
{
    if (t->effect && strcmp(t->effect, x->effect) != 0)
        return false;
    if (t->key && strcmp(t->key, x->key) != 0)
        return false;
    if (t->exists)
        return true;
    return strcmp(t->value ? t->value : "", x->value ? x->value : "") == 0;
}

/* The first NoSchedule or NoExecute taint of flavor f that neither pod set
 * ps's tolerations nor the flavor's own tolerate; NULL if none. */
static const taint *untolerated(const td_queue *q, const workload *w, size_t ps, int f)
{
    const flavor_spec *fs = &q->flavor_specs[f];
    for (size_t i = 0; i < fs->ntaints; i++) {
        const taint *x = &fs->taints[i];
        if (strcmp(x->effect, "NoSchedule") != 0 && strcmp(x->effect, "NoExecute") != 0)
            continue;
        bool ok = false;
        for (size_t k = 0; !ok && k < w->ntols[ps]; k++)
            ok = tolerates(&w->tols[ps][k], x);
        for (size_t k = 0; !ok && k < fs->ntols; k++)
            ok = tolerates(&fs->tols[k], x);
        if (!ok)
            return x;
    }
    return NULL;
}

/* ---- Kueue's granular flavor modes and fungibility ------------------------ */

/* Kueue's preemptionMode, worst to best: no fit; preemption possible by
 * quota but no targets; targets in the own ClusterQueue; targets only in
 * other ClusterQueues of the cohort (reclamation); fit. */
typedef enum { PM_NOFIT = 0, PM_NOCAND, PM_PREEMPT, PM_RECLAIM, PM_FIT } pmode;

/* a mode and its borrowing level: 0 within the ClusterQueue, else the
 * height of the lowest cohort subtree whose quota holds the request */
typedef struct {
    pmode pm;
    int borrow;
} gmode;

/* Kueue's isPreferred: a better than b under the ClusterQueue's preference. */
static bool preferred(gmode a, gmode b, ff_preference pref)
{
    if (a.pm == PM_NOFIT)
        return false;
    if (b.pm == PM_NOFIT)
        return true;
    if ((a.pm == PM_NOCAND) != (b.pm == PM_NOCAND))
        return a.pm != PM_NOCAND;
    if (pref == PREF_PREEMPTION_OVER_BORROWING) {
        if (a.borrow != b.borrow)
            return a.borrow < b.borrow;
        return a.pm > b.pm;
    }
    if (a.pm != b.pm)
        return a.pm > b.pm;
    return a.borrow < b.borrow;
}

/* Kueue's shouldTryNextFlavor under whenCanPreempt and whenCanBorrow. */
static bool try_next_flavor(gmode m, const cluster_queue *c)
{
    if (m.pm == PM_NOFIT || m.pm == PM_NOCAND)
        return true;
    if ((m.pm == PM_PREEMPT || m.pm == PM_RECLAIM) && c->try_next_when_preempt)
        return true;
    return m.borrow > 0 && c->try_next_when_borrow;
}

static int cohort_height(const td_queue *q, size_t at)
{
    return q->cohort_h[at];
}

/* Kueue's FindHeightOfLowestSubtreeThatFits: the borrowing level of val
 * more of fr in c; *may_reclaim (may be NULL): whether that subtree is
 * smaller than the whole tree (reclamation in it is possible). */
static int borrow_height(const td_queue *q, const cluster_queue *c, int fr, int64_t val,
                         bool *may_reclaim)
{
    bool dummy;
    if (!may_reclaim)
        may_reclaim = &dummy;
    if (c->cohort == QNONE || sat_add(c->usage[fr], val) <= c->nominal[fr]) {
        *may_reclaim = c->cohort != QNONE;
        return 0;
    }
    int64_t remaining = val - max0(c->guaranteed[fr] - c->usage[fr]);
    for (size_t at = c->cohort; at != QNONE; at = q->cohorts[at].parent) {
        const cohort *co = &q->cohorts[at];
        if (sat_add(co->used[fr], remaining) <= co->lendable[fr]) {
            *may_reclaim = co->parent != QNONE;
            return cohort_height(q, at);
        }
        remaining -= max0(co->guaranteed[fr] - co->used[fr]);
    }
    *may_reclaim = false;
    return cohort_height(q, c->root);
}

/* Kueue's canPreemptWhileBorrowing. */
static bool can_preempt_while_borrowing(const td_queue *q, const cluster_queue *c)
{
    return c->bwc || (q->fair_sharing && c->reclaim != RECLAIM_NEVER);
}

static int oracle(td_queue *q, const workload *w, int fr, int64_t val, gmode *out);

/* Grows the scratch space assign_flavors writes for w; -1 out of memory. */
static int assign_scratch(td_queue *q, const workload *w, assign_out *o)
{
    size_t need = w->npodsets * (q->nres ? q->nres : 1);
    if (need > q->scratch_assign_cap) {
        int16_t *p = realloc(q->scratch_assign, need * sizeof *p);
        if (!p)
            return -1;
        q->scratch_assign = p;
        q->scratch_assign_cap = need;
    }
    if (q->nfr > q->scratch_use_cap) {
        fr_use *p = realloc(q->scratch_use, q->nfr * sizeof *p);
        if (!p)
            return -1;
        q->scratch_use = p;
        q->scratch_use_cap = q->nfr;
    }
    o->use = q->scratch_use;
    return 0;
}

/* true (o says why: no fit) when no flavor can be tried at all: the
 * ClusterQueue is inactive, w is misconfigured or asks for a resource no
 * ClusterQueue knows. */
static bool assign_refused(const td_queue *q, const workload *w, const cluster_queue *c,
                           assign_out *o)
{
    if (c->inactive)
        snprintf(o->reason, sizeof o->reason, "ClusterQueue %s is inactive", c->name);
    else if (w->misconfigured)
        snprintf(o->reason, sizeof o->reason, "%s", w->misconfigured);
    else if (w->unknown_resource)
        snprintf(o->reason, sizeof o->reason,
                 "couldn't assign flavors to pod set %s: resource %s unavailable in ClusterQueue",
                 w->podset_names[0], w->unknown_resource);
    else
        return false;
    (void)q;
    o->mode = MODE_NOFIT;
    return true;
}

/* The mode of one resource r in flavor f when need more of it is asked
 * (after what earlier pod sets of w took, q->acc): no fit past the
 * potential, a fit (with its borrowing height) within what is unused,
 * else preemption as the oracle says, where preemption may make room.
 * Adds the reason to why. -1 out of memory. */
static int resource_mode(td_queue *q, workload *w, cluster_queue *c, int f, int r, int64_t need,
                         bool skip_oracle, assign_out *o, why_list *why, gmode *m)
{
    int fr = f * (int)q->nres + r;
    int64_t val = sat_add(q->acc[fr], need);
    int64_t pot = potential(q, c, fr), avail = available(q, c, fr);
    bool may_reclaim;
    if (val > pot) {
        *m = (gmode){PM_NOFIT, 0};
        why_add(why, (why_item){.kind = WHY_QUOTA, .f = (int16_t)f, .r = (int16_t)r,
                                .a = q->acc[fr], .b = need, .c = pot});
        return 0;
    }
    m->pm = PM_FIT;
    m->borrow = borrow_height(q, c, fr, val, &may_reclaim);
    if (val <= avail)
        return 0;
    why_add(why, (why_item){.kind = WHY_UNUSED, .f = (int16_t)f, .r = (int16_t)r,
                            .a = val - avail});
    if (!(c->nominal[fr] >= val || may_reclaim || can_preempt_while_borrowing(q, c))) {
        m->pm = PM_NOFIT;
        return 0;
    }
    if (skip_oracle) {
        m->pm = PM_PREEMPT;
        o->oracle_skipped = true;
        return 0;
    }
    return oracle(q, w, fr, val, m) != 0 ? -1 : 0;
}

/* The mode of group grp's resources of pod set i (requests req) in flavor
 * f, the worst of them by c's preference, into *rep: 1; 0 when the flavor
 * is skipped (a taint the pod set does not tolerate, nodeLabels its node
 * selection contradicts, or nodes its pods
 * never fit), with why appended; -1 out of memory. */
static int flavor_mode(td_queue *q, workload *w, cluster_queue *c, size_t i, const int64_t *req,
                       const resource_group *grp, int f, bool skip_oracle, assign_out *o,
                       why_list *why, gmode *rep)
{
    const taint *tn = untolerated(q, w, i, f);
    char text[1024];
    text[0] = '\0';
    if (tn) {
        why_add(why, (why_item){.kind = WHY_TAINT, .f = (int16_t)f,
                                .tn = (uint32_t)(tn - q->flavor_specs[f].taints)});
        return 0;
    }
    if (w->flavor_unmatched && w->flavor_unmatched[i * q->nflavors + (size_t)f]) {
        why_add(why, (why_item){.kind = WHY_AFFINITY, .f = (int16_t)f});
        return 0;
    }
    if (q->flavor_node_n[f] && never_fits(q, w, i, grp, f, text, sizeof text)) {
        why_text(why, text);
        return 0;
    }
    *rep = (gmode){PM_FIT, 0};
    for (size_t k = 0; k < grp->nresources && rep->pm != PM_NOFIT; k++) {
        int r = grp->resources[k];
        gmode m;
        if (req[r] == 0)
            continue;
        if (resource_mode(q, w, c, f, r, req[r], skip_oracle, o, why, &m) != 0)
            return -1;
        if (preferred(*rep, m, c->preference))
            *rep = m;
    }
    /* With NodePools a flavor fits only if the pods have room now, as
     * Kueue's topology-aware assignment decides: else preemption may make
     * room, or the next flavor has it. */
    if (rep->pm == PM_FIT && q->flavor_node_n[f] &&
        !group_room_now(q, w, i, grp, f, text, sizeof text)) {
        why_text(why, text);
        rep->pm = PM_PREEMPT;
    }
    return 1;
}

/* Chooses group grp's flavor for pod set i: the first at which
 * flavorFungibility stops the search, else the preferred one seen.
 * *best is its index in grp->flavors (-1: none could be tried). -1 out of
 * memory. */
static int pick_flavor(td_queue *q, workload *w, cluster_queue *c, size_t i, const int64_t *req,
                       const resource_group *grp, bool skip_oracle, assign_out *o,
                       why_list *why, int *best, gmode *best_mode)
{
    *best = -1;
    *best_mode = (gmode){PM_NOFIT, INT32_MAX};
    for (size_t fi = 0; fi < grp->nflavors; fi++) {
        gmode rep;
        int st = flavor_mode(q, w, c, i, req, grp, grp->flavors[fi], skip_oracle, o, why, &rep);
        if (st < 0)
            return -1;
        if (st == 0)
            continue;
        if (!try_next_flavor(rep, c)) {
            *best = (int)fi;
            *best_mode = rep;
            break;
        }
        if (preferred(rep, *best_mode, c->preference)) {
            *best = (int)fi;
            *best_mode = rep;
        }
    }
    return 0;
}

/* Takes group grp's requested resources of a pod set (req) in flavor f:
 * as[] says which flavor each resource got, q->acc what w took so far. */
static void take_flavor(td_queue *q, const int64_t *req, const resource_group *grp, int f,
                        int16_t *as, assign_out *o)
{
    for (size_t k = 0; k < grp->nresources; k++) {
        int r = grp->resources[k];
        if (req[r] == 0)
            continue;
        int fr = f * (int)q->nres + r;
        as[r] = (int16_t)f;
        if (q->acc[fr] == 0) {
            o->use[o->nuse].fr = fr;
            o->use[o->nuse++].v = 0;
        }
        q->acc[fr] = sat_add(q->acc[fr], req[r]);
    }
}

/* true (o says why: no fit) when pod set i asks for a resource c has no
 * group for; as[] is reset to "no flavor". */
static bool resource_unavailable(const td_queue *q, const workload *w, const cluster_queue *c,
                                 size_t i, const int64_t *req, int16_t *as, assign_out *o)
{
    for (size_t r = 0; r < q->nres; r++) {
        as[r] = -1;
        if (req[r] > 0 && c->group_of_resource[r] < 0) {
            o->mode = MODE_NOFIT;
            snprintf(o->reason, sizeof o->reason,
                     "couldn't assign flavors to pod set %s: resource %s unavailable in "
                     "ClusterQueue",
                     w->podset_names[i], q->resource_names[r]);
            return true;
        }
    }
    return false;
}

/* Assigns a flavor to every requested resource of every pod set of w in c,
 * as Kueue's flavor assigner does, into q->scratch_assign and o->use:
 * flavors in the listed order; one with a taint the pod set does not
 * tolerate is skipped; each resource's mode (fit, preemption in the own
 * queue, reclamation in the cohort, preemption without targets, no fit)
 * and borrowing level, the worst of the group's resources for the flavor;
 * the search stops at a flavor unless flavorFungibility says to try the
 * next, and then takes the preferred one seen. Exceeding the nominal quota
 * leaves room to preempt only with borrowWithinCohort (or fair sharing
 * with reclaimWithinCohort), or when a cohort below the root holds it.
 * With o->order_only (set by the caller), under whenCanPreempt
 * TryNextFlavor and BorrowingOverPreemption without fair sharing, a fit
 * always beats every preemption mode and the search never stops at one,
 * so when w fits, the flavors and borrowing level do not depend on the
 * oracle: it is not run (o->oracle_skipped says so; a caller that needs
 * the level of a w that does not fit runs it again without order_only).
 * -1 out of memory. */
static int assign_flavors(td_queue *q, workload *w, cluster_queue *c, assign_out *o)
{
    bool skip_oracle = o->order_only && !q->fair_sharing && c->try_next_when_preempt &&
                       c->preference == PREF_BORROWING_OVER_PREEMPTION;
    size_t nres = q->nres;
    o->mode = MODE_FIT;
    o->borrowing = false;
    o->borrow_level = 0;
    o->oracle_skipped = false;
    o->lazy = false;
    o->reason[0] = '\0';
    o->nuse = 0;
    if (assign_scratch(q, w, o) != 0)
        return -1;
    if (assign_refused(q, w, c, o))
        return 0;
    for (size_t i = 0; i < w->npodsets && o->mode != MODE_NOFIT; i++) {
        const int64_t *req = w->requests + i * nres;
        int16_t *as = q->scratch_assign + i * nres;
        if (resource_unavailable(q, w, c, i, req, as, o))
            break;
        for (size_t g = 0; g < c->ngroups && o->mode != MODE_NOFIT; g++) {
            const resource_group *grp = &c->groups[g];
            bool any = false;
            for (size_t k = 0; k < grp->nresources; k++)
                any |= req[grp->resources[k]] > 0;
            if (!any)
                continue;
            int best;
            gmode best_mode;
            /* the first group that does not fit gives the reason */
            why_list scratch, *why = o->mode == MODE_FIT ? &o->why : &scratch;
            why->n = why->ntext = 0;
            why->has_text = false;
            if (pick_flavor(q, w, c, i, req, grp, skip_oracle, o, why, &best, &best_mode) != 0)
                return -1;
            fit_mode gm = best_mode.pm == PM_FIT     ? MODE_FIT
                          : best_mode.pm == PM_NOFIT ? MODE_NOFIT
                                                     : MODE_PREEMPT;
            if (best < 0)
                gm = MODE_NOFIT;
            if (gm != MODE_FIT) {
                if (o->mode == MODE_FIT) {
                    o->lazy = true;
                    o->ps = i;
                }
                if (gm < o->mode)
                    o->mode = gm;
                if (best < 0)
                    break;
            }
            o->borrowing |= gm == MODE_FIT && best_mode.borrow > 0;
            if (best_mode.borrow > o->borrow_level)
                o->borrow_level = best_mode.borrow;
            take_flavor(q, req, grp, grp->flavors[best], as, o);
        }
    }
    for (size_t k = 0; k < o->nuse; k++) {
        o->use[k].v = q->acc[o->use[k].fr];
        q->acc[o->use[k].fr] = 0;
    }
    return 0;
}

/* ---- events and state changes --------------------------------------------- */

static int set_str(char **dst, const char *s)
{
    char *p = td__qstrdup(s);
    if (!p)
        return -1;
    free(*dst);
    *dst = p;
    return 0;
}

static int set_reason(workload *w, const char *s)
{
    if (set_str(&w->reason, s) != 0)
        return -1;
    w->reason_lazy = false;
    return 0;
}

static td_queue_event *new_event(td_queue *q)
{
    if (q->nevents == q->capevents) {
        size_t cap = q->capevents ? q->capevents * 2 : 64;
        td_queue_event *p = realloc(q->events, cap * sizeof *p);
        if (!p)
            return NULL;
        q->events = p;
        q->capevents = cap;
    }
    td_queue_event *e = &q->events[q->nevents++];
    memset(e, 0, sizeof *e);
    e->by = QNONE;
    return e;
}

/* Takes admitted w's quota and nodes out of the books (sign -1) or puts
 * them back (+1); its admission record is untouched. */
static void books(td_queue *q, const workload *w, int64_t sign)
{
    cluster_queue *c = &q->cqs[w->cq];
    for (size_t k = 0; k < w->nuse; k++)
        add_usage(q, c, w->use[k].fr, sign * w->use[k].v);
    for (size_t k = 0; k < w->nplacement; k++)
        node_adjust(q, w, w->assignment, &w->placement[k], -sign);
}

static size_t tree_of(const td_queue *q, const cluster_queue *c)
{
    return c->cohort != QNONE ? c->root : q->ncohorts + (size_t)(c - q->cqs);
}

/* What a flavor assignment of a workload of c depends on changed: its
 * cohort tree's books (or c's alone), per flavor-resource w uses, and the
 * nodes when pods move. */
static void bump_version(td_queue *q, const cluster_queue *c, const workload *w, bool nodes)
{
    size_t t = tree_of(q, c);
    if (q->tree_version)
        q->tree_version[t]++;
    for (size_t k = 0; k < w->nuse; k++)
        q->fr_version[t * q->nfr + (size_t)w->use[k].fr]++;
    if (nodes)
        q->node_version++;
}

static uint64_t tree_version_of(const td_queue *q, const cluster_queue *c)
{
    if (!q->tree_version)
        return 0;
    return q->tree_version[c->cohort != QNONE ? c->root : q->ncohorts + (size_t)(c - q->cqs)];
}

/* Requeue on release: every ClusterQueue of c's cohort tree (c alone
 * without a cohort) may use what was released; and with nodes, every
 * ClusterQueue covering a flavor in as (npodsets * nres, may be NULL). */
static void wake(td_queue *q, const cluster_queue *c, const int16_t *as, size_t npodsets)
{
    if (!q->on_release)
        return;
    q->freed = true;
    if (c->cohort == QNONE) {
        q->cqs[c - q->cqs].woken = true;
    } else {
        const cohort *root = &q->cohorts[c->root];
        for (size_t k = 0; k < root->nall; k++)
            q->cqs[root->all_members[k]].woken = true;
    }
    size_t nres = q->nres ? q->nres : 1;
    for (size_t i = 0; as && i < npodsets * nres; i++) {
        int f = as[i];
        if (f < 0 || !q->flavor_node_n || !q->flavor_node_n[f])
            continue;
        for (size_t m = 0; m < q->ncqs; m++)
            for (size_t r = 0; !q->cqs[m].woken && r < q->nres; r++)
                q->cqs[m].woken = q->cqs[m].has && q->cqs[m].has[(size_t)f * nres + r];
    }
}

static void touch(td_queue *q, size_t id)
{
    if (!q->wls[id].touched && td__idvec_push(&q->touched, id) == 0)
        q->wls[id].touched = true;
}

static void remove_admitted(td_queue *q, workload *w)
{
    cluster_queue *c = &q->cqs[w->cq];
    bump_version(q, c, w, w->nplacement > 0);
    books(q, w, -1);
    w->nplacement = 0;
    size_t pos = w->admitted_pos;
    size_t last = c->admitted.v[--c->admitted.n];
    c->admitted.v[pos] = last;
    q->wls[last].admitted_pos = pos;
    w->admitted_pos = QNONE;
    c->sorted_ok = false;
}

static int admit(td_queue *q, size_t id, const int16_t *assignment, const fr_use *use, size_t nuse,
                 bool borrowing, uint64_t now_ns)
{
    workload *w = &q->wls[id];
    w->shadow_noted = false;
    cluster_queue *c = &q->cqs[w->cq];
    size_t nres = q->nres ? q->nres : 1;
    fr_use *u = realloc(w->use, (nuse ? nuse : 1) * sizeof *u);
    if (!u)
        return -1;
    w->use = u;
    size_t np = q->scratch_place_n;
    placed *pl = realloc(w->placement, (np ? np : 1) * sizeof *pl);
    if (!pl)
        return -1;
    w->placement = pl;
    char *ptext = NULL;
    size_t plen = 0;
    /* without pods on nodes the text is "": no stream to open */
    FILE *pf = np ? open_memstream(&ptext, &plen) : NULL;
    if (np && !pf)
        return -1;
    if (!np && !(ptext = td__qstrdup("")))
        return -1;
    for (size_t k = 0; k < np; k++) {
        const placed *p = &q->scratch_place[k];
        bool new_set = k == 0 || q->scratch_place[k - 1].podset != p->podset;
        fprintf(pf, "%s%s%s%s=%lld", new_set && k ? "; " : (k ? ", " : ""),
                new_set ? w->podset_names[p->podset] : "", new_set ? ": " : "",
                q->nodes[p->node].name, (long long)p->pods);
    }
    if (pf && (fclose(pf) != 0 || !ptext)) {
        free(ptext);
        return -1;
    }
    td_queue_event *e = new_event(q);
    if (!e || td__idvec_push(&c->admitted, id) != 0) {
        if (e)
            q->nevents--;
        free(ptext);
        return -1;
    }
    free(w->placement_text);
    w->placement_text = ptext;
    if (np)
        memcpy(w->placement, q->scratch_place, np * sizeof *pl);
    w->nplacement = np;
    q->scratch_place_n = 0;
    snprintf(e->placement, sizeof e->placement, "%s", ptext);
    memcpy(w->use, use, nuse * sizeof *u);
    w->nuse = nuse;
    memcpy(w->assignment, assignment, w->npodsets * nres * sizeof *assignment);
    for (size_t k = 0; k < nuse; k++)
        add_usage(q, c, use[k].fr, use[k].v);
    bump_version(q, c, w, np > 0);
    w->admitted_pos = c->admitted.n - 1;
    w->state = TD_WL_ADMITTED;
    w->admitted_ns = now_ns;
    c->sorted_ok = false;
    w->borrowing = borrowing;
    free(w->evicted);
    w->evicted = NULL;
    w->inadmissible = false;

    char fl[sizeof e->flavors] = "";
    for (size_t i = 0; i < w->npodsets; i++) {
        append(fl, sizeof fl, "%s%s:", i ? "; " : "", w->podset_names[i]);
        bool first = true;
        for (size_t r = 0; r < q->nres; r++)
            if (assignment[i * nres + r] >= 0) {
                append(fl, sizeof fl, "%s %s=%s", first ? "" : ",", q->resource_names[r],
                       q->flavor_names[assignment[i * nres + r]]);
                first = false;
            }
    }
    e->t_ns = now_ns;
    e->type = TD_QEV_ADMITTED;
    e->workload = id;
    e->cluster_queue = w->cq;
    e->borrowing = borrowing;
    snprintf(e->flavors, sizeof e->flavors, "%s", fl);
    if (borrowing)
        snprintf(e->reason, sizeof e->reason,
                 "Quota reserved in ClusterQueue %s, borrowing in cohort %s", c->name,
                 q->cohorts[c->cohort].name);
    else
        snprintf(e->reason, sizeof e->reason, "Quota reserved in ClusterQueue %s", c->name);
    if (set_str(&w->flavors, fl) != 0 || set_reason(w, e->reason) != 0)
        return -1;
    return 0;
}

/* Preemption levels, Kueue's reasons: 0 own queue, 1 reclaim, 2 reclaim
 * while borrowing, 3 fair sharing. */
static const char *const level_names[] = {"InClusterQueue", "InCohortReclamation",
                                          "InCohortReclaimWhileBorrowing", "InCohortFairSharing"};
static const char *const level_texts[] = {"prioritization in the ClusterQueue",
                                          "reclamation within the cohort",
                                          "reclamation within the cohort while borrowing",
                                          "fair sharing within the cohort"};

static int evict(td_queue *q, size_t id, size_t by, int level, uint64_t now_ns)
{
    workload *w = &q->wls[id];
    td_queue_event *e = new_event(q);
    if (!e)
        return -1;
    remove_admitted(q, w);
    w->state = TD_WL_PENDING;
    /* Kueue's default requeuingStrategy: the eviction time orders it. */
    w->queue_ns = now_ns;
    e->t_ns = now_ns;
    e->type = TD_QEV_PREEMPTED;
    e->workload = id;
    e->cluster_queue = w->cq;
    e->by = by;
    snprintf(e->level, sizeof e->level, "%s", level_names[level]);
    snprintf(e->flavors, sizeof e->flavors, "%s", w->flavors);
    snprintf(e->placement, sizeof e->placement, "%s", w->placement_text ? w->placement_text : "");
    free(w->placement_text);
    w->placement_text = NULL;
    snprintf(e->reason, sizeof e->reason,
             "Preempted to accommodate a workload (%s) due to %s", q->wls[by].key,
             level_texts[level]);
    char ev[300], ts[40];
    time_t secs = (time_t)(now_ns / 1000000000ULL);
    struct tm tm;
    /* A daemon's clock is the epoch (2001 on): say it in UTC; a simulation's
     * virtual clock in seconds. */
    if (now_ns >= 1000000000000000000ULL && gmtime_r(&secs, &tm))
        strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    else if (now_ns % 1000000000ULL == 0)
        snprintf(ts, sizeof ts, "%llus", (unsigned long long)(now_ns / 1000000000ULL));
    else
        snprintf(ts, sizeof ts, "%.3fs", (double)now_ns / 1e9);
    snprintf(ev, sizeof ev, "Evicted by %s (%s) at %s; requeued", q->wls[by].key,
             level_names[level], ts);
    if (set_str(&w->evicted, ev) != 0 || set_reason(w, ev) != 0 ||
        set_str(&w->flavors, "") != 0)
        return -1;
    td_queue_event *r = new_event(q);
    if (!r)
        return -1;
    r->t_ns = now_ns;
    r->type = TD_QEV_REQUEUED;
    r->workload = id;
    r->cluster_queue = w->cq;
    r->by = by;
    snprintf(r->level, sizeof r->level, "%s", level_names[level]);
    snprintf(r->reason, sizeof r->reason, "%s", ev);
    return td__queue_push_pending(q, id);
}

/* ---- preemption ------------------------------------------------------------ */

static _Thread_local const td_queue *sort_q;
static _Thread_local size_t sort_cq;

/* Kueue's candidatesOrdering: other ClusterQueues first, lower priority
 * first, most recently admitted first. */
static int cmp_candidates(const void *pa, const void *pb)
{
    const workload *a = &sort_q->wls[*(const size_t *)pa], *b = &sort_q->wls[*(const size_t *)pb];
    bool a_in = a->cq == sort_cq, b_in = b->cq == sort_cq;
    if (a_in != b_in)
        return a_in ? 1 : -1;
    if (a->priority != b->priority)
        return a->priority < b->priority ? -1 : 1;
    if (a->admitted_ns != b->admitted_ns)
        return a->admitted_ns > b->admitted_ns ? -1 : 1;
    /* Kueue's last resort is the UID; tenantd's stable stand-in is the key. */
    int k = strcmp(a->key, b->key);
    return k ? k : (a->seq < b->seq ? -1 : (a->seq > b->seq));
}

static bool uses_any(const workload *w, const bool *need)
{
    for (size_t k = 0; k < w->nuse; k++)
        if (need[w->use[k].fr])
            return true;
    return false;
}

static bool cq_borrowing(const cluster_queue *c, const bool *need, size_t nfr)
{
    for (size_t fr = 0; fr < nfr; fr++)
        if (need[fr] && c->usage[fr] > c->nominal[fr])
            return true;
    return false;
}

/* Kueue's workloadFits: use fits what c has available, and, unless
 * allow_borrowing, within c's nominal quota; and every pod has a node.
 * 1 yes, 0 no, -1 out of memory. */
static int fits_with(td_queue *q, const workload *w, const cluster_queue *c, const int16_t *as,
                     const fr_use *use, size_t nuse, bool allow_borrowing)
{
    for (size_t k = 0; k < nuse; k++) {
        if (!allow_borrowing && c->usage[use[k].fr] + use[k].v > c->nominal[use[k].fr])
            return 0;
        if (use[k].v > available(q, c, use[k].fr))
            return 0;
    }
    if (!needs_nodes(q, w, as))
        return 1;
    int rc = place(q, w, as, NULL, 0);
    if (rc == 1)
        unplace_scratch(q, w, as, 0);
    return rc;
}

typedef struct {
    size_t *v;
    int *lv; /* each target's preemption level */
    size_t n;
} target_set;

/* How Kueue's preemptions end: every target in t is off the books, and w
 * fits (fit 1) or not (0) with all of them gone. When it fits, each target
 * but the last, newest first, goes back on the books if w still fits (with
 * borrowing as allowed) without its removal; the books are then as they
 * were and t holds, in order, the targets still needed (none unless w
 * fits). Returns fit, or -1 when out of memory. */
static int keep_needed(td_queue *q, const workload *w, const cluster_queue *c, const int16_t *as,
                       const fr_use *use, size_t nuse, bool borrow, target_set *t, int fit)
{
    if (fit == 1) {
        for (size_t k = t->n - 1; k-- > 0;) {
            workload *v = &q->wls[t->v[k]];
            books(q, v, 1);
            int f = fits_with(q, w, c, as, use, nuse, borrow);
            if (f == 1) {
                t->v[k] = QNONE;
            } else {
                books(q, v, -1);
                if (f < 0)
                    fit = -1;
            }
        }
    }
    size_t m = 0;
    for (size_t k = 0; k < t->n; k++)
        if (t->v[k] != QNONE) {
            books(q, &q->wls[t->v[k]], 1);
            t->lv[m] = t->lv[k];
            t->v[m++] = t->v[k];
        }
    t->n = fit == 1 ? m : 0;
    return fit;
}

/* Kueue's minimalPreemptions: takes candidates in order (skipping other
 * ClusterQueues that are not borrowing what is needed) until w fits, then
 * gives back every one but the last that is not needed. A candidate of
 * another ClusterQueue at or above threshold (when set) ends borrowing for
 * the preemptor. Leaves the books as they were; the set in t (n = 0: none).
 * -1 out of memory. */
static int minimal_set(td_queue *q, const workload *w, const int16_t *as, const fr_use *use,
                       size_t nuse, const bool *need, const size_t *cand, size_t ncand,
                       bool allow_borrowing, const int32_t *threshold, target_set *t)
{
    const cluster_queue *c = &q->cqs[w->cq];
    t->n = 0;
    bool borrow = allow_borrowing;
    int fit = 0;
    for (size_t k = 0; k < ncand && fit == 0; k++) {
        workload *v = &q->wls[cand[k]];
        if (v->cq != w->cq && !cq_borrowing(&q->cqs[v->cq], need, q->nfr))
            continue;
        if (v->cq != w->cq && threshold && v->priority >= *threshold)
            borrow = false;
        books(q, v, -1);
        t->lv[t->n] = v->cq == w->cq ? 0 : -1; /* others: by how it ends */
        t->v[t->n++] = cand[k];
        fit = fits_with(q, w, c, as, use, nuse, borrow);
    }
    /* a target of another ClusterQueue: 2 if w still borrows, else 1 */
    for (size_t k = 0; k < t->n; k++)
        t->lv[k] = t->lv[k] == 0 ? 0 : borrow ? 2 : 1;
    return keep_needed(q, w, c, as, use, nuse, borrow, t, fit) < 0 ? -1 : 0;
}


static void sim_usage(td_queue *q, cluster_queue *c, const fr_use *use, size_t nuse, int64_t sign)
{
    for (size_t k = 0; k < nuse; k++)
        add_usage(q, c, use[k].fr, sign * use[k].v);
}

/* fits_with, borrowing allowed, while w's own usage is simulated in c. */
static int fits_simulated(td_queue *q, const workload *w, cluster_queue *c, const int16_t *as,
                          const fr_use *use, size_t nuse)
{
    sim_usage(q, c, use, nuse, -1);
    int f = fits_with(q, w, c, as, use, nuse, true);
    sim_usage(q, c, use, nuse, 1);
    return f;
}

/* ---- fair-sharing targets over cohort trees (Kueue's fairsharing
 * ordering): the descent from the root to the queue to take from next,
 * and the shares compared at the level where the paths meet. ---- */

/* The node of c's path just below cohort at: a cohort, or QNONE for c. */
static size_t node_below(const td_queue *q, const cluster_queue *c, size_t at)
{
    size_t prev = QNONE;
    for (size_t k = c->cohort; k != QNONE && k != at; k = q->cohorts[k].parent)
        prev = k;
    return prev;
}

static bool on_path(const td_queue *q, size_t own_cq, size_t at)
{
    for (size_t k = q->cqs[own_cq].cohort; k != QNONE; k = q->cohorts[k].parent)
        if (k == at)
            return true;
    return false;
}

static bool cohort_borrowing(const td_queue *q, const cohort *co)
{
    for (size_t fr = 0; fr < q->nfr; fr++)
        if (co->used[fr] > co->lendable[fr])
            return true;
    return false;
}

static int64_t cohort_drs(const td_queue *q, const cohort *co)
{
    return node_share(q, co->used, co->lendable, NULL, co->parent, co->fair_weight, NULL, 0, NULL);
}

/* The share of the node on cqi's path just below cohort lca (Kueue's
 * almost least common ancestor). */
static int64_t almost_lca_share(const td_queue *q, size_t cqi, size_t lca)
{
    size_t node = node_below(q, &q->cqs[cqi], lca);
    return node == QNONE ? drs(q, &q->cqs[cqi]) : cohort_drs(q, &q->cohorts[node]);
}

/* Where target's path meets own's. */
static size_t meet(const td_queue *q, size_t own, size_t target)
{
    for (size_t k = q->cqs[target].cohort; k != QNONE; k = q->cohorts[k].parent)
        if (on_path(q, own, k))
            return k;
    return QNONE;
}

/* Kueue's ComputeShares: the preemptor's and the target's shares at the
 * level where their paths meet. */
static void pair_shares(const td_queue *q, size_t own, size_t target, int64_t *pns, int64_t *ts)
{
    size_t lca = meet(q, own, target);
    *pns = lca == QNONE ? drs(q, &q->cqs[own]) : almost_lca_share(q, own, lca);
    *ts = lca == QNONE ? drs(q, &q->cqs[target]) : almost_lca_share(q, target, lca);
}

static bool cq_has_alive(const td_queue *q, size_t cqi, const size_t *cand, const bool *alive,
                         size_t ncand)
{
    for (size_t k = 0; k < ncand; k++)
        if (alive[k] && q->wls[cand[k]].cq == cqi)
            return true;
    return false;
}

/* Kueue's nextTarget from cohort at: the child with the highest share,
 * among queues with candidates left that are w's own or borrowing what is
 * needed (ties: the first defined) and cohorts that borrow or lie on w's
 * path; a cohort wins ties against a queue, and is descended into. */
static size_t fair_next(td_queue *q, size_t at, size_t own, const bool *need, const size_t *cand,
                        const bool *alive, size_t ncand)
{
    size_t best_cq = QNONE;
    int64_t best_cq_share = -1;
    const cohort *co = &q->cohorts[at];
    for (size_t k = 0; k < co->nmembers; k++) {
        size_t m = co->members[k];
        if ((m != own && !cq_borrowing(&q->cqs[m], need, q->nfr)) ||
            !cq_has_alive(q, m, cand, alive, ncand))
            continue;
        int64_t sh = drs(q, &q->cqs[m]);
        if (sh > best_cq_share || (sh == best_cq_share && m < best_cq)) {
            best_cq_share = sh;
            best_cq = m;
        }
    }
    size_t picked[64], npicked = 0; /* cohorts already found empty */
    for (;;) {
        size_t best_co = QNONE;
        int64_t best_co_share = -1;
        for (size_t ch = 0; ch < q->ncohorts; ch++) {
            if (q->cohorts[ch].parent != at)
                continue;
            bool seen = false;
            for (size_t k = 0; k < npicked; k++)
                seen |= picked[k] == ch;
            if (seen || (!cohort_borrowing(q, &q->cohorts[ch]) && !on_path(q, own, ch)))
                continue;
            int64_t sh = cohort_drs(q, &q->cohorts[ch]);
            if (sh >= best_co_share) {
                best_co_share = sh;
                best_co = ch;
            }
        }
        if (best_co == QNONE || best_co_share < best_cq_share)
            return best_cq;
        size_t r = fair_next(q, best_co, own, need, cand, alive, ncand);
        if (r != QNONE || npicked == sizeof picked / sizeof picked[0])
            return r != QNONE ? r : best_cq;
        picked[npicked++] = best_co;
    }
}

/* The ClusterQueue to take a candidate from next (see fair_next), QNONE if
 * none is left. */
static size_t fair_pick(td_queue *q, size_t own, const bool *need, const size_t *cand,
                        const bool *alive, size_t ncand)
{
    const cluster_queue *c = &q->cqs[own];
    if (c->cohort == QNONE)
        return cq_has_alive(q, own, cand, alive, ncand) ? own : QNONE;
    return fair_next(q, c->root, own, need, cand, alive, ncand);
}

typedef struct {
    td_queue *q;
    const workload *w;
    cluster_queue *c;
    const int16_t *as;
    const fr_use *use;
    size_t nuse;
    const bool *need;
    const int32_t *threshold;
    bool within_nominal; /* w's queue stays within nominal in what is needed */
    target_set *t;
    int fit;
    bool took_own;
} fair_ctx;

static void fair_take(fair_ctx *x, size_t id, int level)
{
    books(x->q, &x->q->wls[id], -1);
    x->t->v[x->t->n] = id;
    x->t->lv[x->t->n++] = level;
    x->fit = fits_simulated(x->q, x->w, x->c, x->as, x->use, x->nuse);
}

/* Rule S2-a over cand (alive marks what is left): the queue with the
 * largest share gives its first candidate that passes, then pick again.
 * What does not pass goes to retry. */
static void fair_first(fair_ctx *x, const size_t *cand, bool *alive, size_t ncand, size_t *retry,
                       size_t *nretry)
{
    td_queue *q = x->q;
    size_t own = x->w->cq;
    for (size_t cq; x->fit == 0 && (cq = fair_pick(q, own, x->need, cand, alive, ncand)) != QNONE;) {
        int64_t pns, told;
        pair_shares(q, own, cq, &pns, &told);
        for (size_t k = 0; k < ncand; k++) {
            if (!alive[k] || q->wls[cand[k]].cq != cq)
                continue;
            workload *v = &q->wls[cand[k]];
            alive[k] = false;
            if (cq == own) {
                x->took_own = true;
                fair_take(x, cand[k], 0);
                break;
            }
            if (x->within_nominal) {
                fair_take(x, cand[k], 1);
                break;
            }
            bool pass = x->threshold && v->priority < *x->threshold;
            if (!pass) {
                books(q, v, -1);
                int64_t pns_unused, tnew;
                pair_shares(q, own, cq, &pns_unused, &tnew);
                books(q, v, 1);
                pass = q->fs_strategies[0] == FS_LE_FINAL_SHARE ? pns <= tnew : pns < told;
            }
            if (pass) {
                fair_take(x, cand[k], 3);
                break; /* shares changed: pick again */
            }
            retry[(*nretry)++] = cand[k];
        }
    }
    /* a candidate left alive was never looked at: keep it for the retry */
    for (size_t k = 0; k < ncand; k++)
        if (alive[k] && q->wls[cand[k]].cq != own) {
            alive[k] = false;
            retry[(*nretry)++] = cand[k];
        }
}

/* Kueue's fair preemption (KEP-1714), flat cohorts: w's usage is simulated
 * in its queue while candidates are picked. The queue with the largest
 * dominant resource share goes first: from w's own queue its first
 * candidate; from another, when w's queue stays within nominal quota in
 * what needs preemption, its first candidate (InCohortReclamation), else
 * its first candidate for which the first strategy holds
 * (LessThanOrEqualToFinalShare: w's queue's share <= the target's share
 * without it; LessThanInitialShare: < the target's share now) or that is
 * below the borrowWithinCohort threshold (InCohortFairSharing); then pick
 * again. If own candidates were taken, rule one runs once more over the
 * candidates passed over; if w still does not fit, the second strategy
 * (LessThanInitialShare), the first candidate of each queue at most. Then
 * give back, newest first, those not needed. The set in t, books
 * untouched; -1 out of memory. */
static int fair_set(td_queue *q, const workload *w, const int16_t *as, const fr_use *use,
                    size_t nuse, const bool *need, const size_t *cand, size_t ncand,
                    const int32_t *threshold, target_set *t)
{
    cluster_queue *c = &q->cqs[w->cq];
    bool *alive = malloc(ncand * sizeof *alive);
    size_t *retry = malloc(ncand * sizeof *retry), nretry = 0;
    size_t *retry2 = malloc(ncand * sizeof *retry2), nretry2 = 0;
    if (!alive || !retry || !retry2) {
        free(alive);
        free(retry);
        free(retry2);
        return -1;
    }
    t->n = 0;
    sim_usage(q, c, use, nuse, 1);
    fair_ctx x = {q, w, c, as, use, nuse, need, threshold, true, t, 0, false};
    for (size_t fr = 0; fr < q->nfr; fr++)
        if (need[fr] && c->usage[fr] > c->nominal[fr])
            x.within_nominal = false;
    for (size_t k = 0; k < ncand; k++)
        alive[k] = true;
    fair_first(&x, cand, alive, ncand, retry, &nretry);
    if (x.fit == 0 && x.took_own) {
        for (size_t k = 0; k < nretry; k++)
            alive[k] = true;
        fair_first(&x, retry, alive, nretry, retry2, &nretry2);
        memcpy(retry, retry2, nretry2 * sizeof *retry);
        nretry = nretry2;
    }
    if (x.fit == 0 && q->nfs_strategies > 1) {
        for (size_t k = 0; k < nretry; k++)
            alive[k] = true;
        for (size_t cq; x.fit == 0 && (cq = fair_pick(q, w->cq, need, retry, alive, nretry)) != QNONE;) {
            int64_t pns, told;
            pair_shares(q, w->cq, cq, &pns, &told);
            bool first = true;
            for (size_t k = 0; k < nretry; k++) {
                if (!alive[k] || q->wls[retry[k]].cq != cq)
                    continue;
                alive[k] = false; /* the rule holds for a queue at most once */
                if (first && pns < told)
                    fair_take(&x, retry[k], 3);
                first = false;
            }
        }
    }
    sim_usage(q, c, use, nuse, -1);
    int fit = x.fit;
    fit = keep_needed(q, w, c, as, use, nuse, true, t, fit);
    free(alive);
    free(retry);
    free(retry2);
    return fit < 0 ? -1 : 0;
}

/* ---- hierarchical reclaim (Kueue's classical preemption, KEP-79) ---------- */

/* Kueue's preemption variants: how a candidate may be preempted. */
typedef enum {
    PV_WITHIN_CQ = 0,       /* InClusterQueue */
    PV_HIERARCHICAL,        /* InCohortReclamation: the preemptor is closer to the quota */
    PV_RECLAIM_NO_BORROW,   /* InCohortReclamation, only if the preemptor ends within quota */
    PV_RECLAIM_WHILE_BORROW /* InCohortReclaimWhileBorrowing */
} variant;

typedef struct {
    size_t id;
    size_t lca; /* cohort where the preemptor's and the candidate's paths meet */
    variant pv;
} hcand;

/* A run of candidates: one ClusterQueue's admitted workloads in
 * candidatesOrdering (its sorted list), those classify admits, all with one
 * lca and hierarchical advantage. */
typedef struct {
    const size_t *v;
    size_t n, pos;
    size_t lca;
    bool adv;
    variant pv;           /* of v[pos] */
    const workload *head; /* v[pos]'s workload, the heap's key */
} hrun;

/* One of classical_set's candidate lists as the lazy merge of its runs: a
 * binary min-heap of runs keyed by each run's next candidate. The list's
 * order is candidatesOrdering, a total order, so the merge yields exactly
 * the sequence sorting every candidate would; only the prefix that the
 * preemption consumes is ever produced. */
typedef struct {
    hrun *runs;
    size_t nruns, cap;
    size_t *heap; /* indices in runs */
    size_t nheap, heapcap;
    bool started; /* heap built */
} hlist;

typedef struct {
    td_queue *q;
    const workload *w;
    const bool *need;
    bool adv;
    hlist *out[2]; /* [0] priority candidates, [1] hierarchy candidates */
    int oom;
    const int *nf; /* the flavor-resources need marks, nn of them */
    size_t nn;
} hctx;

static bool cq_within_nominal(const td_queue *q, const cluster_queue *m, const bool *need)
{
    for (size_t fr = 0; fr < q->nfr; fr++)
        if (need[fr] && m->usage[fr] > m->nominal[fr])
            return false;
    return true;
}

static bool cohort_within_nominal(const td_queue *q, const cohort *co, const bool *need)
{
    for (size_t fr = 0; fr < q->nfr; fr++)
        if (need[fr] && co->used[fr] > co->lendable[fr])
            return false;
    return true;
}

/* Kueue's classifyPreemptionVariant; -1 for a workload it may not preempt. */
static int classify(const td_queue *q, const workload *w, const workload *v, const bool *need,
                    bool adv)
{
    const cluster_queue *c = &q->cqs[w->cq];
    if (!uses_any(v, need))
        return -1;
    if (v->cq == w->cq) {
        bool ok = c->within != WITHIN_NEVER &&
                  (v->priority < w->priority ||
                   (c->within == WITHIN_LOWER_OR_NEWER && v->priority == w->priority &&
                    w->queue_ns < v->queue_ns));
        return ok ? PV_WITHIN_CQ : -1;
    }
    if (c->reclaim == RECLAIM_NEVER || (c->reclaim == RECLAIM_LOWER && v->priority >= w->priority))
        return -1;
    if (adv)
        return PV_HIERARCHICAL;
    if (!c->bwc || v->priority >= w->priority ||
        (c->bwc_has_max && v->priority > c->bwc_max_priority))
        return PV_RECLAIM_NO_BORROW;
    return PV_RECLAIM_WHILE_BORROW;
}

/* candidatesOrdering between two candidates of the same side (both of the
 * preemptor's ClusterQueue or neither): lower priority first, most
 * recently admitted first, then the key, then submission order. */
static inline bool cand_before(const td_queue *q, const workload *a, const workload *b)
{
    (void)q;
    if (a->priority != b->priority)
        return a->priority < b->priority;
    if (a->admitted_ns != b->admitted_ns)
        return a->admitted_ns > b->admitted_ns;
    int k = strcmp(a->key, b->key);
    return k ? k < 0 : a->seq < b->seq;
}


static _Thread_local const td_queue *csort_q;

static int cmp_cand_ids(const void *pa, const void *pb)
{
    const workload *a = &csort_q->wls[*(const size_t *)pa];
    const workload *b = &csort_q->wls[*(const size_t *)pb];
    return cand_before(csort_q, a, b) ? -1 : cand_before(csort_q, b, a) ? 1 : 0;
}

/* m's admitted workloads in candidatesOrdering; NULL out of memory. The
 * list only changes when m admits or releases a workload (admit,
 * remove_admitted mark it stale); priority, admission time and key of an
 * admitted workload do not change. */
static const size_t *cq_sorted(td_queue *q, cluster_queue *m)
{
    if (m->sorted_ok)
        return m->sorted.v;
    if (m->sorted.cap < m->admitted.n) {
        size_t cap = m->admitted.n < 16 ? 16 : m->admitted.n * 2;
        size_t *p = realloc(m->sorted.v, cap * sizeof *p);
        if (!p)
            return NULL;
        m->sorted.v = p;
        m->sorted.cap = cap;
    }
    if (m->admitted.n)
        memcpy(m->sorted.v, m->admitted.v, m->admitted.n * sizeof *m->sorted.v);
    m->sorted.n = m->admitted.n;
    csort_q = q;
    if (m->sorted.n > 1)
        qsort(m->sorted.v, m->sorted.n, sizeof *m->sorted.v, cmp_cand_ids);
    m->sorted_ok = true;
    return m->sorted.v; /* callers ask only when m has admitted workloads */
}

static void hrun_skip(hctx *x, hrun *r)
{
    for (; r->pos < r->n; r->pos++) {
        const workload *v = &x->q->wls[r->v[r->pos]];
        int pv = classify(x->q, x->w, v, x->need, r->adv);
        if (pv >= 0) {
            r->pv = (variant)pv;
            r->head = v;
            return;
        }
    }
}

static bool hrun_less(const td_queue *q, const hrun *a, const hrun *b)
{
    return cand_before(q, a->head, b->head);
}

static void hlist_down(const td_queue *q, hlist *l, size_t i)
{
    for (;;) {
        size_t c = 2 * i + 1, best = i;
        if (c < l->nheap && hrun_less(q, &l->runs[l->heap[c]], &l->runs[l->heap[best]]))
            best = c;
        if (c + 1 < l->nheap && hrun_less(q, &l->runs[l->heap[c + 1]], &l->runs[l->heap[best]]))
            best = c + 1;
        if (best == i)
            return;
        size_t t = l->heap[i];
        l->heap[i] = l->heap[best];
        l->heap[best] = t;
        i = best;
    }
}

/* Whether the list has a candidate, looking no further than the first
 * run that has one. */
static bool hlist_any(hctx *x, hlist *l)
{
    for (size_t k = 0; k < l->nruns; k++) {
        hrun_skip(x, &l->runs[k]);
        if (l->runs[k].pos < l->runs[k].n)
            return true;
    }
    return false;
}

/* Builds the heap over the runs that have a candidate, on first use;
 * -1 out of memory. */
static int hlist_start(hctx *x, hlist *l)
{
    if (l->started)
        return 0;
    l->started = true;
    l->nheap = 0;
    if (!l->nruns)
        return 0;
    if (l->nruns > l->heapcap) {
        size_t *p = realloc(l->heap, l->nruns * sizeof *p);
        if (!p)
            return -1;
        l->heap = p;
        l->heapcap = l->nruns;
    }
    for (size_t k = 0; k < l->nruns; k++) {
        hrun_skip(x, &l->runs[k]);
        if (l->runs[k].pos < l->runs[k].n)
            l->heap[l->nheap++] = k;
    }
    for (size_t i = l->nheap / 2; i-- > 0;)
        hlist_down(x->q, l, i);
    return 0;
}

/* The list's next candidate into *out; false when it has none left. */
static bool hlist_pop(hctx *x, hlist *l, hcand *out)
{
    if (!l->nheap)
        return false;
    hrun *r = &l->runs[l->heap[0]];
    *out = (hcand){r->v[r->pos], r->lca, r->pv};
    r->pos++;
    hrun_skip(x, r);
    if (r->pos >= r->n)
        l->heap[0] = l->heap[--l->nheap];
    hlist_down(x->q, l, 0);
    return true;
}

static void from_cq(hctx *x, size_t cqi, size_t lca, hlist *l)
{
    cluster_queue *m = &x->q->cqs[cqi];
    if (!m->admitted.n)
        return;
    const size_t *v = cq_sorted(x->q, m);
    if (!v) {
        x->oom = 1;
        return;
    }
    if (l->nruns == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        hrun *p = realloc(l->runs, cap * sizeof *p);
        if (!p) {
            x->oom = 1;
            return;
        }
        l->runs = p;
        l->cap = cap;
    }
    l->runs[l->nruns++] = (hrun){v, m->admitted.n, 0, lca, x->adv, PV_WITHIN_CQ, NULL};
}

/* Kueue's collectCandidatesInSubtree: below cur, skipping the subtree
 * already visited and subtrees within their quota in what is needed. */
static void collect_subtree(hctx *x, size_t cur, size_t lca, size_t skip)
{
    td_queue *q = x->q;
    for (size_t ch = 0; ch < q->ncohorts && !x->oom; ch++)
        if (q->cohorts[ch].parent == cur && ch != skip &&
            !cohort_within_nominal(q, &q->cohorts[ch], x->need))
            collect_subtree(x, ch, lca, skip);
    /* the members above their nominal quota in a needed flavor-resource
     * (not cq_within_nominal), each once: the order of the runs does not
     * matter, candidates are merged in candidatesOrdering */
    for (size_t i = 0; i < x->nn && !x->oom; i++) {
        uint32_t *n;
        const size_t *v = borrow_list(q, cur, x->nf[i], &n);
        for (size_t k = 0; k < *n && !x->oom; k++) {
            size_t m = v[k];
            bool seen = false;
            for (size_t j = 0; j < i && !seen; j++)
                seen = q->borrow_pos[m * q->nfr + (size_t)x->nf[j]] != UINT32_MAX;
            if (seen || m == x->w->cq || !q->cqs[m].admitted.n)
                continue; /* from_cq would add nothing */
            from_cq(x, m, lca, x->out[x->adv]);
        }
    }
}

/* Kueue's QuantitiesFitInQuota at one node (subtree quota sub, guaranteed
 * g, usage u): whether rem fits, and what exceeds the node's own part. */
static bool fit_in_node(const int64_t *sub, const int64_t *g, const int64_t *u, fr_use *rem,
                        size_t nuse)
{
    bool fits = true;
    for (size_t k = 0; k < nuse; k++) {
        int fr = rem[k].fr;
        if (sub[fr] < sat_add(u[fr], rem[k].v))
            fits = false;
        rem[k].v = max0(rem[k].v - max0(g[fr] - u[fr]));
    }
    return fits;
}

/* Kueue's candidateIsValid: a candidate of another queue only while its
 * queue, and every cohort up to where the paths meet, is above its quota
 * in what is needed; one that needs the preemptor within quota only when
 * it will be. */
static bool hvalid(const td_queue *q, const workload *w, const hcand *h, const bool *need,
                   bool borrow)
{
    const workload *v = &q->wls[h->id];
    if (v->cq == w->cq)
        return true;
    if (borrow && h->pv == PV_RECLAIM_NO_BORROW)
        return false;
    const cluster_queue *m = &q->cqs[v->cq];
    if (cq_within_nominal(q, m, need))
        return false;
    for (size_t at = m->cohort; at != QNONE && at != h->lca; at = q->cohorts[at].parent)
        if (cohort_within_nominal(q, &q->cohorts[at], need))
            return false;
    return true;
}

static const int variant_level[] = {0, 1, 1, 2};

/* Kueue's classical preemption over a cohort tree (GetTargets with
 * hierarchical cohorts). Candidates, each list in candidatesOrdering:
 * first those over which w has a hierarchical advantage (walking up from
 * w's queue, once a subtree's quota holds what w needs beyond the levels
 * below, every borrowing queue met from there is reclaimed whatever the
 * borrowWithinCohort threshold), then the other queues' candidates, then
 * w's own queue's. Subtrees within their quota are skipped. Tried with
 * borrowing allowed and not, in Kueue's order; the first run in which w
 * fits gives the set, minimal (given back newest first). Books untouched;
 * the set in t (n = 0: none); -1 out of memory. */
static int classical_set(td_queue *q, const workload *w, const int16_t *as, const fr_use *use,
                         size_t nuse, const bool *need, target_set *t)
{
    cluster_queue *c = &q->cqs[w->cq];
    hlist lists[3]; /* prio, hier, same: runs and heaps kept in q */
    memset(lists, 0, sizeof lists);
    for (int k = 0; k < 3; k++) {
        lists[k].runs = q->cs_runs[k];
        lists[k].cap = q->cs_runs_cap[k];
        lists[k].heap = q->cs_heap[k];
        lists[k].heapcap = q->cs_heap_cap[k];
    }
    int *nf = q->cs_nf;
    size_t nn = 0;
    for (size_t fr = 0; fr < q->nfr; fr++)
        if (need[fr])
            nf[nn++] = (int)fr;
    hctx x = {q, w, need, false, {&lists[0], &lists[1]}, 0, nf, nn};
    fr_use *rem = q->cs_rem; /* nuse <= nfr: one entry per flavor-resource */
    hcand *all = NULL;
    int rc = 0;
    t->n = 0;
    t->v = NULL;
    t->lv = NULL;
    if (c->within != WITHIN_NEVER)
        from_cq(&x, w->cq, QNONE, &lists[2]);
    if (c->cohort != QNONE && c->reclaim != RECLAIM_NEVER) {
        memcpy(rem, use, nuse * sizeof *rem);
        x.adv = fit_in_node(c->nominal, c->guaranteed, c->usage, rem, nuse);
        size_t prev = QNONE;
        for (size_t at = c->cohort; at != QNONE && !x.oom; at = q->cohorts[at].parent) {
            collect_subtree(&x, at, at, prev);
            const cohort *co = &q->cohorts[at];
            x.adv = fit_in_node(co->lendable, co->guaranteed, co->used, rem, nuse) || x.adv;
            prev = at;
        }
    }
    /* at most every candidate of every run */
    size_t total = 0;
    for (int k = 0; k < 3; k++)
        for (size_t r = 0; r < lists[k].nruns; r++)
            total += lists[k].runs[r].n;
    static const int order[] = {1, 0, 2};
    if (x.oom) {
        rc = -1;
        goto out;
    }
    all = malloc((total ? total : 1) * sizeof *all);
    t->v = malloc((total ? total : 1) * sizeof *t->v);
    t->lv = malloc((total ? total : 1) * sizeof *t->lv);
    if (!all || !t->v || !t->lv) {
        rc = -1;
        goto out;
    }
    bool forbidden = !c->bwc, under_nominal = true;
    for (size_t fr = 0; fr < q->nfr; fr++)
        if (need[fr] && c->usage[fr] >= c->nominal[fr])
            under_nominal = false;
    bool empty0 = !hlist_any(&x, &lists[0]), empty1 = !hlist_any(&x, &lists[1]);
    bool attempts[2];
    size_t na;
    if ((empty0 && empty1) || (forbidden && !under_nominal)) {
        attempts[0] = true;
        na = 1;
    } else if (forbidden && empty1) {
        attempts[0] = false;
        attempts[1] = true;
        na = 2;
    } else {
        attempts[0] = true;
        attempts[1] = false;
        na = 2;
    }
    /* buf[l][0, nb[l]): list l's candidates merged so far, kept for the
     * second attempt. Without borrowWithinCohort every candidate of the
     * priority list (0) is PV_RECLAIM_NO_BORROW, which hvalid rejects
     * while borrowing: that attempt skips the list without merging it. */
    hcand *buf[3];
    size_t nb[3] = {0, 0, 0}, base = 0;
    for (int k = 0; k < 3; k++) {
        size_t cap = 0;
        for (size_t r = 0; r < lists[k].nruns; r++)
            cap += lists[k].runs[r].n;
        buf[k] = all + base;
        base += cap;
    }
    for (size_t a = 0; a < na && t->n == 0; a++) {
        bool borrow = attempts[a];
        size_t m = 0;
        int fit = 0;
        for (int st = 0; st < 3 && fit == 0; st++) {
            int l = order[st];
            if (l == 0 && borrow && !c->bwc)
                continue;
            for (size_t k = 0; fit == 0; k++) {
                if (k == nb[l]) {
                    if (hlist_start(&x, &lists[l]) < 0) {
                        fit = -1;
                        break;
                    }
                    if (!hlist_pop(&x, &lists[l], &buf[l][nb[l]]))
                        break;
                    nb[l]++;
                }
                const hcand *h = &buf[l][k];
                if (!hvalid(q, w, h, need, borrow))
                    continue;
                books(q, &q->wls[h->id], -1);
                t->v[m] = h->id;
                t->lv[m++] = variant_level[h->pv];
                fit = fits_with(q, w, c, as, use, nuse, borrow);
            }
        }
        t->n = m;
        if (keep_needed(q, w, c, as, use, nuse, borrow, t, fit) < 0) {
            rc = -1;
            break;
        }
    }
out:
    free(all);
    for (int k = 0; k < 3; k++) {
        q->cs_runs[k] = lists[k].runs;
        q->cs_runs_cap[k] = lists[k].cap;
        q->cs_heap[k] = lists[k].heap;
        q->cs_heap_cap[k] = lists[k].heapcap;
    }
    return rc;
}

/* Kueue's GetTargets (classical preemption): candidates from w's own
 * ClusterQueue (withinClusterQueue) and from borrowing members of its cohort
 * (reclaimWithinCohort), ordered by candidatesOrdering; then
 *  - only own candidates: the minimal set, borrowing allowed;
 *  - borrowWithinCohort: when not under nominal in what needs preemption,
 *    only own candidates or those below the threshold; borrowing allowed;
 *  - under nominal: the minimal set without borrowing, else
 *  - own candidates only, borrowing allowed.
 * need marks the flavor-resources that need preemption. The set in t
 * (t->v, t->lv allocated here, the caller frees them; n = 0: none); books
 * untouched; -1 out of memory. */
static int find_targets(td_queue *q, const workload *w, const int16_t *as, const fr_use *use,
                        size_t nuse, const bool *need, target_set *t)
{
    cluster_queue *c = &q->cqs[w->cq];
    size_t *cand = NULL, ncand = 0, cap = 0, *same = NULL;
    int rc = 0;
    t->v = NULL;
    t->lv = NULL;
    t->n = 0;
    if (!q->fair_sharing)
        return classical_set(q, w, as, use, nuse, need, t);
    for (int pass = 0; pass < 2; pass++) {
        /* the whole cohort tree is one pool of candidates */
        const cohort *co = c->cohort != QNONE ? &q->cohorts[c->root] : NULL;
        size_t nm = pass == 0 ? 1 : (c->reclaim != RECLAIM_NEVER && co ? co->nall : 0);
        for (size_t mi = 0; mi < nm; mi++) {
            size_t cqi = pass == 0 ? w->cq : co->all_members[mi];
            const cluster_queue *m = &q->cqs[cqi];
            if (pass == 0 && c->within == WITHIN_NEVER)
                continue;
            if (pass == 1 && (cqi == w->cq || !cq_borrowing(m, need, q->nfr)))
                continue;
            for (size_t k = 0; k < m->admitted.n; k++) {
                const workload *v = &q->wls[m->admitted.v[k]];
                if (!uses_any(v, need))
                    continue;
                bool ok;
                if (pass == 0)
                    ok = v->priority < w->priority ||
                         (c->within == WITHIN_LOWER_OR_NEWER && v->priority == w->priority &&
                          w->queue_ns < v->queue_ns);
                else
                    ok = c->reclaim == RECLAIM_ANY || v->priority < w->priority;
                if (!ok)
                    continue;
                if (ncand == cap) {
                    cap = cap ? cap * 2 : 16;
                    size_t *p = realloc(cand, cap * sizeof *p);
                    if (!p) {
                        rc = -1;
                        goto out;
                    }
                    cand = p;
                }
                cand[ncand++] = m->admitted.v[k];
            }
        }
    }
    if (ncand == 0)
        goto out;
    sort_q = q;
    sort_cq = w->cq;
    qsort(cand, ncand, sizeof *cand, cmp_candidates);
    same = malloc(ncand * sizeof *same);
    t->v = malloc(ncand * sizeof *t->v);
    t->lv = malloc(ncand * sizeof *t->lv);
    if (!same || !t->v || !t->lv) {
        rc = -1;
        goto out;
    }
    size_t nsame = 0;
    for (size_t k = 0; k < ncand; k++)
        if (q->wls[cand[k]].cq == w->cq)
            same[nsame++] = cand[k];
    bool under_nominal = true;
    for (size_t fr = 0; fr < q->nfr; fr++)
        if (need[fr] && c->usage[fr] >= c->nominal[fr])
            under_nominal = false;
    int32_t threshold = w->priority;
    if (c->bwc_has_max && c->bwc_max_priority < threshold)
        threshold = c->bwc_max_priority + 1;
    if (nsame == ncand) {
        rc = minimal_set(q, w, as, use, nuse, need, cand, ncand, true, NULL, t);
    } else if (q->fair_sharing) {
        rc = fair_set(q, w, as, use, nuse, need, cand, ncand, c->bwc ? &threshold : NULL, t);
    } else if (c->bwc) {
        size_t n = ncand;
        if (!under_nominal) {
            n = 0;
            for (size_t k = 0; k < ncand; k++)
                if (q->wls[cand[k]].cq == w->cq || q->wls[cand[k]].priority < threshold)
                    cand[n++] = cand[k];
        }
        rc = minimal_set(q, w, as, use, nuse, need, cand, n, true, &threshold, t);
    } else {
        if (under_nominal)
            rc = minimal_set(q, w, as, use, nuse, need, cand, ncand, false, NULL, t);
        if (rc == 0 && t->n == 0)
            rc = minimal_set(q, w, as, use, nuse, need, same, nsame, true, NULL, t);
    }
out:
    free(cand);
    free(same);
    return rc;
}

/* Kueue's SimulatePreemption for val of fr alone: PM_NOCAND without
 * targets, PM_PREEMPT when a target is in w's own ClusterQueue, else
 * PM_RECLAIM; out->borrow is the borrowing level once the targets are
 * gone. Books untouched; -1 out of memory. */
/* Whether admitted v of queue cqi uses fr. */
static bool uses_fr(const workload *v, int fr)
{
    for (size_t k = 0; k < v->nuse; k++)
        if (v->use[k].fr == fr)
            return true;
    return false;
}

/* Whether any workload could be a target for fr: one of w's queue that
 * withinClusterQueue allows, or one of a queue of w's cohort tree that
 * borrows fr and reclaimWithinCohort allows. find_targets takes its
 * candidates among these, so without any there are no targets; this is
 * the cheap answer for the common case, without sorting or simulating. */
static bool any_candidate(const td_queue *q, const workload *w, int fr)
{
    const cluster_queue *c = &q->cqs[w->cq];
    if (c->within != WITHIN_NEVER)
        for (size_t k = 0; k < c->admitted.n; k++) {
            const workload *v = &q->wls[c->admitted.v[k]];
            if (uses_fr(v, fr) &&
                (v->priority < w->priority ||
                 (c->within == WITHIN_LOWER_OR_NEWER && v->priority == w->priority &&
                  w->queue_ns < v->queue_ns)))
                return true;
        }
    if (c->cohort == QNONE || c->reclaim == RECLAIM_NEVER)
        return false;
    /* the queues of c's tree above their nominal quota of fr */
    for (size_t co = 0; co < q->ncohorts; co++) {
        if (q->cohort_root[co] != c->root)
            continue;
        uint32_t *n;
        const size_t *list = borrow_list(q, co, fr, &n);
        for (size_t i = 0; i < *n; i++) {
            const cluster_queue *m = &q->cqs[list[i]];
            if (m == c)
                continue;
            for (size_t k = 0; k < m->admitted.n; k++) {
                const workload *v = &q->wls[m->admitted.v[k]];
                if (uses_fr(v, fr) && (c->reclaim == RECLAIM_ANY || v->priority < w->priority))
                    return true;
            }
        }
    }
    return false;
}

static int oracle_run(td_queue *q, const workload *w, int fr, int64_t val, gmode *out);

/* The oracle's answer for w depends on w only through its ClusterQueue,
 * priority (and queue time under LowerOrNewerEqualPriority), and, without
 * fair sharing, on the books of fr alone in w's cohort tree: the queues'
 * and cohorts' usage of fr and the admitted workloads that use it, which
 * change only with an admission or release of a workload using fr there
 * (fr_version). Fair sharing weighs every resource: there the answer is
 * w's own, valid while its tree's version holds. So the workloads of one
 * queue asking the same share an answer across unrelated admissions. */
static int oracle(td_queue *q, const workload *w, int fr, int64_t val, gmode *out)
{
    cluster_queue *c = &q->cqs[w->cq];
    size_t t = tree_of(q, c);
    /* versions count from 1 here: 0 marks an empty entry */
    uint64_t ver = 1 + (q->fair_sharing ? tree_version_of(q, c)
                                        : q->fr_version[t * q->nfr + (size_t)fr]);
    size_t who = q->fair_sharing ? (size_t)(w - q->wls) : QNONE;
    uint64_t qns = c->within == WITHIN_LOWER_OR_NEWER ? w->queue_ns : 0;
    uint64_t h = ((uint64_t)(uint32_t)fr * 0x9e3779b97f4a7c15ull) ^
                 ((uint64_t)val * 0xbf58476d1ce4e5b9ull) ^
                 ((uint64_t)(uint32_t)w->priority * 0x94d049bb133111ebull) ^ qns ^ who;
    oracle_memo *m = &q->omemo[w->cq * ORACLE_MEMO + (size_t)((h ^ (h >> 29)) % ORACLE_MEMO)];
    if (m->ver == ver && m->who == who && m->queue_ns == qns && m->val == val && m->fr == fr &&
        m->priority == w->priority) {
        out->pm = (pmode)m->pm;
        out->borrow = m->borrow;
        return 0;
    }
    int rc = oracle_run(q, w, fr, val, out);
    if (rc == 0)
        *m = (oracle_memo){ver, who, qns, val, fr, w->priority, (int8_t)out->pm,
                           (int8_t)out->borrow};
    return rc;
}

/* oracle without the memo */
static int oracle_run(td_queue *q, const workload *w, int fr, int64_t val, gmode *out)
{
    cluster_queue *c = &q->cqs[w->cq];
    if (!any_candidate(q, w, fr)) {
        out->pm = PM_NOCAND;
        out->borrow = borrow_height(q, c, fr, val, NULL);
        return 0;
    }
    size_t na = w->npodsets * (q->nres ? q->nres : 1);
    if (na > q->or_as_cap) {
        int16_t *p = realloc(q->or_as, na * sizeof *p);
        if (!p)
            return -1;
        q->or_as = p;
        q->or_as_cap = na;
    }
    bool *need = q->or_need; /* all false between calls */
    int16_t *as = q->or_as;
    target_set t = {NULL, NULL, 0};
    fr_use use = {fr, val};
    for (size_t k = 0; k < na; k++)
        as[k] = -1; /* quota only, as Kueue's oracle: no placement */
    need[fr] = true;
    int rc = find_targets(q, w, as, &use, 1, need, &t);
    need[fr] = false;
    if (rc == 0) {
        bool own = false;
        for (size_t k = 0; k < t.n; k++) {
            own |= q->wls[t.v[k]].cq == w->cq;
            books(q, &q->wls[t.v[k]], -1);
        }
        out->borrow = borrow_height(q, c, fr, val, NULL);
        for (size_t k = 0; k < t.n; k++)
            books(q, &q->wls[t.v[k]], 1);
        out->pm = t.n == 0 ? PM_NOCAND : own ? PM_PREEMPT : PM_RECLAIM;
    }
    free(t.v);
    free(t.lv);
    return rc;
}

/* Evicts the targets Kueue's GetTargets finds for w under assignment as
 * (placement counts as a need: when w's pods have no nodes, the flavors
 * with NodePools it uses need preemption too) and returns 1; 0 if none
 * (nothing changed); -1 out of memory. */
static int preempt(td_queue *q, size_t id, const int16_t *as, const fr_use *use, size_t nuse,
                   uint64_t now_ns)
{
    workload *w = &q->wls[id];
    cluster_queue *c = &q->cqs[w->cq];
    bool *need = q->pr_need;
    target_set t = {NULL, NULL, 0};
    int rc = 0;
    memset(need, 0, (q->nfr ? q->nfr : 1) * sizeof *need);
    int nodes_ok = needs_nodes(q, w, as) ? place(q, w, as, NULL, 0) : 1;
    if (nodes_ok < 0)
        return -1;
    if (nodes_ok == 1)
        unplace_scratch(q, w, as, 0);
    bool any_need = false;
    for (size_t k = 0; k < nuse; k++) {
        int f = use[k].fr / (int)q->nres;
        if (use[k].v > available(q, c, use[k].fr) || (!nodes_ok && q->flavor_node_n[f]))
            need[use[k].fr] = any_need = true;
    }
    if (!any_need)
        goto out;
    rc = find_targets(q, w, as, use, nuse, need, &t);
    if (rc != 0 || t.n == 0)
        goto out;
    if (q->cqs[q->wls[id].cq].shadow_preemption) {
        /* Shadow: decide, record once, change nothing; the workload waits. */
        workload *pw = &q->wls[id];
        snprintf(q->shadow_note, sizeof q->shadow_note,
                 "preemption in shadow: would preempt %zu workload%s (%s%s)", t.n,
                 t.n == 1 ? "" : "s", q->wls[t.v[0]].key, t.n > 1 ? ", ..." : "");
        for (size_t k = 0; !pw->shadow_noted && k < t.n; k++) {
            td_queue_event *e = new_event(q);
            if (!e) {
                rc = -1;
                goto out;
            }
            workload *v = &q->wls[t.v[k]];
            e->t_ns = now_ns;
            e->type = TD_QEV_WOULD_PREEMPT;
            e->workload = t.v[k];
            e->cluster_queue = v->cq;
            e->by = id;
            snprintf(e->level, sizeof e->level, "%s", level_names[t.lv[k]]);
            snprintf(e->flavors, sizeof e->flavors, "%s", v->flavors);
            snprintf(e->reason, sizeof e->reason,
                     "Would be preempted to accommodate a workload (%s) due to %s (shadow: "
                     "not preempted)",
                     pw->key, level_texts[t.lv[k]]);
        }
        pw->shadow_noted = true;
        rc = 0;
        goto out;
    }
    for (size_t k = 0; k < t.n; k++) {
        if (evict(q, t.v[k], id, t.lv[k], now_ns) != 0) {
            rc = -1;
            goto out;
        }
    }
    rc = 1;
out:
    free(t.v);
    free(t.lv);
    return rc;
}

/* ---- the pass ------------------------------------------------------------ */

typedef struct {
    size_t id;
    int borrowing; /* Kueue's borrowing level of its assignment; 0: within nominal */
    int64_t share; /* fair sharing: its queue's DRS were it admitted */
    fr_use *use;   /* fair sharing: its flavor assignment's usage */
    size_t nuse;
    /* the exact assignment computed to order the heads, and the versions of
     * the books it was computed on: try_head takes it while they hold */
    bool cached;
    uint64_t tree_v, node_v;
    assign_out a;
    int16_t *as;
    fr_use *ause;
} head;

/* ---- fair sharing over cohort trees (Kueue's fairSharingIterator) --------- */

static int try_head(td_queue *q, size_t id, uint64_t now_ns, size_t *nadmitted, const head *h);

/* Room in q's head cache for the assignments and usage of heads[0, n);
 * false out of memory (then no head is cached: try_head assigns again). */
static bool head_cache_room(td_queue *q, const head *heads, size_t n)
{
    size_t nres = q->nres ? q->nres : 1, nfr = q->nfr ? q->nfr : 1, na = 0;
    for (size_t k = 0; k < n; k++)
        na += q->wls[heads[k].id].npodsets * nres;
    if (na > q->hc_as_cap) {
        int16_t *p = realloc(q->hc_as, na * sizeof *p);
        if (!p)
            return false;
        q->hc_as = p;
        q->hc_as_cap = na;
    }
    if (n * nfr > q->hc_use_cap) {
        fr_use *p = realloc(q->hc_use, n * nfr * sizeof *p);
        if (!p)
            return false;
        q->hc_use = p;
        q->hc_use_cap = n * nfr;
    }
    return true;
}

/* The heads' cache entries (in q's head cache) are void from here. */
static void free_head_cache(head *heads, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        heads[k].as = NULL;
        heads[k].ause = NULL;
        heads[k].cached = false;
    }
}

/* h's share at the level of cohort at: the DRS of the child of at on the
 * path of h's queue, with h's usage added, and whether that child then
 * borrows in what h requests. */
static int64_t level_share(td_queue *q, const head *h, size_t at, bool *borrowing)
{
    cluster_queue *c = &q->cqs[q->wls[h->id].cq];
    sim_usage(q, c, h->use, h->nuse, 1);
    size_t node = node_below(q, c, at);
    int64_t sh;
    if (node == QNONE) {
        sh = node_share(q, c->usage, c->nominal, c->has, c->cohort, c->fair_weight, h->use,
                        h->nuse, borrowing);
    } else {
        const cohort *co = &q->cohorts[node];
        sh = node_share(q, co->used, co->lendable, NULL, co->parent, co->fair_weight, h->use,
                        h->nuse, borrowing);
    }
    sim_usage(q, c, h->use, h->nuse, -1);
    return sh;
}

/* Kueue's entryComparer at cohort at: not borrowing at that level first
 * (FairSharingPrioritizeNonBorrowing), then the lower share at that level,
 * then priority, then queue time. */
static bool fs_less(td_queue *q, const head *a, const head *b, size_t at)
{
    bool ab, bb;
    int64_t sa = level_share(q, a, at, &ab), sb = level_share(q, b, at, &bb);
    if (ab != bb)
        return !ab;
    if (sa != sb)
        return sa < sb;
    return before(q, a->id, b->id);
}

/* Kueue's runTournament: the winner of each child cohort and the head of
 * each member queue meet at cohort at; the best at that level wins. Index
 * into heads, or QNONE. */
static size_t tournament(td_queue *q, size_t at, const head *heads, const bool *alive, size_t n)
{
    size_t best = QNONE;
    for (size_t ch = 0; ch < q->ncohorts; ch++) {
        if (q->cohorts[ch].parent != at)
            continue;
        size_t w = tournament(q, ch, heads, alive, n);
        if (w != QNONE && (best == QNONE || fs_less(q, &heads[w], &heads[best], at)))
            best = w;
    }
    for (size_t k = 0; k < n; k++) {
        if (!alive[k] || q->cqs[q->wls[heads[k].id].cq].cohort != at)
            continue;
        if (best == QNONE || fs_less(q, &heads[k], &heads[best], at))
            best = k;
    }
    return best;
}

/* Fair sharing: the heads one at a time, as Kueue's iterator gives them:
 * the first left (in cmp_heads order) names a cohort tree, whose
 * tournament, on the usage as it is now, picks the next. -1 out of memory. */
static int try_fair(td_queue *q, head *heads, size_t n, uint64_t now_ns, size_t *admitted)
{
    bool *alive = malloc((n ? n : 1) * sizeof *alive);
    if (!alive)
        return -1;
    for (size_t k = 0; k < n; k++)
        alive[k] = true;
    for (size_t left = n; left > 0; left--) {
        size_t k0 = 0;
        while (!alive[k0])
            k0++;
        const cluster_queue *c = &q->cqs[q->wls[heads[k0].id].cq];
        size_t k = c->cohort == QNONE ? k0 : tournament(q, c->root, heads, alive, n);
        if (k == QNONE)
            k = k0;
        alive[k] = false;
        if (try_head(q, heads[k].id, now_ns, admitted, &heads[k]) != 0) {
            free(alive);
            return -1;
        }
    }
    free(alive);
    return 0;
}

/* Kueue's entryOrdering: the lower borrowing level first (within nominal,
 * then borrowing from the nearest cohort before the root); with fair
 * sharing, the lower dominant resource share (with the workload) first;
 * then priority and queue time. */
static int cmp_heads(const void *pa, const void *pb)
{
    const head *a = pa, *b = pb;
    if (a->borrowing != b->borrowing)
        return a->borrowing > b->borrowing ? 1 : -1;
    if (a->share != b->share)
        return a->share < b->share ? -1 : 1;
    return before(sort_q, a->id, b->id) ? -1 : (before(sort_q, b->id, a->id) ? 1 : 0);
}

/* Parks pending id (its reason set): StrictFIFO blocks its queue, else
 * it waits with the inadmissible. -1 out of memory. */
static int park_tail(td_queue *q, size_t id)
{
    workload *w = &q->wls[id];
    cluster_queue *c = &q->cqs[w->cq];
    if (c->strict_fifo) {
        c->blocked = true;
        return td__queue_push_pending(q, id);
    }
    w->inadmissible = true;
    return td__idvec_push(&c->inadmissible, id);
}

static int park(td_queue *q, size_t id, const char *reason)
{
    workload *w = &q->wls[id];
    if (q->on_release && !w->touched) {
        reason_of(q, w);
        size_t ne = w->evicted ? strlen(w->evicted) : 0;
        bool same = w->evicted ? strncmp(w->reason, w->evicted, ne) == 0 &&
                                     strncmp(w->reason + ne, ": ", 2) == 0 &&
                                     strcmp(w->reason + ne + 2, reason) == 0
                               : strcmp(w->reason, reason) == 0;
        if (!same)
            touch(q, id);
    }
    if (w->evicted) {
        size_t n = strlen(w->evicted) + strlen(reason) + 3;
        char *r = malloc(n);
        if (!r)
            return -1;
        snprintf(r, n, "%s: %s", w->evicted, reason);
        free(w->reason);
        w->reason = r;
        w->reason_lazy = false;
    } else if (set_reason(w, reason) != 0) {
        return -1;
    }
    return park_tail(q, id);
}

static bool same_items(const why_item *a, const why_item *b, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (a[k].kind != b[k].kind || a[k].f != b[k].f || a[k].r != b[k].r ||
            a[k].tn != b[k].tn || a[k].a != b[k].a || a[k].b != b[k].b || a[k].c != b[k].c)
            return false;
    return true;
}

/* park with o's reason: kept as numbers on w (worded when read) unless
 * some of it is words already. -1 out of memory. */
static int park_assign(td_queue *q, size_t id, const assign_out *o)
{
    workload *w = &q->wls[id];
    char r[600];
    if (!o->lazy || o->why.has_text) {
        if (o->lazy)
            word_assign(q, w, o->ps, o->why.item, o->why.n, o->why.text, r, sizeof r);
        return park(q, id, o->lazy ? r : o->reason);
    }
    if (q->on_release && !w->touched &&
        !(w->reason_lazy && w->why_ps == o->ps && w->nwhy == o->why.n &&
          same_items(w->why, o->why.item, o->why.n))) {
        /* changed unless the words come out the same */
        word_assign(q, w, o->ps, o->why.item, o->why.n, o->why.text, r, sizeof r);
        return park(q, id, r);
    }
    if (o->why.n > w->capwhy) {
        why_item *p = realloc(w->why, o->why.n * sizeof *p);
        if (!p)
            return -1;
        w->why = p;
        w->capwhy = (uint8_t)o->why.n;
    }
    memcpy(w->why, o->why.item, o->why.n * sizeof *w->why);
    w->nwhy = (uint8_t)o->why.n;
    w->why_ps = o->ps;
    w->reason_lazy = true;
    return park_tail(q, id);
}

/* Tries head id: h (may be NULL) holds its assignment from the ordering
 * of the cycle, taken if nothing it depends on changed since. */
static int try_head(td_queue *q, size_t id, uint64_t now_ns, size_t *nadmitted, const head *h)
{
    workload *w = &q->wls[id];
    cluster_queue *c = &q->cqs[w->cq];
    assign_out o;
    if (h && h->cached && h->tree_v == tree_version_of(q, c) && h->node_v == q->node_version) {
        o = h->a;
        memcpy(q->scratch_assign, h->as, w->npodsets * (q->nres ? q->nres : 1) * sizeof *h->as);
        memcpy(q->scratch_use, h->ause, o.nuse * sizeof *o.use);
        o.use = q->scratch_use;
    } else {
        o.order_only = false;
        if (assign_flavors(q, w, c, &o) != 0)
            return -1;
    }
    if (o.mode == MODE_NOFIT)
        return park_assign(q, id, &o);
    /* why: the reason, once it is no longer o's (lazy false) */
    char why[600];
    bool lazy = o.lazy;
    if (!lazy)
        snprintf(why, sizeof why, "%s", o.reason);
    if (o.mode == MODE_FIT) {
        int rc = needs_nodes(q, w, q->scratch_assign) ? place(q, w, q->scratch_assign, why,
                                                              sizeof why)
                                                        : 1;
        if (rc < 0)
            return -1;
        lazy &= rc != 0; /* no room on the nodes: why says so */
        if (rc == 1) {
            if (admit(q, id, q->scratch_assign, o.use, o.nuse, o.borrowing, now_ns) != 0) {
                unplace_scratch(q, w, q->scratch_assign, 0);
                return -1;
            }
            ++*nadmitted;
            return 0;
        }
    }
    /* Quota short, or no nodes for the pods: preemption may free both. */
    size_t nres = q->nres ? q->nres : 1, na = w->npodsets * nres;
    if (na > q->pr_as_cap) {
        int16_t *p = realloc(q->pr_as, na * sizeof *p);
        if (!p)
            return -1;
        q->pr_as = p;
        q->pr_as_cap = na;
    }
    int16_t *as = q->pr_as;
    fr_use *use = q->pr_use; /* o.nuse <= nfr */
    memcpy(as, q->scratch_assign, na * sizeof *as);
    memcpy(use, o.use, o.nuse * sizeof *use);
    size_t nuse = o.nuse;
    q->shadow_note[0] = '\0';
    int rc = preempt(q, id, as, use, nuse, now_ns);
    if (rc == 1) {
        bool borrowing = false;
        for (size_t k = 0; k < nuse; k++)
            borrowing |= c->usage[use[k].fr] + use[k].v > c->nominal[use[k].fr];
        rc = needs_nodes(q, w, as) ? place(q, w, as, why, sizeof why) : 1;
        lazy &= rc != 0;
        if (rc == 1 && admit(q, id, as, use, nuse, borrowing, now_ns) != 0) {
            unplace_scratch(q, w, as, 0);
            rc = -1;
        }
        if (rc == 1)
            ++*nadmitted;
        /* The minimal set can free more than the preemptor takes: then
         * parked workloads deserve another look in this pass. */
        bool freed = rc == 0; /* evicted for nothing: cannot happen, stay safe */
        for (size_t k = 0; rc == 1 && k < nuse; k++)
            if (available(q, c, use[k].fr) > 0)
                freed = true;
        if (freed) {
            q->freed = true;
            wake(q, c, as, w->npodsets);
        }
    }
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    if (lazy && !q->shadow_note[0])
        return park_assign(q, id, &o);
    if (lazy)
        word_assign(q, w, o.ps, o.why.item, o.why.n, o.why.text, why, sizeof why);
    if (q->shadow_note[0]) {
        size_t n = strlen(why);
        snprintf(why + n, sizeof why - n, "; %s", q->shadow_note);
    }
    return park(q, id, why);
}

/* Quota was released: the parked workloads of the ClusterQueues it may
 * serve (on release: those woken; else all) are tried again, and their
 * StrictFIFO heads unblocked. -1 out of memory. */
static int requeue_released(td_queue *q)
{
    for (size_t i = 0; i < q->ncqs; i++) {
        cluster_queue *c = &q->cqs[i];
        if (q->on_release && !c->woken)
            continue;
        c->woken = false;
        c->blocked = false;
        for (size_t k = 0; k < c->inadmissible.n; k++) {
            size_t id = c->inadmissible.v[k];
            if (q->wls[id].inadmissible) {
                q->wls[id].inadmissible = false;
                if (td__queue_push_pending(q, id) != 0)
                    return -1;
            }
        }
        c->inadmissible.n = 0;
    }
    q->freed = false;
    return 0;
}

/* On release, a pass cut short by its bounds (policies that evict one
 * another) leaves what it had not tried where a finished one would:
 * parked, and no wake pending, as a rebuild from the records has it. */
static td_status settle(td_queue *q)
{
    for (size_t i = 0; i < q->ncqs; i++)
        q->cqs[i].woken = false;
    q->freed = false;
    td_err e;
    return td_queue_park_all(q, &e) == TD_OK ? TD_OK : TD_ENOMEM;
}

td_status td_queue_schedule(td_queue *q, uint64_t now_ns, size_t *nadmitted)
{
    size_t admitted = 0;
    head *heads = malloc((q->ncqs ? q->ncqs : 1) * sizeof *heads);
    /* fair sharing: each head's usage, for the tournaments */
    fr_use *usebuf = q->fair_sharing && q->ncohorts
                         ? malloc((q->ncqs ? q->ncqs : 1) * (q->nfr ? q->nfr : 1) * sizeof *usebuf)
                         : NULL;
    if (!q->tree_version)
        q->tree_version = calloc(q->ncohorts + q->ncqs + 1, sizeof *q->tree_version);
    if (!heads || (q->fair_sharing && q->ncohorts && !usebuf) || !q->tree_version) {
        free(heads);
        free(usebuf);
        return TD_ENOMEM;
    }
    td_status st = TD_OK;
    bool cut = false; /* the budget ran out */
    q->in_pass = true;
    size_t ncache = 0; /* heads[0, ncache) hold cache fields to free */
    /* Each round ends when no head can move; a round is repeated only when
     * quota was released (a preemption freed more than it needed). The
     * bound guards against policies that could evict one another forever. */
    size_t budget = 16 * (q->nwls + q->ncqs) + 1024;
    for (int round = 0; round < 64; round++) {
        if (round > 0 && !q->freed)
            break;
        if (q->freed && requeue_released(q) != 0) {
            st = TD_ENOMEM;
            goto done;
        }
        /* on release, a blocked StrictFIFO head waits for one (above) */
        for (size_t i = 0; !q->on_release && i < q->ncqs; i++)
            q->cqs[i].blocked = false;
        for (;;) {
            size_t n = 0;
            for (size_t i = 0; i < q->ncqs; i++) {
                cluster_queue *c = &q->cqs[i];
                while (!c->blocked && c->heap.n) {
                    size_t id = heap_pop(q, &c->heap);
                    if (q->wls[id].state == TD_WL_PENDING) { /* withdrawn ones drop out */
                        heads[n++].id = id;
                        break;
                    }
                }
            }
            if (n == 0)
                break;
            bool room = head_cache_room(q, heads, n);
            size_t as_off = 0;
            for (size_t k = 0; k < n; k++) {
                assign_out o;
                o.order_only = true;
                workload *w = &q->wls[heads[k].id];
                heads[k].cached = false;
                heads[k].as = NULL;
                heads[k].ause = NULL;
                ncache = k + 1;
                if (assign_flavors(q, w, &q->cqs[w->cq], &o) != 0) {
                    st = TD_ENOMEM;
                    goto done;
                }
                /* the oracle was skipped: exact when w fits (see
                 * assign_flavors); else its level needs the oracle */
                if (o.oracle_skipped && o.mode != MODE_FIT && q->cqs[w->cq].cohort != QNONE) {
                    o.order_only = false;
                    if (assign_flavors(q, w, &q->cqs[w->cq], &o) != 0) {
                        st = TD_ENOMEM;
                        goto done;
                    }
                }
                heads[k].borrowing = o.mode == MODE_NOFIT ? 0 : o.borrow_level;
                /* exact unless the oracle was skipped for a workload that
                 * does not fit (then its level, not its mode, was redone) */
                size_t na = w->npodsets * (q->nres ? q->nres : 1);
                heads[k].cached = room && !(o.oracle_skipped && o.mode != MODE_FIT);
                if (heads[k].cached) {
                    heads[k].as = q->hc_as + as_off;
                    heads[k].ause = q->hc_use + k * (q->nfr ? q->nfr : 1);
                    as_off += na;
                    memcpy(heads[k].as, q->scratch_assign, na * sizeof *heads[k].as);
                    memcpy(heads[k].ause, o.use, o.nuse * sizeof *o.use);
                    heads[k].a = o;
                    heads[k].tree_v = tree_version_of(q, &q->cqs[w->cq]);
                    heads[k].node_v = q->node_version;
                }
                heads[k].share =
                    q->fair_sharing ? drs_with(q, &q->cqs[w->cq], o.use, o.nuse) : 0;
                heads[k].use = usebuf ? usebuf + k * q->nfr : NULL;
                heads[k].nuse = usebuf ? o.nuse : 0;
                if (usebuf && o.nuse)
                    memcpy(heads[k].use, o.use, o.nuse * sizeof *o.use);
            }
            sort_q = q;
            qsort(heads, n, sizeof *heads, cmp_heads);
            if (usebuf) {
                if (try_fair(q, heads, n, now_ns, &admitted) != 0) {
                    st = TD_ENOMEM;
                    goto done;
                }
            } else {
                for (size_t k = 0; k < n; k++)
                    if (try_head(q, heads[k].id, now_ns, &admitted, &heads[k]) != 0) {
                        st = TD_ENOMEM;
                        goto done;
                    }
            }
            free_head_cache(heads, ncache);
            ncache = 0;
            if (budget < n) {
                cut = true;
                goto done;
            }
            budget -= n;
        }
    }
done:
    q->in_pass = false;
    if (q->on_release && st == TD_OK && (q->freed || cut))
        st = settle(q);
    free_head_cache(heads, ncache);
    free(heads);
    free(usebuf);
    if (nadmitted)
        *nadmitted = admitted;
    return st;
}

td_status td_queue_finish(td_queue *q, size_t id, uint64_t now_ns, td_err *err)
{
    if (id >= q->nwls || q->wls[id].state != TD_WL_ADMITTED)
        return td_err_set(err, TD_EINVAL, "queue: workload %zu is not admitted", id);
    workload *w = &q->wls[id];
    td_queue_event *e = new_event(q);
    if (!e)
        return td_err_set(err, TD_ENOMEM, "queue: out of memory");
    wake(q, &q->cqs[w->cq], w->nplacement ? w->assignment : NULL, w->npodsets);
    remove_admitted(q, w);
    q->freed = true;
    w->state = TD_WL_FINISHED;
    e->t_ns = now_ns;
    e->type = TD_QEV_FINISHED;
    e->workload = id;
    e->cluster_queue = w->cq;
    snprintf(e->flavors, sizeof e->flavors, "%s", w->flavors);
    snprintf(e->placement, sizeof e->placement, "%s", w->placement_text ? w->placement_text : "");
    free(w->placement_text);
    w->placement_text = NULL;
    snprintf(e->reason, sizeof e->reason, "Workload finished in ClusterQueue %s",
             q->cqs[w->cq].name);
    set_reason(w, "");
    return TD_OK;
}

td_status td_queue_withdraw(td_queue *q, size_t id, uint64_t now_ns, td_err *err)
{
    (void)now_ns;
    if (id >= q->nwls || q->wls[id].state != TD_WL_PENDING)
        return td_err_set(err, TD_EINVAL, "queue: workload %zu is not pending", id);
    workload *w = &q->wls[id];
    /* Heaps and parked lists drop it lazily: only PENDING ones are tried. */
    w->state = TD_WL_FINISHED;
    w->inadmissible = false;
    free(w->evicted);
    w->evicted = NULL;
    set_reason(w, "");
    return TD_OK;
}

/* ---- accessors ------------------------------------------------------------ */

size_t td_queue_events(const td_queue *q, const td_queue_event **out)
{
    *out = q->events;
    return q->nevents;
}

size_t td_queue_workload_count(const td_queue *q)
{
    return q->nwls;
}

const char *td_queue_workload_key(const td_queue *q, size_t id)
{
    return q->wls[id].key;
}

td_wl_state td_queue_workload_state(const td_queue *q, size_t id)
{
    return q->wls[id].state;
}

int32_t td_queue_workload_priority(const td_queue *q, size_t id)
{
    return q->wls[id].priority;
}

const char *td_queue_workload_reason(const td_queue *q, size_t id)
{
    return reason_of(q, &q->wls[id]);
}

const char *td_queue_workload_placement(const td_queue *q, size_t id)
{
    return q->wls[id].placement_text ? q->wls[id].placement_text : "";
}

size_t td_queue_node_count(const td_queue *q)
{
    return q->nnodes;
}

const char *td_queue_node_name(const td_queue *q, size_t node)
{
    return q->nodes[node].name;
}

int64_t td_queue_node_capacity_milli(const td_queue *q, size_t node, const char *resource)
{
    size_t r = td__smap_get(&q->resource_ids, resource);
    return r == QNONE ? 0 : q->nodes[node].cap[r];
}

int64_t td_queue_node_used_milli(const td_queue *q, size_t node, const char *resource)
{
    size_t r = td__smap_get(&q->resource_ids, resource);
    return r == QNONE ? 0 : q->nodes[node].cap[r] - q->nodes[node].free[r];
}

const char *td_queue_workload_flavors(const td_queue *q, size_t id)
{
    return q->wls[id].flavors ? q->wls[id].flavors : "";
}

size_t td_queue_workload_cq(const td_queue *q, size_t id)
{
    return q->wls[id].cq;
}

int64_t td_queue_workload_request_milli(const td_queue *q, size_t id, const char *resource)
{
    size_t r = td__smap_get(&q->resource_ids, resource);
    if (r == QNONE)
        return 0;
    const workload *w = &q->wls[id];
    int64_t sum = 0;
    for (size_t i = 0; i < w->npodsets; i++)
        sum = sat_add(sum, w->requests[i * q->nres + r]);
    return sum;
}

size_t td_queue_cq_count(const td_queue *q)
{
    return q->ncqs;
}

const char *td_queue_cq_name(const td_queue *q, size_t cq)
{
    return q->cqs[cq].name;
}

const char *td_queue_cq_inactive(const td_queue *q, size_t cq)
{
    return cq < q->ncqs ? q->cqs[cq].inactive : NULL;
}

static int64_t cq_sum(const td_queue *q, size_t cq, const char *resource, int which)
{
    size_t r = td__smap_get(&q->resource_ids, resource);
    if (r == QNONE || !q->sealed)
        return 0;
    const cluster_queue *c = &q->cqs[cq];
    int64_t sum = 0;
    for (size_t f = 0; f < q->nflavors; f++) {
        size_t fr = f * q->nres + r;
        if (!c->has[fr])
            continue;
        int64_t v = which == 0 ? c->nominal[fr]
                    : which == 1 ? c->usage[fr]
                                 : max0(c->usage[fr] - c->nominal[fr]);
        sum = sat_add(sum, v);
    }
    return sum;
}

int64_t td_queue_cq_nominal_milli(const td_queue *q, size_t cq, const char *resource)
{
    return cq_sum(q, cq, resource, 0);
}

int64_t td_queue_cq_usage_milli(const td_queue *q, size_t cq, const char *resource)
{
    return cq_sum(q, cq, resource, 1);
}

int64_t td_queue_cq_borrowed_milli(const td_queue *q, size_t cq, const char *resource)
{
    return cq_sum(q, cq, resource, 2);
}

size_t td_queue_resource_count(const td_queue *q)
{
    return q->nres;
}

const char *td_queue_resource_name(const td_queue *q, size_t i)
{
    return q->resource_names[i];
}

/* ---- persisted admissions ------------------------------------------------- */

/* Drops pending id from its ClusterQueue's heap (it is restored admitted). */
static void heap_remove(td_queue *q, size_t id)
{
    idvec *h = &q->cqs[q->wls[id].cq].heap;
    size_t i = 0;
    while (i < h->n && h->v[i] != id)
        i++;
    if (i == h->n)
        return;
    h->v[i] = h->v[--h->n];
    /* the moved entry may belong above or below i */
    while (i > 0 && before(q, h->v[i], h->v[(i - 1) / 2])) {
        size_t p = (i - 1) / 2, t = h->v[i];
        h->v[i] = h->v[p];
        h->v[p] = t;
        i = p;
    }
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && before(q, h->v[l], h->v[m]))
            m = l;
        if (r < h->n && before(q, h->v[r], h->v[m]))
            m = r;
        if (m == i)
            break;
        size_t t = h->v[i];
        h->v[i] = h->v[m];
        h->v[m] = t;
        i = m;
    }
}

static size_t node_index(const td_queue *q, const char *name)
{
    for (size_t n = 0; name && n < q->nnodes; n++)
        if (strcmp(q->nodes[n].name, name) == 0)
            return n;
    return QNONE;
}

td_status td_queue_restore_admission(td_queue *q, size_t id, const json_t *adm,
                                     uint64_t admitted_ns, bool borrowing, td_err *err)
{
    if (id >= q->nwls || q->wls[id].state != TD_WL_PENDING || q->wls[id].cq == QNONE)
        return td_err_set(err, TD_EINVAL, "queue: workload %zu is not pending in a ClusterQueue",
                          id);
    workload *w = &q->wls[id];
    cluster_queue *c = &q->cqs[w->cq];
    const char *cqn = td_json_str(adm, "clusterQueue");
    if (!cqn || strcmp(cqn, c->name) != 0)
        return td_err_set(err, TD_EINVAL,
                          "Workload %s: status.admission.clusterQueue: recorded \"%s\", its "
                          "LocalQueue now points to %s",
                          w->key, cqn ? cqn : "", c->name);
    json_t *psa = json_object_get(adm, "podSetAssignments");
    if (!json_is_array(psa) || json_array_size(psa) != w->npodsets)
        return td_err_set(err, TD_EINVAL,
                          "Workload %s: status.admission.podSetAssignments: %zu recorded, the "
                          "workload has %zu pod sets",
                          w->key, json_array_size(psa), w->npodsets);
    size_t nres = q->nres ? q->nres : 1, na = w->npodsets * nres;
    int16_t *as = malloc(na * sizeof *as);
    fr_use *use = malloc((q->nfr ? q->nfr : 1) * sizeof *use);
    size_t nuse = 0;
    td_status st = as && use ? TD_OK : td_err_set(err, TD_ENOMEM, "queue: out of memory");
    q->scratch_place_n = 0;
    for (size_t i = 0; st == TD_OK && i < w->npodsets; i++) {
        json_t *a = json_array_get(psa, i);
        const char *psn = td_json_str(a, "name");
        if (!psn || strcmp(psn, w->podset_names[i]) != 0) {
            st = td_err_set(err, TD_EINVAL,
                            "Workload %s: status.admission.podSetAssignments[%zu].name: \"%s\", "
                            "the pod set is %s",
                            w->key, i, psn ? psn : "", w->podset_names[i]);
            break;
        }
        json_t *fl = json_object_get(a, "flavors");
        for (size_t r = 0; st == TD_OK && r < q->nres; r++) {
            as[i * nres + r] = -1;
            if (w->requests[i * nres + r] <= 0)
                continue;
            const char *fn = json_string_value(json_object_get(fl, q->resource_names[r]));
            size_t f = fn ? td__smap_get(&q->flavor_ids, fn) : QNONE;
            if (f == QNONE) {
                st = td_err_set(err, TD_EINVAL,
                                "Workload %s: status.admission.podSetAssignments[%zu].flavors.%s: "
                                "\"%s\" is not a ResourceFlavor",
                                w->key, i, q->resource_names[r], fn ? fn : "");
                break;
            }
            as[i * nres + r] = (int16_t)f;
            size_t fr = f * nres + r, k = 0;
            while (k < nuse && use[k].fr != (int)fr)
                k++;
            if (k == nuse)
                use[nuse++] = (fr_use){(int)fr, 0};
            use[k].v = sat_add(use[k].v, w->requests[i * nres + r]);
        }
        json_t *doms = td_json_path(a, "topologyAssignment.domains");
        size_t di;
        json_t *d;
        int64_t placed_pods = 0;
        json_array_foreach(doms, di, d)
        {
            if (st != TD_OK)
                break;
            const char *node = json_string_value(json_array_get(json_object_get(d, "values"), 0));
            json_t *cnt = json_object_get(d, "count");
            size_t n = node_index(q, node);
            bool flavor_ok = false;
            for (size_t r = 0; n != QNONE && r < q->nres; r++)
                flavor_ok |= as[i * nres + r] == q->nodes[n].flavor;
            /* a pod set has at most 1000000 pods: the sum cannot overflow */
            long long pods = 0;
            if (n == QNONE || !flavor_ok || td_json_int(cnt, 1, 1000000, &pods, NULL) != TD_OK) {
                st = td_err_set(err, TD_EINVAL,
                                "Workload %s: status.admission.podSetAssignments[%zu]."
                                "topologyAssignment.domains[%zu]: node \"%s\" is not a node of "
                                "its flavor, or the count is not an integer in [1, 1000000]",
                                w->key, i, di, node ? node : "");
                break;
            }
            placed_pods += pods;
            if (push_place(q, (uint32_t)n, (uint32_t)i, pods) != 0)
                st = td_err_set(err, TD_ENOMEM, "queue: out of memory");
        }
        if (st == TD_OK && json_array_size(doms) && placed_pods != w->counts[i])
            st = td_err_set(err, TD_EINVAL,
                            "Workload %s: status.admission.podSetAssignments[%zu]."
                            "topologyAssignment: %lld pods placed, the pod set has %lld",
                            w->key, i, (long long)placed_pods, (long long)w->counts[i]);
    }
    /* The books take the record as it is, over today's quota or capacity:
     * Kueue does not evict what it admitted when a quota shrinks. */
    for (size_t k = 0; st == TD_OK && k < q->scratch_place_n; k++)
        node_adjust(q, w, as, &q->scratch_place[k], -1);
    size_t ne = q->nevents;
    /* borrowing names the cohort: none, if the queue has left it since */
    borrowing = borrowing && c->cohort != QNONE;
    if (st == TD_OK && admit(q, id, as, use, nuse, borrowing, admitted_ns) != 0) {
        unplace_scratch(q, w, as, 0);
        st = td_err_set(err, TD_ENOMEM, "queue: out of memory");
    }
    if (st == TD_OK) {
        q->nevents = ne; /* a restore is not a decision: no event */
        heap_remove(q, id);
    }
    q->scratch_place_n = 0;
    free(as);
    free(use);
    return st;
}

td_status td_queue_restore_pending(td_queue *q, size_t id, const char *evicted,
                                   const char *reason, td_err *err)
{
    if (id >= q->nwls || q->wls[id].state != TD_WL_PENDING)
        return td_err_set(err, TD_EINVAL, "queue: workload %zu is not pending", id);
    workload *w = &q->wls[id];
    char *e = evicted && *evicted ? td__qstrdup(evicted) : NULL;
    char *r = td__qstrdup(reason ? reason : "");
    if (!r || (evicted && *evicted && !e)) {
        free(e);
        free(r);
        return td_err_set(err, TD_ENOMEM, "queue: out of memory");
    }
    free(w->evicted);
    w->evicted = e;
    free(w->reason);
    w->reason = r;
    w->reason_lazy = false;
    return TD_OK;
}

td_status td_queue_restore_event(td_queue *q, const td_queue_event *ev, td_err *err)
{
    if (ev->workload >= q->nwls || (ev->cluster_queue != QNONE && ev->cluster_queue >= q->ncqs) ||
        (ev->by != QNONE && ev->by >= q->nwls))
        return td_err_set(err, TD_EINVAL, "queue: recorded event names an unknown workload or "
                                          "ClusterQueue");
    td_queue_event *e = new_event(q);
    if (!e)
        return td_err_set(err, TD_ENOMEM, "queue: out of memory");
    *e = *ev;
    /* a shadow preemption is told once per preemptor until it is admitted */
    if (ev->type == TD_QEV_WOULD_PREEMPT && ev->by != QNONE)
        q->wls[ev->by].shadow_noted = true;
    else if (ev->type == TD_QEV_ADMITTED)
        q->wls[ev->workload].shadow_noted = false;
    return TD_OK;
}

json_t *td_queue_workload_admission(const td_queue *q, size_t id)
{
    if (id >= q->nwls || q->wls[id].state != TD_WL_ADMITTED)
        return NULL;
    const workload *w = &q->wls[id];
    size_t nres = q->nres ? q->nres : 1;
    json_t *psa = json_array();
    json_t *adm = psa ? json_pack("{s:s, s:o}", "clusterQueue", q->cqs[w->cq].name,
                                  "podSetAssignments", psa)
                      : NULL;
    for (size_t i = 0; adm && i < w->npodsets; i++) {
        json_t *fl = json_object(), *ru = json_object();
        for (size_t r = 0; fl && ru && r < q->nres; r++) {
            int f = w->assignment[i * nres + r];
            if (f < 0)
                continue;
            char buf[TD_QUANTITY_STR_MAX];
            td__queue_fmt(q, (int)r, w->requests[i * nres + r], buf, sizeof buf);
            json_object_set_new(fl, q->resource_names[r], json_string(q->flavor_names[f]));
            json_object_set_new(ru, q->resource_names[r], json_string(buf));
        }
        json_t *a = fl && ru ? json_pack("{s:s, s:o, s:o, s:I}", "name", w->podset_names[i],
                                         "flavors", fl, "resourceUsage", ru, "count",
                                         (json_int_t)w->counts[i])
                             : NULL;
        if (!a) {
            json_decref(adm);
            return NULL;
        }
        json_t *doms = json_array();
        for (size_t k = 0; doms && k < w->nplacement; k++)
            if (w->placement[k].podset == i)
                json_array_append_new(doms, json_pack("{s:[s], s:I}", "values",
                                                      q->nodes[w->placement[k].node].name,
                                                      "count", (json_int_t)w->placement[k].pods));
        if (json_array_size(doms))
            json_object_set_new(a, "topologyAssignment",
                                json_pack("{s:[s], s:o}", "levels", "kubernetes.io/hostname",
                                          "domains", doms));
        else
            json_decref(doms);
        json_array_append_new(psa, a);
    }
    return adm;
}

uint64_t td_queue_workload_queue_ns(const td_queue *q, size_t id)
{
    return id < q->nwls ? q->wls[id].queue_ns : 0;
}

uint64_t td_queue_workload_admitted_ns(const td_queue *q, size_t id)
{
    return id < q->nwls && q->wls[id].state == TD_WL_ADMITTED ? q->wls[id].admitted_ns : 0;
}

bool td_queue_workload_borrowing(const td_queue *q, size_t id)
{
    return id < q->nwls && q->wls[id].state == TD_WL_ADMITTED && q->wls[id].borrowing;
}

const char *td_queue_workload_evicted(const td_queue *q, size_t id)
{
    return id < q->nwls && q->wls[id].evicted ? q->wls[id].evicted : "";
}

size_t td_queue_workload_find(const td_queue *q, const char *key)
{
    return key ? td__smap_get(&q->wl_ids, key) : QNONE;
}

/* ---- requeue on release (the daemon's queue, kept between commits) -------- */

void td_queue_requeue_on_release(td_queue *q, bool on)
{
    q->on_release = on;
}

td_status td_queue_park_all(td_queue *q, td_err *err)
{
    for (size_t i = 0; i < q->ncqs; i++) {
        cluster_queue *c = &q->cqs[i];
        if (c->strict_fifo) {
            c->blocked = false;
            for (size_t k = 0; k < c->heap.n && !c->blocked; k++)
                c->blocked = q->wls[c->heap.v[k]].state == TD_WL_PENDING;
            continue;
        }
        while (c->heap.n) {
            size_t id = heap_pop(q, &c->heap);
            if (q->wls[id].state != TD_WL_PENDING || q->wls[id].inadmissible)
                continue;
            if (td__idvec_push(&c->inadmissible, id) != 0) {
                td__queue_push_pending(q, id); /* room: it was just popped */
                return td_err_set(err, TD_ENOMEM, "queue: out of memory");
            }
            q->wls[id].inadmissible = true;
        }
    }
    return TD_OK;
}

td_status td_queue_requeue(td_queue *q, size_t id, td_err *err)
{
    if (id >= q->nwls || q->wls[id].state != TD_WL_PENDING || q->wls[id].cq == QNONE)
        return td_err_set(err, TD_EINVAL, "queue: workload %zu is not pending in a ClusterQueue",
                          id);
    workload *w = &q->wls[id];
    cluster_queue *c = &q->cqs[w->cq];
    if (c->strict_fifo) {
        c->blocked = false;
        return TD_OK;
    }
    if (!w->inadmissible)
        return TD_OK;
    if (td__queue_push_pending(q, id) != 0)
        return td_err_set(err, TD_ENOMEM, "queue: out of memory");
    /* its parked entry drops out when the list is next requeued */
    w->inadmissible = false;
    return TD_OK;
}

size_t td_queue_touched(const td_queue *q, const size_t **ids)
{
    *ids = q->touched.v;
    return q->touched.n;
}

void td_queue_touched_clear(td_queue *q)
{
    for (size_t k = 0; k < q->touched.n; k++)
        q->wls[q->touched.v[k]].touched = false;
    q->touched.n = 0;
}
