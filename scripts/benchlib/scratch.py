"""The scratch directory of a run (--dir, on local disk) and what the
workloads find in it: the export that every target shows, the random source
file, the find/stat tree, the venv copy and the checkpoint sources (made once,
reused by later runs), a disk-space check before making any of them, and the
removal of the per-target files at the end."""

import os
import random
import shutil

from .common import BenchError, fmt_size, log, mount_fstype, run, safe_sync
from .spec import FILES_PER_DIR, SMALL_MAX, TARGET_ORDER

# compressible "weights": float32, ~67% zeros in runs, the rest int8-quantized values
FLOAT_BLOCK = 1 << 20
FLOAT_NBLOCKS = 64


def float_block(rng):
    import struct
    zero = b"\0\0\0\0"
    pal = [struct.pack("<f", (k - 128) / 2048.0) for k in range(256) if k != 128]
    out, left = [], FLOAT_BLOCK // 4
    while left > 0:
        z = min(left, int(rng.expovariate(1 / 24.0)))
        out.append(zero * z)
        left -= z
        v = min(left, int(rng.expovariate(1 / 11.0)) + 1)
        out.append(b"".join(rng.choices(pal, k=v)))
        left -= v
    return b"".join(out)[:FLOAT_BLOCK]


class Scratch:
    def __init__(self, args):
        self.a = args
        self.dir = os.path.realpath(args.dir)
        self.export = os.path.join(self.dir, "export")
        self.logdir = os.path.join(self.dir, "logs")
        self.ndirs = max(1, (args.files + FILES_PER_DIR - 1) // FILES_PER_DIR)
        self.treename = "tree-%d" % args.files
        self.src = os.path.join(self.dir, "src-%s.bin" % fmt_size(args.size))
        self.tree_bytes = None
        self.venv_name = "venv-" + os.path.basename(os.path.normpath(args.venv_src))
        self.home = os.path.join(self.dir, "home")
        r = max(args.ckpt_size, args.clients * args.shard_size)
        self.ckpt_src = {"rand": os.path.join(self.dir, "ckpt-rand-%s.bin" % fmt_size(r)),
                         "float": os.path.join(self.dir, "ckpt-float-%s.bin" % fmt_size(args.ckpt_size))}
        self.float_lz4 = None

    def prepare_dirs(self, unmount):
        """Make the directories; unmount(mnt) is called for stale mounts of a killed earlier run."""
        for d in (self.dir, self.export, self.logdir, os.path.join(self.dir, "mnt")):
            os.makedirs(d, exist_ok=True)
        for f in os.listdir(self.logdir):   # logs are per bench run
            os.unlink(os.path.join(self.logdir, f))
        # stale mounts from a killed earlier run
        for t in sorted(set(["podfs", "bindfs", "sshfs"] + os.listdir(os.path.join(self.dir, "mnt")))):
            m = os.path.join(self.dir, "mnt", t)
            os.makedirs(m, exist_ok=True)
            if mount_fstype(m) is not None:
                log("unmounting stale mount %s" % m)
                unmount(m)
    def prepare_source(self):
        size = self.a.size
        if os.path.exists(self.src) and os.path.getsize(self.src) == size:
            return
        log("generating %s of random data in %s" % (fmt_size(size), self.src))
        tmp = self.src + ".tmp"
        with open(tmp, "wb") as f:
            left = size
            while left > 0:
                n = min(left, 8 << 20)
                f.write(os.urandom(n))
                left -= n
        os.rename(tmp, self.src)

    def prepare_tree(self):
        tree = os.path.join(self.export, self.treename)
        marker = os.path.join(self.dir, self.treename + ".ok")
        if os.path.exists(marker) and os.path.isdir(tree):
            with open(marker) as f:
                self.tree_bytes = int(f.read().split()[0])
            return
        log("creating %s: %d dirs, %d files of 0-%d bytes" % (tree, self.ndirs, self.a.files, SMALL_MAX))
        if os.path.exists(tree):
            shutil.rmtree(tree)
        rng = random.Random(1234)
        blob = os.urandom(SMALL_MAX)
        total, left = 0, self.a.files
        for d in range(self.ndirs):
            dp = os.path.join(tree, "d%03d" % d)
            os.makedirs(dp)
            for i in range(min(FILES_PER_DIR, left)):
                n = rng.randint(0, SMALL_MAX)
                with open(os.path.join(dp, "f%03d.dat" % i), "wb") as f:
                    f.write(blob[:n])
                total += n
            left -= min(FILES_PER_DIR, left)
        os.sync()
        with open(marker, "w") as f:
            f.write("%d\n" % total)
        self.tree_bytes = total

    def prepare_space(self):
        """Fail clearly before generating anything if the scratch disk is short."""
        need, what = 0, []
        if ("venv" in self.a.only or "walk" in self.a.only) and not self.venv_ready():
            r = run(["du", "-sb", self.a.venv_src], timeout=300, check=False)
            try:
                n = int(r.stdout.split()[0])
            except (ValueError, IndexError):
                raise BenchError("--venv-src %s: cannot size it (du: %s)" % (self.a.venv_src, r.stderr.decode()[-200:]))
            need += n
            what.append("venv copy %.1f GiB" % (n / 2**30))
        if "checkpoint" in self.a.only:
            for kind, f in sorted(self.ckpt_src.items()):
                size = self.ckpt_src_size(kind)
                if not (os.path.exists(f) and os.path.getsize(f) == size):
                    need += size
                    what.append("%s source %s" % (kind, fmt_size(size)))
            work = max(self.a.ckpt_size, self.a.clients * self.a.shard_size)
            need += work
            what.append("checkpoint files in the export %s" % fmt_size(work))
        if not need:
            return
        free = shutil.disk_usage(self.dir).free
        margin = 1 << 30
        log("disk: need %.1f GiB (%s) + 1 GiB margin, %.1f GiB free in %s"
            % (need / 2**30, ", ".join(what), free / 2**30, self.dir))
        if free < need + margin:
            raise BenchError("not enough disk space in %s: need %.1f GiB (%s) + 1 GiB margin, only %.1f GiB free; "
                             "use smaller --ckpt-size/--shard-size or another --dir"
                             % (self.dir, need / 2**30, ", ".join(what), free / 2**30))

    def venv_ready(self):
        return (os.path.exists(os.path.join(self.dir, self.venv_name + ".ok"))
                and os.path.isdir(os.path.join(self.export, self.venv_name)))

    def prepare_venv(self):
        os.makedirs(self.home, exist_ok=True)
        if self.venv_ready():
            return
        src = os.path.normpath(self.a.venv_src)
        if not os.access(os.path.join(src, "bin", "python3"), os.X_OK):
            raise BenchError("--venv-src %s has no bin/python3" % src)
        dst = os.path.join(self.export, self.venv_name)
        tmp = dst + ".tmp"
        log("copying %s to %s (cp -a, once; reused by later runs)" % (src, dst))
        for d in (tmp, dst):
            if os.path.exists(d):
                shutil.rmtree(d)
        run(["cp", "-a", src, tmp], timeout=3600)
        os.rename(tmp, dst)
        safe_sync()
        with open(os.path.join(self.dir, self.venv_name + ".ok"), "w") as f:
            f.write("%s\n" % src)

    def ckpt_src_size(self, kind):
        if kind == "rand":
            return max(self.a.ckpt_size, self.a.clients * self.a.shard_size)
        return self.a.ckpt_size

    def prepare_ckpt(self):
        for kind in ("rand", "float"):
            f, size = self.ckpt_src[kind], self.ckpt_src_size(kind)
            if os.path.exists(f) and os.path.getsize(f) == size:
                continue
            log("generating %s of %s data in %s" % (fmt_size(size), "random" if kind == "rand" else
                                                    "compressible float32", f))
            tmp = f + ".tmp"
            with open(tmp, "wb") as out:
                if kind == "rand":
                    left = size
                    while left > 0:
                        n = min(left, 8 << 20)
                        out.write(os.urandom(n))
                        left -= n
                else:
                    rng = random.Random(4321)
                    blocks = [float_block(rng) for _ in range(FLOAT_NBLOCKS)]
                    for i in range(size // FLOAT_BLOCK):
                        out.write(blocks[rng.randrange(FLOAT_NBLOCKS)])
            os.rename(tmp, f)
        if shutil.which("lz4"):
            # what LZ4 (fast mode) makes of the compressible source: the best podfs can expect
            n = min(self.a.ckpt_size, 64 << 20)
            r = run(["sh", "-c", 'head -c %d "$1" | lz4 -1 -c | wc -c' % n, "sh", self.ckpt_src["float"]],
                    timeout=120, check=False)
            try:
                self.float_lz4 = int(r.stdout) / n
            except ValueError:
                pass

    def cleanup_files(self):
        # per-target files live in the export; remove them directly (mounts are gone)
        for name in TARGET_ORDER:
            for p in (os.path.join(self.export, "bench-%s.dat" % name),
                      os.path.join(self.export, "create-%s" % name)):
                if os.path.isdir(p):
                    shutil.rmtree(p, ignore_errors=True)
                elif os.path.exists(p):
                    os.unlink(p)
        try:
            for n in os.listdir(self.export):
                if n.startswith("ckpt-") and (n.endswith(".dat") or n.endswith(".dat.tmp")):
                    os.unlink(os.path.join(self.export, n))
        except OSError:
            pass
        for n in os.listdir(self.dir):   # podfs persistent caches of the venv workload
            if n.startswith("pcache"):
                shutil.rmtree(os.path.join(self.dir, n), ignore_errors=True)
