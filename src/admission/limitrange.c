/* limitrange.c - LimitRanger admission for Pods, ported from Kubernetes'
 * plugin/pkg/admission/limitranger/admission.go: request/limit defaulting
 * (mergePodResourceRequirements) and min/max/ratio validation with the same
 * messages. Map iteration, random in Go, is by sorted resource name here. */
#include "admission/limitrange_internal.h"

#include <assert.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "admission/podres_internal.h"
#include "core/resources.h"
#include "core/strbuf.h"

/* resource.MaxMilliValue: the largest value whose milli-value fits int64. */
#define MAX_MILLI_VALUE (INT64_MAX / 1000)

typedef enum { LR_OTHER = 0, LR_CONTAINER, LR_POD } lr_type;

/* The most resource names one item's min, max and ratio may name for
 * check_item's fast form; an item with more is checked name by name. */
#define LR_NAMES_MAX 16

/* One constraint list (min, max or maxLimitRequestRatio) made ready when
 * parsed: each enforced quantity's value and milli-value, and its name's
 * index in the item's names. */
typedef struct {
    int64_t *value, *milli;
    size_t *name_ix;
} lr_enforced;

typedef struct {
    lr_type type;
    td_resources min, max, def, def_request, ratio;
    /* min, max and ratio's names, each once (nnames <= LR_NAMES_MAX, or
     * names is NULL), and their enforced values. */
    const char **names;
    size_t nnames;
    lr_enforced emin, emax, eratio;
} lr_item;

typedef struct {
    const char *name;
    lr_item *items;
    size_t nitems;
    /* defaultContainerResourceRequirements: the Container items' defaults
     * merged (later items win) and printed once, when parsed, not for each
     * pod. def_*_str[i] is def_*.items[i] in canonical form. */
    td_resources def_requests, def_limits;
    char (*def_request_str)[TD_QUANTITY_STR_MAX];
    char (*def_limit_str)[TD_QUANTITY_STR_MAX];
    /* def_*_str read back as a pod's parse reads them (the printed form
     * may change the format), for td__limitrange_default_update; false if
     * one did not read back, and a pod's parse is then made afresh. */
    td_quantity *def_request_q, *def_limit_q;
    bool readback_ok;
    /* every name of def_requests and def_limits is valid UTF-8: set as a
     * key without jansson checking it again for each pod */
    bool names_utf8;
} limit_range;

static void lr_fini(limit_range *lr)
{
    size_t i;

    for (i = 0; i < lr->nitems; i++) {
        lr_item *it = &lr->items[i];
        free(it->names);
        lr_enforced *es[3] = {&it->emin, &it->emax, &it->eratio};
        for (int k = 0; k < 3; k++) {
            free(es[k]->value);
            free(es[k]->milli);
            free(es[k]->name_ix);
        }
        td_resources_fini(&lr->items[i].min);
        td_resources_fini(&lr->items[i].max);
        td_resources_fini(&lr->items[i].def);
        td_resources_fini(&lr->items[i].def_request);
        td_resources_fini(&lr->items[i].ratio);
    }
    free(lr->items);
    lr->items = NULL;
    lr->nitems = 0;
    td_resources_fini(&lr->def_requests);
    td_resources_fini(&lr->def_limits);
    free(lr->def_request_str);
    free(lr->def_limit_str);
    free(lr->def_request_q);
    free(lr->def_limit_q);
    lr->def_request_str = lr->def_limit_str = NULL;
    lr->def_request_q = lr->def_limit_q = NULL;
}

/* true if every name of r is valid UTF-8 (as jansson takes a key). */
static bool names_utf8(const td_resources *r)
{
    for (size_t i = 0; i < r->n; i++) {
        json_t *probe = json_string(r->items[i].name);
        if (probe == NULL)
            return false;
        json_decref(probe);
    }
    return true;
}

/* Merges and prints lr's container defaults (see limit_range). */
static td_status lr_defaults(limit_range *lr)
{
    td_status s = TD_OK;
    size_t i, k;

    for (i = 0; i < lr->nitems && s == TD_OK; i++) {
        const lr_item *it = &lr->items[i];
        if (it->type != LR_CONTAINER)
            continue;
        for (k = 0; k < it->def_request.n && s == TD_OK; k++)
            s = td_resources_set(&lr->def_requests, it->def_request.items[k].name,
                                 &it->def_request.items[k].q);
        for (k = 0; k < it->def.n && s == TD_OK; k++)
            s = td_resources_set(&lr->def_limits, it->def.items[k].name, &it->def.items[k].q);
    }
    if (s != TD_OK)
        return s;
    lr->def_request_str = calloc(lr->def_requests.n + 1, sizeof *lr->def_request_str);
    lr->def_limit_str = calloc(lr->def_limits.n + 1, sizeof *lr->def_limit_str);
    lr->def_request_q = calloc(lr->def_requests.n + 1, sizeof *lr->def_request_q);
    lr->def_limit_q = calloc(lr->def_limits.n + 1, sizeof *lr->def_limit_q);
    if (!lr->def_request_str || !lr->def_limit_str || !lr->def_request_q || !lr->def_limit_q)
        return TD_ENOMEM;
    lr->readback_ok = true;
    lr->names_utf8 = names_utf8(&lr->def_requests) && names_utf8(&lr->def_limits);
    for (k = 0; k < lr->def_requests.n; k++) {
        td_quantity_format(&lr->def_requests.items[k].q, lr->def_request_str[k],
                           TD_QUANTITY_STR_MAX);
        if (td_quantity_parse(lr->def_request_str[k], &lr->def_request_q[k], NULL) != TD_OK)
            lr->readback_ok = false;
    }
    for (k = 0; k < lr->def_limits.n; k++) {
        td_quantity_format(&lr->def_limits.items[k].q, lr->def_limit_str[k], TD_QUANTITY_STR_MAX);
        if (td_quantity_parse(lr->def_limit_str[k], &lr->def_limit_q[k], NULL) != TD_OK)
            lr->readback_ok = false;
    }
    return TD_OK;
}

/* Fills e for list, adding its names to it's names. */
static td_status enforced_prepare(lr_item *it, const td_resources *list, lr_enforced *e)
{
    size_t n = list->n ? list->n : 1;
    e->value = malloc(n * sizeof *e->value);
    e->milli = malloc(n * sizeof *e->milli);
    e->name_ix = malloc(n * sizeof *e->name_ix);
    if (!e->value || !e->milli || !e->name_ix)
        return TD_ENOMEM;
    for (size_t k = 0; k < list->n; k++) {
        const char *name = list->items[k].name;
        size_t u = 0;
        e->value[k] = td_quantity_value(&list->items[k].q);
        e->milli[k] = td_quantity_milli_value(&list->items[k].q);
        while (u < it->nnames && strcmp(it->names[u], name) != 0)
            u++;
        if (u == it->nnames)
            it->names[it->nnames++] = name;
        e->name_ix[k] = u;
    }
    return TD_OK;
}

/* Makes it ready for check_item's fast form, when it names few enough. */
static td_status item_prepare(lr_item *it)
{
    size_t total = it->min.n + it->max.n + it->ratio.n;
    td_status s;
    if (total > LR_NAMES_MAX)
        return TD_OK;
    it->names = malloc((total ? total : 1) * sizeof *it->names);
    if (!it->names)
        return TD_ENOMEM;
    it->nnames = 0;
    s = enforced_prepare(it, &it->min, &it->emin);
    if (s == TD_OK)
        s = enforced_prepare(it, &it->max, &it->emax);
    if (s == TD_OK)
        s = enforced_prepare(it, &it->ratio, &it->eratio);
    return s;
}

static void lrs_free(limit_range *lrs, size_t n)
{
    size_t i;

    if (lrs == NULL)
        return;
    for (i = 0; i < n; i++)
        lr_fini(&lrs[i]);
    free(lrs);
}

static td_status lr_parse(const json_t *obj, size_t index, limit_range *lr, td_err *err)
{
    static const struct {
        const char *field;
        size_t offset;
    } lists[] = {
        {"min", offsetof(lr_item, min)},
        {"max", offsetof(lr_item, max)},
        {"default", offsetof(lr_item, def)},
        {"defaultRequest", offsetof(lr_item, def_request)},
        {"maxLimitRequestRatio", offsetof(lr_item, ratio)},
    };
    const json_t *meta, *name, *spec, *limits;
    char where[128], path[512];
    size_t i, j;
    td_status s;

    lr->name = "";
    lr->items = NULL;
    lr->nitems = 0;
    td_resources_init(&lr->def_requests);
    td_resources_init(&lr->def_limits);
    lr->def_request_str = lr->def_limit_str = NULL;
    lr->def_request_q = lr->def_limit_q = NULL;
    lr->readback_ok = false;
    if (!json_is_object(obj))
        return td_err_set(err, TD_EINVAL, "limitranges[%zu]: must be an object", index);
    meta = json_object_get(obj, "metadata");
    name = json_is_object(meta) ? json_object_get(meta, "name") : NULL;
    if (json_is_string(name))
        lr->name = json_string_value(name);
    snprintf(where, sizeof where, "LimitRange \"%.64s\"", lr->name);

    spec = json_object_get(obj, "spec");
    if (spec == NULL || json_is_null(spec))
        return TD_OK;
    if (!json_is_object(spec))
        return td_err_set(err, TD_EINVAL, "%s: spec: must be an object", where);
    limits = json_object_get(spec, "limits");
    if (limits == NULL || json_is_null(limits))
        return TD_OK;
    if (!json_is_array(limits))
        return td_err_set(err, TD_EINVAL, "%s: spec.limits: must be an array", where);
    if (json_array_size(limits) == 0)
        return TD_OK;
    lr->items = calloc(json_array_size(limits), sizeof *lr->items);
    if (lr->items == NULL)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    lr->nitems = json_array_size(limits);
    for (i = 0; i < lr->nitems; i++) {
        lr_item *it = &lr->items[i];
        td_resources_init(&it->min);
        td_resources_init(&it->max);
        td_resources_init(&it->def);
        td_resources_init(&it->def_request);
        td_resources_init(&it->ratio);
    }
    for (i = 0; i < lr->nitems; i++) {
        const json_t *item = json_array_get(limits, i);
        const json_t *type;
        lr_item *it = &lr->items[i];

        if (!json_is_object(item)) {
            s = td_err_set(err, TD_EINVAL, "%s: spec.limits[%zu]: must be an object", where, i);
            goto fail;
        }
        type = json_object_get(item, "type");
        if (json_is_string(type) && strcmp(json_string_value(type), "Container") == 0)
            it->type = LR_CONTAINER;
        else if (json_is_string(type) && strcmp(json_string_value(type), "Pod") == 0)
            it->type = LR_POD;
        else
            it->type = LR_OTHER;
        for (j = 0; j < sizeof lists / sizeof lists[0]; j++) {
            snprintf(path, sizeof path, "%s: spec.limits[%zu].%s", where, i, lists[j].field);
            s = td__resources_parse(json_object_get(item, lists[j].field), path,
                                    (td_resources *)((char *)it + lists[j].offset), err);
            if (s != TD_OK)
                goto fail;
        }
    }
    s = lr_defaults(lr);
    for (i = 0; i < lr->nitems && s == TD_OK; i++)
        s = item_prepare(&lr->items[i]);
    if (s != TD_OK) {
        s = td_err_set(err, s, "out of memory");
        goto fail;
    }
    return TD_OK;
fail:
    lr_fini(lr);
    return s;
}

static td_status lrs_parse(json_t *const *objs, size_t n, limit_range **out, td_err *err)
{
    limit_range *lrs;
    size_t i;

    *out = NULL;
    if (n == 0)
        return TD_OK;
    if (objs == NULL)
        return td_err_set(err, TD_EINVAL, "limitranges: NULL with n = %zu", n);
    lrs = calloc(n, sizeof *lrs);
    if (lrs == NULL)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    for (i = 0; i < n; i++) {
        td_status s = lr_parse(objs[i], i, &lrs[i], err);
        if (s != TD_OK) {
            lrs_free(lrs, i);
            return s;
        }
    }
    *out = lrs;
    return TD_OK;
}

/* ---- defaulting ---- */


/* Gets obj[key] (key a literal, plain ASCII) as an object, creating it
 * (as {}) if absent or null. */
static json_t *child_object(json_t *obj, const char *key)
{
    json_t *c = json_object_get(obj, key);

    if (json_is_object(c))
        return c;
    c = json_object();
    if (c == NULL || json_object_set_new_nocheck(obj, key, c) != 0)
        return NULL;
    return c;
}

/* Sets each name of defaults missing from container.resources.<field>,
 * marking added[i] for each default i set; *len is then the length of
 * the names set joined by ", " (0 if none). printed[i] is plain ASCII (a
 * quantity's canonical form); names_utf8 says that every name of
 * defaults is valid UTF-8 (else each key is checked as it is set). */
static td_status merge_list(json_t *container, const char *field, const td_resources *defaults,
                            char (*printed)[TD_QUANTITY_STR_MAX], const td_quantity *readback,
                            bool names_utf8, td_resources *parsed, bool *added, size_t *len)
{
    json_t *res, *list;
    size_t i;

    *len = 0;
    if (defaults->n == 0)
        return TD_OK;
    res = child_object(container, "resources");
    if (res == NULL)
        return TD_ENOMEM;
    list = json_object_get(res, field);
    for (i = 0; i < defaults->n; i++) {
        const td_resource *d = &defaults->items[i];
        added[i] = false;
        if (json_is_object(list) && json_object_get(list, d->name) != NULL)
            continue;
        if (!json_is_object(list)) {
            list = child_object(res, field);
            if (list == NULL)
                return TD_ENOMEM;
        }
        json_t *v = json_stringn_nocheck(printed[i], strlen(printed[i]));
        if (v == NULL || (names_utf8 ? json_object_set_new_nocheck(list, d->name, v)
                                     : json_object_set_new(list, d->name, v)) != 0)
            return TD_ENOMEM;
        if (parsed && td_resources_set(parsed, d->name, &readback[i]) != TD_OK)
            return TD_ENOMEM;
        *len += (*len ? 2 : 0) + strlen(d->name);
        added[i] = true;
    }
    return TD_OK;
}

/* Appends to note "NAMES WHAT for KIND CNAME" (after "; " unless note is
 * empty): NAMES the names of defaults marked in added, joined by ", ". */
static void note_part(td_strbuf *note, const td_resources *defaults, const bool *added,
                      const char *what, const char *kind, const char *cname)
{
    bool first = true;

    if (note->len > 0)
        td_strbuf_append(note, "; ");
    for (size_t i = 0; i < defaults->n; i++) {
        if (!added[i])
            continue;
        if (!first)
            td_strbuf_append(note, ", ");
        td_strbuf_append(note, defaults->items[i].name);
        first = false;
    }
    td_strbuf_append(note, what);
    td_strbuf_append(note, kind);
    td_strbuf_append(note, " ");
    td_strbuf_append(note, cname);
}

/* The most defaults of one list marked on the stack; a LimitRange with
 * more marks them in an allocated array. */
#define ADDED_STACK 32

/* mergeContainerResources for one container; appends its annotation parts
 * to note. The names set in one list, joined, must fit TD_ERR_MAX as
 * they always had to (TD_ENOMEM otherwise). */
static td_status merge_container(json_t *container, const limit_range *lr, const char *kind,
                                 td__pod_container *pc, td_strbuf *note)
{
    bool lims_stack[ADDED_STACK], reqs_stack[ADDED_STACK];
    bool *lims_added = lims_stack, *reqs_added = reqs_stack;
    size_t lims_len = 0, reqs_len = 0;
    const json_t *name = json_object_get(container, "name");
    const char *cname = json_is_string(name) ? json_string_value(name) : "";
    td_status s = TD_OK;

    if (lr->def_limits.n > ADDED_STACK)
        lims_added = malloc(lr->def_limits.n * sizeof *lims_added);
    if (lr->def_requests.n > ADDED_STACK)
        reqs_added = malloc(lr->def_requests.n * sizeof *reqs_added);
    if (lims_added == NULL || reqs_added == NULL)
        s = TD_ENOMEM;
    if (s == TD_OK)
        s = merge_list(container, "limits", &lr->def_limits, lr->def_limit_str, lr->def_limit_q,
                       lr->names_utf8, pc ? &pc->limits : NULL, lims_added, &lims_len);
    if (s == TD_OK)
        s = merge_list(container, "requests", &lr->def_requests, lr->def_request_str,
                       lr->def_request_q, lr->names_utf8, pc ? &pc->requests : NULL, reqs_added,
                       &reqs_len);
    if (s == TD_OK && (lims_len + 1 > TD_ERR_MAX || reqs_len + 1 > TD_ERR_MAX))
        s = TD_ENOMEM;
    if (s == TD_OK && reqs_len > 0)
        note_part(note, &lr->def_requests, reqs_added, " request for ", kind, cname);
    if (s == TD_OK && lims_len > 0)
        note_part(note, &lr->def_limits, lims_added, " limit for ", kind, cname);
    if (lims_added != lims_stack)
        free(lims_added);
    if (reqs_added != reqs_stack)
        free(reqs_added);
    return s;
}

/* mergePodResourceRequirements for one LimitRange. parsed (may be NULL)
 * is the pod's parse, given the same defaults; it must line up with the
 * pod's containers. */
static td_status merge_pod(json_t *pod, const limit_range *lr, td__pod *parsed)
{
    td_strbuf note = TD_STRBUF_INIT(1u << 20);
    json_t *spec = json_object_get(pod, "spec");
    td_status s = TD_OK;
    size_t i, k;
    static const struct {
        const char *field, *kind;
    } groups[] = {{"containers", "container"}, {"initContainers", "init container"}};

    /* defaultContainerResourceRequirements: merged when lr was parsed. */
    for (k = 0; k < 2 && s == TD_OK; k++) {
        json_t *arr = json_is_object(spec) ? json_object_get(spec, groups[k].field) : NULL;
        json_t *c;
        if (!json_is_array(arr))
            continue;
        td__pod_container *pcs = NULL;
        if (parsed)
            pcs = k == 0 ? parsed->containers : parsed->init_containers;
        json_array_foreach(arr, i, c)
        {
            s = merge_container(c, lr, groups[k].kind, pcs ? &pcs[i] : NULL, &note);
            if (s != TD_OK)
                break;
        }
    }
    if (s == TD_OK && note.failed)
        s = TD_ENOMEM;
    if (s == TD_OK && note.len > 0) {
        json_t *meta = child_object(pod, "metadata");
        json_t *annotations = meta ? child_object(meta, "annotations") : NULL;
        td_strbuf val = TD_STRBUF_INIT((1u << 20) + 64);
        td_strbuf_append(&val, "LimitRanger plugin set: ");
        td_strbuf_append(&val, note.s);
        if (annotations == NULL || val.failed ||
            json_object_set_new(annotations, TD_LIMITRANGE_ANNOTATION, json_string(val.s)) != 0)
            s = TD_ENOMEM;
        free(val.s);
    }
    free(note.s);
    return s;
}

/* metadata and metadata.annotations, if present, must be objects. */
static td_status check_metadata(const json_t *pod, td_err *err)
{
    const json_t *meta = json_object_get(pod, "metadata");
    const json_t *ann;

    if (meta == NULL || json_is_null(meta))
        return TD_OK;
    if (!json_is_object(meta))
        return td_err_set(err, TD_EINVAL, "metadata: must be an object");
    ann = json_object_get(meta, "annotations");
    if (ann != NULL && !json_is_null(ann) && !json_is_object(ann))
        return td_err_set(err, TD_EINVAL, "metadata.annotations: must be an object");
    return TD_OK;
}

/* Defaulting with lrs already parsed (n of them); parsed (may be NULL)
 * lines up with pod's containers and is given the same defaults. */
static td_status default_with(json_t *pod, const limit_range *lrs, size_t n, td__pod *parsed,
                              td_err *err)
{
    json_t *copy;
    td_status s = TD_OK;
    size_t i;

    copy = td__pod_resources_copy(pod);
    if (copy == NULL)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    for (i = 0; i < n && s == TD_OK; i++)
        s = merge_pod(copy, &lrs[i], parsed);
    if (s == TD_OK)
        s = td__pod_commit(pod, copy);
    json_decref(copy);
    if (s != TD_OK)
        return td_err_set(err, s, "applying LimitRange defaults: %s", td_strerror(s));
    return TD_OK;
}

/* The checks of the pod both entry points make before any LimitRange. */
static td_status default_precheck(json_t *pod, td_err *err)
{
    td__pod p;
    td_status s = td__pod_parse(pod, &p, err);
    if (s != TD_OK)
        return s;
    td__pod_fini(&p);
    return check_metadata(pod, err);
}

td_status td_limitrange_default(json_t *pod, json_t *const *limitranges, size_t n, td_err *err)
{
    limit_range *lrs;
    td_status s;

    s = default_precheck(pod, err);
    if (s != TD_OK)
        return s;
    s = lrs_parse(limitranges, n, &lrs, err);
    if (s != TD_OK)
        return s;
    s = default_with(pod, lrs, n, NULL, err);
    lrs_free(lrs, n);
    return s;
}

struct td_limitranges {
    limit_range *lrs;
    size_t n;
};

td_status td_limitranges_parse(json_t *const *limitranges, size_t n, td_limitranges **out,
                               td_err *err)
{
    td_limitranges *l = calloc(1, sizeof *l);
    *out = NULL;
    if (l == NULL)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    td_status s = lrs_parse(limitranges, n, &l->lrs, err);
    if (s != TD_OK) {
        free(l);
        return s;
    }
    l->n = n;
    *out = l;
    return TD_OK;
}

void td_limitranges_destroy(td_limitranges *l)
{
    if (l == NULL)
        return;
    lrs_free(l->lrs, l->n);
    free(l);
}

td_status td_limitrange_default_parsed(json_t *pod, const td_limitranges *l, td_err *err)
{
    td_status s = default_precheck(pod, err);
    if (s != TD_OK)
        return s;
    if (l == NULL || l->n == 0)
        return TD_OK; /* nothing to merge: the pod is left as it is */
    return default_with(pod, l->lrs, l->n, NULL, err);
}

/* true if lr's defaults would set something in container c: a default
 * limit or request it does not have (merge_list's test). */
static bool container_wants(const json_t *c, const limit_range *lr)
{
    const json_t *res = json_object_get(c, "resources");
    const json_t *lims = json_is_object(res) ? json_object_get(res, "limits") : NULL;
    const json_t *reqs = json_is_object(res) ? json_object_get(res, "requests") : NULL;
    size_t i;

    for (i = 0; i < lr->def_limits.n; i++)
        if (!json_is_object(lims) || !json_object_get(lims, lr->def_limits.items[i].name))
            return true;
    for (i = 0; i < lr->def_requests.n; i++)
        if (!json_is_object(reqs) || !json_object_get(reqs, lr->def_requests.items[i].name))
            return true;
    return false;
}

/* json_string(value), without jansson's UTF-8 check when value is plain
 * ASCII (the usual annotation: the check is most of the call's cost). */
static json_t *json_string_ascii(const char *value)
{
    size_t n = 0;
    unsigned char high = 0;
    for (; value[n] != '\0'; n++)
        high |= (unsigned char)value[n];
    return high < 0x80 ? json_stringn_nocheck(value, n) : json_string(value);
}

/* Sets metadata.annotations[TD_LIMITRANGE_ANNOTATION] = value in pod, in
 * one step that either happens or changes nothing (new objects for
 * metadata or annotations when absent or null). */
static td_status set_annotation(json_t *pod, const char *value)
{
    json_t *meta = json_object_get(pod, "metadata");
    json_t *ann = json_is_object(meta) ? json_object_get(meta, "annotations") : NULL;
    json_t *v = json_string_ascii(value);
    if (v == NULL)
        return TD_ENOMEM;
    if (json_is_object(ann))
        return json_object_set_new_nocheck(ann, TD_LIMITRANGE_ANNOTATION, v) == 0 ? TD_OK
                                                                                 : TD_ENOMEM;
    ann = json_object();
    if (ann == NULL || json_object_set_new_nocheck(ann, TD_LIMITRANGE_ANNOTATION, v) != 0) {
        json_decref(ann);
        return TD_ENOMEM;
    }
    if (json_is_object(meta))
        return json_object_set_new_nocheck(meta, "annotations", ann) == 0 ? TD_OK : TD_ENOMEM;
    meta = json_object();
    if (meta == NULL || json_object_set_new_nocheck(meta, "annotations", ann) != 0) {
        json_decref(meta);
        json_decref(ann);
        return TD_ENOMEM;
    }
    return json_object_set_new_nocheck(pod, "metadata", meta) == 0 ? TD_OK : TD_ENOMEM;
}

/* default_with for td_admit_pod's pod: only the containers a default
 * lands in are copied (a new container object, its resources a deep
 * copy, in a new list); the rest stay shared. The annotation is set in
 * place in pod's metadata.annotations, then the new lists replace the old
 * (a replacement does not allocate): on failure pod is unchanged. parsed
 * (may be NULL) lines up with pod's containers and is given the same
 * defaults. */
static td_status default_update_with(json_t *pod, const limit_range *lrs, size_t n,
                                     td__pod *parsed)
{
    static const struct {
        const char *field, *kind;
    } groups[] = {{"containers", "container"}, {"initContainers", "init container"}};
    json_t *spec = json_object_get(pod, "spec");
    json_t *orig[2] = {NULL, NULL}, *copy[2] = {NULL, NULL};
    td_strbuf note = TD_STRBUF_INIT(1u << 20);
    char *annotation = NULL;
    td_status s = TD_OK;
    size_t i, k, l;

    for (k = 0; k < 2 && s == TD_OK; k++) {
        json_t *arr = json_is_object(spec) ? json_object_get(spec, groups[k].field) : NULL;
        json_t *c;
        if (!json_is_array(arr))
            continue;
        orig[k] = arr;
        json_array_foreach(arr, i, c)
        {
            for (l = 0; l < n && !container_wants(c, &lrs[l]); l++)
                ;
            if (l == n)
                continue;
            json_t *nc = json_copy(c);
            json_t *res = json_object_get(c, "resources");
            if (nc && res && json_object_set_new_nocheck(nc, "resources", td_json_copy(res)) != 0) {
                json_decref(nc);
                nc = NULL;
            }
            if (nc && !copy[k] && !(copy[k] = json_copy(arr))) {
                json_decref(nc);
                nc = NULL;
            }
            if (!nc || json_array_set_new(copy[k], i, nc) != 0) {
                s = TD_ENOMEM;
                break;
            }
        }
    }
    /* mergePodResourceRequirements per LimitRange, in order; each one that
     * sets something words the annotation anew. */
    for (l = 0; l < n && s == TD_OK; l++) {
        note.len = 0;
        if (note.s)
            note.s[0] = '\0';
        for (k = 0; k < 2 && s == TD_OK; k++) {
            if (!copy[k])
                continue;
            td__pod_container *pcs = NULL;
            if (parsed)
                pcs = k == 0 ? parsed->containers : parsed->init_containers;
            for (i = 0; i < json_array_size(copy[k]) && s == TD_OK; i++) {
                json_t *c = json_array_get(copy[k], i);
                if (c == json_array_get(orig[k], i))
                    continue; /* shared: no default lands in it */
                s = merge_container(c, &lrs[l], groups[k].kind, pcs ? &pcs[i] : NULL, &note);
            }
        }
        if (s == TD_OK && note.failed)
            s = TD_ENOMEM;
        if (s == TD_OK && note.len > 0) {
            td_strbuf val = TD_STRBUF_INIT((1u << 20) + 64);
            td_strbuf_append(&val, "LimitRanger plugin set: ");
            td_strbuf_append(&val, note.s);
            free(annotation);
            annotation = val.s;
            if (val.failed)
                s = TD_ENOMEM;
        }
    }
    if (s == TD_OK && annotation)
        s = set_annotation(pod, annotation);
    for (k = 0; k < 2; k++) {
        if (s == TD_OK && copy[k] &&
            json_object_set_new_nocheck(spec, groups[k].field, copy[k]) != 0)
            s = TD_ENOMEM; /* a replacement: not expected */
        else if (s != TD_OK)
            json_decref(copy[k]);
    }
    free(annotation);
    free(note.s);
    return s;
}

/* true if parsed's containers line up with pod's container lists. */
static bool lines_up(const json_t *pod, const td__pod *parsed)
{
    const json_t *spec = json_object_get(pod, "spec");
    return parsed->bound && json_is_object(spec) &&
           json_array_size(json_object_get(spec, "containers")) == parsed->ncontainers &&
           json_array_size(json_object_get(spec, "initContainers")) == parsed->ninit_containers;
}

td_status td__limitrange_default_update(json_t *pod, const td_limitranges *l, td__pod *parsed,
                                        td_err *err)
{
    td_status s = check_metadata(pod, err);
    if (s != TD_OK)
        return s;
    if (l == NULL || l->n == 0)
        return TD_OK;
    bool update = lines_up(pod, parsed);
    for (size_t i = 0; i < l->n; i++)
        update = update && l->lrs[i].readback_ok;
    s = default_update_with(pod, l->lrs, l->n, update ? parsed : NULL);
    if (s != TD_OK)
        return td_err_set(err, s, "applying LimitRange defaults: %s", td_strerror(s));
    if (update) {
        td__pod_bind(pod, parsed);
        return TD_OK;
    }
    /* A parse that fails here is left empty and unbound, so that the
     * caller's td__pod_refresh reports it as a fresh parse would. */
    td__pod_fini(parsed);
    (void)td__pod_parse(pod, parsed, NULL);
    return TD_OK;
}

/* ---- validation ---- */

/* The violations found for one LimitRange, joined as utilerrors'
 * aggregate.Error() does: one message alone, several as "[a, b]", repeated
 * messages once. */
typedef struct {
    char **msgs;
    size_t n, cap;
    bool nomem;
} violations;

static void add_violation(violations *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void add_violation(violations *v, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    char *m;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (v->nomem)
        return;
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 8;
        char **p = realloc(v->msgs, cap * sizeof *p);
        if (p == NULL) {
            v->nomem = true;
            return;
        }
        v->msgs = p;
        v->cap = cap;
    }
    m = strdup(buf);
    if (m == NULL) {
        v->nomem = true;
        return;
    }
    v->msgs[v->n++] = m;
}

static void violations_free(violations *v)
{
    size_t i;

    for (i = 0; i < v->n; i++)
        free(v->msgs[i]);
    free(v->msgs);
}

static td_status violations_report(const violations *v, td_err *err)
{
    td_strbuf b = TD_STRBUF_INIT(1u << 20);
    size_t i, j, unique = 0;
    td_status s;

    for (i = 0; i < v->n; i++) {
        for (j = 0; j < i; j++)
            if (strcmp(v->msgs[i], v->msgs[j]) == 0)
                break;
        if (j < i)
            continue;
        if (unique++ > 0)
            td_strbuf_append(&b, ", ");
        td_strbuf_append(&b, v->msgs[i]);
    }
    if (b.failed)
        s = td_err_set(err, TD_ENOMEM, "out of memory");
    else if (unique == 1)
        s = td_err_set(err, TD_EFORBIDDEN, "%s", b.s);
    else
        s = td_err_set(err, TD_EFORBIDDEN, "[%s]", b.s);
    free(b.s);
    return s;
}

/* A container's (or the pod's) request and limit of one resource, with
 * their values and milli-values (0 when absent), read once for all the
 * constraints on that resource. */
typedef struct {
    const td_quantity *req, *lim;
    int64_t r, l, rm, lm;
} observed;

/* td_quantity_value(q) from its milli-value: both round away from zero,
 * so |value| = ceil(|milli| / 1000) unless milli saturated. */
static int64_t value_from_milli(const td_quantity *q, int64_t milli)
{
    if (milli == INT64_MAX || milli == INT64_MIN)
        return td_quantity_value(q);
    uint64_t m = milli < 0 ? (uint64_t)0 - (uint64_t)milli : (uint64_t)milli;
    int64_t v = (int64_t)((m + 999) / 1000);
    v = milli < 0 ? -v : v;
    assert(v == td_quantity_value(q));
    return v;
}

static void observe(const td_resources *requests, const td_resources *limits, const char *name,
                    observed *o)
{
    o->req = td_resources_get(requests, name);
    o->lim = td_resources_get(limits, name);
    o->rm = o->req ? td_quantity_milli_value(o->req) : 0;
    o->lm = o->lim ? td_quantity_milli_value(o->lim) : 0;
    o->r = o->req ? value_from_milli(o->req, o->rm) : 0;
    o->l = o->lim ? value_from_milli(o->lim, o->lm) : 0;
}

/* requestLimitEnforcedValues: compare in milli-units when nothing
 * overflows, else in units. An absent quantity counts as 0. ev and em are
 * the enforced quantity's value and milli-value. */
static void enforced_values(const observed *o, int64_t ev, int64_t em, int64_t *r, int64_t *l,
                            int64_t *e)
{
    *r = o->r;
    *l = o->l;
    *e = ev;
    if (*r <= MAX_MILLI_VALUE && *l <= MAX_MILLI_VALUE && *e <= MAX_MILLI_VALUE) {
        *r = o->rm;
        *l = o->lm;
        *e = em;
    }
}

static void min_constraint(violations *v, const char *type, const char *name,
                           const td_quantity *enforced, int64_t ev, int64_t em, const observed *o)
{
    char es[TD_QUANTITY_STR_MAX], qs[TD_QUANTITY_STR_MAX];
    int64_t r, l, e;

    enforced_values(o, ev, em, &r, &l, &e);
    /* es is printed only for a violation: most pods violate nothing. */
    if (o->req == NULL) {
        td_quantity_format(enforced, es, sizeof es);
        add_violation(v, "minimum %s usage per %s is %s.  No request is specified", name, type,
                      es);
        return;
    }
    if (r < e) {
        td_quantity_format(o->req, qs, sizeof qs);
        td_quantity_format(enforced, es, sizeof es);
        add_violation(v, "minimum %s usage per %s is %s, but request is %s", name, type, es, qs);
        return;
    }
    if (o->lim != NULL && l < e) {
        td_quantity_format(o->lim, qs, sizeof qs);
        td_quantity_format(enforced, es, sizeof es);
        add_violation(v, "minimum %s usage per %s is %s, but limit is %s", name, type, es, qs);
    }
}

static void max_constraint(violations *v, const char *type, const char *name,
                           const td_quantity *enforced, int64_t ev, int64_t em, const observed *o)
{
    char es[TD_QUANTITY_STR_MAX], qs[TD_QUANTITY_STR_MAX];
    int64_t r, l, e;

    enforced_values(o, ev, em, &r, &l, &e);
    /* es is printed only for a violation: most pods violate nothing. */
    if (o->lim == NULL) {
        td_quantity_format(enforced, es, sizeof es);
        add_violation(v, "maximum %s usage per %s is %s.  No limit is specified", name, type, es);
        return;
    }
    if (l > e) {
        td_quantity_format(o->lim, qs, sizeof qs);
        td_quantity_format(enforced, es, sizeof es);
        add_violation(v, "maximum %s usage per %s is %s, but limit is %s", name, type, es, qs);
        return;
    }
    if (o->req != NULL && r > e) {
        td_quantity_format(o->req, qs, sizeof qs);
        td_quantity_format(enforced, es, sizeof es);
        add_violation(v, "maximum %s usage per %s is %s, but request is %s", name, type, es, qs);
    }
}

static void ratio_constraint(violations *v, const char *type, const char *name,
                             const td_quantity *enforced, int64_t ev, int64_t em,
                             const observed *o)
{
    char es[TD_QUANTITY_STR_MAX];
    int64_t r, l, e;
    double observed_ratio, display, allowed;

    enforced_values(o, ev, em, &r, &l, &e);
    /* es is printed only for a violation: most pods violate nothing. */
    if (o->req == NULL || r == 0) {
        td_quantity_format(enforced, es, sizeof es);
        add_violation(v,
                      "%s max limit to request ratio per %s is %s, but no request is specified or "
                      "request is 0",
                      name, type, es);
        return;
    }
    if (o->lim == NULL || l == 0) {
        td_quantity_format(enforced, es, sizeof es);
        add_violation(v,
                      "%s max limit to request ratio per %s is %s, but no limit is specified or "
                      "limit is 0",
                      name, type, es);
        return;
    }
    observed_ratio = (double)l / (double)r;
    display = observed_ratio;
    allowed = (double)ev;
    if (ev <= MAX_MILLI_VALUE) {
        observed_ratio = observed_ratio * 1000;
        allowed = (double)em;
    }
    if (observed_ratio > allowed) {
        td_quantity_format(enforced, es, sizeof es);
        add_violation(v, "%s max limit to request ratio per %s is %s, but provided ratio is %f",
                      name, type, es, display);
    }
}

/* Checks one item's min, max and maxLimitRequestRatio against one set of
 * requests and limits (a container's, or the pod's), in that order. Each
 * resource's request and limit are read once (an item prepared when
 * parsed), else for each constraint. */
static void check_item(violations *v, const lr_item *it, const char *type,
                       const td_resources *requests, const td_resources *limits)
{
    observed obs[LR_NAMES_MAX], one;
    size_t k;

#define CHECK_LIST(list, e, fn)                                                                        for (k = 0; k < it->list.n; k++) {                                                                     const td_resource *c = &it->list.items[k];                                                         if (it->names) {                                                                                       fn(v, type, c->name, &c->q, it->e.value[k], it->e.milli[k], &obs[it->e.name_ix[k]]);           } else {                                                                                               observe(requests, limits, c->name, &one);                                                          fn(v, type, c->name, &c->q, td_quantity_value(&c->q), td_quantity_milli_value(&c->q),                 &one);                                                                                      }                                                                                              }
    if (it->names)
        for (k = 0; k < it->nnames; k++)
            observe(requests, limits, it->names[k], &obs[k]);
    CHECK_LIST(min, emin, min_constraint)
    CHECK_LIST(max, emax, max_constraint)
    CHECK_LIST(ratio, eratio, ratio_constraint)
#undef CHECK_LIST
}

static td_status validate_one(const td__pod *p, const limit_range *lr, violations *v)
{
    size_t i, j;

    for (i = 0; i < lr->nitems; i++) {
        const lr_item *it = &lr->items[i];
        if (it->type == LR_CONTAINER) {
            for (j = 0; j < p->ncontainers; j++)
                check_item(v, it, "Container", &p->containers[j].requests,
                           &p->containers[j].limits);
            for (j = 0; j < p->ninit_containers; j++)
                check_item(v, it, "Container", &p->init_containers[j].requests,
                           &p->init_containers[j].limits);
        } else if (it->type == LR_POD) {
            /* LimitRanger's own podRequests/podLimits: containers, sidecars
             * and init containers, without overhead or pod-level resources. */
            td_resources reqs, lims;
            td_status s = TD_OK;
            const td_resources *kr = td__pod_aggregate_kept(p, 0, false);
            const td_resources *kl = td__pod_aggregate_kept(p, 0, true);
            td_resources_init(&reqs);
            td_resources_init(&lims);
            if (kr && kl)
                check_item(v, it, "Pod", kr, kl);
            else if ((s = td__pod_aggregate(p, 0, &reqs, &lims)) == TD_OK)
                check_item(v, it, "Pod", &reqs, &lims);
            td_resources_fini(&reqs);
            td_resources_fini(&lims);
            if (s != TD_OK)
                return s;
        }
    }
    return v->nomem ? TD_ENOMEM : TD_OK;
}

static td_status validate_with(const json_t *pod, const td__pod *parsed, const limit_range *lrs,
                               size_t n, td_err *err)
{
    td__pod own;
    const td__pod *pp = parsed;
    td_status s = TD_OK;
    size_t i;

    if (!pp) {
        s = td__pod_parse(pod, &own, err);
        if (s != TD_OK)
            return s;
        pp = &own;
    }
    for (i = 0; i < n && s == TD_OK; i++) {
        violations v = {NULL, 0, 0, false};
        s = validate_one(pp, &lrs[i], &v);
        if (s == TD_OK && v.n > 0)
            s = violations_report(&v, err);
        else if (s != TD_OK)
            s = td_err_set(err, s, "checking LimitRange \"%s\": %s", lrs[i].name,
                           td_strerror(s));
        violations_free(&v);
    }
    if (!parsed)
        td__pod_fini(&own);
    return s;
}

td_status td_limitrange_validate(const json_t *pod, json_t *const *limitranges, size_t n,
                                 td_err *err)
{
    td__pod p;
    limit_range *lrs;
    td_status s;

    /* The pod is checked before the LimitRanges, as before the split. */
    s = td__pod_parse(pod, &p, err);
    if (s != TD_OK)
        return s;
    td__pod_fini(&p);
    s = lrs_parse(limitranges, n, &lrs, err);
    if (s != TD_OK)
        return s;
    s = validate_with(pod, NULL, lrs, n, err);
    lrs_free(lrs, n);
    return s;
}

td_status td_limitrange_validate_parsed(const json_t *pod, const td__pod *parsed_pod,
                                        const td_limitranges *l, td_err *err)
{
    return validate_with(pod, parsed_pod, l ? l->lrs : NULL, l ? l->n : 0, err);
}
