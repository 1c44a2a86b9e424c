/* leader_pg.c - the scheduling lease on PostgreSQL (lease.h): one row,
 * tenantd_leader, renewed by its holder and taken over after it expires,
 * the term raised at every takeover; and the check that fences a
 * scheduling pass's write on the term (store_pg.c calls it). The expiry
 * is on the server's clock, so replicas' clocks need not agree. */
#include "io/lease.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/pg_internal.h"

#define RETRY_NS 2000000000LL /* between reconnects to a lost server */
#define LEASE    "interval '3 seconds'" /* TD_LEASE_MS */
/* Each wait of a tick, on tenantd's clock: a renewal that takes longer is
 * worth nothing, the lease being 3 s. */
#define WAIT_MS 1500

struct td_lease {
    PGconn *conn;
    char *url, *holder;
    char name[512];
    int64_t term;        /* held now; 0: not */
    int64_t valid_until; /* monotonic ns */
    int64_t retry_at;    /* monotonic ns: no reconnect before */
};

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

td_status td_lease_open(const char *url, const char *holder, td_lease **out, td_err *err)
{
    td_lease *l = calloc(1, sizeof *l);
    if (!l || !(l->url = strdup(url)) || !(l->holder = strdup(holder))) {
        if (l)
            free(l->url);
        free(l);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    td_status st = td__pg_name(url, l->name, sizeof l->name, err);
    if (st != TD_OK) {
        td_lease_close(l);
        return st;
    }
    *out = l;
    return TD_OK;
}

void td_lease_close(td_lease *l)
{
    if (!l)
        return;
    if (l->conn && l->term && PQstatus(l->conn) == CONNECTION_OK) {
        char term[24];
        snprintf(term, sizeof term, "%lld", (long long)l->term);
        const char *p[2] = {term, l->holder};
        PQclear(td__pg_exec(l->conn,
                            "UPDATE tenantd_leader SET expires_at = '-infinity' "
                            "WHERE id = 1 AND term = $1::bigint AND holder = $2",
                            2, p, WAIT_MS));
    }
    PQfinish(l->conn);
    free(l->url);
    free(l->holder);
    free(l);
}

int64_t td_lease_valid_until(const td_lease *l)
{
    return l->term ? l->valid_until : 0;
}

static td_status ensure(td_lease *l, td_err *err)
{
    if (l->conn && PQstatus(l->conn) == CONNECTION_OK)
        return TD_OK;
    if (mono_ns() < l->retry_at)
        return td_err_set(err, TD_EIO, "%s: not connected; next attempt within 2 s", l->name);
    PQfinish(l->conn);
    l->conn = td__pg_connect(l->url, l->name, WAIT_MS, err);
    if (!l->conn) {
        l->retry_at = mono_ns() + RETRY_NS;
        return TD_EIO;
    }
    return TD_OK;
}

/* Runs sql with p (n params) expecting rows; *got = the first row's first
 * column as a term (0 if no row). */
static td_status update_term(td_lease *l, const char *sql, int n, const char *const *p,
                             int64_t *got, td_err *err, const char *what)
{
    PGresult *r = td__pg_exec(l->conn, sql, n, p, WAIT_MS);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        char line[200];
        td_status st = td_err_set(err, TD_EIO, "%s: %s: %s", l->name, what,
                                  td__pg_res_msg(l->conn, r, WAIT_MS, line, sizeof line));
        PQclear(r);
        if (PQstatus(l->conn) == CONNECTION_BAD) {
            PQfinish(l->conn);
            l->conn = NULL;
        }
        return st;
    }
    *got = PQntuples(r) == 1 ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
    PQclear(r);
    return TD_OK;
}

td_status td_lease_tick(td_lease *l, int64_t *term, char *leader, size_t n, td_err *err)
{
    td_status st = ensure(l, err);
    int64_t started = mono_ns(), got = 0;
    if (st == TD_OK && l->term) {
        char t[24];
        snprintf(t, sizeof t, "%lld", (long long)l->term);
        const char *p[2] = {t, l->holder};
        st = update_term(l,
                         "UPDATE tenantd_leader SET expires_at = clock_timestamp() + " LEASE
                         " WHERE id = 1 AND term = $1::bigint AND holder = $2 RETURNING term",
                         2, p, &got, err, "cannot renew the scheduling lease");
    }
    if (st == TD_OK && !got) {
        const char *p[1] = {l->holder};
        st = update_term(l,
                         "UPDATE tenantd_leader SET holder = $1, term = term + 1, "
                         "expires_at = clock_timestamp() + " LEASE " WHERE id = 1 AND "
                         "(expires_at < clock_timestamp() OR holder = $1) RETURNING term",
                         1, p, &got, err, "cannot take the scheduling lease");
    }
    if (st != TD_OK) {
        /* unknown: the term holds until the lease last renewed expires */
        if (l->term && mono_ns() >= l->valid_until)
            l->term = 0;
        *term = l->term;
        if (leader && n)
            snprintf(leader, n, "%s", l->term ? l->holder : "?");
        return st;
    }
    l->term = got;
    if (got)
        l->valid_until = started + (int64_t)TD_LEASE_MS * 1000000LL;
    *term = got;
    if (leader && n) {
        snprintf(leader, n, "%s", got ? l->holder : "?");
        if (!got) {
            PGresult *r = td__pg_exec(l->conn, "SELECT holder FROM tenantd_leader WHERE id = 1",
                                      0, NULL, WAIT_MS);
            if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
                snprintf(leader, n, "%s", PQgetvalue(r, 0, 0));
            PQclear(r);
        }
    }
    return TD_OK;
}

td_status td__lease_pg_check(PGconn *c, int64_t term, const char *name, td_err *err)
{
    char line[200];
    PGresult *r = td__pg_exec(c, "SELECT term, holder FROM tenantd_leader WHERE id = 1 FOR SHARE",
                              0, NULL, TD_PG_WAIT_MS);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        td_status st = td_err_set(err, TD_EIO, "%s: cannot read the scheduling term: %s", name,
                                  td__pg_res_msg(c, r, TD_PG_WAIT_MS, line, sizeof line));
        PQclear(r);
        return st;
    }
    long long now = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    td_status st = TD_OK;
    if (now != term)
        st = td_err_set(err, TD_EFORBIDDEN,
                        "%s: a write of scheduling term %lld refused: the term is %lld now, "
                        "held by %s",
                        name, (long long)term, now, PQgetvalue(r, 0, 1));
    PQclear(r);
    return st;
}
