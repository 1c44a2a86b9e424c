/* apparmor.c - the API server's AppArmor version skew on a pod it creates:
 * the deprecated per-container annotations and the appArmorProfile fields
 * copied into each other, so Pod Security reads both as on a cluster
 * (kubernetes pkg/registry/core/pod/strategy.go applyAppArmorVersionSkew,
 * v1.30 and later, the KEP 24 version skew strategy). */
#include "admission/apparmor_internal.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define ANNOTATION_PREFIX     "container.apparmor.security.beta.kubernetes.io/"
#define LOCALHOST_PREFIX      "localhost/"
#define MAX_LOCALHOST_PROFILE 4095 /* PATH_MAX - 1, as the API server's validation */

/* The annotation value for an appArmorProfile field (appArmorAnnotationForField):
 * "" for a Localhost one without a profile or an unknown type (nothing
 * copied). Into buf (n bytes); "" when it does not fit. */
static const char *annotation_for_field(const json_t *prof, char *buf, size_t n)
{
    const char *type = json_string_value(json_object_get(prof, "type"));
    const char *local = json_string_value(json_object_get(prof, "localhostProfile"));
    if (!type)
        return "";
    if (strcmp(type, "Unconfined") == 0)
        return "unconfined";
    if (strcmp(type, "RuntimeDefault") == 0)
        return "runtime/default";
    if (strcmp(type, "Localhost") == 0 && local) {
        size_t len = strlen(local);
        if (sizeof LOCALHOST_PREFIX - 1 + len >= n)
            return "";
        memcpy(buf, LOCALHOST_PREFIX, sizeof LOCALHOST_PREFIX - 1);
        memcpy(buf + sizeof LOCALHOST_PREFIX - 1, local, len + 1);
        return buf;
    }
    return "";
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* The appArmorProfile field for an annotation value (apparmorFieldForAnnotation),
 * kept only if the API server's validation takes it (a localhost profile
 * not empty, not padded with whitespace, at most 4095 bytes); NULL: none
 * (also out of memory, *nomem set). */
static json_t *field_for_annotation(const char *v, bool *nomem)
{
    json_t *f = NULL;
    if (strcmp(v, "unconfined") == 0)
        f = json_pack("{s:s}", "type", "Unconfined");
    else if (strcmp(v, "runtime/default") == 0)
        f = json_pack("{s:s}", "type", "RuntimeDefault");
    else if (strncmp(v, LOCALHOST_PREFIX, sizeof LOCALHOST_PREFIX - 1) == 0) {
        const char *p = v + sizeof LOCALHOST_PREFIX - 1;
        size_t len = strlen(p);
        if (len == 0 || len > MAX_LOCALHOST_PROFILE || is_space(p[0]) || is_space(p[len - 1]))
            return NULL;
        f = json_pack("{s:s, s:s}", "type", "Localhost", "localhostProfile", p);
    } else
        return NULL;
    if (!f)
        *nomem = true;
    return f;
}

/* The pod's metadata.annotations as an object of the pod's own, made if
 * absent; NULL out of memory or when metadata is not an object. */
static json_t *own_annotations(json_t *pod)
{
    json_t *meta = json_object_get(pod, "metadata");
    if (!meta) {
        if (json_object_set_new(pod, "metadata", json_object()) != 0)
            return NULL;
        meta = json_object_get(pod, "metadata");
    }
    json_t *ann = json_object_get(meta, "annotations");
    if (json_is_object(ann))
        return ann;
    if (!json_is_object(meta) || json_object_set_new(meta, "annotations", json_object()) != 0)
        return NULL;
    return json_object_get(meta, "annotations");
}

/* Sets f as the appArmorProfile of spec[list][i], replacing the list, the
 * container and its securityContext with copies (they are shared with the
 * caller's pod). Takes f over. 0, or -1 out of memory. */
static int set_container_field(json_t *spec, const char *list, size_t i, json_t *f)
{
    json_t *arr = json_copy(json_object_get(spec, list));
    json_t *ctr = arr ? json_copy(json_array_get(arr, i)) : NULL;
    json_t *sc = json_object_get(ctr, "securityContext");
    sc = json_is_object(sc) ? json_copy(sc) : json_object();
    if (!arr || !ctr || !sc || json_object_set_new(sc, "appArmorProfile", f) != 0) {
        json_decref(arr);
        json_decref(ctr);
        json_decref(sc);
        return -1;
    }
    f = NULL;
    if (json_object_set_new(ctr, "securityContext", sc) != 0) {
        json_decref(arr);
        json_decref(ctr);
        return -1;
    }
    if (json_array_set_new(arr, i, ctr) != 0) {
        json_decref(arr);
        return -1;
    }
    return json_object_set_new(spec, list, arr) == 0 ? 0 : -1;
}

/* One container (spec[list][i]) of pod, pod_prof the pod-level profile
 * (may be NULL). 0, or -1 out of memory. */
static int skew_container(json_t *pod, json_t *spec, const char *list, size_t i,
                          const json_t *pod_prof)
{
    const json_t *ctr = json_array_get(json_object_get(spec, list), i);
    const char *name = json_string_value(json_object_get(ctr, "name"));
    char key[320], buf[sizeof LOCALHOST_PREFIX + MAX_LOCALHOST_PROFILE + 1];
    if (!json_is_object(ctr) || !name ||
        (size_t)snprintf(key, sizeof key, "%s%s", ANNOTATION_PREFIX, name) >= sizeof key)
        return 0;
    const json_t *ann = json_object_get(json_object_get(pod, "metadata"), "annotations");
    const json_t *has = json_object_get(ann, key);
    const json_t *prof =
        json_object_get(json_object_get(ctr, "securityContext"), "appArmorProfile");
    if (json_is_null(prof))
        prof = NULL;
    if (!has) {
        const char *v = prof       ? annotation_for_field(prof, buf, sizeof buf)
                        : pod_prof ? annotation_for_field(pod_prof, buf, sizeof buf)
                                   : "";
        if (!v[0])
            return 0;
        json_t *own = own_annotations(pod);
        return own && json_object_set_new(own, key, json_string(v)) == 0 ? 0 : -1;
    }
    if (prof || !json_is_string(has))
        return 0;
    bool nomem = false;
    json_t *f = field_for_annotation(json_string_value(has), &nomem);
    if (!f)
        return nomem ? -1 : 0;
    /* only when it differs from the pod-level profile */
    if (pod_prof && json_equal(f, (json_t *)pod_prof)) {
        json_decref(f);
        return 0;
    }
    return set_container_field(spec, list, i, f);
}

td_status td__pod_apparmor_skew(json_t *pod, td_err *err)
{
    static const char *const lists[] = {"initContainers", "containers", "ephemeralContainers"};
    json_t *spec = json_object_get(pod, "spec");
    if (!json_is_object(spec))
        return TD_OK;
    const char *os = json_string_value(json_object_get(json_object_get(spec, "os"), "name"));
    if (os && strcmp(os, "windows") == 0)
        return TD_OK;
    const json_t *pod_prof =
        json_object_get(json_object_get(spec, "securityContext"), "appArmorProfile");
    if (json_is_null(pod_prof))
        pod_prof = NULL;
    for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++)
        for (size_t i = 0; i < json_array_size(json_object_get(spec, lists[l])); i++)
            if (skew_container(pod, spec, lists[l], i, pod_prof) != 0)
                return td_err_set(err, TD_ENOMEM, "out of memory");
    return TD_OK;
}
