/* admit.c - the admission pipeline and its AdmissionReview v1 envelope.
 * The order follows kube-apiserver: defaulting, then every mutating step,
 * then every validating step; the first denial ends the decision, as the
 * first failing plugin does in the API server. */
#include "admission/admit.h"

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission/admindex.h"
#include "admission/apparmor_internal.h"
#include "core/jsondump.h"
#include "core/jsonpatch.h"
#include "admission/limitrange_internal.h"
#include "admission/podres_internal.h"
#include "admission/policy.h"
#include "admission/pss.h"
#include "admission/quota.h"
#include "admission/tenancy_internal.h"

void td_admit_result_fini(td_admit_result *r)
{
    if (!r)
        return;
    json_decref(r->patch);
    json_decref(r->pod);
    json_decref(r->shadowed);
    json_decref(r->trace);
    json_decref(r->warnings);
    json_decref(r->audit_annotations);
    r->warnings = NULL;
    r->audit_annotations = NULL;
    r->patch = NULL;
    r->pod = NULL;
    r->shadowed = NULL;
    r->trace = NULL;
}

/* The enforcement of a validating rule: AdmissionPolicy spec.enforcement
 * is "enforce" | "shadow" for every rule, or a mapping rule -> mode. */
static bool rule_shadowed(const td_config *cfg, const char *rule)
{
    json_t *e = td_json_path(td_config_admission_policy(cfg), "spec.enforcement");
    const char *mode = json_is_string(e) ? json_string_value(e)
                                         : json_string_value(json_object_get(e, rule));
    return mode && strcmp(mode, "shadow") == 0;
}

/* One step's line of the trace (when tracing). */
static void trace_step(td_admit_result *r, const char *phase, const char *rule, const char *result,
                       json_t *changes, const char *message)
{
    if (!r->trace) {
        json_decref(changes);
        return;
    }
    json_t *o = json_pack("{s:s, s:s, s:s}", "phase", phase, "step", rule, "result", result);
    if (o && changes)
        json_object_set_new(o, "changes", changes);
    else
        json_decref(changes);
    if (o && message && *message)
        json_object_set_new(o, "message", json_string(message));
    json_array_append_new(r->trace, o);
}

/* After a validating step: a denial by a rule in shadow is noted and the
 * decision goes on; every outcome is traced. */
static td_status after_validate(const td_config *cfg, td_admit_result *r, const char *rule,
                                td_status st, td_err *err)
{
    if (st == TD_EFORBIDDEN && rule_shadowed(cfg, rule)) {
        if (!r->shadowed)
            r->shadowed = json_array();
        json_array_append_new(r->shadowed,
                              json_pack("{s:s, s:s}", "rule", rule, "message", err->msg));
        trace_step(r, "validate", rule, "shadow-denied", NULL, err->msg);
        return TD_OK;
    }
    trace_step(r, "validate", rule, st == TD_OK ? "passed" : "denied", NULL,
               st == TD_OK ? NULL : err->msg);
    return st;
}

static void decide(td_admit_result *r, td_status st, const char *rule, const td_err *err)
{
    r->rule = rule;
    if (st == TD_OK) {
        r->allowed = true;
        r->code = 200;
        r->message[0] = '\0';
        return;
    }
    r->allowed = false;
    r->code = st == TD_EFORBIDDEN ? 403 : st == TD_ENOMEM ? 500 : 400;
    snprintf(r->message, sizeof r->message, "%s", err->msg);
}

/* A Pod Security level at a policy version (api.LevelVersion). */
typedef struct {
    td_pss_level level;
    long minor; /* TD_PSS_LATEST or the X of v1.X */
} pss_lv;

/* The namespace's Pod Security policy (api.PolicyToEvaluate): enforce,
 * audit and warn, each privileged:latest unless labelled; warn follows an
 * enforce level above it when no warn label is set. error: the labels that
 * did not parse, as the API server's "Failed to parse policy: " audit
 * annotation words them, or "". */
typedef struct {
    pss_lv enforce, audit, warn;
    bool more; /* any label but enforce: audit and warn need a look */
    char error[768];
} pss_policy;

static int pss_rank(td_pss_level l)
{
    return l == TD_PSS_PRIVILEGED ? 0 : l == TD_PSS_BASELINE ? 1 : 2;
}

/* LevelVersion.Equivalent, as EvaluatePod's result cache keys on it */
static bool pss_same(const pss_lv *a, const pss_lv *b)
{
    return a->level == b->level && (a->level == TD_PSS_PRIVILEGED || a->minor == b->minor);
}

/* One label that did not parse, in field.Invalid's words (label values are
 * [A-Za-z0-9._-], so %q quotes them as plain "..."), joined as an
 * aggregate of several is: "[a, b]" (the brackets added by the caller). */
static void pss_bad_label(pss_policy *p, int *nbad, const char *label, const char *value,
                          const char *why)
{
    size_t len = strlen(p->error);
    snprintf(p->error + len, sizeof p->error - len,
             "%smetadata.labels[pod-security.kubernetes.io/%s]: Invalid value: \"%s\": %s",
             (*nbad)++ ? ", " : "", label, value, why);
}

static td_status pss_policy_of(const td_config *cfg, const char *ns, pss_policy *p, td_err *err)
{
    /* the Namespace's metadata.labels, found once per snapshot (tenancy
     * index; td_config_get and td_json_path for a namespace not in it) */
    td__tenancy_ns spare;
    const td__tenancy_ns *tn = td__tenancy_ns_get(td__tenancy_index_get(cfg), cfg, ns, &spare);
    const json_t *labels = tn->ns_labels;
    const char *l =
        json_string_value(json_object_get(labels, "pod-security.kubernetes.io/enforce"));
    static const char must_level[] = "must be one of privileged, baseline, restricted";
    static const char must_version[] = "must be \"latest\" or \"v1.x\"";
    int nbad = 0;

    p->enforce = p->audit = p->warn = (pss_lv){TD_PSS_PRIVILEGED, TD_PSS_LATEST};
    p->more = tn->pss_more;
    p->error[0] = '\0';
    /* An enforce level that does not parse is refused outright (the API
     * server would fall back to restricted): a namespace's policy typed
     * wrong is loud. */
    if (l && td_pss_level_parse(l, &p->enforce.level) != TD_OK)
        return td_err_set(err, TD_EINVAL,
                          "namespace %s: label pod-security.kubernetes.io/enforce: \"%s\" is not "
                          "privileged, baseline or restricted",
                          ns, l);
    if (!p->more) {
        p->warn.level = p->enforce.level; /* and latest, as enforce is */
        return TD_OK;
    }
    const char *v;
    bool has_warn = false, has_warn_version = false;
    if ((v = json_string_value(json_object_get(labels, "pod-security.kubernetes.io/enforce-version"))) &&
        td_pss_version_parse(v, &p->enforce.minor) != TD_OK)
        pss_bad_label(p, &nbad, "enforce-version", v, must_version);
    if ((v = json_string_value(json_object_get(labels, "pod-security.kubernetes.io/audit"))) &&
        td_pss_level_parse(v, &p->audit.level) != TD_OK) {
        p->audit.level = TD_PSS_PRIVILEGED; /* fail open for audit */
        pss_bad_label(p, &nbad, "audit", v, must_level);
    }
    if ((v = json_string_value(json_object_get(labels, "pod-security.kubernetes.io/audit-version"))) &&
        td_pss_version_parse(v, &p->audit.minor) != TD_OK)
        pss_bad_label(p, &nbad, "audit-version", v, must_version);
    if ((v = json_string_value(json_object_get(labels, "pod-security.kubernetes.io/warn")))) {
        has_warn = true;
        if (td_pss_level_parse(v, &p->warn.level) != TD_OK) {
            p->warn.level = TD_PSS_PRIVILEGED; /* fail open for warn */
            pss_bad_label(p, &nbad, "warn", v, must_level);
        }
    }
    if ((v = json_string_value(json_object_get(labels, "pod-security.kubernetes.io/warn-version")))) {
        has_warn_version = true;
        if (td_pss_version_parse(v, &p->warn.minor) != TD_OK)
            pss_bad_label(p, &nbad, "warn-version", v, must_version);
    }
    if (!has_warn && l && pss_rank(p->enforce.level) > pss_rank(p->warn.level)) {
        p->warn.level = p->enforce.level;
        if (!has_warn_version)
            p->warn.minor = p->enforce.minor;
    }
    if (nbad > 1) {
        /* utilerrors.Aggregate of several: "[a, b]" */
        size_t len = strlen(p->error);
        if (len + 3 <= sizeof p->error) {
            memmove(p->error + 1, p->error, len + 1);
            p->error[0] = '[';
            p->error[len + 1] = ']';
            p->error[len + 2] = '\0';
        }
    }
    return TD_OK;
}

/* Evaluates lv for the warn or audit mode: TD_OK (passes, or the pod is
 * not one the checks can read), TD_EFORBIDDEN with the message in *e, or
 * TD_ENOMEM. */
static td_status pss_eval(const json_t *pod, const pss_lv *lv, td_pss_walk *walk, td_err *e)
{
    if (lv->level == TD_PSS_PRIVILEGED)
        return TD_OK;
    td_status st = td_pss_check_walk(pod, lv->level, lv->minor, walk, e);
    return st == TD_EFORBIDDEN || st == TD_ENOMEM ? st : TD_OK;
}

/* Adds text to an array (key NULL) or an object; text cut (by snprintf)
 * off a UTF-8 boundary is cut back to one first. 0, or -1 out of memory. */
static int note_set(json_t *to, const char *key, char *text)
{
    size_t n = strlen(text);
    while (n > 0 && !td_utf8_valid(text, n))
        text[--n] = '\0';
    json_t *s = json_string(text);
    if (!s)
        return -1;
    return key ? json_object_set_new(to, key, s) : json_array_append_new(to, s);
}

/* The warn and audit modes of the namespace's policy (EvaluatePod): audit
 * is evaluated always, warn only when enforce allowed the pod; a result is
 * reused when the level and version are enforce's (or audit's). enforce_st
 * and enforce_msg: enforce's outcome; enforced false: a workload's pod
 * template, which enforce does not judge (EvaluatePod with enforce=false).
 * Sets r->warnings and r->audit_annotations. TD_OK or TD_ENOMEM. */
static td_status pss_notes(td_admit_result *r, const json_t *pod, const pss_policy *p,
                           td_pss_walk *walk, bool enforced, td_status enforce_st,
                           const char *enforce_msg)
{
    static const char violates[] = "violates";
    td_err audit_err, warn_err;
    td_status audit_st, warn_st = TD_OK;
    const char *audit_msg = audit_err.msg, *warn_msg = warn_err.msg;

    if (enforce_st != TD_OK && enforce_st != TD_EFORBIDDEN)
        return TD_OK; /* the pod did not decode: nothing to say */
    if (enforced && p->enforce.level != TD_PSS_PRIVILEGED && pss_same(&p->audit, &p->enforce)) {
        audit_st = enforce_st;
        audit_msg = enforce_msg;
    } else if ((audit_st = pss_eval(pod, &p->audit, walk, &audit_err)) == TD_ENOMEM) {
        return TD_ENOMEM;
    }
    if (enforce_st == TD_OK) {
        if (enforced && pss_same(&p->warn, &p->enforce))
            warn_st = TD_OK; /* enforce passed it */
        else if (pss_same(&p->warn, &p->audit)) {
            warn_st = audit_st;
            warn_msg = audit_msg;
        } else if ((warn_st = pss_eval(pod, &p->warn, walk, &warn_err)) == TD_ENOMEM)
            return TD_ENOMEM;
    }
    if (p->error[0] || audit_st == TD_EFORBIDDEN) {
        char buf[TD_ERR_MAX + 32];
        if (!r->audit_annotations && !(r->audit_annotations = json_object()))
            return TD_ENOMEM;
        if (audit_st == TD_EFORBIDDEN) {
            snprintf(buf, sizeof buf, "would violate%s", audit_msg + sizeof violates - 1);
            if (note_set(r->audit_annotations, "pod-security.kubernetes.io/audit-violations", buf) != 0)
                return TD_ENOMEM;
        }
        if (p->error[0]) {
            snprintf(buf, sizeof buf, "Failed to parse policy: %s", p->error);
            if (note_set(r->audit_annotations, "pod-security.kubernetes.io/error", buf) != 0)
                return TD_ENOMEM;
        }
    }
    if (warn_st == TD_EFORBIDDEN) {
        char buf[TD_ERR_MAX + 32];
        snprintf(buf, sizeof buf, "would violate%s", warn_msg + sizeof violates - 1);
        if (!(r->warnings = json_array()) || note_set(r->warnings, NULL, buf) != 0)
            return TD_ENOMEM;
    }
    return TD_OK;
}

/* Replaces parent[key], when an object or an array, with a shallow copy
 * of it (a new node whose members are shared). 0, or -1 out of memory. */
static int own(json_t *parent, const char *key)
{
    json_t *v = json_object_get(parent, key);
    if (!json_is_object(v) && !json_is_array(v))
        return 0;
    json_t *c = json_copy(v);
    return c && json_object_set_new_nocheck(parent, key, c) == 0 ? 0 : -1;
}

/* The pod's copy the mutating steps change: a new node for every node a
 * step writes in place, every other node shared with pod_in. The steps
 * write in place only into the pod, metadata, metadata.labels and
 * .annotations, spec, spec.nodeSelector, spec.tolerations (appending),
 * spec.affinity and spec.affinity.nodeAffinity; anything else they change
 * they replace with a node of their own (the resources steps copy the
 * containers they default, podres.c). A step that comes to write in place
 * elsewhere adds its node here: debug builds check that pod_in is left
 * as it was. Sharing keeps the copy, its teardown and the JSON Patch diff
 * (which skips a shared node at once) small. */
static json_t *pod_spine_copy(const json_t *pod_in)
{
    json_t *pod = json_copy((json_t *)pod_in);
    if (!pod || own(pod, "metadata") != 0 || own(pod, "spec") != 0)
        goto fail;
    json_t *meta = json_object_get(pod, "metadata");
    if (json_is_object(meta) && (own(meta, "labels") != 0 || own(meta, "annotations") != 0))
        goto fail;
    json_t *spec = json_object_get(pod, "spec");
    if (own(spec, "nodeSelector") != 0 || own(spec, "tolerations") != 0 ||
        own(spec, "affinity") != 0)
        goto fail;
    json_t *aff = json_object_get(spec, "affinity");
    if (json_is_object(aff) && own(aff, "nodeAffinity") != 0)
        goto fail;
    return pod;
fail:
    json_decref(pod);
    return NULL;
}

/* The members of a v1 VolumeSource, sorted bytewise. */
static const char *const volume_sources[] = {
    "awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "configMap", "csi",
    "downwardAPI", "emptyDir", "ephemeral", "fc", "flexVolume", "flocker", "gcePersistentDisk",
    "gitRepo", "glusterfs", "hostPath", "image", "iscsi", "nfs", "persistentVolumeClaim",
    "photonPersistentDisk", "portworxVolume", "projected", "quobyte", "rbd", "scaleIO", "secret",
    "storageos", "vsphereVolume"};

static int cmp_key(const void *k, const void *e)
{
    return strcmp(k, *(const char *const *)e);
}

/* Whether vol names a source: a VolumeSource member that is not null (Go
 * decodes null, and drops unknown members, to nil). */
static bool volume_has_source(const json_t *vol)
{
    /* json_object_iter_next, not json_object_foreach (which looks each key
     * up again): every review's volumes pass here */
    for (void *it = json_object_iter((json_t *)vol); it;
         it = json_object_iter_next((json_t *)vol, it)) {
        const char *k = json_object_iter_key(it);
        if (!json_is_null(json_object_iter_value(it)) && strcmp(k, "name") != 0 &&
            bsearch(k, volume_sources, sizeof volume_sources / sizeof volume_sources[0],
                    sizeof volume_sources[0], cmp_key))
            return true;
    }
    return false;
}

/* The API server's defaulting that the checks after it read, beyond the
 * resources (podres.c): SetDefaults_Volume (pkg/apis/core/v1/defaults.go)
 * makes a volume without a source an emptyDir, which restricted allows;
 * its pod create's AppArmor version skew (apparmor.c) copies the AppArmor
 * annotations and fields into each other, which Pod Security words.
 * An AdmissionReview's pods come defaulted already (opts->api_defaulted:
 * not done again); `tenantctl admit` of a bare pod gets them as written.
 * Copies spec.volumes and each volume it changes, and each container list
 * and container the skew changes (pod shares the rest with the caller's).
 * TD_OK or TD_ENOMEM. */
static td_status pod_api_defaults(json_t *pod, td_err *err)
{
    json_t *spec = json_object_get(pod, "spec");
    json_t *vols = json_object_get(spec, "volumes");
    size_t i;
    bool owned = false;

    for (i = 0; i < json_array_size(vols); i++) {
        json_t *vol = json_array_get(vols, i);
        if (!json_is_object(vol) || volume_has_source(vol))
            continue;
        if (!owned) {
            if (own(spec, "volumes") != 0)
                goto nomem;
            vols = json_object_get(spec, "volumes");
            owned = true;
        }
        json_t *copy = json_copy(vol);
        if (!copy || json_object_set_new(copy, "emptyDir", json_object()) != 0 ||
            json_array_set_new(vols, i, copy) != 0) {
            json_decref(copy);
            goto nomem;
        }
    }
    return td__pod_apparmor_skew(pod, err);
nomem:
    return td_err_set(err, TD_ENOMEM, "out of memory");
}

/* The workload kinds whose pod template Pod Security reads
 * (admission.go DefaultPodSpecExtractor), each with its template's path. */
static const struct {
    const char *kind, *path;
} workloads[] = {
    {"CronJob", "spec.jobTemplate.spec.template"},
    {"DaemonSet", "spec.template"},
    {"Deployment", "spec.template"},
    {"Job", "spec.template"},
    {"PodTemplate", "template"},
    {"ReplicaSet", "spec.template"},
    {"ReplicationController", "spec.template"},
    {"StatefulSet", "spec.template"},
};

static const char *workload_template_path(const char *kind)
{
    for (size_t i = 0; kind && i < sizeof workloads / sizeof workloads[0]; i++)
        if (strcmp(kind, workloads[i].kind) == 0)
            return workloads[i].path;
    return NULL;
}

bool td_admit_is_workload(const char *kind)
{
    return workload_template_path(kind) != NULL;
}

static void not_a_pod(const char *kind, td_err *err)
{
    if (td_admit_is_workload(kind))
        td_err_set(err, TD_EINVAL,
                   "kind %s is not a Pod; its pod template gets Pod Security warnings (tenantctl "
                   "admit, the webhook), not a decision",
                   kind);
    else
        td_err_set(err, TD_EINVAL,
                   "kind %s is not a Pod; tenantd decides Pods and PersistentVolumeClaims, and "
                   "warns on the pod templates of CronJob, DaemonSet, Deployment, Job, "
                   "PodTemplate, ReplicaSet, ReplicationController and StatefulSet",
                   kind);
}

td_status td_admit_workload(const td_config *cfg, const json_t *obj, const char *kind,
                            const char *ns, td_admit_result *r)
{
    td_err err = {{0}};
    td_status st;
    if (!kind)
        kind = td_json_str(obj, "kind");
    const char *path = workload_template_path(kind);
    memset(r, 0, sizeof *r);
    if (!json_is_object(obj) || !path) {
        if (json_is_object(obj) && kind)
            not_a_pod(kind, &err);
        else
            td_err_set(&err, TD_EINVAL, "not a workload: kind is required");
        decide(r, TD_EINVAL, "BadRequest", &err);
        return TD_EINVAL;
    }
    if (!ns || !*ns)
        ns = td_json_str(obj, "metadata.namespace");
    if (!ns || !*ns)
        ns = "default";
    r->validating = true;
    /* a controller without a template is not checked (ValidatePodController) */
    const json_t *tmpl = td_json_path(obj, path);
    if (!json_is_object(tmpl)) {
        decide(r, TD_OK, NULL, &err);
        return TD_OK;
    }
    pss_policy pss;
    st = pss_policy_of(cfg, ns, &pss, &err);
    if (st != TD_OK) {
        /* an enforce label that is no level refuses pods (td_admit_pod);
         * a workload is never refused, and with no level parsed warn
         * stays privileged (PolicyToEvaluate) */
        decide(r, st == TD_EINVAL ? TD_OK : st, st == TD_EINVAL ? NULL : "Internal", &err);
        return st == TD_EINVAL ? TD_OK : st;
    }
    /* what the template's pods are checked as: its metadata and spec,
     * defaulted as the API server defaults a template (SetDefaults_Volume) */
    json_t *pod = json_object();
    json_t *meta = json_object_get(tmpl, "metadata"), *spec = json_object_get(tmpl, "spec");
    bool nomem = !pod;
    if (!nomem && meta)
        nomem = json_object_set(pod, "metadata", meta) != 0;
    /* spec copied: the defaulting replaces its volumes */
    if (!nomem && spec)
        nomem = json_object_set_new(pod, "spec",
                                    json_is_object(spec) ? json_copy(spec) : json_incref(spec)) != 0;
    if (nomem || pod_api_defaults(pod, &err) != TD_OK) {
        json_decref(pod);
        td_err_set(&err, TD_ENOMEM, "out of memory");
        decide(r, TD_ENOMEM, "Internal", &err);
        return TD_ENOMEM;
    }
    /* warn and audit only: enforce is for the pods the controller makes */
    td_pss_walk walk = {{0, 0, 0}, 0, 0};
    st = pss_notes(r, pod, &pss, &walk, false, TD_OK, "");
    /* tenantd's own rules (cost labels, pools, sandbox, storage, ...) on
     * the pod the template makes, as a warning too: the controller's pods
     * would be refused one by one. Pod Security has spoken above, quota
     * counts pods, not templates. */
    if (st == TD_OK && json_is_array(td_json_path(pod, "spec.containers"))) {
        td_admit_opts o = {0};
        td_admit_result pr;
        o.skip_quota = o.no_patch = o.api_defaulted = true;
        td_status pst = td_admit_pod(cfg, pod, ns, &o, &pr);
        if (pst == TD_ENOMEM)
            st = TD_ENOMEM;
        else if (!pr.allowed && pr.code == 403 && pr.rule && strcmp(pr.rule, "PodSecurity") != 0) {
            char buf[TD_ERR_MAX + 64];
            snprintf(buf, sizeof buf, "tenantd: its pods would be denied by %s: %s", pr.rule,
                     pr.message);
            if ((!r->warnings && !(r->warnings = json_array())) ||
                note_set(r->warnings, NULL, buf) != 0)
                st = TD_ENOMEM;
        }
        td_admit_result_fini(&pr);
    }
    json_decref(pod);
    if (st != TD_OK) {
        td_err_set(&err, TD_ENOMEM, "out of memory checking Pod Security");
        decide(r, TD_ENOMEM, "Internal", &err);
        return TD_ENOMEM;
    }
    decide(r, TD_OK, NULL, &err);
    return TD_OK;
}

/* What the steps of one td_admit_pod decision share. */
typedef struct {
    const td_config *cfg;
    const td_admit_opts *opts;
    td_admit_result *r;
    const char *ns; /* ns_buf: the steps may replace the pod's strings */
    json_t *pod;    /* the copy the mutating steps change (r->pod) */
    /* The namespace's LimitRanges and ResourceQuotas, parsed (and listed)
     * once per snapshot; ix NULL: work from the JSON, listed here. */
    const td_admindex_ns *ix;
    json_t *const *ranges, *const *quotas;
    size_t nranges, nquotas;
    /* The pod's resources, parsed once by the defaults step, kept up to
     * date through the mutating steps, and read by validation. */
    td__pod vpod;
    bool vparsed;
    td_err err;
    char ns_buf[256];
} admit_ctx;

/* A step of the decision: a mutating step changes c->pod and returns TD_OK
 * or the error that ends the decision; a validating step judges c->pod and
 * returns what after_validate makes of its verdict (rule: its name). */
typedef td_status (*admit_fn)(admit_ctx *c, const char *rule);

typedef enum { PHASE_MUTATE, PHASE_VALIDATE } admit_phase;

typedef struct {
    admit_phase phase;
    const char *rule;
    admit_fn fn;
} admit_step;

static td_status mutate_defaults(admit_ctx *c, const char *rule)
{
    (void)rule;
    td_status st = c->opts->api_defaulted ? TD_OK : pod_api_defaults(c->pod, &c->err);
    if (st == TD_OK) {
        st = td__pod_default_requests_parsed(c->pod, &c->vpod, &c->err);
        c->vparsed = st == TD_OK;
    }
    return st;
}

static td_status mutate_limitrange(admit_ctx *c, const char *rule)
{
    (void)rule;
    /* the defaults step parsed the pod's resources and accepted them */
    return c->ix && c->ix->limitranges_ok
               ? td__limitrange_default_update(c->pod, c->ix->limitranges, &c->vpod, &c->err)
               : td_limitrange_default(c->pod, c->ranges, c->nranges, &c->err);
}

static td_status mutate_priority(admit_ctx *c, const char *rule)
{
    (void)rule;
    return td_priority_mutate(c->cfg, c->pod, &c->err);
}

static td_status mutate_labels(admit_ctx *c, const char *rule)
{
    (void)rule;
    return td_labels_mutate(c->cfg, c->ns, c->pod, &c->err);
}

static td_status mutate_pools(admit_ctx *c, const char *rule)
{
    (void)rule;
    return td_pools_mutate(c->cfg, c->ns, c->pod, &c->err);
}

static td_status mutate_sandbox(admit_ctx *c, const char *rule)
{
    (void)rule;
    return td_sandbox_mutate(c->cfg, c->ns, c->pod, &c->err);
}

static td_status validate_limitrange(admit_ctx *c, const char *rule)
{
    td_status st = c->vparsed && c->ix->limitranges_ok
                       ? td_limitrange_validate_parsed(c->pod, &c->vpod, c->ix->limitranges,
                                                       &c->err)
                       : td_limitrange_validate(c->pod, c->ranges, c->nranges, &c->err);
    return after_validate(c->cfg, c->r, rule, st, &c->err);
}

/* enforce decides; audit and warn add their notes to c->r. A namespace
 * label that does not parse ends the decision before any verdict. */
static td_status validate_podsecurity(admit_ctx *c, const char *rule)
{
    pss_policy pss;
    td_status st = pss_policy_of(c->cfg, c->ns, &pss, &c->err);
    if (st != TD_OK)
        return st;
    /* one walk of the pod serves enforce, audit and warn */
    td_pss_walk walk = {{0, 0, 0}, 0, 0};
    st = td_pss_check_walk(c->pod, pss.enforce.level, pss.enforce.minor, &walk, &c->err);
    if (pss.more && pss_notes(c->r, c->pod, &pss, &walk, true, st, c->err.msg) != TD_OK)
        st = td_err_set(&c->err, TD_ENOMEM, "out of memory checking Pod Security");
    return after_validate(c->cfg, c->r, rule, st, &c->err);
}

static td_status validate_labels(admit_ctx *c, const char *rule)
{
    return after_validate(c->cfg, c->r, rule, td_labels_validate(c->cfg, c->ns, c->pod, &c->err),
                          &c->err);
}

static td_status validate_pools(admit_ctx *c, const char *rule)
{
    return after_validate(c->cfg, c->r, rule, td_pools_validate(c->cfg, c->ns, c->pod, &c->err),
                          &c->err);
}

static td_status validate_sandbox(admit_ctx *c, const char *rule)
{
    return after_validate(c->cfg, c->r, rule,
                          td_sandbox_validate(c->cfg, c->ns, c->pod, &c->err), &c->err);
}

static td_status validate_storage(admit_ctx *c, const char *rule)
{
    return after_validate(c->cfg, c->r, rule,
                          td_storage_validate_pod(c->cfg, c->ns, c->pod, &c->err), &c->err);
}

/* The pods a quota check counts as used: the caller's (opts->has_used), else
 * the snapshot's; with none, a quota's own status.used (as `kubectl get
 * quota -o yaml` shows it) counts (*pods NULL), and a namespace with
 * neither starts from zero. */
static void quota_used_pods(admit_ctx *c, json_t *const **pods, size_t *npods)
{
    static json_t *const no_pods[1] = {NULL};
    if (c->opts->has_used) {
        *pods = c->opts->used_pods;
        *npods = c->opts->nused;
        return;
    }
    if (c->ix)
        *pods = c->ix->pods, *npods = c->ix->npods;
    else
        *npods = td_config_list(c->cfg, "Pod", c->ns, pods);
    int have_status = 0;
    if (c->ix)
        have_status = c->ix->quota_status_used;
    else
        for (size_t i = 0; i < c->nquotas; i++)
            have_status |= td_json_path(c->quotas[i], "status.used") != NULL;
    if (!*npods)
        *pods = have_status ? NULL : no_pods;
}

/* limitedResources first: a limited class needs a quota selecting it in
 * the namespace, checked before any usage (CheckRequest's order); then the
 * usage, unless the caller skips quota (it charges creations only). */
static td_status validate_quota(admit_ctx *c, const char *rule)
{
    const td_admit_opts *o = c->opts;
    td_status st;
    if (!o->skip_quota) {
        st = td_priority_class_usable(c->cfg, c->ns, td_json_str(c->pod, "spec.priorityClassName"),
                                      &c->err);
        if (st != TD_OK && (st = after_validate(c->cfg, c->r, rule, st, &c->err)) != TD_OK)
            return st;
    }
    if (o->skip_quota || !c->nquotas) {
        trace_step(c->r, "validate", rule, "skipped", NULL,
                   o->skip_quota ? "quota charges creations only"
                                 : "no ResourceQuota in the namespace");
        return TD_OK;
    }
    json_t *const *pods;
    size_t npods;
    quota_used_pods(c, &pods, &npods);
    int from_status = pods == NULL;
    st = c->vparsed && c->ix->quotas_ok[from_status]
             ? td_quota_check_parsed(c->pod, &c->vpod, c->ix->quotas[from_status], pods, npods,
                                     &c->err)
             : td_quota_check(c->pod, c->quotas, c->nquotas, pods, npods, &c->err);
    return after_validate(c->cfg, c->r, rule, st, &c->err);
}

/* The decision's steps, {phase, rule, fn}, in the order they run: the API
 * server's own defaulting, then the mutating steps in this fixed order (so
 * the same input gives the same patch, byte for byte), then the validating
 * steps. The validating rules' names are td_admit_validating_rules. */
#define ADMIT_STEPS(MUTATE, VALIDATE)                                                              \
    MUTATE("Defaults", mutate_defaults)                                                            \
    MUTATE("LimitRange", mutate_limitrange)                                                        \
    MUTATE("Priority", mutate_priority)                                                            \
    MUTATE("CostLabels", mutate_labels)                                                            \
    MUTATE("NodePool", mutate_pools)                                                               \
    MUTATE("Sandbox", mutate_sandbox)                                                              \
    VALIDATE("LimitRange", validate_limitrange)                                                    \
    VALIDATE("PodSecurity", validate_podsecurity)                                                  \
    VALIDATE("CostLabels", validate_labels)                                                        \
    VALIDATE("NodePool", validate_pools)                                                           \
    VALIDATE("Sandbox", validate_sandbox)                                                          \
    VALIDATE("Storage", validate_storage)                                                          \
    VALIDATE("ResourceQuota", validate_quota)

#define STEP_MUTATE(rule, fn) {PHASE_MUTATE, rule, fn},
#define STEP_VALIDATE(rule, fn) {PHASE_VALIDATE, rule, fn},
#define NAME_NONE(rule, fn)
#define NAME_OF(rule, fn) rule,

static const admit_step admit_steps[] = {ADMIT_STEPS(STEP_MUTATE, STEP_VALIDATE)};

const char *const td_admit_validating_rules[] = {ADMIT_STEPS(NAME_NONE, NAME_OF) NULL};

/* Runs a mutating step; when tracing, its line says what it changed. */
static td_status mutate_traced(admit_ctx *c, const admit_step *s)
{
    td_admit_result *r = c->r;
    json_t *before = r->trace ? td_json_copy(c->pod) : NULL;
    td_status st = s->fn(c, s->rule);
    if (r->trace) {
        json_t *ops = NULL;
        td_err derr;
        if (st == TD_OK && before && td_jsonpatch_diff(before, c->pod, &ops, &derr) != TD_OK)
            ops = NULL;
        trace_step(r, "mutate", s->rule,
                   st != TD_OK                ? "denied"
                   : json_array_size(ops) > 0 ? "changed"
                                              : "unchanged",
                   json_array_size(ops) ? ops : NULL, st != TD_OK ? c->err.msg : NULL);
        if (ops && !json_array_size(ops))
            json_decref(ops);
    }
    json_decref(before);
    return st;
}

/* Runs the steps of phase in the table's order until one does not return
 * TD_OK; *rule: the last one run. */
static td_status run_phase(admit_ctx *c, admit_phase phase, const char **rule)
{
    td_status st = TD_OK;
    for (size_t i = 0; st == TD_OK && i < sizeof admit_steps / sizeof admit_steps[0]; i++) {
        const admit_step *s = &admit_steps[i];
        if (s->phase != phase)
            continue;
        *rule = s->rule;
        st = phase == PHASE_MUTATE ? mutate_traced(c, s) : s->fn(c, s->rule);
    }
    return st;
}

/* Checks pod_in is a Pod and sets c up for it: the pod's copy (r->pod), the
 * namespace, its LimitRanges and ResourceQuotas, the trace. TD_OK, or the
 * error with *rule the answer's kind (BadRequest, Internal). */
static td_status admit_begin(admit_ctx *c, const json_t *pod_in, const char *ns,
                             const char **rule)
{
    /* the kind first: a Deployment is named as one, not as a Pod that
     * lacks spec.containers */
    const char *kind = td_json_str(pod_in, "kind");
    *rule = "BadRequest";
    if (kind && strcmp(kind, "Pod") != 0) {
        not_a_pod(kind, &c->err);
        return TD_EINVAL;
    }
    if (!json_is_object(pod_in) || !json_is_object(json_object_get(pod_in, "spec")) ||
        !json_is_array(td_json_path(pod_in, "spec.containers")))
        return td_err_set(&c->err, TD_EINVAL, "not a Pod: spec.containers is required");
    *rule = "Internal";
    if (!(c->pod = c->r->pod = pod_spine_copy(pod_in)))
        return td_err_set(&c->err, TD_ENOMEM, "out of memory");
    if (!json_is_object(json_object_get(c->pod, "metadata")))
        json_object_set_new(c->pod, "metadata", json_object());
    /* A copy: the steps below may replace the pod's nodes, strings too. */
    if (!ns || !*ns)
        ns = td_json_str(pod_in, "metadata.namespace");
    /* what snprintf(ns_buf, sizeof ns_buf, "%s", ...) leaves, without it */
    const char *ns_src = ns && *ns ? ns : "default";
    size_t ns_len = strnlen(ns_src, sizeof c->ns_buf - 1);
    memcpy(c->ns_buf, ns_src, ns_len);
    c->ns_buf[ns_len] = '\0';
    c->ns = c->ns_buf;
    c->ix = td_admindex_get(c->cfg, c->ns);
    if (c->ix && c->ix->nranges + c->ix->nquota_objs > 0) {
        c->ranges = c->ix->ranges, c->nranges = c->ix->nranges;
        c->quotas = c->ix->quota_objs, c->nquotas = c->ix->nquota_objs;
    } else {
        /* (an entry with neither listed is none: as td_admit_pod did
         * without the index's lists, which asked for it only then) */
        c->ix = NULL;
        c->nranges = td_config_list(c->cfg, "LimitRange", c->ns, &c->ranges);
        c->nquotas = td_config_list(c->cfg, "ResourceQuota", c->ns, &c->quotas);
    }
    if (c->opts->trace && !(c->r->trace = json_array()))
        return td_err_set(&c->err, TD_ENOMEM, "out of memory");
    return TD_OK;
}

/* The JSON Patch from pod_in to the mutated pod into r->patch (NULL when
 * nothing changed). */
static td_status admit_patch(admit_ctx *c, const json_t *pod_in)
{
    td_status st = td_jsonpatch_diff(pod_in, c->pod, &c->r->patch, &c->err);
    if (st == TD_OK && json_array_size(c->r->patch) == 0) {
        json_decref(c->r->patch);
        c->r->patch = NULL;
    }
    return st;
}

/* Validation is against the mutated pod. Its resources, as parsed and
 * updated by the mutating steps, brought up to date with what the later
 * steps replaced (spec.overhead from a RuntimeClass, say), serve LimitRange
 * and ResourceQuota; if they do not parse, the JSON entry points report
 * why, as they always did. */
static void prepare_validation(admit_ctx *c)
{
    c->r->validating = true;
    if (c->vparsed && (!c->ix || td__pod_refresh(c->pod, &c->vpod, NULL) != TD_OK)) {
        td__pod_fini(&c->vpod);
        c->vparsed = false;
    }
    /* the containers' sums, read by LimitRange (type Pod) and quota */
    if (c->vparsed)
        (void)td__pod_aggregate_keep(&c->vpod);
#ifndef NDEBUG
    if (c->vparsed) {
        /* the kept parse must be what a fresh one is */
        td__pod fresh;
        if (td__pod_parse(c->pod, &fresh, NULL) == TD_OK) {
            assert(td__pod_same(&c->vpod, &fresh));
            td__pod_fini(&fresh);
        } else {
            assert(!"the kept parse of the pod parses no more");
        }
    }
#endif
}

td_status td_admit_pod(const td_config *cfg, const json_t *pod_in, const char *ns,
                       const td_admit_opts *opts, td_admit_result *r)
{
    static const td_admit_opts none;
    admit_ctx c;
    c.cfg = cfg;
    c.opts = opts ? opts : &none;
    c.r = r;
    c.vparsed = false;
    memset(&c.err, 0, sizeof c.err);
    memset(r, 0, sizeof *r);
    const char *rule;
    td_status st = admit_begin(&c, pod_in, ns, &rule);
    if (st != TD_OK) {
        decide(r, st, rule, &c.err);
        return st;
    }
#ifndef NDEBUG
    /* pod_in is borrowed: no step may write into the nodes shared with it */
    json_t *pod_in_was = json_deep_copy(pod_in);
#endif
    st = run_phase(&c, PHASE_MUTATE, &rule);
    if (st == TD_OK && !c.opts->no_patch) {
        rule = "Internal";
        st = admit_patch(&c, pod_in);
    }
    if (st == TD_OK) {
        prepare_validation(&c);
        st = run_phase(&c, PHASE_VALIDATE, &rule);
    }
    if (st == TD_OK)
        rule = NULL;
#ifndef NDEBUG
    assert(!pod_in_was || json_equal(pod_in_was, pod_in));
    json_decref(pod_in_was);
#endif
    if (c.vparsed)
        td__pod_fini(&c.vpod);
    decide(r, st, rule, &c.err);
    if (st == TD_EFORBIDDEN)
        return TD_OK; /* a denial is a decision, not an error */
    return st;
}

td_status td_admit_pvc(const td_config *cfg, const json_t *pvc, const char *ns,
                       td_admit_result *r)
{
    td_err err = {{0}};
    memset(r, 0, sizeof *r);
    if (!json_is_object(pvc) || !json_is_object(json_object_get(pvc, "spec"))) {
        td_err_set(&err, TD_EINVAL, "not a PersistentVolumeClaim: spec is required");
        decide(r, TD_EINVAL, "BadRequest", &err);
        return TD_EINVAL;
    }
    if (!ns || !*ns)
        ns = td_json_str(pvc, "metadata.namespace");
    if (!ns || !*ns)
        ns = "default";
    r->validating = true;
    td_status st = td_storage_validate_pvc(cfg, ns, pvc, &err);
    decide(r, st, st == TD_OK ? NULL : "Storage", &err);
    return st == TD_EFORBIDDEN ? TD_OK : st;
}

/* Appends the base64 of s[0..n) (standard alphabet, padded). */
static void base64_put(td_jbuf *b, const unsigned char *data, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (!td_jbuf_reserve(b, 4 * ((n + 2) / 3)))
        return;
    char *out = b->s + b->len;
    size_t o = 0, i = 0;
    for (; i + 3 <= n; i += 3) {
        unsigned v = (unsigned)data[i] << 16 | (unsigned)data[i + 1] << 8 | data[i + 2];
        out[o++] = tab[(v >> 18) & 63];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = tab[(v >> 6) & 63];
        out[o++] = tab[v & 63];
    }
    if (i < n) {
        unsigned v = (unsigned)data[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)data[i + 1] << 8;
        out[o++] = tab[(v >> 18) & 63];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        out[o++] = '=';
    }
    b->len += o;
    b->s[b->len] = '\0';
}

char *td_base64_encode(const unsigned char *data, size_t n)
{
    td_jbuf b = TD_JBUF_INIT(SIZE_MAX);
    base64_put(&b, data, n);
    if (b.failed || !b.s) {
        td_jbuf_fini(&b);
        return NULL;
    }
    return b.s; /* td_jbuf's memory is malloc's */
}

/* The answer a review gets, before it is written out: the decision's part
 * of td_admission_review, shared by the tree (render_tree) and the bytes
 * (render_body) so that the two can only differ in how they write. */
typedef struct {
    const char *uid; /* borrowed from the input, or "" */
    bool allowed;
    int code;
    enum { ST_NONE, ST_FULL, ST_OK } status; /* none; code+message+reason; {"code":200} */
    const char *message, *reason;
    const char *details; /* status.details.kind (a static rule name), or NULL */
    const json_t *shadowed; /* warnings + auditAnnotations from it, when set */
    const json_t *warnings, *audit_annotations; /* Pod Security's, before shadow's */
    const json_t *patch;    /* patchType + patch, when set */
    td_admit_result r;
    bool has_r;
    char bad[512];
} answer;

static void answer_fini(answer *a)
{
    if (a->has_r)
        td_admit_result_fini(&a->r);
    a->has_r = false;
}

static bool str_ok(const char *s)
{
    return td_utf8_valid(s, strlen(s));
}

/* Decides input into *a. TD_OK, or TD_ENOMEM (nothing to release) when the
 * decision ran out of memory or a string the answer carries is not UTF-8
 * (jansson, which made the answer before, refused those with NULL). */
static td_status review_decide(const td_config *cfg, const json_t *input, td_review_mode mode,
                               const td_admit_opts *opts, answer *a)
{
    const json_t *pod = input;
    const char *ns = NULL;
    td_admit_opts local = opts ? *opts : (td_admit_opts){0};
    /* The validating endpoint sends no patch: none is made. */
    if (mode == TD_REVIEW_VALIDATE)
        local.no_patch = true;
    int pvc = 0;
    const char *workload = NULL; /* a workload's kind: its template is warned on */

    memset(a, 0, sizeof *a);
    a->uid = "";
    if (!json_is_object(input)) {
        snprintf(a->bad, sizeof a->bad,
                 "the body must be a JSON object (an AdmissionReview or a Pod)");
    } else if (td_json_str(input, "kind") && strcmp(td_json_str(input, "kind"), "AdmissionReview") == 0) {
        const char *av = td_json_str(input, "apiVersion");
        json_t *req = json_object_get(input, "request");
        if (!av || strcmp(av, "admission.k8s.io/v1") != 0)
            snprintf(a->bad, sizeof a->bad,
                     "apiVersion \"%s\" is not served; use admission.k8s.io/v1", av ? av : "");
        else if (!json_is_object(req))
            snprintf(a->bad, sizeof a->bad, "AdmissionReview: request is required");
        else {
            a->uid = td_json_str(req, "uid");
            if (!a->uid)
                a->uid = "";
            ns = td_json_str(req, "namespace");
            const char *op = td_json_str(req, "operation");
            const char *rkind = td_json_str(req, "kind.kind");
            const char *sub = td_json_str(req, "subResource");
            pod = json_object_get(req, "object");
            if (!(op && (strcmp(op, "DELETE") == 0 || strcmp(op, "CONNECT") == 0)) &&
                !(sub && *sub) && td_admit_is_workload(rkind))
                workload = rkind;
            if ((op && (strcmp(op, "DELETE") == 0 || strcmp(op, "CONNECT") == 0)) ||
                (!workload &&
                 !(rkind && strcmp(rkind, "PersistentVolumeClaim") == 0 && !(sub && *sub)) &&
                 ((rkind && strcmp(rkind, "Pod") != 0) || (sub && *sub)))) {
                /* Only pods and PVCs are decided, and workloads warned on;
                 * anything else passes. */
                a->allowed = true;
                a->code = 200;
                return str_ok(a->uid) ? TD_OK : TD_ENOMEM;
            }
            if (rkind && strcmp(rkind, "PersistentVolumeClaim") == 0)
                pvc = 1;
            if (op && strcmp(op, "UPDATE") == 0)
                local.skip_quota = true; /* quota charges creations */
            /* webhooks see objects the API server has defaulted */
            local.api_defaulted = true;
            if (!json_is_object(pod))
                snprintf(a->bad, sizeof a->bad, "AdmissionReview: request.object is required");
        }
    }
    if (*a->bad) {
        a->code = 400;
        a->status = ST_FULL;
        a->message = a->bad;
        a->reason = "BadRequest";
        return str_ok(a->uid) && str_ok(a->bad) ? TD_OK : TD_ENOMEM;
    }
    if (td_json_str(pod, "kind") && strcmp(td_json_str(pod, "kind"), "PersistentVolumeClaim") == 0)
        pvc = 1;
    else if (!workload && td_admit_is_workload(td_json_str(pod, "kind")))
        workload = td_json_str(pod, "kind");

    td_admit_result *r = &a->r;
    td_status st = pvc        ? td_admit_pvc(cfg, pod, ns, r)
                   : workload ? td_admit_workload(cfg, pod, workload, ns, r)
                              : td_admit_pod(cfg, pod, ns, &local, r);
    a->has_r = true;
    if (st == TD_ENOMEM || !str_ok(a->uid) || (!r->allowed && !str_ok(r->message))) {
        answer_fini(a);
        return TD_ENOMEM;
    }
    a->allowed = r->allowed;
    a->code = r->code;
    if (!r->allowed) {
        a->status = ST_FULL;
        a->message = r->message;
        a->reason = r->code == 403 ? "Forbidden" : "BadRequest";
        a->details = r->rule;
    } else if (r->rule == NULL) {
        a->status = ST_OK;
    }
    if (mode == TD_REVIEW_MUTATE && !r->allowed && r->code == 403 && r->validating) {
        /* The mutating endpoint mutates; validation's denials are the
         * validating endpoint's to make, so the patch still goes out. */
        a->allowed = r->allowed = true;
        a->code = 200;
        a->status = ST_NONE;
        a->details = NULL;
    }
    /* Shadow: the API server shows warnings to the client (kubectl prints
     * them) and keeps audit annotations in its audit log. */
    if (r->shadowed && mode != TD_REVIEW_MUTATE)
        a->shadowed = r->shadowed;
    /* Pod Security's warn and audit modes: a validating rule's, likewise */
    if (mode != TD_REVIEW_MUTATE) {
        a->warnings = r->warnings;
        a->audit_annotations = r->audit_annotations;
    }
    if (r->allowed && r->patch && mode != TD_REVIEW_VALIDATE)
        a->patch = r->patch;
    return TD_OK;
}

/* One shadow rule's warning and audit annotation key. */
static void shadow_texts(const json_t *x, char *w, size_t wn, char *key, size_t kn)
{
    snprintf(w, wn, "tenantd shadow: %s would deny: %s", td_json_str(x, "rule"),
             td_json_str(x, "message"));
    snprintf(key, kn, "tenantd.dev/shadow-%s", td_json_str(x, "rule"));
}

static json_t *response_envelope(const char *uid, bool allowed, int code, const char *message,
                                 const char *reason)
{
    json_t *resp = json_pack("{s:s, s:b}", "uid", uid ? uid : "", "allowed", allowed);
    if (!resp)
        return NULL;
    if (!allowed) {
        json_t *status = json_pack("{s:i, s:s, s:s}", "code", code, "message",
                                   message ? message : "", "reason", reason);
        if (!status || json_object_set_new(resp, "status", status) < 0) {
            json_decref(resp);
            return NULL;
        }
    }
    json_t *review = json_pack("{s:s, s:s, s:o}", "apiVersion", "admission.k8s.io/v1", "kind",
                               "AdmissionReview", "response", resp);
    return review;
}

/* The answer as a jansson tree (the general writer; render_body is checked
 * against it by fuzz_review and test_admit). */
static td_status render_tree(const answer *a, json_t **out)
{
    /* a denial, and only a denial, has a full status (review_decide) */
    *out = response_envelope(a->uid, a->allowed, a->code, a->message, a->reason);
    if (!*out)
        return TD_ENOMEM;
    json_t *resp = json_object_get(*out, "response");
    if (a->status == ST_OK)
        json_object_set_new(resp, "status", json_pack("{s:i}", "code", 200));
    else if (a->details)
        json_object_set_new(json_object_get(resp, "status"), "details",
                            json_pack("{s:s}", "kind", a->details));
    if (a->shadowed || a->warnings || a->audit_annotations) {
        json_t *warn = json_array(), *audit = json_object();
        size_t i;
        json_t *x;
        const char *k;
        json_array_foreach(a->warnings, i, x)
            json_array_append(warn, x);
        json_object_foreach((json_t *)a->audit_annotations, k, x)
            json_object_set(audit, k, x);
        json_array_foreach(a->shadowed, i, x)
        {
            char w[TD_ERR_MAX + 96], key[96];
            shadow_texts(x, w, sizeof w, key, sizeof key);
            json_array_append_new(warn, json_string(w));
            json_object_set_new(audit, key, json_string(td_json_str(x, "message")));
        }
        /* shadow's always both; Pod Security's only what it has */
        if (a->shadowed || a->warnings)
            json_object_set_new(resp, "warnings", warn);
        else
            json_decref(warn);
        if (a->shadowed || a->audit_annotations)
            json_object_set_new(resp, "auditAnnotations", audit);
        else
            json_decref(audit);
    }
    if (a->patch) {
        /* The patch dumped as json_dumpb(JSON_COMPACT) writes it, once (not
         * measured first), into malloc'd memory of our own (jansson's
         * allocator may be a request arena, jsonarena.h), then base64'd: plain
         * ASCII, set without jansson's UTF-8 check. No bound but memory. */
        td_jbuf pj = TD_JBUF_INIT(SIZE_MAX), b64 = TD_JBUF_INIT(SIZE_MAX);
        json_t *patch = NULL;
        if (td_json_dump_compact(&pj, a->patch) && !pj.failed && pj.len > 0) {
            base64_put(&b64, (const unsigned char *)pj.s, pj.len);
            if (!b64.failed && b64.s)
                patch = json_stringn_nocheck(b64.s, b64.len);
        }
        td_jbuf_fini(&pj);
        td_jbuf_fini(&b64);
        if (!patch) {
            json_decref(*out);
            *out = NULL;
            return TD_ENOMEM;
        }
        json_object_set_new(resp, "patchType", json_string("JSONPatch"));
        json_object_set_new(resp, "patch", patch);
    }
    return TD_OK;
}

/* Largest answer written: the request is at most a few MiB, its patch
 * base64'd a third more. */
#define MAX_ANSWER ((size_t)256 << 20)

/* The answer as json_dumps(render_tree's tree, JSON_COMPACT) writes it,
 * without the tree. Strings jansson would refuse were refused by
 * review_decide; a warning json_string refuses is left out as the tree's
 * append leaves it out. */
static td_status render_body(const answer *a, char **body, size_t *len, td_review_summary *sum)
{
    td_jbuf b = TD_JBUF_INIT(MAX_ANSWER);
    td_jbuf patch = TD_JBUF_INIT(MAX_ANSWER);
    if (sum)
        memset(sum, 0, sizeof *sum);
    td_jbuf_puts(&b, "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                     "\"response\":{\"uid\":");
    td_jbuf_string(&b, a->uid, strlen(a->uid));
    td_jbuf_puts(&b, a->allowed ? ",\"allowed\":true" : ",\"allowed\":false");
    if (a->status == ST_OK) {
        td_jbuf_puts(&b, ",\"status\":{\"code\":200}");
    } else if (a->status == ST_FULL) {
        td_jbuf_puts(&b, ",\"status\":{\"code\":");
        td_jbuf_int(&b, a->code);
        td_jbuf_puts(&b, ",\"message\":");
        td_jbuf_string(&b, a->message, strlen(a->message));
        td_jbuf_puts(&b, ",\"reason\":");
        td_jbuf_string(&b, a->reason, strlen(a->reason));
        if (a->details) {
            td_jbuf_puts(&b, ",\"details\":{\"kind\":");
            td_jbuf_string(&b, a->details, strlen(a->details));
            td_jbuf_puts(&b, "}");
        }
        td_jbuf_puts(&b, "}");
    }
    if (a->shadowed || a->warnings || a->audit_annotations) {
        size_t i, nw = 0;
        json_t *x;
        const char *k;
        bool has_w = a->shadowed || a->warnings, has_a = a->shadowed || a->audit_annotations;
        size_t w_at = b.len;
        td_jbuf_puts(&b, ",\"warnings\":[");
        json_array_foreach(a->warnings, i, x)
        {
            if (nw++)
                td_jbuf_puts(&b, ",");
            td_jbuf_string(&b, json_string_value(x), json_string_length(x));
        }
        json_array_foreach(a->shadowed, i, x)
        {
            char w[TD_ERR_MAX + 96], key[96];
            shadow_texts(x, w, sizeof w, key, sizeof key);
            if (!td_utf8_valid(w, strlen(w)))
                continue;
            if (nw++)
                td_jbuf_puts(&b, ",");
            td_jbuf_string(&b, w, strlen(w));
        }
        td_jbuf_puts(&b, "]");
        if (!has_w && !b.failed) {
            b.len = w_at; /* written, and taken back */
            b.s[b.len] = '\0';
        }
        size_t a_at = b.len;
        td_jbuf_puts(&b, ",\"auditAnnotations\":{");
        size_t na = 0;
        json_object_foreach((json_t *)a->audit_annotations, k, x)
        {
            if (na++)
                td_jbuf_puts(&b, ",");
            td_jbuf_string(&b, k, strlen(k));
            td_jbuf_puts(&b, ":");
            td_jbuf_string(&b, json_string_value(x), json_string_length(x));
        }
        json_array_foreach(a->shadowed, i, x)
        {
            char w[TD_ERR_MAX + 96], key[96];
            const char *msg = td_json_str(x, "message");
            shadow_texts(x, w, sizeof w, key, sizeof key);
            if (!msg || !td_utf8_valid(msg, strlen(msg)))
                continue;
            if (na++)
                td_jbuf_puts(&b, ",");
            td_jbuf_string(&b, key, strlen(key));
            td_jbuf_puts(&b, ":");
            td_jbuf_string(&b, msg, strlen(msg));
            if (sum && sum->nshadow < sizeof sum->shadow / sizeof sum->shadow[0]) {
                const char *rule = td_json_str(x, "rule");
                const char *const *k = td_admit_validating_rules;
                while (*k && (!rule || strcmp(*k, rule) != 0))
                    k++;
                sum->shadow[sum->nshadow++] = *k; /* NULL: not a rule of ours */
            }
        }
        td_jbuf_puts(&b, "}");
        if (!has_a && !b.failed) {
            b.len = a_at;
            b.s[b.len] = '\0';
        }
    }
    if (a->patch) {
        if (!td_json_dump_compact(&patch, a->patch)) {
            td_jbuf_fini(&patch);
            td_jbuf_fini(&b);
            return TD_ENOMEM;
        }
        td_jbuf_puts(&b, ",\"patchType\":\"JSONPatch\",\"patch\":\"");
        base64_put(&b, (const unsigned char *)patch.s, patch.len);
        td_jbuf_puts(&b, "\"");
        td_jbuf_fini(&patch);
    }
    td_jbuf_puts(&b, "}}");
    if (b.failed) {
        td_jbuf_fini(&b);
        return TD_ENOMEM;
    }
    if (sum) {
        sum->allowed = a->allowed;
        sum->rule = a->allowed ? NULL : a->details;
    }
    *body = b.s;
    *len = b.len;
    return TD_OK;
}

td_status td_admission_review(const td_config *cfg, const json_t *input, td_review_mode mode,
                              const td_admit_opts *opts, json_t **out, int *code)
{
    answer a;
    td_status st = review_decide(cfg, input, mode, opts, &a);
    if (st != TD_OK)
        return st;
    *code = a.code;
    st = render_tree(&a, out);
    answer_fini(&a);
    return st;
}

td_status td_admission_review_body(const td_config *cfg, const json_t *input, td_review_mode mode,
                                   const td_admit_opts *opts, char **body, size_t *len, int *code,
                                   td_review_summary *sum)
{
    answer a;
    td_status st = review_decide(cfg, input, mode, opts, &a);
    if (st != TD_OK)
        return st;
    *code = a.code;
    st = render_body(&a, body, len, sum);
    answer_fini(&a);
    return st;
}

td_status td_admission_review_reject_body(const char *message, char **body, size_t *len)
{
    answer a;
    memset(&a, 0, sizeof a);
    a.uid = "";
    a.code = 400;
    a.status = ST_FULL;
    a.message = message;
    a.reason = "BadRequest";
    if (!str_ok(message))
        return TD_ENOMEM;
    return render_body(&a, body, len, NULL);
}
