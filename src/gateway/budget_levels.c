/* budget_levels.c - a request's budgets at two levels, its key's own and
 * its tenant's: reserved at all or at none, settled at all. Pure logic on
 * the gateway's spend counters; time comes in as an argument. */
#include "tenantd/gateway.h"

/* Reserves cost at each of the n budgets of slot in bs, all or none; a
 * refusal gives back what this call reserved and is noted in v. */
static td_status reserve_level(td_budgets *bs, uint32_t slot, const td_gw_budget *bud, size_t n,
                               const td_gw_key *k, int64_t cost, int64_t now_s, td_period *per,
                               int64_t *start, int *nres, td_gw_budget_verdict *v)
{
    *nres = 0;
    for (size_t i = 0; i < n; i++) {
        const td_gw_budget *b = &bud[i];
        int64_t st_s = 0, spent = 0;
        if (td_budgets_reserve(bs, slot, b->period, b->amount_nano, cost, b->shadow, now_s, &st_s,
                               &spent) != TD_OK) {
            for (int j = 0; j < *nres; j++)
                td_budgets_settle(bs, slot, per[j], start[j], -cost);
            *nres = 0;
            v->refused.budget = b;
            v->refused.key = k;
            v->refused.spent_nano = spent;
            return TD_EQUOTA;
        }
        per[*nres] = b->period;
        start[(*nres)++] = st_s;
        if (b->shadow && (spent > b->amount_nano || cost > b->amount_nano - spent) &&
            v->nshadow < sizeof v->shadow / sizeof v->shadow[0]) {
            td_gw_budget_note *s = &v->shadow[v->nshadow++];
            s->budget = b;
            s->key = k;
            s->spent_nano = spent;
        }
    }
    return TD_OK;
}

td_status td_gateway_budget_reserve(td_gateway *g, const td_gw_tenant *t, const td_gw_key *k,
                                    int64_t cost_nano, int64_t now_s, td_gw_budget_hold *h,
                                    td_gw_budget_verdict *v)
{
    h->reserved_nano = cost_nano;
    h->n = h->nkey = 0;
    v->refused.budget = NULL;
    v->refused.key = NULL;
    v->refused.spent_nano = 0;
    v->nshadow = 0;
    if (cost_nano < 0)
        return TD_EINVAL;
    td_budgets *kbs = td_gateway_key_budgets(g);
    if (k && k->name && k->nbudgets &&
        reserve_level(kbs, k->slot, k->budgets, k->nbudgets, k, cost_nano, now_s, h->key_period,
                      h->key_start, &h->nkey, v) != TD_OK)
        return TD_EQUOTA;
    if (reserve_level(td_gateway_budgets(g), t->slot, t->budgets, t->nbudgets, NULL, cost_nano,
                      now_s, h->period, h->start, &h->n, v) != TD_OK) {
        for (int j = 0; j < h->nkey; j++)
            td_budgets_settle(kbs, k->slot, h->key_period[j], h->key_start[j], -cost_nano);
        h->nkey = 0;
        return TD_EQUOTA;
    }
    return TD_OK;
}

void td_gateway_budget_settle(td_gateway *g, const td_gw_tenant *t, const td_gw_key *k,
                              td_gw_budget_hold *h, int64_t price_nano)
{
    int64_t delta = price_nano - h->reserved_nano;
    for (int i = 0; i < h->n; i++)
        td_budgets_settle(td_gateway_budgets(g), t->slot, h->period[i], h->start[i], delta);
    for (int i = 0; k && i < h->nkey; i++)
        td_budgets_settle(td_gateway_key_budgets(g), k->slot, h->key_period[i], h->key_start[i],
                          delta);
    h->n = h->nkey = 0;
}
