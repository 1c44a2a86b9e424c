/* proxy_upstream.c - step (g) of a gateway request: per worker and route,
 * a pool of idle keep-alive connections to the upstream (most recently used
 * first, closed after 30 s idle or when the upstream closes them); the
 * request sent with hop-by-hop headers dropped and X-Forwarded-For,
 * X-Tenantd-Tenant and Content-Length set; the response parsed as it comes
 * and streamed to the client (re-chunked when the upstream's body has no
 * length and the client speaks HTTP/1.1), its body fed to the cost scanner.
 * A request that fails on a reused connection before any response byte
 * (the upstream closed it meanwhile) is sent once more on a new one.
 *
 * A route's endpoints (spec.upstream.endpoints, or the one address) each
 * have their own idle connections; gateway/endpoints.c picks the endpoint
 * of each request and decides ejections from the outcomes reported here
 * (connect failures, resets, 5xx: failures; other answers: successes).
 * On a pool route, a request that failed before any byte of the response
 * reached the client (connect refused, reset before the headers, 502 or
 * 503 from the endpoint) is sent once more to another endpoint within its
 * deadline; after the response has started, never. When no endpoint can
 * be picked, or every one tried refused the connection, the client gets
 * 503 with Retry-After at once. */
#include <math.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "io/proxy_internal.h"

static void buf_clear(td__buf *b)
{
    if (b->cap > 256 * 1024) {
        td__buf_fini(b);
    } else {
        b->len = 0;
        if (b->p)
            b->p[0] = '\0';
    }
}

/* ---- route states ---- */

static void up_close(px_up *u);

static void route_free(px_route *rs)
{
    td_critqueue_destroy(rs->q);
    free(rs->name);
    for (size_t i = 0; rs->srcs && i < rs->nsrcs; i++)
        free(rs->srcs[i].host);
    free(rs->srcs);
    free(rs->eps);
    free(rs->hc_path);
    free(rs->metrics_path);
    free(rs->waiting_metric);
    free(rs->kv_metric);
    free(rs);
}

static void check_done(px_check *k, int ok);

static void maybe_free(px_route *rs)
{
    if (!rs->retired || rs->refs || rs->n_conns || rs->n_checks || rs->n_lookups || rs->pumping)
        return;
    px_worker *w = rs->w;
    for (px_route **pp = &w->retired; *pp; pp = &(*pp)->next_retired)
        if (*pp == rs) {
            *pp = rs->next_retired;
            break;
        }
    route_free(rs);
}

/* Closes slot i's idle connections and its checks in flight (their
 * results no longer matter: it drains, the state is retired or the worker
 * stops). */
static void close_slot(px_route *rs, size_t i)
{
    while (rs->eps[i].idle)
        up_close(rs->eps[i].idle);
    if (rs->eps[i].hc)
        check_done(rs->eps[i].hc, 0);
    if (rs->eps[i].sc)
        check_done(rs->eps[i].sc, 0);
}

static void lookup_abandon(px_route *rs, size_t src);

static void close_idle(px_route *rs)
{
    for (size_t i = 0; i < rs->pool.n; i++)
        close_slot(rs, i);
    for (size_t i = 0; i < rs->nsrcs; i++)
        lookup_abandon(rs, i);
}

static void retire(px_route *rs)
{
    px_worker *w = rs->w;
    if (w->routes[rs->slot] == rs)
        w->routes[rs->slot] = NULL;
    rs->retired = 1;
    rs->next_retired = w->retired;
    w->retired = rs;
    close_idle(rs);
    maybe_free(rs);
}

#define PX_ADDRS_MAX 128 /* addresses of one lookup looked at */

/* The address key of sa (family, port, address bytes) for endpoints.c. */
static td_ep_key addr_key(const struct sockaddr_storage *sa)
{
    td_ep_key k;
    memset(&k, 0, sizeof k);
    k.b[0] = (uint8_t)sa->ss_family;
    if (sa->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
        memcpy(k.b + 1, &a->sin6_port, 2);
        memcpy(k.b + 3, &a->sin6_addr, 16);
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
        memcpy(k.b + 1, &a->sin_port, 2);
        memcpy(k.b + 3, &a->sin_addr, 4);
    }
    return k;
}

/* An IP address literal: its one address, no lookup. */
static int ip_literal(const char *host, uint16_t port, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    return uv_ip4_addr(host, port, (struct sockaddr_in *)ss) == 0 ||
           uv_ip6_addr(host, port, (struct sockaddr_in6 *)ss) == 0;
}

/* The TCP addresses of a getaddrinfo answer with the port set, at most
 * max, repeats left out; how many. */
static size_t answer_addrs(const struct addrinfo *res, uint16_t port, struct sockaddr_storage *out,
                           size_t max)
{
    size_t n = 0;
    for (const struct addrinfo *a = res; a && n < max; a = a->ai_next) {
        if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) || a->ai_addrlen > sizeof out[n])
            continue;
        memset(&out[n], 0, sizeof out[n]);
        memcpy(&out[n], a->ai_addr, a->ai_addrlen);
        if (out[n].ss_family == AF_INET6)
            ((struct sockaddr_in6 *)&out[n])->sin6_port = htons(port);
        else
            ((struct sockaddr_in *)&out[n])->sin_port = htons(port);
        td_ep_key k = addr_key(&out[n]);
        size_t j = 0;
        while (j < n && memcmp(addr_key(&out[j]).b, k.b, TD_EP_KEY) != 0)
            j++;
        if (j == n)
            n++;
    }
    return n;
}

/* The queue admits each endpoint's share of the capacity times the
 * active endpoints (capacity is per endpoint); when that grew, requests
 * waiting may start now. */
static void pool_resized(px_route *rs)
{
    size_t m = td_ep_members(&rs->pool);
    uint64_t want = (uint64_t)rs->cap * (m ? m : 1);
    uint32_t before = rs->qcap_now;
    if (want > rs->qcap_max)
        want = rs->qcap_max;
    if (want == before || td_critqueue_set_capacity(rs->q, (uint32_t)want) != TD_OK)
        return;
    rs->qcap_now = (uint32_t)want;
    if (want > before)
        px_route_pump(rs);
}

/* Source src answered addrs[0..n): the pool's membership follows (see
 * td_ep_resolved); slots that join get their address, slots that start
 * draining lose their idle connections and checks. */
static void apply_answer(px_route *rs, size_t src, const struct sockaddr_storage *addrs, size_t n)
{
    td_ep_key keys[PX_ADDRS_MAX];
    for (size_t i = 0; i < n; i++)
        keys[i] = addr_key(&addrs[i]);
    px_src *s = &rs->srcs[src];
    /* the source's own slot, made before any answer: the first address */
    for (size_t i = 0; i < rs->pool.n; i++)
        if (rs->pool.ep[i].src == src && rs->pool.ep[i].member == TD_EP_ACTIVE &&
            !rs->eps[i].addr_ok && rs->eps[i].host) {
            rs->eps[i].addr = addrs[0];
            rs->eps[i].addr_ok = 1;
            td_ep_set_key(&rs->pool, i, &keys[0]);
        }
    td_ep_change ch;
    if (td_ep_resolved(&rs->pool, (uint32_t)src, s->weight, keys, n, &ch) != TD_OK)
        return;
    for (size_t k = 0; k < ch.njoined; k++) {
        px_ep *e = &rs->eps[ch.joined[k]];
        size_t a = 0;
        while (a < n && memcmp(keys[a].b, rs->pool.ep[ch.joined[k]].key.b, TD_EP_KEY) != 0)
            a++;
        if (a == n)
            continue;
        if (!e->host) /* a fresh slot (a draining one that rejoins keeps its timers) */
            memset(e, 0, sizeof *e);
        e->host = s->host;
        e->port = s->port;
        e->weight = s->weight;
        e->addr = addrs[a];
        e->addr_ok = 1;
    }
    for (size_t k = 0; k < ch.ndrained; k++)
        close_slot(rs, ch.drained[k]);
    if (rs->w->index == 0 && (ch.njoined || ch.ndrained || ch.dropped) && s->resolved_ns)
        fprintf(stderr,
                "tenantd: gateway: Route %s: %s:%u now gives %zu address(es): %zu joined, "
                "%zu draining%s\n",
                rs->name, s->host, s->port, n, ch.njoined, ch.ndrained,
                ch.dropped ? ", some left out (at most 64 endpoints per Route)" : "");
    pool_resized(rs);
}

/* A replaced route state's answers (a reload that changed the Route) for
 * the new one's names: no lookup to wait for, state of the addresses
 * starts afresh. */
static void inherit_answers(px_route *n, const px_route *old)
{
    for (size_t j = 0; j < n->nsrcs; j++) {
        px_src *s = &n->srcs[j];
        for (size_t k = 0; s->is_name && k < old->nsrcs; k++) {
            const px_src *o = &old->srcs[k];
            if (!o->resolved_ns || o->port != s->port || strcmp(o->host, s->host) != 0)
                continue;
            struct sockaddr_storage addrs[TD_EP_MAX];
            size_t na = 0;
            for (size_t i = 0; i < old->pool.n; i++)
                if (old->pool.ep[i].src == k && old->pool.ep[i].member == TD_EP_ACTIVE &&
                    old->eps[i].addr_ok)
                    addrs[na++] = old->eps[i].addr;
            if (!na)
                continue;
            apply_answer(n, j, addrs, na);
            s->resolved_ns = o->resolved_ns;
            s->next_ns = o->next_ns;
            break;
        }
    }
}

/* A source whose first lookup has not answered yet. */
static int pending(const px_route *rs, size_t slot)
{
    const px_src *s = &rs->srcs[rs->pool.ep[slot].src];
    return s->is_name && !s->resolved_ns && !s->failing;
}

/* One lookup, on a thread of its own: a resolver that never answers holds
 * that thread only. libuv's thread pool would do, but it runs at most two
 * lookups at once (half the pool), so two names stuck on a dead DNS
 * server would hold every other name's lookups back. The answer comes
 * back to the worker's loop through the async handle; the loop and the
 * thread each hold a reference, and a loop that stops waiting (the
 * route state retired, the worker stopping) abandons it: the thread then
 * only frees. */
typedef struct {
    uv_async_t async;
    pthread_mutex_t mu;
    int refs;      /* the thread's and the loop's (until the handle closed) */
    int abandoned; /* the loop no longer waits for the answer */
    px_route *rs;  /* NULL once abandoned */
    size_t src;
    char *host;
    int status; /* getaddrinfo's */
    struct addrinfo *res;
} px_lookup;

static void lookup_unref(px_lookup *l)
{
    pthread_mutex_lock(&l->mu);
    int left = --l->refs;
    pthread_mutex_unlock(&l->mu);
    if (left)
        return;
    if (l->res)
        freeaddrinfo(l->res);
    pthread_mutex_destroy(&l->mu);
    free(l->host);
    free(l);
}

static void on_lookup_closed(uv_handle_t *h)
{
    lookup_unref(h->data);
}

static void *lookup_thread(void *arg)
{
    px_lookup *l = arg;
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(l->host, NULL, &hints, &res);
    pthread_mutex_lock(&l->mu);
    l->status = rc;
    l->res = res;
    if (!l->abandoned)
        uv_async_send(&l->async);
    pthread_mutex_unlock(&l->mu);
    lookup_unref(l);
    return NULL;
}

/* The loop stops waiting for source src's lookup. */
static void lookup_abandon(px_route *rs, size_t src)
{
    px_lookup *l = rs->srcs[src].gai;
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->abandoned = 1;
    l->rs = NULL;
    pthread_mutex_unlock(&l->mu);
    uv_close((uv_handle_t *)&l->async, on_lookup_closed);
    rs->srcs[src].gai = NULL;
    rs->n_lookups--;
}

static void on_lookup(uv_async_t *h)
{
    px_lookup *l = h->data;
    pthread_mutex_lock(&l->mu);
    px_route *rs = l->abandoned ? NULL : l->rs;
    int status = l->status;
    pthread_mutex_unlock(&l->mu);
    if (!rs)
        return;
    px_src *s = &rs->srcs[l->src];
    s->gai = NULL;
    rs->n_lookups--;
    if (!rs->retired && !rs->w->stopping) {
        struct sockaddr_storage addrs[PX_ADDRS_MAX];
        size_t n = status == 0 ? answer_addrs(l->res, s->port, addrs, PX_ADDRS_MAX) : 0;
        if (n) {
            apply_answer(rs, l->src, addrs, n);
            s->resolved_ns = px_now();
        } else {
            s->lookups_failed++;
        }
        if (s->failing != !n && rs->w->index == 0)
            fprintf(stderr,
                    n ? "tenantd: gateway: Route %s: %s:%u resolves again%s\n"
                      : "tenantd: gateway: Route %s: looking up %s:%u failed (%s); keeping its "
                        "last addresses\n",
                    rs->name, s->host, s->port,
                    n ? "" : status ? gai_strerror(status) : "no address");
        s->failing = !n;
    }
    uv_close((uv_handle_t *)&l->async, on_lookup_closed);
    maybe_free(rs);
}

/* Looks source src up again on a thread of its own: the worker's loop
 * never waits for a resolver. */
static void start_lookup(px_route *rs, size_t src, uint64_t now_ns)
{
    px_src *s = &rs->srcs[src];
    s->next_ns = now_ns + rs->resolve_every_ns;
    px_lookup *l = calloc(1, sizeof *l);
    if (!l)
        return;
    l->host = strdup(s->host);
    if (!l->host || uv_async_init(&rs->w->loop, &l->async, on_lookup) < 0) {
        free(l->host);
        free(l);
        return;
    }
    pthread_mutex_init(&l->mu, NULL);
    l->rs = rs;
    l->src = src;
    l->async.data = l;
    l->refs = 2;
    pthread_attr_t at;
    pthread_t t;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 256 * 1024);
    int rc = pthread_create(&t, &at, lookup_thread, l);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        l->refs = 1; /* no thread: the handle's close frees it */
        uv_close((uv_handle_t *)&l->async, on_lookup_closed);
        return;
    }
    s->gai = l;
    rs->n_lookups++;
}

/* Lookups due, and draining slots with nothing left freed. */
static void resolve_tick(px_route *rs, uint64_t now_ns)
{
    for (size_t i = 0; i < rs->nsrcs; i++)
        if (rs->srcs[i].is_name && !rs->srcs[i].gai && now_ns >= rs->srcs[i].next_ns)
            start_lookup(rs, i, now_ns);
    for (size_t i = 0; i < rs->pool.n; i++) {
        px_ep *e = &rs->eps[i];
        if (rs->pool.ep[i].member == TD_EP_DRAINING && !e->n_conns && !e->hc && !e->sc &&
            td_ep_reclaim(&rs->pool, i)) {
            e->host = NULL;
            e->addr_ok = 0;
        }
    }
}

static uint32_t share(uint32_t total, unsigned workers)
{
    return (uint32_t)(((uint64_t)total + workers - 1) / workers);
}

/* The route's sources and their first slots (slot i is source i's). */
static int route_sources(px_route *rs, const td_gw_route *r, size_t ne, uint32_t *weights)
{
    int ok = 1;
    for (size_t i = 0; i < ne; i++) {
        px_src *s = &rs->srcs[i];
        const td_gw_endpoint *ge = r->nendpoints ? &r->endpoints[i] : NULL;
        s->host = strdup(ge ? ge->host : r->upstream_host ? r->upstream_host : "");
        s->port = ge ? ge->port : r->upstream_port;
        s->weight = ge && ge->weight ? ge->weight : 1;
        weights[i] = s->weight;
        if (!s->host) {
            ok = 0;
            continue;
        }
        px_ep *e = &rs->eps[i];
        e->host = s->host;
        e->port = s->port;
        e->weight = s->weight;
        e->addr_ok = ip_literal(s->host, s->port, &e->addr);
        s->is_name = !e->addr_ok;
        rs->has_names |= s->is_name;
    }
    return ok;
}

/* Whether any source of r is a name (its pool may grow to TD_EP_MAX). */
static int route_has_names(const td_gw_route *r, size_t ne)
{
    struct sockaddr_storage ss;
    for (size_t i = 0; i < ne; i++) {
        const char *h = r->nendpoints ? r->endpoints[i].host : r->upstream_host;
        if (!ip_literal(h ? h : "", 0, &ss))
            return 1;
    }
    return 0;
}

static px_route *route_new(px_worker *w, const td_gw_route *r)
{
    px_route *rs = calloc(1, sizeof *rs);
    if (!rs)
        return NULL;
    unsigned n = w->p->nworkers;
    size_t ne = r->nendpoints ? r->nendpoints : 1;
    if (ne > TD_EP_MAX)
        ne = TD_EP_MAX;
    uint32_t cap = share(r->capacity ? r->capacity : 1, n);
    uint32_t queue = share(r->queue, n);
    rs->w = w;
    rs->slot = r->slot;
    rs->name = strdup(r->name ? r->name : "");
    rs->route_capacity = r->capacity;
    rs->route_queue = r->queue;
    rs->cap = cap ? cap : 1;
    rs->is_pool = r->pool;
    rs->resolve_every_ns = r->resolve_every_ns > 100000000ULL ? r->resolve_every_ns : 100000000ULL;
    rs->neps = route_has_names(r, ne) ? TD_EP_MAX : ne;
    rs->eps = calloc(rs->neps, sizeof *rs->eps);
    rs->srcs = calloc(ne, sizeof *rs->srcs);
    if (!rs->eps || !rs->srcs || !rs->name) {
        route_free(rs);
        return NULL;
    }
    rs->nsrcs = ne;
    uint32_t weights[TD_EP_MAX];
    int ok = route_sources(rs, r, ne, weights);
    td_ep_policy pol = {0};
    if (r->health_check) {
        rs->hc_path = strdup(r->hc_path ? r->hc_path : "/health");
        rs->hc_interval_ns = r->hc_interval_ns;
        rs->hc_timeout_ns = r->hc_timeout_ns;
        pol.unhealthy_threshold = r->hc_unhealthy;
        pol.healthy_threshold = r->hc_healthy;
        if (!rs->hc_path)
            ok = 0;
    }
    if (r->balance == TD_BALANCE_QUEUE_DEPTH) {
        rs->metrics_path = strdup(r->metrics_path ? r->metrics_path : "/metrics");
        rs->waiting_metric =
            strdup(r->waiting_metric ? r->waiting_metric : "vllm:num_requests_waiting");
        rs->kv_metric = strdup(r->kv_metric ? r->kv_metric : "vllm:gpu_cache_usage_perc");
        rs->scrape_every_ns = r->scrape_every_ns ? r->scrape_every_ns : 1000000000ULL;
        if (!rs->metrics_path || !rs->waiting_metric || !rs->kv_metric)
            ok = 0;
    }
    if (!ok || td_ep_pool_init(&rs->pool, ne, weights, r->balance, &pol,
                               px_now() ^ ((uint64_t)w->index << 32) ^ r->slot) != TD_OK) {
        route_free(rs);
        return NULL;
    }
    for (size_t i = 0; i < ne; i++) {
        td_ep_key k = addr_key(&rs->eps[i].addr);
        if (rs->eps[i].addr_ok)
            td_ep_set_key(&rs->pool, i, &k);
    }
    /* the route's queue admits up to each endpoint's share times the
     * endpoints: capacity is per endpoint; with names,
     * as many as their addresses (made for the most, set as they come) */
    uint64_t qmax = (uint64_t)rs->cap * rs->neps;
    if (qmax > (1u << 28))
        qmax = 1u << 28;
    rs->qcap_max = (uint32_t)qmax;
    rs->qcap_now = (uint32_t)((uint64_t)rs->cap * ne < qmax ? (uint64_t)rs->cap * ne : qmax);
    if (td_critqueue_create(rs->qcap_max, queue, &rs->q) != TD_OK ||
        td_critqueue_set_capacity(rs->q, rs->qcap_now) != TD_OK) {
        route_free(rs);
        return NULL;
    }
    return rs;
}

static int same_route(const px_route *rs, const td_gw_route *r)
{
    size_t ne = r->nendpoints ? r->nendpoints : 1;
    if (rs->route_capacity != r->capacity || rs->route_queue != r->queue || rs->nsrcs != ne ||
        rs->is_pool != (int)r->pool || rs->pool.balance != r->balance ||
        (rs->hc_path != NULL) != r->health_check ||
        rs->resolve_every_ns !=
            (r->resolve_every_ns > 100000000ULL ? r->resolve_every_ns : 100000000ULL))
        return 0;
    if (rs->hc_path &&
        (strcmp(rs->hc_path, r->hc_path ? r->hc_path : "/health") != 0 ||
         rs->hc_interval_ns != r->hc_interval_ns || rs->hc_timeout_ns != r->hc_timeout_ns ||
         rs->pool.policy.unhealthy_threshold != (r->hc_unhealthy ? r->hc_unhealthy : 2) ||
         rs->pool.policy.healthy_threshold != (r->hc_healthy ? r->hc_healthy : 1)))
        return 0;
    if (rs->metrics_path &&
        (strcmp(rs->metrics_path, r->metrics_path ? r->metrics_path : "/metrics") != 0 ||
         strcmp(rs->waiting_metric,
                r->waiting_metric ? r->waiting_metric : "vllm:num_requests_waiting") != 0 ||
         strcmp(rs->kv_metric, r->kv_metric ? r->kv_metric : "vllm:gpu_cache_usage_perc") != 0 ||
         rs->scrape_every_ns != (r->scrape_every_ns ? r->scrape_every_ns : 1000000000ULL)))
        return 0;
    for (size_t i = 0; i < ne; i++) {
        const td_gw_endpoint *ge = r->nendpoints ? &r->endpoints[i] : NULL;
        const char *host = ge ? ge->host : r->upstream_host ? r->upstream_host : "";
        uint32_t weight = ge && ge->weight ? ge->weight : 1;
        if (rs->srcs[i].port != (ge ? ge->port : r->upstream_port) ||
            rs->srcs[i].weight != weight || strcmp(rs->srcs[i].host, host) != 0)
            return 0;
    }
    return 1;
}

px_route *px_route_get(px_worker *w, const td_gw_config *cfg, const td_gw_route *r)
{
    if (r->slot >= TD_GW_MAX_ROUTES)
        return NULL;
    px_route *rs = w->routes[r->slot];
    /* an older view than the state's (a request that began before a
     * reload) keeps to the newer state rather than flip it back */
    if (rs && (cfg->generation <= rs->generation || same_route(rs, r))) {
        if (cfg->generation > rs->generation)
            rs->generation = cfg->generation;
        rs->refs++;
        return rs;
    }
    px_route *n = route_new(w, r);
    if (!n)
        return NULL;
    n->generation = cfg->generation;
    if (rs && n->has_names)
        inherit_answers(n, rs);
    if (n->has_names)
        resolve_tick(n, px_now()); /* the lookups not inherited start now */
    if (rs)
        retire(rs);
    w->routes[r->slot] = n;
    n->refs++;
    return n;
}

void px_route_unref(px_route *rs)
{
    if (rs->refs)
        rs->refs--;
    maybe_free(rs);
}

void px_routes_shutdown(px_worker *w)
{
    for (size_t i = 0; i < TD_GW_MAX_ROUTES; i++)
        if (w->routes[i])
            retire(w->routes[i]);
    for (px_route *rs = w->retired; rs; rs = rs->next_retired)
        close_idle(rs);
}

void px_routes_free(px_worker *w)
{
    for (size_t i = 0; i < TD_GW_MAX_ROUTES; i++)
        if (w->routes[i]) {
            route_free(w->routes[i]);
            w->routes[i] = NULL;
        }
    while (w->retired) {
        px_route *n = w->retired->next_retired;
        route_free(w->retired);
        w->retired = n;
    }
}

static void sweep(px_route *rs, uint64_t now_ns)
{
    for (size_t i = 0; i < rs->pool.n; i++) {
        px_up *u = rs->eps[i].idle;
        while (u) {
            px_up *next = u->next;
            if (now_ns - u->idle_since > (uint64_t)PX_UP_IDLE_MS * 1000000)
                up_close(u);
            u = next;
        }
    }
}

void px_routes_sweep(px_worker *w, uint64_t now_ns)
{
    for (size_t i = 0; i < TD_GW_MAX_ROUTES; i++)
        if (w->routes[i] && w->routes[i]->n_idle)
            sweep(w->routes[i], now_ns);
}

/* ---- active health checks ----
 * Each worker checks the endpoints of the routes it has served (its route
 * states), on its own: a GET of the path on a new connection, healthy when
 * the status line says 2xx within the timeout. Only the status line is
 * read; the connection is closed after it. */

#define PX_SCRAPE_MAX (256u * 1024u) /* a metrics answer larger than this fails */

struct px_check {
    uv_tcp_t tcp;
    uv_connect_t connect_req;
    uv_write_t write_req;
    px_route *rs;
    int ep;
    int done;
    int scrape;   /* a metrics scrape (queueDepth), not a health check */
    td__buf body; /* a scrape's whole answer */
    uint64_t deadline_ns;
    size_t rlen;
    char resp[16]; /* "HTTP/1.1 200" is all we read */
    char req[400];
};

static void on_check_closed(uv_handle_t *h)
{
    px_check *k = h->data;
    px_route *rs = k->rs;
    td__buf_fini(&k->body);
    free(k);
    rs->n_checks--;
    maybe_free(rs);
}

/* A scrape's whole answer (ok: it ended at the endpoint's close): a 2xx
 * with the waiting series gives the pool the endpoint's figures; anything
 * else leaves the last ones (health is the checks' and ejection's job). */
static void scrape_result(px_check *k, int ok)
{
    px_route *rs = k->rs;
    if (!ok || rs->retired || rs->w->stopping || k->body.len < 12)
        return;
    const char *p = k->body.p;
    if (memcmp(p, "HTTP/1.", 7) != 0 || p[8] != ' ' || p[9] != '2')
        return;
    const char *end = NULL;
    for (size_t i = 0; i + 3 < k->body.len; i++)
        if (memcmp(p + i, "\r\n\r\n", 4) == 0) {
            end = p + i + 4;
            break;
        }
    if (!end)
        return;
    double waiting, kv;
    if (td_ep_parse_metrics(end, k->body.len - (size_t)(end - p), rs->waiting_metric, rs->kv_metric,
                            &waiting, &kv) == TD_OK) {
        td_ep_scraped(&rs->pool, (size_t)k->ep, waiting, kv);
        rs->eps[k->ep].scraped_ns = px_now();
    }
}

/* The check's result (once): counted unless the state is retired. */
static void check_done(px_check *k, int ok)
{
    if (k->done)
        return;
    k->done = 1;
    px_route *rs = k->rs;
    if (k->scrape) {
        rs->eps[k->ep].sc = NULL;
        scrape_result(k, ok);
    } else {
        rs->eps[k->ep].hc = NULL;
        if (!rs->retired && !rs->w->stopping)
            td_ep_check(&rs->pool, (size_t)k->ep, ok != 0, px_now());
    }
    uv_close((uv_handle_t *)&k->tcp, on_check_closed);
}

/* 1 if the status line read so far says 2xx, 0 if it says something
 * else, -1 if it is not complete yet. */
static int check_status(const px_check *k)
{
    if (k->rlen < 12)
        return -1;
    if (memcmp(k->resp, "HTTP/1.", 7) != 0 || k->resp[8] != ' ')
        return 0;
    return k->resp[9] == '2';
}

static void on_check_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    px_check *k = h->data;
    (void)suggested;
    if (k->scrape) /* copied out at once in on_check_read */
        *buf = uv_buf_init(k->rs->w->rbuf, sizeof k->rs->w->rbuf);
    else
        *buf = uv_buf_init(k->resp + k->rlen, (unsigned)(sizeof k->resp - k->rlen));
}

static void on_check_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    px_check *k = st->data;
    if (k->done || nread == 0)
        return;
    if (k->scrape) {
        if (nread < 0)
            check_done(k, nread == UV_EOF);
        else if (td__buf_append(&k->body, buf->base, (size_t)nread) != TD_OK)
            check_done(k, 0); /* over PX_SCRAPE_MAX */
        return;
    }
    if (nread < 0) {
        check_done(k, check_status(k) == 1);
        return;
    }
    k->rlen += (size_t)nread;
    int s = check_status(k);
    if (s >= 0 || k->rlen == sizeof k->resp)
        check_done(k, s == 1);
}

static void on_check_write(uv_write_t *req, int status)
{
    px_check *k = req->data;
    if (status < 0)
        check_done(k, 0);
}

static void on_check_connect(uv_connect_t *req, int status)
{
    px_check *k = req->data;
    if (k->done)
        return;
    if (status < 0 || uv_read_start((uv_stream_t *)&k->tcp, on_check_alloc, on_check_read) < 0) {
        check_done(k, 0);
        return;
    }
    uv_buf_t b = uv_buf_init(k->req, (unsigned)strlen(k->req));
    if (uv_write(&k->write_req, (uv_stream_t *)&k->tcp, &b, 1, on_check_write) < 0)
        check_done(k, 0);
}

/* Starts a health check (scrape 0) or a metrics scrape (1) of endpoint i. */
static void check_start(px_route *rs, size_t i, int scrape, uint64_t now_ns)
{
    px_ep *e = &rs->eps[i];
    if (!e->addr_ok) {
        if (!scrape && !pending(rs, i)) /* a name that does not resolve fails its checks */
            td_ep_check(&rs->pool, i, false, now_ns);
        return;
    }
    px_check *k = calloc(1, sizeof *k);
    if (!k)
        return;
    int n = snprintf(k->req, sizeof k->req,
                     "GET %s HTTP/1.1\r\nHost: %s:%u\r\nUser-Agent: tenantd-%s\r\n"
                     "Connection: close\r\n\r\n",
                     scrape ? rs->metrics_path : rs->hc_path, e->host, e->port,
                     scrape ? "scrape" : "health");
    if (n < 0 || (size_t)n >= sizeof k->req || uv_tcp_init(&rs->w->loop, &k->tcp) < 0) {
        free(k);
        return;
    }
    td__buf_init(&k->body, PX_SCRAPE_MAX);
    k->scrape = scrape;
    k->rs = rs;
    k->ep = (int)i;
    /* a scrape may take until the next is due */
    k->deadline_ns = now_ns + (scrape ? rs->scrape_every_ns : rs->hc_timeout_ns);
    k->tcp.data = k;
    k->connect_req.data = k;
    k->write_req.data = k;
    rs->n_checks++;
    if (scrape)
        e->sc = k;
    else
        e->hc = k;
    if (uv_tcp_connect(&k->connect_req, &k->tcp, (const struct sockaddr *)&e->addr,
                       on_check_connect) < 0)
        check_done(k, 0);
}

static void views_publish(px_worker *w, uint64_t now_ns);

/* Route states for every Route of a new config whose endpoints include a
 * DNS name, made ahead of their first request: their lookups start now,
 * so that requests find addresses rather than a lookup under way. */
static void warm_up(px_worker *w)
{
    const td_gw_config *c = td_gateway_config(w->p->g, &w->held);
    if (!c || c->generation == w->warm_generation)
        return;
    w->warm_generation = c->generation;
    for (size_t i = 0; i < c->nroutes; i++) {
        const td_gw_route *r = &c->routes[i];
        size_t ne = r->nendpoints ? r->nendpoints : 1;
        if (r->slot >= TD_GW_MAX_ROUTES || !route_has_names(r, ne))
            continue;
        px_route *rs = px_route_get(w, c, r);
        if (rs)
            px_route_unref(rs);
    }
}

void px_routes_check(px_worker *w, uint64_t now_ns)
{
    warm_up(w);
    for (size_t r = 0; r < TD_GW_MAX_ROUTES; r++) {
        px_route *rs = w->routes[r];
        if (!rs || (!rs->hc_path && !rs->metrics_path && !rs->has_names))
            continue;
        if (rs->has_names)
            resolve_tick(rs, now_ns);
        for (size_t i = 0; i < rs->pool.n; i++) {
            px_ep *e = &rs->eps[i];
            if (rs->pool.ep[i].member != TD_EP_ACTIVE)
                continue;
            if (rs->hc_path) {
                if (e->hc && now_ns >= e->hc->deadline_ns)
                    check_done(e->hc, 0);
                if (!e->hc && now_ns >= e->hc_next_ns) {
                    e->hc_next_ns = now_ns + rs->hc_interval_ns;
                    check_start(rs, i, 0, now_ns);
                }
            }
            if (rs->metrics_path) {
                if (e->sc && now_ns >= e->sc->deadline_ns)
                    check_done(e->sc, 0);
                if (!e->sc && now_ns >= e->sc_next_ns) {
                    e->sc_next_ns = now_ns + rs->scrape_every_ns;
                    check_start(rs, i, 1, now_ns);
                }
            }
        }
    }
    views_publish(w, now_ns);
}

/* ---- endpoint views (explain, /metrics) ---- */

typedef struct {
    pthread_mutex_t mu;
    td_ep_view *v;
    size_t n;
    uint64_t at_ns;
} px_view_slot;

struct px_views {
    unsigned n;
    px_view_slot *w; /* one per worker */
};

static void fmt_addr(const struct sockaddr_storage *ss, char *out, size_t cap)
{
    char ip[INET6_ADDRSTRLEN] = "";
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        uv_ip6_name(a, ip, sizeof ip);
        snprintf(out, cap, "[%s]:%u", ip, ntohs(a->sin6_port));
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        uv_ip4_name(a, ip, sizeof ip);
        snprintf(out, cap, "%s:%u", ip, ntohs(a->sin_port));
    }
}

/* Endpoint slot i of rs as a view at now_ns. */
static void view_of(const px_route *rs, size_t i, uint64_t now_ns, td_ep_view *v)
{
    const px_ep *e = &rs->eps[i];
    const td_ep *p = &rs->pool.ep[i];
    const px_src *s = p->src < rs->nsrcs ? &rs->srcs[p->src] : NULL;
    memset(v, 0, sizeof *v);
    v->route = rs->slot;
    v->worker = rs->w->index;
    if (e->addr_ok)
        fmt_addr(&e->addr, v->address, sizeof v->address);
    else
        snprintf(v->address, sizeof v->address, "%s:%u (unresolved)", e->host ? e->host : "",
                 e->port);
    if (s) {
        snprintf(v->source, sizeof v->source, "%s:%u", s->host, s->port);
        v->from_name = s->is_name != 0;
        v->resolved_age_ns = s->is_name && s->resolved_ns ? now_ns - s->resolved_ns : 0;
        v->lookups_failed = s->lookups_failed;
        v->lookup_failing = s->failing != 0;
    }
    v->member = p->member;
    v->unhealthy = p->unhealthy;
    v->ejected_for_ns = p->ejected_until_ns > now_ns ? p->ejected_until_ns - now_ns : 0;
    v->inflight = p->inflight;
    v->failures = p->failures;
    v->requests = p->requests;
    v->ejections = p->ejections_total;
    v->scraped = e->scraped_ns != 0;
    v->waiting = p->waiting;
    v->kv_usage = p->kv_usage;
    v->scrape_age_ns = e->scraped_ns ? now_ns - e->scraped_ns : 0;
}

/* This worker's pools as views, replacing what it published last. */
static void views_publish(px_worker *w, uint64_t now_ns)
{
    struct px_views *vs = w->p->views;
    if (!vs || w->index >= vs->n)
        return;
    size_t n = 0;
    for (size_t r = 0; r < TD_GW_MAX_ROUTES; r++)
        if (w->routes[r])
            for (size_t i = 0; i < w->routes[r]->pool.n; i++)
                n += w->routes[r]->pool.ep[i].member != TD_EP_FREE;
    td_ep_view *v = n ? malloc(n * sizeof *v) : NULL;
    if (n && !v)
        return; /* the last view stays */
    size_t k = 0;
    for (size_t r = 0; r < TD_GW_MAX_ROUTES; r++)
        for (size_t i = 0; w->routes[r] && i < w->routes[r]->pool.n; i++)
            if (w->routes[r]->pool.ep[i].member != TD_EP_FREE)
                view_of(w->routes[r], i, now_ns, &v[k++]);
    px_view_slot *s = &vs->w[w->index];
    pthread_mutex_lock(&s->mu);
    td_ep_view *old = s->v;
    s->v = v;
    s->n = k;
    s->at_ns = now_ns;
    pthread_mutex_unlock(&s->mu);
    free(old);
}

/* td_ep_view_fn: every worker's last views, aged to now. */
static size_t views_read(void *ctx, td_ep_view **out)
{
    struct px_views *vs = ctx;
    size_t n = 0, cap = 0;
    td_ep_view *all = NULL;
    uint64_t now = px_now();
    for (unsigned i = 0; i < vs->n; i++) {
        px_view_slot *s = &vs->w[i];
        pthread_mutex_lock(&s->mu);
        if (n + s->n > cap) {
            size_t nc = n + s->n + 16;
            td_ep_view *g = realloc(all, nc * sizeof *g);
            if (!g) {
                pthread_mutex_unlock(&s->mu);
                break;
            }
            all = g;
            cap = nc;
        }
        uint64_t age = now > s->at_ns ? now - s->at_ns : 0;
        for (size_t k = 0; k < s->n; k++) {
            td_ep_view *v = &all[n++];
            *v = s->v[k];
            v->snapshot_age_ns = age;
            v->ejected_for_ns = v->ejected_for_ns > age ? v->ejected_for_ns - age : 0;
            if (v->scraped)
                v->scrape_age_ns += age;
            if (v->resolved_age_ns)
                v->resolved_age_ns += age;
        }
        pthread_mutex_unlock(&s->mu);
    }
    *out = all;
    return n;
}

td_status px_views_start(td_proxy *p)
{
    struct px_views *vs = calloc(1, sizeof *vs);
    if (vs)
        vs->w = calloc(p->nworkers, sizeof *vs->w);
    if (!vs || !vs->w) {
        free(vs);
        return TD_ENOMEM;
    }
    vs->n = p->nworkers;
    for (unsigned i = 0; i < vs->n; i++)
        pthread_mutex_init(&vs->w[i].mu, NULL);
    p->views = vs;
    td_gateway_set_endpoint_view(p->g, views_read, vs);
    return TD_OK;
}

void px_views_unhook(td_proxy *p)
{
    if (p->views)
        td_gateway_set_endpoint_view(p->g, NULL, NULL);
}

void px_views_free(td_proxy *p)
{
    struct px_views *vs = p->views;
    if (!vs)
        return;
    for (unsigned i = 0; i < vs->n; i++) {
        pthread_mutex_destroy(&vs->w[i].mu);
        free(vs->w[i].v);
    }
    free(vs->w);
    free(vs);
    p->views = NULL;
}

/* ---- upstream connections ---- */

static void idle_unlink(px_up *u)
{
    if (!u->idle)
        return;
    px_route *rs = u->rs;
    px_ep *e = &rs->eps[u->ep];
    if (u->prev)
        u->prev->next = u->next;
    else
        e->idle = u->next;
    if (u->next)
        u->next->prev = u->prev;
    u->prev = u->next = NULL;
    u->idle = 0;
    e->n_idle--;
    rs->n_idle--;
}

static void on_up_closed(uv_handle_t *h)
{
    px_up *u = h->data;
    px_route *rs = u->rs;
    td_hresp_fini(&u->resp);
    rs->eps[u->ep].n_conns--;
    free(u);
    rs->n_conns--;
    maybe_free(rs);
}

static void up_close(px_up *u)
{
    if (u->closing)
        return;
    u->closing = 1;
    idle_unlink(u);
    if (u->c) {
        u->c->rq.up = NULL;
        u->c->up_paused = 0;
        u->c = NULL;
    }
    uv_close((uv_handle_t *)&u->tcp, on_up_closed);
}

static int r_head(td_hresp *resp, void *user);
static int r_body(td_hresp *resp, const char *at, size_t n, void *user);
static const td_hresp_callbacks response_callbacks = {.on_head = r_head, .on_body = r_body};

static px_up *up_new(px_route *rs, int ep)
{
    px_up *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->rs = rs;
    u->ep = ep;
    static const td_hresp_limits limits = {.max_header_bytes = PX_HEADER_MAX,
                                           .max_headers = PX_MAX_HEADERS};
    td_hresp_init(&u->resp, &limits, &response_callbacks, u);
    if (uv_tcp_init(&rs->w->loop, &u->tcp) < 0) {
        td_hresp_fini(&u->resp);
        free(u);
        return NULL;
    }
    u->tcp.data = u;
    u->connect_req.data = u;
    rs->n_conns++;
    rs->eps[ep].n_conns++;
    return u;
}

void px_up_abandon(px_conn *c)
{
    px_up *u = c->rq.up;
    if (!u)
        return;
    u->bad = 1;
    up_close(u);
}

static void on_up_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    px_up *u = h->data;
    (void)suggested;
    *buf = uv_buf_init(u->rs->w->rbuf, sizeof u->rs->w->rbuf);
}

static void on_up_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

/* Reads u unless it already is (libuv refuses a second uv_read_start). */
static int up_read(px_up *u)
{
    if (u->reading)
        return 0;
    if (uv_read_start((uv_stream_t *)&u->tcp, on_up_alloc, on_up_read) < 0)
        return -1;
    u->reading = 1;
    return 0;
}

void px_up_resume(px_conn *c)
{
    c->up_paused = 0;
    px_up *u = c->rq.up;
    if (u && !u->closing && up_read(u) < 0)
        up_close(u);
}

void px_ep_release(px_conn *c)
{
    px_req *r = &c->rq;
    if (r->rs && r->ep >= 0)
        td_ep_finish(&r->rs->pool, (size_t)r->ep);
    r->ep = -1;
}

/* A passive outcome of endpoint ep of rs (see endpoints.h). */
static void ep_report(px_route *rs, int ep, int ok)
{
    if (ep >= 0 && (size_t)ep < rs->pool.n)
        td_ep_report(&rs->pool, (size_t)ep, ok != 0, px_now());
}

/* No endpoint of a pool can take the request (all ejected, or every one
 * tried refused the connection): 503 with Retry-After, at once, rather
 * than a wait for an endpoint that is not there. wait_ns: until one is
 * back, as far as the pool knows (0 or unknown: 1 s). */
static void respond_unavailable(px_conn *c, uint64_t wait_ns)
{
    px_req *r = &c->rq;
    uint64_t s = wait_ns && wait_ns != UINT64_MAX ? (wait_ns + 999999999ULL) / 1000000000ULL : 1;
    if (s > 3600)
        s = 3600;
    char extra[64];
    snprintf(extra, sizeof extra, "Retry-After: %llu\r\n", (unsigned long long)s);
    r->actual = 0; /* no endpoint worked on it */
    px_timer_set(c, TM_NONE, 0);
    px_respond(c, 503, extra, "{\"error\":\"upstream_unavailable\"}");
    px_req_end(c, TD_OUT_UPSTREAM_ERROR);
    if (px_flush(c) == 0)
        px_conn_request_done(c);
}

/* The request failed upstream: 502 if the client has heard nothing yet,
 * else the client connection is cut (the response is incomplete). */
static void fail_request(px_conn *c, int got_bytes)
{
    px_req *r = &c->rq;
    if (!r->resp_started) {
        if (!got_bytes)
            r->actual = 0; /* nothing came back: the upstream is not billed for */
        px_timer_set(c, TM_NONE, 0);
        px_respond(c, 502, NULL,
                   PX_ERROR_BODY("the upstream failed before answering", "server_error",
                                 "upstream_error"));
        px_req_end(c, TD_OUT_UPSTREAM_ERROR);
        if (px_flush(c) == 0)
            px_conn_request_done(c);
    } else {
        r->status = r->resp_status;
        px_req_end(c, TD_OUT_UPSTREAM_ERROR);
        px_conn_close(c);
    }
}

/* u failed (connect refused, reset, a response that does not parse, or
 * a 502/503 of a pool endpoint with retry_5xx). A connection reused from
 * the pool that failed before any byte was most likely closed by the
 * endpoint while idle: that is no mark against the endpoint. */
static void up_fail(px_up *u)
{
    px_conn *c = u->c;
    px_route *rs = u->rs;
    int stale = u->reused && !u->got_bytes;
    int got = u->got_bytes && !u->retry_5xx;
    int refused = !u->connected;
    int ep = u->ep;
    u->bad = 1;
    up_close(u);
    if (!stale)
        ep_report(rs, ep, 0);
    if (!c)
        return;
    px_req *r = &c->rq;
    /* a pool retries any failure the client has not heard of yet; the one
     * address, as before pools, a stale pooled connection only */
    int retry = rs->is_pool ? !r->resp_started : stale;
    if (retry && !r->retried && !c->w->stopping && px_now() < r->deadline_ns) {
        r->retried = 1;
        /* another endpoint when there is one: a stale connection may as
         * well be a dead endpoint (SIGKILL resets every connection, the
         * pooled ones included) */
        r->ep_failed = ep;
        px_forward(c);
        return;
    }
    if (rs->is_pool && refused && !r->resp_started) {
        respond_unavailable(c, td_ep_wait_ns(&rs->pool, px_now()));
        return;
    }
    fail_request(c, got);
}

/* The response is complete: the connection goes back to the pool (or is
 * closed), the request ends, and the client's next request may start. */
static void up_complete(px_up *u)
{
    px_conn *c = u->c;
    px_req *r = &c->rq;
    px_route *rs = u->rs;
    u->c = NULL;
    r->up = NULL;
    c->up_paused = 0;
    px_ep *e = &rs->eps[u->ep];
    int reuse = u->resp.keep_alive && !u->bad && !rs->retired && !rs->w->stopping &&
                e->n_idle < (size_t)rs->cap + 4 && rs->pool.ep[u->ep].member == TD_EP_ACTIVE;
    if (reuse) {
        u->reused = 1;
        u->idle = 1;
        u->idle_since = px_now();
        u->prev = NULL;
        u->next = e->idle;
        if (e->idle)
            e->idle->prev = u;
        e->idle = u;
        e->n_idle++;
        rs->n_idle++;
        if (up_read(u) < 0)
            up_close(u);
    } else {
        up_close(u);
    }
    td_usage usage = {0};
    if (r->scan_on)
        td_cost_scanner_finish(&r->scan, &usage);
    /* No usage in the response (a stream without a usage chunk, a server
     * that never reports it): the tokens are counted instead, the prompt as
     * estimated and the completion from the generated text (characters / 4),
     * and the request is marked usage=counted in the access log. */
    if (r->route->cost_model == TD_COST_TOKENS &&
        !(usage.have & (TD_USAGE_TOTAL | TD_USAGE_PROMPT | TD_USAGE_COMPLETION)) &&
        (usage.have & TD_USAGE_CONTENT)) {
        usage.prompt_tokens = r->prompt_est;
        usage.completion_tokens = ceil(usage.content_chars / 4);
        usage.have |= TD_USAGE_PROMPT | TD_USAGE_COMPLETION;
        r->usage_counted = 1;
    }
    td_cost_actual(r->route->cost_model, &usage, r->have_gpu_hdr ? r->gpu_hdr : NULL, r->estimate,
                   &r->actual);
    /* The ledger's usage: tokens as the upstream reported them (else the
     * entry estimate on a tokens route); GPU-seconds as reported (header or
     * body), else estimated as the time one upstream slot was held. */
    if (usage.have & (TD_USAGE_PROMPT | TD_USAGE_COMPLETION)) {
        r->tokens_in = (int64_t)usage.prompt_tokens;
        r->tokens_out = (int64_t)usage.completion_tokens;
    } else if (usage.have & TD_USAGE_TOTAL) {
        r->tokens_in = (int64_t)usage.total_tokens;
    } else if (r->route->cost_model == TD_COST_TOKENS) {
        r->tokens_in = (int64_t)r->actual;
    }
    double gpu_s = -1;
    if (r->have_gpu_hdr) {
        char *end;
        gpu_s = strtod(r->gpu_hdr, &end);
        if (end == r->gpu_hdr || gpu_s < 0)
            gpu_s = -1;
    }
    if (gpu_s < 0 && (usage.have & TD_USAGE_GPU_SECONDS))
        gpu_s = usage.gpu_seconds;
    if (gpu_s < 0 && r->route->cost_model == TD_COST_GPU_SECONDS)
        gpu_s = r->actual;
    if (gpu_s < 0)
        gpu_s = r->t_started ? (double)(px_now() - r->t_started) / 1e9 : 0;
    r->gpu_milli_seconds = (int64_t)(gpu_s * 1000 + 0.5);
    px_timer_set(c, TM_NONE, 0);
    r->status = r->resp_status;
    if (r->resp_close)
        c->stop = 1;
    px_req_end(c, TD_OUT_ACCEPTED);
    if (px_flush(c) == 0)
        px_conn_request_done(c);
}

/* ---- the response ---- */

/* name is in the comma-separated token list (case-insensitive). */
static int in_token_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    const char *s = list;
    while (s && *s) {
        while (*s == ' ' || *s == '\t' || *s == ',')
            s++;
        size_t k = strcspn(s, ", \t");
        if (k == n && strncasecmp(s, name, n) == 0)
            return 1;
        s += k;
    }
    return 0;
}

/* RFC 9110 7.6.1: these, and any the Connection header names, belong to
 * one hop and are not forwarded. nlen is strlen(name); the switch on it
 * keeps this to at most two compares per header on the hot path. */
static int hop_by_hop(const char *name, size_t nlen, const char *connection)
{
    int hit = 0;
    switch (nlen) {
    case 2:
        hit = strcasecmp(name, "te") == 0;
        break;
    case 7:
        hit = strcasecmp(name, "trailer") == 0 || strcasecmp(name, "upgrade") == 0;
        break;
    case 10:
        hit = strcasecmp(name, "connection") == 0 || strcasecmp(name, "keep-alive") == 0;
        break;
    case 16:
        hit = strcasecmp(name, "proxy-connection") == 0;
        break;
    case 17:
        hit = strcasecmp(name, "transfer-encoding") == 0;
        break;
    }
    return hit || (connection && in_token_list(connection, name));
}

/* true if a Connection header of r other than its first names the field
 * (the first is hop_by_hop's): RFC 9110 7.6.1 reads every one. */
static int named_by_connection(const px_req *r, const char *name)
{
    if (r->n_connection < 2)
        return 0;
    int seen = 0;
    for (size_t i = 0; i < r->n_ix; i++) {
        const char *n = r->hdr.p + r->ix[i].name_off;
        if (strcasecmp(n, "connection") == 0 && seen++ &&
            in_token_list(r->hdr.p + r->ix[i].value_off, name))
            return 1;
    }
    return 0;
}

/* Decimal digits of v into dst (at least 20 bytes); returns the length.
 * The hot path formats without printf: vfprintf was the largest
 * user-space cost of a proxied request in perf. */
static size_t fmt_u64(char *dst, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        dst[i] = tmp[n - 1 - i];
    return n;
}

/* Appends "name: value\r\n" to b, as td__buf_printf("%s: %s\r\n") would. */
static td_status append_field(td__buf *b, const char *name, size_t nlen, const char *value,
                              size_t vlen)
{
    /* One append for a field of ordinary size: heads are built field by
     * field, and four appends each were a fifth of a proxied request's
     * user-space instructions. */
    char line[512];
    if (nlen + vlen + 4 <= sizeof line) {
        memcpy(line, name, nlen);
        line[nlen] = ':';
        line[nlen + 1] = ' ';
        memcpy(line + nlen + 2, value, vlen);
        line[nlen + 2 + vlen] = '\r';
        line[nlen + 3 + vlen] = '\n';
        return td__buf_append(b, line, nlen + vlen + 4);
    }
    td_status st = td__buf_append(b, name, nlen);
    if (st == TD_OK)
        st = td__buf_append(b, ": ", 2);
    if (st == TD_OK)
        st = td__buf_append(b, value, vlen);
    if (st == TD_OK)
        st = td__buf_append(b, "\r\n", 2);
    return st;
}

/* Appends "name: N\r\n" for an unsigned N. */
static td_status append_uint_field(td__buf *b, const char *name, size_t nlen, uint64_t v)
{
    char num[24];
    return append_field(b, name, nlen, num, fmt_u64(num, v));
}

/* The reader's on_head: the response's head is rewritten for the client
 * into c->out. 1 pauses the reader (a 5xx to retry elsewhere); -1 fails. */
static int r_head(td_hresp *resp, void *user)
{
    px_up *u = user;
    px_conn *c = u->c;
    px_req *r = &c->rq;
    const td__hdrs *h = &resp->hdrs;
    int status = resp->status;
    if (status == 101)
        return -1; /* we asked for no upgrade (other 1xx the reader skips) */
    /* a pool endpoint that answers 502 or 503 (overloaded, or a gateway of
     * its own that failed) before the client heard anything: the request
     * goes to another endpoint if it has not been retried (on_up_read) */
    if ((status == 502 || status == 503) && u->rs->is_pool && !r->retried &&
        td_ep_members(&u->rs->pool) > 1 && px_now() < r->deadline_ns) {
        u->retry_5xx = 1;
        return 1;
    }
    ep_report(u->rs, u->ep, status < 500);
    r->resp_status = status;
    const char *connection = NULL, *ctype = NULL, *encoding = NULL;
    for (size_t i = 0; i < h->n; i++) {
        const char *name = h->buf.p + h->ix[i].name_off;
        const char *value = h->buf.p + h->ix[i].value_off;
        if ((name[0] | 0x20) != 'c')
            continue; /* all three start with c */
        if (!connection && strcasecmp(name, "connection") == 0)
            connection = value;
        else if (!ctype && strcasecmp(name, "content-type") == 0)
            ctype = value;
        else if (!encoding && strcasecmp(name, "content-encoding") == 0)
            encoding = value;
    }
    td__buf *o = &c->out;
    /* "HTTP/1.1 NNN Reason\r\n"; parsed status codes are 100..999 */
    char line[16] = "HTTP/1.1 ";
    size_t ll = 9 + fmt_u64(line + 9, (uint64_t)status);
    line[ll++] = ' ';
    const char *reason = http_status_str((enum http_status)status);
    td_status st = td__buf_append(o, line, ll);
    if (st == TD_OK)
        st = td__buf_append(o, reason, strlen(reason));
    if (st == TD_OK)
        st = td__buf_append(o, "\r\n", 2);
    /* an allowed origin gets the route's CORS lines in place of any the
     * upstream set: two Access-Control-Allow-Origin fail in a browser */
    char cors[TD_GW_CORS_HEADERS_MAX];
    size_t ncors = td_gw_cors_actual(r->cors, r->h_origin, cors, sizeof cors);
    if (st == TD_OK && ncors)
        st = td__buf_append(o, cors, ncors);
    for (size_t i = 0; st == TD_OK && i < h->n; i++) {
        const char *name = h->buf.p + h->ix[i].name_off;
        const char *value = h->buf.p + h->ix[i].value_off; /* trimmed by the reader */
        size_t nlen = strlen(name), vlen = strlen(value);
        if (hop_by_hop(name, nlen, connection) ||
            (nlen >= 10 && strncasecmp(name, "x-tenantd-", 10) == 0) ||
            (ncors && nlen > 15 && strncasecmp(name, "access-control-", 15) == 0))
            continue;
        if (nlen == 13 && strcasecmp(name, "x-gpu-seconds") == 0 && vlen < sizeof r->gpu_hdr) {
            memcpy(r->gpu_hdr, value, vlen + 1);
            r->have_gpu_hdr = 1;
        }
        st = append_field(o, name, nlen, value, vlen);
    }
    int no_body = r->method == HTTP_HEAD || status == 204 || status == 304;
    if (!no_body && (resp->chunked || !resp->has_length)) {
        if (r->http_minor >= 1) {
            r->resp_chunked = 1;
            if (st == TD_OK)
                st = td__buf_append(o, "Transfer-Encoding: chunked\r\n", 28);
        } else {
            r->resp_close = 1; /* an HTTP/1.0 client: the end of the body is the close */
        }
    }
    if (!r->keep_alive || c->stop)
        r->resp_close = 1;
    if (st == TD_OK) {
        /* %g prints an integer below 1e6 as its digits: the common case */
        if (r->estimate >= 0 && r->estimate < 1e6 && r->estimate == (double)(uint64_t)r->estimate)
            st = append_uint_field(o, "X-Tenantd-Cost-Estimate", 23, (uint64_t)r->estimate);
        else
            st = td__buf_printf(o, "X-Tenantd-Cost-Estimate: %g\r\n", r->estimate);
    }
    if (st == TD_OK && r->resp_close)
        st = td__buf_append(o, "Connection: close\r\n", 19);
    else if (st == TD_OK && r->http_minor == 0)
        st = td__buf_append(o, "Connection: keep-alive\r\n", 24);
    if (st == TD_OK)
        st = td__buf_append(o, "\r\n", 2);
    if (st != TD_OK)
        return -1;
    r->resp_started = 1;
    r->scan_on = r->route->cost_model != TD_COST_REQUESTS &&
                 (!encoding || strcasecmp(encoding, "identity") == 0);
    int sse = ctype && strncasecmp(ctype, "text/event-stream", 17) == 0;
    if (r->scan_on)
        td_cost_scanner_init(&r->scan, sse);
    /* a stream on a tokens route with budgets is held to them as it goes
     * (r_body); a whole JSON answer is produced before its first byte, so
     * cutting it would save nothing and it is charged in full */
    r->cut_check =
        r->scan_on && sse && r->route->cost_model == TD_COST_TOKENS && (r->bud.n || r->bud.nkey);
    uint64_t silence_ms = r->route->timeout_ns / 1000000;
    px_timer_set(c, TM_STREAM, silence_ms ? silence_ms : 30000);
    return 0;
}

/* Appends n body bytes for the client, chunk-framed when we chunk. */
static int forward_body(px_req *r, td__buf *o, const char *at, size_t n)
{
    if (r->resp_chunked) {
        if (n == 0)
            return 0; /* a zero-size chunk would end the body */
        char size[24];
        size_t k = sizeof size - 2, v = n;
        size[k] = '\r', size[k + 1] = '\n';
        do
            size[--k] = "0123456789abcdef"[v & 15];
        while (v >>= 4);
        if (td__buf_append(o, size + k, sizeof size - k) != TD_OK ||
            td__buf_append(o, at, n) != TD_OK || td__buf_append(o, "\r\n", 2) != TD_OK)
            return -1;
        return 0;
    }
    return td__buf_append(o, at, n) == TD_OK ? 0 : -1;
}

/* How far past the point a stream is to be cut it may go to finish the
 * event in progress, so that the error event is not glued to half of one. */
#define PX_CUT_SLACK PX_READ_BUF

/* The stream is to be cut (its budget has no room): forwards at[0..n) up
 * to the end of the event in progress, then marks the cut (done in
 * on_up_read, after the reader pauses: 1). */
static int finish_event_then_cut(px_req *r, td__buf *o, const char *at, size_t n)
{
    size_t k = td_cost_scanner_feed_to_event_end(&r->scan, at, n);
    if (forward_body(r, o, at, k) < 0)
        return -1;
    r->cut_slack += k;
    if (td_cost_scanner_at_event_end(&r->scan) || r->cut_slack > PX_CUT_SLACK) {
        r->budget_cut = 1;
        return 1;
    }
    return 0;
}

/* The reader's on_body: a piece of the body, forwarded (and counted). */
static int r_body(td_hresp *resp, const char *at, size_t n, void *user)
{
    px_up *u = user;
    px_req *r = &u->c->rq;
    (void)resp;
    if (r->cut_pending)
        return finish_event_then_cut(r, &u->c->out, at, n);
    if (r->cut_check) {
        /* Count the piece before forwarding it: when its tokens would pass
         * what the budgets hold for the request and they have no room for
         * more, only the rest of the event in progress is forwarded and
         * the stream ends there (cut_stream). */
        td_cost_scanner next = r->scan;
        td_cost_scanner_feed(&next, at, n);
        double counted = td_cost_counted_tokens(&next, r->prompt_est);
        if (counted > r->covered_tokens && px_budget_extend(u->c, counted) != 0) {
            r->cut_pending = 1;
            return finish_event_then_cut(r, &u->c->out, at, n);
        }
        r->scan = next;
    } else if (r->scan_on) {
        td_cost_scanner_feed(&r->scan, at, n);
    }
    return forward_body(r, &u->c->out, at, n);
}

/* The response is complete: the client's chunked body is ended, the
 * upstream connection let go. */
static void r_done(px_up *u)
{
    if (u->c->rq.resp_chunked && td__buf_append(&u->c->out, "0\r\n\r\n", 5) != TD_OK) {
        up_fail(u);
        return;
    }
    up_complete(u);
}

/* The budget had no room for the next piece of a stream: the upstream is
 * let go, the client gets a last SSE event with OpenAI's error shape and
 * the end of the body (or, without chunking, the close), and the request
 * is charged what it was forwarded. */
static void cut_stream(px_up *u)
{
    px_conn *c = u->c;
    px_req *r = &c->rq;
    u->bad = 1;
    up_close(u);
    char ev[400];
    int n = snprintf(ev, sizeof ev,
                     "data: {\"error\":{\"message\":\"stream cut after %.0f tokens: the budget has "
                     "no room for more; the tokens delivered are charged\",\"type\":"
                     "\"insufficient_quota\",\"param\":null,\"code\":\"budget_exceeded\"}}\n\n",
                     td_cost_counted_tokens(&r->scan, r->prompt_est));
    td__buf *o = &c->out;
    if (r->resp_chunked) {
        char size[24];
        int k = snprintf(size, sizeof size, "%x\r\n", (unsigned)n);
        if (td__buf_append(o, size, (size_t)k) != TD_OK ||
            td__buf_append(o, ev, (size_t)n) != TD_OK ||
            td__buf_append(o, "\r\n0\r\n\r\n", 7) != TD_OK)
            r->resp_close = 1; /* the body cannot be ended well: close */
    } else {
        /* the end of the body is the close (HTTP/1.0), or a length the
         * upstream announced that the body will now not reach */
        td__buf_append(o, ev, (size_t)n);
        r->resp_close = 1;
    }
    px_timer_set(c, TM_NONE, 0);
    r->status = r->resp_status;
    if (r->resp_close)
        c->stop = 1;
    px_req_end(c, TD_OUT_BUDGET_CUT);
    if (px_flush(c) == 0)
        px_conn_request_done(c);
}

static void on_up_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    px_up *u = st->data;
    if (u->closing || nread == 0)
        return;
    px_conn *c = u->c;
    if (!c) {
        /* idle in the pool: the upstream closed it, or sent what nobody
         * asked for */
        up_close(u);
        return;
    }
    if (nread < 0) {
        if (nread == UV_EOF && u->got_bytes && !u->retry_5xx) {
            u->bad = 1;
            td_hresp_eof(&u->resp);
            if (td_hresp_status(&u->resp) == TD_HRESP_DONE) {
                r_done(u);
                return;
            }
        }
        up_fail(u);
        return;
    }
    u->got_bytes = 1;
    if (!c->rq.t_first_byte)
        c->rq.t_first_byte = px_now();
    size_t k = td_hresp_feed(&u->resp, buf->base, (size_t)nread);
    if (u->retry_5xx) {
        up_fail(u);
        return;
    }
    if (c->rq.budget_cut) {
        cut_stream(u);
        return;
    }
    td_hresp_state rs = td_hresp_status(&u->resp);
    if (rs == TD_HRESP_DONE) {
        if (k != (size_t)nread)
            u->bad = 1; /* bytes after the response: do not reuse */
        r_done(u);
        return;
    }
    if (rs != TD_HRESP_MORE) {
        up_fail(u);
        return;
    }
    if (px_flush(c) < 0)
        return; /* the client is gone, and with it this request */
    if (c->rq.resp_started && c->timer_mode == TM_STREAM) {
        uint64_t silence_ms = c->rq.route->timeout_ns / 1000000;
        px_timer_set(c, TM_STREAM, silence_ms ? silence_ms : 30000);
    }
    if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > PX_WRITE_HIGH) {
        c->up_paused = 1;
        u->reading = 0;
        uv_read_stop(st);
    }
}

/* ---- the request ---- */

typedef struct {
    uv_write_t req;
    px_up *u;
    char data[];
} up_write;

static void on_up_write(uv_write_t *req, int status)
{
    up_write *wr = (up_write *)req;
    px_up *u = wr->u;
    free(wr);
    if (status < 0 && !u->closing && u->c && !u->c->rq.resp_started)
        up_fail(u);
}

/* Appends the request head for the upstream to h. */
static td_status build_head(px_conn *c, td__buf *h)
{
    px_req *r = &c->rq;
    const char *target = r->url.p;
    if (target[0] != '/' && r->path_off != SIZE_MAX)
        target += r->path_off; /* absolute-form: the path and query */
    else if (target[0] != '/')
        target = "/";
    const char *method = http_method_str((enum http_method)r->method);
    td_status st = td__buf_append(h, method, strlen(method));
    if (st == TD_OK)
        st = td__buf_append(h, " ", 1);
    if (st == TD_OK)
        st = td__buf_append(h, target, strlen(target));
    if (st == TD_OK)
        st = td__buf_append(h, " HTTP/1.1\r\n", 11);
    /* What the client sent is forwarded but for: hop-by-hop fields (and
     * those its Connection headers name), the framing we set ourselves,
     * the credential that identified the tenant (the upstream gets the
     * route's own, if any), and every field that speaks for tenantd
     * (X-Tenant, X-Tenantd-*), which only tenantd may set: Envoy strips
     * x-envoy-* from external clients the same way. */
    size_t nxff = 0;
    for (size_t i = 0; st == TD_OK && i < r->n_ix; i++) {
        const char *name = r->hdr.p + r->ix[i].name_off;
        const char *value = r->hdr.p + r->ix[i].value_off;
        size_t nlen = strlen(name);
        if (nlen == 15 && strcasecmp(name, "x-forwarded-for") == 0) {
            nxff++;
            continue;
        }
        if (hop_by_hop(name, nlen, r->h_connection) || named_by_connection(r, name) ||
            (nlen == 14 && strcasecmp(name, "content-length") == 0) ||
            (nlen == 6 && strcasecmp(name, "expect") == 0) ||
            (nlen == 13 && strcasecmp(name, "authorization") == 0) ||
            (nlen == 19 && strcasecmp(name, "proxy-authorization") == 0) ||
            (nlen == 8 && strcasecmp(name, "x-tenant") == 0) ||
            (nlen == 13 && strcasecmp(name, "x-criticality") == 0) ||
            (nlen >= 10 && strncasecmp(name, "x-tenantd-", 10) == 0) ||
            (r->body_inflated && nlen == 16 && strcasecmp(name, "content-encoding") == 0))
            continue;
        st = append_field(h, name, nlen, value, strlen(value));
    }
    px_route *rs = r->rs;
    const px_ep *ep = &rs->eps[r->ep >= 0 ? r->ep : 0];
    if (st == TD_OK && !r->h_host)
        st = td__buf_printf(h, "Host: %s:%u\r\n", ep->host, ep->port);
    /* the class the request was served at, not the one it claimed: an
     * upstream that acts on X-Criticality must not be told more */
    if (st == TD_OK && r->h_crit) {
        const char *cn = td_criticality_name(r->crit);
        st = append_field(h, "X-Criticality", 13, cn, strlen(cn));
    }
    const char *cred = r->route->upstream_authorization;
    if (st == TD_OK && cred)
        st = append_field(h, "Authorization", 13, cred, strlen(cred));
    /* X-Forwarded-For as Envoy's use_remote_address keeps it: every value
     * the client sent, in order, then the peer we saw */
    if (st == TD_OK)
        st = td__buf_append(h, "X-Forwarded-For: ", 17);
    for (size_t i = 0; st == TD_OK && nxff && i < r->n_ix; i++) {
        const char *name = r->hdr.p + r->ix[i].name_off;
        const char *value = r->hdr.p + r->ix[i].value_off;
        if (strcasecmp(name, "x-forwarded-for") != 0 || !*value)
            continue;
        st = td__buf_append(h, value, strlen(value));
        if (st == TD_OK)
            st = td__buf_append(h, ", ", 2);
    }
    if (st == TD_OK)
        st = td__buf_append(h, c->peer, strlen(c->peer));
    if (st == TD_OK)
        st = td__buf_append(h, "\r\nX-Tenantd-Tenant: ", 20);
    if (st == TD_OK)
        st = td__buf_append(h, r->tenant->name, strlen(r->tenant->name));
    if (st == TD_OK)
        st = td__buf_append(h, "\r\n", 2);
    if (st == TD_OK &&
        (r->body.len || r->method == HTTP_POST || r->method == HTTP_PUT || r->method == HTTP_PATCH))
        st = append_uint_field(h, "Content-Length", 14, (uint64_t)r->body.len);
    if (st == TD_OK)
        st = td__buf_append(h, "\r\n", 2);
    return st;
}

static void send_request(px_up *u)
{
    px_conn *c = u->c;
    px_req *r = &c->rq;
    /* The worker's buffer: what the socket does not take now is copied
     * below, so the head need not outlive this call. */
    td__buf *head = &c->w->up_head;
    buf_clear(head);
    if (build_head(c, head) != TD_OK) {
        up_fail(u);
        return;
    }
    r->sent = 1; /* from here the upstream may work on it: an early end is charged */
    static char none[1];
    uv_buf_t bufs[2] = {uv_buf_init(head->p, (unsigned int)head->len),
                        uv_buf_init(r->body.p ? r->body.p : none, (unsigned int)r->body.len)};
    size_t total = head->len + r->body.len, done = 0;
    uv_stream_t *st = (uv_stream_t *)&u->tcp;
    int rc = uv_try_write(st, bufs, 2);
    if (rc > 0)
        done = (size_t)rc;
    else if (rc < 0 && rc != UV_EAGAIN) {
        up_fail(u);
        return;
    }
    if (done < total) {
        /* the rest is copied: the client's buffers may go before the write */
        up_write *wr = malloc(sizeof *wr + (total - done));
        if (!wr) {
            up_fail(u);
            return;
        }
        size_t k = 0;
        if (done < head->len) {
            memcpy(wr->data, head->p + done, head->len - done);
            k = head->len - done;
            if (r->body.len)
                memcpy(wr->data + k, r->body.p, r->body.len);
        } else {
            memcpy(wr->data, r->body.p + (done - head->len), total - done);
        }
        wr->u = u;
        uv_buf_t b = uv_buf_init(wr->data, (unsigned int)(total - done));
        if (uv_write(&wr->req, st, &b, 1, on_up_write) < 0) {
            free(wr);
            up_fail(u);
            return;
        }
    }
}

static void on_up_connect(uv_connect_t *req, int status)
{
    px_up *u = req->data;
    if (u->closing)
        return;
    if (status < 0 || !u->c) {
        up_fail(u);
        return;
    }
    u->connected = 1;
    uv_tcp_nodelay(&u->tcp, 1);
    if (up_read(u) < 0) {
        up_fail(u);
        return;
    }
    send_request(u);
}

static void attach(px_up *u, px_conn *c)
{
    u->c = c;
    c->rq.up = u;
    td_hresp_start(&u->resp, c->rq.method == HTTP_HEAD);
    u->got_bytes = u->retry_5xx = 0;
}

void px_forward(px_conn *c)
{
    px_req *r = &c->rq;
    px_route *rs = r->rs;
    r->state = RQ_UPSTREAM;
    uint64_t now = px_now();
    uint64_t left_ms = r->deadline_ns > now ? (r->deadline_ns - now + 999999) / 1000000 : 1;
    px_timer_set(c, TM_UPSTREAM, left_ms);
    px_ep_release(c); /* a retry: the failed endpoint's count ends */
    if (rs->w->stopping) {
        fail_request(c, 0);
        return;
    }
    /* a retry leaves the endpoint that failed, unless it is the only one
     * (a stale pooled connection is retried on the same endpoint) */
    uint32_t cap = td_ep_members(&rs->pool) > 1 ? rs->cap : 0;
    int ep = td_ep_pick(&rs->pool, now, r->ep_failed, true, cap);
    if (ep >= 0 && pending(rs, (size_t)ep)) /* a name not looked up yet: another */
        ep = td_ep_pick(&rs->pool, now, ep, false, cap);
    if (ep >= 0 && pending(rs, (size_t)ep))
        ep = -1;
    if (ep < 0) {
        /* nothing to send to; a name's first lookup is due in milliseconds */
        respond_unavailable(c, rs->has_names ? 1 : td_ep_wait_ns(&rs->pool, now));
        return;
    }
    px_ep *e = &rs->eps[ep];
    if (!e->addr_ok) {
        /* a name that did not resolve: a failure of that endpoint */
        ep_report(rs, ep, 0);
        if (rs->is_pool && !r->retried && now < r->deadline_ns) {
            r->retried = 1;
            r->ep_failed = ep;
            px_forward(c);
            return;
        }
        fail_request(c, 0);
        return;
    }
    td_ep_start(&rs->pool, (size_t)ep);
    r->ep = ep;
    px_up *u = e->idle;
    if (u) {
        idle_unlink(u);
        attach(u, c);
        send_request(u);
        return;
    }
    u = up_new(rs, ep);
    if (!u) {
        fail_request(c, 0);
        return;
    }
    attach(u, c);
    if (uv_tcp_connect(&u->connect_req, &u->tcp, (const struct sockaddr *)&e->addr, on_up_connect) <
        0)
        up_fail(u);
}
