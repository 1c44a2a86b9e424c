/* fuzz_jsonfast.c - differential libFuzzer target: td_json_loadb must give
 * exactly json_loadb(…, 0, …)'s answer for any bytes: equal values in the
 * same order and of the same types, or the same error. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tenantd/jsonfast.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t e1, e2;
    memset(&e1, 0, sizeof e1);
    memset(&e2, 0, sizeof e2);
    json_t *want = json_loadb((const char *)data, size, 0, &e1);
    json_t *got = td_json_loadb((const char *)data, size, &e2);
    if (!want || !got) {
        if (want || got || strcmp(e1.text, e2.text) != 0)
            abort();
        return 0;
    }
    char *a = json_dumps(want, JSON_COMPACT | JSON_ENCODE_ANY);
    char *b = json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!json_equal(want, got) || !a || !b || strcmp(a, b) != 0)
        abort();
    free(a);
    free(b);
    json_decref(want);
    json_decref(got);
    return 0;
}
