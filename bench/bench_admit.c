/* bench_admit.c - the admission webhook's own work per review, without the
 * network: what handle_review (src/daemon/control.c) does for one POST
 * /validate body, in a loop on one thread, timed with the monotonic clock.
 * Three figures, each the median of 5 rounds of N reviews:
 *   parse    td_json_loadb_review of the body, freed again;
 *   admit    td_admission_review of a parsed review (parse excluded);
 *   whole    parse + admit + the answer's bytes (td_admission_review_body),
 *            in a jansson arena, as the daemon does it.
 * Usage: bench_admit CONFIG.yaml REVIEW.json [N] [--json] [--mode validate|mutate|admit]
 * Prints one table (or, with --json, one JSON line) and the answer's size,
 * and fails if the review is not answered "allowed":true, so a broken
 * fixture cannot produce a fast, meaningless figure. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kinds/builtin.h"
#include "admission/admit.h"
#include "core/config.h"
#include "core/kind.h"
#include "core/jsonarena.h"
#include "core/jsonfast.h"

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

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n + 65536 > cap) {
            char *nb = realloc(buf, cap = cap * 2 + 65536);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
    } while (got > 0);
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

enum { F_PARSE, F_ADMIT, F_WHOLE, F_COUNT };
static const char *const fnames[F_COUNT] = {"parse", "admit", "whole"};

/* One review of kind f; returns the answer's length for F_WHOLE, 0 else,
 * -1 on failure. */
static long one(int f, const td_config *cfg, const char *body, size_t len, const json_t *parsed,
                td_review_mode mode, char **answer)
{
    json_error_t je;
    if (f == F_PARSE) {
        json_t *in = td_json_loadb_review(body, len, &je);
        if (!in)
            return -1;
        json_decref(in);
        return 0;
    }
    if (f == F_ADMIT) {
        json_t *out = NULL;
        int code = 0;
        if (td_admission_review(cfg, parsed, mode, NULL, &out, &code) != TD_OK)
            return -1;
        json_decref(out);
        return 0;
    }
    bool arena = td_json_arena_begin();
    json_t *in = td_json_loadb_review(body, len, &je);
    char *s = NULL;
    size_t slen = 0;
    int code = 0;
    long n = -1;
    if (in && td_admission_review_body(cfg, in, mode, NULL, &s, &slen, &code, NULL) == TD_OK) {
        n = (long)slen;
        if (answer && !*answer)
            *answer = strdup(s);
        free(s);
    }
    td_json_arena_forget(in);
    if (arena)
        td_json_arena_end();
    return n;
}

int main(int argc, char **argv)
{
    if (td_kinds_register_builtin(NULL) != TD_OK)
        return 1;
    const char *cfg_path = NULL, *review_path = NULL;
    long n = 20000;
    int json_out = 0;
    td_review_mode mode = TD_REVIEW_VALIDATE;
    int pos = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json_out = 1;
        } else if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
            const char *m = argv[++i];
            mode = strcmp(m, "mutate") == 0  ? TD_REVIEW_MUTATE
                   : strcmp(m, "admit") == 0 ? TD_REVIEW_MUTATE_AND_VALIDATE
                                             : TD_REVIEW_VALIDATE;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: bench_admit CONFIG.yaml REVIEW.json [N] [--json] [--mode validate|mutate|admit]\n");
            return 0;
        } else if (pos == 0) {
            cfg_path = argv[i], pos++;
        } else if (pos == 1) {
            review_path = argv[i], pos++;
        } else {
            n = strtol(argv[i], NULL, 10);
        }
    }
    if (!cfg_path || !review_path || n < 1) {
        fprintf(stderr, "usage: bench_admit CONFIG.yaml REVIEW.json [N] [--json] [--mode validate|mutate|admit]\n");
        return 2;
    }
    td_json_arena_install();
    td_config *cfg;
    td_err err;
    if (td_config_load_files(&cfg_path, 1, &cfg, &err) != TD_OK) {
        fprintf(stderr, "bench_admit: %s\n", err.msg); /* names the file */
        return 1;
    }
    size_t len;
    char *body = read_file(review_path, &len);
    if (!body) {
        fprintf(stderr, "bench_admit: %s: cannot read it\n", review_path);
        return 1;
    }
    json_error_t je;
    json_t *parsed = td_json_loadb_review(body, len, &je);
    if (!parsed) {
        fprintf(stderr, "bench_admit: %s: line %d: %s\n", review_path, je.line, je.text);
        return 1;
    }
    char *answer = NULL;
    long alen = one(F_WHOLE, cfg, body, len, parsed, mode, &answer);
    if (alen < 0 || !answer || !strstr(answer, "\"allowed\":true")) {
        fprintf(stderr, "bench_admit: the review is not allowed: %s\n", answer ? answer : "(no answer)");
        return 1;
    }
    enum { ROUNDS = 5 };
    double med[F_COUNT], lo[F_COUNT], hi[F_COUNT];
    for (int f = 0; f < F_COUNT; f++) {
        double per[ROUNDS];
        for (long i = 0; i < n / 10; i++) /* warm-up */
            one(f, cfg, body, len, parsed, mode, NULL);
        for (int r = 0; r < ROUNDS; r++) {
            double t0 = now_ns();
            for (long i = 0; i < n; i++)
                if (one(f, cfg, body, len, parsed, mode, NULL) < 0) {
                    fprintf(stderr, "bench_admit: %s failed\n", fnames[f]);
                    return 1;
                }
            per[r] = (now_ns() - t0) / (double)n;
        }
        qsort(per, ROUNDS, sizeof *per, cmp_double);
        med[f] = per[ROUNDS / 2], lo[f] = per[0], hi[f] = per[ROUNDS - 1];
    }
    if (json_out) {
        printf("{\"body_bytes\":%zu,\"answer_bytes\":%ld,\"n\":%ld", len, alen, n);
        for (int f = 0; f < F_COUNT; f++)
            printf(",\"%s_us\":{\"median\":%.3f,\"min\":%.3f,\"max\":%.3f}", fnames[f], med[f] / 1e3,
                   lo[f] / 1e3, hi[f] / 1e3);
        printf("}\n");
    } else {
        printf("review %zu bytes, answer %ld bytes, %ld reviews x %d rounds, one thread\n", len, alen,
               n, ROUNDS);
        printf("%-8s %10s %10s %10s %12s\n", "step", "us median", "min", "max", "reviews/s");
        for (int f = 0; f < F_COUNT; f++)
            printf("%-8s %10.2f %10.2f %10.2f %12.0f\n", fnames[f], med[f] / 1e3, lo[f] / 1e3,
                   hi[f] / 1e3, 1e9 / med[f]);
    }
    free(answer);
    free(body);
    json_decref(parsed);
    td_config_unref(cfg);
    td_json_arena_release();
    return 0;
}
