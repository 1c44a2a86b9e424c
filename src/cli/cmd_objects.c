/* cmd_objects.c - `apply`, `get` and `delete`: a running tenantd's stored
 * objects, over its admin listener (cli/remote.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "core/config.h"
#include "core/manifest.h"

int td_cmd_apply(int argc, char **argv)
{
    static const struct option longopts[] = {{"file", required_argument, NULL, 'f'},
                                             REMOTE_LONGOPTS, {NULL, 0, NULL, 0}};
    static const char usage[] =
        "usage: tenantctl apply -f FILE... [--server URL]\n\n"
        "Validates the objects of each FILE (multi-document YAML or JSON) and stores\n"
        "them in a running tenantd, all of a file or none of it; an invalid file\n"
        "changes nothing and the error names its file, line and field.\n\n"
        "  -f, --file FILE      objects to apply (repeatable; - for stdin)\n%s";
    td_remote r;
    td__remote_init(&r);
    const char *files[64];
    size_t nfiles = 0;
    int c;
    while ((c = td__remote_getopt(&r, argc, argv, "f:s:h", longopts, usage)) != -1) {
        if (c == TD_REMOTE_HELP)
            return TD_EXIT_OK;
        if (c != 'f' || nfiles == 64)
            return td__remote_bad_flag("apply", argv);
        files[nfiles++] = optarg;
    }
    if (!nfiles || optind < argc) {
        fprintf(stderr, "tenantctl apply: -f FILE is required; see --help\n");
        return TD_EXIT_USAGE;
    }
    for (size_t i = 0; i < nfiles; i++) {
        json_t *body = NULL;
        int rc = td__post_manifest("apply", &r, "/v1/apply", files[i], &body);
        if (rc != TD_EXIT_OK)
            return rc;
        size_t k;
        json_t *a;
        json_array_foreach(json_object_get(body, "applied"), k, a)
        {
            const char *ns = td_json_str(a, "namespace");
            printf("%s %s%s%s %s\n", td_json_str(a, "kind"), ns && *ns ? ns : "",
                   ns && *ns ? "/" : "", td_json_str(a, "name"), td_json_str(a, "action"));
        }
        json_decref(body);
    }
    return TD_EXIT_OK;
}

int td_cmd_get(int argc, char **argv)
{
    static const struct option longopts[] = {{"namespace", required_argument, NULL, 'n'},
                                             {"output", required_argument, NULL, 'o'},
                                             REMOTE_LONGOPTS, {NULL, 0, NULL, 0}};
    static const char usage[] =
        "usage: tenantctl get KIND [NAME] [-n NAMESPACE] [-o table|yaml|json]\n\n"
        "Lists the objects of KIND (Tenant, ResourceQuota, quota, ns, ...) held by a\n"
        "running tenantd.\n\n"
        "  -n, --namespace NS   only objects in NS\n"
        "  -o, --output FMT     table (default), yaml or json\n%s";
    td_remote r;
    td__remote_init(&r);
    const char *ns = "", *output = "table";
    int c;
    while ((c = td__remote_getopt(&r, argc, argv, "n:o:s:h", longopts, usage)) != -1) {
        switch (c) {
        case 'n': ns = optarg; break;
        case 'o': output = optarg; break;
        case TD_REMOTE_HELP: return TD_EXIT_OK;
        default: return td__remote_bad_flag("get", argv);
        }
    }
    if (optind >= argc || argc - optind > 2) {
        fprintf(stderr, "tenantctl get: give KIND [NAME]; see --help\n");
        return TD_EXIT_USAGE;
    }
    if (td_cli_choice(output, "table|yaml|json") < 0) {
        fprintf(stderr, "tenantctl get: -o must be table, yaml or json\n");
        return TD_EXIT_USAGE;
    }
    const char *kind = td_kind_canonical(argv[optind]);
    if (!kind) {
        fprintf(stderr, "tenantctl get: unknown kind \"%s\"\n", argv[optind]);
        return TD_EXIT_USAGE;
    }
    const char *name = argc - optind == 2 ? argv[optind + 1] : "";
    if (strcmp(kind, "Workload") == 0 && strcmp(output, "table") == 0 && !*name) {
        /* Workloads are shown with where they stand in the batch queue. */
        char wpath[512];
        snprintf(wpath, sizeof wpath, "/v1/workloads?namespace=%s", ns);
        json_t *wb = NULL;
        int rc = td__remote_call_ok("get", &r, "GET", wpath, NULL, NULL, 0, &wb);
        if (rc != TD_EXIT_OK)
            return rc;
        if (json_array_size(json_object_get(wb, "items")) == 0)
            fprintf(stderr, "No workloads%s%s.\n", *ns ? " in namespace " : "", ns);
        else
            td__print_workloads(json_object_get(wb, "items"));
        json_decref(wb);
        return TD_EXIT_OK;
    }
    char path[1024];
    snprintf(path, sizeof path, "/v1/objects?kind=%s&namespace=%s&name=%s", kind, ns, name);
    json_t *body = NULL;
    int rc = td__remote_call_ok("get", &r, "GET", path, NULL, NULL, 0, &body);
    if (rc != TD_EXIT_OK)
        return rc;
    json_t *items = json_object_get(body, "items");
    if (strcmp(output, "json") == 0) {
        json_t *out = *name && json_array_size(items) == 1 ? json_array_get(items, 0) : items;
        json_dumpf(out, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
    } else if (strcmp(output, "yaml") == 0) {
        size_t i;
        json_t *o;
        json_array_foreach(items, i, o)
        {
            if (i)
                fputs("---\n", stdout);
            if (td_yaml_write(o, stdout) < 0)
                rc = TD_EXIT_UNAVAILABLE;
        }
    } else if (json_array_size(items) == 0) {
        fprintf(stderr, "No %s objects%s%s.\n", kind, *ns ? " in namespace " : "", ns);
    } else if (strcmp(kind, "ClusterQueue") == 0) {
        /* as `kubectl get clusterqueues -o wide` prints Kueue's, plus GPUs */
        printf("%-24s %-16s %-18s %-19s %-29s %s\n", "NAME", "COHORT", "PENDING WORKLOADS",
               "ADMITTED WORKLOADS", "GPUS USED/NOMINAL (BORROWED)", "STATUS");
        size_t i;
        json_t *o;
        json_array_foreach(items, i, o)
        {
            json_t *gpu = json_object_get(td_json_path(o, "status.usage"), "nvidia.com/gpu");
            char g[64] = "-";
            if (gpu)
                snprintf(g, sizeof g, "%g/%g (%g)", json_number_value(json_object_get(gpu, "used")),
                         json_number_value(json_object_get(gpu, "nominal")),
                         json_number_value(json_object_get(gpu, "borrowed")));
            /* Kueue's condition Active: "inactive: WHY" admits nothing */
            const char *active = "", *why = "";
            size_t k;
            json_t *cond;
            json_array_foreach(td_json_path(o, "status.conditions"), k, cond)
                if (td_json_str(cond, "type") && strcmp(td_json_str(cond, "type"), "Active") == 0) {
                    int on = td_json_str(cond, "status") &&
                             strcmp(td_json_str(cond, "status"), "True") == 0;
                    active = on ? "active" : "inactive: ";
                    why = on || !td_json_str(cond, "message") ? "" : td_json_str(cond, "message");
                }
            const char *cohort = td_json_str(o, "spec.cohort") ? td_json_str(o, "spec.cohort")
                                                               : td_json_str(o, "spec.cohortName");
            printf("%-24s %-16s %-18lld %-19lld %-29s %s%s\n", td_json_str(o, "metadata.name"),
                   cohort ? cohort : "",
                   (long long)json_integer_value(td_json_path(o, "status.pendingWorkloads")),
                   (long long)json_integer_value(td_json_path(o, "status.admittedWorkloads")), g,
                   active, why);
        }
    } else {
        int namespaced = td_kind_namespaced(kind);
        if (namespaced)
            printf("%-24s %-32s\n", "NAMESPACE", "NAME");
        else
            printf("%-32s\n", "NAME");
        size_t i;
        json_t *o;
        json_array_foreach(items, i, o)
        {
            if (namespaced)
                printf("%-24s %-32s\n", td_json_str(o, "metadata.namespace"),
                       td_json_str(o, "metadata.name"));
            else
                printf("%-32s\n", td_json_str(o, "metadata.name"));
        }
    }
    json_decref(body);
    return rc;
}

int td_cmd_delete(int argc, char **argv)
{
    static const struct option longopts[] = {{"namespace", required_argument, NULL, 'n'},
                                             REMOTE_LONGOPTS, {NULL, 0, NULL, 0}};
    static const char usage[] =
        "usage: tenantctl delete KIND NAME [-n NAMESPACE]\n\n"
        "Removes one object from a running tenantd.\n\n"
        "  -n, --namespace NS   the object's namespace (namespaced kinds)\n%s";
    td_remote r;
    td__remote_init(&r);
    const char *ns = "";
    int c;
    while ((c = td__remote_getopt(&r, argc, argv, "n:s:h", longopts, usage)) != -1) {
        switch (c) {
        case 'n': ns = optarg; break;
        case TD_REMOTE_HELP: return TD_EXIT_OK;
        default: return td__remote_bad_flag("delete", argv);
        }
    }
    if (argc - optind != 2) {
        fprintf(stderr, "tenantctl delete: give KIND NAME; see --help\n");
        return TD_EXIT_USAGE;
    }
    const char *kind = td_kind_canonical(argv[optind]);
    if (!kind) {
        fprintf(stderr, "tenantctl delete: unknown kind \"%s\"\n", argv[optind]);
        return TD_EXIT_USAGE;
    }
    char path[1024];
    snprintf(path, sizeof path, "/v1/objects?kind=%s&namespace=%s&name=%s", kind, ns,
             argv[optind + 1]);
    json_t *body = NULL;
    int rc = td__remote_call_ok("delete", &r, "DELETE", path, NULL, NULL, 0, &body);
    if (rc != TD_EXIT_OK)
        return rc;
    printf("%s %s%s%s deleted\n", kind, ns, *ns ? "/" : "", argv[optind + 1]);
    json_decref(body);
    return TD_EXIT_OK;
}
