/* test_budget_levels.c - budgets at two levels on a real gateway built from
 * a config: a key's own budgets and its tenant's reserved together, settled
 * together; the key's refusal named; the tenant's refusal rolling the key's
 * reservation back; shadow budgets noted and never refusing; other keys
 * held only to the tenant's; replay of ledger records by key name; budgets
 * for models (which hold a request, refusal naming the model, replay). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cost/chargeback.h"
#include "gateway/gateway.h"

#include "testutil.h"

#define N TD_MONEY_NANO
/* 2026-12-02T12:00:00Z, a Wednesday */
#define NOW 1796212800LL

static td_config *load(const char *y)
{
    return test_config("b.yaml", y);
}

/* sha256 of "k-ci", "k-web", "k-anon" (any 64 hex digits do here) */
#define SHA_CI   "1111111111111111111111111111111111111111111111111111111111111111"
#define SHA_WEB  "2222222222222222222222222222222222222222222222222222222222222222"
#define SHA_ANON "3333333333333333333333333333333333333333333333333333333333333333"

static const char platform[] =
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: team-a}\n"
    "spec:\n"
    "  budgets: [{amount: 10, period: month}, {amount: 8, period: day}]\n"
    "  apiKeys:\n"
    "  - {sha256: " SHA_CI ", name: ci, budgets: [{amount: 3, period: day},"
    " {amount: 5, period: month, enforcement: shadow}]}\n"
    "  - {sha256: " SHA_WEB ", name: web}\n"
    "  - {sha256: " SHA_ANON "}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: all}\n"
    "spec: {match: {pathPrefix: /}, upstream: {address: '127.0.0.1:9'}, cost: {model: requests}}\n"
    "---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: CostPolicy\nmetadata: {name: default}\n"
    "spec: {currency: EUR, prices: [{route: all, perRequest: '1'}]}\n";

typedef struct {
    td_config *cfg;
    td_gateway *g;
    td_gw_config *held;
    const td_gw_tenant *t;
    const td_gw_key *ci, *web, *anon;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->cfg = load(platform);
    td_err err;
    if (td_gateway_create(f->cfg, NULL, &f->g, &err) != TD_OK)
        fail_msg("%s", err.msg);
    const td_gw_config *c = td_gateway_config(f->g, &f->held);
    f->t = td_gw_tenant_by_name(c, "team-a");
    assert_non_null(f->t);
    assert_int_equal(f->t->nkeys, 3);
    for (size_t i = 0; i < f->t->nkeys; i++) {
        const td_gw_key *k = &f->t->keys[i];
        if (!k->name)
            f->anon = k;
        else if (strcmp(k->name, "ci") == 0)
            f->ci = k;
        else
            f->web = k;
    }
    assert_non_null(f->ci);
    assert_non_null(f->web);
    assert_non_null(f->anon);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    td_gw_config_unref(f->held);
    td_gateway_destroy(f->g);
    td_config_unref(f->cfg);
    free(f);
    return 0;
}

static int64_t tenant_spent(fixture *f, td_period p)
{
    return td_budgets_spent(td_gateway_budgets(f->g), f->t->slot, p, NOW);
}

static int64_t key_spent(fixture *f, const td_gw_key *k, td_period p)
{
    return td_budgets_spent(td_gateway_key_budgets(f->g), k->slot, p, NOW);
}

static void test_parsed(void **state)
{
    fixture *f = *state;
    assert_int_equal(f->ci->nbudgets, 2);
    assert_int_equal(f->ci->budgets[0].period, TD_PERIOD_DAY);
    assert_int_equal(f->ci->budgets[0].amount_nano, 3 * N);
    assert_false(f->ci->budgets[0].shadow);
    assert_int_equal(f->ci->budgets[1].period, TD_PERIOD_MONTH);
    assert_true(f->ci->budgets[1].shadow);
    assert_int_equal(f->web->nbudgets, 0);
    assert_int_equal(f->anon->nbudgets, 0);
}

/* Reserve and settle at both levels: each settle moves both by the same
 * amount, an unused request gives everything back. */
static void test_two_levels(void **state)
{
    fixture *f = *state;
    td_gw_budget_hold h;
    td_gw_budget_verdict v;
    assert_int_equal(td_gateway_budget_reserve(f->g, f->t, f->ci, NULL, 2 * N, NOW, &h, &v), TD_OK);
    assert_null(v.refused.budget);
    assert_int_equal(h.nkey, 2);
    assert_int_equal(h.n, 2);
    assert_int_equal(key_spent(f, f->ci, TD_PERIOD_DAY), 2 * N);
    assert_int_equal(key_spent(f, f->ci, TD_PERIOD_MONTH), 2 * N);
    assert_int_equal(tenant_spent(f, TD_PERIOD_DAY), 2 * N);
    assert_int_equal(tenant_spent(f, TD_PERIOD_MONTH), 2 * N);
    /* the real price was 1.5 */
    td_gateway_budget_settle(f->g, f->t, f->ci, &h, 3 * N / 2);
    assert_int_equal(h.n + h.nkey, 0);
    assert_int_equal(key_spent(f, f->ci, TD_PERIOD_DAY), 3 * N / 2);
    assert_int_equal(tenant_spent(f, TD_PERIOD_MONTH), 3 * N / 2);
    /* a request refused upstream costs nothing */
    assert_int_equal(td_gateway_budget_reserve(f->g, f->t, f->ci, NULL, N, NOW, &h, &v), TD_OK);
    td_gateway_budget_settle(f->g, f->t, f->ci, &h, 0);
    assert_int_equal(key_spent(f, f->ci, TD_PERIOD_DAY), 3 * N / 2);
    assert_int_equal(tenant_spent(f, TD_PERIOD_DAY), 3 * N / 2);
    /* another named key and an unnamed one count at the tenant only */
    assert_int_equal(td_gateway_budget_reserve(f->g, f->t, f->web, NULL, N, NOW, &h, &v), TD_OK);
    assert_int_equal(h.nkey, 0);
    td_gateway_budget_settle(f->g, f->t, f->web, &h, N);
    assert_int_equal(td_gateway_budget_reserve(f->g, f->t, f->anon, NULL, N, NOW, &h, &v), TD_OK);
    td_gateway_budget_settle(f->g, f->t, f->anon, &h, N);
    assert_int_equal(td_gateway_budget_reserve(f->g, f->t, NULL, NULL, N, NOW, &h, &v), TD_OK);
    td_gateway_budget_settle(f->g, f->t, NULL, &h, N);
    assert_int_equal(tenant_spent(f, TD_PERIOD_DAY), 3 * N / 2 + 3 * N);
    assert_int_equal(key_spent(f, f->ci, TD_PERIOD_DAY), 3 * N / 2);
    assert_int_equal(key_spent(f, f->web, TD_PERIOD_DAY), 0);
}

/* The key's day budget (3) refuses first and is named; nothing is left
 * reserved at either level; the tenant and another key go on. */
static void test_key_refuses(void **state)
{
    fixture *f = *state;
    td_gw_budget_hold h;
    td_gw_budget_verdict v;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(td_gateway_budget_reserve(f->g, f->t, f->ci, NULL, N, NOW, &h, &v), TD_OK);
        td_gateway_budget_settle(f->g, f->t, f->ci, &h, N);
    }
    assert_int_equal(td_gateway_budget_reserve(f->g, f->t, f->ci, NULL, N, NOW, &h, &v), TD_EQUOTA);
    assert_ptr_equal(v.refused.budget, &f->ci->budgets[0]);
    assert_ptr_equal(v.refused.key, f->ci);
    assert_int_equal(v.refused.spent_nano, 3 * N);
    assert_int_equal(h.n + h.nkey, 0);
    assert_int_equal(key_spent(f, f->ci, TD_PERIOD_DAY), 3 * N);
    assert_int_equal(key_spent(f, f->ci, TD_PERIOD_MONTH), 3 * N);
    assert_int_equal(tenant_spent(f, TD_PERIOD_DAY), 3 * N);
    /* a settle of the refused (empty) hold changes nothing */
    td_gateway_budget_settle(f->g, f->t, f->ci, &h, N);
    assert_int_equal(tenant_spent(f, TD_PERIOD_DAY), 3 * N);
    /* web still served, up to the tenant's day budget of 8 */
    for (int i = 0; i < 5; i++) {
        assert_int_equal(td_gateway_budget_reserve(f->g, f->t, f->web, NULL, N, NOW, &h, &v), TD_OK);
        td_gateway_budget_settle(f->g, f->t, f->web, &h, N);
    }
    assert_int_equal(td_gateway_budget_reserve(f->g, f->t, f->web, NULL, N, NOW, &h, &v), TD_EQUOTA);
    assert_ptr_equal(v.refused.budget, &f->t->budgets[1]);
    assert_null(v.refused.key);
    /* the next day ci starts over at its level, not at the tenant's month */
    assert_int_equal(td_gateway_budget_reserve(f->g, f->t, f->ci, NULL, N, NOW + 86400, &h, &v), TD_OK);
    td_gateway_budget_settle(f->g, f->t, f->ci, &h, N);
}

/* The tenant's budget refuses after the key's reserved: the key's
 * reservation is rolled back. */
static void test_tenant_refuses_rolls_back(void **state)
{
    fixture *f = *state;
    td_gw_budget_hold h;
    td_gw_budget_verdict v;
    /* web spends 7.5 of the tenant's day budget of 8 */
    assert_int_equal(td_gateway_budget_reserve(f->g, f->t, f->web, NULL, 15 * N / 2, NOW, &h, &v),
                     TD_OK);
    td_gateway_budget_settle(f->g, f->t, f->web, &h, 15 * N / 2);
    /* ci has room (0 of 3) but the tenant has 0.5 left */
    assert_int_equal(td_gateway_budget_reserve(f->g, f->t, f->ci, NULL, N, NOW, &h, &v), TD_EQUOTA);
    assert_ptr_equal(v.refused.budget, &f->t->budgets[1]);
    assert_null(v.refused.key);
    assert_int_equal(v.refused.spent_nano, 15 * N / 2);
    assert_int_equal(h.n + h.nkey, 0);
    assert_int_equal(key_spent(f, f->ci, TD_PERIOD_DAY), 0);
    assert_int_equal(key_spent(f, f->ci, TD_PERIOD_MONTH), 0);
    assert_int_equal(tenant_spent(f, TD_PERIOD_DAY), 15 * N / 2);
    assert_int_equal(tenant_spent(f, TD_PERIOD_MONTH), 15 * N / 2);
    /* a cheaper one fits both */
    assert_int_equal(td_gateway_budget_reserve(f->g, f->t, f->ci, NULL, N / 2, NOW, &h, &v), TD_OK);
    assert_int_equal(key_spent(f, f->ci, TD_PERIOD_DAY), N / 2);
    td_gateway_budget_settle(f->g, f->t, f->ci, &h, N / 2);
}

/* ci's month budget (5) is shadow: over it the request is reserved anyway
 * and the verdict lists it at the key level. */
static void test_shadow_never_refuses(void **state)
{
    fixture *f = *state;
    td_gw_budget_hold h;
    td_gw_budget_verdict v;
    int shadowed = 0;
    for (int day = 0; day < 3; day++)
        for (int i = 0; i < 2; i++) {
            assert_int_equal(
                td_gateway_budget_reserve(f->g, f->t, f->ci, NULL, 3 * N / 2, NOW + day * 86400, &h, &v),
                TD_OK);
            td_gateway_budget_settle(f->g, f->t, f->ci, &h, 3 * N / 2);
            if (v.nshadow) {
                assert_int_equal(v.nshadow, 1);
                assert_ptr_equal(v.shadow[0].budget, &f->ci->budgets[1]);
                assert_ptr_equal(v.shadow[0].key, f->ci);
                shadowed++;
            }
        }
    /* 6 x 1.5 = 9 in the month: the 4th (4.5 -> 6) and later are over 5 */
    assert_int_equal(shadowed, 3);
    assert_int_equal(td_budgets_spent(td_gateway_key_budgets(f->g), f->ci->slot, TD_PERIOD_MONTH,
                                      NOW + 2 * 86400),
                     9 * N);
}

/* Start-up replay: records carrying ci's name count at ci and the tenant,
 * others at the tenant only; a name not configured counts at the tenant. */
static void test_replay_by_key(void **state)
{
    fixture *f = *state;
    td_ledger_rec r;
    memset(&r, 0, sizeof r);
    r.kind = TD_LEDGER_REQUEST;
    snprintf(r.tenant, sizeof r.tenant, "team-a");
    snprintf(r.route, sizeof r.route, "all");
    snprintf(r.outcome, sizeof r.outcome, "ok");
    r.count = 1;
    r.gpu_used_milli = -1;
    r.start_ns = (NOW - 60) * 1000000000LL;
    r.end_ns = r.start_ns + 1000;
    snprintf(r.api_key, sizeof r.api_key, "ci");
    td_gateway_budget_replay(f->g, &r, NOW * 1000000000LL);
    td_gateway_budget_replay(f->g, &r, NOW * 1000000000LL);
    snprintf(r.api_key, sizeof r.api_key, "web");
    td_gateway_budget_replay(f->g, &r, NOW * 1000000000LL);
    snprintf(r.api_key, sizeof r.api_key, "gone");
    td_gateway_budget_replay(f->g, &r, NOW * 1000000000LL);
    snprintf(r.outcome, sizeof r.outcome, "rejected");
    snprintf(r.api_key, sizeof r.api_key, "ci");
    td_gateway_budget_replay(f->g, &r, NOW * 1000000000LL);
    assert_int_equal(key_spent(f, f->ci, TD_PERIOD_DAY), 2 * N);
    assert_int_equal(key_spent(f, f->ci, TD_PERIOD_MONTH), 2 * N);
    assert_int_equal(key_spent(f, f->web, TD_PERIOD_DAY), N);
    assert_int_equal(tenant_spent(f, TD_PERIOD_DAY), 4 * N);
    /* ci has 1 left of its day budget */
    td_gw_budget_hold h;
    td_gw_budget_verdict v;
    assert_int_equal(td_gateway_budget_reserve(f->g, f->t, f->ci, NULL, N, NOW, &h, &v), TD_OK);
    td_gateway_budget_settle(f->g, f->t, f->ci, &h, N);
    assert_int_equal(td_gateway_budget_reserve(f->g, f->t, f->ci, NULL, N, NOW, &h, &v), TD_EQUOTA);
    assert_ptr_equal(v.refused.key, f->ci);
}

/* Validation: a key budget above the tenant's of the same period names
 * both; budgets need a named key; bad periods are named. */
static void test_validation(void **state)
{
    (void)state;
    static const struct {
        const char *name, *keys, *want;
    } rows[] = {
        {"above the tenant's", "[{sha256: " SHA_CI ", name: ci, budgets: [{amount: 11, period: month}]}]",
         "key ci: its month budget 11 is above the tenant's month budget 10 (spec.budgets[0].amount)"},
        {"unnamed key", "[{sha256: " SHA_CI ", budgets: [{amount: 1, period: day}]}]",
         "a key with its own budgets needs a name"},
        {"bad period", "[{sha256: " SHA_CI ", name: ci, budgets: [{amount: 1, period: year}]}]",
         "spec.apiKeys[0].budgets[0].period"},
        {"bad enforcement",
         "[{sha256: " SHA_CI ", name: ci, budgets: [{amount: 1, period: day, enforcement: log}]}]",
         "spec.apiKeys[0].budgets[0].enforcement"},
        {"second budget of a period",
         "[{sha256: " SHA_CI ", name: ci, budgets: [{amount: 1, period: day}, {amount: 2, "
         "period: day}]}]",
         "a second budget for the period day"},
        {"negative", "[{sha256: " SHA_CI ", name: ci, budgets: [{amount: '-1', period: day}]}]",
         "negative"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char y[2048];
        snprintf(y, sizeof y,
                 "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: team-a}\n"
                 "spec:\n  budgets: [{amount: 10, period: month}]\n  apiKeys: %s\n",
                 rows[i].keys);
        td_manifest *m = NULL;
        td_err err;
        td_config_builder *b = NULL;
        assert_int_equal(td_manifest_parse("v.yaml", y, strlen(y), &m, &err), TD_OK);
        assert_int_equal(td_config_builder_create(NULL, &b, &err), TD_OK);
        td_status st = td_config_builder_add_manifest(b, m, &err);
        if (st == TD_OK || !strstr(err.msg, rows[i].want))
            fail_msg("%s: %s, message: %s", rows[i].name, td_strerror(st), err.msg);
        td_config_builder_destroy(b);
        td_manifest_destroy(m);
    }
    /* without a CostPolicy a key's budget cannot be priced */
    const char *y = "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: team-a}\n"
                    "spec:\n  apiKeys: [{sha256: " SHA_CI
                    ", name: ci, budgets: [{amount: 1, period: day}]}]\n";
    td_manifest *m = NULL;
    td_err err;
    td_config_builder *b = NULL;
    td_config *c = NULL;
    assert_int_equal(td_manifest_parse("v.yaml", y, strlen(y), &m, &err), TD_OK);
    assert_int_equal(td_config_builder_create(NULL, &b, &err), TD_OK);
    assert_int_equal(td_config_builder_add_manifest(b, m, &err), TD_OK);
    assert_int_equal(td_config_builder_finish(b, &c, &err), TD_EINVAL);
    assert_non_null(strstr(err.msg, "Tenant team-a: spec.apiKeys[0].budgets: there is no CostPolicy"));
    assert_null(c);
    td_config_builder_destroy(b);
    td_manifest_destroy(m);
}

/* ---- budgets for models ---- */

static const char model_platform[] =
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: team-m}\n"
    "spec:\n"
    "  budgets:\n"
    "  - {amount: 10, period: month}\n"
    "  - {amount: 2, period: day, models: [llama-70b]}\n"
    "  - {amount: 3, period: day, models: ['llama-*', qwen-72b], enforcement: shadow}\n"
    "  - {amount: 4, period: month, models: [llama-70b]}\n"
    "---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: all}\n"
    "spec: {match: {pathPrefix: /}, upstream: {address: '127.0.0.1:9'}, cost: {model: requests}}\n"
    "---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: CostPolicy\nmetadata: {name: default}\n"
    "spec: {currency: EUR, prices: [{route: all, perRequest: '1'}, {model: llama-70b, perRequest: '2'}]}\n";

/* Which model budgets hold a request, by its model; one row per case. */
static void test_model_budget_selection(void **state)
{
    (void)state;
    td_config *cfg = load(model_platform);
    td_gateway *g = NULL;
    td_err err;
    if (td_gateway_create(cfg, NULL, &g, &err) != TD_OK)
        fail_msg("%s", err.msg);
    td_gw_config *held = NULL;
    const td_gw_tenant *t = td_gw_tenant_by_name(td_gateway_config(g, &held), "team-m");
    assert_non_null(t);
    assert_int_equal(t->nbudgets, 1); /* the budget for all models */
    assert_int_equal(t->nmodel_budgets, 3);
    assert_string_equal(t->model_budgets[1].name, "llama-*,qwen-72b");
    assert_true(t->model_budgets[1].b.shadow);
    /* one slot per list of models: both llama-70b budgets share it */
    assert_int_equal(t->model_budgets[0].slot, t->model_budgets[2].slot);
    assert_int_not_equal(t->model_budgets[0].slot, t->model_budgets[1].slot);
    static const struct {
        const char *name, *model;
        bool applies[3];
    } rows[] = {
        {"exact and prefix", "llama-70b", {true, true, true}},
        {"prefix only", "llama-8b", {false, true, false}},
        {"second name", "qwen-72b", {false, true, false}},
        {"exact is not a prefix", "llama-70b-instruct", {false, true, false}},
        {"unlisted", "mistral-7b", {false, false, false}},
        {"no model", "", {false, false, false}},
        {"NULL model", NULL, {false, false, false}},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        for (int j = 0; j < 3; j++)
            if (td_gw_model_budget_applies(&t->model_budgets[j], rows[i].model) !=
                rows[i].applies[j]) {
                print_error("%s: budget %d\n", rows[i].name, j);
                bad++;
            }
    assert_int_equal(bad, 0);
    td_gw_config_unref(held);
    td_gateway_destroy(g);
    td_config_unref(cfg);
}

/* A model's budget refuses that model and names it, the other models go
 * on; a refusal gives back what was reserved; the tenant's budget still
 * holds every model; the ledger's records replay into the model budgets
 * of their model. */
static void test_model_budget_refuses(void **state)
{
    (void)state;
    td_config *cfg = load(model_platform);
    td_gateway *g = NULL;
    td_err err;
    if (td_gateway_create(cfg, NULL, &g, &err) != TD_OK)
        fail_msg("%s", err.msg);
    td_gw_config *held = NULL;
    const td_gw_tenant *t = td_gw_tenant_by_name(td_gateway_config(g, &held), "team-m");
    const td_gw_model_budget *m70 = &t->model_budgets[0], *mll = &t->model_budgets[1];
    td_gw_budget_hold h;
    td_gw_budget_verdict v;
    assert_int_equal(td_gateway_budget_reserve(g, t, NULL, "llama-70b", N, NOW, &h, &v), TD_OK);
    assert_int_equal(h.nmodel, 3);
    td_gateway_budget_settle(g, t, NULL, &h, N);
    assert_int_equal(td_gateway_model_budget_spent(g, m70, NOW, false), N);
    assert_int_equal(td_gateway_model_budget_spent(g, mll, NOW, false), N);
    /* 1.5 more is past the 70B's day budget of 2: refused, named, nothing held */
    assert_int_equal(
        td_gateway_budget_reserve(g, t, NULL, "llama-70b", 3 * N / 2, NOW, &h, &v), TD_EQUOTA);
    assert_ptr_equal(v.refused.model, m70);
    assert_ptr_equal(v.refused.budget, &m70->b);
    assert_null(v.refused.key);
    assert_int_equal(v.refused.spent_nano, N);
    assert_int_equal(h.nmodel + h.n + h.nkey, 0);
    assert_int_equal(td_gateway_model_budget_spent(g, m70, NOW, false), N);
    assert_int_equal(td_gateway_model_budget_spent(g, mll, NOW, false), N);
    assert_int_equal(td_budgets_spent(td_gateway_budgets(g), t->slot, TD_PERIOD_MONTH, NOW), N);
    /* another model: only the tenant's budget and the shadow prefix one */
    assert_int_equal(td_gateway_budget_reserve(g, t, NULL, "llama-8b", 3 * N, NOW, &h, &v), TD_OK);
    assert_int_equal(h.nmodel, 1);
    assert_int_equal(v.nshadow, 1); /* 1 + 3 over the shadow 3 */
    assert_ptr_equal(v.shadow[0].model, mll);
    td_gateway_budget_settle(g, t, NULL, &h, 3 * N);
    assert_int_equal(td_gateway_budget_reserve(g, t, NULL, "mistral", 2 * N, NOW, &h, &v), TD_OK);
    assert_int_equal(h.nmodel, 0);
    td_gateway_budget_settle(g, t, NULL, &h, 2 * N);
    /* the tenant's month budget (10) refuses last: the model budgets are rolled back */
    assert_int_equal(td_gateway_budget_reserve(g, t, NULL, "llama-70b", N, NOW, &h, &v), TD_OK);
    td_gateway_budget_settle(g, t, NULL, &h, 0); /* used nothing: all given back */
    assert_int_equal(td_gateway_model_budget_spent(g, m70, NOW, false), N);
    assert_int_equal(td_budgets_spent(td_gateway_budgets(g), t->slot, TD_PERIOD_MONTH, NOW),
                     6 * N);
    assert_int_equal(td_gateway_budget_reserve(g, t, NULL, "llama-8b", 5 * N, NOW, &h, &v),
                     TD_EQUOTA);
    assert_null(v.refused.model);
    assert_int_equal(td_gateway_model_budget_spent(g, mll, NOW, false), 4 * N);

    /* replay: a 70B record counts in its budgets, another model's not */
    td_ledger_rec r;
    memset(&r, 0, sizeof r);
    r.kind = TD_LEDGER_REQUEST;
    snprintf(r.tenant, sizeof r.tenant, "team-m");
    snprintf(r.route, sizeof r.route, "all");
    snprintf(r.outcome, sizeof r.outcome, "ok");
    snprintf(r.model, sizeof r.model, "llama-70b");
    r.count = 1;
    r.gpu_used_milli = -1;
    r.start_ns = (NOW - 60) * 1000000000LL;
    r.end_ns = r.start_ns + 1000;
    td_gateway_budget_replay(g, &r, NOW * 1000000000LL); /* priced 2 by its model */
    assert_int_equal(td_gateway_model_budget_spent(g, m70, NOW, false), 3 * N);
    assert_int_equal(td_gateway_model_budget_spent(g, mll, NOW, false), 6 * N);
    snprintf(r.model, sizeof r.model, "mistral");
    td_gateway_budget_replay(g, &r, NOW * 1000000000LL); /* priced 1 by its route */
    assert_int_equal(td_gateway_model_budget_spent(g, m70, NOW, false), 3 * N);
    assert_int_equal(td_budgets_spent(td_gateway_budgets(g), t->slot, TD_PERIOD_MONTH, NOW),
                     9 * N);
    td_gw_config_unref(held);
    td_gateway_destroy(g);
    td_config_unref(cfg);
}

static void test_model_budget_validation(void **state)
{
    (void)state;
    static const struct {
        const char *name, *budgets, *keys, *want;
    } rows[] = {
        {"models on a key", "[{amount: 10, period: month}]",
         "[{sha256: " SHA_CI ", name: ci, budgets: [{amount: 1, period: day, models: [m]}]}]",
         "spec.apiKeys[0].budgets[0].models: a key's budget holds all its requests"},
        {"same models twice", "[{amount: 1, period: day, models: [a, b]}, {amount: 2, period: "
                              "day, models: [a, b]}]",
         "[]", "spec.budgets[1].models: a second day budget for these models (spec.budgets[0])"},
        {"comma", "[{amount: 1, period: day, models: ['a,b']}]", "[]",
         "spec.budgets[0].models: item 0 \"a,b\": a ',' has no place"},
        {"star inside", "[{amount: 1, period: day, models: ['a*b']}]", "[]",
         "spec.budgets[0].models: item 0 \"a*b\": a '*' may only end a name"},
        {"empty list", "[{amount: 1, period: day, models: []}]", "[]",
         "spec.budgets[0].models: must be a non-empty list of model names"},
        {"bad amount", "[{amount: x, period: day, models: [a]}]", "[]", "spec.budgets[0].amount"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char y[2048];
        snprintf(y, sizeof y,
                 "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: team-a}\n"
                 "spec:\n  budgets: %s\n  apiKeys: %s\n",
                 rows[i].budgets, rows[i].keys);
        td_manifest *m = NULL;
        td_err err;
        td_config_builder *b = NULL;
        assert_int_equal(td_manifest_parse("v.yaml", y, strlen(y), &m, &err), TD_OK);
        assert_int_equal(td_config_builder_create(NULL, &b, &err), TD_OK);
        td_status st = td_config_builder_add_manifest(b, m, &err);
        if (st == TD_OK || !strstr(err.msg, rows[i].want))
            fail_msg("%s: %s, message: %s", rows[i].name, td_strerror(st), err.msg);
        td_config_builder_destroy(b);
        td_manifest_destroy(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_parsed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_levels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_refuses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tenant_refuses_rolls_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shadow_never_refuses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replay_by_key, setup, teardown),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_model_budget_selection),
        cmocka_unit_test(test_model_budget_refuses),
        cmocka_unit_test(test_model_budget_validation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
