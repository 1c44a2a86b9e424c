/* endpoints.c - endpoint choice, outlier ejection and health thresholds
 * of a Route's pool (see endpoints.h for the contract).
 *
 * leastRequests is Envoy's and the "power of two choices" of Mitzenmacher:
 * two endpoints drawn at random (weighted), the one with fewer requests in
 * flight per unit of weight wins. It needs no global view (each worker
 * counts its own requests) and, unlike "least of all", does not herd every
 * worker onto the same endpoint between updates. A slow endpoint holds its
 * requests longer, so it has more in flight and gets fewer new ones: what
 * an LLM fleet with one overloaded replica needs. roundRobin is nginx's
 * smooth weighted round robin (no bursts to the heaviest endpoint).
 *
 * Ejection is Envoy's outlier detection reduced to its core: consecutive
 * failures eject for a back-off that doubles with each ejection in a row,
 * and at most half the pool is out at once, so that a fault of the checks
 * themselves (or a wave of client errors) cannot empty the pool.
 *
 * Membership follows a name's addresses as a Kubernetes headless Service
 * gives them: a surviving address keeps its slot and so its state (a
 * re-resolution must not forgive an ejected endpoint or forget its load),
 * a vanished one drains rather than cutting the requests it is serving. */
#include "gateway/endpoints.h"

#include <stdlib.h>
#include <string.h>

#define DEF_FAILURES  3u
#define DEF_BASE_NS   1000000000ULL
#define DEF_MAX_NS    30000000000ULL
#define DEF_UNHEALTHY 2u
#define DEF_HEALTHY   1u

td_status td_balance_parse(const char *s, td_balance *out)
{
    if (s && strcmp(s, "leastRequests") == 0)
        *out = TD_BALANCE_LEAST_REQUESTS;
    else if (s && strcmp(s, "roundRobin") == 0)
        *out = TD_BALANCE_ROUND_ROBIN;
    else if (s && strcmp(s, "queueDepth") == 0)
        *out = TD_BALANCE_QUEUE_DEPTH;
    else
        return TD_EINVAL;
    return TD_OK;
}

const char *td_balance_name(td_balance b)
{
    return b == TD_BALANCE_ROUND_ROBIN   ? "roundRobin"
           : b == TD_BALANCE_QUEUE_DEPTH ? "queueDepth"
                                         : "leastRequests";
}

td_status td_ep_pool_init(td_ep_pool *p, size_t n, const uint32_t *w, td_balance b,
                          const td_ep_policy *pol, uint64_t seed)
{
    if (n == 0 || n > TD_EP_MAX)
        return TD_EINVAL;
    memset(p, 0, sizeof *p);
    p->n = n;
    p->balance = b;
    for (size_t i = 0; i < n; i++) {
        p->ep[i].weight = w && w[i] ? w[i] : 1;
        p->ep[i].src = (uint32_t)i;
    }
    if (pol)
        p->policy = *pol;
    if (!p->policy.consecutive_failures)
        p->policy.consecutive_failures = DEF_FAILURES;
    if (!p->policy.base_ejection_ns)
        p->policy.base_ejection_ns = DEF_BASE_NS;
    if (!p->policy.max_ejection_ns)
        p->policy.max_ejection_ns = DEF_MAX_NS;
    if (p->policy.max_ejection_ns < p->policy.base_ejection_ns)
        p->policy.max_ejection_ns = p->policy.base_ejection_ns;
    if (!p->policy.unhealthy_threshold)
        p->policy.unhealthy_threshold = DEF_UNHEALTHY;
    if (!p->policy.healthy_threshold)
        p->policy.healthy_threshold = DEF_HEALTHY;
    p->rng = seed ? seed : 0x9e3779b97f4a7c15ULL;
    return TD_OK;
}

static uint64_t next_rand(td_ep_pool *p)
{
    uint64_t x = p->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    p->rng = x;
    return x * 0x2545f4914f6cdd1dULL;
}

static bool ejected(const td_ep *e, uint64_t now_ns)
{
    return e->ejected_until_ns && now_ns < e->ejected_until_ns;
}

bool td_ep_available(const td_ep_pool *p, size_t i, uint64_t now_ns)
{
    return i < p->n && p->ep[i].member == TD_EP_ACTIVE && !p->ep[i].unhealthy &&
           !ejected(&p->ep[i], now_ns);
}

size_t td_ep_ejected(const td_ep_pool *p, uint64_t now_ns)
{
    size_t k = 0;
    for (size_t i = 0; i < p->n; i++)
        k += p->ep[i].member == TD_EP_ACTIVE && ejected(&p->ep[i], now_ns);
    return k;
}

size_t td_ep_members(const td_ep_pool *p)
{
    size_t k = 0;
    for (size_t i = 0; i < p->n; i++)
        k += p->ep[i].member == TD_EP_ACTIVE;
    return k;
}

/* One of the candidates cand[0..n), drawn with probability weight / sum. */
static size_t draw(td_ep_pool *p, const size_t *cand, size_t n, uint64_t total)
{
    uint64_t r = next_rand(p) % total;
    for (size_t k = 0; k < n; k++) {
        uint32_t wk = p->ep[cand[k]].weight;
        if (r < wk)
            return k;
        r -= wk;
    }
    return n - 1;
}

/* a (the first drawn) is the choice over b: no more in flight per unit of
 * weight, inflight_a * w_b <= inflight_b * w_a. A tie goes to a, so that
 * idle endpoints get requests in proportion to their weights (a is drawn
 * by weight). */
static bool less_loaded(const td_ep *a, const td_ep *b)
{
    uint64_t la = (uint64_t)a->inflight * b->weight;
    uint64_t lb = (uint64_t)b->inflight * a->weight;
    return la <= lb;
}

/* The waiting work at e as far as this pool knows: what it reported at
 * the last scrape plus what we sent it since. */
static double waiting_work(const td_ep *e)
{
    double since = e->inflight > e->inflight_at_scrape ? e->inflight - e->inflight_at_scrape : 0;
    return (e->waiting + since) / e->weight;
}

/* The candidate with the least waiting work, then the least KV cache in
 * use; exact ties drawn at random (reservoir of one). */
static size_t least_waiting(td_ep_pool *p, const size_t *cand, size_t n)
{
    size_t best = cand[0], ties = 1;
    for (size_t k = 1; k < n; k++) {
        const td_ep *e = &p->ep[cand[k]], *b = &p->ep[best];
        double we = waiting_work(e), wb = waiting_work(b);
        if (we < wb || (we == wb && e->kv_usage < b->kv_usage)) {
            best = cand[k];
            ties = 1;
        } else if (we == wb && e->kv_usage == b->kv_usage && next_rand(p) % ++ties == 0) {
            best = cand[k];
        }
    }
    return best;
}

int td_ep_pick(td_ep_pool *p, uint64_t now_ns, int exclude, bool allow_same, uint32_t cap)
{
    size_t cand[TD_EP_MAX], n = 0, under = 0;
    bool saw_exclude = false;
    for (size_t i = 0; i < p->n; i++) {
        if (!td_ep_available(p, i, now_ns))
            continue;
        if ((int)i == exclude) {
            saw_exclude = true;
            continue;
        }
        cand[n++] = i;
    }
    if (n == 0) {
        if (saw_exclude && allow_same)
            return exclude;
        return -1;
    }
    /* endpoints under cap first: move them to the front */
    if (cap) {
        for (size_t k = 0; k < n; k++)
            if (p->ep[cand[k]].inflight < cap) {
                size_t t = cand[under];
                cand[under++] = cand[k];
                cand[k] = t;
            }
        if (under)
            n = under;
    }
    if (n == 1)
        return (int)cand[0];
    if (p->balance == TD_BALANCE_ROUND_ROBIN) {
        int64_t total = 0;
        size_t best = cand[0];
        for (size_t k = 0; k < n; k++) {
            td_ep *e = &p->ep[cand[k]];
            e->rr_current += e->weight;
            total += e->weight;
            if (e->rr_current > p->ep[best].rr_current)
                best = cand[k];
        }
        p->ep[best].rr_current -= total;
        return (int)best;
    }
    if (p->balance == TD_BALANCE_QUEUE_DEPTH)
        return (int)least_waiting(p, cand, n);
    uint64_t total = 0;
    for (size_t k = 0; k < n; k++)
        total += p->ep[cand[k]].weight;
    size_t a = draw(p, cand, n, total);
    /* the second from the others */
    size_t rest[TD_EP_MAX], m = 0;
    for (size_t k = 0; k < n; k++)
        if (k != a)
            rest[m++] = cand[k];
    size_t b = rest[draw(p, rest, m, total - p->ep[cand[a]].weight)];
    return less_loaded(&p->ep[cand[a]], &p->ep[b]) ? (int)cand[a] : (int)b;
}

void td_ep_start(td_ep_pool *p, size_t i)
{
    if (i < p->n) {
        p->ep[i].inflight++;
        p->ep[i].requests++;
    }
}

void td_ep_finish(td_ep_pool *p, size_t i)
{
    if (i < p->n && p->ep[i].inflight)
        p->ep[i].inflight--;
}

static void eject(td_ep_pool *p, td_ep *e, uint64_t now_ns)
{
    uint64_t d = p->policy.base_ejection_ns;
    for (uint32_t k = 0; k < e->ejections && d < p->policy.max_ejection_ns; k++)
        d *= 2;
    if (d > p->policy.max_ejection_ns)
        d = p->policy.max_ejection_ns;
    e->ejections++;
    e->ejections_total++;
    e->ejected_until_ns = now_ns + d;
    e->probation = true;
    e->failures = 0;
}

bool td_ep_report(td_ep_pool *p, size_t i, bool ok, uint64_t now_ns)
{
    if (i >= p->n || p->ep[i].member != TD_EP_ACTIVE)
        return false;
    td_ep *e = &p->ep[i];
    if (ok) {
        e->failures = 0;
        e->ejections = 0;
        e->probation = false;
        return false;
    }
    if (ejected(e, now_ns))
        return false; /* a request sent before the ejection: already counted out */
    e->failures++;
    if (e->failures < p->policy.consecutive_failures && !e->probation)
        return false;
    if (td_ep_ejected(p, now_ns) + 1 > td_ep_members(p) / 2)
        return false;
    eject(p, e, now_ns);
    return true;
}

bool td_ep_check(td_ep_pool *p, size_t i, bool ok, uint64_t now_ns)
{
    (void)now_ns;
    if (i >= p->n || p->ep[i].member != TD_EP_ACTIVE)
        return false;
    td_ep *e = &p->ep[i];
    if (ok) {
        e->checks_failed = 0;
        if (e->checks_ok < UINT32_MAX)
            e->checks_ok++;
        if (e->unhealthy && e->checks_ok >= p->policy.healthy_threshold) {
            e->unhealthy = false;
            e->ejected_until_ns = 0;
            e->ejections = 0;
            e->failures = 0;
            e->probation = false;
            return true;
        }
        return false;
    }
    e->checks_ok = 0;
    if (e->checks_failed < UINT32_MAX)
        e->checks_failed++;
    if (!e->unhealthy && e->checks_failed >= p->policy.unhealthy_threshold) {
        e->unhealthy = true;
        return true;
    }
    return false;
}

uint64_t td_ep_wait_ns(const td_ep_pool *p, uint64_t now_ns)
{
    uint64_t best = UINT64_MAX;
    for (size_t i = 0; i < p->n; i++) {
        const td_ep *e = &p->ep[i];
        if (e->unhealthy || e->member != TD_EP_ACTIVE)
            continue;
        if (!ejected(e, now_ns))
            return 0;
        if (e->ejected_until_ns - now_ns < best)
            best = e->ejected_until_ns - now_ns;
    }
    return best;
}

void td_ep_scraped(td_ep_pool *p, size_t i, double waiting, double kv_usage)
{
    if (i >= p->n)
        return;
    td_ep *e = &p->ep[i];
    e->waiting = waiting >= 0 ? waiting : 0;
    e->kv_usage = kv_usage >= 0 ? kv_usage : 0;
    e->inflight_at_scrape = e->inflight;
}

void td_ep_set_key(td_ep_pool *p, size_t i, const td_ep_key *key)
{
    if (i < p->n)
        p->ep[i].key = *key;
}

static bool key_in(const td_ep_key *k, const td_ep_key *keys, size_t n)
{
    for (size_t j = 0; j < n; j++)
        if (memcmp(k->b, keys[j].b, TD_EP_KEY) == 0)
            return true;
    return false;
}

/* The slot of source src in state m holding key k, or -1. */
static int slot_of(const td_ep_pool *p, uint32_t src, td_ep_member m, const td_ep_key *k)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->ep[i].member == m && p->ep[i].src == src &&
            memcmp(p->ep[i].key.b, k->b, TD_EP_KEY) == 0)
            return (int)i;
    return -1;
}

/* A free slot for a new member (the lowest, else one more), or -1. */
static int free_slot(td_ep_pool *p)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->ep[i].member == TD_EP_FREE)
            return (int)i;
    if (p->n < TD_EP_MAX)
        return (int)p->n++;
    return -1;
}

td_status td_ep_resolved(td_ep_pool *p, uint32_t src, uint32_t w, const td_ep_key *keys, size_t n,
                         td_ep_change *ch)
{
    memset(ch, 0, sizeof *ch);
    if (n == 0 || !keys)
        return TD_EINVAL;
    for (size_t i = 0; i < p->n; i++) {
        td_ep *e = &p->ep[i];
        if (e->member == TD_EP_ACTIVE && e->src == src && !key_in(&e->key, keys, n)) {
            e->member = TD_EP_DRAINING;
            ch->drained[ch->ndrained++] = i;
        }
    }
    for (size_t k = 0; k < n; k++) {
        if (key_in(&keys[k], keys, k) || slot_of(p, src, TD_EP_ACTIVE, &keys[k]) >= 0)
            continue; /* a repeat, or a member that stays */
        int i = slot_of(p, src, TD_EP_DRAINING, &keys[k]);
        if (i < 0 && (i = free_slot(p)) >= 0) {
            memset(&p->ep[i], 0, sizeof p->ep[i]);
            p->ep[i].weight = w ? w : 1;
            p->ep[i].src = src;
            p->ep[i].key = keys[k];
        }
        if (i < 0) {
            ch->dropped++;
            continue;
        }
        p->ep[i].member = TD_EP_ACTIVE;
        ch->joined[ch->njoined++] = (size_t)i;
    }
    return TD_OK;
}

bool td_ep_reclaim(td_ep_pool *p, size_t i)
{
    if (i >= p->n || p->ep[i].member != TD_EP_DRAINING || p->ep[i].inflight)
        return false;
    p->ep[i].member = TD_EP_FREE;
    while (p->n > 1 && p->ep[p->n - 1].member == TD_EP_FREE)
        p->n--;
    return true;
}

/* The sample value of line l[0..n) if its metric name is name (followed by
 * labels or a blank), in *v. */
static bool sample_of(const char *l, size_t n, const char *name, double *v)
{
    size_t k = strlen(name);
    if (n <= k || memcmp(l, name, k) != 0)
        return false;
    size_t i = k;
    if (l[i] == '{') {
        /* label values may hold '}' inside quotes */
        int quoted = 0;
        for (i++; i < n; i++) {
            if (l[i] == '\\' && quoted && i + 1 < n)
                i++;
            else if (l[i] == '"')
                quoted = !quoted;
            else if (l[i] == '}' && !quoted)
                break;
        }
        if (i == n)
            return false;
        i++;
    }
    if (i >= n || (l[i] != ' ' && l[i] != '\t'))
        return false;
    char num[64];
    while (i < n && (l[i] == ' ' || l[i] == '\t'))
        i++;
    size_t j = 0;
    while (i < n && l[i] != ' ' && l[i] != '\t' && j < sizeof num - 1)
        num[j++] = l[i++];
    num[j] = '\0';
    char *end;
    double x = strtod(num, &end);
    if (j == 0 || *end || x != x)
        return false;
    *v = x;
    return true;
}

td_status td_ep_parse_metrics(const char *text, size_t len, const char *waiting_name,
                              const char *kv_name, double *waiting, double *kv)
{
    bool found = false;
    double w = 0, u = 0, v;
    size_t i = 0;
    while (i < len) {
        size_t e = i;
        while (e < len && text[e] != '\n')
            e++;
        size_t n = e - i;
        if (n && text[i + n - 1] == '\r')
            n--;
        if (n && text[i] != '#') {
            if (sample_of(text + i, n, waiting_name, &v)) {
                w += v;
                found = true;
            } else if (sample_of(text + i, n, kv_name, &v)) {
                u += v;
            }
        }
        i = e + 1;
    }
    *waiting = w;
    *kv = u;
    return found ? TD_OK : TD_ENOTFOUND;
}

const char *td_ep_view_state(const td_ep_view *v)
{
    return v->member != TD_EP_ACTIVE ? "draining"
           : v->unhealthy            ? "unhealthy"
           : v->ejected_for_ns       ? "ejected"
                                     : "healthy";
}

/* Folds b (another worker's view of the same endpoint) into a. */
static void merge_into(td_ep_view *a, const td_ep_view *b)
{
    a->workers += b->workers ? b->workers : 1;
    a->inflight += b->inflight;
    a->requests += b->requests;
    a->ejections += b->ejections;
    a->lookups_failed += b->lookups_failed;
    a->unhealthy |= b->unhealthy;
    a->lookup_failing |= b->lookup_failing;
    if (b->member != TD_EP_ACTIVE)
        a->member = b->member;
    if (b->ejected_for_ns > a->ejected_for_ns)
        a->ejected_for_ns = b->ejected_for_ns;
    if (b->failures > a->failures)
        a->failures = b->failures;
    if (b->scraped && (!a->scraped || b->scrape_age_ns < a->scrape_age_ns)) {
        a->scraped = true;
        a->waiting = b->waiting;
        a->kv_usage = b->kv_usage;
        a->scrape_age_ns = b->scrape_age_ns;
    }
    if (b->resolved_age_ns && (!a->resolved_age_ns || b->resolved_age_ns < a->resolved_age_ns))
        a->resolved_age_ns = b->resolved_age_ns;
}

size_t td_ep_views_merge(td_ep_view *v, size_t n)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < m && !(v[j].route == v[i].route && strcmp(v[j].address, v[i].address) == 0))
            j++;
        if (j == m) {
            v[m] = v[i];
            if (!v[m].workers)
                v[m].workers = 1;
            m++;
        } else {
            merge_into(&v[j], &v[i]);
        }
    }
    return m;
}
