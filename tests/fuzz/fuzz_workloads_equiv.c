/* fuzz_workloads_equiv.c - libFuzzer target: the bytes are a sequence of
 * steps (5 bytes each: the step, then its 4 argument bytes; at most 120
 * steps) of submits, finishes, withdrawals, applies, deletes and restarts
 * run on the daemon's batch queue kept in memory and on the queue rebuilt
 * from the records with a full pass (workloads_equiv.h). Every decision
 * and record must agree after every step; a difference aborts with it. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../unit/workloads_equiv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    equiv e;
    if (equiv_init(&e) != 0) {
        fprintf(stderr, "%s\n", e.fail);
        abort();
    }
    for (size_t i = 0; i + 5 <= size && i < 5 * 120; i += 5) {
        if (equiv_step(&e, data[i], data + i + 1) != 0) {
            fprintf(stderr, "step %zu: %s\n", i / 5, e.fail);
            abort();
        }
    }
    equiv_fini(&e);
    return 0;
}
