/* test_kind.c - the kind registry (kind.h): an empty registry refuses every
 * kind, the built-in stages' kinds answer to their aliases, a registered
 * kind's validator and cross-check run in rank order, and registering is
 * idempotent for a table and refuses a second owner of a name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h> /* after the headers it needs */

#include "kinds/builtin.h"
#include "core/config.h"
#include "core/kind.h"
#include "core/validate.h"

/* ---- kinds of this test -------------------------------------------------- */

static int widget_validated, widget_checked, gizmo_checked;

/* Widget: spec.size at most 10. */
static td_status validate_widget(td_vctx *v)
{
    widget_validated++;
    json_t *size = td_json_path(v->obj, "spec.size");
    TD_TRY(td_v_int_range(v, size, "spec.size", 0, 10));
    return TD_OK;
}

/* No Widget named "bad" in a snapshot. */
static td_status check_widgets(json_t *const *objs, size_t n, td_err *err)
{
    widget_checked++;
    for (size_t i = 0; i < n; i++)
        if (strcmp(td_json_str(objs[i], "kind"), "Widget") == 0 &&
            strcmp(td_json_str(objs[i], "metadata.name"), "bad") == 0)
            return td_err_set(err, TD_EINVAL, "Widget bad: metadata.name: not allowed");
    return TD_OK;
}

/* No Gizmo named "bad" in a snapshot; runs last (rank 90). */
static td_status check_gizmos(json_t *const *objs, size_t n, td_err *err)
{
    gizmo_checked++;
    for (size_t i = 0; i < n; i++)
        if (strcmp(td_json_str(objs[i], "kind"), "Gizmo") == 0 &&
            strcmp(td_json_str(objs[i], "metadata.name"), "bad") == 0)
            return td_err_set(err, TD_EINVAL, "Gizmo bad: metadata.name: not allowed");
    return TD_OK;
}

static const td_kind_def test_kinds[] = {
    {"Widget", "test.dev/v1", true, "wd,widget,widgets", validate_widget, check_widgets, 5, NULL},
    {"Gizmo", "test.dev/v1", false, "gizmo,gizmos", NULL, check_gizmos, 90, NULL},
};

/* ---- tests --------------------------------------------------------------- */

static td_status load(const char *yaml, td_err *err)
{
    td_config *c = NULL;
    td_status st = td_config_load_text("k.yaml", yaml, strlen(yaml), &c, err);
    td_config_unref(c);
    return st;
}

/* Before anything is registered, a kind is refused and the message says
 * why; nothing is accepted unchecked. Runs first. */
static void test_empty_registry(void **state)
{
    (void)state;
    td_err err;
    assert_null(td_kind_at(0));
    assert_null(td_kind_canonical("quota"));
    assert_int_equal(load("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n", &err),
                     TD_EINVAL);
    assert_string_equal(err.msg, "k.yaml:2: object: kind: unknown kind \"Namespace\"; no kinds "
                                 "are registered (the program must call "
                                 "td_kinds_register_builtin first)");
    assert_int_equal(td_kinds_register_builtin(&err), TD_OK);
    assert_int_equal(td_kinds_register_builtin(&err), TD_OK); /* once */
    assert_int_equal(td_kind_register(test_kinds, 2, &err), TD_OK);
}

static const struct {
    const char *spelled;
    const char *canonical; /* NULL: unknown */
    bool namespaced;
} spellings[] = {
    {"quota", "ResourceQuota", true},
    {"RESOURCEQUOTAS", "ResourceQuota", true},
    {"resourcequota", "ResourceQuota", true},
    {"ns", "Namespace", false},
    {"pc", "PriorityClass", false},
    {"limits", "LimitRange", true},
    {"pool", "NodePool", false},
    {"cq", "ClusterQueue", false},
    {"queue", "LocalQueue", true},
    {"Cohort", "Cohort", false},
    {"tenants", "Tenant", false},
    {"Route", "Route", false},
    {"costpolicies", "CostPolicy", false},
    {"admissionpolicy", "AdmissionPolicy", false},
    {"loadscenario", "LoadScenario", false},
    {"WD", "Widget", true},
    {"gizmos", "Gizmo", false},
    {"gadget", NULL, false},
    {"", NULL, false},
    {"a-name-much-longer-than-any-kind-or-alias-could-be-written-as-by-a-user", NULL, false},
};

static void test_spellings(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof spellings / sizeof spellings[0]; i++) {
        const char *got = td_kind_canonical(spellings[i].spelled);
        if ((got == NULL) != (spellings[i].canonical == NULL) ||
            (got && strcmp(got, spellings[i].canonical) != 0))
            fail_msg("\"%s\": got %s, want %s", spellings[i].spelled, got ? got : "NULL",
                     spellings[i].canonical ? spellings[i].canonical : "NULL");
        if (got && td_kind_namespaced(got) != spellings[i].namespaced)
            fail_msg("%s: namespaced %d", got, !spellings[i].namespaced);
        if (got)
            assert_ptr_equal(td_kind_find(got)->kind, got);
    }
    assert_null(td_kind_find("resourcequota")); /* find takes the canonical name only */
}

static const struct {
    const char *name;
    const char *yaml;
    td_status st;
    const char *msg;                            /* the whole message, or NULL */
    int validated, widget_checks, gizmo_checks; /* calls the load makes */
} loads[] = {
    {"validator runs and passes",
     "apiVersion: test.dev/v1\nkind: Widget\nmetadata: {name: w, namespace: a}\nspec: {size: 3}\n",
     TD_OK, NULL, 1, 1, 1},
    {"validator's message names file, line, object, field",
     "apiVersion: test.dev/v1\nkind: Widget\nmetadata: {name: w, namespace: a}\n"
     "spec:\n  size: 11\n",
     TD_EINVAL, "k.yaml:5: Widget a/w: spec.size: must be an integer in [0, 10], not 11", 1, 0, 0},
    {"envelope before the validator",
     "apiVersion: test.dev/v2\nkind: Widget\nmetadata: {name: w, namespace: a}\n", TD_EINVAL,
     "k.yaml:1: Widget a/w: apiVersion: \"test.dev/v2\" is not served for Widget; use "
     "test.dev/v1",
     0, 0, 0},
    {"namespaced from the definition",
     "apiVersion: test.dev/v1\nkind: Widget\nmetadata: {name: w}\n", TD_EINVAL,
     "k.yaml:3: Widget w: metadata.namespace: required for a Widget (tenantd has no current "
     "namespace)",
     0, 0, 0},
    {"no validator: the envelope only",
     "apiVersion: test.dev/v1\nkind: Gizmo\nmetadata: {name: g}\nspec: {anything: 1}\n", TD_OK,
     NULL, 0, 1, 1},
    {"cross-check fails the snapshot",
     "apiVersion: test.dev/v1\nkind: Widget\nmetadata: {name: bad, namespace: a}\n", TD_EINVAL,
     "Widget bad: metadata.name: not allowed", 1, 1, 0},
    {"rank 5 runs before PriorityClass's rank 10",
     "apiVersion: test.dev/v1\nkind: Widget\nmetadata: {name: bad, namespace: a}\n---\n"
     "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p1}\nvalue: 1\n"
     "globalDefault: true\n---\n"
     "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p2}\nvalue: 2\n"
     "globalDefault: true\n",
     TD_EINVAL, "Widget bad: metadata.name: not allowed", 1, 1, 0},
    {"rank 90 runs after PriorityClass's rank 10",
     "apiVersion: test.dev/v1\nkind: Gizmo\nmetadata: {name: bad}\n---\n"
     "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p1}\nvalue: 1\n"
     "globalDefault: true\n---\n"
     "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p2}\nvalue: 2\n"
     "globalDefault: true\n",
     TD_EINVAL,
     "PriorityClass p2: globalDefault: PriorityClass p1 is already the global default; only one "
     "may be",
     0, 1, 0},
    {"rank 90 runs last", "apiVersion: test.dev/v1\nkind: Gizmo\nmetadata: {name: bad}\n",
     TD_EINVAL, "Gizmo bad: metadata.name: not allowed", 0, 1, 1},
};

static void test_loads(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof loads / sizeof loads[0]; i++) {
        widget_validated = widget_checked = gizmo_checked = 0;
        td_err err = {{0}};
        td_status st = load(loads[i].yaml, &err);
        if (st != loads[i].st || (loads[i].msg && strcmp(err.msg, loads[i].msg) != 0))
            fail_msg("%s: status %d \"%s\", want %d \"%s\"", loads[i].name, st, err.msg,
                     loads[i].st, loads[i].msg ? loads[i].msg : "");
        if (widget_validated != loads[i].validated || widget_checked != loads[i].widget_checks ||
            gizmo_checked != loads[i].gizmo_checks)
            fail_msg("%s: validated %d, checked %d/%d, want %d, %d/%d", loads[i].name,
                     widget_validated, widget_checked, gizmo_checked, loads[i].validated,
                     loads[i].widget_checks, loads[i].gizmo_checks);
    }
}

/* The unknown-kind message lists what is registered. */
static void test_unknown_kind(void **state)
{
    (void)state;
    td_err err;
    assert_int_equal(load("apiVersion: v1\nkind: Gadget\nmetadata: {name: g}\n", &err), TD_EINVAL);
    assert_non_null(strstr(err.msg, "k.yaml:2: object: kind: unknown kind \"Gadget\"; tenantd "
                                    "knows Namespace, ResourceQuota, "));
    assert_non_null(strstr(err.msg, ", Tenant, Route, CostPolicy, LoadScenario, Widget, Gizmo"));
}

static const td_kind_def twin_name[] = {
    {"Ok1", "test.dev/v1", false, "ok1", NULL, NULL, 0, NULL},
    {"widget", "test.dev/v1", false, "", NULL, NULL, 0, NULL}, /* Widget in another case */
};
static const td_kind_def twin_alias[] = {
    {"Sprocket", "test.dev/v1", false, "sprocket,quota", NULL, NULL, 0, NULL},
};
static const td_kind_def alias_is_name[] = {
    {"Cog", "test.dev/v1", false, "cog,gizmo", NULL, NULL, 0, NULL},
};
static const td_kind_def name_is_alias[] = {
    {"Rf", "test.dev/v1", false, "", NULL, NULL, 0, NULL}, /* ResourceFlavor's alias rf */
};
static const td_kind_def in_itself[] = {
    {"Ok2", "test.dev/v1", false, "dup", NULL, NULL, 0, NULL},
    {"Ok3", "test.dev/v1", false, "dup", NULL, NULL, 0, NULL},
};

static const struct {
    const char *name;
    const td_kind_def *defs;
    size_t n;
    td_status st;
    const char *msg;
} registrations[] = {
    {"the same table again", test_kinds, 2, TD_OK, NULL},
    {"a name in another case", twin_name, 2, TD_EEXIST,
     "kind widget: its name or an alias is already taken by kind Widget"},
    {"an alias taken", twin_alias, 1, TD_EEXIST,
     "kind Sprocket: its name or an alias is already taken by kind ResourceQuota"},
    {"an alias that is a name", alias_is_name, 1, TD_EEXIST,
     "kind Cog: its name or an alias is already taken by kind Gizmo"},
    {"a name that is an alias", name_is_alias, 1, TD_EEXIST,
     "kind Rf: its name or an alias is already taken by kind ResourceFlavor"},
    {"twice in one table", in_itself, 2, TD_EEXIST,
     "kind Ok3: its name or an alias is already taken by kind Ok2"},
};

/* A second owner of a name or alias is refused, and nothing of its table
 * is registered. */
static void test_register_twice(void **state)
{
    (void)state;
    size_t before = 0;
    while (td_kind_at(before))
        before++;
    for (size_t i = 0; i < sizeof registrations / sizeof registrations[0]; i++) {
        td_err err = {{0}};
        td_status st = td_kind_register(registrations[i].defs, registrations[i].n, &err);
        if (st != registrations[i].st ||
            (registrations[i].msg && strcmp(err.msg, registrations[i].msg) != 0))
            fail_msg("%s: status %d \"%s\"", registrations[i].name, st, err.msg);
        size_t after = 0;
        while (td_kind_at(after))
            after++;
        if (after != before)
            fail_msg("%s: %zu kinds, want %zu", registrations[i].name, after, before);
    }
    assert_null(td_kind_canonical("ok1")); /* the first of a refused table is not kept */
    assert_string_equal(td_kind_canonical("quota"), "ResourceQuota");
}

int main(void)
{
    /* in order: the first test sees the registry empty */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_registry), cmocka_unit_test(test_spellings),
        cmocka_unit_test(test_loads),          cmocka_unit_test(test_unknown_kind),
        cmocka_unit_test(test_register_twice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
