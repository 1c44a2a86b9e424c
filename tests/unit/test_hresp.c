/* test_hresp.c - the response reader (io/hresp.h) row by row: each row's
 * bytes cross a real 127.0.0.1 TCP connection in pieces or byte by byte,
 * maybe followed by the close: lengths, chunked and close-delimited bodies,
 * 1xx, HEAD, pipelined answers, limits, streaming with pauses. */
/* cmocka.h needs these before it */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/hresp.h"
#include "loopback.h"

#define MAX_PIECES 6

enum { COLLECT, STREAM, STREAM_PAUSING };

typedef struct {
    const char *name;
    const char *pieces[MAX_PIECES]; /* sent one by one; NULL ends */
    int bytewise;                   /* send every byte alone instead */
    int close_after;                /* the server closes after the pieces */
    int head;                       /* the request was HEAD */
    int mode;                       /* COLLECT, STREAM or STREAM_PAUSING */
    const char *want;               /* one line per complete response */
    td_hresp_state want_state;      /* after the last byte (and the close) */
} row;

typedef struct {
    char log[2048];
    size_t len;
    char body[256];
    size_t body_len;
} transcript;

static void logf_(transcript *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->log + t->len, sizeof t->log - t->len, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof t->log - t->len);
    t->len += (size_t)n;
}

static int on_body(td_hresp *r, const char *at, size_t n, void *user)
{
    transcript *t = user;
    (void)r;
    assert_true(n <= sizeof t->body - t->body_len);
    memcpy(t->body + t->body_len, at, n);
    t->body_len += n;
    return 0;
}

/* Pauses after every piece of the body: the test resumes. */
static int on_body_pause(td_hresp *r, const char *at, size_t n, void *user)
{
    on_body(r, at, n, user);
    return 1;
}

static const td_hresp_callbacks collect = {0};
static const td_hresp_callbacks stream = {.on_body = on_body};
static const td_hresp_callbacks stream_pausing = {.on_body = on_body_pause};

static const td_hresp_limits limits = {.max_header_bytes = 256, .max_headers = 4, .max_body = 16};

/* "STATUS [name=value,...] n:body keep|close" */
static void log_done(td_hresp *r, transcript *t)
{
    const char *body = r->cb->on_body ? t->body : (r->body.p ? r->body.p : "");
    size_t n = r->cb->on_body ? t->body_len : r->body.len;
    logf_(t, "%d [", r->status);
    for (size_t i = 0; i < r->hdrs.n; i++)
        logf_(t, "%s%s=%s", i ? "," : "", r->hdrs.buf.p + r->hdrs.ix[i].name_off,
              r->hdrs.buf.p + r->hdrs.ix[i].value_off);
    logf_(t, "] %zu:%.*s %s\n", n, (int)n, body, r->keep_alive ? "keep" : "close");
    t->body_len = 0;
}

/* Feeds what arrived: a complete response is logged and the next one
 * expected, a pause resumed. Returns 0 once the reader takes no more. */
static int feed(td_hresp *r, transcript *t, const char *buf, size_t n, int head)
{
    while (n) {
        size_t used = td_hresp_feed(r, buf, n);
        buf += used;
        n -= used;
        switch (td_hresp_status(r)) {
        case TD_HRESP_DONE:
            log_done(r, t);
            td_hresp_start(r, head);
            break;
        case TD_HRESP_PAUSED:
            td_hresp_resume(r);
            break;
        case TD_HRESP_ERROR:
            return 0;
        case TD_HRESP_MORE:
            break;
        }
    }
    return 1;
}

static void send_pieces(const row *w, int wfd, int rfd, td_hresp *r, transcript *t, int *open)
{
    char buf[4096];
    for (size_t i = 0; *open && i < MAX_PIECES && w->pieces[i]; i++) {
        const char *p = w->pieces[i];
        size_t n = strlen(p);
        size_t step = w->bytewise ? 1 : n;
        for (size_t off = 0; *open && off < n; off += step) {
            size_t len = n - off < step ? n - off : step;
            loopback_send(wfd, p + off, len);
            for (size_t got = 0; *open && got < len;) {
                size_t k = loopback_recv(rfd, buf, sizeof buf < len - got ? sizeof buf : len - got);
                assert_true(k > 0);
                got += k;
                *open = feed(r, t, buf, k, w->head);
            }
        }
    }
}

static void run_row(const row *w)
{
    static const td_hresp_callbacks *const cbs[] = {&collect, &stream, &stream_pausing};
    td_hresp r;
    transcript t = {{0}, 0, {0}, 0};
    td_hresp_init(&r, &limits, cbs[w->mode], &t);
    td_hresp_start(&r, w->head);
    int wfd, rfd, open = 1;
    loopback_pair(&wfd, &rfd);
    send_pieces(w, wfd, rfd, &r, &t, &open);
    if (w->close_after && open) {
        close(wfd);
        wfd = -1;
        char c;
        assert_int_equal(loopback_recv(rfd, &c, 1), 0);
        td_hresp_eof(&r);
        if (td_hresp_status(&r) == TD_HRESP_DONE)
            log_done(&r, &t);
    }
    if (wfd >= 0)
        close(wfd);
    close(rfd);
    if (strcmp(t.log, w->want) != 0)
        fail_msg("%s: saw\n%s\nwant\n%s", w->name, t.log, w->want);
    if (td_hresp_status(&r) != w->want_state)
        fail_msg("%s: state %d, want %d (%s)", w->name, td_hresp_status(&r), w->want_state,
                 r.err_text ? r.err_text : "");
    td_hresp_fini(&r);
}

#define OK5 "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
#define CHUNKED "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"

static const row rows[] = {
    {"Content-Length", {OK5}, 0, 0, 0, COLLECT, "200 [Content-Length=5] 5:hello keep\n",
     TD_HRESP_MORE},
    {"Content-Length byte by byte, streamed", {OK5}, 1, 0, 0, STREAM,
     "200 [Content-Length=5] 5:hello keep\n", TD_HRESP_MORE},
    {"two pipelined in one piece", {OK5 "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"},
     0, 0, 0, COLLECT, "200 [Content-Length=5] 5:hello keep\n404 [Content-Length=0] 0: keep\n",
     TD_HRESP_MORE},
    {"chunked", {CHUNKED "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"}, 0, 0, 0, COLLECT,
     "200 [Transfer-Encoding=chunked] 5:abcde keep\n", TD_HRESP_MORE},
    {"chunked byte by byte, pausing at every piece",
     {CHUNKED "3\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n"}, 1, 0, 0, STREAM_PAUSING,
     "200 [Transfer-Encoding=chunked] 5:abcde keep\n", TD_HRESP_MORE},
    {"chunked in pieces", {CHUNKED "3\r\na", "bc\r\n0\r", "\n\r\n"}, 0, 0, 0, STREAM,
     "200 [Transfer-Encoding=chunked] 3:abc keep\n", TD_HRESP_MORE},
    {"delimited by the close", {"HTTP/1.1 200 OK\r\n\r\nhel", "lo"}, 0, 1, 0, COLLECT,
     "200 [] 5:hello close\n", TD_HRESP_DONE},
    {"HTTP/1.0 delimited by the close, streamed", {"HTTP/1.0 200 OK\r\nX-A: b \r\n\r\nhello"}, 0,
     1, 0, STREAM, "200 [X-A=b] 5:hello close\n", TD_HRESP_DONE},
    {"100 Continue first", {"HTTP/1.1 100 Continue\r\n\r\n", OK5}, 0, 0, 0, COLLECT,
     "200 [Content-Length=5] 5:hello keep\n", TD_HRESP_MORE},
    {"HEAD: a length and no body", {"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n" OK5}, 0, 0,
     1, COLLECT, "200 [Content-Length=99] 0: keep\n200 [Content-Length=5] 0: keep\n",
     TD_HRESP_ERROR},
    {"204 has no body", {"HTTP/1.1 204 No Content\r\n\r\n" OK5}, 0, 0, 0, COLLECT,
     "204 [] 0: keep\n200 [Content-Length=5] 5:hello keep\n", TD_HRESP_MORE},
    {"Connection: close", {"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx"},
     0, 0, 0, COLLECT, "200 [Connection=close,Content-Length=1] 1:x close\n", TD_HRESP_MORE},
    {"cut short by the close", {"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhello"}, 0, 1, 0,
     COLLECT, "", TD_HRESP_ERROR},
    {"a close before any byte", {NULL}, 0, 1, 0, COLLECT, "", TD_HRESP_MORE},
    {"a head cut by the close", {"HTTP/1.1 200 OK\r\nContent-Le"}, 0, 1, 0, COLLECT, "",
     TD_HRESP_ERROR},
    {"garbage", {"SMTP ready\r\n\r\n"}, 0, 0, 0, COLLECT, "", TD_HRESP_ERROR},
    {"a status of one digit", {"HTTP/1.1 2 OK\r\nContent-Length: 0\r\n\r\n"}, 0, 0, 0, COLLECT,
     "", TD_HRESP_ERROR},
    {"a bad chunk size", {CHUNKED "zz\r\n"}, 0, 0, 0, COLLECT, "", TD_HRESP_ERROR},
    {"too many fields", {"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n\r\n"}, 0,
     0, 0, COLLECT, "", TD_HRESP_ERROR},
    {"header bytes over the limit",
     {"HTTP/1.1 200 OK\r\nX: "
      "0123456789012345678901234567890123456789012345678901234567890123456789"
      "0123456789012345678901234567890123456789012345678901234567890123456789"
      "0123456789012345678901234567890123456789012345678901234567890123456789"
      "0123456789012345678901234567890123456789012345678901234567890123456789\r\n\r\n"},
     0, 0, 0, COLLECT, "", TD_HRESP_ERROR},
    {"a collected body over the limit",
     {"HTTP/1.1 200 OK\r\nContent-Length: 17\r\n\r\n01234567890123456"}, 0, 0, 0, COLLECT, "",
     TD_HRESP_ERROR},
    {"a streamed body passes the collect limit",
     {"HTTP/1.1 200 OK\r\nContent-Length: 17\r\n\r\n01234567890123456"}, 0, 0, 0, STREAM,
     "200 [Content-Length=17] 17:01234567890123456 keep\n", TD_HRESP_MORE},
};

static void test_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        run_row(&rows[i]);
}

/* The error names why, and a limit on a collected body says so. */
static void test_errors_say_why(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int too_big;
        const char *why;
    } cases[] = {
        {"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n01234567890123456789", 1, "too large"},
        {"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n\r\n", 0, "headers"},
        {"NOT HTTP\r\n", 0, "invalid"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        td_hresp r;
        td_hresp_init(&r, &limits, &collect, NULL);
        td_hresp_feed(&r, cases[i].in, strlen(cases[i].in));
        assert_int_equal(td_hresp_status(&r), TD_HRESP_ERROR);
        assert_int_equal(r.too_big, cases[i].too_big);
        assert_non_null(r.err_text);
        if (!strstr(r.err_text, cases[i].why))
            fail_msg("case %zu: \"%s\" does not say \"%s\"", i, r.err_text, cases[i].why);
        td_hresp_fini(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_errors_say_why),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
