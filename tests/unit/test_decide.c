/* test_decide.c - the gateway's per-request decision (decide.c) on a real
 * gateway built from a config, with a fake clock: one row per rule and
 * its order, from the credential to the budgets, each request taken
 * through the steps io takes (who, where, the rest), with the requests a
 * row makes first held as io would hold them; and the key cache across a
 * reload, and what the holds give back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/sha.h>

#include "gateway/decide.h"
#include "core/reqpath.h"

#include "testutil.h"

/* a row names only the fields it checks; the rest are zero */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

/* the tenants' API keys, in the order of platform_fmt's (sha_hex) */
static const char *const key_names[] = {"key-a",      "key-ci",  "key-cust", "key-slow",
                                        "key-narrow", "key-mod", "key-bud",  "key-shadow"};

#define NOW_NS 1000000000000ULL /* the limiters' fake clock */
#define NOW_S  1796212800LL     /* 2026-12-02T12:00:00Z */

static const char platform_fmt[] =
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: team-a}\n"
    "spec:\n  apiKeys: [{sha256: %s}]\n"
    "  gateway: {rate: {cost: 100000, per: 1s, burst: 100000}, concurrency: 8,"
    " criticality: critical}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: keyed}\n"
    "spec:\n  models: ['llama-*']\n"
    "  apiKeys: [{sha256: %s, name: ci, models: [llama-3-8b], concurrency: 1,"
    " rate: {cost: 20, per: 1h, burst: 20}, criticality: sheddable_plus}]\n"
    "  gateway: {rate: {cost: 100000, per: 1s, burst: 100000}, criticality: critical}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: cust}\n"
    "spec: {tenancy: customer, models: [llama-3-8b], namespaces: [cust],"
    " apiKeys: [{sha256: %s}]}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: slow}\n"
    "spec:\n  apiKeys: [{sha256: %s}]\n  gateway: {rate: {cost: 2, per: 1h, burst: 2}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: narrow}\n"
    "spec:\n  apiKeys: [{sha256: %s}]\n  gateway: {concurrency: 1}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: modeled}\n"
    "spec:\n  apiKeys: [{sha256: %s}]\n"
    "  gateway: {models: [{model: llama-3-70b, concurrency: 1},"
    " {model: 'llama-3-8b', rate: {cost: 1000, per: 1h, burst: 1000}}]}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: budgeted}\n"
    "spec:\n  apiKeys: [{sha256: %s}]\n  budgets: [{amount: 1, period: month}]\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: shadowed}\n"
    "spec:\n  apiKeys: [{sha256: %s}]\n"
    "  gateway: {rate: {cost: 2, per: 1h, burst: 2}, concurrency: 1,"
    " enforcement: shadow}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: big}\n"
    "spec: {match: {pathPrefix: /v1/chat/completions, models: [llama-3-70b]},"
    " upstream: {address: '127.0.0.1:9'}, cost: {model: tokens}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: small}\n"
    "spec: {match: {pathPrefix: /v1/chat/completions, models: [llama-3-8b]},"
    " upstream: {address: '127.0.0.1:10'}, cost: {model: tokens}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: files}\n"
    "spec: {match: {pathPrefix: /v1/files}, methods: [GET],"
    " upstream: {address: '127.0.0.1:11'}, cost: {model: requests}, timeout: 10s}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: req}\n"
    "spec: {match: {pathPrefix: /v1/completions}, upstream: {address: '127.0.0.1:12'},"
    " cost: {model: requests}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: CostPolicy\nmetadata: {name: default}\n"
    "spec: {currency: EUR, prices: [{route: req, perRequest: '1'},"
    " {route: files, perRequest: '1'}, {route: big, per1kTokens: '1'},"
    " {route: small, per1kTokens: '1'}]}\n---\n"
    "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: gvisor}\nhandler: runsc\n";

/* sha256 hex of s, quoted for YAML. */
static void sha_hex(const char *s, char out[67])
{
    unsigned char d[32];
    SHA256((const unsigned char *)s, strlen(s), d);
    out[0] = '\'';
    for (int i = 0; i < 32; i++)
        snprintf(out + 1 + 2 * i, 3, "%02x", d[i]);
    out[65] = '\'';
    out[66] = '\0';
}

/* The platform, with the keys of key_names, or without skip (NULL: none). */
static td_config *platform(const char *skip)
{
    char sha[8][67];
    for (int i = 0; i < 8; i++) {
        sha_hex(key_names[i], sha[i]);
        if (skip && strcmp(skip, key_names[i]) == 0)
            sha_hex("a key nobody has", sha[i]);
    }
    static char yaml[sizeof platform_fmt + 8 * 70];
    snprintf(yaml, sizeof yaml, platform_fmt, sha[0], sha[1], sha[2], sha[3], sha[4], sha[5],
             sha[6], sha[7]);
    return test_config("platform.yaml", yaml);
}

/* One request through io's steps; status 0 when forwarded, with v filled
 * by td_gw_decide (code: the head's refusals named as io names them). */
typedef struct {
    int status;
    const char *code;
    td_gw_verdict v;
    const td_gw_tenant *t;
    const td_gw_key *k;
    td_gw_budget_hold hold;
    char model[256];
} outcome;

typedef struct {
    const char *auth;     /* Authorization, NULL: none */
    const char *x_tenant; /* X-Tenant, NULL: none */
    bool demo;            /* --allow-x-tenant */
    const char *method, *path, *body;
    const char *crit, *timeout; /* X-Criticality, X-Request-Timeout-Ms */
} request;

static void decide(td_gateway *g, const request *q, uint64_t now_ns, outcome *o)
{
    td_gw_config *held = NULL;
    const td_gw_config *c = td_gateway_config(g, &held);
    memset(o, 0, sizeof *o);
    o->t = td_gw_decide_auth(c, q->auth, q->x_tenant, q->demo, NULL, &o->k);
    if (!o->t) {
        o->status = 401, o->code = "unauthorized";
        goto out;
    }
    if (td_gw_method_refused(q->method)) {
        o->status = 405, o->code = "method_not_allowed";
        goto out;
    }
    char path[256];
    size_t n = 0, plen = 0;
    snprintf(path, sizeof path, "%s", q->path);
    if (td_reqpath_normalize(path, strlen(path), &n, &plen, NULL) != TD_OK)
        fail_msg("%s: not a path", q->path);
    path[plen] = '\0';
    const td_gw_route *route = NULL;
    switch (td_gw_decide_path(c, o->t, o->k, q->method, path, &route)) {
    case TD_GW_PATH_MODELS_LIST:
        o->status = 200, o->code = "models_list";
        goto out;
    case TD_GW_PATH_NO_ROUTE:
        o->status = 404, o->code = "no_route";
        goto out;
    case TD_GW_PATH_METHOD:
        o->status = 405, o->code = "method_not_allowed";
        goto out;
    default:
        break;
    }
    const char *body = q->body ? q->body : "";
    td_gw_request rq = {c,      o->t,  o->k,         route,          route == NULL, q->method,
                        path,   body,  strlen(body), q->crit,        q->timeout,    NULL,
                        now_ns, NOW_S, o->model,     sizeof o->model};
    td_gw_decide(g, &rq, &o->hold, &o->v);
    o->status = o->v.status;
    o->code = o->v.status ? o->v.code : o->v.route->name;
out:
    td_gw_config_unref(held);
}

#define CHAT "/v1/chat/completions"
#define B70  "{\"model\":\"llama-3-70b\",\"max_tokens\":10,\"prompt\":\"hi\"}"
#define B8   "{\"model\":\"llama-3-8b\",\"max_tokens\":10,\"prompt\":\"hi\"}"
#define BQ   "{\"model\":\"qwen-2\",\"max_tokens\":10,\"prompt\":\"hi\"}"

enum { RETRY_NONE, RETRY_SOME, RETRY_NEVER };

typedef struct {
    const char *name;
    request q;
    int prior;        /* the same request decided (and held) this many times first */
    int status;       /* 0: forwarded */
    const char *code; /* the refusal's code, or the route forwarded to */
    const char *reason;
    td_gw_level level;
    const char *more; /* forwarded: the class; refused: a part of the message (NULL: none) */
    int retry;
    const char *shadow; /* the shadow limit noted, or NULL */
} row;

#define BEARER(k) "Bearer " k

/* clang-format off */
static const row rows[] = {
    /* who */
    {"no key", {NULL, NULL, false, "POST", "/v1/completions", "{}"}, 0, 401, "unauthorized"},
    {"bad key", {BEARER("key-nope"), NULL, false, "POST", "/v1/completions", "{}"}, 0, 401,
     "unauthorized"},
    {"not Bearer", {"Basic key-a", NULL, false, "POST", "/v1/completions", "{}"}, 0, 401,
     "unauthorized"},
    {"bearer, any case, spaces", {"bearer   key-a", NULL, false, "POST", "/v1/completions", "{}"},
     0, 0, "req", NULL, TD_GW_LEVEL_NONE, "critical"},
    {"X-Tenant outside demo mode", {NULL, "team-a", false, "POST", "/v1/completions", "{}"}, 0,
     401, "unauthorized"},
    {"X-Tenant in demo mode", {NULL, "team-a", true, "POST", "/v1/completions", "{}"}, 0, 0,
     "req"},
    {"a key wins over X-Tenant", {BEARER("key-nope"), "team-a", true, "POST", "/v1/completions"},
     0, 401, "unauthorized"},
    /* where */
    {"CONNECT on any route", {BEARER("key-a"), NULL, false, "CONNECT", "/v1/completions"}, 0,
     405, "method_not_allowed"},
    {"TRACE on any route", {BEARER("key-a"), NULL, false, "TRACE", "/v1/files"}, 0, 405,
     "method_not_allowed"},
    {"unknown route", {BEARER("key-a"), NULL, false, "POST", "/v2/nothing", "{}"}, 0, 404,
     "no_route"},
    {"method the route does not forward", {BEARER("key-a"), NULL, false, "POST", "/v1/files/x"},
     0, 405, "method_not_allowed"},
    {"GET /v1/models answered here", {BEARER("key-a"), NULL, false, "GET", "/v1/models"}, 0, 200,
     "models_list"},
    /* the body's model and the route by model */
    {"route by model", {BEARER("key-a"), NULL, false, "POST", CHAT, B70}, 0, 0, "big"},
    {"route by model, another", {BEARER("key-a"), NULL, false, "POST", CHAT, B8}, 0, 0, "small"},
    {"no model", {BEARER("key-a"), NULL, false, "POST", CHAT, "{\"prompt\":\"x\"}"}, 0, 400,
     "model_required", "model_required", TD_GW_LEVEL_ROUTE, "names no model"},
    {"body not JSON", {BEARER("key-a"), NULL, false, "POST", CHAT, "not json"}, 0, 400,
     "bad_request", "bad_request", TD_GW_LEVEL_NONE},
    {"model not served: 404", {BEARER("key-a"), NULL, false, "POST", CHAT, BQ}, 0, 404,
     "model_not_found", "model_not_found", TD_GW_LEVEL_ROUTE, "`qwen-2` does not exist"},
    {"by model, method", {BEARER("key-a"), NULL, false, "PUT", CHAT, B70}, 0, 405,
     "method_not_allowed", "method_not_allowed", TD_GW_LEVEL_ROUTE},
    /* the models a tenant and key may use */
    {"key narrower than its tenant", {BEARER("key-ci"), NULL, false, "POST", CHAT, B70}, 0, 403,
     "model_not_allowed", "model_not_allowed", TD_GW_LEVEL_KEY,
     "this key of tenant keyed may not use the model `llama-3-70b`"},
    {"key's own model", {BEARER("key-ci"), NULL, false, "POST", CHAT, B8}, 0, 0, "small", NULL,
     TD_GW_LEVEL_NONE, "sheddable_plus"},
    {"customer tier: 404 as if unknown", {BEARER("key-cust"), NULL, false, "POST", CHAT, B70}, 0,
     404, "model_not_found", "model_not_allowed", TD_GW_LEVEL_TENANT, "does not exist"},
    {"listed tenant names no model", {BEARER("key-ci"), NULL, false, "POST", "/v1/completions",
     "{\"prompt\":\"x\"}"}, 0, 403, "model_not_allowed", "model_not_allowed", TD_GW_LEVEL_KEY,
     "tenant keyed may use only the models it lists"},
    {"customer names no model: 404", {BEARER("key-cust"), NULL, false, "POST", "/v1/completions",
     "{\"prompt\":\"x\"}"}, 0, 404, "model_not_found", "model_not_allowed", TD_GW_LEVEL_TENANT},
    {"listed tenant, bodyless GET", {BEARER("key-cust"), NULL, false, "GET", "/v1/files/x"}, 0, 0,
     "files"},
    /* inputs */
    {"X-Criticality lowers", {BEARER("key-a"), NULL, false, "POST", "/v1/completions", "{}",
     "sheddable"}, 0, 0, "req", NULL, TD_GW_LEVEL_NONE, "sheddable"},
    {"X-Criticality never raises", {BEARER("key-ci"), NULL, false, "POST", CHAT, B8,
     "critical_plus"}, 0, 0, "small", NULL, TD_GW_LEVEL_NONE, "sheddable_plus"},
    {"X-Criticality unknown", {BEARER("key-a"), NULL, false, "POST", "/v1/completions", "{}",
     "urgent"}, 0, 400, "bad_request", "bad_request", TD_GW_LEVEL_NONE, "X-Criticality must be"},
    {"X-Request-Timeout-Ms not a number", {BEARER("key-a"), NULL, false, "POST",
     "/v1/completions", "{}", NULL, "-1"}, 0, 400, "bad_request", "bad_request",
     TD_GW_LEVEL_NONE, "X-Request-Timeout-Ms"},
    {"estimate of a bad body", {BEARER("key-a"), NULL, false, "POST", CHAT,
     "{\"model\":\"llama-3-70b\",\"max_tokens\":\"many\"}"}, 0, 400, "bad_request",
     "bad_request", TD_GW_LEVEL_NONE},
    /* limits, in order */
    {"key concurrency", {BEARER("key-ci"), NULL, false, "POST", CHAT, B8}, 1, 429,
     "concurrency_limited", "concurrency_limited", TD_GW_LEVEL_KEY, NULL, RETRY_SOME},
    {"tenant concurrency", {BEARER("key-narrow"), NULL, false, "POST", "/v1/completions", "{}"},
     1, 429, "concurrency_limited", "concurrency_limited", TD_GW_LEVEL_TENANT, NULL, RETRY_SOME},
    {"tenant rate, retry-after", {BEARER("key-slow"), NULL, false, "POST", "/v1/completions",
     "{}"}, 2, 429, "rate_limited", "rate_limited", TD_GW_LEVEL_TENANT, NULL, RETRY_SOME},
    {"cost exceeds the burst", {BEARER("key-slow"), NULL, false, "POST", CHAT, B70}, 0, 429,
     "cost_exceeds_burst", "rate_limited", TD_GW_LEVEL_TENANT, NULL, RETRY_NEVER},
    {"key rate before tenant rate", {BEARER("key-ci"), NULL, false, "POST", CHAT,
     "{\"model\":\"llama-3-8b\",\"max_tokens\":50}"}, 0, 429, "cost_exceeds_burst",
     "rate_limited", TD_GW_LEVEL_KEY, NULL, RETRY_NEVER},
    {"per-model concurrency", {BEARER("key-mod"), NULL, false, "POST", CHAT, B70}, 1, 429,
     "concurrency_limited", "concurrency_limited", TD_GW_LEVEL_MODEL, NULL, RETRY_SOME},
    {"per-model rate", {BEARER("key-mod"), NULL, false, "POST", CHAT,
     "{\"model\":\"llama-3-8b\",\"max_tokens\":400,\"prompt\":\"hi\"}"}, 2, 429, "rate_limited",
     "rate_limited", TD_GW_LEVEL_MODEL, NULL, RETRY_SOME},
    {"other model, no model limit", {BEARER("key-mod"), NULL, false, "POST", "/v1/completions",
     "{}"}, 3, 0, "req"},
    {"budget exceeded", {BEARER("key-bud"), NULL, false, "POST", "/v1/completions", "{}"}, 1, 429,
     "budget_exceeded", "budget_exceeded", TD_GW_LEVEL_TENANT},
    {"budget room", {BEARER("key-bud"), NULL, false, "POST", "/v1/completions", "{}"}, 0, 0,
     "req"},
    {"shadow concurrency and rate go on", {BEARER("key-shadow"), NULL, false, "POST",
     "/v1/completions", "{}"}, 2, 0, "req", NULL, TD_GW_LEVEL_NONE, NULL, RETRY_NONE,
     "concurrency_limited"},
};
/* clang-format on */

static void check_row(const row *w, const outcome *o)
{
    if (o->status != w->status || strcmp(o->code, w->code) != 0)
        fail_msg("%s: got %d %s, want %d %s (%s)", w->name, o->status, o->code, w->status, w->code,
                 o->v.status ? o->v.message : "");
    const td_gw_verdict *v = &o->v;
    if (!o->t)
        return;
    if (w->status == 0) {
        if (w->more && strcmp(td_criticality_name(v->crit), w->more) != 0)
            fail_msg("%s: class %s, want %s", w->name, td_criticality_name(v->crit), w->more);
        if ((w->shadow || v->shadow) &&
            (!w->shadow || !v->shadow || strcmp(w->shadow, v->shadow) != 0))
            fail_msg("%s: shadow %s, want %s", w->name, v->shadow ? v->shadow : "-",
                     w->shadow ? w->shadow : "-");
        return;
    }
    if (!w->reason)
        return; /* refused at the head */
    if (strcmp(v->reason, w->reason) != 0 || v->level != w->level)
        fail_msg("%s: reason %s level %d, want %s %d", w->name, v->reason, v->level, w->reason,
                 w->level);
    if (w->more && !strstr(v->message, w->more))
        fail_msg("%s: message \"%s\" lacks \"%s\"", w->name, v->message, w->more);
    int retry = v->form != TD_GW_FORM_LIMITED           ? RETRY_NONE
                : v->retry_after_ns == TD_LIMITER_NEVER ? RETRY_NEVER
                : v->retry_after_ns > 0                 ? RETRY_SOME
                                                        : RETRY_NONE;
    if (retry != w->retry)
        fail_msg("%s: retry kind %d, want %d (%llu ns)", w->name, retry, w->retry,
                 (unsigned long long)v->retry_after_ns);
}

/* Every row on a fresh gateway: prior requests held (their concurrency
 * and rate charges stay), then the row's request, then all given back. */
static void test_rows(void **state)
{
    (void)state;
    td_config *c = platform(NULL);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row *w = &rows[i];
        td_gateway *g = NULL;
        td_err err;
        assert_int_equal(td_gateway_create(c, NULL, &g, &err), TD_OK);
        outcome prior[4], o;
        int np = w->prior < 4 ? w->prior : 4;
        for (int j = 0; j < np; j++) {
            decide(g, &w->q, NOW_NS, &prior[j]);
            if (prior[j].status != 0 && !w->shadow)
                fail_msg("%s: prior request %d refused: %d %s", w->name, j, prior[j].status,
                         prior[j].code);
        }
        decide(g, &w->q, NOW_NS + 1000, &o);
        check_row(w, &o);
        td_gw_charges_release(g, o.t, o.k, &o.v.charged, o.v.estimate, 0, NOW_NS);
        for (int j = 0; j < np; j++)
            td_gw_charges_release(g, prior[j].t, prior[j].k, &prior[j].v.charged,
                                  prior[j].v.estimate, prior[j].v.estimate, NOW_NS);
        td_gateway_destroy(g);
    }
    td_config_unref(c);
}

/* The refusals that follow a charge give it back: after a budget refusal
 * the tenant's rate, after a model-limit refusal the key's and tenant's,
 * and concurrency released brings the next request through. */
static void test_give_back(void **state)
{
    (void)state;
    td_config *c = platform(NULL);
    td_gateway *g = NULL;
    td_err err;
    assert_int_equal(td_gateway_create(c, NULL, &g, &err), TD_OK);
    request narrow = {BEARER("key-narrow"), NULL, false, "POST", "/v1/completions", "{}"};
    outcome a, b;
    for (int round = 0; round < 3; round++) {
        decide(g, &narrow, NOW_NS, &a);
        assert_int_equal(a.status, 0);
        assert_true(a.v.charged.conc_held && a.v.charged.rate_charged);
        decide(g, &narrow, NOW_NS, &b);
        assert_int_equal(b.status, 429);
        assert_false(b.v.charged.conc_held);
        td_gw_charges_release(g, a.t, a.k, &a.v.charged, a.v.estimate, a.v.estimate, NOW_NS);
        assert_false(a.v.charged.conc_held);
    }
    /* the model limit refuses after the tenant's rate was charged: refund */
    request mod = {BEARER("key-mod"), NULL, false, "POST", CHAT, B70};
    decide(g, &mod, NOW_NS, &a);
    assert_int_equal(a.status, 0);
    decide(g, &mod, NOW_NS, &b);
    assert_int_equal(b.status, 429);
    assert_true(b.v.refund && b.v.charged.rate_charged && !b.v.charged.model_conc_held);
    td_gw_charges_release(g, b.t, b.k, &b.v.charged, b.v.estimate, 0, NOW_NS);
    td_gw_charges_release(g, a.t, a.k, &a.v.charged, a.v.estimate, a.v.estimate, NOW_NS);
    decide(g, &mod, NOW_NS, &a);
    assert_int_equal(a.status, 0);
    td_gw_charges_release(g, a.t, a.k, &a.v.charged, a.v.estimate, a.v.estimate, NOW_NS);
    /* a budget's refusal holds nothing of the budgets; its reservation
     * price is the route's (1 EUR a request), settled back to nothing */
    request bud = {BEARER("key-bud"), NULL, false, "POST", "/v1/completions", "{}"};
    decide(g, &bud, NOW_NS, &a);
    assert_int_equal(a.status, 0);
    assert_int_equal(a.hold.reserved_nano, TD_MONEY_NANO);
    assert_int_equal(a.hold.n, 1);
    td_gateway_budget_settle(g, a.t, a.k, &a.hold, 0);
    td_gw_charges_release(g, a.t, a.k, &a.v.charged, a.v.estimate, 0, NOW_NS);
    decide(g, &bud, NOW_NS, &b); /* the settle to 0 left the room */
    assert_int_equal(b.status, 0);
    td_gateway_budget_settle(g, b.t, b.k, &b.hold, TD_MONEY_NANO);
    td_gw_charges_release(g, b.t, b.k, &b.v.charged, b.v.estimate, b.v.estimate, NOW_NS);
    decide(g, &bud, NOW_NS, &b);
    assert_int_equal(b.status, 429);
    assert_string_equal(b.v.code, "budget_exceeded");
    assert_int_equal(b.hold.n + b.hold.nkey, 0);
    assert_true(b.v.refund);
    td_gw_charges_release(g, b.t, b.k, &b.v.charged, b.v.estimate, 0, NOW_NS);
    /* the rate refusal's retry comes from the fake clock: later is sooner */
    request slow = {BEARER("key-slow"), NULL, false, "POST", "/v1/completions", "{}"};
    decide(g, &slow, NOW_NS, &a);
    decide(g, &slow, NOW_NS, &a);
    decide(g, &slow, NOW_NS, &a);
    assert_int_equal(a.status, 429);
    decide(g, &slow, NOW_NS + 600000000000ULL, &b);
    assert_int_equal(b.status, 429);
    assert_true(b.v.retry_after_ns < a.v.retry_after_ns);
    assert_true(a.v.retry_after_ns - b.v.retry_after_ns == 600000000000ULL);
    td_gateway_destroy(g);
    td_config_unref(c);
}

/* The key cache: the same key hits under the same view; a reload that
 * drops the key (revoked) makes it miss and refuse; a near miss never
 * hits; a key longer than the cache is looked up every time. */
static void test_key_cache(void **state)
{
    (void)state;
    td_config *c = platform(NULL), *revoked = platform("key-ci");
    td_gateway *g = NULL;
    td_err err;
    assert_int_equal(td_gateway_create(c, NULL, &g, &err), TD_OK);
    td_gw_config *held = NULL;
    const td_gw_config *v = td_gateway_config(g, &held);
    td_gw_key_cache cache;
    memset(&cache, 0, sizeof cache);
    const td_gw_key *k = NULL;
    const td_gw_tenant *t = td_gw_decide_auth(v, "Bearer key-ci", NULL, false, &cache, &k);
    assert_non_null(t);
    assert_string_equal(t->name, "keyed");
    assert_string_equal(k->name, "ci");
    assert_int_equal(cache.gen, v->generation);
    assert_ptr_equal(td_gw_decide_auth(v, "Bearer key-ci", NULL, false, &cache, &k), t);
    assert_null(td_gw_decide_auth(v, "Bearer key-cj", NULL, false, &cache, &k));
    assert_null(k);
    assert_int_equal(cache.gen, 0); /* a miss empties it */
    assert_ptr_equal(td_gw_decide_auth(v, "Bearer key-a", NULL, false, &cache, &k),
                     td_gw_tenant_by_name(v, "team-a"));
    assert_null(k); /* unnamed key: the tenant's limits only */
    assert_non_null(td_gw_decide_auth(v, "Bearer key-ci", NULL, false, &cache, &k));
    assert_int_equal(td_gateway_reload(g, revoked, &err), TD_OK);
    v = td_gateway_config(g, &held);
    assert_null(td_gw_decide_auth(v, "Bearer key-ci", NULL, false, &cache, &k));
    char longkey[400] = "Bearer ";
    memset(longkey + 7, 'x', 300);
    assert_null(td_gw_decide_auth(v, longkey, NULL, false, &cache, &k));
    assert_int_equal(cache.gen, 0);
    td_gw_config_unref(held);
    td_gateway_destroy(g);
    td_config_unref(c);
    td_config_unref(revoked);
}

/* td_gw_price_units: tokens at the dearer price, requests per request. */
static void test_price_units(void **state)
{
    (void)state;
    td_config *c = platform(NULL);
    td_gateway *g = NULL;
    td_err err;
    assert_int_equal(td_gateway_create(c, NULL, &g, &err), TD_OK);
    td_gw_config *held = NULL;
    const td_gw_config *v = td_gateway_config(g, &held);
    const td_gw_tenant *t = td_gw_tenant_by_name(v, "team-a");
    static const struct {
        const char *route;
        double units;
        int64_t nano;
    } cases[] = {
        {"req", 1, TD_MONEY_NANO},          {"req", 7, TD_MONEY_NANO}, /* a request is a request */
        {"big", 1000, TD_MONEY_NANO},       {"big", 1, TD_MONEY_NANO / 1000},
        {"big", 0.5, TD_MONEY_NANO / 1000}, /* tokens round up */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const td_gw_route *r = NULL;
        for (size_t j = 0; j < v->nroutes; j++)
            if (strcmp(v->routes[j].name, cases[i].route) == 0)
                r = &v->routes[j];
        assert_non_null(r);
        int64_t got = td_gw_price_units(v, r, t, NULL, cases[i].units);
        if (got != cases[i].nano)
            fail_msg("case %zu: %s %g units: %lld, want %lld", i, cases[i].route, cases[i].units,
                     (long long)got, (long long)cases[i].nano);
    }
    td_gw_config_unref(held);
    td_gateway_destroy(g);
    td_config_unref(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_give_back),
        cmocka_unit_test(test_key_cache),
        cmocka_unit_test(test_price_units),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
