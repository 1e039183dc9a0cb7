"""Peer-assisted reads (-o peers): hosts on one switch read a large file
at once; each chunk leaves the coordinator about once, every byte is
exact, and a peer that lies, stalls or vanishes costs only a detour to
the coordinator (docs/peers.md)."""

import hashlib
import os
import random
import subprocess
import threading

import socket
import struct
import time

import pytest

import pfsproto as P
from harness.switch import Switch
from helpers import PODFSD, podfs_stats, requests_sent, wait_for
from test_exerciser import check_same, exercise, put

pytestmark = [pytest.mark.netns]

MB = 1 << 20


def make_file(path, size, seed=1):
    """A file of size pseudo-random (incompressible) bytes; its sha256."""
    h = hashlib.sha256()
    block = hashlib.shake_256(str(seed).encode()).digest(MB)
    with open(path, "wb") as f:
        n = 0
        i = 0
        while n < size:
            # Every MiB differs, so that no two chunks share a digest.
            b = bytes([i & 255, (i >> 8) & 255]) + block[2:]
            b = b[:size - n]
            f.write(b)
            h.update(b)
            n += len(b)
            i += 1
    return h.hexdigest()


def sha_of(path, bufsize=MB):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(bufsize)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def read_all_at_once(paths):
    """Reads every path in a thread of its own, all at once; their
    sha256 in order."""
    out = [None] * len(paths)
    errs = []
    start = threading.Barrier(len(paths))

    def one(i, p):
        try:
            start.wait(30)
            out[i] = sha_of(p)
        except Exception as e:  # noqa: BLE001 - reported below
            errs.append(repr(e))
    ts = [threading.Thread(target=one, args=(i, p)) for i, p in enumerate(paths)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(240)
    assert not errs, errs
    assert all(not t.is_alive() for t in ts), "a reader hung"
    return out


def daemon_status(daemon):
    """podfsd status --raw of daemon, as {name: int}."""
    sock = [a.split("=", 1)[1] for a in daemon.extra if str(a).startswith("--control-socket=")]
    r = subprocess.run([PODFSD, "status", "--raw", "--control-socket", sock[0]], text=True,
                       capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        k, _, v = line.partition(" ")
        if v.lstrip("-").isdigit():
            out.setdefault(k, int(v))
    return out


_socks = [0]


class PeerPod:
    """A daemon on the main namespace's port of a switch and n hosts on
    it, each mounting with opts."""

    def __init__(self, env, n, opts="peers", extra=()):
        self.switch = Switch(env, n)
        # spin=0: no keeper threads (several mounts on 2 CPUs), and no
        # wake-up calibration at mount, which can hang with many mounts
        # starting at once on this podfs.
        opts = [f"{o},spin=0" if o else "spin=0" for o in
                ([opts] * n if isinstance(opts, str) else list(opts))]
        # A control socket of a short path (sun_path holds 108 bytes).
        _socks[0] += 1
        ctl = f"/tmp/pfsp{os.getpid()}x{_socks[0]}.sock"
        self.daemon = env.start_daemon(listen=f"{self.switch.coord_ip}:0",
                                       extra=[f"--control-socket={ctl}", *extra])
        self.export = self.daemon.export
        self.mounts = [env.mount(self.daemon, path=env.root / f"mnt-{i}",
                                 netns=self.switch.host(i), host=self.switch.coord_ip,
                                 opts=opts[i], tag=f"podfs-{i}")
                       for i in range(n)]


def test_hosts_reading_one_file_at_once_get_it_from_each_other(env):
    n = 4
    pod = PeerPod(env, n)
    size = 96 * MB + 12345
    digest = make_file(pod.export / "ckpt.bin", size)
    before = daemon_status(pod.daemon)["wire_out"]
    got = read_all_at_once([m / "ckpt.bin" for m in pod.mounts])
    assert got == [digest] * n
    sent = daemon_status(pod.daemon)["wire_out"] - before
    # About one copy, where each host reading it alone costs n.
    assert sent < 1.25 * size, (sent, size)
    st = [podfs_stats(m) for m in pod.mounts]
    assert sum(s["peer_read_peers"] for s in st) >= (n - 1) * size * 0.7, st
    assert sum(s["peer_served_bytes"] for s in st) == sum(s["peer_read_peers"] for s in st)
    assert all(s["peer_bad"] == 0 for s in st)


def test_peers_that_cannot_reach_each_other_cost_a_connect_timeout(env):
    """Four hosts that reach the coordinator but not each other: each is
    routed through the main namespace, whose links to them do not forward
    (as a firewall that drops packets to the peer port without an answer).
    They read one file at once; each peer the coordinator names costs a
    connect timeout of 1 s at most, then is left aside, not peer_timeout
    (20 s here) per chunk; every byte is exact (docs/peers.md, "Peers
    that cannot be reached")."""
    d = env.start_daemon(listen="0.0.0.0:0", extra=["--peer-min=16M"])
    hosts = [env.new_netns() for _ in range(4)]
    for h in hosts:
        # Whatever the machine forwards elsewhere: not between these.
        with open(f"/proc/sys/net/ipv4/conf/{h.hveth}/forwarding", "w") as f:
            f.write("0")
    mounts = [env.mount(d, path=env.root / f"mnt-{i}", netns=h, host=h.host_ip,
                        opts="peers,spin=0,peer_min=16M,peer_timeout=20", tag=f"podfs-{i}")
              for i, h in enumerate(hosts)]
    size = 40 * MB + 4321
    digest = make_file(d.export / "ckpt.bin", size, seed=11)
    t0 = time.monotonic()
    got = read_all_at_once([m / "ckpt.bin" for m in mounts])
    took = time.monotonic() - t0
    assert got == [digest] * len(mounts)
    st = [podfs_stats(m) for m in mounts]
    # The coordinator named peers (each read after the first finds holders),
    # none could be reached, and all came from the coordinator.
    assert sum(s["peer_unreachable"] for s in st) >= 1, st
    assert sum(s["peer_read_peers"] for s in st) == 0, st
    assert all(s["peer_read_coord"] + s["peer_skipped"] >= size for s in st), st
    # Before the connect had a timeout of its own, one peer cost 20 s.
    assert took < 15, (took, st)


# --- a peer that lies, stalls or vanishes -----------------------------------

class FakePeer:
    """A client of the coordinator (pfsproto, plaintext) that reads every
    chunk's digest of a file, says it holds them all (CHUNK_REPORT), and
    serves them to the peers it is sent to (on addr, a port of its own)
    the way mode says: "corrupt" (the right length, other bytes),
    "stall" (never answers a PEER_GET), "vanish" (half a reply, then
    closes)."""

    def __init__(self, env, daemon, addr, path, mode):
        self.mode = mode
        self.key = P.load_key(daemon.key)
        self.lsock = socket.socket()
        self.lsock.bind((addr, 0))
        self.lsock.listen(16)
        self.lsock.settimeout(0.2)
        self.port = self.lsock.getsockname()[1]
        self.stop = False
        self.gets = 0
        self.conns = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        self.c = P.Conn(daemon.host, daemon.port)
        self.c.login(self.key, caps=P.CAP_PEER)
        parts = path.split("/")
        h = self.c.root
        for nm in parts:
            h, attr = self.c.lookup(h, nm)
        fid = self.c.open(h)
        self.chunks = 0
        index = 0
        while True:
            try:
                d = self.c.chunk(h, fid, index, addr=socket.inet_aton(addr), port=self.port)
            except P.PfsError as e:
                assert e.status == errno_erange(), e
                break
            assert d["source"] == P.CK_SERVER, d
            self.c.chunk_report(h, index, d["hash"], P.CKR_HAVE)
            index += 1
        self.chunks = index

    def _serve(self):
        while not self.stop:
            try:
                s, _ = self.lsock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.conns.append(s)
            threading.Thread(target=self._conn, args=(s,), daemon=True).start()

    def _recv(self, s, n):
        b = b""
        while len(b) < n:
            k = s.recv(n - len(b))
            if not k:
                raise EOFError
            b += k
        return b

    def _reply(self, s, id, op, payload=b"", status=0):
        s.sendall(P.pack_hdr(len(payload), len(payload), id, op, P.FF_REPLY, status) + payload)

    def _conn(self, s):
        s.settimeout(30)
        try:
            while not self.stop:
                wl, rl, id, op, flags, status = P.HDR.unpack(self._recv(s, P.HDR_SIZE))
                payload = self._recv(s, wl)
                if op == P.OP_PEER_HELLO:
                    magic, cid = struct.unpack("<IQ", payload[:12])
                    cn = payload[12:44]
                    sn = os.urandom(32)
                    mac = P.auth_mac(self.key, P.PEER_SERVER_LABEL, cn, sn, cid)
                    self._reply(s, id, op, sn + mac)
                elif op == P.OP_PEER_AUTH:
                    self._reply(s, id, op)
                elif op == P.OP_PEER_GET:
                    self.gets += 1
                    off, size = struct.unpack("<II", payload[32:40])
                    if self.mode == "stall":
                        while not self.stop:
                            time.sleep(0.05)
                        return
                    data = os.urandom(size)
                    if self.mode == "vanish":
                        body = P.u32(size) + data
                        s.sendall(P.pack_hdr(len(body), len(body), id, op, P.FF_REPLY, 0) +
                                  body[:len(body) // 2])
                        return
                    self._reply(s, id, op, P.u32(size) + data)
        except (EOFError, OSError):
            pass
        finally:
            s.close()

    def close(self):
        self.stop = True
        self.c.close()
        self.lsock.close()
        self.thread.join(10)
        for s in self.conns:
            try:
                s.close()
            except OSError:
                pass


def errno_erange():
    import errno
    return errno.ERANGE


@pytest.mark.plaintext
@pytest.mark.parametrize("mode", ["corrupt", "stall", "vanish"])
def test_a_peer_that_lies_stalls_or_vanishes_costs_only_a_detour(env, mode):
    """The coordinator sends the reader to a peer that holds every chunk;
    the peer sends other bytes (detected by the digest), nothing (the
    reader gives up after peer_timeout) or half a reply: the reader gets
    every byte right from the coordinator instead, says why in its log,
    and the coordinator stops sending anyone to that peer."""
    pod = PeerPod(env, 1, opts="peers,tls=off,peer_timeout=1,peer_min=16M",
                  extra=["--peer-min=16M"])
    size = 48 * MB + 777
    digest = make_file(pod.export / "ckpt.bin", size, seed=7)
    fake = FakePeer(env, pod.daemon, pod.switch.coord_ip, "ckpt.bin", mode)
    try:
        assert fake.chunks == 13
        t0 = time.monotonic()
        assert sha_of(pod.mounts[0] / "ckpt.bin") == digest
        took = time.monotonic() - t0
        st = podfs_stats(pod.mounts[0])
        ds = daemon_status(pod.daemon)
    finally:
        fake.close()
    assert fake.gets >= 1
    # Every read by chunks, but for those made while the file's version
    # was not known current or the connection was being made again
    # (peer_skipped: a loaded machine), and for a READ that joined a
    # chunk whose fetch failed as the peer went (peer_fallbacks, 1 MiB
    # each at most): those went the usual way.
    assert st["peer_answered"] + st["peer_skipped"] + st["peer_fallbacks"] * MB >= size, st
    assert st["peer_fallbacks"] <= 4 and st["peer_answered"] >= size // 2, st
    assert st["peer_read_peers"] == 0
    assert st["peer_read_coord"] == size
    if mode == "corrupt":
        assert st["peer_bad"] == 1, st
        pattern = r"sent chunk \d+ \(sha256 [0-9a-f]{16}\.\.\.\) that does not match its digest"
    else:
        assert st["peer_failed"] >= 1, st
        pattern = r"did not deliver chunk \d+ .*read from the coordinator instead"
    log = open(env.logs / "podfs-0.log", errors="replace").read() \
        if (env.logs / "podfs-0.log").exists() else ""
    if not log:
        log = "".join(open(f, errors="replace").read() for f in env.logs.glob("podfs-0*"))
    import re
    assert re.search(pattern, log), log[-3000:]
    # Logged once, not once per chunk.
    assert len(re.findall(pattern, log)) == 1
    # Three strikes and the coordinator stops offering it (the kernel
    # reads a few chunks at once: those all went to it before that).
    assert ds["peer_reports_bad"] >= 3
    assert ds["peer_to_peer"] <= 8 < fake.chunks, ds
    # One timeout, not one per chunk.
    if mode == "stall":
        assert took < 13 * 1.0, took


def test_a_peer_that_dies_mid_read_leaves_the_others_exact(env):
    """Host 0 holds every chunk; hosts 1 and 2 read from it, slowly, and
    host 0's podfs is killed while they do: they finish from the
    coordinator (or each other), every byte right."""
    pod = PeerPod(env, 3, opts="peers,peer_timeout=2,peer_min=16M", extra=["--peer-min=16M"])
    size = 64 * MB + 3
    digest = make_file(pod.export / "ckpt.bin", size, seed=3)
    assert sha_of(pod.mounts[0] / "ckpt.bin") == digest
    assert podfs_stats(pod.mounts[0])["peer_store_bytes"] == size
    out, errs = [None, None], []

    def slow_read(i):
        try:
            h = hashlib.sha256()
            with open(pod.mounts[i] / "ckpt.bin", "rb") as f:
                while True:
                    b = f.read(MB)
                    if not b:
                        break
                    h.update(b)
                    time.sleep(0.01)
            out[i - 1] = h.hexdigest()
        except Exception as e:  # noqa: BLE001 - reported below
            errs.append(repr(e))
    ts = [threading.Thread(target=slow_read, args=(i,)) for i in (1, 2)]
    for t in ts:
        t.start()
    wait_for(lambda: podfs_stats(pod.mounts[1])["peer_read_peers"] >= 8 * MB, 60,
             what="host 1 reading from host 0")
    pod.mounts[0].kill9()
    for t in ts:
        t.join(120)
    assert not errs, errs
    assert out == [digest, digest]
    st = [podfs_stats(m) for m in pod.mounts[1:]]
    # By chunks, but for READs made while the version was not known
    # (peer_skipped) and READs that joined a chunk whose fetch from the
    # killed host failed (peer_fallbacks, 1 MiB each at most).
    got = [(s["peer_answered"], s["peer_skipped"], s["peer_fallbacks"]) for s in st]
    assert all(a + k + f * MB >= size and f <= 8 and a >= size // 2 for a, k, f in got), got
    assert all(s["peer_bad"] == 0 for s in st), st


def test_a_file_changed_by_another_host_is_read_fresh(env):
    """Hosts 0 and 1 hold every chunk of the file; host 2 changes one MiB
    of it in place (same size), and then the coordinator's host changes
    another beside podfs (same size, same mtime): 0 and 1 read the new
    bytes each time, never a peer's old chunk. (In 2 MiB chunks: the
    mounts learn the coordinator's chunk size from its first answer.)"""
    pod = PeerPod(env, 3, opts="peers,peer_min=16M", extra=["--peer-min=16M", "--peer-chunk=2M"])
    size = 40 * MB
    digest = make_file(pod.export / "ckpt.bin", size, seed=5)
    readers = [pod.mounts[0] / "ckpt.bin", pod.mounts[1] / "ckpt.bin"]
    assert read_all_at_once(readers) == [digest] * 2
    assert all(podfs_stats(m)["peer_store_bytes"] == size for m in pod.mounts[:2])

    # Through podfs, from another host.
    with open(pod.mounts[2] / "ckpt.bin", "r+b") as f:
        f.seek(17 * MB + 5)
        f.write(b"\xa5" * MB)
    want = sha_of(pod.export / "ckpt.bin")
    assert want != digest
    assert read_all_at_once(readers) == [want] * 2

    # Beside podfs, on the coordinator's host, keeping size and mtime.
    st = os.stat(pod.export / "ckpt.bin")
    with open(pod.export / "ckpt.bin", "r+b") as f:
        f.seek(3 * MB)
        f.write(b"\x5a" * 4096)
    os.utime(pod.export / "ckpt.bin", ns=(st.st_atime_ns, st.st_mtime_ns))
    want2 = sha_of(pod.export / "ckpt.bin")
    assert want2 != want

    def fresh():
        return read_all_at_once(readers) == [want2] * 2
    # The watch's push reaches the hosts within moments (coherence.md).
    wait_for(fresh, 10, interval=0.2, what="the change beside podfs to be read")
    for m in pod.mounts[:2]:
        assert podfs_stats(m)["peer_bad"] == 0


def test_a_host_reads_back_exactly_what_it_changed(env):
    """A host reads a file in 1 MiB chunks (read-only opens), changes it
    through another open, and reads it again: it reads its own bytes,
    never a chunk it fetched before (its writes send it no push; the
    recent CHUNK answers are per data version; before, the old bytes
    came back). The other host's first READs, sent before the
    coordinator's chunk size is known, get all their bytes, not an end
    of file in the middle (before: 1 MiB of a 2.3 MB file). Then the
    exerciser's random writes, truncates, fallocates, copies and mmap
    writes, read back through its writable open (the usual way) and
    after its close (by chunks)."""
    pod = PeerPod(env, 2, opts="peers,peer_min=1M", extra=["--peer-min=1M", "--peer-chunk=1M"])
    a, b = pod.mounts
    rnd = random.Random(7)
    model = bytearray(rnd.randbytes(5 * MB + 12345))
    (a / "f").write_bytes(model)
    fd = os.open(a / "f", os.O_RDWR)
    try:
        for i in range(40):
            # Its pages dropped, each round's read is by chunks: a
            # writer's kernel may keep them (its own writes), and then
            # nothing here would fetch a chunk.
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            assert (a / "f").read_bytes() == model, f"round {i}: stale bytes read back"
            off, n = rnd.randrange(0, len(model) + 4096), rnd.choice([1, 4096, 300000])
            data = rnd.randbytes(n)
            assert os.pwrite(fd, data, off) == n
            put(model, off, data)
    finally:
        os.close(fd)
    assert (a / "f").read_bytes() == model
    assert (b / "f").read_bytes() == model
    for seed in (1, 2):
        got, log = exercise(a / f"fsx{seed}", seed, 1500)
        check_same(got, (pod.export / f"fsx{seed}").read_bytes(), "the export", log)
        with open(b / f"fsx{seed}", "rb") as f:
            check_same(got, f.read(), "the other host", log)
    for m in (a, b):  # the reads went by chunks
        st = {k: v for k, v in podfs_stats(m).items() if k.startswith("peer_")}
        assert st["peer_answered"] > 5 * MB, (m, st)


def test_small_files_and_mounts_without_peers_send_no_chunk_requests(env):
    """Without -o peers a mount reads as before; with it, a file under
    peer_min, too; and a coordinator that serves no peers (--peer-min 0)
    makes a peers mount read as before."""
    pod = PeerPod(env, 2, opts=["peers", ""], extra=[])
    make_file(pod.export / "small.bin", 8 * MB)
    make_file(pod.export / "big.bin", 64 * MB)
    for m in pod.mounts:
        sha_of(m / "small.bin")
    assert "CHUNK" not in requests_sent(pod.mounts[0])
    sha_of(pod.mounts[1] / "big.bin")
    assert "CHUNK" not in requests_sent(pod.mounts[1])
    assert "peer_port" not in podfs_stats(pod.mounts[1])
    sha_of(pod.mounts[0] / "big.bin")
    assert requests_sent(pod.mounts[0])["CHUNK"] >= 16

    (env.root / "export0").mkdir()
    make_file(env.root / "export0" / "big.bin", 64 * MB)
    d0 = env.start_daemon(listen=f"{pod.switch.coord_ip}:0", extra=["--peer-min=0"],
                          export=env.root / "export0", state_dir=env.root / "state0")
    m = env.mount(d0, path=env.root / "mnt-old", netns=pod.switch.host(0),
                  host=pod.switch.coord_ip, opts="peers,spin=0", tag="podfs-old")
    sha_of(m / "big.bin")
    assert "CHUNK" not in requests_sent(m)
    assert requests_sent(m)["READ"] >= 64


def peer_port(m):
    return podfs_stats(m)["peer_port"]


def closed_within(s, secs):
    """True if the peer closed s (EOF or reset) within secs."""
    s.settimeout(secs)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def test_peer_connections_are_authenticated_and_limited(env):
    """A mount's peer port: a connection that does not speak TLS with
    the pod key is closed; at most PEERSRV_PER_SOURCE (4) connections from
    one address are kept, the rest closed at once; the mount serves its
    peers all the same afterwards."""
    pod = PeerPod(env, 2, opts="peers,peer_min=16M", extra=["--peer-min=16M"])
    digest = make_file(pod.export / "ckpt.bin", 24 * MB, seed=9)
    assert sha_of(pod.mounts[0] / "ckpt.bin") == digest
    ip, port = pod.switch.ip(0), peer_port(pod.mounts[0])

    # Plaintext where TLS is due: no answer, the connection closed.
    with socket.create_connection((ip, port), timeout=5) as s:
        s.sendall(P.pack_hdr(44, 44, 1, P.OP_PEER_HELLO) + b"\0" * 44)
        assert closed_within(s, 15)

    wait_for(lambda: podfs_stats(pod.mounts[0])["peer_open_conns"] == 0, 10,
             what="the refused connection to end")
    socks = [socket.create_connection((ip, port), timeout=5) for _ in range(6)]
    try:
        time.sleep(0.5)
        kept = [not closed_within(s, 0.5) for s in socks]
        st = podfs_stats(pod.mounts[0])
        assert kept.count(True) == 4, (kept, st)
        assert st["peer_refused_conns"] >= 2, st
    finally:
        for s in socks:
            s.close()
    assert sha_of(pod.mounts[1] / "ckpt.bin") == digest
    assert podfs_stats(pod.mounts[1])["peer_read_peers"] == 24 * MB


@pytest.mark.plaintext
def test_a_peer_without_the_pod_key_gets_nothing(env):
    """With tls=off the peer handshake alone keeps strangers out: a
    client that does not know the pod key fails PEER_AUTH and is
    closed; it never gets a chunk."""
    pod = PeerPod(env, 1, opts="peers,tls=off,peer_min=16M", extra=["--peer-min=16M"])
    make_file(pod.export / "ckpt.bin", 24 * MB, seed=10)
    sha_of(pod.mounts[0] / "ckpt.bin")
    ip, port = pod.switch.ip(0), peer_port(pod.mounts[0])
    c = P.Conn(ip, port)
    try:
        r = P.Reader(c.call(P.OP_PEER_HELLO, P.u32(P.PEER_MAGIC) + P.u64(7) + os.urandom(32)))
        r.take(32 + 32)
        with pytest.raises(P.PfsError) as e:
            c.call(P.OP_PEER_AUTH, os.urandom(32))
        assert e.value.status == 13  # EACCES
        c.wait_closed(5)
    finally:
        c.close()
    # Asked for a chunk before authenticating: closed, nothing sent.
    c = P.Conn(ip, port)
    try:
        c.send_frame(P.OP_PEER_GET, b"\0" * 32 + P.u32(0) + P.u32(MB))
        c.wait_closed(5)
    finally:
        c.close()


@pytest.mark.plaintext
def test_a_caller_who_may_only_write_a_file_gets_no_digest(env):
    """A digest is as good as the bytes (a peer hands them out for it):
    CHUNK through a file open for writing only is refused with EBADF, as
    READ is, also once a host that may read it made the digest known."""
    pod = PeerPod(env, 1, opts="peers,tls=off,peer_min=8M", extra=["--peer-min=8M"])
    w = pod.export / "W"
    make_file(w, 16 * MB, seed=12)
    os.chown(w, 1000, 1000)
    os.chmod(w, 0o622)
    sha_of(pod.mounts[0] / "W")  # root on host 0 reads it by chunks
    key = P.load_key(pod.daemon.key)
    with P.Conn(pod.daemon.host, pod.daemon.port) as c:
        c.login(key, caps=P.CAP_PEER)
        cr = P.creds(2000, 2000)
        h, _ = c.lookup(c.root, "W", cr=cr)
        fid = c.open(h, flags=os.O_WRONLY, cr=cr)
        for f, index in ((fid, 1), (999, 2)):  # 999: opened for the request
            with pytest.raises(P.PfsError) as e:
                c.chunk(h, f, index, cr=cr, flags=os.O_WRONLY)
            assert e.value.status == 9, e.value  # EBADF


def test_memory_bounds_hold(env):
    """A client keeps at most peer_cache bytes of chunks (the oldest go)
    and reads exactly all the same; the coordinator lists at most
    peer-records chunks per client."""
    pod = PeerPod(env, 2, opts="peers,peer_min=16M,peer_cache=12M",
                  extra=["--peer-min=16M", "--limits=peer-records=5"])
    size = 48 * MB
    digest = make_file(pod.export / "ckpt.bin", size, seed=11)
    assert read_all_at_once([m / "ckpt.bin" for m in pod.mounts]) == [digest] * 2
    for m in pod.mounts:
        st = podfs_stats(m)
        assert st["peer_store_bytes"] <= 12 * MB, st
        assert st["peer_store_evicted"] >= 6, st
        # Most by chunks; a READ finding the store full of chunks in use
        # goes the usual way.
        assert st["peer_answered"] + st["peer_fallbacks"] * MB + st["peer_skipped"] >= size, st
    ds = daemon_status(pod.daemon)
    assert ds["peer_records"] <= 2 * 5, ds
    assert ds["peer_peers"] == 2
