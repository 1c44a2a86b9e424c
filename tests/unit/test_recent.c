/* test_recent.c - the rings of recent refusals behind `tenantctl explain
 * request`: newest first across rings, filtered by tenant, the oldest
 * overwritten, strings cut safely, and the per-tenant sampling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/recent.h"

static td_rejection rej(uint64_t t, uint32_t tenant, const char *reason)
{
    td_rejection x;
    memset(&x, 0, sizeof x);
    x.wall_ns = t;
    x.tenant = tenant;
    x.status = 429;
    snprintf(x.reason, sizeof x.reason, "%s", reason);
    snprintf(x.detail, sizeof x.detail, "at %llu", (unsigned long long)t);
    return x;
}

static void test_newest_first_across_rings(void **state)
{
    (void)state;
    td_recent *r = NULL;
    assert_int_equal(td_recent_create(2, 4, 8, &r), TD_OK);
    td_rejection x;
    for (uint64_t t = 1; t <= 6; t++) {
        x = rej(t * 10, t % 2 ? 1 : 2, t % 3 ? "rate_limited" : "shed");
        td_recent_note(r, (unsigned)t, &x); /* alternating rings */
    }
    td_rejection out[8];
    size_t n = td_recent_of(r, 1, out, 8);
    assert_int_equal(n, 3); /* t = 1, 3, 5 */
    assert_int_equal(out[0].wall_ns, 50);
    assert_int_equal(out[1].wall_ns, 30);
    assert_int_equal(out[2].wall_ns, 10);
    assert_string_equal(out[0].reason, "rate_limited");
    n = td_recent_of(r, 2, out, 2); /* t = 6, 4 of 2, 4, 6 */
    assert_int_equal(n, 2);
    assert_int_equal(out[0].wall_ns, 60);
    assert_string_equal(out[0].reason, "shed");
    assert_int_equal(out[1].wall_ns, 40);
    assert_int_equal(td_recent_of(r, 7, out, 8), 0);
    td_recent_destroy(r);
}

static void test_oldest_overwritten(void **state)
{
    (void)state;
    td_recent *r = NULL;
    assert_int_equal(td_recent_create(1, 3, 4, &r), TD_OK);
    for (uint64_t t = 1; t <= 5; t++) {
        td_rejection x = rej(t, 0, "rate_limited");
        td_recent_note(r, 0, &x);
    }
    td_rejection out[8];
    size_t n = td_recent_of(r, 0, out, 8);
    assert_int_equal(n, 3);
    assert_int_equal(out[0].wall_ns, 5);
    assert_int_equal(out[2].wall_ns, 3);
    td_recent_destroy(r);
}

static void test_unterminated_strings_are_cut(void **state)
{
    (void)state;
    td_recent *r = NULL;
    assert_int_equal(td_recent_create(1, 2, 1, &r), TD_OK);
    td_rejection x;
    memset(&x, 'A', sizeof x);
    x.shadow = false;
    x.tenant = 0;
    x.wall_ns = 1;
    td_recent_note(r, 0, &x);
    td_rejection out[1];
    assert_int_equal(td_recent_of(r, 0, out, 1), 1);
    assert_int_equal(strlen(out[0].reason), sizeof x.reason - 1);
    assert_int_equal(strlen(out[0].detail), sizeof x.detail - 1);
    td_recent_destroy(r);
}

static void test_sampling(void **state)
{
    (void)state;
    td_recent *r = NULL;
    assert_int_equal(td_recent_create(1, 2, 2, &r), TD_OK);
    uint64_t t0 = 5000000000ULL;
    assert_true(td_recent_due(r, 0, t0));
    assert_false(td_recent_due(r, 0, t0 + 1));
    assert_false(td_recent_due(r, 0, t0 + TD_RECENT_EVERY_NS - 1));
    assert_true(td_recent_due(r, 1, t0 + 1)); /* per tenant */
    assert_true(td_recent_due(r, 0, t0 + TD_RECENT_EVERY_NS));
    assert_false(td_recent_due(r, 2, t0)); /* out of range */
    td_recent_destroy(r);
    assert_int_equal(td_recent_create(0, 2, 2, &r), TD_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_newest_first_across_rings),
        cmocka_unit_test(test_oldest_overwritten),
        cmocka_unit_test(test_unterminated_strings_are_cut),
        cmocka_unit_test(test_sampling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
