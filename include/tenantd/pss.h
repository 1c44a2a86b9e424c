/* pss.h - Kubernetes Pod Security Standards (pod-security-admission) for a Pod.
 * Runs the "latest" checks of k8s.io/pod-security-admission/policy against a
 * v1 Pod held as jansson JSON and words a denial exactly as kube-apiserver
 * does. Pure logic: no I/O, no globals. */
#ifndef TENANTD_PSS_H
#define TENANTD_PSS_H

#include <jansson.h>

#include "tenantd/status.h"

typedef enum { TD_PSS_PRIVILEGED, TD_PSS_BASELINE, TD_PSS_RESTRICTED } td_pss_level;

/* Parses a pod-security.kubernetes.io level name: "privileged", "baseline"
 * or "restricted" (exact, lower case, as Kubernetes accepts them). TD_OK with
 * *out set; TD_EINVAL for anything else (including NULL), *out untouched. */
td_status td_pss_level_parse(const char *s, td_pss_level *out);

/* Checks pod (borrowed, not modified) against level at version "latest".
 *
 * TD_OK if the pod passes (always, for TD_PSS_PRIVILEGED and an object).
 * TD_EFORBIDDEN if a check fails, with err->msg set to what kube-apiserver
 * prints after `pods "NAME" is forbidden: `, e.g.
 *   violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true),
 *   privileged (container "x" must not set securityContext.privileged=true)
 * listing every failing check in Kubernetes' order. A message longer than
 * TD_ERR_MAX - 1 bytes is cut there.
 * TD_EINVAL if pod is not a JSON object, or a field a check reads has a type
 * that a v1 Pod cannot have (the API server would not decode it), with
 * err->msg naming the field, e.g. `spec.containers[0].securityContext.privileged:
 * expected a boolean`. JSON null is treated as an absent field, as Go does.
 * TD_ENOMEM if memory runs out. err may be NULL. */
td_status td_pss_check(const json_t *pod, td_pss_level level, td_err *err);

/* td_pss_check without its allowed-path walk: every check run and worded
 * in full. The same answer for every input; td_pss_check calls it for what
 * its walk cannot pass, tests and fuzz_pss to compare the two. */
td_status td__pss_check_full(const json_t *pod, td_pss_level level, td_err *err);

#endif
