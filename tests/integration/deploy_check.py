"""deploy_check.py - the checks of test_deploy.sh that read YAML and JSON.

  deploy_check.py render OVERLAY RENDERED.yaml OUTDIR
      checks the objects `kubectl kustomize deploy/overlays/OVERLAY` rendered
      and writes OUTDIR/pod.yaml (the Deployment's pod template as a Pod),
      OUTDIR/namespace.yaml, OUTDIR/args (one per line), OUTDIR/mounts
      (NAME MOUNTPATH per line), OUTDIR/config/* (the ConfigMap's files)
  deploy_check.py mutate POD.yaml HOW OUT.yaml
      writes the pod with one securityContext field broken (HOW)
  deploy_check.py metrics RULES.yaml DASHBOARD.json
      prints every metric name the rules' and the dashboard's queries read,
      one per line (recording rules' own names excluded)
  deploy_check.py labels RULES.yaml DASHBOARD.json
      prints METRIC LABEL VALUE for every label value the queries select
  deploy_check.py webhook-regex RENDERED.yaml REGEX
      checks that REGEX matches the name of each rendered webhook
  deploy_check.py runbooks RULES.yaml OPERATIONS.md

Each check prints "ok - ..." or "not ok - ..."; test_deploy.sh counts them.
"""
import json
import re
import sys

import yaml


def report(cond, what):
    print(("ok - " if cond else "not ok - ") + what)
    return cond


def by_kind(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


def one(docs, kind, name=None):
    found = [d for d in by_kind(docs, kind) if name is None or d["metadata"]["name"] == name]
    return found[0] if len(found) == 1 else None


def render(overlay, path, outdir):
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    kinds = sorted({d["kind"] for d in docs})
    want = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap",
            "Service", "Deployment", "PodDisruptionBudget", "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration", "Certificate", "Issuer"}
    if overlay == "single":
        want.add("PersistentVolumeClaim")
    report(want <= set(kinds), f"{overlay}: renders {', '.join(sorted(want))} (got {', '.join(kinds)})")
    report("Secret" not in kinds, f"{overlay}: no Secret is rendered (secrets are references)")

    ns = one(docs, "Namespace")
    nsname = ns["metadata"]["name"] if ns else None
    labels = ns["metadata"].get("labels", {}) if ns else {}
    report(labels.get("pod-security.kubernetes.io/enforce") == "restricted",
           f"{overlay}: namespace {nsname} enforces Pod Security restricted")
    namespaced = [d for d in docs if d["kind"] not in (
        "Namespace", "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration")]
    report(all(d["metadata"].get("namespace") == nsname for d in namespaced),
           f"{overlay}: every namespaced object is in {nsname}")

    dep = one(docs, "Deployment")
    if not report(dep is not None, f"{overlay}: one Deployment"):
        return
    spec = dep["spec"]
    pod = spec["template"]["spec"]
    ctr = pod["containers"][0]
    args = [str(a) for a in ctr.get("args", [])]
    replicas = {"single": 1, "ha": 3}[overlay]
    report(spec.get("replicas") == replicas, f"{overlay}: {replicas} replica(s) (got {spec.get('replicas')})")
    report(re.fullmatch(r"registry\.example\.com/platform/tenantd:[\w.-]+", ctr["image"]) is not None,
           f"{overlay}: image set by the kustomization's images: entry ({ctr['image']})")
    report(pod.get("automountServiceAccountToken") is False and
           pod.get("serviceAccountName") == "tenantd",
           f"{overlay}: runs as ServiceAccount tenantd with no API token mounted")

    # probes: on the admin listener's port, over HTTPS, /healthz and /readyz
    ports = {p["name"]: p["containerPort"] for p in ctr.get("ports", [])}
    admin = args[args.index("--admin-listen") + 1] if "--admin-listen" in args else ""
    report(admin.endswith(f":{ports.get('admin')}"),
           f"{overlay}: port 'admin' ({ports.get('admin')}) is --admin-listen's ({admin})")
    listen = args[args.index("--listen") + 1] if "--listen" in args else ""
    report(listen.endswith(f":{ports.get('gateway')}"),
           f"{overlay}: port 'gateway' ({ports.get('gateway')}) is --listen's ({listen})")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"),
                        ("startupProbe", "/healthz")):
        g = ctr.get(probe, {}).get("httpGet", {})
        report(g.get("path") == path and g.get("port") == "admin" and g.get("scheme") == "HTTPS",
               f"{overlay}: {probe} is GET {path} on the admin port over HTTPS ({g})")
    res = ctr.get("resources", {})
    report(all(k in res.get("requests", {}) for k in ("cpu", "memory")) and
           "memory" in res.get("limits", {}),
           f"{overlay}: cpu and memory requests, a memory limit")
    sc, psc = ctr.get("securityContext", {}), pod.get("securityContext", {})
    report(sc.get("readOnlyRootFilesystem") is True and sc.get("allowPrivilegeEscalation") is False
           and sc.get("capabilities", {}).get("drop") == ["ALL"] and psc.get("runAsNonRoot") is True
           and isinstance(psc.get("runAsUser"), int) and psc["runAsUser"] > 0
           and psc.get("seccompProfile", {}).get("type") == "RuntimeDefault",
           f"{overlay}: securityContext: non-root uid, no privilege escalation, no capabilities, "
           "RuntimeDefault seccomp, read-only root filesystem")

    # volumes: the ConfigMap and Secrets it mounts
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {m["name"]: m["mountPath"] for m in ctr.get("volumeMounts", [])}
    report(set(mounts) <= set(vols), f"{overlay}: every volumeMount has a volume")
    cm_name = vols.get("config", {}).get("configMap", {}).get("name")
    cm = one(docs, "ConfigMap", cm_name)
    report(cm is not None and "platform.yaml" in cm.get("data", {}),
           f"{overlay}: the config volume is the rendered ConfigMap {cm_name} with platform.yaml")
    certs = {c["metadata"]["name"]: c for c in by_kind(docs, "Certificate")}
    tls_secret = vols.get("tls", {}).get("secret", {}).get("secretName")
    serving = [c for c in certs.values() if c["spec"].get("secretName") == tls_secret]
    report(len(serving) == 1, f"{overlay}: the tls volume {tls_secret} is a Certificate's secret")
    report(vols.get("admin-token", {}).get("secret", {}).get("secretName") == "tenantd-admin-token",
           f"{overlay}: the admin token comes from Secret tenantd-admin-token")
    data = vols.get("data", {})
    if overlay == "single":
        claim = data.get("persistentVolumeClaim", {}).get("claimName")
        report(claim is not None and "emptyDir" not in data and
               one(docs, "PersistentVolumeClaim", claim) is not None,
               f"{overlay}: --data is on the PVC {claim}")
        report(spec.get("strategy", {}).get("type") == "Recreate" and
               "rollingUpdate" not in spec.get("strategy", {}),
               f"{overlay}: Recreate strategy (one process on the SQLite files)")
        pdb = one(docs, "PodDisruptionBudget")
        report(pdb and pdb["spec"].get("maxUnavailable") == 1,
               f"{overlay}: the PDB lets a drain take the one replica")
    else:
        i = args.index("--redis") if "--redis" in args else -1
        env = {e["name"]: e for e in ctr.get("env", [])}
        ref = env.get("TENANTD_REDIS", {}).get("valueFrom", {}).get("secretKeyRef", {})
        report(i >= 0 and args[i + 1] == "$(TENANTD_REDIS)" and ref.get("name") == "tenantd-redis"
               and ref.get("key") == "address",
               f"{overlay}: --redis from Secret tenantd-redis key address ({ref})")
        report("--replicas" in args and args[args.index("--replicas") + 1] == "3",
               f"{overlay}: --replicas 3")
        anti = pod.get("affinity", {}).get("podAntiAffinity", {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution", [])
        report(any(t.get("topologyKey") == "kubernetes.io/hostname" for t in anti),
               f"{overlay}: required pod anti-affinity by node")
        ru = spec.get("strategy", {}).get("rollingUpdate", {})
        report(ru.get("maxSurge") == 0 and ru.get("maxUnavailable") == 1,
               f"{overlay}: rolling update one at a time, no surge")
        pdb = one(docs, "PodDisruptionBudget")
        report(pdb and pdb["spec"].get("minAvailable") == 2 and "maxUnavailable" not in pdb["spec"],
               f"{overlay}: PodDisruptionBudget minAvailable 2")
        db = env.get("TENANTD_DATABASE", {}).get("valueFrom", {}).get("secretKeyRef", {})
        report(db.get("name") == "tenantd-database" and db.get("key") == "url"
               and not any("--database" in a or "postgres" in a for a in args),
               f"{overlay}: TENANTD_DATABASE from Secret tenantd-database key url, not in args")
        report("emptyDir" in data,
               f"{overlay}: --data (the ledger spool) is per replica (emptyDir)")

    # the Service and the webhooks that call it
    svc = one(docs, "Service", "tenantd")
    sports = {p["name"]: p for p in (svc or {}).get("spec", {}).get("ports", [])}
    report(svc is not None and svc["spec"]["selector"].items() <= spec["template"]["metadata"]["labels"].items()
           and sports.get("https-admin", {}).get("targetPort") == "admin"
           and sports.get("http-gateway", {}).get("targetPort") == "gateway",
           f"{overlay}: Service tenantd selects the pods, 443 -> admin, 8080 -> gateway")
    dns = f"tenantd.{nsname}.svc"
    report(any(dns in c["spec"].get("dnsNames", []) for c in serving),
           f"{overlay}: the serving certificate names {dns}")
    issuers = {i["metadata"]["name"] for i in by_kind(docs, "Issuer")}
    report(all(c["spec"]["issuerRef"]["name"] in issuers for c in certs.values()),
           f"{overlay}: every Certificate's Issuer is rendered")
    for kind, path in (("MutatingWebhookConfiguration", "/mutate"),
                       ("ValidatingWebhookConfiguration", "/validate")):
        w = one(docs, kind)
        if not report(w is not None, f"{overlay}: one {kind}"):
            continue
        inject = w["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from", "")
        report(serving and inject == f"{nsname}/{serving[0]['metadata']['name']}",
               f"{overlay}: {kind} has cert-manager.io/inject-ca-from {inject}")
        for hook in w["webhooks"]:
            cc = hook["clientConfig"]
            excluded = []
            for e in hook.get("namespaceSelector", {}).get("matchExpressions", []):
                if e["key"] == "kubernetes.io/metadata.name" and e["operator"] == "NotIn":
                    excluded += e["values"]
            report(cc.get("service", {}).get("name") == "tenantd"
                   and cc["service"].get("namespace") == nsname
                   and cc["service"].get("port") == sports.get("https-admin", {}).get("port")
                   and cc["service"].get("path") == path and "caBundle" not in cc
                   and hook.get("failurePolicy") == "Fail" and hook.get("timeoutSeconds") == 5
                   and nsname in excluded and "kube-system" in excluded,
                   f"{overlay}: {hook['name']} calls {path} on Service tenantd:443, Fail, "
                   f"timeout 5 s, {nsname} and kube-system excluded")

    # what the admission check and the start of a real tenantd need
    podobj = {"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "tenantd-0", "namespace": dep["metadata"]["namespace"],
                           "labels": spec["template"]["metadata"].get("labels", {})},
              "spec": pod}
    yaml.safe_dump(podobj, open(f"{outdir}/pod.yaml", "w"), sort_keys=False)
    yaml.safe_dump(ns, open(f"{outdir}/namespace.yaml", "w"), sort_keys=False)
    open(f"{outdir}/args", "w").write("".join(a + "\n" for a in args))
    open(f"{outdir}/mounts", "w").write("".join(f"{n} {p}\n" for n, p in mounts.items()))
    import os
    os.makedirs(f"{outdir}/config", exist_ok=True)
    for name, text in (cm or {}).get("data", {}).items():
        open(f"{outdir}/config/{name}", "w").write(text)


def mutate(path, how, out):
    pod = yaml.safe_load(open(path))
    spec = pod["spec"]
    ctr = spec["containers"][0]
    if how == "no-securitycontext":
        spec.pop("securityContext", None)
        for c in spec["containers"]:
            c.pop("securityContext", None)
    elif how == "privilege-escalation":
        ctr["securityContext"]["allowPrivilegeEscalation"] = True
    elif how == "capabilities":
        ctr["securityContext"].pop("capabilities")
    elif how == "root":
        spec["securityContext"].pop("runAsNonRoot")
        ctr["securityContext"].pop("runAsNonRoot")
        spec["securityContext"]["runAsUser"] = 0
        ctr["securityContext"]["runAsUser"] = 0
    elif how == "seccomp":
        spec["securityContext"].pop("seccompProfile")
        ctr["securityContext"].pop("seccompProfile")
    else:
        raise SystemExit(f"unknown mutation {how}")
    yaml.safe_dump(pod, open(out, "w"), sort_keys=False)


# PromQL words that are not metric names: functions are followed by "(",
# and these are the rest.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
            "unless", "bool", "offset", "inf", "nan"}


def metric_names(expr):
    """The metric names a PromQL expression selects: identifiers that are
    not a function call, a keyword, a label list of by/on/..., or inside a
    label matcher, a string, a range or a template variable."""
    e = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)            # strings
    e = re.sub(r"\{[^}]*\}", "", e)                          # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)                         # ranges, subqueries
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\$\w+", "", e)                              # $__rate_interval
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        word = m.group(0)
        rest = e[m.end():].lstrip()
        if rest.startswith("(") or word.lower() in KEYWORDS:
            continue
        if m.start() > 0 and (e[m.start() - 1].isdigit() or e[m.start() - 1] == "."):
            continue                                        # 2.5e3, 1h
        names.add(word)
    return names


def metrics(rules_path, dash_path):
    groups = yaml.safe_load(open(rules_path))["groups"]
    recorded = {r["record"] for g in groups for r in g["rules"] if "record" in r}
    names = set()
    for g in groups:
        for r in g["rules"]:
            names |= metric_names(r["expr"])
    dash = json.load(open(dash_path))

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k in ("expr", "definition") and isinstance(v, str):
                    yield v
                elif k == "query" and isinstance(v, dict) and isinstance(v.get("query"), str):
                    yield v["query"]
                else:
                    yield from walk(v)
        elif isinstance(x, list):
            for v in x:
                yield from walk(v)

    for q in walk(dash):
        q = re.sub(r"label_values\(([^,]*),[^)]*\)", r"\1", q)  # Grafana's variable query
        names |= metric_names(q)
    for n in sorted(names - recorded):
        print(n)


def queries(rules_path, dash_path):
    groups = yaml.safe_load(open(rules_path))["groups"]
    for g in groups:
        for r in g["rules"]:
            yield r["expr"]

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "expr" and isinstance(v, str):
                    yield v
                else:
                    yield from walk(v)
        elif isinstance(x, list):
            for v in x:
                yield from walk(v)

    yield from walk(json.load(open(dash_path)))


def labels(rules_path, dash_path):
    """Prints METRIC LABEL VALUE for each value a query's = or =~ matcher
    asks of a metric (=~ split on |), when the values are plain words, and
    METRIC LABEL ~REGEX for the other regexes."""
    seen = set()
    for q in queries(rules_path, dash_path):
        for m in re.finditer(r"([A-Za-z_:][A-Za-z0-9_:]*)\{([^}]*)\}", q):
            metric = m.group(1)
            for mm in re.finditer(r'(\w+)\s*(=~|=)\s*"((?:\\.|[^"\\])*)"', m.group(2)):
                label, op, value = mm.groups()
                if value.startswith("$"):
                    continue                                # a Grafana variable
                value = value.replace("\\\\", "\\")
                if op == "=~" and not re.fullmatch(r"[\w|-]+", value):
                    items = ["~" + value]
                else:
                    items = value.split("|") if op == "=~" else [value]
                for v in items:
                    if (metric, label, v) not in seen:
                        seen.add((metric, label, v))
                        print(metric, label, v)


def webhook_regex(rendered, regex):
    docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
    names = [h["name"] for d in docs if d["kind"].endswith("WebhookConfiguration")
             for h in d["webhooks"]]
    report(len(names) == 2 and all(re.fullmatch(regex, n) for n in names),
           f"the alerts' webhook name matcher {regex} matches the rendered webhooks {names}")


def runbooks(rules_path, doc_path):
    groups = yaml.safe_load(open(rules_path))["groups"]
    heads = {re.sub(r"[^a-z0-9 -]", "", line[4:].strip().lower()).replace(" ", "-")
             for line in open(doc_path) if line.startswith("### ")}
    alerts = [r for g in groups for r in g["rules"] if "alert" in r]
    report(len(alerts) > 0, f"{len(alerts)} alerts")
    for a in alerts:
        want = "docs/operations.md#" + a["alert"].lower()
        got = a.get("annotations", {}).get("runbook")
        report(got == want and a["alert"].lower() in heads,
               f"{a['alert']}: runbook {got} is a section of docs/operations.md")
        report(a.get("labels", {}).get("severity") in ("warning", "critical"),
               f"{a['alert']}: severity {a.get('labels', {}).get('severity')}")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "render":
        render(*sys.argv[2:5])
    elif cmd == "mutate":
        mutate(*sys.argv[2:5])
    elif cmd == "metrics":
        metrics(*sys.argv[2:4])
    elif cmd == "labels":
        labels(*sys.argv[2:4])
    elif cmd == "webhook-regex":
        webhook_regex(*sys.argv[2:4])
    elif cmd == "runbooks":
        runbooks(*sys.argv[2:4])
    elif cmd == "names":                                     # the extractor alone
        for line in sys.stdin:
            for n in sorted(metric_names(line)):
                print(n)
    else:
        raise SystemExit(f"unknown command {cmd}")
