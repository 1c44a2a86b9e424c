/* leader.c - the daemon's side of the scheduling lease: a timer renews it
 * (or tries to take it) every TD_LEASE_TICK_MS; on becoming the leader the
 * replica picks up the store and runs a pass, so that what the previous
 * leader left unscheduled (acknowledged submits among it) is decided; it
 * logs one line per change of leadership. */
#include "daemon/leader.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/lease.h"

struct td_leader {
    uv_timer_t timer;
    td_lease *lease;
    td_control *control;
    td_leader_refresh_fn refresh;
    void *ud;
    int64_t term;     /* scheduling under it now; 0: not the leader */
    bool failing;     /* the last tick could not reach the server */
    char holder[256]; /* who leads, as last seen */
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

static void tick(td_leader *l)
{
    td_err err;
    char holder[sizeof l->holder];
    int64_t term = 0, before = l->term;
    td_status st = td_lease_tick(l->lease, &term, holder, sizeof holder, &err);
    if (st != TD_OK && !l->failing)
        fprintf(stderr, "tenantd: leader: %s (%s)\n", err.msg,
                term ? "keeping the term until the lease expires" : "not scheduling");
    if (st == TD_OK && l->failing)
        fprintf(stderr, "tenantd: leader: the scheduling lease is reachable again\n");
    l->failing = st != TD_OK;
    l->term = term;
    if (term && term != before) {
        fprintf(stderr, "tenantd: leader: this replica schedules the batch queue now (term %lld, "
                        "lease %d ms)\n",
                (long long)term, TD_LEASE_MS);
        /* what the last leader left: commits it never scheduled */
        if (l->refresh)
            l->refresh(l->ud);
        if (l->term)
            run_pass(l);
    } else if (!term && before) {
        fprintf(stderr, "tenantd: leader: no longer the scheduling leader (term %lld; leader "
                        "now: %s)\n",
                (long long)before, st == TD_OK ? holder : "unknown, the server is unreachable");
    } else if (st == TD_OK && !term && strcmp(holder, l->holder) != 0) {
        fprintf(stderr, "tenantd: leader: %s schedules the batch queue\n", holder);
    }
    if (st == TD_OK)
        snprintf(l->holder, sizeof l->holder, "%s", holder);
}

static void on_tick(uv_timer_t *t)
{
    tick(t->data);
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
    uv_timer_init(loop, &l->timer);
    l->timer.data = l;
    control->leader = l;
    tick(l);
    uv_timer_start(&l->timer, on_tick, TD_LEASE_TICK_MS, TD_LEASE_TICK_MS);
    *out = l;
    return TD_OK;
}

void td_leader_stop(td_leader *l)
{
    if (!l || !l->lease)
        return;
    uv_timer_stop(&l->timer);
    td_lease_close(l->lease); /* gives the lease up if held */
    l->lease = NULL;
    l->term = 0;
    uv_close((uv_handle_t *)&l->timer, NULL);
}

void td_leader_destroy(td_leader *l)
{
    if (!l)
        return;
    td_lease_close(l->lease);
    free(l);
}

int64_t td_leader_term(const td_leader *l)
{
    if (!l)
        return -1;
    /* a term whose lease may have expired unrenewed is not used: another
     * replica may have taken it over (its write would be refused anyway) */
    if (l->term && (!l->lease || mono_ns() >= td_lease_valid_until(l->lease)))
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
