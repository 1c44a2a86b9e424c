/* admindex.c - per-snapshot index of parsed LimitRanges and ResourceQuotas
 * by namespace, so that a webhook review does not re-parse (and re-run the
 * quantity parser over) the same objects for every pod. */
#include "admission/admindex.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    td_config_attachment hdr;
    td_admindex_ns *nss; /* sorted by ns */
    size_t n;
} admindex;

static void admindex_destroy(td_config_attachment *a)
{
    admindex *ix = (admindex *)a;
    for (size_t i = 0; i < ix->n; i++) {
        td_limitranges_destroy(ix->nss[i].limitranges);
        td_quotas_destroy(ix->nss[i].quotas[0]);
        td_quotas_destroy(ix->nss[i].quotas[1]);
    }
    free(ix->nss);
    free(ix);
}

static int ns_cmp(const void *a, const void *b)
{
    return strcmp(((const td_admindex_ns *)a)->ns, ((const td_admindex_ns *)b)->ns);
}

/* Adds the namespace of each object to nss (duplicates removed later). */
static void collect(json_t *const *objs, size_t n, td_admindex_ns *nss, size_t *count)
{
    for (size_t i = 0; i < n; i++) {
        const char *ns = td_json_str(objs[i], "metadata.namespace");
        if (ns && *ns)
            nss[(*count)++].ns = ns;
    }
}

static td_config_attachment *admindex_build(const td_config *cfg)
{
    json_t *const *lrs, *const *quotas;
    size_t nlr = td_config_list(cfg, "LimitRange", NULL, &lrs);
    size_t nq = td_config_list(cfg, "ResourceQuota", NULL, &quotas);
    admindex *ix = calloc(1, sizeof *ix);
    if (!ix)
        return NULL;
    ix->hdr.destroy = admindex_destroy;
    if (nlr + nq > 0 && !(ix->nss = calloc(nlr + nq, sizeof *ix->nss))) {
        free(ix);
        return NULL;
    }
    size_t n = 0;
    collect(lrs, nlr, ix->nss, &n);
    collect(quotas, nq, ix->nss, &n);
    if (n)
        qsort(ix->nss, n, sizeof *ix->nss, ns_cmp);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || strcmp(ix->nss[u - 1].ns, ix->nss[i].ns) != 0)
            ix->nss[u++].ns = ix->nss[i].ns;
    ix->n = u;
    for (size_t i = 0; i < ix->n; i++) {
        td_admindex_ns *e = &ix->nss[i];
        td_err err;
        /* The same runs td_admit_pod would list for this namespace. */
        json_t *const *l, *const *q;
        size_t ln = td_config_list(cfg, "LimitRange", e->ns, &l);
        size_t qn = td_config_list(cfg, "ResourceQuota", e->ns, &q);
        e->ranges = l, e->nranges = ln;
        e->quota_objs = q, e->nquota_objs = qn;
        e->npods = td_config_list(cfg, "Pod", e->ns, &e->pods);
        e->limitranges_ok = td_limitranges_parse(l, ln, &e->limitranges, &err) == TD_OK;
        for (int fs = 0; fs < 2; fs++)
            e->quotas_ok[fs] = td_quotas_parse(q, qn, fs, &e->quotas[fs], &err) == TD_OK;
        for (size_t k = 0; k < qn; k++)
            e->quota_status_used |= td_json_path(q[k], "status.used") != NULL;
    }
    return &ix->hdr;
}

const td_admindex_ns *td_admindex_get(const td_config *cfg, const char *ns)
{
    admindex *ix = (admindex *)td_config_attachment_get(cfg, TD_CONFIG_ATTACH_ADMISSION,
                                                        admindex_build);
    if (!ix || !ns || !ix->n)
        return NULL;
    td_admindex_ns key = {.ns = ns};
    return bsearch(&key, ix->nss, ix->n, sizeof *ix->nss, ns_cmp);
}
