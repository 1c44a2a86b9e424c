/* cmd_remote.c - verbs that talk to a running tenantd over its admin
 * listener: `apply`, `get`, `delete`. The server is --server URL, else
 * $TENANTD_SERVER, else http://127.0.0.1:8081. */
#include <ctype.h>
#include <errno.h>
#include <unistd.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "tenantd/config.h"
#include "tenantd/http.h"
#include "tenantd/manifest.h"

typedef struct {
    const char *server;
    const char *token_file;
    char token[4096];
    td_http_client_opts http;
} remote;

static const char remote_flags_help[] =
    "  -s, --server URL     tenantd's admin listener (default $TENANTD_SERVER, else\n"
    "                       http://127.0.0.1:8081)\n"
    "      --cacert FILE    CA to verify an https server\n"
    "      --insecure       do not verify the server's certificate\n"
    "      --cert FILE      client certificate (mTLS), --key FILE its key\n"
    "      --token-file FILE  the admin token, or a tenant's API key (default $TENANTD_TOKEN_FILE)\n";

enum { O_SERVER = 's', O_CACERT = 1000, O_INSECURE, O_CERT, O_KEY, O_TOKEN_FILE };

#define REMOTE_LONGOPTS                                                                            \
    {"server", required_argument, NULL, O_SERVER}, {"cacert", required_argument, NULL, O_CACERT}, \
        {"insecure", no_argument, NULL, O_INSECURE}, {"cert", required_argument, NULL, O_CERT},   \
        {"key", required_argument, NULL, O_KEY},                                                \
        {"token-file", required_argument, NULL, O_TOKEN_FILE}, {"help", no_argument, NULL, 'h'}

static void remote_init(remote *r)
{
    memset(r, 0, sizeof *r);
    r->server = getenv("TENANTD_SERVER");
    if (!r->server || !*r->server)
        r->server = "http://127.0.0.1:8081";
    r->http.timeout_ms = 30000;
    r->token_file = getenv("TENANTD_TOKEN_FILE");
    if (r->token_file && !*r->token_file)
        r->token_file = NULL;
}

/* 1 if c was a remote flag (consumed). */
static int remote_flag(remote *r, int c)
{
    switch (c) {
    case O_SERVER: r->server = optarg; return 1;
    case O_CACERT: r->http.ca_file = optarg; return 1;
    case O_INSECURE: r->http.insecure = true; return 1;
    case O_CERT: r->http.cert_file = optarg; return 1;
    case O_KEY: r->http.key_file = optarg; return 1;
    case O_TOKEN_FILE: r->token_file = optarg; return 1;
    }
    return 0;
}

/* Sends the request; returns the HTTP status, or -1 after printing why the
 * server could not be reached. *body is the parsed JSON body (or NULL). */
static int call(const char *verb, remote *r, const char *method, const char *path,
                const char *extra_ct, const char *payload, size_t len, json_t **body)
{
    if (r->token_file && !r->http.bearer_token) {
        FILE *f = fopen(r->token_file, "r");
        if (!f || !fgets(r->token, sizeof r->token, f)) {
            fprintf(stderr, "tenantctl %s: --token-file %s: cannot read a token from it\n", verb,
                    r->token_file);
            if (f)
                fclose(f);
            return -2;
        }
        fclose(f);
        r->token[strcspn(r->token, "\r\n")] = '\0';
        r->http.bearer_token = r->token;
    }
    char url[2048];
    snprintf(url, sizeof url, "%s%s", r->server, path);
    int status = 0;
    char *resp = NULL;
    size_t rlen = 0;
    td_err err;
    if (td_http_request_do(url, method, extra_ct, payload, len, &r->http, &status, &resp, &rlen,
                           &err) != TD_OK) {
        fprintf(stderr, "tenantctl %s: %s (is tenantd running? set --server or TENANTD_SERVER)\n",
                verb, err.msg);
        return -1;
    }
    *body = json_loadb(resp, rlen, 0, NULL);
    free(resp);
    return status;
}

static void print_error(const char *verb, int status, json_t *body)
{
    const char *msg = json_string_value(json_object_get(body, "error"));
    fprintf(stderr, "tenantctl %s: %s (HTTP %d)\n", verb, msg ? msg : "request failed", status);
}

static int exit_for(int status)
{
    if (status == -2)
        return TD_EXIT_USAGE;
    if (status < 0 || status >= 500)
        return TD_EXIT_UNAVAILABLE;
    return status >= 400 ? TD_EXIT_USAGE : TD_EXIT_OK;
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
        if (n == cap) {
            char *nb = cap < (64u << 20) ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (f != stdin)
        fclose(f);
    *len = n;
    return buf;
}

/* POSTs the manifest in file to path, naming the file in a header so the
 * server's errors can name it. On success *body is the JSON answer and the
 * result is TD_EXIT_OK; otherwise the error is printed and the exit code
 * returned. */
static int post_manifest(const char *verb, remote *r, const char *path, const char *file,
                         json_t **body)
{
    size_t len;
    char *buf = read_all(file, &len);
    *body = NULL;
    if (!buf) {
        fprintf(stderr, "tenantctl %s: %s: cannot read\n", verb, file);
        return TD_EXIT_USAGE;
    }
    /* Control characters in the name would break the header: '?' instead. */
    char hdr[1100];
    snprintf(hdr, sizeof hdr, "X-Tenantd-Filename: %s", file);
    for (char *p = hdr; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    const char *headers[] = {hdr, NULL};
    r->http.extra_headers = headers;
    int status = call(verb, r, "POST", path, "application/yaml", buf, len, body);
    r->http.extra_headers = NULL;
    free(buf);
    if (status == 200)
        return TD_EXIT_OK;
    if (status > 0)
        print_error(verb, status, *body);
    json_decref(*body);
    *body = NULL;
    return exit_for(status);
}

int td_cmd_apply(int argc, char **argv)
{
    static const struct option longopts[] = {{"file", required_argument, NULL, 'f'},
                                             REMOTE_LONGOPTS, {NULL, 0, NULL, 0}};
    remote r;
    remote_init(&r);
    const char *files[64];
    size_t nfiles = 0;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "f:s:h", longopts, NULL)) != -1) {
        if (remote_flag(&r, c))
            continue;
        if (c == 'f' && nfiles < 64) {
            files[nfiles++] = optarg;
        } else if (c == 'h') {
            printf("usage: tenantctl apply -f FILE... [--server URL]\n\n"
                   "Validates the objects of each FILE (multi-document YAML or JSON) and stores\n"
                   "them in a running tenantd, all of a file or none of it; an invalid file\n"
                   "changes nothing and the error names its file, line and field.\n\n"
                   "  -f, --file FILE      objects to apply (repeatable; - for stdin)\n%s",
                   remote_flags_help);
            return TD_EXIT_OK;
        } else {
            fprintf(stderr, "tenantctl apply: unknown or incomplete flag \"%s\"; see --help\n",
                    argv[optind - 1]);
            return TD_EXIT_USAGE;
        }
    }
    if (!nfiles || optind < argc) {
        fprintf(stderr, "tenantctl apply: -f FILE is required; see --help\n");
        return TD_EXIT_USAGE;
    }
    for (size_t i = 0; i < nfiles; i++) {
        json_t *body = NULL;
        int rc = post_manifest("apply", &r, "/v1/apply", files[i], &body);
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

static void print_workloads(json_t *items)
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
    remote r;
    remote_init(&r);
    const char *file = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "f:s:h", longopts, NULL)) != -1) {
        if (remote_flag(&r, c))
            continue;
        if (c == 'f') {
            file = optarg;
        } else if (c == 'h') {
            printf("usage: tenantctl submit -f WORKLOADS.yaml [--server URL]\n\n"
                   "Submits Kueue Workloads to a running tenantd's batch queue (all of the file\n"
                   "or none of it) and prints where each stands: Admitted with its flavors, or\n"
                   "Pending with Kueue's reason. `tenantctl get workloads` shows them later.\n\n"
                   "  -f, --file FILE      Workload objects (kueue.x-k8s.io; - for stdin)\n%s",
                   remote_flags_help);
            return TD_EXIT_OK;
        } else {
            fprintf(stderr, "tenantctl submit: unknown or incomplete flag \"%s\"; see --help\n",
                    argv[optind - 1]);
            return TD_EXIT_USAGE;
        }
    }
    if (!file || optind < argc) {
        fprintf(stderr, "tenantctl submit: -f FILE is required; see --help\n");
        return TD_EXIT_USAGE;
    }
    json_t *body = NULL;
    int rc = post_manifest("submit", &r, "/v1/workloads", file, &body);
    if (rc != TD_EXIT_OK)
        return rc;
    print_workloads(json_object_get(body, "workloads"));
    json_decref(body);
    return TD_EXIT_OK;
}

int td_cmd_get(int argc, char **argv)
{
    static const struct option longopts[] = {{"namespace", required_argument, NULL, 'n'},
                                             {"output", required_argument, NULL, 'o'},
                                             REMOTE_LONGOPTS, {NULL, 0, NULL, 0}};
    remote r;
    remote_init(&r);
    const char *ns = "", *output = "table";
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "n:o:s:h", longopts, NULL)) != -1) {
        if (remote_flag(&r, c))
            continue;
        if (c == 'n') {
            ns = optarg;
        } else if (c == 'o') {
            output = optarg;
        } else if (c == 'h') {
            printf("usage: tenantctl get KIND [NAME] [-n NAMESPACE] [-o table|yaml|json]\n\n"
                   "Lists the objects of KIND (Tenant, ResourceQuota, quota, ns, ...) held by a\n"
                   "running tenantd.\n\n"
                   "  -n, --namespace NS   only objects in NS\n"
                   "  -o, --output FMT     table (default), yaml or json\n%s",
                   remote_flags_help);
            return TD_EXIT_OK;
        } else {
            fprintf(stderr, "tenantctl get: unknown or incomplete flag \"%s\"; see --help\n",
                    argv[optind - 1]);
            return TD_EXIT_USAGE;
        }
    }
    if (optind >= argc || argc - optind > 2) {
        fprintf(stderr, "tenantctl get: give KIND [NAME]; see --help\n");
        return TD_EXIT_USAGE;
    }
    if (strcmp(output, "table") && strcmp(output, "yaml") && strcmp(output, "json")) {
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
        int ws = call("get", &r, "GET", wpath, NULL, NULL, 0, &wb);
        if (ws != 200) {
            if (ws > 0)
                print_error("get", ws, wb);
            json_decref(wb);
            return exit_for(ws);
        }
        if (json_array_size(json_object_get(wb, "items")) == 0)
            fprintf(stderr, "No workloads%s%s.\n", *ns ? " in namespace " : "", ns);
        else
            print_workloads(json_object_get(wb, "items"));
        json_decref(wb);
        return TD_EXIT_OK;
    }
    char path[1024];
    snprintf(path, sizeof path, "/v1/objects?kind=%s&namespace=%s&name=%s", kind, ns, name);
    json_t *body = NULL;
    int status = call("get", &r, "GET", path, NULL, NULL, 0, &body);
    if (status != 200) {
        if (status > 0)
            print_error("get", status, body);
        json_decref(body);
        return exit_for(status);
    }
    json_t *items = json_object_get(body, "items");
    int rc = TD_EXIT_OK;
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
        printf("%-24s %-16s %-18s %-19s %s\n", "NAME", "COHORT", "PENDING WORKLOADS",
               "ADMITTED WORKLOADS", "GPUS USED/NOMINAL (BORROWED)");
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
            printf("%-24s %-16s %-18lld %-19lld %s\n", td_json_str(o, "metadata.name"),
                   td_json_str(o, "spec.cohort") ? td_json_str(o, "spec.cohort") : "",
                   (long long)json_integer_value(td_json_path(o, "status.pendingWorkloads")),
                   (long long)json_integer_value(td_json_path(o, "status.admittedWorkloads")), g);
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
    remote r;
    remote_init(&r);
    const char *ns = "";
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "n:s:h", longopts, NULL)) != -1) {
        if (remote_flag(&r, c))
            continue;
        if (c == 'n') {
            ns = optarg;
        } else if (c == 'h') {
            printf("usage: tenantctl delete KIND NAME [-n NAMESPACE]\n\n"
                   "Removes one object from a running tenantd.\n\n"
                   "  -n, --namespace NS   the object's namespace (namespaced kinds)\n%s",
                   remote_flags_help);
            return TD_EXIT_OK;
        } else {
            fprintf(stderr, "tenantctl delete: unknown or incomplete flag \"%s\"; see --help\n",
                    argv[optind - 1]);
            return TD_EXIT_USAGE;
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
    int status = call("delete", &r, "DELETE", path, NULL, NULL, 0, &body);
    if (status != 200) {
        if (status > 0)
            print_error("delete", status, body);
        json_decref(body);
        return exit_for(status);
    }
    printf("%s %s%s%s deleted\n", kind, ns, *ns ? "/" : "", argv[optind + 1]);
    json_decref(body);
    return TD_EXIT_OK;
}

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
    remote r;
    remote_init(&r);
    const char *file = NULL, *mode = "both";
    int quiet = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "f:s:qh", longopts, NULL)) != -1) {
        if (remote_flag(&r, c))
            continue;
        switch (c) {
        case 'f': file = optarg; break;
        case 'm': mode = optarg; break;
        case 'q': quiet = 1; break;
        default:
            fprintf(stderr, "tenantctl admit: with --server, the flags are -f, --mode, -q and:\n%s",
                    remote_flags_help);
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
    int status = call("admit", &r, "POST", path, "application/json", payload, strlen(payload),
                      &out);
    free(payload);
    json_t *resp = json_object_get(out, "response");
    if (status != 200 || !json_is_object(resp)) {
        if (status > 0)
            print_error("admit", status, out);
        json_decref(out);
        return status == 200 ? TD_EXIT_UNAVAILABLE : exit_for(status);
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

/* Percent-encodes s for a query value into out (cut at n). */
static void url_encode(const char *s, char *out, size_t n)
{
    size_t k = 0;
    for (const unsigned char *c = (const unsigned char *)s; *c && k + 4 < n; c++)
        k += (size_t)snprintf(out + k, n - k,
                              (isalnum(*c) || *c == '-' || *c == '.' || *c == '_') ? "%c" : "%%%02X",
                              *c);
    out[k < n ? k : n - 1] = '\0';
}

/* `tenantctl explain request [--tenant T] [-o table|json]`: the tenant's
 * limits as the running gateway enforces them and its latest refusals. */
int td_cmd_explain_request(int argc, char **argv)
{
    static const struct option longopts[] = {{"tenant", required_argument, NULL, 't'},
                                             {"output", required_argument, NULL, 'o'},
                                             REMOTE_LONGOPTS,
                                             {NULL, 0, NULL, 0}};
    remote r;
    remote_init(&r);
    const char *tenant = NULL, *output = "table";
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "t:o:s:h", longopts, NULL)) != -1) {
        if (remote_flag(&r, c))
            continue;
        switch (c) {
        case 't': tenant = optarg; break;
        case 'o': output = optarg; break;
        case 'h':
            printf("usage: tenantctl explain request [--tenant T] [-o table|json] [remote flags]\n\n"
                   "Why were a tenant's requests refused? Prints the tenant's gateway limits as\n"
                   "the running tenantd enforces them (mode enforce or shadow), what it could\n"
                   "spend right now, its money budgets (spent, left, when they reset), its\n"
                   "keys' own limits, and its latest refusals with the rule, the level (key or\n"
                   "tenant) and the numbers.\n"
                   "With a tenant's API key (--token-file) the tenant is the key's own.\n\n"
                   "  -t, --tenant T       the Tenant (default: the caller's, for a tenant key)\n"
                   "  -o, --output FMT     table (default) or json\n%s",
                   remote_flags_help);
            return TD_EXIT_OK;
        default:
            fprintf(stderr, "tenantctl explain request: unknown or incomplete flag \"%s\"\n",
                    argv[optind - 1]);
            return TD_EXIT_USAGE;
        }
    }
    if (optind < argc || (strcmp(output, "table") != 0 && strcmp(output, "json") != 0)) {
        fprintf(stderr, "tenantctl explain request: %s\n",
                optind < argc ? "unexpected argument" : "-o must be table or json");
        return TD_EXIT_USAGE;
    }
    char path[512] = "/v1/explain/request", et[400];
    if (tenant) {
        url_encode(tenant, et, sizeof et);
        snprintf(path, sizeof path, "/v1/explain/request?tenant=%s", et);
    }
    json_t *o = NULL;
    int status = call("explain request", &r, "GET", path, NULL, NULL, 0, &o);
    if (status != 200) {
        if (status > 0)
            print_error("explain request", status, o);
        json_decref(o);
        return status == 404 ? TD_EXIT_USAGE : exit_for(status);
    }
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
    json_t *list = json_object_get(o, "recentRefusals");
    if (!json_array_size(list))
        printf("no recent refusals\n");
    else
        printf("recent refusals, newest first (%s):\n", td_json_str(o, "sampling"));
    json_array_foreach(list, i, x)
    {
        printf("  %s  %lld %-19s %-7s %s\n", td_json_str(x, "time"),
               (long long)json_integer_value(json_object_get(x, "status")),
               td_json_str(x, "reason"), td_json_str(x, "mode"), td_json_str(x, "detail"));
    }
    json_decref(o);
    return TD_EXIT_OK;
}


int td_cmd_finish(int argc, char **argv)
{
    static const struct option longopts[] = {{"namespace", required_argument, NULL, 'n'},
                                             REMOTE_LONGOPTS, {NULL, 0, NULL, 0}};
    remote r;
    remote_init(&r);
    const char *ns = "default";
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "n:s:h", longopts, NULL)) != -1) {
        if (remote_flag(&r, c))
            continue;
        if (c == 'n') {
            ns = optarg;
        } else if (c == 'h') {
            printf("usage: tenantctl finish NAME [-n NAMESPACE]\n\n"
                   "Reports that an admitted Workload's job completed (the job runner calls it):\n"
                   "its quota and nodes go back to the queue, waiting workloads may start, and\n"
                   "the stored Workload is kept, marked finished, so its history survives\n"
                   "restarts and a resubmission never runs it twice. Finishing it again is a\n"
                   "no-op.\n\n"
                   "  -n, --namespace NS   the Workload's namespace (default: default)\n%s"
                   "\nexit status: 0 finished, 2 unknown or not admitted (the reason says why),\n"
                   "3 tenantd unreachable\n",
                   remote_flags_help);
            return TD_EXIT_OK;
        } else {
            fprintf(stderr, "tenantctl finish: unknown or incomplete flag \"%s\"; see --help\n",
                    argv[optind - 1]);
            return TD_EXIT_USAGE;
        }
    }
    if (argc - optind != 1) {
        fprintf(stderr, "tenantctl finish: give the Workload's NAME; see --help\n");
        return TD_EXIT_USAGE;
    }
    char path[1024];
    snprintf(path, sizeof path, "/v1/workloads/finish?namespace=%s&name=%s", ns, argv[optind]);
    json_t *body = NULL;
    int status = call("finish", &r, "POST", path, NULL, "", 0, &body);
    if (status != 200) {
        if (status > 0)
            print_error("finish", status, body);
        json_decref(body);
        return exit_for(status);
    }
    const char *action = td_json_str(body, "finished.action");
    printf("Workload %s/%s %s\n", ns, argv[optind],
           action && strcmp(action, "unchanged") == 0 ? "was already finished" : "finished");
    json_decref(body);
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
    remote r;
    remote_init(&r);
    const char *ns = NULL, *output = "table";
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "n:o:s:h", longopts, NULL)) != -1) {
        if (remote_flag(&r, c))
            continue;
        switch (c) {
        case 'n': ns = optarg; break;
        case 'o': output = optarg; break;
        case 'h':
            printf("usage: tenantctl explain workload [NS/]NAME [-n NS] [-o table|json] [remote flags]\n\n"
                   "Why is a Workload pending, admitted or finished? Asks the running tenantd:\n"
                   "its state and Kueue's reason, flavors and node placement, its position in\n"
                   "its ClusterQueue with the workloads ahead of it (another tenant's only as a\n"
                   "count), its history (admitted, preempted by whom and at which level,\n"
                   "requeued, finished), whom it preempted, and its ClusterQueue's quota.\n\n"
                   "  -n, --namespace NS   the Workload's namespace (default: default)\n"
                   "  -o, --output FMT     table (default) or json\n%s",
                   remote_flags_help);
            return TD_EXIT_OK;
        default:
            fprintf(stderr, "tenantctl explain workload: unknown or incomplete flag \"%s\"\n",
                    argv[optind - 1]);
            return TD_EXIT_USAGE;
        }
    }
    if (argc - optind != 1 || (strcmp(output, "table") != 0 && strcmp(output, "json") != 0)) {
        fprintf(stderr, "tenantctl explain workload: %s\n",
                argc - optind != 1 ? "give one [NS/]NAME" : "-o must be table or json");
        return TD_EXIT_USAGE;
    }
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
    url_encode(ns ? ns : "default", ens, sizeof ens);
    url_encode(name, ename, sizeof ename);
    snprintf(path, sizeof path, "/v1/explain/workload?namespace=%s&name=%s", ens, ename);
    json_t *o = NULL;
    int status = call("explain workload", &r, "GET", path, NULL, NULL, 0, &o);
    if (status != 200) {
        if (status > 0)
            print_error("explain workload", status, o);
        json_decref(o);
        return status == 404 ? TD_EXIT_USAGE : exit_for(status);
    }
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

/* Appends the items of GET /v1/objects?kind=K to out. 0, or an exit code. */
static int fetch_kind(remote *r, const char *kind, json_t *out)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/objects?kind=%s", kind);
    json_t *body = NULL;
    int status = call("simulate", r, "GET", path, NULL, NULL, 0, &body);
    if (status != 200) {
        if (status > 0)
            print_error("simulate", status, body);
        json_decref(body);
        return exit_for(status);
    }
    json_array_extend(out, json_object_get(body, "items"));
    json_decref(body);
    return 0;
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
    remote r;
    remote_init(&r);
    const char *file = NULL, *until = NULL, *format = "table", *live_runtime = "1000000000";
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "f:o:s:h", longopts, NULL)) != -1) {
        if (remote_flag(&r, c))
            continue;
        switch (c) {
        case 'f': file = optarg; break;
        case 'u': until = optarg; break;
        case 'o': format = optarg; break;
        case 'L': live_runtime = optarg; break;
        default:
            fprintf(stderr, "tenantctl simulate: with --server, the flags are -f, --until, "
                            "--format, --live-runtime and:\n%s",
                    remote_flags_help);
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
    if (!rc) {
        int status = call("simulate", &r, "GET", "/v1/workloads", NULL, NULL, 0, &states);
        if (status != 200) {
            if (status > 0)
                print_error("simulate", status, states);
            rc = exit_for(status);
        }
    }
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
