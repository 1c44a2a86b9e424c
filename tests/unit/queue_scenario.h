/* queue_scenario.h - what the table-driven batch-queue tests share: a
 * Workload from the compact pod-set notation of their rows, a platform
 * loaded into a queue, and a workload found by name. Included by
 * test_queue_scenarios.c and test_queue_kueue.c (after cmocka.h). */
#ifndef TENANTD_TEST_QUEUE_SCENARIO_H
#define TENANTD_TEST_QUEUE_SCENARIO_H

static json_t *scenario_workload(const char *name, const char *cq, int prio, const char *sets_in)
{
    char sets[256];
    snprintf(sets, sizeof sets, "%s", sets_in);
    json_t *pss = json_array();
    int idx = 0;
    for (char *s1 = NULL, *ps = strtok_r(sets, ";", &s1); ps; ps = strtok_r(NULL, ";", &s1)) {
        char *star = strchr(ps, '*');
        assert_non_null(star);
        *star = '\0';
        json_t *req = json_object();
        for (char *s2 = NULL, *it = strtok_r(star + 1, ",", &s2); it;
             it = strtok_r(NULL, ",", &s2)) {
            char *eq = strchr(it, '=');
            assert_non_null(eq);
            *eq = '\0';
            json_object_set_new(req, it, json_string(eq + 1));
        }
        char psname[16];
        snprintf(psname, sizeof psname, idx ? "w%d" : "main", idx);
        json_array_append_new(
            pss, json_pack("{s:s,s:i,s:{s:{s:[{s:s,s:{s:o}}]}}}", "name", psname, "count",
                           atoi(ps), "template", "spec", "containers", "name", "c", "resources",
                           "requests", req));
        idx++;
    }
    return json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:i,s:o}}", "apiVersion",
                     "kueue.x-k8s.io/v1beta1", "kind", "Workload", "metadata", "name", name,
                     "namespace", "ns", "spec", "queueName", cq, "priority", prio, "podSets",
                     pss);
}

static td_queue *load_platform(const char *yaml)
{
    td_manifest *m;
    td_err err;
    td_queue *q;
    if (td_manifest_parse("platform.yaml", yaml, strlen(yaml), &m, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(td_queue_create(&q, &err), TD_OK);
    for (size_t i = 0; i < td_manifest_count(m); i++) {
        json_t *doc = td_manifest_doc(m, i);
        if (td_queue_add_object(q, doc, m, &err) != TD_OK)
            fail_msg("%s", err.msg);
        const char *kind = json_string_value(json_object_get(doc, "kind"));
        if (!kind || strcmp(kind, "ClusterQueue") != 0)
            continue;
        const char *name =
            json_string_value(json_object_get(json_object_get(doc, "metadata"), "name"));
        json_t *lq = json_pack("{s:s,s:{s:s,s:s},s:{s:s}}", "kind", "LocalQueue", "metadata",
                               "name", name, "namespace", "ns", "spec", "clusterQueue", name);
        if (td_queue_add_object(q, lq, NULL, &err) != TD_OK)
            fail_msg("%s", err.msg);
        json_decref(lq);
    }
    if (td_queue_seal(q, &err) != TD_OK)
        fail_msg("%s", err.msg);
    td_manifest_destroy(m);
    return q;
}

static size_t find(const td_queue *q, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "ns/%s", name);
    size_t id = td_queue_workload_find(q, key);
    if (id == TD_QUEUE_NONE)
        fail_msg("no workload %s", name);
    return id;
}

#endif
