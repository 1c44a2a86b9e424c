/* cmd_provision.c - `tenantctl provision`: the baseline of one namespace
 * per team and environment, the same every time (a golden path): Namespace,
 * RoleBinding, NetworkPolicies, ResourceQuota, LimitRange, LocalQueue. Its
 * output is valid input for `tenantctl admit -c` and `tenantctl apply`. */
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "tenantd/quantity.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tenantctl provision --team T --env E [flags]\n\n"
            "Prints the baseline of namespace T-E as multi-document YAML.\n\n"
            "  --team T             team name (a DNS label), required\n"
            "  --env E              environment (prod, staging, dev, ...), required\n"
            "  --project P          project label (default: the team name)\n"
            "  --group G            group bound to the namespace's edit role (default: T)\n"
            "  --cpu Q              requests.cpu of the ResourceQuota (default 8)\n"
            "  --memory Q           requests.memory (default 32Gi)\n"
            "  --limits-memory Q    limits.memory (default: --memory)\n"
            "  --gpus Q             requests.nvidia.com/gpu (default 0)\n"
            "  --pods N             pods (default 50)\n"
            "  --pvcs N             persistentvolumeclaims (default 10)\n"
            "  --pool P             GPU NodePool the team uses (labels the namespace)\n"
            "  --cluster-queue CQ   Kueue ClusterQueue of the LocalQueue (default: T)\n"
            "  --pss LEVEL          pod-security.kubernetes.io/enforce (default baseline)\n");
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

int td_cmd_provision(int argc, char **argv)
{
    enum { O_TEAM = 1, O_ENV, O_PROJECT, O_GROUP, O_CPU, O_MEM, O_LMEM, O_GPUS, O_PODS, O_PVCS,
           O_POOL, O_CQ, O_PSS };
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
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *team = NULL, *env = NULL, *project = NULL, *group = NULL, *pool = NULL,
               *cq = NULL, *pss = "baseline";
    const char *cpu = "8", *mem = "32Gi", *lmem = NULL, *gpus = "0", *pods = "50", *pvcs = "10";
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_TEAM: team = optarg; break;
        case O_ENV: env = optarg; break;
        case O_PROJECT: project = optarg; break;
        case O_GROUP: group = optarg; break;
        case O_CPU: cpu = optarg; break;
        case O_MEM: mem = optarg; break;
        case O_LMEM: lmem = optarg; break;
        case O_GPUS: gpus = optarg; break;
        case O_PODS: pods = optarg; break;
        case O_PVCS: pvcs = optarg; break;
        case O_POOL: pool = optarg; break;
        case O_CQ: cq = optarg; break;
        case O_PSS: pss = optarg; break;
        case 'h':
            usage(stdout);
            return TD_EXIT_OK;
        default:
            fprintf(stderr, "tenantctl provision: unknown or incomplete flag \"%s\"\n",
                    argv[optind - 1]);
            usage(stderr);
            return TD_EXIT_USAGE;
        }
    }
    if (!team || !env || optind < argc) {
        fprintf(stderr, "tenantctl provision: %s\n",
                optind < argc ? "unexpected argument" : "--team and --env are required");
        usage(stderr);
        return TD_EXIT_USAGE;
    }
    if (!project)
        project = team;
    if (!group)
        group = team;
    if (!cq)
        cq = team;
    if (!lmem)
        lmem = mem;
    char ns[140];
    snprintf(ns, sizeof ns, "%s-%s", team, env);
    struct {
        const char *flag, *value;
    } names[] = {{"team", team}, {"env", env}, {"project", project}, {"cluster-queue", cq},
                 {"pool", pool}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].value && !dns_label(names[i].value)) {
            fprintf(stderr,
                    "tenantctl provision: --%s: \"%s\" must be a DNS label (lowercase letters, "
                    "digits and '-', at most 63)\n",
                    names[i].flag, names[i].value);
            return TD_EXIT_USAGE;
        }
    if (!dns_label(ns)) {
        fprintf(stderr, "tenantctl provision: namespace \"%s\" would be longer than 63\n", ns);
        return TD_EXIT_USAGE;
    }
    if (strcmp(pss, "privileged") && strcmp(pss, "baseline") && strcmp(pss, "restricted")) {
        fprintf(stderr, "tenantctl provision: --pss must be privileged, baseline or restricted\n");
        return TD_EXIT_USAGE;
    }
    char qcpu[TD_QUANTITY_STR_MAX], qmem[TD_QUANTITY_STR_MAX], qlmem[TD_QUANTITY_STR_MAX],
        qgpu[TD_QUANTITY_STR_MAX], qpods[TD_QUANTITY_STR_MAX], qpvcs[TD_QUANTITY_STR_MAX];
    if (canon("cpu", cpu, qcpu, sizeof qcpu) || canon("memory", mem, qmem, sizeof qmem) ||
        canon("limits-memory", lmem, qlmem, sizeof qlmem) ||
        canon("gpus", gpus, qgpu, sizeof qgpu) || canon("pods", pods, qpods, sizeof qpods) ||
        canon("pvcs", pvcs, qpvcs, sizeof qpvcs))
        return TD_EXIT_USAGE;

    printf("# Baseline of namespace %s, generated by tenantctl provision.\n", ns);
    printf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n"
           "    team: %s\n    project: %s\n    environment: %s\n"
           "    pod-security.kubernetes.io/enforce: %s\n"
           "    pod-security.kubernetes.io/enforce-version: latest\n",
           ns, team, project, env, pss);
    if (pool)
        printf("    tenantd.dev/pool: %s\n", pool);
    printf("---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n"
           "  name: %s-edit\n  namespace: %s\n"
           "roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: edit\n"
           "subjects:\n- apiGroup: rbac.authorization.k8s.io\n  kind: Group\n  name: %s\n",
           team, ns, group);
    printf("---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n"
           "  name: default-deny\n  namespace: %s\nspec:\n  podSelector: {}\n"
           "  policyTypes: [Ingress, Egress]\n",
           ns);
    printf("---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n"
           "  name: allow-same-namespace\n  namespace: %s\nspec:\n  podSelector: {}\n"
           "  policyTypes: [Ingress, Egress]\n"
           "  ingress:\n  - from:\n    - podSelector: {}\n"
           "  egress:\n  - to:\n    - podSelector: {}\n",
           ns);
    printf("---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n"
           "  name: allow-dns-egress\n  namespace: %s\nspec:\n  podSelector: {}\n"
           "  policyTypes: [Egress]\n"
           "  egress:\n  - to:\n    - namespaceSelector:\n        matchLabels:\n"
           "          kubernetes.io/metadata.name: kube-system\n"
           "      podSelector:\n        matchLabels:\n          k8s-app: kube-dns\n"
           "    ports:\n    - {protocol: UDP, port: 53}\n    - {protocol: TCP, port: 53}\n",
           ns);
    printf("---\napiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: %s-compute\n"
           "  namespace: %s\nspec:\n  hard:\n"
           "    requests.cpu: \"%s\"\n    requests.memory: \"%s\"\n    limits.memory: \"%s\"\n"
           "    requests.nvidia.com/gpu: \"%s\"\n    pods: \"%s\"\n"
           "    persistentvolumeclaims: \"%s\"\n",
           ns, ns, qcpu, qmem, qlmem, qgpu, qpods, qpvcs);
    printf("---\napiVersion: v1\nkind: LimitRange\nmetadata:\n  name: defaults\n"
           "  namespace: %s\nspec:\n  limits:\n  - type: Container\n"
           "    defaultRequest: {cpu: 100m, memory: 256Mi}\n"
           "    default: {cpu: \"1\", memory: 1Gi}\n",
           ns);
    printf("---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata:\n"
           "  name: default\n  namespace: %s\nspec:\n  clusterQueue: %s\n",
           ns, cq);
    return TD_EXIT_OK;
}
