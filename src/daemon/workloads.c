/* workloads.c - the daemon's batch queue, persisted as Kueue persists it.
 * A scheduling pass (after a submit, finish, apply or delete) rebuilds the
 * queue from the records on the stored Workloads (status.admission: the
 * flavors and nodes each admitted workload holds; status.tenantd: state,
 * queue time, reason and the workload's event history), runs the scheduler
 * once, and hands back the Workloads whose status changed, for the caller
 * to write in one store transaction; the queue it leaves is what the
 * records now say, and readers get it from the snapshot (queueview.h). A
 * rebuild without a pass (a snapshot's first reader, when no pass handed
 * its queue over) never schedules, so a quota changed later never rewrites
 * the past. */
#include "daemon/workloads.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static size_t cq_index(const td_queue *q, const char *name)
{
    for (size_t c = 0; name && c < td_queue_cq_count(q); c++)
        if (strcmp(td_queue_cq_name(q, c), name) == 0)
            return c;
    return TD_QUEUE_NONE;
}

/* The queue of cfg rebuilt from the records (see the file header). With
 * pass set, a scheduling pass at now_ns follows; events from *ne0 on are
 * new (not yet recorded). qid maps stored index to queue id. */
static _Atomic unsigned long long rebuilds;

unsigned long long td_workloads_rebuilds(void)
{
    return atomic_load_explicit(&rebuilds, memory_order_relaxed);
}

static td_status rebuild(const td_config *cfg, bool pass, uint64_t now_ns, td_queue **out_q,
                         size_t **out_qid, size_t *out_nstored, size_t *ne0, td_err *err)
{
    atomic_fetch_add_explicit(&rebuilds, 1, memory_order_relaxed);
    td_queue *q = NULL;
    td_status st = td_queue_create(&q, err);
    for (size_t k = 0; st == TD_OK && k < sizeof setup_kinds / sizeof setup_kinds[0]; k++) {
        json_t *const *objs;
        size_t n = td_config_list(cfg, setup_kinds[k], NULL, &objs);
        for (size_t i = 0; st == TD_OK && i < n; i++)
            st = td_queue_add_object(q, objs[i], NULL, err);
    }
    if (st == TD_OK)
        st = td_queue_seal(q, err);
    json_t *const *wls;
    size_t n = td_config_list(cfg, "Workload", NULL, &wls);
    order_ref *ord = malloc((n ? n : 1) * sizeof *ord);
    size_t *qid = malloc((n ? n : 1) * sizeof *qid);
    bool *bad = calloc(n ? n : 1, sizeof *bad);
    hist_ref *hist = NULL;
    size_t nhist = 0;
    char (*why)[256] = calloc(n ? n : 1, sizeof *why);
    if (!ord || !qid || !bad || !why)
        st = td_err_set(err, TD_ENOMEM, "out of memory");
    for (size_t i = 0; st == TD_OK && i < n; i++) {
        const json_t *rec = td_json_path(wls[i], "status.tenantd");
        uint64_t t = ns_value(json_object_get(rec, "queuedAt"));
        ord[i] = (order_ref){t ? t : annotation_ns(wls[i], TD_SUBMITTED_AT), i};
        qid[i] = TD_QUEUE_NONE;
        nhist += json_array_size(json_object_get(rec, "history"));
    }
    if (st == TD_OK && n)
        qsort(ord, n, sizeof *ord, by_queue_time);
    /* recorded workloads in queue order, each restored from its record */
    for (size_t k = 0; st == TD_OK && k < n; k++) {
        size_t i = ord[k].wl;
        const json_t *rec = td_json_path(wls[i], "status.tenantd");
        const char *state = td_json_str(rec, "state");
        if (!state)
            continue;
        st = td_queue_submit(q, wls[i], NULL, ord[k].t, &qid[i], err);
        if (st != TD_OK)
            break;
        if (strcmp(state, "Admitted") == 0) {
            td_err e;
            td_status rs = td_queue_restore_admission(
                q, qid[i], td_json_path(wls[i], "status.admission"),
                ns_value(json_object_get(rec, "admittedAt")),
                json_is_true(json_object_get(rec, "borrowing")), &e);
            if (rs == TD_ENOMEM)
                st = td_err_set(err, rs, "%s", e.msg);
            else if (rs != TD_OK) {
                /* The objects changed under the record (its ClusterQueue or
                 * a node went away): it waits again, and a pass records it. */
                bad[i] = true;
                snprintf(why[i], sizeof why[i], "%s", e.msg);
                char r[400];
                snprintf(r, sizeof r, "admission record no longer valid: %.300s", e.msg);
                st = td_queue_restore_pending(q, qid[i], NULL, r, err);
            }
        } else if (strcmp(state, "Finished") == 0) {
            st = td_queue_withdraw(q, qid[i], 0, err);
        } else if (td_queue_workload_state(q, qid[i]) == TD_WL_PENDING) {
            st = td_queue_restore_pending(q, qid[i], td_json_str(rec, "evicted"),
                                          td_json_str(rec, "reason"), err);
        }
    }
    /* the recorded history, in time order */
    if (st == TD_OK && nhist && !(hist = malloc(nhist * sizeof *hist)))
        st = td_err_set(err, TD_ENOMEM, "out of memory");
    nhist = 0;
    for (size_t i = 0; st == TD_OK && i < n; i++) {
        size_t k;
        json_t *h;
        json_array_foreach(td_json_path(wls[i], "status.tenantd.history"), k, h)
            hist[nhist++] = (hist_ref){ns_value(json_object_get(h, "time")),
                                       ns_value(json_object_get(h, "seq")), i, h};
    }
    if (st == TD_OK && nhist)
        qsort(hist, nhist, sizeof *hist, by_time_seq);
    for (size_t k = 0; st == TD_OK && k < nhist; k++) {
        const json_t *h = hist[k].rec;
        td_queue_event ev;
        memset(&ev, 0, sizeof ev);
        if (event_type(td_json_str(h, "type"), &ev.type) != 0 || qid[hist[k].wl] == TD_QUEUE_NONE)
            continue;
        ev.t_ns = hist[k].t;
        ev.workload = qid[hist[k].wl];
        ev.cluster_queue = cq_index(q, td_json_str(h, "clusterQueue"));
        ev.by = td_queue_workload_find(q, td_json_str(h, "by"));
        ev.borrowing = json_is_true(json_object_get(h, "borrowing"));
        const char *s;
        if ((s = td_json_str(h, "level")))
            snprintf(ev.level, sizeof ev.level, "%s", s);
        if ((s = td_json_str(h, "flavors")))
            snprintf(ev.flavors, sizeof ev.flavors, "%s", s);
        if ((s = td_json_str(h, "placement")))
            snprintf(ev.placement, sizeof ev.placement, "%s", s);
        if ((s = td_json_str(h, "reason")))
            snprintf(ev.reason, sizeof ev.reason, "%s", s);
        st = td_queue_restore_event(q, &ev, err);
    }
    const td_queue_event *evs;
    *ne0 = td_queue_events(q, &evs);
    /* a record that no longer holds ends its admitted interval now */
    for (size_t i = 0; st == TD_OK && pass && i < n; i++) {
        if (!bad[i])
            continue;
        td_queue_event ev;
        memset(&ev, 0, sizeof ev);
        ev.t_ns = now_ns;
        ev.type = TD_QEV_PREEMPTED;
        ev.workload = qid[i];
        ev.cluster_queue = td_queue_workload_cq(q, qid[i]);
        ev.by = TD_QUEUE_NONE;
        const char *fl = td_json_str(wls[i], "status.tenantd.flavors");
        snprintf(ev.flavors, sizeof ev.flavors, "%s", fl ? fl : "");
        snprintf(ev.reason, sizeof ev.reason, "Evicted: admission record no longer valid: %s",
                 why[i]);
        st = td_queue_restore_event(q, &ev, err);
    }
    /* What no pass has recorded yet: submissions and the finishes the job
     * runner reported, in time order (at one instant finishes first), as
     * they arrived; a pass schedules after each instant, so workloads of
     * one manifest arrive one after the other, as they were stamped. */
    arrival *arr = st == TD_OK ? malloc((2 * n + 1) * sizeof *arr) : NULL;
    size_t narr = 0;
    if (st == TD_OK && !arr)
        st = td_err_set(err, TD_ENOMEM, "out of memory");
    for (size_t i = 0; st == TD_OK && i < n; i++) {
        const char *state = td_json_str(wls[i], "status.tenantd.state");
        if (!state)
            arr[narr++] = (arrival){annotation_ns(wls[i], TD_SUBMITTED_AT), false, i};
        uint64_t fin = annotation_ns(wls[i], TD_FINISHED_AT);
        if (fin && !(state && strcmp(state, "Finished") == 0))
            arr[narr++] = (arrival){fin, true, i};
    }
    if (st == TD_OK && narr)
        qsort(arr, narr, sizeof *arr, by_arrival);
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
    free(arr);
    if (st == TD_OK && pass)
        st = td_queue_schedule(q, now_ns, NULL);
    free(ord);
    free(bad);
    free(hist);
    free(why);
    if (st != TD_OK) {
        free(qid);
        td_queue_destroy(q);
        return st;
    }
    *out_q = q;
    *out_qid = qid;
    *out_nstored = n;
    return TD_OK;
}

td_status td_workloads_replay(const td_config *cfg, td_queue **out_q, json_t ***out_wls,
                              size_t *out_n, td_err *err)
{
    td_queue *q = NULL;
    size_t *qid = NULL, n = 0, ne0 = 0;
    td_status st = rebuild(cfg, false, 0, &q, &qid, &n, &ne0, err);
    if (st != TD_OK)
        return st;
    json_t *const *wls;
    td_config_list(cfg, "Workload", NULL, &wls);
    size_t nq = td_queue_workload_count(q);
    json_t **by_id = calloc(nq ? nq : 1, sizeof *by_id);
    if (!by_id) {
        free(qid);
        td_queue_destroy(q);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        if (qid[i] < nq)
            by_id[qid[i]] = wls[i];
    free(qid);
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

td_status td_workloads_pass(const td_config *cfg, uint64_t now_ns, json_t **changed,
                            td_queue **out_q, td_err *err)
{
    td_queue *q = NULL;
    size_t *qid = NULL, n = 0, ne0 = 0;
    td_status st = rebuild(cfg, true, now_ns, &q, &qid, &n, &ne0, err);
    if (st != TD_OK)
        return st;
    json_t *const *wls;
    td_config_list(cfg, "Workload", NULL, &wls);
    json_t *out = json_array();
    size_t nq = td_queue_workload_count(q);
    bool *grows = calloc(nq ? nq : 1, sizeof *grows);
    if (!out || !grows)
        st = td_err_set(err, TD_ENOMEM, "out of memory");
    const td_queue_event *ev;
    size_t ne = td_queue_events(q, &ev);
    for (size_t k = ne0; grows && k < ne; k++)
        if (ev[k].workload < nq)
            grows[ev[k].workload] = true;
    for (size_t i = 0; st == TD_OK && i < n; i++) {
        if (!grows[qid[i]] && record_current(q, qid[i], wls[i]))
            continue;
        json_t *status = make_status(q, qid[i], wls[i], ne0);
        if (!status) {
            st = td_err_set(err, TD_ENOMEM, "out of memory");
            break;
        }
        if (json_equal(status, json_object_get(wls[i], "status"))) {
            json_decref(status);
            continue;
        }
        json_t *copy = json_copy(wls[i]);
        if (!copy || json_object_set_new(copy, "status", status) != 0 ||
            json_array_append_new(out, copy) != 0) {
            if (!copy)
                json_decref(status);
            st = td_err_set(err, TD_ENOMEM, "out of memory");
        }
    }
    free(qid);
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

td_status td_workloads_view(const td_config *cfg, const char *namespace_, json_t **out,
                            td_err *err)
{
    json_t *const *wls;
    size_t n = td_config_list(cfg, "Workload", NULL, &wls);
    for (size_t i = 0; i < n; i++)
        if (!td_json_str(wls[i], "status.tenantd.state"))
            return view_rebuilt(cfg, namespace_, out, err); /* no pass has run yet */
    /* every Workload has its record: the view is the records, in the order
     * a rebuild gives (queue time, then key) */
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
