"""test_reopen.py: files and directories whose name is gone, held open
or opened again.

Reopening through /proc/PID/fd a file another host removed (or renamed
another file over) fails with ESTALE, as on NFS; one this host removed
opens, and reads what it holds. The descriptor itself stays readable
either way (test_coherence_hosts.py checks that at length). A directory
held open while it is removed, here or on another host, reads as empty
and has no links, as on a local filesystem (NFS gives ESTALE).
"""

import ctypes
import errno
import os
import time

import pytest

from helpers import errno_of, pread_all, read_file, wait_for, write_file

LIBC = ctypes.CDLL(None, use_errno=True)
SYS_GETDENTS64 = 217  # x86_64

VISIBLE = 10.0


@pytest.fixture
def two_hosts(env, daemon, mount):
    """Two mounts of one daemon: two clients, as two hosts would be."""
    return mount(), mount()


def remove(m, how):
    if how == "unlink":
        os.unlink(m / "f")
    else:
        write_file(m / "new", b"the new file")
        os.rename(m / "new", m / "f")


@pytest.mark.parametrize("how", ["unlink", "rename-over"])
@pytest.mark.parametrize("by", ["other host", "this host"])
def test_reopen_through_proc_fd_of_removed_file(env, two_hosts, how, by):
    a, b = two_hosts
    data = os.urandom(100000)
    write_file(a / "f", data)
    wait_for(lambda: os.path.exists(b / "f"), VISIBLE, what="B to see f")
    fd = os.open(a / "f", os.O_RDONLY)
    try:
        assert os.pread(fd, 10, 0) == data[:10]
        remove(b if by == "other host" else a, how)
        if by == "other host":
            # A hears of it (a push) before it opens again.
            want = None if how == "unlink" else b"the new file"
            wait_for(lambda: (read_file(a / "f") if os.path.exists(a / "f") else None) == want,
                     VISIBLE, what="A to see the change")
        proc = f"/proc/self/fd/{fd}"
        if by == "other host":
            assert errno_of(os.open, proc, os.O_RDONLY) == errno.ESTALE
        else:
            fd2 = os.open(proc, os.O_RDONLY)
            try:
                assert pread_all(fd2, len(data) + 1) == data
            finally:
                os.close(fd2)
        assert pread_all(fd, len(data) + 1) == data
    finally:
        os.close(fd)


def getdents(fd):
    """One getdents64 on fd: the bytes it gave, or -errno."""
    buf = ctypes.create_string_buffer(32768)
    n = LIBC.syscall(SYS_GETDENTS64, fd, buf, len(buf))
    return n if n >= 0 else -ctypes.get_errno()


def test_directory_held_open_while_removed(env, two_hosts):
    """A lists three directories and holds them open, opened without the
    daemon (their listings were cached); then B removes one and renames
    another over the second, and A removes the third itself. Each reads
    as empty and has no links: at once, and after the daemon's grace for
    removed objects (5 s) ran out and A's kernel dropped its caches (A
    opened them on the daemon when it heard of the removal, or before
    its own). A name cannot be made in them. Before, A's readings failed
    with ESTALE."""
    a, b = two_hosts
    for n in ("gone", "over", "new", "mine"):
        os.makedirs(b / "d" / n)
    wait_for(lambda: os.path.exists(a / "d" / "mine"), 10.0, what="A to see the directories")
    names = ("gone", "over", "mine")
    for n in names:
        assert os.listdir(a / "d" / n) == []
    fds = [os.open(a / "d" / n, os.O_RDONLY | os.O_DIRECTORY) for n in names]
    try:
        os.rmdir(b / "d" / "gone")
        os.rename(b / "d" / "new", b / "d" / "over")
        os.rmdir(a / "d" / "mine")
        for when in ("at once", "after the grace"):
            if when != "at once":
                time.sleep(6.5)
                with open("/proc/sys/vm/drop_caches", "w") as f:
                    f.write("3")
            for n, fd in zip(names, fds):
                what = f"{n}, {when}"
                assert getdents(fd) in (0, -errno.ENOENT), what
                assert os.listdir(fd) == [], what
                assert os.fstat(fd).st_nlink == 0, what
                assert errno_of(os.open, "x", os.O_CREAT | os.O_WRONLY, 0o644,
                                dir_fd=fd) == errno.ENOENT, what
        assert sorted(os.listdir(a / "d")) == ["over"]
    finally:
        for fd in fds:
            os.close(fd)
