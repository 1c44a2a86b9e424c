/* test_chargeback.c - src/cost: CostPolicy parsing (errors name file:line
 * and field), exact decimal money, the price of records (hand-computed),
 * missing prices, largest-remainder allocation (hand cases and the exact
 * sum over thousands of seeded random inputs), whole reports whose lines
 * add up to the total, time-weighted percentiles and right-sizing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kinds/builtin.h"
#include "cost/chargeback.h"
#include "core/kind.h"

#define HOUR (3600LL * 1000000000LL)
#define GIB (1LL << 30)

static const char policy_yaml[] =
    "apiVersion: tenantd.dev/v1alpha1\n"
    "kind: CostPolicy\n"
    "metadata: {name: default}\n"
    "spec:\n"
    "  currency: EUR\n"
    "  prices:\n"
    "  - {resource: nvidia.com/gpu, flavor: a100, perHour: \"2.50\"}\n"
    "  - {resource: nvidia.com/gpu, flavor: h100, perHour: \"6.00\"}\n"
    "  - {resource: cpu, perHour: 0.031}\n"
    "  - {resource: memory, perGiBHour: \"0.0042\"}\n"
    "  - {resource: storage, perGiBMonth: \"0.10\"}\n"
    "  - {route: completions, per1kTokensIn: \"0.002\", per1kTokensOut: \"0.006\"}\n"
    "  - {route: embed, perRequest: \"0.0001\"}\n"
    "  interruptible: {priorityClasses: [preemptible], discount: \"0.6\"}\n"
    "  shared:\n"
    "  - {name: control-plane, monthly: \"730\", allocate: even}\n"
    "  - {name: idle-gpu, source: idleCapacity, allocate: proportional}\n"
    "  - {name: platform, hourly: \"1\", allocate: {weights: {a: \"2\", b: \"1\"}}}\n";

static td_costpolicy *parse_yaml(const char *yaml, td_status *st, td_err *err)
{
    td_manifest *m = NULL;
    td_costpolicy *p = NULL;
    *st = td_manifest_parse("policy.yaml", yaml, strlen(yaml), &m, err);
    if (*st == TD_OK)
        *st = td_costpolicy_parse(td_manifest_doc(m, 0), m, &p, err);
    td_manifest_destroy(m);
    return p;
}

static td_costpolicy *policy(void)
{
    td_status st;
    td_err err;
    td_costpolicy *p = parse_yaml(policy_yaml, &st, &err);
    if (st != TD_OK)
        fail_msg("policy: %s", err.msg);
    return p;
}

static void test_money_parse(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        td_status st;
        int64_t nano;
    } rows[] = {
        {"0", TD_OK, 0},
        {"2.50", TD_OK, 2500000000LL},
        {"0.0042", TD_OK, 4200000LL},
        {"730", TD_OK, 730000000000LL},
        {"0.000000001", TD_OK, 1},
        {".5", TD_OK, 500000000LL},
        {"0.0000000001", TD_EINVAL, 0},
        {"1.2.3", TD_EINVAL, 0},
        {"-1", TD_EINVAL, 0},
        {"", TD_EINVAL, 0},
        {"1e3", TD_EINVAL, 0},
        {".", TD_EINVAL, 0},
        {"99999999999999999999", TD_EINVAL, 0},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int64_t v = -7;
        td_err e;
        td_status st = td_money_parse(rows[i].in, &v, &e);
        if (st != rows[i].st || (st == TD_OK && v != rows[i].nano)) {
            print_error("money \"%s\": st %d v %lld\n", rows[i].in, st, (long long)v);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

static void test_parse_errors(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        const char *yaml;
        const char *want;
    } rows[] = {
        {"bad decimal", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  prices:\n"
                        "  - {resource: cpu, perHour: \"1.2.3\"}\n",
         "policy.yaml:5: CostPolicy p: spec.prices[0].perHour: \"1.2.3\" is not a decimal"},
        {"unknown field", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  currency: USD\n"
                          "  pricez: []\n",
         "policy.yaml:5: CostPolicy p: spec: unknown field \"pricez\""},
        {"unknown resource", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  prices:\n"
                             "  - resource: tpu\n    perHour: \"1\"\n",
         "policy.yaml:5: CostPolicy p: spec.prices[0].resource: unknown resource \"tpu\""},
        {"wrong price for memory", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  prices:\n"
                                   "  - {resource: memory, perHour: \"1\"}\n",
         "spec.prices[0]: resource memory takes exactly one price: perGiBHour"},
        {"duplicate flavor", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  prices:\n"
                             "  - {resource: nvidia.com/gpu, flavor: a, perHour: \"1\"}\n"
                             "  - {resource: nvidia.com/gpu, flavor: a, perHour: \"2\"}\n",
         "policy.yaml:6: CostPolicy p: spec.prices[1]: a second price for nvidia.com/gpu flavor a"},
        {"route without price", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  prices:\n"
                                "  - {route: r}\n",
         "spec.prices[0]: route r has no price"},
        {"discount above one", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n"
                               "  interruptible:\n    discount: 1.5\n",
         "policy.yaml:5: CostPolicy p: spec.interruptible.discount: must be a fraction"},
        {"shared without amount", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  shared:\n"
                                  "  - {name: x, allocate: even}\n",
         "policy.yaml:5: CostPolicy p: spec.shared[0]: needs exactly one of monthly or hourly"},
        {"unknown rule", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  shared:\n"
                         "  - name: x\n    hourly: \"1\"\n    allocate: random\n",
         "policy.yaml:7: CostPolicy p: spec.shared[0].allocate: unknown rule \"random\""},
        {"zero weights", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  shared:\n"
                         "  - {name: x, hourly: \"1\", allocate: {weights: {a: 0}}}\n",
         "spec.shared[0].allocate.weights: at least one weight must be above zero"},
        {"negative weight", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  shared:\n"
                            "  - {name: x, hourly: \"1\", allocate: {weights: {a: \"-1\"}}}\n",
         "spec.shared[0].allocate.weights.a: \"-1\" is not a decimal amount"},
        {"idle with amount", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  shared:\n"
                             "  - {name: x, source: idleCapacity, monthly: \"1\", allocate: even}\n",
         "an idleGpu item is priced from the pools"},
        {"bad currency", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  currency: \"U$\"\n",
         "policy.yaml:4: CostPolicy p: spec.currency: must be a currency code"},
        {"route and model", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  prices:\n"
                            "  - {route: r, model: m, perRequest: \"1\"}\n",
         "policy.yaml:5: CostPolicy p: spec.prices[0]: needs exactly one of resource"},
        {"model star alone", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  prices:\n"
                             "  - {route: r, perRequest: \"1\"}\n"
                             "  - {model: \"*\", perRequest: \"1\"}\n",
         "policy.yaml:6: CostPolicy p: spec.prices[1].model: \"*\" alone is no model"},
        {"model star inside", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  prices:\n"
                              "  - {model: \"llama-*-70b\", perRequest: \"1\"}\n",
         "spec.prices[0].model: \"llama-*-70b\": '*' may only end a model prefix"},
        {"model empty", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  prices:\n"
                        "  - {model: \"\", perRequest: \"1\"}\n",
         "spec.prices[0].model: required: a non-empty string"},
        {"model without price", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  prices:\n"
                                "  - {model: llama-70b}\n",
         "spec.prices[0]: model llama-70b has no price"},
        {"model per hour", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  prices:\n"
                           "  - {model: llama-70b, perHour: \"1\"}\n",
         "spec.prices[0]: a model takes per1kTokens"},
        {"model in without out", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  prices:\n"
                                 "  - {model: llama-70b, per1kTokensIn: \"1\"}\n",
         "spec.prices[0]: per1kTokensIn and per1kTokensOut go together"},
        {"model twice", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  prices:\n"
                        "  - {model: \"llama-*\", perRequest: \"1\"}\n"
                        "  - {model: \"llama-*\", perRequest: \"2\"}\n",
         "policy.yaml:6: CostPolicy p: spec.prices[1]: a second price for model llama-*"},
        {"model bad price", "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  prices:\n"
                            "  - {model: m, per1kTokensIn: \"x\", per1kTokensOut: \"1\"}\n",
         "spec.prices[0].per1kTokensIn: \"x\" is not a decimal amount"},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_status st;
        td_err err = {{0}};
        td_costpolicy *p = parse_yaml(rows[i].yaml, &st, &err);
        if (st != TD_EINVAL || p || !strstr(err.msg, rows[i].want)) {
            print_error("%s: st %d, message \"%s\"\n", rows[i].name, st, err.msg);
            bad++;
        }
        td_costpolicy_destroy(p);
    }
    assert_int_equal(bad, 0);
}

static td_ledger_rec interval(const char *tenant, const char *team, const char *env,
                              const char *flavor, int64_t start, int64_t end, int64_t gpu_milli,
                              int64_t cpu_milli, int64_t mem, bool interruptible)
{
    td_ledger_rec r;
    memset(&r, 0, sizeof r);
    r.kind = TD_LEDGER_INTERVAL;
    snprintf(r.id, sizeof r.id, "i-%s-%lld", tenant, (long long)start);
    snprintf(r.tenant, sizeof r.tenant, "%s", tenant);
    snprintf(r.team, sizeof r.team, "%s", team);
    snprintf(r.project, sizeof r.project, "p");
    snprintf(r.environment, sizeof r.environment, "%s", env);
    snprintf(r.flavor, sizeof r.flavor, "%s", flavor);
    snprintf(r.workload, sizeof r.workload, "%s-ns/job", tenant);
    r.start_ns = start;
    r.end_ns = end;
    r.gpu_milli = gpu_milli;
    r.cpu_milli = cpu_milli;
    r.memory_bytes = mem;
    r.interruptible = interruptible;
    r.gpu_used_milli = -1;
    r.count = 1;
    return r;
}

static td_ledger_rec request(const char *tenant, const char *route, int64_t at, int64_t in,
                             int64_t out)
{
    td_ledger_rec r;
    memset(&r, 0, sizeof r);
    r.kind = TD_LEDGER_REQUEST;
    snprintf(r.id, sizeof r.id, "r-%s-%lld", tenant, (long long)at);
    snprintf(r.tenant, sizeof r.tenant, "%s", tenant);
    snprintf(r.team, sizeof r.team, "%s", tenant);
    snprintf(r.route, sizeof r.route, "%s", route);
    snprintf(r.outcome, sizeof r.outcome, "ok");
    r.start_ns = at;
    r.end_ns = at + 1000000;
    r.tokens_in = in;
    r.tokens_out = out;
    r.count = 1;
    return r;
}

static void test_price_records(void **state)
{
    (void)state;
    td_costpolicy *p = policy();
    assert_string_equal(td_costpolicy_currency(p), "EUR");
    td_charge c[TD_CHARGE_MAX];
    size_t n;
    td_err err;
    /* 2 a100 for 1.5 h = 7.50; 4 cores 1.5 h at 0.031 = 0.186; 16 GiB 1.5 h at 0.0042 = 0.1008 */
    td_ledger_rec r = interval("a", "a", "dev", "a100", 0, 3 * HOUR / 2, 2000, 4000, 16 * GIB, false);
    assert_int_equal(td_chargeback_price(p, &r, INT64_MIN, INT64_MAX, c, &n, &err), TD_OK);
    assert_int_equal(n, 3);
    assert_string_equal(c[0].item, "gpu/a100");
    assert_int_equal(c[0].amount_nano, 7500000000LL);
    assert_int_equal(c[0].quantity_micro, 3000000);
    assert_string_equal(c[1].item, "cpu");
    assert_int_equal(c[1].amount_nano, 186000000LL);
    assert_string_equal(c[2].item, "memory");
    assert_int_equal(c[2].amount_nano, 100800000LL);
    /* interruptible: 60% off -> 3.00 for the GPUs */
    r.interruptible = true;
    assert_int_equal(td_chargeback_price(p, &r, INT64_MIN, INT64_MAX, c, &n, &err), TD_OK);
    assert_int_equal(c[0].amount_nano, 3000000000LL);
    /* clipped to the first half hour: a third */
    r.interruptible = false;
    assert_int_equal(td_chargeback_price(p, &r, 0, HOUR / 2, c, &n, &err), TD_OK);
    assert_int_equal(c[0].amount_nano, 2500000000LL);
    /* outside the period: nothing */
    assert_int_equal(td_chargeback_price(p, &r, 2 * HOUR, 3 * HOUR, c, &n, &err), TD_OK);
    assert_int_equal(n, 0);
    /* tokens: 1000 in at 0.002 + 500 out at 0.006 = 0.005 */
    td_ledger_rec q = request("a", "completions", 10, 1000, 500);
    assert_int_equal(td_chargeback_price(p, &q, INT64_MIN, INT64_MAX, c, &n, &err), TD_OK);
    assert_int_equal(n, 1);
    assert_string_equal(c[0].item, "tokens/completions");
    assert_int_equal(c[0].amount_nano, 5000000LL);
    /* per request */
    td_ledger_rec e = request("a", "embed", 10, 7, 0);
    assert_int_equal(td_chargeback_price(p, &e, INT64_MIN, INT64_MAX, c, &n, &err), TD_OK);
    assert_int_equal(n, 1);
    assert_string_equal(c[0].item, "requests/embed");
    assert_int_equal(c[0].amount_nano, 100000LL);
    /* 429s and sheds summed into one record: no work upstream, no charge */
    e.count = 40;
    snprintf(e.outcome, sizeof e.outcome, "rejected");
    assert_int_equal(td_chargeback_price(p, &e, INT64_MIN, INT64_MAX, c, &n, &err), TD_OK);
    assert_int_equal(n, 0);
    snprintf(e.outcome, sizeof e.outcome, "shed");
    assert_int_equal(td_chargeback_price(p, &e, INT64_MIN, INT64_MAX, c, &n, &err), TD_OK);
    assert_int_equal(n, 0);
    snprintf(e.outcome, sizeof e.outcome, "error"); /* reached the upstream: charged */
    assert_int_equal(td_chargeback_price(p, &e, INT64_MIN, INT64_MAX, c, &n, &err), TD_OK);
    assert_int_equal(c[0].amount_nano, 40 * 100000LL);
    td_costpolicy_destroy(p);
}

/* The most specific price wins: exact model > longest model prefix > the
 * route's > the default (route "*"); a request naming no model is priced
 * by its route. One row per case, amounts exact in nano-units. */
static void test_price_choice(void **state)
{
    (void)state;
    static const char yaml[] =
        "kind: CostPolicy\nmetadata: {name: p}\nspec:\n  prices:\n"
        "  - {route: chat, per1kTokensIn: \"0.001\", per1kTokensOut: \"0.002\"}\n"
        "  - {route: \"*\", per1kTokens: \"0.0005\"}\n"
        "  - {model: \"llama-*\", per1kTokensIn: \"0.01\", per1kTokensOut: \"0.03\"}\n"
        "  - {model: \"llama-3-*\", per1kTokensIn: \"0.02\", per1kTokensOut: \"0.06\"}\n"
        "  - {model: llama-3-70b, per1kTokensIn: \"0.5\", per1kTokensOut: \"1.5\"}\n"
        "  - {model: embed-small, perRequest: \"0.0001\"}\n";
    static const struct {
        const char *name, *route, *model;
        int64_t in, out;
        const char *item;
        int64_t nano;
    } rows[] = {
        {"exact model beats its prefixes and the route", "chat", "llama-3-70b", 1000, 1000,
         "tokens/chat/llama-3-70b", 2000000000LL},
        {"longest prefix", "chat", "llama-3-8b", 1000, 1000, "tokens/chat/llama-3-8b",
         80000000LL},
        {"shorter prefix", "chat", "llama-2-7b", 1000, 2000, "tokens/chat/llama-2-7b",
         70000000LL},
        {"prefix, other route", "other", "llama-2-7b", 1000, 0, "tokens/other/llama-2-7b",
         10000000LL},
        {"exact name is not a prefix", "chat", "llama-3-70b-instruct", 1000, 0,
         "tokens/chat/llama-3-70b-instruct", 20000000LL},
        {"no model price: the route's", "chat", "mistral-7b", 1000, 1000, "tokens/chat",
         3000000LL},
        {"no model: the route's", "chat", "", 2000, 0, "tokens/chat", 2000000LL},
        {"no route price: the default", "other", "mistral-7b", 1000, 1000, "tokens/other",
         1000000LL},
        {"prefix needs the whole prefix", "chat", "llama", 1000, 0, "tokens/chat", 1000000LL},
        {"model priced per request", "chat", "embed-small", 5, 0, "requests/chat/embed-small",
         100000LL},
    };
    td_status st;
    td_err err;
    td_costpolicy *p = parse_yaml(yaml, &st, &err);
    if (st != TD_OK)
        fail_msg("policy: %s", err.msg);
    int bad = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_ledger_rec r = request("a", rows[i].route, 10, rows[i].in, rows[i].out);
        snprintf(r.model, sizeof r.model, "%s", rows[i].model);
        td_charge c[TD_CHARGE_MAX];
        size_t n = 0;
        st = td_chargeback_price(p, &r, INT64_MIN, INT64_MAX, c, &n, &err);
        if (st != TD_OK || n != 1 || strcmp(c[0].item, rows[i].item) != 0 ||
            c[0].amount_nano != rows[i].nano) {
            print_error("%s: st %d n %zu item %s amount %lld (%s)\n", rows[i].name, st, n,
                        n ? c[0].item : "-", n ? (long long)c[0].amount_nano : 0LL,
                        st ? err.msg : "");
            bad++;
        }
    }
    assert_int_equal(bad, 0);
    assert_true(td_costpolicy_prices_route(p, "anything")); /* the default */
    /* which model patterns are priced by model alone */
    static const struct {
        const char *pattern;
        bool priced;
    } pats[] = {{"llama-3-70b", true}, {"llama-3-*", true}, {"llama-*", true},
                {"llama-2-7b", true}, {"llam*", false}, {"mistral-7b", false},
                {"embed-small", true}, {"embed-*", false}, {"", false}};
    for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++)
        if (td_costpolicy_prices_model(p, pats[i].pattern) != pats[i].priced) {
            print_error("prices_model(%s) != %d\n", pats[i].pattern, pats[i].priced);
            bad++;
        }
    assert_int_equal(bad, 0);
    td_costpolicy_destroy(p);

    /* a model with only a per-request price, used with tokens and no count */
    p = parse_yaml("kind: CostPolicy\nmetadata: {name: p}\nspec:\n  prices:\n"
                   "  - {model: m, perRequest: \"1\"}\n",
                   &st, &err);
    assert_int_equal(st, TD_OK);
    td_ledger_rec r = request("a", "chat", 10, 5, 5);
    r.count = 0;
    snprintf(r.model, sizeof r.model, "m");
    td_charge c[TD_CHARGE_MAX];
    size_t n;
    assert_int_equal(td_chargeback_price(p, &r, INT64_MIN, INT64_MAX, c, &n, &err), TD_EINVAL);
    assert_non_null(strstr(err.msg, "model m has no price for what record"));
    snprintf(r.model, sizeof r.model, "other");
    assert_int_equal(td_chargeback_price(p, &r, INT64_MIN, INT64_MAX, c, &n, &err), TD_EINVAL);
    assert_non_null(strstr(err.msg, "no price for route chat, model other"));
    assert_false(td_costpolicy_prices_route(p, "chat"));
    td_costpolicy_destroy(p);
}

/* --by model: requests grouped by their model at their model's price;
 * records naming none (and intervals) under "(none)". */
static void test_report_by_model(void **state)
{
    (void)state;
    td_status st;
    td_err err;
    td_costpolicy *p = parse_yaml("kind: CostPolicy\nmetadata: {name: p}\nspec:\n  prices:\n"
                                  "  - {route: chat, per1kTokens: \"0.001\"}\n"
                                  "  - {model: big, per1kTokens: \"0.1\"}\n",
                                  &st, &err);
    assert_int_equal(st, TD_OK);
    td_ledger_rec r[4];
    r[0] = request("a", "chat", 10, 100000, 0); /* big: 10.00 */
    snprintf(r[0].model, sizeof r[0].model, "big");
    r[1] = request("b", "chat", 20, 50000, 0); /* big: 5.00 */
    snprintf(r[1].model, sizeof r[1].model, "big");
    r[2] = request("a", "chat", 30, 1000000, 0); /* small: 1.00 */
    snprintf(r[2].model, sizeof r[2].model, "small");
    r[3] = request("a", "chat", 40, 2000000, 0); /* none: 2.00 */
    td_chargeback_by by;
    assert_int_equal(td_chargeback_by_parse("model", &by, &err), TD_OK);
    assert_int_equal(by, TD_BY_MODEL);
    td_chargeback_report *rep = NULL;
    assert_int_equal(td_chargeback_compute(p, r, 4, 0, HOUR, by, NULL, 0, &rep, &err), TD_OK);
    assert_int_equal(rep->nowners, 3);
    assert_string_equal(rep->owners[0].owner, "(none)");
    assert_int_equal(rep->owners[0].direct_cents, 200);
    assert_string_equal(rep->owners[1].owner, "big");
    assert_int_equal(rep->owners[1].direct_cents, 1500);
    assert_int_equal(rep->owners[1].tokens_in, 150000);
    assert_string_equal(rep->owners[2].owner, "small");
    assert_int_equal(rep->owners[2].direct_cents, 100);
    assert_int_equal(rep->total_cents, 1800);
    td_chargeback_report_destroy(rep);
    td_costpolicy_destroy(p);
}

static void test_missing_prices(void **state)
{
    (void)state;
    td_costpolicy *p = policy();
    td_charge c[TD_CHARGE_MAX];
    size_t n;
    td_err err;
    td_ledger_rec r = interval("a", "a", "dev", "l4", 0, HOUR, 1000, 0, 0, false);
    assert_int_equal(td_chargeback_price(p, &r, INT64_MIN, INT64_MAX, c, &n, &err), TD_EINVAL);
    assert_non_null(strstr(err.msg, "no price for nvidia.com/gpu flavor l4"));
    td_ledger_rec q = request("a", "chat", 10, 5, 5);
    assert_int_equal(td_chargeback_price(p, &q, INT64_MIN, INT64_MAX, c, &n, &err), TD_EINVAL);
    assert_non_null(strstr(err.msg, "no price for route chat"));
    /* a route priced per request only, used with tokens: the tokens are not priced */
    td_ledger_rec e = request("a", "embed", 10, 5, 5);
    e.count = 0;
    assert_int_equal(td_chargeback_price(p, &e, INT64_MIN, INT64_MAX, c, &n, &err), TD_EINVAL);
    assert_non_null(strstr(err.msg, "route embed has no price for what record"));
    /* a report over such a record fails whole */
    td_chargeback_report *rep = NULL;
    assert_int_equal(td_chargeback_compute(p, &r, 1, 0, HOUR, TD_BY_TENANT, NULL, 0, &rep, &err),
                     TD_EINVAL);
    assert_null(rep);
    td_costpolicy_destroy(p);

    /* no cpu price at all */
    td_status st;
    p = parse_yaml("kind: CostPolicy\nmetadata: {name: p}\nspec:\n  prices:\n"
                   "  - {resource: nvidia.com/gpu, perHour: \"1\"}\n",
                   &st, &err);
    assert_int_equal(st, TD_OK);
    td_ledger_rec k = interval("a", "a", "dev", "l4", 0, HOUR, 1000, 500, 0, false);
    assert_int_equal(td_chargeback_price(p, &k, INT64_MIN, INT64_MAX, c, &n, &err), TD_EINVAL);
    assert_non_null(strstr(err.msg, "no price for cpu"));
    k.cpu_milli = 0; /* the flavor-less GPU price covers l4 */
    assert_int_equal(td_chargeback_price(p, &k, INT64_MIN, INT64_MAX, c, &n, &err), TD_OK);
    assert_int_equal(c[0].amount_nano, 1000000000LL);
    td_costpolicy_destroy(p);
}

static void test_allocate_cases(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int64_t total;
        int64_t w[4];
        size_t n;
        int64_t want[4];
    } rows[] = {
        {"even 100 in three: the first name takes the cent", 100, {1, 1, 1}, 3, {34, 33, 33}},
        {"2:1 of 1000", 1000, {2, 1}, 2, {667, 333}},
        {"proportional exact", 1000, {300, 200, 500}, 3, {300, 200, 500}},
        {"zero weight gets nothing", 5, {0, 1, 1}, 3, {0, 3, 2}},
        {"two cents over three", 2, {1, 1, 1}, 3, {1, 1, 0}},
        {"largest remainder wins over name", 10, {1, 2, 4}, 3, {1, 3, 6}},
        {"zero total", 0, {1, 5}, 2, {0, 0}},
    };
    const char *names[] = {"a", "b", "c", "d"};
    int bad = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int64_t out[4] = {0};
        td_err err;
        if (td_chargeback_allocate(rows[i].total, rows[i].w, names, rows[i].n, out, &err) !=
                TD_OK ||
            memcmp(out, rows[i].want, rows[i].n * sizeof *out) != 0) {
            print_error("%s: %lld %lld %lld\n", rows[i].name, (long long)out[0],
                        (long long)out[1], (long long)out[2]);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
    int64_t zero[2] = {0, 0}, out[2];
    td_err err;
    assert_int_equal(td_chargeback_allocate(10, zero, NULL, 2, out, &err), TD_EINVAL);
}

/* xorshift64*: seeded, so a failure reproduces */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

static void test_allocate_random(void **state)
{
    (void)state;
    for (int iter = 0; iter < 5000; iter++) {
        size_t n = 1 + rnd() % 40;
        int64_t w[40], out[40];
        int64_t total = (int64_t)(rnd() % 100000000);
        long double sum = 0;
        for (size_t i = 0; i < n; i++) {
            w[i] = (rnd() % 4 == 0) ? 0 : (int64_t)(rnd() % 1000000000000LL);
            sum += w[i];
        }
        if (sum == 0)
            w[0] = 1, sum = 1;
        td_err err;
        assert_int_equal(td_chargeback_allocate(total, w, NULL, n, out, &err), TD_OK);
        int64_t got = 0;
        for (size_t i = 0; i < n; i++) {
            got += out[i];
            long double exact = (long double)total * w[i] / sum;
            /* each part is its exact share rounded down or up */
            assert_true(out[i] >= 0);
            assert_true((long double)out[i] > exact - 1.0L && (long double)out[i] < exact + 1.0L);
        }
        assert_int_equal(got, total);
    }
}

/* A hand-computed report: tenants a (2 a100 x 2 h) and b (1 a100 x 1 h,
 * interruptible) over 10 h, one pool of 8 a100. */
static void test_report_hand(void **state)
{
    (void)state;
    td_costpolicy *p = policy();
    td_ledger_rec recs[] = {
        interval("a", "a", "prod", "a100", 0, 2 * HOUR, 2000, 0, 0, false),
        interval("b", "b", "dev", "a100", HOUR, 2 * HOUR, 1000, 0, 0, true),
        request("a", "completions", HOUR, 1000000, 0),
        request("c", "completions", 11 * HOUR, 1000000, 0), /* after the period */
    };
    td_pool_gpus pools[] = {{"a100", "a100", 8}};
    td_chargeback_report *rep = NULL;
    td_err err;
    assert_int_equal(td_chargeback_compute(p, recs, 4, 0, 10 * HOUR, TD_BY_TENANT, pools, 1, &rep,
                                           &err),
                     TD_OK);
    /* direct: a = 4 GPU-h x 2.50 = 10.00 + 1M tokens x 0.002/1k = 2.00; b = 2.50 x 0.4 = 1.00 */
    assert_int_equal(rep->nowners, 2);
    assert_string_equal(rep->owners[0].owner, "a");
    assert_int_equal(rep->owners[0].direct_cents, 1200);
    assert_int_equal(rep->owners[1].direct_cents, 100);
    /* shared: control-plane 730/month x 10 h = 10.00 even -> 5.00 each;
     * idle: 80 - 5 = 75 GPU-h x 2.50 = 187.50, proportional 12:1 -> 173.08 / 14.42;
     * platform: 1/h x 10 = 10.00 by weights 2:1 -> 6.67 / 3.33 */
    assert_int_equal(rep->nshared, 3);
    assert_int_equal(rep->shared[0].amount_cents, 1000);
    assert_int_equal(rep->shared[1].amount_cents, 18750);
    assert_int_equal(rep->shared[1].idle_gpu_milli_hours, 75000);
    assert_int_equal(rep->shared[2].amount_cents, 1000);
    assert_int_equal(rep->owners[0].shared_cents, 500 + 17308 + 667);
    assert_int_equal(rep->owners[1].shared_cents, 500 + 1442 + 333);
    assert_int_equal(rep->total_cents, 1300 + 1000 + 18750 + 1000);
    int64_t sum = 0;
    for (size_t i = 0; i < rep->nlines; i++)
        sum += rep->lines[i].amount_cents;
    assert_int_equal(sum, rep->total_cents);
    assert_string_equal(rep->lines[0].owner, "a");
    assert_string_equal(rep->lines[0].item, "gpu/a100");
    assert_string_equal(rep->currency, "EUR");
    td_chargeback_report_destroy(rep);

    /* by environment: the weights name tenants a (prod) and b (dev); each
     * tenant's weight goes to the environment its records ran in */
    assert_int_equal(td_chargeback_compute(p, recs, 4, 0, 10 * HOUR, TD_BY_ENVIRONMENT, pools, 1,
                                           &rep, &err),
                     TD_OK);
    assert_int_equal(rep->nowners, 3); /* (none): a's request has no environment label */
    assert_string_equal(rep->owners[0].owner, "(none)");
    assert_string_equal(rep->owners[1].owner, "dev");
    assert_string_equal(rep->owners[2].owner, "prod");
    int64_t platform[3] = {0};
    for (size_t i = 0; i < rep->nlines; i++)
        if (strcmp(rep->lines[i].item, "shared/platform") == 0)
            platform[strcmp(rep->lines[i].owner, "dev") == 0    ? 1
                     : strcmp(rep->lines[i].owner, "prod") == 0 ? 2
                                                                : 0] = rep->lines[i].amount_cents;
    assert_int_equal(platform[1], 333);
    assert_int_equal(platform[2], 667);
    assert_int_equal(platform[0], 0);
    td_chargeback_report_destroy(rep);

    assert_int_equal(td_chargeback_compute(p, recs, 4, 10 * HOUR, 0, TD_BY_TENANT, pools, 1,
                                           &rep, &err),
                     TD_EINVAL);
    assert_non_null(strstr(err.msg, "inverted"));
    assert_int_equal(td_chargeback_compute(p, recs, 4, HOUR, HOUR, TD_BY_TENANT, pools, 1, &rep,
                                           &err),
                     TD_EINVAL);
    assert_non_null(strstr(err.msg, "empty"));
    /* two intervals of one workload and flavor that overlap: counted twice */
    td_ledger_rec twice[] = {
        interval("a", "a", "prod", "a100", 0, 2 * HOUR, 2000, 0, 0, false),
        interval("a", "a", "prod", "a100", HOUR, 3 * HOUR, 2000, 0, 0, false),
    };
    assert_int_equal(td_chargeback_compute(p, twice, 2, 0, 10 * HOUR, TD_BY_TENANT, pools, 1,
                                           &rep, &err),
                     TD_EINVAL);
    assert_non_null(strstr(err.msg, "intervals i-a-0 and i-a-3600000000000 of workload a-ns/job "
                                    "(flavor a100) overlap"));
    twice[1].start_ns = 2 * HOUR; /* back to back is fine */
    assert_int_equal(td_chargeback_compute(p, twice, 2, 0, 10 * HOUR, TD_BY_TENANT, pools, 1,
                                           &rep, &err),
                     TD_OK);
    assert_int_equal(rep->owners[0].direct_cents, 1500); /* (4 + 2) GPU-h x 2.50 */
    td_chargeback_report_destroy(rep);
    /* a pool whose flavor has no price, when it sits idle, is an error */
    td_pool_gpus l4[] = {{"l4", "l4", 2}};
    assert_int_equal(td_chargeback_compute(p, recs, 4, 0, 10 * HOUR, TD_BY_TENANT, l4, 1, &rep,
                                           &err),
                     TD_EINVAL);
    assert_non_null(strstr(err.msg, "flavor l4 (NodePool l4)"));
    td_costpolicy_destroy(p);
}

/* The invariant over random ledgers: lines add up to the total, each shared
 * item's lines to its amount, each owner's lines to its total. */
static void test_report_random(void **state)
{
    (void)state;
    td_costpolicy *p = policy();
    static const char *const tenants[] = {"a", "b", "c", "d", "e", "f", "g"};
    static const char *const flavors[] = {"a100", "h100"};
    td_pool_gpus pools[] = {{"a100", "a100", 32}, {"h100", "h100", 16}};
    td_ledger_rec *recs = malloc(300 * sizeof *recs);
    assert_non_null(recs);
    for (int iter = 0; iter < 2000; iter++) {
        size_t n = rnd() % 300;
        int64_t to = (int64_t)(1 + rnd() % (24 * 7)) * HOUR + (int64_t)(rnd() % HOUR);
        for (size_t i = 0; i < n; i++) {
            const char *t = tenants[rnd() % 7];
            int64_t s = (int64_t)(rnd() % (uint64_t)(to + HOUR)) - HOUR / 2;
            if (rnd() % 3 == 0) {
                recs[i] = request(t, "completions", s, (int64_t)(rnd() % 100000),
                                  (int64_t)(rnd() % 100000));
            } else {
                int64_t d = (int64_t)(rnd() % (uint64_t)(10 * HOUR));
                recs[i] = interval(t, t, rnd() % 2 ? "prod" : "dev", flavors[rnd() % 2], s, s + d,
                                   (int64_t)(rnd() % 8001), (int64_t)(rnd() % 64001),
                                   (int64_t)(rnd() % (512 * GIB)), rnd() % 4 == 0);
                recs[i].storage_bytes = (int64_t)(rnd() % (100 * GIB));
                snprintf(recs[i].workload, sizeof recs[i].workload, "%s-ns/job-%zu", t, i);
            }
        }
        td_chargeback_report *rep = NULL;
        td_err err;
        td_status st = td_chargeback_compute(p, recs, n, 0, to,
                                             rnd() % 2 ? TD_BY_TENANT : TD_BY_ENVIRONMENT, pools,
                                             2, &rep, &err);
        if (st != TD_OK)
            fail_msg("iteration %d: %s", iter, err.msg);
        int64_t sum = 0, shared_sum[3] = {0};
        for (size_t i = 0; i < rep->nlines; i++) {
            assert_true(rep->lines[i].amount_cents >= 0);
            sum += rep->lines[i].amount_cents;
            for (size_t s = 0; s < rep->nshared; s++) {
                char item[TD_ITEM_MAX];
                snprintf(item, sizeof item, "shared/%s", rep->shared[s].name);
                if (strcmp(rep->lines[i].item, item) == 0)
                    shared_sum[s] += rep->lines[i].amount_cents;
            }
        }
        assert_int_equal(sum, rep->total_cents);
        assert_int_equal(rep->total_cents, rep->direct_cents + rep->shared_cents);
        for (size_t s = 0; s < rep->nshared; s++)
            assert_int_equal(shared_sum[s], rep->shared[s].amount_cents);
        int64_t owners = 0;
        for (size_t i = 0; i < rep->nowners; i++) {
            assert_int_equal(rep->owners[i].total_cents,
                             rep->owners[i].direct_cents + rep->owners[i].shared_cents);
            owners += rep->owners[i].total_cents;
        }
        assert_int_equal(owners, rep->total_cents);
        td_chargeback_report_destroy(rep);
    }
    free(recs);
    td_costpolicy_destroy(p);
}

static void test_percentiles(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int64_t s[3], e[3], v[3];
        size_t n;
        int permille;
        int64_t want;
    } rows[] = {
        {"nothing held: 0", {0}, {0}, {0}, 0, 950, 0},
        {"2 GPUs for 6 of 10 h: p50 2000", {0}, {6}, {2000}, 1, 500, 2000},
        {"1 GPU for 4 of 10 h: p50 0", {0}, {4}, {1000}, 1, 500, 0},
        {"1 GPU for 4 of 10 h: p95 1000", {0}, {4}, {1000}, 1, 950, 1000},
        {"overlap adds: 3000 for 1 h, p95 3000", {0, 5}, {6, 6}, {1000, 2000}, 2, 950, 3000},
        {"overlap adds: p90 is 1000", {0, 5}, {6, 6}, {1000, 2000}, 2, 900, 1000},
        {"clipped to the period", {-5, 8}, {2, 20}, {1000, 500}, 2, 500, 0},
        {"p100 is the peak", {0, 1, 2}, {3, 3, 3}, {1, 2, 4}, 3, 1000, 7},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int64_t s[3], e[3], out = -1;
        for (size_t k = 0; k < rows[i].n; k++) {
            s[k] = rows[i].s[k] * HOUR;
            e[k] = rows[i].e[k] * HOUR;
        }
        td_err err;
        if (td_pctl_time_weighted(s, e, rows[i].v, rows[i].n, 0, 10 * HOUR, rows[i].permille, &out,
                                  &err) != TD_OK ||
            out != rows[i].want) {
            print_error("%s: got %lld\n", rows[i].name, (long long)out);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
    int64_t out;
    td_err err;
    assert_int_equal(td_pctl_time_weighted(NULL, NULL, NULL, 0, 5, 5, 500, &out, &err), TD_EINVAL);
}

static const char platform_yaml[] =
    "apiVersion: v1\nkind: Namespace\nmetadata: {name: a-ns, labels: {team: a}}\n---\n"
    "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: compute, namespace: a-ns}\n"
    "spec: {hard: {requests.nvidia.com/gpu: \"8\", requests.cpu: \"16\", requests.memory: 64Gi}}\n"
    "---\n"
    "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: prio, namespace: a-ns}\n"
    "spec:\n  hard: {requests.nvidia.com/gpu: \"4\"}\n  scopeSelector:\n    matchExpressions:\n"
    "    - {scopeName: PriorityClass, operator: In, values: [production]}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: a}\n"
    "spec: {namespaces: [a-ns], labels: {team: a, project: p, environment: dev}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: idle}\n"
    "spec: {namespaces: [], labels: {team: idle}}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: completions}\n"
    "spec: {match: {pathPrefix: /v1/}, upstream: {address: \"127.0.0.1:1\"}, cost: {model: tokens}}\n"
    "---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: embed}\n"
    "spec: {match: {pathPrefix: /e/}, upstream: {address: \"127.0.0.1:1\"}, cost: {model: requests}}\n";

static void test_rightsize(void **state)
{
    (void)state;
    td_manifest *m;
    td_err err;
    assert_int_equal(td_manifest_parse("platform.yaml", platform_yaml, strlen(platform_yaml), &m,
                                       &err),
                     TD_OK);
    td_config_builder *b;
    td_config *c;
    assert_int_equal(td_config_builder_create(NULL, &b, &err), TD_OK);
    if (td_config_builder_add_manifest(b, m, &err) != TD_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(td_config_builder_finish(b, &c, &err), TD_OK);
    td_config_builder_destroy(b);
    td_manifest_destroy(m);
    td_costpolicy *p = policy();
    /* a holds 4 GPUs (2.5 used) for 8 of 10 h, plus 2 more (use unknown) for 1 h */
    td_ledger_rec recs[] = {
        interval("a", "a", "dev", "a100", 0, 8 * HOUR, 4000, 8000, 32 * GIB, false),
        interval("a", "a", "dev", "a100", HOUR, 2 * HOUR, 2000, 0, 0, false),
        request("a", "completions", HOUR, 10, 10),
    };
    recs[0].gpu_used_milli = 2500;
    td_rightsize *rs;
    assert_int_equal(td_rightsize_compute(c, p, recs, 3, 0, 10 * HOUR, TD_BY_TENANT, &rs, &err),
                     TD_OK);
    assert_int_equal(rs->nrows, 2);
    td_rightsize_row *a = &rs->rows[0];
    assert_string_equal(a->owner, "a");
    assert_int_equal(a->gpu_requested.p50, 4000);
    assert_int_equal(a->gpu_requested.p95, 6000);
    assert_int_equal(a->gpu_used.p50, 2500);
    assert_int_equal(a->gpu_used.p95, 4500);
    assert_true(a->gpu_used_estimated);
    assert_int_equal(a->gpu_quota_milli, 8000); /* the scoped quota is not the ceiling */
    assert_int_equal(a->cpu_quota_milli, 16000);
    assert_int_equal(a->memory_quota_bytes, 64 * GIB);
    assert_int_equal(a->recommended_gpus, 6); /* ceil(4.5 x 1.2 = 5.4) */
    assert_int_equal(a->recommended_cpu_milli, 10000); /* ceil(8 x 1.2 = 9.6) cores */
    assert_int_equal(a->recommended_memory_bytes, 39 * GIB); /* ceil(32 x 1.2 = 38.4) GiB */
    /* dev is not protected: 4 x 8 + 2 x 1 = 34 GPU-h could run interruptible, 60% of 85.00 */
    assert_int_equal(a->interruptible_candidate_gpu_milli_hours, 34000);
    assert_int_equal(a->interruptible_saving_cents, 5100);
    assert_string_equal(rs->rows[1].owner, "idle");
    assert_int_equal(rs->rows[1].gpu_requested.p95, 0);
    assert_int_equal(rs->rows[1].gpu_quota_milli, -1);
    assert_int_equal(rs->nidle_routes, 1);
    assert_string_equal(rs->idle_routes[0], "embed");
    td_rightsize_destroy(rs);

    /* by team: the namespace's team label finds the quota */
    assert_int_equal(td_rightsize_compute(c, p, recs, 3, 0, 10 * HOUR, TD_BY_TEAM, &rs, &err),
                     TD_OK);
    assert_string_equal(rs->rows[0].owner, "a");
    assert_int_equal(rs->rows[0].gpu_quota_milli, 8000);
    td_rightsize_destroy(rs);
    /* by namespace */
    assert_int_equal(td_rightsize_compute(c, p, recs, 3, 0, 10 * HOUR, TD_BY_NAMESPACE, &rs, &err),
                     TD_OK);
    assert_int_equal(rs->nrows, 1); /* a-ns: its quota, and the intervals' namespace */
    td_rightsize_destroy(rs);
    td_costpolicy_destroy(p);
    td_config_unref(c);
}

static void test_config_rejects_bad_policy(void **state)
{
    (void)state;
    static const char y[] = "apiVersion: tenantd.dev/v1alpha1\nkind: CostPolicy\n"
                            "metadata: {name: default}\nspec:\n  prices:\n"
                            "  - {resource: cpu, perHour: abc}\n";
    td_manifest *m;
    td_err err;
    assert_int_equal(td_manifest_parse("platform.yaml", y, strlen(y), &m, &err), TD_OK);
    td_config_builder *b;
    assert_int_equal(td_config_builder_create(NULL, &b, &err), TD_OK);
    assert_int_equal(td_config_builder_add_manifest(b, m, &err), TD_EINVAL);
    assert_non_null(strstr(err.msg, "platform.yaml:6: CostPolicy default: spec.prices[0].perHour"));
    td_config_builder_destroy(b);
    td_manifest_destroy(m);
}

int main(void)
{
    if (td_kinds_register_builtin(NULL) != TD_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_money_parse),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_price_records),
        cmocka_unit_test(test_missing_prices),
        cmocka_unit_test(test_price_choice),
        cmocka_unit_test(test_report_by_model),
        cmocka_unit_test(test_allocate_cases),
        cmocka_unit_test(test_allocate_random),
        cmocka_unit_test(test_report_hand),
        cmocka_unit_test(test_report_random),
        cmocka_unit_test(test_percentiles),
        cmocka_unit_test(test_rightsize),
        cmocka_unit_test(test_config_rejects_bad_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
