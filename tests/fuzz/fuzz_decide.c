/* fuzz_decide.c - libFuzzer target for the gateway's per-request decision
 * (gateway/decide.h): the input is a request's facts, one per line
 * (Authorization, method, path, X-Criticality, X-Request-Timeout-Ms,
 * X-Tenantd-Gpu-Seconds; an empty line is an absent header) and then its
 * body, decided by a gateway with keys, models, model limits, shadow
 * limits and budgets (one for models, a price by model), on a fake clock, through the steps io takes. Nothing
 * may crash or leak; a verdict is a forward to a route with a finite
 * estimate or a refusal with a known status and a code; what it holds is
 * given back. */
#include <math.h>
#include <openssl/sha.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/decide.h"
#include "core/config.h"
#include "core/reqpath.h"
#include "kinds/builtin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char platform_fmt[] =
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: team-a}\n"
    "spec:\n  apiKeys: [{sha256: '%s'}]\n"
    "  gateway: {rate: {cost: 1000, per: 1s, burst: 2000}, concurrency: 4}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: keyed}\n"
    "spec:\n  models: ['llama-*', bge-m3]\n"
    "  budgets: [{amount: 5, period: day}, {amount: 1, period: day, models: ['llama-3-*']}]\n"
    "  apiKeys: [{sha256: '%s', name: ci, models: [llama-3-8b], concurrency: 2,"
    " rate: {cost: 50, per: 1m, burst: 100}, criticality: sheddable_plus,"
    " budgets: [{amount: 1, period: day}, {amount: 2, period: month, enforcement: shadow}]}]\n"
    "  gateway: {models: [{model: llama-3-70b, concurrency: 1, rate: {cost: 100, per: 1m}}],"
    " enforcement: {rate: shadow}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: cust}\n"
    "spec: {tenancy: customer, models: [llama-3-8b], namespaces: [cust],"
    " apiKeys: [{sha256: '%s'}], gateway: {concurrency: 1, criticality: sheddable}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: big}\n"
    "spec: {match: {pathPrefix: /v1/chat/completions, models: [llama-3-70b]},"
    " upstream: {address: '127.0.0.1:9'}, cost: {model: tokens, maxOutputTokens: 512}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: small}\n"
    "spec: {match: {pathPrefix: /v1/chat/completions, models: [llama-3-8b, 'qwen-*']},"
    " upstream: {address: '127.0.0.1:10'}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: emb}\n"
    "spec: {match: {models: [bge-m3]}, upstream: {address: '127.0.0.1:11'}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: files}\n"
    "spec: {match: {pathPrefix: /v1/files}, methods: [GET, DELETE],"
    " upstream: {address: '127.0.0.1:12'}, cost: {model: requests}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: gpu}\n"
    "spec: {match: {pathPrefix: /gpu/}, upstream: {address: '127.0.0.1:13'},"
    " cost: {model: gpuSeconds}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: CostPolicy\nmetadata: {name: default}\n"
    "spec: {currency: EUR, prices: [{route: big, per1kTokens: '1'},"
    " {model: llama-3-70b, per1kTokensIn: '2', per1kTokensOut: '6'},"
    " {route: small, per1kTokens: '0.1'}, {route: emb, per1kTokens: '0.01'},"
    " {route: files, perRequest: '0.001'}, {route: gpu, perGPUHour: '2'}]}\n---\n"
    "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: gvisor}\nhandler: runsc\n";

static td_gateway *gw;
static td_gw_key_cache cache;
static uint64_t now_ns = 1000000000000ULL;

static void sha_hex(const char *s, char out[65])
{
    unsigned char d[32];
    SHA256((const unsigned char *)s, strlen(s), d);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* The gateway, built at the first input and kept (as a worker keeps its
 * gateway across requests). */
static td_gateway *gateway(void)
{
    if (gw)
        return gw;
    char a[65], ci[65], cust[65], yaml[sizeof platform_fmt + 3 * 64];
    sha_hex("key-a", a);
    sha_hex("key-ci", ci);
    sha_hex("key-cust", cust);
    snprintf(yaml, sizeof yaml, platform_fmt, a, ci, cust);
    td_config *c = NULL;
    td_err err;
    if (td_kinds_register_builtin(&err) != TD_OK ||
        td_config_load_text("fuzz.yaml", yaml, strlen(yaml), &c, &err) != TD_OK ||
        td_gateway_create(c, NULL, &gw, &err) != TD_OK) {
        fprintf(stderr, "fuzz_decide: %s\n", err.msg);
        abort();
    }
    td_config_unref(c);
    return gw;
}

/* The next line of [*p, end) into a malloc'd NUL-terminated string (NULL
 * when empty: an absent header); *p past its newline. */
static char *next_line(const char **p, const char *end)
{
    const char *nl = memchr(*p, '\n', (size_t)(end - *p));
    const char *e = nl ? nl : end;
    size_t n = (size_t)(e - *p);
    char *s = NULL;
    if (n && !memchr(*p, '\0', n) && (s = malloc(n + 1))) {
        memcpy(s, *p, n);
        s[n] = '\0';
    }
    *p = nl ? nl + 1 : end;
    return s;
}

static void check_verdict(const td_gw_verdict *v)
{
    if (v->status == 0) {
        if (!v->route || !isfinite(v->estimate) || v->estimate < 0 || v->crit > TD_CRIT_SHEDDABLE ||
            v->timeout_ns == 0)
            abort();
        return;
    }
    static const int known[] = {400, 403, 404, 405, 429};
    bool ok = false;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        ok = ok || v->status == known[i];
    if (!ok || !v->code || !v->reason || !memchr(v->message, '\0', sizeof v->message) ||
        (v->form == TD_GW_FORM_METHOD && !v->route) ||
        (v->form == TD_GW_FORM_BUDGET && !v->budget.refused.budget) ||
        (v->level == TD_GW_LEVEL_MODEL && v->form == TD_GW_FORM_LIMITED && !v->model_limit))
        abort();
}

static void decide(td_gateway *g, const td_gw_config *c, char *f[6], const char *body, size_t blen)
{
    const td_gw_key *k = NULL;
    const td_gw_tenant *t = td_gw_decide_auth(c, f[0], NULL, false, &cache, &k);
    const char *method = f[1] ? f[1] : "POST";
    if (!t || td_gw_method_refused(method) || !f[2])
        return;
    size_t n = 0, plen = 0;
    if (td_reqpath_normalize(f[2], strlen(f[2]), &n, &plen, NULL) != TD_OK)
        return;
    f[2][plen] = '\0';
    const td_gw_route *route = NULL;
    td_gw_path_verdict pv = td_gw_decide_path(c, t, k, method, f[2], &route);
    if (pv != TD_GW_PATH_ROUTE && pv != TD_GW_PATH_BY_MODEL)
        return;
    char model[256];
    td_gw_request rq = {c,           t,    k,      route,        pv == TD_GW_PATH_BY_MODEL,
                        method,      f[2], body,   blen,         f[3],
                        f[4],        f[5], now_ns, 1796212800LL, model,
                        sizeof model};
    td_gw_budget_hold hold = {0};
    td_gw_verdict v;
    td_gw_decide(g, &rq, &hold, &v);
    check_verdict(&v);
    if (strlen(model) >= sizeof model)
        abort();
    /* as io ends it: the budgets settled to the estimate, the holds back */
    td_gateway_budget_settle(g, t, k, &hold, v.status ? 0 : hold.reserved_nano);
    td_gw_charges_release(g, t, k, &v.charged, v.estimate, v.refund ? 0 : v.estimate, now_ns);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    td_gateway *g = gateway();
    const char *p = (const char *)data, *end = p + size;
    char *f[6];
    for (int i = 0; i < 6; i++)
        f[i] = next_line(&p, end);
    td_gw_config *held = NULL;
    const td_gw_config *c = td_gateway_config(g, &held);
    now_ns += 1000000; /* a millisecond between requests */
    decide(g, c, f, p, (size_t)(end - p));
    td_gw_config_unref(held);
    for (int i = 0; i < 6; i++)
        free(f[i]);
    return 0;
}
