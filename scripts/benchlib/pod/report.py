"""The pod bench's report: Markdown on stdout (how it was measured, one
table per phase with a row per N: medians over the rounds and the wall
time's spread, the issue's targets at the largest N, the problems seen)
and, with --json, every round's figures."""

import datetime
import json
import os
import statistics

from ..common import fmt_size, log, run
from .phases import CORES

COLUMNS = [
    # (key in a phase's figures or derived, header, format)
    ("wall_s", "wall s", "%.2f"),
    ("wall_range", "wall min – max", None),
    ("host_s_median", "host median s", "%.2f"),
    ("cli_cpu_s", "clients CPU s", "%.2f"),
    ("srv_cpu_s", "podfsd CPU s", "%.3f"),
    ("srv_cpu_host_ms", "podfsd CPU/host ms", "%.1f"),
    ("srv_cpu_host_rel", "÷ N=1", "%.2f"),
    ("srv_rss_peak_mb", "podfsd peak RSS MB", "%.1f"),
    ("srv_rss_host_mb", "RSS/host MB", "%.2f"),
    ("sent_mb", "podfsd sent MB", "%.1f"),
    ("sent_host_mb", "sent/host MB", "%.2f"),
    ("req_host", "requests/host", "%.0f"),
    ("p50_us", "p50 µs", "%.0f"),
    ("p99_us", "p99 µs", "%.0f"),
    ("wall_over_cli_cpu", "wall ÷ (clients CPU / %d cores)" % CORES, "%.2f"),
    ("replay_cpu_s", "replays CPU s", "%.2f"),
    ("busy_pct", "cores busy %", "%.0f"),
    ("errors", "errors", "%d"),
]


def derive(x):
    """Per-host figures of one phase's sample."""
    n = x["n"]
    d = dict(x)
    d["srv_cpu_host_ms"] = x["srv_cpu_s"] * 1000.0 / n
    d["srv_rss_host_mb"] = x["srv_rss_peak_mb"] / n if x.get("srv_rss_peak_mb") is not None else None
    d["sent_mb"] = x["sent_bytes"] / 1e6
    d["sent_host_mb"] = x["sent_bytes"] / 1e6 / n
    d["req_host"] = x["requests"] / float(n)
    # How much of the machine the podfs processes, podfsd and the replays
    # (the applications) used in the wall time: near 100%, the wall time
    # is the machine's whole CPU, on which all of them run here.
    if x.get("replay_cpu_s") is not None and x["wall_s"] > 0:
        d["busy_pct"] = 100.0 * (x["cli_cpu_s"] + x["srv_cpu_s"] + x["replay_cpu_s"]) / (CORES * x["wall_s"])
    return d


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


class PodReport:
    def __init__(self, b, interrupted=False):
        self.b = b
        self.a = b.a
        self.interrupted = interrupted
        self.problems = []
        self.logged = []

    def rows(self, phase):
        """{n: {key: median}} of a phase, with its wall spread and errors summed."""
        out = {}
        for n in self.a.hosts:
            xs = self.b.samples.get((phase, n), [])
            good = [derive(x) for x in xs if "error" not in x]
            for x in xs:
                if "error" in x:
                    self.problems.append("%s N=%d: %s" % (phase, n, x["error"]))
                for p in x.get("problems", []):
                    self.problems.append("%s N=%d: %s" % (phase, n, p))
                for p in x.get("daemon_log", []):
                    self.logged.append("%s N=%d: podfsd: %s" % (phase, n, p))
                for p in x.get("clients_log", []):
                    self.logged.append("%s N=%d: podfs: %s" % (phase, n, p))
            if not good:
                continue
            r = {k: med([g.get(k) for g in good]) for k in good[0]
                 if isinstance(good[0][k], (int, float)) or good[0][k] is None}
            r["requests_by_op"] = good[-1].get("requests_by_op", {})
            r["limits_reached"] = sorted({c for g in good for c in g.get("limits_reached", [])})
            walls = [g["wall_s"] for g in good]
            r["wall_range"] = "%.2f – %.2f" % (min(walls), max(walls)) if len(walls) > 1 else "—"
            r["errors"] = sum(g["errors"] for g in good) + (len(xs) - len(good))
            r["rounds"] = len(good)
            if phase == "checkpoint":
                r["mb_s"] = n * self.a.ckpt_size / r["wall_s"] / 1e6
            out[n] = r
        base = out.get(1, {}).get("srv_cpu_host_ms")
        for n, r in out.items():
            r["srv_cpu_host_rel"] = r["srv_cpu_host_ms"] / base if base else None
        return out

    def table(self, phase, rows):
        cols = list(COLUMNS)
        if phase == "checkpoint":
            cols.insert(2, ("mb_s", "aggregate MB/s", "%.0f"))
        out = ["| N | " + " | ".join(c[1] for c in cols) + " |",
               "|---:|" + "|".join("---:" for _ in cols) + "|"]
        for n in sorted(rows):
            r = rows[n]
            cells = [str(n)]
            for k, _, fmt in cols:
                v = r.get(k)
                cells.append("—" if v is None else (v if fmt is None else fmt % v))
            out.append("| " + " | ".join(cells) + " |")
        return out

    def targets(self, allrows):
        """The issue's targets at the largest N measured."""
        out = []
        for phase, rows in allrows:
            if not rows:
                continue
            n = max(rows)
            r = rows[n]

            def chk(what, v, target, ok):
                out.append("| %s, N=%d: %s | %s | %s | %s |"
                           % (phase, n, what, "—" if v is None else "%.2f" % v, target,
                              "—" if v is None else ("yes" if ok(v) else "**no**")))
            chk("podfsd CPU per host ÷ N=1", r.get("srv_cpu_host_rel"), "≤ 0.5", lambda v: v <= 0.5)
            chk("podfsd peak RSS per host, MB", r.get("srv_rss_host_mb"), "≤ 8", lambda v: v <= 8)
            chk("wall ÷ (clients CPU / cores)", r.get("wall_over_cli_cpu"), "≤ 1.25", lambda v: v <= 1.25)
            chk("errors", float(r["errors"]), "0", lambda v: v == 0)
        if not out:
            return []
        return ["Targets (issue 17, at the largest N; medians):", "",
                "| check | value | target | met |", "|---|---:|---|---|"] + out + [""]

    def header(self):
        a, b = self.a, self.b
        host = os.uname()
        fs = run(["findmnt", "-n", "-o", "FSTYPE", "-T", b.scratch.export], check=False).stdout.decode().strip()
        out = ["## podfs pod benchmark — %s" % datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "",
               "- machine: %s, kernel %s, %d CPUs; export %s (%s)" % (host.nodename, host.release, CORES,
                                                                     b.scratch.export, fs),
               "- podfs: %s; build %s %s" % (b.rev, b.build, b.info),
               "- hosts N = %s: one podfsd (this namespace) and N podfs mounts, each in a network namespace of "
               "its own (veth pair); added RTT %d us%s; rounds %d (medians; wall min – max)"
               % (", ".join(map(str, a.hosts)), a.rtt_us,
                  " (a latproxy in each host's namespace)" if a.rtt_us else "", a.runs),
               "- each phase from a fresh podfsd, fresh mounts and `sync; echo 3 > drop_caches`; all N hosts "
               "start at once (podfs-replay -g, one pipe closed); wall = until the last host is done"]
        if "venv" in b.phases:
            out.append("- venv: %s's `import %s`, captured once with strace from the venv copy in the export "
                       "(%s, %d calls: stats and opens, most of them of names that do not exist, reads with "
                       "their bytes' hash, listings, pages touched through mappings) and replayed on every "
                       "host by podfs-replay, each call checked against the capture"
                       % (b.scratch.venv_name, a.venv_imports, b.trace, b.trace_ops or 0))
        if "checkpoint" in b.phases:
            out.append("- checkpoint: every host reads the same %s file of random data (1 MiB reads), cold, "
                       "and compares every byte with its source" % fmt_size(a.ckpt_size))
        out.append("- clients CPU: utime+stime of the N podfs processes; podfsd CPU and peak RSS (VmHWM, reset "
                   "before the go) per host = ÷ N; sent: podfsd's sockets' TCP bytes_acked; requests and "
                   "latency: the mounts' own counters (`user.podfs.stats`: req_OP, lat_hist of all answered "
                   "requests, merged over the hosts; a quantile is its bucket's upper bound, ≤ 19% high); replays CPU: "
                   "the N podfs-replay processes' own (the application's side, its FUSE calls included); cores "
                   "busy: clients, podfsd and replays together ÷ (cores × wall), which leaves out the kernel's "
                   "network work done outside them: near 100%, every process of the pod shares this machine's "
                   "cores and the wall time is their sum")
        if self.interrupted:
            out.append("- **INTERRUPTED: partial results**")
        for n in b.notes:
            out.append("- %s" % n)
        return out + [""]

    def write(self):
        out = self.header()
        allrows = []
        for phase in self.b.phases:
            rows = self.rows(phase)
            allrows.append((phase, rows))
            out.append("### %s" % ("venv start (replayed)" if phase == "venv" else "checkpoint read, cold"))
            out.append("")
            out += self.table(phase, rows) if rows else ["(no result)"]
            out.append("")
            for n in sorted(rows)[:1]:
                r = rows[n]
                ops = sorted(r["requests_by_op"].items(), key=lambda kv: -kv[1])
                out.append("Requests per host by operation at N=%d (last round): %s; file bytes read per "
                           "host %.1f MB; podfsd's frames sent per host %.1f MB."
                           % (n, ", ".join("%s %.0f" % (op, c / float(n)) for op, c in ops[:10]) or "none",
                              (r.get("file_read_bytes") or 0) / 1e6 / n, (r.get("wire_out") or 0) / 1e6 / n))
                out.append("")
            lim = []
            for n in sorted(rows):
                r = rows[n]
                if r.get("peak_mem") is None:
                    continue
                lim.append("N=%d: %.1f MB of %.0f MB, %d of %s fds, %d connections%s"
                           % (n, r["peak_mem"] / 1e6, (r.get("mem_max") or 0) / 1e6, r.get("peak_fds") or 0,
                              "%d" % r["fd_budget"] if r.get("fd_budget") else "?", r.get("peak_conns") or 0,
                              "; limits reached: " + ", ".join(r["limits_reached"]) if r["limits_reached"]
                              else ""))
            if lim:
                out.append("podfsd's accounted memory (requests and their replies, `memory` limit), fds for "
                           "clients' files and connections, the most seen (status every 0.5 s; medians over "
                           "the rounds): " + "; ".join(lim) + ".")
                out.append("")
        out += self.targets(allrows)
        if self.problems:
            out += ["Problems:", ""] + ["- " + p for p in self.problems[:40]] + [""]
        if self.logged:
            out += ["Warnings and errors the programs logged during the phases:", ""] + \
                ["- " + p for p in self.logged[:40]] + [""]
        print("\n".join(out), flush=True)
        if self.a.json:
            with open(self.a.json, "w") as f:
                json.dump({"date": datetime.datetime.now().isoformat(),
                           "params": {"hosts": self.a.hosts, "runs": self.a.runs, "rtt_us": self.a.rtt_us,
                                      "ckpt_size": self.a.ckpt_size, "venv_src": self.a.venv_src,
                                      "venv_imports": self.a.venv_imports, "trace": self.b.trace,
                                      "trace_ops": self.b.trace_ops, "rev": self.b.rev, "build": self.b.build},
                           "samples": {"%s/%d" % k: v for k, v in self.b.samples.items()},
                           "medians": {p: rows for p, rows in allrows}}, f, indent=1, default=str)
            log("wrote %s" % self.a.json)
