/* config.h - an immutable, reference-counted snapshot of the objects tenantd
 * was given: Kubernetes kinds (Namespace, ResourceQuota, LimitRange,
 * PriorityClass, ...), Kueue kinds and tenantd's own (Tenant, Route, NodePool,
 * AdmissionPolicy, CostPolicy, LoadScenario). A snapshot is built completely
 * and validated by a builder; readers never lock and never see a half-built
 * or invalid one. */
#ifndef TENANTD_CONFIG_H
#define TENANTD_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/manifest.h"
#include "tenantd/status.h"

#define TD_API_TENANTD "tenantd.dev/v1alpha1"

typedef struct td_config td_config;
typedef struct td_config_builder td_config_builder;

/* The identity of an object: "Kind", "namespace" ("" if cluster-scoped),
 * "name". */
typedef struct {
    const char *kind;
    const char *namespace_;
    const char *name;
} td_object_id;

/* Creates a builder holding the objects of base (may be NULL: empty). */
td_status td_config_builder_create(const td_config *base, td_config_builder **out, td_err *err);
void td_config_builder_destroy(td_config_builder *b);

/* Validates obj (borrowed; a copy is kept) and adds it, replacing an
 * object of the same identity. src (may be NULL) is where obj came from,
 * for messages: "platform.yaml:14: ResourceQuota team-a/q: spec.hard.cpu:
 * \"8Gx\" is not a quantity". The builder is unchanged on error. */
td_status td_config_builder_add(td_config_builder *b, json_t *obj, const td_manifest *src,
                                td_err *err);

/* td_config_builder_add without the copy: obj itself is kept (a new
 * reference), so its owner must never change it afterwards (a document
 * parsed for this alone: the store's rows at start). */
td_status td_config_builder_put(td_config_builder *b, json_t *obj, const td_manifest *src,
                                td_err *err);

/* Adds every document of m, stopping at the first invalid one. */
td_status td_config_builder_add_manifest(td_config_builder *b, const td_manifest *m, td_err *err);

/* Removes an object; TD_ENOTFOUND if absent. Kind is matched without
 * regard to case, and plural/short names ("quota", "resourcequotas") are
 * accepted. */
td_status td_config_builder_delete(td_config_builder *b, const char *kind, const char *namespace_,
                                   const char *name, td_err *err);

/* Cross-object checks (a namespace claimed by two tenants, one global
 * default PriorityClass, ...), then the snapshot (refcount 1). The builder
 * may be destroyed afterwards. */
td_status td_config_builder_finish(td_config_builder *b, td_config **out, td_err *err);

td_config *td_config_ref(td_config *c);
void td_config_unref(td_config *c);

/* An empty snapshot. */
td_status td_config_empty(td_config **out, td_err *err);

/* Loads one or more manifest files into a new snapshot. */
td_status td_config_load_files(const char *const *paths, size_t n, td_config **out, td_err *err);

/* Loads the manifest text (len bytes; errors name it as file name) into a
 * new snapshot. Borrows text. */
td_status td_config_load_text(const char *name, const char *text, size_t len, td_config **out,
                              td_err *err);

/* The canonical kind name for a user's spelling ("quota" -> ResourceQuota),
 * or NULL if unknown. */
const char *td_kind_canonical(const char *user_kind);

/* true if objects of kind live in a namespace. */
bool td_kind_namespaced(const char *kind);

/* All objects of kind (canonical name) in namespace_ (NULL = any), in the
 * order they were added. *out is a borrowed array valid for the snapshot's
 * life (NULL when the count is 0). */
size_t td_config_list(const td_config *c, const char *kind, const char *namespace_,
                      json_t *const **out);

/* Every object, in a stable order (kind, namespace, name). Borrowed. */
size_t td_config_all(const td_config *c, json_t *const **out);

/* One object, or NULL. Borrowed. */
json_t *td_config_get(const td_config *c, const char *kind, const char *namespace_,
                      const char *name);

/* The Tenant object whose spec.namespaces holds ns, or NULL. Borrowed. */
json_t *td_config_tenant_for_namespace(const td_config *c, const char *ns);

/* The AdmissionPolicy in force (the one named "default", else the first),
 * or NULL when none is configured (defaults apply). Borrowed. */
json_t *td_config_admission_policy(const td_config *c);

/* Values derived from a snapshot (parsed admission objects, ...), built
 * once by the first reader that needs them and freed with the snapshot.
 * An attachment starts with this header; destroy frees the whole value. */
typedef struct td_config_attachment {
    void (*destroy)(struct td_config_attachment *self);
} td_config_attachment;

typedef enum {
    TD_CONFIG_ATTACH_ADMISSION = 0,
    TD_CONFIG_ATTACH_QUEUE, /* the daemon's batch queue view (src/daemon/queueview.c) */
    TD_CONFIG_ATTACH_TENANCY, /* tenants by namespace, NodePools, policy (tenancyindex.c) */
    TD_CONFIG_ATTACH_MAX
} td_config_attach_slot;

/* The attachment in slot, built by build(c, arg) on first use (NULL if
 * build returns NULL, e.g. out of memory: the caller then works without
 * it). Thread-safe and lock-free: two threads racing both build, one
 * value is kept and the other destroyed. Borrowed for the snapshot's life. */
td_config_attachment *td_config_attachment_get(const td_config *c, td_config_attach_slot slot,
                                               td_config_attachment *(*build)(const td_config *c));

/* Hangs a (taken over) in slot when the code that made c already has the
 * value in hand, before c is published. Returns what the slot holds then:
 * a, or the value already there (a is destroyed). NULL when a is NULL. */
td_config_attachment *td_config_attachment_offer(const td_config *c, td_config_attach_slot slot,
                                                 td_config_attachment *a);

/* Small accessors for jansson objects; each returns NULL/def when the path
 * is missing or of another type. path is dot-separated ("metadata.name"). */
const char *td_json_str(const json_t *obj, const char *path);
json_t *td_json_path(const json_t *obj, const char *path);

/* v as a C integer in [min, max], where a JSON number becomes one: only a
 * JSON integer (1e3 and 1.5 are numbers of another kind, as Go's decoder
 * into an int32 field refuses them; true and "1" are not numbers). TD_OK
 * with *out; TD_EINVAL with err "must be an integer in [MIN, MAX], not V"
 * or "must be an integer, not V" (V as written: -2147483649, 1e3 shown
 * 1000.0, true, "1"), which the caller prefixes with the field. */
td_status td_json_int(const json_t *v, long long min, long long max, long long *out, td_err *err);
/* td_json_int over int32's range (Kubernetes' int32 fields: priority). */
td_status td_json_int32(const json_t *v, int32_t *out, td_err *err);

/* A copy of v (NULL if v is NULL or out of memory) whose objects and arrays
 * are new, members in the same order, as json_deep_copy makes them but
 * without its cycle check (which formats a pointer per object): for trees,
 * which every parsed document is. Strings, integers and reals are shared
 * with v (new references), not copied: tenantd never changes one in place
 * (json_string_set and the like); code that would must use json_deep_copy.
 * New reference. */
json_t *td_json_copy(const json_t *v);

/* Strict decoding of tenantd's own kinds: the first key of the object m
 * that allowed (NULL-terminated) does not name, with *val its value and
 * known the allowed names joined by ", " (cut to n bytes); NULL when every
 * key is allowed. Borrows m. */
const char *td_json_unknown_field(const json_t *m, const char *const *allowed, json_t **val,
                                  char *known, size_t n);

/* Identity of obj (borrowed strings). */
td_object_id td_object_identity(const json_t *obj);

#endif
