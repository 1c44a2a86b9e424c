/* bench_ledger.c - sustained ledger throughput with durability on: the
 * daemon's td_ledger (SQLite WAL, synchronous=NORMAL, batched commits of up
 * to 1,024 records by one writer thread, INSERT OR IGNORE by idempotency
 * id) fed gateway request records by P producer threads as fast as the
 * writer commits them. Producers keep what waits below the buffer (the
 * daemon's 65,536) so nothing is dropped: the figure is what the writer
 * sustains, not what the ring absorbs. Afterwards the rows are counted in
 * the database file with a separate connection.
 *
 * Usage: bench_ledger DIR SECONDS PRODUCERS
 * Prints one JSON object on stdout. Build: see scripts/bench.sh. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/ledger.h"

#define BUFFERED 65536 /* as src/daemon/main.c opens it */
#define FLUSH_MS 200

static td_ledger *ledger;
static atomic_bool stop;
static atomic_uint_fast64_t appended;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *producer(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    static const char *const tenants[] = {"team-a", "team-b", "team-c"};
    td_ledger_rec r;
    memset(&r, 0, sizeof r);
    r.kind = TD_LEDGER_REQUEST;
    r.count = 1;
    snprintf(r.route, sizeof r.route, "completions");
    snprintf(r.outcome, sizeof r.outcome, "ok");
    snprintf(r.project, sizeof r.project, "search");
    snprintf(r.environment, sizeof r.environment, "prod");
    for (uint64_t n = 0; !atomic_load(&stop); n++) {
        /* Keep the ring below full: a full ring drops (and counts) records. */
        while (atomic_load(&appended) - td_ledger_committed(ledger) > BUFFERED - 4096 &&
               !atomic_load(&stop)) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
        const char *t = tenants[n % 3];
        snprintf(r.id, sizeof r.id, "bench-%u-%llu", id, (unsigned long long)n);
        snprintf(r.tenant, sizeof r.tenant, "%s", t);
        snprintf(r.team, sizeof r.team, "%s", t + 5);
        r.start_ns = wall_ns();
        r.end_ns = r.start_ns + 1000000;
        r.tokens_in = 5;
        r.tokens_out = 1;
        if (!td_ledger_append(ledger, &r)) {
            fprintf(stderr, "bench_ledger: append refused (the ring was full)\n");
            break;
        }
        atomic_fetch_add(&appended, 1);
    }
    return NULL;
}

static long long count_rows(const char *dir)
{
    char path[4096];
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    long long n = -1;
    snprintf(path, sizeof path, "%s/ledger.db", dir);
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT count(*) FROM records", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: bench_ledger DIR SECONDS PRODUCERS\n");
        return 2;
    }
    const char *dir = argv[1];
    double secs = atof(argv[2]);
    int np = atoi(argv[3]);
    if (secs <= 0 || np < 1 || np > 16) {
        fprintf(stderr, "bench_ledger: SECONDS > 0 and 1 <= PRODUCERS <= 16\n");
        return 2;
    }
    td_err err;
    td_ledger_opts opts = {.max_buffered = BUFFERED, .flush_ms = FLUSH_MS};
    if (td_ledger_open(dir, &opts, &ledger, &err) != TD_OK) {
        fprintf(stderr, "bench_ledger: %s\n", err.msg);
        return 1;
    }
    pthread_t th[16];
    for (int i = 0; i < np; i++)
        pthread_create(&th[i], NULL, producer, (void *)(uintptr_t)i);
    /* 0.5 s of warm-up (the first batches, the WAL growing), then the window */
    struct timespec warm = {0, 500000000};
    nanosleep(&warm, NULL);
    uint64_t c0 = td_ledger_committed(ledger), t0 = mono_ns();
    struct timespec win = {(time_t)secs, (long)((secs - (time_t)secs) * 1e9)};
    nanosleep(&win, NULL);
    uint64_t c1 = td_ledger_committed(ledger), t1 = mono_ns();
    atomic_store(&stop, true);
    for (int i = 0; i < np; i++)
        pthread_join(th[i], NULL);
    td_status fst = td_ledger_flush(ledger, &err);
    uint64_t committed = td_ledger_committed(ledger), dropped = td_ledger_dropped(ledger);
    td_ledger_close(ledger);
    long long rows = count_rows(dir);
    double rps = (double)(c1 - c0) / ((double)(t1 - t0) / 1e9);
    printf("{\"producers\": %d, \"seconds\": %.3f, \"records_per_s\": %.0f, \"appended\": %llu, "
           "\"committed\": %llu, \"dropped\": %llu, \"rows_in_db\": %lld, \"flush_ok\": %s, "
           "\"journal_mode\": \"wal\", \"synchronous\": \"NORMAL\", \"batch_max\": 1024, "
           "\"flush_ms\": %d, \"buffered\": %d}\n",
           np, (double)(t1 - t0) / 1e9, rps, (unsigned long long)atomic_load(&appended),
           (unsigned long long)committed, (unsigned long long)dropped, rows,
           fst == TD_OK ? "true" : "false", FLUSH_MS, BUFFERED);
    /* honest: every appended record is durable and none was dropped */
    return fst == TD_OK && dropped == 0 && rows == (long long)atomic_load(&appended) ? 0 : 1;
}
