/* test_workloads_equiv.c - the daemon's batch queue kept in memory between
 * commits decides exactly what a rebuild from the records and a full pass
 * decide: seeded random sequences of submits, finishes, withdrawals,
 * applies, deletes and restarts, every record compared after each step
 * (workloads_equiv.h). TD_EQUIV_STEPS overrides the number of steps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "workloads_equiv.h"

static uint32_t xorshift(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

static void run_seed(uint32_t seed, size_t steps)
{
    equiv e;
    assert_int_equal(equiv_init(&e), 0);
    uint32_t s = seed;
    for (size_t i = 0; i < steps; i++) {
        uint32_t r = xorshift(&s), a = xorshift(&s);
        unsigned char x[4] = {(unsigned char)a, (unsigned char)(a >> 8), (unsigned char)(a >> 16),
                              (unsigned char)(a >> 24)};
        /* restarts and deletes rarer than the rest */
        unsigned op = r % 100 < 2 ? 9 : r % 100 < 5 ? 8 : (r >> 8) % 8;
        if (equiv_step(&e, op, x) != 0)
            fail_msg("seed %u step %zu (op %u): %s", seed, i, op, e.fail);
    }
    json_t *const *w;
    size_t n = td_config_list(e.a, "Workload", NULL, &w);
    print_message("seed %u: %zu steps, %zu incremental commits, %zu workloads stored\n", seed,
                  steps, e.incremental, n);
    assert_true(e.incremental > steps / 2);
    equiv_fini(&e);
}

static size_t steps(void)
{
    const char *s = getenv("TD_EQUIV_STEPS");
    return s && atoi(s) > 0 ? (size_t)atoi(s) : 800;
}

static void test_seeds(void **state)
{
    (void)state;
    static const uint32_t all[] = {24, 2026, 0x9e3779b9u};
    const char *one = getenv("TD_EQUIV_SEED");
    uint32_t only[1] = {one ? (uint32_t)strtoul(one, NULL, 0) : 0};
    const uint32_t *seeds = one ? only : all;
    size_t nseeds = one ? 1 : sizeof all / sizeof all[0];
    for (size_t k = 0; k < nseeds; k++)
        run_seed(seeds[k], steps());
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_seeds)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
