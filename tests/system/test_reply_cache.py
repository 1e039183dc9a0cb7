"""test_reply_cache.py: a change whose reply was lost runs once.

The mount reaches podfsd through a relay that can hold the replies and cut
the connection. Each test makes one change that is not idempotent (a
second run would fail or change more: mkdir, an exclusive create, unlink,
rename, link, an append, an exclusive setxattr...), holds its reply until
the export shows that podfsd made the change, then cuts the connection, so
that the reply is lost for certain. The client connects again and sends
the request again under the same session and request id, and podfsd
answers it from its reply cache (docs/durability.md, "Retries never run
twice"): the call returns what the first run returned, and the export
shows the change made once. The names the change needs are looked up
before the reply is held (the kernel caches them, negative ones too), so
that the change itself is the one request waiting. An OPEN and a lock
whose replies were lost leave one open file and one lock on the
coordinator.
"""

import fcntl
import os
import struct
import subprocess
import time
from contextlib import contextmanager

import pytest

from helpers import (EXPORT_AT_ONCE, PYTHON, RECONNECT, DelayRelay, Worker, podfsd_status,
                     read_file, relayed_mount, wait_for, write_file)
from syscalls import RENAME_EXCHANGE, renameat2


def _gone(p):
    return not os.path.lexists(p)


def _file(a, data=b"x", name="f"):
    """A file with data, committed: its release has nothing to commit,
    so that no commit's reply (held with the change's) holds the change
    up."""
    fd = os.open(a / name, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _file_with_xattr(a):
    _file(a)
    os.setxattr(a / "f", "user.k", b"v")


def _open_for_append(a):
    _file(a)
    return os.open(a / "f", os.O_WRONLY | os.O_APPEND)


def _append(a, fd):
    try:
        os.write(fd, b"y")  # (written behind)
    finally:
        os.close(fd)  # waits for the WRITE's reply


def _none(a):
    return None


def _export(e):
    """The export's names, and the contents of its regular files."""
    return {n: read_file(e / n) if os.path.isfile(e / n) and not os.path.islink(e / n) else None
            for n in sorted(os.listdir(e))}


# name: (setup on the mount, returning what the change takes; the change;
# made on the export?; the export as it should be after)
CHANGES = {
    "mkdir": (
        _none,
        lambda a, _: os.mkdir(a / "d"),
        lambda e: os.path.isdir(e / "d"),
        lambda e: os.path.isdir(e / "d")),
    "create-exclusive": (
        _none,
        lambda a, _: os.close(os.open(a / "f", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o640)),
        lambda e: os.path.exists(e / "f"),
        lambda e: os.stat(e / "f").st_mode & 0o777 == 0o640),
    "mkfifo": (
        _none,
        lambda a, _: os.mkfifo(a / "p", 0o600),
        lambda e: os.path.lexists(e / "p"),
        lambda e: os.path.lexists(e / "p")),
    "symlink": (
        _none,
        lambda a, _: os.symlink("target", a / "s"),
        lambda e: os.path.lexists(e / "s"),
        lambda e: os.readlink(e / "s") == "target"),
    "unlink": (
        _file,
        lambda a, _: os.unlink(a / "f"),
        lambda e: _gone(e / "f"),
        lambda e: _gone(e / "f")),
    "rmdir": (
        lambda a: os.mkdir(a / "d"),
        lambda a, _: os.rmdir(a / "d"),
        lambda e: _gone(e / "d"),
        lambda e: _gone(e / "d")),
    "rename": (
        lambda a: _file(a, b"moved"),
        lambda a, _: os.rename(a / "f", a / "g"),
        lambda e: _gone(e / "f"),
        lambda e: read_file(e / "g") == b"moved"),
    "rename-over": (
        lambda a: (_file(a, b"old", "g"), _file(a, b"new")),
        lambda a, _: os.rename(a / "f", a / "g"),
        lambda e: _gone(e / "f"),
        lambda e: read_file(e / "g") == b"new"),
    "rename-exchange": (
        lambda a: (_file(a, b"one"), _file(a, b"two", "g")),
        lambda a, _: renameat2(a / "f", a / "g", RENAME_EXCHANGE),
        lambda e: read_file(e / "f") == b"two",
        lambda e: read_file(e / "f") == b"two" and read_file(e / "g") == b"one"),
    "link": (
        _file,
        lambda a, _: os.link(a / "f", a / "h"),
        lambda e: os.path.exists(e / "h"),
        lambda e: os.stat(e / "f").st_nlink == 2),
    "append": (
        _open_for_append,
        _append,
        lambda e: os.stat(e / "f").st_size >= 2,
        lambda e: read_file(e / "f") == b"xy"),
    "open-truncate": (
        lambda a: _file(a, b"old"),
        lambda a, _: os.close(os.open(a / "f", os.O_WRONLY | os.O_TRUNC)),
        lambda e: os.stat(e / "f").st_size == 0,
        lambda e: read_file(e / "f") == b""),
    "create-truncate": (
        lambda a: _file(a, b"old"),
        lambda a, _: os.close(os.open(a / "f", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)),
        lambda e: os.stat(e / "f").st_size == 0,
        lambda e: read_file(e / "f") == b""),
    "setxattr-create": (
        _file,
        lambda a, _: os.setxattr(a / "f", "user.k", b"v", os.XATTR_CREATE),
        lambda e: "user.k" in os.listxattr(e / "f"),
        lambda e: os.getxattr(e / "f", "user.k") == b"v"),
    "removexattr": (
        _file_with_xattr,
        lambda a, _: os.removexattr(a / "f", "user.k"),
        lambda e: "user.k" not in os.listxattr(e / "f"),
        lambda e: "user.k" not in os.listxattr(e / "f")),
}

NAMES = ("d", "f", "g", "h", "p", "s")


@contextmanager
def _kept_in_the_kernels_cache(a, names=NAMES):
    """names looked up into the kernel's cache, found or not, and those
    found kept there (an O_PATH descriptor each, which podfs never hears
    of) while the relay holds the replies. Otherwise a drop_caches
    elsewhere on the machine (another test's, or fsx's -c) makes the
    kernel look a name up again for the change, and that LOOKUP waits at
    the relay: the change is never sent (seen with fsx beside)."""
    fds = []
    try:
        for n in names:
            if os.path.lexists(a / n):
                fds.append(os.open(a / n, os.O_PATH | os.O_NOFOLLOW))
        yield
    finally:
        for fd in fds:
            os.close(fd)


@EXPORT_AT_ONCE  # under a delegation the holder answers some of these itself
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_change_whose_reply_was_lost_runs_once(env, daemon, mount, change):
    setup, make, made, after = CHANGES[change]
    with relayed_mount(daemon, mount) as (relay, a):
        ctx = setup(a)
        with _kept_in_the_kernels_cache(a):
            relay.hold_down()
            w = Worker(make, a, ctx)
            wait_for(lambda: made(env.export), 10, what=f"podfsd to make the change ({change})")
            assert w.is_alive(), "the change returned without its reply"
            relay.cut()  # the reply is lost with the connection
            relay.release_down()
            w.join(30)  # no EEXIST, ENOENT or ENODATA from a second run
        assert after(env.export), \
            f"the export after {change} sent again, not as made once: {_export(env.export)}"
        assert "connection to" in a.proc.output(), "the mount did not see its connection drop"
        # The mount agrees with the export, and works on.
        write_file(a / "after", b"ok")
        assert read_file(env.export / "after") == b"ok"


@EXPORT_AT_ONCE
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_change_whose_reply_was_lost_with_podfsd_runs_once(env, daemon, mount, change):
    """The same, but podfsd is killed (-9) while the reply is held, once
    it has sent it, and the request goes again to the next instance: that
    one answers it from the replies the instance before wrote into the
    state directory (daemon/replylog_i.h), and does not run it again
    (before, a re-sent mkdir failed with EEXIST, an unlink with ENOENT,
    and an append landed twice)."""
    _lost_with_podfsd(env, daemon, mount, change)
    assert "answered with the reply of the instance before" in daemon.log()


def _lost_with_podfsd(env, daemon, mount, change, after_kill=lambda: None):
    """change is made, its reply held at the relay once sent, podfsd
    killed (-9) once the reply is kept in STATE_DIR/replies (the relay's
    first held bytes may be another frame's: once, in CI, the change's
    reply was not kept yet), after_kill() run, podfsd started again: the
    call sent again must return without an error, the export be as one
    run leaves it, and the mount work on."""
    setup, make, made, after = CHANGES[change]
    replies = daemon.state_dir / "replies"
    with relayed_mount(daemon, mount) as (relay, a):
        ctx = setup(a)
        with _kept_in_the_kernels_cache(a):
            kept = _kept_replies(replies)
            relay.hold_down()
            w = Worker(make, a, ctx)
            wait_for(lambda: made(env.export), 10, what=f"podfsd to make the change ({change})")
            wait_for(lambda: relay.held and _kept_replies(replies) > kept, 10,
                     what=f"podfsd to send the reply of the change ({change})")
            assert w.is_alive(), "the change returned without its reply"
            daemon.kill9()
            relay.cut()
            after_kill()
            relay.release_down()
            daemon.start()
            w.join(30)  # no EEXIST, ENOENT or ENODATA from a second run
        assert after(env.export), \
            f"the export after {change} sent again, not as made once: {_export(env.export)}"
        write_file(a / "after", b"ok")
        assert read_file(env.export / "after") == b"ok"


def test_change_lost_with_podfsd_outlives_another_hosts_changes(env, daemon, mount):
    """B's mkdir is made and its reply held at B's relay; then another
    host, A, makes changes whose records outnumber the 4,096 slots of
    STATE_DIR/replies (a create or an unlink writes two: begun, and its
    reply) before podfsd is killed (-9). B's mkdir sent again to the next
    instance is still answered from its record, not made again: the
    file's slots are shared between hosts (daemon/rlslots_i.h). Before,
    they were a ring, and A's changes pushed B's record out (the mkdir
    sent again failed with EEXIST)."""
    a = mount(path=env.root / "mnt-a")  # from 127.0.0.1
    flood = a / "flood"
    os.mkdir(flood)
    with relayed_mount(daemon, mount, source=("127.0.0.2", 0)) as (relay, b):
        with _kept_in_the_kernels_cache(b):
            relay.hold_down()
            w = Worker(os.mkdir, b / "d")
            wait_for(lambda: os.path.isdir(env.export / "d") and relay.held, 10,
                     what="podfsd to make B's mkdir and send its reply")
            # 1,100 creates and 1,100 unlinks: 4,400 records.
            for i in range(1100):
                os.close(os.open(flood / str(i), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            for i in range(1100):
                os.unlink(flood / str(i))
            assert w.is_alive(), "B's mkdir returned without its reply"
            keys, _ = podfsd_status(daemon)
            assert keys["replies_file_free"] == "0", keys  # the file is full: shared
            assert keys["replies_file_not_written"] == "0", keys
            daemon.kill9()
            relay.cut()
            relay.release_down()
            daemon.start()
            w.join(30)  # no EEXIST from a second run
        assert os.path.isdir(env.export / "d")
        assert os.listdir(env.export / "flood") == []
        write_file(b / "after", b"ok")
        assert read_file(env.export / "after") == b"ok"
    assert "answered with the reply of the instance before" in daemon.log()


REPLYLOG_SLOT = 1024
REPLYLOG_MAGIC = 0x4c524650  # "PFRL"
OP_WRITE = 24
OPS = {"mkdir": 15, "unlink": 17, "rmdir": 18, "rename": 19, "rename-over": 19,
       "rename-exchange": 19,
       "create-exclusive": 22, "mkfifo": 14, "symlink": 16, "link": 20, "setxattr-create": 31,
       "removexattr": 34}


def _reply_slots(data, opcode=None):
    """The offsets of the slots of STATE_DIR/replies (its bytes, data)
    that hold a reply to opcode (any: None) (daemon/replylog.c: magic,
    crc, length, op, kind...)."""
    for at in range(0, len(data), REPLYLOG_SLOT):
        magic, _, _, op, kind = struct.unpack_from("<IIIHH", data, at)
        if magic == REPLYLOG_MAGIC and opcode in (None, op) and kind == 0:
            yield at


def _kept_replies(path):
    """How many replies STATE_DIR/replies keeps (0 before the file is
    made)."""
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in _reply_slots(f.read()))
    except FileNotFoundError:
        return 0


def _drop_write_replies(path, opcode=OP_WRITE):
    """Empties the slots of STATE_DIR/replies that hold a reply to opcode,
    as if podfsd had been killed before it wrote them; its records of the
    appends it was about to write (kind 1) and of the changes it began
    (kind 3) stay. Returns how many it emptied."""
    n = 0
    with open(path, "r+b") as f:
        data = f.read()
        for at in _reply_slots(data, opcode):
            f.seek(at)
            f.write(bytes(min(REPLYLOG_SLOT, len(data) - at)))
            n += 1
    return n


@EXPORT_AT_ONCE
@pytest.mark.parametrize("landed", ["all", "none", "part"])
def test_append_whose_podfsd_died_before_its_reply_was_kept_lands_once(env, daemon, mount,
                                                                        landed):
    """podfsd killed (-9) after an append but before it kept the append's
    reply: the next instance finds the record podfsd wrote before the data
    (where the file ended, the length and checksum of the bytes) and looks
    at the file before it serves anyone. The bytes are there: the append
    sent again is answered without being written again. The file ends
    where the append began (killed before the data): it appends. The file
    ends inside the append (the kill cut the write): the file is cut back
    and it appends. Each way the file holds the bytes once. (Before, the
    appends sent again landed a second time: b"xyyyyyyyy".) The states are
    made by emptying the reply's record, and cutting the file, after the
    kill."""
    with relayed_mount(daemon, mount) as (relay, a):
        fd = _open_for_append(a)
        relay.hold_down()
        w = Worker(lambda: _append4(fd))
        wait_for(lambda: read_file(env.export / "f") == b"xyyyy" and relay.held, 10,
                 what="podfsd to append and send the reply")
        assert w.is_alive(), "the append returned without its reply"
        daemon.kill9()
        relay.cut()
        assert _drop_write_replies(daemon.state_dir / "replies") == 1
        if landed != "all":
            os.truncate(env.export / "f", 1 if landed == "none" else 3)
        relay.release_down()
        daemon.start()
        w.join(30)
        assert read_file(env.export / "f") == b"xyyyy"
        log = daemon.log()
        said = {"all": "1 written", "none": "1 not written", "part": "1 cut short"}[landed]
        assert said in log, log[-3000:]
        if landed == "all":
            assert "its append found where the instance before wrote it" in log
        write_file(a / "after", b"ok")
        assert read_file(env.export / "after") == b"ok"


@EXPORT_AT_ONCE
@pytest.mark.parametrize("change", sorted(OPS))
def test_change_whose_podfsd_died_before_its_reply_was_kept_is_found_made(env, daemon, mount,
                                                                          change):
    """podfsd killed (-9) after a change but before it kept the change's
    reply: the next instance finds the record podfsd wrote before it made
    the change (daemon/replylog_i.h, REPLYLOG_BEGUN), runs the change sent
    again, and takes the error of a change already made (EEXIST for a
    mkdir, mknod, symlink, link, exclusive create or exclusive setxattr,
    ENOENT for an unlink, rmdir or rename, ENODATA for a removexattr) for
    the first run's success; an exchange (RENAME_EXCHANGE), which a
    second run swaps back, is found made by what is at its old name,
    which its record names. Before, the call failed with that error
    although the change was made, and the exchange was undone. The state
    is made by emptying the reply's record after the kill."""
    def drop():
        assert _drop_write_replies(daemon.state_dir / "replies", OPS[change]) == 1

    _lost_with_podfsd(env, daemon, mount, change, drop)
    assert "begun by the instance before" in daemon.log()


def _append4(fd):
    try:
        os.write(fd, b"yyyy")
    finally:
        os.close(fd)


def _open_fds(daemon, path):
    """How many descriptors podfsd holds open on path for reading or
    writing (not its O_PATH handles)."""
    d = f"/proc/{daemon.proc.pid}"
    n = 0
    for fd in os.listdir(f"{d}/fd"):
        try:
            if os.readlink(f"{d}/fd/{fd}") != str(path):
                continue
            with open(f"{d}/fdinfo/{fd}") as f:
                flags = int(next(x for x in f if x.startswith("flags:")).split()[1], 8)
        except (OSError, StopIteration):
            continue
        n += not flags & os.O_PATH
    return n


def test_open_whose_reply_was_lost_opens_the_file_once(env, daemon, mount):
    """An OPEN sent again after its reply was lost does not open the file
    a second time on the coordinator (a descriptor nobody would close), and
    the file's last close closes the one it opened."""
    with relayed_mount(daemon, mount) as (relay, a):
        _file(a)
        wait_for(lambda: _open_fds(daemon, env.export / "f") == 0, 10,
                 what="the release of f's first open")  # sent after its close returned
        with _kept_in_the_kernels_cache(a, ["f"]):
            relay.hold_down()
            w = Worker(lambda: os.open(a / "f", os.O_RDWR))
            wait_for(lambda: _open_fds(daemon, env.export / "f"), 10, what="podfsd to open f")
            relay.cut()
            relay.release_down()
            fd = w.join(30)
        try:
            os.pwrite(fd, b"y", 1)
            os.fsync(fd)
            assert read_file(env.export / "f") == b"xy"
            assert _open_fds(daemon, env.export / "f") == 1
        finally:
            os.close(fd)
        wait_for(lambda: _open_fds(daemon, env.export / "f") == 0, 10,
                 what="podfsd to close f after its last close here")


@EXPORT_AT_ONCE
def test_change_answered_by_the_instance_before_waits_for_the_other_hosts(env, mount):
    """A change answered with the reply the instance before wrote waits,
    as a change made after a restart does (test_restart), for the other
    hosts of the instance before to revalidate: that instance may have
    died before it told them. B's unlink is answered so while A's
    reconnect is held at its relay; it returns once A is let through."""
    d = env.start_daemon(extra=["--revalidate-wait", "30"])
    relay_a = DelayRelay((d.host, d.port), 0)
    a = None
    try:
        a = mount(relay_a.via(d), path=env.root / "mnt-a")
        with relayed_mount(d, mount) as (relay_b, b):
            _file(b)
            assert os.path.exists(a / "f")
            with _kept_in_the_kernels_cache(b, ["f"]):
                relay_b.hold_down()
                w = Worker(os.unlink, b / "f")
                wait_for(lambda: _gone(env.export / "f") and relay_b.held, 10,
                         what="podfsd to unlink f and send the reply")
                relay_a.hold_up()  # A's reconnect waits
                d.kill9()
                relay_b.cut()
                relay_b.release_down()
                d.start()
                wait_for(lambda: "answered with the reply of the instance before" in d.log(),
                         RECONNECT, what="B's unlink sent again and answered from the replies")
                time.sleep(1.0)
                assert w.is_alive(), "B's unlink returned while A, which caches f, was away"
                relay_a.release_up()
                w.join(30)
            assert not os.path.exists(a / "f")
            # Logged by the thread that ends the hold, which a clean-clone
            # run once read before it was there: waited for, bounded.
            wait_for(lambda: "changes wait no more (every client revalidated): 2 of 2" in d.log(),
                     5, what="podfsd to log the end of the hold")
    finally:
        relay_a.release_up()
        if a is not None:
            assert a.umount() is None  # before the relay goes
        relay_a.close()


@EXPORT_AT_ONCE
@pytest.mark.parametrize("lost_with", ["connection", "podfsd"])
def test_truncating_open_whose_reply_was_lost_truncates_once(env, daemon, mount, lost_with):
    """An open with O_TRUNC sent again after its reply was lost (with the
    connection, or with podfsd killed) does not truncate the file again:
    what was written between the first run and the resend stays. Before,
    an OPEN's reply was not kept and the resend truncated once more."""
    with relayed_mount(daemon, mount) as (relay, a):
        _file(a, b"old")
        with _kept_in_the_kernels_cache(a, ["f"]):
            relay.hold_down()
            w = Worker(lambda: os.open(a / "f", os.O_WRONLY | os.O_TRUNC))
            wait_for(lambda: os.stat(env.export / "f").st_size == 0 and relay.held, 10,
                     what="podfsd to truncate f and send the reply")
            assert w.is_alive(), "the open returned without its reply"
            with open(env.export / "f", "wb") as f:  # beside podfs, meanwhile
                f.write(b"written between")
            if lost_with == "podfsd":
                daemon.kill9()
            relay.cut()
            relay.release_down()
            if lost_with == "podfsd":
                daemon.start()
            fd = w.join(30)
        os.close(fd)
        assert read_file(env.export / "f") == b"written between"


_HOLDER = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
print("opened", flush=True)
sys.stdin.readline()
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("locked", flush=True)
sys.stdin.readline()
fcntl.lockf(fd, fcntl.LOCK_UN)
print("unlocked", flush=True)
sys.stdin.readline()
"""


def _lock_seen(path):
    """The type of the lock another host holds on path's first byte, as
    F_GETLK tells (F_UNLCK: none)."""
    fd = os.open(path, os.O_RDWR)
    try:
        fl = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)
        return struct.unpack("hhqqi", fcntl.fcntl(fd, fcntl.F_GETLK, fl))[0]
    finally:
        os.close(fd)


def test_lock_whose_reply_was_lost_is_held_once(env, daemon, mount):
    """A lock taken (F_SETLK) whose reply was lost is granted when sent
    again, held once: another host sees it, and one unlock frees it."""
    c = mount()
    holder = None
    with relayed_mount(daemon, mount, path=env.root / "mnt-a") as (relay, a):
        try:
            _file(a)
            assert _lock_seen(c / "f") == fcntl.F_UNLCK
            holder = subprocess.Popen([PYTHON, "-c", _HOLDER, str(a / "f")],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert Worker(holder.stdout.readline).join(30) == "opened\n"
            relay.hold_down()
            holder.stdin.write("\n")  # lock
            holder.stdin.flush()
            wait_for(lambda: _lock_seen(c / "f") == fcntl.F_WRLCK, 10,
                     what="podfsd to grant A's lock")
            assert holder.poll() is None, "the lock returned without its reply"
            relay.cut()
            relay.release_down()
            assert Worker(holder.stdout.readline).join(30) == "locked\n"
            assert _lock_seen(c / "f") == fcntl.F_WRLCK
            holder.stdin.write("\n")
            holder.stdin.flush()
            assert Worker(holder.stdout.readline).join(30) == "unlocked\n"
            wait_for(lambda: _lock_seen(c / "f") == fcntl.F_UNLCK, 10,
                     what="one unlock to free the lock")
        finally:
            if holder is not None:
                holder.kill()
                holder.wait(10)
