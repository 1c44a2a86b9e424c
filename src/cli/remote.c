/* remote.c - the server flags, the HTTP call, its errors and exit codes,
 * and the parse loop of tenantctl's verbs that talk to a running tenantd
 * (see remote.h). */
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/remote.h"

const char td__remote_flags_help[] =
    "  -s, --server URL     tenantd's admin listener (default $TENANTD_SERVER, else\n"
    "                       http://127.0.0.1:8081)\n"
    "      --cacert FILE    CA to verify an https server\n"
    "      --insecure       do not verify the server's certificate\n"
    "      --cert FILE      client certificate (mTLS), --key FILE its key\n"
    "      --token-file FILE  the admin token, or a tenant's API key (default $TENANTD_TOKEN_FILE)\n";

void td__remote_init(td_remote *r)
{
    memset(r, 0, sizeof *r);
    optind = 1;
    opterr = 0;
    r->server = getenv("TENANTD_SERVER");
    if (!r->server || !*r->server)
        r->server = "http://127.0.0.1:8081";
    r->http.timeout_ms = 30000;
    r->token_file = getenv("TENANTD_TOKEN_FILE");
    if (r->token_file && !*r->token_file)
        r->token_file = NULL;
}

int td__remote_flag(td_remote *r, int c)
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

int td__remote_getopt(td_remote *r, int argc, char **argv, const char *shortopts,
                      const struct option *longopts, const char *usage)
{
    int c;
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        if (td__remote_flag(r, c))
            continue;
        if (c == 'h' && usage) {
            printf(usage, td__remote_flags_help);
            return TD_REMOTE_HELP;
        }
        return c;
    }
    return -1;
}

int td__remote_bad_flag(const char *verb, char **argv)
{
    fprintf(stderr, "tenantctl %s: unknown or incomplete flag \"%s\"; see --help\n", verb,
            argv[optind - 1]);
    return TD_EXIT_USAGE;
}

int td__remote_call_ok(const char *verb, td_remote *r, const char *method, const char *path,
                       const char *extra_ct, const char *payload, size_t len, json_t **body)
{
    int status = td__remote_call(verb, r, method, path, extra_ct, payload, len, body);
    if (status == 200)
        return TD_EXIT_OK;
    if (status > 0)
        td__remote_print_error(verb, status, *body);
    json_decref(*body);
    *body = NULL;
    return td__remote_exit_for(status);
}

int td__remote_call(const char *verb, td_remote *r, const char *method, const char *path,
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

void td__remote_print_error(const char *verb, int status, json_t *body)
{
    const char *msg = json_string_value(json_object_get(body, "error"));
    fprintf(stderr, "tenantctl %s: %s (HTTP %d)\n", verb, msg ? msg : "request failed", status);
}

int td__remote_exit_for(int status)
{
    if (status == -2)
        return TD_EXIT_USAGE;
    if (status < 0 || status >= 500)
        return TD_EXIT_UNAVAILABLE;
    return status >= 400 ? TD_EXIT_USAGE : TD_EXIT_OK;
}

char *td__read_all(const char *path, size_t *len)
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

int td__post_manifest(const char *verb, td_remote *r, const char *path, const char *file,
                      json_t **body)
{
    size_t len;
    char *buf = td__read_all(file, &len);
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
    int rc = td__remote_call_ok(verb, r, "POST", path, "application/yaml", buf, len, body);
    r->http.extra_headers = NULL;
    free(buf);
    return rc;
}

void td__url_encode(const char *s, char *out, size_t n)
{
    size_t k = 0;
    for (const unsigned char *c = (const unsigned char *)s; *c && k + 4 < n; c++)
        k += (size_t)snprintf(out + k, n - k,
                              (isalnum(*c) || *c == '-' || *c == '.' || *c == '_') ? "%c" : "%%%02X",
                              *c);
    out[k < n ? k : n - 1] = '\0';
}
