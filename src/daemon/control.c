/* control.c - routing and handlers of the admin listener. */
#include "daemon/control.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <time.h>

#include "daemon/dashboard.h"
#include "daemon/explain.h"
#include "daemon/leader.h"
#include "daemon/metering.h"
#include "daemon/queueview.h"
#include "daemon/workloads.h"
#include "admission/admit.h"
#include "queue/intervals.h"
#include "core/authz.h"
#include "core/jsonarena.h"
#include "core/jsonfast.h"
#include "io/ledger.h"
#include "core/manifest.h"
#include "admission/policy.h"

void td_control_init(td_control *c, td_config *cfg, td_store *store, td_gateway *gateway)
{
    atomic_init(&c->snapshot, cfg);
    pthread_mutex_init(&c->snapshot_lock, NULL);
    c->store = store;
    c->gateway = gateway;
    c->metering = NULL;
    c->leader = NULL;
    c->queue_term = -1;
    c->ready = 1;
    c->has_admin_token = 0;
    memset(c->admin_token_sha256, 0, sizeof c->admin_token_sha256);
    for (size_t r = 0; r < 12; r++)
        for (int d = 0; d < 3; d++)
            atomic_init(&c->admission[r][d], 0);
}

static td_status scan_ledger(void *ud, int64_t from_ns, int64_t until_ns,
                             int (*cb)(const td_ledger_rec *r, void *cb_ud), void *cb_ud,
                             td_err *err)
{
    return td_ledger_read(ud, from_ns, until_ns, cb, cb_ud, err);
}

/* Budgets the reload added count the ledger's spend of their period (what
 * seed_budgets does at start): the ledger is flushed first, so that the
 * requests finished before the reload are in it. On the admin thread; a
 * failure is logged, the budget then counts from the reload. */
/* The gateway's workers append their per-tenant sums to the ledger every
 * 250 ms (PX_METER_FLUSH_MS): a request that ended just before the reload
 * may still be in a worker's sums. Waiting two of those periods puts it in
 * the ledger before it is read; only a reload that added a budget waits. */
#define CATCH_UP_SETTLE_MS 500

static void catch_up_budgets(td_control *c)
{
    td_err e;
    size_t n = 0;
    if (!td_gateway_budgets_added(c->gateway))
        return;
    if (!c->ledger || !c->data_dir) {
        td_gateway_budget_catch_up(c->gateway, NULL, NULL, &n, &e);
        return;
    }
    struct timespec settle = {0, CATCH_UP_SETTLE_MS * 1000000L};
    nanosleep(&settle, NULL);
    if (td_ledger_flush(c->ledger, &e) != TD_OK)
        fprintf(stderr, "tenantd: budgets: ledger flush: %s\n", e.msg);
    if (td_gateway_budget_catch_up(c->gateway, scan_ledger, (void *)c->data_dir, &n, &e) != TD_OK)
        fprintf(stderr,
                "tenantd: budgets: %zu added budget(s) could not read the ledger (%s); they "
                "count from now\n",
                n, e.msg);
}

/* Makes next (taken over) the snapshot everyone sees and reloads the
 * gateway from it: the end of every commit. */
static void serve(td_control *c, td_config *next)
{
    pthread_mutex_lock(&c->snapshot_lock);
    td_config *old = atomic_exchange(&c->snapshot, next);
    pthread_mutex_unlock(&c->snapshot_lock);
    td_config_unref(old);
    /* Config validation already accepted every Tenant and Route, so a reload
     * fails only for lack of memory or slots; the store is the truth then,
     * and the next reload catches the gateway up. */
    td_err err;
    if (c->gateway && td_gateway_reload(c->gateway, next, &err) != TD_OK)
        fprintf(stderr, "tenantd: gateway reload failed: %s\n", err.msg);
    else if (c->gateway)
        catch_up_budgets(c);
}

/* Stores objs and dels as they are, with no pass, and serves next: a
 * replica that is not the scheduling leader (the leader schedules them
 * once it picks the commit up). Nothing to store: next is served. The
 * queue kept between commits is dropped: the leader writes the decisions
 * on these objects, and this replica's next pass (once it leads) rebuilds
 * from the records it wrote. */
static td_status commit_unscheduled(td_control *c, td_config *next, json_t *const *objs,
                                    size_t nobjs, const td_object_id *dels, size_t ndels,
                                    td_err *err)
{
    td_status st = nobjs || ndels ? td_store_write(c->store, objs, nobjs, dels, ndels, err) : TD_OK;
    if (st != TD_OK) {
        td_config_unref(next);
        return st;
    }
    td_workloads_abandon(td_workloads_live());
    serve(c, next);
    return TD_OK;
}

/* The leader's term on every Workload its pass decided on: who wrote
 * each decision, for explain and for a failover's audit. */
static void stamp_term(json_t *changed, int64_t term)
{
    size_t i;
    json_t *wl;
    json_array_foreach(changed, i, wl)
    {
        json_t *rec = td_json_path(wl, "status.tenantd");
        if (json_is_object(rec))
            json_object_set_new(rec, "schedulingTerm", json_integer((json_int_t)term));
    }
}

/* next with the statuses in changed (borrowed) set: *final, and in *all
 * objs followed by them, what the store writes (a new array). */
static td_status with_statuses(td_config *next, json_t *const *objs, size_t nobjs,
                               const json_t *changed, td_config **final, json_t ***all,
                               td_err *err)
{
    size_t nch = json_array_size(changed);
    td_config_builder *b = NULL;
    json_t **a = malloc((nobjs + nch + 1) * sizeof *a);
    td_status st = a ? td_config_builder_create(next, &b, err)
                     : td_err_set(err, TD_ENOMEM, "out of memory");
    for (size_t i = 0; st == TD_OK && i < nch; i++)
        st = td_config_builder_add(b, json_array_get(changed, i), NULL, err);
    if (st == TD_OK)
        st = td_config_builder_finish(b, final, err);
    td_config_builder_destroy(b);
    if (st != TD_OK) {
        free(a);
        return st;
    }
    if (nobjs)
        memcpy(a, objs, nobjs * sizeof *a);
    for (size_t i = 0; i < nch; i++)
        a[nobjs + i] = json_array_get(changed, i);
    *all = a;
    return TD_OK;
}

/* The pass over next on the queue kept between commits (workloads.h) and
 * its commit, fenced by term when term > 0. A write that fails (a refused
 * term among the reasons) drops the kept queue, which the pass already
 * moved on: the next pass rebuilds it from the records. */
static td_status commit_scheduled(td_control *c, td_config *next, json_t *const *objs,
                                  size_t nobjs, const td_object_id *dels, size_t ndels,
                                  int64_t term, td_err *err)
{
    /* its decisions (the Workloads whose status changed) go into the same
     * transaction as the change */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t now_ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    json_t *changed = NULL;
    json_t **all = NULL;
    td_wlqueue *lq = td_workloads_live();
    td_config *cur = td_control_snapshot(c);
    td_status st = td_workloads_commit(lq, cur, next, objs, nobjs, ndels, now_ns, &changed, err);
    td_config_unref(cur);
    size_t nch = st == TD_OK ? json_array_size(changed) : 0;
    if (nch && term > 0)
        stamp_term(changed, term);
    if (nch) {
        td_config *final = NULL;
        st = with_statuses(next, objs, nobjs, changed, &final, &all, err);
        if (st == TD_OK) {
            td_config_unref(next);
            next = final;
        }
    }
    /* one transaction: the change and the records it decided. A pass that
     * changed nothing over nothing new writes nothing (no commit, no
     * generation for the other replicas to pick up). */
    if (st == TD_OK && term > 0 && (nobjs || nch || ndels))
        st = td_store_write_fenced(c->store, nch ? all : objs, nobjs, nch, dels, ndels, term, err);
    else if (st == TD_OK && (nobjs || nch || ndels))
        st = td_store_write(c->store, nch ? all : objs, nobjs + nch, dels, ndels, err);
    free(all);
    json_decref(changed);
    if (st != TD_OK) {
        td_workloads_abandon(lq);
        td_config_unref(next);
        return st;
    }
    /* The kept queue is what next's records say: readers get it through
     * the snapshot's view, and none rebuilds it. */
    td_workloads_publish(lq, next);
    td_err qerr;
    if (td_queueview_attach_live(next, lq, &qerr) != TD_OK)
        fprintf(stderr, "tenantd: batch queue view: %s\n", qerr.msg);
    serve(c, next);
    return TD_OK;
}

td_status td_control_commit(td_control *c, td_config *next, json_t *const *objs, size_t nobjs,
                            const td_object_id *dels, size_t ndels, td_err *err)
{
    int64_t term = td_leader_term(c->leader);
    if (term != c->queue_term) {
        /* Leadership gained, lost, or held again under a new term: another
         * leader may have written decisions meanwhile, so the kept queue is
         * not trusted; this commit's pass rebuilds it from the records. */
        td_workloads_abandon(td_workloads_live());
        c->queue_term = term;
    }
    if (term == 0)
        return commit_unscheduled(c, next, objs, nobjs, dels, ndels, err);
    if (term < 0)
        return commit_scheduled(c, next, objs, nobjs, dels, ndels, 0, err);
    td_config_ref(next); /* kept for a refused write */
    td_status st = commit_scheduled(c, next, objs, nobjs, dels, ndels, term, err);
    if (st != TD_EFORBIDDEN && st != TD_EAGAIN) {
        td_config_unref(next);
        return st;
    }
    /* Refused: the submit or apply is stored all the same, as on a replica
     * that does not lead; the pass's decisions are made again by whoever
     * leads, after it picks this commit up (commit_scheduled dropped the
     * kept queue: it held the refused decisions). */
    fprintf(stderr, "tenantd: leader: %s; storing the objects without the pass's decisions\n",
            err ? err->msg : "the scheduling pass's write was refused");
    if (st == TD_EFORBIDDEN)
        td_leader_refused(c->leader, term);
    return commit_unscheduled(c, next, objs, nobjs, dels, ndels, err);
}

td_status td_control_commit_pass(td_control *c, td_queue *q, json_t *changed, td_err *err)
{
    if (td_leader_term(c->leader) >= 0) {
        /* a scheduling leader (or a follower): the fenced commit decides */
        td_queue_destroy(q);
        return td_control_commit(c, td_control_snapshot(c), NULL, 0, NULL, 0, err);
    }
    td_config *cur = td_control_snapshot(c), *final = NULL;
    json_t **all = NULL;
    td_status st = with_statuses(cur, NULL, 0, changed, &final, &all, err);
    if (st == TD_OK)
        st = td_store_write(c->store, all, json_array_size(changed), NULL, 0, err);
    free(all);
    td_config_unref(cur);
    if (st != TD_OK) {
        td_queue_destroy(q);
        td_config_unref(final);
        return st;
    }
    /* q is what final's records say: kept, not rebuilt by the next commit */
    td_wlqueue *lq = td_workloads_live();
    td_workloads_adopt(lq, final, q);
    td_err qerr;
    if (td_queueview_attach_live(final, lq, &qerr) != TD_OK)
        fprintf(stderr, "tenantd: batch queue view: %s\n", qerr.msg);
    serve(c, final);
    return TD_OK;
}

void td_control_adopt(td_control *c, td_config *next)
{
    /* another replica's commit (or a reload): its records are not what the
     * kept queue says; the next pass rebuilds it from them */
    td_workloads_abandon(td_workloads_live());
    serve(c, next);
}

void td_control_set_admin_token(td_control *c, const char *token, size_t len)
{
    SHA256((const unsigned char *)token, len, c->admin_token_sha256);
    c->has_admin_token = 1;
}

void td_control_fini(td_control *c)
{
    td_config_unref(atomic_exchange(&c->snapshot, NULL));
    pthread_mutex_destroy(&c->snapshot_lock);
    td_workloads_live_release(td_workloads_live());
}

td_config *td_control_snapshot(td_control *c)
{
    pthread_mutex_lock(&c->snapshot_lock);
    td_config *cfg = td_config_ref(atomic_load(&c->snapshot));
    pthread_mutex_unlock(&c->snapshot_lock);
    return cfg;
}

static void reply_text(td_http_response *resp, int status, const char *text)
{
    resp->status = status;
    resp->content_type = "text/plain; charset=utf-8";
    resp->body = strdup(text);
    resp->body_len = resp->body ? strlen(resp->body) : 0;
}

/* Takes over j. The control API answers people (indented); the webhook
 * answers kube-apiserver, thousands of times a second (compact). */
static void reply_json_flags(td_http_response *resp, int status, json_t *j, size_t flags)
{
    resp->status = status;
    resp->content_type = "application/json";
    resp->body = j ? json_dumps(j, flags | JSON_PRESERVE_ORDER) : NULL;
    if (!resp->body) {
        reply_text(resp, 500, "out of memory\n");
        return;
    }
    resp->body_len = strlen(resp->body);
    json_decref(j);
}

static void reply_json(td_http_response *resp, int status, json_t *j)
{
    reply_json_flags(resp, status, j, JSON_INDENT(2));
}

static void reply_error(td_http_response *resp, int status, const char *msg)
{
    reply_json(resp, status, json_pack("{s:s}", "error", msg));
}

/* Rules counted in tenantd_admission_decisions_total; "other" catches
 * anything else (Defaults, Internal). */
static const char *const counted_rules[12] = {
    "",        "LimitRange", "CostLabels", "PodSecurity", "NodePool",   "Sandbox",
    "Storage", "ResourceQuota", "Priority", "BadRequest", "Forbidden", "other"};

static size_t rule_index(const char *rule)
{
    for (size_t i = 0; rule && i < 11; i++)
        if (strcmp(counted_rules[i], rule) == 0)
            return i;
    return 11;
}

/* Counts one review's decision, and each shadow rule that would have
 * denied it, as the response the API server gets says them. */
static void count_review(td_control *c, const td_review_summary *sum)
{
    if (sum->allowed)
        atomic_fetch_add(&c->admission[0][0], 1);
    else
        atomic_fetch_add(&c->admission[rule_index(sum->rule)][1], 1);
    for (size_t i = 0; i < sum->nshadow; i++)
        atomic_fetch_add(&c->admission[rule_index(sum->shadow[i])][2], 1);
}

/* Appends one line to the malloc'd *text of *len bytes. 0, or -1. */
static int append_text(char **text, size_t *len, const char *line)
{
    size_t n = strlen(line);
    char *t = realloc(*text, *len + n + 1);
    if (!t)
        return -1;
    memcpy(t + *len, line, n + 1);
    *text = t;
    *len += n;
    return 0;
}

/* Group commits (two submits or more in one commit) and the submits they
 * held, since start: loop thread only. */
static unsigned long long submit_groups, submits_grouped;

/* Appends the batch queue's series to text: those of the snapshot's queue
 * view (made by the commit that published it), and how many times a queue
 * was rebuilt from records, which a scrape never does. */
static int append_queue_metrics(td_control *c, char **text, size_t *len)
{
    td_config *cur = td_control_snapshot(c);
    const td_queueview *v = NULL;
    /* a queue that cannot take the snapshot's objects has no series */
    int rc = td_queueview_get(cur, &v, NULL) == TD_OK
                 ? append_text(text, len, td_queueview_metrics(v))
                 : 0;
    td_config_unref(cur);
    char line[768];
    snprintf(line, sizeof line,
             "# HELP tenantd_queue_rebuilds_total Times the batch queue was rebuilt from the "
             "stored Workload records (once per commit; never per read).\n"
             "# TYPE tenantd_queue_rebuilds_total counter\n"
             "tenantd_queue_rebuilds_total %llu\n",
             td_workloads_rebuilds());
    if (rc >= 0)
        rc = append_text(text, len, line);
    snprintf(line, sizeof line,
             "# HELP tenantd_submit_groups_total Commits that stored two submits or more "
             "(requests that arrived together: one transaction, one pass).\n"
             "# TYPE tenantd_submit_groups_total counter\n"
             "tenantd_submit_groups_total %llu\n"
             "# HELP tenantd_submits_grouped_total Submit requests committed in such a group.\n"
             "# TYPE tenantd_submits_grouped_total counter\n"
             "tenantd_submits_grouped_total %llu\n",
             submit_groups, submits_grouped);
    if (rc >= 0)
        rc = append_text(text, len, line);
    /* the scheduling leader (leader.h): loop thread, as /metrics is */
    int64_t term = td_leader_term(c->leader);
    snprintf(line, sizeof line,
             "# HELP tenantd_scheduling_leader 1 while this replica runs the batch queue's "
             "passes (always 1 without --database).\n"
             "# TYPE tenantd_scheduling_leader gauge\n"
             "tenantd_scheduling_leader %d\n"
             "# HELP tenantd_scheduling_term The scheduling lease's term this replica holds "
             "(0: none).\n"
             "# TYPE tenantd_scheduling_term gauge\n"
             "tenantd_scheduling_term %lld\n",
             term != 0, (long long)(term > 0 ? term : 0));
    return rc < 0 ? rc : append_text(text, len, line);
}

/* Appends the admission counters to text (malloc'd; replaced). */
static int append_admission_metrics(td_control *c, char **text, size_t *len)
{
    static const char *const decision[3] = {"allowed", "denied", "denied"};
    static const char *const mode[3] = {"enforce", "enforce", "shadow"};
    int rc = append_text(text, len,
                         "# HELP tenantd_admission_decisions_total Admission reviews decided, by "
                         "the rule that denied (\"\" when allowed); mode=\"shadow\" counts rules "
                         "in shadow that would have denied.\n"
                         "# TYPE tenantd_admission_decisions_total counter\n");
    for (size_t r = 0; rc == 0 && r < 12; r++)
        for (int d = 0; rc == 0 && d < 3; d++) {
            unsigned long long v = atomic_load(&c->admission[r][d]);
            if (!v || (r == 0) != (d == 0))
                continue;
            char line[256];
            snprintf(line, sizeof line,
                     "tenantd_admission_decisions_total{rule=\"%s\",decision=\"%s\",mode=\"%s\"} "
                     "%llu\n",
                     counted_rules[r], decision[d], mode[d], v);
            rc = append_text(text, len, line);
        }
    return rc;
}

/* The review's JSON (the body, the pod's copies, the patch) lives in this
 * thread's request arena (jsonarena.h) and is released at once; the
 * answer is written straight to malloc'd bytes the response takes over. */
static void handle_review(td_control *c, const td_http_request *req, td_http_response *resp,
                          td_review_mode mode)
{
    bool arena = td_json_arena_begin();
    json_error_t je;
    /* What the parse leaves out (request's members but uid, kind,
     * namespace, operation, subResource and object; managedFields) is read
     * by no decision, and a patch diffs the pod with its mutated copy:
     * absent from both, they can be in no patch (webhook_compare.py checks
     * the answers) */
    json_t *in = td_json_loadb_review(req->body, req->body_len, &je);
    char *body = NULL;
    size_t len = 0;
    int code = 0;
    td_review_summary sum = {0};
    td_status st;
    if (!in) {
        char msg[300];
        snprintf(msg, sizeof msg, "request body is not JSON: line %d: %s", je.line, je.text);
        st = td_admission_review_reject_body(msg, &body, &len);
    } else {
        td_config *cfg = td_control_snapshot(c);
        st = td_admission_review_body(cfg, in, mode, NULL, &body, &len, &code, &sum);
        td_config_unref(cfg);
    }
    td_json_arena_forget(in); /* the parse's tree; the answer holds no node of it */
    if (arena)
        td_json_arena_end();
    if (st != TD_OK) {
        reply_text(resp, 500, "out of memory\n");
        return;
    }
    count_review(c, &sum);
    resp->status = 200;
    resp->content_type = "application/json";
    resp->body = body;
    resp->body_len = len;
}

/* Decodes %XX and '+' in place. */
static void url_decode(char *s)
{
    char *o = s;
    for (char *p = s; *p; p++) {
        if (*p == '%' && p[1] && p[2]) {
            char hex[3] = {p[1], p[2], 0};
            char *end;
            long v = strtol(hex, &end, 16);
            if (*end == '\0') {
                *o++ = (char)v;
                p += 2;
                continue;
            }
        }
        *o++ = *p == '+' ? ' ' : *p;
    }
    *o = '\0';
}

/* Copies the value of query parameter key into out (decoded); 0 if absent. */
static int query_param(const char *query, const char *key, char *out, size_t n)
{
    size_t klen = strlen(key);
    const char *p = query;
    while (p && *p) {
        const char *amp = strchr(p, '&');
        size_t len = amp ? (size_t)(amp - p) : strlen(p);
        if (len > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
            size_t vlen = len - klen - 1;
            if (vlen >= n)
                vlen = n - 1;
            memcpy(out, p + klen + 1, vlen);
            out[vlen] = '\0';
            url_decode(out);
            return 1;
        }
        p = amp ? amp + 1 : NULL;
    }
    return 0;
}

int td_control_query_param(const char *query, const char *key, char *out, size_t n)
{
    return query_param(query, key, out, n);
}

/* Marks a submitted Workload with its submission time, which orders the
 * queue: the server's clock (the caller has dropped any stamp the client
 * wrote and put back the stored one of a resubmission, which so keeps its
 * place). */
static td_status stamp_workload(json_t *wl, td_err *err)
{
    if (!json_is_object(wl) || !td_json_str(wl, "kind") ||
        strcmp(td_json_str(wl, "kind"), "Workload") != 0)
        return td_err_set(err, TD_EINVAL, "submit takes Workload objects (kueue.x-k8s.io); "
                                          "use apply for other kinds");
    json_t *meta = json_object_get(wl, "metadata");
    if (!json_is_object(meta))
        return TD_OK; /* validation names it */
    json_t *ann = json_object_get(meta, "annotations");
    if (!ann) {
        ann = json_object();
        json_object_set_new(meta, "annotations", ann);
    }
    if (!json_is_object(ann) || json_object_get(ann, TD_SUBMITTED_AT))
        return TD_OK;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char buf[32];
    snprintf(buf, sizeof buf, "%llu",
             (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec);
    json_object_set_new(ann, TD_SUBMITTED_AT, json_string(buf));
    return TD_OK;
}

/* A tenant's view of the queue: its own workloads only, and a preemption
 * reason that names another tenant's workload names it no more. */
/* Rewrites in place every string under v that names a hidden workload. */
static void redact_tree(json_t *v, char **hidden, size_t n)
{
    if (json_is_string(v)) {
        char *r = td_redact_keys(json_string_value(v), (const char *const *)hidden, n);
        if (r && strcmp(r, json_string_value(v)) != 0)
            json_string_set(v, r);
        free(r);
    } else if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x)
            redact_tree(x, hidden, n);
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x)
            redact_tree(x, hidden, n);
    }
}

static json_t *tenant_view(const td_config *cfg, const td_principal *p, json_t *view)
{
    /* every stored workload the tenant may not see (all of them, not only
     * the view's: a ?namespace= view still has reasons that name workloads
     * of other namespaces) */
    size_t nh = 0;
    char **hidden = td_hidden_workloads(cfg, p, &nh);
    json_t *mine = hidden ? json_array() : NULL;
    size_t i;
    json_t *w;
    json_array_foreach(view, i, w)
    {
        if (!mine || !td_authz_namespace_ok(p, td_json_str(w, "namespace")))
            continue;
        const char *reason = td_json_str(w, "reason");
        char *r = reason && nh ? td_redact_keys(reason, (const char *const *)hidden, nh) : NULL;
        if (r && strcmp(r, reason) != 0) {
            json_t *copy = json_copy(w);
            if (copy)
                json_object_set_new(copy, "reason", json_string(r));
            json_array_append_new(mine, copy);
        } else {
            json_array_append(mine, w);
        }
        free(r);
    }
    td_hidden_free(hidden, nh);
    json_decref(view);
    return mine;
}

static void handle_workloads(td_control *c, const td_http_request *req, td_http_response *resp,
                             const td_principal *p)
{
    char ns[256] = "";
    query_param(req->query, "namespace", ns, sizeof ns);
    td_err err;
    int code = td_authz_check(p, TD_AUTHZ_TENANT, *ns ? ns : NULL, &err);
    if (code) {
        reply_error(resp, code, err.msg);
        return;
    }
    td_config *cur = td_control_snapshot(c);
    json_t *view = NULL;
    td_status st = td_workloads_view(cur, ns, &view, &err);
    if (st == TD_OK && p->kind != TD_PRINCIPAL_ADMIN && !(view = tenant_view(cur, p, view)))
        st = td_err_set(&err, TD_ENOMEM, "out of memory");
    td_config_unref(cur);
    if (st != TD_OK)
        reply_error(resp, st == TD_ENOMEM ? 500 : 400, err.msg);
    else
        reply_json(resp, 200, json_pack("{s:o}", "items", view));
}

/* The endpoints whose body is a YAML manifest: parsed before the handler
 * runs, on a prepare thread (td_control_prepare), within these bounds.
 * A tenant's key reaches /v1/workloads: nothing it writes is worth
 * expanding, so aliases are refused there; an admin's configs may use
 * anchors, within td_manifest's alias budget. */
static const struct {
    const char *path;
    td_authz_rule rule;
    size_t max_body;
    unsigned yaml_flags;
} yaml_bodies[] = {
    {"/v1/apply", TD_AUTHZ_ADMIN, TD_CONTROL_APPLY_MAX_BODY, 0},
    {"/v1/workloads", TD_AUTHZ_TENANT, TD_CONTROL_SUBMIT_MAX_BODY, TD_MANIFEST_NO_ALIASES},
};

static int yaml_body_index(const td_http_request *req)
{
    if (strcmp(req->method, "POST") != 0)
        return -1;
    for (size_t i = 0; i < sizeof yaml_bodies / sizeof yaml_bodies[0]; i++)
        if (strcmp(req->path, yaml_bodies[i].path) == 0)
            return (int)i;
    return -1;
}

/* A YAML body made into a manifest, or why not. */
typedef struct {
    int parsed; /* 0: not tried (the credential was refused first) */
    int code;   /* HTTP status of a refusal (400, 413, 500), 0 when m is set */
    td_manifest *m;
    td_err err;
} parsed_body;

static void parse_body(const td_http_request *req, int idx, parsed_body *pb)
{
    const char *fname = td_http_header(req, "X-Tenantd-Filename");
    char name[256];
    snprintf(name, sizeof name, "%s", fname && *fname ? fname : "request");
    pb->parsed = 1;
    if (req->body_len > yaml_bodies[idx].max_body) {
        pb->code = 413;
        td_err_set(&pb->err, TD_EINVAL, "%s: the body is %zu bytes; %s takes at most %zu", name,
                   req->body_len, yaml_bodies[idx].path, yaml_bodies[idx].max_body);
        return;
    }
    td_manifest_opts o = {yaml_bodies[idx].yaml_flags};
    td_status st = td_manifest_parse_opts(name, req->body, req->body_len, &o, &pb->m, &pb->err);
    if (st != TD_OK)
        pb->code = st == TD_ENOMEM ? 500 : 400;
}

bool td_control_wants_prepare(const td_http_request *req, void *user)
{
    (void)user;
    return yaml_body_index(req) >= 0;
}

void *td_control_prepare(const td_http_request *req, void *user)
{
    td_control *c = user;
    int idx = yaml_body_index(req);
    parsed_body *pb = calloc(1, sizeof *pb);
    if (!pb || idx < 0)
        return pb;
    /* Nobody without the endpoint's credential has a body parsed: the
     * handler refuses it (401, 403) */
    td_config *cfg = td_control_snapshot(c);
    td_principal p;
    td_authz_identify(cfg, c->has_admin_token ? c->admin_token_sha256 : NULL,
                      td_http_header(req, "Authorization"), &p);
    td_err err;
    int refused = td_authz_check(&p, yaml_bodies[idx].rule, NULL, &err) != 0;
    td_config_unref(cfg);
    if (!refused)
        parse_body(req, idx, pb);
    return pb;
}

void td_control_release(void *prepared, void *user)
{
    (void)user;
    parsed_body *pb = prepared;
    if (pb)
        td_manifest_destroy(pb->m);
    free(pb);
}

/* The request's manifest, parsed on a prepare thread or here: here only
 * without one (td_control_handle called directly), or when the credential
 * came to be accepted between the two (an apply in between). NULL after
 * replying why not (no object: 400). The caller destroys it. */
static td_manifest *take_manifest(const td_http_request *req, td_http_response *resp, int submit)
{
    parsed_body local = {0}, *pb = req->prepared;
    if (!pb || !pb->parsed) {
        int idx = yaml_body_index(req);
        pb = &local;
        parse_body(req, idx >= 0 ? idx : submit, pb); /* yaml_bodies[1] is /v1/workloads */
    }
    td_manifest *m = pb->m;
    pb->m = NULL; /* the caller's now */
    if (!m) {
        reply_error(resp, pb->code ? pb->code : 500, pb->err.msg);
        return NULL;
    }
    if (td_manifest_count(m) == 0) {
        td_manifest_destroy(m);
        reply_error(resp, 400, "nothing to apply: the body holds no object");
        return NULL;
    }
    return m;
}

/* The queue's records on stored Workloads stay the daemon's: 0, or -1
 * after replying (a submit into a foreign namespace is refused as such,
 * before anything of the Workload stored there is told; 422 names its pod
 * sets). */
static int keep_statuses(const td_config *prev, const td_manifest *m, const td_principal *p,
                         int submit, td_http_response *resp)
{
    td_err err;
    for (size_t i = 0; i < td_manifest_count(m); i++) {
        td_status ks = td_workloads_keep_status(prev, td_manifest_doc(m, i), &err);
        if (ks == TD_OK)
            continue;
        td_object_id id = td_object_identity(td_manifest_doc(m, i));
        td_err aerr;
        int code = submit ? td_authz_check(p, TD_AUTHZ_TENANT, id.namespace_ ? id.namespace_ : "",
                                           &aerr)
                          : 0;
        reply_error(resp, code ? code : ks == TD_EINVAL ? 422 : 500, code ? aerr.msg : err.msg);
        return -1;
    }
    return 0;
}

/* tenantd's own annotations on a submitted Workload are the server's, as
 * kube-apiserver ignores a client's creationTimestamp: a client's
 * submitted-at would jump the queue, its finished-at end (and bill) a run.
 * A resubmission (a client's retry) keeps its place and, once finished,
 * stays finished: never a second run. */
static void server_annotations(const td_config *prev, json_t *doc)
{
    td_object_id pid = td_object_identity(doc);
    json_t *old = td_config_get(prev, "Workload", pid.namespace_, pid.name);
    json_t *oann = td_json_path(old, "metadata.annotations");
    json_t *meta = json_object_get(doc, "metadata");
    json_t *cann = json_object_get(meta, "annotations");
    json_object_del(cann, TD_SUBMITTED_AT);
    json_object_del(cann, TD_FINISHED_AT);
    if (!old || !json_is_object(meta) || !json_is_object(oann))
        return;
    json_t *ann = json_object_get(meta, "annotations");
    if (!ann) {
        ann = json_object();
        json_object_set_new(meta, "annotations", ann);
    }
    const char *keep[] = {TD_SUBMITTED_AT, TD_FINISHED_AT};
    for (size_t k = 0; json_is_object(ann) && k < 2; k++)
        if (json_object_get(oann, keep[k]))
            json_object_set(ann, keep[k], json_object_get(oann, keep[k]));
}

/* Each submitted Workload stamped and checked: all or nothing, one outside
 * the caller's namespaces, or whose priority class its namespace may not
 * use, refuses the whole submission. 0, or -1 after replying. */
static int check_submission(const td_config *prev, td_manifest *m, const td_principal *p,
                            td_http_response *resp)
{
    td_err err;
    for (size_t i = 0; i < td_manifest_count(m); i++) {
        json_t *doc = td_manifest_doc(m, i);
        server_annotations(prev, doc);
        if (stamp_workload(doc, &err) != TD_OK) {
            reply_error(resp, 400, err.msg);
            return -1;
        }
        td_object_id id = td_object_identity(doc);
        int code = td_authz_check(p, TD_AUTHZ_TENANT, id.namespace_ ? id.namespace_ : "", &err);
        /* its priority is its class's, a class its namespace may use */
        td_err perr;
        td_status ps = code ? TD_OK : td_priority_workload(prev, doc, &perr);
        if (ps != TD_OK) {
            code = ps == TD_EFORBIDDEN ? 403 : 400;
            snprintf(err.msg, sizeof err.msg, "workloads.kueue.x-k8s.io \"%.60s\" is %s: %s",
                     id.name ? id.name : "", ps == TD_EFORBIDDEN ? "forbidden" : "invalid",
                     perr.msg);
        }
        if (code) {
            reply_error(resp, code, err.msg);
            return -1;
        }
    }
    return 0;
}

/* An apply naming metadata.resourceVersion commits only over that version
 * of the object (store.h); the field is the server's, never stored. */
static td_status take_version(td_control *c, json_t *doc, td_err *err)
{
    json_t *meta = json_object_get(doc, "metadata");
    json_t *rv = json_object_get(meta, "resourceVersion");
    if (!rv)
        return TD_OK;
    td_object_id id = td_object_identity(doc);
    if (!json_is_string(rv))
        return td_err_set(err, TD_EINVAL, "%s %s%s%s: metadata.resourceVersion must be a string",
                          id.kind, id.namespace_ ? id.namespace_ : "",
                          id.namespace_ && *id.namespace_ ? "/" : "", id.name);
    td_status st = *json_string_value(rv) && c->store
                       ? td_store_expect(c->store, id, json_string_value(rv), err)
                       : TD_OK;
    json_object_del(meta, "resourceVersion");
    return st;
}

/* obj as served, with its metadata.resourceVersion (a new reference; obj,
 * shared with the snapshot, is not changed). */
static json_t *with_version(json_t *obj)
{
    char rv[TD_STORE_RV_LEN];
    json_t *meta = json_object_get(obj, "metadata");
    json_t *copy = json_is_object(meta) ? json_copy(obj) : NULL;
    json_t *mcopy = copy ? json_copy(meta) : NULL;
    if (!mcopy) {
        json_decref(copy);
        return json_incref(obj);
    }
    td_store_resource_version(obj, rv);
    json_object_set_new(mcopy, "resourceVersion", json_string(rv));
    json_object_set_new(copy, "metadata", mcopy);
    return copy;
}

/* m's objects over the served ones, as one commit (whose scheduling pass
 * must be able to take them too); result gets one row per object with what
 * happened to it. */
static td_status commit_manifest(td_control *c, td_manifest *m, json_t *result, td_err *err)
{
    td_config *cur = td_control_snapshot(c);
    td_config_builder *b = NULL;
    td_config *next = NULL;
    json_t **objs = calloc(td_manifest_count(m), sizeof *objs);
    td_status st = objs && result ? td_config_builder_create(cur, &b, err) : TD_ENOMEM;
    for (size_t i = 0; st == TD_OK && i < td_manifest_count(m); i++) {
        json_t *doc = td_manifest_doc(m, i);
        st = take_version(c, doc, err);
        if (st == TD_OK)
            st = td_config_builder_add(b, doc, m, err);
        if (st != TD_OK)
            break;
        td_object_id id = td_object_identity(doc);
        json_t *old = td_config_get(cur, id.kind, id.namespace_, id.name);
        const char *action = !old ? "created" : json_equal(old, doc) ? "unchanged" : "configured";
        objs[i] = doc;
        json_array_append_new(result, json_pack("{s:s, s:s, s:s, s:s}", "kind", id.kind,
                                                "namespace", id.namespace_, "name", id.name,
                                                "action", action));
    }
    if (st == TD_OK)
        st = td_config_builder_finish(b, &next, err);
    if (st == TD_OK)
        st = td_control_commit(c, next, objs, td_manifest_count(m), NULL, 0, err);
    if (c->store)
        td_store_expect_clear(c->store);
    free(objs);
    td_config_builder_destroy(b);
    td_config_unref(cur);
    return st;
}

/* The answer to a submit: the submitted Workloads as the pass decided
 * them, as they are served now (a tenant's answer names no workload of
 * another tenant either). */
static void reply_submitted(td_control *c, const td_manifest *m, const td_principal *p,
                            td_http_response *resp)
{
    td_err err;
    json_t *view = NULL;
    td_config *now = td_control_snapshot(c);
    /* the submitted ones' records alone: not a walk of every stored one */
    size_t nm = td_manifest_count(m);
    td_object_id *ids = malloc((nm ? nm : 1) * sizeof *ids);
    for (size_t k = 0; ids && k < nm; k++)
        ids[k] = td_object_identity(td_manifest_doc(m, k));
    if ((!ids || td_workloads_view_some(now, ids, nm, &view, &err) != TD_OK) &&
        td_workloads_view(now, NULL, &view, &err) != TD_OK)
        view = json_array();
    free(ids);
    if (view && p->kind == TD_PRINCIPAL_TENANT)
        view = tenant_view(now, p, view);
    td_config_unref(now);
    /* the submitted ones, by "namespace/name": one lookup per row, not
     * one scan of the manifest (thousands of Workloads a submit) */
    json_t *mine = json_array(), *submitted = json_object();
    char key[600];
    for (size_t k = 0; submitted && k < td_manifest_count(m); k++) {
        td_object_id id = td_object_identity(td_manifest_doc(m, k));
        snprintf(key, sizeof key, "%s/%s", id.namespace_, id.name);
        json_object_set_new(submitted, key, json_true());
    }
    size_t i;
    json_t *w;
    json_array_foreach(view, i, w)
    {
        snprintf(key, sizeof key, "%s/%s", td_json_str(w, "namespace"), td_json_str(w, "name"));
        if (json_object_get(submitted, key))
            json_array_append(mine, w);
    }
    json_decref(submitted);
    json_decref(view);
    reply_json(resp, 200, json_pack("{s:o}", "workloads", mine));
}

static void handle_apply_or_submit(td_control *c, const td_http_request *req,
                                   td_http_response *resp, const td_principal *p, int submit)
{
    td_manifest *m = take_manifest(req, resp, submit);
    if (!m)
        return;
    td_config *prev = td_control_snapshot(c);
    int refused = keep_statuses(prev, m, p, submit, resp) != 0 ||
                  (submit && check_submission(prev, m, p, resp) != 0);
    td_config_unref(prev);
    if (refused) {
        td_manifest_destroy(m);
        return;
    }
    td_err err;
    json_t *result = json_array();
    td_status st = commit_manifest(c, m, result, &err);
    if (st == TD_OK && submit)
        reply_submitted(c, m, p, resp);
    else if (st == TD_OK)
        reply_json(resp, 200, json_pack("{s:O}", "applied", result));
    else if (st == TD_ENOMEM)
        reply_error(resp, 500, "out of memory");
    else
        reply_error(resp, st == TD_EIO ? 503 : st == TD_EEXIST ? 409 : 400, err.msg);
    json_decref(result);
    td_manifest_destroy(m);
}

/* ---- group commit: a turn's submits in one transaction ---------------- */

typedef struct {
    const td_http_request *req;
    td_http_response *resp;
    td_principal p; /* borrows from the group's snapshot */
    td_manifest *m; /* NULL: answered already (refused) */
} group_submit;

static bool is_submit(const td_http_request *req)
{
    return strcmp(req->method, "POST") == 0 && strcmp(req->path, "/v1/workloads") == 0;
}

/* The checks of a submit alone (credential, body, the daemon's records,
 * namespaces, priority) against prev: g->m set, or g answered. */
static void group_check(td_control *c, const td_config *prev, group_submit *g)
{
    td_authz_identify(prev, c->has_admin_token ? c->admin_token_sha256 : NULL,
                      td_http_header(g->req, "Authorization"), &g->p);
    td_err err;
    int code = td_authz_check(&g->p, TD_AUTHZ_TENANT, NULL, &err);
    if (code) {
        reply_error(g->resp, code, err.msg);
        return;
    }
    td_manifest *m = take_manifest(g->req, g->resp, 1);
    if (!m)
        return;
    if (keep_statuses(prev, m, &g->p, 1, g->resp) != 0 ||
        check_submission(prev, m, &g->p, g->resp) != 0) {
        td_manifest_destroy(m);
        return;
    }
    g->m = m;
}

/* The answer to a submit whose commit gave st. */
static void reply_commit(td_control *c, td_status st, const group_submit *g, const td_err *err)
{
    if (st == TD_OK)
        reply_submitted(c, g->m, &g->p, g->resp);
    else if (st == TD_ENOMEM)
        reply_error(g->resp, 500, "out of memory");
    else
        reply_error(g->resp, st == TD_EIO ? 503 : 400, err->msg);
}

/* Every checked submit of g[0, k) added over base, each whole or not at
 * all: one whose object the builder refuses is answered and left out, the
 * others stay. *next (the caller's) holds the rest; *objs (malloc'd, *nobjs)
 * their documents, borrowed from the manifests. */
static td_status group_build(td_control *c, td_config *base, group_submit *g, size_t k,
                             td_config **next, json_t ***objs, size_t *nobjs, td_err *err)
{
    size_t total = 0;
    for (size_t s = 0; s < k; s++)
        total += g[s].m ? td_manifest_count(g[s].m) : 0;
    json_t **o = malloc((total ? total : 1) * sizeof *o);
    td_config *good = td_config_ref(base);
    td_config_builder *b = NULL;
    td_status st = o ? td_config_builder_create(good, &b, err)
                     : td_err_set(err, TD_ENOMEM, "out of memory");
    size_t n = 0;
    for (size_t s = 0; st == TD_OK && s < k; s++) {
        if (!g[s].m)
            continue;
        td_err e;
        td_status as = TD_OK;
        for (size_t i = 0; as == TD_OK && i < td_manifest_count(g[s].m); i++)
            as = td_config_builder_add(b, td_manifest_doc(g[s].m, i), g[s].m, &e);
        /* a snapshot per submit: the point a refused one goes back to
         * (over a snapshot, a builder of Workloads copies a few chunks) */
        td_config *snap = NULL;
        if (as == TD_OK)
            as = td_config_builder_finish(b, &snap, &e);
        if (as != TD_OK) {
            reply_commit(c, as, &g[s], &e);
            td_manifest_destroy(g[s].m);
            g[s].m = NULL;
            td_config_builder_destroy(b);
            b = NULL;
            st = td_config_builder_create(good, &b, err);
            continue;
        }
        td_config_unref(good);
        good = snap;
        for (size_t i = 0; i < td_manifest_count(g[s].m); i++)
            o[n++] = td_manifest_doc(g[s].m, i);
    }
    td_config_builder_destroy(b);
    if (st != TD_OK) {
        td_config_unref(good);
        free(o);
        return st;
    }
    *next = good;
    *objs = o;
    *nobjs = n;
    return TD_OK;
}

/* Submits g[0, k) (k > 1, concurrent: from different connections) checked
 * one by one, then committed together: one store transaction and one
 * scheduling pass, each answered only after it (the caller writes the
 * answers when the turn's batch returns). A refused one is answered alone
 * and the others go on; if the pass refuses the group as a whole (TD_EINVAL:
 * one workload the queue cannot take), each is committed alone instead, so
 * that only that one fails. */
static void submit_group(td_control *c, group_submit *g, size_t k)
{
    td_config *prev = td_control_snapshot(c); /* the principals borrow from it */
    for (size_t s = 0; s < k; s++)
        group_check(c, prev, &g[s]);
    td_err err;
    td_config *next = NULL;
    json_t **objs = NULL;
    size_t nobjs = 0;
    td_status st = group_build(c, prev, g, k, &next, &objs, &nobjs, &err);
    size_t live = 0;
    for (size_t s = 0; s < k; s++)
        live += g[s].m != NULL;
    if (st == TD_OK && nobjs)
        st = td_control_commit(c, next, objs, nobjs, NULL, 0, &err);
    else
        td_config_unref(next);
    free(objs);
    if (st == TD_OK && live > 1) {
        submit_groups++;
        submits_grouped += live;
    }
    for (size_t s = 0; s < k; s++) {
        if (!g[s].m)
            continue;
        if (st == TD_EINVAL && live > 1) {
            json_t *result = json_array();
            td_status one = commit_manifest(c, g[s].m, result, &err);
            json_decref(result);
            reply_commit(c, one, &g[s], &err);
        } else {
            reply_commit(c, st, &g[s], &err);
        }
        td_manifest_destroy(g[s].m);
    }
    td_config_unref(prev);
}

void td_control_handle_batch(const td_http_request *const *reqs, td_http_response *resps,
                             size_t n, void *user)
{
    td_control *c = user;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && is_submit(reqs[j]))
            j++;
        group_submit *g = j - i > 1 ? calloc(j - i, sizeof *g) : NULL;
        if (!g) { /* one request (or no memory to group them): alone */
            td_control_handle(reqs[i], &resps[i], user);
            i++;
            continue;
        }
        for (size_t s = 0; s < j - i; s++) {
            g[s].req = reqs[i + s];
            g[s].resp = &resps[i + s];
        }
        submit_group(c, g, j - i);
        free(g);
        i = j;
    }
}

static void handle_objects(td_control *c, const td_http_request *req, td_http_response *resp,
                           const td_principal *p)
{
    char kind_in[128] = "", ns[256] = "", name[256] = "";
    query_param(req->query, "kind", kind_in, sizeof kind_in);
    query_param(req->query, "namespace", ns, sizeof ns);
    query_param(req->query, "name", name, sizeof name);
    const char *kind = td_kind_canonical(kind_in);
    if (!kind) {
        char msg[300];
        snprintf(msg, sizeof msg, "unknown kind \"%s\"; give ?kind= one of tenantd's kinds",
                 kind_in);
        reply_error(resp, 400, msg);
        return;
    }
    td_err err;
    if (strcmp(req->method, "GET") == 0) {
        int code = td_authz_check_read(p, kind, *ns ? ns : NULL, name, &err);
        if (code) {
            reply_error(resp, code, err.msg);
            return;
        }
    }
    td_config *cur = td_control_snapshot(c);
    if (strcmp(req->method, "GET") == 0) {
        json_t *items = json_array();
        json_t *const *list;
        size_t n = td_config_list(cur, kind, *ns ? ns : NULL, &list);
        int tenant = p->kind != TD_PRINCIPAL_ADMIN;
        size_t nhidden = 0;
        char **hidden = tenant && strcmp(kind, "Workload") == 0
                            ? td_hidden_workloads(cur, p, &nhidden)
                            : NULL;
        /* A ClusterQueue comes with its status, as `kubectl get` shows it. */
        const td_queueview *qv = NULL;
        if (strcmp(kind, "ClusterQueue") == 0 && td_queueview_get(cur, &qv, NULL) != TD_OK)
            qv = NULL;
        const json_t *cq_status = qv ? td_queueview_cq_status(qv) : NULL;
        for (size_t i = 0; i < n; i++) {
            if (*name && strcmp(td_json_str(list[i], "metadata.name"), name) != 0)
                continue;
            json_t *status = json_object_get(cq_status, td_json_str(list[i], "metadata.name"));
            if (!tenant && status) {
                json_t *copy = json_copy(list[i]);
                if (copy)
                    json_object_set(copy, "status", status);
                json_array_append_new(items, copy);
            } else if (!tenant) {
                json_array_append(items, list[i]);
            } else if (!td_kind_namespaced(kind)) {
                /* only its own Tenant reaches here, keys redacted */
                if (strcmp(td_json_str(list[i], "metadata.name"), p->tenant_name) == 0)
                    json_array_append_new(items, td_authz_redact_tenant(list[i]));
            } else if (td_authz_namespace_ok(p, td_json_str(list[i], "metadata.namespace"))) {
                /* a Workload's recorded status names its preemptors:
                 * another tenant's only as "another tenant's workload" */
                json_t *copy = hidden ? json_deep_copy(list[i]) : NULL;
                if (copy) {
                    redact_tree(json_object_get(copy, "status"), hidden, nhidden);
                    json_array_append_new(items, copy);
                } else {
                    json_array_append(items, list[i]);
                }
            }
        }
        /* each with its version, as kube-apiserver serves them */
        for (size_t k = 0; k < json_array_size(items); k++)
            json_array_set_new(items, k, with_version(json_array_get(items, k)));
        if (*name && json_array_size(items) == 0) {
            char msg[700];
            snprintf(msg, sizeof msg, "%s %s%s%s not found", kind, ns, *ns ? "/" : "", name);
            json_decref(items);
            reply_error(resp, 404, msg);
        } else {
            reply_json(resp, 200, json_pack("{s:s, s:o}", "kind", kind, "items", items));
        }
        td_hidden_free(hidden, nhidden);
        td_config_unref(cur);
        return;
    }
    /* DELETE */
    td_config_builder *b = NULL;
    td_config *next = NULL;
    td_status st = td_config_builder_create(cur, &b, &err);
    if (st == TD_OK && !*name)
        st = td_err_set(&err, TD_EINVAL, "give ?name= of the object to delete");
    if (st == TD_OK)
        st = td_config_builder_delete(b, kind, ns, name, &err);
    if (st == TD_OK)
        st = td_config_builder_finish(b, &next, &err);
    if (st == TD_OK) {
        /* the commit's pass is the check: TD_EINVAL from it is the batch
         * queue refusing what is left (a store failure is TD_EIO) */
        td_object_id id = {kind, td_kind_namespaced(kind) ? ns : "", name};
        st = td_control_commit(c, next, NULL, 0, &id, 1, &err);
        next = NULL;
        if (st == TD_EINVAL)
            td_err_prefix(&err, st, "deleting %s %s would break the batch queue", kind, name);
    }
    if (st == TD_OK) {
        reply_json(resp, 200, json_pack("{s:{s:s, s:s, s:s}}", "deleted", "kind", kind,
                                        "namespace", td_kind_namespaced(kind) ? ns : "", "name",
                                        name));
    } else {
        reply_error(resp, st == TD_ENOTFOUND ? 404 : st == TD_EIO ? 503 : 400, err.msg);
    }
    td_config_unref(next);
    td_config_builder_destroy(b);
    td_config_unref(cur);
}

static void handle_metrics(td_control *c, td_http_response *resp)
{
    char *text = NULL;
    size_t len = 0;
    if ((c->gateway && td_gateway_metrics_text(c->gateway, &text, &len) != TD_OK) ||
        append_admission_metrics(c, &text, &len) < 0 || append_queue_metrics(c, &text, &len) < 0) {
        free(text);
        reply_text(resp, 500, "out of memory\n");
        return;
    }
    if (c->metering && td_metering_metrics(c->metering, &text, &len) != TD_OK) {
        free(text);
        reply_text(resp, 500, "out of memory\n");
        return;
    }
    resp->status = 200;
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
    resp->body = text;
    resp->body_len = len;
}

/* ---- routing ------------------------------------------------------------ */

static void h_healthz(td_control *c, const td_http_request *req, td_http_response *resp,
                      const td_principal *p)
{
    (void)c, (void)req, (void)p;
    reply_text(resp, 200, "ok\n");
}

static void h_readyz(td_control *c, const td_http_request *req, td_http_response *resp,
                     const td_principal *p)
{
    (void)req, (void)p;
    reply_text(resp, c->ready ? 200 : 503, c->ready ? "ok\n" : "not ready\n");
}

static void h_validate(td_control *c, const td_http_request *req, td_http_response *resp,
                       const td_principal *p)
{
    (void)p;
    handle_review(c, req, resp, TD_REVIEW_VALIDATE);
}

static void h_mutate(td_control *c, const td_http_request *req, td_http_response *resp,
                     const td_principal *p)
{
    (void)p;
    handle_review(c, req, resp, TD_REVIEW_MUTATE);
}

static void h_admit(td_control *c, const td_http_request *req, td_http_response *resp,
                    const td_principal *p)
{
    (void)p;
    handle_review(c, req, resp, TD_REVIEW_MUTATE_AND_VALIDATE);
}

static void h_metrics(td_control *c, const td_http_request *req, td_http_response *resp,
                      const td_principal *p)
{
    (void)req, (void)p;
    handle_metrics(c, resp);
}

static void h_apply(td_control *c, const td_http_request *req, td_http_response *resp,
                    const td_principal *p)
{
    handle_apply_or_submit(c, req, resp, p, 0);
}

static void h_submit(td_control *c, const td_http_request *req, td_http_response *resp,
                     const td_principal *p)
{
    handle_apply_or_submit(c, req, resp, p, 1);
}

/* GET /v1/explain/request?tenant=T: the tenant's limits as enforced now
 * and its latest refusals. A tenant's key explains its own tenant only
 * (the tenant defaults to the caller's). */
static void h_explain_request(td_control *c, const td_http_request *req, td_http_response *resp,
                              const td_principal *p)
{
    char tenant[256] = "";
    query_param(req->query, "tenant", tenant, sizeof tenant);
    if (!*tenant && p->kind == TD_PRINCIPAL_TENANT)
        snprintf(tenant, sizeof tenant, "%s", p->tenant_name);
    if (!*tenant) {
        reply_error(resp, 400, "tenant=NAME is required");
        return;
    }
    if (p->kind == TD_PRINCIPAL_TENANT && strcmp(tenant, p->tenant_name) != 0) {
        reply_error(resp, 403, "forbidden: a tenant's key explains its own tenant only");
        return;
    }
    if (!c->gateway) {
        reply_error(resp, 404, "this tenantd runs no gateway (start it with --listen)");
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    json_t *out = NULL;
    td_err err;
    td_status st = td_explain_request(c->gateway, tenant,
                                      (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec,
                                      &out, &err);
    if (st != TD_OK) {
        reply_error(resp, st == TD_ENOTFOUND ? 404 : 500, err.msg);
        return;
    }
    if (p->kind == TD_PRINCIPAL_TENANT) { /* the fleet's addresses are the operator's */
        json_object_del(out, "routes");
        json_object_del(out, "endpointState");
    }
    reply_json(resp, 200, out);
}

/* src/daemon/ui.html as it was at build time (generated by CMake). */
extern const unsigned char td_embedded_ui[];
extern const size_t td_embedded_ui_len;

/* The page holds no data: everything it shows comes from /v1/dashboard,
 * which needs a credential, so the page itself is served to anyone. */
static void h_ui(td_control *c, const td_http_request *req, td_http_response *resp,
                 const td_principal *p)
{
    (void)c, (void)req, (void)p;
    resp->status = 200;
    resp->content_type = "text/html; charset=utf-8";
    resp->extra_headers = "Cache-Control: no-store\r\n"
                          "Content-Security-Policy: default-src 'self'; script-src 'unsafe-inline'; "
                          "style-src 'unsafe-inline'\r\n";
    resp->body = malloc(td_embedded_ui_len);
    if (!resp->body) {
        reply_text(resp, 500, "out of memory\n");
        return;
    }
    memcpy(resp->body, td_embedded_ui, td_embedded_ui_len);
    resp->body_len = td_embedded_ui_len;
}

/* POST /v1/workloads/finish?namespace=NS&name=NAME: the job runner reports
 * the admitted Workload complete. The stored Workload is marked (annotation
 * TD_FINISHED_AT) in one store transaction, not deleted, so the history the
 * queue replays survives restarts; its quota and nodes are free from then.
 * 404 unknown, 409 not admitted, 200 (again: "unchanged") once finished. */
static void h_finish(td_control *c, const td_http_request *req, td_http_response *resp,
                     const td_principal *p)
{
    char ns[256] = "", name[256] = "", util[64] = "";
    query_param(req->query, "namespace", ns, sizeof ns);
    query_param(req->query, "name", name, sizeof name);
    query_param(req->query, "gpuUtilization", util, sizeof util);
    if (!*ns)
        snprintf(ns, sizeof ns, "default");
    if (*util) {
        char *end;
        double u = strtod(util, &end);
        if (end == util || *end || !(u >= 0 && u <= 1)) {
            reply_error(resp, 400, "gpuUtilization must be a fraction from 0 to 1 (the share of "
                                   "the workload's GPUs busy over its run)");
            return;
        }
    }
    td_err aerr;
    int code = td_authz_check(p, TD_AUTHZ_TENANT, ns, &aerr);
    if (code) {
        reply_error(resp, code, aerr.msg);
        return;
    }
    td_config *cur = td_control_snapshot(c);
    json_t *wl = td_config_get(cur, "Workload", ns, name);
    char msg[800];
    if (!*name || !wl) {
        snprintf(msg, sizeof msg, "Workload %s/%s not found", ns, name);
        reply_error(resp, 404, msg);
        td_config_unref(cur);
        return;
    }
    json_t *done = json_object_get(td_json_path(wl, "metadata.annotations"), TD_FINISHED_AT);
    if (done) {
        reply_json(resp, 200, json_pack("{s:{s:s,s:s,s:s}}", "finished", "namespace", ns, "name",
                                        name, "action", "unchanged"));
        td_config_unref(cur);
        return;
    }
    td_err err;
    json_t *view = NULL, *mine = NULL;
    /* its row alone (its record), not the view of every stored workload */
    td_object_id wid = {"Workload", ns, name};
    td_status st = td_workloads_view_some(cur, &wid, 1, &view, &err);
    if (st == TD_ENOTFOUND)
        st = td_workloads_view(cur, ns, &view, &err);
    size_t i;
    json_t *w;
    json_array_foreach(view, i, w) if (strcmp(td_json_str(w, "name"), name) == 0) mine = w;
    const char *state = mine ? td_json_str(mine, "state") : "";
    if (st == TD_OK && strcmp(state, "Admitted") != 0) {
        snprintf(msg, sizeof msg, "Workload %s/%s is %s, not Admitted: only a running workload "
                 "can finish (%s)", ns, name, state, mine ? td_json_str(mine, "reason") : "");
        json_decref(view);
        reply_error(resp, 409, msg);
        td_config_unref(cur);
        return;
    }
    json_decref(view);
    view = NULL;
    json_t *copy = json_deep_copy(wl);
    json_t *ann = td_json_path(copy, "metadata.annotations");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char buf[32];
    snprintf(buf, sizeof buf, "%llu",
             (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec);
    td_config_builder *b = NULL;
    td_config *next = NULL;
    if (st == TD_OK && (!copy || !json_is_object(ann) ||
                        json_object_set_new(ann, TD_FINISHED_AT, json_string(buf)) != 0 ||
                        (*util && json_object_set_new(ann, TD_GPU_UTILIZATION,
                                                      json_string(util)) != 0)))
        st = td_err_set(&err, TD_ENOMEM, "out of memory");
    if (st == TD_OK)
        st = td_config_builder_create(cur, &b, &err);
    if (st == TD_OK)
        st = td_config_builder_add(b, copy, NULL, &err);
    if (st == TD_OK)
        st = td_config_builder_finish(b, &next, &err);
    if (st == TD_OK) {
        st = td_control_commit(c, next, &copy, 1, NULL, 0, &err);
        next = NULL;
    }
    if (st == TD_OK)
        reply_json(resp, 200, json_pack("{s:{s:s,s:s,s:s,s:s}}", "finished", "namespace", ns,
                                        "name", name, "action", "finished", "at", buf));
    else
        reply_error(resp, st == TD_ENOMEM ? 500 : st == TD_EIO ? 503 : 400, err.msg);
    json_decref(view);
    json_decref(copy);
    td_config_unref(next);
    td_config_builder_destroy(b);
    td_config_unref(cur);
}

/* GET /v1/explain/workload?namespace=NS&name=NAME: why a workload is where
 * it is; a tenant asks about its own namespaces and sees others' workloads
 * only as counts. */
static void h_explain_workload(td_control *c, const td_http_request *req,
                               td_http_response *resp, const td_principal *p)
{
    char ns[256] = "", name[256] = "";
    query_param(req->query, "namespace", ns, sizeof ns);
    query_param(req->query, "name", name, sizeof name);
    if (!*ns)
        snprintf(ns, sizeof ns, "default");
    td_err err;
    int code = *name ? td_authz_check(p, TD_AUTHZ_TENANT, ns, &err) : 0;
    if (!*name) {
        reply_error(resp, 400, "name=NAME is required (and namespace=NS)");
        return;
    }
    if (code) {
        reply_error(resp, code, err.msg);
        return;
    }
    td_config *cur = td_control_snapshot(c);
    json_t *out = NULL;
    td_status st = td_explain_workload(cur, ns, name, p, &out, &err);
    td_config_unref(cur);
    if (st != TD_OK)
        reply_error(resp, st == TD_ENOTFOUND ? 404 : st == TD_ENOMEM ? 500 : 400, err.msg);
    else
        reply_json(resp, 200, out);
}

typedef void (*endpoint_fn)(td_control *, const td_http_request *, td_http_response *,
                            const td_principal *);

/* Every endpoint of the admin listener and the rule it declares. The
 * dispatcher applies the rule before the handler runs (401 without a
 * credential, 403 for a tenant on an admin endpoint); a TD_AUTHZ_TENANT
 * handler then calls td_authz_check / td_authz_namespace_ok for each
 * namespace it reads or writes, so a tenant never touches another's. */
static const struct {
    const char *method, *path;
    td_authz_rule rule;
    endpoint_fn fn;
} endpoints[] = {
    {"GET", "/healthz", TD_AUTHZ_OPEN, h_healthz},
    {"GET", "/readyz", TD_AUTHZ_OPEN, h_readyz},
    /* kube-apiserver calls these; protect them with --tls-client-ca */
    {"POST", "/validate", TD_AUTHZ_OPEN, h_validate},
    {"POST", "/mutate", TD_AUTHZ_OPEN, h_mutate},
    {"POST", "/admit", TD_AUTHZ_OPEN, h_admit},
    {"GET", "/metrics", TD_AUTHZ_ADMIN, h_metrics},
    {"POST", "/v1/apply", TD_AUTHZ_ADMIN, h_apply},
    {"POST", "/v1/workloads", TD_AUTHZ_TENANT, h_submit},
    {"GET", "/v1/workloads", TD_AUTHZ_TENANT, handle_workloads},
    {"POST", "/v1/workloads/finish", TD_AUTHZ_TENANT, h_finish},
    {"GET", "/v1/objects", TD_AUTHZ_TENANT, handle_objects},
    {"GET", "/v1/explain/request", TD_AUTHZ_TENANT, h_explain_request},
    {"GET", "/v1/explain/workload", TD_AUTHZ_TENANT, h_explain_workload},
    {"GET", "/ui", TD_AUTHZ_OPEN, h_ui},
    {"GET", "/v1/usage", TD_AUTHZ_TENANT, td_dashboard_usage},
    {"GET", "/v1/dashboard", TD_AUTHZ_TENANT, td_dashboard_get},
    {"DELETE", "/v1/objects", TD_AUTHZ_ADMIN, handle_objects},
};

bool td_control_anywhere(const td_http_request *req, void *user)
{
    (void)user;
    /* these read only the snapshot (td_control_snapshot) and its
     * admission index, and count in atomics */
    static const char *const paths[] = {"/validate", "/mutate", "/admit", "/healthz", "/readyz"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (strcmp(req->path, paths[i]) == 0)
            return true;
    return false;
}

void td_control_handle(const td_http_request *req, td_http_response *resp, void *user)
{
    td_control *c = user;
    int path_known = 0;
    for (size_t i = 0; i < sizeof endpoints / sizeof endpoints[0]; i++) {
        if (strcmp(req->path, endpoints[i].path) != 0)
            continue;
        path_known = 1;
        if (strcmp(req->method, endpoints[i].method) != 0)
            continue;
        if (endpoints[i].rule == TD_AUTHZ_OPEN) {
            td_principal open = {TD_PRINCIPAL_NONE, NULL, NULL};
            endpoints[i].fn(c, req, resp, &open);
            return;
        }
        /* The principal borrows from this snapshot: hold it for the call. */
        td_config *cfg = td_control_snapshot(c);
        td_principal p;
        td_authz_identify(cfg, c->has_admin_token ? c->admin_token_sha256 : NULL,
                          td_http_header(req, "Authorization"), &p);
        td_err err;
        int code = td_authz_check(&p, endpoints[i].rule, NULL, &err);
        if (code)
            reply_error(resp, code, err.msg);
        else
            endpoints[i].fn(c, req, resp, &p);
        td_config_unref(cfg);
        return;
    }
    if (path_known)
        reply_error(resp, 405, "method not allowed");
    else
        reply_error(resp, 404,
                    "no such endpoint; see docs/daemon.md for the admin listener's endpoints");
}
