/* fuzz_costpolicy.c - libFuzzer target for the CostPolicy parser: any bytes
 * as a YAML manifest, every document through td_costpolicy_parse; a policy
 * that parses then prices fixed ledger records (one naming a model) and
 * computes a report (by tenant or by model) over
 * them with a fixed pool, whose lines must add up to its total. Nothing may
 * crash or leak, and every failure leaves a message. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cost/chargeback.h"
#include "core/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HOUR (3600LL * 1000000000LL)

static void records(td_ledger_rec r[4])
{
    memset(r, 0, 4 * sizeof *r);
    r[0].kind = TD_LEDGER_INTERVAL;
    strcpy(r[0].tenant, "team-a");
    strcpy(r[0].flavor, "a100");
    r[0].start_ns = 0;
    r[0].end_ns = 3 * HOUR;
    r[0].gpu_milli = 2000;
    r[0].cpu_milli = 8000;
    r[0].memory_bytes = 64LL << 30;
    r[0].storage_bytes = 100LL << 30;
    r[0].interruptible = true;
    r[0].gpu_used_milli = -1;
    r[1] = r[0];
    strcpy(r[1].tenant, "team-b");
    strcpy(r[1].flavor, "h100");
    r[1].interruptible = false;
    r[2].kind = TD_LEDGER_REQUEST;
    strcpy(r[2].tenant, "team-b");
    strcpy(r[2].route, "completions");
    r[2].start_ns = HOUR;
    r[2].tokens_in = 1000;
    r[2].tokens_out = 250;
    r[2].count = 1;
    r[3] = r[2]; /* a request naming a model: its price by model, if any */
    strcpy(r[3].model, "llama-3-70b");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    td_manifest *m = NULL;
    td_err err;
    err.msg[0] = '\0';
    if (td_manifest_parse("fuzz.yaml", (const char *)data, size, &m, &err) != TD_OK) {
        assert(err.msg[0] != '\0');
        return 0;
    }
    td_ledger_rec recs[4];
    records(recs);
    td_pool_gpus pools[] = {{"a100", "a100", 16}, {"h100", "h100", 8}};
    for (size_t i = 0; i < td_manifest_count(m); i++) {
        td_costpolicy *p = NULL;
        err.msg[0] = '\0';
        if (td_costpolicy_parse(td_manifest_doc(m, i), m, &p, &err) != TD_OK) {
            assert(err.msg[0] != '\0' && p == NULL);
            continue;
        }
        for (size_t k = 0; k < 4; k++) {
            td_charge c[TD_CHARGE_MAX];
            size_t n;
            (void)td_chargeback_price(p, &recs[k], INT64_MIN, INT64_MAX, c, &n, &err);
        }
        (void)td_costpolicy_prices_model(p, "llama-3-70b");
        (void)td_costpolicy_prices_model(p, "llama-*");
        td_chargeback_report *rep = NULL;
        td_chargeback_by by = size % 2 ? TD_BY_MODEL : TD_BY_TENANT;
        if (td_chargeback_compute(p, recs, 4, 0, 4 * HOUR, by, pools, 2, &rep, &err) == TD_OK) {
            int64_t sum = 0;
            for (size_t k = 0; k < rep->nlines; k++)
                sum += rep->lines[k].amount_cents;
            assert(sum == rep->total_cents);
            td_chargeback_report_destroy(rep);
        } else {
            assert(err.msg[0] != '\0' && rep == NULL);
        }
        td_costpolicy_destroy(p);
    }
    td_manifest_destroy(m);
    return 0;
}
