/* fuzz_quota_parse.c - libFuzzer target for the one parse of a
 * ResourceQuota (quota.c): any bytes jansson accepts as JSON go, as the
 * quota's spec and status, through the config's validation
 * (td_quota_validate) and the admission check's parses (td_quotas_parse
 * for usage from status and from pods, td_quota_check with a fixed pod).
 * Nothing may crash or leak; every failure leaves a NUL-terminated
 * message; and a quota the validation accepts parses for admission in
 * both modes (so a snapshot's quota never fails at admission). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "admission/quota.h"
#include "core/validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_err(td_status st, const td_err *err)
{
    if (st != TD_OK && memchr(err->msg, '\0', sizeof err->msg) == NULL)
        abort();
    if (!(st == TD_OK || st == TD_EFORBIDDEN || st == TD_EINVAL || st == TD_ENOMEM))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *in = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    json_t *pod = json_loads("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"priorityClassName\":"
                             "\"high\",\"containers\":[{\"name\":\"a\",\"resources\":{"
                             "\"requests\":{\"cpu\":\"1\",\"memory\":\"1Gi\"},"
                             "\"limits\":{\"memory\":\"1Gi\"}}}]}}",
                             0, NULL);
    if (!in || !pod)
        goto out;
    /* The input is the quota's body when it is a mapping with spec or
     * status, else its spec. */
    json_t *q = json_is_object(in) && (json_object_get(in, "spec") || json_object_get(in, "status"))
                    ? json_deep_copy(in)
                    : json_pack("{s:O}", "spec", in);
    if (!q || json_object_set_new(q, "metadata", json_pack("{s:s, s:s}", "name", "q",
                                                           "namespace", "a")) != 0) {
        json_decref(q);
        goto out;
    }
    td_err err;
    memset(err.msg, 'x', sizeof err.msg);
    td_vctx v = {.obj = q, .kind = "ResourceQuota", .who = "ResourceQuota a/q", .err = &err};
    td_status vst = td_quota_validate(&v);
    check_err(vst, &err);

    json_t *objs[1] = {q}, *no_pods[1] = {NULL};
    for (int from_status = 0; from_status < 2; from_status++) {
        td_quotas *parsed = NULL;
        memset(err.msg, 'x', sizeof err.msg);
        td_status pst = td_quotas_parse(objs, 1, from_status, &parsed, &err);
        check_err(pst, &err);
        if (vst == TD_OK && pst != TD_OK && pst != TD_ENOMEM)
            abort(); /* validated, yet the admission's parse refuses it */
        memset(err.msg, 'x', sizeof err.msg);
        td_status cst = td_quota_check(pod, objs, 1, from_status ? NULL : no_pods, 0, &err);
        check_err(cst, &err);
        if (pst == TD_OK) {
            td_err e2;
            memset(e2.msg, 'x', sizeof e2.msg);
            td_status c2 =
                td_quota_check_parsed(pod, NULL, parsed, from_status ? NULL : no_pods, 0, &e2);
            if (c2 != cst || (cst != TD_OK && strcmp(err.msg, e2.msg) != 0))
                abort(); /* the parsed check decides as the JSON one */
        }
        td_quotas_destroy(parsed);
    }
    json_decref(q);
out:
    json_decref(pod);
    json_decref(in);
    return 0;
}
