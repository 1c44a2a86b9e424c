/* tenancy_internal.h - the per-snapshot tenancy index (tenancyindex.c) that the
 * tenancy, pools and labels rules of src/admission share (td__ names); not
 * for use outside it. */
#ifndef TENANTD_TENANCY_INTERNAL_H
#define TENANTD_TENANCY_INTERNAL_H

#include "admission/tenancy.h"
#include "core/config.h"

/* ---- per-snapshot index (tenancyindex.c) --------------------------------
 * What the tenancy, pools and labels rules look up on every pod, found once
 * per snapshot: each namespace's Tenant and Namespace object, the
 * AdmissionPolicy's settings and each NodePool's fields, all borrowed from
 * the snapshot. Immutable once built, so webhook threads share it. */

typedef struct {
    const char *ns;
    json_t *tenant;        /* td_config_tenant_for_namespace, or NULL */
    json_t *nsobj;         /* the Namespace object, or NULL */
    json_t *ns_labels;     /* its metadata.labels, or NULL */
    json_t *tenant_labels; /* the tenant's spec.labels, or NULL */
    const char *tenant_name; /* the tenant's metadata.name, or NULL */
    bool customer;         /* td_tenancy_of(tenant) == TD_TENANCY_CUSTOMER */
    /* a pod-security.kubernetes.io/ label other than enforce (a version,
     * warn or audit): the Pod Security step reads them only then */
    bool pss_more;
} td__tenancy_ns;

typedef struct {
    json_t *obj;
    const char *name;            /* metadata.name */
    json_t *taint;               /* spec.taint, or NULL */
    const char *taint_key, *taint_value, *taint_effect; /* its members, or NULL */
    json_t *selector;            /* spec.nodeSelector, or NULL */
    json_t *tenants;             /* spec.tenants, or NULL */
    json_t *capacity;            /* spec.capacity, or NULL */
} td__tenancy_pool;

typedef struct td__tenancy_index td__tenancy_index;

/* The index of cfg, or NULL when cfg is NULL or it could not be built (out
 * of memory): the caller then reads the snapshot as before. Borrowed. */
const td__tenancy_index *td__tenancy_index_get(const td_config *cfg);

/* ns's entry: its Tenant, Namespace object and the tenant's name and tier,
 * as td_config_tenant_for_namespace and td_config_get give them. ns not
 * named by any Namespace or Tenant of the snapshot gets them looked up
 * in *spare (filled by this call). ix may be NULL (cfg is then read). */
const td__tenancy_ns *td__tenancy_ns_get(const td__tenancy_index *ix, const td_config *cfg,
                                         const char *ns, td__tenancy_ns *spare);

/* The NodePools of the snapshot, in td_config_list order; *pools is
 * borrowed from ix (NULL when none). */
size_t td__tenancy_pools(const td__tenancy_index *ix, const td__tenancy_pool **pools);

/* Fills one pool's entry from its object (for a caller without an index). */
void td__tenancy_pool_fill(td__tenancy_pool *p, json_t *pool);

/* The AdmissionPolicy in force (td_config_admission_policy), and its
 * spec.requiredLabels, spec.inheritLabelsFromNamespace,
 * spec.sandbox.runtimeClassName and spec.sandbox.untrustedWorkloads (each
 * NULL when absent). */
typedef struct {
    json_t *policy;
    json_t *required_labels;
    json_t *inherit_labels;
    const char *runtime_class;
    json_t *untrusted_workloads;
} td__tenancy_policy;

/* The policy settings of cfg, from ix when there is one, else read into
 * *spare. */
const td__tenancy_policy *td__tenancy_policy_get(const td__tenancy_index *ix,
                                                 const td_config *cfg, td__tenancy_policy *spare);

#endif
