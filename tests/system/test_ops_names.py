"""test_ops_names.py: names and attributes through one podfs mount:
lookup, getattr, setattr, listings, directories, rename, links, special
files, statfs, xattrs, and a read-only export.

Each test works through the mount (m) and checks the result on the
daemon's export directory (env.export), which is the ground truth. File
contents are in test_ops_files.py, locks in test_locks.py.
"""

import errno
import os
import stat
import subprocess
import time

import pytest

from helpers import EXPORT_AT_ONCE, current_umask, errno_of, read_file, write_file
from syscalls import (IN_DELETE, IN_MOVED_FROM, IN_MOVED_TO, RENAME_EXCHANGE, RENAME_NOREPLACE,
                      UTIME_NOW, UTIME_OMIT, inotify_events, inotify_watch, renameat2, utimensat)


# --- lookup / getattr ------------------------------------------------------------

@EXPORT_AT_ONCE
def test_lookup_getattr(env, m):
    write_file(m / "f", b"hello")
    os.mkdir(m / "d")
    st = os.stat(m / "f")
    xs = os.stat(env.export / "f")
    assert stat.S_ISREG(st.st_mode)
    assert st.st_size == 5
    assert stat.S_IMODE(st.st_mode) == stat.S_IMODE(xs.st_mode)
    assert (st.st_uid, st.st_gid) == (xs.st_uid, xs.st_gid) == (0, 0)
    assert st.st_nlink == 1
    assert st.st_mtime_ns == xs.st_mtime_ns
    assert stat.S_ISDIR(os.stat(m / "d").st_mode)
    assert os.stat(m / "d").st_nlink == 2
    assert errno_of(os.stat, m / "missing") == errno.ENOENT
    assert errno_of(os.stat, m / "f" / "x") == errno.ENOTDIR
    # A negative lookup must not stick once the name exists.
    write_file(m / "missing", b"")
    assert os.path.exists(m / "missing")
    # Long names: 255 bytes work, 256 do not.
    write_file(m / ("n" * 255), b"x")
    assert os.path.exists(env.export / ("n" * 255))
    assert errno_of(os.stat, m / ("n" * 256)) == errno.ENAMETOOLONG


def test_root_attrs(env, m):
    st = os.stat(m.path)
    assert stat.S_ISDIR(st.st_mode)
    xs = os.stat(env.export)
    assert stat.S_IMODE(st.st_mode) == stat.S_IMODE(xs.st_mode)


# --- setattr ---------------------------------------------------------------------

def test_chmod(env, m):
    write_file(m / "f", b"x")
    for mode in (0o600, 0o755, 0o4711, 0o1777, 0o000):
        os.chmod(m / "f", mode)
        assert stat.S_IMODE(os.stat(m / "f").st_mode) == mode
        assert stat.S_IMODE(os.stat(env.export / "f").st_mode) == mode


def test_chown_as_root(env, m):
    write_file(m / "f", b"x")
    os.chown(m / "f", 1234, 5678)
    assert (os.stat(m / "f").st_uid, os.stat(m / "f").st_gid) == (1234, 5678)
    xs = os.stat(env.export / "f")
    assert (xs.st_uid, xs.st_gid) == (1234, 5678)
    os.chown(m / "f", -1, 42)
    xs = os.stat(env.export / "f")
    assert (xs.st_uid, xs.st_gid) == (1234, 42)
    os.symlink("target", m / "l")
    os.chown(m / "l", 77, 88, follow_symlinks=False)
    xs = os.lstat(env.export / "l")
    assert (xs.st_uid, xs.st_gid) == (77, 88)


def test_utimes(env, m):
    p = m / "f"
    write_file(p, b"x")
    os.utime(p, (1000000000, 1200000000))
    st = os.stat(p)
    assert (st.st_atime_ns, st.st_mtime_ns) == (1000000000 * 10**9, 1200000000 * 10**9)
    xs = os.stat(env.export / "f")
    assert (xs.st_atime_ns, xs.st_mtime_ns) == (1000000000 * 10**9, 1200000000 * 10**9)
    # Nanoseconds survive the round trip.
    os.utime(p, ns=(1500000000123456789, 1600000000987654321))
    st = os.stat(p)
    assert (st.st_atime_ns, st.st_mtime_ns) == (1500000000123456789, 1600000000987654321)
    assert os.stat(env.export / "f").st_mtime_ns == 1600000000987654321
    # utime(None) = UTIME_NOW for both.
    before = time.time_ns() - 2 * 10**9
    os.utime(p, None)
    st = os.stat(p)
    assert st.st_mtime_ns >= before and st.st_atime_ns >= before
    # UTIME_OMIT keeps one time, sets the other.
    os.utime(p, ns=(1500000000123456789, 1600000000987654321))
    utimensat(p, UTIME_OMIT, (1700000000, 5))
    st = os.stat(p)
    assert st.st_atime_ns == 1500000000123456789
    assert st.st_mtime_ns == 1700000000 * 10**9 + 5
    utimensat(p, (1100000000, 7), UTIME_OMIT)
    st = os.stat(p)
    assert st.st_atime_ns == 1100000000 * 10**9 + 7
    assert st.st_mtime_ns == 1700000000 * 10**9 + 5
    xs = os.stat(env.export / "f")
    assert (xs.st_atime_ns, xs.st_mtime_ns) == (1100000000 * 10**9 + 7,
                                                1700000000 * 10**9 + 5)
    utimensat(p, UTIME_OMIT, UTIME_NOW)
    st = os.stat(p)
    assert st.st_atime_ns == 1100000000 * 10**9 + 7
    assert st.st_mtime_ns >= before


# --- readdir ---------------------------------------------------------------------

@pytest.mark.timeout(120)
def test_readdir_3000(env, m):
    d = m / "big"
    os.mkdir(d)
    expect = {}
    for i in range(3000):
        if i % 60 == 0:
            n = f"dir{i:05d}"
            os.mkdir(d / n)
            expect[n] = "d"
        elif i % 60 == 1:
            n = f"lnk{i:05d}"
            os.symlink(f"target-{i}", d / n)
            expect[n] = "l"
        else:
            n = f"file{i:05d}-" + "x" * (i % 40)
            with open(d / n, "wb") as f:
                f.write(b"y" * (i % 300))
            expect[n] = "f"
    names = {}
    with os.scandir(d) as it:
        for e in it:
            t = "d" if e.is_dir(follow_symlinks=False) else \
                "l" if e.is_symlink() else "f" if e.is_file(follow_symlinks=False) else "?"
            names[e.name] = t
            st = e.stat(follow_symlinks=False)
            xs = os.lstat(env.export / "big" / e.name)
            assert stat.S_IFMT(st.st_mode) == stat.S_IFMT(xs.st_mode), e.name
            assert stat.S_IMODE(st.st_mode) == stat.S_IMODE(xs.st_mode), e.name
            assert st.st_size == xs.st_size, e.name
            assert st.st_mtime_ns == xs.st_mtime_ns, e.name
            assert st.st_nlink == xs.st_nlink, e.name
    assert names == expect
    assert sorted(os.listdir(d)) == sorted(os.listdir(env.export / "big"))
    assert os.stat(d).st_nlink == 2 + 50
    # Entries created directly in the export are seen by a fresh listing.
    write_file(env.export / "big" / "server-side", b"")
    deadline = time.monotonic() + 5
    while "server-side" not in os.listdir(d):
        assert time.monotonic() < deadline, "server-side entry not listed within 5 s"
        time.sleep(0.05)


def test_server_side_changes_noticed(env, m):
    """Changes made directly in the export (on the coordinator) show up."""
    write_file(m / "f", b"version one")
    assert read_file(m / "f") == b"version one"
    assert not os.path.exists(m / "direct")
    write_file(env.export / "f", b"version two, longer")
    write_file(env.export / "direct", b"made on the server")
    deadline = time.monotonic() + 5
    while True:
        try:
            if read_file(m / "f") == b"version two, longer" and \
                    read_file(m / "direct") == b"made on the server":
                break
        except OSError:
            pass
        assert time.monotonic() < deadline, "server-side changes not seen within 5 s"
        time.sleep(0.05)
    os.unlink(env.export / "direct")
    deadline = time.monotonic() + 5
    while os.path.exists(m / "direct"):
        assert time.monotonic() < deadline, "server-side unlink not seen within 5 s"
        time.sleep(0.05)


def test_readdir_empty_and_dots(m):
    os.mkdir(m / "e")
    assert os.listdir(m / "e") == []
    fd = os.open(m / "e", os.O_RDONLY | os.O_DIRECTORY)
    try:
        # getdents through the kernel includes . and ..
        out = subprocess.run(["ls", "-a", str(m / "e")], stdout=subprocess.PIPE, text=True,
                             timeout=30).stdout.split()
        assert sorted(out) == [".", ".."]
    finally:
        os.close(fd)


# --- directories -----------------------------------------------------------------

def test_mkdir_rmdir(env, m):
    os.mkdir(m / "d", 0o750)
    assert stat.S_ISDIR(os.stat(env.export / "d").st_mode)
    assert stat.S_IMODE(os.stat(env.export / "d").st_mode) == 0o750 & ~current_umask()
    assert errno_of(os.mkdir, m / "d") == errno.EEXIST
    os.mkdir(m / "d" / "sub")
    write_file(m / "d" / "sub" / "f", b"x")
    assert os.stat(m / "d").st_nlink == 3
    assert errno_of(os.rmdir, m / "d") == errno.ENOTEMPTY
    assert errno_of(os.rmdir, m / "d" / "sub" / "f") == errno.ENOTDIR
    os.unlink(m / "d" / "sub" / "f")
    os.rmdir(m / "d" / "sub")
    os.rmdir(m / "d")
    assert not os.path.exists(env.export / "d")
    assert errno_of(os.rmdir, m / "d") == errno.ENOENT
    assert not os.path.exists(m / "d")


def test_unlink(env, m):
    write_file(m / "f", b"data")
    os.unlink(m / "f")
    assert not os.path.exists(m / "f")
    assert not os.path.exists(env.export / "f")
    assert errno_of(os.unlink, m / "f") == errno.ENOENT
    os.mkdir(m / "d")
    assert errno_of(os.unlink, m / "d") in (errno.EISDIR, errno.EPERM)


# --- rename ----------------------------------------------------------------------

def test_rename(env, m):
    write_file(m / "a", b"A")
    os.rename(m / "a", m / "b")
    assert not os.path.exists(m / "a") and read_file(m / "b") == b"A"
    assert not os.path.exists(env.export / "a") and read_file(env.export / "b") == b"A"
    # Across directories.
    os.mkdir(m / "d")
    os.rename(m / "b", m / "d" / "c")
    assert read_file(env.export / "d" / "c") == b"A"
    # A directory.
    os.rename(m / "d", m / "e")
    assert read_file(m / "e" / "c") == b"A"
    assert errno_of(os.rename, m / "missing", m / "x") == errno.ENOENT
    # A directory into itself.
    assert errno_of(os.rename, m / "e", m / "e" / "sub") == errno.EINVAL


def test_rename_over_existing(env, m):
    write_file(m / "new", b"new content")
    write_file(m / "old", b"old")
    fd = os.open(m / "old", os.O_RDONLY)
    try:
        os.rename(m / "new", m / "old")  # the checkpoint pattern
        assert read_file(m / "old") == b"new content"
        assert read_file(env.export / "old") == b"new content"
        assert not os.path.exists(m / "new")
        assert os.pread(fd, 100, 0) == b"old"  # the replaced file is still open
    finally:
        os.close(fd)
    os.mkdir(m / "d1")
    os.mkdir(m / "d2")
    write_file(m / "d2" / "x", b"")
    assert errno_of(os.rename, m / "d1", m / "d2") in (errno.ENOTEMPTY, errno.EEXIST)
    os.unlink(m / "d2" / "x")
    os.rename(m / "d1", m / "d2")
    assert not os.path.exists(env.export / "d1") and os.path.isdir(env.export / "d2")
    assert errno_of(os.rename, m / "old", m / "d2") == errno.EISDIR


@EXPORT_AT_ONCE
def test_rename_over_is_one_rename_on_the_server(env, m):
    """Rename over an existing name is one rename(2) in the export: a
    process watching the export directory sees the name move onto the
    target, never the target removed first (between the two, a reader on
    the server would find no file, and a crash would lose both)."""
    write_file(m / "new", b"new content")
    write_file(m / "old", b"old")
    fd = inotify_watch(env.export, IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)
    try:
        os.rename(m / "new", m / "old")
        got = inotify_events(fd)  # podfsd's rename is done: its events are queued
    finally:
        os.close(fd)
    assert got == [(IN_MOVED_FROM, "new"), (IN_MOVED_TO, "old")], got


@EXPORT_AT_ONCE
def test_rename_noreplace(env, m):
    write_file(m / "a", b"A")
    write_file(m / "b", b"B")
    assert errno_of(renameat2, m / "a", m / "b", RENAME_NOREPLACE) == errno.EEXIST
    assert read_file(env.export / "a") == b"A" and read_file(env.export / "b") == b"B"
    renameat2(m / "a", m / "c", RENAME_NOREPLACE)
    assert read_file(env.export / "c") == b"A" and not os.path.exists(env.export / "a")


def test_rename_exchange(env, m):
    write_file(m / "a", b"A")
    os.mkdir(m / "b")
    write_file(m / "b" / "inner", b"I")
    renameat2(m / "a", m / "b", RENAME_EXCHANGE)
    assert os.path.isdir(m / "a") and read_file(m / "a" / "inner") == b"I"
    assert read_file(m / "b") == b"A"
    assert os.path.isdir(env.export / "a") and read_file(env.export / "b") == b"A"
    assert errno_of(renameat2, m / "a", m / "nope", RENAME_EXCHANGE) == errno.ENOENT


# --- links -----------------------------------------------------------------------

def test_link(env, m):
    write_file(m / "f", b"shared")
    os.link(m / "f", m / "g")
    assert os.stat(m / "f").st_nlink == 2
    assert os.stat(m / "g").st_nlink == 2
    assert os.stat(m / "f").st_ino == os.stat(m / "g").st_ino
    assert os.stat(env.export / "f").st_ino == os.stat(env.export / "g").st_ino
    with open(m / "g", "r+b") as f:
        f.write(b"SHARED")
    assert read_file(m / "f") == b"SHARED"
    os.mkdir(m / "d")
    os.link(m / "f", m / "d" / "h")
    assert os.stat(m / "g").st_nlink == 3
    os.unlink(m / "f")
    assert os.stat(m / "g").st_nlink == 2
    assert os.stat(env.export / "g").st_nlink == 2
    assert errno_of(os.link, m / "g", m / "d" / "h") == errno.EEXIST
    assert errno_of(os.link, m / "d", m / "d2") == errno.EPERM


def test_symlink_readlink(env, m):
    os.symlink("some/relative/target", m / "rel")
    os.symlink("/absolute/target", m / "abs")
    t = "t" * 4000
    os.symlink(t, m / "long")
    assert os.readlink(m / "rel") == "some/relative/target"
    assert os.readlink(m / "abs") == "/absolute/target"
    assert os.readlink(m / "long") == t
    assert os.readlink(env.export / "rel") == "some/relative/target"
    st = os.lstat(m / "abs")
    assert stat.S_ISLNK(st.st_mode) and st.st_size == len("/absolute/target")
    write_file(m / "real", b"via link")
    os.symlink("real", m / "tolink")
    assert read_file(m / "tolink") == b"via link"
    assert errno_of(os.readlink, m / "real") == errno.EINVAL
    assert errno_of(os.symlink, "x", m / "rel") == errno.EEXIST


# --- special files ---------------------------------------------------------------

def test_mkfifo_works_locally(env, m):
    os.mkfifo(m / "fifo", 0o600)
    assert stat.S_ISFIFO(os.stat(m / "fifo").st_mode)
    assert stat.S_ISFIFO(os.stat(env.export / "fifo").st_mode)
    r = os.open(m / "fifo", os.O_RDONLY | os.O_NONBLOCK)
    try:
        w = os.open(m / "fifo", os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(w, b"through the pipe")
        finally:
            os.close(w)
        assert os.read(r, 100) == b"through the pipe"
    finally:
        os.close(r)


def test_mknod_regular(env, m):
    os.mknod(m / "reg", stat.S_IFREG | 0o640)
    st = os.stat(m / "reg")
    assert stat.S_ISREG(st.st_mode) and st.st_size == 0
    assert stat.S_IMODE(os.stat(env.export / "reg").st_mode) == 0o640 & ~current_umask()
    write_file(m / "reg", b"usable")
    assert read_file(env.export / "reg") == b"usable"


# --- statfs ----------------------------------------------------------------------

def test_statfs(env, m):
    s = os.statvfs(m.path)
    x = os.statvfs(env.export)
    assert s.f_bsize > 0 and s.f_frsize > 0
    assert s.f_blocks > 0
    assert s.f_bfree <= s.f_blocks and s.f_bavail <= s.f_bfree
    assert s.f_namemax == 255
    total = s.f_blocks * s.f_frsize
    xtotal = x.f_blocks * x.f_frsize
    assert abs(total - xtotal) <= xtotal // 100
    assert abs(s.f_bavail * s.f_frsize - x.f_bavail * x.f_frsize) <= xtotal // 50
    assert s.f_files == x.f_files


# --- xattrs ----------------------------------------------------------------------

def test_xattrs(env, m):
    p = m / "f"
    write_file(p, b"x")
    os.setxattr(p, "user.one", b"1")
    os.setxattr(p, "user.empty", b"")
    # As large a value as the export's filesystem takes (ext4 without
    # ea_inode: one block).
    big = os.urandom(60000)
    write_file(env.root / "probe", b"")
    try:
        os.setxattr(env.root / "probe", "user.big", big)
    except OSError as e:
        assert e.errno in (errno.ENOSPC, errno.E2BIG)
        big = big[:3000]
    os.setxattr(p, "user.big", big)
    assert os.getxattr(p, "user.one") == b"1"
    assert os.getxattr(p, "user.empty") == b""
    assert os.getxattr(p, "user.big") == big
    assert os.getxattr(env.export / "f", "user.big") == big
    assert set(os.listxattr(p)) >= {"user.one", "user.empty", "user.big"}
    assert errno_of(os.getxattr, p, "user.missing") == errno.ENODATA
    assert errno_of(os.setxattr, p, "user.one", b"2", os.XATTR_CREATE) == errno.EEXIST
    assert errno_of(os.setxattr, p, "user.none", b"2", os.XATTR_REPLACE) == errno.ENODATA
    os.setxattr(p, "user.one", b"22", os.XATTR_REPLACE)
    assert os.getxattr(p, "user.one") == b"22"
    os.setxattr(p, "user.two", b"2", os.XATTR_CREATE)
    os.removexattr(p, "user.one")
    assert errno_of(os.getxattr, p, "user.one") == errno.ENODATA
    assert errno_of(os.removexattr, p, "user.one") == errno.ENODATA
    assert "user.one" not in os.listxattr(env.export / "f")
    assert "user.one" not in os.listxattr(p)
    # On a directory, and without following a symlink.
    os.mkdir(m / "d")
    os.setxattr(m / "d", "user.dir", b"D")
    assert os.getxattr(env.export / "d", "user.dir") == b"D"
    os.symlink("f", m / "l")
    assert errno_of(os.getxattr, m / "l", "user.two", follow_symlinks=False) == errno.ENODATA
    assert os.getxattr(m / "l", "user.two") == b"2"
    # A too-small buffer gives ERANGE (via the size probe in the C library).
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(10)
    n = libc.getxattr(os.fsencode(p), b"user.big", buf, ctypes.c_size_t(10))
    assert n == -1 and ctypes.get_errno() == errno.ERANGE
    n = libc.getxattr(os.fsencode(p), b"user.big", None, ctypes.c_size_t(0))
    assert n == len(big)


# --- read-only export ------------------------------------------------------------

def test_ro_export(env, mount):
    write_file(env.export / "f", b"ro data")
    d = env.start_daemon(extra=["--ro"])
    mm = mount(d, path=env.root / "mnt-ro")
    assert read_file(mm / "f") == b"ro data"
    assert errno_of(write_file, mm / "g", b"x") == errno.EROFS
    assert errno_of(os.open, mm / "f", os.O_WRONLY) == errno.EROFS
    assert errno_of(os.unlink, mm / "f") == errno.EROFS
    assert errno_of(os.mkdir, mm / "d") == errno.EROFS
    assert errno_of(os.setxattr, mm / "f", "user.x", b"1") == errno.EROFS
    assert read_file(env.export / "f") == b"ro data"
    assert os.listdir(env.export) == ["f"]
