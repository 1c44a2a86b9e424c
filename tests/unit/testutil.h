/* testutil.h - what several unit tests share: a snapshot from manifest
 * text that fails the test with the loader's message, and "this JSON is
 * included in that one". Include after <cmocka.h>. */
#ifndef TENANTD_TESTUTIL_H
#define TENANTD_TESTUTIL_H

#include <jansson.h>
#include <string.h>

#include "kinds/builtin.h"
#include "admission/admit.h"
#include "core/config.h"
#include "core/jsonpatch.h"
#include "core/kind.h"

/* The snapshot of the manifest text yaml, its errors naming name; fails
 * the test with the error otherwise. The caller unrefs it. */
static inline td_config *test_config(const char *name, const char *yaml)
{
    td_err err;
    td_config *c = NULL;
    if (td_kinds_register_builtin(&err) != TD_OK)
        fail_msg("%s", err.msg);
    if (td_config_load_text(name, yaml, strlen(yaml), &c, &err) != TD_OK)
        fail_msg("%s", err.msg);
    return c;
}

/* true if every key of want is in got with an equal (or, for objects,
 * recursively included) value. */
static inline int json_subset(const json_t *want, const json_t *got)
{
    if (json_is_object(want)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)want, k, v)
        {
            if (!json_subset(v, json_object_get(got, k)))
                return 0;
        }
        return 1;
    }
    return json_equal(want, got);
}

/* One admission case: a pod (JSON) in; the code (200, 403, 400), rule
 * and a substring of the message out (NULL: not checked), and a JSON
 * object the final pod must include (NULL: not checked). */
typedef struct {
    const char *name;
    const char *pod;
    int code;
    const char *rule;
    const char *msg;
    const char *final;
} admit_case;

/* Admits t's pod against c and fails the test, naming the case, where the
 * result differs from t; the JSONPatch must turn the pod into the final
 * pod. */
static inline void check_admit_case(td_config *c, const admit_case *t)
{
    json_t *pod = json_loads(t->pod, 0, NULL);
    if (!pod)
        fail_msg("%s: bad JSON in the test", t->name);
    td_admit_result r;
    td_admit_pod(c, pod, NULL, NULL, &r);
    if (r.code != t->code)
        fail_msg("%s: code %d, want %d (%s: %s)", t->name, r.code, t->code,
                 r.rule ? r.rule : "-", r.message);
    if (t->rule && (!r.rule || strcmp(r.rule, t->rule) != 0))
        fail_msg("%s: rule %s, want %s", t->name, r.rule ? r.rule : "-", t->rule);
    if (t->msg && !strstr(r.message, t->msg))
        fail_msg("%s: message \"%s\" lacks \"%s\"", t->name, r.message, t->msg);
    if (t->final) {
        json_t *want = json_loads(t->final, 0, NULL);
        assert_non_null(want);
        if (!json_subset(want, r.pod)) {
            char *s = json_dumps(r.pod, JSON_COMPACT);
            fail_msg("%s: final pod %s", t->name, s);
        }
        json_decref(want);
        json_t *copy = json_deep_copy(pod);
        if (r.patch)
            assert_int_equal(td_jsonpatch_apply(copy, r.patch, NULL), TD_OK);
        assert_true(json_equal(copy, r.pod));
        json_decref(copy);
    }
    td_admit_result_fini(&r);
    json_decref(pod);
}

#endif
