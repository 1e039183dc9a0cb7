"""The file workloads: sequential write and read of one large file (seq-write,
seq-read), random 4 KiB reads of it (randread), a copy of it beside itself
(copy), walking the small-file tree (find, stat), and creating and deleting
many small files (create)."""

import os
import shutil
import subprocess
import sys
import time

from ..common import BenchError, drop_caches, log, run, safe_sync, timed
from .base import Workload

STAT_SCRIPT = r"""
import os, sys, time
t = time.perf_counter()
n = 0; tot = 0
for root, dirs, files in os.walk(sys.argv[1]):
    for name in dirs + files:
        st = os.lstat(os.path.join(root, name))
        n += 1
        if name not in dirs:
            tot += st.st_size
print(time.perf_counter() - t, n, tot)
"""

# randread: seconds of random 4 KiB reads per round
RANDREAD_SECS = 5

DONTNEED_SCRIPT = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)
"""

CREATE_SCRIPT = r"""
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
data = os.urandom(1024)
t = time.perf_counter()
os.mkdir(d)
for i in range(n):
    with open("%s/f%05d" % (d, i), "wb") as f:
        f.write(data)
print(time.perf_counter() - t)
"""

DELETE_SCRIPT = r"""
import os, sys, time
d = sys.argv[1]
t = time.perf_counter()
for name in os.listdir(d):
    os.unlink(os.path.join(d, name))
os.rmdir(d)
print(time.perf_counter() - t)
"""


class Files(Workload):
    """seq-write, seq-read, randread, copy, find, stat and create (with delete)."""

    def io_timeout(self):
        return max(120.0, self.a.size / (2 << 20))  # at least 2 MiB/s

    def seq_file(self, t):
        return os.path.join(t.path, "bench-%s.dat" % t.name)

    def seq_write(self, t, rnd):
        f = self.seq_file(t)
        run(["rm", "-f", f], timeout=60)
        run(["cat", self.scratch.src], timeout=300, stdout=subprocess.DEVNULL)   # source in page cache
        safe_sync()

        def go():
            s = timed(["dd", "if=" + self.scratch.src, "of=" + f, "bs=1M", "conv=fsync", "status=none"],
                      self.io_timeout())
            return self.a.size / s / 1e6
        self.results.measure("seq-write", t, go)
        if rnd == 0:
            self.check_on_export(t, "seq-write", f, "data written")

    def check_on_export(self, t, row, f, what):
        """Untimed: did the file f made through t land on the server's
        disk (its export) as the source's bytes? Flags row if not."""
        if t.alive():
            return
        local = os.path.join(self.scratch.export, os.path.basename(f))
        r = run(["cmp", "-s", self.scratch.src, local], timeout=self.io_timeout(), check=False)
        if r.returncode != 0:
            self.results.flag(t, row, "%s via %s differs from the source (cmp %s)"
                              % (what, t.name, local))

    def have_seq_file(self, t):
        """The seq-write file on t (copied into its export when seq-write
        did not run). Returns t.alive()'s reason if t is down, else None."""
        f = self.seq_file(t)
        why = t.alive()
        if not why:
            try:
                r = run(["stat", "-c", "%s", f], timeout=60, check=False)
                if r.returncode != 0 or int(r.stdout or b"0") != self.a.size:
                    log("  (%s: no %s-byte file from seq-write, copying one in locally)" % (t.name, self.a.size))
                    local = os.path.join(self.scratch.export, os.path.basename(f))
                    shutil.copyfile(self.scratch.src, local)
                    safe_sync()
            except (BenchError, ValueError):
                pass
        return why

    def seq_read(self, t, rnd):
        f = self.seq_file(t)
        why = self.have_seq_file(t)
        if rnd == 0 and not why:
            drop_caches()
            r = run(["cmp", "-s", self.scratch.src, f], timeout=self.io_timeout(), check=False)
            if r.returncode != 0:
                self.results.flag(t, "seq-read", "data read back via %s differs from the source (cmp %s)"
                                  % (t.name, f))

        def go():
            s = timed(["dd", "if=" + f, "of=/dev/null", "bs=1M", "status=none"], self.io_timeout())
            return self.a.size / s / 1e6
        self.targets.make_cold(t)
        self.results.measure("seq-read-cold", t, go)
        self.results.measure("seq-read-warm", t, go)

    def randread(self, t, rnd):
        """fio: 4 KiB reads at random places of the seq file, one at a
        time (psync), for RANDREAD_SECS, each place once. The file is read
        whole first, so that the server side's page cache holds it (a pod's
        coordinator, whose memory holds what the hosts read); then the
        target's own page cache of it is dropped (POSIX_FADV_DONTNEED), so
        that every read reaches the FUSE daemon: a round trip to podfsd,
        or sftp-server, for the network targets. Local disk keeps its page
        cache (there is only one): its row is the ceiling, not a peer."""
        f = self.seq_file(t)
        why = self.have_seq_file(t)
        if not why:
            run(["cat", f], timeout=self.io_timeout(), stdout=subprocess.DEVNULL)

        def go():
            if t.name != "local":
                run([sys.executable, "-c", DONTNEED_SCRIPT, f], timeout=60)
            r = run(["fio", "--name=randread", "--filename=" + f, "--rw=randread", "--bs=4k",
                     "--size=%d" % self.a.size, "--runtime=%d" % RANDREAD_SECS, "--time_based",
                     "--ioengine=psync", "--numjobs=1", "--output-format=terse",
                     "--terse-version=3"], timeout=RANDREAD_SECS + 120)
            fields = r.stdout.decode(errors="replace").strip().splitlines()[-1].split(";")
            if len(fields) < 9 or fields[4] != "0":
                raise BenchError("fio failed: %s" % r.stdout[-300:])
            return float(fields[7])  # read IOPS (terse v3)
        self.results.measure("randread-4k", t, go)

    def copy(self, t, rnd):
        """cp of the seq file to a new name beside it, from cold caches,
        and its fsync: coreutils' cp uses copy_file_range(2), which podfs
        runs on the coordinator (COPY_RANGE) and the other FUSE targets
        turn into reads and writes through the kernel."""
        f = self.seq_file(t)
        dst = f + ".copy"
        why = self.have_seq_file(t)
        if not why:
            run(["rm", "-f", dst], timeout=60)

        def go():
            s = timed(["sh", "-c", 'cp "$1" "$2" && sync "$2"', "cp", f, dst], self.io_timeout())
            return self.a.size / s / 1e6
        self.targets.make_cold(t)
        self.results.measure("copy", t, go)
        if rnd == 0:
            self.check_on_export(t, "copy", dst, "the copy made")
        if not t.alive():
            run(["rm", "-f", dst], timeout=60)

    def find(self, t, rnd):
        tree = os.path.join(t.path, self.scratch.treename)
        want = 1 + self.scratch.ndirs + self.a.files

        def go():
            t0 = time.monotonic()
            r = run(["find", tree], timeout=300)
            s = time.monotonic() - t0
            n = r.stdout.count(b"\n")
            if n != want:
                raise BenchError("find listed %d entries, expected %d" % (n, want))
            return s
        self.targets.make_cold(t)
        self.results.measure("find-cold", t, go)
        self.results.measure("find-warm", t, go)

    def stat(self, t, rnd):
        tree = os.path.join(t.path, self.scratch.treename)
        want = self.scratch.ndirs + self.a.files

        def go():
            r = run([sys.executable, "-c", STAT_SCRIPT, tree], timeout=300)
            s, n, tot = r.stdout.split()
            if int(n) != want or int(tot) != self.scratch.tree_bytes:
                raise BenchError("stat walk saw %s entries / %s bytes, expected %d / %d"
                                 % (n.decode(), tot.decode(), want, self.scratch.tree_bytes))
            return float(s)
        self.targets.make_cold(t)
        self.results.measure("stat-cold", t, go)
        self.results.measure("stat-warm", t, go)

    def create(self, t, rnd):
        d = os.path.join(t.path, "create-%s" % t.name)
        if not t.alive():
            try:
                run(["rm", "-rf", d], timeout=120)
                safe_sync()
            except BenchError:
                pass

        def create():
            r = run([sys.executable, "-c", CREATE_SCRIPT, d, str(self.a.create_files)], timeout=300)
            return float(r.stdout)

        def delete():
            r = run([sys.executable, "-c", DELETE_SCRIPT, d], timeout=300)
            return float(r.stdout)
        if self.results.measure("create", t, create) is not None:
            self.results.measure("delete", t, delete)
        else:
            self.results.record("delete", t, {"error": "create failed"})

