/* test_queue.c - the batch queue (src/queue/), one row per scenario. Rows
 * marked "kueue:" are ported from kubernetes-sigs/kueue
 * pkg/scheduler/preemption/preemption_test.go (TestPreemption) and
 * pkg/scheduler/scheduler_test.go (TestSchedule): the admitted workloads of a
 * row are submitted and scheduled at t=0 (they must all be admitted), the
 * incoming ones at t=1; the row states every workload's final state and the
 * preempted set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/config.h"
#include "core/manifest.h"
#include "queue/queue.h"

/* Kueue's defaultClusterQueues of TestPreemption, the ones the rows use. */
static const char *const kueue_platform =
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: default}\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: alpha}\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: beta}\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: standalone}\n"
    "spec:\n  preemption: {withinClusterQueue: LowerPriority}\n  resourceGroups:\n"
    "  - coveredResources: [cpu]\n    flavors:\n"
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 6}]\n"
    "  - coveredResources: [memory]\n    flavors:\n"
    "    - name: alpha\n      resources: [{name: memory, nominalQuota: 3Gi}]\n"
    "    - name: beta\n      resources: [{name: memory, nominalQuota: 3Gi}]\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: c1}\n"
    "spec:\n  cohort: cohort\n"
    "  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: LowerPriority}\n"
    "  resourceGroups:\n  - coveredResources: [cpu, memory]\n    flavors:\n"
    "    - name: default\n      resources:\n"
    "      - {name: cpu, nominalQuota: 6, borrowingLimit: 6}\n"
    "      - {name: memory, nominalQuota: 3Gi, borrowingLimit: 3Gi}\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: c2}\n"
    "spec:\n  cohort: cohort\n"
    "  preemption: {withinClusterQueue: Never, reclaimWithinCohort: Any}\n"
    "  resourceGroups:\n  - coveredResources: [cpu, memory]\n    flavors:\n"
    "    - name: default\n      resources:\n"
    "      - {name: cpu, nominalQuota: 6, borrowingLimit: 6}\n"
    "      - {name: memory, nominalQuota: 3Gi, borrowingLimit: 3Gi}\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: preventStarvation}\n"
    "spec:\n  preemption: {withinClusterQueue: LowerOrNewerEqualPriority}\n"
    "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 6}]\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: lend1}\n"
    "spec:\n  cohort: cohort-lend\n"
    "  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: LowerPriority}\n"
    "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 6, lendingLimit: 4}]\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: lend2}\n"
    "spec:\n  cohort: cohort-lend\n"
    "  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: LowerPriority}\n"
    "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 6, lendingLimit: 2}]\n---\n"
    /* scheduler_test.go's sales/eng-alpha/eng-beta shapes, reduced. */
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: on-demand}\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: spot}\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: sales}\n"
    "spec:\n  queueingStrategy: StrictFIFO\n  resourceGroups:\n"
    "  - coveredResources: [cpu]\n    flavors:\n"
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 50}]\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: besteffort}\n"
    "spec:\n  queueingStrategy: BestEffortFIFO\n  resourceGroups:\n"
    "  - coveredResources: [cpu]\n    flavors:\n"
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 50}]\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: eng-alpha}\n"
    "spec:\n  cohort: eng\n  resourceGroups:\n"
    "  - coveredResources: [cpu]\n    flavors:\n"
    "    - name: on-demand\n      resources: [{name: cpu, nominalQuota: 50, borrowingLimit: 50}]\n"
    "    - name: spot\n      resources: [{name: cpu, nominalQuota: 100, borrowingLimit: 0}]\n---\n"
    "apiVersion: v1beta2\nkind: ClusterQueue\n" /* kind only; apiVersion is the config's job */
    "metadata: {name: eng-beta}\n"
    "spec:\n  cohortName: eng\n  resourceGroups:\n"
    "  - coveredResources: [cpu, nvidia.com/gpu]\n    flavors:\n"
    "    - name: on-demand\n      resources:\n"
    "      - {name: cpu, nominalQuota: 50, borrowingLimit: 10}\n"
    "      - {name: nvidia.com/gpu, nominalQuota: 8}\n"
    "    - name: spot\n      resources:\n"
    "      - {name: cpu, nominalQuota: 0, borrowingLimit: 100}\n"
    "      - {name: nvidia.com/gpu, nominalQuota: 0}\n";

typedef struct {
    const char *name;
    /* workloads: "name cq prio count*res=q,res=q[;count*res=q...]" (queue
     * lq-CQ in namespace ns; one pod set per ';', named main, w1, w2...) */
    const char *admitted[6];
    const char *incoming[4];
    const char *want;      /* "name:A name:P ..." in submission order */
    const char *preempted; /* "name/Level,..." in event order, "" for none */
    const char *want_flavors; /* of the last incoming workload, or NULL */
    const char *want_reason;  /* substring of the last incoming's reason, or NULL */
} row;

static const row rows[] = {
    {"kueue: preempt lowest priority",
     {"low standalone -1 1*cpu=2", "mid standalone 0 1*cpu=2", "high standalone 1 1*cpu=2"},
     {"in standalone 1 1*cpu=2"},
     "low:P mid:A high:A in:A",
     "low/InClusterQueue",
     "main: cpu=default",
     "Quota reserved in ClusterQueue standalone"},
    {"kueue: preempt multiple",
     {"low standalone -1 1*cpu=2", "mid standalone 0 1*cpu=2", "high standalone 1 1*cpu=2"},
     {"in standalone 1 1*cpu=3"},
     "low:P mid:P high:A in:A",
     "low/InClusterQueue,mid/InClusterQueue",
     NULL,
     NULL},
    {"kueue: no preemption for low priority",
     {"low standalone -1 1*cpu=3", "mid standalone 0 1*cpu=3"},
     {"in standalone -1 1*cpu=1"},
     "low:A mid:A in:P",
     "",
     NULL,
     "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
     "default, 1 more needed"},
    {"kueue: not enough low priority workloads",
     {"low standalone -1 1*cpu=3", "mid standalone 0 1*cpu=3"},
     {"in standalone 0 1*cpu=4"},
     "low:A mid:A in:P",
     "",
     NULL,
     NULL},
    {"kueue: some free quota, preempt low priority",
     {"low standalone -1 1*cpu=1", "mid standalone 0 1*cpu=1", "high standalone 1 1*cpu=3"},
     {"in standalone 1 1*cpu=2"},
     "low:P mid:A high:A in:A",
     "low/InClusterQueue",
     NULL,
     NULL},
    {"kueue: minimal set excludes low priority",
     {"low standalone -1 1*cpu=1", "mid standalone 0 1*cpu=2", "high standalone 1 1*cpu=3"},
     {"in standalone 1 1*cpu=2"},
     "low:A mid:P high:A in:A",
     "mid/InClusterQueue",
     NULL,
     NULL},
    {"kueue: only preempt workloads using the chosen flavor",
     {"low standalone -1 1*memory=2Gi", "high-a standalone 1 1*memory=1Gi",
      "mid standalone 0 1*memory=1Gi", "high standalone 1 1*memory=1Gi"},
     {"in standalone 1 1*cpu=1,memory=2Gi"},
     /* low + high-a fill alpha, mid + high sit in beta. Kueue's row hands
      * the preemptor flavor beta; here the assigner picks the first flavor
      * preemption can free, alpha, and mid (lower priority, but in beta)
      * is left alone. */
     "low:P high-a:A mid:A high:A in:A",
     "low/InClusterQueue",
     "main: cpu=default, memory=alpha",
     NULL},
    {"kueue: reclaim quota from borrower",
     {"c1-low c1 -1 1*cpu=3", "c2-mid c2 0 1*cpu=3", "c2-high c2 1 1*cpu=6"},
     {"in c1 1 1*cpu=3"},
     "c1-low:A c2-mid:P c2-high:A in:A",
     "c2-mid/InCohortReclamation",
     NULL,
     NULL},
    {"kueue: no workloads borrowing (c2 within nominal: nothing to reclaim)",
     {"c1-high c1 1 1*cpu=4", "c2-low-1 c2 -1 1*cpu=4"},
     {"in c1 1 1*cpu=6"},
     "c1-high:A c2-low-1:A in:P",
     "",
     NULL,
     "insufficient unused quota for cpu in flavor default, 2 more needed"},
    {"reclaim needs the preemptor within nominal quota",
     {"c1-high c1 1 1*cpu=4", "c2-low-1 c2 -1 1*cpu=4", "c2-low-2 c2 -1 1*cpu=4"},
     {"in c1 1 1*cpu=3"},
     "c1-high:A c2-low-1:A c2-low-2:A in:P",
     "",
     NULL,
     NULL},
    {"reclaim takes the most recently admitted borrower",
     {"c1-high c1 1 1*cpu=4", "c2-low-1 c2 -1 1*cpu=4", "c2-low-2 c2 -1 1*cpu=4"},
     {"in c1 1 1*cpu=2"},
     /* c2 borrows 2; reclaiming c2-low-2 alone frees enough */
     "c1-high:A c2-low-1:A c2-low-2:P in:A",
     "c2-low-2/InCohortReclamation",
     NULL,
     NULL},
    {"kueue: preempting locally and borrowing other resources in cohort, without cohort "
     "candidates",
     {"c1-low c1 -1 1*cpu=4", "c2-high-1 c2 1 1*cpu=4", "c2-high-2 c2 1 1*cpu=4"},
     {"in c1 1 1*cpu=4"},
     "c1-low:P c2-high-1:A c2-high-2:A in:A",
     "c1-low/InClusterQueue",
     NULL,
     NULL},
    {"kueue: reclaim Any ignores priority",
     {"c1-high c1 2 1*cpu=9", "c2-low c2 -1 1*cpu=3"},
     {"in c2 -1 1*cpu=3"},
     "c1-high:P c2-low:A in:A",
     "c1-high/InCohortReclamation",
     NULL,
     NULL},
    {"kueue: preempt newer workloads with the same priority",
     {"wl1 preventStarvation 2 1*cpu=2", "wl2 preventStarvation 1 1*cpu=2",
      "wl3 preventStarvation 1 1*cpu=2"},
     {"in preventStarvation 1 1*cpu=2"},
     /* wl2 and wl3 were created before in: not newer, so in waits */
     "wl1:A wl2:A wl3:A in:P",
     "",
     NULL,
     NULL},
    {"kueue: lendingLimit: preempt from lend1 borrower to reclaim",
     {"lend1-low lend1 -1 1*cpu=8"},
     {"lend2-mid lend2 0 1*cpu=5"},
     /* lend1 may hold its 2 guaranteed + the 6 lendable of both = 8; lend2
      * keeps 4 guaranteed, needs 1 more of what it lent */
     "lend1-low:P lend2-mid:A",
     "lend1-low/InCohortReclamation",
     NULL,
     NULL},
    {"lendingLimit caps what a borrower can take",
     {NULL},
     {"big lend1 0 1*cpu=9"},
     "big:P",
     "",
     NULL,
     "insufficient quota for cpu in flavor default, previously considered podsets requests (0) + "
     "current podset request (9) > maximum capacity (8)"},
    {"kueue schedule: workload fits in single clusterQueue",
     {NULL},
     {"foo sales 0 10*cpu=1"},
     "foo:A",
     "",
     "main: cpu=default",
     NULL},
    {"kueue schedule: single clusterQueue full",
     {"assigned sales 0 1*cpu=40"},
     {"new sales 0 11*cpu=1"},
     "assigned:A new:P",
     "",
     NULL,
     "insufficient unused quota for cpu in flavor default, 1 more needed"},
    {"StrictFIFO blocks behind the head",
     {"assigned sales 0 1*cpu=40"},
     {"big sales 0 1*cpu=20", "small sales 0 1*cpu=5"},
     "assigned:A big:P small:P",
     "",
     NULL,
     "Waiting"},
    {"BestEffortFIFO lets a smaller one pass",
     {"assigned besteffort 0 1*cpu=40"},
     {"big besteffort 0 1*cpu=20", "small besteffort 0 1*cpu=5"},
     "assigned:A big:P small:A",
     "",
     NULL,
     NULL},
    {"kueue schedule: borrow from cohort in first flavor",
     {NULL},
     {"new eng-alpha 0 1*cpu=60"},
     "new:A",
     "",
     "main: cpu=on-demand",
     "borrowing in cohort eng"},
    {"flavors in order: on-demand full, spot (no borrowing) next",
     {"od eng-alpha 0 1*cpu=100"},
     {"new eng-alpha 0 1*cpu=60"},
     "od:A new:A",
     "",
     "main: cpu=spot",
     NULL},
    {"borrowing limit exceeded",
     {NULL},
     {"new eng-beta 0 1*cpu=61"},
     "new:A",
     "",
     /* on-demand: 50 + borrowingLimit 10 = 60 < 61; spot can borrow 100 */
     "main: cpu=spot",
     NULL},
    {"gang: all pod sets or none",
     {"a eng-beta 0 1*nvidia.com/gpu=4"},
     {"gang eng-beta 0 1*nvidia.com/gpu=2;1*nvidia.com/gpu=4"},
     "a:A gang:P",
     "",
     NULL,
     "couldn't assign flavors to pod set w1"},
    {"gang: pod sets share one quota",
     {NULL},
     {"gang eng-beta 0 2*nvidia.com/gpu=2,cpu=1;1*nvidia.com/gpu=4"},
     "gang:A",
     "",
     "main: cpu=on-demand, nvidia.com/gpu=on-demand; w1: nvidia.com/gpu=on-demand",
     NULL},
    {"resource the ClusterQueue does not cover",
     {NULL},
     {"new sales 0 1*cpu=1,nvidia.com/gpu=1"},
     "new:P",
     "",
     NULL,
     "resource nvidia.com/gpu unavailable in ClusterQueue"},
};

static td_queue *platform(void)
{
    td_manifest *m;
    td_err err;
    td_queue *q;
    if (td_manifest_parse("platform.yaml", kueue_platform, strlen(kueue_platform), &m, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(td_queue_create(&q, &err), TD_OK);
    for (size_t i = 0; i < td_manifest_count(m); i++)
        if (td_queue_add_object(q, td_manifest_doc(m, i), m, &err) != TD_OK)
            fail_msg("%s", err.msg);
    const char *cqs[] = {"standalone", "c1", "c2", "preventStarvation", "lend1", "lend2",
                         "sales", "besteffort", "eng-alpha", "eng-beta"};
    for (size_t i = 0; i < sizeof cqs / sizeof cqs[0]; i++) {
        json_t *lq = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s}}", "apiVersion",
                               "kueue.x-k8s.io/v1beta1", "kind", "LocalQueue", "metadata", "name",
                               cqs[i], "namespace", "ns", "spec", "clusterQueue", cqs[i]);
        if (td_queue_add_object(q, lq, NULL, &err) != TD_OK)
            fail_msg("%s", err.msg);
        json_decref(lq);
    }
    if (td_queue_seal(q, &err) != TD_OK)
        fail_msg("%s", err.msg);
    td_manifest_destroy(m);
    return q;
}

/* "name cq prio 2*cpu=1,memory=1Gi;1*gpu=1" -> a Workload. */
static json_t *workload(const char *spec)
{
    char name[64], cq[64], sets[256];
    int prio;
    assert_int_equal(sscanf(spec, "%63s %63s %d %255s", name, cq, &prio, sets), 4);
    json_t *pss = json_array();
    int idx = 0;
    for (char *s1 = NULL, *ps = strtok_r(sets, ";", &s1); ps; ps = strtok_r(NULL, ";", &s1)) {
        char *star = strchr(ps, '*');
        assert_non_null(star);
        *star = '\0';
        json_t *req = json_object();
        for (char *s2 = NULL, *it = strtok_r(star + 1, ",", &s2); it;
             it = strtok_r(NULL, ",", &s2)) {
            char *eq = strchr(it, '=');
            *eq = '\0';
            json_object_set_new(req, it, json_string(eq + 1));
        }
        char psname[16];
        snprintf(psname, sizeof psname, idx ? "w%d" : "main", idx);
        json_array_append_new(
            pss, json_pack("{s:s,s:i,s:{s:{s:[{s:s,s:{s:o}}]}}}", "name", psname, "count",
                           atoi(ps), "template", "spec", "containers", "name", "c", "resources",
                           "requests", req));
        idx++;
    }
    return json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:i,s:o}}", "apiVersion",
                     "kueue.x-k8s.io/v1beta1", "kind", "Workload", "metadata", "name", name,
                     "namespace", "ns", "spec", "queueName", cq, "priority", prio, "podSets",
                     pss);
}

/* Submits specs at t; one_by_one schedules after each (so the setup rows
 * are admitted in the order written, as Kueue's rows state them). */
static void submit_all(td_queue *q, const char *const *specs, size_t n, uint64_t t,
                       bool one_by_one)
{
    td_err err;
    for (size_t i = 0; i < n && specs[i]; i++) {
        json_t *w = workload(specs[i]);
        /* one by one, a nanosecond apart: admitted in the order written,
         * as the reservation times of Kueue's rows order them */
        uint64_t at = one_by_one ? t + i : t;
        if (td_queue_submit(q, w, NULL, at, NULL, &err) != TD_OK)
            fail_msg("%s", err.msg);
        json_decref(w);
        if (one_by_one)
            assert_int_equal(td_queue_schedule(q, at, NULL), TD_OK);
    }
    assert_int_equal(td_queue_schedule(q, t, NULL), TD_OK);
}

static void test_rows(void **state)
{
    (void)state;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        const row *row = &rows[r];
        td_queue *q = platform();
        submit_all(q, row->admitted, 6, 0, true);
        for (size_t i = 0; i < td_queue_workload_count(q); i++)
            if (td_queue_workload_state(q, i) != TD_WL_ADMITTED)
                fail_msg("%s: setup workload %s not admitted: %s", row->name,
                         td_queue_workload_key(q, i), td_queue_workload_reason(q, i));
        const td_queue_event *ev;
        size_t nsetup = td_queue_events(q, &ev);
        submit_all(q, row->incoming, 4, 1000000000, false);

        char got[512] = "", pre[512] = "";
        size_t n = td_queue_workload_count(q);
        for (size_t i = 0; i < n; i++) {
            const char *key = strchr(td_queue_workload_key(q, i), '/') + 1;
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s:%s", i ? " " : "", key,
                     td_queue_workload_state(q, i) == TD_WL_ADMITTED ? "A" : "P");
        }
        size_t ne = td_queue_events(q, &ev);
        for (size_t i = nsetup; i < ne; i++)
            if (ev[i].type == TD_QEV_PREEMPTED)
                snprintf(pre + strlen(pre), sizeof pre - strlen(pre), "%s%s/%s", *pre ? "," : "",
                         strchr(td_queue_workload_key(q, ev[i].workload), '/') + 1, ev[i].level);
        if (strcmp(got, row->want) != 0)
            for (size_t i = 0; i < ne; i++)
                print_message("  event %d %s %s %s\n", ev[i].type,
                              td_queue_workload_key(q, ev[i].workload), ev[i].level, ev[i].reason);
        if (strcmp(got, row->want) != 0)
            fail_msg("%s:\n  got  %s\n  want %s\n  last reason: %s", row->name, got, row->want,
                     td_queue_workload_reason(q, n - 1));
        if (strcmp(pre, row->preempted) != 0)
            fail_msg("%s: preempted got \"%s\" want \"%s\"", row->name, pre, row->preempted);
        if (row->want_flavors && strcmp(td_queue_workload_flavors(q, n - 1), row->want_flavors))
            fail_msg("%s: flavors got \"%s\" want \"%s\"", row->name,
                     td_queue_workload_flavors(q, n - 1), row->want_flavors);
        if (row->want_reason && !strstr(td_queue_workload_reason(q, n - 1), row->want_reason))
            fail_msg("%s: reason \"%s\" lacks \"%s\"", row->name, td_queue_workload_reason(q, n - 1),
                     row->want_reason);
        td_queue_destroy(q);
    }
}

/* Invalid objects: each rejected with file:line and the field. */
typedef struct {
    const char *name, *yaml, *want;
} bad_row;

static const bad_row bad_rows[] = {
    {"WorkloadPriorityClass value below int32",
     "apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata: {name: w}\n"
     "value: -2147483649\n",
     "x.yaml:4: WorkloadPriorityClass w: value: must be an integer in [-2147483648, 2147483647], "
     "not -2147483649"},
    {"PriorityClass value above int32",
     "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p}\n"
     "value: 2147483648\n",
     "value: must be an integer in [-2147483648, 2147483647], not 2147483648"},
    {"negative quota",
     "kind: ClusterQueue\nmetadata: {name: a}\nspec:\n  resourceGroups:\n"
     "  - coveredResources: [cpu]\n    flavors:\n"
     "    - name: f\n      resources: [{name: cpu, nominalQuota: \"-1\"}]\n",
     "x.yaml:8: ClusterQueue a: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "
     "\"-1\" must not be negative"},
    {"unparsable quota",
     "kind: ClusterQueue\nmetadata: {name: a}\nspec:\n  resourceGroups:\n"
     "  - coveredResources: [cpu]\n    flavors:\n"
     "    - name: f\n      resources: [{name: cpu, nominalQuota: 8Gx}]\n",
     "\"8Gx\" is not a quantity"},
    {"flavor does not cover the resources",
     "kind: ClusterQueue\nmetadata: {name: a}\nspec:\n  resourceGroups:\n"
     "  - coveredResources: [cpu, memory]\n    flavors:\n"
     "    - name: f\n      resources: [{name: cpu, nominalQuota: 1}]\n",
     "resources must list the 2 covered resources"},
    {"unsupported field by name",
     "kind: ClusterQueue\nmetadata: {name: a}\nspec:\n  admissionChecks: [x]\n",
     "x.yaml:4: ClusterQueue a: spec.admissionChecks: not supported by tenantd's queue"},
    {"borrowingLimit without cohort",
     "kind: ClusterQueue\nmetadata: {name: a}\nspec:\n  resourceGroups:\n"
     "  - coveredResources: [cpu]\n    flavors:\n"
     "    - name: f\n      resources: [{name: cpu, nominalQuota: 1, borrowingLimit: 1}]\n",
     "borrowingLimit: must not be set when there is no cohort"},
    {"bad queueingStrategy",
     "kind: ClusterQueue\nmetadata: {name: a}\nspec:\n  queueingStrategy: LIFO\n",
     "x.yaml:4: ClusterQueue a: spec.queueingStrategy: must be one of BestEffortFIFO, StrictFIFO"},
    {"LocalQueue naming a missing ClusterQueue",
     "kind: LocalQueue\nmetadata: {name: q, namespace: n}\nspec:\n  clusterQueue: nope\n",
     "x.yaml:4: LocalQueue n/q: spec.clusterQueue: ClusterQueue \"nope\" does not exist"},
    /* a ClusterQueue naming a missing ResourceFlavor is inactive, not
     * refused: test_queue_kueue.c */
};

static void test_bad_objects(void **state)
{
    (void)state;
    for (size_t r = 0; r < sizeof bad_rows / sizeof bad_rows[0]; r++) {
        td_manifest *m;
        td_err err;
        td_queue *q;
        assert_int_equal(td_manifest_parse("x.yaml", bad_rows[r].yaml, strlen(bad_rows[r].yaml),
                                           &m, &err),
                         TD_OK);
        assert_int_equal(td_queue_create(&q, &err), TD_OK);
        td_status s = TD_OK;
        for (size_t i = 0; i < td_manifest_count(m) && s == TD_OK; i++)
            s = td_queue_add_object(q, td_manifest_doc(m, i), m, &err);
        if (s == TD_OK)
            s = td_queue_seal(q, &err);
        if (s != TD_EINVAL || !strstr(err.msg, bad_rows[r].want))
            fail_msg("%s: status %d, message \"%s\", want \"%s\"", bad_rows[r].name, s,
                     s ? err.msg : "", bad_rows[r].want);
        td_queue_destroy(q);
        td_manifest_destroy(m);
    }
}

/* Finishing frees quota for a parked BestEffortFIFO workload. */
static void test_finish_requeues(void **state)
{
    (void)state;
    td_queue *q = platform();
    const char *a[] = {"a besteffort 0 1*cpu=40", "b besteffort 0 1*cpu=20"};
    submit_all(q, a, 2, 0, false);
    assert_int_equal(td_queue_workload_state(q, 1), TD_WL_PENDING);
    assert_int_equal(td_queue_finish(q, 0, 5, NULL), TD_OK);
    assert_int_equal(td_queue_schedule(q, 5, NULL), TD_OK);
    assert_int_equal(td_queue_workload_state(q, 0), TD_WL_FINISHED);
    assert_int_equal(td_queue_workload_state(q, 1), TD_WL_ADMITTED);
    assert_int_equal(td_queue_finish(q, 0, 6, NULL), TD_EINVAL);
    td_queue_destroy(q);
}

/* A workload naming a LocalQueue that does not exist waits with why. */
static void test_missing_local_queue(void **state)
{
    (void)state;
    td_queue *q = platform();
    const char *a[] = {"a nope 0 1*cpu=1"};
    submit_all(q, a, 1, 0, false);
    assert_string_equal(td_queue_workload_reason(q, 0), "LocalQueue ns/nope doesn't exist");
    td_queue_destroy(q);
}

/* Kueue writes status.admission; td_queue_restore_admission puts it back. A
 * queue rebuilt from the records holds the same flavors, usage and
 * admission records, and decides the next workload as the original does. */
static void test_restore_roundtrip(void **state)
{
    (void)state;
    td_err err;
    td_queue *a = platform(), *b = platform();
    const char *specs[] = {"s1 standalone 0 2*cpu=1,memory=1Gi", "s2 standalone 0 1*cpu=2,memory=2Gi",
                           "e1 eng-alpha 0 1*cpu=60", "e2 eng-beta 0 1*cpu=30;2*cpu=1,nvidia.com/gpu=2"};
    submit_all(a, specs, 4, 0, true);
    for (size_t id = 0; id < 4; id++) {
        assert_int_equal(td_queue_workload_state(a, id), TD_WL_ADMITTED);
        json_t *w = workload(specs[id]);
        size_t nid;
        assert_int_equal(td_queue_submit(b, w, NULL, td_queue_workload_queue_ns(a, id), &nid, &err),
                         TD_OK);
        json_decref(w);
        json_t *adm = td_queue_workload_admission(a, id);
        assert_non_null(adm);
        if (td_queue_restore_admission(b, nid, adm, td_queue_workload_admitted_ns(a, id),
                                       td_queue_workload_borrowing(a, id), &err) != TD_OK)
            fail_msg("%s", err.msg);
        json_t *again = td_queue_workload_admission(b, nid);
        assert_true(json_equal(adm, again));
        assert_string_equal(td_queue_workload_flavors(a, id), td_queue_workload_flavors(b, nid));
        assert_string_equal(td_queue_workload_reason(a, id), td_queue_workload_reason(b, nid));
        json_decref(adm);
        json_decref(again);
    }
    const td_queue_event *ev;
    assert_int_equal(td_queue_events(b, &ev), 0); /* a restore is not a decision */
    const char *res[] = {"cpu", "memory", "nvidia.com/gpu"};
    for (size_t c = 0; c < td_queue_cq_count(a); c++)
        for (size_t r = 0; r < 3; r++)
            assert_int_equal(td_queue_cq_usage_milli(a, c, res[r]),
                             td_queue_cq_usage_milli(b, c, res[r]));
    /* s2 took memory on beta (alpha was short): recorded and restored so */
    json_t *adm = td_queue_workload_admission(b, 1);
    assert_string_equal(td_json_str(json_array_get(json_object_get(adm, "podSetAssignments"), 0),
                                    "flavors.memory"),
                        "beta");
    json_decref(adm);
    const char *next[] = {"n eng-alpha 0 1*cpu=45"};
    submit_all(a, next, 1, 10, false);
    submit_all(b, next, 1, 10, false);
    assert_int_equal(td_queue_workload_state(a, 4), td_queue_workload_state(b, 4));
    assert_string_equal(td_queue_workload_reason(a, 4), td_queue_workload_reason(b, 4));
    assert_string_equal(td_queue_workload_flavors(a, 4), td_queue_workload_flavors(b, 4));
    td_queue_destroy(a);
    td_queue_destroy(b);
}

/* A record is kept over today's quota (Kueue does not evict on a quota
 * decrease); a record that does not match is refused and changes nothing. */
static void test_restore_over_quota_and_bad(void **state)
{
    (void)state;
    td_err err;
    td_queue *q = platform();
    const char *specs[] = {"a sales 0 1*cpu=40", "b sales 0 1*cpu=40", "c sales 0 1*cpu=1"};
    for (size_t i = 0; i < 3; i++) {
        json_t *w = workload(specs[i]);
        assert_int_equal(td_queue_submit(q, w, NULL, i, NULL, &err), TD_OK);
        json_decref(w);
    }
    const char *good = "{\"clusterQueue\": \"sales\", \"podSetAssignments\": [{\"name\": \"main\", "
                       "\"flavors\": {\"cpu\": \"default\"}, \"count\": 1}]}";
    json_t *adm = json_loads(good, 0, NULL);
    assert_int_equal(td_queue_restore_admission(q, 0, adm, 5, false, &err), TD_OK);
    assert_int_equal(td_queue_restore_admission(q, 1, adm, 6, true, &err), TD_OK);
    /* sales has no cohort: a record saying "borrowing" cannot name one */
    assert_string_equal(td_queue_workload_reason(q, 1), "Quota reserved in ClusterQueue sales");
    assert_int_equal(td_queue_restore_admission(q, 1, adm, 6, false, &err), TD_EINVAL);
    json_decref(adm);
    size_t sales = td_queue_workload_cq(q, 0);
    assert_int_equal(td_queue_cq_usage_milli(q, sales, "cpu"), 80000); /* nominal 50 */
    assert_int_equal(td_queue_cq_nominal_milli(q, sales, "cpu"), 50000);
    struct {
        const char *name, *record, *want;
    } bad[] = {
        {"other ClusterQueue",
         "{\"clusterQueue\": \"besteffort\", \"podSetAssignments\": [{\"name\": \"main\", "
         "\"flavors\": {\"cpu\": \"default\"}}]}",
         "status.admission.clusterQueue"},
        {"unknown flavor",
         "{\"clusterQueue\": \"sales\", \"podSetAssignments\": [{\"name\": \"main\", "
         "\"flavors\": {\"cpu\": \"gold\"}}]}",
         "flavors.cpu: \"gold\" is not a ResourceFlavor"},
        {"pod set renamed",
         "{\"clusterQueue\": \"sales\", \"podSetAssignments\": [{\"name\": \"x\", "
         "\"flavors\": {\"cpu\": \"default\"}}]}",
         "podSetAssignments[0].name"},
        {"no pod sets", "{\"clusterQueue\": \"sales\"}", "podSetAssignments: 0 recorded"},
        {"flavor missing", "{\"clusterQueue\": \"sales\", \"podSetAssignments\": [{\"name\": \"main\"}]}",
         "flavors.cpu"},
        {"borrowing recorded without a cohort: no crash, but the pod sets are wrong",
         "{\"clusterQueue\": \"sales\", \"podSetAssignments\": []}",
         "podSetAssignments: 0 recorded"},
        {"unknown node",
         "{\"clusterQueue\": \"sales\", \"podSetAssignments\": [{\"name\": \"main\", \"flavors\": "
         "{\"cpu\": \"default\"}, \"topologyAssignment\": {\"domains\": [{\"values\": [\"n9\"], "
         "\"count\": 1}]}}]}",
         "node \"n9\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *r = json_loads(bad[i].record, 0, NULL);
        assert_non_null(r);
        if (td_queue_restore_admission(q, 2, r, 7, false, &err) != TD_EINVAL)
            fail_msg("%s: accepted", bad[i].name);
        if (!strstr(err.msg, bad[i].want))
            fail_msg("%s: \"%s\" lacks \"%s\"", bad[i].name, err.msg, bad[i].want);
        assert_int_equal(td_queue_workload_state(q, 2), TD_WL_PENDING);
        assert_int_equal(td_queue_cq_usage_milli(q, sales, "cpu"), 80000);
        json_decref(r);
    }
    /* the new quota decides what is new: c waits */
    assert_int_equal(td_queue_schedule(q, 8, NULL), TD_OK);
    assert_int_equal(td_queue_workload_state(q, 0), TD_WL_ADMITTED);
    assert_int_equal(td_queue_workload_state(q, 1), TD_WL_ADMITTED);
    assert_int_equal(td_queue_workload_state(q, 2), TD_WL_PENDING);
    assert_non_null(strstr(td_queue_workload_reason(q, 2), "insufficient unused quota"));
    /* recorded history comes back as events; a recorded reason as reason */
    td_queue_event e;
    memset(&e, 0, sizeof e);
    e.type = TD_QEV_ADMITTED;
    e.workload = 0;
    e.cluster_queue = sales;
    e.by = TD_QUEUE_NONE;
    e.t_ns = 5;
    size_t ne0;
    const td_queue_event *evs;
    ne0 = td_queue_events(q, &evs);
    assert_int_equal(td_queue_restore_event(q, &e, &err), TD_OK);
    assert_int_equal(td_queue_events(q, &evs), ne0 + 1);
    e.workload = 99;
    assert_int_equal(td_queue_restore_event(q, &e, &err), TD_EINVAL);
    assert_int_equal(td_queue_restore_pending(q, 2, "Evicted by ns/x (InClusterQueue) at 1s; requeued",
                                              "Evicted by ns/x (InClusterQueue) at 1s; requeued: r",
                                              &err),
                     TD_OK);
    assert_string_equal(td_queue_workload_evicted(q, 2),
                        "Evicted by ns/x (InClusterQueue) at 1s; requeued");
    assert_int_equal(td_queue_restore_pending(q, 0, NULL, "x", &err), TD_EINVAL);
    assert_int_equal(td_queue_workload_find(q, "ns/b"), 1);
    assert_int_equal(td_queue_workload_find(q, "ns/zz"), TD_QUEUE_NONE);
    td_queue_destroy(q);
}

/* Kueue's ValidateWorkloadUpdate and the Workload kind's rules: what a
 * resubmission may change, before and after a quota reservation. */
static void test_workload_update_check(void **state)
{
    (void)state;
    const char *wl = "{\"kind\":\"Workload\",\"metadata\":{\"name\":\"w\",\"namespace\":\"ns\"},"
                     "\"spec\":{\"queueName\":\"q\",\"priorityClassName\":\"low\","
                     "\"podSets\":[{\"name\":\"main\",\"count\":1,\"template\":{\"spec\":"
                     "{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":"
                     "{\"nvidia.com/gpu\":\"1\"}}}]}}}]}}";
    static const struct {
        const char *name;
        const char *old_status; /* NULL: pending, no status */
        const char *path;       /* a change to the new one: path=JSON */
        const char *value;
        td_status want;
        const char *msg;
    } rows[] = {
        {"creation", "none", NULL, NULL, TD_OK, NULL},
        {"pending, same", NULL, NULL, NULL, TD_OK, NULL},
        {"pending, more GPUs", NULL, "spec.podSets", "[{\"name\":\"main\",\"count\":100}]", TD_OK,
         NULL},
        {"pending, other queue", NULL, "spec.queueName", "\"r\"", TD_OK, NULL},
        {"admitted, same", "{\"tenantd\":{\"state\":\"Admitted\"}}", NULL, NULL, TD_OK, NULL},
        {"admitted, more pods", "{\"tenantd\":{\"state\":\"Admitted\"}}", "spec.podSets",
         "[{\"name\":\"main\",\"count\":100}]", TD_EINVAL,
         "Workload.kueue.x-k8s.io \"w\" is invalid: spec.podSets[0]: Invalid value: "
         "{\"count\":100,\"name\":\"main\"}: field is immutable"},
        {"admitted, 1 -> 100 GPUs: named where", "{\"tenantd\":{\"state\":\"Admitted\"}}",
         "spec.podSets",
         "[{\"name\":\"main\",\"count\":1,\"template\":{\"spec\":{\"containers\":[{\"name\":"
         "\"c\",\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"100\"}}}]}}}]",
         TD_EINVAL,
         "Workload.kueue.x-k8s.io \"w\" is invalid: spec.podSets[0].template.spec.containers[0]."
         "resources.requests[nvidia.com/gpu]: Invalid value: \"100\": field is immutable"},
        {"admitted, a request added", "{\"tenantd\":{\"state\":\"Admitted\"}}", "spec.podSets",
         "[{\"name\":\"main\",\"count\":1,\"template\":{\"spec\":{\"containers\":[{\"name\":"
         "\"c\",\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"1\",\"cpu\":\"9\"}}}]}}}]",
         TD_EINVAL,
         "spec.podSets[0].template.spec.containers[0].resources.requests: Invalid value: "
         "{\"cpu\":\"9\",\"nvidia.com/gpu\":\"1\"}: field is immutable"},
        {"admitted, a second pod set", "{\"tenantd\":{\"state\":\"Admitted\"}}", "spec.podSets",
         "[{},{}]", TD_EINVAL,
         "Workload.kueue.x-k8s.io \"w\" is invalid: spec.podSets: Invalid value: [{},{}]: "
         "field is immutable"},
        {"finished, fewer GPUs", "{\"tenantd\":{\"state\":\"Finished\"}}", "spec.podSets", "[{}]",
         TD_EINVAL, "spec.podSets[0]: Invalid value: {}: field is immutable"},
        {"Kueue's admission, no record", "{\"admission\":{\"clusterQueue\":\"cq\"}}",
         "spec.podSets", "[{}]", TD_EINVAL, "field is immutable"},
        {"evicted back to pending", "{\"tenantd\":{\"state\":\"Pending\"}}", "spec.podSets",
         "[{}]", TD_OK, NULL},
        {"admitted, other class", "{\"tenantd\":{\"state\":\"Admitted\"}}",
         "spec.priorityClassName", "\"high\"", TD_EINVAL,
         "spec.priorityClassName: Invalid value: \"high\": field is immutable"},
        {"admitted, a class source", "{\"tenantd\":{\"state\":\"Admitted\"}}",
         "spec.priorityClassSource", "\"kueue.x-k8s.io/workloadpriorityclass\"", TD_EINVAL,
         "spec.priorityClassSource: Invalid value"},
        {"admitted, other queue", "{\"tenantd\":{\"state\":\"Admitted\"}}", "spec.queueName",
         "\"r\"", TD_EINVAL, "spec.queueName: Invalid value: \"r\": field is immutable"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        json_t *old = json_loads(wl, 0, NULL), *upd = json_loads(wl, 0, NULL);
        assert_non_null(old);
        if (rows[i].old_status && strcmp(rows[i].old_status, "none") != 0)
            json_object_set_new(old, "status", json_loads(rows[i].old_status, 0, NULL));
        if (rows[i].path) {
            const char *dot = strchr(rows[i].path, '.');
            json_object_set_new(json_object_get(upd, "spec"), dot + 1,
                                json_loads(rows[i].value, JSON_DECODE_ANY, NULL));
        }
        td_err err = {{0}};
        const json_t *o = rows[i].old_status && strcmp(rows[i].old_status, "none") == 0 ? NULL : old;
        td_status st = td_queue_workload_update_check(o, upd, &err);
        if (st != rows[i].want || (rows[i].msg && !strstr(err.msg, rows[i].msg)))
            fail_msg("%s: status %d (want %d), message \"%s\"", rows[i].name, st, rows[i].want,
                     err.msg);
        json_decref(old);
        json_decref(upd);
    }
}

/* spec.priority as the queue takes it: int32, never wrapped. */
static void test_priority_range(void **state)
{
    (void)state;
    static const struct {
        const char *name, *priority;
        td_status st;
        int32_t want;
        const char *msg;
    } rows[] = {
        {"int32 min", "-2147483648", TD_OK, INT32_MIN, NULL},
        {"below int32, once wrapped to max", "-2147483649", TD_EINVAL, 0,
         "Workload w: spec.priority: must be an integer in [-2147483648, 2147483647], not "
         "-2147483649"},
        {"int32 max", "2147483647", TD_OK, INT32_MAX, NULL},
        {"above int32, once wrapped to min", "2147483648", TD_EINVAL, 0, "not 2147483648"},
        {"a real", "1e3", TD_EINVAL, 0, "spec.priority: must be an integer, not 1000.0"},
        {"a fraction", "1.5", TD_EINVAL, 0, "not 1.5"},
        {"a boolean", "true", TD_EINVAL, 0, "not true"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        td_queue *q = platform();
        json_t *w = workload("w standalone 0 1*cpu=1");
        json_object_set_new(json_object_get(w, "spec"), "priority",
                            json_loads(rows[i].priority, JSON_DECODE_ANY, NULL));
        td_err err = {{0}};
        size_t id = TD_QUEUE_NONE;
        td_status st = td_queue_submit(q, w, NULL, 0, &id, &err);
        if (st != rows[i].st || (rows[i].msg && !strstr(err.msg, rows[i].msg)))
            fail_msg("%s: status %d, message \"%s\"", rows[i].name, st, err.msg);
        if (st == TD_OK)
            assert_int_equal(td_queue_workload_priority(q, id), rows[i].want);
        else
            assert_int_equal(td_queue_workload_count(q), 0); /* nothing queued */
        json_decref(w);
        td_queue_destroy(q);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_priority_range),
        cmocka_unit_test(test_workload_update_check),
        cmocka_unit_test(test_bad_objects),
        cmocka_unit_test(test_finish_requeues),
        cmocka_unit_test(test_missing_local_queue),
        cmocka_unit_test(test_restore_roundtrip),
        cmocka_unit_test(test_restore_over_quota_and_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
