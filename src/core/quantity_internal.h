/* quantity_internal.h - the general (any-width) paths of quantity.c, for
 * differential tests and fuzzing against the 64-bit fast paths the public
 * functions take. Not for callers: use core/quantity.h. Each behaves
 * exactly as its public counterpart is documented to. */
#ifndef TENANTD_QUANTITY_INTERNAL_H
#define TENANTD_QUANTITY_INTERNAL_H

#include <stdint.h>

#include "core/quantity.h"

td_status td__quantity_parse_general(const char *s, td_quantity *q, td_err *err);
int td__quantity_cmp_general(const td_quantity *a, const td_quantity *b);
/* *a += b (negate 0) or *a -= b (negate 1). */
td_status td__quantity_add_sub_general(td_quantity *a, const td_quantity *b, int negate);
int64_t td__quantity_scaled_value_general(const td_quantity *q, int32_t scale);
size_t td__quantity_format_general(const td_quantity *q, char *buf, size_t n);

#endif
