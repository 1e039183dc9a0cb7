"""test_dir_creates.py: creates answered under a directory delegation
(podfs -o delegate, podfsd --delegate; docs/delegation.md, "Creates").

Host A creates files in a directory no other host looks at: after a couple
of creates it holds the directory and slots there (files the coordinator
made, not named yet), and the next creates return at once: the file has
its final handle and inode number, the name is sent in the background,
and a close does not wait for the writes. Whatever B then does there
first recalls A's delegation, which sends the names and waits for the
writes: B sees exactly what A's calls returned. A's fsync of a file
returns once the coordinator has its name and data.
"""

import errno
import os
import stat
import struct
import time

import pytest

from harness import Pod
from helpers import fsync_dir, podfs_stats, requests_sent, requests_since, wait_for

pytestmark = pytest.mark.netns

OPTS = "delegate"
EXTRA = ["--delegate"]


def creates_on(root):
    return podfs_stats(root)["dirdeleg_creates"]


def create(path, data, mode=0o644):
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def hold(root, d, prefix="w", timeout=10.0):
    """Creates files prefix0, prefix1... in d on root until one is
    answered by root itself (the grant and its slots come in the
    background); returns how many it made."""
    before = creates_on(root)
    deadline = time.monotonic() + timeout
    i = 0
    while creates_on(root) == before:
        assert time.monotonic() < deadline, "no create was answered locally"
        create(root / d / f"{prefix}{i}", b"w")
        i += 1
        time.sleep(0.01)
    return i


def test_creates_answered_locally_seen_by_another_host(dpod):
    """A's creates (most answered by A itself) are what B lists and reads
    right after, with the same inode numbers, modes, owners, sizes and
    modification times as the export has; nothing extra appears."""
    os.umask(0o022)
    os.mkdir(dpod.a / "d")
    modes = [0o644, 0o600, 0o444, 0o640, 0o755]
    n = 60
    warm = hold(dpod.a, "d")
    s0 = podfs_stats(dpod.a)
    for i in range(n):
        create(dpod.a / "d" / f"f{i}", b"%d" % i * (i + 1), modes[i % len(modes)])
    # Slots come in batches, asked for before the last is used: a create
    # that finds none waits for those on their way. Only a wait that ran
    # out (a SLOTS answered after DD_SLOTS_WAIT_NS) goes the usual way.
    s1 = podfs_stats(dpod.a)
    timeouts = s1["dirdeleg_slot_timeouts"] - s0["dirdeleg_slot_timeouts"]
    assert s1["dirdeleg_creates"] - s0["dirdeleg_creates"] == n - timeouts, (s0, s1)
    assert timeouts <= n // 4, (s0, s1)
    seen_a = {f"f{i}": os.stat(dpod.a / "d" / f"f{i}") for i in range(n)}
    names = sorted(list(seen_a) + [f"w{i}" for i in range(warm)])
    assert sorted(os.listdir(dpod.b / "d")) == names
    for name, sa in seen_a.items():
        i = int(name[1:])
        sb = os.stat(dpod.b / "d" / name)
        se = os.stat(dpod.export / "d" / name)
        for s in (sa, sb, se):
            assert stat.S_IMODE(s.st_mode) == modes[i % len(modes)], name
            assert stat.S_ISREG(s.st_mode) and s.st_nlink == 1, name
            assert s.st_size == len(b"%d" % i * (i + 1)), name
        assert sa.st_ino == sb.st_ino == se.st_ino, name
        assert (sa.st_uid, sa.st_gid) == (se.st_uid, se.st_gid), name
        # The times A answered are the ones the coordinator keeps.
        assert sa.st_mtime_ns == sb.st_mtime_ns == se.st_mtime_ns, name
        assert (dpod.b / "d" / name).read_bytes() == b"%d" % i * (i + 1)
    assert sorted(os.listdir(dpod.export / "d")) == names
    s = podfs_stats(dpod.a)
    assert s["dirdeleg_errors"] == 0 and s["dirdeleg_recalls"] >= 1, s


def test_fsync_of_a_created_file_is_on_the_coordinator(dpod):
    """A file A created itself and fsynced is named on the export, with
    its data, when fsync returns (no other host asked)."""
    os.mkdir(dpod.a / "d")
    hold(dpod.a, "d")
    before = creates_on(dpod.a)
    for i in range(5):
        p = dpod.a / "d" / f"s{i}"
        fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.write(fd, b"synced %d" % i)
        os.fsync(fd)
        assert (dpod.export / "d" / f"s{i}").read_bytes() == b"synced %d" % i
        os.close(fd)
    assert creates_on(dpod.a) - before >= 4


def test_close_does_not_wait_but_another_host_sees_the_data(dpod):
    """Files A made and closed (its close did not wait for the writes)
    read in full on B at once: B's lookup recalls the delegation, which
    waits for them. (B then caches the directory: A gets no new grant
    there, so each size has its own.)"""
    sizes = [1, 4096, 70000, 1 << 20, 3 << 20]
    for k, size in enumerate(sizes):
        d = f"d{k}"
        os.mkdir(dpod.a / d)
        hold(dpod.a, d)
        before = creates_on(dpod.a)
        data = os.urandom(size)
        create(dpod.a / d / "big", data)
        assert creates_on(dpod.a) == before + 1  # answered by A
        assert (dpod.b / d / "big").read_bytes() == data
    s = podfs_stats(dpod.a)
    assert s["dirdeleg_recalls"] >= len(sizes) and s["dirdeleg_errors"] == 0, s


def test_fsync_of_the_directory_puts_the_data_of_its_new_files_on_the_coordinator(dpod):
    """Files A made and closed in a held directory (their close did not
    wait for their writes) are whole on the export once A's fsync of the
    directory returns: a process beside podfs on the coordinator, which
    recalls nothing, reads them in full, whatever size. (The fsync once
    only sent the queued creates: a file whose bytes went as writes was
    read short there, even empty.)"""
    os.mkdir(dpod.a / "d")
    hold(dpod.a, "d")
    before = creates_on(dpod.a)
    files = {f"f{k}": os.urandom(size)
             for k, size in enumerate([1, 70000, 1 << 20, 3 << 20, 8 << 20])}
    for name, data in files.items():
        create(dpod.a / "d" / name, data)
    assert creates_on(dpod.a) - before == len(files)  # answered by A
    fsync_dir(dpod.a / "d")
    for name, data in files.items():
        assert (dpod.export / "d" / name).read_bytes() == data, name
    s = podfs_stats(dpod.a)
    assert s["dirdeleg_recalls"] == 0 and s["dirdeleg_errors"] == 0, s


def test_first_bytes_and_close_travel_with_the_create(dpod):
    """A small file A makes, writes and closes costs one CREATES item: no
    WRITE, FSYNC or RELEASE of its own. Bytes read back through the open
    file, a file written in pieces, with a hole, or past what an item
    carries (the rest goes as usual writes) all end up exactly as
    written, on the export after A's fsync of the directory and on B."""
    os.mkdir(dpod.a / "d")
    hold(dpod.a, "d")
    # The item of hold's last file (its byte and close with it) is still
    # queued: sent before the count starts, not counted as one of these.
    fsync_dir(dpod.a / "d")
    before = podfs_stats(dpod.a)
    small = {f"s{i}": os.urandom(100 + 37 * i) for i in range(20)}
    for name, data in small.items():
        create(dpod.a / "d" / name, data)
    fsync_dir(dpod.a / "d")
    after = podfs_stats(dpod.a)
    made = after["dirdeleg_creates"] - before["dirdeleg_creates"]
    # Most items carry their file's data and close (one hurried by a
    # request that waits for the queue goes without: a lookup, say).
    inlined = after["dirdeleg_inlined"] - before["dirdeleg_inlined"]
    closed = after["dirdeleg_closed"] - before["dirdeleg_closed"]
    assert made >= 10 and inlined >= 1 and closed >= 1, after
    sent = {op: after.get("req_" + op, 0) - before.get("req_" + op, 0)
            for op in ("WRITE", "FSYNC", "RELEASE")}
    assert sent["WRITE"] <= len(small) - inlined, (sent, after)
    assert sent["RELEASE"] <= len(small) - closed, (sent, after)
    assert sent["FSYNC"] <= len(small) - closed, (sent, after)
    for name, data in small.items():
        assert (dpod.export / "d" / name).read_bytes() == data, name

    expect = {}
    # Read back, and stat'ed, while open: the item goes first.
    fd = os.open(dpod.a / "d" / "rw", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    os.write(fd, b"abc")
    os.write(fd, b"def")
    assert os.pread(fd, 6, 0) == b"abcdef"
    assert os.fstat(fd).st_size == 6
    os.write(fd, b"g")
    os.close(fd)
    expect["rw"] = b"abcdefg"
    # A hole: the write past the end goes as usual, after the item.
    fd = os.open(dpod.a / "d" / "hole", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    os.write(fd, b"head")
    os.pwrite(fd, b"tail", 10000)
    os.close(fd)
    expect["hole"] = b"head" + bytes(10000 - 4) + b"tail"
    # More than an item carries, in pieces.
    big = os.urandom(200 * 1024)
    fd = os.open(dpod.a / "d" / "big", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    for off in range(0, len(big), 8192):
        os.write(fd, big[off:off + 8192])
    os.close(fd)
    expect["big"] = big
    for name, data in expect.items():
        assert (dpod.a / "d" / name).read_bytes() == data, name
        assert (dpod.b / "d" / name).read_bytes() == data, name
        assert (dpod.export / "d" / name).read_bytes() == data, name
    assert podfs_stats(dpod.a)["dirdeleg_errors"] == 0


def test_attributes_set_before_close_seen_by_another_host(dpod):
    """As tar extracts a file: create 0600, write, set its mtime, owner
    and mode through the descriptor, close; A answers all of it. B sees
    the data, the mtime, the owner and the mode, and so does the export
    once B looked."""
    os.mkdir(dpod.a / "d")
    hold(dpod.a, "d")
    before = podfs_stats(dpod.a)
    # Ten files, and more (up to 40) until one's close went in its item:
    # a create waits 5 ms for its close (DD_HOLD_NS), which a loaded
    # machine may not give ten times in a row (CI met it once).
    n = 0
    while n < 10 or (n < 40 and podfs_stats(dpod.a)["dirdeleg_closed"] == before["dirdeleg_closed"]):
        i = n
        fd = os.open(dpod.a / "d" / f"t{i}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.write(fd, b"tar %d" % i)
        os.utime(fd, ns=(1_000_000_000 + i, 1_500_000_000_000_000_000 + i))
        os.fchown(fd, 1000, 1000)
        os.fchmod(fd, 0o640)
        os.close(fd)
        n += 1
    after = podfs_stats(dpod.a)
    assert after["dirdeleg_creates"] - before["dirdeleg_creates"] >= n // 2
    assert after["deleg_local"] - before["deleg_local"] >= n * 3 // 2  # answered by A
    # A file made here whose create's item carried its close takes its
    # changes to the coordinator in that item: SETATTRs only for the
    # others (made the usual way, or whose item a request that waited
    # for the queue sent before the close), at most one per change each
    # (one that found the attributes not known current goes at once).
    closed = after["dirdeleg_closed"] - before["dirdeleg_closed"]
    assert closed >= 1, after
    assert after.get("req_SETATTR", 0) - before.get("req_SETATTR", 0) <= 3 * (n - closed), after
    for i in range(n):
        st = os.stat(dpod.a / "d" / f"t{i}")
        assert st.st_mtime_ns == 1_500_000_000_000_000_000 + i, i
        assert stat.S_IMODE(st.st_mode) == 0o640 and st.st_size == len(b"tar %d" % i), i
    for i in range(n):
        for root in (dpod.b, dpod.export):
            st = os.stat(root / "d" / f"t{i}")
            assert st.st_atime_ns == 1_000_000_000 + i, (root, i)
            assert st.st_mtime_ns == 1_500_000_000_000_000_000 + i, (root, i)
            assert stat.S_IMODE(st.st_mode) == 0o640, (root, i)
            assert (st.st_uid, st.st_gid) == (1000, 1000), (root, i)
            assert (root / "d" / f"t{i}").read_bytes() == b"tar %d" % i


def test_renamed_out_of_the_directory_stays_coherent(dpod):
    """A file A made and still holds open, with a mode A answered itself,
    renamed into a directory B caches (no recall guards it there): B
    sees its data and mode, and A's later chmod goes to the coordinator,
    so B sees that too."""
    os.mkdir(dpod.a / "e")
    os.listdir(dpod.b / "e")  # B caches e: A never holds it
    os.mkdir(dpod.a / "d")  # after: B's listing of the root did not hand it out
    hold(dpod.a, "d")
    before = creates_on(dpod.a)
    fd = os.open(dpod.a / "d" / "f", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    try:
        assert creates_on(dpod.a) == before + 1  # answered by A
        os.write(fd, b"moved")
        os.fchmod(fd, 0o600)
        os.rename(dpod.a / "d" / "f", dpod.a / "e" / "f")
        st = os.stat(dpod.b / "e" / "f")
        assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_size == 5
        assert (dpod.b / "e" / "f").read_bytes() == b"moved"
        os.fstat(fd)  # A knows the file's attributes again
        os.fchmod(fd, 0o640)
        wait_for(lambda: stat.S_IMODE(os.stat(dpod.b / "e" / "f").st_mode) == 0o640,
                 timeout=5, what="B sees A's chmod after the rename")
    finally:
        os.close(fd)


def test_create_unlink_create_of_one_name(dpod):
    """A makes, removes and makes again the same names: the coordinator
    applies them in A's order."""
    os.mkdir(dpod.a / "d")
    warm = hold(dpod.a, "d")
    for r in range(6):
        for i in range(8):
            p = dpod.a / "d" / f"x{i}"
            if r:
                os.unlink(p)
            create(p, b"round %d %d" % (r, i))
    assert creates_on(dpod.a) >= 30
    for i in range(8):
        assert (dpod.b / "d" / f"x{i}").read_bytes() == b"round 5 %d" % i
    assert sorted(os.listdir(dpod.export / "d")) == sorted(
        [f"w{i}" for i in range(warm)] + [f"x{i}" for i in range(8)])


def test_names_made_the_usual_way_come_after_their_directorys_items(dpod):
    """A mkdir or symlink of a name A just removed under its delegation
    (queued behind creates, which are synced) waits for that unlink, the
    items of its own directory, while a mkdir in another directory goes
    at once: none fails with EEXIST, and B sees A's order."""
    os.mkdir(dpod.a / "d")
    hold(dpod.a, "d")
    os.mkdir(dpod.a / "e")
    for i in range(10):
        create(dpod.a / "d" / f"f{i}", b"x")
    fsync_dir(dpod.a / "d")
    before = podfs_stats(dpod.a)["dirdeleg_unlinks"]
    for i in range(10):
        for k in range(4):
            create(dpod.a / "d" / f"n{i}.{k}", b"y" * 100)
        os.unlink(dpod.a / "d" / f"f{i}")
        if i % 2:
            os.mkdir(dpod.a / "d" / f"f{i}")
        else:
            os.symlink("t", dpod.a / "d" / f"f{i}")
        os.mkdir(dpod.a / "e" / f"g{i}")
    assert podfs_stats(dpod.a)["dirdeleg_unlinks"] - before >= 5
    for i in range(10):
        st = os.lstat(dpod.b / "d" / f"f{i}")
        assert (stat.S_ISDIR if i % 2 else stat.S_ISLNK)(st.st_mode), (i, oct(st.st_mode))
        for k in range(4):
            assert (dpod.b / "d" / f"n{i}.{k}").read_bytes() == b"y" * 100
    assert sorted(os.listdir(dpod.b / "e")) == sorted(f"g{i}" for i in range(10))


def test_a_directory_made_here_is_held_from_its_mkdir(dpod):
    """The reply to A's mkdir brings the new directory's delegation and
    slots there: the first creates in it are answered by A too (A sends
    no CREATE), and B, looking there, recalls it and finds them."""
    before, sent = creates_on(dpod.a), requests_sent(dpod.a)
    os.mkdir(dpod.a / "n")
    os.mkdir(dpod.a / "n" / "m")
    for d in ("n", "n/m"):
        for i in range(3):
            create(dpod.a / d / f"f{i}", b"%s %d" % (d.encode(), i))
    assert creates_on(dpod.a) - before == 6
    assert requests_since(dpod.a, sent).get("CREATE", 0) == 0
    for d in ("n", "n/m"):
        for i in range(3):
            assert (dpod.b / d / f"f{i}").read_bytes() == b"%s %d" % (d.encode(), i)
    assert sorted(os.listdir(dpod.export / "n")) == ["f0", "f1", "f2", "m"]


def test_renames_within_a_held_directory_answered_here(dpod):
    """Renames within a directory A holds: of files, over nothing or over
    a file, answered by A (as pip's compiled files: written under a
    temporary name, then renamed over the last one), of a directory it
    knows, sent knowing what moves; A keeps answering the creates there,
    reads what it renamed, and B sees exactly A's result."""
    os.mkdir(dpod.a / "d")
    os.mkdir(dpod.a / "d" / "sub")
    for i in range(3):
        create(dpod.a / "d" / f"f{i}", b"file %d" % i)
    before, renamed = creates_on(dpod.a), podfs_stats(dpod.a)["dirdeleg_renames"]
    os.rename(dpod.a / "d" / "f0", dpod.a / "d" / "g0")
    os.rename(dpod.a / "d" / "f1", dpod.a / "d" / "f2")  # replaces f2
    os.rename(dpod.a / "d" / "sub", dpod.a / "d" / "sub2")  # a directory: sent
    for i in range(5):
        create(dpod.a / "d" / f"x.pyc.{i}", b"pyc %d" % i)
        os.replace(dpod.a / "d" / f"x.pyc.{i}", dpod.a / "d" / "x.pyc")
    # The files' renames were answered here, and the listing stayed:
    # the creates after them too (as many as slots had come for).
    assert podfs_stats(dpod.a)["dirdeleg_renames"] - renamed == 7
    assert creates_on(dpod.a) - before >= 1
    assert (dpod.a / "d" / "g0").read_bytes() == b"file 0"
    assert (dpod.a / "d" / "f2").read_bytes() == b"file 1"
    assert not os.path.exists(dpod.a / "d" / "f0")
    want = ["f2", "g0", "sub2", "x.pyc"]
    assert sorted(os.listdir(dpod.a / "d")) == want
    assert sorted(os.listdir(dpod.b / "d")) == want
    assert (dpod.b / "d" / "x.pyc").read_bytes() == b"pyc 4"
    assert (dpod.b / "d" / "f2").read_bytes() == b"file 1"
    assert os.path.isdir(dpod.b / "d" / "sub2")
    assert os.stat(dpod.b / "d" / "g0").st_ino == os.stat(dpod.a / "d" / "g0").st_ino


def test_stat_of_a_file_renamed_into_place_while_its_create_is_queued(dpod):
    """pip's compiled files: written under a temporary name, closed,
    renamed into place, then stat'ed. While the create is queued, the stat
    is answered from it (size, mode, owner, link count exact, the
    rename's ctime), not after the queue from the coordinator; once sent,
    every attribute but the ctime is the export's, and the directory's
    are the rename's reply's."""
    os.mkdir(dpod.a / "pc")
    hold(dpod.a, "pc")
    n = 20
    # First at once, as pip does; then with the create sent before its
    # rename (a pause longer than the queue's linger after a close).
    for pause, first in ((0, 0), (0.05, n)):
        before = requests_sent(dpod.a)
        for i in range(first, first + n):
            tmp = dpod.a / "pc" / f"m{i}.pyc.{i}"
            create(tmp, b"compiled %d" % i * (i + 1), 0o644)
            time.sleep(pause)
            t0 = time.time()
            os.replace(tmp, dpod.a / "pc" / f"m{i}.pyc")
            st = os.stat(dpod.a / "pc" / f"m{i}.pyc")
            assert st.st_size == len(b"compiled %d" % i) * (i + 1)
            assert stat.S_IMODE(st.st_mode) == 0o644 and st.st_nlink == 1
            assert st.st_uid == os.getuid()
            assert st.st_ctime >= t0 - 1 and st.st_ctime >= st.st_mtime
        sent = requests_since(dpod.a, before)
        # A stat whose create was still queued is answered from it; one
        # whose create went out already asks once, for the rename's
        # ctime. The directory's attributes came with the rename's
        # reply: without them the kernel asked for those too after
        # every rename (39 GETATTRs for 20 files).
        assert sent.get("GETATTR", 0) <= n, (pause, sent)
    # Removed, or replaced by a rename, while its create may be queued:
    # an open descriptor shows it has no name left.
    for how in ("unlink", "replace"):
        fd = os.open(dpod.a / "pc" / how, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
        try:
            os.write(fd, b"still open")
            if how == "unlink":
                os.unlink(dpod.a / "pc" / how)
            else:
                create(dpod.a / "pc" / "new.tmp", b"new")
                os.replace(dpod.a / "pc" / "new.tmp", dpod.a / "pc" / how)
            st = os.fstat(fd)
            assert st.st_nlink == 0 and st.st_size == 10, (how, st)
            assert os.pread(fd, 100, 0) == b"still open"
        finally:
            os.close(fd)
    fsync_dir(dpod.a / "pc")
    exp = dpod.export / "pc"
    for i in range(2 * n):
        a = os.stat(dpod.a / "pc" / f"m{i}.pyc")
        e = os.stat(exp / f"m{i}.pyc")
        assert (a.st_size, a.st_mode, a.st_nlink, a.st_ino, a.st_mtime_ns) == \
            (e.st_size, e.st_mode, e.st_nlink, e.st_ino, e.st_mtime_ns), i
        assert (dpod.b / "pc" / f"m{i}.pyc").read_bytes() == b"compiled %d" % i * (i + 1)


def test_create_refused_by_the_coordinator_is_reported(env, monkeypatch):
    """A program on the coordinator's host takes a name, and nothing
    recalls A's delegation for that (podfsd watches nothing here:
    PODFSD_WATCH=none; with its watch it recalls A first, see
    test_dir_delegation.py): A's create of it, answered by A, is refused
    there, and the next create in the directory reports it (EEXIST); the
    file is the program's, for everyone."""
    monkeypatch.setenv("PODFSD_WATCH", "none")
    dpod = Pod(env, opts="delegate", extra=["--delegate"])
    os.mkdir(dpod.a / "d")
    hold(dpod.a, "d")
    fsync_dir(dpod.a / "d")
    (dpod.export / "d" / "clash").write_bytes(b"theirs")
    before = creates_on(dpod.a)
    create(dpod.a / "d" / "clash", b"ours")
    assert creates_on(dpod.a) == before + 1  # answered by A
    deadline = time.monotonic() + 10
    while True:  # reported by the next create there, once it came back
        try:
            create(dpod.a / "d" / f"next{time.monotonic_ns()}", b"n")
        except OSError as e:
            assert e.errno == errno.EEXIST
            break
        assert time.monotonic() < deadline, "the refused create was never reported"
        time.sleep(0.05)
    assert podfs_stats(dpod.a)["dirdeleg_errors"] == 1
    assert (dpod.b / "d" / "clash").read_bytes() == b"theirs"
    assert (dpod.export / "d" / "clash").read_bytes() == b"theirs"
    assert (dpod.a / "d" / "clash").read_bytes() == b"theirs"


def _as_user(uid, gid, fn):
    """Runs fn() in a child with ids uid/gid; returns its errno (0: ok)."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            fn()
        except OSError as e:
            code = e.errno or 1
        except BaseException:
            code = 255
        os._exit(code)
    _, st = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(st)


def tar_ends(d, n, mtime_ns, ids, mode):
    """As tar fills a directory d and ends it: n files f0.. made there,
    then its times, owner and mode, one after the other."""
    for i in range(n):
        create(d / f"f{i}", b"%d" % i)
    os.utime(d, ns=(1_000_000_007, mtime_ns))
    os.chown(d, *ids)
    os.chmod(d, mode)


def test_changes_of_a_held_directory_answered_here(dpod):
    """As tar ends a directory: its mtime, owner and mode, answered by A
    (which holds it), reach the coordinator behind the creates there;
    B and the export see them. The slots made under the old rights are
    not used after: a mode that refuses the owner a create refuses it."""
    os.mkdir(dpod.a / "d")
    hold(dpod.a, "d")
    before = podfs_stats(dpod.a)
    tar_ends(dpod.a / "d", 5, 1_600_000_000_000_000_009, (1000, 1000), 0o555)
    after = podfs_stats(dpod.a)
    # (One waits for the daemon if the directory's attributes were not
    # known current at that moment: a reply of A's own in flight.)
    assert after["dirdeleg_dir_attrs"] - before["dirdeleg_dir_attrs"] >= 1, after
    st = os.stat(dpod.a / "d")
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o555, 1000, 1000)
    assert st.st_mtime_ns == 1_600_000_000_000_000_009
    # No write permission for the owner now: its create is refused.
    assert _as_user(1000, 1000, lambda: create(dpod.a / "d" / "late", b"x")) == errno.EACCES
    os.chmod(dpod.a / "d", 0o755)
    assert _as_user(1000, 1000, lambda: create(dpod.a / "d" / "ok", b"y")) == 0
    for root in (dpod.b, dpod.export):
        st = os.stat(root / "d")
        assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o755, 1000, 1000), root
        names = sorted(os.listdir(root / "d"))
        assert "ok" in names and "late" not in names and "f4" in names, (root, names)
        assert (root / "d" / "ok").read_bytes() == b"y"
    assert podfs_stats(dpod.a)["dirdeleg_errors"] == 0


def test_changes_of_a_held_directory_go_in_one_setattr(dpod):
    """tar's utime, chown and chmod of a directory it made, answered by A
    one after the other while the creates there are queued, reach the
    coordinator as one SETATTR: the export and B have all three, exactly.

    Each change answered here joins the SETATTR still queued before it;
    one queued behind creates in flight waits for them (dirdeleg_send.c,
    may_go). Whether the creates are still in flight when tar's changes
    come depends on timing (on a loaded machine their replies may come
    first, and the first change is sent at once): so every try checks
    that each change either joined another or went as a SETATTR of its
    own, and the values; and one of up to five tries must see all three
    go as one."""
    one = []
    for t in range(5):
        d = dpod.a / f"d{t}"
        os.mkdir(d)
        hold(dpod.a, d.name)
        fsync_dir(d)
        before = podfs_stats(dpod.a)
        sent0 = requests_sent(dpod.a)
        tar_ends(d, 3, 1_500_000_000_000_000_003, (1000, 1001), 0o751)
        fsync_dir(d)
        after = podfs_stats(dpod.a)
        sent = requests_since(dpod.a, sent0)
        answered = after["dirdeleg_dir_attrs"] - before["dirdeleg_dir_attrs"]
        joined = after["dirdeleg_dir_attrs_joined"] - before["dirdeleg_dir_attrs_joined"]
        # One goes to the coordinator itself if the directory's attributes
        # were not known current at that moment (a reply of A's own in
        # flight); the change after it is then not answered here either.
        assert joined <= max(answered - 1, 0), (after, sent)
        assert sent.get("SETATTR", 0) == 3 - joined, (answered, joined, sent)
        for root in (dpod.a, dpod.b, dpod.export):
            st = os.stat(root / d.name)
            assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o751, 1000, 1001), root
            # (Not the atime: B's listing reads the directory on the
            # coordinator, whose relatime moves an atime older than the mtime.)
            assert st.st_mtime_ns == 1_500_000_000_000_000_003, root
            assert [n for n in sorted(os.listdir(root / d.name)) if n[0] == "f"] == \
                ["f0", "f1", "f2"], root
        assert podfs_stats(dpod.a)["dirdeleg_errors"] == 0
        one.append((answered, joined))
        if joined == 2:
            break
    assert one[-1] == (3, 2), f"never one SETATTR for all three: (answered, joined) {one}"


def test_creates_keep_the_callers_rights(dpod):
    """Slots are made as the caller: another user cannot create in a
    directory it may not write to, even where root's creates are answered
    locally; in its own directory its files are its own, and a set-group-ID
    directory gives them its group."""
    os.mkdir(dpod.a / "d", 0o755)
    hold(dpod.a, "d")  # root's creates there are answered by A
    rc = _as_user(1000, 1000, lambda: create(dpod.a / "d" / "intruder", b"x"))
    assert rc == errno.EACCES
    assert not (dpod.export / "d" / "intruder").exists()
    os.mkdir(dpod.a / "u")
    os.chown(dpod.a / "u", 1000, 1234)
    os.chmod(dpod.a / "u", 0o2775)  # mkdir(2) drops the set-group-ID bit
    before = creates_on(dpod.a)

    def user_creates():
        for i in range(30):
            create(dpod.a / "u" / f"f{i}", b"u%d" % i)
            time.sleep(0.01)  # the grant and its slots come meanwhile
    assert _as_user(1000, 1000, user_creates) == 0
    assert creates_on(dpod.a) - before >= 4
    for i in range(30):
        for root in (dpod.a, dpod.b, dpod.export):
            s = os.stat(root / "u" / f"f{i}")
            assert (s.st_uid, s.st_gid) == (1000, 1234), (root, i)
            assert not s.st_mode & stat.S_ISGID


def test_coordinator_restart_keeps_what_was_synced(env, mount):
    """The coordinator dies while A's creates are on their way: after the
    restart, every file A fsynced is there with its data, once."""
    daemon = env.start_daemon(extra=EXTRA)
    a = mount(daemon, opts=OPTS)
    os.mkdir(a / "d")
    hold(a, "d")
    synced = []
    for i in range(40):
        p = a / "d" / f"f{i}"
        fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.write(fd, b"data %d" % i)
        if i % 4 == 0:
            os.fsync(fd)
            synced.append(i)
        os.close(fd)
    daemon.kill9()
    daemon.start()
    wait_for(lambda: podfs_stats(a)["reconnects"] >= 1 and podfs_stats(a)["down_since"] == 0,
             timeout=60, what="the mount reconnected")
    try:
        fd = os.open(a / "d", os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)  # may report a create the restart lost
        finally:
            os.close(fd)
    except OSError:
        pass
    names = os.listdir(env.export / "d")
    assert len(names) == len(set(names))
    for i in synced:
        assert (env.export / "d" / f"f{i}").read_bytes() == b"data %d" % i


def _deleg_conn(daemon, more=0):
    import pfsproto as P
    caps = P.CAP_PUSH | P.CAP_PUSH_ACK | P.CAP_DIR_ATTR | P.CAP_DELEG | more
    return P.connect(daemon.host, daemon.port, P.load_key(daemon.env.key), caps=caps)


@pytest.mark.plaintext
def test_protocol_mkdir_with_its_delegation(env):
    """A MKDIR that asks (its slots) gets the new directory's delegation
    and up to that many slots there, which CREATES names; one that does
    not ask, or a session without delegations, gets neither, and the
    directory either way."""
    import pfsproto as P
    daemon = env.start_daemon(extra=EXTRA)

    def mkdir(c, name, slots):
        r = P.Reader(c.call(P.OP_MKDIR, P.ROOT + P.fh(c.root) + P.name(name) +
                            P.u32(0o755) + P.u32(0o022) + P.u32(slots)))
        fh, a = r.entry()
        r.attr()
        flags = r.u32()
        packed = P.Reader(r.bytes())
        r.done()
        got = []
        while packed.left():
            got.append(packed.entry())
        assert stat.S_ISDIR(a["mode"]) and flags & P.MK_EMPTY
        return fh, flags, got

    with _deleg_conn(daemon, P.CAP_NEW_DIR) as c:
        d, flags, got = mkdir(c, "asked", 3)
        assert flags & P.MK_DELEG and len(got) == 3
        assert all(stat.S_ISREG(a["mode"]) for _, a in got)
        assert os.listdir(env.export / "asked") == []
        packed = P.fh(got[0][0]) + P.u64(0) + P.u32(os.O_WRONLY) + P.u32(0o644) + \
            P.name("f") + P.u32(P.CI_CLOSE | P.CI_SYNC) + P.blob(b"first")
        r = P.Reader(c.call(P.OP_CREATES, P.ROOT + P.fh(d) + P.blob(packed)))
        r.u32()
        r.attr()
        assert r.bytes() == P.u32(0)
        assert (env.export / "asked" / "f").read_bytes() == b"first"
        _, flags, got = mkdir(c, "plain", 0)
        assert not flags & P.MK_DELEG and got == []
        # A rename answered under the delegation: within the directory.
        pl, _ = P.Reader(c.call(P.OP_LOOKUP, P.ROOT + P.fh(c.root) + P.name("plain"))).entry()
        with pytest.raises(P.PfsError) as e:
            c.call(P.OP_RENAME, P.ROOT + P.fh(d) + P.name("f") + P.fh(pl) + P.name("g") +
                   P.u32(P.RN_DELEG))
        assert e.value.status == errno.EINVAL
        c.call(P.OP_RENAME, P.ROOT + P.fh(d) + P.name("f") + P.fh(d) + P.name("g") +
               P.u32(P.RN_DELEG))
        assert os.listdir(env.export / "asked") == ["g"]
        _, flags, got = mkdir(c, "many", 10_000)  # at most PFS_SLOTS_MAX
        assert flags & P.MK_DELEG and len(got) == P.SLOTS_MAX
    caps = P.CAP_PUSH | P.CAP_PUSH_ACK | P.CAP_DIR_ATTR | P.CAP_NEW_DIR
    with P.connect(daemon.host, daemon.port, P.load_key(env.key), caps=caps) as c:
        _, flags, got = mkdir(c, "nocap", 3)
        assert not flags & P.MK_DELEG and got == []
    assert sorted(os.listdir(env.export)) == ["asked", "many", "nocap", "plain"]


@pytest.mark.plaintext
def test_protocol_slots_and_creates(env):
    """SLOTS and CREATES as a client could send them, right or wrong:
    slots only under the session's own delegation, invisible until named,
    bounded per session, gone with the return; CREATES names what it can
    and says, item by item, what it could not; a malformed list names
    nothing."""
    import pfsproto as P
    daemon = env.start_daemon(extra=EXTRA)
    os.mkdir(env.export / "d")
    (env.export / "d" / "taken").write_bytes(b"t")

    def slots(c, d, count):
        r = P.Reader(c.call(P.OP_SLOTS, P.ROOT + P.fh(d) + P.u32(count)))
        packed = P.Reader(r.bytes())
        r.done()
        out = []
        while packed.left():
            out.append(packed.entry())
        return out

    def attrs(valid, mode=0, uid=0, gid=0, atime=(0, 0), mtime=(0, 0)):
        return (P.u32(valid) + P.u32(mode) + P.u32(uid) + P.u32(gid) + P.i64(atime[0]) +
                P.u32(atime[1]) + P.i64(mtime[0]) + P.u32(mtime[1]))

    def creates(c, d, items, raw=None):
        # (slot, mode, name[, how, data[, attrs]]).
        packed = raw if raw is not None else b"".join(
            P.fh(i[0]) + P.u64(0) + P.u32(os.O_WRONLY) + P.u32(i[1]) + P.name(i[2]) +
            P.u32(i[3] if len(i) > 3 else 0) + P.blob(i[4] if len(i) > 4 else b"") +
            (i[5] if len(i) > 5 else b"")
            for i in items)

        r = P.Reader(c.call(P.OP_CREATES, P.ROOT + P.fh(d) + P.blob(packed)))
        flags = r.u32()
        r.attr()
        status = r.bytes()
        r.bytes()
        r.done()
        assert flags & 1
        return list(struct.unpack("<%dI" % (len(status) // 4), status))

    with _deleg_conn(daemon) as c:
        d, _ = P.Reader(c.call(P.OP_LOOKUP, P.ROOT + P.fh(c.root) + P.name("d"))).entry()
        with pytest.raises(P.PfsError) as e:
            slots(c, d, 4)  # not held
        assert e.value.status == errno.EAGAIN
        c.call(P.OP_DELEG_DIR, P.ROOT + P.fh(d))
        got = slots(c, d, 4)
        assert len(got) == 4 and all(stat.S_ISREG(a["mode"]) for _, a in got)
        assert os.listdir(env.export / "d") == ["taken"]  # not named yet
        h = [fh for fh, _ in got]
        with pytest.raises(P.PfsError) as e:
            creates(c, d, [(h[0], 0o4755, "suid")])  # set-id bits: no
        assert e.value.status == errno.EINVAL
        with pytest.raises(P.PfsError) as e:
            creates(c, d, [], raw=P.fh(h[0]) + P.u64(0))  # truncated item
        assert e.value.status == errno.EINVAL
        with pytest.raises(P.PfsError) as e:
            creates(c, d, [(h[0], 0o644, "f%d" % i) for i in range(P.CREATES_MAX + 1)])
        assert e.value.status == errno.E2BIG
        assert os.listdir(env.export / "d") == ["taken"]
        assert creates(c, d, [(h[0], 0o640, "a"), (h[1], 0o644, "taken"),
                              (h[1], 0o644, "b"), (h[0], 0o644, "again")]) == \
            [0, errno.EEXIST, errno.ESTALE, errno.ESTALE]
        s = os.stat(env.export / "d" / "a")
        assert stat.S_IMODE(s.st_mode) == 0o640 and s.st_nlink == 1
        assert s.st_ino == got[0][1]["ino"]  # the number it had as a slot
        assert sorted(os.listdir(env.export / "d")) == ["a", "taken"]
        # An item may carry the file's first bytes, written before it is
        # named, and its close and sync; unknown bits of how are refused.
        with pytest.raises(P.PfsError) as e:
            creates(c, d, [(h[2], 0o644, "x", 4, b"")])
        assert e.value.status == errno.EINVAL
        data = os.urandom(70000)
        assert creates(c, d, [(h[2], 0o444, "data", P.CI_CLOSE | P.CI_SYNC, data),
                              (h[3], 0o600, "empty", P.CI_CLOSE, b"")]) == [0, 0]
        assert (env.export / "d" / "data").read_bytes() == data
        assert stat.S_IMODE(os.stat(env.export / "d" / "data").st_mode) == 0o444
        assert os.stat(env.export / "d" / "empty").st_size == 0
        # And a change of attributes, made before the name: only what a
        # delegation answers (no size).
        more = [fh for fh, _ in slots(c, d, 2)]
        with pytest.raises(P.PfsError) as e:
            creates(c, d, [(more[0], 0o600, "sized", P.CI_ATTRS, b"", attrs(P.SET_SIZE))])
        assert e.value.status == errno.EINVAL
        assert creates(c, d, [(more[0], 0o600, "tarred", P.CI_CLOSE | P.CI_SYNC | P.CI_ATTRS,
                               b"x", attrs(P.SET_MODE | P.SET_MTIME | P.SET_UID, mode=0o640,
                                           uid=1000, mtime=(1234567890, 5)))]) == [0]
        s = os.stat(env.export / "d" / "tarred")
        assert stat.S_IMODE(s.st_mode) == 0o640 and s.st_uid == 1000
        assert s.st_mtime_ns == 1234567890 * 10**9 + 5
        # A change of the directory's mode ends the slots made under the
        # rights before.
        c.call(P.OP_SETATTR, P.ROOT + P.fh(d) + P.u64(0) + P.u32(P.SET_MODE) + P.u32(0o755) +
               P.u32(0) * 2 + P.u64(0) + P.i64(0) + P.u32(0) + P.i64(0) + P.u32(0))
        assert creates(c, d, [(more[1], 0o644, "after-chmod")]) == [errno.ESTALE]
        c.call(P.OP_DELEG_RETURN, P.ROOT + P.fh(d))
        assert creates(c, d, [(h[2], 0o644, "late")]) == [errno.ESTALE]
        with pytest.raises(P.PfsError) as e:
            slots(c, d, 1)
        assert e.value.status == errno.EAGAIN
        # Bounded per session.
        os.mkdir(env.export / "e")
        e_, _ = P.Reader(c.call(P.OP_LOOKUP, P.ROOT + P.fh(c.root) + P.name("e"))).entry()
        c.call(P.OP_DELEG_DIR, P.ROOT + P.fh(e_))
        total = sum(len(slots(c, e_, P.SLOTS_MAX))
                    for _ in range(P.SLOTS_PER_SESSION // P.SLOTS_MAX))
        assert total == P.SLOTS_PER_SESSION
        with pytest.raises(P.PfsError) as e:
            slots(c, e_, 1)
        assert e.value.status == errno.EAGAIN
        assert os.listdir(env.export / "e") == []
    # Without the capability: no slots.
    with P.connect(daemon.host, daemon.port, P.load_key(env.key)) as c:
        d, _ = P.Reader(c.call(P.OP_LOOKUP, P.ROOT + P.fh(c.root) + P.name("d"))).entry()
        with pytest.raises(P.PfsError) as e:
            c.call(P.OP_SLOTS, P.ROOT + P.fh(d) + P.u32(1))
        assert e.value.status == errno.ENOSYS
