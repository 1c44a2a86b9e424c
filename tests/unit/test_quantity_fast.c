/* test_quantity_fast.c - quantity.c's 64-bit fast paths (parse, cmp,
 * add/sub, scaled_value, sign, from_int) against its general paths: edge
 * rows around 2^63, 2^64, 10^19, nano rounding and the binary cap, then
 * seeded random spellings and operation sequences. The check itself is
 * tests/fuzz/quantity_diff.h, which fuzz_quantity_fast runs on fuzzed input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../fuzz/quantity_diff.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    /* xorshift64*: seeded, so a failure replays. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static void test_fast_edges(void **state)
{
    (void)state;
    static const struct {
        const char *in, *canonical;
    } rows[] = {
        {"0", "0"},
        {"-0", "0"},
        {"0Gi", "0"},
        {"500m", "500m"},
        {"2Gi", "2Gi"},
        {"1.5", "1500m"},
        {"+.5", "500m"},
        {"1.", "1"},
        {"007", "7"},
        {"1e3", "1e3"},
        {"1E3", "1e3"},
        {"1E", "1E"},
        {"1e-3", "1e-3"},
        {"1e+3", "1e3"},
        {"1.5e-12", "1e-9"},
        {"-1.5e-12", "-1e-9"},
        {"0.9999999999Ki", "1023999999898n"},
        {"0.0009Ki", "921600u"},
        {"0.5Ki", "512"},
        {"0.0009765625Ki", "1"},
        {"-0.0009765625Ki", "-1"},
        {"0.000000000931322574615478515625Gi", "1"},
        {"1.5Gi", "1536Mi"},
        {"7Ei", "7Ei"},
        {"8Ei", "9223372036854775807"},
        {"9223372036854775807", "9223372036854775807"},
        {"9223372036854775808", "9223372036854775808"},
        {"18446744073709551615", "18446744073709551615"},
        {"18446744073709551616", "18446744073709551616"},
        {"9999999999999999999", "9999999999999999999"},
        {"99999999999999999999", "99999999999999999999"},
        {"1234567890.123456789", "1234567890123456789n"},
        {"1234567890.1234567891", "1234567890123456790n"},
        {"1e999999999", "1e999999999"},
        {"1e-999999999", "1e-9"},
        {"1e2147483647", "10e2147483646"},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_quantity q;
        char buf[TD_QUANTITY_STR_MAX];
        if (!qd_parse(rows[i].in, &q)) {
            print_error("%s: does not parse\n", rows[i].in);
            failed++;
            continue;
        }
        td_quantity_format(&q, buf, sizeof buf);
        if (strcmp(buf, rows[i].canonical) != 0) {
            print_error("%s: expected %s, got %s\n", rows[i].in, rows[i].canonical, buf);
            failed++;
        }
    }
    /* Kubernetes reads a number part with no digits as zero ("." "-" "m"
     * "Ki"); these take the general path. */
    static const char *digitless[] = {".", "-", "m", "Ki", "+.k"};
    for (size_t i = 0; i < sizeof digitless / sizeof digitless[0]; i++) {
        td_quantity q;
        if (!qd_parse(digitless[i], &q) || td_quantity_sign(&q) != 0) {
            print_error("%s: expected zero\n", digitless[i]);
            failed++;
        }
    }
    static const char *invalid[] = {"",    "1K",  "1ki", "1e",  "1e+",  "1.2.3", "1 ",
                                    " 1",  "1Gi ", "1iG", "1E+", "1e1x", "1.5Pin", ".Pi"};
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        td_quantity q;
        if (qd_parse(invalid[i], &q)) {
            print_error("%s: parsed\n", invalid[i]);
            failed++;
        }
    }
    assert_int_equal(failed, 0);
}

/* A random spelling: mostly the shapes the fast path takes, around its
 * edges (19/20 digits, leading and trailing zeros, long fractions), and
 * now and then a byte that makes it invalid. */
static void random_quantity(char *out, size_t cap)
{
    static const char *suffixes[] = {"",   "n",  "u",  "m",  "k",  "M",  "G",  "T",  "P",
                                     "E",  "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e",  "E",
                                     "e-", "e+", "E-", "K",  "ki", "i",  "mi", "Gix"};
    size_t n = 0;
    uint64_t r = rnd();
    if (r % 4 == 0)
        out[n++] = r % 8 == 0 ? '-' : '+';
    int nint = (int)(rnd() % 23), nfrac = rnd() % 3 == 0 ? (int)(rnd() % 25) : -1;
    int zeros = (int)(rnd() % 4);
    for (int i = 0; i < nint && n + 40 < cap; i++)
        out[n++] = (char)(i < zeros ? '0' : '0' + rnd() % 10);
    if (nfrac >= 0) {
        out[n++] = '.';
        for (int i = 0; i < nfrac && n + 40 < cap; i++)
            out[n++] = (char)(rnd() % 3 == 0 ? '0' : '0' + rnd() % 10);
    }
    const char *suf = suffixes[rnd() % (sizeof suffixes / sizeof suffixes[0])];
    size_t sl = strlen(suf);
    memcpy(out + n, suf, sl);
    n += sl;
    if (suf[0] == 'e' || suf[0] == 'E') {
        int nd = (int)(rnd() % 12);
        for (int i = 0; i < nd; i++)
            out[n++] = (char)('0' + rnd() % 10);
    }
    if (rnd() % 50 == 0)
        out[rnd() % (n + 1)] = "x. -1"[rnd() % 5];
    out[n] = '\0';
}

static void test_fast_random_parse(void **state)
{
    (void)state;
    char s[128];
    td_quantity q;
    int parsed = 0;
    for (int i = 0; i < 200000; i++) {
        random_quantity(s, sizeof s);
        parsed += qd_parse(s, &q);
    }
    /* The generator must reach both outcomes for the check to mean much. */
    assert_true(parsed > 50000);
    assert_true(parsed < 190000);
}

static void test_fast_random_ops(void **state)
{
    (void)state;
    td_quantity pool[QD_POOL];
    qd_pool_init(pool);
    char s[128];
    for (int round = 0; round < 20000; round++) {
        /* Fresh values now and then, so sums do not all drift past 64 bits. */
        if (round % 8 == 0) {
            random_quantity(s, sizeof s);
            td_quantity q;
            if (qd_parse(s, &q))
                pool[rnd() % QD_POOL] = q;
        }
        for (int k = 0; k < 10; k++) {
            uint64_t r = rnd();
            uint8_t op[4] = {(uint8_t)r, (uint8_t)(r >> 8), (uint8_t)(r >> 16), (uint8_t)(r >> 24)};
            qd_op(pool, op);
        }
    }
}

/* Every pair of values around the edges, through every operation, and
 * scaled_value at every scale qd_scale spells. */
static void test_fast_pairs(void **state)
{
    (void)state;
    static const char *edges[] = {
        "0",
        "1",
        "-1",
        "9",
        "10",
        "1n",
        "-1n",
        "999999999n",
        "1.5",
        "500m",
        "2Gi",
        "-2Gi",
        "0.0009765625Ki",
        "0.9999999999Ki",
        "7.99999Ei",
        "8Ei",
        "1e19",
        "-1e19",
        "1e20",
        "1e-19",
        "10000000000000000000",
        "18446744073709551615",
        "-18446744073709551615",
        "18446744073709551616",
        "1844674407370955162e1",
        "1.8446744073709551615e19",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "9223372036854775807001m",
        "-9223372036854775808001m",
        "99999999999999999999e-1",
        "5e2147483646",
        "1e2147483647",
        "-1e-2147483647",
        "123456789012345678.9e-20",
    };
    size_t n = sizeof edges / sizeof edges[0];
    td_quantity vals[sizeof edges / sizeof edges[0]];
    for (size_t i = 0; i < n; i++)
        assert_true(qd_parse(edges[i], &vals[i]));
    td_quantity pool[QD_POOL];
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < n; j++) {
            for (uint8_t k = 0; k < 3; k++) {
                pool[0] = vals[i];
                pool[1] = vals[j];
                uint8_t op[4] = {k, 0, 1, 0};
                qd_op(pool, op);
                /* and once more on the result, for the chained case */
                pool[1] = vals[j];
                qd_op(pool, op);
            }
        }
        for (int sc = 0; sc < 256; sc++) {
            pool[0] = vals[i];
            uint8_t op[4] = {3, 0, 0, (uint8_t)sc};
            qd_op(pool, op);
            op[0] = 4;
            qd_op(pool, op);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_edges),
        cmocka_unit_test(test_fast_pairs),
        cmocka_unit_test(test_fast_random_parse),
        cmocka_unit_test(test_fast_random_ops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
