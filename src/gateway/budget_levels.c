/* budget_levels.c - a request's budgets at three levels, its key's own,
 * its tenant's model budgets that list its model, and its tenant's:
 * reserved at all or at none, settled at all. On this
 * process's spend counters, or with --redis on the budgets shared through
 * Redis (a td_gw_budget_backend); time comes in as an argument. */
#include "gateway/gateway.h"

/* One level's spend: this process's counters, or with --redis the shared
 * budgets (sh) over them, under the name the Redis keys carry. */
typedef struct {
    td_budgets *bs;
    const td_gw_budget_backend *sh;
    uint32_t slot;
    const char *name;
} level;

static void level_settle(const level *l, td_period p, int64_t start, int64_t delta, bool leased)
{
    if (l->sh)
        l->sh->settle(l->sh->ctx, l->slot, p, start, delta, leased);
    else
        td_budgets_settle(l->bs, l->slot, p, start, delta);
}

/* Reserves cost at each of the n budgets of l, all or none; a refusal
 * gives back what this call reserved and is noted in v. */
static td_status reserve_level(const level *l, const td_gw_budget *bud, size_t n,
                               const td_gw_key *k, int64_t cost, int64_t now_s, td_period *per,
                               int64_t *start, bool *leased, int *nres, td_gw_budget_verdict *v)
{
    *nres = 0;
    for (size_t i = 0; i < n; i++) {
        const td_gw_budget *b = &bud[i];
        int64_t st_s = 0, spent = 0;
        bool from_lease = false;
        td_status st = l->sh
                           ? l->sh->reserve(l->sh->ctx, l->slot, l->name, b->period, b->amount_nano,
                                            cost, b->shadow, now_s, &st_s, &spent, &from_lease)
                           : td_budgets_reserve(l->bs, l->slot, b->period, b->amount_nano, cost,
                                                b->shadow, now_s, &st_s, &spent);
        if (st != TD_OK) {
            for (int j = 0; j < *nres; j++)
                level_settle(l, per[j], start[j], -cost, leased[j]);
            *nres = 0;
            v->refused.budget = b;
            v->refused.key = k;
            v->refused.model = NULL;
            v->refused.spent_nano = spent;
            return TD_EQUOTA;
        }
        per[*nres] = b->period;
        leased[*nres] = from_lease;
        start[(*nres)++] = st_s;
        if (b->shadow && (spent > b->amount_nano || cost > b->amount_nano - spent) &&
            v->nshadow < sizeof v->shadow / sizeof v->shadow[0]) {
            td_gw_budget_note *s = &v->shadow[v->nshadow++];
            s->budget = b;
            s->key = k;
            s->model = NULL;
            s->spent_nano = spent;
        }
    }
    return TD_OK;
}

static level tenant_level(td_gateway *g, const td_gw_tenant *t)
{
    return (level){td_gateway_budgets(g), td_gateway_budget_shared(g), t->slot, t->name};
}

/* A key's budgets are kept in Redis as "tenant/key" (td_gateway_slot_name). */
static level key_level(td_gateway *g, const td_gw_key *k)
{
    level l = {td_gateway_key_budgets(g), td_gateway_key_budget_shared(g), 0, NULL};
    if (k) {
        l.slot = k->slot;
        l.name = td_gateway_slot_name(g, 'k', k->slot);
    }
    if (!l.name)
        l.sh = NULL; /* unnamed: no key level; never reserved at */
    return l;
}

/* A model budget's spend: a key slot of its own, named in Redis
 * "tenant/budget:MODELS". */
static level model_level(td_gateway *g, const td_gw_model_budget *m)
{
    level l = {td_gateway_key_budgets(g), td_gateway_key_budget_shared(g), m->slot,
               td_gateway_slot_name(g, 'k', m->slot)};
    if (!l.name)
        l.sh = NULL;
    return l;
}

bool td_gw_model_budget_applies(const td_gw_model_budget *b, const char *model)
{
    return model && model[0] && td_gw_model_listed(b->models, b->nmodels, model);
}

/* Gives back the model budgets' reservations of h. */
static void model_release(td_gateway *g, const td_gw_tenant *t, td_gw_budget_hold *h,
                          int64_t delta)
{
    for (int i = 0; i < h->nmodel; i++)
        for (size_t j = 0; j < t->nmodel_budgets; j++)
            if (t->model_budgets[j].slot == h->model_slot[i]) {
                level ml = model_level(g, &t->model_budgets[j]);
                level_settle(&ml, h->model_period[i], h->model_start[i], delta,
                             h->model_leased[i]);
                break;
            }
}

/* Reserves cost at each of t's model budgets listing model, into h. A
 * refusal gives back what this call reserved (not the key's) and is noted
 * in v with its model budget. */
static td_status reserve_models(td_gateway *g, const td_gw_tenant *t, const char *model,
                                int64_t cost, int64_t now_s, td_gw_budget_hold *h,
                                td_gw_budget_verdict *v)
{
    h->nmodel = 0;
    for (size_t j = 0; j < t->nmodel_budgets && h->nmodel < TD_GW_MODEL_BUDGETS; j++) {
        const td_gw_model_budget *m = &t->model_budgets[j];
        if (!td_gw_model_budget_applies(m, model))
            continue;
        level ml = model_level(g, m);
        int i = h->nmodel, got = 0;
        size_t shadow_before = v->nshadow;
        if (reserve_level(&ml, &m->b, 1, NULL, cost, now_s, &h->model_period[i],
                          &h->model_start[i], &h->model_leased[i], &got, v) != TD_OK) {
            v->refused.model = m;
            model_release(g, t, h, -cost);
            h->nmodel = 0;
            return TD_EQUOTA;
        }
        if (v->nshadow > shadow_before)
            v->shadow[v->nshadow - 1].model = m;
        h->model_slot[i] = m->slot;
        h->nmodel++;
    }
    return TD_OK;
}

td_status td_gateway_budget_reserve(td_gateway *g, const td_gw_tenant *t, const td_gw_key *k,
                                    const char *model, int64_t cost_nano, int64_t now_s,
                                    td_gw_budget_hold *h, td_gw_budget_verdict *v)
{
    h->reserved_nano = cost_nano;
    h->n = h->nkey = h->nmodel = 0;
    v->refused.budget = NULL;
    v->refused.key = NULL;
    v->refused.model = NULL;
    v->refused.spent_nano = 0;
    v->nshadow = 0;
    if (cost_nano < 0)
        return TD_EINVAL;
    level kl = key_level(g, k), tl = tenant_level(g, t);
    if (k && k->name && k->nbudgets &&
        reserve_level(&kl, k->budgets, k->nbudgets, k, cost_nano, now_s, h->key_period,
                      h->key_start, h->key_leased, &h->nkey, v) != TD_OK)
        return TD_EQUOTA;
    if (reserve_models(g, t, model, cost_nano, now_s, h, v) != TD_OK ||
        reserve_level(&tl, t->budgets, t->nbudgets, NULL, cost_nano, now_s, h->period, h->start,
                      h->leased, &h->n, v) != TD_OK) {
        for (int j = 0; j < h->nkey; j++)
            level_settle(&kl, h->key_period[j], h->key_start[j], -cost_nano, h->key_leased[j]);
        model_release(g, t, h, -cost_nano);
        h->nkey = h->nmodel = 0;
        return TD_EQUOTA;
    }
    return TD_OK;
}

void td_gateway_budget_settle(td_gateway *g, const td_gw_tenant *t, const td_gw_key *k,
                              td_gw_budget_hold *h, int64_t price_nano)
{
    int64_t delta = price_nano - h->reserved_nano;
    level tl = tenant_level(g, t), kl = key_level(g, k);
    for (int i = 0; i < h->n; i++)
        level_settle(&tl, h->period[i], h->start[i], delta, h->leased[i]);
    for (int i = 0; k && i < h->nkey; i++)
        level_settle(&kl, h->key_period[i], h->key_start[i], delta, h->key_leased[i]);
    model_release(g, t, h, delta);
    h->n = h->nkey = h->nmodel = 0;
}

int64_t td_gateway_model_budget_spent(td_gateway *g, const td_gw_model_budget *m, int64_t now_s,
                                      bool refresh)
{
    level l = model_level(g, m);
    if (l.sh)
        return l.sh->spent(l.sh->ctx, l.slot, l.name, m->b.period, now_s, refresh);
    return td_budgets_spent(l.bs, l.slot, m->b.period, now_s);
}

int64_t td_gateway_budget_spent(td_gateway *g, const td_gw_tenant *t, const td_gw_key *k,
                                td_period p, int64_t now_s, bool refresh)
{
    level l = k ? key_level(g, k) : tenant_level(g, t);
    if (l.sh)
        return l.sh->spent(l.sh->ctx, l.slot, l.name, p, now_s, refresh);
    return td_budgets_spent(l.bs, l.slot, p, now_s);
}
