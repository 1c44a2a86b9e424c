/* tenancy.c - the admission rules of the isolation tiers: sandboxed
 * runtimes for customers and untrusted workloads, and storage isolation by
 * bucket prefix and StorageClass. Locations are compared as parsed URIs,
 * segment-aware, never as raw strings: "team-a-evil/" is not "team-a/". */
#include "admission/tenancy_internal.h"

#include <stdio.h>
#include <string.h>

static const char *runtime_class_of(const td__tenancy_policy *pol)
{
    const char *rc = pol->runtime_class;
    return rc && *rc ? rc : TD_SANDBOX_RUNTIME_CLASS;
}

const char *td_sandbox_runtime_class(const td_config *cfg)
{
    td__tenancy_policy spare;
    return runtime_class_of(td__tenancy_policy_get(td__tenancy_index_get(cfg), cfg, &spare));
}

static bool untrusted_workload(const td__tenancy_policy *pol, const char *w)
{
    json_t *list = pol->untrusted_workloads;
    if (!json_is_array(list))
        return strcmp(w, "notebook") == 0;
    size_t i;
    json_t *x;
    json_array_foreach(list, i, x)
    {
        if (json_is_string(x) && strcmp(json_string_value(x), w) == 0)
            return true;
    }
    return false;
}

/* td_sandbox_required with the snapshot's index (may be NULL) and policy. */
static bool sandbox_required(const td_config *cfg, const td__tenancy_index *ix,
                             const td__tenancy_policy *pol, const char *ns, const json_t *pod,
                             const char **why, char *buf, size_t bufsz)
{
    td__tenancy_ns spare;
    const td__tenancy_ns *tn = td__tenancy_ns_get(ix, cfg, ns, &spare);
    if (tn->customer) {
        snprintf(buf, bufsz, "namespace %s belongs to customer tenant \"%s\"", ns,
                 tn->tenant_name);
        if (why)
            *why = buf;
        return true;
    }
    const char *w = json_string_value(
        json_object_get(json_object_get(json_object_get(pod, "metadata"), "labels"),
                        TD_LABEL_WORKLOAD));
    if (w && untrusted_workload(pol, w)) {
        snprintf(buf, bufsz, "the pod is labelled %s=%s, an untrusted workload", TD_LABEL_WORKLOAD,
                 w);
        if (why)
            *why = buf;
        return true;
    }
    return false;
}

bool td_sandbox_required(const td_config *cfg, const char *ns, const json_t *pod,
                         const char **why, char *buf, size_t bufsz)
{
    const td__tenancy_index *ix = td__tenancy_index_get(cfg);
    td__tenancy_policy spare;
    return sandbox_required(cfg, ix, td__tenancy_policy_get(ix, cfg, &spare), ns, pod, why, buf,
                            bufsz);
}

/* Merges the RuntimeClass's scheduling and overhead into the pod, as the
 * RuntimeClass admission plugin does: it ran before this webhook set the
 * class, so the pod would otherwise miss them. A pod selector that
 * conflicts with the class's is left for the scheduler to refuse. */
static td_status apply_runtime_class(const json_t *rc, json_t *spec, td_err *err)
{
    json_t *sel = td_json_path(rc, "scheduling.nodeSelector");
    if (json_object_size(sel)) {
        json_t *podsel = json_object_get(spec, "nodeSelector");
        if (!podsel) {
            podsel = json_object();
            if (!podsel || json_object_set_new(spec, "nodeSelector", podsel) < 0)
                return td_err_set(err, TD_ENOMEM, "out of memory");
        }
        if (!json_is_object(podsel))
            return td_err_set(err, TD_EINVAL, "spec.nodeSelector: must be a map of strings");
        const char *k;
        json_t *v;
        json_object_foreach(sel, k, v)
        {
            if (!json_object_get(podsel, k) && json_object_set(podsel, k, v) < 0)
                return td_err_set(err, TD_ENOMEM, "out of memory");
        }
    }
    json_t *tols = td_json_path(rc, "scheduling.tolerations");
    if (json_array_size(tols)) {
        json_t *podtols = json_object_get(spec, "tolerations");
        if (!podtols) {
            podtols = json_array();
            if (!podtols || json_object_set_new(spec, "tolerations", podtols) < 0)
                return td_err_set(err, TD_ENOMEM, "out of memory");
        }
        if (!json_is_array(podtols))
            return td_err_set(err, TD_EINVAL, "spec.tolerations: must be a list");
        size_t i, j;
        json_t *t, *have;
        json_array_foreach(tols, i, t)
        {
            int dup = 0;
            json_array_foreach(podtols, j, have)
            {
                dup |= json_equal(have, t);
            }
            if (!dup && json_array_append(podtols, t) < 0)
                return td_err_set(err, TD_ENOMEM, "out of memory");
        }
    }
    json_t *fixed = td_json_path(rc, "overhead.podFixed");
    if (json_object_size(fixed) && !json_object_get(spec, "overhead")) {
        json_t *copy = json_deep_copy(fixed);
        if (!copy || json_object_set_new(spec, "overhead", copy) < 0)
            return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    return TD_OK;
}

td_status td_sandbox_mutate(const td_config *cfg, const char *ns, json_t *pod, td_err *err)
{
    char buf[320];
    const td__tenancy_index *ix = td__tenancy_index_get(cfg);
    td__tenancy_policy spare;
    const td__tenancy_policy *pol = td__tenancy_policy_get(ix, cfg, &spare);
    if (!sandbox_required(cfg, ix, pol, ns, pod, NULL, buf, sizeof buf))
        return TD_OK;
    json_t *spec = json_object_get(pod, "spec");
    if (!json_is_object(spec))
        return td_err_set(err, TD_EINVAL, "spec: must be a mapping");
    json_t *have = json_object_get(spec, "runtimeClassName");
    if (have && !json_is_null(have))
        return TD_OK;
    const char *rcname = runtime_class_of(pol);
    if (json_object_set_new(spec, "runtimeClassName", json_string(rcname)) < 0)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    return apply_runtime_class(td_config_get(cfg, "RuntimeClass", NULL, rcname), spec, err);
}

td_status td_sandbox_validate(const td_config *cfg, const char *ns, const json_t *pod,
                              td_err *err)
{
    char buf[320];
    const char *why = "";
    const td__tenancy_index *ix = td__tenancy_index_get(cfg);
    td__tenancy_policy spare;
    const td__tenancy_policy *pol = td__tenancy_policy_get(ix, cfg, &spare);
    if (!sandbox_required(cfg, ix, pol, ns, pod, &why, buf, sizeof buf))
        return TD_OK;
    const char *want = runtime_class_of(pol);
    json_t *have = td_json_path(pod, "spec.runtimeClassName");
    if (json_is_string(have) && strcmp(json_string_value(have), want) == 0)
        return TD_OK;
    if (!have || json_is_null(have))
        return td_err_set(err, TD_EFORBIDDEN,
                          "pod must run in the sandbox RuntimeClass \"%s\" (%s) but sets no "
                          "spec.runtimeClassName",
                          want, why);
    return td_err_set(err, TD_EFORBIDDEN,
                      "spec.runtimeClassName \"%s\" is not allowed: %s, so the pod must run in "
                      "the sandbox RuntimeClass \"%s\"",
                      json_is_string(have) ? json_string_value(have) : "(not a string)", why,
                      want);
}

/* ---- storage rules ------------------------------------------------------- */

static const char *tenant_name(const json_t *t)
{
    return td_json_str(t, "metadata.name");
}

/* Judges one declared location; where names it ("annotation ...", "env
 * DATA_URI of container \"c\""). */
static td_status check_location(const td_config *cfg, const json_t *tenant, const char *uri,
                                const char *where, td_err *err)
{
    td_object_uri u;
    td_err perr;
    if (td_object_uri_parse(uri, &u, &perr) != TD_OK)
        return td_err_set(err, TD_EFORBIDDEN, "%s: %s", where, perr.msg);
    json_t *storage = td_json_path(tenant, "spec.storage");
    const char *bucket = td_json_str(storage, "bucket");
    const char *prefix = td_json_str(storage, "prefix");
    if (!prefix)
        prefix = "";
    if (bucket) {
        if (td_object_uri_within(&u, bucket, prefix))
            return TD_OK;
        return td_err_set(err, TD_EFORBIDDEN,
                          "%s: \"%s\" lies outside tenant \"%s\"'s storage %s://%s/%s "
                          "(spec.storage of the Tenant)",
                          where, uri, tenant_name(tenant), u.scheme, bucket, prefix);
    }
    /* A tenant with no storage of its own still may not read another's. */
    json_t *const *tenants;
    size_t n = td_config_list(cfg, "Tenant", NULL, &tenants);
    for (size_t i = 0; i < n; i++) {
        if (tenants[i] == tenant)
            continue;
        const char *b2 = td_json_str(tenants[i], "spec.storage.bucket");
        const char *p2 = td_json_str(tenants[i], "spec.storage.prefix");
        if (b2 && td_object_uri_within(&u, b2, p2 ? p2 : ""))
            return td_err_set(err, TD_EFORBIDDEN,
                              "%s: \"%s\" lies in tenant \"%s\"'s storage %s://%s/%s, which %s%s%s "
                              "may not use",
                              where, uri, tenant_name(tenants[i]), u.scheme, b2, p2 ? p2 : "",
                              tenant ? "tenant \"" : "",
                              tenant ? tenant_name(tenant) : "a namespace with no Tenant",
                              tenant ? "\"" : "");
    }
    return TD_OK;
}

/* json_object_get(o, key) for a small object (an env entry: name and
 * value or valueFrom): its members walked, matched by their bytes. */
static json_t *member(const json_t *o, const char *key, size_t n)
{
    for (void *it = json_object_iter((json_t *)o); it; it = json_object_iter_next((json_t *)o, it))
        if (json_object_iter_key_len(it) == n && memcmp(json_object_iter_key(it), key, n) == 0)
            return json_object_iter_value(it);
    return NULL;
}

static td_status check_containers(const td_config *cfg, const json_t *tenant, const json_t *list,
                                  const char *what, td_err *err)
{
    size_t i, k;
    json_t *c, *e;
    json_array_foreach((json_t *)list, i, c)
    {
        json_array_foreach(json_object_get(c, "env"), k, e)
        {
            /* the value only of the one variable read */
            const char *name = json_string_value(member(e, "name", 4));
            if (!name || strcmp(name, TD_ENV_DATA_URI) != 0)
                continue;
            const char *value = json_string_value(json_object_get(e, "value"));
            if (!value)
                continue;
            char where[200];
            snprintf(where, sizeof where, "env %s of %s \"%s\"", TD_ENV_DATA_URI, what,
                     td_json_str(c, "name") ? td_json_str(c, "name") : "");
            td_status st = check_location(cfg, tenant, value, where, err);
            if (st != TD_OK)
                return st;
        }
    }
    return TD_OK;
}

static td_status check_class(const json_t *tenant, const char *cls, const char *where,
                             td_err *err)
{
    json_t *allowed = td_json_path(tenant, "spec.storage.storageClasses");
    if (!json_is_array(allowed))
        return TD_OK;
    char list[400] = "";
    size_t i;
    json_t *x;
    json_array_foreach(allowed, i, x)
    {
        if (cls && strcmp(json_string_value(x), cls) == 0)
            return TD_OK;
        if (i)
            strncat(list, ", ", sizeof list - strlen(list) - 1);
        strncat(list, json_string_value(x), sizeof list - strlen(list) - 1);
    }
    if (!cls)
        return td_err_set(err, TD_EFORBIDDEN,
                          "%s sets no storageClassName; tenant \"%s\" must name one of its "
                          "StorageClasses (%s)",
                          where, tenant_name(tenant), list);
    return td_err_set(err, TD_EFORBIDDEN,
                      "%s uses StorageClass \"%s\", which tenant \"%s\" may not use (allowed: "
                      "%s; spec.storage.storageClasses of the Tenant)",
                      where, cls, tenant_name(tenant), list);
}

td_status td_storage_validate_pod(const td_config *cfg, const char *ns, const json_t *pod,
                                  td_err *err)
{
    td__tenancy_ns spare;
    json_t *tenant = td__tenancy_ns_get(td__tenancy_index_get(cfg), cfg, ns, &spare)->tenant;
    const json_t *meta = json_object_get(pod, "metadata"), *spec = json_object_get(pod, "spec");
    const char *ann = json_string_value(
        json_object_get(json_object_get(meta, "annotations"), TD_ANNOTATION_DATA_URI));
    td_status st;
    if (ann && (st = check_location(cfg, tenant, ann, "annotation " TD_ANNOTATION_DATA_URI,
                                    err)) != TD_OK)
        return st;
    if ((st = check_containers(cfg, tenant, json_object_get(spec, "initContainers"),
                               "init container", err)) != TD_OK ||
        (st = check_containers(cfg, tenant, json_object_get(spec, "containers"), "container",
                               err)) != TD_OK)
        return st;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(spec, "volumes"), i, v)
    {
        json_t *tmpl = json_object_get(json_object_get(v, "ephemeral"), "volumeClaimTemplate");
        if (!tmpl)
            continue;
        char where[200];
        snprintf(where, sizeof where, "ephemeral volume \"%s\"",
                 td_json_str(v, "name") ? td_json_str(v, "name") : "");
        if ((st = check_class(tenant, td_json_str(tmpl, "spec.storageClassName"), where, err)) !=
            TD_OK)
            return st;
    }
    return TD_OK;
}

td_status td_storage_validate_pvc(const td_config *cfg, const char *ns, const json_t *pvc,
                                  td_err *err)
{
    json_t *tenant = td_config_tenant_for_namespace(cfg, ns);
    char where[200];
    snprintf(where, sizeof where, "PersistentVolumeClaim \"%s\"",
             td_json_str(pvc, "metadata.name") ? td_json_str(pvc, "metadata.name") : "");
    return check_class(tenant, td_json_str(pvc, "spec.storageClassName"), where, err);
}
