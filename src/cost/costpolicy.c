/* costpolicy.c - the CostPolicy kind: prices, the interruptible discount and
 * shared-cost items, parsed strictly (unknown fields are errors naming file,
 * line and field) into exact nano-unit amounts; and the price of one ledger
 * record under a policy. */
#include "chargeback_internal.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/kind.h"
#include "core/validate.h"

/* ---- decimal money ---- */

td_status td_money_parse(const char *s, int64_t *nano, td_err *err)
{
    if (!s || !*s)
        return td_err_set(err, TD_EINVAL, "\"\" is not a decimal amount");
    const char *p = s;
    int64_t whole = 0, frac = 0;
    int nfrac = 0, ndig = 0;
    while (isdigit((unsigned char)*p)) {
        if (whole > (INT64_MAX / TD_MONEY_NANO - 9) / 10)
            return td_err_set(err, TD_EINVAL, "\"%s\" is too large", s);
        whole = whole * 10 + (*p - '0');
        p++;
        ndig++;
    }
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) {
            if (nfrac == 9)
                return td_err_set(err, TD_EINVAL,
                                  "\"%s\" has more than 9 decimals", s);
            frac = frac * 10 + (*p - '0');
            nfrac++;
            p++;
        }
        if (nfrac == 0)
            ndig = 0; /* "1." */
        else
            ndig += nfrac;
    }
    if (*p || ndig == 0)
        return td_err_set(err, TD_EINVAL, "\"%s\" is not a decimal amount (e.g. \"2.50\")", s);
    for (int i = nfrac; i < 9; i++)
        frac *= 10;
    *nano = whole * TD_MONEY_NANO + frac;
    return TD_OK;
}

/* ---- validation (validate.h) ---- */

/* A mapping whose keys are all in allowed; unlike td_v_fields, m is
 * required, and the object itself is named "(object)". */
static td_status check_fields(td_vctx *v, const json_t *m, const char *field,
                              const char *const *allowed)
{
    if (!json_is_object(m))
        return td_vfail(v, m, field[0] ? field : "(object)", "must be a mapping");
    return td_v_fields(v, m, field[0] ? field : "(object)", allowed);
}

/* A decimal from a YAML scalar: a string is taken as written; a number is
 * printed with 9 decimals first (YAML numbers reach us as doubles; quote
 * prices to keep every digit). */
static td_status money_node(td_vctx *v, const json_t *node, const char *field, int64_t *out)
{
    char buf[64];
    const char *s;
    if (json_is_string(node)) {
        s = json_string_value(node);
    } else if (json_is_integer(node)) {
        snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(node));
        s = buf;
    } else if (json_is_real(node)) {
        double d = json_real_value(node);
        if (!(d >= 0 && d < 9e9))
            return td_vfail(v, node, field, "must be a non-negative amount below 9e9");
        snprintf(buf, sizeof buf, "%.9f", d);
        s = buf;
    } else {
        return td_vfail(v, node, field, "must be a decimal amount such as \"2.50\"");
    }
    td_err e;
    if (td_money_parse(s, out, &e) != TD_OK)
        return td_vfail(v, node, field, "%s", e.msg);
    return TD_OK;
}

static td_status copy_name(td_vctx *v, const json_t *node, const char *field, char *dst, size_t cap)
{
    const char *s = json_string_value(node);
    if (!s || !*s)
        return td_vfail(v, node, field, "required: a non-empty string");
    if (strlen(s) >= cap)
        return td_vfail(v, node, field, "\"%.40s...\" is longer than %zu characters", s, cap - 1);
    memcpy(dst, s, strlen(s) + 1);
    return TD_OK;
}

static td_status string_list(td_vctx *v, const json_t *a, const char *field, char ***out, size_t *n)
{
    if (!a)
        return TD_OK;
    if (!json_is_array(a))
        return td_vfail(v, a, field, "must be a list of strings");
    size_t cnt = json_array_size(a);
    char **list = calloc(cnt ? cnt : 1, sizeof *list);
    if (!list)
        return td_err_set(v->err, TD_ENOMEM, "out of memory");
    for (size_t i = 0; i < cnt; i++) {
        const char *s = json_string_value(json_array_get(a, i));
        if (!s || !(list[i] = strdup(s))) {
            for (size_t j = 0; j < i; j++)
                free(list[j]);
            free(list);
            if (!s)
                return td_vfail(v, json_array_get(a, i), field, "item %zu must be a string", i);
            return td_err_set(v->err, TD_ENOMEM, "out of memory");
        }
    }
    *out = list;
    *n = cnt;
    return TD_OK;
}

static void free_list(char **l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(l[i]);
    free(l);
}

void td_costpolicy_destroy(td_costpolicy *p)
{
    if (!p)
        return;
    free(p->gpu);
    free(p->routes);
    for (size_t i = 0; i < p->nshared; i++) {
        free_list(p->shared[i].weight_names, p->shared[i].nweights);
        free(p->shared[i].weights);
    }
    free(p->shared);
    free_list(p->interruptible_pcs, p->ninterruptible_pcs);
    free_list(p->protected_envs, p->nprotected_envs);
    free(p);
}

const char *td_costpolicy_currency(const td_costpolicy *p)
{
    return p->currency;
}

/* ---- prices ---- */

/* A price of requests: {route: R} or {model: M} with per1kTokens (or
 * per1kTokensIn and per1kTokensOut), perRequest, perGPUHour. have/val:
 * the per* fields in parse_price's order. */
static td_status parse_request_price(td_vctx *v, td_costpolicy *p, const json_t *e, const char *f,
                                     const int *have, const int64_t *val, int nhave)
{
    char ff[128];
    route_price rp;
    memset(&rp, 0, sizeof rp);
    json_t *route = json_object_get(e, "route"), *model = json_object_get(e, "model");
    const char *who;
    if (model) {
        snprintf(ff, sizeof ff, "%s.model", f);
        TD_TRY(copy_name(v, model, ff, rp.model, sizeof rp.model));
        const char *star = strchr(rp.model, '*');
        if (strcmp(rp.model, "*") == 0)
            return td_vfail(v, model, ff, "\"*\" alone is no model; the default price of "
                                          "every request is {route: \"*\", ...}");
        if (star && star[1])
            return td_vfail(v, model, ff, "\"%s\": '*' may only end a model prefix "
                                          "(\"llama-3-*\")",
                            rp.model);
        who = rp.model;
    } else {
        snprintf(ff, sizeof ff, "%s.route", f);
        TD_TRY(copy_name(v, route, ff, rp.route, sizeof rp.route));
        who = rp.route;
    }
    const char *what = model ? "model" : "route";
    if (have[0] || have[1] || have[2])
        return td_vfail(v, e, f, "a %s takes per1kTokens, per1kTokensIn/per1kTokensOut, "
                              "perRequest or perGPUHour", what);
    if (nhave == 0)
        return td_vfail(v, e, f, "%s %s has no price (per1kTokens, per1kTokensIn/"
                              "per1kTokensOut, perRequest or perGPUHour)",
                        what, who);
    if (have[3] && (have[4] || have[5]))
        return td_vfail(v, e, f, "per1kTokens and per1kTokensIn/per1kTokensOut exclude each other");
    if (have[4] != have[5])
        return td_vfail(v, e, f, "per1kTokensIn and per1kTokensOut go together");
    rp.per_1k_in = have[3] ? val[3] : have[4] ? val[4] : -1;
    rp.per_1k_out = have[3] ? val[3] : have[5] ? val[5] : -1;
    rp.per_request = have[6] ? val[6] : -1;
    rp.per_gpu_hour = have[7] ? val[7] : -1;
    for (size_t j = 0; j < p->nroutes; j++)
        if (strcmp(p->routes[j].route, rp.route) == 0 && strcmp(p->routes[j].model, rp.model) == 0)
            return td_vfail(v, e, f, "a second price for %s %s", what, who);
    route_price *rr = realloc(p->routes, (p->nroutes + 1) * sizeof *rr);
    if (!rr)
        return td_err_set(v->err, TD_ENOMEM, "out of memory");
    p->routes = rr;
    rr[p->nroutes++] = rp;
    if (rp.model[0])
        p->nmodel_prices++;
    return TD_OK;
}

static td_status parse_price(td_vctx *v, td_costpolicy *p, const json_t *e, size_t i)
{
    static const char *const fields[] = {"resource", "flavor", "route", "model", "perHour",
                                         "perGiBHour", "perGiBMonth", "per1kTokens",
                                         "per1kTokensIn", "per1kTokensOut", "perRequest",
                                         "perGPUHour", NULL};
    char f[96], ff[128];
    snprintf(f, sizeof f, "spec.prices[%zu]", i);
    TD_TRY(check_fields(v, e, f, fields));
    json_t *res = json_object_get(e, "resource"), *route = json_object_get(e, "route");
    json_t *model = json_object_get(e, "model");
    if (!!res + !!route + !!model != 1)
        return td_vfail(v, e, f, "needs exactly one of resource (nvidia.com/gpu, cpu, memory, "
                              "storage), route or model");
    const char *const per_keys[] = {"perHour", "perGiBHour", "perGiBMonth", "per1kTokens",
                                    "per1kTokensIn", "per1kTokensOut", "perRequest",
                                    "perGPUHour"};
    int64_t val[8];
    int have[8] = {0};
    int nhave = 0;
    for (int k = 0; k < 8; k++) {
        json_t *n = json_object_get(e, per_keys[k]);
        if (!n)
            continue;
        snprintf(ff, sizeof ff, "%s.%s", f, per_keys[k]);
        TD_TRY(money_node(v, n, ff, &val[k]));
        have[k] = 1;
        nhave++;
    }
    if (res) {
        const char *r = json_string_value(res);
        if (!r)
            return td_vfail(v, res, f, "resource must be a string");
        const char *want = NULL;
        int wk = -1;
        if (strcmp(r, "nvidia.com/gpu") == 0 || strcmp(r, "cpu") == 0) {
            want = "perHour";
            wk = 0;
        } else if (strcmp(r, "memory") == 0) {
            want = "perGiBHour";
            wk = 1;
        } else if (strcmp(r, "storage") == 0) {
            want = "perGiBMonth";
            wk = 2;
        } else {
            snprintf(ff, sizeof ff, "%s.resource", f);
            return td_vfail(v, res, ff, "unknown resource \"%s\" (nvidia.com/gpu, cpu, memory, "
                                     "storage)",
                         r);
        }
        if (!have[wk] || nhave != 1)
            return td_vfail(v, e, f, "resource %s takes exactly one price: %s", r, want);
        json_t *fl = json_object_get(e, "flavor");
        if (fl && strcmp(r, "nvidia.com/gpu") != 0)
            return td_vfail(v, fl, f, "flavor applies to nvidia.com/gpu only");
        if (strcmp(r, "nvidia.com/gpu") == 0) {
            char flavor[TD_LEDGER_STR] = "*";
            if (fl) {
                snprintf(ff, sizeof ff, "%s.flavor", f);
                TD_TRY(copy_name(v, fl, ff, flavor, sizeof flavor));
            }
            for (size_t j = 0; j < p->ngpu; j++)
                if (strcmp(p->gpu[j].flavor, flavor) == 0)
                    return td_vfail(v, e, f, "a second price for nvidia.com/gpu flavor %s",
                                 flavor);
            gpu_price *g = realloc(p->gpu, (p->ngpu + 1) * sizeof *g);
            if (!g)
                return td_err_set(v->err, TD_ENOMEM, "out of memory");
            p->gpu = g;
            memset(&g[p->ngpu], 0, sizeof *g);
            memcpy(g[p->ngpu].flavor, flavor, sizeof flavor);
            g[p->ngpu++].per_hour = val[0];
            return TD_OK;
        }
        int64_t *slot = strcmp(r, "cpu") == 0      ? &p->cpu_per_hour
                        : strcmp(r, "memory") == 0 ? &p->memory_per_gib_hour
                                                   : &p->storage_per_gib_month;
        if (*slot >= 0)
            return td_vfail(v, e, f, "a second price for %s", r);
        *slot = val[wk];
        return TD_OK;
    }
    return parse_request_price(v, p, e, f, have, val, nhave);
}

/* ---- shared items ---- */

static td_status parse_shared(td_vctx *v, td_costpolicy *p, const json_t *e, size_t i)
{
    static const char *const fields[] = {"name", "monthly", "hourly", "source", "kind",
                                         "allocate", NULL};
    char f[96], ff[160];
    snprintf(f, sizeof f, "spec.shared[%zu]", i);
    TD_TRY(check_fields(v, e, f, fields));
    shared_item s;
    memset(&s, 0, sizeof s);
    snprintf(ff, sizeof ff, "%s.name", f);
    TD_TRY(copy_name(v, json_object_get(e, "name"), ff, s.name, sizeof s.name));
    for (size_t j = 0; j < p->nshared; j++)
        if (strcmp(p->shared[j].name, s.name) == 0)
            return td_vfail(v, json_object_get(e, "name"), ff, "a second shared item named %s",
                         s.name);
    json_t *src = json_object_get(e, "source"), *kind = json_object_get(e, "kind");
    int idle = 0;
    if (src) {
        if (!json_is_string(src) || strcmp(json_string_value(src), "idleCapacity") != 0) {
            snprintf(ff, sizeof ff, "%s.source", f);
            return td_vfail(v, src, ff, "the only source is idleCapacity");
        }
        idle = 1;
    }
    if (kind) {
        const char *k = json_string_value(kind);
        snprintf(ff, sizeof ff, "%s.kind", f);
        if (!k || !(strcmp(k, "fixed") == 0 || strcmp(k, "idleGpu") == 0))
            return td_vfail(v, kind, ff, "must be fixed or idleGpu");
        if (src && strcmp(k, "fixed") == 0)
            return td_vfail(v, kind, ff, "kind fixed contradicts source idleCapacity");
        idle = idle || strcmp(k, "idleGpu") == 0;
    }
    json_t *mon = json_object_get(e, "monthly"), *hr = json_object_get(e, "hourly");
    s.kind = idle ? SHARED_IDLE_GPU : SHARED_FIXED;
    if (idle && (mon || hr))
        return td_vfail(v, mon ? mon : hr, f, "an idleGpu item is priced from the pools; it takes "
                                           "no monthly or hourly amount");
    if (!idle) {
        if (!!mon == !!hr)
            return td_vfail(v, e, f, "needs exactly one of monthly or hourly (or source: "
                                  "idleCapacity)");
        snprintf(ff, sizeof ff, "%s.%s", f, mon ? "monthly" : "hourly");
        TD_TRY(money_node(v, mon ? mon : hr, ff, &s.rate_nano));
        s.per_hours = mon ? TD_HOURS_PER_MONTH : 1;
    }
    json_t *al = json_object_get(e, "allocate");
    snprintf(ff, sizeof ff, "%s.allocate", f);
    if (!al)
        return td_vfail(v, e, ff, "required: proportional, even or {weights: {owner: w}}");
    if (json_is_string(al)) {
        const char *a = json_string_value(al);
        if (strcmp(a, "proportional") == 0)
            s.rule = ALLOC_PROPORTIONAL;
        else if (strcmp(a, "even") == 0)
            s.rule = ALLOC_EVEN;
        else
            return td_vfail(v, al, ff, "unknown rule \"%s\" (proportional, even or {weights: "
                                    "{owner: w}})",
                         a);
    } else {
        static const char *const wf[] = {"weights", NULL};
        TD_TRY(check_fields(v, al, ff, wf));
        json_t *w = json_object_get(al, "weights");
        snprintf(ff, sizeof ff, "%s.allocate.weights", f);
        if (!json_is_object(w) || json_object_size(w) == 0)
            return td_vfail(v, w ? w : al, ff, "must be a non-empty map of owner to weight");
        s.rule = ALLOC_WEIGHTS;
        size_t nw = json_object_size(w);
        s.weight_names = calloc(nw, sizeof *s.weight_names);
        s.weights = calloc(nw, sizeof *s.weights);
        if (!s.weight_names || !s.weights) {
            free(s.weight_names);
            free(s.weights);
            return td_err_set(v->err, TD_ENOMEM, "out of memory");
        }
        const char *k;
        json_t *val;
        int64_t sum = 0;
        td_status st = TD_OK;
        json_object_foreach(w, k, val)
        {
            char wff[300];
            snprintf(wff, sizeof wff, "%s.%s", ff, k);
            int64_t x;
            st = money_node(v, val, wff, &x);
            if (st == TD_OK && !(s.weight_names[s.nweights] = strdup(k)))
                st = td_err_set(v->err, TD_ENOMEM, "out of memory");
            if (st != TD_OK)
                break;
            s.weights[s.nweights++] = x;
            sum += x;
        }
        if (st == TD_OK && sum == 0)
            st = td_vfail(v, w, ff, "at least one weight must be above zero");
        if (st != TD_OK) {
            free_list(s.weight_names, s.nweights);
            free(s.weights);
            return st;
        }
    }
    shared_item *ns = realloc(p->shared, (p->nshared + 1) * sizeof *ns);
    if (!ns) {
        free_list(s.weight_names, s.nweights);
        free(s.weights);
        return td_err_set(v->err, TD_ENOMEM, "out of memory");
    }
    p->shared = ns;
    ns[p->nshared++] = s;
    return TD_OK;
}

static td_status parse_spec(td_vctx *v, td_costpolicy *p)
{
    static const char *const top[] = {"apiVersion", "kind", "metadata", "spec", NULL};
    static const char *const spec[] = {"currency", "prices", "interruptible", "shared", NULL};
    static const char *const intr[] = {"priorityClasses", "discount", "protectedEnvironments",
                                       NULL};
    TD_TRY(check_fields(v, v->obj, "", top));
    json_t *s = json_object_get(v->obj, "spec");
    if (!s)
        return td_vfail(v, v->obj, "spec", "required: a mapping with prices");
    TD_TRY(check_fields(v, s, "spec", spec));
    json_t *cur = json_object_get(s, "currency");
    if (cur) {
        const char *c = json_string_value(cur);
        size_t n = c ? strlen(c) : 0;
        if (n < 1 || n > 8)
            return td_vfail(v, cur, "spec.currency", "must be a currency code such as USD");
        for (size_t i = 0; i < n; i++)
            if (!isalpha((unsigned char)c[i]))
                return td_vfail(v, cur, "spec.currency", "must be a currency code such as USD");
        memcpy(p->currency, c, n + 1);
    }
    json_t *prices = json_object_get(s, "prices");
    if (prices && !json_is_array(prices))
        return td_vfail(v, prices, "spec.prices", "must be a list");
    for (size_t i = 0; i < json_array_size(prices); i++)
        TD_TRY(parse_price(v, p, json_array_get(prices, i), i));
    json_t *in = json_object_get(s, "interruptible");
    if (in) {
        TD_TRY(check_fields(v, in, "spec.interruptible", intr));
        json_t *d = json_object_get(in, "discount");
        if (d) {
            TD_TRY(money_node(v, d, "spec.interruptible.discount", &p->discount_nano));
            if (p->discount_nano > TD_MONEY_NANO)
                return td_vfail(v, d, "spec.interruptible.discount",
                             "must be a fraction between 0 and 1 (0.6 = 60%% off)");
        }
        TD_TRY(string_list(v, json_object_get(in, "priorityClasses"),
                        "spec.interruptible.priorityClasses", &p->interruptible_pcs,
                        &p->ninterruptible_pcs));
        json_t *pe = json_object_get(in, "protectedEnvironments");
        if (pe)
            TD_TRY(string_list(v, pe, "spec.interruptible.protectedEnvironments",
                            &p->protected_envs, &p->nprotected_envs));
    }
    if (!p->protected_envs) {
        static const char *const def[] = {"prod", "production"};
        p->protected_envs = calloc(2, sizeof *p->protected_envs);
        if (!p->protected_envs)
            return td_err_set(v->err, TD_ENOMEM, "out of memory");
        for (int i = 0; i < 2; i++)
            if (!(p->protected_envs[p->nprotected_envs++] = strdup(def[i])))
                return td_err_set(v->err, TD_ENOMEM, "out of memory");
    }
    json_t *sh = json_object_get(s, "shared");
    if (sh && !json_is_array(sh))
        return td_vfail(v, sh, "spec.shared", "must be a list");
    for (size_t i = 0; i < json_array_size(sh); i++)
        TD_TRY(parse_shared(v, p, json_array_get(sh, i), i));
    return TD_OK;
}

td_status td_costpolicy_parse(const json_t *obj, const td_manifest *src, td_costpolicy **out,
                              td_err *err)
{
    td_vctx v = {.src = src, .obj = obj, .kind = "CostPolicy", .err = err,
                 .line = TD_VLINE_FIRST_MEMBER};
    if (!json_is_object(obj))
        return td_manifest_err(src, obj, err, TD_EINVAL, "a CostPolicy must be a mapping");
    const char *name = td_json_str(obj, "metadata.name");
    /* 160: the length these messages have always been cut to */
    snprintf(v.who, 160, "CostPolicy %s", name ? name : "(unnamed)");
    td_costpolicy *p = calloc(1, sizeof *p);
    if (!p)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    strcpy(p->currency, "USD");
    p->cpu_per_hour = p->memory_per_gib_hour = p->storage_per_gib_month = -1;
    td_status st = parse_spec(&v, p);
    if (st != TD_OK) {
        td_costpolicy_destroy(p);
        return st;
    }
    *out = p;
    return TD_OK;
}

td_status td_costpolicy_from_config(const td_config *c, td_costpolicy **out, td_err *err)
{
    json_t *obj = td_config_get(c, "CostPolicy", "", "default");
    if (!obj) {
        json_t *const *all;
        if (td_config_list(c, "CostPolicy", NULL, &all) == 0)
            return td_err_set(err, TD_ENOTFOUND,
                              "no CostPolicy in the configuration (kind: CostPolicy, "
                              "apiVersion: tenantd.dev/v1alpha1)");
        obj = all[0];
    }
    return td_costpolicy_parse(obj, NULL, out, err);
}

/* ---- exact arithmetic ---- */

/* a * b, or -1 on overflow (inputs are non-negative). */
td_i128 td__mul(td_i128 a, td_i128 b)
{
    td_i128 r;
    if (__builtin_mul_overflow(a, b, &r))
        return -1;
    return r;
}

/* num / den rounded half up (num, den >= 0). */
td_i128 td__div_round(td_i128 num, td_i128 den)
{
    return (num + den / 2) / den;
}

const gpu_price *td__gpu_price(const td_costpolicy *p, const char *flavor)
{
    const gpu_price *any = NULL;
    for (size_t i = 0; i < p->ngpu; i++) {
        if (strcmp(p->gpu[i].flavor, flavor) == 0)
            return &p->gpu[i];
        if (strcmp(p->gpu[i].flavor, "*") == 0)
            any = &p->gpu[i];
    }
    return any;
}

bool td_costpolicy_prices_route(const td_costpolicy *p, const char *route)
{
    return p && route && td__route_price(p, route) != NULL;
}

const route_price *td__route_price(const td_costpolicy *p, const char *route)
{
    const route_price *any = NULL;
    for (size_t i = 0; i < p->nroutes; i++) {
        if (!p->routes[i].route[0])
            continue; /* a model's */
        if (strcmp(p->routes[i].route, route) == 0)
            return &p->routes[i];
        if (strcmp(p->routes[i].route, "*") == 0)
            any = &p->routes[i];
    }
    return any;
}

/* The length of pattern's prefix when it matches model ("llama-*" matches
 * "llama-3": 6), SIZE_MAX for an exact match, 0 when it does not match. A
 * prefix "x*" of length 1 and more; "*" alone is refused by the parser. */
static size_t model_specificity(const char *pattern, const char *model)
{
    size_t n = strlen(pattern);
    if (n && pattern[n - 1] == '*')
        return strncmp(pattern, model, n - 1) == 0 ? n - 1 : 0;
    return strcmp(pattern, model) == 0 ? SIZE_MAX : 0;
}

const route_price *td__request_price(const td_costpolicy *p, const char *route, const char *model)
{
    const route_price *best = NULL;
    size_t best_n = 0;
    for (size_t i = 0; model && model[0] && i < p->nroutes; i++) {
        if (!p->routes[i].model[0])
            continue;
        size_t n = model_specificity(p->routes[i].model, model);
        if (n > best_n) {
            best = &p->routes[i];
            best_n = n;
        }
    }
    return best ? best : td__route_price(p, route);
}

bool td_costpolicy_has_model_prices(const td_costpolicy *p)
{
    return p && p->nmodel_prices > 0;
}

bool td_costpolicy_prices_model(const td_costpolicy *p, const char *pattern)
{
    if (!p || !pattern || !pattern[0])
        return false;
    size_t n = strlen(pattern);
    bool prefix = pattern[n - 1] == '*';
    for (size_t i = 0; i < p->nroutes; i++) {
        const char *m = p->routes[i].model;
        size_t mn = strlen(m);
        if (!mn)
            continue;
        if (m[mn - 1] == '*') {
            /* a prefix price covers every model pattern starting with it */
            if (strncmp(m, pattern, mn - 1) == 0 && (prefix ? n - 1 : n) >= mn - 1)
                return true;
        } else if (!prefix && strcmp(m, pattern) == 0) {
            return true;
        }
    }
    return false;
}

/* Splits r (clipped to the period) into measures, each an exact numerator
 * over a fixed denominator: amount_nano = price * q * factor / den. */
td_status td__measures(const td_costpolicy *p, const td_ledger_rec *r, int64_t from_ns,
                       int64_t to_ns, measure out[TD_CHARGE_MAX], size_t *n, td_err *err)
{
    *n = 0;
    memset(out, 0, TD_CHARGE_MAX * sizeof *out);
    for (int i = 0; i < TD_CHARGE_MAX; i++)
        out[i].factor = TD_MONEY_NANO;
    if (r->kind == TD_LEDGER_REQUEST) {
        if (r->start_ns < from_ns || r->start_ns >= to_ns)
            return TD_OK;
        /* refused at the door (429, 400), shed (503) or given up by its
         * client before it was sent ("cancelled"): the upstream did no work */
        if (strcmp(r->outcome, "rejected") == 0 || strcmp(r->outcome, "shed") == 0 ||
            strcmp(r->outcome, "cancelled") == 0)
            return TD_OK;
        if (r->tokens_in == 0 && r->tokens_out == 0 && r->gpu_milli_seconds == 0 &&
            r->count == 0)
            return TD_OK;
        const route_price *rp = td__request_price(p, r->route, r->model);
        if (!rp)
            return td_err_set(err, TD_EINVAL,
                              "CostPolicy: no price for route %s%s%s (used by tenant %s, record "
                              "%s)",
                              r->route[0] ? r->route : "\"\"", r->model[0] ? ", model " : "",
                              r->model, r->tenant, r->id);
        /* a model's price names the model in its items: one line per
         * model and price in a chargeback */
        char what[TD_ITEM_MAX];
        if (rp->model[0])
            snprintf(what, sizeof what, "%s/%s", r->route, r->model);
        else
            snprintf(what, sizeof what, "%s", r->route);
        int priced = 0;
        if (rp->per_1k_in >= 0 && (r->tokens_in || r->tokens_out)) {
            measure *m = &out[(*n)++];
            snprintf(m->item, sizeof m->item, "tokens/%s", what);
            strcpy(m->unit, "1k-tokens");
            /* in and out may have different prices: fold both into one numerator */
            m->q = (td_i128)r->tokens_in * rp->per_1k_in + (td_i128)r->tokens_out * rp->per_1k_out;
            m->price = 1;
            m->den = 1000;
            m->qty_num = (td_i128)(r->tokens_in + r->tokens_out);
            m->qty_den = 1000;
            priced = 1;
        }
        if (rp->per_request >= 0 && r->count > 0) {
            measure *m = &out[(*n)++];
            snprintf(m->item, sizeof m->item, "requests/%s", what);
            strcpy(m->unit, "requests");
            m->q = r->count;
            m->price = rp->per_request;
            m->den = 1;
            m->qty_num = r->count;
            m->qty_den = 1;
            priced = 1;
        }
        if (rp->per_gpu_hour >= 0 && r->gpu_milli_seconds > 0) {
            measure *m = &out[(*n)++];
            snprintf(m->item, sizeof m->item, "gpu-seconds/%s", what);
            strcpy(m->unit, "gpu-hour");
            m->q = r->gpu_milli_seconds;
            m->price = rp->per_gpu_hour;
            m->den = 1000 * 3600;
            m->qty_num = r->gpu_milli_seconds;
            m->qty_den = 1000 * 3600;
            priced = 1;
        }
        if (!priced && (r->tokens_in || r->tokens_out || r->gpu_milli_seconds))
            return td_err_set(err, TD_EINVAL,
                              "CostPolicy: %s %s has no price for what record %s used "
                              "(%s)",
                              rp->model[0] ? "model" : "route",
                              rp->model[0] ? rp->model : rp->route, r->id,
                              (r->tokens_in || r->tokens_out) ? "tokens" : "GPU-seconds");
        return TD_OK;
    }
    int64_t s = r->start_ns > from_ns ? r->start_ns : from_ns;
    int64_t e = r->end_ns < to_ns ? r->end_ns : to_ns;
    if (e <= s)
        return TD_OK;
    int64_t ms = (e - s) / 1000000;
    if (ms <= 0)
        return TD_OK;
    td_i128 factor = r->interruptible ? TD_MONEY_NANO - p->discount_nano : TD_MONEY_NANO;
    struct {
        int64_t amount;
        const char *what;
    } parts[4] = {{r->gpu_milli, "gpu"},
                  {r->cpu_milli, "cpu"},
                  {r->memory_bytes, "memory"},
                  {r->storage_bytes, "storage"}};
    for (int k = 0; k < 4; k++) {
        if (parts[k].amount <= 0)
            continue;
        measure *m = &out[(*n)];
        int64_t price;
        td_i128 den;
        if (k == 0) {
            const gpu_price *g = td__gpu_price(p, r->flavor);
            if (!g)
                return td_err_set(err, TD_EINVAL,
                                  "CostPolicy: no price for nvidia.com/gpu flavor %s (used by "
                                  "workload %s)",
                                  r->flavor[0] ? r->flavor : "\"\"", r->workload);
            price = g->per_hour;
            snprintf(m->item, sizeof m->item, "gpu/%s", r->flavor[0] ? r->flavor : "-");
            strcpy(m->unit, "gpu-hour");
            den = (td_i128)1000 * 3600000;
        } else {
            static const char *const units[] = {"", "core-hour", "GiB-hour", "GiB-month"};
            price = k == 1 ? p->cpu_per_hour : k == 2 ? p->memory_per_gib_hour
                                                      : p->storage_per_gib_month;
            if (price < 0)
                return td_err_set(err, TD_EINVAL,
                                  "CostPolicy: no price for %s (used by workload %s)",
                                  parts[k].what, r->workload);
            snprintf(m->item, sizeof m->item, "%s", parts[k].what);
            strcpy(m->unit, units[k]);
            den = k == 1   ? (td_i128)1000 * 3600000
                  : k == 2 ? ((td_i128)1 << 30) * 3600000
                           : ((td_i128)1 << 30) * 3600000 * TD_HOURS_PER_MONTH;
        }
        m->q = (td_i128)parts[k].amount * ms;
        m->price = price;
        m->factor = factor;
        m->den = den;
        m->qty_num = m->q;
        m->qty_den = den;
        (*n)++;
    }
    return TD_OK;
}

td_status td__measure_nano(const measure *m, td_i128 *nano, td_err *err)
{
    /* the interruptible discount is a factor over TD_MONEY_NANO */
    td_i128 qf = td__mul(m->q, m->factor);
    td_i128 num = qf < 0 ? -1 : td__mul(qf, m->price);
    td_i128 den = td__mul(m->den, TD_MONEY_NANO);
    if (num < 0 || den < 0)
        return td_err_set(err, TD_EINVAL, "CostPolicy: amount of %s overflows", m->item);
    *nano = td__div_round(num, den);
    return TD_OK;
}

td_status td_chargeback_price(const td_costpolicy *p, const td_ledger_rec *r, int64_t from_ns,
                              int64_t to_ns, td_charge out[TD_CHARGE_MAX], size_t *n,
                              td_err *err)
{
    measure ms[TD_CHARGE_MAX];
    size_t nm;
    *n = 0;
    TD_TRY(td__measures(p, r, from_ns, to_ns, ms, &nm, err));
    for (size_t i = 0; i < nm; i++) {
        td_i128 nano = 0; /* gcc -O3 cannot see TRY set it */
        TD_TRY(td__measure_nano(&ms[i], &nano, err));
        if (nano > INT64_MAX)
            return td_err_set(err, TD_EINVAL, "CostPolicy: amount of %s overflows", ms[i].item);
        memcpy(out[i].item, ms[i].item, sizeof out[i].item);
        memcpy(out[i].unit, ms[i].unit, sizeof out[i].unit);
        out[i].quantity_micro = (int64_t)(ms[i].qty_num * 1000000 / ms[i].qty_den);
        out[i].amount_nano = (int64_t)nano;
    }
    *n = nm;
    return TD_OK;
}

/* ---- the kind ---- */

/* Validating a CostPolicy is parsing it and throwing the result away. */
static td_status validate_costpolicy(td_vctx *v)
{
    td_costpolicy *p = NULL;
    td_status st = td_costpolicy_parse(v->obj, v->src, &p, v->err);
    td_costpolicy_destroy(p);
    return st;
}

static const td_kind_def kinds[] = {
    {"CostPolicy", TD_API_TENANTD, false, "costpolicy,costpolicies", validate_costpolicy, NULL, 0,
     NULL},
};

const td_kind_def *td_cost_kinds(size_t *n)
{
    *n = sizeof kinds / sizeof kinds[0];
    return kinds;
}
