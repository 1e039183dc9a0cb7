"""test_security.py: confinement to the export, hostile input, and
authentication.

Raw protocol tests use pfsproto.py to say things a real client never
would: names that climb out, forged handles, garbage, bad lengths and
codings, floods; the daemon must refuse them (an error or a closed
connection), never crash or hang, and keep serving everyone else.
Permissions are in test_permissions.py.
"""

import errno
import os
import random
import socket
import stat
import struct
import time

import pytest

import pfsproto as P
from harness import is_mounted
from helpers import PODFS, PODFSD, TEST_GID, TEST_UID, read_file, run, wait_for, write_file
from syscalls import name_to_handle


# --- confinement -----------------------------------------------------------------

SECRET = b"SERVER-SIDE SECRET " + os.urandom(8).hex().encode()


DECOY = b"client-side decoy"


@pytest.fixture
def jail(env, mount):
    """Export TMP/a/export next to TMP/a/secret; escaping symlinks inside."""
    a = env.root / "a"
    export = a / "export"
    export.mkdir(parents=True)
    os.chmod(a, 0o755)
    os.chmod(export, 0o755)
    write_file(a / "secret", SECRET)
    os.chmod(a / "secret", 0o644)
    os.mkdir(a / "secretdir")
    write_file(a / "secretdir" / "inner", SECRET)
    # What the client's own resolution of "../secret" from the mount reaches.
    write_file(env.root / "secret", DECOY)
    os.symlink("../secret", export / "esc")
    os.symlink(str(a / "secret"), export / "abs")
    os.symlink("..", export / "dotdot")
    os.symlink(str(a), export / "absdir")
    os.symlink("../../../../../../../../../../etc/passwd", export / "deep")
    os.symlink("../created-by-follow", export / "dangling")
    write_file(export / "inside", b"inside data")
    os.mkdir(export / "sub")
    write_file(export / "sub" / "b", b"a/b data")
    os.mkdir(export / "a")
    write_file(export / "a" / "b", b"a/b data")
    d = env.start_daemon(export=export)
    mm = mount(d, path=env.root / "mnt")
    return dict(a=a, export=export, daemon=d, m=mm)


def never_secret(fn):
    try:
        data = fn()
    except OSError:
        return True
    return SECRET not in data


def test_symlinks_resolve_on_client(env, jail):
    mm, a = jail["m"], jail["a"]
    assert os.readlink(mm / "esc") == "../secret"
    assert os.readlink(mm / "abs") == str(a / "secret")
    # Relative escape: the client resolves mnt/../secret = TMP/secret (decoy).
    assert read_file(mm / "esc") == DECOY
    assert read_file(mm / "dotdot" / "secret") == DECOY
    assert sorted(os.listdir(mm / "dotdot")) == sorted(os.listdir(env.root))
    assert never_secret(lambda: read_file(mm / "deep"))
    # Writes and chmod through the link act on the client's target.
    mode = os.stat(a / "secret").st_mode
    with open(mm / "esc", "ab") as f:
        f.write(b"+")
    os.chmod(mm / "esc", 0o600)
    assert read_file(a / "secret") == SECRET
    assert os.stat(a / "secret").st_mode == mode
    assert read_file(env.root / "secret") == DECOY + b"+"
    # Creating through a dangling link does not create next to the export.
    fd = os.open(mm / "dangling", os.O_CREAT | os.O_WRONLY, 0o644)
    os.close(fd)
    assert not os.path.exists(a / "created-by-follow")
    assert os.path.exists(env.root / "created-by-follow")


def test_absolute_symlink_not_followed_by_server(env, jail):
    """An absolute link is resolved in the client's namespace. To tell a
    server-side follow from the client's own resolution, read it from a
    private mount namespace where the client sees a decoy at that path."""
    mm, a = jail["m"], jail["a"]
    decoy_dir = env.root / "decoydir"
    decoy_dir.mkdir()
    write_file(decoy_dir / "secret", DECOY)
    script = (f"mount --bind {decoy_dir} {a} && cat {mm / 'abs'} && echo && "
              f"ls {mm / 'absdir'}")
    r = run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
            timeout=60, check=False)
    assert SECRET.decode() not in r.stdout
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == DECOY.decode()
    assert r.stdout.splitlines()[1:] == ["secret"]  # the decoy dir, not TMP/a


def test_dotdot_from_mount_root_stays_on_client(env, jail):
    mm = jail["m"]
    assert os.stat(mm / "..").st_ino == os.stat(env.root).st_ino
    assert sorted(os.listdir(mm / "..")) == sorted(os.listdir(env.root))
    assert read_file(mm / ".." / "secret") == DECOY
    # mnt/sub/../.. is the client's TMP, so this is TMP/secret (the decoy),
    # where a server-side walk would give TMP/a/secret.
    assert read_file(mm / "sub" / ".." / ".." / "secret") == DECOY


def refused(fn, *a):
    """True if the server answers with an error or closes the connection."""
    try:
        r = fn(*a)
    except (P.PfsError, P.Closed, P.BadReply):
        return True
    except P.Timeout:
        return False
    return r is None


@pytest.mark.plaintext
def test_raw_lookup_bad_names(env, jail):
    d = jail["daemon"]
    key = P.load_key(env.key)
    bad = [b"..", b".", b"a/b", b"/", b"/etc", b"", b"x\0y", b"../secret", b"n" * 256]
    for nm in bad:
        with P.connect(d.host, d.port, key) as c:
            assert refused(c.lookup, c.root, nm), f"LOOKUP {nm!r} was accepted"
    with P.connect(d.host, d.port, key) as c:
        sub, _ = c.lookup(c.root, b"sub")
        assert refused(c.lookup, sub, b".."), "LOOKUP .. from a subdirectory was accepted"
    # The legitimate path still works on a fresh connection.
    with P.connect(d.host, d.port, key) as c:
        a_fh, _ = c.lookup(c.root, b"a")
        b_fh, attr = c.lookup(a_fh, b"b")
        assert attr["size"] == len(b"a/b data")


@pytest.mark.plaintext
def test_raw_symlink_not_followed(env, jail):
    d = jail["daemon"]
    key = P.load_key(env.key)
    with P.connect(d.host, d.port, key) as c:
        h, attr = c.lookup(c.root, b"esc")
        assert stat.S_ISLNK(attr["mode"])
        assert c.readlink(h) == b"../secret"
    for link in (b"esc", b"abs", b"deep"):
        with P.connect(d.host, d.port, key) as c:
            h, attr = c.lookup(c.root, link)

            def open_read():
                fid = c.open(h)
                return c.read(h, fid, 0, 4096)
            try:
                data = open_read()
            except (P.PfsError, P.Closed, P.BadReply):
                continue
            assert SECRET not in data, f"OPEN+READ of symlink {link} followed it"
    for link in (b"dotdot", b"absdir"):
        with P.connect(d.host, d.port, key) as c:
            h, attr = c.lookup(c.root, link)
            assert refused(c.lookup, h, b"secret"), f"LOOKUP through symlink {link}"


@pytest.mark.plaintext
def test_raw_forged_handles(env, jail):
    """Handles are MAC'd (daemon/handles.c: type, kernel handle, then a
    MAC of both): a handle with any bit flipped, a byte rewritten, cut
    short or extended, or the kernel handle of a file outside the export
    grafted in, is refused with ESTALE by every operation; the genuine
    handles work."""
    d, a, export = jail["daemon"], jail["a"], jail["export"]
    key = P.load_key(env.key)
    c = P.connect(d.host, d.port, key, timeout=10)
    try:
        fh, _ = c.lookup(c.root, b"inside")
        dh, _ = c.lookup(c.root, b"sub")

        def accepted(h, is_dir):
            """The operations the daemon carried out on handle h; every
            other one must have been refused with ESTALE (a closed
            connection fails the test too)."""
            ops = {"GETATTR": lambda: c.getattr(h)}
            if is_dir:
                ops["LOOKUP"] = lambda: c.lookup(h, b"b")
            else:
                ops["OPEN+READ"] = lambda: c.read(h, c.open(h), 0, 4096)
            done = []
            for name, op in ops.items():
                try:
                    op()
                except P.PfsError as e:
                    assert e.status == errno.ESTALE, f"{name} of {h.hex()}: {e}"
                    continue
                done.append(name)
            return done

        # The genuine handles work: a refusal below means the forgery.
        assert accepted(fh, False) == ["GETATTR", "OPEN+READ"]
        assert accepted(dh, True) == ["GETATTR", "LOOKUP"]
        n = 0
        for h, is_dir in ((fh, False), (dh, True)):
            forged = []
            # Every bit flipped, one at a time, and a few whole-byte rewrites.
            for i in range(len(h)):
                for bit in range(8):
                    forged.append(h[:i] + bytes([h[i] ^ (1 << bit)]) + h[i + 1:])
                forged.append(h[:i] + bytes([h[i] ^ 0xFF]) + h[i + 1:])
            # Cut short and extended.
            forged += [h[:-1], h[:1], h[:-16], h + b"\0", h + os.urandom(8)]
            for f in forged:
                assert 1 <= len(f) <= P.FH_MAX
                assert accepted(f, is_dir) == [], f"forged handle {f.hex()} accepted"
                n += 1
        # Graft the kernel's handle of files outside the export into the
        # handle, as an attacker who knows the layout would. The layout is
        # checked first: if it changed, this test must be changed with it.
        htype, kh = name_to_handle(export / "inside")
        assert fh == struct.pack("<I", htype) + kh + fh[-16:], \
            f"wire handle {fh.hex()} is no longer type + kernel handle {kh.hex()} + 16-byte MAC"
        mac = fh[-16:]
        for target in (a / "secret", a, a / "secretdir" / "inner"):
            t_type, th = name_to_handle(target)
            f = struct.pack("<I", t_type) + th + mac
            assert accepted(f, target.is_dir()) == [], f"grafted handle for {target} accepted"
            n += 1
        # Still the genuine handles work on the same connection.
        assert accepted(fh, False) == ["GETATTR", "OPEN+READ"]
    finally:
        c.close()
    print("forged handles refused:", n)


# --- hostile input ---------------------------------------------------------------

def healthy(env, daemon, mnt=None):
    """The daemon survived: still running, a new session logs in, a mount works."""
    assert daemon.alive(), "podfsd died: " + daemon.proc.died_msg()
    with P.connect(daemon.host, daemon.port, P.load_key(env.key)) as c:
        assert c.ping(777) == 777
        c.getattr(c.root)
    if mnt is not None:
        name = "health-" + os.urandom(4).hex()
        data = os.urandom(100000)
        write_file(mnt / name, data)
        assert read_file(mnt / name) == data
        assert read_file(daemon.export / name) == data


def closes(c, timeout=10):
    ok, frames = c.wait_closed(timeout)
    # An error reply before closing is fine; a success reply is not.
    for f in frames:
        assert f.status != 0 or f.op == P.OP_HELLO, f"unexpected success reply {f}"
    return ok


@pytest.mark.plaintext
def test_garbage_bytes(env, daemon, m):
    rnd = random.Random(2)
    for n in (1, 23, 24, 100, 4096, 65536):
        with P.Conn(daemon.host, daemon.port) as c:
            c.send_raw(rnd.randbytes(n))
            if n >= 24:
                assert closes(c), f"{n} garbage bytes did not get the connection closed"
    # Garbage after a good login.
    with P.connect(daemon.host, daemon.port, P.load_key(env.key)) as c:
        c.send_raw(rnd.randbytes(4096))
        assert closes(c)
    healthy(env, daemon, m)


@pytest.mark.plaintext
def test_huge_lengths(env, daemon, m):
    key = P.load_key(env.key)
    for wl, rl in ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 10), (10, 0xFFFFFFFF),
                   (P.MAX_HANDSHAKE + 1, P.MAX_HANDSHAKE + 1)):
        with P.Conn(daemon.host, daemon.port) as c:
            c.send_raw(P.pack_hdr(wl, rl, 1, P.OP_HELLO) + b"x" * 100)
            assert closes(c), f"pre-auth header wire_len={wl:#x} raw_len={rl:#x} not refused"
    for wl, rl in ((0xFFFFFFFF, 0xFFFFFFFF), (P.MAX_WIRE + 1, P.MAX_PAYLOAD),
                   (P.MAX_PAYLOAD + 1, P.MAX_PAYLOAD + 1)):
        with P.connect(daemon.host, daemon.port, key) as c:
            c.send_raw(P.pack_hdr(wl, rl, 9, P.OP_PING) + b"x" * 100)
            assert closes(c), f"header wire_len={wl:#x} raw_len={rl:#x} not refused"
    healthy(env, daemon, m)


@pytest.mark.plaintext
def test_frames_before_auth(env, daemon, m):
    key = P.load_key(env.key)
    # An operation as the very first frame.
    with P.Conn(daemon.host, daemon.port) as c:
        c.send_frame(P.OP_GETATTR, P.ROOT + P.fh(b"\x01" * 8))
        assert closes(c)
    # AUTH without HELLO.
    with P.Conn(daemon.host, daemon.port) as c:
        c.send_frame(P.OP_AUTH, os.urandom(32))
        assert closes(c)
    # HELLO, then an operation instead of AUTH.
    with P.Conn(daemon.host, daemon.port) as c:
        c.hello(key)
        c.send_frame(P.OP_LOOKUP, P.ROOT + P.fh(b"\x01" * 8) + P.name(b"x"))
        assert closes(c)
    # A reply or push flag, a bad magic, an unknown flag bit.
    for frame in (
        P.pack_hdr(0, 0, 1, P.OP_HELLO, flags=P.FF_REPLY),
        P.pack_hdr(0, 0, 0, P.OP_HELLO, flags=P.FF_PUSH),
        P.pack_hdr(0, 0, 1, P.OP_HELLO, flags=0x80),
        P.pack_hdr(0, 0, 1, 200),
    ):
        with P.Conn(daemon.host, daemon.port) as c:
            c.send_raw(frame)
            assert closes(c)
    with P.Conn(daemon.host, daemon.port) as c:
        p = P.u32(0xdeadbeef) + P.u16(1) + P.u16(1) + P.u64(0) + P.u64(1) + \
            os.urandom(32) + P.host(b"x")
        c.send_frame(P.OP_HELLO, p)
        assert closes(c)
    healthy(env, daemon, m)


@pytest.mark.plaintext
def test_bad_lz4(env, daemon, m):
    key = P.load_key(env.key)
    # A well-formed compressed PING works (the sender may compress anything).
    with P.connect(daemon.host, daemon.port, key) as c:
        blk = P.lz4_literals(P.u64(4242))
        c.send_frame(P.OP_PING, blk, flags=P.FF_LZ4, raw_len=8)
        f = c.recv_frame()
        assert f.status == 0 and P.Reader(f.payload).u64() == 4242
    cases = [
        ("garbage block", os.urandom(40), 8),
        ("decodes short", P.lz4_literals(b"abcd"), 8),
        ("decodes long", P.lz4_literals(b"a" * 100), 8),
        ("bad offset", bytes([0x1F, 0x41, 0xFF, 0xFF]), 8),
        ("bomb", bytes([0x0F, 0x41, 0x01, 0x00]) + b"\xff" * 2000, P.MAX_PAYLOAD + 1),
        ("bomb within limit", P.lz4_literals(b"a") + b"", P.MAX_PAYLOAD),
        ("truncated", P.lz4_literals(b"z" * 100)[:50], 100),
        ("zero raw", P.lz4_literals(b"z"), 0),
        ("empty wire", b"", 8),
    ]
    for what, blk, rl in cases:
        with P.connect(daemon.host, daemon.port, key) as c:
            c.send_frame(P.OP_PING, blk, flags=P.FF_LZ4, raw_len=rl)
            assert closes(c), f"bad LZ4 ({what}) did not close the connection"
    # Compressed before auth.
    with P.Conn(daemon.host, daemon.port) as c:
        c.send_frame(P.OP_HELLO, os.urandom(30), flags=P.FF_LZ4, raw_len=400)
        assert closes(c)
    healthy(env, daemon, m)


@pytest.mark.plaintext
def test_bad_zero_words(env, daemon, m):
    """Zero-word coded payloads (PFS_FF_ZR): a good one works, with or
    without CAP_ZR negotiated (a receiver decodes what it understands);
    malformed ones, bombs and ZR + LZ4 together close the connection."""
    key = P.load_key(env.key)
    with P.connect(daemon.host, daemon.port, key) as c:
        blk = P.zr_encode(P.u64(4242))
        assert len(blk) == 16
        c.send_frame(P.OP_PING, blk, flags=P.FF_ZR, raw_len=8, wire_len=None)
        # wire_len 16 > raw_len 8 is refused: only a saving coding is valid.
        assert closes(c)
    with P.connect(daemon.host, daemon.port, key) as c:
        h, _, fid = c.create(c.root, b"zw")
        data = bytes(100) + b"podfs" + bytes(4000)
        req = P.ROOT + P.fh(h) + P.u64(fid) + P.u32(0) + P.u64(0) + P.blob(data)
        blk = P.zr_encode(req)
        assert len(blk) < len(req) // 4 and P.zr_decode(blk, len(req)) == req
        c.send_frame(P.OP_WRITE, blk, flags=P.FF_ZR, raw_len=len(req))
        f = c.recv_frame()
        assert f.status == 0 and P.Reader(f.payload).u32() == len(data)
    assert (env.export / "zw").read_bytes() == data
    mask = P.u64
    cases = [
        ("tail missing", mask(1) + P.u64(5), 67),
        ("bytes left over", mask(1) + P.u64(5) + b"xyz", 64),
        ("mask bit past the last word", mask(1 << 9), 64),
        ("missing word", mask(3) + P.u64(5), 64),
        ("bomb", mask(0), P.MAX_PAYLOAD + 8),
        ("wire longer than raw", mask(1) + P.u64(5), 8),
        ("truncated mask", b"\0\0\0", 64),
        ("empty wire", b"", 8),
        ("with LZ4 flag", mask(0), 64),
    ]
    for what, blk, rl in cases:
        flags = P.FF_ZR | (P.FF_LZ4 if what == "with LZ4 flag" else 0)
        with P.connect(daemon.host, daemon.port, key) as c:
            c.send_frame(P.OP_PING, blk, flags=flags, raw_len=rl)
            assert closes(c), f"bad zero words ({what}) did not close the connection"
    with P.Conn(daemon.host, daemon.port) as c:
        c.send_frame(P.OP_HELLO, mask(0) * 7, flags=P.FF_ZR, raw_len=400)
        assert closes(c)
    healthy(env, daemon, m)


@pytest.mark.plaintext
def test_bad_push_acks(env, daemon, m):
    """PUSH_ACK, the one frame a client sends unasked, is 8 bytes: a coded
    one (its payload shorter than the count it claims to expand to), one
    that does not decode, or one counting pushes never sent closes that
    connection; the daemon reads nothing past a payload and lives on."""
    key = P.load_key(env.key)
    ack = dict(id=0, flags=P.FF_PUSH)
    cases = [
        ("zero-word coded", b"\0", dict(flags=P.FF_PUSH | P.FF_ZR, raw_len=8)),
        ("zero-word coded, long", P.u64(0), dict(flags=P.FF_PUSH | P.FF_ZR, raw_len=64)),
        ("zero-word coded count", P.zr_encode(P.u64(0)), dict(flags=P.FF_PUSH | P.FF_ZR,
                                                              raw_len=8)),
        ("LZ4 coded", b"\x80" + bytes(7), dict(flags=P.FF_PUSH | P.FF_LZ4, raw_len=8)),
        ("short", b"\0\0\0", {}),
        ("empty", b"", {}),
        ("beyond what was sent", P.u64(5), {}),
    ]
    for what, payload, kw in cases:
        with P.connect(daemon.host, daemon.port, key, caps=P.CAP_PUSH_ACK) as c:
            c.send_frame(P.OP_PUSH_ACK, payload, **{**ack, **kw})
            assert closes(c), f"a bad PUSH_ACK ({what}) did not close the connection"
    # A good one (no push sent yet: count 0) is taken silently.
    with P.connect(daemon.host, daemon.port, key, caps=P.CAP_PUSH_ACK) as c:
        c.send_frame(P.OP_PUSH_ACK, P.u64(0), **ack)
        assert c.ping(5) == 5
    healthy(env, daemon, m)


@pytest.mark.plaintext
def test_malformed_payloads_after_auth(env, daemon, m):
    key = P.load_key(env.key)
    with P.connect(daemon.host, daemon.port, key) as c:
        root = c.root
    cases = [
        ("truncated lookup", P.OP_LOOKUP, P.ROOT + P.fh(root)),
        ("trailing bytes", P.OP_GETATTR, P.ROOT + P.fh(root) + b"extra"),
        ("fh len 0", P.OP_GETATTR, P.ROOT + b"\0"),
        ("fh len 255", P.OP_GETATTR, P.ROOT + b"\xff" + b"a" * 255),
        ("name len past end", P.OP_LOOKUP, P.ROOT + P.fh(root) + P.u16(300) + b"ab"),
        ("65 groups", P.OP_GETATTR, P.u32(0) + P.u32(0) + P.u16(65) +
         b"\0" * 4 * 65 + P.fh(root)),
        ("read too big", P.OP_READ, P.ROOT + P.fh(root) + P.u64(1) + P.u32(0) + P.u64(0) +
         P.u32(P.MAX_IO + 1)),
        ("write len past end", P.OP_WRITE, P.ROOT + P.fh(root) + P.u64(1) + P.u32(0) +
         P.u64(0) + P.u32(1 << 20) + b"abc"),
        ("unknown opcode", 99, b""),
        ("push opcode as request", P.OP_INVAL_INODE, P.fh(root) + P.u64(0) + P.u64(0)),
        ("second hello", P.OP_HELLO, P.u32(P.MAGIC) + P.u16(1) + P.u16(1) + P.u64(0) +
         P.u64(1) + os.urandom(32) + P.host(b"x")),
        ("xattr name empty", P.OP_GETXATTR, P.ROOT + P.fh(root) + P.u16(0) + P.u32(100)),
        ("symlink target 5000", P.OP_SYMLINK, P.ROOT + P.fh(root) + P.name(b"s") +
         P.u16(5000) + b"t" * 5000),
    ]
    for what, op, payload in cases:
        with P.connect(daemon.host, daemon.port, key) as c:
            try:
                c.call(op, payload)
            except (P.PfsError, P.Closed, P.BadReply):
                continue
            except P.Timeout:
                pytest.fail(f"{what}: no answer and no close")
            pytest.fail(f"{what}: the server replied with success")
    healthy(env, daemon, m)


@pytest.mark.plaintext
def test_errors_a_client_makes_on_purpose_do_not_flood_the_log(env, daemon, m):
    """WRITEs and COPY_RANGEs through a fid opened read-only fail with
    EBADF, which podfsd logs as a warning (it also means trouble on the
    server): 400 of them in a burst leave at most the rate limiter's
    burst and refill of lines, and a later one says how many were held
    back."""
    key = P.load_key(env.key)
    write_file(env.export / "ro", b"0123456789")
    t0 = time.monotonic()
    with P.connect(daemon.host, daemon.port, key) as c:
        h = c.lookup(c.root, b"ro")[0]
        fid = c.open(h, os.O_RDONLY)
        for i in range(400):
            with pytest.raises(P.PfsError) as ei:
                if i % 2:
                    c.write(h, fid, 0, b"x")
                else:
                    c.copy_range(h, fid, 0, h, fid, 5, 1)
            assert ei.value.status == errno.EBADF
        took = time.monotonic() - t0
        time.sleep(1.2)  # the bucket refills
        with pytest.raises(P.PfsError):
            c.write(h, fid, 0, b"x")
    def lines():
        return [ln for ln in daemon.log().splitlines()
                if "Bad file descriptor" in ln and ("WRITE" in ln or "COPY_RANGE" in ln)]
    wait_for(lambda: any("similar log lines suppressed" in ln for ln in daemon.log().splitlines()),
             timeout=10, what="the count of the lines held back")
    # RL_BURST 100 at once, then RL_PER_SEC 20 a second (ratelimit_i.h).
    assert len(lines()) <= 100 + 20 * (took + 1.2 + 1) + 1, len(lines())
    assert read_file(env.export / "ro") == b"0123456789"
    healthy(env, daemon, m)


@pytest.mark.plaintext
def test_raw_edge_values(env, daemon, m):
    """Values at the edges of their types get an error (or a harmless
    answer), never a crash, a hang or a bogus success."""
    key = P.load_key(env.key)
    U64 = (1 << 64) - 1
    with P.connect(daemon.host, daemon.port, key) as c:
        h, attr, fid = c.create(c.root, b"edge")
        assert c.write(h, fid, 0, b"0123456789") == 10
        root = c.root

    def req(what, op, payload, ok_success=False):
        with P.connect(daemon.host, daemon.port, key) as c:
            fid2 = c.open(h, os.O_RDWR)
            payload = payload.replace(b"FIDFIDFI", P.u64(fid2))
            try:
                rep = c.call(op, payload)
            except (P.PfsError, P.Closed, P.BadReply):
                return
            except P.Timeout:
                pytest.fail(f"{what}: no answer and no close")
            assert ok_success, f"{what}: success reply {rep[:64]!r}"

    F = P.ROOT + P.fh(h) + b"FIDFIDFI"
    req("write at 2^64-3", P.OP_WRITE, F + P.u32(0) + P.u64(U64 - 2) + P.blob(b"abcdef"))
    req("write at 2^63", P.OP_WRITE, F + P.u32(0) + P.u64(1 << 63) + P.blob(b"abc"))
    req("read at 2^63", P.OP_READ, F + P.u32(0) + P.u64(1 << 63) + P.u32(10), ok_success=True)
    req("read at 2^64-1", P.OP_READ, F + P.u32(0) + P.u64(U64) + P.u32(10), ok_success=True)
    req("truncate to 2^63", P.OP_SETATTR, F + P.u32(8) + P.u32(0) * 3 + P.u64(1 << 63) +
        P.i64(0) + P.u32(0) + P.i64(0) + P.u32(0))
    req("setattr unknown bits", P.OP_SETATTR, F + P.u32(0xFFFF0000) + P.u32(0) * 3 +
        P.u64(0) + P.i64(0) + P.u32(0) + P.i64(0) + P.u32(0))
    req("atime_ns 2^32-1", P.OP_SETATTR, F + P.u32(16) + P.u32(0) * 3 + P.u64(0) +
        P.i64(0) + P.u32(0xFFFFFFFF) + P.i64(0) + P.u32(0))
    req("fallocate 2^63", P.OP_FALLOCATE, F + P.u32(0) + P.u64(1 << 63) + P.u64(1 << 63))
    req("fallocate bad mode", P.OP_FALLOCATE, F + P.u32(0xFFFFFFFF) + P.u64(0) + P.u64(10))
    req("lseek whence 99", P.OP_LSEEK, F + P.u64(0) + P.u32(99))
    req("lock type 7", P.OP_SETLK, F + P.u64(1) + P.u32(7) + P.u64(0) + P.u64(10) +
        P.u32(1) + P.u32(0))
    req("lock start > end", P.OP_SETLK, F + P.u64(1) + P.u32(1) + P.u64(100) + P.u64(10) +
        P.u32(1) + P.u32(0))
    req("getxattr size 2^32-1", P.OP_GETXATTR, P.ROOT + P.fh(h) + P.xname(b"user.x") +
        P.u32(0xFFFFFFFF))
    req("readdir max_bytes 0", P.OP_READDIR, P.ROOT + P.fh(root) + P.u64(77) + P.u64(0) +
        P.u32(0) + P.u32(1))
    req("readdir offset 2^64-1", P.OP_READDIR, P.ROOT + P.fh(root) + P.u64(78) + P.u64(U64) +
        P.u32(65536) + P.u32(1), ok_success=True)
    req("mknod block device", P.OP_MKNOD, P.ROOT + P.fh(root) + P.name(b"blk") +
        P.u32(stat.S_IFBLK | 0o600) + P.u32(0x0801) + P.u32(0), ok_success=True)
    req("mkdir mode 0xFFFFFFFF", P.OP_MKDIR, P.ROOT + P.fh(root) + P.name(b"dd") +
        P.u32(0xFFFFFFFF) + P.u32(0), ok_success=True)
    req("link a directory", P.OP_LINK, P.ROOT + P.fh(root) + P.fh(root) + P.name(b"rootlink"))
    req("rename with unknown flag", P.OP_RENAME, P.ROOT + P.fh(root) + P.name(b"edge") +
        P.fh(root) + P.name(b"edge2") + P.u32(0x80))
    req("rename root's child onto itself via bad parent", P.OP_RENAME, P.ROOT + P.fh(h) +
        P.name(b"x") + P.fh(root) + P.name(b"y") + P.u32(0))
    assert read_file(env.export / "edge") == b"0123456789"
    assert not os.path.exists(env.export / "rootlink")
    healthy(env, daemon, m)


@pytest.mark.plaintext
def test_raw_unopened_fid_checks_permissions(env, daemon, m):
    """READ/READDIR with a fid that was never opened (the daemon may reopen
    on demand, e.g. after a restart) still checks the caller's permissions."""
    os.mkdir(m / "private")
    write_file(m / "private" / "inner", b"private listing")
    os.chmod(m / "private", 0o700)
    write_file(m / "secret", b"private data")
    os.chmod(m / "secret", 0o600)
    key = P.load_key(env.key)
    user = P.creds(TEST_UID, TEST_GID)
    with P.connect(daemon.host, daemon.port, key) as c:
        dfh, _ = c.lookup(c.root, b"private")
        ffh, _ = c.lookup(c.root, b"secret")
    with P.connect(daemon.host, daemon.port, key) as c:
        try:
            eof, ents = c.readdir(dfh, 424242, cr=user)
        except (P.PfsError, P.Closed, P.BadReply) as e:
            assert getattr(e, "errno", errno_EACCES) == errno_EACCES, e
        else:
            pytest.fail(f"uid {TEST_UID} listed a 0700 root directory: {ents}")
    with P.connect(daemon.host, daemon.port, key) as c:
        try:
            data = c.read(ffh, 535353, 0, 100, cr=user)
        except (P.PfsError, P.Closed, P.BadReply) as e:
            assert getattr(e, "errno", errno_EACCES) == errno_EACCES, e
        else:
            pytest.fail(f"uid {TEST_UID} read a 0600 root file: {data!r}")
    # Opening properly is refused too.
    with P.connect(daemon.host, daemon.port, key) as c:
        assert refused(c.open, ffh, os.O_RDONLY, None, user)
    with P.connect(daemon.host, daemon.port, key) as c:
        assert refused(c.opendir, dfh, None, user)
    healthy(env, daemon, m)


errno_EACCES = 13


@pytest.mark.plaintext
def test_connection_flood(env, daemon, m):
    key = P.load_key(env.key)
    # A mount made before the flood keeps working through it.
    write_file(m / "before", b"before")
    socks = []
    try:
        for i in range(200):
            s = socket.create_connection((daemon.host, daemon.port), timeout=10)
            if i % 4 == 1:
                s.sendall(P.pack_hdr(100, 100, 1, P.OP_HELLO)[:10])  # half a header
            elif i % 4 == 2:
                s.sendall(P.pack_hdr(60, 60, 1, P.OP_HELLO) + b"x" * 30)  # half a payload
            elif i % 4 == 3:
                s.sendall(b"\0" * 24)
            socks.append(s)
        assert read_file(m / "before") == b"before"
        write_file(m / "during", b"during")
        with P.connect(daemon.host, daemon.port, key) as c:
            assert c.ping(5) == 5
    finally:
        for s in socks:
            s.close()
    healthy(env, daemon, m)
    assert read_file(daemon.export / "during") == b"during"


@pytest.mark.plaintext
def test_stalled_client_does_not_block_others(env, daemon, m):
    key = P.load_key(env.key)
    stall = P.connect(daemon.host, daemon.port, key)
    try:
        # A frame that announces 1 MiB and sends 10 bytes, and a session
        # that never reads its replies.
        stall.send_raw(P.pack_hdr(1 << 20, 1 << 20, 77, P.OP_PING) + b"0123456789")
        slow = P.connect(daemon.host, daemon.port, key)
        slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        fh, _ = (slow.root, None)
        for i in range(2000):
            try:
                slow.send_frame(P.OP_GETATTR, P.ROOT + P.fh(fh))
            except (P.Closed, OSError):
                break
        healthy(env, daemon, m)
        slow.close()
    finally:
        stall.close()


# --- authentication --------------------------------------------------------------

def test_wrong_key_podfs_exits_1(env, daemon):
    if daemon.external:
        pytest.skip("needs to read the daemon's log")
    wrong = env.genkey(env.root / "wrong.key")
    before = daemon.log().count("auth failed")
    r = run(["timeout", "60", str(PODFS), daemon.addr,
             str(env.mnt), "-f", "-o", f"key={wrong}"], timeout=90, check=False)
    assert r.returncode == 1, f"podfs with a wrong key exited {r.returncode}: {r.stderr}"
    msg = (r.stderr + r.stdout).lower()
    assert "key" in msg or "auth" in msg, f"unclear message: {r.stderr!r}"
    assert len(r.stderr.strip().splitlines()) <= 3, f"too verbose: {r.stderr!r}"
    assert not is_mounted(env.mnt)
    wait_for(lambda: daemon.log().count("auth failed") > before, 5,
             what="podfsd to log 'auth failed'")
    time.sleep(0.3)
    lines = [ln for ln in daemon.log().splitlines() if "auth failed" in ln]
    assert len(lines) - before == 1, f"expected one 'auth failed' line: {lines}"
    assert "127.0.0.1" in lines[-1]


@pytest.mark.plaintext
def test_wrong_key_pfsproto_refused(env, daemon, m):
    if daemon.external:
        pytest.skip("needs to read the daemon's log")
    key = P.load_key(env.key)
    wrong = os.urandom(32)
    # The server's HELLO MAC does not verify under a wrong key (mutual auth).
    with P.Conn(daemon.host, daemon.port) as c:
        with pytest.raises(P.BadReply):
            c.hello(wrong)
    # A client MAC made with a wrong key is refused, and nothing works after.
    before = daemon.log().count("auth failed")
    with P.Conn(daemon.host, daemon.port) as c:
        c.hello(wrong, check_server=False)
        assert refused(c.auth, wrong)
        try:
            c.send_frame(P.OP_PING, P.u64(1))
            assert closes(c)
        except P.Closed:
            pass
    wait_for(lambda: daemon.log().count("auth failed") > before, 5,
             what="podfsd to log 'auth failed'")
    line = [ln for ln in daemon.log().splitlines() if "auth failed" in ln][-1]
    assert "127.0.0.1" in line
    # A MAC from another session (replay) is refused.
    with P.Conn(daemon.host, daemon.port) as c1:
        c1.hello(key)
        mac1 = P.auth_mac(key, P.CLIENT_LABEL, c1.cnonce, c1.snonce, c1.client_id)
        with P.Conn(daemon.host, daemon.port) as c2:
            c2.hello(key, client_id=c1.client_id)
            assert refused(c2.auth, key, mac1)
    # The server MAC cannot be reflected back as the client MAC.
    with P.Conn(daemon.host, daemon.port) as c:
        _, smac = c.hello(key)
        assert refused(c.auth, key, smac)
    healthy(env, daemon, m)


@pytest.mark.plaintext
def test_a_client_back_on_a_new_connection_keeps_its_session_with_lease_0(env):
    """--lease 0 ends a session when its connection goes. A client that
    logs in again while its old connection is still open (a network blip
    the daemon has not noticed) replaces that connection, and its session,
    with its open file, lives on in the new one. The daemon once freed the
    session while attaching the new connection to it."""
    d = env.start_daemon(extra=["--lease", "0"])
    key = P.load_key(env.key)
    write_file(d.export / "f", b"kept open")
    cid = int.from_bytes(os.urandom(8), "little") | 1
    with P.connect(d.host, d.port, key, client_id=cid) as a:
        fh, _ = a.lookup(a.root, "f")
        fid = a.open(fh)
        with P.connect(d.host, d.port, key, client_id=cid) as b:
            assert b.auth_flags & P.AUTH_RESUMED
            assert closes(a), "the replaced connection stayed open"
            for _ in range(3):
                assert b.read(fh, fid, 0, 100) == b"kept open"
    healthy(env, d)


@pytest.mark.plaintext
def test_client_id_0_refused(env, daemon, m):
    """0 is no client's id: podfsd takes it for "any client" where it
    drops the directory delegations of a directory that is gone."""
    key = P.load_key(env.key)
    with P.Conn(daemon.host, daemon.port) as c:
        try:
            c.hello(key, client_id=0)
        except (P.Closed, P.BadReply, P.PfsError):
            pass
        assert closes(c)
    healthy(env, daemon, m)


def test_key_file_permissions_enforced(env):
    loose = env.genkey(env.root / "loose.key")
    os.chmod(loose, 0o644)
    r = run([PODFSD, "--listen", "127.0.0.1:0", "--key", loose, env.export],
            timeout=30, check=False)
    assert r.returncode != 0 and "key" in r.stderr.lower()
    r = run([PODFS, "127.0.0.1:1", env.mnt, "-f", "-o", f"key={loose}"], timeout=30,
            check=False)
    assert r.returncode != 0 and "key" in r.stderr.lower()
    assert not is_mounted(env.mnt)
