/* cmd_recommend.c - `tenantctl recommend`: ResourceQuota YAML sized from the
 * use measured in the ledger (per namespace: p95 x 1.2 rounded up; GPUs
 * from measured use, CPU and memory from requests), ready for `tenantctl
 * apply`. Each namespace's existing unscoped quota is kept and only those
 * three requests.* entries change. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cost/chargeback.h"
#include "core/config.h"
#include "core/manifest.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tenantctl recommend --data DIR [-c PLATFORM.yaml...] [--from TIME] "
            "[--to TIME]\n\n"
            "Prints one ResourceQuota per namespace that ran workloads in the period or has\n"
            "an unscoped ResourceQuota, with requests.nvidia.com/gpu, requests.cpu and\n"
            "requests.memory set to p95 x 1.2 rounded up (whole GPUs and cores, whole GiB):\n"
            "GPUs from measured use (requested GPUs where use is unknown), CPU and memory\n"
            "from requests. The rest of the existing quota is kept. Apply it with\n"
            "`tenantctl apply -f FILE`.\n\n"
            "  --data DIR         the tenantd data dir (ledger.db; tenantd.db for objects)\n"
            "  -c, --config FILE  platform objects (repeatable); default: DIR/tenantd.db\n"
            "  --database URL     the objects of tenantd's PostgreSQL database instead\n"
            "                     (default $TENANTD_DATABASE)\n"
            "  --from, --to TIME  RFC 3339 or a date; default: this month so far\n\n"
            "exit status: 0 printed, 2 bad input\n");
}

/* The first unscoped ResourceQuota of ns, or NULL. Borrowed. */
static json_t *unscoped_quota(const td_config *c, const char *ns)
{
    json_t *const *qs;
    size_t n = td_config_list(c, "ResourceQuota", ns, &qs);
    for (size_t i = 0; i < n; i++)
        if (!td_json_path(qs[i], "spec.scopes") && !td_json_path(qs[i], "spec.scopeSelector"))
            return qs[i];
    return NULL;
}

static json_t *build_quota(const td_config *c, const td_rightsize_row *r)
{
    json_t *old = unscoped_quota(c, r->owner);
    json_t *hard = old ? json_deep_copy(td_json_path(old, "spec.hard")) : NULL;
    if (!hard)
        hard = json_object();
    json_t *labels = old ? json_deep_copy(td_json_path(old, "metadata.labels")) : NULL;
    json_t *q = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:o}}", "apiVersion", "v1", "kind",
                          "ResourceQuota", "metadata", "name",
                          old ? td_json_str(old, "metadata.name") : "compute", "namespace",
                          r->owner, "spec", "hard", hard);
    if (!q) {
        json_decref(labels);
        return NULL;
    }
    if (labels)
        json_object_set_new(json_object_get(q, "metadata"), "labels", labels);
    char buf[64];
    snprintf(buf, sizeof buf, "%lld", (long long)r->recommended_gpus);
    json_object_set_new(hard, "requests.nvidia.com/gpu", json_string(buf));
    if (r->cpu_requested.p95 > 0 || json_object_get(hard, "requests.cpu")) {
        snprintf(buf, sizeof buf, "%lld", (long long)(r->recommended_cpu_milli / 1000));
        json_object_set_new(hard, "requests.cpu", json_string(buf));
    }
    if (r->memory_requested.p95 > 0 || json_object_get(hard, "requests.memory")) {
        snprintf(buf, sizeof buf, "%lldGi", (long long)(r->recommended_memory_bytes >> 30));
        json_object_set_new(hard, "requests.memory", json_string(buf));
    }
    return q;
}

int td_cmd_recommend(int argc, char **argv)
{
    static const struct option opts[] = {
        {"data", required_argument, NULL, 'd'}, {"config", required_argument, NULL, 'c'},
        {"database", required_argument, NULL, 'D'},
        {"from", required_argument, NULL, 'F'}, {"to", required_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0}};
    if (td_cli_wants_help(argc, argv)) {
        usage(stdout);
        return TD_EXIT_OK;
    }
    td_report_flags rf = {0};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        int taken = td_report_flag("recommend", &rf, c);
        if (taken < 0)
            return TD_EXIT_USAGE;
        if (!taken) {
            fprintf(stderr, "tenantctl recommend: unknown or incomplete flag \"%s\"; see "
                            "tenantctl recommend --help\n",
                    argv[optind - 1]);
            return TD_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tenantctl recommend: unexpected argument \"%s\"\n", argv[optind]);
        return TD_EXIT_USAGE;
    }
    td_report_input in;
    int rc = td_report_load("recommend", &rf, 0, &in);
    if (rc != TD_EXIT_OK)
        return rc;
    td_rightsize *rs = NULL;
    td_err err;
    if (td_rightsize_compute(in.cfg, in.policy, in.recs, in.nrecs, in.from_ns, in.to_ns,
                             TD_BY_NAMESPACE, &rs, &err) != TD_OK) {
        fprintf(stderr, "tenantctl recommend: %s\n", err.msg);
        td_report_input_free(&in);
        return TD_EXIT_USAGE;
    }
    char from_s[40], to_s[40];
    td_report_time_format(in.from_ns, from_s, sizeof from_s);
    td_report_time_format(in.to_ns, to_s, sizeof to_s);
    rc = TD_EXIT_OK;
    int first = 1;
    for (size_t i = 0; i < rs->nrows; i++) {
        const td_rightsize_row *r = &rs->rows[i];
        if (strcmp(r->owner, "(none)") == 0)
            continue;
        json_t *q = build_quota(in.cfg, r);
        if (!q) {
            fprintf(stderr, "tenantctl recommend: out of memory\n");
            rc = TD_EXIT_USAGE;
            break;
        }
        if (!first)
            fputs("---\n", stdout);
        first = 0;
        char quota[32] = "none";
        if (r->gpu_quota_milli >= 0)
            snprintf(quota, sizeof quota, "%.3f", r->gpu_quota_milli / 1000.0);
        printf("# %s, %s .. %s: GPUs requested p50/p95 %.3f/%.3f, used p50/p95 %.3f/%.3f%s;\n"
               "# quota %s -> %lld GPUs (p95 used x 1.2, rounded up)\n",
               r->owner, from_s, to_s, r->gpu_requested.p50 / 1000.0,
               r->gpu_requested.p95 / 1000.0, r->gpu_used.p50 / 1000.0, r->gpu_used.p95 / 1000.0,
               r->gpu_used_estimated ? " (use unknown for some intervals: requested stands in)"
                                     : "",
               quota, (long long)r->recommended_gpus);
        if (td_yaml_write(q, stdout) < 0)
            rc = TD_EXIT_USAGE;
        json_decref(q);
    }
    td_rightsize_destroy(rs);
    td_report_input_free(&in);
    return rc;
}
