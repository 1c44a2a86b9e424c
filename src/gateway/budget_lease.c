/* budget_lease.c - lease arithmetic of budgets shared through Redis. Every
 * rounding goes the budget's way: claims and needs round up to the micro-
 * unit, give-backs round down, so Redis never holds less than was spent. */
#include "gateway/budget_lease.h"

#define NPM TD_LEASE_NANO_PER_MICRO

static int64_t ceil_micro(int64_t nano)
{
    return nano <= 0 ? 0 : nano / NPM + (nano % NPM != 0);
}

static int64_t sat_add(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b)
        return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b)
        return INT64_MIN;
    return a + b;
}

int64_t td_budget_chunk(int64_t limit_nano, int64_t cost_nano)
{
    if (limit_nano < 0)
        limit_nano = 0;
    if (cost_nano < 0)
        cost_nano = 0;
    int64_t c = limit_nano / TD_LEASE_FRACTION_DIV;
    int64_t by_cost = cost_nano > INT64_MAX / TD_LEASE_COSTS ? INT64_MAX : cost_nano * TD_LEASE_COSTS;
    if (by_cost < c)
        c = by_cost;
    if (c < cost_nano)
        c = cost_nano;
    return c < NPM ? NPM : c;
}

void td_budget_lease_ask(int64_t own_nano, int64_t lease_nano, int64_t cost_nano,
                         int64_t chunk_nano, td_budget_ask *a)
{
    int64_t held = lease_nano > 0 ? lease_nano : 0;
    a->claimed = ceil_micro(sat_add(own_nano > 0 ? own_nano : 0, held));
    /* the claim, rounded up, already holds claimed*1000 - own of lease */
    int64_t have = (int64_t)a->claimed * NPM - (own_nano > 0 ? own_nano : 0);
    a->need = cost_nano > have ? ceil_micro(cost_nano - have) : 0;
    int64_t want = chunk_nano > have ? ceil_micro(chunk_nano - have) : 0;
    a->want = want > a->need ? want : a->need;
}

int64_t td_budget_lease_grant(int64_t limit_micro, int64_t cap_micro, int64_t *total,
                              int64_t *mine, const td_budget_ask *a, bool force)
{
    int64_t surplus = 0;
    if (a->claimed > *mine) {
        *total += a->claimed - *mine;
        *mine = a->claimed;
    } else {
        surplus = *mine - a->claimed;
    }
    int64_t need = a->need - surplus, want = a->want - surplus;
    if (need <= 0)
        return 0;
    if (want < need)
        want = need;
    int64_t avail = limit_micro - *total, g = 0;
    if (cap_micro >= 0 && cap_micro - *mine < avail)
        avail = cap_micro - *mine;
    if (force)
        g = want;
    else if (avail >= need)
        g = want < avail ? want : avail;
    *total += g;
    *mine += g;
    return g;
}

int64_t td_budget_lease_after(int64_t mine_micro, int64_t own_nano)
{
    int64_t m = mine_micro > INT64_MAX / NPM ? INT64_MAX : mine_micro * NPM;
    return sat_add(m, own_nano == INT64_MIN ? INT64_MAX : -own_nano);
}

int64_t td_budget_shared_spent(int64_t total_micro, int64_t lease_nano)
{
    int64_t t = total_micro > INT64_MAX / NPM ? INT64_MAX : total_micro * NPM;
    int64_t v = sat_add(t, lease_nano > 0 ? -lease_nano : 0);
    return v < 0 ? 0 : v;
}

int64_t td_budget_lease_settle(int64_t lease_nano, int64_t reserved_nano, int64_t price_nano)
{
    int64_t back = sat_add(reserved_nano, price_nano == INT64_MIN ? INT64_MAX : -price_nano);
    return sat_add(lease_nano, back);
}

int64_t td_budget_lease_excess(int64_t lease_nano, int64_t chunk_nano)
{
    if (chunk_nano <= 0 || lease_nano <= chunk_nano || lease_nano - chunk_nano <= chunk_nano)
        return 0;
    return (lease_nano - chunk_nano) / NPM;
}

int64_t td_budget_fallback_limit(int64_t limit_nano, uint32_t replicas, int64_t lease_nano)
{
    int64_t share = limit_nano / (int64_t)(replicas ? replicas : 1);
    if (lease_nano > 0)
        share = lease_nano < share ? share - lease_nano : 0;
    return share < 0 ? 0 : share;
}
