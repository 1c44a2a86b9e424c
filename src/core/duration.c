/* duration.c - Go's time.ParseDuration, unsigned. */
#include "core/duration.h"

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

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
 * days_from_civil), so no timegm and no time zone state is involved. */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static int digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

td_status td_rfc3339_parse(const char *s, int64_t *ns, td_err *err)
{
    int y, mo, d, h = 0, mi = 0, sec = 0;
    const char *p = s;
    if (strlen(s) < 10 || digits(p, 4, &y) || p[4] != '-' || digits(p + 5, 2, &mo) ||
        p[7] != '-' || digits(p + 8, 2, &d) || mo < 1 || mo > 12 || d < 1 || d > 31)
        goto bad;
    p += 10;
    int64_t frac = 0, off = 0;
    if (*p) {
        if ((*p != 'T' && *p != 't' && *p != ' ') || strlen(p) < 9 || digits(p + 1, 2, &h) ||
            p[3] != ':' || digits(p + 4, 2, &mi) || p[6] != ':' || digits(p + 7, 2, &sec) ||
            h > 23 || mi > 59 || sec > 60)
            goto bad;
        p += 9;
        if (*p == '.') {
            int64_t scale = 100000000;
            p++;
            if (*p < '0' || *p > '9')
                goto bad;
            for (; *p >= '0' && *p <= '9'; p++, scale /= 10)
                frac += (*p - '0') * scale;
        }
        if (*p == 'Z' || *p == 'z') {
            p++;
        } else if (*p == '+' || *p == '-') {
            int oh, om;
            if (strlen(p) != 6 || digits(p + 1, 2, &oh) || p[3] != ':' || digits(p + 4, 2, &om) ||
                oh > 23 || om > 59)
                goto bad;
            off = (*p == '-' ? -1 : 1) * ((int64_t)oh * 3600 + om * 60);
            p += 6;
        } else {
            goto bad;
        }
        if (*p)
            goto bad;
    }
    int64_t secs = days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 +
                   sec - off;
    *ns = secs * 1000000000LL + frac;
    return TD_OK;
bad:
    return td_err_set(err, TD_EINVAL,
                      "\"%s\" is not an RFC 3339 time (e.g. 2026-12-01T00:00:00Z)", s);
}
