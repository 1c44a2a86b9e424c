/* cmd_explain.c - `tenantctl explain SUBJECT NAME -c PLATFORM...`: what
 * holds for one subject, read from a platform config. Subjects are a
 * table (only "tenant" so far; workload, pod and request are to come):
 * for a tenant, its tier, the layers in force with the objects
 * provisioning emits for each of its namespaces (and whether the config
 * holds them), and the checks admission makes for its pods and PVCs. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "core/config.h"
#include "admission/tenancy.h"

/* A subject either explains NAME from -c PLATFORM files (run), or takes
 * its own flags (main: argv[0] is the subject), e.g. to ask a running
 * tenantd. */
typedef struct {
    const char *name;
    int (*run)(const td_config *cfg, const char *name);
    int (*main)(int argc, char **argv);
    const char *summary;
} subject;

static int explain_tenant(const td_config *cfg, const char *name);

static const subject subjects[] = {
    {"tenant", explain_tenant, NULL,
     "tier, layers in force, objects provisioning emits, admission checks"},
    {"pod", NULL, td_cmd_explain_pod,
     "each admission step in order: what it changed, what it checked (-f POD)"},
    {"workload", NULL, td_cmd_explain_workload,
     "a batch workload: why pending/admitted, position, preemptions (running tenantd)"},
    {"request", NULL, td_cmd_explain_request,
     "a tenant's gateway limits now and its latest refusals (running tenantd)"},
};

#define NSUBJECTS (sizeof subjects / sizeof subjects[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: tenantctl explain SUBJECT NAME -c PLATFORM.yaml [-c ...]\n"
               "       tenantctl explain pod -f POD -c PLATFORM.yaml [--used PODS.yaml]\n"
               "       tenantctl explain workload [NS/]NAME [--server URL]\n"
               "       tenantctl explain request [--tenant T] [--server URL]\n\n"
               "Explains one object as tenantd sees it (tenantctl explain SUBJECT --help).\n\n"
               "subjects:\n");
    for (size_t i = 0; i < NSUBJECTS; i++)
        fprintf(f, "  %-8s %s\n", subjects[i].name, subjects[i].summary);
    fprintf(f, "\n  -c, --config FILE    platform objects (repeatable), required\n\n"
               "exit status: 0 explained, 2 bad input or unknown NAME\n");
}

int td_cmd_explain(int argc, char **argv)
{
    for (size_t i = 0; argc > 1 && i < NSUBJECTS; i++)
        if (subjects[i].main && strcmp(argv[1], subjects[i].name) == 0)
            return subjects[i].main(argc - 1, argv + 1);
    static const struct option longopts[] = {{"config", required_argument, NULL, 'c'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *configs[32];
    size_t nconfigs = 0;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            if (td_cli_add_file("explain", configs, &nconfigs, sizeof configs / sizeof configs[0],
                                optarg) != 0)
                return TD_EXIT_USAGE;
            break;
        case 'h':
            usage(stdout);
            return TD_EXIT_OK;
        default:
            return td__remote_bad_flag("explain", argv);
        }
    }
    if (argc - optind != 2 || nconfigs == 0) {
        fprintf(stderr, "tenantctl explain: %s; see --help\n",
                nconfigs == 0 ? "-c PLATFORM is required" : "give a SUBJECT and a NAME");
        return TD_EXIT_USAGE;
    }
    const subject *s = NULL;
    for (size_t i = 0; i < NSUBJECTS; i++)
        if (strcmp(argv[optind], subjects[i].name) == 0)
            s = &subjects[i];
    if (s && !s->run) {
        fprintf(stderr, "tenantctl explain: put the subject first: tenantctl explain %s ...\n",
                s->name);
        return TD_EXIT_USAGE;
    }
    if (!s) {
        fprintf(stderr, "tenantctl explain: unknown subject \"%s\" (known:", argv[optind]);
        for (size_t i = 0; i < NSUBJECTS; i++)
            fprintf(stderr, " %s", subjects[i].name);
        fprintf(stderr, ")\n");
        return TD_EXIT_USAGE;
    }
    td_config *cfg = NULL;
    td_err err;
    if (td_config_load_files(configs, nconfigs, &cfg, &err) != TD_OK) {
        fprintf(stderr, "tenantctl explain: %s\n", err.msg);
        return TD_EXIT_USAGE;
    }
    int rc = s->run(cfg, argv[optind + 1]);
    td_config_unref(cfg);
    return rc;
}

/* ---- explain tenant ------------------------------------------------------ */

typedef struct {
    const td_config *cfg;
    const char *ns;
} item_ctx;

static void print_item(void *ctx, const td_provision_item *it)
{
    const item_ctx *x = ctx;
    json_t *have = td_config_get(x->cfg, it->kind, x->ns, it->name);
    printf("    %-26s %-15s %-30s %s\n", it->layer, it->kind, it->name,
           have ? "in config" : "not in config");
}

static void print_pools(const td_config *cfg, const char *tenant, int customer)
{
    json_t *const *pools;
    size_t n = td_config_list(cfg, "NodePool", NULL, &pools);
    int any = 0;
    for (size_t i = 0; i < n; i++) {
        int dedicated = td_pool_dedicated_to(pools[i], tenant);
        int open = 0;
        size_t k;
        json_t *x;
        json_array_foreach(td_json_path(pools[i], "spec.tenants"), k, x)
        {
            open |= strcmp(json_string_value(x), "*") == 0 || strcmp(json_string_value(x), tenant) == 0;
        }
        if (dedicated || (!customer && open)) {
            printf("%s%s%s", any ? ", " : "", td_json_str(pools[i], "metadata.name"),
                   dedicated ? " (dedicated)" : " (shared)");
            any = 1;
        }
    }
    if (!any)
        printf("none: GPU pods are denied");
}

static int explain_tenant(const td_config *cfg, const char *name)
{
    json_t *t = td_config_get(cfg, "Tenant", NULL, name);
    if (!t) {
        fprintf(stderr, "tenantctl explain: no Tenant \"%s\" in the config\n", name);
        return TD_EXIT_USAGE;
    }
    td_tenancy tier = td_tenancy_of(t);
    int customer = tier == TD_TENANCY_CUSTOMER;
    const char *rc = td_sandbox_runtime_class(cfg);
    json_t *rcobj = td_config_get(cfg, "RuntimeClass", NULL, rc);
    json_t *storage = td_json_path(t, "spec.storage");
    json_t *nss = td_json_path(t, "spec.namespaces");

    printf("Tenant %s: tenancy %s%s\n", name, td_tenancy_name(tier),
           td_json_path(t, "spec.tenancy") ? "" : " (the default)");
    printf("  namespaces:");
    size_t i;
    json_t *x;
    json_array_foreach(nss, i, x)
    {
        printf(" %s", json_string_value(x));
    }
    printf("%s\n\nLayers in force\n", json_array_size(nss) ? "" : " none");
    json_array_foreach(nss, i, x)
    {
        const char *ns = json_string_value(x);
        json_t *nsobj = td_config_get(cfg, "Namespace", NULL, ns);
        const char *lvl = json_string_value(json_object_get(
            td_json_path(nsobj, "metadata.labels"), "pod-security.kubernetes.io/enforce"));
        printf("  Pod Security in %s: %s\n", ns,
               lvl ? lvl
                   : nsobj ? "no enforce label (privileged)"
                           : "Namespace not in the config (judged as privileged)");
    }
    if (customer)
        printf("  sandbox runtime: every pod runs in RuntimeClass %s (handler %s)\n", rc,
               rcobj ? td_json_str(rcobj, "handler") : "?, not in config");
    else
        printf("  sandbox runtime: only untrusted workloads (label %s, e.g. notebook) run in "
               "RuntimeClass %s%s\n",
               TD_LABEL_WORKLOAD, rc,
               rcobj ? "" : " (not in the config: such pods fail at the API server)");
    printf("  GPU pools: ");
    print_pools(cfg, name, customer);
    printf("%s\n", customer ? " (customers: dedicated pools only)" : "");
    if (storage) {
        const char *p = td_json_str(storage, "prefix");
        printf("  storage: gs:// or s3://%s/%s", td_json_str(storage, "bucket"), p ? p : "");
        json_t *cls = json_object_get(storage, "storageClasses");
        if (cls) {
            printf("; StorageClasses:");
            json_array_foreach(cls, i, x)
            {
                printf(" %s", json_string_value(x));
            }
        }
        if (td_json_str(storage, "identity.gcpServiceAccount"))
            printf("; GKE identity %s", td_json_str(storage, "identity.gcpServiceAccount"));
        if (td_json_str(storage, "identity.awsRoleArn"))
            printf("; EKS role %s", td_json_str(storage, "identity.awsRoleArn"));
        printf("\n");
    } else {
        printf("  storage: no spec.storage; locations in other tenants' prefixes are denied\n");
    }

    json_array_foreach(nss, i, x)
    {
        const char *ns = json_string_value(x);
        td_provision p = {0};
        p.team = name;
        p.ns = ns;
        p.env = strncmp(ns, name, strlen(name)) == 0 && ns[strlen(name)] == '-'
                    ? ns + strlen(name) + 1
                    : ns;
        p.customer = customer;
        p.runtime_class = rc;
        p.bucket = td_json_str(storage, "bucket");
        char vc[200];
        snprintf(vc, sizeof vc, "%s-vcluster", name);
        p.virtual_cluster = customer && td_config_get(cfg, "HelmChart", ns, vc) != NULL;
        printf("\nObjects `tenantctl provision --team %s --env %s --tenancy %s%s%s` emits for %s\n",
               name, p.env, td_tenancy_name(tier), p.bucket ? " --bucket ..." : "",
               p.virtual_cluster ? " --virtual-cluster" : "", ns);
        item_ctx ctx = {cfg, ns};
        td__provision_each(&p, print_item, &ctx);
    }

    printf("\nAdmission checks for its pods (in order; the first denial decides)\n");
    printf("  mutate    Defaults       requests default to limits (kube-apiserver)\n");
    printf("  mutate    LimitRange     container defaults of the namespace's LimitRanges\n");
    printf("  mutate    Priority       priorityClassName resolved to spec.priority\n");
    printf("  mutate    CostLabels     missing team/project/environment from the Namespace, "
           "then the Tenant's spec.labels\n");
    printf("  mutate    NodePool       GPU pods get the toleration and node selector of %s\n",
           customer ? "its dedicated pools" : "the pools open to it");
    printf("  mutate    Sandbox        %s get spec.runtimeClassName: %s when they set none\n",
           customer ? "all pods" : "untrusted workloads", rc);
    printf("  validate  LimitRange     min/max/ratio of the namespace's LimitRanges\n");
    printf("  validate  PodSecurity    the namespace's enforce level\n");
    printf("  validate  CostLabels     required labels present\n");
    printf("  validate  NodePool       deny tolerating or selecting %s\n",
           customer ? "any pool not dedicated to it (shared pools included)"
                    : "another tenant's pool");
    printf("  validate  Sandbox        %s must use RuntimeClass %s, no other\n",
           customer ? "every pod" : "untrusted workloads", rc);
    if (storage)
        printf("  validate  Storage        %s and env %s within s3|gs://%s/%s (parsed; \"..\" "
               "refused); ephemeral volumes of its StorageClasses\n",
               TD_ANNOTATION_DATA_URI, TD_ENV_DATA_URI, td_json_str(storage, "bucket"),
               td_json_str(storage, "prefix") ? td_json_str(storage, "prefix") : "");
    else
        printf("  validate  Storage        %s and env %s outside every other tenant's prefix\n",
               TD_ANNOTATION_DATA_URI, TD_ENV_DATA_URI);
    printf("  validate  ResourceQuota  the namespace's quotas, scoped by PriorityClass\n");
    if (json_is_array(td_json_path(storage, "storageClasses")))
        printf("and for its PersistentVolumeClaims\n"
               "  validate  Storage        spec.storageClassName must be one of its "
               "StorageClasses\n");
    return TD_EXIT_OK;
}
