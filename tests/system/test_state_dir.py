"""test_state_dir.py: podfsd's state directory changed or lost.

Handles carry a MAC under podfsd's handle secret (STATE_DIR/handle.key).
A daemon started on an export with another secret would leave every
client's handles stale, so the export records the secret's id (a keyed
hash, in the trusted xattr trusted.podfs.handle-secret of its root) and
podfsd refuses such a start unless told --new-handle-secret; a client that
still sends handles of another secret is named in one warning. After
--new-handle-secret a mounted podfs sees another root handle when it
reconnects and finds what it holds again by name.
"""

import errno
import os
import re

import pytest

import pfsproto as P
from helpers import (PODFSD, RECONNECT, Worker, errno_of, read_file, run, wait_for,
                     write_file)

XATTR = "trusted.podfs.handle-secret"
FOREIGN = "sends handles from another handle secret"


@pytest.fixture
def restartable(env, mount):
    """A daemon of the test's own (to stop and start again) and a mount
    of it: (daemon, mount)."""
    d = env.start_daemon()
    return d, mount(d)


def fresh_state(env, d, name, *extra):
    """Points d at a new, empty state directory (a lost /var/lib/podfs)."""
    d.state_dir = env.root / name
    d.state_dir.mkdir()
    d.extra += list(extra)


@pytest.mark.timeout(240)
def test_changed_state_dir_refused_until_told(env, restartable):
    """The first start records the secret's id on the export (not the
    secret); a restart with the same state dir serves; one with a new
    state dir refuses to start, says what to do, and leaves that
    directory without a key (so that it refuses again); the old one
    serves again and the mount carries on."""
    d, mm = restartable
    write_file(mm / "f", b"before")
    rec = os.getxattr(env.export, XATTR)
    assert re.fullmatch(rb"[0-9a-f]{16}", rec), rec
    assert bytes.fromhex(rec.decode()) not in (d.state_dir / "handle.key").read_bytes()
    assert "recorded on" in d.log()

    d.stop()
    d.start()  # the same state dir: no refusal, and nothing to find again
    assert Worker(read_file, mm / "f").join(RECONNECT) == b"before"
    wait_for(lambda: "reconnected" in mm.proc.output(), RECONNECT, what="the reconnect")
    assert "file handles changed" not in mm.proc.output()
    d.stop()

    new = env.root / "state-new"
    argv = [PODFSD, "--listen", f"127.0.0.1:{d.port}", "--key", env.key, "--state-dir", new,
            env.export]
    for _ in range(2):
        r = run(argv, timeout=30, check=False)
        assert r.returncode == 1, (r.returncode, r.stderr)
        assert "another handle secret" in r.stderr, r.stderr
        assert "--state-dir" in r.stderr and "--new-handle-secret" in r.stderr, r.stderr
        assert not (new / "handle.key").exists()
        assert os.getxattr(env.export, XATTR) == rec

    d.start()
    assert Worker(read_file, mm / "f").join(RECONNECT) == b"before"
    write_file(mm / "g", b"after")
    assert read_file(env.export / "g") == b"after"


@pytest.mark.timeout(120)
def test_first_start_of_fresh_exports_not_refused(env):
    """Two new exports, each with a new state dir: both serve (nothing was
    recorded); an export podfsd served before this record existed (no
    xattr, an old state dir) is recorded, not refused."""
    for i in range(2):
        exp = env.root / f"exp{i}"
        exp.mkdir()
        d = env.start_daemon(export=exp, state_dir=env.root / f"st{i}", tag=f"fresh{i}")
        assert os.getxattr(exp, XATTR)
        d.stop()
    os.removexattr(env.root / "exp0", XATTR)
    d = env.start_daemon(export=env.root / "exp0", state_dir=env.root / "st0", tag="again")
    assert "recorded on" in d.log()


@pytest.mark.plaintext
@pytest.mark.timeout(120)
def test_handles_of_another_secret_warned_once_per_client(env):
    """After --new-handle-secret, a client that sends handles it got
    before gets ESTALE, and podfsd names the likely cause once per
    client, not per request; the new root works. A handle that is not
    podfsd's shape at all is no sign of a changed state dir."""
    d = env.start_daemon()
    (env.export / "f").write_bytes(b"x")
    key = P.load_key(env.key)
    with P.connect(d.host, d.port, key) as c:
        old_root = c.root
        old_f, _ = c.lookup(c.root, b"f")
    d.stop()
    fresh_state(env, d, "state-new", "--new-handle-secret")
    d.start()
    assert re.search(r"--new-handle-secret: .* \(was [0-9a-f]{16}\)", d.log()), d.log()
    for cid in (11, 12):
        with P.connect(d.host, d.port, key, client_id=cid) as c:
            assert c.root != old_root
            for h in (old_f, old_root, old_f):
                with pytest.raises(P.PfsError) as ei:
                    c.getattr(h)
                assert ei.value.status == errno.ESTALE
            c.lookup(c.root, b"f")
    wait_for(lambda: d.log().count(FOREIGN) == 2, 10, what="one warning per client")
    with P.connect(d.host, d.port, key, client_id=13) as c:
        with pytest.raises(P.PfsError) as ei:
            c.getattr(b"\x01\x02\x03")
        assert ei.value.status == errno.ESTALE
        c.getattr(c.root)  # the reply follows the (absent) warning
    assert d.log().count(FOREIGN) == 2
    line = next(ln for ln in d.log().splitlines() if FOREIGN in ln)
    assert "--state-dir" in line, line


def works(fn, *a):
    """fn(*a)'s result, or None while it fails with ESTALE."""
    try:
        return fn(*a)
    except OSError as e:
        if e.errno != errno.ESTALE:
            raise
        return None


@pytest.mark.timeout(240)
def test_mount_recovers_after_new_handle_secret(env, restartable):
    """podfsd lost its state dir and was started with --new-handle-secret:
    every handle the client holds is stale. The client sees another root
    handle at the reconnect and finds what it holds again by name: within
    a bounded time paths that exist answer again (stat, read, listing,
    new files), files held open keep reading and writing, one removed meanwhile
    answers ENOENT (or ESTALE), and the client says so in one line."""
    d, mm = restartable
    data = os.urandom(200000)
    os.makedirs(mm / "dir" / "sub")
    write_file(mm / "dir" / "sub" / "f", data)
    write_file(mm / "gone", b"x")
    fd = os.open(mm / "dir" / "sub" / "f", os.O_RDONLY)
    wfd = os.open(mm / "dir" / "w", os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.write(wfd, b"first ")
        os.fsync(wfd)
        assert os.pread(fd, 10, 0) == data[:10]
        st = os.stat(mm / "dir" / "sub" / "f")
        os.stat(mm / "gone")

        d.stop()
        (env.export / "gone").unlink()
        write_file(env.export / "dir" / "made-meanwhile", b"m")
        fresh_state(env, d, "state-new", "--new-handle-secret")
        d.start()

        st2 = wait_for(lambda: works(os.stat, mm / "dir" / "sub" / "f"), RECONNECT,
                       interval=0.2, what="a cached path to answer again")
        assert (st2.st_ino, st2.st_size) == (st.st_ino, st.st_size)
        got = Worker(os.pread, fd, len(data), 0).join(RECONNECT)
        assert got == data, (len(got), got == data[:len(got)])
        assert read_file(mm / "dir" / "sub" / "f") == data
        assert sorted(os.listdir(mm / "dir")) == ["made-meanwhile", "sub", "w"]
        assert read_file(mm / "dir" / "made-meanwhile") == b"m"
        write_file(mm / "dir" / "new", b"n")
        assert read_file(env.export / "dir" / "new") == b"n"
        assert errno_of(os.stat, mm / "gone") in (errno.ENOENT, errno.ESTALE)
        # A file held open for writing writes on.
        os.write(wfd, b"second")
        os.fsync(wfd)
        assert read_file(env.export / "dir" / "w") == b"first second"
    finally:
        os.close(fd)
        os.close(wfd)
    log = "".join(p.output() for p in env.procs if p.tag.startswith("podfs"))
    assert re.search(r"found \d+ of \d+ cached objects again by name", log), log
