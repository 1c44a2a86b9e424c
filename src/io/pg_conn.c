/* pg_conn.c - connections of tenantd's PostgreSQL backends: the server's
 * printable name, and connect with every wait bounded (a dependency that
 * hangs must never hang tenantd). */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "io/pg_internal.h"

#define STR_(x)             #x
#define STR(x)              STR_(x)
#define TCP_USER_TIMEOUT_MS "10000"
#define SESSION_OPTIONS                                                                         \
    "-c statement_timeout=" STR(TD_PG_STATEMENT_TIMEOUT_MS) " -c lock_timeout=" STR(          \
        TD_PG_LOCK_TIMEOUT_MS)

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until c's socket is ready for events or deadline (mono_ms) passes:
 * > 0 ready, 0 timed out, < 0 error. */
static int wait_socket(PGconn *c, short events, int64_t deadline)
{
    struct pollfd pfd = {PQsocket(c), events, 0};
    if (pfd.fd < 0)
        return -1;
    for (;;) {
        int64_t left = deadline - mono_ms();
        int r = poll(&pfd, 1, left > 0 ? (int)left : 0);
        if (r >= 0 || errno != EINTR)
            return r;
    }
}

const char *td__pg_one_line(const char *msg, char *buf, size_t n)
{
    size_t k = 0;
    for (const char *p = msg ? msg : ""; *p && k + 1 < n; p++) {
        char c = *p == '\n' || *p == '\t' ? ' ' : *p;
        if (c == ' ' && (k == 0 || buf[k - 1] == ' '))
            continue;
        buf[k++] = c;
    }
    while (k && buf[k - 1] == ' ')
        k--;
    buf[k] = '\0';
    return buf;
}

td_status td__pg_name(const char *url, char *name, size_t n, td_err *err)
{
    char *msg = NULL;
    PQconninfoOption *opts = PQconninfoParse(url, &msg);
    if (!opts) {
        char line[200];
        td_status st = td_err_set(err, TD_EINVAL, "--database: not a PostgreSQL URL: %s",
                                  msg ? td__pg_one_line(msg, line, sizeof line) : "out of memory");
        PQfreemem(msg);
        return st;
    }
    const char *host = NULL, *port = NULL, *db = NULL, *user = NULL;
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val || !o->val[0])
            continue;
        if (strcmp(o->keyword, "host") == 0)
            host = o->val;
        else if (strcmp(o->keyword, "port") == 0)
            port = o->val;
        else if (strcmp(o->keyword, "dbname") == 0)
            db = o->val;
        else if (strcmp(o->keyword, "user") == 0)
            user = o->val; /* libpq's default database is the user's name */
    }
    snprintf(name, n, "PostgreSQL %s:%s/%s", host ? host : "localhost", port ? port : "5432",
             db     ? db
             : user ? user
                    : "(default)");
    PQconninfoFree(opts);
    return TD_OK;
}

/* The URL comes last among the parameters, so its own connect_timeout,
 * tcp_user_timeout, keepalives and options win over ours. Keepalives find
 * a peer gone silent while a reply is awaited, which neither timeout
 * covers; statement_timeout and lock_timeout bound the server's side. */
PGconn *td__pg_connect_start(const char *url)
{
    const char *const kw[] = {"connect_timeout",  "tcp_user_timeout", "keepalives_idle",
                              "keepalives_interval", "keepalives_count", "application_name",
                              "options",          "dbname",           NULL};
    const char *const val[] = {"3", TCP_USER_TIMEOUT_MS, "5", "2", "3", "tenantd",
                               SESSION_OPTIONS, url, NULL};
    PGconn *c = PQconnectStartParams(kw, val, 1);
    if (c && PQstatus(c) != CONNECTION_BAD)
        PQsetnonblocking(c, 1);
    return c;
}

int td__pg_connect_step(PGconn *c, int wait_ms)
{
    int64_t deadline = mono_ms() + wait_ms;
    PostgresPollingStatusType want = PGRES_POLLING_WRITING;
    if (PQstatus(c) == CONNECTION_OK)
        return 1;
    if (PQstatus(c) == CONNECTION_BAD)
        return -1;
    for (;;) {
        int r = wait_socket(c, want == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline);
        if (r < 0)
            return -1;
        if (r == 0)
            return 0;
        want = PQconnectPoll(c);
        if (want == PGRES_POLLING_OK)
            return 1;
        if (want == PGRES_POLLING_FAILED)
            return -1;
    }
}

PGconn *td__pg_connect(const char *url, const char *name, int timeout_ms, td_err *err)
{
    char line[200];
    PGconn *c = td__pg_connect_start(url);
    if (!c) {
        td_err_set(err, TD_ENOMEM, "%s: cannot connect: out of memory", name);
        return NULL;
    }
    int r = td__pg_connect_step(c, timeout_ms);
    if (r == 0)
        td_err_set(err, TD_EIO, "%s: cannot connect: no answer within %d ms", name, timeout_ms);
    else if (r < 0)
        td_err_set(err, TD_EIO, "%s: cannot connect: %s", name,
                   td__pg_one_line(PQerrorMessage(c), line, sizeof line));
    if (r != 1) {
        PQfinish(c);
        return NULL;
    }
    return c;
}

/* Sends what libpq holds for c before deadline: true when all went out. */
static bool flush_all(PGconn *c, int64_t deadline)
{
    int f;
    while ((f = PQflush(c)) == 1)
        if (wait_socket(c, POLLIN | POLLOUT, deadline) <= 0 || !PQconsumeInput(c))
            return false;
    return f == 0;
}

/* Reads until a result can be taken without blocking (or the connection
 * failed, which libpq then reports as a result): false on timeout. */
static bool await_result(PGconn *c, int64_t deadline)
{
    while (PQisBusy(c)) {
        int r = wait_socket(c, POLLIN, deadline);
        if (r == 0)
            return false;
        if (r < 0 || !PQconsumeInput(c))
            return !PQisBusy(c) || PQstatus(c) == CONNECTION_BAD;
    }
    return true;
}

/* No answer in time: the socket is shut down so that libpq sees the
 * connection end, then whatever it still holds is dropped. */
static void cut(PGconn *c)
{
    if (PQsocket(c) >= 0)
        shutdown(PQsocket(c), SHUT_RDWR);
    PQconsumeInput(c);
    for (int i = 0; i < 16 && !PQisBusy(c); i++) {
        PGresult *r = PQgetResult(c);
        if (!r)
            break;
        PQclear(r);
    }
}

PGresult *td__pg_exec(PGconn *c, const char *sql, int nparams, const char *const *p,
                      int timeout_ms)
{
    int64_t deadline = mono_ms() + timeout_ms;
    if (PQstatus(c) != CONNECTION_OK)
        return PQmakeEmptyPGresult(c, PGRES_FATAL_ERROR);
    int was = PQisnonblocking(c);
    PQsetnonblocking(c, 1);
    int sent = nparams > 0 || p ? PQsendQueryParams(c, sql, nparams, NULL, p, NULL, NULL, 0)
                                : PQsendQuery(c, sql);
    if (!sent) {
        PQsetnonblocking(c, was);
        return PQmakeEmptyPGresult(c, PGRES_FATAL_ERROR);
    }
    PGresult *last = NULL;
    if (!flush_all(c, deadline))
        goto timeout;
    for (;;) {
        if (!await_result(c, deadline))
            goto timeout;
        PGresult *r = PQgetResult(c);
        if (!r)
            break;
        /* the first error wins, as PQexec keeps it */
        if (last && PQresultStatus(last) == PGRES_FATAL_ERROR) {
            PQclear(r);
            continue;
        }
        PQclear(last);
        last = r;
    }
    PQsetnonblocking(c, was);
    return last ? last : PQmakeEmptyPGresult(c, PGRES_FATAL_ERROR);
timeout:
    PQclear(last);
    cut(c);
    PQsetnonblocking(c, was);
    return NULL;
}

const char *td__pg_res_msg(PGconn *c, const PGresult *r, int timeout_ms, char *buf, size_t n)
{
    if (!r) {
        snprintf(buf, n, "no answer within %d ms (the connection was cut)", timeout_ms);
        return buf;
    }
    const char *m = PQresultErrorMessage(r);
    td__pg_one_line(m && *m ? m : PQerrorMessage(c), buf, n);
    if (!*buf)
        snprintf(buf, n, "unexpected answer (%s)", PQresStatus(PQresultStatus(r)));
    return buf;
}
