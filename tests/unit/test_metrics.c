/* test_metrics.c - metrics.c: the exact Prometheus text for a few series,
 * label escaping, series at 0 for every named tenant and route, slots not in
 * use and out of range, and two threads
 * recording at once (lazy blocks raced into existence, sums exact). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/metrics.h"

#define MS 1000000ULL

static const char *const tenant_names[] = {"team-a", "we\"ird\\na\nme", NULL, "team-d"};
static const char *const route_names[] = {"completions", "chat", NULL};

static const char *names(void *arg, char kind, uint32_t slot)
{
    (void)arg;
    if (kind == 't')
        return slot < 4 ? tenant_names[slot] : NULL;
    assert_int_equal(kind, 'r');
    return slot < 3 ? route_names[slot] : NULL;
}

static char *render(const td_metrics *m, const char *(*name_of)(void *, char, uint32_t))
{
    char *out = NULL;
    size_t len = 0;
    assert_int_equal(td_metrics_render(m, name_of, NULL, &out, &len), TD_OK);
    assert_int_equal(len, strlen(out));
    return out;
}

static void test_outcome_names(void **state)
{
    (void)state;
    static const struct {
        td_outcome o;
        const char *name;
    } rows[] = {
        {TD_OUT_ACCEPTED, "accepted"},
        {TD_OUT_RATE_LIMITED, "rate_limited"},
        {TD_OUT_CONCURRENCY_LIMITED, "concurrency_limited"},
        {TD_OUT_SHED, "shed"},
        {TD_OUT_UPSTREAM_ERROR, "upstream_error"},
        {TD_OUT_TIMEOUT, "timeout"},
        {TD_OUT_BAD_REQUEST, "bad_request"},
        {TD_OUT_UNAUTHORIZED, "unauthorized"},
        {TD_OUT_BUDGET_EXCEEDED, "budget_exceeded"},
        {TD_OUT_CLIENT_CLOSED, "client_closed"},
        {TD_OUT_BUDGET_CUT, "budget_cut"},
        {TD_OUT_NO_ROUTE, "no_route"},
        {TD_OUT_COUNT, "unknown"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        assert_string_equal(td_outcome_name(rows[i].o), rows[i].name);
}

static const char *const empty_parts[] = {
    "# HELP tenantd_requests_total Requests finished at the gateway, by tenant, route and "
    "outcome.\n",
    "# TYPE tenantd_requests_total counter\n",
    "# HELP tenantd_cost_units_total Cost units charged (after reconciliation), in the route's "
    "cost model.\n",
    "# TYPE tenantd_cost_units_total counter\n",
    "# HELP tenantd_shed_total Requests shed (503), by tenant, route and the criticality they were "
    "served at.\n",
    "# TYPE tenantd_shed_total counter\n",
    "# HELP tenantd_request_duration_seconds End-to-end latency of requests that reached the "
    "upstream.\n",
    "# TYPE tenantd_request_duration_seconds histogram\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"0.0005\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"0.001\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"0.0025\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"0.005\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"0.01\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"0.025\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"0.05\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"0.1\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"0.25\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"0.5\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"1\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"2.5\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"5\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"10\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"+Inf\"} 0\n",
    "tenantd_request_duration_seconds_sum{tenant=\"team-a\"} 0\n",
    "tenantd_request_duration_seconds_count{tenant=\"team-a\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"0.0005\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"0.001\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"0.0025\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"0.005\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"0.01\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"0.025\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"0.05\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"0.1\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"0.25\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"0.5\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"1\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"2.5\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"5\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"10\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"+Inf\"} 0\n",
    "tenantd_request_duration_seconds_sum{tenant=\"we\\\"ird\\\\na\\nme\"} 0\n",
    "tenantd_request_duration_seconds_count{tenant=\"we\\\"ird\\\\na\\nme\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"0.0005\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"0.001\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"0.0025\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"0.005\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"0.01\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"0.025\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"0.05\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"0.1\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"0.25\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"0.5\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"1\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"2.5\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"5\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"10\"} 0\n",
    "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"+Inf\"} 0\n",
    "tenantd_request_duration_seconds_sum{tenant=\"team-d\"} 0\n",
    "tenantd_request_duration_seconds_count{tenant=\"team-d\"} 0\n",
    "# HELP tenantd_queue_depth Requests waiting in a route's criticality queue.\n",
    "# TYPE tenantd_queue_depth gauge\n",
    "tenantd_queue_depth{route=\"completions\",criticality=\"critical_plus\"} 0\n",
    "tenantd_queue_depth{route=\"completions\",criticality=\"critical\"} 0\n",
    "tenantd_queue_depth{route=\"completions\",criticality=\"sheddable_plus\"} 0\n",
    "tenantd_queue_depth{route=\"completions\",criticality=\"sheddable\"} 0\n",
    "tenantd_queue_depth{route=\"chat\",criticality=\"critical_plus\"} 0\n",
    "tenantd_queue_depth{route=\"chat\",criticality=\"critical\"} 0\n",
    "tenantd_queue_depth{route=\"chat\",criticality=\"sheddable_plus\"} 0\n",
    "tenantd_queue_depth{route=\"chat\",criticality=\"sheddable\"} 0\n",
    "# HELP tenantd_inflight Requests of a tenant in flight to upstreams.\n",
    "# TYPE tenantd_inflight gauge\n",
    "tenantd_inflight{tenant=\"team-a\"} 0\n",
    "tenantd_inflight{tenant=\"we\\\"ird\\\\na\\nme\"} 0\n",
    "tenantd_inflight{tenant=\"team-d\"} 0\n",
    "# HELP tenantd_limit_rejections_total Requests a tenant's limit refused: mode=\"enforce\" got "
    "429, mode=\"shadow\" would have and went on.\n",
    "# TYPE tenantd_limit_rejections_total counter\n",
    "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"rate\",mode=\"enforce\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"rate\",mode=\"shadow\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"concurrency\",mode=\"enforce\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"concurrency\",mode=\"shadow\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"budget\",mode=\"enforce\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"budget\",mode=\"shadow\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"key_rate\",mode=\"enforce\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"key_rate\",mode=\"shadow\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"key_concurrency\",mode=\"enforce\"} "
    "0\n",
    "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"key_concurrency\",mode=\"shadow\"} "
    "0\n",
    "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"key_budget\",mode=\"enforce\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"key_budget\",mode=\"shadow\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"rate\",mode="
    "\"enforce\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"rate\",mode=\"shadow\"}"
    " 0\n",
    "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"concurrency\",mode="
    "\"enforce\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"concurrency\",mode="
    "\"shadow\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"budget\",mode="
    "\"enforce\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"budget\",mode="
    "\"shadow\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"key_rate\",mode="
    "\"enforce\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"key_rate\",mode="
    "\"shadow\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"key_concurrency\",mode="
    "\"enforce\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"key_concurrency\",mode="
    "\"shadow\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"key_budget\",mode="
    "\"enforce\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"key_budget\",mode="
    "\"shadow\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"rate\",mode=\"enforce\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"rate\",mode=\"shadow\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"concurrency\",mode=\"enforce\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"concurrency\",mode=\"shadow\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"budget\",mode=\"enforce\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"budget\",mode=\"shadow\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"key_rate\",mode=\"enforce\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"key_rate\",mode=\"shadow\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"key_concurrency\",mode=\"enforce\"} "
    "0\n",
    "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"key_concurrency\",mode=\"shadow\"} "
    "0\n",
    "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"key_budget\",mode=\"enforce\"} 0\n",
    "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"key_budget\",mode=\"shadow\"} 0\n",
    "# HELP tenantd_shared_limit_degraded 1 while shared (Redis) limits are unreachable and local "
    "limits decide.\n",
    "# TYPE tenantd_shared_limit_degraded gauge\n",
    "tenantd_shared_limit_degraded 0\n",
    "# HELP tenantd_shared_limit_degradations_total Times shared (Redis) limits became "
    "unreachable.\n",
    "# TYPE tenantd_shared_limit_degradations_total counter\n",
    "tenantd_shared_limit_degradations_total 0\n",
    "# HELP tenantd_gateway_client_connections Client connections open on the data listener, by "
    "whether a valid key was seen.\n",
    "# TYPE tenantd_gateway_client_connections gauge\n",
    "tenantd_gateway_client_connections{state=\"authenticated\"} 0\n",
    "tenantd_gateway_client_connections{state=\"unauthenticated\"} 0\n",
    "# HELP tenantd_gateway_client_connection_limit Client connections the data listener holds at "
    "most (open files less the reserve).\n",
    "# TYPE tenantd_gateway_client_connection_limit gauge\n",
    "tenantd_gateway_client_connection_limit 0\n",
    "# HELP tenantd_gateway_connections_closed_total Client connections the gateway refused or "
    "closed to keep descriptors for others.\n",
    "# TYPE tenantd_gateway_connections_closed_total counter\n",
    "tenantd_gateway_connections_closed_total{reason=\"per_address\"} 0\n",
    "tenantd_gateway_connections_closed_total{reason=\"limit\"} 0\n",
    "tenantd_gateway_connections_closed_total{reason=\"evicted\"} 0\n",
    "tenantd_gateway_connections_closed_total{reason=\"auth_timeout\"} 0\n",
    "tenantd_gateway_connections_closed_total{reason=\"ignored_retry_after\"} 0\n",
    "# HELP tenantd_gateway_tarpitted_total 429s held back before they were sent, to a connection "
    "that kept retrying at once.\n",
    "# TYPE tenantd_gateway_tarpitted_total counter\n",
    "tenantd_gateway_tarpitted_total 0\n",
};

static void test_render_empty(void **state)
{
    (void)state;
    td_metrics *m = NULL;
    assert_int_equal(td_metrics_create(0, 3, &m), TD_EINVAL);
    assert_int_equal(td_metrics_create(4, 3, &m), TD_OK);
    char *out = render(m, names);
    static char want[65536];
    want[0] = '\0';
    for (size_t i = 0; i < sizeof empty_parts / sizeof empty_parts[0]; i++)
        strcat(want, empty_parts[i]);
    assert_string_equal(out, want);
    free(out);
    td_metrics_destroy(m);
    td_metrics_destroy(NULL);
}

static void test_render_exact(void **state)
{
    (void)state;
    td_metrics *m = NULL;
    assert_int_equal(td_metrics_create(4, 3, &m), TD_OK);
    static const struct {
        uint32_t tenant, route;
        td_outcome o;
        uint64_t latency_ns;
        double cost;
    } rows[] = {
        {0, 0, TD_OUT_ACCEPTED, 300000, 150},
        {0, 0, TD_OUT_ACCEPTED, 300000, 150},
        {0, 1, TD_OUT_RATE_LIMITED, 1000, 0},
        {1, 0, TD_OUT_TIMEOUT, 30000 * MS, 12.25},
        {2, 0, TD_OUT_ACCEPTED, MS, 1},     /* tenant slot not in use: not rendered */
        {0, 2, TD_OUT_ACCEPTED, 2 * MS, 7}, /* route not in use: only in the histogram */
        {TD_METRICS_NONE, TD_METRICS_NONE, TD_OUT_UNAUTHORIZED, 1000, 0},
        {9, 0, TD_OUT_ACCEPTED, MS, 1}, /* out of range: ignored */
        {0, 9, TD_OUT_ACCEPTED, MS, 1},
        {0, 0, TD_OUT_COUNT, MS, 1},
        {3, 1, TD_OUT_SHED, 500, 0}, /* fast rejection: no latency sample */
        {3, 1, TD_OUT_UPSTREAM_ERROR, 500000, 0.000001},
        {0, TD_METRICS_NONE, TD_OUT_NO_ROUTE, 1000, 0}, /* a 404: the tenant known, no route */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        td_metrics_request(m, rows[i].tenant, rows[i].route, rows[i].o, rows[i].latency_ns,
                           rows[i].cost);
    td_metrics_shed(m, 3, 1, TD_CRIT_SHEDDABLE);
    td_metrics_shed(m, 3, 1, TD_CRIT_COUNT); /* out of range: ignored */
    td_metrics_shed(m, 9, 1, TD_CRIT_SHEDDABLE);
    td_metrics_queue_add(m, 0, TD_CRIT_CRITICAL, 3);
    td_metrics_queue_add(m, 0, TD_CRIT_CRITICAL, -1);
    td_metrics_queue_add(m, 1, TD_CRIT_SHEDDABLE, 1);
    td_metrics_queue_add(m, 1, TD_CRIT_SHEDDABLE, -1);
    td_metrics_queue_add(m, 1, TD_CRIT_SHEDDABLE_PLUS, 4);
    td_metrics_queue_add(m, 7, TD_CRIT_SHEDDABLE, 1); /* ignored */
    td_metrics_inflight_add(m, 0, 2);
    td_metrics_inflight_add(m, 3, 1);
    td_metrics_inflight_add(m, 3, -1);
    td_metrics_inflight_add(m, 2, 5); /* slot not in use */
    td_metrics_limit_rejection(m, 0, TD_LIMIT_RATE, false);
    td_metrics_limit_rejection(m, 0, TD_LIMIT_RATE, false);
    td_metrics_limit_rejection(m, 0, TD_LIMIT_CONCURRENCY, true);
    td_metrics_limit_rejection(m, 2, TD_LIMIT_RATE, true);     /* slot not in use */
    td_metrics_limit_rejection(m, 99999, TD_LIMIT_RATE, true); /* out of range: ignored */
    td_metrics_shared_degraded(m, 1);
    td_metrics_shared_degraded(m, 1);
    td_metrics_shared_degraded(m, 0);
    td_metrics_conns_add(m, 3, 2);
    td_metrics_conns_add(m, -1, -1);
    td_metrics_conn_limit(m, 384);
    td_metrics_conn_closed(m, TD_CONN_PER_ADDRESS);
    td_metrics_conn_closed(m, TD_CONN_PER_ADDRESS);
    td_metrics_conn_closed(m, TD_CONN_EVICTED);
    for (int i = 0; i < 3; i++)
        td_metrics_conn_closed(m, TD_CONN_AUTH_TIMEOUT);
    td_metrics_conn_closed(m, TD_CONN_IGNORED_RETRY_AFTER);
    td_metrics_tarpitted(m);
    td_metrics_tarpitted(m);
    td_metrics_conn_closed(m, TD_CONN_REASON_COUNT); /* out of range: ignored */
    td_metrics_shared_degraded(m, 1);

    static const char *const want_parts[] = {
        "# HELP tenantd_requests_total Requests finished at the gateway, by tenant, route and "
        "outcome.\n",
        "# TYPE tenantd_requests_total counter\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"completions\",outcome=\"accepted\"} 2\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"completions\",outcome=\"rate_limited\"} "
        "0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"completions\",outcome=\"concurrency_"
        "limited\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"completions\",outcome=\"shed\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"completions\",outcome=\"upstream_error\"}"
        " 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"completions\",outcome=\"timeout\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"completions\",outcome=\"bad_request\"} "
        "0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"completions\",outcome=\"unauthorized\"} "
        "0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"completions\",outcome=\"budget_"
        "exceeded\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"completions\",outcome=\"client_closed\"} "
        "0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"completions\",outcome=\"budget_cut\"} "
        "0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"completions\",outcome=\"no_route\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"chat\",outcome=\"accepted\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"chat\",outcome=\"rate_limited\"} 1\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"chat\",outcome=\"concurrency_limited\"} "
        "0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"chat\",outcome=\"shed\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"chat\",outcome=\"upstream_error\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"chat\",outcome=\"timeout\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"chat\",outcome=\"bad_request\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"chat\",outcome=\"unauthorized\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"chat\",outcome=\"budget_exceeded\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"chat\",outcome=\"client_closed\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"chat\",outcome=\"budget_cut\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"chat\",outcome=\"no_route\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"\",outcome=\"accepted\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"\",outcome=\"rate_limited\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"\",outcome=\"concurrency_limited\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"\",outcome=\"shed\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"\",outcome=\"upstream_error\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"\",outcome=\"timeout\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"\",outcome=\"bad_request\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"\",outcome=\"unauthorized\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"\",outcome=\"budget_exceeded\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"\",outcome=\"client_closed\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"\",outcome=\"budget_cut\"} 0\n",
        "tenantd_requests_total{tenant=\"team-a\",route=\"\",outcome=\"no_route\"} 1\n",
        "tenantd_requests_total{tenant=\"we\\\"ird\\\\na\\nme\",route=\"completions\",outcome="
        "\"accepted\"} 0\n",
        "tenantd_requests_total{tenant=\"we\\\"ird\\\\na\\nme\",route=\"completions\",outcome="
        "\"rate_limited\"} 0\n",
        "tenantd_requests_total{tenant=\"we\\\"ird\\\\na\\nme\",route=\"completions\",outcome="
        "\"concurrency_limited\"} 0\n",
        "tenantd_requests_total{tenant=\"we\\\"ird\\\\na\\nme\",route=\"completions\",outcome="
        "\"shed\"} 0\n",
        "tenantd_requests_total{tenant=\"we\\\"ird\\\\na\\nme\",route=\"completions\",outcome="
        "\"upstream_error\"} 0\n",
        "tenantd_requests_total{tenant=\"we\\\"ird\\\\na\\nme\",route=\"completions\",outcome="
        "\"timeout\"} 1\n",
        "tenantd_requests_total{tenant=\"we\\\"ird\\\\na\\nme\",route=\"completions\",outcome="
        "\"bad_request\"} 0\n",
        "tenantd_requests_total{tenant=\"we\\\"ird\\\\na\\nme\",route=\"completions\",outcome="
        "\"unauthorized\"} 0\n",
        "tenantd_requests_total{tenant=\"we\\\"ird\\\\na\\nme\",route=\"completions\",outcome="
        "\"budget_exceeded\"} 0\n",
        "tenantd_requests_total{tenant=\"we\\\"ird\\\\na\\nme\",route=\"completions\",outcome="
        "\"client_closed\"} 0\n",
        "tenantd_requests_total{tenant=\"we\\\"ird\\\\na\\nme\",route=\"completions\",outcome="
        "\"budget_cut\"} 0\n",
        "tenantd_requests_total{tenant=\"we\\\"ird\\\\na\\nme\",route=\"completions\",outcome=\"no_"
        "route\"} 0\n",
        "tenantd_requests_total{tenant=\"team-d\",route=\"chat\",outcome=\"accepted\"} 0\n",
        "tenantd_requests_total{tenant=\"team-d\",route=\"chat\",outcome=\"rate_limited\"} 0\n",
        "tenantd_requests_total{tenant=\"team-d\",route=\"chat\",outcome=\"concurrency_limited\"} "
        "0\n",
        "tenantd_requests_total{tenant=\"team-d\",route=\"chat\",outcome=\"shed\"} 1\n",
        "tenantd_requests_total{tenant=\"team-d\",route=\"chat\",outcome=\"upstream_error\"} 1\n",
        "tenantd_requests_total{tenant=\"team-d\",route=\"chat\",outcome=\"timeout\"} 0\n",
        "tenantd_requests_total{tenant=\"team-d\",route=\"chat\",outcome=\"bad_request\"} 0\n",
        "tenantd_requests_total{tenant=\"team-d\",route=\"chat\",outcome=\"unauthorized\"} 0\n",
        "tenantd_requests_total{tenant=\"team-d\",route=\"chat\",outcome=\"budget_exceeded\"} 0\n",
        "tenantd_requests_total{tenant=\"team-d\",route=\"chat\",outcome=\"client_closed\"} 0\n",
        "tenantd_requests_total{tenant=\"team-d\",route=\"chat\",outcome=\"budget_cut\"} 0\n",
        "tenantd_requests_total{tenant=\"team-d\",route=\"chat\",outcome=\"no_route\"} 0\n",
        "tenantd_requests_total{tenant=\"\",route=\"\",outcome=\"accepted\"} 0\n",
        "tenantd_requests_total{tenant=\"\",route=\"\",outcome=\"rate_limited\"} 0\n",
        "tenantd_requests_total{tenant=\"\",route=\"\",outcome=\"concurrency_limited\"} 0\n",
        "tenantd_requests_total{tenant=\"\",route=\"\",outcome=\"shed\"} 0\n",
        "tenantd_requests_total{tenant=\"\",route=\"\",outcome=\"upstream_error\"} 0\n",
        "tenantd_requests_total{tenant=\"\",route=\"\",outcome=\"timeout\"} 0\n",
        "tenantd_requests_total{tenant=\"\",route=\"\",outcome=\"bad_request\"} 0\n",
        "tenantd_requests_total{tenant=\"\",route=\"\",outcome=\"unauthorized\"} 1\n",
        "tenantd_requests_total{tenant=\"\",route=\"\",outcome=\"budget_exceeded\"} 0\n",
        "tenantd_requests_total{tenant=\"\",route=\"\",outcome=\"client_closed\"} 0\n",
        "tenantd_requests_total{tenant=\"\",route=\"\",outcome=\"budget_cut\"} 0\n",
        "tenantd_requests_total{tenant=\"\",route=\"\",outcome=\"no_route\"} 0\n",
        "# HELP tenantd_cost_units_total Cost units charged (after reconciliation), in the route's "
        "cost model.\n",
        "# TYPE tenantd_cost_units_total counter\n",
        "tenantd_cost_units_total{tenant=\"team-a\",route=\"completions\"} 300\n",
        "tenantd_cost_units_total{tenant=\"team-a\",route=\"chat\"} 0\n",
        "tenantd_cost_units_total{tenant=\"team-a\",route=\"\"} 0\n",
        "tenantd_cost_units_total{tenant=\"we\\\"ird\\\\na\\nme\",route=\"completions\"} 12.25\n",
        "tenantd_cost_units_total{tenant=\"team-d\",route=\"chat\"} 0.000001\n",
        "tenantd_cost_units_total{tenant=\"\",route=\"\"} 0\n",
        "# HELP tenantd_shed_total Requests shed (503), by tenant, route and the criticality they "
        "were served at.\n",
        "# TYPE tenantd_shed_total counter\n",
        "tenantd_shed_total{tenant=\"team-a\",route=\"completions\",criticality=\"critical_plus\"} "
        "0\n",
        "tenantd_shed_total{tenant=\"team-a\",route=\"completions\",criticality=\"critical\"} 0\n",
        "tenantd_shed_total{tenant=\"team-a\",route=\"completions\",criticality=\"sheddable_plus\"}"
        " 0\n",
        "tenantd_shed_total{tenant=\"team-a\",route=\"completions\",criticality=\"sheddable\"} 0\n",
        "tenantd_shed_total{tenant=\"team-a\",route=\"chat\",criticality=\"critical_plus\"} 0\n",
        "tenantd_shed_total{tenant=\"team-a\",route=\"chat\",criticality=\"critical\"} 0\n",
        "tenantd_shed_total{tenant=\"team-a\",route=\"chat\",criticality=\"sheddable_plus\"} 0\n",
        "tenantd_shed_total{tenant=\"team-a\",route=\"chat\",criticality=\"sheddable\"} 0\n",
        "tenantd_shed_total{tenant=\"team-a\",route=\"\",criticality=\"critical_plus\"} 0\n",
        "tenantd_shed_total{tenant=\"team-a\",route=\"\",criticality=\"critical\"} 0\n",
        "tenantd_shed_total{tenant=\"team-a\",route=\"\",criticality=\"sheddable_plus\"} 0\n",
        "tenantd_shed_total{tenant=\"team-a\",route=\"\",criticality=\"sheddable\"} 0\n",
        "tenantd_shed_total{tenant=\"we\\\"ird\\\\na\\nme\",route=\"completions\",criticality="
        "\"critical_plus\"} 0\n",
        "tenantd_shed_total{tenant=\"we\\\"ird\\\\na\\nme\",route=\"completions\",criticality="
        "\"critical\"} 0\n",
        "tenantd_shed_total{tenant=\"we\\\"ird\\\\na\\nme\",route=\"completions\",criticality="
        "\"sheddable_plus\"} 0\n",
        "tenantd_shed_total{tenant=\"we\\\"ird\\\\na\\nme\",route=\"completions\",criticality="
        "\"sheddable\"} 0\n",
        "tenantd_shed_total{tenant=\"team-d\",route=\"chat\",criticality=\"critical_plus\"} 0\n",
        "tenantd_shed_total{tenant=\"team-d\",route=\"chat\",criticality=\"critical\"} 0\n",
        "tenantd_shed_total{tenant=\"team-d\",route=\"chat\",criticality=\"sheddable_plus\"} 0\n",
        "tenantd_shed_total{tenant=\"team-d\",route=\"chat\",criticality=\"sheddable\"} 1\n",
        "tenantd_shed_total{tenant=\"\",route=\"\",criticality=\"critical_plus\"} 0\n",
        "tenantd_shed_total{tenant=\"\",route=\"\",criticality=\"critical\"} 0\n",
        "tenantd_shed_total{tenant=\"\",route=\"\",criticality=\"sheddable_plus\"} 0\n",
        "tenantd_shed_total{tenant=\"\",route=\"\",criticality=\"sheddable\"} 0\n",
        "# HELP tenantd_request_duration_seconds End-to-end latency of requests that reached the "
        "upstream.\n",
        "# TYPE tenantd_request_duration_seconds histogram\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"0.0005\"} 2\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"0.001\"} 2\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"0.0025\"} 3\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"0.005\"} 3\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"0.01\"} 3\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"0.025\"} 3\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"0.05\"} 3\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"0.1\"} 3\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"0.25\"} 3\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"0.5\"} 3\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"1\"} 3\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"2.5\"} 3\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"5\"} 3\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"10\"} 3\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-a\",le=\"+Inf\"} 3\n",
        "tenantd_request_duration_seconds_sum{tenant=\"team-a\"} 0.0026\n",
        "tenantd_request_duration_seconds_count{tenant=\"team-a\"} 3\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"0.0005\"} "
        "0\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"0.001\"} 0\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"0.0025\"} "
        "0\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"0.005\"} 0\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"0.01\"} 0\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"0.025\"} 0\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"0.05\"} 0\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"0.1\"} 0\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"0.25\"} 0\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"0.5\"} 0\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"1\"} 0\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"2.5\"} 0\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"5\"} 0\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"10\"} 0\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"we\\\"ird\\\\na\\nme\",le=\"+Inf\"} 1\n",
        "tenantd_request_duration_seconds_sum{tenant=\"we\\\"ird\\\\na\\nme\"} 30\n",
        "tenantd_request_duration_seconds_count{tenant=\"we\\\"ird\\\\na\\nme\"} 1\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"0.0005\"} 1\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"0.001\"} 1\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"0.0025\"} 1\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"0.005\"} 1\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"0.01\"} 1\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"0.025\"} 1\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"0.05\"} 1\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"0.1\"} 1\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"0.25\"} 1\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"0.5\"} 1\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"1\"} 1\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"2.5\"} 1\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"5\"} 1\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"10\"} 1\n",
        "tenantd_request_duration_seconds_bucket{tenant=\"team-d\",le=\"+Inf\"} 1\n",
        "tenantd_request_duration_seconds_sum{tenant=\"team-d\"} 0.0005\n",
        "tenantd_request_duration_seconds_count{tenant=\"team-d\"} 1\n",
        "# HELP tenantd_queue_depth Requests waiting in a route's criticality queue.\n",
        "# TYPE tenantd_queue_depth gauge\n",
        "tenantd_queue_depth{route=\"completions\",criticality=\"critical_plus\"} 0\n",
        "tenantd_queue_depth{route=\"completions\",criticality=\"critical\"} 2\n",
        "tenantd_queue_depth{route=\"completions\",criticality=\"sheddable_plus\"} 0\n",
        "tenantd_queue_depth{route=\"completions\",criticality=\"sheddable\"} 0\n",
        "tenantd_queue_depth{route=\"chat\",criticality=\"critical_plus\"} 0\n",
        "tenantd_queue_depth{route=\"chat\",criticality=\"critical\"} 0\n",
        "tenantd_queue_depth{route=\"chat\",criticality=\"sheddable_plus\"} 4\n",
        "tenantd_queue_depth{route=\"chat\",criticality=\"sheddable\"} 0\n",
        "# HELP tenantd_inflight Requests of a tenant in flight to upstreams.\n",
        "# TYPE tenantd_inflight gauge\n",
        "tenantd_inflight{tenant=\"team-a\"} 2\n",
        "tenantd_inflight{tenant=\"we\\\"ird\\\\na\\nme\"} 0\n",
        "tenantd_inflight{tenant=\"team-d\"} 0\n",
        "# HELP tenantd_limit_rejections_total Requests a tenant's limit refused: mode=\"enforce\" "
        "got 429, mode=\"shadow\" would have and went on.\n",
        "# TYPE tenantd_limit_rejections_total counter\n",
        "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"rate\",mode=\"enforce\"} 2\n",
        "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"rate\",mode=\"shadow\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"concurrency\",mode=\"enforce\"} "
        "0\n",
        "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"concurrency\",mode=\"shadow\"} "
        "1\n",
        "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"budget\",mode=\"enforce\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"budget\",mode=\"shadow\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"key_rate\",mode=\"enforce\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"key_rate\",mode=\"shadow\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"key_concurrency\",mode="
        "\"enforce\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"key_concurrency\",mode="
        "\"shadow\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"key_budget\",mode=\"enforce\"} "
        "0\n",
        "tenantd_limit_rejections_total{tenant=\"team-a\",limit=\"key_budget\",mode=\"shadow\"} "
        "0\n",
        "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"rate\",mode="
        "\"enforce\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"rate\",mode="
        "\"shadow\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"concurrency\",mode="
        "\"enforce\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"concurrency\",mode="
        "\"shadow\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"budget\",mode="
        "\"enforce\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"budget\",mode="
        "\"shadow\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"key_rate\",mode="
        "\"enforce\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"key_rate\",mode="
        "\"shadow\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"key_concurrency\","
        "mode=\"enforce\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"key_concurrency\","
        "mode=\"shadow\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"key_budget\",mode="
        "\"enforce\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"we\\\"ird\\\\na\\nme\",limit=\"key_budget\",mode="
        "\"shadow\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"rate\",mode=\"enforce\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"rate\",mode=\"shadow\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"concurrency\",mode=\"enforce\"} "
        "0\n",
        "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"concurrency\",mode=\"shadow\"} "
        "0\n",
        "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"budget\",mode=\"enforce\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"budget\",mode=\"shadow\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"key_rate\",mode=\"enforce\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"key_rate\",mode=\"shadow\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"key_concurrency\",mode="
        "\"enforce\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"key_concurrency\",mode="
        "\"shadow\"} 0\n",
        "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"key_budget\",mode=\"enforce\"} "
        "0\n",
        "tenantd_limit_rejections_total{tenant=\"team-d\",limit=\"key_budget\",mode=\"shadow\"} "
        "0\n",
        "# HELP tenantd_shared_limit_degraded 1 while shared (Redis) limits are unreachable and "
        "local limits decide.\n",
        "# TYPE tenantd_shared_limit_degraded gauge\n",
        "tenantd_shared_limit_degraded 1\n",
        "# HELP tenantd_shared_limit_degradations_total Times shared (Redis) limits became "
        "unreachable.\n",
        "# TYPE tenantd_shared_limit_degradations_total counter\n",
        "tenantd_shared_limit_degradations_total 2\n",
        "# HELP tenantd_gateway_client_connections Client connections open on the data listener, "
        "by whether a valid key was seen.\n",
        "# TYPE tenantd_gateway_client_connections gauge\n",
        "tenantd_gateway_client_connections{state=\"authenticated\"} 1\n",
        "tenantd_gateway_client_connections{state=\"unauthenticated\"} 1\n",
        "# HELP tenantd_gateway_client_connection_limit Client connections the data listener holds "
        "at most (open files less the reserve).\n",
        "# TYPE tenantd_gateway_client_connection_limit gauge\n",
        "tenantd_gateway_client_connection_limit 384\n",
        "# HELP tenantd_gateway_connections_closed_total Client connections the gateway refused or "
        "closed to keep descriptors for others.\n",
        "# TYPE tenantd_gateway_connections_closed_total counter\n",
        "tenantd_gateway_connections_closed_total{reason=\"per_address\"} 2\n",
        "tenantd_gateway_connections_closed_total{reason=\"limit\"} 0\n",
        "tenantd_gateway_connections_closed_total{reason=\"evicted\"} 1\n",
        "tenantd_gateway_connections_closed_total{reason=\"auth_timeout\"} 3\n",
        "tenantd_gateway_connections_closed_total{reason=\"ignored_retry_after\"} 1\n",
        "# HELP tenantd_gateway_tarpitted_total 429s held back before they were sent, to a "
        "connection that kept retrying at once.\n",
        "# TYPE tenantd_gateway_tarpitted_total counter\n",
        "tenantd_gateway_tarpitted_total 2\n",
    };
    static char want[65536];
    want[0] = '\0';
    for (size_t i = 0; i < sizeof want_parts / sizeof want_parts[0]; i++)
        strcat(want, want_parts[i]);
    char *out = render(m, names);
    if (strcmp(out, want) != 0) {
        /* Show where they part, which the whole strings would hide. */
        size_t i = 0;
        while (out[i] && out[i] == want[i])
            i++;
        fail_msg("differs at byte %zu:\n--- got\n%s\n--- want\n%s", i, out + i, want + i);
    }
    free(out);
    td_metrics_destroy(m);
}

/* ---- two threads ---- */

#define ITERS    128000 /* a multiple of lcm(64, 40) = 320 */
#define NTENANTS 64
#define NROUTES  40

static const char *numbered(void *arg, char kind, uint32_t slot)
{
    static char tnames[NTENANTS][8], rnames[NROUTES][8];
    (void)arg;
    if (kind == 't' && slot < NTENANTS) {
        snprintf(tnames[slot], sizeof tnames[slot], "t%u", slot);
        return tnames[slot];
    }
    if (kind == 'r' && slot < NROUTES) {
        snprintf(rnames[slot], sizeof rnames[slot], "r%u", slot);
        return rnames[slot];
    }
    return NULL;
}

static void *record(void *arg)
{
    td_metrics *m = arg;
    for (uint32_t k = 0; k < ITERS; k++) {
        td_metrics_request(m, k % NTENANTS, k % NROUTES, TD_OUT_ACCEPTED, MS, 0.5);
        td_metrics_inflight_add(m, k % NTENANTS, 1);
        td_metrics_queue_add(m, k % NROUTES, TD_CRIT_CRITICAL, 1);
        td_metrics_inflight_add(m, k % NTENANTS, -1);
        td_metrics_queue_add(m, k % NROUTES, TD_CRIT_CRITICAL, -1);
    }
    return NULL;
}

static void test_two_threads(void **state)
{
    (void)state;
    td_metrics *m = NULL;
    assert_int_equal(td_metrics_create(65536, 1024, &m), TD_OK);
    pthread_t a, b;
    assert_int_equal(pthread_create(&a, NULL, record, m), 0);
    assert_int_equal(pthread_create(&b, NULL, record, m), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    char *out = render(m, numbered);
    /* (t0, r0) is hit when k = 0 mod 320: 400 times per thread. */
    assert_non_null(strstr(
        out, "\ntenantd_requests_total{tenant=\"t0\",route=\"r0\",outcome=\"accepted\"} 800\n"));
    assert_non_null(strstr(out, "\ntenantd_cost_units_total{tenant=\"t0\",route=\"r0\"} 400\n"));
    assert_non_null(strstr(out, "\ntenantd_request_duration_seconds_count{tenant=\"t63\"} 4000\n"));
    assert_non_null(strstr(out, "\ntenantd_request_duration_seconds_sum{tenant=\"t63\"} 4\n"));
    /* every named tenant and route has its gauges, at 0 once all ended */
    assert_non_null(strstr(out, "\ntenantd_inflight{tenant=\"t63\"} 0\n"));
    assert_non_null(
        strstr(out, "\ntenantd_queue_depth{route=\"r39\",criticality=\"critical\"} 0\n"));
    for (const char *p = out; (p = strstr(p, "\ntenantd_inflight{")); p++)
        assert_string_equal(strchr(p + 1, ' ')[1] == '0' ? "0" : "not 0", "0");
    for (const char *p = out; (p = strstr(p, "\ntenantd_queue_depth{")); p++)
        assert_string_equal(strchr(p + 1, ' ')[1] == '0' ? "0" : "not 0", "0");
    /* Every request is there once. */
    uint64_t total = 0, series = 0;
    for (const char *p = out; (p = strstr(p, "\ntenantd_requests_total{")); p++) {
        const char *sp = strchr(p + 1, ' ');
        total += strtoull(sp + 1, NULL, 10);
        series++;
    }
    assert_int_equal(total, 2 * ITERS);
    assert_int_equal(series, 320 * TD_OUT_COUNT); /* each pair used: every outcome */
    free(out);
    td_metrics_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_outcome_names),
        cmocka_unit_test(test_render_empty),
        cmocka_unit_test(test_render_exact),
        cmocka_unit_test(test_two_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
