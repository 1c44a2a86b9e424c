/* quantity.c - Kubernetes resource quantities, exactly as
 * k8s.io/apimachinery/pkg/api/resource parses (ParseQuantity) and prints
 * (Quantity.String / CanonicalizeBytes) them. A value is sign * mag * 10^scale
 * with mag a fixed-width integer; no floating point except as_double. */
#include "core/quantity.h"
#include "core/quantity_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QW TD_QUANTITY_WORDS
/* Scratch width: a stored magnitude times 10^140 still fits, which covers
 * every alignment cmp and format need, and add before its fit check. */
#define XW (2 * QW + 8)
/* Most significant digits a parse may keep before it is sure not to fit. */
#define MAX_KEPT_DIGITS (QW * 10 + 8)
/* Largest exponent a parse accepts, and so the largest one format may print
 * (a multiple of 3) so that its output always parses back. */
#define EXP_MAX       2147483647LL
#define EXP_PRINT_MAX 2147483646LL

static const char regex_msg[] = "quantities must match the regular expression "
                                "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
static const char numeric_msg[] = "unable to parse numeric part of quantity";
static const char suffix_msg[] = "unable to parse quantity's suffix";

/* ---- fixed-width unsigned integers, little-endian 32-bit words ---- */

typedef struct {
    uint32_t w[XW];
} big;

static void big_zero(big *a)
{
    memset(a, 0, sizeof *a);
}

static int big_is_zero(const big *a)
{
    for (size_t i = 0; i < XW; i++)
        if (a->w[i])
            return 0;
    return 1;
}

static int big_cmp(const big *a, const big *b)
{
    for (size_t i = XW; i-- > 0;)
        if (a->w[i] != b->w[i])
            return a->w[i] < b->w[i] ? -1 : 1;
    return 0;
}

static void big_set_u64(big *a, uint64_t v)
{
    big_zero(a);
    a->w[0] = (uint32_t)v;
    a->w[1] = (uint32_t)(v >> 32);
}

/* a = a * m + add; returns the carry out of the top word (non-zero: overflow). */
static uint32_t big_mul_small(big *a, uint32_t m, uint32_t add)
{
    uint64_t carry = add;
    for (size_t i = 0; i < XW; i++) {
        uint64_t x = (uint64_t)a->w[i] * m + carry;
        a->w[i] = (uint32_t)x;
        carry = x >> 32;
    }
    return (uint32_t)carry;
}

/* a /= d; returns the remainder. */
static uint32_t big_div_small(big *a, uint32_t d)
{
    uint64_t rem = 0;
    for (size_t i = XW; i-- > 0;) {
        uint64_t x = (rem << 32) | a->w[i];
        a->w[i] = (uint32_t)(x / d);
        rem = x % d;
    }
    return (uint32_t)rem;
}

static uint32_t big_add(big *a, const big *b)
{
    uint64_t carry = 0;
    for (size_t i = 0; i < XW; i++) {
        uint64_t x = (uint64_t)a->w[i] + b->w[i] + carry;
        a->w[i] = (uint32_t)x;
        carry = x >> 32;
    }
    return (uint32_t)carry;
}

/* a -= b, for a >= b. */
static void big_sub(big *a, const big *b)
{
    uint64_t borrow = 0;
    for (size_t i = 0; i < XW; i++) {
        uint64_t x = (uint64_t)a->w[i] - b->w[i] - borrow;
        a->w[i] = (uint32_t)x;
        borrow = (x >> 32) & 1;
    }
}

/* a *= 10^k; -1 (a garbage) on overflow of the scratch width. */
static int big_mul_pow10(big *a, int64_t k)
{
    if (big_is_zero(a))
        return 0;
    if (k > (int64_t)XW * 10)
        return -1;
    for (; k >= 9; k -= 9)
        if (big_mul_small(a, 1000000000u, 0))
            return -1;
    static const uint32_t p10[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
    if (k > 0 && big_mul_small(a, p10[k], 0))
        return -1;
    return 0;
}

static unsigned big_bits(const big *a)
{
    for (size_t i = XW; i-- > 0;)
        if (a->w[i]) {
            unsigned n = 0;
            for (uint32_t x = a->w[i]; x; x >>= 1)
                n++;
            return (unsigned)(i * 32) + n;
        }
    return 0;
}

/* An upper bound on the decimal digits of a. */
static int64_t big_digits_max(const big *a)
{
    return (int64_t)big_bits(a) * 30103 / 100000 + 1;
}

static int big_fits(const big *a, size_t words)
{
    for (size_t i = words; i < XW; i++)
        if (a->w[i])
            return 0;
    return 1;
}

/* Decimal digits of a into out (room for XW * 10 + 1), NUL-terminated;
 * returns the length. Zero is "0". */
static size_t big_to_dec(const big *a, char *out)
{
    big t = *a;
    char rev[XW * 10 + 1];
    size_t n = 0;
    do {
        uint32_t chunk = big_div_small(&t, 1000000000u);
        int last = big_is_zero(&t);
        for (int i = 0; i < 9; i++) {
            rev[n++] = (char)('0' + chunk % 10);
            chunk /= 10;
            if (last && chunk == 0)
                break;
        }
    } while (!big_is_zero(&t));
    for (size_t i = 0; i < n; i++)
        out[i] = rev[n - 1 - i];
    out[n] = '\0';
    return n;
}

/* ---- values: sign * mag * 10^scale with room to compute ---- */

typedef struct {
    big mag;
    int64_t scale;
    int sign;
} value;

static void load(const td_quantity *q, value *v)
{
    big_zero(&v->mag);
    memcpy(v->mag.w, q->mag, sizeof q->mag);
    v->scale = q->scale;
    v->sign = q->sign;
    if (big_is_zero(&v->mag))
        v->sign = 0;
}

/* Moves factors of ten from mag into scale, up to scale == limit. */
static void strip_tens(big *mag, int64_t *scale, int64_t limit)
{
    if (big_is_zero(mag))
        return;
    if (big_fits(mag, 2)) {
        /* The common case (every value in a Pod or a quota): a 64-bit
         * magnitude, stripped in a register rather than by dividing all
         * XW words per digit. Same result as the loops below. */
        uint64_t m = (uint64_t)mag->w[0] | (uint64_t)mag->w[1] << 32;
        while (*scale < limit && m % 10 == 0) {
            m /= 10;
            *scale += 1;
        }
        big_set_u64(mag, m);
        return;
    }
    while (*scale + 9 <= limit) {
        big t = *mag;
        if (big_div_small(&t, 1000000000u) != 0)
            break;
        *mag = t;
        *scale += 9;
    }
    while (*scale < limit) {
        big t = *mag;
        if (big_div_small(&t, 10) != 0)
            break;
        *mag = t;
        *scale += 1;
    }
}

/* Normalises v into *q (format fmt): trailing zeros of mag go into the
 * scale. TD_EINVAL, q untouched, if it does not fit the representation. */
static td_status store(value *v, int fmt, td_quantity *q)
{
    td_quantity out;
    memset(&out, 0, sizeof out);
    out.format = (uint8_t)fmt;
    out.fits64 = 1;
    if (v->sign == 0 || big_is_zero(&v->mag)) {
        *q = out;
        return TD_OK;
    }
    strip_tens(&v->mag, &v->scale, INT32_MAX);
    if (v->scale > INT32_MAX) {
        if (big_mul_pow10(&v->mag, v->scale - INT32_MAX) != 0)
            return TD_EINVAL;
        v->scale = INT32_MAX;
    }
    if (v->scale < INT32_MIN || !big_fits(&v->mag, QW))
        return TD_EINVAL;
    memcpy(out.mag, v->mag.w, sizeof out.mag);
    out.scale = (int32_t)v->scale;
    out.sign = (int8_t)(v->sign < 0 ? -1 : 1);
    out.fits64 = (uint8_t)big_fits(&v->mag, 2);
    *q = out;
    return TD_OK;
}

/* Compares |a| and |b|. */
static int cmp_abs(const value *a, const value *b)
{
    int za = big_is_zero(&a->mag), zb = big_is_zero(&b->mag);
    if (za || zb)
        return za && zb ? 0 : (za ? -1 : 1);
    if (a->scale == b->scale)
        return big_cmp(&a->mag, &b->mag);
    const value *hi = a->scale > b->scale ? a : b;
    const value *lo = a->scale > b->scale ? b : a;
    int sign = hi == a ? 1 : -1;
    int64_t d = hi->scale - lo->scale;
    /* hi >= 10^d; if lo has fewer digits than that, hi is larger. */
    if (d >= big_digits_max(&lo->mag))
        return sign;
    big t = hi->mag;
    if (big_mul_pow10(&t, d) != 0)
        return sign;
    return big_cmp(&t, &lo->mag) * sign;
}

static int cmp_value(const value *a, const value *b)
{
    if (a->sign != b->sign)
        return a->sign < b->sign ? -1 : 1;
    return cmp_abs(a, b) * a->sign;
}

/* *a += b (signed). TD_EINVAL if the aligned operands overflow the scratch. */
static td_status add_value(value *a, const value *b)
{
    if (b->sign == 0)
        return TD_OK;
    if (a->sign == 0) {
        *a = *b;
        return TD_OK;
    }
    value x = *a, y = *b;
    int64_t s = x.scale < y.scale ? x.scale : y.scale;
    if (big_mul_pow10(&x.mag, x.scale - s) != 0 || big_mul_pow10(&y.mag, y.scale - s) != 0)
        return TD_EINVAL;
    x.scale = y.scale = s;
    if (x.sign == y.sign) {
        if (big_add(&x.mag, &y.mag))
            return TD_EINVAL;
    } else {
        int c = big_cmp(&x.mag, &y.mag);
        if (c == 0) {
            big_zero(&x.mag);
            x.sign = 0;
            x.scale = 0;
        } else if (c > 0) {
            big_sub(&x.mag, &y.mag);
        } else {
            big_sub(&y.mag, &x.mag);
            x.mag = y.mag;
            x.sign = y.sign;
        }
    }
    *a = x;
    return TD_OK;
}

/* Rounds |v| up (away from zero) to a multiple of 10^scale; *exact says
 * whether nothing was lost. */
static void round_up_value(value *v, int64_t scale, int *exact)
{
    *exact = 1;
    if (v->sign == 0 || v->scale >= scale)
        return;
    int64_t drop = scale - v->scale;
    int sticky = 0;
    if (drop >= big_digits_max(&v->mag)) {
        sticky = 1; /* 0 < |v| < 10^scale */
        big_zero(&v->mag);
    } else {
        for (; drop >= 9; drop -= 9)
            sticky |= big_div_small(&v->mag, 1000000000u) != 0;
        for (; drop > 0; drop--)
            sticky |= big_div_small(&v->mag, 10) != 0;
    }
    if (sticky) {
        big one;
        big_set_u64(&one, 1);
        big_add(&v->mag, &one);
        *exact = 0;
    }
    v->scale = scale;
}

/* ---- fast paths: magnitudes that fit 64 bits ----
 *
 * Nearly every real quantity ("500m", "2Gi", "8", "1.5") has a magnitude
 * below 2^64 once its trailing zeros are in the scale (td_quantity.fits64).
 * For those, parse, compare, add, scale and print with 64- and 128-bit
 * integers instead of the XW-word scratch. Each fast path either produces
 * exactly what the general path would (every field, fits64 included) or
 * declines and leaves its output untouched; test_quantity_fast and
 * fuzz_quantity_fast check the two against each other
 * (core/quantity_internal.h exposes the general paths to them). */

/* GCC and clang on every 64-bit target Debian builds tenantd for. */
__extension__ typedef unsigned __int128 u128;

static const uint64_t pow10_u64[20] = {1ull,
                                       10ull,
                                       100ull,
                                       1000ull,
                                       10000ull,
                                       100000ull,
                                       1000000ull,
                                       10000000ull,
                                       100000000ull,
                                       1000000000ull,
                                       10000000000ull,
                                       100000000000ull,
                                       1000000000000ull,
                                       10000000000000ull,
                                       100000000000000ull,
                                       1000000000000000ull,
                                       10000000000000000ull,
                                       100000000000000000ull,
                                       1000000000000000000ull,
                                       10000000000000000000ull};

static uint64_t mag_u64(const td_quantity *q)
{
    return (uint64_t)q->mag[0] | (uint64_t)q->mag[1] << 32;
}

/* *q = sign * m * 10^scale in format fmt, normalised as store() does:
 * trailing zeros move into the scale (up to INT32_MAX). The caller
 * guarantees scale fits an int32 once stripped. */
static void set_u64(td_quantity *q, uint64_t m, int64_t scale, int sign, int fmt)
{
    memset(q, 0, sizeof *q);
    q->format = (uint8_t)fmt;
    q->fits64 = 1;
    if (m == 0 || sign == 0)
        return;
    while (scale < INT32_MAX && m % 10 == 0) {
        m /= 10;
        scale++;
    }
    q->mag[0] = (uint32_t)m;
    q->mag[1] = (uint32_t)(m >> 32);
    q->scale = (int32_t)scale;
    q->sign = (int8_t)(sign < 0 ? -1 : 1);
}

/* Rounds m * 10^*scale up (away from zero) to a multiple of 10^-9, as
 * parse's inf.RoundUp does; m > 0. */
static uint64_t round_to_nano(uint64_t m, int64_t *scale)
{
    if (*scale >= -9)
        return m;
    int64_t drop = -9 - *scale;
    *scale = -9;
    if (drop >= 20)
        return 1; /* 0 < m < 10^20 <= 10^drop */
    uint64_t p = pow10_u64[drop];
    return m / p + (m % p != 0);
}

/* The common spellings of td_quantity_parse: [+-]digits[.digits] with at
 * most 19 significant digits, then no suffix, an SI or binary suffix, or
 * e/E[+-] and at most 9 exponent digits. Returns 1 with *q set, or 0
 * (q untouched) for anything else, which the general path then parses or
 * rejects with its own message. */
static int parse_fast(const char *s, td_quantity *q)
{
    const char *p = s;
    int sign = 1;
    if (*p == '-') {
        sign = -1;
        p++;
    } else if (*p == '+') {
        p++;
    }
    uint64_t m = 0;
    int sig = 0, any = 0;
    int64_t dl = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        any = 1;
        if (sig || *p != '0') {
            if (++sig > 19)
                return 0;
            m = m * 10 + (uint64_t)(*p - '0');
        }
    }
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++) {
            any = 1;
            dl++;
            if (sig || *p != '0') {
                if (++sig > 19)
                    return 0;
                m = m * 10 + (uint64_t)(*p - '0');
            }
        }
    }
    if (!any)
        return 0;

    int fmt = TD_QFMT_DECIMAL_SI, shift = 0;
    int64_t exponent = 0;
    switch (*p) {
    case '\0':
        break;
    case 'n':
        exponent = -9;
        p++;
        break;
    case 'u':
        exponent = -6;
        p++;
        break;
    case 'm':
        exponent = -3;
        p++;
        break;
    case 'k':
        exponent = 3;
        p++;
        break;
    case 'K':
    case 'M':
    case 'G':
    case 'T':
    case 'P':
    case 'E': {
        static const char order[] = "KMGTPE";
        int i = (int)(strchr(order, *p) - order) + 1;
        if (p[1] == 'i') {
            fmt = TD_QFMT_BINARY_SI;
            shift = 10 * i;
            p += 2;
            break;
        }
        if (*p == 'K')
            return 0;
        if (*p == 'E' && p[1] != '\0')
            goto exponent_form;
        exponent = 3 * i;
        p++;
        break;
    }
    case 'e':
    exponent_form : {
        int neg = 0, nd = 0;
        p++;
        if (*p == '+' || *p == '-')
            neg = *p++ == '-';
        for (; *p >= '0' && *p <= '9'; p++) {
            if (++nd > 9)
                return 0;
            exponent = exponent * 10 + (*p - '0');
        }
        if (nd == 0)
            return 0;
        if (neg)
            exponent = -exponent;
        fmt = TD_QFMT_DECIMAL_EXPONENT;
        break;
    }
    default:
        return 0;
    }
    if (*p != '\0')
        return 0;

    if (m == 0) {
        set_u64(q, 0, 0, 0, fmt);
        return 1;
    }
    int64_t scale = exponent - dl;
    if (fmt == TD_QFMT_BINARY_SI) {
        /* m * 2^shift below 2^63: exact in 64 bits, and never over the
         * INT64_MAX cap general parse applies to binary values. */
        if (shift > 0 && m >> (63 - shift) != 0)
            return 0;
        m <<= shift;
        m = round_to_nano(m, &scale);
        /* Under 1 after rounding, a binary value prints as DecimalSI. */
        if (scale < 0 && m < pow10_u64[-scale])
            fmt = TD_QFMT_DECIMAL_SI;
    } else {
        m = round_to_nano(m, &scale);
    }
    set_u64(q, m, scale, sign, fmt);
    return 1;
}

/* |a| vs |b| for magnitudes ma, mb > 0 at scales sa, sb. */
static int cmp_abs_u64(uint64_t ma, int64_t sa, uint64_t mb, int64_t sb)
{
    if (sa == sb)
        return ma == mb ? 0 : (ma < mb ? -1 : 1);
    int sign = sa > sb ? 1 : -1;
    uint64_t hi = sa > sb ? ma : mb, lo = sa > sb ? mb : ma;
    int64_t d = sa > sb ? sa - sb : sb - sa;
    if (d >= 20)
        return sign; /* hi * 10^d >= 10^20 > lo */
    u128 t = (u128)hi * pow10_u64[d];
    if (t == lo)
        return 0;
    return t > lo ? sign : -sign;
}

static int cmp_fast(const td_quantity *a, const td_quantity *b)
{
    uint64_t ma = mag_u64(a), mb = mag_u64(b);
    int sa = ma ? a->sign : 0, sb = mb ? b->sign : 0;
    if (sa != sb)
        return sa < sb ? -1 : 1;
    if (sa == 0)
        return 0;
    return cmp_abs_u64(ma, a->scale, mb, b->scale) * sa;
}

/* *a (+/-)= b when both fit 64 bits and the aligned result fits 64 bits
 * too. Returns 0 (a untouched) when it does not, for the general path. */
static int add_sub_fast(td_quantity *a, const td_quantity *b, int negate)
{
    uint64_t ma = mag_u64(a), mb = mag_u64(b);
    int sa = ma ? a->sign : 0, sb = mb ? b->sign : 0;
    if (negate)
        sb = -sb;
    int fmt = sa == 0 ? b->format : a->format;
    if (sb == 0) {
        if (sa == 0)
            set_u64(a, 0, 0, 0, fmt);
        return 1;
    }
    if (sa == 0) {
        set_u64(a, mb, b->scale, sb, fmt);
        return 1;
    }
    int64_t xs = a->scale, ys = b->scale;
    int64_t s = xs < ys ? xs : ys;
    if (xs - s >= 20 || ys - s >= 20)
        return 0;
    u128 x = (u128)ma * pow10_u64[xs - s], y = (u128)mb * pow10_u64[ys - s];
    u128 r;
    int sign;
    if (sa == sb) {
        r = x + y; /* both below 2^64 * 10^19 < 2^127 */
        sign = sa;
    } else if (x >= y) {
        r = x - y;
        sign = sa;
    } else {
        r = y - x;
        sign = sb;
    }
    if (r == 0) {
        set_u64(a, 0, 0, 0, fmt);
        return 1;
    }
    /* Strip tens while the sum is wider than 64 bits, so that e.g.
     * 1e19 + 1e19 still takes this path. */
    while ((r >> 64) != 0 && s < INT32_MAX && r % 10 == 0) {
        r /= 10;
        s++;
    }
    if ((r >> 64) != 0)
        return 0;
    set_u64(a, (uint64_t)r, s, sign, fmt);
    return 1;
}

/* ScaledValue for a 64-bit magnitude: the same rounding (away from zero)
 * and saturation as the general path. */
static int64_t scaled_value_fast(const td_quantity *q, int32_t scale)
{
    uint64_t m = mag_u64(q);
    if (m == 0 || q->sign == 0)
        return 0;
    int neg = q->sign < 0;
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    int64_t d = (int64_t)q->scale - scale;
    uint64_t r;
    if (d < 0) {
        r = -d >= 20 ? 1 : m / pow10_u64[-d] + (m % pow10_u64[-d] != 0);
    } else {
        if (d >= 20)
            return neg ? INT64_MIN : INT64_MAX;
        u128 t = (u128)m * pow10_u64[d];
        if (t > limit)
            return neg ? INT64_MIN : INT64_MAX;
        r = (uint64_t)t;
    }
    return neg ? (int64_t)(0 - r) : (int64_t)r;
}

/* ---- parsing ---- */

/* Writes s into out as a quoted, escaped and possibly shortened string. */
static void quote(const char *s, char *out, size_t n)
{
    size_t o = 0;
    out[o++] = '"';
    for (size_t i = 0; s[i] && o + 8 < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i >= 64) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            o += (size_t)snprintf(out + o, n - o, "\\x%02x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o++] = '"';
    out[o] = '\0';
}

static td_status parse_error(td_err *err, const char *s, const char *why)
{
    char q[300];
    quote(s, q, sizeof q);
    return td_err_set(err, TD_EINVAL, "%s is not a valid quantity: %s", q, why);
}

/* Kubernetes' suffixer.interpret: base 10 or 2, exponent, format. */
static int interpret_suffix(const char *s, size_t n, int *base, int64_t *exponent, int *fmt)
{
    static const struct {
        const char *name;
        int base;
        int exponent;
    } table[] = {
        {"", 10, 0},   {"n", 10, -9}, {"u", 10, -6}, {"m", 10, -3}, {"k", 10, 3},  {"M", 10, 6},
        {"G", 10, 9},  {"T", 10, 12}, {"P", 10, 15}, {"E", 10, 18}, {"Ki", 2, 10}, {"Mi", 2, 20},
        {"Gi", 2, 30}, {"Ti", 2, 40}, {"Pi", 2, 50}, {"Ei", 2, 60},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strlen(table[i].name) == n && memcmp(table[i].name, s, n) == 0) {
            *base = table[i].base;
            *exponent = table[i].exponent;
            *fmt = table[i].base == 2 ? TD_QFMT_BINARY_SI : TD_QFMT_DECIMAL_SI;
            return 1;
        }
    }
    if (n < 2 || (s[0] != 'e' && s[0] != 'E'))
        return 0;
    /* strconv.ParseInt(s[1:], 10, 64), then bounded to +-MaxInt32 so the
     * scale and its negation fit an int32. */
    size_t i = 1;
    int neg = 0;
    if (s[i] == '+' || s[i] == '-')
        neg = s[i++] == '-';
    if (i == n)
        return 0;
    int64_t e = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        e = e * 10 + (s[i] - '0');
        if (e > EXP_MAX)
            return 0;
    }
    *base = 10;
    *exponent = neg ? -e : e;
    *fmt = TD_QFMT_DECIMAL_EXPONENT;
    return 1;
}

/* The digits of num followed by denom, as one string of n digits. */
typedef struct {
    const char *num, *denom;
    size_t nl, dl;
} digits;

static int digit_at(const digits *g, size_t i)
{
    return (i < g->nl ? g->num[i] : g->denom[i - g->nl]) - '0';
}

td_status td__quantity_parse_general(const char *s, td_quantity *q, td_err *err)
{
    if (s == NULL || s[0] == '\0')
        return parse_error(err, s ? s : "", regex_msg);

    /* parseQuantityString: sign, number, suffix. */
    size_t end = strlen(s), pos = 0;
    int positive = 1;
    if (s[0] == '-') {
        positive = 0;
        pos++;
    } else if (s[0] == '+') {
        pos++;
    }
    size_t num_start = pos;
    while (pos < end && s[pos] == '0')
        pos++;
    digits g = {"", "", 0, 0};
    size_t suf_start = end, suf_len = 0;
    int has_digit = pos > num_start;
    if (pos < end) {
        size_t i = pos;
        while (i < end && s[i] >= '0' && s[i] <= '9')
            i++;
        g.num = s + pos;
        g.nl = i - pos;
        has_digit |= g.nl > 0;
        pos = i;
        if (pos < end && s[pos] == '.') {
            pos++;
            i = pos;
            while (i < end && s[i] >= '0' && s[i] <= '9')
                i++;
            g.denom = s + pos;
            g.dl = i - pos;
            has_digit |= g.dl > 0;
            pos = i;
        }
        suf_start = pos;
        while (pos < end && strchr("eEinumkKMGTP", s[pos]))
            pos++;
        if (pos < end && (s[pos] == '-' || s[pos] == '+'))
            pos++;
        while (pos < end && s[pos] >= '0' && s[pos] <= '9')
            pos++;
        if (pos < end)
            return parse_error(err, s, regex_msg);
        suf_len = end - suf_start;
    }

    int base, fmt;
    int64_t exponent;
    if (!interpret_suffix(s + suf_start, suf_len, &base, &exponent, &fmt))
        return parse_error(err, s, suffix_msg);

    /* Kubernetes takes its inf.Dec path, which needs at least one digit,
     * exactly when the int64 fast path does not apply; with no digits that
     * is a decimal scale below nano or a binary suffix from Pi up. */
    if (!has_digit && ((base == 10 && exponent < -9) || (base == 2 && exponent >= 50)))
        return parse_error(err, s, numeric_msg);

    /* The value is G * 2^p * 10^e10 with G the digits of num and denom. */
    size_t first = 0, n = g.nl + g.dl;
    while (first < n && digit_at(&g, first) == 0)
        first++;
    value v;
    big_zero(&v.mag);
    v.scale = 0;
    v.sign = 0;
    if (first < n) {
        size_t last = n;
        while (digit_at(&g, last - 1) == 0)
            last--;
        unsigned p2 = base == 2 ? (unsigned)exponent : 0;
        int64_t e10 = (base == 10 ? exponent : 0) - (int64_t)g.dl + (int64_t)(n - last);
        /* Rounding up to nano (inf.RoundUp, away from zero) drops the
         * lowest `drop` digits of Y = G * 2^p and adds one if any was set. */
        int64_t drop = e10 < -9 ? -9 - e10 : 0;
        char kept[MAX_KEPT_DIGITS];
        int64_t nkept = 0, k = 0;
        int sticky = 0;
        uint64_t carry = 0;
        size_t i = last;
        while (i > first || carry) {
            uint64_t x = carry;
            if (i > first)
                x += (uint64_t)digit_at(&g, --i) << p2;
            int d = (int)(x % 10);
            carry = x / 10;
            if (k++ < drop) {
                sticky |= d != 0;
            } else if (nkept < MAX_KEPT_DIGITS) {
                kept[nkept++] = (char)d;
            } else {
                return parse_error(err, s, "too many significant digits to hold exactly");
            }
        }
        for (int64_t j = nkept; j-- > 0;)
            big_mul_small(&v.mag, 10, (uint32_t)kept[j]);
        if (sticky) {
            big one;
            big_set_u64(&one, 1);
            big_add(&v.mag, &one);
        }
        v.scale = e10 + drop;
        v.sign = positive ? 1 : -1;
    }

    if (fmt == TD_QFMT_BINARY_SI && v.sign != 0) {
        /* The cap is just a simple cap, applied to the magnitude. */
        value max = {.scale = 0, .sign = 1};
        big_set_u64(&max.mag, (uint64_t)INT64_MAX);
        value one = {.scale = 0, .sign = 1};
        big_set_u64(&one.mag, 1);
        if (cmp_abs(&v, &max) > 0) {
            v.mag = max.mag;
            v.scale = 0;
        }
        if (cmp_abs(&v, &one) < 0)
            fmt = TD_QFMT_DECIMAL_SI;
    }
    td_quantity out;
    if (store(&v, fmt, &out) != TD_OK)
        return parse_error(err, s, "too large to hold exactly");
    *q = out;
    return TD_OK;
}

td_status td_quantity_parse(const char *s, td_quantity *q, td_err *err)
{
    if (s != NULL && parse_fast(s, q))
        return TD_OK;
    return td__quantity_parse_general(s, q, err);
}

/* ---- printing ---- */

typedef struct {
    char *buf;
    size_t n, len;
} sink;

static void put(sink *o, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++, o->len++)
        if (o->len + 1 < o->n)
            o->buf[o->len] = s[i];
}

static void put_zeros(sink *o, int64_t count)
{
    for (int64_t i = 0; i < count; i++)
        put(o, "0", 1);
}

/* AsCanonicalBytes plus its suffix for the value d * 10^exp (d: len decimal
 * digits): mantissa with the exponent lowered to a multiple of 3, then an
 * SI suffix or "e<exp>". */
static void put_digits(sink *o, const char *d, size_t len, int64_t exp, int fmt)
{
    while (len > 1 && d[len - 1] == '0') {
        len--;
        exp++;
    }
    int64_t adjust = ((exp % 3) + 3) % 3;
    exp -= adjust;
    /* Kubernetes wraps its int32 exponent here; keep the output parseable. */
    if (exp > EXP_PRINT_MAX) {
        adjust += exp - EXP_PRINT_MAX;
        exp = EXP_PRINT_MAX;
    }
    put(o, d, len);
    put_zeros(o, adjust);
    static const char *si[] = {"n", "u", "m", "", "k", "M", "G", "T", "P", "E"};
    if (fmt == TD_QFMT_DECIMAL_SI && exp >= -9 && exp <= 18) {
        const char *suf = si[(exp + 9) / 3];
        put(o, suf, strlen(suf));
    } else if (exp != 0) {
        char e[24];
        int m = snprintf(e, sizeof e, "e%lld", (long long)exp);
        put(o, e, (size_t)m);
    }
}

static void put_decimal(sink *o, const value *v, int fmt)
{
    char d[XW * 10 + 1];
    size_t len = big_to_dec(&v->mag, d);
    put_digits(o, d, len, v->scale, fmt);
}

/* Decimal digits of m into out (room for 21), NUL-terminated; returns the
 * length. Zero is "0". */
static size_t u64_to_dec(uint64_t m, char *out)
{
    char rev[20];
    size_t n = 0;
    do {
        rev[n++] = (char)('0' + m % 10);
        m /= 10;
    } while (m != 0);
    for (size_t i = 0; i < n; i++)
        out[i] = rev[n - 1 - i];
    out[n] = '\0';
    return n;
}

/* td_quantity_format for a 64-bit magnitude. Returns 0 (nothing written)
 * for a BinarySI integer too large for 64 bits, left to the general path. */
static int format_fast(const td_quantity *q, sink *o)
{
    uint64_t m = mag_u64(q);
    if (m == 0 || q->sign == 0) {
        put(o, "0", 1);
        return 1;
    }
    int fmt = q->format;
    if (fmt != TD_QFMT_DECIMAL_SI && fmt != TD_QFMT_BINARY_SI)
        fmt = TD_QFMT_DECIMAL_EXPONENT;
    int64_t scale = q->scale;
    if (fmt == TD_QFMT_BINARY_SI) {
        /* The integer value, if q is one; else it prints as DecimalSI. */
        uint64_t r = 0;
        int exact;
        if (scale < 0) {
            exact = -scale < 20 && m % pow10_u64[-scale] == 0;
            if (exact)
                r = m / pow10_u64[-scale];
        } else {
            if (scale >= 20)
                return 0;
            u128 t = (u128)m * pow10_u64[scale];
            if ((t >> 64) != 0)
                return 0;
            r = (uint64_t)t;
            exact = 1;
        }
        if (exact && r >= 1024) {
            /* r < 2^64 holds at most 6 factors of 1024: always a suffix. */
            static const char *bin[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
            int count = 0;
            while ((r & 1023) == 0) {
                r >>= 10;
                count++;
            }
            char d[24];
            size_t len = u64_to_dec(r, d);
            if (q->sign < 0)
                put(o, "-", 1);
            put(o, d, len);
            put(o, bin[count], strlen(bin[count]));
            return 1;
        }
        fmt = TD_QFMT_DECIMAL_SI;
    }
    if (q->sign < 0)
        put(o, "-", 1);
    char d[24];
    size_t len = u64_to_dec(m, d);
    put_digits(o, d, len, scale, fmt);
    return 1;
}

size_t td_quantity_format(const td_quantity *q, char *buf, size_t n)
{
    sink o = {buf, n, 0};
    if (!q->fits64 || !format_fast(q, &o))
        return td__quantity_format_general(q, buf, n);
    if (n > 0)
        buf[o.len < n ? o.len : n - 1] = '\0';
    return o.len;
}

size_t td__quantity_format_general(const td_quantity *q, char *buf, size_t n)
{
    sink o = {buf, n, 0};
    value v;
    load(q, &v);
    if (v.sign == 0) {
        put(&o, "0", 1);
    } else {
        int fmt = q->format;
        if (fmt != TD_QFMT_DECIMAL_SI && fmt != TD_QFMT_BINARY_SI)
            fmt = TD_QFMT_DECIMAL_EXPONENT;
        if (v.sign < 0)
            put(&o, "-", 1);
        if (fmt == TD_QFMT_BINARY_SI) {
            value k1024 = {.scale = 0, .sign = 1};
            big_set_u64(&k1024.mag, 1024);
            value r = v;
            int exact;
            round_up_value(&r, 0, &exact);
            if (cmp_abs(&v, &k1024) < 0 || !exact)
                fmt = TD_QFMT_DECIMAL_SI;
            /* 10^70 and up has more than 6 factors of 1024: past Ei. */
            else if (r.scale >= 70)
                fmt = -1;
            else {
                big_mul_pow10(&r.mag, r.scale); /* < 2^384 * 10^69 fits XW */
                int count = 0;
                while (count <= 6 && (r.mag.w[0] & 1023) == 0) {
                    big_div_small(&r.mag, 1024);
                    count++;
                }
                if (count > 6) {
                    fmt = -1;
                } else {
                    static const char *bin[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
                    char d[XW * 10 + 1];
                    size_t len = big_to_dec(&r.mag, d);
                    put(&o, d, len);
                    put(&o, bin[count], strlen(bin[count]));
                }
            }
            /* Past Ei there is no binary suffix: print the exact value in
             * decimal exponent notation rather than drop the magnitude. */
            if (fmt == -1)
                put_decimal(&o, &v, TD_QFMT_DECIMAL_EXPONENT);
        }
        if (fmt != TD_QFMT_BINARY_SI && fmt != -1)
            put_decimal(&o, &v, fmt);
    }
    if (n > 0)
        buf[o.len < n ? o.len : n - 1] = '\0';
    return o.len;
}

/* ---- arithmetic and accessors ---- */

int td__quantity_cmp_general(const td_quantity *a, const td_quantity *b)
{
    value x, y;
    load(a, &x);
    load(b, &y);
    return cmp_value(&x, &y);
}

int td_quantity_cmp(const td_quantity *a, const td_quantity *b)
{
    if (a->fits64 && b->fits64)
        return cmp_fast(a, b);
    return td__quantity_cmp_general(a, b);
}

int td_quantity_sign(const td_quantity *q)
{
    if (q->fits64)
        return (q->mag[0] | q->mag[1]) ? q->sign : 0;
    value v;
    load(q, &v);
    return v.sign;
}

td_status td__quantity_add_sub_general(td_quantity *a, const td_quantity *b, int negate)
{
    value x, y;
    load(a, &x);
    load(b, &y);
    if (negate)
        y.sign = -y.sign;
    int fmt = x.sign == 0 ? b->format : a->format;
    if (add_value(&x, &y) != TD_OK)
        return TD_EINVAL;
    return store(&x, fmt, a);
}

td_status td_quantity_add(td_quantity *a, const td_quantity *b)
{
    if (a->fits64 && b->fits64 && add_sub_fast(a, b, 0))
        return TD_OK;
    return td__quantity_add_sub_general(a, b, 0);
}

td_status td_quantity_sub(td_quantity *a, const td_quantity *b)
{
    if (a->fits64 && b->fits64 && add_sub_fast(a, b, 1))
        return TD_OK;
    return td__quantity_add_sub_general(a, b, 1);
}

void td_quantity_from_int(td_quantity *q, int64_t v, int32_t scale, td_qformat format)
{
    set_u64(q, v < 0 ? 0 - (uint64_t)v : (uint64_t)v, scale, v < 0 ? -1 : (v > 0 ? 1 : 0),
            (int)format);
}

void td_quantity_zero(td_quantity *q, td_qformat format)
{
    td_quantity_from_int(q, 0, 0, format);
}

int64_t td__quantity_scaled_value_general(const td_quantity *q, int32_t scale)
{
    value v;
    load(q, &v);
    if (v.sign == 0)
        return 0;
    int exact;
    round_up_value(&v, scale, &exact);
    /* Now |q| / 10^scale is mag * 10^(v.scale - scale), an integer. */
    int64_t up = v.scale - scale;
    big limit;
    big_set_u64(&limit, v.sign < 0 ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX);
    if (up > 19 || big_mul_pow10(&v.mag, up) != 0 || big_cmp(&v.mag, &limit) > 0)
        return v.sign < 0 ? INT64_MIN : INT64_MAX;
    uint64_t m = (uint64_t)v.mag.w[0] | (uint64_t)v.mag.w[1] << 32;
    return v.sign < 0 ? (int64_t)(0 - m) : (int64_t)m;
}

int64_t td_quantity_scaled_value(const td_quantity *q, int32_t scale)
{
    if (q->fits64)
        return scaled_value_fast(q, scale);
    return td__quantity_scaled_value_general(q, scale);
}

int64_t td_quantity_value(const td_quantity *q)
{
    return td_quantity_scaled_value(q, 0);
}

int64_t td_quantity_milli_value(const td_quantity *q)
{
    return td_quantity_scaled_value(q, -3);
}

double td_quantity_as_double(const td_quantity *q)
{
    value v;
    load(q, &v);
    if (v.sign == 0)
        return 0.0;
    char s[XW * 10 + 32];
    size_t len = 0;
    if (v.sign < 0)
        s[len++] = '-';
    len += big_to_dec(&v.mag, s + len);
    snprintf(s + len, sizeof s - len, "e%lld", (long long)v.scale);
    return strtod(s, NULL); /* correctly rounded; +-HUGE_VAL past the range */
}

td_qformat td_quantity_get_format(const td_quantity *q)
{
    return (td_qformat)q->format;
}

void td_quantity_neg(td_quantity *q)
{
    q->sign = (int8_t)-q->sign;
}

td_status td_quantity_mul(td_quantity *q, int64_t factor)
{
    value v;
    load(q, &v);
    uint64_t m = factor < 0 ? 0 - (uint64_t)factor : (uint64_t)factor;
    if (m == 0 || v.sign == 0) {
        td_quantity_zero(q, (td_qformat)q->format);
        return TD_OK;
    }
    /* mag * m = mag * lo32 + (mag * hi32) << 32 */
    big lo = v.mag, hi = v.mag;
    if (big_mul_small(&lo, (uint32_t)m, 0) || big_mul_small(&hi, (uint32_t)(m >> 32), 0) ||
        hi.w[XW - 1])
        return TD_EINVAL;
    memmove(hi.w + 1, hi.w, (XW - 1) * sizeof hi.w[0]);
    hi.w[0] = 0;
    if (big_add(&lo, &hi))
        return TD_EINVAL;
    v.mag = lo;
    if (factor < 0)
        v.sign = -v.sign;
    return store(&v, q->format, q);
}

bool td_quantity_round_up(td_quantity *q, int32_t scale)
{
    value v;
    load(q, &v);
    int exact;
    round_up_value(&v, scale, &exact);
    (void)store(&v, q->format, q); /* rounding up to a coarser scale never grows past it */
    return exact != 0;
}
