/* test_config.c - snapshot building: every kind validated with a message
 * that names file, line, object and field; a failed add changes nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kinds/builtin.h"
#include "core/config.h"
#include "core/kind.h"

static const char *const base_yaml =
    "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: t}\n"
    "spec: {namespaces: [a]}\n";

static const struct {
    const char *name;
    const char *yaml;
    td_status st;
    const char *msg; /* substring of the error */
} rows[] = {
    {"valid quota", "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q, namespace: a}\n"
                    "spec: {hard: {requests.cpu: '2', pods: 10}}\n",
     TD_OK, NULL},
    {"bad quantity", "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q, namespace: a}\n"
                     "spec:\n  hard:\n    cpu: 2x\n",
     TD_EINVAL, "c.yaml:6: ResourceQuota a/q: spec.hard.cpu: \"2x\" is not a quantity"},
    {"negative quantity", "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q, namespace: a}\n"
                          "spec:\n  hard:\n    cpu: '-1'\n",
     TD_EINVAL, "must not be negative"},
    {"unknown kind", "apiVersion: v1\nkind: Gadget\nmetadata: {name: g}\n", TD_EINVAL,
     "c.yaml:2: object: kind: unknown kind \"Gadget\""},
    {"wrong apiVersion", "apiVersion: v1\nkind: Tenant\nmetadata: {name: g}\nspec: {}\n",
     TD_EINVAL, "apiVersion: \"v1\" is not served for Tenant"},
    {"missing name", "apiVersion: v1\nkind: Namespace\nmetadata: {labels: {a: b}}\n", TD_EINVAL,
     "metadata.name: required"},
    {"bad name", "apiVersion: v1\nkind: Namespace\nmetadata: {name: Team_A}\n", TD_EINVAL,
     "is not a valid name"},
    {"namespaced kind needs namespace",
     "apiVersion: v1\nkind: LimitRange\nmetadata: {name: l}\nspec: {limits: []}\n", TD_EINVAL,
     "metadata.namespace: required for a LimitRange"},
    {"label values are strings", "apiVersion: v1\nkind: Namespace\nmetadata: {name: b, labels: {x: 1}}\n",
     TD_EINVAL, "metadata.labels: value of \"x\" must be a string"},
    {"limitrange default on Pod type",
     "apiVersion: v1\nkind: LimitRange\nmetadata: {name: l, namespace: a}\n"
     "spec: {limits: [{type: Pod, default: {cpu: '1'}}]}\n",
     TD_EINVAL, "default and defaultRequest may only be set for type Container"},
    {"scope selector In needs values",
     "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q, namespace: a}\n"
     "spec: {scopeSelector: {matchExpressions: [{scopeName: PriorityClass, operator: In}]}}\n",
     TD_EINVAL, "must be at least one value"},
    {"priority class value below int32", "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\n"
                                          "metadata: {name: w}\nvalue: -2147483649\n",
     TD_EINVAL, "PriorityClass w: value: must be an integer in [-2147483648, 2147483647], not "
                "-2147483649"},
    {"priority class value int32 min", "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\n"
                                        "metadata: {name: w}\nvalue: -2147483648\n",
     TD_OK, NULL},
    {"priority class value a real", "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\n"
                                    "metadata: {name: w}\nvalue: 1.5\n",
     TD_EINVAL, "value: must be an integer, not 1.5"},
    {"tenant concurrency past 32 bits",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: u}\n"
     "spec: {gateway: {concurrency: 4294967297}}\n",
     TD_EINVAL, "spec.gateway.concurrency: must be an integer in [0, 2147483647], not 4294967297"},
    {"tenant concurrency a string",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: u}\n"
     "spec: {gateway: {concurrency: \"8\"}}\n",
     TD_EINVAL, "spec.gateway.concurrency: must be an integer, not \"8\""},
    {"limitedResources", "apiVersion: tenantd.dev/v1alpha1\nkind: AdmissionPolicy\n"
                         "metadata: {name: default}\nspec:\n  resourceQuota:\n"
                         "    limitedResources:\n    - resource: pods\n      matchScopes:\n"
                         "      - {scopeName: PriorityClass, operator: In, values: [high]}\n",
     TD_OK, NULL},
    {"limitedResources In without values",
     "apiVersion: tenantd.dev/v1alpha1\nkind: AdmissionPolicy\n"
     "metadata: {name: default}\nspec:\n  resourceQuota:\n"
     "    limitedResources:\n    - resource: pods\n      matchScopes:\n"
     "      - {scopeName: PriorityClass, operator: In}\n",
     TD_EINVAL, "spec.resourceQuota.limitedResources[0].matchScopes[0]: must be at least one value"},
    {"limitedResources without resource",
     "apiVersion: tenantd.dev/v1alpha1\nkind: AdmissionPolicy\n"
     "metadata: {name: default}\nspec:\n  resourceQuota:\n    limitedResources: [{}]\n",
     TD_EINVAL, "spec.resourceQuota.limitedResources[0]: resource: required"},
    {"tenant unknown field", "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: u}\n"
                             "spec:\n  namespacez: [a]\n",
     TD_EINVAL, "c.yaml:5: Tenant u: spec: unknown field \"namespacez\""},
    {"tenant bad key hash", "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: u}\n"
                            "spec: {apiKeys: [{sha256: abc}]}\n",
     TD_EINVAL, "sha256 must be 64 hex digits"},
    {"tenant bad rate period",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: u}\n"
     "spec: {gateway: {rate: {cost: 10, per: soon}}}\n",
     TD_EINVAL, "spec.gateway.rate.per: must be a duration"},
    {"namespace owned twice", "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: u}\n"
                              "spec: {namespaces: [a]}\n",
     TD_EINVAL, "namespace \"a\" already belongs to tenant"},
    {"nodepool bad effect",
     "apiVersion: tenantd.dev/v1alpha1\nkind: NodePool\nmetadata: {name: p}\n"
     "spec: {taint: {key: k, effect: Sometimes}}\n",
     TD_EINVAL, "spec.taint.effect: must be NoSchedule"},
    {"route without prefix", "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
                             "spec: {match: {}, upstream: {address: '127.0.0.1:1'}}\n",
     TD_EINVAL, "spec.match.pathPrefix: required"},
    {"two global default priority classes",
     "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p1}\nvalue: 1\n"
     "globalDefault: true\n---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\n"
     "metadata: {name: p2}\nvalue: 2\nglobalDefault: true\n",
     TD_EINVAL, "only one may be"},
    {"one key, two tenants",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: k1}\n"
     "spec: {apiKeys: [{sha256: 7dbaf6a9f8103761445f073645d544d53cc1f4584dbcd673ec93ce854bdedae5}]}\n---\n"
     "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: k2}\n"
     "spec: {apiKeys: [{sha256: 7DBAF6A9F8103761445F073645D544D53CC1F4584DBCD673EC93CE854BDEDAE5}]}\n",
     TD_EINVAL, "a key names one tenant"},
    {"route port out of range",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {address: 'localhost:70000'}}\n",
     TD_EINVAL, "spec.upstream.address: required: HOST:PORT"},
    {"route unknown cost field",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {address: 'h:1'}, cost: {modle: tokens}}\n",
     TD_EINVAL, "spec.cost: unknown field \"modle\""},
    {"route maxOutputTokens accepted",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {address: 'h:1'}, cost: {maxOutputTokens: 8192}}\n",
     TD_OK, NULL},
    {"route maxOutputTokens zero",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec:\n  match: {pathPrefix: /v1/}\n  upstream: {address: 'h:1'}\n"
     "  cost: {maxOutputTokens: 0}\n",
     TD_EINVAL, "c.yaml:7: Route r: spec.cost.maxOutputTokens: must be an integer in [1, 10000000], not 0"},
    {"route maxOutputTokens not an integer",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {address: 'h:1'}, cost: {maxOutputTokens: lots}}\n",
     TD_EINVAL, "Route r: spec.cost.maxOutputTokens: must be an integer"},
    {"route maxOutputTokens too large",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {address: 'h:1'}, cost: {maxOutputTokens: 10000001}}\n",
     TD_EINVAL, "spec.cost.maxOutputTokens: must be an integer in [1, 10000000], not 10000001"},
    {"route endpoints accepted",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {endpoints: [{address: 'h:1'}, "
     "{address: 'h:2', weight: 3}], balance: roundRobin}}\n",
     TD_OK, NULL},
    {"route address and endpoints",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {address: 'h:1', endpoints: [{address: 'h:2'}]}}\n",
     TD_EINVAL, "spec.upstream.endpoints: give either spec.upstream.address"},
    {"route endpoints empty",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {endpoints: []}}\n",
     TD_EINVAL, "spec.upstream.endpoints: must be a list of 1 to 64 endpoints"},
    {"route endpoint without port",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {endpoints: [{address: 'h:1'}, {address: h}]}}\n",
     TD_EINVAL, "spec.upstream.endpoints[1]: address: required: HOST:PORT"},
    {"route endpoint twice",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {endpoints: [{address: 'h:1'}, {address: 'h:1'}]}}\n",
     TD_EINVAL, "spec.upstream.endpoints[1]: address \"h:1\" is listed twice"},
    {"route endpoint weight zero",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {endpoints: [{address: 'h:1', weight: 0}]}}\n",
     TD_EINVAL, "spec.upstream.endpoints[0]: must be"},
    {"route endpoint unknown field",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {endpoints: [{address: 'h:1', wieght: 2}]}}\n",
     TD_EINVAL, "spec.upstream.endpoints[0]: unknown field \"wieght\""},
    {"route balance unknown",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {address: 'h:1', balance: random}}\n",
     TD_EINVAL, "spec.upstream.balance: must be leastRequests (the default), roundRobin or queueDepth"},
    {"route healthCheck accepted",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {address: 'h:1', healthCheck: {path: /health, "
     "interval: 2s, timeout: 500ms, unhealthyThreshold: 3, healthyThreshold: 2}}}\n",
     TD_OK, NULL},
    {"route healthCheck bad path",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {address: 'h:1', healthCheck: {path: health}}}\n",
     TD_EINVAL, "spec.upstream.healthCheck.path: must be a path starting with '/'"},
    {"route healthCheck bad interval",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {address: 'h:1', healthCheck: {interval: often}}}\n",
     TD_EINVAL, "spec.upstream.healthCheck.interval: must be a duration"},
    {"route healthCheck zero threshold",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {address: 'h:1', healthCheck: "
     "{unhealthyThreshold: 0}}}\n",
     TD_EINVAL, "spec.upstream.healthCheck.unhealthyThreshold: must be an integer in [1,"},
    {"route queueDepth accepted",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {endpoints: [{address: 'h:1'}], balance: "
     "queueDepth, scrapeEvery: 500ms, metrics: {path: /m, waiting: 'sglang:num_queue_reqs', "
     "kvCache: kv_usage}}}\n",
     TD_OK, NULL},
    {"route metrics bad name",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {address: 'h:1', balance: queueDepth, "
     "metrics: {waiting: 'a b'}}}\n",
     TD_EINVAL, "spec.upstream.metrics.waiting: must be a Prometheus metric name"},
    {"route scrapeEvery bad",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {address: 'h:1', scrapeEvery: soon}}\n",
     TD_EINVAL, "spec.upstream.scrapeEvery: must be a duration"},
    {"route resolveEvery bad",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {address: 'svc.ns:1', resolveEvery: often}}\n",
     TD_EINVAL, "spec.upstream.resolveEvery: must be a duration"},
    {"route resolveEvery accepted",
     "apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: r}\n"
     "spec: {match: {pathPrefix: /v1/}, upstream: {endpoints: [{address: 'vllm.ml.svc:8000', "
     "weight: 2}], resolveEvery: 2s}}\n",
     TD_OK, NULL},
    {"kueue v1beta2 accepted",
     "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq}\nspec: {}\n",
     TD_OK, NULL},
};

static void test_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_err err = {{0}};
        td_manifest *base = NULL, *m = NULL;
        assert_int_equal(td_manifest_parse("base.yaml", base_yaml, strlen(base_yaml), &base, &err),
                         TD_OK);
        td_config_builder *b = NULL;
        assert_int_equal(td_config_builder_create(NULL, &b, &err), TD_OK);
        assert_int_equal(td_config_builder_add_manifest(b, base, &err), TD_OK);
        td_status st = td_manifest_parse("c.yaml", rows[i].yaml, strlen(rows[i].yaml), &m, &err);
        if (st == TD_OK)
            st = td_config_builder_add_manifest(b, m, &err);
        td_config *c = NULL;
        if (st == TD_OK)
            st = td_config_builder_finish(b, &c, &err);
        if (st != rows[i].st)
            fail_msg("%s: status %d, want %d (%s)", rows[i].name, st, rows[i].st, err.msg);
        if (rows[i].msg && !strstr(err.msg, rows[i].msg))
            fail_msg("%s: message \"%s\" lacks \"%s\"", rows[i].name, err.msg, rows[i].msg);
        td_config_unref(c);
        td_config_builder_destroy(b);
        td_manifest_destroy(m);
        td_manifest_destroy(base);
    }
}

static void test_lookup_and_snapshots(void **state)
{
    (void)state;
    const char *y = "apiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n---\n"
                    "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q2, namespace: b}\n"
                    "spec: {hard: {pods: '1'}}\n---\n"
                    "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q1, namespace: b}\n"
                    "spec: {hard: {pods: '2'}}\n---\n"
                    "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q0, namespace: a}\n"
                    "spec: {hard: {pods: '3'}}\n---\n"
                    "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: tb}\n"
                    "spec: {namespaces: [b]}\n";
    td_manifest *m = NULL;
    td_err err;
    assert_int_equal(td_manifest_parse("l.yaml", y, strlen(y), &m, &err), TD_OK);
    td_config_builder *b = NULL;
    td_config *c1 = NULL, *c2 = NULL;
    assert_int_equal(td_config_builder_create(NULL, &b, &err), TD_OK);
    assert_int_equal(td_config_builder_add_manifest(b, m, &err), TD_OK);
    assert_int_equal(td_config_builder_finish(b, &c1, &err), TD_OK);
    td_config_builder_destroy(b);

    json_t *const *list;
    assert_int_equal(td_config_list(c1, "ResourceQuota", "b", &list), 2);
    assert_string_equal(td_json_str(list[0], "metadata.name"), "q1"); /* sorted */
    assert_string_equal(td_json_str(list[1], "metadata.name"), "q2");
    assert_int_equal(td_config_list(c1, "ResourceQuota", NULL, &list), 3);
    assert_int_equal(td_config_list(c1, "LimitRange", "b", &list), 0);
    assert_non_null(td_config_get(c1, "ResourceQuota", "a", "q0"));
    assert_null(td_config_get(c1, "ResourceQuota", "b", "q0"));
    assert_string_equal(td_json_str(td_config_tenant_for_namespace(c1, "b"), "metadata.name"),
                        "tb");
    assert_null(td_config_tenant_for_namespace(c1, "zzz"));
    assert_string_equal(td_kind_canonical("quota"), "ResourceQuota");
    assert_string_equal(td_kind_canonical("NAMESPACES"), "Namespace");
    assert_null(td_kind_canonical("widgets"));

    /* A new snapshot from the old one; the old is unchanged. */
    assert_int_equal(td_config_builder_create(c1, &b, &err), TD_OK);
    assert_int_equal(td_config_builder_delete(b, "quota", "b", "q1", &err), TD_OK);
    assert_int_equal(td_config_builder_delete(b, "quota", "b", "q1", &err), TD_ENOTFOUND);
    assert_int_equal(td_config_builder_finish(b, &c2, &err), TD_OK);
    td_config_builder_destroy(b);
    assert_int_equal(td_config_list(c2, "ResourceQuota", "b", &list), 1);
    assert_int_equal(td_config_list(c1, "ResourceQuota", "b", &list), 2);
    td_config_unref(c1);
    td_config_unref(c2);
    td_manifest_destroy(m);
}

/* td_json_unknown_field: the first key outside the allowed list, and that
 * list joined for the message, cut at the buffer's size. */
static void test_unknown_field(void **state)
{
    (void)state;
    static const char *const allowed[] = {"rate", "concurrency", NULL};
    json_t *m = json_loads("{\"rate\":1,\"concurency\":[2],\"zz\":3}", 0, NULL);
    assert_non_null(m);
    json_t *val = NULL;
    char known[64], cut[8];
    const char *k = td_json_unknown_field(m, allowed, &val, known, sizeof known);
    assert_non_null(k);
    assert_string_equal(k, "concurency");
    assert_true(json_is_array(val));
    assert_string_equal(known, "rate, concurrency");
    assert_string_equal(td_json_unknown_field(m, allowed, &val, cut, sizeof cut), "concurency");
    assert_string_equal(cut, "rate, c");
    json_object_del(m, "concurency");
    json_object_del(m, "zz");
    assert_null(td_json_unknown_field(m, allowed, &val, known, sizeof known));
    json_t *empty = json_object();
    assert_null(td_json_unknown_field(empty, allowed, &val, known, sizeof known));
    json_decref(empty);
    json_decref(m);
}

/* td_config_load_text: a snapshot from text, and errors that name the
 * text's file name and line, with nothing returned. */
static void test_load_text(void **state)
{
    (void)state;
    static const char good[] = "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\n"
                               "metadata: {name: t}\nspec: {namespaces: [n]}\n";
    static const char bad[] = "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\n"
                              "metadata: {name: t}\nspec: {namespacez: [n]}\n";
    td_config *c = NULL;
    td_err err;
    assert_int_equal(td_config_load_text("x.yaml", good, strlen(good), &c, &err), TD_OK);
    assert_non_null(td_config_get(c, "Tenant", NULL, "t"));
    td_config_unref(c);
    c = NULL;
    assert_int_equal(td_config_load_text("x.yaml", bad, strlen(bad), &c, &err), TD_EINVAL);
    assert_null(c);
    assert_non_null(strstr(err.msg, "x.yaml:4"));
    assert_int_equal(td_config_load_text("y.yaml", "a: [", 4, &c, &err), TD_EINVAL);
    assert_null(c);
    assert_non_null(strstr(err.msg, "y.yaml"));
}

/* Attachments: a value offered by the code that made the snapshot is what
 * readers get (the build never runs); a second offer loses and is
 * destroyed at once; the winner is destroyed with the snapshot. */
typedef struct {
    td_config_attachment hdr;
    int *destroyed;
} counted;

static int builds;

static void counted_destroy(td_config_attachment *a)
{
    (*((counted *)a)->destroyed)++;
    test_free(a);
}

static td_config_attachment *counted_build(const td_config *c)
{
    (void)c;
    builds++;
    return NULL;
}

static void test_attachment_offer(void **state)
{
    (void)state;
    td_config *c = NULL;
    td_err err;
    assert_int_equal(td_config_empty(&c, &err), TD_OK);
    int first = 0, second = 0;
    counted *a = test_malloc(sizeof *a), *b = test_malloc(sizeof *b);
    a->hdr.destroy = b->hdr.destroy = counted_destroy;
    a->destroyed = &first;
    b->destroyed = &second;
    assert_ptr_equal(td_config_attachment_offer(c, TD_CONFIG_ATTACH_QUEUE, &a->hdr), &a->hdr);
    assert_ptr_equal(td_config_attachment_offer(c, TD_CONFIG_ATTACH_QUEUE, &b->hdr), &a->hdr);
    assert_int_equal(second, 1);
    builds = 0;
    assert_ptr_equal(td_config_attachment_get(c, TD_CONFIG_ATTACH_QUEUE, counted_build), &a->hdr);
    assert_int_equal(builds, 0);
    /* another slot is still empty: its build runs (and may fail) */
    assert_null(td_config_attachment_get(c, TD_CONFIG_ATTACH_ADMISSION, counted_build));
    assert_int_equal(builds, 1);
    assert_null(td_config_attachment_offer(c, TD_CONFIG_ATTACH_QUEUE, NULL));
    assert_int_equal(first, 0);
    td_config_unref(c);
    assert_int_equal(first, 1);
}

/* td_json_int: where a JSON number becomes a C integer, the boundaries. */
static void test_json_int(void **state)
{
    (void)state;
    static const struct {
        const char *name, *json;
        td_status st;
        long long want;
        const char *msg;
    } rows[] = {
        {"int32 min", "-2147483648", TD_OK, INT32_MIN, NULL},
        {"below int32", "-2147483649", TD_EINVAL, 0,
         "must be an integer in [-2147483648, 2147483647], not -2147483649"},
        {"int32 max", "2147483647", TD_OK, INT32_MAX, NULL},
        {"above int32", "2147483648", TD_EINVAL, 0,
         "must be an integer in [-2147483648, 2147483647], not 2147483648"},
        {"int64 max", "9223372036854775807", TD_EINVAL, 0, "not 9223372036854775807"},
        {"zero", "0", TD_OK, 0, NULL},
        {"an exponent is a real", "1e3", TD_EINVAL, 0, "must be an integer, not 1000.0"},
        {"a fraction", "1.5", TD_EINVAL, 0, "must be an integer, not 1.5"},
        {"a whole real", "2.0", TD_EINVAL, 0, "must be an integer, not 2.0"},
        {"true", "true", TD_EINVAL, 0, "must be an integer, not true"},
        {"null", "null", TD_EINVAL, 0, "must be an integer, not null"},
        {"a string", "\"1\"", TD_EINVAL, 0, "must be an integer, not \"1\""},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        json_t *v = json_loads(rows[i].json, JSON_DECODE_ANY, NULL);
        assert_non_null(v);
        long long got = -7;
        int32_t got32 = -7;
        td_err err = {{0}};
        td_status st = td_json_int(v, INT32_MIN, INT32_MAX, &got, &err);
        if (st != rows[i].st || (st == TD_OK && got != rows[i].want) ||
            (rows[i].msg && !strstr(err.msg, rows[i].msg)))
            fail_msg("%s: status %d, value %lld, message \"%s\"", rows[i].name, st, got, err.msg);
        if (td_json_int32(v, &got32, &err) != rows[i].st || (st == TD_OK && got32 != rows[i].want))
            fail_msg("%s: td_json_int32 disagrees", rows[i].name);
        if (st != TD_OK)
            assert_int_equal(got, -7); /* nothing written on a refusal */
        json_decref(v);
    }
    long long x;
    assert_int_equal(td_json_int(NULL, 0, 1, &x, NULL), TD_EINVAL); /* absent: not a number */
}

/* A namespace object named ns-<i>, or a quota q-<i> in namespace a or b. */
static json_t *chunk_obj(int quota, int i)
{
    char name[32];
    snprintf(name, sizeof name, "%s-%04d", quota ? "q" : "ns", i);
    if (!quota)
        return json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                         "metadata", "name", name);
    return json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:{s:s}}}", "apiVersion", "v1", "kind",
                     "ResourceQuota", "metadata", "name", name, "namespace", i % 2 ? "b" : "a",
                     "spec", "hard", "pods", "10");
}

/* c holds exactly the objects present[] says, in key order, each found by
 * td_config_get, each kind's (and namespace's) run contiguous. */
static void chunk_check(const td_config *c, const bool *present, int n)
{
    json_t *const *list;
    /* the base's Namespace "a" first, then ns-0000... */
    size_t nn = td_config_list(c, "Namespace", NULL, &list), k = 1;
    assert_true(nn >= 1);
    assert_string_equal(td_json_str(list[0], "metadata.name"), "a");
    size_t nb = 0, nq = 0;
    json_t *const *qb;
    size_t nqb = td_config_list(c, "ResourceQuota", "b", &qb);
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "ns-%04d", i);
        json_t *got = td_config_get(c, "Namespace", NULL, name);
        assert_int_equal(got != NULL, present[i]);
        if (present[i]) {
            assert_true(k < nn);
            assert_ptr_equal(list[k++], got);
        }
        snprintf(name, sizeof name, "q-%04d", i);
        got = td_config_get(c, "ResourceQuota", i % 2 ? "b" : "a", name);
        assert_int_equal(got != NULL, present[n + i]);
        if (present[n + i] && i % 2) {
            assert_true(nb < nqb);
            assert_ptr_equal(qb[nb++], got);
        }
        nq += present[n + i];
    }
    assert_int_equal(k, nn);
    assert_int_equal(nb, nqb);
    json_t *const *all;
    assert_int_equal(td_config_all(c, &all), nn + nq + 1); /* and the Tenant */
    json_t *const *qs;
    assert_int_equal(td_config_list(c, "ResourceQuota", NULL, &qs), nq);
}

/* Snapshots share their chunks: thousands of adds and deletes (seeded),
 * a snapshot every 40 steps, each checked against what it should hold,
 * and the one before it unchanged by the builder over it. */
static void test_shared_chunks(void **state)
{
    (void)state;
    enum { N = 1500, STEPS = 4000 };
    static bool want[2 * N], prev_want[2 * N];
    memset(want, 0, sizeof want);
    td_err err;
    td_config *cur = NULL, *prev = NULL;
    assert_int_equal(td_config_load_text("c.yaml", base_yaml, strlen(base_yaml), &cur, &err),
                     TD_OK);
    memcpy(prev_want, want, sizeof want);
    unsigned seed = 24;
    td_config_builder *b = NULL;
    for (int step = 0; step < STEPS; step++) {
        if (!b)
            assert_int_equal(td_config_builder_create(cur, &b, &err), TD_OK);
        seed = seed * 1103515245u + 12345u;
        int quota = (seed >> 8) & 1, i = (int)((seed >> 10) % N);
        /* mostly adds early, as many deletes as adds later */
        bool del = ((seed >> 20) % 4) < (step < STEPS / 2 ? 1u : 2u);
        char name[32];
        snprintf(name, sizeof name, "%s-%04d", quota ? "q" : "ns", i);
        if (del) {
            td_status st = td_config_builder_delete(b, quota ? "ResourceQuota" : "Namespace",
                                                    i % 2 ? "b" : "a", name, &err);
            assert_int_equal(st, want[quota * N + i] ? TD_OK : TD_ENOTFOUND);
            want[quota * N + i] = false;
        } else {
            json_t *o = chunk_obj(quota, i);
            assert_int_equal(td_config_builder_add(b, o, NULL, &err), TD_OK);
            json_decref(o);
            want[quota * N + i] = true;
        }
        if (step % 40 != 39)
            continue;
        td_config *next = NULL;
        assert_int_equal(td_config_builder_finish(b, &next, &err), TD_OK);
        td_config_builder_destroy(b);
        b = NULL;
        td_config_unref(prev);
        prev = cur;
        cur = next;
        chunk_check(prev, prev_want, N);
        chunk_check(cur, want, N);
        memcpy(prev_want, want, sizeof want);
    }
    td_config_builder_destroy(b);
    td_config_unref(prev);
    td_config_unref(cur);
}

int main(void)
{
    if (td_kinds_register_builtin(NULL) != TD_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_json_int),
        cmocka_unit_test(test_lookup_and_snapshots),
        cmocka_unit_test(test_unknown_field),
        cmocka_unit_test(test_load_text),
        cmocka_unit_test(test_attachment_offer),
        cmocka_unit_test(test_shared_chunks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
