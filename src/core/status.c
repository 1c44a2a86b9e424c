/* status.c - result codes and error messages. */
#include "tenantd/status.h"

#include <stdio.h>
#include <string.h>

const char *td_strerror(td_status s)
{
    switch (s) {
    case TD_OK:
        return "ok";
    case TD_EINVAL:
        return "invalid input";
    case TD_ENOMEM:
        return "out of memory";
    case TD_EAGAIN:
        return "try again";
    case TD_ENOTFOUND:
        return "not found";
    case TD_EEXIST:
        return "already exists";
    case TD_EQUOTA:
        return "over quota";
    case TD_EIO:
        return "i/o error";
    case TD_EFORBIDDEN:
        return "forbidden";
    }
    return "unknown status";
}

td_status td_err_set(td_err *err, td_status s, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return s;
}

td_status td_err_prefix(td_err *err, td_status s, const char *fmt, ...)
{
    if (err) {
        char prefix[512];
        char old[TD_ERR_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(prefix, sizeof prefix, fmt, ap);
        va_end(ap);
        memcpy(old, err->msg, sizeof old);
        snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
    }
    return s;
}
