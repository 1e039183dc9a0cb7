"""test_dir_delegation.py: directory delegations (podfs -o delegate,
podfsd --delegate; docs/delegation.md).

Host A removes files from a directory that no other host looks at: after
a couple of unlinks it holds the directory, and the next unlinks return
at once and go to the coordinator in the background. Whatever B then does
in that directory (or in its parent) first recalls A's delegation, so B
sees exactly what A's calls returned, right after they returned: never
polled. A's fsync of the directory returns once the coordinator has them.
"""

import errno
import os
import subprocess
import time

import pytest

from helpers import (DelayRelay, Worker, fsync_dir, podfs_stats, podfsd_status, read_or_none,
                     wait_for)

pytestmark = pytest.mark.netns

OPTS = "delegate"
EXTRA = ["--delegate"]
N = 40


def make_files(root, d="d", n=N):
    """d with n small files f0..f{n-1}, made on root (a mount)."""
    os.mkdir(root / d)
    for i in range(n):
        with open(root / d / f"f{i}", "wb") as f:
            f.write(b"x%d" % i)
    return d


def remove_on_a(pod, d, names):
    """Unlinks names in d on A; returns how many A answered itself."""
    before = podfs_stats(pod.a)["dirdeleg_unlinks"]
    for name in names:
        os.unlink(pod.a / d / name)
    return podfs_stats(pod.a)["dirdeleg_unlinks"] - before


def test_unlinks_answered_locally(dpod):
    """All but the first few unlinks are answered by A; A's own view, and
    the export once A's fsync of the directory returned, lack exactly the
    removed names."""
    d = make_files(dpod.a)
    gone = [f"f{i}" for i in range(N - 5)]
    assert remove_on_a(dpod, d, gone) >= N - 10
    left = sorted(set(f"f{i}" for i in range(N)) - set(gone))
    assert sorted(os.listdir(dpod.a / d)) == left
    fsync_dir(dpod.a / d)
    assert sorted(os.listdir(dpod.export / d)) == left
    s = podfs_stats(dpod.a)
    assert s["dirdeleg_granted"] >= 1 and s["dirdeleg_errors"] == 0, s


def test_recall_by_listing(dpod):
    """B lists the directory right after A's unlinks returned (A has not
    synced it): B's listing is A's."""
    d = make_files(dpod.a)
    gone = [f"f{i}" for i in range(0, N, 2)]
    assert remove_on_a(dpod, d, gone) > 0
    left = sorted(set(f"f{i}" for i in range(N)) - set(gone))
    assert sorted(os.listdir(dpod.b / d)) == left
    assert sorted(os.listdir(dpod.export / d)) == left
    assert podfs_stats(dpod.a)["dirdeleg_recalls"] >= 1


def test_recall_by_lookup_and_open(dpod):
    """B looks names up one by one (stat, open by name): the removed ones
    are gone, the others are there with their content."""
    d = make_files(dpod.a)
    gone = [f"f{i}" for i in range(N // 2)]
    assert remove_on_a(dpod, d, gone) > 0
    for name in gone:
        with pytest.raises(FileNotFoundError):
            os.stat(dpod.b / d / name)
    for i in range(N // 2, N):
        with open(dpod.b / d / f"f{i}", "rb") as f:
            assert f.read() == b"x%d" % i


def test_recall_by_lookup_of_the_directory(dpod):
    """B's stat of the directory itself (a lookup in its parent) sees its
    state after A's unlinks: B then lists it."""
    d = make_files(dpod.a)
    assert remove_on_a(dpod, d, [f"f{i}" for i in range(N)]) > 0
    os.stat(dpod.b / d)
    assert podfs_stats(dpod.a)["dirdeleg_recalls"] >= 1
    assert os.listdir(dpod.b / d) == []


def test_change_beside_podfs_recalls_the_holder(dpod):
    """A holds a directory (its lookups, creates and listing there are
    answered from what it knows); a program on the coordinator's host
    creates one file there and removes another: A sees both changes
    within moments, by lookup and listing, because podfsd recalls the
    holder before pushing a change it sees beside podfs (before, A went
    on answering from its listing without them for as long as it held
    the directory: a delegated run of test_coherence_hosts timed out
    after 5 s). What A made there meanwhile reaches the export whole."""
    a = dpod.a
    d = make_files(a)
    assert podfs_stats(a)["dirdeleg_granted"] >= 1
    assert not os.path.exists(a / d / "x")  # answered by A
    with open(a / d / "own", "wb") as f:  # queued under the delegation
        f.write(b"made by A")
    with open(dpod.export / d / "x", "wb") as f:
        f.write(b"direct")
    os.unlink(dpod.export / d / "f1")
    wait_for(lambda: read_or_none(a / d / "x") == b"direct", 5, what="A to see x")
    wait_for(lambda: not os.path.exists(a / d / "f1"), 5, what="A to see f1 gone")
    want = sorted({f"f{i}" for i in range(N)} - {"f1"} | {"x", "own"})
    assert sorted(os.listdir(a / d)) == want
    fsync_dir(a / d)
    assert sorted(os.listdir(dpod.export / d)) == want
    assert (dpod.export / d / "own").read_bytes() == b"made by A"
    keys, _ = podfsd_status(dpod.daemon)
    assert int(keys["deleg_recalls_beside"]) >= 1, keys


def test_directory_renamed_over_one_with_a_queued_file(dpod):
    """Within a directory A holds, A makes directories, and files in
    them whose creates are still queued (each directory is held from its
    mkdir): renaming one directory over another that has such a file
    fails with ENOTEMPTY or EEXIST, as an rmdir of it does, and the file
    survives, whole, for everyone. (Before, the RENAME went as soon as
    the parent's queue was sent, ahead of the file's create: the
    coordinator found the directory empty and replaced it, and the
    create then failed: the file was lost.)"""
    a = dpod.a
    d = make_files(a, "top", 10)
    for i in range(5):
        os.mkdir(a / d / f"s{i}")
        os.mkdir(a / d / f"t{i}")
        with open(a / d / f"t{i}" / "x", "wb") as f:
            f.write(b"keep %d" % i)
        try:
            os.rename(a / d / f"s{i}", a / d / f"t{i}")
            err = 0
        except OSError as e:
            err = e.errno
        assert err in (errno.ENOTEMPTY, errno.EEXIST), f"round {i}: rename over a full one: {err}"
        with pytest.raises(OSError) as e:
            os.rmdir(a / d / f"t{i}")
        assert e.value.errno == errno.ENOTEMPTY
    fsync_dir(a / d)
    for i in range(5):
        fsync_dir(a / d / f"t{i}")
        for root in (a, dpod.b, dpod.export):
            assert (root / d / f"t{i}" / "x").read_bytes() == b"keep %d" % i, (root, i)
            assert os.path.isdir(root / d / f"s{i}")
    assert podfs_stats(a)["dirdeleg_errors"] == 0


def test_recall_by_create_of_a_removed_name(dpod):
    """B creates a name A just removed: B's create runs after A's unlink
    reached the coordinator, never before (B's file survives)."""
    d = make_files(dpod.a)
    gone = [f"f{i}" for i in range(N)]
    assert remove_on_a(dpod, d, gone) > 0
    last = gone[-1]
    with open(dpod.b / d / last, "xb") as f:
        f.write(b"from b")
    fsync_dir(dpod.a / d)
    with open(dpod.export / d / last, "rb") as f:
        assert f.read() == b"from b"
    assert os.listdir(dpod.a / d) == [last]


def test_rm_r_of_a_tree(dpod):
    """rm -r of a tree on A: most of its unlinks answered locally (the
    rmdir of one subdirectory names it, so the next one's files keep
    their trusted attributes), each rmdir after its directory's unlinks;
    nothing left anywhere."""
    os.mkdir(dpod.a / "t")
    for sub in ("s1", "s2", "s3"):
        make_files(dpod.a / "t", sub, 20)
    before = podfs_stats(dpod.a)["dirdeleg_unlinks"]
    subprocess.run(["rm", "-r", str(dpod.a / "t")], check=True, timeout=60)
    assert not os.path.exists(dpod.a / "t")
    assert not os.path.exists(dpod.b / "t")
    assert not os.path.exists(dpod.export / "t")
    assert podfs_stats(dpod.a)["dirdeleg_unlinks"] - before >= 30


def test_unlink_refused_by_the_coordinator_is_reported(dpod):
    """An unlink A answered that the coordinator then refuses (the
    directory is append-only there: a change A's delegation does not
    see) is reported by A's fsync of the directory, and the file is still
    there for everyone."""
    d = make_files(dpod.a)
    remove_on_a(dpod, d, [f"f{i}" for i in range(N - 1)])
    assert podfs_stats(dpod.a)["dirdeleg_granted"] >= 1
    fsync_dir(dpod.a / d)
    where = dpod.export / d
    if subprocess.run(["chattr", "+a", str(where)], capture_output=True).returncode != 0:
        pytest.skip("the export's filesystem has no append-only flag")
    try:
        before = podfs_stats(dpod.a)["dirdeleg_unlinks"]
        os.unlink(dpod.a / d / f"f{N - 1}")
        assert podfs_stats(dpod.a)["dirdeleg_unlinks"] == before + 1  # answered by A
        with pytest.raises(OSError) as e:
            fsync_dir(dpod.a / d)
        assert e.value.errno == errno.EPERM
        assert podfs_stats(dpod.a)["dirdeleg_errors"] == 1
        assert os.listdir(dpod.b / d) == [f"f{N - 1}"]
        assert os.listdir(dpod.a / d) == [f"f{N - 1}"]
        fsync_dir(dpod.a / d)  # reported once
    finally:
        subprocess.run(["chattr", "-a", str(where)], check=True)


def test_holder_killed(env):
    """A dies with unlinks it answered: what it synced (fsync of the
    directory) is gone on B, what it did not may be gone or not (as
    unsynced data), nothing else is touched, and B is held only for
    --recall-timeout (1 s here)."""
    from harness.pod import Pod
    dpod = Pod(env, opts=OPTS, extra=EXTRA + ["--recall-timeout", "1000"])
    d = make_files(dpod.a)
    synced = [f"f{i}" for i in range(20)]
    remove_on_a(dpod, d, synced)
    fsync_dir(dpod.a / d)
    maybe = [f"f{i}" for i in range(20, 30)]
    remove_on_a(dpod, d, maybe)
    dpod.a.kill9()
    t0 = time.monotonic()
    names = set(os.listdir(dpod.b / d))
    assert time.monotonic() - t0 < 5
    kept = set(f"f{i}" for i in range(30, N))
    assert kept <= names
    assert not names & set(synced)
    assert names <= kept | set(maybe)


@pytest.mark.timeout(240)
def test_coordinator_restart_mid_flush(env, mount):
    """The coordinator dies while A's unlinks are on their way: after the
    restart, A's fsync of the directory returns with every one applied
    once (none fails), and every other file is there."""
    daemon = env.start_daemon(extra=EXTRA)
    a = mount(daemon, opts=OPTS)
    n = 200
    make_files(a, "d", n)
    for i in range(n - 10):
        os.unlink(a / "d" / f"f{i}")
    daemon.kill9()
    daemon.start()
    wait_for(lambda: podfs_stats(a)["reconnects"] >= 1 and podfs_stats(a)["down_since"] == 0,
             timeout=60, what="the mount reconnected")
    fsync_dir(a / "d")
    left = sorted(f"f{i}" for i in range(n - 10, n))
    assert sorted(os.listdir(env.export / "d")) == left
    assert sorted(os.listdir(a / "d")) == left
    s = podfs_stats(a)
    assert s["dirdeleg_unlinks"] > 0 and s["dirdeleg_errors"] == 0, s


def _restart_with_creates_held(env, mount, held, expire=False, made_again=3, replies_lost=False):
    """A, through a relay, makes d (held from its mkdir, with slots) and
    in it f0..f2, then their bytes (f1 also gets a mode and times through
    its descriptor, as tar sets them); A answers each create. held(relay,
    go=True) keeps the CREATES from being answered; once A answered all
    three, held(relay, go=False) waits for what the case needs, the
    coordinator dies with -9, the relay drops what it holds, and a new
    coordinator starts. expire: instead, the relay drops A's connection
    and holds A's reconnects until its session expired (lease 2 s). The
    files are then on the export as A made them, and A's fsync of d
    reports nothing, and A made made_again of them again by name.
    replies_lost: the replies the coordinator that died kept for the
    next one (STATE_DIR/replies) are lost with it, as when it dies
    before it writes them. (A write the item could not carry, on a slow
    machine, waits for the file's name: it goes after the restart.)"""
    daemon = env.start_daemon(extra=EXTRA + (["--lease", "2", "--lock-lease", "1"] if expire else []))
    relay = DelayRelay((daemon.host, daemon.port), 0)
    via = relay.via(daemon)

    def make():
        files = [open(a / "d" / f"f{i}", "wb") for i in range(3)]  # noqa: SIM115
        for i, f in enumerate(files):
            with f:
                f.write(b"bytes of f%d" % i)
                if i == 1:  # as tar does: the bytes, then these
                    f.flush()
                    os.fchmod(f.fileno(), 0o640)
                    os.utime(f.fileno(), (1_000_000_000, 1_000_000_000))
    a = dfd = None
    try:
        a = mount(via, opts=OPTS)
        os.mkdir(a / "d")
        # Its dentry stays while the relay holds A's bytes: a drop_caches
        # (another test's) would make the kernel look d up again, and
        # that LOOKUP would wait at the relay.
        dfd = os.open(a / "d", os.O_RDONLY | os.O_DIRECTORY)
        wait_for(lambda: podfs_stats(a)["dirdeleg_slots"] >= 3, timeout=10,
                 what="A holds d with slots")
        s0 = podfs_stats(a)
        held(relay, go=True)
        w = Worker(make)
        wait_for(lambda: podfs_stats(a)["dirdeleg_creates"] - s0["dirdeleg_creates"] == 3,
                 timeout=20, what="A answered the three creates")
        held(relay, go=False)
        if expire:
            relay.cut()  # A's reconnects stay held (hold_up) until the session expired
            wait_for(lambda: "expired after 2 s" in daemon.log(), 20,
                     what="A's session to expire")
        else:
            daemon.kill9()
            relay.cut()
            if replies_lost:
                os.truncate(daemon.state_dir / "replies", 0)
        relay.release_up()
        relay.release_down()
        if not expire:
            daemon.start()
        wait_for(lambda: podfs_stats(a)["reconnects"] >= 1 and podfs_stats(a)["down_since"] == 0,
                 timeout=60, what="the mount reconnected")
        w.join(60)
        fsync_dir(a / "d")
        for root in (env.export, a):
            assert sorted(os.listdir(root / "d")) == ["f0", "f1", "f2"]
            for i in range(3):
                assert (root / "d" / f"f{i}").read_bytes() == b"bytes of f%d" % i
            st = os.stat(root / "d" / "f1")
            assert (st.st_mode & 0o7777, st.st_mtime) == (0o640, 1_000_000_000), root
        s = podfs_stats(a)
        assert s["dirdeleg_made_again"] - s0["dirdeleg_made_again"] == made_again, s
        assert s["dirdeleg_errors"] == s0["dirdeleg_errors"], s
    finally:
        relay.release_up()
        relay.release_down()
        if dfd is not None:
            os.close(dfd)
        if a is not None:
            assert a.umount() is None  # before the relay goes
        relay.close()


def test_coordinator_restart_loses_queued_creates_slots(env, mount):
    """The creates never reached the coordinator that died, and the new
    one has none of the slots they name (ESTALE): A makes each again by
    name, with its bytes, mode and times."""
    def held(relay, go):
        if go:
            relay.hold_up()
    _restart_with_creates_held(env, mount, held)


def test_expired_session_loses_queued_creates_slots(env, mount):
    """A is away longer than its lease with three creates queued: its
    session ends and the coordinator closes the slots, so A makes each
    again by name when it is back."""
    def held(relay, go):
        if go:
            relay.hold_up()
    _restart_with_creates_held(env, mount, held, expire=True)


def test_coordinator_restart_loses_creates_reply(env, mount):
    """The coordinator that died had named the slots, but its reply never
    came, nor did it keep it for the next one: A finds each name to be its
    slot's file, and counts it made."""
    def held(relay, go):
        if go:
            relay.hold_down()
        else:
            wait_for(lambda: sorted(os.listdir(env.export / "d")) == ["f0", "f1", "f2"],
                     timeout=10, what="the coordinator named the files")
    _restart_with_creates_held(env, mount, held, replies_lost=True)


def test_coordinator_restart_answers_creates_from_the_reply_it_kept(env, mount):
    """The coordinator that died had named the slots and sent its reply,
    which never came: the next one answers the CREATES sent again with
    that reply (STATE_DIR/replies), so A makes nothing again."""
    def held(relay, go):
        if go:
            relay.hold_down()
        else:
            wait_for(lambda: sorted(os.listdir(env.export / "d")) == ["f0", "f1", "f2"]
                     and relay.held, timeout=10, what="the coordinator named the files and replied")
    _restart_with_creates_held(env, mount, held, made_again=0)


@pytest.mark.timeout(240)
def test_restart_with_creates_queued_on_two_hosts(env, mount):
    """Two hosts each answered three creates the coordinator has not seen
    when it dies with -9 (each through a relay that holds its requests).
    A's bytes go with its creates; B writes its bytes only after its
    creates went, so they wait for the files' names and go the usual way.
    After the restart every file is there on the export and on both
    hosts, with its bytes, the close and the directory's fsync having
    returned; and a second restart waits for both hosts again. (The replies to the creates sent again wait until both
    hosts revalidated, and a host's revalidation waits for its own queue:
    today that wait ends at --revalidate-wait, 2 s here; docs/
    delegation.md, "Limits".)"""
    DIRS = ("pa/da", "pb/db")
    daemon = env.start_daemon(extra=EXTRA + ["--revalidate-wait", "2"])
    relays = [DelayRelay((daemon.host, daemon.port), 0) for _ in range(2)]
    hosts, dfds = [], []

    def make(root, d, pause):
        files = [open(root / d / f"f{i}", "wb") for i in range(3)]  # noqa: SIM115
        time.sleep(pause)  # B: past the 5 ms a create waits for its bytes
        for i, f in enumerate(files):
            with f:
                f.write(b"%s f%d" % (d.encode(), i))
    try:
        for r in relays:
            hosts.append(mount(r.via(daemon), opts=OPTS))
        # Each in a directory of its own: a host's mkdir in the parent
        # of the other's directory would recall the other's delegation.
        for h, d in zip(hosts, DIRS):
            os.mkdir(h / os.path.dirname(d))
        for h, d in zip(hosts, DIRS):
            os.mkdir(h / d)
            # As in _restart_with_creates_held: d's dentry stays.
            dfds.append(os.open(h / d, os.O_RDONLY | os.O_DIRECTORY))
        for h in hosts:
            wait_for(lambda h=h: podfs_stats(h)["dirdeleg_slots"] >= 3, timeout=10,
                     what="the host holds its directory with slots")
        s0 = [podfs_stats(h) for h in hosts]
        for r in relays:
            r.hold_up()
        workers = [Worker(make, h, d, pause) for h, d, pause in zip(hosts, DIRS, (0, 0.05))]
        for h, s in zip(hosts, s0):
            wait_for(lambda h=h, s=s: podfs_stats(h)["dirdeleg_creates"] - s["dirdeleg_creates"] == 3,
                     timeout=20, what="the host answered its three creates")
        daemon.kill9()
        for r in relays:
            r.cut()
            r.release_up()
            r.release_down()
        daemon.start()
        for h in hosts:
            wait_for(lambda h=h: podfs_stats(h)["reconnects"] >= 1 and
                     podfs_stats(h)["down_since"] == 0, timeout=60, what="the mount reconnected")
        wait_for(lambda: "changes wait no more" in daemon.log(), timeout=40,
                 what="the wait after the restart to end")
        for w in workers:
            w.join(60)
        for h, d in zip(hosts, DIRS):
            fsync_dir(h / d)
        for h, d in zip(hosts, DIRS):
            for root in (env.export, *hosts):
                assert sorted(os.listdir(root / d)) == ["f0", "f1", "f2"], (root, d)
                for i in range(3):
                    assert (root / d / f"f{i}").read_bytes() == b"%s f%d" % (d.encode(), i), (root, d, i)
        # Both hosts were back, though not revalidated, when that wait
        # ran out: they stay on the list, and the next restart waits
        # for both again (they revalidate at once now).
        r0 = [podfs_stats(h)["reconnects"] for h in hosts]
        daemon.kill9()
        daemon.start()
        for h, r in zip(hosts, r0):
            wait_for(lambda h=h, r=r: podfs_stats(h)["reconnects"] > r and
                     podfs_stats(h)["down_since"] == 0, timeout=60, what="the mount reconnected")
        wait_for(lambda: daemon.log().count("changes wait no more") >= 2, timeout=40,
                 what="the wait after the second restart to end")
        ended = [ln for ln in daemon.log().splitlines() if "changes wait no more" in ln]
        assert "(every client revalidated): 2 of 2 clients" in ended[-1], ended
    finally:
        for r in relays:
            r.release_up()
            r.release_down()
        for fd in dfds:
            os.close(fd)
        for h in hosts:
            assert h.umount() is None  # before the relays go
        for r in relays:
            r.close()


def _deleg_conn(daemon):
    import pfsproto as P
    caps = P.CAP_PUSH | P.CAP_PUSH_ACK | P.CAP_DIR_ATTR | P.CAP_DELEG
    return P.connect(daemon.host, daemon.port, P.load_key(daemon.env.key), caps=caps)


@pytest.mark.plaintext
def test_protocol_deleg_dir_and_unlinks(env):
    """DELEG_DIR and UNLINKS as a client could send them, right or wrong:
    a grant for a directory, EAGAIN on a read-only export, ENOTDIR, ENOSYS
    without the capability; UNLINKS removes what it can and says, name by
    name, what it could not; a bad or too long list removes nothing."""
    import struct
    import pfsproto as P
    daemon = env.start_daemon(extra=EXTRA)
    os.mkdir(env.export / "d")
    for i in range(5):
        (env.export / "d" / f"f{i}").write_bytes(b"x")
    with _deleg_conn(daemon) as c:
        d, _ = P.Reader(c.call(P.OP_LOOKUP, P.ROOT + P.fh(c.root) + P.name("d"))).entry()
        f0, _ = P.Reader(c.call(P.OP_LOOKUP, P.ROOT + P.fh(d) + P.name("f0"))).entry()
        c.call(P.OP_DELEG_DIR, P.ROOT + P.fh(d))
        c.call(P.OP_DELEG_DIR, P.ROOT + P.fh(d))  # held already: granted again
        with pytest.raises(P.PfsError) as e:
            c.call(P.OP_DELEG_DIR, P.ROOT + P.fh(f0))
        assert e.value.status == errno.ENOTDIR

        def unlinks(names, raw=None):
            packed = raw if raw is not None else b"".join(P.name(n) for n in names)
            return c.call(P.OP_UNLINKS, P.ROOT + P.fh(d) + P.blob(packed))

        with pytest.raises(P.PfsError) as e:
            unlinks([], raw=P.name("f1") + b"\x05\x00ab")  # a truncated name
        assert e.value.status == errno.EINVAL
        with pytest.raises(P.PfsError) as e:
            unlinks([f"f{i % 5}" for i in range(P.UNLINKS_MAX + 1)])
        assert e.value.status == errno.E2BIG
        with pytest.raises(P.PfsError) as e:
            unlinks(["f1", "../f2"])
        assert e.value.status == errno.EINVAL
        assert len(os.listdir(env.export / "d")) == 5  # none of them removed
        r = P.Reader(unlinks(["f1", "nope", "f2"]))
        flags = r.u32()
        r.attr()
        status = r.bytes()
        r.done()
        assert flags & 1
        assert list(struct.unpack("<3I", status)) == [0, errno.ENOENT, 0]
        assert sorted(os.listdir(env.export / "d")) == ["f0", "f3", "f4"]
        c.call(P.OP_DELEG_RETURN, P.ROOT + P.fh(d))
    with P.connect(daemon.host, daemon.port, P.load_key(env.key)) as c:
        d, _ = P.Reader(c.call(P.OP_LOOKUP, P.ROOT + P.fh(c.root) + P.name("d"))).entry()
        with pytest.raises(P.PfsError) as e:
            c.call(P.OP_DELEG_DIR, P.ROOT + P.fh(d))
        assert e.value.status == errno.ENOSYS
    daemon.stop()
    ro = env.start_daemon(extra=EXTRA + ["--ro"])
    with _deleg_conn(ro) as c:
        d, _ = P.Reader(c.call(P.OP_LOOKUP, P.ROOT + P.fh(c.root) + P.name("d"))).entry()
        with pytest.raises(P.PfsError) as e:
            c.call(P.OP_DELEG_DIR, P.ROOT + P.fh(d))
        assert e.value.status == errno.EAGAIN


def test_unlinks_never_seen_late_by_another_host(dpod):
    """A removes files one by one while B keeps listing the directory and
    looking names up, at random moments: whatever B starts after one of
    A's unlink() calls returned never shows that name, whether A answered
    it itself (held) or not (recalled by B a moment before)."""
    import random
    import threading
    rounds, n = 12, 30
    rnd = random.Random(18)
    for r in range(rounds):
        d = make_files(dpod.a, f"r{r}", n)
        gone_at = {}  # name -> monotonic time its unlink returned on A
        stop, go = threading.Event(), threading.Event()
        bad = []
        start_after = rnd.randrange(n // 2)  # B looks only then: A may hold d by then

        def watch():
            go.wait(timeout=60)
            while not stop.is_set():
                t0 = time.monotonic()
                if rnd.random() < 0.5:
                    try:
                        seen = os.listdir(dpod.b / d)
                    except FileNotFoundError:
                        seen = []
                else:
                    name = f"f{rnd.randrange(n)}"
                    seen = [name] if os.path.lexists(dpod.b / d / name) else []
                bad.extend((nm, t0 - gone_at[nm]) for nm in seen
                           if nm in gone_at and gone_at[nm] < t0)
                time.sleep(rnd.random() * 0.01)

        b = threading.Thread(target=watch)
        b.start()
        try:
            for i in range(n):
                if i == start_after:
                    go.set()
                os.unlink(dpod.a / d / f"f{i}")
                gone_at[f"f{i}"] = time.monotonic()
                if rnd.random() < 0.3:
                    time.sleep(rnd.random() * 0.005)
        finally:
            go.set()
            stop.set()
            b.join(timeout=30)
        assert not b.is_alive()
        assert not bad, f"round {r}: B saw names A had removed: {bad[:5]}"
        assert os.listdir(dpod.b / d) == []
    s = podfs_stats(dpod.a)
    assert s["dirdeleg_unlinks"] > 0 and s["dirdeleg_recalls"] > 0, s


def test_bursts_alone_then_seen_by_another_host(dpod):
    """A works alone in a directory (creates, unlinks answered itself or
    not, renames over names, hard links, rewrites), then B looks: B's
    listing, every file's content and link count are exactly A's model,
    as on the export once A synced the directory."""
    import random
    rnd = random.Random(1818)
    names = [f"n{i}" for i in range(8)]
    for r in range(6):
        d = f"b{r}"
        os.mkdir(dpod.a / d)
        model = {}  # name -> content (hard links share one bytes object by name group)
        links = {}  # name -> group id
        next_group = 0
        for step in range(80):
            op = rnd.random()
            a, b = rnd.choice(names), rnd.choice(names)
            pa, pb = dpod.a / d / a, dpod.a / d / b
            if op < 0.35 or a not in model:
                data = os.urandom(rnd.randrange(1, 64))
                with open(pa, "wb") as f:
                    f.write(data)
                if a in model:  # rewritten in place: every link of it sees it
                    for n, g in links.items():
                        if g == links[a]:
                            model[n] = data
                else:
                    model[a] = data
                    links[a] = next_group
                    next_group += 1
            elif op < 0.65:
                os.unlink(pa)
                del model[a], links[a]
            elif op < 0.85 and a != b:
                os.rename(pa, pb)
                model[b], links[b] = model.pop(a), links.pop(a)
            elif b not in model:
                os.link(pa, pb)
                model[b], links[b] = model[a], links[a]
        seen = sorted(os.listdir(dpod.b / d))
        assert seen == sorted(model), (r, seen, sorted(model))
        for n, data in model.items():
            st = os.stat(dpod.b / d / n)
            assert st.st_nlink == sum(1 for g in links.values() if g == links[n]), (r, n)
            with open(dpod.b / d / n, "rb") as f:
                assert f.read() == data, (r, n)
        fsync_dir(dpod.a / d)
        assert sorted(os.listdir(dpod.export / d)) == sorted(model)
    assert podfs_stats(dpod.a)["dirdeleg_unlinks"] > 0


def test_stalled_holder_revoked(env, mount):
    """A stops (SIGSTOP) right after unlinks it answered itself, whose
    UNLINKS a relay holds on their way: B waits for A as long as
    --recall-timeout (300 ms here, 5 s by default), then sees the names
    as the coordinator has them. A's delegation is
    revoked, so its UNLINKS, let through after that, is refused and never
    applied, and A's fsync of the directory reports it (EIO); the names
    are there for everyone."""
    import signal
    daemon = env.start_daemon(extra=EXTRA + ["--recall-timeout", "300"])
    relay = DelayRelay((daemon.host, daemon.port), 0)
    via = relay.via(daemon)
    a = None
    try:
        a = mount(via, opts=OPTS)
        b = mount(daemon, path=env.root / "mnt-b")
        make_files(a, "d", 12)
        for i in range(4):  # the usual way, until A holds the directory
            os.unlink(a / "d" / f"f{i}")
        wait_for(lambda: podfs_stats(a)["dirdeleg_granted"] >= 1, timeout=10,
                 what="A holds the directory")
        fsync_dir(a / "d")  # what A answered so far (creates too) is applied
        relay.hold_up()
        before = podfs_stats(a)["dirdeleg_unlinks"]
        for i in range(4, 8):
            os.unlink(a / "d" / f"f{i}")
        assert podfs_stats(a)["dirdeleg_unlinks"] - before == 4
        a.proc.send(signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            names = sorted(os.listdir(b / "d"))
            took = time.monotonic() - t0
        finally:
            relay.release_up()
            a.proc.send(signal.SIGCONT)
        kept = sorted(f"f{i}" for i in range(4, 12))
        assert names == kept
        assert 0.3 <= took < 2.0, took
        with pytest.raises(OSError) as e:
            fsync_dir(a / "d")
        assert e.value.errno == errno.EIO
        assert sorted(os.listdir(b / "d")) == kept
        assert sorted(os.listdir(env.export / "d")) == kept
        assert sorted(os.listdir(a / "d")) == kept
        assert podfs_stats(a)["dirdeleg_errors"] >= 1
    finally:
        relay.release_up()
        if a is not None:
            assert a.umount() is None  # before the relay goes
        relay.close()
