/* fuzz_quantity.c - libFuzzer target: any bytes that parse as a quantity
 * must print a canonical form that parses back to the same value, and
 * printing settles after one round trip. Aborts on any mismatch. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/quantity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';

    td_quantity q, back;
    td_err err;
    if (td_quantity_parse(s, &q, &err) == TD_OK) {
        char out[TD_QUANTITY_STR_MAX], again[TD_QUANTITY_STR_MAX];
        size_t n = td_quantity_format(&q, out, sizeof out);
        if (n >= sizeof out) {
            fprintf(stderr, "%s: canonical form too long (%zu)\n", s, n);
            abort();
        }
        if (td_quantity_parse(out, &back, &err) != TD_OK) {
            fprintf(stderr, "%s -> %s does not parse: %s\n", s, out, err.msg);
            abort();
        }
        if (td_quantity_cmp(&q, &back) != 0) {
            fprintf(stderr, "%s -> %s changes value\n", s, out);
            abort();
        }
        /* A BinarySI value printed without a binary suffix comes back
         * DecimalSI ("4312.5Ki" -> "4416000" -> "4416k"), as in Kubernetes;
         * from the second print on the string must be stable. */
        td_quantity third;
        td_quantity_format(&back, again, sizeof again);
        if (td_quantity_parse(again, &third, &err) != TD_OK) {
            fprintf(stderr, "%s -> %s -> %s does not parse: %s\n", s, out, again, err.msg);
            abort();
        }
        td_quantity_format(&third, out, sizeof out);
        if (strcmp(out, again) != 0 || td_quantity_cmp(&q, &third) != 0) {
            fprintf(stderr, "%s -> %s -> %s is not stable\n", s, again, out);
            abort();
        }
        /* x - x == 0 and x + x == 2x exercise the aligned arithmetic. */
        td_quantity d = q, two = q, twice = q;
        if (td_quantity_sub(&d, &q) != TD_OK || td_quantity_sign(&d) != 0)
            abort();
        if (td_quantity_add(&two, &q) == TD_OK && td_quantity_mul(&twice, 2) == TD_OK &&
            td_quantity_cmp(&two, &twice) != 0)
            abort();
    }
    free(s);
    return 0;
}
