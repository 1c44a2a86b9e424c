/* test_store.c - the object store's API over its backends: which backend a
 * `where` picks, the SQLite backend's round trip (upsert, delete,
 * reopen, a stored row that is not JSON), resourceVersion (a digest of
 * the content; an expectation refusing a stale write), and the PostgreSQL backend's
 * refusals that need no server (a URL libpq cannot parse, a port where
 * nothing listens: named, without the password). The PostgreSQL round trip
 * and the pick-up across replicas run on a real server in
 * tests/integration/test_postgres.sh. */
/* cmocka.h needs these before it */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kinds/builtin.h"
#include "io/store.h"
#include "core/kind.h"

static void test_is_url(void **state)
{
    (void)state;
    static const struct {
        const char *name, *where;
        bool url;
    } rows[] = {
        {"postgres scheme", "postgres://u@h/db", true},
        {"postgresql scheme", "postgresql://h:5432/db", true},
        {"a data dir", "/var/lib/tenantd", false},
        {"a relative dir", "data", false},
        {"another scheme", "mysql://h/db", false},
        {"scheme without slashes", "postgres:h", false},
        {"upper case is a path", "POSTGRES://h/db", false},
        {"empty", "", false},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (td_store_is_url(rows[i].where) != rows[i].url)
            fail_msg("%s: %s", rows[i].name, rows[i].where);
}

static json_t *ns(const char *name, const char *team)
{
    return json_pack("{s:s, s:s, s:{s:s, s:{s:s}}}", "apiVersion", "v1", "kind", "Namespace",
                     "metadata", "name", name, "labels", "team", team);
}

/* The stored objects, loaded into a snapshot. */
static td_config *load_all(td_store *s)
{
    td_err err;
    td_config_builder *b = NULL;
    td_config *c = NULL;
    if (td_config_builder_create(NULL, &b, &err) != TD_OK || td_store_load(s, b, &err) != TD_OK ||
        td_config_builder_finish(b, &c, &err) != TD_OK)
        fail_msg("%s", err.msg);
    td_config_builder_destroy(b);
    return c;
}

static void test_sqlite_round_trip(void **state)
{
    (void)state;
    char dir[] = "/tmp/td-store-XXXXXX";
    assert_non_null(mkdtemp(dir));
    td_err err;
    td_store *s = NULL;
    assert_int_equal(td_store_open(dir, &s, &err), TD_OK);
    char want[300];
    snprintf(want, sizeof want, "SQLite %s/tenantd.db", dir);
    assert_string_equal(td_store_name(s), want);
    json_t *objs[3] = {ns("b", "1"), ns("a", "1"), ns("c", "1")};
    assert_int_equal(td_store_write(s, objs, 3, NULL, 0, &err), TD_OK);
    /* an upsert of b keeps its place; a delete of c */
    json_t *b2 = ns("b", "2");
    td_object_id del = {"Namespace", "", "c"};
    assert_int_equal(td_store_write(s, &b2, 1, &del, 1, &err), TD_OK);
    bool changed = true;
    assert_int_equal(td_store_changed(s, &changed, &err), TD_OK);
    assert_false(changed); /* one writer: nothing to pick up */
    assert_int_equal(td_store_watch_fd(s), -1);
    td_store_close(s);

    assert_int_equal(td_store_open(dir, &s, &err), TD_OK);
    td_config *c = load_all(s);
    json_t *const *list;
    assert_int_equal(td_config_list(c, "Namespace", NULL, &list), 2);
    int seen_a = 0, seen_b = 0;
    for (int i = 0; i < 2; i++) {
        json_t *md = json_object_get(list[i], "metadata");
        const char *name = json_string_value(json_object_get(md, "name"));
        const char *team =
            json_string_value(json_object_get(json_object_get(md, "labels"), "team"));
        if (strcmp(name, "a") == 0 && strcmp(team, "1") == 0)
            seen_a++;
        else if (strcmp(name, "b") == 0 && strcmp(team, "2") == 0)
            seen_b++;
        else
            fail_msg("unexpected %s team %s", name, team);
    }
    assert_int_equal(seen_a, 1);
    assert_int_equal(seen_b, 1); /* the upsert's body, c deleted */
    td_config_unref(c);
    td_store_close(s);

    /* a row that is not JSON: the load names the file and the object */
    char path[300];
    snprintf(path, sizeof path, "%s/tenantd.db", dir);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "INSERT INTO objects(kind, namespace, name, body) VALUES "
                                  "('Namespace', '', 'bad', '{not json')",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(td_store_open(dir, &s, &err), TD_OK);
    td_config_builder *bld = NULL;
    assert_int_equal(td_config_builder_create(NULL, &bld, &err), TD_OK);
    assert_int_equal(td_store_load(s, bld, &err), TD_EIO);
    snprintf(want, sizeof want, "SQLite %s/tenantd.db: stored Namespace /bad is not JSON", dir);
    if (!strstr(err.msg, want))
        fail_msg("message: %s", err.msg);
    td_config_builder_destroy(bld);
    td_store_close(s);

    for (int i = 0; i < 3; i++)
        json_decref(objs[i]);
    json_decref(b2);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* resourceVersion: a digest of the object's content, whatever the order of
 * its fields and its own metadata.resourceVersion. */
static void test_resource_version(void **state)
{
    (void)state;
    static const struct {
        const char *name, *a, *b;
        bool same;
    } rows[] = {
        {"the same object", "{\"kind\":\"K\",\"metadata\":{\"name\":\"x\"}}",
         "{\"kind\":\"K\",\"metadata\":{\"name\":\"x\"}}", true},
        {"fields in another order", "{\"kind\":\"K\",\"metadata\":{\"name\":\"x\",\"namespace\":\"n\"}}",
         "{\"metadata\":{\"namespace\":\"n\",\"name\":\"x\"},\"kind\":\"K\"}", true},
        {"its own version ignored", "{\"kind\":\"K\",\"metadata\":{\"name\":\"x\"}}",
         "{\"kind\":\"K\",\"metadata\":{\"name\":\"x\",\"resourceVersion\":\"abc\"}}", true},
        {"a value changed", "{\"kind\":\"K\",\"spec\":{\"cpu\":\"1\"}}",
         "{\"kind\":\"K\",\"spec\":{\"cpu\":\"2\"}}", false},
        {"a field added", "{\"kind\":\"K\"}", "{\"kind\":\"K\",\"spec\":{}}", false},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        json_t *a = json_loads(rows[i].a, 0, NULL), *b = json_loads(rows[i].b, 0, NULL);
        char ra[TD_STORE_RV_LEN], rb[TD_STORE_RV_LEN];
        td_store_resource_version(a, ra);
        td_store_resource_version(b, rb);
        assert_int_equal(strlen(ra), 16);
        if ((strcmp(ra, rb) == 0) != rows[i].same)
            fail_msg("%s: %s vs %s", rows[i].name, ra, rb);
        json_decref(a);
        json_decref(b);
    }
}

/* An expectation on the SQLite store: a stale or gone version refuses the
 * whole write (nothing stored); the current one commits. */
static void test_sqlite_expect(void **state)
{
    (void)state;
    char dir[] = "/tmp/td-store-XXXXXX";
    assert_non_null(mkdtemp(dir));
    td_err err;
    td_store *s = NULL;
    assert_int_equal(td_store_open(dir, &s, &err), TD_OK);
    json_t *a1 = ns("a", "1"), *a2 = ns("a", "2"), *z = ns("z", "1");
    assert_int_equal(td_store_write(s, &a1, 1, NULL, 0, &err), TD_OK);
    char cur[TD_STORE_RV_LEN];
    td_store_resource_version(a1, cur);
    td_object_id ida = {"Namespace", "", "a"}, idz = {"Namespace", "", "z"};
    static const struct {
        const char *name, *rv;
        int gone;
        td_status want;
        const char *msg;
    } rows[] = {
        {"stale", "0123456789abcdef", 0, TD_EEXIST, "Namespace a was changed by another apply"},
        {"gone", "0123456789abcdef", 1, TD_EEXIST, "Namespace z: resourceVersion"},
        {"current", NULL, 0, TD_OK, NULL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        json_t *objs[2] = {rows[i].gone ? z : a2, a2};
        assert_int_equal(td_store_expect(s, rows[i].gone ? idz : ida, rows[i].rv ? rows[i].rv : cur,
                                         &err),
                         TD_OK);
        td_status st = td_store_write(s, objs, rows[i].gone ? 2 : 1, NULL, 0, &err);
        td_store_expect_clear(s);
        if (st != rows[i].want || (rows[i].msg && !strstr(err.msg, rows[i].msg)))
            fail_msg("%s: status %d, %s", rows[i].name, st, err.msg);
        /* refused: a is still as first written */
        td_config *c = load_all(s);
        json_t *got = td_config_get(c, "Namespace", "", "a");
        char rv[TD_STORE_RV_LEN];
        td_store_resource_version(got, rv);
        td_store_resource_version(st == TD_OK ? a2 : a1, cur);
        if (strcmp(rv, cur) != 0)
            fail_msg("%s: stored a is not what it should be", rows[i].name);
        td_config_unref(c);
    }
    td_store_close(s);
    json_decref(a1);
    json_decref(a2);
    json_decref(z);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_pg_bad_url(void **state)
{
    (void)state;
    td_err err;
    td_store *s = NULL;
    assert_int_equal(td_store_open("postgres://127.0.0.1/x?nosuchoption=1", &s, &err), TD_EINVAL);
    assert_null(s);
    if (!strstr(err.msg, "--database: not a PostgreSQL URL: invalid URI query parameter: "
                         "\"nosuchoption\""))
        fail_msg("message: %s", err.msg);
}

/* A loopback port nothing listens on: bound, read, closed. */
static int dead_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &n), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void test_pg_unreachable(void **state)
{
    (void)state;
    int port = dead_port();
    char url[200], want[200];
    snprintf(url, sizeof url, "postgresql://tenantd:s3cret-pw@127.0.0.1:%d/platform", port);
    td_err err;
    td_store *s = NULL;
    assert_int_equal(td_store_open(url, &s, &err), TD_EIO);
    assert_null(s);
    snprintf(want, sizeof want, "PostgreSQL 127.0.0.1:%d/platform: cannot connect: ", port);
    if (!strstr(err.msg, want) || !strstr(err.msg, "Connection refused"))
        fail_msg("message: %s", err.msg);
    assert_null(strstr(err.msg, "s3cret-pw"));
    assert_null(strstr(err.msg, "tenantd@"));
    assert_null(strchr(err.msg, '\n'));
    /* a URL with no host and port names libpq's defaults */
    snprintf(url, sizeof url, "postgres:///platform?host=/nonexistent-dir");
    assert_int_equal(td_store_open(url, &s, &err), TD_EIO);
    if (!strstr(err.msg, "PostgreSQL /nonexistent-dir:5432/platform: cannot connect"))
        fail_msg("message: %s", err.msg);
}

int main(void)
{
    if (td_kinds_register_builtin(NULL) != TD_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_is_url),
        cmocka_unit_test(test_sqlite_round_trip),
        cmocka_unit_test(test_resource_version),
        cmocka_unit_test(test_sqlite_expect),
        cmocka_unit_test(test_pg_bad_url),
        cmocka_unit_test(test_pg_unreachable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
