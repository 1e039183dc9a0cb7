"""test_lock_grace.py: lock requests while the coordinator is in its
grace period, and flock locks lost across a restart or a long absence.

* During grace, lock requests and F_GETLK wait in the client, the
  non-blocking ones too; a signal interrupts the wait (EINTR at once).
* A lost flock is only logged: unlike a lost fcntl lock (whose close()
  fails with EIO, test_lock_recovery.py), its close() succeeds.
"""

import os
import subprocess

import pytest

from harness import Pod
from helpers import wait_for, write_file
from lockers import PROMPT, agents_on_lk


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cmd", ["setlk", "getlk-raw", "flock-raw", "setlkw"],
                         ids=["F_SETLK", "F_GETLK", "flock-LOCK_NB", "F_SETLKW"])
def test_lock_wait_during_grace_interrupted_by_signal(env, agents, cmd):
    grace = 60
    d = env.start_daemon(extra=["--grace", str(grace)])
    a = env.mount(d, path=env.root / "mnt-a", tag="podfs-a")
    b = env.mount(d, path=env.root / "mnt-b", tag="podfs-b")
    write_file(a / "lk", b"x")
    wait_for(lambda: os.path.exists(b / "lk"), 10, what="B to see lk")
    ha, hb = agents(), agents()
    assert ha.do("open f " + str(a / "lk")) == "ok"
    assert ha.do("lockf f EX") == "ok"  # A is on the list of lock holders
    assert hb.do("open f " + str(b / "lk")) == "ok"
    # The daemon crashes, and A dies while it is down: grace lasts.
    d.kill9()
    a.kill9()
    ha.finish()
    d.start()
    wait_for(lambda: "authenticated" in d.proc.output(), 30, what="B to reconnect")
    hb.send(f"{cmd} f")
    assert hb.reply(1.5)[0] == "", "answered during the grace period"
    res, took = hb.interrupt()
    assert res == "EINTR", f"{cmd} during grace, after a signal: {res!r}"
    assert took < PROMPT
    log = d.proc.output()
    assert f"grace period of {grace} s" in log and "time is up" not in log


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["reclaim refused", "lock lease over"])
def test_lost_flock_only_logged(env, agents, how):
    if how == "reclaim refused":
        pod = Pod(env, extra=["--grace", "5"])
    else:
        pod = Pod(env, extra=["--lock-lease", "0"])
    d, a, b = pod.daemon, pod.a, pod.b
    ha, hb = agents_on_lk(a, b, agents, lock="flock f EX")
    assert hb.do("flock f EX NB") in ("EAGAIN", "EWOULDBLOCK")
    if how == "reclaim refused":
        # A restart without the list of lock holders: no grace, and A's
        # reclaim is refused.
        d.kill9()
        (d.state_dir / "lockholders").unlink()
        d.start()
    else:
        # A's connection reset on the daemon's side (it reconnects at
        # once, but its locks went at once).
        subprocess.run(["ss", "-K", "dst", a.netns.ip], stdout=subprocess.DEVNULL, timeout=10,
                       check=True)
    wait_for(lambda: "lock lost: flock" in a.proc.output(), 30,
             what="A to report its lost flock")
    assert hb.do("flock f EX NB") == "ok"
    assert ha.do("close f") == "ok"  # only logged: no EIO
