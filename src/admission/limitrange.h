/* limitrange.h - Kubernetes' LimitRanger admission for Pods (a port of
 * plugin/pkg/admission/limitranger): defaulting of container requests and
 * limits from LimitRange `default`/`defaultRequest`, and validation against
 * `min`, `max` and `maxLimitRequestRatio` of type Container and Pod. Pods and
 * LimitRanges are v1 objects as jansson values. */
#ifndef TENANTD_LIMITRANGE_H
#define TENANTD_LIMITRANGE_H

#include <stddef.h>

#include <jansson.h>

#include "tenantd/status.h"

struct td__pod; /* admission/podres_internal.h */

/* The annotation LimitRanger sets on a pod it defaulted. */
#define TD_LIMITRANGE_ANNOTATION "kubernetes.io/limit-ranger"

/* The mutating half (PodMutateLimitFunc), for a pod being created: for each
 * LimitRange in order, sets every container's and init container's missing
 * limits from the type Container items' `default` and missing requests from
 * their `defaultRequest` (a later item overrides an earlier one), and, if it
 * set anything, the annotation "kubernetes.io/limit-ranger" to
 * "LimitRanger plugin set: cpu, memory request for container x; ..." (each
 * LimitRange that sets something replaces the annotation, as in
 * Kubernetes). Defaulted values are written in canonical quantity form.
 * TD_EINVAL (pod unchanged) for a malformed pod or LimitRange, with a
 * message naming the field; TD_ENOMEM (pod unchanged). Borrows all
 * arguments; modifies pod in place. limitranges may be NULL if n is 0. */
td_status td_limitrange_default(json_t *pod, json_t *const *limitranges, size_t n, td_err *err);

/* The validating half (PodValidateLimitFunc), run on the pod after
 * defaulting (td_pod_default_requests, td_limitrange_default): checks each
 * LimitRange in order and stops at the first that the pod violates. TD_OK;
 * TD_EFORBIDDEN with kube-apiserver's message, e.g. "minimum cpu usage per
 * Container is 100m, but request is 50m", several violations of one
 * LimitRange joined as Kubernetes' error aggregate does ("[a, b]",
 * duplicates dropped); TD_EINVAL for a malformed pod or LimitRange;
 * TD_ENOMEM. The message omits the `pods "NAME" is forbidden: ` prefix that
 * the API server puts before it. Borrows all arguments. */
td_status td_limitrange_validate(const json_t *pod, json_t *const *limitranges, size_t n,
                                 td_err *err);

/* LimitRanges parsed once (e.g. per config snapshot, see admindex.h) for
 * the functions below, which behave exactly as the ones above given the
 * same objects. Immutable once parsed: any number of threads may use one. */
typedef struct td_limitranges td_limitranges;

/* Parses n LimitRanges (borrowed; they must outlive *out). TD_EINVAL with
 * the message td_limitrange_default would give for a malformed one;
 * TD_ENOMEM. */
td_status td_limitranges_parse(json_t *const *limitranges, size_t n, td_limitranges **out,
                               td_err *err);
void td_limitranges_destroy(td_limitranges *lrs);

/* td_limitrange_default and td_limitrange_validate on parsed LimitRanges
 * (lrs may be NULL: none). parsed_pod (may be NULL) is td__pod_parse of
 * pod, made once by a caller that validates the same pod several times. */
td_status td_limitrange_default_parsed(json_t *pod, const td_limitranges *lrs, td_err *err);
td_status td_limitrange_validate_parsed(const json_t *pod, const struct td__pod *parsed_pod,
                                        const td_limitranges *lrs, td_err *err);

#endif
