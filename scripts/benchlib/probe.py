"""Resource probes of the checkpoint workload: CPU seconds of a server's and
of the FUSE clients' process trees (/proc/PID/stat) and bytes on the wire
(kernel TCP counters of the server's sockets, `ss -ti`), taken before and
after a measurement."""

import os

from .common import run

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_table():
    """{pid: (ppid, cpu seconds of the process: utime+stime of all its threads)}"""
    tab = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        tab[int(d)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / CLK_TCK)
    return tab


def tree_cpu(roots, tab):
    """{pid: cpu s} for the roots and all their descendants alive now."""
    kids = {}
    for pid, (ppid, _) in tab.items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = {}, [r for r in roots if r in tab]
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out[pid] = tab[pid][1]
        todo += kids.get(pid, [])
    return out


def tcp_bytes(port):
    """(bytes received, bytes acked) summed over the established sockets whose local port is port."""
    r = run(["ss", "-tinH", "state", "established", "( sport = :%d )" % port], timeout=20, check=False)
    rx = tx = 0
    for tok in r.stdout.decode("utf-8", "replace").split():
        if tok.startswith("bytes_received:"):
            rx += int(tok.split(":")[1])
        elif tok.startswith("bytes_acked:"):
            tx += int(tok.split(":")[1])
    return rx, tx


def probe_start(t, views):
    """Counters before a measurement of target t through views [(path, Mount or None)]."""
    tab = proc_table()
    p = {"srv_roots": [t.server.pid] if t.server else [],
         "cli_roots": sorted({m.proc.pid for _, m in views if m is not None})}
    p["srv"], p["cli"] = tree_cpu(p["srv_roots"], tab), tree_cpu(p["cli_roots"], tab)
    if t.port:
        p["wire"] = tcp_bytes(t.port)
    return p


def probe_stop(t, p, nbytes, writing):
    """{srv_cpu_gib, cli_cpu_gib, wire_ratio} since probe_start() returned p, for nbytes moved."""
    tab = proc_table()
    gib = nbytes / float(1 << 30)
    x = {}
    for k in ("srv", "cli"):
        if p[k + "_roots"]:
            now = tree_cpu(p[k + "_roots"], tab)
            x[k + "_cpu_gib"] = sum(v - p[k].get(pid, 0.0) for pid, v in now.items()) / gib
    if "wire" in p:
        rx, tx = tcp_bytes(t.port)
        x["wire_ratio"] = ((rx - p["wire"][0]) if writing else (tx - p["wire"][1])) / float(nbytes)
    return x
