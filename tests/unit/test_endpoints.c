/* test_endpoints.c - endpoints.c with a fake clock and a seeded RNG:
 * weighted power of two choices (spread by weight when idle, away from the
 * loaded endpoint), smooth weighted round robin, exclusion for a retry,
 * the cap preference, ejection after consecutive failures with a back-off
 * that doubles and is capped, probation, at most half the pool ejected,
 * health thresholds, the wait until an endpoint is back, and membership as
 * a name's addresses change (state kept for those that stay, draining). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/endpoints.h"

#define S  1000000000ULL
#define T0 (1700000000ULL * S) /* a CLOCK_REALTIME-sized now */

static td_ep_pool pool(size_t n, const uint32_t *w, td_balance b)
{
    td_ep_pool p;
    assert_int_equal(td_ep_pool_init(&p, n, w, b, NULL, 42), TD_OK);
    return p;
}

static void test_init_and_parse(void **st)
{
    (void)st;
    td_ep_pool p;
    assert_int_equal(td_ep_pool_init(&p, 0, NULL, TD_BALANCE_LEAST_REQUESTS, NULL, 1), TD_EINVAL);
    assert_int_equal(td_ep_pool_init(&p, TD_EP_MAX + 1, NULL, TD_BALANCE_LEAST_REQUESTS, NULL, 1),
                     TD_EINVAL);
    uint32_t w[2] = {0, 5};
    assert_int_equal(td_ep_pool_init(&p, 2, w, TD_BALANCE_LEAST_REQUESTS, NULL, 0), TD_OK);
    assert_int_equal(p.ep[0].weight, 1);
    assert_int_equal(p.ep[1].weight, 5);
    assert_int_equal(p.policy.consecutive_failures, 3);
    assert_int_equal(p.policy.base_ejection_ns, 1 * S);
    assert_int_equal(p.policy.max_ejection_ns, 30 * S);
    td_balance b;
    assert_int_equal(td_balance_parse("roundRobin", &b), TD_OK);
    assert_int_equal(b, TD_BALANCE_ROUND_ROBIN);
    assert_int_equal(td_balance_parse("leastRequests", &b), TD_OK);
    assert_int_equal(b, TD_BALANCE_LEAST_REQUESTS);
    assert_int_equal(td_balance_parse("random", &b), TD_EINVAL);
    assert_int_equal(td_balance_parse(NULL, &b), TD_EINVAL);
    assert_string_equal(td_balance_name(TD_BALANCE_ROUND_ROBIN), "roundRobin");
}

/* Idle endpoints (every request finishes before the next): picks follow
 * the weights, 1:2:3 within a few percent over 60000 picks. */
static void test_p2c_weighted_when_idle(void **st)
{
    (void)st;
    uint32_t w[3] = {1, 2, 3};
    td_ep_pool p = pool(3, w, TD_BALANCE_LEAST_REQUESTS);
    int count[3] = {0};
    for (int k = 0; k < 60000; k++) {
        int i = td_ep_pick(&p, T0, -1, false, 0);
        assert_true(i >= 0 && i < 3);
        count[i]++;
    }
    /* a tie goes to the first drawn, which is drawn by weight: 10000,
     * 20000, 30000 expected (the seeded run is within 3%) */
    assert_in_range(count[0], 9700, 10300);
    assert_in_range(count[1], 19400, 20600);
    assert_in_range(count[2], 29100, 30900);
}

/* Load steers P2C: an endpoint holding more in flight gets fewer of the
 * new requests; one with 10 in flight against 0 and 0 is never chosen
 * while a lighter one is drawn beside it. */
static void test_p2c_avoids_loaded(void **st)
{
    (void)st;
    td_ep_pool p = pool(3, NULL, TD_BALANCE_LEAST_REQUESTS);
    for (int k = 0; k < 10; k++)
        td_ep_start(&p, 1);
    int count[3] = {0};
    for (int k = 0; k < 3000; k++)
        count[td_ep_pick(&p, T0, -1, false, 0)]++;
    assert_int_equal(count[1], 0); /* any pair with 1 in it has a lighter other */
    assert_true(count[0] > 1000 && count[2] > 1000);
    /* a simulation: endpoint 2 holds each request 4x as long; it ends up
     * with clearly fewer requests */
    td_ep_pool q = pool(3, NULL, TD_BALANCE_LEAST_REQUESTS);
    int started[3] = {0};
    int left[3][64];
    int nleft[3] = {0};
    for (int t = 0; t < 20000; t++) {
        /* age in-flight requests by one tick */
        for (int e = 0; e < 3; e++)
            for (int k = 0; k < nleft[e];)
                if (--left[e][k] == 0) {
                    left[e][k] = left[e][--nleft[e]];
                    td_ep_finish(&q, (size_t)e);
                } else {
                    k++;
                }
        int i = td_ep_pick(&q, T0, -1, false, 0);
        if (nleft[i] == 64)
            continue;
        td_ep_start(&q, (size_t)i);
        left[i][nleft[i]++] = i == 2 ? 8 : 2;
        started[i]++;
    }
    assert_true(started[2] * 2 < started[0]);
    assert_true(started[2] * 2 < started[1]);
}

static void test_round_robin_smooth(void **st)
{
    (void)st;
    uint32_t w[3] = {5, 1, 1};
    td_ep_pool p = pool(3, w, TD_BALANCE_ROUND_ROBIN);
    /* nginx's example: weights 5,1,1 give a a b a c a a per 7 */
    static const int want[7] = {0, 0, 1, 0, 2, 0, 0};
    for (int round = 0; round < 3; round++)
        for (int k = 0; k < 7; k++)
            assert_int_equal(td_ep_pick(&p, T0, -1, false, 0), want[k]);
    td_ep_pool e = pool(3, NULL, TD_BALANCE_ROUND_ROBIN);
    int count[3] = {0};
    for (int k = 0; k < 300; k++)
        count[td_ep_pick(&e, T0, -1, false, 0)]++;
    assert_int_equal(count[0], 100);
    assert_int_equal(count[1], 100);
    assert_int_equal(count[2], 100);
}

static void test_exclude_and_cap(void **st)
{
    (void)st;
    td_balance modes[2] = {TD_BALANCE_LEAST_REQUESTS, TD_BALANCE_ROUND_ROBIN};
    for (int m = 0; m < 2; m++) {
        td_ep_pool p = pool(2, NULL, modes[m]);
        for (int k = 0; k < 100; k++)
            assert_int_equal(td_ep_pick(&p, T0, 0, false, 0), 1);
        td_ep_pool one = pool(1, NULL, modes[m]);
        assert_int_equal(td_ep_pick(&one, T0, 0, false, 0), -1);
        assert_int_equal(td_ep_pick(&one, T0, 0, true, 0), 0);
        /* cap: endpoint 0 at 2 in flight of cap 2 is passed over */
        td_ep_pool c = pool(3, NULL, modes[m]);
        td_ep_start(&c, 0);
        td_ep_start(&c, 0);
        for (int k = 0; k < 100; k++)
            assert_int_not_equal(td_ep_pick(&c, T0, -1, false, 2), 0);
        /* every one at the cap: still picks one */
        for (size_t i = 1; i < 3; i++) {
            td_ep_start(&c, i);
            td_ep_start(&c, i);
        }
        assert_true(td_ep_pick(&c, T0, -1, false, 2) >= 0);
    }
}

/* Table: failures in a row and what happens. */
static void test_ejection_backoff_doubles(void **st)
{
    (void)st;
    td_ep_pool p = pool(4, NULL, TD_BALANCE_LEAST_REQUESTS);
    uint64_t now = T0;
    /* two failures: still in; a success resets the count */
    assert_false(td_ep_report(&p, 0, false, now));
    assert_false(td_ep_report(&p, 0, false, now));
    assert_false(td_ep_report(&p, 0, true, now));
    assert_false(td_ep_report(&p, 0, false, now));
    assert_false(td_ep_report(&p, 0, false, now));
    assert_true(td_ep_available(&p, 0, now));
    /* the third in a row ejects, for 1 s */
    assert_true(td_ep_report(&p, 0, false, now));
    assert_false(td_ep_available(&p, 0, now));
    assert_int_equal(td_ep_ejected(&p, now), 1);
    for (int k = 0; k < 100; k++)
        assert_int_not_equal(td_ep_pick(&p, now, -1, false, 0), 0);
    assert_false(td_ep_available(&p, 0, now + S - 1));
    assert_true(td_ep_available(&p, 0, now + S));
    /* on probation: one failure ejects again, for 2 s, then 4, 8, 16, 30, 30 */
    static const uint64_t want_s[] = {2, 4, 8, 16, 30, 30};
    for (size_t k = 0; k < sizeof want_s / sizeof *want_s; k++) {
        now = p.ep[0].ejected_until_ns;
        assert_true(td_ep_available(&p, 0, now));
        assert_true(td_ep_report(&p, 0, false, now));
        assert_int_equal(p.ep[0].ejected_until_ns - now, want_s[k] * S);
    }
    /* back, and a success: the back-off starts over, three failures again */
    now = p.ep[0].ejected_until_ns;
    assert_false(td_ep_report(&p, 0, true, now));
    assert_false(td_ep_report(&p, 0, false, now));
    assert_false(td_ep_report(&p, 0, false, now));
    assert_true(td_ep_report(&p, 0, false, now));
    assert_int_equal(p.ep[0].ejected_until_ns - now, 1 * S);
    /* failures reported while ejected (requests sent before) change nothing */
    uint64_t until = p.ep[0].ejected_until_ns;
    assert_false(td_ep_report(&p, 0, false, now + 1));
    assert_int_equal(p.ep[0].ejected_until_ns, until);
}

static void test_at_most_half_ejected(void **st)
{
    (void)st;
    struct {
        size_t n;
        size_t max_out;
    } cases[] = {{1, 0}, {2, 1}, {3, 1}, {4, 2}, {5, 2}, {8, 4}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        td_ep_pool p = pool(cases[c].n, NULL, TD_BALANCE_LEAST_REQUESTS);
        for (size_t i = 0; i < cases[c].n; i++)
            for (int k = 0; k < 10; k++)
                td_ep_report(&p, i, false, T0);
        assert_int_equal(td_ep_ejected(&p, T0), cases[c].max_out);
        /* the rest are still picked */
        int i = td_ep_pick(&p, T0, -1, false, 0);
        assert_true(i >= 0 && td_ep_available(&p, (size_t)i, T0));
    }
    /* when one comes back, another failing one may go */
    td_ep_pool p = pool(3, NULL, TD_BALANCE_LEAST_REQUESTS);
    for (int k = 0; k < 3; k++)
        td_ep_report(&p, 0, false, T0);
    for (int k = 0; k < 3; k++)
        assert_false(td_ep_report(&p, 1, false, T0));
    assert_true(td_ep_available(&p, 1, T0));
    assert_true(td_ep_report(&p, 1, false, T0 + S)); /* 0's ejection ran out */
    assert_false(td_ep_available(&p, 1, T0 + S));
}

static void test_health_thresholds(void **st)
{
    (void)st;
    td_ep_policy pol = {.unhealthy_threshold = 3, .healthy_threshold = 2};
    td_ep_pool p;
    assert_int_equal(td_ep_pool_init(&p, 2, NULL, TD_BALANCE_ROUND_ROBIN, &pol, 7), TD_OK);
    struct {
        bool ok;
        bool changed;
        bool available;
    } steps[] = {
        {false, false, true},  {false, false, true}, {true, false, true},  /* reset */
        {false, false, true},  {false, false, true}, {false, true, false}, /* 3 in a row */
        {false, false, false}, {true, false, false}, {false, false, false},
        {true, false, false},  {true, true, true}, /* 2 passes in a row */
    };
    for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
        assert_int_equal(td_ep_check(&p, 0, steps[k].ok, T0), steps[k].changed);
        assert_int_equal(td_ep_available(&p, 0, T0), steps[k].available);
        if (!steps[k].available)
            assert_int_equal(td_ep_pick(&p, T0, -1, false, 0), 1);
    }
    /* unhealthy everywhere: nothing to pick, and no time brings one back */
    for (int k = 0; k < 3; k++) {
        td_ep_check(&p, 0, false, T0);
        td_ep_check(&p, 1, false, T0);
    }
    assert_int_equal(td_ep_pick(&p, T0, -1, true, 0), -1);
    assert_int_equal(td_ep_wait_ns(&p, T0), UINT64_MAX);
    /* a healthy check ends an ejection too */
    td_ep_pool q = pool(2, NULL, TD_BALANCE_LEAST_REQUESTS);
    for (int k = 0; k < 3; k++)
        td_ep_report(&q, 0, false, T0);
    assert_false(td_ep_available(&q, 0, T0));
    td_ep_check(&q, 0, false, T0);
    td_ep_check(&q, 0, false, T0);
    assert_true(td_ep_check(&q, 0, true, T0));
    assert_true(td_ep_available(&q, 0, T0));
}

/* queueDepth: the least waiting work (scraped waiting + sent since, per
 * weight), then the least KV cache, then at random. */
static void test_queue_depth(void **st)
{
    (void)st;
    td_balance b;
    assert_int_equal(td_balance_parse("queueDepth", &b), TD_OK);
    assert_int_equal(b, TD_BALANCE_QUEUE_DEPTH);
    td_ep_pool p = pool(3, NULL, TD_BALANCE_QUEUE_DEPTH);
    td_ep_scraped(&p, 0, 5, 0.1);
    td_ep_scraped(&p, 1, 2, 0.9);
    td_ep_scraped(&p, 2, 9, 0.0);
    assert_int_equal(td_ep_pick(&p, T0, -1, false, 0), 1);
    /* three sent to 1 since its scrape: 2+3 = 5 ties 0's 5, 0 has less KV */
    for (int k = 0; k < 3; k++)
        td_ep_start(&p, 1);
    assert_int_equal(td_ep_pick(&p, T0, -1, false, 0), 0);
    /* a new scrape of 1 counts its in flight from now */
    td_ep_scraped(&p, 1, 1, 0.9);
    assert_int_equal(td_ep_pick(&p, T0, -1, false, 0), 1);
    /* retry: not the one left */
    assert_int_equal(td_ep_pick(&p, T0, 1, false, 0), 0);
    /* weight: 4 waiting at weight 4 is less than 2 at weight 1 */
    uint32_t w[2] = {1, 4};
    td_ep_pool q = pool(2, w, TD_BALANCE_QUEUE_DEPTH);
    td_ep_scraped(&q, 0, 2, 0);
    td_ep_scraped(&q, 1, 4, 0);
    assert_int_equal(td_ep_pick(&q, T0, -1, false, 0), 1);
    /* all equal: spread at random over all */
    td_ep_pool r = pool(3, NULL, TD_BALANCE_QUEUE_DEPTH);
    int count[3] = {0};
    for (int k = 0; k < 3000; k++)
        count[td_ep_pick(&r, T0, -1, false, 0)]++;
    for (int i = 0; i < 3; i++)
        assert_in_range(count[i], 850, 1150);
}

static void test_parse_metrics(void **st)
{
    (void)st;
    static const char text[] = "# HELP vllm:num_requests_waiting Requests waiting.\n"
                               "# TYPE vllm:num_requests_waiting gauge\n"
                               "vllm:num_requests_waiting{model_name=\"a}b\",x=\"q\\\"\"} 3\n"
                               "vllm:num_requests_waiting{model_name=\"c\"} 4.5\r\n"
                               "vllm:num_requests_waiting_total 100\n"
                               "vllm:gpu_cache_usage_perc 0.25 1700000000000\n"
                               "vllm:num_requests_waiting{broken 7\n"
                               "vllm:num_requests_waiting nan\n"
                               "vllm:num_requests_waiting";
    double w = -1, kv = -1;
    assert_int_equal(td_ep_parse_metrics(text, sizeof text - 1, "vllm:num_requests_waiting",
                                         "vllm:gpu_cache_usage_perc", &w, &kv),
                     TD_OK);
    assert_true(w == 7.5);
    assert_true(kv == 0.25);
    assert_int_equal(td_ep_parse_metrics(text, sizeof text - 1, "other_waiting",
                                         "vllm:gpu_cache_usage_perc", &w, &kv),
                     TD_ENOTFOUND);
    assert_int_equal(td_ep_parse_metrics("", 0, "a", "b", &w, &kv), TD_ENOTFOUND);
}

static void test_wait(void **st)
{
    (void)st;
    td_ep_pool p = pool(2, NULL, TD_BALANCE_LEAST_REQUESTS);
    assert_int_equal(td_ep_wait_ns(&p, T0), 0);
    for (int k = 0; k < 3; k++)
        td_ep_report(&p, 0, false, T0);
    assert_int_equal(td_ep_wait_ns(&p, T0), 0); /* 1 is still in */
    td_ep_check(&p, 1, false, T0);
    td_ep_check(&p, 1, false, T0);
    assert_int_equal(td_ep_pick(&p, T0 + S / 4, -1, true, 0), -1);
    assert_int_equal(td_ep_wait_ns(&p, T0 + S / 4), 3 * S / 4);
    assert_int_equal(td_ep_pick(&p, T0 + S, -1, false, 0), 0);
}

/* ---- membership: a name's addresses (td_ep_resolved) ---- */

static td_ep_key key(int a)
{
    td_ep_key k;
    memset(&k, 0, sizeof k);
    k.b[0] = 4;
    k.b[TD_EP_KEY - 1] = (uint8_t)a;
    return k;
}

/* The pool as a string, one letter per slot: A active, D draining, . free;
 * each followed by the address number. */
static void shape(const td_ep_pool *p, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < p->n; i++) {
        const td_ep *e = &p->ep[i];
        out[o++] = e->member == TD_EP_ACTIVE ? 'A' : e->member == TD_EP_DRAINING ? 'D' : '.';
        out[o++] = e->member == TD_EP_FREE ? '.' : (char)('0' + e->key.b[TD_EP_KEY - 1]);
    }
    out[o] = '\0';
}

/* Each row: source 0 (slot 0 starts with address 1) answers addrs (0 ends
 * the list; none at all: a lookup that found nothing), then the slots
 * listed in reclaim are reclaimed (-1 ends); the pool must read want
 * and the change count joined/drained/dropped. */
static void test_membership_table(void **st)
{
    (void)st;
    static const struct {
        int addrs[6];
        int reclaim[3];
        const char *want;
        size_t joined, drained;
    } rows[] = {
        {{1, 2, 3, 0}, {-1}, "A1A2A3", 2, 0},    /* a headless Service of three */
        {{1, 2, 3, 0}, {-1}, "A1A2A3", 0, 0},    /* same answer: nothing moves */
        {{3, 1, 0}, {-1}, "A1D2A3", 0, 1},       /* 2 vanished: draining, order ignored */
        {{0}, {-1}, "A1D2A3", 0, 0},             /* a failed lookup keeps the last set */
        {{1, 2, 3, 0}, {-1}, "A1A2A3", 1, 0},    /* 2 back before it drained: its slot */
        {{1, 3, 0}, {1, -1}, "A1..A3", 0, 1},    /* 2 vanished and drained: slot free */
        {{1, 3, 4, 4, 0}, {-1}, "A1A4A3", 1, 0}, /* 4 takes the free slot, once */
        {{5, 0}, {0, 1, -1}, "....D3A5", 1, 3},  /* all change; 3 still busy (in flight) */
    };
    td_ep_pool p = pool(1, NULL, TD_BALANCE_LEAST_REQUESTS);
    td_ep_key k1 = key(1);
    td_ep_set_key(&p, 0, &k1);
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        td_ep_key keys[6];
        size_t n = 0;
        while (n < 6 && rows[r].addrs[n])
            keys[n] = key(rows[r].addrs[n]), n++;
        if (r == 7)
            td_ep_start(&p, 2); /* address 3 has a request in flight */
        td_ep_change ch;
        td_status s = td_ep_resolved(&p, 0, 1, keys, n, &ch);
        assert_int_equal(s, n ? TD_OK : TD_EINVAL);
        for (size_t k = 0; rows[r].reclaim[k] >= 0; k++)
            td_ep_reclaim(&p, (size_t)rows[r].reclaim[k]);
        char got[2 * TD_EP_MAX + 1];
        shape(&p, got);
        assert_string_equal(got, rows[r].want);
        assert_int_equal(ch.njoined, rows[r].joined);
        assert_int_equal(ch.ndrained, rows[r].drained);
    }
    /* the busy draining slot is freed once its request ends */
    assert_false(td_ep_reclaim(&p, 2));
    td_ep_finish(&p, 2);
    assert_true(td_ep_reclaim(&p, 2));
    assert_int_equal(td_ep_members(&p), 1);
}

/* A re-resolution keeps the ejection, health and load of the addresses
 * that stay; a draining slot is never picked; a new one starts fresh; the
 * half-the-pool rule counts active members only; other sources untouched. */
static void test_membership_keeps_state(void **st)
{
    (void)st;
    uint32_t w[2] = {1, 7};
    td_ep_pool p = pool(2, w, TD_BALANCE_LEAST_REQUESTS); /* 0: a name, 1: an IP */
    td_ep_key k[4] = {key(1), key(2), key(3), key(4)};
    td_ep_set_key(&p, 0, &k[0]);
    td_ep_change ch;
    assert_int_equal(td_ep_resolved(&p, 0, 3, k, 3, &ch), TD_OK); /* slots 0, 2, 3 */
    assert_int_equal(p.n, 4);
    assert_int_equal(p.ep[2].weight, 3); /* the source's weight */
    assert_int_equal(p.ep[2].src, 0);
    for (int i = 0; i < 3; i++)
        td_ep_report(&p, 0, false, T0); /* slot 0 ejected */
    td_ep_check(&p, 2, false, T0);
    td_ep_check(&p, 2, false, T0); /* slot 2 unhealthy */
    td_ep_start(&p, 3);
    td_ep_start(&p, 3);
    uint64_t until = p.ep[0].ejected_until_ns;
    assert_true(until > T0);
    /* address 2 (slot 2) vanishes, 4 joins */
    td_ep_key again[3] = {key(3), key(1), key(4)};
    assert_int_equal(td_ep_resolved(&p, 0, 3, again, 3, &ch), TD_OK);
    assert_int_equal(ch.ndrained, 1);
    assert_int_equal(ch.drained[0], 2);
    assert_int_equal(ch.njoined, 1);
    assert_int_equal(ch.joined[0], 4);
    assert_int_equal(p.ep[0].ejected_until_ns, until);
    assert_int_equal(p.ep[0].ejections_total, 1);
    assert_int_equal(p.ep[3].inflight, 2);
    assert_int_equal(p.ep[4].inflight, 0);
    assert_false(p.ep[4].unhealthy);
    assert_int_equal(p.ep[1].weight, 7); /* the IP endpoint as it was */
    assert_int_equal(p.ep[1].member, TD_EP_ACTIVE);
    for (int r = 0; r < 200; r++) {
        int e = td_ep_pick(&p, T0 + S / 2, -1, false, 0);
        assert_true(e == 1 || e == 3 || e == 4);
    }
    assert_int_equal(td_ep_members(&p), 4);
    /* 4 members: a second ejection is allowed (2 of 4), a third is not */
    for (int i = 0; i < 3; i++)
        td_ep_report(&p, 4, false, T0);
    assert_int_equal(td_ep_ejected(&p, T0), 2);
    for (int i = 0; i < 3; i++)
        td_ep_report(&p, 1, false, T0);
    assert_int_equal(td_ep_ejected(&p, T0), 2);
    /* outcomes of a draining slot's last requests change nothing */
    assert_false(td_ep_report(&p, 2, false, T0));
    assert_false(td_ep_check(&p, 2, true, T0));
    /* a full pool drops what does not fit */
    td_ep_key many[TD_EP_MAX + 2];
    for (int i = 0; i < TD_EP_MAX + 2; i++) {
        memset(&many[i], 0, sizeof many[i]);
        many[i].b[1] = (uint8_t)(i + 10);
    }
    assert_int_equal(td_ep_resolved(&p, 0, 1, many, TD_EP_MAX + 2, &ch), TD_OK);
    assert_int_equal(p.n, TD_EP_MAX);
    assert_true(ch.dropped > 0);
    assert_int_equal(ch.ndrained, 3); /* slots 0, 3, 4; 2 was draining already */
    assert_int_equal(ch.njoined + ch.dropped, TD_EP_MAX + 2);
    assert_int_equal(td_ep_members(&p), 1 + ch.njoined); /* the IP endpoint stays */
}

/* Views of two workers merge per route and address: counts summed, the
 * worst state and the freshest scrape kept, other routes apart. */
static void test_views_merge(void **st)
{
    (void)st;
    td_ep_view v[5];
    memset(v, 0, sizeof v);
    static const struct {
        uint32_t route, worker;
        const char *addr;
        uint32_t inflight;
        uint64_t requests, ejected_for, scrape_age;
        bool unhealthy;
    } rows[] = {
        {1, 0, "10.0.0.1:80", 2, 10, 0, 300, false},
        {1, 0, "10.0.0.2:80", 1, 5, 0, 0, false},
        {1, 1, "10.0.0.1:80", 3, 7, 2 * S, 100, false},
        {2, 1, "10.0.0.1:80", 4, 1, 0, 0, false}, /* another route */
        {1, 1, "10.0.0.2:80", 0, 6, 0, 0, true},
    };
    for (size_t i = 0; i < 5; i++) {
        v[i].route = rows[i].route;
        v[i].worker = rows[i].worker;
        snprintf(v[i].address, sizeof v[i].address, "%s", rows[i].addr);
        v[i].inflight = rows[i].inflight;
        v[i].requests = rows[i].requests;
        v[i].ejected_for_ns = rows[i].ejected_for;
        v[i].scraped = rows[i].scrape_age != 0;
        v[i].scrape_age_ns = rows[i].scrape_age;
        v[i].waiting = (double)i;
        v[i].unhealthy = rows[i].unhealthy;
    }
    assert_string_equal(td_ep_view_state(&v[0]), "healthy");
    assert_string_equal(td_ep_view_state(&v[2]), "ejected");
    assert_string_equal(td_ep_view_state(&v[4]), "unhealthy");
    assert_int_equal(td_ep_views_merge(v, 5), 3);
    assert_string_equal(v[0].address, "10.0.0.1:80");
    assert_int_equal(v[0].workers, 2);
    assert_int_equal(v[0].inflight, 5);
    assert_int_equal(v[0].requests, 17);
    assert_int_equal(v[0].ejected_for_ns, 2 * S);
    assert_int_equal(v[0].scrape_age_ns, 100); /* worker 1's, the freshest */
    assert_true(v[0].waiting == 2);
    assert_string_equal(td_ep_view_state(&v[0]), "ejected");
    assert_string_equal(v[1].address, "10.0.0.2:80");
    assert_int_equal(v[1].requests, 11);
    assert_string_equal(td_ep_view_state(&v[1]), "unhealthy");
    assert_int_equal(v[2].route, 2);
    assert_int_equal(v[2].inflight, 4);
    v[1].member = TD_EP_DRAINING;
    assert_string_equal(td_ep_view_state(&v[1]), "draining");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_and_parse),
        cmocka_unit_test(test_p2c_weighted_when_idle),
        cmocka_unit_test(test_p2c_avoids_loaded),
        cmocka_unit_test(test_round_robin_smooth),
        cmocka_unit_test(test_exclude_and_cap),
        cmocka_unit_test(test_ejection_backoff_doubles),
        cmocka_unit_test(test_at_most_half_ejected),
        cmocka_unit_test(test_health_thresholds),
        cmocka_unit_test(test_queue_depth),
        cmocka_unit_test(test_parse_metrics),
        cmocka_unit_test(test_wait),
        cmocka_unit_test(test_membership_table),
        cmocka_unit_test(test_membership_keeps_state),
        cmocka_unit_test(test_views_merge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
