/* policy.h - tenantd's own admission rules, beside Kubernetes' plugins:
 * cost labels (team, project, environment), GPU node pools, and the
 * Priority plugin's PriorityClass resolution. Each rule is a pure function
 * of (snapshot, pod); mutations change the pod in place, validations return
 * TD_EFORBIDDEN with a message that names the rule and the object. */
#ifndef TENANTD_POLICY_H
#define TENANTD_POLICY_H

#include <jansson.h>

#include "tenantd/config.h"
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

/* Kubernetes' toleration semantics (v1.Toleration.ToleratesTaint). */
int td_toleration_tolerates(const json_t *toleration, const char *key, const char *value,
                            const char *effect);

#endif
