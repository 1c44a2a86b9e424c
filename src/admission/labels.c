/* labels.c - mandatory cost labels. Every pod maps to an owner through the
 * labels team, project and environment (configurable by AdmissionPolicy);
 * a missing one is inherited from the Namespace, then from the Tenant. */
#include <stdio.h>
#include <string.h>

#include "admission/policy.h"
#include "admission/tenancy_internal.h"

static const char *const default_required[] = {"team", "project", "environment"};

/* Calls fn for each required label name; stops at the first non-OK. */
typedef td_status (*label_fn)(const char *label, void *arg);

static td_status each_required(const td__tenancy_policy *pol, label_fn fn, void *arg)
{
    json_t *list = pol->required_labels;
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

static int inherit_enabled(const td__tenancy_policy *pol)
{
    json_t *v = pol->inherit_labels;
    return v ? json_is_true(v) : 1;
}

static const char *nonempty(const char *s)
{
    return s && *s ? s : NULL;
}

typedef struct {
    const td_config *cfg;
    const td__tenancy_index *ix;
    const td__tenancy_policy *pol;
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
    td__tenancy_ns spare;
    const td__tenancy_ns *tn = td__tenancy_ns_get(c->ix, c->cfg, c->ns, &spare);
    const char *v = nonempty(json_string_value(json_object_get(tn->ns_labels, label)));
    if (!v)
        v = nonempty(json_string_value(json_object_get(tn->tenant_labels, label)));
    if (v && json_object_set_new(c->labels, label, json_string(v)) < 0)
        return td_err_set(c->err, TD_ENOMEM, "out of memory");
    return TD_OK;
}

td_status td_labels_mutate(const td_config *cfg, const char *ns, json_t *pod, td_err *err)
{
    const td__tenancy_index *ix = td__tenancy_index_get(cfg);
    td__tenancy_policy spare;
    const td__tenancy_policy *pol = td__tenancy_policy_get(ix, cfg, &spare);
    if (!inherit_enabled(pol))
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
    label_ctx c = {cfg, ix, pol, ns, labels, pod, err};
    td_status st = each_required(pol, inherit_one, &c);
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
    json_t *list = c->pol->required_labels;
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
    json_t *labels = json_object_get(json_object_get(pod, "metadata"), "labels");
    if (labels && !json_is_object(labels))
        return td_err_set(err, TD_EINVAL, "metadata.labels: must be a map of strings");
    const td__tenancy_index *ix = td__tenancy_index_get(cfg);
    td__tenancy_policy spare;
    const td__tenancy_policy *pol = td__tenancy_policy_get(ix, cfg, &spare);
    label_ctx c = {cfg, ix, pol, ns, labels, pod, err};
    return each_required(pol, check_one, &c);
}
