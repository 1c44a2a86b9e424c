/* tenancy.h - isolation tiers: trusted teams and untrusted customers.
 * A Tenant's spec.tenancy (team | customer, default team) decides which
 * layers hold for its namespaces; this module holds the admission rules of
 * those layers (sandboxed runtime, dedicated pools, storage prefix and
 * StorageClasses) and the object-store URI arithmetic they rest on. Pure:
 * everything read is in the arguments. */
#ifndef TENANTD_TENANCY_H
#define TENANTD_TENANCY_H

#include <jansson.h>
#include <stdbool.h>

#include "core/config.h"
#include "core/objuri.h"
#include "tenantd/status.h"

typedef enum { TD_TENANCY_TEAM = 0, TD_TENANCY_CUSTOMER } td_tenancy;

#define TD_SANDBOX_RUNTIME_CLASS "gvisor" /* default sandbox RuntimeClass */
#define TD_SANDBOX_HANDLER "runsc"        /* its handler, as gVisor installs it */
#define TD_LABEL_WORKLOAD "tenantd.dev/workload"
#define TD_LABEL_TENANCY "tenantd.dev/tenancy"
#define TD_ANNOTATION_DATA_URI "tenantd.dev/data-uri"
#define TD_ENV_DATA_URI "DATA_URI"
#define TD_TENANT_TAINT_KEY "tenantd.dev/tenant" /* taint and node label of a dedicated pool */

/* The tier of a Tenant object (borrowed; NULL, or no spec.tenancy: team). */
td_tenancy td_tenancy_of(const json_t *tenant);

/* "team" or "customer". */
const char *td_tenancy_name(td_tenancy t);

/* The sandbox RuntimeClass name in force: the AdmissionPolicy's
 * spec.sandbox.runtimeClassName, else "gvisor". Borrowed. */
const char *td_sandbox_runtime_class(const td_config *cfg);

/* true if pod must run sandboxed: its namespace belongs to a customer
 * tenant, or its tenantd.dev/workload label names an untrusted workload
 * (AdmissionPolicy spec.sandbox.untrustedWorkloads, default [notebook]).
 * *why (may be NULL) gets a phrase for messages, in static storage or in
 * the pod/config (borrowed). */
bool td_sandbox_required(const td_config *cfg, const char *ns, const json_t *pod,
                         const char **why, char *buf, size_t bufsz);

/* Sets spec.runtimeClassName to the sandbox class when the pod must be
 * sandboxed and names none; a pod that names one keeps it (validation
 * judges it). Also applies the RuntimeClass's scheduling (node selector,
 * tolerations) and overhead, as Kubernetes' RuntimeClass plugin would had
 * the class been set before it ran. */
td_status td_sandbox_mutate(const td_config *cfg, const char *ns, json_t *pod, td_err *err);

/* TD_EFORBIDDEN if a pod that must be sandboxed names another runtime
 * class. */
td_status td_sandbox_validate(const td_config *cfg, const char *ns, const json_t *pod,
                              td_err *err);

/* true if pool (a NodePool) lists tenant and no one else in spec.tenants. */
bool td_pool_dedicated_to(const json_t *pool, const char *tenant);

/* Storage isolation for a pod: every declared data location (annotation
 * tenantd.dev/data-uri, env DATA_URI of any container or init container)
 * must lie in the namespace tenant's spec.storage bucket/prefix, and no
 * location may lie in another tenant's; generic ephemeral volumes must use
 * one of its spec.storage.storageClasses. TD_EFORBIDDEN naming the
 * container, the URI and the prefix. */
td_status td_storage_validate_pod(const td_config *cfg, const char *ns, const json_t *pod,
                                  td_err *err);

/* TD_EFORBIDDEN if a PersistentVolumeClaim (borrowed) in ns asks for a
 * StorageClass its tenant's spec.storage.storageClasses does not list
 * (a restricted tenant must name its class). */
td_status td_storage_validate_pvc(const td_config *cfg, const char *ns, const json_t *pvc,
                                  td_err *err);

#endif
