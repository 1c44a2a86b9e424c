/* main.c - simmodel, a simulated OpenAI-compatible inference server: the
 * upstream behind tenantd's gateway in tests, the demo and the benchmarks.
 * A fixed number of GPU slots serve requests for prefill + decode time;
 * the rest wait in a FIFO queue, so overload looks like a real server's. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <uv.h>

#include "simmodel/simmodel.h"

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: simmodel [flags]\n\n"
        "Serves POST /v1/chat/completions, /v1/completions and /v1/embeddings like an\n"
        "OpenAI-compatible GPU server, plus GET /healthz (also /health), /stats,\n"
        "/metrics (vLLM's num_requests_waiting, gpu_cache_usage_perc) and /v1/models. Each request holds one of --slots for prompt_tokens * prefill + max_tokens *\n"
        "decode milliseconds (prompt tokens = characters / 4); when every slot is busy\n"
        "requests wait in a FIFO queue. X-Simmodel-Fault: reset|hang|close|slow|\n"
        "status:NNN on a request injects a failure.\n\n"
        "      --listen ADDR:PORT          listen address (default 127.0.0.1:8000; port 0 = any)\n"
        "      --port-file FILE            write the bound port to FILE once listening\n"
        "      --slots N                   requests served at once (default 4)\n"
        "      --ms-per-token F            decode time per output token (default 2)\n"
        "      --prefill-ms-per-token F    prefill time per prompt token (default 0.05)\n"
        "      --max-queue N               requests that may wait; beyond, 503 (default 1024)\n"
        "      --default-max-tokens N      output tokens when a request names none (default 16)\n"
        "  -h, --help                      this text\n");
}

/* Reads a whole decimal number in [min, max] into *out; 0 on success. */
static int parse_ulong(const char *flag, const char *s, unsigned long min, unsigned long max,
                       unsigned long *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (end == s || *end || errno || v < min || v > max || s[0] == '-') {
        fprintf(stderr, "simmodel: %s %s: want a whole number from %lu to %lu\n", flag, s, min,
                max);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_ms(const char *flag, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v) || v < 0 || v > 3.6e6) {
        fprintf(stderr, "simmodel: %s %s: want milliseconds from 0 to 3600000\n", flag, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* Writes port to path through a temporary file and rename, so a reader
 * never sees a partial number. */
static int write_port_file(const char *path, int port)
{
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (!tmp)
        return -1;
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    int ok = f && fprintf(f, "%d\n", port) > 0;
    if (f && fclose(f) != 0)
        ok = 0;
    if (ok && rename(tmp, path) != 0)
        ok = 0;
    if (!ok) {
        fprintf(stderr, "simmodel: --port-file %s: %s\n", path, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    return ok ? 0 : -1;
}

/* Thousands of client connections need thousands of descriptors. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

typedef struct {
    uv_signal_t sigint, sigterm;
    td_sim_server *server;
} state;

static void on_signal(uv_signal_t *h, int signum)
{
    state *st = h->data;
    fprintf(stderr, "simmodel: signal %d, shutting down\n", signum);
    td_sim_server_stop(st->server);
    uv_close((uv_handle_t *)&st->sigint, NULL);
    uv_close((uv_handle_t *)&st->sigterm, NULL);
}

enum {
    OPT_LISTEN = 256,
    OPT_PORT_FILE,
    OPT_SLOTS,
    OPT_MS_PER_TOKEN,
    OPT_PREFILL,
    OPT_MAX_QUEUE,
    OPT_DEFAULT_MAX_TOKENS
};

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"port-file", required_argument, NULL, OPT_PORT_FILE},
        {"slots", required_argument, NULL, OPT_SLOTS},
        {"ms-per-token", required_argument, NULL, OPT_MS_PER_TOKEN},
        {"prefill-ms-per-token", required_argument, NULL, OPT_PREFILL},
        {"max-queue", required_argument, NULL, OPT_MAX_QUEUE},
        {"default-max-tokens", required_argument, NULL, OPT_DEFAULT_MAX_TOKENS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    td_sim_config cfg = {
        .listen = "127.0.0.1:8000",
        .slots = 4,
        .ms_per_token = 2,
        .prefill_ms_per_token = 0.05,
        .max_queue = 1024,
        .default_max_tokens = 16,
    };
    const char *port_file = NULL;
    unsigned long v;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case OPT_LISTEN:
            cfg.listen = optarg;
            break;
        case OPT_PORT_FILE:
            port_file = optarg;
            break;
        case OPT_SLOTS:
            if (parse_ulong("--slots", optarg, 1, 1000000, &v) != 0)
                return 2;
            cfg.slots = (unsigned)v;
            break;
        case OPT_MS_PER_TOKEN:
            if (parse_ms("--ms-per-token", optarg, &cfg.ms_per_token) != 0)
                return 2;
            break;
        case OPT_PREFILL:
            if (parse_ms("--prefill-ms-per-token", optarg, &cfg.prefill_ms_per_token) != 0)
                return 2;
            break;
        case OPT_MAX_QUEUE:
            if (parse_ulong("--max-queue", optarg, 0, 100000000, &v) != 0)
                return 2;
            cfg.max_queue = v;
            break;
        case OPT_DEFAULT_MAX_TOKENS:
            if (parse_ulong("--default-max-tokens", optarg, 0, TD_SIM_MAX_OUTPUT_TOKENS, &v) != 0)
                return 2;
            cfg.default_max_tokens = (unsigned)v;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "simmodel: unexpected argument %s\n", argv[optind]);
        usage(stderr);
        return 2;
    }

    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();

    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) {
        fprintf(stderr, "simmodel: cannot start the event loop\n");
        return 1;
    }
    state st;
    memset(&st, 0, sizeof st);
    td_err err;
    td_status rc = td_sim_server_create(&loop, &cfg, &st.server, &err);
    if (rc != TD_OK) {
        fprintf(stderr, "simmodel: %s\n", err.msg);
        uv_loop_close(&loop);
        return rc == TD_EINVAL ? 2 : 1;
    }
    int port = td_sim_server_port(st.server);
    if (port_file && write_port_file(port_file, port) != 0) {
        td_sim_server_stop(st.server);
        uv_run(&loop, UV_RUN_DEFAULT);
        td_sim_server_destroy(st.server);
        uv_loop_close(&loop);
        return 1;
    }
    uv_signal_init(&loop, &st.sigint);
    uv_signal_init(&loop, &st.sigterm);
    st.sigint.data = st.sigterm.data = &st;
    uv_signal_start(&st.sigint, on_signal, SIGINT);
    uv_signal_start(&st.sigterm, on_signal, SIGTERM);
    fprintf(stderr,
            "simmodel: listening on port %d: %u slots, %g ms/token decode, %g ms/token prefill, "
            "queue %zu\n",
            port, cfg.slots, cfg.ms_per_token, cfg.prefill_ms_per_token, cfg.max_queue);

    uv_run(&loop, UV_RUN_DEFAULT);
    td_sim_server_destroy(st.server);
    int uvrc = uv_loop_close(&loop);
    if (uvrc != 0) {
        fprintf(stderr, "simmodel: event loop not empty at exit: %s\n", uv_strerror(uvrc));
        return 1;
    }
    return 0;
}
