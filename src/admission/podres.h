/* podres.h - resource arithmetic on v1 Pods (jansson objects), shared by the
 * LimitRanger and ResourceQuota admission plugins: kube-apiserver's request
 * defaulting (SetDefaults_Pod) and the effective pod requests and limits as
 * k8s.io/component-helpers/resource PodRequests/PodLimits compute them. */
#ifndef TENANTD_PODRES_H
#define TENANTD_PODRES_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "core/resources.h"
#include "tenantd/status.h"

/* kube-apiserver's own defaulting of a Pod's resources: for every container
 * and init container with a limit and no request for a resource, sets the
 * request to the limit (the JSON value is copied as written). Then, when
 * spec.resources.limits (pod-level resources) is set, defaults missing
 * pod-level cpu/memory requests to the containers' aggregate requests, and
 * any still missing supported pod-level request to the pod-level limit.
 * TD_EINVAL (pod unchanged) if a quantity does not parse or a field has the
 * wrong JSON type, with a message naming the field; TD_ENOMEM (pod
 * unchanged). Borrows pod and modifies it in place. */
td_status td_pod_default_requests(json_t *pod, td_err *err);

/* The pod's effective requests and limits as Kubernetes computes them for
 * quota (PodRequests/PodLimits with spec resources only): per resource the
 * larger of the sum over app containers plus restartable (sidecar) init
 * containers and the largest init container (an init container counts with
 * the sidecars started before it); pod-level spec.resources, where set,
 * replace cpu, memory and hugepages-*; spec.overhead is added to the
 * requests and to each limit that is set and non-zero. requests and limits must be
 * initialised (td_resources_init); they are cleared and filled. TD_EINVAL
 * for a malformed pod (message names the field), TD_ENOMEM; on failure both
 * lists are left empty. Borrows pod. */
td_status td_pod_requests_limits(const json_t *pod, td_resources *requests, td_resources *limits,
                                 td_err *err);

#endif
