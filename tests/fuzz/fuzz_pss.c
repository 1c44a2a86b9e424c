/* fuzz_pss.c - libFuzzer target for td_pss_check: any bytes that jansson
 * accepts as JSON are checked at every level; nothing may crash, leak or
 * leave a message that is not NUL-terminated within td_err, and the
 * allowed-path walk must give the answer of the full checks
 * (td__pss_check_full), status and message byte for byte. The same holds
 * at pinned policy versions (each side of every version a check changes
 * at, and one past the newest), and a walk kept across levels
 * (td_pss_check_walk, as admission's enforce/audit/warn share it) must
 * answer as a fresh one. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "admission/pss_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const td_pss_level levels[] = {TD_PSS_PRIVILEGED, TD_PSS_BASELINE, TD_PSS_RESTRICTED};
    json_t *pod = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    size_t i;

    if (!pod)
        return 0;
    for (i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        td_err err;
        td_status st;
        memset(err.msg, 'x', sizeof err.msg);
        st = td_pss_check(pod, levels[i], &err);
        if (st != TD_OK)
            assert(memchr(err.msg, '\0', sizeof err.msg) != NULL);
        assert(st == TD_OK || st == TD_EFORBIDDEN || st == TD_EINVAL || st == TD_ENOMEM);
        assert(td_pss_check(pod, levels[i], NULL) == st);
        {
            td_err full;
            memset(full.msg, 'x', sizeof full.msg);
            assert(td__pss_check_full(pod, levels[i], &full) == st);
            if (st != TD_OK)
                assert(strcmp(full.msg, err.msg) == 0);
        }
    }
    {
        static const long minors[] = {TD_PSS_LATEST, 0, 7, 8, 18, 19, 21, 22, 23, 24, 25, 26, 27,
                                      28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 99};
        td_pss_walk walk = {{0, 0, 0}, 0, 0};
        for (size_t k = 0; k < sizeof minors / sizeof minors[0]; k++) {
            for (i = 1; i < sizeof levels / sizeof levels[0]; i++) {
                td_err err, full, kept;
                td_status st;
                memset(err.msg, 'x', sizeof err.msg);
                memset(full.msg, 'x', sizeof full.msg);
                memset(kept.msg, 'x', sizeof kept.msg);
                st = td_pss_check_version(pod, levels[i], minors[k], &err);
                assert(st == TD_OK || st == TD_EFORBIDDEN || st == TD_EINVAL || st == TD_ENOMEM);
                if (st != TD_OK)
                    assert(memchr(err.msg, '\0', sizeof err.msg) != NULL);
                assert(td__pss_check_full_version(pod, levels[i], minors[k], &full) == st);
                assert(td_pss_check_walk(pod, levels[i], minors[k], &walk, &kept) == st);
                if (st != TD_OK) {
                    assert(strcmp(full.msg, err.msg) == 0);
                    assert(strcmp(kept.msg, err.msg) == 0);
                }
            }
        }
    }
    json_decref(pod);
    return 0;
}
