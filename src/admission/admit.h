/* admit.h - one admission decision for one Pod, in kube-apiserver's order:
 * the API server's own defaulting, then mutation (LimitRange defaults,
 * PriorityClass, inherited cost labels, GPU pool tolerations), then
 * validation (LimitRange, Pod Security, cost labels, node pools,
 * ResourceQuota). The same function serves `tenantctl admit`, the webhook
 * and the daemon; it is pure: everything it reads is in its arguments. */
#ifndef TENANTD_ADMIT_H
#define TENANTD_ADMIT_H

#include <jansson.h>
#include <stdbool.h>

#include "core/config.h"
#include "tenantd/status.h"

typedef struct {
    /* Pods already in the namespace (a quota's "used"); borrowed. When
     * has_used is false, Pods of the snapshot are used instead, and a quota
     * with no pods to count falls back to its status.used. */
    json_t *const *used_pods;
    size_t nused;
    bool has_used;
    /* Skip ResourceQuota (e.g. on UPDATE, where k8s charges only deltas). */
    bool skip_quota;
    /* Record every step in r->trace (costs a copy of the pod per mutating
     * step): `tenantctl explain pod`. */
    bool trace;
    /* The caller will not send r->patch (the validating endpoint): the
     * diff is not made and r->patch stays NULL. The decision is the same,
     * except that a pod whose mutated JSON has a JSON Pointer too long to
     * write in a patch (over 4 KiB) is decided instead of answered 400. */
    bool no_patch;
    /* The pod comes from the API server, which has defaulted it already
     * (an AdmissionReview's request.object): the defaulting it does
     * (SetDefaults_Volume) is not done again. The resources' defaulting
     * runs either way. */
    bool api_defaulted;
} td_admit_opts;

typedef struct {
    bool allowed;
    int code;              /* 200 allowed, 403 denied, 400 bad input */
    const char *rule;      /* which rule decided: "LimitRange", "PodSecurity", ... */
    char message[TD_ERR_MAX];
    bool validating;       /* the decision was made after mutation succeeded */
    json_t *patch;         /* JSON Patch of the mutations (array); NULL if none */
    json_t *pod;           /* the pod after mutation; owned, but it shares the
                            * nodes no step changed with the input pod: read
                            * it, do not change it in place */
    /* Validating rules in shadow (AdmissionPolicy spec.enforcement) that
     * would have denied: [{"rule": R, "message": M}], or NULL. Owned. */
    json_t *shadowed;
    /* The answer's warnings and audit annotations besides shadow's, or
     * NULL; owned. Pod Security's warn and audit modes (the namespace's
     * pod-security.kubernetes.io/warn and audit labels, with their
     * versions) as kube-apiserver adds them: warnings ["would violate
     * PodSecurity \"L:V\": ..."], annotations
     * {"pod-security.kubernetes.io/audit-violations": ...,
     * "pod-security.kubernetes.io/error": ...}; for a workload, also
     * "tenantd: its pods would be denied by RULE: ..." (td_admit_workload). */
    json_t *warnings;
    json_t *audit_annotations;
    /* With opts->trace: one object per step in the order run:
     * {"phase": "mutate"|"validate", "step": RULE, "result": "changed" |
     *  "unchanged" | "passed" | "denied" | "shadow-denied" | "skipped",
     *  "changes": [JSONPatch ops] (mutate), "message": TEXT}. Owned. */
    json_t *trace;
} td_admit_result;

/* The rule names a decision can carry, which are also the keys of
 * AdmissionPolicy spec.enforcement (validating rules only may be shadowed):
 * LimitRange, PodSecurity, CostLabels, NodePool, Sandbox, Storage,
 * ResourceQuota. NULL-terminated. */
extern const char *const td_admit_validating_rules[];

/* Decides pod (borrowed) in namespace ns (NULL: the pod's own, else
 * "default"). Always fills r (call td_admit_result_fini); returns TD_OK for a
 * decision (allowed or denied) and TD_EINVAL for bad input, with r->code 400
 * and the reason in r->message. */
td_status td_admit_pod(const td_config *cfg, const json_t *pod, const char *ns,
                       const td_admit_opts *opts, td_admit_result *r);

void td_admit_result_fini(td_admit_result *r);

/* Decides a PersistentVolumeClaim (borrowed) in ns (NULL: its own, else
 * "default"): the StorageClass rule of tenancy.h. Validation only, so
 * r->patch stays NULL. Returns as td_admit_pod does. */
td_status td_admit_pvc(const td_config *cfg, const json_t *pvc, const char *ns,
                       td_admit_result *r);

/* Whether kind is a workload whose pod template Pod Security reads
 * (CronJob, DaemonSet, Deployment, Job, PodTemplate, ReplicaSet,
 * ReplicationController, StatefulSet). */
bool td_admit_is_workload(const char *kind);

/* A workload (borrowed) of kind (NULL: its own kind; an AdmissionReview's
 * request.kind.kind otherwise) in ns (NULL: its own, else "default"), as the API
 * server's PodSecurity admits pod controllers: never denied; its pod
 * template (defaulted as a template is) gets the namespace's warn and audit
 * Pod Security modes, into r->warnings and r->audit_annotations (a namespace
 * that enforces a level and labels no warn level warns at the enforced
 * one). A workload without a template gets nothing. Returns as
 * td_admit_pod does: TD_EINVAL (400) for an object that is not a workload
 * kind. */
td_status td_admit_workload(const td_config *cfg, const json_t *obj, const char *kind,
                            const char *ns, td_admit_result *r);

typedef enum { TD_REVIEW_MUTATE_AND_VALIDATE, TD_REVIEW_MUTATE, TD_REVIEW_VALIDATE } td_review_mode;

/* Decides an AdmissionReview v1 request, or a bare Pod, and builds the
 * AdmissionReview v1 response (uid echoed; allowed; status.code/message;
 * patchType JSONPatch and base64 patch when it mutates and mode allows).
 * Never fails on bad input: that is a response with allowed=false and code
 * 400. *out is new; *allowed and *code summarise it. TD_ENOMEM only. */
td_status td_admission_review(const td_config *cfg, const json_t *input, td_review_mode mode,
                              const td_admit_opts *opts, json_t **out, int *code);

/* What an answer says, for counting decisions without reading it back. */
typedef struct {
    bool allowed;
    const char *rule; /* response.status.details.kind of a denial, or NULL */
    /* The rules of the answer's auditAnnotations "tenantd.dev/shadow-RULE",
     * as entries of td_admit_validating_rules (static). */
    const char *shadow[8];
    size_t nshadow;
} td_review_summary;

/* td_admission_review, written out: *body (malloc'd, NUL-terminated, *len
 * bytes; the caller frees it) is exactly json_dumps(out, JSON_COMPACT) of
 * td_admission_review's *out for the same arguments, made without the
 * tree; *code as there; *sum (may be NULL) what it says. TD_ENOMEM only,
 * when td_admission_review fails too; nothing is allocated then. */
td_status td_admission_review_body(const td_config *cfg, const json_t *input, td_review_mode mode,
                                   const td_admit_opts *opts, char **body, size_t *len, int *code,
                                   td_review_summary *sum);

/* The compact answer to a body that is not a review at all: uid "",
 * allowed false, status {code 400, message, reason BadRequest}. *body as
 * above; TD_ENOMEM also when message is not UTF-8. */
td_status td_admission_review_reject_body(const char *message, char **body, size_t *len);

/* Base64 (standard alphabet, padded) of n bytes; a new string or NULL. */
char *td_base64_encode(const unsigned char *data, size_t n);

#endif
