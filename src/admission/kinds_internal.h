/* kinds_internal.h - admission's ResourceQuota validation, shared by the
 * kind's validator (kinds.c) and the ResourceQuota admission (quota.c). */
#ifndef TENANTD_ADMISSION_KINDS_INTERNAL_H
#define TENANTD_ADMISSION_KINDS_INTERNAL_H

#include <jansson.h>

#include "tenantd/validate.h"

/* A ResourceQuota's spec (hard, scopes, scopeSelector) as Kubernetes
 * validates it; v->obj is the object. */
td_status td__admission_validate_quota(td_vctx *v);

/* ScopedResourceSelectorRequirements at base (a list; NULL is none), as
 * Kubernetes validates them. */
td_status td__admission_scope_exprs(td_vctx *v, const json_t *exprs, const char *base);

#endif
