"""test_pcache.py: the persistent content cache (-o cache_dir=DIR,cache_size=SIZE).

A mount reads files (filling the cache), is unmounted, and a new mount with
the same cache_dir must read them from local disk (no READ bytes from the
server: `file_read` of the stats xattr stays 0), never serve an entry of
a file that changed meanwhile, detect entries damaged by a "crash", and
keep the directory within cache_size.
"""

import os
import subprocess
import time

import pytest

from helpers import PODFS, podfs_stats as stats, read_file, wait_for, write_file

# Sizes: inline with LOOKUP_DATA, one READ, several READs (background fetch).
SIZES = {"small": 3000, "mid": 300_000, "big": 3 * 1024 * 1024 + 17}


def settle(m, entries=None):
    """Waits until the cache's worker has nothing queued (and holds
    `entries` entries, if given)."""
    def done():
        s = stats(m)
        return s["pcache_queued"] == 0 and (entries is None or s["pcache_entries"] >= entries)
    wait_for(done, timeout=30, what="the persistent cache to settle")


def make_files(export, names=SIZES, age=3600):
    """Files of random data, with mtimes `age` seconds in the past (files
    modified in the last 10 s are not fetched in the background)."""
    data = {}
    t = time.time() - age
    for name, size in names.items():
        data[name] = os.urandom(size)
        write_file(export / name, data[name])
        os.utime(export / name, (t, t))
    return data


def pmount(mount, cdir, extra=""):
    return mount(opts=f"cache_dir={cdir},cache_size=64M" + ("," + extra if extra else ""))


def entry_files(cdir):
    return sorted((cdir / "e").iterdir())


def test_pcache_survives_remount(env, daemon, mount):
    cdir = env.root / "pcache"
    data = make_files(env.export)
    m = pmount(mount, cdir)
    for name, d in data.items():
        assert read_file(m / name) == d
    settle(m, entries=len(data))
    assert m.umount() is None

    m = pmount(mount, cdir)
    for name, d in data.items():
        assert read_file(m / name) == d
    s = stats(m)
    assert s["file_read"] == 0, s
    assert s["pcache_hits"] >= 2 and s["pcache_bytes"] >= SIZES["mid"] + SIZES["big"], s
    # The same again with inline data off: every file through READ.
    assert m.umount() is None
    m = pmount(mount, cdir, "max_inline=0")
    for name, d in data.items():
        assert read_file(m / name) == d
    s = stats(m)
    assert s["file_read"] == 0, s
    assert s["pcache_hits"] >= 3, s


def test_pcache_never_serves_a_changed_file(env, daemon, mount):
    cdir = env.root / "pcache"
    names = {f"f{i}": 200_000 for i in range(4)}
    names["small"] = 5000
    data = make_files(env.export, names)
    m = pmount(mount, cdir, "max_inline=0")
    for name, d in data.items():
        assert read_file(m / name) == d
    settle(m, entries=len(data))
    assert m.umount() is None

    # f0: rewritten in the export, same size, mtime put back (touch -r):
    # only ctime tells.
    st = os.stat(env.export / "f0")
    new0 = bytearray(data["f0"])
    new0[1000:1010] = b"CHANGED!!!"
    with open(env.export / "f0", "r+b") as f:
        f.write(bytes(new0))
    os.utime(env.export / "f0", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(env.export / "f0").st_mtime_ns == st.st_mtime_ns
    assert os.stat(env.export / "f0").st_size == st.st_size
    # small: the same, for a file that travels inline.
    st = os.stat(env.export / "small")
    news = b"s" * len(data["small"])
    write_file(env.export / "small", news)
    os.utime(env.export / "small", ns=(st.st_atime_ns, st.st_mtime_ns))
    # f1: through another mount (another host's view) while ours is down.
    other = mount(path=env.root / "other")
    new1 = os.urandom(len(data["f1"]))
    write_file(other / "f1", new1)
    # f2: replaced by a new file of the same size (a new inode).
    new2 = os.urandom(len(data["f2"]))
    write_file(env.export / "f2.new", new2)
    os.rename(env.export / "f2.new", env.export / "f2")
    assert other.umount() is None

    for extra in ("max_inline=0", ""):
        m = pmount(mount, cdir, extra)
        assert read_file(m / "f0") == bytes(new0)
        assert read_file(m / "f1") == new1
        assert read_file(m / "f2") == new2
        assert read_file(m / "f3") == data["f3"]
        assert read_file(m / "small") == news
        s = stats(m)
        assert s["pcache_hits"] >= 1, s  # f3, unchanged
        settle(m)
        assert m.umount() is None


@pytest.mark.parametrize("held", [False, True], ids=["opened_after", "held_open"])
def test_pcache_never_serves_what_an_old_listing_showed(env, daemon, mount, held):
    """A listing of a directory fetched before another host rewrote a file
    in it still has the file's old attributes (only the file was pushed).
    A readdir answered from it (ls) must not make the cache serve the old
    content to a read after the other host's close: the reply of a request
    sent before a push leaves the data version unknown (it once made it
    known again, as the listing's)."""
    cdir = env.root / "pcache"
    b = pmount(mount, cdir)
    a = mount(path=env.root / "a")
    os.mkdir(a / "d")
    old, new = b"O" * 3000, b"N" * 3000
    write_file(a / "d" / "f", old)
    assert read_file(b / "d" / "f") == old  # the lookup fetched d's listing
    settle(b, entries=1)
    fd = os.open(b / "d" / "f", os.O_RDONLY) if held else None
    try:
        write_file(a / "d" / "f", new)  # same size; A's close returns
        if not held:
            fd = os.open(b / "d" / "f", os.O_RDONLY)
        os.listdir(b / "d")  # from the listing fetched before
        assert os.pread(fd, len(new), 0) == new, "old content after the other host's close"
    finally:
        if fd is not None:
            os.close(fd)


def test_pcache_damaged_entries_are_discarded(env, daemon, mount):
    cdir = env.root / "pcache"
    names = {f"f{i}": 100_000 + i for i in range(3)}
    data = make_files(env.export, names)
    m = pmount(mount, cdir, "max_inline=0")
    for name, d in data.items():
        assert read_file(m / name) == d
    settle(m, entries=3)
    assert m.umount() is None

    ents = entry_files(cdir)
    assert len(ents) == 3
    # A "crash": one entry cut short, one with a flipped data byte, one
    # with a damaged header; and a half-written temporary left behind.
    os.truncate(ents[0], os.path.getsize(ents[0]) // 2)
    with open(ents[1], "r+b") as f:
        f.seek(-100, os.SEEK_END)
        b = f.read(1)
        f.seek(-100, os.SEEK_END)
        f.write(bytes([b[0] ^ 0x40]))
    with open(ents[2], "r+b") as f:
        f.seek(20)
        f.write(b"\xff")
    write_file(cdir / "tmp" / "0123456789abcdef.999.1", b"partial")

    m = pmount(mount, cdir, "max_inline=0")
    for name, d in data.items():
        assert read_file(m / name) == d
    s = stats(m)
    assert s["pcache_discarded"] == 3, s
    assert s["file_read"] >= sum(names.values()), s
    wait_for(lambda: not list((cdir / "tmp").iterdir()), timeout=10,
             what="the leftover temporary to be removed")
    # Fetched again and stored whole: the next mount reads from disk.
    settle(m, entries=3)
    assert m.umount() is None
    m = pmount(mount, cdir, "max_inline=0")
    for name, d in data.items():
        assert read_file(m / name) == d
    s = stats(m)
    assert s["file_read"] == 0 and s["pcache_hits"] == 3, s


def test_pcache_eviction_keeps_within_size(env, daemon, mount):
    cdir = env.root / "pcache"
    names = {f"f{i:02d}": 100_000 for i in range(30)}
    data = make_files(env.export, names)
    m = mount(opts=f"cache_dir={cdir},cache_size=1M,max_inline=0")
    for name in sorted(data):
        assert read_file(m / name) == data[name]
        settle(m)
    s = stats(m)
    assert s["pcache_evicted"] > 0, s
    total = sum(os.path.getsize(p) for p in entry_files(cdir))
    assert total <= 1024 * 1024, total
    assert s["pcache_disk"] <= 1024 * 1024, s
    assert m.umount() is None
    # The last file read is among the entries kept (least recently used
    # go first), and a remount serves it from disk.
    m = mount(opts=f"cache_dir={cdir},cache_size=1M,max_inline=0")
    assert read_file(m / "f29") == data["f29"]
    s = stats(m)
    assert s["file_read"] == 0 and s["pcache_hits"] == 1, s
    # The first one read went first.
    assert read_file(m / "f00") == data["f00"]
    s = stats(m)
    assert s["file_read"] == len(data["f00"]) and s["pcache_hits"] == 1, s
    assert m.umount() is None

    # A smaller cap on a later mount is enforced by the start-up scan.
    cdir2 = env.root / "pcache2"
    m = mount(opts=f"cache_dir={cdir2},cache_size=8M,max_inline=0")
    for name in sorted(data):
        assert read_file(m / name) == data[name]
    settle(m, entries=30)
    assert stats(m)["pcache_evicted"] == 0
    assert m.umount() is None
    m = mount(opts=f"cache_dir={cdir2},cache_size=1M,max_inline=0")
    # Evicted ones show the scan is done: before it, pcache_disk counts
    # only the entries it has met so far (at first none), and the files
    # are all still there.
    wait_for(lambda: (lambda s: s["pcache_evicted"] > 0 and s["pcache_disk"] <= 1024 * 1024)(stats(m)),
             timeout=10, what="the start-up scan to evict down to the new cap")
    assert sum(os.path.getsize(p) for p in entry_files(cdir2)) <= 1024 * 1024
    assert stats(m)["pcache_evicted"] > 0


def run_podfs(daemon, mnt, opts, timeout=30):
    return subprocess.run([str(PODFS), f"{daemon.host}:{daemon.port}", str(mnt), "-f",
                           "-o", f"key={daemon.key}," + opts],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("opts", ["cache_dir=D,cache_size=lots", "cache_dir=D,cache_size=10",
                                  "cache_dir=D,cache_size=-5M", "cache_dir=D,cache_size=3Q",
                                  "cache_dir=,cache_size=1G", "cache_size=1G"])
def test_pcache_bad_options(env, daemon, opts):
    r = run_podfs(daemon, env.mnt, opts.replace("D", str(env.root / "c")))
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "cache_" in r.stderr


def test_pcache_dir_errors(env, daemon, mount):
    r = run_podfs(daemon, env.mnt, "cache_dir=/proc/no/such/dir")
    assert r.returncode == 2, r.stderr
    assert "cache_dir /proc/no/such/dir" in r.stderr and \
        len(r.stderr.strip().splitlines()) == 1, r.stderr
    # A second mount with the same directory is refused, naming the first.
    cdir = env.root / "pcache"
    m = pmount(mount, cdir)
    other = env.root / "other"
    other.mkdir()
    r = run_podfs(daemon, other, f"cache_dir={cdir}")
    assert r.returncode == 2, r.stderr
    assert "in use by another podfs mount" in r.stderr and \
        f"pid {m.proc.pid}" in r.stderr, r.stderr
    assert m.umount() is None
    # Once it is unmounted, the directory is free again.
    m = pmount(mount, cdir)
    assert "pcache_hits" in stats(m)


def test_pcache_help(env):
    r = subprocess.run([str(PODFS), "--help"], stdout=subprocess.PIPE, text=True, timeout=10)
    assert "cache_dir=DIR" in r.stdout and "cache_size=SIZE" in r.stdout


def test_pcache_partly_read_file_is_fetched_whole(env, daemon, mount):
    """An mmap'ed library is read only in part: the whole file is fetched
    in the background, and still at unmount if the job ends at once."""
    cdir = env.root / "pcache"
    data = make_files(env.export, {"lib.so": 5 * 1024 * 1024 + 3})
    data.update(make_files(env.export, {"hot.log": 2 * 1024 * 1024}, age=0))
    m = pmount(mount, cdir)
    import mmap
    for name in data:
        with open(m / name, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
            assert mm[4096 * 300:4096 * 300 + 10] == data[name][4096 * 300:4096 * 300 + 10]
            mm.close()
    assert m.umount() is None  # at once: the fetch finishes during the unmount
    m = pmount(mount, cdir)
    assert read_file(m / "lib.so") == data["lib.so"]
    s = stats(m)
    assert s["file_read"] == 0 and s["pcache_bytes"] == len(data["lib.so"]), s
    # Modified just now: probably still being written, so not fetched.
    assert read_file(m / "hot.log") == data["hot.log"]
    s = stats(m)
    assert s["file_read"] >= len(data["hot.log"]) and s["pcache_fetched"] == 0, s


def test_pcache_dir_must_be_private(env, daemon, mount):
    """Entries in cache_dir are served without asking podfsd, so a directory
    that someone else can write to, or a symlink to one, is refused."""
    real = env.root / "real"
    real.mkdir(mode=0o700)
    link = env.root / "link"
    link.symlink_to(real)
    shared = env.root / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    theirs = env.root / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    for d, why in ((link, "not a directory"), (shared, "writable by others"),
                   (theirs, "belongs to uid 65534")):
        r = run_podfs(daemon, env.mnt, f"cache_dir={d}")
        assert r.returncode == 2, r.stderr
        assert f"cache_dir {d}" in r.stderr and why in r.stderr and \
            len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert not (real / "lock").exists()
    # The same directories, made private, are accepted.
    m = pmount(mount, real)
    assert "pcache_hits" in stats(m)
    assert (real / "lock").exists()
