/* cmd_provision.c - `tenantctl provision`: the baseline of one namespace
 * per team and environment, the same every time (a golden path). The
 * objects are one table, each row tagged with its layer of docs/admission.md's
 * tiers table; a customer tenant gets the stricter layers (restricted Pod
 * Security, egress only to DNS and the gateway, a namespaced Role, no
 * service-account token, the sandbox RuntimeClass, a dedicated pool,
 * optionally a vCluster). Its output is valid input for `tenantctl admit
 * -c` and `tenantctl apply`; `tenantctl explain` lists the same table. */
#include <ctype.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/quantity.h"
#include "admission/tenancy.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tenantctl provision --team T --env E [flags]\n\n"
            "Prints the baseline of namespace T-E as multi-document YAML.\n\n"
            "  --team T             team or customer name (a DNS label), required\n"
            "  --env E              environment (prod, staging, dev, ...), required\n"
            "  --tenancy TIER       team (default) or customer: the stricter layers of\n"
            "                       the tiers table of docs/admission.md, and a Tenant object\n"
            "  --project P          project label (default: the team name)\n"
            "  --group G            group bound to the namespace's role (default: T)\n"
            "  --cpu Q              requests.cpu of the ResourceQuota (default 8)\n"
            "  --memory Q           requests.memory (default 32Gi)\n"
            "  --limits-memory Q    limits.memory (default: --memory)\n"
            "  --gpus Q             requests.nvidia.com/gpu (default 0)\n"
            "  --pods N             pods (default 50)\n"
            "  --pvcs N             persistentvolumeclaims (default 10)\n"
            "  --pool P             GPU NodePool the team uses (labels the namespace); for a\n"
            "                       customer, the name of its dedicated NodePool (default\n"
            "                       T-dedicated)\n"
            "  --cluster-queue CQ   Kueue ClusterQueue of the LocalQueue (default: T)\n"
            "  --pss LEVEL          pod-security.kubernetes.io/enforce (default baseline;\n"
            "                       customers: restricted, and nothing weaker)\n"
            "customer layers:\n"
            "  --gateway-namespace NS  namespace of the tenantd gateway, the one egress\n"
            "                       allowed besides DNS (default tenantd-system)\n"
            "  --gateway-port N     its port (default 8080)\n"
            "  --runtime-class RC   sandbox RuntimeClass (default gvisor; another name also\n"
            "                       needs AdmissionPolicy spec.sandbox.runtimeClassName)\n"
            "  --runtime-handler H  its CRI handler (default runsc)\n"
            "  --virtual-cluster    a vCluster in the namespace (HelmChart of the loft-sh\n"
            "                       vcluster chart, values in valuesContent)\n"
            "  --vcluster-version V pin the chart version (default: the repo's latest)\n"
            "storage (either tier; emits a Tenant and a workload-identity ServiceAccount):\n"
            "  --bucket B           the tenant's bucket (no scheme)\n"
            "  --prefix P           its key prefix, ending in '/' (default T/)\n"
            "  --storage-classes L  comma-separated StorageClasses its PVCs may use\n"
            "  --gcp-service-account EMAIL  GKE Workload Identity (iam.gke.io/gcp-service-account)\n"
            "  --aws-role-arn ARN   EKS IRSA (eks.amazonaws.com/role-arn)\n");
}

static int dns_label(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-'))
            return 0;
    return 1;
}

/* Canonical form of a quantity flag into out, or -1 with a message. */
static int canon(const char *flag, const char *v, char *out, size_t n)
{
    td_quantity q;
    td_err err;
    if (td_quantity_parse(v, &q, &err) != TD_OK || td_quantity_sign(&q) < 0) {
        fprintf(stderr, "tenantctl provision: --%s: \"%s\" is not a non-negative quantity\n",
                flag, v);
        return -1;
    }
    td_quantity_format(&q, out, n);
    return 0;
}

/* ---- the objects --------------------------------------------------------- */

static const char *pool_name(const td_provision *p, char *buf, size_t n)
{
    if (p->pool)
        return p->pool;
    snprintf(buf, n, "%s-dedicated", p->team);
    return buf;
}

static void emit_namespace(const td_provision *p, FILE *f)
{
    fprintf(f,
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n"
            "    team: %s\n    project: %s\n    environment: %s\n"
            "    pod-security.kubernetes.io/enforce: %s\n"
            "    pod-security.kubernetes.io/enforce-version: latest\n",
            p->ns, p->team, p->project, p->env, p->pss);
    if (p->customer) {
        char b[160];
        fprintf(f, "    %s: customer\n    tenantd.dev/pool: %s\n", TD_LABEL_TENANCY,
                pool_name(p, b, sizeof b));
    } else if (p->pool) {
        fprintf(f, "    tenantd.dev/pool: %s\n", p->pool);
    }
}

static void emit_rolebinding_edit(const td_provision *p, FILE *f)
{
    fprintf(f,
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n"
            "  name: %s-edit\n  namespace: %s\n"
            "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: edit\n"
            "subjects:\n- apiGroup: rbac.authorization.k8s.io\n  kind: Group\n  name: %s\n",
            p->team, p->ns, p->group);
}

/* The customer's role: workloads of its own namespace, and not the objects
 * that hold it in (NetworkPolicy, RBAC, quotas, ServiceAccounts), which the
 * ClusterRole edit would let it change. */
static void emit_role_tenant(const td_provision *p, FILE *f)
{
    fprintf(f,
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n"
            "  name: %s-tenant\n  namespace: %s\nrules:\n"
            "- apiGroups: [\"\"]\n"
            "  resources: [pods, services, configmaps, secrets, persistentvolumeclaims]\n"
            "  verbs: [get, list, watch, create, update, patch, delete]\n"
            "- apiGroups: [\"\"]\n"
            "  resources: [pods/log, pods/exec, pods/portforward, events]\n"
            "  verbs: [get, list, watch, create]\n"
            "- apiGroups: [apps]\n  resources: [deployments, statefulsets, replicasets]\n"
            "  verbs: [get, list, watch, create, update, patch, delete]\n"
            "- apiGroups: [batch]\n  resources: [jobs, cronjobs]\n"
            "  verbs: [get, list, watch, create, update, patch, delete]\n"
            "- apiGroups: [kueue.x-k8s.io]\n  resources: [workloads, localqueues]\n"
            "  verbs: [get, list, watch]\n",
            p->team, p->ns);
}

static void emit_rolebinding_tenant(const td_provision *p, FILE *f)
{
    fprintf(f,
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n"
            "  name: %s-tenant\n  namespace: %s\n"
            "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: %s-tenant\n"
            "subjects:\n- apiGroup: rbac.authorization.k8s.io\n  kind: Group\n  name: %s\n",
            p->team, p->ns, p->team, p->group);
}

static void emit_default_deny(const td_provision *p, FILE *f)
{
    fprintf(f,
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n"
            "  name: default-deny\n  namespace: %s\nspec:\n  podSelector: {}\n"
            "  policyTypes: [Ingress, Egress]\n",
            p->ns);
}

static void emit_same_namespace(const td_provision *p, FILE *f)
{
    fprintf(f,
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n"
            "  name: allow-same-namespace\n  namespace: %s\nspec:\n  podSelector: {}\n"
            "  policyTypes: [Ingress, Egress]\n"
            "  ingress:\n  - from:\n    - podSelector: {}\n"
            "  egress:\n  - to:\n    - podSelector: {}\n",
            p->ns);
}

static void emit_dns(const td_provision *p, FILE *f)
{
    fprintf(f,
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n"
            "  name: allow-dns-egress\n  namespace: %s\nspec:\n  podSelector: {}\n"
            "  policyTypes: [Egress]\n"
            "  egress:\n  - to:\n    - namespaceSelector:\n        matchLabels:\n"
            "          kubernetes.io/metadata.name: kube-system\n"
            "      podSelector:\n        matchLabels:\n          k8s-app: kube-dns\n"
            "    ports:\n    - {protocol: UDP, port: 53}\n    - {protocol: TCP, port: 53}\n",
            p->ns);
}

static void emit_gateway_egress(const td_provision *p, FILE *f)
{
    fprintf(f,
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n"
            "  name: allow-gateway-egress\n  namespace: %s\nspec:\n  podSelector: {}\n"
            "  policyTypes: [Egress]\n"
            "  egress:\n  - to:\n    - namespaceSelector:\n        matchLabels:\n"
            "          kubernetes.io/metadata.name: %s\n"
            "    ports:\n    - {protocol: TCP, port: %d}\n",
            p->ns, p->gateway_ns, p->gateway_port);
}

static void emit_quota(const td_provision *p, FILE *f)
{
    fprintf(f,
            "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: %s-compute\n"
            "  namespace: %s\nspec:\n  hard:\n"
            "    requests.cpu: \"%s\"\n    requests.memory: \"%s\"\n    limits.memory: \"%s\"\n"
            "    requests.nvidia.com/gpu: \"%s\"\n    pods: \"%s\"\n"
            "    persistentvolumeclaims: \"%s\"\n",
            p->ns, p->ns, p->cpu, p->mem, p->lmem, p->gpus, p->pods, p->pvcs);
}

static void emit_limitrange(const td_provision *p, FILE *f)
{
    fprintf(f,
            "apiVersion: v1\nkind: LimitRange\nmetadata:\n  name: defaults\n"
            "  namespace: %s\nspec:\n  limits:\n  - type: Container\n"
            "    defaultRequest: {cpu: 100m, memory: 256Mi}\n"
            "    default: {cpu: \"1\", memory: 1Gi}\n",
            p->ns);
}

static void emit_localqueue(const td_provision *p, FILE *f)
{
    fprintf(f,
            "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata:\n"
            "  name: default\n  namespace: %s\nspec:\n  clusterQueue: %s\n",
            p->ns, p->cq);
}

static void emit_default_sa(const td_provision *p, FILE *f)
{
    fprintf(f,
            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: default\n  namespace: %s\n"
            "automountServiceAccountToken: false\n",
            p->ns);
}

static void emit_runtimeclass(const td_provision *p, FILE *f)
{
    fprintf(f,
            "# Once per cluster; the same object for every customer.\n"
            "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: %s\nhandler: %s\n",
            p->runtime_class, p->runtime_handler);
}

static void emit_pool(const td_provision *p, FILE *f)
{
    char b[160];
    fprintf(f,
            "# Put these nodes aside for %s alone:\n"
            "#   kubectl taint nodes NODE %s=%s:NoSchedule\n"
            "#   kubectl label nodes NODE %s=%s\n"
            "apiVersion: tenantd.dev/v1alpha1\nkind: NodePool\nmetadata:\n  name: %s\nspec:\n"
            "  taint: {key: %s, value: %s, effect: NoSchedule}\n"
            "  nodeSelector: {%s: %s}\n  tenants: [%s]\n",
            p->team, TD_TENANT_TAINT_KEY, p->team, TD_TENANT_TAINT_KEY, p->team,
            pool_name(p, b, sizeof b), TD_TENANT_TAINT_KEY, p->team, TD_TENANT_TAINT_KEY,
            p->team, p->team);
}

static void emit_storage_list(const char *csv, FILE *f)
{
    fputc('[', f);
    for (const char *s = csv; *s; s++) {
        if (*s == ',')
            fputs(", ", f);
        else
            fputc(*s, f);
    }
    fputc(']', f);
}

static void emit_tenant(const td_provision *p, FILE *f)
{
    fprintf(f,
            "apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata:\n  name: %s\nspec:\n"
            "  tenancy: %s\n  namespaces: [%s]\n"
            "  labels: {team: %s, project: %s, environment: %s}\n",
            p->team, p->customer ? "customer" : "team", p->ns, p->team, p->project, p->env);
    if (!p->bucket)
        return;
    fprintf(f, "  storage:\n    bucket: %s\n    prefix: %s\n", p->bucket, p->prefix);
    if (p->storage_classes) {
        fputs("    storageClasses: ", f);
        emit_storage_list(p->storage_classes, f);
        fputc('\n', f);
    }
    if (p->gcp_sa || p->aws_role) {
        fputs("    identity:\n", f);
        if (p->gcp_sa)
            fprintf(f, "      gcpServiceAccount: %s\n", p->gcp_sa);
        if (p->aws_role)
            fprintf(f, "      awsRoleArn: \"%s\"\n", p->aws_role);
    }
}

static void emit_storage_sa(const td_provision *p, FILE *f)
{
    fprintf(f, "# Pods that read gs:// or s3://%s/%s run as this ServiceAccount.\n", p->bucket,
            p->prefix);
    fprintf(f, "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: %s-data\n"
               "  namespace: %s\n",
            p->team, p->ns);
    if (p->gcp_sa || p->aws_role) {
        fputs("  annotations:\n", f);
        if (p->gcp_sa)
            fprintf(f, "    iam.gke.io/gcp-service-account: %s\n", p->gcp_sa);
        if (p->aws_role)
            fprintf(f, "    eks.amazonaws.com/role-arn: \"%s\"\n", p->aws_role);
    }
    if (p->customer)
        fputs("automountServiceAccountToken: false\n", f);
}

/* vCluster in the tenant's host namespace, as a k3s/RKE2 helm-controller
 * HelmChart. The values keys are the loft-sh/vcluster chart's (chart/
 * values.yaml): pods and PVCs sync to this namespace, so its
 * ResourceQuota, LimitRange, NetworkPolicies and tenantd's admission apply
 * to them; vCluster's own quota, limit range and network policy stay off
 * because the host's already hold (and its default network policy allows
 * egress to 0.0.0.0/0). */
static void emit_vcluster(const td_provision *p, FILE *f)
{
    fprintf(f,
            "apiVersion: helm.cattle.io/v1\nkind: HelmChart\nmetadata:\n  name: %s-vcluster\n"
            "  namespace: %s\nspec:\n  repo: https://charts.loft.sh\n  chart: vcluster\n",
            p->team, p->ns);
    if (p->vcluster_version)
        fprintf(f, "  version: \"%s\"\n", p->vcluster_version);
    fprintf(f,
            "  targetNamespace: %s\n  valuesContent: |-\n"
            "    sync:\n      toHost:\n        pods:\n          enabled: true\n"
            "          runtimeClassName: %s\n"
            "        persistentVolumeClaims:\n          enabled: true\n"
            "        networkPolicies:\n          enabled: false\n"
            "      fromHost:\n        nodes:\n          enabled: false\n"
            "        runtimeClasses:\n          enabled: false\n"
            "    controlPlane:\n      distro:\n        k8s:\n          enabled: true\n"
            "    policies:\n      resourceQuota:\n        enabled: false\n"
            "      limitRange:\n        enabled: false\n"
            "      networkPolicy:\n        enabled: false\n",
            p->ns, p->runtime_class);
}

/* What the vCluster needs through default-deny: its control plane (pods
 * app=vcluster, release=NAME) reaches the host API server and is reached
 * by the synced pods on 8443; synced pods reach the vCluster's DNS. */
static void emit_vcluster_netpol(const td_provision *p, FILE *f)
{
    fprintf(f,
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n"
            "  name: allow-vcluster-control-plane\n  namespace: %s\nspec:\n"
            "  podSelector:\n    matchLabels: {app: vcluster, release: %s-vcluster}\n"
            "  policyTypes: [Ingress, Egress]\n"
            "  ingress:\n  - from:\n    - podSelector: {}\n"
            "    ports:\n    - {protocol: TCP, port: 8443}\n"
            "  egress:\n  - ports:\n    - {protocol: TCP, port: 443}\n"
            "    - {protocol: TCP, port: 6443}\n"
            "---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n"
            "  name: allow-vcluster-workloads\n  namespace: %s\nspec:\n  podSelector: {}\n"
            "  policyTypes: [Egress]\n"
            "  egress:\n  - to:\n    - podSelector:\n"
            "        matchLabels: {app: vcluster, release: %s-vcluster}\n"
            "    ports:\n    - {protocol: TCP, port: 8443}\n"
            "  - to:\n    - podSelector:\n        matchLabels: {vcluster.loft.sh/managed-by: "
            "%s-vcluster}\n"
            "    ports:\n    - {protocol: UDP, port: 1053}\n    - {protocol: TCP, port: 1053}\n",
            p->ns, p->team, p->ns, p->team, p->team);
}

static int always(const td_provision *p)
{
    (void)p;
    return 1;
}
static int team_only(const td_provision *p)
{
    return !p->customer;
}
static int customer_only(const td_provision *p)
{
    return p->customer;
}
static int with_tenant(const td_provision *p)
{
    return p->customer || p->bucket;
}
static int with_storage(const td_provision *p)
{
    return p->bucket != NULL;
}
static int with_vcluster(const td_provision *p)
{
    return p->customer && p->virtual_cluster;
}

typedef struct {
    const char *layer;
    const char *kind;
    const char *name; /* %1$s team, %2$s namespace; "" = use name_fn */
    int (*applies)(const td_provision *p);
    void (*emit)(const td_provision *p, FILE *f);
    int names; /* extra objects emit writes (the vCluster pair) */
} object_row;

/* Layer names are the rows of docs/admission.md's tiers table. */
static const object_row objects[] = {
    {"namespace + Pod Security", "Namespace", "@ns", always, emit_namespace, 0},
    {"RBAC", "RoleBinding", "@team-edit", team_only, emit_rolebinding_edit, 0},
    {"RBAC", "Role", "@team-tenant", customer_only, emit_role_tenant, 0},
    {"RBAC", "RoleBinding", "@team-tenant", customer_only, emit_rolebinding_tenant, 0},
    {"network", "NetworkPolicy", "default-deny", always, emit_default_deny, 0},
    {"network", "NetworkPolicy", "allow-same-namespace", team_only, emit_same_namespace, 0},
    {"network", "NetworkPolicy", "allow-dns-egress", always, emit_dns, 0},
    {"network", "NetworkPolicy", "allow-gateway-egress", customer_only, emit_gateway_egress, 0},
    {"quota", "ResourceQuota", "@ns-compute", always, emit_quota, 0},
    {"quota", "LimitRange", "defaults", always, emit_limitrange, 0},
    {"quota", "LocalQueue", "default", always, emit_localqueue, 0},
    {"service-account token", "ServiceAccount", "default", customer_only, emit_default_sa, 0},
    {"sandbox runtime", "RuntimeClass", "@runtime", customer_only, emit_runtimeclass, 0},
    {"dedicated pool", "NodePool", "@pool", customer_only, emit_pool, 0},
    {"tenant", "Tenant", "@team", with_tenant, emit_tenant, 0},
    {"storage", "ServiceAccount", "@team-data", with_storage, emit_storage_sa, 0},
    {"virtual cluster", "HelmChart", "@team-vcluster", with_vcluster, emit_vcluster, 0},
    {"virtual cluster", "NetworkPolicy", "allow-vcluster-control-plane", with_vcluster,
     emit_vcluster_netpol, 1},
};

#define NOBJECTS (sizeof objects / sizeof objects[0])

static void row_name(const td_provision *p, const object_row *r, char *out, size_t n)
{
    char b[160];
    const char *nm = r->name;
    if (nm[0] != '@')
        snprintf(out, n, "%s", nm);
    else if (strcmp(nm, "@ns") == 0)
        snprintf(out, n, "%s", p->ns);
    else if (strcmp(nm, "@ns-compute") == 0)
        snprintf(out, n, "%s-compute", p->ns);
    else if (strcmp(nm, "@runtime") == 0)
        snprintf(out, n, "%s", p->runtime_class);
    else if (strcmp(nm, "@pool") == 0)
        snprintf(out, n, "%s", pool_name(p, b, sizeof b));
    else if (strcmp(nm, "@team") == 0)
        snprintf(out, n, "%s", p->team);
    else /* "@team-suffix" */
        snprintf(out, n, "%s%s", p->team, nm + 5);
}

void td__provision_each(const td_provision *p,
                        void (*fn)(void *ctx, const td_provision_item *it), void *ctx)
{
    for (size_t i = 0; i < NOBJECTS; i++) {
        if (!objects[i].applies(p))
            continue;
        td_provision_item it = {objects[i].layer, objects[i].kind, ""};
        row_name(p, &objects[i], it.name, sizeof it.name);
        fn(ctx, &it);
        if (objects[i].names) {
            snprintf(it.name, sizeof it.name, "allow-vcluster-workloads");
            fn(ctx, &it);
        }
    }
}

static int valid_csv_names(const char *csv)
{
    char buf[512];
    if (!*csv || strlen(csv) >= sizeof buf)
        return 0;
    snprintf(buf, sizeof buf, "%s", csv);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ","))
        if (!dns_label(tok))
            return 0;
    return csv[strlen(csv) - 1] != ',' && !strstr(csv, ",,") && csv[0] != ',';
}

/* `tenantctl provision`'s flags, and the strings p points into. */
typedef struct {
    td_provision p;
    const char *cpu, *mem, *lmem, *gpus, *pods, *pvcs; /* as given */
    const char *tenancy, *pss, *gwport;
    char ns[140], prefix[200];
    char qcpu[TD_QUANTITY_STR_MAX], qmem[TD_QUANTITY_STR_MAX], qlmem[TD_QUANTITY_STR_MAX],
        qgpu[TD_QUANTITY_STR_MAX], qpods[TD_QUANTITY_STR_MAX], qpvcs[TD_QUANTITY_STR_MAX];
} prov_args;

enum { O_TEAM = 1, O_ENV, O_PROJECT, O_GROUP, O_CPU, O_MEM, O_LMEM, O_GPUS, O_PODS, O_PVCS,
       O_POOL, O_CQ, O_PSS, O_TENANCY, O_GWNS, O_GWPORT, O_RC, O_RCH, O_VC, O_VCVER,
       O_BUCKET, O_PREFIX, O_SC, O_GSA, O_AWS };

/* Prints "tenantctl provision: " and the message; TD_EXIT_USAGE. */
static int bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("tenantctl provision: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return TD_EXIT_USAGE;
}

/* One flag c into a; false if it is none of provision's. */
static bool take_flag(prov_args *a, int c, const char *arg)
{
    td_provision *p = &a->p;
    switch (c) {
    case O_TEAM: p->team = arg; break;
    case O_ENV: p->env = arg; break;
    case O_PROJECT: p->project = arg; break;
    case O_GROUP: p->group = arg; break;
    case O_CPU: a->cpu = arg; break;
    case O_MEM: a->mem = arg; break;
    case O_LMEM: a->lmem = arg; break;
    case O_GPUS: a->gpus = arg; break;
    case O_PODS: a->pods = arg; break;
    case O_PVCS: a->pvcs = arg; break;
    case O_POOL: p->pool = arg; break;
    case O_CQ: p->cq = arg; break;
    case O_PSS: a->pss = arg; break;
    case O_TENANCY: a->tenancy = arg; break;
    case O_GWNS: p->gateway_ns = arg; break;
    case O_GWPORT: a->gwport = arg; break;
    case O_RC: p->runtime_class = arg; break;
    case O_RCH: p->runtime_handler = arg; break;
    case O_VC: p->virtual_cluster = 1; break;
    case O_VCVER: p->vcluster_version = arg; break;
    case O_BUCKET: p->bucket = arg; break;
    case O_PREFIX: p->prefix = arg; break;
    case O_SC: p->storage_classes = arg; break;
    case O_GSA: p->gcp_sa = arg; break;
    case O_AWS: p->aws_role = arg; break;
    default: return false;
    }
    return true;
}

/* The command line into a, with the defaults; -1 to go on, else the exit
 * status (TD_EXIT_OK after --help), the mistake and the usage printed. */
static int parse_flags(int argc, char **argv, prov_args *a)
{
    static const struct option longopts[] = {
        {"team", required_argument, NULL, O_TEAM},
        {"env", required_argument, NULL, O_ENV},
        {"project", required_argument, NULL, O_PROJECT},
        {"group", required_argument, NULL, O_GROUP},
        {"cpu", required_argument, NULL, O_CPU},
        {"memory", required_argument, NULL, O_MEM},
        {"limits-memory", required_argument, NULL, O_LMEM},
        {"gpus", required_argument, NULL, O_GPUS},
        {"pods", required_argument, NULL, O_PODS},
        {"pvcs", required_argument, NULL, O_PVCS},
        {"pool", required_argument, NULL, O_POOL},
        {"cluster-queue", required_argument, NULL, O_CQ},
        {"pss", required_argument, NULL, O_PSS},
        {"tenancy", required_argument, NULL, O_TENANCY},
        {"gateway-namespace", required_argument, NULL, O_GWNS},
        {"gateway-port", required_argument, NULL, O_GWPORT},
        {"runtime-class", required_argument, NULL, O_RC},
        {"runtime-handler", required_argument, NULL, O_RCH},
        {"virtual-cluster", no_argument, NULL, O_VC},
        {"vcluster-version", required_argument, NULL, O_VCVER},
        {"bucket", required_argument, NULL, O_BUCKET},
        {"prefix", required_argument, NULL, O_PREFIX},
        {"storage-classes", required_argument, NULL, O_SC},
        {"gcp-service-account", required_argument, NULL, O_GSA},
        {"aws-role-arn", required_argument, NULL, O_AWS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return TD_EXIT_OK;
        }
        if (!take_flag(a, c, optarg)) {
            fprintf(stderr, "tenantctl provision: unknown or incomplete flag \"%s\"\n",
                    argv[optind - 1]);
            usage(stderr);
            return TD_EXIT_USAGE;
        }
    }
    if (!a->p.team || !a->p.env || optind < argc) {
        fprintf(stderr, "tenantctl provision: %s\n",
                optind < argc ? "unexpected argument" : "--team and --env are required");
        usage(stderr);
        return TD_EXIT_USAGE;
    }
    return -1;
}

/* The tier (--tenancy) and what goes with it: Pod Security, vCluster. */
static int check_tier(prov_args *a)
{
    td_provision *p = &a->p;
    if (strcmp(a->tenancy, "team") == 0)
        p->customer = 0;
    else if (strcmp(a->tenancy, "customer") == 0)
        p->customer = 1;
    else
        return bad("--tenancy: \"%s\" is not a tier; use team or customer", a->tenancy);
    const char *pss = a->pss ? a->pss : p->customer ? "restricted" : "baseline";
    if (strcmp(pss, "privileged") && strcmp(pss, "baseline") && strcmp(pss, "restricted"))
        return bad("--pss must be privileged, baseline or restricted");
    if (p->customer && strcmp(pss, "restricted") != 0)
        return bad("--pss: a customer namespace enforces restricted; \"%s\" is weaker", pss);
    if (p->virtual_cluster && !p->customer)
        return bad("--virtual-cluster is a customer layer; add --tenancy customer");
    if (p->vcluster_version && !p->virtual_cluster)
        return bad("--vcluster-version needs --virtual-cluster");
    p->pss = pss;
    return -1;
}

/* The names, defaulted from --team, each a DNS label; the namespace
 * TEAM-ENV; the gateway's port. */
static int check_names(prov_args *a)
{
    td_provision *p = &a->p;
    if (!p->project)
        p->project = p->team;
    if (!p->group)
        p->group = p->team;
    if (!p->cq)
        p->cq = p->team;
    snprintf(a->ns, sizeof a->ns, "%s-%s", p->team, p->env);
    p->ns = a->ns;
    const struct {
        const char *flag, *value;
    } names[] = {{"team", p->team},
                 {"env", p->env},
                 {"project", p->project},
                 {"cluster-queue", p->cq},
                 {"pool", p->pool},
                 {"gateway-namespace", p->gateway_ns},
                 {"runtime-class", p->runtime_class},
                 {"runtime-handler", p->runtime_handler}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].value && !dns_label(names[i].value))
            return bad("--%s: \"%s\" must be a DNS label (lowercase letters, digits and '-', at "
                       "most 63)",
                       names[i].flag, names[i].value);
    if (!dns_label(a->ns))
        return bad("namespace \"%s\" would be longer than 63", a->ns);
    char *end = NULL;
    long port = strtol(a->gwport, &end, 10);
    if (!*a->gwport || *end || port < 1 || port > 65535)
        return bad("--gateway-port: \"%s\" is not a port (1-65535)", a->gwport);
    p->gateway_port = (int)port;
    return -1;
}

/* The object store flags: --bucket, and --prefix (default TEAM/), the
 * StorageClasses and the cloud identities that need it. */
static int check_bucket(prov_args *a)
{
    td_provision *p = &a->p;
    if ((p->prefix || p->storage_classes || p->gcp_sa || p->aws_role) && !p->bucket)
        return bad("--prefix, --storage-classes and the identity flags need --bucket");
    if (!p->bucket)
        return -1;
    td_object_uri u;
    char uri[300];
    td_err err;
    snprintf(uri, sizeof uri, "s3://%s/", p->bucket);
    if (td_object_uri_parse(uri, &u, &err) != TD_OK || strchr(p->bucket, '/'))
        return bad("--bucket: \"%s\" is not a bucket name (no scheme, no '/')", p->bucket);
    if (!p->prefix) {
        snprintf(a->prefix, sizeof a->prefix, "%s/", p->team);
        p->prefix = a->prefix;
    }
    const char *why = td_storage_prefix_problem(p->prefix);
    if (why)
        return bad("--prefix: \"%s\" %s", p->prefix, why);
    if (p->storage_classes && !valid_csv_names(p->storage_classes))
        return bad("--storage-classes: \"%s\" must be comma-separated StorageClass names",
                   p->storage_classes);
    size_t gn = p->gcp_sa ? strlen(p->gcp_sa) : 0;
    if (p->gcp_sa && (!strchr(p->gcp_sa, '@') || gn < 24 ||
                      strcmp(p->gcp_sa + gn - 24, ".iam.gserviceaccount.com") != 0))
        return bad("--gcp-service-account: \"%s\" is not NAME@PROJECT.iam.gserviceaccount.com",
                   p->gcp_sa);
    if (p->aws_role && (strncmp(p->aws_role, "arn:aws", 7) != 0 || !strstr(p->aws_role, ":role/")))
        return bad("--aws-role-arn: \"%s\" is not arn:aws:iam::ACCOUNT:role/NAME", p->aws_role);
    return -1;
}

/* The sizes in their canonical Kubernetes form (--limits-memory defaults
 * to --memory). */
static int canon_sizes(prov_args *a)
{
    td_provision *p = &a->p;
    if (canon("cpu", a->cpu, a->qcpu, sizeof a->qcpu) ||
        canon("memory", a->mem, a->qmem, sizeof a->qmem) ||
        canon("limits-memory", a->lmem ? a->lmem : a->mem, a->qlmem, sizeof a->qlmem) ||
        canon("gpus", a->gpus, a->qgpu, sizeof a->qgpu) ||
        canon("pods", a->pods, a->qpods, sizeof a->qpods) ||
        canon("pvcs", a->pvcs, a->qpvcs, sizeof a->qpvcs))
        return TD_EXIT_USAGE;
    p->cpu = a->qcpu;
    p->mem = a->qmem;
    p->lmem = a->qlmem;
    p->gpus = a->qgpu;
    p->pods = a->qpods;
    p->pvcs = a->qpvcs;
    return -1;
}

int td_cmd_provision(int argc, char **argv)
{
    prov_args a = {.cpu = "8", .mem = "32Gi", .gpus = "0", .pods = "50", .pvcs = "10",
                   .tenancy = "team", .gwport = "8080"};
    a.p.gateway_ns = "tenantd-system";
    a.p.runtime_class = TD_SANDBOX_RUNTIME_CLASS;
    a.p.runtime_handler = TD_SANDBOX_HANDLER;
    int rc;
    if ((rc = parse_flags(argc, argv, &a)) != -1 || (rc = check_tier(&a)) != -1 ||
        (rc = check_names(&a)) != -1 || (rc = check_bucket(&a)) != -1 ||
        (rc = canon_sizes(&a)) != -1)
        return rc;
    printf("# Baseline of namespace %s (tenancy %s), generated by tenantctl provision.\n", a.ns,
           a.p.customer ? "customer" : "team");
    int first = 1;
    for (size_t i = 0; i < NOBJECTS; i++) {
        if (!objects[i].applies(&a.p))
            continue;
        if (!first)
            fputs("---\n", stdout);
        first = 0;
        objects[i].emit(&a.p, stdout);
    }
    return fflush(stdout) == 0 ? TD_EXIT_OK : TD_EXIT_USAGE;
}
