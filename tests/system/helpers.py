"""helpers.py: small utilities shared by the podfs system tests and their
harness.

Where the binaries are, bounded waiting, running a command (as an
unprivileged user too), reading and writing files, what a mount says about
itself (its stats xattr, the requests it sent), work in a thread that
reports its failure, a relay that delays pushes, and one durability
scenario two topics share.
System calls Python lacks are in syscalls.py.
"""

import contextlib
import os
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def build_dir():
    b = Path(os.environ.get("PODFS_BUILD", "build"))
    return b if b.is_absolute() else REPO / b


BUILD = build_dir()
PODFSD = Path(os.environ.get("PODFSD_BIN", BUILD / "daemon" / "podfsd"))
PODFS = Path(os.environ.get("PODFS_BIN", BUILD / "fs" / "podfs"))
# One simulated host's program start or checkpoint read (tests/tools).
REPLAY = BUILD / "tests" / "tools" / "podfs-replay"


def _links(binary, lib):
    try:
        with open(binary, "rb") as f:
            return lib in f.read()
    except OSError:
        return False


# The programs under test run under ThreadSanitizer (scripts/test's TSan
# stage): each thread runs several times slower, so a bound on how long a
# moment of lag may last gets that much more room.
UNDER_TSAN = _links(PODFSD, b"libtsan.so")

PYTHON = "/usr/bin/python3"

# A test that looks at the export (or compares a host with it) right after
# an operation returned on a mount: under a directory delegation that
# operation may still be queued on the host, as docs/delegation.md
# ("Limits") says, so scripts/test's "delegate" configuration leaves
# such a test out (conftest.py).
EXPORT_AT_ONCE = pytest.mark.delegation_limit(
    "a program reading the export sees what a holder answered only once its queue "
    "reached the coordinator")

MiB = 1 << 20

# An unprivileged identity for permission tests. No passwd entry is needed:
# setpriv switches to raw numeric ids.
TEST_UID = 1500
TEST_GID = 1500
OTHER_UID = 1501
OTHER_GID = 1501
SUPP_GID = 1600


def scan_with(path, at, action):
    """The names os.scandir gives of directory path, with action() called
    once the at-th (from 0) has come: in the middle of the reading, the
    names after it coming from later getdents calls."""
    seen = []
    with os.scandir(path) as it:
        for k, e in enumerate(it):
            seen.append(e.name)
            if k == at:
                action()
    return seen


def wait_for(pred, timeout=5.0, interval=0.02, what="condition", max_interval=0.25):
    """Polls pred() until it returns a truthy value or timeout passes,
    every interval seconds, growing to max_interval. Exceptions from pred
    count as "not yet". Returns the value; raises AssertionError (with the
    last exception, if any) on timeout."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = pred()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - polling tolerates errors
            last = e
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}"
                                 + (f" (last error: {last!r})" if last else ""))
        time.sleep(interval)
        interval = min(interval * 1.5, max_interval)


def run(argv, timeout=60, check=True, **kw):
    """subprocess.run with a bound and captured text output."""
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    kw.setdefault("stdin", subprocess.DEVNULL)
    r = subprocess.run([str(a) for a in argv], timeout=timeout, text=True, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{argv} exited {r.returncode}\nstdout:\n{r.stdout}\n"
                             f"stderr:\n{r.stderr}")
    return r


def fsync_dir(path):
    """fsync(2) of directory path."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def podfs_stats(mnt):
    """A mount's counters: the user.podfs.stats xattr of its root, as
    {name: int} (byte counters, req_OP request counts, pcache_*...)."""
    text = os.getxattr(mnt.path, "user.podfs.stats").decode()
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if v.lstrip("-").isdigit():  # not "server HOST:PORT" nor lat_OP's four figures
            out[k] = int(v)
    return out


def private_mounts_argv(keep, argv):
    """argv in a mount namespace of its own (private propagation) that
    first lets go of the FUSE mounts it copied from ours, but those under
    keep (the test's directory): another test's mount, copied into a
    namespace that outlives it, would stay alive after that test's
    unmount, and its podfs would never exit (tests run side by side:
    scripts/test)."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            DETACH_FOREIGN_FUSE + '; exec "$@"', "sh", str(keep)] + [str(a) for a in argv]


# Shell, $1 the directory to keep: a lazy unmount of each FUSE mount
# (fuse, fuse.*, not fusectl) outside it.
DETACH_FOREIGN_FUSE = (
    "awk -v keep=\"$1/\" '($3 == \"fuse\" || $3 ~ /^fuse[.]/) && index($2, keep) != 1 "
    "{ print $2 }' /proc/self/mounts | while read -r m; do umount -l \"$m\" || true; done; shift")


def forgotten(mnt):
    """How many inodes the kernel forgot on mount mnt (memory reclaim, a
    drop_caches elsewhere on the machine): counted as the kernel's FORGET
    comes. The FORGET requests to the daemon do not tell: they go in
    batches up to 100 ms later, and not at all for an inode the kernel
    looked up again meanwhile."""
    return podfs_stats(mnt)["forgotten"]


def evict_dentries():
    """Makes the kernel forget unused dentries and inodes (drop_caches,
    as memory reclaim would); twice, as a directory goes only once its
    children went. Then 0.3 s, for the FORGETs the mounts send in
    batches (up to 100 ms later) to reach their daemons."""
    for _ in range(2):
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2")
        time.sleep(0.3)


def podfsd_status(daemon, timeout=30):
    """`podfsd status --raw` of a daemon we started (its control socket):
    ({key: value} of the scalar lines, [client lines as {key: value}])."""
    assert daemon.control, "the daemon has no control socket of its own"
    r = run([PODFSD, "status", "--raw", "--control-socket", daemon.control], timeout=timeout)
    keys, clients = {}, []
    for line in r.stdout.splitlines():
        k, _, v = line.partition(" ")
        if k == "client":
            clients.append(dict(w.split("=", 1) for w in v.split(" ")))
        else:
            keys.setdefault(k, v)
    assert r.stdout.endswith("end\n"), r.stdout
    return keys, clients


# podfsd's warning when a client falls behind (daemon/push.c, fall_behind).
FELL_BEHIND = r"did not acknowledge an invalidation within \d+ ms and sends nothing"


def no_laggard(log, within_ms=None):
    """Checks podfsd's log text: no client was cut off for not
    acknowledging an invalidation, and each one that fell behind caught
    up within within_ms (default 500, and 1,500 under ThreadSanitizer,
    where one run caught up after 524 ms; either stays under the 2 s a
    change waits for a client that does not acknowledge). A host short of
    CPU (this machine runs many tests at once) can miss its 30 ms
    deadline like a stopped one and fall behind for a moment; a client
    whose acknowledgements stall (a lock wait that held them up, a
    deadlock) stays behind, or is cut off. Returns how many times a
    client fell behind."""
    import re
    if within_ms is None:
        within_ms = 1500 if UNDER_TSAN else 500
    assert "though it sends requests" not in log, "a client was cut off"
    behind = {}
    episodes = 0
    for line in log.splitlines():
        m = re.search(r"conn (\d+): .*" + FELL_BEHIND, line)
        if m:
            behind[m.group(1)] = line
            episodes += 1
            continue
        m = re.search(r"conn (\d+): .*caught up with its invalidations after (\d+) ms", line)
        if m and m.group(1) in behind:
            assert int(m.group(2)) <= within_ms, line
            del behind[m.group(1)]
    assert not behind, f"never caught up: {list(behind.values())}"
    return episodes


def fell_behind(log, ip, since):
    """Whether podfsd's log text says that the client at address ip fell
    behind (did not acknowledge an invalidation within its deadline and
    sent nothing: docs/coherence.md, "Late and stalled clients") at wall
    time since (time.time()) or later. The log's times are UTC with
    milliseconds, from the same clock."""
    import datetime
    import re
    pat = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z podfsd: warning: conn \d+: "
                     + re.escape(ip) + r":\d+ .*" + FELL_BEHIND)
    for line in log.splitlines():
        m = pat.search(line)
        if m:
            t = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f")
            if t.replace(tzinfo=datetime.timezone.utc).timestamp() >= since - 0.002:
                return True
    return False


def seen_after_catching_up(log, ip, since, got, want, view, timeout=10):
    """The documented exception to strictness (docs/coherence.md, "Late
    and stalled clients"): a host showed got where want was due. If
    podfsd's log says the client at address ip fell behind at wall time
    since or later, it may show the old state until it has caught up:
    view() is asked again, for up to timeout s, until it shows want.
    Returns (what the host showed last, whether it had fallen behind)."""
    if got == want or not fell_behind(log, ip, since):
        return got, False
    end = time.monotonic() + timeout
    while got != want and time.monotonic() < end:
        time.sleep(0.02)
        got = view()
    return got, True


def requests_sent(m):
    """The requests mount m has sent so far, by opcode ({"OPEN": 3,
    ...}): the req_OP counters of its stats, each request counted once
    when it is first sent (not again when re-sent after a reconnect)."""
    return {k[4:]: v for k, v in podfs_stats(m).items() if k.startswith("req_")}


def kernel_settled(m, timeout=10.0):
    """Waits until the kernel has no request of mount m waiting for its
    answer (fusectl's `waiting` count is 0): the RELEASEs and RELEASEDIRs
    the kernel sends on its own after a close, and the requests podfs sent
    the daemon to answer them, are done. Asks the mount nothing itself."""
    minor = m.info["devid"].split(":")[1]
    waiting = Path(f"/sys/fs/fuse/connections/{minor}/waiting")
    wait_for(lambda: waiting.read_text().strip() == "0", timeout, interval=0.002,
             what=f"{m.path}: the kernel's requests answered")


def requests_since(m, before, settle=True):
    """{opcode: count} of the requests mount m sent since `before` (a
    requests_sent(m) of earlier), opcodes it did not send left out;
    with settle, first waits for the kernel's asynchronous RELEASEs
    (kernel_settled). A test that asserts some request was NOT sent also
    shows, with a request it makes on purpose, that the same count moves."""
    if settle:
        kernel_settled(m)
    now = requests_sent(m)
    return {op: n - before.get(op, 0) for op, n in now.items() if n != before.get(op, 0)}


def attribute_asks(sent):
    """How many of the requests in `sent` (a requests_since) asked the
    daemon for a file's attributes: GETATTRs, and the LOOKUPs and
    LOOKUP_DATAs by which the kernel asks again for a file it forgot
    (memory reclaim drops inodes a test still names)."""
    return sum(sent.get(op, 0) for op in ("GETATTR", "LOOKUP", "LOOKUP_DATA"))


def check_open_counted(m, path):
    """The positive control of a test that asserts a request was not
    sent: an open of path for writing on mount m, which is never
    answered locally, moves m's OPEN count by one."""
    before = requests_sent(m)
    os.close(os.open(path, os.O_RDWR))
    sent = requests_since(m, before, settle=False)
    assert sent.get("OPEN", 0) == 1, f"an OPEN was sent but not counted: {sent}"


def setpriv_argv(uid=TEST_UID, gid=TEST_GID, groups=()):
    a = ["setpriv", f"--reuid={uid}", f"--regid={gid}"]
    if groups:
        a.append("--groups=" + ",".join(str(g) for g in groups))
    else:
        a.append("--clear-groups")
    return a


def as_user(argv, uid=TEST_UID, gid=TEST_GID, groups=(), timeout=60, check=False):
    """Runs argv as an unprivileged uid/gid (and supplementary groups)."""
    return run(setpriv_argv(uid, gid, groups) + [str(a) for a in argv],
               timeout=timeout, check=check, cwd="/")


def py_as(code, uid=TEST_UID, gid=TEST_GID, groups=(), timeout=60):
    """Runs a Python snippet as an unprivileged user. Returns CompletedProcess."""
    return as_user([PYTHON, "-c", code], uid, gid, groups, timeout)


def file_errno(code, uid=TEST_UID, gid=TEST_GID, groups=()):
    """Runs a Python snippet as a user; returns "OK" or the errno name of the
    OSError it raised (e.g. "EACCES")."""
    wrapped = ("import errno, os, sys\n"
               "try:\n" + "".join("    " + ln + "\n" for ln in code.splitlines()) +
               "    print('OK')\n"
               "except OSError as e:\n"
               "    print(errno.errorcode.get(e.errno, e.errno))\n")
    r = py_as(wrapped, uid, gid, groups)
    assert r.returncode == 0, f"snippet crashed: {r.stderr}"
    return r.stdout.strip().splitlines()[-1]


def read_file(p):
    with open(p, "rb") as f:
        return f.read()


def read_or_none(p):
    """p's content, or None where it cannot be read (not there yet)."""
    try:
        return read_file(p)
    except OSError:
        return None


def write_file(p, data, mode="wb"):
    with open(p, mode) as f:
        f.write(data)


def copy_range(fi, fo, n, off_in, off_out):
    """copy_file_range of n bytes from descriptor fi at off_in to fo at
    off_out, looping on short counts as cp does; returns the bytes copied
    (short only at the source's end)."""
    done = 0
    while done < n:
        k = os.copy_file_range(fi, fo, n - done, off_in + done, off_out + done)
        if k == 0:
            break
        done += k
    return done


def errno_of(fn, *a, **kw):
    """The errno of the OSError fn(*a, **kw) raises, or 0 if it succeeds."""
    try:
        fn(*a, **kw)
    except OSError as e:
        return e.errno
    return 0


def current_umask():
    u = os.umask(0)
    os.umask(u)
    return u


def stat_fields(st):
    """What two stats of one file must agree on: mode, nlink, size, mtime
    and ctime (in ns)."""
    return (st.st_mode, st.st_nlink, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def export_stat(p, follow_symlinks=True):
    """os.stat of p in the export, read as podfsd reads attributes
    (daemon/export.c's export_fstat): ext4 shows a file with data and no
    blocks for a moment while writeback allocates its blocks, which a
    rewrite after O_TRUNC starts at the close; such a read is taken
    again (at most 3 reads, letting the writer run in between)."""
    for _ in range(3):
        st = os.stat(p, follow_symlinks=follow_symlinks)
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0 or st.st_blocks != 0:
            break
        os.sched_yield()
    return st


def pread_all(fd, n):
    """Up to n bytes of open file fd from offset 0, read until n or EOF."""
    out = b""
    while len(out) < n:
        chunk = os.pread(fd, n - len(out), len(out))
        if not chunk:
            break
        out += chunk
    return out


# Bound on how long a reconnect may take (backoff included).
RECONNECT = 60.0


class Worker(threading.Thread):
    """Runs fn(*a) in a daemon thread, started at once. join(timeout)
    fails if fn is still running then, re-raises what fn raised, and
    returns what it returned: a worker that dies cannot go unnoticed.
    `error` holds the exception (None if none) for a test that expects
    one; use errno_of as fn for an expected OSError."""

    def __init__(self, fn, *a, name=None):
        super().__init__(daemon=True, name=name or getattr(fn, "__name__", None))
        self.fn, self.a = fn, a
        self.result = None
        self.error = None
        self.start()

    def run(self):
        try:
            self.result = self.fn(*self.a)
        except BaseException as e:  # noqa: BLE001 - raised again in join()
            self.error = e

    def join(self, timeout=None):
        super().join(timeout)
        if self.is_alive():
            raise AssertionError(f"thread {self.name} still running after {timeout} s")
        if self.error is not None:
            raise AssertionError(f"thread {self.name} failed: {self.error!r}") from self.error
        return self.result


def _background(fn, *a):
    """Runs fn(*a) in a daemon thread nobody joins (the relay's pumps)."""
    t = threading.Thread(target=fn, args=a, daemon=True)
    t.start()
    return t


class DelayRelay:
    """A TCP relay on 127.0.0.1 to target (host, port) that holds every
    chunk from the server to the client for `delay` seconds (the client's
    requests pass at once): a client whose pushes arrive late. hold_up()
    holds the client's bytes to the server from then on until
    release_up(), hold_down() the server's to the client until
    release_down() (at most 30 s each); `held` counts the bytes that
    found their way held. cut() closes the connections up now, dropping
    what is held. close() ends it; each connection ends when either side
    closes. source: the (address, port) its connections to target come
    from (None: the kernel's choice), e.g. ("127.0.0.2", 0) for a host of
    its own."""

    def __init__(self, target, delay, source=None):
        import socket
        import threading
        self.target, self.delay, self.source = target, delay, source
        self.up_open = threading.Event()
        self.up_open.set()
        self.down_open = threading.Event()
        self.down_open.set()
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(8)
        self.port = self.ls.getsockname()[1]
        self.socks = []
        self.closed = False
        self.held = 0
        _background(self._accept)

    def _accept(self):
        import socket
        while not self.closed:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            try:
                t = socket.create_connection(self.target, timeout=10, source_address=self.source)
            except OSError:  # the server is down (restarting): so is this connection
                c.close()
                continue
            t.settimeout(None)
            self.socks += [c, t]
            _background(self._pump, c, t, 0, self.up_open)
            _background(self._pump, t, c, self.delay, self.down_open)

    def via(self, daemon):
        """What a mount takes as its daemon (host, port, key) to reach
        daemon through this relay."""
        import types
        return types.SimpleNamespace(host="127.0.0.1", port=self.port, key=daemon.key)

    def hold_up(self):
        self.up_open.clear()

    def release_up(self):
        self.up_open.set()

    def hold_down(self):
        self.down_open.clear()

    def release_down(self):
        self.down_open.set()

    def cut(self):
        socks, self.socks = self.socks, []
        for s in socks:
            try:
                s.shutdown(2)
                s.close()
            except OSError:
                pass

    def _pump(self, src, dst, delay, gate=None):
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                if delay:
                    time.sleep(delay)
                if gate is not None:
                    if not gate.is_set():
                        self.held += len(data)
                    gate.wait(timeout=30)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(2)
                except OSError:
                    pass

    def close(self):
        self.closed = True
        self.ls.close()
        for s in self.socks:
            try:
                s.close()
            except OSError:
                pass


@contextlib.contextmanager
def relayed_mount(daemon, mount, delay=0, source=None, **kw):
    """A mount of daemon through a DelayRelay of delay seconds from
    source (mount: the fixture, kw its arguments): yields (relay, the
    mount). After, the relay lets everything through, the mount comes
    down (before the relay goes: its bytes pass there) and the relay is
    closed."""
    relay = DelayRelay((daemon.host, daemon.port), delay, source)
    m = None
    try:
        m = mount(relay.via(daemon), **kw)
        yield relay, m
    finally:
        relay.release_up()
        relay.release_down()
        if m is not None:
            assert m.umount() is None
        relay.close()


def check_uncommitted_resent(env, daemon, mount, committed, uncommitted):
    """Writes `committed` bytes and fsyncs, writes `uncommitted` more
    without fsync, crashes the daemon's machine (a Daemon(machine=True):
    podfsd killed with -9, that range zeroed on disk while it is down, a
    new boot id) and starts podfsd again: the client must send those
    writes again before its fsync succeeds."""
    a = os.urandom(committed)
    b = os.urandom(uncommitted)
    fd = os.open(mount / "f", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        os.pwrite(fd, a, 0)
        os.fsync(fd)
        os.pwrite(fd, b, len(a))
        # Make sure the writes reached the daemon (stat waits for them).
        assert os.fstat(fd).st_size == len(a) + len(b)
        wait_for(lambda: os.path.getsize(env.export / "f") == len(a) + len(b), 10,
                 what="writes on the daemon")
        def lose():
            with open(env.export / "f", "r+b") as f:  # the "lost page cache"
                f.seek(len(a))
                f.write(b"\0" * len(b))
        daemon.crash(lose=lose)
        Worker(os.fsync, fd).join(RECONNECT)  # fails if it failed or hangs
        assert read_file(env.export / "f") == a + b
    finally:
        os.close(fd)
    assert "sending uncommitted writes again" in mount.proc.output()


def daemon_deleted_fds(daemon, export):
    """Files under export that the daemon holds open though removed."""
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


def tree(root, describe):
    """{path relative to root: describe(path, its lstat)} for everything
    under root (not root itself)."""
    out = {}
    for dp, dns, fns in os.walk(root):
        for n in dns + fns:
            full = os.path.join(dp, n)
            out[os.path.relpath(full, root)] = describe(full, os.lstat(full))
    return out


def at_once(script, argvs, timeout=120):
    """Runs the Python script once per argument list in argvs, all at
    once, and waits for them all (bounded): each must exit 0 (its
    arguments and stderr in the failure). Returns their stdouts, in
    order."""
    procs = [subprocess.Popen([PYTHON, "-c", script, *map(str, argv)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for argv in argvs]
    outs = []
    try:
        for argv, p in zip(argvs, procs):
            out, err = p.communicate(timeout=timeout)
            assert p.returncode == 0, f"{list(map(str, argv))}: {err}"
            outs.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return outs


def on_every_host(mounts, script, *args, timeout=120):
    """Runs the Python script on every mount at once, as
    `script MOUNT_PATH N ARGS...` (N: 1, 2, ... the mount's place, a seed),
    and waits for them all (at_once). Returns their stdouts, in the
    mounts' order."""
    return at_once(script, [[m.path, i + 1, *args] for i, m in enumerate(mounts)], timeout)
