/* test_queue_scenarios.c - the batch queue scenario by scenario: gang
 * placement on NodePools, borrowWithinCohort, and the ones Kueue documents.
 * Each row is a platform and a script run on a virtual clock:
 *   "@T sub NAME CQ PRIO SETS"  submit at T seconds, then schedule
 *   "@T add NAME CQ PRIO SETS"  submit at T without scheduling
 *   "@T sched" / "@T fin NAME"  schedule / finish NAME, then schedule
 *   "want NAME:A NAME:P ..."    states (A admitted, P pending, F finished)
 *   "reason NAME TEXT"          TEXT is part of NAME's reason
 *   "place NAME TEXT"           NAME's placement is exactly TEXT
 *   "flavors NAME TEXT"         NAME's flavor assignment is exactly TEXT
 *   "pre NAME/Level,..."        preemptions since the last "pre", in order
 * SETS is "count*res=q,res=q;count*..." (pod sets main, w1, w2...); every
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
} scenario;

/* ---- platforms ------------------------------------------------------------ */

#define RF(n) "kind: ResourceFlavor\nmetadata: {name: " n "}\n---\n"

/* One A100 pool of 4 nodes x 8 GPUs; quota (64) larger than the nodes (32)
 * so that placement, not quota, decides. */
static const char *const gpu_nodes =
    RF("a100") RF("default")
    "apiVersion: tenantd.dev/v1alpha1\nkind: NodePool\nmetadata: {name: a100}\n"
    "spec:\n  flavor: a100\n  nodes: 4\n  capacity: {nvidia.com/gpu: \"8\", cpu: \"96\"}\n"
    "  taint: {key: nvidia.com/gpu, value: a100, effect: NoSchedule}\n---\n"
    "kind: ClusterQueue\nmetadata: {name: gpu}\n"
    "spec:\n  preemption: {withinClusterQueue: LowerPriority}\n  resourceGroups:\n"
    "  - coveredResources: [cpu, nvidia.com/gpu]\n    flavors:\n"
    "    - name: a100\n      resources: [{name: cpu, nominalQuota: 1000}, "
    "{name: nvidia.com/gpu, nominalQuota: 64}]\n"
    "  - coveredResources: [memory]\n    flavors:\n"
    "    - name: default\n      resources: [{name: memory, nominalQuota: 1Ti}]\n";

/* Two flavors: a100 on 2 nodes (quota 32, more than the nodes hold), spot
 * without NodePools (quota only). */
static const char *const two_flavors =
    RF("a100") RF("spot")
    "kind: NodePool\nmetadata: {name: pool}\n"
    "spec: {flavor: a100, nodes: 2, capacity: {nvidia.com/gpu: 8}, nodeSelector: {p: a}}\n---\n"
    "kind: ClusterQueue\nmetadata: {name: gpu}\n"
    "spec:\n  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n"
    "    - name: a100\n      resources: [{name: nvidia.com/gpu, nominalQuota: 32}]\n"
    "    - name: spot\n      resources: [{name: nvidia.com/gpu, nominalQuota: 16}]\n";

/* Kueue's preemption_test.go borrowWithinCohort shape: a lender with the
 * cohort's spare quota and two standard queues that borrow it. */
#define BWC_CQ(n, extra)                                                                           \
    "kind: ClusterQueue\nmetadata: {name: " n "}\nspec:\n  cohort: all\n"                          \
    "  preemption:\n    withinClusterQueue: LowerPriority\n    reclaimWithinCohort: Any\n" extra   \
    "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"                               \
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 1}]\n---\n"
static const char *const bwc_platform =
    RF("default")
    BWC_CQ("a_standard", "    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 0}\n")
    BWC_CQ("b_standard", "    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 0}\n")
    BWC_CQ("a_plain", "")
    "kind: ClusterQueue\nmetadata: {name: lender}\nspec:\n  cohort: all\n  resourceGroups:\n"
    "  - coveredResources: [cpu]\n    flavors:\n"
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 10}]\n";

/* Kueue's preemption_fair_test.go baseCQs: a, b, c with 3 CPUs each and a
 * queue that owns nothing, in one cohort, fair sharing on. */
#define FS_CQ(n)                                                                                   \
    "kind: ClusterQueue\nmetadata: {name: " n "}\nspec:\n  cohort: all\n"                          \
    "  preemption:\n    withinClusterQueue: LowerPriority\n    reclaimWithinCohort: Any\n"         \
    "    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: -3}\n"                  \
    "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"                               \
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 3}]\n---\n"
static const char *const fs_platform =
    "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
    "fairSharing:\n  enable: true\n"
    "  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]\n---\n"
    RF("default") FS_CQ("a") FS_CQ("b") FS_CQ("c")
    "kind: ClusterQueue\nmetadata: {name: preemptible}\nspec:\n  cohort: all\n"
    "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 0}]\n";

/* Admission order by weighted share: a lender and two borrowers, y with
 * twice x's weight; FS_ON is the Configuration or nothing. */
#define WEIGHTED(FS_ON)                                                                            \
    FS_ON RF("default")                                                                            \
    "kind: ClusterQueue\nmetadata: {name: shared}\nspec:\n  cohort: all\n  resourceGroups:\n"     \
    "  - coveredResources: [cpu]\n    flavors:\n"                                                 \
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 12}]\n---\n"                \
    "kind: ClusterQueue\nmetadata: {name: x}\nspec:\n  cohort: all\n  resourceGroups:\n"          \
    "  - coveredResources: [cpu]\n    flavors:\n"                                                 \
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 0}]\n---\n"                 \
    "kind: ClusterQueue\nmetadata: {name: y}\nspec:\n  cohort: all\n  fairSharing: {weight: 2}\n" \
    "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"                             \
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 0}]\n"
#define FS_CONFIG                                                                                  \
    "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nfairSharing: {enable: true}\n---\n"

#define A3 "@0 sub a1 a 0 1*cpu=1", "@0 sub a2 a 0 1*cpu=1", "@0 sub a3 a 0 1*cpu=1"
#define B5                                                                                         \
    "@0 sub b1 b 0 1*cpu=1", "@0 sub b2 b 0 1*cpu=1", "@0 sub b3 b 0 1*cpu=1",                     \
        "@0 sub b4 b 0 1*cpu=1", "@0 sub b5 b 0 1*cpu=1"

/* Cohorts with their own quota, nested: org (8 CPUs of its own) holds team
 * (its own 3, lends 1 up, may borrow 3), s1 (4) and s2 (0); team holds t1
 * (2). org's subtree: 8 + 4 + 1 = 13; t1 reaches 2 + 3 + 3 = 8. */
static const char *const tree_platform =
    RF("default")
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Cohort\nmetadata: {name: org}\nspec:\n"
    "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 8}]\n---\n"
    "apiVersion: kueue.x-k8s.io/v1alpha1\nkind: Cohort\nmetadata: {name: team}\nspec:\n"
    "  parent: org\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 3, lendingLimit: 1, "
    "borrowingLimit: 3}]\n---\n"
    "kind: ClusterQueue\nmetadata: {name: t1}\nspec:\n  cohort: team\n"
    "  preemption: {reclaimWithinCohort: Any}\n  resourceGroups:\n"
    "  - coveredResources: [cpu]\n    flavors:\n"
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 2}]\n---\n"
    "kind: ClusterQueue\nmetadata: {name: s1}\nspec:\n  cohortName: org\n"
    "  preemption: {reclaimWithinCohort: Any}\n  resourceGroups:\n"
    "  - coveredResources: [cpu]\n    flavors:\n"
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 4}]\n---\n"
    "kind: ClusterQueue\nmetadata: {name: s2}\nspec:\n  cohortName: org\n  resourceGroups:\n"
    "  - coveredResources: [cpu]\n    flavors:\n"
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 0}]\n";

/* A Cohort whose quota its members share, no member owning any. */
static const char *const pool_platform =
    RF("default")
    "kind: Cohort\nmetadata: {name: pool}\nspec:\n  resourceGroups:\n"
    "  - coveredResources: [cpu]\n    flavors:\n"
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 10}]\n---\n"
    "kind: ClusterQueue\nmetadata: {name: m1}\nspec:\n  cohort: pool\n  resourceGroups:\n"
    "  - coveredResources: [cpu]\n    flavors:\n"
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 0}]\n---\n"
    "kind: ClusterQueue\nmetadata: {name: m2}\nspec:\n  cohort: pool\n  resourceGroups:\n"
    "  - coveredResources: [cpu]\n    flavors:\n"
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 0}]\n";

/* Kueue's preemption_hierarchical_test.go (TestHierarchicalPreemptions)
 * trees, one flavor "default", cpu only. HQ(name, cohort, quota, policy)
 * is a ClusterQueue; root cohorts without quota are implicit (named as a
 * parent or a cohort). */
#define HQ(n, co, cpu, pre)                                                                        \
    "kind: ClusterQueue\nmetadata: {name: " n "}\nspec:\n  cohort: " co "\n"                        \
    "  preemption: " pre "\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"         \
    "    - name: default\n      resources: [{name: cpu, nominalQuota: " cpu "}]\n---\n"
#define HCOHORT(n, parent, cpu)                                                                    \
    "kind: Cohort\nmetadata: {name: " n "}\nspec:\n" parent "  resourceGroups:\n"                  \
    "  - coveredResources: [cpu]\n    flavors:\n"                                               \
    "    - name: default\n      resources: [{name: cpu, nominalQuota: " cpu "}]\n---\n"
#define P_ANY "{withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}"
#define P_BWC0                                                                                     \
    "{withinClusterQueue: LowerPriority, reclaimWithinCohort: Any, borrowWithinCohort: "          \
    "{policy: LowerPriority, maxPriorityThreshold: 0}}"
#define P_LOWER_BWC0                                                                               \
    "{withinClusterQueue: LowerPriority, reclaimWithinCohort: LowerPriority, "                   \
    "borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 0}}"

/*        R
 *      /    \
 *   C(2)  q_borrowing(0)   [q_nominal(2)]
 *    |
 *   q(0)                                  */
static const char *const hier_advantage =
    RF("default") HCOHORT("c", "  parent: r\n", "2") HQ("q", "c", "0", P_ANY)
        HQ("q_borrowing", "r", "0", P_ANY);
static const char *const hier_nominal =
    RF("default") HCOHORT("c", "  parent: r\n", "2") HQ("q", "c", "0", P_ANY)
        HQ("q_borrowing", "r", "0", P_ANY) HQ("q_nominal", "r", "2", P_ANY);

/*         R
 *      /     \
 *   C(2)    q_nominal(2)
 *   /   \
 * q(0) q_same_cohort(0), q with borrowWithinCohort below priority 0 */
static const char *const hier_forced =
    RF("default") HCOHORT("c", "  parent: r\n", "2") HQ("q", "c", "0", P_BWC0)
        HQ("q_same_cohort", "c", "0", P_ANY) HQ("q_nominal", "r", "2", P_ANY);

/*          R(1)
 *      /        \
 *   C(4)      q_borrowing(0)
 *   /   \
 * q(0) q_same_cohort(0)                   */
static const char *const hier_both =
    RF("default") HCOHORT("r", "", "1") HCOHORT("c", "  parent: r\n", "4")
        HQ("q", "c", "0", P_LOWER_BWC0) HQ("q_same_cohort", "c", "0", P_ANY)
            HQ("q_borrowing", "r", "0", P_ANY);

/*            R
 *      /     |      \
 *   C(3) q_borrowing(0) q_nominal(2)
 *    |
 *   q(0)                                  */
static const char *const hier_lowest =
    RF("default") HCOHORT("c", "  parent: r\n", "3") HQ("q", "c", "0", P_ANY)
        HQ("q_borrowing", "r", "0", P_ANY) HQ("q_nominal", "r", "2", P_ANY);

/* Fair sharing over a tree: R holds team cohorts A (three queues) and B
 * (one queue) and a lender with R's CPUs. Kueue's tournament compares A
 * against B at R's level (each cohort's share of what R could lend, with
 * the head's usage added), then A's queues at A's level; a flat cohort
 * would compare the four queues alike. */
#define FSQ(n, co)                                                                                 \
    "kind: ClusterQueue\nmetadata: {name: " n "}\nspec:\n  cohort: " co "\n  resourceGroups:\n"   \
    "  - coveredResources: [cpu]\n    flavors:\n"                                              \
    "    - name: default\n      resources: [{name: cpu, nominalQuota: 0}]\n---\n"
#define FS_TREE(cpus, a_spec)                                                                      \
    FS_CONFIG RF("default") "kind: Cohort\nmetadata: {name: A}\nspec: {parentName: R" a_spec     \
                            "}\n---\n"                                                           \
                            "kind: Cohort\nmetadata: {name: B}\nspec: {parentName: R}\n---\n"      \
        FSQ("a1", "A") FSQ("a2", "A") FSQ("a3", "A") FSQ("b1", "B")                               \
            "kind: ClusterQueue\nmetadata: {name: lender}\nspec:\n  cohort: R\n"                  \
            "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"                    \
            "    - name: default\n      resources: [{name: cpu, nominalQuota: " cpus "}]\n"

/* Kueue's preemption_fair_test.go trees (TestFairPreemptions, hierarchical
 * rows). FQ(name, cohort, extra spec lines, cpu) is a ClusterQueue. */
#define FQ(n, co, extra, cpu)                                                                      \
    "kind: ClusterQueue\nmetadata: {name: " n "}\nspec:\n  cohort: " co "\n" extra                \
    "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"                            \
    "    - name: default\n      resources: [{name: cpu, nominalQuota: " cpu "}]\n---\n"
#define FCOHORT(n, parent, extra, cpu)                                                             \
    "kind: Cohort\nmetadata: {name: " n "}\nspec:\n" parent extra "  resourceGroups:\n"          \
    "  - coveredResources: [cpu]\n    flavors:\n"                                              \
    "    - name: default\n      resources: [{name: cpu, nominalQuota: " cpu "}]\n---\n"
#define FCOHORT0(n, parent, extra) "kind: Cohort\nmetadata: {name: " n "}\nspec: {parentName: " parent extra "}\n---\n"
#define W(x) "  fairSharing: {weight: " x "}\n"

/*          ROOT(5)
 *        /    |     \
 *   LEFT(5,w2) c(1)  RIGHT(5)
 *    /   \           /    \
 *  a(1,w2) b(1)    d(1)  e(1,w0.99)   */
static const char *const fair_hier =
    FS_CONFIG RF("default") FCOHORT("ROOT", "", "", "5")
        FCOHORT("LEFT", "  parentName: ROOT\n", W("2"), "5")
            FCOHORT("RIGHT", "  parentName: ROOT\n", "", "5")
                FQ("a", "LEFT", W("2") "  preemption: {reclaimWithinCohort: Any}\n", "1")
                    FQ("b", "LEFT", "", "1") FQ("c", "ROOT", "", "1") FQ("d", "RIGHT", "", "1")
                        FQ("e", "RIGHT", W("0.99"), "1");

/*        ROOT
 *      /      \
 *  a(5,w10)  RIGHT(q, w0.1)
 *               |
 *             b(0, w0.1)                 */
#define FAIR_PROTECTED(q, reclaim)                                                                 \
    FS_CONFIG RF("default") FCOHORT("RIGHT", "  parentName: ROOT\n", W("0.1"), q)                  \
        FQ("a", "ROOT",                                                                           \
           W("10") "  preemption: {reclaimWithinCohort: " reclaim                                 \
                   ", withinClusterQueue: LowerPriority}\n",                                      \
           "5") FQ("b", "RIGHT", W("0.1"), "0")

/*          ROOT
 *       /    |    \
 *   A(w1.01) B(w0.99) C
 *      |     |        |
 *     AA     BB       CC
 *      |     |        |
 *     AAA   BBB      CCC
 *      |     |        |
 *      a     b     CCCC(1)               */
static const char *const fair_deep =
    FS_CONFIG RF("default") FCOHORT0("A", "ROOT", ", fairSharing: {weight: 1.01}")
        FCOHORT0("AA", "A", "") FCOHORT0("AAA", "AA", "")
            FCOHORT0("B", "ROOT", ", fairSharing: {weight: 0.99}") FCOHORT0("BB", "B", "")
                FCOHORT0("BBB", "BB", "") FCOHORT0("C", "ROOT", "") FCOHORT0("CC", "C", "")
                    FCOHORT0("CCC", "CC", "") FCOHORT("CCCC", "  parentName: CCC\n", "", "1")
                        FQ("a", "AAA", "  preemption: {reclaimWithinCohort: Any}\n", "0")
                            FQ("b", "BBB", "", "0");

static const scenario scenarios[] = {
    /* ---- fair-sharing preemption in cohort trees (kueue preemption_fair_test.go) ---- */
    {"kueue fair: hierarchical preemption",
     fair_hier,
     {"@0 sub b1 b 1 1*cpu=1", "@0 sub b2 b 2 1*cpu=1", "@0 sub b3 b 3 1*cpu=1",
      "@0 sub b4 b 4 1*cpu=1", "@0 sub b5 b 5 1*cpu=1", "@0 sub c1 c 1 1*cpu=1",
      "@0 sub c2 c 2 1*cpu=1", "@0 sub c3 c 3 1*cpu=1", "@0 sub c4 c 4 1*cpu=1",
      "@0 sub c5 c 5 1*cpu=1", "@0 sub d1 d 1 1*cpu=1", "@0 sub d2 d 2 1*cpu=1",
      "@0 sub d3 d 3 1*cpu=1", "@0 sub d4 d 4 1*cpu=1", "@0 sub d5 d 5 1*cpu=1",
      "@0 sub e1 e 1 1*cpu=1", "@0 sub e2 e 2 1*cpu=1", "@0 sub e3 e 3 1*cpu=1",
      "@0 sub e4 e 4 1*cpu=1", "@0 sub e5 e 5 1*cpu=1", "@1 sub unit a 0 1*cpu=5",
      "want unit:A b1:P b2:P c1:P c2:P e1:P b3:A c3:A d1:A e2:A",
      "pre c1/InCohortFairSharing,e1/InCohortFairSharing,c2/InCohortFairSharing,"
      "b1/InCohortFairSharing,b2/InCohortFairSharing"}},
    {"kueue fair: borrowing cq in non-borrowing cohort is protected",
     FAIR_PROTECTED("1", "Any"),
     {"@0 sub a1 a -1 1*cpu=1", "@0 sub a2 a -1 1*cpu=1", "@0 sub a3 a -1 1*cpu=1",
      "@0 sub b1 b -1 1*cpu=1", "want a1:A a2:A a3:A b1:A", "@1 sub unit a 0 1*cpu=5",
      "want unit:A a1:P a2:P a3:P b1:A",
      "pre a1/InClusterQueue,a2/InClusterQueue,a3/InClusterQueue"}},
    {"kueue fair: forced to preempt within clusterqueue because borrowing workload too important",
     FAIR_PROTECTED("3", "LowerPriority"),
     {"@0 sub a1 a -1 1*cpu=1", "@0 sub a2 a -1 1*cpu=1", "@0 sub a3 a -1 1*cpu=1",
      "@0 sub b1 b 100 1*cpu=4", "want a1:A a2:A a3:A b1:A", "@1 sub unit a 0 1*cpu=4",
      "want unit:A a1:P a2:P a3:P b1:A",
      "pre a1/InClusterQueue,a2/InClusterQueue,a3/InClusterQueue"}},
    {"kueue fair: deep preemption (A weighs more than B at ROOT)",
     fair_deep,
     {"@0 sub b1 b 0 1*cpu=1", "want b1:A", "@1 sub a1 a 0 1*cpu=1", "want a1:A b1:P",
      "pre b1/InCohortFairSharing"}},
    /* ---- fair sharing, shares per level of the cohort tree ---- */
    {"fair sharing per level: after a1, cohort B (share 1/3 at R) goes before A (2/3)",
     FS_TREE("3", ""),
     {"@0 add a1_1 a1 0 1*cpu=1", "@0 add a2_1 a2 0 1*cpu=1", "@0 add a3_1 a3 0 1*cpu=1",
      "@0 add b1_1 b1 0 1*cpu=1", "@0 sched", "want a1_1:A b1_1:A a2_1:A a3_1:P"}},
    {"fair sharing per level: Cohort A's fairSharing.weight 3 divides its share at R",
     FS_TREE("3", ", fairSharing: {weight: 3}"),
     {"@0 add a1_1 a1 0 1*cpu=1", "@0 add a2_1 a2 0 1*cpu=1", "@0 add a3_1 a3 0 1*cpu=1",
      "@0 add b1_1 b1 0 1*cpu=1", "@0 sched", "want a1_1:A a2_1:A a3_1:A b1_1:P"}},
    {"fair sharing per level: the last CPU of a second cycle goes to B (2/5 at R), not A (4/5)",
     FS_TREE("5", ""),
     {"@0 add a1_1 a1 0 1*cpu=1", "@0 add a1_2 a1 0 1*cpu=1", "@0 add a2_1 a2 0 1*cpu=1",
      "@0 add a2_2 a2 0 1*cpu=1", "@0 add a3_1 a3 0 1*cpu=1", "@0 add a3_2 a3 0 1*cpu=1",
      "@0 add b1_1 b1 0 1*cpu=1", "@0 add b1_2 b1 0 1*cpu=1", "@0 add b1_3 b1 0 1*cpu=1",
      "@0 sched",
      "want b1_1:A b1_2:A b1_3:P a1_1:A a2_1:A a3_1:A a1_2:P a2_2:P a3_2:P"}},
    /* ---- hierarchical reclaim (kueue preemption_hierarchical_test.go) ---- */
    {"kueue hier: preempt with hierarchical advantage",
     hier_advantage,
     {"@0 sub admitted2 q_borrowing 0 1*cpu=2", "want admitted2:A",
      "@1 sub in q 0 1*cpu=2", "want in:A admitted2:P", "pre admitted2/InCohortReclamation"}},
    {"kueue hier: avoid queues within nominal quota",
     hier_nominal,
     {"@0 sub admitted1 q_nominal -10 1*cpu=2", "@0 sub admitted2 q_borrowing 0 1*cpu=2",
      "want admitted1:A admitted2:A", "@1 sub in q 0 1*cpu=2",
      "want in:A admitted1:A admitted2:P", "pre admitted2/InCohortReclamation"}},
    {"kueue hier: preempt multiple with hierarchical advantage (higher priorities too)",
     hier_advantage,
     {"@0 sub admitted1 q_borrowing 1 1*cpu=1", "@0 sub admitted2 q_borrowing 2 1*cpu=1",
      "want admitted1:A admitted2:A", "@1 sub in q 0 1*cpu=2",
      "want in:A admitted1:P admitted2:P",
      "pre admitted1/InCohortReclamation,admitted2/InCohortReclamation"}},
    {"kueue hier: prefer to preempt hierarchical candidate over a lower priority in its own queue",
     hier_advantage,
     {"@0 sub admitted_borrowing q_borrowing 1 1*cpu=1",
      "@0 sub admitted_same_queue q -2 1*cpu=1", "want admitted_borrowing:A admitted_same_queue:A",
      "@1 sub in q 0 1*cpu=1", "want in:A admitted_borrowing:P admitted_same_queue:A",
      "pre admitted_borrowing/InCohortReclamation"}},
    {"kueue hier: forced to preempt priority candidate (while borrowing, below the threshold)",
     hier_forced,
     {"@0 sub admitted_nominal q_nominal -10 1*cpu=2",
      "@0 sub admitted_same_cohort q_same_cohort -1 1*cpu=2",
      "want admitted_nominal:A admitted_same_cohort:A", "@1 sub in q 0 1*cpu=2",
      "want in:A admitted_nominal:A admitted_same_cohort:P",
      "pre admitted_same_cohort/InCohortReclaimWhileBorrowing"}},
    {"kueue hier: preempt hierarchical and priority candidates",
     hier_both,
     {"@0 sub admitted_borrowing q_borrowing -1 1*cpu=2",
      "@0 sub admitted_same_cohort_preemptible q_same_cohort -1 1*cpu=1",
      "@0 sub admitted_borrowing_not_preemptible q_borrowing 1 1*cpu=2",
      "want admitted_borrowing:A admitted_same_cohort_preemptible:A "
      "admitted_borrowing_not_preemptible:A",
      /* Kueue's row: these two targets, then (its next cycle) the requeued
       * one takes c's quota back from q_borrowing: reclaimWithinCohort Any */
      "@1 sub in q 0 1*cpu=3",
      "want in:A admitted_borrowing:P admitted_same_cohort_preemptible:A "
      "admitted_borrowing_not_preemptible:P",
      "pre admitted_borrowing/InCohortReclamation,"
      "admitted_same_cohort_preemptible/InCohortReclaimWhileBorrowing,"
      "admitted_borrowing_not_preemptible/InCohortReclamation"}},
    {"kueue hier: reclaim nominal quota from lowest priority workload, excluding non-borrowing",
     hier_lowest,
     {"@0 sub admitted_borrowing_prio_8 q_borrowing 8 1*cpu=1",
      "@0 sub admitted_borrowing_prio_9 q_borrowing 9 1*cpu=1",
      "@0 sub admitted_borrowing_prio_10 q_borrowing 9 1*cpu=1",
      "@0 sub admitted_nominal q_nominal -2 1*cpu=2",
      "want admitted_borrowing_prio_8:A admitted_borrowing_prio_9:A "
      "admitted_borrowing_prio_10:A admitted_nominal:A",
      "@1 sub in q 0 1*cpu=1",
      "want in:A admitted_borrowing_prio_8:P admitted_borrowing_prio_9:A "
      "admitted_borrowing_prio_10:A admitted_nominal:A",
      "pre admitted_borrowing_prio_8/InCohortReclamation"}},
    /* ---- Cohort objects: own quota, nesting ---- */
    {"cohort quota is lent to members that own nothing",
     pool_platform,
     {"@0 sub a m1 0 1*cpu=6", "want a:A", "reason a borrowing in cohort pool",
      "@1 sub b m2 0 1*cpu=6", "want a:A b:P",
      "reason b insufficient unused quota for cpu in flavor default, 2 more needed",
      "@2 fin a", "want b:A"}},
    {"nested cohorts: t1 reaches its own 2, team's 3 and team's borrowingLimit 3, no more",
     tree_platform,
     {"@0 sub big t1 0 1*cpu=9", "want big:P",
      "reason big current podset request (9) > maximum capacity (8)", "@1 sub ok t1 0 1*cpu=8", "want ok:A",
      "reason ok borrowing in cohort team"}},
    {"nested cohorts: team keeps all but lendingLimit 1 of its own from the rest of org; "
     "t1 takes the lent 1 back from s1 (hierarchical advantage: team's quota holds it)",
     tree_platform,
     {"@0 sub x s1 0 1*cpu=14", "want x:P", "reason x current podset request (14) > maximum capacity (13)",
      "@1 sub y s1 0 1*cpu=13", "want y:A", "@2 sub z t1 0 1*cpu=4", "want z:A",
      "@3 sub z2 t1 0 1*cpu=1", "want z2:A y:P", "pre y/InCohortReclamation",
      "reason y Evicted by ns/z2 (InCohortReclamation) at 3s; requeued"}},
    {"nested cohorts: s1 reclaims its nominal quota from a borrower deeper in the tree",
     tree_platform,
     {"@0 sub b2 s2 0 1*cpu=9", "@1 sub t t1 0 1*cpu=8", "want b2:A t:A",
      "@2 sub back s1 0 1*cpu=4", "want t:P b2:A back:A", "pre t/InCohortReclamation"}},


    /* ---- fair sharing (Kueue preemption_fair_test.go TestFairPreemptions) ---- */
    {"kueue fair: reclaim nominal from user using the most",
     fs_platform,
     {A3, B5, "@0 sub c1 c 0 1*cpu=1", "@1 sub c_incoming c 0 1*cpu=1", "want b1:P c_incoming:A",
      "pre b1/InCohortReclamation"}},
    {"kueue fair: can reclaim from queue using less, if the one using the most isn't enough",
     fs_platform,
     {"@0 sub a1 a 0 1*cpu=3", "@0 sub a2 a 0 1*cpu=1", "@0 sub b1 b 0 1*cpu=2",
      "@0 sub b2 b 0 1*cpu=3", "@1 sub c_incoming c 0 1*cpu=3", "want a1:P b1:A c_incoming:A",
      "pre a1/InCohortReclamation"}},
    {"kueue fair: reclaim borrowable quota from user using the most",
     fs_platform,
     {A3, B5, "@0 sub c1 c 0 1*cpu=1", "@1 sub a_incoming a 0 1*cpu=1", "want b1:P a_incoming:A",
      "pre b1/InCohortFairSharing",
      "reason b1 Evicted by ns/a_incoming (InCohortFairSharing) at 1s; requeued"}},
    {"kueue fair: preempt one from each CQ borrowing",
     fs_platform,
     {"@0 sub a1 a 0 1*cpu=500m", "@0 sub a2 a 0 1*cpu=500m", "@0 sub a3 a 0 1*cpu=3",
      "@0 sub b1 b 0 1*cpu=500m", "@0 sub b2 b 0 1*cpu=500m", "@0 sub b3 b 0 1*cpu=3",
      "@1 sub c_incoming c 0 1*cpu=2", "want c_incoming:A",
      "pre a1/InCohortReclamation,b1/InCohortReclamation"}},
    {"kueue fair: can't preempt when everyone under nominal",
     fs_platform,
     {A3, "@0 sub b1 b 0 1*cpu=3", "@0 sub c1 c 0 1*cpu=3", "@1 sub c_incoming c 0 1*cpu=1",
      "want c_incoming:P", "pre "}},
    {"kueue fair: can't preempt when it would switch the imbalance",
     fs_platform,
     {A3, B5, "@1 sub a_incoming a 0 1*cpu=2", "want a_incoming:P", "pre "}},
    {"kueue fair: can preempt lower priority workloads from same CQ",
     fs_platform,
     {"@0 sub a1_low a -1 1*cpu=1", "@0 sub a2_low a -1 1*cpu=1", "@0 sub a3 a 0 1*cpu=1",
      "@0 sub a4 a 0 1*cpu=1", B5, "@1 sub a_incoming a 0 1*cpu=2", "want a_incoming:A",
      "pre a1_low/InClusterQueue,a2_low/InClusterQueue"}},
    {"kueue fair: can preempt a combination of same CQ and highest user",
     fs_platform,
     {"@0 sub a_low a -1 1*cpu=1", "@0 sub a2 a 0 1*cpu=1", "@0 sub a3 a 0 1*cpu=1", B5,
      "@0 sub b6 b 0 1*cpu=1", "@1 sub a_incoming a 0 1*cpu=2", "want a_incoming:A",
      "pre b1/InCohortFairSharing,a_low/InClusterQueue"}},
    {"kueue fair: preempt huge workload if there is no other option",
     fs_platform,
     {"@0 sub b1 b 0 1*cpu=9", "@1 sub a_incoming a 0 1*cpu=2", "want b1:P a_incoming:A",
      "pre b1/InCohortReclamation"}},
    {"kueue fair: can't preempt huge workload if the incoming is also huge",
     fs_platform,
     {"@0 sub a1 a 0 1*cpu=2", "@0 sub b1 b 0 1*cpu=7", "@1 sub a_incoming a 0 1*cpu=5",
      "want a_incoming:P", "pre "}},
    {"kueue fair: can't preempt 2 smaller workloads if the incoming is huge",
     fs_platform,
     {"@0 sub b1 b 0 1*cpu=2", "@0 sub b2 b 0 1*cpu=2", "@0 sub b3 b 0 1*cpu=3",
      "@1 sub a_incoming a 0 1*cpu=6", "want a_incoming:P", "pre "}},
    {"kueue fair: preempt from target and others even if over nominal",
     fs_platform,
     {"@0 sub a1_low a -1 1*cpu=2", "@0 sub a2_low a -1 1*cpu=1", "@0 sub b1 b 0 1*cpu=3",
      "@0 sub b2 b 0 1*cpu=3", "@1 sub a_incoming a 0 1*cpu=4",
      "want a1_low:P a2_low:A b1:P a_incoming:A",
      "pre a1_low/InClusterQueue,b1/InCohortFairSharing"}},
    {"kueue fair: prefer to preempt workloads that don't make the target CQ the biggest share",
     fs_platform,
     {"@0 sub b1 b 0 1*cpu=2", "@0 sub b2 b 0 1*cpu=1", "@0 sub b3 b 0 1*cpu=2",
      "@0 sub c1 c 0 1*cpu=1", "@1 sub a_incoming a 0 1*cpu=3500m", "want a_incoming:A",
      "pre b2/InCohortFairSharing"}},
    {"fair sharing orders heads by weighted share: y (weight 2) before x",
     WEIGHTED(FS_CONFIG),
     {"@0 sub x1 x 0 1*cpu=6", "@0 sub y1 y 0 1*cpu=2", "@1 add x2 x 0 1*cpu=4",
      "@1 add y2 y 0 1*cpu=4", "@1 sched", "want x2:P y2:A"}},
    {"without fair sharing the same heads go by queue order: x first",
     WEIGHTED(""),
     {"@0 sub x1 x 0 1*cpu=6", "@0 sub y1 y 0 1*cpu=2", "@1 add x2 x 0 1*cpu=4",
      "@1 add y2 y 0 1*cpu=4", "@1 sched", "want x2:A y2:P"}},

    /* ---- gang placement on NodePools ---- */
    {"gang: 4 pods x 8 GPUs take 4 whole nodes",
     gpu_nodes,
     {"@0 sub big gpu 0 4*nvidia.com/gpu=8,cpu=8", "want big:A",
      "place big main: a100-0=1, a100-1=1, a100-2=1, a100-3=1"}},
    {"gang: quota fits, nodes do not: none start, Pending with the count",
     gpu_nodes,
     {"@0 sub half gpu 0 2*nvidia.com/gpu=8", "place half main: a100-0=1, a100-1=1",
      "@1 sub big gpu 0 4*nvidia.com/gpu=8", "want half:A big:P",
      "reason big pod set main: 4 pods of 8 nvidia.com/gpu need 4 nodes of flavor a100 with 8 "
      "nvidia.com/gpu free; 2 have",
      "@2 fin half", "want half:F big:A", "place big main: a100-0=1, a100-1=1, a100-2=1, a100-3=1"}},
    {"gang: best fit, most-allocated node first, ties by name",
     gpu_nodes,
     {"@0 sub w1 gpu 0 1*nvidia.com/gpu=4", "place w1 main: a100-0=1",
      "@0 sub w2 gpu 0 1*nvidia.com/gpu=2", "place w2 main: a100-0=1",
      "@0 sub w3 gpu 0 1*nvidia.com/gpu=4", "place w3 main: a100-1=1",
      "@0 sub w4 gpu 0 1*nvidia.com/gpu=2", "place w4 main: a100-0=1",
      "@0 sub w5 gpu 0 3*nvidia.com/gpu=4", "place w5 main: a100-1=1, a100-2=2"}},
    {"gang: several pod sets, all or nothing",
     gpu_nodes,
     {"@0 sub filler gpu 0 3*nvidia.com/gpu=8",
      "@1 sub gang gpu 0 1*cpu=4;2*nvidia.com/gpu=8", "want filler:A gang:P",
      "reason gang pod set w1: 2 pods of 8 nvidia.com/gpu need 2 nodes of flavor a100 with 8 "
      "nvidia.com/gpu free; 1 have",
      "@2 fin filler", "want gang:A",
      "place gang main: a100-0=1; w1: a100-0=1, a100-1=1"}},
    {"preemption: a victim taken first is spared when the later one alone makes room",
     RF("default") "kind: ClusterQueue\nmetadata: {name: q}\n"
     "spec:\n  preemption: {withinClusterQueue: LowerPriority}\n  resourceGroups:\n"
     "  - coveredResources: [cpu]\n    flavors:\n"
     "    - name: default\n      resources: [{name: cpu, nominalQuota: 4}]\n",
     {"@0 sub big q 0 1*cpu=3", "@1 sub small q 0 1*cpu=1", "want big:A small:A",
      "@2 sub hi q 100 1*cpu=3", "want hi:A big:P small:A", "pre big/InClusterQueue"}},
    {"gang: a pod larger than any node can never fit",
     gpu_nodes,
     {"@0 sub huge gpu 0 1*nvidia.com/gpu=16", "want huge:P",
      "reason huge a pod of pod set main needs 16 nvidia.com/gpu and the largest node of flavor "
      "a100 has 8: can never fit"}},
    {"gang: more pods than the empty pool holds can never fit",
     gpu_nodes,
     {"@0 sub five gpu 0 5*nvidia.com/gpu=8", "want five:P",
      "reason five 5 pods of 8 nvidia.com/gpu (pod set main) need more than the 4 nodes of "
      "flavor a100 hold even when empty (4 pods): can never fit"}},
    {"gang: a flavor without NodePools keeps quota-only admission",
     two_flavors,
     {"@0 sub a gpu 0 1*nvidia.com/gpu=16", "want a:A", "reason a Quota reserved", "place a ",
      "@0 sub b gpu 0 2*nvidia.com/gpu=8", "want a:A b:A",
      "place b main: pool-0=1, pool-1=1"}},
    {"gang: a pod too large for the nodes of the first flavor takes the next",
     two_flavors,
     {"@0 sub a gpu 0 1*nvidia.com/gpu=12", "want a:A", "place a ",
      "flavors a main: nvidia.com/gpu=spot"}},
    {"gang: quota left but the nodes full, the next flavor is tried",
     two_flavors,
     {"@0 sub a gpu 0 2*nvidia.com/gpu=8", "flavors a main: nvidia.com/gpu=a100",
      "@1 sub b gpu 0 1*nvidia.com/gpu=4", "want a:A b:A", "flavors b main: nvidia.com/gpu=spot",
      "place b "}},
    {"gang: preemption frees nodes, the minimal set by placement",
     gpu_nodes,
     {"@0 sub l1 gpu -1 2*nvidia.com/gpu=8", "@1 sub l2 gpu -1 2*nvidia.com/gpu=8",
      "@2 sub hi gpu 1 1*nvidia.com/gpu=8", "want l1:A l2:P hi:A", "pre l2/InClusterQueue",
      "place hi main: a100-2=1"}},
    {"gang: preemption empties one node, not one pod per node",
     gpu_nodes,
     {"@0 sub l0 gpu -1 1*nvidia.com/gpu=4", "@1 sub l1 gpu -1 1*nvidia.com/gpu=4",
      "@2 sub l2 gpu -1 1*nvidia.com/gpu=4", "@3 sub l3 gpu -1 1*nvidia.com/gpu=4",
      "@4 sub l4 gpu -1 1*nvidia.com/gpu=4", "@5 sub l5 gpu -1 1*nvidia.com/gpu=4",
      "@6 sub l6 gpu -1 1*nvidia.com/gpu=4", "@7 sub l7 gpu -1 1*nvidia.com/gpu=4",
      "place l6 main: a100-3=1", "place l7 main: a100-3=1",
      "@8 sub hi gpu 1 1*nvidia.com/gpu=8", "want l5:A l6:P l7:P hi:A",
      "pre l7/InClusterQueue,l6/InClusterQueue", "place hi main: a100-3=1"}},
    {"gang: no preemption when the gang cannot fit anyway",
     gpu_nodes,
     {"@0 sub l1 gpu -1 1*nvidia.com/gpu=8", "@1 sub hi gpu 1 5*nvidia.com/gpu=8",
      "want l1:A hi:P", "pre "}},

    /* ---- borrowWithinCohort (Kueue preemption_test.go) ---- */
    {"kueue: borrowWithinCohort preempts a lower-priority borrower, while borrowing",
     bwc_platform,
     {"@0 sub b1 b_standard -1 1*cpu=10", "want b1:A",
      "@1 sub a1 a_standard 0 1*cpu=10", "want b1:P a1:A",
      "pre b1/InCohortReclaimWhileBorrowing",
      "reason b1 Evicted by ns/a1 (InCohortReclaimWhileBorrowing) at 1s; requeued: couldn't "
      "assign flavors to pod set main: insufficient unused quota for cpu in flavor "
      "default, 7 more needed"}},
    {"kueue: without borrowWithinCohort a borrower is not preempted to borrow",
     bwc_platform,
     {"@0 sub b1 b_standard -1 1*cpu=10", "@1 sub a1 a_plain 0 1*cpu=10", "want b1:A a1:P",
      "pre "}},
    {"kueue: borrowWithinCohort does not preempt at or above maxPriorityThreshold",
     bwc_platform,
     {"@0 sub b1 b_standard 1 1*cpu=10", "@1 sub a1 a_standard 2 1*cpu=10", "want b1:A a1:P",
      "pre "}},
    {"kueue: borrowWithinCohort below the threshold (priority 0 < 0+1)",
     bwc_platform,
     {"@0 sub b1 b_standard 0 1*cpu=10", "@1 sub a1 a_standard 2 1*cpu=10", "want b1:P a1:A",
      "pre b1/InCohortReclaimWhileBorrowing"}},
    {"kueue: borrowWithinCohort over nominal takes only candidates under the threshold",
     bwc_platform,
     {"@0 sub a0 a_standard 0 1*cpu=1", "@0 sub b1 b_standard 1 1*cpu=5",
      "@0 sub b2 b_standard -1 1*cpu=5", "@1 sub a1 a_standard 1 1*cpu=5",
      "want a0:A b1:A b2:P a1:A", "pre b2/InCohortReclaimWhileBorrowing"}},
    {"kueue: reclaim within nominal needs no borrowWithinCohort",
     bwc_platform,
     {"@0 sub b1 b_standard 0 1*cpu=13", "@1 sub a1 a_plain 0 1*cpu=1", "want b1:P a1:A",
      "pre b1/InCohortReclamation"}},
};

/* ---- the interpreter ----------------------------------------------------- */

static void dump(const td_queue *q)
{
    const td_queue_event *ev;
    size_t ne = td_queue_events(q, &ev);
    for (size_t i = 0; i < ne; i++)
        print_message("  event t=%llu type=%d %s %s %s [%s]\n",
                      (unsigned long long)(ev[i].t_ns / NS), ev[i].type,
                      td_queue_workload_key(q, ev[i].workload), ev[i].level, ev[i].placement,
                      ev[i].reason);
    for (size_t i = 0; i < td_queue_workload_count(q); i++)
        print_message("  %s state=%d reason=%s placement=%s\n", td_queue_workload_key(q, i),
                      td_queue_workload_state(q, i), td_queue_workload_reason(q, i),
                      td_queue_workload_placement(q, i));
}

/* No node holds more than its capacity, and what the nodes hold is what
 * the admitted workloads' placements say. */
static void check_nodes(const td_queue *q, const char *row)
{
    for (size_t n = 0; n < td_queue_node_count(q); n++)
        for (size_t r = 0; r < td_queue_resource_count(q); r++) {
            const char *res = td_queue_resource_name(q, r);
            int64_t used = td_queue_node_used_milli(q, n, res);
            if (used < 0 || used > td_queue_node_capacity_milli(q, n, res))
                fail_msg("%s: node %s holds %lld of %s", row, td_queue_node_name(q, n),
                         (long long)used, res);
        }
    for (size_t i = 0; i < td_queue_workload_count(q); i++)
        if (td_queue_workload_state(q, i) != TD_WL_ADMITTED &&
            *td_queue_workload_placement(q, i))
            fail_msg("%s: %s holds nodes while not admitted", row, td_queue_workload_key(q, i));
}

static void run_scenario(const scenario *s)
{
    td_queue *q = load_platform(s->platform);
    td_err err;
    size_t pre_seen = 0;
    for (size_t k = 0; k < sizeof s->steps / sizeof s->steps[0] && s->steps[k]; k++) {
        const char *st = s->steps[k];
        char a[64] = "", b[64] = "", sets[256] = "";
        unsigned long long t;
        int prio, n;
        if (st[0] == '@') {
            assert_int_equal(sscanf(st, "@%llu %63s%n", &t, a, &n), 2);
            const char *rest = st + n;
            if (strcmp(a, "sub") == 0 || strcmp(a, "add") == 0) {
                char name[64];
                assert_int_equal(sscanf(rest, "%63s %63s %d %255s", name, b, &prio, sets), 4);
                json_t *w = scenario_workload(name, b, prio, sets);
                if (td_queue_submit(q, w, NULL, t * NS, NULL, &err) != TD_OK)
                    fail_msg("%s: %s", s->name, err.msg);
                json_decref(w);
                if (strcmp(a, "add") == 0)
                    continue;
            } else if (strcmp(a, "fin") == 0) {
                assert_int_equal(sscanf(rest, "%63s", b), 1);
                if (td_queue_finish(q, find(q, b), t * NS, &err) != TD_OK)
                    fail_msg("%s: %s", s->name, err.msg);
            } else {
                assert_string_equal(a, "sched");
            }
            assert_int_equal(td_queue_schedule(q, t * NS, NULL), TD_OK);
            check_nodes(q, s->name);
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
        } else if (strncmp(st, "reason ", 7) == 0 || strncmp(st, "place ", 6) == 0 ||
                   strncmp(st, "flavors ", 8) == 0) {
            bool reason = st[0] == 'r';
            const char *p = strchr(st, ' ') + 1;
            const char *sp = strchr(p, ' ');
            snprintf(a, sizeof a, "%.*s", (int)(sp - p), p);
            size_t id = find(q, a);
            const char *got = reason        ? td_queue_workload_reason(q, id)
                              : st[0] == 'f' ? td_queue_workload_flavors(q, id)
                                             : td_queue_workload_placement(q, id);
            if (reason ? !strstr(got, sp + 1) : strcmp(got, sp + 1) != 0) {
                dump(q);
                fail_msg("%s: %s of %s:\n  got  \"%s\"\n  want \"%s\"", s->name,
                         reason ? "reason" : "placement", a, got, sp + 1);
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

static void test_scenarios(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
        run_scenario(&scenarios[i]);
}

/* Many gangs of random shapes arrive, run and finish; after every pass no
 * node is over capacity and an admitted gang holds exactly its pods. */
static void test_gang_never_partial(void **state)
{
    (void)state;
    td_queue *q = load_platform(gpu_nodes);
    td_err err;
    uint64_t seed = 42;
    size_t n = 0;
    int64_t pods_of[400];
    for (int t = 0; t < 400; t++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        int pods = 1 + (int)((seed >> 33) % 4), gpus = 1 << ((seed >> 40) % 4);
        char name[32], sets[64];
        snprintf(name, sizeof name, "w%d", t);
        snprintf(sets, sizeof sets, "%d*nvidia.com/gpu=%d", pods, gpus);
        json_t *w = scenario_workload(name, "gpu", (int)((seed >> 50) % 3) - 1, sets);
        assert_int_equal(td_queue_submit(q, w, NULL, (uint64_t)t * NS, NULL, &err), TD_OK);
        json_decref(w);
        pods_of[n++] = pods;
        if ((seed >> 20) % 3 == 0)
            for (size_t i = 0; i < n; i++)
                if (td_queue_workload_state(q, i) == TD_WL_ADMITTED) {
                    assert_int_equal(td_queue_finish(q, i, (uint64_t)t * NS, NULL), TD_OK);
                    break;
                }
        assert_int_equal(td_queue_schedule(q, (uint64_t)t * NS, NULL), TD_OK);
        check_nodes(q, "gang never partial");
        int64_t held = 0, want = 0;
        for (size_t i = 0; i < n; i++)
            if (td_queue_workload_state(q, i) == TD_WL_ADMITTED) {
                want += td_queue_workload_request_milli(q, i, "nvidia.com/gpu");
                /* the placement text counts every pod: "main: a=1, b=2" */
                const char *p = td_queue_workload_placement(q, i);
                int64_t pods_placed = 0;
                for (const char *e = strchr(p, '='); e; e = strchr(e + 1, '='))
                    pods_placed += atoll(e + 1);
                assert_int_equal(pods_placed, pods_of[i]);
            }
        for (size_t k = 0; k < td_queue_node_count(q); k++)
            held += td_queue_node_used_milli(q, k, "nvidia.com/gpu");
        assert_int_equal(held, want);
    }
    td_queue_destroy(q);
}

/* Cohort cycles and bad Cohort fields are refused with file:line and field. */
static void test_bad_cohorts(void **state)
{
    (void)state;
    static const struct {
        const char *yaml, *want;
    } rows[] = {
        {"kind: Cohort\nmetadata: {name: a}\nspec: {parentName: b}\n---\n"
         "kind: Cohort\nmetadata: {name: b}\nspec: {parentName: c}\n---\n"
         "kind: Cohort\nmetadata: {name: c}\nspec: {parentName: a}\n",
         "x.yaml:1: Cohort a: spec.parentName: cycle a -> b -> c -> a"},
        {"kind: Cohort\nmetadata: {name: a}\nspec: {parentName: a}\n",
         "x.yaml:3: Cohort a: spec.parentName: cycle: Cohort a -> a"},
        {"kind: Cohort\nmetadata: {name: a}\nspec: {fairSharing: {weight: 1, speed: 2}}\n",
         "Cohort a: spec.fairSharing.speed: not supported by tenantd's queue"},
        {"kind: Cohort\nmetadata: {name: a}\nspec: {fairSharing: {weight: -1}}\n",
         "Cohort a: spec.fairSharing.weight"},
        {RF("f") "kind: Cohort\nmetadata: {name: a}\nspec:\n  resourceGroups:\n"
                 "  - coveredResources: [cpu]\n    flavors:\n"
                 "    - name: f\n      resources: [{name: cpu, nominalQuota: 1, borrowingLimit: 1}]\n",
         "borrowingLimit: must not be set when there is no parent"},
        /* a Cohort naming a missing flavor loads, as in Kueue
         * (test_queue_kueue.c, test_inactive_cluster_queue) */
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        td_manifest *m;
        td_err err;
        td_queue *q;
        assert_int_equal(td_manifest_parse("x.yaml", rows[r].yaml, strlen(rows[r].yaml), &m, &err),
                         TD_OK);
        assert_int_equal(td_queue_create(&q, &err), TD_OK);
        td_status s = TD_OK;
        for (size_t i = 0; i < td_manifest_count(m) && s == TD_OK; i++)
            s = td_queue_add_object(q, td_manifest_doc(m, i), m, &err);
        if (s == TD_OK)
            s = td_queue_seal(q, &err);
        if (s != TD_EINVAL || !strstr(err.msg, rows[r].want))
            fail_msg("row %zu: status %d, \"%s\", want \"%s\"", r, s, s ? err.msg : "",
                     rows[r].want);
        td_queue_destroy(q);
        td_manifest_destroy(m);
    }
}

/* A NodePool with a bad node count is rejected by field. */
static void test_bad_node_pool(void **state)
{
    (void)state;
    const char *yaml = RF("a100") "kind: NodePool\nmetadata: {name: p}\n"
                                  "spec: {flavor: a100, nodes: -1, nodeSelector: {a: b}}\n";
    td_manifest *m;
    td_err err;
    td_queue *q;
    assert_int_equal(td_manifest_parse("x.yaml", yaml, strlen(yaml), &m, &err), TD_OK);
    assert_int_equal(td_queue_create(&q, &err), TD_OK);
    td_status s = TD_OK;
    for (size_t i = 0; i < td_manifest_count(m) && s == TD_OK; i++)
        s = td_queue_add_object(q, td_manifest_doc(m, i), m, &err);
    assert_int_equal(s, TD_EINVAL);
    assert_non_null(strstr(err.msg, "NodePool p: spec.nodes: must be an integer in [0, 10000]"));
    td_queue_destroy(q);
    td_manifest_destroy(m);
}

/* A gang's admission on nodes, recorded and restored: the same nodes hold
 * the same pods; a record placing the wrong number of pods, or on a node
 * that does not exist, is refused and holds nothing. */
static void test_restore_nodes(void **state)
{
    (void)state;
    td_err err;
    td_queue *a = load_platform(gpu_nodes), *b = load_platform(gpu_nodes);
    json_t *w1 = scenario_workload("w1", "gpu", 0, "3*nvidia.com/gpu=4"), *w2 = scenario_workload("w2", "gpu", 0,
                                                                                "1*nvidia.com/gpu=8");
    assert_int_equal(td_queue_submit(a, w1, NULL, 0, NULL, &err), TD_OK);
    assert_int_equal(td_queue_submit(a, w2, NULL, 0, NULL, &err), TD_OK);
    assert_int_equal(td_queue_schedule(a, 0, NULL), TD_OK);
    assert_int_equal(td_queue_workload_state(a, 0), TD_WL_ADMITTED);
    assert_int_equal(td_queue_workload_state(a, 1), TD_WL_ADMITTED);
    assert_int_equal(td_queue_submit(b, w1, NULL, 0, NULL, &err), TD_OK);
    assert_int_equal(td_queue_submit(b, w2, NULL, 0, NULL, &err), TD_OK);
    for (size_t id = 0; id < 2; id++) {
        json_t *adm = td_queue_workload_admission(a, id);
        if (td_queue_restore_admission(b, id, adm, 0, false, &err) != TD_OK)
            fail_msg("%s", err.msg);
        assert_string_equal(td_queue_workload_placement(a, id), td_queue_workload_placement(b, id));
        json_decref(adm);
    }
    for (size_t n = 0; n < td_queue_node_count(a); n++)
        assert_int_equal(td_queue_node_used_milli(a, n, "nvidia.com/gpu"),
                         td_queue_node_used_milli(b, n, "nvidia.com/gpu"));
    /* a third queue: tampered records */
    td_queue *c = load_platform(gpu_nodes);
    assert_int_equal(td_queue_submit(c, w1, NULL, 0, NULL, &err), TD_OK);
    json_t *adm = td_queue_workload_admission(a, 0);
    json_t *dom = json_array_get(
        td_json_path(json_array_get(json_object_get(adm, "podSetAssignments"), 0),
                     "topologyAssignment.domains"),
        0);
    json_object_set_new(dom, "count", json_integer(json_integer_value(json_object_get(dom, "count")) + 1));
    assert_int_equal(td_queue_restore_admission(c, 0, adm, 0, false, &err), TD_EINVAL);
    assert_non_null(strstr(err.msg, "pods placed, the pod set has 3"));
    json_object_set_new(dom, "values", json_pack("[s]", "a100-9"));
    assert_int_equal(td_queue_restore_admission(c, 0, adm, 0, false, &err), TD_EINVAL);
    assert_non_null(strstr(err.msg, "node \"a100-9\""));
    for (size_t n = 0; n < td_queue_node_count(c); n++)
        assert_int_equal(td_queue_node_used_milli(c, n, "nvidia.com/gpu"), 0);
    assert_int_equal(td_queue_workload_state(c, 0), TD_WL_PENDING);
    json_decref(adm);
    json_decref(w1);
    json_decref(w2);
    td_queue_destroy(a);
    td_queue_destroy(b);
    td_queue_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scenarios),
        cmocka_unit_test(test_gang_never_partial),
        cmocka_unit_test(test_bad_node_pool),
        cmocka_unit_test(test_bad_cohorts),
        cmocka_unit_test(test_restore_nodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
