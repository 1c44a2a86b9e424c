/* fuzz_queue.c - libFuzzer target for the batch queue: any bytes the
 * manifest parser accepts become setup objects (ResourceFlavor,
 * ClusterQueue, LocalQueue, Cohort, priority classes, NodePool, Kueue's
 * Configuration) and Workloads, submitted one a second with a scheduling
 * pass after each and every third admitted one finished. Nothing may crash
 * or leak, every failure leaves a NUL-terminated message, and no node ever
 * holds more than its capacity. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/config.h"
#include "core/manifest.h"
#include "queue/queue.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_err(td_status st, const td_err *err)
{
    if (st != TD_OK)
        assert(memchr(err->msg, '\0', sizeof err->msg) != NULL);
    assert(st == TD_OK || st == TD_EINVAL || st == TD_ENOMEM);
}

static void check_nodes(const td_queue *q)
{
    for (size_t n = 0; n < td_queue_node_count(q); n++)
        for (size_t r = 0; r < td_queue_resource_count(q); r++) {
            const char *res = td_queue_resource_name(q, r);
            int64_t used = td_queue_node_used_milli(q, n, res);
            assert(used >= 0 && used <= td_queue_node_capacity_milli(q, n, res));
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    td_manifest *m = NULL;
    td_queue *q = NULL;
    td_err err;
    td_status st = td_manifest_parse("fuzz.yaml", (const char *)data, size, &m, &err);
    check_err(st, &err);
    if (st != TD_OK)
        return 0;
    st = td_queue_create(&q, &err);
    check_err(st, &err);
    for (size_t i = 0; st == TD_OK && i < td_manifest_count(m); i++) {
        const char *kind = td_json_str(td_manifest_doc(m, i), "kind");
        if (kind && strcmp(kind, "Workload") == 0)
            continue;
        st = td_queue_add_object(q, td_manifest_doc(m, i), m, &err);
        check_err(st, &err);
    }
    if (st == TD_OK) {
        st = td_queue_seal(q, &err);
        check_err(st, &err);
    }
    uint64_t t = 0;
    size_t finished = 0;
    for (size_t i = 0; st == TD_OK && i < td_manifest_count(m) && i < 256; i++) {
        const char *kind = td_json_str(td_manifest_doc(m, i), "kind");
        if (!kind || strcmp(kind, "Workload") != 0)
            continue;
        t += 1000000000ULL;
        td_status s = td_queue_submit(q, td_manifest_doc(m, i), m, t, NULL, &err);
        check_err(s, &err);
        assert(td_queue_schedule(q, t, NULL) == TD_OK);
        check_nodes(q);
        if (i % 3 == 2)
            for (size_t id = finished; id < td_queue_workload_count(q); id++)
                if (td_queue_workload_state(q, id) == TD_WL_ADMITTED) {
                    assert(td_queue_finish(q, id, t, &err) == TD_OK);
                    finished = id + 1;
                    assert(td_queue_schedule(q, t, NULL) == TD_OK);
                    check_nodes(q);
                    break;
                }
    }
    for (size_t id = 0; q && id < td_queue_workload_count(q); id++) {
        assert(td_queue_workload_key(q, id) != NULL);
        assert(td_queue_workload_reason(q, id) != NULL);
        assert(td_queue_workload_flavors(q, id) != NULL);
        const char *p = td_queue_workload_placement(q, id);
        assert(p && (td_queue_workload_state(q, id) == TD_WL_ADMITTED || *p == '\0'));
    }
    const td_queue_event *ev;
    size_t ne = q ? td_queue_events(q, &ev) : 0;
    for (size_t i = 0; i < ne; i++) {
        assert(memchr(ev[i].reason, '\0', sizeof ev[i].reason) != NULL);
        assert(i == 0 || ev[i - 1].t_ns <= ev[i].t_ns);
    }
    td_queue_destroy(q);
    td_manifest_destroy(m);
    return 0;
}
