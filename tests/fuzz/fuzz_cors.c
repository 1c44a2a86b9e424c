/* fuzz_cors.c - libFuzzer target for the CORS decisions on what a browser
 * (or anyone) sends (src/gateway/cors.c): Origin, Access-Control-Request-
 * Method and -Headers, split from the input at NUL bytes, under three
 * policies (exact and subdomain origins with credentials, "*" everything,
 * echoing). Checks: every line written is "Name: value\r\n" with no other
 * CR, LF or NUL (nothing the client sent can add a header); an
 * Access-Control-Allow-Origin is "*" or exactly the Origin, and only for
 * an origin the policy allows; a denied origin gets no Access-Control-*.
 * Aborts on any mismatch. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/cors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, __VA_ARGS__);                                                              \
        abort();                                                                                   \
    } while (0)

static const char *const policies[] = {
    "{\"allowOrigins\": [\"https://app.example.com\", \"https://*.example.org:8443\"], "
    "\"allowMethods\": [\"GET\", \"POST\"], \"allowHeaders\": [\"authorization\"], "
    "\"exposeHeaders\": [\"x-a\"], \"maxAge\": 60, \"allowCredentials\": true}",
    "{\"allowOrigins\": [\"*\"], \"allowMethods\": [\"*\"], \"allowHeaders\": [\"*\"], "
    "\"exposeHeaders\": [\"*\"]}",
    "{\"allowOrigins\": [\"http://*.a\"], \"allowMethods\": [\"*\"], \"allowHeaders\": [\"*\"], "
    "\"allowCredentials\": true}",
};

/* out holds only well-formed lines; returns the Allow-Origin value's
 * start (NUL-terminated copy in ao) or NULL. */
static const char *check_lines(const char *out, char *ao, size_t cap)
{
    const char *found = NULL;
    for (const char *p = out; *p;) {
        const char *eol = strstr(p, "\r\n");
        if (!eol)
            FAIL("a line without CRLF: %s\n", p);
        const char *colon = memchr(p, ':', (size_t)(eol - p));
        if (!colon || colon == p || colon[1] != ' ')
            FAIL("not Name: value: %.*s\n", (int)(eol - p), p);
        for (const char *q = p; q < eol; q++)
            if (*q == '\r' || *q == '\n')
                FAIL("a CR or LF inside a line\n");
        if ((size_t)(colon - p) == 27 && strncmp(p, "Access-Control-Allow-Origin", 27) == 0) {
            size_t n = (size_t)(eol - colon - 2);
            if (n >= cap)
                FAIL("Allow-Origin too long\n");
            memcpy(ao, colon + 2, n);
            ao[n] = '\0';
            found = ao;
        }
        p = eol + 2;
    }
    return found;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *buf = malloc(size + 3);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = buf[size] = buf[size + 1] = '\0';
    const char *origin = buf;
    const char *method = origin + strlen(origin) + 1;
    const char *headers = method <= buf + size - 1 ? method + strlen(method) + 1 : method;
    if (headers > buf + size + 1)
        headers = buf + size + 1;
    json_t *j = json_loads(policies[data[0] % 3], 0, NULL);
    td_gw_cors *c = NULL;
    td_err err;
    if (!j || td_gw_cors_build(j, "fuzz", &c, &err) != TD_OK)
        FAIL("a table policy was refused\n");
    json_decref(j);
    bool allowed = td_gw_cors_origin_allowed(c, origin);
    char out[TD_GW_CORS_HEADERS_MAX], ao[512];
    for (int pass = 0; pass < 2; pass++) {
        bool pre = false;
        if (pass == 0)
            pre = td_gw_cors_preflight(c, origin, method, *headers ? headers : NULL, out,
                                       sizeof out);
        else
            pre = td_gw_cors_actual(c, origin, out, sizeof out) > 0;
        if (pre != allowed)
            FAIL("decision %d differs from td_gw_cors_origin_allowed %d\n", pre, allowed);
        const char *v = check_lines(out, ao, sizeof ao);
        if (!allowed && strstr(out, "Access-Control-"))
            FAIL("a denied origin got Access-Control-* lines\n");
        if (allowed && (!v || (strcmp(v, "*") != 0 && strcmp(v, origin) != 0)))
            FAIL("Allow-Origin %s for origin %s\n", v ? v : "(none)", origin);
    }
    td_gw_cors_destroy(c);
    free(buf);
    return 0;
}
