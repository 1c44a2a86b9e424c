/* test_lease_pg.c - the scheduling lease and the fenced write on a real
 * PostgreSQL server (TD_PG_URL; every case skips without it, and
 * tests/integration/test_leader.sh runs this binary with its server): a
 * takeover raises the term, a stale term's write is refused and writes
 * nothing, a pass's rows are written only over the rows as they were read.
 * Each case runs in a database of its own, created fresh. */
/* cmocka.h needs these before it */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/lease.h"
#include "kinds/builtin.h"
#include "io/store.h"

#define TEST_DB "tenantd_lease_test"

static char url[1024];

/* Runs sql on the server's maintenance database (TD_PG_URL). */
static void admin_sql(const char *sql)
{
    PGconn *c = PQconnectdb(getenv("TD_PG_URL"));
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
}

/* Runs sql on the test database; the first value of the result (copied
 * into out, n bytes) if out is not NULL. */
static void test_sql(const char *sql, char *out, size_t n)
{
    PGconn *c = PQconnectdb(url);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    if (out)
        snprintf(out, n, "%s", PQntuples(r) ? PQgetvalue(r, 0, 0) : "(none)");
    PQclear(r);
    PQfinish(c);
}

static int fresh_db(void **state)
{
    (void)state;
    const char *base = getenv("TD_PG_URL");
    if (!base || !*base)
        return 0;
    const char *slash = strrchr(base, '/');
    assert_non_null(slash);
    snprintf(url, sizeof url, "%.*s/" TEST_DB, (int)(slash - base), base);
    admin_sql("DROP DATABASE IF EXISTS " TEST_DB);
    admin_sql("CREATE DATABASE " TEST_DB);
    return 0;
}

static json_t *workload(const char *name, const char *state)
{
    json_t *wl = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "kueue.x-k8s.io/v1beta1",
                           "kind", "Workload", "metadata", "name", name, "namespace", "t");
    if (state)
        json_object_set_new(wl, "status", json_pack("{s:{s:s}}", "tenantd", "state", state));
    return wl;
}

static void stored_state(const char *name, char *out, size_t n)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT coalesce(body::jsonb #>> '{status,tenantd,state}', '-') FROM "
             "tenantd_objects WHERE name = '%s'",
             name);
    test_sql(sql, out, n);
}

/* A lease taken (term 1), its holder gone without giving it up; once it
 * expires another takes it (term 2); the first one's write is refused. */
static void test_stale_term_refused(void **state)
{
    (void)state;
    if (!getenv("TD_PG_URL"))
        skip();
    td_err err;
    td_store *s = NULL;
    td_lease *a = NULL, *b = NULL;
    assert_int_equal(td_store_open(url, &s, &err), TD_OK);
    assert_int_equal(td_lease_open(url, "a", &a, &err), TD_OK);
    assert_int_equal(td_lease_open(url, "b", &b, &err), TD_OK);
    int64_t ta = 0, tb = 0;
    char who[64];
    assert_int_equal(td_lease_tick(a, &ta, who, sizeof who, &err), TD_OK);
    assert_int_equal(ta, 1);
    assert_int_equal(td_lease_tick(b, &tb, who, sizeof who, &err), TD_OK);
    assert_int_equal(tb, 0);
    assert_string_equal(who, "a");
    assert_int_equal(td_lease_tick(a, &ta, who, sizeof who, &err), TD_OK);
    assert_int_equal(ta, 1); /* renewed, same term */
    test_sql("UPDATE tenantd_leader SET expires_at = clock_timestamp() - interval '1 ms'", NULL, 0);
    assert_int_equal(td_lease_tick(b, &tb, who, sizeof who, &err), TD_OK);
    assert_int_equal(tb, 2);

    json_t *w = workload("w", "Admitted");
    assert_int_equal(td_store_write_fenced(s, &w, 0, 1, NULL, 0, 1, &err), TD_EFORBIDDEN);
    assert_non_null(strstr(err.msg, "a write of scheduling term 1 refused: the term is 2 now, "
                                    "held by b"));
    char got[64];
    stored_state("w", got, sizeof got);
    assert_string_equal(got, "(none)");
    json_t *plain = workload("w", NULL);
    assert_int_equal(td_store_write_fenced(s, &plain, 1, 0, NULL, 0, 2, &err), TD_OK);
    assert_int_equal(td_store_write_fenced(s, &w, 0, 1, NULL, 0, 2, &err), TD_OK);
    stored_state("w", got, sizeof got);
    assert_string_equal(got, "Admitted");
    /* a renewal by the old holder fails: it learns who leads */
    assert_int_equal(td_lease_tick(a, &ta, who, sizeof who, &err), TD_OK);
    assert_int_equal(ta, 0);
    assert_string_equal(who, "b");
    assert_int_equal(td_lease_valid_until(a), 0);
    json_decref(w);
    json_decref(plain);
    td_lease_close(a);
    /* b gives the lease up on close: a takes it at once, term 3 */
    td_lease_close(b);
    assert_int_equal(td_lease_open(url, "a", &a, &err), TD_OK);
    assert_int_equal(td_lease_tick(a, &ta, who, sizeof who, &err), TD_OK);
    assert_int_equal(ta, 3);
    td_lease_close(a);
    td_store_close(s);
}

typedef enum { OTHER_NONE, OTHER_CHANGES, OTHER_DELETES } other_action;

/* A pass on replica 1 decides on Workload "w" it read; meanwhile replica 2
 * did `other` to it. The pass's write goes in only over the row as read. */
static void test_pass_rows_checked(void **state)
{
    (void)state;
    if (!getenv("TD_PG_URL"))
        skip();
    static const struct {
        const char *name;
        other_action other;
        int in_same_commit; /* "w" also submitted by this very commit */
        td_status want;
        const char *stored; /* w's state afterwards; "(none)": no row */
    } rows[] = {
        {"row as read", OTHER_NONE, 0, TD_OK, "Admitted"},
        {"row changed by another replica", OTHER_CHANGES, 0, TD_EAGAIN, "Pending"},
        {"row deleted by another replica: not resurrected", OTHER_DELETES, 0, TD_EAGAIN, "(none)"},
        {"row submitted by this commit", OTHER_CHANGES, 1, TD_OK, "Admitted"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        fresh_db(NULL);
        td_err err;
        td_store *s1 = NULL, *s2 = NULL;
        td_lease *l = NULL;
        int64_t term = 0;
        assert_int_equal(td_store_open(url, &s1, &err), TD_OK);
        assert_int_equal(td_store_open(url, &s2, &err), TD_OK);
        assert_int_equal(td_lease_open(url, "one", &l, &err), TD_OK);
        assert_int_equal(td_lease_tick(l, &term, NULL, 0, &err), TD_OK);
        json_t *w = workload("w", NULL), *pending = workload("w", "Pending");
        json_t *admitted = workload("w", "Admitted");
        /* replica 1 commits w (its handle has seen its own commit) */
        assert_int_equal(td_store_write(s1, &w, 1, NULL, 0, &err), TD_OK);
        td_object_id id = {"Workload", "t", "w"};
        if (rows[i].other == OTHER_CHANGES)
            assert_int_equal(td_store_write(s2, &pending, 1, NULL, 0, &err), TD_OK);
        else if (rows[i].other == OTHER_DELETES)
            assert_int_equal(td_store_write(s2, NULL, 0, &id, 1, &err), TD_OK);
        json_t *objs[2] = {pending, admitted};
        td_status st = rows[i].in_same_commit
                           ? td_store_write_fenced(s1, objs, 1, 1, NULL, 0, term, &err)
                           : td_store_write_fenced(s1, &admitted, 0, 1, NULL, 0, term, &err);
        if (st != rows[i].want)
            fail_msg("%s: status %d, want %d (%s)", rows[i].name, st, rows[i].want, err.msg);
        if (st == TD_EAGAIN)
            assert_non_null(strstr(err.msg, "Workload t/w was changed or deleted by another commit"));
        char got[64];
        stored_state("w", got, sizeof got);
        if (strcmp(got, rows[i].stored) != 0)
            fail_msg("%s: stored %s, want %s", rows[i].name, got, rows[i].stored);
        json_decref(w);
        json_decref(pending);
        json_decref(admitted);
        td_lease_close(l);
        td_store_close(s1);
        td_store_close(s2);
    }
}

static int drop_db(void **state)
{
    (void)state;
    if (getenv("TD_PG_URL"))
        admin_sql("DROP DATABASE IF EXISTS " TEST_DB);
    return 0;
}

int main(void)
{
    /* Workloads are namespaced by the registry's word (core/kind.h) */
    if (td_kinds_register_builtin(NULL) != TD_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_stale_term_refused, fresh_db),
        cmocka_unit_test(test_pass_rows_checked),
    };
    return cmocka_run_group_tests(tests, NULL, drop_db);
}
