/* test_ledger.c - the usage ledger on a real SQLite file in a temp dir:
 * round trip, idempotent replay (also after reopening), two appending
 * threads, compaction that keeps totals exactly (and keys apart), a newer
 * schema refused, version-1 and -2 ledgers read as is and migrated to version 3,
 * and a full buffer that drops and counts. */
/* cmocka.h needs these before it */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/ledger.h"

#define S    1000000000LL
#define HOUR (3600 * S)
/* 2037-12-02T00:00:00Z, a Wednesday: in the future, so that the writer's own
 * compaction on the real clock never rolls up what a test just wrote (with a
 * 24 h retention, 2026-12-02 became a time bomb on 2026-12-03) */
#define T0 2143324800LL * S

static char dir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/td_ledger_XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static td_ledger_rec request(const char *id, int64_t start, const char *tenant, const char *outcome,
                             int64_t tin, int64_t tout)
{
    td_ledger_rec r;
    memset(&r, 0, sizeof r);
    r.kind = TD_LEDGER_REQUEST;
    snprintf(r.id, sizeof r.id, "%s", id);
    r.start_ns = start;
    r.end_ns = start + S / 10;
    snprintf(r.tenant, sizeof r.tenant, "%s", tenant);
    snprintf(r.team, sizeof r.team, "team-%s", tenant);
    snprintf(r.project, sizeof r.project, "search");
    snprintf(r.environment, sizeof r.environment, "prod");
    snprintf(r.route, sizeof r.route, "completions");
    snprintf(r.outcome, sizeof r.outcome, "%s", outcome);
    r.count = 1;
    r.tokens_in = tin;
    r.tokens_out = tout;
    r.gpu_milli_seconds = tout * 3;
    r.gpu_used_milli = -1;
    return r;
}

typedef struct {
    td_ledger_rec recs[64];
    size_t n;
    int64_t count, tokens_in, tokens_out, gpu_ms, rollups;
    int64_t interval_gpu_ns;
} collected;

static int collect(const td_ledger_rec *r, void *ud)
{
    collected *c = ud;
    if (c->n < 64)
        c->recs[c->n] = *r;
    c->n++;
    c->count += r->count;
    c->tokens_in += r->tokens_in;
    c->tokens_out += r->tokens_out;
    c->gpu_ms += r->gpu_milli_seconds;
    if (r->id[0] == 'h')
        c->rollups++;
    if (r->kind == TD_LEDGER_INTERVAL)
        c->interval_gpu_ns += r->gpu_milli * (r->end_ns - r->start_ns) / 1000;
    return 0;
}

static collected read_all(void)
{
    collected c;
    memset(&c, 0, sizeof c);
    td_err e;
    td_status st = td_ledger_read(dir, 0, INT64_MAX, collect, &c, &e);
    if (st != TD_OK)
        fail_msg("read: %s", e.msg);
    return c;
}

static void assert_rec_equal(const td_ledger_rec *a, const td_ledger_rec *b)
{
    assert_int_equal(a->kind, b->kind);
    assert_string_equal(a->id, b->id);
    assert_int_equal(a->start_ns, b->start_ns);
    assert_int_equal(a->end_ns, b->end_ns);
    assert_string_equal(a->tenant, b->tenant);
    assert_string_equal(a->team, b->team);
    assert_string_equal(a->project, b->project);
    assert_string_equal(a->environment, b->environment);
    assert_string_equal(a->route, b->route);
    assert_string_equal(a->workload, b->workload);
    assert_string_equal(a->cluster_queue, b->cluster_queue);
    assert_string_equal(a->flavor, b->flavor);
    assert_string_equal(a->outcome, b->outcome);
    assert_int_equal(a->interruptible, b->interruptible);
    assert_int_equal(a->count, b->count);
    assert_int_equal(a->tokens_in, b->tokens_in);
    assert_int_equal(a->tokens_out, b->tokens_out);
    assert_int_equal(a->gpu_milli_seconds, b->gpu_milli_seconds);
    assert_int_equal(a->gpu_milli, b->gpu_milli);
    assert_int_equal(a->cpu_milli, b->cpu_milli);
    assert_int_equal(a->memory_bytes, b->memory_bytes);
    assert_int_equal(a->storage_bytes, b->storage_bytes);
    assert_int_equal(a->gpu_used_milli, b->gpu_used_milli);
    assert_string_equal(a->api_key, b->api_key);
    assert_string_equal(a->model, b->model);
}

static td_ledger *open_ledger(const td_ledger_opts *o)
{
    td_ledger *l = NULL;
    td_err e;
    td_status st = td_ledger_open(dir, o, &l, &e);
    if (st != TD_OK)
        fail_msg("open: %s", e.msg);
    return l;
}

static void test_round_trip(void **state)
{
    (void)state;
    td_ledger *l = open_ledger(NULL);
    td_ledger_rec a = request("r-1", T0 + 5 * S, "team-a", "ok", 200, 100);
    snprintf(a.model, sizeof a.model, "meta-llama/Llama-3.1-70B-Instruct|x");
    td_ledger_rec b = request("r-2", T0 + 2 * S, "team-b", "rejected", 0, 0);
    td_ledger_rec w;
    memset(&w, 0, sizeof w);
    w.kind = TD_LEDGER_INTERVAL;
    snprintf(w.id, sizeof w.id, "ns/train@%lld/a100", (long long)(T0 + S));
    w.start_ns = T0 + S;
    w.end_ns = T0 + HOUR;
    snprintf(w.team, sizeof w.team, "a");
    snprintf(w.workload, sizeof w.workload, "team-a-prod/train");
    snprintf(w.cluster_queue, sizeof w.cluster_queue, "cq-a");
    snprintf(w.flavor, sizeof w.flavor, "a100");
    snprintf(w.outcome, sizeof w.outcome, "evicted");
    w.interruptible = true;
    w.count = 1;
    w.gpu_milli = 8000;
    w.cpu_milli = 16000;
    w.memory_bytes = 64LL << 30;
    w.storage_bytes = 100LL << 30;
    w.gpu_used_milli = 6500;
    assert_true(td_ledger_append(l, &a));
    assert_true(td_ledger_append(l, &b));
    assert_true(td_ledger_append(l, &w));
    assert_int_equal(td_ledger_flush(l, NULL), TD_OK);
    assert_int_equal(td_ledger_committed(l), 3);
    assert_int_equal(td_ledger_dropped(l), 0);

    collected c = read_all();
    assert_int_equal(c.n, 3);
    /* (start_ns, id) order */
    assert_rec_equal(&c.recs[0], &w);
    assert_rec_equal(&c.recs[1], &b);
    assert_rec_equal(&c.recs[2], &a);

    /* the window: only records overlapping [from, to) */
    memset(&c, 0, sizeof c);
    assert_int_equal(td_ledger_read(dir, T0 + 4 * S, T0 + 6 * S, collect, &c, NULL), TD_OK);
    assert_int_equal(c.n, 2); /* the interval and r-1 */
    assert_string_equal(c.recs[1].id, "r-1");
    td_ledger_close(l);

    td_err e;
    assert_int_equal(td_ledger_read("/nonexistent/ledger", 0, 1, collect, &c, &e), TD_ENOTFOUND);
    assert_non_null(strstr(e.msg, "/nonexistent/ledger/ledger.db"));
}

static void count_fresh(const td_ledger_rec *r, void *ud)
{
    (void)r;
    (*(int *)ud)++;
}

static void test_idempotent(void **state)
{
    (void)state;
    int fresh = 0;
    td_ledger_opts o = {.on_commit = count_fresh, .on_commit_ud = &fresh};
    td_ledger *l = open_ledger(&o);
    td_ledger_rec a = request("boot1-1", T0, "team-a", "ok", 10, 20);
    td_ledger_rec b = request("boot1-2", T0 + S, "team-a", "ok", 1, 2);
    assert_true(td_ledger_append(l, &a));
    assert_true(td_ledger_append(l, &a));
    assert_true(td_ledger_append(l, &b));
    assert_int_equal(td_ledger_flush(l, NULL), TD_OK);
    td_ledger_close(l);
    assert_int_equal(fresh, 2); /* on_commit sees new records only */

    /* a replay after a restart: same ids, nothing counted twice */
    l = open_ledger(&o);
    td_ledger_rec changed = a;
    changed.tokens_in = 999; /* first write wins */
    assert_true(td_ledger_append(l, &changed));
    assert_true(td_ledger_append(l, &b));
    td_ledger_close(l); /* close flushes */
    assert_int_equal(fresh, 2);

    collected c = read_all();
    assert_int_equal(c.n, 2);
    assert_int_equal(c.tokens_in, 11);
    assert_int_equal(c.tokens_out, 22);
}

typedef struct {
    td_ledger *l;
    int thread;
    int n;
} appender;

static void *append_many(void *arg)
{
    appender *a = arg;
    for (int i = 0; i < a->n; i++) {
        char id[32];
        snprintf(id, sizeof id, "t%d-%d", a->thread, i);
        td_ledger_rec r = request(id, T0 + i * (S / 1000), a->thread ? "team-b" : "team-a", "ok",
                                  i % 7, 1);
        while (!td_ledger_append(a->l, &r))
            usleep(100); /* buffer full: this test wants every record */
    }
    return NULL;
}

static void test_concurrent(void **state)
{
    (void)state;
    td_ledger_opts o = {.max_buffered = 2048, .flush_ms = 20};
    td_ledger *l = open_ledger(&o);
    uint64_t dropped_before = td_ledger_dropped(l);
    appender a[2] = {{l, 0, 20000}, {l, 1, 20000}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, append_many, &a[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(td_ledger_flush(l, NULL), TD_OK);
    assert_int_equal(td_ledger_committed(l), 40000);
    uint64_t retried = td_ledger_dropped(l) - dropped_before;
    td_ledger_close(l);
    collected c = read_all();
    assert_int_equal(c.n, 40000);
    assert_int_equal(c.count, 40000);
    assert_int_equal(c.tokens_out, 40000);
    int64_t tin = 0;
    for (int i = 0; i < 20000; i++)
        tin += 2 * (i % 7);
    assert_int_equal(c.tokens_in, tin);
    print_message("concurrent: 40000 records committed, %llu appends found the buffer full\n",
                  (unsigned long long)retried);
}

static void test_compaction(void **state)
{
    (void)state;
    td_ledger_opts o = {.retention_ns = 24 * HOUR, .flush_ms = 50};
    td_ledger *l = open_ledger(&o);
    const char *tenants[] = {"team-a", "team-b", "team-c"};
    const char *outcomes[] = {"ok", "ok", "rejected", "shed", "error", "timeout"};
    unsigned seed = 7;
    int n = 3000;
    for (int i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof id, "c-%d", i);
        /* spread over 3 days */
        int64_t start = T0 + (int64_t)(rand_r(&seed) % (72 * 3600)) * S + rand_r(&seed) % S;
        td_ledger_rec r = request(id, start, tenants[rand_r(&seed) % 3],
                                  outcomes[rand_r(&seed) % 6], rand_r(&seed) % 4000,
                                  rand_r(&seed) % 1000);
        assert_true(td_ledger_append(l, &r));
    }
    td_ledger_rec w;
    memset(&w, 0, sizeof w);
    w.kind = TD_LEDGER_INTERVAL;
    snprintf(w.id, sizeof w.id, "ns/old@1/a100");
    w.start_ns = T0 + 90 * 60 * S;
    w.end_ns = T0 + 200 * 60 * S;
    w.gpu_milli = 4000;
    w.count = 1;
    snprintf(w.outcome, sizeof w.outcome, "finished");
    assert_true(td_ledger_append(l, &w));
    assert_int_equal(td_ledger_flush(l, NULL), TD_OK);
    collected before = read_all();
    assert_int_equal(before.n, n + 1);

    /* now = day 3 + 30 min: everything that started before day 2 00:00 rolls up */
    int64_t now = T0 + 72 * HOUR + 30 * 60 * S;
    td_err e;
    assert_int_equal(td_ledger_compact(l, now, &e), TD_OK);
    collected after = read_all();
    assert_int_equal(after.count, before.count);
    assert_int_equal(after.tokens_in, before.tokens_in);
    assert_int_equal(after.tokens_out, before.tokens_out);
    assert_int_equal(after.gpu_ms, before.gpu_ms);
    assert_int_equal(after.interval_gpu_ns, before.interval_gpu_ns);
    assert_true(after.rollups > 0);
    /* 48 hours x 3 tenants x 5 outcomes at most, plus the raw third day */
    assert_true(after.n < before.n);
    assert_true(after.rollups <= 48 * 3 * 5);
    print_message("compaction: %zu records -> %zu (%lld rollups)\n", before.n, after.n,
                  (long long)after.rollups);

    /* idempotent: again at the same time, nothing changes */
    assert_int_equal(td_ledger_compact(l, now, NULL), TD_OK);
    collected again = read_all();
    assert_int_equal(again.n, after.n);
    assert_int_equal(again.tokens_in, after.tokens_in);

    /* a replay of a compacted raw record is refused and counted */
    uint64_t dropped = td_ledger_dropped(l);
    td_ledger_rec old = request("c-0", T0 + 10 * S, "team-a", "ok", 5, 5);
    assert_true(td_ledger_append(l, &old));
    assert_int_equal(td_ledger_flush(l, NULL), TD_OK);
    assert_int_equal(td_ledger_dropped(l), dropped + 1);
    again = read_all();
    assert_int_equal(again.count, before.count);

    /* the horizon survives a restart */
    td_ledger_close(l);
    l = open_ledger(&o);
    assert_true(td_ledger_append(l, &old));
    assert_int_equal(td_ledger_flush(l, NULL), TD_OK);
    assert_int_equal(td_ledger_dropped(l), 1);
    td_ledger_close(l);
    again = read_all();
    assert_int_equal(again.count, before.count);
    assert_int_equal(again.tokens_in, before.tokens_in);
}

static void test_newer_schema(void **state)
{
    (void)state;
    td_ledger *l = open_ledger(NULL);
    td_ledger_close(l);
    char path[300];
    snprintf(path, sizeof path, "%s/ledger.db", dir);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(db, "UPDATE meta SET value = 4 WHERE key = 'schema'", NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);

    td_err e;
    l = NULL;
    assert_int_equal(td_ledger_open(dir, NULL, &l, &e), TD_EINVAL);
    assert_null(l);
    assert_non_null(strstr(e.msg, "schema version 4"));
    assert_non_null(strstr(e.msg, "reads version 3"));
    assert_non_null(strstr(e.msg, "newer"));
    collected c;
    memset(&c, 0, sizeof c);
    assert_int_equal(td_ledger_read(dir, 0, INT64_MAX, collect, &c, &e), TD_EINVAL);
    assert_non_null(strstr(e.msg, "ledger.db"));
    assert_int_equal(c.n, 0);
}

/* The schema of version 1 exactly as that tenantd wrote it. */
static const char v1_sql[] =
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
    "CREATE TABLE records ("
    "  id TEXT PRIMARY KEY, kind INTEGER NOT NULL, rollup INTEGER NOT NULL,"
    "  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,"
    "  tenant TEXT NOT NULL, team TEXT NOT NULL, project TEXT NOT NULL,"
    "  environment TEXT NOT NULL, route TEXT NOT NULL, workload TEXT NOT NULL,"
    "  cluster_queue TEXT NOT NULL, flavor TEXT NOT NULL, outcome TEXT NOT NULL,"
    "  interruptible INTEGER NOT NULL, count INTEGER NOT NULL,"
    "  tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL,"
    "  gpu_milli_seconds INTEGER NOT NULL, gpu_milli INTEGER NOT NULL,"
    "  cpu_milli INTEGER NOT NULL, memory_bytes INTEGER NOT NULL,"
    "  storage_bytes INTEGER NOT NULL, gpu_used_milli INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE INDEX records_start ON records(start_ns);"
    "INSERT INTO meta VALUES ('schema', 1), ('horizon_ns', 0);"
    "INSERT INTO records VALUES ('v1-a', 0, 0, 2143324801000000000, 2143324801100000000,"
    "  'team-a', 'ml', 'search', 'prod', 'completions', '', '', '', 'ok', 0, 1, 100, 20, 60,"
    "  0, 0, 0, 0, -1);"
    "INSERT INTO records VALUES ('v1-b', 0, 0, 2143324802000000000, 2143324802100000000,"
    "  'team-b', 'ml', 'search', 'prod', 'completions', '', '', '', 'rejected', 0, 1, 0, 0, 0,"
    "  0, 0, 0, 0, -1);";

static int64_t schema_of(void)
{
    char path[300];
    snprintf(path, sizeof path, "%s/ledger.db", dir);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(
        sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key='schema'", -1, &st, NULL),
        SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static void test_migrate_v1(void **state)
{
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/ledger.db", dir);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, v1_sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);

    /* the reader takes a version-1 ledger as it is (and leaves it so) */
    collected c = read_all();
    assert_int_equal(c.n, 2);
    assert_string_equal(c.recs[0].id, "v1-a");
    assert_string_equal(c.recs[0].tenant, "team-a");
    assert_int_equal(c.recs[0].tokens_in, 100);
    assert_string_equal(c.recs[0].api_key, "");
    assert_int_equal(schema_of(), 1);

    /* the writer migrates it in place; old records read back with key "" */
    td_ledger *l = open_ledger(NULL);
    assert_int_equal(schema_of(), TD_LEDGER_SCHEMA);
    td_ledger_rec k = request("v2-k", T0 + 3 * S, "team-a", "ok", 7, 8);
    snprintf(k.api_key, sizeof k.api_key, "ci-bot");
    assert_true(td_ledger_append(l, &k));
    /* a replay of an old id changes nothing */
    td_ledger_rec dup = request("v1-a", T0 + 1 * S, "team-a", "ok", 999, 999);
    assert_true(td_ledger_append(l, &dup));
    assert_int_equal(td_ledger_flush(l, NULL), TD_OK);
    td_ledger_close(l);
    c = read_all();
    assert_int_equal(c.n, 3);
    assert_string_equal(c.recs[0].id, "v1-a");
    assert_int_equal(c.recs[0].tokens_in, 100);
    assert_string_equal(c.recs[0].api_key, "");
    assert_string_equal(c.recs[1].id, "v1-b");
    assert_string_equal(c.recs[1].outcome, "rejected");
    assert_string_equal(c.recs[1].api_key, "");
    assert_rec_equal(&c.recs[2], &k);

    /* reopening a current ledger changes nothing */
    l = open_ledger(NULL);
    td_ledger_close(l);
    assert_int_equal(schema_of(), TD_LEDGER_SCHEMA);
    assert_int_equal(read_all().n, 3);
}

/* A version-2 ledger (api_key, no model), with a shared ledger's spool
 * holding a record not yet shipped: read as is with model "", then
 * migrated in place (records and spool) in one step. */
static void test_migrate_v2(void **state)
{
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/ledger.db", dir);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, v1_sql, NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(db,
                     "ALTER TABLE records ADD COLUMN api_key TEXT NOT NULL DEFAULT '';"
                     "UPDATE records SET api_key = 'ci-bot' WHERE id = 'v1-a';"
                     "UPDATE meta SET value = 2 WHERE key = 'schema';"
                     "CREATE TABLE spool (seq INTEGER PRIMARY KEY AUTOINCREMENT,"
                     "  id TEXT NOT NULL, kind INTEGER NOT NULL, rollup INTEGER NOT NULL,"
                     "  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,"
                     "  tenant TEXT NOT NULL, team TEXT NOT NULL, project TEXT NOT NULL,"
                     "  environment TEXT NOT NULL, route TEXT NOT NULL, workload TEXT NOT NULL,"
                     "  cluster_queue TEXT NOT NULL, flavor TEXT NOT NULL, outcome TEXT NOT NULL,"
                     "  interruptible INTEGER NOT NULL, count INTEGER NOT NULL,"
                     "  tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL,"
                     "  gpu_milli_seconds INTEGER NOT NULL, gpu_milli INTEGER NOT NULL,"
                     "  cpu_milli INTEGER NOT NULL, memory_bytes INTEGER NOT NULL,"
                     "  storage_bytes INTEGER NOT NULL, gpu_used_milli INTEGER NOT NULL,"
                     "  api_key TEXT NOT NULL);"
                     "INSERT INTO spool(id, kind, rollup, start_ns, end_ns, tenant, team, project,"
                     "  environment, route, workload, cluster_queue, flavor, outcome,"
                     "  interruptible, count, tokens_in, tokens_out, gpu_milli_seconds, gpu_milli,"
                     "  cpu_milli, memory_bytes, storage_bytes, gpu_used_milli, api_key)"
                     "  SELECT id, kind, rollup, start_ns, end_ns, tenant, team, project,"
                     "  environment, route, workload, cluster_queue, flavor, outcome,"
                     "  interruptible, count, tokens_in, tokens_out, gpu_milli_seconds, gpu_milli,"
                     "  cpu_milli, memory_bytes, storage_bytes, gpu_used_milli, api_key"
                     "  FROM records WHERE id = 'v1-a';",
                     NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);

    collected c = read_all();
    assert_int_equal(c.n, 2);
    assert_string_equal(c.recs[0].api_key, "ci-bot");
    assert_string_equal(c.recs[0].model, "");
    assert_int_equal(schema_of(), 2);

    td_ledger *l = open_ledger(NULL);
    assert_int_equal(schema_of(), 3);
    td_ledger_rec m = request("v3-m", T0 + 3 * S, "team-a", "ok", 7, 8);
    snprintf(m.model, sizeof m.model, "llama-70b");
    assert_true(td_ledger_append(l, &m));
    assert_int_equal(td_ledger_flush(l, NULL), TD_OK);
    td_ledger_close(l);
    c = read_all();
    assert_int_equal(c.n, 3);
    assert_string_equal(c.recs[0].id, "v1-a");
    assert_string_equal(c.recs[0].api_key, "ci-bot");
    assert_string_equal(c.recs[0].model, "");
    assert_int_equal(c.recs[0].tokens_in, 100);
    assert_rec_equal(&c.recs[2], &m);

    /* the spool got the column too; its waiting record reads model "" */
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT id, model FROM spool", -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "v1-a");
    assert_string_equal((const char *)sqlite3_column_text(st, 1), "");
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* Rollups keep keys apart: two keys of one tenant in one hour stay two
 * rows, each with its key and its own sums. */
static void test_compaction_keys(void **state)
{
    (void)state;
    td_ledger_opts o = {.retention_ns = HOUR, .flush_ms = 50};
    td_ledger *l = open_ledger(&o);
    const char *keys[] = {"", "ci-bot", "web", "ci-bot", "ci-bot"};
    const char *models[] = {"", "", "", "", "llama|70b"};
    for (int i = 0; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof id, "k-%d", i);
        td_ledger_rec r = request(id, T0 + i * S, "team-a", "ok", 10 * (i + 1), 1);
        snprintf(r.api_key, sizeof r.api_key, "%s", keys[i]);
        snprintf(r.model, sizeof r.model, "%s", models[i]);
        assert_true(td_ledger_append(l, &r));
    }
    assert_int_equal(td_ledger_flush(l, NULL), TD_OK);
    assert_int_equal(td_ledger_compact(l, T0 + 3 * HOUR, NULL), TD_OK);
    td_ledger_close(l);
    collected c = read_all();
    assert_int_equal(c.n, 4);
    assert_int_equal(c.rollups, 4);
    int64_t none = -1, ci = -1, web = -1, llama = -1;
    for (size_t i = 0; i < c.n; i++) {
        if (strcmp(c.recs[i].model, "llama|70b") == 0) {
            llama = c.recs[i].tokens_in;
            assert_string_equal(c.recs[i].api_key, "ci-bot");
        } else if (strcmp(c.recs[i].api_key, "") == 0)
            none = c.recs[i].tokens_in;
        else if (strcmp(c.recs[i].api_key, "ci-bot") == 0) {
            ci = c.recs[i].tokens_in;
            assert_int_equal(c.recs[i].count, 2);
        }
        else if (strcmp(c.recs[i].api_key, "web") == 0)
            web = c.recs[i].tokens_in;
    }
    assert_int_equal(none, 10);
    assert_int_equal(ci, 20 + 40);
    assert_int_equal(web, 30);
    assert_int_equal(llama, 50);
}

static void test_buffer_full(void **state)
{
    (void)state;
    td_ledger_opts o = {.max_buffered = 4, .flush_ms = 60000};
    td_ledger *l = open_ledger(&o);
    /* Another connection holds the write lock: the writer waits on SQLite,
     * appenders must not. */
    char path[300];
    snprintf(path, sizeof path, "%s/ledger.db", dir);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
    int accepted = 0, refused = 0;
    for (int i = 0; i < 100; i++) {
        char id[16];
        snprintf(id, sizeof id, "f-%d", i);
        td_ledger_rec r = request(id, T0 + i, "team-a", "ok", 1, 1);
        if (td_ledger_append(l, &r))
            accepted++;
        else
            refused++;
    }
    /* the ring holds 4, including the run the writer is stuck on */
    assert_int_equal(accepted, 4);
    assert_int_equal(refused, 100 - accepted);
    assert_int_equal(td_ledger_dropped(l), (uint64_t)refused);
    assert_int_equal(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(td_ledger_flush(l, NULL), TD_OK);
    assert_int_equal(td_ledger_committed(l), (uint64_t)accepted);
    td_ledger_close(l);
    collected c = read_all();
    assert_int_equal(c.n, (size_t)accepted);
}

/* td_ledger_vec_push keeps every record in order up to max, then stops the
 * walk and says so; max 0 holds as many as memory does. */
static void test_vec_push(void **state)
{
    (void)state;
    td_ledger_rec r;
    memset(&r, 0, sizeof r);
    td_ledger_vec v = {.max = 100};
    int i;
    for (i = 0; i < 100; i++) {
        r.start_ns = i;
        assert_int_equal(td_ledger_vec_push(&r, &v), 0);
    }
    assert_int_equal(td_ledger_vec_push(&r, &v), 1);
    assert_true(v.full);
    assert_int_equal(v.n, 100);
    for (i = 0; i < 100; i++)
        assert_int_equal(v.v[i].start_ns, i);
    free(v.v);
    td_ledger_vec u = {0};
    for (i = 0; i < 5000; i++)
        assert_int_equal(td_ledger_vec_push(&r, &u), 0);
    assert_false(u.full);
    assert_int_equal(u.n, 5000);
    free(u.v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idempotent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compaction, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_schema, setup, teardown),
        cmocka_unit_test_setup_teardown(test_buffer_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_migrate_v2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compaction_keys, setup, teardown),
        cmocka_unit_test(test_vec_push),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
