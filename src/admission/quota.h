/* quota.h - Kubernetes' ResourceQuota admission for Pods: a port of the
 * pod evaluator (pkg/quota/v1/evaluator/core/pods.go), the resource-list
 * helpers (pkg/quota/v1/resources.go) and the admission check
 * (k8s.io/apiserver/pkg/admission/plugin/resourcequota/controller.go),
 * with Kubernetes' messages. Objects are v1 JSON as jansson values. */
#ifndef TENANTD_QUOTA_H
#define TENANTD_QUOTA_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "core/validate.h"
#include "tenantd/status.h"

struct td__pod; /* admission/podres_internal.h */

/* Decides whether creating pod fits every ResourceQuota in quotas (all of
 * them apply: the caller passes only the pod's namespace's quotas, in the
 * order the API server lists them).
 *
 * A quota applies if it tracks a resource pods use (cpu, memory,
 * ephemeral-storage with or without requests./limits., pods, count/pods,
 * hugepages-*, requests.<extended resource>) and the pod matches all its
 * scopes (spec.scopes and spec.scopeSelector.matchExpressions: Terminating,
 * NotTerminating, BestEffort, NotBestEffort, PriorityClass with In, NotIn,
 * Exists, DoesNotExist, CrossNamespacePodAffinity).
 *
 * Usage already charged to a quota: if used_pods is NULL, its status.used
 * (as kube-apiserver does), with hard limits from status.hard (spec.hard if
 * status.hard is absent); otherwise the sum of the usage of the nused
 * used_pods that match the quota's scopes (pods in phase Succeeded or
 * Failed count only towards count/pods), with hard limits from spec.hard
 * (status.hard if spec.hard is absent). used_pods must not include pod.
 *
 * pod is taken as given: run td_pod_default_requests and the LimitRange
 * defaulting first, as the API server does before quota admission.
 *
 * TD_OK if admitted. TD_EFORBIDDEN with Kubernetes' message otherwise:
 *   "failed quota: NAME: must specify limits.memory for: app; ..." when a
 *     quota tracks cpu or memory and a container does not set it (checked
 *     for every quota before any usage is compared);
 *   "status unknown for quota: NAME, resources: ..." (used_pods NULL only);
 *   "quota usage is negative for resource(s): ...";
 *   "exceeded quota: NAME, requested: cpu=2, used: cpu=1, limited: cpu=2"
 *     for the first quota, in order, that the pod would exceed.
 * TD_EINVAL for a malformed pod, quota or used pod (message names the
 * object and field); TD_ENOMEM. The messages omit the API server's
 * `pods "NAME" is forbidden: ` prefix. Borrows all arguments. */
td_status td_quota_check(const json_t *pod, json_t *const *quotas, size_t nquotas,
                         json_t *const *used_pods, size_t nused, td_err *err);

/* ResourceQuotas parsed once (e.g. per config snapshot, see admindex.h).
 * A parse is for one source of usage: from_status true for
 * td_quota_check_parsed with used_pods NULL, false otherwise. Immutable
 * once parsed: any number of threads may use one. */
typedef struct td_quotas td_quotas;

/* Parses nquotas ResourceQuotas (borrowed; they must outlive *out).
 * TD_EINVAL with td_quota_check's message for a malformed one; TD_ENOMEM. */
td_status td_quotas_parse(json_t *const *quotas, size_t nquotas, bool from_status,
                          td_quotas **out, td_err *err);
void td_quotas_destroy(td_quotas *qs);

/* td_quota_check on parsed quotas (NULL: none); qs must have been parsed
 * with from_status == (used_pods == NULL), else TD_EINVAL. parsed_pod (may
 * be NULL) is td__pod_parse of pod, made once by the caller. */
td_status td_quota_check_parsed(const json_t *pod, const struct td__pod *parsed_pod,
                                const td_quotas *qs, json_t *const *used_pods, size_t nused,
                                td_err *err);

/* The config's validation of a ResourceQuota (its td_kind_def validator):
 * the parse td_quotas_parse and td_quota_check run, over every side
 * (spec.hard, status.hard, status.used), plus the API server's rules:
 * spec.hard not negative, known scopes, scope selector requirements as
 * td_quota_validate_scope_exprs. So a quota in a snapshot always parses
 * for admission, and each mistake has one message, as
 * "FILE:LINE: ResourceQuota NS/NAME: FIELD: MSG"; td_quota_check says the
 * same as "ResourceQuota \"NAME\": FIELD: MSG". Fails through td_vfail. */
td_status td_quota_validate(td_vctx *v);

/* The API server's rules on the scope selector requirements exprs (a list
 * or NULL; base names it in messages): known scopeName, an operator of In,
 * NotIn, Exists, DoesNotExist, values only and at least one with In and
 * NotIn, only Exists or DoesNotExist for scopes other than PriorityClass.
 * For a quota's scopeSelector and AdmissionPolicy's limitedResources. */
td_status td_quota_validate_scope_exprs(td_vctx *v, const json_t *exprs, const char *base);

#endif
