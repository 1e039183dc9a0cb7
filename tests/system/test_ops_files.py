"""test_ops_files.py: file contents through one podfs mount: create and
open, read and write, sync and flush, truncate, allocate and seek, and
open files that outlive their names.

Each test works through the mount (m) and checks the result on the
daemon's export directory (env.export), which is the ground truth. Names
and attributes are in test_ops_names.py.
"""

import errno
import mmap
import os
import stat
import subprocess
import time

import pytest

from helpers import (EXPORT_AT_ONCE, PYTHON, current_umask, errno_of, podfsd_status, pread_all,
                     read_file, write_file)
from syscalls import FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, cached_pages, fallocate


# --- open / create ---------------------------------------------------------------

def test_open_by_the_daemon_drops_stale_pages(env, monkeypatch):
    """An open that goes to the daemon drops the kernel's cached pages
    when the file changed, also when no push said so and the kernel
    cannot tell: the daemon watches nothing (PODFSD_WATCH=none), and a
    process beside podfs rewrites the file in place with the same size
    and puts its mtime back (only ctime moves). A read-write open always
    asks the daemon; its reads must see the new bytes."""
    if os.environ.get("PODFS_TEST_DAEMON"):
        pytest.skip("starts its own daemon")
    monkeypatch.setenv("PODFSD_WATCH", "none")
    d = env.start_daemon()
    m = env.mount(d)
    old, new = b"old-bytes-" * 1000, b"NEW-BYTES-" * 1000
    write_file(env.export / "f", old)
    assert read_file(m / "f") == old  # the kernel caches the pages
    st = os.stat(env.export / "f")
    time.sleep(0.05)  # past the filesystem's timestamp tick: ctime moves
    with open(env.export / "f", "r+b") as f:
        f.write(new)
    os.utime(env.export / "f", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(env.export / "f").st_ctime_ns != st.st_ctime_ns
    with open(m / "f", "r+b") as f:
        assert f.read() == new, "stale pages kept by an open the daemon answered"


def test_create_excl(env, m):
    fd = os.open(m / "f", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o640)
    os.write(fd, b"abc")
    os.close(fd)
    assert stat.S_IMODE(os.stat(env.export / "f").st_mode) == 0o640 & ~current_umask()
    assert errno_of(os.open, m / "f", os.O_CREAT | os.O_EXCL | os.O_WRONLY) == errno.EEXIST
    assert read_file(env.export / "f") == b"abc"
    # O_EXCL on a name that exists only on the server side.
    write_file(env.export / "g", b"")
    assert errno_of(os.open, m / "g", os.O_CREAT | os.O_EXCL | os.O_WRONLY) == errno.EEXIST
    assert errno_of(os.open, m / "nope", os.O_RDONLY) == errno.ENOENT


def test_create_mode_and_umask(env, m):
    old = os.umask(0o027)
    try:
        fd = os.open(m / "f", os.O_CREAT | os.O_WRONLY, 0o777)
        os.close(fd)
        os.mkdir(m / "d", 0o777)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(env.export / "f").st_mode) == 0o750
    assert stat.S_IMODE(os.stat(env.export / "d").st_mode) == 0o750


def test_o_trunc(env, m):
    write_file(m / "f", b"0123456789")
    fd = os.open(m / "f", os.O_WRONLY | os.O_TRUNC)
    assert os.fstat(fd).st_size == 0
    os.write(fd, b"ab")
    os.close(fd)
    assert read_file(m / "f") == b"ab"
    assert read_file(env.export / "f") == b"ab"


APPENDER = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
tag = sys.argv[2]
for i in range(300):
    rec = f"{tag}{i:06d}".ljust(63, ".") + "\n"
    assert os.write(fd, rec.encode()) == 64
os.close(fd)
"""


def test_o_append_two_appenders(env, m):
    write_file(m / "log", b"")
    ps = [subprocess.Popen([PYTHON, "-c", APPENDER, str(m / "log"), tag]) for tag in "AB"]
    for p in ps:
        assert p.wait(timeout=120) == 0
    for path in (m / "log", env.export / "log"):
        data = read_file(path)
        assert len(data) == 600 * 64
        recs = [data[i:i + 64] for i in range(0, len(data), 64)]
        assert all(r.endswith(b"\n") for r in recs)
        assert sorted(r[:7] for r in recs) == sorted(
            f"{t}{i:06d}".encode() for t in "AB" for i in range(300))


def test_o_append_single_fd(env, m):
    write_file(m / "f", b"start")
    with open(m / "f", "ab") as f:
        f.write(b"-1")
        f.seek(0)
        f.write(b"-2")  # O_APPEND ignores the seek
    assert read_file(env.export / "f") == b"start-1-2"


# --- read / write ----------------------------------------------------------------

def test_read_write_offsets(env, m):
    p = m / "f"
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        big = os.urandom(3 * 1024 * 1024 + 17)  # one write larger than 1 MiB
        assert os.pwrite(fd, big, 0) == len(big)
        assert os.pwrite(fd, b"XYZ", 4095) == 3
        assert os.pread(fd, 10, 4090) == big[4090:4095] + b"XYZ" + big[4098:4100]
        mid = os.urandom(1024 * 1024 + 1)
        assert os.pwrite(fd, mid, 1000001) == len(mid)
        want = bytearray(big)
        want[4095:4098] = b"XYZ"
        want[1000001:1000001 + len(mid)] = mid
        got = os.pread(fd, len(want) + 100, 0)
        assert got == bytes(want)
        assert os.pread(fd, 100, len(want) + 10) == b""
        for off in (0, 1, 4095, 4096, 131071, 1 << 20, (1 << 20) + 1, len(want) - 3):
            assert os.pread(fd, 70000, off) == bytes(want[off:off + 70000]), off
        os.fsync(fd)
    finally:
        os.close(fd)
    assert read_file(env.export / "f") == bytes(want)


def test_sparse_file(env, m):
    p = m / "sparse"
    off = 64 * 1024 * 1024
    with open(p, "wb") as f:
        f.write(b"head")
        f.seek(off)
        f.write(b"tail")
    assert os.stat(p).st_size == off + 4
    xs = os.stat(env.export / "sparse")
    assert xs.st_size == off + 4
    assert xs.st_blocks * 512 < 1024 * 1024, "the hole was written out on the server"
    with open(p, "rb") as f:
        assert f.read(4) == b"head"
        f.seek(off - 5)
        assert f.read() == bytes(5) + b"tail"
        f.seek(12345678)
        assert f.read(100000) == bytes(100000)


@EXPORT_AT_ONCE
def test_write_close_visible_on_server(env, m):
    """Close-to-open: once close() returns the data is on the server."""
    for size in (0, 1, 4095, 4096, 1024 * 1024 + 1):
        data = os.urandom(size)
        write_file(m / f"f{size}", data)
        assert read_file(env.export / f"f{size}") == data, size


def test_fsync_fdatasync(env, m):
    fd = os.open(m / "f", os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        data = os.urandom(2 * 1024 * 1024 + 5)
        os.write(fd, data)
        os.fsync(fd)
        assert read_file(env.export / "f") == data
        os.pwrite(fd, b"fdatasync", 100)
        os.fdatasync(fd)
        assert read_file(env.export / "f")[100:109] == b"fdatasync"
        fd2 = os.open(m, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd2)  # fsync on a directory succeeds
        finally:
            os.close(fd2)
    finally:
        os.close(fd)


def test_flush_on_close_dup(env, m):
    fd = os.open(m / "f", os.O_CREAT | os.O_WRONLY, 0o644)
    fd2 = os.dup(fd)
    os.write(fd, b"one")
    os.close(fd)  # flush while another descriptor remains
    os.write(fd2, b"two")
    os.close(fd2)
    assert read_file(env.export / "f") == b"onetwo"


def test_truncate_up_down(env, m):
    data = os.urandom(100000)
    write_file(m / "f", data)
    os.truncate(m / "f", 1000)
    assert os.stat(m / "f").st_size == 1000
    assert read_file(m / "f") == data[:1000]
    assert read_file(env.export / "f") == data[:1000]
    os.truncate(m / "f", 5 * 1024 * 1024)
    assert os.stat(m / "f").st_size == 5 * 1024 * 1024
    got = read_file(m / "f")
    assert got[:1000] == data[:1000] and got[1000:] == bytes(len(got) - 1000)
    # ftruncate on an open fd, then write after the new end.
    with open(m / "f", "r+b") as f:
        os.ftruncate(f.fileno(), 10)
        f.seek(20)
        f.write(b"Z")
    assert read_file(m / "f") == data[:10] + bytes(10) + b"Z"
    assert read_file(env.export / "f") == data[:10] + bytes(10) + b"Z"
    os.truncate(m / "f", 0)
    assert os.stat(env.export / "f").st_size == 0


def test_write_updates_mtime(env, m):
    write_file(m / "f", b"x")
    os.utime(m / "f", (1000000000, 1000000000))
    with open(m / "f", "ab") as f:
        f.write(b"more")
    st = os.stat(m / "f")
    assert st.st_size == 5
    assert st.st_mtime > 1000000000
    assert os.stat(env.export / "f").st_mtime > 1000000000


# --- open files outliving their names --------------------------------------------

def test_unlink_open_file_still_readable(env, m):
    write_file(m / "f", b"still here")
    fd = os.open(m / "f", os.O_RDWR)
    try:
        os.unlink(m / "f")
        assert not os.path.exists(m / "f")
        assert os.pread(fd, 100, 0) == b"still here"
        os.pwrite(fd, b"STILL", 0)
        assert os.pread(fd, 100, 0) == b"STILL here"
    finally:
        os.close(fd)
    assert os.listdir(m.path) == []


@pytest.mark.parametrize("first", ["", "fsync", "fchmod"])
@pytest.mark.parametrize("how", ["unlink", "rename-over"])
def test_file_opened_unread_survives_its_removal(env, m, how, first):
    """A file this host opened read-only without asking the daemon (the
    directory's listing said it may read it) and has not read yet stays
    readable, whole, after this host removes its last name, as on a local
    disk: the daemon learns of the open before the name goes, instead of
    failing the first READ with ESTALE. Also after an fsync or fchmod
    through it, whose requests do not open the file on the daemon (they
    once made the client believe they had: fstat and reads then failed
    with ESTALE)."""
    data = os.urandom(3 << 20)
    os.mkdir(env.export / "d")
    write_file(env.export / "d" / "f", data)
    write_file(env.export / "d" / "new", b"new")
    assert os.stat(m / "d" / "f").st_size == len(data)  # from the listing
    fd = os.open(m / "d" / "f", os.O_RDONLY)
    try:
        if first == "fsync":
            os.fsync(fd)
        elif first == "fchmod":
            os.fchmod(fd, 0o640)
        if how == "unlink":
            os.unlink(m / "d" / "f")
            assert not os.path.exists(env.export / "d" / "f")
        else:
            os.rename(m / "d" / "new", m / "d" / "f")
            assert read_file(env.export / "d" / "f") == b"new"
        assert pread_all(fd, len(data)) == data
        assert os.fstat(fd).st_size == len(data)
    finally:
        os.close(fd)


# --- fallocate / seek ------------------------------------------------------------

def test_posix_fallocate(env, m):
    fd = os.open(m / "f", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.posix_fallocate(fd, 0, 3 * 1024 * 1024)
        assert os.fstat(fd).st_size == 3 * 1024 * 1024
        xs = os.stat(env.export / "f")
        assert xs.st_size == 3 * 1024 * 1024
        assert xs.st_blocks * 512 >= 3 * 1024 * 1024
        assert os.pread(fd, 4096, 1024 * 1024) == bytes(4096)
    finally:
        os.close(fd)


def test_punch_hole(env, m):
    probe = env.root / "probe"
    with open(probe, "wb") as f:
        f.write(b"a" * 65536)
    try:
        with open(probe, "r+b") as f:
            fallocate(f.fileno(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096)
    except OSError as e:
        if e.errno == errno.EOPNOTSUPP:
            pytest.skip("the export's filesystem cannot punch holes")
        raise
    data = os.urandom(256 * 1024)
    write_file(m / "f", data)
    fd = os.open(m / "f", os.O_RDWR)
    try:
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 65536, 65536)
        assert os.fstat(fd).st_size == len(data)
        want = data[:65536] + bytes(65536) + data[131072:]
        assert os.pread(fd, len(data), 0) == want
    finally:
        os.close(fd)
    assert read_file(env.export / "f") == want
    assert read_file(m / "f") == want


def test_seek_data_hole(env, m):
    p = m / "f"
    mib = 1024 * 1024
    with open(p, "wb") as f:
        f.write(b"d" * 4096)
        f.seek(4 * mib)
        f.write(b"e" * 4096)
        f.truncate(8 * mib)
        f.flush()
        os.fsync(f.fileno())
    x = os.open(env.export / "f", os.O_RDONLY)
    fd = os.open(p, os.O_RDONLY)
    try:
        for off in (0, 100, 4096, 8192, mib, 4 * mib, 4 * mib + 10):
            for whence in (os.SEEK_DATA, os.SEEK_HOLE):
                want = errno_or(os.lseek, x, off, whence)
                got = errno_or(os.lseek, fd, off, whence)
                assert got == want, (off, whence)
        assert errno_or(os.lseek, fd, 8 * mib + 1, os.SEEK_DATA) == ("err", errno.ENXIO)
        assert os.lseek(fd, 0, os.SEEK_END) == 8 * mib
    finally:
        os.close(fd)
        os.close(x)


def errno_or(fn, *a):
    try:
        return fn(*a)
    except OSError as e:
        return ("err", e.errno)


def test_small_cached_reads_are_answered_on_the_loop(env, daemon, m):
    """A READ of 32 KiB or less whose data the coordinator's page cache
    holds is answered by podfsd's event loop itself (RWF_NOWAIT), without
    a worker thread (workers.c, workers_try_on_loop): podfsd status counts it in
    loop_reads. One whose data is not cached, or a larger one, goes to a
    worker as before, and so does one that would move the file's access
    time (on a relatime export: the file changed since it was last read;
    on a strictatime one: every read), or one from a file system that
    cannot be asked not to wait. Every byte is the file's either way."""
    if os.environ.get("PODFS_TEST_DAEMON"):
        pytest.skip("reads the daemon's own status")
    flags = os.statvfs(env.export).f_flag
    data = os.urandom(1 << 20)
    write_file(env.export / "f", data)
    efd = os.open(env.export / "f", os.O_RDONLY)
    # None on the loop where every read moves the access time
    # (strictatime), or where reads cannot be asked not to wait (tmpfs
    # here: EOPNOTSUPP).
    try:
        os.preadv(efd, [bytearray(1)], 0, os.RWF_NOWAIT)
        strict = not flags & (os.ST_NOATIME | os.ST_RELATIME)
    except OSError as e:
        strict = e.errno == errno.EOPNOTSUPP
        if e.errno not in (errno.EOPNOTSUPP, errno.EAGAIN):
            raise
    buf = mmap.mmap(-1, 64 * 1024)  # page-aligned, for O_DIRECT
    fd = os.open(m / "f", os.O_RDONLY | os.O_DIRECT)

    def loop_reads():
        return int(podfsd_status(daemon)[0]["loop_reads"])

    def read(off, n):
        view = memoryview(buf)[:n]
        assert os.preadv(fd, [view], off) == n
        assert bytes(view) == data[off:off + n], off
        view.release()

    def on_loop(k):  # k more reads on the loop, or none (strict)
        return n0 + (0 if strict else k)

    try:
        read(0, 4096)  # the file's fid is open on the daemon from here on
        n0 = loop_reads()
        for off in (4096 * 7, 512 * 1024, 1024 * 1024 - 32 * 1024):
            read(off, 32 * 1024 if off > 512 * 1024 else 4096)
        assert loop_reads() == on_loop(3)
        # Out of the page cache: read by a worker, which brings it back.
        # (The kernel may keep a page through one DONTNEED, e.g. one a
        # CPU's LRU batch holds: asked again until it is gone.)
        os.fsync(efd)
        for _ in range(50):
            os.posix_fadvise(efd, 0, 0, os.POSIX_FADV_DONTNEED)
            if not cached_pages(efd, 1 << 20)[300 * 1024 // 4096]:
                break
            time.sleep(0.02)
        assert not cached_pages(efd, 1 << 20)[300 * 1024 // 4096], "the kernel kept the page"
        read(300 * 1024, 4096)
        assert loop_reads() == on_loop(3)
        read(300 * 1024, 4096)
        assert loop_reads() == on_loop(4)
        # Past 32 KiB: a worker's.
        read(0, 64 * 1024)
        assert loop_reads() == on_loop(4)
        # The access time older than the file's change: with relatime,
        # the next read moves it, and is a worker's (the inode's write
        # may wait for the journal); the one after is the loop's.
        os.utime(env.export / "f", ns=(10**9, 2 * 10**9))
        time.sleep(0.05)  # the worker's atime past the ctime utime set
        read(8192, 4096)
        assert loop_reads() == on_loop(4 if flags & os.ST_RELATIME else 5)
        read(8192, 4096)
        assert loop_reads() == on_loop(5 if flags & os.ST_RELATIME else 6)
    finally:
        os.close(fd)
        os.close(efd)
        buf.close()
