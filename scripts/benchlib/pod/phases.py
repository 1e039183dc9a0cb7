"""One measured phase of the pod bench at N hosts: a fresh podfsd and N
fresh mounts, caches dropped, then N podfs-replay processes started at
once (tests/tools/gang.py): the venv start replayed from its trace, or
one checkpoint file read whole and compared byte by byte with its source.

What is measured around it (probe() before the go and after the last
host is done):
  * wall time until the last host is done, and each host's own time;
  * CPU seconds of the N podfs processes and of podfsd (/proc/PID/stat);
  * podfsd's peak RSS (VmHWM of /proc/PID/status, reset through
    /proc/PID/clear_refs before the go) and its RSS before;
  * bytes podfsd sent: its sockets' TCP counters (bytes_acked, `ss -ti`
    on its port) and its own frame counters (`podfsd status --raw`:
    wire_out);
  * the clients' requests and their latency: each mount's counters
    (user.podfs.stats: req_OP, and lat_hist, the histogram of every
    answered request) before and after, merged over the hosts;
  * errors: the replays' own (a call whose result differs from the
    capture's, a call that could not be made, bytes wrong or missing), a
    replay that failed or did fewer calls than the trace has, a podfs
    that died or whose mount went away."""

import math
import os
import re
import threading

from ..common import BenchError, drop_caches, log, run
from ..probe import CLK_TCK, tcp_bytes
from . import tools

CORES = os.cpu_count() or 1


def proc_cpu(pid):
    """utime + stime of process pid (all its threads), seconds; None if gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return None
    fields = st[st.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_status_kb(pid, key):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def reset_peak_rss(pid):
    try:
        with open("/proc/%d/clear_refs" % pid, "w") as f:
            f.write("5\n")
        return True
    except OSError:
        return False


def client_stats(mnt):
    """{requests: n, hist: {upper_us (inf: None): count}, ops: {OP: n},
    file_read: bytes} of a mount, from its user.podfs.stats (answered by
    podfs itself: no request is sent)."""
    text = os.getxattr(mnt, "user.podfs.stats").decode("utf-8", "replace")
    req, hist, ops, read = 0, {}, {}, 0
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if k.startswith("req_"):
            req += int(v)
            ops[k[4:]] = int(v)
        elif k == "file_read":
            read = int(v)
        elif k == "lat_hist":
            for w in v.split():
                up, _, c = w.partition(":")
                hist[None if up == "inf" else int(up)] = int(c)
    return {"requests": req, "hist": hist, "ops": ops, "file_read": read}


def daemon_status(hosts):
    """podfsd's "key value" figures (podfsd status --raw), {} if
    unreadable; "limits": the fair-use limits its clients reached."""
    r = run([hosts.podfsd_exe, "status", "--raw", "--control-socket", hosts.ctl], timeout=20, check=False)
    out = {"limits": set()}
    for line in r.stdout.decode("utf-8", "replace").splitlines():
        k, _, v = line.partition(" ")
        if re.fullmatch(r"-?\d+", v.strip() or "x"):
            out[k] = int(v)
        elif k == "client":
            m = re.search(r" limits=(\S+)", v)
            if m and m.group(1) != "-":
                out["limits"].update(m.group(1).split(","))
    return out


class Sampler:
    """podfsd's status every PERIOD s while a phase runs (a thread): the
    most memory its clients' requests and replies held (mem, of mem_max),
    fds for clients' files (of fd_budget), connections and sessions, and
    the limits reached."""

    PERIOD = 0.5

    def __init__(self, hosts):
        self.hosts = hosts
        self.peak = {"mem": 0, "fds": 0, "conns": 0, "sessions": 0}
        self.caps = {}
        self.limits = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.wait(self.PERIOD):
            self.sample()

    def sample(self):
        st = daemon_status(self.hosts)
        for k in self.peak:
            self.peak[k] = max(self.peak[k], st.get(k, 0))
        for k in ("mem_max", "fd_budget"):
            if k in st:
                self.caps[k] = st[k]
        self.limits |= st["limits"]

    def finish(self):
        self.stop.set()
        self.thread.join(30)
        self.sample()


def quantile(hist, q):
    """The q-quantile of a merged lat_hist: the upper bound (us) of its
    bucket, as lathist_quantile answers; None for an empty one."""
    total = sum(hist.values())
    if total == 0:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for up in sorted(hist, key=lambda u: float("inf") if u is None else u):
        seen += hist[up]
        if seen >= rank:
            return float("inf") if up is None else up
    return float("inf")


def log_lines(path, start, limit=10):
    """The warning and error lines a program wrote to its log since offset start."""
    out = []
    try:
        with open(path, "rb") as f:
            f.seek(start)
            for line in f.read().decode("utf-8", "replace").splitlines():
                # The run's first podfsd takes the export from earlier runs:
                # its --new-handle-secret warning is expected.
                if re.search(r" (warning|error): |^fuse: ", line) and "--new-handle-secret:" not in line:
                    out.append(line.strip()[:300])
    except OSError:
        pass
    return out[:limit]


def probe(hosts, n):
    d = hosts.daemon.pid
    cli = [proc_cpu(h.proc.pid) for h in hosts.hosts[:n]]
    return {"cli_cpu": cli, "srv_cpu": proc_cpu(d), "tcp": tcp_bytes(hosts.port),
            "status": daemon_status(hosts), "stats": [client_stats(h.mnt) for h in hosts.hosts[:n]],
            "rss_kb": proc_status_kb(d, "VmRSS"), "hwm_kb": proc_status_kb(d, "VmHWM")}


def measure(hosts, n, argvs, timeout, ops=None):
    """Runs argvs (one podfs-replay -g per host) at once on the mounted
    first n hosts; the phase's figures (dict, see the module's docstring)."""
    gang_mod = tools.gang()
    try:
        g = gang_mod.Gang(argvs, timeout=timeout)
        sampler = None
        try:
            before = probe(hosts, n)
            rss_reset = reset_peak_rss(hosts.daemon.pid)
            sampler = Sampler(hosts)
            g.go()
            wall = g.wait()
        finally:
            g.kill()
            if sampler is not None:
                sampler.finish()
    except gang_mod.GangError as e:
        raise BenchError("the replays: %s" % e)
    after = probe(hosts, n)
    problems = gang_mod.problems(g.results, ops) + hosts.dead(n)
    # Each replay counts its own errors; a replay that could not say
    # (crashed, exit 2), did fewer calls than the trace has, or a host
    # whose podfs is gone counts one more.
    errors = sum(r.get("errors", 0) for r in g.results)
    errors += sum(1 for r in g.results if "errors" not in r or r["rc"] not in (0, 1) or
                  (ops is not None and r.get("ops") != ops))
    errors += len(hosts.dead(n))
    hist, ops = {}, {}
    req = read = 0
    for b, a in zip(before["stats"], after["stats"]):
        req += a["requests"] - b["requests"]
        read += a["file_read"] - b["file_read"]
        for op, c in a["ops"].items():
            if c - b["ops"].get(op, 0):
                ops[op] = ops.get(op, 0) + c - b["ops"].get(op, 0)
        for up, c in a["hist"].items():
            dc = c - b["hist"].get(up, 0)
            if dc:
                hist[up] = hist.get(up, 0) + dc
    cli_cpu = sum((a or 0) - (b or 0) for a, b in zip(after["cli_cpu"], before["cli_cpu"]))
    srv_cpu = (after["srv_cpu"] or 0) - (before["srv_cpu"] or 0)
    ends = sorted(r["end_s"] for r in g.results if r.get("end_s") is not None)
    x = {
        "n": n,
        "wall_s": wall,
        "host_s_median": ends[len(ends) // 2] if ends else None,
        "host_s_min": ends[0] if ends else None,
        "cli_cpu_s": cli_cpu,
        "srv_cpu_s": srv_cpu,
        "srv_rss_before_mb": (before["rss_kb"] or 0) / 1024.0,
        "srv_rss_peak_mb": ((after["hwm_kb"] or 0) / 1024.0) if rss_reset else None,
        "sent_bytes": after["tcp"][1] - before["tcp"][1],
        "wire_out": after["status"].get("wire_out", 0) - before["status"].get("wire_out", 0),
        "requests": req,
        "requests_by_op": ops,
        "file_read_bytes": read,
        "daemon_log": log_lines(hosts.daemon_log, hosts.daemon_log_start),
        "clients_log": sum((log_lines(h.logpath, h.log_start) for h in hosts.hosts[:n]), [])[:10],
        "p50_us": quantile(hist, 0.5),
        "p99_us": quantile(hist, 0.99),
        "replay_bytes": sum(r.get("bytes", 0) for r in g.results),
        "replay_cpu_s": sum(r.get("cpu_us", 0) for r in g.results) / 1e6,
        "errors": errors,
        "problems": problems[:10],
        "sessions": after["status"].get("sessions"),
        "peak_mem": sampler.peak["mem"],
        "mem_max": sampler.caps.get("mem_max"),
        "peak_fds": sampler.peak["fds"],
        "fd_budget": sampler.caps.get("fd_budget"),
        "peak_conns": sampler.peak["conns"],
        "limits_reached": sorted(sampler.limits),
    }
    x["wall_over_cli_cpu"] = wall / (cli_cpu / CORES) if cli_cpu > 0 else None
    return x


def run_phase(b, phase, n):
    """One phase ("venv" or "checkpoint") at n hosts, from fresh podfsd and
    mounts to their end; its figures."""
    hosts, a = b.hosts, b.a
    hosts.start_daemon()
    try:
        hosts.start_latproxies(n)
        hosts.mount(n)
        try:
            replay = b.replay_exe
            if phase == "venv":
                argvs = [[replay, "-g", os.path.join(h.mnt, b.scratch.venv_name), b.trace]
                         for h in hosts.hosts[:n]]
                ops = b.trace_ops
                timeout = max(300.0, 20.0 * n)
            else:
                argvs = [[replay, "-g", "--read", os.path.join(h.mnt, b.ckpt_name), "--ref", b.ckpt_src]
                         for h in hosts.hosts[:n]]
                ops = 1
                timeout = max(300.0, n * a.ckpt_size / 10e6)
            drop_caches()
            if phase == "checkpoint":
                # The reference copy is the replays' own (not the export's
                # file): read it into the page cache, the export stays cold.
                run(["dd", "if=" + b.ckpt_src, "of=/dev/null", "bs=1M", "status=none"], timeout=600)
            x = measure(hosts, n, argvs, timeout, ops)
        finally:
            bad = hosts.unmount()
    finally:
        hosts.stop_daemon()
    if bad:
        x["errors"] += len(bad)
        x["problems"] = (x["problems"] + bad)[:10]
    if x["limits_reached"]:
        log("    limits reached: %s" % ", ".join(x["limits_reached"]))
    for p in x["problems"]:
        log("    problem: %s" % p)
    for ln in x["daemon_log"] + x["clients_log"]:
        log("    logged: %s" % ln)
    return x


def describe(x):
    """One progress line of a phase's figures."""
    def f(v, fmt):
        return "-" if v is None else fmt % v
    return ("wall %.2f s, clients CPU %.2f s, podfsd CPU %.2f s, peak RSS %s MB, sent %.1f MB, "
            "%d requests, p50 %s us, p99 %s us, errors %d"
            % (x["wall_s"], x["cli_cpu_s"], x["srv_cpu_s"], f(x["srv_rss_peak_mb"], "%.1f"),
               x["sent_bytes"] / 1e6, x["requests"], f(x["p50_us"], "%g"), f(x["p99_us"], "%g"), x["errors"]))

