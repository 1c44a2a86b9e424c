/* test_hreq.c - the request reader (io/hreq.h) row by row: each row's bytes
 * cross a real 127.0.0.1 TCP connection in pieces or byte by byte, and what
 * the callbacks saw is compared with the row: pipelining, bodies, chunked
 * framing, limits, keep-alive, pauses. */
/* cmocka.h needs these before it */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/hreq.h"
#include "loopback.h"

#define MAX_PIECES 6

typedef struct {
    const char *name;
    const char *pieces[MAX_PIECES]; /* sent one by one; NULL ends */
    int bytewise;                   /* send every byte alone instead */
    int pause;                      /* on_request pauses; the test resumes */
    td_hreq_limits lim;             /* zero: the defaults below */
    const char *want;               /* one line per request, as seen() writes it */
    td_hreq_state want_state;
    int want_status; /* with TD_HREQ_ERROR */
} row;

static const td_hreq_limits defaults = {
    .max_url = 256, .max_header_bytes = 1024, .max_headers = 16, .max_body = 64};

typedef struct {
    char log[2048];
    size_t len;
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

static int on_head(td_hreq *r, void *user)
{
    if (r->expect_continue)
        logf_(user, "(100) ");
    return 0;
}

/* "METHOD target [name=value,...] n:body keep|close" */
static int on_request(td_hreq *r, void *user)
{
    transcript *t = user;
    logf_(t, "%s %s [", td_hreq_method(r), r->url.p);
    for (size_t i = 0; i < r->hdrs.n; i++)
        logf_(t, "%s%s=%s", i ? "," : "", r->hdrs.buf.p + r->hdrs.ix[i].name_off,
              r->hdrs.buf.p + r->hdrs.ix[i].value_off);
    logf_(t, "] %zu:%.*s %s\n", r->body.len, (int)r->body.len, r->body.p ? r->body.p : "",
          r->keep_alive ? "keep" : "close");
    return 0;
}

static int on_request_pause(td_hreq *r, void *user)
{
    on_request(r, user);
    return 1;
}

static const td_hreq_callbacks go_on = {.on_head = on_head, .on_request = on_request};
static const td_hreq_callbacks pausing = {.on_head = on_head, .on_request = on_request_pause};

/* Feeds what arrived, resuming after each pause as a server that answered
 * would. Returns 0 once the reader takes no more. */
static int feed(td_hreq *r, const char *buf, size_t n)
{
    while (n) {
        size_t used = td_hreq_feed(r, buf, n);
        buf += used;
        n -= used;
        if (td_hreq_status(r) == TD_HREQ_PAUSED)
            td_hreq_resume(r);
        else if (td_hreq_status(r) != TD_HREQ_MORE)
            return 0;
    }
    return 1;
}

static void run_row(const row *w)
{
    td_hreq r;
    transcript t = {{0}, 0};
    td_hreq_limits lim = w->lim.max_url ? w->lim : defaults;
    td_hreq_init(&r, &lim, w->pause ? &pausing : &go_on, &t);
    int wfd, rfd;
    loopback_pair(&wfd, &rfd);
    int open = 1;
    char buf[8192];
    for (size_t i = 0; open && i < MAX_PIECES && w->pieces[i]; i++) {
        const char *p = w->pieces[i];
        size_t n = strlen(p);
        size_t step = w->bytewise ? 1 : n;
        for (size_t off = 0; open && off < n; off += step) {
            size_t len = n - off < step ? n - off : step;
            loopback_send(wfd, p + off, len);
            for (size_t got = 0; open && got < len;) {
                size_t k = loopback_recv(rfd, buf, sizeof buf < len - got ? sizeof buf : len - got);
                assert_true(k > 0);
                got += k;
                open = feed(&r, buf, k);
            }
        }
    }
    close(wfd);
    close(rfd);
    if (strcmp(t.log, w->want) != 0)
        fail_msg("%s: saw\n%s\nwant\n%s", w->name, t.log, w->want);
    if (td_hreq_status(&r) != w->want_state)
        fail_msg("%s: state %d, want %d (%d %s)", w->name, td_hreq_status(&r), w->want_state,
                 r.err_status, r.err_text ? r.err_text : "");
    if (w->want_state == TD_HREQ_ERROR && r.err_status != w->want_status)
        fail_msg("%s: status %d (%s), want %d", w->name, r.err_status, r.err_text, w->want_status);
    td_hreq_fini(&r);
}

#define GET(path) "GET " path " HTTP/1.1\r\nHost: x\r\n\r\n"
#define POST(body) "POST /p HTTP/1.1\r\nContent-Length: " #body "\r\n\r\n"

static const row rows[] = {
    {"one GET", {GET("/a?b=1")}, 0, 0, {0}, "GET /a?b=1 [Host=x] 0: keep\n", TD_HREQ_MORE, 0},
    {"three pipelined in one piece",
     {GET("/1") GET("/2") GET("/3")},
     0, 0, {0},
     "GET /1 [Host=x] 0: keep\nGET /2 [Host=x] 0: keep\nGET /3 [Host=x] 0: keep\n",
     TD_HREQ_MORE, 0},
    {"pipelined, pausing after each",
     {GET("/1") GET("/2"), GET("/3")},
     0, 1, {0},
     "GET /1 [Host=x] 0: keep\nGET /2 [Host=x] 0: keep\nGET /3 [Host=x] 0: keep\n",
     TD_HREQ_MORE, 0},
    {"byte by byte",
     {"POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello" GET("/n")},
     1, 0, {0},
     "POST /p [Content-Length=5] 5:hello keep\nGET /n [Host=x] 0: keep\n", TD_HREQ_MORE, 0},
    {"a half request waits", {"GET /a HTTP/1.1\r\nHo"}, 0, 0, {0}, "", TD_HREQ_MORE, 0},
    {"a body in pieces", {"POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhe", "llo"}, 0, 0, {0},
     "POST /p [Content-Length=5] 5:hello keep\n", TD_HREQ_MORE, 0},
    {"chunked",
     {"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=\"y\"\r\nde\r\n0\r\n\r\n"
      GET("/n")},
     0, 0, {0},
     "POST /c [Transfer-Encoding=chunked] 5:abcde keep\nGET /n [Host=x] 0: keep\n",
     TD_HREQ_MORE, 0},
    {"chunked byte by byte, with a trailer",
     {"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n"},
     1, 0, {0}, "POST /c [Transfer-Encoding=chunked] 3:abc keep\n", TD_HREQ_MORE, 0},
    {"chunked: bare LF after a size",
     {"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n"}, 0, 0, {0},
     "", TD_HREQ_ERROR, 400},
    {"chunked: no CRLF after the data",
     {"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY0\r\n\r\n"}, 0, 0, {0},
     "", TD_HREQ_ERROR, 400},
    {"chunked: a bad size", {"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"}, 0,
     0, {0}, "", TD_HREQ_ERROR, 400},
    {"chunked: over the body limit",
     {"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n41\r\n"
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n0\r\n\r\n"},
     0, 0, {0}, "", TD_HREQ_ERROR, 413},
    {"Content-Length over the body limit", {POST(65)}, 0, 0, {0}, "", TD_HREQ_ERROR, 413},
    {"value whitespace trimmed", {"GET / HTTP/1.1\r\nX-A:  v w \t \r\nX-B:\r\n\r\n"}, 0, 0, {0},
     "GET / [X-A=v w,X-B=] 0: keep\n", TD_HREQ_MORE, 0},
    {"a space in a field name", {"GET / HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n"}, 0, 0,
     {0}, "", TD_HREQ_ERROR, 400},
    {"a control byte in a value", {"GET / HTTP/1.1\r\nX-A: a\001b\r\n\r\n"}, 0, 0, {0}, "",
     TD_HREQ_ERROR, 400},
    {"too many fields",
     {"GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n"},
     0, 0, {.max_url = 64, .max_header_bytes = 1024, .max_headers = 2, .max_body = 64},
     "", TD_HREQ_ERROR, 431},
    {"header bytes over the limit",
     {"GET / HTTP/1.1\r\nX-Long: 0123456789012345678901234567890123456789\r\n\r\n"},
     0, 0, {.max_url = 64, .max_header_bytes = 32, .max_headers = 8, .max_body = 64},
     "", TD_HREQ_ERROR, 431},
    {"target over the limit", {"GET /0123456789012345678901234567890123456789 HTTP/1.1\r\n\r\n"},
     0, 0, {.max_url = 16, .max_header_bytes = 1024, .max_headers = 8, .max_body = 64},
     "", TD_HREQ_ERROR, 414},
    {"HTTP/2.0", {"GET / HTTP/2.0\r\n\r\n"}, 0, 0, {0}, "", TD_HREQ_ERROR, 505},
    {"Transfer-Encoding in HTTP/1.0",
     {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"}, 0, 0, {0}, "",
     TD_HREQ_ERROR, 400},
    {"two different Content-Lengths",
     {"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"}, 0, 0, {0}, "",
     TD_HREQ_ERROR, 400},
    {"garbage", {"GARBAGE\r\n\r\n"}, 0, 0, {0}, "", TD_HREQ_ERROR, 400},
    {"HTTP/1.0 closes", {"GET / HTTP/1.0\r\n\r\n"}, 0, 0, {0}, "GET / [] 0: close\n",
     TD_HREQ_MORE, 0},
    {"HTTP/1.0 with keep-alive", {"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"}, 0, 0, {0},
     "GET / [Connection=keep-alive] 0: keep\n", TD_HREQ_MORE, 0},
    {"Connection: close", {"GET / HTTP/1.1\r\nConnection: close\r\n\r\n"}, 0, 0, {0},
     "GET / [Connection=close] 0: close\n", TD_HREQ_MORE, 0},
    {"Expect: 100-continue with a body",
     {"POST /p HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n", "ok"}, 0, 0,
     {0}, "(100) POST /p [Expect=100-continue,Content-Length=2] 2:ok keep\n", TD_HREQ_MORE, 0},
    {"Expect without a body", {"GET / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n"}, 0, 0, {0},
     "GET / [Expect=100-continue] 0: keep\n", TD_HREQ_MORE, 0},
    {"an upgrade stops the reader",
     {"GET /ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n\x81\x00"}, 0, 0,
     {0}, "GET /ws [Connection=Upgrade,Upgrade=websocket] 0: close\n", TD_HREQ_UPGRADE, 0},
};

static void test_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        run_row(&rows[i]);
}

/* A refusal from on_head is the reader's error, with the caller's status. */
static int refuse_head(td_hreq *r, void *user)
{
    (void)user;
    return td_hreq_header(r, "x-no") ? 403 : 0;
}

static void test_head_refusal(void **state)
{
    (void)state;
    static const td_hreq_callbacks cb = {.on_head = refuse_head, .on_request = on_request};
    transcript t = {{0}, 0};
    td_hreq r;
    td_hreq_init(&r, &defaults, &cb, &t);
    static const char in[] = GET("/ok") "GET /no HTTP/1.1\r\nX-No: 1\r\n\r\n" GET("/never");
    size_t used = td_hreq_feed(&r, in, sizeof in - 1);
    assert_true(used < sizeof in - 1);
    assert_int_equal(td_hreq_status(&r), TD_HREQ_ERROR);
    assert_int_equal(r.err_status, 403);
    assert_string_equal(t.log, "GET /ok [Host=x] 0: keep\n");
    assert_int_equal(td_hreq_feed(&r, in, 4), 0); /* nothing more is read */
    td_hreq_fini(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_head_refusal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
