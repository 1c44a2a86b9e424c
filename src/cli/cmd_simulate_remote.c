/* cmd_simulate_remote.c - `simulate --server`: a simulation that starts
 * from a running tenantd's live queues (cli/remote.h). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "core/config.h"

/* Appends the items of GET /v1/objects?kind=K to out. 0, or an exit code. */
static int fetch_kind(td_remote *r, const char *kind, json_t *out)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/objects?kind=%s", kind);
    json_t *body = NULL;
    int rc = td__remote_call_ok("simulate", r, "GET", path, NULL, NULL, 0, &body);
    json_array_extend(out, json_object_get(body, "items"));
    json_decref(body);
    return rc;
}

/* `tenantctl simulate --server URL -f WORKLOADS`: the live queues as the
 * starting state. The running tenantd's queue objects and workloads are
 * written to a temporary platform file in which its admitted workloads
 * arrive at 0 (and run for --live-runtime) and its pending ones 1 ns later
 * in their order, so one pass restores that state before the asked
 * workloads arrive (from 2 ns on, printed as from 0). Placement on nodes is
 * decided again for the live workloads and may differ from the live one. */
int td_cmd_simulate_remote(int argc, char **argv)
{
    static const struct option longopts[] = {{"file", required_argument, NULL, 'f'},
                                             {"until", required_argument, NULL, 'u'},
                                             {"format", required_argument, NULL, 'o'},
                                             {"live-runtime", required_argument, NULL, 'L'},
                                             REMOTE_LONGOPTS,
                                             {NULL, 0, NULL, 0}};
    static const char *const kinds[] = {"ResourceFlavor", "Cohort",   "ClusterQueue",
                                        "LocalQueue",     "PriorityClass",
                                        "WorkloadPriorityClass", "NodePool", "Configuration"};
    td_remote r;
    td__remote_init(&r);
    const char *file = NULL, *until = NULL, *format = "table", *live_runtime = "1000000000";
    int c;
    while ((c = td__remote_getopt(&r, argc, argv, "f:o:s:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'f': file = optarg; break;
        case 'u': until = optarg; break;
        case 'o': format = optarg; break;
        case 'L': live_runtime = optarg; break;
        default:
            fprintf(stderr, "tenantctl simulate: with --server, the flags are -f, --until, "
                            "--format, --live-runtime and:\n%s",
                    td__remote_flags_help);
            return TD_EXIT_USAGE;
        }
    }
    char *end;
    double lr = strtod(live_runtime, &end);
    if (!file || optind < argc || end == live_runtime || *end || !(lr > 0) || lr > 1e9) {
        fprintf(stderr, "tenantctl simulate: %s\n",
                !file ? "-f WORKLOADS is required"
                : optind < argc ? "unexpected argument"
                                : "--live-runtime must be seconds > 0 (at most 1e9)");
        return TD_EXIT_USAGE;
    }
    json_t *objs = json_array(), *wls = json_array(), *states = NULL;
    int rc = 0;
    for (size_t k = 0; !rc && k < sizeof kinds / sizeof kinds[0]; k++)
        rc = fetch_kind(&r, kinds[k], objs);
    if (!rc)
        rc = fetch_kind(&r, "Workload", wls);
    if (!rc)
        rc = td__remote_call_ok("simulate", &r, "GET", "/v1/workloads", NULL, NULL, 0, &states);
    /* each live workload's state, by namespace/name */
    size_t i, nadm = 0, npend = 0;
    json_t *x;
    json_t *state_of = json_object();
    json_array_foreach(json_object_get(states, "items"), i, x)
    {
        char key[600];
        snprintf(key, sizeof key, "%s/%s", td_json_str(x, "namespace"), td_json_str(x, "name"));
        json_object_set(state_of, key, json_object_get(x, "state"));
    }
    /* admitted first, then pending, each in stored order */
    for (int pass = 0; !rc && pass < 2; pass++)
        json_array_foreach(wls, i, x)
        {
            char key[600];
            snprintf(key, sizeof key, "%s/%s", td_json_str(x, "metadata.namespace"),
                     td_json_str(x, "metadata.name"));
            const char *st = json_string_value(json_object_get(state_of, key));
            if (!st || strcmp(st, pass == 0 ? "Admitted" : "Pending") != 0)
                continue;
            json_t *copy = json_deep_copy(x);
            json_t *meta = json_object_get(copy, "metadata");
            json_t *ann = json_object_get(meta, "annotations");
            if (!json_is_object(ann)) {
                ann = json_object();
                json_object_set_new(meta, "annotations", ann);
            }
            json_object_set_new(ann, "tenantd.dev/submit-at-seconds",
                                json_string(pass == 0 ? "0" : "0.000000001"));
            json_object_set_new(ann, "tenantd.dev/runtime-seconds", json_string(live_runtime));
            json_array_append_new(objs, copy);
            if (pass == 0)
                nadm++;
            else
                npend++;
        }
    char path[] = "/tmp/tenantctl-live-XXXXXX";
    int fd = rc ? -1 : mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!rc && !f) {
        fprintf(stderr, "tenantctl simulate: cannot write a temporary file: %s\n", strerror(errno));
        rc = TD_EXIT_USAGE;
        if (fd >= 0)
            close(fd);
    }
    json_array_foreach(rc ? NULL : objs, i, x)
    {
        json_dumpf(x, f, JSON_COMPACT | JSON_PRESERVE_ORDER);
        fputs("\n---\n", f);
    }
    if (f && fclose(f) != 0 && !rc) {
        fprintf(stderr, "tenantctl simulate: cannot write %s\n", path);
        rc = TD_EXIT_USAGE;
    }
    json_decref(objs);
    json_decref(wls);
    json_decref(states);
    json_decref(state_of);
    if (!rc) {
        fprintf(stderr,
                "tenantctl simulate: starting from %s: %zu admitted workload%s (running for "
                "%gs), %zu pending\n",
                r.server, nadm, nadm == 1 ? "" : "s", lr, npend);
        char *args[16];
        int n = 0;
        args[n++] = argv[0];
        args[n++] = "-c";
        args[n++] = path;
        args[n++] = "-f";
        args[n++] = (char *)file;
        args[n++] = "--format";
        args[n++] = (char *)format;
        args[n++] = "--origin-ns";
        args[n++] = "2";
        if (until) {
            args[n++] = "--until";
            args[n++] = (char *)until;
        }
        args[n] = NULL;
        rc = td_cmd_simulate(n, args);
    }
    if (fd >= 0)
        unlink(path);
    return rc;
}
