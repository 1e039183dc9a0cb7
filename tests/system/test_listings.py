"""test_listings.py: directory listings (LISTDIR): one request brings a
small directory's names, attributes and small files' contents; the client
answers lookups (hits and misses), readdir and cold opens from it, keeps it
through its own creates, never serves from it what changed since (on
another host or its own), and does not fetch it again at every lookup of
a directory that keeps changing.

Requests are counted by the client (the req_* counters of its stats);
a test that finds a request not sent also shows some request counted in
the same span. The raw listing is read with pfsproto.
"""

import errno
import mmap
import os
import time

import pytest

import pfsproto as P
from harness import Pod
from helpers import (check_open_counted, file_errno, kernel_settled, podfs_stats, read_file,
                     requests_sent, requests_since, run, scan_with, stat_fields, wait_for,
                     write_file)
from syscalls import getdents

# A change on another host was pushed to this one before it returned; the
# kernel drops what it cached a moment later. Waits for that are bounded by
# this, which is no latency claim: a slow machine may take its time.
SHOWN = 10.0


# --- lookups and cold opens ------------------------------------------------------

def test_cold_lookups_answered_from_one_listing(env, daemon, mount):
    """Cold lookups in a small directory: one LISTDIR brings every name,
    attribute and small file; the lookups (hits and misses) and reads
    that follow cost no further request."""
    for i in range(30):
        write_file(env.export / f"m{i}.py", b"v = %d\n" % i)
    m = mount()
    before = requests_sent(m)
    for i in range(30):
        for suffix in (".cpython-311-x86_64-linux-gnu.so", ".abi3.so", ".so"):
            assert not os.path.exists(m / f"m{i}{suffix}")
        assert read_file(m / f"m{i}.py") == b"v = %d\n" % i
    sent = requests_since(m, before)
    assert sent.get("LISTDIR") == 1, sent
    assert set(sent) <= {"LISTDIR", "GETATTR", "FORGET"}, sent


@pytest.mark.netns
def test_listing_absences_stay_correct_across_hosts(env):
    """B answers misses from its listing of d; names created, renamed or
    removed on A (or directly in the export) show on B within the bound."""
    pod = Pod(env)
    a, b = pod.a, pod.b
    os.mkdir(a / "d")
    for i in range(5):
        write_file(a / "d" / f"f{i}", b"x")
    time.sleep(0.2)
    assert not os.path.exists(b / "d" / "new")      # B lists d, then misses
    assert os.path.exists(b / "d" / "f1")
    for round_ in range(10):
        name = f"new{round_}"
        assert not os.path.exists(b / "d" / name)     # answered from the listing
        write_file(a / "d" / name, b"y")
        # B received the push before A's create returned; its kernel
        # drops the negative entry a moment later.
        wait_for(lambda: os.path.exists(b / "d" / name), SHOWN, what=name)
        assert read_file(b / "d" / name) == b"y"
    os.rename(a / "d" / "f2", a / "d" / "g2")
    wait_for(lambda: not os.path.exists(b / "d" / "f2") and os.path.exists(b / "d" / "g2"),
             SHOWN, what="rename")
    os.unlink(a / "d" / "f3")
    wait_for(lambda: not os.path.exists(b / "d" / "f3"), SHOWN, what="unlink")
    # A change beside podfs (fanotify) shows too.
    write_file(pod.export / "d" / "direct", b"z")
    wait_for(lambda: os.path.exists(b / "d" / "direct"), SHOWN, what="direct create")
    # B's own create in a listed directory is never pushed back to B.
    os.mkdir(b / "e")
    write_file(a / "e" / "x", b"1")
    assert not os.path.exists(b / "e" / "y")        # lists e
    write_file(b / "e" / "y", b"2")
    os.unlink(b / "e" / "y")
    write_file(b / "e" / "y2", b"3")
    assert sorted(os.listdir(b / "e")) == ["x", "y2"]
    assert read_file(b / "e" / "y2") == b"3" and not os.path.exists(b / "e" / "y")


def test_cold_open_of_listed_big_files(env, daemon, mount):
    """Files over 64 KiB travel without their content, but the listing
    says the caller may read them: a cold open + read of one costs READs
    only (no OPEN), a listed small file that came without content (the
    listing's data budget ran out) costs nothing until read, and a file
    the caller may not read is still refused at open."""
    big = {f"lib{i}.so": os.urandom(200 * 1024 + i) for i in range(4)}
    small = {f"m{i:02d}.pyc": os.urandom(60 * 1024) for i in range(20)}  # > a listing's budget
    for name, data in {**big, **small}.items():
        write_file(env.export / name, data)
    write_file(env.export / "secret.so", b"s" * (100 * 1024))
    os.chmod(env.export / "secret.so", 0o600)
    os.chmod(env.export, 0o755)
    m = mount()
    before = requests_sent(m)
    for name, data in big.items():
        assert read_file(m / name) == data
    for name in small:
        os.stat(m / name)
    sent = requests_since(m, before)
    assert "OPEN" not in sent and "LOOKUP_DATA" not in sent and "LOOKUP" not in sent, sent
    assert sent.get("LISTDIR") == 1 and "READ" in sent, sent
    check_open_counted(m, m / "lib0.so")
    for name, data in small.items():
        assert read_file(m / name) == data
    assert file_errno(f"open({str(m / 'secret.so')!r}, 'rb').read()") == "EACCES"
    assert file_errno(f"open({str(m / 'lib0.so')!r}, 'rb').read()") == "OK"


def test_listing_a_directory_reads_no_contents(env, daemon, mount):
    """A cold walk that lists directories and stats their files (find,
    ls -l, os.walk) gets names and attributes, not the files' contents:
    what the daemon sends stays far below the files' bytes, and no READ
    is sent (nor READDIR, but for the mount's root)."""
    total = 0
    for d in range(4):
        os.makedirs(env.export / f"t{d}")
        for i in range(100):
            data = os.urandom(4000)
            (env.export / f"t{d}" / f"f{i}").write_bytes(data)
            total += len(data)
    m = mount()

    s0 = podfs_stats(m)
    seen = 0
    for root, dirs, files in os.walk(m.path):
        for name in files:
            seen += os.lstat(os.path.join(root, name)).st_size
    s1 = podfs_stats(m)
    assert seen == total
    assert s1["wire_in"] - s0["wire_in"] < total // 4, (s1["wire_in"] - s0["wire_in"], total)
    assert s1.get("req_READ", 0) == s0.get("req_READ", 0)
    # The walk was counted: listings alone (LISTDIR) or fetched ahead,
    # several in one LISTDIRS (test_walks.py).
    assert s1["lists"] - s0["lists"] >= 4
    # The mount's root is listed by the daemon: podfs does not know its "..".
    assert s1.get("req_READDIR", 0) - s0.get("req_READDIR", 0) <= 1


def test_cold_listing_brings_exact_contents(env, daemon, mount):
    """A listing of files the daemon's page cache does not hold (read
    ahead side by side while the listing runs) carries their exact
    contents, skips what is not a regular file (a FIFO is never opened),
    and the files read back byte-exact."""
    import random
    rnd = random.Random(7)
    d = env.export / "cold"
    os.makedirs(d / "sub")
    os.mkfifo(d / "fifo")
    os.symlink("f000", d / "link")
    want = {}
    for i in range(120):
        data = rnd.randbytes(rnd.choice([0, 1, 100, 4096, 20000, 65536, 70000]))
        want[f"f{i:03d}"] = data
        with open(d / f"f{i:03d}", "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    m = mount()
    assert not os.path.exists(m / "cold" / "missing")  # the listing
    for name, data in want.items():
        assert read_file(m / "cold" / name) == data, name
    assert os.readlink(m / "cold" / "link") == "f000"
    assert sorted(os.listdir(m / "cold")) == sorted(list(want) + ["sub", "fifo", "link"])


def _resident_pages(path):
    """Pages of path in the page cache: fincore opens and maps the file,
    and never reads it."""
    r = run(["fincore", "--noheadings", "--output", "PAGES", path], timeout=30)
    return int(r.stdout.strip())


@pytest.mark.netns
def test_listed_contents_reach_the_kernel_with_the_open(env):
    """A small file whose content came with B's listing is in B's page
    cache as soon as it is opened: the reads that follow cost no READ.
    Files that A changed after B's listing read back A's new bytes on B
    (never the listing's), whatever way they come."""
    pod = Pod(env)
    a, b = pod.a, pod.b
    os.mkdir(a / "d")
    want = {}
    for i in range(6):
        want[f"f{i}"] = os.urandom(1000 + 3001 * i)
        write_file(a / "d" / f"f{i}", want[f"f{i}"])
    assert not os.path.exists(b / "d" / "missing")  # B lists d, contents inline
    # A's writes return after B received their pushes (PUSH_ACK).
    for name in ("f0", "f3"):
        want[name] = os.urandom(len(want[name]))
        write_file(a / "d" / name, want[name])
    s0 = podfs_stats(b)
    for name, data in want.items():
        if name not in ("f0", "f3"):
            assert _resident_pages(b / "d" / name) == (len(data) + 4095) // 4096, name
    for name, data in want.items():
        assert read_file(b / "d" / name) == data, name
        with open(b / "d" / name, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mm:
            assert mm[:] == data, name
    s1 = podfs_stats(b)
    assert s1.get("req_READ", 0) - s0.get("req_READ", 0) <= 2, (s0, s1)


# --- readdir ---------------------------------------------------------------------

def test_readdir_answered_from_the_listing(env, daemon, mount):
    """Listing a small directory costs one LISTDIR and no READDIR or
    RELEASEDIR, and gives what the export holds: every name (1,500 of
    them: the kernel reads on at the cookies podfs gave), file types, and
    inode numbers of the entries, "." and "..", also after this client
    moved the directory elsewhere."""
    d = env.export / "pkg" / "sub"
    d.mkdir(parents=True)
    for i in range(1500):
        (d / f"n{i:04d}.py").write_bytes(b"x")
    os.mkdir(d / "dir")
    os.symlink("n0001.py", d / "link")
    os.mkfifo(d / "fifo")
    assert os.stat(d).st_size <= 64 * 1024  # small enough to be listed whole
    m = mount()
    before = requests_sent(m)
    got = getdents(m / "pkg" / "sub")
    assert got == getdents(d) and len(got) == 1505
    sent = requests_since(m, before)
    assert "READDIR" not in sent, sent
    assert sent.get("LISTDIR", 0) >= 1, sent
    # Moved by this client: ".." is the new parent.
    os.mkdir(m / "other")
    os.rename(m / "pkg" / "sub" / "dir", m / "other" / "moved")
    assert getdents(m / "other" / "moved")[".."][0] == os.stat(env.export / "other").st_ino


@pytest.mark.netns
def test_a_reading_from_the_kernels_cache_goes_on_after_another_hosts_create(env):
    """B lists a directory whole from its listing, then reads it again in
    another open, from the kernel's readdir cache; A creates a name there
    in the middle of that reading. The push drops B's cache, so the kernel
    asks podfs to go on at the last cookie it gave out, in an open that
    read nothing itself: every name from before still comes exactly once,
    and the reading does not fail. (The cookies were the client's own, and
    the listing they counted in had gone stale with the push: the reading
    failed with EIO.)"""
    pod = Pod(env)
    a, b = pod.a, pod.b
    n = 2000
    os.mkdir(pod.export / "d")
    for i in range(n):
        (pod.export / "d" / f"n{i:04d}").write_bytes(b"")
    assert os.stat(pod.export / "d").st_size <= 64 * 1024  # listed whole
    names = sorted(os.listdir(b / "d"))  # fills B's kernel cache from the listing
    assert len(names) == n

    def create():
        write_file(a / "d" / "new", b"")
        time.sleep(0.3)  # B's push thread drops the cache
    # Several getdents calls (about 1,300 names fit one): the create
    # falls between two of them.
    seen = scan_with(b / "d", n // 4, create)
    assert len(seen) == len(set(seen)), len(seen) - len(set(seen))
    assert sorted(set(seen) - {"new"}) == names


@pytest.mark.netns
def test_readdir_from_listing_follows_other_hosts(env):
    """B lists d from its listing; names A creates, removes or renames in d
    show in B's next listing within the bound; a directory A moves to
    another parent shows that parent as ".." on B."""
    pod = Pod(env)
    a, b = pod.a, pod.b
    os.makedirs(a / "d" / "sub")
    os.mkdir(a / "p")
    for i in range(5):
        write_file(a / "d" / f"f{i}", b"x")
    time.sleep(0.2)
    assert sorted(os.listdir(b / "d")) == ["f0", "f1", "f2", "f3", "f4", "sub"]
    assert getdents(b / "d" / "sub")[".."][0] == os.stat(pod.export / "d").st_ino
    write_file(a / "d" / "new", b"y")
    wait_for(lambda: "new" in os.listdir(b / "d"), SHOWN, what="create")
    os.unlink(a / "d" / "f1")
    wait_for(lambda: "f1" not in os.listdir(b / "d"), SHOWN, what="unlink")
    os.rename(a / "d" / "f2", a / "d" / "g2")
    wait_for(lambda: sorted(os.listdir(b / "d")) == ["f0", "f3", "f4", "g2", "new", "sub"],
             SHOWN, what="rename")
    # B keeps moved directories open (its cwd, say) while A moves them:
    # one B listed before, one it only looked up.
    os.mkdir(a / "d" / "sub2")
    wait_for(lambda: os.path.isdir(b / "d" / "sub2"), SHOWN, what="sub2")
    fds = [os.open(b / "d" / n, os.O_RDONLY | os.O_DIRECTORY) for n in ("sub", "sub2")]
    try:
        for n in ("sub", "sub2"):
            os.rename(a / "d" / n, a / "p" / n)
        want = os.stat(pod.export / "p").st_ino
        for fd in fds:
            # Listed through the directory itself (its fd), not by path.
            wait_for(lambda: getdents(f"/proc/{os.getpid()}/fd/{fd}")[".."][0] == want,
                     SHOWN, what="moved ..")
    finally:
        for fd in fds:
            os.close(fd)
    assert getdents(b / "p" / "sub")[".."][0] == want


# --- what a listing carries ------------------------------------------------------

@pytest.mark.plaintext
def test_listing_skips_python_optimized_bytecode(env, daemon, mount):
    """A listing spends its content budget on files an import reads: in a
    __pycache__, the plain .pyc files come with their content, the -O
    variants (.opt-1.pyc, .opt-2.pyc) without it but readable; all of
    them read back exact through a mount."""
    d = env.export / "pkg" / "__pycache__"
    d.mkdir(parents=True)
    files = {}
    for i in range(12):
        for tag in ("", ".opt-1", ".opt-2"):
            files[f"m{i}.cpython-311{tag}.pyc"] = os.urandom(8 * 1024 + i)
    for name, data in files.items():
        write_file(d / name, data)
    with P.connect(daemon.host, daemon.port, P.load_key(env.key)) as c:
        h = c.lookup(c.lookup(c.root, "pkg")[0], "__pycache__")[0]
        flags, items = c.listdir_items(h)
    assert flags & P.LS_COMPLETE
    assert sorted(n.decode() for n in items) == sorted(files)
    for name, (_, attr, iflags, data) in items.items():
        name = name.decode()
        assert iflags & P.LD_READABLE, name
        if ".opt-" in name:
            assert not iflags & P.LD_DATA and data == b"", name
        else:
            assert iflags & P.LD_DATA and data == files[name], name
    m = mount()
    for name, data in files.items():
        assert read_file(m / "pkg" / "__pycache__" / name) == data


@pytest.mark.plaintext
def test_listing_stays_complete_when_contents_would_fill_it(env, mount):
    """Names and small files whose contents would fill the reply, on a
    tmpfs (whose directory size says little of its names' length, so the
    daemon's estimate of the room the names need falls short): it gives
    up contents, never names. The listing is complete (a miss there is
    answered without asking), and every content it carries is exact."""
    fs = env.root / "tmpfs"
    fs.mkdir()
    run(["mount", "-t", "tmpfs", "-o", "size=64m,mode=0755", "podfs-test", fs])
    try:
        d = env.start_daemon(export=fs)
        (fs / "big").mkdir()
        files = {}
        for i in range(1500):
            files[f"{i:05d}-" + "n" * 100] = os.urandom(700)
        for name, data in files.items():
            write_file(fs / "big" / name, data)
        with P.connect(d.host, d.port, P.load_key(env.key)) as c:
            flags, items = c.listdir_items(c.lookup(c.root, "big")[0])
        assert flags & P.LS_COMPLETE, "listing not complete"
        assert len(items) == len(files)
        with_data = 0
        for name, (_, attr, iflags, data) in items.items():
            if iflags & P.LD_DATA:
                assert data == files[name.decode()]
                with_data += 1
        assert 0 < with_data < len(files), with_data
        m = mount(d)
        os.stat(m / "big" / ("00000-" + "n" * 100))  # the listing is fetched here
        before = podfs_stats(m)
        for i in (7, 1499):
            name = f"{i:05d}-" + "n" * 100
            assert read_file(m / "big" / name) == files[name]
        assert not os.path.exists(m / "big" / "absent")
        after = podfs_stats(m)
        for op in ("req_LOOKUP_DATA", "req_LOOKUP", "req_LISTDIR"):
            assert after.get(op, 0) == before.get(op, 0), op
        check_open_counted(m, m / "big" / ("00007-" + "n" * 100))
    finally:
        run(["umount", "-l", fs], check=False)


# --- large directories: in pages ---------------------------------------------------

def _fill(d, n, size=4096):
    d.mkdir()
    for i in range(n):
        write_file(d / f"f{i}", b"%d" % i + b"x" * (size - len(b"%d" % i)))


def test_stat_storm_in_a_large_directory_costs_requests_per_page(env, daemon, mount):
    """A cold `stat` of every file of a directory too large to be listed
    at its first lookup (5,000 names, 127 KB on ext4): after a few
    lookups name by name, the client lists it in pages (LISTDIR_PAGE, no
    contents) and answers the rest, misses included, without a request:
    requests per page, not per file, and no file read for a stat."""
    n = 5000
    _fill(env.export / "big", n)
    assert os.stat(env.export / "big").st_size > 64 * 1024
    m = mount()
    before = requests_sent(m)
    wire0 = podfs_stats(m)["wire_in"]
    for i in range(n):
        st = os.stat(m / "big" / f"f{i}")
        assert st.st_size == 4096
        assert not os.path.exists(m / "big" / f"g{i}")
    sent = requests_since(m, before)
    assert 2 <= sent.get("LISTDIR_PAGE", 0) <= 3, sent
    per_name = sent.get("LOOKUP_DATA", 0) + sent.get("LOOKUP", 0) + sent.get("GETATTR", 0)
    assert per_name <= 40, sent
    # The names' entries, not the files' 20 MB.
    assert podfs_stats(m)["wire_in"] - wire0 < 4 << 20
    for i in (0, 777, n - 1):
        exp = os.stat(env.export / "big" / f"f{i}")
        st = os.stat(m / "big" / f"f{i}")
        assert (st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns) == \
            (exp.st_ino, exp.st_mode, exp.st_size, exp.st_mtime_ns, exp.st_ctime_ns)
    assert read_file(m / "big" / "f4321") == b"4321" + b"x" * 4092
    # A lone lookup in another large directory stays a lookup.
    _fill(env.export / "big2", 4000, 1)
    before = requests_sent(m)
    os.stat(m / "big2" / "f5")
    sent = requests_since(m, before)
    assert "LISTDIR_PAGE" not in sent and sent.get("LOOKUP_DATA", 0) >= 1, sent


def _listed_in_pages(m, op, make):
    """Runs make(i) for i in 0..299 in m/big (3,000 names, too large to
    be listed at its first lookup), each one request op: a few lookups
    name by name, then the directory is listed in pages (LISTDIR_PAGE)
    and the rest is answered locally."""
    os.stat(m / "big")
    before = requests_sent(m)
    for i in range(300):
        make(i)
    sent = requests_since(m, before)
    assert sent.get(op) == 300, sent
    assert sent.get("LISTDIR_PAGE", 0) >= 1, sent
    assert sent.get("LOOKUP_DATA", 0) + sent.get("LOOKUP", 0) <= 60, sent


def test_own_creates_in_a_large_directory_get_it_listed(env):
    """A client making names one after another in a directory too large
    to be listed at its first lookup (3,000 names, about 80 KB on ext4):
    the kernel's lookup before each mkdir is a miss, and after a few of
    them name by name the client lists the directory in pages and answers
    the rest itself; its own creates keep that listing (they do not hold
    a listing off, as another host's changes do). The names are all
    there, on the mount and in the export, and a name made beside podfs
    meanwhile shows."""
    # Filled before podfsd starts: it watches its export's filesystem,
    # and pushes about big from the 3,000 creates made beside it could
    # still be coming when the mount looks big up (pushed changes do
    # hold a listing off).
    _fill(env.export / "big", 3000, 10)
    assert os.stat(env.export / "big").st_size > 64 * 1024
    m = env.mount(env.start_daemon())
    _listed_in_pages(m, "MKDIR", lambda i: os.mkdir(m / "big" / f"d{i}"))
    want = sorted([f"f{i}" for i in range(3000)] + [f"d{i}" for i in range(300)])
    assert sorted(os.listdir(env.export / "big")) == want
    assert sorted(os.listdir(m / "big")) == want
    for i in (0, 150, 299):
        assert os.path.isdir(m / "big" / f"d{i}")
    (env.export / "big" / "beside").write_bytes(b"b")
    wait_for(lambda: os.path.exists(m / "big" / "beside"), SHOWN, what="a name made beside podfs")
    assert read_file(m / "big" / "beside") == b"b"


def test_own_files_written_in_a_large_directory_get_it_listed(env):
    """As above, with files made and written (create, write, close), the
    loop that untar over an existing tree, `git checkout` or a job saving
    shards next to the last run's run: the writes, own changes of objects
    listed there, do not hold a listing off (what a write changes is
    marked in the listing, and a file with writes still pending is never
    answered from one), so after a few misses the directory is listed in
    pages. Every size on the mount, read with a fresh `ls -l` of the
    directory and a stat of each name, is the export's."""
    _fill(env.export / "big", 3000, 10)
    m = env.mount(env.start_daemon())
    _listed_in_pages(m, "CREATE", lambda i: write_file(m / "big" / f"n{i}", b"y" * (i + 1)))
    want = sorted([f"f{i}" for i in range(3000)] + [f"n{i}" for i in range(300)])
    assert sorted(os.listdir(m / "big")) == want
    with os.scandir(m / "big") as it:
        sizes = {e.name: e.stat(follow_symlinks=False).st_size for e in it}
    for i in range(300):
        assert sizes[f"n{i}"] == i + 1, i
        assert os.stat(m / "big" / f"n{i}").st_size == i + 1, i
        assert os.stat(env.export / "big" / f"n{i}").st_size == i + 1, i
    for i in (0, 150, 299):
        assert read_file(m / "big" / f"n{i}") == b"y" * (i + 1)


@pytest.mark.plaintext
def test_listing_pages_cover_the_directory_once(env, daemon):
    """LISTDIR_PAGE from cookie to cookie: every name exactly once, each
    page but the last ends with PFS_LS_MORE and a cookie, the last with
    PFS_LS_COMPLETE; contents come where they fit; a page limit under
    4 KiB is refused."""
    _fill(env.export / "big", 3000, 100)
    with P.connect(daemon.host, daemon.port, P.load_key(env.key)) as c:
        h = c.lookup(c.root, "big")[0]
        names, cookie, pages = [], 0, 0
        while True:
            flags, cookie, items = c.listdir_page(h, cookie, max_inline=4096,
                                                  max_bytes=64 * 1024)
            pages += 1
            assert items, f"page {pages} is empty"
            for nm, _, attr, iflags, data in items:
                names.append(nm.decode())
                assert iflags & P.LD_READABLE and attr["size"] == 100
                if iflags & P.LD_DATA:
                    assert data == read_file(env.export / "big" / nm.decode())
            if flags & P.LS_COMPLETE:
                break
            assert flags & P.LS_MORE and cookie != 0, (flags, cookie)
            assert pages < 100
        assert pages >= 5
        assert sorted(names) == sorted(f"f{i}" for i in range(3000))
        flags, _, items = c.listdir_page(h, 0, max_bytes=1 << 20)
        assert flags & P.LS_COMPLETE and len(items) == 3000
        with pytest.raises(P.PfsError) as e:
            c.listdir_page(h, 0, max_bytes=4095)
        assert e.value.errno == errno.EINVAL


def _readdir_all(c, h):
    """[(name, cookie)] of directory h as READDIR gives them, dots included."""
    fid = c.opendir(h)
    out, off = [], 0
    for _ in range(10000):
        eof, ents = c.readdir(h, fid, off)
        out += [(d["name"].decode(), d["next_off"]) for d in ents]
        if ents:
            off = ents[-1]["next_off"]
        if eof or not ents:
            break
    return out


@pytest.mark.plaintext
def test_listing_cookies_are_the_directorys_own(env, daemon):
    """With PFS_CAP_LIST_COOKIES, LISTDIR, LISTDIR_PAGE and LISTDIRS give
    every item the cookie READDIR gives its name, in READDIR's order, and
    say where "." and ".." are in that order (the cookie before each, and
    its own: not always first, as ext4 lists a one-block directory in
    hash order); a READDIR from an item's cookie goes on with the names
    listed after it. A client answers readdir from a listing with these
    cookies, so that a reading going on at one of them at the server (in
    another open, after the listing went stale) goes on where it left
    off."""
    _fill(env.export / "d", 30, 10)  # one block
    _fill(env.export / "big", 3000, 10)
    with P.connect(daemon.host, daemon.port, P.load_key(env.key),
                   caps=P.CAP_LIST_COOKIES) as c:
        assert c.list_cookies
        for dn in ("d", "big"):
            h = c.lookup(c.root, dn)[0]
            want = _readdir_all(c, h)
            before = dict(zip([nm for nm, _ in want], [0] + [ck for _, ck in want]))
            dots = tuple((before[nm], dict(want)[nm]) for nm in (".", ".."))
            items = [(nm, ck) for nm, ck in want if nm not in (".", "..")]
            # Whole (three times: the kept listing's too), in pages, and
            # in a LISTDIRS.
            for _ in range(3 if dn == "d" else 0):
                c.cookies, c.dots = {}, None
                flags, got = c.listdir_items(h, max_inline=0)
                assert flags & P.LS_COMPLETE
                assert [nm.decode() for nm in got] == [nm for nm, _ in items]
                assert {k.decode(): v for k, v in c.cookies.items()} == dict(items)
                assert c.dots == dots
            c.cookies, cookie, seen = {}, 0, {}
            for _ in range(100):
                flags, cookie, got = c.listdir_page(h, cookie, max_bytes=16 * 1024)
                for k in (0, 1):  # each dot in the page that read it
                    if c.dots[k] != (0, 0):
                        assert k not in seen
                        seen[k] = c.dots[k]
                if flags & P.LS_COMPLETE:
                    break
            assert (seen[0], seen[1]) == dots
            assert {k.decode(): v for k, v in c.cookies.items()} == dict(items)
            if dn == "d":
                c.cookies = {}
                (_, _, st, flags, got), = c.listdirs([h])
                assert st == 0 and c.dots == dots
                assert {k.decode(): v for k, v in c.cookies.items()} == dict(items)
            # Going on at an item's cookie: the names after it.
            fid = c.opendir(h)
            k = want.index(items[len(items) // 2])
            _, ents = c.readdir(h, fid, want[k][1])
            after = [d["name"].decode() for d in ents]
            assert after == [nm for nm, _ in want[k + 1:k + 1 + len(after)]] and after


@pytest.mark.netns
def test_paged_listing_follows_other_hosts(env):
    """B holds a large directory's paged listing (a stat storm); names A
    creates, removes and renames there show on B within the bound, and
    B's misses never hide them."""
    pod = Pod(env)
    a, b = pod.a, pod.b
    _fill(pod.export / "big", 4500, 10)
    for i in range(4500):
        os.stat(b / "big" / f"f{i}")
    assert requests_sent(b).get("LISTDIR_PAGE", 0) >= 2
    for rnd in range(20):
        nm = f"new{rnd}"
        assert not os.path.exists(b / "big" / nm)  # a miss B may answer itself
        write_file(a / "big" / nm, b"n")
        wait_for(lambda: os.path.exists(b / "big" / nm), SHOWN, what=nm)
        os.rename(a / "big" / f"f{rnd}", a / "big" / f"moved{rnd}")
        wait_for(lambda: not os.path.exists(b / "big" / f"f{rnd}") and
                 os.path.exists(b / "big" / f"moved{rnd}"), SHOWN, what=f"moved{rnd}")
        os.unlink(a / "big" / f"f{1000 + rnd}")
        wait_for(lambda: not os.path.exists(b / "big" / f"f{1000 + rnd}"), SHOWN,
                 what=f"f{1000 + rnd} removed")
    want = sorted(os.listdir(pod.export / "big"))
    wait_for(lambda: sorted(os.listdir(b / "big")) == want, SHOWN, what="B's readdir")


# --- a directory that changes ----------------------------------------------------

def test_changing_directory_is_not_relisted_at_every_lookup(env, daemon, mount):
    """A client creating files one after another in a directory asks the
    daemon name by name, not for the whole (growing) listing at each
    lookup: at most one LISTDIR per quiet period, and the bytes received
    stay near what the creates need."""
    m = mount()
    os.mkdir(m / "d")

    s0 = podfs_stats(m)
    t0 = time.monotonic()
    for i in range(300):
        write_file(m / "d" / f"f{i:04d}", b"x" * 4096)
    elapsed = time.monotonic() - t0
    s1 = podfs_stats(m)
    listdirs = s1.get("req_LISTDIR", 0) - s0.get("req_LISTDIR", 0)
    assert listdirs <= 2 + elapsed / 2, (listdirs, elapsed)
    assert s1.get("req_CREATE", 0) - s0.get("req_CREATE", 0) == 300  # counted
    assert s1["wire_in"] - s0["wire_in"] < 300 * 4096, s1["wire_in"] - s0["wire_in"]
    assert sorted(os.listdir(m / "d")) == [f"f{i:04d}" for i in range(300)]


@pytest.mark.netns
@pytest.mark.timeout(120)
def test_listings_under_churn_across_hosts(env):
    """150 random creates (0-70 KB: with and without inline content),
    unlinks and renames across three directories on A. After each, B's
    listing of the directory (answered from LISTDIR listings while
    coherent) matches within the bound, and a file B opens has A's last
    content at once (close-to-open); now and then every directory is
    checked against the export too."""
    import random
    pod = Pod(env)
    a, b = pod.a, pod.b
    rng = random.Random(7)
    dirs = ["d0", "d1", "d2/sub"]
    for d in dirs:
        os.makedirs(a / d, exist_ok=True)
    names = {d: set() for d in dirs}
    contents = {}

    def listed(mnt, d):
        return sorted(x for x in os.listdir(mnt / d) if x != "sub")

    for n in range(150):
        d = rng.choice(dirs)
        op = rng.random()
        if op < 0.5 or not names[d]:
            nm = "f%d" % rng.randrange(50)
            contents[(d, nm)] = bytes([n % 251]) * rng.randrange(0, 70000)
            write_file(a / d / nm, contents[(d, nm)])
            names[d].add(nm)
        elif op < 0.75:
            nm = rng.choice(sorted(names[d]))
            os.unlink(a / d / nm)
            names[d].discard(nm)
            del contents[(d, nm)]
        else:
            nm, d2, nm2 = rng.choice(sorted(names[d])), rng.choice(dirs), "r%d" % rng.randrange(50)
            os.rename(a / d / nm, a / d2 / nm2)
            names[d].discard(nm)
            names[d2].add(nm2)
            contents[(d2, nm2)] = contents.pop((d, nm))
        want = sorted(names[d])
        nm = rng.choice(want) if want else None
        if nm and rng.random() < 0.5:
            # A lookup first, not after a listing: the name shows within
            # the bound, with A's last content (close-to-open).
            wait_for(lambda: os.path.exists(b / d / nm), SHOWN,
                     what=f"{d}/{nm} after operation {n}")
            assert read_file(b / d / nm) == contents[(d, nm)], f"{d}/{nm} after operation {n}"
        wait_for(lambda: listed(b, d) == want, SHOWN, what=f"{d} after operation {n}")
        if nm:
            assert read_file(b / d / nm) == contents[(d, nm)], f"{d}/{nm} after operation {n}"
        if rng.random() < 0.1:
            for dd in dirs:
                assert listed(pod.export, dd) == sorted(names[dd])
                w = sorted(names[dd])
                wait_for(lambda: listed(b, dd) == w, SHOWN, what=f"{dd} after operation {n}")


def _evict_dentries():
    """Makes the kernel forget unused dentries and inodes (FORGET); twice,
    as a directory goes only once its children went."""
    for _ in range(2):
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2")
        time.sleep(0.3)


def test_own_changes_never_served_from_an_older_listing(env, daemon, mount):
    """A listing holds its entries' attributes and small files' contents
    as they were when it was fetched, and the daemon does not push a
    client's own changes back to it. After this client appends to a file,
    appends to a hard link of another in a second listed directory,
    chmods a subdirectory and creates a file in it, and the kernel forgot
    those entries, looking
    them up again (stat, and a listing with attributes) shows the new
    size, content and mode, not the listing's."""
    m = mount()
    for d in ("a", "b"):
        os.mkdir(m / d)
    write_file(m / "a" / "f", b"0123456789")
    write_file(m / "a" / "g", b"abc")
    os.link(m / "a" / "g", m / "b" / "g2")
    os.mkdir(m / "a" / "sub")
    time.sleep(2.3)  # past the quiet period after our own changes
    # Both directories are listed now (misses are answered from listings).
    assert not os.path.exists(m / "a" / "missing")
    assert not os.path.exists(m / "b" / "missing")
    with open(m / "a" / "f", "ab") as f:
        f.write(b"ABCDE")
    with open(m / "a" / "g", "ab") as f:
        f.write(b"defg")
    os.chmod(m / "a" / "sub", 0o700)
    time.sleep(0.01)
    write_file(m / "a" / "sub" / "new", b"n")  # moves sub's mtime, ctime and size
    pins = [os.open(m / d, os.O_RDONLY) for d in ("a", "b")]  # keep the listings
    try:
        _evict_dentries()
        assert os.stat(m / "a" / "f").st_size == 15
        assert read_file(m / "a" / "f") == b"0123456789ABCDE"
        assert os.stat(m / "b" / "g2").st_size == 7
        assert read_file(m / "b" / "g2") == b"abcdefg"
        assert os.stat(m / "a" / "sub").st_mode & 0o777 == 0o700
        assert stat_fields(os.stat(m / "a" / "sub")) == stat_fields(os.stat(env.export / "a" / "sub"))
        _evict_dentries()
        sizes = {e.name: e.stat(follow_symlinks=False).st_size for e in os.scandir(m / "a")}
        assert sizes["f"] == 15 and sizes["g"] == 7, sizes
        modes = {e.name: e.stat().st_mode & 0o777 for e in os.scandir(m / "a")}
        assert modes["sub"] == 0o700, modes
    finally:
        for fd in pins:
            os.close(fd)
    # A create in a subdirectory moves the subdirectory's attributes,
    # which its parent's listing holds.
    os.makedirs(m / "c" / "sub")
    time.sleep(2.3)
    assert not os.path.exists(m / "c" / "missing")  # c is listed
    time.sleep(0.01)
    write_file(m / "c" / "sub" / "new", b"n")
    pin = os.open(m / "c", os.O_RDONLY)
    try:
        _evict_dentries()
        assert stat_fields(os.stat(m / "c" / "sub")) == stat_fields(os.stat(env.export / "c" / "sub"))
    finally:
        os.close(pin)


@pytest.mark.netns
def test_own_creates_keep_the_listing(env):
    """A client's own creates (file, directory, symlink) are added to its
    listing of the directory instead of dropping it: the miss
    before each next create is answered locally (no LOOKUP_DATA, no
    LISTDIR), the new names are found, and the listing still follows
    other hosts (a name B creates or removes) and the client's own
    unlink, rename and writes."""
    pod = Pod(env)
    a, b = pod.a, pod.b
    os.mkdir(a / "d")
    write_file(a / "d" / "seed", b"s")
    time.sleep(2.3)  # past the quiet period after our own changes
    assert not os.path.exists(a / "d" / "missing")  # d is listed
    before = requests_sent(a)
    # Each miss comes once the kernel's asynchronous RELEASE of the file
    # before is answered: a reply still being read when a lookup comes
    # makes the client ask the daemon instead (transport_quiet), which is
    # right but not what this test is about.
    for i in range(20):
        kernel_settled(a)
        write_file(a / "d" / f"f{i}", b"")            # a miss, then CREATE
    kernel_settled(a)
    os.mkdir(a / "d" / "sub")
    os.symlink("f0", a / "d" / "lnk")
    assert not os.path.exists(a / "d" / "other")
    sent = requests_since(a, before)
    assert "LOOKUP_DATA" not in sent and "LOOKUP" not in sent and "LISTDIR" not in sent, sent
    assert (sent.get("CREATE"), sent.get("MKDIR"), sent.get("SYMLINK")) == (20, 1, 1), sent
    # A hard link moves f1's nlink, which the listing holds: it goes.
    os.link(a / "d" / "f1", a / "d" / "hard")
    assert os.stat(a / "d" / "f1").st_nlink == 2
    want = {"seed", "sub", "lnk", "hard"} | {f"f{i}" for i in range(20)}
    assert set(os.listdir(a / "d")) == want
    assert set(os.listdir(pod.export / "d")) == want
    # Another host's create and unlink are pushed: A's listing goes.
    write_file(b / "d" / "from_b", b"b")
    wait_for(lambda: os.path.exists(a / "d" / "from_b"), SHOWN, what="B's file on A")
    os.unlink(b / "d" / "f3")
    wait_for(lambda: not os.path.exists(a / "d" / "f3"), SHOWN, what="B's unlink on A")
    # Our own unlink and rename.
    os.unlink(a / "d" / "f4")
    assert not os.path.exists(a / "d" / "f4")
    os.rename(a / "d" / "f5", a / "d" / "g5")
    assert not os.path.exists(a / "d" / "f5") and os.path.exists(a / "d" / "g5")
    # A file written after its create is not answered from the listing.
    time.sleep(2.3)
    assert not os.path.exists(a / "d" / "missing2")  # listed again
    write_file(a / "d" / "late", b"")
    with open(a / "d" / "late", "ab") as f:
        f.write(b"12345")
    pin = os.open(a / "d", os.O_RDONLY)
    try:
        _evict_dentries()
        assert os.stat(a / "d" / "late").st_size == 5
        assert read_file(a / "d" / "late") == b"12345"
    finally:
        os.close(pin)


@pytest.mark.netns
def test_own_renames_and_unlinks_keep_the_listing(env):
    """A client's own rename within a directory (an atomic replace:
    pip's compiled files, checkpoint writers) moves the name in its
    listing of the directory, and its own unlink removes the name,
    instead of dropping the listing: the next misses and cold lookups
    there are answered locally (they were LOOKUP_DATAs: 601 in a pip
    install). The listing still follows another host's replace and
    create, and what it then answers about the moved, replaced and
    removed names is the export's, down to the attributes."""
    pod = Pod(env)
    a, b = pod.a, pod.b
    d = a / "d"
    os.mkdir(b / "d")  # made by another host: A lists it as it finds it
    for i in range(8):
        write_file(b / "d" / f"f{i}", b"old%d" % i)
    assert not os.path.exists(d / "missing")  # d is listed
    before = requests_sent(a)
    for i in range(4):
        kernel_settled(a)
        write_file(d / f"t{i}", b"new%d" % i)         # a miss, then CREATE
        os.replace(d / f"t{i}", d / f"f{i}")          # over a listed name
        kernel_settled(a)
        assert not os.path.exists(d / f"gone{i}")      # a miss
    os.rename(d / "f4", d / "g4")                     # to a new name
    assert not os.path.exists(d / "f4")
    os.unlink(d / "f7")
    assert not os.path.exists(d / "gone7")
    sent = requests_since(a, before)
    assert "LOOKUP_DATA" not in sent and "LOOKUP" not in sent and "LISTDIR" not in sent, sent
    assert (sent.get("CREATE"), sent.get("RENAME"), sent.get("UNLINK")) == (4, 5, 1), sent
    # What the listing answers once the kernel forgot the names.
    pin = os.open(d, os.O_RDONLY)
    try:
        _evict_dentries()
        for n in ("f0", "f3", "g4", "f5"):
            assert stat_fields(os.stat(d / n)) == stat_fields(os.stat(pod.export / "d" / n)), n
        for n in ("f4", "t0", "f7"):
            assert not os.path.exists(d / n), n
        assert read_file(d / "f0") == b"new0" and read_file(d / "g4") == b"old4"
    finally:
        os.close(pin)
    # Another host replaces f5 and creates h: A's listing is stale for
    # them, its own rename after that must not make it current again.
    write_file(b / "d" / "tb", b"from b")
    os.replace(b / "d" / "tb", b / "d" / "f5")
    write_file(b / "d" / "h", b"h")
    os.replace(d / "f6", d / "g6")
    assert read_file(d / "f5") == b"from b"
    assert os.path.exists(d / "h") and read_file(d / "g6") == b"old6"
    want = {"f0", "f1", "f2", "f3", "g4", "f5", "g6", "h"}
    assert set(os.listdir(d)) == want
    assert set(os.listdir(pod.export / "d")) == want
