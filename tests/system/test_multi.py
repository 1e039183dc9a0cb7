"""test_multi.py: two hosts sharing one export, and locks across hosts.

Each client (`pod.a`, `pod.b`) runs podfs in its own network namespace and
talks to the daemon over a veth pair, so the daemon sees two distinct hosts.
Both mounts live in this mount namespace, so the test reads and writes both.
Visibility across mounts is polled with a deadline (attribute and entry
caches may be up to 1 s old); data written and closed on A must be what B
reads on a later open (close-to-open).
"""

import hashlib
import mmap
import os
import select
import subprocess
import time

import pytest

from helpers import PYTHON, read_file, wait_for, write_file

pytestmark = pytest.mark.netns

VISIBLE = 5.0  # seconds a change on one host may take to show on the other


def read_or_none(p):
    try:
        return read_file(p)
    except OSError:
        return None


@pytest.mark.parametrize("size", [0, 1, 4095, 1024 * 1024 + 1, 20 * 1024 * 1024],
                         ids=["0", "1", "4095", "1MiB+1", "20MiB"])
def test_write_a_read_b(pod, size):
    data = os.urandom(size)
    write_file(pod.a / "f", data)
    assert read_file(pod.export / "f") == data
    wait_for(lambda: read_or_none(pod.b / "f") == data, VISIBLE,
             what=f"B to read A's {size}-byte file")
    got = read_file(pod.b / "f")
    assert len(got) == size
    assert hashlib.sha256(got).hexdigest() == hashlib.sha256(data).hexdigest()


def test_overwrite_seen_after_reopen(pod):
    """B has the old version cached; A replaces the content in place (same
    size) and closes; B's next open must see the new bytes."""
    old = os.urandom(256 * 1024)
    new = os.urandom(256 * 1024)
    write_file(pod.a / "f", old)
    wait_for(lambda: read_or_none(pod.b / "f") == old, VISIBLE, what="B to read v1")
    assert read_file(pod.b / "f") == old  # now in B's page cache
    with open(pod.a / "f", "r+b") as f:
        f.write(new)
    wait_for(lambda: read_or_none(pod.b / "f") == new, VISIBLE,
             what="B to see A's overwrite after reopening")
    # And back the other way, with a size change.
    newer = os.urandom(1000)
    with open(pod.b / "f", "wb") as f:
        f.write(newer)
    wait_for(lambda: read_or_none(pod.a / "f") == newer, VISIBLE,
             what="A to see B's rewrite")


def test_append_from_both_hosts_in_turn(pod):
    write_file(pod.a / "log", b"")
    want = b""
    for i in range(6):
        src, dst = (pod.a, pod.b) if i % 2 == 0 else (pod.b, pod.a)
        wait_for(lambda: read_or_none(src / "log") == want, VISIBLE,
                 what=f"round {i}: writer to see the log so far")
        rec = f"line {i} from {'AB'[i % 2]}\n".encode()
        with open(src / "log", "ab") as f:
            f.write(rec)
        want += rec
        wait_for(lambda: read_or_none(dst / "log") == want, VISIBLE,
                 what=f"round {i}: reader to see the new line")
    assert read_file(pod.export / "log") == want


def test_namespace_changes_visible(pod):
    a, b = pod.a, pod.b
    # B looks first, so it holds negative entries it must drop.
    assert not os.path.exists(b / "f")
    assert not os.path.exists(b / "d")
    write_file(a / "f", b"1")
    os.mkdir(a / "d")
    wait_for(lambda: os.path.exists(b / "f") and os.path.isdir(b / "d"), VISIBLE,
             what="B to see the create and mkdir")
    assert sorted(os.listdir(b.path)) == ["d", "f"]
    os.rename(a / "f", a / "d" / "g")
    wait_for(lambda: not os.path.exists(b / "f") and read_or_none(b / "d" / "g") == b"1",
             VISIBLE, what="B to see the rename")
    assert os.listdir(b / "d") == ["g"]
    os.unlink(a / "d" / "g")
    wait_for(lambda: not os.path.exists(b / "d" / "g"), VISIBLE, what="B to see the unlink")
    os.rmdir(a / "d")
    wait_for(lambda: os.listdir(b.path) == [], VISIBLE, what="B to see the rmdir")
    # Attribute changes.
    write_file(b / "m", b"x")
    wait_for(lambda: os.path.exists(a / "m"), VISIBLE, what="A to see m")
    os.chmod(b / "m", 0o600)
    wait_for(lambda: os.stat(a / "m").st_mode & 0o777 == 0o600, VISIBLE,
             what="A to see the chmod")
    os.truncate(b / "m", 12345)
    wait_for(lambda: os.stat(a / "m").st_size == 12345, VISIBLE, what="A to see the truncate")


def test_checkpoint_rename_pattern(pod):
    """Write tmp + fsync + rename over the old name on A; B opening the name
    gets the complete new file, never a mix."""
    write_file(pod.a / "ckpt", b"v0" * 1000)
    wait_for(lambda: read_or_none(pod.b / "ckpt") == b"v0" * 1000, VISIBLE, what="v0 on B")
    for v in range(1, 4):
        body = (f"v{v}".encode()) * 500000
        with open(pod.a / "ckpt.tmp", "wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.rename(pod.a / "ckpt.tmp", pod.a / "ckpt")
        wait_for(lambda: read_or_none(pod.b / "ckpt") == body, VISIBLE,
                 what=f"B to read checkpoint v{v}")


# --- locks across hosts -------------------------------------------------------------------

HOLDER = r"""
import fcntl, os, sys, time, struct
path, kind = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDWR)
if kind == "fcntl":
    fcntl.lockf(fd, fcntl.LOCK_EX)
elif kind == "fcntl-rd":
    fcntl.lockf(fd, fcntl.LOCK_SH)
elif kind == "range":
    fcntl.lockf(fd, fcntl.LOCK_EX, 100, 0)  # bytes 0..99
else:
    fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
cmd = sys.stdin.readline().strip()
if cmd == "unlock":
    t = time.monotonic()
    if kind == "flock":
        fcntl.flock(fd, fcntl.LOCK_UN)
    elif kind == "range":
        fcntl.lockf(fd, fcntl.LOCK_UN, 100, 0)
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN)
    print("released", t, flush=True)
elif cmd == "close":
    t = time.monotonic()
    os.close(fd)
    print("released", t, flush=True)
elif cmd == "exit":
    os._exit(0)
sys.stdin.readline()
"""

TRY = r"""
import errno, fcntl, os, sys
path, kind = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDWR)
try:
    if kind == "fcntl":
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    elif kind == "fcntl-rd":
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    elif kind == "range-other":
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 100, 100)  # bytes 100..199
    elif kind == "range-overlap":
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 95)
    else:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("GOT")
except OSError as e:
    print(errno.errorcode[e.errno])
"""

WAITER = r"""
import fcntl, os, sys, time
path, kind = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDWR)
print("waiting", flush=True)
if kind == "fcntl":
    fcntl.lockf(fd, fcntl.LOCK_EX)   # F_SETLKW
else:
    fcntl.flock(fd, fcntl.LOCK_EX)
print("acquired", time.monotonic(), flush=True)
sys.stdin.readline()
"""


class Holder:
    def __init__(self, path, kind):
        self.p = subprocess.Popen([PYTHON, "-c", HOLDER, str(path), kind],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = readline(self.p, 30)
        assert line == "locked", f"holder did not get the lock: {line!r}"

    def cmd(self, c):
        self.p.stdin.write(c + "\n")
        self.p.stdin.flush()
        if c == "exit":
            assert self.p.wait(30) == 0
            return None
        line = readline(self.p, 30)
        assert line.startswith("released"), line
        return float(line.split()[1])

    def finish(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.write("\n")
                self.p.stdin.flush()
            except OSError:
                pass
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(10)


def readline(p, timeout):
    """One line of p's stdout within timeout, or '' (bounded)."""
    r, _, _ = select.select([p.stdout], [], [], timeout)
    if not r:
        return ""
    return p.stdout.readline().strip()


def try_lock(path, kind):
    r = subprocess.run([PYTHON, "-c", TRY, str(path), kind], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


CONFLICT = ("EAGAIN", "EACCES")


def test_fcntl_lock_conflict_across_hosts(pod):
    write_file(pod.a / "lk", b"x" * 1000)
    wait_for(lambda: os.path.exists(pod.b / "lk"), VISIBLE, what="B to see lk")
    h = Holder(pod.a / "lk", "fcntl")
    try:
        assert try_lock(pod.b / "lk", "fcntl") in CONFLICT
        assert try_lock(pod.b / "lk", "fcntl-rd") in CONFLICT
        h.cmd("unlock")
        assert try_lock(pod.b / "lk", "fcntl") == "GOT"
    finally:
        h.finish()


def test_fcntl_read_locks_share_across_hosts(pod):
    write_file(pod.a / "lk", b"x")
    wait_for(lambda: os.path.exists(pod.b / "lk"), VISIBLE, what="B to see lk")
    h = Holder(pod.a / "lk", "fcntl-rd")
    try:
        assert try_lock(pod.b / "lk", "fcntl-rd") == "GOT"
        assert try_lock(pod.b / "lk", "fcntl") in CONFLICT
    finally:
        h.finish()


def test_fcntl_byte_ranges_across_hosts(pod):
    write_file(pod.a / "lk", b"x" * 1000)
    wait_for(lambda: os.path.exists(pod.b / "lk"), VISIBLE, what="B to see lk")
    h = Holder(pod.a / "lk", "range")
    try:
        assert try_lock(pod.b / "lk", "range-other") == "GOT"
        assert try_lock(pod.b / "lk", "range-overlap") in CONFLICT
    finally:
        h.finish()


@pytest.mark.parametrize("kind", ["fcntl", "flock"])
def test_blocking_lock_waits_for_release(pod, kind):
    """F_SETLKW / blocking flock on B returns only after A released."""
    write_file(pod.a / "lk", b"x")
    wait_for(lambda: os.path.exists(pod.b / "lk"), VISIBLE, what="B to see lk")
    h = Holder(pod.a / "lk", kind)
    w = subprocess.Popen([PYTHON, "-c", WAITER, str(pod.b / "lk"), kind],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert readline(w, 30) == "waiting"
        # While A holds the lock, B must stay blocked (give it ample chance
        # to wrongly succeed).
        early = readline(w, 1.5)
        assert early == "", f"B acquired while A held the lock: {early!r}"
        t_release = h.cmd("unlock")
        line = readline(w, 30)
        assert line.startswith("acquired"), f"B never acquired after release: {line!r}"
        assert float(line.split()[1]) >= t_release
    finally:
        w.kill()
        w.wait(10)
        h.finish()


def test_flock_conflict_across_hosts(pod):
    write_file(pod.a / "lk", b"x")
    wait_for(lambda: os.path.exists(pod.b / "lk"), VISIBLE, what="B to see lk")
    h = Holder(pod.a / "lk", "flock")
    try:
        assert try_lock(pod.b / "lk", "flock") in ("EWOULDBLOCK", "EAGAIN")
        h.cmd("unlock")
        assert try_lock(pod.b / "lk", "flock") == "GOT"
    finally:
        h.finish()


@pytest.mark.parametrize("how", ["close", "exit", "kill"])
@pytest.mark.parametrize("kind", ["fcntl", "flock"])
def test_lock_released_when_holder_goes(pod, kind, how):
    write_file(pod.a / "lk", b"x")
    wait_for(lambda: os.path.exists(pod.b / "lk"), VISIBLE, what="B to see lk")
    h = Holder(pod.a / "lk", kind)
    try:
        assert try_lock(pod.b / "lk", kind) in CONFLICT + ("EWOULDBLOCK",)
        if how == "kill":
            h.p.kill()
            h.p.wait(30)
        else:
            h.cmd(how)
        wait_for(lambda: try_lock(pod.b / "lk", kind) == "GOT", VISIBLE,
                 what=f"the lock to be free after the holder's {how}")
    finally:
        h.finish()


def test_lock_conflict_same_host_other_process(pod):
    """Two processes on the same host also conflict (the daemon must not
    treat one client as one owner)."""
    write_file(pod.a / "lk", b"x")
    h = Holder(pod.a / "lk", "fcntl")
    try:
        assert try_lock(pod.a / "lk", "fcntl") in CONFLICT
    finally:
        h.finish()


def test_cached_listing_sees_new_entries(pod):
    """B lists a directory (the kernel may cache the listing); entries A
    adds or removes afterwards appear in B's next listing."""
    os.mkdir(pod.a / "d")
    for i in range(100):
        write_file(pod.a / "d" / f"f{i:03d}", b"x")
    want = {f"f{i:03d}" for i in range(100)}
    wait_for(lambda: set(os.listdir(pod.b / "d")) == want, VISIBLE, what="B's first listing")
    assert set(os.listdir(pod.b / "d")) == want  # now cached
    write_file(pod.a / "d" / "new", b"y")
    os.unlink(pod.a / "d" / "f000")
    want = (want - {"f000"}) | {"new"}
    wait_for(lambda: set(os.listdir(pod.b / "d")) == want, VISIBLE,
             what="B's listing to show A's create and unlink")
    # Attributes from the listing (readdirplus) are fresh too.
    with open(pod.a / "d" / "new", "ab") as f:
        f.write(b"z" * 999)
    wait_for(lambda: {e.name: e.stat().st_size for e in os.scandir(pod.b / "d")}["new"] == 1000,
             VISIBLE, what="B to see the new size via scandir")


def test_open_fd_on_b_sees_a_writes_after_reopen_and_lock(pod):
    """Taking a lock revalidates the cache (as NFS does): B holds the file
    open, A rewrites it under the lock, B locks and reads the new data."""
    import fcntl
    write_file(pod.a / "shared", b"A" * 4096)
    wait_for(lambda: read_or_none(pod.b / "shared") == b"A" * 4096, VISIBLE, what="v1 on B")
    fdb = os.open(pod.b / "shared", os.O_RDWR)
    try:
        assert os.pread(fdb, 4096, 0) == b"A" * 4096
        fda = os.open(pod.a / "shared", os.O_RDWR)
        try:
            fcntl.lockf(fda, fcntl.LOCK_EX)
            os.pwrite(fda, b"B" * 4096, 0)
            os.fsync(fda)
            fcntl.lockf(fda, fcntl.LOCK_UN)
        finally:
            os.close(fda)
        fcntl.lockf(fdb, fcntl.LOCK_SH)
        try:
            assert os.pread(fdb, 4096, 0) == b"B" * 4096
        finally:
            fcntl.lockf(fdb, fcntl.LOCK_UN)
    finally:
        os.close(fdb)


def test_two_hosts_write_disjoint_ranges(pod):
    """Shards of one file written at the same time from two hosts (page-
    aligned, disjoint ranges): after both close, the file holds both."""
    mib = 1 << 20
    with open(pod.a / "ckpt", "wb") as f:
        f.truncate(4 * mib)
    wait_for(lambda: os.path.exists(pod.b / "ckpt") and
             os.path.getsize(pod.b / "ckpt") == 4 * mib, VISIBLE, what="B to see ckpt")
    da, db = os.urandom(2 * mib), os.urandom(2 * mib)
    fa = os.open(pod.a / "ckpt", os.O_WRONLY)
    fb = os.open(pod.b / "ckpt", os.O_WRONLY)
    try:
        for i in range(0, 2 * mib, 256 * 1024):  # interleave the two writers
            os.pwrite(fa, da[i:i + 256 * 1024], i)
            os.pwrite(fb, db[i:i + 256 * 1024], 2 * mib + i)
    finally:
        os.close(fa)
        os.close(fb)
    assert read_file(pod.export / "ckpt") == da + db
    wait_for(lambda: read_or_none(pod.a / "ckpt") == da + db, VISIBLE, what="A to read both")
    wait_for(lambda: read_or_none(pod.b / "ckpt") == da + db, VISIBLE, what="B to read both")


def test_xattr_visible_across_hosts(pod):
    write_file(pod.a / "f", b"x")
    wait_for(lambda: os.path.exists(pod.b / "f"), VISIBLE, what="B to see f")
    os.setxattr(pod.a / "f", "user.tag", b"one")

    def b_sees(v):
        try:
            return os.getxattr(pod.b / "f", "user.tag") == v
        except OSError:
            return False
    wait_for(lambda: b_sees(b"one"), VISIBLE, what="B to see the xattr")
    os.setxattr(pod.b / "f", "user.tag", b"two")
    wait_for(lambda: os.getxattr(pod.a / "f", "user.tag") == b"two", VISIBLE,
             what="A to see B's change")
    os.removexattr(pod.a / "f", "user.tag")
    wait_for(lambda: "user.tag" not in os.listxattr(pod.b / "f"), VISIBLE,
             what="B to see the removal")


def test_open_file_survives_rename_over_from_other_host(pod):
    """B reads a checkpoint while A atomically replaces it: B's open file
    keeps reading the old, complete version (POSIX; NFS would give ESTALE)."""
    old = os.urandom(3 << 20)
    write_file(pod.a / "ckpt", old)
    wait_for(lambda: read_or_none(pod.b / "ckpt") == old, VISIBLE, what="B to see v1")
    fd = os.open(pod.b / "ckpt", os.O_RDONLY)
    try:
        first = os.pread(fd, 1 << 20, 0)
        new = os.urandom(3 << 20)
        with open(pod.a / "ckpt.tmp", "wb") as f:
            f.write(new)
            f.flush()
            os.fsync(f.fileno())
        os.rename(pod.a / "ckpt.tmp", pod.a / "ckpt")
        rest = os.pread(fd, 2 << 20, 1 << 20)
        assert first + rest == old
    finally:
        os.close(fd)
    wait_for(lambda: read_or_none(pod.b / "ckpt") == new, VISIBLE, what="B to see v2")


def daemon_deleted_fds(daemon, export):
    """Files under export the daemon holds open though deleted."""
    d = f"/proc/{daemon.proc.pid}/fd"
    out = []
    for n in os.listdir(d):
        try:
            t = os.readlink(f"{d}/{n}")
        except OSError:
            continue
        if t.startswith(str(export)) and t.endswith(" (deleted)"):
            out.append(t)
    return out


def test_file_open_on_one_host_survives_removal_on_another(pod):
    """A opened two files read-only without asking the daemon and read
    nothing yet; B deletes one and renames a new file over the other. A
    reads both old files whole, also after the daemon's grace for deleted
    files (5 s) ran out: A's push about them made A open them on the
    daemon. NFS gives ESTALE here. Once A closes them, the daemon lets
    their blocks go."""
    one, two = os.urandom(3 << 20), os.urandom(3 << 20)
    os.mkdir(pod.export / "d")
    write_file(pod.export / "d" / "one", one)
    write_file(pod.export / "d" / "two", two)
    write_file(pod.export / "d" / "new", b"new")
    for m in (pod.a, pod.b):
        wait_for(lambda: os.path.exists(m / "d" / "two"), VISIBLE, what="the files")
    fds = [os.open(pod.a / "d" / n, os.O_RDONLY) for n in ("one", "two")]
    try:
        os.unlink(pod.b / "d" / "one")
        os.rename(pod.b / "d" / "new", pod.b / "d" / "two")
        wait_for(lambda: not os.path.exists(pod.a / "d" / "one"), VISIBLE,
                 what="A to see the unlink")
        wait_for(lambda: read_or_none(pod.a / "d" / "two") == b"new", VISIBLE,
                 what="A to see the rename")
        time.sleep(6.5)
        for fd, want in zip(fds, (one, two)):
            got = b""
            while len(got) < len(want):
                chunk = os.pread(fd, len(want) - len(got), len(got))
                if not chunk:
                    break
                got += chunk
            assert got == want
    finally:
        for fd in fds:
            os.close(fd)
    wait_for(lambda: not daemon_deleted_fds(pod.daemon, pod.export), 10,
             what="the daemon to close the deleted files")


def test_new_directory_shows_what_others_put_in_it(pod):
    """A makes directories and knows them empty without asking (no
    LISTDIR); what B, or a process beside podfs on the coordinator,
    creates in them right after is still visible to A's lookups and
    listings, not hidden behind that empty listing."""
    def reqs(m):
        st = os.getxattr(m.path, "user.podfs.stats").decode().split()
        return dict(zip(st[::2], map(int, st[1::2])))

    os.mkdir(pod.a / "top")
    wait_for(lambda: os.path.isdir(pod.b / "top"), VISIBLE, what="B to see top")
    before = reqs(pod.a).get("req_LISTDIR", 0)
    for i in range(20):
        os.mkdir(pod.a / "top" / f"d{i}")
        assert not os.path.exists(pod.a / "top" / f"d{i}" / "x")  # answered locally
        if i % 2:
            write_file(pod.export / "top" / f"d{i}" / "x", b"direct")
        else:
            wait_for(lambda: os.path.isdir(pod.b / "top" / f"d{i}"), VISIBLE, what="B to see it")
            write_file(pod.b / "top" / f"d{i}" / "x", b"from B")
        write_file(pod.a / "top" / f"d{i}" / "own", b"A")
    assert reqs(pod.a).get("req_LISTDIR", 0) == before
    for i in range(20):
        d = pod.a / "top" / f"d{i}"
        want = b"direct" if i % 2 else b"from B"
        wait_for(lambda: read_or_none(d / "x") == want, VISIBLE, what=f"A to see d{i}/x")
        wait_for(lambda: sorted(os.listdir(d)) == ["own", "x"], VISIBLE,
                 what=f"A's listing of d{i}")


def _version_bytes(i, k, size):
    """Content of version k of file i: a header naming it, then bytes
    derived from it, size bytes in all (a torn or mixed read fails to
    parse)."""
    head = b"%d:%d:%d:" % (i, k, size)
    body = hashlib.sha256(head).digest() * (size // 32 + 1)
    return (head + body)[:max(size, len(head))]


def test_close_to_open_of_small_files_under_churn(pod):
    """A rewrites small files of one directory, in place or by renaming
    a new file over them, and adds and removes other names there, so that
    B's listing of the directory keeps going stale and B's kernel keeps
    forgetting and finding files again; B keeps opening and reading them
    (the rename-only half through mmap too). Whenever no write of a file
    was under way while B opened and read it, B read exactly the version
    whose close (or rename) returned last: never an older one from its
    caches, never a mix."""
    import random
    import threading
    a, b = pod.a, pod.b
    n = 16
    os.mkdir(a / "d")
    state = [[0, 0, 0] for _ in range(n)]  # [writes begun, writes done, version]
    lock = threading.Lock()
    for i in range(n):
        write_file(a / "d" / f"f{i}", _version_bytes(i, 0, 100))
    stop = time.monotonic() + 6
    errors = []

    def writer():
        rnd = random.Random(1)
        k = 0
        while time.monotonic() < stop and not errors:
            i = rnd.randrange(n)
            k += 1
            data = _version_bytes(i, k, rnd.choice([0, 10, 4095, 4096, 5000, 12000, 40000, 70000]))
            with lock:
                state[i][0] += 1
            if i < n // 2 and rnd.random() < 0.5:
                write_file(a / "d" / f"f{i}", data)
            else:
                write_file(a / "d" / f".t{i}", data)
                os.rename(a / "d" / f".t{i}", a / "d" / f"f{i}")
            with lock:
                state[i][1] += 1
                state[i][2] = k
            if rnd.random() < 0.2:
                x = a / "d" / f"x{rnd.randrange(4)}"
                if os.path.exists(x):
                    os.unlink(x)
                else:
                    write_file(x, b"x")

    t = threading.Thread(target=writer)
    t.start()
    rnd = random.Random(2)
    checked = 0
    try:
        while time.monotonic() < stop and not errors:
            i = rnd.randrange(n)
            with lock:
                before = tuple(state[i])
            if i < n // 2 or rnd.random() < 0.5:
                got = read_file(b / "d" / f"f{i}")
            else:
                # A file only ever renamed over never changes once
                # opened: mapping it cannot fault (SIGBUS).
                with open(b / "d" / f"f{i}", "rb") as f:
                    with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mm:
                        got = mm[:]
            with lock:
                after = tuple(state[i])
            if before != after or before[0] != before[1]:
                continue  # a write overlapped: anything goes
            k = before[2]
            head = got.split(b":")
            ok = len(head) > 3 and head[0] == b"%d" % i and head[1] == b"%d" % k
            if not ok or got != _version_bytes(i, k, int(head[2])):
                errors.append((f"f{i}", "want version", k, "got", got[:16], len(got)))
            checked += 1
    finally:
        t.join(timeout=30)
    assert not errors, errors
    assert checked > 100, checked
