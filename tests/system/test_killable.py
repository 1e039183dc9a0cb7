"""test_killable.py: a hard mount that a person can still control.

A hard mount waits for an absent coordinator as long as it takes (as an
NFS hard mount does), but a process blocked on it dies of SIGKILL within a
second, whether the coordinator is gone (its connection down) or stopped
(its connection up, no answer). Other signals do not interrupt the wait:
the call completes once the coordinator is back. The client says, while
it waits, that the server is unreachable and how many requests wait.
"""

import os
import re
import select
import signal
import subprocess
import sys
import time

import pytest

from helpers import RECONNECT, read_file, wait_for, write_file

# The child blocks in one call on the mount, then prints "done" and the
# result; the test watches its state in /proc.
CHILD = r"""
import os, signal, sys
signal.signal(signal.SIGUSR1, lambda *a: None)
what, path = sys.argv[1], sys.argv[2]
print("start", flush=True)
if what == "create":
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
    os.close(fd)
elif what == "stat":
    os.stat(path)
elif what == "write-close":
    fd = os.open(path, os.O_WRONLY)
    # The open known to the server (not lazy), the first write on its disk:
    # nothing the next write would wait for.
    os.write(fd, b"y")
    os.fsync(fd)
    print("opened", flush=True)
    sys.stdin.readline()
    # A whole page: the kernel reads nothing first (a partial page would
    # be read from the absent server, and the kill land there). Held by
    # write-behind: the server is away.
    os.pwrite(fd, b"x" * 4096, 4096)
    # Taken: write(2) returned, so its data is the file system's to keep.
    print("written", flush=True)
    os.close(fd)
print("done", flush=True)
"""


def start_child(what, path):
    p = subprocess.Popen([sys.executable, "-c", CHILD, what, str(path)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "start"
    return p


def state(pid):
    """The process's state letter in /proc/PID/stat, or None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def in_fuse_wait(pid):
    """True while pid sleeps in the kernel's wait for a FUSE reply (its
    kernel stack shows request_wait_answer): blocked on the mount, not
    merely slow to start."""
    try:
        with open(f"/proc/{pid}/stack") as f:
            return "request_wait_answer" in f.read()
    except OSError:
        return False


def readline_within(p, timeout):
    """p's next output line, stripped; fails after timeout seconds."""
    ready, _, _ = select.select([p.stdout], [], [], timeout)
    if not ready:
        pytest.fail(f"pid {p.pid} printed nothing in {timeout} s (state {state(p.pid)})")
    return p.stdout.readline().strip()


def wait_blocked(p, timeout=15.0):
    wait_for(lambda: in_fuse_wait(p.pid), timeout, what=f"pid {p.pid} to wait for a FUSE reply")


def kill9_time(p):
    """SIGKILL p; seconds until it has exited (bounded: 10 s)."""
    t0 = time.monotonic()
    os.kill(p.pid, signal.SIGKILL)
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        pass
    took = time.monotonic() - t0
    if p.poll() is None:
        pytest.fail(f"pid {p.pid} still alive 10 s after SIGKILL (state {state(p.pid)})")
    assert p.returncode == -signal.SIGKILL
    return took


def reap(p):
    if p.poll() is None:
        p.kill()
        p.wait(10)


def blocked_on_a_gone_daemon(d, mm, name):
    """Kills d, then starts a child whose CREATE of mm/name waits for it;
    returns the child, blocked."""
    write_file(mm / "warm", b"mounted")
    d.kill9()
    p = start_child("create", mm / name)
    try:
        wait_blocked(p)
    except BaseException:
        reap(p)
        raise
    return p


@pytest.fixture
def restartable(env, mount):
    d = env.start_daemon()
    return d, mount(d)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("what", ["create", "stat"])
def test_kill9_ends_a_process_blocked_on_a_gone_daemon(env, restartable, what):
    d, mm = restartable
    write_file(mm / "warm", b"mounted")
    # A name the client has never seen: its lookup must ask the server.
    write_file(env.export / "beside", b"made beside podfs")
    d.kill9()
    target = mm / ("new" if what == "create" else "beside")
    p = start_child(what, target)
    try:
        wait_blocked(p)
        # Blocked for a while, it stays blocked: a hard mount.
        time.sleep(0.5)
        assert in_fuse_wait(p.pid)
        took = kill9_time(p)
        assert took < 1.0, f"kill -9 took {took:.2f} s"
    finally:
        reap(p)
    assert "given up: its process is being killed" in mm.proc.output()
    # The coordinator comes back: the mount carries on.
    d.start()
    wait_for(lambda: read_file(mm / "warm") == b"mounted", RECONNECT, what="the mount to be back")
    write_file(mm / "after", b"after")
    assert read_file(env.export / "after") == b"after"
    assert read_file(mm / "beside") == b"made beside podfs"


@pytest.mark.timeout(120)
def test_kill9_ends_a_process_blocked_on_a_stopped_daemon(env, restartable):
    """SIGSTOP: the connection stays up and the CREATE was sent; given up,
    its outcome is unknown to this host, which reconnects and then agrees
    with the server about the name either way."""
    d, mm = restartable
    os.listdir(mm)  # the root's listing is cached: the lookup is local
    write_file(mm / "warm", b"mounted")
    d.proc.send(signal.SIGSTOP)
    try:
        p = start_child("create", mm / "made-while-stopped")
        try:
            wait_blocked(p)
            took = kill9_time(p)
            assert took < 1.0, f"kill -9 took {took:.2f} s"
        finally:
            reap(p)
    finally:
        d.proc.send(signal.SIGCONT)
    wait_for(lambda: read_file(mm / "warm") == b"mounted", RECONNECT, what="the mount to answer")

    def agree():
        return os.path.exists(mm / "made-while-stopped") == \
            os.path.exists(env.export / "made-while-stopped")
    wait_for(agree, 10, what="the host and the server to agree on the abandoned CREATE")
    write_file(mm / "after", b"after")
    assert read_file(env.export / "after") == b"after"


@pytest.mark.timeout(120)
def test_other_signals_do_not_interrupt_a_hard_mount(env, restartable):
    d, mm = restartable
    p = blocked_on_a_gone_daemon(d, mm, "patient")
    try:
        for _ in range(3):
            os.kill(p.pid, signal.SIGUSR1)  # handled by the child
            time.sleep(0.3)
        assert p.poll() is None and in_fuse_wait(p.pid), "a handled signal ended the wait"
        # After a signal the kernel waits killably: state D.
        assert state(p.pid) == "D"
        d.start()
        out, _ = p.communicate(timeout=RECONNECT)
    finally:
        reap(p)
    assert p.returncode == 0 and out.strip() == "done", out
    assert os.path.exists(env.export / "patient")


@pytest.mark.timeout(120)
def test_kill9_during_close_keeps_the_written_data(env, restartable):
    """A process killed in close() (its writes held for an absent server)
    dies at once; the data it wrote is not thrown away but written when
    the server is back."""
    d, mm = restartable
    write_file(mm / "f", b"")
    p = start_child("write-close", mm / "f")
    try:
        assert p.stdout.readline().strip() == "opened"
        d.kill9()
        p.stdin.write("go\n")
        p.stdin.flush()
        # Killed in close, not before: a kill while the kernel still holds
        # the WRITE unread drops it (write(2) then never returned, and
        # nothing was promised), so wait for the write to return first.
        assert readline_within(p, 15) == "written"
        wait_blocked(p)
        took = kill9_time(p)
        assert took < 1.0, f"kill -9 took {took:.2f} s"
    finally:
        reap(p)
    d.start()
    wait_for(lambda: read_file(env.export / "f") == b"y" + bytes(4095) + b"x" * 4096, RECONNECT,
             what="the held write to reach the server")
    assert "given up: its process is being killed" not in mm.proc.output()


@pytest.mark.timeout(120)
def test_client_logs_while_the_server_is_unreachable(env, restartable):
    d, mm = restartable
    p = blocked_on_a_gone_daemon(d, mm, "waiting")
    try:
        wait_for(lambda: "unreachable for" in mm.proc.output(), 20,
                 what="the client to log that the server is unreachable")
        line = [l for l in mm.proc.output().splitlines() if "unreachable for" in l][-1]
        assert re.search(r"[1-9]\d* requests waiting", line), line
        d.start()
        out, _ = p.communicate(timeout=RECONNECT)
        assert out.strip() == "done"
    finally:
        reap(p)
