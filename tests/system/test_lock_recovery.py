"""test_lock_recovery.py: locks that survive the real world.

* A lock held by a client that dies (kill -9 of podfs: its connection
  closes and it never comes back) is released after the daemon's lock
  lease, while the session's open files linger for the longer session
  lease; a lock blocked behind it is woken then.
* After kill -9 + restart of the daemon, clients reclaim their locks in a
  grace period; the grace period ends early once every holder reclaimed, and
  a holder that does not come back loses its locks when it ends.
* A client that lost its locks (reclaim refused, or away for longer than
  the lock lease) says so, and close() reports EIO.

Locks while nothing fails are in test_locks.py.
"""

import errno
import fcntl
import os
import subprocess
import time

import pytest

import pfsproto as P
from harness import Pod
from helpers import PODFSD, wait_for, write_file
from lockers import PROMPT, RETRY, agents_on_lk

CONFLICT = ("EAGAIN", "EACCES", "EWOULDBLOCK")


def can_lock(path, kind):
    """True if this process can take an exclusive lock of path at once
    (and drops it again), False if another owner holds one."""
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


# --- a dead client's locks -------------------------------------------------------

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
    assert not can_lock(b / "lockfile", kind), "B got a lock A holds"
    # A dies: kill -9 of its podfs (the mount goes with it).
    a.kill9()
    try:
        os.close(fd)
    except OSError:
        pass  # the mount is gone
    wait_for(lambda: can_lock(b / "lockfile", kind), 30,
             what="the dead client's lock to be released")
    assert "released 1 lock" in d.log()


@pytest.mark.timeout(120)
def test_blocked_lock_woken_when_dead_holder_lease_ends(env, agents):
    pod = Pod(env, opts=("", f"lock_retry={RETRY}"), extra=["--lock-lease", "2"])
    a = pod.a
    ha, wb = agents_on_lk(a, pod.b, agents)
    wb.send("lockf f EX")
    assert wb.reply(1.0)[0] == ""
    t_kill = time.monotonic()
    a.kill9()
    res, t_acq = wb.reply(RETRY / 2)
    assert res == "ok", "B was not woken when the dead client's locks were released"
    assert 1.5 < t_acq - t_kill < 2 + PROMPT + 2


# --- reclaim after a daemon restart ----------------------------------------------

@pytest.mark.timeout(180)
def test_locks_reclaimed_after_daemon_restart(env, agents):
    grace = 30
    pod = Pod(env, extra=["--grace", str(grace)])
    d, a, b = pod.daemon, pod.a, pod.b
    for n in ("f1", "f2"):
        write_file(a / n, b"x")
        wait_for(lambda: os.path.exists(b / n), 10, what=f"B to see {n}")
    ha, hb = agents(), agents()
    assert ha.do("open p " + str(a / "f1")) == "ok"
    assert ha.do("lockf p EX") == "ok"
    assert ha.do("open q " + str(a / "f2")) == "ok"
    assert ha.do("flock q EX") == "ok"
    assert hb.do("open p " + str(b / "f1")) == "ok"
    assert hb.do("open q " + str(b / "f2")) == "ok"
    assert hb.do("lockf p EX NB") in CONFLICT
    assert hb.do("flock q EX NB") in CONFLICT

    d.kill9()
    t0 = time.monotonic()
    d.start()
    # B asks at once: during grace its request waits (it must not be
    # granted, nor refused with a spurious EAGAIN while A has not
    # reclaimed); A reclaims, grace ends early and B is refused.
    assert hb.do("lockf p EX NB", timeout=grace + 30) in CONFLICT
    assert hb.do("flock q EX NB", timeout=grace + 30) in CONFLICT
    assert time.monotonic() - t0 < grace - 5, "grace did not end early"
    log = d.log()
    assert "grace period of" in log
    assert "every lock holder reclaimed" in log
    assert "reclaimed 2 locks" in log
    # After grace: still A's.
    assert hb.do("lockf p EX NB") in CONFLICT
    assert hb.do("flock q EX NB") in CONFLICT
    # A's unlocks let B in.
    assert ha.do("lockf p UN") == "ok"
    assert hb.do("lockf p EX NB") == "ok"
    assert ha.do("flock q UN") == "ok"
    assert hb.do("flock q EX NB") == "ok"
    assert ha.do("close p") == "ok"  # no lock of A was lost: no EIO


@pytest.mark.timeout(180)
def test_split_ranges_reclaimed_exactly(env, agents):
    """What A reclaims is what it holds: 0..99 locked, then 40..59
    unlocked, leaves two ranges; after the restart B gets 40..59 and
    nothing that overlaps A's ranges."""
    pod = Pod(env, extra=["--grace", "30"])
    d, a, b = pod.daemon, pod.a, pod.b
    write_file(a / "lk", b"x" * 200)
    wait_for(lambda: os.path.exists(b / "lk"), 10, what="B to see lk")
    ha, hb = agents(), agents()
    assert ha.do("open f " + str(a / "lk")) == "ok"
    assert ha.do("range f EX 0 100") == "ok"
    assert ha.do("range f UN 40 20") == "ok"
    d.kill9()
    d.start()
    wait_for(lambda: "every lock holder reclaimed" in d.log(), 25,
             what="A to reclaim and grace to end")
    assert "reclaimed 2 locks" in d.log()
    assert hb.do("open f " + str(b / "lk")) == "ok"
    assert hb.do("range f EX 0 10 NB") in CONFLICT
    assert hb.do("range f EX 90 20 NB") in CONFLICT
    assert hb.do("range f EX 40 20 NB") == "ok"
    assert hb.do("range f EX 100 50 NB") == "ok"


@pytest.mark.timeout(180)
def test_lock_of_holder_gone_during_restart_free_after_grace(env, agents):
    grace = 4
    pod = Pod(env, extra=["--grace", str(grace), "--lock-lease", "60"])
    d, a = pod.daemon, pod.a
    ha, hb = agents_on_lk(a, pod.b, agents)
    assert hb.do("lockf f EX NB") in CONFLICT
    # The daemon crashes, and A dies while it is down.
    d.kill9()
    a.kill9()
    ha.finish()
    t0 = time.monotonic()
    d.start()
    # B's request waits out the grace period, then gets the lock.
    assert hb.do("lockf f EX NB", timeout=grace + 30) == "ok"
    waited = time.monotonic() - t0
    assert grace - 1.5 < waited < grace + 10, f"waited {waited:.1f}s for a {grace}s grace"
    assert "did not come back within the grace period" in d.log()


@pytest.mark.timeout(120)
def test_reclaim_refused_after_grace_makes_close_fail(env, agents):
    """A client whose daemon restarted without its list of lock holders
    cannot reclaim: the lock is lost, logged, and close() says EIO."""
    pod = Pod(env, extra=["--grace", "5"])
    d, a, b = pod.daemon, pod.a, pod.b
    write_file(a / "lk", b"x")
    ha = agents()
    assert ha.do("open f " + str(a / "lk")) == "ok"
    assert ha.do("lockf f EX") == "ok"
    d.kill9()
    (d.state_dir / "lockholders").unlink()
    d.start()
    assert "grace period of" not in d.log()
    wait_for(lambda: "lock lost" in a.proc.output(), 30, what="A to report the lost lock")
    hb = agents()
    assert hb.do("open f " + str(b / "lk")) == "ok"
    assert hb.do("lockf f EX NB") == "ok"
    assert ha.do("close f") == "EIO"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("lease", ["--lock-lease", "--lease"])
def test_locks_released_while_away_are_reported_lost(env, agents, lease):
    """A client whose connection dropped for longer than the lock lease
    (here 0 s) finds its session again but not its locks; one away for
    longer than the session lease (0 s) finds a new session, the old one
    ended with its locks. Either way another host may hold them now: it
    says so, and close() reports EIO. (Before, after the session lease it
    went on as if it held them: two hosts held conflicting locks.)"""
    pod = Pod(env, extra=[lease, "0"])
    d, a = pod.daemon, pod.a
    ha, hb = agents_on_lk(a, pod.b, agents)
    assert hb.do("lockf f EX NB") in CONFLICT
    # Reset A's connection on the daemon's side (it reconnects at once).
    subprocess.run(["ss", "-K", "dst", a.netns.ip], stdout=subprocess.DEVNULL, timeout=10,
                   check=True)
    wait_for(lambda: "lock lost" in a.proc.output(), 30, what="A to report its lost lock")
    if lease == "--lock-lease":
        assert "released 1 lock" in d.log()
    else:
        assert "the server ended the session that held it" in a.proc.output()
    assert hb.do("lockf f EX NB") == "ok"
    assert ha.do("close f") == "EIO"


@pytest.mark.timeout(120)
def test_malformed_holder_list_gives_full_grace(env, agents):
    """A list of lock holders that cannot be read is not trusted as empty:
    the daemon waits out the whole grace period (F_GETLK waits too)."""
    state = env.root / "state"
    state.mkdir(parents=True, exist_ok=True)
    (state / "lockholders").write_text("not a list\n")
    t0 = time.monotonic()
    d = env.start_daemon(extra=["--grace", "3"])
    m = env.mount(d)
    write_file(m / "lk", b"x")
    h = agents()
    assert h.do("open f " + str(m / "lk")) == "ok"
    assert h.do("getlk f", timeout=30) == "ok"
    assert time.monotonic() - t0 > 2.0, "F_GETLK was answered during the grace period"
    assert h.do("lockf f EX NB") == "ok"
    log = d.log()
    assert "malformed" in log and "grace period of 3 s" in log and "time is up" in log
    assert (state / "lockholders").read_text().startswith("podfs lock holders 1\n")


def test_bad_grace_option(env):
    for bad in ("abc", "-1", "601", ""):
        r = subprocess.run([str(PODFSD), "--grace", bad, str(env.export)], text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        assert r.returncode == 2, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "--grace" in r.stderr
    r = subprocess.run([str(PODFSD), "--help"], text=True, stdout=subprocess.PIPE, timeout=30)
    assert "--grace SECONDS" in r.stdout


# --- the raw protocol ------------------------------------------------------------

@pytest.mark.plaintext
def test_raw_reclaim_and_wake(env):
    """RECLAIM outside grace is ENOLCK; RECLAIM_DONE is checked; a SETLK
    with PFS_LKF_WAIT that conflicts gets a LOCK_WAKE push when the holder
    unlocks, and only then."""
    d = env.start_daemon()
    key = P.load_key(env.key)
    with P.connect(d.host, d.port, key, caps=P.CAP_PUSH) as x, \
            P.connect(d.host, d.port, key, caps=P.CAP_PUSH) as y:
        h, _, fx = x.create(x.root, b"lk")
        fy = y.open(h, os.O_RDWR)
        with pytest.raises(P.PfsError) as e:
            x.call(P.OP_RECLAIM, P.lock_req(h, fx, 1, P.LK_WR))
        assert e.value.errno == errno.ENOLCK
        with pytest.raises(P.PfsError) as e:
            x.call(P.OP_RECLAIM_DONE, P.u32(0) + P.u16(0))
        assert e.value.errno == errno.EINVAL
        x.call(P.OP_RECLAIM_DONE, P.u32(0) + P.u32(0))
        x.call(P.OP_SETLK, P.lock_req(h, fx, 1, P.LK_WR))
        with pytest.raises(P.PfsError) as e:
            y.call(P.OP_SETLK, P.lock_req(h, fy, 2, P.LK_WR, flags=P.LKF_WAIT))
        assert e.value.errno == errno.EAGAIN
        # A read lock by the holder itself is a downgrade: it wakes too,
        # so take a second exclusive range instead to check "only then".
        x.call(P.OP_SETLK, P.lock_req(h, fx, 1, P.LK_WR, 0, 10))
        with pytest.raises(P.Timeout):
            y.recv_frame(timeout=0.5)
        x.call(P.OP_SETLK, P.lock_req(h, fx, 1, P.LK_UN))
        f = y.recv_frame(timeout=5)
        assert f.flags & P.FF_PUSH and f.op == P.OP_LOCK_WAKE
        assert P.Reader(f.payload).fh() == h
        y.call(P.OP_SETLK, P.lock_req(h, fy, 2, P.LK_WR))
