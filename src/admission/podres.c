/* podres.c - resource arithmetic on v1 Pods, shared by LimitRanger and
 * ResourceQuota: request defaulting as kube-apiserver's SetDefaults_Pod, and
 * pod requests/limits as k8s.io/component-helpers/resource computes them. */
#include "admission/podres_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"

#define PATH_MAX_LEN 512

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
    default:
        return "null";
    }
}

td_status td__quantity_parse_json(const json_t *v, const char *path, td_quantity *q, td_err *err)
{
    char buf[64];
    const char *s;

    if (json_is_string(v)) {
        s = json_string_value(v);
        /* A string with an embedded NUL would be read short: not a quantity. */
        if (strlen(s) != json_string_length(v))
            return td_err_set(err, TD_EINVAL, "%s: %s is not a quantity", path, "string with NUL");
    } else if (json_is_integer(v)) {
        /* Quantity.UnmarshalJSON parses the raw number text as a quantity. */
        snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        s = buf;
    } else if (json_is_real(v)) {
        /* jansson keeps no source text for reals: print the shortest form
         * that reads back as the same double, which is what was written in
         * every ordinary case ("0.5", "1e3"). */
        double d = json_real_value(v);
        int prec;
        for (prec = 1; prec <= 17; prec++) {
            snprintf(buf, sizeof buf, "%.*g", prec, d);
            if (strtod(buf, NULL) == d)
                break;
        }
        s = buf;
    } else if (json_is_null(v)) {
        /* encoding/json leaves a null map value as the zero Quantity. */
        s = "0";
    } else {
        return td_err_set(err, TD_EINVAL, "%s: must be a quantity, not %s", path, json_kind(v));
    }
    if (td_quantity_parse(s, q, NULL) != TD_OK)
        return td_err_set(err, TD_EINVAL, "%s: \"%s\" is not a quantity", path, s);
    return TD_OK;
}

td_status td__resources_parse(const json_t *list, const char *path, td_resources *out, td_err *err)
{
    const char *name;
    json_t *value;
    char where[PATH_MAX_LEN];

    if (list == NULL || json_is_null(list))
        return TD_OK;
    if (!json_is_object(list))
        return td_err_set(err, TD_EINVAL, "%s: must be an object, not %s", path, json_kind(list));
    json_object_foreach((json_t *)list, name, value)
    {
        td_quantity q;
        td_status s;
        /* PATH.NAME is printed only for a message: most lists are fine */
        s = td__quantity_parse_json(value, "", &q, NULL);
        if (s != TD_OK) {
            snprintf(where, sizeof where, "%s.%s", path, name);
            return td__quantity_parse_json(value, where, &q, err);
        }
        if (name[0] == '\0' || strlen(name) >= TD_RESOURCE_NAME_MAX) {
            snprintf(where, sizeof where, "%s.%s", path, name);
            return td_err_set(err, TD_EINVAL, "%s: invalid resource name", where);
        }
        s = td_resources_set(out, name, &q);
        if (s == TD_ENOMEM)
            return td_err_set(err, TD_ENOMEM, "out of memory");
        if (s != TD_OK) {
            snprintf(where, sizeof where, "%s.%s", path, name);
            return td_err_set(err, s, "%s: invalid resource name", where);
        }
    }
    return TD_OK;
}

static void container_init(td__pod_container *c)
{
    c->name = "";
    c->restartable = false;
    td_resources_init(&c->requests);
    td_resources_init(&c->limits);
    c->src = c->src_resources = NULL;
}

static void container_fini(td__pod_container *c)
{
    td_resources_fini(&c->requests);
    td_resources_fini(&c->limits);
}

/* Parses c, element i of spec.<field>, into *out (initialised, filled on
 * TD_OK; the caller finishes it either way). */
static td_status parse_container(const json_t *c, const char *field, size_t i, bool init,
                                 td__pod_container *out, td_err *err)
{
    const json_t *name, *res, *policy;
    char path[PATH_MAX_LEN];

    if (!json_is_object(c))
        return td_err_set(err, TD_EINVAL, "spec.%s[%zu]: must be an object, not %s", field, i,
                          json_kind(c));
    out->src = c;
    name = json_object_get(c, "name");
    if (json_is_string(name))
        out->name = json_string_value(name);
    else if (name != NULL && !json_is_null(name))
        return td_err_set(err, TD_EINVAL, "spec.%s[%zu].name: must be a string", field, i);
    policy = json_object_get(c, "restartPolicy");
    out->restartable =
        init && json_is_string(policy) && strcmp(json_string_value(policy), "Always") == 0;
    res = json_object_get(c, "resources");
    out->src_resources = res;
    if (res == NULL || json_is_null(res))
        return TD_OK;
    if (!json_is_object(res))
        return td_err_set(err, TD_EINVAL, "spec.%s[%zu].resources: must be an object, not %s",
                          field, i, json_kind(res));
    /* the path is printed only for a message: parsed again to word it */
    if (td__resources_parse(json_object_get(res, "requests"), "", &out->requests, NULL) != TD_OK) {
        snprintf(path, sizeof path, "spec.%s[%zu].resources.requests", field, i);
        return td__resources_parse(json_object_get(res, "requests"), path, &out->requests, err);
    }
    if (td__resources_parse(json_object_get(res, "limits"), "", &out->limits, NULL) != TD_OK) {
        snprintf(path, sizeof path, "spec.%s[%zu].resources.limits", field, i);
        return td__resources_parse(json_object_get(res, "limits"), path, &out->limits, err);
    }
    return TD_OK;
}

/* Parses spec.<field> (an array of containers) into *out and *n. */
static td_status parse_containers(const json_t *spec, const char *field, bool init,
                                  td__pod_container **out, size_t *n, td_err *err)
{
    const json_t *arr = json_object_get(spec, field);
    size_t i, count;
    td__pod_container *cs;

    *out = NULL;
    *n = 0;
    if (arr == NULL || json_is_null(arr))
        return TD_OK;
    if (!json_is_array(arr))
        return td_err_set(err, TD_EINVAL, "spec.%s: must be an array, not %s", field,
                          json_kind(arr));
    count = json_array_size(arr);
    if (count == 0)
        return TD_OK;
    cs = calloc(count, sizeof *cs);
    if (cs == NULL)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    for (i = 0; i < count; i++)
        container_init(&cs[i]);
    for (i = 0; i < count; i++) {
        td_status s = parse_container(json_array_get(arr, i), field, i, init, &cs[i], err);
        if (s != TD_OK) {
            for (i = 0; i < count; i++)
                container_fini(&cs[i]);
            free(cs);
            return s;
        }
    }
    *out = cs;
    *n = count;
    return TD_OK;
}

static void pod_init(td__pod *p)
{
    memset(p, 0, sizeof *p);
    td_resources_init(&p->overhead);
    td_resources_init(&p->pod_requests);
    td_resources_init(&p->pod_limits);
    td_resources_init(&p->agg_requests);
    td_resources_init(&p->agg_limits);
}

static void aggregate_drop(td__pod *p)
{
    td_resources_fini(&p->agg_requests);
    td_resources_fini(&p->agg_limits);
    p->agg_kept = false;
}

void td__pod_fini(td__pod *p)
{
    size_t i;

    if (p == NULL)
        return;
    for (i = 0; i < p->ncontainers; i++)
        container_fini(&p->containers[i]);
    for (i = 0; i < p->ninit_containers; i++)
        container_fini(&p->init_containers[i]);
    free(p->containers);
    free(p->init_containers);
    td_resources_fini(&p->overhead);
    td_resources_fini(&p->pod_requests);
    td_resources_fini(&p->pod_limits);
    aggregate_drop(p);
    pod_init(p);
}

/* spec.overhead into p. */
static td_status parse_overhead(const json_t *spec, td__pod *p, td_err *err)
{
    const json_t *overhead = json_object_get(spec, "overhead");

    p->src_overhead = overhead;
    if (overhead == NULL || json_is_null(overhead))
        return TD_OK;
    p->has_overhead = true;
    return td__resources_parse(overhead, "spec.overhead", &p->overhead, err);
}

/* spec.resources (pod-level resources) into p. */
static td_status parse_pod_level(const json_t *spec, td__pod *p, td_err *err)
{
    const json_t *res = json_object_get(spec, "resources");
    td_status s;

    p->src_resources = res;
    if (res == NULL || json_is_null(res))
        return TD_OK;
    if (!json_is_object(res))
        return td_err_set(err, TD_EINVAL, "spec.resources: must be an object, not %s",
                          json_kind(res));
    p->has_pod_resources = true;
    s = td__resources_parse(json_object_get(res, "requests"), "spec.resources.requests",
                            &p->pod_requests, err);
    if (s == TD_OK)
        s = td__resources_parse(json_object_get(res, "limits"), "spec.resources.limits",
                                &p->pod_limits, err);
    return s;
}

td_status td__pod_parse(const json_t *pod, td__pod *out, td_err *err)
{
    const json_t *spec;
    td_status s;

    pod_init(out);
    if (!json_is_object(pod))
        return td_err_set(err, TD_EINVAL, "pod: must be an object, not %s",
                          pod ? json_kind(pod) : "null");
    spec = json_object_get(pod, "spec");
    out->bound = true;
    out->src_spec = spec;
    if (spec == NULL || json_is_null(spec))
        return TD_OK;
    if (!json_is_object(spec)) {
        pod_init(out);
        return td_err_set(err, TD_EINVAL, "spec: must be an object, not %s", json_kind(spec));
    }
    out->src_containers = json_object_get(spec, "containers");
    out->src_init = json_object_get(spec, "initContainers");
    s = parse_containers(spec, "containers", false, &out->containers, &out->ncontainers, err);
    if (s == TD_OK)
        s = parse_containers(spec, "initContainers", true, &out->init_containers,
                             &out->ninit_containers, err);
    if (s == TD_OK)
        s = parse_overhead(spec, out, err);
    if (s == TD_OK)
        s = parse_pod_level(spec, out, err);
    if (s != TD_OK)
        td__pod_fini(out);
    return s;
}

/* Binds n containers of cs to the elements of arr; false if they do not
 * line up. */
static bool bind_containers(const json_t *arr, td__pod_container *cs, size_t n)
{
    if (n != (json_is_array(arr) ? json_array_size(arr) : 0))
        return false;
    for (size_t i = 0; i < n; i++) {
        const json_t *c = json_array_get(arr, i);
        const json_t *name = json_object_get(c, "name");
        if (!json_is_object(c))
            return false;
        cs[i].src = c;
        cs[i].src_resources = json_object_get(c, "resources");
        /* the parse borrows the name: from the nodes now in the pod */
        if (json_is_string(name))
            cs[i].name = json_string_value(name);
    }
    return true;
}

void td__pod_bind(const json_t *pod, td__pod *p)
{
    const json_t *spec = json_object_get(pod, "spec");

    aggregate_drop(p);
    p->bound = false;
    p->src_spec = spec;
    if (!json_is_object(spec))
        return;
    p->src_containers = json_object_get(spec, "containers");
    p->src_init = json_object_get(spec, "initContainers");
    p->src_overhead = json_object_get(spec, "overhead");
    p->src_resources = json_object_get(spec, "resources");
    p->bound = bind_containers(p->src_containers, p->containers, p->ncontainers) &&
               bind_containers(p->src_init, p->init_containers, p->ninit_containers);
}

/* Parses again the containers of arr (spec.<field>) that were replaced. */
static td_status refresh_containers(const json_t *arr, const char *field, bool init,
                                    td__pod_container *cs, size_t n, td_err *err)
{
    for (size_t i = 0; i < n; i++) {
        const json_t *c = json_array_get(arr, i);
        if (c == cs[i].src && json_object_get(c, "resources") == cs[i].src_resources)
            continue;
        container_fini(&cs[i]);
        container_init(&cs[i]);
        td_status s = parse_container(c, field, i, init, &cs[i], err);
        if (s != TD_OK)
            return s;
    }
    return TD_OK;
}

td_status td__pod_refresh(const json_t *pod, td__pod *p, td_err *err)
{
    const json_t *spec = json_is_object(pod) ? json_object_get(pod, "spec") : NULL;
    const json_t *arr, *iarr;
    td_status s;

    aggregate_drop(p);
    arr = json_is_object(spec) ? json_object_get(spec, "containers") : NULL;
    iarr = json_is_object(spec) ? json_object_get(spec, "initContainers") : NULL;
    if (!p->bound || !json_is_object(spec) || spec != p->src_spec || arr != p->src_containers ||
        iarr != p->src_init || !json_is_array(arr) ||
        json_array_size(arr) != p->ncontainers ||
        (iarr ? !json_is_array(iarr) || json_array_size(iarr) != p->ninit_containers
              : p->ninit_containers != 0)) {
        td__pod_fini(p);
        return td__pod_parse(pod, p, err);
    }
    s = refresh_containers(arr, "containers", false, p->containers, p->ncontainers, err);
    if (s == TD_OK)
        s = refresh_containers(iarr, "initContainers", true, p->init_containers,
                               p->ninit_containers, err);
    if (s == TD_OK && json_object_get(spec, "overhead") != p->src_overhead) {
        td_resources_fini(&p->overhead);
        p->has_overhead = false;
        s = parse_overhead(spec, p, err);
    }
    if (s == TD_OK && json_object_get(spec, "resources") != p->src_resources) {
        td_resources_fini(&p->pod_requests);
        td_resources_fini(&p->pod_limits);
        p->has_pod_resources = false;
        s = parse_pod_level(spec, p, err);
    }
    if (s != TD_OK) {
        /* as td__pod_parse would have failed: the same message, from the
         * start, so that an earlier field's error comes first */
        td__pod_fini(p);
        s = td__pod_parse(pod, p, err);
    }
    return s;
}

static bool resources_same(const td_resources *a, const td_resources *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->items[i].name, b->items[i].name) != 0 ||
            td_quantity_cmp(&a->items[i].q, &b->items[i].q) != 0 ||
            td_quantity_get_format(&a->items[i].q) != td_quantity_get_format(&b->items[i].q))
            return false;
    return true;
}

static bool containers_same(const td__pod_container *a, const td__pod_container *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(a[i].name, b[i].name) != 0 || a[i].restartable != b[i].restartable ||
            !resources_same(&a[i].requests, &b[i].requests) ||
            !resources_same(&a[i].limits, &b[i].limits))
            return false;
    return true;
}

/* With a kept aggregate in a: the same as b's, computed afresh. */
static bool aggregate_same(const td__pod *a, const td__pod *b)
{
    td_resources r, l;
    bool same;
    if (!a->agg_kept)
        return true;
    td_resources_init(&r);
    td_resources_init(&l);
    same = td__pod_aggregate(b, 0, &r, &l) == TD_OK && resources_same(&a->agg_requests, &r) &&
           resources_same(&a->agg_limits, &l);
    td_resources_fini(&r);
    td_resources_fini(&l);
    return same;
}

bool td__pod_same(const td__pod *a, const td__pod *b)
{
    return aggregate_same(a, b) && a->ncontainers == b->ncontainers && a->ninit_containers == b->ninit_containers &&
           containers_same(a->containers, b->containers, a->ncontainers) &&
           containers_same(a->init_containers, b->init_containers, a->ninit_containers) &&
           a->has_overhead == b->has_overhead && resources_same(&a->overhead, &b->overhead) &&
           a->has_pod_resources == b->has_pod_resources &&
           resources_same(&a->pod_requests, &b->pod_requests) &&
           resources_same(&a->pod_limits, &b->pod_limits);
}

bool td__pod_level_resource(const char *name)
{
    return strcmp(name, "cpu") == 0 || strcmp(name, "memory") == 0 ||
           strncmp(name, "hugepages-", 10) == 0;
}

static bool any_pod_level(const td_resources *r)
{
    size_t i;

    for (i = 0; i < r->n; i++)
        if (td__pod_level_resource(r->items[i].name))
            return true;
    return false;
}

bool td__pod_level_set(const td__pod *p)
{
    return p->has_pod_resources &&
           (any_pod_level(&p->pod_requests) || any_pod_level(&p->pod_limits));
}

static void clear(td_resources *r)
{
    td_resources_fini(r);
    td_resources_init(r);
}

/* maxResourceList: list[name] = max(list[name], other[name]) for each name. */
static td_status max_list(td_resources *list, const td_resources *other)
{
    size_t i;

    for (i = 0; i < other->n; i++) {
        td_status s = td_resources_max_one(list, other->items[i].name, &other->items[i].q);
        if (s != TD_OK)
            return s;
    }
    return TD_OK;
}

/* aggregateContainerResourcesByFn over spec: requests (want_limits false)
 * or limits. out is empty on entry. */
static td_status aggregate_containers(const td__pod *p, bool want_limits, td_resources *out)
{
    td_resources restartable, init_max, combined;
    td_status s = TD_OK;
    size_t i;

#define PICK(c) (want_limits ? &(c)->limits : &(c)->requests)
    for (i = 0; i < p->ncontainers && s == TD_OK; i++)
        s = td_resources_add(out, PICK(&p->containers[i]));
    if (s != TD_OK)
        return s;

    td_resources_init(&restartable);
    td_resources_init(&init_max);
    td_resources_init(&combined);
    for (i = 0; i < p->ninit_containers && s == TD_OK; i++) {
        const td__pod_container *c = &p->init_containers[i];
        if (c->restartable) {
            /* A sidecar runs alongside the app containers and every init
             * container after it. */
            s = td_resources_add(out, PICK(c));
            if (s == TD_OK)
                s = td_resources_add(&restartable, PICK(c));
            if (s == TD_OK)
                s = max_list(&init_max, &restartable);
        } else {
            clear(&combined);
            s = td_resources_add(&combined, PICK(c));
            if (s == TD_OK)
                s = td_resources_add(&combined, &restartable);
            if (s == TD_OK)
                s = max_list(&init_max, &combined);
        }
    }
#undef PICK
    if (s == TD_OK)
        s = max_list(out, &init_max);
    td_resources_fini(&restartable);
    td_resources_fini(&init_max);
    td_resources_fini(&combined);
    return s;
}

static td_status aggregate_requests(const td__pod *p, unsigned flags, td_resources *reqs)
{
    td_status s = aggregate_containers(p, false, reqs);
    size_t i;

    if (s == TD_OK && (flags & TD__POD_LEVEL) && any_pod_level(&p->pod_requests)) {
        for (i = 0; i < p->pod_requests.n && s == TD_OK; i++)
            if (td__pod_level_resource(p->pod_requests.items[i].name))
                s = td_resources_set(reqs, p->pod_requests.items[i].name,
                                     &p->pod_requests.items[i].q);
    }
    if (s == TD_OK && (flags & TD__POD_OVERHEAD) && p->has_overhead)
        s = td_resources_add(reqs, &p->overhead);
    return s;
}

static td_status aggregate_limits(const td__pod *p, unsigned flags, td_resources *limits)
{
    td_status s = aggregate_containers(p, true, limits);
    size_t i;

    if (s == TD_OK && (flags & TD__POD_LEVEL) &&
        (any_pod_level(&p->pod_requests) || any_pod_level(&p->pod_limits))) {
        for (i = 0; i < p->pod_limits.n && s == TD_OK; i++)
            if (td__pod_level_resource(p->pod_limits.items[i].name))
                s = td_resources_set(limits, p->pod_limits.items[i].name,
                                     &p->pod_limits.items[i].q);
    }
    if (s == TD_OK && (flags & TD__POD_OVERHEAD) && p->has_overhead) {
        /* Overhead raises only limits that are set and non-zero: an unset
         * limit means unbounded. */
        for (i = 0; i < p->overhead.n && s == TD_OK; i++) {
            const td_quantity *cur = td_resources_get(limits, p->overhead.items[i].name);
            if (cur != NULL && td_quantity_sign(cur) != 0)
                s = td_resources_add_one(limits, p->overhead.items[i].name,
                                         &p->overhead.items[i].q);
        }
    }
    return s;
}

td_status td__pod_aggregate(const td__pod *p, unsigned flags, td_resources *requests,
                            td_resources *limits)
{
    td_status s = TD_OK;

    if (requests != NULL) {
        clear(requests);
        s = aggregate_requests(p, flags, requests);
        if (s != TD_OK)
            clear(requests);
    }
    if (s == TD_OK && limits != NULL) {
        clear(limits);
        s = aggregate_limits(p, flags, limits);
        if (s != TD_OK) {
            clear(limits);
            if (requests != NULL)
                clear(requests);
        }
    }
    return s;
}

td_status td__pod_aggregate_keep(td__pod *p)
{
    td_status s;
    aggregate_drop(p);
    s = td__pod_aggregate(p, 0, &p->agg_requests, &p->agg_limits);
    if (s != TD_OK) {
        aggregate_drop(p);
        return s;
    }
    p->agg_kept = true;
    return TD_OK;
}

const td_resources *td__pod_aggregate_kept(const td__pod *p, unsigned flags, bool limits)
{
    if (!p->agg_kept || ((flags & TD__POD_OVERHEAD) && p->has_overhead) ||
        ((flags & TD__POD_LEVEL) && p->has_pod_resources))
        return NULL;
    return limits ? &p->agg_limits : &p->agg_requests;
}

td_status td_pod_requests_limits(const json_t *pod, td_resources *requests, td_resources *limits,
                                 td_err *err)
{
    td__pod p;
    td_status s;

    clear(requests);
    clear(limits);
    s = td__pod_parse(pod, &p, err);
    if (s != TD_OK)
        return s;
    s = td__pod_aggregate(&p, TD__POD_OVERHEAD | TD__POD_LEVEL, requests, limits);
    td__pod_fini(&p);
    if (s != TD_OK)
        return td_err_set(err, s, "computing pod requests and limits: %s", td_strerror(s));
    return TD_OK;
}

/* ---- defaulting ---- */

/* Requests default to limits in one container (SetDefaults_Pod). pc (may
 * be NULL) is c's parse, given the same requests. */
static td_status default_container(json_t *c, td__pod_container *pc, bool *stale)
{
    json_t *res = json_object_get(c, "resources");
    json_t *limits, *requests;
    const char *name;
    json_t *value;

    if (!json_is_object(res))
        return TD_OK;
    limits = json_object_get(res, "limits");
    if (!json_is_object(limits) || json_object_size(limits) == 0)
        return TD_OK;
    requests = json_object_get(res, "requests");
    if (!json_is_object(requests)) {
        requests = json_object();
        if (requests == NULL || json_object_set_new(res, "requests", requests) != 0)
            return TD_ENOMEM;
    }
    json_object_foreach(limits, name, value)
    {
        if (json_object_get(requests, name) != NULL)
            continue;
        if (json_object_set_new(requests, name, td_json_copy(value)) != 0)
            return TD_ENOMEM;
        if (pc && !*stale) {
            /* the same JSON value, so the same quantity as the limit's */
            const td_quantity *q = td_resources_get(&pc->limits, name);
            if (q == NULL)
                *stale = true; /* never expected: parsed afresh */
            else if (td_resources_set(&pc->requests, name, q) != TD_OK)
                return TD_ENOMEM;
        }
    }
    return TD_OK;
}

/* default_container for each of spec.<field>; pcs (n of them, may be
 * NULL) their parse. */
static td_status default_containers(json_t *spec, const char *field, td__pod_container *pcs,
                                    size_t n, bool *stale)
{
    json_t *arr = json_object_get(spec, field);
    size_t i;
    json_t *c;

    if (!json_is_array(arr))
        return TD_OK;
    json_array_foreach(arr, i, c)
    {
        td_status s = default_container(c, pcs && i < n ? &pcs[i] : NULL, stale);
        if (s != TD_OK)
            return s;
    }
    return TD_OK;
}

static bool is_hugepages(const char *name)
{
    return strncmp(name, "hugepages-", 10) == 0;
}

/* defaultPodRequests: pod-level requests from the containers' aggregate
 * requests, else from the pod-level limits. Runs after container
 * defaulting, on the already-defaulted copy. */
static td_status default_pod_level(json_t *spec, td_err *err)
{
    json_t *res = json_object_get(spec, "resources");
    json_t *limits, *requests;
    td__pod p;
    td_resources aggr;
    td_status s;
    size_t i;
    const char *name;
    json_t *value, *wrapper;
    bool created = false;

    if (!json_is_object(res))
        return TD_OK;
    limits = json_object_get(res, "limits");
    if (!json_is_object(limits) || json_object_size(limits) == 0)
        return TD_OK;

    wrapper = json_object();
    if (wrapper == NULL || json_object_set(wrapper, "spec", spec) != 0) {
        json_decref(wrapper);
        return TD_ENOMEM;
    }
    s = td__pod_parse(wrapper, &p, err);
    if (s != TD_OK) {
        json_decref(wrapper);
        return s;
    }
    td_resources_init(&aggr);
    s = td__pod_aggregate(&p, 0, &aggr, NULL);
    td__pod_fini(&p);
    json_decref(wrapper);
    if (s != TD_OK)
        goto out;

    requests = json_object_get(res, "requests");
    if (!json_is_object(requests)) {
        requests = json_object();
        if (requests == NULL) {
            s = TD_ENOMEM;
            goto out;
        }
        created = true;
    }
    for (i = 0; i < aggr.n; i++) {
        char buf[TD_QUANTITY_STR_MAX];
        name = aggr.items[i].name;
        if (json_object_get(requests, name) != NULL || !td__pod_level_resource(name) ||
            is_hugepages(name))
            continue;
        td_quantity_format(&aggr.items[i].q, buf, sizeof buf);
        if (json_object_set_new(requests, name, json_string(buf)) != 0) {
            s = TD_ENOMEM;
            goto out_requests;
        }
    }
    json_object_foreach(limits, name, value)
    {
        if (json_object_get(requests, name) != NULL || !td__pod_level_resource(name))
            continue;
        if (json_object_set_new(requests, name, td_json_copy(value)) != 0) {
            s = TD_ENOMEM;
            goto out_requests;
        }
    }
    if (created) {
        if (json_object_size(requests) > 0 && json_object_set(res, "requests", requests) != 0)
            s = TD_ENOMEM;
    }
out_requests:
    if (created)
        json_decref(requests);
out:
    td_resources_fini(&aggr);
    return s;
}

/* Replaces pod's members with copy's: new keys first (they allocate), then
 * the existing ones (a replace in jansson does not), so that a failure
 * leaves pod as it was. */
td_status td__pod_commit(json_t *pod, json_t *copy)
{
    const char *key;
    json_t *value;

    json_object_foreach(copy, key, value)
    {
        if (json_object_get(pod, key) == NULL && json_object_set(pod, key, value) != 0)
            return TD_ENOMEM;
    }
    json_object_foreach(copy, key, value)
    {
        if (json_object_get(pod, key) != value && json_object_set(pod, key, value) != 0)
            return TD_ENOMEM;
    }
    return TD_OK;
}

/* Shallow copies where a change may land, td_json_copy below it. */
static json_t *containers_copy(const json_t *arr)
{
    json_t *out = json_array();
    size_t i;
    json_t *c;
    if (!out)
        return NULL;
    json_array_foreach(arr, i, c)
    {
        json_t *nc;
        if (json_is_object(c)) {
            nc = json_copy(c);
            json_t *res = json_object_get(c, "resources");
            if (nc && res && json_object_set_new_nocheck(nc, "resources", td_json_copy(res)) != 0) {
                json_decref(nc);
                nc = NULL;
            }
        } else {
            nc = json_incref(c); /* not an object: nothing can be set in it */
        }
        if (!nc || json_array_append_new(out, nc) != 0) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

json_t *td__pod_spec_resources_copy(const json_t *spec)
{
    static const char *const fields[] = {"containers", "initContainers"};
    if (!json_is_object(spec))
        return NULL;
    json_t *copy = json_copy((json_t *)spec);
    if (!copy)
        return NULL;
    for (size_t k = 0; k < 2; k++) {
        json_t *arr = json_object_get(spec, fields[k]);
        if (json_is_array(arr) &&
            json_object_set_new_nocheck(copy, fields[k], containers_copy(arr)) != 0)
            goto fail;
    }
    json_t *res = json_object_get(spec, "resources");
    if (res && json_object_set_new_nocheck(copy, "resources", td_json_copy(res)) != 0)
        goto fail;
    return copy;
fail:
    json_decref(copy);
    return NULL;
}

json_t *td__pod_resources_copy(const json_t *pod)
{
    if (!json_is_object(pod))
        return NULL;
    json_t *copy = json_copy((json_t *)pod);
    if (!copy)
        return NULL;
    json_t *spec = json_object_get(pod, "spec");
    if (json_is_object(spec) &&
        json_object_set_new_nocheck(copy, "spec", td__pod_spec_resources_copy(spec)) != 0)
        goto fail;
    json_t *meta = json_object_get(pod, "metadata");
    if (json_is_object(meta)) {
        json_t *nmeta = json_copy(meta);
        json_t *ann = json_object_get(meta, "annotations");
        if (nmeta && json_is_object(ann) &&
            json_object_set_new_nocheck(nmeta, "annotations", json_copy(ann)) != 0) {
            json_decref(nmeta);
            nmeta = NULL;
        }
        if (json_object_set_new_nocheck(copy, "metadata", nmeta) != 0)
            goto fail;
    }
    return copy;
fail:
    json_decref(copy);
    return NULL;
}

/* false when defaulting would change nothing: every container's limits
 * have their requests already, and there are no pod-level limits. true
 * whenever in doubt (the defaulting itself then decides). */
static bool defaults_needed(const json_t *spec)
{
    static const char *const fields[] = {"containers", "initContainers"};
    const json_t *res = json_object_get(spec, "resources");
    if (json_is_object(res) && json_object_size(json_object_get(res, "limits")) > 0)
        return true;
    for (size_t k = 0; k < 2; k++) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(spec, fields[k]), i, c)
        {
            json_t *r = json_object_get(c, "resources");
            json_t *limits = json_object_get(r, "limits");
            if (!json_is_object(limits) || json_object_size(limits) == 0)
                continue;
            json_t *requests = json_object_get(r, "requests");
            if (!json_is_object(requests))
                return true;
            const char *name;
            json_t *v;
            json_object_foreach(limits, name, v)
            {
                if (!json_object_get(requests, name))
                    return true;
            }
        }
    }
    return false;
}

td_status td__pod_default_requests_parsed(json_t *pod, td__pod *p, td_err *err)
{
    json_t *copy, *spec, *res;
    td_status s;
    bool pod_level;

    s = td__pod_parse(pod, p, err);
    if (s != TD_OK)
        return s;
    spec = json_object_get(pod, "spec");
    if (!json_is_object(spec) || !defaults_needed(spec))
        return TD_OK;
    copy = td__pod_spec_resources_copy(spec);
    if (copy == NULL) {
        td__pod_fini(p);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    /* The parse is bound to spec's containers, in the same order as the
     * copy's; a mismatch (never expected) is parsed afresh below. */
    bool stale = !(p->bound &&
                   p->ncontainers == json_array_size(json_object_get(copy, "containers")) &&
                   p->ninit_containers == json_array_size(json_object_get(copy, "initContainers")));
    s = default_containers(copy, "containers", p->containers, p->ncontainers, &stale);
    if (s == TD_OK)
        s = default_containers(copy, "initContainers", p->init_containers, p->ninit_containers,
                               &stale);
    res = json_object_get(copy, "resources");
    pod_level = json_is_object(res) && json_object_size(json_object_get(res, "limits")) > 0;
    if (s == TD_OK)
        s = default_pod_level(copy, err);
    if (s == TD_OK && json_object_set(pod, "spec", copy) != 0)
        s = TD_ENOMEM;
    json_decref(copy);
    if (s == TD_OK && (pod_level || stale)) {
        /* Pod-level requests defaulted from printed sums: read them back.
         * The pod is changed now, so a failure (out of memory) leaves p
         * empty and unbound for td__pod_refresh to report. */
        td__pod_fini(p);
        (void)td__pod_parse(pod, p, NULL);
        return TD_OK;
    }
    if (s == TD_OK) {
        td__pod_bind(pod, p);
        return TD_OK;
    }
    td__pod_fini(p);
    if (s == TD_ENOMEM)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    return s;
}

td_status td_pod_default_requests(json_t *pod, td_err *err)
{
    td__pod p;
    td_status s = td__pod_default_requests_parsed(pod, &p, err);
    if (s == TD_OK)
        td__pod_fini(&p);
    return s;
}
