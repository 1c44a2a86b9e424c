/* test_queue_shadow.c - preemption in shadow (ClusterQueue annotation
 * tenantd.dev/preemption-enforcement: shadow): the reclaim Kueue would do
 * is decided and recorded once as a WOULD_PREEMPT event naming the
 * preemptor and level, nothing is evicted, the preemptor waits with a
 * reason that says so, and the same objects with enforce preempt; a bad
 * mode is refused naming the annotation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/manifest.h"
#include "queue/queue.h"

#define SEC 1000000000ULL

static const char platform[] =
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: default}\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\n"
    "metadata: {name: owner, annotations: {tenantd.dev/preemption-enforcement: %s}}\n"
    "spec:\n  cohort: all\n  preemption: {reclaimWithinCohort: Any}\n"
    "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 4}]\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: borrower}\n"
    "spec:\n  cohort: all\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 0, borrowingLimit: 4}]\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
    "metadata: {name: owner, namespace: a}\nspec: {clusterQueue: owner}\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
    "metadata: {name: borrower, namespace: b}\nspec: {clusterQueue: borrower}\n";

static td_queue *make(const char *mode, td_status *st_out, td_err *err)
{
    char buf[4096];
    snprintf(buf, sizeof buf, platform, mode);
    td_manifest *m = NULL;
    assert_int_equal(td_manifest_parse("p.yaml", buf, strlen(buf), &m, err), TD_OK);
    td_queue *q = NULL;
    assert_int_equal(td_queue_create(&q, err), TD_OK);
    td_status st = TD_OK;
    for (size_t i = 0; st == TD_OK && i < td_manifest_count(m); i++)
        st = td_queue_add_object(q, td_manifest_doc(m, i), m, err);
    if (st == TD_OK)
        st = td_queue_seal(q, err);
    td_manifest_destroy(m);
    *st_out = st;
    if (st != TD_OK) {
        td_queue_destroy(q);
        return NULL;
    }
    return q;
}

static size_t submit(td_queue *q, const char *ns, const char *name, const char *lq, uint64_t t)
{
    char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"apiVersion\":\"kueue.x-k8s.io/v1beta1\",\"kind\":\"Workload\",\"metadata\":"
             "{\"name\":\"%s\",\"namespace\":\"%s\"},\"spec\":{\"queueName\":\"%s\",\"podSets\":"
             "[{\"name\":\"main\",\"count\":1,\"template\":{\"spec\":{\"containers\":[{\"name\":"
             "\"c\",\"resources\":{\"requests\":{\"cpu\":\"4\"}}}]}}}]}}",
             name, ns, lq);
    json_t *wl = json_loads(buf, 0, NULL);
    td_err err;
    size_t id;
    assert_int_equal(td_queue_submit(q, wl, NULL, t, &id, &err), TD_OK);
    json_decref(wl);
    assert_int_equal(td_queue_schedule(q, t, NULL), TD_OK);
    return id;
}

static size_t count_type(const td_queue *q, td_queue_event_type type)
{
    const td_queue_event *ev;
    size_t n = td_queue_events(q, &ev), k = 0;
    for (size_t i = 0; i < n; i++)
        k += ev[i].type == type;
    return k;
}

static void test_shadow_records_and_changes_nothing(void **state)
{
    (void)state;
    td_err err;
    td_status st;
    td_queue *q = make("shadow", &st, &err);
    assert_non_null(q);
    size_t b = submit(q, "b", "borrows", "borrower", 0);
    assert_int_equal(td_queue_workload_state(q, b), TD_WL_ADMITTED);
    size_t a = submit(q, "a", "owner-job", "owner", 1 * SEC);
    /* Kueue would reclaim; in shadow nothing moves */
    assert_int_equal(td_queue_workload_state(q, b), TD_WL_ADMITTED);
    assert_int_equal(td_queue_workload_state(q, a), TD_WL_PENDING);
    assert_non_null(strstr(td_queue_workload_reason(q, a),
                           "preemption in shadow: would preempt 1 workload (b/borrows)"));
    assert_int_equal(count_type(q, TD_QEV_PREEMPTED), 0);
    assert_int_equal(count_type(q, TD_QEV_WOULD_PREEMPT), 1);
    const td_queue_event *ev;
    size_t n = td_queue_events(q, &ev);
    const td_queue_event *w = &ev[n - 1];
    assert_int_equal(w->type, TD_QEV_WOULD_PREEMPT);
    assert_int_equal(w->workload, b);
    assert_int_equal(w->by, a);
    assert_string_equal(w->level, "InCohortReclamation");
    assert_non_null(strstr(w->reason, "shadow: not preempted"));
    /* more passes record nothing more */
    for (int i = 2; i < 6; i++)
        assert_int_equal(td_queue_schedule(q, (uint64_t)i * SEC, NULL), TD_OK);
    assert_int_equal(count_type(q, TD_QEV_WOULD_PREEMPT), 1);
    /* the borrower finishes: the owner is admitted without preempting */
    assert_int_equal(td_queue_finish(q, b, 10 * SEC, &err), TD_OK);
    assert_int_equal(td_queue_schedule(q, 10 * SEC, NULL), TD_OK);
    assert_int_equal(td_queue_workload_state(q, a), TD_WL_ADMITTED);
    assert_int_equal(count_type(q, TD_QEV_PREEMPTED), 0);
    td_queue_destroy(q);
}

static void test_enforce_preempts(void **state)
{
    (void)state;
    td_err err;
    td_status st;
    td_queue *q = make("enforce", &st, &err);
    assert_non_null(q);
    size_t b = submit(q, "b", "borrows", "borrower", 0);
    size_t a = submit(q, "a", "owner-job", "owner", 1 * SEC);
    assert_int_equal(td_queue_workload_state(q, a), TD_WL_ADMITTED);
    assert_int_equal(td_queue_workload_state(q, b), TD_WL_PENDING);
    assert_int_equal(count_type(q, TD_QEV_PREEMPTED), 1);
    assert_int_equal(count_type(q, TD_QEV_WOULD_PREEMPT), 0);
    td_queue_destroy(q);
}

static void test_bad_mode_refused(void **state)
{
    (void)state;
    td_err err;
    td_status st;
    assert_null(make("audit", &st, &err));
    assert_int_equal(st, TD_EINVAL);
    if (!strstr(err.msg, "tenantd.dev/preemption-enforcement: must be enforce or shadow") ||
        !strstr(err.msg, "p.yaml:"))
        fail_msg("%s", err.msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shadow_records_and_changes_nothing),
        cmocka_unit_test(test_enforce_preempts),
        cmocka_unit_test(test_bad_mode_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
