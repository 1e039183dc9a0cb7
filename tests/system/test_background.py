"""test_background.py: podfsd --daemon and podfs without -f, run as the
README runs them, followed to their end.

podfsd --daemon goes to the background once listening: when the command
returns 0, the port answers at once; an error before that (a port in
use) is the command's own exit status and message, and leaves nothing
running. SIGTERM stops the background daemon with exit status 0. podfs
without -f returns once mounted and ends with status 0 at unmount. The
processes left in the background are followed with reaper.Reaper, which
waits for a command's output to close: a background process that kept
it open would make the command time out.
The pid and port files are checked in test_cli.py.
"""

import os
import signal
import socket
import types

import pytest

from harness import is_mounted
from helpers import PODFS, PODFSD, read_file, wait_for, write_file
from reaper import Reaper, proc_alive


@pytest.fixture
def reaper(env):
    with Reaper(env, "bg") as r:
        yield r


def podfsd_daemon_argv(env, tag, listen="127.0.0.1:0", state=None):
    return [PODFSD, "--listen", listen, "--key", env.key, "--state-dir",
            state or env.root / f"st-{tag}",
            "--squash=none", "--daemon", "--pidfile", env.root / f"{tag}.pid", "--port-file",
            env.root / f"{tag}.port", env.export]


@pytest.mark.timeout(120)
def test_podfsd_daemon_serves_and_stops_cleanly(env, reaper):
    rc, out, err = reaper.run(podfsd_daemon_argv(env, "bg"))
    assert rc == 0, err
    # Listening before the command returned: no waiting here.
    port = int((env.root / "bg.port").read_text())
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    pid = int((env.root / "bg.pid").read_text())
    assert pid != 0 and proc_alive(pid)
    ended, running = reaper.left_behind(0)
    assert running == [pid], (ended, running)
    assert "error" not in (out + err).lower(), out + err
    # It serves: a mount of it works, and unmounts cleanly.
    d = types.SimpleNamespace(host="127.0.0.1", port=port, key=env.key)
    m = env.mount(d)
    write_file(m / "f", b"through the background daemon")
    assert read_file(env.export / "f") == b"through the background daemon"
    assert m.umount() is None
    os.kill(pid, signal.SIGUSR1)  # logs its totals (to syslog), and carries on
    os.kill(pid, signal.SIGTERM)
    ended, running = reaper.left_behind(20)
    assert running == [], "podfsd --daemon did not stop on SIGTERM"
    assert ended == {pid: 0}, f"podfsd --daemon exit status: {ended}"


@pytest.mark.timeout(120)
def test_podfsd_daemon_start_error_reported_in_foreground(env, reaper, daemon):
    """An error before listening (the port is taken) is the command's
    own: exit status 1 and a message, and no daemon left behind."""
    if daemon.external:
        pytest.skip("own daemon needed")
    rc, out, err = reaper.run(podfsd_daemon_argv(env, "bg", f"127.0.0.1:{daemon.port}",
                                                 daemon.state_dir))
    assert rc not in (0, None), (rc, err)
    assert str(daemon.port) in err or "in use" in err.lower(), err
    ended, running = reaper.left_behind(5)
    assert running == [], f"a failed podfsd --daemon left {running} running"


def unmount(reaper, mnt):
    reaper.run(["fusermount3", "-u", mnt], timeout=30)
    if is_mounted(mnt):
        reaper.run(["fusermount3", "-uz", mnt], timeout=30)


def assert_podfs_ended(reaper):
    """The background podfs ended, with status 0, after its unmount."""
    ended, running = reaper.left_behind(20)
    assert running == [], "podfs did not exit after the unmount"
    assert list(ended.values()) == [0], f"podfs exit status: {ended}"


@pytest.mark.timeout(120)
def test_podfs_background_mount_ends_cleanly(env, reaper, daemon):
    """podfs without -f returns once the mount is there, serves it from
    the background, and exits 0 when it is unmounted."""
    mnt = env.root / "bg"
    mnt.mkdir()
    rc, out, err = reaper.run([PODFS, daemon.addr, mnt, "-o", f"key={env.key}"], timeout=60)
    try:
        assert rc == 0, err
        assert is_mounted(mnt), "podfs returned before mounting"
        ended, running = reaper.left_behind(0)
        assert len(running) == 1, (ended, running)
        write_file(mnt / "f", b"x" * 100000)
        assert read_file(env.export / "f") == b"x" * 100000
    finally:
        unmount(reaper, mnt)
    assert_podfs_ended(reaper)
    wait_for(lambda: not is_mounted(mnt), 5, what="the mount to go")


@pytest.mark.timeout(120)
def test_podfs_background_mount_with_delegations(env, reaper):
    """The same with -o delegate (and podfsd --delegate): the threads
    that send the unlinks answered under a directory delegation run in
    the background process (they start after it forked), so unlinks are
    answered there and reach the coordinator, and the unmount still ends
    the process."""
    from helpers import podfs_stats
    daemon = env.start_daemon(extra=["--delegate"])
    mnt = env.root / "bg"
    mnt.mkdir()
    rc, out, err = reaper.run([PODFS, daemon.addr, mnt, "-o", f"key={env.key},delegate"],
                              timeout=60)
    try:
        assert rc == 0, err
        os.mkdir(mnt / "d")
        for i in range(20):
            write_file(mnt / "d" / f"f{i}", b"x")
        for i in range(20):
            os.unlink(mnt / "d" / f"f{i}")
        fd = os.open(mnt / "d", os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        assert os.listdir(env.export / "d") == []
        assert podfs_stats(types.SimpleNamespace(path=mnt))["dirdeleg_unlinks"] > 0
    finally:
        unmount(reaper, mnt)
    assert_podfs_ended(reaper)
