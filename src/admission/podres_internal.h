/* podres_internal.h - the parsed form of a Pod's resources and the helpers
 * that LimitRanger, ResourceQuota and the admission pipeline share inside
 * src/admission (td__ names); not for use outside it. */
#ifndef TENANTD_PODRES_INTERNAL_H
#define TENANTD_PODRES_INTERNAL_H

#include "admission/podres.h"
#include "core/quantity.h"
#include "core/resources.h"

/* ---- Internal to src/admission (limitrange.c, quota.c). ---- */

/* One container's resource fields, parsed. */
typedef struct {
    const char *name;  /* borrowed from the pod JSON; "" if absent */
    bool restartable;  /* init container with restartPolicy "Always" */
    td_resources requests;
    td_resources limits;
    /* The container object and its "resources" member this was read
     * from (td__pod_bind), for td__pod_refresh. */
    const json_t *src, *src_resources;
} td__pod_container;

/* A pod's resource-related fields, parsed and validated. Strings are
 * borrowed from the JSON, which must outlive this. */
typedef struct td__pod {
    td__pod_container *containers;
    size_t ncontainers;
    td__pod_container *init_containers;
    size_t ninit_containers;
    bool has_overhead;
    td_resources overhead;
    bool has_pod_resources; /* spec.resources is an object */
    td_resources pod_requests;
    td_resources pod_limits;
    /* The JSON nodes read (td__pod_bind): spec, its container lists,
     * overhead and resources. bound is false when they are not known. */
    bool bound;
    const json_t *src_spec, *src_containers, *src_init, *src_overhead, *src_resources;
    /* td__pod_aggregate(p, 0) made once (td__pod_aggregate_keep) for the
     * validating steps to read; dropped by bind and refresh. */
    bool agg_kept;
    td_resources agg_requests, agg_limits;
} td__pod;

/* Parses pod's containers, init containers, overhead and pod-level
 * resources into *out (initialised by this call; td__pod_fini it on TD_OK).
 * TD_EINVAL with a message naming the field, or TD_ENOMEM; *out needs no
 * fini on failure. */
td_status td__pod_parse(const json_t *pod, td__pod *out, td_err *err);
void td__pod_fini(td__pod *p);

/* A parse kept across changes to the pod, so that it is made once per
 * admission. td__pod_parse binds its result to the JSON nodes it read.
 * td__pod_bind binds p to pod's current nodes, for a caller that has
 * changed pod's JSON and made the same change to p itself (p must then
 * equal td__pod_parse of pod). td__pod_refresh brings p up to date with
 * pod after changes made by others: it parses again what was replaced
 * (a container object or its "resources", spec.overhead, spec.resources;
 * all of it if spec or a container list was replaced). A change made in
 * place inside a node p was read from is not seen: a step that changes
 * resources replaces the node, as the resources steps do. On failure of
 * refresh, p is left empty (fini'd) and the error is td__pod_parse's. */
void td__pod_bind(const json_t *pod, td__pod *p);
td_status td__pod_refresh(const json_t *pod, td__pod *p, td_err *err);

/* true if a and b hold the same containers (names, restartable), requests,
 * limits, overhead and pod-level resources, quantity by quantity (value
 * and format): a check that an updated parse equals a fresh one. */
bool td__pod_same(const td__pod *a, const td__pod *b);

/* td_pod_default_requests, leaving in *out (on TD_OK; td__pod_fini it)
 * the parse of the defaulted pod, bound to it. The parse made to check
 * the pod is updated with the requests set, not made again. (If a parse
 * made afresh fails after the pod was changed, *out is left empty and
 * unbound: td__pod_refresh then parses again and reports.) */
td_status td__pod_default_requests_parsed(json_t *pod, td__pod *out, td_err *err);

/* Flags for td__pod_aggregate. */
#define TD__POD_OVERHEAD  1u /* add spec.overhead */
#define TD__POD_LEVEL     2u /* let pod-level spec.resources replace cpu/memory/hugepages */

/* The aggregate of p's containers as in PodRequests/PodLimits (see
 * td_pod_requests_limits), with the parts flags select. requests and
 * limits are initialised by the caller, cleared and filled here; either
 * may be NULL. */
td_status td__pod_aggregate(const td__pod *p, unsigned flags, td_resources *requests,
                            td_resources *limits);

/* Computes p's container aggregate (td__pod_aggregate with no flags) once
 * and keeps it in p; TD_ENOMEM leaves none kept. */
td_status td__pod_aggregate_keep(td__pod *p);

/* The kept aggregate's requests (limits false) or limits, if one is kept
 * and flags change nothing for p (no spec.overhead when TD__POD_OVERHEAD,
 * no spec.resources when TD__POD_LEVEL); else NULL: the caller runs
 * td__pod_aggregate. Borrowed from p. */
const td_resources *td__pod_aggregate_kept(const td__pod *p, unsigned flags, bool limits);

/* true for pod-level resource names Kubernetes supports (cpu, memory,
 * hugepages-*). */
bool td__pod_level_resource(const char *name);

/* resourcehelper.IsPodLevelResourcesSet: p has spec.resources with a
 * request or limit of a pod-level resource. */
bool td__pod_level_set(const td__pod *p);

/* Parses a JSON ResourceList (an object of name -> quantity; null or absent
 * is empty) into out (initialised by the caller, added to). path names the
 * object in messages: `PATH.NAME: "2x" is not a quantity`. TD_EINVAL or
 * TD_ENOMEM. */
td_status td__resources_parse(const json_t *list, const char *path, td_resources *out,
                              td_err *err);

/* Replaces pod's top-level members with those of copy (a mutated deep
 * copy of pod, or one from td__pod_resources_copy): keys new to pod first,
 * then replacements, which do not allocate, so TD_ENOMEM leaves pod
 * unchanged. Borrows both. */
td_status td__pod_commit(json_t *pod, json_t *copy);

/* A copy of spec (a Pod's spec) to change in place only the containers'
 * and init containers' "resources" and the spec's own "resources": new
 * objects along those paths (each container a new object; its resources a
 * td_json_copy), every other member shared with spec. Cheaper than a deep
 * copy of a spec full of probes, volumes and env, and as safe for those
 * changes: what is shared is never written. A new reference; NULL when out
 * of memory or when spec is not an object. Borrows spec. */
json_t *td__pod_spec_resources_copy(const json_t *spec);

/* The same for a whole pod: its spec as td__pod_spec_resources_copy makes
 * it, and metadata and metadata.annotations (when objects) new objects, for
 * LimitRange defaulting; other members shared. NULL when out of memory or
 * when pod is not an object. Borrows pod. */
json_t *td__pod_resources_copy(const json_t *pod);

/* Parses one quantity JSON value (a string, or a JSON integer as Kubernetes
 * also accepts) into *q. path names it in the message. */
td_status td__quantity_parse_json(const json_t *v, const char *path, td_quantity *q, td_err *err);

#endif
