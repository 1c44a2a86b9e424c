/* quantity_diff.h - differential check of quantity.c's 64-bit fast paths
 * against its general paths (core/quantity_internal.h): every public call
 * must give what the general one gives, field by field, status and error
 * text included. Shared by fuzz_quantity_fast.c and test_quantity.c;
 * aborts with the inputs printed on the first difference. */
#ifndef TENANTD_QUANTITY_DIFF_H
#define TENANTD_QUANTITY_DIFF_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/quantity_internal.h"
#include "core/quantity.h"

#define QD_POOL 12

static void qd_print(const char *what, const td_quantity *q)
{
    char s[TD_QUANTITY_STR_MAX];
    td__quantity_format_general(q, s, sizeof s);
    fprintf(stderr, "  %s = %s (scale %d sign %d format %d fits64 %d)\n", what, s, (int)q->scale,
            (int)q->sign, (int)q->format, (int)q->fits64);
}

/* Every field a caller can observe, plus fits64, which must say exactly
 * whether mag[2..] are zero. */
static int qd_same(const td_quantity *a, const td_quantity *b)
{
    return memcmp(a->mag, b->mag, sizeof a->mag) == 0 && a->scale == b->scale &&
           a->sign == b->sign && a->format == b->format && a->fits64 == b->fits64;
}

/* format both ways, into a buffer of every size that matters: enough,
 * a few bytes (truncated), one (just the NUL) and none. */
static void qd_check_format(const char *ctx, const td_quantity *q)
{
    static const size_t sizes[] = {TD_QUANTITY_STR_MAX, 4, 1, 0};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char f[TD_QUANTITY_STR_MAX], g[TD_QUANTITY_STR_MAX];
        memset(f, 'x', sizeof f);
        memset(g, 'x', sizeof g);
        size_t nf = td_quantity_format(q, sizes[i] ? f : NULL, sizes[i]);
        size_t ng = td__quantity_format_general(q, sizes[i] ? g : NULL, sizes[i]);
        if (nf != ng || (sizes[i] && memcmp(f, g, sizeof f) != 0)) {
            fprintf(stderr, "%s: format into %zu bytes: fast %zu \"%.*s\", general %zu \"%.*s\"\n",
                    ctx, sizes[i], nf, (int)sizes[i], f, ng, (int)sizes[i], g);
            abort();
        }
    }
}

static void qd_check_flag(const char *ctx, const td_quantity *q)
{
    qd_check_format(ctx, q);
    int fits = 1;
    for (int i = 2; i < TD_QUANTITY_WORDS; i++)
        fits &= q->mag[i] == 0;
    if (q->fits64 != fits) {
        fprintf(stderr, "%s: fits64 %d but the magnitude %s 64 bits\n", ctx, (int)q->fits64,
                fits ? "fits" : "does not fit");
        qd_print("q", q);
        abort();
    }
}

/* Parses s both ways; on TD_OK stores the result in *out and returns 1. */
static int qd_parse(const char *s, td_quantity *out)
{
    td_quantity f, g;
    td_err ef, eg;
    memset(&f, 0xa5, sizeof f);
    memset(&g, 0xa5, sizeof g);
    ef.msg[0] = eg.msg[0] = '\0';
    td_status sf = td_quantity_parse(s, &f, &ef);
    td_status sg = td__quantity_parse_general(s, &g, &eg);
    if (sf != sg || (sf == TD_OK && !qd_same(&f, &g)) ||
        (sf != TD_OK && strcmp(ef.msg, eg.msg) != 0)) {
        fprintf(stderr, "parse \"%s\": fast %d \"%s\", general %d \"%s\"\n", s, (int)sf, ef.msg,
                (int)sg, eg.msg);
        if (sf == TD_OK)
            qd_print("fast", &f);
        if (sg == TD_OK)
            qd_print("general", &g);
        abort();
    }
    if (sf != TD_OK)
        return 0;
    qd_check_flag(s, &f);
    *out = f;
    return 1;
}

static void qd_fail2(const char *op, const td_quantity *a, const td_quantity *b)
{
    fprintf(stderr, "%s differs between the fast and the general path\n", op);
    qd_print("a", a);
    qd_print("b", b);
    abort();
}

/* Scales worth asking scaled_value for: around every stored scale, and the
 * int32 ends. */
static int32_t qd_scale(uint8_t b)
{
    if (b == 255)
        return INT32_MAX;
    if (b == 254)
        return INT32_MIN;
    return (int32_t)(b % 64) - 32;
}

/* One operation on the pool, chosen by the bytes at op[0..3]: compare, add,
 * subtract (results stay in the pool, so sequences build up), scaled
 * values, sign, negate, multiply and from_int to seed new values. */
static void qd_op(td_quantity *pool, const uint8_t *op)
{
    td_quantity *a = &pool[op[1] % QD_POOL];
    const td_quantity *b = &pool[op[2] % QD_POOL];
    switch (op[0] % 8) {
    case 0: {
        if (td_quantity_cmp(a, b) != td__quantity_cmp_general(a, b) ||
            td_quantity_cmp(b, a) != td__quantity_cmp_general(b, a))
            qd_fail2("cmp", a, b);
        break;
    }
    case 1:
    case 2: {
        int negate = op[0] % 8 == 2;
        td_quantity f = *a, g = *a;
        td_status sf = negate ? td_quantity_sub(&f, b) : td_quantity_add(&f, b);
        td_status sg = td__quantity_add_sub_general(&g, b, negate);
        if (sf != sg || !qd_same(&f, &g)) {
            fprintf(stderr, "status fast %d general %d\n", (int)sf, (int)sg);
            qd_print("fast", &f);
            qd_print("general", &g);
            qd_fail2(negate ? "sub" : "add", a, b);
        }
        qd_check_flag(negate ? "sub" : "add", &f);
        if (sf == TD_OK)
            *a = f;
        break;
    }
    case 3: {
        int32_t s = qd_scale(op[3]);
        if (td_quantity_scaled_value(a, s) != td__quantity_scaled_value_general(a, s)) {
            fprintf(stderr, "scale %d: fast %lld general %lld\n", (int)s,
                    (long long)td_quantity_scaled_value(a, s),
                    (long long)td__quantity_scaled_value_general(a, s));
            qd_fail2("scaled_value", a, a);
        }
        if (td_quantity_value(a) != td__quantity_scaled_value_general(a, 0) ||
            td_quantity_milli_value(a) != td__quantity_scaled_value_general(a, -3))
            qd_fail2("value/milli_value", a, a);
        break;
    }
    case 4: {
        td_quantity zero;
        memset(&zero, 0, sizeof zero); /* fits64 0: the general path */
        if (td_quantity_sign(a) != td__quantity_cmp_general(a, &zero))
            qd_fail2("sign", a, a);
        break;
    }
    case 5:
        td_quantity_neg(a);
        break;
    case 6: {
        td_quantity m = *a;
        if (td_quantity_mul(&m, (int64_t)op[3] - 128) == TD_OK) {
            qd_check_flag("mul", &m);
            *a = m;
        }
        break;
    }
    default: {
        /* op[2..3] spread over the int64 range, the ends included. */
        uint64_t mag = (uint64_t)op[2] << (op[3] % 56);
        int64_t v = op[3] == 255 ? INT64_MIN : (op[3] & 1 ? -(int64_t)mag : (int64_t)mag);
        td_quantity_from_int(a, v, qd_scale(op[1]), (td_qformat)(op[2] % 3));
        qd_check_flag("from_int", a);
        break;
    }
    }
}

/* Fills the pool with values near the fast paths' edges. */
static void qd_pool_init(td_quantity *pool)
{
    static const char *seeds[QD_POOL] = {
        "0",    "1",    "500m", "2Gi", "18446744073709551615", "18446744073709551616",
        "-1.5", "1e19", "1n",   "8Ei", "9223372036854775807",  "-9223372036854775808.5"};
    for (int i = 0; i < QD_POOL; i++)
        if (!qd_parse(seeds[i], &pool[i]))
            abort();
}

#endif
