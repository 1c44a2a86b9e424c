/* testredis.h - a real redis-server for unit tests: started on a free
 * loopback port below the kernel's ephemeral range (tests restart Redis on
 * it mid-run, and no client socket may be holding it as its own port),
 * stopped with a signal, and one inline command's first reply line.
 * Include after <cmocka.h>; one test binary, one Redis. */
#ifndef TENANTD_TESTREDIS_H
#define TENANTD_TESTREDIS_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MS
#define MS ((uint64_t)1000000)
#endif
#ifndef S
#define S ((uint64_t)1000000000)
#endif

static pid_t redis_pid = -1;
static int redis_port;
static char redis_addr[64];

static inline uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * S + (uint64_t)ts.tv_nsec;
}

static inline void sleep_ns(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / S), .tv_nsec = (long)(ns % S)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* ---- a real redis-server ---- */

static inline bool in_path(const char *prog)
{
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/bin:/bin";
    char buf[4096];
    while (*path) {
        size_t n = strcspn(path, ":");
        snprintf(buf, sizeof buf, "%.*s/%s", (int)n, path, prog);
        if (access(buf, X_OK) == 0)
            return true;
        path += n + (path[n] == ':');
    }
    return false;
}

/* A free port below the kernel's ephemeral range: Redis is restarted on it
 * mid-test, and a client socket must not be holding it as its own port. */
static inline int free_port(void)
{
    int lo = 32768;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d", &lo) != 1)
            lo = 32768;
        fclose(f);
    }
    if (lo <= 10001)
        lo = 32768;
    srand((unsigned)getpid() ^ (unsigned)mono_ns());
    for (int attempt = 0; attempt < 200; attempt++) {
        int port = 10000 + rand() % (lo - 10000);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(fd >= 0);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int rc = bind(fd, (struct sockaddr *)&a, sizeof a);
        close(fd);
        if (rc == 0)
            return port;
    }
    fail_msg("no free loopback port below %d", lo);
    return -1;
}

/* Sends one inline command and reads the first line of the reply into out.
 * false if Redis does not answer within 200 ms. */
static inline bool redis_cmd(const char *cmd, char *out, size_t n)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return false;
    struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)redis_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool ok = false;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        char line[512];
        int len = snprintf(line, sizeof line, "%s\r\n", cmd);
        if (write(fd, line, (size_t)len) == len) {
            size_t got = 0;
            while (got + 1 < n) {
                ssize_t r = read(fd, out + got, 1);
                if (r <= 0)
                    break;
                if (out[got] == '\n') {
                    ok = true;
                    break;
                }
                got++;
            }
            out[got] = '\0';
            if (got && out[got - 1] == '\r')
                out[got - 1] = '\0';
        }
    }
    close(fd);
    return ok;
}

static inline bool redis_ping(void)
{
    char buf[64];
    return redis_cmd("PING", buf, sizeof buf) && strcmp(buf, "+PONG") == 0;
}

/* Starts redis-server on redis_port and waits until it answers PING. */
static inline int redis_start(void)
{
    char port[16];
    snprintf(port, sizeof port, "%d", redis_port);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphan if the test dies */
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, STDOUT_FILENO);
        execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", "/tmp", (char *)NULL);
        _exit(127);
    }
    redis_pid = pid;
    for (uint64_t end = mono_ns() + 5 * S; mono_ns() < end; sleep_ns(10 * MS)) {
        if (redis_ping())
            return 0;
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            redis_pid = -1;
            fprintf(stderr, "redis-server exited before answering PING (status %d)\n", status);
            return -1;
        }
    }
    fprintf(stderr, "redis-server on port %d did not answer PING within 5 s\n", redis_port);
    return -1;
}

static inline void redis_stop(int sig)
{
    if (redis_pid > 0) {
        kill(redis_pid, sig);
        waitpid(redis_pid, NULL, 0);
        redis_pid = -1;
    }
}

/* cmocka group setup: Redis on a free port, or -1 naming what is missing. */
static inline int redis_group_setup(const char *test)
{
    if (!in_path("redis-server")) {
        fprintf(stderr, "%s: redis-server is not installed (not in PATH); these tests "
                        "need a real one: apt-get install -y redis-server\n", test);
        return -1;
    }
    redis_port = free_port();
    snprintf(redis_addr, sizeof redis_addr, "127.0.0.1:%d", redis_port);
    return redis_start();
}

static inline int redis_group_teardown(void **state)
{
    (void)state;
    redis_stop(SIGTERM);
    return 0;
}

#endif
