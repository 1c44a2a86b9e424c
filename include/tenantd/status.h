/* status.h - the one result enum of tenantd, and an optional error detail.
 * Every fallible function returns td_status; values come back through
 * out-parameters. A failed call changes nothing it was given. */
#ifndef TENANTD_STATUS_H
#define TENANTD_STATUS_H

#include <stdarg.h>
#include <stddef.h>

typedef enum {
    TD_OK = 0,
    TD_EINVAL,    /* bad input: a file, a request, a flag */
    TD_ENOMEM,    /* out of memory; state is unchanged */
    TD_EAGAIN,    /* try again later (over a limit, would block) */
    TD_ENOTFOUND, /* no such object */
    TD_EEXIST,    /* already exists */
    TD_EQUOTA,    /* over a quota */
    TD_EIO,       /* the OS or a dependency failed */
    TD_EFORBIDDEN /* a policy denies it; the message says which and why */
} td_status;

#define TD_ERR_MAX 2048

/* Detail for a failed call: a message a person can act on, naming the
 * place (file:line, field, object). Functions take a td_err * that may be
 * NULL when the caller does not want the detail. */
typedef struct {
    char msg[TD_ERR_MAX];
} td_err;

const char *td_strerror(td_status s);

/* Formats msg into err (if err is not NULL) and returns s, so that a
 * failing path reads `return td_err_set(err, TD_EINVAL, "...", ...);`. */
td_status td_err_set(td_err *err, td_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends "prefix: " to the message already in err. Returns s. */
td_status td_err_prefix(td_err *err, td_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
