/* critqueue.c - the criticality queue in front of one upstream (SRE book,
 * "Handling Overload"): four FIFOs, shed lowest class first, and within a
 * class the tenant furthest over its fair share.
 *
 * Shedding rule when queue_max items wait and a request arrives:
 *  1. Let L be the least critical class with anything queued.
 *  2. If L is less critical than the arrival: evict from L. The victim
 *     tenant is the one with the largest share (queued + in flight) / weight
 *     among those with items in L, ties to the tenant whose newest item in L
 *     is newest; the victim item is that tenant's newest item in L (it has
 *     waited least).
 *  3. If L is the arrival's own class: pick the victim tenant V in L as in 2;
 *     evict only if V is not the arrival's tenant A and V's share is strictly
 *     greater than A's would be with the arrival counted
 *     ((queued_A + inflight_A + 1) / weight_A). The "+1" makes the swap only
 *     ever move the two shares towards each other, so two tenants cannot
 *     evict each other back and forth.
 *  4. Otherwise (only more critical work queued, or no victim): shed the
 *     arrival (TD_CQ_SHED).
 *
 * Deadlines: an EWMA (weight 1/8, seeded by the first sample) of service
 * times from td_critqueue_done. An arrival that must queue behind n items of
 * its class or more critical waits about (floor(n / capacity) + 1) * ewma:
 * one full round of the capacity per `capacity` items ahead of it, plus the
 * round in progress. It is refused (TD_CQ_DEADLINE) if now + that passes its
 * deadline; before the first sample no estimate is made. A deadline already
 * reached is refused even when a slot is free.
 *
 * Per-tenant accounting lives in a small open-addressed table holding only
 * tenants with something queued or in flight (at most capacity + queue_max
 * entries), with one max-heap of tenants per class for the victim choice;
 * cancel finds a request through a second table keyed by its pointer. Every
 * operation is O(log n) or better. In-flight per tenant needs
 * td_critqueue_done_tenant; after a plain td_critqueue_done (which cannot
 * say whose request ended) shares count queued items only. */
#include "gateway/critqueue.h"

#include <assert.h>
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NIL        UINT32_MAX
#define NO_TENANT  UINT32_MAX /* marks a free tenant entry */
#define EWMA_SHIFT 3          /* weight 1/8, as TCP's SRTT */

typedef struct {
    td_cq_item it;
    uint64_t seq;          /* arrival order, for tie-breaks */
    uint32_t prev, next;   /* class FIFO; next links the free list */
    uint32_t tprev, tnext; /* the same tenant's items in this class */
    uint32_t owner;        /* tenant entry */
} cq_node;

typedef struct {
    uint32_t tenant; /* NO_TENANT when free */
    uint32_t inflight;
    uint32_t queued_total;
    uint32_t queued[TD_CRIT_COUNT];
    uint32_t head[TD_CRIT_COUNT], tail[TD_CRIT_COUNT];
    uint32_t heap_pos[TD_CRIT_COUNT];
    uint32_t next_free;
    double weight;
} cq_tenant;

struct td_critqueue {
    uint32_t capacity, queue_max;
    uint32_t capacity_max; /* as created: the tenant table is sized for it */
    uint32_t inflight, queued;
    uint32_t depth[TD_CRIT_COUNT];
    uint32_t head[TD_CRIT_COUNT], tail[TD_CRIT_COUNT];
    uint64_t seq;
    double ewma_ns;
    int has_ewma;
    int per_tenant_inflight;

    cq_node *nodes;
    uint32_t free_node;
    cq_tenant *tenants;
    uint32_t ntenants, free_tenant;
    uint32_t *tenant_index, tenant_mask; /* tenant entry or NIL */
    uint32_t *req_index, req_mask;       /* node or NIL */
    uint32_t *heap[TD_CRIT_COUNT];       /* tenant entries, max-heap */
    uint32_t heap_len[TD_CRIT_COUNT];
};

static const char *const crit_names[TD_CRIT_COUNT] = {"critical_plus", "critical", "sheddable_plus",
                                                      "sheddable"};

td_status td_criticality_parse(const char *s, td_criticality *out)
{
    char norm[16];
    size_t n = 0;
    if (!s)
        return TD_EINVAL;
    for (; s[n]; n++) {
        if (n + 1 >= sizeof norm)
            return TD_EINVAL;
        norm[n] = s[n] == '-' ? '_' : (char)tolower((unsigned char)s[n]);
    }
    norm[n] = '\0';
    for (int c = 0; c < TD_CRIT_COUNT; c++)
        if (strcmp(norm, crit_names[c]) == 0) {
            *out = (td_criticality)c;
            return TD_OK;
        }
    return TD_EINVAL;
}

const char *td_criticality_name(td_criticality c)
{
    return (unsigned)c < TD_CRIT_COUNT ? crit_names[c] : "unknown";
}

/* ---- open-addressed tables (linear probing, backward-shift delete) ---- */

static uint32_t mix32(uint64_t x)
{
    x *= 0x9E3779B97F4A7C15ULL;
    return (uint32_t)(x >> 32);
}

static uint32_t tenant_home(const td_critqueue *q, uint32_t ix)
{
    return mix32(q->tenants[ix].tenant) & q->tenant_mask;
}

static uint32_t req_home(const td_critqueue *q, uint32_t ix)
{
    return mix32((uint64_t)(uintptr_t)q->nodes[ix].it.req) & q->req_mask;
}

/* Empties position pos of tab and shifts later members of its probe run
 * back so that lookups never stop early at the hole. */
static void index_delete(const td_critqueue *q, uint32_t *tab, uint32_t mask, uint32_t pos,
                         uint32_t (*home)(const td_critqueue *, uint32_t))
{
    uint32_t i = pos, j = pos;
    tab[i] = NIL;
    for (;;) {
        j = (j + 1) & mask;
        if (tab[j] == NIL)
            return;
        uint32_t k = home(q, tab[j]);
        /* Entry j may stay if its home lies cyclically in (i, j]. */
        if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
            continue;
        tab[i] = tab[j];
        tab[j] = NIL;
        i = j;
    }
}

static uint32_t tenant_find(const td_critqueue *q, uint32_t tenant)
{
    for (uint32_t i = mix32(tenant) & q->tenant_mask;; i = (i + 1) & q->tenant_mask) {
        uint32_t ix = q->tenant_index[i];
        if (ix == NIL || q->tenants[ix].tenant == tenant)
            return ix;
    }
}

/* The entry of tenant, created if absent; NIL if every entry is taken
 * (only possible if done_tenant names the wrong tenants). */
static uint32_t tenant_get(td_critqueue *q, uint32_t tenant, double weight)
{
    uint32_t i = mix32(tenant) & q->tenant_mask;
    for (;; i = (i + 1) & q->tenant_mask) {
        uint32_t ix = q->tenant_index[i];
        if (ix == NIL)
            break;
        if (q->tenants[ix].tenant == tenant)
            return ix;
    }
    uint32_t ix = q->free_tenant;
    if (ix == NIL)
        return NIL;
    cq_tenant *t = &q->tenants[ix];
    q->free_tenant = t->next_free;
    memset(t, 0, sizeof *t);
    t->tenant = tenant;
    t->weight = weight;
    for (int c = 0; c < TD_CRIT_COUNT; c++)
        t->head[c] = t->tail[c] = t->heap_pos[c] = NIL;
    q->tenant_index[i] = ix;
    return ix;
}

static void tenant_release_if_idle(td_critqueue *q, uint32_t ix)
{
    cq_tenant *t = &q->tenants[ix];
    if (t->queued_total || t->inflight)
        return;
    uint32_t i = mix32(t->tenant) & q->tenant_mask;
    while (q->tenant_index[i] != ix)
        i = (i + 1) & q->tenant_mask;
    index_delete(q, q->tenant_index, q->tenant_mask, i, tenant_home);
    t->tenant = NO_TENANT;
    t->next_free = q->free_tenant;
    q->free_tenant = ix;
}

static void req_insert(td_critqueue *q, uint32_t node)
{
    uint32_t i = mix32((uint64_t)(uintptr_t)q->nodes[node].it.req) & q->req_mask;
    while (q->req_index[i] != NIL)
        i = (i + 1) & q->req_mask;
    q->req_index[i] = node;
}

/* The slot of the req table holding a node for req, or NIL. */
static uint32_t req_slot(const td_critqueue *q, const void *req)
{
    for (uint32_t i = mix32((uint64_t)(uintptr_t)req) & q->req_mask;; i = (i + 1) & q->req_mask) {
        uint32_t n = q->req_index[i];
        if (n == NIL)
            return NIL;
        if (q->nodes[n].it.req == req)
            return i;
    }
}

static void req_delete(td_critqueue *q, uint32_t node)
{
    uint32_t i = mix32((uint64_t)(uintptr_t)q->nodes[node].it.req) & q->req_mask;
    while (q->req_index[i] != node)
        i = (i + 1) & q->req_mask;
    index_delete(q, q->req_index, q->req_mask, i, req_home);
}

/* ---- per-class heaps of tenants, most over their share on top ---- */

static double share(const cq_tenant *t)
{
    return (double)(t->queued_total + t->inflight) / t->weight;
}

/* Whether tenant a should be shed from before tenant b in class c. */
static int above(const td_critqueue *q, int c, uint32_t a, uint32_t b)
{
    const cq_tenant *ta = &q->tenants[a], *tb = &q->tenants[b];
    double sa = share(ta), sb = share(tb);
    if (sa != sb)
        return sa > sb;
    return q->nodes[ta->tail[c]].seq > q->nodes[tb->tail[c]].seq;
}

static void heap_put(td_critqueue *q, int c, uint32_t pos, uint32_t ix)
{
    q->heap[c][pos] = ix;
    q->tenants[ix].heap_pos[c] = pos;
}

static void heap_fix(td_critqueue *q, int c, uint32_t pos)
{
    uint32_t *h = q->heap[c], n = q->heap_len[c], ix = h[pos];
    while (pos > 0 && above(q, c, ix, h[(pos - 1) / 2])) {
        heap_put(q, c, pos, h[(pos - 1) / 2]);
        pos = (pos - 1) / 2;
    }
    for (;;) {
        uint32_t l = 2 * pos + 1, best = l;
        if (l >= n)
            break;
        if (l + 1 < n && above(q, c, h[l + 1], h[l]))
            best = l + 1;
        if (!above(q, c, h[best], ix))
            break;
        heap_put(q, c, pos, h[best]);
        pos = best;
    }
    heap_put(q, c, pos, ix);
}

static void heap_insert(td_critqueue *q, int c, uint32_t ix)
{
    heap_put(q, c, q->heap_len[c]++, ix);
    heap_fix(q, c, q->heap_len[c] - 1);
}

static void heap_remove(td_critqueue *q, int c, uint32_t ix)
{
    uint32_t pos = q->tenants[ix].heap_pos[c], last = q->heap[c][--q->heap_len[c]];
    q->tenants[ix].heap_pos[c] = NIL;
    if (last != ix) {
        heap_put(q, c, pos, last);
        heap_fix(q, c, pos);
    }
}

/* A tenant's share changed: reposition it in every class it is queued in. */
static void tenant_changed(td_critqueue *q, uint32_t ix)
{
    for (int c = 0; c < TD_CRIT_COUNT; c++)
        if (q->tenants[ix].heap_pos[c] != NIL)
            heap_fix(q, c, q->tenants[ix].heap_pos[c]);
}

/* ---- queue operations ---- */

static void enqueue(td_critqueue *q, const td_cq_item *it, int c, uint32_t owner, uint64_t now_ns)
{
    uint32_t n = q->free_node;
    cq_node *node = &q->nodes[n];
    cq_tenant *t = &q->tenants[owner];
    q->free_node = node->next;
    node->it = *it;
    node->it.crit = (td_criticality)c;
    node->it.enqueued_ns = now_ns;
    node->seq = q->seq++;
    node->owner = owner;
    node->next = node->tnext = NIL;
    node->prev = q->tail[c];
    if (q->tail[c] != NIL)
        q->nodes[q->tail[c]].next = n;
    else
        q->head[c] = n;
    q->tail[c] = n;
    node->tprev = t->tail[c];
    if (t->tail[c] != NIL)
        q->nodes[t->tail[c]].tnext = n;
    else
        t->head[c] = n;
    t->tail[c] = n;
    req_insert(q, n);
    q->depth[c]++;
    q->queued++;
    t->queued_total++;
    if (t->queued[c]++ == 0)
        heap_insert(q, c, owner);
    tenant_changed(q, owner);
}

/* Unlinks node n everywhere and frees it; the owner's entry stays (the
 * caller releases it if idle). */
static void remove_node(td_critqueue *q, uint32_t n)
{
    cq_node *node = &q->nodes[n];
    int c = (int)node->it.crit;
    uint32_t owner = node->owner;
    cq_tenant *t = &q->tenants[owner];
    if (node->prev != NIL)
        q->nodes[node->prev].next = node->next;
    else
        q->head[c] = node->next;
    if (node->next != NIL)
        q->nodes[node->next].prev = node->prev;
    else
        q->tail[c] = node->prev;
    if (node->tprev != NIL)
        q->nodes[node->tprev].tnext = node->tnext;
    else
        t->head[c] = node->tnext;
    if (node->tnext != NIL)
        q->nodes[node->tnext].tprev = node->tprev;
    else
        t->tail[c] = node->tprev;
    req_delete(q, n);
    q->depth[c]--;
    q->queued--;
    t->queued_total--;
    if (--t->queued[c] == 0)
        heap_remove(q, c, owner);
    tenant_changed(q, owner);
    node->next = q->free_node;
    q->free_node = n;
}

static void start(td_critqueue *q, uint32_t tenant, double weight)
{
    q->inflight++;
    if (!q->per_tenant_inflight)
        return;
    uint32_t ix = tenant_get(q, tenant, weight);
    if (ix == NIL)
        return;
    q->tenants[ix].inflight++;
    tenant_changed(q, ix);
}

td_status td_critqueue_set_capacity(td_critqueue *q, uint32_t capacity)
{
    if (capacity == 0 || capacity > q->capacity_max)
        return TD_EINVAL;
    q->capacity = capacity;
    return TD_OK;
}

td_status td_critqueue_create(uint32_t capacity, uint32_t queue_max, td_critqueue **out)
{
    if (capacity == 0 || capacity > (1u << 28) || queue_max > (1u << 28))
        return TD_EINVAL;
    td_critqueue *q = calloc(1, sizeof *q);
    if (!q)
        return TD_ENOMEM;
    q->capacity = q->capacity_max = capacity;
    q->queue_max = queue_max;
    q->per_tenant_inflight = 1;
    q->ntenants = capacity + queue_max;
    uint32_t tsize = 8, rsize = 8;
    while (tsize < 2 * q->ntenants)
        tsize *= 2;
    while (rsize < 2 * queue_max)
        rsize *= 2;
    q->tenant_mask = tsize - 1;
    q->req_mask = rsize - 1;
    q->nodes = malloc((queue_max ? queue_max : 1) * sizeof *q->nodes);
    q->tenants = malloc(q->ntenants * sizeof *q->tenants);
    q->tenant_index = malloc(tsize * sizeof *q->tenant_index);
    q->req_index = malloc(rsize * sizeof *q->req_index);
    int ok = q->nodes && q->tenants && q->tenant_index && q->req_index;
    for (int c = 0; c < TD_CRIT_COUNT; c++) {
        q->heap[c] = malloc((queue_max ? queue_max : 1) * sizeof *q->heap[c]);
        ok = ok && q->heap[c];
        q->head[c] = q->tail[c] = NIL;
    }
    if (!ok) {
        td_critqueue_destroy(q);
        return TD_ENOMEM;
    }
    for (uint32_t i = 0; i < queue_max; i++)
        q->nodes[i].next = i + 1 < queue_max ? i + 1 : NIL;
    q->free_node = queue_max ? 0 : NIL;
    for (uint32_t i = 0; i < q->ntenants; i++) {
        q->tenants[i].tenant = NO_TENANT;
        q->tenants[i].next_free = i + 1 < q->ntenants ? i + 1 : NIL;
    }
    q->free_tenant = 0;
    memset(q->tenant_index, 0xff, tsize * sizeof *q->tenant_index);
    memset(q->req_index, 0xff, rsize * sizeof *q->req_index);
    *out = q;
    return TD_OK;
}

void td_critqueue_destroy(td_critqueue *q)
{
    if (!q)
        return;
    free(q->nodes);
    free(q->tenants);
    free(q->tenant_index);
    free(q->req_index);
    for (int c = 0; c < TD_CRIT_COUNT; c++)
        free(q->heap[c]);
    free(q);
}

/* The queued node to evict for an arrival of class crit from
 * tenant/weight, per the rule in the file header; NIL if none. */
static uint32_t choose_victim(const td_critqueue *q, int crit, uint32_t tenant, double weight)
{
    int lowest = TD_CRIT_COUNT - 1;
    while (lowest >= 0 && q->depth[lowest] == 0)
        lowest--;
    if (lowest < crit)
        return NIL;
    uint32_t v = q->heap[lowest][0];
    const cq_tenant *vt = &q->tenants[v];
    if (lowest == crit) {
        if (vt->tenant == tenant)
            return NIL;
        uint32_t a = tenant_find(q, tenant);
        double mine = a == NIL ? 0 : q->tenants[a].queued_total + q->tenants[a].inflight;
        if (!(share(vt) > (mine + 1) / weight))
            return NIL;
    }
    return vt->tail[lowest];
}

td_cq_outcome td_critqueue_offer(td_critqueue *q, const td_cq_item *it, uint64_t now_ns,
                                 td_cq_item *evicted, bool *had_eviction)
{
    if (had_eviction)
        *had_eviction = false;
    int crit = (unsigned)it->crit < TD_CRIT_COUNT ? (int)it->crit : TD_CRIT_SHEDDABLE;
    double weight = it->weight > 0 ? it->weight : 1;
    if (it->deadline_ns && now_ns >= it->deadline_ns)
        return TD_CQ_DEADLINE;

    /* A config reload may have changed the tenant's weight. */
    uint32_t ix = tenant_find(q, it->tenant);
    if (ix != NIL && q->tenants[ix].weight != weight) {
        q->tenants[ix].weight = weight;
        tenant_changed(q, ix);
    }

    uint32_t ahead = 0;
    for (int c = 0; c <= crit; c++)
        ahead += q->depth[c];
    if (q->inflight < q->capacity && ahead == 0) {
        start(q, it->tenant, weight);
        return TD_CQ_START;
    }
    if (it->deadline_ns && q->has_ewma) {
        /* Compared with the time left, not as now + wait: a double cannot
         * tell nanoseconds apart on a wall-clock scale. */
        uint64_t left = it->deadline_ns - now_ns; /* > 0, checked above */
        double wait = ceil((double)(ahead / q->capacity + 1) * q->ewma_ns);
        if (wait >= 0x1p64 || (uint64_t)wait > left)
            return TD_CQ_DEADLINE;
    }
    if (q->queued < q->queue_max) {
        ix = tenant_get(q, it->tenant, weight);
        if (ix == NIL)
            return TD_CQ_SHED;
        enqueue(q, it, crit, ix, now_ns);
        return TD_CQ_QUEUED;
    }
    /* Full. Without somewhere to hand the victim back, nobody is evicted. */
    if (!evicted)
        return TD_CQ_SHED;
    uint32_t victim = choose_victim(q, crit, it->tenant, weight);
    if (victim == NIL)
        return TD_CQ_SHED;
    uint32_t owner = q->nodes[victim].owner;
    *evicted = q->nodes[victim].it;
    remove_node(q, victim);
    tenant_release_if_idle(q, owner);
    ix = tenant_get(q, it->tenant, weight);
    assert(ix != NIL); /* the victim's node and, if idle, entry were freed */
    enqueue(q, it, crit, ix, now_ns);
    if (had_eviction)
        *had_eviction = true;
    return TD_CQ_QUEUED;
}

static void finished(td_critqueue *q, uint64_t service_ns)
{
    if (q->inflight > 0)
        q->inflight--;
    if (!q->has_ewma) {
        q->ewma_ns = (double)service_ns;
        q->has_ewma = 1;
    } else {
        q->ewma_ns += ((double)service_ns - q->ewma_ns) / (1 << EWMA_SHIFT);
    }
}

void td_critqueue_done(td_critqueue *q, uint64_t service_ns)
{
    if (q->per_tenant_inflight) {
        /* Whose request ended is unknown from here on: stop counting
         * in-flight per tenant rather than let the counts drift. */
        q->per_tenant_inflight = 0;
        for (uint32_t ix = 0; ix < q->ntenants; ix++) {
            cq_tenant *t = &q->tenants[ix];
            if (t->tenant == NO_TENANT || t->inflight == 0)
                continue;
            t->inflight = 0;
            tenant_changed(q, ix);
            tenant_release_if_idle(q, ix);
        }
    }
    finished(q, service_ns);
}

void td_critqueue_done_tenant(td_critqueue *q, uint32_t tenant, uint64_t service_ns)
{
    if (q->per_tenant_inflight) {
        uint32_t ix = tenant_find(q, tenant);
        if (ix != NIL && q->tenants[ix].inflight > 0) {
            q->tenants[ix].inflight--;
            tenant_changed(q, ix);
            tenant_release_if_idle(q, ix);
        }
    }
    finished(q, service_ns);
}

int td_critqueue_next(td_critqueue *q, uint64_t now_ns, td_cq_item *out)
{
    /* Expired heads first, whatever the free capacity: their callers get
     * a 504 now rather than after the queue drains. */
    for (int c = 0; c < TD_CRIT_COUNT; c++) {
        uint32_t n = q->head[c];
        if (n != NIL && q->nodes[n].it.deadline_ns && now_ns >= q->nodes[n].it.deadline_ns) {
            uint32_t owner = q->nodes[n].owner;
            *out = q->nodes[n].it;
            remove_node(q, n);
            tenant_release_if_idle(q, owner);
            return 2;
        }
    }
    if (q->inflight >= q->capacity)
        return 0;
    for (int c = 0; c < TD_CRIT_COUNT; c++) {
        uint32_t n = q->head[c];
        if (n == NIL)
            continue;
        uint32_t owner = q->nodes[n].owner;
        *out = q->nodes[n].it;
        /* Counted in flight before the item leaves, so the entry is never
         * freed and made again in between. */
        q->inflight++;
        if (q->per_tenant_inflight)
            q->tenants[owner].inflight++;
        remove_node(q, n);
        tenant_release_if_idle(q, owner);
        return 1;
    }
    return 0;
}

bool td_critqueue_cancel(td_critqueue *q, const void *req)
{
    uint32_t i = req_slot(q, req);
    if (i == NIL)
        return false;
    uint32_t n = q->req_index[i], owner = q->nodes[n].owner;
    remove_node(q, n);
    tenant_release_if_idle(q, owner);
    return true;
}

uint32_t td_critqueue_inflight(const td_critqueue *q)
{
    return q->inflight;
}

uint32_t td_critqueue_depth(const td_critqueue *q, td_criticality c)
{
    return (unsigned)c < TD_CRIT_COUNT ? q->depth[c] : 0;
}
