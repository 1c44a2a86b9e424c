/* cmd_admit_remote.c - `admit --server`: the admission decision made by a
 * running tenantd against its live objects (cli/remote.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/remote.h"
#include "core/config.h"
#include "core/manifest.h"

/* `tenantctl admit --server URL -f POD`: the same decision, made by the
 * running tenantd against its live objects (quota usage included); nothing
 * is stored. The review goes to /admit, /mutate or /validate by --mode. */
int td_cmd_admit_remote(int argc, char **argv)
{
    static const struct option longopts[] = {{"file", required_argument, NULL, 'f'},
                                             {"mode", required_argument, NULL, 'm'},
                                             {"quiet", no_argument, NULL, 'q'},
                                             REMOTE_LONGOPTS,
                                             {NULL, 0, NULL, 0}};
    td_remote r;
    td__remote_init(&r);
    const char *file = NULL, *mode = "both";
    int quiet = 0, c;
    while ((c = td__remote_getopt(&r, argc, argv, "f:s:qh", longopts, NULL)) != -1) {
        switch (c) {
        case 'f': file = optarg; break;
        case 'm': mode = optarg; break;
        case 'q': quiet = 1; break;
        default:
            fprintf(stderr, "tenantctl admit: with --server, the flags are -f, --mode, -q and:\n%s",
                    td__remote_flags_help);
            return TD_EXIT_USAGE;
        }
    }
    const char *path = strcmp(mode, "both") == 0       ? "/admit"
                       : strcmp(mode, "mutate") == 0   ? "/mutate"
                       : strcmp(mode, "validate") == 0 ? "/validate"
                                                       : NULL;
    if (!file || optind < argc || !path) {
        fprintf(stderr, "tenantctl admit: %s\n",
                !file   ? "-f POD.yaml is required"
                : !path ? "--mode must be both, mutate or validate"
                        : "unexpected argument");
        return TD_EXIT_USAGE;
    }
    td_manifest *m = NULL;
    td_err err;
    if (td_manifest_load_file(file, &m, &err) != TD_OK) {
        fprintf(stderr, "tenantctl admit: %s\n", err.msg);
        return TD_EXIT_USAGE;
    }
    if (td_manifest_count(m) != 1) {
        fprintf(stderr, "tenantctl admit: %s: expected one Pod or AdmissionReview, found %zu "
                        "documents\n",
                td_manifest_name(m), td_manifest_count(m));
        td_manifest_destroy(m);
        return TD_EXIT_USAGE;
    }
    char *payload = json_dumps(td_manifest_doc(m, 0), JSON_COMPACT);
    td_manifest_destroy(m);
    if (!payload) {
        fprintf(stderr, "tenantctl admit: out of memory\n");
        return TD_EXIT_USAGE;
    }
    json_t *out = NULL;
    int status = td__remote_call("admit", &r, "POST", path, "application/json", payload, strlen(payload),
                      &out);
    free(payload);
    json_t *resp = json_object_get(out, "response");
    if (status != 200 || !json_is_object(resp)) {
        if (status > 0)
            td__remote_print_error("admit", status, out);
        json_decref(out);
        return status == 200 ? TD_EXIT_UNAVAILABLE : td__remote_exit_for(status);
    }
    json_dumpf(out, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
    int code = (int)json_integer_value(td_json_path(resp, "status.code"));
    int rc;
    if (json_is_true(json_object_get(resp, "allowed"))) {
        rc = TD_EXIT_OK;
        if (!quiet)
            fprintf(stderr, "allowed by %s%s\n", r.server,
                    json_object_get(resp, "patch") ? " (with a JSON patch: see response.patch)"
                                                   : "");
    } else {
        rc = code == 400 ? TD_EXIT_USAGE : TD_EXIT_DENIED;
        if (!quiet)
            fprintf(stderr, "%s by %s: %s\n", code == 400 ? "bad input" : "denied", r.server,
                    td_json_str(resp, "status.message") ? td_json_str(resp, "status.message")
                                                        : "");
    }
    json_decref(out);
    return rc;
}
