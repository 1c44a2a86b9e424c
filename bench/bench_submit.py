#!/usr/bin/env python3
"""bench_submit.py - the batch queue daemon at scale: a real
tenantd on 127.0.0.1 with 1,000 ClusterQueues in 10 cohorts (bench_queue's
platform, plus one ClusterQueue "solo" of 1 GPU for the finish figure),
N Workloads stored first (a bulk load: admin applies of 1,000 Workloads
sharing one submission instant, one scheduling pass each), then over HTTP/1.1
keep-alive:
  - one-workload submits, one after the other: p50/p99 latency;
  - batched submits (BATCH workloads per request): workloads/s;
  - finish-to-admission: "solo" holds one workload and another waits; the
    finish request returns once the commit that admits the waiting one is
    stored (checked after each);
  - the daemon's RSS (VmRSS, VmHWM);
  - restart: from exec to the answer of the first submit (the start pass
    over the stored records included).
Usage: bench_submit.py TENANTD N [--json] [--quick]; one JSON line on stdout.
"""
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

NCQ = 1000


def platform():
    out = []
    for k in range(3):
        out.append("apiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\n"
                   f"metadata: {{name: p{k}}}\nvalue: {k * 100}\n")
    for f in ("a100", "h100"):
        out.append("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\n"
                   f"metadata: {{name: {f}}}\n")
    for c in range(NCQ):
        strategy = "StrictFIFO" if c % 2 else "BestEffortFIFO"
        fl = "".join(
            f"    - name: {f}\n      resources:\n      - {{name: cpu, nominalQuota: 64}}\n"
            f"      - {{name: nvidia.com/gpu, nominalQuota: 8, borrowingLimit: 8}}\n"
            for f in ("a100", "h100"))
        out.append(
            f"apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {{name: cq-{c}}}\n"
            f"spec:\n  namespaceSelector: {{}}\n  cohort: cohort-{c % 10}\n"
            f"  queueingStrategy: {strategy}\n"
            "  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}\n"
            "  resourceGroups:\n  - coveredResources: [cpu, nvidia.com/gpu]\n    flavors:\n" + fl)
        out.append("apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
                   f"metadata: {{name: cq-{c}, namespace: ns}}\nspec: {{clusterQueue: cq-{c}}}\n")
    out.append("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: solo}\n"
               "spec:\n  namespaceSelector: {}\n  resourceGroups:\n"
               "  - coveredResources: [cpu, nvidia.com/gpu]\n    flavors:\n"
               "    - name: a100\n      resources:\n      - {name: cpu, nominalQuota: 8}\n"
               "      - {name: nvidia.com/gpu, nominalQuota: 1}\n")
    out.append("apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
               "metadata: {name: solo, namespace: ns}\nspec: {clusterQueue: solo}\n")
    return "---\n".join(out)


def workload(name, queue, gpus, prio, submitted_ns=None):
    ann = (f", annotations: {{tenantd.dev/submitted-at-ns: \"{submitted_ns}\"}}"
           if submitted_ns else "")
    return ("apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\n"
            f"metadata: {{name: {name}, namespace: ns{ann}}}\n"
            f"spec:\n  queueName: {queue}\n"
            "  priorityClassSource: kueue.x-k8s.io/workloadpriorityclass\n"
            f"  priorityClassName: p{prio}\n  podSets:\n"
            "  - name: main\n    count: 1\n    template:\n      spec:\n        containers:\n"
            "        - name: c\n          resources:\n"
            f"            requests: {{cpu: \"2\", nvidia.com/gpu: \"{gpus}\"}}\n")


class Daemon:
    def __init__(self, binary, data, cfg):
        self.binary, self.data, self.cfg = binary, data, cfg
        self.proc = None

    def start(self):
        pf = os.path.join(self.data, "port")
        if os.path.exists(pf):
            os.unlink(pf)
        t0 = time.monotonic()
        self.log = open(os.path.join(self.data, "tenantd.log"), "a")
        self.proc = subprocess.Popen(
            [self.binary, "--data", self.data, "--config", self.cfg, "--admin-listen",
             "127.0.0.1:0", "--port-file", pf, "--listen", "127.0.0.1:0", "--workers", "1",
             "--admin-threads", "1"], stderr=self.log)
        while not (os.path.exists(pf) and open(pf).read().strip()):
            if self.proc.poll() is not None:
                sys.exit("tenantd exited; see " + self.log.name)
            time.sleep(0.005)
        self.port = int(open(pf).read())
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        return t0

    def post(self, path, body=b""):
        self.conn.request("POST", path, body=body,
                          headers={"Content-Type": "application/yaml"})
        r = self.conn.getresponse()
        data = r.read()
        if r.status != 200:
            sys.exit(f"POST {path}: {r.status} {data[:300]!r}")
        return json.loads(data)

    def get(self, path):
        self.conn.request("GET", path)
        r = self.conn.getresponse()
        return r.status, r.read()

    def rss_kb(self):
        vals = {}
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    vals[line.split(":")[0]] = int(line.split()[1])
        return vals

    def cpu_ms(self):
        """tenantd's CPU time so far (user + system), ms."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=120)


def pct(xs, p):
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    quick = "--quick" in sys.argv
    binary, n = args[0], int(args[1])
    rnd = random.Random(12345)
    tmp = tempfile.mkdtemp(prefix="bench_submit.")
    cfg = os.path.join(tmp, "platform.yaml")
    with open(cfg, "w") as f:
        f.write(platform())
    d = Daemon(binary, tmp, cfg)
    d.start()
    try:
        run(d, n, quick, rnd, tmp)
    finally:
        if d.proc.poll() is None:
            d.stop()
        subprocess.run(["rm", "-rf", tmp])


def run(d, n, quick, rnd, tmp):
    # the stored workloads: a bulk load, as an operator restores a queue,
    # by admin apply of 1,000 Workloads at a time that share one submission
    # instant (the submitted-at annotation, which apply keeps and submit
    # stamps): one scheduling pass per batch, where a submit runs one per
    # workload (each its own instant)
    t_load = time.monotonic()
    batch = 1000
    base_ns = time.time_ns() - 10 ** 12
    for i in range(0, n, batch):
        docs = [workload(f"wl-{k}", f"cq-{rnd.randrange(NCQ)}", 1 + rnd.randrange(4),
                         rnd.randrange(3), base_ns + i) for k in range(i, min(n, i + batch))]
        t0 = time.monotonic()
        d.post("/v1/apply", "---\n".join(docs).encode())
        if os.environ.get("BENCH_SUBMIT_VERBOSE"):
            print(f"  stored {i + len(docs)}: batch {time.monotonic() - t0:.2f} s",
                  file=sys.stderr, flush=True)
    load_s = time.monotonic() - t_load
    # one-workload submits, one after the other
    lat = []
    cpu0 = d.cpu_ms()
    for k in range(60 if quick else 300):
        body = workload(f"one-{k}", f"cq-{rnd.randrange(NCQ)}", 1 + rnd.randrange(4),
                        rnd.randrange(3)).encode()
        t0 = time.monotonic()
        d.post("/v1/workloads", body)
        lat.append((time.monotonic() - t0) * 1000)
    submit_cpu = (d.cpu_ms() - cpu0) / len(lat)
    # batched: BATCH workloads per request
    nb, per = (5, 100) if quick else (20, 100)
    cpu0 = d.cpu_ms()
    t0 = time.monotonic()
    for b in range(nb):
        docs = [workload(f"b{b}-{k}", f"cq-{rnd.randrange(NCQ)}", 1 + rnd.randrange(4),
                         rnd.randrange(3)) for k in range(per)]
        d.post("/v1/workloads", "---\n".join(docs).encode())
    batched = nb * per / (time.monotonic() - t0)
    batched_cpu = nb * per / max((d.cpu_ms() - cpu0) / 1000.0, 1e-3)
    # finish-to-admission on "solo" (1 GPU): one runs, the next waits
    fin = []
    fin_cpu = []
    admitted_ok = 0
    d.post("/v1/workloads", workload("solo-0", "solo", 1, 0).encode())
    for k in range(1, (10 if quick else 40) + 1):
        rows = d.post("/v1/workloads", workload(f"solo-{k}", "solo", 1, 0).encode())["workloads"]
        waiting = rows and rows[0]["state"] == "Pending"
        t0 = time.monotonic()
        c0 = d.cpu_ms()
        d.post(f"/v1/workloads/finish?namespace=ns&name=solo-{k - 1}")
        fin.append((time.monotonic() - t0) * 1000)
        fin_cpu.append(d.cpu_ms() - c0)
        st, body = d.get(f"/v1/explain/workload?namespace=ns&name=solo-{k}")
        if waiting and st == 200 and json.loads(body).get("state") == "Admitted":
            admitted_ok += 1
    rss = d.rss_kb()
    stored = n + len(lat) + nb * per + len(fin) + 1
    d.stop()
    # restart: exec to the first submit's answer
    t0 = d.start()
    d.post("/v1/workloads", workload("after-restart", f"cq-{rnd.randrange(NCQ)}", 1, 0).encode())
    restart_s = time.monotonic() - t0
    d.stop()
    print(json.dumps({
        "stored": n, "stored_end": stored, "cluster_queues": NCQ + 1, "load_s": round(load_s, 2),
        "submit_p50_ms": round(pct(lat, 50), 2), "submit_p99_ms": round(pct(lat, 99), 2),
        "submit_n": len(lat), "submit_cpu_ms": round(submit_cpu, 2),
        "batched_per_s": round(batched, 1), "batched_per_cpu_s": round(batched_cpu, 1),
        "batch": per, "finish_cpu_ms": round(sum(fin_cpu) / len(fin_cpu), 2),
        "load_avg": round(os.getloadavg()[0], 1),
        "finish_admit_p50_ms": round(pct(fin, 50), 2),
        "finish_admit_p99_ms": round(pct(fin, 99), 2),
        "finish_admitted": f"{admitted_ok}/{len(fin)}", "rss_kb": rss.get("VmRSS", -1),
        "hwm_kb": rss.get("VmHWM", -1), "restart_s": round(restart_s, 2)}))


if __name__ == "__main__":
    main()
