/* main.c - tenantd, the daemon: loads its configuration and its store,
 * and serves the admin listener (admission webhook and control API) on a
 * libuv loop until SIGINT or SIGTERM. */
#include <getopt.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "kinds/builtin.h"
#include "daemon/control.h"
#include "daemon/leader.h"
#include "daemon/metering.h"
#include "daemon/queueview.h"
#include "daemon/workloads.h"
#include "core/config.h"
#include "core/duration.h"
#include "gateway/gateway.h"
#include "io/http_server.h"
#include "core/jsonarena.h"
#include "io/proxy.h"
#include "io/shared_budget.h"
#include "io/store.h"
#include "io/tls.h"

#define MAX_BODY (3u << 20) /* kube-apiserver's own request limit */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tenantd --data DIR [--database URL] [--config PLATFORM.yaml]... [flags]\n\n"
            "Serves the gateway (per-tenant cost limits, criticality queue, reverse proxy\n"
            "to each Route's upstream) on the data listener, and the admission webhook\n"
            "(/validate, /mutate), health checks (/healthz, /readyz), /metrics and the\n"
            "control API (/v1/apply, /v1/objects) on the admin listener, keeping applied\n"
            "objects in SQLite under DIR. SIGHUP re-reads the --config files.\n\n"
            "  -c, --config FILE        objects to load at start (repeatable); they are stored\n"
            "                           and win over stored objects of the same name\n"
            "  -d, --data DIR           data directory (created if missing), required\n"
            "      --database URL       keep the objects in PostgreSQL (postgres://... or\n"
            "                           postgresql://...; default $TENANTD_DATABASE, else\n"
            "                           SQLite in DIR); replicas on one database pick up\n"
            "                           each other's applies within 1 s\n"
            "      --listen ADDR        data listener (default 127.0.0.1:8080; port 0 = any)\n"
            "      --workers N          gateway worker threads (default: cores)\n"
            "      --redis HOST:PORT    share tenants' limits with other replicas through Redis\n"
            "      --replicas N         replicas sharing Redis (fallback share, default 1)\n"
            "      --replica-name NAME  this replica's stable name in budgets shared through\n"
            "                           Redis (default HOSTNAME:DATA-DIR; unique per replica)\n"
            "      --allow-x-tenant     demo mode: trust an X-Tenant header (off by default)\n"
            "      --access-log FILE    one line per gateway request (- for stderr)\n"
            "      --listen-port-file FILE  write the bound data port to FILE\n"
            "      --data-tls-cert FILE serve the data listener over HTTPS with this PEM chain\n"
            "      --data-tls-key FILE  and this PEM private key (optional; default plain HTTP)\n"
            "      --unauth-conns-per-addr N  gateway connections one client address (IPv6: its\n"
            "                           /64) may hold before a request shows a valid API key\n"
            "                           (default 64; 0: no cap); each must show one within 10 s\n"
            "      --tarpit-after N     hold the Nth and later 429s in a row that a connection\n"
            "                           asked for before their Retry-After (default 3; 0: off;\n"
            "                           docs/gateway.md, \"Clients that retry at once\")\n"
            "      --admin-listen ADDR  admin listener (default 127.0.0.1:8081; port 0 = any)\n"
            "      --admin-threads N    event loops serving the admin listener (default: cores);\n"
            "                           admission reviews and health checks are answered on\n"
            "                           each, everything else on the daemon's main loop\n"
            "      --tls-cert FILE      serve HTTPS with this PEM certificate chain\n"
            "      --tls-key FILE       and this PEM private key\n"
            "      --tls-client-ca FILE require client certificates signed by this CA (mTLS)\n"
            "      --port-file FILE     write the bound admin port to FILE once listening\n"
            "      --admin-token-file FILE  require this bearer token (first line of FILE)\n"
            "                           on the control API and /metrics; the webhook and\n"
            "                           health checks stay open (use --tls-client-ca for them)\n"
            "      --ledger on|off      meter every gateway request and batch interval into\n"
            "                           DIR/ledger.db (default on)\n"
            "      --ledger-retention DURATION  raw request records older than this are\n"
            "                           compacted into hourly rollups (default 720h; 0 keeps all)\n"
            "      --ledger-spool-max N records waiting for --database's shared ledger at most\n"
            "                           (default 1000000; the rest is counted, not shipped)\n\n"
            "The dashboard is GET /ui on the admin listener (its data: GET /v1/usage).\n");
}

typedef struct {
    uv_signal_t sigint, sigterm, sighup;
    td_http_multi *server;
    td_control *control;
    const char *const *configs;
    size_t nconfigs;
    td_metering *metering;
    /* PostgreSQL: other replicas' commits, announced on the store's
     * listener (poll) or found by the periodic version check (sync) */
    td_store *store;
    uv_timer_t sync;
    uv_poll_t *poll; /* NULL while not listening */
    bool syncing, sync_failing;
    td_leader *leader; /* PostgreSQL: the scheduling lease; NULL: SQLite */
} daemon_state;

static void close_free(uv_handle_t *h)
{
    free(h);
}

/* Stops polling the store's listener (before its connection closes). */
static void stop_listening(daemon_state *d)
{
    if (!d->poll)
        return;
    uv_poll_stop(d->poll);
    uv_close((uv_handle_t *)d->poll, close_free);
    d->poll = NULL;
}

static void on_server_stopped(void *arg)
{
    daemon_state *d = arg;
    uv_close((uv_handle_t *)&d->sigint, NULL);
    uv_close((uv_handle_t *)&d->sigterm, NULL);
    uv_close((uv_handle_t *)&d->sighup, NULL);
    if (d->syncing) {
        uv_close((uv_handle_t *)&d->sync, NULL);
        stop_listening(d);
        td_store_watch_reset(d->store);
    }
}

static void on_signal(uv_signal_t *h, int signum)
{
    daemon_state *d = h->data;
    fprintf(stderr, "tenantd: signal %d, shutting down\n", signum);
    uv_signal_stop(&d->sigint);
    uv_signal_stop(&d->sigterm);
    uv_signal_stop(&d->sighup);
    if (d->syncing)
        uv_timer_stop(&d->sync);
    td_leader_stop(d->leader);
    if (d->metering) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        td_metering_tick(d->metering, (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec);
        td_metering_stop(d->metering);
    }
    if (d->server) {
        td_http_multi_stop(d->server, on_server_stopped, d);
        d->server = NULL;
    }
}

/* SIGHUP: the --config files again, over the current objects, as one
 * apply: all of them or, if any is invalid, none (the old state serves). */
static void on_reload(uv_signal_t *h, int signum)
{
    (void)signum;
    daemon_state *d = h->data;
    td_err err;
    td_config *cur = td_control_snapshot(d->control);
    td_config_builder *b = NULL;
    td_config *next = NULL;
    json_t *objs = json_array();
    td_status st = objs ? td_config_builder_create(cur, &b, &err) : TD_ENOMEM;
    for (size_t i = 0; st == TD_OK && i < d->nconfigs; i++) {
        td_manifest *m = NULL;
        st = td_manifest_load_file(d->configs[i], &m, &err);
        /* the queue's records on stored Workloads stay the daemon's */
        for (size_t k = 0; st == TD_OK && k < td_manifest_count(m); k++)
            st = td_workloads_keep_status(cur, td_manifest_doc(m, k), &err);
        if (st == TD_OK)
            st = td_config_builder_add_manifest(b, m, &err);
        for (size_t k = 0; st == TD_OK && k < td_manifest_count(m); k++)
            json_array_append(objs, td_manifest_doc(m, k));
        td_manifest_destroy(m);
    }
    if (st == TD_OK)
        st = td_config_builder_finish(b, &next, &err);
    if (st == TD_OK) {
        size_t n = json_array_size(objs);
        json_t **arr = calloc(n ? n : 1, sizeof *arr);
        for (size_t i = 0; arr && i < n; i++)
            arr[i] = json_array_get(objs, i);
        st = arr ? td_control_commit(d->control, next, arr, n, NULL, 0, &err) : TD_ENOMEM;
        free(arr);
    }
    if (st == TD_OK)
        fprintf(stderr, "tenantd: SIGHUP: configuration reloaded\n");
    else
        fprintf(stderr, "tenantd: SIGHUP: reload rejected, the old configuration keeps serving: "
                        "%s\n",
                st == TD_ENOMEM ? "out of memory" : err.msg);
    json_decref(objs);
    td_config_builder_destroy(b);
    td_config_unref(cur);
}

/* Another replica may have committed: if the store's generation moved past
 * what is served, every object is read again and served, as a SIGHUP or an
 * apply swaps the snapshot; nothing is written here (the scheduling leader
 * then runs a pass over what the commit brought: leader.h). A store that
 * cannot be read or whose objects do not validate leaves the old snapshot
 * serving, logged once. */
static void pick_up(daemon_state *d)
{
    td_err err;
    bool changed = false;
    td_config_builder *b = NULL;
    td_config *next = NULL;
    td_status st = td_store_changed(d->store, &changed, &err);
    if (st == TD_OK && !changed) {
        if (d->sync_failing)
            fprintf(stderr, "tenantd: store: %s reachable again\n", td_store_name(d->store));
        d->sync_failing = false;
        return;
    }
    if (st == TD_OK)
        st = td_config_builder_create(NULL, &b, &err);
    if (st == TD_OK)
        st = td_store_load(d->store, b, &err);
    if (st == TD_OK)
        st = td_config_builder_finish(b, &next, &err);
    td_config_builder_destroy(b);
    if (st != TD_OK) {
        if (!d->sync_failing || st == TD_EINVAL)
            fprintf(stderr, "tenantd: store: cannot pick up other replicas' commits, the "
                            "current objects keep serving: %s\n",
                    st == TD_ENOMEM ? "out of memory" : err.msg);
        d->sync_failing = st != TD_EINVAL;
        return;
    }
    d->sync_failing = false;
    json_t *const *all;
    size_t n = td_config_all(next, &all);
    td_control_adopt(d->control, next);
    fprintf(stderr, "tenantd: store: picked up a commit from another replica (%zu objects)\n", n);
    td_leader_picked_up(d->leader); /* the leader schedules what it brought */
}

static void leader_refresh(void *ud)
{
    pick_up(ud);
}

static void on_store_readable(uv_poll_t *h, int status, int events)
{
    (void)events;
    daemon_state *d = h->data;
    td_err err;
    bool notified = false;
    if (status < 0 || td_store_watch_drain(d->store, &notified, &err) != TD_OK) {
        fprintf(stderr, "tenantd: store: %s (the 1 s version check covers until it is back)\n",
                status < 0 ? uv_strerror(status) : err.msg);
        stop_listening(d);
        td_store_watch_reset(d->store);
        return;
    }
    if (notified)
        pick_up(d);
}

/* Every second: listen again if the listener was lost, and compare the
 * store's generation, for a notification that never came. */
static void on_sync_tick(uv_timer_t *t)
{
    daemon_state *d = t->data;
    if (!d->poll) {
        int fd = td_store_watch_fd(d->store);
        uv_poll_t *p = fd >= 0 ? malloc(sizeof *p) : NULL;
        if (p && uv_poll_init(t->loop, p, fd) == 0) {
            p->data = d;
            uv_poll_start(p, UV_READABLE, on_store_readable);
            d->poll = p;
        } else {
            free(p);
        }
    }
    pick_up(d);
}

typedef struct {
    td_gateway *g;
    int64_t now_ns;
    size_t n;
} seed_ctx;

static int seed_one(const td_ledger_rec *r, void *ud)
{
    seed_ctx *s = ud;
    td_gateway_budget_replay(s->g, r, s->now_ns);
    s->n++;
    return 0;
}

/* Budgets keep the current periods' spend across a restart: every priced
 * request record of the ledger since the earliest current period start
 * (this month's or this week's) counts again, before the gateway takes
 * traffic. */
static void seed_budgets(td_gateway *g, const char *data)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now_s = (int64_t)ts.tv_sec, ms, me, ws, we;
    td_period_bounds(TD_PERIOD_MONTH, now_s, &ms, &me);
    td_period_bounds(TD_PERIOD_WEEK, now_s, &ws, &we);
    int64_t from = (ms < ws ? ms : ws) * 1000000000LL;
    seed_ctx s = {g, now_s * 1000000000LL + ts.tv_nsec, 0};
    td_err err;
    if (td_ledger_read(data, from, s.now_ns + 1, seed_one, &s, &err) != TD_OK)
        fprintf(stderr,
                "tenantd: budgets: the ledger could not be read (%s); spend starts at "
                "zero\n",
                err.msg);
}

static void free_tls(SSL_CTX **ctxs)
{
    for (unsigned i = 0; i < TD_HTTP_MAX_LOOPS; i++) {
        SSL_CTX_free(ctxs[i]);
        ctxs[i] = NULL;
    }
}

/* An admin thread ends: the request arena it kept for reviews goes. */
static void admin_thread_exit(void *user)
{
    (void)user;
    td_json_arena_release();
}

static int write_port_file(const char *path, int port)
{
    /* Written aside and renamed, so a reader never sees half a number. */
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0 || rename(tmp, path) < 0) {
        fprintf(stderr, "tenantd: cannot write port file %s\n", path);
        return -1;
    }
    return 0;
}

/* examples/platform.yaml as it was at build time (generated by CMake). */
extern const unsigned char td_embedded_platform[];
extern const size_t td_embedded_platform_len;

/* Stored objects, then the --config files over them; the files' objects are
 * written back so that the store holds everything being served. With no
 * --config and an empty store, the built-in example platform is served. */
static td_status load_state(td_store *store, const char *const *configs, size_t n,
                            td_config **out, td_err *err)
{
    td_config_builder *b = NULL;
    td_status st = td_config_builder_create(NULL, &b, err);
    if (st == TD_OK)
        st = td_store_load(store, b, err);
    json_t *objs = json_array();
    td_manifest *builtin = NULL;
    td_config *probe = NULL;
    if (st == TD_OK && n == 0 && (st = td_config_builder_finish(b, &probe, err)) == TD_OK) {
        json_t *const *all;
        if (td_config_all(probe, &all) == 0) {
            st = td_manifest_parse("built-in examples/platform.yaml",
                                   (const char *)td_embedded_platform, td_embedded_platform_len,
                                   &builtin, err);
            if (st == TD_OK)
                st = td_config_builder_add_manifest(b, builtin, err);
            for (size_t k = 0; st == TD_OK && k < td_manifest_count(builtin); k++)
                json_array_append(objs, td_manifest_doc(builtin, k));
            if (st == TD_OK)
                fprintf(stderr, "tenantd: no --config and an empty store: serving the built-in "
                                "example platform (examples/platform.yaml)\n");
        }
        td_config_unref(probe);
    }
    td_manifest **ms = calloc(n ? n : 1, sizeof *ms);
    if (!objs || !ms)
        st = td_err_set(err, TD_ENOMEM, "out of memory");
    for (size_t i = 0; st == TD_OK && i < n; i++) {
        st = td_manifest_load_file(configs[i], &ms[i], err);
        if (st == TD_OK)
            st = td_config_builder_add_manifest(b, ms[i], err);
        for (size_t k = 0; st == TD_OK && k < td_manifest_count(ms[i]); k++)
            json_array_append(objs, td_manifest_doc(ms[i], k));
    }
    if (st == TD_OK)
        st = td_config_builder_finish(b, out, err);
    if (st == TD_OK && json_array_size(objs)) {
        size_t k = json_array_size(objs);
        json_t **arr = calloc(k, sizeof *arr);
        for (size_t i = 0; arr && i < k; i++)
            arr[i] = json_array_get(objs, i);
        st = arr ? td_store_write(store, arr, k, NULL, 0, err) : TD_ENOMEM;
        free(arr);
        if (st != TD_OK) {
            td_config_unref(*out);
            *out = NULL;
        }
    }
    td_manifest_destroy(builtin);
    for (size_t i = 0; ms && i < n; i++)
        td_manifest_destroy(ms[i]);
    free(ms);
    json_decref(objs);
    td_config_builder_destroy(b);
    return st;
}

/* Raises the soft open-file limit to the hard one, as nginx's
 * worker_rlimit_nofile and Go's runtime (since 1.19) do: the soft limit is
 * often 1,024, and every client connection is a descriptor. The gateway
 * then caps its connections below it (td_proxy_conn_limit). */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t was = rl.rlim_cur;
    if (rl.rlim_cur != rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            fprintf(stderr, "tenantd: open files: cannot raise the soft limit %llu to the hard "
                            "limit %llu\n",
                    (unsigned long long)was, (unsigned long long)rl.rlim_max);
            return;
        }
    }
    fprintf(stderr, "tenantd: open files: soft limit %llu -> %llu (the hard limit)\n",
            (unsigned long long)was, (unsigned long long)rl.rlim_cur);
}

/* The command line, checked: what start() needs to bring tenantd up. */
typedef struct {
    const char *configs[64];
    size_t nconfigs;
    const char *data, *listen, *cert, *key, *client_ca, *port_file, *data_listen, *redis,
        *access_log, *data_port_file, *token_file, *data_cert, *data_key, *replica_name,
        *database;
    long workers, replicas, unauth_per_addr, admin_threads, tarpit_after;
    bool allow_x_tenant, ledger_on;
    int64_t retention_ns;
    size_t spool_max; /* 0: TD_LEDGER_SPOOL_MAX */
    char token[4096]; /* the first line of --admin-token-file */
    size_t token_len;
} daemon_opts;

enum { O_LISTEN = 1, O_CERT, O_KEY, O_CLIENT_CA, O_PORT_FILE, O_DATA_LISTEN, O_WORKERS,
       O_REDIS, O_REPLICAS, O_XTENANT, O_ACCESS_LOG, O_DATA_PORT_FILE, O_TOKEN_FILE,
       O_LEDGER, O_LEDGER_RETENTION, O_LEDGER_SPOOL_MAX, O_DATA_CERT, O_DATA_KEY, O_REPLICA_NAME, O_ADMIN_THREADS,
       O_UNAUTH_PER_ADDR, O_DATABASE, O_TARPIT_AFTER };

static const struct option longopts[] = {
    {"config", required_argument, NULL, 'c'},
    {"data", required_argument, NULL, 'd'},
    {"database", required_argument, NULL, O_DATABASE},
    {"admin-listen", required_argument, NULL, O_LISTEN},
    {"tls-cert", required_argument, NULL, O_CERT},
    {"tls-key", required_argument, NULL, O_KEY},
    {"tls-client-ca", required_argument, NULL, O_CLIENT_CA},
    {"port-file", required_argument, NULL, O_PORT_FILE},
    {"listen", required_argument, NULL, O_DATA_LISTEN},
    {"workers", required_argument, NULL, O_WORKERS},
    {"admin-threads", required_argument, NULL, O_ADMIN_THREADS},
    {"redis", required_argument, NULL, O_REDIS},
    {"replicas", required_argument, NULL, O_REPLICAS},
    {"replica-name", required_argument, NULL, O_REPLICA_NAME},
    {"allow-x-tenant", no_argument, NULL, O_XTENANT},
    {"access-log", required_argument, NULL, O_ACCESS_LOG},
    {"listen-port-file", required_argument, NULL, O_DATA_PORT_FILE},
    {"admin-token-file", required_argument, NULL, O_TOKEN_FILE},
    {"ledger", required_argument, NULL, O_LEDGER},
    {"ledger-retention", required_argument, NULL, O_LEDGER_RETENTION},
    {"ledger-spool-max", required_argument, NULL, O_LEDGER_SPOOL_MAX},
    {"data-tls-cert", required_argument, NULL, O_DATA_CERT},
    {"data-tls-key", required_argument, NULL, O_DATA_KEY},
    {"unauth-conns-per-addr", required_argument, NULL, O_UNAUTH_PER_ADDR},
    {"tarpit-after", required_argument, NULL, O_TARPIT_AFTER},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* What parse_options and check_options return to go on (any other value is
 * the exit code). */
#define GO_ON (-1)

/* s as a whole decimal number from lo to hi into *v; false otherwise. An
 * empty s is 0 (strtol's reading), as the flags have always taken it. */
static bool long_in(const char *s, long lo, long hi, long *v)
{
    char *end;
    long x = strtol(s, &end, 10);
    if (*end || x < lo || x > hi)
        return false;
    *v = x;
    return true;
}

/* The flags that take a checked value; GO_ON, or 2 with the message printed. */
static int parse_checked_flag(int c, const char *arg, daemon_opts *o)
{
    td_err e;
    switch (c) {
    case O_REPLICA_NAME:
        if (!arg[0] || strlen(arg) > 200 || strpbrk(arg, " \t\r\n")) {
            fprintf(stderr, "tenantd: --replica-name: 1 to 200 characters, no spaces\n");
            return 2;
        }
        o->replica_name = arg;
        return GO_ON;
    case O_LEDGER:
        if (strcmp(arg, "on") != 0 && strcmp(arg, "off") != 0) {
            fprintf(stderr, "tenantd: --ledger must be on or off, not \"%s\"\n", arg);
            return 2;
        }
        o->ledger_on = strcmp(arg, "on") == 0;
        return GO_ON;
    case O_LEDGER_RETENTION:
        if (strcmp(arg, "0") == 0)
            o->retention_ns = 0;
        else if (td_duration_parse(arg, &o->retention_ns, &e) != TD_OK) {
            fprintf(stderr, "tenantd: --ledger-retention: %s\n", e.msg);
            return 2;
        }
        return GO_ON;
    case O_LEDGER_SPOOL_MAX: {
        char *end;
        long long v = strtoll(arg, &end, 10);
        if (!arg[0] || *end || v < 1 || v > 1000000000LL) {
            fprintf(stderr, "tenantd: --ledger-spool-max must be a number from 1 to "
                            "1000000000\n");
            return 2;
        }
        o->spool_max = (size_t)v;
        return GO_ON;
    }
    case O_UNAUTH_PER_ADDR:
        if (!arg[0] || !long_in(arg, 0, 1000000, &o->unauth_per_addr)) {
            fprintf(stderr, "tenantd: --unauth-conns-per-addr must be a number from 0 (no "
                            "cap) to 1000000\n");
            return 2;
        }
        return GO_ON;
    case O_TARPIT_AFTER:
        if (!arg[0] || !long_in(arg, 0, 1000, &o->tarpit_after)) {
            fprintf(stderr, "tenantd: --tarpit-after must be a number from 0 (off) to 1000\n");
            return 2;
        }
        return GO_ON;
    case O_ADMIN_THREADS:
        if (!long_in(arg, 1, (long)TD_HTTP_MAX_LOOPS, &o->admin_threads)) {
            fprintf(stderr, "tenantd: --admin-threads must be a number from 1 to %u\n",
                    TD_HTTP_MAX_LOOPS);
            return 2;
        }
        return GO_ON;
    default: /* O_WORKERS, O_REPLICAS */
        if (!long_in(arg, 1, 256, c == O_WORKERS ? &o->workers : &o->replicas)) {
            fprintf(stderr, "tenantd: --%s must be a number from 1 to 256\n",
                    c == O_WORKERS ? "workers" : "replicas");
            return 2;
        }
        return GO_ON;
    }
}

/* One flag c with its argument into o; GO_ON, or 2 with the message printed. */
static int parse_flag(int c, const char *arg, daemon_opts *o)
{
    switch (c) {
    case 'c':
        if (o->nconfigs == sizeof o->configs / sizeof o->configs[0]) {
            fprintf(stderr, "tenantd: too many --config files\n");
            return 2;
        }
        o->configs[o->nconfigs++] = arg;
        return GO_ON;
    case 'd': o->data = arg; return GO_ON;
    case O_DATABASE: o->database = arg; return GO_ON;
    case O_LISTEN: o->listen = arg; return GO_ON;
    case O_CERT: o->cert = arg; return GO_ON;
    case O_KEY: o->key = arg; return GO_ON;
    case O_CLIENT_CA: o->client_ca = arg; return GO_ON;
    case O_PORT_FILE: o->port_file = arg; return GO_ON;
    case O_DATA_LISTEN: o->data_listen = arg; return GO_ON;
    case O_REDIS: o->redis = arg; return GO_ON;
    case O_XTENANT: o->allow_x_tenant = true; return GO_ON;
    case O_ACCESS_LOG: o->access_log = arg; return GO_ON;
    case O_DATA_PORT_FILE: o->data_port_file = arg; return GO_ON;
    case O_TOKEN_FILE: o->token_file = arg; return GO_ON;
    case O_DATA_CERT: o->data_cert = arg; return GO_ON;
    case O_DATA_KEY: o->data_key = arg; return GO_ON;
    default: return parse_checked_flag(c, arg, o);
    }
}

/* The command line into o, with the defaults for what it does not give;
 * GO_ON, or the exit code (0 after --help, 2 on a mistake, with the message
 * and the usage printed). $TENANTD_DATABASE stands in for --database. */
static int parse_options(int argc, char **argv, daemon_opts *o)
{
    memset(o, 0, sizeof *o);
    o->listen = "127.0.0.1:8081";
    o->data_listen = "127.0.0.1:8080";
    o->workers = o->admin_threads = sysconf(_SC_NPROCESSORS_ONLN);
    o->replicas = 1;
    o->unauth_per_addr = 64;
    o->tarpit_after = 3;
    o->ledger_on = true;
    o->retention_ns = 720LL * 3600 * 1000000000LL;
    int c, rc;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "c:d:h", longopts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        if (c == '?' || c == ':') {
            fprintf(stderr, "tenantd: unknown or incomplete flag \"%s\"\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
        if ((rc = parse_flag(c, optarg, o)) != GO_ON)
            return rc;
    }
    if (!o->data || optind < argc) {
        fprintf(stderr, "tenantd: %s\n",
                !o->data ? "--data DIR is required" : "unexpected argument");
        usage(stderr);
        return 2;
    }
    if (!o->database && getenv("TENANTD_DATABASE") && getenv("TENANTD_DATABASE")[0])
        o->database = getenv("TENANTD_DATABASE");
    if (o->database && !td_store_is_url(o->database)) {
        fprintf(stderr, "tenantd: --database (or $TENANTD_DATABASE) must be a postgres:// or "
                        "postgresql:// URL\n");
        return 2;
    }
    return GO_ON;
}

/* The flags that go together, and the admin token read from its file; GO_ON,
 * or 2 with the message printed. */
static int check_options(daemon_opts *o)
{
    if (!o->cert != !o->key || !o->data_cert != !o->data_key) {
        const char *which = !o->cert != !o->key ? "" : "data-";
        fprintf(stderr, "tenantd: --%stls-cert and --%stls-key go together\n", which, which);
        return 2;
    }
    if (o->token_file) {
        FILE *f = fopen(o->token_file, "r");
        if (!f || !fgets(o->token, sizeof o->token, f)) {
            fprintf(stderr, "tenantd: --admin-token-file %s: cannot read a token from it\n",
                    o->token_file);
            if (f)
                fclose(f);
            return 2;
        }
        fclose(f);
        o->token_len = strcspn(o->token, "\r\n");
        if (o->token_len < 16) {
            fprintf(stderr, "tenantd: --admin-token-file %s: the token must be at least 16 "
                            "characters\n",
                    o->token_file);
            return 2;
        }
    }
    if (o->admin_threads < 1)
        o->admin_threads = 1;
    if (o->admin_threads > (long)TD_HTTP_MAX_LOOPS)
        o->admin_threads = TD_HTTP_MAX_LOOPS;
    return GO_ON;
}

/* Everything tenantd runs, made by start() and released by stop(); each part
 * NULL (or false) until made. */
typedef struct {
    SSL_CTX *tls_ctxs[TD_HTTP_MAX_LOOPS]; /* the admin loops' until they start */
    td_store *store;
    td_config *cfg; /* owned here until control_inited, then by control */
    td_gateway *gateway;
    FILE *alog;
    td_control control;
    bool control_inited;
    td_metering *metering;
    td_ledger *ledger;
    td_proxy *proxy;
    char replica_id[24];
    char replica_name[512];
    uv_loop_t loop;
    bool loop_inited;
    daemon_state d;
} tenantd;

/* Releases what start() made, in the reverse order; safe on a part-made t.
 * Closing the ledger commits what the proxy and the last tick appended; its
 * on_commit still prices into metering, freed after. */
static void stop(tenantd *t)
{
    free_tls(t->tls_ctxs);
    td_proxy_stop(t->proxy);
    td_ledger_close(t->ledger);
    td_metering_destroy(t->metering);
    td_leader_destroy(t->d.leader);
    if (t->control_inited)
        td_control_fini(&t->control);
    else
        td_config_unref(t->cfg);
    td_gateway_destroy(t->gateway);
    if (t->alog && t->alog != stderr)
        fclose(t->alog);
    td_store_close(t->store);
    if (t->loop_inited)
        uv_loop_close(&t->loop);
}

/* One TLS context per admin loop: nothing of OpenSSL's shared between the
 * threads' handshakes. */
static td_status start_admin_tls(const daemon_opts *o, tenantd *t, td_err *err)
{
    for (long i = 0; o->cert && i < o->admin_threads; i++) {
        td_status st = td_tls_server_ctx(o->cert, o->key, o->client_ca, &t->tls_ctxs[i], err);
        if (st != TD_OK)
            return st;
    }
    return TD_OK;
}

/* The store, the objects to serve, the gateway over them and the access log;
 * GO_ON or the exit code, with the message printed. */
static int start_state(const daemon_opts *o, tenantd *t)
{
    td_err err;
    td_status st = td_store_open(o->database ? o->database : o->data, &t->store, &err);
    if (st == TD_OK)
        st = load_state(t->store, o->configs, o->nconfigs, &t->cfg, &err);
    if (st != TD_OK) {
        fprintf(stderr, "tenantd: %s\n", err.msg);
        return st == TD_EINVAL ? 2 : 1;
    }
    /* A replica's claims on shared budgets are kept under its name, so a
     * restart of the same replica (same host and data dir) finds its own. */
    const char *name = o->replica_name;
    if (!name) {
        char host[256] = "host", *dir = realpath(o->data, NULL);
        gethostname(host, sizeof host - 1);
        host[sizeof host - 1] = '\0';
        snprintf(t->replica_name, sizeof t->replica_name, "%s:%s", host, dir ? dir : o->data);
        free(dir);
    } else {
        snprintf(t->replica_name, sizeof t->replica_name, "%s", name);
    }
    name = t->replica_name;
    td_gateway_opts gopts = {o->allow_x_tenant};
    td_gw_backends redis_be;
    if (td_gateway_create(t->cfg, &gopts, &t->gateway, &err) != TD_OK ||
        (o->redis && (td_redis_backends_create(o->redis, (uint32_t)o->replicas, name,
                                               td_gateway_budgets(t->gateway), TD_GW_MAX_TENANTS,
                                               td_gateway_key_budgets(t->gateway), TD_GW_MAX_KEYS,
                                               &redis_be, &err) != TD_OK ||
                      td_gateway_set_backends(t->gateway, &redis_be, &err) != TD_OK))) {
        fprintf(stderr, "tenantd: %s\n", err.msg);
        return 2;
    }
    if (o->access_log) {
        t->alog = strcmp(o->access_log, "-") == 0 ? stderr : fopen(o->access_log, "a");
        if (!t->alog) {
            fprintf(stderr, "tenantd: --access-log %s: cannot open\n", o->access_log);
            return 2;
        }
    }
    return GO_ON;
}

/* Metering, the ledger (--ledger on) and the gateway's data listener;
 * GO_ON or the exit code, with the message printed. */
static int start_gateway(const daemon_opts *o, tenantd *t)
{
    td_err err;
    unsigned char rnd[6];
    if (RAND_bytes(rnd, sizeof rnd) != 1)
        memset(rnd, 0, sizeof rnd);
    snprintf(t->replica_id, sizeof t->replica_id, "%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1],
             rnd[2], rnd[3], rnd[4], rnd[5]);
    td_ledger_opts lopts = {.max_buffered = 65536, .flush_ms = 50,
                            .retention_ns = o->retention_ns,
                            .on_commit = td_metering_on_commit,
                            .database = o->database,
                            .replica = t->replica_name,
                            .spool_max = o->spool_max};
    td_status st = td_metering_create(&t->control, &t->metering, &err);
    lopts.on_commit_ud = t->metering;
    if (st == TD_OK && o->ledger_on)
        st = td_ledger_open(o->data, &lopts, &t->ledger, &err);
    if (st != TD_OK) {
        fprintf(stderr, "tenantd: %s\n", err.msg);
        return 1;
    }
    if (t->ledger && td_metering_load(t->metering, t->cfg, o->data, &err) != TD_OK)
        fprintf(stderr, "tenantd: metering: %s (this period's cost starts from zero)\n", err.msg);
    if (t->ledger)
        seed_budgets(t->gateway, o->data);
    SSL_CTX *data_tls = NULL;
    td_proxy_opts popts = {o->data_listen,
                           o->workers > 0 ? (unsigned)o->workers : 1,
                           t->alog,
                           0,
                           t->ledger,
                           t->replica_id,
                           NULL,
                           o->unauth_per_addr ? (int)o->unauth_per_addr : -1,
                           NULL};
    td_flood_opts flood;
    td_flood_opts_default(&flood);
    if (o->tarpit_after == 0)
        flood.tarpit_after = flood.close_after = 0;
    else /* closed after 29 held answers, as with the default 3 and 32 */
        flood.tarpit_after = (uint32_t)o->tarpit_after, flood.close_after = flood.tarpit_after + 29;
    popts.flood = &flood;
    st = o->data_cert ? td_tls_server_ctx(o->data_cert, o->data_key, NULL, &data_tls, &err)
                      : TD_OK;
    popts.tls = data_tls;
    if (st == TD_OK)
        st = td_proxy_start(t->gateway, &popts, &t->proxy, &err);
    SSL_CTX_free(data_tls); /* the proxy holds its own reference */
    if (st != TD_OK) {
        fprintf(stderr, "tenantd: %s\n", err.msg);
        return 1;
    }
    return GO_ON;
}

/* The control API over the served objects, and the admin listener on a new
 * loop; GO_ON or the exit code, with the message printed. */
static int start_admin(daemon_opts *o, tenantd *t)
{
    td_err err;
    td_control_init(&t->control, t->cfg, t->store, t->gateway);
    t->control_inited = true;
    t->control.metering = t->metering;
    t->control.ledger = t->ledger;
    t->control.data_dir = o->data;
    if (o->token_file) {
        td_control_set_admin_token(&t->control, o->token, o->token_len);
        memset(o->token, 0, sizeof o->token);
    } else {
        fprintf(stderr, "tenantd: warning: the control API (/v1/...) needs no credential; give "
                        "--admin-token-file to require one\n");
    }
    uv_loop_init(&t->loop);
    t->loop_inited = true;
    td_http_multi_opts hopts = {(unsigned)o->admin_threads,
                                o->cert ? (SSL_CTX *const *)t->tls_ctxs : NULL,
                                MAX_BODY,
                                td_control_handle,
                                &t->control,
                                td_control_anywhere,
                                admin_thread_exit,
                                td_control_wants_prepare,
                                td_control_prepare,
                                td_control_release,
                                2,
                                td_control_handle_batch};
    if (td_http_multi_start(&t->loop, o->listen, &hopts, &t->d.server, &err) != TD_OK) {
        fprintf(stderr, "tenantd: %s\n", err.msg);
        return 1;
    }
    free_tls(t->tls_ctxs); /* the servers hold their own references */
    int port = td_http_multi_port(t->d.server);
    json_t *const *all;
    fprintf(stderr,
            "tenantd: %zu objects loaded; admin listener on %s://%s (port %d, %ld threads); "
            "gateway on %s://%s (port %d, %ld workers%s%s, at most %zu client connections)\n",
            td_config_all(t->cfg, &all), o->cert ? "https" : "http", o->listen, port,
            o->admin_threads, o->data_cert ? "https" : "http", o->data_listen,
            td_proxy_port(t->proxy), o->workers,
            o->redis ? ", limits shared through redis " : "", o->redis ? o->redis : "",
            td_proxy_conn_limit(t->proxy));
    if (o->data_port_file)
        write_port_file(o->data_port_file, td_proxy_port(t->proxy));
    if (o->port_file)
        write_port_file(o->port_file, port);
    return GO_ON;
}

/* A scheduling pass over the stored records, once both listeners are up
 * (requests wait in the backlog); it changes nothing unless the store
 * predates the records or the --config files changed the queue's objects. */
static void pass_at_start(td_control *control)
{
    td_err err;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    json_t *changed = NULL;
    td_queue *q = NULL;
    td_config *cur = td_control_snapshot(control);
    td_status ps = td_workloads_pass(
        cur, (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec, &changed, &q, &err);
    if (ps == TD_OK && json_array_size(changed)) {
        fprintf(stderr, "tenantd: batch queue: the pass at start updates %zu Workloads\n",
                json_array_size(changed));
        ps = td_control_commit_pass(control, q, changed, &err); /* no second pass */
    } else if (ps == TD_OK) {
        /* nothing changed: its queue is what cur's records say, and
         * the readers (the first metering tick next) need no rebuild */
        td_err qerr;
        if (td_queueview_attach(cur, q, &qerr) != TD_OK)
            fprintf(stderr, "tenantd: batch queue view: %s\n", qerr.msg);
    }
    if (ps != TD_OK)
        fprintf(stderr, "tenantd: batch queue: scheduling pass at start: %s\n", err.msg);
    json_decref(changed);
    td_config_unref(cur);
}

/* The signals, the pass at start, the store's watch (--database) and the
 * metering tick on the loop; then the loop until a signal stops it. */
static void run(const daemon_opts *o, tenantd *t)
{
    daemon_state *d = &t->d;
    d->control = &t->control;
    d->configs = o->configs;
    d->nconfigs = o->nconfigs;
    uv_signal_init(&t->loop, &d->sigint);
    uv_signal_init(&t->loop, &d->sigterm);
    uv_signal_init(&t->loop, &d->sighup);
    d->sigint.data = d->sigterm.data = d->sighup.data = d;
    uv_signal_start(&d->sigint, on_signal, SIGINT);
    uv_signal_start(&d->sigterm, on_signal, SIGTERM);
    uv_signal_start(&d->sighup, on_reload, SIGHUP);
    if (o->database) {
        /* one scheduling leader among the replicas (leader.h); this one
         * leads at once if the lease is free */
        td_err err;
        d->store = t->store;
        if (td_leader_start(&t->loop, o->database, t->replica_name, &t->control, leader_refresh,
                            d, &d->leader, &err) != TD_OK) {
            /* without it every replica would schedule, unfenced: stop */
            fprintf(stderr, "tenantd: leader: %s; stopping\n", err.msg);
            raise(SIGTERM);
        }
    }
    pass_at_start(&t->control);
    d->metering = t->metering;
    if (o->database) {
        /* started after the pass at start, whose commit would otherwise be
         * announced back to this replica */
        d->store = t->store;
        d->syncing = true;
        uv_timer_init(&t->loop, &d->sync);
        d->sync.data = d;
        uv_timer_start(&d->sync, on_sync_tick, 0, 1000);
        fprintf(stderr, "tenantd: objects kept in %s; other replicas' commits are picked up "
                        "within 1 s\n",
                td_store_name(t->store));
    }
    td_metering_start(t->metering, &t->loop, t->ledger, 2000);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    uv_loop_close(&t->loop);
    t->loop_inited = false;
}

/* Brings tenantd up in its steps (TLS, state, gateway, admin listener);
 * GO_ON, or the exit code with the message printed. */
static int start(daemon_opts *o, tenantd *t)
{
    td_err err;
    int rc;
    if (start_admin_tls(o, t, &err) != TD_OK) {
        fprintf(stderr, "tenantd: %s\n", err.msg);
        return 2;
    }
    if ((rc = start_state(o, t)) != GO_ON || (rc = start_gateway(o, t)) != GO_ON)
        return rc;
    return start_admin(o, t);
}

int main(int argc, char **argv)
{
    static daemon_opts o;
    static tenantd t;
    /* Webhook reviews allocate their JSON from a per-request arena
     * (control.c); installed before any thread uses jansson. */
    td_json_arena_install();
    td_err kerr;
    if (td_kinds_register_builtin(&kerr) != TD_OK) { /* a build mistake: two owners of a kind */
        fprintf(stderr, "tenantd: %s\n", kerr.msg);
        return 1;
    }
    int rc = parse_options(argc, argv, &o);
    if (rc != GO_ON)
        return rc;
    raise_nofile();
    if ((rc = check_options(&o)) != GO_ON)
        return rc;
    if ((rc = start(&o, &t)) != GO_ON) {
        stop(&t);
        return rc;
    }
    run(&o, &t);
    stop(&t);
    td_json_arena_release();
    fprintf(stderr, "tenantd: stopped\n");
    return 0;
}
