/* test_authz.c - control API callers and their bounds: who a credential
 * names (admin, tenant, nobody; open mode), the decision per rule and
 * namespace, reads of cluster-scoped kinds, and redaction of keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include <openssl/sha.h>

#include "core/authz.h"

#include "testutil.h"

static const char *const yaml =
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: alpha}\n"
    "spec: {namespaces: [a1, a2], apiKeys: [{sha256: \"39a00d29356083a9c9d65c14652350d61b11d5d2e8582da510887c8e11be08c8\"}]}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: beta}\n"
    "spec: {namespaces: [b1], apiKeys: [{sha256: \"8fd493b2a681a4810d9fd40526a9de960deb255e7bfbb1c4d509d06d6da6ff5b\"}]}\n";

static td_config *load(void)
{
    return test_config("t.yaml", yaml);
}

static void test_identify(void **state)
{
    (void)state;
    static const struct {
        const char *name, *header;
        int admin_configured;
        td_principal_kind kind;
        const char *tenant;
    } rows[] = {
        {"no credential", NULL, 1, TD_PRINCIPAL_NONE, NULL},
        {"empty header", "", 1, TD_PRINCIPAL_NONE, NULL},
        {"not a bearer", "Basic a2V5LWFscGhh", 1, TD_PRINCIPAL_BAD, NULL},
        {"unknown key", "Bearer key-gamma", 1, TD_PRINCIPAL_BAD, NULL},
        {"alpha's key", "Bearer key-alpha", 1, TD_PRINCIPAL_TENANT, "alpha"},
        {"beta's key", "Bearer key-beta", 1, TD_PRINCIPAL_TENANT, "beta"},
        {"a key's prefix", "Bearer key-alph", 1, TD_PRINCIPAL_BAD, NULL},
        {"admin token", "Bearer admin-token-0123456789", 1, TD_PRINCIPAL_ADMIN, NULL},
        {"open mode, no credential", NULL, 0, TD_PRINCIPAL_ADMIN, NULL},
        {"open mode, tenant key", "Bearer key-beta", 0, TD_PRINCIPAL_TENANT, "beta"},
        {"open mode, the token is nobody", "Bearer admin-token-0123456789", 0, TD_PRINCIPAL_BAD,
         NULL},
    };
    td_config *c = load();
    unsigned char admin[32];
    const char *tok = "admin-token-0123456789";
    SHA256((const unsigned char *)tok, strlen(tok), admin);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_principal p;
        print_message("%s\n", rows[i].name);
        td_authz_identify(c, rows[i].admin_configured ? admin : NULL, rows[i].header, &p);
        assert_int_equal(p.kind, rows[i].kind);
        if (rows[i].tenant)
            assert_string_equal(p.tenant_name, rows[i].tenant);
    }
    td_config_unref(c);
}

static void test_decisions(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        td_principal_kind who; /* TENANT = alpha */
        td_authz_rule rule;
        const char *ns;
        int want;
        const char *msg; /* substring */
    } rows[] = {
        {"open to nobody", TD_PRINCIPAL_NONE, TD_AUTHZ_OPEN, NULL, 0, NULL},
        {"admin rule, nobody", TD_PRINCIPAL_NONE, TD_AUTHZ_ADMIN, NULL, 401, "needs a credential"},
        {"admin rule, bad key", TD_PRINCIPAL_BAD, TD_AUTHZ_ADMIN, NULL, 401, "neither"},
        {"admin rule, tenant", TD_PRINCIPAL_TENANT, TD_AUTHZ_ADMIN, NULL, 403, "admin token"},
        {"admin rule, admin", TD_PRINCIPAL_ADMIN, TD_AUTHZ_ADMIN, NULL, 0, NULL},
        {"tenant rule, nobody", TD_PRINCIPAL_NONE, TD_AUTHZ_TENANT, "a1", 401, NULL},
        {"own namespace", TD_PRINCIPAL_TENANT, TD_AUTHZ_TENANT, "a2", 0, NULL},
        {"no namespace named", TD_PRINCIPAL_TENANT, TD_AUTHZ_TENANT, NULL, 0, NULL},
        {"another's namespace", TD_PRINCIPAL_TENANT, TD_AUTHZ_TENANT, "b1", 403,
         "only its own namespaces (a1, a2)"},
        {"a namespace of nobody", TD_PRINCIPAL_TENANT, TD_AUTHZ_TENANT, "zz", 403,
         "only its own namespaces (a1, a2)"},
        {"cluster scope", TD_PRINCIPAL_TENANT, TD_AUTHZ_TENANT, "", 403, NULL},
        {"admin anywhere", TD_PRINCIPAL_ADMIN, TD_AUTHZ_TENANT, "b1", 0, NULL},
    };
    td_config *c = load();
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_principal p = {rows[i].who, NULL, NULL};
        if (p.kind == TD_PRINCIPAL_TENANT) {
            p.tenant = td_config_get(c, "Tenant", "", "alpha");
            p.tenant_name = "alpha";
        }
        td_err err = {{0}};
        print_message("%s\n", rows[i].name);
        assert_int_equal(td_authz_check(&p, rows[i].rule, rows[i].ns, &err), rows[i].want);
        if (rows[i].msg)
            assert_non_null(strstr(err.msg, rows[i].msg));
        if (rows[i].want == 403)
            assert_null(strstr(err.msg, "beta")); /* names nothing of the other tenant */
    }
    td_config_unref(c);
}

static void test_reads_and_redaction(void **state)
{
    (void)state;
    td_config *c = load();
    td_principal p = {TD_PRINCIPAL_TENANT, td_config_get(c, "Tenant", "", "alpha"), "alpha"};
    td_err err;
    assert_int_equal(td_authz_check_read(&p, "Tenant", NULL, NULL, &err), 0);
    assert_int_equal(td_authz_check_read(&p, "Tenant", NULL, "alpha", &err), 0);
    assert_int_equal(td_authz_check_read(&p, "Tenant", NULL, "beta", &err), 403);
    assert_int_equal(td_authz_check_read(&p, "ClusterQueue", NULL, NULL, &err), 403);
    assert_int_equal(td_authz_check_read(&p, "LocalQueue", "a1", NULL, &err), 0);
    assert_int_equal(td_authz_check_read(&p, "LocalQueue", "b1", NULL, &err), 403);
    assert_true(td_authz_namespace_ok(&p, "a1"));
    assert_false(td_authz_namespace_ok(&p, "b1"));
    assert_false(td_authz_namespace_ok(&p, NULL));
    json_t *r = td_authz_redact_tenant(p.tenant);
    assert_non_null(r);
    assert_string_equal(td_json_str(json_array_get(td_json_path(r, "spec.apiKeys"), 0), "sha256"),
                        "redacted");
    /* the snapshot's own object is untouched */
    assert_string_equal(
        td_json_str(json_array_get(td_json_path(p.tenant, "spec.apiKeys"), 0), "sha256"),
        "39a00d29356083a9c9d65c14652350d61b11d5d2e8582da510887c8e11be08c8");
    json_decref(r);
    td_config_unref(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identify),
        cmocka_unit_test(test_decisions),
        cmocka_unit_test(test_reads_and_redaction),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
