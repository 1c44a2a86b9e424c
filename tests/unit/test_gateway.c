/* test_gateway.c - the gateway's view of a config: keys to tenants,
 * longest-prefix routes, parsed limits, slots stable across reloads, a
 * rate change resetting the limiter, workers seeing a reload, and budgets
 * a reload adds caught up from the ledger. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "gateway/gateway.h"

#include "testutil.h"

static td_config *load(const char *y)
{
    return test_config("g.yaml", y);
}

/* sha256("demo-key-team-a") */
#define KEY_A_SHA "7dbaf6a9f8103761445f073645d544d53cc1f4584dbcd673ec93ce854bdedae5"

static const char v1[] =
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: team-a}\n"
    "spec:\n  apiKeys: [{sha256: " KEY_A_SHA "}]\n"
    "  gateway: {rate: {cost: 5000, per: 1s, burst: 20000}, concurrency: 64, "
    "criticality: sheddable_plus, weight: 2}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: team-b}\nspec: {}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: all}\n"
    "spec: {match: {pathPrefix: /}, upstream: {address: '127.0.0.1:9'}, cost: {model: requests}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: completions}\n"
    "spec: {match: {pathPrefix: /v1/}, upstream: {address: '[::1]:8000', capacity: 8, queue: 16},"
    " timeout: 2s}\n";

static void test_view(void **state)
{
    (void)state;
    td_config *c = load(v1);
    td_gateway *g = NULL;
    td_err err;
    assert_int_equal(td_gateway_create(c, NULL, &g, &err), TD_OK);
    td_gw_config *held = NULL;
    const td_gw_config *v = td_gateway_config(g, &held);
    assert_int_equal(v->ntenants, 2);

    const td_gw_tenant *a = td_gw_tenant_by_key(v, "demo-key-team-a", 15);
    assert_non_null(a);
    assert_string_equal(a->name, "team-a");
    assert_true(a->rate.cost == 5000 && a->rate.burst == 20000);
    assert_int_equal(a->rate.per_ns, 1000000000ULL);
    assert_int_equal(a->concurrency, 64);
    assert_int_equal(a->criticality, TD_CRIT_SHEDDABLE_PLUS);
    assert_true(a->weight == 2);
    assert_null(td_gw_tenant_by_key(v, "demo-key-team-b", 15));
    assert_null(td_gw_tenant_by_key(v, "", 0));
    const td_gw_tenant *b = td_gw_tenant_by_name(v, "team-b");
    assert_non_null(b);
    assert_true(b->rate.cost == 0); /* unlimited */
    assert_int_equal(b->criticality, TD_CRIT_CRITICAL);

    const td_gw_route *r = td_gw_route_match(v, "/v1/chat/completions");
    assert_string_equal(r->name, "completions");
    assert_string_equal(r->upstream_host, "::1");
    assert_int_equal(r->upstream_port, 8000);
    assert_int_equal(r->capacity, 8);
    assert_int_equal(r->queue, 16);
    assert_int_equal(r->timeout_ns, 2000000000ULL);
    assert_int_equal(r->cost_model, TD_COST_TOKENS);
    r = td_gw_route_match(v, "/healthz");
    assert_string_equal(r->name, "all");
    assert_int_equal(r->cost_model, TD_COST_REQUESTS);
    assert_int_equal(r->capacity, 64);
    uint32_t slot_a = a->slot;
    assert_string_equal(td_gateway_slot_name(g, 't', slot_a), "team-a");
    assert_null(td_gateway_slot_name(g, 't', 999));

    /* Spend team-a's burst, then reload with the same rate: state kept. */
    td_limiter *l = td_gateway_limiter(g);
    uint64_t ra = 0;
    assert_int_equal(td_limiter_take(l, slot_a, &a->rate, 20000, 1000, &ra), TD_OK);
    assert_int_equal(td_limiter_take(l, slot_a, &a->rate, 1, 1000, &ra), TD_EAGAIN);
    assert_int_equal(td_gateway_reload(g, c, &err), TD_OK);
    v = td_gateway_config(g, &held);
    a = td_gw_tenant_by_name(v, "team-a");
    assert_int_equal(a->slot, slot_a);
    assert_int_equal(td_limiter_take(l, slot_a, &a->rate, 1, 1000, &ra), TD_EAGAIN);

    /* A new rate resets the tenant's state; a new tenant gets a new slot. */
    char v2[4096];
    snprintf(v2, sizeof v2, "%s---\napiVersion: tenantd.dev/v1alpha1\nkind: Tenant\n"
                            "metadata: {name: team-c}\nspec: {}\n", v1);
    char *p = strstr(v2, "cost: 5000");
    memcpy(p, "cost: 6000", 10);
    td_config *c2 = load(v2);
    uint64_t gen = v->generation;
    assert_int_equal(td_gateway_reload(g, c2, &err), TD_OK);
    v = td_gateway_config(g, &held);
    assert_true(v->generation > gen);
    a = td_gw_tenant_by_name(v, "team-a");
    assert_int_equal(a->slot, slot_a);
    assert_true(a->rate.cost == 6000);
    assert_int_equal(td_limiter_take(l, slot_a, &a->rate, 1, 1000, &ra), TD_OK);
    const td_gw_tenant *tc = td_gw_tenant_by_name(v, "team-c");
    assert_non_null(tc);
    assert_true(tc->slot != slot_a && tc->slot != td_gw_tenant_by_name(v, "team-b")->slot);

    /* The old view stays valid for a worker still holding it. */
    td_gw_config *old = NULL;
    (void)old;
    td_gw_config_unref(held);
    td_config_unref(c2);
    td_config_unref(c);
    td_gateway_destroy(g);
}

/* Keys with limits of their own, budgets, and pricing in the view: a key
 * lookup returns its entry, a named key keeps its slot across reloads (a
 * new key gets a new one), a changed key rate resets only that key's
 * limiter state, and a request record is priced by the CostPolicy. */
static const char keys_v1[] =
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: t}\n"
    "spec:\n  apiKeys:\n  - {sha256: %s, name: ci-bot, rate: {cost: 10, per: 1s}, concurrency: 2}\n"
    "  - {sha256: %s, name: web}\n  - {sha256: %s}\n"
    "  budgets: [{amount: \"0.5\", period: day}, {amount: 12, period: month, enforcement: "
    "shadow}]\n"
    "  gateway: {rate: {cost: 100, per: 1s}, concurrency: 4}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: chat}\n"
    "spec: {match: {pathPrefix: /}, upstream: {address: '127.0.0.1:9'}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: CostPolicy\nmetadata: {name: default}\n"
    "spec: {currency: EUR, prices: [{route: chat, per1kTokensIn: \"1\", per1kTokensOut: \"3\"}]}\n";

static td_config *load_keys(int ci_rate, int with_new)
{
    char y[4096];
    snprintf(y, sizeof y, keys_v1, "CI", "WEB", "ANON");
    char *at = strstr(y, "cost: 10,");
    if (at)
        memcpy(at + 6, ci_rate == 10 ? "10" : "20", 2);
    char out[4096];
    size_t k = 0;
    for (const char *p = y; *p && k < sizeof out - 70; p++) {
        const char *h = NULL;
        if (strncmp(p, "CI", 2) == 0)
            h = "5d4cb8b8efca6c4c0c31aaaa46064433eec4b0e86abec2b2589add3a5ad33102";
        else if (strncmp(p, "WEB", 3) == 0)
            h = with_new ? "fec4421d43014c13a864d10ff2726b73d97f177972edd382c003e3f2ff928834"
                         : "c7f39454528d01dfdfe5dd328d076632f5c1b95f47629aea5ab4c7b680ec25ae";
        else if (strncmp(p, "ANON", 4) == 0)
            h = "4bb4505ef0f5dbe05ef440111cf196b226db57ea8deb6bf22a3763ad47f23822";
        if (h) {
            memcpy(out + k, h, 64);
            k += 64;
            p += strncmp(p, "CI", 2) == 0 ? 1 : strncmp(p, "WEB", 3) == 0 ? 2 : 3;
        } else {
            out[k++] = *p;
        }
    }
    out[k] = 0;
    if (with_new) {
        char *w = strstr(out, "name: web");
        if (w)
            memcpy(w, "name: new", 9);
    }
    return load(out);
}

static void test_keys_budgets_prices(void **state)
{
    (void)state;
    td_config *c = load_keys(10, 0);
    td_gateway *g = NULL;
    td_err err;
    assert_int_equal(td_gateway_create(c, NULL, &g, &err), TD_OK);
    td_gw_config *held = NULL;
    const td_gw_config *v = td_gateway_config(g, &held);
    const td_gw_key *k = NULL;
    const td_gw_tenant *t = td_gw_tenant_by_key_ex(v, "k-ci", 4, &k);
    assert_non_null(t);
    assert_non_null(k);
    assert_string_equal(k->name, "ci-bot");
    assert_true(k->rate.cost == 10 && k->rate.burst == 10 && k->concurrency == 2);
    uint32_t ci_slot = k->slot;
    assert_string_equal(td_gateway_slot_name(g, 'k', ci_slot), "t/ci-bot");
    assert_non_null(td_gw_tenant_by_key_ex(v, "k-web", 5, &k));
    assert_string_equal(k->name, "web");
    assert_true(k->rate.cost == 0 && k->concurrency == 0);
    uint32_t web_slot = k->slot;
    assert_non_null(td_gw_tenant_by_key_ex(v, "k-anon", 6, &k));
    assert_null(k->name);
    assert_null(td_gw_tenant_by_key_ex(v, "k-none", 6, &k));
    assert_null(k);
    /* budgets */
    assert_int_equal(t->nbudgets, 2);
    assert_int_equal(t->budgets[0].period, TD_PERIOD_DAY);
    assert_true(t->budgets[0].amount_nano == 500000000LL && !t->budgets[0].shadow);
    assert_int_equal(t->budgets[1].period, TD_PERIOD_MONTH);
    assert_true(t->budgets[1].amount_nano == 12 * TD_MONEY_NANO && t->budgets[1].shadow);
    /* prices: 100 in at 1/1k + 50 out at 3/1k = 0.25 */
    td_ledger_rec rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = TD_LEDGER_REQUEST;
    strcpy(rec.route, "chat");
    strcpy(rec.tenant, "t");
    strcpy(rec.outcome, "ok");
    rec.count = 1;
    rec.tokens_in = 100;
    rec.tokens_out = 50;
    int64_t nano = 0;
    assert_int_equal(td_gw_price(v, &rec, &nano, &err), TD_OK);
    assert_true(nano == 250000000LL);
    /* replay: the record counts in every current period of its tenant */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now_ns = (int64_t)ts.tv_sec * 1000000000LL;
    rec.start_ns = rec.end_ns = now_ns - 1000000000LL;
    td_gateway_budget_replay(g, &rec, now_ns);
    strcpy(rec.outcome, "rejected"); /* not completed: not counted */
    td_gateway_budget_replay(g, &rec, now_ns);
    assert_true(td_budgets_spent(td_gateway_budgets(g), t->slot, TD_PERIOD_DAY, ts.tv_sec) ==
                250000000LL);
    assert_true(td_budgets_spent(td_gateway_budgets(g), t->slot, TD_PERIOD_WEEK, ts.tv_sec) ==
                250000000LL);

    /* the key's limiter: spend ci-bot's burst, then reload */
    td_limiter *kl = td_gateway_key_limiter(g);
    const td_gw_key *ci = NULL;
    td_gw_tenant_by_key_ex(v, "k-ci", 4, &ci);
    assert_int_equal(td_limiter_take(kl, ci_slot, &ci->rate, 10, 1000, NULL), TD_OK);
    assert_int_equal(td_limiter_take(kl, ci_slot, &ci->rate, 10, 1000, NULL), TD_EAGAIN);
    /* same limits, a new key: slots kept, state kept, the new name a new slot */
    td_config *c2 = load_keys(10, 1);
    assert_int_equal(td_gateway_reload(g, c2, &err), TD_OK);
    v = td_gateway_config(g, &held);
    td_gw_tenant_by_key_ex(v, "k-ci", 4, &ci);
    assert_int_equal(ci->slot, ci_slot);
    assert_int_equal(td_limiter_take(kl, ci_slot, &ci->rate, 10, 1000, NULL), TD_EAGAIN);
    assert_non_null(td_gw_tenant_by_key_ex(v, "k-new", 5, &k));
    assert_true(k->slot != ci_slot && k->slot != web_slot);
    /* ci-bot's rate changes: its state starts afresh */
    td_config *c3 = load_keys(20, 1);
    assert_int_equal(td_gateway_reload(g, c3, &err), TD_OK);
    v = td_gateway_config(g, &held);
    td_gw_tenant_by_key_ex(v, "k-ci", 4, &ci);
    assert_true(ci->rate.cost == 20);
    assert_int_equal(td_limiter_take(kl, ci_slot, &ci->rate, 20, 1000, NULL), TD_OK);
    td_gw_config_unref(held);
    td_gateway_destroy(g);
    td_config_unref(c);
    td_config_unref(c2);
    td_config_unref(c3);
}

/* Issue 23 item 5: a budget a reload adds (a period the tenant or key had
 * none for) forgets its counter and, caught up, holds the ledger's spend
 * of its period: charged records of that tenant (key) that started in the
 * period and before the reload; a budget the old configuration had keeps
 * its counter; a second catch-up finds nothing. */
static const char late_v[] =
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: t}\n"
    "spec:\n  apiKeys:\n  - {sha256: " KEY_A_SHA ", %s}\n"
    "  budgets: [{amount: 100, period: week}%s]\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: other}\nspec: {}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: chat}\n"
    "spec: {match: {pathPrefix: /}, upstream: {address: '127.0.0.1:9'}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: CostPolicy\nmetadata: {name: default}\n"
    "spec: {currency: EUR, prices: [{route: chat, per1kTokens: \"1\"}]}\n";

typedef struct {
    td_ledger_rec recs[8];
    size_t n;
    int64_t from_ns, until_ns;
    int calls;
} fake_ledger;

static td_status fake_scan(void *ud, int64_t from_ns, int64_t until_ns,
                           int (*cb)(const td_ledger_rec *r, void *cb_ud), void *cb_ud, td_err *err)
{
    (void)err;
    fake_ledger *l = ud;
    l->from_ns = from_ns;
    l->until_ns = until_ns;
    l->calls++;
    for (size_t i = 0; i < l->n; i++)
        if (l->recs[i].end_ns >= from_ns && l->recs[i].start_ns < until_ns &&
            cb(&l->recs[i], cb_ud))
            break;
    return TD_OK;
}

static void add_rec(fake_ledger *l, const char *tenant, const char *key, const char *outcome,
                    int64_t start_ns, int64_t tokens)
{
    td_ledger_rec *r = &l->recs[l->n++];
    memset(r, 0, sizeof *r);
    r->kind = TD_LEDGER_REQUEST;
    strcpy(r->route, "chat");
    strcpy(r->tenant, tenant);
    strcpy(r->api_key, key);
    strcpy(r->outcome, outcome);
    r->count = 1;
    r->tokens_in = tokens;
    r->start_ns = r->end_ns = start_ns;
}

static void test_budget_added_catch_up(void **state)
{
    (void)state;
    char y[4096];
    snprintf(y, sizeof y, late_v, "name: ci", "");
    td_config *c1 = load(y);
    snprintf(y, sizeof y, late_v, "name: ci, budgets: [{amount: 1, period: day}]",
             ", {amount: 10, period: day}");
    td_config *c2 = load(y);
    assert_non_null(c1);
    assert_non_null(c2);
    td_gateway *g = NULL;
    td_err err;
    assert_int_equal(td_gateway_create(c1, NULL, &g, &err), TD_OK);
    td_gw_config *held = NULL;
    const td_gw_config *v = td_gateway_config(g, &held);
    const td_gw_key *k = NULL;
    const td_gw_tenant *t = td_gw_tenant_by_key_ex(v, "demo-key-team-a", 15, &k);
    assert_non_null(t);
    assert_non_null(k);
    uint32_t ts_ = t->slot, ks = k->slot;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t now_ns = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
    /* at start: a record replayed into every period (day included) and
     * 5 spent from the week budget */
    fake_ledger l = {.n = 0};
    add_rec(&l, "t", "", "ok", now_ns - 20000000000LL, 7000);
    td_gateway_budget_replay(g, &l.recs[0], now_ns);
    assert_int_equal(td_budgets_reserve(td_gateway_budgets(g), ts_, TD_PERIOD_WEEK,
                                        100 * TD_MONEY_NANO, 5 * TD_MONEY_NANO, false, now.tv_sec,
                                        NULL, NULL),
                     TD_OK);
    int64_t week_before = td_budgets_spent(td_gateway_budgets(g), ts_, TD_PERIOD_WEEK, now.tv_sec);
    assert_true(week_before == 12 * TD_MONEY_NANO);
    /* nothing added yet: nothing to catch up */
    size_t n = 99;
    assert_int_equal(td_gateway_budget_catch_up(g, fake_scan, &l, &n, &err), TD_OK);
    assert_int_equal(n, 0);
    assert_int_equal(l.calls, 0);

    /* the ledger as it is at the reload */
    l.n = 0;
    add_rec(&l, "t", "ci", "ok", now_ns - 10000000000LL, 1000);      /* 1.0, the key's too */
    add_rec(&l, "t", "", "ok", now_ns - 5000000000LL, 500);          /* 0.5 */
    add_rec(&l, "t", "ci", "cut", now_ns - 4000000000LL, 250);       /* 0.25: charged early end */
    add_rec(&l, "t", "ci", "rejected", now_ns - 3000000000LL, 9000); /* not charged */
    add_rec(&l, "other", "", "ok", now_ns - 3000000000LL, 9000);     /* another tenant */
    add_rec(&l, "t", "ci", "ok", now_ns - 3 * 86400 * 1000000000LL - 86400000000000LL, 9000);
    /* started after the reload: reserved at the new budget itself */
    add_rec(&l, "t", "ci", "ok", now_ns + 3600 * 1000000000LL, 9000);
    assert_int_equal(td_gateway_reload(g, c2, &err), TD_OK);
    /* forgotten at the reload: the start's 7 is not the ledger's spend */
    assert_true(td_budgets_spent(td_gateway_budgets(g), ts_, TD_PERIOD_DAY, now.tv_sec) == 0);
    assert_int_equal(td_gateway_budget_catch_up(g, fake_scan, &l, &n, &err), TD_OK);
    assert_int_equal(n, 2);
    assert_int_equal(l.calls, 1);
    int64_t ds, de;
    td_period_bounds(TD_PERIOD_DAY, now.tv_sec, &ds, &de);
    assert_true(l.from_ns == ds * 1000000000LL);
    assert_true(l.until_ns >= now_ns && l.until_ns < now_ns + 60 * 1000000000LL);
    int64_t day = td_budgets_spent(td_gateway_budgets(g), ts_, TD_PERIOD_DAY, now.tv_sec);
    int64_t kday = td_budgets_spent(td_gateway_key_budgets(g), ks, TD_PERIOD_DAY, now.tv_sec);
    int64_t week = td_budgets_spent(td_gateway_budgets(g), ts_, TD_PERIOD_WEEK, now.tv_sec);
    /* day: 1.0 + 0.5 + 0.25; key ci: 1.0 + 0.25; week untouched */
    if (ds * 1000000000LL <= now_ns - 20000000000LL) {
        assert_true(day == 1750000000LL);
        assert_true(kday == 1250000000LL);
    }
    assert_true(week == week_before);
    /* caught up once: again, nothing */
    assert_int_equal(td_gateway_budget_catch_up(g, fake_scan, &l, &n, &err), TD_OK);
    assert_int_equal(n, 0);
    assert_int_equal(l.calls, 1);
    /* the same configuration again adds nothing */
    assert_int_equal(td_gateway_reload(g, c2, &err), TD_OK);
    assert_int_equal(td_gateway_budget_catch_up(g, fake_scan, &l, &n, &err), TD_OK);
    assert_int_equal(n, 0);
    assert_true(td_budgets_spent(td_gateway_budgets(g), ts_, TD_PERIOD_DAY, now.tv_sec) == day);
    /* removed, then added again (twice before a catch-up): counted from
     * the ledger again, not twice */
    assert_int_equal(td_gateway_reload(g, c1, &err), TD_OK);
    assert_int_equal(td_gateway_reload(g, c2, &err), TD_OK);
    assert_int_equal(td_gateway_reload(g, c1, &err), TD_OK);
    assert_int_equal(td_gateway_reload(g, c2, &err), TD_OK);
    assert_int_equal(td_gateway_budget_catch_up(g, fake_scan, &l, &n, &err), TD_OK);
    assert_int_equal(n, 2);
    assert_true(td_budgets_spent(td_gateway_budgets(g), ts_, TD_PERIOD_DAY, now.tv_sec) == day);
    /* without a ledger (scan NULL) the notes are dropped */
    assert_int_equal(td_gateway_reload(g, c1, &err), TD_OK);
    assert_int_equal(td_gateway_reload(g, c2, &err), TD_OK);
    assert_int_equal(td_gateway_budget_catch_up(g, NULL, NULL, &n, &err), TD_OK);
    assert_int_equal(n, 2);
    assert_true(td_budgets_spent(td_gateway_budgets(g), ts_, TD_PERIOD_DAY, now.tv_sec) == 0);
    td_gw_config_unref(held);
    td_gateway_destroy(g);
    td_config_unref(c1);
    td_config_unref(c2);
}

/* Issue 17: routes match on segment boundaries; spec.methods (default
 * GET, POST) with its Allow text; spec.upstream.authorization.fromEnv
 * read at load; a named key's criticality (the tenant's by default, never
 * above it). */
static void test_route_fields_key_criticality(void **state)
{
    (void)state;
    setenv("TD_UNIT_UPSTREAM_AUTH", "Bearer up-1", 1);
    static const char y[] =
        "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: t}\n"
        "spec:\n  apiKeys: [{sha256: " KEY_A_SHA ", name: low, criticality: sheddable},\n"
        "            {sha256: '0000000000000000000000000000000000000000000000000000000000000000',"
        " name: plain}]\n"
        "  gateway: {criticality: sheddable_plus}\n---\n"
        "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: emb}\n"
        "spec: {match: {pathPrefix: /v1/embeddings}, upstream: {address: '127.0.0.1:9',"
        " authorization: {fromEnv: TD_UNIT_UPSTREAM_AUTH}}, methods: [GET, POST, PUT]}\n---\n"
        "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: v1}\n"
        "spec: {match: {pathPrefix: /v1/}, upstream: {address: '127.0.0.1:9'}}\n";
    td_config *c = load(y);
    td_gateway *g = NULL;
    td_err err;
    assert_int_equal(td_gateway_create(c, NULL, &g, &err), TD_OK);
    td_gw_config *held = NULL;
    const td_gw_config *v = td_gateway_config(g, &held);
    assert_string_equal(td_gw_route_match(v, "/v1/embeddings")->name, "emb");
    assert_string_equal(td_gw_route_match(v, "/v1/embeddings/x")->name, "emb");
    assert_string_equal(td_gw_route_match(v, "/v1/embeddingsXYZ")->name, "v1");
    assert_null(td_gw_route_match(v, "/v1"));
    const td_gw_route *emb = td_gw_route_match(v, "/v1/embeddings");
    const td_gw_route *v1r = td_gw_route_match(v, "/v1/chat");
    assert_string_equal(emb->allow, "GET, POST, PUT");
    assert_string_equal(v1r->allow, "GET, POST");
    assert_true(td_gw_route_allows(emb, "PUT") && !td_gw_route_allows(v1r, "PUT"));
    assert_true(td_gw_route_allows(v1r, "GET") && !td_gw_route_allows(v1r, "TRACE"));
    assert_string_equal(emb->upstream_authorization, "Bearer up-1");
    assert_null(v1r->upstream_authorization);
    const td_gw_key *k = NULL;
    const td_gw_tenant *t = td_gw_tenant_by_key_ex(v, "demo-key-team-a", 15, &k);
    assert_non_null(t);
    assert_int_equal(t->criticality, TD_CRIT_SHEDDABLE_PLUS);
    assert_int_equal(k->criticality, TD_CRIT_SHEDDABLE);
    assert_int_equal(t->keys[1].criticality, TD_CRIT_SHEDDABLE_PLUS); /* the tenant's */
    td_gw_config_unref(held);
    td_gateway_destroy(g);
    td_config_unref(c);

    /* the config refuses a key above its tenant, and an unset variable */
    static const char *const bad[][2] = {
        {"apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: t}\n"
         "spec:\n  apiKeys: [{sha256: " KEY_A_SHA ", name: hi, criticality: critical}]\n"
         "  gateway: {criticality: sheddable}\n",
         "is above the tenant's spec.gateway.criticality sheddable"},
        {"apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: t}\n"
         "spec:\n  apiKeys: [{sha256: " KEY_A_SHA ", criticality: sheddable}]\n",
         "needs a name"},
        {"apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
         "spec: {match: {pathPrefix: /v1/}, upstream: {address: '127.0.0.1:9',"
         " authorization: {fromEnv: TD_UNIT_NOT_SET_ANYWHERE}}}\n",
         "TD_UNIT_NOT_SET_ANYWHERE is not set"},
        {"apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
         "spec: {match: {pathPrefix: /v1/}, upstream: {address: '127.0.0.1:9'},"
         " methods: [CONNECT]}\n",
         "CONNECT is never forwarded"},
        {"apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
         "spec: {match: {pathPrefix: /v1/}, upstream: {address: '127.0.0.1:9'},"
         " methods: [GET, GET]}\n",
         "GET is listed twice"},
        {"apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
         "spec: {match: {pathPrefix: '/v1/./x'}, upstream: {address: '127.0.0.1:9'}}\n",
         "is not a normalized path"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        td_config *bc = NULL;
        td_err e;
        if (td_config_load_text("b.yaml", bad[i][0], strlen(bad[i][0]), &bc, &e) == TD_OK)
            fail_msg("row %zu: accepted", i);
        if (!strstr(e.msg, bad[i][1]))
            fail_msg("row %zu: \"%s\" does not say \"%s\"", i, e.msg, bad[i][1]);
    }
}

/* spec.upstream pools: endpoints with weights, balance, health check and
 * scrape settings with their defaults; address stays one endpoint. */
static void test_route_pools(void **state)
{
    (void)state;
    static const char y[] =
        "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: fleet}\n"
        "spec:\n  match: {pathPrefix: /v1/}\n  upstream:\n"
        "    endpoints: [{address: '10.0.0.7:8000'}, {address: '[::1]:8001', weight: 3}]\n"
        "    balance: queueDepth\n    scrapeEvery: 250ms\n    metrics: {waiting: w_total}\n"
        "    healthCheck: {interval: 2s, unhealthyThreshold: 4}\n    capacity: 8\n---\n"
        "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: one}\n"
        "spec: {match: {pathPrefix: /x/}, upstream: {address: 'h:9', balance: roundRobin, "
        "resolveEvery: 750ms}}\n";
    td_config *c = load(y);
    td_gateway *g = NULL;
    td_err err;
    assert_int_equal(td_gateway_create(c, NULL, &g, &err), TD_OK);
    td_gw_config *held = NULL;
    const td_gw_config *v = td_gateway_config(g, &held);
    const td_gw_route *r = td_gw_route_match(v, "/v1/chat/completions");
    assert_true(r->pool);
    assert_int_equal(r->nendpoints, 2);
    assert_string_equal(r->endpoints[0].host, "10.0.0.7");
    assert_int_equal(r->endpoints[0].port, 8000);
    assert_int_equal(r->endpoints[0].weight, 1);
    assert_string_equal(r->endpoints[1].host, "::1");
    assert_int_equal(r->endpoints[1].port, 8001);
    assert_int_equal(r->endpoints[1].weight, 3);
    assert_string_equal(r->upstream, "10.0.0.7:8000"); /* the first, for what shows one */
    assert_int_equal(r->balance, TD_BALANCE_QUEUE_DEPTH);
    assert_int_equal(r->capacity, 8);
    assert_int_equal(r->scrape_every_ns, 250000000ULL);
    assert_int_equal(r->resolve_every_ns, 5000000000ULL); /* the default */
    assert_string_equal(r->metrics_path, "/metrics");
    assert_string_equal(r->waiting_metric, "w_total");
    assert_string_equal(r->kv_metric, "vllm:gpu_cache_usage_perc");
    assert_true(r->health_check);
    assert_string_equal(r->hc_path, "/health");
    assert_int_equal(r->hc_interval_ns, 2000000000ULL);
    assert_int_equal(r->hc_timeout_ns, 1000000000ULL);
    assert_int_equal(r->hc_unhealthy, 4);
    assert_int_equal(r->hc_healthy, 1);
    r = td_gw_route_match(v, "/x/y");
    assert_false(r->pool);
    assert_int_equal(r->nendpoints, 1);
    assert_string_equal(r->endpoints[0].host, "h");
    assert_int_equal(r->endpoints[0].port, 9);
    assert_int_equal(r->balance, TD_BALANCE_ROUND_ROBIN);
    assert_int_equal(r->resolve_every_ns, 750000000ULL);
    assert_false(r->health_check);
    assert_null(r->metrics_path);
    td_gw_config_unref(held);
    td_config_unref(c);
    td_gateway_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_view),
        cmocka_unit_test(test_keys_budgets_prices),
        cmocka_unit_test(test_budget_added_catch_up),
        cmocka_unit_test(test_route_fields_key_criticality),
        cmocka_unit_test(test_route_pools),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
