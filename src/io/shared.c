/* shared.c - one global limit per tenant across tenantd replicas, through
 * Redis, without a Redis round trip per request. Redis keeps a token bucket
 * per tenant; each replica leases budget from it in chunks and spends the
 * lease locally (one compare-and-swap per decision); a background thread
 * tops leases up. If Redis fails, each replica limits at rate/replicas.
 *
 * Redis side. Key PREFIX..tenant is a hash {tokens, ts} (milli-units, and
 * Redis' own TIME in microseconds, so replicas' clocks never matter). Only
 * the Lua script below touches it: refill at rate up to burst, grant
 * min(want, tokens) if at least `need` is there, else grant 0 and say in how
 * many ms `need` will be there. The key expires after twice the time to
 * refill a full burst, so idle tenants vanish (an expired key is a full
 * bucket, which is what it would have refilled to anyway).
 *
 * Replica side. Per slot: an atomic lease balance in milli-units and the
 * largest cost refused since the last grant. A take subtracts from the lease
 * or fails with TD_EAGAIN and flags the slot; it never waits for Redis. The
 * refill thread, woken by a take that flags a slot or crosses the low
 * watermark (half a chunk), and otherwise every 10 ms, asks Redis for
 * chunk - balance (chunk = chunk_fraction x burst, or the refused cost if
 * larger), pipelining up to 64 slots per round trip. A slot's very first
 * take, before Redis has ever answered for it, is admitted on credit (the
 * lease goes negative), so a tenant's first request is never refused only
 * because this replica has not leased yet; the credit is paid back from the
 * next grant.
 *
 * Over-admission bound. Let B be the burst, R the rate, N the replicas and
 * C the chunk (chunk_fraction x B, or the largest single cost if larger).
 * (1) The Redis bucket is a token bucket: over any window [t0, t1] it grants
 *     at most what it held at t0 (<= B) plus R (t1 - t0).
 * (2) A replica admits only out of granted lease, and a refill asks for
 *     C - balance, so after any grant a replica holds at most C; takes only
 *     lower it. Lease held at t0 was taken from the bucket before t0.
 * (3) So over [t0, t1] the N replicas admit at most
 *         B + R (t1 - t0) + N x C        (+ N x one cost of first-take credit)
 *     i.e. at most N x C beyond the global bucket. If the limit is lowered at
 *     t0, each replica still spends the lease it holds (<= its old C) under
 *     the old limit: add that unspent lease per replica.
 * Reconciliation (td_shared_adjust) charges or refunds what was admitted
 * earlier; refunds can lift a lease above C but only by what that replica
 * was charged before, so net charged cost obeys the same bound.
 *
 * Failure is handled open on purpose (docs/replicas.md, what each outage
 * does): when a Redis call fails, times out (timeout_ms, default 50) or
 * returns an error, the replica is degraded: it logs one line, decides with
 * a local td_limiter at rate/N and burst/N, and reconnects with backoff
 * (25 ms doubling to 250 ms) until Redis answers again, then logs one line
 * and goes back to leases. While all replicas are degraded they admit at
 * most B + R (t1 - t0) together; the Redis bucket refills to B meanwhile, so
 * across an outage the excess is at most one extra B (+ N x C). A replica
 * that alone loses Redis adds at most B/N + R/N (t1 - t0). An idle replica
 * PINGs every 100 ms so it notices an outage before it needs a lease. */
#include "io/shared.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <hiredis/hiredis.h>

#define TENANT_MAX     255
#define POLL_NS        (10ull * 1000 * 1000)  /* the refill thread's period */
#define PING_NS        (100ull * 1000 * 1000) /* health check when idle */
#define BACKOFF_MIN_NS (25ull * 1000 * 1000)
#define BACKOFF_MAX_NS (250ull * 1000 * 1000)
#define RETRY_MIN_NS   (1000ull * 1000) /* retry-after while a refill is pending */
#define BATCH          64               /* slots per pipelined round trip */
#define MILLI          1000.0
#define COST_MAX       1e12 /* keeps milli-units far from int64 overflow */

/* KEYS[1] bucket; ARGV: rate (milli-units per microsecond), burst, want,
 * need (milli-units), ttl (ms). Returns {granted milli-units, wait ms}. */
static const char script[] =
    "local rate = tonumber(ARGV[1])\n"
    "local burst = tonumber(ARGV[2])\n"
    "local want = tonumber(ARGV[3])\n"
    "local need = tonumber(ARGV[4])\n"
    "local ttl = tonumber(ARGV[5])\n"
    "if redis.replicate_commands then pcall(redis.replicate_commands) end\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
    "local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')\n"
    "local tokens = tonumber(b[1])\n"
    "local ts = tonumber(b[2])\n"
    "if tokens == nil or ts == nil then\n"
    "  tokens = burst\n"
    "elseif now > ts then\n"
    "  tokens = tokens + (now - ts) * rate\n"
    "end\n"
    "if tokens > burst then tokens = burst end\n"
    "if need > burst then need = burst end\n"
    "if need < 1 then need = 1 end\n"
    "local grant = 0\n"
    "local wait = 0\n"
    "if tokens >= need then\n"
    "  grant = math.floor(math.min(want, tokens))\n"
    "  tokens = tokens - grant\n"
    "else\n"
    "  wait = math.ceil((need - tokens) / rate / 1000)\n"
    "  if wait < 1 then wait = 1 end\n"
    "end\n"
    "redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))\n"
    "redis.call('PEXPIRE', KEYS[1], ttl)\n"
    "return {grant, wait}\n";

/* What a slot limits: the tenant's name (the Redis key) and its rate.
 * Immutable once published; replaced ones stay allocated until destroy
 * because takers and the refill thread may still be reading them. */
typedef struct ident {
    struct ident *retired_next;
    td_rate rate;
    char name[];
} ident;

typedef struct {
    _Alignas(64) _Atomic int64_t lease; /* milli-units; negative is debt */
    _Atomic int64_t refused;            /* largest cost refused since the last grant */
    _Atomic(ident *) id;
    _Atomic uint64_t wait_ns;  /* Redis' wait from its last refusal, 0 after a grant */
    _Atomic uint64_t last_now; /* the caller's clock, for degraded adjusts */
    _Atomic bool credit;       /* first take may go into debt */
    /* owned by the refill thread */
    ident *seen;
    uint64_t next_try_ns;
} slot;

struct td_shared {
    char *addr; /* as given, for log lines */
    char *host;
    int port;
    char *prefix;
    size_t prefix_len;
    uint32_t replicas;
    double chunk_fraction;
    uint32_t timeout_ms;

    size_t nslots;
    slot *slots;
    td_limiter *local;

    _Atomic bool degraded;
    _Atomic bool kick;
    _Atomic bool stop;
    pthread_mutex_t mu; /* guards only the condition wait */
    pthread_cond_t cv;
    pthread_t thread;

    pthread_mutex_t learn_mu; /* a slot learning a new tenant or rate */
    ident *retired;

    /* owned by the refill thread */
    redisContext *rc;
    char sha[41];
    uint64_t next_connect_ns;
    uint64_t backoff_ns;
    uint64_t last_ok_ns;
    char *keybuf;
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int64_t to_milli(double v)
{
    return (int64_t)llround(v * MILLI);
}

static int64_t chunk_milli(const td_shared *s, const td_rate *r)
{
    int64_t c = to_milli(s->chunk_fraction * r->burst);
    return c < 1 ? 1 : c;
}

static void wake(td_shared *s)
{
    /* Only the first kick since the thread last looked signals: takes stay
     * syscall-free. A signal that races the thread's check is lost, which
     * costs at most one POLL_NS. */
    if (!atomic_exchange_explicit(&s->kick, true, memory_order_acq_rel))
        pthread_cond_signal(&s->cv);
}

/* ---- the refill thread ---- */

/* Drops the connection and falls back to the local limiter. why may point
 * into the connection's error text: it is formatted before the free. */
static void enter_degraded(td_shared *s, const char *why)
{
    char line[512];
    snprintf(line, sizeof line, "tenantd: redis %s unreachable (%s); limiting locally at rate/%u\n",
             s->addr, why, s->replicas);
    if (s->rc) {
        redisFree(s->rc);
        s->rc = NULL;
    }
    s->next_connect_ns = mono_ns() + s->backoff_ns;
    s->backoff_ns = s->backoff_ns * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : s->backoff_ns * 2;
    if (!atomic_exchange(&s->degraded, true))
        fputs(line, stderr); /* one line per outage, not one per failed attempt */
}

static void leave_degraded(td_shared *s)
{
    s->backoff_ns = BACKOFF_MIN_NS;
    s->last_ok_ns = mono_ns();
    if (atomic_exchange(&s->degraded, false)) {
        char line[512];
        snprintf(line, sizeof line, "tenantd: redis %s reachable again\n", s->addr);
        fputs(line, stderr);
    }
}

static const char *ctx_err(redisContext *c)
{
    if (!c)
        return "out of memory";
    /* hiredis reports a socket timeout as EAGAIN's strerror text. */
    if (c->err == REDIS_ERR_IO && strcmp(c->errstr, strerror(EAGAIN)) == 0)
        return "timed out";
    return c->errstr[0] ? c->errstr : "connection error";
}

static void try_connect(td_shared *s)
{
    struct timeval tv = {.tv_sec = s->timeout_ms / 1000,
                         .tv_usec = (suseconds_t)(s->timeout_ms % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout(s->host, s->port, tv);
    if (!c || c->err) {
        char why[160];
        snprintf(why, sizeof why, "%s", ctx_err(c));
        if (c)
            redisFree(c);
        enter_degraded(s, why);
        return;
    }
    s->rc = c;
    if (redisSetTimeout(c, tv) != REDIS_OK) {
        enter_degraded(s, "cannot set socket timeout");
        return;
    }
    /* SCRIPT LOAD doubles as the health check: a stopped or loading Redis
     * accepts the TCP connection but fails here. */
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", script);
    if (!r) {
        enter_degraded(s, ctx_err(c));
        return;
    }
    if (r->type != REDIS_REPLY_STRING || r->len != 40) {
        char why[160];
        snprintf(why, sizeof why, "SCRIPT LOAD: %s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
        freeReplyObject(r);
        enter_degraded(s, why);
        return;
    }
    memcpy(s->sha, r->str, 40);
    s->sha[40] = '\0';
    freeReplyObject(r);
    leave_degraded(s);
}

typedef struct {
    size_t slot;
    ident *id;
    int64_t want, need;
} ask;

static void ask_args(td_shared *s, const ask *a, char bufs[5][32], const char *argv[9],
                     size_t lens[9], bool with_sha)
{
    const td_rate *r = &a->id->rate;
    size_t n = strlen(a->id->name);
    memcpy(s->keybuf + s->prefix_len, a->id->name, n);
    double ttl = ceil(2.0 * r->burst / r->cost * (double)r->per_ns / 1e6);
    if (ttl < 1000)
        ttl = 1000;
    if (ttl > 30.0 * 86400 * 1000)
        ttl = 30.0 * 86400 * 1000;
    snprintf(bufs[0], 32, "%.17g", r->cost * MILLI / ((double)r->per_ns / 1000.0));
    snprintf(bufs[1], 32, "%lld", (long long)to_milli(r->burst));
    snprintf(bufs[2], 32, "%lld", (long long)a->want);
    snprintf(bufs[3], 32, "%lld", (long long)a->need);
    snprintf(bufs[4], 32, "%.0f", ttl);
    argv[0] = with_sha ? "EVALSHA" : "EVAL";
    argv[1] = with_sha ? s->sha : script;
    argv[2] = "1";
    argv[3] = s->keybuf;
    lens[3] = s->prefix_len + n;
    for (int i = 0; i < 5; i++)
        argv[4 + i] = bufs[i];
    for (int i = 0; i < 9; i++)
        if (i != 3)
            lens[i] = strlen(argv[i]);
}

static bool append_ask(td_shared *s, const ask *a, bool with_sha)
{
    char bufs[5][32];
    const char *argv[9];
    size_t lens[9];
    ask_args(s, a, bufs, argv, lens, with_sha);
    return redisAppendCommandArgv(s->rc, 9, argv, lens) == REDIS_OK;
}

static void apply(td_shared *s, const ask *a, long long grant, long long wait_ms, uint64_t now)
{
    slot *sl = &s->slots[a->slot];
    if (atomic_load(&sl->id) != a->id)
        return; /* the slot changed tenant meanwhile; this budget is lost (under-admission) */
    atomic_store(&sl->credit, false);
    if (grant > 0) {
        atomic_fetch_add(&sl->lease, (int64_t)grant);
        atomic_store(&sl->refused, 0);
        atomic_store(&sl->wait_ns, 0);
        sl->next_try_ns = 0;
    } else {
        uint64_t w = (uint64_t)(wait_ms > 0 ? wait_ms : 1) * 1000000ull;
        atomic_store(&sl->wait_ns, w);
        sl->next_try_ns = now + w;
    }
}

static bool is_noscript(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/* Reads a script reply into grant/wait. false and *why set on an error
 * reply or a malformed one. */
static bool parse_answer(const redisReply *r, long long *grant, long long *wait_ms, char *why,
                         size_t n)
{
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(why, n, "%s", r->str);
        return false;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER) {
        snprintf(why, n, "unexpected reply to the lease script");
        return false;
    }
    *grant = r->element[0]->integer;
    *wait_ms = r->element[1]->integer;
    return true;
}

/* Sends the asks as one pipeline and applies the answers. Asks that met a
 * flushed script cache are retried with EVAL. false if the connection is
 * gone (degraded already entered). */
static bool flush_asks(td_shared *s, ask *asks, size_t n)
{
    bool retry[BATCH] = {false};
    bool any_retry = false;
    char why[256] = "";
    for (size_t i = 0; i < n; i++) {
        if (!append_ask(s, &asks[i], true)) {
            enter_degraded(s, ctx_err(s->rc));
            return false;
        }
    }
    for (size_t i = 0; i < n; i++) {
        void *p = NULL;
        if (redisGetReply(s->rc, &p) != REDIS_OK || !p) {
            enter_degraded(s, ctx_err(s->rc));
            return false;
        }
        redisReply *r = p;
        long long grant, wait_ms;
        if (is_noscript(r)) {
            retry[i] = any_retry = true;
        } else if (parse_answer(r, &grant, &wait_ms, why, sizeof why)) {
            apply(s, &asks[i], grant, wait_ms, mono_ns());
        }
        freeReplyObject(r);
    }
    if (why[0]) {
        /* An error reply (OOM, BUSY, LOADING, WRONGTYPE...) means Redis
         * cannot keep the limit for us: fall back, on purpose. */
        enter_degraded(s, why);
        return false;
    }
    for (size_t i = 0; any_retry && i < n; i++) {
        if (!retry[i])
            continue;
        char bufs[5][32];
        const char *argv[9];
        size_t lens[9];
        ask_args(s, &asks[i], bufs, argv, lens, false);
        redisReply *r = redisCommandArgv(s->rc, 9, argv, lens);
        if (!r) {
            enter_degraded(s, ctx_err(s->rc));
            return false;
        }
        long long grant, wait_ms;
        bool ok = parse_answer(r, &grant, &wait_ms, why, sizeof why);
        freeReplyObject(r);
        if (!ok) {
            enter_degraded(s, why);
            return false;
        }
        apply(s, &asks[i], grant, wait_ms, mono_ns());
    }
    s->last_ok_ns = mono_ns();
    return true;
}

static void refill_pass(td_shared *s)
{
    ask asks[BATCH];
    size_t n = 0;
    uint64_t now = mono_ns();
    for (size_t i = 0; i < s->nslots && s->rc; i++) {
        slot *sl = &s->slots[i];
        ident *id = atomic_load_explicit(&sl->id, memory_order_acquire);
        if (!id || id->rate.cost <= 0)
            continue;
        if (id != sl->seen) {
            sl->seen = id;
            sl->next_try_ns = 0;
        }
        if (now < sl->next_try_ns)
            continue;
        int64_t chunk = chunk_milli(s, &id->rate);
        int64_t bal = atomic_load(&sl->lease);
        int64_t ref = atomic_load(&sl->refused);
        if (ref == 0 && bal >= chunk / 2)
            continue;
        int64_t target = ref > chunk ? ref : chunk;
        int64_t want = target - bal;
        if (want <= 0)
            continue;
        /* Don't ask for crumbs: wait until a useful amount (what was refused,
         * or a quarter chunk) is there, so a tenant at its limit costs a few
         * Redis calls per chunk, not one per request. */
        int64_t need = ref > 0 ? ref - bal : 0;
        if (need < chunk / 4)
            need = chunk / 4;
        if (need > want)
            need = want;
        asks[n++] = (ask){.slot = i, .id = id, .want = want, .need = need};
        if (n == BATCH) {
            if (!flush_asks(s, asks, n))
                return;
            n = 0;
        }
    }
    if (n && s->rc)
        flush_asks(s, asks, n);
}

static void health_check(td_shared *s)
{
    redisReply *r = redisCommand(s->rc, "PING");
    if (!r) {
        enter_degraded(s, ctx_err(s->rc));
        return;
    }
    bool ok = r->type == REDIS_REPLY_STATUS;
    char why[160];
    snprintf(why, sizeof why, "PING: %s", r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
    freeReplyObject(r);
    if (!ok)
        enter_degraded(s, why);
    else
        s->last_ok_ns = mono_ns();
}

static void *refill_main(void *arg)
{
    td_shared *s = arg;
    while (!atomic_load(&s->stop)) {
        uint64_t now = mono_ns();
        if (!s->rc && now >= s->next_connect_ns)
            try_connect(s);
        if (s->rc)
            refill_pass(s);
        if (s->rc && mono_ns() - s->last_ok_ns >= PING_NS)
            health_check(s);

        pthread_mutex_lock(&s->mu);
        if (!atomic_exchange(&s->kick, false) && !atomic_load(&s->stop)) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += (long)POLL_NS;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&s->cv, &s->mu, &ts);
            atomic_store(&s->kick, false);
        }
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}

/* ---- public API ---- */

td_status td_redis_addr_parse(const char *addr, char **host, int *port, td_err *err)
{
    const char *colon = strrchr(addr, ':');
    const char *h = addr;
    size_t hlen = colon ? (size_t)(colon - addr) : strlen(addr);
    if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    }
    long p = 6379;
    if (colon) {
        char *end;
        errno = 0;
        p = strtol(colon + 1, &end, 10);
        if (errno || end == colon + 1 || *end || p < 1 || p > 65535)
            return td_err_set(err, TD_EINVAL, "redis address \"%s\": bad port", addr);
    }
    if (hlen == 0)
        return td_err_set(err, TD_EINVAL, "redis address \"%s\": missing host", addr);
    char *copy = malloc(hlen + 1);
    if (!copy)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    memcpy(copy, h, hlen);
    copy[hlen] = '\0';
    *host = copy;
    *port = (int)p;
    return TD_OK;
}

static void free_shared(td_shared *s)
{
    if (!s)
        return;
    if (s->slots) {
        for (size_t i = 0; i < s->nslots; i++)
            free(atomic_load(&s->slots[i].id));
        free(s->slots);
    }
    for (ident *r = s->retired, *next; r; r = next) {
        next = r->retired_next;
        free(r);
    }
    td_limiter_destroy(s->local);
    free(s->addr);
    free(s->host);
    free(s->prefix);
    free(s->keybuf);
    free(s);
}

td_status td_shared_create(const td_shared_opts *o, size_t nslots, td_shared **out, td_err *err)
{
    if (!o || !out || !o->addr || !o->addr[0])
        return td_err_set(err, TD_EINVAL, "shared limits: redis address missing");
    if (o->replicas < 1)
        return td_err_set(err, TD_EINVAL, "shared limits: replicas must be >= 1");
    double frac = o->chunk_fraction == 0 ? 0.05 : o->chunk_fraction;
    if (!(frac > 0 && frac <= 1))
        return td_err_set(err, TD_EINVAL, "shared limits: chunk fraction %g not in (0, 1]",
                          o->chunk_fraction);
    if (nslots == 0)
        return td_err_set(err, TD_EINVAL, "shared limits: no slots");
    if (nslots > SIZE_MAX / sizeof(slot))
        return td_err_set(err, TD_ENOMEM, "out of memory");

    td_shared *s = calloc(1, sizeof *s);
    if (!s)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    td_status st = td_redis_addr_parse(o->addr, &s->host, &s->port, err);
    if (st != TD_OK) {
        free_shared(s);
        return st;
    }
    const char *prefix = o->key_prefix ? o->key_prefix : "tenantd:";
    s->prefix_len = strlen(prefix);
    s->addr = strdup(o->addr);
    s->prefix = strdup(prefix);
    s->keybuf = malloc(s->prefix_len + TENANT_MAX + 1);
    s->slots = aligned_alloc(_Alignof(slot), nslots * sizeof(slot));
    if (!s->addr || !s->prefix || !s->keybuf || !s->slots ||
        td_limiter_create(nslots, &s->local) != TD_OK) {
        free_shared(s);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    memcpy(s->keybuf, prefix, s->prefix_len);
    s->nslots = nslots;
    for (size_t i = 0; i < nslots; i++) {
        slot *sl = &s->slots[i];
        memset(sl, 0, sizeof *sl);
        atomic_init(&sl->lease, 0);
        atomic_init(&sl->refused, 0);
        atomic_init(&sl->id, NULL);
        atomic_init(&sl->wait_ns, 0);
        atomic_init(&sl->last_now, 0);
        atomic_init(&sl->credit, false);
    }
    s->replicas = o->replicas;
    s->chunk_fraction = frac;
    s->timeout_ms = o->timeout_ms ? o->timeout_ms : 50;
    s->backoff_ns = BACKOFF_MIN_NS;
    atomic_init(&s->degraded, false);
    atomic_init(&s->kick, false);
    atomic_init(&s->stop, false);

    pthread_condattr_t ca;
    bool cv_ok = false, mu_ok = false, learn_ok = false;
    if (pthread_condattr_init(&ca) == 0) {
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        cv_ok = pthread_cond_init(&s->cv, &ca) == 0;
        pthread_condattr_destroy(&ca);
    }
    mu_ok = pthread_mutex_init(&s->mu, NULL) == 0;
    learn_ok = pthread_mutex_init(&s->learn_mu, NULL) == 0;
    if (!cv_ok || !mu_ok || !learn_ok || pthread_create(&s->thread, NULL, refill_main, s) != 0) {
        if (cv_ok)
            pthread_cond_destroy(&s->cv);
        if (mu_ok)
            pthread_mutex_destroy(&s->mu);
        if (learn_ok)
            pthread_mutex_destroy(&s->learn_mu);
        free_shared(s);
        return td_err_set(err, TD_ENOMEM, "shared limits: cannot start the refill thread");
    }
    *out = s;
    return TD_OK;
}

void td_shared_destroy(td_shared *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->stop, true);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    if (s->rc)
        redisFree(s->rc);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->learn_mu);
    free_shared(s);
}

static bool same_ident(const ident *id, const char *tenant, const td_rate *r)
{
    return id && id->rate.cost == r->cost && id->rate.per_ns == r->per_ns &&
           id->rate.burst == r->burst && strcmp(id->name, tenant) == 0;
}

/* Publishes (tenant, r) for sl. A new tenant starts with an empty lease, a
 * first-take credit and a fresh local limiter; a new rate for the same
 * tenant keeps its lease. */
static td_status learn(td_shared *s, size_t i, const char *tenant, size_t len, const td_rate *r)
{
    slot *sl = &s->slots[i];
    td_status st = TD_OK;
    pthread_mutex_lock(&s->learn_mu);
    ident *old = atomic_load(&sl->id);
    if (!same_ident(old, tenant, r)) {
        ident *id = malloc(sizeof *id + len + 1);
        if (!id) {
            st = TD_ENOMEM;
        } else {
            id->retired_next = NULL;
            id->rate = *r;
            memcpy(id->name, tenant, len + 1);
            if (!old || strcmp(old->name, tenant) != 0) {
                atomic_store(&sl->lease, 0);
                atomic_store(&sl->refused, 0);
                atomic_store(&sl->wait_ns, 0);
                atomic_store(&sl->credit, true);
                td_limiter_reset(s->local, i);
            }
            atomic_store_explicit(&sl->id, id, memory_order_release);
            if (old) {
                old->retired_next = s->retired;
                s->retired = old;
            }
        }
    }
    pthread_mutex_unlock(&s->learn_mu);
    return st;
}

/* Takes cost from slot's lease: TD_OK, or TD_EAGAIN with *retry_after_ns
 * and nothing charged. TD_EINVAL for a slot out of range, a tenant name
 * missing or longer than 255 bytes, a negative or huge cost, or a rate with
 * cost > 0 and no period or burst; TD_ENOMEM if a new tenant or rate could
 * not be recorded (nothing charged). A rate with cost <= 0 is unlimited.
 * Never waits for Redis; takes a mutex only when the slot's tenant or rate
 * changes. */
td_status td_shared_take(td_shared *s, size_t slot_no, const char *tenant, const td_rate *r,
                         double cost, uint64_t now_ns, uint64_t *retry_after_ns)
{
    if (!s || slot_no >= s->nslots || !tenant || !r || !(cost >= 0) || cost > COST_MAX)
        return TD_EINVAL;
    if (r->cost <= 0)
        return TD_OK;
    if (r->per_ns == 0 || !(r->burst > 0) || r->cost > COST_MAX || r->burst > COST_MAX)
        return TD_EINVAL;
    slot *sl = &s->slots[slot_no];
    ident *id = atomic_load_explicit(&sl->id, memory_order_acquire);
    if (!same_ident(id, tenant, r)) {
        size_t len = strnlen(tenant, TENANT_MAX + 1);
        if (len > TENANT_MAX)
            return TD_EINVAL;
        td_status st = learn(s, slot_no, tenant, len, r);
        if (st != TD_OK)
            return st;
        wake(s);
    }

    if (atomic_load_explicit(&s->degraded, memory_order_relaxed)) {
        td_rate share = {r->cost / s->replicas, r->per_ns, r->burst / s->replicas};
        atomic_store_explicit(&sl->last_now, now_ns, memory_order_relaxed);
        return td_limiter_take(s->local, slot_no, &share, cost, now_ns, retry_after_ns);
    }

    int64_t c = to_milli(cost);
    int64_t low = chunk_milli(s, r) / 2;
    int64_t bal = atomic_load_explicit(&sl->lease, memory_order_relaxed);
    while (bal >= c) {
        if (atomic_compare_exchange_weak_explicit(&sl->lease, &bal, bal - c, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            if (bal >= low && bal - c < low)
                wake(s);
            return TD_OK;
        }
    }
    if (atomic_load_explicit(&sl->credit, memory_order_relaxed) &&
        atomic_exchange(&sl->credit, false)) {
        atomic_fetch_sub(&sl->lease, c);
        wake(s);
        return TD_OK;
    }

    int64_t ref = atomic_load_explicit(&sl->refused, memory_order_relaxed);
    bool first = ref == 0;
    while (c > ref && !atomic_compare_exchange_weak(&sl->refused, &ref, c))
        ;
    if (first)
        wake(s);
    if (retry_after_ns) {
        uint64_t w = atomic_load_explicit(&sl->wait_ns, memory_order_relaxed);
        if (w == 0) {
            /* A refill is on its way: the soonest the global rate could
             * have produced the missing budget. */
            double deficit = (double)(c - bal) / MILLI;
            double est = deficit * (double)r->per_ns / r->cost;
            w = est > (double)RETRY_MIN_NS ? (uint64_t)est : RETRY_MIN_NS;
        }
        *retry_after_ns = w;
    }
    return TD_EAGAIN;
}

/* Reconciles an earlier take on slot: delta > 0 spends more from the lease
 * (it may go negative, which refuses later takes until a refill pays the
 * debt), delta < 0 gives budget back. While degraded, the local limiter is
 * adjusted instead, at the slot's rate/replicas. A slot never taken from, or
 * out of range, is ignored. */
void td_shared_adjust(td_shared *s, size_t slot_no, double delta)
{
    if (!s || slot_no >= s->nslots || !isfinite(delta) || fabs(delta) > COST_MAX)
        return;
    slot *sl = &s->slots[slot_no];
    ident *id = atomic_load_explicit(&sl->id, memory_order_acquire);
    if (!id)
        return;
    if (atomic_load_explicit(&s->degraded, memory_order_relaxed)) {
        const td_rate *r = &id->rate;
        td_rate share = {r->cost / s->replicas, r->per_ns, r->burst / s->replicas};
        td_limiter_adjust(s->local, slot_no, &share, delta,
                          atomic_load_explicit(&sl->last_now, memory_order_relaxed));
        return;
    }
    int64_t d = to_milli(delta);
    int64_t before = atomic_fetch_sub_explicit(&sl->lease, d, memory_order_relaxed);
    int64_t low = chunk_milli(s, &id->rate) / 2;
    if (before >= low && before - d < low)
        wake(s);
}

bool td_shared_degraded(const td_shared *s)
{
    return atomic_load(&((td_shared *)s)->degraded);
}

/* ---- as the gateway's rate backend (gateway/backends.h) ---- */

static td_status be_take(void *ctx, size_t slot, const char *name, const td_rate *r, double cost,
                         uint64_t now_ns, uint64_t *retry_after_ns)
{
    return td_shared_take(ctx, slot, name, r, cost, now_ns, retry_after_ns);
}

static void be_adjust(void *ctx, size_t slot, double delta)
{
    td_shared_adjust(ctx, slot, delta);
}

static bool be_degraded(const void *ctx)
{
    return td_shared_degraded(ctx);
}

static void be_destroy(void *ctx)
{
    td_shared_destroy(ctx);
}

void td_shared_backend(td_shared *s, td_gw_rate_backend *out)
{
    *out = (td_gw_rate_backend){s, be_take, be_adjust, be_degraded, be_destroy};
}
