/* cli.h - tenantctl's verbs. Each verb is one file, src/cli/cmd_VERB.c, with
 * one entry point taking the arguments after the verb name (argv[0] is the
 * verb). Exit codes: 0 ok/allowed, 1 denied, 2 bad input or usage. */
#ifndef TENANTD_CLI_H
#define TENANTD_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "io/ledger.h"

#define TD_EXIT_OK 0
#define TD_EXIT_DENIED 1
#define TD_EXIT_USAGE 2
#define TD_EXIT_UNAVAILABLE 3 /* could not reach tenantd */

int td_cmd_quantity(int argc, char **argv);
int td_cmd_admit(int argc, char **argv);
int td_cmd_admit_remote(int argc, char **argv); /* admit --server: decided by a running tenantd */
int td_cmd_explain_request(int argc, char **argv); /* explain request: a tenant's gateway limits */
int td_cmd_explain_pod(int argc, char **argv);     /* explain pod: each admission step */
int td_cmd_explain_workload(int argc, char **argv); /* explain workload: why it is where it is */
int td_cmd_simulate_remote(int argc, char **argv);  /* simulate --server: from the live queues */
int td_cmd_provision(int argc, char **argv);
int td_cmd_apply(int argc, char **argv);
int td_cmd_get(int argc, char **argv);
int td_cmd_delete(int argc, char **argv);
int td_cmd_submit(int argc, char **argv);
int td_cmd_finish(int argc, char **argv);
int td_cmd_simulate(int argc, char **argv);
int td_cmd_loadtest(int argc, char **argv);
int td_cmd_report(int argc, char **argv);
int td_cmd_recommend(int argc, char **argv);

/* What `report` and `recommend` read (cmd_report.c): the period, the
 * platform (-c files, else DIR/tenantd.db), its CostPolicy (NULL when
 * need_policy is 0 and there is none) and the ledger records overlapping the
 * period. td_report_load prints its own error and returns an exit code. */
typedef struct {
    struct td_config *cfg;
    struct td_costpolicy *policy;
    td_ledger_rec *recs;
    size_t nrecs;
    int64_t from_ns, to_ns;
} td_report_input;
/* The flags `report` and `recommend` share: --data DIR, --database URL,
 * -c FILE..., --from, --to (getopt values 'd', 'D', 'c', 'F', 'T'; strings
 * borrowed from argv). */
#define TD_REPORT_MAX_FILES 32
typedef struct {
    const char *data, *database, *from, *to;
    const char *cfiles[TD_REPORT_MAX_FILES];
    size_t ncfiles;
} td_report_flags;
/* Takes getopt's flag c (optarg its value): 1 if it was one of the shared
 * flags, 0 if not, -1 after printing that there are too many -c files. */
int td_report_flag(const char *verb, td_report_flags *f, int c);
int td_report_load(const char *verb, const td_report_flags *f, int need_policy,
                   td_report_input *in);
void td_report_input_free(td_report_input *in);
void td_report_time_format(int64_t ns, char *buf, size_t len);

int td_cmd_explain(int argc, char **argv);

/* What `tenantctl provision` emits for one namespace; explain builds the
 * same from a Tenant. Strings are borrowed. */
typedef struct {
    const char *team, *env, *ns, *project, *group, *cq, *pss, *pool;
    const char *cpu, *mem, *lmem, *gpus, *pods, *pvcs; /* canonical quantities */
    int customer;                                      /* spec.tenancy: customer */
    int virtual_cluster;
    const char *gateway_ns;
    int gateway_port;
    const char *runtime_class, *runtime_handler;
    const char *bucket, *prefix, *storage_classes; /* storage_classes: comma-separated */
    const char *gcp_sa, *aws_role;
    const char *vcluster_version;
} td_provision;

/* One object of the baseline: the layer (a row of docs/admission.md's tiers
 * table), its kind and name. */
typedef struct {
    const char *layer;
    const char *kind;
    char name[160];
} td_provision_item;

/* Calls fn for each object p emits, in output order. */
void td__provision_each(const td_provision *p,
                        void (*fn)(void *ctx, const td_provision_item *it), void *ctx);

/* true if argv holds -h or --help. */
int td_cli_wants_help(int argc, char **argv);

/* The flag tails every verb shares. td_cli_add_file appends path (borrowed)
 * to files[*n] for a repeatable -c FILE; -1, after printing "tenantctl
 * VERB: at most MAX -c files", when max are there already. */
int td_cli_add_file(const char *verb, const char **files, size_t *n, size_t max,
                    const char *path);

/* The index of value among choices ("table|json": 0 for "table", 1 for
 * "json"), or -1 if it is none of them; the caller words the mistake. */
int td_cli_choice(const char *value, const char *choices);

/* Writes s to f with <, >, & and " escaped, for HTML text and attribute
 * values (report --format html, loadtest --html). */
void td_cli_html_text(FILE *f, const char *s);

#endif
