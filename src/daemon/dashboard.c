/* dashboard.c - GET /v1/usage and GET /v1/dashboard (see dashboard.h).
 * Everything is read from what is already kept: the metering's sums and
 * history, the snapshot's queue view, the gateway's budget spend; nothing
 * is rebuilt per request. Scoping happens here, before anything is read. */
#include "daemon/dashboard.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/metering.h"
#include "daemon/queueview.h"
#include "gateway/budget.h"
#include "gateway/history.h"

/* The budget forecast's burn rate: the spend of the last 30 minutes, as
 * deploy/monitoring's TenantdBudgetForecastExhausted reads it. */
#define BURN_WINDOW_NS (1800LL * 1000000000LL)
#define MIN_BURN_NS    (300LL * 1000000000LL)

/* Takes over j. /v1/usage answers people too (indented, as the control
 * API does); /v1/dashboard, a page every 5 s, is compact. */
static void reply_flags(td_http_response *resp, int status, json_t *j, size_t flags)
{
    resp->status = status;
    resp->content_type = "application/json";
    resp->body = j ? json_dumps(j, flags | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (!resp->body) {
        resp->status = 500;
        resp->content_type = "text/plain; charset=utf-8";
        resp->body = strdup("out of memory\n");
    }
    resp->body_len = resp->body ? strlen(resp->body) : 0;
}

static void reply(td_http_response *resp, int status, json_t *j)
{
    reply_flags(resp, status, j, JSON_INDENT(2));
}

static void reply_error(td_http_response *resp, int status, const char *msg)
{
    reply(resp, status, json_pack("{s:s}", "error", msg));
}

static int64_t now_realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The tenant a request may see: NULL for all (the admin without
 * ?tenant=), else its name (in buf). 0, or 403 with the reason in msg. */
static int scope(const td_http_request *req, const td_principal *p, char *buf, size_t n,
                 const char **only, char *msg, size_t mn)
{
    *only = NULL;
    int named = td_control_query_param(req->query, "tenant", buf, n) && *buf;
    if (p->kind == TD_PRINCIPAL_TENANT) {
        if (named && strcmp(buf, p->tenant_name) != 0) {
            snprintf(msg, mn, "forbidden: a tenant's key reads its own tenant only");
            return 403;
        }
        snprintf(buf, n, "%s", p->tenant_name);
        named = 1;
    }
    if (named)
        *only = buf;
    return 0;
}

/* The prologue of the readings of usage: the caller's scope (see scope)
 * into *only (in tenant, n bytes), and a running metering. true to go on;
 * false with the refusal answered in resp. */
static bool usage_prologue(const td_control *c, const td_http_request *req,
                           td_http_response *resp, const td_principal *p, char *tenant, size_t n,
                           const char **only)
{
    char msg[128];
    int code = scope(req, p, tenant, n, only, msg, sizeof msg);
    if (code) {
        reply_error(resp, code, msg);
        return false;
    }
    if (!c->metering) {
        reply_error(resp, 503, "metering is not running");
        return false;
    }
    return true;
}

void td_dashboard_usage(td_control *c, const td_http_request *req, td_http_response *resp,
                        const td_principal *p)
{
    char tenant[256];
    const char *only;
    if (!usage_prologue(c, req, resp, p, tenant, sizeof tenant, &only))
        return;
    json_t *u = td_metering_usage(c->metering, only, now_realtime_ns());
    if (!u)
        reply_error(resp, 500, "out of memory");
    else
        reply(resp, 200, u);
}

/* Money of nano units as a JSON number (the CostPolicy's currency). */
static json_t *money(int64_t nano)
{
    return json_real((double)nano / 1e9);
}

/* One tenant's buckets as arrays by series, or null without history. */
static json_t *series_json(const td_history *h, const char *tenant, int64_t now_ns)
{
    td_history_point pts[TD_HISTORY_BUCKETS];
    if (!td_history_series(h, tenant, now_ns, pts))
        return json_null();
    static const char *const names[] = {"accepted", "limited", "shed", "errors",
                                        "other",    "p99Ms",   "cost"};
    json_t *o = json_object();
    for (size_t k = 0; o && k < sizeof names / sizeof names[0]; k++) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < TD_HISTORY_BUCKETS; i++) {
            const td_history_point *pt = &pts[i];
            json_t *v;
            switch (k) {
            case 0: v = json_integer(pt->accepted); break;
            case 1: v = json_integer(pt->limited); break;
            case 2: v = json_integer(pt->shed); break;
            case 3: v = json_integer(pt->errors); break;
            case 4: v = json_integer(pt->other); break;
            case 5: v = isnan(pt->p99_ms) ? json_null() : json_real(round(pt->p99_ms * 1000) / 1000);
                break;
            default: v = money(pt->cost_nano); break;
            }
            if (json_array_append_new(a, v) < 0) {
                json_decref(a);
                a = NULL;
            }
        }
        if (!a || json_object_set_new(o, names[k], a) < 0) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

/* Charts the page draws at most for all tenants: the busiest in the hour
 * (360 values x 7 series each; 500 tenants' were 3.6 MB and 0.6 s of
 * the loop per poll). */
#define CHARTED_MAX 16

typedef struct {
    const char *name;
    uint64_t requests;
    int64_t cost_nano;
} activity;

/* Busiest first: requests in the hour, then cost, then name. */
static int busier(const void *pa, const void *pb)
{
    const activity *a = pa, *b = pb;
    if (a->requests != b->requests)
        return a->requests > b->requests ? -1 : 1;
    if (a->cost_nano != b->cost_nano)
        return a->cost_nano > b->cost_nano ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* Notes on each tenant of usage's "tenants" (already scoped) its
 * requestsLastMinute, and gives the history of the CHARTED_MAX busiest
 * that had requests or cost in the hour, busiest first. */
static json_t *history_json(td_control *c, json_t *usage, int64_t now_ns)
{
    const td_history *h = td_metering_history(c->metering);
    json_t *list = json_object_get(usage, "tenants");
    size_t n = json_array_size(list), na = 0;
    activity *act = calloc(n ? n : 1, sizeof *act);
    td_history_point *pts = malloc(TD_HISTORY_BUCKETS * sizeof *pts);
    json_t *tenants = json_object();
    char end[32];
    td_rfc3339(now_ns / 1000000000LL, end, sizeof end);
    json_t *o = json_pack("{s:i, s:i, s:s, s:i, s:o}", "bucketSeconds", TD_HISTORY_BUCKET_S,
                          "buckets", TD_HISTORY_BUCKETS, "end", end, "limit", CHARTED_MAX,
                          "tenants", tenants);
    for (size_t i = 0; o && act && pts && i < n; i++) {
        json_t *t = json_array_get(list, i);
        const char *name = td_json_str(t, "name");
        if (!name || !td_history_series(h, name, now_ns, pts))
            continue;
        activity a = {name, 0, 0};
        uint64_t minute = 0;
        for (size_t k = 0; k < TD_HISTORY_BUCKETS; k++) {
            const td_history_point *pt = &pts[k];
            uint64_t all = (uint64_t)pt->accepted + pt->limited + pt->shed + pt->errors + pt->other;
            a.requests += all;
            a.cost_nano += pt->cost_nano;
            if (k >= TD_HISTORY_BUCKETS - 60 / TD_HISTORY_BUCKET_S)
                minute += all;
        }
        json_object_set_new(t, "requestsLastMinute", json_integer((json_int_t)minute));
        if (a.requests || a.cost_nano)
            act[na++] = a;
    }
    if (act && na)
        qsort(act, na, sizeof *act, busier);
    for (size_t k = 0; o && k < na && k < CHARTED_MAX; k++) {
        json_t *one = series_json(h, act[k].name, now_ns);
        if (!one || json_object_set_new(tenants, act[k].name, one) < 0) {
            json_decref(o);
            o = NULL;
        }
    }
    if (o && (!act || !pts || json_object_set_new(o, "omitted", json_integer((json_int_t)(
                                                            na > CHARTED_MAX ? na - CHARTED_MAX
                                                                             : 0))) < 0)) {
        json_decref(o);
        o = NULL;
    }
    free(act);
    free(pts);
    return o;
}

/* Whether the ClusterQueue cq is one a LocalQueue of p's namespaces uses
 * (the admin: every one). */
static bool cq_visible(const td_config *cfg, const td_principal *p, const char *cq)
{
    if (p->kind != TD_PRINCIPAL_TENANT)
        return true;
    json_t *nss = td_json_path(p->tenant, "spec.namespaces");
    for (size_t k = 0; k < json_array_size(nss); k++) {
        const char *ns = json_string_value(json_array_get(nss, k));
        json_t *const *lqs;
        size_t nl = ns ? td_config_list(cfg, "LocalQueue", ns, &lqs) : 0;
        for (size_t i = 0; i < nl; i++) {
            const char *name = td_json_str(lqs[i], "spec.clusterQueue");
            if (name && strcmp(name, cq) == 0)
                return true;
        }
    }
    return false;
}

static bool is_gpu(const char *r)
{
    size_t n = strlen(r);
    return n >= 4 && strcmp(r + n - 4, "/gpu") == 0;
}

/* One ClusterQueue: its status as the queue view made it (what `tenantctl
 * get clusterqueues` prints), GPUs summed over the resources named ".../gpu". */
static json_t *cq_json(const td_config *cfg, const td_queue *q, size_t cq, const json_t *status,
                       int64_t now_ns)
{
    const char *name = td_queue_cq_name(q, cq);
    json_t *obj = td_config_get(cfg, "ClusterQueue", NULL, name);
    const char *cohort = td_json_str(obj, "spec.cohort");
    if (!cohort)
        cohort = td_json_str(obj, "spec.cohortName");
    double nominal = 0, used = 0, borrowed = 0;
    const char *res;
    json_t *u;
    json_object_foreach(json_object_get(status, "usage"), res, u)
    {
        if (!is_gpu(res))
            continue;
        nominal += json_number_value(json_object_get(u, "nominal"));
        used += json_number_value(json_object_get(u, "used"));
        borrowed += json_number_value(json_object_get(u, "borrowed"));
    }
    uint64_t oldest = 0;
    for (size_t i = 0; i < td_queue_workload_count(q); i++)
        if (td_queue_workload_cq(q, i) == cq && td_queue_workload_state(q, i) == TD_WL_PENDING) {
            uint64_t t = td_queue_workload_queue_ns(q, i);
            if (!oldest || t < oldest)
                oldest = t;
        }
    const char *inactive = td_queue_cq_inactive(q, cq);
    json_t *o = json_pack(
        "{s:s, s:s, s:{s:f, s:f, s:f}, s:I, s:I, s:o, s:o}", "name", name, "cohort",
        cohort ? cohort : "", "gpus", "nominal", nominal, "used", used, "borrowed", borrowed,
        "pendingWorkloads", json_integer_value(json_object_get(status, "pendingWorkloads")),
        "admittedWorkloads", json_integer_value(json_object_get(status, "admittedWorkloads")),
        "oldestPendingSeconds",
        oldest ? json_real((double)(now_ns - (int64_t)oldest) / 1e9) : json_null(), "inactive",
        inactive ? json_string(inactive) : json_null());
    return o;
}

/* The ClusterQueues p may see; a queue that cannot take the snapshot's
 * objects gives none, and the reason in "queueError". */
static json_t *queues_json(td_control *c, const td_principal *p, int64_t now_ns, json_t *root)
{
    td_config *cfg = td_control_snapshot(c);
    const td_queueview *v = NULL;
    td_err err;
    json_t *arr = json_array();
    if (arr && td_queueview_get(cfg, &v, &err) != TD_OK) {
        json_object_set_new(root, "queueError", json_string(err.msg));
        v = NULL;
    }
    const td_queue *q = v ? td_queueview_queue(v) : NULL;
    const json_t *st = v ? td_queueview_cq_status(v) : NULL;
    for (size_t cq = 0; arr && q && cq < td_queue_cq_count(q); cq++) {
        const char *name = td_queue_cq_name(q, cq);
        if (!cq_visible(cfg, p, name))
            continue;
        json_t *o = cq_json(cfg, q, cq, json_object_get(st, name), now_ns);
        if (!o || json_array_append_new(arr, o) < 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    td_config_unref(cfg);
    return arr;
}

/* One budget b of tenant t at now: spend, what is left, and the forecast
 * for the end of its period at the burn rate of the last 30 minutes
 * ("recent"; with less than 5 minutes of history, the period's average
 * so far: "period"). */
static json_t *budget_json(td_control *c, const td_gw_tenant *t, const td_gw_budget *b,
                           int64_t now_ns)
{
    int64_t now_s = now_ns / 1000000000LL, start, end;
    td_period_bounds(b->period, now_s, &start, &end);
    int64_t spent = td_gateway_budget_spent(c->gateway, t, NULL, b->period, now_s, false);
    int64_t covered = 0;
    int64_t burned =
        td_history_spend(td_metering_history(c->metering), t->name, now_ns, BURN_WINDOW_NS,
                         &covered);
    /* A few seconds of history would extrapolate noise over a month: until
     * it covers MIN_BURN_NS, the period's own average rate stands in. */
    bool recent = covered >= MIN_BURN_NS;
    double per_s = recent ? (double)burned / ((double)covered / 1e9)
                          : (double)spent / (double)(now_s > start ? now_s - start : 1);
    double forecast = (double)spent + per_s * (double)(end - now_s);
    char from[32], until[32];
    td_rfc3339(start, from, sizeof from);
    td_rfc3339(end, until, sizeof until);
    return json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:s, s:s, s:f, s:s, s:f, s:f, s:b}", "tenant",
                     t->name, "period", td_period_name(b->period), "enforcement",
                     b->shadow ? "shadow" : "enforce", "amount", money(b->amount_nano), "spent",
                     money(spent), "remaining",
                     money(b->amount_nano > spent ? b->amount_nano - spent : 0), "periodStart",
                     from, "periodEnd", until, "burnPerHour", per_s * 3600 / 1e9, "burnBasis",
                     recent ? "recent" : "period", "burnWindowSeconds",
                     recent ? (double)covered / 1e9 : (double)(now_s - start), "forecast",
                     forecast / 1e9,
                     "forecastOver", forecast > (double)b->amount_nano);
}

/* Every budget of the tenants in scope (only: one tenant, NULL all). */
static json_t *budgets_json(td_control *c, const char *only, int64_t now_ns)
{
    json_t *arr = json_array();
    if (!c->gateway || !arr)
        return arr;
    td_gw_config *held = NULL;
    const td_gw_config *gc = td_gateway_config(c->gateway, &held);
    for (size_t i = 0; arr && gc && i < gc->ntenants; i++) {
        const td_gw_tenant *t = &gc->tenants[i];
        if (only && strcmp(only, t->name) != 0)
            continue;
        for (size_t k = 0; arr && k < t->nbudgets; k++) {
            json_t *o = budget_json(c, t, &t->budgets[k], now_ns);
            if (!o || json_array_append_new(arr, o) < 0) {
                json_decref(arr);
                arr = NULL;
            }
        }
    }
    if (held)
        td_gw_config_unref(held);
    return arr;
}

void td_dashboard_get(td_control *c, const td_http_request *req, td_http_response *resp,
                      const td_principal *p)
{
    char tenant[256];
    const char *only;
    if (!usage_prologue(c, req, resp, p, tenant, sizeof tenant, &only))
        return;
    int64_t now_ns = now_realtime_ns();
    json_t *root = td_metering_usage(c->metering, only, now_ns);
    json_t *principal =
        p->kind == TD_PRINCIPAL_TENANT
            ? json_pack("{s:s, s:s}", "kind", "tenant", "tenant", p->tenant_name)
            : json_pack("{s:s, s:n}", "kind", "admin", "tenant");
    json_t *history = root ? history_json(c, root, now_ns) : NULL;
    json_t *queues = root ? queues_json(c, p, now_ns, root) : NULL;
    json_t *budgets = budgets_json(c, only, now_ns);
    if (!root || !principal || !history || !queues || !budgets) {
        json_decref(root);
        json_decref(principal);
        json_decref(history);
        json_decref(queues);
        json_decref(budgets);
        reply_error(resp, 500, "out of memory");
        return;
    }
    /* each set takes its value over, also when it fails */
    int bad = json_object_set_new(root, "principal", principal) |
              json_object_set_new(root, "history", history) |
              json_object_set_new(root, "clusterQueues", queues) |
              json_object_set_new(root, "budgets", budgets);
    if (bad) {
        json_decref(root);
        reply_error(resp, 500, "out of memory");
        return;
    }
    reply_flags(resp, 200, root, JSON_COMPACT);
}
