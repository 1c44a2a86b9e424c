/* proxy_conns.c - who may hold the gateway's client connections:
 * a cap on them below the open-file limit, so that the admin
 * listener and upstream connections always find descriptors; per client
 * address, a cap on connections that have not yet shown a valid key; the
 * oldest of those evicted when a worker is full; and the list the
 * worker's tick closes them from once past their deadline. */
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "io/proxy_internal.h"

typedef struct addr_ent {
    uint8_t key[16];
    uint32_t n; /* unauthenticated connections of the address, all workers */
    struct addr_ent *next;
} addr_ent;

/* Shared by the workers, under a mutex taken on accept, on a valid key
 * and on close, never per request. The hash is keyed with random
 * multipliers (vector multiply-shift, universal), so that clients
 * choosing addresses cannot pile them into one chain. */
struct px_addrs {
    pthread_mutex_t mu;
    uint64_t mul[5];
    addr_ent *b[PX_ADDR_BUCKETS];
};

td_status px_addrs_create(px_addrs **out)
{
    px_addrs *a = calloc(1, sizeof *a);
    if (!a)
        return TD_ENOMEM;
    if (RAND_bytes((unsigned char *)a->mul, sizeof a->mul) != 1 ||
        pthread_mutex_init(&a->mu, NULL) != 0) {
        free(a);
        return TD_EIO;
    }
    *out = a;
    return TD_OK;
}

void px_addrs_destroy(px_addrs *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < PX_ADDR_BUCKETS; i++)
        while (a->b[i]) {
            addr_ent *e = a->b[i];
            a->b[i] = e->next;
            free(e);
        }
    pthread_mutex_destroy(&a->mu);
    free(a);
}

static size_t bucket_of(const px_addrs *a, const uint8_t key[16])
{
    uint64_t h = a->mul[4];
    for (int i = 0; i < 4; i++) {
        uint32_t x;
        memcpy(&x, key + 4 * i, 4);
        h += (a->mul[i] | 1) * (uint64_t)x;
    }
    return (size_t)(h >> 52) & (PX_ADDR_BUCKETS - 1);
}

/* One more unauthenticated connection for key, unless it has cap. */
static int addr_take(px_addrs *a, const uint8_t key[16], unsigned cap)
{
    size_t i = bucket_of(a, key);
    int ok = 0;
    pthread_mutex_lock(&a->mu);
    addr_ent *e = a->b[i];
    while (e && memcmp(e->key, key, 16) != 0)
        e = e->next;
    if (!e && (e = calloc(1, sizeof *e)) != NULL) {
        memcpy(e->key, key, 16);
        e->next = a->b[i];
        a->b[i] = e;
    }
    if (e && e->n < cap) {
        e->n++;
        ok = 1;
    }
    pthread_mutex_unlock(&a->mu);
    return ok;
}

static void addr_give(px_addrs *a, const uint8_t key[16])
{
    size_t i = bucket_of(a, key);
    pthread_mutex_lock(&a->mu);
    for (addr_ent **pe = &a->b[i]; *pe; pe = &(*pe)->next) {
        addr_ent *e = *pe;
        if (memcmp(e->key, key, 16) != 0)
            continue;
        if (--e->n == 0) {
            *pe = e->next;
            free(e);
        }
        break;
    }
    pthread_mutex_unlock(&a->mu);
}

/* An IPv4 address as itself (in its IPv4-mapped form, so a dual-stack
 * listener counts it the same); an IPv6 address as its /64, the smallest
 * block a site is given: one host can use any address of it. */
void px_addr_key(const struct sockaddr *sa, uint8_t key[16])
{
    memset(key, 0, 16);
    if (sa && sa->sa_family == AF_INET) {
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6) {
        const uint8_t *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        memcpy(key, b, memcmp(b, mapped, 12) == 0 ? 16 : 8);
    }
}

static void unauth_unlink(px_conn *c)
{
    px_worker *w = c->w;
    if (!c->in_unauth)
        return;
    c->in_unauth = 0;
    if (c->ua_prev)
        c->ua_prev->ua_next = c->ua_next;
    else
        w->ua_head = c->ua_next;
    if (c->ua_next)
        c->ua_next->ua_prev = c->ua_prev;
    else
        w->ua_tail = c->ua_prev;
    c->ua_prev = c->ua_next = NULL;
    td_metrics_conns_add(w->p->metrics, 0, -1);
}

static void addr_release(px_conn *c)
{
    if (!c->addr_held)
        return;
    c->addr_held = 0;
    addr_give(c->w->p->addrs, c->addr_key);
}

int px_conn_admit(px_conn *c, const struct sockaddr *peer)
{
    px_worker *w = c->w;
    td_proxy *p = w->p;
    px_addr_key(peer, c->addr_key);
    if (p->unauth_per_addr) {
        if (!addr_take(p->addrs, c->addr_key, p->unauth_per_addr)) {
            td_metrics_conn_closed(p->metrics, TD_CONN_PER_ADDRESS);
            return -1;
        }
        c->addr_held = 1;
    }
    if (w->n_open >= w->max_open) {
        /* Full: the oldest connection without a key makes room, as one
         * that has shown a key is never closed for a newcomer. A client
         * sends its request as it connects, so a newcomer is read long
         * before as many others have arrived after it. */
        px_conn *victim = w->ua_head;
        if (!victim) {
            td_metrics_conn_closed(p->metrics, TD_CONN_LIMIT);
            return -1;
        }
        unauth_unlink(victim);
        td_metrics_conn_closed(p->metrics, TD_CONN_EVICTED);
        px_conn_close(victim);
    }
    c->counted = 1;
    w->n_open++;
    c->accepted_ms = uv_now(&w->loop);
    c->in_unauth = 1;
    c->ua_prev = w->ua_tail;
    if (w->ua_tail)
        w->ua_tail->ua_next = c;
    else
        w->ua_head = c;
    w->ua_tail = c;
    td_metrics_conns_add(p->metrics, 1, 1);
    return 0;
}

void px_conn_authenticated(px_conn *c)
{
    if (c->authed)
        return;
    c->authed = 1;
    unauth_unlink(c);
    addr_release(c);
}

void px_conn_forget(px_conn *c)
{
    unauth_unlink(c);
    addr_release(c);
    if (c->counted) {
        c->counted = 0;
        c->w->n_open--;
        td_metrics_conns_add(c->w->p->metrics, -1, 0);
    }
}

px_conn *px_conn_expired(px_worker *w, uint64_t now_ms)
{
    px_conn *c = w->ua_head;
    if (!c || now_ms - c->accepted_ms < w->p->auth_timeout_ms)
        return NULL;
    unauth_unlink(c);
    addr_release(c);
    td_metrics_conn_closed(w->p->metrics, TD_CONN_AUTH_TIMEOUT);
    return c;
}
