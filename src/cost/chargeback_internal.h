/* chargeback_internal.h - what costpolicy.c, report.c and rightsize.c share:
 * the parsed policy and exact 128-bit arithmetic on amounts. */
#ifndef TENANTD_CHARGEBACK_INTERNAL_H
#define TENANTD_CHARGEBACK_INTERNAL_H

#include "cost/chargeback.h"

__extension__ typedef __int128 td_i128;

typedef struct {
    char flavor[TD_LEDGER_STR]; /* "*" = every flavor without its own price */
    int64_t per_hour;           /* nano-units per GPU-hour */
} gpu_price;

/* A price of requests: by route (route set, model ""), by model (model
 * set: an exact name, or a prefix ending in '*'; route ""), or the default
 * (route "*"). */
typedef struct {
    char route[TD_LEDGER_STR];
    char model[TD_LEDGER_MODEL];
    int64_t per_1k_in, per_1k_out; /* nano-units per 1k tokens; -1 none */
    int64_t per_request, per_gpu_hour; /* -1 none */
} route_price;

enum { SHARED_FIXED, SHARED_IDLE_GPU };
enum { ALLOC_PROPORTIONAL, ALLOC_EVEN, ALLOC_WEIGHTS };

typedef struct {
    char name[TD_LEDGER_STR];
    int kind;
    int64_t rate_nano; /* fixed: per per_hours hours */
    int64_t per_hours; /* 1 (hourly) or TD_HOURS_PER_MONTH (monthly) */
    int rule;
    char **weight_names;
    int64_t *weights; /* nano-units of weight */
    size_t nweights;
} shared_item;

struct td_costpolicy {
    char currency[16];
    gpu_price *gpu;
    size_t ngpu;
    int64_t cpu_per_hour, memory_per_gib_hour, storage_per_gib_month; /* -1 none */
    route_price *routes; /* by route, by model and the default */
    size_t nroutes;
    size_t nmodel_prices; /* of routes, those by model */
    int64_t discount_nano; /* fraction of TD_MONEY_NANO taken off interruptible intervals */
    char **interruptible_pcs;
    size_t ninterruptible_pcs;
    char **protected_envs;
    size_t nprotected_envs;
    shared_item *shared;
    size_t nshared;
};

/* One priced measure of a record: amount_nano = q * factor * price / (den *
 * TD_MONEY_NANO), kept as exact numerators so a report can sum many records
 * of one item and round once. */
typedef struct {
    char item[TD_ITEM_MAX];
    char unit[16];
    td_i128 q;      /* quantity numerator */
    td_i128 den;
    td_i128 factor; /* TD_MONEY_NANO, less the discount when interruptible */
    int64_t price;  /* nano-units per unit (1 when q is already priced) */
    td_i128 qty_num, qty_den; /* the quantity in unit, for display */
} measure;

td_i128 td__mul(td_i128 a, td_i128 b);
td_i128 td__div_round(td_i128 num, td_i128 den);
const gpu_price *td__gpu_price(const td_costpolicy *p, const char *flavor);
const route_price *td__route_price(const td_costpolicy *p, const char *route);
/* The price of a request of route for model (may be "" or NULL): the most
 * specific one, exact model > longest model prefix > route > default
 * (route "*"). NULL: none. */
const route_price *td__request_price(const td_costpolicy *p, const char *route, const char *model);
td_status td__measures(const td_costpolicy *p, const td_ledger_rec *r, int64_t from_ns,
                       int64_t to_ns, measure out[TD_CHARGE_MAX], size_t *n, td_err *err);
td_status td__measure_nano(const measure *m, td_i128 *nano, td_err *err);

#endif
