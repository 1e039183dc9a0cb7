"""test_wire_coding.py: how file data travels: zero-word coding and LZ4
where they pay (and only there: LZ4 only while the link is backed up,
unless told otherwise), decoded exactly by another host and by pfsproto's
own decoders, and READ replies that go out uncoded spliced from the file
to the socket (zero-copy).
"""

import os
import signal
import subprocess
import time

import pytest

import pfsproto as P
from helpers import MiB, PODFS, podfs_stats as stats, read_file, wait_for, write_file


# --- zero-word coding ------------------------------------------------------------

@pytest.mark.timeout(120)
def test_compressible_data_shrinks_on_the_wire(env, m):
    """Stats: a float32-like array with many zeros costs at most half its
    size on the wire; random data goes out raw (about its size)."""
    import struct
    vals = [0.0] * 7 + [1.5]
    block = b"".join(struct.pack("<f", v) for v in vals) * 4096
    data = block * (16 * MiB // len(block))
    s0 = stats(m)
    write_file(m / "zeros", data)
    s1 = stats(m)
    assert s1["file_written"] - s0["file_written"] == len(data)
    assert s1["wire_out"] - s0["wire_out"] <= len(data) // 2
    rnd = os.urandom(8 * MiB)
    write_file(m / "rnd", rnd)
    s2 = stats(m)
    assert s2["wire_out"] - s1["wire_out"] >= len(rnd)
    assert read_file(env.export / "zeros") == data


def float_weights(size, seed):
    """float32 'weights': ~2/3 zeros in runs, the rest from a 255-value
    palette (quantized), like scripts/bench's compressible checkpoint."""
    import random
    import struct
    rng = random.Random(seed)
    pal = [struct.pack("<f", (k - 128) / 2048.0) for k in range(256) if k != 128]
    out, left = [], size // 4
    while left > 0:
        z = min(left, int(rng.expovariate(1 / 24.0)))
        out.append(bytes(4 * z))
        left -= z
        v = min(left, int(rng.expovariate(1 / 11.0)) + 1)
        out.append(b"".join(rng.choices(pal, k=v)))
        left -= v
    return b"".join(out)[:size]


@pytest.mark.timeout(180)
def test_codings_read_back_on_other_host(pod):
    """Compression that pays: A writes compressible float32
    weights, random bytes and a file of zero regions and holes; B reads
    each back byte-equal. Both mounts' stats show the compressible and
    zero-region files costing under half their size on the wire in each
    direction, and the random file about its size."""
    size = 12 * MiB
    rnd = os.urandom(size)
    files = {
        "weights": float_weights(size, 3),
        "random": rnd,
        # 1 MiB random, 2 MiB zeros, ... then a hole: zero regions that
        # straddle request boundaries.
        "zeroes": b"".join(rnd[i * MiB:(i + 1) * MiB] + bytes(2 * MiB) for i in range(3)),
    }
    for name, data in files.items():
        sa = stats(pod.a)
        with open(pod.a / name, "wb") as f:
            f.write(data)
            if name == "zeroes":
                f.truncate(len(data) + 3 * MiB + 123)  # a trailing hole
            os.fsync(f.fileno())
        if name == "zeroes":
            files[name] = data = data + bytes(3 * MiB + 123)
        sa2 = stats(pod.a)
        wire = sa2["wire_out"] - sa["wire_out"]
        if name == "random":
            assert len(data) <= wire <= len(data) * 1.02, (name, wire)
        else:
            assert wire <= len(data) // 2, (name, wire, len(data))
    for name, data in files.items():
        sb = stats(pod.b)
        got = read_file(pod.b / name)
        assert got == data, name
        sb2 = stats(pod.b)
        wire = sb2["wire_in"] - sb["wire_in"]
        assert sb2["raw_in"] - sb["raw_in"] >= len(data), name
        if name == "random":
            assert len(data) <= wire <= len(data) * 1.02, (name, wire)
        else:
            assert wire <= len(data) // 2, (name, wire, len(data))
        assert read_file(pod.export / name) == data, name


@pytest.mark.plaintext
def test_server_zero_word_replies_follow_the_spec(env, daemon, m):
    """A READ reply for zero-heavy data comes zero-word coded to a peer that
    offers CAP_ZR, and pfsproto's independent decoder (written from
    wire.h) gets the file's bytes back; a peer without CAP_ZR never gets
    PFS_FF_ZR."""
    data = float_weights(MiB, 9)
    write_file(m / "w", data)
    key = P.load_key(env.key)
    for caps, want in ((P.CAP_ZR, P.FF_ZR), (0, 0), (P.CAP_LZ4 | P.CAP_ZR, P.FF_ZR)):
        with P.connect(daemon.host, daemon.port, key, caps=caps) as c:
            h, _ = c.lookup(c.root, b"w")
            fid = c.open(h)
            c.send_frame(P.OP_READ, P.ROOT + P.fh(h) + P.u64(fid) + P.u32(0) + P.u64(0) +
                         P.u32(MiB))
            f = c.recv_frame()
            assert f.status == 0 and f.flags & (P.FF_ZR | P.FF_LZ4) == want, (caps, f.flags)
            if want:
                assert f.wire_len <= MiB // 2
            r = P.Reader(f.payload)
            assert r.bytes() == data
            r.done()


# --- LZ4 -------------------------------------------------------------------------

def source_text(size):
    """Text like Python sources: LZ4 shrinks it, zero-word coding cannot
    (no zero bytes at all)."""
    out, n, i = [], 0, 0
    while n < size:
        out.append(b"    def handler_%06d(self, event, context=None):  # see issue %d\n"
                   % (i, i * 7 % 1000))
        n += len(out[-1])
        i += 1
    return b"".join(out)[:size]


def read_reply(c, h, fid, off, size):
    return c.send_frame(P.OP_READ, P.ROOT + P.fh(h) + P.u64(fid) + P.u32(0) + P.u64(off) +
                        P.u32(size))


def raw_queued(d):
    """The bytes podfsd has queued to send so far, counted uncompressed
    (from the stats line it logs on SIGUSR1)."""
    n = d.proc.output().count("of them zero-copy")
    d.proc.send(signal.SIGUSR1)
    wait_for(lambda: d.proc.output().count("of them zero-copy") > n, 10, what="stats line")
    line = [x for x in d.proc.output().splitlines() if "of them zero-copy" in x][-1]
    return int(line.split(", sent ")[1].split("(")[1].split()[0])


@pytest.mark.timeout(120)
@pytest.mark.plaintext
def test_lz4_only_where_it_pays(env):
    """LZ4 costs more time than it saves on a fast link, so by default
    (--lz4 auto) the daemon compresses a reply only while the link is
    backed up: a lone READ of compressible text goes out raw, READs sent
    while earlier replies wait unread come LZ4-compressed. --lz4 always
    compresses every reply where it saves, --lz4 never none; each decodes
    (pfsproto's own LZ4 decoder) to the file's bytes."""
    size = 256 * 1024
    data = source_text(size)
    (env.export / "src.py").write_bytes(data)
    daemons = {mode: env.start_daemon(extra=[] if mode == "auto" else ["--lz4", mode])
               for mode in ("auto", "always", "never")}
    key = P.load_key(env.key)
    for mode, d in daemons.items():
        with P.connect(d.host, d.port, key, caps=P.CAP_LZ4 | P.CAP_ZR) as c:
            h, _ = c.lookup(c.root, b"src.py")
            fid = c.open(h)
            read_reply(c, h, fid, 0, size)
            f = c.recv_frame()
            assert f.status == 0 and f.payload[4:] == data, mode
            if mode == "always":
                assert f.flags & P.FF_LZ4 and f.wire_len <= size // 2, (mode, f.flags, f.wire_len)
            else:
                assert not f.flags & (P.FF_LZ4 | P.FF_ZR) and f.wire_len == 4 + size, (mode, f.flags)

    # A backlog: 64 replies (16 MiB) asked for and not read fill the
    # socket buffers (the receiver's fixed small, else the kernel may grow
    # it to hold them all) and queue in the daemon; READs sent then are
    # coded. The first reply to go out found the link empty: raw (which
    # READ that is depends on the daemon's threads).
    d = daemons["auto"]
    with P.connect(d.host, d.port, key, caps=P.CAP_LZ4 | P.CAP_ZR, timeout=30,
                   rcvbuf=256 * 1024) as c:
        h, _ = c.lookup(c.root, b"src.py")
        fid = c.open(h)
        base = raw_queued(d)
        first = [read_reply(c, h, fid, 0, size) for _ in range(64)]
        want = base + len(first) * (P.HDR_SIZE + 4 + size)
        wait_for(lambda: raw_queued(d) >= want, 60, what="the 64 replies queued")
        late = [read_reply(c, h, fid, 0, size) for _ in range(4)]
        got = {}
        for _ in range(len(first) + len(late)):
            f = c.recv_frame()
            assert f.status == 0 and f.payload[4:] == data
            got[f.id] = f
        assert set(got) == set(first + late)
        assert not next(iter(got.values())).flags & P.FF_LZ4
        for i in late:
            assert got[i].flags & P.FF_LZ4 and got[i].wire_len <= size // 2, got[i].flags


@pytest.mark.timeout(120)
def test_client_lz4_option(env, daemon, mount):
    """-o lz4=always: compressible writes shrink on the wire; lz4=never:
    they go out raw; a bad value is refused with exit code 2."""
    data = source_text(8 * MiB)
    for mode in ("always", "never"):
        mnt = mount(opts="lz4=" + mode)
        s0 = stats(mnt)
        write_file(mnt / ("t-" + mode), data)
        s1 = stats(mnt)
        wire = s1["wire_out"] - s0["wire_out"]
        if mode == "always":
            assert wire <= len(data) // 2, (mode, wire)
        else:
            assert wire >= len(data), (mode, wire)
        assert read_file(env.export / ("t-" + mode)) == data
    r = subprocess.run([str(PODFS), daemon.addr, str(env.root / "nomnt"), "-o", "lz4=sometimes"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    assert r.returncode == 2 and "lz4" in r.stderr and len(r.stderr.strip().splitlines()) == 1


# --- zero-copy -------------------------------------------------------------------

@pytest.mark.timeout(120)
@pytest.mark.plaintext
def test_zero_copy_reads(env):
    """READ replies that go out uncoded are spliced from the file
    to the socket. Through a mount (random data, after a remount so the
    reads reach the daemon) and through the raw protocol with unaligned
    ranges, a range crossing EOF, and a burst of requests whose replies
    are not read at once (the socket fills: the rest of a reply is queued
    behind, copied): every reply is byte-exact, and SIGUSR1's log line
    shows bytes sent zero-copy."""
    d = env.start_daemon()
    size = 24 * MiB + 12345
    data = os.urandom(size)
    (env.export / "r").write_bytes(data)
    # Without TLS: its records are encrypted on the way, so nothing is
    # spliced on a TLS connection.
    mm = env.mount(d, opts="tls=off")
    assert read_file(mm / "r") == data
    with open(mm / "r", "rb") as f:
        f.seek(5 * MiB + 7)
        assert f.read(3 * MiB) == data[5 * MiB + 7:8 * MiB + 7]
    key = P.load_key(env.key)
    with P.connect(d.host, d.port, key) as c:
        h, _ = c.lookup(c.root, b"r")
        fid = c.open(h)
        for off, n in ((1000, MiB), (size - 70000, MiB), (4096, 65536), (size, MiB)):
            assert c.read(h, fid, off, n) == data[off:off + n], (off, n)
        ids = {}
        for i in range(20):
            off = (i * 7 * MiB + i * 513) % (size - MiB)
            ids[c.send_frame(P.OP_READ, P.ROOT + P.fh(h) + P.u64(fid) + P.u32(0) +
                             P.u64(off) + P.u32(MiB))] = off
        time.sleep(0.5)
        for _ in range(len(ids)):
            f = c.recv_frame()
            assert f.status == 0 and f.id in ids
            r = P.Reader(f.payload)
            off = ids.pop(f.id)
            assert r.bytes() == data[off:off + MiB], off
            r.done()
    d.proc.send(signal.SIGUSR1)
    wait_for(lambda: "of them zero-copy" in d.proc.output(), 5, what="stats line")
    line = [x for x in d.proc.output().splitlines() if "of them zero-copy" in x][-1]
    spliced = int(line.split("uncompressed, ")[1].split()[0])
    assert spliced >= 8 * MiB, line
