/* test_models.c - the gateway's model decisions (models.c), table-driven:
 * pattern matching, which route serves a model on a path, which tenant
 * and key may use it, the body's "model", the /v1/models list, the error
 * types; and the config's checks of spec.match.models and spec.models. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/gateway.h"

#include "testutil.h"

/* sha256("demo-key-team-a"), sha256("demo-key-team-b") */
#define KEY_A_SHA "7dbaf6a9f8103761445f073645d544d53cc1f4584dbcd673ec93ce854bdedae5"
#define KEY_ZERO  "'0000000000000000000000000000000000000000000000000000000000000000'"
#define KEY_ONE   "'1111111111111111111111111111111111111111111111111111111111111111'"

static void test_pattern(void **state)
{
    (void)state;
    static const struct {
        const char *pattern, *model;
        bool match;
    } cases[] = {
        {"llama-3-70b", "llama-3-70b", true},
        {"llama-3-70b", "llama-3-70b-instruct", false},
        {"llama-3-70b", "llama-3-7", false},
        {"llama-*", "llama-3-8b", true},
        {"llama-*", "llama-", true},
        {"llama-*", "llama", false},
        {"llama-*", "mistral-7b", false},
        {"*", "anything", true},
        {"*", "", true},
        {"Llama-*", "llama-3", false}, /* case matters, as in OpenAI's ids */
        {"", "", true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (td_gw_model_match(cases[i].pattern, cases[i].model) != cases[i].match)
            fail_msg("case %zu: %s vs %s: want %d", i, cases[i].pattern, cases[i].model,
                     cases[i].match);
    assert_false(td_gw_model_match(NULL, "x"));
    assert_false(td_gw_model_match("x", NULL));
}

static const char fleet[] =
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: small}\n"
    "spec:\n  models: [llama-3-8b, 'qwen-*']\n"
    "  apiKeys: [{sha256: " KEY_A_SHA ", name: bot, models: [qwen-2-7b]},\n"
    "            {sha256: " KEY_ZERO "}]\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: cust}\n"
    "spec: {tenancy: customer, models: [llama-3-8b], namespaces: [cust]}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: all}\n"
    "spec: {apiKeys: [{sha256: " KEY_ONE "}], gateway: {rate: {cost: 1000, per: 1s},"
    " models: [{model: llama-3-70b, rate: {cost: 10, per: 1s, burst: 20}, concurrency: 2},"
    " {model: 'llama-*', concurrency: 8}]}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: big}\n"
    "spec: {match: {pathPrefix: /v1/chat/completions, models: [llama-3-70b]},"
    " upstream: {address: '127.0.0.1:9'}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: small}\n"
    "spec: {match: {pathPrefix: /v1/chat/completions, models: [llama-3-8b, 'qwen-*']},"
    " upstream: {address: '127.0.0.1:10'}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: emb}\n"
    "spec: {match: {models: [bge-m3]}, upstream: {address: '127.0.0.1:11'}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: files}\n"
    "spec: {match: {pathPrefix: /v1/files}, upstream: {address: '127.0.0.1:12'}}\n---\n"
    /* what a customer tier needs besides */
    "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: gvisor}\nhandler: runsc\n";

static void test_select_and_access(void **state)
{
    (void)state;
    td_config *c = test_config("fleet.yaml", fleet);
    td_gateway *g = NULL;
    td_err err;
    assert_int_equal(td_gateway_create(c, NULL, &g, &err), TD_OK);
    td_gw_config *held = NULL;
    const td_gw_config *v = td_gateway_config(g, &held);
    assert_int_equal(v->nmodel_routes, 3);

    static const struct {
        const char *path, *model, *route; /* route NULL: none */
    } sel[] = {
        {"/v1/chat/completions", "llama-3-70b", "big"},
        {"/v1/chat/completions", "llama-3-8b", "small"},
        {"/v1/chat/completions", "qwen-2-7b", "small"},
        {"/v1/chat/completions", "mistral-7b", NULL}, /* emb serves bge-m3 only */
        {"/v1/chat/completions", "bge-m3", "emb"},    /* emb's prefix is "/" */
        {"/v1/chat/completions", NULL, NULL},
        {"/v1/embeddings", "bge-m3", "emb"},
        {"/v1/embeddings", "llama-3-70b", NULL},
        {"/v1/files", NULL, "files"},
        {"/v1/files", "llama-3-70b", "files"}, /* a path-only route takes any model */
        {"/healthz", "bge-m3", "emb"},
    };
    for (size_t i = 0; i < sizeof sel / sizeof sel[0]; i++) {
        const td_gw_route *r = td_gw_route_select(v, sel[i].path, sel[i].model);
        const char *want = sel[i].route, *got = r ? r->name : NULL;
        if (want && got ? strcmp(got, want) != 0 : want != got)
            fail_msg("select %zu: %s %s: got %s want %s", i, sel[i].path,
                     sel[i].model ? sel[i].model : "(none)", r ? r->name : "NULL",
                     want ? want : "NULL");
    }
    const td_gw_route *r = NULL;
    assert_int_equal(td_gw_route_by_path(v, "/v1/chat/completions", &r), TD_GW_ROUTE_BY_MODEL);
    assert_null(r);
    assert_int_equal(td_gw_route_by_path(v, "/v1/files/abc", &r), TD_GW_ROUTE_FOUND);
    assert_string_equal(r->name, "files");
    assert_int_equal(td_gw_route_by_path(v, "/anything", &r), TD_GW_ROUTE_BY_MODEL);

    const td_gw_key *kbot = NULL;
    const td_gw_tenant *small = td_gw_tenant_by_key_ex(v, "demo-key-team-a", 15, &kbot);
    assert_non_null(small);
    assert_string_equal(kbot->name, "bot");
    const td_gw_tenant *cust = td_gw_tenant_by_name(v, "cust");
    const td_gw_tenant *all = td_gw_tenant_by_name(v, "all");
    static const struct {
        int tenant; /* 0 small, 1 small with key bot, 2 cust, 3 all */
        const char *model;
        td_gw_model_access want;
    } acc[] = {
        {0, "llama-3-8b", TD_GW_MODEL_ALLOWED},
        {0, "qwen-2-7b", TD_GW_MODEL_ALLOWED},
        {0, "qwen-anything", TD_GW_MODEL_ALLOWED},
        {0, "llama-3-70b", TD_GW_MODEL_FORBIDDEN},
        {0, NULL, TD_GW_MODEL_FORBIDDEN},
        {1, "qwen-2-7b", TD_GW_MODEL_ALLOWED},
        {1, "qwen-anything", TD_GW_MODEL_FORBIDDEN}, /* the key is narrower */
        {1, "llama-3-8b", TD_GW_MODEL_FORBIDDEN},
        {2, "llama-3-8b", TD_GW_MODEL_ALLOWED},
        {2, "llama-3-70b", TD_GW_MODEL_HIDDEN}, /* a customer is told it does not exist */
        {3, "llama-3-70b", TD_GW_MODEL_ALLOWED},
        {3, NULL, TD_GW_MODEL_ALLOWED},
    };
    for (size_t i = 0; i < sizeof acc / sizeof acc[0]; i++) {
        const td_gw_tenant *t = acc[i].tenant < 2 ? small : acc[i].tenant == 2 ? cust : all;
        const td_gw_key *k = acc[i].tenant == 1 ? kbot : NULL;
        if (td_gw_model_access_check(t, k, acc[i].model) != acc[i].want)
            fail_msg("access %zu: %s %s", i, t->name, acc[i].model ? acc[i].model : "(none)");
    }

    /* spec.gateway.models[]: the first entry matching, in order */
    static const struct {
        const char *model;
        int entry; /* -1: none */
    } lim[] = {
        {"llama-3-70b", 0}, {"llama-3-8b", 1}, {"llama-", 1}, {"qwen-2-7b", -1}, {NULL, -1},
    };
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++) {
        const td_gw_model_limit *l = td_gw_model_limit_for(all, lim[i].model);
        if (lim[i].entry < 0 ? l != NULL : l != &all->model_limits[lim[i].entry])
            fail_msg("limit %zu: %s", i, lim[i].model ? lim[i].model : "(none)");
    }
    assert_int_equal(all->nmodel_limits, 2);
    assert_true(all->model_limits[0].rate.cost == 10 && all->model_limits[0].rate.burst == 20);
    assert_int_equal(all->model_limits[0].rate.per_ns, 1000000000ULL);
    assert_int_equal(all->model_limits[0].concurrency, 2);
    assert_true(all->model_limits[1].rate.cost == 0 && all->model_limits[1].concurrency == 8);
    assert_int_not_equal(all->model_limits[0].slot, all->model_limits[1].slot);
    assert_string_equal(td_gateway_slot_name(g, 'k', all->model_limits[0].slot),
                        "all/model:llama-3-70b");
    assert_null(td_gw_model_limit_for(small, "llama-3-70b"));

    /* /v1/models: exact names served and allowed, each once, in route
     * order; a tenant's exact name under a route's prefix is listed too */
    static const struct {
        int tenant;
        const char *want;
    } lists[] = {
        {0, "{\"object\":\"list\",\"data\":[{\"id\":\"llama-3-8b\",\"object\":\"model\","
            "\"owned_by\":\"tenantd\"}]}"},
        {1, "{\"object\":\"list\",\"data\":[{\"id\":\"qwen-2-7b\",\"object\":\"model\","
            "\"owned_by\":\"tenantd\"}]}"},
        {2, "{\"object\":\"list\",\"data\":[{\"id\":\"llama-3-8b\",\"object\":\"model\","
            "\"owned_by\":\"tenantd\"}]}"},
        {3, "{\"object\":\"list\",\"data\":[{\"id\":\"llama-3-70b\",\"object\":\"model\","
            "\"owned_by\":\"tenantd\"},{\"id\":\"llama-3-8b\",\"object\":\"model\","
            "\"owned_by\":\"tenantd\"},{\"id\":\"bge-m3\",\"object\":\"model\","
            "\"owned_by\":\"tenantd\"}]}"},
    };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        const td_gw_tenant *t = lists[i].tenant < 2 ? small : lists[i].tenant == 2 ? cust : all;
        const td_gw_key *k = lists[i].tenant == 1 ? kbot : NULL;
        char *out = NULL;
        size_t n = 0;
        assert_int_equal(td_gw_models_list(v, t, k, &out, &n), TD_OK);
        json_t *got = json_loads(out, 0, NULL), *want = json_loads(lists[i].want, 0, NULL);
        if (!json_equal(got, want))
            fail_msg("list %zu: %s", i, out);
        assert_int_equal(n, strlen(out));
        json_decref(got);
        json_decref(want);
        free(out);
    }
    td_gw_config_unref(held);
    td_gateway_destroy(g);
    td_config_unref(c);
}

/* The model label of metrics series: bounded by the Routes' lists. */
static void test_model_label(void **state)
{
    (void)state;
    td_config *c = test_config("fleet.yaml", fleet);
    td_gateway *g = NULL;
    td_err err;
    assert_int_equal(td_gateway_create(c, NULL, &g, &err), TD_OK);
    td_gw_config *held = NULL;
    const td_gw_config *v = td_gateway_config(g, &held);
    static const struct {
        const char *name, *model, *label;
    } rows[] = {
        {"a name a Route lists", "llama-3-70b", "llama-3-70b"},
        {"another", "bge-m3", "bge-m3"},
        {"matched by a prefix: the pattern", "qwen-2-7b", "qwen-*"},
        {"the pattern itself", "qwen-", "qwen-*"},
        {"no Route lists it", "mistral-7b", "other"},
        {"a longer name is not the name", "llama-3-70b-instruct", "other"},
        {"no model", "", ""},
        {"NULL", NULL, ""},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (strcmp(td_gw_model_label(v, rows[i].model), rows[i].label) != 0)
            fail_msg("%s: %s", rows[i].name, td_gw_model_label(v, rows[i].model));
    assert_string_equal(td_gw_model_label(NULL, "x"), "other");
    td_gw_config_unref(held);
    td_gateway_destroy(g);
    td_config_unref(c);
}

static void test_body_model(void **state)
{
    (void)state;
    static const struct {
        const char *body;
        td_status st;
        const char *model, *msg;
    } cases[] = {
        {"{\"model\":\"llama-3-8b\",\"messages\":[]}", TD_OK, "llama-3-8b", NULL},
        {"{\"messages\":[]}", TD_OK, "", NULL},
        {"{\"model\":null}", TD_OK, "", NULL},
        {"", TD_OK, "", NULL},
        {"{\"model\":7}", TD_EINVAL, "", "model must be a string"},
        {"[1]", TD_EINVAL, "", "JSON object"},
        {"{\"model\":", TD_EINVAL, "", "not JSON"},
        {"{\"model\":\"a\\u0000b\"}", TD_EINVAL, "", "NUL"},
        {"{\"model\":\"0123456789abcdef\"}", TD_EINVAL, "", "longer than 15 bytes"},
        {"{\"model\":\"0123456789abcde\"}", TD_OK, "0123456789abcde", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[16];
        td_err err;
        err.msg[0] = '\0';
        td_status st = td_gw_body_model(cases[i].body, strlen(cases[i].body), out, sizeof out, &err);
        if (st != cases[i].st || strcmp(out, cases[i].model) != 0 ||
            (cases[i].msg && !strstr(err.msg, cases[i].msg)))
            fail_msg("case %zu (%s): st %d out '%s' msg '%s'", i, cases[i].body, st, out, err.msg);
    }
}

static void test_error_type(void **state)
{
    (void)state;
    static const struct {
        int status;
        const char *code, *type;
    } cases[] = {
        {400, "bad_request", "invalid_request_error"},
        {401, "unauthorized", "authentication_error"},
        {403, "model_not_allowed", "permission_error"},
        {404, "model_not_found", "invalid_request_error"},
        {405, "method_not_allowed", "invalid_request_error"},
        {413, "body_too_large", "invalid_request_error"},
        {429, "rate_limited", "rate_limit_error"},
        {429, "cost_exceeds_burst", "rate_limit_error"},
        {429, "budget_exceeded", "insufficient_quota"},
        {502, "upstream_error", "server_error"},
        {503, "overloaded", "server_error"},
        {504, "timeout", "server_error"},
        {505, "http_version_not_supported", "invalid_request_error"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_string_equal(td_gw_error_type(cases[i].status, cases[i].code), cases[i].type);
}

/* The config refuses what could never be served as written. */
static void test_config_checks(void **state)
{
    (void)state;
    static const struct {
        const char *yaml, *msg; /* msg NULL: accepted */
    } cases[] = {
        {"kind: Route\nmetadata: {name: r}\nspec: {match: {models: []}, upstream: {address: "
         "'h:1'}}\n",
         "spec.match.models: must be a non-empty list"},
        {"kind: Route\nmetadata: {name: r}\nspec: {match: {models: ['a*b']}, upstream: {address: "
         "'h:1'}}\n",
         "a '*' may only end a name"},
        {"kind: Route\nmetadata: {name: r}\nspec: {match: {models: [a, a]}, upstream: {address: "
         "'h:1'}}\n",
         "\"a\" is listed twice"},
        {"kind: Route\nmetadata: {name: r}\nspec: {match: {models: [7]}, upstream: {address: "
         "'h:1'}}\n",
         "item 0 must be a model name"},
        {"kind: Route\nmetadata: {name: r}\nspec: {match: {path: /x}, upstream: {address: "
         "'h:1'}}\n",
         "spec.match"},
        {"kind: Route\nmetadata: {name: r}\nspec: {match: {}, upstream: {address: 'h:1'}}\n",
         "spec.match.pathPrefix: required"},
        {"kind: Route\nmetadata: {name: r}\nspec: {match: {models: [a]}, upstream: {address: "
         "'h:1'}}\n",
         NULL},
        {"kind: Tenant\nmetadata: {name: t}\nspec: {models: [a, 'b-*']}\n", NULL},
        {"kind: Tenant\nmetadata: {name: t}\nspec: {models: a}\n", "spec.models: must be"},
        {"kind: Tenant\nmetadata: {name: t}\nspec: {models: [a], apiKeys: [{sha256: " KEY_ZERO
         ", name: k, models: [b]}]}\n",
         "key k: \"b\" is not within the tenant's spec.models"},
        {"kind: Tenant\nmetadata: {name: t}\nspec: {models: ['b-*'], apiKeys: [{sha256: " KEY_ZERO
         ", name: k, models: ['b*']}]}\n",
         "\"b*\" is not within"},
        {"kind: Tenant\nmetadata: {name: t}\nspec: {models: ['b-*'], apiKeys: [{sha256: " KEY_ZERO
         ", name: k, models: ['b-x-*', b-y]}]}\n",
         NULL},
        {"kind: Tenant\nmetadata: {name: t}\nspec: {apiKeys: [{sha256: " KEY_ZERO
         ", models: [b]}]}\n",
         "a key with its own models needs a name"},
        {"kind: Tenant\nmetadata: {name: t}\nspec: {gateway: {models: [{model: a, concurrency: 2},"
         " {model: 'b-*', rate: {cost: 5, per: 1m}}]}}\n",
         NULL},
        {"kind: Tenant\nmetadata: {name: t}\nspec: {gateway: {models: [{model: a}]}}\n",
         "spec.gateway.models[0]: needs a rate or a concurrency"},
        {"kind: Tenant\nmetadata: {name: t}\nspec: {gateway: {models: [{concurrency: 1}]}}\n",
         "spec.gateway.models[0].model: required"},
        {"kind: Tenant\nmetadata: {name: t}\nspec: {gateway: {models: [{model: a, concurrency: 1},"
         " {model: a, concurrency: 2}]}}\n",
         "\"a\" is listed twice"},
        {"kind: Tenant\nmetadata: {name: t}\nspec: {gateway: {models: [{model: a, concurrency: 0}]}}\n",
         "spec.gateway.models[0].concurrency"},
        {"kind: Tenant\nmetadata: {name: t}\nspec: {gateway: {models: [{model: a, budget: 1}]}}\n",
         "budget"},
        {"kind: Tenant\nmetadata: {name: t}\nspec: {gateway: {models: [{model: a, rate: {per: 1s}}]}}\n",
         "spec.gateway.models[0].rate.cost: required"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char y[1024];
        snprintf(y, sizeof y, "apiVersion: tenantd.dev/v1alpha1\n%s", cases[i].yaml);
        td_err err;
        err.msg[0] = '\0';
        td_config *c = NULL;
        td_status st = td_config_load_text("m.yaml", y, strlen(y), &c, &err);
        if (cases[i].msg ? st == TD_OK || !strstr(err.msg, cases[i].msg) : st != TD_OK)
            fail_msg("case %zu: st %d msg '%s'", i, st, err.msg);
        td_config_unref(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pattern),
        cmocka_unit_test(test_select_and_access),
        cmocka_unit_test(test_body_model),
        cmocka_unit_test(test_model_label),
        cmocka_unit_test(test_error_type),
        cmocka_unit_test(test_config_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
