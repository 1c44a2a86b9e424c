/* metering.c - batch intervals into the ledger, cost of what the ledger
 * committed, and the dashboard's numbers (see metering.h).
 *
 * Why the whole queue per new snapshot: the daemon's queue state is a pure
 * function of the stored Workloads (workloads.c; the snapshot's queue view,
 * queueview.h, holds it), so the intervals are too; their ids
 * are stable (workload key + admission time + flavor) and the ledger
 * ignores ids it has, so appending the same closed interval twice (after a
 * restart, or two ticks apart) counts it once. A deleted workload is gone
 * from the replay: its running interval is closed as finished at the first
 * tick that misses it. */
#include "daemon/metering.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/queueview.h"
#include "daemon/workloads.h"
#include "cost/chargeback.h"
#include "queue/intervals.h"

#define MAX_TENANTS_SHOWN 4096
/* tenants with a last-hour history (about 14 KB each) */
#define MAX_TENANTS_CHARTED 1024

typedef struct {
    char team[TD_LEDGER_STR], project[TD_LEDGER_STR], environment[TD_LEDGER_STR];
    char item[TD_ITEM_MAX];
    char model[TD_LEDGER_MODEL]; /* td_gw_model_label: bounded by the Routes */
    int64_t nano; /* since start: tenantd_cost_total */
} cost_line;

/* A tenant's tokens this period for one model label: tenantd_usage_tokens. */
typedef struct {
    char tenant[TD_LEDGER_STR];
    char model[TD_LEDGER_MODEL];
    int64_t tokens_in, tokens_out;
} model_sum;

typedef struct {
    char name[TD_LEDGER_STR];
    int64_t period_nano;  /* cost of committed records in this period */
    int64_t tokens_in, tokens_out;
    int64_t gpu_milli_seconds;       /* requests, committed */
    int64_t interval_gpu_milli_s;    /* closed intervals, committed: GPU-ms x s */
    int64_t unpriced;
    /* from the last tick (loop thread only) */
    int64_t gpus_in_use_milli, gpu_quota_milli, pending;
} tenant_sum;

struct td_metering {
    td_control *c;
    td_ledger *ledger;
    uv_timer_t timer;
    int timer_on;
    uint64_t tick_ms;

    pthread_mutex_t mu; /* everything below up to 'running' */
    td_costpolicy *policy;
    char currency[16];
    int64_t period_start_ns;
    cost_line *lines;
    size_t nlines, caplines;
    model_sum *msums;
    size_t nmsums, capmsums;
    tenant_sum *tenants;
    size_t ntenants, captenants;
    uint64_t unpriced;
    char unpriced_msg[256];

    /* loop thread only */
    td_config *cfg_seen; /* reference: the snapshot the policy came from */
    td_config *cfg_replayed; /* reference: the snapshot of the last replay */
    td_ledger_rec *running;
    size_t nrunning;
    int64_t last_tick_ns;
    char tick_err[256];
    td_history *history; /* the dashboard's last hour, sampled every tick */
};

static int64_t month_start(int64_t now_ns)
{
    time_t s = (time_t)(now_ns / 1000000000LL);
    struct tm tm;
    gmtime_r(&s, &tm);
    /* days since the epoch of the first of the month, without timegm */
    int y = tm.tm_year + 1900, m = tm.tm_mon + 1;
    int yy = y - (m <= 2);
    int era = (yy >= 0 ? yy : yy - 399) / 400;
    unsigned yoe = (unsigned)(yy - era * 400);
    unsigned doy = (153u * (unsigned)(m + (m > 2 ? -3 : 9)) + 2) / 5;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    int64_t days = (int64_t)era * 146097 + (int64_t)doe - 719468;
    return days * 86400LL * 1000000000LL;
}

/* With mu held. NULL when out of memory or too many. */
static tenant_sum *tenant_get(td_metering *m, const char *name)
{
    for (size_t i = 0; i < m->ntenants; i++)
        if (strcmp(m->tenants[i].name, name) == 0)
            return &m->tenants[i];
    if (m->ntenants == MAX_TENANTS_SHOWN)
        return NULL;
    if (m->ntenants == m->captenants) {
        size_t cap = m->captenants ? 2 * m->captenants : 16;
        tenant_sum *p = realloc(m->tenants, cap * sizeof *p);
        if (!p)
            return NULL;
        m->tenants = p;
        m->captenants = cap;
    }
    tenant_sum *t = &m->tenants[m->ntenants++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    return t;
}

static cost_line *line_get(td_metering *m, const td_ledger_rec *r, const char *item,
                           const char *model)
{
    for (size_t i = 0; i < m->nlines; i++) {
        cost_line *l = &m->lines[i];
        if (!strcmp(l->item, item) && !strcmp(l->team, r->team) &&
            !strcmp(l->project, r->project) && !strcmp(l->environment, r->environment) &&
            !strcmp(l->model, model))
            return l;
    }
    if (m->nlines == MAX_TENANTS_SHOWN * 8)
        return NULL;
    if (m->nlines == m->caplines) {
        size_t cap = m->caplines ? 2 * m->caplines : 32;
        cost_line *p = realloc(m->lines, cap * sizeof *p);
        if (!p)
            return NULL;
        m->lines = p;
        m->caplines = cap;
    }
    cost_line *l = &m->lines[m->nlines++];
    memset(l, 0, sizeof *l);
    snprintf(l->team, sizeof l->team, "%s", r->team);
    snprintf(l->project, sizeof l->project, "%s", r->project);
    snprintf(l->environment, sizeof l->environment, "%s", r->environment);
    snprintf(l->item, sizeof l->item, "%s", item);
    snprintf(l->model, sizeof l->model, "%s", model);
    return l;
}

/* With mu held. NULL when out of memory or too many. */
static model_sum *msum_get(td_metering *m, const char *tenant, const char *model)
{
    for (size_t i = 0; i < m->nmsums; i++)
        if (!strcmp(m->msums[i].tenant, tenant) && !strcmp(m->msums[i].model, model))
            return &m->msums[i];
    if (m->nmsums == MAX_TENANTS_SHOWN * 8)
        return NULL;
    if (m->nmsums == m->capmsums) {
        size_t cap = m->capmsums ? 2 * m->capmsums : 32;
        model_sum *p = realloc(m->msums, cap * sizeof *p);
        if (!p)
            return NULL;
        m->msums = p;
        m->capmsums = cap;
    }
    model_sum *x = &m->msums[m->nmsums++];
    memset(x, 0, sizeof *x);
    snprintf(x->tenant, sizeof x->tenant, "%s", tenant);
    snprintf(x->model, sizeof x->model, "%s", model);
    return x;
}

/* r's model as a bounded label (td_gw_model_label over the gateway's
 * Routes; "other" without a gateway) into buf. */
static const char *model_label(td_metering *m, const td_ledger_rec *r, char *buf, size_t cap)
{
    if (!r->model[0])
        return "";
    td_gateway *g = m->c ? m->c->gateway : NULL;
    td_gw_config *held = NULL;
    const td_gw_config *gc = g ? td_gateway_config(g, &held) : NULL;
    snprintf(buf, cap, "%s", gc ? td_gw_model_label(gc, r->model) : "other");
    if (held)
        td_gw_config_unref(held);
    return buf;
}

/* With mu held: adds r's part in [period start, now) to the sums. */
static void account(td_metering *m, const td_ledger_rec *r, bool counters)
{
    tenant_sum *t = tenant_get(m, r->tenant);
    char lbuf[TD_LEDGER_MODEL];
    const char *label = model_label(m, r, lbuf, sizeof lbuf);
    if (t && r->end_ns >= m->period_start_ns) {
        t->tokens_in += r->tokens_in;
        t->tokens_out += r->tokens_out;
        model_sum *ms = r->kind == TD_LEDGER_REQUEST ? msum_get(m, r->tenant, label) : NULL;
        if (ms) {
            ms->tokens_in += r->tokens_in;
            ms->tokens_out += r->tokens_out;
        }
        t->gpu_milli_seconds += r->gpu_milli_seconds;
        if (r->kind == TD_LEDGER_INTERVAL) {
            int64_t from = r->start_ns > m->period_start_ns ? r->start_ns : m->period_start_ns;
            if (r->end_ns > from)
                t->interval_gpu_milli_s += r->gpu_milli * ((r->end_ns - from) / 1000000) / 1000;
        }
    }
    if (!m->policy)
        return;
    td_charge ch[TD_CHARGE_MAX];
    size_t n = 0;
    td_err e;
    if (td_chargeback_price(m->policy, r, m->period_start_ns, INT64_MAX, ch, &n, &e) != TD_OK) {
        m->unpriced++;
        snprintf(m->unpriced_msg, sizeof m->unpriced_msg, "%s", e.msg);
        if (t)
            t->unpriced++;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (t)
            t->period_nano += ch[i].amount_nano;
        cost_line *l = counters ? line_get(m, r, ch[i].item, label) : NULL;
        if (l)
            l->nano += ch[i].amount_nano;
    }
}

void td_metering_on_commit(const td_ledger_rec *r, void *ud)
{
    td_metering *m = ud;
    pthread_mutex_lock(&m->mu);
    account(m, r, true);
    pthread_mutex_unlock(&m->mu);
}

td_status td_metering_create(td_control *c, td_metering **out, td_err *err)
{
    td_metering *m = calloc(1, sizeof *m);
    if (!m)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    m->c = c;
    if (td_history_create(MAX_TENANTS_CHARTED, &m->history) != TD_OK) {
        free(m);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&m->mu, NULL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    m->period_start_ns = month_start((int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    *out = m;
    return TD_OK;
}

/* The CostPolicy of the current snapshot, when the snapshot changed. */
static void refresh_policy(td_metering *m, td_config *cfg)
{
    if (cfg == m->cfg_seen)
        return;
    td_costpolicy *p = NULL;
    td_err e;
    td_status st = td_costpolicy_from_config(cfg, &p, &e);
    if (st != TD_OK && st != TD_ENOTFOUND)
        fprintf(stderr, "tenantd: metering: %s\n", e.msg);
    pthread_mutex_lock(&m->mu);
    td_costpolicy_destroy(m->policy);
    m->policy = p;
    snprintf(m->currency, sizeof m->currency, "%s", p ? td_costpolicy_currency(p) : "");
    pthread_mutex_unlock(&m->mu);
    td_config_unref(m->cfg_seen);
    m->cfg_seen = td_config_ref(cfg);
}

static int read_period(const td_ledger_rec *r, void *ud)
{
    td_metering *m = ud;
    account(m, r, true);
    return 0;
}

static void on_timer(uv_timer_t *h)
{
    td_metering *m = h->data;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    td_metering_tick(m, (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec);
}

td_status td_metering_load(td_metering *m, td_config *cfg, const char *dir, td_err *err)
{
    refresh_policy(m, cfg);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    pthread_mutex_lock(&m->mu);
    td_status st = td_ledger_read(dir, m->period_start_ns, now + 1, read_period, m, err);
    pthread_mutex_unlock(&m->mu);
    return st == TD_ENOTFOUND ? TD_OK : st;
}

void td_metering_start(td_metering *m, uv_loop_t *loop, td_ledger *l, uint64_t tick_ms)
{
    m->ledger = l;
    m->tick_ms = tick_ms ? tick_ms : 2000;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    td_metering_tick(m, (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    uv_timer_init(loop, &m->timer);
    m->timer.data = m;
    uv_timer_start(&m->timer, on_timer, m->tick_ms, m->tick_ms);
    m->timer_on = 1;
}

static bool is_gpu(const char *r)
{
    size_t n = strlen(r);
    return n >= 4 && strcmp(r + n - 4, "/gpu") == 0;
}

/* GPU nominal quota reachable from tenant's namespaces (their LocalQueues'
 * ClusterQueues, each counted once). */
static int64_t gpu_quota(const td_config *cfg, const td_queue *q, const json_t *tenant)
{
    size_t ncq = td_queue_cq_count(q);
    unsigned char *seen = calloc(ncq ? ncq : 1, 1);
    int64_t sum = 0;
    json_t *nss = td_json_path(tenant, "spec.namespaces");
    for (size_t k = 0; seen && k < json_array_size(nss); k++) {
        const char *ns = json_string_value(json_array_get(nss, k));
        json_t *const *lqs;
        size_t nl = ns ? td_config_list(cfg, "LocalQueue", ns, &lqs) : 0;
        for (size_t i = 0; i < nl; i++) {
            const char *cqn = td_json_str(lqs[i], "spec.clusterQueue");
            for (size_t c = 0; cqn && c < ncq; c++) {
                if (seen[c] || strcmp(td_queue_cq_name(q, c), cqn) != 0)
                    continue;
                seen[c] = 1;
                for (size_t r = 0; r < td_queue_resource_count(q); r++)
                    if (is_gpu(td_queue_resource_name(q, r)))
                        sum += td_queue_cq_nominal_milli(q, c, td_queue_resource_name(q, r));
            }
        }
    }
    free(seen);
    return sum;
}

/* With mu held: the cost so far this period of tenant's running intervals
 * at now_ns, and their GPU-milliseconds x seconds in *gpu_ms. */
static int64_t running_cost(td_metering *m, const char *tenant, int64_t now_ns, int64_t *gpu_ms)
{
    int64_t nano = 0;
    *gpu_ms = 0;
    for (size_t i = 0; i < m->nrunning; i++) {
        const td_ledger_rec *r = &m->running[i];
        if (strcmp(r->tenant, tenant) != 0)
            continue;
        int64_t from = r->start_ns > m->period_start_ns ? r->start_ns : m->period_start_ns;
        if (now_ns > from)
            *gpu_ms += r->gpu_milli * ((now_ns - from) / 1000000) / 1000;
        td_charge ch[TD_CHARGE_MAX];
        size_t n = 0;
        td_ledger_rec rr = *r;
        rr.end_ns = now_ns;
        if (m->policy &&
            td_chargeback_price(m->policy, &rr, m->period_start_ns, now_ns, ch, &n, NULL) == TD_OK)
            for (size_t c = 0; c < n; c++)
                nano += ch[c].amount_nano;
    }
    return nano;
}

/* With mu held: one tenant's sums into the history. g (may be NULL: a
 * tenant the gateway does not serve) gives its requests and budget spend. */
static void sample_one(td_metering *m, const td_gw_tenant *g, const tenant_sum *t,
                       const char *name, int64_t now_ns)
{
    td_history_sample s;
    memset(&s, 0, sizeof s);
    s.spend_period = -1;
    td_gateway *gw = m->c->gateway;
    if (g) {
        int64_t inflight;
        td_metrics_tenant_totals(td_gateway_metrics(gw), g->slot, s.out, &inflight);
        td_metrics_tenant_latency(td_gateway_metrics(gw), g->slot, s.latency);
        if (g->nbudgets) {
            int64_t now_s = now_ns / 1000000000LL, end_s;
            s.spend_period = (int)g->budgets[0].period;
            s.spend_nano = td_gateway_budget_spent(gw, g, NULL, g->budgets[0].period, now_s, false);
            td_period_bounds(g->budgets[0].period, now_s, &s.spend_start, &end_s);
        }
    }
    int64_t gpu_ms;
    s.cost_nano = (t ? t->period_nano : 0) + running_cost(m, name, now_ns, &gpu_ms);
    s.cost_period = m->period_start_ns;
    /* past MAX_TENANTS_CHARTED a tenant has no history: the page counts it
     * with the quiet ones */
    (void)td_history_record(m->history, name, &s, now_ns);
}

/* Every tenant's sums into the history: the gateway's tenants, then those
 * only the ledger or the queue knows. Loop thread. */
static void sample_history(td_metering *m, int64_t now_ns)
{
    td_gw_config *held = NULL;
    const td_gw_config *gc = m->c->gateway ? td_gateway_config(m->c->gateway, &held) : NULL;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; gc && i < gc->ntenants; i++) {
        const tenant_sum *t = NULL;
        for (size_t k = 0; k < m->ntenants && !t; k++)
            if (strcmp(m->tenants[k].name, gc->tenants[i].name) == 0)
                t = &m->tenants[k];
        sample_one(m, &gc->tenants[i], t, gc->tenants[i].name, now_ns);
    }
    for (size_t k = 0; k < m->ntenants; k++)
        if (!gc || !td_gw_tenant_by_name(gc, m->tenants[k].name))
            sample_one(m, NULL, &m->tenants[k], m->tenants[k].name, now_ns);
    pthread_mutex_unlock(&m->mu);
    if (held)
        td_gw_config_unref(held);
}

const td_history *td_metering_history(const td_metering *m)
{
    return m->history;
}

static int cmp_id(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void td_metering_tick(td_metering *m, int64_t now_ns)
{
    td_config *cfg = td_control_snapshot(m->c);
    refresh_policy(m, cfg);
    if (month_start(now_ns) != m->period_start_ns) {
        /* a new period: the dashboard's sums start again (counters do not) */
        pthread_mutex_lock(&m->mu);
        m->period_start_ns = month_start(now_ns);
        for (size_t i = 0; i < m->ntenants; i++) {
            tenant_sum *t = &m->tenants[i];
            t->period_nano = t->tokens_in = t->tokens_out = t->gpu_milli_seconds = 0;
            t->interval_gpu_milli_s = t->unpriced = 0;
        }
        m->nmsums = 0;
        pthread_mutex_unlock(&m->mu);
    }
    const td_queue *q = NULL;
    json_t *const *wls = NULL;
    size_t nw = 0;
    td_err e;
    td_ledger_vec v = {0};
    td_status st = TD_OK;
    const td_queueview *view = NULL;
    if (cfg == m->cfg_replayed) {
        /* Same snapshot, same queue: no interval opened or closed since
         * (only "now" moved), so the walk, O(workloads), is skipped. */
        goto out;
    }
    st = td_queueview_get(cfg, &view, &e);
    if (st == TD_OK) {
        q = td_queueview_queue(view);
        wls = td_queueview_workloads(view, &nw);
        /* the closed intervals older than the window below are stored */
        td_intervals_opts io = {(const json_t *const *)wls, nw, cfg, 0, now_ns, true,
                                m->last_tick_ns ? m->last_tick_ns - 10000000000LL : 0};
        st = td_ledger_intervals(q, &io, td_ledger_vec_push, &v, &e);
        if (st == TD_OK && v.full)
            st = td_err_set(&e, TD_ENOMEM, "out of memory");
    }
    if (st != TD_OK) {
        if (strcmp(m->tick_err, e.msg) != 0)
            fprintf(stderr, "tenantd: metering: %s\n", e.msg);
        snprintf(m->tick_err, sizeof m->tick_err, "%s", e.msg);
        goto out;
    }
    m->tick_err[0] = 0;
    td_config_unref(m->cfg_replayed);
    m->cfg_replayed = td_config_ref(cfg);
    /* intervals that closed (since the last tick; older ones are stored) */
    for (size_t i = 0; m->ledger && i < v.n; i++)
        if (strcmp(v.v[i].outcome, "running") != 0 &&
            (m->last_tick_ns == 0 || v.v[i].end_ns >= m->last_tick_ns - 10000000000LL))
            td_ledger_append(m->ledger, &v.v[i]);
    /* running at the last tick and gone from the replay: deleted, finished
     * now (the replay's ids sorted once: not one scan of them per run) */
    const char **ids = m->ledger && m->nrunning ? malloc((v.n ? v.n : 1) * sizeof *ids) : NULL;
    for (size_t k = 0; ids && k < v.n; k++)
        ids[k] = v.v[k].id;
    if (ids && v.n)
        qsort(ids, v.n, sizeof *ids, cmp_id);
    for (size_t i = 0; m->ledger && i < m->nrunning; i++) {
        const char *key = m->running[i].id;
        bool present = false;
        if (ids)
            present = bsearch(&key, ids, v.n, sizeof *ids, cmp_id) != NULL;
        for (size_t k = 0; !ids && k < v.n && !present; k++)
            present = strcmp(v.v[k].id, key) == 0;
        if (!present) {
            td_ledger_rec r = m->running[i];
            r.end_ns = now_ns;
            snprintf(r.outcome, sizeof r.outcome, "finished");
            td_ledger_append(m->ledger, &r);
        }
    }
    free(ids);
    size_t nrun = 0;
    for (size_t i = 0; i < v.n; i++)
        if (strcmp(v.v[i].outcome, "running") == 0)
            v.v[nrun++] = v.v[i];
    free(m->running);
    m->running = v.v;
    m->nrunning = nrun;
    v.v = NULL;
    m->last_tick_ns = now_ns;

    /* per tenant: GPUs held now, quota, workloads waiting */
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->ntenants; i++)
        m->tenants[i].gpus_in_use_milli = m->tenants[i].gpu_quota_milli =
            m->tenants[i].pending = 0;
    json_t *const *ts;
    size_t nt = td_config_list(cfg, "Tenant", NULL, &ts);
    for (size_t i = 0; i < nt; i++) {
        tenant_sum *t = tenant_get(m, td_json_str(ts[i], "metadata.name"));
        if (t)
            t->gpu_quota_milli = gpu_quota(cfg, q, ts[i]);
    }
    for (size_t i = 0; i < m->nrunning; i++) {
        tenant_sum *t = tenant_get(m, m->running[i].tenant);
        if (t)
            t->gpus_in_use_milli += m->running[i].gpu_milli;
    }
    char last_ns[TD_LEDGER_STR] = "\x01"; /* one tenant lookup per run of a namespace */
    tenant_sum *last_t = NULL;
    for (size_t id = 0; id < td_queue_workload_count(q); id++) {
        if (td_queue_workload_state(q, id) != TD_WL_PENDING)
            continue;
        const char *key = td_queue_workload_key(q, id);
        const char *slash = strchr(key, '/');
        char ns[TD_LEDGER_STR];
        snprintf(ns, sizeof ns, "%.*s", slash ? (int)(slash - key) : 0, key);
        if (strcmp(ns, last_ns) != 0) {
            const char *tn = td_json_str(td_config_tenant_for_namespace(cfg, ns), "metadata.name");
            last_t = tenant_get(m, tn ? tn : "");
            memcpy(last_ns, ns, sizeof ns);
        }
        if (last_t)
            last_t->pending++;
    }
    pthread_mutex_unlock(&m->mu);
out:
    free(v.v);
    td_config_unref(cfg);
    sample_history(m, now_ns);
}

void td_metering_stop(td_metering *m)
{
    if (m && m->timer_on) {
        uv_timer_stop(&m->timer);
        uv_close((uv_handle_t *)&m->timer, NULL);
        m->timer_on = 0;
    }
}

void td_metering_destroy(td_metering *m)
{
    if (!m)
        return;
    td_costpolicy_destroy(m->policy);
    td_config_unref(m->cfg_seen);
    td_config_unref(m->cfg_replayed);
    free(m->lines);
    free(m->msums);
    free(m->tenants);
    free(m->running);
    td_history_destroy(m->history);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static void rfc3339(int64_t ns, char *buf, size_t n)
{
    time_t s = (time_t)(ns / 1000000000LL);
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static double money(int64_t nano)
{
    return (double)nano / 1e9;
}

json_t *td_metering_usage(td_metering *m, const char *only, int64_t now_ns)
{
    json_t *root = json_object();
    json_t *arr = json_array();
    json_t *routes = json_array();
    if (!root || !arr || !routes) {
        json_decref(root);
        json_decref(arr);
        json_decref(routes);
        return NULL;
    }
    char when[40], start[40];
    rfc3339(now_ns, when, sizeof when);
    pthread_mutex_lock(&m->mu);
    rfc3339(m->period_start_ns, start, sizeof start);
    json_object_set_new(root, "time", json_string(when));
    json_object_set_new(root, "periodStart", json_string(start));
    json_object_set_new(root, "currency", m->policy ? json_string(m->currency) : json_null());
    json_object_set_new(
        root, "ledger",
        json_pack("{s:b, s:I, s:I}", "enabled", m->ledger != NULL, "committed",
                  (json_int_t)(m->ledger ? td_ledger_committed(m->ledger) : 0), "dropped",
                  (json_int_t)(m->ledger ? td_ledger_dropped(m->ledger) : 0)));
    /* A tenant's own view holds nothing about the others: no global
     * unpriced message (it may name another tenant's route), no routes. */
    if (!only)
        json_object_set_new(root, "unpriced",
                            json_pack("{s:I, s:s}", "records", (json_int_t)m->unpriced, "last",
                                      m->unpriced_msg));
    /* The gateway's tenants first (request counters), then any tenant the
     * ledger or the queue knows. */
    td_gw_config *held = NULL;
    const td_gw_config *gc = NULL;
    td_metrics *mx = NULL;
    if (m->c->gateway) {
        gc = td_gateway_config(m->c->gateway, &held);
        mx = td_gateway_metrics(m->c->gateway);
    }
    for (size_t i = 0; gc && !only && i < gc->nroutes; i++)
        json_array_append_new(routes, json_pack("{s:s, s:I}", "name", gc->routes[i].name,
                                                "queueDepth",
                                                (json_int_t)td_metrics_route_queue(
                                                    mx, gc->routes[i].slot)));
    size_t ngw = gc ? gc->ntenants : 0;
    for (size_t k = 0; k < ngw + m->ntenants; k++) {
        const td_gw_tenant *g = k < ngw ? &gc->tenants[k] : NULL;
        const char *name = g ? g->name : m->tenants[k - ngw].name;
        if (!g && gc && td_gw_tenant_by_name(gc, name))
            continue; /* shown with the gateway's tenants */
        if (only && strcmp(only, name) != 0)
            continue;
        tenant_sum zero = {0}, *t = &zero;
        for (size_t i = 0; i < m->ntenants; i++)
            if (strcmp(m->tenants[i].name, name) == 0)
                t = &m->tenants[i];
        uint64_t out[TD_OUT_COUNT] = {0};
        int64_t inflight = 0;
        if (g)
            td_metrics_tenant_totals(mx, g->slot, out, &inflight);
        int64_t running_gpu_ms = 0;
        int64_t running_nano = running_cost(m, name, now_ns, &running_gpu_ms);
        json_t *o = json_pack(
            "{s:s, s:s, s:s, s:s, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:I, s:I, s:I, s:f, "
            "s:f, s:I, s:I, s:f, s:f}",
            "name", name, "team", g && g->team ? g->team : "", "project",
            g && g->project ? g->project : "", "environment",
            g && g->environment ? g->environment : "", "requests", "accepted",
            (json_int_t)out[TD_OUT_ACCEPTED], "rateLimited", (json_int_t)out[TD_OUT_RATE_LIMITED],
            "concurrencyLimited", (json_int_t)out[TD_OUT_CONCURRENCY_LIMITED], "shed",
            (json_int_t)out[TD_OUT_SHED], "upstreamError", (json_int_t)out[TD_OUT_UPSTREAM_ERROR],
            "timeout", (json_int_t)out[TD_OUT_TIMEOUT], "badRequest",
            /* 404s (no_route on /metrics) stay bad requests here, as before */
            (json_int_t)(out[TD_OUT_BAD_REQUEST] + out[TD_OUT_NO_ROUTE]), "rejected",
            (json_int_t)(out[TD_OUT_RATE_LIMITED] + out[TD_OUT_CONCURRENCY_LIMITED]), "inflight",
            (json_int_t)inflight, "pendingWorkloads", (json_int_t)t->pending, "gpusInUse",
            (double)t->gpus_in_use_milli / 1000.0, "gpuQuota",
            (double)t->gpu_quota_milli / 1000.0, "tokensIn", (json_int_t)t->tokens_in,
            "tokensOut", (json_int_t)t->tokens_out, "gpuSeconds",
            (double)(t->gpu_milli_seconds + t->interval_gpu_milli_s + running_gpu_ms) / 1000.0,
            "cost", money(t->period_nano + running_nano));
        if (o && !m->policy)
            json_object_set_new(o, "cost", json_null());
        if (o && t->unpriced)
            json_object_set_new(o, "unpricedRecords", json_integer((json_int_t)t->unpriced));
        json_array_append_new(arr, o);
    }
    pthread_mutex_unlock(&m->mu);
    if (held)
        td_gw_config_unref(held);
    json_object_set_new(root, "tenants", arr);
    json_object_set_new(root, "routes", routes);
    return root;
}

static void label_value(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        if (*s == '\n') {
            fputs("\\n", f);
            continue;
        }
        fputc(*s, f);
    }
}

static void owner_labels(FILE *f, const char *team, const char *project, const char *env)
{
    fputs("team=\"", f);
    label_value(f, team);
    fputs("\",project=\"", f);
    label_value(f, project);
    fputs("\",environment=\"", f);
    label_value(f, env);
    fputc('"', f);
}

td_status td_metering_metrics(td_metering *m, char **text, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f)
        return TD_ENOMEM;
    pthread_mutex_lock(&m->mu);
    if (m->ledger) {
        fprintf(f, "# HELP tenantd_ledger_records_total Usage records committed to the ledger.\n"
                   "# TYPE tenantd_ledger_records_total counter\n"
                   "tenantd_ledger_records_total %llu\n"
                   "# HELP tenantd_ledger_dropped_total Usage records lost: the ledger's buffer "
                   "was full (store too slow or unwritable).\n"
                   "# TYPE tenantd_ledger_dropped_total counter\n"
                   "tenantd_ledger_dropped_total %llu\n",
                (unsigned long long)td_ledger_committed(m->ledger),
                (unsigned long long)td_ledger_dropped(m->ledger));
        fprintf(f, "# HELP tenantd_ledger_spooled Records waiting in the spool for the shared "
                   "ledger on PostgreSQL (0 without --database).\n"
                   "# TYPE tenantd_ledger_spooled gauge\n"
                   "tenantd_ledger_spooled %llu\n"
                   "# HELP tenantd_ledger_shipped_total Records sent to the shared ledger.\n"
                   "# TYPE tenantd_ledger_shipped_total counter\n"
                   "tenantd_ledger_shipped_total %llu\n"
                   "# HELP tenantd_ledger_spool_overflow_total Records the full spool could not "
                   "take: in this replica's ledger, never sent to the shared one.\n"
                   "# TYPE tenantd_ledger_spool_overflow_total counter\n"
                   "tenantd_ledger_spool_overflow_total %llu\n"
                   "# HELP tenantd_ledger_database_degraded 1 while PostgreSQL's shared ledger "
                   "is unreachable (records spool meanwhile).\n"
                   "# TYPE tenantd_ledger_database_degraded gauge\n"
                   "tenantd_ledger_database_degraded %d\n",
                (unsigned long long)td_ledger_spooled(m->ledger),
                (unsigned long long)td_ledger_shipped(m->ledger),
                (unsigned long long)td_ledger_spool_overflow(m->ledger),
                td_ledger_database_degraded(m->ledger));
    }
    if (m->policy) {
        fprintf(f, "# HELP tenantd_cost_total Cost of the usage committed to the ledger (this "
                   "period's records at start, then every new one), priced by the CostPolicy, "
                   "in %s.\n# TYPE tenantd_cost_total counter\n",
                m->currency);
        for (size_t i = 0; i < m->nlines; i++) {
            const cost_line *l = &m->lines[i];
            fputs("tenantd_cost_total{", f);
            owner_labels(f, l->team, l->project, l->environment);
            fputs(",item=\"", f);
            label_value(f, l->item);
            fputs("\",model=\"", f);
            label_value(f, l->model);
            fprintf(f, "\"} %.9f\n", money(l->nano));
        }
        fprintf(f, "# HELP tenantd_cost_unpriced_total Records the CostPolicy has no price "
                   "for (never counted as zero: see /v1/usage for the last one).\n"
                   "# TYPE tenantd_cost_unpriced_total counter\n"
                   "tenantd_cost_unpriced_total %llu\n",
                (unsigned long long)m->unpriced);
    }
    fputs("# HELP tenantd_gpus_in_use GPUs held by a tenant's admitted workloads.\n"
          "# TYPE tenantd_gpus_in_use gauge\n",
          f);
    for (size_t i = 0; i < m->ntenants; i++) {
        fputs("tenantd_gpus_in_use{tenant=\"", f);
        label_value(f, m->tenants[i].name);
        fprintf(f, "\"} %g\n", (double)m->tenants[i].gpus_in_use_milli / 1000.0);
    }
    fputs("# HELP tenantd_gpu_quota Nominal GPU quota of the ClusterQueues a tenant's "
          "LocalQueues use.\n# TYPE tenantd_gpu_quota gauge\n",
          f);
    for (size_t i = 0; i < m->ntenants; i++) {
        fputs("tenantd_gpu_quota{tenant=\"", f);
        label_value(f, m->tenants[i].name);
        fprintf(f, "\"} %g\n", (double)m->tenants[i].gpu_quota_milli / 1000.0);
    }
    fputs("# HELP tenantd_workloads_pending Workloads of a tenant waiting in the batch queue.\n"
          "# TYPE tenantd_workloads_pending gauge\n",
          f);
    for (size_t i = 0; i < m->ntenants; i++) {
        fputs("tenantd_workloads_pending{tenant=\"", f);
        label_value(f, m->tenants[i].name);
        fprintf(f, "\"} %lld\n", (long long)m->tenants[i].pending);
    }
    /* a gauge: it starts again with each period (calendar month, UTC) */
    fputs("# HELP tenantd_usage_tokens Tokens of a tenant's requests committed to the ledger "
          "this period (calendar month, UTC).\n# TYPE tenantd_usage_tokens gauge\n",
          f);
    /* a tenant with no request this period still has its series, at 0 */
    for (size_t i = 0; i < m->ntenants; i++) {
        size_t k = 0;
        while (k < m->nmsums && strcmp(m->msums[k].tenant, m->tenants[i].name) != 0)
            k++;
        if (k < m->nmsums)
            continue;
        for (int d = 0; d < 2; d++) {
            fputs("tenantd_usage_tokens{tenant=\"", f);
            label_value(f, m->tenants[i].name);
            fprintf(f, "\",model=\"\",direction=\"%s\"} %lld\n", d ? "out" : "in",
                    (long long)(d ? m->tenants[i].tokens_out : m->tenants[i].tokens_in));
        }
    }
    for (size_t i = 0; i < m->nmsums; i++) {
        for (int d = 0; d < 2; d++) {
            fputs("tenantd_usage_tokens{tenant=\"", f);
            label_value(f, m->msums[i].tenant);
            fputs("\",model=\"", f);
            label_value(f, m->msums[i].model);
            fprintf(f, "\",direction=\"%s\"} %lld\n", d ? "out" : "in",
                    (long long)(d ? m->msums[i].tokens_out : m->msums[i].tokens_in));
        }
    }
    pthread_mutex_unlock(&m->mu);
    if (fclose(f) != 0) {
        free(buf);
        return TD_ENOMEM;
    }
    char *all = realloc(*text, *len + n + 1);
    if (!all) {
        free(buf);
        return TD_ENOMEM;
    }
    memcpy(all + *len, buf, n + 1);
    *text = all;
    *len += n;
    free(buf);
    return TD_OK;
}
