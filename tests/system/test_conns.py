"""test_conns.py: several TCP connections per mount (-o conns=N).

The extra connections are bulk connections of the mount's one daemon
session: READ and WRITE spread over all the connections, everything else
(metadata, locks, pushes) stays on the main connection. Data stays byte-exact, a
daemon restart loses nothing that fsync or close confirmed, a bulk
connection killed mid-transfer is recovered transparently, and coherence
between hosts holds.
"""

import os
import random
import re
import subprocess
import threading
import time

import pytest

from harness import Pod
from helpers import (MiB, RECONNECT, check_uncommitted_resent, Worker, podfs_stats as stats,
                     read_file, wait_for, write_file)


def chunk(i, size=MiB):
    """Deterministic, incompressible chunk number i (full 1 MiB frames)."""
    return random.Random(i).randbytes(size)


def bulk_peers(daemon):
    """client ports of the bulk connections the daemon accepted, in order."""
    return [int(p) for p in re.findall(r"conn \d+: [\d.]+:(\d+) \(.*?\) authenticated, bulk",
                                       daemon.log())]


def conn_bytes(daemon):
    """{client port: bytes the daemon received on it} for its live connections."""
    r = subprocess.run(["ss", "-tniH", "state", "established", "sport", "=",
                        f":{daemon.port}"], capture_output=True, text=True, timeout=10,
                       check=True)
    out = {}
    cur = None
    for line in r.stdout.splitlines():
        if not line.startswith((" ", "\t")):
            cur = int(line.split()[-1].rsplit(":", 1)[1])
            out[cur] = 0
        elif cur is not None:
            m = re.search(r"bytes_received:(\d+)", line)
            if m:
                out[cur] = int(m.group(1))
    return out


def write_chunks(path, n, fsync_every=0):
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        for i in range(n):
            os.pwrite(fd, chunk(i), i * MiB)
            if fsync_every and i % fsync_every == fsync_every - 1:
                os.fsync(fd)
    finally:
        os.close(fd)


def check_chunks(data, n):
    assert len(data) == n * MiB
    for i in range(n):
        assert data[i * MiB:(i + 1) * MiB] == chunk(i), f"chunk {i} differs"


@pytest.mark.timeout(180)
def test_three_conns_big_files_byte_exact(env):
    """conns=3: three connections of one session, writes spread over all
    three, files read back equal here and on a conns=1 mount."""
    d = env.start_daemon()
    m3 = env.mount(d, opts="conns=3")
    wait_for(lambda: len(bulk_peers(d)) == 2, 20, what="two bulk connections")
    wait_for(lambda: stats(m3)["conns_up"] == 3, 20, what="conns_up 3 in the stats")
    assert stats(m3)["conns"] == 3
    log = d.log()
    assert len(re.findall(r"authenticated, session [0-9a-f]+ new", log)) == 1, log
    data = os.urandom(40 * MiB + 4321)
    fd = os.open(m3 / "big", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        for off in range(0, len(data), MiB):
            os.pwrite(fd, data[off:off + MiB], off)
        os.fsync(fd)
    finally:
        os.close(fd)
    assert read_file(env.export / "big") == data
    # The write data went over all three connections.
    got = conn_bytes(d)
    assert len(got) == 3, got
    assert set(bulk_peers(d)) < set(got), (bulk_peers(d), got)
    for p, n in got.items():
        assert n > 4 * MiB, (p, got)
    # Read back through the conns=3 mount (cold: a fresh file) and another.
    write_file(env.export / "big2", data[::-1])
    assert read_file(m3 / "big2") == data[::-1]
    m1 = env.mount(d, path=env.root / "mnt1", opts="conns=1")
    assert read_file(m1 / "big") == data
    assert read_file(m3 / "big") == data


@pytest.mark.timeout(300)
def test_three_conns_kill9_during_write_stream(env):
    """kill -9 of the daemon twice in a stream of writes with periodic
    fsync, conns=3, each time once all three connections were back: every
    write, fsync and close succeeds (hard mount) and the whole file is on
    the export, equal."""
    d = env.start_daemon()
    mm = env.mount(d, opts="conns=3")
    wait_for(lambda: stats(mm)["conns_up"] == 3, 20, what="three connections")
    stop = threading.Event()
    done = [0]

    slots = 128  # chunk i goes to slot i % slots: the file stays 128 MiB

    def writer():
        fd = os.open(mm / "stream", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        try:
            i = 0
            while i < 20000 and not (stop.is_set() and i % 8 == 0 and i >= slots):
                os.pwrite(fd, chunk(i), (i % slots) * MiB)
                i += 1
                if i % 8 == 0:
                    os.fsync(fd)
                    done[0] = i
        finally:
            os.close(fd)  # close reports errors of write-behind
        return i

    t = Worker(writer)
    for _ in range(2):
        start = done[0]
        wait_for(lambda: done[0] >= start + 8 or not t.is_alive(), 30, what="fsynced writes")
        assert t.is_alive(), f"the stream ended before the restart: {t.error!r}"
        d.kill9()
        time.sleep(0.3)
        d.start()
        wait_for(lambda: stats(mm)["conns_up"] == 3, RECONNECT, what="three connections back")
        assert t.is_alive(), f"the stream ended before the restart: {t.error!r}"
    time.sleep(0.3)
    stop.set()
    n = t.join(RECONNECT * 2)
    got = read_file(env.export / "stream")
    assert len(got) == slots * MiB
    for p in range(slots):
        last = p + (n - 1 - p) // slots * slots  # the last chunk written to slot p
        assert got[p * MiB:(p + 1) * MiB] == chunk(last), f"slot {p} differs"
    assert mm.proc.output().count("(server restarted)") == 2


@pytest.mark.timeout(240)
def test_three_conns_uncommitted_writes_resent_after_restart(env):
    """Writes acknowledged on bulk connections by a daemon whose machine
    then crashed with its page cache are sent again before fsync
    succeeds."""
    d = env.start_daemon(machine=True)
    mm = env.mount(d, opts="conns=3")
    wait_for(lambda: len(bulk_peers(d)) == 2, 20, what="two bulk connections")
    check_uncommitted_resent(env, d, mm, 2 * MiB, 6 * MiB)


def main_peer(daemon):
    """client port of the first main connection the daemon accepted."""
    return int(re.findall(r"conn \d+: [\d.]+:(\d+) \(.*?\) authenticated, session",
                          daemon.log())[0])


@pytest.mark.timeout(240)
@pytest.mark.parametrize("which", ["bulk", "main"])
def test_connection_killed_mid_transfer(env, which):
    """ss -K on a bulk connection (or the main one) while a big file is
    written and another is read: the requests on it are sent again, the
    data is exact, and the connection comes back."""
    d = env.start_daemon()
    mm = env.mount(d, opts="conns=3")
    wait_for(lambda: len(bulk_peers(d)) == 2, 20, what="two bulk connections")
    n = 64
    rdata = os.urandom(32 * MiB)
    write_file(env.export / "r", rdata)
    tw = Worker(write_chunks, mm / "w", n, 16)
    tr = Worker(read_file, mm / "r")
    wait_for(lambda: (env.export / "w").exists() and
             os.path.getsize(env.export / "w") > 4 * MiB, 30, what="writes started")
    victim = bulk_peers(d)[0] if which == "bulk" else main_peer(d)
    r = subprocess.run(["ss", "-K", "-tnH", "dst", f"127.0.0.1:{d.port}", "sport", "=",
                        f":{victim}"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    assert str(victim) in r.stdout, f"ss -K killed nothing: {r.stdout!r}"
    tw.join(RECONNECT)
    assert tr.join(RECONNECT) == rdata, "read back differs"
    check_chunks(read_file(env.export / "w"), n)
    out = mm.proc.output()
    if which == "bulk":
        assert re.search(r"connection [12] to \S+ lost", out), out
        wait_for(lambda: len(bulk_peers(d)) == 3, RECONNECT, what="the bulk connection back")
    else:
        assert "connection to" in out and "lost" in out, out
        wait_for(lambda: "reconnected to" in mm.proc.output(), RECONNECT,
                 what="the main connection back")
        assert "session" in d.log() and "resumed" in d.log()
    wait_for(lambda: len(conn_bytes(d)) == 3, RECONNECT, what="three connections again")
    wait_for(lambda: stats(mm)["conns_up"] == 3, RECONNECT, what="conns_up 3 again")


@pytest.mark.timeout(240)
def test_three_conns_coherence_between_hosts(env):
    """Two hosts with conns=3: what A writes and closes, B (which cached the
    old contents) reads after; size and mtime follow."""
    pod = Pod(env, opts="conns=3")
    a, b = pod.a, pod.b
    old = os.urandom(3 * MiB)
    write_file(a / "f", old)
    assert read_file(b / "f") == old  # B caches pages and attributes
    for rnd in range(3):
        new = os.urandom((5 + rnd) * MiB + 777)
        time.sleep(0.01)
        write_file(a / "f", new)
        st_a = os.stat(a / "f")
        wait_for(lambda: os.stat(b / "f").st_size == len(new), 10, what="size on B")
        assert read_file(b / "f") == new
        st_b = os.stat(b / "f")
        assert st_b.st_mtime_ns == st_a.st_mtime_ns
        # And back: B writes in place, A sees it.
        fd = os.open(b / "f", os.O_WRONLY)
        try:
            os.pwrite(fd, b"B" * MiB, MiB)
        finally:
            os.close(fd)
        exp = new[:MiB] + b"B" * MiB + new[2 * MiB:]
        wait_for(lambda: read_file(a / "f") == exp, 10, what="B's write on A")
        old = exp


@pytest.mark.timeout(60)
@pytest.mark.plaintext
def test_bulk_connection_protocol(env, daemon):
    """The wire rules of PFS_CAP_BULK (wire.h), with a raw client: refused
    without a session that has its main connection; joins it (fids opened
    on the main connection work on it); only READ, WRITE and PING; closed
    when its session ends."""
    import errno as E
    import pfsproto as P
    if daemon.external:
        pytest.skip("needs its own daemon")
    key = P.load_key(env.key)
    # No session yet: refused with ENOTCONN, after authentication.
    with P.Conn(daemon.host, daemon.port) as b:
        b.hello(key, caps=P.CAP_BULK)
        assert b.server_caps & P.CAP_BULK, "the server does not echo CAP_BULK"
        with pytest.raises(P.PfsError) as ei:
            b.auth(key)
        assert ei.value.errno == E.ENOTCONN
    with P.Conn(daemon.host, daemon.port) as main:
        root = main.login(key)
        h, _, fid = main.create(root, "f", fid=77)
        with P.Conn(daemon.host, daemon.port) as b:
            b.hello(key, client_id=main.client_id, caps=P.CAP_BULK)
            b.auth(key)
            assert b.auth_flags & 1, "a bulk connection resumes its session"
            assert b.write(h, fid, 0, b"x" * 100000) == 100000
            assert b.read(h, fid, 0, 10) == b"x" * 10
            assert main.read(h, fid, 99995, 10) == b"x" * 5
            # Anything else on a bulk connection is a protocol violation.
            b.send_frame(P.OP_GETATTR, P.ROOT + P.fh(h))
            ok, frames = b.wait_closed(10)
            assert ok and not any(f.status == 0 and f.op == P.OP_GETATTR for f in frames)
        # The main connection is not disturbed by it.
        assert main.read(h, fid, 0, 3) == b"xxx"
        with P.Conn(daemon.host, daemon.port) as b2:
            b2.hello(key, client_id=main.client_id, caps=P.CAP_BULK)
            b2.auth(key)
            main.call(P.OP_GOODBYE)
            ok, _ = b2.wait_closed(10)
            assert ok, "a bulk connection outlived its session"
    assert read_file(env.export / "f") == b"x" * 100000


@pytest.mark.timeout(60)
@pytest.mark.plaintext
def test_bulk_connections_per_session_capped(env, daemon):
    """A session takes at most PFS_BULK_MAX (15) bulk connections; one more
    is refused with EMFILE."""
    import contextlib
    import errno as E
    import pfsproto as P
    if daemon.external:
        pytest.skip("needs its own daemon")
    key = P.load_key(env.key)
    with contextlib.ExitStack() as st:
        main = st.enter_context(P.Conn(daemon.host, daemon.port))
        main.login(key)
        for _ in range(15):
            b = st.enter_context(P.Conn(daemon.host, daemon.port))
            b.hello(key, client_id=main.client_id, caps=P.CAP_BULK)
            b.auth(key)
        b = st.enter_context(P.Conn(daemon.host, daemon.port))
        b.hello(key, client_id=main.client_id, caps=P.CAP_BULK)
        with pytest.raises(P.PfsError) as ei:
            b.auth(key)
        assert ei.value.errno == E.EMFILE
