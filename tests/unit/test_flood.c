/* test_flood.c - the per-connection refusal streak (gateway/flood.c) on a
 * fake clock: a client that honours Retry-After is never held, one that
 * retries at once is held from the 3rd early refusal and closed at the
 * 32nd, successes and other tenants start over, holds are clamped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/flood.h"

#define MS 1000000ull

/* One answer on the connection: the request arrives at `at` ms, is
 * answered `work` ms later; then what is expected. */
typedef struct {
    uint64_t at, work;
    uint32_t tenant;
    int refused;
    uint64_t retry_ms;
    td_flood_action want;
    uint64_t want_hold_ms;
    uint32_t want_streak;
} step;

typedef struct {
    const char *name;
    step steps[40];
    size_t n;
} scenario;

/* A client that retries the instant each answer arrives, n times. */
static size_t at_once(step *s, size_t n, uint64_t retry_ms)
{
    uint64_t t = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t streak = (uint32_t)i;
        td_flood_action a = streak >= 32  ? TD_FLOOD_CLOSE
                            : streak >= 3 ? TD_FLOOD_HOLD
                                          : TD_FLOOD_ANSWER;
        uint64_t hold = a == TD_FLOOD_ANSWER ? 0 : retry_ms < 50 ? 50 : retry_ms;
        s[i] = (step){t, 0, 1, 1, retry_ms, a, hold, streak};
        t += hold; /* the retry leaves as the answer arrives */
    }
    return n;
}

static void run(const scenario *sc)
{
    td_flood_opts o;
    td_flood_opts_default(&o);
    td_flood_conn s;
    memset(&s, 0, sizeof s);
    for (size_t i = 0; i < sc->n; i++) {
        const step *st = &sc->steps[i];
        uint64_t hold = 12345;
        td_flood_action a = td_flood_answer(&o, &s, st->at * MS, st->tenant, st->refused,
                                            st->retry_ms * MS, (st->at + st->work) * MS, &hold);
        if (a != st->want || hold != st->want_hold_ms * MS || s.streak != st->want_streak) {
            fail_msg("%s, step %zu: action %d hold %llu ms streak %u; want %d, %llu ms, %u",
                     sc->name, i, (int)a, (unsigned long long)(hold / MS), s.streak, (int)st->want,
                     (unsigned long long)st->want_hold_ms, st->want_streak);
        }
    }
}

static void test_table(void **state)
{
    (void)state;
    static const scenario rows[] = {
        {"honours Retry-After: never held",
         {{0, 1, 1, 1, 200, TD_FLOOD_ANSWER, 0, 0},
          {201, 1, 1, 1, 200, TD_FLOOD_ANSWER, 0, 0},
          {402, 1, 1, 1, 200, TD_FLOOD_ANSWER, 0, 0},
          {603, 1, 1, 1, 200, TD_FLOOD_ANSWER, 0, 0},
          {804, 1, 1, 1, 200, TD_FLOOD_ANSWER, 0, 0}},
         5},
        {"within the slack of Retry-After counts as honouring",
         {{0, 0, 1, 1, 100, TD_FLOOD_ANSWER, 0, 0},
          {96, 0, 1, 1, 100, TD_FLOOD_ANSWER, 0, 0},
          {192, 0, 1, 1, 100, TD_FLOOD_ANSWER, 0, 0},
          {288, 0, 1, 1, 100, TD_FLOOD_ANSWER, 0, 0}},
         4},
        {"retries at once: held from the 3rd early refusal, for Retry-After",
         {{0, 0, 1, 1, 200, TD_FLOOD_ANSWER, 0, 0},
          {1, 0, 1, 1, 200, TD_FLOOD_ANSWER, 0, 1},
          {2, 0, 1, 1, 200, TD_FLOOD_ANSWER, 0, 2},
          {3, 0, 1, 1, 200, TD_FLOOD_HOLD, 200, 3},
          {204, 0, 1, 1, 200, TD_FLOOD_HOLD, 200, 4}},
         5},
        {"a success ends the streak",
         {{0, 0, 1, 1, 200, TD_FLOOD_ANSWER, 0, 0},
          {1, 0, 1, 1, 200, TD_FLOOD_ANSWER, 0, 1},
          {2, 0, 1, 1, 200, TD_FLOOD_ANSWER, 0, 2},
          {3, 50, 1, 0, 0, TD_FLOOD_ANSWER, 0, 0},
          {54, 0, 1, 1, 200, TD_FLOOD_ANSWER, 0, 0},
          {55, 0, 1, 1, 200, TD_FLOOD_ANSWER, 0, 1}},
         6},
        {"another tenant's refusal starts a new streak",
         {{0, 0, 1, 1, 200, TD_FLOOD_ANSWER, 0, 0},
          {1, 0, 1, 1, 200, TD_FLOOD_ANSWER, 0, 1},
          {2, 0, 1, 1, 200, TD_FLOOD_ANSWER, 0, 2},
          {3, 0, 2, 1, 200, TD_FLOOD_ANSWER, 0, 0},
          {4, 0, 2, 1, 200, TD_FLOOD_ANSWER, 0, 1}},
         5},
        {"a Retry-After within the slack cannot be ignored",
         {{0, 0, 1, 1, 4, TD_FLOOD_ANSWER, 0, 0},
          {0, 0, 1, 1, 4, TD_FLOOD_ANSWER, 0, 0},
          {1, 0, 1, 1, 4, TD_FLOOD_ANSWER, 0, 0},
          {1, 0, 1, 1, 4, TD_FLOOD_ANSWER, 0, 0}},
         4},
        {"holds are clamped to 50 ms .. 1 s",
         {{0, 0, 1, 1, 20, TD_FLOOD_ANSWER, 0, 0},
          {1, 0, 1, 1, 20, TD_FLOOD_ANSWER, 0, 1},
          {2, 0, 1, 1, 20, TD_FLOOD_ANSWER, 0, 2},
          {3, 0, 1, 1, 20, TD_FLOOD_HOLD, 50, 3}, /* retry at 3 + 50 + 20 */
          {74, 0, 1, 1, 5000, TD_FLOOD_ANSWER, 0, 0},
          {75, 0, 1, 1, 5000, TD_FLOOD_ANSWER, 0, 1},
          {76, 0, 1, 1, 5000, TD_FLOOD_ANSWER, 0, 2},
          {77, 0, 1, 1, 5000, TD_FLOOD_HOLD, 1000, 3}},
         8},
        {"the retry time counts from the held answer, not the decision",
         {{0, 0, 1, 1, 100, TD_FLOOD_ANSWER, 0, 0},
          {1, 0, 1, 1, 100, TD_FLOOD_ANSWER, 0, 1},
          {2, 0, 1, 1, 100, TD_FLOOD_ANSWER, 0, 2},
          {3, 0, 1, 1, 100, TD_FLOOD_HOLD, 100, 3},   /* sent at 103, retry at 203 */
          {150, 0, 1, 1, 100, TD_FLOOD_HOLD, 100, 4}, /* early: 150 < 203 */
          {351, 0, 1, 1, 100, TD_FLOOD_ANSWER, 0, 0}},
         6},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        run(&rows[i]);
}

static void test_closed_at_32(void **state)
{
    (void)state;
    scenario sc = {"retries at once 36 times", {{0}}, 0};
    sc.n = at_once(sc.steps, 36, 200);
    run(&sc);
}

static void test_off(void **state)
{
    (void)state;
    td_flood_opts o;
    td_flood_opts_default(&o);
    o.tarpit_after = 0;
    o.close_after = 0;
    td_flood_conn s;
    memset(&s, 0, sizeof s);
    uint64_t hold;
    for (uint64_t t = 0; t < 100; t++)
        assert_int_equal(td_flood_answer(&o, &s, t * MS, 1, 1, 200 * MS, t * MS, &hold),
                         TD_FLOOD_ANSWER);
    assert_int_equal(hold, 0);
    assert_int_equal(s.streak, 99);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_closed_at_32),
        cmocka_unit_test(test_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
