/* authz.c - control API callers (admin, tenant, nobody) and what each may
 * touch. Keys are never copied or logged: only their SHA-256 is compared
 * with the hashes in the snapshot's Tenant objects. */
#include "core/authz.h"

#include <string.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include "core/hex.h"

/* 0 and the 32 bytes of a 64-digit hex string; -1 if it is not one (config
 * validation rejects such keys, so this is a belt for hand-built configs). */
static int unhex32(const char *hex, unsigned char out[32])
{
    if (!hex || strlen(hex) != 64)
        return -1;
    for (size_t i = 0; i < 32; i++) {
        int hi = td_hexval(hex[2 * i]), lo = td_hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

void td_authz_identify(const td_config *cfg, const unsigned char *admin_sha256,
                       const char *authorization, td_principal *out)
{
    memset(out, 0, sizeof *out);
    if (!authorization || !*authorization) {
        out->kind = admin_sha256 ? TD_PRINCIPAL_NONE : TD_PRINCIPAL_ADMIN;
        return;
    }
    out->kind = TD_PRINCIPAL_BAD;
    if (strncmp(authorization, "Bearer ", 7) != 0)
        return;
    const char *secret = authorization + 7;
    unsigned char sha[32];
    SHA256((const unsigned char *)secret, strlen(secret), sha);
    if (admin_sha256 && CRYPTO_memcmp(sha, admin_sha256, 32) == 0) {
        out->kind = TD_PRINCIPAL_ADMIN;
        return;
    }
    json_t *const *tenants;
    size_t n = cfg ? td_config_list(cfg, "Tenant", NULL, &tenants) : 0;
    const json_t *found = NULL;
    /* Every key is compared, so the time taken does not say which tenant,
     * or how many keys, matched. */
    for (size_t i = 0; i < n; i++) {
        size_t k;
        json_t *key;
        json_array_foreach(td_json_path(tenants[i], "spec.apiKeys"), k, key)
        {
            unsigned char want[32];
            if (unhex32(td_json_str(key, "sha256"), want) != 0)
                continue;
            if (CRYPTO_memcmp(sha, want, 32) == 0)
                found = tenants[i];
        }
    }
    if (found) {
        out->kind = TD_PRINCIPAL_TENANT;
        out->tenant = found;
        out->tenant_name = td_json_str(found, "metadata.name");
    }
}

bool td_authz_namespace_ok(const td_principal *p, const char *ns)
{
    if (p->kind == TD_PRINCIPAL_ADMIN)
        return true;
    if (p->kind != TD_PRINCIPAL_TENANT || !ns)
        return false;
    size_t i;
    json_t *v;
    json_array_foreach(td_json_path(p->tenant, "spec.namespaces"), i, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), ns) == 0)
            return true;
    }
    return false;
}

static int unauthenticated(const td_principal *p, td_err *err)
{
    td_err_set(err, TD_EFORBIDDEN,
               p->kind == TD_PRINCIPAL_NONE
                   ? "unauthorized: this endpoint needs a credential (Authorization: Bearer "
                     "TOKEN; tenantctl --token-file)"
                   : "unauthorized: the credential is neither the admin token nor a key of "
                     "any Tenant");
    return 401;
}

int td_authz_check(const td_principal *p, td_authz_rule rule, const char *namespace_,
                   td_err *err)
{
    if (rule == TD_AUTHZ_OPEN || p->kind == TD_PRINCIPAL_ADMIN)
        return 0;
    if (p->kind != TD_PRINCIPAL_TENANT)
        return unauthenticated(p, err);
    if (rule == TD_AUTHZ_ADMIN) {
        td_err_set(err, TD_EFORBIDDEN,
                   "forbidden: tenant %s's key may submit and read its own workloads and "
                   "objects; this endpoint needs the admin token",
                   p->tenant_name);
        return 403;
    }
    if (namespace_ && !td_authz_namespace_ok(p, namespace_)) {
        /* The same words whether or not the namespace exists or whose it
         * is, so a probe learns nothing. */
        char own[512] = "";
        size_t i, len = 0;
        json_t *v;
        json_array_foreach(td_json_path(p->tenant, "spec.namespaces"), i, v)
        {
            if (json_is_string(v) && len < sizeof own)
                len += (size_t)snprintf(own + len, sizeof own - len, "%s%s", i ? ", " : "",
                                        json_string_value(v));
        }
        td_err_set(err, TD_EFORBIDDEN,
                   "forbidden: tenant %s's key reaches only its own namespaces (%s)",
                   p->tenant_name, *own ? own : "none");
        return 403;
    }
    return 0;
}

int td_authz_check_read(const td_principal *p, const char *kind, const char *namespace_,
                        const char *name, td_err *err)
{
    if (td_kind_namespaced(kind))
        return td_authz_check(p, TD_AUTHZ_TENANT, namespace_, err);
    int code = td_authz_check(p, TD_AUTHZ_TENANT, NULL, err);
    if (code != 0 || p->kind == TD_PRINCIPAL_ADMIN)
        return code;
    if (strcmp(kind, "Tenant") != 0) {
        td_err_set(err, TD_EFORBIDDEN,
                   "forbidden: tenant %s's key may read namespaced objects in its namespaces "
                   "and its own Tenant, not %s objects",
                   p->tenant_name, kind);
        return 403;
    }
    if (name && *name && strcmp(name, p->tenant_name) != 0) {
        td_err_set(err, TD_EFORBIDDEN,
                   "forbidden: tenant %s's key may read only Tenant %s", p->tenant_name,
                   p->tenant_name);
        return 403;
    }
    return 0;
}

json_t *td_authz_redact_tenant(const json_t *tenant)
{
    json_t *copy = json_deep_copy(tenant);
    if (!copy)
        return NULL;
    size_t i;
    json_t *key;
    json_array_foreach(td_json_path(copy, "spec.apiKeys"), i, key)
    {
        if (json_is_object(key) && json_object_set_new(key, "sha256", json_string("redacted")) != 0) {
            json_decref(copy);
            return NULL;
        }
    }
    return copy;
}
