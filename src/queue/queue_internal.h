/* queue_internal.h - the queue's private state, shared by load.c (Kueue
 * objects in, validated) and sched.c (flavor assignment, admission,
 * preemption). Quantities are held as int64 milli-units: every decision is
 * exact integer arithmetic, and a pass over 100k workloads stays cheap. */
#ifndef TENANTD_QUEUE_INTERNAL_H
#define TENANTD_QUEUE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/quantity.h"
#include "queue/queue.h"

#define QNONE TD_QUEUE_NONE
#define QUNLIMITED INT64_MAX

typedef struct {
    char *key;
    size_t val;
} smap_ent;

/* String -> index, open addressing; keys are owned. */
typedef struct {
    smap_ent *t;
    size_t cap, n;
} smap;

typedef enum { MODE_NOFIT = 0, MODE_PREEMPT = 1, MODE_FIT = 2 } fit_mode;
typedef enum { WITHIN_NEVER = 0, WITHIN_LOWER, WITHIN_LOWER_OR_NEWER } within_policy;
typedef enum { RECLAIM_NEVER = 0, RECLAIM_LOWER, RECLAIM_ANY } reclaim_policy;

/* A node taint of a ResourceFlavor (spec.nodeTaints) and a toleration
 * (a pod template's spec.tolerations, a flavor's spec.tolerations), as
 * Kubernetes matches them: effect NULL in a toleration matches every effect,
 * key NULL with Exists every key. */
typedef struct {
    char *key, *value, *effect;
} taint;

typedef struct {
    char *key, *value, *effect; /* NULL: unset */
    bool exists;                /* operator Exists, else Equal */
} toleration;

typedef struct {
    taint *taints;
    size_t ntaints;
    toleration *tols;
    size_t ntols;
    char **label_keys, **label_vals; /* spec.nodeLabels */
    size_t nlabels;
} flavor_spec;

/* spec.flavorFungibility: whenCanBorrow, whenCanPreempt (MayStopSearch or
 * TryNextFlavor; Kueue's defaults MayStopSearch, TryNextFlavor) and
 * preference. */
typedef enum { PREF_BORROWING_OVER_PREEMPTION = 0, PREF_PREEMPTION_OVER_BORROWING } ff_preference;

typedef struct {
    int flavor, resource;
    int64_t nominal, borrowing_limit, lending_limit; /* limits: QUNLIMITED if unset */
} quota_entry;

typedef struct {
    int *resources;
    size_t nresources;
    int *flavors; /* in the order the ClusterQueue lists them */
    char **flavor_where; /* "file:line: " of each flavor reference */
    size_t nflavors;
} resource_group;

/* A cohort, defined (a Cohort object: own quota, parent) or implicit (named
 * by a ClusterQueue or as a parent). Per flavor-resource, as Kueue's
 * resource nodes: */
typedef struct {
    char *name;
    size_t parent; /* QNONE: a root */
    size_t def;    /* index in cohort_defs, or QNONE */
    size_t *members; /* ClusterQueues whose cohort this is */
    size_t nmembers;
    size_t *all_members; /* roots only: every ClusterQueue of the tree */
    size_t nall;
    int64_t *lendable; /* SubtreeQuota: own nominal + what children lend up */
    int64_t *used;     /* usage stored here: sum of children's max(0, usage - guaranteed) */
    int64_t *nominal, *borrowing_limit, *lending_limit; /* own quota; limits QUNLIMITED */
    int64_t *guaranteed; /* max(0, lendable - lendingLimit): kept from the parent */
    int64_t fair_weight; /* spec.fairSharing.weight in milli-units, default 1000 */
} cohort;

typedef struct {
    size_t *v;
    size_t n, cap;
} idvec;

typedef struct {
    char *name;
    char *where;
    char *cohort_name; /* NULL if none (a Cohort definition: its parent) */
    size_t cohort;
    size_t root; /* the root cohort of its tree, when it has a cohort */
    bool strict_fifo;
    within_policy within;
    reclaim_policy reclaim;
    int64_t fair_weight; /* spec.fairSharing.weight in milli-units, default 1000 */
    bool shadow_preemption; /* annotation tenantd.dev/preemption-enforcement: shadow */
    bool try_next_when_borrow;  /* flavorFungibility.whenCanBorrow: TryNextFlavor */
    bool try_next_when_preempt; /* flavorFungibility.whenCanPreempt: TryNextFlavor (default) */
    ff_preference preference;
    char *inactive; /* why the ClusterQueue is inactive (a flavor missing), or NULL */
    bool bwc;         /* borrowWithinCohort: LowerPriority */
    bool bwc_has_max; /* maxPriorityThreshold set */
    int32_t bwc_max_priority;
    resource_group *groups;
    size_t ngroups;
    quota_entry *quota;
    size_t nquota;
    /* dense per flavor-resource (flavor * nres + resource), after seal */
    bool *has;
    int64_t *nominal, *borrowing_limit, *guaranteed, *usage;
    int *group_of_resource; /* per resource: index in groups, -1 if uncovered */
    idvec heap;       /* pending, ordered by priority then queue time */
    idvec inadmissible;
    idvec admitted;
    /* admitted in candidatesOrdering (cand_before), rebuilt when stale:
     * preemption merges these runs instead of sorting every candidate */
    idvec sorted;
    bool sorted_ok;
    bool blocked; /* StrictFIFO head did not fit in this round */
    bool woken;   /* requeue on release: quota or nodes it may use were freed */
} cluster_queue;

typedef struct {
    int fr;
    int64_t v;
} fr_use;

/* A NodePool as written, before seal resolves its flavor and resources. */
typedef struct {
    char *name, *flavor, *where;
    int64_t nodes;
    char **cap_names;
    int64_t *cap_vals; /* milli-units per node */
    size_t ncap;
} pool_def;

/* One node of a NodePool: "<pool>-<i>", capacity and free per resource. */
typedef struct {
    char *name;
    int flavor;
    int64_t *cap, *free; /* nres each */
} qnode;

/* pods of one pod set on one node */
typedef struct {
    uint32_t node, podset;
    int64_t pods;
} placed;

/* One reason a flavor was not taken, kept as numbers so that a pending
 * workload's reason is worded only when read (sched.c): WHY_QUOTA
 * "insufficient quota" (a previously considered, b current request, c
 * maximum capacity), WHY_UNUSED "insufficient unused quota" (a more
 * needed), WHY_TAINT (tn: the flavor's taint), WHY_AFFINITY (the flavor's
 * nodeLabels contradict the pod set's node selection), WHY_TEXT (worded already:
 * off, len in the assigner's text buffer; never kept on a workload). */
typedef enum { WHY_QUOTA = 0, WHY_UNUSED, WHY_TAINT, WHY_AFFINITY, WHY_TEXT } why_kind;

typedef struct {
    uint8_t kind;
    int16_t f, r;
    uint32_t tn, off, len;
    int64_t a, b, c;
} why_item;

typedef struct {
    char *key; /* namespace/name */
    char *local_queue; /* namespace/name */
    size_t cq;
    int32_t priority;
    uint64_t created_ns, queue_ns, admitted_ns;
    size_t seq;
    td_wl_state state;
    bool inadmissible;
    bool borrowing; /* admitted above nominal quota */
    size_t npodsets;
    char **podset_names;
    int64_t *requests; /* npodsets * nres, milli-units, all pods of the set */
    int64_t *pod_requests; /* npodsets * nres, milli-units, one pod */
    int64_t *counts;       /* npodsets: pods in the set */
    placed *placement;     /* nodes held while admitted */
    size_t nplacement;
    char *placement_text;
    char *unknown_resource;
    char *misconfigured; /* Kueue's "resources validation failed: ..." or NULL */
    toleration **tols;   /* npodsets: the pod template's tolerations */
    /* npodsets * nflavors: true where the flavor's nodeLabels contradict the
     * pod template's nodeSelector or required node affinity (Kueue's
     * flavorSelector); NULL when no pod set selects nodes */
    bool *flavor_unmatched;
    size_t *ntols;
    int16_t *assignment; /* npodsets * nres: flavor index or -1 */
    fr_use *use;
    size_t nuse;
    size_t admitted_pos;
    char *reason;
    /* reason_lazy: the reason is "couldn't assign flavors to pod set
     * <why_ps>: <why>", not worded yet (reason stale); sched.c words it
     * when read */
    bool reason_lazy;
    uint8_t nwhy, capwhy;
    size_t why_ps;
    why_item *why;
    char *flavors;
    char *evicted; /* "Evicted by ns/x (Level) at Ts; requeued" until admitted again */
    bool shadow_noted; /* its shadow preemption is recorded (until admitted) */
    bool touched;      /* in td_queue.touched: its reason changed without an event */
} workload;

/* One answer of the preemption oracle (sched.c), shared by the workloads
 * of a ClusterQueue that ask the same: valid while the version it was
 * computed at holds. */
typedef struct {
    uint64_t ver; /* 0: empty */
    size_t who;   /* the workload (fair sharing), else QNONE */
    uint64_t queue_ns; /* withinClusterQueue LowerOrNewerEqualPriority only */
    int64_t val;
    int32_t fr, priority;
    int8_t pm, borrow;
} oracle_memo;

#define ORACLE_MEMO 16 /* per ClusterQueue */

/* Kueue Configuration fairSharing.preemptionStrategies */
typedef enum { FS_LE_FINAL_SHARE = 0, FS_LT_INITIAL_SHARE } fs_strategy;

struct td_queue {
    bool sealed;
    bool fair_sharing;
    fs_strategy fs_strategies[2];
    size_t nfs_strategies;
    bool freed; /* quota was released since inadmissible workloads were parked */
    /* td_queue_requeue_on_release: parked workloads and blocked StrictFIFO
     * heads wait, across passes, for a release in their cohort tree (or on
     * their flavors' nodes), as Kueue's queue manager requeues them */
    bool on_release;
    bool in_pass;
    idvec touched; /* pending workloads whose reason a pass changed */
    smap resource_ids, flavor_ids, cq_ids, lq_ids, pc_values, wpc_values, wl_ids;
    char **resource_names;
    td_qformat *resource_formats;
    size_t nres;
    char **flavor_names;
    bool *flavor_defined;
    flavor_spec *flavor_specs; /* per flavor: taints and tolerations */
    size_t nflavor_specs;
    size_t nflavors, nfr;
    cluster_queue *cqs;
    size_t ncqs, capcqs;
    cohort *cohorts;
    size_t ncohorts;
    cluster_queue *cohort_defs; /* Cohort objects: name, where, parent, quota */
    size_t ncohort_defs;
    char **lq_keys, **lq_targets, **lq_where;
    size_t nlqs, caplqs;
    int32_t *pc_vals, *wpc_vals;
    size_t npcs, nwpcs;
    bool has_default_pc;
    int32_t default_pc;
    workload *wls;
    size_t nwls, capwls;
    pool_def *pools;
    size_t npools;
    qnode *nodes; /* sorted by flavor, then pool name, then node number */
    size_t nnodes;
    size_t *flavor_node_start, *flavor_node_n; /* per flavor: its nodes */
    int64_t *flavor_max_cap;                   /* per flavor-resource: largest node */
    placed *scratch_place;
    size_t scratch_place_n, scratch_place_cap;
    /* bumped by every admission and eviction: per cohort tree (root index,
     * or ncohorts + ClusterQueue index without a cohort), and for nodes */
    uint64_t *tree_version;
    uint64_t node_version;
    /* bumped with tree_version, per flavor-resource of the workload
     * admitted or released: (tree * nfr + fr) */
    uint64_t *fr_version;
    oracle_memo *omemo; /* ncqs * ORACLE_MEMO */
    /* scratch kept between calls (sched.c): classical_set's candidate
     * lists (runs, heaps) and flavor-resource lists, the oracle's marks
     * (all false between calls) and assignment */
    void *cs_runs[3];
    size_t cs_runs_cap[3];
    size_t *cs_heap[3];
    size_t cs_heap_cap[3];
    int *cs_nf;
    fr_use *cs_rem;
    bool *or_need;
    int16_t *or_as;
    size_t or_as_cap;
    /* the pass's head cache: each head's assignment and usage (sched.c) */
    int16_t *hc_as;
    size_t hc_as_cap;
    fr_use *hc_use;
    size_t hc_use_cap;
    /* a preemption attempt's marks, assignment and usage (sched.c) */
    bool *pr_need;
    int16_t *pr_as;
    size_t pr_as_cap;
    fr_use *pr_use;
    /* per cohort and flavor-resource (co * nfr + fr): its member
     * ClusterQueues above their nominal quota of fr, in any order, kept by
     * sched.c's add_usage: borrowers[borrow_off[co]*nfr... ] see sched.c */
    size_t *borrowers;      /* per cohort, nfr lists of nmembers slots */
    uint32_t *borrow_n;     /* ncohorts * nfr: length of each list */
    uint32_t *borrow_pos;   /* ncqs * nfr: a queue's index in its list */
    size_t *borrow_base;    /* ncohorts: first slot of the cohort's lists */
    int *cohort_h;          /* ncohorts: Kueue's node height */
    size_t *cohort_root;    /* ncohorts: the root of its tree */
    td_queue_event *events;
    size_t nevents, capevents;
    /* scratch of the flavor assigner */
    int64_t *acc;
    int16_t *scratch_assign;
    char shadow_note[256]; /* set by a shadow preemption for the head's Pending reason */
    size_t scratch_assign_cap;
    fr_use *scratch_use;
    size_t scratch_use_cap;
};

/* smap: 0 on success, -1 out of memory. get returns QNONE if absent. */
int td__smap_put(smap *m, const char *key, size_t val);
size_t td__smap_get(const smap *m, const char *key);
void td__smap_fini(smap *m);

int td__idvec_push(idvec *v, size_t id);

char *td__qstrdup(const char *s);

/* Puts pending workload id into its ClusterQueue's heap. -1 out of memory. */
int td__queue_push_pending(td_queue *q, size_t id);

/* After seal: the cohorts' borrower lists (all empty: nothing is used)
 * and heights, the oracle's memo and versions. -1 out of memory. */
int td__queue_index_cohorts(td_queue *q);

/* Prints milli-units of resource r in its own quantity format. */
void td__queue_fmt(const td_queue *q, int r, int64_t milli, char *buf, size_t n);

#endif
