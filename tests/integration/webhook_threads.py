#!/usr/bin/env python3
"""webhook_threads.py - the admission webhook on several admin threads,
against the same daemon on one (tests/integration/test_webhook_threads.sh).

  webhook_threads.py REF_URL URL ROOT

REF_URL is a tenantd with --admin-threads 1, URL one with several; both
started from the same configs (bench/fixtures/webhook-platform.yaml and
examples/kueue/platform.yaml). Config generation g (1..G) changes the
LimitRange defaults and a ResourceQuota of ml-serving-prod, so that the
answers to a fixed pod set change with g (defaulted values in the patch,
a quota that admits or refuses the large pod).

1. On REF_URL: the answer to every (pod, endpoint) at generation 0, then
   after each apply of generation g: the single-threaded answers ref[g].
2. On URL: 16 client threads post the same reviews over keep-alive
   connections (reconnecting now and then, so that connections spread over
   the listeners) while the main thread applies generations 1..G through
   /v1/apply and submits one Workload per generation through /v1/workloads.
   Each review's answer must be byte for byte ref[g] of a generation g the
   daemon could have served it with: at least the generations whose apply
   had returned when the review was sent, at most those whose apply had
   been sent when its answer came back.
3. The control API's answers are checked (applied actions, the submitted
   Workload's row, the objects served afterwards), and the admission
   counters of /metrics add up to the reviews posted.
Prints one "ok - ..." / "not ok - ..." line per check; exit 1 if any fails."""
import base64
import copy
import http.client
import json
import os
import random
import ssl
import sys
import threading
import time
import urllib.parse

ref_url, url, root = sys.argv[1], sys.argv[2], sys.argv[3]
G = 6
CLIENTS = 16
failures = 0


def check(cond, name, detail=""):
    global failures
    if cond:
        print("ok - " + name)
    else:
        failures += 1
        print("not ok - " + name + (": " + detail if detail else ""))


def connect(base):
    u = urllib.parse.urlparse(base)
    if u.scheme == "https":
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=30)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=30)


def request(conn, method, path, body=None, ctype="application/json"):
    conn.request(method, path, body=body, headers={"Content-Type": ctype} if body is not None else {})
    r = conn.getresponse()
    return r.status, r.read()


# ---- the pod set: the fixture's Deployment pod and variations of it, and
# the example pods, each an AdmissionReview with a fixed uid
fixture = json.load(open(os.path.join(root, "bench/fixtures/review.json")))
pod = fixture["request"]["object"]


def review(name, obj, ns):
    r = copy.deepcopy(fixture)
    r["request"]["uid"] = "uid-" + name
    r["request"]["object"] = obj
    r["request"]["namespace"] = ns
    return name, json.dumps(r).encode()


reviews = [("fixture", json.dumps(fixture).encode())]
bare = copy.deepcopy(pod)
for c in bare["spec"]["containers"]:
    c.pop("resources", None)
reviews.append(review("defaulted", bare, "ml-serving-prod"))
big = copy.deepcopy(pod)
for c in big["spec"]["containers"]:
    c["resources"] = {"requests": {"cpu": "12", "memory": "8Gi"}, "limits": {"cpu": "12", "memory": "8Gi"}}
reviews.append(review("big", big, "ml-serving-prod"))
batch = copy.deepcopy(bare)
batch["metadata"]["namespace"] = "ml-batch-dev"
batch["metadata"]["labels"].update({"team": "ml-batch", "project": "training", "environment": "dev"})
reviews.append(review("batch", batch, "ml-batch-dev"))
nolabels = copy.deepcopy(pod)
nolabels["metadata"]["labels"] = {}
reviews.append(review("nolabels", nolabels, "ml-serving-prod"))
priv = copy.deepcopy(pod)
priv["spec"]["containers"][0].setdefault("securityContext", {})["privileged"] = True
reviews.append(review("privileged", priv, "ml-serving-prod"))
reviews.append(("example", open(os.path.join(root, "examples/pods/review.json"), "rb").read()))
reviews.append(("notjson", b"{\"kind\": \"AdmissionReview\", "))
ENDPOINTS = ["/validate", "/mutate", "/admit"]
KEYS = [(n, e) for n, _ in reviews for e in ENDPOINTS]
BODY = dict(reviews)


def generation(g):
    """Generation g's objects as YAML text."""
    return f"""apiVersion: v1
kind: LimitRange
metadata: {{name: defaults, namespace: ml-serving-prod}}
spec:
  limits:
  - type: Container
    defaultRequest: {{cpu: {250 + g}m, memory: {512 + g}Mi, ephemeral-storage: 1Gi}}
    default: {{cpu: "2", memory: {2048 + g}Mi, ephemeral-storage: 4Gi}}
    min: {{cpu: 10m, memory: 16Mi}}
    max: {{cpu: "64", memory: 512Gi}}
    maxLimitRequestRatio: {{cpu: "8", memory: "4"}}
  - type: Pod
    max: {{cpu: "96", memory: 768Gi}}
---
apiVersion: v1
kind: ResourceQuota
metadata: {{name: compute, namespace: ml-serving-prod}}
spec:
  hard:
    requests.cpu: "{400 if g % 2 == 0 else 130 + g}"
    requests.memory: "1600Gi"
    limits.cpu: "800"
    limits.memory: "2000Gi"
status:
  used: {{requests.cpu: "120", requests.memory: 480Gi, limits.cpu: "240", limits.memory: 960Gi}}
""".encode()


def workload(g):
    return f"""apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {{name: wl-{g}, namespace: team-a}}
spec:
  queueName: team-a
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: c
          resources: {{requests: {{cpu: "1"}}}}
""".encode()


# ---- 1. the single-threaded answers, generation by generation
ref = []
rc = connect(ref_url)
for g in range(G + 1):
    if g:
        st, body = request(rc, "POST", "/v1/apply", generation(g), "application/yaml")
        assert st == 200, (st, body)
    ref.append({k: request(rc, "POST", k[1], BODY[k[0]]) for k in KEYS})
rc.close()
changing = [k for k in KEYS if len({ref[g][k] for g in range(G + 1)}) > 1]
check(len(changing) >= 4, "the answers change with the generation (%d of %d reviews do)" % (len(changing), len(KEYS)),
      "the test would prove nothing")
check(all(ref[g][("big", "/validate")] != ref[g + 1][("big", "/validate")] for g in range(G)),
      "the large pod is admitted and refused in turn")

# ---- 2. the same reviews on several threads, while the config changes
state = {"started": 0, "done": 0}
lock = threading.Lock()
stop = threading.Event()
results = [[] for _ in range(CLIENTS)]
errors = []


def client(i):
    rnd = random.Random(i)
    conn = connect(url)
    n = 0
    try:
        while not stop.is_set():
            k = KEYS[rnd.randrange(len(KEYS))]
            with lock:
                lo = state["done"]
            ans = request(conn, "POST", k[1], BODY[k[0]])
            with lock:
                hi = state["started"]
            results[i].append((k, lo, hi, ans))
            n += 1
            if n % 40 == 0:
                conn.close()
                conn = connect(url)
    except Exception as e:  # a dropped connection or a bad response is a failure
        errors.append("client %d: %r" % (i, e))
    conn.close()


threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
for t in threads:
    t.start()
cc = connect(url)
applied_ok = submitted_ok = True
for g in range(1, G + 1):
    time.sleep(0.25)
    with lock:
        state["started"] = g
    st, body = request(cc, "POST", "/v1/apply", generation(g), "application/yaml")
    with lock:
        state["done"] = g
    try:
        acts = sorted((a["kind"], a["action"]) for a in json.loads(body)["applied"])
    except (ValueError, KeyError):
        acts = None
    if st != 200 or acts != [("LimitRange", "configured"), ("ResourceQuota", "configured")]:
        applied_ok = False
        print("# apply %d: %d %s" % (g, st, body[:300]))
    st, body = request(cc, "POST", "/v1/workloads", workload(g), "application/yaml")
    try:
        rows = json.loads(body)["workloads"]
    except (ValueError, KeyError):
        rows = None
    if st != 200 or not rows or len(rows) != 1 or rows[0].get("name") != "wl-%d" % g or \
            rows[0].get("state") not in ("Admitted", "Pending"):
        submitted_ok = False
        print("# submit %d: %d %s" % (g, st, body[:300]))
time.sleep(0.25)
stop.set()
for t in threads:
    t.join()
check(not errors, "every client connection served every review", "; ".join(errors[:3]))
check(applied_ok, "each apply answered with its objects configured, during the reviews")
check(submitted_ok, "each submitted Workload answered with its row, during the reviews")

total = sum(len(r) for r in results)
bad = []
for r in results:
    for k, lo, hi, ans in r:
        if not any(ref[g][k] == ans for g in range(lo, hi + 1)):
            bad.append((k, lo, hi, ans))
check(total > 300, "%d reviews posted by %d clients" % (total, CLIENTS))
check(not bad, "every answer is the single-threaded answer of a generation in force (%d checked)" % total,
      "%d differ, first: %r" % (len(bad), bad[:1]))
seen_gens = set()
for r in results:
    for k, lo, hi, ans in r:
        if k in changing:
            seen_gens.update(g for g in range(lo, hi + 1) if ref[g][k] == ans)
check(len(seen_gens) >= G, "answers of %d generations were seen during the run" % len(seen_gens))

# ---- 3. what the control API serves afterwards, and the counters
st, body = request(cc, "GET", "/v1/objects?kind=LimitRange&namespace=ml-serving-prod")
check(st == 200 and b"%dMi" % (2048 + G) in body, "the last generation's LimitRange is served")
st, body = request(cc, "GET", "/v1/workloads?namespace=team-a")
names = {w["name"] for w in json.loads(body)["items"]} if st == 200 else set()
check({"wl-%d" % g for g in range(1, G + 1)} <= names, "every submitted Workload is stored")
for k in KEYS:
    ans = request(cc, "POST", k[1], BODY[k[0]])
    if ans != ref[G][k]:
        check(False, "after the last apply, %s %s answers as the single thread does" % k)
        break
else:
    check(True, "after the last apply, every review answers as the single thread does")
st, body = request(cc, "GET", "/metrics")
counted = 0
for line in body.decode().splitlines():
    if line.startswith("tenantd_admission_decisions_total{") and 'mode="enforce"' in line:
        counted += int(line.rsplit(" ", 1)[1])
check(counted == total + len(KEYS), "the admission counters add up to the reviews posted (%d)" % counted,
      "want %d" % (total + len(KEYS)))
cc.close()
sys.exit(1 if failures else 0)
