/* fuzz_quota.c - libFuzzer target for the pod resource admission path: any
 * bytes jansson accepts as JSON go through request defaulting, LimitRange
 * defaulting and validation, and the quota check (status.used and used-pod
 * modes, the input also standing in as a used pod) against a fixed
 * LimitRange and ResourceQuotas. Nothing may crash or leak, and every
 * failure leaves a NUL-terminated message. */
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "admission/limitrange_internal.h"
#include "admission/podres_internal.h"
#include "admission/quota.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char limitrange_json[] =
    "{\"metadata\":{\"name\":\"lr\"},\"spec\":{\"limits\":["
    "{\"type\":\"Pod\",\"max\":{\"cpu\":\"4\",\"memory\":\"8Gi\"},\"min\":{\"cpu\":\"10m\"},"
    "\"maxLimitRequestRatio\":{\"memory\":\"2\"}},"
    "{\"type\":\"Container\",\"max\":{\"cpu\":\"2\",\"memory\":\"4Gi\"},"
    "\"min\":{\"cpu\":\"1m\",\"memory\":\"1Mi\"},\"default\":{\"cpu\":\"500m\",\"memory\":\"512Mi\"},"
    "\"defaultRequest\":{\"cpu\":\"100m\",\"memory\":\"128Mi\"},"
    "\"maxLimitRequestRatio\":{\"cpu\":\"10\"}}]}}";

static const char quotas_json[] =
    "[{\"metadata\":{\"name\":\"compute\"},\"spec\":{\"hard\":{\"requests.cpu\":\"8\","
    "\"limits.memory\":\"16Gi\",\"pods\":\"10\",\"count/pods\":\"20\","
    "\"requests.nvidia.com/gpu\":\"2\",\"requests.ephemeral-storage\":\"10Gi\","
    "\"hugepages-2Mi\":\"1Gi\"}},"
    "\"status\":{\"hard\":{\"requests.cpu\":\"8\",\"limits.memory\":\"16Gi\",\"pods\":\"10\","
    "\"count/pods\":\"20\",\"requests.nvidia.com/gpu\":\"2\",\"requests.ephemeral-storage\":\"10Gi\","
    "\"hugepages-2Mi\":\"1Gi\"},"
    "\"used\":{\"requests.cpu\":\"7500m\",\"limits.memory\":\"15Gi\",\"pods\":\"9\","
    "\"count/pods\":\"19\",\"requests.nvidia.com/gpu\":\"1\",\"requests.ephemeral-storage\":\"0\","
    "\"hugepages-2Mi\":\"0\"}}},"
    "{\"metadata\":{\"name\":\"besteffort\"},\"spec\":{\"scopes\":[\"BestEffort\"],"
    "\"hard\":{\"pods\":\"1\"}},\"status\":{\"hard\":{\"pods\":\"1\"},\"used\":{\"pods\":\"0\"}}},"
    "{\"metadata\":{\"name\":\"prio\"},\"spec\":{\"scopeSelector\":{\"matchExpressions\":["
    "{\"scopeName\":\"PriorityClass\",\"operator\":\"In\",\"values\":[\"high\"]},"
    "{\"scopeName\":\"Terminating\",\"operator\":\"Exists\"}]},"
    "\"hard\":{\"cpu\":\"1\",\"memory\":\"1Gi\"}},"
    "\"status\":{\"hard\":{\"cpu\":\"1\",\"memory\":\"1Gi\"},\"used\":{\"cpu\":\"0\",\"memory\":\"0\"}}}]";

static void check_err(td_status st, const td_err *err)
{
    /* checks that survive NDEBUG */
    if (st != TD_OK && memchr(err->msg, '\0', sizeof err->msg) == NULL)
        abort();
    if (!(st == TD_OK || st == TD_EFORBIDDEN || st == TD_EINVAL || st == TD_ENOMEM))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *pod = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    json_t *lr = json_loads(limitrange_json, 0, NULL);
    json_t *quotas = json_loads(quotas_json, 0, NULL);
    json_t *qobjs[3];
    json_t *used[2];
    td_resources req, lim;
    td_err err;
    td_status st;
    size_t i;

    assert(lr != NULL && quotas != NULL && json_array_size(quotas) == 3);
    for (i = 0; i < 3; i++)
        qobjs[i] = json_array_get(quotas, i);
    if (pod == NULL)
        goto out;

    td_resources_init(&req);
    td_resources_init(&lim);
    memset(err.msg, 'x', sizeof err.msg);
    st = td_pod_requests_limits(pod, &req, &lim, &err);
    check_err(st, &err);
    td_resources_fini(&req);
    td_resources_fini(&lim);

    /* The input as an existing pod in the namespace. */
    used[0] = pod;
    used[1] = pod;
    memset(err.msg, 'x', sizeof err.msg);
    st = td_quota_check(pod, qobjs, 3, used, 2, &err);
    check_err(st, &err);

    /* td_admit_pod's path (the resources parsed once, kept up to date,
     * LimitRanges and quotas parsed once, the fast quota check) against
     * the JSON entry points below, on a copy of the input. */
    json_t *pod2 = json_deep_copy(pod);
    td__pod kept;
    td_status kst = pod2 ? td__pod_default_requests_parsed(pod2, &kept, NULL) : TD_ENOMEM;
    bool have_kept = kst == TD_OK;
    td_limitranges *plr = NULL;
    td_quotas *pq = NULL;
    if (kst == TD_OK && td_limitranges_parse(&lr, 1, &plr, NULL) == TD_OK)
        kst = td__limitrange_default_update(pod2, plr, &kept, NULL);
    else if (kst == TD_OK)
        kst = TD_ENOMEM;
    if (kst == TD_OK && td__pod_refresh(pod2, &kept, NULL) != TD_OK)
        have_kept = false; /* refresh failed: kept is empty */
    if (kst == TD_OK && have_kept) {
        td__pod fresh;
        if (td__pod_aggregate_keep(&kept) != TD_OK || td__pod_parse(pod2, &fresh, NULL) != TD_OK)
            abort(); /* the kept parse parses, and so must the pod */
        if (!td__pod_same(&kept, &fresh))
            abort();
        td__pod_fini(&fresh);
    }

    memset(err.msg, 'x', sizeof err.msg);
    st = td_pod_default_requests(pod, &err);
    check_err(st, &err);
    td_status st_def = st;
    memset(err.msg, 'x', sizeof err.msg);
    st = td_limitrange_default(pod, &lr, 1, &err);
    check_err(st, &err);
    if ((kst == TD_OK) != (st_def == TD_OK && st == TD_OK) && kst != TD_ENOMEM)
        abort(); /* both paths accept the same pods */
    memset(err.msg, 'x', sizeof err.msg);
    st = td_limitrange_validate(pod, &lr, 1, &err);
    check_err(st, &err);
    assert(td_limitrange_validate(pod, &lr, 1, NULL) == st);
    memset(err.msg, 'x', sizeof err.msg);
    st = td_quota_check(pod, qobjs, 3, NULL, 0, &err);
    check_err(st, &err);
    assert(td_quota_check(pod, qobjs, 3, NULL, 0, NULL) == st);
    /* the kept path decides as the JSON one: the same pod, LimitRange and
     * quota answers (kept-parse quota check from status.used) */
    if (kst == TD_OK && have_kept) {
        td_err e1 = {{0}}, e2 = {{0}};
        if (!json_equal(pod, pod2))
            abort();
        td_status a = td_limitrange_validate_parsed(pod2, &kept, plr, &e1);
        td_status b = td_limitrange_validate(pod, &lr, 1, &e2);
        if (a != b || strcmp(e1.msg, e2.msg) != 0)
            abort();
        if (a == TD_OK && td_quotas_parse(qobjs, 3, true, &pq, NULL) == TD_OK) {
            a = td_quota_check_parsed(pod2, &kept, pq, NULL, 0, &e1);
            b = td_quota_check(pod, qobjs, 3, NULL, 0, &e2);
            if (a != b || strcmp(e1.msg, e2.msg) != 0)
                abort();
        }
    }
    if (have_kept)
        td__pod_fini(&kept);
    td_limitranges_destroy(plr);
    td_quotas_destroy(pq);
    json_decref(pod2);
    json_decref(pod);
out:
    json_decref(lr);
    json_decref(quotas);
    return 0;
}
