/* authz.h - who is calling the control API and what it may touch.
 * A caller is the admin (the --admin-token-file token), a tenant (a key
 * whose SHA-256 is one of its Tenant's spec.apiKeys, looked up in the live
 * snapshot, so an apply that drops a key revokes it at once), or nobody.
 * Each endpoint declares one rule; tenant-scoped endpoints then check each
 * namespace they touch. Pure: no I/O, no clock; hashes compared in
 * constant time. */
#ifndef TENANTD_AUTHZ_H
#define TENANTD_AUTHZ_H

#include <jansson.h>
#include <stdbool.h>

#include "core/config.h"
#include "tenantd/status.h"

/* The rule an endpoint declares. */
typedef enum {
    TD_AUTHZ_OPEN,   /* anyone: health checks, the webhook (kube-apiserver calls it) */
    TD_AUTHZ_ADMIN,  /* the admin token only: apply, delete, /metrics */
    TD_AUTHZ_TENANT  /* admin, or a tenant within its own namespaces */
} td_authz_rule;

typedef enum {
    TD_PRINCIPAL_NONE,   /* no credential */
    TD_PRINCIPAL_BAD,    /* a credential that names nobody */
    TD_PRINCIPAL_TENANT, /* a Tenant's API key */
    TD_PRINCIPAL_ADMIN   /* the admin token, or no token configured at all */
} td_principal_kind;

typedef struct {
    td_principal_kind kind;
    const json_t *tenant;    /* TENANT: its Tenant object, borrowed from the snapshot */
    const char *tenant_name; /* TENANT: metadata.name, borrowed likewise */
} td_principal;

/* Identifies the caller from the value of its Authorization header
 * (NULL: none; "Bearer SECRET" otherwise). admin_sha256 is the SHA-256 of
 * the admin token, or NULL when none is configured: then a request without
 * a credential is the admin (open mode, which the daemon warns about) and
 * a tenant key is still scoped to its tenant. cfg is borrowed, and *out
 * borrows from it: keep a reference while *out is used. Every key of every
 * Tenant is compared, in constant time, whatever matches first. */
void td_authz_identify(const td_config *cfg, const unsigned char *admin_sha256,
                       const char *authorization, td_principal *out);

/* The decision for principal p on an endpoint with rule, touching
 * namespace_ (NULL: the request names none; a TENANT endpoint then shows a
 * tenant only what td_authz_namespace_ok allows). 0 if allowed; otherwise
 * 401 (no or bad credential) or 403 (a tenant out of its bounds), with a
 * message in err that names nothing of another tenant. */
int td_authz_check(const td_principal *p, td_authz_rule rule, const char *namespace_,
                   td_err *err);

/* true if p may see or touch objects in namespace ns: the admin always,
 * a tenant for the namespaces in its spec.namespaces. */
bool td_authz_namespace_ok(const td_principal *p, const char *ns);

/* Reading objects of kind (canonical) through GET /v1/objects: namespaced
 * kinds as td_authz_check with namespace_; of cluster-scoped kinds a tenant
 * may read only its own Tenant (name NULL or "" or its own name). 0, 401 or
 * 403 as td_authz_check. */
int td_authz_check_read(const td_principal *p, const char *kind, const char *namespace_,
                        const char *name, td_err *err);

/* A new copy of a Tenant object with each spec.apiKeys[].sha256 replaced
 * by "redacted"; NULL when out of memory. tenant is borrowed. */
json_t *td_authz_redact_tenant(const json_t *tenant);

#endif
