/* queueview.c - the batch queue view hung on a config snapshot (see
 * queueview.h). Everything a reader asks of it is computed here, once, by
 * its first reader: a scrape or a GET copies what is already there, and a
 * commit pays nothing for views nobody reads. */
#include "daemon/queueview.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/workloads.h"
#include "core/strbuf.h"

#define TRY_VIEW(x)                                                                            \
    do {                                                                                       \
        td_status s_ = (x);                                                                    \
        if (s_ != TD_OK)                                                                       \
            return s_;                                                                         \
    } while (0)

struct td_queueview {
    td_config_attachment hdr;
    const td_config *cfg; /* the snapshot it hangs on */
    /* the queue kept between commits while it is cfg's (generation gen);
     * once a commit moves it on, a replay of cfg's records (own) */
    td_wlqueue *live;
    unsigned long long gen;
    td_queue *own;
    const td_queue *q; /* live's or own; NULL until the first reader */
    json_t **wls;      /* by queue id of q, borrowed from the snapshot */
    size_t nwls;
    json_t *cq_status;
    char *metrics;
};

static void view_destroy(td_config_attachment *a)
{
    td_queueview *v = (td_queueview *)a;
    td_queue_destroy(v->own);
    free(v->wls);
    json_decref(v->cq_status);
    free(v->metrics);
    free(v);
}

/* Kueue's condition Active of ClusterQueue c: [{type, status, reason,
 * message}], False with the reason it admits nothing. NULL out of memory. */
static json_t *active_condition(const td_queue *q, size_t c)
{
    const char *why = td_queue_cq_inactive(q, c);
    return json_pack("[{s:s, s:s, s:s, s:s}]", "type", "Active", "status", why ? "False" : "True",
                     "reason", !why ? "Ready" : strstr(why, "ResourceFlavor") ? "FlavorNotFound"
                                                                           : "Inactive",
                     "message", why ? why : "Can admit new workloads");
}

static json_t *cq_status_of(const td_queue *q)
{
    size_t ncq = td_queue_cq_count(q), nq = td_queue_workload_count(q);
    size_t *pending = calloc(ncq ? ncq : 1, sizeof *pending);
    size_t *admitted = calloc(ncq ? ncq : 1, sizeof *admitted);
    json_t *o = pending && admitted ? json_object() : NULL;
    for (size_t i = 0; o && i < nq; i++) {
        size_t cq = td_queue_workload_cq(q, i);
        if (cq == TD_QUEUE_NONE)
            continue;
        td_wl_state ws = td_queue_workload_state(q, i);
        if (ws == TD_WL_PENDING)
            pending[cq]++;
        else if (ws == TD_WL_ADMITTED)
            admitted[cq]++;
    }
    for (size_t c = 0; o && c < ncq; c++) {
        json_t *usage = json_object();
        for (size_t r = 0; usage && r < td_queue_resource_count(q); r++) {
            const char *res = td_queue_resource_name(q, r);
            int64_t nominal = td_queue_cq_nominal_milli(q, c, res);
            int64_t used = td_queue_cq_usage_milli(q, c, res);
            if (nominal || used)
                json_object_set_new(
                    usage, res,
                    json_pack("{s:f, s:f, s:f}", "nominal", (double)nominal / 1000, "used",
                              (double)used / 1000, "borrowed",
                              (double)td_queue_cq_borrowed_milli(q, c, res) / 1000));
        }
        json_t *one = usage ? json_pack("{s:i, s:i, s:i, s:o, s:o}", "pendingWorkloads",
                                        (int)pending[c], "reservingWorkloads", (int)admitted[c],
                                        "admittedWorkloads", (int)admitted[c], "usage", usage,
                                        "conditions", active_condition(q, c))
                            : NULL;
        if (!one || json_object_set_new(o, td_queue_cq_name(q, c), one) < 0) {
            json_decref(o);
            o = NULL;
        }
    }
    free(pending);
    free(admitted);
    return o;
}

/* Preemptions of the recorded history by ClusterQueue, level and mode:
 * {"CQ\x1fLEVEL\x1fMODE": n} in first-seen order. NULL out of memory. */
static json_t *preemptions_of(const td_queue *q)
{
    json_t *o = json_object();
    const td_queue_event *ev;
    size_t ne = td_queue_events(q, &ev);
    for (size_t i = 0; o && i < ne; i++) {
        if (ev[i].type != TD_QEV_PREEMPTED && ev[i].type != TD_QEV_WOULD_PREEMPT)
            continue;
        char key[256];
        snprintf(key, sizeof key, "%s\x1f%s\x1f%s",
                 ev[i].cluster_queue < td_queue_cq_count(q)
                     ? td_queue_cq_name(q, ev[i].cluster_queue)
                     : "",
                 ev[i].level, ev[i].type == TD_QEV_WOULD_PREEMPT ? "shadow" : "enforce");
        json_int_t n = json_integer_value(json_object_get(o, key));
        if (json_object_set_new(o, key, json_integer(n + 1)) < 0) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

static void appendf(td_strbuf *b, char *line, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, n, fmt, ap);
    va_end(ap);
    td_strbuf_append(b, line);
}

/* s as a label value of the text format (\\, \" and \n escaped), cut to
 * fit out: ClusterQueue names are DNS names, so this never changes one
 * today; it keeps a scrape parseable if that ever stops being true. */
static const char *label_esc(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (; *s && n + 3 < cap; s++) {
        if (*s == '\\' || *s == '"' || *s == '\n')
            out[n++] = '\\';
        out[n++] = *s == '\n' ? 'n' : *s;
    }
    out[n] = '\0';
    return out;
}

static td_status metrics_of(const td_queue *q, const json_t *cq_status, char **out)
{
    char esc[600];
    json_t *counts = preemptions_of(q);
    /* a bound no real platform nears: 1,000 ClusterQueues are ~200 kB */
    td_strbuf b = TD_STRBUF_INIT(64u << 20);
    char line[768];
    td_strbuf_append(&b, "# HELP tenantd_queue_pending_workloads Workloads waiting in each "
                         "ClusterQueue.\n"
                         "# TYPE tenantd_queue_pending_workloads gauge\n");
    const char *name;
    json_t *st;
    json_object_foreach((json_t *)cq_status, name, st)
    {
        appendf(&b, line, sizeof line,
                "tenantd_queue_pending_workloads{cluster_queue=\"%s\"} %lld\n",
                label_esc(name, esc, sizeof esc),
                (long long)json_integer_value(json_object_get(st, "pendingWorkloads")));
    }
    td_strbuf_append(&b, "# HELP tenantd_queue_admitted_workloads Workloads holding quota in "
                         "each ClusterQueue.\n"
                         "# TYPE tenantd_queue_admitted_workloads gauge\n");
    json_object_foreach((json_t *)cq_status, name, st)
    {
        appendf(&b, line, sizeof line,
                "tenantd_queue_admitted_workloads{cluster_queue=\"%s\"} %lld\n",
                label_esc(name, esc, sizeof esc),
                (long long)json_integer_value(json_object_get(st, "admittedWorkloads")));
    }
    td_strbuf_append(&b, "# HELP tenantd_queue_preemptions_total Workloads preempted in the batch "
                         "queue, by their ClusterQueue and Kueue's level; mode=\"shadow\" counts "
                         "what a ClusterQueue in shadow would have preempted.\n"
                         "# TYPE tenantd_queue_preemptions_total counter\n");
    const char *key;
    json_t *v;
    json_object_foreach(counts, key, v)
    {
        char k[256];
        snprintf(k, sizeof k, "%s", key);
        char *lvl = strchr(k, '\x1f'), *mode = lvl ? strchr(lvl + 1, '\x1f') : NULL;
        if (!mode)
            continue;
        *lvl++ = '\0';
        *mode++ = '\0';
        appendf(&b, line, sizeof line,
                "tenantd_queue_preemptions_total{cluster_queue=\"%s\",level=\"%s\",mode=\"%s\"} "
                "%lld\n",
                label_esc(k, esc, sizeof esc), lvl, mode, (long long)json_integer_value(v));
    }
    bool ok = counts && !b.failed;
    json_decref(counts);
    if (!ok) {
        td_strbuf_fini(&b);
        return TD_ENOMEM;
    }
    *out = b.s; /* taken over: the headers made it non-NULL */
    return TD_OK;
}

/* cfg's Workloads by id of q: a new array, NULL out of memory. */
static json_t **by_queue_id(const td_config *cfg, const td_queue *q, size_t *nq)
{
    *nq = td_queue_workload_count(q);
    json_t **by_id = calloc(*nq ? *nq : 1, sizeof *by_id);
    json_t *const *wls;
    size_t n = td_config_list(cfg, "Workload", NULL, &wls);
    for (size_t i = 0; by_id && i < n; i++) {
        const char *ns = td_json_str(wls[i], "metadata.namespace");
        const char *name = td_json_str(wls[i], "metadata.name");
        char key[600];
        snprintf(key, sizeof key, "%s/%s", ns && *ns ? ns : "default", name ? name : "");
        size_t id = td_queue_workload_find(q, key);
        if (id < *nq)
            by_id[id] = wls[i];
    }
    return by_id;
}

/* Makes v ready for its readers: its queue (the live one while it is
 * v's snapshot's, else a replay of the records), the workloads by id, the
 * ClusterQueue status and the series, each computed once. */
static td_status view_ready(td_queueview *v, td_err *err)
{
    unsigned long long gen = 0;
    const td_queue *live = v->live ? td_workloads_live_queue(v->live, v->cfg, &gen) : NULL;
    if (!v->own && (!live || gen != v->gen)) {
        /* the kept queue moved on (or never was this snapshot's) */
        json_t **by_id = NULL;
        size_t nq = 0;
        td_queue *q = NULL;
        TRY_VIEW(td_workloads_replay(v->cfg, &q, &by_id, &nq, err));
        free(v->wls);
        v->own = q;
        v->q = q;
        v->wls = by_id;
        v->nwls = nq;
    } else if (!v->own && !v->q) {
        v->q = live;
    }
    if (!v->wls && !(v->wls = by_queue_id(v->cfg, v->q, &v->nwls)))
        return td_err_set(err, TD_ENOMEM, "out of memory");
    /* the ClusterQueues' status and the series wait for their first
     * reader: the metering tick reads neither */
    return TD_OK;
}

static td_queueview *view_new(const td_config *cfg, td_wlqueue *live)
{
    td_queueview *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->hdr.destroy = view_destroy;
    v->cfg = cfg;
    v->live = live;
    v->gen = live ? td_workloads_live_gen(live) : 0;
    return v;
}

td_status td_queueview_attach_live(const td_config *cfg, td_wlqueue *lq, td_err *err)
{
    td_queueview *v = view_new(cfg, lq);
    if (!v)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    td_config_attachment_offer(cfg, TD_CONFIG_ATTACH_QUEUE, &v->hdr);
    return TD_OK;
}

td_status td_queueview_attach(const td_config *cfg, td_queue *q, td_err *err)
{
    td_wlqueue *lq = td_workloads_live();
    td_workloads_adopt(lq, (td_config *)cfg, q);
    return td_queueview_attach_live(cfg, lq, err);
}

static td_config_attachment *view_build(const td_config *cfg)
{
    td_queueview *v = view_new(cfg, NULL);
    return v ? &v->hdr : NULL;
}

td_status td_queueview_get(const td_config *cfg, const td_queueview **out, td_err *err)
{
    td_err e;
    td_config_attachment *a = td_config_attachment_get(cfg, TD_CONFIG_ATTACH_QUEUE, view_build);
    if (!a)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    td_status st = view_ready((td_queueview *)a, &e);
    if (st != TD_OK)
        return td_err_set(err, st, "%s", e.msg);
    *out = (const td_queueview *)a;
    return TD_OK;
}

const td_queue *td_queueview_queue(const td_queueview *v)
{
    return v->q;
}

json_t *const *td_queueview_workloads(const td_queueview *v, size_t *n)
{
    *n = v->nwls;
    return v->wls;
}

const json_t *td_queueview_cq_status(const td_queueview *v)
{
    td_queueview *w = (td_queueview *)v; /* computed once, on the loop thread */
    if (!w->cq_status)
        w->cq_status = cq_status_of(w->q);
    return w->cq_status;
}

const char *td_queueview_metrics(const td_queueview *v)
{
    td_queueview *w = (td_queueview *)v;
    const json_t *cqs = td_queueview_cq_status(v);
    if (!w->metrics && (!cqs || metrics_of(w->q, cqs, &w->metrics) != TD_OK))
        return ""; /* out of memory: no series this time */
    return w->metrics;
}
