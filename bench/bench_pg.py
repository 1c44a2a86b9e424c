#!/usr/bin/env python3
"""bench_pg.py - tenantd on PostgreSQL beside SQLite, on a real
server this script starts (initdb + pg_ctl, as the postgres user when root,
as tests/integration/lib.sh does) on a free loopback port:

- gateway: requests/s and tenantd CPU per request with --database postgres
  (store, lease, ledger shipped) against the same load on an SQLite store,
  runs interleaved (wrk, phase A's load of scripts/bench.sh);
- ledger: records/s committed locally (SQLite ledger.db) and shipped to
  PostgreSQL during that load, and the shipper's lag at its end;
- the ledger alone (bench_ledger_pg.c: td_ledger fed as fast as it
  commits): records/s committed in SQLite without a database, and
  committed and shipped with one; the spool's drain rate after an outage
  (PostgreSQL stopped while records are written, started after);
- the gateway through an outage: PostgreSQL stopped under load, every
  request answered, the spool drained after its return (the gateway's
  ledger rolls requests up, so this spool is small: a check, not a rate);
- takeover after SIGKILL of the leader among three replicas (kill -> new
  term in tenantd_leader), min/median/max.

Usage: bench_pg.py BUILD_DIR OUT.jsonl [--quick]
Writes one JSON object per figure to OUT.jsonl; prints a summary."""
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

BUILD, OUT = sys.argv[1], sys.argv[2]
QUICK = "--quick" in sys.argv
DUR = 2 if QUICK else 5
REPS = 2 if QUICK else 3
KILLS = 3 if QUICK else 7
CONNS = 32
TICK = os.sysconf("SC_CLK_TCK")
TMP = tempfile.mkdtemp(prefix="td-benchpg.")
PROCS = []
results = []


def emit(**kw):
    results.append(kw)
    print("  " + json.dumps(kw), flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def as_postgres(cmd):
    return (["runuser", "-u", "postgres", "--"] + cmd) if os.getuid() == 0 else cmd


def pg_bin():
    base = "/usr/lib/postgresql"
    vs = sorted(os.listdir(base), key=lambda v: [int(x) for x in v.split(".") if x.isdigit()])
    return os.path.join(base, vs[-1], "bin")


class Postgres:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="td-benchpg-db.")
        os.chmod(self.dir, 0o755)
        if os.getuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        subprocess.run(as_postgres([pg_bin() + "/initdb", "-D", self.dir + "/data", "-U", "postgres",
                                    "-A", "trust", "--no-sync"]), check=True, stdout=subprocess.DEVNULL)
        self.port = free_port()
        self.url = "postgresql://postgres@127.0.0.1:%d/postgres" % self.port
        self.start()

    def ctl(self, *args):
        subprocess.run(as_postgres([pg_bin() + "/pg_ctl", "-D", self.dir + "/data", "-l",
                                    self.dir + "/server.log", "-w", "-t", "30"] + list(args)),
                       check=True, stdout=subprocess.DEVNULL)

    def start(self):
        # synchronous_commit stays on: the ledger's commits are durable ones
        self.ctl("-o", "-c listen_addresses=127.0.0.1 -c port=%d -c unix_socket_directories=%s"
                 % (self.port, self.dir), "start")

    def stop(self):
        self.ctl("-m", "fast", "stop")

    def q(self, sql):
        return subprocess.run(["psql", "-X", "-q", "-A", "-t", self.url, "-c", sql],
                              capture_output=True, text=True).stdout.strip()

    def remove(self):
        try:
            self.ctl("-m", "immediate", "stop")
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_file(path, secs=10):
    end = time.time() + secs
    while time.time() < end:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return open(path).read().strip()
        time.sleep(0.05)
    raise RuntimeError("timed out waiting for " + path)


def spawn(cmd, log):
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(log, "a"))
    PROCS.append(p)
    return p


def tenantd(name, cfg, *extra):
    d = os.path.join(TMP, name)
    os.makedirs(d, exist_ok=True)
    p = spawn([BUILD + "/tenantd", "--data", d + "/data", "--config", cfg, "--admin-listen",
               "127.0.0.1:0", "--port-file", d + "/admin", "--listen", "127.0.0.1:0",
               "--listen-port-file", d + "/port", "--workers", "1", "--admin-threads", "1",
               "--replica-name", name] + list(extra), d + "/log")
    return p, int(wait_file(d + "/admin")), int(wait_file(d + "/port"))


def metric(admin, name):
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % admin, timeout=10).read().decode()
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def cpu_ticks(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])


def wrk(port, secs):
    env = dict(os.environ, WRK_KEYS="key-a,key-b,key-c")
    out = subprocess.run(["wrk", "-t1", "-c%d" % CONNS, "-d%ds" % secs, "--timeout", "5s", "-s",
                          "bench/wrk_keys.lua", "http://127.0.0.1:%d/v1/completions" % port],
                         env=env, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("RESULT"):
            f = line.split()
            return {"requests": int(f[1]), "us": int(f[2]), "non2xx": int(f[3]), "errors": int(f[4]),
                    "p50_us": int(f[5]), "p99_us": int(f[6])}
    raise RuntimeError("wrk gave no RESULT: " + out[-300:])


def sha(s):
    import hashlib
    return hashlib.sha256(s.encode()).hexdigest()


def write_config(sim):
    cfg = os.path.join(TMP, "td.yaml")
    with open(cfg, "w") as f:
        for t in "abc":
            f.write("apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: team-%s}\n"
                    "spec:\n  apiKeys: [{sha256: \"%s\"}]\n  gateway: {rate: {cost: 100000000, "
                    "per: 1s, burst: 100000000}, concurrency: 100000}\n---\n" % (t, sha("key-" + t)))
        f.write("apiVersion: tenantd.dev/v1alpha1\nkind: Route\nmetadata: {name: all}\nspec:\n"
                "  match: {pathPrefix: /}\n  upstream: {address: \"127.0.0.1:%d\", capacity: 4096, "
                "queue: 4096}\n  cost: {model: requests}\n" % sim)
    return cfg


def measure_gateway(pg, cfg):
    """Interleaved runs on an SQLite store and on PostgreSQL (ledger on in
    both: local only, and local + shipped)."""
    sq = tenantd("sqlite", cfg)
    pq = tenantd("postgres", cfg, "--database", pg.url)
    systems = {"sqlite": sq, "postgres": pq}
    for rep in range(1, REPS + 1):
        for name, (p, admin, port) in systems.items():
            wrk(port, 1)  # warm-up
            time.sleep(0.5)
            rec0, ship0 = metric(admin, "tenantd_ledger_records_total"), metric(admin, "tenantd_ledger_shipped_total")
            t0 = cpu_ticks(p.pid)
            r = wrk(port, DUR)
            cpu_us = (cpu_ticks(p.pid) - t0) * 1e6 / TICK
            rec1, ship1 = metric(admin, "tenantd_ledger_records_total"), metric(admin, "tenantd_ledger_shipped_total")
            secs = r["us"] / 1e6
            row = {"kind": "pg-gateway", "store": name, "rep": rep, "requests": r["requests"],
                   "rps": r["requests"] / secs, "cpu_us_per_req": cpu_us / max(r["requests"], 1),
                   "non2xx": r["non2xx"], "p50_us": r["p50_us"], "p99_us": r["p99_us"],
                   "ledger_records_per_s": (rec1 - rec0) / secs}
            if name == "postgres":
                row["shipped_per_s"] = (ship1 - ship0) / secs
                row["lag_at_end"] = metric(admin, "tenantd_ledger_spooled")
            emit(**row)
    for p, _, _ in systems.values():
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
    return pq


def measure_drain(pg, cfg):
    """PostgreSQL stopped under load: the spool fills; then started, and
    the spool's drain timed from the server's return until it is empty."""
    p, admin, port = tenantd("drain", cfg, "--database", pg.url)
    for rep in range(1, REPS + 1):
        pg.stop()
        r = wrk(port, DUR)
        time.sleep(0.5)
        spooled = metric(admin, "tenantd_ledger_spooled")
        shipped0 = metric(admin, "tenantd_ledger_shipped_total")
        pg.start()
        t0 = time.monotonic()
        while metric(admin, "tenantd_ledger_spooled") > 0 and time.monotonic() - t0 < 120:
            time.sleep(0.02)
        secs = time.monotonic() - t0
        shipped = metric(admin, "tenantd_ledger_shipped_total") - shipped0
        emit(kind="pg-drain", rep=rep, requests_during_outage=r["requests"],
             non2xx_during_outage=r["non2xx"], spooled=spooled, shipped=shipped,
             drain_s=secs, drain_records_per_s=shipped / secs if secs > 0 else None)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=30)


LEDGER_MAX = "20000" if QUICK else "30000"  # records per run: the drain stays short


def ledger_run(url, secs):
    d = tempfile.mkdtemp(prefix="ledger.", dir=TMP)
    out = subprocess.run([BUILD + "/bench_ledger_pg", d, str(secs), url] + [LEDGER_MAX],
                         capture_output=True, text=True)
    shutil.rmtree(d, ignore_errors=True)
    if out.returncode != 0:
        raise RuntimeError("bench_ledger_pg failed: " + out.stdout + out.stderr)
    return json.loads(out.stdout)


def measure_ledger(pg):
    """bench_ledger_pg: SQLite alone vs shipped to PostgreSQL, interleaved;
    then with PostgreSQL down while records are written, started again after
    the window: the spool's drain rate after an outage."""
    if not os.path.exists(BUILD + "/bench_ledger_pg"):
        return
    secs = 1 if QUICK else 2
    for rep in range(1, REPS + 1):
        for url in ("-", pg.url):
            emit(rep=rep, mode="steady", **ledger_run(url, secs))
        pg.stop()
        p = subprocess.Popen([BUILD + "/bench_ledger_pg", tempfile.mkdtemp(prefix="ledger.", dir=TMP),
                              str(secs), pg.url, LEDGER_MAX], stdout=subprocess.PIPE, text=True)
        time.sleep(secs + 1.5)
        pg.start()
        out, _ = p.communicate(timeout=600)
        if p.returncode != 0:
            raise RuntimeError("bench_ledger_pg (outage) failed: " + out)
        emit(rep=rep, mode="outage", **json.loads(out))


def measure_takeover(pg, cfg):
    """Three replicas; the leader SIGKILLed, restarted as a follower, KILLS
    times: kill -> a new term in tenantd_leader (psql polled)."""
    reps = {n: tenantd("r" + n, cfg, "--database", pg.url, "--ledger", "off") for n in "ABC"}
    times = []
    for k in range(KILLS):
        time.sleep(1.5)
        holder, term = pg.q("SELECT holder || ' ' || term FROM tenantd_leader").split()
        name = holder[1:]
        p = reps[name][0]
        t0 = time.monotonic()
        p.send_signal(signal.SIGKILL)
        p.wait()
        while True:
            now = pg.q("SELECT term FROM tenantd_leader")
            if now and int(now) > int(term):
                break
            if time.monotonic() - t0 > 30:
                raise RuntimeError("no takeover within 30 s")
            time.sleep(0.01)
        times.append((time.monotonic() - t0) * 1000)
        emit(kind="pg-takeover", kill=k + 1, ms=times[-1], new_leader=pg.q("SELECT holder FROM tenantd_leader"))
        os.remove(os.path.join(TMP, holder, "admin"))
        os.remove(os.path.join(TMP, holder, "port"))
        reps[name] = tenantd(holder, cfg, "--database", pg.url, "--ledger", "off")
    emit(kind="pg-takeover-summary", n=len(times), min_ms=min(times),
         median_ms=statistics.median(times), max_ms=max(times))
    for p, _, _ in reps.values():
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)


def main():
    pg = Postgres()
    try:
        simpf = os.path.join(TMP, "sim.port")
        spawn([BUILD + "/simmodel", "--listen", "127.0.0.1:0", "--port-file", simpf, "--slots", "4096",
               "--ms-per-token", "0", "--prefill-ms-per-token", "0", "--max-queue", "100000"],
              os.path.join(TMP, "sim.log"))
        cfg = write_config(int(wait_file(simpf)))
        ver = pg.q("SHOW server_version")
        emit(kind="pg-server", version=ver, reps=REPS, dur_s=DUR, conns=CONNS,
             load=open("/proc/loadavg").read().split()[0])
        measure_gateway(pg, cfg)
        measure_ledger(pg)
        measure_drain(pg, cfg)
        measure_takeover(pg, cfg)
    finally:
        for p in PROCS:
            if p.poll() is None:
                p.kill()
                p.wait()
        pg.remove()
        shutil.rmtree(TMP, ignore_errors=True)
        with open(OUT, "a") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")


main()
