/* test_shared.c - shared per-tenant limits through a real redis-server on a
 * free loopback port: two replicas sharing one bucket, reconciliation, a
 * flushed script cache, Redis killed and restarted (degraded mode at
 * rate/replicas and back), Redis frozen (takes never wait for it). */
/* cmocka.h needs these before it */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io/shared.h"
#include "testredis.h"


static int group_setup(void **state)
{
    (void)state;
    return redis_group_setup("test_shared");
}

/* ---- helpers ---- */

static td_shared *make(uint32_t replicas, double chunk_fraction, const char *prefix)
{
    td_shared_opts o = {.addr = redis_addr,
                        .replicas = replicas,
                        .chunk_fraction = chunk_fraction,
                        .timeout_ms = 50,
                        .key_prefix = prefix};
    td_shared *s = NULL;
    td_err err = {{0}};
    assert_int_equal(td_shared_create(&o, 16, &s, &err), TD_OK);
    return s;
}

typedef struct {
    td_shared *s;
    size_t slot;
    const char *tenant;
    td_rate rate;
    atomic_bool *stop;
    long admitted;
    long refused;
    pthread_t thread;
} hammer;

static void *hammer_main(void *arg)
{
    hammer *h = arg;
    while (!atomic_load(h->stop)) {
        uint64_t retry = 0;
        td_status st = td_shared_take(h->s, h->slot, h->tenant, &h->rate, 1, mono_ns(), &retry);
        if (st == TD_OK) {
            h->admitted++;
        } else {
            assert_int_equal(st, TD_EAGAIN);
            h->refused++;
            sleep_ns(20000); /* stay far above the rate, but leave the CPUs to others */
        }
    }
    return NULL;
}

/* Runs the hammers for ns of real time; returns the elapsed seconds. */
static double run_hammers(hammer *hs, size_t n, uint64_t ns)
{
    atomic_bool stop;
    atomic_init(&stop, false);
    uint64_t t0 = mono_ns();
    for (size_t i = 0; i < n; i++) {
        hs[i].stop = &stop;
        hs[i].admitted = hs[i].refused = 0;
        assert_int_equal(pthread_create(&hs[i].thread, NULL, hammer_main, &hs[i]), 0);
    }
    sleep_ns(ns);
    atomic_store(&stop, true);
    for (size_t i = 0; i < n; i++)
        pthread_join(hs[i].thread, NULL);
    return (double)(mono_ns() - t0) / 1e9;
}

static bool wait_degraded(td_shared *s, bool want, uint64_t within_ns)
{
    for (uint64_t end = mono_ns() + within_ns; mono_ns() < end; sleep_ns(MS))
        if (td_shared_degraded(s) == want)
            return true;
    return td_shared_degraded(s) == want;
}

static const td_rate rate_1k = {.cost = 1000, .per_ns = S, .burst = 1000};

/* ---- cases ---- */

static void test_bad_input(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        const char *addr;
        uint32_t replicas;
        double chunk;
        size_t nslots;
        td_status want;
    } create_rows[] = {
        {"no address", NULL, 1, 0, 4, TD_EINVAL},
        {"empty address", "", 1, 0, 4, TD_EINVAL},
        {"bad port", "127.0.0.1:http", 1, 0, 4, TD_EINVAL},
        {"port out of range", "127.0.0.1:70000", 1, 0, 4, TD_EINVAL},
        {"missing host", ":6379", 1, 0, 4, TD_EINVAL},
        {"no replicas", "127.0.0.1:1", 0, 0, 4, TD_EINVAL},
        {"chunk above 1", "127.0.0.1:1", 1, 1.5, 4, TD_EINVAL},
        {"negative chunk", "127.0.0.1:1", 1, -0.1, 4, TD_EINVAL},
        {"no slots", "127.0.0.1:1", 1, 0, 0, TD_EINVAL},
        {"defaults (nothing listens: not an error)", "127.0.0.1:1", 1, 0, 4, TD_OK},
        {"bracketed host", "[127.0.0.1]:1", 1, 0, 4, TD_OK},
    };
    for (size_t i = 0; i < sizeof create_rows / sizeof *create_rows; i++) {
        td_shared_opts o = {.addr = create_rows[i].addr,
                            .replicas = create_rows[i].replicas,
                            .chunk_fraction = create_rows[i].chunk};
        td_shared *s = NULL;
        td_err err = {{0}};
        td_status st = td_shared_create(&o, create_rows[i].nslots, &s, &err);
        if (st != create_rows[i].want)
            fail_msg("create row \"%s\": got %s (%s)", create_rows[i].name, td_strerror(st),
                     err.msg);
        if (st != TD_OK)
            assert_true(err.msg[0] != '\0');
        td_shared_destroy(s);
    }
    td_shared_destroy(NULL);

    char long_name[300];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    char max_name[256];
    memset(max_name, 'y', sizeof max_name - 1);
    max_name[sizeof max_name - 1] = '\0';
    static const td_rate no_period = {.cost = 10, .per_ns = 0, .burst = 10};
    static const td_rate no_burst = {.cost = 10, .per_ns = S, .burst = 0};
    static const td_rate unlimited = {.cost = 0, .per_ns = S, .burst = 0};
    const struct {
        const char *name;
        size_t slot;
        const char *tenant;
        const td_rate *rate;
        double cost;
        td_status want;
    } take_rows[] = {
        {"slot out of range", 16, "t", &rate_1k, 1, TD_EINVAL},
        {"no tenant", 0, NULL, &rate_1k, 1, TD_EINVAL},
        {"no rate", 0, "t", NULL, 1, TD_EINVAL},
        {"negative cost", 0, "t", &rate_1k, -1, TD_EINVAL},
        {"NaN cost", 0, "t", &rate_1k, NAN, TD_EINVAL},
        {"tenant name of 299 bytes", 0, long_name, &rate_1k, 1, TD_EINVAL},
        {"rate without a period", 0, "t", &no_period, 1, TD_EINVAL},
        {"rate without a burst", 0, "t", &no_burst, 1, TD_EINVAL},
        {"unlimited rate", 0, "t", &unlimited, 1e9, TD_OK},
        {"tenant name of 255 bytes (first take on credit)", 1, max_name, &rate_1k, 1, TD_OK},
    };
    td_shared *s = make(1, 0, "tbad:");
    for (size_t i = 0; i < sizeof take_rows / sizeof *take_rows; i++) {
        uint64_t retry = 0;
        td_status st = td_shared_take(s, take_rows[i].slot, take_rows[i].tenant, take_rows[i].rate,
                                      take_rows[i].cost, mono_ns(), &retry);
        if (st != take_rows[i].want)
            fail_msg("take row \"%s\": got %s", take_rows[i].name, td_strerror(st));
    }
    td_shared_adjust(s, 16, 1); /* out of range: ignored */
    td_shared_adjust(s, 5, -1); /* never taken from: ignored */
    td_shared_destroy(s);
}

/* (a) Two replicas share one bucket: what both admit together stays within
 * burst + rate x elapsed + replicas x chunk, and comes close to it. */
static void test_two_replicas_share_one_bucket(void **state)
{
    (void)state;
    td_shared *a = make(2, 0.05, "ta:"), *b = make(2, 0.05, "ta:");
    hammer hs[2] = {{.s = a, .slot = 3, .tenant = "tenant-a", .rate = rate_1k},
                    {.s = b, .slot = 7, .tenant = "tenant-a", .rate = rate_1k}};
    double elapsed = run_hammers(hs, 2, 2 * S);
    long total = hs[0].admitted + hs[1].admitted;
    double bucket = rate_1k.burst + rate_1k.cost * elapsed;
    double chunk = 0.05 * rate_1k.burst;
    double bound = bucket + 2 * chunk + 2 /* first-take credit */;
    printf("    two replicas, %.3f s: admitted %ld + %ld = %ld (bucket %.0f, bound %.0f), "
           "refused %ld\n",
           elapsed, hs[0].admitted, hs[1].admitted, total, bucket, bound,
           hs[0].refused + hs[1].refused);
    assert_false(td_shared_degraded(a));
    assert_false(td_shared_degraded(b));
    assert_true((double)total <= bound);
    assert_true((double)total >= 0.8 * bucket);
    assert_true(hs[0].admitted > 0 && hs[1].admitted > 0);
    td_shared_destroy(a);
    td_shared_destroy(b);
}

static void take_until(td_shared *s, size_t slot, const char *tenant, const td_rate *r, long count)
{
    long got = 0;
    for (uint64_t end = mono_ns() + 2 * S; got < count && mono_ns() < end;) {
        uint64_t retry;
        if (td_shared_take(s, slot, tenant, r, 1, mono_ns(), &retry) == TD_OK)
            got++;
        else
            sleep_ns(MS);
    }
    assert_int_equal(got, count);
}

/* (b) Reconciliation: a refund is spendable at once, an extra charge is a
 * debt paid before the next take; Redis' wait comes back as retry-after;
 * the bucket key has a TTL. */
static void test_reconciliation(void **state)
{
    (void)state;
    /* 10 per hour, burst 10, one chunk = the whole burst. */
    const td_rate r = {.cost = 10, .per_ns = 3600 * S, .burst = 10};
    td_shared *s = make(1, 1.0, "tb:");
    uint64_t retry = 0;
    take_until(s, 2, "tenant-b", &r, 10);
    sleep_ns(50 * MS); /* let the refused refill meet the empty bucket */
    assert_int_equal(td_shared_take(s, 2, "tenant-b", &r, 1, mono_ns(), &retry), TD_EAGAIN);
    sleep_ns(50 * MS);
    assert_int_equal(td_shared_take(s, 2, "tenant-b", &r, 1, mono_ns(), &retry), TD_EAGAIN);
    /* Redis said when a quarter chunk (2.5 units at 10/h) will be there: ~15 min. */
    assert_true(retry > 60 * S);

    td_shared_adjust(s, 2, -3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(td_shared_take(s, 2, "tenant-b", &r, 1, mono_ns(), &retry), TD_OK);
    assert_int_equal(td_shared_take(s, 2, "tenant-b", &r, 1, mono_ns(), &retry), TD_EAGAIN);

    td_shared_adjust(s, 2, 2);  /* lease -2 */
    td_shared_adjust(s, 2, -2); /* lease 0 */
    assert_int_equal(td_shared_take(s, 2, "tenant-b", &r, 1, mono_ns(), &retry), TD_EAGAIN);
    td_shared_adjust(s, 2, -1.5);
    assert_int_equal(td_shared_take(s, 2, "tenant-b", &r, 1, mono_ns(), &retry), TD_OK);
    assert_int_equal(td_shared_take(s, 2, "tenant-b", &r, 1, mono_ns(), &retry), TD_EAGAIN);
    assert_int_equal(td_shared_take(s, 2, "tenant-b", &r, 0.5, mono_ns(), &retry), TD_OK);
    assert_false(td_shared_degraded(s));

    char buf[64];
    assert_true(redis_cmd("PTTL tb:tenant-b", buf, sizeof buf));
    long long pttl = strtoll(buf + 1, NULL, 10);
    assert_true(buf[0] == ':' && pttl > 0 && pttl <= 2LL * 3600 * 1000);
    td_shared_destroy(s);
}

/* A flushed script cache (NOSCRIPT) is met with EVAL, not with degraded mode. */
static void test_script_flushed(void **state)
{
    (void)state;
    td_shared *s = make(1, 0.05, "te:");
    hammer h = {.s = s, .slot = 0, .tenant = "tenant-e", .rate = rate_1k};
    run_hammers(&h, 1, 300 * MS);
    assert_true(h.admitted > 0);
    char buf[64];
    assert_true(redis_cmd("SCRIPT FLUSH", buf, sizeof buf));
    assert_string_equal(buf, "+OK");
    run_hammers(&h, 1, 300 * MS);
    assert_true(h.admitted >= 100); /* 300 ms at 1000/s */
    assert_false(td_shared_degraded(s));
    td_shared_destroy(s);
}

static int stderr_to(const char *path)
{
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, STDERR_FILENO);
    close(fd);
    return saved;
}

static void stderr_restore(int saved)
{
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
}

static int count_lines(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, needle))
            n++;
    fclose(f);
    return n;
}

/* (c) Redis killed mid-run: both replicas notice within about a timeout
 * and a poll, say so once, and limit at rate/2 each; Redis back on the same
 * port: both leave degraded mode within a second and say so once. */
static void test_redis_killed_and_restarted(void **state)
{
    (void)state;
    char log_path[] = "/tmp/test_shared_stderr_XXXXXX";
    int lfd = mkstemp(log_path);
    assert_true(lfd >= 0);
    close(lfd);
    int saved = stderr_to(log_path);

    td_shared *a = make(2, 0.05, "tc:"), *b = make(2, 0.05, "tc:");
    hammer hs[2] = {{.s = a, .slot = 0, .tenant = "tenant-c", .rate = rate_1k},
                    {.s = b, .slot = 0, .tenant = "tenant-c", .rate = rate_1k}};
    run_hammers(hs, 2, 300 * MS);
    assert_false(td_shared_degraded(a));
    assert_false(td_shared_degraded(b));

    /* Kill while the hammers run, so refills are in flight. */
    atomic_bool stop;
    atomic_init(&stop, false);
    for (int i = 0; i < 2; i++) {
        hs[i].stop = &stop;
        assert_int_equal(pthread_create(&hs[i].thread, NULL, hammer_main, &hs[i]), 0);
    }
    sleep_ns(100 * MS);
    uint64_t killed = mono_ns();
    redis_stop(SIGKILL);
    bool da = wait_degraded(a, true, 2 * S);
    bool db = wait_degraded(b, true, 2 * S);
    uint64_t noticed = mono_ns() - killed;
    atomic_store(&stop, true);
    for (int i = 0; i < 2; i++)
        pthread_join(hs[i].thread, NULL);
    assert_true(da && db);

    /* A tenant first seen while degraded, on both replicas: rate/2 and
     * burst/2 each. */
    hammer ds[2] = {{.s = a, .slot = 1, .tenant = "tenant-c2", .rate = rate_1k},
                    {.s = b, .slot = 1, .tenant = "tenant-c2", .rate = rate_1k}};
    double elapsed = run_hammers(ds, 2, S);
    double share = rate_1k.burst / 2 + rate_1k.cost / 2 * elapsed;
    bool still = td_shared_degraded(a) && td_shared_degraded(b);

    assert_int_equal(redis_start(), 0);
    uint64_t up = mono_ns();
    bool ra = wait_degraded(a, false, 3 * S);
    bool rb = wait_degraded(b, false, 3 * S);
    uint64_t recovered = mono_ns() - up;
    hammer again = {.s = a, .slot = 0, .tenant = "tenant-c", .rate = rate_1k};
    run_hammers(&again, 1, 200 * MS);
    bool healthy = !td_shared_degraded(a) && !td_shared_degraded(b);
    td_shared_destroy(a);
    td_shared_destroy(b);
    stderr_restore(saved);

    printf("    degraded %.1f ms after the kill; local shares %ld and %ld of %.0f in %.3f s; "
           "recovered %.1f ms after Redis answered; %ld admitted after\n",
           (double)noticed / 1e6, ds[0].admitted, ds[1].admitted, share, elapsed,
           (double)recovered / 1e6, again.admitted);
    assert_true(noticed < 250 * MS); /* timeout 50 ms + poll 10 ms, with slack */
    assert_true(still);
    for (int i = 0; i < 2; i++) {
        assert_true((double)ds[i].admitted <= share + 1);
        assert_true((double)ds[i].admitted >= 0.8 * share);
    }
    assert_true(ra && rb);
    assert_true(recovered < S);
    assert_true(healthy);
    assert_true(again.admitted > 0);

    char needle[160];
    snprintf(needle, sizeof needle, "tenantd: redis %s unreachable (", redis_addr);
    assert_int_equal(count_lines(log_path, needle), 2);
    assert_int_equal(count_lines(log_path, "); limiting locally at rate/2"), 2);
    snprintf(needle, sizeof needle, "tenantd: redis %s reachable again", redis_addr);
    assert_int_equal(count_lines(log_path, needle), 2);
    unlink(log_path);
}

/* (d) Redis frozen (SIGSTOP: connections accepted, never answered): no
 * take waits for it; the replica notices within a timeout and a ping. */
static void test_take_never_blocks(void **state)
{
    (void)state;
    td_shared *s = make(1, 0.05, "td:");
    hammer h = {.s = s, .slot = 0, .tenant = "tenant-d", .rate = rate_1k};
    run_hammers(&h, 1, 200 * MS);
    assert_false(td_shared_degraded(s));

    assert_int_equal(kill(redis_pid, SIGSTOP), 0);
    uint64_t stopped = mono_ns(), noticed = 0, max_ns = 0;
    long ok = 0;
    for (int i = 0; i < 10000; i++) {
        uint64_t retry = 0;
        uint64_t t0 = mono_ns();
        td_status st = td_shared_take(s, 0, "tenant-d", &rate_1k, 1, t0, &retry);
        uint64_t dt = mono_ns() - t0;
        assert_true(st == TD_OK || st == TD_EAGAIN);
        ok += st == TD_OK;
        if (dt > max_ns)
            max_ns = dt;
        if (!noticed && td_shared_degraded(s))
            noticed = mono_ns() - stopped;
        if (i % 10 == 0)
            sleep_ns(200000); /* spread the takes over ~0.3 s of Redis timeouts */
    }
    kill(redis_pid, SIGCONT);
    uint64_t resumed = mono_ns();
    bool back = wait_degraded(s, false, 3 * S);
    uint64_t recovered = mono_ns() - resumed;
    printf("    10k takes against a frozen Redis: max %.1f us, %ld admitted; degraded after "
           "%.1f ms; recovered %.1f ms after SIGCONT\n",
           (double)max_ns / 1e3, ok, (double)noticed / 1e6, (double)recovered / 1e6);
    td_shared_destroy(s);
    assert_true(max_ns < MS);
    assert_true(noticed > 0 && noticed < 300 * MS);
    assert_true(back && recovered < S);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_two_replicas_share_one_bucket),
        cmocka_unit_test(test_reconciliation),
        cmocka_unit_test(test_script_flushed),
        cmocka_unit_test(test_redis_killed_and_restarted),
        cmocka_unit_test(test_take_never_blocks),
    };
    return cmocka_run_group_tests(tests, group_setup, redis_group_teardown);
}
