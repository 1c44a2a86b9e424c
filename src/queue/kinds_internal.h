/* kinds_internal.h - the NodePool kind's validator, run when a snapshot
 * takes the object (kinds.c) and when the queue loads it (load.c), so a
 * mistake has one message wherever it is found. */
#ifndef TENANTD_QUEUE_KINDS_INTERNAL_H
#define TENANTD_QUEUE_KINDS_INTERNAL_H

#include "core/validate.h"

/* Nodes in all NodePools together at most (placement scans the nodes of a
 * flavor per node it fills); one pool's spec.nodes is at most this too. */
#define TD_QUEUE_MAX_NODES 10000

/* A NodePool (v->obj): known fields only, spec.nodes an integer in [0,
 * TD_QUEUE_MAX_NODES], spec.capacity quantities, a taint or a
 * nodeSelector. */
td_status td__queue_validate_nodepool(td_vctx *v);

#endif
