/* scenario.h - a LoadScenario (tenantd.dev/v1alpha1), the input of
 * `tenantctl loadtest`: per tenant its key, Poisson rate, criticality mix,
 * request shape, client behaviour and SLO. */
#ifndef TENANTD_SCENARIO_H
#define TENANTD_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/kind.h"
#include "gateway/critqueue.h"
#include "core/manifest.h"
#include "tenantd/status.h"

#define TD_SCENARIO_MAX_TENANTS 64

typedef struct {
    char *name, *key;
    double rate;
    double crit[TD_CRIT_COUNT]; /* weights, summing to 1 */
    long prompt_tokens, max_tokens;
    bool abusive;
    long connections;
    bool has_slo;
    uint64_t slo_p99_ns; /* 0: not judged */
    double slo_success;
} td_scenario_tenant;

typedef struct {
    char *target;
    uint64_t duration_ns;
    size_t n;
    td_scenario_tenant t[TD_SCENARIO_MAX_TENANTS];
} td_scenario;

/* Frees what s owns and zeroes it; a zeroed s is a no-op. */
void td_scenario_free(td_scenario *s);

/* Validates the one LoadScenario of m (borrowed) into *s (caller's
 * storage, overwritten). TD_EINVAL naming file:line and field, TD_ENOMEM;
 * on failure *s holds nothing (freed again). */
td_status td_scenario_load(const td_manifest *m, td_scenario *s, td_err *err);

/* The client library's kind (LoadScenario), *n entries, static;
 * registered by src/kinds/builtin.c. */
const td_kind_def *td_client_kinds(size_t *n);

#endif
