/* test_admindex.c - the per-snapshot admission index: built once per
 * snapshot (also when threads race for it), one entry per namespace with
 * LimitRanges or ResourceQuotas, and decisions through it identical to
 * decisions from the JSON objects. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission/admindex.h"
#include "admission/admit.h"

#include "testutil.h"

static const char platform[] =
    "apiVersion: v1\nkind: Namespace\nmetadata: {name: a, labels: {team: a, project: p, environment: dev}}\n---\n"
    "apiVersion: v1\nkind: Namespace\nmetadata: {name: b, labels: {team: b, project: p, environment: dev}}\n---\n"
    "apiVersion: v1\nkind: Namespace\nmetadata: {name: c, labels: {team: c, project: p, environment: dev}}\n---\n"
    "apiVersion: v1\nkind: LimitRange\nmetadata: {name: lr, namespace: a}\n"
    "spec: {limits: [{type: Container, default: {cpu: 500m, memory: 1Gi}, "
    "defaultRequest: {cpu: 250m, memory: 512Mi}, max: {cpu: '2'}}]}\n---\n"
    "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q1, namespace: a}\n"
    "spec: {hard: {requests.cpu: '1', limits.memory: 4Gi, pods: '3'}}\n---\n"
    "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q2, namespace: a}\n"
    "spec: {hard: {count/pods: '10'}}\n---\n"
    "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: qb, namespace: b}\n"
    "spec: {hard: {pods: '2'}}\nstatus: {hard: {pods: '2'}, used: {pods: '2'}}\n";
/* with one Pod of namespace a (a used pod for its quotas) */
static const char used_pod[] =
    "---\napiVersion: v1\nkind: Pod\nmetadata: {name: running, namespace: a}\n"
    "spec: {containers: [{name: c, resources: {requests: {cpu: 100m}, limits: {memory: 1Gi}}}]}\n";

static td_config *load(void)
{
    return test_config("p.yaml", platform);
}

static td_config *load_with_pod(void)
{
    char yaml[sizeof platform + sizeof used_pod];
    snprintf(yaml, sizeof yaml, "%s%s", platform, used_pod);
    return test_config("p.yaml", yaml);
}

static void test_entries(void **state)
{
    (void)state;
    td_config *c = load_with_pod();
    const td_admindex_ns *a = td_admindex_get(c, "a");
    assert_non_null(a);
    assert_string_equal(a->ns, "a");
    assert_true(a->limitranges_ok);
    assert_non_null(a->limitranges);
    assert_true(a->quotas_ok[0] && a->quotas_ok[1]);
    assert_false(a->quota_status_used);
    assert_ptr_equal(td_admindex_get(c, "a"), a); /* built once */
    const td_admindex_ns *b = td_admindex_get(c, "b");
    assert_non_null(b);
    assert_true(b->quota_status_used);
    /* each entry's lists are td_config_list's */
    const char *kinds[3] = {"LimitRange", "ResourceQuota", "Pod"};
    const td_admindex_ns *es[2] = {a, b};
    for (int e = 0; e < 2; e++) {
        json_t *const *got[3] = {es[e]->ranges, es[e]->quota_objs, es[e]->pods};
        size_t ngot[3] = {es[e]->nranges, es[e]->nquota_objs, es[e]->npods};
        for (int k = 0; k < 3; k++) {
            json_t *const *want;
            size_t n = td_config_list(c, kinds[k], es[e]->ns, &want);
            assert_int_equal(ngot[k], n);
            if (n)
                assert_ptr_equal(got[k], want);
        }
    }
    assert_int_equal(a->nranges, 1);
    assert_int_equal(a->nquota_objs, 2);
    assert_int_equal(b->nquota_objs, 1);
    assert_int_equal(a->npods, 1);
    assert_null(td_admindex_get(c, "c")); /* neither kind there */
    assert_null(td_admindex_get(c, "nowhere"));
    assert_null(td_admindex_get(c, NULL));
    td_config_unref(c);
}

/* Rows decided through td_admission_review on a snapshot (which uses the
 * index): the expected responses are Kubernetes' decisions. */
static const struct {
    const char *name;
    const char *ns;
    const char *pod;
    int code;
    const char *msg; /* substring, or NULL */
} rows[] = {
    {"defaults from the LimitRange fit the quota", "a",
     "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"x\"}]}}", 200, NULL},
    {"over the LimitRange max", "a",
     "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"x\","
     "\"resources\":{\"limits\":{\"cpu\":\"3\"}}}]}}",
     403, "maximum cpu usage per Container is 2, but limit is 3"},
    {"over the quota", "a",
     "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"x\","
     "\"resources\":{\"requests\":{\"cpu\":\"1500m\"},\"limits\":{\"cpu\":\"2\"}}}]}}",
     403, "exceeded quota: q1, requested: requests.cpu=1500m, used: requests.cpu=0, limited: "
          "requests.cpu=1"},
    {"quota full by its status.used", "b",
     "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"x\"}]}}", 403,
     "exceeded quota: qb, requested: pods=1, used: pods=2, limited: pods=2"},
    {"no objects in the namespace", "c",
     "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"x\"}]}}", 200, NULL},
};

static void test_decisions(void **state)
{
    (void)state;
    td_config *c = load();
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        json_error_t je;
        json_t *pod = json_loads(rows[i].pod, 0, &je);
        assert_non_null(pod);
        td_admit_result r;
        /* twice: the second decision uses the index the first one built */
        for (int k = 0; k < 2; k++) {
            assert_int_not_equal(td_admit_pod(c, pod, rows[i].ns, NULL, &r), TD_ENOMEM);
            if (r.code != rows[i].code || (rows[i].msg && !strstr(r.message, rows[i].msg)))
                fail_msg("%s: code %d: %s", rows[i].name, r.code, r.message);
            td_admit_result_fini(&r);
        }
        json_decref(pod);
    }
    td_config_unref(c);
}

static void *get_index(void *arg)
{
    return (void *)td_admindex_get(arg, "a");
}

/* Threads racing to build the index of a fresh snapshot all get the one
 * kept; the loser's copy is freed (ASan would report a leak). */
static void test_race(void **state)
{
    (void)state;
    for (int round = 0; round < 20; round++) {
        td_config *c = load();
        pthread_t t[4];
        void *got[4];
        for (int i = 0; i < 4; i++)
            assert_int_equal(pthread_create(&t[i], NULL, get_index, c), 0);
        for (int i = 0; i < 4; i++)
            assert_int_equal(pthread_join(t[i], &got[i]), 0);
        for (int i = 0; i < 4; i++)
            assert_ptr_equal(got[i], td_admindex_get(c, "a"));
        assert_non_null(got[0]);
        td_config_unref(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entries),
        cmocka_unit_test(test_decisions),
        cmocka_unit_test(test_race),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
