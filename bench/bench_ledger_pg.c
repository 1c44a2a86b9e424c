/* bench_ledger_pg.c - the ledger's records/s with the shared ledger on
 * PostgreSQL beside SQLite alone: the daemon's td_ledger fed request records
 * by one producer as fast as its writer commits them (as bench_ledger.c),
 * with opts.database set (every record also spooled, and shipped by the
 * shipper thread in batches of 500) or not ("-"). Reports records/s
 * committed locally and shipped during the window, then how long the
 * shipper takes to empty the spool once the producer stops, and checks
 * that every record reached PostgreSQL once.
 *
 * Usage: bench_ledger_pg DIR SECONDS URL|- [MAX]  (URL: a database whose
 * schema a tenantd --database created; MAX: the producer stops after that
 * many records, so that the drain stays short). One JSON object on stdout. */
#define _POSIX_C_SOURCE 200809L
#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/ledger.h"

#define BUFFERED 65536
#define FLUSH_MS 200

static td_ledger *ledger;
static atomic_bool stop;
static atomic_uint_fast64_t appended;
static uint64_t max_records = UINT64_MAX;

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *producer(void *arg)
{
    (void)arg;
    td_ledger_rec r;
    memset(&r, 0, sizeof r);
    r.kind = TD_LEDGER_REQUEST;
    r.count = 1;
    snprintf(r.route, sizeof r.route, "completions");
    snprintf(r.outcome, sizeof r.outcome, "ok");
    snprintf(r.tenant, sizeof r.tenant, "team-a");
    for (uint64_t n = 0; !atomic_load(&stop) && n < max_records; n++) {
        while (atomic_load(&appended) - td_ledger_committed(ledger) > BUFFERED - 4096 &&
               !atomic_load(&stop)) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        snprintf(r.id, sizeof r.id, "pgbench-%llu", (unsigned long long)n);
        r.start_ns = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
        r.end_ns = r.start_ns + 1000000;
        if (!td_ledger_append(ledger, &r))
            break;
        atomic_fetch_add(&appended, 1);
    }
    return NULL;
}

/* Rows of replica in tenantd_ledger; -1 if it cannot be asked. */
static long long pg_rows(const char *url, const char *replica)
{
    PGconn *c = PQconnectdb(url);
    const char *p[1] = {replica};
    PGresult *r = PQstatus(c) == CONNECTION_OK
                      ? PQexecParams(c, "SELECT count(*) FROM tenantd_ledger WHERE replica = $1",
                                     1, NULL, p, NULL, NULL, 0)
                      : NULL;
    long long n = PQresultStatus(r) == PGRES_TUPLES_OK ? atoll(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    PQfinish(c);
    return n;
}

int main(int argc, char **argv)
{
    if ((argc != 4 && argc != 5) || atof(argv[2]) <= 0) {
        fprintf(stderr, "usage: bench_ledger_pg DIR SECONDS URL|- [MAX]\n");
        return 2;
    }
    if (argc == 5)
        max_records = strtoull(argv[4], NULL, 10);
    const char *url = strcmp(argv[3], "-") ? argv[3] : NULL;
    double secs = atof(argv[2]);
    char replica[64];
    snprintf(replica, sizeof replica, "bench-%ld-%ld", (long)getpid(), (long)time(NULL));
    td_err err;
    td_ledger_opts opts = {.max_buffered = BUFFERED, .flush_ms = FLUSH_MS, .database = url,
                           .replica = replica};
    if (td_ledger_open(argv[1], &opts, &ledger, &err) != TD_OK) {
        fprintf(stderr, "bench_ledger_pg: %s\n", err.msg);
        return 1;
    }
    pthread_t th;
    double t0 = mono_s();
    pthread_create(&th, NULL, producer, NULL);
    while (mono_s() - t0 < secs && atomic_load(&appended) < max_records) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&stop, true);
    pthread_join(th, NULL);
    td_status fst = td_ledger_flush(ledger, &err);
    double t1 = mono_s(); /* everything appended is committed in SQLite */
    uint64_t committed = td_ledger_committed(ledger);
    uint64_t spooled_at_flush = td_ledger_spooled(ledger), s1 = td_ledger_shipped(ledger);
    /* the drain is timed from its first batch after the flush: a database
     * that is down (an outage run) is waited for first, up to 300 s */
    while (url && td_ledger_spooled(ledger) > 0 && td_ledger_shipped(ledger) == s1 &&
           mono_s() - t1 < 300) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    double t2 = mono_s();
    uint64_t s2 = td_ledger_shipped(ledger);
    while (url && td_ledger_spooled(ledger) > 0 && mono_s() - t1 < 300) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    double t3 = mono_s();
    uint64_t shipped = td_ledger_shipped(ledger);
    uint64_t dropped = td_ledger_dropped(ledger), overflow = td_ledger_spool_overflow(ledger);
    td_ledger_close(ledger);
    long long rows = url ? pg_rows(url, replica) : -1;
    printf("{\"kind\": \"pg-ledger\", \"database\": %s, \"records\": %llu, "
           "\"commit_s\": %.3f, \"committed_per_s\": %.0f, \"shipped_before_flush\": %llu, "
           "\"spooled_at_flush\": %llu, \"waited_s\": %.3f, \"drain_s\": %.3f, "
           "\"drain_per_s\": %.0f, \"end_to_end_per_s\": %.0f, \"shipped\": %llu, "
           "\"dropped\": %llu, \"spool_overflow\": %llu, \"rows_in_pg\": %lld, "
           "\"flush_ok\": %s}\n",
           url ? "true" : "false", (unsigned long long)committed, t1 - t0,
           (double)committed / (t1 - t0), (unsigned long long)s1,
           (unsigned long long)spooled_at_flush, t2 - t1, t3 - t2,
           t3 > t2 ? (double)(shipped - s2) / (t3 - t2) : 0.0,
           url ? (double)shipped / (t3 - t0) : 0.0, (unsigned long long)shipped,
           (unsigned long long)dropped, (unsigned long long)overflow, rows,
           fst == TD_OK ? "true" : "false");
    /* honest: nothing dropped, and with a database every record there once */
    return fst == TD_OK && dropped == 0 && (!url || rows == (long long)committed) ? 0 : 1;
}
