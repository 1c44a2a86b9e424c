/* cmd_admit.c - `tenantctl admit`: one admission decision, offline, with
 * the same code the webhook runs. Prints an AdmissionReview v1 response. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "admission/admit.h"
#include "core/config.h"
#include "core/manifest.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tenantctl admit -f POD.yaml [-c PLATFORM.yaml]... [--used PODS.yaml]\n"
            "                       [--mode both|mutate|validate] [-o review|summary] [-q]\n\n"
            "Decides one Pod (or an AdmissionReview v1 request wrapping one) against the\n"
            "objects of its namespace in PLATFORM (Namespace, ResourceQuota, LimitRange,\n"
            "PriorityClass, Tenant, NodePool, AdmissionPolicy), as kube-apiserver and\n"
            "tenantd's webhook would, and prints the AdmissionReview v1 response. A\n"
            "workload (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob, ...)\n"
            "is allowed with the Pod Security warnings its pod template earns; warnings\n"
            "are also printed on stderr.\n\n"
            "  -f, --file FILE      the Pod or AdmissionReview (YAML or JSON; - for stdin)\n"
            "  -c, --config FILE    platform objects (repeatable)\n"
            "      --used FILE      pods already running in the namespace (the quota's used):\n"
            "                       several documents, or a List with items\n"
            "      --mode MODE      both (default): mutate then validate, as `admit` does;\n"
            "                       mutate or validate: as the webhook's /mutate or /validate\n"
            "  -o, --output FMT     review (default): the AdmissionReview v1 response as JSON;\n"
            "                       summary: the decision and each change, for a person\n"
            "  -q, --quiet          no one-line summary on stderr\n\n"
            "Against a running tenantd (dry run with its live objects and quota usage;\n"
            "nothing is stored): tenantctl admit --server URL -f POD [--mode M] [-q]\n"
            "  -s, --server URL     tenantd's admin listener; --cacert, --insecure, --cert,\n"
            "                       --key and --token-file as for `tenantctl apply`\n\n"
            "exit status: 0 allowed, 1 denied, 2 bad input, 3 tenantd unreachable\n");
}

/* Appends the pods of m (documents, or the items of a List) to *pods. */
static int collect_pods(const td_manifest *m, json_t *arr)
{
    for (size_t i = 0; i < td_manifest_count(m); i++) {
        json_t *d = td_manifest_doc(m, i);
        const char *kind = td_json_str(d, "kind");
        json_t *items = json_object_get(d, "items");
        if (kind && (strcmp(kind, "List") == 0 || strcmp(kind, "PodList") == 0) &&
            json_is_array(items)) {
            size_t k;
            json_t *p;
            json_array_foreach(items, k, p)
            {
                if (!json_is_object(p) || !json_is_array(td_json_path(p, "spec.containers"))) {
                    fprintf(stderr, "tenantctl admit: %s: items[%zu] is not a Pod\n",
                            td_manifest_name(m), k);
                    return -1;
                }
                json_array_append(arr, p);
            }
        } else if (kind && strcmp(kind, "Pod") == 0) {
            json_array_append(arr, d);
        } else {
            td_err err;
            td_manifest_err(m, d, &err, TD_EINVAL, "document %zu is a %s, not a Pod or a List",
                            i + 1, kind ? kind : "object without kind");
            fprintf(stderr, "tenantctl admit: %s\n", err.msg);
            return -1;
        }
    }
    return 0;
}

/* What the offline verbs (admit, explain pod) load: the platform, the one
 * document to decide and the pods already running (--used). */
typedef struct {
    td_config *cfg;
    td_manifest *input, *used;
    json_t *pods;       /* holds the used pods */
    td_admit_opts opts; /* used_pods: malloc'd, pointing into pods */
} offline;

/* Loads o (zeroed by the caller) for verb; what names the one document
 * expected in file. 0, or -1 with the reason on stderr; either way the
 * caller runs offline_fini. */
static int offline_load(offline *o, const char *verb, const char *what,
                        const char *const *configs, size_t nconfigs, const char *file,
                        const char *used)
{
    td_err err;
    if (td_config_load_files(configs, nconfigs, &o->cfg, &err) != TD_OK ||
        td_manifest_load_file(file, &o->input, &err) != TD_OK) {
        fprintf(stderr, "tenantctl %s: %s\n", verb, err.msg);
        return -1;
    }
    if (td_manifest_count(o->input) != 1) {
        fprintf(stderr, "tenantctl %s: %s: expected one %s, found %zu documents\n", verb,
                td_manifest_name(o->input), what, td_manifest_count(o->input));
        return -1;
    }
    if (!used)
        return 0;
    if (td_manifest_load_file(used, &o->used, &err) != TD_OK) {
        fprintf(stderr, "tenantctl %s: %s\n", verb, err.msg);
        return -1;
    }
    if (!(o->pods = json_array()) || collect_pods(o->used, o->pods) < 0)
        return -1;
    o->opts.has_used = true;
    o->opts.nused = json_array_size(o->pods);
    json_t **p = o->opts.nused ? calloc(o->opts.nused, sizeof *p) : NULL;
    if (o->opts.nused && !p) {
        fprintf(stderr, "tenantctl %s: out of memory\n", verb);
        return -1;
    }
    for (size_t i = 0; i < o->opts.nused; i++)
        p[i] = json_array_get(o->pods, i);
    o->opts.used_pods = p;
    return 0;
}

static void offline_fini(offline *o)
{
    free((void *)o->opts.used_pods);
    json_decref(o->pods);
    td_manifest_destroy(o->input);
    td_manifest_destroy(o->used);
    td_config_unref(o->cfg);
}

/* The decision and each JSONPatch operation on its own line. */
static int print_summary(const td_config *cfg, json_t *input, const td_admit_opts *opts)
{
    json_t *pod = input;
    const char *ns = NULL;
    if (td_json_str(input, "kind") && strcmp(td_json_str(input, "kind"), "AdmissionReview") == 0) {
        pod = td_json_path(input, "request.object");
        ns = td_json_str(input, "request.namespace");
    }
    td_admit_result r;
    if (td_admit_is_workload(td_json_str(pod, "kind")))
        td_admit_workload(cfg, pod, NULL, ns, &r);
    else
        td_admit_pod(cfg, pod, ns, opts, &r);
    const char *name = td_json_str(pod, "metadata.name");
    if (!ns)
        ns = td_json_str(pod, "metadata.namespace");
    printf("%s/%s: %s", ns ? ns : "default", name ? name : "(unnamed)",
           r.allowed ? "ALLOWED" : r.code == 400 ? "BAD INPUT" : "DENIED");
    if (!r.allowed)
        printf(" by %s\n  %s\n", r.rule ? r.rule : "?", r.message);
    else
        printf("%s\n", r.patch ? ", with changes:" : "");
    size_t i;
    json_t *op, *w;
    json_array_foreach(r.warnings, i, w)
        printf("  warning: %s\n", json_string_value(w));
    json_array_foreach(r.allowed ? r.patch : NULL, i, op)
    {
        char *v = json_dumps(json_object_get(op, "value"), JSON_COMPACT | JSON_ENCODE_ANY);
        printf("  %s %s%s%s\n", td_json_str(op, "op"), td_json_str(op, "path"), v ? " = " : "",
               v ? v : "");
        free(v);
    }
    int rc = r.allowed ? TD_EXIT_OK : r.code == 400 ? TD_EXIT_USAGE : TD_EXIT_DENIED;
    td_admit_result_fini(&r);
    return rc;
}

/* tenantctl admit's flags. */
typedef struct {
    const char *file, *used, *output;
    const char *configs[64];
    size_t nconfigs;
    td_review_mode mode;
    int quiet;
} admit_flags;

/* Reads argv into *f. -1 to go on, else the exit status to return. */
static int admit_parse(int argc, char **argv, admit_flags *f)
{
    static const struct option longopts[] = {
        {"file", required_argument, NULL, 'f'}, {"config", required_argument, NULL, 'c'},
        {"used", required_argument, NULL, 'u'}, {"mode", required_argument, NULL, 'm'},
        {"quiet", no_argument, NULL, 'q'},      {"help", no_argument, NULL, 'h'},
        {"output", required_argument, NULL, 'o'},
        {NULL, 0, NULL, 0}};
    const char *mode_s = "both";
    int c;
    f->output = "review";
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "f:c:o:qh", longopts, NULL)) != -1) {
        switch (c) {
        case 'f': f->file = optarg; break;
        case 'u': f->used = optarg; break;
        case 'm': mode_s = optarg; break;
        case 'q': f->quiet = 1; break;
        case 'o': f->output = optarg; break;
        case 'c':
            if (td_cli_add_file("admit", f->configs, &f->nconfigs,
                                sizeof f->configs / sizeof f->configs[0], optarg) != 0)
                return TD_EXIT_USAGE;
            break;
        case 'h':
            usage(stdout);
            return TD_EXIT_OK;
        default:
            fprintf(stderr, "tenantctl admit: unknown or incomplete flag \"%s\"\n",
                    argv[optind - 1]);
            usage(stderr);
            return TD_EXIT_USAGE;
        }
    }
    if (!f->file || optind < argc) {
        fprintf(stderr, "tenantctl admit: %s\n",
                !f->file ? "-f POD.yaml is required" : "unexpected argument");
        usage(stderr);
        return TD_EXIT_USAGE;
    }
    if (td_cli_choice(f->output, "review|summary") < 0) {
        fprintf(stderr, "tenantctl admit: -o must be review or summary\n");
        return TD_EXIT_USAGE;
    }
    static const td_review_mode modes[] = {TD_REVIEW_MUTATE_AND_VALIDATE, TD_REVIEW_MUTATE,
                                           TD_REVIEW_VALIDATE};
    int m = td_cli_choice(mode_s, "both|mutate|validate");
    if (m < 0) {
        fprintf(stderr, "tenantctl admit: --mode must be both, mutate or validate\n");
        return TD_EXIT_USAGE;
    }
    f->mode = modes[m];
    return -1;
}

/* Prints the AdmissionReview response for doc on stdout and, unless quiet,
 * its warnings and a one-line summary on stderr. Returns the exit status. */
static int print_review(const td_config *cfg, json_t *doc, td_review_mode mode,
                        const td_admit_opts *opts, int quiet)
{
    int code = 0;
    json_t *out = NULL;
    if (td_admission_review(cfg, doc, mode, opts, &out, &code) != TD_OK) {
        fprintf(stderr, "tenantctl admit: out of memory\n");
        return TD_EXIT_USAGE;
    }
    json_dumpf(out, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
    json_t *resp = json_object_get(out, "response");
    const char *msg = td_json_str(resp, "status.message");
    size_t wi;
    json_t *w;
    int rc;
    json_array_foreach(quiet ? NULL : json_object_get(resp, "warnings"), wi, w)
        fprintf(stderr, "warning: %s\n", json_string_value(w)); /* as kubectl prints them */
    if (json_is_true(json_object_get(resp, "allowed"))) {
        rc = TD_EXIT_OK;
        if (!quiet)
            fprintf(stderr, "allowed%s\n",
                    json_object_get(resp, "patch") ? " (with a JSON patch: see response.patch)"
                                                   : "");
    } else {
        rc = code == 400 ? TD_EXIT_USAGE : TD_EXIT_DENIED;
        if (!quiet)
            fprintf(stderr, "%s: %s\n", code == 400 ? "bad input" : "denied", msg ? msg : "");
    }
    json_decref(out);
    return rc;
}

int td_cmd_admit(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--server") == 0 || strcmp(argv[i], "-s") == 0 ||
            strncmp(argv[i], "--server=", 9) == 0)
            return td_cmd_admit_remote(argc, argv);
    admit_flags f = {0};
    int rc = admit_parse(argc, argv, &f);
    if (rc >= 0)
        return rc;
    offline o = {0};
    rc = TD_EXIT_USAGE;
    if (offline_load(&o, "admit", "Pod or AdmissionReview", f.configs, f.nconfigs, f.file,
                     f.used) == 0) {
        json_t *doc = td_manifest_doc(o.input, 0);
        rc = strcmp(f.output, "summary") == 0 ? print_summary(o.cfg, doc, &o.opts)
                                              : print_review(o.cfg, doc, f.mode, &o.opts, f.quiet);
    }
    offline_fini(&o);
    return rc;
}

/* `tenantctl explain pod -f POD -c PLATFORM... [--used PODS] [-o table|json]`:
 * the admission pipeline's steps in the order they run, with what each
 * mutation changed and what each check decided (shadow rules included). */
int td_cmd_explain_pod(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"file", required_argument, NULL, 'f'}, {"config", required_argument, NULL, 'c'},
        {"used", required_argument, NULL, 'u'}, {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0}};
    const char *file = NULL, *used = NULL, *output = "table";
    const char *configs[64];
    size_t nconfigs = 0;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "f:c:u:o:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'f': file = optarg; break;
        case 'u': used = optarg; break;
        case 'o': output = optarg; break;
        case 'c':
            if (td_cli_add_file("explain pod", configs, &nconfigs,
                                sizeof configs / sizeof configs[0], optarg) != 0)
                return TD_EXIT_USAGE;
            break;
        case 'h':
            printf("usage: tenantctl explain pod -f POD.yaml -c PLATFORM.yaml... [--used PODS.yaml]\n"
                   "                            [-o table|json]\n\n"
                   "Runs the admission pipeline on one Pod (or AdmissionReview) and prints every\n"
                   "step in the order kube-apiserver and tenantd run them: each mutation with the\n"
                   "JSONPatch operations it made, each check with passed, denied (the first\n"
                   "denial ends the decision) or shadow-denied (a rule in shadow that would have\n"
                   "denied), and skipped steps with why.\n\n"
                   "exit status: 0 allowed, 1 denied, 2 bad input\n");
            return TD_EXIT_OK;
        default:
            return td__remote_bad_flag("explain pod", argv);
        }
    }
    if (!file || optind < argc || td_cli_choice(output, "table|json") < 0) {
        fprintf(stderr, "tenantctl explain pod: %s; see --help\n",
                !file             ? "-f POD.yaml is required"
                : optind < argc   ? "unexpected argument"
                                  : "-o must be table or json");
        return TD_EXIT_USAGE;
    }
    offline o = {0};
    if (offline_load(&o, "explain pod", "Pod", configs, nconfigs, file, used) < 0) {
        offline_fini(&o);
        return TD_EXIT_USAGE;
    }
    o.opts.trace = true;
    json_t *pod = td_manifest_doc(o.input, 0);
    const char *ns = NULL;
    if (td_json_str(pod, "kind") && strcmp(td_json_str(pod, "kind"), "AdmissionReview") == 0) {
        ns = td_json_str(pod, "request.namespace");
        pod = td_json_path(pod, "request.object");
    }
    td_admit_result r;
    td_admit_pod(o.cfg, pod, ns, &o.opts, &r);
    int rc = r.allowed ? TD_EXIT_OK : r.code == 400 ? TD_EXIT_USAGE : TD_EXIT_DENIED;
    if (strcmp(output, "json") == 0) {
        json_t *o = json_pack("{s:b, s:i, s:s?, s:s, s:O?}", "allowed", r.allowed, "code", r.code,
                              "rule", r.rule, "message", r.message, "steps", r.trace);
        json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
        json_decref(o);
    } else {
        const char *name = td_json_str(pod, "metadata.name");
        printf("%s/%s: %s", ns ? ns : td_json_str(pod, "metadata.namespace") ? td_json_str(pod, "metadata.namespace") : "default",
               name ? name : "(unnamed)",
               r.allowed ? "ALLOWED" : r.code == 400 ? "BAD INPUT" : "DENIED");
        if (!r.allowed && r.rule)
            printf(" by %s", r.rule);
        if (json_array_size(r.shadowed))
            printf(" (%zu rule%s in shadow would deny)", json_array_size(r.shadowed),
                   json_array_size(r.shadowed) == 1 ? "" : "s");
        printf("\n\n  %-9s %-14s %-14s %s\n", "PHASE", "STEP", "RESULT", "DETAIL");
        size_t i;
        json_t *s;
        json_array_foreach(r.trace, i, s)
        {
            json_t *ops = json_object_get(s, "changes");
            const char *msg = td_json_str(s, "message");
            int detail = msg || json_array_size(ops);
            printf("  %-9s %-14s %-*s", td_json_str(s, "phase"), td_json_str(s, "step"),
                   detail ? 14 : 0, td_json_str(s, "result"));
            if (msg)
                printf(" %s", msg);
            size_t k;
            json_t *op;
            json_array_foreach(ops, k, op)
            {
                char *v = json_dumps(json_object_get(op, "value"), JSON_COMPACT | JSON_ENCODE_ANY);
                printf("%s%s %s%s%s\n", k ? "  " : " ", td_json_str(op, "op"),
                       td_json_str(op, "path"), v ? " = " : "", v ? v : "");
                if (k + 1 < json_array_size(ops))
                    printf("  %-9s %-14s %-14s", "", "", "");
                free(v);
            }
            if (!json_array_size(ops))
                printf("\n");
        }
        if (!r.allowed)
            printf("\n%s\n", r.message);
    }
    td_admit_result_fini(&r);
    offline_fini(&o);
    return rc;
}
