/* test_quantity.c - quantity.c against Kubernetes' own tables, ported row by
 * row from k8s.io/apimachinery/pkg/api/resource/quantity_test.go, plus a few
 * of ours. Each table loop reports every failing row, then fails once.
 *
 * Not ported (Go-only API or Go internals):
 *   TestDec, TestBigDec              inf.Dec.String of the Go library
 *   TestQuantityDeepCopy, TestDeepCopy, TestUninitializedNoCrash
 *                                    Go pointer sharing; td_quantity is a value
 *   TestJSON, TestJSONWhitespace, TestQuantityUnmarshalCBOR,
 *   TestQuantityRoundtripCBOR, TestQuantityValueSet's JSON half,
 *   ExampleQuantityValue             JSON/CBOR/pflag marshalling
 *   TestQuantityPtrEqual             nil pointer semantics
 *   TestMostNegativeAtUnrepresentableScaleStaysInt64
 *                                    Go's int64Amount backend and its wrap
 *   TestQuantityAsApproximateFloat64, TestStringQuantityAsApproximateFloat64
 *                                    Go's deliberately inexact float path; we
 *                                    port the AsFloat64Slow tables instead,
 *                                    which expect the correctly rounded double
 *   TestQuantityString's q.s checks, TestParseQuantity's wantAsInt64 column,
 *   TestMul's ok column, TestQuantityParse's AsInt64/asDec passes
 *                                    which Go backend holds the value
 *   Benchmark*                       benchmarks */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/quantity.h"

#define DSI  TD_QFMT_DECIMAL_SI
#define BIN  TD_QFMT_BINARY_SI
#define DEXP TD_QFMT_DECIMAL_EXPONENT
/* Go's Format("invalidFormatDefaultsToExponent"). */
#define BADFMT        ((td_qformat)99)
#define MOST_POSITIVE INT64_MAX
#define MOST_NEGATIVE INT64_MIN

static td_quantity must_parse(const char *s)
{
    td_quantity q;
    td_err err;
    if (td_quantity_parse(s, &q, &err) != TD_OK)
        fail_msg("cannot parse '%s': %s", s, err.msg);
    return q;
}

static const char *str(const td_quantity *q, char *buf)
{
    td_quantity_format(q, buf, TD_QUANTITY_STR_MAX);
    return buf;
}

static td_quantity dec_q(int64_t v, int32_t exp, td_qformat f)
{
    td_quantity q;
    td_quantity_from_int(&q, v, exp, f);
    return q;
}

/* TestQuantityParse: each input with the value and format Kubernetes
 * expects (decQuantity(mantissa, exponent, format)), and the String() that
 * value prints. max = maxAllowed (2^63-1). */
typedef struct {
    const char *input;
    int64_t mantissa;
    int32_t exponent;
    td_qformat format;
    const char *canonical;
} parse_row;

static const parse_row parse_table[] = {
    {"0", 0, 0, DSI, "0"},
    {"0n", 0, 0, DSI, "0"},
    {"0u", 0, 0, DSI, "0"},
    {"0m", 0, 0, DSI, "0"},
    {"0Ki", 0, 0, BIN, "0"},
    {"0k", 0, 0, DSI, "0"},
    {"0Mi", 0, 0, BIN, "0"},
    {"0M", 0, 0, DSI, "0"},
    {"0Gi", 0, 0, BIN, "0"},
    {"0G", 0, 0, DSI, "0"},
    {"0Ti", 0, 0, BIN, "0"},
    {"0T", 0, 0, DSI, "0"},

    /* Quantity less numbers are allowed */
    {"1", 1, 0, DSI, "1"},

    /* Binary suffixes */
    {"1Ki", 1024, 0, BIN, "1Ki"},
    {"8Ki", 8 * 1024, 0, BIN, "8Ki"},
    {"7Mi", 7 * 1024 * 1024, 0, BIN, "7Mi"},
    {"6Gi", 6LL * 1024 * 1024 * 1024, 0, BIN, "6Gi"},
    {"5Ti", 5LL * 1024 * 1024 * 1024 * 1024, 0, BIN, "5Ti"},
    {"4Pi", 4LL * 1024 * 1024 * 1024 * 1024 * 1024, 0, BIN, "4Pi"},
    {"3Ei", 3LL * 1024 * 1024 * 1024 * 1024 * 1024 * 1024, 0, BIN, "3Ei"},

    {"10Ti", 10LL * 1024 * 1024 * 1024 * 1024, 0, BIN, "10Ti"},
    {"100Ti", 100LL * 1024 * 1024 * 1024 * 1024, 0, BIN, "100Ti"},

    /* Decimal suffixes */
    {"5n", 5, -9, DSI, "5n"},
    {"4u", 4, -6, DSI, "4u"},
    {"3m", 3, -3, DSI, "3m"},
    {"9", 9, 0, DSI, "9"},
    {"8k", 8, 3, DSI, "8k"},
    {"50k", 5, 4, DSI, "50k"},
    {"7M", 7, 6, DSI, "7M"},
    {"6G", 6, 9, DSI, "6G"},
    {"5T", 5, 12, DSI, "5T"},
    {"40T", 4, 13, DSI, "40T"},
    {"300T", 3, 14, DSI, "300T"},
    {"2P", 2, 15, DSI, "2P"},
    {"1E", 1, 18, DSI, "1E"},

    /* Decimal exponents */
    {"1E-3", 1, -3, DEXP, "1e-3"},
    {"1e3", 1, 3, DEXP, "1e3"},
    {"1E6", 1, 6, DEXP, "1e6"},
    {"1e9", 1, 9, DEXP, "1e9"},
    {"1E12", 1, 12, DEXP, "1e12"},
    {"1e15", 1, 15, DEXP, "1e15"},
    {"1E18", 1, 18, DEXP, "1e18"},

    /* Nonstandard but still parsable */
    {"1e14", 1, 14, DEXP, "100e12"},
    {"1e13", 1, 13, DEXP, "10e12"},
    {"1e3", 1, 3, DEXP, "1e3"},
    {"100.035k", 100035, 0, DSI, "100035"},

    /* Things that look like floating point */
    {"0.001", 1, -3, DSI, "1m"},
    {"0.0005k", 5, -1, DSI, "500m"},
    {"0.005", 5, -3, DSI, "5m"},
    {"0.05", 5, -2, DSI, "50m"},
    {"0.5", 5, -1, DSI, "500m"},
    {"0.00050k", 5, -1, DSI, "500m"},
    {"0.00500", 5, -3, DSI, "5m"},
    {"0.05000", 5, -2, DSI, "50m"},
    {"0.50000", 5, -1, DSI, "500m"},
    {"0.5e0", 5, -1, DEXP, "500e-3"},
    {"0.5e-1", 5, -2, DEXP, "50e-3"},
    {"0.5e-2", 5, -3, DEXP, "5e-3"},
    {"0.5e0", 5, -1, DEXP, "500e-3"},
    {"10.035M", 10035, 3, DSI, "10035k"},

    {"1.2e3", 12, 2, DEXP, "1200"},
    {"1.3E+6", 13, 5, DEXP, "1300e3"},
    {"1.40e9", 14, 8, DEXP, "1400e6"},
    {"1.53E12", 153, 10, DEXP, "1530e9"},
    {"1.6e15", 16, 14, DEXP, "1600e12"},
    {"1.7E18", 17, 17, DEXP, "1700e15"},

    {"9.01", 901, -2, DSI, "9010m"},
    {"8.1k", 81, 2, DSI, "8100"},
    {"7.123456M", 7123456, 0, DSI, "7123456"},
    {"6.987654321G", 6987654321LL, 0, DSI, "6987654321"},
    {"5.444T", 5444, 9, DSI, "5444G"},
    {"40.1T", 401, 11, DSI, "40100G"},
    {"300.2T", 3002, 11, DSI, "300200G"},
    {"2.5P", 25, 14, DSI, "2500T"},
    {"1.01E", 101, 16, DSI, "1010P"},

    /* Things that saturate/round */
    {"3.001n", 4, -9, DSI, "4n"},
    {"1.1E-9", 2, -9, DEXP, "2e-9"},
    {"0.0000000001", 1, -9, DSI, "1n"},
    {"0.0000000005", 1, -9, DSI, "1n"},
    {"0.00000000050", 1, -9, DSI, "1n"},
    {"0.5e-9", 1, -9, DEXP, "1e-9"},
    {"0.9n", 1, -9, DSI, "1n"},
    {"0.00000012345", 124, -9, DSI, "124n"},
    {"0.00000012354", 124, -9, DSI, "124n"},
    {"9Ei", MOST_POSITIVE, 0, BIN, "9223372036854775807"},
    {"9223372036854775807Ki", MOST_POSITIVE, 0, BIN, "9223372036854775807"},
    {"12E", 12, 18, DSI, "12E"},

    /* We'll accept fractional binary stuff, too. */
    {"100.035Ki", 10243584, -2, BIN, "102435840m"},
    {"0.5Mi", 524288, 0, BIN, "512Ki"},
    {"0.05Gi", 536870912, -1, BIN, "53687091200m"},
    {"0.025Ti", 274877906944LL, -1, BIN, "27487790694400m"},

    /* Things written by trolls */
    {"0.000000000001Ki", 2, -9, DSI, "2n"}, /* rounds up, changes format */
    {".001", 1, -3, DSI, "1m"},
    {".0001k", 100, -3, DSI, "100m"},
    {"1.", 1, 0, DSI, "1"},
    {"1.G", 1, 9, DSI, "1G"},
};

/* Parses prefix+row.input and checks value, format and String() against
 * the row (negated when the prefix is "-"). Returns the failures. */
static int check_parse_row(const parse_row *row, const char *prefix)
{
    char input[128], want[128], buf[TD_QUANTITY_STR_MAX];
    td_quantity got, expect;
    td_err err;
    snprintf(input, sizeof input, "%s%s", prefix, row->input);
    expect = dec_q(row->mantissa, row->exponent, row->format);
    int neg = strcmp(prefix, "-") == 0;
    if (neg)
        td_quantity_neg(&expect);
    snprintf(want, sizeof want, "%s%s", neg && td_quantity_sign(&expect) != 0 ? "-" : "",
             row->canonical);
    if (td_quantity_parse(input, &got, &err) != TD_OK) {
        print_error("%s: unexpected error: %s\n", input, err.msg);
        return 1;
    }
    int failures = 0;
    if (td_quantity_cmp(&got, &expect) != 0) {
        char gbuf[TD_QUANTITY_STR_MAX];
        print_error("%s: expected %s, got %s\n", input, str(&expect, buf), str(&got, gbuf));
        failures++;
    }
    if (td_quantity_get_format(&got) != row->format) {
        print_error("%s: expected format %d, got %d\n", input, row->format,
                    td_quantity_get_format(&got));
        failures++;
    }
    if (strcmp(str(&got, buf), want) != 0) {
        print_error("%s: expected String() %s, got %s\n", input, want, buf);
        failures++;
    }
    return failures;
}

static void test_quantity_parse(void **state)
{
    (void)state;
    int failures = 0;
    for (size_t i = 0; i < sizeof parse_table / sizeof parse_table[0]; i++) {
        failures += check_parse_row(&parse_table[i], "");
        /* Try the negative version of everything, and with an explicit + */
        failures += check_parse_row(&parse_table[i], "-");
        failures += check_parse_row(&parse_table[i], "+");
    }
    assert_int_equal(failures, 0);
}

/* TestQuantityParse's invalid list, TestQuantityParseNonNumericPanic,
 * TestQuantityValueSet, the rejected rows of TestInterpretExponentInt32Bounds
 * (as full quantities) and ours. */
static const char *const invalid_table[] = {
    "",
    "1.1.M",
    "1+1.0M",
    "0.1mi",
    "0.1am",
    "aoeu",
    ".5i",
    "1i",
    "-3.01i",
    "-3.01e-",
    /* an exponent outside the int32 scale is rejected rather than truncated */
    "1e4294967297",
    /* trailing whitespace is forbidden */
    " 1",
    "1 ",
    /* TestQuantityParseNonNumericPanic, TestQuantityValueSet */
    "Non-Numeric",
    "invalid",
    /* TestInterpretExponentInt32Bounds: MaxInt32+1, MinInt32, 2^32+1, 2^33,
     * MaxInt64, MaxInt64+1, far past int32 */
    "1E2147483648",
    "1E-2147483648",
    "1E4294967297",
    "1E8589934592",
    "1E9223372036854775807",
    "1E9223372036854775808",
    "1E6024865272343",
    /* ours: the inf.Dec path needs a digit; suffix case matters; bare e */
    "e-10",
    "Pi",
    "-Ei",
    ".n0",
    "1e",
    "1e+",
    "1E-",
    "1Ki5",
    "1KI",
    "1kI",
    "1ki",
    "1mi",
    "1K",
    "1Ki1",
    "--1",
    "+-1",
    "1..",
    "1.5.",
    "0x10",
    "1_000",
    "1,5",
    "1\n",
    "\t1",
    "1e3.5",
    "1.5e",
    "1Mi ",
    "∞",
};

static void test_quantity_parse_invalid(void **state)
{
    (void)state;
    int failures = 0;
    for (size_t i = 0; i < sizeof invalid_table / sizeof invalid_table[0]; i++) {
        td_quantity q = dec_q(42, 0, DSI), before = q;
        td_err err = {{0}};
        if (td_quantity_parse(invalid_table[i], &q, &err) != TD_EINVAL) {
            print_error("\"%s\" parsed unexpectedly\n", invalid_table[i]);
            failures++;
            continue;
        }
        if (memcmp(&q, &before, sizeof q) != 0) {
            print_error("\"%s\": failed parse changed *q\n", invalid_table[i]);
            failures++;
        }
        if (strstr(err.msg, "is not a valid quantity: ") == NULL || err.msg[0] != '"') {
            print_error("\"%s\": message does not name it: %s\n", invalid_table[i], err.msg);
            failures++;
        }
    }
    assert_int_equal(failures, 0);
    /* NULL err is allowed */
    td_quantity q;
    assert_int_equal(td_quantity_parse("1.1.M", &q, NULL), TD_EINVAL);
}

static void test_quantity_parse_messages(void **state)
{
    (void)state;
    static const struct {
        const char *input, *msg;
    } rows[] = {
        {"1.1.M", "\"1.1.M\" is not a valid quantity: quantities must match the regular "
                  "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
        {"0.1mi", "\"0.1mi\" is not a valid quantity: unable to parse quantity's suffix"},
        {"e-10", "\"e-10\" is not a valid quantity: unable to parse numeric part of quantity"},
        {"\"\x01", "\"\\\"\\x01\" is not a valid quantity: quantities must match the regular "
                   "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_quantity q;
        td_err err;
        assert_int_equal(td_quantity_parse(rows[i].input, &q, &err), TD_EINVAL);
        assert_string_equal(err.msg, rows[i].msg);
    }
}

/* Inputs and the String() of what they parse to: TestQuantityParseEmit,
 * TestParseQuantityString (its inputs), TestQuantityParseZero,
 * TestMustParseNearMaxInt64, the accepted rows of
 * TestInterpretExponentInt32Bounds, and ours. */
static const struct {
    const char *input, *canonical;
} emit_table[] = {
    /* TestQuantityParseEmit */
    {"1Ki", "1Ki"},
    {"1Mi", "1Mi"},
    {"1Gi", "1Gi"},
    {"1024Mi", "1Gi"},
    {"1000M", "1G"},
    {".001Ki", "1024m"},
    {".000001Ki", "1024u"},
    {".000000001Ki", "1024n"},
    {".000000000001Ki", "2n"},
    /* TestParseQuantityString's inputs */
    {"0.025Ti", "27487790694400m"},
    {"1.025Ti", "1126999418470400m"},
    {"-1.025Ti", "-1126999418470400m"},
    {".", "0"},
    {"-.", "0"},
    {"1E-3", "1e-3"},
    /* TestQuantityParseZero */
    {"0", "0"},
    /* TestMustParseNearMaxInt64 */
    {"9223372036854775807", "9223372036854775807"},
    {"9223372036854775806", "9223372036854775806"},
    {"9223372036854775808", "9223372036854775808"},
    /* TestInterpretExponentInt32Bounds, accepted */
    {"1e14", "100e12"},
    {"1E2147483647", "10e2147483646"},
    {"1E-2147483647", "1e-9"},
    /* ours: the task's examples and the scanner's corners */
    {"1.5Gi", "1536Mi"},
    {"0.5", "500m"},
    {"1000m", "1"},
    {"100Ki", "100Ki"},
    {"12E", "12E"},
    {"0.1m", "100u"},
    {"1.5e-9", "2e-9"},
    {"-1.5e-9", "-2e-9"},
    {"1.5n", "2n"},
    {"-0.1n", "-1n"},
    {"1.1Ki", "1126400m"},
    {"1024Ki", "1Mi"},
    {"1025Ki", "1025Ki"},
    {"1023", "1023"},
    {"1536", "1536"},
    {"7Ei", "7Ei"},
    {"8Ei", "9223372036854775807"},
    {"-8Ei", "-9223372036854775807"},
    {"8E", "8E"},
    {"1000E", "1e21"},
    {"0.001E", "1P"},
    {"1e-10", "1e-9"},
    {"1e0", "1"},
    {"1E+0", "1"},
    {"1e-0", "1"},
    {"12e-1", "1200e-3"},
    {"-", "0"},
    {"+", "0"},
    {"-0", "0"},
    {"000", "0"},
    {"007", "7"},
    {"+.5", "500m"},
    {"Ki", "0"},
    {"Ti", "0"},
    {"m", "0"},
    {"e-9", "0"},
    {"e5", "0"},
    {"0e-20", "0"},
    {"0.0e-20", "0"},
    {"0Pi", "0"},
    {"1.500", "1500m"},
    {"01", "1"},
    {"+1", "1"},
    {"1e1000", "10e999"},
    {"123456789012345678901234567890", "123456789012345678901234567890"},
    {"1.000000000000000000000000000001", "1000000001n"},
    {"0.000000000000000000000000000001Ei", "1n"},
    {"1.0000000000000000000000000000000000000000000001Ei", "1152921504606846976000000001n"},
    {"1.00000000000000000000000000000000000000000000001Ki", "1024000000001n"},
};

static void test_quantity_parse_emit(void **state)
{
    (void)state;
    int failures = 0;
    char buf[TD_QUANTITY_STR_MAX];
    for (size_t i = 0; i < sizeof emit_table / sizeof emit_table[0]; i++) {
        td_quantity q;
        td_err err;
        if (td_quantity_parse(emit_table[i].input, &q, &err) != TD_OK) {
            print_error("%s: unexpected error: %s\n", emit_table[i].input, err.msg);
            failures++;
            continue;
        }
        if (strcmp(str(&q, buf), emit_table[i].canonical) != 0) {
            print_error("%s: expected %s, got %s\n", emit_table[i].input, emit_table[i].canonical,
                        buf);
            failures++;
        }
    }
    assert_int_equal(failures, 0);
}

/* TestQuantityString: a value, its String(), and another spelling that must
 * print the same; then everything negated. */
static const struct {
    int64_t mantissa;
    int32_t exponent;
    td_qformat format;
    const char *expect, *alternate;
} string_table[] = {
    {1024 * 1024 * 1024, 0, BIN, "1Gi", "1024Mi"},
    {300 * 1024 * 1024, 0, BIN, "300Mi", "307200Ki"},
    {6 * 1024, 0, BIN, "6Ki", ""},
    {1001LL * 1024 * 1024 * 1024, 0, BIN, "1001Gi", "1025024Mi"},
    {1024LL * 1024 * 1024 * 1024, 0, BIN, "1Ti", "1024Gi"},
    {5, 0, BIN, "5", "5000m"},
    {500, -3, BIN, "500m", "0.5"},
    {1, 9, DSI, "1G", "1000M"},
    {1000, 6, DSI, "1G", "0.001T"},
    {1000000, 3, DSI, "1G", ""},
    {1000000000, 0, DSI, "1G", ""},
    {1, -3, DSI, "1m", "1000u"},
    {80, -3, DSI, "80m", ""},
    {1080, -3, DSI, "1080m", "1.08"},
    {108, -2, DSI, "1080m", "1080000000n"},
    {10800, -4, DSI, "1080m", ""},
    {300, 6, DSI, "300M", ""},
    {1, 12, DSI, "1T", ""},
    /* DecimalSI has no suffix beyond "E": exponent notation instead */
    {1, 18, DSI, "1E", ""},
    {1, 21, DSI, "1e21", "1000E"},
    {5, 21, DSI, "5e21", "5000E"},
    {1, 24, DSI, "1e24", "1000000E"},
    /* BinarySI has no suffix beyond "Ei": exact decimal instead */
    {1, 70, BIN, "10e69", ""},
    {2, 70, BIN, "20e69", ""},
    {1, 72, BIN, "1e72", ""},
    {1234567, 6, DSI, "1234567M", ""},
    {1234567, -3, BIN, "1234567m", ""},
    {3, 3, DSI, "3k", ""},
    {1025, 0, BIN, "1025", ""},
    {0, 0, DSI, "0", ""},
    {0, 0, BIN, "0", ""},
    {1, 9, DEXP, "1e9", ".001e12"},
    {1, -3, DEXP, "1e-3", "0.001e0"},
    {1, -9, DEXP, "1e-9", "1000e-12"},
    {80, -3, DEXP, "80e-3", ""},
    {300, 6, DEXP, "300e6", ""},
    {1, 12, DEXP, "1e12", ""},
    {1, 3, DEXP, "1e3", ""},
    {3, 3, DEXP, "3e3", ""},
    {3, 3, DSI, "3k", ""},
    {0, 0, DEXP, "0", "00"},
    {1, -9, DSI, "1n", ""},
    {80, -9, DSI, "80n", ""},
    {1080, -9, DSI, "1080n", ""},
    {108, -8, DSI, "1080n", ""},
    {10800, -10, DSI, "1080n", ""},
    {1, -6, DSI, "1u", ""},
    {80, -6, DSI, "80u", ""},
    {1080, -6, DSI, "1080u", ""},
};

static void test_quantity_string(void **state)
{
    (void)state;
    int failures = 0;
    char buf[TD_QUANTITY_STR_MAX], buf2[TD_QUANTITY_STR_MAX], want[TD_QUANTITY_STR_MAX];
    for (size_t i = 0; i < sizeof string_table / sizeof string_table[0]; i++) {
        td_quantity in =
            dec_q(string_table[i].mantissa, string_table[i].exponent, string_table[i].format);
        const char *expect = string_table[i].expect;
        if (strcmp(str(&in, buf), expect) != 0) {
            print_error("row %zu: expected %s, got %s\n", i, expect, buf);
            failures++;
        }
        td_quantity q = must_parse(expect);
        if (strcmp(str(&q, buf), expect) != 0 || td_quantity_cmp(&q, &in) != 0) {
            print_error("row %zu: %s does not round trip: %s\n", i, expect, buf);
            failures++;
        }
        if (string_table[i].alternate[0] != '\0') {
            q = must_parse(string_table[i].alternate);
            if (strcmp(str(&q, buf), expect) != 0) {
                print_error("row %zu: unexpected alternate canonical: %s\n", i, buf);
                failures++;
            }
        }
        if (td_quantity_sign(&in) == 0)
            continue; /* Don't expect it to print "-0" ever */
        td_quantity_neg(&in);
        snprintf(want, sizeof want, "-%s", expect);
        if (strcmp(str(&in, buf2), want) != 0) {
            print_error("row %zu: expected %s, got %s\n", i, want, buf2);
            failures++;
        }
    }
    assert_int_equal(failures, 0);
}

/* TestQuantityParseEmit's second loop: "-" + input prints "-" + expect. */
static void test_quantity_parse_emit_negative(void **state)
{
    (void)state;
    char in[64], want[64], buf[TD_QUANTITY_STR_MAX];
    for (size_t i = 0; i < 9; i++) {
        snprintf(in, sizeof in, "-%s", emit_table[i].input);
        snprintf(want, sizeof want, "-%s", emit_table[i].canonical);
        td_quantity q = must_parse(in);
        assert_string_equal(str(&q, buf), want);
    }
}

/* TestBinarySIZeroExponentString and TestQuantityStringBelowNano */
static void test_quantity_string_edges(void **state)
{
    (void)state;
    static const struct {
        int64_t mantissa;
        int32_t exponent;
        td_qformat format;
        const char *want;
    } rows[] = {
        {2000, 0, BIN, "2000"},
        {-2000, 0, BIN, "-2000"},
        {1, -12, DSI, "1e-12"},
        {1, -10, DSI, "100e-12"},
        {1, 2147483647, DSI, "10e2147483646"},
        {100, 2147483647, DEXP, "1000e2147483646"}, /* ours: stays parseable */
        {1, INT32_MIN, DEXP, "10e-2147483649"},
    };
    char buf[TD_QUANTITY_STR_MAX];
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_quantity q = dec_q(rows[i].mantissa, rows[i].exponent, rows[i].format);
        assert_string_equal(str(&q, buf), rows[i].want);
    }
}

/* TestParseQuantity: around the int64 limits; canonical NULL means the
 * input is already canonical. dec is the exact value (wantAsDec). */
static const struct {
    const char *input, *dec, *canonical;
} limits_table[] = {
    /* min/max 18 digits */
    {"-999999999999999999", "-999999999999999999", NULL},
    {"999999999999999999", "999999999999999999", NULL},
    {"-999999999999999999.0", "-999999999999999999", "-999999999999999999"},
    {"999999999999999999.0", "999999999999999999", "999999999999999999"},
    {"-999999999999999999.1", "-999999999999999999.1", "-999999999999999999100m"},
    {"999999999999999999.1", "999999999999999999.1", "999999999999999999100m"},
    /* min/max 19 digits */
    {"-9999999999999999999", "-9999999999999999999", NULL},
    {"9999999999999999999", "9999999999999999999", NULL},
    {"-1E", "-1000000000000000000", NULL},
    {"1E", "1000000000000000000", NULL},
    {"-1000000000000000000", "-1000000000000000000", "-1E"},
    {"1000000000000000000", "1000000000000000000", "1E"},
    {"-9999999999999999999.0", "-9999999999999999999", "-9999999999999999999"},
    {"9999999999999999999.0", "9999999999999999999", "9999999999999999999"},
    {"-1.0E", "-1000000000000000000", "-1E"},
    {"1.0E", "1000000000000000000", "1E"},
    {"-1000000000000000000.0", "-1000000000000000000", "-1E"},
    {"1000000000000000000.0", "1000000000000000000", "1E"},
    {"-9999999999999999999000m", "-9999999999999999999", "-9999999999999999999"},
    {"9999999999999999999000m", "9999999999999999999", "9999999999999999999"},
    {"-9999999999999999999.1", "-9999999999999999999.1", "-9999999999999999999100m"},
    {"9999999999999999999.1", "9999999999999999999.1", "9999999999999999999100m"},
    {"-1.0000000000000000001E", "-1000000000000000000.1", "-1000000000000000000100m"},
    {"1.0000000000000000001E", "1000000000000000000.1", "1000000000000000000100m"},
    {"-1000000000000000000.1", "-1000000000000000000.1", "-1000000000000000000100m"},
    {"1000000000000000000.1", "1000000000000000000.1", "1000000000000000000100m"},
    {"-1.000000000000000001E", "-1000000000000000001", "-1000000000000000001"},
    {"1.000000000000000001E", "1000000000000000001", "1000000000000000001"},
    {"-1000000000000000001", "-1000000000000000001", NULL},
    {"1000000000000000001", "1000000000000000001", NULL},
    /* min/max 20 digits */
    {"-10E", "-10000000000000000000", NULL},
    {"10E", "10000000000000000000", NULL},
    {"-10000000000000000000", "-10000000000000000000", "-10E"},
    {"10000000000000000000", "10000000000000000000", "10E"},
    {"-10.0E", "-10000000000000000000", "-10E"},
    {"10.0E", "10000000000000000000", "10E"},
    {"-10000000000000000000.0", "-10000000000000000000", "-10E"},
    {"10000000000000000000.0", "10000000000000000000", "10E"},
    {"-10000000000000000000000m", "-10000000000000000000", "-10E"},
    {"10000000000000000000000m", "10000000000000000000", "10E"},
    {"-10.0000000000000000001E", "-10000000000000000000.1", "-10000000000000000000100m"},
    {"10.0000000000000000001E", "10000000000000000000.1", "10000000000000000000100m"},
    {"-10000000000000000000.1", "-10000000000000000000.1", "-10000000000000000000100m"},
    {"10000000000000000000.1", "10000000000000000000.1", "10000000000000000000100m"},
    {"-10.000000000000000001E", "-10000000000000000001", "-10000000000000000001"},
    {"10.000000000000000001E", "10000000000000000001", "10000000000000000001"},
    {"-10000000000000000001", "-10000000000000000001", NULL},
    {"10000000000000000001", "10000000000000000001", NULL},
    /* min/max int64 - 1 */
    {"-9223372036854775809", "-9223372036854775809", NULL},
    {"9223372036854775806", "9223372036854775806", NULL},
    {"-9223372036854775809.0", "-9223372036854775809", "-9223372036854775809"},
    {"9223372036854775806.0", "9223372036854775806", "9223372036854775806"},
    {"-9223372036854775809000m", "-9223372036854775809", "-9223372036854775809"},
    {"9223372036854775806000m", "9223372036854775806", "9223372036854775806"},
    {"-9223372036854775809.1", "-9223372036854775809.1", "-9223372036854775809100m"},
    {"9223372036854775806.1", "9223372036854775806.1", "9223372036854775806100m"},
    /* min/max int64 */
    {"-9223372036854775808", "-9223372036854775808", NULL},
    {"9223372036854775807", "9223372036854775807", NULL},
    {"-9223372036854775808.0", "-9223372036854775808", "-9223372036854775808"},
    {"9223372036854775807.0", "9223372036854775807", "9223372036854775807"},
    {"-9223372036854775808000m", "-9223372036854775808", "-9223372036854775808"},
    {"9223372036854775807000m", "9223372036854775807", "9223372036854775807"},
    {"-9223372036854775808.1", "-9223372036854775808.1", "-9223372036854775808100m"},
    {"9223372036854775807.1", "9223372036854775807.1", "9223372036854775807100m"},
    /* min/max int64 + 1 */
    {"-9223372036854775807", "-9223372036854775807", NULL},
    {"9223372036854775808", "9223372036854775808", NULL},
    {"-9223372036854775807.0", "-9223372036854775807", "-9223372036854775807"},
    {"9223372036854775808.0", "9223372036854775808", "9223372036854775808"},
    {"-9223372036854775807000m", "-9223372036854775807", "-9223372036854775807"},
    {"9223372036854775808000m", "9223372036854775808", "9223372036854775808"},
    {"-9223372036854775807.1", "-9223372036854775807.1", "-9223372036854775807100m"},
    {"9223372036854775808.1", "9223372036854775808.1", "9223372036854775808100m"},
};

static void test_quantity_parse_limits(void **state)
{
    (void)state;
    int failures = 0;
    char buf[TD_QUANTITY_STR_MAX];
    for (size_t i = 0; i < sizeof limits_table / sizeof limits_table[0]; i++) {
        td_quantity q = must_parse(limits_table[i].input);
        td_quantity d = must_parse(limits_table[i].dec);
        const char *want =
            limits_table[i].canonical ? limits_table[i].canonical : limits_table[i].input;
        if (td_quantity_cmp(&q, &d) != 0) {
            print_error("%s: value is not %s\n", limits_table[i].input, limits_table[i].dec);
            failures++;
        }
        if (strcmp(str(&q, buf), want) != 0) {
            print_error("expected input %s to reserialize to %s but got %s\n",
                        limits_table[i].input, want, buf);
            failures++;
        }
    }
    assert_int_equal(failures, 0);
}

/* TestQuantityCmp (both tables; a nil inf.Dec is zero) */
static void test_quantity_cmp(void **state)
{
    (void)state;
    static const struct {
        const char *x, *y;
        int expect;
    } rows[] = {
        {"0", "0", 0},
        {"100m", "50m", 1},
        {"50m", "100m", -1},
        {"10000T", "100Gi", 1},
        /* ours */
        {"1Ki", "1024", 0},
        {"1k", "1Ki", -1},
        {"-1", "1n", -1},
        {"1e2147483647", "1e2147483646", 1},
        {"-1e2147483647", "1", -1},
        {"1n", "1e-9", 0},
        {"9223372036854775807", "9Ei", 0},
        {"0.000000001", "1e-10", 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_quantity a = must_parse(rows[i].x), b = must_parse(rows[i].y);
        assert_int_equal(td_quantity_cmp(&a, &b), rows[i].expect);
        assert_int_equal(td_quantity_cmp(&b, &a), -rows[i].expect);
    }
    static const struct {
        int64_t x, y;
        int expect;
    } rows2[] = {
        {0, 0, 0},   {0, 0, 0},   {0, 0, 0},  {0, 0, 0},
        {0, 10, -1}, {0, -10, 1}, {10, 0, 1}, {-10, 0, -1},
    };
    for (size_t i = 0; i < sizeof rows2 / sizeof rows2[0]; i++) {
        td_quantity a = dec_q(rows2[i].x, 0, DSI), b = dec_q(rows2[i].y, 0, DSI);
        assert_int_equal(td_quantity_cmp(&a, &b), rows2[i].expect);
    }
}

/* TestQuantityCmpInt64AndDec (intQuantity(value, scale)) */
static void test_quantity_cmp_int64(void **state)
{
    (void)state;
    static const struct {
        int64_t av;
        int32_t as;
        int64_t bv;
        int32_t bs;
        int cmp;
    } rows[] = {
        {901, -2, 901, -2, 0},
        {90, -1, 901, -2, -1},
        {901, -2, 900, -2, 1},
        {0, 0, 0, 0, 0},
        {0, 1, 0, -1, 0},
        {0, -1, 0, 1, 0},
        {800, -3, 1, 0, -1},
        {800, -3, 79, -2, 1},

        {MOST_POSITIVE, 0, 1, -1, 1},
        {MOST_POSITIVE, 1, 1, 0, 1},
        {MOST_POSITIVE, 1, 1, 1, 1},
        {MOST_POSITIVE, 1, 0, 1, 1},
        {MOST_POSITIVE, -16, 1, 3, -1},

        {MOST_NEGATIVE, 0, 0, 0, -1},
        {MOST_NEGATIVE, -18, -1, 0, -1},
        {MOST_NEGATIVE, -19, -1, 0, 1},

        {1000000000000000000LL, -17, 1, 1, 0},
        {1000000000000000000LL, -17, -10, 0, 1},
        {-1000000000000000000LL, -17, -10, 0, 0},
        {1000000000000000000LL, -17, 1, 0, 1},

        {1000000000000000000LL + 1, -17, 1, 1, 1},
        {1000000000000000000LL - 1, -17, 1, 1, -1},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_quantity a = dec_q(rows[i].av, rows[i].as, DSI);
        td_quantity b = dec_q(rows[i].bv, rows[i].bs, DSI);
        assert_int_equal(td_quantity_cmp(&a, &b), rows[i].cmp);
        assert_int_equal(td_quantity_cmp(&b, &a), -rows[i].cmp);
    }
}

/* TestQuantityNeg, TestNeg */
static void test_quantity_neg(void **state)
{
    (void)state;
    char buf[TD_QUANTITY_STR_MAX];
    td_quantity q = dec_q(901, -2, DSI), orig = q;
    td_quantity_neg(&q);
    assert_int_not_equal(td_quantity_cmp(&q, &orig), 0);
    assert_string_equal(str(&q, buf), "-9010m");

    static const struct {
        int64_t a, expected;
        td_qformat format;
    } rows[] = {
        {0, 0, DSI}, {0, 0, DEXP},   {10, -10, BIN}, {-10, 10, BIN},
        {0, 0, DSI}, {10, -10, BIN}, {-10, 10, BIN},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_quantity a = dec_q(rows[i].a, 0, rows[i].format);
        td_quantity e = dec_q(rows[i].expected, 0, rows[i].format);
        td_quantity_neg(&a);
        assert_int_equal(td_quantity_cmp(&a, &e), 0);
        assert_int_equal(td_quantity_get_format(&a), rows[i].format);
    }
}

/* TestQuantityRoundUp */
static void test_quantity_round_up(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int32_t scale;
        int64_t mantissa;
        int32_t exponent;
        bool ok;
    } rows[] = {
        {"9.01", -3, 901, -2, true},   {"9.01", -2, 901, -2, true},   {"9.01", -1, 91, -1, false},
        {"9.01", 0, 10, 0, false},     {"9.01", 1, 10, 0, false},     {"9.01", 2, 100, 0, false},
        {"-9.01", -3, -901, -2, true}, {"-9.01", -2, -901, -2, true}, {"-9.01", -1, -91, -1, false},
        {"-9.01", 0, -10, 0, false},   {"-9.01", 1, -10, 0, false},   {"-9.01", 2, -100, 0, false},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_quantity got = must_parse(rows[i].in);
        td_quantity expect = dec_q(rows[i].mantissa, rows[i].exponent, DSI);
        assert_int_equal(td_quantity_round_up(&got, rows[i].scale), rows[i].ok);
        assert_int_equal(td_quantity_cmp(&got, &expect), 0);
    }
}

/* TestAdd and TestSub; "z" is Quantity{Format: DecimalSI}, i.e. zero */
static void test_quantity_add_sub(void **state)
{
    (void)state;
    static const struct {
        int64_t av;
        int32_t as;
        td_qformat af;
        int64_t bv;
        int32_t bs;
        td_qformat bf;
        int64_t ev;
        td_qformat ef;
    } add_rows[] =
        {
            {10, 0, DSI, 1, 1, DSI, 20, DSI}, {10, 0, DSI, 1, 0, BIN, 11, DSI},
            {10, 0, BIN, 1, 0, DSI, 11, BIN}, {0, 0, DSI, 50, 0, DSI, 50, DSI},
            {50, 0, DSI, 0, 0, DSI, 50, DSI}, {0, 0, DSI, 0, 0, DSI, 0, DSI},
        },
      sub_rows[] = {
          {10, 0, DSI, 1, 1, DSI, 0, DSI},  {10, 0, DSI, 1, 0, BIN, 9, DSI},
          {10, 0, BIN, 1, 0, DSI, 9, BIN},  {0, 0, DSI, 50, 0, DSI, -50, DSI},
          {50, 0, DSI, 0, 0, DSI, 50, DSI}, {0, 0, DSI, 0, 0, DSI, 0, DSI},
      };
    for (size_t i = 0; i < sizeof add_rows / sizeof add_rows[0]; i++) {
        td_quantity a = dec_q(add_rows[i].av, add_rows[i].as, add_rows[i].af);
        td_quantity b = dec_q(add_rows[i].bv, add_rows[i].bs, add_rows[i].bf);
        td_quantity e = dec_q(add_rows[i].ev, 0, add_rows[i].ef);
        assert_int_equal(td_quantity_add(&a, &b), TD_OK);
        assert_int_equal(td_quantity_cmp(&a, &e), 0);
        assert_int_equal(td_quantity_get_format(&a), add_rows[i].ef);
    }
    for (size_t i = 0; i < sizeof sub_rows / sizeof sub_rows[0]; i++) {
        td_quantity a = dec_q(sub_rows[i].av, sub_rows[i].as, sub_rows[i].af);
        td_quantity b = dec_q(sub_rows[i].bv, sub_rows[i].bs, sub_rows[i].bf);
        td_quantity e = dec_q(sub_rows[i].ev, 0, sub_rows[i].ef);
        assert_int_equal(td_quantity_sub(&a, &b), TD_OK);
        assert_int_equal(td_quantity_cmp(&a, &e), 0);
        assert_int_equal(td_quantity_get_format(&a), sub_rows[i].ef);
    }
}

/* TestQuantityAddZeroPreservesSuffix, TestQuantitySubZeroPreservesSuffix,
 * TestQuantityCanocicalizeZero */
static void test_quantity_zero_preserves_suffix(void **state)
{
    (void)state;
    static const char *const values[] = {"100m", "1Gi"};
    char buf[TD_QUANTITY_STR_MAX], want[TD_QUANTITY_STR_MAX];
    td_quantity zero = must_parse("0");
    for (size_t i = 0; i < 2; i++) {
        td_quantity value = must_parse(values[i]);
        td_quantity v1 = value, v2 = zero;
        assert_int_equal(td_quantity_add(&v1, &zero), TD_OK);
        assert_int_equal(td_quantity_add(&v2, &value), TD_OK);
        assert_string_equal(str(&v1, buf), values[i]);
        assert_string_equal(str(&v2, buf), values[i]);

        v1 = value;
        v2 = zero;
        assert_int_equal(td_quantity_sub(&v1, &zero), TD_OK);
        assert_string_equal(str(&v1, buf), values[i]);
        assert_int_equal(td_quantity_sub(&v2, &value), TD_OK);
        snprintf(want, sizeof want, "-%s", values[i]);
        assert_string_equal(str(&v2, buf), want);
    }
    td_quantity val = must_parse("1000m"), one = dec_q(1, 0, DSI);
    assert_int_equal(td_quantity_sub(&val, &one), TD_OK);
    assert_string_equal(str(&val, buf), "0");
}

/* TestMul, with the expected values written out in decimal. */
static void test_quantity_mul(void **state)
{
    (void)state;
    static const struct {
        int64_t a;
        td_qformat format;
        int64_t b;
        const char *expected;
    } rows[] = {
        {10, DSI, 10, "100"},
        {10, DSI, 1, "10"},
        {10, BIN, 1, "10"},
        {0, DSI, 50, "0"},
        {50, DSI, 0, "0"},
        {0, DSI, 0, "0"},

        {10, DSI, -10, "-100"},
        {-10, DSI, 1, "-10"},
        {10, BIN, -1, "-10"},
        {-50, DSI, 0, "0"},
        {-50, DSI, -50, "2500"},
        {0, DSI, -50, "0"},
        {MOST_POSITIVE, DSI, 0, "0"},
        {MOST_POSITIVE, DSI, 1, "9223372036854775807"},
        {MOST_POSITIVE, DSI, -1, "-9223372036854775807"},
        {MOST_POSITIVE / 2, DSI, 2, "9223372036854775806"},
        {MOST_POSITIVE / -2, DSI, -2, "9223372036854775806"},
        {MOST_POSITIVE, DSI, 2, "18446744073709551614"},
        {MOST_POSITIVE, DSI, 10, "92233720368547758070"},
        {MOST_POSITIVE, DSI, -10, "-92233720368547758070"},
        {MOST_NEGATIVE, DSI, 0, "0"},
        {MOST_NEGATIVE, DSI, 1, "-9223372036854775808"},
        {MOST_NEGATIVE, DSI, -1, "9223372036854775808"},
        {MOST_NEGATIVE / 2, DSI, 2, "-9223372036854775808"},
        {MOST_NEGATIVE / -2, DSI, -2, "-9223372036854775808"},
        {MOST_NEGATIVE, DSI, 2, "-18446744073709551616"},
        {MOST_NEGATIVE, DSI, 10, "-92233720368547758080"},
        {MOST_NEGATIVE, DSI, -10, "92233720368547758080"},
        /* ours: 64-bit factors */
        {MOST_NEGATIVE, DSI, MOST_NEGATIVE, "85070591730234615865843651857942052864"},
        {3, DSI, MOST_POSITIVE, "27670116110564327421"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_quantity a = dec_q(rows[i].a, 0, rows[i].format);
        td_quantity e = must_parse(rows[i].expected);
        assert_int_equal(td_quantity_mul(&a, rows[i].b), TD_OK);
        if (td_quantity_cmp(&a, &e) != 0) {
            char buf[TD_QUANTITY_STR_MAX];
            fail_msg("[%zu] Expected %s, got %s", i, rows[i].expected, str(&a, buf));
        }
    }
}

/* TestNegAndSubAtMostNegative, TestSubMostNegativeCrossScale,
 * TestZeroSubMostNegativeInheritsFormat, TestZeroSubMostNegativePreservesScale,
 * TestBinarySIPastEiArithmeticRoundTrip */
static void test_quantity_most_negative(void **state)
{
    (void)state;
    char buf[TD_QUANTITY_STR_MAX];
    td_quantity want = must_parse("9223372036854775808");

    td_quantity neg = dec_q(MOST_NEGATIVE, 0, DSI);
    td_quantity_neg(&neg);
    assert_int_equal(td_quantity_sign(&neg), 1);
    assert_string_equal(str(&neg, buf), "9223372036854775808");
    assert_int_equal(td_quantity_cmp(&neg, &want), 0);

    td_quantity sub, mn = dec_q(MOST_NEGATIVE, 0, DSI);
    td_quantity_zero(&sub, DSI);
    assert_int_equal(td_quantity_sub(&sub, &mn), TD_OK);
    assert_string_equal(str(&sub, buf), "9223372036854775808");

    td_quantity one_sub = dec_q(1, 0, DSI);
    assert_int_equal(td_quantity_sub(&one_sub, &mn), TD_OK);
    assert_string_equal(str(&one_sub, buf), "9223372036854775809");

    td_quantity neighbor = dec_q(MOST_NEGATIVE + 1, 0, DSI);
    td_quantity_neg(&neighbor);
    assert_int_equal(td_quantity_value(&neighbor), MOST_POSITIVE);

    td_quantity sub_neighbor, mn1 = dec_q(MOST_NEGATIVE + 1, 0, DSI);
    td_quantity_zero(&sub_neighbor, DSI);
    assert_int_equal(td_quantity_sub(&sub_neighbor, &mn1), TD_OK);
    assert_int_equal(td_quantity_value(&sub_neighbor), MOST_POSITIVE);

    td_quantity scaled = dec_q(MOST_NEGATIVE, -3, DSI);
    td_quantity_neg(&scaled);
    assert_string_equal(str(&scaled, buf), "9223372036854775808m");

    td_quantity scaled_sub = dec_q(1, -3, DSI), mn_milli = dec_q(MOST_NEGATIVE, -3, DSI);
    assert_int_equal(td_quantity_sub(&scaled_sub, &mn_milli), TD_OK);
    assert_string_equal(str(&scaled_sub, buf), "9223372036854775809m");

    td_quantity zero_scaled_sub;
    td_quantity_zero(&zero_scaled_sub, DSI);
    assert_int_equal(td_quantity_sub(&zero_scaled_sub, &mn_milli), TD_OK);
    assert_string_equal(str(&zero_scaled_sub, buf), "9223372036854775808m");
    assert_int_equal(td_quantity_sign(&zero_scaled_sub), 1);

    td_quantity cross = dec_q(1, 1, DSI);
    assert_int_equal(td_quantity_sub(&cross, &mn), TD_OK);
    assert_string_equal(str(&cross, buf), "9223372036854775818");

    td_quantity inherit, mn_bin = dec_q(MOST_NEGATIVE, 0, BIN);
    td_quantity_zero(&inherit, DSI);
    assert_int_equal(td_quantity_sub(&inherit, &mn_bin), TD_OK);
    assert_int_equal(td_quantity_get_format(&inherit), BIN);
    assert_string_equal(str(&inherit, buf), "8Ei");
    assert_int_equal(td_quantity_cmp(&inherit, &want), 0);

    td_quantity big_scale, mn100 = dec_q(MOST_NEGATIVE, 100, DSI);
    td_quantity_zero(&big_scale, DSI);
    assert_int_equal(td_quantity_sub(&big_scale, &mn100), TD_OK);
    td_quantity want100 = must_parse("9223372036854775808e100");
    assert_int_equal(td_quantity_cmp(&big_scale, &want100), 0);

    td_quantity ei = must_parse("1Ei");
    assert_int_equal(td_quantity_mul(&ei, 1024), TD_OK);
    assert_string_equal(str(&ei, buf), "1180591620717411303424");
    td_quantity back = must_parse(buf);
    assert_int_equal(td_quantity_cmp(&ei, &back), 0);
}

/* A seeded xorshift standing in for rand.Int63. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static int64_t rand_int63(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (int64_t)(rng_state >> 1);
}

/* TestAddSubRoundTrip, TestAddSubRoundTripAcrossScales, TestNegateRoundTrip */
static void test_quantity_round_trips(void **state)
{
    (void)state;
    int64_t order[100];
    for (int k = -10; k <= 10; k++) {
        td_quantity q;
        td_quantity_zero(&q, DSI);
        for (int i = 0; i < 100; i++) {
            order[i] = rand_int63();
            td_quantity x = dec_q(order[i], k, DSI);
            assert_int_equal(td_quantity_add(&q, &x), TD_OK);
        }
        for (int i = 0; i < 100; i++) {
            td_quantity x = dec_q(order[i], k, DSI);
            assert_int_equal(td_quantity_sub(&q, &x), TD_OK);
        }
        assert_int_equal(td_quantity_sign(&q), 0);
    }

    td_quantity q;
    td_quantity_zero(&q, DSI);
    for (int i = 0; i < 100; i++) {
        order[i] = rand_int63();
        td_quantity x = dec_q(order[i], (int32_t)(order[i] % 20 - 10), DSI);
        assert_int_equal(td_quantity_add(&q, &x), TD_OK);
    }
    for (int i = 0; i < 100; i++) {
        td_quantity x = dec_q(order[i], (int32_t)(order[i] % 20 - 10), DSI);
        assert_int_equal(td_quantity_sub(&q, &x), TD_OK);
    }
    assert_int_equal(td_quantity_sign(&q), 0);

    for (int k = -10; k <= 10; k++) {
        for (int i = 0; i < 100; i++) {
            td_quantity a = dec_q(rand_int63(), k, DSI), b = a;
            td_quantity_neg(&b);
            td_quantity_neg(&b);
            assert_int_equal(td_quantity_cmp(&a, &b), 0);
        }
    }
}

/* TestNegativeValueRoundsAwayFromZero, TestQuantityValueSet's 1Mi */
static void test_quantity_value_rounding(void **state)
{
    (void)state;
    static const struct {
        const char *input;
        int64_t value, milli;
    } rows[] = {
        {"-.484785E-7466", -1, -1},
        {".484785E-7466", 1, 1},
        {"-.484785E-1", -1, -49},
        {".484785E-1", 1, 49},
        {"-0.0005", -1, -1},
        {"0.0005", 1, 1},
        {"-1500m", -2, -1500},
        {"1500m", 2, 1500},
        {"-9.5000000001Gi", -10200547329LL, -10200547328108LL},
        {"9.5000000001Gi", 10200547329LL, 10200547328108LL},
        {"-1", -1, -1000},
        {"1", 1, 1000},
        {"0", 0, 0},
        {"1Mi", 1048576, 1048576000},
        /* ours: saturation */
        {"9223372036854775807", INT64_MAX, INT64_MAX},
        {"9223372036854775808", INT64_MAX, INT64_MAX},
        {"-9223372036854775808", INT64_MIN, INT64_MIN},
        {"-9223372036854775809", INT64_MIN, INT64_MIN},
        {"9223372036854775807m", 9223372036854776LL, INT64_MAX},
        {"-9223372036854775808m", -9223372036854776LL, INT64_MIN},
        {"1e2147483647", INT64_MAX, INT64_MAX},
        {"-1e2147483647", INT64_MIN, INT64_MIN},
        {"1n", 1, 1},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_quantity q = must_parse(rows[i].input);
        if (td_quantity_value(&q) != rows[i].value || td_quantity_milli_value(&q) != rows[i].milli)
            fail_msg("%s: Value()=%lld MilliValue()=%lld, want %lld %lld", rows[i].input,
                     (long long)td_quantity_value(&q), (long long)td_quantity_milli_value(&q),
                     (long long)rows[i].value, (long long)rows[i].milli);
    }
}

/* TestMilliNewSet, TestNewSet, TestNewScaledSet */
static void test_quantity_new_set(void **state)
{
    (void)state;
    char buf[TD_QUANTITY_STR_MAX];
    static const struct {
        int64_t value;
        td_qformat format;
        const char *expect;
        bool exact;
    } milli[] = {
        {1, DSI, "1m", true},           {1000, DSI, "1", true},
        {1234000, DSI, "1234", true},   {1024, BIN, "1024m", false},           /* Format changes */
        {1000000, BADFMT, "1e3", true}, {1024 * 1024, BIN, "1048576m", false}, /* Format changes */
    };
    for (size_t i = 0; i < sizeof milli / sizeof milli[0]; i++) {
        td_quantity q = dec_q(milli[i].value, -3, milli[i].format);
        assert_string_equal(str(&q, buf), milli[i].expect);
        if (!milli[i].exact)
            continue;
        td_quantity q2 = must_parse(buf);
        assert_int_equal(td_quantity_milli_value(&q2), milli[i].value);
    }
    static const struct {
        int64_t value;
        td_qformat format;
        const char *expect;
    } set[] = {
        {1, DSI, "1"},      {1000, DSI, "1k"},        {1234000, DSI, "1234k"},
        {1024, BIN, "1Ki"}, {1000000, BADFMT, "1e6"}, {1024 * 1024, BIN, "1Mi"},
    };
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++) {
        td_quantity q = dec_q(set[i].value, 0, set[i].format);
        assert_string_equal(str(&q, buf), set[i].expect);
        td_quantity q2 = must_parse(buf);
        assert_int_equal(td_quantity_value(&q2), set[i].value);
    }
    static const struct {
        int64_t value;
        int32_t scale;
        const char *expect;
    } scaled[] = {
        {1, -9, "1n"}, {1000, -9, "1u"}, {1, -6, "1u"}, {1000, -6, "1m"},
        {1, -3, "1m"}, {1000, -3, "1"},  {1, 0, "1"},   {0, -9, "0"},
        {0, -6, "0"},  {0, -3, "0"},     {0, 0, "0"},
    };
    for (size_t i = 0; i < sizeof scaled / sizeof scaled[0]; i++) {
        td_quantity q = dec_q(scaled[i].value, scaled[i].scale, DSI);
        assert_string_equal(str(&q, buf), scaled[i].expect);
        td_quantity q2 = must_parse(buf);
        assert_int_equal(td_quantity_scaled_value(&q2, scaled[i].scale), scaled[i].value);
    }
}

/* TestScaledValue */
static void test_quantity_scaled_value(void **state)
{
    (void)state;
    static const struct {
        int32_t from, to;
        int64_t expected;
    } rows[] = {
        {-9, -9, 1}, {-9, -6, 1},        {-9, -3, 1},         {-9, 0, 1},        {-6, -9, 1000},
        {-6, -6, 1}, {-6, -3, 1},        {-6, 0, 1},          {-3, -9, 1000000}, {-3, -6, 1000},
        {-3, -3, 1}, {-3, 0, 1},         {0, -9, 1000000000}, {0, -6, 1000000},  {0, -3, 1000},
        {0, 0, 1},   {2, -2, 100 * 100},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_quantity q = dec_q(1, rows[i].from, DSI);
        assert_int_equal(td_quantity_scaled_value(&q, rows[i].to), rows[i].expected);
    }
}

/* TestQuantityAsFloat64Slow, TestStringQuantityAsFloat64Slow */
static void test_quantity_as_double(void **state)
{
    (void)state;
    const double m7 = 7.0 * 1024 * 1024;
    const struct {
        int64_t mantissa;
        int32_t exponent;
        td_qformat format;
        double out;
    } rows[] = {
        {0, 0, DSI, 0.0},
        {0, 0, DEXP, 0.0},
        {0, 0, BIN, 0.0},
        {0, 500, DSI, 0.0},
        {0, 500, DSI, 0.0},
        {0, -500, DSI, 0.0},
        {0, -500, DSI, 0.0},

        {1, 0, DSI, 1},
        {1, 0, DEXP, 1},
        {1, 0, BIN, 1},

        {1024, 0, BIN, 1024},
        {8 * 1024, 0, BIN, 8 * 1024},
        {7 * 1024 * 1024, 0, BIN, m7},
        {7 * 1024 * 1024, 1, BIN, m7 * 10},
        {7 * 1024 * 1024, 4, BIN, m7 * 10000},
        {7 * 1024 * 1024, 8, BIN, m7 * 100000000},
        {7 * 1024 * 1024, -1, BIN, m7 / 10.0},
        {7 * 1024 * 1024, -8, BIN, m7 / 100000000.0},

        {1024, 0, DSI, 1024},
        {8 * 1024, 0, DSI, 8 * 1024},
        {7 * 1024 * 1024, 0, DSI, m7},
        {7 * 1024 * 1024, 1, DSI, m7 * 10},
        {7 * 1024 * 1024, 4, DSI, m7 * 10000},
        {7 * 1024 * 1024, 8, DSI, m7 * 100000000},
        {7 * 1024 * 1024, -1, DSI, m7 / 10.0},
        {7 * 1024 * 1024, -8, DSI, m7 / 100000000.0},

        {1024, 0, DEXP, 1024},
        {8 * 1024, 0, DEXP, 8 * 1024},
        {7 * 1024 * 1024, 0, DEXP, m7},
        {7 * 1024 * 1024, 1, DEXP, m7 * 10},
        {7 * 1024 * 1024, 4, DEXP, m7 * 10000},
        {7 * 1024 * 1024, 8, DEXP, m7 * 100000000},
        {7 * 1024 * 1024, -1, DEXP, m7 / 10.0},
        {7 * 1024 * 1024, -8, DEXP, m7 / 100000000.0},

        /* very large numbers */
        {MOST_POSITIVE, 0, DSI, 9223372036854775807.0},
        {MOST_POSITIVE, 0, BIN, 9223372036854775807.0},
        {12, 18, DSI, 1.2e19},

        /* infinities caused due to float64 overflow */
        {12, 500, DSI, HUGE_VAL},
        {-12, 500, DSI, -HUGE_VAL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_quantity q = dec_q(rows[i].mantissa, rows[i].exponent, rows[i].format);
        double out = td_quantity_as_double(&q);
        if (out != rows[i].out)
            fail_msg("test %zu expected %.17g, got %.17g", i + 1, rows[i].out, out);
    }
    static const struct {
        const char *in;
        double out;
    } strs[] = {
        {"2Ki", 2048}, {"1.1Ki", 1126.4e+0}, {"1Mi", 1.048576e+06}, {"2Gi", 2.147483648e+09}};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        td_quantity q = must_parse(strs[i].in);
        assert_true(td_quantity_as_double(&q) == strs[i].out);
    }
}

/* Ours: limits of the representation fail cleanly and change nothing. */
static void test_quantity_representation_limits(void **state)
{
    (void)state;
    td_quantity a = must_parse("1e2147483647"), b = must_parse("1"), before = a;
    assert_int_equal(td_quantity_add(&a, &b), TD_EINVAL);
    assert_memory_equal(&a, &before, sizeof a);
    assert_int_equal(td_quantity_sub(&a, &b), TD_EINVAL);
    assert_memory_equal(&a, &before, sizeof a);

    char digits[400];
    memset(digits, '9', sizeof digits - 1);
    digits[sizeof digits - 1] = '\0';
    td_quantity q;
    td_err err;
    assert_int_equal(td_quantity_parse(digits, &q, &err), TD_EINVAL);
    assert_non_null(strstr(err.msg, "is not a valid quantity"));
    /* many digits are fine while their value fits */
    memset(digits, '0', sizeof digits - 1);
    digits[0] = '1';
    q = must_parse(digits);
    char buf[TD_QUANTITY_STR_MAX];
    assert_string_equal(str(&q, buf), "100e396");
    digits[0] = '0';
    digits[1] = '.';
    digits[sizeof digits - 2] = '1';
    q = must_parse(digits);
    assert_string_equal(str(&q, buf), "1n");

    /* format truncates like snprintf and reports the full length */
    q = must_parse("1536Mi");
    char small[4];
    assert_int_equal(td_quantity_format(&q, small, sizeof small), 6);
    assert_string_equal(small, "153");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantity_parse),
        cmocka_unit_test(test_quantity_parse_invalid),
        cmocka_unit_test(test_quantity_parse_messages),
        cmocka_unit_test(test_quantity_parse_emit),
        cmocka_unit_test(test_quantity_parse_emit_negative),
        cmocka_unit_test(test_quantity_string),
        cmocka_unit_test(test_quantity_string_edges),
        cmocka_unit_test(test_quantity_parse_limits),
        cmocka_unit_test(test_quantity_cmp),
        cmocka_unit_test(test_quantity_cmp_int64),
        cmocka_unit_test(test_quantity_neg),
        cmocka_unit_test(test_quantity_round_up),
        cmocka_unit_test(test_quantity_add_sub),
        cmocka_unit_test(test_quantity_zero_preserves_suffix),
        cmocka_unit_test(test_quantity_mul),
        cmocka_unit_test(test_quantity_most_negative),
        cmocka_unit_test(test_quantity_round_trips),
        cmocka_unit_test(test_quantity_value_rounding),
        cmocka_unit_test(test_quantity_new_set),
        cmocka_unit_test(test_quantity_scaled_value),
        cmocka_unit_test(test_quantity_as_double),
        cmocka_unit_test(test_quantity_representation_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
