/* shared_budget.c - money budgets shared by replicas through Redis (see
 * shared_budget.h for the model). Redis is asked only when a replica's
 * lease of a budget does not cover a request (once per chunk, a few
 * requests), from the request's own thread with a bounded wait: a
 * background refill as shared.c does for rates would have to refuse a
 * request whose lease ran dry while budget is left, which a budget must
 * not do. A failed or slow call opens a breaker (25 ms doubling to 1 s)
 * during which nothing waits for Redis.
 *
 * Locks: each slot has a mutex over its three periods' leases, held across
 * its Redis call so one slot never asks twice at once; the connection has
 * its own mutex, always taken after a slot's. */
#include "io/shared_budget.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "gateway/budget_lease.h"
#include "io/shared.h"

#define NAME_MAX_LEN   512 /* "tenant/key": 253 + 1 + 63 at most */
#define BACKOFF_MIN_NS (25ull * 1000 * 1000)
#define BACKOFF_MAX_NS (1000ull * 1000 * 1000)
#define KEEP_AFTER_S   86400 /* a period's hash outlives its end by a day */
#define PUSH_NS        (100ull * 1000 * 1000) /* the pusher's period */
#define REFUSED_NS     (1000ull * 1000 * 1000)
/* After Redis returns, a replica's claim stays within budget/replicas this
 * long: the other replicas' pushers (PUSH_NS, breaker <= BACKOFF_MAX_NS)
 * bring what they spent meanwhile to Redis before it is leased again. */
#define GRACE_NS (2ull * BACKOFF_MAX_NS + 2 * PUSH_NS)

/* KEYS[1]: a budget's hash {total, r:<replica>...}, micro-units.
 * ARGV: op ("lease" | "give"), field, then for lease: limit, claimed, need,
 * want, force (0|1), expire-at (s), cap (-1: none; else mine may not grow
 * past it by a grant); for give: amount, expire-at.
 * Returns {granted, total, mine} after the call. The lease branch is
 * td_budget_lease_grant (budget_lease.c) line for line. */
static const char script[] =
    "local f = ARGV[2]\n"
    "local mine = tonumber(redis.call('HGET', KEYS[1], f) or '0')\n"
    "local total = tonumber(redis.call('HGET', KEYS[1], 'total') or '0')\n"
    "local add, g, exp = 0, 0, ARGV[4]\n"
    "if ARGV[1] == 'give' then\n"
    "  local x = tonumber(ARGV[3])\n"
    "  if x > mine then x = mine end\n"
    "  if x > 0 then add = -x end\n"
    "else\n"
    "  local limit, claimed = tonumber(ARGV[3]), tonumber(ARGV[4])\n"
    "  local need, want = tonumber(ARGV[5]), tonumber(ARGV[6])\n"
    "  exp = ARGV[8]\n"
    "  local surplus = 0\n"
    "  if claimed > mine then add = claimed - mine else surplus = mine - claimed end\n"
    "  need = need - surplus\n"
    "  want = want - surplus\n"
    "  if need > 0 then\n"
    "    if want < need then want = need end\n"
    "    local avail = limit - (total + add)\n"
    "    local cap = tonumber(ARGV[9])\n"
    "    if cap >= 0 and cap - (mine + add) < avail then avail = cap - (mine + add) end\n"
    "    if ARGV[7] == '1' then g = want\n"
    "    elseif avail >= need then g = math.min(want, avail) end\n"
    "  end\n"
    "  add = add + g\n"
    "end\n"
    "if add ~= 0 then\n"
    "  redis.call('HINCRBY', KEYS[1], f, add)\n"
    "  redis.call('HINCRBY', KEYS[1], 'total', add)\n"
    "end\n"
    "redis.call('EXPIREAT', KEYS[1], exp)\n"
    "return {g, total + add, mine + add}\n";

typedef struct {
    int64_t start_s;     /* period the lease belongs to; 0: none yet */
    int64_t lease;       /* nano; negative: spent past the claim */
    int64_t chunk;       /* of the last ask, for give-backs */
    int64_t total_micro; /* as last seen from Redis; -1: never asked */
    bool dirty;          /* reserved locally while Redis was away: push the claim */
    /* Redis' last refusal: for REFUSED_NS a request that needs as much or
     * more of the same limit is refused here, so an exhausted budget costs
     * Redis one call per second per replica, not one per request */
    uint64_t refused_ns;
    int64_t refused_need, refused_limit;
} lease_entry;

typedef struct {
    pthread_mutex_t mu;
    char *name; /* the Redis key's tenant or "tenant/key" */
    lease_entry e[TD_PERIOD_COUNT];
} bslot;

struct td_shbudget {
    char *addr, *host, *prefix, *field, *label;
    int port;
    uint32_t replicas, timeout_ms;
    td_budgets *own;
    size_t nslots;
    _Atomic(bslot *) *slots;
    pthread_mutex_t install_mu;

    pthread_mutex_t conn_mu; /* guards everything below */
    redisContext *rc;
    char sha[41];
    uint64_t backoff_ns;
    _Atomic uint64_t next_try_ns;
    _Atomic bool degraded;
    _Atomic uint64_t fallbacks, calls;
    _Atomic uint64_t recovered_ns; /* when Redis last came back; 0: never lost */
    _Atomic long ndirty;           /* entries with a claim to push */

    /* the pusher thread: brings claims decided while Redis was away to it */
    pthread_t pusher;
    pthread_mutex_t stop_mu;
    pthread_cond_t stop_cv;
    bool stop, pusher_started;
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the connection (conn_mu held) ---- */

static void degrade(td_shbudget *s, const char *why)
{
    if (s->rc) {
        redisFree(s->rc);
        s->rc = NULL;
    }
    atomic_store(&s->next_try_ns, mono_ns() + s->backoff_ns);
    s->backoff_ns = s->backoff_ns * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : s->backoff_ns * 2;
    if (!atomic_exchange(&s->degraded, true))
        fprintf(stderr,
                "tenantd: redis %s unreachable for %s budgets (%s); each replica keeps to "
                "budget/%u\n",
                s->addr, s->label, why, s->replicas);
}

static void recovered(td_shbudget *s)
{
    s->backoff_ns = BACKOFF_MIN_NS;
    if (atomic_exchange(&s->degraded, false)) {
        atomic_store(&s->recovered_ns, mono_ns());
        fprintf(stderr, "tenantd: redis %s reachable again for %s budgets\n", s->addr, s->label);
    }
}

static const char *ctx_err(redisContext *c, char *buf, size_t len)
{
    if (!c)
        return "out of memory";
    if (c->err == REDIS_ERR_IO && strcmp(c->errstr, strerror(EAGAIN)) == 0)
        return "timed out";
    snprintf(buf, len, "%s", c->errstr[0] ? c->errstr : "connection error");
    return buf;
}

static bool load_script(td_shbudget *s)
{
    char buf[160];
    redisReply *r = redisCommand(s->rc, "SCRIPT LOAD %s", script);
    if (!r) {
        degrade(s, ctx_err(s->rc, buf, sizeof buf));
        return false;
    }
    bool ok = r->type == REDIS_REPLY_STRING && r->len == 40;
    if (ok) {
        memcpy(s->sha, r->str, 40);
        s->sha[40] = '\0';
    } else {
        snprintf(buf, sizeof buf, "SCRIPT LOAD: %s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    }
    freeReplyObject(r);
    if (!ok)
        degrade(s, buf);
    return ok;
}

static bool connect_redis(td_shbudget *s)
{
    struct timeval tv = {.tv_sec = s->timeout_ms / 1000,
                         .tv_usec = (suseconds_t)(s->timeout_ms % 1000) * 1000};
    char buf[160];
    redisContext *c = redisConnectWithTimeout(s->host, s->port, tv);
    if (!c || c->err) {
        const char *why = ctx_err(c, buf, sizeof buf);
        char copy[160];
        snprintf(copy, sizeof copy, "%s", why);
        if (c)
            redisFree(c);
        degrade(s, copy);
        return false;
    }
    s->rc = c;
    if (redisSetTimeout(c, tv) != REDIS_OK) {
        degrade(s, "cannot set socket timeout");
        return false;
    }
    return load_script(s);
}

/* Runs the script with argv[2..] (argv[0..1] are filled here) and reads
 * {granted, total, mine}. false (and degraded) on any failure. */
static bool run(td_shbudget *s, const char **argv, size_t argc, long long out[3])
{
    if (atomic_load(&s->degraded) && mono_ns() < atomic_load(&s->next_try_ns))
        return false;
    if (!s->rc && !connect_redis(s))
        return false;
    char buf[160];
    for (int attempt = 0; attempt < 2; attempt++) {
        argv[0] = "EVALSHA";
        argv[1] = s->sha;
        redisReply *r = redisCommandArgv(s->rc, (int)argc, argv, NULL);
        if (!r) {
            degrade(s, ctx_err(s->rc, buf, sizeof buf));
            return false;
        }
        if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0 && attempt == 0) {
            freeReplyObject(r);
            if (!load_script(s)) /* Redis restarted: its script cache is empty */
                return false;
            continue;
        }
        bool ok = r->type == REDIS_REPLY_ARRAY && r->elements == 3;
        for (size_t i = 0; ok && i < 3; i++) {
            ok = r->element[i]->type == REDIS_REPLY_INTEGER;
            if (ok)
                out[i] = r->element[i]->integer;
        }
        if (!ok)
            snprintf(buf, sizeof buf, "budget script: %s",
                     r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
        freeReplyObject(r);
        if (!ok) {
            /* OOM, BUSY, LOADING...: Redis cannot keep the budget for us */
            degrade(s, buf);
            return false;
        }
        atomic_fetch_add(&s->calls, 1);
        recovered(s);
        return true;
    }
    degrade(s, "NOSCRIPT after SCRIPT LOAD");
    return false;
}

/* ---- slots ---- */

static bslot *get_slot(td_shbudget *s, size_t i, const char *name)
{
    bslot *b = atomic_load_explicit(&s->slots[i], memory_order_acquire);
    if (b)
        return b;
    pthread_mutex_lock(&s->install_mu);
    b = atomic_load(&s->slots[i]);
    if (!b && (b = calloc(1, sizeof *b)) != NULL) {
        b->name = strdup(name);
        if (!b->name || pthread_mutex_init(&b->mu, NULL) != 0) {
            free(b->name);
            free(b);
            b = NULL;
        } else {
            for (int p = 0; p < TD_PERIOD_COUNT; p++)
                b->e[p].total_micro = -1;
            atomic_store_explicit(&s->slots[i], b, memory_order_release);
        }
    }
    pthread_mutex_unlock(&s->install_mu);
    return b;
}

static void set_dirty(td_shbudget *s, lease_entry *e, bool dirty)
{
    if (e->dirty != dirty)
        atomic_fetch_add(&s->ndirty, dirty ? 1 : -1);
    e->dirty = dirty;
}

/* Under b->mu: the slot's name (a slot is reused only by the same tenant or
 * key, but be safe) and the entry moved to the period of now_s. A lease of
 * an ended period is dropped: its hash expires with it. */
static lease_entry *entry_at(td_shbudget *s, bslot *b, const char *name, td_period p,
                             int64_t now_s)
{
    if (name && strcmp(name, b->name) != 0) {
        char *n = strdup(name);
        if (!n)
            return NULL;
        free(b->name);
        b->name = n;
        for (int q = 0; q < TD_PERIOD_COUNT; q++) {
            set_dirty(s, &b->e[q], false);
            b->e[q] = (lease_entry){.total_micro = -1};
        }
    }
    lease_entry *e = &b->e[p];
    int64_t start, end;
    td_period_bounds(p, now_s, &start, &end);
    if (e->start_s != start) {
        set_dirty(s, e, false);
        *e = (lease_entry){.start_s = start, .total_micro = -1};
    }
    return e;
}

static void redis_key(const td_shbudget *s, const bslot *b, td_period p, int64_t start, char *buf,
                      size_t len)
{
    snprintf(buf, len, "%s%s:%s:%lld", s->prefix, b->name, td_period_name(p), (long long)start);
}

/* One lease call for e (b->mu held): ask for cost (and a chunk) with the
 * claim of own spend + lease. true: e updated from Redis' answer. */
static bool lease_call(td_shbudget *s, bslot *b, size_t slot, td_period p, lease_entry *e,
                       int64_t limit, int64_t cost, int64_t chunk, bool force, int64_t now_s)
{
    int64_t own = td_budgets_spent(s->own, slot, p, now_s);
    td_budget_ask a;
    td_budget_lease_ask(own, e->lease, cost, chunk, &a);
    int64_t start, end;
    td_period_bounds(p, now_s, &start, &end);
    char key[NAME_MAX_LEN + 96], v[5][24], exp[24], cap[24] = "-1";
    redis_key(s, b, p, start, key, sizeof key);
    uint64_t back = atomic_load(&s->recovered_ns);
    if (back && mono_ns() - back < GRACE_NS)
        snprintf(cap, sizeof cap, "%lld",
                 (long long)(td_budget_fallback_limit(limit, s->replicas, 0) /
                             TD_LEASE_NANO_PER_MICRO));
    snprintf(v[0], sizeof v[0], "%lld", (long long)(limit / TD_LEASE_NANO_PER_MICRO));
    snprintf(v[1], sizeof v[1], "%lld", (long long)a.claimed);
    snprintf(v[2], sizeof v[2], "%lld", (long long)a.need);
    snprintf(v[3], sizeof v[3], "%lld", (long long)a.want);
    snprintf(v[4], sizeof v[4], "%d", force ? 1 : 0);
    snprintf(exp, sizeof exp, "%lld", (long long)(end + KEEP_AFTER_S));
    const char *argv[] = {NULL, NULL, "1", key, "lease", s->field, v[0], v[1], v[2], v[3], v[4],
                          exp, cap};
    long long out[3];
    pthread_mutex_lock(&s->conn_mu);
    bool ok = run(s, argv, sizeof argv / sizeof argv[0], out);
    pthread_mutex_unlock(&s->conn_mu);
    if (!ok)
        return false;
    e->lease = td_budget_lease_after(out[2], own);
    e->total_micro = out[1];
    if (chunk > 0)
        e->chunk = chunk;
    set_dirty(s, e, false);
    return true;
}

/* Gives amount_micro of e's lease back (b->mu held). */
static void give_back(td_shbudget *s, bslot *b, size_t slot, td_period p, lease_entry *e,
                      int64_t amount_micro)
{
    int64_t end = 0, st = 0;
    td_period_bounds(p, e->start_s, &st, &end);
    char key[NAME_MAX_LEN + 96], amt[24], exp[24];
    redis_key(s, b, p, e->start_s, key, sizeof key);
    snprintf(amt, sizeof amt, "%lld", (long long)amount_micro);
    snprintf(exp, sizeof exp, "%lld", (long long)(end + KEEP_AFTER_S));
    const char *argv[] = {NULL, NULL, "1", key, "give", s->field, amt, exp};
    long long out[3];
    pthread_mutex_lock(&s->conn_mu);
    bool ok = run(s, argv, sizeof argv / sizeof argv[0], out);
    pthread_mutex_unlock(&s->conn_mu);
    if (ok) {
        e->lease = td_budget_lease_after(out[2], td_budgets_spent(s->own, slot, p, e->start_s));
        e->total_micro = out[1];
    }
}

static bool redis_open(td_shbudget *s)
{
    return !atomic_load_explicit(&s->degraded, memory_order_relaxed) ||
           mono_ns() >= atomic_load_explicit(&s->next_try_ns, memory_order_relaxed);
}

/* Every PUSH_NS while some claim waits: reconnects (through the breaker)
 * and pushes each waiting claim, so a replica's spend during an outage
 * reaches Redis soon after it is back, traffic or not. */
static void *pusher_main(void *arg)
{
    td_shbudget *s = arg;
    pthread_mutex_lock(&s->stop_mu);
    while (!s->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += (long)PUSH_NS;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->stop_cv, &s->stop_mu, &ts);
        if (s->stop)
            break;
        pthread_mutex_unlock(&s->stop_mu);
        struct timespec wall;
        clock_gettime(CLOCK_REALTIME, &wall);
        for (size_t i = 0; i < s->nslots && atomic_load(&s->ndirty) > 0 && redis_open(s); i++) {
            bslot *b = atomic_load_explicit(&s->slots[i], memory_order_acquire);
            if (!b)
                continue;
            pthread_mutex_lock(&b->mu);
            for (int p = 0; p < TD_PERIOD_COUNT; p++) {
                lease_entry *e = entry_at(s, b, NULL, (td_period)p, wall.tv_sec);
                if (e && e->dirty)
                    lease_call(s, b, i, (td_period)p, e, 0, 0, 0, false, wall.tv_sec);
            }
            pthread_mutex_unlock(&b->mu);
        }
        pthread_mutex_lock(&s->stop_mu);
    }
    pthread_mutex_unlock(&s->stop_mu);
    return NULL;
}

/* ---- public API ---- */

static void free_all(td_shbudget *s)
{
    if (!s)
        return;
    for (size_t i = 0; s->slots && i < s->nslots; i++) {
        bslot *b = atomic_load(&s->slots[i]);
        if (b) {
            pthread_mutex_destroy(&b->mu);
            free(b->name);
            free(b);
        }
    }
    free((void *)s->slots);
    if (s->pusher_started) {
        pthread_cond_destroy(&s->stop_cv);
        pthread_mutex_destroy(&s->stop_mu);
    }
    if (s->rc)
        redisFree(s->rc);
    free(s->addr);
    free(s->host);
    free(s->prefix);
    free(s->field);
    free(s->label);
    free(s);
}

td_status td_shbudget_create(const td_shbudget_opts *o, td_budgets *own, size_t nslots,
                             td_shbudget **out, td_err *err)
{
    if (!o || !o->addr || !o->addr[0])
        return td_err_set(err, TD_EINVAL, "shared budgets: redis address missing");
    if (!o->replica || !o->replica[0])
        return td_err_set(err, TD_EINVAL, "shared budgets: replica name missing");
    if (!own || !nslots)
        return td_err_set(err, TD_EINVAL, "shared budgets: no slots");
    td_shbudget *s = calloc(1, sizeof *s);
    if (!s)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    td_status st = td_redis_addr_parse(o->addr, &s->host, &s->port, err);
    if (st != TD_OK) {
        free_all(s);
        return st;
    }
    size_t flen = strlen(o->replica) + 3;
    s->addr = strdup(o->addr);
    s->prefix = strdup(o->key_prefix ? o->key_prefix : "tenantd:budget:");
    s->label = strdup(o->label ? o->label : "tenant");
    s->field = malloc(flen);
    s->slots = calloc(nslots, sizeof *s->slots);
    if (!s->addr || !s->prefix || !s->label || !s->field || !s->slots) {
        free_all(s);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    snprintf(s->field, flen, "r:%s", o->replica); /* never "total" */
    s->nslots = nslots;
    s->own = own;
    s->replicas = o->replicas ? o->replicas : 1;
    s->timeout_ms = o->timeout_ms ? o->timeout_ms : 50;
    s->backoff_ns = BACKOFF_MIN_NS;
    atomic_init(&s->next_try_ns, 0);
    atomic_init(&s->degraded, false);
    atomic_init(&s->fallbacks, 0);
    atomic_init(&s->calls, 0);
    atomic_init(&s->recovered_ns, 0);
    atomic_init(&s->ndirty, 0);
    pthread_mutex_init(&s->install_mu, NULL);
    pthread_mutex_init(&s->conn_mu, NULL);
    pthread_condattr_t ca;
    bool ok = pthread_condattr_init(&ca) == 0;
    if (ok) {
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        ok = pthread_cond_init(&s->stop_cv, &ca) == 0;
        pthread_condattr_destroy(&ca);
    }
    if (ok && pthread_mutex_init(&s->stop_mu, NULL) != 0) {
        pthread_cond_destroy(&s->stop_cv);
        ok = false;
    }
    if (ok && pthread_create(&s->pusher, NULL, pusher_main, s) != 0) {
        pthread_cond_destroy(&s->stop_cv);
        pthread_mutex_destroy(&s->stop_mu);
        ok = false;
    }
    if (!ok) {
        pthread_mutex_destroy(&s->install_mu);
        pthread_mutex_destroy(&s->conn_mu);
        free_all(s);
        return td_err_set(err, TD_ENOMEM, "shared budgets: cannot start the pusher thread");
    }
    s->pusher_started = true;
    *out = s;
    return TD_OK;
}

void td_shbudget_destroy(td_shbudget *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->stop_mu);
    s->stop = true;
    pthread_cond_signal(&s->stop_cv);
    pthread_mutex_unlock(&s->stop_mu);
    pthread_join(s->pusher, NULL);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    for (size_t i = 0; i < s->nslots; i++) {
        bslot *b = atomic_load(&s->slots[i]);
        if (!b)
            continue;
        pthread_mutex_lock(&b->mu);
        for (int p = 0; p < TD_PERIOD_COUNT; p++) {
            lease_entry *e = &b->e[p];
            int64_t st, end;
            td_period_bounds((td_period)p, now.tv_sec, &st, &end);
            if (e->start_s != st || (e->total_micro < 0 && !e->dirty) || !redis_open(s))
                continue;
            /* push the claim (spend while Redis was away), then give back */
            if (lease_call(s, b, i, (td_period)p, e, 0, 0, 0, false, now.tv_sec) && e->lease > 0)
                give_back(s, b, i, (td_period)p, e, e->lease / TD_LEASE_NANO_PER_MICRO);
        }
        pthread_mutex_unlock(&b->mu);
    }
    pthread_mutex_destroy(&s->install_mu);
    pthread_mutex_destroy(&s->conn_mu);
    free_all(s);
}

td_status td_shbudget_reserve(td_shbudget *s, size_t slot, const char *name, td_period p,
                              int64_t limit_nano, int64_t cost_nano, bool force, int64_t now_s,
                              int64_t *period_start_s, int64_t *spent_nano, bool *leased)
{
    if (!s || slot >= s->nslots || !name || cost_nano < 0 || (unsigned)p >= TD_PERIOD_COUNT ||
        strlen(name) > NAME_MAX_LEN)
        return TD_EINVAL;
    *leased = false;
    bslot *b = get_slot(s, slot, name);
    if (!b)
        return TD_ENOMEM;
    pthread_mutex_lock(&b->mu);
    lease_entry *e = entry_at(s, b, name, p, now_s);
    if (!e) {
        pthread_mutex_unlock(&b->mu);
        return TD_ENOMEM;
    }
    td_status st;
    if (redis_open(s)) {
        bool answered = true, asked = false;
        if (e->dirty || e->total_micro < 0 || e->lease < cost_nano) {
            uint64_t now = mono_ns();
            bool known_no = !force && !e->dirty && e->refused_ns &&
                            now - e->refused_ns < REFUSED_NS && e->refused_limit == limit_nano &&
                            cost_nano - e->lease >= e->refused_need;
            if (!known_no) {
                answered = lease_call(s, b, slot, p, e, limit_nano, cost_nano,
                                      td_budget_chunk(limit_nano, cost_nano), force, now_s);
                asked = true;
                e->refused_ns = 0;
            }
        }
        if (answered) {
            if (spent_nano)
                *spent_nano = td_budget_shared_spent(e->total_micro, e->lease);
            if (e->lease >= cost_nano || force) {
                e->lease -= cost_nano;
                /* own spend, for the fallback and for the next claim */
                td_budgets_reserve(s->own, slot, p, 0, cost_nano, true, now_s, period_start_s,
                                   NULL);
                *leased = true;
                st = TD_OK;
            } else {
                *period_start_s = e->start_s;
                if (asked) { /* Redis itself said no just now */
                    e->refused_ns = mono_ns();
                    e->refused_need = cost_nano - e->lease;
                    e->refused_limit = limit_nano;
                }
                st = TD_EQUOTA;
            }
            pthread_mutex_unlock(&b->mu);
            return st;
        }
    }
    /* Redis away: this replica's share of the budget, on its own spend;
     * the lease it holds is claimed already and counts against the share
     * (it can still be spent once Redis is back). */
    atomic_fetch_add_explicit(&s->fallbacks, 1, memory_order_relaxed);
    int64_t share = td_budget_fallback_limit(limit_nano, s->replicas, e->lease);
    st = td_budgets_reserve(s->own, slot, p, share, cost_nano, force, now_s, period_start_s,
                            spent_nano);
    if (st == TD_OK)
        set_dirty(s, e, true);
    pthread_mutex_unlock(&b->mu);
    return st;
}

void td_shbudget_settle(td_shbudget *s, size_t slot, td_period p, int64_t period_start_s,
                        int64_t delta_nano, bool leased)
{
    if (!s || slot >= s->nslots || (unsigned)p >= TD_PERIOD_COUNT)
        return;
    bslot *b = atomic_load_explicit(&s->slots[slot], memory_order_acquire);
    if (!b) {
        td_budgets_settle(s->own, slot, p, period_start_s, delta_nano);
        return;
    }
    /* own spend and lease move together under the slot's lock: a lease
     * call reads own and sets lease = mine - own */
    pthread_mutex_lock(&b->mu);
    td_budgets_settle(s->own, slot, p, period_start_s, delta_nano);
    lease_entry *e = &b->e[p];
    if (e->start_s == period_start_s) {
        if (leased)
            e->lease = td_budget_lease_settle(e->lease, 0, delta_nano);
        else if (delta_nano != 0)
            set_dirty(s, e, true); /* the claim changed while Redis was away */
        int64_t x = td_budget_lease_excess(e->lease, e->chunk);
        if (x > 0 && redis_open(s))
            give_back(s, b, slot, p, e, x);
    }
    pthread_mutex_unlock(&b->mu);
}

int64_t td_shbudget_spent(td_shbudget *s, size_t slot, const char *name, td_period p,
                          int64_t now_s, bool refresh)
{
    if (!s || slot >= s->nslots || (unsigned)p >= TD_PERIOD_COUNT)
        return 0;
    int64_t own = td_budgets_spent(s->own, slot, p, now_s);
    bslot *b = atomic_load_explicit(&s->slots[slot], memory_order_acquire);
    if (!b && refresh && name && strlen(name) <= NAME_MAX_LEN)
        b = get_slot(s, slot, name);
    if (!b)
        return own;
    int64_t v = own;
    pthread_mutex_lock(&b->mu);
    lease_entry *e = entry_at(s, b, name, p, now_s);
    if (e && refresh && redis_open(s))
        lease_call(s, b, slot, p, e, 0, 0, 0, false, now_s);
    if (e && e->total_micro >= 0 && !atomic_load(&s->degraded))
        v = td_budget_shared_spent(e->total_micro, e->lease);
    pthread_mutex_unlock(&b->mu);
    return v;
}

bool td_shbudget_degraded(const td_shbudget *s)
{
    return s && atomic_load(&((td_shbudget *)s)->degraded);
}

uint64_t td_shbudget_fallbacks(const td_shbudget *s)
{
    return s ? atomic_load(&((td_shbudget *)s)->fallbacks) : 0;
}

uint64_t td_shbudget_calls(const td_shbudget *s)
{
    return s ? atomic_load(&((td_shbudget *)s)->calls) : 0;
}

/* ---- as the gateway's budget backend (gateway/backends.h) ---- */

static td_status be_reserve(void *ctx, size_t slot, const char *name, td_period p,
                            int64_t limit_nano, int64_t cost_nano, bool force, int64_t now_s,
                            int64_t *period_start_s, int64_t *spent_nano, bool *leased)
{
    return td_shbudget_reserve(ctx, slot, name, p, limit_nano, cost_nano, force, now_s,
                               period_start_s, spent_nano, leased);
}

static void be_settle(void *ctx, size_t slot, td_period p, int64_t period_start_s,
                      int64_t delta_nano, bool leased)
{
    td_shbudget_settle(ctx, slot, p, period_start_s, delta_nano, leased);
}

static int64_t be_spent(void *ctx, size_t slot, const char *name, td_period p, int64_t now_s,
                        bool refresh)
{
    return td_shbudget_spent(ctx, slot, name, p, now_s, refresh);
}

static bool be_degraded(const void *ctx)
{
    return td_shbudget_degraded(ctx);
}

static uint64_t be_fallbacks(const void *ctx)
{
    return td_shbudget_fallbacks(ctx);
}

static uint64_t be_calls(const void *ctx)
{
    return td_shbudget_calls(ctx);
}

static void be_destroy(void *ctx)
{
    td_shbudget_destroy(ctx);
}

void td_shbudget_backend(td_shbudget *s, td_gw_budget_backend *out)
{
    *out = (td_gw_budget_backend){s,           be_reserve,   be_settle, be_spent,
                                  be_degraded, be_fallbacks, be_calls,  be_destroy};
}

td_status td_redis_backends_create(const char *addr, uint32_t replicas, const char *replica,
                                   td_budgets *tenant_own, size_t ntenants, td_budgets *key_own,
                                   size_t nkeys, td_gw_backends *out, td_err *err)
{
    td_shared *rt = NULL, *rk = NULL;
    td_shbudget *bt = NULL, *bk = NULL;
    td_shared_opts so = {addr, replicas ? replicas : 1, 0, 0, NULL};
    td_status st = td_shared_create(&so, ntenants, &rt, err);
    /* keys in Redis as "tenant/key": a tenant name has no '/' */
    if (st == TD_OK)
        st = td_shared_create(&so, nkeys, &rk, err);
    td_shbudget_opts bo = {addr, so.replicas, 0, NULL, replica, "tenant"};
    if (st == TD_OK)
        st = td_shbudget_create(&bo, tenant_own, ntenants, &bt, err);
    bo.label = "key";
    if (st == TD_OK)
        st = td_shbudget_create(&bo, key_own, nkeys, &bk, err);
    if (st != TD_OK) {
        td_shared_destroy(rt);
        td_shared_destroy(rk);
        td_shbudget_destroy(bt);
        td_shbudget_destroy(bk);
        return st;
    }
    td_shared_backend(rt, &out->tenant_rate);
    td_shared_backend(rk, &out->key_rate);
    td_shbudget_backend(bt, &out->tenant_budget);
    td_shbudget_backend(bk, &out->key_budget);
    return TD_OK;
}
