/* pg_conn.c - connections of tenantd's PostgreSQL backends: the server's
 * printable name, and connect with every wait bounded (a dependency that
 * hangs must never hang tenantd). */
#include <stdio.h>
#include <string.h>

#include "io/pg_internal.h"

#define CONNECT_TIMEOUT_S   "5"
#define TCP_USER_TIMEOUT_MS "10000"
#define STATEMENT_TIMEOUT   "SET statement_timeout = 5000"

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
 * tcp_user_timeout and keepalives win over ours. Keepalives find a peer
 * gone silent while a reply is awaited, which neither timeout covers;
 * statement_timeout bounds the server's side (a lock waited on). */
PGconn *td__pg_connect(const char *url, const char *name, td_err *err)
{
    const char *const kw[] = {
        "connect_timeout",  "tcp_user_timeout", "keepalives_idle", "keepalives_interval",
        "keepalives_count", "application_name", "dbname",          NULL};
    const char *const val[] = {
        CONNECT_TIMEOUT_S, TCP_USER_TIMEOUT_MS, "5", "2", "3", "tenantd", url, NULL};
    char line[200];
    PGconn *c = PQconnectdbParams(kw, val, 1);
    if (!c) {
        td_err_set(err, TD_ENOMEM, "%s: cannot connect: out of memory", name);
        return NULL;
    }
    if (PQstatus(c) != CONNECTION_OK) {
        td_err_set(err, TD_EIO, "%s: cannot connect: %s", name,
                   td__pg_one_line(PQerrorMessage(c), line, sizeof line));
        PQfinish(c);
        return NULL;
    }
    PGresult *r = PQexec(c, STATEMENT_TIMEOUT);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        td_err_set(err, TD_EIO, "%s: cannot set statement_timeout: %s", name,
                   td__pg_one_line(PQresultErrorMessage(r), line, sizeof line));
        PQclear(r);
        PQfinish(c);
        return NULL;
    }
    PQclear(r);
    return c;
}
