/* test_history.c - the dashboard's per-tenant rings of the last hour: what
 * each sample adds to which bucket, restarts of counters and periods,
 * buckets that fall out of the hour, the p99 of a bucket, the budget burn
 * window, and the bound on tenants. One row per case. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/history.h"

#define S 1000000000LL

typedef struct {
    int64_t t_s;
    uint64_t accepted, rate_limited, upstream_error, fast; /* fast: latency bucket 2 (1-2.5 ms) */
    int64_t cost, spend;
    int period;
    int64_t pstart; /* the cost's and the spend's period (0 unless said) */
} step;

typedef struct {
    int ago; /* buckets before the one of the query time */
    uint32_t accepted, limited, errors;
    int64_t cost, spend;
    double p99_ms; /* < 0: NaN (no request reached the upstream) */
} expect;

typedef struct {
    const char *name;
    step steps[6];
    size_t nsteps;
    int64_t query_s;
    expect ex[4];
    size_t nex;
} row;

static const row rows[] = {
    {"first sample counts requests from 0, notes cost and spend",
     {{5, 3, 1, 0, 3, 900, 400, 2, 0}}, 1, 5,
     {{0, 3, 1, 0, 0, 0, 1.0 + 1.5 * 0.99}}, 1},
    {"deltas go to the bucket of their sample",
     {{0, 0, 0, 0, 0, 100, 10, 2, 0}, {12, 4, 0, 1, 0, 160, 40, 2, 0}, {25, 6, 2, 1, 0, 200, 45, 2, 0}}, 3, 25,
     {{0, 2, 2, 0, 40, 5, -1}, {1, 4, 0, 1, 60, 30, -1}, {2, 0, 0, 0, 0, 0, -1}}, 3},
    {"quiet buckets read empty, the newest one too",
     {{0, 0, 0, 0, 0, 0, 0, 2, 0}, {3, 5, 0, 0, 0, 0, 0, 2, 0}}, 2, 45,
     {{0, 0, 0, 0, 0, 0, -1}, {4, 5, 0, 0, 0, 0, -1}}, 2},
    {"a bucket an hour old is gone",
     {{0, 0, 0, 0, 0, 0, 0, 2, 0}, {3, 5, 0, 0, 0, 0, 0, 2, 0}, {3603, 7, 0, 0, 0, 0, 0, 2, 0}}, 3, 3603,
     {{0, 2, 0, 0, 0, 0, -1}, {TD_HISTORY_BUCKETS - 1, 0, 0, 0, 0, 0, -1}}, 2},
    {"a new period: all of its cost is added",
     {{0, 0, 0, 0, 0, 5000, 0, 2, 0}, {11, 0, 0, 0, 0, 30, 0, 2, 1}}, 2, 11, {{0, 0, 0, 0, 30, 0, -1}}, 1},
    {"a dip in the period is no cost, nor is its return",
     {{0, 0, 0, 0, 0, 100, 0, 2, 0}, {11, 0, 0, 0, 0, 90, 0, 2, 0}, {21, 0, 0, 0, 0, 130, 0, 2, 0}}, 3, 21,
     {{1, 0, 0, 0, 0, 0, -1}, {0, 0, 0, 0, 30, 0, -1}}, 2},
    {"a reservation given back: spend counts above its highest",
     {{0, 0, 0, 0, 0, 0, 10, 1, 0}, {11, 0, 0, 0, 0, 0, 50, 1, 0}, {21, 0, 0, 0, 0, 0, 30, 1, 0},
      {31, 0, 0, 0, 0, 0, 70, 1, 0}}, 4, 31,
     {{2, 0, 0, 0, 0, 40, -1}, {1, 0, 0, 0, 0, 0, -1}, {0, 0, 0, 0, 0, 20, -1}}, 3},
    {"a new budget period: all of its spend",
     {{0, 0, 0, 0, 0, 0, 900, 0, 0}, {11, 0, 0, 0, 0, 0, 25, 0, 86400}}, 2, 11,
     {{0, 0, 0, 0, 0, 25, -1}}, 1},
    {"a counter lower than before restarted from 0",
     {{0, 9, 0, 0, 0, 0, 0, 2, 0}, {11, 2, 0, 0, 0, 0, 0, 2, 0}}, 2, 11, {{0, 2, 0, 0, 0, 0, -1}}, 1},
    {"another budget period: the spend is only noted",
     {{0, 0, 0, 0, 0, 0, 100, 2, 0}, {11, 0, 0, 0, 0, 0, 700, 0, 0}, {21, 0, 0, 0, 0, 0, 750, 0, 0}}, 3, 21,
     {{1, 0, 0, 0, 0, 0, -1}, {0, 0, 0, 0, 0, 50, -1}}, 2},
    {"a tenant without a budget has no spend",
     {{0, 0, 0, 0, 0, 0, 0, -1, 0}, {11, 0, 0, 0, 0, 0, 90, -1, 0}}, 2, 11, {{0, 0, 0, 0, 0, 0, -1}}, 1},
    {"the p99 of a bucket is of its own requests only",
     {{0, 100, 0, 0, 100, 0, 0, 2, 0}, {10, 100, 0, 1, 100, 0, 0, 2, 0}}, 2, 10,
     {{0, 0, 0, 1, 0, 0, -1}, {1, 100, 0, 0, 0, 0, 1.0 + 1.5 * 0.99}}, 2},
    {"a clock that went back counts into the newest bucket",
     {{30, 0, 0, 0, 0, 0, 0, 2, 0}, {5, 4, 0, 0, 0, 0, 0, 2, 0}}, 2, 30, {{0, 4, 0, 0, 0, 0, -1}}, 1},
};

static td_history_sample sample_of(const step *st)
{
    td_history_sample s;
    memset(&s, 0, sizeof s);
    s.out[TD_OUT_ACCEPTED] = st->accepted;
    s.out[TD_OUT_RATE_LIMITED] = st->rate_limited;
    s.out[TD_OUT_UPSTREAM_ERROR] = st->upstream_error;
    s.latency[2] = st->fast;
    s.cost_nano = st->cost;
    s.cost_period = st->pstart;
    s.spend_nano = st->spend;
    s.spend_start = st->pstart;
    s.spend_period = st->period;
    return s;
}

static void test_rows(void **state)
{
    (void)state;
    static td_history_point pts[TD_HISTORY_BUCKETS];
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        const row *w = &rows[r];
        td_history *h = NULL;
        assert_int_equal(td_history_create(4, &h), TD_OK);
        for (size_t i = 0; i < w->nsteps; i++) {
            td_history_sample s = sample_of(&w->steps[i]);
            assert_int_equal(td_history_record(h, "alpha", &s, w->steps[i].t_s * S + 1), TD_OK);
        }
        assert_true(td_history_series(h, "alpha", w->query_s * S + 1, pts));
        for (size_t i = 0; i < w->nex; i++) {
            const expect *x = &w->ex[i];
            const td_history_point *p = &pts[TD_HISTORY_BUCKETS - 1 - x->ago];
            print_message("%s: %d buckets ago\n", w->name, x->ago);
            assert_int_equal(p->accepted, x->accepted);
            assert_int_equal(p->limited, x->limited);
            assert_int_equal(p->errors, x->errors);
            assert_int_equal(p->cost_nano, x->cost);
            assert_int_equal(p->spend_nano, x->spend);
            if (x->p99_ms < 0)
                assert_true(isnan(p->p99_ms));
            else
                assert_true(fabs(p->p99_ms - x->p99_ms) < 1e-4);
        }
        td_history_destroy(h);
    }
}

static void test_unknown_tenant_and_bound(void **state)
{
    (void)state;
    static td_history_point pts[TD_HISTORY_BUCKETS];
    td_history *h = NULL;
    assert_int_equal(td_history_create(0, &h), TD_EINVAL);
    assert_int_equal(td_history_create(2, &h), TD_OK);
    td_history_sample s;
    memset(&s, 0, sizeof s);
    s.out[TD_OUT_SHED] = 3;
    assert_int_equal(td_history_record(h, "a", &s, 1), TD_OK);
    assert_int_equal(td_history_record(h, "b", &s, 1), TD_OK);
    assert_int_equal(td_history_record(h, "c", &s, 1), TD_EQUOTA);
    assert_int_equal(td_history_record(h, "a", &s, 2), TD_OK); /* known: still kept */
    assert_false(td_history_series(h, "c", 1, pts));
    assert_int_equal(pts[TD_HISTORY_BUCKETS - 1].shed, 0);
    assert_true(td_history_series(h, "b", 1, pts));
    assert_int_equal(pts[TD_HISTORY_BUCKETS - 1].shed, 3);
    td_history_destroy(h);
    td_history_destroy(NULL);
}

static void test_spend_window(void **state)
{
    (void)state;
    td_history *h = NULL;
    assert_int_equal(td_history_create(1, &h), TD_OK);
    td_history_sample s;
    memset(&s, 0, sizeof s);
    s.spend_period = 1;
    int64_t covered = -1;
    assert_int_equal(td_history_spend(h, "x", 0, 1800 * S, &covered), 0);
    assert_int_equal(covered, 0);
    /* 10 per minute for 40 minutes from t=100 s */
    for (int64_t m = 0; m <= 40; m++) {
        s.spend_nano = 10 * m;
        assert_int_equal(td_history_record(h, "x", &s, (100 + 60 * m) * S), TD_OK);
    }
    int64_t now = (100 + 60 * 40) * S;
    int64_t spent = td_history_spend(h, "x", now, 1800 * S, &covered);
    /* the window is whole buckets: 180 of them, from bucket (now/10 - 179) */
    assert_int_equal(covered, now - (now / (10 * S) - 179) * 10 * S);
    assert_int_equal(spent, 300);
    /* younger than the window: covered from the first sample */
    spent = td_history_spend(h, "x", 700 * S, 1800 * S, &covered);
    (void)spent;
    assert_int_equal(covered, 600 * S);
    td_history_destroy(h);
}

static void test_quantile(void **state)
{
    (void)state;
    static const uint64_t bounds[3] = {1000000, 2000000, 4000000}; /* 1, 2, 4 ms */
    static const struct {
        const char *name;
        uint64_t counts[4];
        double q, want; /* want < 0: NaN */
    } qs[] = {
        {"empty", {0, 0, 0, 0}, 0.99, -1},
        {"all in the first bucket", {10, 0, 0, 0}, 0.5, 0.5},
        {"interpolated in the second", {50, 50, 0, 0}, 0.75, 1.5},
        {"in +Inf: the largest bound", {0, 0, 0, 5}, 0.99, 4.0},
        {"p99 of 100", {0, 90, 10, 0}, 0.99, 2.0 + 2.0 * 0.9},
    };
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
        double got = td_history_quantile_ms(qs[i].counts, bounds, 3, qs[i].q);
        print_message("%s: %g\n", qs[i].name, got);
        if (qs[i].want < 0)
            assert_true(isnan(got));
        else
            assert_true(fabs(got - qs[i].want) < 1e-9);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_unknown_tenant_and_bound),
        cmocka_unit_test(test_spend_window),
        cmocka_unit_test(test_quantile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
