/* budget.c - calendar periods and the spend counters of money budgets.
 * A counter is (period start, spend) behind a one-byte spin lock: the
 * critical section is a compare and an add, so a lock is both simpler and
 * no slower than packing two values into one CAS word. */
#include "gateway/budget.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const period_names[TD_PERIOD_COUNT] = {"day", "week", "month"};

td_status td_period_parse(const char *s, td_period *p)
{
    for (int i = 0; s && i < TD_PERIOD_COUNT; i++)
        if (strcmp(s, period_names[i]) == 0) {
            *p = (td_period)i;
            return TD_OK;
        }
    return TD_EINVAL;
}

const char *td_period_name(td_period p)
{
    return (unsigned)p < TD_PERIOD_COUNT ? period_names[p] : "?";
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
 * days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = floor_div(y, 400);
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = floor_div(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

void td_period_bounds(td_period p, int64_t t_s, int64_t *start_s, int64_t *end_s)
{
    int64_t day = floor_div(t_s, 86400);
    int64_t s, e;
    if (p == TD_PERIOD_WEEK) {
        /* 1970-01-01 was a Thursday: (day + 3) mod 7 is 0 on Mondays */
        int64_t monday = day - (((day + 3) % 7) + 7) % 7;
        s = monday;
        e = monday + 7;
    } else if (p == TD_PERIOD_MONTH) {
        int64_t y;
        int m, d;
        civil_from_days(day, &y, &m, &d);
        s = days_from_civil(y, m, 1);
        e = m == 12 ? days_from_civil(y + 1, 1, 1) : days_from_civil(y, m + 1, 1);
    } else {
        s = day;
        e = day + 1;
    }
    *start_s = s * 86400;
    *end_s = e * 86400;
}

void td_rfc3339(int64_t t_s, char *buf, size_t len)
{
    int64_t day = floor_div(t_s, 86400), sec = t_s - day * 86400, y;
    int m, d;
    civil_from_days(day, &y, &m, &d);
    snprintf(buf, len, "%04lld-%02d-%02dT%02d:%02d:%02dZ", (long long)y, m, d, (int)(sec / 3600),
             (int)(sec / 60 % 60), (int)(sec % 60));
}

typedef struct {
    atomic_flag lock;
    int64_t start_s; /* period the spend belongs to; INT64_MIN: none yet */
    int64_t spent;
} counter;

struct td_budgets {
    size_t nslots;
    counter *c; /* [nslots][TD_PERIOD_COUNT] */
};

td_status td_budgets_create(size_t nslots, td_budgets **out)
{
    if (!nslots)
        return TD_EINVAL;
    td_budgets *b = calloc(1, sizeof *b);
    /* calloc: untouched slots cost no resident memory */
    counter *c = b ? calloc(nslots * TD_PERIOD_COUNT, sizeof *c) : NULL;
    if (!c) {
        free(b);
        return TD_ENOMEM;
    }
    for (size_t i = 0; i < nslots * TD_PERIOD_COUNT; i++)
        atomic_flag_clear(&c[i].lock);
    b->nslots = nslots;
    b->c = c;
    *out = b;
    return TD_OK;
}

void td_budgets_destroy(td_budgets *b)
{
    if (!b)
        return;
    free(b->c);
    free(b);
}

static counter *at(td_budgets *b, size_t slot, td_period p)
{
    if (!b || slot >= b->nslots || (unsigned)p >= TD_PERIOD_COUNT)
        return NULL;
    return &b->c[slot * TD_PERIOD_COUNT + p];
}

static void lock(counter *c)
{
    while (atomic_flag_test_and_set_explicit(&c->lock, memory_order_acquire))
        ;
}

static void unlock(counter *c)
{
    atomic_flag_clear_explicit(&c->lock, memory_order_release);
}

/* Under the lock: moves the counter to the period of now_s if it is later. */
static void roll(counter *c, td_period p, int64_t now_s)
{
    int64_t s, e;
    td_period_bounds(p, now_s, &s, &e);
    if (c->start_s == 0 && c->spent == 0) /* fresh (calloc) */
        c->start_s = s;
    if (s > c->start_s) {
        c->start_s = s;
        c->spent = 0;
    }
}

td_status td_budgets_reserve(td_budgets *b, size_t slot, td_period p, int64_t limit_nano,
                             int64_t cost_nano, bool force, int64_t now_s, int64_t *period_start_s,
                             int64_t *spent_nano)
{
    counter *c = at(b, slot, p);
    if (!c || cost_nano < 0)
        return TD_EINVAL;
    lock(c);
    roll(c, p, now_s);
    int64_t spent = c->spent;
    td_status st = TD_OK;
    if (!force && (spent > limit_nano || cost_nano > limit_nano - spent))
        st = TD_EQUOTA;
    else
        c->spent = spent + cost_nano;
    if (period_start_s)
        *period_start_s = c->start_s;
    unlock(c);
    if (spent_nano)
        *spent_nano = spent;
    return st;
}

void td_budgets_settle(td_budgets *b, size_t slot, td_period p, int64_t period_start_s,
                       int64_t delta_nano)
{
    counter *c = at(b, slot, p);
    if (!c)
        return;
    lock(c);
    if (c->start_s == period_start_s) {
        c->spent += delta_nano;
        if (c->spent < 0)
            c->spent = 0;
    }
    unlock(c);
}

void td_budgets_replay(td_budgets *b, size_t slot, td_period p, int64_t t_s, int64_t nano,
                       int64_t now_s)
{
    counter *c = at(b, slot, p);
    int64_t s, e;
    td_period_bounds(p, now_s, &s, &e);
    if (!c || t_s < s || t_s >= e || nano <= 0)
        return;
    lock(c);
    roll(c, p, now_s);
    if (c->start_s == s)
        c->spent += nano;
    unlock(c);
}

void td_budgets_reset(td_budgets *b, size_t slot, td_period p)
{
    counter *c = at(b, slot, p);
    if (!c)
        return;
    lock(c);
    c->start_s = 0;
    c->spent = 0;
    unlock(c);
}

int64_t td_budgets_spent(td_budgets *b, size_t slot, td_period p, int64_t now_s)
{
    counter *c = at(b, slot, p);
    if (!c)
        return 0;
    int64_t s, e;
    td_period_bounds(p, now_s, &s, &e);
    lock(c);
    int64_t v = c->start_s == s ? c->spent : 0;
    unlock(c);
    return v;
}
