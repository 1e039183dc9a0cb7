"""What a run measured: every sample (a number, or an error or n/a) and its
extras (FUSE requests, CPU, wire bytes) per (row, target), the notes for the
report, and measure(): one timed call with its progress line, where a timeout
marks the target broken for the rest of the run."""

import statistics

from .common import BenchError, log
from .spec import unit_of


class Results:
    def __init__(self):
        self.samples = {}     # (row, target) -> list of float or {"error": str} or {"na": str}
        self.extras = {}      # (row, target) -> list of dicts (requests, CPU, wire bytes) per sample
        self.notes = []       # lines for the report's header
        self.podfs_stats = {}  # podfs target -> its byte counters after the float write

    def record(self, row, t, value):
        if isinstance(value, dict) and "error" in value and not value["error"].startswith(t.name + ":"):
            value = {"error": "%s: %s" % (t.name, value["error"])}
        self.samples.setdefault((row, t.name), []).append(value)

    def measure(self, row, t, fn, fatal_on_timeout=True):
        why = t.alive()
        if why:
            self.record(row, t, {"error": why})
            return None
        try:
            v = fn()
            self.record(row, t, v)
            unit = unit_of(row)
            log("  %-14s %-7s %s %s" % (row, t.name, ("%.0f" % v) if unit in ("MB/s", "ops/s") else ("%.3f" % v), unit))
            return v
        except BenchError as e:
            msg = str(e)
            log("  %-14s %-7s ERROR %s" % (row, t.name, msg))
            if "timeout" in msg and fatal_on_timeout:
                t.broken = msg
            why = t.alive()  # did the FUSE daemon die on us?
            if why and why != msg and t.proc is not None and t.proc.poll() is not None:
                msg += " (%s)" % why
            self.record(row, t, {"error": msg})
            return None

    def measure_x(self, row, t, fn):
        """measure() for fn() -> (value, extras dict); extras are kept per sample."""
        box = {}

        def go():
            v, box["x"] = fn()
            return v
        v = self.measure(row, t, go)
        x = box.get("x")
        if v is not None and x:
            self.extras.setdefault((row, t.name), []).append(x)
            bits = []
            if "requests" in x:
                bits.append("%s FUSE requests" % x["requests"])
                if x.get("ops"):
                    bits.append(" ".join("%s=%d" % kv for kv in sorted(x["ops"].items(), key=lambda kv: -kv[1])[:6]))
            if x.get("wire_requests") is not None:
                bits.append("%d requests to podfsd" % x["wire_requests"])
            for k in ("srv_cpu_gib", "cli_cpu_gib", "wire_ratio"):
                if x.get(k) is not None:
                    bits.append("%s=%.3f" % (k, x[k]))
            if bits:
                log("  %-14s %-7s   %s" % ("", "", "; ".join(bits)))
        return v

    def flag(self, t, row, msg):
        log("  DATA ERROR %s: %s" % (t.name, msg))
        self.notes.append("DATA ERROR (%s, %s): %s" % (t.name, row, msg))
        self.record(row + "-check", t, {"error": msg})

    def cell_stats(self, row, tname, na=False):
        vals = self.samples.get((row, tname), [])
        nums = [v for v in vals if isinstance(v, float)]
        errs = [v["error"] for v in vals if isinstance(v, dict) and "error" in v]
        nas = [v["na"] for v in vals if isinstance(v, dict) and "na" in v]
        return (nums, errs, nas) if na else (nums, errs)

    def xmed(self, row, tname, key):
        vals = [x[key] for x in self.extras.get((row, tname), []) if x.get(key) is not None]
        return statistics.median(vals) if vals else None
