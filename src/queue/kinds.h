/* kinds.h - the kinds the queue stage owns: NodePool and Kueue's kinds.
 * Registered with core's registry by src/kinds/builtin.c. */
#ifndef TENANTD_QUEUE_KINDS_H
#define TENANTD_QUEUE_KINDS_H

#include <stddef.h>

#include "core/kind.h"

/* The queue stage's kind table (*n entries), static. */
const td_kind_def *td_queue_kinds(size_t *n);

#endif
