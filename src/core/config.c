/* config.c - validated, immutable snapshots of tenantd's objects.
 * Objects are kept as JSON (they are Kubernetes objects, and are served back
 * as such), sorted by (kind, namespace, name) so that a namespace's objects
 * of one kind are one contiguous run. Validation names file, line, object
 * and field, and a failed add leaves the builder as it was. */
#include "tenantd/config.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tenantd/admit.h"
#include "tenantd/budget.h"
#include "tenantd/chargeback.h"
#include "tenantd/duration.h"
#include "tenantd/quantity.h"
#include "tenantd/reqpath.h"
#include "tenantd/tenancy.h"

typedef struct {
    const char *key; /* "Kind\x1fnamespace\x1fname": sorts as (kind, ns, name) */
    json_t *kref;    /* the JSON string holding key: shared, not copied, by snapshots */
    json_t *obj;
} entry;

struct td_config_builder {
    entry *items;
    size_t n, cap;
    size_t nsorted; /* items[0, nsorted) are in key order (the base's) */
};

struct td_config {
    atomic_int refs;
    entry *items; /* sorted by key */
    json_t **objs; /* same order, for borrowed runs */
    size_t n;
    /* Derived values built lazily by readers: the snapshot is immutable, so
     * they never go stale; freed with it. */
    _Atomic(td_config_attachment *) attach[TD_CONFIG_ATTACH_MAX];
};

/* ---- validation context ------------------------------------------------ */

typedef struct {
    const td_manifest *src;
    const json_t *obj;
    const char *kind;
    char who[300]; /* "ResourceQuota team-a/compute" */
    td_err *err;
} vctx;

static td_status vfail(vctx *v, const json_t *node, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static td_status vfail(vctx *v, const json_t *node, const char *field, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!node || !td_manifest_line(v->src, node))
        node = v->obj;
    return td_manifest_err(v->src, node, v->err, TD_EINVAL, "%s: %s: %s", v->who, field, msg);
}

const char *td_json_str(const json_t *obj, const char *path)
{
    return json_string_value(td_json_path(obj, path));
}

td_status td_json_int(const json_t *v, long long min, long long max, long long *out, td_err *err)
{
    if (json_is_integer(v)) {
        long long x = (long long)json_integer_value(v);
        if (x < min || x > max)
            return td_err_set(err, TD_EINVAL, "must be an integer in [%lld, %lld], not %lld", min,
                              max, x);
        *out = x;
        return TD_OK;
    }
    char shown[48];
    if (json_is_real(v)) {
        snprintf(shown, sizeof shown, "%.17g", json_real_value(v));
        if (!strpbrk(shown, ".eEni")) /* 1e3 would read as the integer 1000 */
            strcat(shown, ".0");
    } else {
        char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        snprintf(shown, sizeof shown, "%.40s%s", s ? s : "nothing", s && strlen(s) > 40 ? "..." : "");
        free(s);
    }
    return td_err_set(err, TD_EINVAL, "must be an integer, not %s", shown);
}

td_status td_json_int32(const json_t *v, int32_t *out, td_err *err)
{
    long long x = 0; /* set on TD_OK; gcc -O3 cannot see it */
    td_status st = td_json_int(v, INT32_MIN, INT32_MAX, &x, err);
    if (st == TD_OK)
        *out = (int32_t)x;
    return st;
}

json_t *td_json_copy(const json_t *v)
{
    if (!v)
        return NULL;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        json_t *o = json_object();
        if (!o)
            return NULL;
        for (void *it = json_object_iter((json_t *)v); it; it = json_object_iter_next((json_t *)v, it)) {
            if (json_object_setn_new_nocheck(o, json_object_iter_key(it), json_object_iter_key_len(it),
                                             td_json_copy(json_object_iter_value(it))) != 0) {
                json_decref(o);
                return NULL;
            }
        }
        return o;
    }
    case JSON_ARRAY: {
        json_t *a = json_array();
        size_t i;
        json_t *x;
        if (!a)
            return NULL;
        json_array_foreach(v, i, x)
        {
            if (json_array_append_new(a, td_json_copy(x)) != 0) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    /* Strings and numbers are shared, not copied: nothing changes them in
     * place (see config.h), and a shared one also compares equal at once
     * (json_equal's pointer test) in the JSON Patch diff. */
    case JSON_STRING:
    case JSON_INTEGER:
    case JSON_REAL:
    default: return json_incref((json_t *)v); /* true, false, null: singletons */
    }
}

json_t *td_json_path(const json_t *obj, const char *path)
{
    const json_t *cur = obj;
    const char *p = path;
    /* one pass over each segment, in place: no strchr and strlen both */
    while (cur && *p) {
        const char *e = p;
        while (*e && *e != '.')
            e++;
        size_t n = (size_t)(e - p);
        if (n >= 256)
            return NULL; /* as before: no key that long is looked up */
        if (!json_is_object(cur))
            return NULL;
        cur = json_object_getn(cur, p, n);
        p = *e ? e + 1 : e;
    }
    return (json_t *)cur;
}

const char *td_json_unknown_field(const json_t *m, const char *const *allowed, json_t **val,
                                  char *known, size_t n)
{
    const char *k;
    json_object_foreach((json_t *)m, k, *val)
    {
        const char *const *a = allowed;
        while (*a && strcmp(*a, k) != 0)
            a++;
        if (*a)
            continue;
        known[0] = '\0';
        for (a = allowed; *a; a++) {
            strncat(known, *a, n - strlen(known) - 1);
            if (a[1])
                strncat(known, ", ", n - strlen(known) - 1);
        }
        return k;
    }
    return NULL;
}

/* DNS-1123 subdomain: lowercase alphanumerics, '-' and '.', starting and
 * ending alphanumeric, at most 253 characters. */
static int dns_subdomain(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
        if (!ok)
            return 0;
    }
    return isalnum((unsigned char)s[0]) && isalnum((unsigned char)s[n - 1]);
}

/* DNS-1123 label (namespace names): at most 63, no dots. */
static int dns_label(const char *s)
{
    return dns_subdomain(s) && strlen(s) <= 63 && !strchr(s, '.');
}

static td_status check_string_map(vctx *v, const json_t *m, const char *field)
{
    if (!m)
        return TD_OK;
    if (!json_is_object(m))
        return vfail(v, m, field, "must be a map of strings");
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)m, k, val)
    {
        if (!json_is_string(val))
            return vfail(v, val, field, "value of \"%s\" must be a string (quote it)", k);
    }
    return TD_OK;
}

static td_status check_quantity(vctx *v, const json_t *node, const char *field)
{
    char buf[64];
    const char *s;
    if (json_is_string(node)) {
        s = json_string_value(node);
    } else if (json_is_integer(node)) {
        snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(node));
        s = buf;
    } else if (json_is_real(node)) {
        snprintf(buf, sizeof buf, "%.15g", json_real_value(node));
        s = buf;
    } else {
        return vfail(v, node, field, "must be a quantity such as \"500m\" or \"8Gi\"");
    }
    td_quantity q;
    td_err qe;
    if (td_quantity_parse(s, &q, &qe) != TD_OK)
        return vfail(v, node, field, "\"%s\" is not a quantity", s);
    if (td_quantity_sign(&q) < 0)
        return vfail(v, node, field, "\"%s\" must not be negative", s);
    return TD_OK;
}

static td_status check_quantity_map(vctx *v, const json_t *m, const char *field)
{
    if (!m)
        return TD_OK;
    if (!json_is_object(m))
        return vfail(v, m, field, "must be a map of resource name to quantity");
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)m, k, val)
    {
        char f[512];
        snprintf(f, sizeof f, "%s.%s", field, k);
        td_status st = check_quantity(v, val, f);
        if (st != TD_OK)
            return st;
    }
    return TD_OK;
}

static td_status check_string_array(vctx *v, const json_t *a, const char *field)
{
    if (!a)
        return TD_OK;
    if (!json_is_array(a))
        return vfail(v, a, field, "must be a list of strings");
    size_t i;
    json_t *x;
    json_array_foreach((json_t *)a, i, x)
    {
        if (!json_is_string(x))
            return vfail(v, x, field, "item %zu must be a string", i);
    }
    return TD_OK;
}

/* Strict decoding for tenantd's own kinds: an unknown field is an error
 * that names it, never silently ignored. allowed is NULL-terminated. */
static td_status check_fields(vctx *v, const json_t *m, const char *field,
                              const char *const *allowed)
{
    if (!m)
        return TD_OK;
    if (!json_is_object(m))
        return vfail(v, m, field, "must be a mapping");
    json_t *val;
    char list[512];
    const char *k = td_json_unknown_field(m, allowed, &val, list, sizeof list);
    if (k)
        return vfail(v, val, field, "unknown field \"%s\" (known: %s)", k, list);
    return TD_OK;
}

static td_status check_duration(vctx *v, const json_t *node, const char *field)
{
    if (!node)
        return TD_OK;
    int64_t ns;
    if (!json_is_string(node) || td_duration_parse(json_string_value(node), &ns, NULL) != TD_OK)
        return vfail(v, node, field, "must be a duration such as \"1s\" or \"500ms\"");
    return TD_OK;
}

static td_status check_number(vctx *v, const json_t *node, const char *field, double min)
{
    if (!node)
        return TD_OK;
    if (!json_is_number(node))
        return vfail(v, node, field, "must be a number");
    if (json_number_value(node) < min)
        return vfail(v, node, field, "must be at least %g", min);
    return TD_OK;
}

/* An optional integer field in [min, INT32_MAX]: counts and limits read
 * into 32-bit fields (a concurrency of 2^32 + 1 must not become 1). */
static td_status check_integer_range(vctx *v, const json_t *node, const char *field,
                                     long long min, long long max)
{
    long long x;
    td_err e;
    if (node && td_json_int(node, min, max, &x, &e) != TD_OK)
        return vfail(v, node, field, "%s", e.msg);
    return TD_OK;
}

static td_status check_integer(vctx *v, const json_t *node, const char *field, long long min)
{
    return check_integer_range(v, node, field, min, INT32_MAX);
}

#define TRY(x)                                                                                     \
    do {                                                                                           \
        td_status st_ = (x);                                                                       \
        if (st_ != TD_OK)                                                                          \
            return st_;                                                                            \
    } while (0)

/* ---- Kubernetes kinds -------------------------------------------------- */

static td_status validate_meta_only(vctx *v)
{
    (void)v;
    return TD_OK;
}

static td_status validate_namespace(vctx *v)
{
    const char *name = td_json_str(v->obj, "metadata.name");
    if (!dns_label(name))
        return vfail(v, td_json_path(v->obj, "metadata.name"), "metadata.name",
                     "\"%s\" is not a valid namespace name (a DNS-1123 label: lowercase "
                     "letters, digits and '-', at most 63)",
                     name);
    return TD_OK;
}

static const char *const quota_scopes[] = {"Terminating", "NotTerminating", "BestEffort",
                                           "NotBestEffort", "PriorityClass",
                                           "CrossNamespacePodAffinity", NULL};

static int in_list(const char *s, const char *const *list)
{
    for (; s && *list; list++)
        if (strcmp(s, *list) == 0)
            return 1;
    return 0;
}

static td_status check_scope_exprs(vctx *v, const json_t *exprs, const char *base);

static td_status validate_quota(vctx *v)
{
    json_t *spec = td_json_path(v->obj, "spec");
    if (spec && !json_is_object(spec))
        return vfail(v, spec, "spec", "must be a mapping");
    TRY(check_quantity_map(v, td_json_path(v->obj, "spec.hard"), "spec.hard"));
    json_t *scopes = td_json_path(v->obj, "spec.scopes");
    TRY(check_string_array(v, scopes, "spec.scopes"));
    size_t i;
    json_t *x;
    json_array_foreach(scopes, i, x)
    {
        if (!in_list(json_string_value(x), quota_scopes))
            return vfail(v, x, "spec.scopes", "unsupported scope \"%s\"", json_string_value(x));
    }
    return check_scope_exprs(v, td_json_path(v->obj, "spec.scopeSelector.matchExpressions"),
                             "spec.scopeSelector.matchExpressions");
}

/* ScopedResourceSelectorRequirements (a ResourceQuota's scopeSelector, the
 * ResourceQuota admission's limitedResources[].matchScopes), as
 * Kubernetes validates them. */
static td_status check_scope_exprs(vctx *v, const json_t *exprs, const char *base)
{
    size_t i;
    json_t *x;
    if (exprs && !json_is_array(exprs))
        return vfail(v, exprs, base, "must be a list");
    json_array_foreach(exprs, i, x)
    {
        char f[128];
        snprintf(f, sizeof f, "%s[%zu]", base, i);
        const char *scope = td_json_str(x, "scopeName");
        const char *op = td_json_str(x, "operator");
        json_t *values = json_object_get(x, "values");
        if (!in_list(scope, quota_scopes))
            return vfail(v, x, f, "unsupported scopeName \"%s\"", scope ? scope : "");
        if (!op || !(strcmp(op, "In") == 0 || strcmp(op, "NotIn") == 0 ||
                     strcmp(op, "Exists") == 0 || strcmp(op, "DoesNotExist") == 0))
            return vfail(v, x, f, "operator must be In, NotIn, Exists or DoesNotExist");
        TRY(check_string_array(v, values, f));
        int want_values = strcmp(op, "In") == 0 || strcmp(op, "NotIn") == 0;
        size_t nv = json_array_size(values);
        if (want_values && nv == 0)
            return vfail(v, x, f, "must be at least one value when `operator` is 'In' or 'NotIn' "
                                  "for scope selector");
        if (!want_values && nv)
            return vfail(v, x, f, "must be no value when `operator` is '%s'", op);
        if (strcmp(scope, "PriorityClass") != 0 && !(strcmp(op, "Exists") == 0 ||
                                                      strcmp(op, "DoesNotExist") == 0))
            return vfail(v, x, f, "must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity");
    }
    return TD_OK;
}

static td_status validate_limitrange(vctx *v)
{
    json_t *limits = td_json_path(v->obj, "spec.limits");
    if (!json_is_array(limits))
        return vfail(v, limits, "spec.limits", "required: a list of limits");
    size_t i;
    json_t *l;
    json_array_foreach(limits, i, l)
    {
        char f[128];
        snprintf(f, sizeof f, "spec.limits[%zu]", i);
        if (!json_is_object(l))
            return vfail(v, l, f, "must be a mapping");
        const char *type = td_json_str(l, "type");
        static const char *const types[] = {"Container", "Pod", "PersistentVolumeClaim", NULL};
        if (!in_list(type, types))
            return vfail(v, l, f, "type must be Container, Pod or PersistentVolumeClaim");
        static const char *const maps[] = {"max", "min", "default", "defaultRequest",
                                           "maxLimitRequestRatio", NULL};
        for (const char *const *m = maps; *m; m++) {
            char mf[160];
            snprintf(mf, sizeof mf, "%s.%s", f, *m);
            TRY(check_quantity_map(v, json_object_get(l, *m), mf));
        }
        if (strcmp(type, "Container") != 0 &&
            (json_object_get(l, "default") || json_object_get(l, "defaultRequest")))
            return vfail(v, l, f, "default and defaultRequest may only be set for type "
                                  "Container");
    }
    return TD_OK;
}

static td_status validate_priorityclass(vctx *v)
{
    json_t *value = json_object_get(v->obj, "value");
    if (!value)
        return vfail(v, value, "value", "required: an integer priority");
    int32_t x;
    td_err e;
    if (td_json_int32(value, &x, &e) != TD_OK)
        return vfail(v, value, "value", "%s", e.msg);
    if (x > 1000000000LL && strncmp(td_json_str(v->obj, "metadata.name"), "system-", 7) != 0)
        return vfail(v, value, "value", "must be at most 1000000000 for user classes");
    json_t *gd = json_object_get(v->obj, "globalDefault");
    if (gd && !json_is_boolean(gd))
        return vfail(v, gd, "globalDefault", "must be true or false");
    const char *pp = td_json_str(v->obj, "preemptionPolicy");
    if (json_object_get(v->obj, "preemptionPolicy") &&
        !(pp && (strcmp(pp, "Never") == 0 || strcmp(pp, "PreemptLowerPriority") == 0)))
        return vfail(v, json_object_get(v->obj, "preemptionPolicy"), "preemptionPolicy",
                     "must be Never or PreemptLowerPriority");
    return TD_OK;
}

/* node.k8s.io/v1 RuntimeClass: handler is required, a DNS-1123 label. */
static td_status validate_runtimeclass(vctx *v)
{
    json_t *h = json_object_get(v->obj, "handler");
    if (!json_is_string(h) || !dns_label(json_string_value(h)))
        return vfail(v, h, "handler",
                     "required: the CRI handler, a DNS-1123 label (e.g. runsc for gVisor)");
    json_t *sched = json_object_get(v->obj, "scheduling");
    if (sched && !json_is_object(sched))
        return vfail(v, sched, "scheduling", "must be a mapping");
    TRY(check_string_map(v, json_object_get(sched, "nodeSelector"), "scheduling.nodeSelector"));
    json_t *tols = json_object_get(sched, "tolerations");
    if (tols && !json_is_array(tols))
        return vfail(v, tols, "scheduling.tolerations", "must be a list");
    TRY(check_quantity_map(v, td_json_path(v->obj, "overhead.podFixed"), "overhead.podFixed"));
    return TD_OK;
}

static td_status validate_pod(vctx *v)
{
    json_t *c = td_json_path(v->obj, "spec.containers");
    if (!json_is_array(c) || json_array_size(c) == 0)
        return vfail(v, c, "spec.containers", "required: at least one container");
    return TD_OK;
}

/* ---- tenantd kinds ----------------------------------------------------- */

/* Tenant spec.storage: {bucket, prefix, storageClasses, identity}. */
static td_status validate_storage(vctx *v, const json_t *st)
{
    static const char *const fields[] = {"bucket", "prefix", "storageClasses", "identity", NULL};
    static const char *const idf[] = {"gcpServiceAccount", "awsRoleArn", NULL};
    if (!st)
        return TD_OK;
    TRY(check_fields(v, st, "spec.storage", fields));
    json_t *b = json_object_get(st, "bucket");
    json_t *p = json_object_get(st, "prefix");
    if (!json_is_string(b) || !dns_subdomain(json_string_value(b)) ||
        strlen(json_string_value(b)) < 3 || strlen(json_string_value(b)) > 63)
        return vfail(v, b ? b : st, "spec.storage.bucket",
                     "required: a bucket name (3 to 63 lowercase letters, digits, '-' and '.'), "
                     "without scheme");
    if (p && !json_is_string(p))
        return vfail(v, p, "spec.storage.prefix", "must be a string such as \"team-a/\"");
    const char *why = p ? td_storage_prefix_problem(json_string_value(p)) : NULL;
    if (why)
        return vfail(v, p, "spec.storage.prefix", "\"%s\" %s", json_string_value(p), why);
    json_t *classes = json_object_get(st, "storageClasses");
    TRY(check_string_array(v, classes, "spec.storage.storageClasses"));
    size_t i;
    json_t *x;
    json_array_foreach(classes, i, x)
    {
        if (!dns_subdomain(json_string_value(x)))
            return vfail(v, x, "spec.storage.storageClasses", "\"%s\" is not a StorageClass name",
                         json_string_value(x));
    }
    json_t *id = json_object_get(st, "identity");
    TRY(check_fields(v, id, "spec.storage.identity", idf));
    json_t *gsa = json_object_get(id, "gcpServiceAccount");
    json_t *arn = json_object_get(id, "awsRoleArn");
    if (gsa && (!json_is_string(gsa) || !strchr(json_string_value(gsa), '@') ||
                strlen(json_string_value(gsa)) < 24 ||
                strcmp(json_string_value(gsa) + strlen(json_string_value(gsa)) - 24,
                       ".iam.gserviceaccount.com") != 0))
        return vfail(v, gsa, "spec.storage.identity.gcpServiceAccount",
                     "must be a Google service account email (NAME@PROJECT.iam.gserviceaccount.com)");
    if (arn && (!json_is_string(arn) || strncmp(json_string_value(arn), "arn:aws", 7) != 0 ||
                !strstr(json_string_value(arn), ":role/")))
        return vfail(v, arn, "spec.storage.identity.awsRoleArn",
                     "must be an IAM role ARN (arn:aws:iam::ACCOUNT:role/NAME)");
    return TD_OK;
}

/* enforcement: "enforce" | "shadow", or a mapping of limit -> mode. */
static td_status check_enforcement(vctx *v, const json_t *e, const char *field)
{
    static const char *const points[] = {"rate", "concurrency", NULL};
    if (!e)
        return TD_OK;
    const json_t *one = e;
    const char *key = NULL;
    char f[128];
    if (json_is_object(e)) {
        TRY(check_fields(v, (json_t *)e, field, points));
        json_object_foreach((json_t *)e, key, one)
        {
            snprintf(f, sizeof f, "%s.%s", field, key);
            const char *m = json_string_value(one);
            if (!m || (strcmp(m, "enforce") != 0 && strcmp(m, "shadow") != 0))
                return vfail(v, one, f, "must be enforce or shadow");
        }
        return TD_OK;
    }
    const char *m = json_string_value(one);
    if (!m || (strcmp(m, "enforce") != 0 && strcmp(m, "shadow") != 0))
        return vfail(v, e, field,
                     "must be enforce or shadow, or a mapping {rate: MODE, concurrency: MODE}");
    return TD_OK;
}

/* A budget amount: a decimal string ("500", "0.25") or a number, >= 0. */
static td_status budget_amount(vctx *v, const json_t *a, const char *f, int64_t *nano)
{
    char buf[64];
    const char *txt = json_string_value(a);
    if (json_is_integer(a)) {
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(a));
        txt = buf;
    } else if (json_is_real(a)) {
        snprintf(buf, sizeof buf, "%.9f", json_real_value(a));
        txt = buf;
    }
    if (!a)
        return vfail(v, a, f, "required: an amount in the CostPolicy's currency, e.g. \"500\"");
    if (!txt)
        return vfail(v, a, f, "must be a decimal amount such as \"500\" or \"0.25\"");
    if (txt[0] == '-')
        return vfail(v, a, f, "%s is negative; a budget is an amount >= 0", txt);
    td_err e;
    if (td_money_parse(txt, nano, &e) != TD_OK)
        return vfail(v, a, f, "%s", e.msg);
    return TD_OK;
}

/* spec.budgets: [{amount: "500", period: day|week|month, enforcement}],
 * one budget per period. Prices are checked across objects (cross_check). */
static td_status validate_budgets(vctx *v, const json_t *bs, const char *field)
{
    static const char *const fields[] = {"amount", "period", "enforcement", NULL};
    if (!bs)
        return TD_OK;
    if (!json_is_array(bs))
        return vfail(v, bs, field, "must be a list of {amount, period, enforcement}");
    size_t i;
    json_t *b;
    bool seen[TD_PERIOD_COUNT] = {false};
    json_array_foreach(bs, i, b)
    {
        char f[160];
        snprintf(f, sizeof f, "%s[%zu]", field, i);
        if (!json_is_object(b))
            return vfail(v, b, f, "must be a mapping {amount, period, enforcement}");
        TRY(check_fields(v, b, f, fields));
        json_t *a = json_object_get(b, "amount");
        snprintf(f, sizeof f, "%s[%zu].amount", field, i);
        int64_t nano;
        TRY(budget_amount(v, a, f, &nano));
        json_t *per = json_object_get(b, "period");
        snprintf(f, sizeof f, "%s[%zu].period", field, i);
        td_period p;
        if (td_period_parse(json_string_value(per), &p) != TD_OK)
            return vfail(v, per, f,
                         "%s%s%s is not a period; must be day, week or month (calendar "
                         "periods in UTC)",
                         json_is_string(per) ? "\"" : "",
                         json_is_string(per) ? json_string_value(per) : (per ? "this" : "(none)"),
                         json_is_string(per) ? "\"" : "");
        if (seen[p])
            return vfail(v, per, f, "a second budget for the period %s; one budget per period",
                         td_period_name(p));
        seen[p] = true;
        json_t *e = json_object_get(b, "enforcement");
        snprintf(f, sizeof f, "%s[%zu].enforcement", field, i);
        const char *m = json_string_value(e);
        if (e && (!m || (strcmp(m, "enforce") != 0 && strcmp(m, "shadow") != 0)))
            return vfail(v, e, f, "must be enforce or shadow");
    }
    return TD_OK;
}

/* Per second, for comparing a key's rate with its tenant's. */
static double rate_per_s(const json_t *r, double *burst)
{
    double cost = json_number_value(json_object_get(r, "cost"));
    int64_t per = 1000000000LL;
    const char *ps = json_string_value(json_object_get(r, "per"));
    if (ps && td_duration_parse(ps, &per, NULL) != TD_OK)
        per = 1000000000LL;
    json_t *bj = json_object_get(r, "burst");
    *burst = json_is_number(bj) ? json_number_value(bj) : cost;
    return per > 0 ? cost * 1e9 / (double)per : cost;
}

/* spec.apiKeys[i].budgets: each as the tenant's budgets are, and none above
 * the tenant's budget of the same period (a key's limit may only be
 * tighter). Runs after validate_budgets of both lists. */
static td_status key_budgets_within(vctx *v, const json_t *spec, const json_t *kb,
                                    const char *kname, const char *f)
{
    const json_t *tb = json_object_get(spec, "budgets");
    size_t i, j;
    json_t *b, *t;
    json_array_foreach(kb, i, b)
    {
        td_period p;
        int64_t kn;
        char ff[160];
        snprintf(ff, sizeof ff, "%s.budgets[%zu].amount", f, i);
        if (td_period_parse(td_json_str(b, "period"), &p) != TD_OK)
            continue;
        TRY(budget_amount(v, json_object_get(b, "amount"), ff, &kn));
        json_array_foreach(tb, j, t)
        {
            td_period tp;
            int64_t tn;
            if (td_period_parse(td_json_str(t, "period"), &tp) != TD_OK || tp != p)
                continue;
            char tf[64];
            snprintf(tf, sizeof tf, "spec.budgets[%zu].amount", j);
            TRY(budget_amount(v, json_object_get(t, "amount"), tf, &tn));
            if (kn > tn)
                return vfail(v, json_object_get(b, "amount"), ff,
                             "key %s: its %s budget %.9g is above the tenant's %s budget "
                             "%.9g (%s); a key's budget may only be tighter",
                             kname, td_period_name(p), (double)kn / TD_MONEY_NANO,
                             td_period_name(p), (double)tn / TD_MONEY_NANO, tf);
        }
    }
    return TD_OK;
}

static const char *const crit_names[] = {"critical_plus", "critical", "sheddable_plus", "sheddable",
                                         NULL};

/* A criticality's rank, 0 (critical_plus, the highest) to 3 (sheddable),
 * case-insensitive; -1 if s names none. The gateway's td_criticality
 * counts the same way. */
static int crit_rank(const char *s)
{
    char low[32] = "";
    for (size_t k = 0; s && s[k] && k < sizeof low - 1; k++)
        low[k] = (char)tolower((unsigned char)s[k]);
    for (int i = 0; s && crit_names[i]; i++)
        if (strcmp(low, crit_names[i]) == 0)
            return i;
    return -1;
}

/* A list of model names (spec.match.models, spec.models): non-empty
 * strings of at most 255 bytes without control bytes, each listed once,
 * a '*' only as the last byte (a prefix); at least one entry. */
static td_status check_models(vctx *v, const json_t *a, const char *field)
{
    if (!a)
        return TD_OK;
    if (!json_is_array(a) || json_array_size(a) == 0)
        return vfail(v, a, field,
                     "must be a non-empty list of model names (a trailing '*' matches a prefix)");
    size_t i;
    json_t *x;
    json_array_foreach((json_t *)a, i, x)
    {
        const char *m = json_string_value(x);
        size_t n = m ? strlen(m) : 0;
        if (!m || n == 0 || n > 255 || n != json_string_length(x))
            return vfail(v, x, field, "item %zu must be a model name of 1 to 255 bytes", i);
        for (size_t k = 0; k < n; k++)
            if ((unsigned char)m[k] < 0x20 || m[k] == 0x7f || (m[k] == '*' && k + 1 < n))
                return vfail(v, x, field,
                             "item %zu \"%s\": a '*' may only end a name (a prefix), and "
                             "control bytes have no place in one",
                             i, m);
        for (size_t j = 0; j < i; j++)
            if (json_equal(json_array_get(a, j), x))
                return vfail(v, x, field, "\"%s\" is listed twice", m);
    }
    return TD_OK;
}

/* true if every entry of inner is covered by an entry of outer: an exact
 * name by an equal name or a prefix of it; a prefix by a shorter or equal
 * prefix. */
static bool models_within(const json_t *inner, const json_t *outer, const char **bad)
{
    size_t i, j;
    json_t *x, *y;
    json_array_foreach((json_t *)inner, i, x)
    {
        const char *m = json_string_value(x);
        size_t mn = strlen(m);
        bool mp = mn && m[mn - 1] == '*';
        bool ok = false;
        json_array_foreach((json_t *)outer, j, y)
        {
            const char *o = json_string_value(y);
            size_t on = strlen(o);
            if (on && o[on - 1] == '*')
                ok = strncmp(o, m, on - 1) == 0 && (!mp || mn >= on);
            else
                ok = !mp && strcmp(o, m) == 0;
            if (ok)
                break;
        }
        if (!ok) {
            *bad = m;
            return false;
        }
    }
    return true;
}

/* spec.apiKeys[i]: {sha256, name, rate, concurrency, budgets, criticality}.
 * A key's own limits may only be tighter than its tenant's (spec.gateway,
 * spec.budgets), its criticality no higher; limits need a name (their
 * state is kept by "tenant/name" across reloads). */
static td_status validate_api_key(vctx *v, const json_t *spec, const json_t *keys, size_t i,
                                  const json_t *k)
{
    static const char *const fields[] = {"sha256",  "name",        "rate",   "concurrency",
                                         "budgets", "criticality", "models", NULL};
    static const char *const rate[] = {"cost", "per", "burst", NULL};
    char f[96], ff0[128];
    snprintf(f, sizeof f, "spec.apiKeys[%zu]", i);
    if (!json_is_object(k))
        return vfail(v, k, f, "must be a mapping {sha256, name, rate, concurrency}");
    TRY(check_fields(v, k, f, fields));
    json_t *name = json_object_get(k, "name");
    const char *ns = json_string_value(name);
    if (name && (!ns || !dns_label(ns)))
        return vfail(v, name, f, "name must be a DNS label (lowercase letters, digits, '-')");
    for (size_t j = 0; ns && j < i; j++)
        if (json_equal(json_object_get(json_array_get(keys, j), "name"), name))
            return vfail(v, name, f, "name \"%s\" is already the name of spec.apiKeys[%zu]", ns, j);
    json_t *r = json_object_get(k, "rate"), *c = json_object_get(k, "concurrency");
    json_t *kb = json_object_get(k, "budgets");
    if ((r || c) && !ns)
        return vfail(v, r ? r : c, f, "a key with its own rate or concurrency needs a name");
    if (kb && !ns)
        return vfail(v, kb, f, "a key with its own budgets needs a name");
    json_t *km = json_object_get(k, "models");
    if (km) {
        snprintf(ff0, sizeof ff0, "%s.models", f);
        if (!ns)
            return vfail(v, km, ff0, "a key with its own models needs a name");
        TRY(check_models(v, km, ff0));
        const json_t *tm = json_object_get(spec, "models");
        const char *bad = NULL;
        if (json_is_array(tm) && !models_within(km, tm, &bad))
            return vfail(v, km, ff0,
                         "key %s: \"%s\" is not within the tenant's spec.models; a key's models "
                         "may only be narrower",
                         ns, bad);
    }
    json_t *kc = json_object_get(k, "criticality");
    if (kc) {
        snprintf(ff0, sizeof ff0, "%s.criticality", f);
        if (!ns)
            return vfail(v, kc, ff0, "a key with its own criticality needs a name");
        int kr = crit_rank(json_string_value(kc));
        int tr = crit_rank(td_json_str(spec, "gateway.criticality"));
        if (kr < 0)
            return vfail(v, kc, ff0,
                         "must be critical_plus, critical, sheddable_plus or sheddable");
        if (tr < 0)
            tr = 1; /* critical, the default (a bad tenant value is named by its own check) */
        if (kr < tr)
            return vfail(v, kc, ff0,
                         "key %s: %s is above the tenant's spec.gateway.criticality %s; a key's "
                         "class may only be lower (X-Criticality can lower a request, never "
                         "raise it)",
                         ns, crit_names[kr], crit_names[tr]);
    }
    if (kb) {
        char bf[96];
        snprintf(bf, sizeof bf, "%s.budgets", f);
        TRY(validate_budgets(v, json_object_get(spec, "budgets"), "spec.budgets"));
        TRY(validate_budgets(v, kb, bf));
        TRY(key_budgets_within(v, spec, kb, ns, f));
    }
    char ff[128];
    const json_t *g = json_object_get(spec, "gateway");
    if (r) {
        snprintf(ff, sizeof ff, "%s.rate", f);
        TRY(check_fields(v, r, ff, rate));
        snprintf(ff, sizeof ff, "%s.rate.cost", f);
        if (!json_object_get(r, "cost"))
            return vfail(v, r, ff, "required: cost units per `per`");
        TRY(check_number(v, json_object_get(r, "cost"), ff, 0));
        snprintf(ff, sizeof ff, "%s.rate.per", f);
        TRY(check_duration(v, json_object_get(r, "per"), ff));
        snprintf(ff, sizeof ff, "%s.rate.burst", f);
        TRY(check_number(v, json_object_get(r, "burst"), ff, 0));
        const json_t *tr = json_object_get(g, "rate");
        double kb, tb;
        double kr = rate_per_s(r, &kb);
        if (tr && json_number_value(json_object_get(tr, "cost")) > 0) {
            double trs = rate_per_s(tr, &tb);
            snprintf(ff, sizeof ff, "%s.rate", f);
            if (kr > trs * (1 + 1e-12) || kb > tb)
                return vfail(v, r, ff,
                             "key %s: %g per second (burst %g) is looser than the tenant's "
                             "spec.gateway.rate %g per second (burst %g); a key's limit may "
                             "only be tighter",
                             ns, kr, kb, trs, tb);
        }
    }
    if (c) {
        snprintf(ff, sizeof ff, "%s.concurrency", f);
        TRY(check_integer(v, c, ff, 1));
        json_t *tc = json_object_get(g, "concurrency");
        if (json_is_integer(tc) && json_integer_value(tc) > 0 &&
            json_integer_value(c) > json_integer_value(tc))
            return vfail(v, c, ff,
                         "key %s: %lld in flight is looser than the tenant's "
                         "spec.gateway.concurrency %lld; a key's limit may only be tighter",
                         ns, (long long)json_integer_value(c), (long long)json_integer_value(tc));
    }
    return TD_OK;
}

/* spec.gateway.models[]: {model, rate: {cost, per, burst}, concurrency},
 * each model (a name or prefix) listed once, each with a rate or a
 * concurrency. */
static td_status validate_model_limits(vctx *v, const json_t *ml)
{
    static const char *const fields[] = {"model", "rate", "concurrency", NULL};
    static const char *const rate[] = {"cost", "per", "burst", NULL};
    if (!ml)
        return TD_OK;
    if (!json_is_array(ml))
        return vfail(v, ml, "spec.gateway.models",
                     "must be a list of {model, rate: {cost, per, burst}, concurrency}");
    json_t *names = json_array();
    if (!names)
        return vfail(v, ml, "spec.gateway.models", "out of memory");
    td_status st = TD_OK;
    char f[96], ff[128];
    size_t i;
    json_t *x;
    json_array_foreach((json_t *)ml, i, x)
    {
        snprintf(f, sizeof f, "spec.gateway.models[%zu]", i);
        if (!json_is_object(x)) {
            st = vfail(v, x, f, "must be a mapping {model, rate, concurrency}");
            break;
        }
        if ((st = check_fields(v, x, f, fields)) != TD_OK)
            break;
        json_t *m = json_object_get(x, "model");
        json_array_append(names, m ? m : json_null());
        snprintf(ff, sizeof ff, "%s.model", f);
        if (!m) {
            st = vfail(v, x, ff, "required: the model name (or prefix ending in '*') it limits");
            break;
        }
        if ((st = check_models(v, names, ff)) != TD_OK)
            break;
        json_t *r = json_object_get(x, "rate"), *c = json_object_get(x, "concurrency");
        if (!r && !c) {
            st = vfail(v, x, f, "needs a rate or a concurrency");
            break;
        }
        if (r) {
            snprintf(ff, sizeof ff, "%s.rate", f);
            if ((st = check_fields(v, r, ff, rate)) != TD_OK)
                break;
            snprintf(ff, sizeof ff, "%s.rate.cost", f);
            if (!json_object_get(r, "cost")) {
                st = vfail(v, r, ff, "required: cost units per `per`");
                break;
            }
            if ((st = check_number(v, json_object_get(r, "cost"), ff, 0)) != TD_OK)
                break;
            snprintf(ff, sizeof ff, "%s.rate.per", f);
            if ((st = check_duration(v, json_object_get(r, "per"), ff)) != TD_OK)
                break;
            snprintf(ff, sizeof ff, "%s.rate.burst", f);
            if ((st = check_number(v, json_object_get(r, "burst"), ff, 0)) != TD_OK)
                break;
        }
        snprintf(ff, sizeof ff, "%s.concurrency", f);
        if (c && (st = check_integer(v, c, ff, 1)) != TD_OK)
            break;
    }
    json_decref(names);
    return st;
}

static td_status validate_tenant(vctx *v)
{
    static const char *const top[] = {"apiVersion", "kind", "metadata", "spec", NULL};
    static const char *const spec[] = {"namespaces", "labels",  "apiKeys", "gateway",
                                       "tenancy",    "storage", "budgets", "models", NULL};
    static const char *const gw[] = {"rate",   "concurrency", "maxConnections", "criticality",
                                     "weight", "enforcement", "models",         NULL};
    static const char *const rate[] = {"cost", "per", "burst", NULL};
    TRY(check_fields(v, v->obj, "", top));
    json_t *s = json_object_get(v->obj, "spec");
    if (!json_is_object(s))
        return vfail(v, s, "spec", "required: a mapping");
    TRY(check_fields(v, s, "spec", spec));
    json_t *nss = json_object_get(s, "namespaces");
    TRY(check_string_array(v, nss, "spec.namespaces"));
    size_t i;
    json_t *x;
    json_array_foreach(nss, i, x)
    {
        if (!dns_label(json_string_value(x)))
            return vfail(v, x, "spec.namespaces", "\"%s\" is not a valid namespace name",
                         json_string_value(x));
    }
    TRY(check_string_map(v, json_object_get(s, "labels"), "spec.labels"));
    TRY(check_models(v, json_object_get(s, "models"), "spec.models"));
    json_t *keys = json_object_get(s, "apiKeys");
    if (keys && !json_is_array(keys))
        return vfail(v, keys, "spec.apiKeys", "must be a list of {sha256: HEX}");
    json_array_foreach(keys, i, x)
    {
        TRY(validate_api_key(v, s, keys, i, x));
        const char *h = td_json_str(x, "sha256");
        size_t n = h ? strlen(h) : 0;
        int hex = n == 64;
        for (size_t k = 0; hex && k < n; k++)
            hex = isxdigit((unsigned char)h[k]);
        if (!hex)
            return vfail(v, x, "spec.apiKeys", "item %zu: sha256 must be 64 hex digits (the "
                                               "SHA-256 of the key, e.g. from `printf %%s KEY "
                                               "| sha256sum`)",
                         i);
    }
    const char *tenancy = td_json_str(s, "tenancy");
    if (json_object_get(s, "tenancy") &&
        !(tenancy && (strcmp(tenancy, "team") == 0 || strcmp(tenancy, "customer") == 0)))
        return vfail(v, json_object_get(s, "tenancy"), "spec.tenancy",
                     "\"%s\" is not a tier; must be team or customer", tenancy ? tenancy : "");
    TRY(validate_storage(v, json_object_get(s, "storage")));
    TRY(validate_budgets(v, json_object_get(s, "budgets"), "spec.budgets"));
    json_t *g = json_object_get(s, "gateway");
    if (g) {
        TRY(check_fields(v, g, "spec.gateway", gw));
        json_t *r = json_object_get(g, "rate");
        if (r) {
            TRY(check_fields(v, r, "spec.gateway.rate", rate));
            TRY(check_number(v, json_object_get(r, "cost"), "spec.gateway.rate.cost", 0));
            TRY(check_duration(v, json_object_get(r, "per"), "spec.gateway.rate.per"));
            TRY(check_number(v, json_object_get(r, "burst"), "spec.gateway.rate.burst", 0));
        }
        TRY(check_integer(v, json_object_get(g, "concurrency"), "spec.gateway.concurrency", 0));
        TRY(check_integer(v, json_object_get(g, "maxConnections"), "spec.gateway.maxConnections",
                          0));
        TRY(check_number(v, json_object_get(g, "weight"), "spec.gateway.weight", 0));
        TRY(check_enforcement(v, json_object_get(g, "enforcement"), "spec.gateway.enforcement"));
        TRY(validate_model_limits(v, json_object_get(g, "models")));
        static const char *const crit[] = {"critical_plus", "critical", "sheddable_plus",
                                           "sheddable", NULL};
        json_t *c = json_object_get(g, "criticality");
        if (c) {
            char low[32] = "";
            const char *cs = json_string_value(c);
            for (size_t k = 0; cs && cs[k] && k < sizeof low - 1; k++)
                low[k] = (char)tolower((unsigned char)cs[k]);
            if (!in_list(low, crit))
                return vfail(v, c, "spec.gateway.criticality",
                             "must be critical_plus, critical, sheddable_plus or sheddable");
        }
    }
    return TD_OK;
}

/* "host:port" with a port 1..65535 and a host before it. */
static int hostport_ok(const char *addr)
{
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    return colon && colon != addr && end && !*end && port >= 1 && port <= 65535;
}

static td_status validate_route(vctx *v)
{
    static const char *const top[] = {"apiVersion", "kind", "metadata", "spec", NULL};
    static const char *const spec[] = {"match", "upstream", "cost", "timeout", "methods", NULL};
    static const char *const up[] = {"address",     "endpoints",   "balance", "capacity",
                                     "queue",       "authorization", "healthCheck",
                                     "scrapeEvery", "metrics",     NULL};
    TRY(check_fields(v, v->obj, "", top));
    json_t *s = json_object_get(v->obj, "spec");
    if (!json_is_object(s))
        return vfail(v, s, "spec", "required: a mapping");
    TRY(check_fields(v, s, "spec", spec));
    static const char *const match[] = {"pathPrefix", "models", NULL};
    TRY(check_fields(v, json_object_get(s, "match"), "spec.match", match));
    json_t *mm = td_json_path(s, "match.models");
    TRY(check_models(v, mm, "spec.match.models"));
    const char *prefix = td_json_str(s, "match.pathPrefix");
    if (mm && !td_json_path(s, "match.pathPrefix"))
        prefix = "/"; /* models alone: on every path */
    if (!prefix || prefix[0] != '/')
        return vfail(v, td_json_path(s, "match"), "spec.match.pathPrefix",
                     "required: a path starting with '/' (or spec.match.models)");
    /* Requests are matched after normalization (reqpath.h): a prefix that
     * normalization would change could never match. */
    char norm[512];
    size_t plen = strlen(prefix), nlen = 0, npath = 0;
    td_err perr;
    if (plen >= sizeof norm || strchr(prefix, '?'))
        return vfail(v, td_json_path(s, "match.pathPrefix"), "spec.match.pathPrefix",
                     "must be a path of at most %zu bytes, without '?'", sizeof norm - 1);
    memcpy(norm, prefix, plen + 1);
    if (td_reqpath_normalize(norm, plen, &nlen, &npath, &perr) != TD_OK)
        return vfail(v, td_json_path(s, "match.pathPrefix"), "spec.match.pathPrefix", "%s",
                     perr.msg);
    if (nlen != plen || memcmp(norm, prefix, plen) != 0)
        return vfail(v, td_json_path(s, "match.pathPrefix"), "spec.match.pathPrefix",
                     "\"%s\" is not a normalized path (it reads as \"%.*s\": no \"//\", \".\" "
                     "or \"..\" segments); requests are matched after normalization",
                     prefix, (int)nlen, norm);
    json_t *ms = json_object_get(s, "methods");
    if (ms) {
        static const char *const known[] = {"GET",   "HEAD",   "POST",    "PUT",
                                            "PATCH", "DELETE", "OPTIONS", NULL};
        if (!json_is_array(ms) || json_array_size(ms) == 0)
            return vfail(v, ms, "spec.methods",
                         "must be a non-empty list of methods (default [GET, POST])");
        size_t i;
        json_t *m;
        json_array_foreach(ms, i, m)
        {
            const char *mn = json_string_value(m);
            if (mn && (strcmp(mn, "TRACE") == 0 || strcmp(mn, "CONNECT") == 0))
                return vfail(v, m, "spec.methods",
                             "%s is never forwarded (TRACE echoes credentials back, CONNECT "
                             "opens a tunnel past every limit)",
                             mn);
            if (!in_list(mn, known))
                return vfail(v, m, "spec.methods",
                             "item %zu: \"%s\" is not one of GET, HEAD, POST, PUT, PATCH, "
                             "DELETE, OPTIONS (upper case)",
                             i, mn ? mn : "");
            for (size_t j = 0; j < i; j++)
                if (json_equal(json_array_get(ms, j), m))
                    return vfail(v, m, "spec.methods", "%s is listed twice", mn);
        }
    }
    json_t *u = json_object_get(s, "upstream");
    TRY(check_fields(v, u, "spec.upstream", up));
    json_t *eps = u ? json_object_get(u, "endpoints") : NULL;
    if (eps && json_object_get(u, "address"))
        return vfail(v, eps, "spec.upstream.endpoints",
                     "give either spec.upstream.address (one endpoint) or "
                     "spec.upstream.endpoints, not both");
    if (eps) {
        /* the pool: 1..64 endpoints (TD_EP_MAX), each HOST:PORT once */
        static const char *const epf[] = {"address", "weight", NULL};
        if (!json_is_array(eps) || json_array_size(eps) == 0 || json_array_size(eps) > 64)
            return vfail(v, eps, "spec.upstream.endpoints",
                         "must be a list of 1 to 64 endpoints ({address: HOST:PORT, weight: N})");
        size_t i;
        json_t *e;
        json_array_foreach(eps, i, e)
        {
            char field[64];
            snprintf(field, sizeof field, "spec.upstream.endpoints[%zu]", i);
            if (!json_is_object(e))
                return vfail(v, e, field, "must be a mapping {address: HOST:PORT, weight: N}");
            TRY(check_fields(v, e, field, epf));
            if (!hostport_ok(td_json_str(e, "address")))
                return vfail(v, json_object_get(e, "address") ? json_object_get(e, "address") : e,
                             field,
                             "address: required: HOST:PORT (e.g. \"10.0.0.7:8000\", "
                             "\"[::1]:8000\")");
            json_t *w = json_object_get(e, "weight");
            TRY(check_integer(v, w, field, 1));
            if (w && json_integer_value(w) > 1000)
                return vfail(v, w, field, "weight: at most 1000");
            for (size_t j = 0; j < i; j++)
                if (strcmp(td_json_str(json_array_get(eps, j), "address"),
                           td_json_str(e, "address")) == 0)
                    return vfail(v, e, field, "address \"%s\" is listed twice",
                                 td_json_str(e, "address"));
        }
    } else if (!hostport_ok(td_json_str(s, "upstream.address"))) {
        return vfail(v, u ? json_object_get(u, "address") : NULL, "spec.upstream.address",
                     "required: HOST:PORT (e.g. \"127.0.0.1:8000\", \"[::1]:8000\"), or "
                     "spec.upstream.endpoints");
    }
    json_t *hc = u ? json_object_get(u, "healthCheck") : NULL;
    if (hc) {
        static const char *const hcf[] = {"path",    "interval",           "timeout",
                                          "unhealthyThreshold", "healthyThreshold", NULL};
        TRY(check_fields(v, hc, "spec.upstream.healthCheck", hcf));
        json_t *hp = json_object_get(hc, "path");
        const char *hps = json_string_value(hp);
        int path_ok = hps && hps[0] == '/' && strlen(hps) < 256;
        for (const char *q = hps; path_ok && *q; q++)
            path_ok = (unsigned char)*q > 0x20 && *q != 0x7f;
        if (hp && !path_ok)
            return vfail(v, hp, "spec.upstream.healthCheck.path",
                         "must be a path starting with '/' (under 256 bytes, no spaces or "
                         "control bytes)");
        TRY(check_duration(v, json_object_get(hc, "interval"), "spec.upstream.healthCheck.interval"));
        TRY(check_duration(v, json_object_get(hc, "timeout"), "spec.upstream.healthCheck.timeout"));
        TRY(check_integer(v, json_object_get(hc, "unhealthyThreshold"),
                          "spec.upstream.healthCheck.unhealthyThreshold", 1));
        TRY(check_integer(v, json_object_get(hc, "healthyThreshold"),
                          "spec.upstream.healthCheck.healthyThreshold", 1));
    }
    json_t *bal = u ? json_object_get(u, "balance") : NULL;
    if (bal && !in_list(json_string_value(bal), (const char *const[]){
                                                    "leastRequests", "roundRobin", "queueDepth",
                                                    NULL}))
        return vfail(v, bal, "spec.upstream.balance",
                     "must be leastRequests (the default), roundRobin or queueDepth");
    TRY(check_duration(v, u ? json_object_get(u, "scrapeEvery") : NULL,
                       "spec.upstream.scrapeEvery"));
    json_t *mt = u ? json_object_get(u, "metrics") : NULL;
    if (mt) {
        static const char *const mf[] = {"path", "waiting", "kvCache", NULL};
        TRY(check_fields(v, mt, "spec.upstream.metrics", mf));
        const char *mp = td_json_str(mt, "path");
        int mp_ok = !json_object_get(mt, "path") || (mp && mp[0] == '/' && strlen(mp) < 256);
        for (const char *q = mp; mp_ok && q && *q; q++)
            mp_ok = (unsigned char)*q > 0x20 && *q != 0x7f;
        if (!mp_ok)
            return vfail(v, json_object_get(mt, "path"), "spec.upstream.metrics.path",
                         "must be a path starting with '/' (under 256 bytes, no spaces or "
                         "control bytes)");
        static const char *const names[] = {"waiting", "kvCache"};
        for (int k = 0; k < 2; k++) {
            json_t *nv = json_object_get(mt, names[k]);
            const char *ns = json_string_value(nv);
            int name_ok = !nv || (ns && *ns && strlen(ns) < 128);
            for (const char *q = ns; name_ok && q && *q; q++)
                name_ok = isalnum((unsigned char)*q) || *q == '_' || *q == ':';
            if (!name_ok)
                return vfail(v, nv, names[k][0] == 'w' ? "spec.upstream.metrics.waiting"
                                                       : "spec.upstream.metrics.kvCache",
                             "must be a Prometheus metric name ([a-zA-Z0-9_:], under 128 bytes)");
        }
    }
    json_t *ua = td_json_path(s, "upstream.authorization");
    if (ua) {
        static const char *const auth[] = {"fromEnv", NULL};
        if (!json_is_object(ua))
            return vfail(v, ua, "spec.upstream.authorization",
                         "must be {fromEnv: VARIABLE}: the secret itself never goes in the "
                         "config");
        TRY(check_fields(v, ua, "spec.upstream.authorization", auth));
        const char *env = td_json_str(ua, "fromEnv");
        int ok_name = env && *env && !isdigit((unsigned char)env[0]);
        for (size_t k = 0; ok_name && env[k]; k++)
            ok_name = isalnum((unsigned char)env[k]) || env[k] == '_';
        if (!ok_name)
            return vfail(v, ua, "spec.upstream.authorization.fromEnv",
                         "required: the name of an environment variable holding the upstream's "
                         "Authorization value (e.g. UPSTREAM_AUTHORIZATION=\"Bearer sk-...\"); "
                         "the secret itself never goes in the config");
        /* Checked here, where a refusal is an apply's 400 or a failed
         * start, rather than at the gateway's reload, which follows a
         * committed change and must not fail (control.c). */
        const char *val = getenv(env);
        if (!val || !*val)
            return vfail(v, ua, "spec.upstream.authorization.fromEnv",
                         "the environment variable %s is not set (or empty) in tenantd's "
                         "environment",
                         env);
        for (const char *q = val; *q; q++)
            if ((unsigned char)*q < 0x20 || *q == 0x7f)
                return vfail(v, ua, "spec.upstream.authorization.fromEnv",
                             "%s holds a control byte; it must be one header value", env);
    }
    TRY(check_integer(v, td_json_path(s, "upstream.capacity"), "spec.upstream.capacity", 1));
    TRY(check_integer(v, td_json_path(s, "upstream.queue"), "spec.upstream.queue", 0));
    static const char *const cost[] = {"model", "gpuSecondsEstimate", "maxOutputTokens", NULL};
    TRY(check_fields(v, json_object_get(s, "cost"), "spec.cost", cost));
    TRY(check_number(v, td_json_path(s, "cost.gpuSecondsEstimate"), "spec.cost.gpuSecondsEstimate",
                     0));
    /* what a request naming no max_tokens reserves of its budgets: a bound
     * on how far one request can overspend, so at least 1 and below what
     * a price in nano-units could overflow on */
    json_t *mot = td_json_path(s, "cost.maxOutputTokens");
    TRY(check_integer_range(v, mot, "spec.cost.maxOutputTokens", 1, 10000000));
    const char *model = td_json_str(s, "cost.model");
    static const char *const models[] = {"tokens", "gpuSeconds", "requests", NULL};
    if (td_json_path(s, "cost.model") && !in_list(model, models))
        return vfail(v, td_json_path(s, "cost.model"), "spec.cost.model",
                     "must be tokens, gpuSeconds or requests");
    TRY(check_duration(v, json_object_get(s, "timeout"), "spec.timeout"));
    return TD_OK;
}

static td_status validate_nodepool(vctx *v)
{
    static const char *const top[] = {"apiVersion", "kind", "metadata", "spec", NULL};
    static const char *const spec[] = {"flavor", "nodes", "capacity", "taint", "nodeSelector",
                                       "tenants", "dedicated", NULL};
    static const char *const taint[] = {"key", "value", "effect", NULL};
    TRY(check_fields(v, v->obj, "", top));
    json_t *s = json_object_get(v->obj, "spec");
    if (!json_is_object(s))
        return vfail(v, s, "spec", "required: a mapping");
    TRY(check_fields(v, s, "spec", spec));
    TRY(check_integer(v, json_object_get(s, "nodes"), "spec.nodes", 0));
    TRY(check_quantity_map(v, json_object_get(s, "capacity"), "spec.capacity"));
    json_t *t = json_object_get(s, "taint");
    if (t) {
        TRY(check_fields(v, t, "spec.taint", taint));
        if (!td_json_str(t, "key"))
            return vfail(v, t, "spec.taint.key", "required");
        const char *eff = td_json_str(t, "effect");
        static const char *const effects[] = {"NoSchedule", "PreferNoSchedule", "NoExecute",
                                              NULL};
        if (!in_list(eff, effects))
            return vfail(v, t, "spec.taint.effect",
                         "must be NoSchedule, PreferNoSchedule or NoExecute");
    }
    TRY(check_string_map(v, json_object_get(s, "nodeSelector"), "spec.nodeSelector"));
    TRY(check_string_array(v, json_object_get(s, "tenants"), "spec.tenants"));
    if (!t && !json_object_size(json_object_get(s, "nodeSelector")))
        return vfail(v, s, "spec", "a NodePool needs a taint or a nodeSelector to keep other "
                                   "tenants off it");
    return TD_OK;
}

static td_status validate_admission_policy(vctx *v)
{
    static const char *const top[] = {"apiVersion", "kind", "metadata", "spec", NULL};
    static const char *const spec[] = {"requiredLabels", "inheritLabelsFromNamespace", "sandbox",
                                       "enforcement", "resourceQuota", NULL};
    static const char *const sandbox[] = {"runtimeClassName", "untrustedWorkloads", NULL};
    TRY(check_fields(v, v->obj, "", top));
    json_t *s = json_object_get(v->obj, "spec");
    TRY(check_fields(v, s, "spec", spec));
    json_t *sb = json_object_get(s, "sandbox");
    TRY(check_fields(v, sb, "spec.sandbox", sandbox));
    json_t *rc = json_object_get(sb, "runtimeClassName");
    if (rc && (!json_is_string(rc) || !dns_subdomain(json_string_value(rc))))
        return vfail(v, rc, "spec.sandbox.runtimeClassName", "must be a RuntimeClass name");
    TRY(check_string_array(v, json_object_get(sb, "untrustedWorkloads"),
                           "spec.sandbox.untrustedWorkloads"));
    TRY(check_string_array(v, json_object_get(s, "requiredLabels"), "spec.requiredLabels"));
    /* ResourceQuotaConfiguration's limitedResources: a class matched here
     * is usable only in a namespace with a ResourceQuota selecting it. */
    static const char *const rq[] = {"limitedResources", NULL};
    static const char *const lrk[] = {"resource", "matchContains", "matchScopes", NULL};
    json_t *rqc = json_object_get(s, "resourceQuota");
    TRY(check_fields(v, rqc, "spec.resourceQuota", rq));
    json_t *lrs = json_object_get(rqc, "limitedResources");
    if (lrs && !json_is_array(lrs))
        return vfail(v, lrs, "spec.resourceQuota.limitedResources", "must be a list");
    size_t li;
    json_t *lr;
    json_array_foreach(lrs, li, lr)
    {
        char f[96];
        snprintf(f, sizeof f, "spec.resourceQuota.limitedResources[%zu]", li);
        TRY(check_fields(v, lr, f, lrk));
        if (!td_json_str(lr, "resource"))
            return vfail(v, lr, f, "resource: required (e.g. pods)");
        char g[128];
        snprintf(g, sizeof g, "%s.matchContains", f);
        TRY(check_string_array(v, json_object_get(lr, "matchContains"), g));
        snprintf(g, sizeof g, "%s.matchScopes", f);
        TRY(check_scope_exprs(v, json_object_get(lr, "matchScopes"), g));
    }
    json_t *inh = json_object_get(s, "inheritLabelsFromNamespace");
    if (inh && !json_is_boolean(inh))
        return vfail(v, inh, "spec.inheritLabelsFromNamespace", "must be true or false");
    /* enforcement: "enforce" | "shadow", or {RULE: MODE} for the
     * validating rules (see admit.h). */
    json_t *e = json_object_get(s, "enforcement");
    if (json_is_object(e)) {
        TRY(check_fields(v, e, "spec.enforcement", td_admit_validating_rules));
        const char *key;
        json_t *m;
        json_object_foreach(e, key, m)
        {
            char f[96];
            snprintf(f, sizeof f, "spec.enforcement.%s", key);
            const char *ms = json_string_value(m);
            if (!ms || (strcmp(ms, "enforce") != 0 && strcmp(ms, "shadow") != 0))
                return vfail(v, m, f, "must be enforce or shadow");
        }
    } else if (e) {
        const char *ms = json_string_value(e);
        if (!ms || (strcmp(ms, "enforce") != 0 && strcmp(ms, "shadow") != 0))
            return vfail(v, e, "spec.enforcement",
                         "must be enforce or shadow, or a mapping of rule to mode (rules: "
                         "LimitRange, CostLabels, PodSecurity, NodePool, Sandbox, Storage, "
                         "ResourceQuota)");
    }
    return TD_OK;
}

/* The CostPolicy parser lives with the cost code (src/cost/costpolicy.c);
 * validation is parsing and throwing the result away. */
static td_status validate_costpolicy(vctx *v)
{
    td_costpolicy *p = NULL;
    td_status st = td_costpolicy_parse(v->obj, v->src, &p, v->err);
    td_costpolicy_destroy(p);
    return st;
}

/* ---- the kind table ---------------------------------------------------- */

typedef struct {
    const char *kind;
    const char *api_versions; /* comma-separated */
    bool namespaced;
    td_status (*validate)(vctx *v);
    const char *aliases; /* comma-separated, lowercase */
} kind_info;

#define KUEUE_API "kueue.x-k8s.io/v1beta1,kueue.x-k8s.io/v1beta2"

static const kind_info kinds[] = {
    {"Namespace", "v1", false, validate_namespace, "ns,namespace,namespaces"},
    {"ResourceQuota", "v1", true, validate_quota, "quota,resourcequota,resourcequotas"},
    {"LimitRange", "v1", true, validate_limitrange, "limits,limitrange,limitranges"},
    {"PriorityClass", "scheduling.k8s.io/v1", false, validate_priorityclass,
     "pc,priorityclass,priorityclasses"},
    {"Pod", "v1", true, validate_pod, "po,pod,pods"},
    {"RoleBinding", "rbac.authorization.k8s.io/v1", true, validate_meta_only,
     "rolebinding,rolebindings"},
    {"NetworkPolicy", "networking.k8s.io/v1", true, validate_meta_only,
     "netpol,networkpolicy,networkpolicies"},
    {"RuntimeClass", "node.k8s.io/v1", false, validate_runtimeclass,
     "runtimeclass,runtimeclasses"},
    {"Role", "rbac.authorization.k8s.io/v1", true, validate_meta_only, "role,roles"},
    {"ServiceAccount", "v1", true, validate_meta_only, "sa,serviceaccount,serviceaccounts"},
    {"ConfigMap", "v1", true, validate_meta_only, "cm,configmap,configmaps"},
    {"HelmChart", "helm.cattle.io/v1", true, validate_meta_only, "helmchart,helmcharts"},
    {"ResourceFlavor", KUEUE_API, false, validate_meta_only,
     "rf,flavor,flavors,resourceflavor,resourceflavors"},
    {"ClusterQueue", KUEUE_API, false, validate_meta_only, "cq,clusterqueue,clusterqueues"},
    {"LocalQueue", KUEUE_API, true, validate_meta_only, "lq,queue,queues,localqueue,localqueues"},
    {"Cohort", "kueue.x-k8s.io/v1alpha1," KUEUE_API, false, validate_meta_only,
     "cohort,cohorts"},
    {"Workload", KUEUE_API, true, validate_meta_only, "wl,workload,workloads"},
    {"WorkloadPriorityClass", KUEUE_API, false, validate_meta_only,
     "wpc,workloadpriorityclass,workloadpriorityclasses"},
    /* Kueue's own Configuration (the queue reads fairSharing) */
    {"Configuration", "config.kueue.x-k8s.io/v1beta1,config.kueue.x-k8s.io/v1beta2", false,
     validate_meta_only, "configuration,configurations"},
    {"Tenant", TD_API_TENANTD, false, validate_tenant, "tenant,tenants"},
    {"Route", TD_API_TENANTD, false, validate_route, "route,routes"},
    {"NodePool", TD_API_TENANTD, false, validate_nodepool, "pool,pools,nodepool,nodepools"},
    {"AdmissionPolicy", TD_API_TENANTD, false, validate_admission_policy,
     "admissionpolicy,admissionpolicies"},
    {"CostPolicy", TD_API_TENANTD, false, validate_costpolicy, "costpolicy,costpolicies"},
    {"LoadScenario", TD_API_TENANTD, false, validate_meta_only, "loadscenario,loadscenarios"},
};

#define NKINDS (sizeof kinds / sizeof kinds[0])

static const kind_info *find_kind(const char *kind)
{
    for (size_t i = 0; kind && i < NKINDS; i++)
        if (strcmp(kinds[i].kind, kind) == 0)
            return &kinds[i];
    return NULL;
}

static int in_csv(const char *csv, const char *word)
{
    size_t n = strlen(word);
    const char *p = csv;
    while (p && *p) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == n && strncmp(p, word, n) == 0)
            return 1;
        p = c ? c + 1 : NULL;
    }
    return 0;
}

const char *td_kind_canonical(const char *user_kind)
{
    if (!user_kind)
        return NULL;
    char low[64];
    size_t n = strlen(user_kind);
    if (n >= sizeof low)
        return NULL;
    for (size_t i = 0; i <= n; i++)
        low[i] = (char)tolower((unsigned char)user_kind[i]);
    for (size_t i = 0; i < NKINDS; i++)
        if (strcasecmp(kinds[i].kind, user_kind) == 0 || in_csv(kinds[i].aliases, low))
            return kinds[i].kind;
    return NULL;
}

bool td_kind_namespaced(const char *kind)
{
    const kind_info *k = find_kind(kind);
    return k && k->namespaced;
}

td_object_id td_object_identity(const json_t *obj)
{
    td_object_id id;
    id.kind = td_json_str(obj, "kind");
    id.namespace_ = td_json_str(obj, "metadata.namespace");
    id.name = td_json_str(obj, "metadata.name");
    if (!id.kind)
        id.kind = "";
    if (!id.namespace_ || !td_kind_namespaced(id.kind))
        id.namespace_ = "";
    if (!id.name)
        id.name = "";
    return id;
}

static char *make_key(const char *kind, const char *ns, const char *name)
{
    size_t n = strlen(kind) + strlen(ns) + strlen(name) + 3;
    char *k = malloc(n);
    if (k)
        snprintf(k, n, "%s\x1f%s\x1f%s", kind, ns, name);
    return k;
}

/* Checks the envelope every object shares, then the kind's own rules. */
static td_status validate_object(json_t *obj, const td_manifest *src, td_err *err)
{
    vctx v = {src, obj, NULL, "object", err};
    if (!json_is_object(obj))
        return td_manifest_err(src, obj, err, TD_EINVAL, "an object must be a mapping");
    json_t *kindj = json_object_get(obj, "kind");
    const char *kind = json_string_value(kindj);
    if (!kind)
        return vfail(&v, obj, "kind", "required (e.g. ResourceQuota, Tenant)");
    const kind_info *k = find_kind(kind);
    if (!k)
        return vfail(&v, kindj, "kind", "unknown kind \"%s\"; tenantd knows Namespace, "
                                        "ResourceQuota, LimitRange, PriorityClass, Pod, "
                                        "RoleBinding, Role, ServiceAccount, ConfigMap, "
                                        "NetworkPolicy, RuntimeClass, HelmChart, Kueue's "
                                        "kinds and Tenant, Route, NodePool, AdmissionPolicy, "
                                        "CostPolicy, LoadScenario",
                     kind);
    v.kind = k->kind;
    /* Kueue's Configuration is written without metadata (it lives in a
     * ConfigMap): it is the one named "kueue". */
    if (strcmp(k->kind, "Configuration") == 0 && !json_object_get(obj, "metadata"))
        json_object_set_new(obj, "metadata", json_pack("{s:s}", "name", "kueue"));
    const char *name = td_json_str(obj, "metadata.name");
    const char *ns = td_json_str(obj, "metadata.namespace");
    snprintf(v.who, sizeof v.who, "%s %s%s%s", k->kind, k->namespaced && ns ? ns : "",
             k->namespaced && ns ? "/" : "", name ? name : "(unnamed)");
    json_t *av = json_object_get(obj, "apiVersion");
    if (!json_is_string(av))
        return vfail(&v, obj, "apiVersion", "required (%s)", k->api_versions);
    if (!in_csv(k->api_versions, json_string_value(av)))
        return vfail(&v, av, "apiVersion", "\"%s\" is not served for %s; use %s",
                     json_string_value(av), k->kind, k->api_versions);
    json_t *meta = json_object_get(obj, "metadata");
    if (!json_is_object(meta))
        return vfail(&v, obj, "metadata", "required: a mapping with a name");
    if (!name)
        return vfail(&v, meta, "metadata.name", "required");
    if (!dns_subdomain(name))
        return vfail(&v, json_object_get(meta, "name"), "metadata.name",
                     "\"%s\" is not a valid name (lowercase letters, digits, '-' and '.')",
                     name);
    if (k->namespaced) {
        if (!ns)
            return vfail(&v, meta, "metadata.namespace",
                         "required for a %s (tenantd has no current namespace)", k->kind);
        if (!dns_label(ns))
            return vfail(&v, json_object_get(meta, "namespace"), "metadata.namespace",
                         "\"%s\" is not a valid namespace name", ns);
    }
    TRY(check_string_map(&v, json_object_get(meta, "labels"), "metadata.labels"));
    TRY(check_string_map(&v, json_object_get(meta, "annotations"), "metadata.annotations"));
    return k->validate(&v);
}

/* ---- builder ----------------------------------------------------------- */

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->key, ((const entry *)b)->key);
}

td_status td_config_builder_create(const td_config *base, td_config_builder **out, td_err *err)
{
    td_config_builder *b = calloc(1, sizeof *b);
    if (!b)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    if (base && base->n) {
        b->items = calloc(base->n, sizeof *b->items);
        if (!b->items) {
            free(b);
            return td_err_set(err, TD_ENOMEM, "out of memory");
        }
        b->cap = base->n;
        for (size_t i = 0; i < base->n; i++) {
            b->items[i] = base->items[i];
            json_incref(b->items[i].kref);
            json_incref(b->items[i].obj);
        }
        b->n = b->nsorted = base->n;
    }
    *out = b;
    return TD_OK;
}

void td_config_builder_destroy(td_config_builder *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->n; i++) {
        json_decref(b->items[i].kref);
        json_decref(b->items[i].obj);
    }
    free(b->items);
    free(b);
}

/* The first of items[0, n) (in key order) whose key is not below key. */
static size_t entry_lower_bound(const entry *items, size_t n, const char *key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(items[mid].key, key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Sorts what was added into the sorted part once it outgrows it (a load
 * that adds every object): adds stay O(log n) amortized. 0, or -1 out of
 * memory (then nothing changed). */
static int builder_compact(td_config_builder *b)
{
    size_t m = b->n - b->nsorted;
    if (m <= 64 || m <= b->nsorted)
        return 0;
    entry *tmp = malloc(b->n * sizeof *tmp);
    if (!tmp)
        return -1;
    qsort(b->items + b->nsorted, m, sizeof *b->items, entry_cmp);
    size_t i = 0, j = b->nsorted, k = 0;
    while (i < b->nsorted && j < b->n)
        tmp[k++] = strcmp(b->items[i].key, b->items[j].key) <= 0 ? b->items[i++] : b->items[j++];
    while (i < b->nsorted)
        tmp[k++] = b->items[i++];
    while (j < b->n)
        tmp[k++] = b->items[j++];
    memcpy(b->items, tmp, b->n * sizeof *tmp);
    free(tmp);
    b->nsorted = b->n;
    return 0;
}

/* Binary search over the base's part, a scan of what was added since:
 * a commit of a few objects over a large snapshot stays cheap. */
static size_t builder_find(const td_config_builder *b, const char *key)
{
    size_t i = entry_lower_bound(b->items, b->nsorted, key);
    if (i < b->nsorted && strcmp(b->items[i].key, key) == 0)
        return i;
    for (i = b->nsorted; i < b->n; i++)
        if (strcmp(b->items[i].key, key) == 0)
            return i;
    return (size_t)-1;
}

/* The key as a shared JSON string (make_key's buffer freed). */
static json_t *key_ref(char *key)
{
    json_t *k = key ? json_string_nocheck(key) : NULL;
    free(key);
    return k;
}

td_status td_config_builder_add(td_config_builder *b, json_t *obj, const td_manifest *src,
                                td_err *err)
{
    TRY(validate_object(obj, src, err));
    td_object_id id = td_object_identity(obj);
    json_t *kref = key_ref(make_key(id.kind, id.namespace_, id.name));
    json_t *copy = json_deep_copy(obj);
    if (!kref || !copy) {
        json_decref(kref);
        json_decref(copy);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    size_t at = builder_compact(b) == 0 ? builder_find(b, json_string_value(kref)) : (size_t)-1;
    if (at == (size_t)-1 && b->n - b->nsorted > 64 && b->n - b->nsorted > b->nsorted) {
        json_decref(kref); /* no memory to keep the search fast */
        json_decref(copy);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    if (at != (size_t)-1) {
        json_decref(kref);
        json_decref(b->items[at].obj);
        b->items[at].obj = copy;
        return TD_OK;
    }
    if (b->n == b->cap) {
        size_t ncap = b->cap ? b->cap * 2 : 16;
        entry *ni = realloc(b->items, ncap * sizeof *ni);
        if (!ni) {
            json_decref(kref);
            json_decref(copy);
            return td_err_set(err, TD_ENOMEM, "out of memory");
        }
        b->items = ni;
        b->cap = ncap;
    }
    b->items[b->n].key = json_string_value(kref);
    b->items[b->n].kref = kref;
    b->items[b->n].obj = copy;
    b->n++;
    return TD_OK;
}

td_status td_config_builder_add_manifest(td_config_builder *b, const td_manifest *m, td_err *err)
{
    for (size_t i = 0; i < td_manifest_count(m); i++)
        TRY(td_config_builder_add(b, td_manifest_doc(m, i), m, err));
    return TD_OK;
}

td_status td_config_builder_delete(td_config_builder *b, const char *kind, const char *namespace_,
                                   const char *name, td_err *err)
{
    const char *k = td_kind_canonical(kind);
    if (!k)
        return td_err_set(err, TD_EINVAL, "unknown kind \"%s\"", kind);
    const char *ns = td_kind_namespaced(k) ? (namespace_ ? namespace_ : "") : "";
    if (td_kind_namespaced(k) && !*ns)
        return td_err_set(err, TD_EINVAL, "%s is namespaced: give a namespace", k);
    char *key = make_key(k, ns, name);
    if (!key)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    size_t at = builder_find(b, key);
    free(key);
    if (at == (size_t)-1)
        return td_err_set(err, TD_ENOTFOUND, "%s %s%s%s not found", k, ns, *ns ? "/" : "", name);
    json_decref(b->items[at].kref);
    json_decref(b->items[at].obj);
    memmove(&b->items[at], &b->items[at + 1], (b->n - at - 1) * sizeof *b->items);
    b->n--;
    if (at < b->nsorted)
        b->nsorted--;
    return TD_OK;
}

static int is_kind(const json_t *o, const char *kind)
{
    const char *k = td_json_str(o, "kind");
    return k && strcmp(k, kind) == 0;
}

static json_t *find_obj(entry *items, size_t n, const char *kind, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (is_kind(items[i].obj, kind) && strcmp(td_json_str(items[i].obj, "metadata.name"),
                                                  name) == 0)
            return items[i].obj;
    return NULL;
}

/* The isolation tiers' rules across objects (tenancy.h): a customer is on
 * no NodePool shared with another tenant, the sandbox RuntimeClass exists
 * once there is a customer, and no two tenants' storage overlaps. */
static td_status tenancy_cross_check(entry *items, size_t n, td_err *err)
{
    const json_t *customer = NULL;
    for (size_t i = 0; i < n; i++) {
        json_t *t = items[i].obj;
        if (!is_kind(t, "Tenant"))
            continue;
        const char *name = td_json_str(t, "metadata.name");
        if (td_tenancy_of(t) == TD_TENANCY_CUSTOMER) {
            if (!customer)
                customer = t;
            for (size_t j = 0; j < n; j++) {
                json_t *pool = items[j].obj;
                if (!is_kind(pool, "NodePool"))
                    continue;
                json_t *ts = td_json_path(pool, "spec.tenants");
                int listed = 0;
                size_t k;
                json_t *x;
                json_array_foreach(ts, k, x)
                {
                    listed |= strcmp(json_string_value(x), name) == 0;
                }
                if (listed && json_array_size(ts) > 1)
                    return td_err_set(err, TD_EINVAL,
                                      "NodePool %s: spec.tenants: customer tenant \"%s\" shares "
                                      "this pool with other tenants; a customer's pools are "
                                      "dedicated (spec.tenants: [%s])",
                                      td_json_str(pool, "metadata.name"), name, name);
            }
        }
        const char *b1 = td_json_str(t, "spec.storage.bucket");
        const char *p1 = td_json_str(t, "spec.storage.prefix");
        for (size_t j = i + 1; b1 && j < n; j++) {
            json_t *u = items[j].obj;
            if (!is_kind(u, "Tenant"))
                continue;
            const char *b2 = td_json_str(u, "spec.storage.bucket");
            const char *p2 = td_json_str(u, "spec.storage.prefix");
            if (td_storage_overlap(b1, p1 ? p1 : "", b2, p2 ? p2 : ""))
                return td_err_set(err, TD_EINVAL,
                                  "Tenant %s: spec.storage: %s/%s overlaps tenant %s's %s/%s; "
                                  "storage prefixes of tenants must be disjoint",
                                  td_json_str(u, "metadata.name"), b2, p2 ? p2 : "", name, b1,
                                  p1 ? p1 : "");
        }
    }
    if (customer) {
        json_t *pol = find_obj(items, n, "AdmissionPolicy", "default");
        for (size_t i = 0; !pol && i < n; i++)
            if (is_kind(items[i].obj, "AdmissionPolicy"))
                pol = items[i].obj;
        const char *rc = td_json_str(pol, "spec.sandbox.runtimeClassName");
        if (!rc || !*rc)
            rc = TD_SANDBOX_RUNTIME_CLASS;
        if (!find_obj(items, n, "RuntimeClass", rc))
            return td_err_set(err, TD_EINVAL,
                              "Tenant %s: spec.tenancy: customer pods run in the sandbox "
                              "RuntimeClass \"%s\", which is not defined; add a RuntimeClass "
                              "%s (node.k8s.io/v1, handler %s for gVisor), as `tenantctl "
                              "provision --tenancy customer` emits it",
                              td_json_str(customer, "metadata.name"), rc, rc, TD_SANDBOX_HANDLER);
    }
    return TD_OK;
}

/* A Tenant with budgets can use every Route, so the CostPolicy (the one
 * named default, else the first) must price each of them: a request that
 * cannot be priced cannot be held to a budget. */
static td_status budget_cross_check(entry *items, size_t n, td_err *err)
{
    const json_t *budgeted = NULL;
    char field[64] = "spec.budgets";
    for (size_t i = 0; !budgeted && i < n; i++) {
        if (!is_kind(items[i].obj, "Tenant"))
            continue;
        if (json_array_size(td_json_path(items[i].obj, "spec.budgets")) > 0)
            budgeted = items[i].obj;
        size_t k;
        json_t *key;
        json_array_foreach(td_json_path(items[i].obj, "spec.apiKeys"), k, key)
        {
            if (!budgeted && json_array_size(json_object_get(key, "budgets")) > 0) {
                budgeted = items[i].obj;
                snprintf(field, sizeof field, "spec.apiKeys[%zu].budgets", k);
            }
        }
    }
    if (!budgeted)
        return TD_OK;
    const char *tn = td_json_str(budgeted, "metadata.name");
    json_t *pol = find_obj(items, n, "CostPolicy", "default");
    for (size_t i = 0; !pol && i < n; i++)
        if (is_kind(items[i].obj, "CostPolicy"))
            pol = items[i].obj;
    if (!pol)
        return td_err_set(err, TD_EINVAL,
                          "Tenant %s: %s: there is no CostPolicy to price its requests; "
                          "add a CostPolicy with a price for every Route",
                          tn, field);
    td_costpolicy *cp = NULL;
    td_status st = td_costpolicy_parse(pol, NULL, &cp, err);
    for (size_t i = 0; st == TD_OK && i < n; i++) {
        if (!is_kind(items[i].obj, "Route"))
            continue;
        const char *rn = td_json_str(items[i].obj, "metadata.name");
        if (!td_costpolicy_prices_route(cp, rn))
            st = td_err_set(err, TD_EINVAL,
                            "Tenant %s: %s: CostPolicy %s has no price for Route %s, "
                            "which the tenant can use; add {route: %s, per1kTokens: ...} (or "
                            "perRequest, perGPUHour) to its spec.prices",
                            tn, field, td_json_str(pol, "metadata.name"), rn, rn);
    }
    td_costpolicy_destroy(cp);
    return st;
}

/* Rules that span objects. */
static td_status cross_check(entry *items, size_t n, td_err *err)
{
    const char *global_default = NULL;
    for (size_t i = 0; i < n; i++) {
        json_t *o = items[i].obj;
        const char *kind = td_json_str(o, "kind");
        if (strcmp(kind, "PriorityClass") == 0 && json_is_true(json_object_get(o, "globalDefault"))) {
            if (global_default)
                return td_err_set(err, TD_EINVAL,
                                  "PriorityClass %s: globalDefault: PriorityClass %s is already "
                                  "the global default; only one may be",
                                  td_json_str(o, "metadata.name"), global_default);
            global_default = td_json_str(o, "metadata.name");
        }
        if (strcmp(kind, "Tenant") != 0)
            continue;
        size_t ka;
        json_t *key;
        json_array_foreach(td_json_path(o, "spec.apiKeys"), ka, key)
        {
            const char *h = td_json_str(key, "sha256");
            for (size_t j = i; h && j < n; j++) {
                json_t *p = items[j].obj;
                if (strcmp(td_json_str(p, "kind"), "Tenant") != 0)
                    continue;
                size_t kb;
                json_t *key2;
                json_array_foreach(td_json_path(p, "spec.apiKeys"), kb, key2)
                {
                    const char *h2 = td_json_str(key2, "sha256");
                    if ((j > i || kb > ka) && h2 && strcasecmp(h, h2) == 0)
                        return td_err_set(err, TD_EINVAL,
                                          "Tenant %s: spec.apiKeys: key %s is already a key of "
                                          "tenant %s; a key names one tenant",
                                          td_json_str(p, "metadata.name"), "(sha256)",
                                          td_json_str(o, "metadata.name"));
                }
            }
        }
        json_t *nss = td_json_path(o, "spec.namespaces");
        size_t a;
        json_t *ns;
        json_array_foreach(nss, a, ns)
        {
            for (size_t j = i + 1; j < n; j++) {
                json_t *p = items[j].obj;
                if (strcmp(td_json_str(p, "kind"), "Tenant") != 0)
                    continue;
                size_t b;
                json_t *ns2;
                json_array_foreach(td_json_path(p, "spec.namespaces"), b, ns2)
                {
                    if (json_equal(ns, ns2))
                        return td_err_set(err, TD_EINVAL,
                                          "Tenant %s: spec.namespaces: namespace \"%s\" already "
                                          "belongs to tenant %s; a namespace has one owner",
                                          td_json_str(p, "metadata.name"), json_string_value(ns),
                                          td_json_str(o, "metadata.name"));
                }
            }
        }
    }
    if (budget_cross_check(items, n, err) != TD_OK)
        return TD_EINVAL;
    return tenancy_cross_check(items, n, err);
}

td_status td_config_builder_finish(td_config_builder *b, td_config **out, td_err *err)
{
    td_config *c = calloc(1, sizeof *c);
    if (!c)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    atomic_init(&c->refs, 1);
    for (int i = 0; i < TD_CONFIG_ATTACH_MAX; i++)
        atomic_init(&c->attach[i], NULL);
    if (b->n) {
        c->items = calloc(b->n, sizeof *c->items);
        c->objs = calloc(b->n, sizeof *c->objs);
        if (!c->items || !c->objs) {
            free(c->items);
            free(c->objs);
            free(c);
            return td_err_set(err, TD_ENOMEM, "out of memory");
        }
        /* what was added, sorted, merged into the base's sorted part */
        qsort(b->items + b->nsorted, b->n - b->nsorted, sizeof *b->items, entry_cmp);
        size_t i = 0, j = b->nsorted;
        while (i < b->nsorted || j < b->n) {
            size_t run = b->nsorted - i;
            if (j < b->n)
                run = entry_lower_bound(b->items + i, b->nsorted - i, b->items[j].key);
            memcpy(c->items + c->n, b->items + i, run * sizeof *c->items);
            c->n += run;
            i += run;
            if (j < b->n)
                c->items[c->n++] = b->items[j++];
        }
        for (size_t k = 0; k < c->n; k++) {
            json_incref(c->items[k].kref);
            json_incref(c->items[k].obj);
            c->objs[k] = c->items[k].obj;
        }
    }
    /* No cross-object rule reads a Workload: the checks run over the other
     * objects, whatever the number of Workloads stored. */
    size_t ws = entry_lower_bound(c->items, c->n, "Workload\x1f");
    size_t we = entry_lower_bound(c->items, c->n, "Workload\x20");
    entry *rest = malloc((c->n - (we - ws) + 1) * sizeof *rest);
    if (!rest) {
        td_config_unref(c);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    if (c->n) {
        memcpy(rest, c->items, ws * sizeof *rest);
        memcpy(rest + ws, c->items + we, (c->n - we) * sizeof *rest);
    }
    td_status st = cross_check(rest, c->n - (we - ws), err);
    free(rest);
    if (st != TD_OK) {
        td_config_unref(c);
        return st;
    }
    *out = c;
    return TD_OK;
}

td_config *td_config_ref(td_config *c)
{
    if (c)
        atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    return c;
}

void td_config_unref(td_config *c)
{
    if (!c || atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < c->n; i++) {
        json_decref(c->items[i].kref);
        json_decref(c->items[i].obj);
    }
    free(c->items);
    free(c->objs);
    for (int i = 0; i < TD_CONFIG_ATTACH_MAX; i++) {
        td_config_attachment *a = atomic_load_explicit(&c->attach[i], memory_order_acquire);
        if (a)
            a->destroy(a);
    }
    free(c);
}

td_config_attachment *td_config_attachment_get(const td_config *c, td_config_attach_slot slot,
                                               td_config_attachment *(*build)(const td_config *c))
{
    if (!c || slot < 0 || slot >= TD_CONFIG_ATTACH_MAX)
        return NULL;
    /* The slot is the one mutable field of a snapshot; it only goes from
     * NULL to a finished value, once. */
    _Atomic(td_config_attachment *) *slotp = (_Atomic(td_config_attachment *) *)&c->attach[slot];
    td_config_attachment *a = atomic_load_explicit(slotp, memory_order_acquire);
    if (a)
        return a;
    return td_config_attachment_offer(c, slot, build(c));
}

td_config_attachment *td_config_attachment_offer(const td_config *c, td_config_attach_slot slot,
                                                 td_config_attachment *mine)
{
    if (!mine)
        return NULL;
    if (!c || slot < 0 || slot >= TD_CONFIG_ATTACH_MAX) {
        mine->destroy(mine);
        return NULL;
    }
    _Atomic(td_config_attachment *) *slotp = (_Atomic(td_config_attachment *) *)&c->attach[slot];
    td_config_attachment *expected = NULL;
    if (atomic_compare_exchange_strong_explicit(slotp, &expected, mine, memory_order_acq_rel,
                                                memory_order_acquire))
        return mine;
    mine->destroy(mine);
    return expected;
}

td_status td_config_empty(td_config **out, td_err *err)
{
    td_config_builder *b = NULL;
    TRY(td_config_builder_create(NULL, &b, err));
    td_status st = td_config_builder_finish(b, out, err);
    td_config_builder_destroy(b);
    return st;
}

td_status td_config_load_files(const char *const *paths, size_t n, td_config **out, td_err *err)
{
    td_config_builder *b = NULL;
    TRY(td_config_builder_create(NULL, &b, err));
    td_status st = TD_OK;
    for (size_t i = 0; i < n && st == TD_OK; i++) {
        td_manifest *m = NULL;
        st = td_manifest_load_file(paths[i], &m, err);
        if (st == TD_OK)
            st = td_config_builder_add_manifest(b, m, err);
        td_manifest_destroy(m);
    }
    if (st == TD_OK)
        st = td_config_builder_finish(b, out, err);
    td_config_builder_destroy(b);
    return st;
}

td_status td_config_load_text(const char *name, const char *text, size_t len, td_config **out,
                              td_err *err)
{
    td_manifest *m = NULL;
    TRY(td_manifest_parse(name, text, len, &m, err));
    td_config_builder *b = NULL;
    td_status st = td_config_builder_create(NULL, &b, err);
    if (st == TD_OK)
        st = td_config_builder_add_manifest(b, m, err);
    if (st == TD_OK)
        st = td_config_builder_finish(b, out, err);
    td_config_builder_destroy(b);
    td_manifest_destroy(m);
    return st;
}

/* First index whose key starts with prefix (keys are sorted). */
static size_t lower_bound(const td_config *c, const char *prefix)
{
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(c->items[mid].key, prefix) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Appends s (and the \x1f separator if sep) to key[*len], truncating as
 * snprintf would; key stays NUL-terminated. Lookups build keys per
 * admission review, so without snprintf. */
static void key_append(char *key, size_t cap, size_t *len, const char *s, int sep)
{
    size_t n = strlen(s);
    if (*len + n >= cap)
        n = cap - 1 - *len;
    memcpy(key + *len, s, n);
    *len += n;
    if (sep && *len + 1 < cap)
        key[(*len)++] = '\x1f';
    key[*len] = '\0';
}

size_t td_config_list(const td_config *c, const char *kind, const char *namespace_,
                      json_t *const **out)
{
    *out = NULL;
    if (!c || !kind)
        return 0;
    char prefix[512];
    size_t plen = 0;
    key_append(prefix, sizeof prefix, &plen, kind, 1);
    if (namespace_ && td_kind_namespaced(kind))
        key_append(prefix, sizeof prefix, &plen, namespace_, 1);
    size_t i = lower_bound(c, prefix), j = i;
    while (j < c->n && strncmp(c->items[j].key, prefix, plen) == 0)
        j++;
    if (j > i)
        *out = &c->objs[i];
    return j - i;
}

size_t td_config_all(const td_config *c, json_t *const **out)
{
    *out = c && c->n ? c->objs : NULL;
    return c ? c->n : 0;
}

json_t *td_config_get(const td_config *c, const char *kind, const char *namespace_,
                      const char *name)
{
    if (!c || !kind || !name)
        return NULL;
    char key[1024];
    size_t klen = 0;
    key_append(key, sizeof key, &klen, kind, 1);
    key_append(key, sizeof key, &klen, td_kind_namespaced(kind) && namespace_ ? namespace_ : "", 1);
    key_append(key, sizeof key, &klen, name, 0);
    size_t i = lower_bound(c, key);
    return i < c->n && strcmp(c->items[i].key, key) == 0 ? c->items[i].obj : NULL;
}

json_t *td_config_tenant_for_namespace(const td_config *c, const char *ns)
{
    json_t *const *tenants;
    size_t n = td_config_list(c, "Tenant", NULL, &tenants);
    for (size_t i = 0; ns && i < n; i++) {
        size_t k;
        json_t *x;
        json_array_foreach(td_json_path(tenants[i], "spec.namespaces"), k, x)
        {
            if (strcmp(json_string_value(x), ns) == 0)
                return tenants[i];
        }
    }
    return NULL;
}

json_t *td_config_admission_policy(const td_config *c)
{
    json_t *p = td_config_get(c, "AdmissionPolicy", NULL, "default");
    if (p)
        return p;
    json_t *const *all;
    return td_config_list(c, "AdmissionPolicy", NULL, &all) ? all[0] : NULL;
}
