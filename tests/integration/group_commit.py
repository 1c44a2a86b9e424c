#!/usr/bin/env python3
"""group_commit.py - submits arriving together are committed together
(test_group_commit.sh). Usage: group_commit.py PORT PHASE STATE
  PHASE "concurrent": THREADS connections submit in rounds (a barrier per
    round, so their requests arrive in one loop turn); in each round one
    connection's submit is invalid: it must fail alone (400) while the
    others are acknowledged (200); every acknowledged Workload must be
    listed; /metrics must show group commits.
  PHASE "kill": the connections submit without pause; after ACKS
    acknowledgements the caller's SIGKILL arrives (this script sends it to
    the PID in STATE.pid); the acknowledged names go to STATE.
  PHASE "check": every name in STATE is stored after the restart.
Prints "ok - ..." / "not ok - ..." lines; exit 1 on any failure."""
import http.client
import json
import os
import signal
import sys
import threading
import time

THREADS = 12
ROUNDS = 15
fails = 0


def say(good, what):
    global fails
    print(("ok - " if good else "not ok - ") + what, flush=True)
    fails += 0 if good else 1


def workload(name, valid=True):
    queue = "  queueName: team-a\n" if valid else ""
    return ("apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\n"
            f"metadata: {{name: {name}, namespace: team-a}}\nspec:\n{queue}"
            "  podSets:\n  - name: main\n    count: 1\n    template:\n      spec:\n"
            "        containers:\n        - name: c\n          resources:\n"
            "            requests: {cpu: \"1\", nvidia.com/gpu: \"1\"}\n").encode()


def conn(port):
    return http.client.HTTPConnection("127.0.0.1", port, timeout=60)


def submit(c, body):
    c.request("POST", "/v1/workloads", body=body, headers={"Content-Type": "application/yaml"})
    r = c.getresponse()
    return r.status, r.read()


def get(port, path):
    c = conn(port)
    c.request("GET", path)
    r = c.getresponse()
    return r.status, r.read().decode()


def stored(port):
    st, body = get(port, "/v1/workloads")
    return {w["name"]: w["state"] for w in json.loads(body)["items"]} if st == 200 else {}


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    return -1


def concurrent(port):
    barrier = threading.Barrier(THREADS)
    acked, refused, wrong = [], [], []
    lock = threading.Lock()

    def worker(t):
        c = conn(port)
        for r in range(ROUNDS):
            bad = t == r % THREADS
            name = f"g-{t}-{r}"
            barrier.wait()
            st, body = submit(c, workload(name, not bad))
            with lock:
                if bad and st == 400 and b"spec.queueName" in body:
                    refused.append(name)
                elif not bad and st == 200 and name.encode() in body:
                    acked.append(name)
                else:
                    wrong.append(f"{name}: {st} {body[:200]!r}")
    ts = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    say(not wrong, f"each invalid submit failed alone, every other acknowledged ({wrong[:3]})")
    say(len(acked) == ROUNDS * (THREADS - 1) and len(refused) == ROUNDS,
        f"{len(acked)} acknowledged, {len(refused)} refused of {ROUNDS * THREADS}")
    have = stored(port)
    missing = [n for n in acked if n not in have]
    say(not missing, f"every acknowledged Workload is stored and listed ({missing[:5]})")
    say(not [n for n in refused if n in have], "no refused Workload is stored")
    st, text = get(port, "/metrics")
    groups = metric(text, "tenantd_submit_groups_total")
    grouped = metric(text, "tenantd_submits_grouped_total")
    say(groups > 0 and grouped >= 2 * groups,
        f"submits that arrived together were committed together: {grouped} submits in "
        f"{groups} group commits")


def kill(port, state, acks):
    pid = int(open(state + ".pid").read())
    acked, lock, stop = [], threading.Lock(), threading.Event()

    def worker(t):
        c = conn(port)
        k = 0
        while not stop.is_set():
            name = f"k-{t}-{k}"
            k += 1
            try:
                st, _ = submit(c, workload(name))
            except Exception:
                return
            if st == 200:
                with lock:
                    acked.append(name)
                    if len(acked) >= acks:
                        os.kill(pid, signal.SIGKILL)  # right after an acknowledgement
                        stop.set()
    ts = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    with open(state, "w") as f:
        f.write("\n".join(acked))
    say(len(acked) >= acks, f"{len(acked)} submits acknowledged before SIGKILL")


def check(port, state):
    names = [n for n in open(state).read().split("\n") if n]
    have = stored(port)
    missing = [n for n in names if n not in have]
    say(names and not missing,
        f"all {len(names)} acknowledged Workloads survive SIGKILL and restart ({missing[:5]})")


def main():
    port, phase = int(sys.argv[1]), sys.argv[2]
    if phase == "concurrent":
        concurrent(port)
    elif phase == "kill":
        kill(port, sys.argv[3], int(sys.argv[4]))
    else:
        check(port, sys.argv[3])
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
