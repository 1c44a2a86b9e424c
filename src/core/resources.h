/* resources.h - a resource list (name -> quantity), like Kubernetes'
 * v1.ResourceList, with the arithmetic quota and queueing need. */
#ifndef TENANTD_RESOURCES_H
#define TENANTD_RESOURCES_H

#include <stdbool.h>
#include <stddef.h>

#include "core/quantity.h"
#include "tenantd/status.h"

/* Longest name plus its NUL: names are 1 to TD_RESOURCE_NAME_MAX - 1 bytes. */
#define TD_RESOURCE_NAME_MAX 254

typedef struct {
    /* NUL-terminated; owned by the list (in its name pool) and valid until
     * the list changes, like the quantity beside it. */
    const char *name;
    td_quantity q;
} td_resource;

/* Kept sorted by name, so printing and comparing are deterministic. Read
 * items[0..n); every other field is private to resources.c. A zeroed list
 * is an empty one, as td_resources_init makes. */
typedef struct {
    td_resource *items;
    size_t n;
    size_t cap;
    char *names; /* the items' names back to back, each with its NUL */
    size_t names_len, names_cap;
} td_resources;

void td_resources_init(td_resources *r);
void td_resources_fini(td_resources *r);

/* Deep copy of src into dst (dst initialised by this call). */
td_status td_resources_copy(td_resources *dst, const td_resources *src);

/* The quantity of name, or NULL. Borrowed: valid until r changes. */
const td_quantity *td_resources_get(const td_resources *r, const char *name);

/* Sets name to q (copied), replacing any value. TD_EINVAL for an empty or
 * over-long name. */
td_status td_resources_set(td_resources *r, const char *name, const td_quantity *q);

/* r[name] += q (missing names start at zero). */
td_status td_resources_add_one(td_resources *r, const char *name, const td_quantity *q);

/* r += other and r -= other, name by name. */
td_status td_resources_add(td_resources *r, const td_resources *other);
td_status td_resources_sub(td_resources *r, const td_resources *other);

/* r[name] = max(r[name], q) (missing names start as q). */
td_status td_resources_max_one(td_resources *r, const char *name, const td_quantity *q);

/* true if every name in need is <= the same name in limit (names absent in
 * limit are not limited). */
bool td_resources_fits(const td_resources *need, const td_resources *limit);

#endif
