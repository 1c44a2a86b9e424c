/* admindex.h - the admission objects of a config snapshot, parsed once:
 * each namespace's LimitRanges and ResourceQuotas, ready for
 * td_limitrange_*_parsed and td_quota_check_parsed. Built lazily by the
 * first admission on a snapshot, hung on it (td_config_attachment_get) and
 * freed with it; immutable afterwards, so webhook threads share it. */
#ifndef TENANTD_ADMINDEX_H
#define TENANTD_ADMINDEX_H

#include <stdbool.h>

#include "core/config.h"
#include "admission/limitrange.h"
#include "admission/quota.h"

typedef struct {
    const char *ns; /* borrowed from the snapshot */
    /* A NULL member whose *_ok is false did not parse: the caller runs the
     * JSON entry point instead, which reports the same error. */
    td_limitranges *limitranges;
    bool limitranges_ok;
    td_quotas *quotas[2]; /* [from_status]: parsed for td_quota_check_parsed */
    bool quotas_ok[2];
    bool quota_status_used; /* some quota of the namespace has status.used */
    /* what td_config_list(cfg, KIND, ns, ...) gives for LimitRange,
     * ResourceQuota and Pod, listed once per snapshot (borrowed from it) */
    json_t *const *ranges, *const *quota_objs, *const *pods;
    size_t nranges, nquota_objs, npods;
} td_admindex_ns;

/* The parsed objects of namespace ns in cfg, or NULL when ns has no
 * LimitRange and no ResourceQuota, or when the index could not be built
 * (out of memory): the caller then works from the JSON objects. Borrowed
 * for the snapshot's life. */
const td_admindex_ns *td_admindex_get(const td_config *cfg, const char *ns);

#endif
