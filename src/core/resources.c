/* resources.c - a resource list (name -> quantity) kept sorted by name, with
 * the arithmetic of Kubernetes' quota helpers (Add, Subtract, Max,
 * LessThanOrEqual). Every call that fails leaves the list as it was. */
#include "tenantd/resources.h"

#include <stdlib.h>
#include <string.h>

void td_resources_init(td_resources *r)
{
    r->items = NULL;
    r->n = 0;
    r->cap = 0;
}

void td_resources_fini(td_resources *r)
{
    if (r == NULL)
        return;
    free(r->items);
    td_resources_init(r);
}

td_status td_resources_copy(td_resources *dst, const td_resources *src)
{
    td_resources_init(dst);
    if (src->n == 0)
        return TD_OK;
    dst->items = malloc(src->n * sizeof *dst->items);
    if (dst->items == NULL)
        return TD_ENOMEM;
    memcpy(dst->items, src->items, src->n * sizeof *dst->items);
    dst->n = dst->cap = src->n;
    return TD_OK;
}

/* Index of name in r, or where it would be inserted (*found says which). */
static size_t find(const td_resources *r, const char *name, int *found)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(r->items[mid].name, name);
        if (c == 0) {
            *found = 1;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = 0;
    return lo;
}

const td_quantity *td_resources_get(const td_resources *r, const char *name)
{
    int found;
    size_t i = find(r, name, &found);
    return found ? &r->items[i].q : NULL;
}

static int valid_name(const char *name)
{
    return name != NULL && name[0] != '\0' && strlen(name) < TD_RESOURCE_NAME_MAX;
}

/* Inserts name with q at index i (the slot find() returned). */
static td_status insert_at(td_resources *r, size_t i, const char *name, const td_quantity *q)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 8;
        td_resource *items = realloc(r->items, cap * sizeof *items);
        if (items == NULL)
            return TD_ENOMEM;
        r->items = items;
        r->cap = cap;
    }
    memmove(r->items + i + 1, r->items + i, (r->n - i) * sizeof *r->items);
    memset(&r->items[i], 0, sizeof r->items[i]);
    strcpy(r->items[i].name, name);
    r->items[i].q = *q;
    r->n++;
    return TD_OK;
}

td_status td_resources_set(td_resources *r, const char *name, const td_quantity *q)
{
    if (!valid_name(name))
        return TD_EINVAL;
    int found;
    size_t i = find(r, name, &found);
    if (found) {
        r->items[i].q = *q;
        return TD_OK;
    }
    return insert_at(r, i, name, q);
}

td_status td_resources_add_one(td_resources *r, const char *name, const td_quantity *q)
{
    if (!valid_name(name))
        return TD_EINVAL;
    int found;
    size_t i = find(r, name, &found);
    if (!found) {
        /* 0 + q takes q's format, as Quantity.Add on a zero does. */
        return insert_at(r, i, name, q);
    }
    return td_quantity_add(&r->items[i].q, q);
}

td_status td_resources_max_one(td_resources *r, const char *name, const td_quantity *q)
{
    if (!valid_name(name))
        return TD_EINVAL;
    int found;
    size_t i = find(r, name, &found);
    if (!found)
        return insert_at(r, i, name, q);
    /* quota.Max keeps the other side on a tie, and with it its format. */
    if (td_quantity_cmp(&r->items[i].q, q) <= 0)
        r->items[i].q = *q;
    return TD_OK;
}

/* r (+/-)= other into a copy, swapped in only if every name succeeded. */
static td_status combine(td_resources *r, const td_resources *other, int subtract)
{
    td_resources out;
    td_status st = td_resources_copy(&out, r);
    for (size_t i = 0; st == TD_OK && i < other->n; i++) {
        const td_resource *o = &other->items[i];
        if (subtract) {
            int found;
            size_t j = find(&out, o->name, &found);
            if (found) {
                st = td_quantity_sub(&out.items[j].q, &o->q);
            } else {
                /* quota.Subtract: a name only in other becomes -other. */
                td_quantity neg = o->q;
                td_quantity_neg(&neg);
                st = insert_at(&out, j, o->name, &neg);
            }
        } else {
            st = td_resources_add_one(&out, o->name, &o->q);
        }
    }
    if (st != TD_OK) {
        td_resources_fini(&out);
        return st;
    }
    td_resources_fini(r);
    *r = out;
    return TD_OK;
}

td_status td_resources_add(td_resources *r, const td_resources *other)
{
    return combine(r, other, 0);
}

td_status td_resources_sub(td_resources *r, const td_resources *other)
{
    return combine(r, other, 1);
}

bool td_resources_fits(const td_resources *need, const td_resources *limit)
{
    for (size_t i = 0; i < need->n; i++) {
        const td_quantity *l = td_resources_get(limit, need->items[i].name);
        if (l != NULL && td_quantity_cmp(&need->items[i].q, l) > 0)
            return false;
    }
    return true;
}
