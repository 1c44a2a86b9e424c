/* pss.c - Pod Security Standards checks for a Pod, at "latest" or a pinned
 * policy version. A port of k8s.io/pod-security-admission/policy (policy
 * version 1.37): each check_* below mirrors one check_*.go with every
 * version of it (x->minor picks the variant, as the Go check's Versions
 * list does), keeps its ForbiddenReason and ForbiddenDetail wording, and
 * runs in the order the Go registry runs it (baseline check IDs sorted,
 * then restricted check IDs sorted, with the baseline checks a restricted
 * check overrides at that version left out). */
#include "admission/pss_internal.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- lists */

/* A growable list of strings. The list does not own them: they are borrowed
 * from the pod or owned by the run's pool. */
typedef struct {
    const char **v;
    size_t n, cap;
} strv;

static int sv_push(strv *s, const char *x)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        const char **v;
        if (cap > SIZE_MAX / sizeof *v)
            return -1;
        v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = x;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Makes s what Go's sets.String.List() returns: sorted bytewise, no repeats. */
static void sv_sort_unique(strv *s)
{
    size_t i, j = 0;
    if (s->n < 2)
        return;
    qsort(s->v, s->n, sizeof *s->v, cmp_str);
    for (i = 1; i < s->n; i++)
        if (strcmp(s->v[i], s->v[j]) != 0)
            s->v[++j] = s->v[i];
    s->n = j + 1;
}

static void sv_fini(strv *s)
{
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

/* -------------------------------------------------------------- message */

/* The denial message, cut (on a UTF-8 boundary) when it outgrows p. */
typedef struct {
    char *p;
    size_t cap, len;
    int full;
    int nreasons;
} msgbuf;

static void mb_putn(msgbuf *m, const char *s, size_t n)
{
    size_t room = m->cap - 1 - m->len;
    if (m->full)
        return;
    if (n > room) {
        n = room;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
        m->full = 1;
    }
    memcpy(m->p + m->len, s, n);
    m->len += n;
    m->p[m->len] = '\0';
}

static void mb_put(msgbuf *m, const char *s)
{
    mb_putn(m, s, strlen(s));
}

/* Go's joinQuote: "a", "b" (no escaping, as in helpers.go). */
static void mb_join_quote(msgbuf *m, const strv *v)
{
    size_t i;
    for (i = 0; i < v->n; i++) {
        mb_put(m, i ? ", \"" : "\"");
        mb_put(m, v->v[i]);
        mb_put(m, "\"");
    }
}

static void mb_join(msgbuf *m, const strv *v, const char *sep)
{
    size_t i;
    for (i = 0; i < v->n; i++) {
        if (i)
            mb_put(m, sep);
        mb_put(m, v->v[i]);
    }
}

static const char *plural(size_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

/* Starts one failing check: "reason", after ", " if another came before.
 * The caller then writes " (detail)" when the detail is not empty, as
 * AggregateCheckResult.ForbiddenDetail does. */
static void mb_reason(msgbuf *m, const char *reason)
{
    if (m->nreasons++)
        mb_put(m, ", ");
    mb_put(m, reason);
}

/* `container "a"` / `containers "a", "b"` */
static void mb_containers(msgbuf *m, const strv *names)
{
    mb_put(m, plural(names->n, "container", "containers"));
    mb_put(m, " ");
    mb_join_quote(m, names);
}

/* The "pod and containers "a", "b"" subject several checks share:
 * badSetters joined with " and ". */
static void mb_setters(msgbuf *m, int pod, const strv *containers)
{
    if (pod)
        mb_put(m, "pod");
    if (containers->n) {
        if (pod)
            mb_put(m, " and ");
        mb_containers(m, containers);
    }
}

/* ---------------------------------------------------------- JSON access */

/* After validate() has passed, these only see the types a v1 Pod allows;
 * absent and null both read as Go's zero value. */
static const json_t *jobj(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_object(v) ? v : NULL;
}

static const json_t *jarr(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_array(v) ? v : NULL;
}

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static const char *jstr0(const json_t *o, const char *k)
{
    const char *s = jstr(o, k);
    return s ? s : "";
}

static int jtrue(const json_t *o, const char *k)
{
    return json_is_true(json_object_get(o, k));
}

static int jfalse(const json_t *o, const char *k)
{
    return json_is_false(json_object_get(o, k));
}

static int jpresent(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return v && !json_is_null(v);
}

/* --------------------------------------------------------------- schema */

typedef enum { T_BOOL, T_STR, T_INT64, T_INT32, T_OBJ, T_ARR_OBJ, T_ARR_STR, T_MAP_STR } ftype;

typedef struct field {
    const char *key;
    ftype type;
    const struct field *sub; /* T_OBJ, T_ARR_OBJ: fields inside; NULL: any */
} field;

/* Only the fields some check reads: a type error elsewhere is not ours. */
static const field f_profile[] = {{"type", T_STR, NULL}, {NULL, T_BOOL, NULL}};
static const field f_selinux[] = {
    {"type", T_STR, NULL}, {"user", T_STR, NULL}, {"role", T_STR, NULL}, {NULL, T_BOOL, NULL}};
static const field f_winopts[] = {{"hostProcess", T_BOOL, NULL}, {NULL, T_BOOL, NULL}};
static const field f_caps[] = {
    {"add", T_ARR_STR, NULL}, {"drop", T_ARR_STR, NULL}, {NULL, T_BOOL, NULL}};
static const field f_csc[] = {{"privileged", T_BOOL, NULL},
                              {"allowPrivilegeEscalation", T_BOOL, NULL},
                              {"runAsNonRoot", T_BOOL, NULL},
                              {"runAsUser", T_INT64, NULL},
                              {"procMount", T_STR, NULL},
                              {"capabilities", T_OBJ, f_caps},
                              {"seccompProfile", T_OBJ, f_profile},
                              {"appArmorProfile", T_OBJ, f_profile},
                              {"seLinuxOptions", T_OBJ, f_selinux},
                              {"windowsOptions", T_OBJ, f_winopts},
                              {NULL, T_BOOL, NULL}};
static const field f_port[] = {{"hostPort", T_INT32, NULL}, {NULL, T_BOOL, NULL}};
static const field f_host[] = {{"host", T_STR, NULL}, {NULL, T_BOOL, NULL}};
static const field f_handler[] = {
    {"httpGet", T_OBJ, f_host}, {"tcpSocket", T_OBJ, f_host}, {NULL, T_BOOL, NULL}};
static const field f_lifecycle[] = {
    {"postStart", T_OBJ, f_handler}, {"preStop", T_OBJ, f_handler}, {NULL, T_BOOL, NULL}};
static const field f_container[] = {{"name", T_STR, NULL},
                                    {"securityContext", T_OBJ, f_csc},
                                    {"ports", T_ARR_OBJ, f_port},
                                    {"livenessProbe", T_OBJ, f_handler},
                                    {"readinessProbe", T_OBJ, f_handler},
                                    {"startupProbe", T_OBJ, f_handler},
                                    {"lifecycle", T_OBJ, f_lifecycle},
                                    {NULL, T_BOOL, NULL}};
static const field f_sysctl[] = {{"name", T_STR, NULL}, {NULL, T_BOOL, NULL}};
static const field f_psc[] = {
    {"runAsNonRoot", T_BOOL, NULL},       {"runAsUser", T_INT64, NULL},
    {"seccompProfile", T_OBJ, f_profile}, {"appArmorProfile", T_OBJ, f_profile},
    {"seLinuxOptions", T_OBJ, f_selinux}, {"windowsOptions", T_OBJ, f_winopts},
    {"sysctls", T_ARR_OBJ, f_sysctl},     {NULL, T_BOOL, NULL}};

/* Volume sources as check_restrictedVolumes.go lists them: the allowed ones,
 * then the restricted ones in the order its switch tries them (the first one
 * present names the volume's type). */
static const char *const allowed_volume_sources[] = {
    "configMap", "csi",   "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim",
    "projected", "secret"};
static const char *const restricted_volume_sources[] = {"hostPath",
                                                        "gcePersistentDisk",
                                                        "awsElasticBlockStore",
                                                        "gitRepo",
                                                        "nfs",
                                                        "iscsi",
                                                        "glusterfs",
                                                        "rbd",
                                                        "flexVolume",
                                                        "cinder",
                                                        "cephfs",
                                                        "flocker",
                                                        "fc",
                                                        "azureFile",
                                                        "vsphereVolume",
                                                        "quobyte",
                                                        "azureDisk",
                                                        "photonPersistentDisk",
                                                        "portworxVolume",
                                                        "scaleIO",
                                                        "storageos"};
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* check_capabilities_baseline.go: what securityContext.capabilities.add
 * may hold at baseline. */
static const char *const baseline_capabilities[] = {
    "AUDIT_WRITE",      "CHOWN",   "DAC_OVERRIDE", "FOWNER",  "FSETID", "KILL",      "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID",       "SETPCAP", "SETUID", "SYS_CHROOT"};

/* check_sysctls.go, version 1.37: the safe sysctls. */
static const char *const allowed_sysctls[] = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports",   /* 1.27 */
    "net.ipv4.tcp_keepalive_time",        /* 1.29 */
    "net.ipv4.tcp_fin_timeout",           /* 1.29 */
    "net.ipv4.tcp_keepalive_intvl",       /* 1.29 */
    "net.ipv4.tcp_keepalive_probes",      /* 1.29 */
    "net.ipv4.tcp_rmem",                  /* 1.32 */
    "net.ipv4.tcp_wmem",                  /* 1.32 */
    "net.ipv4.tcp_slow_start_after_idle", /* 1.37 */
    "net.ipv4.tcp_notsent_lowat",         /* 1.37 */
};

static const field f_volume[] = {{"name", T_STR, NULL},
                                 {"configMap", T_OBJ, NULL},
                                 {"csi", T_OBJ, NULL},
                                 {"downwardAPI", T_OBJ, NULL},
                                 {"emptyDir", T_OBJ, NULL},
                                 {"ephemeral", T_OBJ, NULL},
                                 {"image", T_OBJ, NULL},
                                 {"persistentVolumeClaim", T_OBJ, NULL},
                                 {"projected", T_OBJ, NULL},
                                 {"secret", T_OBJ, NULL},
                                 {"hostPath", T_OBJ, NULL},
                                 {"gcePersistentDisk", T_OBJ, NULL},
                                 {"awsElasticBlockStore", T_OBJ, NULL},
                                 {"gitRepo", T_OBJ, NULL},
                                 {"nfs", T_OBJ, NULL},
                                 {"iscsi", T_OBJ, NULL},
                                 {"glusterfs", T_OBJ, NULL},
                                 {"rbd", T_OBJ, NULL},
                                 {"flexVolume", T_OBJ, NULL},
                                 {"cinder", T_OBJ, NULL},
                                 {"cephfs", T_OBJ, NULL},
                                 {"flocker", T_OBJ, NULL},
                                 {"fc", T_OBJ, NULL},
                                 {"azureFile", T_OBJ, NULL},
                                 {"vsphereVolume", T_OBJ, NULL},
                                 {"quobyte", T_OBJ, NULL},
                                 {"azureDisk", T_OBJ, NULL},
                                 {"photonPersistentDisk", T_OBJ, NULL},
                                 {"portworxVolume", T_OBJ, NULL},
                                 {"scaleIO", T_OBJ, NULL},
                                 {"storageos", T_OBJ, NULL},
                                 {NULL, T_BOOL, NULL}};
static const field f_os[] = {{"name", T_STR, NULL}, {NULL, T_BOOL, NULL}};
static const field f_spec[] = {{"hostNetwork", T_BOOL, NULL},
                               {"hostPID", T_BOOL, NULL},
                               {"hostIPC", T_BOOL, NULL},
                               {"hostUsers", T_BOOL, NULL},
                               {"os", T_OBJ, f_os},
                               {"securityContext", T_OBJ, f_psc},
                               {"volumes", T_ARR_OBJ, f_volume},
                               {"initContainers", T_ARR_OBJ, f_container},
                               {"containers", T_ARR_OBJ, f_container},
                               {"ephemeralContainers", T_ARR_OBJ, f_container},
                               {NULL, T_BOOL, NULL}};
static const field f_meta[] = {{"annotations", T_MAP_STR, NULL}, {NULL, T_BOOL, NULL}};
static const field f_pod[] = {
    {"metadata", T_OBJ, f_meta}, {"spec", T_OBJ, f_spec}, {NULL, T_BOOL, NULL}};

/* The JSON path being validated, e.g. spec.containers[2].ports[0]. */
typedef struct {
    char p[256];
    size_t len;
} jpath;

/* Appends ".key" (or "key" at the root), "[key]" when map is set, or "[idx]"
 * when key is NULL; returns the length to restore with jp_pop. A path too
 * long for p is cut. */
static void jp_put(jpath *jp, const char *s, size_t n)
{
    size_t room = sizeof jp->p - 1 - jp->len;
    if (n > room)
        n = room;
    memcpy(jp->p + jp->len, s, n);
    jp->len += n;
    jp->p[jp->len] = '\0';
}

/* Without snprintf: it ran for every field of every pod checked. */
static size_t jp_push(jpath *jp, const char *key, int map, size_t idx)
{
    size_t old = jp->len;
    if (!key) {
        char d[24];
        size_t i = sizeof d;
        do
            d[--i] = (char)('0' + idx % 10);
        while ((idx /= 10) != 0);
        jp_put(jp, "[", 1);
        jp_put(jp, d + i, sizeof d - i);
        jp_put(jp, "]", 1);
    } else if (map) {
        jp_put(jp, "[", 1);
        jp_put(jp, key, strlen(key));
        jp_put(jp, "]", 1);
    } else {
        if (old)
            jp_put(jp, ".", 1);
        jp_put(jp, key, strlen(key));
    }
    return old;
}

static void jp_pop(jpath *jp, size_t old)
{
    jp->len = old;
    jp->p[old] = '\0';
}

static td_status bad_type(const jpath *jp, const char *want, td_err *err)
{
    return td_err_set(err, TD_EINVAL, "%s: expected %s", jp->p, want);
}

static td_status validate_fields(const json_t *obj, const field *fs, jpath *jp, td_err *err);

/* Checks that v (present, not null) has type t. */
static td_status validate_value(const json_t *v, ftype t, const field *sub, jpath *jp, td_err *err)
{
    size_t i, old;
    td_status st;
    const char *key;
    const json_t *e;

    switch (t) {
    case T_BOOL:
        return json_is_boolean(v) ? TD_OK : bad_type(jp, "a boolean", err);
    case T_STR:
        return json_is_string(v) ? TD_OK : bad_type(jp, "a string", err);
    case T_INT64:
        return json_is_integer(v) ? TD_OK : bad_type(jp, "an integer", err);
    case T_INT32:
        if (!json_is_integer(v) || json_integer_value(v) < INT32_MIN ||
            json_integer_value(v) > INT32_MAX)
            return bad_type(jp, "a 32-bit integer", err);
        return TD_OK;
    case T_OBJ:
        if (!json_is_object(v))
            return bad_type(jp, "an object", err);
        return sub ? validate_fields(v, sub, jp, err) : TD_OK;
    case T_ARR_OBJ:
    case T_ARR_STR:
        if (!json_is_array(v))
            return bad_type(jp, "an array", err);
        json_array_foreach(v, i, e)
        {
            if (json_is_null(e))
                continue; /* Go decodes a null element as the zero value */
            old = jp_push(jp, NULL, 0, i);
            st = validate_value(e, t == T_ARR_OBJ ? T_OBJ : T_STR, sub, jp, err);
            jp_pop(jp, old);
            if (st != TD_OK)
                return st;
        }
        return TD_OK;
    case T_MAP_STR:
        if (!json_is_object(v))
            return bad_type(jp, "an object", err);
        json_object_foreach((json_t *)v, key, e)
        {
            if (json_is_null(e) || json_is_string(e))
                continue;
            old = jp_push(jp, key, 1, 0);
            st = bad_type(jp, "a string", err);
            jp_pop(jp, old);
            return st;
        }
        return TD_OK;
    }
    return TD_OK;
}

static td_status validate_fields(const json_t *obj, const field *fs, jpath *jp, td_err *err)
{
    for (; fs->key; fs++) {
        const json_t *v = json_object_get(obj, fs->key);
        size_t old;
        td_status st;
        if (!v || json_is_null(v))
            continue;
        old = jp_push(jp, fs->key, 0, 0);
        st = validate_value(v, fs->type, fs->sub, jp, err);
        jp_pop(jp, old);
        if (st != TD_OK)
            return st;
    }
    return TD_OK;
}

/* ------------------------------------------------------------- context */

typedef struct {
    const json_t *meta;     /* metadata, or NULL */
    const json_t *spec;     /* spec, or NULL */
    const json_t *psc;      /* spec.securityContext, or NULL */
    const json_t *lists[3]; /* initContainers, containers, ephemeralContainers */
    size_t nctr;
    int windows; /* spec.os.name == "windows" */
    int userns;  /* spec.hostUsers == false */
    long minor;  /* policy version, 0..TD_PSS_MAX_MINOR (latest: the max) */
    strv pool;   /* strings this run allocated */
} pss_ctx;

/* relaxPolicyForUserNamespacePod, which the checks apply from v1.35 */
static int userns_relaxed(const pss_ctx *x)
{
    return x->userns && x->minor >= 35;
}

/* The 1.25 versions of allowPrivilegeEscalation, capabilities_restricted
 * and seccompProfile_restricted exempt a pod with spec.os.name=windows. */
static int windows_exempt(const pss_ctx *x)
{
    return x->windows && x->minor >= 25;
}

/* The i-th container in visitContainers order: init, regular, ephemeral.
 * May be NULL (a JSON null element), which reads as an empty container. */
static const json_t *ctr(const pss_ctx *x, size_t i)
{
    size_t k;
    for (k = 0; k < 3; k++) {
        size_t n = json_array_size(x->lists[k]);
        if (i < n)
            return json_array_get(x->lists[k], i);
        i -= n;
    }
    return NULL;
}

static const char *ctr_name(const json_t *c)
{
    return jstr0(c, "name");
}

static const json_t *ctr_sc(const json_t *c)
{
    return jobj(c, "securityContext");
}

static char *pool_add(pss_ctx *x, char *s)
{
    if (!s)
        return NULL;
    if (sv_push(&x->pool, s) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

/* ------------------------------------------------------- baseline checks */

/* Each check returns TD_OK when the pod passes it, TD_EFORBIDDEN after
 * writing "reason (detail)" to m, or TD_ENOMEM. */
typedef td_status (*check_fn)(pss_ctx *x, msgbuf *m);

/* Go's strconv.Quote for one value, appended to out (room for 4*n+3). */
static size_t go_quote(char *out, const char *s, size_t n);

/* fmt.Sprintf("%s=%q", key, v) in the run's pool (v a JSON string, or
 * anything else read as ""); NULL out of memory. */
static const char *key_eq_quoted(pss_ctx *x, const char *key, const json_t *v)
{
    const char *val = json_is_string(v) ? json_string_value(v) : "";
    size_t klen = strlen(key), vlen = json_is_string(v) ? json_string_length(v) : 0;
    char *s;
    if (vlen > (SIZE_MAX - klen - 4) / 4)
        return NULL;
    s = pool_add(x, malloc(klen + 4 * vlen + 4));
    if (!s)
        return NULL;
    memcpy(s, key, klen);
    s[klen] = '=';
    s[klen + 1 + go_quote(s + klen + 1, val, vlen)] = '\0';
    return s;
}

static int apparmor_type_allowed(const char *t)
{
    return strcmp(t, "RuntimeDefault") == 0 || strcmp(t, "Localhost") == 0;
}

static int apparmor_annotation_allowed(const char *v)
{
    return v[0] == '\0' || strcmp(v, "runtime/default") == 0 || strncmp(v, "localhost/", 10) == 0;
}

/* The shape several checks share: the containers whose securityContext
 * bad() holds for, and pod (the pod-level securityContext's verdict, 0
 * where the check has none). If any: "REASON (SETTERS MUST)" into m and
 * TD_EFORBIDDEN; else TD_OK. */
static td_status setters_check(pss_ctx *x, msgbuf *m, int pod, int (*bad)(const json_t *sc),
                               const char *reason, const char *must)
{
    strv ctrs = {0};
    for (size_t i = 0; i < x->nctr; i++) {
        const json_t *c = ctr(x, i);
        if (bad(ctr_sc(c)) && sv_push(&ctrs, ctr_name(c))) {
            sv_fini(&ctrs);
            return TD_ENOMEM;
        }
    }
    if (!pod && !ctrs.n)
        return TD_OK;
    mb_reason(m, reason);
    mb_put(m, " (");
    mb_setters(m, pod, &ctrs);
    mb_put(m, " ");
    mb_put(m, must);
    mb_put(m, ")");
    sv_fini(&ctrs);
    return TD_EFORBIDDEN;
}

/* check_appArmorProfile.go */
static td_status check_apparmor(pss_ctx *x, msgbuf *m)
{
    static const char prefix[] = "container.apparmor.security.beta.kubernetes.io/";
    strv ctrs = {0}, values = {0}, annos = {0};
    const json_t *prof, *annotations, *v;
    const char *key;
    int pod = 0;
    size_t i;
    td_status st = TD_ENOMEM;

    if ((prof = jobj(x->psc, "appArmorProfile")) && !apparmor_type_allowed(jstr0(prof, "type"))) {
        pod = 1;
        if (sv_push(&values, jstr0(prof, "type")))
            goto out;
    }
    for (i = 0; i < x->nctr; i++) {
        const json_t *c = ctr(x, i);
        prof = jobj(ctr_sc(c), "appArmorProfile");
        if (prof && !apparmor_type_allowed(jstr0(prof, "type")))
            if (sv_push(&ctrs, ctr_name(c)) || sv_push(&values, jstr0(prof, "type")))
                goto out;
    }
    annotations = jobj(x->meta, "annotations");
    json_object_foreach((json_t *)annotations, key, v)
    {
        const char *val = json_is_string(v) ? json_string_value(v) : "";
        const char *s;
        if (strncmp(key, prefix, sizeof prefix - 1) != 0 || apparmor_annotation_allowed(val))
            continue;
        if (!(s = key_eq_quoted(x, key, v)) || sv_push(&annos, s))
            goto out;
    }
    st = TD_OK;
    if (!pod && !ctrs.n && !annos.n)
        goto out;

    sv_sort_unique(&values);
    if (annos.n > 1)
        qsort(annos.v, annos.n, sizeof *annos.v, cmp_str);
    mb_reason(
        m, plural(values.n + annos.n, "forbidden AppArmor profile", "forbidden AppArmor profiles"));
    mb_put(m, " (");
    mb_setters(m, pod, &ctrs);
    if (annos.n) {
        if (pod || ctrs.n)
            mb_put(m, " and ");
        mb_put(m, plural(annos.n, "annotation", "annotations"));
    }
    mb_put(m, " must not set AppArmor profile type to ");
    mb_join_quote(m, &values);
    if (values.n && annos.n)
        mb_put(m, ", ");
    mb_join_quote(m, &annos);
    mb_put(m, ")");
    st = TD_EFORBIDDEN;
out:
    sv_fini(&ctrs);
    sv_fini(&values);
    sv_fini(&annos);
    return st;
}

/* check_capabilities_baseline.go */
static td_status check_capabilities_baseline(pss_ctx *x, msgbuf *m)
{
    strv ctrs = {0}, caps = {0};
    size_t i, j, k;
    td_status st = TD_ENOMEM;

    for (i = 0; i < x->nctr; i++) {
        const json_t *c = ctr(x, i);
        const json_t *add = jarr(jobj(ctr_sc(c), "capabilities"), "add");
        int bad = 0;
        for (j = 0; j < json_array_size(add); j++) {
            const char *cap = json_string_value(json_array_get(add, j));
            if (!cap)
                cap = "";
            for (k = 0; k < NELEM(baseline_capabilities); k++)
                if (strcmp(cap, baseline_capabilities[k]) == 0)
                    break;
            if (k == NELEM(baseline_capabilities)) {
                bad = 1;
                if (sv_push(&caps, cap))
                    goto out;
            }
        }
        if (bad && sv_push(&ctrs, ctr_name(c)))
            goto out;
    }
    st = TD_OK;
    if (!ctrs.n)
        goto out;
    sv_sort_unique(&caps);
    mb_reason(m, "non-default capabilities");
    mb_put(m, " (");
    mb_containers(m, &ctrs);
    mb_put(m, " must not include ");
    mb_join_quote(m, &caps);
    mb_put(m, " in securityContext.capabilities.add)");
    st = TD_EFORBIDDEN;
out:
    sv_fini(&ctrs);
    sv_fini(&caps);
    return st;
}

/* check_hostNamespaces.go */
static td_status check_host_namespaces(pss_ctx *x, msgbuf *m)
{
    static const char *const ns[] = {"hostNetwork", "hostPID", "hostIPC"};
    size_t i, n = 0;

    for (i = 0; i < NELEM(ns); i++)
        n += jtrue(x->spec, ns[i]) ? 1 : 0;
    if (!n)
        return TD_OK;
    mb_reason(m, "host namespaces");
    mb_put(m, " (");
    for (i = 0, n = 0; i < NELEM(ns); i++) {
        if (!jtrue(x->spec, ns[i]))
            continue;
        if (n++)
            mb_put(m, ", ");
        mb_put(m, ns[i]);
        mb_put(m, "=true");
    }
    mb_put(m, ")");
    return TD_EFORBIDDEN;
}

/* check_hostPathVolumes.go */
static td_status check_hostpath_volumes(pss_ctx *x, msgbuf *m)
{
    const json_t *vols = jarr(x->spec, "volumes");
    strv names = {0};
    size_t i;
    td_status st = TD_ENOMEM;

    for (i = 0; i < json_array_size(vols); i++) {
        const json_t *v = json_array_get(vols, i);
        if (jpresent(v, "hostPath") && sv_push(&names, jstr0(v, "name")))
            goto out;
    }
    st = TD_OK;
    if (!names.n)
        goto out;
    mb_reason(m, "hostPath volumes");
    mb_put(m, " (");
    mb_put(m, plural(names.n, "volume", "volumes"));
    mb_put(m, " ");
    mb_join_quote(m, &names);
    mb_put(m, ")");
    st = TD_EFORBIDDEN;
out:
    sv_fini(&names);
    return st;
}

/* check_hostPorts.go */
static td_status check_host_ports(pss_ctx *x, msgbuf *m)
{
    strv ctrs = {0}, ports = {0};
    size_t i, j;
    td_status st = TD_ENOMEM;

    for (i = 0; i < x->nctr; i++) {
        const json_t *c = ctr(x, i);
        const json_t *pl = jarr(c, "ports");
        int bad = 0;
        for (j = 0; j < json_array_size(pl); j++) {
            json_int_t hp = json_integer_value(json_object_get(json_array_get(pl, j), "hostPort"));
            char *s;
            if (hp == 0)
                continue;
            bad = 1;
            s = pool_add(x, malloc(24));
            if (!s)
                goto out;
            snprintf(s, 24, "%lld", (long long)hp);
            if (sv_push(&ports, s))
                goto out;
        }
        if (bad && sv_push(&ctrs, ctr_name(c)))
            goto out;
    }
    st = TD_OK;
    if (!ctrs.n)
        goto out;
    sv_sort_unique(&ports); /* as strings, like sets.String: "10" < "9" */
    mb_reason(m, "hostPort");
    mb_put(m, " (");
    mb_containers(m, &ctrs);
    mb_put(m, plural(ctrs.n, " uses ", " use "));
    mb_put(m, plural(ports.n, "hostPort ", "hostPorts "));
    mb_join(m, &ports, ", ");
    mb_put(m, ")");
    st = TD_EFORBIDDEN;
out:
    sv_fini(&ctrs);
    sv_fini(&ports);
    return st;
}

/* Appends the non-empty httpGet.host and tcpSocket.host of handler to hosts. */
static int handler_hosts(const json_t *handler, strv *hosts, int *bad)
{
    static const char *const actions[] = {"httpGet", "tcpSocket"};
    size_t i;
    for (i = 0; i < NELEM(actions); i++) {
        const char *h = jstr(jobj(handler, actions[i]), "host");
        if (h && *h) {
            *bad = 1;
            if (sv_push(hosts, h))
                return -1;
        }
    }
    return 0;
}

/* check_hostProbesAndhostLifecycle.go */
static td_status check_host_probes(pss_ctx *x, msgbuf *m)
{
    static const char *const probes[] = {"livenessProbe", "readinessProbe", "startupProbe"};
    static const char *const hooks[] = {"postStart", "preStop"};
    strv ctrs = {0}, hosts = {0};
    size_t i, j;
    td_status st = TD_ENOMEM;

    for (i = 0; i < x->nctr; i++) {
        const json_t *c = ctr(x, i);
        const json_t *lc = jobj(c, "lifecycle");
        int bad = 0;
        for (j = 0; j < NELEM(probes); j++)
            if (handler_hosts(jobj(c, probes[j]), &hosts, &bad))
                goto out;
        for (j = 0; j < NELEM(hooks); j++)
            if (handler_hosts(jobj(lc, hooks[j]), &hosts, &bad))
                goto out;
        if (bad && sv_push(&ctrs, ctr_name(c)))
            goto out;
    }
    st = TD_OK;
    if (!ctrs.n)
        goto out;
    sv_sort_unique(&ctrs); /* a set here, unlike in the other checks */
    sv_sort_unique(&hosts);
    mb_reason(m, "probe or lifecycle host");
    mb_put(m, " (");
    mb_containers(m, &ctrs);
    mb_put(m, plural(ctrs.n, " uses ", " use "));
    mb_put(m, plural(hosts.n, "probe or lifecycle host ", "probe or lifecycle hosts "));
    mb_join_quote(m, &hosts);
    mb_put(m, ")");
    st = TD_EFORBIDDEN;
out:
    sv_fini(&ctrs);
    sv_fini(&hosts);
    return st;
}

/* check_privileged.go */
static int sets_privileged(const json_t *sc)
{
    return jtrue(sc, "privileged");
}

static td_status check_privileged(pss_ctx *x, msgbuf *m)
{
    return setters_check(x, m, 0, sets_privileged, "privileged",
                         "must not set securityContext.privileged=true");
}

/* procMount_1_0, shared by check_procMount_baseline.go (which skips it for
 * pods in a user namespace) and check_procMount_restricted.go. */
static td_status procmount(pss_ctx *x, msgbuf *m)
{
    strv ctrs = {0}, types = {0};
    size_t i;
    td_status st = TD_ENOMEM;

    for (i = 0; i < x->nctr; i++) {
        const json_t *c = ctr(x, i);
        const char *pm = jstr(ctr_sc(c), "procMount");
        if (pm && strcmp(pm, "Default") != 0)
            if (sv_push(&ctrs, ctr_name(c)) || sv_push(&types, pm))
                goto out;
    }
    st = TD_OK;
    if (!ctrs.n)
        goto out;
    sv_sort_unique(&types);
    mb_reason(m, "procMount");
    mb_put(m, " (");
    mb_containers(m, &ctrs);
    mb_put(m, " must not set securityContext.procMount to ");
    mb_join_quote(m, &types);
    mb_put(m, ")");
    st = TD_EFORBIDDEN;
out:
    sv_fini(&ctrs);
    sv_fini(&types);
    return st;
}

/* check_procMount_baseline.go: 1.0 unconditional, 1.35 relaxed in a user
 * namespace */
static td_status check_procmount_baseline(pss_ctx *x, msgbuf *m)
{
    return userns_relaxed(x) ? TD_OK : procmount(x, m);
}

/* check_seLinuxOptions.go: 1.31 adds container_engine_t to 1.0's types */
typedef struct {
    strv types;
    int user, role;
} selinux_bad;

static int selinux_type_allowed(const char *t, long minor)
{
    static const char *const allowed[] = {"", "container_t", "container_init_t", "container_kvm_t",
                                          "container_engine_t" /* 1.31 */};
    size_t k, n = minor >= 31 ? NELEM(allowed) : NELEM(allowed) - 1;
    for (k = 0; k < n; k++)
        if (strcmp(t, allowed[k]) == 0)
            return 1;
    return 0;
}

static int selinux_valid(const json_t *opts, long minor, selinux_bad *b, int *nomem)
{
    const char *t = jstr0(opts, "type");
    int valid = 1;
    if (!selinux_type_allowed(t, minor)) {
        valid = 0;
        if (sv_push(&b->types, t))
            *nomem = 1;
    }
    if (*jstr0(opts, "user")) {
        valid = 0;
        b->user = 1;
    }
    if (*jstr0(opts, "role")) {
        valid = 0;
        b->role = 1;
    }
    return valid;
}

static td_status check_selinux(pss_ctx *x, msgbuf *m)
{
    selinux_bad b = {{0}, 0, 0};
    strv ctrs = {0};
    const json_t *opts;
    int pod = 0, nomem = 0, n = 0;
    size_t i;
    td_status st = TD_ENOMEM;

    if ((opts = jobj(x->psc, "seLinuxOptions")) && !selinux_valid(opts, x->minor, &b, &nomem))
        pod = 1;
    for (i = 0; i < x->nctr && !nomem; i++) {
        const json_t *c = ctr(x, i);
        opts = jobj(ctr_sc(c), "seLinuxOptions");
        if (opts && !selinux_valid(opts, x->minor, &b, &nomem) && sv_push(&ctrs, ctr_name(c)))
            nomem = 1;
    }
    if (nomem)
        goto out;
    st = TD_OK;
    if (!pod && !ctrs.n)
        goto out;
    sv_sort_unique(&b.types);
    mb_reason(m, "seLinuxOptions");
    mb_put(m, " (");
    mb_setters(m, pod, &ctrs);
    mb_put(m, " set forbidden securityContext.seLinuxOptions: ");
    if (b.types.n) {
        mb_put(m, plural(b.types.n, "type ", "types "));
        mb_join_quote(m, &b.types);
        n++;
    }
    if (b.user) {
        mb_put(m, n++ ? "; user may not be set" : "user may not be set");
    }
    if (b.role) {
        mb_put(m, n++ ? "; role may not be set" : "role may not be set");
    }
    mb_put(m, ")");
    st = TD_EFORBIDDEN;
out:
    sv_fini(&b.types);
    sv_fini(&ctrs);
    return st;
}

static int seccomp_valid(const char *t)
{
    return strcmp(t, "Localhost") == 0 || strcmp(t, "RuntimeDefault") == 0;
}

/* check_seccompProfile_baseline.go (1.19+) and, with restricted set,
 * check_seccompProfile_restricted.go (1.25+): the restricted one also wants
 * every container covered by its own or the pod's valid profile. */
static td_status seccomp(pss_ctx *x, msgbuf *m, int restricted)
{
    strv bad = {0}, implicit = {0}, values = {0};
    const json_t *prof;
    int pod = 0, pod_set = 0;
    size_t i;
    td_status st = TD_ENOMEM;

    if ((prof = jobj(x->psc, "seccompProfile"))) {
        if (!seccomp_valid(jstr0(prof, "type"))) {
            pod = 1;
            if (sv_push(&values, jstr0(prof, "type")))
                goto out;
        } else {
            pod_set = 1;
        }
    }
    for (i = 0; i < x->nctr; i++) {
        const json_t *c = ctr(x, i);
        prof = jobj(ctr_sc(c), "seccompProfile");
        if (prof) {
            if (!seccomp_valid(jstr0(prof, "type")))
                if (sv_push(&bad, ctr_name(c)) || sv_push(&values, jstr0(prof, "type")))
                    goto out;
        } else if (restricted && !pod_set) {
            if (sv_push(&implicit, ctr_name(c)))
                goto out;
        }
    }
    st = TD_OK;
    if (pod || bad.n) {
        sv_sort_unique(&values);
        mb_reason(m, "seccompProfile");
        mb_put(m, " (");
        mb_setters(m, pod, &bad);
        mb_put(m, " must not set securityContext.seccompProfile.type to ");
        mb_join_quote(m, &values);
        mb_put(m, ")");
        st = TD_EFORBIDDEN;
    } else if (implicit.n) {
        mb_reason(m, "seccompProfile");
        mb_put(m, " (pod or ");
        mb_containers(m, &implicit);
        mb_put(m, " must set securityContext.seccompProfile.type to \"RuntimeDefault\" or "
                  "\"Localhost\")");
        st = TD_EFORBIDDEN;
    }
out:
    sv_fini(&bad);
    sv_fini(&implicit);
    sv_fini(&values);
    return st;
}

/* Go's validSeccompAnnotationValue */
static int seccomp_annotation_valid(const char *v)
{
    return strcmp(v, "runtime/default") == 0 || strcmp(v, "docker/default") == 0 ||
           strncmp(v, "localhost/", 10) == 0;
}

/* check_seccompProfile_baseline.go, version 1.0: the alpha annotations */
static td_status seccomp_annotations(pss_ctx *x, msgbuf *m)
{
    static const char pod_key[] = "seccomp.security.alpha.kubernetes.io/pod";
    static const char ctr_prefix[] = "container.seccomp.security.alpha.kubernetes.io/";
    const json_t *annotations = jobj(x->meta, "annotations"), *v;
    strv bad = {0};
    const char *s;
    char *key = NULL;
    size_t i;
    td_status st = TD_ENOMEM;

    if (!annotations)
        return TD_OK;
    if ((v = json_object_get(annotations, pod_key)) && json_is_string(v) &&
        !seccomp_annotation_valid(json_string_value(v)))
        if (!(s = key_eq_quoted(x, pod_key, v)) || sv_push(&bad, s))
            goto out;
    for (i = 0; i < x->nctr; i++) {
        const char *name = ctr_name(ctr(x, i));
        size_t n = strlen(name);
        char *k = realloc(key, sizeof ctr_prefix + n);
        if (!k)
            goto out;
        key = k;
        memcpy(key, ctr_prefix, sizeof ctr_prefix - 1);
        memcpy(key + sizeof ctr_prefix - 1, name, n + 1);
        if ((v = json_object_get(annotations, key)) && json_is_string(v) &&
            !seccomp_annotation_valid(json_string_value(v)))
            if (!(s = key_eq_quoted(x, key, v)) || sv_push(&bad, s))
                goto out;
    }
    st = TD_OK;
    if (!bad.n)
        goto out;
    sv_sort_unique(&bad);
    mb_reason(m, "seccompProfile");
    mb_put(m, " (forbidden ");
    mb_put(m, plural(bad.n, "annotation ", "annotations "));
    mb_join(m, &bad, ", ");
    mb_put(m, ")");
    st = TD_EFORBIDDEN;
out:
    free(key);
    sv_fini(&bad);
    return st;
}

/* check_seccompProfile_baseline.go: 1.0 the annotations, 1.19 the fields */
static td_status check_seccomp_baseline(pss_ctx *x, msgbuf *m)
{
    return x->minor >= 19 ? seccomp(x, m, 0) : seccomp_annotations(x, m);
}

/* check_sysctls.go: the allowed names of the version (1.0, 1.27, 1.29,
 * 1.32, 1.37), each a prefix of allowed_sysctls */
static td_status check_sysctls(pss_ctx *x, msgbuf *m)
{
    const json_t *sysctls = jarr(x->psc, "sysctls");
    strv names = {0};
    size_t i, k;
    size_t nallowed = x->minor >= 37   ? NELEM(allowed_sysctls)
                      : x->minor >= 32 ? 12
                      : x->minor >= 29 ? 10
                      : x->minor >= 27 ? 6
                                       : 5;

    for (i = 0; i < json_array_size(sysctls); i++) {
        const char *name = jstr0(json_array_get(sysctls, i), "name");
        for (k = 0; k < nallowed; k++)
            if (strcmp(name, allowed_sysctls[k]) == 0)
                break;
        if (k == nallowed && sv_push(&names, name)) {
            sv_fini(&names);
            return TD_ENOMEM;
        }
    }
    if (!names.n)
        return TD_OK;
    mb_reason(m, "forbidden sysctls");
    /* a single sysctl with an empty name makes an empty detail: no "()" */
    if (names.n > 1 || names.v[0][0]) {
        mb_put(m, " (");
        mb_join(m, &names, ", ");
        mb_put(m, ")");
    }
    sv_fini(&names);
    return TD_EFORBIDDEN;
}

/* check_windowsHostProcess.go */
static int sets_host_process(const json_t *sc)
{
    return jtrue(jobj(sc, "windowsOptions"), "hostProcess");
}

static td_status check_windows_host_process(pss_ctx *x, msgbuf *m)
{
    return setters_check(x, m, sets_host_process(x->psc), sets_host_process, "hostProcess",
                         "must not set securityContext.windowsOptions.hostProcess=true");
}

/* ----------------------------------------------------- restricted checks */

/* check_allowPrivilegeEscalation.go: 1.8, and 1.25 (Windows exempt) */
static int escalation_allowed(const json_t *sc)
{
    return !jfalse(sc, "allowPrivilegeEscalation");
}

static td_status check_allow_privilege_escalation(pss_ctx *x, msgbuf *m)
{
    if (windows_exempt(x))
        return TD_OK;
    return setters_check(x, m, 0, escalation_allowed, "allowPrivilegeEscalation != false",
                         "must set securityContext.allowPrivilegeEscalation=false");
}

/* check_capabilities_restricted.go: 1.22, and 1.25 (Windows exempt) */
static td_status check_capabilities_restricted(pss_ctx *x, msgbuf *m)
{
    strv no_drop = {0}, adding = {0}, caps = {0};
    size_t i, j;
    td_status st = TD_ENOMEM;

    if (windows_exempt(x))
        return TD_OK;
    for (i = 0; i < x->nctr; i++) {
        const json_t *c = ctr(x, i);
        const json_t *cp = jobj(ctr_sc(c), "capabilities");
        const json_t *drop = jarr(cp, "drop"), *add = jarr(cp, "add");
        int dropped_all = 0, bad_add = 0;
        if (!cp) {
            if (sv_push(&no_drop, ctr_name(c)))
                goto out;
            continue;
        }
        for (j = 0; j < json_array_size(drop) && !dropped_all; j++) {
            const char *d = json_string_value(json_array_get(drop, j));
            dropped_all = d && strcmp(d, "ALL") == 0;
        }
        if (!dropped_all && sv_push(&no_drop, ctr_name(c)))
            goto out;
        for (j = 0; j < json_array_size(add); j++) {
            const char *a = json_string_value(json_array_get(add, j));
            if (!a)
                a = "";
            if (strcmp(a, "NET_BIND_SERVICE") != 0) {
                bad_add = 1;
                if (sv_push(&caps, a))
                    goto out;
            }
        }
        if (bad_add && sv_push(&adding, ctr_name(c)))
            goto out;
    }
    st = TD_OK;
    if (!no_drop.n && !adding.n)
        goto out;
    sv_sort_unique(&caps);
    mb_reason(m, "unrestricted capabilities");
    mb_put(m, " (");
    if (no_drop.n) {
        mb_containers(m, &no_drop);
        mb_put(m, " must set securityContext.capabilities.drop=[\"ALL\"]");
    }
    if (adding.n) {
        if (no_drop.n)
            mb_put(m, "; ");
        mb_containers(m, &adding);
        mb_put(m, " must not include ");
        mb_join_quote(m, &caps);
        mb_put(m, " in securityContext.capabilities.add");
    }
    mb_put(m, ")");
    st = TD_EFORBIDDEN;
out:
    sv_fini(&no_drop);
    sv_fini(&adding);
    sv_fini(&caps);
    return st;
}

/* check_procMount_restricted.go: procMount_1_0 even in a user namespace */
static td_status check_procmount_restricted(pss_ctx *x, msgbuf *m)
{
    return procmount(x, m);
}

/* check_restrictedVolumes.go */
static td_status check_restricted_volumes(pss_ctx *x, msgbuf *m)
{
    const json_t *vols = jarr(x->spec, "volumes");
    strv names = {0}, types = {0};
    size_t i, k;
    td_status st = TD_ENOMEM;

    for (i = 0; i < json_array_size(vols); i++) {
        const json_t *v = json_array_get(vols, i);
        const char *type = "unknown";
        for (k = 0; k < NELEM(allowed_volume_sources); k++)
            if (jpresent(v, allowed_volume_sources[k]))
                break;
        if (k < NELEM(allowed_volume_sources))
            continue;
        for (k = 0; k < NELEM(restricted_volume_sources); k++) {
            if (jpresent(v, restricted_volume_sources[k])) {
                type = restricted_volume_sources[k];
                break;
            }
        }
        if (sv_push(&names, jstr0(v, "name")) || sv_push(&types, type))
            goto out;
    }
    st = TD_OK;
    if (!names.n)
        goto out;
    sv_sort_unique(&types);
    mb_reason(m, "restricted volume types");
    mb_put(m, " (");
    mb_put(m, plural(names.n, "volume ", "volumes "));
    mb_join_quote(m, &names);
    mb_put(m, plural(names.n, " uses ", " use "));
    mb_put(m, plural(types.n, "restricted volume type ", "restricted volume types "));
    mb_join_quote(m, &types);
    mb_put(m, ")");
    st = TD_EFORBIDDEN;
out:
    sv_fini(&names);
    sv_fini(&types);
    return st;
}

/* check_runAsNonRoot.go, 1.0 and 1.35 (relaxed in a user namespace): a
 * container's own setting wins; an unset one inherits the pod's
 * runAsNonRoot=true. */
static td_status check_run_as_non_root(pss_ctx *x, msgbuf *m)
{
    strv bad = {0}, implicit = {0};
    int pod = 0, pod_true = 0;
    size_t i;
    td_status st = TD_ENOMEM;

    if (userns_relaxed(x))
        return TD_OK;
    if (jfalse(x->psc, "runAsNonRoot"))
        pod = 1;
    else if (jtrue(x->psc, "runAsNonRoot"))
        pod_true = 1;
    for (i = 0; i < x->nctr; i++) {
        const json_t *c = ctr(x, i);
        const json_t *sc = ctr_sc(c);
        if (jpresent(sc, "runAsNonRoot")) {
            if (jfalse(sc, "runAsNonRoot") && sv_push(&bad, ctr_name(c)))
                goto out;
        } else if (!pod_true && sv_push(&implicit, ctr_name(c))) {
            goto out;
        }
    }
    st = TD_OK;
    if (pod || bad.n) {
        mb_reason(m, "runAsNonRoot != true");
        mb_put(m, " (");
        mb_setters(m, pod, &bad);
        mb_put(m, " must not set securityContext.runAsNonRoot=false)");
        st = TD_EFORBIDDEN;
    } else if (implicit.n) {
        mb_reason(m, "runAsNonRoot != true");
        mb_put(m, " (pod or ");
        mb_containers(m, &implicit);
        mb_put(m, " must set securityContext.runAsNonRoot=true)");
        st = TD_EFORBIDDEN;
    }
out:
    sv_fini(&bad);
    sv_fini(&implicit);
    return st;
}

static int is_uid0(const json_t *sc)
{
    const json_t *u = json_object_get(sc, "runAsUser");
    return json_is_integer(u) && json_integer_value(u) == 0;
}

/* check_runAsUser.go: 1.23, and 1.35 (relaxed in a user namespace) */
static td_status check_run_as_user(pss_ctx *x, msgbuf *m)
{
    if (userns_relaxed(x))
        return TD_OK;
    return setters_check(x, m, is_uid0(x->psc), is_uid0, "runAsUser=0",
                         "must not set runAsUser=0");
}

/* check_seccompProfile_restricted.go: 1.19, and 1.25 (Windows exempt) */
static td_status check_seccomp_restricted(pss_ctx *x, msgbuf *m)
{
    return windows_exempt(x) ? TD_OK : seccomp(x, m, 1);
}

/* ------------------------------------------------------------ registry */

/* One check of policy/registry.go: the version it applies from (its first
 * MinimumVersion), and, for a baseline check, the version from which a
 * restricted check overrides it at level restricted (NEVER: not
 * overridden). */
#define NEVER 1000L
typedef struct {
    check_fn fn;
    int restricted;  /* Level: restricted */
    long from;       /* first MinimumVersion */
    long overridden; /* baseline: left out of restricted from this version */
} check_def;

/* In Go's order: baseline IDs sorted (appArmorProfile,
 * capabilities_baseline, hostNamespaces, hostPathVolumes, hostPorts,
 * hostProbesAndHostLifecycle, privileged, procMount, seLinuxOptions,
 * seccompProfile_baseline, sysctls, windowsHostProcess), then the
 * restricted IDs sorted (allowPrivilegeEscalation, capabilities_restricted,
 * procMount_restricted, restrictedVolumes, runAsNonRoot, runAsUser,
 * seccompProfile_restricted). The overrides: capabilities_restricted
 * (1.22) of capabilities_baseline, restrictedVolumes (1.0) of
 * hostPathVolumes, procMount_restricted (1.35) of procMount,
 * seccompProfile_restricted (1.19) of seccompProfile_baseline. */
static const check_def checks_def[] = {
    {check_apparmor, 0, 0, NEVER},
    {check_capabilities_baseline, 0, 0, 22},
    {check_host_namespaces, 0, 0, NEVER},
    {check_hostpath_volumes, 0, 0, 0},
    {check_host_ports, 0, 0, NEVER},
    {check_host_probes, 0, 34, NEVER},
    {check_privileged, 0, 0, NEVER},
    {check_procmount_baseline, 0, 0, 35},
    {check_selinux, 0, 0, NEVER},
    {check_seccomp_baseline, 0, 0, 19},
    {check_sysctls, 0, 0, NEVER},
    {check_windows_host_process, 0, 0, NEVER},
    {check_allow_privilege_escalation, 1, 8, NEVER},
    {check_capabilities_restricted, 1, 22, NEVER},
    {check_procmount_restricted, 1, 35, NEVER},
    {check_restricted_volumes, 1, 0, NEVER},
    {check_run_as_non_root, 1, 0, NEVER},
    {check_run_as_user, 1, 23, NEVER},
    {check_seccomp_restricted, 1, 19, NEVER},
};

/* Whether level at version minor runs d (EvaluatePod's check list). */
static int check_runs(const check_def *d, td_pss_level level, long minor)
{
    if (minor < d->from)
        return 0;
    if (level == TD_PSS_BASELINE)
        return !d->restricted;
    return d->restricted || minor < d->overridden;
}

td_status td_pss_version_parse(const char *s, long *minor)
{
    long v = 0;
    *minor = TD_PSS_LATEST;
    if (!s)
        return TD_EINVAL;
    if (strcmp(s, "latest") == 0)
        return TD_OK;
    /* ^v1\.([0-9]|[1-9][0-9]*)$, then strconv.Atoi (which fails past int64) */
    if (strncmp(s, "v1.", 3) != 0 || s[3] < '0' || s[3] > '9' || (s[3] == '0' && s[4]))
        return TD_EINVAL;
    for (s += 3; *s; s++) {
        if (*s < '0' || *s > '9' || v > (LONG_MAX - (*s - '0')) / 10)
            return TD_EINVAL;
        v = v * 10 + (*s - '0');
    }
    *minor = v;
    return TD_OK;
}

const char *td_pss_version_str(long minor, char buf[24])
{
    if (minor < 0)
        return strcpy(buf, "latest");
    snprintf(buf, 24, "v1.%ld", minor);
    return buf;
}

td_status td_pss_level_parse(const char *s, td_pss_level *out)
{
    if (s && strcmp(s, "privileged") == 0)
        *out = TD_PSS_PRIVILEGED;
    else if (s && strcmp(s, "baseline") == 0)
        *out = TD_PSS_BASELINE;
    else if (s && strcmp(s, "restricted") == 0)
        *out = TD_PSS_RESTRICTED;
    else
        return TD_EINVAL;
    return TD_OK;
}

td_status td__pss_check_full(const json_t *pod, td_pss_level level, td_err *err)
{
    return td__pss_check_full_version(pod, level, TD_PSS_LATEST, err);
}

td_status td__pss_check_full_version(const json_t *pod, td_pss_level level, long minor,
                                     td_err *err)
{
    const char *name;
    size_t i;
    char buf[TD_ERR_MAX], vbuf[24];
    msgbuf m = {buf, sizeof buf, 0, 0, 0};
    jpath jp = {"", 0};
    pss_ctx x;
    td_status st, result = TD_OK;

    if (!json_is_object(pod))
        return td_err_set(err, TD_EINVAL, "pod is not a JSON object");
    switch (level) {
    case TD_PSS_PRIVILEGED:
        return TD_OK;
    case TD_PSS_BASELINE: name = "baseline"; break;
    case TD_PSS_RESTRICTED: name = "restricted"; break;
    default:
        return td_err_set(err, TD_EINVAL, "unknown Pod Security level %d", (int)level);
    }
    st = validate_fields(pod, f_pod, &jp, err);
    if (st != TD_OK)
        return st;

    memset(&x, 0, sizeof x);
    x.meta = jobj(pod, "metadata");
    x.spec = jobj(pod, "spec");
    x.psc = jobj(x.spec, "securityContext");
    x.lists[0] = jarr(x.spec, "initContainers");
    x.lists[1] = jarr(x.spec, "containers");
    x.lists[2] = jarr(x.spec, "ephemeralContainers");
    for (i = 0; i < 3; i++)
        x.nctr += json_array_size(x.lists[i]);
    x.windows = strcmp(jstr0(jobj(x.spec, "os"), "name"), "windows") == 0;
    x.userns = jfalse(x.spec, "hostUsers");
    x.minor = minor < 0 || minor > TD_PSS_MAX_MINOR ? TD_PSS_MAX_MINOR : minor;

    snprintf(buf, sizeof buf, "violates PodSecurity \"%s:%s\": ", name,
             td_pss_version_str(minor, vbuf));
    m.len = strlen(buf);
    for (i = 0; i < NELEM(checks_def); i++) {
        if (!check_runs(&checks_def[i], level, x.minor))
            continue;
        st = checks_def[i].fn(&x, &m);
        if (st == TD_ENOMEM) {
            result = td_err_set(err, TD_ENOMEM, "out of memory checking Pod Security");
            break;
        }
        if (st == TD_EFORBIDDEN)
            result = TD_EFORBIDDEN;
    }
    for (i = 0; i < x.pool.n; i++)
        free((void *)x.pool.v[i]);
    sv_fini(&x.pool);
    if (result == TD_EFORBIDDEN && err)
        memcpy(err->msg, buf, m.len + 1);
    return result;
}

/* ------------------------------------------------------------ fast path */

/* The allowed path. One walk over the fields the checks read (the fields
 * validate() types, no others) notes, without allocating or formatting,
 * what each check needs to know; the level's checks are then decided from
 * those notes. A pod that fails a check, or has a field of a type a v1 Pod
 * cannot have, goes to td__pss_check_full, which words the answer: so the
 * walk can only ever be wrong by sending a passing pod there, never by
 * passing a failing one (fuzz_pss compares the two on every input). */

/* What one securityContext (the pod's or a container's) sets. */
enum {
    SC_APPARMOR_BAD = 1u << 0,    /* appArmorProfile of a forbidden type */
    SC_SELINUX_BAD = 1u << 1,     /* seLinuxOptions: a forbidden type, a user or a role */
    SC_SECCOMP_SET = 1u << 2,     /* seccompProfile present */
    SC_SECCOMP_BAD = 1u << 3,     /* ... of a type other than RuntimeDefault, Localhost */
    SC_WINHOST = 1u << 4,         /* windowsOptions.hostProcess=true */
    SC_RANR_TRUE = 1u << 5,       /* runAsNonRoot=true */
    SC_RANR_FALSE = 1u << 6,      /* runAsNonRoot=false */
    SC_UID0 = 1u << 7,            /* runAsUser=0 */
    SC_SYSCTL_BAD = 1u << 8,      /* the pod's: a sysctl not on the safe list */
    SC_PRIVILEGED = 1u << 9,      /* the rest are a container's */
    SC_APE_FALSE = 1u << 10,      /* allowPrivilegeEscalation=false */
    SC_PROCMOUNT = 1u << 11,      /* procMount other than Default */
    SC_CAPS = 1u << 12,           /* capabilities present */
    SC_DROP_ALL = 1u << 13,       /* capabilities.drop has "ALL" */
    SC_ADD_BASELINE = 1u << 14,   /* capabilities.add beyond the baseline list */
    SC_ADD_RESTRICTED = 1u << 15, /* capabilities.add other than NET_BIND_SERVICE */
};

/* The pod's own facts, and what some container lacks. */
enum {
    P_HOSTNS = 1u << 0,         /* hostNetwork, hostPID or hostIPC true */
    P_USERNS = 1u << 1,         /* hostUsers=false */
    P_WINDOWS = 1u << 2,        /* os.name=windows */
    P_HOSTPATH = 1u << 3,       /* a hostPath volume */
    P_RVOL = 1u << 4,           /* a volume of no allowed type */
    P_ANN_APPARMOR = 1u << 5,   /* a forbidden AppArmor annotation */
    C_HOSTPORT = 1u << 8,       /* a container with a hostPort */
    C_PROBE_HOST = 1u << 9,     /* ... with a probe or lifecycle host */
    C_APE_UNSET = 1u << 10,     /* ... without allowPrivilegeEscalation=false */
    C_CAPS_RESTRICTED = 1u << 11, /* ... without drop ALL, or adding more than NET_BIND_SERVICE */
    C_RANR_UNSET = 1u << 12,    /* ... without runAsNonRoot */
    C_SECCOMP_UNSET = 1u << 13, /* ... without seccompProfile */
};

typedef struct {
    unsigned pod; /* P_*, C_* */
    unsigned psc; /* SC_* of spec.securityContext */
    unsigned any; /* SC_* of the containers, ORed */
    int slow;     /* a type validate() rejects: the full path words it */
} pss_scan;

#define ITER_EACH(o, it, k, v)                                                                     \
    for ((it) = json_object_iter((json_t *)(o));                                                   \
         (it) && ((k) = json_object_iter_key(it), (v) = json_object_iter_value(it), 1);            \
         (it) = json_object_iter_next((json_t *)(o), (it)))

/* Key k (at iterator it) is lit: its bytes, not only its C string, as
 * json_object_get matches a key (a key with a NUL byte in it is none of
 * the members the checks read). The length is compared first: most keys
 * differ in it, and then no byte is read. */
#define KEY_IS(it, k, lit)                                                                         \
    (json_object_iter_key_len(it) == sizeof(lit) - 1 && memcmp((k), (lit), sizeof(lit) - 1) == 0)
#define NO_NUL(it, k)      (json_object_iter_key_len(it) == strlen(k))

static int in_list(const char *s, const char *const *list, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0)
            return 1;
    return 0;
}

/* A member validate() types as a string: its value, "" when absent or
 * null, NULL (and s->slow) when of another type. */
static const char *scan_str(const json_t *o, const char *k, pss_scan *s)
{
    const json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v))
        return "";
    if (!json_is_string(v)) {
        s->slow = 1;
        return NULL;
    }
    return json_string_value(v);
}

/* A T_ARR_STR / T_ARR_OBJ value: an array whose elements are null or of
 * type elem; 0 (and s->slow) if not. */
static int scan_array(const json_t *a, json_type elem, pss_scan *s)
{
    size_t i;
    if (!json_is_array(a)) {
        s->slow = 1;
        return 0;
    }
    for (i = 0; i < json_array_size(a); i++) {
        const json_t *e = json_array_get(a, i);
        if (!json_is_null(e) && json_typeof(e) != elem) {
            s->slow = 1;
            return 0;
        }
    }
    return 1;
}

static unsigned scan_caps(const json_t *caps, pss_scan *s)
{
    const json_t *drop = json_object_get(caps, "drop"), *add = json_object_get(caps, "add");
    unsigned f = SC_CAPS;
    size_t i;
    if (drop && !json_is_null(drop) && scan_array(drop, JSON_STRING, s))
        for (i = 0; i < json_array_size(drop); i++) {
            const char *d = json_string_value(json_array_get(drop, i));
            if (d && strcmp(d, "ALL") == 0)
                f |= SC_DROP_ALL;
        }
    if (add && !json_is_null(add) && scan_array(add, JSON_STRING, s))
        for (i = 0; i < json_array_size(add); i++) {
            const char *a = json_string_value(json_array_get(add, i));
            if (!a)
                a = "";
            if (!in_list(a, baseline_capabilities, NELEM(baseline_capabilities)))
                f |= SC_ADD_BASELINE;
            if (strcmp(a, "NET_BIND_SERVICE") != 0)
                f |= SC_ADD_RESTRICTED;
        }
    return f;
}

static unsigned scan_sysctls(const json_t *sysctls, pss_scan *s)
{
    size_t i;
    if (!scan_array(sysctls, JSON_OBJECT, s))
        return 0;
    for (i = 0; i < json_array_size(sysctls); i++) {
        const json_t *e = json_array_get(sysctls, i);
        const char *name = json_is_null(e) ? "" : scan_str(e, "name", s);
        if (!name)
            return 0;
        if (!in_list(name, allowed_sysctls, NELEM(allowed_sysctls)))
            return SC_SYSCTL_BAD;
    }
    return 0;
}

/* One securityContext: spec.securityContext (container 0), whose f_psc
 * fields are read, or a container's (f_csc). */
static unsigned scan_sc(const json_t *sc, int container, pss_scan *s)
{
    unsigned f = 0;
    const char *k, *t;
    const json_t *v;
    void *it;

    ITER_EACH(sc, it, k, v)
    {
        if (json_is_null(v))
            continue;
        switch (k[0]) {
        case 'a':
            if (KEY_IS(it, k, "appArmorProfile")) {
                if (!json_is_object(v) || !(t = scan_str(v, "type", s)))
                    goto slow;
                if (!apparmor_type_allowed(t))
                    f |= SC_APPARMOR_BAD;
            } else if (container && KEY_IS(it, k, "allowPrivilegeEscalation")) {
                if (!json_is_boolean(v))
                    goto slow;
                if (json_is_false(v))
                    f |= SC_APE_FALSE;
            }
            break;
        case 'c':
            if (container && KEY_IS(it, k, "capabilities")) {
                if (!json_is_object(v))
                    goto slow;
                f |= scan_caps(v, s);
            }
            break;
        case 'p':
            if (!container)
                break;
            if (KEY_IS(it, k, "privileged")) {
                if (!json_is_boolean(v))
                    goto slow;
                if (json_is_true(v))
                    f |= SC_PRIVILEGED;
            } else if (KEY_IS(it, k, "procMount")) {
                if (!json_is_string(v))
                    goto slow;
                if (strcmp(json_string_value(v), "Default") != 0)
                    f |= SC_PROCMOUNT;
            }
            break;
        case 'r':
            if (KEY_IS(it, k, "runAsNonRoot")) {
                if (!json_is_boolean(v))
                    goto slow;
                f |= json_is_true(v) ? SC_RANR_TRUE : SC_RANR_FALSE;
            } else if (KEY_IS(it, k, "runAsUser")) {
                if (!json_is_integer(v))
                    goto slow;
                if (json_integer_value(v) == 0)
                    f |= SC_UID0;
            }
            break;
        case 's':
            if (KEY_IS(it, k, "seccompProfile")) {
                if (!json_is_object(v) || !(t = scan_str(v, "type", s)))
                    goto slow;
                f |= seccomp_valid(t) ? SC_SECCOMP_SET : SC_SECCOMP_SET | SC_SECCOMP_BAD;
            } else if (KEY_IS(it, k, "seLinuxOptions")) {
                const char *user, *role;
                if (!json_is_object(v) || !(t = scan_str(v, "type", s)) ||
                    !(user = scan_str(v, "user", s)) || !(role = scan_str(v, "role", s)))
                    goto slow;
                if (!selinux_type_allowed(t, TD_PSS_MAX_MINOR) || *user || *role)
                    f |= SC_SELINUX_BAD;
            } else if (!container && KEY_IS(it, k, "sysctls")) {
                f |= scan_sysctls(v, s);
            }
            break;
        case 'w':
            if (KEY_IS(it, k, "windowsOptions")) {
                const json_t *hp;
                if (!json_is_object(v))
                    goto slow;
                hp = json_object_get(v, "hostProcess");
                if (hp && !json_is_null(hp) && !json_is_boolean(hp))
                    goto slow;
                if (json_is_true(hp))
                    f |= SC_WINHOST;
            }
            break;
        }
    }
    return f;
slow:
    s->slow = 1;
    return 0;
}

/* An httpGet or tcpSocket action (f_host): 1 if it names a host. Its few
 * members are walked rather than looked up. */
static int scan_action(const json_t *a, pss_scan *s)
{
    const char *k;
    const json_t *v;
    void *it;
    if (!json_is_object(a)) {
        s->slow = 1;
        return 0;
    }
    ITER_EACH(a, it, k, v)
    {
        if (k[0] != 'h' || !KEY_IS(it, k, "host") || json_is_null(v))
            continue;
        if (!json_is_string(v)) {
            s->slow = 1;
            return 0;
        }
        return json_string_value(v)[0] != '\0';
    }
    return 0;
}

/* A probe or lifecycle handler (f_handler): 1 if it names a host. */
static int scan_handler(const json_t *h, pss_scan *s)
{
    const char *k;
    const json_t *v;
    void *it;
    int bad = 0;
    if (!json_is_object(h)) {
        s->slow = 1;
        return 0;
    }
    ITER_EACH(h, it, k, v)
    {
        if (json_is_null(v))
            continue;
        if ((k[0] == 'h' && KEY_IS(it, k, "httpGet")) ||
            (k[0] == 't' && KEY_IS(it, k, "tcpSocket")))
            bad |= scan_action(v, s);
    }
    return bad;
}

static int scan_lifecycle(const json_t *lc, pss_scan *s)
{
    static const char *const hooks[] = {"postStart", "preStop"};
    int bad = 0;
    size_t i;
    if (!json_is_object(lc)) {
        s->slow = 1;
        return 0;
    }
    for (i = 0; i < NELEM(hooks); i++) {
        const json_t *h = json_object_get(lc, hooks[i]);
        if (h && !json_is_null(h))
            bad |= scan_handler(h, s);
    }
    return bad;
}

static int scan_ports(const json_t *ports, pss_scan *s)
{
    size_t i;
    int bad = 0;
    if (!scan_array(ports, JSON_OBJECT, s))
        return 0;
    for (i = 0; i < json_array_size(ports); i++) {
        const json_t *hp = json_object_get(json_array_get(ports, i), "hostPort");
        json_int_t n;
        if (!hp || json_is_null(hp))
            continue;
        if (!json_is_integer(hp) || (n = json_integer_value(hp)) < INT32_MIN || n > INT32_MAX) {
            s->slow = 1;
            return 0;
        }
        bad |= n != 0;
    }
    return bad;
}

/* One container (NULL or JSON null: an empty one, as Go reads it). */
static void scan_container(const json_t *c, pss_scan *s)
{
    unsigned f = 0, p = 0;
    const char *k;
    const json_t *v;
    void *it;

    ITER_EACH(c, it, k, v)
    {
        int host = 0;
        if (json_is_null(v))
            continue;
        switch (k[0]) {
        case 'n':
            if (KEY_IS(it, k, "name") && !json_is_string(v))
                s->slow = 1;
            break;
        case 's':
            if (KEY_IS(it, k, "securityContext")) {
                if (!json_is_object(v))
                    s->slow = 1;
                else
                    f = scan_sc(v, 1, s);
            } else if (KEY_IS(it, k, "startupProbe")) {
                host = scan_handler(v, s);
            }
            break;
        case 'p':
            if (KEY_IS(it, k, "ports") && scan_ports(v, s))
                p |= C_HOSTPORT;
            break;
        case 'l':
            if (KEY_IS(it, k, "livenessProbe"))
                host = scan_handler(v, s);
            else if (KEY_IS(it, k, "lifecycle"))
                host = scan_lifecycle(v, s);
            break;
        case 'r':
            if (KEY_IS(it, k, "readinessProbe"))
                host = scan_handler(v, s);
            break;
        }
        if (host)
            p |= C_PROBE_HOST;
    }
    if (!(f & SC_APE_FALSE))
        p |= C_APE_UNSET;
    if (!(f & SC_CAPS) || !(f & SC_DROP_ALL) || (f & SC_ADD_RESTRICTED))
        p |= C_CAPS_RESTRICTED;
    if (!(f & (SC_RANR_TRUE | SC_RANR_FALSE)))
        p |= C_RANR_UNSET;
    if (!(f & SC_SECCOMP_SET))
        p |= C_SECCOMP_UNSET;
    s->any |= f;
    s->pod |= p;
}

static void scan_containers(const json_t *list, pss_scan *s)
{
    size_t i;
    if (!scan_array(list, JSON_OBJECT, s))
        return;
    for (i = 0; i < json_array_size(list) && !s->slow; i++)
        scan_container(json_array_get(list, i), s);
}

/* One volume (f_volume): hostPath, and whether any allowed source is set. */
static void scan_volume(const json_t *vol, pss_scan *s)
{
    const char *k;
    const json_t *v;
    void *it;
    int allowed = 0;

    ITER_EACH(vol, it, k, v)
    {
        if (json_is_null(v))
            continue;
        if (KEY_IS(it, k, "name")) {
            if (!json_is_string(v))
                s->slow = 1;
        } else if (json_is_object(v)) {
            if (KEY_IS(it, k, "hostPath"))
                s->pod |= P_HOSTPATH;
            else if (!allowed)
                allowed = in_list(k, allowed_volume_sources, NELEM(allowed_volume_sources)) &&
                          NO_NUL(it, k);
        } else if ((in_list(k, allowed_volume_sources, NELEM(allowed_volume_sources)) ||
                    in_list(k, restricted_volume_sources, NELEM(restricted_volume_sources))) &&
                   NO_NUL(it, k)) {
            s->slow = 1;
        }
    }
    if (!allowed)
        s->pod |= P_RVOL;
}

static void scan_volumes(const json_t *vols, pss_scan *s)
{
    size_t i;
    if (!scan_array(vols, JSON_OBJECT, s))
        return;
    for (i = 0; i < json_array_size(vols); i++)
        scan_volume(json_array_get(vols, i), s);
}

static void scan_spec(const json_t *spec, pss_scan *s)
{
    const char *k;
    const json_t *v;
    void *it;

    ITER_EACH(spec, it, k, v)
    {
        if (json_is_null(v) || s->slow)
            continue;
        switch (k[0]) {
        case 'h':
            if (KEY_IS(it, k, "hostNetwork") || KEY_IS(it, k, "hostPID") ||
                KEY_IS(it, k, "hostIPC")) {
                if (!json_is_boolean(v))
                    s->slow = 1;
                else if (json_is_true(v))
                    s->pod |= P_HOSTNS;
            } else if (KEY_IS(it, k, "hostUsers")) {
                if (!json_is_boolean(v))
                    s->slow = 1;
                else if (json_is_false(v))
                    s->pod |= P_USERNS;
            }
            break;
        case 'o':
            if (KEY_IS(it, k, "os")) {
                const char *name;
                if (!json_is_object(v) || !(name = scan_str(v, "name", s)))
                    s->slow = 1;
                else if (strcmp(name, "windows") == 0)
                    s->pod |= P_WINDOWS;
            }
            break;
        case 's':
            if (KEY_IS(it, k, "securityContext")) {
                if (!json_is_object(v))
                    s->slow = 1;
                else
                    s->psc = scan_sc(v, 0, s);
            }
            break;
        case 'v':
            if (KEY_IS(it, k, "volumes"))
                scan_volumes(v, s);
            break;
        case 'c':
            if (KEY_IS(it, k, "containers"))
                scan_containers(v, s);
            break;
        case 'i':
            if (KEY_IS(it, k, "initContainers"))
                scan_containers(v, s);
            break;
        case 'e':
            if (KEY_IS(it, k, "ephemeralContainers"))
                scan_containers(v, s);
            break;
        }
    }
}

/* metadata.annotations (a map of strings): a forbidden AppArmor one. */
static void scan_metadata(const json_t *meta, pss_scan *s)
{
    static const char prefix[] = "container.apparmor.security.beta.kubernetes.io/";
    const json_t *ann = json_object_get(meta, "annotations"), *v;
    const char *k;
    void *it;

    if (!ann || json_is_null(ann))
        return;
    if (!json_is_object(ann)) {
        s->slow = 1;
        return;
    }
    ITER_EACH(ann, it, k, v)
    {
        const char *val;
        if (json_is_null(v))
            val = "";
        else if (json_is_string(v))
            val = json_string_value(v);
        else {
            s->slow = 1;
            return;
        }
        if (k[0] == 'c' && strncmp(k, prefix, sizeof prefix - 1) == 0 &&
            !apparmor_annotation_allowed(val))
            s->pod |= P_ANN_APPARMOR;
    }
}

static void scan_pod(const json_t *pod, pss_scan *s)
{
    const json_t *meta = json_object_get(pod, "metadata");
    const json_t *spec = json_object_get(pod, "spec");
    if (meta && !json_is_null(meta)) {
        if (!json_is_object(meta))
            s->slow = 1;
        else
            scan_metadata(meta, s);
    }
    if (spec && !json_is_null(spec)) {
        if (!json_is_object(spec))
            s->slow = 1;
        else
            scan_spec(spec, s);
    }
}

/* 1 if the scanned pod passes every check of level (baseline or
 * restricted), each condition as the check_* function above words it. */
static int scan_passes(const pss_scan *s, td_pss_level level)
{
    const unsigned p = s->pod, psc = s->psc, any = s->any;
    const int windows = (p & P_WINDOWS) != 0, userns = (p & P_USERNS) != 0;

    if (s->slow)
        return 0;
    /* appArmorProfile, hostNamespaces, hostPorts, hostProbesAndHostLifecycle,
     * privileged, seLinuxOptions, sysctls, windowsHostProcess: both levels */
    if ((p & (P_HOSTNS | P_ANN_APPARMOR | C_HOSTPORT | C_PROBE_HOST)) ||
        (psc & (SC_APPARMOR_BAD | SC_SELINUX_BAD | SC_WINHOST | SC_SYSCTL_BAD)) ||
        (any & (SC_APPARMOR_BAD | SC_SELINUX_BAD | SC_WINHOST | SC_PRIVILEGED)))
        return 0;
    if (level == TD_PSS_BASELINE)
        /* capabilities_baseline, hostPathVolumes, procMount, seccompProfile_baseline */
        return !(any & SC_ADD_BASELINE) && !(p & P_HOSTPATH) &&
               (userns || !(any & SC_PROCMOUNT)) && !((psc | any) & SC_SECCOMP_BAD);
    /* allowPrivilegeEscalation, capabilities_restricted (not on Windows) */
    if (!windows && (p & (C_APE_UNSET | C_CAPS_RESTRICTED)))
        return 0;
    /* procMount_restricted, restrictedVolumes */
    if ((any & SC_PROCMOUNT) || (p & P_RVOL))
        return 0;
    /* runAsNonRoot, runAsUser (not in a user namespace) */
    if (!userns && (((psc | any) & (SC_RANR_FALSE | SC_UID0)) ||
                    (!(psc & SC_RANR_TRUE) && (p & C_RANR_UNSET))))
        return 0;
    /* seccompProfile_restricted (not on Windows) */
    if (!windows &&
        (((psc | any) & SC_SECCOMP_BAD) || (!(psc & SC_SECCOMP_SET) && (p & C_SECCOMP_UNSET))))
        return 0;
    return 1;
}

td_status td_pss_check(const json_t *pod, td_pss_level level, td_err *err)
{
    return td_pss_check_version(pod, level, TD_PSS_LATEST, err);
}

td_status td_pss_check_version(const json_t *pod, td_pss_level level, long minor, td_err *err)
{
    td_pss_walk w = {{0, 0, 0}, 0, 0};
    return td_pss_check_walk(pod, level, minor, &w, err);
}

td_status td_pss_check_walk(const json_t *pod, td_pss_level level, long minor, td_pss_walk *w,
                            td_err *err)
{
    /* The walk knows latest's rules only; an older version runs the checks
     * in full (a pinned namespace is the rare case, and its checks differ
     * both ways: older ones allow fewer sysctls and SELinux types, relax
     * nothing for user namespaces, and read the seccomp annotations). */
    if ((level == TD_PSS_BASELINE || level == TD_PSS_RESTRICTED) && json_is_object(pod) &&
        (minor < 0 || minor >= TD_PSS_MAX_MINOR)) {
        pss_scan s = {0, 0, 0, 0};
        if (w->done) {
            s.pod = w->bits[0], s.psc = w->bits[1], s.any = w->bits[2], s.slow = w->slow;
        } else {
            scan_pod(pod, &s);
            w->bits[0] = s.pod, w->bits[1] = s.psc, w->bits[2] = s.any, w->slow = s.slow;
            w->done = 1;
        }
        if (scan_passes(&s, level))
            return TD_OK;
    }
    return td__pss_check_full_version(pod, level, minor, err);
}

/* ------------------------------------------------------- Go's %q quoting */

/* Decodes one UTF-8 sequence as Go's utf8.DecodeRuneInString does: returns
 * its length, or 0 for an invalid byte (surrogates, overlongs, truncation). */
static size_t utf8_decode(const unsigned char *s, size_t n, unsigned long *r)
{
    unsigned long c;
    size_t len, i;
    if (s[0] < 0x80) {
        *r = s[0];
        return 1;
    }
    if (s[0] >= 0xC2 && s[0] <= 0xDF) {
        len = 2;
        c = s[0] & 0x1F;
    } else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
        len = 3;
        c = s[0] & 0x0F;
    } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
        len = 4;
        c = s[0] & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && (c < 0x800 || (c >= 0xD800 && c <= 0xDFFF))) ||
        (len == 4 && (c < 0x10000 || c > 0x10FFFF)))
        return 0;
    *r = c;
    return len;
}

/* An approximation of Go's unicode.IsPrint for runes >= 0x80: false for the
 * C1 controls, the non-ASCII spaces and separators, the common format
 * characters, private use and the noncharacters. (Go also escapes
 * unassigned code points; this keeps them.) */
static int rune_printable(unsigned long r)
{
    if (r <= 0xA0 || r == 0xAD || r == 0x1680 || (r >= 0x2000 && r <= 0x200F) ||
        (r >= 0x2028 && r <= 0x202F) || (r >= 0x205F && r <= 0x206F) || r == 0x3000 ||
        (r >= 0x0600 && r <= 0x0605) || r == 0x061C || r == 0x06DD || r == 0x070F || r == 0x180E ||
        r == 0xFEFF || (r >= 0xFFF9 && r <= 0xFFFB) || (r >= 0xE000 && r <= 0xF8FF) ||
        r >= 0xF0000 || (r & 0xFFFE) == 0xFFFE || (r >= 0xFDD0 && r <= 0xFDEF))
        return 0;
    return 1;
}

static size_t go_quote(char *out, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0, i = 0;

    out[o++] = '"';
    while (i < n) {
        unsigned long r;
        size_t w = utf8_decode(p + i, n - i, &r);
        if (w == 0) {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[p[i] >> 4];
            out[o++] = hex[p[i] & 0xF];
            i++;
            continue;
        }
        if (r == '"' || r == '\\') {
            out[o++] = '\\';
            out[o++] = (char)r;
        } else if ((r >= 0x20 && r < 0x7F) || (r >= 0x80 && rune_printable(r))) {
            memcpy(out + o, p + i, w);
            o += w;
        } else if (r == '\a' || r == '\b' || r == '\f' || r == '\n' || r == '\r' || r == '\t' ||
                   r == '\v') {
            out[o++] = '\\';
            out[o++] = "abtnvfr"[r == '\a'   ? 0
                                 : r == '\b' ? 1
                                 : r == '\t' ? 2
                                 : r == '\n' ? 3
                                 : r == '\v' ? 4
                                 : r == '\f' ? 5
                                             : 6];
        } else if (r < 0x20 || r == 0x7F) {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[r >> 4];
            out[o++] = hex[r & 0xF];
        } else {
            int digits = r < 0x10000 ? 4 : 8, d;
            out[o++] = '\\';
            out[o++] = r < 0x10000 ? 'u' : 'U';
            for (d = digits - 1; d >= 0; d--)
                out[o++] = hex[(r >> (4 * d)) & 0xF];
        }
        i += w;
    }
    out[o++] = '"';
    return o;
}
