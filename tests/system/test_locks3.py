"""test_locks3.py: issue 3, locks that survive the real world.

* A lock held by a client that dies (kill -9 of podfs: its connection
  closes and it never comes back) is released after the daemon's lock
  lease, while the session's open files linger for the longer session lease.
* A blocked F_SETLKW / flock on host B is woken by a push as soon as A
  releases (B mounts with a long lock_retry, so only the push can be quick).
* A signal interrupts a blocked F_SETLKW with EINTR.
* After kill -9 + restart of the daemon, clients reclaim their locks in a
  grace period; the grace period ends early once every holder reclaimed, and
  a holder that does not come back loses its locks when it ends.
"""

import errno
import fcntl
import os
import select
import signal
import subprocess
import time

import pytest

import pfsproto as P
from helpers import PYTHON, PODFSD, wait_for, write_file

# One process = one POSIX lock owner; each open file is one flock owner.
# Commands on stdin, one reply line each: "ok T" or "err ERRNO T" (T: the
# monotonic clock when the call returned).
AGENT = r"""
import ctypes, errno, fcntl, os, signal, struct, sys, time
fds = {}
libc = ctypes.CDLL(None, use_errno=True)
signal.signal(signal.SIGUSR1, lambda s, f: None)
signal.siginterrupt(signal.SIGUSR1, True)
MODES = {"EX": fcntl.LOCK_EX, "SH": fcntl.LOCK_SH, "UN": fcntl.LOCK_UN}
print("ready", flush=True)
for line in sys.stdin:
    a = line.split()
    try:
        if a[0] == "open":
            fds[a[1]] = os.open(a[2], os.O_RDWR)
        elif a[0] in ("lockf", "flock"):
            op = MODES[a[2]] | (fcntl.LOCK_NB if "NB" in a[3:] else 0)
            (fcntl.lockf if a[0] == "lockf" else fcntl.flock)(fds[a[1]], op)
        elif a[0] == "range":  # range NAME EX|SH|UN START LEN [NB]
            op = MODES[a[2]] | (fcntl.LOCK_NB if "NB" in a[5:] else 0)
            fcntl.lockf(fds[a[1]], op, int(a[4]), int(a[3]))
        elif a[0] == "setlkw":
            # F_SETLKW through libc: Python would retry it after EINTR.
            fl = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
            buf = ctypes.create_string_buffer(fl, len(fl))
            if libc.fcntl(fds[a[1]], fcntl.F_SETLKW, buf) != 0:
                raise OSError(ctypes.get_errno(), "fcntl")
        elif a[0] == "getlk":
            fl = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
            fcntl.fcntl(fds[a[1]], fcntl.F_GETLK, fl)
        elif a[0] == "close":
            os.close(fds.pop(a[1]))
        print("ok", time.monotonic(), flush=True)
    except OSError as e:
        print("err", errno.errorcode.get(e.errno, str(e.errno)), time.monotonic(), flush=True)
"""

CONFLICT = ("EAGAIN", "EACCES", "EWOULDBLOCK")


class Agent:
    def __init__(self):
        self.p = subprocess.Popen([PYTHON, "-c", AGENT], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        assert self.line(30) == "ready"

    def line(self, timeout):
        """One reply line within timeout seconds, or '' (bounded)."""
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        return self.p.stdout.readline().strip() if r else ""

    def send(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()

    def reply(self, timeout=30):
        """(result, time): result is "ok" or the errno name; ("", None) on timeout."""
        ln = self.line(timeout)
        if not ln:
            return "", None
        w = ln.split()
        return (w[0], float(w[1])) if w[0] == "ok" else (w[1], float(w[2]))

    def do(self, cmd, timeout=30):
        self.send(cmd)
        res, _ = self.reply(timeout)
        assert res, f"no answer to {cmd!r} within {timeout}s"
        return res

    def finish(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(10)


@pytest.fixture
def agents():
    made = []

    def make():
        a = Agent()
        made.append(a)
        return a
    yield make
    for a in made:
        a.finish()


def two_hosts(env, daemon_extra=(), b_opts=""):
    """A daemon and clients A and B in their own network namespaces."""
    ns = [env.new_netns(), env.new_netns()]
    d = env.start_daemon(listen=f"{ns[0].host_ip}:0", extra=list(daemon_extra))
    a = env.mount(d, path=env.root / "mnt-a", netns=ns[0], host=ns[0].host_ip, tag="podfs-a")
    b = env.mount(d, path=env.root / "mnt-b", netns=ns[1], host=ns[0].host_ip, opts=b_opts,
                  tag="podfs-b")
    return d, a, b


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


LOCK_CMD = {"fcntl": "lockf", "flock": "flock"}


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


# --- wake-up push ---------------------------------------------------------------------

# B retries a blocked lock on its own only every RETRY seconds: waking well
# before that needs the daemon's LOCK_WAKE push.
RETRY = 30
PROMPT = 3.0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["unlock", "close"])
@pytest.mark.parametrize("kind", ["fcntl", "flock"])
def test_blocked_lock_woken_by_push(env, agents, kind, how):
    d, a, b = two_hosts(env, b_opts=f"lock_retry={RETRY}")
    write_file(a / "lk", b"x")
    wait_for(lambda: os.path.exists(b / "lk"), 10, what="B to see lk")
    ha, wb = agents(), agents()
    assert ha.do("open f " + str(a / "lk")) == "ok"
    assert ha.do(f"{LOCK_CMD[kind]} f EX") == "ok"
    assert wb.do("open f " + str(b / "lk")) == "ok"
    wb.send(f"{LOCK_CMD[kind]} f EX")           # F_SETLKW / blocking flock
    early, _ = wb.reply(1.5)
    assert early == "", f"B got the lock while A held it: {early!r}"
    ha.send("close f" if how == "close" else f"{LOCK_CMD[kind]} f UN")
    res, t_rel = ha.reply()
    assert res == "ok"
    res, t_acq = wb.reply(RETRY / 2)
    assert res == "ok", "B was not woken by A's release before its own slow retry"
    assert t_acq >= t_rel
    assert t_acq - t_rel < PROMPT, f"B woke {t_acq - t_rel:.2f}s after the release"
    # A fresh daemon with no lock holders on record has no grace period.
    assert "grace period" not in d.log()


@pytest.mark.timeout(120)
def test_blocked_lock_woken_when_dead_holder_lease_ends(env, agents):
    d, a, b = two_hosts(env, daemon_extra=["--lock-lease", "2"], b_opts=f"lock_retry={RETRY}")
    write_file(a / "lk", b"x")
    wait_for(lambda: os.path.exists(b / "lk"), 10, what="B to see lk")
    ha, wb = agents(), agents()
    assert ha.do("open f " + str(a / "lk")) == "ok"
    assert ha.do("lockf f EX") == "ok"
    assert wb.do("open f " + str(b / "lk")) == "ok"
    wb.send("lockf f EX")
    assert wb.reply(1.0)[0] == ""
    t_kill = time.monotonic()
    a.proc.expect_rc = None
    a.proc.send(signal.SIGKILL)
    a.proc.wait(10)
    a.force_down()
    res, t_acq = wb.reply(RETRY / 2)
    assert res == "ok", "B was not woken when the dead client's locks were released"
    assert 1.5 < t_acq - t_kill < 2 + PROMPT + 2


@pytest.mark.timeout(120)
def test_blocked_setlkw_interrupted_by_signal(env, agents):
    d, a, b = two_hosts(env, b_opts=f"lock_retry={RETRY}")
    write_file(a / "lk", b"x")
    wait_for(lambda: os.path.exists(b / "lk"), 10, what="B to see lk")
    ha, wb, hc = agents(), agents(), agents()
    assert ha.do("open f " + str(a / "lk")) == "ok"
    assert ha.do("lockf f EX") == "ok"
    assert wb.do("open f " + str(b / "lk")) == "ok"
    wb.send("setlkw f")
    assert wb.reply(1.0)[0] == "", "B got the lock while A held it"
    t_sig = time.monotonic()
    wb.p.send_signal(signal.SIGUSR1)
    res, t_ret = wb.reply(10)
    assert res == "EINTR", f"F_SETLKW after a signal: {res!r}"
    assert t_ret - t_sig < PROMPT
    # The interrupted request left nothing behind: once A unlocks, a third
    # owner gets the lock, not B.
    assert ha.do("lockf f UN") == "ok"
    assert hc.do("open f " + str(a / "lk")) == "ok"
    assert hc.do("lockf f EX NB") == "ok"


# --- reclaim after a daemon restart --------------------------------------------------

@pytest.mark.timeout(180)
def test_locks_reclaimed_after_daemon_restart(env, agents):
    grace = 30
    d, a, b = two_hosts(env, daemon_extra=["--grace", str(grace)])
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
    d, a, b = two_hosts(env, daemon_extra=["--grace", "30"])
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
    d, a, b = two_hosts(env, daemon_extra=["--grace", str(grace), "--lock-lease", "60"])
    write_file(a / "lk", b"x")
    wait_for(lambda: os.path.exists(b / "lk"), 10, what="B to see lk")
    ha, hb = agents(), agents()
    assert ha.do("open f " + str(a / "lk")) == "ok"
    assert ha.do("lockf f EX") == "ok"
    assert hb.do("open f " + str(b / "lk")) == "ok"
    assert hb.do("lockf f EX NB") in CONFLICT
    # The daemon crashes, and A dies while it is down.
    d.kill9()
    a.proc.expect_rc = None
    a.proc.send(signal.SIGKILL)
    a.proc.wait(10)
    a.force_down()
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
    d, a, b = two_hosts(env, daemon_extra=["--grace", "5"])
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
def test_locks_released_while_away_are_reported_lost(env, agents):
    """A client whose connection dropped for longer than the lock lease
    (here 0 s) finds its session again but not its locks: it says so, and
    close() reports EIO."""
    d, a, b = two_hosts(env, daemon_extra=["--lock-lease", "0"])
    write_file(a / "lk", b"x")
    wait_for(lambda: os.path.exists(b / "lk"), 10, what="B to see lk")
    ha, hb = agents(), agents()
    assert ha.do("open f " + str(a / "lk")) == "ok"
    assert ha.do("lockf f EX") == "ok"
    assert hb.do("open f " + str(b / "lk")) == "ok"
    assert hb.do("lockf f EX NB") in CONFLICT
    # Reset A's connection on the daemon's side (it reconnects at once).
    subprocess.run(["ss", "-K", "dst", a.netns.ip], stdout=subprocess.DEVNULL, timeout=10,
                   check=True)
    wait_for(lambda: "lock lost" in a.proc.output(), 30, what="A to report its lost lock")
    assert "released 1 lock" in d.log()
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


# --- the raw protocol ---------------------------------------------------------------

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
