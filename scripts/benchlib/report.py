"""The report of a run: Markdown on stdout (header, the medians table, the A/B
table when --ab-build is given, the performance targets, FUSE requests per
import, checkpoint resources, the spread table and the error footnotes) and,
with --json, every sample in a JSON file."""

import datetime
import json
import os
import statistics

from .common import fmt_size, log, run
from .spec import AB_TARGET, META_WORKLOADS, PCACHE_SIZE, PLAIN_TARGET, ROWS, SMALL_MAX


def fmt(v, unit):
    if unit in ("MB/s", "ops/s"):
        return "%.0f" % v if v >= 100 else "%.1f" % v
    return "%.3f" % v if v < 10 else "%.1f" % v


def ratio(x, y):
    return x / y if x and y else None


class Report:
    def __init__(self, bench, interrupted=False):
        self.b = bench
        self.a = bench.a
        self.res = bench.results
        self.interrupted = interrupted
        self.tnames = bench.targets.names()
        self.rows = [r for r in ROWS if r[1] in self.a.only]
        self.med = {}         # (row, target) -> median, filled by table()
        self.footnotes = []

    def errref(self, msg):
        if msg not in self.footnotes:
            self.footnotes.append(msg)
        return "error [%d]" % (self.footnotes.index(msg) + 1)

    def write(self):
        """Print the Markdown report; write the --json file."""
        out = self.header() + self.table() + self.ab_table()
        out += self.target_checks() + self.fuse_requests() + self.ckpt_resources()
        out += self.spread() + self.errors()
        print("\n".join(out), flush=True)
        if self.a.json:
            self.write_json()

    def header(self):
        a, b, tg = self.a, self.b, self.b.targets
        out = []
        host = os.uname()
        out.append("## podfs benchmark — %s" % datetime.datetime.now().strftime("%Y-%m-%d %H:%M"))
        out.append("")
        out.append("- machine: %s, kernel %s, %d CPUs; export on %s (%s)"
                   % (host.nodename, host.release, os.cpu_count(), b.scratch.export,
                      run(["findmnt", "-n", "-o", "FSTYPE", "-T", b.scratch.export],
                          check=False).stdout.decode().strip()))
        if b.fs_warning:
            out.append("- **warning**: " + b.fs_warning)
        out.append("- podfs: %s; build %s %s" % (b.rev, tg.build, tg.by_name["podfs"].info if "podfs" in tg.by_name
                                                 else ""))
        if AB_TARGET in tg.by_name:
            out.append("- %s (A/B): %s; build %s %s" % (AB_TARGET, b.rev_b, tg.build_b, tg.by_name[AB_TARGET].info))
        out.append("- runs=%d (medians), seq size=%s (random data), tree=%d files in %d dirs (0-%d B), "
                   "create=%d files of 1 KiB, added RTT=%d us%s"
                   % (a.runs, fmt_size(a.size), a.files, b.scratch.ndirs, SMALL_MAX, a.create_files, a.rtt_us,
                      " (latproxy in front of podfsd and sshd)" if a.rtt_us else ""))
        out.append("- bindfs: `--multithreaded -o kernel_cache,big_writes`; sshfs: `-o %s`" % (tg.sshfs_opts or "n/a"))
        if "walk" in a.only:
            out.append("- walk: `find .` and `ls -lR` in the venv tree (%s copied into the export, %s); cold = "
                       "fresh mount + drop_caches, warm = the same again; each checked against the local tree's "
                       "line count" % (a.venv_src, b.scratch.venv_name))
        if "venv" in a.only:
            out.append("- venv: %s copied into the export; `%s/bin/python3 -c 'import %s'` (env -i, PYTHONHOME and "
                       "LD_LIBRARY_PATH on the target, PYTHONDONTWRITEBYTECODE=1); wall time of the whole process; "
                       "pcache = podfs remounted with `-o cache_dir=D,cache_size=%s` after a populate run, caches dropped; "
                       "%s"
                       % (a.venv_src, b.scratch.venv_name, a.venv_imports, PCACHE_SIZE,
                          "rows @%dus: fresh mounts through latproxy (podfs, sshfs only)" % a.rtt_us if a.rtt_us
                          else "0 added RTT (use --rtt-us for the latproxy rows)"))
        if "checkpoint" in a.only:
            out.append("- checkpoint: single stream %s (rand: random; float: float32, ~67%% zeros, int8-quantized rest%s), "
                       "`dd bs=1M conv=fsync` to a temp name + `mv` over the final name, read cold after remount + "
                       "drop_caches; multi: %d clients × %s shard (podfs/sshfs: %d separate mounts; local/bindfs: %d "
                       "processes on one mount), then each client reads all %d shards, cold; aggregate MB/s; "
                       "no added RTT"
                       % (fmt_size(a.ckpt_size), "; `lz4 -1` makes it %.2f× its size" % b.scratch.float_lz4
                          if b.scratch.float_lz4 else "", a.clients, fmt_size(a.shard_size), a.clients, a.clients,
                          a.clients))
        if a.cold == "remount":
            out.append("- cold = fresh client mount (FUSE daemon restarted, servers keep running) + "
                       "`sync; echo 3 > /proc/sys/vm/drop_caches` (client and server page/dentry caches); "
                       "on-disk caches of a client survive; warm = the same run again right after")
        else:
            out.append("- cold = `sync; echo 3 > /proc/sys/vm/drop_caches` only (FUSE daemons' own user-space caches, "
                       "e.g. sshfs's 20 s attr/dir cache, are kept); warm = the same run again right after")
        rm = ["%s %.2f s" % (n, statistics.median(tg.by_name[n].remount_s))
              for n in self.tnames if tg.by_name[n].remount_s]
        if rm:
            out.append("- median remount time (not in any figure): " + ", ".join(rm))
        if self.interrupted:
            out.append("- **INTERRUPTED: partial results**")
        for n in self.res.notes:
            out.append("- %s" % n)
        out.append("")
        return out

    def cell(self, row, n, unit):
        """The median of (row, target n) with its error or n/a footnote; notes the median in self.med."""
        nums, errs, nas = self.res.cell_stats(row, n, na=True)
        if nums:
            m = statistics.median(nums)
            self.med[(row, n)] = m
            c = fmt(m, unit)
            if errs:
                c += " (%d× %s)" % (len(errs), self.errref(errs[0]))
        elif errs:
            c = self.errref(errs[0])
        elif nas:
            self.errref(nas[0])
            c = "n/a [%d]" % (self.footnotes.index(nas[0]) + 1)
        else:
            c = "—"
        return c

    def spread_cell(self, row, n, unit):
        nums, errs = self.res.cell_stats(row, n)
        return "%s – %s" % (fmt(min(nums), unit), fmt(max(nums), unit)) if nums else "—"

    def table(self):
        """The medians table; "podfs vs X" for every target X but podfs-b (that is the A/B table's)."""
        tnames, out = self.tnames, []
        hdr = ["workload", "unit"] + tnames
        others = [n for n in tnames if n not in ("podfs", AB_TARGET)] if "podfs" in tnames else []
        hdr += ["podfs vs %s" % o for o in others]
        out.append("| " + " | ".join(hdr) + " |")
        out.append("|" + "|".join(["---"] * 2 + ["---:"] * (len(hdr) - 2)) + "|")
        for row, _, unit, hib in self.rows:
            cells = [row, unit + (" ↑" if hib else " ↓")]
            for n in tnames:
                cells.append(self.cell(row, n, unit))
            for o in others:
                p, x = self.med.get((row, "podfs")), self.med.get((row, o))
                if p and x:
                    r = p / x if hib else x / p
                    cells.append("%.2f×" % r)
                else:
                    cells.append("—")
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
        if others:
            out.append("\"podfs vs X\" = podfs speed relative to X, **>1 = podfs faster** "
                       "(throughput: podfs÷X; times: X÷podfs). ↑ higher is better, ↓ lower is better.")
            out.append("")
        return out

    def ab_table(self):
        """--ab-build: podfs beside podfs-b, medians and spread, and podfs ÷ podfs-b per row."""
        if not ("podfs" in self.tnames and AB_TARGET in self.tnames):
            return []
        b, out = AB_TARGET, []
        out.append("A/B: podfs (build %s) and %s (build %s), interleaved in the same rounds (runs=%d):"
                   % (self.b.targets.build, b, self.b.targets.build_b, self.a.runs))
        out.append("")
        out.append("| workload | unit | podfs | %s | podfs ÷ %s | podfs min – max | %s min – max | ranges overlap |"
                   % (b, b, b))
        out.append("|---|---|---:|---:|---:|---:|---:|---|")
        for row, _, unit, hib in self.rows:
            p, q = self.med.get((row, "podfs")), self.med.get((row, b))
            pn, qn = self.res.cell_stats(row, "podfs")[0], self.res.cell_stats(row, b)[0]
            overlap = "—"
            if len(pn) > 1 and len(qn) > 1:
                overlap = "yes" if min(pn) <= max(qn) and min(qn) <= max(pn) else "**no**"
            r = ratio(p, q)
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s |"
                       % (row, unit + (" ↑" if hib else " ↓"), self.cell(row, "podfs", unit), self.cell(row, b, unit),
                          "%.3f×" % r if r else "—", self.spread_cell(row, "podfs", unit),
                          self.spread_cell(row, b, unit), overlap))
        out.append("")
        out.append("podfs ÷ %s = ratio of the medians: on a ↓ row (time) below 1 = podfs faster, on a ↑ row "
                   "(throughput) above 1 = podfs faster. \"ranges overlap\": the min – max ranges of the two "
                   "overlap (no sign of a difference beyond the run-to-run noise; needs 2 runs or more)." % b)
        out.append("")
        return out

    def target_checks(self):
        """The project's performance targets for the venv and checkpoint workloads."""
        a, out, checks = self.a, [], []

        def chk(what, val, target, ok):
            checks.append((what, "—" if val is None else "%.2f×" % val, target,
                           "—" if val is None else ("yes" if ok(val) else "**no**")))
        m = self.med.get
        if "venv" in a.only:
            chk("venv warm: podfs ÷ local, time", ratio(m(("venv-warm", "podfs")), m(("venv-warm", "local"))),
                "≤ 1.35×", lambda v: v <= 1.35)
            if a.rtt_us:
                r = "venv-cold" + self.b.rtt_sfx
                chk("venv cold %s: podfs ÷ sshfs, time" % self.b.rtt_sfx, ratio(m((r, "podfs")), m((r, "sshfs"))),
                    "≤ 0.25×", lambda v: v <= 0.25)
            chk("venv pcache: podfs ÷ local cold, time", ratio(m(("venv-pcache", "podfs")), m(("venv-cold", "local"))),
                "≤ 2×", lambda v: v <= 2)
        if "checkpoint" in a.only:
            for kind in ("rand", "float"):
                w, rd = "ckpt-%s-write" % kind, "ckpt-%s-read" % kind
                chk("%s write: podfs ÷ bindfs" % kind, ratio(m((w, "podfs")), m((w, "bindfs"))), "≥ 1.2×",
                    lambda v: v >= 1.2)
                chk("%s write: podfs ÷ sshfs" % kind, ratio(m((w, "podfs")), m((w, "sshfs"))), "≥ 2×", lambda v: v >= 2)
                chk("%s cold read: podfs ÷ bindfs" % kind, ratio(m((rd, "podfs")), m((rd, "bindfs"))), "≥ 0.6×",
                    lambda v: v >= 0.6)
                chk("%s cold read: podfs ÷ sshfs" % kind, ratio(m((rd, "podfs")), m((rd, "sshfs"))), "≥ 3×",
                    lambda v: v >= 3)
            chk("float write: podfs wire bytes ÷ file bytes", self.res.xmed("ckpt-float-write", "podfs", "wire_ratio"),
                "≤ 0.5×", lambda v: v <= 0.5)
            chk("float read: podfs wire bytes ÷ file bytes", self.res.xmed("ckpt-float-read", "podfs", "wire_ratio"),
                "≤ 0.5×", lambda v: v <= 0.5)
            chk("%d-client write aggregate ÷ 1 client (podfs)" % a.clients,
                ratio(m(("ckpt-multi-write", "podfs")), m(("ckpt-rand-write", "podfs"))), "≥ 1×", lambda v: v >= 1)
            chk("%d-client read aggregate ÷ 1 client (podfs)" % a.clients,
                ratio(m(("ckpt-multi-read", "podfs")), m(("ckpt-rand-read", "podfs"))), "≥ 1×", lambda v: v >= 1)
        if checks and "podfs" in self.tnames:
            out.append("Performance targets (medians):")
            out.append("")
            out.append("| check | podfs | target | met |")
            out.append("|---|---:|---|---|")
            for c in checks:
                out.append("| %s | %s | %s | %s |" % c)
            out.append("")
        return out

    def fuse_requests(self):
        """FUSE requests per run of the rows that counted them (venv: per import)."""
        res, out = self.res, []
        fuse = [n for n in self.tnames if n != "local"]
        crows = [r[0] for r in self.rows if any("requests" in x for n in fuse for x in res.extras.get((r[0], n), []))]
        if crows and fuse:
            mods = sorted({str(x["modules"]) for v in res.extras.values() for x in v if "modules" in x})
            out.append("FUSE requests per run (kernel tracepoint fuse_request_send, median; a venv run is one "
                       "import%s):" % ("; modules imported: " + ", ".join(mods) if mods else ""))
            out.append("")
            wire = any(res.xmed(r, "podfs", "wire_requests") is not None for r in crows)
            out.append("| workload | " + " | ".join(fuse) + " | podfs by opcode (last run) |"
                       + (" podfs to podfsd | by opcode (last run) |" if wire else ""))
            out.append("|---|" + "|".join(["---:"] * len(fuse)) + "|---|" + ("---:|---|" if wire else ""))

            def by_op(r, key):
                ops = [x[key] for x in res.extras.get((r, "podfs"), []) if x.get(key)]
                return (", ".join("%s %d" % kv for kv in sorted(ops[-1].items(), key=lambda kv: -kv[1])[:8])
                        if ops else "—")
            for r in crows:
                cells = [r]
                for n in fuse:
                    v = res.xmed(r, n, "requests")
                    lost = any("requests" in x and x["requests"] is None for x in res.extras.get((r, n), []))
                    cells.append("%d" % v if v is not None else ("lost" if lost else "—"))
                cells.append(by_op(r, "ops"))
                if wire:
                    v = res.xmed(r, "podfs", "wire_requests")
                    cells += ["%d" % v if v is not None else "—", by_op(r, "wire_ops")]
                out.append("| " + " | ".join(cells) + " |")
            out.append("")
        elif self.b.trace.why and any(r[1] in ("venv", "walk") + META_WORKLOADS for r in self.rows):
            out.append(self.b.trace.why)
            out.append("")
        return out

    def ckpt_resources(self):
        """Checkpoint CPU and wire bytes."""
        res, out = self.res, []
        crows = [r[0] for r in ROWS if r[1] == "checkpoint" and r[1] in self.a.only]
        cn = [n for n in ("podfs", AB_TARGET, PLAIN_TARGET, "sshfs", "bindfs") if n in self.tnames]
        if crows and cn:
            out.append("Checkpoint resources (medians): CPU seconds per GiB moved, server / client "
                       "(podfsd / podfs; sshd+sftp-server / sshfs; bindfs), and bytes on the wire ÷ file bytes "
                       "(kernel TCP counters of the server's sockets):")
            out.append("")
            hdr = ["workload"]
            for n in cn:
                hdr += ["%s CPU-s/GiB srv / cli" % n] + (["%s wire÷file" % n] if n != "bindfs" else [])
            out.append("| " + " | ".join(hdr) + " |")
            out.append("|---|" + "|".join(["---:"] * (len(hdr) - 1)) + "|")
            for r in crows:
                cells = [r]
                for n in cn:
                    sv, cv = res.xmed(r, n, "srv_cpu_gib"), res.xmed(r, n, "cli_cpu_gib")
                    cells.append("%s / %s" % ("%.2f" % sv if sv is not None else "—",
                                              "%.2f" % cv if cv is not None else "—"))
                    if n != "bindfs":
                        w = res.xmed(r, n, "wire_ratio")
                        cells.append("%.3f" % w if w is not None else "—")
                out.append("| " + " | ".join(cells) + " |")
            out.append("")
            for n in ["podfs"] + ([AB_TARGET] if AB_TARGET in self.tnames else []):
                out.append("%s's own byte counters: %s" % (n, res.podfs_stats.get(n) or "n/a (no float write on %s "
                           "this run)" % n))
                out.append("")
        return out

    def spread(self):
        """The min/max table."""
        out = []
        out.append("Spread (min – max over %d runs):" % self.a.runs)
        out.append("")
        out.append("| workload | " + " | ".join(self.tnames) + " |")
        out.append("|---|" + "|".join(["---:"] * len(self.tnames)) + "|")
        for row, _, unit, hib in self.rows:
            cells = [row]
            for n in self.tnames:
                cells.append(self.spread_cell(row, n, unit))
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
        return out

    def errors(self):
        """The footnotes: every error and n/a of the tables, then the data checks' errors."""
        out = []
        for name in self.tnames:
            errs = []
            for row in ("seq-write", "seq-read") + tuple(r[0] for r in ROWS if r[1] == "checkpoint"):
                _, e = self.res.cell_stats(row + "-check", name)
                errs += e
            for e in errs:
                self.errref(e)
        if self.footnotes:
            out.append("Errors and n/a:")
            out.append("")
            for i, f in enumerate(self.footnotes):
                out.append("[%d] %s" % (i + 1, f))
            out.append("")
        return out

    def write_json(self):
        a, b, res, tnames = self.a, self.b, self.res, self.tnames
        data = {
            "date": datetime.datetime.now().isoformat(),
            "params": {"runs": a.runs, "size": a.size, "files": a.files, "create_files": a.create_files,
                       "venv_src": a.venv_src, "venv_imports": a.venv_imports, "ckpt_size": a.ckpt_size,
                       "shard_size": a.shard_size, "clients": a.clients, "float_lz4_ratio": b.scratch.float_lz4,
                       "rtt_us": a.rtt_us, "targets": tnames, "only": a.only, "rev": b.rev,
                       "sshfs_opts": b.targets.sshfs_opts, "build": b.targets.build},
            "notes": res.notes,
            "results": {},
        }
        if b.targets.build_b:
            data["params"].update({"ab_build": b.targets.build_b, "rev_b": b.rev_b})
        checks = [(r[0] + "-check", "", "", 0) for r in ROWS if r[1] in ("seq-write", "seq-read", "checkpoint")]
        for row, _, unit, hib in self.rows + checks:
            for n in tnames:
                vals = res.samples.get((row, n))
                if not vals:
                    continue
                nums, errs, nas = res.cell_stats(row, n, na=True)
                data["results"].setdefault(row, {})[n] = {
                    "unit": unit, "samples": nums, "errors": errs, "na": nas,
                    "median": statistics.median(nums) if nums else None,
                    "min": min(nums) if nums else None, "max": max(nums) if nums else None}
                if (row, n) in res.extras:
                    data["results"][row][n]["extras"] = res.extras[(row, n)]
        with open(a.json, "w") as f:
            json.dump(data, f, indent=2)
        log("wrote %s" % a.json)
