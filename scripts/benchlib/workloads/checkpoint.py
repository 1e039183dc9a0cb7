"""The checkpoint workload: one large file written to a temp name
and moved over the final name, then read back cold, for random and for
compressible float32 data; and several clients each writing a shard at once,
then every client reading every shard.  Aggregate MB/s, with the CPU and
wire-byte probes around every measurement."""

import os
import subprocess
import tempfile
import time

from ..common import BenchError, drop_caches, log, run, safe_sync, timed
from ..probe import probe_start, probe_stop
from ..spec import PODFS_TARGETS
from .base import Workload


class Checkpoint(Workload):
    """ckpt-{rand,float}-{write,read} and ckpt-multi-{write,read}."""

    def ckpt_views(self, t, n):
        """n client views of the export: [(path, Mount or None)]; fresh mounts."""
        if t.name == "local":
            return [(self.scratch.export, None)] * n
        if t.name == "bindfs" or n == 1:
            m = self.targets.open_mount(t, "c0", t.port)
            return [(m.mnt, m)] * n
        ms = []
        try:
            for i in range(n):
                ms.append(self.targets.open_mount(t, "c%d" % i, t.port))
        except BenchError:
            for m in ms:
                self.targets.close_mount(m)
            raise
        return [(m.mnt, m) for m in ms]

    def close_views(self, views):
        err, seen = None, set()
        for _, m in views or []:
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                try:
                    self.targets.close_mount(m)
                except BenchError as e:
                    err = e
        if err:
            raise err

    def ckpt_timeout(self, nbytes):
        return max(180.0, nbytes / 4e6)    # at least 4 MB/s

    def parallel(self, cmds, timeout):
        """Start all cmds at once; wall seconds until the last one is done."""
        errf = [tempfile.TemporaryFile() for _ in cmds]
        procs = []
        t0 = time.monotonic()
        try:
            for c, ef in zip(cmds, errf):
                procs.append(subprocess.Popen(c, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                              stderr=ef, cwd="/"))
            for p in procs:
                p.wait(timeout=max(0.1, timeout - (time.monotonic() - t0)))
            s = time.monotonic() - t0
        except subprocess.TimeoutExpired:
            raise BenchError("timeout after %gs: %d concurrent %s" % (timeout, len(cmds), " ".join(cmds[0][:3])))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    try:
                        p.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        log("WARNING: pid %d unkillable, abandoned" % p.pid)
        bad = []
        for p, ef in zip(procs, errf):
            ef.seek(0)
            msg = ef.read().decode("utf-8", "replace").strip().splitlines()
            ef.close()
            if p.returncode != 0:
                bad.append("rc=%d %s" % (p.returncode, msg[-1] if msg else ""))
        if bad:
            raise BenchError("%d of %d clients failed: %s" % (len(bad), len(cmds), bad[0][:300]))
        return s

    def unlink_export(self, names):
        for n in names:
            for f in (os.path.join(self.scratch.export, n), os.path.join(self.scratch.export, n + ".tmp")):
                if os.path.exists(f):
                    os.unlink(f)

    def checkpoint(self, t, rnd):
        for kind in ("rand", "float"):
            self.ckpt_single(t, rnd, kind)
        self.ckpt_multi(t, rnd)

    def ckpt_single(self, t, rnd, kind):
        src, size = self.scratch.ckpt_src[kind], self.a.ckpt_size
        mb = str(size >> 20)
        wrow, rrow = "ckpt-%s-write" % kind, "ckpt-%s-read" % kind
        name = "ckpt-%s-%s.dat" % (kind, t.name)
        self.unlink_export([name])
        run(["dd", "if=" + src, "of=/dev/null", "bs=1M", "count=" + mb, "status=none"], timeout=600)  # source cached
        safe_sync()
        views = None
        try:
            views = self.ckpt_views(t, 1)
            f = os.path.join(views[0][0], name)
            wcmd = ["sh", "-c", 'dd if="$1" of="$2.tmp" bs=1M count="$3" conv=fsync status=none && mv -f "$2.tmp" "$2"',
                    "sh", src, f, mb]

            def wr():
                pr = probe_start(t, views)
                s = timed(wcmd, self.ckpt_timeout(size))
                return size / s / 1e6, probe_stop(t, pr, size, True)
            if self.results.measure_x(wrow, t, wr) is None:
                self.results.record(rrow, t, {"error": "write failed"})
                return
            if t.name in PODFS_TARGETS and kind == "float":
                try:
                    txt = os.getxattr(views[0][0], "user.podfs.stats").decode("utf-8", "replace")
                except OSError as e:
                    txt = "unreadable: %s" % e
                keep = [ln.strip() for ln in txt.splitlines()
                        if any(k in ln for k in ("wire", "raw", "zero_copy", "conns"))] or [txt.strip()]
                log("  %s stats after the float write: %s" % (t.name, " | ".join(keep)[:600]))
                self.results.podfs_stats[t.name] = ("`getfattr -n user.podfs.stats` after the float write: %s"
                                                    % "; ".join(keep)[:400])
            local = os.path.join(self.scratch.export, name)
            if rnd == 0 and run(["cmp", "-s", "-n", str(size), src, local], timeout=self.ckpt_timeout(2 * size),
                                check=False).returncode != 0:
                self.results.flag(t, wrow, "%s data written via %s differs from the source (cmp %s)"
                                  % (kind, t.name, local))
            self.close_views(views)
            views = None
            drop_caches()
            views = self.ckpt_views(t, 1)
            f = os.path.join(views[0][0], name)

            def rd():
                pr = probe_start(t, views)
                s = timed(["dd", "if=" + f, "of=/dev/null", "bs=1M", "status=none"], self.ckpt_timeout(size))
                return size / s / 1e6, probe_stop(t, pr, size, False)
            if self.results.measure_x(rrow, t, rd) is not None and rnd == 0:
                if run(["cmp", "-s", "-n", str(size), src, f], timeout=self.ckpt_timeout(2 * size),
                       check=False).returncode != 0:
                    self.results.flag(t, rrow, "%s data read back via %s differs from the source (cmp %s)"
                                      % (kind, t.name, f))
        finally:
            try:
                self.close_views(views)
            finally:
                self.unlink_export([name])

    def ckpt_multi(self, t, rnd):
        n, sh = self.a.clients, self.a.shard_size
        src, mb = self.scratch.ckpt_src["rand"], sh >> 20
        names = ["ckpt-shard%d-%s.dat" % (i, t.name) for i in range(n)]
        self.unlink_export(names)
        run(["dd", "if=" + src, "of=/dev/null", "bs=1M", "count=%d" % (n * mb), "status=none"], timeout=600)
        safe_sync()
        views = None
        try:
            views = self.ckpt_views(t, n)
            wcmds = [["sh", "-c", 'dd if="$1" of="$2.tmp" bs=1M skip="$3" count="$4" conv=fsync status=none '
                      '&& mv -f "$2.tmp" "$2"', "sh", src, os.path.join(views[i][0], names[i]), str(i * mb), str(mb)]
                     for i in range(n)]

            def wr():
                pr = probe_start(t, views)
                s = self.parallel(wcmds, self.ckpt_timeout(n * sh))
                return n * sh / s / 1e6, probe_stop(t, pr, n * sh, True)
            if self.results.measure_x("ckpt-multi-write", t, wr) is None:
                self.results.record("ckpt-multi-read", t, {"error": "write failed"})
                return
            if rnd == 0:
                for i in range(n):
                    local = os.path.join(self.scratch.export, names[i])
                    r = run(["cmp", "-s", "-n", str(sh), "-i", "%d:0" % (i * sh), src, local],
                            timeout=self.ckpt_timeout(2 * sh), check=False)
                    if r.returncode != 0:
                        self.results.flag(t, "ckpt-multi-write",
                                          "shard %d written via %s differs from the source (cmp %s)"
                                          % (i, t.name, local))
            self.close_views(views)
            views = None
            drop_caches()
            views = self.ckpt_views(t, n)
            # client i reads every shard, starting with its own
            rcmds = [["sh", "-c", 'for f; do dd if="$f" of=/dev/null bs=1M status=none || exit 1; done', "sh"] +
                     [os.path.join(views[i][0], names[(i + k) % n]) for k in range(n)] for i in range(n)]

            def rd():
                pr = probe_start(t, views)
                s = self.parallel(rcmds, self.ckpt_timeout(n * n * sh))
                return n * n * sh / s / 1e6, probe_stop(t, pr, n * n * sh, False)
            self.results.measure_x("ckpt-multi-read", t, rd)
        finally:
            try:
                self.close_views(views)
            finally:
                self.unlink_export(names)

