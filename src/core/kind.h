/* kind.h - the kind registry: which kinds a config snapshot accepts, and
 * who validates each. Core holds the registry and checks the envelope
 * (apiVersion, kind, metadata); the module that uses a kind owns its
 * definition and registers it.
 *
 * How registration happens: each stage exposes a table of td_kind_def
 * (td_admission_kinds, td_gateway_kinds, td_queue_kinds, td_cost_kinds,
 * td_client_kinds, each declared in its stage's header), and one small
 * module above the stages (src/kinds/builtin.{c,h}) registers them all in
 * td_kinds_register_builtin(),
 * idempotent and thread-safe (pthread_once). Every program and test that
 * builds a snapshot calls it first: tenantd, tenantctl, the benches, the
 * unit tests (testutil.h's test_config does) and the fuzz targets. Core
 * never names a module. A kind no one registered is refused like any
 * unknown kind ("unknown kind \"X\""), never accepted unchecked; with an
 * empty registry the message says that nothing was registered. */
#ifndef TENANTD_KIND_H
#define TENANTD_KIND_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "tenantd/status.h"
#include "core/validate.h"

/* Checks a validated object's own fields (the envelope is checked before).
 * v->obj is the object, v->who names it; fail with td_vfail. */
typedef td_status (*td_kind_validate_fn)(td_vctx *v);

/* Checks rules across the objects of a finished snapshot: objs are all its
 * objects but the Workloads (no rule reads one, and there may be a hundred
 * thousand), sorted by (kind, namespace, name), borrowed. TD_EINVAL with err
 * naming the object and field, as "Tenant b: spec.namespaces: ...". */
typedef td_status (*td_kind_check_fn)(json_t *const *objs, size_t n, td_err *err);

/* One kind's definition. Tables of these are static and outlive the
 * registry (they are borrowed, never copied). */
typedef struct {
    const char *kind;         /* canonical name: "ResourceQuota" */
    const char *api_versions; /* comma-separated: "v1", "kueue.x-k8s.io/v1beta1,..." */
    bool namespaced;
    const char *aliases;          /* comma-separated, lowercase: "quota,resourcequotas" */
    td_kind_validate_fn validate; /* NULL: the envelope is all there is to check */
    td_kind_check_fn cross_check; /* NULL: none; run at td_config_builder_finish */
    int check_rank; /* cross-checks run in ascending rank (ties: registration order) */
    /* NULL, or the name an object written without metadata gets (Kueue's
     * Configuration lives in a ConfigMap without one: it is "kueue") */
    const char *default_name;
} td_kind_def;

#define TD_KINDS_MAX 64

/* Registers the n definitions of defs (borrowed for the process's life).
 * Registering the same definition again is a no-op (TD_OK). TD_EEXIST
 * when another definition already has the name or one of the aliases of
 * one of defs (nothing of defs is registered then); TD_ENOMEM past
 * TD_KINDS_MAX. Thread-safe; snapshots built meanwhile see the registry
 * before or after, whole tables at a time. */
td_status td_kind_register(const td_kind_def *defs, size_t n, td_err *err);

/* The registered definition of kind (canonical, case-sensitive), or NULL. */
const td_kind_def *td_kind_find(const char *kind);

/* Registered kinds, in registration order: the i-th, or NULL past the end. */
const td_kind_def *td_kind_at(size_t i);

/* For cross-checks: true if obj's kind is kind (canonical). */
bool td_kind_is(const json_t *obj, const char *kind);

/* For cross-checks: the first of objs (n, borrowed) of kind named name, or
 * NULL. Borrowed. */
json_t *td_kind_objs_find(json_t *const *objs, size_t n, const char *kind, const char *name);

#endif
