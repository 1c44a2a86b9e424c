/* kinds.h - the kinds the admission stage owns: Kubernetes' kinds (Namespace, ResourceQuota, LimitRange, PriorityClass,
 * RuntimeClass, Pod, ...) and AdmissionPolicy.
 * Registered with core's registry by src/kinds/builtin.c. */
#ifndef TENANTD_ADMISSION_KINDS_H
#define TENANTD_ADMISSION_KINDS_H

#include <stddef.h>

#include "core/kind.h"

/* The admission stage's kind table (*n entries), static. */
const td_kind_def *td_admission_kinds(size_t *n);

#endif
