/* bench_loadgen.c - open-loop HTTP/1.1 load generator for latency at a fixed
 * offered rate (the webhook's p99 target), plain or TLS, keep-alive.
 * One thread, epoll. Requests are scheduled evenly at --rate; each goes to an
 * idle connection; when none is idle it waits, and its latency still counts
 * from its scheduled time (coordinated omission corrected). Every latency
 * goes into a log-linear histogram (128 linear steps per power of two, so
 * within 0.8%); each response's status line and Content-Length are parsed.
 *
 *   bench_loadgen --url https://127.0.0.1:PORT/validate --body FILE --rate R
 *                 [--conns N] [--duration S] [--warmup S] [--expect TEXT]
 *
 * Prints a readable summary and one machine line:
 *   LOADGEN offered achieved sent completed non2xx errors incomplete
 *           p50_us p90_us p99_us p999_us max_us
 * achieved = responses received in the measured window / its length (of
 * requests scheduled earlier too, when the server lags).
 * "incomplete" requests (scheduled in the window, no response 0.5 s after it)
 * enter the histogram with their latency so far, a lower bound. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SUB_BITS  7
#define SUB       (1u << SUB_BITS)
#define HALF      (SUB / 2)
#define N_BUCKETS (64u * HALF)
#define RBUF_MAX  (1u << 20) /* largest response accepted */
#define DRAIN_NS  500000000ull

typedef struct {
    uint64_t count[N_BUCKETS];
    uint64_t total, max;
} histogram;

static unsigned bucket_of(uint64_t v)
{
    if (v < SUB)
        return (unsigned)v;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = msb - (SUB_BITS - 1);
    return (shift + 1) * HALF + (unsigned)((v >> shift) - HALF);
}

/* The middle of bucket i's range. */
static uint64_t bucket_value(unsigned i)
{
    if (i < SUB)
        return i;
    unsigned shift = i / HALF - 1;
    uint64_t low = ((uint64_t)(i % HALF) + HALF) << shift;
    return low + ((1ull << shift) >> 1);
}

static void hist_add(histogram *h, uint64_t v)
{
    h->count[bucket_of(v)]++;
    h->total++;
    if (v > h->max)
        h->max = v;
}

static uint64_t hist_quantile(const histogram *h, double q)
{
    if (h->total == 0)
        return 0;
    uint64_t rank = (uint64_t)(q * (double)h->total + 0.999999);
    if (rank < 1)
        rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < N_BUCKETS; i++) {
        seen += h->count[i];
        if (seen >= rank) {
            uint64_t v = bucket_value(i);
            return v > h->max ? h->max : v;
        }
    }
    return h->max;
}

typedef enum { C_IDLE, C_BUSY, C_DEAD } conn_state;

typedef struct {
    int fd;
    SSL *ssl;
    conn_state state;
    size_t woff;       /* bytes of the request written */
    bool want_out;     /* EPOLLOUT armed */
    uint64_t sched_ns; /* the in-flight request's scheduled time */
    char *rbuf;
    size_t rlen, rcap;
} conn;

static struct {
    const char *host, *port, *path;
    bool tls;
    char *req;
    size_t req_len;
    const char *expect;
    int epfd;
    SSL_CTX *ctx;
    conn *conns;
    int n_conns;
    int *idle; /* stack of idle connection indexes */
    int n_idle;
    histogram hist;
    uint64_t t_warm, t_end;
    uint64_t sent, completed, in_window_done, non2xx, errors, unexpected;
} g;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_loadgen: %s\n", what);
    exit(2);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0, r;
    do {
        if (n + 65536 > cap) {
            cap = (n + 65536) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        r = fread(buf + n, 1, cap - n, f);
        n += r;
    } while (r > 0);
    fclose(f);
    *len = n;
    return buf;
}

/* Parses "http[s]://host:port/path"; the strings are carved out of url. */
static void parse_url(char *url)
{
    char *p;
    if (strncmp(url, "https://", 8) == 0) {
        g.tls = true;
        p = url + 8;
    } else if (strncmp(url, "http://", 7) == 0) {
        p = url + 7;
    } else {
        die("--url must start with http:// or https://");
    }
    char *slash = strchr(p, '/');
    static char root[] = "/";
    static char pathbuf[4096];
    if (slash) {
        snprintf(pathbuf, sizeof pathbuf, "%s", slash);
        *slash = 0;
        g.path = pathbuf;
    } else {
        g.path = root;
    }
    char *colon = strrchr(p, ':');
    if (!colon)
        die("--url needs host:port");
    *colon = 0;
    g.host = p;
    g.port = colon + 1;
}

static void arm(conn *c, bool out)
{
    struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.u32 = (uint32_t)(c - g.conns)};
    if (epoll_ctl(g.epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
        c->want_out = out;
}

/* Blocking connect (and handshake), then non-blocking for the run. */
static void conn_open(conn *c)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(g.host, g.port, &hints, &ai) != 0)
        die("cannot resolve the host");
    c->fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (c->fd < 0 || connect(c->fd, ai->ai_addr, ai->ai_addrlen) != 0)
        die("cannot connect");
    freeaddrinfo(ai);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (g.tls) {
        c->ssl = SSL_new(g.ctx);
        if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1 || SSL_connect(c->ssl) != 1)
            die("TLS handshake failed");
    }
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)(c - g.conns)};
    if (epoll_ctl(g.epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0)
        die("epoll_ctl");
    c->state = C_IDLE;
    c->woff = 0;
    c->rlen = 0;
    c->want_out = false;
    g.idle[g.n_idle++] = (int)(c - g.conns);
}

static void conn_close(conn *c)
{
    if (c->ssl)
        SSL_free(c->ssl);
    c->ssl = NULL;
    epoll_ctl(g.epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    c->state = C_DEAD;
}

/* A broken connection: its request is an error; a fresh one replaces it. */
static void conn_fail(conn *c)
{
    if (c->state == C_BUSY)
        g.errors++;
    for (int i = 0; i < g.n_idle; i++)
        if (g.idle[i] == (int)(c - g.conns))
            g.idle[i--] = g.idle[--g.n_idle];
    conn_close(c);
    conn_open(c);
}

/* Writes what is left of the request. false when the connection broke. */
static bool conn_write(conn *c)
{
    while (c->woff < g.req_len) {
        size_t left = g.req_len - c->woff;
        ssize_t n;
        if (c->ssl) {
            size_t w = 0;
            int r = SSL_write_ex(c->ssl, g.req + c->woff, left, &w);
            if (r <= 0) {
                int e = SSL_get_error(c->ssl, r);
                if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
                    arm(c, true);
                    return true;
                }
                return false;
            }
            n = (ssize_t)w;
        } else {
            n = send(c->fd, g.req + c->woff, left, MSG_NOSIGNAL);
            if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                    arm(c, true);
                    return true;
                }
                return false;
            }
        }
        c->woff += (size_t)n;
    }
    if (c->want_out)
        arm(c, false);
    return true;
}

static void send_on(conn *c, uint64_t sched)
{
    c->state = C_BUSY;
    c->sched_ns = sched;
    c->woff = 0;
    c->rlen = 0;
    g.sent++;
    if (!conn_write(c))
        conn_fail(c);
}

/* The length of a complete response at the head of c->rbuf, 0 if not yet
 * complete, -1 if malformed; *status set when complete. */
static long response_len(conn *c, int *status)
{
    char *end = memmem(c->rbuf, c->rlen, "\r\n\r\n", 4);
    if (!end)
        return c->rlen > 65536 ? -1 : 0;
    if (c->rlen < 12 || strncmp(c->rbuf, "HTTP/1.", 7) != 0)
        return -1;
    *status = atoi(c->rbuf + 9);
    long clen = -1;
    for (char *line = memchr(c->rbuf, '\n', (size_t)(end - c->rbuf)); line && line < end;
         line = memchr(line + 1, '\n', (size_t)(end - line))) {
        if (strncasecmp(line + 1, "content-length:", 15) == 0)
            clen = strtol(line + 16, NULL, 10);
    }
    if (clen < 0)
        return -1; /* the servers measured always send Content-Length */
    long total = (long)(end - c->rbuf) + 4 + clen;
    if (total > (long)RBUF_MAX)
        return -1;
    return (long)c->rlen >= total ? total : 0;
}

static void on_response(conn *c, int status, long len)
{
    uint64_t t = now_ns();
    g.completed++;
    if (status < 200 || status > 299)
        g.non2xx++;
    else if (g.expect) {
        char *body = memmem(c->rbuf, (size_t)len, "\r\n\r\n", 4) + 4;
        if (!memmem(body, (size_t)(c->rbuf + len - body), g.expect, strlen(g.expect)))
            g.unexpected++;
    }
    if (c->sched_ns >= g.t_warm && c->sched_ns < g.t_end)
        hist_add(&g.hist, t - c->sched_ns);
    if (t >= g.t_warm && t < g.t_end)
        g.in_window_done++;
    memmove(c->rbuf, c->rbuf + len, c->rlen - (size_t)len);
    c->rlen -= (size_t)len;
    c->state = C_IDLE;
    g.idle[g.n_idle++] = (int)(c - g.conns);
}

static void conn_read(conn *c)
{
    for (;;) {
        if (c->rcap - c->rlen < 16384) {
            size_t ncap = c->rcap ? c->rcap * 2 : 65536;
            if (ncap > RBUF_MAX * 2) {
                conn_fail(c);
                return;
            }
            char *nb = realloc(c->rbuf, ncap);
            if (!nb)
                die("out of memory");
            c->rbuf = nb;
            c->rcap = ncap;
        }
        ssize_t n;
        if (c->ssl) {
            size_t r = 0;
            int rc = SSL_read_ex(c->ssl, c->rbuf + c->rlen, c->rcap - c->rlen, &r);
            if (rc <= 0) {
                int e = SSL_get_error(c->ssl, rc);
                if (e == SSL_ERROR_WANT_READ)
                    break;
                if (e == SSL_ERROR_WANT_WRITE) {
                    arm(c, true);
                    break;
                }
                conn_fail(c);
                return;
            }
            n = (ssize_t)r;
        } else {
            n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                break;
            if (n <= 0) {
                conn_fail(c);
                return;
            }
        }
        c->rlen += (size_t)n;
    }
    int status = 0;
    long len;
    while (c->rlen > 0 && (len = response_len(c, &status)) != 0) {
        if (len < 0 || c->state != C_BUSY) {
            conn_fail(c);
            return;
        }
        on_response(c, status, len);
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_loadgen --url http[s]://HOST:PORT/PATH --body FILE --rate R "
                    "[--conns N] [--duration S] [--warmup S] [--expect TEXT]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    char *url = NULL;
    const char *body_file = NULL;
    double rate = 0, duration = 2, warmup = 0.5;
    int conns = 16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        if (strcmp(a, "--url") == 0)
            url = argv[++i];
        else if (strcmp(a, "--body") == 0)
            body_file = argv[++i];
        else if (strcmp(a, "--rate") == 0)
            rate = atof(argv[++i]);
        else if (strcmp(a, "--conns") == 0)
            conns = atoi(argv[++i]);
        else if (strcmp(a, "--duration") == 0)
            duration = atof(argv[++i]);
        else if (strcmp(a, "--warmup") == 0)
            warmup = atof(argv[++i]);
        else if (strcmp(a, "--expect") == 0)
            g.expect = argv[++i];
        else
            usage();
    }
    if (!url || !body_file || rate <= 0 || conns < 1 || conns > 4096 || duration <= 0 || warmup < 0)
        usage();
    parse_url(url);
    size_t body_len;
    char *body = read_file(body_file, &body_len);
    if (!body)
        die("cannot read --body");
    char head[1024];
    int hl = snprintf(head, sizeof head,
                      "POST %s HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      g.path, g.host, g.port, body_len);
    g.req_len = (size_t)hl + body_len;
    g.req = malloc(g.req_len);
    if (!g.req)
        die("out of memory");
    memcpy(g.req, head, (size_t)hl);
    memcpy(g.req + hl, body, body_len);
    free(body);

    /* Sleeps end on time: the default 50 us timer slack is the size of
     * the gaps being scheduled. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    if (g.tls) {
        g.ctx = SSL_CTX_new(TLS_client_method());
        if (!g.ctx)
            die("SSL_CTX_new");
        SSL_CTX_set_verify(g.ctx, SSL_VERIFY_NONE, NULL); /* a throwaway bench certificate */
    }
    g.epfd = epoll_create1(0);
    g.n_conns = conns;
    g.conns = calloc((size_t)conns, sizeof *g.conns);
    g.idle = calloc((size_t)conns, sizeof *g.idle);
    if (!g.conns || !g.idle)
        die("out of memory");
    for (int i = 0; i < conns; i++)
        conn_open(&g.conns[i]);

    const double interval = 1e9 / rate;
    const uint64_t t0 = now_ns() + 1000000;
    g.t_warm = t0 + (uint64_t)(warmup * 1e9);
    g.t_end = g.t_warm + (uint64_t)(duration * 1e9);
    uint64_t next = 0; /* index of the next request to send */
    struct epoll_event evs[256];
    for (;;) {
        uint64_t now = now_ns();
        /* Every request due by now, on idle connections, oldest first. */
        for (;;) {
            uint64_t sched = t0 + (uint64_t)((double)next * interval);
            if (sched > now || sched >= g.t_end || g.n_idle == 0)
                break;
            conn *c = &g.conns[g.idle[--g.n_idle]];
            next++;
            send_on(c, sched);
        }
        uint64_t next_sched = t0 + (uint64_t)((double)next * interval);
        bool sending_done = next_sched >= g.t_end;
        if (sending_done && g.n_idle == g.n_conns)
            break;
        if (now >= g.t_end + DRAIN_NS)
            break;
        struct timespec ts = {0, 0};
        if (!sending_done && g.n_idle > 0 && next_sched > now) {
            uint64_t d = next_sched - now;
            ts.tv_sec = (time_t)(d / 1000000000ull);
            ts.tv_nsec = (long)(d % 1000000000ull);
        } else if (sending_done || g.n_idle == 0) {
            ts.tv_nsec = 1000000; /* waiting for responses only */
        }
        int n = epoll_pwait2(g.epfd, evs, 256, &ts, NULL);
        if (n < 0 && errno != EINTR)
            die("epoll_pwait2");
        for (int i = 0; i < n; i++) {
            conn *c = &g.conns[evs[i].data.u32];
            if (c->state == C_DEAD)
                continue;
            if ((evs[i].events & EPOLLOUT) && c->state == C_BUSY && c->woff < g.req_len) {
                if (!conn_write(c)) {
                    conn_fail(c);
                    continue;
                }
            }
            if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                conn_read(c);
        }
    }
    uint64_t t_stop = now_ns();
    /* Requests of the window never sent, or sent and never answered, enter
     * the histogram with the time they have waited: a lower bound. */
    uint64_t incomplete = 0;
    for (int i = 0; i < g.n_conns; i++) {
        conn *c = &g.conns[i];
        if (c->state == C_BUSY && c->sched_ns >= g.t_warm && c->sched_ns < g.t_end) {
            hist_add(&g.hist, t_stop - c->sched_ns);
            incomplete++;
        }
    }
    for (;; next++) {
        uint64_t sched = t0 + (uint64_t)((double)next * interval);
        if (sched >= g.t_end)
            break;
        if (sched >= g.t_warm) {
            hist_add(&g.hist, t_stop - sched);
            incomplete++;
        }
    }
    uint64_t offered_n = 0;
    for (uint64_t k = 0;; k++) {
        uint64_t sched = t0 + (uint64_t)((double)k * interval);
        if (sched >= g.t_end)
            break;
        if (sched >= g.t_warm)
            offered_n++;
    }
    double achieved = (double)g.in_window_done / duration;
    double us = 1e-3;
    printf("offered %.0f/s over %d connections (%s), %.1f s after %.1f s warm-up: "
           "achieved %.0f/s (%llu responses in the window, %llu requests scheduled in it)\n",
           rate, conns, g.tls ? "TLS" : "plain", duration, warmup, achieved,
           (unsigned long long)g.in_window_done, (unsigned long long)offered_n);
    printf("latency from scheduled time: p50 %.0f us, p90 %.0f us, p99 %.0f us, p99.9 %.0f us, "
           "max %.0f us; non-2xx %llu, errors %llu, incomplete %llu%s\n",
           hist_quantile(&g.hist, 0.5) * us, hist_quantile(&g.hist, 0.9) * us,
           hist_quantile(&g.hist, 0.99) * us, hist_quantile(&g.hist, 0.999) * us,
           g.hist.max * us, (unsigned long long)g.non2xx, (unsigned long long)g.errors,
           (unsigned long long)incomplete, g.unexpected ? " (some 2xx bodies lacked --expect)" : "");
    printf("LOADGEN %.0f %.0f %llu %llu %llu %llu %llu %.1f %.1f %.1f %.1f %.1f\n", rate, achieved,
           (unsigned long long)g.sent, (unsigned long long)g.completed,
           (unsigned long long)(g.non2xx + g.unexpected), (unsigned long long)g.errors,
           (unsigned long long)incomplete, hist_quantile(&g.hist, 0.5) * us,
           hist_quantile(&g.hist, 0.9) * us, hist_quantile(&g.hist, 0.99) * us,
           hist_quantile(&g.hist, 0.999) * us, g.hist.max * us);
    for (int i = 0; i < g.n_conns; i++) {
        if (g.conns[i].fd >= 0)
            conn_close(&g.conns[i]);
        free(g.conns[i].rbuf);
    }
    free(g.conns);
    free(g.idle);
    free(g.req);
    SSL_CTX_free(g.ctx);
    close(g.epfd);
    return 0;
}
