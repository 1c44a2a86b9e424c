/* test_podres.c - pod request defaulting and effective pod requests/limits.
 * Rows port Kubernetes' SetDefaults_Pod behaviour (pkg/apis/core/v1
 * defaults_test.go: TestSetDefaultRequestsPod*), the resource sums of
 * k8s.io/component-helpers/resource helpers_test.go (TestPodRequestsAndLimits,
 * sidecar and overhead cases) and pods_test.go's init-container maximum case.
 * JSON in the tables is written with ' for " to stay readable. Each table
 * loop reports every failing row, then fails once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "admission/podres_internal.h"

/* Parses s with ' standing for ". */
static json_t *J(const char *s)
{
    char *copy = strdup(s);
    json_t *v;
    json_error_t e;

    for (char *p = copy; *p; p++)
        if (*p == '\'')
            *p = '"';
    v = json_loads(copy, 0, &e);
    if (v == NULL)
        fail_msg("bad test JSON (%s): %s", e.text, copy);
    free(copy);
    return v;
}

/* "a=1,b=2" as the quota messages print resource lists. */
static void print_list(const td_resources *r, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < r->n; i++) {
        char q[TD_QUANTITY_STR_MAX];
        td_quantity_format(&r->items[i].q, q, sizeof q);
        len += (size_t)snprintf(buf + len, n - len, "%s%s=%s", i ? "," : "", r->items[i].name, q);
        if (len >= n)
            break;
    }
}

#define CTR(name, req, lim)                                                                      \
    "{'name':'" name "','resources':{'requests':{" req "},'limits':{" lim "}}}"
#define SIDECAR(name, req, lim)                                                                  \
    "{'name':'" name "','restartPolicy':'Always','resources':{'requests':{" req                 \
    "},'limits':{" lim "}}}"
#define POD(ctrs) "{'metadata':{'name':'p'},'spec':{'containers':[" ctrs "]}}"
#define PODI(ctrs, inits)                                                                        \
    "{'metadata':{'name':'p'},'spec':{'containers':[" ctrs "],'initContainers':[" inits "]}}"

/* ---- td_pod_default_requests ---- */

static const struct {
    const char *name;
    const char *pod;
    const char *want; /* the pod afterwards, or the error message */
    td_status st;
} default_rows[] = {
    {"limits only: requests copy limits",
     POD("{'name':'a','resources':{'limits':{'cpu':'500m','memory':'1Gi'}}}"),
     POD("{'name':'a','resources':{'limits':{'cpu':'500m','memory':'1Gi'},"
         "'requests':{'cpu':'500m','memory':'1Gi'}}}"),
     TD_OK},
    {"a request present is kept",
     POD(CTR("a", "'cpu':'100m'", "'cpu':'500m','memory':'1Gi'")),
     POD(CTR("a", "'cpu':'100m','memory':'1Gi'", "'cpu':'500m','memory':'1Gi'")), TD_OK},
    {"values copied as written", POD("{'name':'a','resources':{'limits':{'cpu':'0.5'}}}"),
     POD("{'name':'a','resources':{'limits':{'cpu':'0.5'},'requests':{'cpu':'0.5'}}}"), TD_OK},
    {"init containers too",
     PODI(CTR("a", "", ""), "{'name':'i','resources':{'limits':{'memory':'64Mi'}}}"),
     PODI(CTR("a", "", ""),
          "{'name':'i','resources':{'limits':{'memory':'64Mi'},'requests':{'memory':'64Mi'}}}"),
     TD_OK},
    {"requests null replaced",
     POD("{'name':'a','resources':{'requests':null,'limits':{'cpu':'1'}}}"),
     POD("{'name':'a','resources':{'requests':{'cpu':'1'},'limits':{'cpu':'1'}}}"), TD_OK},
    {"no limits: unchanged", POD(CTR("a", "'cpu':'1'", "")), POD(CTR("a", "'cpu':'1'", "")),
     TD_OK},
    {"extended resource", POD("{'name':'a','resources':{'limits':{'nvidia.com/gpu':'1'}}}"),
     POD("{'name':'a','resources':{'limits':{'nvidia.com/gpu':'1'},"
         "'requests':{'nvidia.com/gpu':'1'}}}"),
     TD_OK},
    {"no spec", "{'metadata':{'name':'p'}}", "{'metadata':{'name':'p'}}", TD_OK},
    {"pod-level requests from container requests",
     "{'spec':{'resources':{'limits':{'cpu':'2','memory':'2Gi'}},'containers':["
     "{'name':'a','resources':{'requests':{'cpu':'500m'}}},"
     "{'name':'b','resources':{'requests':{'cpu':'250m'}}}]}}",
     "{'spec':{'resources':{'limits':{'cpu':'2','memory':'2Gi'},"
     "'requests':{'cpu':'750m','memory':'2Gi'}},'containers':["
     "{'name':'a','resources':{'requests':{'cpu':'500m'}}},"
     "{'name':'b','resources':{'requests':{'cpu':'250m'}}}]}}",
     TD_OK},
    {"pod-level request kept",
     "{'spec':{'resources':{'requests':{'cpu':'1'},'limits':{'cpu':'2'}},'containers':[]}}",
     "{'spec':{'resources':{'requests':{'cpu':'1'},'limits':{'cpu':'2'}},'containers':[]}}",
     TD_OK},
    {"bad quantity names the field", POD(CTR("a", "", "'cpu':'2x'")),
     "spec.containers[0].resources.limits.cpu: \"2x\" is not a quantity", TD_EINVAL},
    {"bad init quantity", PODI(CTR("a", "", ""), CTR("i", "'memory':'1Qi'", "")),
     "spec.initContainers[0].resources.requests.memory: \"1Qi\" is not a quantity", TD_EINVAL},
    {"quantity of wrong type", POD(CTR("a", "", "'cpu':true")),
     "spec.containers[0].resources.limits.cpu: must be a quantity, not a boolean", TD_EINVAL},
    {"containers not an array", "{'spec':{'containers':{}}}",
     "spec.containers: must be an array, not an object", TD_EINVAL},
    {"container not an object", "{'spec':{'containers':[1]}}",
     "spec.containers[0]: must be an object, not a number", TD_EINVAL},
    {"pod not an object", "[]", "pod: must be an object, not an array", TD_EINVAL},
};

static void test_default_requests(void **state)
{
    (void)state;
    int failed = 0;
    for (size_t i = 0; i < sizeof default_rows / sizeof default_rows[0]; i++) {
        json_t *pod = J(default_rows[i].pod);
        json_t *before = json_deep_copy(pod);
        td_err err = {{0}};
        td_status st = td_pod_default_requests(pod, &err);
        if (st != default_rows[i].st) {
            print_message("%s: status %d, want %d (%s)\n", default_rows[i].name, st,
                          default_rows[i].st, err.msg);
            failed++;
        } else if (st == TD_OK) {
            json_t *want = J(default_rows[i].want);
            if (!json_equal(pod, want)) {
                char *got = json_dumps(pod, JSON_SORT_KEYS | JSON_COMPACT);
                print_message("%s: got %s\n", default_rows[i].name, got);
                free(got);
                failed++;
            }
            json_decref(want);
        } else {
            if (strcmp(err.msg, default_rows[i].want) != 0) {
                print_message("%s: message\n  got  %s\n  want %s\n", default_rows[i].name,
                              err.msg, default_rows[i].want);
                failed++;
            }
            if (!json_equal(pod, before)) {
                print_message("%s: pod changed on failure\n", default_rows[i].name);
                failed++;
            }
        }
        /* The parse-keeping variant: the same pod, status and message, and
         * a kept parse equal to a fresh parse of the defaulted pod. */
        json_t *pod2 = json_deep_copy(before);
        td_err err2 = {{0}};
        td__pod kept, fresh;
        td_status st2 = td__pod_default_requests_parsed(pod2, &kept, &err2);
        if (st2 != st || strcmp(err2.msg, err.msg) != 0 || !json_equal(pod, pod2)) {
            print_message("%s: parsed variant: status %d (%s)\n", default_rows[i].name, st2,
                          err2.msg);
            failed++;
        } else if (st2 == TD_OK) {
            if (td__pod_parse(pod2, &fresh, NULL) != TD_OK || !td__pod_same(&kept, &fresh)) {
                print_message("%s: kept parse differs from a fresh one\n", default_rows[i].name);
                failed++;
            }
            td__pod_fini(&fresh);
            td__pod_fini(&kept);
        }
        json_decref(pod2);
        json_decref(pod);
        json_decref(before);
    }
    if (failed)
        fail_msg("%d default row(s) failed", failed);
}

/* ---- td__pod_refresh: a kept parse after others change the pod ---- */

static const struct {
    const char *name;
    const char *pod;
    const char *path; /* member to replace: "c0" container 0's resources, "c1obj" container
                         1 whole, "overhead", "resources", "containers", "init" */
    const char *value; /* its new value (JSON), or NULL to remove it */
    td_status st;
} refresh_rows[] = {
    {"nothing replaced", POD(CTR("a", "'cpu':'1'", "'cpu':'2'")), "none", NULL, TD_OK},
    {"one container's resources", POD(CTR("a", "'cpu':'1'", "") "," CTR("b", "", "")), "c0",
     "{'limits':{'memory':'1Gi'}}", TD_OK},
    {"one container's resources removed", POD(CTR("a", "'cpu':'1'", "")), "c0", NULL, TD_OK},
    {"a container replaced", POD(CTR("a", "'cpu':'1'", "") "," CTR("b", "", "")), "c1obj",
     "{'name':'z','resources':{'requests':{'cpu':'3'}}}", TD_OK},
    {"overhead added", POD(CTR("a", "'cpu':'1'", "")), "overhead", "{'cpu':'250m'}", TD_OK},
    {"pod-level resources added", POD(CTR("a", "'cpu':'1'", "")), "resources",
     "{'limits':{'cpu':'4'}}", TD_OK},
    {"container list replaced", POD(CTR("a", "'cpu':'1'", "")), "containers",
     "[{'name':'x'},{'name':'y','resources':{'limits':{'cpu':'1'}}}]", TD_OK},
    {"init containers added", POD(CTR("a", "'cpu':'1'", "")), "init",
     "[{'name':'i','restartPolicy':'Always','resources':{'limits':{'cpu':'1'}}}]", TD_OK},
    {"bad overhead reported", POD(CTR("a", "'cpu':'1'", "")), "overhead", "{'cpu':'1x'}",
     TD_EINVAL},
    {"bad replaced container reported", POD(CTR("a", "'cpu':'1'", "")), "c0",
     "{'limits':{'cpu':[]}}", TD_EINVAL},
};

static void test_refresh(void **state)
{
    (void)state;
    int failed = 0;
    for (size_t i = 0; i < sizeof refresh_rows / sizeof refresh_rows[0]; i++) {
        json_t *pod = J(refresh_rows[i].pod);
        json_t *spec = json_object_get(pod, "spec");
        json_t *v = refresh_rows[i].value ? J(refresh_rows[i].value) : NULL;
        const char *w = refresh_rows[i].path;
        td__pod kept, fresh;
        td_err e1 = {{0}}, e2 = {{0}};
        assert_int_equal(td__pod_parse(pod, &kept, NULL), TD_OK);
        if (strcmp(w, "c0") == 0) {
            /* a new container object whose resources change, as the
             * resources steps make them */
            json_t *c = json_copy(json_array_get(json_object_get(spec, "containers"), 0));
            if (v)
                json_object_set(c, "resources", v);
            else
                json_object_del(c, "resources");
            json_array_set_new(json_object_get(spec, "containers"), 0, c);
        } else if (strcmp(w, "c1obj") == 0) {
            json_array_set(json_object_get(spec, "containers"), 1, v);
        } else if (strcmp(w, "none") != 0) {
            const char *key = strcmp(w, "init") == 0 ? "initContainers" : w;
            json_object_set(spec, key, v);
        }
        td_status st = td__pod_refresh(pod, &kept, &e1);
        td_status want = td__pod_parse(pod, &fresh, &e2);
        if (st != refresh_rows[i].st || st != want || strcmp(e1.msg, e2.msg) != 0) {
            print_message("%s: refresh %d (%s), fresh parse %d (%s)\n", refresh_rows[i].name, st,
                          e1.msg, want, e2.msg);
            failed++;
        } else if (st == TD_OK && !td__pod_same(&kept, &fresh)) {
            print_message("%s: refreshed parse differs from a fresh one\n", refresh_rows[i].name);
            failed++;
        }
        td__pod_fini(&kept);
        td__pod_fini(&fresh);
        json_decref(v);
        json_decref(pod);
    }
    /* a kept aggregate: what td__pod_aggregate gives, offered only for
     * flags that change nothing for the pod, dropped by a refresh */
    {
        json_t *pod = J("{'spec':{'overhead':{'cpu':'1'},'containers':[" CTR("a", "'cpu':'1'", "'cpu':'2'") "," CTR("b", "'cpu':'500m'", "") "]}}");
        td__pod p, q;
        td_resources r, l;
        td_resources_init(&r);
        td_resources_init(&l);
        assert_int_equal(td__pod_parse(pod, &p, NULL), TD_OK);
        assert_null(td__pod_aggregate_kept(&p, 0, false));
        assert_int_equal(td__pod_aggregate_keep(&p), TD_OK);
        assert_int_equal(td__pod_aggregate(&p, 0, &r, &l), TD_OK);
        assert_non_null(td__pod_aggregate_kept(&p, 0, false));
        assert_int_equal(td_quantity_cmp(td_resources_get(td__pod_aggregate_kept(&p, 0, false), "cpu"),
                                         td_resources_get(&r, "cpu")), 0);
        assert_int_equal(td_quantity_cmp(td_resources_get(td__pod_aggregate_kept(&p, 0, true), "cpu"),
                                         td_resources_get(&l, "cpu")), 0);
        assert_null(td__pod_aggregate_kept(&p, TD__POD_OVERHEAD, false)); /* has overhead */
        assert_non_null(td__pod_aggregate_kept(&p, TD__POD_LEVEL, true)); /* no spec.resources */
        assert_int_equal(td__pod_parse(pod, &q, NULL), TD_OK);
        assert_true(td__pod_same(&p, &q));
        assert_int_equal(td__pod_refresh(pod, &p, NULL), TD_OK);
        assert_null(td__pod_aggregate_kept(&p, 0, false));
        td__pod_fini(&p);
        td__pod_fini(&q);
        td_resources_fini(&r);
        td_resources_fini(&l);
        json_decref(pod);
    }
    /* td__pod_same tells a difference */
    json_t *a = J(POD(CTR("a", "'memory':'1Ki'", ""))), *b = J(POD(CTR("a", "'memory':'1024'", "")));
    td__pod pa, pb;
    assert_int_equal(td__pod_parse(a, &pa, NULL), TD_OK);
    assert_int_equal(td__pod_parse(b, &pb, NULL), TD_OK);
    assert_false(td__pod_same(&pa, &pb)); /* equal value, another format */
    assert_true(td__pod_same(&pa, &pa));
    td__pod_fini(&pa);
    td__pod_fini(&pb);
    json_decref(a);
    json_decref(b);
    if (failed)
        fail_msg("%d refresh row(s) failed", failed);
}

/* ---- td_pod_requests_limits ---- */

static const struct {
    const char *name;
    const char *pod;
    const char *requests; /* as "a=1,b=2", or the error message */
    const char *limits;
    td_status st;
} sum_rows[] = {
    {"no containers", "{'spec':{}}", "", "", TD_OK},
    {"one container", POD(CTR("a", "'cpu':'1m'", "'cpu':'2m'")), "cpu=1m", "cpu=2m", TD_OK},
    {"containers add up",
     POD(CTR("a", "'cpu':'500m','memory':'1Gi'", "'memory':'1Gi'") "," CTR("b", "'cpu':'500m','memory':'512Mi'", "'cpu':'1'")),
     "cpu=1,memory=1536Mi", "cpu=1,memory=1Gi", TD_OK},
    {"decimal plus milli", POD(CTR("a", "'cpu':'1'", "") "," CTR("b", "'cpu':'500m'", "")),
     "cpu=1500m", "", TD_OK},
    /* pods_test.go "init container CPU" / "init container MEM" */
    {"init container CPU", PODI("", CTR("i", "'cpu':'1m'", "'cpu':'2m'")), "cpu=1m", "cpu=2m",
     TD_OK},
    {"init container MEM", PODI("", CTR("i", "'memory':'1m'", "'memory':'2m'")), "memory=1m",
     "memory=2m", TD_OK},
    {"init container hugepages", PODI("", CTR("i", "'hugepages-2Mi':'100Mi'", "")),
     "hugepages-2Mi=100Mi", "", TD_OK},
    /* pods_test.go "init container maximums override sum of containers" */
    {"init container maximums override sum of containers",
     PODI(CTR("a", "'cpu':'1','memory':'50M','example.com/dongle':'1'",
              "'cpu':'2','memory':'100M','example.com/dongle':'1'") ","
          CTR("b", "'cpu':'2','memory':'25M','example.com/dongle':'2'",
              "'cpu':'5','memory':'50M','example.com/dongle':'2'"),
          CTR("i1", "'cpu':'4','memory':'100M','example.com/dongle':'4'",
              "'cpu':'8','memory':'200M','example.com/dongle':'4'") ","
          CTR("i2", "'cpu':'1','memory':'50M','example.com/dongle':'2'",
              "'cpu':'2','memory':'100M','example.com/dongle':'2'")),
     "cpu=4,example.com/dongle=4,memory=100M", "cpu=8,example.com/dongle=4,memory=200M", TD_OK},
    {"sum of containers beats init",
     PODI(CTR("a", "'cpu':'2'", "'cpu':'3'") "," CTR("b", "'cpu':'2'", "'cpu':'3'"),
          CTR("i", "'cpu':'3'", "'cpu':'4'")),
     "cpu=4", "cpu=6", TD_OK},
    /* helpers_test.go: restartable init containers (sidecars) */
    {"sidecar adds to containers",
     PODI(CTR("a", "'cpu':'1'", "'cpu':'2'"), SIDECAR("s", "'cpu':'1'", "'cpu':'2'")),
     "cpu=2", "cpu=4", TD_OK},
    {"init after sidecar runs beside it",
     PODI(CTR("a", "'cpu':'1'", ""), SIDECAR("s", "'cpu':'1'", "") "," CTR("i", "'cpu':'2'", "")),
     "cpu=3", "", TD_OK},
    {"init before sidecar runs alone",
     PODI(CTR("a", "'cpu':'1'", ""), CTR("i", "'cpu':'2'", "") "," SIDECAR("s", "'cpu':'1'", "")),
     "cpu=2", "", TD_OK},
    {"two sidecars then init",
     PODI(CTR("a", "'memory':'1Gi'", ""),
          SIDECAR("s1", "'memory':'1Gi'", "") "," SIDECAR("s2", "'memory':'1Gi'", "") ","
          CTR("i", "'memory':'2Gi'", "")),
     "memory=4Gi", "", TD_OK},
    {"restartPolicy Always on an app container means nothing",
     POD(SIDECAR("a", "'cpu':'1'", "") "," CTR("b", "'cpu':'1'", "")), "cpu=2", "", TD_OK},
    /* helpers_test.go / pods_test.go: pod overhead */
    {"overhead added to requests and set limits",
     "{'spec':{'overhead':{'cpu':'1'},'containers':[" CTR("a", "'cpu':'1'", "'cpu':'2'") "]}}",
     "cpu=2", "cpu=3", TD_OK},
    {"overhead adds new request names, not new limit names",
     "{'spec':{'overhead':{'cpu':'250m','memory':'120Mi'},'containers':[" CTR(
         "a", "'cpu':'1'", "'cpu':'2'") "]}}",
     "cpu=1250m,memory=120Mi", "cpu=2250m", TD_OK},
    {"overhead skips a zero limit",
     "{'spec':{'overhead':{'cpu':'1'},'containers':[" CTR("a", "'cpu':'1'", "'cpu':'0'") "]}}",
     "cpu=2", "cpu=0", TD_OK},
    {"overhead on top of init maximum",
     "{'spec':{'overhead':{'cpu':'500m'},'containers':[" CTR("a", "'cpu':'1'", "") "],"
     "'initContainers':[" CTR("i", "'cpu':'2'", "") "]}}",
     "cpu=2500m", "", TD_OK},
    /* pod-level resources (KEP-2837) */
    {"pod-level requests replace cpu and memory",
     "{'spec':{'resources':{'requests':{'cpu':'3','memory':'1Gi','ephemeral-storage':'5Gi'},"
     "'limits':{'cpu':'4'}},'containers':[" CTR("a", "'cpu':'1','ephemeral-storage':'1Gi'",
                                                "'cpu':'1','memory':'2Gi'") "]}}",
     "cpu=3,ephemeral-storage=1Gi,memory=1Gi", "cpu=4,memory=2Gi", TD_OK},
    {"pod-level with overhead",
     "{'spec':{'overhead':{'cpu':'100m'},'resources':{'requests':{'cpu':'1'},'limits':{'cpu':'2'}},"
     "'containers':[" CTR("a", "", "") "]}}",
     "cpu=1100m", "cpu=2100m", TD_OK},
    {"integer quantities accepted", POD("{'name':'a','resources':{'requests':{'cpu':2}}}"),
     "cpu=2", "", TD_OK},
    {"real quantities accepted", POD("{'name':'a','resources':{'requests':{'cpu':0.5}}}"),
     "cpu=500m", "", TD_OK},
    {"bad overhead", "{'spec':{'overhead':{'cpu':'x'}}}",
     "spec.overhead.cpu: \"x\" is not a quantity", NULL, TD_EINVAL},
    {"bad pod-level", "{'spec':{'resources':{'limits':{'memory':'--1'}}}}",
     "spec.resources.limits.memory: \"--1\" is not a quantity", NULL, TD_EINVAL},
    {"resources not an object", POD("{'name':'a','resources':[]}"),
     "spec.containers[0].resources: must be an object, not an array", NULL, TD_EINVAL},
    {"empty resource name", POD(CTR("a", "'':'1'", "")),
     "spec.containers[0].resources.requests.: invalid resource name", NULL, TD_EINVAL},
};

static void test_requests_limits(void **state)
{
    (void)state;
    int failed = 0;
    for (size_t i = 0; i < sizeof sum_rows / sizeof sum_rows[0]; i++) {
        json_t *pod = J(sum_rows[i].pod);
        td_resources req, lim;
        td_err err = {{0}};
        char got_req[512], got_lim[512];
        td_resources_init(&req);
        td_resources_init(&lim);
        td_status st = td_pod_requests_limits(pod, &req, &lim, &err);
        if (st != sum_rows[i].st) {
            print_message("%s: status %d, want %d (%s)\n", sum_rows[i].name, st, sum_rows[i].st,
                          err.msg);
            failed++;
        } else if (st == TD_OK) {
            print_list(&req, got_req, sizeof got_req);
            print_list(&lim, got_lim, sizeof got_lim);
            if (strcmp(got_req, sum_rows[i].requests) != 0 ||
                strcmp(got_lim, sum_rows[i].limits) != 0) {
                print_message("%s:\n  got  requests %s limits %s\n  want requests %s limits %s\n",
                              sum_rows[i].name, got_req, got_lim, sum_rows[i].requests,
                              sum_rows[i].limits);
                failed++;
            }
        } else if (strcmp(err.msg, sum_rows[i].requests) != 0) {
            print_message("%s: message\n  got  %s\n  want %s\n", sum_rows[i].name, err.msg,
                          sum_rows[i].requests);
            failed++;
        } else if (req.n != 0 || lim.n != 0) {
            print_message("%s: lists not empty on failure\n", sum_rows[i].name);
            failed++;
        }
        td_resources_fini(&req);
        td_resources_fini(&lim);
        json_decref(pod);
    }
    if (failed)
        fail_msg("%d sum row(s) failed", failed);
}

/* The error detail is optional. */
static void test_null_err(void **state)
{
    (void)state;
    json_t *pod = J(POD(CTR("a", "", "'cpu':'2x'")));
    td_resources req, lim;
    td_resources_init(&req);
    td_resources_init(&lim);
    assert_int_equal(td_pod_default_requests(pod, NULL), TD_EINVAL);
    assert_int_equal(td_pod_requests_limits(pod, &req, &lim, NULL), TD_EINVAL);
    td_resources_fini(&req);
    td_resources_fini(&lim);
    json_decref(pod);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_requests),
        cmocka_unit_test(test_refresh),
        cmocka_unit_test(test_requests_limits),
        cmocka_unit_test(test_null_err),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
