"""test_status.py: `podfs status` shows live figures that match known
traffic: the server and connection, the round trip, requests by operation
with their latency, bytes on the wire, write-behind and pushes."""

import os
import re
import signal
import socket
import subprocess

import pytest

from helpers import PODFS, read_file, wait_for, write_file


def status(*args, timeout=60):
    return subprocess.run([PODFS, "status", *map(str, args)], text=True, timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def row(out, op):
    """The requests row of op: (total, per_s, mean, p50, p99)."""
    m = re.search(rf"^  {op} +(\d+) +([\d.]+) +(\d+) +(\d+) +(\d+)$", out, re.M)
    assert m, f"no {op} row in:\n{out}"
    return int(m[1]), float(m[2]), int(m[3]), int(m[4]), int(m[5])


def test_status_counts_known_traffic(env, daemon, mount):
    # max_inline=0: reading f3 back is a READ (this mount keeps no copy of
    # what it wrote, and no content comes with a lookup).
    mm = mount(daemon, opts="max_inline=0")
    for i in range(10):
        write_file(mm / f"f{i}", b"x" * 1000)
    assert read_file(mm / "f3") == b"x" * 1000
    r = status("-i", "0.2", mm)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith(f"{mm}: 127.0.0.1:{daemon.port} (server 127.0.0.1:{daemon.port})"), out
    assert "0 reconnects; connections 1 of 1 up" in out, out
    assert re.search(r"round trip \d+ us", out), out
    total, _, mean, p50, p99 = row(out, "CREATE")
    assert total == 10
    assert 0 < p50 <= p99 and mean > 0
    assert row(out, "WRITE")[0] == 10
    assert re.search(r"files: read 1000 B, written 9\.8 KiB", out), out
    # Live: the rates are over the interval, the totals grow.
    for i in range(10, 15):
        write_file(mm / f"f{i}", b"y")
    assert row(status("-i", "0.2", mm).stdout, "CREATE")[0] == 15


def test_status_lists_every_mount_and_pushes(env, daemon, mount):
    a = mount(daemon)
    b = mount(daemon, path=env.root / "mnt-b")
    os.listdir(b)
    write_file(a / "seen", b"1")
    os.stat(b / "seen")
    write_file(a / "seen", b"22")  # a change b caches: a push to b
    r = status("-i", "0.1")
    # Mounts of other tests on this machine may be listed too (and may be
    # dead: a killed run leaves them); only ours must be healthy.
    ours = [ln for ln in r.stderr.splitlines() if str(env.root) in ln]
    assert not ours and (r.returncode == 0 or r.stderr), r.stderr
    assert f"{a}: " in r.stdout and f"{b}: " in r.stdout, r.stdout
    mb = status("-i", "0.1", b).stdout
    assert int(re.search(r"pushes from the server: (\d+)", mb)[1]) >= 1, mb


def test_status_errors(env, daemon, mount):
    mm = mount(daemon)
    r = status("-x")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    r = status("-i", "0", mm)
    assert r.returncode == 2, r.stderr
    r = status(env.root)
    assert r.returncode == 1 and "not a podfs mount point" in r.stderr, r.stderr
    r = status("--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: podfs status"), r.stdout


@pytest.mark.timeout(120)
def test_status_of_an_unreachable_server(env, mount):
    d = env.start_daemon()
    mm = mount(d)
    write_file(mm / "f", b"x")
    d.kill9()
    r = status("-i", "0.1", mm)
    assert r.returncode == 0, r.stderr
    assert "round trip: server unreachable" in r.stdout, r.stdout
    assert "connections 0 of 1 up" in r.stdout, r.stdout
    assert re.search(r"DISCONNECTED for \d+ s: \d+ requests waiting", r.stdout), r.stdout



def test_status_of_a_mount_whose_process_died(env, daemon, mount):
    """A mount left behind by a killed podfs is named as such, with what to
    do, and the other mounts are still shown."""
    alive = mount(daemon)
    dead = mount(daemon, path=env.root / "mnt-dead")
    dead.proc.expect_rc = None
    dead.proc.send(signal.SIGKILL)
    dead.proc.wait(10)
    try:
        r = status("-i", "0.1")
        assert r.returncode == 1
        assert f"{dead}: its podfs process is gone" in r.stderr, r.stderr
        assert "fusermount3 -u" in r.stderr
        assert f"{alive}: " in r.stdout, r.stdout
    finally:
        dead.force_down()


def test_latency_histogram_of_all_requests_adds_up(env, daemon, mount):
    """user.podfs.stats's lat_hist: one UPPER_US:COUNT word per non-empty
    bucket, ascending, its counts the sum of every lat_OP's count (what
    lets the pod benchmark merge mounts' latencies and take differences)."""
    mm = mount(daemon)
    for i in range(20):
        write_file(mm / f"h{i}", b"z" * 100)
    os.listdir(mm)

    def settled():  # nothing in flight between two readings (write-behind)
        a = os.getxattr(mm, "user.podfs.stats").decode()
        return a if a == os.getxattr(mm, "user.podfs.stats").decode() else None
    text = wait_for(settled, 10, what="the counters to settle")
    lines = dict(ln.split(" ", 1) for ln in text.splitlines() if " " in ln)
    per_op = sum(int(v.split()[0]) for k, v in lines.items()
                 if k.startswith("lat_") and k != "lat_hist")
    hist = [w.split(":") for w in lines["lat_hist"].split()]
    bounds = [int(u) for u, _ in hist if u != "inf"]
    assert bounds == sorted(set(bounds)) and all(int(c) > 0 for _, c in hist), hist
    assert sum(int(c) for _, c in hist) == per_op
    assert per_op >= 40


def test_a_podfs_finishing_late_leaves_the_next_mounts_socket(env, daemon, mount):
    """The kernel gives an unmounted filesystem's device number to the
    next mount at once, and with it the status socket's name: a podfs
    that finishes after the next mount made its socket must not remove
    it (it did: that mount's `podfs status` lost its round trip). The
    old mount's podfs is stopped across its unmount and the new mount.
    The number is the machine's: a test running beside this one (scripts/test
    runs three files at once) may mount in between and take it, as it did
    five times in a row in one CI run; each try takes about 0.4 s. A
    podfs makes its socket just after its mount is up: the test waits for
    each one's (one CI run looked before the new one had made it)."""
    def made(sock):  # which socket file is there: (inode, mtime), or None
        try:
            st = os.stat(sock)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns

    # A podfs binds its socket, then gives the file its own mtime, then
    # listens: the file is final once a connection is taken (one CI run
    # read it between bind and mark and saw the mtime change after).
    def listening(sock, olds):
        if made(sock) in (None, olds):
            return None
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(2)
            s.connect(sock)
        except OSError:
            return None
        finally:
            s.close()
        return made(sock)

    for attempt in range(30):
        old = mount(daemon, path=env.root / f"old{attempt}")
        dev = old.info["devid"]
        sock = f"/run/podfs/mount-{dev.replace(':', '_')}.sock"
        olds = wait_for(lambda: listening(sock, None), 10,
                        what="the old mount's status socket")
        news = None
        old.proc.send(signal.SIGSTOP)
        try:
            r = subprocess.run(["fusermount3", "-u", str(old.path)], capture_output=True,
                               text=True, timeout=30)
            assert r.returncode == 0, r.stderr
            new = mount(daemon, path=env.root / f"new{attempt}")
            if new.info["devid"] == dev:  # its socket replaces the old one's
                news = wait_for(lambda: listening(sock, olds), 10,
                                what="the new mount's status socket")
        finally:
            old.proc.send(signal.SIGCONT)
        assert old.proc.wait(30) == 0, "the old mount's podfs did not exit 0"
        if news:
            break
    else:
        pytest.fail("no new mount got the old one's device number in 30 tries")
    assert made(sock) == news, f"{sock} is gone or not the new mount's"
    r = status(new)
    assert r.returncode == 0, r.stderr
    assert re.search(r"round trip \d+ us", r.stdout), r.stdout
