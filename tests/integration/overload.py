#!/usr/bin/env python3
"""overload.py - overload survival of a running tenantd (test_overload.sh).

  overload.py TENANTCTL SCENARIO DATA_PORT ADMIN_PORT PID KEY DURATION_S

Measures a quiet baseline (latency of one critical request, fds, VmRSS),
runs `tenantctl loadtest` with SCENARIO (several times the upstream's
capacity) while sampling every 0.25 s /healthz (must answer 200 within 1 s),
tenantd's open fds and VmRSS, then measures how long after the overload
single requests are back near the baseline. Prints the figures; exits 1 if
a bound is broken. Bounds (env overrides): fds <= baseline + 256
(OVERLOAD_FD_SLACK), RSS growth <= 64 MiB (OVERLOAD_RSS_KIB), recovery
<= 5 s (OVERLOAD_RECOVERY_S).
"""
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def one(data_port, key, timeout=5):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "ping"}],
                       "max_tokens": 10}).encode()
    req = urllib.request.Request("http://127.0.0.1:%d/v1/chat/completions" % data_port, data=body,
                                 headers={"Authorization": "Bearer " + key,
                                          "X-Criticality": "critical"})
    t0 = time.time()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            r.read()
            return r.status, time.time() - t0
    except urllib.error.HTTPError as e:
        return e.code, time.time() - t0
    except (OSError, urllib.error.URLError):
        return None, time.time() - t0


def main():
    tenantctl, scenario, data_port, admin_port, pid, key, duration = sys.argv[1:8]
    data_port, admin_port, pid = int(data_port), int(admin_port), int(pid)
    fd_slack = int(os.environ.get("OVERLOAD_FD_SLACK", "256"))
    rss_bound = int(os.environ.get("OVERLOAD_RSS_KIB", str(64 * 1024)))
    recovery_bound = float(os.environ.get("OVERLOAD_RECOVERY_S", "5"))
    failures = []

    lat = []
    for _ in range(10):
        st, t = one(data_port, key)
        if st == 200:
            lat.append(t)
    if len(lat) < 8:
        print("FAIL: the quiet baseline is not served")
        return 1
    lat.sort()
    base = lat[len(lat) // 2]
    fd0, rss0 = fds(pid), rss_kib(pid)

    samples = []
    stop = threading.Event()

    def monitor():
        while not stop.is_set():
            t0 = time.time()
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % admin_port,
                                            timeout=1) as r:
                    hz = r.status
            except (OSError, urllib.error.URLError):
                hz = None
            samples.append((time.time() - t0, hz, fds(pid), rss_kib(pid)))
            time.sleep(0.25)

    mon = threading.Thread(target=monitor)
    mon.start()
    lt = subprocess.run([tenantctl, "loadtest", "--scenario", scenario, "--target",
                         "http://127.0.0.1:%d" % data_port, "--duration", duration + "s",
                         "--timeout", "3s", "--format", "json", "-q"],
                        capture_output=True, text=True)
    t_end = time.time()
    # recovery: single critical requests until five in a row are near the baseline
    near = base * 2 + 0.1
    streak, recovered = 0, None
    while time.time() - t_end < 30:
        st, t = one(data_port, key)
        streak = streak + 1 if st == 200 and t <= near else 0
        if streak == 5:
            recovered = time.time() - t_end
            break
    stop.set()
    mon.join()

    try:
        res = json.loads(lt.stdout)["tenants"]
    except (ValueError, KeyError):
        print("FAIL: loadtest gave no JSON (exit %d): %s %s" % (lt.returncode, lt.stdout[:300],
                                                                lt.stderr[:300]))
        return 1
    print("%-8s %8s %8s %8s %8s %8s %8s %8s" % ("tenant", "offered", "sent", "ok", "429", "503",
                                                  "errors", "p99 ms"))
    for name, t in sorted(res.items()):
        print("%-8s %8d %8d %8d %8d %8d %8d %8s" % (name, t["offered"], t["sent"], t["accepted"],
                                                     t["rateLimited"], t["shed"], t["errors"],
                                                     t["p99Ms"]))
    hz_bad = [s for s in samples if s[1] != 200 or s[0] > 1.0]
    hz_max = max(s[0] for s in samples) if samples else -1
    fd_max = max(s[2] for s in samples) if samples else -1
    rss_max = max(s[3] for s in samples) if samples else -1
    print("healthz: %d samples during the overload, %d failed or over 1 s, slowest %.0f ms" %
          (len(samples), len(hz_bad), hz_max * 1000))
    print("fds: %d before, at most %d during (bound %d)" % (fd0, fd_max, fd0 + fd_slack))
    print("VmRSS: %d KiB before, at most %d KiB during (bound +%d KiB)" % (rss0, rss_max, rss_bound))
    print("latency: baseline %.0f ms; after the overload, 5 requests in a row under %.0f ms %s" %
          (base * 1000, near * 1000,
           "after %.2f s" % recovered if recovered is not None else "never (30 s)"))

    if not samples or hz_bad:
        failures.append("/healthz failed or was slower than 1 s %d times" % len(hz_bad))
    if fd_max > fd0 + fd_slack:
        failures.append("fds reached %d (baseline %d)" % (fd_max, fd0))
    if rss_max - rss0 > rss_bound:
        failures.append("RSS grew by %d KiB" % (rss_max - rss0))
    if recovered is None or recovered > recovery_bound:
        failures.append("latency did not recover within %.0f s" % recovery_bound)
    shed = sum(t["shed"] for t in res.values())
    limited = sum(t["rateLimited"] for t in res.values())
    if shed == 0:
        failures.append("nothing was shed (503) at this load")
    if limited == 0:
        failures.append("nothing was rate-limited (429) at this load")
    prod = res.get("prod")
    if prod and prod["success"] < 0.9:
        failures.append("critical tenant prod succeeded only %.3f (want >= 0.9): "
                        "sheddable work was not shed first" % prod["success"])
    if prod and res.get("batch") and res["batch"]["shed"] <= prod["shed"]:
        failures.append("the sheddable tenant was not shed more than the critical one")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
