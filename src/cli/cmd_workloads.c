/* cmd_workloads.c - `submit` and `finish`: Workloads in a running tenantd's
 * batch queue, over its admin listener (cli/remote.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "core/config.h"

void td__print_workloads(json_t *items)
{
    printf("%-20s %-28s %-9s %-16s %s\n", "NAMESPACE", "NAME", "STATE", "CLUSTERQUEUE",
           "FLAVORS / REASON");
    size_t i;
    json_t *w;
    json_array_foreach(items, i, w)
    {
        const char *state = td_json_str(w, "state");
        const char *flavors = td_json_str(w, "flavors");
        const char *placement = td_json_str(w, "placement");
        bool admitted = strcmp(state, "Admitted") == 0 && flavors && *flavors;
        printf("%-20s %-28s %-9s %-16s %s%s%s\n", td_json_str(w, "namespace"),
               td_json_str(w, "name"), state, td_json_str(w, "clusterQueue"),
               admitted ? flavors : td_json_str(w, "reason"),
               admitted && placement && *placement ? " on " : "",
               admitted && placement ? placement : "");
    }
}

int td_cmd_submit(int argc, char **argv)
{
    static const struct option longopts[] = {{"file", required_argument, NULL, 'f'},
                                             REMOTE_LONGOPTS, {NULL, 0, NULL, 0}};
    static const char usage[] =
        "usage: tenantctl submit -f WORKLOADS.yaml [--server URL]\n\n"
        "Submits Kueue Workloads to a running tenantd's batch queue (all of the file\n"
        "or none of it) and prints where each stands: Admitted with its flavors, or\n"
        "Pending with Kueue's reason. `tenantctl get workloads` shows them later.\n\n"
        "  -f, --file FILE      Workload objects (kueue.x-k8s.io; - for stdin)\n%s";
    td_remote r;
    td__remote_init(&r);
    const char *file = NULL;
    int c;
    while ((c = td__remote_getopt(&r, argc, argv, "f:s:h", longopts, usage)) != -1) {
        switch (c) {
        case 'f': file = optarg; break;
        case TD_REMOTE_HELP: return TD_EXIT_OK;
        default: return td__remote_bad_flag("submit", argv);
        }
    }
    if (!file || optind < argc) {
        fprintf(stderr, "tenantctl submit: -f FILE is required; see --help\n");
        return TD_EXIT_USAGE;
    }
    json_t *body = NULL;
    int rc = td__post_manifest("submit", &r, "/v1/workloads", file, &body);
    if (rc != TD_EXIT_OK)
        return rc;
    td__print_workloads(json_object_get(body, "workloads"));
    json_decref(body);
    return TD_EXIT_OK;
}

int td_cmd_finish(int argc, char **argv)
{
    static const struct option longopts[] = {{"namespace", required_argument, NULL, 'n'},
                                             {"gpu-utilization", required_argument, NULL, 'g'},
                                             REMOTE_LONGOPTS, {NULL, 0, NULL, 0}};
    static const char usage[] =
        "usage: tenantctl finish NAME [-n NAMESPACE] [--gpu-utilization F]\n\n"
        "Reports that an admitted Workload's job completed (the job runner calls it):\n"
        "its quota and nodes go back to the queue, waiting workloads may start, and\n"
        "the stored Workload is kept, marked finished, so its history survives\n"
        "restarts and a resubmission never runs it twice. Finishing it again is a\n"
        "no-op.\n\n"
        "  -n, --namespace NS   the Workload's namespace (default: default)\n"
        "      --gpu-utilization F  the share of its GPUs really busy over the run,\n"
        "                       0..1 (e.g. DCGM's average): the ledger's \"really used\"\n"
        "                       GPUs for right-sizing (annotation tenantd.dev/gpu-utilization)\n%s"
        "\nexit status: 0 finished, 2 unknown or not admitted (the reason says why),\n"
        "3 tenantd unreachable\n";
    td_remote r;
    td__remote_init(&r);
    const char *ns = "default", *util = NULL;
    int c;
    while ((c = td__remote_getopt(&r, argc, argv, "n:s:h", longopts, usage)) != -1) {
        switch (c) {
        case 'n': ns = optarg; break;
        case 'g': util = optarg; break;
        case TD_REMOTE_HELP: return TD_EXIT_OK;
        default: return td__remote_bad_flag("finish", argv);
        }
    }
    if (argc - optind != 1) {
        fprintf(stderr, "tenantctl finish: give the Workload's NAME; see --help\n");
        return TD_EXIT_USAGE;
    }
    char path[1024];
    char ens[700], ename[700], eutil[200];
    td__url_encode(ns, ens, sizeof ens);
    td__url_encode(argv[optind], ename, sizeof ename);
    td__url_encode(util ? util : "", eutil, sizeof eutil);
    snprintf(path, sizeof path, "/v1/workloads/finish?namespace=%s&name=%s%s%s", ens, ename,
             util ? "&gpuUtilization=" : "", util ? eutil : "");
    json_t *body = NULL;
    int rc = td__remote_call_ok("finish", &r, "POST", path, NULL, "", 0, &body);
    if (rc != TD_EXIT_OK)
        return rc;
    const char *action = td_json_str(body, "finished.action");
    printf("Workload %s/%s %s\n", ns, argv[optind],
           action && strcmp(action, "unchanged") == 0 ? "was already finished" : "finished");
    json_decref(body);
    return TD_EXIT_OK;
}
