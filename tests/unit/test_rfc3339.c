/* test_rfc3339.c - td_rfc3339_parse, table-driven: the forms RFC 3339 and
 * `tenantctl report --from/--to`, `simulate --start` accept, and what they
 * refuse. Expected values computed with GNU date -u -d ... +%s. */
/* cmocka.h needs these before it */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "core/duration.h"

#define S 1000000000LL

static const struct {
    const char *name, *in;
    td_status want;
    int64_t ns;
} rows[] = {
    {"epoch", "1970-01-01T00:00:00Z", TD_OK, 0},
    {"date alone is midnight UTC", "2026-12-01", TD_OK, 1796083200LL * S},
    {"Z", "2026-12-01T00:00:00Z", TD_OK, 1796083200LL * S},
    {"lower-case t and z", "2026-12-01t00:00:00z", TD_OK, 1796083200LL * S},
    {"fraction", "2026-12-01T00:00:00.25Z", TD_OK, 1796083200LL * S + 250000000},
    {"nanoseconds", "2026-12-01T00:00:00.000000001Z", TD_OK, 1796083200LL * S + 1},
    {"positive offset", "2026-12-01T01:00:00+01:00", TD_OK, 1796083200LL * S},
    {"negative offset", "2026-11-30T19:30:00-04:30", TD_OK, 1796083200LL * S},
    {"leap day", "2024-02-29T12:00:00Z", TD_OK, 1709208000LL * S},
    {"before the epoch", "1969-12-31T23:59:59Z", TD_OK, -1 * S},
    {"no zone", "2026-12-01T00:00:00", TD_EINVAL, 0},
    {"month 13", "2026-13-01", TD_EINVAL, 0},
    {"hour 24", "2026-12-01T24:00:00Z", TD_EINVAL, 0},
    {"empty fraction", "2026-12-01T00:00:00.Z", TD_EINVAL, 0},
    {"trailing junk", "2026-12-01T00:00:00Zx", TD_EINVAL, 0},
    {"a word", "yesterday", TD_EINVAL, 0},
    {"empty", "", TD_EINVAL, 0},
    {"short offset", "2026-12-01T00:00:00+1", TD_EINVAL, 0},
};

static void test_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int64_t ns = 42;
        td_err e;
        td_status st = td_rfc3339_parse(rows[i].in, &ns, &e);
        if (st != rows[i].want)
            fail_msg("%s: \"%s\": status %d, want %d", rows[i].name, rows[i].in, st, rows[i].want);
        if (st == TD_OK && ns != rows[i].ns)
            fail_msg("%s: \"%s\": %lld, want %lld", rows[i].name, rows[i].in, (long long)ns,
                     (long long)rows[i].ns);
        if (st != TD_OK) {
            assert_int_equal(ns, 42); /* nothing written on error */
            assert_non_null(strstr(e.msg, "is not an RFC 3339 time"));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_rows)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
