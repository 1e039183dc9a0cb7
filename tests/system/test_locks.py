"""test_locks.py: fcntl (POSIX) and flock locks: on one mount, across
hosts, and blocked locks woken by the daemon's push or interrupted by a
signal.

Every lock is taken by a process of its own (lockers.py), as a lock owner
is a process (fcntl) or an open file (flock). What survives failures (a
dead client, a daemon restart) is in test_lock_recovery.py.
"""

import errno
import fcntl
import os
import subprocess
import time

import pytest

from harness import Pod
from helpers import PYTHON, at_once, errno_of, kernel_settled, wait_for, write_file
from lockers import (LOCK_CMD, PROMPT, RETRY, WAITER, Holder, agents_on_lk, held_on_a,
                     readline, try_lock)

VISIBLE = 5.0  # seconds a change on one host may take to show on the other
CONFLICT = ("EAGAIN", "EACCES")


# --- on one mount ----------------------------------------------------------------

def test_fcntl_lock_local(env, m):
    write_file(m / "f", b"x" * 100)
    fd = os.open(m / "f", os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX, 10, 0)  # bytes 0..9
        assert try_lock(m / "f", "fcntl") in ("EAGAIN", "EACCES")
        # F_GETLK from another process sees our lock.
        r = subprocess.run([PYTHON, "-c", r"""
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDWR)
lk = struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0)
t, w, s, l, pid = struct.unpack("hhqqi", fcntl.fcntl(fd, fcntl.F_GETLK, lk)[:struct.calcsize("hhqqi")])
print(t, s, l)
""", str(m / "f")], stdout=subprocess.PIPE, text=True, timeout=60)
        t, s, ln = map(int, r.stdout.split())
        assert t == fcntl.F_WRLCK and s == 0 and ln == 10
        fcntl.lockf(fd, fcntl.LOCK_UN, 10, 0)
        assert try_lock(m / "f", "fcntl") == "GOT"
    finally:
        os.close(fd)


def test_flock_local(env, m):
    write_file(m / "f", b"x")
    fd = os.open(m / "f", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert try_lock(m / "f", "flock") == "EWOULDBLOCK" or \
            try_lock(m / "f", "flock") == "EAGAIN"
        fcntl.flock(fd, fcntl.LOCK_UN)
        assert try_lock(m / "f", "flock") == "GOT"
        fcntl.flock(fd, fcntl.LOCK_SH)
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def test_flock_of_a_reopened_file_survives_the_closed_ones_release(env, m):
    """A process that closes a flocked file and opens it again, as filelock
    users do in a loop: the new open file's lock holds. The kernel names a
    flock's owner by its struct file, which the new open often reuses,
    and the RELEASE of the closed file (which drops its flock, after
    committing the write it left) runs after close(2) returned: under the
    kernel's owner it dropped the new file's lock on the daemon, and a
    lock from another open file (another host's) was granted beside it.
    Without an owner of its own per open file, 10 runs of 10 failed, each
    by its 10th round."""
    write_file(m / "f", b"0")
    for i in range(20):
        fd = os.open(m / "f", os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.pwrite(fd, b"%d" % i, 0)  # uncommitted: the RELEASE commits it
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        fd = os.open(m / "f", os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            # The kernel's RELEASE of the first file is answered.
            kernel_settled(m)
            probe = os.open(m / "f", os.O_RDONLY)
            try:
                got = errno_of(fcntl.flock, probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            finally:
                os.close(probe)
            assert got == errno.EWOULDBLOCK, f"round {i}: a second flock was granted ({got})"
        finally:
            os.close(fd)
    assert (env.export / "f").read_bytes() == b"19"


# --- across hosts ----------------------------------------------------------------

@pytest.mark.netns
def test_fcntl_lock_conflict_across_hosts(pod):
    with held_on_a(pod, "fcntl", VISIBLE, b"x" * 1000) as h:
        assert try_lock(pod.b / "lk", "fcntl") in CONFLICT
        assert try_lock(pod.b / "lk", "fcntl-rd") in CONFLICT
        h.cmd("unlock")
        assert try_lock(pod.b / "lk", "fcntl") == "GOT"


@pytest.mark.netns
def test_fcntl_read_locks_share_across_hosts(pod):
    with held_on_a(pod, "fcntl-rd", VISIBLE):
        assert try_lock(pod.b / "lk", "fcntl-rd") == "GOT"
        assert try_lock(pod.b / "lk", "fcntl") in CONFLICT


@pytest.mark.netns
def test_fcntl_byte_ranges_across_hosts(pod):
    with held_on_a(pod, "range", VISIBLE, b"x" * 1000):
        assert try_lock(pod.b / "lk", "range-other") == "GOT"
        assert try_lock(pod.b / "lk", "range-overlap") in CONFLICT
        # The ranges' ends are inclusive: A's last byte is A's.
        assert try_lock(pod.b / "lk", "range-last") in CONFLICT


@pytest.mark.netns
@pytest.mark.parametrize("kind", ["fcntl", "flock"])
def test_blocking_lock_waits_for_release(pod, kind):
    """F_SETLKW / blocking flock on B returns only after A released."""
    with held_on_a(pod, kind, VISIBLE) as h:
        w = subprocess.Popen([PYTHON, "-c", WAITER, str(pod.b / "lk"), kind],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert readline(w, 30) == "waiting"
            # While A holds the lock, B must stay blocked (give it ample chance
            # to wrongly succeed).
            early = readline(w, 1.5)
            assert early == "", f"B acquired while A held the lock: {early!r}"
            t_release = h.cmd("unlock")
            line = readline(w, 30)
            assert line.startswith("acquired"), f"B never acquired after release: {line!r}"
            assert float(line.split()[1]) >= t_release
        finally:
            w.kill()
            w.wait(10)


@pytest.mark.netns
def test_flock_conflict_across_hosts(pod):
    with held_on_a(pod, "flock", VISIBLE) as h:
        assert try_lock(pod.b / "lk", "flock") in ("EWOULDBLOCK", "EAGAIN")
        h.cmd("unlock")
        assert try_lock(pod.b / "lk", "flock") == "GOT"


@pytest.mark.netns
@pytest.mark.parametrize("how", ["close", "exit", "kill"])
@pytest.mark.parametrize("kind", ["fcntl", "flock"])
def test_lock_released_when_holder_goes(pod, kind, how):
    with held_on_a(pod, kind, VISIBLE) as h:
        assert try_lock(pod.b / "lk", kind) in CONFLICT + ("EWOULDBLOCK",)
        if how == "kill":
            h.p.kill()
            h.p.wait(30)
        else:
            h.cmd(how)
        wait_for(lambda: try_lock(pod.b / "lk", kind) == "GOT", VISIBLE,
                 what=f"the lock to be free after the holder's {how}")


@pytest.mark.netns
def test_lock_conflict_same_host_other_process(pod):
    """Two processes on the same host also conflict (the daemon must not
    treat one client as one owner)."""
    write_file(pod.a / "lk", b"x")
    with Holder(pod.a / "lk", "fcntl"):
        assert try_lock(pod.a / "lk", "fcntl") in CONFLICT


# --- wake-up push, signals -------------------------------------------------------

@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["unlock", "close"])
@pytest.mark.parametrize("kind", ["fcntl", "flock"])
def test_blocked_lock_woken_by_push(env, agents, kind, how):
    pod = Pod(env, opts=("", f"lock_retry={RETRY}"))
    ha, wb = agents_on_lk(pod.a, pod.b, agents, f"{LOCK_CMD[kind]} f EX")
    wb.send(f"{LOCK_CMD[kind]} f EX")           # F_SETLKW / blocking flock
    early, _ = wb.reply(1.5)
    assert early == "", f"B got the lock while A held it: {early!r}"
    # The release takes effect inside A's call (close drops the lock
    # before it returns): B may get the lock before A's call returned,
    # not before it began.
    t_ask = time.monotonic()
    ha.send("close f" if how == "close" else f"{LOCK_CMD[kind]} f UN")
    res, t_rel = ha.reply()
    assert res == "ok"
    res, t_acq = wb.reply(RETRY / 2)
    assert res == "ok", "B was not woken by A's release before its own slow retry"
    assert t_acq >= t_ask
    assert t_acq - t_rel < PROMPT, f"B woke {t_acq - t_rel:.2f}s after the release"
    # A fresh daemon with no lock holders on record has no grace period.
    assert "grace period" not in pod.daemon.log()


@pytest.mark.timeout(120)
def test_blocked_setlkw_interrupted_by_signal(env, agents):
    pod = Pod(env, opts=("", f"lock_retry={RETRY}"))
    a = pod.a
    ha, wb = agents_on_lk(a, pod.b, agents)
    hc = agents()
    wb.send("setlkw f")
    assert wb.reply(1.0)[0] == "", "B got the lock while A held it"
    res, took = wb.interrupt()
    assert res == "EINTR", f"F_SETLKW after a signal: {res!r}"
    assert took < PROMPT
    # The interrupted request left nothing behind: once A unlocks, a third
    # owner gets the lock, not B.
    assert ha.do("lockf f UN") == "ok"
    assert hc.do("open f " + str(a / "lk")) == "ok"
    assert hc.do("lockf f EX NB") == "ok"


F_OFD_SETLK = 37  # fcntl.h; Python's fcntl module does not name it


def ofd_lock(fd, typ):
    import struct
    fcntl.fcntl(fd, F_OFD_SETLK, struct.pack("hhqqi4x", typ, os.SEEK_SET, 0, 0, 0))


@pytest.mark.timeout(120)
def test_ofd_lock_released_when_its_open_file_is_closed(pod):
    """An OFD lock (F_OFD_SETLK) belongs to its open file description and
    goes with its last close. The kernel sends no unlock for it (a FLUSH
    names the process, the RELEASE no lock owner), so podfs unlocks what
    was locked through the open at its RELEASE; the OFD lock of another
    open of the file stays. (Before, the lock stayed on the coordinator
    until the mount ended: no host could take it again.)"""
    write_file(pod.a / "f", b"x")
    wait_for(lambda: os.path.exists(pod.b / "f"), 10, what="B sees f")
    fa = os.open(pod.a / "f", os.O_RDWR)
    ofd_lock(fa, fcntl.F_WRLCK)
    fb = os.open(pod.b / "f", os.O_RDWR)
    try:
        assert errno_of(ofd_lock, fb, fcntl.F_WRLCK) in (errno.EAGAIN, errno.EACCES)
        os.close(fa)
        # The RELEASE follows the close(2) on its own: a moment later.
        wait_for(lambda: errno_of(ofd_lock, fb, fcntl.F_WRLCK) == 0, 10,
                 what="B to take the lock A's closed open held")
        ofd_lock(fb, fcntl.F_UNLCK)
        # Two opens on A, the first locked: closing the second leaves it.
        keep = os.open(pod.a / "f", os.O_RDWR)
        ofd_lock(keep, fcntl.F_WRLCK)
        os.close(os.open(pod.a / "f", os.O_RDWR))
        time.sleep(0.5)
        assert errno_of(ofd_lock, fb, fcntl.F_WRLCK) in (errno.EAGAIN, errno.EACCES)
        os.close(keep)
        wait_for(lambda: errno_of(ofd_lock, fb, fcntl.F_WRLCK) == 0, 10,
                 what="B to take the lock once A's last open closed")
    finally:
        os.close(fb)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["lockf", "flock"])
def test_writes_through_a_mapping_under_a_lock_reach_the_next_holder(pod, kind):
    """A writes through a shared mapping under a lock, without msync, and
    unlocks; B then locks and reads A's bytes, every round (NFS writes a
    mapping's dirty pages back at unlock too). (Before, B read the round
    before's: the pages went out only at A's next lock.)"""
    import mmap
    write_file(pod.a / "f", b"0" * 8192)
    wait_for(lambda: os.path.exists(pod.b / "f"), 10, what="B sees f")
    fa = os.open(pod.a / "f", os.O_RDWR)
    fb = os.open(pod.b / "f", os.O_RDWR)
    ma = mmap.mmap(fa, 8192)

    def lock(fd, op):
        if kind == "lockf":
            fcntl.lockf(fd, op)
        else:
            fcntl.flock(fd, op)
    try:
        for i in range(5):
            data = bytes([65 + i]) * 8192
            lock(fa, fcntl.LOCK_EX)
            ma[:] = data
            lock(fa, fcntl.LOCK_UN)
            lock(fb, fcntl.LOCK_EX)
            got = os.pread(fb, 8192, 0)
            lock(fb, fcntl.LOCK_UN)
            assert got == data, (i, got[:4])
    finally:
        ma.close()
        os.close(fa)
        os.close(fb)


RANGE_COUNTER = r'''
import fcntl, os, sys
path, slot, n, reopen = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
off = slot * 8
fd = None
for i in range(n):
    if fd is None:
        fd = os.open(path, os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX, 8, off, 0)
    v = int(os.pread(fd, 8, off))
    os.pwrite(fd, b"%8d" % (v + 1), off)
    fcntl.lockf(fd, fcntl.LOCK_UN, 8, off, 0)
    if reopen:
        os.close(fd)
        fd = None
'''


@pytest.mark.timeout(180)
@pytest.mark.parametrize("reopen", [True, False], ids=["reopen", "open-once"])
@pytest.mark.parametrize("fx", ["pod", "dpod"], ids=["plain", "delegate"])
def test_counters_in_one_page_under_byte_range_locks(request, fx, reopen):
    """Four processes, two on each host, each increment their own 8-byte
    counter in the same page of one file, 300 times, each under an fcntl
    lock of its 8 bytes only, as programs that share a file by records
    do. A host's kernel caches and writes back whole pages: whatever it
    writes must be only the bytes its own processes changed, never the
    other host's counters as it last saw them. Each counter ends at 300."""
    pod = request.getfixturevalue(fx)
    n = 300
    (pod.export / "c").write_bytes(b"%8d" % 0 * 4)
    at_once(RANGE_COUNTER, [[m / "c", i, n, int(reopen)]
                            for i, m in enumerate([pod.a, pod.b, pod.a, pod.b])], timeout=150)
    data = (pod.export / "c").read_bytes()
    assert [int(data[i * 8:i * 8 + 8]) for i in range(4)] == [n] * 4, data
    for m in (pod.a, pod.b):
        assert (m / "c").read_bytes() == data
