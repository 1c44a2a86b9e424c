#!/usr/bin/env python3
"""webhook_compare.py - byte-for-byte A/B of two tenantd admin listeners'
webhook answers (an old and a new build serving the same --config).

  webhook_compare.py OLD_URL NEW_URL CONFIG.yaml [CONFIG.yaml...]

Builds reviews from every example pod (examples/pods/*.yaml), the review
fixtures (examples/pods/review.json, bench/fixtures/review.json,
tests/fuzz/corpus/review/*), and variations of them (each namespace of the
configs, CREATE/UPDATE/DELETE, resources removed or enlarged, privileged,
hostPath, every PriorityClass and an unknown one, labels removed, GPU counts,
escapes and non-ASCII text in strings, duplicate keys, reals, pretty-printed
and compact bodies, malformed and non-object bodies), posts each to /validate,
/mutate and /admit of both, and compares status and body bytes. Prints the
count compared and every difference; exit 1 if any."""
import copy
import glob
import json
import os
import ssl
import sys
import urllib.request

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
old_url, new_url, configs = sys.argv[1], sys.argv[2], sys.argv[3:]
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE


def post(base, path, body):
    req = urllib.request.Request(base + path, data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


namespaces, priorities = set(), set()
for c in configs:
    for d in yaml.safe_load_all(open(c)):
        if not d:
            continue
        if d.get("kind") == "Namespace":
            namespaces.add(d["metadata"]["name"])
        if d.get("kind") == "PriorityClass":
            priorities.add(d["metadata"]["name"])
namespaces = sorted(namespaces) + ["default"]
priorities = sorted(priorities) + ["no-such-class", None]

pods = []
for f in sorted(glob.glob(os.path.join(ROOT, "examples/pods/*.yaml"))):
    for d in yaml.safe_load_all(open(f)):
        if d and d.get("kind") == "Pod":
            pods.append((os.path.basename(f), d))
reviews = []
for f in [os.path.join(ROOT, "examples/pods/review.json"), os.path.join(ROOT, "bench/fixtures/review.json")] + \
        sorted(glob.glob(os.path.join(ROOT, "tests/fuzz/corpus/review/*"))):
    try:
        d = json.load(open(f))
    except ValueError:
        continue
    reviews.append((os.path.basename(f), d))
    obj = d.get("request", {}).get("object") if d.get("kind") == "AdmissionReview" else d
    if isinstance(obj, dict) and obj.get("kind", "Pod") == "Pod":
        pods.append((os.path.basename(f) + ":pod", obj))


def containers(p):
    return p.get("spec", {}).get("containers", []) or []


def variants(name, pod):
    yield name, pod
    p = copy.deepcopy(pod)
    for c in containers(p):
        c.pop("resources", None)
    yield name + "/no-resources", p
    p = copy.deepcopy(pod)
    for c in containers(p):
        c.setdefault("resources", {})["limits"] = {"cpu": "100", "memory": "2Ti", "nvidia.com/gpu": "16"}
    yield name + "/huge", p
    p = copy.deepcopy(pod)
    for c in containers(p):
        c["securityContext"] = {"privileged": True}
    p.setdefault("spec", {})["volumes"] = [{"name": "h", "hostPath": {"path": "/etc"}}]
    yield name + "/privileged-hostpath", p
    for pc in priorities:
        p = copy.deepcopy(pod)
        if pc:
            p.setdefault("spec", {})["priorityClassName"] = pc
        else:
            p.get("spec", {}).pop("priorityClassName", None)
            p.get("spec", {}).pop("priority", None)
        yield name + "/priority=%s" % pc, p
    p = copy.deepcopy(pod)
    p.setdefault("metadata", {}).pop("labels", None)
    yield name + "/no-labels", p
    p = copy.deepcopy(pod)
    p.setdefault("metadata", {})["labels"] = {"team": "a\u00e9\"\\\n", "project": "p\u20ac", "environment": "x/y"}
    p["metadata"]["annotations"] = {"k:{\"uid\":\"1\"}": "\ud83d\ude00 \t tab", "tenantd.dev/data-uri": "s3://x/y"}
    yield name + "/escapes", p
    for g in ("1", "4", "8", "0.5"):
        p = copy.deepcopy(pod)
        if containers(p):
            r = containers(p)[0].setdefault("resources", {})
            r.setdefault("limits", {})["nvidia.com/gpu"] = g
            r.setdefault("requests", {})["nvidia.com/gpu"] = g
        yield name + "/gpu=" + g, p
    p = copy.deepcopy(pod)
    p.setdefault("spec", {})["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    p["spec"]["terminationGracePeriodSeconds"] = 30.5
    yield name + "/tolerate-all-reals", p


def review(pod, ns, op, uid="u-1"):
    r = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
         "request": {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
                     "resource": {"group": "", "version": "v1", "resource": "pods"},
                     "namespace": ns, "operation": op, "object": pod}}
    if op == "UPDATE":
        r["request"]["oldObject"] = pod
    return r


bodies = []
for name, d in reviews:
    bodies.append((name, json.dumps(d).encode()))
    bodies.append((name + "/compact", json.dumps(d, separators=(",", ":")).encode()))
for name, pod in pods:
    for vname, v in variants(name, pod):
        for ns in namespaces:
            for op in ("CREATE", "UPDATE"):
                bodies.append(("%s ns=%s %s" % (vname, ns, op),
                               json.dumps(review(v, ns, op), separators=(",", ":")).encode()))
        bodies.append((vname + " bare", json.dumps(v).encode()))
    bodies.append((name + " DELETE", json.dumps(review(pod, namespaces[0], "DELETE")).encode()))
bodies += [
    ("not json", b"{not json"), ("empty", b""), ("array", b"[1,2]"), ("scalar", b"42"),
    ("truncated", bodies[1][1][:len(bodies[1][1]) // 2]),
    ("duplicate keys", b'{"kind":"Pod","kind":"Pod","spec":{"containers":[{"name":"a","image":"x"}]},'
                       b'"metadata":{"namespace":"team-a-prod"}}'),
    ("wrong apiVersion", b'{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{}}'),
    ("nul escape", b'{"kind":"Pod","metadata":{"name":"a\\u0000"},"spec":{"containers":[]}}'),
    ("big integer", b'{"kind":"Pod","spec":{"containers":[],"priority":123456789012345678901}}'),
    ("invalid utf-8", b'{"kind":"Pod","metadata":{"name":"\xff"},"spec":{"containers":[]}}'),
]
# The members the webhook's parser leaves out (request.oldObject,
# request.options, the pod's metadata.managedFields): large, odd (escapes,
# non-ASCII, reals, big integers: the parser then builds everything), or
# broken (the answer is the same 400).
_base = json.loads(bodies[0][1]) if bodies else None
if isinstance(_base, dict) and isinstance(_base.get("request"), dict) and \
        isinstance(_base["request"].get("object"), dict):
    odd = [{"manager": "kubectl-\u00e9\"x\"", "time": "2024-01-01T00:00:00Z", "n": 1.5,
            "big": 123456789012345678901, "fieldsV1": {"f:spec": {"f:containers": {}}}}]
    for mname, mf in (("large", [{"manager": "m%d" % i, "fieldsV1": {"f:metadata": {"f:labels": {}}}}
                                 for i in range(200)]), ("odd", odd)):
        r = copy.deepcopy(_base)
        r["request"]["object"].setdefault("metadata", {})["managedFields"] = mf
        r["request"]["oldObject"] = copy.deepcopy(r["request"]["object"])
        r["request"]["options"] = {"kind": "UpdateOptions", "fieldManager": mname, "x": mf}
        r["request"]["operation"] = "UPDATE"
        bodies.append(("managedFields " + mname, json.dumps(r, ensure_ascii=False).encode()))
    text = json.dumps(_base)
    for bad in ('"oldObject": {"a": tru}', '"options": [01]', '"oldObject": {"a": "\\u0000"}'):
        bodies.append(("broken skipped member " + bad, text.replace('"request": {', '"request": {' + bad + ', ', 1).encode()))

n = diff = 0
for path in ("/validate", "/mutate", "/admit"):
    for name, body in bodies:
        a, b = post(old_url, path, body), post(new_url, path, body)
        n += 1
        if a != b:
            diff += 1
            if diff <= 20:
                print("DIFF %s %s:\n  old %d %s\n  new %d %s" % (path, name, a[0], a[1][:400], b[0], b[1][:400]))
print("%d reviews compared (%s), %d differ" % (n, ", ".join(os.path.basename(c) for c in configs), diff))
sys.exit(1 if diff else 0)
