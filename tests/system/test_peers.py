"""Peer-assisted reads (-o peers): hosts on one switch read a large file
at once; each chunk leaves the coordinator about once, every byte is
exact, and a peer that lies, stalls or vanishes costs only a detour to
the coordinator (docs/peers.md)."""

import hashlib
import os
import subprocess
import threading

import pytest

from harness.switch import Switch
from helpers import PODFSD, podfs_stats

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
        # A control socket of a short path (sun_path holds 108 bytes).
        _socks[0] += 1
        ctl = f"/tmp/pfsp{os.getpid()}x{_socks[0]}.sock"
        self.daemon = env.start_daemon(listen=f"{self.switch.coord_ip}:0",
                                       extra=[f"--control-socket={ctl}", *extra])
        self.export = self.daemon.export
        self.mounts = [env.mount(self.daemon, path=env.root / f"mnt-{i}",
                                 netns=self.switch.host(i), host=self.switch.coord_ip,
                                 opts=opts, tag=f"podfs-{i}")
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
    print("sent", sent, "size", size, {k: v for k, v in daemon_status(pod.daemon).items() if k.startswith("peer")})
    assert sent < 1.25 * size, (sent, size)
    st = [podfs_stats(m) for m in pod.mounts]
    assert sum(s["peer_read_peers"] for s in st) >= (n - 1) * size * 0.7, st
    assert sum(s["peer_served_bytes"] for s in st) == sum(s["peer_read_peers"] for s in st)
    print([{k: v for k, v in s.items() if k.startswith("peer")} for s in st])
    assert all(s["peer_bad"] == 0 for s in st)
