/* leader.c - the daemon's side of the scheduling lease: a thread of its own
 * renews it (or tries to take it) every TD_LEASE_TICK_MS and hands each
 * outcome to the loop; on becoming the leader the replica picks up the
 * store and runs a pass, so that what the previous leader left unscheduled
 * (acknowledged submits among it) is decided; it logs one line per change
 * of leadership.
 *
 * Why a thread and not libpq's non-blocking API on the loop: the lease is
 * a few statements a second on a connection of its own, so a thread keeps
 * them plain sequential code, and its renewals keep their rhythm however
 * busy the loop is (a long apply or pass would otherwise delay a renewal
 * and lose the lease, or delay a follower's takeover). The loop never
 * waits on it: it reads the outcome handed over, and schedules only while
 * the last renewal it was told of is younger than the lease. */
#include "daemon/leader.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/lease.h"

/* One tick's outcome, handed from the lease thread to the loop. */
typedef struct {
    td_status st;
    int64_t term, valid_until;
    char holder[256];
    char err[256];
} tick_result;

struct td_leader {
    uv_async_t async;
    td_lease *lease; /* the thread's while it runs */
    td_control *control;
    td_leader_refresh_fn refresh;
    void *ud;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    bool running, stopping, fresh; /* under mu; fresh: result not yet seen */
    tick_result result;            /* under mu */
    /* the loop's own, from the results seen */
    int64_t term;        /* scheduling under it now; 0: not the leader */
    int64_t valid_until; /* monotonic ns: the term is certainly current until */
    bool failing;        /* the last tick could not reach the server */
    char holder[256];    /* who leads, as last seen */
};

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* One pass over the snapshot served, written under the term. */
static void run_pass(td_leader *l)
{
    td_err err;
    td_status st = td_control_commit(l->control, td_control_snapshot(l->control), NULL, 0, NULL,
                                     0, &err);
    if (st != TD_OK)
        fprintf(stderr, "tenantd: leader: scheduling pass (term %lld): %s\n",
                (long long)l->term, err.msg);
}

/* Asks the server once (the lease thread, or the starting thread before
 * the thread exists). */
static void ask(td_lease *lease, tick_result *r)
{
    td_err err = {{0}};
    r->term = 0;
    r->st = td_lease_tick(lease, &r->term, r->holder, sizeof r->holder, &err);
    r->valid_until = td_lease_valid_until(lease);
    snprintf(r->err, sizeof r->err, "%s", err.msg);
}

/* The loop takes a tick's outcome: logs the changes, and on becoming the
 * leader picks up the store and runs a pass. */
static void apply_result(td_leader *l, const tick_result *r)
{
    int64_t before = l->term;
    if (r->st != TD_OK && !l->failing)
        fprintf(stderr, "tenantd: leader: %s (%s)\n", r->err,
                r->term ? "keeping the term until the lease expires" : "not scheduling");
    if (r->st == TD_OK && l->failing)
        fprintf(stderr, "tenantd: leader: the scheduling lease is reachable again\n");
    l->failing = r->st != TD_OK;
    l->term = r->term;
    l->valid_until = r->valid_until;
    if (r->term && r->term != before) {
        fprintf(stderr, "tenantd: leader: this replica schedules the batch queue now (term %lld, "
                        "lease %d ms)\n",
                (long long)r->term, TD_LEASE_MS);
        /* what the last leader left: commits it never scheduled */
        if (l->refresh)
            l->refresh(l->ud);
        if (l->term)
            run_pass(l);
    } else if (!r->term && before) {
        fprintf(stderr, "tenantd: leader: no longer the scheduling leader (term %lld; leader "
                        "now: %s)\n",
                (long long)before,
                r->st == TD_OK ? r->holder : "unknown, the server is unreachable");
    } else if (r->st == TD_OK && !r->term && strcmp(r->holder, l->holder) != 0) {
        fprintf(stderr, "tenantd: leader: %s schedules the batch queue\n", r->holder);
    }
    if (r->st == TD_OK)
        snprintf(l->holder, sizeof l->holder, "%s", r->holder);
}

static void on_result(uv_async_t *a)
{
    td_leader *l = a->data;
    tick_result r;
    pthread_mutex_lock(&l->mu);
    bool fresh = l->fresh;
    r = l->result;
    l->fresh = false;
    pthread_mutex_unlock(&l->mu);
    if (fresh)
        apply_result(l, &r);
}

/* The lease thread: a tick, its outcome to the loop, a wait until the next
 * tick or a stop; at the stop, the lease given up. */
static void *lease_main(void *arg)
{
    td_leader *l = arg;
    tick_result r;
    pthread_mutex_lock(&l->mu);
    while (!l->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t ns = ts.tv_nsec + (int64_t)TD_LEASE_TICK_MS * 1000000LL;
        ts.tv_sec += (time_t)(ns / 1000000000LL);
        ts.tv_nsec = (long)(ns % 1000000000LL);
        while (!l->stopping && pthread_cond_timedwait(&l->wake, &l->mu, &ts) == 0)
            ;
        if (l->stopping)
            break;
        pthread_mutex_unlock(&l->mu);
        ask(l->lease, &r);
        pthread_mutex_lock(&l->mu);
        l->result = r;
        l->fresh = true;
        uv_async_send(&l->async);
    }
    pthread_mutex_unlock(&l->mu);
    td_lease_close(l->lease); /* gives the lease up if held */
    l->lease = NULL;
    return NULL;
}

/* Ends the lease thread, which gives the lease up: bounded by one tick's
 * waits and the release's (lease.h). */
static void stop_thread(td_leader *l)
{
    if (!l->running)
        return;
    pthread_mutex_lock(&l->mu);
    l->stopping = true;
    pthread_cond_signal(&l->wake);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    l->running = false;
}

td_status td_leader_start(uv_loop_t *loop, const char *url, const char *name, td_control *control,
                          td_leader_refresh_fn refresh, void *ud, td_leader **out, td_err *err)
{
    td_leader *l = calloc(1, sizeof *l);
    if (!l)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    td_status st = td_lease_open(url, name, &l->lease, err);
    if (st != TD_OK) {
        free(l);
        return st;
    }
    l->control = control;
    l->refresh = refresh;
    l->ud = ud;
    pthread_mutex_init(&l->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->wake, &ca);
    pthread_condattr_destroy(&ca);
    uv_async_init(loop, &l->async, on_result);
    l->async.data = l;
    control->leader = l;
    /* the first tick before serving: a replica starting alone leads at once */
    tick_result r;
    ask(l->lease, &r);
    apply_result(l, &r);
    if (pthread_create(&l->thread, NULL, lease_main, l) != 0) {
        fprintf(stderr, "tenantd: leader: cannot start the lease thread; not scheduling\n");
        td_lease_close(l->lease);
        l->lease = NULL;
        l->term = 0;
    } else {
        l->running = true;
    }
    *out = l;
    return TD_OK;
}

void td_leader_stop(td_leader *l)
{
    if (!l || l->stopping)
        return;
    stop_thread(l);
    l->stopping = true;
    l->term = 0;
    uv_close((uv_handle_t *)&l->async, NULL);
}

void td_leader_destroy(td_leader *l)
{
    if (!l)
        return;
    stop_thread(l);
    td_lease_close(l->lease);
    pthread_cond_destroy(&l->wake);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

int64_t td_leader_term(const td_leader *l)
{
    if (!l)
        return -1;
    /* a term whose lease may have expired unrenewed is not used: another
     * replica may have taken it over (its write would be refused anyway) */
    if (l->term && mono_ns() >= l->valid_until)
        return 0;
    return l->term;
}

void td_leader_refused(td_leader *l, int64_t term)
{
    if (!l || l->term != term)
        return;
    fprintf(stderr, "tenantd: leader: no longer the scheduling leader (term %lld refused by the "
                    "database)\n",
            (long long)term);
    l->term = 0;
}

void td_leader_picked_up(td_leader *l)
{
    if (l && td_leader_term(l) > 0)
        run_pass(l);
}

int td_leader_is(const td_leader *l)
{
    return td_leader_term(l) != 0;
}
