/* validate.h - the one validation helper every kind's validator uses: a
 * context that names file, line, object and field in each message, the
 * fail function, TD_TRY, and the checks fields share (quantities, string
 * maps and lists, durations, numbers, integers in range, unknown fields). */
#ifndef TENANTD_VALIDATE_H
#define TENANTD_VALIDATE_H

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>

#include "core/manifest.h"
#include "core/quantity.h"
#include "tenantd/status.h"

/* Which line a message names when the node failing has none of its own
 * (td_manifest_line is 0 for mappings made by the loader, and for NULL). */
typedef enum {
    TD_VLINE_OBJECT = 0,   /* the object's line */
    TD_VLINE_AS_GIVEN,     /* node, or the object if node is NULL; no line if none */
    TD_VLINE_FIRST_MEMBER, /* a mapping's first member's (up to 4 deep), else the object's */
} td_vline;

/* A validation in progress: messages read "SRC:LINE: WHO: FIELD: MSG",
 * e.g. "platform.yaml:14: ResourceQuota team-a/q: spec.hard.cpu: \"8Gx\" is
 * not a quantity". src (may be NULL: no file name) and obj are borrowed;
 * err may be NULL. */
typedef struct td_vctx {
    const td_manifest *src;
    const json_t *obj;
    const char *kind; /* canonical kind name, or NULL before the envelope is read */
    char who[300];    /* "ResourceQuota team-a/compute" */
    td_err *err;
    td_vline line;
} td_vctx;

/* Sets v->err to "WHO: FIELD: MSG" at node's line (see td_vline) and
 * returns TD_EINVAL. node may be NULL. */
td_status td_vfail(td_vctx *v, const json_t *node, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* td_vfail with the message's arguments in ap. */
td_status td_vfailv(td_vctx *v, const json_t *node, const char *field, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/* Returns from the calling function with x's status unless it is TD_OK. */
#define TD_TRY(x)                                                                                  \
    do {                                                                                           \
        td_status td_try_st_ = (x);                                                                \
        if (td_try_st_ != TD_OK)                                                                   \
            return td_try_st_;                                                                     \
    } while (0)

/* DNS-1123 subdomain (object names): lowercase alphanumerics, '-' and '.',
 * alphanumeric at both ends, 1 to 253 characters. */
bool td_dns_subdomain(const char *s);
/* DNS-1123 label (namespace names): a subdomain of at most 63, no dots. */
bool td_dns_label(const char *s);
/* true if s (may be NULL: false) is one of list (NULL-terminated). */
bool td_in_list(const char *s, const char *const *list);

/* The checks below accept a NULL node (an absent optional field) unless
 * said otherwise, and fail through td_vfail naming field. */

/* m is a mapping of strings ("value of \"k\" must be a string (quote it)"). */
td_status td_v_string_map(td_vctx *v, const json_t *m, const char *field);
/* node is a quantity >= 0 written as a string or number ("\"8Gx\" is not a
 * quantity"); *out (may be NULL) receives it. node must not be NULL. */
td_status td_v_quantity(td_vctx *v, const json_t *node, const char *field, td_quantity *out);
/* m maps resource names to quantities; fields are named "field.NAME". */
td_status td_v_quantity_map(td_vctx *v, const json_t *m, const char *field);
/* a is a list of strings. */
td_status td_v_string_array(td_vctx *v, const json_t *a, const char *field);
/* Strict decoding of tenantd's own kinds: m is a mapping whose keys are all
 * in allowed (NULL-terminated): "unknown field \"k\" (known: a, b)". */
td_status td_v_fields(td_vctx *v, const json_t *m, const char *field, const char *const *allowed);
/* node is a duration string such as "1s" or "500ms". */
td_status td_v_duration(td_vctx *v, const json_t *node, const char *field);
/* node is a number >= min. */
td_status td_v_number(td_vctx *v, const json_t *node, const char *field, double min);
/* node is an integer in [min, max] (td_json_int's rules and message). */
td_status td_v_int_range(td_vctx *v, const json_t *node, const char *field, long long min,
                         long long max);
/* td_v_int_range over [min, INT32_MAX]: counts read into 32-bit fields (a
 * concurrency of 2^32 + 1 must not become 1). */
td_status td_v_int(td_vctx *v, const json_t *node, const char *field, long long min);
/* node is "enforce" or "shadow". */
bool td_v_is_mode(const json_t *node);
/* An enforcement: a mode ("enforce" | "shadow") for everything, or a
 * mapping of the names in allowed (NULL-terminated) to modes. A bad mode
 * in the mapping: "FIELD.NAME: must be enforce or shadow"; anything else:
 * "must be enforce or shadow, or " followed by mapping (which says what
 * the mapping holds). */
td_status td_v_enforcement(td_vctx *v, const json_t *e, const char *field,
                           const char *const *allowed, const char *mapping);

#endif
