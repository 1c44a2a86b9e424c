/* cors.h - a Route's CORS policy (spec.cors, read as Gateway API's
 * HTTPCORSFilter and Envoy's CORS filter read theirs): the answer to a
 * preflight and the Access-Control-* lines of every other answer to an
 * allowed origin, as text for io to write. Pure. */
#ifndef TENANTD_CORS_H
#define TENANTD_CORS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/validate.h"
#include "tenantd/status.h"

/* The response headers a browser app must be able to read whatever the
 * Route says: tenantd's own (the retry advice of a 429 or 503, the cost
 * estimate, why a request was shed) and the upstream's request id, which
 * the OpenAI SDKs report. Always exposed to an allowed origin, after
 * spec.cors.exposeHeaders. */
#define TD_GW_CORS_OWN_EXPOSED                                                                     \
    "retry-after, retry-after-ms, x-should-retry, x-request-id, x-tenantd-cost-estimate, "        \
    "x-tenantd-shed"

/* Room for every line td_gw_cors_preflight or td_gw_cors_actual writes. */
#define TD_GW_CORS_HEADERS_MAX 4096

typedef struct td_gw_cors td_gw_cors;

/* Validates spec.cors (c may be NULL: absent) in a Route: allowOrigins
 * (required, 1..64: "*", or scheme://host[:port], the host possibly
 * "*.domain" for any subdomain), allowMethods (methods or "*"),
 * allowHeaders and exposeHeaders (header names or "*"), maxAge (seconds,
 * 0..86400), allowCredentials (boolean). Refuses "*" in allowOrigins or
 * exposeHeaders together with allowCredentials true, naming the field:
 * browsers refuse a wildcard on a credentialed response. */
td_status td_gw_cors_validate(td_vctx *v, const json_t *c);

/* Builds the policy of spec.cors c of Route route into *out (NULL when c
 * is NULL: no policy). TD_EINVAL naming the route and field if c does not
 * validate, TD_ENOMEM. c and route are borrowed. */
td_status td_gw_cors_build(const json_t *c, const char *route, td_gw_cors **out, td_err *err);
void td_gw_cors_destroy(td_gw_cors *c);

/* true if origin (an Origin header value, NUL-terminated) is allowed by
 * c: "*", an exact origin (scheme and host compared without case), or a
 * pattern of scheme, "*." and a domain that origin's host is a subdomain of
 * (one label or more before ".domain"). Origins over 300 bytes or with
 * bytes no origin has are never allowed. c NULL: false. */
bool td_gw_cors_origin_allowed(const td_gw_cors *c, const char *origin);

/* The header lines ("Name: value\r\n"...) of tenantd's 204 answer to a
 * preflight (OPTIONS with Origin and Access-Control-Request-Method;
 * req_headers is Access-Control-Request-Headers, may be NULL) into out
 * (cap bytes, NUL-terminated; TD_GW_CORS_HEADERS_MAX is always enough).
 * Returns true with Access-Control-Allow-Origin, -Methods, -Headers,
 * -Max-Age, -Credentials as configured when origin is allowed ("*" methods
 * or headers with credentials echo what the browser asked for, as
 * Gateway API says); false with only "Vary: Origin" when it is not: the
 * browser then refuses the request. */
bool td_gw_cors_preflight(const td_gw_cors *c, const char *origin, const char *req_method,
                          const char *req_headers, char *out, size_t cap);

/* The header lines an actual response (the upstream's or tenantd's own
 * error) carries for origin (may be NULL) under c (may be NULL): for an
 * allowed origin Access-Control-Allow-Origin, -Credentials, -Expose-Headers
 * (spec.cors.exposeHeaders and TD_GW_CORS_OWN_EXPOSED) and Vary: Origin;
 * nothing (0) otherwise. Returns the length written to out (cap bytes,
 * NUL-terminated). */
size_t td_gw_cors_actual(const td_gw_cors *c, const char *origin, char *out, size_t cap);

#endif
