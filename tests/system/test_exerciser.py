"""test_exerciser.py: random file operations checked against a model.

In the spirit of fsx: a seeded random mix of pwrite, pread, truncate,
fallocate (posix_fallocate, a hole punched, a range zeroed, blocks kept
past the end), mmap reads and writes, reads and writes through a second
descriptor opened O_DIRECT (aligned and not, as fsx -Z and databases
mix them with buffered I/O), copy_file_range (from a second file that
changes now and then, and within the file), fsync and close/reopen on
one file, each result compared with an in-memory model of what the
file must hold.
Then the same file is read through a second mount (another host) and
straight from the export. Any divergence fails with the operation log.
"""

import mmap
import os
import random

import pytest

from helpers import copy_range, on_every_host, podfs_stats
from syscalls import FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE, fallocate

SIZE_MAX = 3 * 1024 * 1024
SIDE = 1024 * 1024  # the second file, a source of copies


def put(model, off, data):
    """The model after data was written at off."""
    if off > len(model):
        model.extend(b"\0" * (off - len(model)))
    model[off:off + len(data)] = data


def check_same(model, got, where, log):
    if bytes(model) != got:
        first = next((i for i in range(min(len(model), len(got))) if model[i] != got[i]),
                     min(len(model), len(got)))
        pytest.fail(f"{where}: file differs from the model at byte {first} "
                    f"(model {len(model)} bytes, file {len(got)}); last ops:\n"
                    + "\n".join(log[-15:]))


def exercise(path, seed, nops):
    rnd = random.Random(seed)
    model = bytearray()
    log = []
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    sfd = os.open(f"{path}.src", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    dfd = os.open(path, os.O_RDWR | os.O_DIRECT)
    side = bytearray(rnd.randbytes(SIDE))
    os.pwrite(sfd, side, 0)
    try:
        for i in range(nops):
            op = rnd.choices(["write", "read", "trunc", "falloc", "mmapw", "mmapr",
                              "fsync", "reopen", "copy", "copyself", "punch", "zero", "keep",
                              "dwrite", "dread"],
                             [30, 25, 8, 5, 8, 8, 6, 10, 6, 4, 4, 4, 2, 6, 6])[0]
            if op == "write":
                off = rnd.randrange(0, SIZE_MAX)
                n = rnd.choice([1, 7, 4096, 65536, rnd.randrange(1, 300000)])
                n = min(n, SIZE_MAX - off)
                data = rnd.randbytes(n)
                log.append(f"{i} pwrite off={off} len={n}")
                assert os.pwrite(fd, data, off) == n
                if off > len(model):
                    model.extend(b"\0" * (off - len(model)))
                model[off:off + n] = data
            elif op == "read":
                off = rnd.randrange(0, max(1, len(model) + 5000))
                n = rnd.randrange(1, 400000)
                log.append(f"{i} pread off={off} len={n}")
                got = os.pread(fd, n, off)
                want = bytes(model[off:off + n])
                if got != want:
                    pytest.fail(f"pread off={off} len={n}: got {len(got)} bytes, want "
                                f"{len(want)}; last ops:\n" + "\n".join(log[-15:]))
            elif op == "trunc":
                n = rnd.randrange(0, SIZE_MAX)
                log.append(f"{i} ftruncate {n}")
                os.ftruncate(fd, n)
                if n < len(model):
                    del model[n:]
                else:
                    model.extend(b"\0" * (n - len(model)))
            elif op == "falloc":
                off = rnd.randrange(0, SIZE_MAX // 2)
                n = rnd.randrange(1, SIZE_MAX // 2)
                log.append(f"{i} posix_fallocate off={off} len={n}")
                os.posix_fallocate(fd, off, n)
                if off + n > len(model):
                    model.extend(b"\0" * (off + n - len(model)))
            elif op in ("punch", "zero", "keep"):
                # fallocate(2)'s other modes, as fsx runs them: a hole
                # punched, a range zeroed (growing the file unless
                # KEEP_SIZE), blocks allocated past the end, size kept.
                off = rnd.randrange(0, SIZE_MAX // 2)
                n = rnd.choice([1, 4096, rnd.randrange(1, SIZE_MAX // 2)])
                mode = {"punch": FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                        "zero": FALLOC_FL_ZERO_RANGE | rnd.choice([0, FALLOC_FL_KEEP_SIZE]),
                        "keep": FALLOC_FL_KEEP_SIZE}[op]
                log.append(f"{i} fallocate mode={mode:#x} off={off} len={n}")
                fallocate(fd, mode, off, n)
                end = min(off + n, len(model)) if mode & FALLOC_FL_KEEP_SIZE else off + n
                if op != "keep" and end > off:
                    put(model, off, b"\0" * (end - off))
            elif op in ("mmapw", "mmapr") and len(model) > 0:
                off = rnd.randrange(0, len(model))
                n = min(rnd.randrange(1, 100000), len(model) - off)
                log.append(f"{i} {op} off={off} len={n}")
                with mmap.mmap(fd, len(model)) as mm:
                    if op == "mmapw":
                        data = rnd.randbytes(n)
                        mm[off:off + n] = data
                        model[off:off + n] = data
                        mm.flush()
                    elif mm[off:off + n] != bytes(model[off:off + n]):
                        pytest.fail(f"mmap read off={off} len={n} differs; last ops:\n"
                                    + "\n".join(log[-15:]))
            elif op == "copy":
                if rnd.random() < 0.3:  # the source changes (its bytes in write-behind)
                    so = rnd.randrange(0, SIDE)
                    data = rnd.randbytes(min(rnd.randrange(1, 200000), SIDE - so))
                    log.append(f"{i} pwrite source off={so} len={len(data)}")
                    os.pwrite(sfd, data, so)
                    side[so:so + len(data)] = data
                so = rnd.randrange(0, SIDE + 1000)
                off = rnd.randrange(0, SIZE_MAX)
                n = min(rnd.choice([1, 4096, rnd.randrange(1, SIDE)]), SIZE_MAX - off)
                log.append(f"{i} copy_file_range from source off={so} to off={off} len={n}")
                piece = bytes(side[so:so + n])
                got = copy_range(sfd, fd, n, so, off)
                if got != len(piece):
                    pytest.fail(f"copy_file_range copied {got} bytes, want {len(piece)}; "
                                "last ops:\n" + "\n".join(log[-15:]))
                if piece:
                    put(model, off, piece)
            elif op == "copyself" and len(model) > 1:
                a = rnd.randrange(0, len(model) - 1)
                n = rnd.randrange(1, min(300000, len(model) - a) + 1)
                b = rnd.randrange(0, SIZE_MAX - n)
                if b + n <= a or a + n <= b:  # copy_file_range refuses overlaps
                    log.append(f"{i} copy_file_range within off={a} to off={b} len={n}")
                    piece = bytes(model[a:a + n])
                    got = copy_range(fd, fd, n, a, b)
                    if got != n:
                        pytest.fail(f"copy_file_range within copied {got} bytes, want {n}; "
                                    "last ops:\n" + "\n".join(log[-15:]))
                    put(model, b, piece)
            elif op in ("dwrite", "dread"):
                # Page-aligned buffers (mmap), offsets and lengths aligned
                # to 4 KiB or not at all.
                aligned = rnd.random() < 0.5
                off = rnd.randrange(0, SIZE_MAX if op == "dwrite" else len(model) + 5000)
                n = rnd.choice([1, 4096, rnd.randrange(1, 300000)])
                if aligned:
                    off &= ~4095
                    n = (n + 4095) & ~4095
                n = min(n, SIZE_MAX - off)
                log.append(f"{i} O_DIRECT {op[1:]} off={off} len={n}")
                with mmap.mmap(-1, max(n, 1)) as buf:
                    view = memoryview(buf)[:n]
                    if op == "dwrite":
                        data = rnd.randbytes(n)
                        view[:] = data
                        assert os.pwritev(dfd, [view], off) == n
                        put(model, off, data)
                    else:
                        got = os.preadv(dfd, [view], off)
                        want = bytes(model[off:off + n])
                        if bytes(view[:got]) != want:
                            pytest.fail(f"O_DIRECT read off={off} len={n}: got {got} bytes "
                                        f"differing from the model's {len(want)}; last ops:\n"
                                        + "\n".join(log[-15:]))
                    view.release()
            elif op == "fsync":
                log.append(f"{i} fsync")
                os.fsync(fd)
            elif op == "reopen":
                log.append(f"{i} close+reopen")
                os.close(fd)
                fd = os.open(path, os.O_RDWR)
            st = os.fstat(fd)
            if st.st_size != len(model):
                pytest.fail(f"after op {i}: size {st.st_size}, model {len(model)}; last ops:\n"
                            + "\n".join(log[-15:]))
        os.fsync(fd)
    finally:
        os.close(fd)
        os.close(sfd)
        os.close(dfd)
    with open(path, "rb") as f:
        check_same(model, f.read(), "re-read after close", log)
    return model, log


@pytest.mark.parametrize("seed", [1, 2])
def test_random_ops_match_model(pod, seed):
    model, log = exercise(pod.a.path / f"fsx{seed}", seed, 1500)
    check_same(model, (pod.export / f"fsx{seed}").read_bytes(), "the export", log)
    # Close-to-open on the other host: its open after our close sees it all.
    with open(pod.b.path / f"fsx{seed}", "rb") as f:
        check_same(model, f.read(), "the other host", log)


def test_random_ops_synchronous_writes(env, mount):
    m = mount(opts="wb_threads=0")
    model, log = exercise(m.path / "fsx-sync", 3, 400)
    check_same(model, (env.export / "fsx-sync").read_bytes(), "the export", log)


@pytest.mark.parametrize("kind", ["flock", "fcntl"])
@pytest.mark.parametrize("reopen", [True, False], ids=["reopen", "open-once"])
def test_locked_counter_across_hosts(pod, reopen, kind):
    """Two hosts increment one counter under a lock (flock, or an fcntl
    lock of the whole file), as filelock users do: lock, read, truncate,
    write, unlock. Taking the lock must make the other host's last write
    visible, whether the file is reopened each time or kept open. Three
    rounds in four leave their write to the close to commit (no fsync), so
    a RELEASE still committing it overlaps the next open and lock."""
    import subprocess
    import sys
    n = 200
    (pod.export / "counter").write_text("0")
    script = r'''
import fcntl, os, sys
path, n, reopen, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
def lock(fd, how):
    if kind == "flock":
        fcntl.flock(fd, how)
    else:
        fcntl.lockf(fd, how)
fd = None
for i in range(n):
    if fd is None:
        fd = os.open(path, os.O_RDWR)
    lock(fd, fcntl.LOCK_EX)
    v = int(os.pread(fd, 64, 0) or b"0")
    data = str(v + 1).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    if i % 4 == 3:
        os.fsync(fd)
    lock(fd, fcntl.LOCK_UN)
    if reopen:
        os.close(fd)
        fd = None
'''
    procs = [subprocess.Popen([sys.executable, "-c", script, str(mt.path / "counter"), str(n),
                               "1" if reopen else "0", kind]) for mt in (pod.a, pod.b)]
    for p in procs:
        assert p.wait(timeout=120) == 0
    assert (pod.export / "counter").read_text() == str(2 * n)


def test_mapped_bytes_past_the_end_stay_out_of_the_file(pod):
    """fsx's end-of-file checks: the bytes of the last page past a file's
    end read as zeros through a mapping, and what a program stores there
    (it may: the page is mapped) never becomes part of the file, not
    after msync, not when the file grows over them (ftruncate, a write
    further on), on this host, on another, or in the export."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    page = 4096
    for grow in ("ftruncate", "pwrite"):
        name = f"eof-{grow}"
        head = os.urandom(100)
        fd = os.open(pod.a / name, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.pwrite(fd, head, 0)
            addr = libc.mmap(None, page, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
            assert addr not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
            try:
                assert ctypes.string_at(addr, 100) == head
                assert ctypes.string_at(addr + 100, page - 100) == bytes(page - 100)
                ctypes.memset(addr + 200, 0x5A, 1000)
                assert libc.msync(addr, page, 4) == 0  # MS_SYNC
            finally:
                libc.munmap(addr, page)
            assert os.fstat(fd).st_size == 100
            if grow == "ftruncate":
                os.ftruncate(fd, 3 * page)
            else:
                os.pwrite(fd, b"end", 3 * page - 3)
            os.fsync(fd)
        finally:
            os.close(fd)
        want = head + bytes(3 * page - 100) if grow == "ftruncate" else \
            head + bytes(3 * page - 103) + b"end"
        for where, path in (("this host", pod.a / name), ("the other host", pod.b / name),
                            ("the export", pod.export / name)):
            with open(path, "rb") as f:
                got = f.read()
            assert got == want, (grow, where, len(got), got.find(b"\x5a" * 8))


NAME_LOCK_SCRIPT = r'''
import os, sys, time
d, n, how = sys.argv[1], int(sys.argv[3]), sys.argv[4]
lock, counter = os.path.join(d, "lock"), os.path.join(d, "counter")
deadline = time.monotonic() + 100
for i in range(n):
    while True:
        try:
            if how == "excl":
                os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            elif how == "symlink":
                os.symlink(str(os.getpid()), lock)
            elif how == "link":
                # liblockfile's way: a file of one's own, linked to the
                # lock's name; two links then say it is ours.
                own = os.path.join(d, "own.%d" % os.getpid())
                os.close(os.open(own, os.O_CREAT | os.O_WRONLY, 0o644))
                try:
                    os.link(own, lock)
                finally:
                    nlink = os.stat(own).st_nlink
                    os.unlink(own)
                assert nlink == 2, nlink
            else:
                os.mkdir(lock)
                if how == "mkdir-owner":
                    with open(os.path.join(lock, "owner"), "w") as f:
                        f.write(str(os.getpid()))
            break
        except FileExistsError:
            if time.monotonic() > deadline:
                sys.exit("lock never came free")
            time.sleep(0.0005)
    with open(counter) as f:
        v = int(f.read())
    with open(counter, "w") as f:
        f.write(str(v + 1))
    if how == "mkdir-owner":
        with open(os.path.join(lock, "owner")) as f:
            assert f.read() == str(os.getpid())
        os.unlink(os.path.join(lock, "owner"))
    (os.rmdir if how.startswith("mkdir") else os.unlink)(lock)
'''


@pytest.mark.parametrize("fixture", ["pod", "dpod"])
@pytest.mark.parametrize("how", ["excl", "mkdir", "mkdir-owner", "link", "symlink"])
def test_a_name_as_a_lock_across_hosts(request, fixture, how):
    """Two hosts take turns through a lock made of a name, as programs
    that cannot trust fcntl locks on a network file system do: an O_EXCL
    create (SoftFileLock), a mkdir (shell scripts; with an owner file in
    it), a hard link to a file of one's own (liblockfile), a symlink.
    Exactly one of them succeeds at a time, its removal lets the other
    host in at once, and inside it each host reads the other's last
    counter.
    With delegations too, where a host answers creates in a directory it
    holds by itself: there a host's lookup of the directory the other just
    made (its recall) once waited for an invalidation the other's own
    mkdir held up, and every such round cost 500 ms until an invalidation
    was acknowledged unapplied; none may be."""
    pod = request.getfixturevalue(fixture)
    n = 150
    (pod.export / "counter").write_text("0")
    on_every_host(pod.mounts, NAME_LOCK_SCRIPT, n, how)
    assert (pod.export / "counter").read_text() == str(2 * n)
    for mt in (pod.a, pod.b):
        assert podfs_stats(mt)["ack_unapplied"] == 0, mt.tag

