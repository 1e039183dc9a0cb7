"""The venv workload: a real Python tree's own interpreter started
from the target and importing --venv-imports, cold (fresh mount, caches
dropped), warm, and for podfs from its persistent cache (pcache); also at
--rtt-us through latproxy.  FUSE requests per run are counted when tracing
is on."""

import os
import shutil
import time

from ..common import BenchError, drop_caches, log, run
from ..spec import PCACHE_SIZE, PODFS_TARGETS, ab_suffix
from ..trace import fuse_conn
from .base import Workload

# run by the venv's own interpreter from the target; the import list is prepended
VENV_CHECK = r"""
import os, sys
prefix = sys.argv[1]
bad = []
if os.path.realpath(sys.prefix) != prefix:
    bad.append("sys.prefix=" + sys.prefix)
with open("/proc/self/maps") as f:
    libs = set(l.split()[-1] for l in f if "libpython" in l)
bad += ["libpython " + l for l in libs if not l.startswith(prefix + "/")]
for name, m in list(sys.modules.items()):
    fn = getattr(m, "__file__", None)
    if fn and not os.path.realpath(fn).startswith(prefix + "/"):
        bad.append("%s from %s" % (name, fn))
if bad:
    print("NOT FROM THE TARGET: " + "; ".join(bad[:5]))
    sys.exit(3)
print("ok %d" % len(sys.modules))
"""

def venv_cmd(scratch, imports, root, before_check="", after="", env=()):
    """The venv workload's command: the interpreter of the venv copy under
    root (the export or a mount of it) importing imports (a "m1, m2"
    list), then the code before_check, VENV_CHECK and after; env: more
    NAME=VALUE words."""
    prefix = os.path.join(root, scratch.venv_name)
    code = "import %s\n%s%s%s" % (imports, before_check, VENV_CHECK, after)
    return ["env", "-i", "PATH=/usr/bin:/bin", "HOME=" + scratch.home, "LANG=C.UTF-8",
            "PYTHONHOME=" + prefix, "LD_LIBRARY_PATH=" + os.path.join(prefix, "lib"),
            "PYTHONDONTWRITEBYTECODE=1", "PYTHONNOUSERSITE=1"] + list(env) + \
        [os.path.join(prefix, "bin", "python3"), "-c", code, prefix]


def venv_check_output(r):
    """The module count a venv_cmd run printed; BenchError if it failed."""
    out = r.stdout.decode("utf-8", "replace").strip()
    if r.returncode != 0 or not out.startswith("ok "):
        err = [l for l in r.stderr.decode("utf-8", "replace").splitlines() if l.strip()]
        raise BenchError("venv import failed (rc=%d): %s"
                         % (r.returncode, (out + " " + " | ".join(err[-2:]))[-300:]))
    return int(out.split()[1])


class Venv(Workload):
    """venv-cold, venv-warm and venv-pcache (and their @RTT rows)."""

    def __init__(self, bench):
        super().__init__(bench)
        self.pcache_ok = {}    # podfs target -> False if it rejects -o cache_dir, True once it took it
        self.pcache_why = {}

    def venv_run(self, root, mount=None):
        """One interpreter start + imports from root; (wall seconds, extras or None)."""
        cmd = venv_cmd(self.scratch, self.a.venv_imports, root)
        tracing = False
        if mount is not None and self.trace.inst:
            tracing = self.trace.start(fuse_conn(mount.mnt))
        counts = None
        try:
            t0 = time.monotonic()
            r = run(cmd, timeout=300, check=False)
            s = time.monotonic() - t0
        finally:
            if tracing:
                counts = self.trace.stop()
        x = {"modules": venv_check_output(r)}
        if tracing:
            if counts is None:
                x["requests"] = None    # trace buffer overran
            else:
                x["requests"] = sum(counts.values())
                x["ops"] = counts
        return s, x

    def venv(self, t, rnd):
        variants = [(t.port, "")]
        if self.a.rtt_us > 0 and t.port_rtt:
            variants.append((t.port_rtt, self.rtt_sfx))
        for port, sfx in variants:
            if t.name == "local":
                def cold():
                    drop_caches()
                    return self.venv_run(self.scratch.export)
                self.results.measure_x("venv-cold" + sfx, t, cold)
                self.results.measure_x("venv-warm" + sfx, t, lambda: self.venv_run(self.scratch.export))
                continue
            m = None
            try:
                m = self.targets.open_mount(t, "v", port)
                drop_caches()
                self.results.measure_x("venv-cold" + sfx, t, lambda: self.venv_run(m.mnt, m))
                self.results.measure_x("venv-warm" + sfx, t, lambda: self.venv_run(m.mnt, m))
            finally:
                self.targets.close_mount(m)
            if t.name in PODFS_TARGETS:
                self.venv_pcache(t, port, sfx)

    def venv_pcache(self, t, port, sfx):
        row = "venv-pcache" + sfx
        if self.pcache_ok.get(t.name) is False:
            self.results.record(row, t, {"na": self.pcache_why[t.name]})
            return
        cdir = os.path.join(self.scratch.dir, "pcache" + ab_suffix(t.name) + sfx.replace("@", "-"))
        shutil.rmtree(cdir, ignore_errors=True)
        os.makedirs(cdir)
        extra = ["cache_dir=" + cdir, "cache_size=" + PCACHE_SIZE]
        m = None
        try:
            try:
                m = self.targets.open_mount(t, "p", port, extra)
            except BenchError as e:
                if self.pcache_ok.get(t.name) is None and "option" in str(e):
                    self.pcache_ok[t.name] = False
                    why = self.pcache_why[t.name] = ("%s does not take -o cache_dir=DIR,cache_size=%s (%s)"
                                                     % (t.name, PCACHE_SIZE, e))
                    log("  %-14s %-7s n/a: %s" % (row, t.name, why))
                    self.results.record(row, t, {"na": why})
                    return
                raise
            self.pcache_ok[t.name] = True
            s, _ = self.venv_run(m.mnt)
            log("  %-14s %-7s (populating the persistent cache: %.3f s)" % (row, t.name, s))
            self.targets.close_mount(m)
            m = None
            used = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(cdir) for f in fs)
            if used == 0:
                note = "WARNING: %s took -o cache_dir but %s was empty after a populate run" % (t.name, cdir)
                if note not in self.results.notes:
                    self.results.notes.append(note)
                log("  " + note)
            drop_caches()
            m = self.targets.open_mount(t, "p", port, extra)
            self.results.measure_x(row, t, lambda: self.venv_run(m.mnt, m))
        finally:
            self.targets.close_mount(m)

