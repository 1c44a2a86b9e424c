/* scenario.c - the LoadScenario loader of `tenantctl loadtest`: validates
 * one LoadScenario document into a td_scenario, naming file:line and field
 * for every mistake. Pure (no sockets, no clock), so the fuzzer links it. */
#include "client/scenario.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/duration.h"
#include "core/kind.h"

#define SEC             1000000000ull
#define MAX_RATE        100000.0
#define MAX_TOKENS      100000
#define MAX_CONNECTIONS 1024
#define DEFAULT_CONNS   16

void td_scenario_free(td_scenario *s)
{
    free(s->target);
    for (size_t i = 0; i < s->n; i++) {
        free(s->t[i].name);
        free(s->t[i].key);
    }
    memset(s, 0, sizeof *s);
}

/* Rejects a key of obj not in allowed (a NULL-terminated list). */
static td_status only_fields(const td_manifest *m, json_t *obj, const char *where,
                             const char *const *allowed, td_err *err)
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
    {
        bool ok = false;
        for (size_t i = 0; allowed[i]; i++)
            ok = ok || strcmp(k, allowed[i]) == 0;
        if (!ok)
            return td_manifest_err(m, v, err, TD_EINVAL, "%s.%s: unknown field", where, k);
    }
    return TD_OK;
}

static td_status get_duration(const td_manifest *m, json_t *v, const char *where, uint64_t *out,
                              td_err *err)
{
    int64_t ns;
    if (json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) < 86400) {
        *out = (uint64_t)json_integer_value(v) * SEC;
        return TD_OK;
    }
    if (!json_is_string(v) || td_duration_parse(json_string_value(v), &ns, NULL) != TD_OK ||
        ns <= 0)
        return td_manifest_err(m, v, err, TD_EINVAL, "%s: want a positive duration (\"10s\")",
                               where);
    *out = (uint64_t)ns;
    return TD_OK;
}

static td_status get_int(const td_manifest *m, json_t *v, const char *where, long min, long max,
                         long *out, td_err *err)
{
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return td_manifest_err(m, v, err, TD_EINVAL, "%s: want a whole number from %ld to %ld",
                               where, min, max);
    *out = (long)json_integer_value(v);
    return TD_OK;
}

/* "criticalPlus" and "critical_plus" alike, for the critqueue's parser. */
static td_status parse_crit(const char *s, td_criticality *out)
{
    char buf[64];
    size_t j = 0;
    for (size_t i = 0; s[i] && j + 2 < sizeof buf; i++) {
        if (s[i] >= 'A' && s[i] <= 'Z') {
            buf[j++] = '_';
            buf[j++] = (char)(s[i] - 'A' + 'a');
        } else {
            buf[j++] = s[i];
        }
    }
    buf[j] = '\0';
    return td_criticality_parse(buf, out);
}

static td_status load_tenant(const td_manifest *m, json_t *o, size_t i, td_scenario_tenant *t,
                             td_err *err)
{
    static const char *const fields[] = {"name",         "key",       "rate",   "criticality",
                                         "promptTokens", "maxTokens", "client", "slo",
                                         "connections",  NULL};
    char where[64];
    snprintf(where, sizeof where, "spec.tenants[%zu]", i);
    if (!json_is_object(o))
        return td_manifest_err(m, o, err, TD_EINVAL, "%s: want a mapping", where);
    td_status st = only_fields(m, o, where, fields, err);
    if (st)
        return st;
    char f[128];
    json_t *v = json_object_get(o, "name");
    if (!json_is_string(v) || !json_string_length(v) || json_string_length(v) > 63)
        return td_manifest_err(m, v ? v : o, err, TD_EINVAL,
                               "%s.name: want a name of 1 to 63 characters", where);
    t->name = strdup(json_string_value(v));
    v = json_object_get(o, "key");
    const char *key = json_string_value(v);
    bool key_ok = key && *key && strlen(key) < 512;
    for (const char *p = key; key_ok && *p; p++)
        key_ok = *p > ' ' && *p < 127;
    if (!key_ok)
        return td_manifest_err(m, v ? v : o, err, TD_EINVAL,
                               "%s.key: want the tenant's API key (printable, no spaces)", where);
    t->key = strdup(key);
    if (!t->name || !t->key)
        return td_err_set(err, TD_ENOMEM, "out of memory");
    v = json_object_get(o, "rate");
    if (!json_is_number(v) || !(json_number_value(v) > 0) || json_number_value(v) > MAX_RATE)
        return td_manifest_err(m, v ? v : o, err, TD_EINVAL,
                               "%s.rate: want requests per second above 0 and at most %.0f", where,
                               MAX_RATE);
    t->rate = json_number_value(v);

    v = json_object_get(o, "criticality");
    memset(t->crit, 0, sizeof t->crit);
    if (!v) {
        t->crit[TD_CRIT_CRITICAL] = 1;
    } else if (json_is_string(v)) {
        td_criticality c;
        if (parse_crit(json_string_value(v), &c) != TD_OK)
            return td_manifest_err(m, v, err, TD_EINVAL,
                                   "%s.criticality: \"%s\" is not criticalPlus, critical, "
                                   "sheddablePlus or sheddable",
                                   where, json_string_value(v));
        t->crit[c] = 1;
    } else if (json_is_object(v) && json_object_size(v) > 0) {
        const char *k;
        json_t *w;
        double sum = 0;
        json_object_foreach(v, k, w)
        {
            td_criticality c;
            if (parse_crit(k, &c) != TD_OK)
                return td_manifest_err(m, w, err, TD_EINVAL,
                                       "%s.criticality.%s: not criticalPlus, critical, "
                                       "sheddablePlus or sheddable",
                                       where, k);
            if (!json_is_number(w) || !(json_number_value(w) >= 0) || json_number_value(w) > 1e6)
                return td_manifest_err(m, w, err, TD_EINVAL,
                                       "%s.criticality.%s: want a share from 0 to 1", where, k);
            t->crit[c] += json_number_value(w);
            sum += json_number_value(w);
        }
        if (!(sum > 0))
            return td_manifest_err(m, v, err, TD_EINVAL, "%s.criticality: the shares add up to 0",
                                   where);
        for (int c = 0; c < TD_CRIT_COUNT; c++)
            t->crit[c] /= sum;
    } else {
        return td_manifest_err(m, v, err, TD_EINVAL,
                               "%s.criticality: want a mix such as {critical: 0.8, sheddable: "
                               "0.2}",
                               where);
    }

    t->prompt_tokens = 100;
    t->max_tokens = 16;
    t->connections = DEFAULT_CONNS;
    snprintf(f, sizeof f, "%s.promptTokens", where);
    if ((v = json_object_get(o, "promptTokens")) &&
        (st = get_int(m, v, f, 0, MAX_TOKENS, &t->prompt_tokens, err)))
        return st;
    snprintf(f, sizeof f, "%s.maxTokens", where);
    if ((v = json_object_get(o, "maxTokens")) &&
        (st = get_int(m, v, f, 1, MAX_TOKENS, &t->max_tokens, err)))
        return st;
    snprintf(f, sizeof f, "%s.connections", where);
    if ((v = json_object_get(o, "connections")) &&
        (st = get_int(m, v, f, 1, MAX_CONNECTIONS, &t->connections, err)))
        return st;
    v = json_object_get(o, "client");
    if (v) {
        const char *c = json_string_value(v);
        if (c && strcmp(c, "wellBehaved") == 0)
            t->abusive = false;
        else if (c && strcmp(c, "abusive") == 0)
            t->abusive = true;
        else
            return td_manifest_err(m, v, err, TD_EINVAL, "%s.client: want wellBehaved or abusive",
                                   where);
    }
    v = json_object_get(o, "slo");
    if (v) {
        static const char *const slo_fields[] = {"p99", "success", NULL};
        snprintf(f, sizeof f, "%s.slo", where);
        if (!json_is_object(v))
            return td_manifest_err(m, v, err, TD_EINVAL, "%s: want {p99: 500ms, success: 0.999}",
                                   f);
        if ((st = only_fields(m, v, f, slo_fields, err)))
            return st;
        t->has_slo = true;
        json_t *p = json_object_get(v, "p99");
        snprintf(f, sizeof f, "%s.slo.p99", where);
        if (p && (st = get_duration(m, p, f, &t->slo_p99_ns, err)))
            return st;
        json_t *s = json_object_get(v, "success");
        if (s && (!json_is_number(s) || !(json_number_value(s) >= 0) || json_number_value(s) > 1))
            return td_manifest_err(m, s, err, TD_EINVAL, "%s.slo.success: want a ratio from 0 to 1",
                                   where);
        t->slo_success = s ? json_number_value(s) : 0;
    }
    return TD_OK;
}

td_status td_scenario_load(const td_manifest *m, td_scenario *s, td_err *err)
{
    memset(s, 0, sizeof *s);
    json_t *doc = NULL;
    for (size_t i = 0; i < td_manifest_count(m); i++) {
        json_t *d = td_manifest_doc(m, i);
        const char *kind = td_json_str(d, "kind");
        if (!kind || strcmp(kind, "LoadScenario") != 0)
            continue;
        if (doc)
            return td_manifest_err(m, d, err, TD_EINVAL,
                                   "a second LoadScenario; give one per file");
        doc = d;
    }
    if (!doc)
        return td_err_set(err, TD_EINVAL, "%s: no LoadScenario document", td_manifest_name(m));
    const char *api = td_json_str(doc, "apiVersion");
    if (!api || strcmp(api, TD_API_TENANTD) != 0)
        return td_manifest_err(m, doc, err, TD_EINVAL, "LoadScenario: apiVersion: want %s",
                               TD_API_TENANTD);
    static const char *const top[] = {"apiVersion", "kind", "metadata", "spec", NULL};
    td_status st = only_fields(m, doc, "LoadScenario", top, err);
    if (st)
        return st;
    json_t *spec = json_object_get(doc, "spec");
    if (!json_is_object(spec))
        return td_manifest_err(m, doc, err, TD_EINVAL, "spec: missing");
    static const char *const fields[] = {"target", "duration", "tenants", NULL};
    if ((st = only_fields(m, spec, "spec", fields, err)))
        return st;
    json_t *v = json_object_get(spec, "target");
    if (v && !json_is_string(v))
        return td_manifest_err(m, v, err, TD_EINVAL, "spec.target: want a URL");
    if (v && !(s->target = strdup(json_string_value(v))))
        return td_err_set(err, TD_ENOMEM, "out of memory");
    if ((v = json_object_get(spec, "duration")) &&
        (st = get_duration(m, v, "spec.duration", &s->duration_ns, err)))
        goto fail;
    json_t *ts = json_object_get(spec, "tenants");
    if (!json_is_array(ts) || json_array_size(ts) == 0 || json_array_size(ts) > TD_SCENARIO_MAX_TENANTS) {
        st = td_manifest_err(m, ts ? ts : spec, err, TD_EINVAL,
                             "spec.tenants: want a list of 1 to %d tenants", TD_SCENARIO_MAX_TENANTS);
        goto fail;
    }
    for (size_t i = 0; i < json_array_size(ts); i++) {
        s->n = i + 1;
        if ((st = load_tenant(m, json_array_get(ts, i), i, &s->t[i], err)))
            goto fail;
        for (size_t j = 0; j < i; j++)
            if (strcmp(s->t[j].name, s->t[i].name) == 0) {
                st = td_manifest_err(m, json_array_get(ts, i), err, TD_EINVAL,
                                     "spec.tenants[%zu].name: \"%s\" appears twice", i,
                                     s->t[i].name);
                goto fail;
            }
    }
    return TD_OK;
fail:
    td_scenario_free(s);
    return st;
}


/* ---- the kind ---- */

/* A LoadScenario stored in a snapshot is checked for its envelope only;
 * td_scenario_load validates the rest when a load test reads it. */
static const td_kind_def kinds[] = {
    {"LoadScenario", TD_API_TENANTD, false, "loadscenario,loadscenarios", NULL, NULL, 0, NULL},
};

const td_kind_def *td_client_kinds(size_t *n)
{
    *n = sizeof kinds / sizeof kinds[0];
    return kinds;
}
