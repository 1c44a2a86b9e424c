/* bench_quantity.c - nanoseconds per quantity operation on the spellings a
 * Pod and a quota carry ("500m", "2Gi", "8", "1.5"), through the public
 * functions (64-bit fast paths) and the general paths they fall back to
 * (core/quantity_internal.h), median of 5 rounds, one thread. A micro-
 * measure for comparing the two, not a test.
 * Build: cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc \
 *          bench/bench_quantity.c BUILD/libtd_core.a -lm -o BUILD/bench_quantity
 * Operations: parse, cmp, add, milli_value, format.
 * Usage: bench_quantity [N]   (N operations per round, default 2000000) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/quantity_internal.h"
#include "core/quantity.h"

static const char *spellings[] = {"500m", "2Gi", "8",   "1.5",  "100Mi", "250m",
                                  "1Gi",  "4",   "64Mi", "0.5", "1e3",   "20Gi"};
#define NSPELL (sizeof spellings / sizeof spellings[0])

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static volatile int64_t sink; /* keeps the loops from being optimised away */
static td_quantity vals[NSPELL];

static void op_parse(long n, int general)
{
    td_quantity q;
    for (long i = 0; i < n; i++) {
        const char *s = spellings[i % NSPELL];
        if (general)
            td__quantity_parse_general(s, &q, NULL);
        else
            td_quantity_parse(s, &q, NULL);
        sink += q.scale;
    }
}

static void op_cmp(long n, int general)
{
    for (long i = 0; i < n; i++) {
        const td_quantity *a = &vals[i % NSPELL], *b = &vals[(i / NSPELL) % NSPELL];
        sink += general ? td__quantity_cmp_general(a, b) : td_quantity_cmp(a, b);
    }
}

static void op_add(long n, int general)
{
    for (long i = 0; i < n; i++) {
        td_quantity a = vals[i % NSPELL];
        const td_quantity *b = &vals[(i / NSPELL) % NSPELL];
        if (general)
            td__quantity_add_sub_general(&a, b, 0);
        else
            td_quantity_add(&a, b);
        sink += a.scale;
    }
}

static void op_milli(long n, int general)
{
    for (long i = 0; i < n; i++) {
        const td_quantity *a = &vals[i % NSPELL];
        sink += general ? td__quantity_scaled_value_general(a, -3) : td_quantity_milli_value(a);
    }
}

static void op_format(long n, int general)
{
    char buf[TD_QUANTITY_STR_MAX];
    for (long i = 0; i < n; i++) {
        const td_quantity *a = &vals[i % NSPELL];
        sink += (int64_t)(general ? td__quantity_format_general(a, buf, sizeof buf)
                                  : td_quantity_format(a, buf, sizeof buf));
    }
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    if (n <= 0)
        n = 2000000;
    for (size_t i = 0; i < NSPELL; i++)
        if (td_quantity_parse(spellings[i], &vals[i], NULL) != TD_OK)
            return 1;
    static const struct {
        const char *name;
        void (*fn)(long, int);
    } ops[] = {{"parse", op_parse}, {"cmp", op_cmp}, {"add", op_add}, {"milli_value", op_milli},
                 {"format", op_format}};
    printf("%-12s %10s %10s   (ns/op, median of 5 x %ld)\n", "op", "fast", "general", n);
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        double med[2];
        for (int general = 0; general < 2; general++) {
            double t[5];
            ops[k].fn(n / 10, general); /* warm */
            for (int r = 0; r < 5; r++) {
                double t0 = now_ns();
                ops[k].fn(n, general);
                t[r] = (now_ns() - t0) / (double)n;
            }
            qsort(t, 5, sizeof t[0], cmp_double);
            med[general] = t[2];
        }
        printf("%-12s %10.1f %10.1f\n", ops[k].name, med[0], med[1]);
    }
    return 0;
}
