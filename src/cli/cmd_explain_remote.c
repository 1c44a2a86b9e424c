/* cmd_explain_remote.c - `explain request` and `explain workload`: why a
 * running tenantd refused a tenant's requests or holds a workload where it
 * is, asked over its admin listener (cli/remote.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "core/config.h"
#include <time.h>

/* One remote explain verb's flags: its own (own, with a value), -o
 * table|json, the remote flags and --help; nargs NAME arguments. */
typedef struct {
    const char *verb; /* "explain request" */
    const char *shortopts;
    const struct option *longopts;
    const char *usage;
    int own;               /* the verb's own flag: 't', 'n' */
    int nargs;             /* NAME arguments wanted */
    const char *args_want; /* what to say when their count is wrong */
} explain_flags;

/* The one parse of both remote explain verbs: fills r, *own_value and
 * *output. Bad input gets one line in one style, "tenantctl explain
 * SUBJECT: WHAT; see --help" (td__remote_bad_flag's), and exit 2. Returns
 * -1 to go on, else the exit code (TD_EXIT_OK after --help). */
static int explain_parse(const explain_flags *f, int argc, char **argv, td_remote *r,
                         const char **own_value, const char **output)
{
    td__remote_init(r);
    *own_value = NULL;
    *output = "table";
    int c;
    while ((c = td__remote_getopt(r, argc, argv, f->shortopts, f->longopts, f->usage)) != -1) {
        if (c == TD_REMOTE_HELP)
            return TD_EXIT_OK;
        if (c == f->own)
            *own_value = optarg;
        else if (c == 'o')
            *output = optarg;
        else
            return td__remote_bad_flag(f->verb, argv);
    }
    const char *what = argc - optind != f->nargs                                  ? f->args_want
                       : td_cli_choice(*output, "table|json") < 0 ? "-o must be table or json"
                           : NULL;
    if (!what)
        return -1;
    fprintf(stderr, "tenantctl %s: %s; see --help\n", f->verb, what);
    return TD_EXIT_USAGE;
}

/* `tenantctl explain request [--tenant T] [-o table|json]`: the tenant's
 * limits as the running gateway enforces them and its latest refusals. */
/* The latest refusals, each with the model the request named. */
static void print_refusals(const json_t *o)
{
    json_t *list = json_object_get(o, "recentRefusals"), *x;
    size_t i;
    if (!json_array_size(list))
        printf("no recent refusals\n");
    else
        printf("recent refusals, newest first (%s):\n", td_json_str(o, "sampling"));
    json_array_foreach(list, i, x)
    {
        const char *model = td_json_str(x, "model");
        printf("  %s  %lld %-19s %-7s %s%s%s", td_json_str(x, "time"),
               (long long)json_integer_value(json_object_get(x, "status")),
               td_json_str(x, "reason"), td_json_str(x, "mode"), model ? "model " : "",
               model ? model : "", model ? ": " : "");
        printf("%s\n", td_json_str(x, "detail"));
    }
}

/* Each Route's endpoints with their state, summed over the gateway's
 * workers (and each worker's state when they differ). */
static void print_routes(const json_t *o)
{
    json_t *routes = json_object_get(o, "routes"), *rt, *e;
    size_t i, j;
    if (!json_array_size(routes))
        return;
    printf("routes (%s):\n", td_json_str(o, "endpointState"));
    json_array_foreach(routes, i, rt)
    {
        printf("  %s (%s, capacity %lld per endpoint)%s%s\n", td_json_str(rt, "route"),
               td_json_str(rt, "balance"),
               (long long)json_integer_value(json_object_get(rt, "capacityPerEndpoint")),
               td_json_str(rt, "note") ? ": " : "",
               td_json_str(rt, "note") ? td_json_str(rt, "note") : "");
        json_array_foreach(json_object_get(rt, "endpoints"), j, e)
        {
            printf("    %-22s %-9s in flight %lld, requests %lld, ejections %lld",
                   td_json_str(e, "address"), td_json_str(e, "state"),
                   (long long)json_integer_value(json_object_get(e, "inFlight")),
                   (long long)json_integer_value(json_object_get(e, "requests")),
                   (long long)json_integer_value(json_object_get(e, "ejections")));
            if (json_object_get(e, "ejectedForMs"))
                printf(", ejected for %lld ms more",
                       (long long)json_integer_value(json_object_get(e, "ejectedForMs")));
            json_t *sc = json_object_get(e, "lastScrape");
            if (sc)
                printf(", waiting %g, KV cache %.0f%% (%lld ms ago)",
                       json_number_value(json_object_get(sc, "waiting")),
                       100 * json_number_value(json_object_get(sc, "kvCacheUsage")),
                       (long long)json_integer_value(json_object_get(sc, "msAgo")));
            if (td_json_str(e, "resolvedFrom"))
                printf(", from %s%s", td_json_str(e, "resolvedFrom"),
                       json_is_true(json_object_get(e, "lookupFailing"))
                           ? " (lookups failing: last addresses kept)"
                           : "");
            size_t k;
            json_t *w;
            json_array_foreach(json_object_get(e, "workers"), k, w)
            {
                if (strcmp(td_json_str(w, "state"), td_json_str(e, "state")) != 0)
                    printf("; worker %lld: %s",
                           (long long)json_integer_value(json_object_get(w, "worker")),
                           td_json_str(w, "state"));
            }
            printf("\n");
        }
    }
}

/* The strings of array a joined by ',' into buf (n bytes), cut short
 * with "..." when they do not fit. */
static void join_strings(const json_t *a, char *buf, size_t n)
{
    size_t i, len = 0;
    json_t *v;
    buf[0] = '\0';
    json_array_foreach(a, i, v)
    {
        int w = snprintf(buf + len, n - len, "%s%s", i ? "," : "",
                         json_string_value(v) ? json_string_value(v) : "");
        if (w < 0 || (size_t)w >= n - len) {
            if (n > 4)
                memcpy(buf + n - 4, "...", 4);
            return;
        }
        len += (size_t)w;
    }
}

int td_cmd_explain_request(int argc, char **argv)
{
    static const struct option longopts[] = {{"tenant", required_argument, NULL, 't'},
                                             {"output", required_argument, NULL, 'o'},
                                             REMOTE_LONGOPTS,
                                             {NULL, 0, NULL, 0}};
    static const char usage[] =
        "usage: tenantctl explain request [--tenant T] [-o table|json] [remote flags]\n\n"
        "Why were a tenant's requests refused? Prints the tenant's gateway limits as\n"
        "the running tenantd enforces them (mode enforce or shadow), what it could\n"
        "spend right now, its money budgets and its budgets for models (spent,\n"
        "left, when they reset), its keys' own limits, its latest refusals with\n"
        "the rule, the level (key or tenant), the model and the numbers, and\n"
        "each Route's endpoints (state, in flight, ejections, last scrape, the\n"
        "DNS name they came from).\n"
        "With a tenant's API key (--token-file) the tenant is the key's own.\n\n"
        "  -t, --tenant T       the Tenant (default: the caller's, for a tenant key)\n"
        "  -o, --output FMT     table (default) or json\n%s";
    static const explain_flags flags = {"explain request", "t:o:s:h", longopts, usage, 't', 0,
                                        "unexpected argument"};
    td_remote r;
    const char *tenant, *output;
    int rc = explain_parse(&flags, argc, argv, &r, &tenant, &output);
    if (rc >= 0)
        return rc;
    char path[512] = "/v1/explain/request", et[400];
    if (tenant) {
        td__url_encode(tenant, et, sizeof et);
        snprintf(path, sizeof path, "/v1/explain/request?tenant=%s", et);
    }
    json_t *o = NULL;
    rc = td__remote_call_ok("explain request", &r, "GET", path, NULL, NULL, 0, &o);
    if (rc != TD_EXIT_OK)
        return rc;
    if (strcmp(output, "json") == 0) {
        json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
        json_decref(o);
        return TD_EXIT_OK;
    }
    json_t *lim = json_object_get(o, "limits");
    json_t *rate = json_object_get(lim, "rate"), *conc = json_object_get(lim, "concurrency");
    printf("tenant %s (criticality %s, weight %g%s)\n", td_json_str(o, "tenant"),
           td_json_str(lim, "criticality"), json_number_value(json_object_get(lim, "weight")),
           json_is_true(json_object_get(o, "sharedLimits"))
               ? "; limits shared through Redis, figures are this replica's view"
               : "");
    if (json_is_true(json_object_get(rate, "unlimited")))
        printf("  rate         unlimited\n");
    else
        printf("  rate         %g per %gs, burst %g, %s; available now: %.6g\n",
               json_number_value(json_object_get(rate, "cost")),
               json_number_value(json_object_get(rate, "perSeconds")),
               json_number_value(json_object_get(rate, "burst")), td_json_str(rate, "enforcement"),
               json_number_value(json_object_get(rate, "availableNow")));
    if (json_is_true(json_object_get(conc, "unlimited")))
        printf("  concurrency  unlimited (%lld in flight)\n",
               (long long)json_integer_value(json_object_get(conc, "inFlight")));
    else
        printf("  concurrency  %lld in flight of %lld, %s\n",
               (long long)json_integer_value(json_object_get(conc, "inFlight")),
               (long long)json_integer_value(json_object_get(conc, "limit")),
               td_json_str(conc, "enforcement"));
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(lim, "budgets"), i, x)
    {
        printf("  budget       %s: %.9g of %.9g %s spent (%.9g left), %s; resets at %s\n",
               td_json_str(x, "period"), json_number_value(json_object_get(x, "spent")),
               json_number_value(json_object_get(x, "amount")), td_json_str(x, "currency"),
               json_number_value(json_object_get(x, "remaining")), td_json_str(x, "enforcement"),
               td_json_str(x, "resetsAt"));
    }
    json_array_foreach(json_object_get(lim, "modelBudgets"), i, x)
    {
        char models[256] = "";
        join_strings(json_object_get(x, "models"), models, sizeof models);
        printf("  budget       %s for models %s: %.9g of %.9g %s spent (%.9g left), %s; resets "
               "at %s\n",
               td_json_str(x, "period"), models, json_number_value(json_object_get(x, "spent")),
               json_number_value(json_object_get(x, "amount")), td_json_str(x, "currency"),
               json_number_value(json_object_get(x, "remaining")), td_json_str(x, "enforcement"),
               td_json_str(x, "resetsAt"));
    }
    json_array_foreach(json_object_get(lim, "keys"), i, x)
    {
        json_t *kr = json_object_get(x, "rate"), *kc = json_object_get(x, "concurrency");
        printf("  key %-8s rate ", td_json_str(x, "name"));
        if (json_object_get(kr, "inherits"))
            printf("the tenant's");
        else
            printf("%g per %gs, burst %g, available now: %.6g",
                   json_number_value(json_object_get(kr, "cost")),
                   json_number_value(json_object_get(kr, "perSeconds")),
                   json_number_value(json_object_get(kr, "burst")),
                   json_number_value(json_object_get(kr, "availableNow")));
        if (json_object_get(kc, "inherits"))
            printf("; concurrency the tenant's\n");
        else
            printf("; concurrency %lld in flight of %lld\n",
                   (long long)json_integer_value(json_object_get(kc, "inFlight")),
                   (long long)json_integer_value(json_object_get(kc, "limit")));
        size_t j;
        json_t *b;
        json_array_foreach(json_object_get(x, "budgets"), j, b)
        {
            printf("  key %-8s budget %s: %.9g of %.9g %s spent (%.9g left), %s; resets at %s\n",
                   td_json_str(x, "name"), td_json_str(b, "period"),
                   json_number_value(json_object_get(b, "spent")),
                   json_number_value(json_object_get(b, "amount")), td_json_str(b, "currency"),
                   json_number_value(json_object_get(b, "remaining")),
                   td_json_str(b, "enforcement"), td_json_str(b, "resetsAt"));
        }
    }
    print_refusals(o);
    print_routes(o);
    json_decref(o);
    return TD_EXIT_OK;
}

/* Seconds since the epoch as RFC 3339 UTC (to the second). */
static const char *rfc3339(double secs, char *buf, size_t n)
{
    time_t t = (time_t)secs;
    struct tm tm;
    if (!gmtime_r(&t, &tm) || !strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(buf, n, "%.0f", secs);
    return buf;
}

/* `tenantctl explain workload [NS/]NAME [-n NS] [-o table|json]`: why a
 * workload of the running tenantd's batch queue is where it is. */
int td_cmd_explain_workload(int argc, char **argv)
{
    static const struct option longopts[] = {{"namespace", required_argument, NULL, 'n'},
                                             {"output", required_argument, NULL, 'o'},
                                             REMOTE_LONGOPTS,
                                             {NULL, 0, NULL, 0}};
    static const char usage[] =
        "usage: tenantctl explain workload [NS/]NAME [-n NS] [-o table|json] [remote flags]\n\n"
        "Why is a Workload pending, admitted or finished? Asks the running tenantd:\n"
        "its state and Kueue's reason, flavors and node placement, its position in\n"
        "its ClusterQueue with the workloads ahead of it (another tenant's only as a\n"
        "count), its history (admitted, preempted by whom and at which level,\n"
        "requeued, finished), whom it preempted, and its ClusterQueue's quota.\n\n"
        "  -n, --namespace NS   the Workload's namespace (default: default)\n"
        "  -o, --output FMT     table (default) or json\n%s";
    static const explain_flags flags = {"explain workload", "n:o:s:h", longopts, usage, 'n', 1,
                                        "give one [NS/]NAME"};
    td_remote r;
    const char *ns, *output;
    int rc = explain_parse(&flags, argc, argv, &r, &ns, &output);
    if (rc >= 0)
        return rc;
    char nsbuf[256], name[256];
    const char *arg = argv[optind], *slash = strchr(arg, '/');
    if (slash) {
        snprintf(nsbuf, sizeof nsbuf, "%.*s", (int)(slash - arg), arg);
        snprintf(name, sizeof name, "%s", slash + 1);
        ns = nsbuf;
    } else {
        snprintf(name, sizeof name, "%s", arg);
    }
    char path[1200], ens[700], ename[700];
    td__url_encode(ns ? ns : "default", ens, sizeof ens);
    td__url_encode(name, ename, sizeof ename);
    snprintf(path, sizeof path, "/v1/explain/workload?namespace=%s&name=%s", ens, ename);
    json_t *o = NULL;
    rc = td__remote_call_ok("explain workload", &r, "GET", path, NULL, NULL, 0, &o);
    if (rc != TD_EXIT_OK)
        return rc;
    if (strcmp(output, "json") == 0) {
        json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
        json_decref(o);
        return TD_EXIT_OK;
    }
    printf("%s/%s: %s in ClusterQueue %s (priority %lld)\n", td_json_str(o, "namespace"),
           td_json_str(o, "name"), td_json_str(o, "state"), td_json_str(o, "clusterQueue"),
           (long long)json_integer_value(json_object_get(o, "priority")));
    if (*td_json_str(o, "reason"))
        printf("  why:        %s\n", td_json_str(o, "reason"));
    if (*td_json_str(o, "flavors"))
        printf("  flavors:    %s\n", td_json_str(o, "flavors"));
    if (*td_json_str(o, "placement"))
        printf("  placement:  %s\n", td_json_str(o, "placement"));
    json_t *qo = json_object_get(o, "queue");
    if (qo) {
        printf("  position:   %lld of %lld pending in %s",
               (long long)json_integer_value(json_object_get(qo, "position")),
               (long long)json_integer_value(json_object_get(qo, "pendingInClusterQueue")),
               td_json_str(o, "clusterQueue"));
        long long hidden = (long long)json_integer_value(json_object_get(qo, "aheadOfOtherTenants"));
        if (hidden)
            printf(" (%lld of other tenants ahead)", hidden);
        printf("\n");
        size_t i;
        json_t *x;
        json_array_foreach(json_object_get(qo, "ahead"), i, x)
            printf("    ahead:    %s (priority %lld)\n", td_json_str(x, "workload"),
                   (long long)json_integer_value(json_object_get(x, "priority")));
    }
    const char *res;
    json_t *v;
    json_t *quota = json_object_get(o, "clusterQueueQuota");
    if (json_object_size(quota))
        printf("  quota of %s (nominal / used / borrowed; this workload requests):\n",
               td_json_str(o, "clusterQueue"));
    json_object_foreach(quota, res, v)
        printf("    %-18s %g / %g / %g; requests %g\n", res,
               json_number_value(json_object_get(v, "nominal")),
               json_number_value(json_object_get(v, "used")),
               json_number_value(json_object_get(v, "borrowed")),
               json_number_value(json_object_get(v, "requested")));
    size_t i;
    json_t *e;
    if (json_array_size(json_object_get(o, "history")))
        printf("  history:\n");
    json_array_foreach(json_object_get(o, "history"), i, e)
    {
        char when[40];
        printf("    %s  %-9s", rfc3339(json_number_value(json_object_get(e, "t")), when, sizeof when),
               td_json_str(e, "type"));
        if (td_json_str(e, "by"))
            printf(" by %s (%s)", td_json_str(e, "by"), td_json_str(e, "level"));
        if (td_json_str(e, "flavors"))
            printf(" %s%s", td_json_str(e, "flavors"),
                   json_is_true(json_object_get(e, "borrowing")) ? " (borrowing)" : "");
        if (*td_json_str(e, "reason") && !td_json_str(e, "flavors"))
            printf(" %s", td_json_str(e, "reason"));
        printf("\n");
    }
    json_array_foreach(json_object_get(o, "preempted"), i, e)
    {
        char when[40];
        printf("  %s %s at %s (%s)\n",
               json_is_true(json_object_get(e, "shadow")) ? "would preempt (shadow):"
                                                          : "preempted: ",
               td_json_str(e, "workload"),
               rfc3339(json_number_value(json_object_get(e, "t")), when, sizeof when),
               td_json_str(e, "level"));
    }
    json_decref(o);
    return TD_EXIT_OK;
}
