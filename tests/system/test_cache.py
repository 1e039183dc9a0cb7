"""Issue 4, client side: long kernel caches that stay coherent.

Mounts use the default (long, 1 hour) timeouts; every change on one host
must be visible on the other within BOUND seconds, through server pushes.
"""

import os
import subprocess
import time

import pytest

from helpers import PODFS, read_file, write_file

BOUND = 0.1  # seconds: the issue's visibility bound
SLACK = 0.4  # extra time allowed on this loaded 2-core CI machine


def visible_within(pred, bound=BOUND + SLACK):
    """Polls pred until true; returns the time it took, fails after bound."""
    t0 = time.monotonic()
    while True:
        try:
            if pred():
                return time.monotonic() - t0
        except OSError:
            pass
        if time.monotonic() - t0 > bound:
            pytest.fail(f"change not visible within {bound:.2f} s")
        time.sleep(0.002)


def exists(p):
    return os.path.lexists(p)


@pytest.mark.netns
def test_issue4_data_size_mtime_mode_across_hosts(pod):
    a, b = pod.a, pod.b
    write_file(a / "f", b"one")
    assert read_file(b / "f") == b"one"          # B caches data and attrs
    st0 = os.stat(b / "f")
    # Data and size.
    write_file(a / "f", b"two, longer")
    visible_within(lambda: read_file(b / "f") == b"two, longer")
    assert os.stat(b / "f").st_size == 11
    # mtime.
    os.utime(a / "f", (1000000, 2000000))
    visible_within(lambda: os.stat(b / "f").st_mtime == 2000000)
    # mode.
    os.chmod(a / "f", 0o600)
    visible_within(lambda: (os.stat(b / "f").st_mode & 0o777) == 0o600)
    assert os.stat(b / "f").st_ino == st0.st_ino


@pytest.mark.netns
def test_issue4_names_across_hosts(pod):
    a, b = pod.a, pod.b
    os.mkdir(a / "d")
    assert os.listdir(b / "d") == []             # B caches the listing
    # Negative entry, then create.
    assert not exists(b / "d" / "new")
    assert not exists(b / "d" / "new")           # now a cached negative entry
    write_file(a / "d" / "new", b"x")
    visible_within(lambda: exists(b / "d" / "new"))
    visible_within(lambda: os.listdir(b / "d") == ["new"])
    # Rename.
    os.rename(a / "d" / "new", a / "d" / "renamed")
    visible_within(lambda: not exists(b / "d" / "new") and exists(b / "d" / "renamed"))
    visible_within(lambda: os.listdir(b / "d") == ["renamed"])
    assert read_file(b / "d" / "renamed") == b"x"
    # Delete.
    os.unlink(a / "d" / "renamed")
    visible_within(lambda: not exists(b / "d" / "renamed"))
    visible_within(lambda: os.listdir(b / "d") == [])
    # mkdir / rmdir.
    os.mkdir(a / "d" / "sub")
    visible_within(lambda: os.path.isdir(b / "d" / "sub"))
    os.rmdir(a / "d" / "sub")
    visible_within(lambda: not exists(b / "d" / "sub"))


@pytest.mark.netns
def test_issue4_close_to_open_many_rounds(pod):
    """Write+close on A, open on B sees it, both ways, many times."""
    a, b = pod.a, pod.b
    for i in range(30):
        src, dst = (a, b) if i % 2 == 0 else (b, a)
        data = f"round {i} ".encode() * (i + 1)
        write_file(src / "ping", data)
        visible_within(lambda: read_file(dst / "ping") == data)


@pytest.mark.netns
def test_issue4_direct_change_in_export(pod):
    a = pod.a
    write_file(a / "g", b"via mount")
    assert read_file(a / "g") == b"via mount"
    assert not exists(a / "h")
    write_file(pod.export / "g", b"direct change")
    write_file(pod.export / "h", b"direct create")
    visible_within(lambda: read_file(a / "g") == b"direct change", bound=1.0 + SLACK)
    visible_within(lambda: exists(a / "h"), bound=1.0 + SLACK)


@pytest.mark.netns
def test_issue4_no_stale_data_after_daemon_restart(pod):
    a, b = pod.a, pod.b
    write_file(a / "r", b"before")
    os.mkdir(a / "rd")
    assert read_file(b / "r") == b"before"
    assert not exists(b / "rd" / "later")
    assert os.listdir(b / "rd") == []
    pod.daemon.kill9()
    # Changed while the coordinator is down (no push can reach B).
    write_file(pod.export / "r", b"after, longer")
    write_file(pod.export / "rd" / "later", b"z")
    pod.daemon.start()
    # B reconnects (backoff <= 5 s), revalidates and drops what changed.
    visible_within(lambda: read_file(b / "r") == b"after, longer", bound=15)
    visible_within(lambda: exists(b / "rd" / "later"), bound=5)
    visible_within(lambda: os.listdir(b / "rd") == ["later"], bound=5)


def _count_requests(log):
    return sum(1 for line in log.splitlines() if "request " in line and "connection" in line)


def test_issue4_warm_reads_cost_no_requests(env, daemon, mount):
    """Warm stat/open/read of cached files: few or no server requests."""
    m = mount(opts="log_level=debug")
    os.makedirs(m / "pkg" / "sub")
    for i in range(20):
        write_file(m / "pkg" / f"m{i}.py", b"x = 1\n" * 100)
    for _ in range(2):
        for i in range(20):
            os.stat(m / "pkg" / f"m{i}.py")
            assert not exists(m / "pkg" / f"missing{i}.py")
            read_file(m / "pkg" / f"m{i}.py")
        os.listdir(m / "pkg")
    # RELEASE and RELEASEDIR are sent by the kernel asynchronously: let the
    # warm-up's last ones land before counting.
    time.sleep(0.3)
    before = _count_requests(m.proc.output())
    for i in range(20):
        os.stat(m / "pkg" / f"m{i}.py")
        assert not exists(m / "pkg" / f"missing{i}.py")
        read_file(m / "pkg" / f"m{i}.py")
    os.listdir(m / "pkg")
    time.sleep(0.3)
    after = _count_requests(m.proc.output())
    # Only OPEN/RELEASE (close-to-open) may remain: 2 per file read.
    assert after - before <= 2 * 20 + 2, m.proc.output()[-3000:]


def test_issue4_podfs_warm(env, daemon, mount):
    m = mount()
    os.makedirs(m / "t" / "a" / "b")
    total = 0
    for i in range(50):
        data = os.urandom(1000 * i)
        total += len(data)
        write_file(m / "t" / ("a" if i % 2 else "a/b") / f"f{i}", data)
    r = subprocess.run([str(PODFS), "warm", str(m / "t")], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "50/50 files" in r.stderr, r.stderr
    r = subprocess.run([str(PODFS), "warm", str(m / "nonexistent")], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode != 0


def _count_op(log, op):
    return sum(1 for line in log.splitlines()
               if "request " in line and "connection" in line and f"({op})" in line)


def test_issue4_getattr_answered_locally(env, daemon, mount):
    """fstat after read (the kernel drops atime) and stat after the
    kernel's own invalidation: no GETATTR crosses the network while the
    client's attributes are known current; own changes still show."""
    m = mount(opts="log_level=debug")
    os.makedirs(m / "p")
    for i in range(10):
        write_file(m / "p" / f"f{i}", b"x" * (100 + i))
    os.link(m / "p" / "f0", m / "p" / "hard")
    time.sleep(0.3)
    # Look the files up; f0's link made its attributes untrusted: one
    # GETATTR for it in this first round.
    for i in range(10):
        os.stat(m / "p" / f"f{i}")
        with open(m / "p" / f"f{i}", "rb") as f:
            f.read()
            os.fstat(f.fileno())
    before = _count_op(m.proc.output(), "GETATTR")
    for _ in range(3):
        for i in range(10):
            with open(m / "p" / f"f{i}", "rb") as f:
                assert f.read() == b"x" * (100 + i)
                assert os.fstat(f.fileno()).st_size == 100 + i
    time.sleep(0.3)
    assert _count_op(m.proc.output(), "GETATTR") == before, m.proc.output()[-3000:]
    # Own changes are never pushed back: they must not be answered stale.
    assert os.stat(m / "p" / "f0").st_nlink == 2
    os.unlink(m / "p" / "hard")
    assert os.stat(m / "p" / "f0").st_nlink == 1
    with open(m / "p" / "f1", "ab") as f:
        f.write(b"more")
        f.flush()
        assert os.fstat(f.fileno()).st_size == 105
    assert os.stat(m / "p" / "f1").st_size == 105
    os.chmod(m / "p" / "f2", 0o640)
    assert os.stat(m / "p" / "f2").st_mode & 0o777 == 0o640
    os.truncate(m / "p" / "f3", 7)
    assert os.stat(m / "p" / "f3").st_size == 7
    os.setxattr(m / "p" / "f4", "user.k", b"v")
    st = os.stat(m / "p" / "f4")
    assert st.st_ctime_ns == os.stat(env.export / "p" / "f4").st_ctime_ns
