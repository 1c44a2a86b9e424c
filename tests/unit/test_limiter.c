/* test_limiter.c - limiter.c on a fake clock: GCRA burst after idle, the
 * steady-state rate, exact Retry-After, reconciliation debt and credit,
 * unlimited rates, in-flight caps, and two threads racing on one slot at a
 * fixed instant (the CAS must never admit more than the burst). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "core/limiter.h"

#define MS  1000000ULL
#define SEC 1000000000ULL
#define T0  (1000 * SEC) /* an arbitrary start, far from 0 */

static td_limiter *make(size_t n)
{
    td_limiter *l = NULL;
    assert_int_equal(td_limiter_create(n, &l), TD_OK);
    return l;
}

/* Takes cost at now until refused; the number admitted. */
static int drain(td_limiter *l, const td_rate *r, double cost, uint64_t now)
{
    int n = 0;
    while (td_limiter_take(l, 0, r, cost, now, NULL) == TD_OK && n < 1000000)
        n++;
    return n;
}

static void test_burst_after_idle(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        td_rate rate;
        double cost;
        int admitted;
    } rows[] = {
        {"unit requests, burst 10", {5, SEC, 10}, 1, 10},
        {"cost 3 of burst 10", {5, SEC, 10}, 3, 3},
        {"cost equal to burst", {5, SEC, 10}, 10, 1},
        {"interval not whole ns (7/s)", {7, SEC, 20}, 1, 20},
        {"interval not whole ns (3/s, cost 1)", {3, SEC, 7}, 1, 7},
        {"tokens: 5000/s burst 20000, 100 each", {5000, SEC, 20000}, 100, 200},
        {"fractional cost", {1, SEC, 1}, 0.25, 4},
        {"per minute", {60, 60 * SEC, 5}, 1, 5},
        {"cost above burst never passes", {10, SEC, 5}, 6, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_limiter *l = make(1);
        int got = drain(l, &rows[i].rate, rows[i].cost, T0);
        if (got != rows[i].admitted)
            fail_msg("%s: admitted %d, want %d", rows[i].name, got, rows[i].admitted);
        /* Nothing more at the same instant. */
        assert_int_equal(drain(l, &rows[i].rate, rows[i].cost, T0), 0);
        td_limiter_destroy(l);
    }
}

static void test_cost_above_burst_never(void **state)
{
    (void)state;
    td_limiter *l = make(1);
    td_rate r = {10, SEC, 5};
    uint64_t ra = 0;
    assert_int_equal(td_limiter_take(l, 0, &r, 6, T0, &ra), TD_EAGAIN);
    assert_true(ra == TD_LIMITER_NEVER);
    td_limiter_destroy(l);
}

static void test_steady_rate(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        td_rate rate;
        double cost;
        uint64_t span_ns, step_ns;
        int admitted; /* after the burst is spent, over (T0, T0 + span] */
    } rows[] = {
        {"5/s for 10 s", {5, SEC, 10}, 1, 10 * SEC, MS, 50},
        {"7/s for 10 s", {7, SEC, 20}, 1, 10 * SEC, MS, 70},
        {"3/s for 30 s, 100 us steps", {3, SEC, 4}, 1, 30 * SEC, MS / 10, 90},
        {"5000 tokens/s, 100 each, 10 s", {5000, SEC, 20000}, 100, 10 * SEC, MS, 500},
        {"2.5 units/s at cost 0.5", {2.5, SEC, 3}, 0.5, 4 * SEC, MS, 20},
        {"1 per minute for 10 min", {1, 60 * SEC, 1}, 1, 600 * SEC, SEC, 10},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_limiter *l = make(1);
        drain(l, &rows[i].rate, rows[i].cost, T0);
        int got = 0;
        for (uint64_t t = T0 + rows[i].step_ns; t <= T0 + rows[i].span_ns; t += rows[i].step_ns)
            got += drain(l, &rows[i].rate, rows[i].cost, t);
        if (got != rows[i].admitted)
            fail_msg("%s: admitted %d, want %d", rows[i].name, got, rows[i].admitted);
        td_limiter_destroy(l);
    }
}

static void test_retry_after_exact(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        td_rate rate;
        double spend;  /* taken in unit requests at T0 first */
        double cost;   /* then this is refused */
        uint64_t wait; /* with this Retry-After */
    } rows[] = {
        {"empty, unit", {5, SEC, 10}, 10, 1, 200 * MS},
        {"one left, cost 3", {5, SEC, 10}, 9, 3, 400 * MS},
        {"empty, cost 10 = burst", {5, SEC, 10}, 10, 10, 2 * SEC},
        /* 142857142.857 ns per unit: TAT advances by the floor, so 20 units
         * leave the tenant 17 ns ahead of the exact schedule. */
        {"7/s, interval not whole ns", {7, SEC, 20}, 20, 1, 142857126},
        {"tokens", {5000, SEC, 20000}, 20000, 100, 20 * MS},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const td_rate *r = &rows[i].rate;
        td_limiter *l = make(1);
        for (int k = 0; k < (int)rows[i].spend; k++)
            assert_int_equal(td_limiter_take(l, 0, r, 1, T0, NULL), TD_OK);
        uint64_t ra = 0, ra2 = 0;
        if (td_limiter_take(l, 0, r, rows[i].cost, T0, &ra) != TD_EAGAIN || ra != rows[i].wait)
            fail_msg("%s: retry after %llu, want %llu", rows[i].name, (unsigned long long)ra,
                     (unsigned long long)rows[i].wait);
        /* One ns early is still too early; and it says 1 ns. */
        assert_int_equal(td_limiter_take(l, 0, r, rows[i].cost, T0 + ra - 1, &ra2), TD_EAGAIN);
        assert_true(ra2 == 1);
        assert_int_equal(td_limiter_take(l, 0, r, rows[i].cost, T0 + ra, NULL), TD_OK);
        td_limiter_destroy(l);
    }
}

static void test_adjust(void **state)
{
    (void)state;
    /* 10 units/s, burst 10: 100 ms per unit, 1 s of tolerance. */
    static const td_rate rate = {10, SEC, 10};
    static const struct {
        const char *name;
        int taken;    /* unit takes at T0 */
        double delta; /* then td_limiter_adjust at T0 + at */
        uint64_t at;
        int admitted;   /* unit takes that then pass at T0 + at */
        uint64_t retry; /* and the Retry-After of the next */
    } rows[] = {
        {"debt: 5 taken, 10 more charged", 5, 10, 0, 0, 600 * MS},
        {"debt on an idle tenant", 0, 15, 0, 0, 600 * MS},
        {"small debt", 5, 1, 0, 4, 100 * MS},
        {"credit gives back units", 10, -4, 0, 4, 100 * MS},
        {"credit of everything", 10, -10, 0, 10, 100 * MS},
        {"credit beyond idle is capped", 2, -50, 0, 10, 100 * MS},
        {"credit to an idle tenant is nothing", 0, -100, 0, 10, 100 * MS},
        {"credit after time passed", 10, -3, 500 * MS, 8, 100 * MS},
        {"zero delta", 3, 0, 0, 7, 100 * MS},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_limiter *l = make(1);
        for (int k = 0; k < rows[i].taken; k++)
            assert_int_equal(td_limiter_take(l, 0, &rate, 1, T0, NULL), TD_OK);
        uint64_t now = T0 + rows[i].at, ra = 0;
        td_limiter_adjust(l, 0, &rate, rows[i].delta, now);
        int got = 0;
        while (td_limiter_take(l, 0, &rate, 1, now, &ra) == TD_OK)
            got++;
        if (got != rows[i].admitted || ra != rows[i].retry)
            fail_msg("%s: admitted %d retry %llu, want %d retry %llu", rows[i].name, got,
                     (unsigned long long)ra, rows[i].admitted, (unsigned long long)rows[i].retry);
        td_limiter_destroy(l);
    }
}

static void test_reset_and_slots(void **state)
{
    (void)state;
    td_limiter *l = make(3);
    td_rate r = {1, SEC, 2};
    assert_int_equal(td_limiter_slots(l), 3);
    assert_int_equal(drain(l, &r, 1, T0), 2);
    /* Slots are independent. */
    assert_int_equal(td_limiter_take(l, 1, &r, 1, T0, NULL), TD_OK);
    td_limiter_reset(l, 0);
    assert_int_equal(drain(l, &r, 1, T0), 2);
    td_limiter_reset(l, 99); /* ignored */
    td_limiter_destroy(l);
    td_limiter_destroy(NULL);
    assert_int_equal(td_limiter_create(0, &l), TD_EINVAL);
}

static void test_unlimited_and_invalid(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        td_rate rate;
        int null_rate;
        size_t slot;
        double cost;
        td_status want;
    } rows[] = {
        {"cost 0 rate is unlimited", {0, SEC, 0}, 0, 0, 1e12, TD_OK},
        {"negative rate is unlimited", {-1, SEC, 0}, 0, 0, 5, TD_OK},
        {"no rate is unlimited", {0, 0, 0}, 1, 0, 5, TD_OK},
        {"zero cost always passes", {1, SEC, 1}, 0, 0, 0, TD_OK},
        {"negative cost", {1, SEC, 1}, 0, 0, -1, TD_EINVAL},
        {"slot out of range", {1, SEC, 1}, 0, 2, 1, TD_EINVAL},
        {"slot out of range, unlimited", {0, 0, 0}, 1, 2, 1, TD_EINVAL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_limiter *l = make(2);
        const td_rate *r = rows[i].null_rate ? NULL : &rows[i].rate;
        for (int k = 0; k < 1000; k++) {
            td_status st = td_limiter_take(l, rows[i].slot, r, rows[i].cost, T0, NULL);
            if (st != rows[i].want)
                fail_msg("%s: take %d returned %d, want %d", rows[i].name, k, st, rows[i].want);
        }
        td_limiter_adjust(l, 0, r, 1e9, T0); /* no-op when unlimited */
        td_limiter_destroy(l);
    }
}

static void test_concurrency_cap(void **state)
{
    (void)state;
    td_limiter *l = make(2);
    assert_int_equal(td_limiter_acquire(l, 0, 2), TD_OK);
    assert_int_equal(td_limiter_acquire(l, 0, 2), TD_OK);
    assert_int_equal(td_limiter_acquire(l, 0, 2), TD_EAGAIN);
    assert_int_equal(td_limiter_inflight(l, 0), 2);
    assert_int_equal(td_limiter_inflight(l, 1), 0);
    td_limiter_release(l, 0);
    assert_int_equal(td_limiter_acquire(l, 0, 2), TD_OK);
    /* A lower limit after a reload refuses until enough have finished. */
    assert_int_equal(td_limiter_acquire(l, 0, 1), TD_EAGAIN);
    td_limiter_release(l, 0);
    assert_int_equal(td_limiter_acquire(l, 0, 1), TD_EAGAIN);
    td_limiter_release(l, 0);
    assert_int_equal(td_limiter_acquire(l, 0, 1), TD_OK);
    td_limiter_release(l, 0);
    assert_int_equal(td_limiter_inflight(l, 0), 0);
    /* 0 = unlimited, still counted. */
    for (int k = 0; k < 100; k++)
        assert_int_equal(td_limiter_acquire(l, 1, 0), TD_OK);
    assert_int_equal(td_limiter_inflight(l, 1), 100);
    for (int k = 0; k < 100; k++)
        td_limiter_release(l, 1);
    assert_int_equal(td_limiter_inflight(l, 1), 0);
    assert_int_equal(td_limiter_acquire(l, 2, 1), TD_EINVAL);
    assert_int_equal(td_limiter_inflight(l, 2), 0);
    td_limiter_release(l, 2); /* ignored */
    td_limiter_destroy(l);
}

/* ---- two threads on one slot ---- */

#define RACE_TRIES 200000
#define RACE_BURST 1000
#define RACE_CAP   8

typedef struct {
    td_limiter *l;
    int admitted;
    atomic_int *inflight_seen_max;
} racer;

static void *race(void *arg)
{
    racer *x = arg;
    td_rate r = {1, SEC, RACE_BURST};
    for (int k = 0; k < RACE_TRIES; k++) {
        if (td_limiter_take(x->l, 0, &r, 1, T0, NULL) == TD_OK)
            x->admitted++;
        if (td_limiter_acquire(x->l, 1, RACE_CAP) == TD_OK) {
            int seen = (int)td_limiter_inflight(x->l, 1);
            int max = atomic_load(x->inflight_seen_max);
            while (seen > max && !atomic_compare_exchange_weak(x->inflight_seen_max, &max, seen))
                ;
            td_limiter_release(x->l, 1);
        }
    }
    return NULL;
}

static void test_two_threads_no_over_admission(void **state)
{
    (void)state;
    td_limiter *l = make(2);
    atomic_int max_seen = 0;
    racer a = {l, 0, &max_seen}, b = {l, 0, &max_seen};
    pthread_t ta, tb;
    assert_int_equal(pthread_create(&ta, NULL, race, &a), 0);
    assert_int_equal(pthread_create(&tb, NULL, race, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_int_equal(a.admitted + b.admitted, RACE_BURST);
    assert_true(atomic_load(&max_seen) <= RACE_CAP);
    assert_int_equal(td_limiter_inflight(l, 1), 0);
    td_limiter_destroy(l);
}

/* What explain reports: the units a tenant could take right now. */
static void test_available(void **state)
{
    (void)state;
    td_limiter *l = make(2);
    td_rate r = {10, SEC, 20}; /* 10 per second, burst 20 */
    assert_true(td_limiter_available(l, 0, &r, T0) == 20);
    assert_int_equal(td_limiter_take(l, 0, &r, 15, T0, NULL), TD_OK);
    assert_true(td_limiter_available(l, 0, &r, T0) > 4.999 &&
                td_limiter_available(l, 0, &r, T0) < 5.001);
    /* half a second later, 5 units came back */
    double a = td_limiter_available(l, 0, &r, T0 + SEC / 2);
    assert_true(a > 9.999 && a < 10.001);
    /* in debt (reconciled above the burst): nothing available, never negative */
    td_limiter_adjust(l, 0, &r, 40, T0);
    assert_true(td_limiter_available(l, 0, &r, T0) == 0);
    /* another slot is untouched; unlimited reports the burst as given */
    assert_true(td_limiter_available(l, 1, &r, T0) == 20);
    td_rate unlimited = {0, SEC, 7};
    assert_true(td_limiter_available(l, 0, &unlimited, T0) == 7);
    assert_true(td_limiter_available(l, 5, &r, T0) == 0); /* out of range */
    td_limiter_destroy(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_available),
        cmocka_unit_test(test_burst_after_idle),
        cmocka_unit_test(test_cost_above_burst_never),
        cmocka_unit_test(test_steady_rate),
        cmocka_unit_test(test_retry_after_exact),
        cmocka_unit_test(test_adjust),
        cmocka_unit_test(test_reset_and_slots),
        cmocka_unit_test(test_unlimited_and_invalid),
        cmocka_unit_test(test_concurrency_cap),
        cmocka_unit_test(test_two_threads_no_over_admission),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
