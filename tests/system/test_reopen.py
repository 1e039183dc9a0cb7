"""test_reopen.py: opening again, through /proc/PID/fd, a file whose
name is gone.

Reopening through /proc/PID/fd a file another host removed (or renamed
another file over) fails with ESTALE, as on NFS; one this host removed
opens, and reads what it holds. The descriptor itself stays readable
either way (test_coherence_hosts.py checks that at length).
"""

import errno
import os

import pytest

from helpers import errno_of, pread_all, read_file, wait_for, write_file

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
