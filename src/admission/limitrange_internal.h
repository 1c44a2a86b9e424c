/* limitrange_internal.h - LimitRanger's defaulting on a pod parse that the
 * admission pipeline (admit.c) already holds (td__ names); not for use
 * outside src/admission. */
#ifndef TENANTD_LIMITRANGE_INTERNAL_H
#define TENANTD_LIMITRANGE_INTERNAL_H

#include "admission/limitrange.h"
#include "admission/podres_internal.h"

/* td_limitrange_default_parsed for a pod that td__pod_default_requests_parsed
 * has just accepted (and defaulted), with parsed its parse from there:
 * the pod is not parsed again, and parsed is given the defaults set, in
 * the form a parse of the defaulted pod reads (and bound to it). On
 * failure the pod is unchanged and parsed is to be td__pod_fini'd. */
td_status td__limitrange_default_update(json_t *pod, const td_limitranges *lrs,
                                        struct td__pod *parsed, td_err *err);

#endif
