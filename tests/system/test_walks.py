"""test_walks.py: cold walks of a tree (find, ls -lR): what they cost in
requests, and that what makes them cheap never shows stale state.

A READDIRPLUS answered from a directory's listing queues the listings of
its subdirectories, which the client fetches ahead while the walk
descends (paced by the walk, bounded in count); with them the walk's
OPENDIR, READDIR and RELEASEDIR of each directory are answered locally.
A listing's items also say which of the xattrs `ls -l` asks for at every
entry (the SELinux label, the ACLs) are absent, so those GETXATTRs are
answered locally too. Listings themselves are in test_listings.py.

Requests are counted by the client (the req_* counters of its stats,
and the lists_* counts of the listings fetched ahead); a test that finds
a request not sent also shows some request counted in the same span.
"""

import errno
import os
import signal
import subprocess
import threading
import time

import pytest

import pfsproto as P
from harness import Pod
from helpers import (check_open_counted, forgotten, podfs_stats, requests_sent, requests_since,
                     run, scan_with, wait_for, write_file)

# A change on another host was pushed to this one before it returned; the
# kernel drops what it cached a moment later. Waits for that are bounded by
# this, which is no latency claim: a slow machine may take its time.
SHOWN = 10.0

# lsfetch_i.h: listings fetched ahead of the walk's own READDIRs at most;
# lsfetch.c: directories in one LISTDIRS.
CREDIT_MAX = 256
CREDIT_RESUME = 32  # fetching stops with fewer credits left (fs/lsfetch_i.h)
BATCH = 16
# fs/ops_i.h WALK_LOOKUP_NS: a directory counts as walked this long after
# the last sign of it.
WALK_WINDOW = 2.0


def make_tree(top, fanout=(4, 3), files=4):
    """A tree under top: fanout[0] directories, each with fanout[1]
    subdirectories, files small files in every directory, a symlink, a
    file with a user xattr, one with an ACL (ls -l shows a "+") and a
    directory with a default ACL. Returns the number of directories."""
    dirs = [top]
    os.makedirs(top)
    for i in range(fanout[0]):
        d = top / f"d{i}"
        os.mkdir(d)
        dirs.append(d)
        for j in range(fanout[1]):
            os.mkdir(d / f"s{j}")
            dirs.append(d / f"s{j}")
    for d in dirs:
        for k in range(files):
            (d / f"f{k}.py").write_bytes(b"x = %d\n" % k)
        os.symlink("f0.py", d / "link")
    os.setxattr(top / "d0" / "f1.py", "user.tag", b"v")
    run(["setfacl", "-m", "u:65534:r", top / "d1" / "s0" / "f2.py"])
    run(["setfacl", "-d", "-m", "u:65534:rx", top / "d2"])
    return len(dirs)


def ls_lR(path, check=True):
    """`ls -lR` of the tree at path, from inside it (paths relative)."""
    return run(["ls", "-lR", "--time-style=full-iso", "."], cwd=path, check=check).stdout


def find(path, check=True, timeout=60):
    """What find prints, sorted. The bound is the test's, not a measure:
    a walk of thousands of directories under the sanitizers, beside
    another test on two CPUs, took up to a minute."""
    return sorted(run(["find", "."], cwd=path, check=check, timeout=timeout).stdout.splitlines())


# --- what a cold walk costs --------------------------------------------------------

def test_cold_walk_costs_one_listing_per_directory(env, daemon, mount):
    """A cold find, then (on a fresh mount) a cold ls -lR: one LISTDIR
    per directory, most fetched ahead, no READDIR, OPENDIR or RELEASEDIR
    beyond the walk's first directory, no LOOKUP; ls -l's xattr questions
    answered without GETXATTR. Both print what the export holds, the
    ACLs' "+" included."""
    ndirs = make_tree(env.export / "top")
    m = mount()
    before = requests_sent(m)
    assert find(m / "top") == find(env.export / "top")
    sent = requests_since(m, before)
    st = podfs_stats(m)
    # Every directory listed once (the export's root too): alone
    # (LISTDIR), or fetched ahead, several in one LISTDIRS.
    assert ndirs <= st["lists"] <= ndirs + 1, st
    assert sent.get("LISTDIR", 0) + sent.get("LISTDIRS", 0) <= ndirs + 1, sent
    assert st["lists_ahead"] >= ndirs // 2, st
    # The walk's first directory, and another if the connection was busy
    # for longer than an open answered locally waits (transport_quiet).
    assert sent.get("OPENDIR", 0) <= 2 and sent.get("RELEASEDIR", 0) <= 2, sent
    assert not {"READDIR", "LOOKUP", "LOOKUP_DATA", "GETXATTR"} & set(sent), sent

    m2 = mount()
    before = requests_sent(m2)
    want = ls_lR(env.export / "top")
    assert "-rw-r--r--+" in want and "drwxr-xr-x+" in want  # the ACLs show
    assert ls_lR(m2 / "top") == want
    sent = requests_since(m2, before)
    st = podfs_stats(m2)
    assert ndirs <= st["lists"] <= ndirs + 1, st
    assert sent.get("LISTDIR", 0) + sent.get("LISTDIRS", 0) <= ndirs + 1, sent
    assert sent.get("OPENDIR", 0) <= 2 and sent.get("RELEASEDIR", 0) <= 2, sent
    # Only the ACLs that exist are read (value, then its size: at most 2
    # each), and the symlinks' targets.
    assert sent.get("GETXATTR", 0) <= 4, sent
    assert not {"READDIR", "LOOKUP", "LOOKUP_DATA"} & set(sent), sent
    check_open_counted(m2, m2 / "top" / "f0.py")


def test_cold_ls_l_of_a_big_listing_asks_no_xattrs(env, daemon, mount):
    """ls -l of 300 entries: none of its ~700 questions for the SELinux
    label and the ACLs reaches the daemon; a file that has a label and
    an ACL still shows them."""
    d = env.export / "big"
    d.mkdir()
    for i in range(300):
        (d / f"n{i:03d}").write_bytes(b"x")
    run(["setfacl", "-m", "u:65534:r", d / "n007"])
    os.setxattr(d / "n008", "security.selinux", b"x_u:x_r:x_t:s0")
    m = mount()
    before = requests_sent(m)
    out = run(["ls", "-l", m / "big"]).stdout
    sent = requests_since(m, before)
    assert out == run(["ls", "-l", d]).stdout
    assert sent.get("GETXATTR", 0) <= 2, sent
    assert sent.get("LISTDIR", 0) <= 2, sent  # the export's root, and big
    assert os.getxattr(m / "big" / "n008", "security.selinux") == b"x_u:x_r:x_t:s0"
    assert "user:65534:r--" in run(["getfacl", "-pn", m / "big" / "n007"]).stdout
    # The positive control: a name not in the listing's bits is asked.
    before = requests_sent(m)
    with pytest.raises(OSError):
        os.getxattr(m / "big" / "n009", "user.none")
    assert requests_since(m, before).get("GETXATTR") == 1


def test_cold_ls_l_of_a_directory_listed_in_pages_asks_no_xattrs(env, daemon, mount):
    """A directory too big for one listing, read whole by ls -l, is listed
    in pages (LISTDIR_PAGE) rather than read with READDIRPLUS: its items
    carry the xattr bits too, and the lookups come from it."""
    d = env.export / "huge"
    d.mkdir()
    n = 900
    for i in range(n):
        (d / (f"{i:04d}" + "y" * 96)).write_bytes(b"x")
    assert os.stat(d).st_size > 64 * 1024  # not one listing
    name7 = f"{7:04d}" + "y" * 96
    run(["setfacl", "-m", "u:65534:r", d / name7])
    m = mount()
    before = requests_sent(m)
    out = run(["ls", "-l", m / "huge"]).stdout
    sent = requests_since(m, before)
    assert out == run(["ls", "-l", d]).stdout
    assert "-rw-r--r--+" in out
    assert sent.get("LISTDIR_PAGE", 0) >= 1, sent
    # The 899 without an ACL ask nothing (their items said so). n007's
    # ACL is asked once or twice, more when the kernel forgot the ACL it
    # cached (it does so at each GETATTR it sends): 3 in one CI run.
    assert sent.get("GETXATTR", 0) <= 4, sent
    assert not {"READDIR", "LOOKUP", "LOOKUP_DATA"} & set(sent), sent


def test_walk_of_a_big_directory_fetches_its_subdirectories_ahead(env, daemon, mount):
    """A directory too big to be listed whole is read from the daemon and
    its entries looked up one by one; the subdirectories a walk looks up
    there get their listings fetched ahead all the same: no OPENDIR or
    RELEASEDIR for each."""
    big = env.export / "big"
    n = 4000
    make_subdirs(big, n, 96)
    assert os.stat(big).st_size > 64 * 1024  # not listed whole
    walk_fetching_ahead(mount(), "big", n)


def test_reading_a_big_directory_fetches_ahead_only_its_first_reply(env, daemon, mount):
    """A directory too big to be listed whole, read without a walk: only
    the subdirectories of its first READDIR reply, which a walk opens
    first, are queued for their listings to be fetched ahead; a walk's
    lookups there queue the rest in its order. (Each reply queued its
    own: the queue kept the newest, the end of the directory, fetched
    ahead long before a walk got there, given back unused after 10 s and
    fetched again; a slow walk of 4,000 listed 4,545.) Then a walk lists
    each directory once."""
    big = env.export / "big"
    n = 4000
    make_subdirs(big, n, 96)
    m = mount()
    assert len(os.listdir(m / "big")) == n
    time.sleep(1.0)  # the threads fetch what they may
    st = podfs_stats(m)
    assert st["lists_dropped"] == 0, st  # nothing queued past the queue's room
    assert st["lists_ahead"] < CREDIT_MAX, st  # not as far as the credits go
    gone = forgotten(m)
    assert len(find(m / "big")) == 1 + 2 * n
    # One listing per directory; one the kernel forgot meanwhile (a
    # drop_caches elsewhere on the machine) may be listed again.
    listed = podfs_stats(m)["lists"] - st["lists"]
    assert listed <= n - st["lists_ahead"] + (forgotten(m) - gone), (listed, st)


def test_a_reading_that_lost_its_cached_pages_goes_on_without_repeats(env, daemon, mount):
    """A directory listed whole is cached by the kernel; a second open
    reads it from that cache, and the cache loses its pages mid-way
    (memory reclaim; drop_caches here). The kernel then asks podfs to go
    on at the last cookie it gave out, in that second open: each name
    still comes exactly once. (When listings answered with cookies of
    the client's own, that cookie went to the daemon, whose cookies mean
    something else: 1,637 of 4,000 names came twice.)"""
    n = 4000
    make_subdirs(env.export / "big", n, 96)
    m = mount()
    names = sorted(os.listdir(m / "big"))
    assert len(names) == n

    def drop_caches():
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
    seen = scan_with(m / "big", n // 3, drop_caches)
    assert len(seen) == n, (len(seen), len(set(seen)))
    assert sorted(seen) == names


def make_subdirs(top, n, pad):
    """top with n subdirectories (names padded to pad+3 or 4 characters),
    one small file in each."""
    top.mkdir()
    for i in range(n):
        d = top / (f"{i:04d}" + "x" * pad)
        d.mkdir()
        (d / "f").write_bytes(b"x")


def walk_fetching_ahead(m, rel, n):
    """A cold find of m/rel (n subdirectories made by make_subdirs) has
    their listings fetched ahead: no OPENDIR and RELEASEDIR for each, and
    one listing request each at most (the walk opens each right after its
    lookup), not OPENDIR, LISTDIR and RELEASEDIR. Returns what was sent."""
    before = requests_sent(m)
    assert len(find(m / rel)) == 1 + 2 * n
    sent = requests_since(m, before)
    st = podfs_stats(m)
    assert st["lists_ahead"] >= n // 2, (st, sent)
    assert sent.get("OPENDIR", 0) <= n // 10 and sent.get("RELEASEDIR", 0) <= n // 10, sent
    assert sent.get("LISTDIR", 0) + sent.get("LISTDIRS", 0) <= n + 2, sent
    return sent


def test_walk_fetches_ahead_past_the_first_readdirplus(env, daemon, mount):
    """A directory listed whole whose subdirectories fill more than one
    READDIR reply: the kernel asks with plus only for the first (under
    READDIRPLUS_AUTO), and the rest come as plain READDIRs, answered
    from the listing too; the subdirectories there get their listings
    fetched ahead all the same: no OPENDIR, LISTDIR and RELEASEDIR for
    each."""
    top = env.export / "top"
    n = 400
    make_subdirs(top, n, 60)
    assert os.stat(top).st_size <= 64 * 1024  # listed whole
    # More than one reply: some READDIR answered locally was plain (the
    # kernel's reply buffer holds at most 32 KiB of entries, about 150).
    sent = walk_fetching_ahead(mount(), "top", n)
    assert not {"READDIR", "LOOKUP", "LOOKUP_DATA"} & set(sent), sent


# --- LISTDIRS on the wire -----------------------------------------------------------

@pytest.mark.plaintext
def test_listdirs_lists_depth_first(env, daemon):
    """LISTDIRS answers the requested directories in order, each followed
    by its subdirectories, depth first, within max_dirs; a directory the
    caller may not read, a file and a forged handle get their LISTDIR
    errors; each listing is LISTDIR's; the xattr bits come only with
    PFS_CAP_LIST_XATTR; bad requests are refused."""
    e = env.export / "top"
    for d in ("a/a1/a11", "a/a2", "b", "priv"):
        os.makedirs(e / d)
    (e / "a" / "x").write_bytes(b"x")
    (e / "file").write_bytes(b"f")
    os.chmod(e / "priv", 0o700)
    user = P.creds(1500, 1500)
    key = P.load_key(env.key)
    with P.connect(daemon.host, daemon.port, key, caps=P.CAP_LIST_XATTR) as c:
        top = c.lookup(c.root, "top")[0]
        h = {n: c.lookup(top, n)[0] for n in ("a", "b", "priv", "file")}
        forged = bytearray(h["b"])
        forged[-1] ^= 1
        out = c.listdirs([h["a"], h["priv"], h["file"], bytes(forged), h["b"]], max_dirs=10,
                         cr=user)
        inos = {os.stat(e / p).st_ino: p for p in ("a", "a/a1", "a/a1/a11", "a/a2", "b",
                                                    "priv", "file")}
        got = [(inos.get(a["ino"], "?") if st != errno.ESTALE else "forged", st)
               for _, a, st, _, _ in out]
        # Subdirectories in the order the export's directory lists
        # them (readdir's, which differs from one file system to another).

        def depth_first(rel):
            subs = [f"{rel}/{n}" for n in os.listdir(e / rel) if (e / rel / n).is_dir()]
            return [rel] + [d for sub in subs for d in depth_first(sub)]
        assert got == [(d, 0) for d in depth_first("a")] + [
            ("priv", errno.EACCES), ("file", errno.ENOTDIR), ("forged", errno.ESTALE),
            ("b", 0)], got
        flags, items = c.listdir_items(h["a"], max_inline=0, cr=user)

        def same(it):  # reading a directory moves its atime
            return {n: (fh, {k: v for k, v in a.items() if not k.startswith("atime")}, f, d)
                    for n, (fh, a, f, d) in it.items()}
        assert out[0][3] == flags and same(out[0][4]) == same(items)
        assert all(f & P.LS_COMPLETE for _, _, st, f, _ in out if st == 0)
        assert items[b"x"][2] & P.LD_NO_XATTRS == P.LD_NO_XATTRS, items[b"x"]
        # max_dirs: the first requested, then as far as it goes.
        out = c.listdirs([h["a"], h["b"]], max_dirs=2, cr=user)
        assert [inos[a["ino"]] for _, a, _, _, _ in out] == depth_first("a")[:2]
        with pytest.raises(P.PfsError) as ei:
            c.listdirs([h["a"]] * 65)
        assert ei.value.errno == errno.E2BIG
        for bad in ([], ):
            with pytest.raises(P.PfsError) as ei:
                c.listdirs(bad, max_dirs=1)
            assert ei.value.errno == errno.EINVAL
        with pytest.raises(P.PfsError) as ei:
            c.call(P.OP_LISTDIRS, P.ROOT + P.u32(1 << 20) + P.u32(4) + P.blob(P.fh(h["a"])[:-2]))
        assert ei.value.errno == errno.EINVAL
    # Without the capability: no xattr bits.
    with P.connect(daemon.host, daemon.port, key) as c:
        out = c.listdirs([h["a"]], cr=user)
        assert all(f & P.LD_NO_XATTRS == 0 for _, _, f, _ in out[0][4].values())


# --- bounds ---------------------------------------------------------------------

@pytest.mark.parametrize("n", [2000, 3500], ids=["listed_whole", "in_pages"])
def test_fetching_ahead_is_bounded(env, daemon, mount, n):
    """One ls -l of a directory with n subdirectories (each with its own)
    is no walk: the client fetches at most CREDIT_MAX listings ahead of
    it (plus those in flight), and stops with fewer than CREDIT_RESUME
    left. Listed whole, it queues every one, keeps
    what its queue holds and drops the rest; too big to be listed whole
    (in pages), only its first reply's (the walk's lookups there queue
    the rest). A walk of the whole tree then costs one listing per
    directory, fetched once. (The credit once went below zero when two
    threads spent the last one: every queued listing was fetched.)"""
    top = env.export / "wide"
    top.mkdir()
    for i in range(n):
        os.makedirs(top / f"d{i:04d}" / "sub")
    whole = n == 2000
    assert (os.stat(top).st_size <= 64 * 1024) == whole
    m = mount()
    before = requests_sent(m)
    assert len(run(["ls", "-l", m / "wide"]).stdout.splitlines()) == n + 1
    # Let the threads drain what they may.
    if whole:
        wait_for(lambda: podfs_stats(m)["lists_ahead"] > CREDIT_MAX - CREDIT_RESUME, 10,
                 what="listings fetched ahead")
    time.sleep(1.0)
    st = podfs_stats(m)
    sent = requests_since(m, before)
    assert (CREDIT_MAX - CREDIT_RESUME + 1 if whole else 1) <= st["lists_ahead"] \
        <= CREDIT_MAX + BATCH, st
    assert sent.get("LISTDIR", 0) + sent.get("LISTDIRS", 0) <= 2 + CREDIT_MAX, sent
    if whole:
        assert st["lists_dropped"] > 0, st  # all queued: the queue kept its newest
    else:
        assert st["lists_dropped"] == 0, st
    # The walk: one listing per directory, whatever was fetched ahead.
    # A drop_caches elsewhere on the machine (another test's) makes the
    # kernel forget directories, whose listings go with them: the count
    # of inodes forgotten tells, and allows a second fetch of those.
    gone = forgotten(m)
    before = requests_sent(m)
    assert len(find(m / "wide", timeout=200)) == 1 + 2 * n
    sent = requests_since(m, before)
    listed = podfs_stats(m)["lists"] - st["lists"]
    assert listed <= (2 if forgotten(m) > gone else 1.05) * 2 * n, (listed, sent)


def test_a_reading_paused_longer_than_the_walk_window_queues_no_more(env, daemon, mount):
    """`ls -l | less`: the reading of a directory too big to be listed
    whole stops for longer than the walk window (WALK_WINDOW) between two
    of its READDIRs. Each READDIR of the reading says the walk goes on,
    so its later chunks queue no listings ahead, as when it never stopped
    (they once did, once the window had passed since the last page
    fetched: thousands queued and dropped)."""
    top = env.export / "wide"
    top.mkdir()
    n = 3500
    for i in range(n):
        os.makedirs(top / f"d{i:04d}" / "sub")
    m = mount()
    p = subprocess.Popen(["ls", "-l", m / "wide"], stdout=subprocess.DEVNULL,
                         stdin=subprocess.DEVNULL)
    try:
        for _ in range(3):
            time.sleep(0.15)
            p.send_signal(signal.SIGSTOP)
            time.sleep(WALK_WINDOW + 0.5)
            p.send_signal(signal.SIGCONT)
        assert p.wait(120) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
    time.sleep(1.0)  # what the threads fetch ahead
    st = podfs_stats(m)
    assert st["lists_dropped"] == 0, st
    assert st["lists_ahead"] <= CREDIT_MAX + BATCH, st


# --- never stale ------------------------------------------------------------------

def _changes(a, i):
    """Changes host a makes in subdirectory d{i % 4}/s{i % 3} of top."""
    d = a / "top" / f"d{i % 4}" / f"s{i % 3}"
    write_file(d / f"new{i}", b"n")
    os.unlink(d / f"new{i}") if i % 5 == 4 else None
    if os.path.exists(d / "f3.py"):
        os.rename(d / "f3.py", d / "g3.py")
    elif os.path.exists(d / "g3.py"):
        os.rename(d / "g3.py", d / "f3.py")
    os.setxattr(d / "f0.py", "user.n", b"%d" % i)
    if i % 2:
        os.mkdir(d / f"sub{i}")


@pytest.mark.netns
def test_listings_fetched_ahead_follow_other_hosts(env):
    """B fetches the subdirectories' listings ahead (an ls -l of top and of
    its directories), then A creates, removes, renames and sets xattrs
    and ACLs in them: B's walk shows it all. Then A changes them while B
    walks again and again: once A stops, B's walk shows what the export
    holds."""
    pod = Pod(env)
    a, b = pod.a, pod.b
    make_tree(pod.export / "top")
    run(["ls", "-l", b / "top"])
    for i in range(4):
        run(["ls", "-l", b / "top" / f"d{i}"])
    wait_for(lambda: podfs_stats(b)["lists_ahead"] >= 12, SHOWN,
             what="B to fetch the listings ahead")
    s = a / "top" / "d3" / "s1"
    write_file(s / "created", b"c")
    os.unlink(s / "f1.py")
    os.rename(s / "f2.py", s / "renamed")
    os.setxattr(s / "f0.py", "user.k", b"v")
    run(["setfacl", "-m", "u:65534:rw", s / "created"])
    os.mkdir(s / "newdir")
    want = ls_lR(pod.export / "top")
    wait_for(lambda: ls_lR(b / "top") == want, SHOWN, what="B's walk to show A's changes")
    assert os.getxattr(b / "top" / "d3" / "s1" / "f0.py", "user.k") == b"v"
    assert "user:65534:rw-" in run(["getfacl", "-pn", b / "top/d3/s1/created"]).stdout

    stop = threading.Event()
    errors = []

    def churn():
        try:
            i = 0
            while not stop.is_set():
                _changes(a, i)
                i += 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    t = threading.Thread(target=churn)
    t.start()
    try:
        # A name may go between a walk's readdir and its lstat (as on a
        # local disk): those walks may complain.
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            ls_lR(b / "top", check=False)
            find(b / "top", check=False)
    finally:
        stop.set()
        t.join(60)
    assert not errors, errors
    want = ls_lR(pod.export / "top")
    wait_for(lambda: ls_lR(b / "top") == want, SHOWN, what="B's walk to settle")
    for i in range(4):
        for j in range(3):
            f = b / "top" / f"d{i}" / f"s{j}" / "f0.py"
            assert os.getxattr(f, "user.n") == os.getxattr(pod.export / f.relative_to(b), "user.n")


@pytest.mark.netns
def test_xattr_absence_from_a_listing_follows_other_hosts(env):
    """B's ls -l learned from a listing that f has no ACL and no label; A
    sets them (and removes them again): B's getxattr, getfacl and ls -l
    show each change as soon as A's call returned."""
    pod = Pod(env)
    a, b = pod.a, pod.b
    os.mkdir(pod.export / "d")
    (pod.export / "d" / "f").write_bytes(b"x")
    assert "+" not in run(["ls", "-l", b / "d"]).stdout.split("\n")[1].split()[0]
    before = requests_sent(b)
    with pytest.raises(OSError):
        os.getxattr(b / "d" / "f", "security.selinux")
    assert "GETXATTR" not in requests_since(b, before)   # known absent
    os.setxattr(a / "d" / "f", "security.selinux", b"l_u:l_r:l_t:s0")
    assert os.getxattr(b / "d" / "f", "security.selinux") == b"l_u:l_r:l_t:s0"
    run(["setfacl", "-m", "u:65534:r", a / "d" / "f"])
    assert "user:65534:r--" in run(["getfacl", "-pn", b / "d" / "f"]).stdout
    wait_for(lambda: run(["ls", "-l", b / "d"]).stdout.split("\n")[1].split()[0].endswith("+"),
             SHOWN, what="B's ls -l to show the ACL")
    run(["setfacl", "-b", a / "d" / "f"])
    assert "user:65534" not in run(["getfacl", "-pn", b / "d" / "f"]).stdout
    os.removexattr(a / "d" / "f", "security.selinux")
    with pytest.raises(OSError):
        os.getxattr(b / "d" / "f", "security.selinux")
