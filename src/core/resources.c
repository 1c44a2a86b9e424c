/* resources.c - a resource list (name -> quantity) kept sorted by name, with
 * the arithmetic of Kubernetes' quota helpers (Add, Subtract, Max,
 * LessThanOrEqual). Every call that fails leaves the list as it was. */
#include "core/resources.h"

#include <stdlib.h>
#include <string.h>

/* Entries are a name pointer and a quantity (64 bytes, not a 254-byte name
 * array each), and one allocation holds a list's items (cap of them)
 * followed by its name pool (names_cap bytes): a Pod's lists fit malloc's
 * small-size caches and copy in a few cache lines. */

void td_resources_init(td_resources *r)
{
    r->items = NULL;
    r->n = 0;
    r->cap = 0;
    r->names = NULL;
    r->names_len = 0;
    r->names_cap = 0;
}

void td_resources_fini(td_resources *r)
{
    if (r == NULL)
        return;
    free(r->items); /* the names too */
    td_resources_init(r);
}

/* Points dst's items, copied from src's, at the same names in dst's pool
 * (a copy of src's pool). */
static void repoint(td_resource *items, size_t n, const char *src_pool, char *dst_pool)
{
    for (size_t i = 0; i < n; i++)
        items[i].name = dst_pool + (items[i].name - src_pool);
}

/* A block for cap items and names_cap bytes of names: items at its start
 * (malloc's alignment), *names after them. NULL when out of memory. */
static td_resource *block_alloc(size_t cap, size_t names_cap, char **names)
{
    char *block = malloc(cap * sizeof(td_resource) + names_cap);
    *names = block ? block + cap * sizeof(td_resource) : NULL;
    return (td_resource *)(void *)block;
}

/* Moves r's items and names into a new block of cap items and names_cap
 * bytes of names. On TD_ENOMEM r is unchanged. */
static td_status regrow(td_resources *r, size_t cap, size_t names_cap)
{
    char *names;
    td_resource *items = block_alloc(cap, names_cap, &names);
    if (items == NULL)
        return TD_ENOMEM;
    if (r->n > 0) {
        memcpy(items, r->items, r->n * sizeof *items);
        memcpy(names, r->names, r->names_len);
        repoint(items, r->n, r->names, names);
    }
    free(r->items);
    r->items = items;
    r->cap = cap;
    r->names = names;
    r->names_cap = names_cap;
    return TD_OK;
}

td_status td_resources_copy(td_resources *dst, const td_resources *src)
{
    td_resources_init(dst);
    if (src->n == 0)
        return TD_OK;
    char *names;
    td_resource *items = block_alloc(src->n, src->names_len, &names);
    if (items == NULL)
        return TD_ENOMEM;
    memcpy(items, src->items, src->n * sizeof *items);
    memcpy(names, src->names, src->names_len);
    repoint(items, src->n, src->names, names);
    dst->items = items;
    dst->n = dst->cap = src->n;
    dst->names = names;
    dst->names_len = dst->names_cap = src->names_len;
    return TD_OK;
}

/* strcmp's order. Most probes of a binary search over resource names
 * differ in the first byte ("cpu" / "memory" / "pods"), decided here
 * without a call; names that share a first byte ("requests.cpu" /
 * "requests.memory") share long prefixes, where strcmp's wide compare wins. */
static inline int name_cmp(const char *a, const char *b)
{
    if (*a != *b)
        return (int)(unsigned char)*a - (int)(unsigned char)*b;
    return *a == '\0' ? 0 : strcmp(a + 1, b + 1);
}

/* Index of name in r, or where it would be inserted (*found says which). */
static size_t find(const td_resources *r, const char *name, int *found)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = name_cmp(r->items[mid].name, name);
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

/* The length of name if it is a valid resource name, else 0. */
static size_t valid_name(const char *name)
{
    if (name == NULL)
        return 0;
    size_t len = strnlen(name, TD_RESOURCE_NAME_MAX);
    return len < TD_RESOURCE_NAME_MAX ? len : 0;
}

/* Makes room for one more item and a name of len bytes. On TD_ENOMEM the
 * list is unchanged. */
static td_status reserve_one(td_resources *r, size_t len)
{
    int more_items = r->n == r->cap, more_names = r->names_cap - r->names_len < len + 1;
    if (!more_items && !more_names)
        return TD_OK;
    size_t cap = r->cap, names_cap = r->names_cap;
    if (more_items)
        cap = cap ? cap * 2 : 8;
    if (more_names) {
        names_cap = names_cap ? names_cap * 2 : 128;
        while (names_cap - r->names_len < len + 1)
            names_cap *= 2;
    }
    return regrow(r, cap, names_cap);
}

/* Inserts name (len bytes) with q at index i (the slot find() returned). */
static td_status insert_at(td_resources *r, size_t i, const char *name, size_t len,
                           const td_quantity *q)
{
    td_status st = reserve_one(r, len);
    if (st != TD_OK)
        return st;
    char *copy = r->names + r->names_len;
    memcpy(copy, name, len + 1);
    r->names_len += len + 1;
    memmove(r->items + i + 1, r->items + i, (r->n - i) * sizeof *r->items);
    r->items[i].name = copy;
    r->items[i].q = *q;
    r->n++;
    return TD_OK;
}

td_status td_resources_set(td_resources *r, const char *name, const td_quantity *q)
{
    size_t len = valid_name(name);
    if (len == 0)
        return TD_EINVAL;
    int found;
    size_t i = find(r, name, &found);
    if (found) {
        r->items[i].q = *q;
        return TD_OK;
    }
    return insert_at(r, i, name, len, q);
}

td_status td_resources_add_one(td_resources *r, const char *name, const td_quantity *q)
{
    size_t len = valid_name(name);
    if (len == 0)
        return TD_EINVAL;
    int found;
    size_t i = find(r, name, &found);
    if (!found) {
        /* 0 + q takes q's format, as Quantity.Add on a zero does. */
        return insert_at(r, i, name, len, q);
    }
    return td_quantity_add(&r->items[i].q, q);
}

td_status td_resources_max_one(td_resources *r, const char *name, const td_quantity *q)
{
    size_t len = valid_name(name);
    if (len == 0)
        return TD_EINVAL;
    int found;
    size_t i = find(r, name, &found);
    if (!found)
        return insert_at(r, i, name, len, q);
    /* quota.Max keeps the other side on a tie, and with it its format. */
    if (td_quantity_cmp(&r->items[i].q, q) <= 0)
        r->items[i].q = *q;
    return TD_OK;
}

/* r (+/-)= other: both lists are sorted by name, so one merge pass builds
 * the result in a new array, swapped in only if every name succeeded. A
 * name in both is added or subtracted (Quantity.Add/Sub keep r's format);
 * a name only in other comes in as it is for add (0 + q takes q's format)
 * and negated for subtract (quota.Subtract). */
static td_status combine(td_resources *r, const td_resources *other, int subtract)
{
    if (other->n == 0)
        return TD_OK;
    size_t cap = r->n + other->n, names_cap = r->names_len + other->names_len;
    char *names;
    td_resource *items = block_alloc(cap, names_cap, &names);
    if (items == NULL)
        return TD_ENOMEM;
    /* r's names keep their places in a copy of r's pool; names only in
     * other are appended after them. */
    if (r->names_len > 0)
        memcpy(names, r->names, r->names_len);
    size_t i = 0, j = 0, n = 0, names_len = r->names_len;
    td_status st = TD_OK;
    while (st == TD_OK && (i < r->n || j < other->n)) {
        int c = i == r->n       ? 1
                : j == other->n ? -1
                                : name_cmp(r->items[i].name, other->items[j].name);
        td_resource *out = &items[n++];
        if (c <= 0) {
            const td_resource *in = &r->items[i++];
            out->name = names + (in->name - r->names);
            out->q = in->q;
            if (c == 0) {
                const td_quantity *o = &other->items[j++].q;
                st = subtract ? td_quantity_sub(&out->q, o) : td_quantity_add(&out->q, o);
            }
        } else {
            const td_resource *in = &other->items[j++];
            size_t len = strlen(in->name) + 1;
            memcpy(names + names_len, in->name, len);
            out->name = names + names_len;
            names_len += len;
            out->q = in->q;
            if (subtract)
                td_quantity_neg(&out->q);
        }
    }
    if (st != TD_OK) {
        free(items);
        return st;
    }
    free(r->items);
    r->items = items;
    r->n = n;
    r->cap = cap;
    r->names = names;
    r->names_len = names_len;
    r->names_cap = names_cap;
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
