#!/usr/bin/env python3
"""Turns the raw outputs of scripts/bench.sh into CSV, PNG plots and a Markdown summary.

    report.py RESULTS_DIR

Reads RESULTS_DIR/raw/*/ (one directory per benchmark process pair: meta, client.out, the
engine's logs) and the third-party outputs, and writes RESULTS_DIR/results.csv,
thirdparty.csv, preload.csv, encode-strategy.csv, *.png and summary.md.

Each row of results.csv is one case (a test at one message size and computation amount in
one configuration) with the papers' statistic (value: runs' average without the highest and
the lowest; scripts/bench/sdpbench.c lists the papers), the median and the extremes of the
runs, the CPU time of both processes, and what the engine reported it did (transport, modes,
copies), so a configuration whose knobs the engine did not apply is visible as such.
"""
import csv
import glob
import math
import os
import re
import statistics
import sys

KV = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\S+)")

# knob → the names the engine may report it under (connection log lines, stats line)
KNOB_KEYS = {
    "SDP_FLOW_CONTROL": ["flow_control", "flow", "fc"],
    "SDP_BUFFERING": ["buffering"],
    "SDP_PROGRESS": ["progress"],
    "SDP_MARKERS": ["markers"],
    "SDP_CRC": ["crc"],
    "SDP_MARKER_SPACING": ["marker_spacing", "spacing"],
    "SDP_ZCOPY_THRESHOLD": ["zcopy_threshold", "zcopy"],
    "SDP_BUF_SIZE": ["buf_size", "bufsize"],
    "SDP_RECV_BUFS": ["recv_bufs"],
    "SDP_FPDU_ALIGN": ["fpdu_align", "align"],
}
BOOL = {"1": "true", "0": "false", "on": "true", "off": "false", "yes": "true", "no": "false"}


def kv(line):
    return dict(KV.findall(line))


def read_meta(d):
    m = {}
    with open(os.path.join(d, "meta")) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("=")
            m[k] = v
    return m


def engine_report(d, env):
    """What the engine logged in case directory d: transport, modes, counters, and how
    they compare with the knobs in env."""
    stats = {"client": {}, "server": {}}
    conn = {}
    started = {}
    rejected = []
    for path in glob.glob(os.path.join(d, "*.log")):
        with open(path, errors="replace") as f:
            text = f.read()
        side = "server" if "listening on port" in text else "client"
        for line in text.splitlines():
            if "libsdp: stats " in line:
                stats[side] = {k: v for k, v in kv(line).items()}
            elif "engine started" in line:
                for k, v in kv(line).items():
                    started.setdefault(k, set()).add(v)
            elif "transport=" in line and " fd " in line:
                for k, v in kv(line).items():
                    conn.setdefault(k, set()).add(v)
            elif "SDP_" in line and ("want" in line or "using" in line or "ignored" in line or "not " in line):
                rejected.append(line.split(": ", 1)[-1].strip())
    r = {}
    sc, ss = stats["client"], stats["server"]
    if not sc and not ss:
        r["transport"] = "tcp" if not env.get("LD_PRELOAD_USED") else "unknown"
    else:
        n_sdp = sum(int(s.get("sdp_conns", "0")) for s in (sc, ss))
        n_tcp = sum(int(s.get("tcp_conns", "0")) for s in (sc, ss))
        n_shm = sum(int(s.get("shm_conns", "0")) for s in (sc, ss))
        if n_sdp >= 2 and n_tcp == 0:
            # which transport carried SDP: shared memory, iWARP over TCP, or some of each
            r["transport"] = "sdp/shm" if n_shm >= n_sdp else "sdp/iwarp" if n_shm == 0 else "sdp/shm+iwarp"
        else:
            r["transport"] = "sdp+tcp" if n_sdp else "tcp"
    reported = {}
    for k, vals in conn.items():
        if k in ("fd", "payload_tx", "payload_rx", "fpdus_tx", "fpdus_rx", "transport", "local", "remote"):
            continue
        reported[k] = "/".join(sorted(vals))
    # the negotiated modes of the connections first, then the settings each engine took
    for k, vals in started.items():
        if k not in reported:
            reported[k] = "/".join(sorted(vals))
    for s in (sc, ss):
        for k, v in s.items():
            if any(k in keys for keys in KNOB_KEYS.values()) and k not in reported:
                reported[k] = v
    r["reported"] = " ".join(f"{k}={v}" for k, v in sorted(reported.items()))
    checks = []
    for knob, want in env.items():
        if knob not in KNOB_KEYS:
            continue
        keys = [k for k in KNOB_KEYS[knob] if k in reported]
        if not keys:
            checks.append(f"unreported:{knob}")
            continue
        got = reported[keys[0]]
        w = BOOL.get(want, want) if knob in ("SDP_MARKERS", "SDP_CRC", "SDP_FPDU_ALIGN") else want
        if got.lower() != w.lower():
            checks.append(f"MISMATCH:{knob}={want}/got:{got}")
    # knobs no log line names, checked against what the counters show
    sc_, ss_ = stats["client"], stats["server"]
    if "unreported:SDP_ZCOPY_THRESHOLD" in checks and "zcopy_tx" in sc_:
        checks.remove("unreported:SDP_ZCOPY_THRESHOLD")
        z = int(sc_.get("zcopy_tx", "0") or 0) + int(ss_.get("zcopy_tx", "0") or 0)
        if int(env["SDP_ZCOPY_THRESHOLD"]) >= 1 << 30 and z:
            checks.append(f"MISMATCH:SDP_ZCOPY_THRESHOLD={env['SDP_ZCOPY_THRESHOLD']}/zcopy_tx:{z}")
    if "unreported:SDP_MARKER_SPACING" in checks and int(sc_.get("markers_tx", "0") or 0) > 100:
        checks.remove("unreported:SDP_MARKER_SPACING")
        spacing = int(sc_["wire_tx"]) / int(sc_["markers_tx"])
        want = int(env["SDP_MARKER_SPACING"])
        reported["marker_spacing_seen"] = f"{spacing:.0f}"
        if abs(spacing - want) > 0.1 * want:
            checks.append(f"MISMATCH:SDP_MARKER_SPACING={want}/wire_bytes_per_marker:{spacing:.0f}")
        r["reported"] = " ".join(f"{k}={v}" for k, v in sorted(reported.items()))
    if rejected:
        checks.append("rejected:" + "|".join(sorted(set(rejected)))[:200])
    r["mode_check"] = "ok" if not checks else " ".join(checks)

    def ratio(a, b):
        try:
            a, b = float(a), float(b)
            return f"{a / b:.3f}" if b > 0 else ""
        except (TypeError, ValueError):
            return ""

    # in every test the client sends the measured payload; in lat and progress both do
    r["copies_per_byte_tx"] = ratio(sc.get("user_copies_tx"), sc.get("payload_tx"))
    r["copies_per_byte_rx"] = ratio(ss.get("user_copies_rx"), ss.get("payload_rx"))
    r["credit_stalls"] = str(sum(int(s.get("credit_stalls", "0")) for s in (sc, ss))) if sc or ss else ""
    z = [s.get(k) for s in (sc,) for k in s if "zcopy" in k and k.endswith("tx")]
    r["zcopy_bytes_tx"] = z[0] if z else ""
    b = [s.get(k) for s in (sc,) for k in s if "bcopy" in k and k.endswith("tx")]
    r["bcopy_bytes_tx"] = b[0] if b else ""
    r["payload_tx"] = sc.get("payload_tx", "")
    return r


def perf_cache(d):
    total = 0
    found = False
    for side in ("client", "server"):
        p = os.path.join(d, side + ".perf")
        if not os.path.exists(p):
            continue
        with open(p) as f:
            for line in f:
                parts = line.strip().split(",")
                if len(parts) > 2 and parts[2] == "cache-misses" and parts[0].strip().isdigit():
                    total += int(parts[0])
                    found = True
    return total if found else None


FIELDS = [
    "section", "net", "config", "env", "test", "size", "compute_us", "runs", "iters", "iters_asked",
    "value", "unit", "median", "min", "max", "msgs_per_s", "iter_us", "capacity", "one_way_us",
    "bytes", "wall_s", "client_cpu_s", "server_cpu_s", "cpu_s_per_gb", "cache_misses_per_byte",
    "transport", "mode_check", "reported", "copies_per_byte_tx", "copies_per_byte_rx",
    "credit_stalls", "zcopy_bytes_tx", "bcopy_bytes_tx", "rc",
]


def collect(out):
    rows = []
    for d in sorted(glob.glob(os.path.join(out, "raw", "[0-9]*-*"))):
        if not os.path.exists(os.path.join(d, "meta")):
            continue
        m = read_meta(d)
        env = dict(kv(m.get("env", "")))
        if m["config"] != "tcp":
            env["LD_PRELOAD_USED"] = "1"
        rep = engine_report(d, env)
        cm = perf_cache(d)
        try:
            lines = open(os.path.join(d, "client.out")).read().splitlines()
        except OSError:
            lines = []
        for line in lines:
            c = kv(line)
            if "test" not in c:
                continue
            row = {k: "" for k in FIELDS}
            row.update({k: v for k, v in c.items() if k in FIELDS})
            row.update(section=m["section"], net=m["net"], config=m["config"], env=m.get("env", ""),
                       rc=m.get("rc", ""))
            row.update({k: v for k, v in rep.items() if k in FIELDS})
            b = float(c.get("bytes", 0) or 0)
            cpu = float(c.get("client_cpu_s", 0)) + float(c.get("server_cpu_s", 0))
            if b > 0:
                row["cpu_s_per_gb"] = f"{cpu / (b / 1e9):.3f}"
                if cm is not None:
                    row["cache_misses_per_byte"] = f"{cm / b:.4f}"
            rows.append(row)
    return rows


def write_csv(path, rows, fields):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)


# ---- third-party, preload, encode strategy ----

def thirdparty(out):
    rows = []
    for d in sorted(glob.glob(os.path.join(out, "raw", "nptcp-*"))):
        net, cfg = os.path.basename(d).split("-", 2)[1:]
        tr = engine_report(d, {"LD_PRELOAD_USED": "1"} if cfg != "tcp" else {})["transport"]
        p = os.path.join(d, "np.out")
        if not os.path.exists(p):
            continue
        for line in open(p):
            f = line.split()
            if len(f) >= 3:
                rows.append(dict(tool="NPtcp", net=net, config=cfg, transport=tr, metric="throughput_mbps",
                                 size=f[0], value=f[1], latency_us=f"{float(f[2]) * 1e6:.2f}"))
    for d in sorted(glob.glob(os.path.join(out, "raw", "sockperf-*"))):
        net, cfg = os.path.basename(d).split("-", 2)[1:]
        tr = engine_report(d, {"LD_PRELOAD_USED": "1"} if cfg != "tcp" else {})["transport"]
        for p in sorted(glob.glob(os.path.join(d, "pp-*.out"))):
            size = re.findall(r"pp-(\d+)", p)[0]
            m = re.search(r"avg-(?:latency|rtt)=([\d.]+)", open(p).read())
            if m:
                rows.append(dict(tool="sockperf-pp", net=net, config=cfg, transport=tr, metric="avg_latency_us",
                                 size=size, value=m.group(1), latency_us=m.group(1)))
        for p in sorted(glob.glob(os.path.join(d, "tp-*.out"))):
            size = re.findall(r"tp-(\d+)", p)[0]
            m = re.search(r"Message Rate is (\d+)", open(p).read())
            if m:
                rows.append(dict(tool="sockperf-tp", net=net, config=cfg, transport=tr, metric="msgs_per_s",
                                 size=size, value=m.group(1), latency_us=""))
    return rows


def preload(out):
    p = os.path.join(out, "raw", "preload.txt")
    if not os.path.exists(p):
        return {}
    r = {}
    for line in open(p):
        r.update(kv(line))
    return r


def encode_strategy(out):
    p = os.path.join(out, "raw", "encode-strategy.txt")
    rows = []
    if not os.path.exists(p):
        return rows
    for line in open(p):
        m = re.match(r"BenchmarkEncodeStrategy/(\w+)/(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op\s+([\d.]+) MB/s", line)
        if m:
            rows.append(dict(strategy=m.group(1), size=m.group(2), ns_per_op=m.group(3), mb_per_s=m.group(4)))
    return rows


# ---- lookups ----

def f(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def pick(rows, **want):
    return [r for r in rows if all(str(r.get(k)) == str(v) for k, v in want.items())]


def configs(rows):
    """The configurations of rows, in the order they first appear."""
    return list(dict.fromkeys(r["config"] for r in rows))


def val(rows, key="median", **want):
    r = pick(rows, **want)
    return f(r[0][key]) if r else math.nan


def fmt(x, nd=1):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if 0 < abs(x) < 1:
        return f"{x:.2g}"
    return f"{x:.{nd}f}"


def human(n):
    n = int(n)
    for unit, s in ((1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {s}"
    return f"{n} B"


# ---- plots ----

def plots(out, rows, tp):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report: matplotlib missing: no plots (run scripts/install-bench-deps.sh)", file=sys.stderr)
        return []
    made = []

    def save(fig, name):
        fig.tight_layout()
        p = os.path.join(out, name)
        fig.savefig(p, dpi=110)
        plt.close(fig)
        made.append(name)

    nets = sorted({r["net"] for r in rows}, key=lambda n: (n != "lo", n))

    def sweep(section, ylabel, name, key="value", logy=True, title=""):
        present = [n for n in nets if pick(rows, section=section, net=n)]
        if not present:
            return
        fig, axes = plt.subplots(1, len(present), figsize=(6.5 * len(present), 4.5), squeeze=False)
        for ax, net in zip(axes[0], present):
            cfgs = configs(pick(rows, section=section, net=net))
            for c in cfgs:
                pts = sorted((int(r["size"]), f(r[key])) for r in pick(rows, section=section, net=net, config=c))
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3,
                        lw=2 if c == "tcp" else 1, color="black" if c == "tcp" else None, label=c)
            ax.set_xscale("log", base=2)
            if logy:
                ax.set_yscale("log")
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel(ylabel)
            ax.set_title(f"{title} ({'127.0.0.1' if net == 'lo' else 'veth between namespaces'})")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        save(fig, name)

    sweep("lat", "one-way latency (us)", "latency.png", title="ping-pong latency")
    sweep("bw", "bandwidth (MB/s)", "bandwidth.png", title="unidirectional bandwidth")
    sweep("stream", "messages/s", "stream.png", key="msgs_per_s", title="small-message streaming, TCP_NODELAY")
    sweep("spacing", "bandwidth (MB/s)", "marker-spacing.png", logy=False, title="marker spacing")
    sweep("strategy", "bandwidth (MB/s)", "marker-strategy.png", logy=False, title="marker strategy")

    def by_compute(section, ylabel, name, sizes=None, title="", key="value"):
        present = [n for n in nets if pick(rows, section=section, net=n)]
        panels = [(n, s) for n in present
                  for s in (sizes or sorted({int(r["size"]) for r in pick(rows, section=section, net=n)}))]
        if not panels:
            return
        cols = min(4, len(panels))
        nrows = (len(panels) + cols - 1) // cols
        fig, axes = plt.subplots(nrows, cols, figsize=(4.8 * cols, 3.8 * nrows), squeeze=False)
        for i, (net, size) in enumerate(panels):
            ax = axes[i // cols][i % cols]
            cfgs = configs(pick(rows, section=section, net=net))
            for c in cfgs:
                pts = sorted((int(r["compute_us"]), f(r[key]))
                             for r in pick(rows, section=section, net=net, config=c, size=size))
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3,
                            color="black" if c == "tcp" else None, label=c)
            ax.set_xlabel("computation (us)")
            ax.set_ylabel(ylabel)
            ax.set_title(f"{title} {human(size)}, {net}", fontsize=9)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=6)
        for j in range(len(panels), nrows * cols):
            axes[j // cols][j % cols].axis("off")
        save(fig, name)

    by_compute("progress", "time per iteration (us)", "progress.png", title="progress, 100 x")
    by_compute("wait", "wait time in recv (us)", "overlap-wait.png", title="wait time")
    by_compute("bwcompute", "bandwidth (MB/s)", "overlap-bandwidth.png", title="bandwidth with computation")

    util = [r for r in rows if r["section"].startswith("util")]
    if util:
        secs = sorted({r["section"] for r in util})
        fig, axes = plt.subplots(1, len(secs), figsize=(6.5 * len(secs), 4.5), squeeze=False)
        for ax, s in zip(axes[0], secs):
            for c in sorted({r["config"] for r in pick(util, section=s)}):
                pts = sorted((int(r["size"]), f(r["value"])) for r in pick(util, section=s, config=c))
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=c)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel("receive buffer in use (%)")
            ax.set_title(f"buffer utilization, {s[4:]} of SDP buffers")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
        save(fig, "buffer-utilization.png")

    cpu = pick(rows, section="cpu")
    if cpu:
        cfgs = configs(cpu)
        sizes = sorted({int(r["size"]) for r in cpu})
        fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
        w = 0.8 / len(sizes)
        for i, s in enumerate(sizes):
            xs = [j + i * w for j in range(len(cfgs))]
            axes[0].bar(xs, [val(cpu, "cpu_s_per_gb", config=c, size=s) for c in cfgs], w, label=human(s))
            axes[1].bar(xs, [f(pick(cpu, config=c, size=s)[0]["copies_per_byte_tx"]) if pick(cpu, config=c, size=s)
                             else math.nan for c in cfgs], w, label=human(s))
        for ax, t in zip(axes, ("CPU seconds per GB (both ends)", "user-space copies per byte sent")):
            ax.set_xticks([j + 0.4 - w / 2 for j in range(len(cfgs))])
            ax.set_xticklabels(cfgs, rotation=40, ha="right", fontsize=7)
            ax.set_title(t)
            ax.grid(True, axis="y", alpha=0.3)
            ax.legend(fontsize=7)
        save(fig, "cpu-copies.png")

    np_rows = [r for r in tp if r["tool"] == "NPtcp"]
    if np_rows:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for net in sorted({r["net"] for r in np_rows}):
            for c in sorted({r["config"] for r in np_rows}):
                pts = sorted((int(r["size"]), f(r["value"])) for r in np_rows if r["net"] == net and r["config"] == c)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], lw=1, label=f"{c} ({net})")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("Mbit/s")
        ax.set_title("NetPIPE (NPtcp), plain and preloaded")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        save(fig, "netpipe.png")
    return made


# ---- summary ----

def slope(pts):
    """Least-squares slope of y over x."""
    if len(pts) < 2:
        return math.nan
    mx = statistics.mean(p[0] for p in pts)
    my = statistics.mean(p[1] for p in pts)
    den = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / den if den else math.nan


CATEGORIES = (
    ("CRC32c", lambda dso, sym: "crc32" in sym.lower() or "castagnoli" in sym.lower()),
    ("memory copy", lambda dso, sym: "memmove" in sym or "memcpy" in sym),
    ("kernel: sleeping and waking", lambda dso, sym: "kernel" in dso and re.search(
        r"finish_task_switch|schedule|futex|wake_up|pick_next|enqueue_|dequeue_|switch_to|ep_poll|idle", sym)),
    ("kernel: TCP and other system calls", lambda dso, sym: "kernel" in dso),
    ("cgo crossing (C to Go and back)", lambda dso, sym: "cgo" in sym or "crosscall" in sym),
    ("Go runtime (scheduler, locks, GC)", lambda dso, sym: sym.startswith("runtime.") or sym.startswith("internal/runtime")
     or sym.startswith("sync.") or sym.startswith("gcWriteBarrier")),
    ("engine (sdpcore, iwarp, preload)", lambda dso, sym: "libsdp/" in sym or sym.startswith("main.")),
    ("shim", lambda dso, sym: "libsdp.so" in dso),
    ("application and libc", lambda dso, sym: True),
)


def profile_breakdown(out):
    """Self time by category for each profiled case, from perf report's flat output."""
    res = []
    for d in sorted(glob.glob(os.path.join(out, "raw", "*-profile-*"))):
        name = re.sub(r"^\d+-profile-", "", os.path.basename(d))
        for side in ("client", "server"):
            p = os.path.join(d, side + ".flat.txt")
            if not os.path.exists(p):
                continue
            cats = {c[0]: 0.0 for c in CATEGORIES}
            top = []
            for line in open(p, errors="replace"):
                m = re.match(r"\s+([\d.]+)%\s+(\S+)\s+\[[.k]\]\s+(.*\S)", line)
                if not m:
                    continue
                pct, dso, sym = float(m.group(1)), m.group(2), m.group(3)
                if "kernel" in dso:
                    sym = "[k]" + sym
                for cname, test in CATEGORIES:
                    if test(dso, sym):
                        cats[cname] += pct
                        break
                if len(top) < 6:
                    top.append(f"{sym.replace('[k]', '')} {pct:.1f}%")
            cats["other (symbols under 0.2% each)"] = max(0.0, 100 - sum(cats.values()))
            res.append((name, side, cats, top))
    return res


def tp_pairs(tp, nets):
    """The third-party rows, each preloaded configuration beside TCP's of the same tool, network
    and size: (tool, net, config, transport, [(size, tcp value, config value), ...])."""
    for tool, sizes in (("NPtcp", ("1", "1024", "65536", "1048576", "4194304")),
                        ("sockperf-pp", ("64", "1024")), ("sockperf-tp", ("64", "1024"))):
        for net in nets:
            here = [r for r in tp if r["tool"] == tool and r["net"] == net]
            tcp = {r["size"]: f(r["value"]) for r in here if r["config"] == "tcp"}
            for c in sorted({r["config"] for r in here if r["config"] != "tcp"}):
                mine = {r["size"]: r for r in here if r["config"] == c}
                cells = [(s, tcp[s], f(mine[s]["value"])) for s in sizes if s in mine and tcp.get(s)]
                if cells:
                    yield tool, net, c, mine[cells[0][0]]["transport"], cells


def summary(out, rows, tp, pre, enc, made):
    mach = {}
    p = os.path.join(out, "machine.txt")
    if os.path.exists(p):
        for line in open(p):
            k, _, v = line.rstrip("\n").partition("=")
            mach[k] = v
    L = []
    w = L.append
    w(f"Run: `{mach.get('command', '?')}` on {mach.get('date', '?')}, commit {mach.get('commit', '?')}; "
      f"{mach.get('nproc', '?')} cores ({mach.get('cpu', '?')}), Linux {mach.get('kernel', '?')}; "
      f"load average {mach.get('loadavg_start', '?')} at the start, {mach.get('loadavg_end', '?')} at the end; "
      f"{mach.get('elapsed_s', '?')} s{' (quick mode)' if mach.get('quick') == '1' else ''}.")
    w("")
    goals = []
    nets = sorted({r["net"] for r in rows}, key=lambda n: (n != "lo", n))
    key_sizes = [1, 64, 1024, 4096, 65536, 1048576, 4194304]
    for sec, unit, title in (("lat", "us", "Ping-pong latency, one way (µs, median of runs)"),
                             ("bw", "MB/s", "Unidirectional bandwidth (MB/s, median of runs)")):
        for net in nets:
            rs = pick(rows, section=sec, net=net)
            if not rs:
                continue
            sizes = [s for s in key_sizes if pick(rs, size=s)]
            cfgs = configs(rs)
            w(f"{title}, {'127.0.0.1' if net == 'lo' else 'veth'}; in brackets: ratio to TCP")
            w("")
            w("| config | transport | " + " | ".join(human(s) for s in sizes) + " | modes reported | check |")
            w("|---|---|" + "---|" * len(sizes) + "---|---|")
            for c in cfgs:
                cells = []
                for s in sizes:
                    v = val(rs, config=c, size=s)
                    t = val(rs, config="tcp", size=s)
                    cells.append(fmt(v) + ("" if c == "tcp" else f" ({v / t:.2f})" if t == t and t else ""))
                r0 = pick(rs, config=c)[0]
                w(f"| {c} | {r0['transport']} | " + " | ".join(cells) + f" | {r0['reported'] or '–'} | {r0['mode_check']} |")
            w("")

    def ratio_at(sec, net, a, b, size, key="median"):
        x, y = val(rows, key, section=sec, net=net, config=a, size=size), val(rows, key, section=sec, net=net, config=b, size=size)
        return x / y if y == y and y else math.nan

    for net in nets:
        for c in ("enhanced", "sdp-default"):
            r = ratio_at("bw", net, c, "tcp", 1048576)
            if r == r:
                goals.append((f"ZCopy 1 MiB bandwidth ≥ 0.85× TCP ({c}, {net})", r, 0.85, True))
        rs = [ratio_at("bw", net, "enhanced", "basic", s) for s in (65536, 131072, 262144, 524288, 1048576, 2097152, 4194304)]
        rs = [x for x in rs if x == x]
        if rs:
            goals.append((f"enhanced/basic bandwidth ≥ 1.2× from 64 KiB (lowest ratio of 64 KiB–4 MiB, {net})", min(rs), 1.2, True))
            goals.append((f"enhanced/basic bandwidth from 64 KiB (median ratio, {net})", statistics.median(rs), 1.2, True))
        for c in ("enhanced", "sdp-default", "basic"):
            r = ratio_at("lat", net, c, "tcp", 1)
            if r == r:
                goals.append((f"1 B latency ≤ 1.15× TCP ({c}, {net})", r, 1.15, False))
        for fc in ("rdma", "nic"):
            rs = [ratio_at("stream", net, fc, "credit", s, "msgs_per_s") for s in (256, 512, 1024, 2048, 4096)]
            rs = [x for x in rs if x == x]
            if rs:
                goals.append((f"{fc} ≥ 5× credit streaming 256 B–4 KiB (lowest ratio, {net})", min(rs), 5, True))
        best = None
        for c in ("credit", "rdma", "nic", "transport"):
            rs = [ratio_at("stream", net, c, "tcp", s, "msgs_per_s") for s in (64, 128, 256, 512, 1024, 2048, 4096)]
            rs = [x for x in rs if x == x]
            if rs:
                m = statistics.median(rs)
                if best is None or m > best[1]:
                    best = (c, m)
        if best:
            goals.append((f"small-message streaming ≥ 1.5× TCP_NODELAY msgs/s (best mode: {best[0]}, median ratio over 64 B–4 KiB, {net})", best[1], 1.5, True))
    w("Goals (reported, not asserted; ratio of medians from this run):")
    w("")
    w("| goal | measured | verdict |")
    w("|---|---|---|")
    for name, r, target, higher in goals:
        ok = r >= target if higher else r <= target
        miss = (1 - r / target) * 100 if higher else (r / target - 1) * 100
        how = f"missed: {miss:.0f}% below the goal" if higher else f"missed: {miss:.0f}% above the goal"
        w(f"| {name} | {r:.2f}× | {'met' if ok else how} |")
    # progress: how the communication time left over grows with computation
    pr = pick(rows, section="progress")
    if pr:
        w("")
        w("Communication progress (seed 001 Fig. 5: 100 × 4 KiB each way, then the same computation on both sides): "
          "time per iteration minus the computation, µs (median). Flat: the data moved while the peer computed; "
          "growing by the computation (slope 1): it waited until the sender's next call")
        w("")
        comps = sorted({int(r["compute_us"]) for r in pr})
        w("| net | config | " + " | ".join(f"{c} µs" for c in comps) + " | slope | modes reported | check |")
        w("|---|---|" + "---|" * len(comps) + "---|---|---|")

        def left(net, c):
            return [(int(r["compute_us"]), f(r["median"]) - int(r["compute_us"])) for r in pick(pr, net=net, config=c)]

        for net in nets:
            cfgs = configs(pick(pr, net=net))
            for c in cfgs:
                pts = dict(left(net, c))
                r0 = pick(pr, net=net, config=c)[0]
                w(f"| {net} | {c} | " + " | ".join(fmt(pts.get(x, math.nan)) for x in comps)
                  + f" | {slope(list(pts.items())):.2f} | {r0['reported'] or '–'} | {r0['mode_check']} |")
        w("")
        w("| goal: async progress flat (slope ≤ 0.25) where inline grows | async slope | inline slope | verdict |")
        w("|---|---|---|---|")
        for net in nets:
            for fc in ("credit", "rdma", "nic", "transport"):
                a, i = left(net, f"{fc}-async"), left(net, f"{fc}-inline")
                if not a or not i:
                    continue
                sa, si = slope(a), slope(i)
                verdict = "met" if sa <= 0.25 else f"missed: async grows {sa:.2f} µs per µs of computation"
                if si <= 0.25:
                    verdict += "; inline is flat too"
                w(f"| {fc}, {net} | {sa:.2f} | {si:.2f} | {verdict} |")
    wt = pick(rows, section="wait")
    if wt:
        w("")
        w("Overlap (seed 003): time the receiver waits in recv after computing (µs, median)")
        w("")
        comps = sorted({int(r["compute_us"]) for r in wt})
        sizes = sorted({int(r["size"]) for r in wt})
        w("| net | config | size | " + " | ".join(f"after {c} µs" for c in comps) + " |")
        w("|---|---|---|" + "---|" * len(comps))
        for net in nets:
            for c in ("tcp", "inline", "async"):
                for s in sizes:
                    if pick(wt, net=net, config=c, size=s):
                        w(f"| {net} | {c} | {human(s)} | " + " | ".join(fmt(val(wt, net=net, config=c, size=s, compute_us=x)) for x in comps) + " |")
    bc = pick(rows, section="bwcompute")
    if bc:
        w("")
        w("Bandwidth with computation before each send (seed 004 Fig. 14), MB/s (median)")
        w("")
        comps = sorted({int(r["compute_us"]) for r in bc})
        w("| config | size | " + " | ".join(f"{c} µs" for c in comps) + " |")
        w("|---|---|" + "---|" * len(comps))
        for c in ("tcp", "inline", "async"):
            for s in sorted({int(r["size"]) for r in bc}):
                if pick(bc, config=c, size=s):
                    w(f"| {c} | {human(s)} | " + " | ".join(fmt(val(bc, config=c, size=s, compute_us=x)) for x in comps) + " |")
    ut = [r for r in rows if r["section"].startswith("util")]
    if ut:
        w("")
        w("Buffer utilization (seed 001 Fig. 6): share of the receive buffer space holding data while a slower "
          "receiver reads (%, median; 8 buffers of 8 KiB or 32 KiB)")
        w("")
        sizes = sorted({int(r["size"]) for r in ut})
        w("| buffers | config | " + " | ".join(human(s) for s in sizes) + " | check |")
        w("|---|---|" + "---|" * len(sizes) + "---|")
        for s in sorted({r["section"] for r in ut}):
            for c in sorted({r["config"] for r in pick(ut, section=s)}):
                r0 = pick(ut, section=s, config=c)[0]
                w(f"| {s[4:]} | {c} | " + " | ".join(fmt(val(ut, section=s, config=c, size=x)) for x in sizes) + f" | {r0['mode_check']} |")
    for sec, t in (("spacing", "Marker spacing"), ("strategy", "Marker strategy (copy: separate buffers, BCopy; in place: integrated, BCopy; gather: ZCopy from 4 KiB)")):
        rs = pick(rows, section=sec)
        if not rs:
            continue
        w("")
        w(f"{t}: bandwidth, MB/s (median), 127.0.0.1")
        w("")
        sizes = sorted({int(r["size"]) for r in rs})
        w("| config | " + " | ".join(human(s) for s in sizes) + " | modes reported | check |")
        w("|---|" + "---|" * len(sizes) + "---|---|")
        cfgs = configs(rs)
        for c in cfgs:
            r0 = pick(rs, config=c)[0]
            w(f"| {c} | " + " | ".join(fmt(val(rs, config=c, size=s)) for s in sizes) + f" | {r0['reported'] or '–'} | {r0['mode_check']} |")
    if enc:
        w("")
        w("Framing alone (`go test -bench EncodeStrategy ./iwarp/`, markers and CRC, MB/s):")
        w("")
        sizes = []
        for e in enc:
            if e["size"] not in sizes:
                sizes.append(e["size"])
        w("| strategy | " + " | ".join(sizes) + " |")
        w("|---|" + "---|" * len(sizes))
        for st in ("plaincopy", "copy", "inplace", "gather"):
            cells = [next((e["mb_per_s"] for e in enc if e["strategy"] == st and e["size"] == s), "–") for s in sizes]
            w(f"| {st} | " + " | ".join(cells) + " |")
    st = pick(rows, section="stream")
    if st:
        for net in nets:
            rs = pick(st, net=net)
            if not rs:
                continue
            w("")
            w(f"Small-message streaming with TCP_NODELAY, messages/s (median), {net}; in brackets: ratio to TCP")
            w("")
            sizes = sorted({int(r["size"]) for r in rs})
            w("| config | " + " | ".join(human(s) for s in sizes) + " | check |")
            w("|---|" + "---|" * len(sizes) + "---|")
            for c in ("tcp", "credit", "rdma", "nic", "transport"):
                if not pick(rs, config=c):
                    continue
                cells = []
                for s in sizes:
                    v = val(rs, "msgs_per_s", config=c, size=s)
                    t = val(rs, "msgs_per_s", config="tcp", size=s)
                    cells.append(fmt(v) + ("" if c == "tcp" else f" ({v / t:.2f})" if t == t and t else ""))
                w(f"| {c} | " + " | ".join(cells) + f" | {pick(rs, config=c)[0]['mode_check']} |")
    cp = pick(rows, section="cpu")
    if cp:
        w("")
        w("Copies and CPU (bandwidth test, one process pair per size): user-space payload copies per byte "
          "(sender / receiver, from the engine's counters), CPU seconds per GB (both processes, getrusage), "
          "cache misses per byte (perf stat)")
        w("")
        sizes = sorted({int(r["size"]) for r in cp})
        w("| config | " + " | ".join(f"{human(s)}: copies tx/rx, CPU s/GB" for s in sizes) + " | cache misses/byte |")
        w("|---|" + "---|" * len(sizes) + "---|")
        cfgs = configs(cp)
        for c in cfgs:
            cells = []
            cms = []
            for s in sizes:
                r = pick(cp, config=c, size=s)
                if not r:
                    cells.append("–")
                    continue
                r = r[0]
                cp_txt = "– / –" if c == "tcp" else f"{r['copies_per_byte_tx'] or '?'} / {r['copies_per_byte_rx'] or '?'}"
                cells.append(f"{cp_txt}, {fmt(f(r['cpu_s_per_gb']), 2)}")
                cms.append(r["cache_misses_per_byte"])
            cm = ", ".join(x for x in cms if x) or "not available"
            w(f"| {c} | " + " | ".join(cells) + f" | {cm} |")
        pc = os.path.join(out, "raw", "perf-cache.txt")
        if os.path.exists(pc):
            w("")
            w(open(pc).read().strip())
    if pre:
        w("")
        w(f"Preload cost for a program without networking (scripts/bench-preload.sh): fork+exec of /bin/true "
          f"{pre.get('exec_true_plain_us', '?')} µs plain, {pre.get('exec_true_preload_us', '?')} µs preloaded "
          f"(+{pre.get('exec_true_delta_us', '?')} µs, median of {pre.get('runs', '?')}); one-byte pipe write+read "
          f"{pre.get('pipe_rw_libc_ns', '?')} ns through libc, {pre.get('pipe_rw_shim_ns', '?')} ns through the shim "
          f"(+{pre.get('pipe_rw_delta_ns', '?')} ns).")
    if tp:
        w("")
        w("Third-party cross-checks (NetPIPE NPtcp, sockperf), plain and preloaded in the same run:")
        w("")
        w("| tool | net | size | TCP | SDP (preloaded) | SDP / TCP | transport seen |")
        w("|---|---|---|---|---|---|---|")
        for tool, net, c, tr, cells in tp_pairs(tp, nets):
            metric = {"NPtcp": "Mbit/s", "sockperf-pp": "µs", "sockperf-tp": "msg/s"}[tool]
            for s, x, y in cells:
                w(f"| {tool} ({metric}) | {net} | {human(s)} | {fmt(x)} | {fmt(y)} | {y / x:.2f} | {tr} |")
    prof = profile_breakdown(out)
    if prof:
        w("")
        w("Where the time goes (perf record -e cpu-clock -g, self time by category, % of samples; "
          "the profiled cases run in the default configuration):")
        w("")
        cats = [c[0] for c in CATEGORIES] + ["other (symbols under 0.2% each)"]
        w("| case | side | " + " | ".join(cats) + " | top symbols |")
        w("|---|---|" + "---|" * len(cats) + "---|")
        for name, side, cv, top in prof:
            w(f"| {name} | {side} | " + " | ".join(f"{cv[c]:.0f}" for c in cats) + " | " + ", ".join(top[:4]) + " |")
    bad = sorted({(r["section"], r["net"], r["config"], r["mode_check"]) for r in rows
                  if r["config"] != "tcp" and r["mode_check"] != "ok"})
    tr = sorted({(r["section"], r["net"], r["config"], r["transport"]) for r in rows
                 if r["config"] != "tcp" and not r["transport"].startswith("sdp/")})
    if bad or tr:
        w("")
        w("Configurations whose knobs the engine did not report as applied, or that did not run over SDP:")
        w("")
        for b in bad:
            w(f"- {b[0]} {b[1]} {b[2]}: {b[3]}")
        for t in tr:
            w(f"- {t[0]} {t[1]} {t[2]}: transport {t[3]}")
    if made:
        w("")
        w("Plots: " + ", ".join(made))
    with open(os.path.join(out, "summary.md"), "w") as fh:
        fh.write("\n".join(L) + "\n")


def goal_rows(rows):
    """The issue's goals: (goal, figure, measured text, verdict)."""
    out = []
    nets = sorted({r["net"] for r in rows}, key=lambda n: (n != "lo", n))

    def ratio(sec, net, a, b, size, key="median"):
        x = val(rows, key, section=sec, net=net, config=a, size=size)
        y = val(rows, key, section=sec, net=net, config=b, size=size)
        return x / y if y == y and y else math.nan

    def verdict(r, target, higher):
        if r != r:
            return "not measured"
        if (r >= target) if higher else (r <= target):
            return "met"
        if higher:
            return f"missed by {(1 - r / target) * 100:.0f}% (needs {target / r:.1f}× more)"
        return f"missed by {(r / target - 1) * 100:.0f}%"

    for net in nets:
        where = "127.0.0.1" if net == "lo" else "veth"
        r = ratio("bw", net, "enhanced", "tcp", 1048576)
        out.append((f"ZCopy 1 MiB bandwidth ≥ 0.85× TCP (enhanced, {where})", "bandwidth.png", f"{r:.2f}×", verdict(r, 0.85, True)))
        rs = [ratio("bw", net, "enhanced", "basic", s) for s in (65536, 131072, 262144, 524288, 1048576, 2097152, 4194304)]
        rs = [x for x in rs if x == x]
        if rs:
            out.append((f"enhanced / basic bandwidth ≥ 1.2× from 64 KiB ({where}; lowest and median of 64 KiB–4 MiB)",
                        "bandwidth.png", f"{min(rs):.2f}× / {statistics.median(rs):.2f}×", verdict(min(rs), 1.2, True)))
        for c in ("enhanced", "sdp-default"):
            r = ratio("lat", net, c, "tcp", 1)
            if r == r:
                out.append((f"1 B latency ≤ 1.15× TCP ({c}, {where})", "latency.png", f"{r:.2f}×", verdict(r, 1.15, False)))
        for fc in ("rdma", "nic"):
            rs = [ratio("stream", net, fc, "credit", s, "msgs_per_s") for s in (256, 512, 1024, 2048, 4096)]
            rs = [x for x in rs if x == x]
            if rs:
                out.append((f"{fc} ≥ 5× credit, streaming 256 B–4 KiB ({where}; lowest / highest ratio)", "stream.png",
                            f"{min(rs):.2f}× / {max(rs):.2f}×", verdict(min(rs), 5, True)))
        best = None
        for c in ("credit", "rdma", "nic", "transport"):
            rs = [ratio("stream", net, c, "tcp", s, "msgs_per_s") for s in (64, 128, 256, 512, 1024, 2048, 4096)]
            rs = [x for x in rs if x == x]
            if rs and (best is None or statistics.median(rs) > best[1]):
                best = (c, statistics.median(rs))
        if best:
            out.append((f"streaming ≥ 1.5× TCP_NODELAY messages/s, 64 B–4 KiB ({where}; best mode {best[0]}, median ratio)",
                        "stream.png", f"{best[1]:.2f}×", verdict(best[1], 1.5, True)))
        pr = pick(rows, section="progress", net=net)
        for fc in ("credit", "rdma", "nic", "transport"):
            a = [(int(x["compute_us"]), f(x["median"]) - int(x["compute_us"])) for x in pick(pr, config=f"{fc}-async")]
            i = [(int(x["compute_us"]), f(x["median"]) - int(x["compute_us"])) for x in pick(pr, config=f"{fc}-inline")]
            if a and i:
                sa, si = slope(a), slope(i)
                v = "met" if sa <= 0.25 and si > 0.25 else ("missed: async grows too" if sa > 0.25 else "not shown: inline is flat too")
                out.append((f"async progress flat where inline grows ({fc}, {where}; slope of time left over per µs computed)",
                            "progress.png", f"async {sa:.2f}, inline {si:.2f}", v))
    return out


def readme(out, rows, tp, pre, made):
    """A compact Markdown block for docs/PERFORMANCE.md's Results."""
    mach = {}
    p = os.path.join(out, "machine.txt")
    if os.path.exists(p):
        for line in open(p):
            k, _, v = line.rstrip("\n").partition("=")
            mach[k] = v
    L = []
    w = L.append
    nets = sorted({r["net"] for r in rows}, key=lambda n: (n != "lo", n))
    w(f"Run of {mach.get('date', '?')[:16].replace('T', ' ')} UTC, `{mach.get('command', '?')}` at commit "
      f"{mach.get('commit', '?')}, {int(mach.get('elapsed_s', '0') or 0) // 60} min; {mach.get('nproc', '?')} cores "
      f"({mach.get('cpu', '?')}, a shared VM), Linux {mach.get('kernel', '?')}; load average "
      f"{mach.get('loadavg_start', '?').split()[0]} at the start and {mach.get('loadavg_end', '?').split()[0]} at the end.")
    w("")
    sizes = [1, 64, 1024, 4096, 65536, 1048576, 4194304]
    for sec, title, key in (("lat", "Ping-pong latency, one way, µs", "median"), ("bw", "Unidirectional bandwidth, MB/s", "median")):
        for net in nets:
            rs = pick(rows, section=sec, net=net)
            if not rs:
                continue
            cfgs = configs(rs)
            w(f"{title} ({'127.0.0.1' if net == 'lo' else 'veth between two namespaces'}; median of 10 runs; "
              f"in brackets the ratio to TCP):")
            w("")
            w("| configuration | transport | " + " | ".join(human(s) for s in sizes) + " |")
            w("|---|---|" + "---:|" * len(sizes))
            for c in cfgs:
                cells = []
                for s in sizes:
                    v = val(rs, key, config=c, size=s)
                    t = val(rs, key, config="tcp", size=s)
                    if v != v:
                        cells.append("–")
                    else:
                        cells.append(fmt(v) + ("" if c == "tcp" or t != t or not t else f" ({v / t:.2f})"))
                w(f"| {c} | {pick(rs, config=c)[0]['transport']} | " + " | ".join(cells) + " |")
            w("")
    st = pick(rows, section="stream")
    for net in nets:
        rs = pick(st, net=net)
        if not rs:
            continue
        ss = sorted({int(r["size"]) for r in rs})
        w(f"Streaming with TCP_NODELAY, thousands of messages/s ({'127.0.0.1' if net == 'lo' else 'veth'}; "
          f"in brackets the ratio to TCP):")
        w("")
        w("| flow control | transport | " + " | ".join(human(s) for s in ss) + " |")
        w("|---|---|" + "---:|" * len(ss))
        for c in ("tcp", "credit", "rdma", "nic", "transport"):
            if not pick(rs, config=c):
                continue
            cells = []
            for s in ss:
                v = val(rs, "msgs_per_s", config=c, size=s)
                t = val(rs, "msgs_per_s", config="tcp", size=s)
                cells.append(fmt(v / 1000) + ("" if c == "tcp" or t != t or not t else f" ({v / t:.2f})"))
            w(f"| {c} | {pick(rs, config=c)[0]['transport']} | " + " | ".join(cells) + " |")
        w("")
    w("The goals (ratios of medians from this run; reported, not asserted):")
    w("")
    w("| goal | plot | measured | verdict |")
    w("|---|---|---|---|")
    for g in goal_rows(rows):
        w(f"| {g[0]} | {g[1]} | {g[2]} | {g[3]} |")
    w("")
    cp = pick(rows, section="cpu")
    if cp:
        ss = sorted({int(r["size"]) for r in cp})
        w("User-space payload copies per byte (sender / receiver, the engine's counters) and CPU seconds per GB "
          "(both processes, getrusage), bandwidth test, 127.0.0.1:")
        w("")
        w("| configuration | transport | " + " | ".join(human(s) for s in ss) + " |")
        w("|---|---|" + "---|" * len(ss))
        cfgs = configs(cp)
        for c in cfgs:
            cells = []
            for s in ss:
                r = pick(cp, config=c, size=s)
                if not r:
                    cells.append("–")
                    continue
                r = r[0]
                cpt = "kernel only" if c == "tcp" else f"{float(r['copies_per_byte_tx'] or 'nan'):.2f} / {float(r['copies_per_byte_rx'] or 'nan'):.2f}"
                cells.append(f"{cpt}, {fmt(f(r['cpu_s_per_gb']), 2)} s/GB")
            w(f"| {c} | {pick(cp, config=c)[0]['transport']} | " + " | ".join(cells) + " |")
        w("")
    if tp:
        w("Third-party cross-checks, plain and preloaded in the same run (NPtcp: Mbit/s; sockperf "
          "ping-pong: average one-way latency, µs; sockperf throughput: messages/s; in brackets the ratio to TCP):")
        w("")
        w("| tool | net | configuration | transport | sizes |")
        w("|---|---|---|---|---|")
        for tool, net, c, tr, cells in tp_pairs(tp, nets):
            w(f"| {tool} | {'127.0.0.1' if net == 'lo' else 'veth'} | {c} | {tr} | "
              + "; ".join(f"{human(s)}: {fmt(y)} ({y / x:.2f})" for s, x, y in cells) + " |")
        w("")
    prof = profile_breakdown(out)
    if prof:
        groups = (("kernel: TCP, system calls", ("kernel: TCP and other system calls",)),
                  ("kernel: sleeping, waking", ("kernel: sleeping and waking",)),
                  ("Go runtime and cgo", ("Go runtime (scheduler, locks, GC)", "cgo crossing (C to Go and back)")),
                  ("engine, CRC32c, copies", ("engine (sdpcore, iwarp, preload)", "CRC32c", "memory copy")),
                  ("shim, program, libc", ("shim", "application and libc")),
                  ("symbols under 0.2% each", ("other (symbols under 0.2% each)",)))
        w("Where the time goes: `perf record -e cpu-clock -g` (a software clock: this VM has no hardware "
          "counters) of the default configuration, self time in % of each process's samples:")
        w("")
        w("| case | side | " + " | ".join(g[0] for g in groups) + " |")
        w("|---|---|" + "---:|" * len(groups))
        for name, side, cv, top in prof:
            w(f"| {name.replace('-sdp-default', '').replace('-lo', ', 127.0.0.1').replace('-veth', ', veth')} | {side} | " + " | ".join(f"{sum(cv[c] for c in g[1]):.0f}" for g in groups) + " |")
        w("")
    return L


def write_readme(out, rows, tp, pre, made):
    with open(os.path.join(out, "readme.md"), "w") as fh:
        fh.write("\n".join(readme(out, rows, tp, pre, made)) + "\n")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: report.py RESULTS_DIR")
    out = sys.argv[1]
    rows = collect(out)
    write_csv(os.path.join(out, "results.csv"), rows, FIELDS)
    tp = thirdparty(out)
    write_csv(os.path.join(out, "thirdparty.csv"), tp, ["tool", "net", "config", "transport", "metric", "size", "value", "latency_us"])
    pre = preload(out)
    if pre:
        write_csv(os.path.join(out, "preload.csv"), [pre], sorted(pre))
    enc = encode_strategy(out)
    write_csv(os.path.join(out, "encode-strategy.csv"), enc, ["strategy", "size", "ns_per_op", "mb_per_s"])
    made = plots(out, rows, tp)
    summary(out, rows, tp, pre, enc, made)
    write_readme(out, rows, tp, pre, made)
    print(f"report: {len(rows)} cases in {os.path.join(out, 'results.csv')}; summary in {os.path.join(out, 'summary.md')}")


if __name__ == "__main__":
    main()
