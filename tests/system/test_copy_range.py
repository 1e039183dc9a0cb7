"""test_copy_range.py: copy_file_range(2) (cp, cat) copies on the
coordinator (COPY_RANGE): the bytes never cross the network, and the
result is what a copy through read and write would have made, on this
host, on another host and in the export.

Each test checks against the export directory (the ground truth) and
against a model of the bytes computed here.
"""

import errno
import os
import signal
import subprocess
import threading
import time

import pytest

import pfsproto as P
from helpers import (copy_range, errno_of as eno, read_file, requests_since, requests_sent,
                     write_file)


def copy_all(src, dst, length, off_in=0, off_out=0):
    """copy_range (helpers) between two paths; returns the bytes copied."""
    fi = os.open(src, os.O_RDONLY)
    fo = os.open(dst, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        return copy_range(fi, fo, length, off_in, off_out)
    finally:
        os.close(fi)
        os.close(fo)


def test_cp_copies_on_the_coordinator(env, m):
    """cp of a file larger than one COPY_RANGE (64 MiB) and not a
    multiple of a page: the copy is exact, and no byte of it went through
    READ or WRITE."""
    data = os.urandom(1 << 20) * 70 + b"tail"
    write_file(env.export / "src", data)
    before = requests_sent(m)
    subprocess.run(["cp", m / "src", m / "dst"], check=True, timeout=120)
    sent = requests_since(m, before)
    assert sent.get("COPY_RANGE", 0) >= 2, sent
    assert "WRITE" not in sent and "READ" not in sent, sent
    assert read_file(env.export / "dst") == data
    assert read_file(m / "dst") == data
    assert os.stat(m / "dst").st_size == len(data)


def test_ranges_offsets_and_the_end_of_the_source(env, m):
    """Copies at unaligned offsets into the middle of an existing file,
    past its end (a hole before) and from near the source's end (short):
    the destination equals the model, read through a descriptor that had
    the old pages cached before each copy."""
    src = os.urandom(300_000)
    write_file(m / "s", src)
    want = bytearray(os.urandom(100_000))
    write_file(m / "d", bytes(want))
    fd = os.open(m / "d", os.O_RDONLY)
    try:
        for off_in, off_out, length in [(1, 4097, 50_000), (123_457, 99_999, 10),
                                        (0, 250_000, 4096), (299_000, 10, 5000)]:
            assert os.pread(fd, 400_000, 0) == bytes(want)  # the old pages, cached
            n = copy_all(m / "s", m / "d", length, off_in, off_out)
            piece = src[off_in:off_in + length]
            assert n == len(piece)
            if off_out > len(want):
                want.extend(bytes(off_out - len(want)))
            want[off_out:off_out + n] = piece
            assert os.pread(fd, 400_000, 0) == bytes(want), (off_in, off_out, length)
            assert os.fstat(fd).st_size == len(want)
    finally:
        os.close(fd)
    assert read_file(env.export / "d") == bytes(want)
    # Nothing left past the source's end.
    assert copy_all(m / "s", m / "d", 10, len(src), 0) == 0


def test_copy_sees_this_hosts_writes_not_yet_on_the_coordinator(env, daemon, m):
    """The source was just written and not closed, the destination has
    writes of its own under the copied range, and none of them has
    reached the coordinator (stopped meanwhile: write-behind answers the
    writes and holds them). The copy waits for them: it takes the new
    source bytes and lands over the destination's writes, never under
    them; a write after it wins over it."""
    size = 8 << 20
    new_src = os.urandom(size)
    write_file(m / "s", b"o" * size)
    s = os.open(m / "s", os.O_RDWR)
    d = os.open(m / "d", os.O_RDWR | os.O_CREAT, 0o644)
    got = []
    try:
        daemon.proc.send(signal.SIGSTOP)
        try:
            os.pwrite(s, new_src, 0)
            os.pwrite(d, b"x" * size, 0)
            t = threading.Thread(target=lambda: got.append(os.copy_file_range(s, d, size, 0, 0)))
            t.start()
            time.sleep(0.3)  # the copy is on its way, behind the writes or not
        finally:
            daemon.proc.send(signal.SIGCONT)
        t.join(60)
        assert got == [size]
        os.pwrite(d, b"after", 10)
        want = bytearray(new_src)
        want[10:15] = b"after"
        assert os.pread(d, size + 10, 0) == bytes(want)
    finally:
        os.close(s)
        os.close(d)
    assert read_file(env.export / "d") == bytes(want)
    assert read_file(env.export / "s") == new_src


def test_within_one_file(env, m):
    """A copy between two ranges of one file, and the overlapping copy
    copy_file_range(2) refuses."""
    data = os.urandom(200_000)
    write_file(m / "f", data)
    fd = os.open(m / "f", os.O_RDWR)
    try:
        assert os.copy_file_range(fd, fd, 50_000, 0, 100_000) == 50_000
        assert eno(os.copy_file_range, fd, fd, 50_000, 0, 10_000) == errno.EINVAL
    finally:
        os.close(fd)
    want = data[:100_000] + data[:50_000] + data[150_000:]
    assert read_file(m / "f") == want
    assert read_file(env.export / "f") == want


def test_descriptors_that_may_not_copy(env, m):
    """A destination opened read-only or for appending, a source opened
    write-only: EBADF, as on a local filesystem, and nothing changes."""
    write_file(m / "s", b"source")
    write_file(m / "d", b"destination")
    s = os.open(m / "s", os.O_RDONLY)
    sw = os.open(m / "s", os.O_WRONLY)
    ro = os.open(m / "d", os.O_RDONLY)
    ap = os.open(m / "d", os.O_WRONLY | os.O_APPEND)
    try:
        assert eno(os.copy_file_range, s, ro, 6, 0, 0) == errno.EBADF
        assert eno(os.copy_file_range, s, ap, 6, 0, 0) == errno.EBADF
        assert eno(os.copy_file_range, sw, ap, 6, 0, 0) == errno.EBADF
    finally:
        for fd in (s, sw, ro, ap):
            os.close(fd)
    assert read_file(env.export / "d") == b"destination"


def test_another_host_sees_the_copy(pod):
    """B has the destination's old pages and attributes cached; A's copy
    returns; B's stat shows the new size at once, and its next open reads
    the copied bytes."""
    old = os.urandom(100_000)
    src = os.urandom(500_000)
    write_file(pod.a / "src", src)
    write_file(pod.a / "dst", old)
    assert read_file(pod.b / "dst") == old  # in B's page cache
    assert os.stat(pod.b / "dst").st_size == len(old)
    assert copy_all(pod.a / "src", pod.a / "dst", len(src), 0, 50_000) == len(src)
    want = old[:50_000] + src
    assert os.stat(pod.b / "dst").st_size == len(want)
    assert read_file(pod.b / "dst") == want
    assert read_file(pod.export / "dst") == want


@pytest.mark.plaintext
def test_raw_copy_range_is_checked(env, daemon, m):
    """COPY_RANGE as a hostile client sends it: into a fid opened
    read-only, at offsets past 2^63, overlapping within one file, and as
    a squashed identity into a file only root may write. Each gets its
    error, nothing changes, and the daemon serves the mount after."""
    key = P.load_key(env.key)
    write_file(env.export / "s", b"0123456789")
    write_file(env.export / "d", b"abcdefghij")
    os.chmod(env.export / "d", 0o644)
    with P.connect(daemon.host, daemon.port, key) as c:
        hs = c.lookup(c.root, b"s")[0]
        hd = c.lookup(c.root, b"d")[0]
        fs = c.open(hs, os.O_RDONLY)
        fd_ro = c.open(hd, os.O_RDONLY, fid=fs + 1)
        cases = [
            ("into a read-only fid", dict(dst_fid=fd_ro), errno.EBADF),
            ("at 2^63", dict(dst_fid=fs + 2, dst_flags=os.O_WRONLY, dst_off=1 << 63),
             errno.EINVAL),
            ("overlapping, one file", dict(dst=hs, dst_fid=fs, src_off=0, dst_off=2),
             None),  # EBADF or EINVAL: fs is read-only, and the ranges overlap
            ("squashed into root's 0644 file",
             dict(dst_fid=fs + 3, dst_flags=os.O_WRONLY, cr=P.creds(65534, 65534)),
             errno.EACCES),
        ]
        for what, kw, want in cases:
            args = dict(src=hs, src_fid=fs, src_off=0, dst=hd, dst_fid=0, dst_off=0, length=10)
            args.update(kw)
            with pytest.raises(P.PfsError) as ei:
                c.copy_range(**args)
            if want is not None:
                assert ei.value.status == want, what
        # And a copy that may: through a fid opened for writing by handle.
        assert c.copy_range(hs, fs, 2, hd, fs + 4, 0, 100, dst_flags=os.O_WRONLY) == 8
    assert read_file(env.export / "d") == b"23456789ij"
    assert read_file(m / "d") == b"23456789ij"


def test_files_made_under_a_directory_delegation(dpod):
    """With delegations, A makes a directory and in it a source (closed)
    and a second one still open, both answered on A and queued: copies of
    each into new files there are exact on A, on B and in the export."""
    d = dpod.a / "made"
    os.mkdir(d)
    data = os.urandom(70_000)
    write_file(d / "src", data)
    assert copy_all(d / "src", d / "dst", len(data)) == len(data)
    s = os.open(d / "src2", os.O_RDWR | os.O_CREAT, 0o644)
    o = os.open(d / "dst2", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(s, data[::-1])
        assert os.copy_file_range(s, o, len(data), 0, 0) == len(data)
    finally:
        os.close(s)
        os.close(o)
    for name, want in (("dst", data), ("dst2", data[::-1])):
        assert read_file(d / name) == want
        assert read_file(dpod.b / "made" / name) == want
        assert read_file(dpod.export / "made" / name) == want
