"""test_locks3.py: issue 3, locks that survive the real world.

A lock held by a client that dies (kill -9 of podfs: its connection
closes and it never comes back) is released after the daemon's lock lease,
while the session's open files linger for the longer session lease.
"""

import errno
import fcntl
import os
import signal

import pytest

from helpers import wait_for, write_file


def try_lock(path, kind):
    fd = os.open(path, os.O_RDWR)
    try:
        if kind == "fcntl":
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return False
        raise
    finally:
        os.close(fd)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["fcntl", "flock"])
def test_lock_of_dead_client_released_after_lease(env, kind):
    d = env.start_daemon(extra=["--lock-lease", "2"])
    a = env.mount(d, path=env.root / "mnt-a", tag="podfs-a")
    b = env.mount(d, path=env.root / "mnt-b", tag="podfs-b")
    write_file(a / "lockfile", b"x")
    fd = os.open(a / "lockfile", os.O_RDWR)
    if kind == "fcntl":
        fcntl.lockf(fd, fcntl.LOCK_EX)
    else:
        fcntl.flock(fd, fcntl.LOCK_EX)
    assert not try_lock(b / "lockfile", kind), "B got a lock A holds"
    # A dies: kill -9 of its podfs (the mount goes with it).
    a.proc.expect_rc = None
    a.proc.send(signal.SIGKILL)
    a.proc.wait(10)
    a.force_down()
    try:
        os.close(fd)
    except OSError:
        pass  # the mount is gone
    wait_for(lambda: try_lock(b / "lockfile", kind), 30,
             what="the dead client's lock to be released")
    assert "released 1 lock" in d.log()
