/* duration.h - Go-style durations ("1s", "500ms", "1m30s", "2h"), as
 * Kubernetes and Kueue write them. */
#ifndef TENANTD_DURATION_H
#define TENANTD_DURATION_H

#include <stdint.h>

#include "tenantd/status.h"

/* Parses s into nanoseconds. Units ns, us, µs, ms, s, m, h; a fraction is
 * allowed ("1.5s"); no sign. TD_EINVAL if s is not a duration or overflows. */
td_status td_duration_parse(const char *s, int64_t *ns, td_err *err);

/* Parses an RFC 3339 time ("2026-12-01T00:00:00Z", "...T01:00:00.5+01:00")
 * into nanoseconds since the epoch. A date alone ("2026-12-01") is its
 * midnight UTC. TD_EINVAL naming s otherwise. */
td_status td_rfc3339_parse(const char *s, int64_t *ns, td_err *err);

#endif
