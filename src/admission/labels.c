/* labels.c - mandatory cost labels. Every pod maps to an owner through the
 * labels team, project and environment (configurable by AdmissionPolicy);
 * a missing one is inherited from the Namespace, then from the Tenant. */
#include <string.h>

#include "tenantd/policy.h"

static const char *const default_required[] = {"team", "project", "environment"};

/* Calls fn for each required label name; stops at the first non-OK. */
typedef td_status (*label_fn)(const char *label, void *arg);

static td_status each_required(const td_config *cfg, label_fn fn, void *arg)
{
    json_t *policy = td_config_admission_policy(cfg);
    json_t *list = td_json_path(policy, "spec.requiredLabels");
    if (json_is_array(list)) {
        size_t i;
        json_t *x;
        json_array_foreach(list, i, x)
        {
            td_status st = fn(json_string_value(x), arg);
            if (st != TD_OK)
                return st;
        }
        return TD_OK;
    }
    for (size_t i = 0; i < sizeof default_required / sizeof default_required[0]; i++) {
        td_status st = fn(default_required[i], arg);
        if (st != TD_OK)
            return st;
    }
    return TD_OK;
}

static int inherit_enabled(const td_config *cfg)
{
    json_t *v = td_json_path(td_config_admission_policy(cfg), "spec.inheritLabelsFromNamespace");
    return v ? json_is_true(v) : 1;
}

static const char *nonempty(const char *s)
{
    return s && *s ? s : NULL;
}

typedef struct {
    const td_config *cfg;
    const char *ns;
    json_t *labels; /* the pod's metadata.labels */
    const json_t *pod;
    td_err *err;
} label_ctx;

static td_status inherit_one(const char *label, void *arg)
{
    label_ctx *c = arg;
    if (nonempty(json_string_value(json_object_get(c->labels, label))))
        return TD_OK;
    json_t *nsobj = td_config_get(c->cfg, "Namespace", NULL, c->ns);
    const char *v = nonempty(json_string_value(json_object_get(td_json_path(nsobj, "metadata.labels"), label)));
    if (!v) {
        json_t *tenant = td_config_tenant_for_namespace(c->cfg, c->ns);
        v = nonempty(json_string_value(json_object_get(td_json_path(tenant, "spec.labels"), label)));
    }
    if (v && json_object_set_new(c->labels, label, json_string(v)) < 0)
        return td_err_set(c->err, TD_ENOMEM, "out of memory");
    return TD_OK;
}

td_status td_labels_mutate(const td_config *cfg, const char *ns, json_t *pod, td_err *err)
{
    if (!inherit_enabled(cfg))
        return TD_OK;
    json_t *meta = json_object_get(pod, "metadata");
    if (!json_is_object(meta))
        return td_err_set(err, TD_EINVAL, "metadata: must be a mapping");
    json_t *labels = json_object_get(meta, "labels");
    int created = 0;
    if (!labels) {
        labels = json_object();
        if (!labels || json_object_set_new(meta, "labels", labels) < 0)
            return td_err_set(err, TD_ENOMEM, "out of memory");
        created = 1;
    } else if (!json_is_object(labels)) {
        return td_err_set(err, TD_EINVAL, "metadata.labels: must be a map of strings");
    }
    label_ctx c = {cfg, ns, labels, pod, err};
    td_status st = each_required(cfg, inherit_one, &c);
    if (created && json_object_size(labels) == 0)
        json_object_del(meta, "labels"); /* leave no empty map behind */
    return st;
}

static td_status check_one(const char *label, void *arg)
{
    label_ctx *c = arg;
    if (nonempty(json_string_value(json_object_get(c->labels, label))))
        return TD_OK;
    char required[256] = "";
    json_t *list = td_json_path(td_config_admission_policy(c->cfg), "spec.requiredLabels");
    if (json_is_array(list)) {
        size_t i;
        json_t *x;
        json_array_foreach(list, i, x)
        {
            strncat(required, i ? ", " : "", sizeof required - strlen(required) - 1);
            strncat(required, json_string_value(x), sizeof required - strlen(required) - 1);
        }
    } else {
        snprintf(required, sizeof required, "team, project, environment");
    }
    return td_err_set(c->err, TD_EFORBIDDEN,
                      "missing required cost label \"%s\" (required: %s): set it on the pod, or "
                      "on namespace \"%s\" so that pods inherit it",
                      label, required, c->ns);
}

td_status td_labels_validate(const td_config *cfg, const char *ns, const json_t *pod,
                             td_err *err)
{
    json_t *labels = td_json_path(pod, "metadata.labels");
    if (labels && !json_is_object(labels))
        return td_err_set(err, TD_EINVAL, "metadata.labels: must be a map of strings");
    label_ctx c = {cfg, ns, labels, pod, err};
    return each_required(cfg, check_one, &c);
}
