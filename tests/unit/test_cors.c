/* test_cors.c - a Route's CORS policy (gateway/cors.c), table-driven: which
 * origins it allows, the preflight answer and the lines of an actual
 * response for each, the config's checks of spec.cors (with the field
 * named), and which Route's policy a path gets before its route is known. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/cors.h"
#include "gateway/gateway.h"

#include "testutil.h"

/* The policy of spec.cors written as JSON; fails the test if it is refused. */
static td_gw_cors *policy(const char *json)
{
    json_error_t jerr;
    json_t *j = json_loads(json, 0, &jerr);
    if (!j)
        fail_msg("bad JSON in the table: %s: %s", json, jerr.text);
    td_gw_cors *c = NULL;
    td_err err;
    if (td_gw_cors_build(j, "r", &c, &err) != TD_OK)
        fail_msg("%s: %s", json, err.msg);
    json_decref(j);
    return c;
}

#define EXACT "{\"allowOrigins\": [\"https://app.example.com\", \"http://localhost:3000\"]}"
#define WILD  "{\"allowOrigins\": [\"https://*.example.com\", \"https://*.example.org:8443\"]}"
#define ANY   "{\"allowOrigins\": [\"*\"]}"

static void test_origins(void **state)
{
    (void)state;
    static const struct {
        const char *name, *policy, *origin;
        bool allowed;
    } cases[] = {
        {"exact", EXACT, "https://app.example.com", true},
        {"exact, other case", EXACT, "HTTPS://APP.Example.com", true},
        {"exact with port", EXACT, "http://localhost:3000", true},
        {"other port", EXACT, "http://localhost:3001", false},
        {"default port written out is another origin", EXACT, "https://app.example.com:443",
         false},
        {"other scheme", EXACT, "http://app.example.com", false},
        {"a prefix of an allowed one", EXACT, "https://app.example.co", false},
        {"an allowed one as prefix", EXACT, "https://app.example.com.evil.io", false},
        {"with a path", EXACT, "https://app.example.com/", false},
        {"null origin", EXACT, "null", false},
        {"empty", EXACT, "", false},
        {"a control byte", EXACT, "https://app.example.com\r", false},
        {"subdomain", WILD, "https://a.example.com", true},
        {"two labels deep", WILD, "https://a.b.example.com", true},
        {"the domain itself", WILD, "https://example.com", false},
        {"a look-alike domain", WILD, "https://aexample.com", false},
        {"empty label", WILD, "https://.example.com", false},
        {"other scheme on a pattern", WILD, "http://a.example.com", false},
        {"pattern port must match", WILD, "https://a.example.org:8443", true},
        {"pattern without the port", WILD, "https://a.example.org", false},
        {"a port on a pattern without one", WILD, "https://a.example.com:8443", false},
        {"a path hidden in the label", WILD, "https://a/b.example.com", false},
        {"any", ANY, "https://whoever.example", true},
        {"any: null", ANY, "null", true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        td_gw_cors *c = policy(cases[i].policy);
        if (td_gw_cors_origin_allowed(c, cases[i].origin) != cases[i].allowed)
            fail_msg("%s: %s under %s: want %d", cases[i].name, cases[i].origin, cases[i].policy,
                     cases[i].allowed);
        td_gw_cors_destroy(c);
    }
    char longer[400];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    memcpy(longer, "https://", 8);
    td_gw_cors *c = policy(ANY);
    assert_false(td_gw_cors_origin_allowed(c, longer)); /* over 300 bytes */
    assert_false(td_gw_cors_origin_allowed(c, NULL));
    assert_false(td_gw_cors_origin_allowed(NULL, "https://a"));
    td_gw_cors_destroy(c);
}

#define FULL                                                                                       \
    "{\"allowOrigins\": [\"https://app.example.com\"], \"allowMethods\": [\"GET\", \"POST\"], "   \
    "\"allowHeaders\": [\"authorization\", \"content-type\"], \"exposeHeaders\": "                \
    "[\"x-trace-id\", \"X-Request-Id\"], \"maxAge\": 600, \"allowCredentials\": true}"
#define STARS                                                                                      \
    "{\"allowOrigins\": [\"*\"], \"allowMethods\": [\"*\"], \"allowHeaders\": [\"*\"], "          \
    "\"exposeHeaders\": [\"*\"]}"
#define STARS_CRED                                                                                 \
    "{\"allowOrigins\": [\"https://app.example.com\"], \"allowMethods\": [\"*\"], "               \
    "\"allowHeaders\": [\"*\"], \"allowCredentials\": true}"
#define ORIGIN "https://app.example.com"

static void test_preflight(void **state)
{
    (void)state;
    static const struct {
        const char *name, *policy, *origin, *method, *headers;
        bool allowed;
        const char *lines;
    } cases[] = {
        {"everything configured", FULL, ORIGIN, "POST", "authorization", true,
         "Access-Control-Allow-Origin: " ORIGIN "\r\n"
         "Access-Control-Allow-Methods: GET, POST\r\n"
         "Access-Control-Allow-Headers: authorization, content-type\r\n"
         "Access-Control-Max-Age: 600\r\n"
         "Access-Control-Allow-Credentials: true\r\n"
         "Vary: Origin\r\n"},
        /* the browser checks the method and headers against the lists, as
         * with Envoy: the answer describes the policy */
        {"a method outside the list", FULL, ORIGIN, "DELETE", NULL, true,
         "Access-Control-Allow-Origin: " ORIGIN "\r\n"
         "Access-Control-Allow-Methods: GET, POST\r\n"
         "Access-Control-Allow-Headers: authorization, content-type\r\n"
         "Access-Control-Max-Age: 600\r\n"
         "Access-Control-Allow-Credentials: true\r\n"
         "Vary: Origin\r\n"},
        {"denied origin", FULL, "https://evil.example", "POST", NULL, false, "Vary: Origin\r\n"},
        {"origins only", EXACT, ORIGIN, "POST", "authorization", true,
         "Access-Control-Allow-Origin: " ORIGIN "\r\nVary: Origin\r\n"},
        {"stars: * origin, asked method and headers echoed", STARS, "https://x.example", "PATCH",
         "authorization, x-trace", true,
         "Access-Control-Allow-Origin: *\r\n"
         "Access-Control-Allow-Methods: PATCH\r\n"
         "Access-Control-Allow-Headers: authorization, x-trace\r\n"
         "Vary: Origin\r\n"},
        {"stars, nothing asked: no header lists", STARS, "https://x.example", "GET", NULL, true,
         "Access-Control-Allow-Origin: *\r\nAccess-Control-Allow-Methods: GET\r\n"
         "Vary: Origin\r\n"},
        {"stars with credentials: the origin, echoes", STARS_CRED, ORIGIN, "PUT", "authorization",
         true,
         "Access-Control-Allow-Origin: " ORIGIN "\r\n"
         "Access-Control-Allow-Methods: PUT\r\n"
         "Access-Control-Allow-Headers: authorization\r\n"
         "Access-Control-Allow-Credentials: true\r\n"
         "Vary: Origin\r\n"},
        {"an asked header list with CR LF is not echoed", STARS, "https://x.example", "GET",
         "a\r\nSet-Cookie: x", true,
         "Access-Control-Allow-Origin: *\r\nAccess-Control-Allow-Methods: GET\r\n"
         "Vary: Origin\r\n"},
        {"an asked method that is no token is not echoed", STARS, "https://x.example", "GE T",
         NULL, true, "Access-Control-Allow-Origin: *\r\nVary: Origin\r\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        td_gw_cors *c = policy(cases[i].policy);
        char out[TD_GW_CORS_HEADERS_MAX];
        bool got = td_gw_cors_preflight(c, cases[i].origin, cases[i].method, cases[i].headers,
                                        out, sizeof out);
        if (got != cases[i].allowed || strcmp(out, cases[i].lines) != 0)
            fail_msg("%s: got %d\n%s\nwant %d\n%s", cases[i].name, got, out, cases[i].allowed,
                     cases[i].lines);
        td_gw_cors_destroy(c);
    }
}

static void test_actual(void **state)
{
    (void)state;
    static const struct {
        const char *name, *policy, *origin, *lines;
    } cases[] = {
        {"credentials, exposed headers (one of tenantd's once)", FULL, ORIGIN,
         "Access-Control-Allow-Origin: " ORIGIN "\r\n"
         "Access-Control-Allow-Credentials: true\r\n"
         "Access-Control-Expose-Headers: x-trace-id, " TD_GW_CORS_OWN_EXPOSED "\r\n"
         "Vary: Origin\r\n"},
        {"origins only: tenantd's own headers exposed", EXACT, ORIGIN,
         "Access-Control-Allow-Origin: " ORIGIN "\r\n"
         "Access-Control-Expose-Headers: " TD_GW_CORS_OWN_EXPOSED "\r\n"
         "Vary: Origin\r\n"},
        {"stars", STARS, "https://x.example",
         "Access-Control-Allow-Origin: *\r\nAccess-Control-Expose-Headers: *\r\n"
         "Vary: Origin\r\n"},
        {"denied origin: nothing", FULL, "https://evil.example", ""},
        {"no Origin: nothing", FULL, NULL, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        td_gw_cors *c = policy(cases[i].policy);
        char out[TD_GW_CORS_HEADERS_MAX];
        size_t n = td_gw_cors_actual(c, cases[i].origin, out, sizeof out);
        if (n != strlen(cases[i].lines) || strcmp(out, cases[i].lines) != 0)
            fail_msg("%s: got\n%s\nwant\n%s", cases[i].name, out, cases[i].lines);
        td_gw_cors_destroy(c);
    }
    char out[8];
    assert_int_equal(td_gw_cors_actual(NULL, ORIGIN, out, sizeof out), 0);
}

static const char route_head[] = "apiVersion: tenantd.dev/v1alpha1\nkind: Route\n"
                                 "metadata: {name: r}\nspec:\n  match: {pathPrefix: /v1/}\n"
                                 "  upstream: {address: \"127.0.0.1:9\"}\n  cors: ";

static void test_validate(void **state)
{
    (void)state;
    static const struct {
        const char *name, *cors, *err; /* err NULL: accepted */
    } cases[] = {
        {"full", "{allowOrigins: [\"https://a.example\"], allowMethods: [GET, POST], "
                 "allowHeaders: [authorization], exposeHeaders: [x-request-id], maxAge: 5, "
                 "allowCredentials: true}",
         NULL},
        {"wildcard subdomain, IPv6, port", "{allowOrigins: [\"https://*.a.example\", "
                                           "\"http://[::1]:8080\", \"http://localhost:3000\"]}",
         NULL},
        {"stars without credentials", "{allowOrigins: ['*'], allowHeaders: ['*'], "
                                      "exposeHeaders: ['*'], allowMethods: ['*']}",
         NULL},
        {"not a mapping", "[x]", "Route r: spec.cors: must be a mapping"},
        {"no origins", "{allowMethods: [GET]}", "spec.cors.allowOrigins: required"},
        {"empty origins", "{allowOrigins: []}", "spec.cors.allowOrigins: required"},
        {"unknown field", "{allowOrigins: ['*'], allowOrigin: x}", "spec.cors: unknown field"},
        {"a path", "{allowOrigins: [\"https://a.example/app\"]}",
         "spec.cors.allowOrigins: item 0: \"https://a.example/app\" is not an origin"},
        {"no scheme", "{allowOrigins: [a.example]}", "spec.cors.allowOrigins: item 0"},
        {"star in the middle", "{allowOrigins: [\"https://a.*.example\"]}",
         "spec.cors.allowOrigins: item 0"},
        {"bad port", "{allowOrigins: [\"https://a.example:99999\"]}",
         "spec.cors.allowOrigins: item 0"},
        {"star with credentials", "{allowOrigins: ['*'], allowCredentials: true}",
         "spec.cors.allowOrigins: \"*\" cannot be used with allowCredentials: true"},
        {"expose star with credentials",
         "{allowOrigins: [\"https://a.example\"], exposeHeaders: ['*'], allowCredentials: true}",
         "spec.cors.exposeHeaders: \"*\" cannot be used with allowCredentials: true"},
        {"credentials not a boolean", "{allowOrigins: ['*'], allowCredentials: yes please}",
         "spec.cors.allowCredentials: must be true or false"},
        {"unknown method", "{allowOrigins: ['*'], allowMethods: [GET, FETCH]}",
         "spec.cors.allowMethods: item 1: \"FETCH\" is not one of"},
        {"star among methods", "{allowOrigins: ['*'], allowMethods: [GET, '*']}",
         "spec.cors.allowMethods: \"*\" stands alone"},
        {"a header name with a space", "{allowOrigins: ['*'], allowHeaders: [\"x y\"]}",
         "spec.cors.allowHeaders: item 0: \"x y\" is not a header name"},
        {"maxAge negative", "{allowOrigins: ['*'], maxAge: -1}", "spec.cors.maxAge"},
        {"maxAge over a day", "{allowOrigins: ['*'], maxAge: 86401}", "spec.cors.maxAge"},
    };
    td_err err;
    assert_int_equal(td_kinds_register_builtin(&err), TD_OK);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char yaml[1024];
        snprintf(yaml, sizeof yaml, "%s%s\n", route_head, cases[i].cors);
        td_config *c = NULL;
        err.msg[0] = '\0';
        td_status st = td_config_load_text("routes.yaml", yaml, strlen(yaml), &c, &err);
        if (!cases[i].err && st != TD_OK)
            fail_msg("%s: refused: %s", cases[i].name, err.msg);
        if (cases[i].err && (st == TD_OK || !strstr(err.msg, cases[i].err)))
            fail_msg("%s: want \"%s\", got %s", cases[i].name, cases[i].err,
                     st == TD_OK ? "accepted" : err.msg);
        if (cases[i].err && !strstr(err.msg, "routes.yaml:7"))
            fail_msg("%s: the message names no line: %s", cases[i].name, err.msg);
        td_config_unref(c);
    }
}

/* Before the route: a path's policy is its first route's with spec.cors,
 * among those up to the first that takes the path whatever the model. */
static void test_for_path(void **state)
{
    (void)state;
    static const char yaml[] =
        "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: big}\n"
        "spec: {match: {pathPrefix: /v1/, models: [big]}, upstream: {address: \"h:1\"},"
        " cors: {allowOrigins: [\"https://big.example\"]}}\n---\n"
        "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: any}\n"
        "spec: {match: {pathPrefix: /v1/}, upstream: {address: \"h:2\"},"
        " cors: {allowOrigins: [\"https://any.example\"]}}\n---\n"
        "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: nocors}\n"
        "spec: {match: {pathPrefix: /v1/embeddings}, upstream: {address: \"h:3\"}}\n---\n"
        "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: root}\n"
        "spec: {match: {pathPrefix: /}, upstream: {address: \"h:4\"},"
        " cors: {allowOrigins: [\"https://root.example\"]}}\n";
    static const struct {
        const char *path, *origin; /* origin NULL: no policy */
    } cases[] = {
        {"/v1/chat/completions", "https://big.example"}, /* the model route comes first */
        {"/v1/embeddings", NULL},                        /* its own route has none */
        {"/v1/embeddings/x", NULL},
        {"/other", "https://root.example"},
        {"/v1", "https://root.example"}, /* "/v1/" does not take "/v1" */
    };
    td_config *c = test_config("routes.yaml", yaml);
    td_gateway *g = NULL;
    td_err err;
    assert_int_equal(td_gateway_create(c, NULL, &g, &err), TD_OK);
    td_gw_config *held = NULL;
    const td_gw_config *v = td_gateway_config(g, &held);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const td_gw_cors *p = td_gw_cors_for_path(v, cases[i].path);
        if (!cases[i].origin ? p != NULL
                             : !p || !td_gw_cors_origin_allowed(p, cases[i].origin))
            fail_msg("%s: want the policy allowing %s", cases[i].path,
                     cases[i].origin ? cases[i].origin : "(none)");
    }
    td_gw_config_unref(held);
    td_gateway_destroy(g);
    td_config_unref(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_origins),  cmocka_unit_test(test_preflight),
        cmocka_unit_test(test_actual),   cmocka_unit_test(test_validate),
        cmocka_unit_test(test_for_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
