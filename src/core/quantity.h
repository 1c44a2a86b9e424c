/* quantity.h - Kubernetes resource quantities ("500m", "800Gi", "1.5e3"),
 * parsed, compared, added and printed exactly as k8s.io/apimachinery's
 * resource.Quantity does. A td_quantity is a plain value: copy it freely,
 * it owns no memory. The fields are private to quantity.c. */
#ifndef TENANTD_QUANTITY_H
#define TENANTD_QUANTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tenantd/status.h"

typedef enum {
    TD_QFMT_DECIMAL_EXPONENT = 0, /* 1e3 */
    TD_QFMT_BINARY_SI,            /* 1Ki, 1Mi */
    TD_QFMT_DECIMAL_SI            /* 1k, 500m */
} td_qformat;

/* Private representation: a sign, an unsigned magnitude of
 * TD_QUANTITY_WORDS 32-bit words (little-endian), and a base-10 scale, so
 * value = sign * mag * 10^scale, with no trailing zeros in mag. 384 bits
 * hold about 115 significant digits: every quantity Kubernetes accepts at
 * nano precision up to that, and sums of many of them; parse rejects the
 * rare longer one rather than round it. */
#define TD_QUANTITY_WORDS 12
typedef struct {
    uint32_t mag[TD_QUANTITY_WORDS];
    int32_t scale;
    int8_t sign; /* -1, 0, 1 */
    uint8_t format; /* td_qformat */
    /* 1 if mag[2..] are all zero (the magnitude fits 64 bits), so the
     * 64/128-bit fast paths apply; 0 (as in a zeroed struct) means "not
     * known", and the general path is taken. */
    uint8_t fits64;
} td_quantity;

/* Longest canonical string td_quantity_format can produce, with NUL
 * (a BinarySI sum near the top of the range can print ~170 characters). */
#define TD_QUANTITY_STR_MAX 192

/* Parses s (NUL-terminated) as Kubernetes' ParseQuantity does. TD_OK with *q
 * set; TD_EINVAL with a message naming s if it is not a quantity, and *q
 * untouched. */
td_status td_quantity_parse(const char *s, td_quantity *q, td_err *err);

/* Writes the canonical form (Quantity.String()) into buf of size n
 * (TD_QUANTITY_STR_MAX is always enough). Returns the string length. */
size_t td_quantity_format(const td_quantity *q, char *buf, size_t n);

/* -1, 0 or 1 as a is less than, equal to or greater than b. Exact. */
int td_quantity_cmp(const td_quantity *a, const td_quantity *b);

/* -1, 0 or 1. */
int td_quantity_sign(const td_quantity *q);

/* *a += b and *a -= b, exactly; the result keeps a's format (b's if a is
 * zero), as Quantity.Add does. TD_EINVAL (a unchanged) only if the result
 * would not fit the representation. */
td_status td_quantity_add(td_quantity *a, const td_quantity *b);
td_status td_quantity_sub(td_quantity *a, const td_quantity *b);

/* A quantity of value * 10^scale in the given format. */
void td_quantity_from_int(td_quantity *q, int64_t value, int32_t scale, td_qformat format);

/* Zero in the given format. */
void td_quantity_zero(td_quantity *q, td_qformat format);

/* Value() and MilliValue(): rounded up (away from zero) to an integer, and
 * saturated at INT64_MIN/INT64_MAX. */
int64_t td_quantity_value(const td_quantity *q);
int64_t td_quantity_milli_value(const td_quantity *q);

/* Nearest double, for ratios and reports (never for decisions). */
double td_quantity_as_double(const td_quantity *q);

/* The format the quantity prints in (Quantity.Format). */
td_qformat td_quantity_get_format(const td_quantity *q);

/* *q = -*q, keeping its format (Quantity.Neg). */
void td_quantity_neg(td_quantity *q);

/* *q *= factor, exactly (Quantity.Mul). TD_EINVAL (q unchanged) only if the
 * result would not fit the representation. */
td_status td_quantity_mul(td_quantity *q, int64_t factor);

/* Rounds q away from zero to a multiple of 10^scale if it has finer digits
 * (Quantity.RoundUp). Returns true if no precision was lost. */
bool td_quantity_round_up(td_quantity *q, int32_t scale);

/* ScaledValue(): q / 10^scale rounded away from zero, saturated at
 * INT64_MIN/INT64_MAX. td_quantity_value is scale 0, milli_value -3. */
int64_t td_quantity_scaled_value(const td_quantity *q, int32_t scale);

#endif
