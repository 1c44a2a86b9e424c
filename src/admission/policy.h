/* policy.h - tenantd's own admission rules, beside Kubernetes' plugins:
 * cost labels (team, project, environment), GPU node pools, and the
 * Priority plugin's PriorityClass resolution. Each rule is a pure function
 * of (snapshot, pod); mutations change the pod in place, validations return
 * TD_EFORBIDDEN with a message that names the rule and the object. */
#ifndef TENANTD_POLICY_H
#define TENANTD_POLICY_H

#include <jansson.h>

#include "core/config.h"
#include "tenantd/status.h"

/* Fills missing required labels from the Namespace's labels, then from the
 * namespace's Tenant's spec.labels (when the policy's
 * inheritLabelsFromNamespace is true, the default). */
td_status td_labels_mutate(const td_config *cfg, const char *ns, json_t *pod, td_err *err);

/* TD_EFORBIDDEN naming the first required label the pod still lacks. */
td_status td_labels_validate(const td_config *cfg, const char *ns, const json_t *pod,
                             td_err *err);

/* true if the pod asks for a GPU (or another extended resource a NodePool
 * provides) in any container's requests or limits. */
int td_pools_pod_wants_accelerator(const td_config *cfg, const json_t *pod);

/* For a pod that asks for a GPU and selects no pool yet: adds the
 * tolerations and node selector (or node affinity, when several pools are
 * allowed) of the NodePools its tenant may use. */
td_status td_pools_mutate(const td_config *cfg, const char *ns, json_t *pod, td_err *err);

/* TD_EFORBIDDEN if the pod tolerates or selects a NodePool its tenant may
 * not use, or asks for a GPU with no pool allowed. */
td_status td_pools_validate(const td_config *cfg, const char *ns, const json_t *pod, td_err *err);

/* Kubernetes' Priority plugin: resolves spec.priorityClassName (or the
 * global default class) to spec.priority and spec.preemptionPolicy.
 * TD_EFORBIDDEN for an unknown class or a conflicting spec.priority. */
td_status td_priority_mutate(const td_config *cfg, json_t *pod, td_err *err);

/* kube-apiserver's ResourceQuota admission with limitedResources
 * (AdmissionPolicy spec.resourceQuota.limitedResources, entries of
 * resource pods): TD_OK unless a matchScopes PriorityClass expression
 * matches the class name (NULL or "": none) and no ResourceQuota of ns has
 * a PriorityClass scope selecting it; then TD_EFORBIDDEN "insufficient
 * quota to match these scopes: [{PriorityClass In [X]}]". */
td_status td_priority_class_usable(const td_config *cfg, const char *ns, const char *name,
                                   td_err *err);

/* The Priority plugin for a submitted Kueue Workload (borrowed, not
 * changed: the batch queue computes the same value from the class at every
 * pass). Its class, as the queue reads it: spec.priorityClassName (a
 * WorkloadPriorityClass with priorityClassSource
 * kueue.x-k8s.io/workloadpriorityclass, else a PriorityClass), the label
 * kueue.x-k8s.io/priority-class (a WorkloadPriorityClass), the first pod
 * set's priorityClassName, else the globalDefault PriorityClass, else 0.
 * Refuses, TD_EFORBIDDEN with kube-apiserver's words:
 *   an unknown class: "no PriorityClass with name X was found";
 *   a class the namespace may not use: AdmissionPolicy
 *     spec.resourceQuota.limitedResources (ResourceQuotaConfiguration's
 *     field: entries of resource pods, matchScopes on PriorityClass) that
 *     match the class, with no ResourceQuota in the Workload's namespace
 *     whose scopeSelector matches it: "insufficient quota to match these
 *     scopes: [{PriorityClass In [X]}]";
 *   a spec.priority that is not the class's value: "the integer value of
 *     priority (N) must not be provided in workload spec; priority
 *     admission controller computed M from the given PriorityClass name".
 * TD_EINVAL "spec.priority: must be an integer in [...], not V" for a value
 * that is no int32 (it would wrap). */
td_status td_priority_workload(const td_config *cfg, const json_t *wl, td_err *err);

/* Kubernetes' toleration semantics (v1.Toleration.ToleratesTaint). */
int td_toleration_tolerates(const json_t *toleration, const char *key, const char *value,
                            const char *effect);

#endif
