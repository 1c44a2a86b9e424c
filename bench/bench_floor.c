/* bench_floor.c - the physical floors the gateway benchmark compares
 * tenantd against, measured in the same run as the proxies.
 *
 *   bench_floor forward PORT UPSTREAM_PORT   byte forwarder: one upstream
 *       connection per client connection (opened at the client's first
 *       bytes), bytes copied both ways with one read and one write per
 *       direction per event, nothing parsed: the syscall floor of any
 *       HTTP/1.1 proxy without pipelining.
 *   bench_floor reject PORT                  canned 429: reads each request
 *       (end of headers + Content-Length, so a request split over reads or
 *       several in one read are handled) and answers a fixed keep-alive
 *       HTTP/1.1 429 with a small JSON body: the floor of a reject.
 *
 * One thread, one process, epoll, TCP_NODELAY on every socket like the
 * proxies, listening on 127.0.0.1. A closed or reset peer closes both sides
 * of its pair; nothing the peers send can crash it. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define IOBUF      65536
#define REQ_MAX    65536 /* a header section longer than this closes the connection */
#define MAX_EVENTS 256

/* tenantd's rate-limit 429 for the benchmark's abuser, byte for byte but
 * for a fixed Date (a real server formats it once a second). */
#define REPLY_BODY                                                                                 \
    "{\"error\":{\"message\":\"rate limit reached for tenant abuser; retry after 3 ms\",\"type\":" \
    "\"rate_limit_error\",\"code\":\"rate_limited\",\"param\":null,\"tenant\":\"abuser\","          \
    "\"retry_after_ms\":3,\"level\":\"tenant\"}}"
static const char REPLY[] = "HTTP/1.1 429 Too Many Requests\r\n"
                            "Date: Wed, 02 Dec 2026 21:30:01 GMT\r\n"
                            "Content-Type: application/json\r\n"
                            "Content-Length: 193\r\n"
                            "Retry-After: 1\r\n"
                            "retry-after-ms: 3\r\n"
                            "\r\n" REPLY_BODY;
_Static_assert(sizeof REPLY_BODY - 1 == 193, "Content-Length must match the body");

/* One socket of a pair. pend holds bytes waiting to be written to fd (the
 * peer's data a short write left, or the first request before the upstream
 * connect completed); while it is non-empty the peer is not read. */
struct end {
    int fd;
    int connecting;
    int is_client;
    struct pair *p;
    char *pend;
    size_t npend, opend;
    uint32_t events; /* the current epoll interest */
};

struct pair {
    struct end e[2]; /* 0 client, 1 upstream (forward mode) */
    int closed;
    struct pair *next_dead;
    /* reject mode: an unfinished request (REQ_MAX, allocated when needed) */
    char *in;
    size_t nin;
    size_t skip; /* body bytes of the current request still to discard */
};

static int ep;
static int mode_forward;
static struct sockaddr_in upstream;
static struct pair *dead;
static char iobuf[IOBUF];

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void set_nodelay_nonblock(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void want(struct end *e, uint32_t events)
{
    if (e->fd < 0 || e->events == events)
        return;
    struct epoll_event ev = {.events = events, .data.ptr = e};
    if (epoll_ctl(ep, EPOLL_CTL_MOD, e->fd, &ev) == 0)
        e->events = events;
}

/* Closes both sides; the pair is freed after the current batch of events,
 * which may still name it. */
static void close_pair(struct pair *p)
{
    if (p->closed)
        return;
    p->closed = 1;
    for (int i = 0; i < 2; i++) {
        if (p->e[i].fd >= 0)
            close(p->e[i].fd);
        p->e[i].fd = -1;
    }
    p->next_dead = dead;
    dead = p;
}

static void free_dead(void)
{
    while (dead) {
        struct pair *p = dead;
        dead = p->next_dead;
        free(p->e[0].pend);
        free(p->e[1].pend);
        free(p->in);
        free(p);
    }
}

/* Keeps buf[off..n) to be written to e later: e waits for EPOLLOUT and the
 * reader (e's peer, or e itself in reject mode) stops reading meanwhile. */
static int stash(struct end *e, const char *buf, size_t n)
{
    char *b = realloc(e->pend, e->npend - e->opend + n);
    if (!b)
        return -1;
    memmove(b, b + e->opend, e->npend - e->opend);
    memcpy(b + e->npend - e->opend, buf, n);
    e->pend = b;
    e->npend = e->npend - e->opend + n;
    e->opend = 0;
    return 0;
}

/* Writes n bytes to e, keeping what the socket does not take. -1 if the
 * peer is gone (EPIPE, ECONNRESET, ...). */
static int send_to(struct end *e, const char *buf, size_t n)
{
    ssize_t w = 0;
    if (!e->connecting && e->npend == 0) {
        w = write(e->fd, buf, n);
        if (w < 0) {
            if (errno != EAGAIN && errno != EINTR)
                return -1;
            w = 0;
        }
    }
    if ((size_t)w < n && stash(e, buf + w, n - (size_t)w) < 0)
        return -1;
    return 0;
}

static struct end *peer(struct end *e)
{
    return &e->p->e[e->is_client ? 1 : 0];
}

/* The interest of both ends of a forward pair from their state. */
static void rearm_forward(struct pair *p)
{
    for (int i = 0; i < 2; i++) {
        struct end *e = &p->e[i], *o = &p->e[1 - i];
        if (e->fd < 0)
            continue;
        uint32_t ev = 0;
        if (o->fd < 0 || (o->npend == 0 && !o->connecting))
            ev |= EPOLLIN;
        if (e->npend > e->opend || e->connecting)
            ev |= EPOLLOUT;
        want(e, ev);
    }
}

static int open_upstream(struct pair *p)
{
    struct end *u = &p->e[1];
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&upstream, sizeof upstream) < 0) {
        if (errno != EINPROGRESS) {
            close(fd);
            return -1;
        }
        u->connecting = 1;
    }
    u->fd = fd;
    u->events = EPOLLIN | (u->connecting ? EPOLLOUT : 0);
    struct epoll_event ev = {.events = u->events, .data.ptr = u};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
        return -1;
    return 0;
}

static void on_forward(struct end *e, uint32_t ev)
{
    struct pair *p = e->p;
    if (ev & EPOLLOUT) {
        if (e->connecting) {
            int err = 0;
            socklen_t len = sizeof err;
            if (getsockopt(e->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
                close_pair(p);
                return;
            }
            e->connecting = 0;
        }
        if (e->npend > e->opend) {
            ssize_t w = write(e->fd, e->pend + e->opend, e->npend - e->opend);
            if (w < 0 && errno != EAGAIN && errno != EINTR) {
                close_pair(p);
                return;
            }
            if (w > 0)
                e->opend += (size_t)w;
            if (e->opend == e->npend)
                e->opend = e->npend = 0;
        }
    }
    if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        struct end *o = peer(e);
        if (o->fd >= 0 && (o->npend > 0 || o->connecting)) {
            /* Backpressure: the peer has not taken the last bytes yet. */
            if (ev & (EPOLLHUP | EPOLLERR)) {
                close_pair(p);
                return;
            }
        } else {
            ssize_t n = read(e->fd, iobuf, sizeof iobuf);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
                close_pair(p);
                return;
            }
            if (n > 0) {
                if (o->fd < 0 && open_upstream(p) < 0) {
                    close_pair(p);
                    return;
                }
                if (send_to(o, iobuf, (size_t)n) < 0) {
                    close_pair(p);
                    return;
                }
            }
        }
    }
    rearm_forward(p);
}

/* The length of "Content-Length" in the header section h[0..n) (which ends
 * in CRLF CRLF); 0 when absent, -1 when malformed or chunked. */
static long content_length(const char *h, size_t n)
{
    long cl = 0;
    const char *end = h + n, *line = memchr(h, '\n', n);
    while (line && line + 1 < end) {
        line++;
        size_t left = (size_t)(end - line);
        if (left > 15 && strncasecmp(line, "content-length:", 15) == 0) {
            const char *v = line + 15;
            while (v < end && (*v == ' ' || *v == '\t'))
                v++;
            if (v >= end || *v < '0' || *v > '9')
                return -1;
            cl = 0;
            while (v < end && *v >= '0' && *v <= '9') {
                cl = cl * 10 + (*v++ - '0');
                if (cl > (1L << 40))
                    return -1;
            }
        } else if (left > 18 && strncasecmp(line, "transfer-encoding:", 18) == 0) {
            return -1;
        }
        line = memchr(line, '\n', left);
    }
    return cl;
}

static void on_reject(struct end *e, uint32_t ev)
{
    struct pair *p = e->p;
    if (ev & EPOLLOUT) {
        ssize_t w = write(e->fd, e->pend + e->opend, e->npend - e->opend);
        if (w < 0 && errno != EAGAIN && errno != EINTR) {
            close_pair(p);
            return;
        }
        if (w > 0)
            e->opend += (size_t)w;
        if (e->opend == e->npend)
            e->opend = e->npend = 0;
    }
    if ((ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) && e->npend == 0) {
        /* Read into the one shared buffer, as the proxies read into one per
         * worker; only an unfinished request is kept per connection. */
        ssize_t n = read(e->fd, iobuf, sizeof iobuf);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            close_pair(p);
            return;
        }
        char *buf = iobuf;
        size_t len = n > 0 ? (size_t)n : 0;
        if (p->nin) {
            if (p->nin + len > REQ_MAX) { /* a header section that does not end */
                close_pair(p);
                return;
            }
            memcpy(p->in + p->nin, iobuf, len);
            p->nin += len;
            buf = p->in;
            len = p->nin;
        }
        size_t off = 0, replies = 0;
        for (;;) {
            if (p->skip) {
                size_t k = len - off < p->skip ? len - off : p->skip;
                off += k;
                p->skip -= k;
                if (p->skip)
                    break;
            }
            char *hend = memmem(buf + off, len - off, "\r\n\r\n", 4);
            if (!hend)
                break;
            size_t hlen = (size_t)(hend + 4 - (buf + off));
            long cl = content_length(buf + off, hlen);
            if (cl < 0) {
                close_pair(p);
                return;
            }
            off += hlen;
            p->skip = (size_t)cl;
            replies++;
        }
        size_t rest = len - off;
        if (rest >= REQ_MAX || (rest && !p->in && !(p->in = malloc(REQ_MAX)))) {
            close_pair(p);
            return;
        }
        if (rest)
            memmove(p->in, buf + off, rest);
        p->nin = rest;
        if (replies) {
            char out[sizeof REPLY * 16];
            while (replies) {
                size_t k = replies < 16 ? replies : 16, len = 0;
                for (size_t i = 0; i < k; i++, len += sizeof REPLY - 1)
                    memcpy(out + len, REPLY, sizeof REPLY - 1);
                if (send_to(e, out, len) < 0) {
                    close_pair(p);
                    return;
                }
                replies -= k;
            }
        }
    }
    want(e, e->npend > e->opend ? EPOLLOUT : EPOLLIN);
}

static void on_accept(int lfd)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
        if (fd < 0)
            return; /* EAGAIN, or a transient error such as EMFILE */
        set_nodelay_nonblock(fd);
        struct pair *p = calloc(1, sizeof *p);
        if (!p) {
            close(fd);
            continue;
        }
        p->e[0] = (struct end){.fd = fd, .is_client = 1, .p = p, .events = EPOLLIN};
        p->e[1] = (struct end){.fd = -1, .p = p};
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &p->e[0]};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close_pair(p);
            free_dead();
        }
    }
}

static int parse_port(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 0 || v > 65535) {
        fprintf(stderr, "bench_floor: %s is not a port\n", s);
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "forward") == 0 && argc == 4) {
        mode_forward = 1;
        upstream.sin_family = AF_INET;
        upstream.sin_port = htons((uint16_t)parse_port(argv[3]));
        upstream.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else if (!(argc == 3 && strcmp(argv[1], "reject") == 0)) {
        fprintf(stderr, "usage: bench_floor forward PORT UPSTREAM_PORT | reject PORT\n"
                        "  listens on 127.0.0.1:PORT; forward copies bytes to and from "
                        "127.0.0.1:UPSTREAM_PORT,\n  reject answers every request with a "
                        "fixed keep-alive 429\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (lfd < 0)
        die("socket");
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)parse_port(argv[2])),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) < 0)
        die("bind");
    if (listen(lfd, 4096) < 0)
        die("listen");
    ep = epoll_create1(0);
    if (ep < 0)
        die("epoll_create1");
    static int lfd_tag;
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = &lfd_tag};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev) < 0)
        die("epoll_ctl");
    struct epoll_event evs[MAX_EVENTS];
    for (;;) {
        int n = epoll_wait(ep, evs, MAX_EVENTS, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            if (evs[i].data.ptr == &lfd_tag) {
                on_accept(lfd);
                continue;
            }
            struct end *e = evs[i].data.ptr;
            if (e->p->closed || e->fd < 0)
                continue;
            if (mode_forward)
                on_forward(e, evs[i].events);
            else
                on_reject(e, evs[i].events);
        }
        free_dead();
    }
}
