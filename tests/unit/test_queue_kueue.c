/* test_queue_kueue.c - Kueue's own scheduler tables, ported row by row:
 * flavor assignment (taints and tolerations, flavorFungibility, the
 * preemption oracle: reclamation preferred over preemption in the own
 * ClusterQueue), the nominal-quota rule for preemption, misconfigured
 * workloads and inactive ClusterQueues.
 *
 * Ported from kubernetes-sigs/kueue at commit
 * ff69552e79ad21652c36caa97038382e55625cf7:
 *   pkg/scheduler/scheduler_test.go             (TestSchedule)
 *   pkg/scheduler/flavorassigner/flavorassigner_test.go
 *                                               (TestAssignFlavors,
 *                                                TestReclaimBeforePriorityPreemption)
 * Each row keeps Kueue's name. How they are translated:
 *  - usage that Kueue's tables put straight into a ClusterQueue snapshot
 *    (clusterQueueUsage) or admit with ReserveQuotaAt/SimpleReserveQuota is
 *    an admitted workload here ("adm": restored on the named flavor, as the
 *    daemon restores a recorded status.admission); its priority is -1 so
 *    that it is a preemption candidate, as Kueue's mocked oracle assumes;
 *  - Kueue's flavor-assigner rows mock the preemption oracle; tenantd runs
 *    the real one, so each row's usage is built so the real oracle gives
 *    the mocked answer;
 *  - Kueue preempts and admits the preemptor in its next cycle ("Pending the
 *    preemption of 1 workload(s)"); tenantd does both in one pass, so a row
 *    expects the preemptor admitted on the flavor Kueue chose;
 *  - a borrowingLimit on a ClusterQueue without a cohort and a
 *    namespaceSelector with terms are refused by tenantd's loader (Kueue's
 *    webhook refuses the first; tables bypass it): those are left out.
 * Rows not ported, and why, are named beside their neighbours below.
 *
 * A preempted workload is requeued and may be admitted again in the same
 * pass (Kueue's next cycle), so rows assert the preemptions ("pre") and
 * leave the victims' later state alone unless Kueue's row says it.
 *
 * Steps, on a virtual clock:
 *   "@T sub NAME CQ PRIO SETS"  submit at T seconds, then schedule
 *   "@T adm NAME CQ PRIO SETS FLAVOR"  submit and restore admitted on FLAVOR
 *   "@T wl YAML"                submit the Workload YAML (one line), schedule
 *   "@T add NAME CQ PRIO SETS"  submit without scheduling
 *   "@T sched"                  schedule
 *   "want NAME:A NAME:P ..."    states (A admitted, P pending, F finished)
 *   "reason NAME TEXT"          NAME's reason is exactly TEXT
 *   "flavors NAME TEXT"         NAME's flavor assignment is exactly TEXT
 *   "pre NAME/Level,..."        preemptions since the last "pre", in order
 * SETS is "count*res=q,res=q;count*..." (pod sets main, w1, ...); every
 * ClusterQueue gets a LocalQueue of its name in namespace ns. */
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

#include "queue_scenario.h"

#define NS 1000000000ULL

typedef struct {
    const char *name;
    const char *platform;
    const char *steps[24];
} row;

#define RF(n) "kind: ResourceFlavor\nmetadata: {name: " n "}\n---\n"
#define RF_LABELS(n, labels)                                                                       \
    "kind: ResourceFlavor\nmetadata: {name: " n "}\nspec: {nodeLabels: " labels "}\n---\n"
#define RF_TAINT(n, k, v)                                                                          \
    "kind: ResourceFlavor\nmetadata: {name: " n "}\n"                                             \
    "spec: {nodeTaints: [{key: " k ", value: " v ", effect: NoSchedule}]}\n---\n"
/* A ClusterQueue: name, extra spec lines, covered resources, flavor list. */
#define CQ(n, extra, covered, flavors)                                                             \
    "kind: ClusterQueue\nmetadata: {name: " n "}\nspec:\n" extra "  resourceGroups:\n"          \
    "  - coveredResources: [" covered "]\n    flavors:\n" flavors "---\n"
#define FQ1(f, r, q) "    - name: " f "\n      resources: [{name: " r ", nominalQuota: " q "}]\n"
#define FQ2(f, r1, q1, r2, q2)                                                                     \
    "    - name: " f "\n      resources: [{name: " r1 ", nominalQuota: " q1 "}, {name: " r2        \
    ", nominalQuota: " q2 "}]\n"
/* a quota entry with a borrowingLimit */
#define FQB(f, r, q, bl)                                                                           \
    "    - name: " f "\n      resources: [{name: " r ", nominalQuota: " q ", borrowingLimit: " bl \
    "}]\n"
/* a Workload with one pod set "main", one container, in namespace ns */
#define WL(n, cq, prio, podspec)                                                                   \
    "{apiVersion: kueue.x-k8s.io/v1beta2, kind: Workload, metadata: {name: " n                     \
    ", namespace: ns}, spec: {queueName: " cq ", priority: " prio ", podSets: [{name: main, "     \
    "count: 1, template: {spec: " podspec "}}]}}"

/* ---- TestSchedule (scheduler_test.go) fixtures ---------------------------- */

/* resourceFlavors of TestSchedule: spot-tainted (key=val:NoSchedule) and
 * spot-tainted-2 (key=val2:NoSchedule). */
#define SCHED_FLAVORS                                                                              \
    RF("default") RF("on-demand") RF("spot") RF_TAINT("spot-tainted", "key", "val")               \
        RF_TAINT("spot-tainted-2", "key", "val2")

static const row rows[] = {
    /* ---- item 2: ResourceFlavor taints ---- */
    {"sched: flavors with mixed misconfiguration and insufficient quota",
     SCHED_FLAVORS CQ("custom-cq", "  queueingStrategy: StrictFIFO\n", "cpu",
                      FQ1("spot-tainted", "cpu", "20") FQ1("on-demand", "cpu", "15")),
     {"@0 adm existing-on-demand-job custom-cq 0 1*cpu=10 on-demand",
      "@0 sub new-job custom-cq 0 1*cpu=10", "want existing-on-demand-job:A new-job:P",
      "reason new-job couldn't assign flavors to pod set main: insufficient unused quota for cpu "
      "in flavor on-demand, 5 more needed, untolerated taint {key val NoSchedule <nil>} in flavor "
      "spot-tainted"}},
    {"sched: flavors with mixed taint mismatch and exceeding limits",
     SCHED_FLAVORS CQ("custom-cq2", "  queueingStrategy: StrictFIFO\n", "cpu",
                      FQ1("spot-tainted", "cpu", "20") FQ1("on-demand", "cpu", "5")),
     {"@0 sub new-job2 custom-cq2 0 1*cpu=10", "want new-job2:P",
      "reason new-job2 couldn't assign flavors to pod set main: insufficient quota for cpu in "
      "flavor on-demand, previously considered podsets requests (0) + current podset request "
      "(10) > maximum capacity (5), untolerated taint {key val NoSchedule <nil>} in flavor "
      "spot-tainted"}},
    {"sched: flavors are structurally incompatible",
     SCHED_FLAVORS CQ("custom-cq3", "  queueingStrategy: StrictFIFO\n", "cpu",
                      FQ1("spot-tainted", "cpu", "20") FQ1("spot-tainted-2", "cpu", "5")),
     {"@0 sub new-job3 custom-cq3 0 1*cpu=1", "want new-job3:P",
      "reason new-job3 couldn't assign flavors to pod set main: untolerated taint {key val "
      "NoSchedule <nil>} in flavor spot-tainted, untolerated taint {key val2 NoSchedule <nil>} "
      "in flavor spot-tainted-2"}},
    /* TestAssignFlavors' flavors: tainted (instance=spot:NoSchedule) and
     * taint_and_toleration (the same taint, and the flavor tolerates it) */
    {"assign: single flavor, fits tainted flavor (the pod set tolerates it)",
     RF_TAINT("tainted", "instance", "spot")
         CQ("test-clusterqueue", "", "cpu", FQ1("tainted", "cpu", "4")),
     {"@0 wl " WL("wl", "test-clusterqueue", "0",
                  "{containers: [{name: c, resources: {requests: {cpu: '1'}}}], tolerations: "
                  "[{key: instance, operator: Equal, value: spot, effect: NoSchedule}]}"),
      "want wl:A", "flavors wl main: cpu=tainted"}},
    {"assign: single flavor, fits tainted flavor with toleration (the flavor's own)",
     "kind: ResourceFlavor\nmetadata: {name: taint_and_toleration}\nspec:\n"
     "  nodeTaints: [{key: instance, value: spot, effect: NoSchedule}]\n"
     "  tolerations: [{key: instance, operator: Equal, value: spot, effect: NoSchedule}]\n---\n"
     CQ("test-clusterqueue", "", "cpu", FQ1("taint_and_toleration", "cpu", "4")),
     {"@0 sub wl test-clusterqueue 0 1*cpu=1", "want wl:A",
      "flavors wl main: cpu=taint_and_toleration"}},
    {"assign: multiple flavors, fits while skipping tainted flavor",
     RF_TAINT("tainted", "instance", "spot") RF("two")
         CQ("test-clusterqueue", "", "cpu", FQ1("tainted", "cpu", "4") FQ1("two", "cpu", "4")),
     {"@0 sub wl test-clusterqueue 0 1*cpu=3", "want wl:A", "flavors wl main: cpu=two"}},
    /* ---- flavor nodeLabels against the pod's nodeSelector and required
     * node affinity: TestAssignFlavors' rows of flavorassigner_test.go at
     * kubernetes-sigs/kueue b197f2f8fb68250341fad7c6b748fcf139220da0, the
     * selector as flavorassigner.go's checkFlavorForPodSets/flavorSelector
     * at 003722419b984db84107b513905656c4be81631c builds it (only the
     * flavor's own label keys count). Flavors: one (type=one), two
     * (type=two), label-x-a (x=a), label-xy-b (x=b, y=k), default (none). */
    {"assign: multiple flavors, fits a node selector",
     RF_LABELS("one", "{type: one}") RF_LABELS("two", "{type: two}")
         CQ("test-clusterqueue", "", "cpu", FQ1("one", "cpu", "4") FQ1("two", "cpu", "4")),
     {"@0 wl " WL("wl", "test-clusterqueue", "0",
                  "{nodeSelector: {type: two, ignored1: foo}, affinity: {nodeAffinity: "
                  "{requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
                  "[{matchExpressions: [{key: ignored2, operator: In, values: [bar]}]}]}}}, "
                  "containers: [{name: c, resources: {requests: {cpu: '1'}}}]}"),
      "want wl:A", "flavors wl main: cpu=two"}},
    {"assign: multiple flavors, fits with node affinity",
     RF_LABELS("one", "{type: one}") RF_LABELS("two", "{type: two}")
         CQ("test-clusterqueue", "", "cpu, memory",
            FQ2("one", "cpu", "4", "memory", "1Gi") FQ2("two", "cpu", "4", "memory", "1Gi")),
     {"@0 wl " WL("wl", "test-clusterqueue", "0",
                  "{nodeSelector: {ignored1: foo}, affinity: {nodeAffinity: "
                  "{requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
                  "[{matchExpressions: [{key: type, operator: In, values: [two]}]}]}}}, "
                  "containers: [{name: c, resources: {requests: {cpu: '1', memory: 1Mi}}}]}"),
      "want wl:A", "flavors wl main: cpu=two, memory=two"}},
    {"assign: multiple flavors, node affinity fits any flavor",
     RF_LABELS("one", "{type: one}") RF_LABELS("two", "{type: two}")
         CQ("test-clusterqueue", "", "cpu", FQ1("one", "cpu", "4") FQ1("two", "cpu", "4")),
     {"@0 wl " WL("wl", "test-clusterqueue", "0",
                  "{affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
                  "{nodeSelectorTerms: [{matchExpressions: [{key: ignored2, operator: In, "
                  "values: [bar]}]}, {matchExpressions: [{key: cpuType, operator: In, values: "
                  "[two]}]}]}}}, containers: [{name: c, resources: {requests: {cpu: '1'}}}]}"),
      "want wl:A", "flavors wl main: cpu=one"}},
    {"assign: multiple flavors with different label keys, selector only uses flavor's own keys",
     RF_LABELS("label-x-a", "{x: a}") RF_LABELS("label-xy-b", "{x: b, y: k}")
         CQ("test-clusterqueue", "", "cpu",
            FQ1("label-x-a", "cpu", "4") FQ1("label-xy-b", "cpu", "4")),
     {"@0 wl " WL("wl", "test-clusterqueue", "0",
                  "{nodeSelector: {x: a, y: g}, containers: [{name: c, resources: {requests: "
                  "{cpu: '1'}}}]}"),
      "want wl:A", "flavors wl main: cpu=label-x-a"}},
    {"assign: labelless flavor in group with labeled flavor, workload uses labeled selector",
     RF("default") RF_LABELS("two", "{type: two}")
         CQ("test-clusterqueue", "", "cpu", FQ1("default", "cpu", "4") FQ1("two", "cpu", "4")),
     {"@0 wl " WL("wl", "test-clusterqueue", "0",
                  "{nodeSelector: {type: two}, containers: [{name: c, resources: {requests: "
                  "{cpu: '1'}}}]}"),
      "want wl:A", "flavors wl main: cpu=default"}},
    {"assign: multiple flavors, doesn't fit node affinity",
     RF_LABELS("one", "{type: one}") RF_LABELS("two", "{type: two}")
         CQ("test-clusterqueue", "", "cpu", FQ1("one", "cpu", "4") FQ1("two", "cpu", "4")),
     {"@0 wl " WL("wl", "test-clusterqueue", "0",
                  "{affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
                  "{nodeSelectorTerms: [{matchExpressions: [{key: type, operator: In, values: "
                  "[three]}]}]}}}, containers: [{name: c, resources: {requests: {cpu: '1'}}}]}"),
      "want wl:P",
      "reason wl couldn't assign flavors to pod set main: flavor one doesn't match node "
      "affinity, flavor two doesn't match node affinity"}},
    /* tenantd's own rows, Kubernetes' operators against a flavor's labels
     * (kube-scheduler's NodeAffinity; Gt and Lt compare integers, a label
     * that is not one matches neither) */
    {"tenantd: NotIn, DoesNotExist and Gt against flavor labels",
     RF_LABELS("small", "{type: gpu, mem: '40'}") RF_LABELS("big", "{type: gpu, mem: '80'}")
         RF_LABELS("odd", "{type: cpu, mem: lots}")
         CQ("test-clusterqueue", "", "cpu",
            FQ1("small", "cpu", "4") FQ1("big", "cpu", "4") FQ1("odd", "cpu", "4")),
     {"@0 wl " WL("gt", "test-clusterqueue", "0",
                  "{affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
                  "{nodeSelectorTerms: [{matchExpressions: [{key: mem, operator: Gt, values: "
                  "['50']}]}]}}}, containers: [{name: c, resources: {requests: {cpu: '1'}}}]}"),
      "@0 wl " WL("notin", "test-clusterqueue", "0",
                  "{affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
                  "{nodeSelectorTerms: [{matchExpressions: [{key: type, operator: NotIn, "
                  "values: [gpu]}]}]}}}, containers: [{name: c, resources: {requests: {cpu: "
                  "'1'}}}]}"),
      "@0 wl " WL("none", "test-clusterqueue", "0",
                  "{affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
                  "{nodeSelectorTerms: [{matchExpressions: [{key: type, operator: "
                  "DoesNotExist}]}]}}}, containers: [{name: c, resources: {requests: {cpu: "
                  "'1'}}}]}"),
      "want gt:A notin:A none:P", "flavors gt main: cpu=big", "flavors notin main: cpu=odd",
      "reason none couldn't assign flavors to pod set main: flavor big doesn't match node "
      "affinity, flavor odd doesn't match node affinity, flavor small doesn't match node "
      "affinity"}},

    /* ---- item 4: preemption only within nominal quota, unless borrowWithinCohort ---- */
    {"sched: A workload is only eligible to do preemptions if it fits fully within nominal quota",
     RF("on-demand")
         CQ("other-alpha",
            "  cohort: other\n  preemption: {reclaimWithinCohort: Any, withinClusterQueue: "
            "LowerPriority}\n",
            "cpu", FQ1("on-demand", "cpu", "2"))
             CQ("other-beta", "  cohort: other\n", "cpu", FQ1("on-demand", "cpu", "2")),
     {"@0 adm a1 other-alpha -1 1*cpu=1 on-demand", "@0 adm b1 other-beta -1 1*cpu=1 on-demand",
      "@0 sub incoming other-alpha 1 1*cpu=3", "want a1:A b1:A incoming:P", "pre ",
      "reason incoming couldn't assign flavors to pod set main: insufficient unused quota for cpu "
      "in flavor on-demand, 1 more needed"}},
    /* The same platform with borrowWithinCohort: the exception Kueue's
     * canPreemptWhileBorrowing makes (fitsResourceQuota). */
    {"sched (variant): with borrowWithinCohort the incoming workload may preempt to borrow",
     RF("on-demand")
         CQ("other-alpha",
            "  cohort: other\n  preemption: {reclaimWithinCohort: Any, withinClusterQueue: "
            "LowerPriority, borrowWithinCohort: {policy: LowerPriority}}\n",
            "cpu", FQ1("on-demand", "cpu", "2"))
             CQ("other-beta", "  cohort: other\n", "cpu", FQ1("on-demand", "cpu", "2")),
     {"@0 adm a1 other-alpha -1 1*cpu=1 on-demand", "@0 adm b1 other-beta -1 1*cpu=1 on-demand",
      "@0 sub incoming other-alpha 1 1*cpu=3", "want b1:A incoming:A",
      "pre a1/InClusterQueue"}},

    /* ---- item 3: reclamation before priority preemption ---- */
    {"sched: prefer reclamation over cq priority based preemption",
     RF("on-demand") RF("spot")
         CQ("other-alpha",
            "  cohort: other\n  preemption: {withinClusterQueue: LowerPriority, "
            "reclaimWithinCohort: LowerPriority}\n",
            "gpu", FQ1("on-demand", "gpu", "10") FQ1("spot", "gpu", "10"))
             CQ("other-beta",
                "  cohort: other\n  preemption: {withinClusterQueue: LowerPriority, "
                "reclaimWithinCohort: LowerPriority}\n",
                "gpu", FQ1("on-demand", "gpu", "0") FQ1("spot", "gpu", "0")),
     {"@0 adm a1 other-alpha 50 1*gpu=5 on-demand", "@0 adm b1 other-beta 50 1*gpu=5 spot",
      "@0 sub preemptor other-alpha 100 1*gpu=6", "pre b1/InCohortReclamation",
      "want a1:A preemptor:A", "flavors preemptor main: gpu=spot",
      /* Kueue's next cycle: the requeued b1 borrows on-demand's free 5 */
      "want b1:A", "flavors b1 main: gpu=on-demand"}},
    {"sched: prefer first preemption flavor when second flavor requires both reclaim and cq "
     "priority preemption",
     RF("on-demand") RF("spot")
         CQ("other-alpha",
            "  cohort: other\n  preemption: {withinClusterQueue: LowerPriority, "
            "reclaimWithinCohort: LowerPriority}\n",
            "gpu", FQ1("on-demand", "gpu", "10") FQ1("spot", "gpu", "10"))
             CQ("other-beta", "  cohort: other\n", "gpu",
                FQ1("on-demand", "gpu", "0") FQ1("spot", "gpu", "0")),
     {"@0 adm a1 other-alpha 50 1*gpu=5 on-demand", "@0 adm a2 other-alpha 50 1*gpu=5 spot",
      "@0 adm b1 other-beta 50 1*gpu=5 spot", "@0 sub preemptor other-alpha 100 1*gpu=6",
      "pre a1/InClusterQueue", "want a2:A b1:A preemptor:A",
      "flavors preemptor main: gpu=on-demand"}},
    {"sched: prefer first preemption flavor when second flavor also requires cq preemption",
     RF("on-demand") RF("spot")
         CQ("other-alpha",
            "  cohort: other\n  preemption: {withinClusterQueue: LowerPriority, "
            "reclaimWithinCohort: LowerPriority}\n",
            "gpu", FQ1("on-demand", "gpu", "10") FQ1("spot", "gpu", "10"))
             CQ("other-beta", "  cohort: other\n", "gpu",
                FQ1("on-demand", "gpu", "0") FQ1("spot", "gpu", "0")),
     {"@0 adm a1 other-alpha 50 1*gpu=6 on-demand", "@0 adm a2 other-alpha 50 1*gpu=5 spot",
      "@0 adm b1 other-beta 9001 1*gpu=5 spot", "@0 sub preemptor other-alpha 100 1*gpu=5",
      "pre a1/InClusterQueue", "want a2:A b1:A preemptor:A",
      "flavors preemptor main: gpu=on-demand"}},

/* TestReclaimBeforePriorityPreemption (flavorassigner_test.go): flavors
 * uno, due, tre with 10 compute and 10 gpu each in test-clusterqueue
 * (withinClusterQueue and reclaimWithinCohort LowerPriority,
 * whenCanPreempt TryNextFlavor); other-clusterqueue owns none and borrows. */
#define RBP_PLATFORM(ff)                                                                           \
    RF("uno") RF("due") RF("tre")                                                                 \
    CQ("test-clusterqueue",                                                                       \
       "  cohort: cohort\n  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: " \
       "LowerPriority}\n  flavorFungibility: {whenCanPreempt: " ff "}\n",                        \
       "compute, gpu",                                                                            \
       FQ2("uno", "compute", "10", "gpu", "10") FQ2("due", "compute", "10", "gpu", "10")          \
           FQ2("tre", "compute", "10", "gpu", "10"))                                              \
    CQ("other-clusterqueue", "  cohort: cohort\n", "compute, gpu",                                \
       FQ2("uno", "compute", "0", "gpu", "0") FQ2("due", "compute", "0", "gpu", "0")             \
           FQ2("tre", "compute", "0", "gpu", "0"))
    {"reclaim-before-preemption: Select first flavor which fits",
     RBP_PLATFORM("TryNextFlavor"),
     {"@0 adm t1 test-clusterqueue -1 1*gpu=1 uno", "@0 adm o1 other-clusterqueue -1 1*gpu=1 due",
      "@1 sub wl test-clusterqueue 0 1*gpu=10", "want wl:A", "pre ", "flavors wl main: gpu=tre"}},
    {"reclaim-before-preemption: Select first flavor where gpu reclamation is possible",
     RBP_PLATFORM("TryNextFlavor"),
     {"@0 adm t1 test-clusterqueue -1 1*gpu=1 uno", "@0 adm o1 other-clusterqueue -1 1*gpu=1 due",
      "@0 adm o2 other-clusterqueue -1 1*gpu=1 tre", "@1 sub wl test-clusterqueue 0 1*gpu=10",
      "want wl:A t1:A o2:A", "pre o1/InCohortReclamation", "flavors wl main: gpu=due"}},
    {"reclaim-before-preemption: Select first flavor when flavor fungibility is disabled",
     RBP_PLATFORM("MayStopSearch"),
     {"@0 adm t1 test-clusterqueue -1 1*gpu=1 uno", "@0 adm o1 other-clusterqueue -1 1*gpu=1 due",
      "@0 adm o2 other-clusterqueue -1 1*gpu=1 tre", "@1 sub wl test-clusterqueue 0 1*gpu=10",
      "want wl:A o1:A o2:A", "pre t1/InClusterQueue", "flavors wl main: gpu=uno"}},
    {"reclaim-before-preemption: ...; using deprecated WhenCanPreempt=MayStopSearch (v1beta1 "
     "Preempt)",
     RBP_PLATFORM("Preempt"),
     {"@0 adm t1 test-clusterqueue -1 1*gpu=1 uno", "@0 adm o1 other-clusterqueue -1 1*gpu=1 due",
      "@0 adm o2 other-clusterqueue -1 1*gpu=1 tre", "@1 sub wl test-clusterqueue 0 1*gpu=10",
      "want wl:A o1:A o2:A", "pre t1/InClusterQueue", "flavors wl main: gpu=uno"}},
    {"reclaim-before-preemption: Select first flavor where priority based preemption is possible",
     RBP_PLATFORM("TryNextFlavor"),
     {"@0 adm t1 test-clusterqueue -1 1*gpu=1 uno", "@0 adm t2 test-clusterqueue -1 1*gpu=1 due",
      "@0 adm t3 test-clusterqueue -1 1*gpu=1 tre", "@1 sub wl test-clusterqueue 0 1*gpu=10",
      "want wl:A t2:A t3:A", "pre t1/InClusterQueue", "flavors wl main: gpu=uno"}},
    {"reclaim-before-preemption: Select second flavor where gpu reclamation is possible, as "
     "compute Fits",
     RBP_PLATFORM("TryNextFlavor"),
     {"@0 adm t1 test-clusterqueue -1 1*gpu=1,compute=1 uno",
      "@0 adm t2 test-clusterqueue -1 1*compute=1 due",
      "@0 adm o1 other-clusterqueue -1 1*gpu=1 due", "@0 adm o2 other-clusterqueue -1 1*gpu=1 tre",
      "@1 sub wl test-clusterqueue 0 1*gpu=10,compute=10", "want wl:A t1:A t2:A o1:A",
      "pre o2/InCohortReclamation", "flavors wl main: compute=tre, gpu=tre"}},

    /* ---- item 1: flavorFungibility ---- */
    {"sched: use second flavor when the first has no preemption candidates; WhenCanPreempt: "
     "MayStopSearch",
     RF("on-demand") RF("spot")
         CQ("other-alpha",
            "  preemption: {withinClusterQueue: LowerPriority}\n"
            "  flavorFungibility: {whenCanPreempt: MayStopSearch}\n",
            "cpu", FQ1("on-demand", "cpu", "50") FQ1("spot", "cpu", "100")),
     {"@0 adm admitted other-alpha 0 1*cpu=50 on-demand", "@0 sub new other-alpha 0 1*cpu=20",
      "want admitted:A new:A", "pre ", "flavors new main: cpu=spot"}},
    {"sched: don't assign flavor if there are no candidates for preemption",
     RF("on-demand") RF("spot")
         CQ("cq1",
            "  cohort: cohort\n  preemption: {withinClusterQueue: LowerPriority, "
            "reclaimWithinCohort: Any}\n"
            "  flavorFungibility: {whenCanPreempt: MayStopSearch, whenCanBorrow: MayStopSearch}\n",
            "cpu", FQB("on-demand", "cpu", "0", "1") FQB("spot", "cpu", "0", "1"))
             CQ("cq2", "  cohort: cohort\n", "cpu",
                FQ1("on-demand", "cpu", "1") FQ1("spot", "cpu", "1")),
     {"@0 adm admitted cq2 0 1*cpu=1 on-demand", "@1 sub new cq1 100 1*cpu=1", "pre ",
      "want admitted:A new:A", "flavors new main: cpu=spot"}},
    {"sched: admit to second flavor when first needs preemption; WhenCanPreempt: TryNextFlavor",
     RF("on-demand") RF("spot")
         CQ("preempt-attempts-cq",
            "  preemption: {withinClusterQueue: LowerPriority}\n"
            "  flavorFungibility: {whenCanPreempt: TryNextFlavor}\n",
            "cpu", FQ1("on-demand", "cpu", "1") FQ1("spot", "cpu", "1")),
     {"@0 adm blocker preempt-attempts-cq 50 1*cpu=1 on-demand",
      "@1 sub test-wl preempt-attempts-cq 100 1*cpu=1", "pre ", "want blocker:A test-wl:A",
      "flavors test-wl main: cpu=spot"}},
    {"sched: PreemptionOverBorrowing preference: preempt in first flavor instead of borrowing in "
     "second",
     RF("on-demand") RF("spot")
         CQ("pob-cq",
            "  cohort: pob-cohort\n  preemption: {withinClusterQueue: LowerPriority}\n"
            "  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor, "
            "preference: PreemptionOverBorrowing}\n",
            "cpu", FQB("on-demand", "cpu", "5", "0") FQB("spot", "cpu", "0", "5"))
             CQ("pob-lender", "  cohort: pob-cohort\n", "cpu",
                FQ1("on-demand", "cpu", "0") FQ1("spot", "cpu", "5")),
     {"@0 adm low-pob pob-cq -1 1*cpu=5 on-demand", "@0 sub high-pob pob-cq 0 1*cpu=5",
      "pre low-pob/InClusterQueue", "want high-pob:A",
      "flavors high-pob main: cpu=on-demand"}},
    {"sched: PreemptionOverBorrowing preference: select fitting second flavor over first flavor "
     "with no preemption candidates",
     RF("on-demand") RF("spot")
     "kind: Cohort\nmetadata: {name: nopc-root}\nspec:\n  resourceGroups:\n"
     "  - coveredResources: [cpu]\n    flavors:\n" FQ1("on-demand", "cpu", "0")
         FQ1("spot", "cpu", "5") "---\n"
     "kind: Cohort\nmetadata: {name: nopc-mid}\nspec: {parentName: nopc-root}\n---\n"
     CQ("nopc-cq",
        "  cohort: nopc-mid\n  preemption: {withinClusterQueue: LowerPriority}\n"
        "  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor, "
        "preference: PreemptionOverBorrowing}\n",
        "cpu", FQB("on-demand", "cpu", "5", "0") FQ1("spot", "cpu", "0"))
         CQ("nopc-sibling", "  cohort: nopc-mid\n", "cpu",
            FQ1("on-demand", "cpu", "5") FQ1("spot", "cpu", "0")),
     {"@0 adm admitted-nopc nopc-cq 0 1*cpu=5 on-demand", "@0 sub pending-nopc nopc-cq 0 1*cpu=5",
      "pre ", "want admitted-nopc:A pending-nopc:A", "flavors pending-nopc main: cpu=spot"}},
    {"sched: BorrowingOverPreemption preference: borrow in second flavor instead of preempting in "
     "first",
     RF("on-demand") RF("spot")
         CQ("bop-cq",
            "  cohort: bop-cohort\n  preemption: {withinClusterQueue: LowerPriority}\n"
            "  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor, "
            "preference: BorrowingOverPreemption}\n",
            "cpu", FQB("on-demand", "cpu", "5", "0") FQB("spot", "cpu", "0", "5"))
             CQ("bop-lender", "  cohort: bop-cohort\n", "cpu",
                FQ1("on-demand", "cpu", "0") FQ1("spot", "cpu", "5")),
     {"@0 adm low-bop bop-cq -1 1*cpu=5 on-demand", "@0 sub high-bop bop-cq 0 1*cpu=5", "pre ",
      "want low-bop:A high-bop:A", "flavors high-bop main: cpu=spot"}},
    /* TestAssignFlavors: "when borrowing while preemption is needed for
     * flavor one; WhenCanBorrow=TryNextFlavor": one (0, borrowingLimit 12)
     * fits by borrowing, two (12) fits without: the search goes on to two. */
    {"assign: when borrowing while preemption is needed for flavor one; WhenCanBorrow=TryNextFlavor",
     RF("one") RF("two")
         CQ("test-clusterqueue",
            "  cohort: test-cohort\n  preemption: {reclaimWithinCohort: LowerPriority, "
            "borrowWithinCohort: {policy: LowerPriority}}\n"
            "  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: MayStopSearch}\n",
            "cpu", FQB("one", "cpu", "0", "12") FQ1("two", "cpu", "12"))
             CQ("test-secondary-clusterqueue", "  cohort: test-cohort\n", "cpu",
                FQ1("one", "cpu", "12")),
     {"@0 sub wl test-clusterqueue 0 1*cpu=12", "want wl:A", "flavors wl main: cpu=two"}},
    /* ... and with Kueue's default WhenCanBorrow (MayStopSearch): one. */
    {"assign (variant): the same with WhenCanBorrow=MayStopSearch borrows on the first",
     RF("one") RF("two")
         CQ("test-clusterqueue",
            "  cohort: test-cohort\n  preemption: {reclaimWithinCohort: LowerPriority, "
            "borrowWithinCohort: {policy: LowerPriority}}\n"
            "  flavorFungibility: {whenCanBorrow: MayStopSearch, whenCanPreempt: MayStopSearch}\n",
            "cpu", FQB("one", "cpu", "0", "12") FQ1("two", "cpu", "12"))
             CQ("test-secondary-clusterqueue", "  cohort: test-cohort\n", "cpu",
                FQ1("one", "cpu", "12")),
     {"@0 sub wl test-clusterqueue 0 1*cpu=12", "want wl:A", "flavors wl main: cpu=one"}},
    {"assign: when borrowing while preemption is needed, but borrowingLimit exceeds the quota "
     "available in the cohort",
     RF("one")
         CQ("test-clusterqueue",
            "  cohort: test-cohort\n  preemption: {reclaimWithinCohort: LowerPriority, "
            "borrowWithinCohort: {policy: LowerPriority}}\n",
            "cpu", FQB("one", "cpu", "0", "12"))
             CQ("test-secondary-clusterqueue", "  cohort: test-cohort\n", "cpu",
                FQ1("one", "cpu", "11")),
     {"@0 adm used test-secondary-clusterqueue 0 1*cpu=10 one",
      "@0 sub wl test-clusterqueue 0 1*cpu=12", "want wl:P",
      "reason wl couldn't assign flavors to pod set main: insufficient quota for cpu in flavor "
      "one, previously considered podsets requests (0) + current podset request (12) > maximum "
      "capacity (11)"}},

    /* ---- item 5: entry order in hierarchical cohorts ---- */
    {"sched: in a hierarchical cohort, workload borrowing less is scheduled first",
     RF("default")
     "kind: Cohort\nmetadata: {name: root}\n---\n"
     "kind: Cohort\nmetadata: {name: guaranteed}\nspec:\n  parentName: root\n"
     "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n" FQ1("default", "cpu", "4")
     "---\n" CQ("guaranteed", "  cohort: guaranteed\n", "cpu", FQ1("default", "cpu", "0"))
         CQ("best-effort", "  cohort: root\n", "cpu", FQ1("default", "cpu", "0")),
     /* both borrow; guaranteed from its own cohort (level 1), best-effort
      * from the root (level 2): guaranteed goes first despite priority */
     {"@0 add guaranteed guaranteed 0 1*cpu=4", "@0 add best-effort best-effort 3 1*cpu=4",
      "@0 sched", "want guaranteed:A best-effort:P"}},

    /* ---- item 6: requests above limits ---- */
    {"sched: container resource requests exceed limits",
     RF("default") CQ("sales", "  queueingStrategy: StrictFIFO\n", "cpu",
                      FQ1("default", "cpu", "50")),
     {"@0 wl " WL("new", "sales", "0",
                  "{containers: [{name: c, resources: {requests: {cpu: 200m}, limits: {cpu: "
                  "100m}}}]}"),
      "want new:P",
      "reason new resources validation failed: spec.podSets[0].template.spec.containers[0]: "
      "Invalid value: [\"cpu\"]: requests must not exceed its limits"}},
};

/* ---- the interpreter ----------------------------------------------------- */

static void dump(const td_queue *q)
{
    const td_queue_event *ev;
    size_t ne = td_queue_events(q, &ev);
    for (size_t i = 0; i < ne; i++)
        print_message("  event t=%llu type=%d %s %s [%s] %s\n",
                      (unsigned long long)(ev[i].t_ns / NS), ev[i].type,
                      td_queue_workload_key(q, ev[i].workload), ev[i].level, ev[i].flavors,
                      ev[i].reason);
    for (size_t i = 0; i < td_queue_workload_count(q); i++)
        print_message("  %s state=%d flavors=%s reason=%s\n", td_queue_workload_key(q, i),
                      td_queue_workload_state(q, i), td_queue_workload_flavors(q, i),
                      td_queue_workload_reason(q, i));
}

/* Submits w and records it admitted on flavor for every resource it
 * requests, as Kueue's ReserveQuotaAt does in its tables. */
static void admit_on(td_queue *q, json_t *w, const char *cq, const char *flavor, uint64_t t)
{
    td_err err;
    size_t id;
    if (td_queue_submit(q, w, NULL, t, &id, &err) != TD_OK)
        fail_msg("%s", err.msg);
    json_t *psa = json_array();
    size_t i;
    json_t *ps;
    json_array_foreach(json_object_get(json_object_get(w, "spec"), "podSets"), i, ps)
    {
        json_t *fl = json_object();
        const char *r;
        json_t *v;
        json_t *req = json_object_get(
            json_object_get(json_array_get(json_object_get(json_object_get(json_object_get(ps,
                                                                                         "template"),
                                                                         "spec"),
                                                           "containers"),
                                           0),
                            "resources"),
            "requests");
        json_object_foreach(req, r, v)
            json_object_set_new(fl, r, json_string(flavor));
        json_array_append_new(psa, json_pack("{s:O,s:o}", "name", json_object_get(ps, "name"),
                                             "flavors", fl));
    }
    json_t *adm = json_pack("{s:s,s:o}", "clusterQueue", cq, "podSetAssignments", psa);
    if (td_queue_restore_admission(q, id, adm, t, false, &err) != TD_OK)
        fail_msg("%s", err.msg);
    json_decref(adm);
}

static void run_row(const row *s)
{
    td_queue *q = load_platform(s->platform);
    td_err err;
    size_t pre_seen = 0;
    for (size_t k = 0; k < sizeof s->steps / sizeof s->steps[0] && s->steps[k]; k++) {
        const char *st = s->steps[k];
        char a[64] = "", b[64] = "", sets[256] = "", fl[64] = "";
        unsigned long long t;
        int prio, n;
        if (st[0] == '@') {
            assert_int_equal(sscanf(st, "@%llu %63s%n", &t, a, &n), 2);
            const char *rest = st + n;
            if (strcmp(a, "sub") == 0 || strcmp(a, "adm") == 0) {
                char name[64];
                assert_true(sscanf(rest, "%63s %63s %d %255s %63s", name, b, &prio, sets, fl) >=
                            4);
                json_t *w = scenario_workload(name, b, prio, sets);
                if (strcmp(a, "adm") == 0) {
                    admit_on(q, w, b, fl, t * NS);
                    json_decref(w);
                    continue;
                }
                if (td_queue_submit(q, w, NULL, t * NS, NULL, &err) != TD_OK)
                    fail_msg("%s: %s", s->name, err.msg);
                json_decref(w);
            } else if (strcmp(a, "add") == 0) {
                char name[64];
                assert_int_equal(sscanf(rest, "%63s %63s %d %255s", name, b, &prio, sets), 4);
                json_t *w = scenario_workload(name, b, prio, sets);
                if (td_queue_submit(q, w, NULL, t * NS, NULL, &err) != TD_OK)
                    fail_msg("%s: %s", s->name, err.msg);
                json_decref(w);
                continue;
            } else if (strcmp(a, "wl") == 0) {
                td_manifest *m;
                if (td_manifest_parse("wl.yaml", rest, strlen(rest), &m, &err) != TD_OK)
                    fail_msg("%s: %s", s->name, err.msg);
                if (td_queue_submit(q, td_manifest_doc(m, 0), m, t * NS, NULL, &err) != TD_OK)
                    fail_msg("%s: %s", s->name, err.msg);
                td_manifest_destroy(m);
            } else {
                assert_string_equal(a, "sched");
            }
            assert_int_equal(td_queue_schedule(q, t * NS, NULL), TD_OK);
        } else if (strncmp(st, "want ", 5) == 0) {
            char buf[512];
            snprintf(buf, sizeof buf, "%s", st + 5);
            for (char *sv = NULL, *it = strtok_r(buf, " ", &sv); it; it = strtok_r(NULL, " ", &sv)) {
                char *colon = strchr(it, ':');
                *colon = '\0';
                td_wl_state ws = td_queue_workload_state(q, find(q, it));
                char got = ws == TD_WL_ADMITTED ? 'A' : ws == TD_WL_PENDING ? 'P' : 'F';
                if (got != colon[1]) {
                    dump(q);
                    fail_msg("%s: step \"%s\": %s is %c", s->name, st, it, got);
                }
            }
        } else if (strncmp(st, "reason ", 7) == 0 || strncmp(st, "flavors ", 8) == 0) {
            bool reason = st[0] == 'r';
            const char *p = strchr(st, ' ') + 1;
            const char *sp = strchr(p, ' ');
            snprintf(a, sizeof a, "%.*s", (int)(sp - p), p);
            size_t id = find(q, a);
            const char *got =
                reason ? td_queue_workload_reason(q, id) : td_queue_workload_flavors(q, id);
            if (strcmp(got, sp + 1) != 0) {
                dump(q);
                fail_msg("%s: %s of %s:\n  got  \"%s\"\n  want \"%s\"", s->name,
                         reason ? "reason" : "flavors", a, got, sp + 1);
            }
        } else if (strncmp(st, "pre ", 4) == 0) {
            const td_queue_event *ev;
            size_t ne = td_queue_events(q, &ev);
            char got[512] = "";
            for (; pre_seen < ne; pre_seen++)
                if (ev[pre_seen].type == TD_QEV_PREEMPTED)
                    snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s/%s",
                             *got ? "," : "",
                             strchr(td_queue_workload_key(q, ev[pre_seen].workload), '/') + 1,
                             ev[pre_seen].level);
            if (strcmp(got, st + 4) != 0) {
                dump(q);
                fail_msg("%s: preempted got \"%s\" want \"%s\"", s->name, got, st + 4);
            }
        } else {
            fail_msg("bad step %s", st);
        }
    }
    td_queue_destroy(q);
}

/* Item 7 (not a Kueue table row: Kueue's cache tests check the condition):
 * a ClusterQueue naming a ResourceFlavor that does not exist is inactive,
 * its workloads wait with Kueue's reason, it lends nothing to its cohort,
 * and the same objects with the flavor added activate it. */
static void test_inactive_cluster_queue(void **state)
{
    (void)state;
    /* d names the missing flavor in a group of its own; its lending would
     * otherwise let c borrow memory */
    const char *yaml = RF("default")
        CQ("a", "  cohort: all\n", "cpu", FQ1("default", "cpu", "4"))
            CQ("b", "  cohort: all\n", "cpu, gpu",
               FQ2("default", "cpu", "10", "gpu", "0") FQ2("missing", "cpu", "0", "gpu", "8"))
                CQ("c", "  cohort: all\n", "cpu", FQ1("default", "cpu", "0"));
    td_queue *q = load_platform(yaml);
    assert_null(td_queue_cq_inactive(q, 0));
    assert_string_equal(td_queue_cq_inactive(q, 1),
                        "Can't admit new workloads: references missing ResourceFlavor(s): missing.");
    assert_null(td_queue_cq_inactive(q, 2));
    td_err err;
    json_t *w1 = scenario_workload("in-b", "b", 0, "1*cpu=1");
    json_t *w2 = scenario_workload("in-c", "c", 0, "1*cpu=6");
    json_t *w3 = scenario_workload("in-c-small", "c", 0, "1*cpu=4");
    assert_int_equal(td_queue_submit(q, w1, NULL, 0, NULL, &err), TD_OK);
    assert_int_equal(td_queue_submit(q, w2, NULL, 0, NULL, &err), TD_OK);
    assert_int_equal(td_queue_schedule(q, 0, NULL), TD_OK);
    assert_int_equal(td_queue_workload_state(q, find(q, "in-b")), TD_WL_PENDING);
    assert_string_equal(td_queue_workload_reason(q, find(q, "in-b")), "ClusterQueue b is inactive");
    /* b's 10 CPUs are not lent: c can borrow only a's 4 */
    assert_int_equal(td_queue_workload_state(q, find(q, "in-c")), TD_WL_PENDING);
    assert_int_equal(td_queue_submit(q, w3, NULL, 0, NULL, &err), TD_OK);
    assert_int_equal(td_queue_schedule(q, 0, NULL), TD_OK);
    assert_int_equal(td_queue_workload_state(q, find(q, "in-c-small")), TD_WL_ADMITTED);
    td_queue_destroy(q);

    /* a Cohort naming a missing flavor loads (Kueue keeps its quota; a
     * Cohort has no active state) and lends what it has of the others */
    td_queue *cq = load_platform(
        RF("default") "kind: Cohort\nmetadata: {name: all}\nspec:\n  resourceGroups:\n"
                      "  - coveredResources: [cpu]\n    flavors:\n" FQ1("default", "cpu", "6")
                          FQ1("missing", "cpu", "6") "---\n"
                      CQ("d", "  cohort: all\n", "cpu", FQ1("default", "cpu", "0")));
    assert_null(td_queue_cq_inactive(cq, 0));
    json_t *w4 = scenario_workload("in-d", "d", 0, "1*cpu=6");
    assert_int_equal(td_queue_submit(cq, w4, NULL, 0, NULL, &err), TD_OK);
    assert_int_equal(td_queue_schedule(cq, 0, NULL), TD_OK);
    assert_int_equal(td_queue_workload_state(cq, find(cq, "in-d")), TD_WL_ADMITTED);
    json_decref(w4);
    td_queue_destroy(cq);

    /* the flavor applied: active, admits */
    char *with = malloc(strlen(yaml) + 64);
    sprintf(with, "%s%s", RF("missing"), yaml);
    q = load_platform(with);
    free(with);
    assert_null(td_queue_cq_inactive(q, 1));
    assert_int_equal(td_queue_submit(q, w1, NULL, 0, NULL, &err), TD_OK);
    assert_int_equal(td_queue_submit(q, w2, NULL, 0, NULL, &err), TD_OK);
    assert_int_equal(td_queue_schedule(q, 0, NULL), TD_OK);
    assert_int_equal(td_queue_workload_state(q, find(q, "in-b")), TD_WL_ADMITTED);
    assert_int_equal(td_queue_workload_state(q, find(q, "in-c")), TD_WL_ADMITTED);
    td_queue_destroy(q);
    json_decref(w1);
    json_decref(w2);
    json_decref(w3);
}

/* Kueue's API validation of the new fields, refused by name. */
static void test_bad_fields(void **state)
{
    (void)state;
    static const struct {
        const char *yaml, *want;
    } bad[] = {
        {CQ("a", "  flavorFungibility: {whenCanBorrow: MayStopSearch, preference: "
                 "PreemptionOverBorrowing}\n",
            "cpu", FQ1("default", "cpu", "1")),
         "x.yaml:4: ClusterQueue a: spec.flavorFungibility.preference: preference can only be "
         "set when both whenCanBorrow and whenCanPreempt are TryNextFlavor"},
        {CQ("a", "  flavorFungibility: {whenCanBorrow: Sometimes}\n", "cpu",
            FQ1("default", "cpu", "1")),
         "spec.flavorFungibility.whenCanBorrow: must be one of MayStopSearch, TryNextFlavor, "
         "Borrow"},
        {CQ("a", "  flavorFungibility: {whenCanPreempt: Borrow}\n", "cpu",
            FQ1("default", "cpu", "1")),
         "spec.flavorFungibility.whenCanPreempt: must be one of MayStopSearch, TryNextFlavor, "
         "Preempt"},
        {"kind: ResourceFlavor\nmetadata: {name: f}\nspec: {nodeTaints: [{key: k}]}\n",
         "ResourceFlavor f: spec.nodeTaints[0]: effect: required"},
        {"kind: ResourceFlavor\nmetadata: {name: f}\nspec: {tolerations: [{key: k, operator: "
         "Gt}]}\n",
         "ResourceFlavor f: spec.tolerations[0].operator: must be Exists or Equal"},
        {"kind: ResourceFlavor\nmetadata: {name: f}\nspec: {tolerations: [{key: k, effect: "
         "Never}]}\n",
         "ResourceFlavor f: spec.tolerations[0]: effect must be NoSchedule, PreferNoSchedule or "
         "NoExecute"},
    };
    for (size_t r = 0; r < sizeof bad / sizeof bad[0]; r++) {
        td_manifest *m;
        td_err err;
        td_queue *q;
        assert_int_equal(td_manifest_parse("x.yaml", bad[r].yaml, strlen(bad[r].yaml), &m, &err),
                         TD_OK);
        assert_int_equal(td_queue_create(&q, &err), TD_OK);
        td_status s = TD_OK;
        for (size_t i = 0; i < td_manifest_count(m) && s == TD_OK; i++)
            s = td_queue_add_object(q, td_manifest_doc(m, i), m, &err);
        if (s != TD_EINVAL || !strstr(err.msg, bad[r].want))
            fail_msg("row %zu: status %d, message \"%s\", want \"%s\"", r, s, s ? err.msg : "",
                     bad[r].want);
        td_queue_destroy(q);
        td_manifest_destroy(m);
    }
    /* a Workload whose node affinity the API server would refuse is refused */
    static const struct {
        const char *podspec, *want;
    } badsel[] = {
        {"{containers: [{name: c}], nodeSelector: {a: [b]}}",
         "spec.podSets[0].template.spec.nodeSelector: label a: the value must be a string"},
        {"{containers: [{name: c}], affinity: {nodeAffinity: "
         "{requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
         "[{matchExpressions: [{key: a, operator: Near, values: [b]}]}]}}}}",
         "nodeSelectorTerms[0].matchExpressions[0]: operator: must be In, NotIn, Exists, "
         "DoesNotExist, Gt or Lt"},
        {"{containers: [{name: c}], affinity: {nodeAffinity: "
         "{requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
         "[{matchExpressions: [{key: a, operator: In}]}]}}}}",
         "matchExpressions[0]: values: must be non-empty for operator In"},
        {"{containers: [{name: c}], affinity: {nodeAffinity: "
         "{requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
         "[{matchExpressions: [{key: a, operator: Gt, values: ['1', '2']}]}]}}}}",
         "matchExpressions[0]: values: must be one integer for operator Gt"},
        {"{containers: [{name: c}], affinity: {nodeAffinity: "
         "{requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
         "[{matchExpressions: [{key: a, operator: Exists, values: [x]}]}]}}}}",
         "matchExpressions[0]: values: must be empty for operator Exists"},
    };
    for (size_t r = 0; r < sizeof badsel / sizeof badsel[0]; r++) {
        td_queue *bq = load_platform(RF_LABELS("default", "{a: b}")
                                         CQ("a", "", "cpu", FQ1("default", "cpu", "1")));
        char y[1024];
        snprintf(y, sizeof y, WL("w", "a", "0", "%s"), badsel[r].podspec);
        td_manifest *bm;
        td_err berr;
        assert_int_equal(td_manifest_parse("w.yaml", y, strlen(y), &bm, &berr), TD_OK);
        td_status s = td_queue_submit(bq, td_manifest_doc(bm, 0), bm, 0, NULL, &berr);
        if (s != TD_EINVAL || !strstr(berr.msg, badsel[r].want))
            fail_msg("selection row %zu: status %d, message \"%s\", want \"%s\"", r, s,
                     s ? berr.msg : "", badsel[r].want);
        assert_int_equal(td_queue_workload_count(bq), 0);
        td_manifest_destroy(bm);
        td_queue_destroy(bq);
    }
    /* a Workload whose toleration has an unknown operator is refused whole */
    td_queue *q = load_platform(RF("default") CQ("a", "", "cpu", FQ1("default", "cpu", "1")));
    const char *wl = WL("w", "a", "0", "{containers: [{name: c}], tolerations: [{operator: Lt}]}");
    td_manifest *m;
    td_err err;
    assert_int_equal(td_manifest_parse("w.yaml", wl, strlen(wl), &m, &err), TD_OK);
    assert_int_equal(td_queue_submit(q, td_manifest_doc(m, 0), m, 0, NULL, &err), TD_EINVAL);
    assert_non_null(strstr(err.msg, "spec.podSets[0].template.spec.tolerations[0].operator: must "
                                    "be Exists or Equal"));
    assert_int_equal(td_queue_workload_count(q), 0);
    td_manifest_destroy(m);
    td_queue_destroy(q);
}

static void test_kueue_row(void **state)
{
    run_row(*state);
}

/* One cmocka test per row, named as Kueue names it. */
int main(void)
{
    enum { N = sizeof rows / sizeof rows[0] };
    struct CMUnitTest tests[N + 2];
    for (size_t i = 0; i < N; i++)
        tests[i] = (struct CMUnitTest){rows[i].name, test_kueue_row, NULL, NULL,
                                       (void *)&rows[i]};
    tests[N] = (struct CMUnitTest)cmocka_unit_test(test_inactive_cluster_queue);
    tests[N + 1] = (struct CMUnitTest)cmocka_unit_test(test_bad_fields);
    return _cmocka_run_group_tests("test_queue_kueue", tests, N + 2, NULL, NULL);
}
