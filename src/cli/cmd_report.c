/* cmd_report.c - `tenantctl report`: showback and chargeback from the usage
 * ledger of a data dir under a CostPolicy, as a table, the chargeback CSV,
 * JSON or an HTML page with inline SVG charts (no scripts, no fonts), with a
 * right-sizing section. Also the loading shared with `tenantctl recommend`:
 * times, the platform (-c files or the data dir's stored objects), records. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/htmlpage.h"
#include "cost/chargeback.h"
#include "core/config.h"
#include "core/duration.h"
#include "io/ledger.h"
#include "io/store.h"

#define NS 1000000000LL
#define HOUR_NS (3600LL * NS)
#define DAY_NS (24LL * HOUR_NS)
#define MAX_RECORDS (4u << 20) /* records one report holds in memory (~800 bytes each) */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tenantctl report --data DIR [-c PLATFORM.yaml... | --database URL]\n"
            "                        [--from TIME] [--to TIME]\n"
            "                        [--by tenant|team|project|environment|model]\n"
            "                        [--format table|csv|json|html] [-o FILE]\n\n"
            "Showback and chargeback of the usage ledger in DIR/ledger.db under the\n"
            "platform's CostPolicy: usage and cost per owner, shared costs allocated by\n"
            "their rule and shown apart, and right-sizing (p50/p95 of requested and used\n"
            "GPUs, CPU, memory against quota; idle routes; interruptible candidates).\n\n"
            "  --data DIR         the tenantd data dir (ledger.db; tenantd.db for objects)\n"
            "  -c, --config FILE  platform objects with the CostPolicy, NodePools, quotas and\n"
            "                     Routes (repeatable); default: the objects stored in\n"
            "                     DIR/tenantd.db\n"
            "  --database URL     read the objects and the shared ledger (every replica's\n"
            "                     records) from tenantd's PostgreSQL database instead\n"
            "                     (default $TENANTD_DATABASE); --data is then not needed\n"
            "  --from, --to TIME  the period [from, to): RFC 3339 (2026-12-01T00:00:00Z) or a\n"
            "                     date (2026-12-01 = its midnight UTC); default: this month\n"
            "                     so far\n"
            "  --by KEY           owner: tenant (default), team, project, environment or model\n"
            "  --format FMT       table (default), csv (chargeback: one line per owner per\n"
            "                     item, then a total line), json or html\n"
            "  -o, --output FILE  write there instead of standard output\n\n"
            "Amounts are exact: each line is rounded half up to the cent once; a shared\n"
            "item is rounded to the cent and split by the largest-remainder rule, so the\n"
            "lines add up to the total exactly.\n\n"
            "exit status: 0 written, 2 bad input (a missing price, a bad period, file:line)\n");
}

/* ---- times ---- */

static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void td_report_time_format(int64_t ns, char *buf, size_t len)
{
    time_t t = (time_t)(ns >= 0 ? ns / NS : (ns - NS + 1) / NS);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ---- loading ---- */

void td_report_input_free(td_report_input *in)
{
    td_costpolicy_destroy(in->policy);
    td_config_unref(in->cfg);
    free(in->recs);
    memset(in, 0, sizeof *in);
}

int td_report_flag(const char *verb, td_report_flags *f, int c)
{
    switch (c) {
    case 'd': f->data = optarg; return 1;
    case 'D': f->database = optarg; return 1;
    case 'F': f->from = optarg; return 1;
    case 'T': f->to = optarg; return 1;
    case 'c':
        return td_cli_add_file(verb, f->cfiles, &f->ncfiles, TD_REPORT_MAX_FILES, optarg) ? -1 : 1;
    }
    return 0;
}

int td_report_load(const char *verb, const td_report_flags *f, int need_policy,
                   td_report_input *in)
{
    const char *data = f->data, *from = f->from, *to = f->to;
    td_err err;
    memset(in, 0, sizeof *in);
    /* PostgreSQL's objects and shared ledger (--database, $TENANTD_DATABASE),
     * or DIR's */
    const char *database = f->database;
    if (!database && getenv("TENANTD_DATABASE") && getenv("TENANTD_DATABASE")[0])
        database = getenv("TENANTD_DATABASE");
    if (database && !td_store_is_url(database)) {
        fprintf(stderr, "tenantctl %s: --database must be a postgres:// or postgresql:// URL\n",
                verb);
        return TD_EXIT_USAGE;
    }
    if (!data && !database) {
        fprintf(stderr, "tenantctl %s: --data DIR (or --database URL) is required\n", verb);
        return TD_EXIT_USAGE;
    }
    const char *ledger_at = database;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t now_ns = (int64_t)now.tv_sec * NS + now.tv_nsec;
    if (to) {
        if (td_rfc3339_parse(to, &in->to_ns, NULL) != TD_OK) {
            fprintf(stderr, "tenantctl %s: --to \"%s\" is not an RFC 3339 time or a date\n",
                    verb, to);
            return TD_EXIT_USAGE;
        }
    } else {
        in->to_ns = now_ns;
    }
    if (from) {
        if (td_rfc3339_parse(from, &in->from_ns, NULL) != TD_OK) {
            fprintf(stderr, "tenantctl %s: --from \"%s\" is not an RFC 3339 time or a date\n",
                    verb, from);
            return TD_EXIT_USAGE;
        }
    } else {
        time_t t = (time_t)(in->to_ns / NS);
        struct tm tm;
        gmtime_r(&t, &tm);
        in->from_ns = days_from_civil(tm.tm_year + 1900, tm.tm_mon + 1, 1) * 86400 * NS;
        if (in->from_ns >= in->to_ns) /* --to on the first instant of a month: that month */
            in->from_ns = days_from_civil(tm.tm_year + 1900 - (tm.tm_mon == 0),
                                          tm.tm_mon == 0 ? 12 : tm.tm_mon, 1) *
                          86400 * NS;
    }
    if (in->to_ns <= in->from_ns) {
        fprintf(stderr, "tenantctl %s: the period is %s: --from must be before --to\n", verb,
                in->to_ns == in->from_ns ? "empty" : "inverted");
        return TD_EXIT_USAGE;
    }
    if (f->ncfiles) {
        if (td_config_load_files(f->cfiles, f->ncfiles, &in->cfg, &err) != TD_OK) {
            fprintf(stderr, "tenantctl %s: %s\n", verb, err.msg);
            return TD_EXIT_USAGE;
        }
    } else {
        char path[4096];
        snprintf(path, sizeof path, "%s/tenantd.db", data ? data : ".");
        td_store *st = NULL;
        td_config_builder *b = NULL;
        if (!database && access(path, R_OK) != 0) {
            fprintf(stderr,
                    "tenantctl %s: no platform: pass -c PLATFORM.yaml (%s does not exist)\n",
                    verb, path);
            return TD_EXIT_USAGE;
        }
        td_status s = td_store_open(database ? database : data, &st, &err);
        if (s == TD_OK)
            s = td_config_builder_create(NULL, &b, &err);
        if (s == TD_OK)
            s = td_store_load(st, b, &err);
        if (s == TD_OK)
            s = td_config_builder_finish(b, &in->cfg, &err);
        td_config_builder_destroy(b);
        td_store_close(st);
        if (s != TD_OK) {
            if (database)
                fprintf(stderr, "tenantctl %s: %s\n", verb, err.msg);
            else
                fprintf(stderr, "tenantctl %s: %s: %s\n", verb, path, err.msg);
            return TD_EXIT_USAGE;
        }
    }
    json_t *const *policies;
    if (need_policy || td_config_list(in->cfg, "CostPolicy", NULL, &policies) > 0) {
        if (td_costpolicy_from_config(in->cfg, &in->policy, &err) != TD_OK) {
            fprintf(stderr, "tenantctl %s: %s\n", verb, err.msg);
            td_report_input_free(in);
            return TD_EXIT_USAGE;
        }
    }
    td_ledger_vec rv = {.max = MAX_RECORDS};
    /* the ledger: every replica's, shared in PostgreSQL, with --database */
    td_status s = td_ledger_read(ledger_at ? ledger_at : data, in->from_ns, in->to_ns,
                                 td_ledger_vec_push, &rv, &err);
    if (s == TD_OK && rv.full) {
        s = TD_ENOMEM;
        snprintf(err.msg, sizeof err.msg, "more than %u records in the period, or out of memory",
                 MAX_RECORDS);
    }
    if (s != TD_OK) {
        fprintf(stderr, "tenantctl %s: %s\n", verb, err.msg);
        free(rv.v);
        td_report_input_free(in);
        return s == TD_EIO ? TD_EXIT_UNAVAILABLE : TD_EXIT_USAGE;
    }
    in->recs = rv.v;
    in->nrecs = rv.n;
    return TD_EXIT_OK;
}

/* ---- output helpers ---- */

static void money(char *buf, size_t len, int64_t cents)
{
    snprintf(buf, len, "%s%lld.%02lld", cents < 0 ? "-" : "", (long long)(llabs(cents) / 100),
             (long long)(llabs(cents) % 100));
}

/* A fixed-point value with scale decimals, trailing zeros trimmed. */
static void fixed(char *buf, size_t len, int64_t v, int64_t scale, int decimals)
{
    snprintf(buf, len, "%lld.%0*lld", (long long)(v / scale), decimals, (long long)(v % scale));
    char *dot = strchr(buf, '.');
    char *e = buf + strlen(buf) - 1;
    while (e > dot && *e == '0')
        *e-- = '\0';
    if (e == dot)
        *e = '\0';
}

static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static const char *by_name(td_chargeback_by by)
{
    static const char *const names[] = {"tenant",      "team",      "project",
                                        "environment", "namespace", "model"};
    return names[by];
}

/* The four owner columns of a line: the grouping column holds the owner. */
static void owner_columns(const td_chargeback_report *rep, const td_chargeback_line *l,
                          const char *cols[4])
{
    cols[0] = l->tenant;
    cols[1] = l->team;
    cols[2] = l->project;
    cols[3] = l->environment;
    if (rep->by <= TD_BY_ENVIRONMENT)
        cols[rep->by] = l->owner;
}

static void write_csv(FILE *f, const td_chargeback_report *rep)
{
    char from[40], to[40], q[64], a[40];
    td_report_time_format(rep->from_ns, from, sizeof from);
    td_report_time_format(rep->to_ns, to, sizeof to);
    /* by model: the model in a last column (the others keep their places) */
    bool by_model = rep->by == TD_BY_MODEL;
    fprintf(f, "period_start,period_end,tenant,team,project,environment,item,quantity,unit,"
               "amount%s\n",
            by_model ? ",model" : "");
    for (size_t i = 0; i < rep->nlines; i++) {
        const td_chargeback_line *l = &rep->lines[i];
        const char *cols[4];
        owner_columns(rep, l, cols);
        fprintf(f, "%s,%s,", from, to);
        for (int k = 0; k < 4; k++) {
            csv_field(f, cols[k]);
            fputc(',', f);
        }
        csv_field(f, l->item);
        fixed(q, sizeof q, l->quantity_micro, 1000000, 6);
        money(a, sizeof a, l->amount_cents);
        fprintf(f, ",%s,%s,%s", q, l->unit, a);
        if (by_model) {
            fputc(',', f);
            csv_field(f, l->owner);
        }
        fputc('\n', f);
    }
    money(a, sizeof a, rep->total_cents);
    fprintf(f, "%s,%s,,,,,total,,%s,%s%s\n", from, to, rep->currency, a, by_model ? "," : "");
}

static void pctl_cell(char *buf, size_t len, td_pctl2 p, int64_t scale)
{
    char a[32], b[32];
    fixed(a, sizeof a, p.p50, scale, scale == 1000 ? 3 : 0);
    fixed(b, sizeof b, p.p95, scale, scale == 1000 ? 3 : 0);
    snprintf(buf, len, "%s/%s", a, b);
}

static void gib_cell(char *buf, size_t len, td_pctl2 p)
{
    snprintf(buf, len, "%.1f/%.1f", (double)p.p50 / (1 << 30), (double)p.p95 / (1 << 30));
}

static void quota_cell(char *buf, size_t len, int64_t milli)
{
    if (milli < 0)
        snprintf(buf, len, "-");
    else
        fixed(buf, len, milli, 1000, 3);
}

static void write_table(FILE *f, const td_chargeback_report *rep, const td_rightsize *rs)
{
    char from[40], to[40], a[40], b[40], c[40], d[40], e[40];
    td_report_time_format(rep->from_ns, from, sizeof from);
    td_report_time_format(rep->to_ns, to, sizeof to);
    fprintf(f, "period %s .. %s   by %s   currency %s\n\n", from, to, by_name(rep->by),
            rep->currency);
    fprintf(f, "%-24s %10s %10s %12s %10s %12s %12s %12s\n", by_name(rep->by), "gpu-hours",
            "cpu-hours", "tokens", "requests", "direct", "shared", "total");
    for (size_t i = 0; i < rep->nowners; i++) {
        const td_chargeback_owner_sum *o = &rep->owners[i];
        fixed(a, sizeof a, o->gpu_milli_hours, 1000, 3);
        fixed(b, sizeof b, o->cpu_milli_hours, 1000, 3);
        money(c, sizeof c, o->direct_cents);
        money(d, sizeof d, o->shared_cents);
        money(e, sizeof e, o->total_cents);
        fprintf(f, "%-24s %10s %10s %12lld %10lld %12s %12s %12s\n", o->owner, a, b,
                (long long)(o->tokens_in + o->tokens_out), (long long)o->requests, c, d, e);
    }
    money(c, sizeof c, rep->direct_cents);
    money(d, sizeof d, rep->shared_cents);
    money(e, sizeof e, rep->total_cents);
    fprintf(f, "%-24s %10s %10s %12s %10s %12s %12s %12s\n\n", "total", "", "", "", "", c, d, e);
    if (rep->nshared) {
        fprintf(f, "shared costs (allocated above)\n");
        fprintf(f, "  %-20s %-8s %-13s %12s\n", "item", "kind", "allocation", "amount");
        for (size_t i = 0; i < rep->nshared; i++) {
            money(a, sizeof a, rep->shared[i].amount_cents);
            fprintf(f, "  %-20s %-8s %-13s %12s", rep->shared[i].name, rep->shared[i].kind,
                    rep->shared[i].rule, a);
            if (strcmp(rep->shared[i].kind, "idleGpu") == 0) {
                fixed(b, sizeof b, rep->shared[i].idle_gpu_milli_hours, 1000, 3);
                fprintf(f, "   (%s idle GPU-hours)", b);
            }
            fputc('\n', f);
        }
        fputc('\n', f);
    }
    if (!rs)
        return;
    fprintf(f, "right-sizing (p50/p95 over the period; quota = unscoped ResourceQuotas)\n");
    fprintf(f, "  %-22s %13s %13s %6s %6s %13s %6s %6s %13s %6s %10s %9s\n", by_name(rep->by),
            "gpu req", "gpu used", "quota", "rec", "cpu req", "quota", "rec", "mem GiB",
            "rec", "intr gpu-h", "saving");
    int estimated = 0;
    for (size_t i = 0; i < rs->nrows; i++) {
        const td_rightsize_row *r = &rs->rows[i];
        char gq[32], cq[32], mq[32], ig[32], sv[32], cr[32];
        pctl_cell(a, sizeof a, r->gpu_requested, 1000);
        pctl_cell(b, sizeof b, r->gpu_used, 1000);
        pctl_cell(c, sizeof c, r->cpu_requested, 1000);
        gib_cell(d, sizeof d, r->memory_requested);
        quota_cell(gq, sizeof gq, r->gpu_quota_milli);
        quota_cell(cq, sizeof cq, r->cpu_quota_milli);
        fixed(cr, sizeof cr, r->recommended_cpu_milli, 1000, 3);
        if (r->memory_quota_bytes < 0)
            snprintf(mq, sizeof mq, "-");
        else
            snprintf(mq, sizeof mq, "%.0fGi", (double)r->memory_quota_bytes / (1 << 30));
        fixed(ig, sizeof ig, r->interruptible_candidate_gpu_milli_hours, 1000, 3);
        money(sv, sizeof sv, r->interruptible_saving_cents);
        fprintf(f, "  %-22s %13s %12s%s %6s %6lld %13s %6s %6s %13s %4lldGi %10s %9s\n", r->owner,
                a, b, r->gpu_used_estimated ? "*" : " ", gq, (long long)r->recommended_gpus, c,
                cq, cr, d, (long long)(r->recommended_memory_bytes >> 30), ig, sv);
        (void)mq;
        estimated |= r->gpu_used_estimated;
    }
    if (estimated)
        fprintf(f, "  * GPU use unknown for some intervals: the requested GPUs stand in\n");
    fprintf(f, "  rec = recommended quota: p95 x 1.2 rounded up (GPUs from use, CPU and memory "
               "from requests)\n");
    fprintf(f, "  intr gpu-h = GPU-hours that ran non-interruptible outside protected "
               "environments; saving at the interruptible discount\n");
    fprintf(f, "idle routes (no request in the period; scale-to-zero candidates):");
    for (size_t i = 0; i < rs->nidle_routes; i++)
        fprintf(f, " %s", rs->idle_routes[i]);
    fprintf(f, "%s\n", rs->nidle_routes ? "" : " none");
}

static json_t *jmoney(int64_t cents)
{
    char a[40];
    money(a, sizeof a, cents);
    return json_string(a);
}

static json_t *jfixed(int64_t v, int64_t scale, int dec)
{
    char a[40];
    fixed(a, sizeof a, v, scale, dec);
    return json_string(a);
}

static json_t *jpctl(td_pctl2 p)
{
    return json_pack("{s:I,s:I}", "p50", (json_int_t)p.p50, "p95", (json_int_t)p.p95);
}

static int write_json(FILE *f, const td_chargeback_report *rep, const td_rightsize *rs)
{
    char from[40], to[40];
    td_report_time_format(rep->from_ns, from, sizeof from);
    td_report_time_format(rep->to_ns, to, sizeof to);
    json_t *root = json_pack("{s:s,s:s,s:s,s:s,s:o,s:o,s:o}", "period_start", from, "period_end",
                             to, "by", by_name(rep->by), "currency", rep->currency, "direct",
                             jmoney(rep->direct_cents), "shared", jmoney(rep->shared_cents),
                             "total", jmoney(rep->total_cents));
    json_t *owners = json_array(), *lines = json_array(), *shared = json_array();
    if (!root || !owners || !lines || !shared) {
        json_decref(root);
        json_decref(owners);
        json_decref(lines);
        json_decref(shared);
        return -1;
    }
    json_object_set_new(root, "owners", owners);
    json_object_set_new(root, "shared_items", shared);
    json_object_set_new(root, "lines", lines);
    for (size_t i = 0; i < rep->nowners; i++) {
        const td_chargeback_owner_sum *o = &rep->owners[i];
        json_array_append_new(
            owners,
            json_pack("{s:s,s:s,s:s,s:s,s:s,s:o,s:o,s:I,s:I,s:I,s:o,s:o,s:o}", "owner", o->owner,
                      "tenant", o->tenant, "team", o->team, "project", o->project, "environment",
                      o->environment, "gpu_hours", jfixed(o->gpu_milli_hours, 1000, 3),
                      "cpu_hours", jfixed(o->cpu_milli_hours, 1000, 3), "tokens_in",
                      (json_int_t)o->tokens_in, "tokens_out", (json_int_t)o->tokens_out,
                      "requests", (json_int_t)o->requests, "direct", jmoney(o->direct_cents),
                      "shared", jmoney(o->shared_cents), "total", jmoney(o->total_cents)));
    }
    for (size_t i = 0; i < rep->nshared; i++)
        json_array_append_new(
            shared, json_pack("{s:s,s:s,s:s,s:o,s:o}", "name", rep->shared[i].name, "kind",
                              rep->shared[i].kind, "allocation", rep->shared[i].rule, "amount",
                              jmoney(rep->shared[i].amount_cents), "idle_gpu_hours",
                              jfixed(rep->shared[i].idle_gpu_milli_hours, 1000, 3)));
    for (size_t i = 0; i < rep->nlines; i++) {
        const td_chargeback_line *l = &rep->lines[i];
        json_array_append_new(
            lines, json_pack("{s:s,s:s,s:o,s:s,s:o,s:b}", "owner", l->owner, "item", l->item,
                             "quantity", jfixed(l->quantity_micro, 1000000, 6), "unit", l->unit,
                             "amount", jmoney(l->amount_cents), "shared", l->shared));
    }
    if (rs) {
        json_t *rows = json_array(), *idle = json_array();
        json_object_set_new(root, "rightsizing",
                            json_pack("{s:o,s:o}", "owners", rows, "idle_routes", idle));
        for (size_t i = 0; i < rs->nrows; i++) {
            const td_rightsize_row *r = &rs->rows[i];
            json_array_append_new(
                rows,
                json_pack("{s:s,s:o,s:o,s:b,s:o,s:o,s:I,s:I,s:I,s:I,s:I,s:I,s:o,s:o}", "owner",
                          r->owner, "gpu_requested_milli", jpctl(r->gpu_requested),
                          "gpu_used_milli", jpctl(r->gpu_used), "gpu_used_estimated",
                          r->gpu_used_estimated, "cpu_requested_milli", jpctl(r->cpu_requested),
                          "memory_requested_bytes", jpctl(r->memory_requested),
                          "gpu_quota_milli", (json_int_t)r->gpu_quota_milli, "cpu_quota_milli",
                          (json_int_t)r->cpu_quota_milli, "memory_quota_bytes",
                          (json_int_t)r->memory_quota_bytes, "recommended_gpus",
                          (json_int_t)r->recommended_gpus, "recommended_cpu_milli",
                          (json_int_t)r->recommended_cpu_milli, "recommended_memory_bytes",
                          (json_int_t)r->recommended_memory_bytes,
                          "interruptible_candidate_gpu_hours",
                          jfixed(r->interruptible_candidate_gpu_milli_hours, 1000, 3),
                          "interruptible_saving", jmoney(r->interruptible_saving_cents)));
        }
        for (size_t i = 0; i < rs->nidle_routes; i++)
            json_array_append_new(idle, json_string(rs->idle_routes[i]));
    }
    int rc = json_dumpf(root, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', f);
    json_decref(root);
    return rc;
}

/* ---- html ---- */

static const char *const palette[] = {"#0969da", "#2da44e", "#bf8700", "#8250df", "#cf222e",
                                      "#1b7c83", "#fb8500", "#57606a", "#e85aad", "#6e7781"};

static int cmp_owner_sum(const void *a, const void *b)
{
    return strcmp(((const td_chargeback_owner_sum *)a)->owner,
                  ((const td_chargeback_owner_sum *)b)->owner);
}

/* Direct cost per owner per time bucket (for the stacked chart), in
 * currency units as doubles: display only, the tables carry the exact
 * amounts. */
static int bucket_costs(const td_costpolicy *p, const td_chargeback_report *rep,
                        const td_ledger_rec *recs, size_t n, int64_t bucket, size_t nb,
                        double *cost /* [nowners * nb] */)
{
    for (size_t i = 0; i < n; i++) {
        const td_ledger_rec *r = &recs[i];
        td_chargeback_owner_sum key;
        td_chargeback_owner(r, rep->by, key.owner, sizeof key.owner);
        const td_chargeback_owner_sum *hit =
            bsearch(&key, rep->owners, rep->nowners, sizeof *rep->owners, cmp_owner_sum);
        if (!hit)
            continue;
        size_t oi = (size_t)(hit - rep->owners);
        int64_t s = r->start_ns > rep->from_ns ? r->start_ns : rep->from_ns;
        int64_t e = r->kind == TD_LEDGER_REQUEST ? s + 1 : r->end_ns;
        if (e > rep->to_ns)
            e = rep->to_ns;
        if (e <= s)
            continue;
        size_t b0 = (size_t)((s - rep->from_ns) / bucket);
        size_t b1 = (size_t)((e - 1 - rep->from_ns) / bucket);
        for (size_t b = b0; b <= b1 && b < nb; b++) {
            int64_t bs = rep->from_ns + (int64_t)b * bucket, be = bs + bucket;
            td_charge c[TD_CHARGE_MAX];
            size_t nc;
            if (r->kind == TD_LEDGER_REQUEST) {
                bs = rep->from_ns;
                be = rep->to_ns;
            }
            if (td_chargeback_price(p, r, bs, be, c, &nc, NULL) != TD_OK)
                return -1;
            for (size_t k = 0; k < nc; k++)
                cost[oi * nb + b] += (double)c[k].amount_nano / TD_MONEY_NANO;
        }
    }
    return 0;
}

static const char report_css[] =
    "table{border-collapse:collapse;margin:8px 0}td:first-child,th:first-child{"
    "white-space:nowrap}\n"
    ".lab{font-size:11px;fill:#555}\n"
    ".quota{stroke:#cf222e;stroke-width:2}\n";

static void html_showback(FILE *f, const td_chargeback_report *rep)
{
    char a[40], b[40], c[40];
    const char *const heads[] = {by_name(rep->by), "GPU-hours", "CPU-hours", "tokens",
                                 "requests",       "direct",    "shared",    "total"};
    fputs("<h2>Showback</h2>\n", f);
    td_htmlpage_table(f, NULL, heads, sizeof heads / sizeof heads[0]);
    for (size_t i = 0; i < rep->nowners; i++) {
        const td_chargeback_owner_sum *o = &rep->owners[i];
        fputs("<tr><td>", f);
        td_htmlpage_text(f, o->owner);
        fixed(a, sizeof a, o->gpu_milli_hours, 1000, 3);
        fixed(b, sizeof b, o->cpu_milli_hours, 1000, 3);
        fprintf(f, "</td><td>%s</td><td>%s</td><td>%lld</td><td>%lld</td>", a, b,
                (long long)(o->tokens_in + o->tokens_out), (long long)o->requests);
        money(a, sizeof a, o->direct_cents);
        money(b, sizeof b, o->shared_cents);
        money(c, sizeof c, o->total_cents);
        fprintf(f, "<td>%s</td><td>%s</td><td>%s</td></tr>\n", a, b, c);
    }
    fputs("</table>\n", f);
}

/* The bars of the stacked chart: cost[o * nb + b] of owner o in bucket b,
 * scaled to maxv over H - 10 pixels above the baseline H. */
static void html_cost_bars(FILE *f, const td_chargeback_report *rep, const double *cost,
                           size_t nb, double maxv, int H, int L, double bw)
{
    for (size_t bi = 0; bi < nb; bi++) {
        double y = H;
        for (size_t o = 0; o < rep->nowners; o++) {
            double h = cost[o * nb + bi] / maxv * (H - 10);
            if (h <= 0)
                continue;
            y -= h;
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                       "fill=\"%s\"><title>",
                    L + bi * bw + 1, y, bw > 2 ? bw - 1 : bw, h, palette[o % 10]);
            td_htmlpage_text(f, rep->owners[o].owner);
            fprintf(f, ": %.2f</title></rect>\n", cost[o * nb + bi]);
        }
    }
}

/* Direct cost per owner per time bucket, stacked. */
static void html_cost_chart(FILE *f, const td_costpolicy *p, const td_chargeback_report *rep,
                            const td_ledger_rec *recs, size_t n)
{
    int64_t span = rep->to_ns - rep->from_ns;
    int64_t bucket = span > 2 * DAY_NS ? DAY_NS : HOUR_NS;
    while (span / bucket > 120)
        bucket *= 2;
    size_t nb = (size_t)((span + bucket - 1) / bucket);
    double *cost = calloc(rep->nowners * nb + 1, sizeof *cost);
    const char **colours = calloc(rep->nowners + 1, sizeof *colours);
    const char **labels = calloc(rep->nowners + 1, sizeof *labels);
    if (!cost || !colours || !labels || bucket_costs(p, rep, recs, n, bucket, nb, cost) != 0)
        goto out;
    double maxv = 0;
    for (size_t bi = 0; bi < nb; bi++) {
        double s = 0;
        for (size_t o = 0; o < rep->nowners; o++)
            s += cost[o * nb + bi];
        if (s > maxv)
            maxv = s;
    }
    if (maxv <= 0)
        maxv = 1;
    const int W = 900, H = 260, L = 70, B = 30;
    double bw = (double)(W - L - 10) / (double)nb;
    fprintf(f, "<h2>Direct cost per %s per %s (stacked)</h2>\n", by_name(rep->by),
            bucket == DAY_NS ? "day" : bucket == HOUR_NS ? "hour" : "bucket");
    td_htmlpage_svg_begin(f, "cost-chart", W, H + B, "direct cost over time");
    for (int g = 0; g <= 4; g++) {
        double y = H - (double)g * (H - 10) / 4;
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                   "<text class=\"lab\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n",
                L, W - 10, y, y, L - 4, y + 4, maxv * g / 4);
    }
    html_cost_bars(f, rep, cost, nb, maxv, H, L, bw);
    for (size_t bi = 0; bi < nb; bi += (nb + 7) / 8) {
        char t[40];
        td_report_time_format(rep->from_ns + (int64_t)bi * bucket, t, sizeof t);
        t[bucket >= DAY_NS ? 10 : 16] = '\0';
        fprintf(f, "<text class=\"lab\" x=\"%.1f\" y=\"%d\">%s</text>\n", L + bi * bw, H + 18, t);
    }
    td_htmlpage_svg_end(f);
    for (size_t o = 0; o < rep->nowners; o++) {
        colours[o] = palette[o % 10];
        labels[o] = rep->owners[o].owner;
    }
    td_htmlpage_key(f, NULL, colours, labels, rep->nowners, NULL);
out:
    free(cost);
    free(colours);
    free(labels);
}

static void html_shared(FILE *f, const td_chargeback_report *rep)
{
    char a[40];
    static const char *const heads[] = {"item", "kind", "allocation", "amount"};
    if (!rep->nshared)
        return;
    fputs("<h2>Shared costs</h2>\n", f);
    td_htmlpage_table(f, NULL, heads, 4);
    for (size_t i = 0; i < rep->nshared; i++) {
        fputs("<tr><td>", f);
        td_htmlpage_text(f, rep->shared[i].name);
        money(a, sizeof a, rep->shared[i].amount_cents);
        fprintf(f, "</td><td>%s</td><td>%s</td><td>%s</td></tr>\n", rep->shared[i].kind,
                rep->shared[i].rule, a);
    }
    fputs("</table>\n", f);
}

/* GPUs requested and used (p95) per owner as bars, the quota as a line. */
static void html_utilisation(FILE *f, const td_rightsize *rs)
{
    double maxg = 1;
    for (size_t i = 0; i < rs->nrows; i++) {
        const td_rightsize_row *r = &rs->rows[i];
        double v[3] = {r->gpu_requested.p95 / 1000.0, r->gpu_used.p95 / 1000.0,
                       r->gpu_quota_milli / 1000.0};
        for (int k = 0; k < 3; k++)
            if (v[k] > maxg)
                maxg = v[k];
    }
    const int W = 900, L = 160, RH = 34;
    int H = (int)rs->nrows * RH + 30;
    fputs("<h2>GPU utilisation against quota (p95)</h2>\n", f);
    td_htmlpage_svg_begin(f, "util-chart", W, H, "GPUs requested and used (p95) against quota");
    double scale = (W - L - 20) / maxg;
    fprintf(f, "<text class=\"lab\" x=\"%d\" y=\"%d\" text-anchor=\"end\">0 to %.3g GPUs</text>\n",
            W - 20, H - 6, maxg);
    for (size_t i = 0; i < rs->nrows; i++) {
        const td_rightsize_row *r = &rs->rows[i];
        int y = (int)i * RH + 10;
        fprintf(f, "<text class=\"lab\" x=\"%d\" y=\"%d\" text-anchor=\"end\">", L - 6, y + 16);
        td_htmlpage_text(f, r->owner);
        fprintf(f, "</text>\n<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"12\" "
                   "fill=\"#9ec5fe\"><title>requested p95 %.3f GPUs</title></rect>\n"
                   "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"12\" fill=\"#2da44e\">"
                   "<title>used p95 %.3f GPUs%s</title></rect>\n",
                L, y, r->gpu_requested.p95 / 1000.0 * scale, r->gpu_requested.p95 / 1000.0, L,
                y + 13, r->gpu_used.p95 / 1000.0 * scale, r->gpu_used.p95 / 1000.0,
                r->gpu_used_estimated ? " (partly estimated from requests)" : "");
        if (r->gpu_quota_milli >= 0) {
            double x = L + r->gpu_quota_milli / 1000.0 * scale;
            fprintf(f, "<line class=\"quota\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\">"
                       "<title>quota %.3f GPUs</title></line>\n",
                    x, x, y - 2, y + 27, r->gpu_quota_milli / 1000.0);
        }
    }
    td_htmlpage_svg_end(f);
    static const char *const colours[] = {"#9ec5fe", "#2da44e", "#cf222e"};
    static const char *const labels[] = {"requested", "used", "quota"};
    td_htmlpage_key(f, NULL, colours, labels, 3, " ");
}

static void html_rightsizing(FILE *f, const td_rightsize *rs)
{
    static const char *const heads[] = {
        "owner",           "GPU req p50/p95",          "GPU used p50/p95",
        "GPU quota",       "recommended GPUs",         "CPU req p50/p95",
        "recommended CPU", "memory req p50/p95 (GiB)", "recommended memory",
        "interruptible candidate GPU-h", "saving"};
    fputs("<h2>Right-sizing</h2>\n", f);
    td_htmlpage_table(f, NULL, heads, sizeof heads / sizeof heads[0]);
    for (size_t i = 0; i < rs->nrows; i++) {
        const td_rightsize_row *r = &rs->rows[i];
        char a[40], b[40], c[40], gq[32], cr[32], ig[32], sv[32], d[40];
        fputs("<tr><td>", f);
        td_htmlpage_text(f, r->owner);
        pctl_cell(a, sizeof a, r->gpu_requested, 1000);
        pctl_cell(b, sizeof b, r->gpu_used, 1000);
        pctl_cell(c, sizeof c, r->cpu_requested, 1000);
        gib_cell(d, sizeof d, r->memory_requested);
        quota_cell(gq, sizeof gq, r->gpu_quota_milli);
        fixed(cr, sizeof cr, r->recommended_cpu_milli, 1000, 3);
        fixed(ig, sizeof ig, r->interruptible_candidate_gpu_milli_hours, 1000, 3);
        money(sv, sizeof sv, r->interruptible_saving_cents);
        fprintf(f, "</td><td>%s</td><td>%s%s</td><td>%s</td><td>%lld</td><td>%s</td>"
                   "<td>%s</td><td>%s</td><td>%lldGi</td><td>%s</td><td>%s</td></tr>\n",
                a, b, r->gpu_used_estimated ? "*" : "", gq, (long long)r->recommended_gpus, c,
                cr, d, (long long)(r->recommended_memory_bytes >> 30), ig, sv);
    }
    fputs("</table>\n<p>Recommended = p95 &times; 1.2, rounded up (GPUs from measured use, "
          "CPU and memory from requests). * GPU use was unknown for some intervals; the "
          "requested GPUs stand in. Interruptible candidates: GPU-hours that ran "
          "non-interruptible outside the CostPolicy's protected environments.</p>\n",
          f);
    fputs("<p>Idle routes (scale-to-zero candidates):", f);
    for (size_t i = 0; i < rs->nidle_routes; i++) {
        fputc(' ', f);
        td_htmlpage_text(f, rs->idle_routes[i]);
    }
    fputs(rs->nidle_routes ? "</p>\n" : " none</p>\n", f);
}

static void html_lines(FILE *f, const td_chargeback_report *rep)
{
    char a[40], b[40];
    static const char *const heads[] = {"owner", "item", "quantity", "unit", "amount"};
    fputs("<h2>Chargeback</h2>\n", f);
    td_htmlpage_table(f, "lines", heads, 5);
    for (size_t i = 0; i < rep->nlines; i++) {
        const td_chargeback_line *l = &rep->lines[i];
        fputs("<tr><td>", f);
        td_htmlpage_text(f, l->owner);
        fputs("</td><td>", f);
        td_htmlpage_text(f, l->item);
        fixed(a, sizeof a, l->quantity_micro, 1000000, 6);
        money(b, sizeof b, l->amount_cents);
        fprintf(f, "</td><td>%s</td><td>%s</td><td>%s</td></tr>\n", a, l->unit, b);
    }
    money(a, sizeof a, rep->total_cents);
    fprintf(f, "<tr><th>total</th><th></th><th></th><th></th><th>%s</th></tr>\n</table>\n", a);
    fputs("<p>Rounding: each line is rounded half up to the cent once; a shared item is "
          "rounded to the cent and split by the largest-remainder rule (ties to the owner "
          "whose name sorts first), so the lines add up to the total exactly.</p>\n",
          f);
}

/* The report as one self-contained HTML page (htmlpage.h): showback, the
 * cost chart, shared items, utilisation and right-sizing, the lines. */
static void write_html(FILE *f, const td_costpolicy *p, const td_chargeback_report *rep,
                       const td_rightsize *rs, const td_ledger_rec *recs, size_t n)
{
    char from[40], to[40], a[40], b[40], c[40];
    td_report_time_format(rep->from_ns, from, sizeof from);
    td_report_time_format(rep->to_ns, to, sizeof to);
    td_htmlpage_begin(f, "tenantd cost report", report_css, "Cost report");
    fprintf(f, "<p>Period %s to %s, by %s, in %s. Total <b id=\"total\">", from, to,
            by_name(rep->by), rep->currency);
    money(a, sizeof a, rep->total_cents);
    money(b, sizeof b, rep->direct_cents);
    money(c, sizeof c, rep->shared_cents);
    fprintf(f, "%s</b> = direct %s + shared %s.</p>\n", a, b, c);
    html_showback(f, rep);
    html_cost_chart(f, p, rep, recs, n);
    html_shared(f, rep);
    if (rs && rs->nrows) {
        html_utilisation(f, rs);
        html_rightsizing(f, rs);
    }
    html_lines(f, rep);
    td_htmlpage_end(f);
}

int td_cmd_report(int argc, char **argv)
{
    static const struct option opts[] = {
        {"data", required_argument, NULL, 'd'},   {"config", required_argument, NULL, 'c'},
        {"database", required_argument, NULL, 'D'},
        {"from", required_argument, NULL, 'F'},   {"to", required_argument, NULL, 'T'},
        {"by", required_argument, NULL, 'b'},     {"format", required_argument, NULL, 'f'},
        {"output", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    if (td_cli_wants_help(argc, argv)) {
        usage(stdout);
        return TD_EXIT_OK;
    }
    const char *by_s = "tenant", *format = "table", *output = NULL;
    td_report_flags rf = {0};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "c:o:h", opts, NULL)) != -1) {
        int taken = td_report_flag("report", &rf, c);
        if (taken < 0)
            return TD_EXIT_USAGE;
        if (taken)
            continue;
        switch (c) {
        case 'b':
            by_s = optarg;
            break;
        case 'f':
            format = optarg;
            break;
        case 'o':
            output = optarg;
            break;
        default:
            fprintf(stderr, "tenantctl report: unknown or incomplete flag \"%s\"; see "
                            "tenantctl report --help\n",
                    argv[optind - 1]);
            return TD_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tenantctl report: unexpected argument \"%s\"\n", argv[optind]);
        return TD_EXIT_USAGE;
    }
    td_err err;
    td_chargeback_by by;
    if (td_chargeback_by_parse(by_s, &by, &err) != TD_OK || by == TD_BY_NAMESPACE) {
        fprintf(stderr, "tenantctl report: --by \"%s\": must be tenant, team, project, "
                        "environment or model\n",
                by_s);
        return TD_EXIT_USAGE;
    }
    if (td_cli_choice(format, "table|csv|json|html") < 0) {
        fprintf(stderr, "tenantctl report: --format \"%s\": must be table, csv, json or html\n",
                format);
        return TD_EXIT_USAGE;
    }
    td_report_input in;
    int rc = td_report_load("report", &rf, 1, &in);
    if (rc != TD_EXIT_OK)
        return rc;
    td_pool_gpus *pools = NULL;
    size_t npools = 0;
    td_chargeback_report *rep = NULL;
    td_rightsize *rs = NULL;
    FILE *f = stdout;
    rc = TD_EXIT_USAGE;
    if (td_chargeback_pools(in.cfg, &pools, &npools, &err) != TD_OK ||
        td_chargeback_compute(in.policy, in.recs, in.nrecs, in.from_ns, in.to_ns, by, pools,
                              npools, &rep, &err) != TD_OK ||
        td_rightsize_compute(in.cfg, in.policy, in.recs, in.nrecs, in.from_ns, in.to_ns, by, &rs,
                             &err) != TD_OK) {
        fprintf(stderr, "tenantctl report: %s\n", err.msg);
        goto done;
    }
    if (output && !(f = fopen(output, "w"))) {
        fprintf(stderr, "tenantctl report: %s: cannot write\n", output);
        f = stdout;
        goto done;
    }
    if (strcmp(format, "csv") == 0)
        write_csv(f, rep);
    else if (strcmp(format, "json") == 0)
        write_json(f, rep, rs);
    else if (strcmp(format, "html") == 0)
        write_html(f, in.policy, rep, rs, in.recs, in.nrecs);
    else
        write_table(f, rep, rs);
    rc = TD_EXIT_OK;
    if (fflush(f) != 0 || ferror(f)) {
        fprintf(stderr, "tenantctl report: write failed\n");
        rc = TD_EXIT_USAGE;
    }
done:
    if (f != stdout)
        fclose(f);
    td_rightsize_destroy(rs);
    td_chargeback_report_destroy(rep);
    free(pools);
    td_report_input_free(&in);
    return rc;
}
