/* pss_internal.h - the Pod Security checks without their allowed-path
 * walk (td__ names), for the tests and fuzz_pss that compare the two; not
 * for use by other modules. */
#ifndef TENANTD_PSS_INTERNAL_H
#define TENANTD_PSS_INTERNAL_H

#include "admission/pss.h"

/* td_pss_check without its allowed-path walk: every check run and worded
 * in full. The same answer for every input; td_pss_check calls it for what
 * its walk cannot pass, tests and fuzz_pss to compare the two. */
td_status td__pss_check_full(const json_t *pod, td_pss_level level, td_err *err);
td_status td__pss_check_full_version(const json_t *pod, td_pss_level level, long minor,
                                     td_err *err);

#endif
