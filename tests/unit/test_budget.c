/* test_budget.c - money budgets: calendar periods in UTC (month ends, leap
 * years, weeks from Monday, before 1970), RFC 3339 printing, and the spend
 * counters: reservation up to the limit and no further, shadow (forced)
 * reservations, settlement to the real cost, release, period roll-over, a
 * settle after its period ended, replay of past records, and many threads
 * reserving at once never passing the limit. Expected times come from
 * `date -u -d ... +%s`. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/budget.h"

static void test_period_bounds(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        td_period p;
        int64_t t, start, end;
    } rows[] = {
        {"leap day in its month", TD_PERIOD_MONTH, 1709211600, 1706745600, 1709251200},
        {"leap day's day", TD_PERIOD_DAY, 1709211600, 1709164800, 1709251200},
        {"last second of Feb, common year", TD_PERIOD_MONTH, 1677628799, 1675209600, 1677628800},
        {"first second of March", TD_PERIOD_MONTH, 1677628800, 1677628800, 1680307200},
        {"December ends in the next year", TD_PERIOD_MONTH, 1735689599, 1733011200, 1735689600},
        {"2100 is not a leap year", TD_PERIOD_MONTH, 4107492000, 4105123200, 4107542400},
        {"2000 is a leap year", TD_PERIOD_MONTH, 951782400, 949363200, 951868800},
        {"Wednesday's week starts Monday", TD_PERIOD_WEEK, 1796233200, 1795996800, 1796601600},
        {"Sunday 23:59:59 is the week before", TD_PERIOD_WEEK, 1795996799, 1795392000, 1795996800},
        {"Monday 00:00 starts a week", TD_PERIOD_WEEK, 1795996800, 1795996800, 1796601600},
        {"week across 1970", TD_PERIOD_WEEK, -43200, -259200, 345600},
        {"day before 1970", TD_PERIOD_DAY, -43200, -86400, 0},
        {"month before 1970", TD_PERIOD_MONTH, -43200, -2678400, 0},
        {"day", TD_PERIOD_DAY, 1796233200, 1796169600, 1796256000},
        {"December 2026", TD_PERIOD_MONTH, 1796233200, 1796083200, 1798761600},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int64_t s = 0, e = 0;
        td_period_bounds(rows[i].p, rows[i].t, &s, &e);
        if (s != rows[i].start || e != rows[i].end)
            fail_msg("%s: [%lld, %lld), want [%lld, %lld)", rows[i].name, (long long)s,
                     (long long)e, (long long)rows[i].start, (long long)rows[i].end);
    }
    char buf[32];
    td_rfc3339(1798761600, buf, sizeof buf);
    assert_string_equal(buf, "2027-01-01T00:00:00Z");
    td_rfc3339(1709211600, buf, sizeof buf);
    assert_string_equal(buf, "2024-02-29T13:00:00Z");
    td_period p;
    assert_int_equal(td_period_parse("week", &p), TD_OK);
    assert_int_equal(p, TD_PERIOD_WEEK);
    assert_string_equal(td_period_name(TD_PERIOD_MONTH), "month");
    assert_int_equal(td_period_parse("monthly", &p), TD_EINVAL);
    assert_int_equal(td_period_parse(NULL, &p), TD_EINVAL);
}

#define NOW 1796233200 /* 2026-12-02T17:40:00Z, a Wednesday */

static void test_reserve_settle_release(void **state)
{
    (void)state;
    td_budgets *b = NULL;
    assert_int_equal(td_budgets_create(4, &b), TD_OK);
    int64_t start = 0, spent = -1;
    /* limit 100: 60 fits, 50 more does not (nothing charged), 40 does */
    assert_int_equal(td_budgets_reserve(b, 1, TD_PERIOD_DAY, 100, 60, false, NOW, &start, &spent),
                     TD_OK);
    assert_int_equal(spent, 0);
    assert_int_equal(start, 1796169600);
    assert_int_equal(td_budgets_reserve(b, 1, TD_PERIOD_DAY, 100, 50, false, NOW, NULL, &spent),
                     TD_EQUOTA);
    assert_int_equal(spent, 60);
    assert_int_equal(td_budgets_spent(b, 1, TD_PERIOD_DAY, NOW), 60);
    /* the first request really cost 30: settle -30 */
    td_budgets_settle(b, 1, TD_PERIOD_DAY, start, -30);
    assert_int_equal(td_budgets_spent(b, 1, TD_PERIOD_DAY, NOW), 30);
    assert_int_equal(td_budgets_reserve(b, 1, TD_PERIOD_DAY, 100, 50, false, NOW, NULL, NULL),
                     TD_OK);
    /* a failure releases its whole reservation */
    td_budgets_settle(b, 1, TD_PERIOD_DAY, start, -50);
    assert_int_equal(td_budgets_spent(b, 1, TD_PERIOD_DAY, NOW), 30);
    /* exactly at the limit passes; one over does not */
    assert_int_equal(td_budgets_reserve(b, 1, TD_PERIOD_DAY, 100, 70, false, NOW, NULL, NULL),
                     TD_OK);
    assert_int_equal(td_budgets_reserve(b, 1, TD_PERIOD_DAY, 100, 1, false, NOW, NULL, NULL),
                     TD_EQUOTA);
    /* a zero-cost request at the limit still passes; past it, not */
    assert_int_equal(td_budgets_reserve(b, 1, TD_PERIOD_DAY, 100, 0, false, NOW, NULL, NULL),
                     TD_OK);
    /* shadow: forced past the limit, counted */
    assert_int_equal(td_budgets_reserve(b, 1, TD_PERIOD_DAY, 100, 25, true, NOW, NULL, &spent),
                     TD_OK);
    assert_int_equal(spent, 100);
    assert_int_equal(td_budgets_spent(b, 1, TD_PERIOD_DAY, NOW), 125);
    assert_int_equal(td_budgets_reserve(b, 1, TD_PERIOD_DAY, 100, 0, false, NOW, NULL, NULL),
                     TD_EQUOTA);
    /* other periods and slots are their own counters */
    assert_int_equal(td_budgets_spent(b, 1, TD_PERIOD_MONTH, NOW), 0);
    assert_int_equal(td_budgets_spent(b, 2, TD_PERIOD_DAY, NOW), 0);
    /* settling never goes below zero */
    td_budgets_settle(b, 1, TD_PERIOD_DAY, start, -1000);
    assert_int_equal(td_budgets_spent(b, 1, TD_PERIOD_DAY, NOW), 0);
    /* bad input */
    assert_int_equal(td_budgets_reserve(b, 4, TD_PERIOD_DAY, 100, 1, false, NOW, NULL, NULL),
                     TD_EINVAL);
    assert_int_equal(td_budgets_reserve(b, 0, TD_PERIOD_DAY, 100, -1, false, NOW, NULL, NULL),
                     TD_EINVAL);
    td_budgets_destroy(b);
    assert_int_equal(td_budgets_create(0, &b), TD_EINVAL);
    td_budgets_destroy(NULL);
}

static void test_period_rollover(void **state)
{
    (void)state;
    td_budgets *b = NULL;
    assert_int_equal(td_budgets_create(1, &b), TD_OK);
    int64_t start = 0;
    const int64_t sunday_late = 1795996799, monday = 1795996800;
    assert_int_equal(
        td_budgets_reserve(b, 0, TD_PERIOD_WEEK, 100, 90, false, sunday_late, &start, NULL), TD_OK);
    assert_int_equal(td_budgets_spent(b, 0, TD_PERIOD_WEEK, sunday_late), 90);
    /* Monday: a new week, the spend starts over */
    assert_int_equal(td_budgets_spent(b, 0, TD_PERIOD_WEEK, monday), 0);
    int64_t start2 = 0;
    assert_int_equal(
        td_budgets_reserve(b, 0, TD_PERIOD_WEEK, 100, 90, false, monday, &start2, NULL), TD_OK);
    assert_int_equal(start2, monday);
    /* Sunday's request settles after midnight: its cost was last week's */
    td_budgets_settle(b, 0, TD_PERIOD_WEEK, start, 50);
    assert_int_equal(td_budgets_spent(b, 0, TD_PERIOD_WEEK, monday), 90);
    td_budgets_settle(b, 0, TD_PERIOD_WEEK, start2, -40);
    assert_int_equal(td_budgets_spent(b, 0, TD_PERIOD_WEEK, monday), 50);
    /* replay at start-up: only records of the current period count */
    td_budgets_replay(b, 0, TD_PERIOD_WEEK, sunday_late, 1000, monday);
    td_budgets_replay(b, 0, TD_PERIOD_WEEK, monday + 10, 7, monday + 20);
    assert_int_equal(td_budgets_spent(b, 0, TD_PERIOD_WEEK, monday + 20), 57);
    td_budgets_replay(b, 0, TD_PERIOD_MONTH, sunday_late, 5, monday); /* Nov 29 in Nov 30 */
    td_budgets_replay(b, 0, TD_PERIOD_MONTH, monday, 5, 1796083200);  /* Nov 30 in Dec 1 */
    assert_int_equal(td_budgets_spent(b, 0, TD_PERIOD_MONTH, monday), 5);
    assert_int_equal(td_budgets_spent(b, 0, TD_PERIOD_MONTH, 1796083200), 0);
    td_budgets_destroy(b);
}

/* Many threads reserve 7 at a time against 1000: exactly floor(1000/7)
 * reservations pass, so concurrency never overspends. */
typedef struct {
    td_budgets *b;
    int ok;
} race_arg;

static void *racer(void *p)
{
    race_arg *a = p;
    for (int i = 0; i < 500; i++)
        if (td_budgets_reserve(a->b, 0, TD_PERIOD_MONTH, 1000, 7, false, NOW, NULL, NULL) == TD_OK)
            a->ok++;
    return NULL;
}

static void test_concurrent_reservations(void **state)
{
    (void)state;
    td_budgets *b = NULL;
    assert_int_equal(td_budgets_create(1, &b), TD_OK);
    enum { N = 8 };
    pthread_t th[N];
    race_arg a[N];
    for (int i = 0; i < N; i++) {
        a[i] = (race_arg){b, 0};
        assert_int_equal(pthread_create(&th[i], NULL, racer, &a[i]), 0);
    }
    int ok = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ok += a[i].ok;
    }
    assert_int_equal(ok, 1000 / 7);
    assert_int_equal(td_budgets_spent(b, 0, TD_PERIOD_MONTH, NOW), 1000 / 7 * 7);
    td_budgets_destroy(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_period_bounds),
        cmocka_unit_test(test_reserve_settle_release),
        cmocka_unit_test(test_period_rollover),
        cmocka_unit_test(test_concurrent_reservations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
