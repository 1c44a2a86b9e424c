/* remote.h - what tenantctl's verbs that talk to a running tenantd share
 * (internal to src/cli): the server and its TLS and token flags, one HTTP
 * call with tenantctl's error messages and exit codes, and the parse loop
 * every such verb runs. The server is --server URL, else $TENANTD_SERVER,
 * else http://127.0.0.1:8081. */
#ifndef TENANTD_CLI_REMOTE_H
#define TENANTD_CLI_REMOTE_H

#include <getopt.h>
#include <jansson.h>
#include <stddef.h>

#include "tenantd/http.h"

typedef struct {
    const char *server;
    const char *token_file;
    char token[4096];
    td_http_client_opts http;
} td_remote;

/* The remote flags' lines of a verb's --help. */
extern const char td__remote_flags_help[];

enum { O_SERVER = 's', O_CACERT = 1000, O_INSECURE, O_CERT, O_KEY, O_TOKEN_FILE };

/* The remote flags and --help, for a verb's getopt_long table. */
#define REMOTE_LONGOPTS                                                                            \
    {"server", required_argument, NULL, O_SERVER}, {"cacert", required_argument, NULL, O_CACERT}, \
        {"insecure", no_argument, NULL, O_INSECURE}, {"cert", required_argument, NULL, O_CERT},   \
        {"key", required_argument, NULL, O_KEY},                                                \
        {"token-file", required_argument, NULL, O_TOKEN_FILE}, {"help", no_argument, NULL, 'h'}

/* td__remote_getopt's answer when it has printed the verb's --help. */
#define TD_REMOTE_HELP 0x10000

/* Fills r from the environment ($TENANTD_SERVER, $TENANTD_TOKEN_FILE) and
 * resets getopt (optind 1, opterr 0) for a fresh parse of a verb's argv. */
void td__remote_init(td_remote *r);

/* 1 if c was a remote flag (consumed, optarg kept in r), else 0. */
int td__remote_flag(td_remote *r, int c);

/* getopt_long over argv that consumes the remote flags into r. With usage
 * (a printf format whose one %s is td__remote_flags_help), -h/--help
 * prints it to stdout and returns TD_REMOTE_HELP; with NULL, 'h' is
 * returned like any other flag. Returns the verb's next flag ('?' for an
 * unknown or incomplete one), or -1 at the end. */
int td__remote_getopt(td_remote *r, int argc, char **argv, const char *shortopts,
                      const struct option *longopts, const char *usage);

/* Prints "tenantctl VERB: unknown or incomplete flag ...; see --help" for
 * the flag getopt just read and returns TD_EXIT_USAGE. */
int td__remote_bad_flag(const char *verb, char **argv);

/* Sends the request (payload borrowed, len bytes; extra_ct its content
 * type or NULL). Returns the HTTP status with *body the parsed JSON body
 * (or NULL); -1 after printing why the server could not be reached; -2
 * after printing that --token-file cannot be read. */
int td__remote_call(const char *verb, td_remote *r, const char *method, const char *path,
                    const char *extra_ct, const char *payload, size_t len, json_t **body);

/* td__remote_call that wants 200: TD_EXIT_OK with *body the answer (the
 * caller frees it), else the error is printed, *body is NULL and the exit
 * code (td__remote_exit_for) returned. */
int td__remote_call_ok(const char *verb, td_remote *r, const char *method, const char *path,
                       const char *extra_ct, const char *payload, size_t len, json_t **body);

/* Prints the server's "error" (or "request failed") with the status. */
void td__remote_print_error(const char *verb, int status, json_t *body);

/* The exit code for a td__remote_call status: 0 for 2xx, TD_EXIT_USAGE for
 * 4xx and an unreadable token, TD_EXIT_UNAVAILABLE for 5xx or no server. */
int td__remote_exit_for(int status);

/* The whole of file path ("-" for stdin) in a malloc'ed buffer the caller
 * frees, *len its size; NULL if unreadable, out of memory or 64 MiB or
 * more. */
char *td__read_all(const char *path, size_t *len);

/* Percent-encodes s for a query value into out (cut at n). */
void td__url_encode(const char *s, char *out, size_t n);

/* POSTs the manifest in file to path, naming the file in a header so the
 * server's errors can name it. On success *body is the JSON answer and the
 * result is TD_EXIT_OK; otherwise the error is printed and the exit code
 * returned. */
int td__post_manifest(const char *verb, td_remote *r, const char *path, const char *file,
                      json_t **body);

/* The table `submit` and `get workloads` print (cmd_workloads.c). */
void td__print_workloads(json_t *items);

#endif
