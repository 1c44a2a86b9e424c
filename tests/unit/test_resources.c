/* test_resources.c - resources.c: sorted name -> quantity lists and their
 * arithmetic, in the shape of Kubernetes' quota helper tests (Add,
 * Subtract, Max, LessThanOrEqual). Lists are written "cpu=100m,memory=1Gi"
 * and printed back the same way, sorted, in canonical quantities. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/resources.h"

/* Builds r from "name=q,name=q" (set, so a repeated name replaces). */
static void build(td_resources *r, const char *spec)
{
    char copy[512];
    td_resources_init(r);
    snprintf(copy, sizeof copy, "%s", spec);
    for (char *save = NULL, *item = strtok_r(copy, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        assert_non_null(eq);
        *eq = '\0';
        td_quantity q;
        td_err err;
        if (td_quantity_parse(eq + 1, &q, &err) != TD_OK)
            fail_msg("%s", err.msg);
        assert_int_equal(td_resources_set(r, item, &q), TD_OK);
    }
}

static const char *show(const td_resources *r, char *out, size_t n)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < r->n; i++) {
        char q[TD_QUANTITY_STR_MAX];
        td_quantity_format(&r->items[i].q, q, sizeof q);
        len += (size_t)snprintf(out + len, n - len, "%s%s=%s", i ? "," : "", r->items[i].name, q);
    }
    return out;
}

typedef struct {
    const char *name, *a, *b, *expected;
} binary_row;

static const binary_row add_rows[] = {
    {"noKeys", "", "", ""},
    {"toEmpty", "", "cpu=100m", "cpu=100m"},
    {"matchingKeys", "cpu=100m,memory=10Gi", "cpu=100m,memory=10Gi", "cpu=200m,memory=20Gi"},
    {"disjointKeys", "cpu=100m", "memory=1Gi", "cpu=100m,memory=1Gi"},
    {"mixedFormatsKeepFirst", "memory=1Gi", "memory=1000M", "memory=2073741824"},
    {"zeroTakesOtherFormat", "memory=0", "memory=1Gi", "memory=1Gi"},
    {"sortedInsert", "pods=1,cpu=1", "memory=1Mi,a=1,z=2", "a=1,cpu=1,memory=1Mi,pods=1,z=2"},
    {"fractions", "cpu=0.1", "cpu=0.2", "cpu=300m"},
    {"interleaved", "a=1,cpu=2,pods=3,z=4", "b=1,cpu=1,cpus=5,q=2,z=4",
     "a=1,b=1,cpu=3,cpus=5,pods=3,q=2,z=8"},
    {"nonAsciiSortsLast", "\xc3\xa9=1,z=1", "y=1,\xc3\xa9=1", "y=1,z=1,\xc3\xa9=2"},
};

static const binary_row sub_rows[] = {
    {"noKeys", "", "", ""},
    {"value", "cpu=100m", "cpu=50m", "cpu=50m"},
    {"missingInA", "", "cpu=100m", "cpu=-100m"},
    {"missingInB", "cpu=100m", "", "cpu=100m"},
    {"toZero", "cpu=100m,memory=1Gi", "cpu=100m", "cpu=0,memory=1Gi"},
    {"negative", "memory=1Gi", "memory=2Gi", "memory=-1Gi"},
    {"interleaved", "a=1,cpu=2,pods=3,z=4", "b=1,cpu=1,cpus=5,q=2,z=4",
     "a=1,b=-1,cpu=1,cpus=-5,pods=3,q=-2,z=0"},
    {"prefixes", "requests.cpu=1,requests=2", "requests.cpu.x=1,request=1",
     "request=-1,requests=2,requests.cpu=1,requests.cpu.x=-1"},
};

static const binary_row max_rows[] = {
    {"noKeys", "", "", ""},
    {"toEmpty", "", "cpu=100m", "cpu=100m"},
    {"matching", "cpu=100m", "cpu=150m", "cpu=150m"},
    {"matchingFirstLarger", "cpu=150m", "cpu=100m", "cpu=150m"},
    {"disjoint", "cpu=150m", "memory=1Gi", "cpu=150m,memory=1Gi"},
    /* a tie takes the other side, and its spelling */
    {"tieTakesOther", "memory=1024", "memory=1Ki", "memory=1Ki"},
};

static void run_binary(const binary_row *rows, size_t n, int op)
{
    for (size_t i = 0; i < n; i++) {
        td_resources a, b;
        char out[512];
        build(&a, rows[i].a);
        build(&b, rows[i].b);
        td_status st = TD_OK;
        if (op == 0)
            st = td_resources_add(&a, &b);
        else if (op == 1)
            st = td_resources_sub(&a, &b);
        else
            for (size_t j = 0; j < b.n && st == TD_OK; j++)
                st = td_resources_max_one(&a, b.items[j].name, &b.items[j].q);
        assert_int_equal(st, TD_OK);
        if (strcmp(show(&a, out, sizeof out), rows[i].expected) != 0)
            fail_msg("%s: expected %s, got %s", rows[i].name, rows[i].expected, out);
        td_resources_fini(&a);
        td_resources_fini(&b);
    }
}

static void test_resources_add(void **state)
{
    (void)state;
    run_binary(add_rows, sizeof add_rows / sizeof add_rows[0], 0);
}

static void test_resources_sub(void **state)
{
    (void)state;
    run_binary(sub_rows, sizeof sub_rows / sizeof sub_rows[0], 1);
}

static void test_resources_max(void **state)
{
    (void)state;
    run_binary(max_rows, sizeof max_rows / sizeof max_rows[0], 2);
}

static void test_resources_fits(void **state)
{
    (void)state;
    static const struct {
        const char *name, *need, *limit;
        bool fits;
    } rows[] = {
        {"empty", "", "", true},
        {"noLimit", "cpu=100", "", true},
        {"under", "cpu=100m", "cpu=1", true},
        {"equal", "cpu=1000m", "cpu=1", true},
        {"over", "cpu=1001m", "cpu=1", false},
        {"oneOver", "cpu=1,memory=2Gi", "cpu=2,memory=1Gi", false},
        {"unlimitedName", "cpu=1,nvidia.com/gpu=8", "cpu=2", true},
        {"binaryVsDecimal", "memory=1Gi", "memory=1G", false},
        {"nano", "cpu=1n", "cpu=0", false},
        {"emptyNeed", "", "cpu=0", true},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_resources need, limit;
        build(&need, rows[i].need);
        build(&limit, rows[i].limit);
        if (td_resources_fits(&need, &limit) != rows[i].fits)
            fail_msg("%s: expected fits=%d", rows[i].name, rows[i].fits);
        td_resources_fini(&need);
        td_resources_fini(&limit);
    }
}

static void test_resources_get_set(void **state)
{
    (void)state;
    td_resources r;
    char out[512], name[TD_RESOURCE_NAME_MAX + 1];
    build(&r, "memory=1Gi,cpu=2,cpu=3");
    assert_string_equal(show(&r, out, sizeof out), "cpu=3,memory=1Gi");
    assert_null(td_resources_get(&r, "pods"));
    const td_quantity *cpu = td_resources_get(&r, "cpu");
    assert_non_null(cpu);
    assert_int_equal(td_quantity_value(cpu), 3);

    td_quantity q;
    td_quantity_from_int(&q, 1, 0, TD_QFMT_DECIMAL_SI);
    assert_int_equal(td_resources_set(&r, "", &q), TD_EINVAL);
    assert_int_equal(td_resources_set(&r, NULL, &q), TD_EINVAL);
    memset(name, 'a', TD_RESOURCE_NAME_MAX);
    name[TD_RESOURCE_NAME_MAX] = '\0';
    assert_int_equal(td_resources_set(&r, name, &q), TD_EINVAL);
    assert_int_equal(td_resources_add_one(&r, name, &q), TD_EINVAL);
    assert_int_equal(td_resources_max_one(&r, name, &q), TD_EINVAL);
    name[TD_RESOURCE_NAME_MAX - 1] = '\0'; /* 253, the longest allowed */
    assert_int_equal(td_resources_set(&r, name, &q), TD_OK);
    assert_int_equal(r.n, 3);
    assert_string_equal(r.items[0].name, name);

    /* many names stay sorted and findable */
    for (int i = 99; i >= 0; i--) {
        char n[16];
        snprintf(n, sizeof n, "r%02d", i);
        td_quantity_from_int(&q, i, 0, TD_QFMT_DECIMAL_SI);
        assert_int_equal(td_resources_add_one(&r, n, &q), TD_OK);
        assert_int_equal(td_resources_add_one(&r, n, &q), TD_OK);
    }
    for (size_t i = 1; i < r.n; i++)
        assert_true(strcmp(r.items[i - 1].name, r.items[i].name) < 0);
    assert_int_equal(td_quantity_value(td_resources_get(&r, "r42")), 84);
    td_resources_fini(&r);
    td_resources_fini(&r); /* fini twice is harmless */
    td_resources_fini(NULL);
}

static void test_resources_copy(void **state)
{
    (void)state;
    td_resources a, b, empty, c;
    char out[512];
    build(&a, "cpu=1,memory=1Gi");
    assert_int_equal(td_resources_copy(&b, &a), TD_OK);
    td_quantity q;
    td_quantity_from_int(&q, 5, 0, TD_QFMT_DECIMAL_SI);
    assert_int_equal(td_resources_set(&b, "cpu", &q), TD_OK);
    assert_string_equal(show(&a, out, sizeof out), "cpu=1,memory=1Gi");
    assert_string_equal(show(&b, out, sizeof out), "cpu=5,memory=1Gi");
    td_resources_init(&empty);
    assert_int_equal(td_resources_copy(&c, &empty), TD_OK);
    assert_int_equal(c.n, 0);
    td_resources_fini(&c);

    /* A copy owns its names: it reads the same after the source is
     * gone, through pool growth on both sides (ASan sees any sharing). */
    for (int i = 0; i < 40; i++) {
        char n[64];
        snprintf(n, sizeof n, "example.com/resource-with-a-longer-name-%02d", i);
        assert_int_equal(td_resources_set(&a, n, &q), TD_OK);
    }
    assert_int_equal(td_resources_copy(&c, &a), TD_OK);
    td_resources_fini(&a);
    assert_int_equal(td_resources_set(&c, "aaa", &q), TD_OK);
    assert_int_equal(c.n, 43);
    assert_string_equal(c.items[0].name, "aaa");
    assert_string_equal(c.items[1].name, "cpu");
    assert_string_equal(c.items[2].name, "example.com/resource-with-a-longer-name-00");
    assert_string_equal(c.items[41].name, "example.com/resource-with-a-longer-name-39");
    assert_string_equal(c.items[42].name, "memory");
    assert_non_null(td_resources_get(&c, "example.com/resource-with-a-longer-name-17"));

    /* r += r and r -= r read r while they replace it */
    assert_int_equal(td_resources_add(&b, &b), TD_OK);
    assert_string_equal(show(&b, out, sizeof out), "cpu=10,memory=2Gi");
    assert_int_equal(td_resources_sub(&b, &b), TD_OK);
    assert_string_equal(show(&b, out, sizeof out), "cpu=0,memory=0");
    td_resources_fini(&b);
    td_resources_fini(&c);
}

/* A failed add changes nothing, even when earlier names succeeded. */
static void test_resources_failed_add_changes_nothing(void **state)
{
    (void)state;
    td_resources a, b;
    char out[512];
    build(&a, "cpu=1,memory=1e2147483647");
    build(&b, "cpu=1,memory=1,pods=3");
    assert_int_equal(td_resources_add(&a, &b), TD_EINVAL);
    assert_string_equal(show(&a, out, sizeof out), "cpu=1,memory=10e2147483646");
    assert_int_equal(td_resources_sub(&a, &b), TD_EINVAL);
    assert_string_equal(show(&a, out, sizeof out), "cpu=1,memory=10e2147483646");
    td_resources_fini(&a);
    td_resources_fini(&b);
}

/* add and sub (one merge pass over both sorted lists) against the plain
 * model: a copy of a, then add_one of each item of b (negated for sub),
 * over seeded random lists with overlapping and prefix names. */
static void test_resources_merge_matches_add_one(void **state)
{
    (void)state;
    static const char *names[] = {"a", "b", "cpu", "cpus", "memory", "pods", "requests.cpu",
                                  "requests", "\xc3\xa9", "z", "nvidia.com/gpu", "c"};
    static const char *values[] = {"0", "1", "-1", "500m", "2Gi", "1e3", "1n", "7Ei", "1.5"};
    uint64_t seed = 88172645463325252ull;
    for (int round = 0; round < 3000; round++) {
        td_resources a, b, got, want;
        td_resources_init(&a);
        td_resources_init(&b);
        for (int side = 0; side < 2; side++) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            int n = (int)(seed % 7);
            for (int k = 0; k < n; k++) {
                td_quantity q;
                uint64_t r = seed >> (8 * (k % 7));
                assert_int_equal(td_quantity_parse(values[(r >> 4) % 9], &q, NULL), TD_OK);
                assert_int_equal(td_resources_set(side ? &b : &a, names[r % 12], &q), TD_OK);
            }
        }
        int subtract = round % 2;
        assert_int_equal(td_resources_copy(&got, &a), TD_OK);
        assert_int_equal(td_resources_copy(&want, &a), TD_OK);
        assert_int_equal(subtract ? td_resources_sub(&got, &b) : td_resources_add(&got, &b), TD_OK);
        for (size_t k = 0; k < b.n; k++) {
            td_quantity q = b.items[k].q;
            if (subtract)
                td_quantity_neg(&q);
            assert_int_equal(td_resources_add_one(&want, b.items[k].name, &q), TD_OK);
        }
        assert_int_equal(got.n, want.n);
        for (size_t k = 0; k < got.n; k++) {
            assert_string_equal(got.items[k].name, want.items[k].name);
            const td_quantity *x = &got.items[k].q, *y = &want.items[k].q;
            assert_memory_equal(x->mag, y->mag, sizeof x->mag);
            assert_int_equal(x->scale, y->scale);
            assert_int_equal(x->sign, y->sign);
            assert_int_equal(x->format, y->format);
        }
        td_resources_fini(&a);
        td_resources_fini(&b);
        td_resources_fini(&got);
        td_resources_fini(&want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resources_add),
        cmocka_unit_test(test_resources_sub),
        cmocka_unit_test(test_resources_max),
        cmocka_unit_test(test_resources_fits),
        cmocka_unit_test(test_resources_get_set),
        cmocka_unit_test(test_resources_copy),
        cmocka_unit_test(test_resources_failed_add_changes_nothing),
        cmocka_unit_test(test_resources_merge_matches_add_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
