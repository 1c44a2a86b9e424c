/* recent.c - per-worker rings of recent refusals (see recent.h). */
#include "gateway/recent.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    pthread_mutex_t lock;
    size_t next;  /* where the next entry goes */
    size_t count; /* entries in use, <= per_ring */
    td_rejection *e;
} ring;

struct td_recent {
    size_t nrings, per_ring, ntenants;
    ring *rings;
    _Atomic uint64_t *last; /* [ntenants]: monotonic ns of the last note */
};

td_status td_recent_create(size_t nrings, size_t per_ring, size_t ntenants, td_recent **out)
{
    if (!nrings || !per_ring || !ntenants)
        return TD_EINVAL;
    td_recent *r = calloc(1, sizeof *r);
    if (!r)
        return TD_ENOMEM;
    r->rings = calloc(nrings, sizeof *r->rings);
    r->last = calloc(ntenants, sizeof *r->last); /* zero bytes: valid atomics here */
    r->ntenants = ntenants;
    if (!r->rings || !r->last) {
        free(r->rings);
        free((void *)r->last);
        free(r);
        return TD_ENOMEM;
    }
    r->per_ring = per_ring;
    for (; r->nrings < nrings; r->nrings++) {
        ring *g = &r->rings[r->nrings];
        g->e = calloc(per_ring, sizeof *g->e);
        if (!g->e) {
            td_recent_destroy(r);
            return TD_ENOMEM;
        }
        pthread_mutex_init(&g->lock, NULL);
    }
    *out = r;
    return TD_OK;
}

void td_recent_destroy(td_recent *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nrings; i++) {
        pthread_mutex_destroy(&r->rings[i].lock);
        free(r->rings[i].e);
    }
    free(r->rings);
    free((void *)r->last);
    free(r);
}

bool td_recent_due(td_recent *r, uint32_t tenant, uint64_t mono_ns)
{
    if (tenant >= r->ntenants)
        return false;
    uint64_t last = atomic_load_explicit(&r->last[tenant], memory_order_relaxed);
    if (last && mono_ns - last < TD_RECENT_EVERY_NS && mono_ns >= last)
        return false;
    return atomic_compare_exchange_strong_explicit(&r->last[tenant], &last, mono_ns ? mono_ns : 1,
                                                   memory_order_relaxed, memory_order_relaxed);
}

void td_recent_note(td_recent *r, unsigned ring_no, const td_rejection *x)
{
    ring *g = &r->rings[ring_no % r->nrings];
    pthread_mutex_lock(&g->lock);
    g->e[g->next] = *x;
    g->e[g->next].reason[sizeof x->reason - 1] = '\0';
    g->e[g->next].detail[sizeof x->detail - 1] = '\0';
    g->e[g->next].key[sizeof x->key - 1] = '\0';
    g->next = (g->next + 1) % r->per_ring;
    if (g->count < r->per_ring)
        g->count++;
    pthread_mutex_unlock(&g->lock);
}

static int newest_first(const void *a, const void *b)
{
    uint64_t x = ((const td_rejection *)a)->wall_ns, y = ((const td_rejection *)b)->wall_ns;
    return x < y ? 1 : x > y ? -1 : 0;
}

size_t td_recent_of(td_recent *r, uint32_t tenant, td_rejection *out, size_t max)
{
    if (!max)
        return 0;
    /* Gather each ring's newest `max` of this tenant, then sort and cut:
     * at most nrings * max entries, copied under each ring's lock. */
    size_t cap = r->nrings * max, n = 0;
    td_rejection *all = malloc(cap * sizeof *all);
    if (!all)
        return 0;
    for (size_t i = 0; i < r->nrings; i++) {
        ring *g = &r->rings[i];
        size_t got = 0;
        pthread_mutex_lock(&g->lock);
        for (size_t k = 0; k < g->count && got < max; k++) {
            size_t at = (g->next + r->per_ring - 1 - k) % r->per_ring;
            if (g->e[at].tenant == tenant) {
                all[n++] = g->e[at];
                got++;
            }
        }
        pthread_mutex_unlock(&g->lock);
    }
    qsort(all, n, sizeof *all, newest_first);
    if (n > max)
        n = max;
    memcpy(out, all, n * sizeof *out);
    free(all);
    return n;
}
