/* duration.c - Go's time.ParseDuration, unsigned. */
#include "tenantd/duration.h"

#include <stdint.h>
#include <string.h>

static int unit_ns(const char *u, size_t n, int64_t *out)
{
    static const struct {
        const char *name;
        int64_t ns;
    } units[] = {{"ns", 1},           {"us", 1000},          {"\xc2\xb5s", 1000},
                 {"ms", 1000000},     {"s", 1000000000LL},   {"m", 60000000000LL},
                 {"h", 3600000000000LL}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strlen(units[i].name) == n && memcmp(units[i].name, u, n) == 0) {
            *out = units[i].ns;
            return 0;
        }
    return -1;
}

td_status td_duration_parse(const char *s, int64_t *ns, td_err *err)
{
    const char *p = s;
    if (!s || !*s)
        return td_err_set(err, TD_EINVAL, "empty duration; use e.g. \"30s\" or \"500ms\"");
    if (strcmp(s, "0") == 0) {
        *ns = 0;
        return TD_OK;
    }
    long double total = 0;
    while (*p) {
        if (!((*p >= '0' && *p <= '9') || *p == '.'))
            goto bad;
        long double v = 0, scale = 1;
        int digits = 0, dot = 0;
        while ((*p >= '0' && *p <= '9') || (*p == '.' && !dot)) {
            if (*p == '.') {
                dot = 1;
            } else {
                digits++;
                if (dot) {
                    scale /= 10;
                    v += (*p - '0') * scale;
                } else {
                    v = v * 10 + (*p - '0');
                }
            }
            p++;
        }
        if (!digits)
            goto bad;
        const char *u = p;
        while (*p && !((*p >= '0' && *p <= '9') || *p == '.'))
            p++;
        int64_t mult;
        if (unit_ns(u, (size_t)(p - u), &mult) < 0)
            goto bad;
        total += v * mult;
        if (total > (long double)INT64_MAX)
            return td_err_set(err, TD_EINVAL, "duration \"%s\" is too long", s);
    }
    *ns = (int64_t)total;
    return TD_OK;
bad:
    return td_err_set(err, TD_EINVAL,
                      "\"%s\" is not a duration; use a number and a unit (ns, us, ms, s, m, h), "
                      "e.g. \"30s\"",
                      s);
}
