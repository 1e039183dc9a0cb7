"""test_disk_errors.py: the coordinator's disk says no.

close() and fsync() report the errors of a file's writes on the
coordinator's disk: EIO (the export's filesystem shut down, as after a
failed disk) and EDQUOT (a btrfs quota group full). ENOSPC is in
test_durability.py. And what podfsd says at its start of an export on
ext4 without a journal.

Each export is a small filesystem on a loop device of the test's own,
detached at its end.
"""

import errno
import fcntl
import os
import re
import shutil
import subprocess
from contextlib import contextmanager

import pytest

from helpers import MiB, Worker, read_file, run, wait_for

# EXT4_IOC_SHUTDOWN (= XFS_IOC_GOINGDOWN), _IOR('X', 125, __u32); flag
# EXT4_GOING_FLAGS_NOLOGFLUSH: as a disk that stopped answering would.
FS_IOC_SHUTDOWN = 0x8004587D
SHUTDOWN_NOLOGFLUSH = 2


def need(*tools):
    for t in tools:
        if not shutil.which(t):
            pytest.skip(f"{t} is not installed (scripts/setup --deps-only installs it)")


def stop_podfs_and_podfsd(env):
    """Unmounts every mount and stops every daemon of env now, so that a
    filesystem under them can go. Idempotent: env's teardown does the
    same again and reports the same exit statuses."""
    for m in reversed(env.mounts):
        if m.umount():
            m.force_down()
    for d in env.daemons:
        if d.proc is not None:
            d.proc.stop()


@contextmanager
def loop_fs(env, name, size_mib, mkfs):
    """A filesystem made by `mkfs` (an argv, the image appended) on a
    sparse image of size_mib on a loop device, mounted at env.root/name;
    yields the mount point. At the end: podfs and podfsd stopped (they
    hold files there), unmounted, loop device detached."""
    img = env.root / f"{name}.img"
    path = env.root / name
    path.mkdir()
    with open(img, "wb") as f:
        f.truncate(size_mib * MiB)
    run(mkfs + [img], timeout=120)
    dev = run(["losetup", "--find", "--show", img], timeout=30).stdout.strip()
    try:
        run(["mount", dev, path], timeout=60)
        try:
            yield path
        finally:
            stop_podfs_and_podfsd(env)
            r = run(["umount", path], timeout=60, check=False)
            if r.returncode != 0:
                run(["umount", "-l", path], timeout=60, check=False)
    finally:
        run(["losetup", "-d", dev], timeout=30, check=False)


@contextmanager
def tmpfs(env, name, size):
    """A tmpfs of size bytes at env.root/name, for a full disk; unmounted
    at the end, after podfs and podfsd stopped."""
    path = env.root / name
    path.mkdir()
    run(["mount", "-t", "tmpfs", "-o", f"size={size}", "podfs-test", path], timeout=30)
    try:
        yield path
    finally:
        stop_podfs_and_podfsd(env)
        run(["umount", "-l", path], timeout=60, check=False)


def export_and_mount(env, path):
    d = env.start_daemon(export=path, tag="podfsd-loop")
    return d, env.mount(d, path=env.root / "mnt-loop", tag="podfs-loop")


def shut_down(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, FS_IOC_SHUTDOWN, SHUTDOWN_NOLOGFLUSH.to_bytes(4, "little"))
    finally:
        os.close(fd)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("by", ["close", "fsync"])
def test_eio_of_the_export_reported(env, by):
    """The export's filesystem fails (shut down: every write is EIO) under
    an open file: write() returns at once (write-behind), and the close()
    or fsync() that follows reports EIO, as the writer must learn that
    its data is not there."""
    need("mkfs.ext4")
    with loop_fs(env, "ext4", 64, ["mkfs.ext4", "-q", "-F"]) as path:
        d, mm = export_and_mount(env, path)
        fd = os.open(mm / "f", os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            os.write(fd, b"x" * 4096)
            os.fsync(fd)
            shut_down(path)
            assert os.write(fd, os.urandom(MiB)) == MiB  # queued, not sent yet
            if by == "fsync":
                with pytest.raises(OSError) as e:
                    os.fsync(fd)
                assert e.value.errno == errno.EIO, e.value
        finally:
            if by == "close":
                with pytest.raises(OSError) as e:
                    os.close(fd)
                assert e.value.errno == errno.EIO, e.value
            else:
                try:
                    os.close(fd)
                except OSError:
                    pass  # fsync reported (and forgot) the error


@pytest.mark.timeout(120)
def test_edquot_reported_by_close(env):
    """A write past the export's quota (a btrfs quota group; quotas apply
    to root there too) fails on the coordinator with EDQUOT, and the
    close() after it reports EDQUOT."""
    need("mkfs.btrfs", "btrfs")
    with loop_fs(env, "btrfs", 256, ["mkfs.btrfs", "-q", "-f"]) as path:
        run(["btrfs", "quota", "enable", path], timeout=60)
        run(["btrfs", "qgroup", "limit", "8M", path], timeout=60)
        (path / "filler").write_bytes(os.urandom(7 * MiB))
        os.sync()
        d, mm = export_and_mount(env, path)
        fd = os.open(mm / "f", os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            assert os.write(fd, os.urandom(2 * MiB)) == 2 * MiB  # queued
        finally:
            with pytest.raises(OSError) as e:
                os.close(fd)
        assert e.value.errno == errno.EDQUOT, e.value
        # With room in the quota, writes work again.
        run(["btrfs", "qgroup", "limit", "none", path], timeout=60)
        with open(mm / "g", "wb") as f:
            f.write(b"fits")
        assert read_file(path / "g") == b"fits"


@pytest.mark.timeout(120)
def test_file_size_limit_of_the_daemon_is_efbig(env):
    """podfsd under a file-size limit (LimitFSIZE=, ulimit -f): a write or
    truncate past it fails with EFBIG for that client; the daemon lives.
    (Before, SIGXFSZ ended it.)"""
    d = env.start_daemon()
    run(["prlimit", f"--pid={d.proc.pid}", f"--fsize={MiB}"], timeout=30)
    mm = env.mount(d)
    fd = os.open(mm / "f", os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.pwrite(fd, b"x" * 4096, 2 * MiB)  # queued (write-behind)
        with pytest.raises(OSError) as e:
            os.fsync(fd)
        assert e.value.errno == errno.EFBIG, e.value
    finally:
        os.close(fd)
    with pytest.raises(OSError) as e:
        os.truncate(mm / "f", 2 * MiB)
    assert e.value.errno == errno.EFBIG, e.value
    assert d.alive()
    (mm / "g").write_bytes(b"still here")
    assert (d.export / "g").read_bytes() == b"still here"


def test_an_append_that_fails_leaves_the_next_appends_working(env):
    """An append that fails (EFBIG past podfsd's file-size limit) lets the
    next appends to that file through: podfsd takes a lock of the inode's
    for each append (daemon/replylog_i.h), and the failed one gave it
    back. (Before, a failed append kept it, and the next append to any
    file of its lock waited for ever; the handlers' fuzzer found it.)"""
    d = env.start_daemon()
    run(["prlimit", f"--pid={d.proc.pid}", f"--fsize={MiB}"], timeout=30)
    mm = env.mount(d)
    fd = os.open(mm / "log", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
    try:
        os.write(fd, b"x" * MiB)
        os.fsync(fd)
        os.write(fd, b"y" * 4096)  # past the limit
        with pytest.raises(OSError) as e:
            os.fsync(fd)
        assert e.value.errno == errno.EFBIG, e.value
    finally:
        os.close(fd)
    os.truncate(d.export / "log", 0)

    def append_again():
        with open(mm / "log", "ab") as f:
            f.write(b"again")
        return True

    w = Worker(append_again)
    assert w.join(20) is True, "the append after a failed one never returned"
    assert (d.export / "log").read_bytes() == b"again"


CLOSE_IN_A_CHILD = """
import errno, os, sys
try:
    os.close(int(sys.argv[1]))
    print("ok")
except OSError as e:
    print(errno.errorcode[e.errno])
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("meanwhile", ["child-closes-the-fd", "reader-opens-and-closes"])
@pytest.mark.parametrize("by", ["close", "fsync"])
def test_write_error_reported_to_the_writer(env, meanwhile, by):
    """A write that fails on the coordinator (ENOSPC) after write()
    returned is reported to the writer's fsync or close, even when another
    close of the file came first: a child closing its copy of the
    descriptor (as every program started with subprocess does), or another
    open of the file, read-only. (Before, that other close took the error:
    the writer's fsync and close returned 0 with most of its data not
    written.)"""
    from helpers import PYTHON
    with tmpfs(env, "small", 1 << 20) as path:
        d, mm = export_and_mount(env, path)
        (path / "filler").write_bytes(b"z" * ((1 << 20) - (64 << 10)))
        fd = os.open(mm / "data", os.O_CREAT | os.O_WRONLY, 0o644)
        assert os.write(fd, b"d" * (256 << 10)) == 256 << 10  # queued
        if meanwhile == "child-closes-the-fd":
            os.set_inheritable(fd, True)
            r = subprocess.run([PYTHON, "-c", CLOSE_IN_A_CHILD, str(fd)], close_fds=False,
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
        else:
            os.close(os.open(mm / "data", os.O_RDONLY))
        errs = []
        for call in ((os.fsync, os.close) if by == "fsync" else (os.close,)):
            try:
                call(fd)
                errs.append(0)
            except OSError as e:
                errs.append(e.errno)
        # Reported once: by the fsync, or else by the close.
        assert errs == [errno.ENOSPC] + [0] * (len(errs) - 1), errs


@pytest.mark.timeout(120)
def test_a_write_error_is_reported_once_and_writing_goes_on(env):
    """A write that failed on the coordinator after write() returned
    (ENOSPC) fails the writer's next write(), once, as NFS does; once
    space is freed, the writes after it go on and land, and the fsync and
    close that follow report nothing more (it was reported). (Before,
    every write of the file failed until an fsync or close took the
    error, and those reported it again. Then the writes still on their
    way when the error was reported failed after it, and the fsync
    reported them again: the writes here follow each other without a
    pause, so that several are on their way.)"""
    with tmpfs(env, "small", 1 << 20) as path:
        d, mm = export_and_mount(env, path)
        (path / "filler").write_bytes(b"z" * ((1 << 20) - (64 << 10)))
        fd = os.open(mm / "data", os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            failed_at = None
            for i in range(200):  # the failure comes back while we write on
                try:
                    os.pwrite(fd, b"d" * (64 << 10), (i % 4) * (64 << 10))
                except OSError as e:
                    assert e.errno == errno.ENOSPC, e
                    failed_at = i
                    break
            assert failed_at is not None, "no write reported the failure"
            os.unlink(path / "filler")
            assert os.pwrite(fd, b"after", 0) == 5
            os.fsync(fd)
            assert os.pwrite(fd, b"again", 5) == 5
            os.fsync(fd)
        finally:
            os.close(fd)
        assert (path / "data").read_bytes()[:10] == b"afteragain"
        assert d.alive()


@pytest.mark.timeout(120)
def test_an_export_on_ext4_without_a_journal_is_named_at_the_start(env):
    """podfsd says at its start that its export is on ext4 without a
    journal, where creating files slows down after many were removed
    (ext4 passes over the inodes freed in the last minutes), naming the
    device; of an ext4 with a journal it says nothing."""
    need("mkfs.ext4")
    for name, opts, said in (("nojournal", ["-O", "^has_journal"], True),
                             ("journal", [], False)):
        with loop_fs(env, name, 32, ["mkfs.ext4", "-q", "-F"] + opts) as path:
            d = env.start_daemon(export=path, tag=f"podfsd-{name}")
            wait_for(lambda: "limits:" in d.log(), 10, what="podfsd's start")  # said after
            m = re.search(r"notice: (\S+) is on ext4 without a journal \((loop\d+)\)", d.log())
            assert bool(m) == said, d.log()
            if said:
                assert m.group(1) == str(path)
