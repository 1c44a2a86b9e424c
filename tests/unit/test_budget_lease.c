/* test_budget_lease.c - the arithmetic of budgets shared through Redis:
 * chunk sizing, the ask (claim rounded up, need and want), the grant (the
 * C twin of the Lua script: within the limit, partial at the end, forced
 * for shadow budgets, a surplus of an earlier run counted), the lease
 * after an answer, settles, give-backs and the fallback share; and two
 * replicas sharing one record never passing the budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gateway/budget_lease.h"

#define NANO  1000000000LL
#define MICRO 1000LL /* nano per micro */

static void test_chunk(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int64_t limit, cost, want;
    } rows[] = {
        {"5% of a 1.00 budget when below 64 estimates", NANO, 23000000, 50000000},
        {"64 estimates when below 5%", 100 * NANO, 23000000, 64 * 23000000},
        {"never less than the cost", NANO / 100, 23000000, 23000000},
        {"a zero budget leases the cost", 0, 5000, 5000},
        {"at least one micro-unit", NANO, 0, MICRO},
        {"negative inputs count as zero", -5, -5, MICRO},
        {"huge cost does not overflow", INT64_MAX / 2, INT64_MAX / 4, INT64_MAX / 4},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int64_t got = td_budget_chunk(rows[i].limit, rows[i].cost);
        if (got != rows[i].want)
            fail_msg("%s: chunk %lld, want %lld", rows[i].name, (long long)got,
                     (long long)rows[i].want);
    }
}

static void test_ask(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int64_t own, lease, cost, chunk;
        td_budget_ask want;
    } rows[] = {
        {"first ask: nothing spent, nothing held", 0, 0, 23000000, 50000000, {0, 23000, 50000}},
        {"the lease held counts toward the cost", 46000000, 10000000, 23000000, 50000000,
         {56000, 13000, 40000}},
        {"a debt is not held: claim is the spend", 50000000, -4000000, 23000000, 50000000,
         {50000, 23000, 50000}},
        {"spend rounds up: the claim covers it", 1, 0, 999, 0, {1, 0, 0}},
        {"a cost of a fraction of a micro rounds up", 0, 0, 1, MICRO, {0, 1, 1}},
        {"pure sync: no cost, no chunk", 7 * MICRO, 3 * MICRO, 0, 0, {10, 0, 0}},
        {"lease covering the chunk asks nothing more", 0, 60000000, 0, 50000000,
         {60000, 0, 0}},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_budget_ask a;
        td_budget_lease_ask(rows[i].own, rows[i].lease, rows[i].cost, rows[i].chunk, &a);
        if (a.claimed != rows[i].want.claimed || a.need != rows[i].want.need ||
            a.want != rows[i].want.want)
            fail_msg("%s: {%lld, %lld, %lld}, want {%lld, %lld, %lld}", rows[i].name,
                     (long long)a.claimed, (long long)a.need, (long long)a.want,
                     (long long)rows[i].want.claimed, (long long)rows[i].want.need,
                     (long long)rows[i].want.want);
    }
}

static void test_grant(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int64_t limit, cap, total, mine;
        td_budget_ask ask;
        int force;
        int64_t grant, total_after, mine_after;
    } rows[] = {
        {"room: the whole want", 1000000, -1, 0, 0, {0, 23000, 50000}, 0, 50000, 50000, 50000},
        {"partial at the end: what is left", 1000000, -1, 980000, 0, {0, 15000, 50000}, 0, 20000,
         1000000, 20000},
        {"less than the need: nothing", 1000000, -1, 990000, 0, {0, 23000, 50000}, 0, 0, 990000, 0},
        {"exactly the need fits", 1000000, -1, 977000, 0, {0, 23000, 50000}, 0, 23000, 1000000,
         23000},
        {"the claim raises mine first (spend while Redis was away)", 1000000, -1, 100000, 50000,
         {80000, 23000, 50000}, 0, 50000, 180000, 130000},
        {"the claim alone may pass the limit (it was spent)", 1000000, -1, 990000, 0,
         {40000, 23000, 50000}, 0, 0, 1030000, 40000},
        {"a surplus of an earlier run pays part of the need", 1000000, -1, 500000, 90000,
         {60000, 40000, 50000}, 0, 20000, 520000, 110000},
        {"a surplus covering the need: nothing granted", 1000000, -1, 500000, 90000,
         {60000, 23000, 30000}, 0, 0, 500000, 90000},
        {"shadow: granted past the limit", 1000000, -1, 1000000, 0, {0, 23000, 50000}, 1, 50000,
         1050000, 50000},
        {"pure sync", 1000000, -1, 300000, 100000, {120000, 0, 0}, 0, 0, 320000, 120000},
        {"after an outage: a grant keeps mine within its share", 1000000, 500000, 300000, 480000,
         {480000, 15000, 50000}, 0, 20000, 320000, 500000},
        {"after an outage: no grant past the share", 1000000, 500000, 300000, 490000,
         {490000, 23000, 50000}, 0, 0, 300000, 490000},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int64_t total = rows[i].total, mine = rows[i].mine;
        int64_t g = td_budget_lease_grant(rows[i].limit, rows[i].cap, &total, &mine,
                                          &rows[i].ask, rows[i].force != 0);
        if (g != rows[i].grant || total != rows[i].total_after || mine != rows[i].mine_after)
            fail_msg("%s: grant %lld total %lld mine %lld, want %lld %lld %lld", rows[i].name,
                     (long long)g, (long long)total, (long long)mine, (long long)rows[i].grant,
                     (long long)rows[i].total_after, (long long)rows[i].mine_after);
    }
}

static void test_lease_settle(void **state)
{
    (void)state;
    /* after an answer: what mine holds beyond the spend */
    assert_int_equal(td_budget_lease_after(50000, 0), 50000000);
    assert_int_equal(td_budget_lease_after(56000, 46000001), 9999999);
    assert_int_equal(td_budget_lease_after(INT64_MAX, 0), INT64_MAX);
    /* shared spend: total minus my unused lease, never below zero */
    assert_int_equal(td_budget_shared_spent(989000, 27000000), 962000000);
    assert_int_equal(td_budget_shared_spent(10, 50000), 0);
    assert_int_equal(td_budget_shared_spent(100, -5000), 100000);
    /* settle: reserved 0.023, real 0.019 -> 0.004 back; real 0.043 -> debt */
    assert_int_equal(td_budget_lease_settle(0, 23000000, 19000000), 4000000);
    assert_int_equal(td_budget_lease_settle(0, 23000000, 43000000), -20000000);
    assert_int_equal(td_budget_lease_settle(INT64_MAX, 5, 0), INT64_MAX);
    /* give back only above twice the chunk, down to one chunk, in whole micros */
    assert_int_equal(td_budget_lease_excess(100000000, 50000000), 0);
    assert_int_equal(td_budget_lease_excess(100000001, 50000000), 50000);
    assert_int_equal(td_budget_lease_excess(170000999, 50000000), 120000);
    assert_int_equal(td_budget_lease_excess(5, 0), 0);
    /* fallback share */
    /* fallback share, less the lease held */
    assert_int_equal(td_budget_fallback_limit(NANO, 2, 0), NANO / 2);
    assert_int_equal(td_budget_fallback_limit(NANO, 3, -7), 333333333);
    assert_int_equal(td_budget_fallback_limit(NANO, 0, 0), NANO);
    assert_int_equal(td_budget_fallback_limit(NANO, 2, 20000000), 480000000);
    assert_int_equal(td_budget_fallback_limit(NANO, 2, 2 * NANO), 0);
}

/* A replica as shared_budget.c runs one budget: own spend and lease. */
typedef struct {
    int64_t own, lease, total_seen;
    int64_t mine; /* its field in the record */
} replica;

static int reserve(replica *r, int64_t *total, int64_t limit, int64_t cost)
{
    if (r->lease < cost) {
        td_budget_ask a;
        td_budget_lease_ask(r->own, r->lease, cost, td_budget_chunk(limit, cost), &a);
        td_budget_lease_grant(limit / MICRO, -1, total, &r->mine, &a, false);
        r->lease = td_budget_lease_after(r->mine, r->own);
        r->total_seen = *total;
        if (r->lease < cost)
            return 0;
    }
    r->lease -= cost;
    r->own += cost;
    return 1;
}

static void test_two_replicas_one_budget(void **state)
{
    (void)state;
    /* 120 requests of 0.023 against 1.00, alternating, some settling for
     * less (0.019): never more than the budget spent; refusals start only
     * once less than a request plus the other's lease is left. */
    replica r[2] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
    int64_t total = 0, limit = NANO, served = 0;
    for (int i = 0; i < 120; i++) {
        replica *x = &r[i % 2];
        if (reserve(x, &total, limit, 23000000)) {
            served++;
            if (i % 5 == 0) { /* real price below the estimate */
                x->lease = td_budget_lease_settle(x->lease, 23000000, 19000000);
                x->own -= 4000000;
            }
        }
        assert_true(r[0].own + r[1].own <= limit);
        assert_true(total <= limit / MICRO);
        assert_int_equal(r[0].mine + r[1].mine, total);
    }
    int64_t spent = r[0].own + r[1].own;
    /* what is left unspent is at most one request plus each lease held */
    assert_true(limit - spent < 23000000 + r[0].lease + r[1].lease + 2 * 23000000);
    assert_true(served >= 43);
    /* a replica gives back its lease at shutdown: the record drops to spend */
    for (int i = 0; i < 2; i++) {
        total -= r[i].lease / MICRO;
        r[i].mine -= r[i].lease / MICRO;
    }
    assert_true(total * MICRO >= spent && total * MICRO - spent < 2 * MICRO);
    /* a restart of replica 0 with its ledger replaying less than its spend
     * (the last records lost in a crash) recovers its claim as lease */
    replica again = {r[0].own - 23000000, 0, 0, 0};
    td_budget_ask a;
    td_budget_lease_ask(again.own, 0, 0, 0, &a);
    int64_t mine0 = r[0].mine;
    td_budget_lease_grant(limit / MICRO, -1, &total, &mine0, &a, false);
    assert_int_equal(mine0, r[0].mine); /* nothing raised */
    assert_true(td_budget_lease_after(mine0, again.own) >= 23000000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunk),
        cmocka_unit_test(test_ask),
        cmocka_unit_test(test_grant),
        cmocka_unit_test(test_lease_settle),
        cmocka_unit_test(test_two_replicas_one_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
