/* test_shared_budget.c - money budgets shared through a real redis-server on
 * a free loopback port: two replicas never pass one budget together, a
 * settle below the estimate returns to the lease and a lease past two
 * chunks goes back to Redis, a shadow budget passes the limit, a flushed
 * script cache (NOSCRIPT) is reloaded, Redis killed -> budget/2 each and
 * the spend pushed when it returns, shutdown gives the lease back, and a
 * restarted replica takes its unreturned lease back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "gateway/budget_lease.h"
#include "io/shared_budget.h"
#include "testredis.h"

#define NANO  1000000000LL
#define PRICE 23000000LL /* 0.023 */
#define NOW   1796233200 /* a Wednesday in Dec 2026 */

/* One command's integer or bulk-integer reply; -1 if absent or no answer. */
static long long redis_int(const char *fmt, ...)
{
    struct timeval tv = {0, 300000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", redis_port, tv);
    if (!c || c->err) {
        if (c)
            redisFree(c);
        return -1;
    }
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    long long v = -1;
    if (r && r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    else if (r && r->type == REDIS_REPLY_STRING)
        v = strtoll(r->str, NULL, 10);
    else if (r && r->type == REDIS_REPLY_STATUS)
        v = 0;
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return v;
}

static int group_setup(void **state)
{
    (void)state;
    return redis_group_setup("test_shared_budget");
}

/* ---- a replica: its own spend and its shared budgets ---- */

typedef struct {
    td_budgets *own;
    td_shbudget *sb;
} replica;

static void replica_open(replica *r, const char *name, const char *prefix)
{
    assert_int_equal(td_budgets_create(4, &r->own), TD_OK);
    td_shbudget_opts o = {redis_addr, 2, 50, prefix, name, "tenant"};
    td_err err;
    assert_int_equal(td_shbudget_create(&o, r->own, 4, &r->sb, &err), TD_OK);
}

static void replica_close(replica *r)
{
    td_shbudget_destroy(r->sb);
    td_budgets_destroy(r->own);
}

static td_status take(replica *r, const char *tenant, int64_t limit, int64_t cost, bool force,
                      bool *leased)
{
    int64_t start, spent;
    return td_shbudget_reserve(r->sb, 0, tenant, TD_PERIOD_MONTH, limit, cost, force, NOW, &start,
                               &spent, leased);
}

/* ---- tests ---- */

static void test_two_replicas_one_budget(void **state)
{
    (void)state;
    replica a, b;
    replica_open(&a, "a", "t1:");
    replica_open(&b, "b", "t1:");
    int served = 0;
    for (int i = 0; i < 120; i++) {
        bool leased;
        if (take(i % 2 ? &b : &a, "crowd", NANO, PRICE, false, &leased) == TD_OK) {
            assert_true(leased);
            served++;
        }
    }
    assert_true(served >= 41 && served <= 43);
    long long total = redis_int("HGET t1:crowd:month:%lld total", 1796083200LL);
    assert_true(total >= served * 23000 && total <= 1000000);
    int64_t own = td_budgets_spent(a.own, 0, TD_PERIOD_MONTH, NOW) +
                  td_budgets_spent(b.own, 0, TD_PERIOD_MONTH, NOW);
    assert_int_equal(own, served * PRICE);
    /* the shared view: the total minus this replica's unused lease */
    int64_t seen = td_shbudget_spent(a.sb, 0, "crowd", TD_PERIOD_MONTH, NOW, true);
    assert_true(seen >= own && seen <= NANO);
    assert_int_equal(td_shbudget_degraded(a.sb), false);
    assert_int_equal(td_shbudget_fallbacks(a.sb), 0);
    /* each replica asked far less than once per request */
    assert_true(td_shbudget_calls(a.sb) + td_shbudget_calls(b.sb) < 60);
    replica_close(&a);
    replica_close(&b);
    /* shutdown gave the leases back: Redis holds the spend (rounded up) */
    total = redis_int("HGET t1:crowd:month:%lld total", 1796083200LL);
    assert_true(total >= served * 23000 && total < served * 23000 + 2);
}

static void test_settle_and_give_back(void **state)
{
    (void)state;
    replica a;
    replica_open(&a, "a", "t2:");
    bool leased;
    int64_t limit = 100 * NANO; /* chunk: 64 x 0.023 = 1.472 */
    assert_int_equal(take(&a, "t", limit, PRICE, false, &leased), TD_OK);
    long long mine = redis_int("HGET t2:t:month:1796083200 r:a");
    assert_int_equal(mine, 1472000);
    /* settled to 0.019: 0.004 back to the lease, no Redis call */
    uint64_t calls = td_shbudget_calls(a.sb);
    int64_t start, end;
    td_period_bounds(TD_PERIOD_MONTH, NOW, &start, &end);
    td_shbudget_settle(a.sb, 0, TD_PERIOD_MONTH, start, 19000000 - PRICE, true);
    assert_int_equal(td_shbudget_calls(a.sb), calls);
    assert_int_equal(td_budgets_spent(a.own, 0, TD_PERIOD_MONTH, NOW), 19000000);
    /* refunds of reservations from an earlier, larger lease can grow the
     * lease past two chunks of the last ask: the excess goes back at once.
     * A: 3.0 (chunk 5, lease 2.0 after), B: 2.0 from it, C: 0.023 (a new
     * chunk of 1.472), then A refunded whole: lease 4.449 > 2 x 1.472. */
    td_shbudget_settle(a.sb, 0, TD_PERIOD_MONTH, start, -19000000, true); /* drop the first */
    assert_int_equal(take(&a, "t", limit, 3 * NANO, false, &leased), TD_OK);
    assert_int_equal(take(&a, "t", limit, 2 * NANO, false, &leased), TD_OK);
    assert_int_equal(take(&a, "t", limit, PRICE, false, &leased), TD_OK);
    long long before = redis_int("HGET t2:t:month:1796083200 r:a");
    td_shbudget_settle(a.sb, 0, TD_PERIOD_MONTH, start, -3 * NANO, true);
    long long after = redis_int("HGET t2:t:month:1796083200 r:a");
    assert_true(after < before);
    /* what stays: the spend (2.023) and one chunk (1.472) */
    assert_int_equal(after, 2023000 + 1472000);
    replica_close(&a);
    assert_int_equal(redis_int("HGET t2:t:month:1796083200 r:a"), 2023000);
}

static void test_shadow_and_noscript(void **state)
{
    (void)state;
    replica a;
    replica_open(&a, "a", "t3:");
    bool leased;
    for (int i = 0; i < 5; i++) /* shadow: 0.115 against 0.05, never refused */
        assert_int_equal(take(&a, "sh", 50000000, PRICE, true, &leased), TD_OK);
    assert_true(redis_int("HGET t3:sh:month:1796083200 total") >= 115000);
    assert_int_equal(take(&a, "en", NANO, PRICE, false, &leased), TD_OK);
    assert_int_equal(redis_int("SCRIPT FLUSH"), 0);
    /* drain the lease so the next take must call: it reloads the script */
    for (int i = 0; i < 3; i++)
        assert_int_equal(take(&a, "en", NANO, PRICE, false, &leased), TD_OK);
    assert_int_equal(td_shbudget_degraded(a.sb), false);
    assert_true(redis_int("HGET t3:en:month:1796083200 total") >= 4 * 23000);
    replica_close(&a);
}

static void test_redis_killed_and_back(void **state)
{
    (void)state;
    replica a;
    replica_open(&a, "a", "t4:");
    bool leased;
    for (int i = 0; i < 10; i++)
        assert_int_equal(take(&a, "o", NANO, PRICE, false, &leased), TD_OK);
    redis_stop(SIGKILL);
    /* budget/2 = 0.5, less the lease held: own 0.23 + n x 0.023 <= 0.5 - lease */
    int more = 0;
    for (int i = 0; i < 40; i++)
        if (take(&a, "o", NANO, PRICE, false, &leased) == TD_OK) {
            assert_false(leased);
            more++;
        }
    assert_true(more >= 9 && more <= 11);
    assert_true(td_shbudget_degraded(a.sb));
    assert_true(td_shbudget_fallbacks(a.sb) >= 40);
    assert_int_equal(redis_start(), 0); /* empty: --save "" */
    /* the pusher brings the claim back within the breaker's wait + 100 ms */
    long long mine = -1;
    for (uint64_t end = mono_ns() + 3 * S; mono_ns() < end; sleep_ns(50 * MS)) {
        mine = redis_int("HGET t4:o:month:1796083200 r:a");
        if (mine >= (10 + more) * 23000)
            break;
    }
    assert_true(mine >= (10 + more) * 23000);
    assert_false(td_shbudget_degraded(a.sb));
    replica_close(&a);
}

static void test_restart_takes_its_lease_back(void **state)
{
    (void)state;
    replica a;
    replica_open(&a, "a", "t5:");
    bool leased;
    assert_int_equal(take(&a, "r", NANO, PRICE, false, &leased), TD_OK);
    assert_int_equal(redis_int("HGET t5:r:month:1796083200 r:a"), 50000);
    /* a crash, as far as Redis can tell: the replica stops while Redis is
     * frozen, so its lease is never given back */
    kill(redis_pid, SIGSTOP);
    replica_close(&a);
    kill(redis_pid, SIGCONT);
    assert_int_equal(redis_int("HGET t5:r:month:1796083200 r:a"), 50000);
    /* the same replica starts again with its ledger replayed (0.023) */
    replica again;
    replica_open(&again, "a", "t5:");
    td_budgets_replay(again.own, 0, TD_PERIOD_MONTH, NOW, PRICE, NOW);
    assert_int_equal(take(&again, "r", NANO, PRICE, false, &leased), TD_OK);
    /* served from the recovered 0.027 of lease: nothing more claimed */
    assert_int_equal(redis_int("HGET t5:r:month:1796083200 r:a"), 50000);
    replica_close(&again);
    assert_int_equal(redis_int("HGET t5:r:month:1796083200 r:a"), 46000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_replicas_one_budget),
        cmocka_unit_test(test_settle_and_give_back),
        cmocka_unit_test(test_shadow_and_noscript),
        cmocka_unit_test(test_redis_killed_and_back),
        cmocka_unit_test(test_restart_takes_its_lease_back),
    };
    return cmocka_run_group_tests(tests, group_setup, redis_group_teardown);
}
