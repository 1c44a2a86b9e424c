/* jsonscan.h - the string scan jsonfast.c (reading) and jsondump.c
 * (writing) share: where a run of bytes that need no escape ends. Internal
 * to src/core. */
#ifndef TENANTD_JSONSCAN_H
#define TENANTD_JSONSCAN_H

#include <stdint.h>
#include <string.h>

#define TD__ONES 0x0101010101010101ULL
#define TD__HIGHS 0x8080808080808080ULL

/* The first byte of q[0..end) that ends a plain run of a string: '"',
 * '\\', a control byte or a non-ASCII one (end if none). Eight bytes at a
 * time: a word is plain when none of its bytes is below 0x20, above 0x7F,
 * or equal to '"' or '\\' (the has-zero-byte test, exact for "any"). */
static inline const unsigned char *td__json_plain_run(const unsigned char *q,
                                                      const unsigned char *end)
{
    while (end - q >= 8) {
        uint64_t w;
        memcpy(&w, q, 8);
        uint64_t quote = w ^ (TD__ONES * '"'), bslash = w ^ (TD__ONES * '\\');
        uint64_t stop = (w - TD__ONES * 0x20) | (quote - TD__ONES) | (bslash - TD__ONES);
        stop = (stop & ~w & TD__HIGHS) | (w & TD__HIGHS);
        if (stop) {
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            /* A borrow only leaves a byte that is itself a stop, so the
             * lowest flagged byte is the first stop: no byte loop. */
            return q + (__builtin_ctzll(stop) >> 3);
#else
            break;
#endif
        }
        q += 8;
    }
    while (q < end && *q != '"' && *q != '\\' && *q >= 0x20 && *q < 0x80)
        q++;
    return q;
}

#endif
