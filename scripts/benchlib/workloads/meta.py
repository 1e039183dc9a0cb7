"""The metadata workloads (what people do to a shared venv or code tree besides
importing it): many small files in one directory (smallfiles: create, stat
right after, stat after a remount, unlink), untarring a package (untar), `git
status` of a checkout (git) and `pip install` of a wheel (pip).  Each at 0
added RTT and, with --rtt-us, through latproxy too (podfs targets and sshfs:
rows NAME@Nus), on a fresh mount of its own, with the FUSE requests of every
timed run counted by opcode."""

import glob
import os
import shutil
import sys
import time

from ..common import BenchError, drop_caches, log, run, safe_sync
from ..spec import PODFS_TARGETS
from ..trace import fuse_conn
from .base import Workload

SF_FILES = 5000     # smallfiles: files in one directory
SF_SIZE = 4096      # ... of this many bytes each

# One pass over the smallfiles directory: create (write SF_SIZE bytes and
# close), stat, or unlink (then rmdir) every name in order; prints the
# seconds it took.
SF_SCRIPT = r"""
import os, sys, time
mode, d, n, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
names = ["%s/f%05d" % (d, i) for i in range(n)]
data = b"x" * size
t = time.perf_counter()
if mode == "create":
    os.mkdir(d)
    for p in names:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, data)
        os.close(fd)
elif mode == "stat":
    for p in names:
        if os.stat(p).st_size != size:
            sys.exit("%s: wrong size" % p)
else:
    for p in names:
        os.unlink(p)
    os.rmdir(d)
print(time.perf_counter() - t)
"""

# The package untarred (about 3,000 entries), from the venv source, and the
# trees of the git checkout.
UNTAR_PKG = "botocore"
GIT_PKGS = ("botocore", "awscli")


def site_packages(root):
    """ROOT/lib/pythonX.Y/site-packages, or None."""
    found = sorted(glob.glob(os.path.join(root, "lib", "python3*", "site-packages")))
    return found[0] if found else None


def podfs_requests(mnt):
    """{opcode: requests podfs sent to podfsd} of the mount at mnt, from its
    user.podfs.stats (answered without a request), or None."""
    try:
        text = os.getxattr(mnt, "user.podfs.stats").decode("utf-8", "replace")
    except OSError:
        return None
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) == 2 and f[0].startswith("req_") and f[1].isdigit():
            out[f[0][4:]] = int(f[1])
    return out


class Meta(Workload):
    """smallfiles, untar, git and pip (and their @RTT rows)."""

    def __init__(self, bench):
        super().__init__(bench)
        self.tarball = None
        self.gitdir = None

    # ---- where and how ----

    def variants(self, t):
        """(port, row suffix) of each way target t is measured."""
        v = [(t.port, "")]
        if self.a.rtt_us > 0 and t.port_rtt and (t.name in PODFS_TARGETS or t.name == "sshfs"):
            v.append((t.port_rtt, self.rtt_sfx))
        return v

    def timed(self, t, mnt, cmd, timeout=600, env=None):
        """Runs cmd; (seconds, extras) with the FUSE requests of mnt counted,
        unless t is local, and for podfs the requests it sent to podfsd."""
        # (Read outside the trace: the stats are an xattr of the mount.)
        before = podfs_requests(mnt) if t.name in PODFS_TARGETS else None
        tracing = t.name != "local" and self.trace.inst and self.trace.start(fuse_conn(mnt))
        counts = None
        try:
            t0 = time.monotonic()
            r = run(cmd, timeout=timeout, check=False, env=env)
            s = time.monotonic() - t0
        finally:
            if tracing:
                counts = self.trace.stop()
            after = podfs_requests(mnt) if before is not None else None
        if r.returncode != 0:
            err = r.stderr.decode(errors="replace").strip().splitlines()
            raise BenchError("%s failed (rc=%d): %s" % (os.path.basename(cmd[0]), r.returncode,
                                                       " | ".join(err[-3:])[-300:]))
        x = {}
        if before is not None and after is not None:
            ops = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0) > 0}
            x["wire_requests"] = sum(ops.values())
            x["wire_ops"] = ops
        if tracing:
            x["requests"] = None if counts is None else sum(counts.values())
            if counts:
                x["ops"] = counts
        return s, x

    def with_mount(self, t, port, tag, fn):
        """fn(root, remount) on a fresh mount of t (the export itself for local);
        remount() makes it cold (a new mount, caches dropped) and returns the
        new root."""
        if t.name == "local":
            def cold():
                drop_caches()
                return self.scratch.export
            return fn(self.scratch.export, cold)
        box = {"m": self.targets.open_mount(t, tag, port)}

        def remount():
            self.targets.close_mount(box["m"])
            box["m"] = None
            drop_caches()
            box["m"] = self.targets.open_mount(t, tag, port)
            return box["m"].mnt
        try:
            return fn(box["m"].mnt, remount)
        finally:
            self.targets.close_mount(box["m"])

    def clean(self, path):
        """Removes path (untimed): a failure is the measurement's error."""
        if os.path.lexists(path):
            run(["rm", "-rf", path], timeout=600)

    # ---- smallfiles ----

    def smallfiles(self, t, rnd):
        for port, sfx in self.variants(t):
            self.with_mount(t, port, "sf", lambda root, remount: self.sf_run(t, sfx, root, remount))

    def sf_run(self, t, sfx, root, remount):
        d = os.path.join(root, "sf-%s" % t.name)
        py = sys.executable
        self.clean(d)

        def rate(mode, mnt):
            def go():
                s, x = self.timed(t, mnt, [py, "-c", SF_SCRIPT, mode, d, str(SF_FILES), str(SF_SIZE)])
                return SF_FILES / s, x
            return go
        if self.results.measure_x("sf-create" + sfx, t, rate("create", root)) is None:
            return
        self.results.measure_x("sf-stat" + sfx, t, rate("stat", root))
        root2 = remount()
        d = os.path.join(root2, "sf-%s" % t.name)
        self.results.measure_x("sf-stat-remount" + sfx, t, rate("stat", root2))
        self.results.measure_x("sf-unlink" + sfx, t, rate("unlink", root2))
        self.clean(d)

    # ---- untar ----

    def prepare_tarball(self):
        if self.tarball:
            return self.tarball
        sp = site_packages(os.path.join(self.scratch.export, self.scratch.venv_name))
        if not sp or not os.path.isdir(os.path.join(sp, UNTAR_PKG)):
            raise BenchError("the venv tree has no %s package to untar" % UNTAR_PKG)
        tb = os.path.join(self.scratch.dir, UNTAR_PKG + ".tar")
        if not os.path.exists(tb):
            run(["tar", "-C", sp, "-cf", tb + ".tmp", UNTAR_PKG], timeout=600)
            os.rename(tb + ".tmp", tb)
        self.tarball = tb
        return tb

    def untar(self, t, rnd):
        tb = self.prepare_tarball()
        for port, sfx in self.variants(t):
            def go(root, remount):
                d = os.path.join(root, "untar-%s" % t.name)
                self.clean(d)
                os.makedirs(d)
                self.results.measure_x("untar" + sfx, t,
                                       lambda: self.timed(t, root, ["tar", "-xf", tb, "-C", d]))
                self.clean(d)
            self.with_mount(t, port, "ut", go)

    # ---- git status ----

    def prepare_git(self):
        """A git checkout of GIT_PKGS (from the venv tree) in the export, made once."""
        if self.gitdir:
            return self.gitdir
        d = os.path.join(self.scratch.export, "gitrepo")
        ok = os.path.join(self.scratch.dir, "gitrepo.ok")
        if not (os.path.exists(ok) and os.path.isdir(os.path.join(d, ".git"))):
            sp = site_packages(os.path.join(self.scratch.export, self.scratch.venv_name))
            if not sp or not all(os.path.isdir(os.path.join(sp, p)) for p in GIT_PKGS):
                raise BenchError("the venv tree lacks %s for the git checkout" % " or ".join(GIT_PKGS))
            log("making a git checkout of %s in %s (once; reused by later runs)" % (", ".join(GIT_PKGS), d))
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            for p in GIT_PKGS:
                run(["cp", "-a", os.path.join(sp, p), d], timeout=600)
            env = self.git_env()
            for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                        ["git", "commit", "-q", "-m", "checkout for the benchmark"]):
                run(cmd, timeout=600, cwd=d, env=env)
            safe_sync()
            with open(ok, "w") as f:
                f.write("%s\n" % d)
        self.gitdir = d
        return d

    def git_env(self):
        return {"PATH": "/usr/bin:/bin", "HOME": self.scratch.home, "GIT_AUTHOR_NAME": "bench",
                "GIT_AUTHOR_EMAIL": "bench@localhost", "GIT_COMMITTER_NAME": "bench",
                "GIT_COMMITTER_EMAIL": "bench@localhost", "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_OPTIONAL_LOCKS": "0"}

    def git(self, t, rnd):
        self.prepare_git()
        env = self.git_env()
        for port, sfx in self.variants(t):
            def go(root, remount):
                repo = os.path.join(root, "gitrepo")
                cmd = ["git", "-C", repo, "status", "--porcelain", "--untracked-files=all"]
                # The index learns this mount's view of the files first
                # (inode numbers and times may differ between targets).
                r = run(cmd, timeout=1200, env=env, check=False)
                if r.returncode != 0 or r.stdout.strip():
                    raise BenchError("git status of the checkout via %s: rc=%d, %r"
                                     % (t.name, r.returncode, r.stdout[:200]))
                root2 = remount()
                cmd[2] = os.path.join(root2, "gitrepo")
                self.results.measure_x("git-status-cold" + sfx, t, lambda: self.timed(t, root2, cmd, env=env))
                self.results.measure_x("git-status-warm" + sfx, t, lambda: self.timed(t, root2, cmd, env=env))
            self.with_mount(t, port, "git", go)

    # ---- pip install ----

    def pip(self, t, rnd):
        src = self.a.venv_src
        py = os.path.join(src, "bin", "python3")
        wheels = sorted(glob.glob(os.path.join(src, "lib", "python3*", "ensurepip", "_bundled",
                                               "setuptools-*.whl")))
        if not wheels:
            raise BenchError("no setuptools wheel in %s's ensurepip" % src)
        env = {"PATH": "/usr/bin:/bin", "HOME": self.scratch.home, "PIP_CONFIG_FILE": os.devnull,
               "PIP_NO_INPUT": "1"}
        for port, sfx in self.variants(t):
            def go(root, remount):
                prefix = os.path.join(root, "pip-%s" % t.name)
                self.clean(prefix)
                # -I: the venv source has setuptools installed already.
                cmd = [py, "-m", "pip", "install", "-I", "--no-index", "--no-deps", "--no-cache-dir",
                       "--disable-pip-version-check", "--quiet", "--prefix", prefix, wheels[-1]]

                def go_pip():
                    s, x = self.timed(t, root, cmd, env=env)
                    n = sum(len(fs) for _, _, fs in os.walk(prefix))
                    if n < 100:
                        raise BenchError("pip installed only %d files into %s" % (n, prefix))
                    return s, x
                self.results.measure_x("pip-install" + sfx, t, go_pip)
                self.clean(prefix)
            self.with_mount(t, port, "pip", go)

