/* loopback.h - a connected pair of TCP sockets on 127.0.0.1 for the HTTP
 * reader tests: one end writes a row's pieces, the other reads each piece
 * as the kernel delivers it. Include after <cmocka.h>. */
#ifndef TENANTD_TEST_LOOPBACK_H
#define TENANTD_TEST_LOOPBACK_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Connects *w (the writer) to *r (the reader) over 127.0.0.1. */
static inline void loopback_pair(int *w, int *r)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(l >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &alen), 0);
    *w = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(*w >= 0);
    assert_int_equal(connect(*w, (struct sockaddr *)&a, sizeof a), 0);
    *r = accept(l, NULL, NULL);
    assert_true(*r >= 0);
    int one = 1;
    setsockopt(*w, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    close(l);
}

/* Writes all n bytes of p to fd. */
static inline void loopback_send(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        assert_true(k > 0);
        p += k;
        n -= (size_t)k;
    }
}

/* Reads what has arrived on fd (waiting up to 2 s for the first byte)
 * into buf; returns the count, 0 at the peer's close. */
static inline size_t loopback_recv(int fd, char *buf, size_t cap)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&pfd, 1, 2000), 1);
    ssize_t k = recv(fd, buf, cap, 0);
    assert_true(k >= 0);
    return (size_t)k;
}

#endif
