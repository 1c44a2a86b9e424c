/* budget.h - money budgets per calendar period (UTC): the period arithmetic
 * and the spend of each (slot, period), reserved atomically before a request
 * goes upstream and settled to its real price after. Pure logic: time comes
 * in as an argument (seconds since the epoch); nothing here reads a clock.
 * Amounts are nano-units of the CostPolicy's currency (TD_MONEY_NANO). */
#ifndef TENANTD_BUDGET_H
#define TENANTD_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tenantd/status.h"

typedef enum { TD_PERIOD_DAY = 0, TD_PERIOD_WEEK, TD_PERIOD_MONTH, TD_PERIOD_COUNT } td_period;

/* "day" | "week" | "month"; TD_EINVAL otherwise. */
td_status td_period_parse(const char *s, td_period *p);
const char *td_period_name(td_period p);

/* The calendar period of kind p that contains t_s (UTC): [*start_s, *end_s).
 * Days start at 00:00, weeks on Monday 00:00, months on the 1st 00:00
 * (Gregorian, leap years included). Any t_s, also before 1970. */
void td_period_bounds(td_period p, int64_t t_s, int64_t *start_s, int64_t *end_s);

/* t_s as "YYYY-MM-DDTHH:MM:SSZ" into buf (at least 24 bytes). */
void td_rfc3339(int64_t t_s, char *buf, size_t len);

typedef struct td_budgets td_budgets;

/* Spend state for slots 0..nslots-1, each with one counter per period kind,
 * all at zero. TD_EINVAL for 0 slots, TD_ENOMEM. */
td_status td_budgets_create(size_t nslots, td_budgets **out);
void td_budgets_destroy(td_budgets *b);

/* Reserves cost_nano (>= 0) against slot's current period of kind p at
 * now_s. The counter starts over at zero when now_s is in a later period
 * than the one it holds. Admitted when spent + cost <= limit_nano, or
 * always when force (a shadow budget: counted, never refused). TD_OK: the
 * cost is added and *period_start_s names the period it went to (for
 * td_budgets_settle). TD_EQUOTA: nothing changed. Either way *spent_nano
 * (may be NULL) is the spend before this call. The check and the add are
 * one step under the counter's own lock, so concurrent reservations never
 * pass the limit together. TD_EINVAL for a bad slot or a negative cost. */
td_status td_budgets_reserve(td_budgets *b, size_t slot, td_period p, int64_t limit_nano,
                             int64_t cost_nano, bool force, int64_t now_s, int64_t *period_start_s,
                             int64_t *spent_nano);

/* Adds delta_nano (negative to give back) to slot's spend in the period
 * that began at period_start_s, if the counter still holds that period;
 * a settle after the period ended changes nothing (the cost belonged to
 * the old period, as its ledger record does). Spend never goes below 0. */
void td_budgets_settle(td_budgets *b, size_t slot, td_period p, int64_t period_start_s,
                       int64_t delta_nano);

/* Replays a past cost (a priced ledger record that started at t_s) at
 * now_s: added when t_s lies in the period current at now_s. */
void td_budgets_replay(td_budgets *b, size_t slot, td_period p, int64_t t_s, int64_t nano,
                       int64_t now_s);

/* Forgets slot's spend of period kind p (as never used): a budget added
 * by a reload then counts from the ledger (td_gateway_budget_catch_up). */
void td_budgets_reset(td_budgets *b, size_t slot, td_period p);

/* Spend of slot's period of kind p current at now_s (0 if the counter
 * holds an older period). */
int64_t td_budgets_spent(td_budgets *b, size_t slot, td_period p, int64_t now_s);

#endif
