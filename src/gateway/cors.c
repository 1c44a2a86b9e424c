/* cors.c - a Route's CORS policy (cors.h). A "*" in allowMethods or
 * allowHeaders echoes what the preflight asked for, as Envoy's filter
 * does: a literal "*" never covers Authorization, which every tenantd
 * client sends. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/reqpath.h"
#include "gateway/cors.h"
#include "gateway/gateway.h"

#define ORIGIN_MAX  300 /* bytes of an Origin we consider */
#define LIST_MAX    32  /* entries of allowMethods, allowHeaders, exposeHeaders */
#define NAME_MAX_   64  /* bytes of one header name */
#define ECHO_MAX    1024 /* bytes of Access-Control-Request-Headers we echo */
#define MAX_AGE_MAX 86400

struct td_gw_cors {
    char **origins; /* as configured, "*" patterns kept */
    size_t norigins;
    bool any_origin;
    char *methods; /* "GET, POST", or NULL: no Access-Control-Allow-Methods */
    bool any_method;
    char *headers; /* likewise for Access-Control-Allow-Headers */
    bool any_header;
    char *expose;  /* the configured names and TD_GW_CORS_OWN_EXPOSED, or "*" */
    /* what every actual answer to an allowed origin carries after its
     * Allow-Origin line, made once: Allow-Credentials, Expose-Headers, Vary */
    char *actual_tail;
    size_t actual_tail_len;
    long max_age;  /* -1: no Access-Control-Max-Age */
    bool credentials;
};

/* ---- syntax ---- */

/* RFC 9110 tchar: the bytes of a token (method, header name). */
static bool tchar(unsigned char ch)
{
    return isalnum(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static bool token_ok(const char *s, size_t max)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!tchar((unsigned char)s[i]))
            return false;
    return true;
}

static bool host_char(unsigned char ch)
{
    return isalnum(ch) || ch == '-' || ch == '.';
}

/* "scheme://host[:port]" (host possibly "*.domain" when wild is allowed,
 * or a bracketed IPv6 address); *wild tells which. */
static bool origin_syntax(const char *s, bool allow_wild, bool *wild)
{
    size_t n = strlen(s), i = 0;
    *wild = false;
    if (n == 0 || n > ORIGIN_MAX || !isalpha((unsigned char)s[0]))
        return false;
    while (i < n && (isalnum((unsigned char)s[i]) || s[i] == '+' || s[i] == '-' || s[i] == '.'))
        i++;
    if (strncmp(s + i, "://", 3) != 0)
        return false;
    i += 3;
    if (allow_wild && strncmp(s + i, "*.", 2) == 0) {
        *wild = true;
        i += 2;
    }
    size_t h = i;
    if (s[i] == '[' && !*wild) {
        for (i++; i < n && (isxdigit((unsigned char)s[i]) || s[i] == ':' || s[i] == '.'); i++)
            ;
        if (s[i] != ']')
            return false;
        i++;
    } else {
        while (i < n && host_char((unsigned char)s[i]))
            i++;
    }
    if (i == h || s[h] == '.' || s[h] == '-')
        return false;
    if (s[i] == ':') {
        char *end;
        long port = strtol(s + i + 1, &end, 10);
        if (!isdigit((unsigned char)s[i + 1]) || port < 1 || port > 65535)
            return false;
        i = (size_t)(end - s);
    }
    return i == n;
}

/* ---- validation ---- */

/* A list of 1..LIST_MAX strings; each a method (methods) or a header name,
 * or "*" alone. */
static td_status v_list(td_vctx *v, const json_t *a, const char *field, bool methods)
{
    if (!a)
        return TD_OK;
    if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > LIST_MAX)
        return td_vfail(v, a, field, "must be a list of 1 to %d %s, or [\"*\"]", LIST_MAX,
                        methods ? "methods" : "header names");
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e)
    {
        const char *s = json_string_value(e);
        if (s && strcmp(s, "*") == 0) {
            if (json_array_size(a) != 1)
                return td_vfail(v, e, field, "\"*\" stands alone (it already allows every %s)",
                                methods ? "method" : "header");
            continue;
        }
        if (methods &&
            !td_in_list(s, (const char *const[]){"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE",
                                                 "OPTIONS", NULL}))
            return td_vfail(v, e, field,
                            "item %zu: \"%s\" is not one of GET, HEAD, POST, PUT, PATCH, DELETE, "
                            "OPTIONS (upper case), or \"*\"",
                            i, s ? s : "");
        if (!methods && !token_ok(s, NAME_MAX_))
            return td_vfail(v, e, field,
                            "item %zu: \"%s\" is not a header name (letters, digits and "
                            "!#$%%&'*+-.^_`|~, at most %d bytes)",
                            i, s ? s : "", NAME_MAX_);
    }
    return TD_OK;
}

static bool lists_star(const json_t *a)
{
    return json_array_size(a) == 1 && json_string_value(json_array_get(a, 0)) &&
           strcmp(json_string_value(json_array_get(a, 0)), "*") == 0;
}

static td_status v_origins(td_vctx *v, const json_t *c, const json_t *a)
{
    if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > 64)
        return td_vfail(v, a ? a : c, "spec.cors.allowOrigins",
                        "required: a list of 1 to 64 origins (\"https://app.example.com\", "
                        "\"https://*.example.com\", or \"*\")");
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e)
    {
        const char *s = json_string_value(e);
        bool wild;
        if (s && strcmp(s, "*") == 0)
            continue;
        if (!s || !origin_syntax(s, true, &wild))
            return td_vfail(v, e, "spec.cors.allowOrigins",
                            "item %zu: \"%s\" is not an origin: scheme://host[:port] without a "
                            "path or trailing '/' (\"https://app.example.com\"), "
                            "scheme://*.domain for its subdomains, or \"*\"",
                            i, s ? s : "");
    }
    return TD_OK;
}

td_status td_gw_cors_validate(td_vctx *v, const json_t *c)
{
    static const char *const fields[] = {"allowOrigins", "allowMethods",  "allowHeaders",
                                         "exposeHeaders", "maxAge",       "allowCredentials",
                                         NULL};
    if (!c)
        return TD_OK;
    if (!json_is_object(c))
        return td_vfail(v, c, "spec.cors", "must be a mapping (allowOrigins, allowMethods, ...)");
    TD_TRY(td_v_fields(v, c, "spec.cors", fields));
    const json_t *origins = json_object_get(c, "allowOrigins");
    TD_TRY(v_origins(v, c, origins));
    TD_TRY(v_list(v, json_object_get(c, "allowMethods"), "spec.cors.allowMethods", true));
    TD_TRY(v_list(v, json_object_get(c, "allowHeaders"), "spec.cors.allowHeaders", false));
    TD_TRY(v_list(v, json_object_get(c, "exposeHeaders"), "spec.cors.exposeHeaders", false));
    TD_TRY(td_v_int_range(v, json_object_get(c, "maxAge"), "spec.cors.maxAge", 0, MAX_AGE_MAX));
    const json_t *cred = json_object_get(c, "allowCredentials");
    if (cred && !json_is_boolean(cred))
        return td_vfail(v, cred, "spec.cors.allowCredentials", "must be true or false");
    if (json_is_true(cred)) {
        for (size_t i = 0; i < json_array_size(origins); i++) {
            const json_t *e = json_array_get(origins, i);
            if (strcmp(json_string_value(e), "*") == 0)
                return td_vfail(v, e, "spec.cors.allowOrigins",
                                "\"*\" cannot be used with allowCredentials: true (browsers "
                                "refuse a wildcard origin on a credentialed response); list the "
                                "origins");
        }
        if (lists_star(json_object_get(c, "exposeHeaders")))
            return td_vfail(v, json_object_get(c, "exposeHeaders"), "spec.cors.exposeHeaders",
                            "\"*\" cannot be used with allowCredentials: true (browsers read it "
                            "as a header named \"*\"); list the headers");
    }
    return TD_OK;
}

/* ---- the policy ---- */

void td_gw_cors_destroy(td_gw_cors *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->norigins; i++)
        free(c->origins[i]);
    free(c->origins);
    free(c->methods);
    free(c->headers);
    free(c->expose);
    free(c->actual_tail);
    free(c);
}

/* true if the ", " list l names name (without case). */
static bool listed(const char *l, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = l; p && *p;) {
        size_t k = strcspn(p, ",");
        if (k == n && strncasecmp(p, name, n) == 0)
            return true;
        p += k;
        while (*p == ',' || *p == ' ')
            p++;
    }
    return false;
}

/* The strings of a validated list joined by ", ", but those tail names,
 * then tail (may be NULL); NULL (and *ok kept) for an absent list without
 * a tail. */
static char *join(const json_t *a, const char *tail, bool *ok)
{
    size_t n = tail ? strlen(tail) + 1 : 1;
    for (size_t i = 0; i < json_array_size(a); i++)
        n += json_string_length(json_array_get(a, i)) + 2;
    if (!a && !tail)
        return NULL;
    char *s = malloc(n);
    if (!s) {
        *ok = false;
        return NULL;
    }
    s[0] = '\0';
    for (size_t i = 0; i < json_array_size(a); i++) {
        const char *e = json_string_value(json_array_get(a, i));
        if (listed(tail, e))
            continue;
        if (s[0])
            strcat(s, ", ");
        strcat(s, e);
    }
    if (tail && s[0])
        strcat(s, ", ");
    if (tail)
        strcat(s, tail);
    return s;
}

td_status td_gw_cors_build(const json_t *c, const char *route, td_gw_cors **out, td_err *err)
{
    *out = NULL;
    if (!c)
        return TD_OK;
    td_vctx v = {.err = err};
    snprintf(v.who, sizeof v.who, "Route %s", route);
    TD_TRY(td_gw_cors_validate(&v, c));
    td_gw_cors *p = calloc(1, sizeof *p);
    const json_t *origins = json_object_get(c, "allowOrigins");
    bool ok = p != NULL;
    if (ok)
        p->origins = calloc(json_array_size(origins), sizeof *p->origins);
    ok = ok && p->origins;
    for (size_t i = 0; ok && i < json_array_size(origins); i++) {
        const char *s = json_string_value(json_array_get(origins, i));
        p->any_origin |= strcmp(s, "*") == 0;
        ok = (p->origins[i] = strdup(s)) != NULL;
        p->norigins = i + 1;
    }
    if (ok) {
        const json_t *m = json_object_get(c, "allowMethods");
        const json_t *h = json_object_get(c, "allowHeaders");
        const json_t *x = json_object_get(c, "exposeHeaders");
        p->any_method = lists_star(m);
        p->any_header = lists_star(h);
        p->methods = join(m, NULL, &ok);
        p->headers = join(h, NULL, &ok);
        p->expose = lists_star(x) ? strdup("*") : join(x, TD_GW_CORS_OWN_EXPOSED, &ok);
        ok = ok && p->expose;
        const json_t *ma = json_object_get(c, "maxAge");
        p->max_age = ma ? (long)json_integer_value(ma) : -1;
        p->credentials = json_is_true(json_object_get(c, "allowCredentials"));
    }
    if (ok) {
        size_t n = strlen(p->expose) + 128;
        ok = (p->actual_tail = malloc(n)) != NULL;
        if (ok)
            p->actual_tail_len = (size_t)snprintf(
                p->actual_tail, n, "%sAccess-Control-Expose-Headers: %s\r\nVary: Origin\r\n",
                p->credentials ? "Access-Control-Allow-Credentials: true\r\n" : "", p->expose);
    }
    if (!ok) {
        td_gw_cors_destroy(p);
        return td_err_set(err, TD_ENOMEM, "out of memory");
    }
    *out = p;
    return TD_OK;
}

/* ---- decisions ---- */

/* origin's host (after "scheme://") is one label or more and then
 * ".rest" where pattern is scheme, "://", "*." and rest. */
static bool wild_match(const char *pattern, const char *origin)
{
    const char *sep = strstr(pattern, "://*.");
    size_t slen = (size_t)(sep - pattern) + 3; /* "scheme://" */
    const char *rest = sep + 4;                 /* ".domain[:port]" */
    size_t olen = strlen(origin), rlen = strlen(rest);
    if (strncasecmp(origin, pattern, slen) != 0 || olen <= slen + rlen)
        return false;
    if (strcasecmp(origin + olen - rlen, rest) != 0)
        return false;
    for (size_t i = slen; i < olen - rlen; i++)
        if (!host_char((unsigned char)origin[i]))
            return false;
    return origin[slen] != '.' && origin[olen - rlen - 1] != '.';
}

bool td_gw_cors_origin_allowed(const td_gw_cors *c, const char *origin)
{
    if (!c || !origin)
        return false;
    size_t n = strlen(origin);
    if (n == 0 || n > ORIGIN_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)origin[i] <= 0x20 || (unsigned char)origin[i] >= 0x7f)
            return false;
    for (size_t i = 0; i < c->norigins; i++) {
        const char *o = c->origins[i];
        if (strcmp(o, "*") == 0 || strcasecmp(o, origin) == 0 ||
            (strstr(o, "://*.") && wild_match(o, origin)))
            return true;
    }
    return false;
}

/* Appends "name: value\r\n" to out if it fits. */
static void line(char *out, size_t cap, size_t *len, const char *name, const char *value)
{
    int k = snprintf(out + *len, cap - *len, "%s: %s\r\n", name, value);
    if (k > 0 && (size_t)k < cap - *len)
        *len += (size_t)k;
    else
        out[*len] = '\0';
}

/* A comma list of tokens as Access-Control-Request-Headers holds it. */
static bool token_list_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > ECHO_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!tchar((unsigned char)s[i]) && s[i] != ',' && s[i] != ' ' && s[i] != '\t')
            return false;
    return true;
}

bool td_gw_cors_preflight(const td_gw_cors *c, const char *origin, const char *req_method,
                          const char *req_headers, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    if (!td_gw_cors_origin_allowed(c, origin)) {
        line(out, cap, &len, "Vary", "Origin");
        return false;
    }
    line(out, cap, &len, "Access-Control-Allow-Origin",
         c->any_origin && !c->credentials ? "*" : origin);
    if (c->any_method && token_ok(req_method, NAME_MAX_))
        line(out, cap, &len, "Access-Control-Allow-Methods", req_method);
    else if (c->methods && !c->any_method)
        line(out, cap, &len, "Access-Control-Allow-Methods", c->methods);
    if (c->any_header && token_list_ok(req_headers))
        line(out, cap, &len, "Access-Control-Allow-Headers", req_headers);
    else if (c->headers && !c->any_header)
        line(out, cap, &len, "Access-Control-Allow-Headers", c->headers);
    if (c->max_age >= 0) {
        char age[24];
        snprintf(age, sizeof age, "%ld", c->max_age);
        line(out, cap, &len, "Access-Control-Max-Age", age);
    }
    if (c->credentials)
        line(out, cap, &len, "Access-Control-Allow-Credentials", "true");
    line(out, cap, &len, "Vary", "Origin");
    return true;
}

size_t td_gw_cors_actual(const td_gw_cors *c, const char *origin, char *out, size_t cap)
{
    size_t len = 0;
    if (cap)
        out[0] = '\0';
    if (!td_gw_cors_origin_allowed(c, origin))
        return 0;
    /* on every answer to a browser: copies, no formatting */
    static const char ao[] = "Access-Control-Allow-Origin: ";
    const char *v = c->any_origin && !c->credentials ? "*" : origin;
    size_t vlen = strlen(v);
    if (sizeof ao - 1 + vlen + 2 + c->actual_tail_len >= cap)
        return 0;
    memcpy(out, ao, sizeof ao - 1);
    len = sizeof ao - 1;
    memcpy(out + len, v, vlen);
    len += vlen;
    memcpy(out + len, "\r\n", 2);
    len += 2;
    memcpy(out + len, c->actual_tail, c->actual_tail_len + 1);
    return len + c->actual_tail_len;
}

const td_gw_cors *td_gw_cors_for_path(const td_gw_config *c, const char *path)
{
    size_t n = strlen(path);
    for (size_t i = 0; c && i < c->nroutes; i++) {
        const td_gw_route *r = &c->routes[i];
        if (!td_reqpath_has_prefix(path, n, r->path_prefix, strlen(r->path_prefix)))
            continue;
        if (r->cors)
            return r->cors;
        if (r->nmodels == 0)
            return NULL; /* it takes every request on the path: later routes never see them */
    }
    return NULL;
}
