/* pss.h - Kubernetes Pod Security Standards (pod-security-admission) for a Pod.
 * Runs the checks of k8s.io/pod-security-admission/policy, at "latest" or at
 * a pinned policy version v1.X (each check as of the version it applies
 * from), against a v1 Pod held as jansson JSON and words a denial exactly
 * as kube-apiserver does. Pure logic: no I/O, no globals. */
#ifndef TENANTD_PSS_H
#define TENANTD_PSS_H

#include <jansson.h>

#include "tenantd/status.h"

typedef enum { TD_PSS_PRIVILEGED, TD_PSS_BASELINE, TD_PSS_RESTRICTED } td_pss_level;

/* Parses a pod-security.kubernetes.io level name: "privileged", "baseline"
 * or "restricted" (exact, lower case, as Kubernetes accepts them). TD_OK with
 * *out set; TD_EINVAL for anything else (including NULL), *out untouched. */
td_status td_pss_level_parse(const char *s, td_pss_level *out);

/* A policy version: the X of "v1.X", or TD_PSS_LATEST for "latest". */
#define TD_PSS_LATEST (-1L)

/* The newest policy version whose checks differ from the one before
 * (v1.37): every version from it on, "latest" included, runs the same
 * checks. */
#define TD_PSS_MAX_MINOR 37L

/* Parses a pod-security.kubernetes.io/<mode>-version value as api.ParseVersion
 * does: "latest", or "v1." then a minor with no leading zero ("v1.0",
 * "v1.25"; a minor past TD_PSS_MAX_MINOR is kept, and judged as it).
 * TD_OK with *minor set; TD_EINVAL for anything else (including NULL), with
 * *minor set to TD_PSS_LATEST, which is what the API server then uses. */
td_status td_pss_version_parse(const char *s, long *minor);

/* Writes "latest" or "v1.X" for minor into buf (room for 24 bytes). */
const char *td_pss_version_str(long minor, char buf[24]);

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

/* td_pss_check at policy version minor (TD_PSS_LATEST, or the X of v1.X):
 * the checks registered for that version, as policy/registry.go picks them
 * (a check as of the newest of its versions not after minor; one that
 * starts later is left out; a version past TD_PSS_MAX_MINOR is judged as
 * TD_PSS_MAX_MINOR). The message names the version asked for:
 * `violates PodSecurity "restricted:v1.25": ...`. */
td_status td_pss_check_version(const json_t *pod, td_pss_level level, long minor, td_err *err);

/* What the allowed-path walk found in one pod, kept so that the levels and
 * versions one pod is checked at (a namespace's enforce, audit and warn)
 * walk it once. Zero it before the first call; it holds for that pod only,
 * unchanged. */
typedef struct {
    unsigned bits[3];
    int slow, done;
} td_pss_walk;

/* td_pss_check_version, reading and filling *walk (not NULL). */
td_status td_pss_check_walk(const json_t *pod, td_pss_level level, long minor, td_pss_walk *walk,
                            td_err *err);

#endif
