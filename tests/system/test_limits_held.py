"""test_limits_held.py: what a host keeps on the coordinator is capped
(podfsd --limits; README "Limits"), per host and in all: open files,
lock owners, the byte ranges of locks (entries of the kernel's lock
table), and the memory and fds behind an open file or directory. A client
that holds the pod key (pfsproto.py) takes its share and gets its errors
alone; a legitimate mount on another host keeps working. The limits on
what clients have in flight, which tests time, are in test_limits.py.
"""

import errno
import fcntl
import os
import re
import resource

import pytest

import pfsproto as P
from helpers import podfsd_status, wait_for
from limited import another_host_works, limited, on_host, vmrss

# The attackers speak pfsproto, which has no TLS: their daemons also
# take plaintext (the legitimate mounts still use TLS).
pytestmark = pytest.mark.plaintext


def test_open_files_count_per_host(env):
    """A key holder may open as many sessions as it likes: the open files
    of all the sessions from one address count against open-files
    together. Counted per session, four sessions of one client took every
    fd for clients' files (a quarter each, the default), and every other
    host's opens failed with EMFILE until their lease ran out. Another
    host opens meanwhile."""
    cap = 500
    daemon, m = limited(env, f"open-files={cap}")
    key = P.load_key(env.key)
    conns = [P.connect(daemon.host, daemon.port, key) for _ in range(4)]
    try:
        got = []
        for c in conns:
            h, _ = c.lookup(c.root, "shared")
            n = 0
            while n <= cap:
                try:
                    c.open(h)
                except P.PfsError as e:
                    assert e.status == errno.EMFILE, e
                    break
                n += 1
            got.append(n)
        assert got == [cap, 0, 0, 0], got
        another_host_works(env, daemon, m, "during")
        conns.pop(0).close()  # its session lingers, its files open
        with P.connect(daemon.host, daemon.port, key) as c:
            h, _ = c.lookup(c.root, "shared")
            with pytest.raises(P.PfsError) as e:
                c.open(h)
            assert e.value.status == errno.EMFILE
    finally:
        for c in conns:
            c.close()


def other_host_locks(path, at):
    """The legitimate mount takes and drops a lock of 10 bytes at at."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, at)
        fcntl.lockf(fd, fcntl.LOCK_UN, 10, at)
    finally:
        os.close(fd)


def test_lock_owner_cap(env):
    cap = 5
    daemon, m = limited(env, f"lock-owners={cap}")
    env.expect_log(r"reached lock-owners", tag=daemon.tag)
    with P.connect(daemon.host, daemon.port, P.load_key(env.key)) as c:
        h, _ = c.lookup(c.root, "shared")
        fid = c.open(h, os.O_RDWR)
        for owner in range(1, cap + 1):
            c.call(P.OP_SETLK, P.lock_req(h, fid, owner, P.LK_WR, owner, owner))
        for owner in (cap + 1, cap + 2):
            try:
                c.call(P.OP_SETLK, P.lock_req(h, fid, owner, P.LK_WR, owner, owner))
            except P.PfsError as e:
                assert e.status == errno.EMFILE, e
            else:
                raise AssertionError(f"lock owner {owner} past the cap got its lock")
        # flock locks count too.
        try:
            c.call(P.OP_SETLK, P.lock_req(h, fid, 99, P.LK_RD, flags=P.LKF_FLOCK))
        except P.PfsError as e:
            assert e.status == errno.EMFILE, e
        else:
            raise AssertionError("a flock past the cap got its lock")
        other_host_locks(m / "shared", 100)  # another range, meanwhile
        # An owner that lets go makes room for another.
        c.call(P.OP_UNLOCK_OWNER, P.ROOT + P.fh(h) + P.u64(1))
        c.call(P.OP_SETLK, P.lock_req(h, fid, cap + 1, P.LK_WR, cap + 1, cap + 1))
    assert len(re.findall(rf"reached lock-owners={cap}", daemon.log())) == 1


def _ofd_locks_on(path):
    """The kernel's OFD lock entries on path's inode (/proc/locks)."""
    st = os.stat(path)
    dev_ino = ":%02x:%d " % (os.minor(st.st_dev), st.st_ino)
    with open("/proc/locks") as f:
        return sum(1 for ln in f if "OFDLCK" in ln and dev_ino in ln)


def test_lock_ranges_capped(env):
    """A host whose clients lock every other byte of a file holds at most
    lock-ranges entries of the kernel's lock table on the coordinator, over
    all its sessions (ENOLCK past it, logged once per session); an unlock
    that would split a range counts too, and a lock that merges ranges
    makes room. Over all hosts, lock-table: another host still gets its
    256 ranges when the table is full, and no more, and up to its own cap
    once there is room. The other host locks the same file meanwhile.
    Without the count, 24,000 ranges in 20 s through a mount took as much
    kernel memory, and slowed every lock of that file."""
    cap, table = 300, 400
    daemon, m = limited(env, f"lock-ranges={cap},lock-table={table}")
    key = P.load_key(env.key)

    def setlk(c, h, fid, owner, typ, start, end):
        try:
            c.call(P.OP_SETLK, P.lock_req(h, fid, owner, typ, start, end))
        except P.PfsError as e:
            return e.status
        return 0

    def other_host_takes(n):
        """Another host's session locks n bytes, one range each, until
        refused: (ranges it got, the error or 0)."""
        out = on_host(m.netns, env, daemon, """
h, _ = c.lookup(c.root, "shared")
fid = c.open(h, 2)
got, err = 0, 0
for i in range(int(ARGS[0])):
    try:
        c.call(P.OP_SETLK, P.lock_req(h, fid, 7, P.LK_RD, 2 * i + 100001, 2 * i + 100001))
    except P.PfsError as e:
        err = e.status
        break
    got += 1
print(got, err)
""", n, timeout=120)
        return tuple(int(w) for w in out.split())

    with P.connect(daemon.host, daemon.port, key) as a, P.connect(daemon.host, daemon.port, key) as a2:
        h, _ = a.lookup(a.root, "shared")
        fa = a.open(h, os.O_RDWR)
        for i in range(cap):
            assert setlk(a, h, fa, 1, P.LK_WR, 2 * i, 2 * i) == 0, i
        assert setlk(a, h, fa, 1, P.LK_WR, 2 * cap, 2 * cap) == errno.ENOLCK
        assert setlk(a, h, fa, 2, P.LK_RD, 5000, 5000) == errno.ENOLCK  # another owner too
        # Another session of the same host: the same account.
        h2, _ = a2.lookup(a2.root, "shared")
        f2 = a2.open(h2, os.O_RDWR)
        assert setlk(a2, h2, f2, 1, P.LK_WR, 9000, 9000) == errno.ENOLCK
        # Unlocking the middle of a range would split it: refused too.
        assert setlk(a, h, fa, 1, P.LK_UN, 0, 0) == 0  # a whole range: room for one
        assert setlk(a, h, fa, 1, P.LK_WR, 1000, 1100) == 0
        assert setlk(a, h, fa, 1, P.LK_UN, 1050, 1050) == errno.ENOLCK
        assert _ofd_locks_on(env.export / "shared") == cap
        other_host_locks(m / "shared", 20000)  # the same file, meanwhile
        # One lock over them all merges them: room again.
        assert setlk(a, h, fa, 1, P.LK_WR, 0, 2 * cap) == 0
        assert _ofd_locks_on(env.export / "shared") == 2
        for i in range(cap - 2):
            assert setlk(a, h, fa, 1, P.LK_WR, 4000 + 2 * i, 4000 + 2 * i) == 0, i
        keys, clients = podfsd_status(daemon)
        assert int(keys["lock_ranges"]) == cap
        assert sorted(int(c["lock_ranges"]) for c in clients)[-1] == cap, clients
        # The table holds 300 of 400: another host goes past it up to its
        # share; once a let go, up to its own cap, which the first
        # session's 256 (gone, its locks kept for the lock lease) still
        # count in.
        assert other_host_takes(cap + 1) == (256, errno.ENOLCK)
        a.call(P.OP_UNLOCK_OWNER, P.ROOT + P.fh(h) + P.u64(1))
        assert other_host_takes(cap + 1) == (cap - 256, errno.ENOLCK)
    log = daemon.log()
    assert len(re.findall(rf"reached lock-ranges={cap}", log)) == 3, log[-3000:]
    assert len(re.findall(rf"lock-table={table} byte ranges", log)) == 1, log[-3000:]


def test_open_directories_hold_no_buffers(env, monkeypatch):
    """A client may keep open-files directories open, each read once:
    podfsd holds an fd for each, not a directory stream with its 32 KiB
    buffer (glibc's), which for the 65,536 a client may hold by default
    was 2 GB that no limit counted. 6,000 of them, read once each, grew
    podfsd by more than 190 MB before; here by less than half that, which
    leaves room for what AddressSanitizer keeps of it (its quarantine of
    freed blocks, the READDIRs' streams among them, is kept to 1 MB)."""
    n = 6000
    monkeypatch.setenv("ASAN_OPTIONS", os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=1")
    daemon, m = limited(env, f"open-files={n + 10}")
    monkeypatch.undo()
    d = env.export / "big"
    d.mkdir()
    for i in range(400):
        (d / ("a-file-name-long-enough-to-fill-a-directory-buffer-soon-%04d" % i)).touch()
    with P.connect(daemon.host, daemon.port, P.load_key(env.key)) as c:
        h, _ = c.lookup(c.root, "big")
        fid = c.opendir(h)
        c.readdir(h, fid)
        before = vmrss(daemon.proc.pid)
        for _ in range(n - 1):
            fid = c.opendir(h)
            c.readdir(h, fid)
        grown = (vmrss(daemon.proc.pid) - before) >> 10
        keys, clients = podfsd_status(daemon)
        assert max(int(cl["open_files"]) for cl in clients) >= n, clients
    print(f"podfsd grew by {grown} KiB for {n} open directories")
    assert grown < 64 * 1024, grown
    assert sorted(os.listdir(m / "big"))[0].endswith("0000")


def test_a_files_direct_twin_counts_in_the_fd_budget(env):
    """A big aligned WRITE goes through a second fd of the file, opened
    with O_DIRECT: that fd comes out of the budget of fds for clients'
    files too (podfsd status counts it), else each open file of a client
    could hold two fds against one counted, and a few clients past their
    budgets would take the fds kept back for logins."""
    daemon, m = limited(env, "open-files=100")
    probe = env.export / "probe"
    fd = os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_DIRECT)  # the export takes O_DIRECT
    os.close(fd)
    with P.connect(daemon.host, daemon.port, P.load_key(env.key)) as c:
        before = int(podfsd_status(daemon)[0]["fds"])
        files = []
        for i in range(10):
            h, _, fid = c.create(c.root, f"big{i}")
            assert c.write(h, fid, 0, bytes(256 * 1024)) == 256 * 1024
            files.append((h, fid))
        assert int(podfsd_status(daemon)[0]["fds"]) - before == 20
        for h, fid in files:
            c.release(h, fid)
        wait_for(lambda: int(podfsd_status(daemon)[0]["fds"]) == before, 10,
                 what="the fds to go back to the budget")
    assert (m / "big9").stat().st_size == 256 * 1024


def test_lingering_sessions_of_other_hosts_survive_a_flood(env):
    """Past lingering=N disconnected sessions, the one that ends early is
    the oldest of the host with the most: a key holder that leaves
    sessions behind ends its own, and a host that lost its connection
    for a moment still finds its session (its open files and locks)
    when it comes back. Before, the oldest of all went, whoever's."""
    daemon = env.start_daemon(listen="0.0.0.0:0", extra=["--lease", "300", "--limits", "lingering=2"])
    ns = env.new_netns()
    key = P.load_key(env.key)

    def other_host(*cid):
        """A session of the other host (resuming cid): (its id, resumed)."""
        out = on_host(ns, env, daemon, "print(c.client_id, int(bool(c.auth_flags & P.AUTH_RESUMED)))",
                      cid=cid[0] if cid else None)
        cid_got, resumed = out.split()
        return int(cid_got), resumed == "1"

    theirs, _ = other_host()  # its session lingers first, the oldest
    ours = []
    for _ in range(3):
        c = P.connect(daemon.host, daemon.port, key)
        ours.append(c.client_id)
        c.close()
    wait_for(lambda: daemon.log().count("expired early") >= 2, 10, what="two sessions to expire early")
    assert other_host(theirs) == (theirs, True)
    for cid, resumed in ((ours[2], True), (ours[0], False)):
        with P.connect(daemon.host, daemon.port, key, client_id=cid) as c:
            assert bool(c.auth_flags & P.AUTH_RESUMED) == resumed, (cid, c.auth_flags)


# The other host's MKDIR, with a request id of its choosing: its reply,
# as the daemon first sent it or from its cache of replies.
MKDIR_AS_777 = """
c.send_frame(P.OP_MKDIR, P.ROOT + P.fh(c.root) + P.name("kept") + P.u32(0o755) + P.u32(0o022) +
             P.u32(0), id=777)
f = c.recv_frame()
while f.flags & P.FF_PUSH:
    f = c.recv_frame()
assert f.id == 777 and f.op == P.OP_MKDIR, f
print(c.client_id, f.status, f.payload.hex())
"""


def test_kept_replies_share_one_budget(env):
    """The replies a session keeps for requests sent again after a
    reconnect (the duplicate request cache: its last 1,024 changes) count
    in one budget over all sessions, reply-cache; past it, the host
    keeping the most forgets its oldest. A key holder making changes by
    the thousand over several sessions stays within the budget, and
    another host that sends its MKDIR again after that still gets the
    first reply, not a second MKDIR's EEXIST. Before, the replies of
    every session, connected or lingering, counted against nothing."""
    budget = 128 << 10
    daemon = env.start_daemon(listen="0.0.0.0:0",
                              extra=["--lease", "300", "--limits", f"reply-cache={budget}"])
    ns = env.new_netns()
    key = P.load_key(env.key)
    cid, status, first = on_host(ns, env, daemon, MKDIR_AS_777).split()
    assert status == "0"

    # Four sessions of 1,024 UNLINKs each (failing ones: kept all the same).
    for s in range(4):
        with P.connect(daemon.host, daemon.port, key) as c:
            ids = [c.send_frame(P.OP_UNLINK, P.ROOT + P.fh(c.root) + P.name(f"none-{s}-{i}"))
                   for i in range(1024)]
            got = set()
            while len(got) < len(ids):
                f = c.recv_frame()
                if not f.flags & P.FF_PUSH:
                    assert f.status == errno.ENOENT, f
                    got.add(f.id)
    keys, clients = podfsd_status(daemon)
    assert int(keys["replies_kept_bytes"]) <= budget, keys
    assert int(keys["replies_forgotten"]) > 0, keys
    assert sum(int(c["replies_kept"]) for c in clients) > 100, clients
    # Said at the first and at each power of two, not once per request.
    said = daemon.log().count("forgotten early: more than reply-cache=131072")
    assert 1 <= said <= int(keys["replies_forgotten"]).bit_length(), said

    again = on_host(ns, env, daemon, MKDIR_AS_777, cid=int(cid)).split()
    assert again == [cid, "0", first]


def test_one_host_cannot_take_every_connection(env):
    """podfsd serves at most 1,024 connections. A key holder filling them
    all with sessions from one address kept every other host out, even a
    host coming back to its own session. Now, with all in use, the host
    with the most closes its oldest to admit a host that has fewer, and a
    newcomer from that busiest host is the one refused."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    daemon = env.start_daemon(listen="0.0.0.0:0", extra=["--lease", "300"])
    ns = env.new_netns()
    key = P.load_key(env.key)
    theirs = on_host(ns, env, daemon, "print(c.client_id)").strip()
    ours = []
    try:
        while len(ours) < 1024:
            ours.append(P.connect(daemon.host, daemon.port, key))
        assert podfsd_status(daemon)[0]["conns"] == "1024"
        with pytest.raises((P.Closed, P.Timeout)):
            P.connect(daemon.host, daemon.port, key, timeout=5)
        resumed = on_host(ns, env, daemon, "print(int(bool(c.auth_flags & P.AUTH_RESUMED)))",
                          cid=int(theirs))
        assert resumed.strip() == "1"
        assert ours[0].wait_closed(5)[0]  # the busiest host's oldest made room
        assert not ours[1].wait_closed(0.1)[0]
        log = daemon.log()
        assert re.search(r"refused \S+: all 1024 connections in use, and its host has 1024 of them", log)
        assert re.search(r"closed to admit \S+: all 1024 connections in use, and its host has "
                         r"the most \(1024\)", log)
    finally:
        for c in ours:
            c.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
