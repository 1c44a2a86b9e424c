/* quota.c - ResourceQuota admission for Pods, ported from Kubernetes' pod
 * quota evaluator (pkg/quota/v1/evaluator/core/pods.go), quota resource
 * lists (pkg/quota/v1/resources.go) and the admission controller's
 * CheckRequest (k8s.io/apiserver/.../resourcequota/controller.go). */
#include "admission/quota.h"

#include <assert.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission/podres_internal.h"
#include "core/config.h"
#include "core/resources.h"
#include "core/strbuf.h"
#include "core/validate.h"

#define STRBUF_MAX (1u << 20) /* longest message built */

/* ---- small helpers ---- */


/* prettyPrint: "a=1,b=2" in name order (td_resources is sorted). */
static void pretty_print(td_strbuf *b, const td_resources *r)
{
    size_t i;
    char q[TD_QUANTITY_STR_MAX];

    for (i = 0; i < r->n; i++) {
        if (i > 0)
            td_strbuf_append(b, ",");
        td_strbuf_append(b, r->items[i].name);
        td_strbuf_append(b, "=");
        td_quantity_format(&r->items[i].q, q, sizeof q);
        td_strbuf_append(b, q);
    }
}

static void clear(td_resources *r)
{
    td_resources_fini(r);
    td_resources_init(r);
}

/* quota.Mask: the entries of r whose names are in names. */
static td_status mask(const td_resources *r, const td_resources *names, td_resources *out)
{
    size_t i;
    td_status s = TD_OK;

    clear(out);
    for (i = 0; i < r->n && s == TD_OK; i++)
        if (td_resources_get(names, r->items[i].name) != NULL)
            s = td_resources_set(out, r->items[i].name, &r->items[i].q);
    return s;
}

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* helper.IsNativeResource: no domain, or a kubernetes.io domain. */
static bool is_native_resource(const char *name)
{
    return strchr(name, '/') == NULL || strstr(name, "kubernetes.io/") != NULL;
}

static bool is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* validation.IsDNS1123Subdomain. */
static bool is_dns_subdomain(const char *s, size_t n)
{
    size_t i;

    if (n == 0 || n > 253)
        return false;
    for (i = 0; i < n; i++) {
        char c = s[i];
        bool lower_alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (lower_alnum)
            continue;
        if (c != '-' && c != '.')
            return false;
        /* '-' and '.' only between alphanumerics; '.' separates labels. */
        if (i == 0 || i == n - 1)
            return false;
        if (c == '.' && (s[i - 1] == '.' || s[i - 1] == '-' || s[i + 1] == '-'))
            return false;
    }
    return true;
}

/* validation.IsQualifiedName: [prefix/]name, name <= 63 of
 * ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]. */
static bool is_qualified_name(const char *s)
{
    const char *slash = strchr(s, '/');
    const char *name = s;
    size_t n, i;

    if (slash != NULL) {
        if (strchr(slash + 1, '/') != NULL || !is_dns_subdomain(s, (size_t)(slash - s)))
            return false;
        name = slash + 1;
    }
    n = strlen(name);
    if (n == 0 || n > 63 || !is_alnum(name[0]) || !is_alnum(name[n - 1]))
        return false;
    for (i = 0; i < n; i++)
        if (!is_alnum(name[i]) && name[i] != '-' && name[i] != '_' && name[i] != '.')
            return false;
    return true;
}

/* helper.IsExtendedResourceName, or an implicit DRA device-class name
 * (schedutil.IsDRAExtendedResourceName). */
static bool is_extended_resource(const char *name)
{
    char buf[TD_RESOURCE_NAME_MAX + 16];

    if (has_prefix(name, "deviceclass.resource.kubernetes.io/"))
        return true;
    if (is_native_resource(name) || has_prefix(name, "requests."))
        return false;
    snprintf(buf, sizeof buf, "requests.%s", name);
    return is_qualified_name(buf);
}

/* podEvaluator.MatchingResources, for one name. */
static bool pod_tracks(const char *name)
{
    static const char *const pod_resources[] = {
        "count/pods",        "cpu",
        "memory",            "ephemeral-storage",
        "requests.cpu",      "requests.memory",
        "requests.ephemeral-storage", "limits.cpu",
        "limits.memory",     "limits.ephemeral-storage",
        "pods",
    };
    size_t i;

    for (i = 0; i < sizeof pod_resources / sizeof pod_resources[0]; i++)
        if (strcmp(name, pod_resources[i]) == 0)
            return true;
    if (has_prefix(name, "hugepages-") || has_prefix(name, "requests.hugepages-"))
        return true;
    /* isExtendedResourceNameForQuota: only requests.<name> for extended. */
    return (!is_native_resource(name) ||
            has_prefix(name, "requests.deviceclass.resource.kubernetes.io/")) &&
           has_prefix(name, "requests.");
}

/* ---- pods ---- */

typedef struct {
    td__pod res;
    const json_t *spec;         /* may be NULL */
    const char *priority_class; /* "" if none */
    const char *phase;          /* "" if none */
    const char *qos_class;      /* "" if none */
    bool terminating;           /* activeDeadlineSeconds >= 0 */
} pod_info;

static td_status optional_string(const json_t *obj, const char *key, const char *path,
                                 const char **out, td_err *err)
{
    const json_t *v = obj ? json_object_get(obj, key) : NULL;

    *out = "";
    if (v == NULL || json_is_null(v))
        return TD_OK;
    if (!json_is_string(v))
        return td_err_set(err, TD_EINVAL, "%s: must be a string", path);
    *out = json_string_value(v);
    return TD_OK;
}

static td_status pod_info_rest(const json_t *pod, pod_info *pi, td_err *err);

static td_status pod_info_parse(const json_t *pod, pod_info *pi, td_err *err)
{
    td_status s = td__pod_parse(pod, &pi->res, err);
    if (s != TD_OK)
        return s;
    s = pod_info_rest(pod, pi, err);
    if (s != TD_OK)
        td__pod_fini(&pi->res);
    return s;
}

/* The fields of pi other than res. */
static td_status pod_info_rest(const json_t *pod, pod_info *pi, td_err *err)
{
    const json_t *status, *deadline;
    td_status s;

    pi->spec = json_object_get(pod, "spec");
    if (!json_is_object(pi->spec))
        pi->spec = NULL;
    status = json_object_get(pod, "status");
    if (status != NULL && !json_is_null(status) && !json_is_object(status)) {
        s = td_err_set(err, TD_EINVAL, "status: must be an object");
        goto fail;
    }
    if (!json_is_object(status))
        status = NULL;
    s = optional_string(pi->spec, "priorityClassName", "spec.priorityClassName",
                        &pi->priority_class, err);
    if (s == TD_OK)
        s = optional_string(status, "phase", "status.phase", &pi->phase, err);
    if (s == TD_OK)
        s = optional_string(status, "qosClass", "status.qosClass", &pi->qos_class, err);
    if (s != TD_OK)
        goto fail;
    deadline = pi->spec ? json_object_get(pi->spec, "activeDeadlineSeconds") : NULL;
    pi->terminating = false;
    if (deadline != NULL && !json_is_null(deadline)) {
        if (!json_is_integer(deadline)) {
            s = td_err_set(err, TD_EINVAL, "spec.activeDeadlineSeconds: must be an integer");
            goto fail;
        }
        pi->terminating = json_integer_value(deadline) >= 0;
    }
    return TD_OK;
fail:
    return s;
}

static bool positive_cpu_or_memory(const td_resources *r)
{
    const td_quantity *cpu = td_resources_get(r, "cpu");
    const td_quantity *mem = td_resources_get(r, "memory");

    return (cpu && td_quantity_sign(cpu) > 0) || (mem && td_quantity_sign(mem) > 0);
}

/* qos.GetPodQOS(pod) == BestEffort: no positive cpu or memory request or
 * limit anywhere (pod-level resources, when given, decide alone). */
static bool is_best_effort(const pod_info *pi)
{
    size_t i;

    if (pi->qos_class[0] != '\0')
        return strcmp(pi->qos_class, "BestEffort") == 0;
    if (pi->res.has_pod_resources)
        return !positive_cpu_or_memory(&pi->res.pod_requests) &&
               !positive_cpu_or_memory(&pi->res.pod_limits);
    for (i = 0; i < pi->res.ncontainers; i++)
        if (positive_cpu_or_memory(&pi->res.containers[i].requests) ||
            positive_cpu_or_memory(&pi->res.containers[i].limits))
            return false;
    for (i = 0; i < pi->res.ninit_containers; i++)
        if (positive_cpu_or_memory(&pi->res.init_containers[i].requests) ||
            positive_cpu_or_memory(&pi->res.init_containers[i].limits))
            return false;
    return true;
}

static bool cross_namespace_term(const json_t *term)
{
    const json_t *ns = json_object_get(term, "namespaces");
    const json_t *sel = json_object_get(term, "namespaceSelector");

    return (json_is_array(ns) && json_array_size(ns) > 0) || (sel != NULL && !json_is_null(sel));
}

static bool cross_namespace_terms(const json_t *affinity)
{
    const json_t *req, *pref, *t;
    size_t i;

    if (!json_is_object(affinity))
        return false;
    req = json_object_get(affinity, "requiredDuringSchedulingIgnoredDuringExecution");
    pref = json_object_get(affinity, "preferredDuringSchedulingIgnoredDuringExecution");
    if (json_is_array(req))
        json_array_foreach(req, i, t) if (json_is_object(t) && cross_namespace_term(t)) return true;
    if (json_is_array(pref))
        json_array_foreach(pref, i, t)
        {
            const json_t *term = json_is_object(t) ? json_object_get(t, "podAffinityTerm") : NULL;
            if (json_is_object(term) && cross_namespace_term(term))
                return true;
        }
    return false;
}

static bool uses_cross_namespace_affinity(const pod_info *pi)
{
    const json_t *aff = pi->spec ? json_object_get(pi->spec, "affinity") : NULL;

    if (!json_is_object(aff))
        return false;
    return cross_namespace_terms(json_object_get(aff, "podAffinity")) ||
           cross_namespace_terms(json_object_get(aff, "podAntiAffinity"));
}

/* podComputeUsageHelper: the quota resource names a set of requests and
 * limits charges. */
static td_status compute_usage(const td_resources *requests, const td_resources *limits,
                               td_resources *out)
{
    static const struct {
        const char *resource, *plain, *req, *lim;
    } map[] = {
        {"cpu", "cpu", "requests.cpu", "limits.cpu"},
        {"memory", "memory", "requests.memory", "limits.memory"},
        {"ephemeral-storage", "ephemeral-storage", "requests.ephemeral-storage",
         "limits.ephemeral-storage"},
    };
    td_quantity one;
    td_status s;
    size_t i;
    char name[TD_RESOURCE_NAME_MAX + 16];

    td_quantity_from_int(&one, 1, 0, TD_QFMT_DECIMAL_SI);
    s = td_resources_set(out, "pods", &one);
    for (i = 0; i < sizeof map / sizeof map[0] && s == TD_OK; i++) {
        const td_quantity *r = td_resources_get(requests, map[i].resource);
        const td_quantity *l = td_resources_get(limits, map[i].resource);
        if (r != NULL) {
            s = td_resources_set(out, map[i].plain, r);
            if (s == TD_OK)
                s = td_resources_set(out, map[i].req, r);
        }
        if (l != NULL && s == TD_OK)
            s = td_resources_set(out, map[i].lim, l);
    }
    for (i = 0; i < requests->n && s == TD_OK; i++) {
        const td_resource *r = &requests->items[i];
        bool huge = has_prefix(r->name, "hugepages-");
        if (huge)
            s = td_resources_set(out, r->name, &r->q);
        if (s == TD_OK && (huge || is_extended_resource(r->name))) {
            /* "requests." NAME: NAME is shorter than TD_RESOURCE_NAME_MAX,
             * so it fits name whole. A name too long to be a quota resource
             * cannot be quota'd. */
            size_t len = strlen(r->name);
            if (sizeof "requests." - 1 + len < TD_RESOURCE_NAME_MAX) {
                memcpy(name, "requests.", sizeof "requests." - 1);
                memcpy(name + sizeof "requests." - 1, r->name, len + 1);
                s = td_resources_set(out, name, &r->q);
            }
        }
    }
    return s;
}

/* PodUsageFunc. */
static td_status pod_usage(const pod_info *pi, td_resources *out)
{
    td_resources reqs, lims;
    td_quantity one;
    td_status s;

    clear(out);
    td_quantity_from_int(&one, 1, 0, TD_QFMT_DECIMAL_SI);
    s = td_resources_set(out, "count/pods", &one);
    /* Terminal pods still exist in storage (count/pods) but use nothing. */
    if (s != TD_OK || strcmp(pi->phase, "Failed") == 0 || strcmp(pi->phase, "Succeeded") == 0)
        return s;
    td_resources_init(&reqs);
    td_resources_init(&lims);
    const td_resources *kr = td__pod_aggregate_kept(&pi->res, TD__POD_OVERHEAD | TD__POD_LEVEL, false);
    const td_resources *kl = td__pod_aggregate_kept(&pi->res, TD__POD_OVERHEAD | TD__POD_LEVEL, true);
    if (kr && kl)
        s = compute_usage(kr, kl, out);
    else if ((s = td__pod_aggregate(&pi->res, TD__POD_OVERHEAD | TD__POD_LEVEL, &reqs, &lims)) ==
             TD_OK)
        s = compute_usage(&reqs, &lims, out);
    td_resources_fini(&reqs);
    td_resources_fini(&lims);
    return s;
}

/* ---- quotas ---- */

typedef enum {
    SCOPE_OTHER = 0,
    SCOPE_TERMINATING,
    SCOPE_NOT_TERMINATING,
    SCOPE_BEST_EFFORT,
    SCOPE_NOT_BEST_EFFORT,
    SCOPE_CROSS_NAMESPACE,
    SCOPE_PRIORITY_CLASS
} scope_kind;

typedef enum { OP_OTHER = 0, OP_EXISTS, OP_IN, OP_NOT_IN, OP_DOES_NOT_EXIST } scope_op;

typedef struct {
    const char *scope_name;
    const char *op;
    const json_t *values; /* array of strings, or NULL */
    /* scope_name and op resolved when the quota is parsed */
    scope_kind kind;
    scope_op opk;
} scope_selector;

/* Resolves sel's scope name and operator, once, when parsed. */
static void selector_resolve(scope_selector *sel)
{
    static const struct {
        const char *name;
        scope_kind kind;
    } kinds[] = {{"Terminating", SCOPE_TERMINATING},
                 {"NotTerminating", SCOPE_NOT_TERMINATING},
                 {"BestEffort", SCOPE_BEST_EFFORT},
                 {"NotBestEffort", SCOPE_NOT_BEST_EFFORT},
                 {"CrossNamespacePodAffinity", SCOPE_CROSS_NAMESPACE},
                 {"PriorityClass", SCOPE_PRIORITY_CLASS}};
    static const struct {
        const char *name;
        scope_op op;
    } ops[] = {{"Exists", OP_EXISTS},
               {"In", OP_IN},
               {"NotIn", OP_NOT_IN},
               {"DoesNotExist", OP_DOES_NOT_EXIST}};
    sel->kind = SCOPE_OTHER;
    sel->opk = OP_OTHER;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(sel->scope_name, kinds[i].name) == 0)
            sel->kind = kinds[i].kind;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(sel->op, ops[i].name) == 0)
            sel->opk = ops[i].op;
}

typedef struct {
    const char *name;
    scope_selector *selectors;
    size_t nselectors;
    td_resources hard;
    td_resources used; /* status.used, or computed from used pods */
    /* the hard names the pod evaluator tracks, with their limits: made once
     * when the quota is parsed (per snapshot), read by every check */
    td_resources restricted;
    /* Also made once, for check_fast: which of the validation set's
     * container fields restricted needs (NEED_* bits), and whether
     * status.used covers restricted (hasUsageStats). */
    unsigned need;
    bool stats_ok;
    /* hard minus used for each hard name (used only with from_status:
     * counted from no pods it is zero), so that "used + requested >
     * hard" is one comparison, "requested > headroom"; headroom_ok false
     * if a difference did not fit (check_fast then defers to check()). */
    td_resources headroom;
    bool headroom_ok;
} quota;

/* The container fields podEvaluator.Constraints requires. */
#define NEED_REQ_CPU 1u /* cpu, requests.cpu */
#define NEED_REQ_MEM 2u /* memory, requests.memory */
#define NEED_LIM_CPU 4u /* limits.cpu */
#define NEED_LIM_MEM 8u /* limits.memory */

static void quota_fini(quota *q)
{
    td_resources_fini(&q->headroom);
    free(q->selectors);
    td_resources_fini(&q->hard);
    td_resources_fini(&q->used);
    td_resources_fini(&q->restricted);
}

static void quotas_free(quota *qs, size_t n)
{
    size_t i;

    if (qs == NULL)
        return;
    for (i = 0; i < n; i++)
        quota_fini(&qs[i]);
    free(qs);
}

/* ---- the one parse of a ResourceQuota ---- */

/* Which hard limits and usage a parse reads. The admission check reads
 * one side (PARSE_STATUS: status.hard and status.used, as kube-apiserver's
 * plugin does; PARSE_PODS: spec.hard, usage counted from pods); the
 * config's validation (PARSE_VALIDATE) reads every side and adds the API
 * server's own rules: spec.hard not negative, known scopes and operators. */
typedef enum { PARSE_PODS, PARSE_STATUS, PARSE_VALIDATE } parse_mode;

static const char *const quota_scopes[] = {"Terminating",
                                           "NotTerminating",
                                           "BestEffort",
                                           "NotBestEffort",
                                           "PriorityClass",
                                           "CrossNamespacePodAffinity",
                                           NULL};

static bool scope_known(const char *name)
{
    for (const char *const *p = quota_scopes; name && *p; p++)
        if (strcmp(name, *p) == 0)
            return true;
    return false;
}

/* The value of a quantity as written, for a message. */
static const char *quantity_text(const json_t *val, char *buf, size_t n)
{
    if (json_is_string(val))
        return json_string_value(val);
    if (json_is_integer(val))
        snprintf(buf, n, "%" JSON_INTEGER_FORMAT, json_integer_value(val));
    else
        snprintf(buf, n, "%.15g", json_real_value(val));
    return buf;
}

/* Parses the resource list m (field names it) into *out, which the caller
 * has initialised and finishes. validate: a null value is no quantity and
 * a negative one is refused, as the API server's validation does; else a
 * null is zero and negatives pass (the check reports them). */
static td_status parse_list(td_vctx *v, const json_t *m, const char *field, bool validate,
                            td_resources *out)
{
    const char *name;
    json_t *val;
    if (m == NULL || json_is_null(m))
        return TD_OK;
    if (!json_is_object(m))
        return td_vfail(v, m, field, "must be a map of resource name to quantity");
    json_object_foreach((json_t *)m, name, val)
    {
        char f[512], buf[64];
        td_quantity q;
        td_err qe;
        snprintf(f, sizeof f, "%s.%s", field, name);
        if (validate && json_is_null(val))
            return td_vfail(v, val, f, "must be a quantity such as \"500m\" or \"8Gi\"");
        /* its message is ": MSG", after the empty path */
        if (td__quantity_parse_json(val, "", &q, &qe) != TD_OK)
            return td_vfail(v, val, f, "%s", qe.msg + 2);
        if (validate && td_quantity_sign(&q) < 0)
            return td_vfail(v, val, f, "\"%s\" must not be negative",
                            quantity_text(val, buf, sizeof buf));
        td_status s = td_resources_set(out, name, &q);
        if (s == TD_ENOMEM)
            return td_err_set(v->err, TD_ENOMEM, "out of memory");
        if (s != TD_OK)
            return td_vfail(v, val, f, "invalid resource name");
    }
    return TD_OK;
}

/* The selectors: spec.scopes as Exists, then the scopeSelector's
 * expressions (getScopeSelectorsFromQuota). Types only: what the scopes
 * and operators mean is checked by the validation or when matching. */
static td_status parse_selectors(td_vctx *v, const json_t *spec, quota *q)
{
    const json_t *scopes = spec ? json_object_get(spec, "scopes") : NULL;
    const json_t *sel = spec ? json_object_get(spec, "scopeSelector") : NULL;
    const json_t *exprs = json_is_object(sel) ? json_object_get(sel, "matchExpressions") : NULL;
    size_t nscopes = 0, nexprs = 0, i, j;
    const json_t *x;
    char f[128];

    if (scopes != NULL && !json_is_null(scopes)) {
        if (!json_is_array(scopes))
            return td_vfail(v, scopes, "spec.scopes", "must be a list");
        nscopes = json_array_size(scopes);
    }
    if (sel != NULL && !json_is_null(sel) && !json_is_object(sel))
        return td_vfail(v, sel, "spec.scopeSelector", "must be a mapping");
    if (exprs != NULL && !json_is_null(exprs)) {
        if (!json_is_array(exprs))
            return td_vfail(v, exprs, "spec.scopeSelector.matchExpressions", "must be a list");
        nexprs = json_array_size(exprs);
    }
    if (nscopes + nexprs > 0 && !(q->selectors = calloc(nscopes + nexprs, sizeof *q->selectors)))
        return td_err_set(v->err, TD_ENOMEM, "out of memory");
    json_array_foreach(nscopes ? scopes : NULL, i, x)
    {
        snprintf(f, sizeof f, "spec.scopes[%zu]", i);
        if (!json_is_string(x))
            return td_vfail(v, x, f, "must be a string");
        scope_selector *ss = &q->selectors[q->nselectors++];
        ss->scope_name = json_string_value(x);
        ss->op = "Exists";
        selector_resolve(ss);
    }
    json_array_foreach(nexprs ? exprs : NULL, i, x)
    {
        snprintf(f, sizeof f, "spec.scopeSelector.matchExpressions[%zu]", i);
        if (!json_is_object(x))
            return td_vfail(v, x, f, "must be a mapping");
        const json_t *sn = json_object_get(x, "scopeName"), *op = json_object_get(x, "operator");
        const json_t *values = json_object_get(x, "values"), *y;
        if (!json_is_string(sn) || !json_is_string(op))
            return td_vfail(v, x, f, "scopeName and operator must be strings");
        if (json_is_null(values))
            values = NULL;
        if (values && !json_is_array(values))
            return td_vfail(v, values, f, "values: must be a list");
        json_array_foreach(values, j, y) if (!json_is_string(y))
            return td_vfail(v, y, f, "values[%zu]: must be a string", j);
        scope_selector *ss = &q->selectors[q->nselectors++];
        ss->scope_name = json_string_value(sn);
        ss->op = json_string_value(op);
        ss->values = values;
        selector_resolve(ss);
    }
    return TD_OK;
}

/* The hard limits and usage mode reads (see parse_mode). The controller
 * copies spec.hard into status.hard and admission reads status: the check
 * reads whichever side its usage comes from, else the other. */
static td_status parse_limits(td_vctx *v, const json_t *spec, const json_t *status,
                              parse_mode mode, quota *q)
{
    const json_t *sh = spec ? json_object_get(spec, "hard") : NULL;
    const json_t *th = status ? json_object_get(status, "hard") : NULL;
    const json_t *used = status ? json_object_get(status, "used") : NULL;
    if (mode == PARSE_VALIDATE) {
        td_resources other;
        td_resources_init(&other);
        td_status s = parse_list(v, sh, "spec.hard", true, &q->hard);
        if (s == TD_OK)
            s = parse_list(v, th, "status.hard", false, &other);
        if (s == TD_OK)
            s = parse_list(v, used, "status.used", false, &q->used);
        td_resources_fini(&other);
        return s;
    }
    bool st = mode == PARSE_STATUS;
    const json_t *hard = st ? th : sh;
    const char *field = st ? "status.hard" : "spec.hard";
    if (hard == NULL || json_is_null(hard)) {
        hard = st ? sh : th;
        field = st ? "spec.hard" : "status.hard";
    }
    TD_TRY(parse_list(v, hard, field, false, &q->hard));
    return st ? parse_list(v, used, "status.used", false, &q->used) : TD_OK;
}

/* Parses obj into *q (which it initialises; finished here on failure).
 * Errors go through v: the config's "FILE:LINE: ResourceQuota NS/NAME:
 * FIELD: MSG", or the check's "ResourceQuota \"NAME\": FIELD: MSG". */
static td_status quota_parse(td_vctx *v, parse_mode mode, quota *q)
{
    const json_t *obj = v->obj;
    const json_t *spec = json_object_get(obj, "spec"), *status = json_object_get(obj, "status");
    const char *name = td_json_str(obj, "metadata.name");
    td_status s;

    memset(q, 0, sizeof *q);
    q->name = name ? name : "";
    td_resources_init(&q->hard);
    td_resources_init(&q->used);
    td_resources_init(&q->restricted);
    td_resources_init(&q->headroom);
    if (spec != NULL && !json_is_null(spec) && !json_is_object(spec))
        s = td_vfail(v, spec, "spec", "must be a mapping");
    else if (status != NULL && !json_is_null(status) && !json_is_object(status))
        s = td_vfail(v, status, "status", "must be a mapping");
    else if ((s = parse_selectors(v, json_is_object(spec) ? spec : NULL, q)) == TD_OK)
        s = parse_limits(v, json_is_object(spec) ? spec : NULL,
                         json_is_object(status) ? status : NULL, mode, q);
    if (s != TD_OK)
        quota_fini(q);
    return s;
}

/* The API server's rules on a scope selector's requirements, for a
 * ResourceQuota's scopeSelector and the limitedResources' matchScopes. */
td_status td_quota_validate_scope_exprs(td_vctx *v, const json_t *exprs, const char *base)
{
    size_t i;
    json_t *x;
    if (exprs && !json_is_array(exprs))
        return td_vfail(v, exprs, base, "must be a list");
    json_array_foreach(exprs, i, x)
    {
        char f[128];
        snprintf(f, sizeof f, "%s[%zu]", base, i);
        const char *scope = td_json_str(x, "scopeName");
        const char *op = td_json_str(x, "operator");
        json_t *values = json_object_get(x, "values");
        if (!scope_known(scope))
            return td_vfail(v, x, f, "unsupported scopeName \"%s\"", scope ? scope : "");
        if (!op || !(strcmp(op, "In") == 0 || strcmp(op, "NotIn") == 0 ||
                     strcmp(op, "Exists") == 0 || strcmp(op, "DoesNotExist") == 0))
            return td_vfail(v, x, f, "operator must be In, NotIn, Exists or DoesNotExist");
        TD_TRY(td_v_string_array(v, values, f));
        int want_values = strcmp(op, "In") == 0 || strcmp(op, "NotIn") == 0;
        size_t nv = json_array_size(values);
        if (want_values && nv == 0)
            return td_vfail(v, x, f,
                            "must be at least one value when `operator` is 'In' or 'NotIn' "
                            "for scope selector");
        if (!want_values && nv)
            return td_vfail(v, x, f, "must be no value when `operator` is '%s'", op);
        if (strcmp(scope, "PriorityClass") != 0 &&
            !(strcmp(op, "Exists") == 0 || strcmp(op, "DoesNotExist") == 0))
            return td_vfail(
                v, x, f,
                "must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, "
                "ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, "
                "ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity");
    }
    return TD_OK;
}

td_status td_quota_validate(td_vctx *v)
{
    quota q;
    TD_TRY(quota_parse(v, PARSE_VALIDATE, &q));
    quota_fini(&q);
    size_t i;
    json_t *x;
    json_array_foreach(td_json_path(v->obj, "spec.scopes"), i, x)
    {
        if (!scope_known(json_string_value(x)))
            return td_vfail(v, x, "spec.scopes", "unsupported scope \"%s\"",
                            json_string_value(x));
    }
    return td_quota_validate_scope_exprs(
        v, td_json_path(v->obj, "spec.scopeSelector.matchExpressions"),
        "spec.scopeSelector.matchExpressions");
}

/* Go's %v of a ScopedResourceSelectorRequirement: {PriorityClass In [a b]}. */
static void format_selector(td_strbuf *b, const scope_selector *sel)
{
    size_t i;
    const json_t *v;

    td_strbuf_append(b, "{");
    td_strbuf_append(b, sel->scope_name);
    td_strbuf_append(b, " ");
    td_strbuf_append(b, sel->op);
    td_strbuf_append(b, " [");
    if (sel->values)
        json_array_foreach(sel->values, i, v)
        {
            if (i > 0)
                td_strbuf_append(b, " ");
            td_strbuf_append(b, json_string_value(v));
        }
    td_strbuf_append(b, "]}");
}

/* podMatchesScopeFunc. TD_EINVAL (message set) for a selector that
 * ScopedResourceSelectorRequirementsAsSelector rejects. */
static td_status scope_matches(const scope_selector *sel, const pod_info *pi, const quota *q,
                               bool *match, td_err *err)
{
    size_t nvalues = sel->values ? json_array_size(sel->values) : 0;
    const char *problem = NULL;
    char problem_buf[256];
    bool has_label, in_values = false;
    size_t i;
    const json_t *v;

    *match = false;
    switch (sel->kind) {
    case SCOPE_TERMINATING: *match = pi->terminating; break;
    case SCOPE_NOT_TERMINATING: *match = !pi->terminating; break;
    case SCOPE_BEST_EFFORT: *match = is_best_effort(pi); break;
    case SCOPE_NOT_BEST_EFFORT: *match = !is_best_effort(pi); break;
    case SCOPE_CROSS_NAMESPACE: *match = uses_cross_namespace_affinity(pi); break;
    case SCOPE_PRIORITY_CLASS:
    case SCOPE_OTHER: break;
    }
    if (sel->kind != SCOPE_PRIORITY_CLASS)
        return TD_OK;

    has_label = pi->priority_class[0] != '\0';
    if (sel->opk == OP_EXISTS) {
        /* Checked for existence alone, without building a selector. */
        *match = has_label;
        return TD_OK;
    }
    if (sel->opk == OP_IN || sel->opk == OP_NOT_IN) {
        if (nvalues == 0)
            problem = "values: Invalid value: []string{}: for 'in', 'notin' operators, values "
                      "set can't be empty";
    } else if (sel->opk == OP_DOES_NOT_EXIST) {
        if (nvalues != 0)
            problem = "values: Invalid value: values set must be empty for exists and does not "
                      "exist";
    } else {
        snprintf(problem_buf, sizeof problem_buf, "\"%.200s\" is not a valid scope selector operator",
                 sel->op);
        problem = problem_buf;
    }
    if (problem != NULL) {
        td_strbuf b = TD_STRBUF_INIT(STRBUF_MAX);
        td_status s;
        format_selector(&b, sel);
        if (b.failed)
            s = td_err_set(err, TD_ENOMEM, "out of memory");
        else
            s = td_err_set(err, TD_EINVAL,
                           "error matching scopes of quota %s, err: error on matching scope %s: "
                           "failed to parse and convert selector: %s",
                           q->name, td_strbuf_str(&b), problem);
        free(b.s);
        return s;
    }
    if (sel->values)
        json_array_foreach(sel->values, i, v) if (strcmp(json_string_value(v), pi->priority_class) == 0)
            in_values = true;
    if (sel->opk == OP_IN)
        *match = has_label && in_values;
    else if (sel->opk == OP_NOT_IN)
        *match = !has_label || !in_values;
    else
        *match = !has_label;
    return TD_OK;
}

/* true if the pod matches every scope selector of q. */
static td_status quota_scopes_match(const quota *q, const pod_info *pi, bool *match, td_err *err)
{
    size_t i;

    *match = true;
    for (i = 0; i < q->nselectors; i++) {
        bool m;
        td_status s = scope_matches(&q->selectors[i], pi, q, &m, err);
        if (s != TD_OK)
            return s;
        *match = *match && m;
    }
    return TD_OK;
}

/* The hard names the pod evaluator tracks (MatchingResources). */
static td_status restricted_resources(const quota *q, td_resources *out)
{
    size_t i;
    td_status s = TD_OK;

    clear(out);
    for (i = 0; i < q->hard.n && s == TD_OK; i++)
        if (pod_tracks(q->hard.items[i].name))
            s = td_resources_set(out, q->hard.items[i].name, &q->hard.items[i].q);
    return s;
}

/* Whether a container's own usage names include a validation-set name. */
static bool container_sets(const td__pod_container *c, const char *name)
{
    if (strcmp(name, "cpu") == 0 || strcmp(name, "requests.cpu") == 0)
        return td_resources_get(&c->requests, "cpu") != NULL;
    if (strcmp(name, "memory") == 0 || strcmp(name, "requests.memory") == 0)
        return td_resources_get(&c->requests, "memory") != NULL;
    if (strcmp(name, "limits.cpu") == 0)
        return td_resources_get(&c->limits, "cpu") != NULL;
    if (strcmp(name, "limits.memory") == 0)
        return td_resources_get(&c->limits, "memory") != NULL;
    return true;
}

static bool in_validation_set(const char *name)
{
    static const char *const set[] = {"cpu",          "memory",          "requests.cpu",
                                      "requests.memory", "limits.cpu", "limits.memory"};
    size_t i;

    for (i = 0; i < sizeof set / sizeof set[0]; i++)
        if (strcmp(name, set[i]) == 0)
            return true;
    return false;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* podEvaluator.Constraints: every container must set the cpu/memory
 * requests and limits a matching quota tracks (a historical mistake kept for
 * compatibility), unless the pod sets pod-level resources. On a violation
 * appends "cpu for: a,b; memory for: a" to msg. */
static td_status constraints(const td_resources *restricted, const pod_info *pi, td_strbuf *msg)
{
    const td__pod *p = &pi->res;
    size_t total = p->ncontainers + p->ninit_containers;
    const char **names;
    size_t i, j, n;
    bool any = false;

    if (td__pod_level_set(p) || total == 0)
        return TD_OK;
    names = malloc(total * sizeof *names);
    if (names == NULL)
        return TD_ENOMEM;
    for (i = 0; i < restricted->n; i++) {
        const char *r = restricted->items[i].name;
        if (!in_validation_set(r))
            continue;
        n = 0;
        for (j = 0; j < total; j++) {
            const td__pod_container *c = j < p->ncontainers
                                             ? &p->containers[j]
                                             : &p->init_containers[j - p->ncontainers];
            if (!container_sets(c, r))
                names[n++] = c->name;
        }
        if (n == 0)
            continue;
        qsort(names, n, sizeof *names, cmp_str);
        if (any)
            td_strbuf_append(msg, "; ");
        any = true;
        td_strbuf_append(msg, r);
        td_strbuf_append(msg, " for: ");
        for (j = 0; j < n; j++) {
            if (j > 0 && strcmp(names[j], names[j - 1]) == 0)
                continue; /* a set of names */
            if (j > 0)
                td_strbuf_append(msg, ",");
            td_strbuf_append(msg, names[j]);
        }
    }
    free(names);
    return msg->failed ? TD_ENOMEM : TD_OK;
}

/* hasUsageStats: every tracked hard name has a status.used value. */
static bool has_usage_stats(const quota *q, const td_resources *restricted)
{
    size_t i;

    for (i = 0; i < restricted->n; i++)
        if (td_resources_get(&q->used, restricted->items[i].name) == NULL)
            return false;
    return true;
}

/* The quota controller's CalculateUsage for pods: zero for each tracked
 * name, plus the usage of each used pod in the quota's scopes. */
static td_status compute_used(quota *q, const td_resources *restricted, const pod_info *used_pods,
                              const td_resources *usages, size_t nused, td_err *err)
{
    td_resources sum, masked;
    td_quantity zero;
    size_t i;
    td_status s = TD_OK;

    td_resources_init(&sum);
    td_resources_init(&masked);
    td_quantity_zero(&zero, TD_QFMT_DECIMAL_SI);
    for (i = 0; i < restricted->n && s == TD_OK; i++)
        s = td_resources_set(&sum, restricted->items[i].name, &zero);
    for (i = 0; i < nused && s == TD_OK; i++) {
        bool match;
        s = quota_scopes_match(q, &used_pods[i], &match, err);
        if (s == TD_OK && match)
            s = td_resources_add(&sum, &usages[i]);
    }
    if (s == TD_OK)
        s = mask(&sum, restricted, &masked);
    if (s == TD_OK) {
        td_resources_fini(&q->used);
        q->used = masked;
        td_resources_init(&masked);
    }
    td_resources_fini(&sum);
    td_resources_fini(&masked);
    return s;
}

/* CheckRequest's first pass: which quotas the pod concerns (its scopes
 * match and the quota tracks a resource pods use), each checked for the
 * fields the pod must set and for usage it can be compared with; sets
 * interesting[i] and *n. TD_EFORBIDDEN or TD_EINVAL with err set (return
 * as is); another failure with err unset. msg is scratch, left empty. */
static td_status select_quotas(const pod_info *pod, quota *qs, size_t nq,
                               const pod_info *used_pods, const td_resources *usages,
                               size_t nused, bool from_status, bool *interesting, size_t *n,
                               td_strbuf *msg, td_err *err)
{
    for (size_t i = 0; i < nq; i++) {
        bool match;
        td_status s = quota_scopes_match(&qs[i], pod, &match, err);
        if (s != TD_OK)
            return s;
        const td_resources *restricted = &qs[i].restricted;
        if (!match || restricted->n == 0)
            continue;
        if ((s = constraints(restricted, pod, msg)) != TD_OK)
            return td_err_set(err, s, "checking resource quotas: %s", td_strerror(s));
        if (msg->len > 0)
            return td_err_set(err, TD_EFORBIDDEN, "failed quota: %s: must specify %s",
                              qs[i].name, td_strbuf_str(msg));
        if (from_status && !has_usage_stats(&qs[i], restricted)) {
            for (size_t k = 0; k < restricted->n; k++) {
                if (k > 0)
                    td_strbuf_append(msg, ",");
                td_strbuf_append(msg, restricted->items[k].name);
            }
            return td_err_set(err, TD_EFORBIDDEN, "status unknown for quota: %s, resources: %s",
                              qs[i].name, td_strbuf_str(msg));
        }
        if (!from_status &&
            (s = compute_used(&qs[i], restricted, used_pods, usages, nused, err)) != TD_OK)
            return s;
        interesting[i] = true;
        (*n)++;
    }
    return TD_OK;
}

/* "exceeded quota: NAME, requested: ..., used: ..., limited: ..." into msg
 * for q, whose exceeded limits are exceeded. TD_ENOMEM if it did not fit. */
static td_status exceeded_message(const quota *q, const td_resources *requested,
                                  const td_resources *exceeded, td_strbuf *msg)
{
    td_resources tmp;
    td_resources_init(&tmp);
    td_strbuf_append(msg, "exceeded quota: ");
    td_strbuf_append(msg, q->name);
    td_strbuf_append(msg, ", requested: ");
    td_status s = mask(requested, exceeded, &tmp);
    pretty_print(msg, &tmp);
    td_strbuf_append(msg, ", used: ");
    if (s == TD_OK)
        s = mask(&q->used, exceeded, &tmp);
    pretty_print(msg, &tmp);
    td_strbuf_append(msg, ", limited: ");
    if (s == TD_OK)
        s = mask(&q->hard, exceeded, &tmp);
    pretty_print(msg, &tmp);
    td_resources_fini(&tmp);
    return s != TD_OK || msg->failed ? TD_ENOMEM : TD_OK;
}

/* The limits of q that used + delta would pass, into *exceeded (emptied
 * first), and the part of delta q tracks into *requested. */
static td_status over_limits(const quota *q, const td_resources *delta, td_resources *requested,
                             td_resources *exceeded)
{
    td_resources new_usage;
    td_resources_init(&new_usage);
    clear(exceeded);
    td_status s = mask(delta, &q->hard, requested);
    if (s == TD_OK)
        s = td_resources_copy(&new_usage, &q->used);
    if (s == TD_OK)
        s = td_resources_add(&new_usage, requested);
    for (size_t k = 0; k < requested->n && s == TD_OK; k++) {
        const char *name = requested->items[k].name;
        const td_quantity *now = td_resources_get(&new_usage, name);
        const td_quantity *hard = td_resources_get(&q->hard, name);
        if (now != NULL && hard != NULL && td_quantity_cmp(now, hard) > 0)
            s = td_resources_set(exceeded, name, hard);
    }
    td_resources_fini(&new_usage);
    return s;
}

/* The admission check proper, on parsed input. */
static td_status check(const pod_info *pod, quota *qs, size_t nq, const pod_info *used_pods,
                       const td_resources *usages, size_t nused, bool from_status, td_err *err)
{
    td_resources usage, delta, requested, exceeded;
    bool *interesting = NULL;
    size_t i, ninteresting = 0;
    td_status s = TD_OK;
    td_strbuf msg = TD_STRBUF_INIT(STRBUF_MAX);

    if (nq == 0)
        return TD_OK;
    td_resources_init(&usage);
    td_resources_init(&delta);
    td_resources_init(&requested);
    td_resources_init(&exceeded);
    interesting = calloc(nq, sizeof *interesting);
    if (interesting == NULL) {
        s = TD_ENOMEM;
        goto out;
    }
    s = select_quotas(pod, qs, nq, used_pods, usages, nused, from_status, interesting,
                      &ninteresting, &msg, err);
    if (s != TD_OK)
        goto out_err;

    s = pod_usage(pod, &usage);
    if (s != TD_OK)
        goto out;
    for (i = 0; i < usage.n; i++) {
        if (td_quantity_sign(&usage.items[i].q) >= 0)
            continue;
        if (msg.len > 0)
            td_strbuf_append(&msg, ",");
        td_strbuf_append(&msg, usage.items[i].name);
    }
    if (msg.len > 0) {
        s = td_err_set(err, TD_EFORBIDDEN, "quota usage is negative for resource(s): %s",
                       td_strbuf_str(&msg));
        goto out_err;
    }
    /* RemoveZeros: a zero request changes no quota. */
    for (i = 0; i < usage.n; i++)
        if (td_quantity_sign(&usage.items[i].q) != 0) {
            s = td_resources_set(&delta, usage.items[i].name, &usage.items[i].q);
            if (s != TD_OK)
                goto out;
        }
    if (ninteresting == 0 || delta.n == 0)
        goto out;

    for (i = 0; i < nq; i++) {
        if (!interesting[i])
            continue;
        s = over_limits(&qs[i], &delta, &requested, &exceeded);
        if (s != TD_OK)
            goto out;
        if (exceeded.n == 0)
            continue;
        s = exceeded_message(&qs[i], &requested, &exceeded, &msg);
        if (s != TD_OK)
            goto out;
        s = td_err_set(err, TD_EFORBIDDEN, "%s", td_strbuf_str(&msg));
        goto out_err;
    }

out:
    if (s == TD_OK && msg.failed)
        s = TD_ENOMEM;
    if (s != TD_OK)
        s = td_err_set(err, s, "checking resource quotas: %s", td_strerror(s));
out_err:
    free(interesting);
    free(msg.s);
    td_resources_fini(&usage);
    td_resources_fini(&delta);
    td_resources_fini(&requested);
    td_resources_fini(&exceeded);
    return s;
}

/* The NEED_* bits of the fields a container must set for restricted. */
static unsigned needs_of(const td_resources *restricted)
{
    unsigned need = 0;
    for (size_t i = 0; i < restricted->n; i++) {
        const char *r = restricted->items[i].name;
        if (strcmp(r, "cpu") == 0 || strcmp(r, "requests.cpu") == 0)
            need |= NEED_REQ_CPU;
        else if (strcmp(r, "memory") == 0 || strcmp(r, "requests.memory") == 0)
            need |= NEED_REQ_MEM;
        else if (strcmp(r, "limits.cpu") == 0)
            need |= NEED_LIM_CPU;
        else if (strcmp(r, "limits.memory") == 0)
            need |= NEED_LIM_MEM;
    }
    return need;
}

static td_status quota_precompute(quota *q, bool from_status)
{
    q->need = needs_of(&q->restricted);
    q->stats_ok = has_usage_stats(q, &q->restricted);
    q->headroom_ok = true;
    td_status s = td_resources_copy(&q->headroom, &q->hard);
    for (size_t k = 0; k < q->headroom.n && s == TD_OK && from_status; k++) {
        const td_quantity *used = td_resources_get(&q->used, q->headroom.items[k].name);
        if (used != NULL && td_quantity_sub(&q->headroom.items[k].q, used) != TD_OK)
            q->headroom_ok = false;
    }
    return s;
}

/* The NEED_* bits some container of the pod does not set (none when
 * pod-level resources are set or there are no containers): what
 * constraints() reports, as bits. */
static unsigned containers_missing(const td__pod *p)
{
    unsigned missing = 0;
    if (td__pod_level_set(p))
        return 0;
    for (size_t j = 0; j < p->ncontainers + p->ninit_containers; j++) {
        const td__pod_container *c =
            j < p->ncontainers ? &p->containers[j] : &p->init_containers[j - p->ncontainers];
        if (!td_resources_get(&c->requests, "cpu"))
            missing |= NEED_REQ_CPU;
        if (!td_resources_get(&c->requests, "memory"))
            missing |= NEED_REQ_MEM;
        if (!td_resources_get(&c->limits, "cpu"))
            missing |= NEED_LIM_CPU;
        if (!td_resources_get(&c->limits, "memory"))
            missing |= NEED_LIM_MEM;
    }
    return missing;
}

/* A predicate for the common case: true when check() would admit the pod
 * (every quota's constraints met, usage known, nothing negative, nothing
 * exceeded), computed without building a message, copying a quota or
 * allocating more than the pod's usage. false whenever it finds
 * otherwise or cannot tell (used pods to count, an error): check() then
 * decides and words the answer. Only values are compared, as in check(). */
static bool check_fast(const pod_info *pod, const quota *qs, size_t nq, bool from_status,
                       size_t nused)
{
    td_resources usage;
    unsigned missing;
    bool ok = true;
    size_t i, k;

    if (nq == 0)
        return true;
    if (!from_status && nused > 0)
        return false;
    missing = containers_missing(&pod->res);
    td_resources_init(&usage);
    if (pod_usage(pod, &usage) != TD_OK) {
        td_resources_fini(&usage);
        return false;
    }
    for (k = 0; k < usage.n; k++)
        if (td_quantity_sign(&usage.items[k].q) < 0)
            ok = false;
    for (i = 0; i < nq && ok; i++) {
        const quota *q = &qs[i];
        bool match;
        if (quota_scopes_match(q, pod, &match, NULL) != TD_OK) {
            ok = false;
            break;
        }
        if (!match || q->restricted.n == 0)
            continue;
        if ((q->need & missing) || (from_status && !q->stats_ok) || !q->headroom_ok) {
            ok = false;
            break;
        }
        /* requested = the pod's non-zero usage of q's hard names; each is
         * exceeded when used (zero when counted from no pods) plus it is
         * over hard: when it is over hard - used */
        for (k = 0; k < q->headroom.n && ok; k++) {
            const td_quantity *req = td_resources_get(&usage, q->headroom.items[k].name);
            if (req != NULL && td_quantity_sign(req) != 0 &&
                td_quantity_cmp(req, &q->headroom.items[k].q) > 0)
                ok = false;
        }
    }
    td_resources_fini(&usage);
    return ok;
}

/* The check with the quotas parsed (qs, nquotas of them): the pod, then
 * the used pods, then the decision. check() writes each quota's used when
 * counting used pods, so it runs on a shallow copy of qs whose used it owns. */
static td_status check_with(const json_t *pod, const td__pod *parsed, const quota *qs_in,
                            size_t nquotas, bool from_status, json_t *const *used_pods,
                            size_t nused, td_err *err)
{
    pod_info pi;
    pod_info *used = NULL;
    td_resources *usages = NULL;
    quota *qs = NULL;
    size_t i, nused_parsed = 0;
    td_status s;

    if (from_status)
        nused = 0;
    if (parsed) {
        pi.res = *parsed; /* borrowed: not finished here */
        s = pod_info_rest(pod, &pi, err);
    } else {
        s = pod_info_parse(pod, &pi, err);
    }
    if (s != TD_OK)
        return s;
    if (check_fast(&pi, qs_in, nquotas, from_status, nused)) {
#ifndef NDEBUG
        /* the predicate must agree with the check it stands for */
        quota *full = nquotas ? malloc(nquotas * sizeof *full) : NULL;
        if (full) {
            memcpy(full, qs_in, nquotas * sizeof *full);
            if (!from_status)
                for (i = 0; i < nquotas; i++)
                    td_resources_init(&full[i].used);
            s = check(&pi, full, nquotas, NULL, NULL, 0, from_status, err);
            assert(s == TD_OK || s == TD_ENOMEM);
            if (!from_status)
                for (i = 0; i < nquotas; i++)
                    td_resources_fini(&full[i].used);
            free(full);
        }
#endif
        if (!parsed)
            td__pod_fini(&pi.res);
        return TD_OK;
    }
    if (nquotas > 0) {
        qs = malloc(nquotas * sizeof *qs);
        if (qs == NULL) {
            s = td_err_set(err, TD_ENOMEM, "out of memory");
            goto out;
        }
        memcpy(qs, qs_in, nquotas * sizeof *qs);
        if (!from_status)
            for (i = 0; i < nquotas; i++)
                td_resources_init(&qs[i].used);
    }
    if (nused > 0) {
        used = calloc(nused, sizeof *used);
        usages = calloc(nused, sizeof *usages);
        if (used == NULL || usages == NULL) {
            s = td_err_set(err, TD_ENOMEM, "out of memory");
            goto out;
        }
    }
    for (i = 0; i < nused; i++) {
        const json_t *meta = json_object_get(used_pods[i], "metadata");
        const json_t *name = json_is_object(meta) ? json_object_get(meta, "name") : NULL;
        s = pod_info_parse(used_pods[i], &used[i], err);
        if (s != TD_OK) {
            s = td_err_prefix(err, s, "used_pods[%zu] \"%.64s\"", i,
                              json_is_string(name) ? json_string_value(name) : "");
            goto out;
        }
        td_resources_init(&usages[i]);
        nused_parsed++;
        s = pod_usage(&used[i], &usages[i]);
        if (s != TD_OK) {
            s = td_err_set(err, s, "used_pods[%zu]: %s", i, td_strerror(s));
            goto out;
        }
    }
    s = check(&pi, qs, nquotas, used, usages, nused, from_status, err);
out:
    for (i = 0; i < nused_parsed; i++) {
        td__pod_fini(&used[i].res);
        td_resources_fini(&usages[i]);
    }
    free(used);
    free(usages);
    if (qs != NULL && !from_status)
        for (i = 0; i < nquotas; i++)
            td_resources_fini(&qs[i].used);
    free(qs);
    if (!parsed)
        td__pod_fini(&pi.res);
    return s;
}

struct td_quotas {
    quota *qs;
    size_t n;
    bool from_status;
};

static td_status quotas_parse(json_t *const *quotas, size_t nquotas, bool from_status,
                              quota **out, td_err *err)
{
    quota *qs = NULL;
    size_t i;
    *out = NULL;
    if (nquotas == 0)
        return TD_OK;
    qs = calloc(nquotas, sizeof *qs);
    if (qs == NULL)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    for (i = 0; i < nquotas; i++) {
        td_status s;
        if (!json_is_object(quotas[i])) {
            s = td_err_set(err, TD_EINVAL, "quotas[%zu]: must be a mapping", i);
        } else {
            const char *name = td_json_str(quotas[i], "metadata.name");
            td_vctx v = {.obj = quotas[i], .kind = "ResourceQuota", .err = err};
            snprintf(v.who, sizeof v.who, "ResourceQuota \"%.64s\"", name ? name : "");
            s = quota_parse(&v, from_status ? PARSE_STATUS : PARSE_PODS, &qs[i]);
        }
        if (s == TD_OK && restricted_resources(&qs[i], &qs[i].restricted) != TD_OK) {
            quota_fini(&qs[i]);
            s = td_err_set(err, TD_ENOMEM, "out of memory");
        }
        if (s == TD_OK && quota_precompute(&qs[i], from_status) != TD_OK) {
            quota_fini(&qs[i]);
            s = td_err_set(err, TD_ENOMEM, "out of memory");
        }
        if (s != TD_OK) {
            quotas_free(qs, i);
            return s;
        }
    }
    *out = qs;
    return TD_OK;
}

td_status td_quota_check(const json_t *pod, json_t *const *quotas, size_t nquotas,
                         json_t *const *used_pods, size_t nused, td_err *err)
{
    bool from_status = used_pods == NULL;
    pod_info pi;
    quota *qs = NULL;
    td_status s;

    if (nquotas > 0 && quotas == NULL)
        return td_err_set(err, TD_EINVAL, "quotas: NULL with nquotas = %zu", nquotas);
    /* The pod is checked before the quotas. */
    s = pod_info_parse(pod, &pi, err);
    if (s != TD_OK)
        return s;
    td__pod_fini(&pi.res);
    s = quotas_parse(quotas, nquotas, from_status, &qs, err);
    if (s != TD_OK)
        return s;
    s = check_with(pod, NULL, qs, nquotas, from_status, used_pods, nused, err);
    quotas_free(qs, nquotas);
    return s;
}

td_status td_quotas_parse(json_t *const *quotas, size_t nquotas, bool from_status,
                          td_quotas **out, td_err *err)
{
    td_quotas *q;
    *out = NULL;
    if (nquotas > 0 && quotas == NULL)
        return td_err_set(err, TD_EINVAL, "quotas: NULL with nquotas = %zu", nquotas);
    q = calloc(1, sizeof *q);
    if (q == NULL)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    td_status s = quotas_parse(quotas, nquotas, from_status, &q->qs, err);
    if (s != TD_OK) {
        free(q);
        return s;
    }
    q->n = nquotas;
    q->from_status = from_status;
    *out = q;
    return TD_OK;
}

void td_quotas_destroy(td_quotas *q)
{
    if (q == NULL)
        return;
    quotas_free(q->qs, q->n);
    free(q);
}

td_status td_quota_check_parsed(const json_t *pod, const td__pod *parsed_pod, const td_quotas *q,
                                json_t *const *used_pods, size_t nused, td_err *err)
{
    bool from_status = used_pods == NULL;
    if (q != NULL && q->n > 0 && q->from_status != from_status)
        return td_err_set(err, TD_EINVAL, "quotas parsed for usage from %s, checked with %s",
                          q->from_status ? "status.used" : "used pods",
                          from_status ? "status.used" : "used pods");
    return check_with(pod, parsed_pod, q ? q->qs : NULL, q ? q->n : 0, from_status, used_pods,
                      nused, err);
}
