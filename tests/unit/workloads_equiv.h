/* workloads_equiv.h - drives the daemon's batch queue two ways with one
 * sequence of submits, finishes, withdrawals, applies, deletes and restarts:
 * A keeps its queue in memory between commits (td_workloads_commit), B
 * rebuilds it from the records and runs a full pass each time
 * (td_workloads_full_pass). After each step both must have decided the same
 * records (every Workload's status, its history of decisions included).
 * Shared by test_workloads_equiv.c (seeded) and fuzz_workloads_equiv.c. */
#ifndef TD_TEST_WORKLOADS_EQUIV_H
#define TD_TEST_WORKLOADS_EQUIV_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/manifest.h"
#include "daemon/workloads.h"
#include "kinds/builtin.h"

/* Two cohorts (one a tree with its own quota), a queue alone on NodePool
 * nodes, StrictFIFO and BestEffortFIFO, the preemption policies. */
static const char *const equiv_platform[] = {
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: a100}\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: h100}\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: small}\n---\n"
    "apiVersion: tenantd.dev/v1alpha1\nkind: NodePool\nmetadata: {name: cpu}\nspec:\n"
    "  flavor: small\n  nodes: 3\n  capacity: {cpu: \"4\"}\n"
    "  nodeSelector: {tenantd.dev/pool: cpu}\n  tenants: [\"*\"]\n---\n"
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Cohort\nmetadata: {name: org}\nspec:\n"
    "  resourceGroups:\n  - coveredResources: [cpu, nvidia.com/gpu]\n    flavors:\n"
    "    - name: a100\n      resources:\n      - {name: cpu, nominalQuota: 8}\n"
    "      - {name: nvidia.com/gpu, nominalQuota: 2}\n---\n",
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Cohort\nmetadata: {name: gpu}\n"
    "spec: {parentName: org}\n---\n",
#define EQUIV_CQ(name, extra, a100, h100)                                                        \
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: " name "}\n"        \
    "spec:\n  namespaceSelector: {}\n" extra "  resourceGroups:\n"                                \
    "  - coveredResources: [cpu, nvidia.com/gpu]\n    flavors:\n"                                 \
    "    - name: a100\n      resources:\n      - {name: cpu, nominalQuota: 16}\n"                 \
    "      - {name: nvidia.com/gpu, nominalQuota: " a100 "}\n"                                    \
    "    - name: h100\n      resources:\n      - {name: cpu, nominalQuota: 16}\n"                 \
    "      - {name: nvidia.com/gpu, nominalQuota: " h100 "}\n---\n"
    EQUIV_CQ("cq-a", "  cohort: gpu\n  preemption: {reclaimWithinCohort: Any, "
                     "withinClusterQueue: LowerPriority}\n", "4", "0"),
    EQUIV_CQ("cq-b", "  cohort: gpu\n  preemption: {reclaimWithinCohort: LowerPriority, "
                     "withinClusterQueue: LowerPriority, borrowWithinCohort: {policy: "
                     "LowerPriority}}\n", "2", "2"),
    EQUIV_CQ("cq-c", "  cohort: gpu\n  queueingStrategy: StrictFIFO\n", "0", "4"),
    EQUIV_CQ("cq-e", "  cohort: org\n  preemption: {withinClusterQueue: "
                     "LowerOrNewerEqualPriority}\n", "2", "0"),
    EQUIV_CQ("cq-s", "  queueingStrategy: StrictFIFO\n  preemption: {withinClusterQueue: "
                     "LowerPriority}\n", "1", "1"),
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq-d}\n"
    "spec:\n  namespaceSelector: {}\n  preemption: {withinClusterQueue: LowerPriority}\n"
    "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"
    "    - name: small\n      resources:\n      - {name: cpu, nominalQuota: 10}\n---\n",
#define EQUIV_LQ(name, cq)                                                                        \
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: " name                 \
    ", namespace: t1}\nspec: {clusterQueue: " cq "}\n---\n"
    EQUIV_LQ("q-a", "cq-a") EQUIV_LQ("q-b", "cq-b") EQUIV_LQ("q-c", "cq-c")
    EQUIV_LQ("q-d", "cq-d") EQUIV_LQ("q-e", "cq-e") EQUIV_LQ("q-s", "cq-s")};

static const char *const equiv_queues[] = {"q-a", "q-b", "q-c", "q-d", "q-e", "q-s", "q-none"};
static const char *const equiv_cqs[] = {"cq-a", "cq-b", "cq-c", "cq-e", "cq-s"};

typedef struct {
    td_config *a, *b; /* what A and B serve */
    uint64_t t;       /* the clock, ns */
    unsigned next_name;
    size_t incremental; /* steps A took without a rebuild */
    char fail[1024];
} equiv;

/* 0, or -1 with e->fail set. */
static int equiv_init(equiv *e)
{
    memset(e, 0, sizeof *e);
    e->t = 1700000000000000000ULL;
    td_manifest *m = NULL;
    td_config_builder *b = NULL;
    td_err err;
    char yaml[8192] = "";
    for (size_t i = 0; i < sizeof equiv_platform / sizeof equiv_platform[0]; i++)
        strncat(yaml, equiv_platform[i], sizeof yaml - strlen(yaml) - 1);
    /* the kinds a snapshot accepts (kind.h) */
    td_status st = td_kinds_register_builtin(&err);
    if (st == TD_OK)
        st = td_manifest_parse("equiv.yaml", yaml, strlen(yaml), &m, &err);
    if (st == TD_OK)
        st = td_config_builder_create(NULL, &b, &err);
    if (st == TD_OK)
        st = td_config_builder_add_manifest(b, m, &err);
    if (st == TD_OK)
        st = td_config_builder_finish(b, &e->a, &err);
    td_config_builder_destroy(b);
    td_manifest_destroy(m);
    if (st != TD_OK) {
        snprintf(e->fail, sizeof e->fail, "platform: %s", err.msg);
        return -1;
    }
    e->b = td_config_ref(e->a);
    td_workloads_abandon(td_workloads_live());
    return 0;
}

static void equiv_fini(equiv *e)
{
    td_config_unref(e->a);
    td_config_unref(e->b);
    td_workloads_live_release(td_workloads_live());
}

/* cfg with objs added and dels deleted, statuses of changed set. NULL with
 * *err on failure. */
static td_config *equiv_apply(const td_config *cfg, json_t *const *objs, size_t nobjs,
                              const td_object_id *dels, size_t ndels, const json_t *changed,
                              td_err *err)
{
    td_config_builder *b = NULL;
    td_config *out = NULL;
    td_status st = td_config_builder_create(cfg, &b, err);
    for (size_t i = 0; st == TD_OK && i < nobjs; i++)
        st = td_config_builder_add(b, objs[i], NULL, err);
    for (size_t i = 0; st == TD_OK && i < ndels; i++)
        st = td_config_builder_delete(b, dels[i].kind, dels[i].namespace_, dels[i].name, err);
    for (size_t i = 0; st == TD_OK && i < json_array_size(changed); i++)
        st = td_config_builder_add(b, json_array_get(changed, i), NULL, err);
    if (st == TD_OK)
        st = td_config_builder_finish(b, &out, err);
    td_config_builder_destroy(b);
    return st == TD_OK ? out : NULL;
}

/* Compares every Workload of A and B. */
static int equiv_compare(equiv *e, const char *what)
{
    json_t *const *wa, *const *wb;
    size_t na = td_config_list(e->a, "Workload", NULL, &wa);
    size_t nb = td_config_list(e->b, "Workload", NULL, &wb);
    if (na != nb) {
        snprintf(e->fail, sizeof e->fail, "%s: %zu workloads kept in memory, %zu rebuilt", what,
                 na, nb);
        return -1;
    }
    for (size_t i = 0; i < na; i++) {
        if (json_equal(wa[i], wb[i]))
            continue;
        char *x = json_dumps(json_object_get(wa[i], "status"), JSON_COMPACT | JSON_SORT_KEYS);
        char *y = json_dumps(json_object_get(wb[i], "status"), JSON_COMPACT | JSON_SORT_KEYS);
        snprintf(e->fail, sizeof e->fail, "%s: Workload %s differs:\nkept:    %.400s\nrebuilt: %.400s",
                 what, td_json_str(wa[i], "metadata.name"), x ? x : "?", y ? y : "?");
        free(x);
        free(y);
        return -1;
    }
    return 0;
}

/* One commit of objs/dels to both; wake_all for B as the daemon decides it
 * for A (an apply of the queue's objects or a delete). */
static int equiv_commit(equiv *e, json_t *const *objs, size_t nobjs, const td_object_id *dels,
                        size_t ndels, bool wake_all, const char *what)
{
    td_err err;
    e->t += 1000000;
    td_config *na = equiv_apply(e->a, objs, nobjs, dels, ndels, NULL, &err);
    td_config *nb = na ? equiv_apply(e->b, objs, nobjs, dels, ndels, NULL, &err) : NULL;
    json_t *ca = NULL, *cb = NULL;
    td_wlqueue *lq = td_workloads_live();
    td_status sa = TD_EINVAL, sb = TD_EINVAL;
    if (na && nb) {
        sa = td_workloads_commit(lq, e->a, na, objs, nobjs, ndels, e->t, &ca, &err);
        char ma[256];
        snprintf(ma, sizeof ma, "%s", err.msg);
        sb = td_workloads_full_pass(nb, e->t, wake_all, &cb, NULL, &err);
        if (sa != sb) {
            snprintf(e->fail, sizeof e->fail, "%s: kept %d (%s), rebuilt %d (%s)", what, sa, ma,
                     sb, err.msg);
            sa = TD_EIO;
        }
    }
    td_config *fa = sa == TD_OK ? equiv_apply(na, NULL, 0, NULL, 0, ca, &err) : NULL;
    td_config *fb = sb == TD_OK ? equiv_apply(nb, NULL, 0, NULL, 0, cb, &err) : NULL;
    int rc = 0;
    if (sa == TD_EIO) {
        rc = -1;
    } else if (!na || !nb || (sa == TD_OK && (!fa || !fb))) {
        /* the change itself is invalid (both refuse it alike): nothing */
        td_workloads_abandon(lq);
    } else if (sa != TD_OK) {
        td_workloads_abandon(lq);
    } else {
        if (json_array_size(ca) != json_array_size(cb)) {
            int off = snprintf(e->fail, sizeof e->fail,
                               "%s: %zu records written from memory, %zu rebuilt:", what,
                               json_array_size(ca), json_array_size(cb));
            for (size_t k = 0; k < json_array_size(ca) && off < 700; k++)
                off += snprintf(e->fail + off, sizeof e->fail - (size_t)off, " %s",
                                td_json_str(json_array_get(ca, k), "metadata.name"));
            off += snprintf(e->fail + off, sizeof e->fail - (size_t)off, " /");
            for (size_t k = 0; k < json_array_size(cb) && off < 900; k++)
                off += snprintf(e->fail + off, sizeof e->fail - (size_t)off, " %s",
                                td_json_str(json_array_get(cb, k), "metadata.name"));
            if (getenv("TD_EQUIV_DEBUG"))
                for (size_t k = 0; k < json_array_size(ca); k++) {
                    json_t *x = json_array_get(ca, k);
                    json_t *y = td_config_get(nb, "Workload", "t1", td_json_str(x, "metadata.name"));
                    char *p = json_dumps(td_json_path(x, "status.tenantd"), JSON_COMPACT);
                    char *q = json_dumps(td_json_path(y, "status.tenantd"), JSON_COMPACT);
                    fprintf(stderr, "kept:    %s\nrebuilt: %s\n", p, q);
                    free(p);
                    free(q);
                }
            rc = -1;
        }
        td_workloads_publish(lq, fa);
        td_config_unref(e->a);
        td_config_unref(e->b);
        e->a = td_config_ref(fa);
        e->b = td_config_ref(fb);
        if (rc == 0)
            rc = equiv_compare(e, what);
    }
    json_decref(ca);
    json_decref(cb);
    td_config_unref(fa);
    td_config_unref(fb);
    td_config_unref(na);
    td_config_unref(nb);
    return rc;
}

static json_t *equiv_workload(equiv *e, unsigned queue, unsigned prio, unsigned pods,
                              unsigned gpu, unsigned cpu)
{
    char name[32], at[32], cpus[16], gpus[16];
    snprintf(name, sizeof name, "w%u", e->next_name++);
    snprintf(at, sizeof at, "%llu", (unsigned long long)(e->t + e->next_name));
    snprintf(cpus, sizeof cpus, "%u", cpu);
    snprintf(gpus, sizeof gpus, "%u", gpu);
    json_t *req = json_pack("{s:s}", "cpu", cpus);
    if (gpu && queue != 3)
        json_object_set_new(req, "nvidia.com/gpu", json_string(gpus));
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:{s:s, s:i, s:[{s:s, s:i, s:{s:{s:[{s:s, "
                     "s:{s:o}}]}}}]}}",
                     "apiVersion", "kueue.x-k8s.io/v1beta1", "kind", "Workload", "metadata",
                     "name", name, "namespace", "t1", "annotations", TD_SUBMITTED_AT, at, "spec",
                     "queueName", equiv_queues[queue], "priority", (int)prio * 10, "podSets",
                     "name", "main", "count", (int)pods, "template", "spec", "containers",
                     "name", "c", "resources", "requests", req);
}

/* The i-th (mod their number) stored Workload in state (NULL: any). */
static json_t *equiv_pick(const equiv *e, const char *state, unsigned i)
{
    json_t *const *w;
    size_t n = td_config_list(e->a, "Workload", NULL, &w), m = 0;
    for (size_t k = 0; k < n; k++) {
        const char *s = td_json_str(w[k], "status.tenantd.state");
        m += !state || (s && strcmp(s, state) == 0);
    }
    if (!m)
        return NULL;
    i %= (unsigned)m;
    for (size_t k = 0; k < n; k++) {
        const char *s = td_json_str(w[k], "status.tenantd.state");
        if ((!state || (s && strcmp(s, state) == 0)) && i-- == 0)
            return w[k];
    }
    return NULL;
}

/* A copy of wl finished at e->t. */
static json_t *equiv_finished(equiv *e, const json_t *wl)
{
    json_t *c = json_deep_copy(wl);
    char at[32];
    snprintf(at, sizeof at, "%llu", (unsigned long long)e->t + 500000);
    json_object_set_new(td_json_path(c, "metadata.annotations"), TD_FINISHED_AT, json_string(at));
    return c;
}

/* One step: op and the argument bytes x (4 of them) choose what. 0 both
 * agree, -1 not (e->fail says how). */
static int equiv_step(equiv *e, unsigned op, const unsigned char *x)
{
    json_t *objs[3] = {NULL, NULL, NULL};
    size_t n = 0;
    int rc = 0;
    switch (op % 10) {
    case 0: case 1: case 2: case 3: /* a submit of 1-3 workloads */
        for (n = 0; n < 1u + x[0] % 3; n++)
            objs[n] = equiv_workload(e, (x[1] + n) % 7, x[2] % 4, 1 + (x[3] + n) % 3,
                                     (x[2] >> 2) % 3, 1 + (x[3] >> 2) % 6);
        rc = equiv_commit(e, objs, n, NULL, 0, false, "submit");
        break;
    case 4: case 5: { /* a finish of an admitted one */
        json_t *wl = equiv_pick(e, "Admitted", x[0] | (unsigned)x[1] << 8);
        if (wl && (objs[n] = equiv_finished(e, wl)))
            n++;
        rc = n ? equiv_commit(e, objs, n, NULL, 0, false, "finish") : 0;
        break;
    }
    case 6: { /* a pending one reported complete */
        json_t *wl = equiv_pick(e, "Pending", x[0] | (unsigned)x[1] << 8);
        if (wl && (objs[n] = equiv_finished(e, wl)))
            n++;
        rc = n ? equiv_commit(e, objs, n, NULL, 0, false, "withdraw") : 0;
        break;
    }
    case 7: { /* an apply: one ClusterQueue's a100 GPUs change */
        const char *cq = equiv_cqs[x[0] % 5];
        json_t *old = td_config_get(e->a, "ClusterQueue", NULL, cq);
        json_t *c = json_deep_copy(old);
        json_t *r = td_json_path(c, "spec.resourceGroups");
        json_t *fl = json_object_get(json_array_get(r, 0), "flavors");
        json_t *res = json_object_get(json_array_get(fl, 0), "resources");
        json_object_set_new(json_array_get(res, 1), "nominalQuota", json_integer(x[1] % 6));
        objs[n++] = c;
        rc = equiv_commit(e, objs, n, NULL, 0, true, "apply");
        break;
    }
    case 8: { /* a delete of any workload */
        json_t *wl = equiv_pick(e, NULL, x[0] | (unsigned)x[1] << 8);
        if (!wl)
            break;
        td_object_id id = td_object_identity(wl);
        char kind[16] = "Workload", ns[64], name[64];
        snprintf(ns, sizeof ns, "%s", id.namespace_);
        snprintf(name, sizeof name, "%s", id.name);
        td_object_id del = {kind, ns, name};
        rc = equiv_commit(e, NULL, 0, &del, 1, true, "delete");
        break;
    }
    default: /* a restart of A: its queue is rebuilt from the records */
        td_workloads_abandon(td_workloads_live());
        break;
    }
    for (size_t k = 0; k < n; k++)
        json_decref(objs[k]);
    if (rc == 0 && op % 10 <= 6)
        e->incremental++;
    return rc;
}

#endif
