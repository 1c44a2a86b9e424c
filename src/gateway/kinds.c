/* kinds.c - the gateway's kinds: Tenant (namespaces, API keys with their
 * own limits, budgets, models, storage, gateway limits) and Route (match,
 * upstream, cost), validated strictly; and the rules across objects: a key
 * and a namespace name one tenant, and a budgeted tenant's routes are
 * priced by the CostPolicy. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gateway/kinds_internal.h"
#include "gateway/budget.h"
#include "gateway/cors.h"
#include "cost/chargeback.h"
#include "core/config.h"
#include "core/duration.h"
#include "core/kind.h"
#include "core/reqpath.h"
#include "core/objuri.h"
#include "core/validate.h"

/* ---- Tenant ------------------------------------------------------------ */

/* Tenant spec.storage: {bucket, prefix, storageClasses, identity}. */
static td_status validate_storage(td_vctx *v, const json_t *st)
{
    static const char *const fields[] = {"bucket", "prefix", "storageClasses", "identity", NULL};
    static const char *const idf[] = {"gcpServiceAccount", "awsRoleArn", NULL};
    if (!st)
        return TD_OK;
    TD_TRY(td_v_fields(v, st, "spec.storage", fields));
    json_t *b = json_object_get(st, "bucket");
    json_t *p = json_object_get(st, "prefix");
    if (!json_is_string(b) || !td_dns_subdomain(json_string_value(b)) ||
        strlen(json_string_value(b)) < 3 || strlen(json_string_value(b)) > 63)
        return td_vfail(v, b ? b : st, "spec.storage.bucket",
                        "required: a bucket name (3 to 63 lowercase letters, digits, '-' and '.'), "
                        "without scheme");
    if (p && !json_is_string(p))
        return td_vfail(v, p, "spec.storage.prefix", "must be a string such as \"team-a/\"");
    const char *why = p ? td_storage_prefix_problem(json_string_value(p)) : NULL;
    if (why)
        return td_vfail(v, p, "spec.storage.prefix", "\"%s\" %s", json_string_value(p), why);
    json_t *classes = json_object_get(st, "storageClasses");
    TD_TRY(td_v_string_array(v, classes, "spec.storage.storageClasses"));
    size_t i;
    json_t *x;
    json_array_foreach(classes, i, x)
    {
        if (!td_dns_subdomain(json_string_value(x)))
            return td_vfail(v, x, "spec.storage.storageClasses",
                            "\"%s\" is not a StorageClass name", json_string_value(x));
    }
    json_t *id = json_object_get(st, "identity");
    TD_TRY(td_v_fields(v, id, "spec.storage.identity", idf));
    json_t *gsa = json_object_get(id, "gcpServiceAccount");
    json_t *arn = json_object_get(id, "awsRoleArn");
    if (gsa && (!json_is_string(gsa) || !strchr(json_string_value(gsa), '@') ||
                strlen(json_string_value(gsa)) < 24 ||
                strcmp(json_string_value(gsa) + strlen(json_string_value(gsa)) - 24,
                       ".iam.gserviceaccount.com") != 0))
        return td_vfail(
            v, gsa, "spec.storage.identity.gcpServiceAccount",
            "must be a Google service account email (NAME@PROJECT.iam.gserviceaccount.com)");
    if (arn && (!json_is_string(arn) || strncmp(json_string_value(arn), "arn:aws", 7) != 0 ||
                !strstr(json_string_value(arn), ":role/")))
        return td_vfail(v, arn, "spec.storage.identity.awsRoleArn",
                        "must be an IAM role ARN (arn:aws:iam::ACCOUNT:role/NAME)");
    return TD_OK;
}

/* A budget amount: a decimal string ("500", "0.25") or a number, >= 0. */
static td_status budget_amount(td_vctx *v, const json_t *a, const char *f, int64_t *nano)
{
    char buf[64];
    const char *txt = json_string_value(a);
    if (json_is_integer(a)) {
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(a));
        txt = buf;
    } else if (json_is_real(a)) {
        snprintf(buf, sizeof buf, "%.9f", json_real_value(a));
        txt = buf;
    }
    if (!a)
        return td_vfail(v, a, f, "required: an amount in the CostPolicy's currency, e.g. \"500\"");
    if (!txt)
        return td_vfail(v, a, f, "must be a decimal amount such as \"500\" or \"0.25\"");
    if (txt[0] == '-')
        return td_vfail(v, a, f, "%s is negative; a budget is an amount >= 0", txt);
    td_err e;
    if (td_money_parse(txt, nano, &e) != TD_OK)
        return td_vfail(v, a, f, "%s", e.msg);
    return TD_OK;
}

static td_status check_models(td_vctx *v, const json_t *a, const char *field);

/* spec.budgets[i].models (at f): a model list as spec.models, no ',' in a
 * name (the budget's spend is kept under its models joined by ','); no
 * two budgets of one period with the same list; at most
 * TD_GW_MODEL_BUDGETS of them; a tenant's only (a key's budget holds all
 * the key's requests). */
static td_status budget_models(td_vctx *v, const json_t *bs, const json_t *b,
                               const json_t *models, const char *f, size_t i, td_period p,
                               size_t *nmodel)
{
    if (strncmp(f, "spec.budgets[", 13) != 0)
        return td_vfail(v, models, f, "a key's budget holds all its requests; a budget for "
                                      "models belongs in the tenant's spec.budgets");
    TD_TRY(check_models(v, models, f));
    size_t k;
    json_t *x;
    json_array_foreach((json_t *)models, k, x)
    {
        if (strchr(json_string_value(x), ','))
            return td_vfail(v, x, f, "item %zu \"%s\": a ',' has no place in a budget's model",
                            k, json_string_value(x));
    }
    if (++*nmodel > TD_GW_MODEL_BUDGETS)
        return td_vfail(v, models, f, "more than %d budgets with models", TD_GW_MODEL_BUDGETS);
    for (size_t j = 0; j < i; j++) {
        const json_t *o = json_array_get(bs, j);
        td_period op;
        if (td_period_parse(td_json_str(o, "period"), &op) == TD_OK && op == p &&
            json_equal(json_object_get(o, "models"), (json_t *)models))
            return td_vfail(v, models, f, "a second %s budget for these models (spec.budgets[%zu])",
                            td_period_name(p), j);
    }
    (void)b;
    return TD_OK;
}

td_status td__gw_budgets(td_vctx *v, const json_t *bs, const char *field, td_gw_budget *out,
                         size_t *n)
{
    static const char *const fields[] = {"amount", "period", "enforcement", "models", NULL};
    if (n)
        *n = 0;
    size_t nmodel = 0;
    if (!bs)
        return TD_OK;
    if (!json_is_array(bs))
        return td_vfail(v, bs, field, "must be a list of {amount, period, enforcement}");
    size_t i;
    json_t *b;
    bool seen[TD_PERIOD_COUNT] = {false};
    json_array_foreach(bs, i, b)
    {
        char f[160];
        snprintf(f, sizeof f, "%s[%zu]", field, i);
        if (!json_is_object(b))
            return td_vfail(v, b, f, "must be a mapping {amount, period, enforcement}");
        TD_TRY(td_v_fields(v, b, f, fields));
        json_t *a = json_object_get(b, "amount");
        snprintf(f, sizeof f, "%s[%zu].amount", field, i);
        int64_t nano;
        TD_TRY(budget_amount(v, a, f, &nano));
        json_t *per = json_object_get(b, "period");
        snprintf(f, sizeof f, "%s[%zu].period", field, i);
        td_period p;
        if (td_period_parse(json_string_value(per), &p) != TD_OK)
            return td_vfail(v, per, f,
                            "%s%s%s is not a period; must be day, week or month (calendar "
                            "periods in UTC)",
                            json_is_string(per) ? "\"" : "",
                            json_is_string(per) ? json_string_value(per)
                                                : (per ? "this" : "(none)"),
                            json_is_string(per) ? "\"" : "");
        json_t *models = json_object_get(b, "models");
        if (models) {
            snprintf(f, sizeof f, "%s[%zu].models", field, i);
            TD_TRY(budget_models(v, bs, b, models, f, i, p, &nmodel));
        } else if (seen[p]) {
            return td_vfail(v, per, f, "a second budget for the period %s; one budget per period "
                                       "(and per list of models)",
                            td_period_name(p));
        }
        if (!models)
            seen[p] = true;
        json_t *e = json_object_get(b, "enforcement");
        snprintf(f, sizeof f, "%s[%zu].enforcement", field, i);
        const char *m = json_string_value(e);
        if (e && !td_v_is_mode(e))
            return td_vfail(v, e, f, "must be enforce or shadow");
        if (out && n && !models)
            out[(*n)++] = (td_gw_budget){p, nano, m && strcmp(m, "shadow") == 0};
    }
    return TD_OK;
}

static td_status validate_budgets(td_vctx *v, const json_t *bs, const char *field)
{
    return td__gw_budgets(v, bs, field, NULL, NULL);
}

/* Per second, for comparing a key's rate with its tenant's. */
static double rate_per_s(const json_t *r, double *burst)
{
    double cost = json_number_value(json_object_get(r, "cost"));
    int64_t per = 1000000000LL;
    const char *ps = json_string_value(json_object_get(r, "per"));
    if (ps && td_duration_parse(ps, &per, NULL) != TD_OK)
        per = 1000000000LL;
    json_t *bj = json_object_get(r, "burst");
    *burst = json_is_number(bj) ? json_number_value(bj) : cost;
    return per > 0 ? cost * 1e9 / (double)per : cost;
}

/* spec.apiKeys[i].budgets: each as the tenant's budgets are, and none above
 * the tenant's budget of the same period (a key's limit may only be
 * tighter). Runs after validate_budgets of both lists. */
static td_status key_budgets_within(td_vctx *v, const json_t *spec, const json_t *kb,
                                    const char *kname, const char *f)
{
    const json_t *tb = json_object_get(spec, "budgets");
    size_t i, j;
    json_t *b, *t;
    json_array_foreach(kb, i, b)
    {
        td_period p;
        int64_t kn;
        char ff[160];
        snprintf(ff, sizeof ff, "%s.budgets[%zu].amount", f, i);
        if (td_period_parse(td_json_str(b, "period"), &p) != TD_OK)
            continue;
        TD_TRY(budget_amount(v, json_object_get(b, "amount"), ff, &kn));
        json_array_foreach(tb, j, t)
        {
            td_period tp;
            int64_t tn;
            if (td_period_parse(td_json_str(t, "period"), &tp) != TD_OK || tp != p ||
                json_object_get(t, "models"))
                continue;
            char tf[64];
            snprintf(tf, sizeof tf, "spec.budgets[%zu].amount", j);
            TD_TRY(budget_amount(v, json_object_get(t, "amount"), tf, &tn));
            if (kn > tn)
                return td_vfail(v, json_object_get(b, "amount"), ff,
                                "key %s: its %s budget %.9g is above the tenant's %s budget "
                                "%.9g (%s); a key's budget may only be tighter",
                                kname, td_period_name(p), (double)kn / TD_MONEY_NANO,
                                td_period_name(p), (double)tn / TD_MONEY_NANO, tf);
        }
    }
    return TD_OK;
}

static const char *const crit_names[] = {"critical_plus", "critical", "sheddable_plus", "sheddable",
                                         NULL};

/* A criticality's rank, 0 (critical_plus, the highest) to 3 (sheddable),
 * case-insensitive; -1 if s names none. The gateway's td_criticality
 * counts the same way. */
static int crit_rank(const char *s)
{
    char low[32] = "";
    for (size_t k = 0; s && s[k] && k < sizeof low - 1; k++)
        low[k] = (char)tolower((unsigned char)s[k]);
    for (int i = 0; s && crit_names[i]; i++)
        if (strcmp(low, crit_names[i]) == 0)
            return i;
    return -1;
}

/* A list of model names (spec.match.models, spec.models): non-empty
 * strings of at most 255 bytes without control bytes, each listed once,
 * a '*' only as the last byte (a prefix); at least one entry. */
static td_status check_models(td_vctx *v, const json_t *a, const char *field)
{
    if (!a)
        return TD_OK;
    if (!json_is_array(a) || json_array_size(a) == 0)
        return td_vfail(
            v, a, field,
            "must be a non-empty list of model names (a trailing '*' matches a prefix)");
    size_t i;
    json_t *x;
    json_array_foreach((json_t *)a, i, x)
    {
        const char *m = json_string_value(x);
        size_t n = m ? strlen(m) : 0;
        if (!m || n == 0 || n > 255 || n != json_string_length(x))
            return td_vfail(v, x, field, "item %zu must be a model name of 1 to 255 bytes", i);
        for (size_t k = 0; k < n; k++)
            if ((unsigned char)m[k] < 0x20 || m[k] == 0x7f || (m[k] == '*' && k + 1 < n))
                return td_vfail(v, x, field,
                                "item %zu \"%s\": a '*' may only end a name (a prefix), and "
                                "control bytes have no place in one",
                                i, m);
        for (size_t j = 0; j < i; j++)
            if (json_equal(json_array_get(a, j), x))
                return td_vfail(v, x, field, "\"%s\" is listed twice", m);
    }
    return TD_OK;
}

/* true if every entry of inner is covered by an entry of outer: an exact
 * name by an equal name or a prefix of it; a prefix by a shorter or equal
 * prefix. */
static bool models_within(const json_t *inner, const json_t *outer, const char **bad)
{
    size_t i, j;
    json_t *x, *y;
    json_array_foreach((json_t *)inner, i, x)
    {
        const char *m = json_string_value(x);
        size_t mn = strlen(m);
        bool mp = mn && m[mn - 1] == '*';
        bool ok = false;
        json_array_foreach((json_t *)outer, j, y)
        {
            const char *o = json_string_value(y);
            size_t on = strlen(o);
            if (on && o[on - 1] == '*')
                ok = strncmp(o, m, on - 1) == 0 && (!mp || mn >= on);
            else
                ok = !mp && strcmp(o, m) == 0;
            if (ok)
                break;
        }
        if (!ok) {
            *bad = m;
            return false;
        }
    }
    return true;
}

/* spec.apiKeys[i]: {sha256, name, rate, concurrency, budgets, criticality}.
 * A key's own limits may only be tighter than its tenant's (spec.gateway,
 * spec.budgets), its criticality no higher; limits need a name (their
 * state is kept by "tenant/name" across reloads). */
static td_status validate_api_key(td_vctx *v, const json_t *spec, const json_t *keys, size_t i,
                                  const json_t *k)
{
    static const char *const fields[] = {"sha256",  "name",        "rate",   "concurrency",
                                         "budgets", "criticality", "models", NULL};
    static const char *const rate[] = {"cost", "per", "burst", NULL};
    char f[96], ff0[128];
    snprintf(f, sizeof f, "spec.apiKeys[%zu]", i);
    if (!json_is_object(k))
        return td_vfail(v, k, f, "must be a mapping {sha256, name, rate, concurrency}");
    TD_TRY(td_v_fields(v, k, f, fields));
    json_t *name = json_object_get(k, "name");
    const char *ns = json_string_value(name);
    if (name && (!ns || !td_dns_label(ns)))
        return td_vfail(v, name, f, "name must be a DNS label (lowercase letters, digits, '-')");
    for (size_t j = 0; ns && j < i; j++)
        if (json_equal(json_object_get(json_array_get(keys, j), "name"), name))
            return td_vfail(v, name, f, "name \"%s\" is already the name of spec.apiKeys[%zu]", ns,
                            j);
    json_t *r = json_object_get(k, "rate"), *c = json_object_get(k, "concurrency");
    json_t *kb = json_object_get(k, "budgets");
    if ((r || c) && !ns)
        return td_vfail(v, r ? r : c, f, "a key with its own rate or concurrency needs a name");
    if (kb && !ns)
        return td_vfail(v, kb, f, "a key with its own budgets needs a name");
    json_t *km = json_object_get(k, "models");
    if (km) {
        snprintf(ff0, sizeof ff0, "%s.models", f);
        if (!ns)
            return td_vfail(v, km, ff0, "a key with its own models needs a name");
        TD_TRY(check_models(v, km, ff0));
        const json_t *tm = json_object_get(spec, "models");
        const char *bad = NULL;
        if (json_is_array(tm) && !models_within(km, tm, &bad))
            return td_vfail(v, km, ff0,
                            "key %s: \"%s\" is not within the tenant's spec.models; a key's models "
                            "may only be narrower",
                            ns, bad);
    }
    json_t *kc = json_object_get(k, "criticality");
    if (kc) {
        snprintf(ff0, sizeof ff0, "%s.criticality", f);
        if (!ns)
            return td_vfail(v, kc, ff0, "a key with its own criticality needs a name");
        int kr = crit_rank(json_string_value(kc));
        int tr = crit_rank(td_json_str(spec, "gateway.criticality"));
        if (kr < 0)
            return td_vfail(v, kc, ff0,
                            "must be critical_plus, critical, sheddable_plus or sheddable");
        if (tr < 0)
            tr = 1; /* critical, the default (a bad tenant value is named by its own check) */
        if (kr < tr)
            return td_vfail(v, kc, ff0,
                            "key %s: %s is above the tenant's spec.gateway.criticality %s; a key's "
                            "class may only be lower (X-Criticality can lower a request, never "
                            "raise it)",
                            ns, crit_names[kr], crit_names[tr]);
    }
    if (kb) {
        char bf[96];
        snprintf(bf, sizeof bf, "%s.budgets", f);
        TD_TRY(validate_budgets(v, json_object_get(spec, "budgets"), "spec.budgets"));
        TD_TRY(validate_budgets(v, kb, bf));
        TD_TRY(key_budgets_within(v, spec, kb, ns, f));
    }
    char ff[128];
    const json_t *g = json_object_get(spec, "gateway");
    if (r) {
        snprintf(ff, sizeof ff, "%s.rate", f);
        TD_TRY(td_v_fields(v, r, ff, rate));
        snprintf(ff, sizeof ff, "%s.rate.cost", f);
        if (!json_object_get(r, "cost"))
            return td_vfail(v, r, ff, "required: cost units per `per`");
        TD_TRY(td_v_number(v, json_object_get(r, "cost"), ff, 0));
        snprintf(ff, sizeof ff, "%s.rate.per", f);
        TD_TRY(td_v_duration(v, json_object_get(r, "per"), ff));
        snprintf(ff, sizeof ff, "%s.rate.burst", f);
        TD_TRY(td_v_number(v, json_object_get(r, "burst"), ff, 0));
        const json_t *tr = json_object_get(g, "rate");
        double kb, tb;
        double kr = rate_per_s(r, &kb);
        if (tr && json_number_value(json_object_get(tr, "cost")) > 0) {
            double trs = rate_per_s(tr, &tb);
            snprintf(ff, sizeof ff, "%s.rate", f);
            if (kr > trs * (1 + 1e-12) || kb > tb)
                return td_vfail(v, r, ff,
                                "key %s: %g per second (burst %g) is looser than the tenant's "
                                "spec.gateway.rate %g per second (burst %g); a key's limit may "
                                "only be tighter",
                                ns, kr, kb, trs, tb);
        }
    }
    if (c) {
        snprintf(ff, sizeof ff, "%s.concurrency", f);
        TD_TRY(td_v_int(v, c, ff, 1));
        json_t *tc = json_object_get(g, "concurrency");
        if (json_is_integer(tc) && json_integer_value(tc) > 0 &&
            json_integer_value(c) > json_integer_value(tc))
            return td_vfail(v, c, ff,
                            "key %s: %lld in flight is looser than the tenant's "
                            "spec.gateway.concurrency %lld; a key's limit may only be tighter",
                            ns, (long long)json_integer_value(c),
                            (long long)json_integer_value(tc));
    }
    return TD_OK;
}

/* spec.gateway.models[]: {model, rate: {cost, per, burst}, concurrency},
 * each model (a name or prefix) listed once, each with a rate or a
 * concurrency. */
static td_status validate_model_limits(td_vctx *v, const json_t *ml)
{
    static const char *const fields[] = {"model", "rate", "concurrency", NULL};
    static const char *const rate[] = {"cost", "per", "burst", NULL};
    if (!ml)
        return TD_OK;
    if (!json_is_array(ml))
        return td_vfail(v, ml, "spec.gateway.models",
                        "must be a list of {model, rate: {cost, per, burst}, concurrency}");
    json_t *names = json_array();
    if (!names)
        return td_vfail(v, ml, "spec.gateway.models", "out of memory");
    td_status st = TD_OK;
    char f[96], ff[128];
    size_t i;
    json_t *x;
    json_array_foreach((json_t *)ml, i, x)
    {
        snprintf(f, sizeof f, "spec.gateway.models[%zu]", i);
        if (!json_is_object(x)) {
            st = td_vfail(v, x, f, "must be a mapping {model, rate, concurrency}");
            break;
        }
        if ((st = td_v_fields(v, x, f, fields)) != TD_OK)
            break;
        json_t *m = json_object_get(x, "model");
        json_array_append(names, m ? m : json_null());
        snprintf(ff, sizeof ff, "%s.model", f);
        if (!m) {
            st = td_vfail(v, x, ff, "required: the model name (or prefix ending in '*') it limits");
            break;
        }
        if ((st = check_models(v, names, ff)) != TD_OK)
            break;
        json_t *r = json_object_get(x, "rate"), *c = json_object_get(x, "concurrency");
        if (!r && !c) {
            st = td_vfail(v, x, f, "needs a rate or a concurrency");
            break;
        }
        if (r) {
            snprintf(ff, sizeof ff, "%s.rate", f);
            if ((st = td_v_fields(v, r, ff, rate)) != TD_OK)
                break;
            snprintf(ff, sizeof ff, "%s.rate.cost", f);
            if (!json_object_get(r, "cost")) {
                st = td_vfail(v, r, ff, "required: cost units per `per`");
                break;
            }
            if ((st = td_v_number(v, json_object_get(r, "cost"), ff, 0)) != TD_OK)
                break;
            snprintf(ff, sizeof ff, "%s.rate.per", f);
            if ((st = td_v_duration(v, json_object_get(r, "per"), ff)) != TD_OK)
                break;
            snprintf(ff, sizeof ff, "%s.rate.burst", f);
            if ((st = td_v_number(v, json_object_get(r, "burst"), ff, 0)) != TD_OK)
                break;
        }
        snprintf(ff, sizeof ff, "%s.concurrency", f);
        if (c && (st = td_v_int(v, c, ff, 1)) != TD_OK)
            break;
    }
    json_decref(names);
    return st;
}

static td_status validate_tenant(td_vctx *v)
{
    static const char *const top[] = {"apiVersion", "kind", "metadata", "spec", NULL};
    static const char *const spec[] = {"namespaces", "labels",  "apiKeys", "gateway", "tenancy",
                                       "storage",    "budgets", "models",  NULL};
    static const char *const gw[] = {"rate",   "concurrency", "maxConnections", "criticality",
                                     "weight", "enforcement", "models",         NULL};
    static const char *const rate[] = {"cost", "per", "burst", NULL};
    TD_TRY(td_v_fields(v, v->obj, "", top));
    json_t *s = json_object_get(v->obj, "spec");
    if (!json_is_object(s))
        return td_vfail(v, s, "spec", "required: a mapping");
    TD_TRY(td_v_fields(v, s, "spec", spec));
    json_t *nss = json_object_get(s, "namespaces");
    TD_TRY(td_v_string_array(v, nss, "spec.namespaces"));
    size_t i;
    json_t *x;
    json_array_foreach(nss, i, x)
    {
        if (!td_dns_label(json_string_value(x)))
            return td_vfail(v, x, "spec.namespaces", "\"%s\" is not a valid namespace name",
                            json_string_value(x));
    }
    TD_TRY(td_v_string_map(v, json_object_get(s, "labels"), "spec.labels"));
    TD_TRY(check_models(v, json_object_get(s, "models"), "spec.models"));
    json_t *keys = json_object_get(s, "apiKeys");
    if (keys && !json_is_array(keys))
        return td_vfail(v, keys, "spec.apiKeys", "must be a list of {sha256: HEX}");
    json_array_foreach(keys, i, x)
    {
        TD_TRY(validate_api_key(v, s, keys, i, x));
        const char *h = td_json_str(x, "sha256");
        size_t n = h ? strlen(h) : 0;
        int hex = n == 64;
        for (size_t k = 0; hex && k < n; k++)
            hex = isxdigit((unsigned char)h[k]);
        if (!hex)
            return td_vfail(v, x, "spec.apiKeys",
                            "item %zu: sha256 must be 64 hex digits (the "
                            "SHA-256 of the key, e.g. from `printf %%s KEY "
                            "| sha256sum`)",
                            i);
    }
    const char *tenancy = td_json_str(s, "tenancy");
    if (json_object_get(s, "tenancy") &&
        !(tenancy && (strcmp(tenancy, "team") == 0 || strcmp(tenancy, "customer") == 0)))
        return td_vfail(v, json_object_get(s, "tenancy"), "spec.tenancy",
                        "\"%s\" is not a tier; must be team or customer", tenancy ? tenancy : "");
    TD_TRY(validate_storage(v, json_object_get(s, "storage")));
    TD_TRY(validate_budgets(v, json_object_get(s, "budgets"), "spec.budgets"));
    json_t *g = json_object_get(s, "gateway");
    if (g) {
        TD_TRY(td_v_fields(v, g, "spec.gateway", gw));
        json_t *r = json_object_get(g, "rate");
        if (r) {
            TD_TRY(td_v_fields(v, r, "spec.gateway.rate", rate));
            TD_TRY(td_v_number(v, json_object_get(r, "cost"), "spec.gateway.rate.cost", 0));
            TD_TRY(td_v_duration(v, json_object_get(r, "per"), "spec.gateway.rate.per"));
            TD_TRY(td_v_number(v, json_object_get(r, "burst"), "spec.gateway.rate.burst", 0));
        }
        TD_TRY(td_v_int(v, json_object_get(g, "concurrency"), "spec.gateway.concurrency", 0));
        TD_TRY(td_v_int(v, json_object_get(g, "maxConnections"), "spec.gateway.maxConnections", 0));
        TD_TRY(td_v_number(v, json_object_get(g, "weight"), "spec.gateway.weight", 0));
        static const char *const points[] = {"rate", "concurrency", NULL};
        TD_TRY(td_v_enforcement(v, json_object_get(g, "enforcement"), "spec.gateway.enforcement",
                                points, "a mapping {rate: MODE, concurrency: MODE}"));
        TD_TRY(validate_model_limits(v, json_object_get(g, "models")));
        static const char *const crit[] = {"critical_plus", "critical", "sheddable_plus",
                                           "sheddable", NULL};
        json_t *c = json_object_get(g, "criticality");
        if (c) {
            char low[32] = "";
            const char *cs = json_string_value(c);
            for (size_t k = 0; cs && cs[k] && k < sizeof low - 1; k++)
                low[k] = (char)tolower((unsigned char)cs[k]);
            if (!td_in_list(low, crit))
                return td_vfail(v, c, "spec.gateway.criticality",
                                "must be critical_plus, critical, sheddable_plus or sheddable");
        }
    }
    return TD_OK;
}

/* ---- Route ------------------------------------------------------------- */

/* "host:port" with a port 1..65535 and a host before it. */
static int hostport_ok(const char *addr)
{
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    return colon && colon != addr && end && !*end && port >= 1 && port <= 65535;
}

/* spec.match: a pathPrefix as requests read after normalization, and/or
 * models. */
static td_status route_match(td_vctx *v, const json_t *s)
{
    static const char *const match[] = {"pathPrefix", "models", NULL};
    TD_TRY(td_v_fields(v, json_object_get(s, "match"), "spec.match", match));
    json_t *mm = td_json_path(s, "match.models");
    TD_TRY(check_models(v, mm, "spec.match.models"));
    const char *prefix = td_json_str(s, "match.pathPrefix");
    if (mm && !td_json_path(s, "match.pathPrefix"))
        prefix = "/"; /* models alone: on every path */
    if (!prefix || prefix[0] != '/')
        return td_vfail(v, td_json_path(s, "match"), "spec.match.pathPrefix",
                        "required: a path starting with '/' (or spec.match.models)");
    /* Requests are matched after normalization (reqpath.h): a prefix that
     * normalization would change could never match. */
    char norm[512];
    size_t plen = strlen(prefix), nlen = 0, npath = 0;
    td_err perr;
    if (plen >= sizeof norm || strchr(prefix, '?'))
        return td_vfail(v, td_json_path(s, "match.pathPrefix"), "spec.match.pathPrefix",
                        "must be a path of at most %zu bytes, without '?'", sizeof norm - 1);
    memcpy(norm, prefix, plen + 1);
    if (td_reqpath_normalize(norm, plen, &nlen, &npath, &perr) != TD_OK)
        return td_vfail(v, td_json_path(s, "match.pathPrefix"), "spec.match.pathPrefix", "%s",
                        perr.msg);
    if (nlen != plen || memcmp(norm, prefix, plen) != 0)
        return td_vfail(v, td_json_path(s, "match.pathPrefix"), "spec.match.pathPrefix",
                        "\"%s\" is not a normalized path (it reads as \"%.*s\": no \"//\", \".\" "
                        "or \"..\" segments); requests are matched after normalization",
                        prefix, (int)nlen, norm);
    return TD_OK;
}

/* spec.methods: a non-empty list of GET, HEAD, POST, PUT, PATCH, DELETE,
 * OPTIONS, each once; never TRACE or CONNECT. */
static td_status route_methods(td_vctx *v, const json_t *s)
{
    json_t *ms = json_object_get(s, "methods");
    if (ms) {
        static const char *const known[] = {"GET",   "HEAD",   "POST",    "PUT",
                                            "PATCH", "DELETE", "OPTIONS", NULL};
        if (!json_is_array(ms) || json_array_size(ms) == 0)
            return td_vfail(v, ms, "spec.methods",
                            "must be a non-empty list of methods (default [GET, POST])");
        size_t i;
        json_t *m;
        json_array_foreach(ms, i, m)
        {
            const char *mn = json_string_value(m);
            if (mn && (strcmp(mn, "TRACE") == 0 || strcmp(mn, "CONNECT") == 0))
                return td_vfail(v, m, "spec.methods",
                                "%s is never forwarded (TRACE echoes credentials back, CONNECT "
                                "opens a tunnel past every limit)",
                                mn);
            if (!td_in_list(mn, known))
                return td_vfail(v, m, "spec.methods",
                                "item %zu: \"%s\" is not one of GET, HEAD, POST, PUT, PATCH, "
                                "DELETE, OPTIONS (upper case)",
                                i, mn ? mn : "");
            for (size_t j = 0; j < i; j++)
                if (json_equal(json_array_get(ms, j), m))
                    return td_vfail(v, m, "spec.methods", "%s is listed twice", mn);
        }
    }
    return TD_OK;
}

/* spec.upstream.address, or spec.upstream.endpoints: 1..64 HOST:PORT with
 * weights, each once. u may be NULL. */
static td_status route_endpoints(td_vctx *v, const json_t *s, const json_t *u)
{
    json_t *eps = u ? json_object_get(u, "endpoints") : NULL;
    if (eps && json_object_get(u, "address"))
        return td_vfail(v, eps, "spec.upstream.endpoints",
                        "give either spec.upstream.address (one endpoint) or "
                        "spec.upstream.endpoints, not both");
    if (eps) {
        /* the pool: 1..64 endpoints (TD_EP_MAX), each HOST:PORT once */
        static const char *const epf[] = {"address", "weight", NULL};
        if (!json_is_array(eps) || json_array_size(eps) == 0 || json_array_size(eps) > 64)
            return td_vfail(
                v, eps, "spec.upstream.endpoints",
                "must be a list of 1 to 64 endpoints ({address: HOST:PORT, weight: N})");
        size_t i;
        json_t *e;
        json_array_foreach(eps, i, e)
        {
            char field[64];
            snprintf(field, sizeof field, "spec.upstream.endpoints[%zu]", i);
            if (!json_is_object(e))
                return td_vfail(v, e, field, "must be a mapping {address: HOST:PORT, weight: N}");
            TD_TRY(td_v_fields(v, e, field, epf));
            if (!hostport_ok(td_json_str(e, "address")))
                return td_vfail(
                    v, json_object_get(e, "address") ? json_object_get(e, "address") : e, field,
                    "address: required: HOST:PORT (e.g. \"10.0.0.7:8000\", "
                    "\"[::1]:8000\")");
            json_t *w = json_object_get(e, "weight");
            TD_TRY(td_v_int(v, w, field, 1));
            if (w && json_integer_value(w) > 1000)
                return td_vfail(v, w, field, "weight: at most 1000");
            for (size_t j = 0; j < i; j++)
                if (strcmp(td_json_str(json_array_get(eps, j), "address"),
                           td_json_str(e, "address")) == 0)
                    return td_vfail(v, e, field, "address \"%s\" is listed twice",
                                    td_json_str(e, "address"));
        }
    } else if (!hostport_ok(td_json_str(s, "upstream.address"))) {
        return td_vfail(v, u ? json_object_get(u, "address") : NULL, "spec.upstream.address",
                        "required: HOST:PORT (e.g. \"127.0.0.1:8000\", \"[::1]:8000\"), or "
                        "spec.upstream.endpoints");
    }
    return TD_OK;
}

/* spec.upstream.healthCheck (hc not NULL). */
static td_status route_health_check(td_vctx *v, const json_t *hc)
{
    static const char *const hcf[] = {
        "path", "interval", "timeout", "unhealthyThreshold", "healthyThreshold", NULL};
    TD_TRY(td_v_fields(v, hc, "spec.upstream.healthCheck", hcf));
    json_t *hp = json_object_get(hc, "path");
    const char *hps = json_string_value(hp);
    int path_ok = hps && hps[0] == '/' && strlen(hps) < 256;
    for (const char *q = hps; path_ok && *q; q++)
        path_ok = (unsigned char)*q > 0x20 && *q != 0x7f;
    if (hp && !path_ok)
        return td_vfail(v, hp, "spec.upstream.healthCheck.path",
                        "must be a path starting with '/' (under 256 bytes, no spaces or "
                        "control bytes)");
    TD_TRY(td_v_duration(v, json_object_get(hc, "interval"), "spec.upstream.healthCheck.interval"));
    TD_TRY(td_v_duration(v, json_object_get(hc, "timeout"), "spec.upstream.healthCheck.timeout"));
    TD_TRY(td_v_int(v, json_object_get(hc, "unhealthyThreshold"),
                    "spec.upstream.healthCheck.unhealthyThreshold", 1));
    TD_TRY(td_v_int(v, json_object_get(hc, "healthyThreshold"),
                    "spec.upstream.healthCheck.healthyThreshold", 1));
    return TD_OK;
}

/* spec.upstream.metrics (mt not NULL): where and what to scrape. */
static td_status route_metrics(td_vctx *v, const json_t *mt)
{
    static const char *const mf[] = {"path", "waiting", "kvCache", NULL};
    TD_TRY(td_v_fields(v, mt, "spec.upstream.metrics", mf));
    const char *mp = td_json_str(mt, "path");
    int mp_ok = !json_object_get(mt, "path") || (mp && mp[0] == '/' && strlen(mp) < 256);
    for (const char *q = mp; mp_ok && q && *q; q++)
        mp_ok = (unsigned char)*q > 0x20 && *q != 0x7f;
    if (!mp_ok)
        return td_vfail(v, json_object_get(mt, "path"), "spec.upstream.metrics.path",
                        "must be a path starting with '/' (under 256 bytes, no spaces or "
                        "control bytes)");
    static const char *const names[] = {"waiting", "kvCache"};
    for (int k = 0; k < 2; k++) {
        json_t *nv = json_object_get(mt, names[k]);
        const char *ns = json_string_value(nv);
        int name_ok = !nv || (ns && *ns && strlen(ns) < 128);
        for (const char *q = ns; name_ok && q && *q; q++)
            name_ok = isalnum((unsigned char)*q) || *q == '_' || *q == ':';
        if (!name_ok)
            return td_vfail(v, nv,
                            names[k][0] == 'w' ? "spec.upstream.metrics.waiting"
                                               : "spec.upstream.metrics.kvCache",
                            "must be a Prometheus metric name ([a-zA-Z0-9_:], under 128 bytes)");
    }
    return TD_OK;
}

/* spec.upstream.authorization (ua not NULL): {fromEnv: VARIABLE}, set in
 * tenantd's environment to one header value. */
static td_status route_authorization(td_vctx *v, const json_t *ua)
{
    static const char *const auth[] = {"fromEnv", NULL};
    if (!json_is_object(ua))
        return td_vfail(v, ua, "spec.upstream.authorization",
                        "must be {fromEnv: VARIABLE}: the secret itself never goes in the "
                        "config");
    TD_TRY(td_v_fields(v, ua, "spec.upstream.authorization", auth));
    const char *env = td_json_str(ua, "fromEnv");
    int ok_name = env && *env && !isdigit((unsigned char)env[0]);
    for (size_t k = 0; ok_name && env[k]; k++)
        ok_name = isalnum((unsigned char)env[k]) || env[k] == '_';
    if (!ok_name)
        return td_vfail(v, ua, "spec.upstream.authorization.fromEnv",
                        "required: the name of an environment variable holding the upstream's "
                        "Authorization value (e.g. UPSTREAM_AUTHORIZATION=\"Bearer sk-...\"); "
                        "the secret itself never goes in the config");
    /* Checked here, where a refusal is an apply's 400 or a failed
     * start, rather than at the gateway's reload, which follows a
     * committed change and must not fail (control.c). */
    const char *val = getenv(env);
    if (!val || !*val)
        return td_vfail(v, ua, "spec.upstream.authorization.fromEnv",
                        "the environment variable %s is not set (or empty) in tenantd's "
                        "environment",
                        env);
    for (const char *q = val; *q; q++)
        if ((unsigned char)*q < 0x20 || *q == 0x7f)
            return td_vfail(v, ua, "spec.upstream.authorization.fromEnv",
                            "%s holds a control byte; it must be one header value", env);
    return TD_OK;
}

/* spec.upstream: where requests go and how many at a time. */
static td_status route_upstream(td_vctx *v, const json_t *s)
{
    static const char *const up[] = {
        "address",       "endpoints",   "balance",     "capacity", "queue",
        "authorization", "healthCheck", "scrapeEvery", "metrics",  "resolveEvery", NULL};
    json_t *u = json_object_get(s, "upstream");
    TD_TRY(td_v_fields(v, u, "spec.upstream", up));
    TD_TRY(route_endpoints(v, s, u));
    json_t *hc = u ? json_object_get(u, "healthCheck") : NULL;
    if (hc)
        TD_TRY(route_health_check(v, hc));
    json_t *bal = u ? json_object_get(u, "balance") : NULL;
    if (bal &&
        !td_in_list(json_string_value(bal),
                    (const char *const[]){"leastRequests", "roundRobin", "queueDepth", NULL}))
        return td_vfail(v, bal, "spec.upstream.balance",
                        "must be leastRequests (the default), roundRobin or queueDepth");
    TD_TRY(td_v_duration(v, u ? json_object_get(u, "scrapeEvery") : NULL,
                         "spec.upstream.scrapeEvery"));
    TD_TRY(td_v_duration(v, u ? json_object_get(u, "resolveEvery") : NULL,
                         "spec.upstream.resolveEvery"));
    json_t *mt = u ? json_object_get(u, "metrics") : NULL;
    if (mt)
        TD_TRY(route_metrics(v, mt));
    json_t *ua = td_json_path(s, "upstream.authorization");
    if (ua)
        TD_TRY(route_authorization(v, ua));
    TD_TRY(td_v_int(v, td_json_path(s, "upstream.capacity"), "spec.upstream.capacity", 1));
    TD_TRY(td_v_int(v, td_json_path(s, "upstream.queue"), "spec.upstream.queue", 0));
    return TD_OK;
}

/* spec.cost (how a request is priced) and spec.timeout. */
static td_status route_cost(td_vctx *v, const json_t *s)
{
    static const char *const cost[] = {"model", "gpuSecondsEstimate", "maxOutputTokens", NULL};
    TD_TRY(td_v_fields(v, json_object_get(s, "cost"), "spec.cost", cost));
    TD_TRY(td_v_number(v, td_json_path(s, "cost.gpuSecondsEstimate"),
                       "spec.cost.gpuSecondsEstimate", 0));
    /* what a request naming no max_tokens reserves of its budgets: a bound
     * on how far one request can overspend, so at least 1 and below what
     * a price in nano-units could overflow on */
    json_t *mot = td_json_path(s, "cost.maxOutputTokens");
    TD_TRY(td_v_int_range(v, mot, "spec.cost.maxOutputTokens", 1, 10000000));
    const char *model = td_json_str(s, "cost.model");
    static const char *const models[] = {"tokens", "gpuSeconds", "requests", NULL};
    if (td_json_path(s, "cost.model") && !td_in_list(model, models))
        return td_vfail(v, td_json_path(s, "cost.model"), "spec.cost.model",
                        "must be tokens, gpuSeconds or requests");
    TD_TRY(td_v_duration(v, json_object_get(s, "timeout"), "spec.timeout"));
    return TD_OK;
}

/* Route: which requests (spec.match, spec.methods) go where
 * (spec.upstream) at what price (spec.cost). */
static td_status validate_route(td_vctx *v)
{
    static const char *const top[] = {"apiVersion", "kind", "metadata", "spec", NULL};
    static const char *const spec[] = {"match",   "upstream", "cost", "timeout",
                                       "methods", "cors",     NULL};
    TD_TRY(td_v_fields(v, v->obj, "", top));
    json_t *s = json_object_get(v->obj, "spec");
    if (!json_is_object(s))
        return td_vfail(v, s, "spec", "required: a mapping");
    TD_TRY(td_v_fields(v, s, "spec", spec));
    TD_TRY(route_match(v, s));
    TD_TRY(route_methods(v, s));
    TD_TRY(route_upstream(v, s));
    TD_TRY(td_gw_cors_validate(v, json_object_get(s, "cors")));
    return route_cost(v, s);
}

/* ---- across objects ---------------------------------------------------- */

/* tenant (objs[i])'s API keys are no later tenant's, nor its own twice. */
static td_status keys_once(json_t *const *objs, size_t n, size_t i, td_err *err)
{
    json_t *o = objs[i];
    size_t ka;
    json_t *key;
    json_array_foreach(td_json_path(o, "spec.apiKeys"), ka, key)
    {
        const char *h = td_json_str(key, "sha256");
        for (size_t j = i; h && j < n; j++) {
            json_t *p = objs[j];
            if (!td_kind_is(p, "Tenant"))
                continue;
            size_t kb;
            json_t *key2;
            json_array_foreach(td_json_path(p, "spec.apiKeys"), kb, key2)
            {
                const char *h2 = td_json_str(key2, "sha256");
                if ((j > i || kb > ka) && h2 && strcasecmp(h, h2) == 0)
                    return td_err_set(err, TD_EINVAL,
                                      "Tenant %s: spec.apiKeys: key %s is already a key of "
                                      "tenant %s; a key names one tenant",
                                      td_json_str(p, "metadata.name"), "(sha256)",
                                      td_json_str(o, "metadata.name"));
            }
        }
    }
    return TD_OK;
}

/* tenant (objs[i])'s namespaces belong to no later tenant. */
static td_status namespaces_once(json_t *const *objs, size_t n, size_t i, td_err *err)
{
    json_t *o = objs[i];
    size_t a;
    json_t *ns;
    json_array_foreach(td_json_path(o, "spec.namespaces"), a, ns)
    {
        for (size_t j = i + 1; j < n; j++) {
            json_t *p = objs[j];
            if (!td_kind_is(p, "Tenant"))
                continue;
            size_t b;
            json_t *ns2;
            json_array_foreach(td_json_path(p, "spec.namespaces"), b, ns2)
            {
                if (json_equal(ns, ns2))
                    return td_err_set(err, TD_EINVAL,
                                      "Tenant %s: spec.namespaces: namespace \"%s\" already "
                                      "belongs to tenant %s; a namespace has one owner",
                                      td_json_str(p, "metadata.name"), json_string_value(ns),
                                      td_json_str(o, "metadata.name"));
            }
        }
    }
    return TD_OK;
}

/* A Tenant with budgets can use every Route, so the CostPolicy (the one
 * named default, else the first) must price each of them: a request that
 * cannot be priced cannot be held to a budget. */
static td_status budget_cross_check(json_t *const *objs, size_t n, td_err *err)
{
    const json_t *budgeted = NULL;
    char field[64] = "spec.budgets";
    for (size_t i = 0; !budgeted && i < n; i++) {
        if (!td_kind_is(objs[i], "Tenant"))
            continue;
        if (json_array_size(td_json_path(objs[i], "spec.budgets")) > 0)
            budgeted = objs[i];
        size_t k;
        json_t *key;
        json_array_foreach(td_json_path(objs[i], "spec.apiKeys"), k, key)
        {
            if (!budgeted && json_array_size(json_object_get(key, "budgets")) > 0) {
                budgeted = objs[i];
                snprintf(field, sizeof field, "spec.apiKeys[%zu].budgets", k);
            }
        }
    }
    if (!budgeted)
        return TD_OK;
    const char *tn = td_json_str(budgeted, "metadata.name");
    json_t *pol = td_kind_objs_find(objs, n, "CostPolicy", "default");
    for (size_t i = 0; !pol && i < n; i++)
        if (td_kind_is(objs[i], "CostPolicy"))
            pol = objs[i];
    if (!pol)
        return td_err_set(err, TD_EINVAL,
                          "Tenant %s: %s: there is no CostPolicy to price its requests; "
                          "add a CostPolicy with a price for every Route",
                          tn, field);
    td_costpolicy *cp = NULL;
    td_status st = td_costpolicy_parse(pol, NULL, &cp, err);
    for (size_t i = 0; st == TD_OK && i < n; i++) {
        if (!td_kind_is(objs[i], "Route"))
            continue;
        const char *rn = td_json_str(objs[i], "metadata.name");
        /* a route serving listed models, each with a price of its own, is priced */
        const json_t *ms = td_json_path(objs[i], "spec.match.models");
        bool by_models = json_array_size(ms) > 0;
        for (size_t j = 0; by_models && j < json_array_size(ms); j++)
            by_models = td_costpolicy_prices_model(cp, json_string_value(json_array_get(ms, j)));
        if (!by_models && !td_costpolicy_prices_route(cp, rn))
            st = td_err_set(err, TD_EINVAL,
                            "Tenant %s: %s: CostPolicy %s has no price for Route %s, "
                            "which the tenant can use; add {route: %s, per1kTokens: ...} (or "
                            "perRequest, perGPUHour) to its spec.prices",
                            tn, field, td_json_str(pol, "metadata.name"), rn, rn);
    }
    td_costpolicy_destroy(cp);
    return st;
}

/* A key and a namespace name one tenant; budgets can be priced. */
static td_status tenant_cross_check(json_t *const *objs, size_t n, td_err *err)
{
    for (size_t i = 0; i < n; i++) {
        if (!td_kind_is(objs[i], "Tenant"))
            continue;
        TD_TRY(keys_once(objs, n, i, err));
        TD_TRY(namespaces_once(objs, n, i, err));
    }
    if (budget_cross_check(objs, n, err) != TD_OK)
        return TD_EINVAL;
    return TD_OK;
}

/* ---- the table --------------------------------------------------------- */

static const td_kind_def kinds[] = {
    {"Tenant", TD_API_TENANTD, false, "tenant,tenants", validate_tenant, tenant_cross_check, 20,
     NULL},
    {"Route", TD_API_TENANTD, false, "route,routes", validate_route, NULL, 0, NULL},
};

const td_kind_def *td_gateway_kinds(size_t *n)
{
    *n = sizeof kinds / sizeof kinds[0];
    return kinds;
}
