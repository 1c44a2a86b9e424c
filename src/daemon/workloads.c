/* workloads.c - the daemon's batch queue, persisted as Kueue persists it.
 * The queue lives in memory between commits (td_wlqueue): a commit of
 * submissions and finishes runs them on it and a pass that tries only what
 * arrived or what a release woke, and hands back the Workloads whose status
 * changed, for the caller to write in the same store transaction. It is
 * rebuilt from the records on the stored Workloads (status.admission: the
 * flavors and nodes each admitted workload holds; status.tenantd: state,
 * queue time, reason and the workload's event history) at start, after
 * another replica's commit, and for an apply or delete of the queue's
 * objects (then every pending workload is tried again). A rebuild without a
 * pass (a snapshot's first reader) never schedules, so a quota changed
 * later never rewrites the past. */
#include "daemon/workloads.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "queue/intervals.h"
#include "queue/queue.h"

static const char *const setup_kinds[] = {"ResourceFlavor", "Cohort", "ClusterQueue",
                                          "LocalQueue", "PriorityClass",
                                          "WorkloadPriorityClass", "NodePool"};

/* A time in ns since the epoch, as a record or an annotation holds it (a
 * decimal string, or a JSON integer); 0 (none) for anything else: a sign,
 * a non-digit or more than uint64 holds never wraps into another time. */
static uint64_t ns_value(const json_t *v)
{
    if (json_is_integer(v))
        return json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
    const char *s = json_string_value(v);
    if (!s || *s < '0' || *s > '9')
        return 0;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    return *end || errno ? 0 : (uint64_t)x;
}

static uint64_t annotation_ns(const json_t *wl, const char *key)
{
    return ns_value(json_object_get(td_json_path(wl, "metadata.annotations"), key));
}

static json_t *ns_string(uint64_t ns)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)ns);
    return json_string(buf);
}

static json_t *rfc3339(uint64_t ns)
{
    time_t secs = (time_t)(ns / 1000000000ULL);
    struct tm tm;
    char ts[40] = "1970-01-01T00:00:00Z";
    if (gmtime_r(&secs, &tm))
        strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_string(ts);
}

static const char *const event_names[] = {"Admitted", "Preempted", "Finished", "Requeued",
                                          "WouldPreempt"};

static int event_type(const char *s, td_queue_event_type *t)
{
    for (int i = 0; s && i < (int)(sizeof event_names / sizeof event_names[0]); i++)
        if (strcmp(s, event_names[i]) == 0) {
            *t = (td_queue_event_type)i;
            return 0;
        }
    return -1;
}

typedef struct {
    uint64_t t;
    uint64_t seq; /* order within its scheduling pass */
    size_t wl;    /* index into the stored list */
    const json_t *rec;
} hist_ref;

static int by_time_seq(const void *a, const void *b)
{
    const hist_ref *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return x->wl < y->wl ? -1 : x->wl > y->wl;
}

typedef struct {
    uint64_t t;
    size_t wl;
} order_ref;

static int by_queue_time(const void *a, const void *b)
{
    const order_ref *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->wl < y->wl ? -1 : x->wl > y->wl;
}

typedef struct {
    uint64_t t;
    bool finish;
    size_t wl;
} arrival;

static int by_arrival(const void *a, const void *b)
{
    const arrival *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    if (x->finish != y->finish)
        return x->finish ? -1 : 1;
    return x->wl < y->wl ? -1 : x->wl > y->wl;
}

/* q's ClusterQueue ids sorted by name, for cq_index: a rebuild looks one
 * up per history event (a scan of 1,000 names each was a sixth of it). */
typedef struct {
    const td_queue *q;
    size_t *ids;
    size_t n;
} cq_names;

static const td_queue *sort_q;

static int by_cq_name(const void *a, const void *b)
{
    return strcmp(td_queue_cq_name(sort_q, *(const size_t *)a),
                  td_queue_cq_name(sort_q, *(const size_t *)b));
}

/* 0, or -1 out of memory. Loop thread (sort_q). */
static int cq_names_init(cq_names *x, const td_queue *q)
{
    x->q = q;
    x->n = td_queue_cq_count(q);
    x->ids = malloc((x->n ? x->n : 1) * sizeof *x->ids);
    if (!x->ids)
        return -1;
    for (size_t c = 0; c < x->n; c++)
        x->ids[c] = c;
    sort_q = q;
    if (x->n)
        qsort(x->ids, x->n, sizeof *x->ids, by_cq_name);
    return 0;
}

static size_t cq_index(const cq_names *x, const char *name)
{
    size_t lo = 0, hi = x->n;
    while (name && lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int k = strcmp(td_queue_cq_name(x->q, x->ids[mid]), name);
        if (k == 0)
            return x->ids[mid];
        if (k < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return TD_QUEUE_NONE;
}

/* How a queue is rebuilt from the records: REPLAY runs no pass; PASS_PARKED
 * runs one with the pending workloads parked where the pass that wrote
 * their records left them (only what arrived since, or what a release
 * wakes, is tried); PASS_ALL tries every pending workload again (an apply
 * of the queue's objects, a delete, a start). */
typedef enum { REPLAY, PASS_PARKED, PASS_ALL } rebuild_mode;

/* cfg's stored Workloads and, per stored index, its queue id, whether its
 * admission record no longer holds and why. */
typedef struct {
    json_t *const *wls;
    size_t n;
    size_t *qid;
    bool *bad;
    char (*why)[256];
} stored;

static _Atomic unsigned long long rebuilds;

unsigned long long td_workloads_rebuilds(void)
{
    return atomic_load_explicit(&rebuilds, memory_order_relaxed);
}

/* An empty queue holding cfg's setup objects, requeueing on release. */
static td_status setup_queue(const td_config *cfg, td_queue **out, td_err *err)
{
    td_queue *q = NULL;
    td_status st = td_queue_create(&q, err);
    if (st == TD_OK)
        td_queue_requeue_on_release(q, true);
    for (size_t k = 0; st == TD_OK && k < sizeof setup_kinds / sizeof setup_kinds[0]; k++) {
        json_t *const *objs;
        size_t n = td_config_list(cfg, setup_kinds[k], NULL, &objs);
        for (size_t i = 0; st == TD_OK && i < n; i++)
            st = td_queue_add_object(q, objs[i], NULL, err);
    }
    if (st == TD_OK)
        st = td_queue_seal(q, err);
    if (st != TD_OK) {
        td_queue_destroy(q);
        return st;
    }
    *out = q;
    return TD_OK;
}

/* The recorded workloads of s in queue order, each restored from its
 * record; one whose admission no longer fits the objects waits again. */
static td_status restore_records(td_queue *q, stored *s, td_err *err)
{
    size_t n = s->n;
    order_ref *ord = malloc((n ? n : 1) * sizeof *ord);
    if (!ord)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *rec = td_json_path(s->wls[i], "status.tenantd");
        uint64_t t = ns_value(json_object_get(rec, "queuedAt"));
        ord[i] = (order_ref){t ? t : annotation_ns(s->wls[i], TD_SUBMITTED_AT), i};
    }
    if (n)
        qsort(ord, n, sizeof *ord, by_queue_time);
    td_status st = TD_OK;
    for (size_t k = 0; st == TD_OK && k < n; k++) {
        size_t i = ord[k].wl;
        const json_t *rec = td_json_path(s->wls[i], "status.tenantd");
        const char *state = td_json_str(rec, "state");
        if (!state)
            continue;
        st = td_queue_submit(q, s->wls[i], NULL, ord[k].t, &s->qid[i], err);
        if (st != TD_OK)
            break;
        if (strcmp(state, "Admitted") == 0) {
            td_err e;
            td_status rs = td_queue_restore_admission(
                q, s->qid[i], td_json_path(s->wls[i], "status.admission"),
                ns_value(json_object_get(rec, "admittedAt")),
                json_is_true(json_object_get(rec, "borrowing")), &e);
            if (rs == TD_ENOMEM)
                st = td_err_set(err, rs, "%s", e.msg);
            else if (rs != TD_OK) {
                /* The objects changed under the record (its ClusterQueue or
                 * a node went away): it waits again, and a pass records it. */
                s->bad[i] = true;
                snprintf(s->why[i], sizeof s->why[i], "%s", e.msg);
                char r[400];
                snprintf(r, sizeof r, "admission record no longer valid: %.300s", e.msg);
                st = td_queue_restore_pending(q, s->qid[i], NULL, r, err);
            }
        } else if (strcmp(state, "Finished") == 0) {
            st = td_queue_withdraw(q, s->qid[i], 0, err);
        } else if (td_queue_workload_state(q, s->qid[i]) == TD_WL_PENDING) {
            st = td_queue_restore_pending(q, s->qid[i], td_json_str(rec, "evicted"),
                                          td_json_str(rec, "reason"), err);
        }
    }
    free(ord);
    return st;
}

/* The recorded history of s, in time order, as q's events; *ne0 is where
 * new events start. With pass, a record that no longer holds ends its
 * admitted interval at now_ns (a new event). */
static td_status restore_history(td_queue *q, stored *s, bool pass, uint64_t now_ns, size_t *ne0,
                                 td_err *err)
{
    size_t nhist = 0;
    for (size_t i = 0; i < s->n; i++)
        nhist += json_array_size(td_json_path(s->wls[i], "status.tenantd.history"));
    hist_ref *hist = malloc((nhist ? nhist : 1) * sizeof *hist);
    if (!hist)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    nhist = 0;
    for (size_t i = 0; i < s->n; i++) {
        size_t k;
        json_t *h;
        json_array_foreach(td_json_path(s->wls[i], "status.tenantd.history"), k, h)
            hist[nhist++] = (hist_ref){ns_value(json_object_get(h, "time")),
                                       ns_value(json_object_get(h, "seq")), i, h};
    }
    if (nhist)
        qsort(hist, nhist, sizeof *hist, by_time_seq);
    cq_names cqs;
    td_status st = cq_names_init(&cqs, q) == 0 ? TD_OK
                                              : td_err_set(err, TD_ENOMEM, "out of memory");
    for (size_t k = 0; st == TD_OK && k < nhist; k++) {
        const json_t *h = hist[k].rec;
        td_queue_event ev;
        memset(&ev, 0, sizeof ev);
        if (event_type(td_json_str(h, "type"), &ev.type) != 0 ||
            s->qid[hist[k].wl] == TD_QUEUE_NONE)
            continue;
        ev.t_ns = hist[k].t;
        ev.workload = s->qid[hist[k].wl];
        ev.cluster_queue = cq_index(&cqs, td_json_str(h, "clusterQueue"));
        ev.by = td_queue_workload_find(q, td_json_str(h, "by"));
        ev.borrowing = json_is_true(json_object_get(h, "borrowing"));
        const char *v;
        if ((v = td_json_str(h, "level")))
            snprintf(ev.level, sizeof ev.level, "%s", v);
        if ((v = td_json_str(h, "flavors")))
            snprintf(ev.flavors, sizeof ev.flavors, "%s", v);
        if ((v = td_json_str(h, "placement")))
            snprintf(ev.placement, sizeof ev.placement, "%s", v);
        if ((v = td_json_str(h, "reason")))
            snprintf(ev.reason, sizeof ev.reason, "%s", v);
        st = td_queue_restore_event(q, &ev, err);
    }
    free(hist);
    free(cqs.ids);
    const td_queue_event *evs;
    *ne0 = td_queue_events(q, &evs);
    for (size_t i = 0; st == TD_OK && pass && i < s->n; i++) {
        if (!s->bad[i])
            continue;
        td_queue_event ev;
        memset(&ev, 0, sizeof ev);
        ev.t_ns = now_ns;
        ev.type = TD_QEV_PREEMPTED;
        ev.workload = s->qid[i];
        ev.cluster_queue = td_queue_workload_cq(q, s->qid[i]);
        ev.by = TD_QUEUE_NONE;
        const char *fl = td_json_str(s->wls[i], "status.tenantd.flavors");
        snprintf(ev.flavors, sizeof ev.flavors, "%s", fl ? fl : "");
        snprintf(ev.reason, sizeof ev.reason, "Evicted: admission record no longer valid: %s",
                 s->why[i]);
        st = td_queue_restore_event(q, &ev, err);
    }
    return st;
}

/* Submissions and finishes not yet recorded, arr[0, narr) of the
 * workloads wls (queue ids in qid, filled in for submissions), in time
 * order, at one instant finishes first; with pass, a pass after each
 * instant up to now_ns and one at now_ns. Sorts arr. */
static td_status run_arrivals(td_queue *q, arrival *arr, size_t narr, json_t *const *wls,
                              size_t *qid, bool pass, uint64_t now_ns, td_err *err)
{
    if (narr)
        qsort(arr, narr, sizeof *arr, by_arrival);
    td_status st = TD_OK;
    for (size_t k = 0; st == TD_OK && k < narr;) {
        uint64_t t = arr[k].t;
        for (; st == TD_OK && k < narr && arr[k].t == t; k++) {
            size_t i = arr[k].wl;
            if (!arr[k].finish) {
                st = td_queue_submit(q, wls[i], NULL, t, &qid[i], err);
                continue;
            }
            if (qid[i] == TD_QUEUE_NONE)
                continue;
            td_wl_state ws = td_queue_workload_state(q, qid[i]);
            if (ws == TD_WL_ADMITTED)
                st = td_queue_finish(q, qid[i], t, err);
            else if (ws == TD_WL_PENDING)
                st = td_queue_withdraw(q, qid[i], t, err);
        }
        if (st == TD_OK && pass && t <= now_ns)
            st = td_queue_schedule(q, t, NULL);
    }
    if (st == TD_OK && pass)
        st = td_queue_schedule(q, now_ns, NULL);
    return st;
}

/* The queue of cfg rebuilt from the records (see rebuild_mode); new
 * events start at *ne0; s->qid maps stored index to queue id. */
static td_status rebuild(const td_config *cfg, rebuild_mode mode, uint64_t now_ns, td_queue **out_q,
                         stored *s, size_t *ne0, td_err *err)
{
    atomic_fetch_add_explicit(&rebuilds, 1, memory_order_relaxed);
    memset(s, 0, sizeof *s);
    s->n = td_config_list(cfg, "Workload", NULL, &s->wls);
    size_t n = s->n;
    td_queue *q = NULL;
    td_status st = setup_queue(cfg, &q, err);
    s->qid = malloc((n ? n : 1) * sizeof *s->qid);
    s->bad = calloc(n ? n : 1, sizeof *s->bad);
    s->why = calloc(n ? n : 1, sizeof *s->why);
    arrival *arr = malloc((2 * n + 1) * sizeof *arr);
    if (st == TD_OK && (!s->qid || !s->bad || !s->why || !arr))
        st = td_err_set(err, TD_ENOMEM, "out of memory");
    for (size_t i = 0; st == TD_OK && i < n; i++)
        s->qid[i] = TD_QUEUE_NONE;
    if (st == TD_OK)
        st = restore_records(q, s, err);
    if (st == TD_OK && mode != PASS_ALL)
        st = td_queue_park_all(q, err);
    for (size_t i = 0; st == TD_OK && mode != PASS_ALL && i < n; i++)
        if (s->bad[i])
            st = td_queue_requeue(q, s->qid[i], err);
    if (st == TD_OK)
        st = restore_history(q, s, mode != REPLAY, now_ns, ne0, err);
    size_t narr = 0;
    for (size_t i = 0; st == TD_OK && i < n; i++) {
        const char *state = td_json_str(s->wls[i], "status.tenantd.state");
        if (!state)
            arr[narr++] = (arrival){annotation_ns(s->wls[i], TD_SUBMITTED_AT), false, i};
        uint64_t fin = annotation_ns(s->wls[i], TD_FINISHED_AT);
        if (fin && !(state && strcmp(state, "Finished") == 0))
            arr[narr++] = (arrival){fin, true, i};
    }
    if (st == TD_OK)
        st = run_arrivals(q, arr, narr, s->wls, s->qid, mode != REPLAY, now_ns, err);
    free(arr);
    free(s->bad);
    free(s->why);
    s->bad = NULL;
    s->why = NULL;
    if (st != TD_OK) {
        free(s->qid);
        s->qid = NULL;
        td_queue_destroy(q);
        return st;
    }
    td_queue_touched_clear(q);
    *out_q = q;
    return TD_OK;
}

td_status td_workloads_replay(const td_config *cfg, td_queue **out_q, json_t ***out_wls,
                              size_t *out_n, td_err *err)
{
    td_queue *q = NULL;
    stored s;
    size_t ne0 = 0;
    td_status st = rebuild(cfg, REPLAY, 0, &q, &s, &ne0, err);
    if (st != TD_OK)
        return st;
    size_t nq = td_queue_workload_count(q);
    json_t **by_id = calloc(nq ? nq : 1, sizeof *by_id);
    if (!by_id) {
        free(s.qid);
        td_queue_destroy(q);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < s.n; i++)
        if (s.qid[i] < nq)
            by_id[s.qid[i]] = s.wls[i];
    free(s.qid);
    *out_q = q;
    *out_wls = by_id;
    *out_n = nq;
    return TD_OK;
}

static const char *state_name(td_wl_state ws)
{
    return ws == TD_WL_ADMITTED ? "Admitted" : ws == TD_WL_PENDING ? "Pending" : "Finished";
}

/* s, or "" when absent */
static const char *str_or_empty(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* Whether wl's record already says what queue id says (nothing new in its
 * history): then make_status would give the status it has. */
static bool record_current(const td_queue *q, size_t id, const json_t *wl)
{
    const json_t *rec = td_json_path(wl, "status.tenantd");
    if (!json_is_object(rec))
        return false;
    td_wl_state ws = td_queue_workload_state(q, id);
    size_t cq = td_queue_workload_cq(q, id);
    if (strcmp(str_or_empty(rec, "state"), state_name(ws)) != 0 ||
        ns_value(json_object_get(rec, "queuedAt")) != td_queue_workload_queue_ns(q, id) ||
        strcmp(str_or_empty(rec, "reason"), td_queue_workload_reason(q, id)) != 0 ||
        strcmp(str_or_empty(rec, "clusterQueue"),
               cq == TD_QUEUE_NONE ? "" : td_queue_cq_name(q, cq)) != 0 ||
        json_integer_value(json_object_get(rec, "priority")) != td_queue_workload_priority(q, id) ||
        strcmp(str_or_empty(rec, "evicted"),
               ws == TD_WL_PENDING ? td_queue_workload_evicted(q, id) : "") != 0)
        return false;
    if (ws != TD_WL_ADMITTED)
        return true;
    return ns_value(json_object_get(rec, "admittedAt")) == td_queue_workload_admitted_ns(q, id) &&
           json_is_true(json_object_get(rec, "borrowing")) == td_queue_workload_borrowing(q, id) &&
           strcmp(str_or_empty(rec, "flavors"), td_queue_workload_flavors(q, id)) == 0 &&
           strcmp(str_or_empty(rec, "placement"), td_queue_workload_placement(q, id)) == 0;
}

static json_t *condition(const char *type, bool status, const char *reason, const char *message,
                         uint64_t t)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:o}", "type", type, "status",
                     status ? "True" : "False", "reason", reason, "message", message,
                     "lastTransitionTime", rfc3339(t));
}

/* The status a Workload gets from queue id: Kueue's conditions and
 * admission, and tenantd's record (history: the old one plus the new events
 * of id from ne0 on). NULL out of memory. */
static json_t *make_status(const td_queue *q, size_t id, const json_t *wl, size_t ne0)
{
    td_wl_state ws = td_queue_workload_state(q, id);
    const char *reason = td_queue_workload_reason(q, id);
    json_t *old = td_json_path(wl, "status.tenantd.history");
    const td_queue_event *ev;
    size_t ne = td_queue_events(q, &ev);
    bool grows = false;
    for (size_t k = ne0; k < ne && !grows; k++)
        grows = ev[k].workload == id;
    /* The recorded history is shared, never changed, unless it grows. */
    json_t *hist = !json_is_array(old) ? json_array()
                   : grows             ? json_deep_copy(old)
                                       : json_incref(old);
    for (size_t k = ne0; hist && grows && k < ne; k++) {
        if (ev[k].workload != id)
            continue;
        json_t *h = json_pack("{s:s, s:o, s:I, s:s}", "type", event_names[ev[k].type], "time",
                              ns_string(ev[k].t_ns), "seq", (json_int_t)(k - ne0),
                              "clusterQueue",
                              ev[k].cluster_queue == TD_QUEUE_NONE
                                  ? ""
                                  : td_queue_cq_name(q, ev[k].cluster_queue));
        if (!h)
            continue;
        if (ev[k].by != TD_QUEUE_NONE)
            json_object_set_new(h, "by", json_string(td_queue_workload_key(q, ev[k].by)));
        if (*ev[k].level)
            json_object_set_new(h, "level", json_string(ev[k].level));
        if (ev[k].type == TD_QEV_ADMITTED)
            json_object_set_new(h, "borrowing", json_boolean(ev[k].borrowing));
        if (*ev[k].flavors)
            json_object_set_new(h, "flavors", json_string(ev[k].flavors));
        if (*ev[k].placement)
            json_object_set_new(h, "placement", json_string(ev[k].placement));
        json_object_set_new(h, "reason", json_string(ev[k].reason));
        json_array_append_new(hist, h);
    }
    size_t cq = td_queue_workload_cq(q, id);
    json_t *rec = json_pack("{s:s, s:o, s:s, s:s, s:i}", "state", state_name(ws), "queuedAt",
                            ns_string(td_queue_workload_queue_ns(q, id)), "reason", reason,
                            "clusterQueue", cq == TD_QUEUE_NONE ? "" : td_queue_cq_name(q, cq),
                            "priority", (int)td_queue_workload_priority(q, id));
    json_t *conds = json_array();
    json_t *st = rec && conds ? json_pack("{s:o}", "conditions", conds) : NULL;
    if (!st || !hist) {
        json_decref(rec);
        json_decref(st);
        json_decref(hist);
        return NULL;
    }
    if (ws == TD_WL_ADMITTED) {
        uint64_t at = td_queue_workload_admitted_ns(q, id);
        json_object_set_new(rec, "admittedAt", ns_string(at));
        json_object_set_new(rec, "borrowing", json_boolean(td_queue_workload_borrowing(q, id)));
        json_object_set_new(rec, "flavors", json_string(td_queue_workload_flavors(q, id)));
        if (*td_queue_workload_placement(q, id))
            json_object_set_new(rec, "placement",
                                json_string(td_queue_workload_placement(q, id)));
        json_array_append_new(conds, condition("QuotaReserved", true, "QuotaReserved", reason, at));
        json_array_append_new(conds, condition("Admitted", true, "Admitted",
                                               "The workload is admitted", at));
        json_object_set_new(st, "admission", td_queue_workload_admission(q, id));
    } else if (ws == TD_WL_PENDING) {
        uint64_t at = td_queue_workload_queue_ns(q, id);
        const char *ev_text = td_queue_workload_evicted(q, id);
        json_array_append_new(conds, condition("QuotaReserved", false, "Pending", reason, at));
        if (*ev_text) {
            json_object_set_new(rec, "evicted", json_string(ev_text));
            json_array_append_new(conds, condition("Evicted", true, "Preempted", ev_text, at));
        }
    } else {
        uint64_t at = annotation_ns(wl, TD_FINISHED_AT);
        json_array_append_new(conds, condition("Finished", true, "Succeeded",
                                               "Reported finished by the job runner", at));
    }
    json_object_set_new(rec, "history", hist);
    json_object_set_new(st, "tenantd", rec);
    return st;
}

/* Appends to out a copy of wl with the status queue id gives it, unless
 * its record already says so (grows: id has events from ne0 on). */
static td_status record_changed(const td_queue *q, size_t id, const json_t *wl, size_t ne0,
                                bool grows, json_t *out, td_err *err)
{
    if (!grows && record_current(q, id, wl))
        return TD_OK;
    json_t *status = make_status(q, id, wl, ne0);
    if (!status)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    if (json_equal(status, json_object_get(wl, "status"))) {
        json_decref(status);
        return TD_OK;
    }
    json_t *copy = json_copy((json_t *)wl);
    if (!copy) {
        json_decref(status);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    if (json_object_set_new(copy, "status", status) != 0 || json_array_append_new(out, copy) != 0)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    return TD_OK;
}

/* Marks in *grows (a new array of q's workload count) the workloads with
 * events from ne0 on. */
static td_status new_event_marks(const td_queue *q, size_t ne0, bool **grows, td_err *err)
{
    size_t nq = td_queue_workload_count(q);
    bool *g = calloc(nq ? nq : 1, sizeof *g);
    if (!g)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    const td_queue_event *ev;
    size_t ne = td_queue_events(q, &ev);
    for (size_t k = ne0; k < ne; k++)
        if (ev[k].workload < nq)
            g[ev[k].workload] = true;
    *grows = g;
    return TD_OK;
}

td_status td_workloads_full_pass(const td_config *cfg, uint64_t now_ns, bool wake_all,
                                 json_t **changed, td_queue **out_q, td_err *err)
{
    td_queue *q = NULL;
    stored s;
    size_t ne0 = 0;
    td_status st = rebuild(cfg, wake_all ? PASS_ALL : PASS_PARKED, now_ns, &q, &s, &ne0, err);
    if (st != TD_OK)
        return st;
    json_t *out = json_array();
    bool *grows = NULL;
    st = out ? new_event_marks(q, ne0, &grows, err) : td_err_set(err, TD_ENOMEM, "out of memory");
    for (size_t i = 0; st == TD_OK && i < s.n; i++)
        st = record_changed(q, s.qid[i], s.wls[i], ne0, grows[s.qid[i]], out, err);
    free(s.qid);
    free(grows);
    if (st != TD_OK) {
        td_queue_destroy(q);
        json_decref(out);
        return st;
    }
    if (out_q)
        *out_q = q;
    else
        td_queue_destroy(q);
    *changed = out;
    return TD_OK;
}

td_status td_workloads_pass(const td_config *cfg, uint64_t now_ns, json_t **changed,
                            td_queue **out_q, td_err *err)
{
    return td_workloads_full_pass(cfg, now_ns, true, changed, out_q, err);
}

/* ---- the queue kept between commits --------------------------------------- */

struct td_wlqueue {
    td_queue *q;     /* NULL: the next commit rebuilds it from the records */
    td_config *cfg;  /* the snapshot whose records q is (a reference) */
    unsigned long long gen;
};

static td_wlqueue live_default;

td_wlqueue *td_workloads_live(void)
{
    return &live_default;
}

static void live_drop(td_wlqueue *lq)
{
    td_queue_destroy(lq->q);
    lq->q = NULL;
    td_config_unref(lq->cfg);
    lq->cfg = NULL;
    lq->gen++;
}

void td_workloads_live_release(td_wlqueue *lq)
{
    live_drop(lq);
}

void td_workloads_adopt(td_wlqueue *lq, td_config *cfg, td_queue *q)
{
    live_drop(lq);
    lq->q = q;
    lq->cfg = td_config_ref(cfg);
}

void td_workloads_publish(td_wlqueue *lq, td_config *final)
{
    td_config_unref(lq->cfg);
    lq->cfg = lq->q ? td_config_ref(final) : NULL;
    lq->gen++;
}

void td_workloads_abandon(td_wlqueue *lq)
{
    live_drop(lq);
}

const td_queue *td_workloads_live_queue(const td_wlqueue *lq, const td_config *cfg,
                                        unsigned long long *gen)
{
    *gen = lq->gen;
    return lq->q && lq->cfg == cfg ? lq->q : NULL;
}

unsigned long long td_workloads_live_gen(const td_wlqueue *lq)
{
    return lq->gen;
}

static bool is_setup_kind(const char *kind)
{
    for (size_t k = 0; kind && k < sizeof setup_kinds / sizeof setup_kinds[0]; k++)
        if (strcmp(kind, setup_kinds[k]) == 0)
            return true;
    return kind && strcmp(kind, "Configuration") == 0;
}

/* wl equals old but for the finished-at annotation it adds (and the GPU
 * utilization a finish may report): a finish. */
static bool only_finished(const json_t *old, const json_t *wl)
{
    if (!annotation_ns(wl, TD_FINISHED_AT) || annotation_ns(old, TD_FINISHED_AT))
        return false;
    json_t *c = json_deep_copy(wl);
    json_t *ann = td_json_path(c, "metadata.annotations");
    json_object_del(ann, TD_FINISHED_AT);
    const json_t *util = json_object_get(td_json_path(old, "metadata.annotations"),
                                         TD_GPU_UTILIZATION);
    if (util)
        json_object_set(ann, TD_GPU_UTILIZATION, (json_t *)util);
    else
        json_object_del(ann, TD_GPU_UTILIZATION);
    bool same = c && json_equal(c, (json_t *)old);
    json_decref(c);
    return same;
}

/* The incremental commit's plan: arrivals of the workloads wls (next's
 * objects); false when the change needs a rebuild (*wake_all: of
 * everything pending). */
typedef struct {
    json_t **wls;
    size_t *qid;
    arrival *arr;
    size_t n, narr;
} plan;

static bool plan_commit(const td_config *cur, const td_config *next, json_t *const *objs,
                        size_t nobjs, size_t ndels, plan *p, bool *wake_all)
{
    *wake_all = ndels > 0 || nobjs == 0;
    for (size_t i = 0; !*wake_all && i < nobjs; i++) {
        const char *kind = td_json_str(objs[i], "kind");
        if (is_setup_kind(kind)) {
            *wake_all = true;
            break;
        }
        if (!kind || strcmp(kind, "Workload") != 0)
            continue;
        td_object_id id = td_object_identity(objs[i]);
        json_t *wl = td_config_get(next, "Workload", id.namespace_, id.name);
        json_t *old = td_config_get(cur, "Workload", id.namespace_, id.name);
        if (!wl || (old && !td_json_str(old, "status.tenantd.state"))) {
            *wake_all = true;
            break;
        }
        if (old && json_equal(old, wl))
            continue;
        if (old && !only_finished(old, wl)) {
            *wake_all = true; /* a pending workload changed: decided again */
            break;
        }
        p->wls[p->n] = wl;
        p->qid[p->n] = TD_QUEUE_NONE;
        if (!old)
            p->arr[p->narr++] = (arrival){annotation_ns(wl, TD_SUBMITTED_AT), false, p->n};
        if (annotation_ns(wl, TD_FINISHED_AT))
            p->arr[p->narr++] = (arrival){annotation_ns(wl, TD_FINISHED_AT), true, p->n};
        p->n++;
    }
    return !*wake_all;
}

/* The key "namespace/name" of a stored Workload, into buf. */
static const char *wl_key(const json_t *wl, char *buf, size_t n)
{
    const char *ns = td_json_str(wl, "metadata.namespace");
    const char *name = td_json_str(wl, "metadata.name");
    snprintf(buf, n, "%s/%s", ns && *ns ? ns : "default", name ? name : "");
    return buf;
}

/* The stored Workload of queue id in cfg. */
static json_t *wl_of(const td_queue *q, size_t id, const td_config *cfg)
{
    const char *key = td_queue_workload_key(q, id);
    const char *slash = strchr(key, '/');
    char ns[256];
    snprintf(ns, sizeof ns, "%.*s", slash ? (int)(slash - key) : 0, key);
    return td_config_get(cfg, "Workload", ns, slash ? slash + 1 : key);
}

/* Runs p's arrivals on the live queue and appends to out the records that
 * changed: the workloads that arrived or finished, those with new events,
 * and those parked again with another reason. */
static td_status commit_incremental(td_wlqueue *lq, const td_config *next, plan *p,
                                    uint64_t now_ns, json_t *out, td_err *err)
{
    td_queue *q = lq->q;
    const td_queue_event *ev;
    size_t ne0 = td_queue_events(q, &ev);
    td_queue_touched_clear(q);
    char key[600];
    for (size_t i = 0; i < p->n; i++)
        p->qid[i] = td_queue_workload_find(q, wl_key(p->wls[i], key, sizeof key));
    td_status st = run_arrivals(q, p->arr, p->narr, p->wls, p->qid, true, now_ns, err);
    bool *grows = NULL;
    if (st == TD_OK)
        st = new_event_marks(q, ne0, &grows, err);
    size_t nq = td_queue_workload_count(q);
    bool *seen = st == TD_OK ? calloc(nq ? nq : 1, sizeof *seen) : NULL;
    if (st == TD_OK && !seen)
        st = td_err_set(err, TD_ENOMEM, "out of memory");
    const size_t *touched;
    size_t nt = st == TD_OK ? td_queue_touched(q, &touched) : 0;
    size_t ne = td_queue_events(q, &ev);
    /* the candidates, in a fixed order: arrivals, events, touched */
    for (size_t k = 0; st == TD_OK && k < p->n + (ne - ne0) + nt; k++) {
        size_t id = k < p->n ? p->qid[k]
                    : k < p->n + (ne - ne0) ? ev[ne0 + k - p->n].workload
                                            : touched[k - p->n - (ne - ne0)];
        if (id >= nq || seen[id])
            continue;
        seen[id] = true;
        const json_t *wl = wl_of(q, id, next);
        if (wl)
            st = record_changed(q, id, wl, ne0, grows[id], out, err);
    }
    td_queue_touched_clear(q);
    free(grows);
    free(seen);
    return st;
}

td_status td_workloads_commit(td_wlqueue *lq, const td_config *cur, const td_config *next,
                              json_t *const *objs, size_t nobjs, size_t ndels, uint64_t now_ns,
                              json_t **changed, td_err *err)
{
    plan p = {0};
    p.wls = malloc((nobjs ? nobjs : 1) * sizeof *p.wls);
    p.qid = malloc((nobjs ? nobjs : 1) * sizeof *p.qid);
    p.arr = malloc((2 * nobjs + 1) * sizeof *p.arr);
    json_t *out = json_array();
    td_status st = p.wls && p.qid && p.arr && out ? TD_OK
                                                  : td_err_set(err, TD_ENOMEM, "out of memory");
    bool wake_all = false;
    bool incremental = st == TD_OK && plan_commit(cur, next, objs, nobjs, ndels, &p, &wake_all) &&
                       lq->q && lq->cfg == cur;
    if (st == TD_OK && incremental) {
        st = commit_incremental(lq, next, &p, now_ns, out, err);
        if (st != TD_OK)
            live_drop(lq); /* half applied: the next commit rebuilds */
    } else if (st == TD_OK) {
        json_decref(out);
        out = NULL;
        live_drop(lq);
        td_queue *q = NULL;
        st = td_workloads_full_pass(next, now_ns, wake_all, &out, &q, err);
        if (st == TD_OK)
            lq->q = q; /* published with the snapshot the commit makes */
    }
    free(p.wls);
    free(p.qid);
    free(p.arr);
    if (st != TD_OK) {
        json_decref(out);
        return st;
    }
    *changed = out;
    return TD_OK;
}

static bool in_namespace(const char *namespace_, const char *ns)
{
    return !namespace_ || !*namespace_ || strcmp(namespace_, ns ? ns : "default") == 0;
}

static json_t *finished_reason(const json_t *wl)
{
    uint64_t t = annotation_ns(wl, TD_FINISHED_AT);
    time_t secs = (time_t)(t / 1000000000ULL);
    struct tm tm;
    char ts[40] = "?", finished[96];
    if (gmtime_r(&secs, &tm))
        strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(finished, sizeof finished, "Finished at %s (reported by the job runner)", ts);
    return json_string(finished);
}

static td_status view_rebuilt(const td_config *cfg, const char *namespace_, json_t **out,
                              td_err *err);

/* The rows of wls[0, n) (each with its record) in namespace_ (NULL: all),
 * in the order a rebuild gives (queue time, then position in wls). */
static td_status view_rows(json_t *const *wls, size_t n, const char *namespace_, json_t **out,
                           td_err *err)
{
    order_ref *ord = malloc((n ? n : 1) * sizeof *ord);
    json_t *arr = ord ? json_array() : NULL;
    if (!arr) {
        free(ord);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        ord[i] = (order_ref){ns_value(td_json_path(wls[i], "status.tenantd.queuedAt")), i};
    if (n)
        qsort(ord, n, sizeof *ord, by_queue_time);
    for (size_t k = 0; k < n; k++) {
        const json_t *wl = wls[ord[k].wl], *rec = td_json_path(wl, "status.tenantd");
        const char *ns = td_json_str(wl, "metadata.namespace");
        if (!in_namespace(namespace_, ns))
            continue;
        const char *state = str_or_empty(rec, "state");
        bool fin = strcmp(state, "Finished") == 0, adm = strcmp(state, "Admitted") == 0;
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:i, s:s}", "namespace",
                              ns && *ns ? ns : "default", "name",
                              td_json_str(wl, "metadata.name"), "state", state, "clusterQueue",
                              str_or_empty(rec, "clusterQueue"), "flavors",
                              adm ? str_or_empty(rec, "flavors") : "", "reason",
                              fin ? finished_reason(wl) : json_string(str_or_empty(rec, "reason")),
                              "priority", (int)json_integer_value(json_object_get(rec, "priority")),
                              "placement", adm ? str_or_empty(rec, "placement") : "");
        if (!o || json_array_append_new(arr, o) != 0) {
            json_decref(arr);
            free(ord);
            return td_err_set(err, TD_ENOMEM, "out of memory");
        }
    }
    free(ord);
    *out = arr;
    return TD_OK;
}

td_status td_workloads_view(const td_config *cfg, const char *namespace_, json_t **out,
                            td_err *err)
{
    json_t *const *wls;
    size_t n = td_config_list(cfg, "Workload", NULL, &wls);
    for (size_t i = 0; i < n; i++)
        if (!td_json_str(wls[i], "status.tenantd.state"))
            return view_rebuilt(cfg, namespace_, out, err); /* no pass has run yet */
    /* every Workload has its record: the view is the records */
    return view_rows(wls, n, namespace_, out, err);
}

static int by_identity(const void *a, const void *b)
{
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    const char *xn = td_json_str(x, "metadata.namespace"), *yn = td_json_str(y, "metadata.namespace");
    int k = strcmp(xn ? xn : "", yn ? yn : "");
    return k ? k : strcmp(td_json_str(x, "metadata.name"), td_json_str(y, "metadata.name"));
}

td_status td_workloads_view_some(const td_config *cfg, const td_object_id *ids, size_t n,
                                 json_t **out, td_err *err)
{
    json_t **wls = malloc((n ? n : 1) * sizeof *wls);
    if (!wls)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *wl = td_config_get(cfg, "Workload", ids[i].namespace_, ids[i].name);
        if (wl && !td_json_str(wl, "status.tenantd.state")) {
            free(wls);
            return td_err_set(err, TD_ENOTFOUND, "Workload %s/%s has no record yet",
                              ids[i].namespace_, ids[i].name);
        }
        if (wl)
            wls[m++] = wl;
    }
    /* as the stored list orders them, once each */
    if (m)
        qsort(wls, m, sizeof *wls, by_identity);
    size_t u = 0;
    for (size_t i = 0; i < m; i++)
        if (!u || wls[u - 1] != wls[i])
            wls[u++] = wls[i];
    td_status st = view_rows(wls, u, NULL, out, err);
    free(wls);
    return st;
}

static td_status view_rebuilt(const td_config *cfg, const char *namespace_, json_t **out,
                              td_err *err)
{
    td_queue *q = NULL;
    json_t **by_id = NULL;
    size_t nq = 0;
    td_status st = td_workloads_replay(cfg, &q, &by_id, &nq, err);
    json_t *arr = st == TD_OK ? json_array() : NULL;
    for (size_t id = 0; arr && id < nq; id++) {
        const char *key = td_queue_workload_key(q, id);
        const char *slash = strchr(key, '/');
        size_t nslen = slash ? (size_t)(slash - key) : 0;
        if (namespace_ && *namespace_ &&
            (strlen(namespace_) != nslen || strncmp(key, namespace_, nslen) != 0))
            continue;
        size_t cq = td_queue_workload_cq(q, id);
        td_wl_state ws = td_queue_workload_state(q, id);
        char finished[96] = "";
        if (ws == TD_WL_FINISHED) {
            uint64_t t = annotation_ns(by_id[id], TD_FINISHED_AT);
            time_t secs = (time_t)(t / 1000000000ULL);
            struct tm tm;
            char ts[40] = "?";
            if (gmtime_r(&secs, &tm))
                strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
            snprintf(finished, sizeof finished, "Finished at %s (reported by the job runner)", ts);
        }
        json_array_append_new(
            arr, json_pack("{s:s%, s:s, s:s, s:s, s:s, s:s, s:i, s:s}", "namespace", key, nslen, "name",
                           slash ? slash + 1 : key, "state",
                           ws == TD_WL_ADMITTED ? "Admitted"
                           : ws == TD_WL_PENDING ? "Pending"
                                                 : "Finished",
                           "clusterQueue", cq == TD_QUEUE_NONE ? "" : td_queue_cq_name(q, cq),
                           "flavors", td_queue_workload_flavors(q, id), "reason",
                           *finished ? finished : td_queue_workload_reason(q, id), "priority",
                           (int)td_queue_workload_priority(q, id), "placement",
                           td_queue_workload_placement(q, id)));
    }
    if (st == TD_OK && !arr)
        st = td_err_set(err, TD_ENOMEM, "out of memory");
    free(by_id);
    td_queue_destroy(q);
    if (st == TD_OK)
        *out = arr;
    return st;
}
td_status td_workloads_keep_status(const td_config *cur, json_t *doc, td_err *err)
{
    const char *kind = td_json_str(doc, "kind");
    if (!json_is_object(doc) || !kind || strcmp(kind, "Workload") != 0)
        return TD_OK;
    td_object_id id = td_object_identity(doc);
    json_t *old = td_config_get(cur, "Workload", id.namespace_, id.name);
    /* An admitted (or finished) Workload runs, and is billed, as admitted:
     * Kueue refuses an update of its pod sets rather than let it hold more
     * than its quota reservation. */
    td_status vs = td_queue_workload_update_check(old, doc, err);
    if (vs != TD_OK)
        return vs;
    json_t *st = json_object_get(old, "status");
    json_object_del(doc, "status");
    if (st && json_object_set(doc, "status", st) != 0)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    return TD_OK;
}
