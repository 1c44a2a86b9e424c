/* models.c - the gateway's decisions about models: which Route serves the
 * model a request's body names (spec.match.models beside pathPrefix, as
 * the Gateway API Inference Extension's InferenceModel picks a pool by
 * the body's "model"), which models a tenant and its named keys may use
 * (spec.models), the GET /v1/models list and the OpenAI error types. Pure:
 * the proxy hands in the path, the body and the view. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/gateway.h"
#include "core/jsonfast.h"
#include "core/reqpath.h"

bool td_gw_model_match(const char *pattern, const char *model)
{
    if (!pattern || !model)
        return false;
    size_t n = strlen(pattern);
    if (n && pattern[n - 1] == '*')
        return strncmp(pattern, model, n - 1) == 0;
    return strcmp(pattern, model) == 0;
}

bool td_gw_model_listed(char *const *patterns, size_t n, const char *model)
{
    for (size_t i = 0; patterns && i < n; i++)
        if (td_gw_model_match(patterns[i], model))
            return true;
    return false;
}

static bool path_matches(const td_gw_route *r, const char *path, size_t n)
{
    return td_reqpath_has_prefix(path, n, r->path_prefix, strlen(r->path_prefix));
}

td_gw_route_need td_gw_route_by_path(const td_gw_config *c, const char *path,
                                     const td_gw_route **out)
{
    *out = NULL;
    size_t n = path ? strlen(path) : 0;
    for (size_t i = 0; c && path && i < c->nroutes; i++) {
        const td_gw_route *r = &c->routes[i];
        if (!path_matches(r, path, n))
            continue;
        if (r->nmodels)
            return TD_GW_ROUTE_BY_MODEL;
        *out = r;
        return TD_GW_ROUTE_FOUND;
    }
    return TD_GW_ROUTE_NONE;
}

const td_gw_route *td_gw_route_select(const td_gw_config *c, const char *path, const char *model)
{
    size_t n = path ? strlen(path) : 0;
    for (size_t i = 0; c && path && i < c->nroutes; i++) {
        const td_gw_route *r = &c->routes[i];
        if (!path_matches(r, path, n))
            continue;
        if (!r->nmodels || (model && td_gw_model_listed(r->models, r->nmodels, model)))
            return r;
    }
    return NULL;
}

td_gw_model_access td_gw_model_access_check(const td_gw_tenant *t, const td_gw_key *k,
                                            const char *model)
{
    bool ok = true;
    if (t && t->models)
        ok = model && td_gw_model_listed(t->models, t->nmodels, model);
    if (ok && k && k->models)
        ok = model && td_gw_model_listed(k->models, k->nmodels, model);
    if (ok)
        return TD_GW_MODEL_ALLOWED;
    return t && t->customer ? TD_GW_MODEL_HIDDEN : TD_GW_MODEL_FORBIDDEN;
}

const td_gw_model_limit *td_gw_model_limit_for(const td_gw_tenant *t, const char *model)
{
    for (size_t i = 0; t && model && i < t->nmodel_limits; i++)
        if (td_gw_model_match(t->model_limits[i].model, model))
            return &t->model_limits[i];
    return NULL;
}

td_status td_gw_body_model(const char *body, size_t len, char *out, size_t cap, td_err *err)
{
    out[0] = '\0';
    if (!body || len == 0)
        return TD_OK;
    json_error_t je;
    /* jansson's values and errors, without its per-byte reader: this is a
     * second parse of the body beside the cost estimate's */
    json_t *root = td_json_loadb(body, len, &je);
    if (!root)
        return td_err_set(err, TD_EINVAL, "request body is not JSON: %s (line %d, column %d)",
                          je.text, je.line, je.column);
    td_status st = TD_OK;
    const json_t *m = json_is_object(root) ? json_object_get(root, "model") : NULL;
    if (!json_is_object(root))
        st = td_err_set(err, TD_EINVAL, "request body must be a JSON object");
    else if (m && !json_is_null(m) && !json_is_string(m))
        st = td_err_set(err, TD_EINVAL, "model must be a string");
    else if (json_is_string(m) && json_string_length(m) >= cap)
        st = td_err_set(err, TD_EINVAL, "model is longer than %zu bytes", cap - 1);
    else if (json_is_string(m) && strlen(json_string_value(m)) != json_string_length(m))
        st = td_err_set(err, TD_EINVAL, "model holds a NUL byte");
    else if (json_is_string(m))
        memcpy(out, json_string_value(m), json_string_length(m) + 1);
    json_decref(root);
    return st;
}

/* true if model is served by some route (any path) of c. */
static bool served(const td_gw_config *c, const char *model)
{
    for (size_t i = 0; i < c->nroutes; i++)
        if (td_gw_model_listed(c->routes[i].models, c->routes[i].nmodels, model))
            return true;
    return false;
}

static bool is_exact(const char *m)
{
    size_t n = strlen(m);
    return n && m[n - 1] != '*';
}

/* Appends model to data unless it is listed already: 0, or -1 out of
 * memory. */
static int add_model(json_t *data, const char *model)
{
    size_t i;
    json_t *e;
    json_array_foreach(data, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "id")), model) == 0)
            return 0;
    }
    json_t *o = json_pack("{s:s, s:s, s:s}", "id", model, "object", "model", "owned_by", "tenantd");
    return o && json_array_append_new(data, o) == 0 ? 0 : -1;
}

td_status td_gw_models_list(const td_gw_config *c, const td_gw_tenant *t, const td_gw_key *k,
                            char **out, size_t *len)
{
    json_t *data = json_array();
    int bad = !data;
    /* candidates: the routes' exact names, then the tenant's and key's
     * exact names that a route's prefix serves */
    for (size_t i = 0; !bad && c && i < c->nroutes; i++)
        for (size_t m = 0; !bad && m < c->routes[i].nmodels; m++) {
            const char *id = c->routes[i].models[m];
            if (is_exact(id) && td_gw_model_access_check(t, k, id) == TD_GW_MODEL_ALLOWED)
                bad = add_model(data, id) < 0;
        }
    char *const *lists[2] = {t ? t->models : NULL, k ? k->models : NULL};
    size_t nlists[2] = {t ? t->nmodels : 0, k ? k->nmodels : 0};
    for (int l = 0; l < 2 && c; l++)
        for (size_t m = 0; !bad && m < nlists[l]; m++) {
            const char *id = lists[l][m];
            if (is_exact(id) && served(c, id) &&
                td_gw_model_access_check(t, k, id) == TD_GW_MODEL_ALLOWED)
                bad = add_model(data, id) < 0;
        }
    json_t *root = bad ? NULL : json_pack("{s:s, s:O}", "object", "list", "data", data);
    json_decref(data);
    char *s = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (!s)
        return TD_ENOMEM;
    *out = s;
    *len = strlen(s);
    return TD_OK;
}

const char *td_gw_error_type(int status, const char *code)
{
    if (status == 401)
        return "authentication_error";
    if (status == 403)
        return "permission_error";
    if (status == 429)
        return code && strcmp(code, "budget_exceeded") == 0 ? "insufficient_quota"
                                                            : "rate_limit_error";
    if (status >= 500 && status != 505)
        return "server_error";
    return "invalid_request_error";
}

const char *td_gw_model_label(const td_gw_config *c, const char *model)
{
    if (!model || !model[0])
        return "";
    const char *best = NULL;
    size_t best_n = 0;
    for (size_t i = 0; c && i < c->nroutes; i++)
        for (size_t j = 0; j < c->routes[i].nmodels; j++) {
            const char *p = c->routes[i].models[j];
            size_t n = strlen(p);
            if (!td_gw_model_match(p, model))
                continue;
            if (p[n - 1] != '*')
                return p; /* a name a Route lists */
            if (!best || n > best_n) {
                best = p;
                best_n = n;
            }
        }
    return best ? best : "other";
}
