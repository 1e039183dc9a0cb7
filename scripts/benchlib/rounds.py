"""One benchmark run: its parts (scratch dir, processes and mounts, targets,
results, FUSE request tracer, the revisions measured) and its rounds, every
workload interleaved across the targets, the target order rotated."""

import os

from .build import build_source, source_rev
from .common import REPO, BenchError, log
from .ctx import Ctx
from .results import Results
from .scratch import Scratch
from .spec import ALL_WORKLOADS, rows_for, rtt_suffix
from .targets import Targets
from .trace import FuseTrace
from .workloads import workloads


class Bench:
    def __init__(self, args):
        self.a = args
        self.scratch = Scratch(args)
        self.ctx = Ctx(self.scratch.logdir)
        self.results = Results()
        self.targets = Targets(args, self.scratch, self.ctx, self.results.notes)
        self.trace = FuseTrace()
        self.rtt_sfx = rtt_suffix(args.rtt_us)
        self.rev = source_rev(REPO)
        self.rev_b = None    # --ab-build: the revision podfs-b was built from
        self.fs_warning = None  # what is wrong with the export's filesystem (cli)
        if self.targets.build_b:
            src = build_source(self.targets.build_b)
            self.rev_b = source_rev(src) if src and os.path.isdir(src) else "unknown source"

    def run_rounds(self):
        fns = workloads(self)
        order = self.targets.names()
        for rnd in range(self.a.runs):
            k = rnd % len(order)
            rot = order[k:] + order[:k]      # rotate so no target is always first
            log("round %d/%d (order: %s)" % (rnd + 1, self.a.runs, " ".join(rot)))
            for w in ALL_WORKLOADS:
                if w not in self.a.only:
                    continue
                fn = fns[w]
                for name in rot:
                    t = self.targets.by_name[name]
                    wrows = rows_for(w, name)
                    why = t.alive()
                    if why:
                        for row in wrows:
                            self.results.record(row, t, {"error": why})
                        continue
                    try:
                        fn(t, rnd)
                    except BenchError as e:   # failure while preparing the measurement
                        log("  %-14s %-7s ERROR %s" % (w, name, e))
                        if "timeout" in str(e):
                            t.broken = str(e)
                        for row in wrows:
                            if len(self.results.samples.get((row, name), [])) <= rnd:
                                self.results.record(row, t, {"error": "preparing %s: %s" % (w, e)})
