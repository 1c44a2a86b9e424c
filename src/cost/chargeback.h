/* chargeback.h - what usage costs, and who pays: the CostPolicy kind (prices,
 * interruptible discount, shared costs with an allocation rule), the price of
 * one ledger record, showback/chargeback over a period grouped by owner, and
 * right-sizing from measured use. Pure: no files, clocks or sockets; times
 * come in as arguments.
 *
 * Money is exact. Prices are parsed from decimal text into nano-units
 * (1e-9 of the currency) and never pass through a double. A report line's
 * amount is its exact nano-unit amount rounded half up to the cent; a shared
 * item's total is rounded half up to the cent first and then split among
 * owners by the largest-remainder rule (each owner gets the floor of its
 * exact share in cents, and the cents left over go one each to the owners
 * with the largest fractional parts, ties to the owner whose name sorts
 * first). So the lines of a report add up exactly to its total. */
#ifndef TENANTD_CHARGEBACK_H
#define TENANTD_CHARGEBACK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/kind.h"
#include "core/config.h"
#include "core/ledger_rec.h"
#include "core/manifest.h"
#include "tenantd/status.h"

#define TD_MONEY_NANO 1000000000LL  /* nano-units per currency unit */
#define TD_HOURS_PER_MONTH 730      /* monthly amounts and GiB-months are prorated at this */

/* ---- CostPolicy ---- */

typedef struct td_costpolicy td_costpolicy;

/* Parses and validates a CostPolicy object (borrowed; nothing of it is kept).
 * src (may be NULL) names file and line in messages:
 * "platform.yaml:12: CostPolicy default: spec.prices[1].perHour: \"1.2.3\" is
 * not a decimal amount". Rejects unknown fields, negative or malformed
 * prices, duplicate prices, discounts outside [0,1], shared items without an
 * amount or a source, unknown allocation rules. A price names exactly one
 * of resource, route or model; a model is an exact name or a prefix ending
 * in '*' (not "*" alone: {route: "*"} is the default price). */
td_status td_costpolicy_parse(const json_t *obj, const td_manifest *src, td_costpolicy **out,
                              td_err *err);
void td_costpolicy_destroy(td_costpolicy *p);

/* The CostPolicy of a snapshot: the one named "default", else the first.
 * TD_ENOTFOUND when the snapshot has none. */
td_status td_costpolicy_from_config(const td_config *c, td_costpolicy **out, td_err *err);

const char *td_costpolicy_currency(const td_costpolicy *p);

/* true when p has a price (per1kTokens, perRequest or perGPUHour) for the
 * Route named route: its own, or the default ({route: "*"}). */
bool td_costpolicy_prices_route(const td_costpolicy *p, const char *route);

/* true when every model that pattern (an exact name, or a prefix ending in
 * '*') matches has a price of its own ({model: M}: an equal name, or a
 * prefix price covering it), whatever its route. */
bool td_costpolicy_prices_model(const td_costpolicy *p, const char *pattern);

/* true when p has at least one price by model (p may be NULL: false). */
bool td_costpolicy_has_model_prices(const td_costpolicy *p);

/* Parses a non-negative decimal ("2.50", "0.0042", "730") into nano-units.
 * At most 9 decimals; TD_EINVAL otherwise. Exposed for tests and callers
 * that take amounts on the command line. */
td_status td_money_parse(const char *s, int64_t *nano, td_err *err);

/* ---- pricing one record ---- */

#define TD_CHARGE_MAX 4
#define TD_ITEM_MAX 96

typedef struct {
    char item[TD_ITEM_MAX]; /* "gpu/a100", "cpu", "memory", "storage", "tokens/completions",
                               "requests/completions", "gpu-seconds/completions" */
    char unit[16];          /* "gpu-hour", "core-hour", "GiB-hour", "GiB-month", "1k-tokens",
                               "requests", "gpu-hour" */
    int64_t quantity_micro; /* quantity in unit, x 1e6 (truncated; display only) */
    int64_t amount_nano;    /* exact, before any rounding */
} td_charge;

/* Prices the part of r that lies in [from_ns, to_ns) (pass INT64_MIN and
 * INT64_MAX for the whole record). An interval yields up to four charges
 * (GPU of its flavor, CPU, memory, storage; discounted when interruptible),
 * a request one per priced measure of its price: the most specific of its
 * model's (exact name, then the longest prefix), its route's, the default
 * (route "*"). Items of a price by model name the model too
 * ("tokens/ROUTE/MODEL"). Zero quantities, and
 * requests whose outcome is rejected or shed (the upstream did no work),
 * yield no charge. A used resource, flavor or route without a price is TD_EINVAL
 * naming it ("no price for nvidia.com/gpu flavor h100"); nothing is counted
 * as zero. *n is the number of charges written to out. */
td_status td_chargeback_price(const td_costpolicy *p, const td_ledger_rec *r, int64_t from_ns,
                              int64_t to_ns, td_charge out[TD_CHARGE_MAX], size_t *n,
                              td_err *err);

/* ---- allocation ---- */

/* Splits total (cents, >= 0) into n parts proportional to weights (>= 0, not
 * all zero) by the largest-remainder rule above; names (may be NULL: index
 * order) break ties. out[i] sums exactly to total. TD_EINVAL if every
 * weight is zero or one is negative. */
td_status td_chargeback_allocate(int64_t total, const int64_t *weights, const char *const *names,
                                 size_t n, int64_t *out, td_err *err);

/* ---- a report ---- */

typedef enum {
    TD_BY_TENANT = 0,
    TD_BY_TEAM,
    TD_BY_PROJECT,
    TD_BY_ENVIRONMENT,
    TD_BY_NAMESPACE, /* intervals by their workload's namespace; requests by tenant */
    TD_BY_MODEL      /* requests by their model ("(none)" when they name none, and
                        intervals) */
} td_chargeback_by;

/* "tenant"|"team"|"project"|"environment"|"namespace"|"model"; TD_EINVAL
 * otherwise. */
td_status td_chargeback_by_parse(const char *s, td_chargeback_by *by, td_err *err);

/* The owner key of r under by: its label, or "(none)" when it is empty. */
const char *td_chargeback_owner(const td_ledger_rec *r, td_chargeback_by by, char *buf,
                                size_t len);

/* GPUs a NodePool provides (nodes x capacity nvidia.com/gpu), for idle cost. */
typedef struct {
    char pool[64];
    char flavor[64];
    int64_t gpus;
} td_pool_gpus;

/* The GPU capacity of every NodePool of c; *out is malloc'd (free it). */
td_status td_chargeback_pools(const td_config *c, td_pool_gpus **out, size_t *n, td_err *err);

typedef struct {
    char owner[TD_ITEM_MAX];
    char tenant[TD_LEDGER_STR], team[TD_LEDGER_STR], project[TD_LEDGER_STR],
        environment[TD_LEDGER_STR]; /* labels of the owner's first record; "" if mixed */
    char item[TD_ITEM_MAX];         /* a td_charge item, or "shared/NAME" */
    char unit[16];                  /* "share" for shared items */
    int64_t quantity_micro;
    int64_t amount_cents;
    bool shared;
} td_chargeback_line;

typedef struct {
    char owner[TD_ITEM_MAX];
    char tenant[TD_LEDGER_STR], team[TD_LEDGER_STR], project[TD_LEDGER_STR],
        environment[TD_LEDGER_STR];
    int64_t direct_cents, shared_cents, total_cents;
    int64_t gpu_milli_hours, cpu_milli_hours, mem_gib_milli_hours; /* usage, x 1000 */
    int64_t tokens_in, tokens_out, requests;
} td_chargeback_owner_sum;

typedef struct {
    char name[TD_ITEM_MAX];
    char kind[16];     /* "fixed" | "idleGpu" */
    char rule[16];     /* "proportional" | "even" | "weights" */
    int64_t amount_cents;
    int64_t idle_gpu_milli_hours; /* idleGpu only */
} td_chargeback_shared_sum;

typedef struct {
    int64_t from_ns, to_ns;
    td_chargeback_by by;
    char currency[16];
    td_chargeback_line *lines; /* by owner name, direct items (by name) then shared */
    size_t nlines;
    td_chargeback_owner_sum *owners; /* by owner name */
    size_t nowners;
    td_chargeback_shared_sum *shared;
    size_t nshared;
    int64_t direct_cents, shared_cents, total_cents; /* total = sum of every line */
} td_chargeback_report;

/* Showback/chargeback of recs (borrowed) over [from_ns, to_ns), grouped by
 * by. Records are clipped to the period. Shared items: fixed amounts
 * (hourly, or monthly prorated at TD_HOURS_PER_MONTH h) over the period;
 * idleGpu = for each pool, GPUs x period hours minus the GPU-hours held by
 * intervals of its flavor (never below zero), priced at that flavor's
 * GPU-hour price. Allocation: proportional to each owner's direct cost in
 * nano-units (even when every owner's is zero), even among the owners of
 * the report, or by weights naming owners of the report's grouping (an owner
 * with a weight but no usage still gets its line). With no owner at all a
 * shared item is charged to the owner "(unallocated)".
 * TD_EINVAL for an empty or inverted period or a missing price. */
td_status td_chargeback_compute(const td_costpolicy *p, const td_ledger_rec *recs, size_t n,
                                int64_t from_ns, int64_t to_ns, td_chargeback_by by,
                                const td_pool_gpus *pools, size_t npools,
                                td_chargeback_report **out, td_err *err);
void td_chargeback_report_destroy(td_chargeback_report *r);

/* ---- right-sizing ---- */

/* Time-weighted percentile (permille: 500 = p50, 950 = p95) over [from_ns,
 * to_ns) of the sum of values[i] held during [starts[i], ends[i]); time when
 * nothing is held counts as 0. The smallest v such that the sum is <= v for
 * at least permille/1000 of the period. TD_EINVAL for an empty period. */
td_status td_pctl_time_weighted(const int64_t *starts, const int64_t *ends, const int64_t *values,
                                size_t n, int64_t from_ns, int64_t to_ns, int permille,
                                int64_t *out, td_err *err);

typedef struct {
    int64_t p50, p95;
} td_pctl2;

typedef struct {
    char owner[TD_ITEM_MAX];
    td_pctl2 gpu_requested, gpu_used; /* milli-GPUs */
    td_pctl2 cpu_requested;           /* milli-cores */
    td_pctl2 memory_requested;        /* bytes */
    bool gpu_used_estimated;          /* some interval's use was unknown: requested stood in */
    int64_t gpu_quota_milli;          /* -1 when no quota names requests.nvidia.com/gpu */
    int64_t cpu_quota_milli, memory_quota_bytes; /* -1 when none */
    int64_t recommended_gpus;         /* ceil(p95 used x 1.2) whole GPUs */
    int64_t recommended_cpu_milli;    /* ceil(p95 requested x 1.2) to whole cores */
    int64_t recommended_memory_bytes; /* ceil(p95 requested x 1.2) to whole GiB */
    int64_t interruptible_candidate_gpu_milli_hours; /* see td_rightsize_compute */
    int64_t interruptible_saving_cents;
} td_rightsize_row;

typedef struct {
    td_rightsize_row *rows; /* by owner name */
    size_t nrows;
    char (*idle_routes)[TD_LEDGER_STR]; /* Route objects with no request in the period */
    size_t nidle_routes;
} td_rightsize;

/* Right-sizing of recs over [from_ns, to_ns) grouped by by. c (may be NULL)
 * gives ResourceQuotas (unscoped ones, summed over the owner's namespaces:
 * a Tenant's spec.namespaces, the namespaces labelled team/project/
 * environment, or the namespace itself) and Routes. p (may be NULL) prices
 * the saving of interruptible candidates: GPU-hours of intervals that were
 * not interruptible and ran in an environment the policy does not list as
 * protected (spec.interruptible.protectedEnvironments, default [prod,
 * production]) could run on interruptible capacity at the policy's discount. */
td_status td_rightsize_compute(const td_config *c, const td_costpolicy *p,
                               const td_ledger_rec *recs, size_t n, int64_t from_ns,
                               int64_t to_ns, td_chargeback_by by, td_rightsize **out,
                               td_err *err);
void td_rightsize_destroy(td_rightsize *r);

/* The cost stage's kind (CostPolicy), *n entries, static; registered by
 * src/kinds/builtin.c. */
const td_kind_def *td_cost_kinds(size_t *n);

#endif
