/* fuzz_quantity_fast.c - libFuzzer target: the 64-bit fast paths of
 * quantity.c against its general paths. The input's lines (up to a blank
 * line) are parsed both ways; the bytes after the blank line, or the whole
 * input if there is none, are read 4 at a time as operations on a pool of
 * values (cmp, add, sub, scaled_value, sign, neg, mul, from_int), each
 * checked both ways. Aborts on any difference (quantity_diff.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quantity_diff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';

    /* The seed values are checked once; each input starts from a copy. */
    static td_quantity seeds[QD_POOL];
    static int seeded;
    if (!seeded) {
        qd_pool_init(seeds);
        seeded = 1;
    }
    td_quantity pool[QD_POOL];
    memcpy(pool, seeds, sizeof pool);

    const uint8_t *ops = data;
    size_t nops = size;
    char *blank = strstr(s, "\n\n");
    if (blank != NULL) {
        *blank = '\0';
        ops = data + (blank - s) + 2;
        nops = size - (size_t)(blank - s) - 2;
    }
    /* Lines (NUL-terminated pieces): each parsed both ways, the values kept. */
    size_t slot = 0;
    for (char *line = s; line != NULL;) {
        char *nl = strchr(line, '\n');
        if (nl != NULL)
            *nl = '\0';
        td_quantity q;
        if (qd_parse(line, &q))
            pool[slot++ % QD_POOL] = q;
        line = nl ? nl + 1 : NULL;
    }
    for (size_t i = 0; i + 4 <= nops; i += 4)
        qd_op(pool, ops + i);
    free(s);
    return 0;
}
