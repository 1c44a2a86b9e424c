/* explain.c - see explain.h. */
#include "daemon/explain.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/queueview.h"
#include "daemon/workloads.h"
#include "queue/queue.h"

#include <stdio.h>
#include <time.h>

static const char *mode_name(bool shadow)
{
    return shadow ? "shadow" : "enforce";
}

/* One budget of amount_nano in period p with spent of it in the period
 * current at now_s; NULL out of memory. */
static json_t *budget_json(td_period p, int64_t amount_nano, int64_t spent, bool shadow,
                           const char *cur, int64_t now_s)
{
    int64_t start, end;
    td_period_bounds(p, now_s, &start, &end);
    char from[32], resets[32];
    td_rfc3339(start, from, sizeof from);
    td_rfc3339(end, resets, sizeof resets);
    return json_pack("{s:s, s:f, s:f, s:f, s:s, s:s, s:s, s:s}", "period", td_period_name(p),
                     "amount", (double)amount_nano / TD_MONEY_NANO, "spent",
                     (double)spent / TD_MONEY_NANO, "remaining",
                     (double)(amount_nano > spent ? amount_nano - spent : 0) / TD_MONEY_NANO,
                     "currency", cur, "periodStart", from, "resetsAt", resets, "enforcement",
                     mode_name(shadow));
}

/* A list of budgets with the spend of their current periods at now_s
 * (t's, or its key k's when k is not NULL; with --redis across replicas,
 * asked of Redis now); NULL out of memory. */
static json_t *budgets_json(td_gateway *g, const td_gw_tenant *t, const td_gw_key *k,
                            const td_gw_budget *bud, size_t n, const char *cur, int64_t now_s)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++) {
        const td_gw_budget *b = &bud[i];
        int64_t spent = td_gateway_budget_spent(g, t, k, b->period, now_s, true);
        json_t *x = budget_json(b->period, b->amount_nano, spent, b->shadow, cur, now_s);
        if (!x || json_array_append_new(list, x) < 0) {
            json_decref(list);
            return NULL;
        }
    }
    return list;
}

/* t's budgets for models (spec.budgets[] with models), each as a budget
 * of budgets_json with its "models" first; NULL out of memory. */
static json_t *model_budgets_json(td_gateway *g, const td_gw_tenant *t, const char *cur,
                                  int64_t now_s)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < t->nmodel_budgets; i++) {
        const td_gw_model_budget *m = &t->model_budgets[i];
        int64_t spent = td_gateway_model_budget_spent(g, m, now_s, true);
        json_t *models = json_array();
        for (size_t j = 0; models && j < m->nmodels; j++)
            if (json_array_append_new(models, json_string(m->models[j])) < 0) {
                json_decref(models);
                models = NULL;
            }
        json_t *b = budget_json(m->b.period, m->b.amount_nano, spent, m->b.shadow, cur, now_s);
        json_t *x = json_object();
        /* set_new and append_new take their value over even when they fail */
        if (!x || json_object_set_new(x, "models", models) < 0 || !models || !b ||
            json_object_update(x, b) < 0) {
            if (!x)
                json_decref(models);
            json_decref(x);
            x = NULL;
        }
        json_decref(b);
        if (!x || json_array_append_new(list, x) < 0) {
            json_decref(list);
            return NULL;
        }
    }
    return list;
}

/* One endpoint (merged over the workers, m) with each worker's own state
 * from raw[0..n) (the same route and address). */
static json_t *endpoint_json(const td_ep_view *m, const td_ep_view *raw, size_t n)
{
    json_t *o = json_pack("{s:s, s:s, s:i, s:I, s:I, s:i}", "address", m->address, "state",
                          td_ep_view_state(m), "inFlight", (json_int_t)m->inflight, "requests",
                          (json_int_t)m->requests, "ejections", (json_int_t)m->ejections,
                          "consecutiveFailures", (json_int_t)m->failures);
    if (!o)
        return NULL;
    if (m->ejected_for_ns)
        json_object_set_new(o, "ejectedForMs",
                            json_integer((json_int_t)(m->ejected_for_ns / 1000000)));
    if (m->from_name) {
        json_object_set_new(o, "resolvedFrom", json_string(m->source));
        if (m->resolved_age_ns)
            json_object_set_new(o, "resolvedMsAgo",
                                json_integer((json_int_t)(m->resolved_age_ns / 1000000)));
        json_object_set_new(o, "lookupFailing", json_boolean(m->lookup_failing));
    }
    if (m->scraped)
        json_object_set_new(o, "lastScrape",
                            json_pack("{s:f, s:f, s:I}", "waiting", m->waiting, "kvCacheUsage",
                                      m->kv_usage, "msAgo",
                                      (json_int_t)(m->scrape_age_ns / 1000000)));
    json_t *ws = json_array();
    for (size_t i = 0; ws && i < n; i++) {
        if (raw[i].route != m->route || strcmp(raw[i].address, m->address) != 0)
            continue;
        json_t *w = json_pack("{s:i, s:s, s:i, s:I}", "worker", (int)raw[i].worker, "state",
                              td_ep_view_state(&raw[i]), "inFlight", (json_int_t)raw[i].inflight,
                              "asOfMsAgo", (json_int_t)(raw[i].snapshot_age_ns / 1000000));
        if (w && raw[i].ejected_for_ns)
            json_object_set_new(w, "ejectedForMs",
                                json_integer((json_int_t)(raw[i].ejected_for_ns / 1000000)));
        json_array_append_new(ws, w);
    }
    json_object_set_new(o, "workers", ws ? ws : json_null());
    return o;
}

/* Every Route of c with its endpoints as the gateway's workers see them
 * (state is per worker: merged, and per worker under "workers"). */
static json_t *routes_json(td_gateway *g, const td_gw_config *c)
{
    td_ep_view *raw = NULL;
    size_t n = td_gateway_endpoint_view(g, &raw);
    td_ep_view *m = n ? malloc(n * sizeof *m) : NULL;
    size_t nm = 0;
    if (m) {
        memcpy(m, raw, n * sizeof *m);
        nm = td_ep_views_merge(m, n);
    }
    json_t *list = json_array();
    for (size_t r = 0; list && r < c->nroutes; r++) {
        const td_gw_route *rt = &c->routes[r];
        json_t *eps = json_array();
        for (size_t i = 0; eps && i < nm; i++)
            if (m[i].route == rt->slot)
                json_array_append_new(eps, endpoint_json(&m[i], raw, n));
        json_t *o = json_pack("{s:s, s:s, s:i, s:o}", "route", rt->name, "balance",
                              td_balance_name(rt->balance), "capacityPerEndpoint",
                              (json_int_t)rt->capacity, "endpoints", eps ? eps : json_array());
        if (o && json_array_size(json_object_get(o, "endpoints")) == 0)
            json_object_set_new(o, "note",
                                json_string("no gateway worker has served this Route yet"));
        json_array_append_new(list, o);
    }
    free(raw);
    free(m);
    return list;
}

td_status td_explain_request(td_gateway *g, const char *tenant, uint64_t now_ns, json_t **out,
                             td_err *err)
{
    td_gw_config *held = NULL;
    const td_gw_config *c = td_gateway_config(g, &held);
    const td_gw_tenant *t = td_gw_tenant_by_name(c, tenant);
    if (!t) {
        td_gw_config_unref(held);
        return td_err_set(err, TD_ENOTFOUND,
                          "tenant %s is not served by the gateway (no Tenant of that name)",
                          tenant);
    }
    td_limiter *l = td_gateway_limiter(g);
    json_t *rate = t->rate.cost > 0
                       ? json_pack("{s:f, s:f, s:f, s:s, s:f}", "cost", t->rate.cost, "perSeconds",
                                   (double)t->rate.per_ns / 1e9, "burst", t->rate.burst,
                                   "enforcement", mode_name(t->shadow_rate), "availableNow",
                                   td_limiter_available(l, t->slot, &t->rate, now_ns))
                       : json_pack("{s:b}", "unlimited", 1);
    json_t *conc = t->concurrency
                       ? json_pack("{s:i, s:i, s:s}", "limit", (json_int_t)t->concurrency,
                                   "inFlight", (json_int_t)td_limiter_inflight(l, t->slot),
                                   "enforcement", mode_name(t->shadow_concurrency))
                       : json_pack("{s:b, s:i}", "unlimited", 1, "inFlight",
                                   (json_int_t)td_limiter_inflight(l, t->slot));
    json_t *o = json_pack("{s:s, s:{s:o, s:o, s:s, s:f}, s:b}", "tenant", t->name, "limits",
                          "rate", rate, "concurrency", conc, "criticality",
                          td_criticality_name(t->criticality), "weight", t->weight,
                          "sharedLimits", td_gateway_shared(g) != NULL);
    if (o && td_gateway_budget_shared(g))
        json_object_set_new(
            o, "sharedBudgets",
            json_pack("{s:b, s:b}", "shared", 1, "degraded",
                      td_gateway_budget_shared(g)->degraded(td_gateway_budget_shared(g)->ctx)));
    /* budgets: the amount, the spend of the current period, when it resets */
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    const char *cur = c->cost_policy ? td_costpolicy_currency(c->cost_policy) : "";
    json_t *budgets =
        budgets_json(g, t, NULL, t->budgets, t->nbudgets, cur, (int64_t)wall.tv_sec);
    json_t *mbudgets = model_budgets_json(g, t, cur, (int64_t)wall.tv_sec);
    /* keys with limits of their own (the tenant's apply to every key too) */
    json_t *keys = json_array();
    td_limiter *kl = td_gateway_key_limiter(g);
    for (size_t i = 0; keys && i < t->nkeys; i++) {
        const td_gw_key *k = t->keys ? &t->keys[i] : NULL;
        if (!k || !k->name)
            continue;
        json_t *kr =
            k->rate.cost > 0
                ? json_pack("{s:f, s:f, s:f, s:s, s:f}", "cost", k->rate.cost, "perSeconds",
                            (double)k->rate.per_ns / 1e9, "burst", k->rate.burst, "enforcement",
                            mode_name(t->shadow_rate), "availableNow",
                            td_limiter_available(kl, k->slot, &k->rate, now_ns))
                : json_pack("{s:s}", "inherits", "tenant");
        json_t *kc = k->concurrency
                         ? json_pack("{s:i, s:i, s:s}", "limit", (json_int_t)k->concurrency,
                                     "inFlight", (json_int_t)td_limiter_inflight(kl, k->slot),
                                     "enforcement", mode_name(t->shadow_concurrency))
                         : json_pack("{s:s}", "inherits", "tenant");
        json_t *kb = k->nbudgets ? budgets_json(g, t, k, k->budgets, k->nbudgets, cur,
                                                (int64_t)wall.tv_sec)
                                   : json_pack("{s:s}", "inherits", "tenant");
        json_array_append_new(keys, json_pack("{s:s, s:o, s:o, s:o}", "name", k->name, "rate", kr,
                                              "concurrency", kc, "budgets", kb));
    }
    if (o && budgets && mbudgets && keys) {
        json_object_set_new(json_object_get(o, "limits"), "budgets", budgets);
        json_object_set_new(json_object_get(o, "limits"), "modelBudgets", mbudgets);
        json_object_set_new(json_object_get(o, "limits"), "keys", keys);
        json_object_set_new(json_object_get(o, "limits"), "precedence",
                            json_string("a request passes its key's own concurrency, then the "
                                        "tenant's; its key's own rate, then the tenant's; its "
                                        "key's own budgets, then the tenant's for its model, "
                                        "then the tenant's for all models (reserved in all or "
                                        "none); the first enforced refusal answers"));
    } else {
        json_decref(budgets);
        json_decref(mbudgets);
        json_decref(keys);
    }
    json_t *list = json_array();
    enum { MAX = 20 };
    td_rejection rs[MAX];
    size_t n = td_recent_of(td_gateway_recent(g), t->slot, rs, MAX);
    for (size_t i = 0; o && list && i < n; i++) {
        char when[40];
        time_t s = (time_t)(rs[i].wall_ns / 1000000000ULL);
        struct tm tm;
        gmtime_r(&s, &tm);
        size_t k = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(when + k, sizeof when - k, ".%03uZ",
                 (unsigned)(rs[i].wall_ns % 1000000000ULL / 1000000));
        json_t *x =
            json_pack("{s:s, s:i, s:s, s:s, s:s, s:s}", "time", when, "status", (int)rs[i].status,
                      "reason", rs[i].reason, "mode", mode_name(rs[i].shadow), "level",
                      rs[i].key[0]          ? "key"
                      : rs[i].status == 429 ? "tenant"
                                            : "route",
                      "detail", rs[i].detail);
        if (x && rs[i].key[0])
            json_object_set_new(x, "key", json_string(rs[i].key));
        if (x && rs[i].model[0])
            json_object_set_new(x, "model", json_string(rs[i].model));
        json_array_append_new(list, x);
    }
    td_gw_config_unref(held);
    if (!o || !list || json_object_set_new(o, "recentRefusals", list) < 0) {
        json_decref(o);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    json_object_set_new(o, "sampling",
                        json_string("refusals are kept at most 100 per second per tenant"));
    held = NULL;
    c = td_gateway_config(g, &held);
    json_t *routes = routes_json(g, c);
    td_gw_config_unref(held);
    if (routes)
        json_object_set_new(o, "routes", routes);
    json_object_set_new(o, "endpointState",
                        json_string("endpoint state is kept per gateway worker and published "
                                    "every 250 ms: counts are summed over the workers, the "
                                    "state is the worst any worker holds, each worker's under "
                                    "workers"));
    *out = o;
    return TD_OK;
}

char *td_redact_keys(const char *text, const char *const *hidden, size_t n)
{
    static const char other[] = "another tenant's workload";
    size_t cap = strlen(text) + 1, len = 0;
    char *out = malloc(cap);
    for (const char *s = text; out && *s;) {
        size_t klen = 0;
        for (size_t i = 0; i < n && !klen; i++) {
            size_t l = strlen(hidden[i]);
            /* whole keys only: team-a/x must not match inside team-a/xy */
            if (l && strncmp(s, hidden[i], l) == 0 &&
                !(s[l] == '-' || s[l] == '.' || (s[l] >= 'a' && s[l] <= 'z') ||
                  (s[l] >= '0' && s[l] <= '9')))
                klen = l;
        }
        const char *piece = klen ? other : s;
        size_t plen = klen ? sizeof other - 1 : 1;
        if (len + plen + 1 > cap) {
            char *bigger = realloc(out, cap = 2 * cap + plen);
            if (!bigger) {
                free(out);
                return NULL;
            }
            out = bigger;
        }
        memcpy(out + len, piece, plen);
        len += plen;
        s += klen ? klen : 1;
    }
    if (out)
        out[len] = '\0';
    return out;
}

/* Every stored workload p may not see, as "namespace/name" (malloc'd
 * strings in a malloc'd array; *n of them). NULL with *n 0 when there are
 * none or out of memory. */
char **td_hidden_workloads(const td_config *cfg, const td_principal *p, size_t *n)
{
    json_t *const *all;
    size_t nall = td_config_list(cfg, "Workload", NULL, &all);
    char **hidden = calloc(nall ? nall : 1, sizeof *hidden);
    *n = 0;
    for (size_t i = 0; hidden && i < nall; i++) {
        const char *wns = td_json_str(all[i], "metadata.namespace");
        const char *wname = td_json_str(all[i], "metadata.name");
        if (!wns || !wname || td_authz_namespace_ok(p, wns))
            continue;
        if ((hidden[*n] = malloc(strlen(wns) + strlen(wname) + 2)) != NULL)
            sprintf(hidden[(*n)++], "%s/%s", wns, wname);
    }
    return hidden;
}

void td_hidden_free(char **hidden, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(hidden[i]);
    free(hidden);
}

/* json_string of text redacted for p's eyes. */
static json_t *redacted(const char *text, const char *const *hidden, size_t n)
{
    char *r = n ? td_redact_keys(text, hidden, n) : NULL;
    json_t *j = json_string(r ? r : text);
    free(r);
    return j;
}

static const char *state_name(td_wl_state s)
{
    return s == TD_WL_ADMITTED ? "Admitted" : s == TD_WL_PENDING ? "Pending" : "Finished";
}

static const char *event_name(td_queue_event_type t)
{
    switch (t) {
    case TD_QEV_ADMITTED: return "admitted";
    case TD_QEV_PREEMPTED: return "preempted";
    case TD_QEV_FINISHED: return "finished";
    case TD_QEV_REQUEUED: return "requeued";
    case TD_QEV_WOULD_PREEMPT: return "wouldPreempt";
    }
    return "?";
}

/* The namespace part of "ns/name" into buf. */
static const char *ns_of(const char *key, char *buf, size_t n)
{
    const char *slash = strchr(key, '/');
    size_t len = slash ? (size_t)(slash - key) : 0;
    snprintf(buf, n, "%.*s", (int)(len < n ? len : n - 1), key);
    return buf;
}

/* Kueue's order inside a ClusterQueue: higher priority first, then the
 * earlier submission (queue ids count up in submission order). */
static bool ahead_of(const td_queue *q, size_t a, size_t b)
{
    int32_t pa = td_queue_workload_priority(q, a), pb = td_queue_workload_priority(q, b);
    return pa != pb ? pa > pb : a < b;
}

td_status td_explain_workload(const td_config *cfg, const char *ns, const char *name,
                              const td_principal *p, json_t **out, td_err *err)
{
    const td_queueview *view = NULL;
    td_status st = td_queueview_get(cfg, &view, err);
    if (st != TD_OK)
        return st;
    const td_queue *q = td_queueview_queue(view);
    size_t nq = td_queue_workload_count(q);
    char key[600];
    snprintf(key, sizeof key, "%s/%s", ns, name);
    size_t id = TD_QUEUE_NONE;
    for (size_t i = 0; i < nq; i++)
        if (strcmp(td_queue_workload_key(q, i), key) == 0)
            id = i; /* the latest submission of that name */
    if (id == TD_QUEUE_NONE) {
        return td_err_set(err, TD_ENOTFOUND, "Workload %s not found", key);
    }
    size_t cq = td_queue_workload_cq(q, id);
    td_wl_state ws = td_queue_workload_state(q, id);
    size_t nhidden = 0;
    char **hidden = td_hidden_workloads(cfg, p, &nhidden);
    json_t *o = json_pack(
        "{s:s, s:s, s:s, s:o, s:s, s:s, s:s, s:i}", "namespace", ns, "name", name, "state",
        state_name(ws), "reason",
        redacted(td_queue_workload_reason(q, id), (const char *const *)hidden, nhidden),
        "clusterQueue",
        cq == TD_QUEUE_NONE ? "" : td_queue_cq_name(q, cq), "flavors",
        td_queue_workload_flavors(q, id), "placement", td_queue_workload_placement(q, id),
        "priority", (int)td_queue_workload_priority(q, id));
    json_t *ahead = json_array(), *history = json_array(), *caused = json_array(),
           *quota = json_object();
    if (!o || !ahead || !history || !caused || !quota)
        st = td_err_set(err, TD_ENOMEM, "out of memory");
    /* position among the pending of its ClusterQueue */
    size_t position = 0, others = 0, pending = 0;
    char nsbuf[300];
    for (size_t i = 0; st == TD_OK && ws == TD_WL_PENDING && cq != TD_QUEUE_NONE && i < nq; i++) {
        if (td_queue_workload_cq(q, i) != cq || td_queue_workload_state(q, i) != TD_WL_PENDING)
            continue;
        pending++;
        if (i == id || !ahead_of(q, i, id))
            continue;
        position++;
        const char *k = td_queue_workload_key(q, i);
        if (td_authz_namespace_ok(p, ns_of(k, nsbuf, sizeof nsbuf)))
            json_array_append_new(ahead, json_pack("{s:s, s:i}", "workload", k, "priority",
                                                   (int)td_queue_workload_priority(q, i)));
        else
            others++;
    }
    const td_queue_event *ev;
    size_t ne = td_queue_events(q, &ev);
    for (size_t i = 0; st == TD_OK && i < ne; i++) {
        if (ev[i].workload == id) {
            json_t *e = json_pack("{s:f, s:s, s:o}", "t", (double)ev[i].t_ns / 1e9, "type",
                                  event_name(ev[i].type), "reason",
                                  redacted(ev[i].reason, (const char *const *)hidden, nhidden));
            if ((ev[i].type == TD_QEV_PREEMPTED || ev[i].type == TD_QEV_WOULD_PREEMPT) &&
                ev[i].by != TD_QUEUE_NONE) {
                const char *by = td_queue_workload_key(q, ev[i].by);
                json_object_set_new(e, "by",
                                    json_string(td_authz_namespace_ok(
                                                    p, ns_of(by, nsbuf, sizeof nsbuf))
                                                    ? by
                                                    : "another tenant's workload"));
                json_object_set_new(e, "level", json_string(ev[i].level));
            }
            if (ev[i].type == TD_QEV_ADMITTED) {
                json_object_set_new(e, "flavors", json_string(ev[i].flavors));
                json_object_set_new(e, "borrowing", json_boolean(ev[i].borrowing));
            }
            json_array_append_new(history, e);
        } else if ((ev[i].type == TD_QEV_PREEMPTED || ev[i].type == TD_QEV_WOULD_PREEMPT) &&
                   ev[i].by == id) {
            const char *v = td_queue_workload_key(q, ev[i].workload);
            json_array_append_new(
                caused, json_pack("{s:f, s:s, s:s, s:b}", "t", (double)ev[i].t_ns / 1e9,
                                  "workload",
                                  td_authz_namespace_ok(p, ns_of(v, nsbuf, sizeof nsbuf))
                                      ? v
                                      : "another tenant's workload",
                                  "level", ev[i].level, "shadow",
                                  ev[i].type == TD_QEV_WOULD_PREEMPT));
        }
    }
    for (size_t r = 0; st == TD_OK && cq != TD_QUEUE_NONE && r < td_queue_resource_count(q); r++) {
        const char *res = td_queue_resource_name(q, r);
        int64_t nominal = td_queue_cq_nominal_milli(q, cq, res);
        int64_t used = td_queue_cq_usage_milli(q, cq, res);
        if (!nominal && !used)
            continue;
        json_object_set_new(quota, res,
                            json_pack("{s:f, s:f, s:f, s:f}", "nominal", (double)nominal / 1000,
                                      "used", (double)used / 1000, "borrowed",
                                      (double)td_queue_cq_borrowed_milli(q, cq, res) / 1000,
                                      "requested",
                                      (double)td_queue_workload_request_milli(q, id, res) / 1000));
    }
    if (st == TD_OK && ws == TD_WL_PENDING && cq != TD_QUEUE_NONE)
        json_object_set_new(o, "queue",
                            json_pack("{s:i, s:i, s:o, s:i}", "position", (int)position + 1,
                                      "pendingInClusterQueue", (int)pending, "ahead", ahead,
                                      "aheadOfOtherTenants", (int)others));
    else
        json_decref(ahead);
    if (st == TD_OK) {
        json_object_set_new(o, "history", history);
        json_object_set_new(o, "preempted", caused);
        json_object_set_new(o, "clusterQueueQuota", quota);
        *out = o;
    } else {
        json_decref(o);
        json_decref(history);
        json_decref(caused);
        json_decref(quota);
    }
    td_hidden_free(hidden, nhidden);
    return st;
}
