"""The walk workload: `find` and `ls -lR` over the venv copy (the shared
venv's tree, --venv-src), cold (fresh mount + dropped caches) and warm
(again on the same mount).  FUSE requests per walk are counted when
tracing is on, and for podfs the requests it sent podfsd (its req_*
counters, user.podfs.stats)."""

import os
import time

from ..common import BenchError, run
from ..spec import PODFS_TARGETS
from ..trace import fuse_conn
from .base import Workload

WALKS = {
    "find": ["find", "."],
    "ls": ["ls", "-lR", "--time-style=+%s", "."],
}


def podfs_requests(mnt):
    """The requests a podfs mount has sent podfsd so far, by opcode."""
    try:
        text = os.getxattr(mnt, "user.podfs.stats").decode()
    except OSError:
        return None
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if k.startswith("req_") and v.isdigit():
            out[k[4:]] = int(v)
    return out


class Walk(Workload):
    """walk-find-cold, walk-find-warm, walk-ls-cold, walk-ls-warm."""

    def __init__(self, bench):
        super().__init__(bench)
        self.want = {}    # walk -> lines the local tree gives

    def lines(self, root, walk):
        r = run(WALKS[walk], timeout=600, cwd=os.path.join(root, self.scratch.venv_name))
        return r.stdout.count(b"\n")

    def walk_run(self, t, walk):
        """One walk of the venv on target t: (wall seconds, extras)."""
        root = t.path
        tracing = False
        if t.name != "local" and self.trace.inst:
            tracing = self.trace.start(fuse_conn(t.path))
        before = podfs_requests(root) if t.name in PODFS_TARGETS else None
        counts = None
        try:
            t0 = time.monotonic()
            n = self.lines(root, walk)
            s = time.monotonic() - t0
        finally:
            if tracing:
                counts = self.trace.stop()
        if n != self.want[walk]:
            raise BenchError("%s printed %d lines, the local tree %d" % (" ".join(WALKS[walk]), n,
                                                                       self.want[walk]))
        after = (podfs_requests(root) or {}) if before is not None else None
        return s, self.add_counts({}, tracing, counts, before, after)

    def walk(self, t, rnd):
        for walk in WALKS:
            if walk not in self.want:
                self.want[walk] = self.lines(self.scratch.export, walk)
            self.targets.make_cold(t)
            self.results.measure_x("walk-%s-cold" % walk, t, lambda: self.walk_run(t, walk))
            self.results.measure_x("walk-%s-warm" % walk, t, lambda: self.walk_run(t, walk))
