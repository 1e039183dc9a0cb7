"""test_delegation.py: attribute delegations of new files (podfs -o
delegate, podfsd --delegate; docs/delegation.md).

Host A creates a file and, while it holds it open, changes its mode,
owner and times: A answers these itself and sends them later. Whatever B
does that reveals the file (a lookup, a listing, an open, a create of the
same name, a change of its own) first recalls A's delegation, so B sees
exactly what A's calls returned, right after they returned: never polled.
"""

import errno
import os
import signal
import stat
import time

import pytest

from harness.pod import Pod
from harness.settings import DAEMON_ARGS
from helpers import (TEST_GID, TEST_UID, file_errno, podfs_stats, requests_sent, requests_since,
                     wait_for)

pytestmark = pytest.mark.netns

OPTS = "delegate"
EXTRA = ["--delegate"]


def fresh_dir(pod, name="d"):
    """A directory that neither host has seen (no grant in a directory
    another host caches), made on the coordinator: one A made would be
    A's from its MKDIR on, and files made there would be answered under
    that directory delegation (test_dir_creates.py), not made by CREATE."""
    os.mkdir(pod.export / name)
    return name


def change_on_a(pod, d, name="f"):
    """Creates d/name on A and changes it while open: returns (fd, the
    attributes A's fstat shows after the changes)."""
    fd = os.open(pod.a / d / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.write(fd, b"hello")
    os.fchown(fd, 1234, 5678)
    os.fchmod(fd, 0o640)
    os.utime(fd, ns=(1_000_000_123, 2_000_000_456))
    return fd, os.fstat(fd)


def same(st_a, st_b):
    assert stat.S_IMODE(st_b.st_mode) == stat.S_IMODE(st_a.st_mode)
    assert (st_b.st_uid, st_b.st_gid) == (st_a.st_uid, st_a.st_gid)
    assert st_b.st_mtime_ns == st_a.st_mtime_ns
    assert st_b.st_atime_ns == st_a.st_atime_ns
    assert st_b.st_size == st_a.st_size


def expected(st):
    assert stat.S_IMODE(st.st_mode) == 0o640
    assert (st.st_uid, st.st_gid) == (1234, 5678)
    assert st.st_mtime_ns == 2_000_000_456
    assert st.st_atime_ns == 1_000_000_123


def test_changes_answered_locally(dpod):
    """The three changes cost no SETATTR while the file is open; the close
    sends one, and then the export has them."""
    d = fresh_dir(dpod)
    before = requests_sent(dpod.a)
    fd, st = change_on_a(dpod, d)
    expected(st)
    mid = requests_since(dpod.a, before, settle=False)
    assert mid.get("SETATTR", 0) == 0, mid
    os.close(fd)
    after = requests_since(dpod.a, before)
    assert after.get("SETATTR", 0) == 1, after
    expected(os.stat(dpod.export / d / "f"))
    s = podfs_stats(dpod.a)
    assert s["deleg_granted"] >= 1 and s["deleg_local"] == 3 and s["deleg_errors"] == 0


def test_recall_by_stat(dpod):
    d = fresh_dir(dpod)
    fd, st = change_on_a(dpod, d)
    try:
        same(st, os.stat(dpod.b / d / "f"))
        same(st, os.stat(dpod.export / d / "f"))
    finally:
        os.close(fd)
    assert podfs_stats(dpod.a)["deleg_recalls"] >= 1


def test_recall_by_listing(dpod):
    d = fresh_dir(dpod)
    fd, st = change_on_a(dpod, d)
    try:
        names = os.listdir(dpod.b / d)
        assert names == ["f"]
        with os.scandir(dpod.b / d) as it:
            for e in it:
                same(st, e.stat(follow_symlinks=False))
    finally:
        os.close(fd)


def test_recall_by_open(dpod):
    """B opens the file by name for reading: with mode 0640 owned by
    1234:5678, root still may; it reads what A wrote... after A's
    close-to-open: here only the attributes matter."""
    d = fresh_dir(dpod)
    fd, st = change_on_a(dpod, d)
    try:
        fb = os.open(dpod.b / d / "f", os.O_RDONLY)
        try:
            same(st, os.fstat(fb))
        finally:
            os.close(fb)
    finally:
        os.close(fd)


def test_recall_by_create_same_name(dpod):
    d = fresh_dir(dpod)
    fd, st = change_on_a(dpod, d)
    try:
        with pytest.raises(FileExistsError):
            os.open(dpod.b / d / "f", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        same(st, os.stat(dpod.b / d / "f"))
    finally:
        os.close(fd)


def test_recall_by_setattr(dpod):
    """B changes the mode itself: A's changes come first, B's last."""
    d = fresh_dir(dpod)
    fd, st = change_on_a(dpod, d)
    try:
        os.chmod(dpod.b / d / "f", 0o604)
        sb = os.stat(dpod.b / d / "f")
        assert stat.S_IMODE(sb.st_mode) == 0o604
        assert (sb.st_uid, sb.st_gid) == (1234, 5678)
        assert sb.st_mtime_ns == 2_000_000_456
        # A no longer answers: its next change goes to the daemon, after B's.
        os.fchmod(fd, 0o600)
        assert stat.S_IMODE(os.stat(dpod.b / d / "f").st_mode) == 0o600
    finally:
        os.close(fd)


def test_changes_after_close_and_reopen(dpod):
    """After the close, the delegation is gone: a change of the reopened
    file is the daemon's, and B sees it."""
    d = fresh_dir(dpod)
    fd, st = change_on_a(dpod, d)
    os.close(fd)
    fd = os.open(dpod.a / d / "f", os.O_WRONLY)
    try:
        before = requests_sent(dpod.a)
        os.fchmod(fd, 0o644)
        assert requests_since(dpod.a, before, settle=False).get("SETATTR", 0) == 1
    finally:
        os.close(fd)
    assert stat.S_IMODE(os.stat(dpod.b / d / "f").st_mode) == 0o644


def test_errors_stay_synchronous(dpod):
    """What the rules cannot answer goes to the daemon at once: a
    non-owner's chmod fails with EPERM right there, a truncate and a
    UTIME_NOW are the daemon's."""
    d = fresh_dir(dpod)
    os.chmod(dpod.a / d, 0o777)
    r = file_errno(f"fd = os.open({str(dpod.a / d / 'g')!r}, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)\n"
                   "os.fchown(fd, 0, -1)\n")
    assert r == "EPERM"
    fd = os.open(dpod.a / d / "f", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    try:
        os.fchown(fd, TEST_UID + 1, TEST_GID)
        # Root may; a user other than the owner may not.
        r = file_errno(f"os.chmod({str(dpod.a / d / 'f')!r}, 0o600)\n")
        assert r == "EPERM"
        os.fsync(fd)  # the chown answered here is sent (it may be pending still)
        before = requests_sent(dpod.a)
        os.ftruncate(fd, 10)
        os.utime(fd)  # UTIME_NOW: the daemon's clock
        assert requests_since(dpod.a, before, settle=False).get("SETATTR", 0) == 2
        assert os.stat(dpod.b / d / "f").st_size == 10
    finally:
        os.close(fd)


def test_setid_bits_go_to_the_daemon(dpod):
    d = fresh_dir(dpod)
    fd = os.open(dpod.a / d / "f", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o755)
    try:
        before = requests_sent(dpod.a)
        os.fchmod(fd, 0o4755)
        assert requests_since(dpod.a, before, settle=False).get("SETATTR", 0) == 1
        os.fchown(fd, 1, 1)
        sa = os.fstat(fd)
        same(sa, os.stat(dpod.b / d / "f"))
    finally:
        os.close(fd)


def test_holder_killed(env):
    """A dies holding a delegation with changes not sent: B is held only
    for --recall-timeout (1 s here; a dead host and one whose connection
    broke look alike until then), sees the file as the daemon has it, and
    nothing else of A's is lost (its synced data is there)."""
    dpod = Pod(env, opts=OPTS, extra=EXTRA + ["--recall-timeout", "1000"])
    d = fresh_dir(dpod)
    fd = os.open(dpod.a / d / "f", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.write(fd, b"synced")
    os.fsync(fd)
    os.fchmod(fd, 0o640)
    dpod.a.kill9()
    try:
        os.close(fd)
    except OSError:
        pass
    t0 = time.monotonic()
    st = os.stat(dpod.b / d / "f")
    assert time.monotonic() - t0 < 5
    assert stat.S_IMODE(st.st_mode) in (0o600, 0o640)
    with open(dpod.b / d / "f", "rb") as f:
        assert f.read() == b"synced"
    assert stat.S_IMODE(st.st_mode) == stat.S_IMODE(os.stat(dpod.export / d / "f").st_mode)


def test_no_grant_without_daemon_option(env):
    if "--delegate" in DAEMON_ARGS:
        pytest.skip("PODFS_TEST_DAEMON_ARGS gives every daemon --delegate")
    pod = Pod(env, opts=OPTS)
    d = fresh_dir(pod)
    before = requests_sent(pod.a)
    fd, st = change_on_a(pod, d)
    os.close(fd)
    assert requests_since(pod.a, before).get("SETATTR", 0) == 3
    assert podfs_stats(pod.a)["deleg_granted"] == 0
    same(st, os.stat(pod.b / d / "f"))


def test_stalled_holder_revoked(env):
    """A stops (SIGSTOP) holding a change it answered: B waits for A as
    long as --recall-timeout (300 ms here, 5 s by default: a host that
    sends nothing for that long is taken as gone), then sees the file as
    the daemon has it; A's delegation is revoked, and once A runs again
    its change is refused, reported by its close (EIO), as a lost write
    behind is, and never applied."""
    dpod = Pod(env, opts=OPTS, extra=EXTRA + ["--recall-timeout", "300"])
    d = fresh_dir(dpod)
    fd = os.open(dpod.a / d / "f", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.fchmod(fd, 0o640)
    assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o640
    dpod.a.proc.send(signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        st = os.stat(dpod.b / d / "f")
        took = time.monotonic() - t0
    finally:
        dpod.a.proc.send(signal.SIGCONT)
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert 0.3 <= took < 2.0, took
    with pytest.raises(OSError) as e:
        os.close(fd)
    assert e.value.errno == errno.EIO
    assert stat.S_IMODE(os.stat(dpod.b / d / "f").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(dpod.export / d / "f").st_mode) == 0o600
    assert podfs_stats(dpod.a)["deleg_errors"] == 1


@pytest.mark.timeout(240)
def test_changes_resent_after_coordinator_restart(env, mount):
    """The coordinator dies while A holds changes it answered: after the
    restart (same state dir), A's close sends them to the new
    coordinator, which applies them; A answers nothing more itself."""
    daemon = env.start_daemon(extra=EXTRA)
    a = mount(daemon, opts=OPTS)
    os.mkdir(env.export / "d")  # not A's: f is made by CREATE (fresh_dir)
    fd = os.open(a / "d" / "f", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    try:
        os.write(fd, b"data")
        os.fchmod(fd, 0o640)
        os.utime(fd, ns=(3_000_000_000, 4_000_000_000))
        assert podfs_stats(a)["deleg_local"] == 2
        daemon.kill9()
        daemon.start()
        wait_for(lambda: podfs_stats(a)["reconnects"] >= 1 and podfs_stats(a)["down_since"] == 0,
                 timeout=60, what="the mount reconnected")
        before = podfs_stats(a)["deleg_local"]
        os.fchmod(fd, 0o644)  # not answered locally any more: after the reconnect
        assert podfs_stats(a)["deleg_local"] == before
    finally:
        os.close(fd)
    st = os.stat(env.export / "d" / "f")
    assert stat.S_IMODE(st.st_mode) == 0o644
    assert st.st_mtime_ns == 4_000_000_000
    assert podfs_stats(a)["deleg_errors"] == 0


def test_change_right_after_close_is_the_coordinators(env, mount):
    """The kernel releases a closed file later, on its own: a chmod right
    after the close is no longer answered under the delegation, so the
    export has it when the call returns."""
    a = mount(env.start_daemon(extra=EXTRA), opts=OPTS)
    for i, mode in enumerate((0o600, 0o755, 0o640, 0o000, 0o711) * 4):
        p = a / f"f{i}"
        with open(p, "wb") as f:
            f.write(b"x")
        os.chmod(p, mode)
        assert stat.S_IMODE(os.stat(env.export / f"f{i}").st_mode) == mode


@pytest.mark.timeout(300)
def test_untar_contents_and_attributes(env, mount):
    """GNU tar as root (create, writes of 10 KiB, fchown, fchmod,
    futimens, close per file) onto a mount with delegations: every byte,
    size, mode, owner and mtime as in the source, on the mount and in
    the export. Writes in flight together answer in any order: a change
    answered under a delegation must not carry a size older than theirs
    (the kernel takes the size of a SETATTR's reply)."""
    import subprocess
    from helpers import run
    a = mount(env.start_daemon(extra=EXTRA), opts=OPTS)
    src = "/usr/include/linux"
    tar = subprocess.Popen(["tar", "-C", "/usr/include", "-cf", "-", "linux"],
                           stdout=subprocess.PIPE)
    x = subprocess.run(["tar", "-C", str(a.path), "-xpf", "-"], stdin=tar.stdout,
                       stderr=subprocess.PIPE, text=True, timeout=240)
    tar.stdout.close()
    assert tar.wait(60) == 0 and x.returncode == 0, x.stderr
    assert podfs_stats(a)["deleg_local"] > 0
    for top in (a / "linux", env.export / "linux"):
        r = run(["diff", "-r", "--no-dereference", src, top], timeout=240, check=False)
        assert r.returncode == 0 and r.stdout == "", r.stdout[:3000] + r.stderr[:3000]
        for dirpath, _, files in os.walk(src):
            for n in files:
                s = os.lstat(os.path.join(dirpath, n))
                t = os.lstat(os.path.join(top, os.path.relpath(dirpath, src), n))
                assert (t.st_mode, t.st_uid, t.st_gid, t.st_size, t.st_mtime_ns // 10**9) == \
                    (s.st_mode, s.st_uid, s.st_gid, s.st_size, s.st_mtime_ns // 10**9), n
