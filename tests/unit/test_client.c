/* test_client.c - the well-behaved client's policy on a fake clock with
 * scripted randomness: the adaptive-throttling drop probability against its
 * formula, local drops, the 10% retry budget, which outcomes are retried,
 * backoff bounds, Retry-After, deadlines, attempts, window expiry; and the
 * blocking transport against a closed port with a fake sleep. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tenantd/client.h"

#define MS  1000000ULL
#define SEC 1000000000ULL
#define T0  (1000 * SEC) /* an arbitrary start, far from 0 */

/* Scripted randomness: always returns *ctx. */
static double fixed_rand(void *ctx)
{
    return *(double *)ctx;
}

static double rnd_value;
static const double RND_MAX = 0.99999999999; /* never drops; backoff at its ceiling */

/* Tests of the formula pass padding -1 (none) unless they test padding. */
static td_client *make(td_client_opts *o)
{
    if (o->padding == 0)
        o->padding = -1;
    o->rand01 = fixed_rand;
    o->rand_ctx = &rnd_value;
    td_client *c = NULL;
    td_err err;
    assert_int_equal(td_client_create(o, &c, &err), TD_OK);
    return c;
}

/* One logical request with one attempt answered status (never retried:
 * a 429/503 is reported with TD_CLIENT_NEVER). */
static void one(td_client *c, uint64_t now, int status)
{
    td_client_call call;
    td_client_call_begin(c, &call, now, 0);
    assert_int_equal(td_client_should_send(c, &call, now), TD_CLIENT_SEND);
    uint64_t ra = (status == 429 || status == 503) ? TD_CLIENT_NEVER : 0;
    assert_int_equal(td_client_on_result(c, &call, now, status, ra, NULL), TD_CLIENT_DONE);
}

static void test_drop_probability_formula(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int requests, accepts;
        double k, want;
        int32_t padding;
    } rows[] = {
        {"all accepted", 100, 100, 2, 0, 0},
        {"half accepted, K=2: K*accepts = requests", 100, 50, 2, 0, 0},
        {"a quarter accepted, K=2", 100, 25, 2, 50.0 / 101, 0},
        {"none accepted", 100, 0, 2, 100.0 / 101, 0},
        {"half accepted, K=1.5", 100, 50, 1.5, 25.0 / 101, 0},
        {"half accepted, K=1", 10, 5, 1, 5.0 / 11, 0},
        {"a tenth accepted, K=3", 200, 20, 3, 140.0 / 201, 0},
        {"nothing yet", 0, 0, 2, 0, 0},
        {"padding 8: a cold client with 5 in flight", 5, 0, 2, 0, 8},
        {"padding 8: none accepted", 100, 0, 2, 92.0 / 101, 8},
        {"padding 8: a quarter accepted", 100, 25, 2, 42.0 / 101, 8},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_client_opts o = {0};
        o.k = rows[i].k;
        o.padding = rows[i].padding;
        rnd_value = RND_MAX;
        td_client *c = make(&o);
        for (int r = 0; r < rows[i].requests; r++)
            one(c, T0 + (uint64_t)r * MS, r < rows[i].accepts ? 200 : 429);
        double p = td_client_drop_probability(c, T0 + SEC);
        if (fabs(p - rows[i].want) > 1e-12)
            fail_msg("%s: p = %.9f, want %.9f", rows[i].name, p, rows[i].want);
        uint64_t req, acc;
        td_client_window(c, T0 + SEC, &req, &acc, NULL, NULL);
        assert_int_equal(req, rows[i].requests);
        assert_int_equal(acc, rows[i].accepts);
        td_client_destroy(c);
    }
}

static void test_local_drop(void **state)
{
    (void)state;
    td_client_opts o = {0};
    rnd_value = RND_MAX;
    td_client *c = make(&o);
    for (int r = 0; r < 100; r++)
        one(c, T0, r < 25 ? 200 : 429); /* p = 50/101 */
    td_client_call call;
    td_client_call_begin(c, &call, T0, 0);
    rnd_value = 0.49; /* below p: dropped */
    assert_int_equal(td_client_should_send(c, &call, T0), TD_CLIENT_DROPPED);
    assert_int_equal(call.attempts, 0);
    /* the drop is a request too: p = (101 - 50) / 102 now */
    assert_true(fabs(td_client_drop_probability(c, T0) - 51.0 / 102) < 1e-12);
    rnd_value = 0.51; /* above p: sent */
    assert_int_equal(td_client_should_send(c, &call, T0), TD_CLIENT_SEND);
    td_client_counters n;
    td_client_get_counters(c, &n);
    assert_int_equal(n.dropped, 1);
    assert_int_equal(n.sent, 101);
    assert_int_equal(n.accepted, 25);
    td_client_destroy(c);

    /* no_throttle: never drops */
    td_client_opts q = {0};
    q.no_throttle = true;
    rnd_value = 0;
    c = make(&q);
    for (int r = 0; r < 50; r++)
        one(c, T0, 429);
    assert_true(td_client_drop_probability(c, T0) == 0);
    td_client_destroy(c);
}

static void test_budget_caps_retries_at_ten_percent(void **state)
{
    (void)state;
    td_client_opts o = {0};
    o.no_throttle = true;
    o.max_attempts = 100;
    rnd_value = 0;
    td_client *c = make(&o);
    int granted = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t now = T0 + (uint64_t)i * 10 * MS;
        td_client_call call;
        td_client_call_begin(c, &call, now, 0);
        for (;;) {
            assert_int_equal(td_client_should_send(c, &call, now), TD_CLIENT_SEND);
            td_client_decision d = td_client_on_result(c, &call, now, 429, 0, NULL);
            if (d != TD_CLIENT_RETRY) {
                assert_int_equal(d, TD_CLIENT_NO_BUDGET);
                break;
            }
            granted++;
            /* at every point, retries in the window <= 10% of requests */
            uint64_t calls, retries;
            td_client_window(c, now, NULL, NULL, &calls, &retries);
            assert_true(retries * 10 <= calls);
        }
    }
    assert_int_equal(granted, 100);
    td_client_counters n;
    td_client_get_counters(c, &n);
    assert_int_equal(n.retried, 100);
    assert_int_equal(n.budget_exhausted, 1000);
    td_client_destroy(c);

    /* retry_min allows a few retries before the ratio has anything to work on */
    td_client_opts m = {0};
    m.no_throttle = true;
    m.retry_min = 2;
    c = make(&m);
    td_client_call call;
    td_client_call_begin(c, &call, T0, 0);
    td_client_should_send(c, &call, T0);
    assert_int_equal(td_client_on_result(c, &call, T0, 503, 0, NULL), TD_CLIENT_RETRY);
    td_client_should_send(c, &call, T0);
    assert_int_equal(td_client_on_result(c, &call, T0, 503, 0, NULL), TD_CLIENT_RETRY);
    td_client_should_send(c, &call, T0);
    assert_int_equal(td_client_on_result(c, &call, T0, 503, 0, NULL), TD_CLIENT_NO_ATTEMPTS);
    td_client_destroy(c);
}

static void test_which_outcomes_retry(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int status;
        uint64_t retry_after;
        td_client_decision want;
        int accepted;
    } rows[] = {
        {"200 ok", 200, 0, TD_CLIENT_DONE, 1},
        {"400 bad request", 400, 0, TD_CLIENT_DONE, 1},
        {"401 unauthorized", 401, 0, TD_CLIENT_DONE, 1},
        {"404 not found", 404, 0, TD_CLIENT_DONE, 1},
        {"413 too large", 413, 0, TD_CLIENT_DONE, 1},
        {"429 rate limited", 429, 0, TD_CLIENT_RETRY, 0},
        {"429 cost exceeds burst", 429, TD_CLIENT_NEVER, TD_CLIENT_DONE, 0},
        {"500 internal", 500, 0, TD_CLIENT_DONE, 0},
        {"502 bad gateway", 502, 0, TD_CLIENT_DONE, 0},
        {"503 shed", 503, 0, TD_CLIENT_RETRY, 0},
        {"504 gateway timeout", 504, 0, TD_CLIENT_DONE, 0},
        {"connect error", TD_CLIENT_ECONNECT, 0, TD_CLIENT_RETRY, 0},
        {"timeout", TD_CLIENT_ETIMEOUT, 0, TD_CLIENT_DONE, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_client_opts o = {0};
        o.retry_min = 10;
        rnd_value = RND_MAX;
        td_client *c = make(&o);
        td_client_call call;
        td_client_call_begin(c, &call, T0, 0);
        assert_int_equal(td_client_should_send(c, &call, T0), TD_CLIENT_SEND);
        uint64_t w = 12345;
        td_client_decision d =
            td_client_on_result(c, &call, T0, rows[i].status, rows[i].retry_after, &w);
        if (d != rows[i].want)
            fail_msg("%s: %s, want %s", rows[i].name, td_client_decision_name(d),
                     td_client_decision_name(rows[i].want));
        if (d != TD_CLIENT_RETRY)
            assert_int_equal(w, 0);
        td_client_counters n;
        td_client_get_counters(c, &n);
        if ((int)n.accepted != rows[i].accepted)
            fail_msg("%s: accepted %llu", rows[i].name, (unsigned long long)n.accepted);
        td_client_destroy(c);
    }
}

static void test_backoff_bounds(void **state)
{
    (void)state;
    static const uint64_t ceilings_ms[] = {100,  200,  400,   800,   1600,
                                           3200, 6400, 10000, 10000, 10000};
    const size_t n = sizeof ceilings_ms / sizeof ceilings_ms[0];
    for (int hi = 0; hi < 2; hi++) {
        td_client_opts o = {0};
        o.no_throttle = true;
        o.max_attempts = 1000;
        o.retry_min = 1000;
        rnd_value = hi ? RND_MAX : 0;
        td_client *c = make(&o);
        td_client_call call;
        td_client_call_begin(c, &call, T0, 0);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(td_client_should_send(c, &call, T0), TD_CLIENT_SEND);
            uint64_t w = 1;
            assert_int_equal(td_client_on_result(c, &call, T0, 429, 0, &w), TD_CLIENT_RETRY);
            uint64_t want = hi ? ceilings_ms[i] * MS : 0;
            if (w != want)
                fail_msg("retry %zu (%s): wait %llu ns, want %llu", i, hi ? "max" : "min",
                         (unsigned long long)w, (unsigned long long)want);
        }
        td_client_destroy(c);
    }
    /* with the internal generator, every wait lies within the bounds and
     * they are not all equal */
    td_client_opts o = {0};
    o.no_throttle = true;
    o.max_attempts = 4;
    o.retry_min = 100000;
    o.seed = 42;
    td_client *c = NULL;
    assert_int_equal(td_client_create(&o, &c, NULL), TD_OK);
    uint64_t lo = UINT64_MAX, top = 0;
    for (int i = 0; i < 2000; i++) {
        td_client_call call;
        td_client_call_begin(c, &call, T0, 0);
        for (uint32_t a = 0; a < 3; a++) {
            td_client_should_send(c, &call, T0);
            uint64_t w;
            assert_int_equal(td_client_on_result(c, &call, T0, 503, 0, &w), TD_CLIENT_RETRY);
            assert_true(w <= (100 * MS << a));
            if (a == 0) {
                lo = w < lo ? w : lo;
                top = w > top ? w : top;
            }
        }
    }
    assert_true(lo < 5 * MS && top > 95 * MS);
    td_client_destroy(c);
}

static void test_retry_after_honoured(void **state)
{
    (void)state;
    td_client_opts o = {0};
    o.no_throttle = true;
    o.retry_min = 100;
    o.max_attempts = 10;
    rnd_value = 0; /* backoff 0: the wait is the server's */
    td_client *c = make(&o);
    td_client_call call;
    td_client_call_begin(c, &call, T0, 0);
    td_client_should_send(c, &call, T0);
    uint64_t w;
    assert_int_equal(td_client_on_result(c, &call, T0, 429, 2 * SEC, &w), TD_CLIENT_RETRY);
    assert_int_equal(w, 2 * SEC);
    /* backoff above the Retry-After: the longer wins */
    rnd_value = RND_MAX;
    td_client_should_send(c, &call, T0);
    assert_int_equal(td_client_on_result(c, &call, T0, 503, 50 * MS, &w), TD_CLIENT_RETRY);
    assert_int_equal(w, 200 * MS);
    td_client_destroy(c);

    static const struct {
        const char *name;
        int status;
        const char *hdr, *body;
        uint64_t want;
    } rows[] = {
        {"json ms wins", 429, "1", "{\"error\":\"rate_limited\",\"retry_after_ms\":250}", 250 * MS},
        {"header seconds", 503, "3", "{\"error\":\"overloaded\"}", 3 * SEC},
        {"no hint", 503, NULL, "{}", 0},
        {"cost exceeds burst", 429, NULL,
         "{\"error\":\"rate_limited\",\"reason\":\"cost_exceeds_burst\"}", TD_CLIENT_NEVER},
        {"bad header", 429, "soon", "", 0},
        /* the OpenAI shape tenantd answers in (docs/gateway.md "Errors") */
        {"openai shape ms", 429, "1",
         "{\"error\":{\"message\":\"rate limit reached for tenant t; retry after 250 ms\","
         "\"type\":\"rate_limit_error\",\"code\":\"rate_limited\",\"param\":null,"
         "\"tenant\":\"t\",\"retry_after_ms\":250,\"level\":\"tenant\"}}",
         250 * MS},
        {"openai shape burst", 429, NULL,
         "{\"error\":{\"message\":\"m\",\"type\":\"rate_limit_error\",\"code\":"
         "\"cost_exceeds_burst\",\"param\":null}}",
         TD_CLIENT_NEVER},
        {"budget hours away", 429, "36000",
         "{\"error\":{\"message\":\"m\",\"type\":\"insufficient_quota\",\"code\":"
         "\"budget_exceeded\",\"param\":null,\"retry_after_ms\":36000000}}",
         TD_CLIENT_NEVER},
        {"budget a minute away", 429, "30",
         "{\"error\":{\"message\":\"m\",\"type\":\"insufficient_quota\",\"code\":"
         "\"budget_exceeded\",\"param\":null,\"retry_after_ms\":30000}}",
         30 * SEC},
        {"no body", 429, "2", NULL, 2 * SEC},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        uint64_t got = td_client_parse_retry_after(rows[i].status, rows[i].hdr, rows[i].body,
                                                   rows[i].body ? strlen(rows[i].body) : 0);
        if (got != rows[i].want)
            fail_msg("%s: %llu", rows[i].name, (unsigned long long)got);
    }
}

static void test_deadline(void **state)
{
    (void)state;
    td_client_opts o = {0};
    o.no_throttle = true;
    o.retry_min = 100;
    o.max_attempts = 10;
    rnd_value = 0;
    td_client *c = make(&o);
    td_client_call call;
    td_client_call_begin(c, &call, T0, T0 + SEC);
    assert_int_equal(td_client_should_send(c, &call, T0), TD_CLIENT_SEND);
    uint64_t w = 7;
    /* Retry-After past the deadline: give up now rather than sleep past it */
    assert_int_equal(td_client_on_result(c, &call, T0, 429, 2 * SEC, &w), TD_CLIENT_DEADLINE);
    assert_int_equal(w, 0);
    /* a wait that ends before the deadline is granted */
    td_client_call_begin(c, &call, T0, T0 + SEC);
    td_client_should_send(c, &call, T0);
    assert_int_equal(td_client_on_result(c, &call, T0 + 500 * MS, 429, 400 * MS, &w),
                     TD_CLIENT_RETRY);
    assert_int_equal(w, 400 * MS);
    /* at the deadline no attempt starts */
    assert_int_equal(td_client_should_send(c, &call, T0 + SEC), TD_CLIENT_DEADLINE);
    /* backoff alone past the deadline (max jitter 200 ms, 100 ms left) */
    rnd_value = RND_MAX;
    td_client_call_begin(c, &call, T0, T0 + SEC);
    td_client_should_send(c, &call, T0);
    td_client_on_result(c, &call, T0, 503, 0, &w);
    td_client_should_send(c, &call, T0 + 900 * MS);
    assert_int_equal(td_client_on_result(c, &call, T0 + 900 * MS, 503, 0, &w), TD_CLIENT_DEADLINE);
    td_client_counters n;
    td_client_get_counters(c, &n);
    assert_int_equal(n.deadline_exceeded, 3);
    td_client_destroy(c);
}

static void test_attempts(void **state)
{
    (void)state;
    td_client_opts o = {0};
    o.no_throttle = true;
    o.retry_min = 100;
    rnd_value = 0;
    td_client *c = make(&o);
    td_client_call call;
    td_client_call_begin(c, &call, T0, 0);
    for (int a = 0; a < 2; a++) {
        td_client_should_send(c, &call, T0);
        assert_int_equal(td_client_on_result(c, &call, T0, 429, 0, NULL), TD_CLIENT_RETRY);
    }
    td_client_should_send(c, &call, T0);
    assert_int_equal(td_client_on_result(c, &call, T0, 429, 0, NULL), TD_CLIENT_NO_ATTEMPTS);
    assert_int_equal(call.attempts, 3);
    td_client_counters n;
    td_client_get_counters(c, &n);
    assert_int_equal(n.attempts_exhausted, 1);
    assert_int_equal(n.retried, 2);
    td_client_destroy(c);
}

static void test_window_expiry(void **state)
{
    (void)state;
    td_client_opts o = {0};
    rnd_value = RND_MAX;
    td_client *c = make(&o);
    for (int r = 0; r < 100; r++)
        one(c, T0, 429);
    for (int r = 0; r < 10; r++)
        one(c, T0 + 60 * SEC, 429);
    assert_true(fabs(td_client_drop_probability(c, T0 + 60 * SEC) - 110.0 / 111) < 1e-12);
    assert_true(fabs(td_client_drop_probability(c, T0 + 119 * SEC) - 110.0 / 111) < 1e-12);
    /* past 120 s the first hundred have left the window; the last ten remain */
    assert_true(fabs(td_client_drop_probability(c, T0 + 130 * SEC) - 10.0 / 11) < 1e-12);
    assert_true(td_client_drop_probability(c, T0 + 200 * SEC) == 0);
    /* a bucket reused a lap later starts empty */
    one(c, T0 + 240 * SEC, 200);
    uint64_t req;
    td_client_window(c, T0 + 240 * SEC, &req, NULL, NULL, NULL);
    assert_int_equal(req, 1);
    td_client_destroy(c);

    /* a shorter window from the options */
    td_client_opts s = {0};
    s.window_ns = 10 * SEC;
    s.window_buckets = 10;
    c = make(&s);
    one(c, T0, 429);
    assert_true(td_client_drop_probability(c, T0 + 9 * SEC) > 0);
    assert_true(td_client_drop_probability(c, T0 + 10 * SEC) == 0);
    td_client_destroy(c);
}

static void test_bad_options(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        double k, ratio;
        uint32_t buckets;
        uint64_t base, cap;
    } rows[] = {
        {"k below 1", 0.5, 0.1, 0, 0, 0},
        {"ratio above 1", 2, 1.5, 0, 0, 0},
        {"negative ratio", 2, -0.1, 0, 0, 0},
        {"too many buckets", 2, 0.1, 100000, 0, 0},
        {"base above cap", 2, 0.1, 0, 20 * SEC, 10 * SEC},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_client_opts o = {0};
        o.k = rows[i].k;
        o.retry_ratio = rows[i].ratio;
        o.window_buckets = rows[i].buckets;
        o.backoff_base_ns = rows[i].base;
        o.backoff_cap_ns = rows[i].cap;
        td_client *c = NULL;
        td_err err;
        if (td_client_create(&o, &c, &err) != TD_EINVAL)
            fail_msg("%s: accepted", rows[i].name);
        assert_null(c);
        assert_non_null(strstr(err.msg, "client:"));
    }
    td_client *c = NULL;
    assert_int_equal(td_client_create(NULL, &c, NULL), TD_OK);
    td_client_destroy(c);
    td_client_destroy(NULL);
}

/* ---- the blocking transport, with a fake clock ---- */

typedef struct {
    uint64_t now, slept;
    int sleeps;
} fake_clock;

static uint64_t fake_now(void *ctx)
{
    return ((fake_clock *)ctx)->now;
}

static void fake_sleep(void *ctx, uint64_t ns)
{
    fake_clock *f = ctx;
    f->now += ns;
    f->slept += ns;
    f->sleeps++;
}

static void test_do_connect_refused_retries(void **state)
{
    (void)state;
    td_client_opts o = {0};
    o.no_throttle = true;
    o.retry_min = 10;
    o.seed = 7;
    td_client *c = NULL;
    assert_int_equal(td_client_create(&o, &c, NULL), TD_OK);
    fake_clock f = {T0, 0, 0};
    td_client_clock clk = {fake_now, fake_sleep, &f};
    td_http_client_opts http = {0};
    http.timeout_ms = 2000;
    td_client_result res;
    td_err err;
    /* port 1 on loopback: nothing listens, the connection is refused */
    assert_int_equal(td_client_do(c, "http://127.0.0.1:1/v1/chat/completions", "POST",
                                  "application/json", "{}", 2, &http, 0, &clk, &res, &err),
                     TD_OK);
    assert_int_equal(res.decision, TD_CLIENT_NO_ATTEMPTS);
    assert_int_equal(res.status, TD_CLIENT_ECONNECT);
    assert_int_equal(res.attempts, 3);
    assert_int_equal(f.sleeps, 2);
    assert_true(f.slept <= 100 * MS + 200 * MS);
    free(res.body);

    /* a deadline shorter than the backoff gives up with DEADLINE */
    td_client_opts q = {0};
    q.no_throttle = true;
    q.retry_min = 10;
    q.backoff_base_ns = 5 * SEC;
    q.seed = 3;
    td_client *d = NULL;
    assert_int_equal(td_client_create(&q, &d, NULL), TD_OK);
    int deadline = 0;
    for (int i = 0; i < 20; i++) {
        assert_int_equal(td_client_do(d, "http://127.0.0.1:1/", "GET", NULL, NULL, 0, &http, 100,
                                      &clk, &res, &err),
                         TD_OK);
        deadline += res.decision == TD_CLIENT_DEADLINE;
        free(res.body);
    }
    assert_true(deadline > 0);

    assert_int_equal(td_client_do(c, "ftp://x/", "GET", NULL, NULL, 0, NULL, 0, NULL, &res, &err),
                     TD_EINVAL);
    td_client_destroy(c);
    td_client_destroy(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drop_probability_formula),
        cmocka_unit_test(test_local_drop),
        cmocka_unit_test(test_budget_caps_retries_at_ten_percent),
        cmocka_unit_test(test_which_outcomes_retry),
        cmocka_unit_test(test_backoff_bounds),
        cmocka_unit_test(test_retry_after_honoured),
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_attempts),
        cmocka_unit_test(test_window_expiry),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_do_connect_refused_retries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
