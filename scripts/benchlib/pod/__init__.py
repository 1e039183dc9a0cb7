"""scripts/bench --hosts N[,N...]: a pod on one machine. One podfsd and N
podfs clients, each in a network namespace of its own (hosts), for each
N asked; in every round and for every N, two phases, each from a fresh
podfsd, fresh mounts and dropped caches:

  venv        every host starts the venv workload's program at once: its
              file accesses, captured once with strace from the real
              import (capture), replayed by podfs-replay on each mount and
              checked call by call against the capture;
  checkpoint  every host reads one --ckpt-size file (random data) at once,
              cold, and compares every byte with its source.

The parts: hosts (namespaces, podfsd, latproxy, mounts), capture (the
venv trace), phases (one measured phase and what is measured), report
(the tables). The replay program and the trace conversion are shared
with the system tests: tests/tools/ (replay.c, fstrace.py, gang.py),
reached through tools."""

import os
import random
import shutil
import signal
import sys
import time

from ..build import ensure_build, ensure_latproxy, source_rev
from ..common import REPO, BenchError, Interrupted, fmt_size, log, run, safe_sync
from ..ctx import Ctx
from ..scratch import Scratch
from . import capture, phases, tools
from .hosts import MAX_HOSTS, PodHosts
from .report import PodReport

PHASES = ("venv", "checkpoint")


class PodBench:
    def __init__(self, a):
        self.a = a
        self.scratch = Scratch(a)
        self.ctx = Ctx(self.scratch.logdir)
        self.build = a.build if os.path.isabs(a.build) else os.path.join(REPO, a.build)
        self.rev = source_rev(REPO)
        self.notes = []
        self.info = ""
        self.hosts = None
        self.replay_exe = tools.replay_exe(self.build)
        self.trace, self.trace_ops = None, None
        self.ckpt_src = os.path.join(self.scratch.dir, "pod-ckpt-%s.bin" % fmt_size(a.ckpt_size))
        self.ckpt_name = "pod-ckpt-%s.dat" % fmt_size(a.ckpt_size)
        self.phases = [p for p in PHASES if p in a.only]
        self.samples = {}   # (phase, n) -> [figures of each round]

    def prepare_space(self):
        need, what = 0, []
        if "venv" in self.phases and not self.scratch.venv_ready():
            r = run(["du", "-sb", self.a.venv_src], timeout=300, check=False)
            try:
                n = int(r.stdout.split()[0])
            except (ValueError, IndexError):
                raise BenchError("--venv-src %s: cannot size it" % self.a.venv_src)
            need += n
            what.append("venv copy %.1f GiB" % (n / 2**30))
        if "checkpoint" in self.phases:
            for f in (self.ckpt_src, os.path.join(self.scratch.export, self.ckpt_name)):
                if not (os.path.exists(f) and os.path.getsize(f) == self.a.ckpt_size):
                    need += self.a.ckpt_size
                    what.append("%s %s" % (os.path.basename(f), fmt_size(self.a.ckpt_size)))
        free = shutil.disk_usage(self.scratch.dir).free
        if need and free < need + (1 << 30):
            raise BenchError("not enough disk space in %s: need %.1f GiB (%s) + 1 GiB, %.1f GiB free"
                             % (self.scratch.dir, need / 2**30, ", ".join(what), free / 2**30))

    def prepare_ckpt(self):
        """The checkpoint's source (random, made once) and its copy in the
        export (written there directly, not through podfs)."""
        src, size = self.ckpt_src, self.a.ckpt_size
        if not (os.path.exists(src) and os.path.getsize(src) == size):
            log("generating %s of random data in %s" % (fmt_size(size), src))
            rng = random.Random(17)
            with open(src + ".tmp", "wb") as f:
                left = size
                while left > 0:
                    k = min(left, 8 << 20)
                    f.write(rng.randbytes(k))
                    left -= k
            os.rename(src + ".tmp", src)
        dst = os.path.join(self.scratch.export, self.ckpt_name)
        ok = os.path.join(self.scratch.dir, self.ckpt_name + ".ok")
        if not (os.path.exists(dst) and os.path.exists(ok) and os.path.getsize(dst) == size):
            log("copying the checkpoint into the export: %s" % dst)
            run(["cp", src, dst + ".tmp"], timeout=1800)
            os.rename(dst + ".tmp", dst)
            safe_sync()
            with open(ok, "w") as f:
                f.write("%s\n" % src)

    def run_rounds(self):
        for rnd in range(self.a.runs):
            order = list(self.a.hosts)
            log("round %d/%d (hosts: %s)" % (rnd + 1, self.a.runs, " ".join(map(str, order))))
            for n in order:
                for phase in self.phases:
                    log("  %-10s N=%-3d ..." % (phase, n))
                    t0 = time.monotonic()
                    try:
                        x = phases.run_phase(self, phase, n)
                    except BenchError as e:
                        log("  %-10s N=%-3d ERROR %s" % (phase, n, e))
                        x = {"n": n, "error": str(e)}
                    self.samples.setdefault((phase, n), []).append(x)
                    if "error" not in x:
                        log("  %-10s N=%-3d %s (phase %.0f s)" % (phase, n, phases.describe(x),
                                                                 time.monotonic() - t0))


def run_pod(a):
    """The pod bench as a.hosts says; the exit status."""
    if os.geteuid() != 0:
        print("bench: --hosts needs root (network namespaces, FUSE mounts, drop_caches)", file=sys.stderr)
        return 2
    b = PodBench(a)

    def on_term(signum, frame):
        raise Interrupted()
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    interrupted, failed = False, None
    t0 = time.monotonic()
    try:
        b.scratch.prepare_dirs(b.ctx.unmount)
        podfsd, podfs, b.info = ensure_build(b.build, a.no_build, b.notes, extra=["tests/tools/podfs-replay"])
        latproxy = ensure_latproxy(b.build) if a.rtt_us > 0 else None
        b.prepare_space()
        if "venv" in b.phases:
            b.scratch.prepare_venv()
            b.trace, b.trace_ops = capture.ensure_trace(a, b.scratch)
        if "checkpoint" in b.phases:
            b.prepare_ckpt()
        b.hosts = PodHosts(a, b.scratch, b.ctx, podfsd, podfs, latproxy)
        b.hosts.create(max(a.hosts))
        b.run_rounds()
    except (KeyboardInterrupt, Interrupted):
        interrupted = True
        log("interrupted: cleaning up")
    except BenchError as e:
        failed = str(e)
        log("ERROR: %s" % e)
    finally:
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            b.ctx.cleanup()
            if b.hosts is not None:
                b.hosts.delete()
            if a.clean:
                shutil.rmtree(b.scratch.dir, ignore_errors=True)
        finally:
            signal.signal(signal.SIGINT, old)
    log("done in %.0f s" % (time.monotonic() - t0))
    if failed:
        print("bench: %s" % failed, file=sys.stderr)
        return 2
    PodReport(b, interrupted).write()
    errors = sum(x.get("errors", 0) + (1 if "error" in x else 0) for xs in b.samples.values() for x in xs)
    return 130 if interrupted else (1 if errors else 0)


def parse_hosts(text):
    """--hosts N[,N...] as a sorted list of distinct counts in 1..MAX_HOSTS."""
    try:
        ns = sorted({int(w) for w in text.split(",") if w.strip()})
    except ValueError:
        raise ValueError("--hosts %s: not a list of numbers" % text)
    if not ns or ns[0] < 1 or ns[-1] > MAX_HOSTS:
        raise ValueError("--hosts %s: each N must be 1..%d" % (text, MAX_HOSTS))
    return ns
