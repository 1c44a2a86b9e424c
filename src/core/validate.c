/* validate.c - the shared validation helper (validate.h) and the small
 * jansson accessors config.h declares: every kind's validator names file,
 * line, object and field the same way. */
#include "core/validate.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/duration.h"

td_status td_vfail(td_vctx *v, const json_t *node, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    td_status st = td_vfailv(v, node, field, fmt, ap);
    va_end(ap);
    return st;
}

td_status td_vfailv(td_vctx *v, const json_t *node, const char *field, const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (v->line == TD_VLINE_FIRST_MEMBER) {
        /* only scalars carry their own line (a mapping has its parent's):
         * name the line of a mapping's first member */
        for (int depth = 0; depth < 4 && node && json_is_object(node); depth++) {
            void *it = json_object_iter((json_t *)node);
            if (!it || !td_manifest_line(v->src, json_object_iter_value(it)))
                break;
            node = json_object_iter_value(it);
        }
    }
    if (!node || (v->line != TD_VLINE_AS_GIVEN && !td_manifest_line(v->src, node)))
        node = v->obj;
    return td_manifest_err(v->src, node, v->err, TD_EINVAL, "%s: %s: %s", v->who, field, msg);
}

const char *td_json_str(const json_t *obj, const char *path)
{
    return json_string_value(td_json_path(obj, path));
}

td_status td_json_int(const json_t *v, long long min, long long max, long long *out, td_err *err)
{
    if (json_is_integer(v)) {
        long long x = (long long)json_integer_value(v);
        if (x < min || x > max)
            return td_err_set(err, TD_EINVAL, "must be an integer in [%lld, %lld], not %lld", min,
                              max, x);
        *out = x;
        return TD_OK;
    }
    char shown[48];
    if (json_is_real(v)) {
        snprintf(shown, sizeof shown, "%.17g", json_real_value(v));
        if (!strpbrk(shown, ".eEni")) /* 1e3 would read as the integer 1000 */
            strcat(shown, ".0");
    } else {
        char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        snprintf(shown, sizeof shown, "%.40s%s", s ? s : "nothing",
                 s && strlen(s) > 40 ? "..." : "");
        free(s);
    }
    return td_err_set(err, TD_EINVAL, "must be an integer, not %s", shown);
}

td_status td_json_int32(const json_t *v, int32_t *out, td_err *err)
{
    long long x = 0; /* set on TD_OK; gcc -O3 cannot see it */
    td_status st = td_json_int(v, INT32_MIN, INT32_MAX, &x, err);
    if (st == TD_OK)
        *out = (int32_t)x;
    return st;
}

json_t *td_json_copy(const json_t *v)
{
    if (!v)
        return NULL;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        json_t *o = json_object();
        if (!o)
            return NULL;
        for (void *it = json_object_iter((json_t *)v); it;
             it = json_object_iter_next((json_t *)v, it)) {
            if (json_object_setn_new_nocheck(o, json_object_iter_key(it),
                                             json_object_iter_key_len(it),
                                             td_json_copy(json_object_iter_value(it))) != 0) {
                json_decref(o);
                return NULL;
            }
        }
        return o;
    }
    case JSON_ARRAY: {
        json_t *a = json_array();
        size_t i;
        json_t *x;
        if (!a)
            return NULL;
        json_array_foreach(v, i, x)
        {
            if (json_array_append_new(a, td_json_copy(x)) != 0) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    /* Strings and numbers are shared, not copied: nothing changes them in
     * place (see config.h), and a shared one also compares equal at once
     * (json_equal's pointer test) in the JSON Patch diff. */
    case JSON_STRING:
    case JSON_INTEGER:
    case JSON_REAL:
    default:
        return json_incref((json_t *)v); /* true, false, null: singletons */
    }
}

json_t *td_json_path(const json_t *obj, const char *path)
{
    const json_t *cur = obj;
    const char *p = path;
    /* one pass over each segment, in place: no strchr and strlen both */
    while (cur && *p) {
        const char *e = p;
        while (*e && *e != '.')
            e++;
        size_t n = (size_t)(e - p);
        if (n >= 256)
            return NULL; /* as before: no key that long is looked up */
        if (!json_is_object(cur))
            return NULL;
        cur = json_object_getn(cur, p, n);
        p = *e ? e + 1 : e;
    }
    return (json_t *)cur;
}

const char *td_json_unknown_field(const json_t *m, const char *const *allowed, json_t **val,
                                  char *known, size_t n)
{
    const char *k;
    json_object_foreach((json_t *)m, k, *val)
    {
        const char *const *a = allowed;
        while (*a && strcmp(*a, k) != 0)
            a++;
        if (*a)
            continue;
        known[0] = '\0';
        for (a = allowed; *a; a++) {
            strncat(known, *a, n - strlen(known) - 1);
            if (a[1])
                strncat(known, ", ", n - strlen(known) - 1);
        }
        return k;
    }
    return NULL;
}

bool td_dns_subdomain(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
        if (!ok)
            return false;
    }
    return isalnum((unsigned char)s[0]) && isalnum((unsigned char)s[n - 1]);
}

bool td_dns_label(const char *s)
{
    return td_dns_subdomain(s) && strlen(s) <= 63 && !strchr(s, '.');
}

bool td_in_list(const char *s, const char *const *list)
{
    for (; s && *list; list++)
        if (strcmp(s, *list) == 0)
            return true;
    return false;
}

bool td_v_is_mode(const json_t *node)
{
    const char *m = json_string_value(node);
    return m && (strcmp(m, "enforce") == 0 || strcmp(m, "shadow") == 0);
}

td_status td_v_enforcement(td_vctx *v, const json_t *e, const char *field,
                           const char *const *allowed, const char *mapping)
{
    if (!e)
        return TD_OK;
    if (!json_is_object(e)) {
        if (!td_v_is_mode(e))
            return td_vfail(v, e, field, "must be enforce or shadow, or %s", mapping);
        return TD_OK;
    }
    TD_TRY(td_v_fields(v, e, field, allowed));
    const char *key;
    json_t *m;
    json_object_foreach((json_t *)e, key, m)
    {
        char f[512];
        snprintf(f, sizeof f, "%s.%s", field, key);
        if (!td_v_is_mode(m))
            return td_vfail(v, m, f, "must be enforce or shadow");
    }
    return TD_OK;
}

td_status td_v_string_map(td_vctx *v, const json_t *m, const char *field)
{
    if (!m)
        return TD_OK;
    if (!json_is_object(m))
        return td_vfail(v, m, field, "must be a map of strings");
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)m, k, val)
    {
        if (!json_is_string(val))
            return td_vfail(v, val, field, "value of \"%s\" must be a string (quote it)", k);
    }
    return TD_OK;
}

td_status td_v_quantity(td_vctx *v, const json_t *node, const char *field, td_quantity *out)
{
    char buf[64];
    const char *s;
    if (json_is_string(node)) {
        s = json_string_value(node);
    } else if (json_is_integer(node)) {
        snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(node));
        s = buf;
    } else if (json_is_real(node)) {
        snprintf(buf, sizeof buf, "%.15g", json_real_value(node));
        s = buf;
    } else {
        return td_vfail(v, node, field, "must be a quantity such as \"500m\" or \"8Gi\"");
    }
    td_quantity q;
    td_err qe;
    if (td_quantity_parse(s, &q, &qe) != TD_OK)
        return td_vfail(v, node, field, "\"%s\" is not a quantity", s);
    if (td_quantity_sign(&q) < 0)
        return td_vfail(v, node, field, "\"%s\" must not be negative", s);
    if (out)
        *out = q;
    return TD_OK;
}

td_status td_v_quantity_map(td_vctx *v, const json_t *m, const char *field)
{
    if (!m)
        return TD_OK;
    if (!json_is_object(m))
        return td_vfail(v, m, field, "must be a map of resource name to quantity");
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)m, k, val)
    {
        char f[512];
        snprintf(f, sizeof f, "%s.%s", field, k);
        TD_TRY(td_v_quantity(v, val, f, NULL));
    }
    return TD_OK;
}

td_status td_v_string_array(td_vctx *v, const json_t *a, const char *field)
{
    if (!a)
        return TD_OK;
    if (!json_is_array(a))
        return td_vfail(v, a, field, "must be a list of strings");
    size_t i;
    json_t *x;
    json_array_foreach((json_t *)a, i, x)
    {
        if (!json_is_string(x))
            return td_vfail(v, x, field, "item %zu must be a string", i);
    }
    return TD_OK;
}

td_status td_v_fields(td_vctx *v, const json_t *m, const char *field, const char *const *allowed)
{
    if (!m)
        return TD_OK;
    if (!json_is_object(m))
        return td_vfail(v, m, field, "must be a mapping");
    json_t *val;
    char list[512];
    const char *k = td_json_unknown_field(m, allowed, &val, list, sizeof list);
    if (k)
        return td_vfail(v, val, field, "unknown field \"%s\" (known: %s)", k, list);
    return TD_OK;
}

td_status td_v_duration(td_vctx *v, const json_t *node, const char *field)
{
    if (!node)
        return TD_OK;
    int64_t ns;
    if (!json_is_string(node) || td_duration_parse(json_string_value(node), &ns, NULL) != TD_OK)
        return td_vfail(v, node, field, "must be a duration such as \"1s\" or \"500ms\"");
    return TD_OK;
}

td_status td_v_number(td_vctx *v, const json_t *node, const char *field, double min)
{
    if (!node)
        return TD_OK;
    if (!json_is_number(node))
        return td_vfail(v, node, field, "must be a number");
    if (json_number_value(node) < min)
        return td_vfail(v, node, field, "must be at least %g", min);
    return TD_OK;
}

td_status td_v_int_range(td_vctx *v, const json_t *node, const char *field, long long min,
                         long long max)
{
    long long x;
    td_err e;
    if (node && td_json_int(node, min, max, &x, &e) != TD_OK)
        return td_vfail(v, node, field, "%s", e.msg);
    return TD_OK;
}

td_status td_v_int(td_vctx *v, const json_t *node, const char *field, long long min)
{
    return td_v_int_range(v, node, field, min, INT32_MAX);
}
