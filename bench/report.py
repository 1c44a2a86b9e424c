#!/usr/bin/env python3
"""report.py - turns scripts/bench.sh's raw records into the printed tables,
bench/results/latest.json and docs/benchmarks.md. Every figure is the median
of the runs, with min and max; every ratio is tenantd against the peer
measured in the same run."""
import argparse
import json
import statistics
import sys
import time

ap = argparse.ArgumentParser()
for a in ("records", "limiter", "shared", "queue", "submit", "ledger", "admit", "machine", "versions", "json", "doc", "pinning",
          "binary"):
    ap.add_argument("--" + a, default="")
for a in ("quick", "reps", "dur", "conns", "abuse-rate"):
    ap.add_argument("--" + a, type=int, default=0)
o = ap.parse_args()

failures = []


def stat(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


# ---- gateway and webhook records ----
runs = {}
gw_ledger = []  # records committed and dropped, requests and wrk's microseconds per metered run
wh_open = {}  # offered rate -> bench_loadgen runs against the HTTPS webhook (per core)
wh_open2 = {}  # the same against 2 admin threads, nothing pinned (the whole machine)
flood = {}  # s-flood: system -> bench/flood.sh runs
FLOOD_FIELDS = ("base_p50_ms", "base_p99_ms", "base_success", "flood_p50_ms", "flood_p99_ms",
                "flood_success", "abuser_attempts_per_s", "abuser_429", "cpu_us_per_attempt",
                "abuser_accepted", "cpu_pct")
for line in open(o.records):
    f = line.split()
    if f and f[0] == "flood":
        if len(f) >= 5 + len(FLOOD_FIELDS):
            flood.setdefault(f[1], []).append(dict(zip(FLOOD_FIELDS, (float(x) for x in f[5:]))))
        else:
            failures.append("flood %s: run %s produced no result" % (f[1], f[4] if len(f) > 4 else "?"))
        continue
    if f and f[0] in ("webhook-open", "webhook-open2"):
        dest = wh_open if f[0] == "webhook-open" else wh_open2
        if len(f) >= 17:
            v = [float(x) for x in f[5:17]]
            dest.setdefault(int(f[3]), []).append({
                "offered": v[0], "achieved": v[1], "sent": v[2], "completed": v[3], "non2xx": v[4],
                "errors": v[5], "incomplete": v[6], "p50_ms": v[7] / 1000, "p90_ms": v[8] / 1000,
                "p99_ms": v[9] / 1000, "p999_ms": v[10] / 1000, "max_ms": v[11] / 1000,
                "cpu_us_per_req": float(f[17]) if len(f) > 17 and float(f[17]) >= 0 else None})
        else:
            failures.append("%s %s/s: run %s produced no result" % (f[0], f[3], f[4]))
        continue
    if f and f[0] == "ledger":
        if len(f) >= 9:
            gw_ledger.append({"committed": int(f[5]), "dropped": int(f[6]), "requests": int(f[7]),
                              "us": int(f[8])})
        else:
            failures.append("ledger: run %s produced no result" % (f[4] if len(f) > 4 else "?"))
        continue
    key = tuple(f[:4])
    if len(f) < 12:
        failures.append("%s: run %s produced no result" % ("/".join(f[:4]), f[4] if len(f) > 4 else "?"))
        continue
    req, dur, non2xx, errs, p50, p99, p999 = (int(x) for x in f[5:12])
    runs.setdefault(key, []).append({
        "rps": req / (dur / 1e6), "p50_ms": p50 / 1000, "p99_ms": p99 / 1000,
        "p999_ms": p999 / 1000, "non2xx_pct": 100.0 * non2xx / max(req, 1),
        "socket_errors": errs,
        "cpu_us_per_req": float(f[12]) if len(f) > 12 and float(f[12]) >= 0 else None})


def agg(kind, system, phase, role):
    rs = runs.get((kind, system, phase, role), [])
    if not rs:
        return None
    return {k: stat([r[k] for r in rs]) for k in rs[0]}


def cpu(a):
    v = med(a, "cpu_us_per_req")
    return "%.1f" % v if v else "n/a"


def med(a, k):
    return a[k]["median"] if a and a.get(k) else None


def fmt_rng(s, spec="%.0f"):
    if not s:
        return "n/a"
    return (spec + " [" + spec + "-" + spec + "]") % (s["median"], s["min"], s["max"])


def ratio(a, b):
    return a / b if a and b else None


def rfmt(x):
    return "%.2fx" % x if x else "n/a"


lines = []  # markdown


def table(title, head, rows, note=""):
    print("\n" + title)
    widths = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    for r in [head] + rows:
        print("  " + "  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    if note:
        print("  " + note)
    lines.append("### " + title + "\n")
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for r in rows:
        lines.append("| " + " | ".join(str(c) for c in r) + " |")
    if note:
        lines.append("\n" + note)
    lines.append("")


result = {"generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": o.machine,
          "versions": o.versions, "quick": bool(o.quick), "reps": o.reps, "duration_s": o.dur,
          "connections": o.conns, "pinning": o.pinning}

systems = ["tenantd", "nginx", "haproxy"]
gw = {s: {p: agg("gateway", s, *p.split("/")) for p in ("A/all", "B/others", "B/abuser", "R/abuser")}
      for s in systems}
direct = agg("gateway", "direct", "A", "all")
# The floors (bench/bench_floor.c): a byte forwarder with no parsing, and a
# canned 429, pinned and measured like the proxies.
floor_fwd = agg("gateway", "floor-fwd", "A", "all")
floor_429 = agg("gateway", "floor-429", "R", "abuser")
result["gateway"] = {"direct_A": direct, "floor_forward_A": floor_fwd, "floor_429_R": floor_429, **gw}
td = gw["tenantd"]

rows = []
for s in systems:
    a = gw[s]["A/all"]
    if not a:
        rows.append([s] + ["n/a"] * 7)
        continue
    rows.append([s, fmt_rng(a["rps"]), "%.2f" % med(a, "p50_ms"), "%.2f" % med(a, "p99_ms"),
                 "%.2f" % med(a, "p999_ms"), "%.1f" % med(a, "non2xx_pct"), cpu(a),
                 "-" if s == "tenantd" else "%s / %s / %s" % (
                     rfmt(ratio(med(td["A/all"], "rps"), med(a, "rps"))),
                     rfmt(ratio(med(td["A/all"], "p99_ms"), med(a, "p99_ms"))),
                     rfmt(ratio(med(a, "cpu_us_per_req"), med(td["A/all"], "cpu_us_per_req"))))])
if floor_fwd:
    rows.append(["(floor: byte forwarder)", fmt_rng(floor_fwd["rps"]), "%.2f" % med(floor_fwd, "p50_ms"),
                 "%.2f" % med(floor_fwd, "p99_ms"), "%.2f" % med(floor_fwd, "p999_ms"),
                 "%.1f" % med(floor_fwd, "non2xx_pct"), cpu(floor_fwd), "%s / %s / %s" % (
                     rfmt(ratio(med(td["A/all"], "rps"), med(floor_fwd, "rps"))),
                     rfmt(ratio(med(td["A/all"], "p99_ms"), med(floor_fwd, "p99_ms"))),
                     rfmt(ratio(med(floor_fwd, "cpu_us_per_req"), med(td["A/all"], "cpu_us_per_req"))))])
if direct:
    rows.append(["(simmodel direct)", fmt_rng(direct["rps"]), "%.2f" % med(direct, "p50_ms"),
                 "%.2f" % med(direct, "p99_ms"), "%.2f" % med(direct, "p999_ms"), "-",
                 cpu(direct) + " (simmodel)", "-"])
table("Gateway phase A: proxied path, limits on, nothing rejected",
      ["system", "req/s median [min-max]", "p50 ms", "p99 ms", "p99.9 ms", "non-2xx %",
       "proxy CPU us/req", "tenantd ratio: req/s / p99 / CPU efficiency"], rows,
      "Ratios: tenantd's req/s over the peer's (higher is better) / tenantd's p99 over the peer's "
      "(lower is better) / the peer's CPU per request over tenantd's (higher is better). "
      "Target: >= 1.30x req/s and p99 ratio <= 1.00x vs nginx. The load generator, simmodel and "
      "the proxy share 2 cores, so req/s is a whole-machine figure; proxy CPU per request "
      "(utime + stime of the proxy's processes / requests) is the proxy's own cost. The floor "
      "(`bench/bench_floor.c forward`) copies bytes between each client connection and its own "
      "upstream connection with one read and one write per direction, parsing nothing: what any "
      "HTTP/1.1 proxy without pipelining pays at least.")

rows = []
for s in systems:
    b, x = gw[s]["B/others"], gw[s]["B/abuser"]
    if not b or not x:
        rows.append([s] + ["n/a"] * 8)
        continue
    rows.append([s, fmt_rng(b["rps"]), "%.2f" % med(b, "p50_ms"), "%.2f" % med(b, "p99_ms"),
                 "%.2f" % med(b, "p999_ms"), "%.2f" % med(b, "non2xx_pct"), cpu(b),
                 "%.0f (%.1fx limit), %.1f%% rejected" % (
                     med(x, "rps"), med(x, "rps") / o.abuse_rate, med(x, "non2xx_pct")),
                 "-" if s == "tenantd" else "%s / %s" % (
                     rfmt(ratio(med(td["B/others"], "rps"), med(b, "rps"))),
                     rfmt(ratio(med(td["B/others"], "p99_ms"), med(b, "p99_ms"))))])
table("Gateway phase B: one tenant at ~10x its limit (%d/s) while the others run" % o.abuse_rate,
      ["system", "others req/s", "others p50 ms", "others p99 ms", "others p99.9 ms",
       "others non-2xx %", "proxy CPU us/req (all)", "abuser offered req/s, rejected",
       "tenantd ratio: req/s / p99"], rows)

rows = []
for s in systems:
    r, a = gw[s]["R/abuser"], gw[s]["A/all"]
    if not r or not a:
        rows.append([s] + ["n/a"] * 8)
        continue
    rows.append([s, fmt_rng(r["rps"]), "%.2f" % med(r, "p50_ms"), "%.2f" % med(r, "p99_ms"),
                 "%.1f" % med(r, "non2xx_pct"), cpu(r), rfmt(ratio(med(r, "rps"), med(a, "rps"))),
                 rfmt(ratio(med(a, "cpu_us_per_req"), med(r, "cpu_us_per_req"))),
                 "-" if s == "tenantd" else "%s / %s" % (
                     rfmt(ratio(med(td["R/abuser"], "rps"), med(r, "rps"))),
                     rfmt(ratio(med(r, "cpu_us_per_req"), med(td["R/abuser"], "cpu_us_per_req"))))])
if floor_429:
    rows.append(["(floor: canned 429)", fmt_rng(floor_429["rps"]), "%.2f" % med(floor_429, "p50_ms"),
                 "%.2f" % med(floor_429, "p99_ms"), "%.1f" % med(floor_429, "non2xx_pct"),
                 cpu(floor_429), rfmt(ratio(med(floor_429, "rps"), med(floor_fwd, "rps"))),
                 rfmt(ratio(med(floor_fwd, "cpu_us_per_req"), med(floor_429, "cpu_us_per_req"))),
                 "%s / %s" % (rfmt(ratio(med(td["R/abuser"], "rps"), med(floor_429, "rps"))),
                              rfmt(ratio(med(floor_429, "cpu_us_per_req"),
                                         med(td["R/abuser"], "cpu_us_per_req"))))])
table("Gateway reject path: every request over its tenant's limit (closed loop)",
      ["system", "rejects/s median [min-max]", "p50 ms", "p99 ms", "rejected %",
       "proxy CPU us/req", "reject / proxied req/s", "proxied / reject CPU per req",
       "tenantd ratio: req/s / CPU efficiency"], rows,
      "Target: reject path >= 5x the proxied path. With wrk on one core the reject req/s is "
      "bounded by the load generator; the CPU ratio (a proxied request's proxy CPU over a "
      "rejected one's) is the proxy's own reject capacity relative to its proxied capacity. The "
      "floor (`bench/bench_floor.c reject`) finds each request's end (headers + Content-Length) "
      "and writes a fixed keep-alive 429 of the size of tenantd's; its ratios are against the "
      "byte forwarder's phase A.")

# ---- s-flood: the gateway at defaults, and the flood phase ----
gd = {s: agg("gateway-defaults", s, "A", "all") for s in systems}
result["gateway_defaults"] = gd
rows = []
tdd = gd["tenantd"]
for s in systems:
    a, pinned = gd[s], gw[s]["A/all"]
    if not a:
        rows.append([s] + ["n/a"] * 6)
        failures.append("gateway at defaults: %s produced no result" % s)
        continue
    rows.append([s, fmt_rng(a["rps"]), "%.2f" % med(a, "p50_ms"), "%.2f" % med(a, "p99_ms"), cpu(a),
                 "%s / %s" % (fmt_rng(pinned["rps"]) if pinned else "n/a", cpu(pinned) if pinned else "n/a"),
                 "-" if s == "tenantd" else "%s / %s / %s" % (
                     rfmt(ratio(med(tdd, "rps"), med(a, "rps"))),
                     rfmt(ratio(med(tdd, "p99_ms"), med(a, "p99_ms"))),
                     rfmt(ratio(med(a, "cpu_us_per_req"), med(tdd, "cpu_us_per_req"))))])
table("Gateway at defaults: as many workers as cores, nothing pinned (phase A's load)",
      ["system", "req/s median [min-max]", "p50 ms", "p99 ms", "CPU us/req (all threads)",
       "pinned one-worker table: req/s / CPU us/req", "tenantd ratio: req/s / p99 / CPU efficiency"],
      rows,
      "As users start them: tenantd with no tuning flag (`--workers` defaults to the cores), nginx "
      "`worker_processes auto`, haproxy `nbthread` = cores; wrk, simmodel and the proxy share "
      "the cores unpinned, so req/s is the whole machine's; CPU per request (utime + stime of "
      "all the proxy's threads and processes / requests) is the proxy's own cost. Ratios as in "
      "phase A. Targets: >= 1.3x nginx and >= 1.1x haproxy req/s, CPU per request "
      "<= 0.75x nginx's, p99 <= both.")

FLOOD_SYS = [("tenantd", "tenantd (defaults)"), ("tenantd-off", "tenantd --tarpit-after 0"),
             ("nginx", "nginx (limit_req per key)"), ("haproxy", "haproxy (stick-table per key)")]
result["flood"] = {}
rows = []
for s, label in FLOOD_SYS:
    rs = flood.get(s)
    if not rs:
        rows.append([label] + ["n/a"] * 7)
        failures.append("flood: %s produced no result" % s)
        continue
    a = {k: stat([r[k] for r in rs]) for k in FLOOD_FIELDS}
    result["flood"][s] = a
    p99r = ratio(med(a, "flood_p99_ms"), med(a, "base_p99_ms"))
    rows.append([label, "%.1f / %.1f" % (med(a, "base_p50_ms"), med(a, "base_p99_ms")),
                 "%.1f / %.1f" % (med(a, "flood_p50_ms"), med(a, "flood_p99_ms")),
                 rfmt(p99r) + (" (<= 1.2x)" if p99r and p99r <= 1.2 else " (> 1.2x)" if p99r else ""),
                 "%.2f%%" % (100 * min(r["flood_success"] for r in rs)),
                 fmt_rng(a["abuser_attempts_per_s"]),
                 "%.1f" % med(a, "cpu_us_per_attempt"), "%.0f%%" % med(a, "cpu_pct")])
table("Flood: an abuser with 64 connections retrying every 429 at once beside three tenants",
      ["system", "others alone p50 / p99 ms", "others in the flood p50 / p99 ms", "p99 flood / alone",
       "others' lowest success", "abuser attempts/s median [min-max]", "CPU us per attempt",
       "system CPU during the flood (% of a core)"], rows,
      "`bench/flood.sh BUILD SYS SECS WORKERS`: simmodel at 50 ms a request; three tenants at 20 "
      "requests/s each (`tenantctl loadtest`, client library, 4 connections each) measured alone "
      "and then beside an abuser limited to 20 requests/s offering 400/s over 64 connections, "
      "retrying every 429 at once (`client: abusive`, a second loadtest process), every system "
      "with as many workers as cores, unpinned. tenantd: Route capacity 8, the abuser's "
      "concurrency 2; nginx `limit_req` 20 r/s burst 20 nodelay on the abuser's key (no "
      "`max_conns`: open-source nginx has no upstream queue and would answer 502); haproxy "
      "stick-table `http_req_rate(1s)` > 20 denied with 429, server `maxconn 8`. p50/p99: the "
      "worst of the three tenants; CPU per attempt: the system's CPU over the abuser's run less "
      "the others' share measured alone, per abuser attempt. Target: the others' p99 "
      "<= 1.2x alone and 100% success.")

# ---- limiter ----
try:
    lim = json.load(open(o.limiter))
except (OSError, ValueError):
    lim = None
    failures.append("limiter benchmark produced no result")
result["limiter"] = lim
if lim:
    table("Limiter: ns per decision (GCRA, one CAS) vs mutex token bucket",
          ["tenants", "threads", "tenantd ns", "mutex token bucket ns", "tenantd speed-up",
           "admitted %"],
          [[r["tenants"], r["threads"], "%.1f" % r["gcra_ns"], "%.1f" % r["mutex_ns"],
            "%.2fx" % r["ratio"], "%.1f" % r["admitted_pct"]] for r in lim],
          "Best of 3 per cell; target <= 50 ns at 100k tenants.")

# ---- shared ----
sh = []
try:
    sh = [json.loads(l) for l in open(o.shared) if l.strip()]
except (OSError, ValueError):
    pass
if not sh:
    failures.append("redis benchmark produced no result")
else:
    agg_sh = {}
    for d in ("leased", "naive"):
        agg_sh[d] = {k: stat([r[d][k] for r in sh]) for k in sh[0][d]}
    result["shared"] = {"runs": sh, "summary": agg_sh}
    L, N = agg_sh["leased"], agg_sh["naive"]
    rows = []
    for d, a in (("tenantd leased", L), ("naive INCR+EXPIRE per request", N)):
        rows.append([d, fmt_rng(a["decisions_per_s"]), "%.0f" % a["enforce_admitted"]["median"],
                     "%.0f" % a["enforce_allowed"]["median"],
                     "%+.0f (%+.1f%%)" % (a["over_admission"]["median"],
                                          a["over_admission_pct"]["median"]),
                     "%+.1f%%" % a["over_admission_pct"]["max"]])
    table("Shared limits on Redis: two replicas, one redis-server",
          ["design", "decisions/s median [min-max]", "admitted", "allowed (B + R T)",
           "over-admission median", "worst"], rows,
          "tenantd/naive decisions/s: %s (target >= 10x). Enforce mode: R = %g/s, B = %g, %g s, "
          "offered far above R by both replicas. tenantd's documented bound: B + R T + "
          "replicas x chunk (chunk = 5%% of B = %g)." % (
              rfmt(ratio(L["decisions_per_s"]["median"], N["decisions_per_s"]["median"])),
              sh[0]["enforce_rate"], sh[0]["enforce_burst"], sh[0]["seconds"],
              0.05 * sh[0]["enforce_burst"]))

# ---- webhook ----
WH_NOTE = ("bench/fixtures/review.json (a Deployment's Pod, 6.6 kB) against "
           "bench/fixtures/webhook-platform.yaml (10 ResourceQuotas, a LimitRange, PSS baseline); "
           "allowed after every step")
wht = agg("webhook", "tenantd", "validate-tls", "all")
whp = agg("webhook", "tenantd", "validate", "all")
result["webhook"] = {"https": wht, "plain_http": whp, "open_loop_https": {}}
if wht or whp:
    rows = []
    for name, a in (("HTTPS keep-alive", wht), ("plain HTTP (for reference)", whp)):
        if a:
            rows.append([name, fmt_rng(a["rps"]), "%.2f" % med(a, "p50_ms"), "%.2f" % med(a, "p99_ms"),
                         "%.2f" % med(a, "p999_ms"), "%.1f" % med(a, "non2xx_pct"), cpu(a)])
    table("Admission webhook at saturation: POST /validate, wrk closed loop c=16, no peer: absolute",
          ["transport", "reviews/s median [min-max]", "p50 ms", "p99 ms", "p99.9 ms", "non-2xx %",
           "tenantd CPU us/review"], rows,
          "%s. Absolute on %s; loopback, tenantd --workers 1 --admin-threads 1 on cpu 0 (the per-core figure), wrk -t1 -c16 on cpu 1. At "
          "saturation a closed loop's latency is queueing (p50 ~ 16 / rate); see the fixed-rate table "
          "for latency. Target: >= 20k reviews/s (%s over HTTPS)." % (
              WH_NOTE, o.machine, ("met, %.0f" if med(wht, "rps") and med(wht, "rps") >= 20000
                                   else "NOT met, %.0f") % (med(wht, "rps") or 0)))
else:
    failures.append("webhook benchmark produced no result")
if wh_open:
    rows = []
    verdicts = []
    for rate in sorted(wh_open):
        rs = wh_open[rate]
        a = {k: stat([r[k] for r in rs]) for k in rs[0]}
        result["webhook"]["open_loop_https"][str(rate)] = a
        ach = med(a, "achieved") or 0
        lost = sum(r["errors"] + r["incomplete"] + r["non2xx"] for r in rs)
        label = "%d" % rate if rate in (10000, 20000) else "%d (half the saturation rate)" % rate
        rows.append([label, fmt_rng(a["achieved"]), "%.2f" % med(a, "p50_ms"),
                     "%.2f" % med(a, "p90_ms"), "%.2f" % med(a, "p99_ms"), "%.2f" % med(a, "p999_ms"),
                     "%.2f" % med(a, "max_ms"), "%d" % lost, cpu(a)])
        short = ach < 0.98 * rate
        p99 = med(a, "p99_ms") or 1e9
        verdicts.append("%d/s offered: %s, p99 %.2f ms %s 1 ms" % (
            rate, "achieved only %.0f/s (the server did not keep up)" % ach if short else "achieved",
            p99, "<=" if p99 <= 1 else ">"))
    table("Admission webhook at a fixed offered rate: HTTPS keep-alive, open loop (bench_loadgen)",
          ["offered reviews/s", "achieved median [min-max]", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms",
           "max ms", "errors+non-2xx+unanswered (all runs)", "tenantd CPU us/review"], rows,
          "bench/bench_loadgen.c: 16 keep-alive TLS connections, requests spaced evenly at the "
          "offered rate, latency from each request's scheduled time (coordinated omission "
          "corrected), 0.2 s warm-up; the first rate is half what the first https wrk run reached at "
          "saturation; loadgen on cpu 1, tenantd on cpu 0. Target: p99 <= 1 ms at "
          ">= 20k reviews/s. This run: " + "; ".join(verdicts) + ".")
    for rate in sorted(wh_open):
        if med(result["webhook"]["open_loop_https"][str(rate)], "achieved") is None:
            failures.append("webhook open loop at %d/s produced no result" % rate)
else:
    failures.append("webhook open-loop benchmark produced no result")
adm = []
try:
    adm = [json.loads(l) for l in open(o.admit) if l.strip()] if o.admit else []
except (OSError, ValueError):
    failures.append("bench_admit output is not JSON lines")
if adm:
    a = {k: stat([r[k]["median"] for r in adm]) for k in ("parse_us", "admit_us", "whole_us")}
    result["webhook"]["own_work_us"] = a
    rows = [[name, fmt_rng(a[k], "%.1f"), "%.0f" % (1e6 / a[k]["median"])]
            for name, k in (("parse the review (td_json_loadb_review)", "parse_us"),
                            ("admission (td_admission_review, parsed review)", "admit_us"),
                            ("whole: parse + admission + answer, in the arena", "whole_us"))]
    table("Admission webhook: tenantd's own work per review, no network (bench_admit)",
          ["step", "us per review median [min-max]", "reviews/s on one core"], rows,
          "%s. bench/bench_admit.c on cpu 0, one thread, %d runs, each the median of 5 rounds of "
          "%d reviews. What the HTTPS tables add to 'whole' is TLS, the HTTP server and the "
          "kernel's loopback send and receive." % (WH_NOTE, len(adm), adm[0]["n"]))
else:
    failures.append("bench_admit produced no result")
wh2 = agg("webhook", "tenantd", "validate-tls-2t", "all")
result["webhook"]["whole_machine"] = {"https": wh2, "open_loop_https": {}}
if wh2 or wh_open2:
    rows = []
    if wh2:
        rows.append(["wrk closed loop c=16 (saturation)", fmt_rng(wh2["rps"]), "%.2f" % med(wh2, "p50_ms"),
                     "%.2f" % med(wh2, "p99_ms"), "%.2f" % med(wh2, "p999_ms"), "-", cpu(wh2)])
    verdicts2 = []
    for rate in sorted(wh_open2):
        rs = wh_open2[rate]
        a = {k: stat([r[k] for r in rs]) for k in rs[0]}
        result["webhook"]["whole_machine"]["open_loop_https"][str(rate)] = a
        ach, p99 = med(a, "achieved") or 0, med(a, "p99_ms") or 1e9
        if rate >= 20000:
            verdicts2.append("%d/s offered: %s, p99 %.2f ms: target %s" % (
                rate, "achieved" if ach >= 0.98 * rate else "achieved only %.0f/s" % ach, p99,
                "MET" if ach >= 0.98 * rate and p99 <= 1 else "NOT met"))
        lost = sum(r["errors"] + r["incomplete"] + r["non2xx"] for r in rs)
        rows.append(["bench_loadgen open loop at %d/s" % rate, fmt_rng(a["achieved"]),
                     "%.2f" % med(a, "p50_ms"), "%.2f" % med(a, "p99_ms"), "%.2f" % med(a, "p999_ms"),
                     "%d" % lost, cpu(a)])
    table("Admission webhook, the whole machine: tenantd --admin-threads 2, nothing pinned",
          ["load", "reviews/s median [min-max]", "p50 ms", "p99 ms", "p99.9 ms",
           "errors+non-2xx+unanswered", "tenantd CPU us/review"], rows,
          "%s. HTTPS keep-alive, 16 connections spread by SO_REUSEPORT over the 2 admin threads' "
          "listeners; tenantd and the load generator unpinned on %s: the load generator takes "
          "its share of the cores, so this is what the machine does with both on it, not "
          "tenantd's ceiling (the per-core tables above pin each to its own cpu). Target: p99 <= 1 ms "
          "at >= 20k reviews/s. This run: %s." % (WH_NOTE, o.machine, "; ".join(verdicts2) or "no 20k/s run"))
    if not wh2:
        failures.append("webhook whole-machine wrk run produced no result")

# ---- ledger ----
lr = []
try:
    lr = [json.loads(l) for l in open(o.ledger) if l.strip()] if o.ledger else []
except (OSError, ValueError):
    pass
on, off = agg("gateway", "tenantd-meter", "M", "all"), agg("gateway", "tenantd-nometer", "M", "all")
result["ledger"] = {"writer": lr, "gateway_metering_on": on, "gateway_metering_off": off,
                    "gateway_ledger_runs": gw_ledger}
if not lr:
    failures.append("ledger benchmark produced no result")
else:
    rows = []
    for np in sorted({r["producers"] for r in lr}):
        rs = [r for r in lr if r["producers"] == np]
        bad = [r for r in rs if r["dropped"] or r["rows_in_db"] != r["appended"] or not r["flush_ok"]]
        if bad:
            failures.append("ledger: %d producer(s): records dropped or missing from the database" % np)
        rows.append([np, fmt_rng(stat([r["records_per_s"] for r in rs])),
                     sum(r["appended"] for r in rs), sum(r["rows_in_db"] for r in rs),
                     sum(r["dropped"] for r in rs)])
    result["ledger"]["writer_records_per_s"] = {
        str(np): stat([r["records_per_s"] for r in lr if r["producers"] == np])
        for np in sorted({r["producers"] for r in lr})}
    table("Ledger: sustained records/s with durability on (td_ledger writer alone)",
          ["producer threads", "records/s median [min-max]", "appended (all runs)",
           "rows in ledger.db", "dropped"], rows,
          "`bench/bench_ledger.c`: the daemon's td_ledger (DIR/ledger.db, journal_mode=WAL, "
          "synchronous=NORMAL, INSERT OR IGNORE by id, one writer thread committing batches of "
          "up to 1,024 records, buffer 65,536, flush every 200 ms) fed gateway request records "
          "as fast as it commits them (producers hold what waits below the buffer, so none is "
          "dropped); records committed over a %g s window after 0.5 s of warm-up; afterwards "
          "every appended record is counted in the file by a separate connection." % lr[0]["seconds"])
if on and off:
    committed = [g["committed"] / (g["us"] / 1e6) for g in gw_ledger if g["us"] > 0]
    dropped = sum(g["dropped"] for g in gw_ledger)
    metered = sum(g["committed"] for g in gw_ledger), sum(g["requests"] for g in gw_ledger)
    cost = 1 - med(on, "rps") / med(off, "rps") if med(off, "rps") else None
    cpu_cost = (med(on, "cpu_us_per_req") / med(off, "cpu_us_per_req") - 1
                if med(on, "cpu_us_per_req") and med(off, "cpu_us_per_req") else None)
    result["ledger"]["gateway_throughput_cost"] = cost
    result["ledger"]["gateway_cpu_cost"] = cpu_cost
    table("Ledger under gateway load: metering on vs off (phase A load)",
          ["tenantd", "req/s median [min-max]", "p50 ms", "p99 ms", "p99.9 ms",
           "proxy CPU us/req", "ledger records committed/s", "committed / requests",
           "records dropped"],
          [["--ledger on", fmt_rng(on["rps"]), "%.2f" % med(on, "p50_ms"),
            "%.2f" % med(on, "p99_ms"), "%.2f" % med(on, "p999_ms"), cpu(on),
            fmt_rng(stat(committed)),
            "%.3f" % (metered[0] / metered[1]) if metered[1] else "n/a", dropped],
           ["--ledger off", fmt_rng(off["rps"]), "%.2f" % med(off, "p50_ms"),
            "%.2f" % med(off, "p99_ms"), "%.2f" % med(off, "p999_ms"), cpu(off), "-", "-", "-"]],
          "Metering costs %s of gateway throughput (1 - on/off req/s, medians) and %s more "
          "proxy CPU per request (target: <= 5%%). Same wrk settings as phase A, runs of the two "
          "interleaved, each tenantd `--workers 1` on cpu 0 (its ledger writer thread included "
          "in its CPU); committed/s is the growth of the on instance's "
          "`tenantd_ledger_records_total` over each run (read 0.3 s after it, for the last "
          "batch) divided by wrk's duration. Each gateway worker sums its requests per tenant, "
          "route, API key and outcome and appends the sums every 250 ms, so a record counts "
          "many requests (committed / requests is records per request)." % (
              "%.1f%%" % (100 * cost) if cost is not None else "n/a",
              "%.1f%%" % (100 * cpu_cost) if cpu_cost is not None else "n/a"))
else:
    failures.append("gateway metering on/off produced no result")

# ---- the batch queue daemon: submits, finishes, restart ----
sr = []
try:
    sr = [json.loads(l) for l in open(o.submit) if l.strip()] if o.submit else []
except (OSError, ValueError):
    pass
if o.submit and not sr:
    failures.append("submit benchmark produced no result")
elif sr:
    result["submit"] = sr
    table("Batch queue daemon: a submit over N stored Workloads (1,000 ClusterQueues), "
          "HTTP keep-alive, Release build",
          ["stored", "submit p50 ms", "submit p99 ms", "submit CPU ms", "batched submits/s",
           "per CPU-s", "finish->admit p50 ms", "finish->admit p99 ms", "finish CPU ms",
           "admitted", "RSS MiB", "restart s", "load", "targets"],
          [[r["stored"], r["submit_p50_ms"], r["submit_p99_ms"], r.get("submit_cpu_ms", "n/a"),
            "%.0f (%d/req)" % (r["batched_per_s"], r["batch"]),
            "%.0f" % r.get("batched_per_cpu_s", 0), r["finish_admit_p50_ms"],
            r["finish_admit_p99_ms"], r.get("finish_cpu_ms", "n/a"), r["finish_admitted"],
            "%.0f" % (r["rss_kb"] / 1024.0), r["restart_s"], r.get("load_avg", "n/a"),
            "p99 %s, batched %s, finish %s, restart %s" % (
                "met" if r["submit_p99_ms"] <= 10 else "missed",
                "met" if r["batched_per_s"] >= 1000 else "missed",
                "met" if r["finish_admit_p99_ms"] <= 10 else "missed",
                "met" if r["restart_s"] <= 2 else "missed")] for r in sr],
          "bench/bench_submit.py: a real tenantd (SQLite store) with bench_queue's 1,000 "
          "ClusterQueues in 10 cohorts; N Workloads submitted first in batches of 2,000; then "
          "one-workload submits one after the other, 100-workload submits, finish of the "
          "workload holding a 1-GPU ClusterQueue (the answer comes after the commit that "
          "admits the next, checked), VmRSS, and restart (exec to the first submit's answer); "
          "CPU columns are tenantd's own CPU time per operation (/proc, 10 ms ticks), which a "
          "busy machine (load column) does not inflate as it does latencies. "
          "Targets (at 100k stored): submit p99 <= 10 ms, >= 1,000 submits/s "
          "batched, finish -> admission <= 10 ms, restart <= 2 s. The queue is kept in "
          "memory between commits; the full pass of the next table is what a start, an "
          "apply of the queue's objects or a delete costs.")

# ---- batch queue ----
qr = []
try:
    qr = [json.loads(l) for l in open(o.queue) if l.strip()]
except (OSError, ValueError):
    pass
if not qr:
    failures.append("queue benchmark produced no result")
else:
    import math

    def exponent(rows):
        # Least-squares slope of log(pass time) over log(workloads).
        pts = [(math.log(r["workloads"]), math.log(max(r["pass_s"], 1e-6))) for r in rows]
        if len(pts) < 2:
            return None
        mx = sum(x for x, _ in pts) / len(pts)
        my = sum(y for _, y in pts) / len(pts)
        den = sum((x - mx) ** 2 for x, _ in pts)
        return sum((x - mx) * (y - my) for x, y in pts) / den if den else None

    exps = {}
    for cqs in sorted({r["clusterQueues"] for r in qr}):
        exps[cqs] = exponent([r for r in qr if r["clusterQueues"] == cqs])
    result["queue"] = {"runs": qr, "growth_exponent": exps}
    big = [r for r in qr if r["workloads"] == 100000 and r["clusterQueues"] == 1000]
    table("Batch queue: one full admission pass (10 cohorts, two flavors), no peer: absolute",
          ["workloads", "ClusterQueues", "pass s", "setup s", "admitted", "preempted",
           "still pending", "peak RSS MiB", "vs 1 s target"],
          [[r["workloads"], r["clusterQueues"], "%.3f" % r["pass_s"], "%.2f" % r["setup_s"],
            r["admitted"], r["preempted"], r["pending"], "%.0f" % (r["peak_rss_kb"] / 1024.0),
            "%.2fx" % (1.0 / r["pass_s"]) if r["pass_s"] > 0 else "n/a"] for r in qr],
          "Fitted growth exponent of pass time over workloads (log-log slope; 1.0 = linear, "
          "n log n over 1k-100k reads about 1.1): %s. Target: 100k workloads over 1,000 "
          "ClusterQueues in <= 1 s on one core%s. Kueue admits one head per ClusterQueue per "
          "cycle and re-snapshots between cycles; tenantd repeats cycles inside one pass over "
          "heaps kept per ClusterQueue, so a pass is one call." % (
              ", ".join("%d CQs: %s" % (c, "%.2f" % e if e is not None else "n/a")
                        for c, e in exps.items()),
              " (this run: %.3f s)" % big[0]["pass_s"] if big else ""))



def limits_section():
    """What limits tenantd, from this run's floors: the attainable ceiling
    vs nginx, tenantd's overhead over the floor, the attainable reject-path
    ratio. Every number is a median of this run."""
    ng, tA, tR = gw["nginx"]["A/all"], td["A/all"], td["R/abuser"]
    ngR = gw["nginx"]["R/abuser"]
    fA, fR = floor_fwd, floor_429
    c = {k: med(a, "cpu_us_per_req") for k, a in
         (("fA", fA), ("fR", fR), ("tA", tA), ("tR", tR), ("ng", ng), ("ngR", ngR))}
    r = {k: med(a, "rps") for k, a in (("fA", fA), ("fR", fR), ("tA", tA), ("tR", tR), ("ng", ng))}
    if None in c.values() or None in r.values():
        failures.append("floors: no figures to derive what limits tenantd from")
        return ["## What limits tenantd: the floors of this run", "",
                "Not derived: a floor or a proxy produced no result in this run.", ""]
    ceil_rps, ceil_cpu = r["fA"] / r["ng"], c["ng"] / c["fA"]
    result["floors"] = {
        "ceiling_vs_nginx_rps": ceil_rps, "ceiling_vs_nginx_cpu": ceil_cpu,
        "tenantd_overhead_us_proxied": c["tA"] - c["fA"], "nginx_overhead_us_proxied": c["ng"] - c["fA"],
        "tenantd_overhead_us_reject": c["tR"] - c["fR"], "nginx_overhead_us_reject": c["ngR"] - c["fR"],
        "floor_proxied_over_reject_cpu": c["fA"] / c["fR"],
        "tenantd_proxied_over_reject_cpu": c["tA"] / c["tR"]}
    f = result["floors"]
    within = lambda x: "within" if x >= 1.3 else "beyond"
    return [
        "## What limits tenantd: the floors of this run", "",
        "Derived by `bench/report.py` from the medians above (the floors are `bench/bench_floor.c`, "
        "one thread on cpu 0 like the proxies, measured interleaved with them).", "",
        "- **Proxied path: the attainable ceiling vs nginx.** A byte forwarder that parses "
        "nothing and makes the four syscalls every HTTP/1.1 proxy without pipelining makes per "
        "request (client read, upstream write, upstream read, client write) costs %.1f us of CPU "
        "per request against nginx's %.1f us: a proxy with no user-space work at all would have "
        "%.2fx nginx's CPU efficiency. In req/s it moved %s against nginx's %s, %.2fx; req/s is a "
        "whole-machine figure that other load on the machine moves (see the min-max ranges), CPU "
        "per request is the steadier bound. The 1.3x req/s target is %s the CPU-efficiency "
        "ceiling and %s this run's req/s ceiling; a real proxy gets the floor's ratio less its "
        "own overhead below." % (
            c["fA"], c["ng"], ceil_cpu, fmt_rng(fA["rps"]), fmt_rng(ng["rps"]), ceil_rps,
            within(ceil_cpu), within(ceil_rps)),
        "- **tenantd's overhead over the floor (proxied):** %.1f us per request (%.1f vs %.1f us, "
        "%.0f%% of tenantd's CPU per request); nginx's is %.1f us. This is what HTTP parsing, "
        "identity, limits, metering and header rewriting cost; the rest (%.0f%% of tenantd's "
        "CPU) is the floor's cost: the syscalls and loopback TCP every proxy pays." % (
            f["tenantd_overhead_us_proxied"], c["tA"], c["fA"],
            100 * f["tenantd_overhead_us_proxied"] / c["tA"], f["nginx_overhead_us_proxied"],
            100 * c["fA"] / c["tA"]),
        "- **Reject path: the attainable ratio.** A canned 429 (one read, one write, nothing "
        "decided) costs %.1f us per request, so the floor's proxied/reject CPU ratio is %.2fx: "
        "that is the most any proxy reaches with one read and one write per rejected request "
        "on this kernel, against the 5x target (a proxy's own ratio exceeds it only by its "
        "proxied path costing more than the floor's). tenantd's is %.2fx (%.1f vs %.1f us); its "
        "overhead over the reject floor is %.1f us per request (nginx's %.1f us)." % (
            c["fR"], f["floor_proxied_over_reject_cpu"], f["tenantd_proxied_over_reject_cpu"],
            c["tA"], c["tR"], f["tenantd_overhead_us_reject"], f["nginx_overhead_us_reject"]),
        "- **Reject req/s** depends on wrk's one core as much as on the proxy: "
        "the canned 429 moved %.0f req/s, "
        "tenantd %.0f (%.2fx the floor's); compare reject paths by CPU per request." % (
            r["fR"], r["tR"], r["tR"] / r["fR"]),
        ""]


# ---- tenantd on PostgreSQL (bench/bench_pg.py; s-pg's block) ----
def pg_section():
    import os
    path = os.environ.get("BENCH_PG_JSONL", "")
    rows = [json.loads(l) for l in open(path) if l.strip()] if path and os.path.exists(path) else []
    if not path:
        return
    if not rows:
        failures.append("postgres benchmark produced no result")
        return
    result["postgres"] = rows
    srv = next((r for r in rows if r.get("kind") == "pg-server"), {})
    gw_rows = []
    for store in ("sqlite", "postgres"):
        g = [r for r in rows if r.get("kind") == "pg-gateway" and r["store"] == store]
        if not g:
            failures.append("postgres: no gateway run on the %s store" % store)
            continue
        gw_rows.append([store, fmt_rng(stat([r["rps"] for r in g])),
                        fmt_rng(stat([r["cpu_us_per_req"] for r in g]), "%.1f"),
                        fmt_rng(stat([r["p99_us"] / 1000 for r in g]), "%.1f"),
                        fmt_rng(stat([r["ledger_records_per_s"] for r in g]), "%.1f"),
                        fmt_rng(stat([r.get("shipped_per_s") for r in g]), "%.1f")])
    table("PostgreSQL: the gateway on a PostgreSQL store vs SQLite",
          ["store", "req/s", "tenantd CPU us/req", "p99 ms", "ledger records/s", "shipped/s"], gw_rows,
          "`bench/bench_pg.py`: two tenantd `--workers 1 --admin-threads 1`, ledger on, one with "
          "`--database` on PostgreSQL %s (also the lease and the shipper), wrk -c32 phase A's load, "
          "runs interleaved; the gateway's ledger rolls requests up, hence few records/s. Load "
          "average at the start: %s." % (srv.get("version", "?"), srv.get("load", "?")))
    lrows = []
    for mode, db in (("SQLite alone", False), ("shipped to PostgreSQL", True), ("after an outage", True)):
        g = [r for r in rows if r.get("kind") == "pg-ledger" and r["database"] == db and
             (r["mode"] == "outage") == (mode == "after an outage")]
        if not g:
            continue
        for r in g:
            if db and r["rows_in_pg"] != r["records"]:
                failures.append("postgres: ledger run shipped %s of %s records" % (r["rows_in_pg"], r["records"]))
        lrows.append([mode, fmt_rng(stat([r["committed_per_s"] for r in g])),
                      fmt_rng(stat([r["drain_per_s"] for r in g])) if db else "-",
                      fmt_rng(stat([r["end_to_end_per_s"] for r in g])) if db else "-",
                      "%d/%d" % (sum(r["rows_in_pg"] for r in g), sum(r["records"] for r in g)) if db else "-"])
    table("PostgreSQL: ledger records/s, SQLite alone vs shipped",
          ["run", "committed/s (SQLite)", "shipped/s (drain)", "end to end/s", "rows in PostgreSQL"], lrows,
          "`bench/bench_ledger_pg.c`: td_ledger fed by one producer (at most the run's record count), "
          "flushed; the drain is timed from the shipper's first batch after the flush until the spool "
          "is empty (outage: PostgreSQL stopped while records were written, started after).")
    d = [r for r in rows if r.get("kind") == "pg-drain"]
    for r in d:
        if r["non2xx_during_outage"] or r["shipped"] < r["spooled"]:
            failures.append("postgres: gateway outage run %s: %s non-200, %s of %s spooled shipped" % (
                r["rep"], r["non2xx_during_outage"], r["shipped"], r["spooled"]))
    t = next((r for r in rows if r.get("kind") == "pg-takeover-summary"), None)
    trows = []
    if t:
        trows.append(["SIGKILL of the leader -> new term", t["n"], "%.0f" % t["min_ms"],
                      "%.0f" % t["median_ms"], "%.0f" % t["max_ms"]])
    if d:
        trows.append(["gateway through an outage: spool drained after the return (ms)", len(d),
                      "%.0f" % min(r["drain_s"] * 1000 for r in d),
                      "%.0f" % statistics.median(r["drain_s"] * 1000 for r in d),
                      "%.0f" % max(r["drain_s"] * 1000 for r in d)])
    if not t:
        failures.append("postgres: no takeover measured")
    table("PostgreSQL: takeover and recovery (ms)", ["what", "n", "min", "median", "max"], trows,
          "Three replicas; the leader SIGKILLed and restarted, each kill timed until a new term is in "
          "tenantd_leader (psql polled every 10 ms). The bound is lease 3 s + tick 1 s. Gateway "
          "outage: %s requests answered, all 200, while PostgreSQL was stopped." % (
              "/".join(str(r["requests_during_outage"]) for r in d) or "n/a"))


pg_section()

# ---- fleet (bench/fleet.sh): three endpoints, one slow ----
# scripts/bench.sh's fleet block exports TD_BENCH_FLEET (its JSON lines).
def fleet_section():
    import os
    path = os.environ.get("TD_BENCH_FLEET", "")
    if not path:
        return
    try:
        recs = [json.loads(l) for l in open(path) if l.strip()]
    except (OSError, ValueError) as e:
        failures.append("fleet: %s" % e)
        return
    fl = {}
    for r in recs:
        fl.setdefault(r["system"], []).append(r)
    result["fleet"] = {s: {k: stat([r[k] for r in rs]) for k in
                           ("rps", "p50_ms", "p99_ms", "slow_share", "cpu_us_per_req", "errors", "non2xx")}
                       for s, rs in fl.items()}
    rows = []
    for s in ("tenantd", "nginx", "haproxy"):
        a = result["fleet"].get(s)
        if not a or not a["rps"]:
            failures.append("fleet %s produced no result" % s)
            continue
        share = a["slow_share"]
        rows.append([s, fmt_rng(a["rps"]), fmt_rng(a["p50_ms"], "%.1f"), fmt_rng(a["p99_ms"], "%.1f"),
                     "%.1f%% [%.1f-%.1f]" % (100 * share["median"], 100 * share["min"], 100 * share["max"]),
                     fmt_rng(a["cpu_us_per_req"], "%.1f"),
                     "%d" % (a["errors"]["max"] + a["non2xx"]["max"])])
    t = result["fleet"].get("tenantd")
    ratios = ", ".join("%.2fx %s's req/s" % (t["rps"]["median"] / result["fleet"][s]["rps"]["median"], s)
                       for s in ("nginx", "haproxy") if t and t["rps"] and result["fleet"].get(s)
                       and result["fleet"][s]["rps"])
    table("Serving a fleet: three endpoints, one slow (bench/fleet.sh)",
          ["system", "req/s", "p50 ms", "p99 ms", "slow one's share", "CPU us/req", "errors (max)"], rows,
          "simmodel A and B at 1 ms a token, C at 8 ms, 16-token completions, wrk -c32 closed loop; "
          "tenantd `balance: leastRequests` (default), nginx `least_conn` with keepalive 64, haproxy "
          "`balance leastconn` with http-reuse always; each at its defaults (workers = cores), "
          "nothing pinned. An even spread would give C a third; as many requests in flight at "
          "each endpoint gives it 1/17 (its requests take 8x as long). tenantd: %s. CPU per request counts the "
          "proxy's processes only." % (ratios or "n/a"))


fleet_section()

doc_limits = limits_section()

for s in systems:
    for p, a in gw[s].items():
        if not a:
            failures.append("gateway %s %s produced no result" % (s, p))
result["failures"] = failures

with open(o.json, "w") as f:
    json.dump(result, f, indent=2)
    f.write("\n")

doc = ["# Benchmarks", "",
       "Generated by `make bench%s` on %s UTC. Regenerate with `make bench` (full, <= 10 min) or "
       "`make bench QUICK=1` (<= 2 min); raw figures in `bench/results/latest.json`." % (
           " QUICK=1" if o.quick else "", result["generated"]), "",
       "Every figure is the median of %d runs with [min-max]; runs of the systems are interleaved; "
       "warm-up (1 s of the same load per system per round) is excluded. Absolute numbers on a "
       "shared 2-core machine are noisy: read the ratios, which compare systems measured in the "
       "same run." % o.reps, "",
       "## Machine", "", "- " + o.machine, "- " + o.versions,
       "- CPU placement: " + (o.pinning or "none (fewer than 2 cpus or no taskset)"),
       "- timed binary: " + (o.binary or "not recorded"), "",
       "## Commands", "",
       "- load: `wrk -t1 -c%d -d%ds --timeout 5s -s bench/wrk_keys.lua` (POST /v1/completions, "
       "`{\"prompt\":\"hello\",\"max_tokens\":1}`, `Authorization: Bearer` rotating over the keys)"
       % (o.conns, o.dur),
       "- upstream for all: `simmodel --slots 4096 --ms-per-token 0 --prefill-ms-per-token 0`",
       "- tenantd: `tenantd --workers 1`; three tenants (key-a, key-b, key-c) at 1e8 req/s and an "
       "abuser (key-x) at %d/s burst %d; Route cost model `requests`" % (o.abuse_rate, o.abuse_rate),
       "- nginx: `worker_processes 1`; `limit_req_zone` per Authorization (two zones via `map`: "
       "the abuser's at %d r/s burst %d nodelay, the others' at 1e8), `limit_req_status 429`, "
       "`proxy_pass` to an upstream with `keepalive 64`, HTTP/1.1" % (o.abuse_rate, o.abuse_rate),
       "- haproxy: `nbthread 1`; `stick-table type string ... store http_req_rate(1s)`, "
       "`http-request track-sc0 req.hdr(Authorization)`, `deny deny_status 429` over the limit; "
       "`http-reuse always`",
       "- phase A: key-a/b/c, closed loop; phase B: key-b/c closed loop and, concurrently, the "
       "abuser paced at ~10x its limit (`-c4`, 1 ms delay per request per connection); reject path: "
       "key-x closed loop, `-c%d`" % o.conns,
       "- floors: `bench/bench_floor.c forward PORT SIMMODEL_PORT` (phase A's load) and "
       "`bench/bench_floor.c reject PORT` (the reject path's load), one thread, epoll, "
       "TCP_NODELAY, pinned like the proxies",
       "- limiter: `bench/bench_limiter.c`; Redis: `bench/bench_shared.c` (two td_shared "
       "instances vs two connections doing pipelined INCR + EXPIRE per decision on a 1 s window "
       "key), real `redis-server` on a free loopback port; webhook: tenantd `--workers 1 --admin-threads 1` (and, for the whole machine, `--admin-threads 2` unpinned) with "
       "`bench/fixtures/webhook-platform.yaml` and `--tls-cert/--tls-key` (a self-signed "
       "certificate made by `openssl req` for the run), `bench/fixtures/review.json` POSTed to the "
       "admin listener's `/validate`: wrk `-c16` over https (and over plain HTTP on a second "
       "tenantd), `bench/bench_loadgen.c --rate R --conns 16` over https at 10k/s and 20k/s",
       "- ledger: `bench/bench_ledger.c DIR SECONDS PRODUCERS` (1 and 2 producer threads); "
       "metering cost: a second tenantd started with `--ledger off`, phase A's wrk settings, "
       "interleaved with the default (`--ledger on`) one",
       "- batch queue: `bench/bench_queue.c --json N C` (one process per size, N = 1k/10k/100k "
       "seeded workloads over C = 100/1,000 ClusterQueues in 10 cohorts; the pass is timed with "
       "CLOCK_MONOTONIC, peak RSS is the process's VmHWM)", "",
       "## Results", ""] + lines + doc_limits
try:
    doc += [open(__file__.rsplit("/", 1)[0] + "/notes.md").read()]
except OSError:
    pass
if failures:
    doc += ["## Failures", ""] + ["- " + f for f in failures] + [""]
with open(o.doc, "w") as f:
    f.write("\n".join(doc) + "\n")
if failures:
    print("\nFAILED: " + "; ".join(failures), file=sys.stderr)
    sys.exit(1)
