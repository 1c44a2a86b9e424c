/* fuzz_scenario.c - libFuzzer target for the LoadScenario loader of
 * `tenantctl loadtest` (src/client/scenario.c): any bytes as a YAML
 * manifest, its LoadScenario validated. Nothing may crash or leak; a
 * rejection must leave a message; an accepted scenario must hold what the
 * load generator relies on (rates, token counts, criticality shares). */
#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/manifest.h"
#include "client/scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    td_manifest *m = NULL;
    td_err err;
    err.msg[0] = '\0';
    if (td_manifest_parse("fuzz.yaml", (const char *)data, size, &m, &err) != TD_OK) {
        assert(err.msg[0] != '\0');
        return 0;
    }
    td_scenario s;
    err.msg[0] = '\0';
    if (td_scenario_load(m, &s, &err) != TD_OK) {
        assert(err.msg[0] != '\0');
        /* a failed load leaves nothing to free */
        assert(s.n == 0 && s.target == NULL);
    } else {
        assert(s.n >= 1 && s.n <= TD_SCENARIO_MAX_TENANTS);
        for (size_t i = 0; i < s.n; i++) {
            const td_scenario_tenant *t = &s.t[i];
            assert(t->name && *t->name && t->key && *t->key);
            assert(t->rate > 0 && t->max_tokens >= 1 && t->connections >= 1);
            double sum = 0;
            for (int c = 0; c < TD_CRIT_COUNT; c++) {
                assert(t->crit[c] >= 0);
                sum += t->crit[c];
            }
            assert(fabs(sum - 1) < 1e-9);
            for (size_t j = 0; j < i; j++)
                assert(strcmp(s.t[j].name, t->name) != 0);
        }
        td_scenario_free(&s);
    }
    td_manifest_destroy(m);
    return 0;
}
