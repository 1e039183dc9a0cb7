"""test_leases.py: how long the coordinator keeps a disconnected
client's open files (`podfsd --lease S`).

While a client is away, its session and open files stay on the
coordinator for S seconds: back within them, it finds them again (here a
file removed while open, which only the coordinator's open descriptor
keeps); away longer, the session expires and the coordinator closes the
files. The lock lease is in test_lock_recovery.py.
"""

import os
import signal
import time

import pytest

from harness.procs import Proc
from helpers import RECONNECT, Worker, daemon_deleted_fds, wait_for


def cut_off(env, d, m):
    """Stops podfs of mount m (SIGSTOP: it cannot reconnect) and closes
    the daemon's side of its connection (ss -K)."""
    os.kill(m.proc.pid, signal.SIGSTOP)
    # Not a child of this process: a child closes the files it inherits,
    # and closing a file of the stopped mount would wait for it.
    ss = Proc(env, "ss", ["ss", "-K", "-t", "sport", "=", f":{d.port}"])
    assert ss.wait(10) == 0, ss.output()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("lease", [60, 2])
def test_open_files_of_disconnected_client_kept_for_lease(env, lease):
    d = env.start_daemon(extra=["--lease", str(lease), "--lock-lease", "1"])
    m = env.mount(d)
    data = os.urandom(300000)
    fd = os.open(m / "f", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.pwrite(fd, data, 0)
        os.fsync(fd)
        os.unlink(m / "f")  # only open descriptors keep it now
        assert daemon_deleted_fds(d, env.export), "the daemon does not hold the open file"
        before = len(d.log().splitlines())
        t0 = time.monotonic()
        cut_off(env, d, m)
        try:
            wait_for(lambda: "disconnected" in "".join(d.log().splitlines(True)[before:]), 10,
                     what="the daemon to see the connection go")
            if lease > 10:
                time.sleep(3)  # longer than the short lease
                assert "expired" not in d.log()
                assert daemon_deleted_fds(d, env.export), "closed within the lease"
            else:
                wait_for(lambda: "expired after 2 s" in d.log(), lease + 10,
                         what="the session to expire")
                assert time.monotonic() - t0 >= lease - 0.1, "expired before its lease"
                wait_for(lambda: not daemon_deleted_fds(d, env.export), 5,
                         what="the daemon to close the expired session's files")
        finally:
            os.kill(m.proc.pid, signal.SIGCONT)
        # Back: within the lease the same session and open file carry on.
        wait_for(lambda: "authenticated, session" in "".join(d.log().splitlines(True)[before:]),
                 RECONNECT, what="the client to reconnect")
        new_log = "".join(d.log().splitlines(True)[before:])
        if lease > 10:
            assert " resumed" in new_log, new_log
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # read from the daemon
            got = Worker(os.pread, fd, len(data) + 1, 0).join(RECONNECT)
            assert got == data, "the read after the reconnect returned other bytes"
        else:
            assert " new" in new_log, new_log
    finally:
        os.close(fd)
