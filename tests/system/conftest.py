"""conftest.py: fixtures that run a real podfsd and real podfs FUSE mounts.

Per test (STYLE.md section 7):
  * `env`: a private directory /tmp/podfs-tests/<test>-XXXX with export/,
    mnt/, logs/ and a fresh pod key (podfsd --genkey). It owns every process,
    mount and network namespace the test starts, and tears them all down.
  * `daemon`: podfsd on 127.0.0.1 port 0 (the port is read from --port-file
    with a deadline; a daemon that dies at start fails the test at once with
    its stderr). PODFS_TEST_DAEMON=host:port reuses an external daemon
    instead (e.g. one under gdb); then PODFS_TEST_KEY names its key file and
    PODFS_TEST_EXPORT its (scratch!) export directory, which is emptied
    before each test.
  * `mount`: a factory starting `podfs -f`; poll /proc/self/mountinfo with a
    deadline, fail fast if podfs died. Several mounts per test are fine.
  * `m`: one mount of `daemon` at env.mnt.
  * `pod`: two "hosts": each client's podfs runs in its own network namespace
    (veth pair, 10.201.x.0/24) and reaches the daemon over it.

Teardown, also when the test failed: fusermount3 -u every mount (lazy
unmount, connection abort and SIGKILL when that fails), SIGTERM every
process, wait with a bound, require exit status 0 from podfs and podfsd
(unless a test killed one on purpose), delete the namespaces, then scan the
processes' stderr and sanitizer logs for sanitizer reports. Any problem
fails the test (as a teardown error).

Every wait is bounded. A test that runs longer than its timeout (default
300 s, `@pytest.mark.timeout(N)`) is interrupted with a traceback.
"""

import faulthandler
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers import PODFS, PODFSD, run, wait_for  # noqa: E402

TEST_ROOT = Path(os.environ.get("PODFS_TEST_TMP", "/tmp/podfs-tests"))
SAN_PATTERNS = ("ERROR: AddressSanitizer", "runtime error:", "LeakSanitizer",
                "WARNING: ThreadSanitizer", "ERROR: ThreadSanitizer")
# libfuse 3.14 keeps an INTERRUPT that arrives after its request was
# answered (a lock waiter killed just as its lock was granted) in a list
# that only a later request empties; a session that ends first leaks that
# request (128 bytes, and 48 of its channel) at exit. A LeakSanitizer
# report made only of leaks whose every frame past the allocator is in
# libfuse is that, not ours (our code is built with frame pointers, so a
# leak of ours shows our frames), and is not counted.
_LSAN_SECTION = re.compile(
    r"==\d+==ERROR: LeakSanitizer: detected memory leaks\n(.*?)"
    r"SUMMARY: AddressSanitizer: \d+ byte\(s\) leaked in \d+ allocation\(s\)\.\n?", re.S)


def _libfuse_only(section):
    frames = [ln.strip() for ln in section.splitlines() if re.match(r"\s+#\d+ ", ln)]
    ours = [f for f in frames if not f.startswith("#0 ")]
    return bool(ours) and all("libfuse3.so" in f for f in ours)


def drop_libfuse_leaks(text):
    """text without the LeakSanitizer reports that are libfuse's own (see
    above); (text, True if one was dropped)."""
    dropped = False

    def sub(m):
        nonlocal dropped
        if _libfuse_only(m.group(1)):
            dropped = True
            return ""
        return m.group(0)
    return _LSAN_SECTION.sub(sub, text), dropped


START_TIMEOUT = float(os.environ.get("PODFS_TEST_START_TIMEOUT", "20"))
STOP_TIMEOUT = 20.0
DEFAULT_TEST_TIMEOUT = 300


# --- pytest plumbing ---------------------------------------------------------

def pytest_configure(config):
    config.addinivalue_line("markers", "timeout(seconds): per-test time limit")
    config.addinivalue_line("markers", "slow: long-running test (still runs in CI)")
    config.addinivalue_line("markers", "netns: needs network namespaces (root)")

    # `timeout` (scripts/test) sends SIGTERM: unwind like ^C so every
    # fixture still unmounts and stops what it started.
    def on_term(signum, frame):
        raise KeyboardInterrupt("SIGTERM")
    signal.signal(signal.SIGTERM, on_term)


class TestTimeout(Exception):
    pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    mk = item.get_closest_marker("timeout")
    limit = int(mk.args[0]) if mk else DEFAULT_TEST_TIMEOUT

    def on_alarm(signum, frame):
        raise TestTimeout(f"test exceeded its {limit}s limit")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(limit)
    # A second, harder net: dump all stacks if even the alarm cannot act.
    faulthandler.dump_traceback_later(limit + 60, exit=False)
    try:
        yield
    finally:
        signal.alarm(0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, old)


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def _need_root():
    if os.geteuid() != 0:
        pytest.skip("system tests need root (FUSE mounts, setpriv, netns)")


def _need_bins():
    for b in (PODFSD, PODFS):
        if not os.access(b, os.X_OK):
            pytest.fail(f"{b} is not built (set PODFS_BUILD=<meson build dir>)")


def _ensure_fusectl():
    """Mounts fusectl so a stuck FUSE connection can be aborted."""
    p = Path("/sys/fs/fuse/connections")
    if p.is_dir() and not os.path.ismount(p):
        subprocess.run(["mount", "-t", "fusectl", "none", str(p)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)


# --- mountinfo -----------------------------------------------------------------

def _unescape(s):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), s)


def mountinfo(path):
    """The /proc/self/mountinfo entry for mount point path (the last one
    stacked there), as a dict, or None."""
    # Never realpath(): it would lstat the mount root, which hangs on a hard
    # mount whose daemon is gone. Our mount points are absolute, link-free.
    path = os.path.abspath(path)
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            a = line.split()
            if _unescape(a[4]) == path:
                sep = a.index("-")
                found = dict(devid=a[2], fstype=a[sep + 1], source=a[sep + 2])
    return found


def is_mounted(path):
    return mountinfo(path) is not None


# --- processes -----------------------------------------------------------------

class Spawner:
    """Starts the programs under test from a helper process forked when
    this module is imported, before any test opens a file on a mount.

    Why: starting a program from the test process itself makes the child
    close every file it inherited (subprocess closes them; exec closes
    O_CLOEXEC ones), and closing a file of a podfs mount is a FLUSH, which
    waits for that file's writes to reach podfsd. A test that holds a file
    with unacknowledged writes while it restarts a killed podfsd would
    wait forever: the FLUSH waits for the daemon that the child was about
    to become (and subprocess's vfork keeps the test blocked meanwhile).
    The helper holds no file of any mount, so its children close nothing
    of ours. Its children are its own: it polls and waits for them on our
    behalf. It ends when this process closes its end of the socket."""

    def __init__(self):
        import socket
        from multiprocessing.connection import Connection
        a, b = socket.socketpair()
        pid = os.fork()
        if pid == 0:  # the helper
            a.close()
            code = 0
            try:
                self._serve(Connection(b.detach()))
            except BaseException:  # noqa: BLE001 - nothing to report to
                code = 1
            os._exit(code)
        b.close()
        self.pid = pid
        self.conn = Connection(a.detach())
        import threading
        self.lock = threading.Lock()

    @staticmethod
    def _serve(conn):
        procs = {}
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        while True:
            try:
                req = conn.recv()
            except (EOFError, OSError):
                break
            op, args = req[0], req[1:]
            try:
                if op == "spawn":
                    argv, env, log = args
                    with open(log, "ab") as lf:
                        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=lf,
                                             stderr=lf, env=env, start_new_session=True)
                    procs[p.pid] = p
                    conn.send(("ok", p.pid))
                elif op == "poll":
                    conn.send(("ok", procs[args[0]].poll()))
                elif op == "wait":
                    try:
                        conn.send(("ok", procs[args[0]].wait(timeout=args[1])))
                    except subprocess.TimeoutExpired:
                        conn.send(("ok", None))
                else:
                    conn.send(("error", f"unknown request {op!r}"))
            except Exception as e:  # noqa: BLE001 - reported to the caller
                conn.send(("error", f"{type(e).__name__}: {e}"))
        for p in procs.values():  # the test process is gone: leave nothing
            if p.poll() is None:
                p.kill()
                p.wait()

    def call(self, *req):
        with self.lock:
            self.conn.send(req)
            status, value = self.conn.recv()
        if status != "ok":
            raise RuntimeError("spawner: " + value)
        return value


SPAWNER = Spawner()


class RemoteProc:
    """The subprocess.Popen calls Proc uses, for a child of SPAWNER. wait()
    polls in short steps so that the lock is never held for long."""

    def __init__(self, argv, env, log):
        self.pid = SPAWNER.call("spawn", argv, env, str(log))
        self.returncode = None

    def poll(self):
        if self.returncode is None:
            self.returncode = SPAWNER.call("poll", self.pid)
        return self.returncode

    def wait(self, timeout):
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            rc = SPAWNER.call("wait", self.pid, min(left, 0.05))
            if rc is not None:
                self.returncode = rc
        return self.returncode


def san_env(logs, tag):
    """The environment for a program under test: sanitizer reports go to
    files in logs/ (scanned at teardown) in addition to the exit status."""
    e = dict(os.environ)
    # One log_path for all of them: the runtimes share the flag, the last
    # variable parsed wins. Reports land in logs/san.<tag>.<pid>.
    for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"):
        if var in e:
            e[var] = e[var] + f":log_path={logs}/san.{tag}"
    return e


class Proc:
    """A program under test with its stderr (and stdout) in a log file."""

    def __init__(self, env, tag, argv):
        self.env = env
        self.tag = tag
        self.argv = [str(a) for a in argv]
        self.log = env.logs / f"{tag}.log"
        self.expect_rc = 0
        with open(self.log, "ab") as lf:
            lf.write(("$ " + " ".join(self.argv) + "\n").encode())
        self.p = RemoteProc(self.argv, san_env(env.logs, tag), self.log)
        self.pid = self.p.pid
        env.procs.append(self)

    def output(self):
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, n=40):
        return "\n".join(self.output().splitlines()[-n:])

    def alive(self):
        return self.p.poll() is None

    def died_msg(self):
        return (f"{self.tag} (pid {self.pid}) exited with {self.p.returncode}; "
                f"its output:\n{self.tail()}")

    def send(self, sig):
        if self.alive():
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def wait(self, timeout):
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT):
        """Signals the process and waits (bounded); SIGKILL if it hangs.
        Returns an error string or None."""
        if self.alive():
            self.send(sig)
            if self.wait(timeout) is None:
                self.send(signal.SIGKILL)
                self.wait(10)
                return f"{self.tag} (pid {self.pid}) did not exit within {timeout}s of " \
                       f"signal {sig}; killed. Output:\n{self.tail()}"
        return self.check_rc()

    def check_rc(self):
        rc = self.p.returncode
        if self.expect_rc is not None and rc != self.expect_rc:
            if self.only_libfuse_leaked():
                return None
            return f"{self.tag} (pid {self.pid}) exit status {rc}, expected " \
                   f"{self.expect_rc}. Output:\n{self.tail()}"
        return None

    def only_libfuse_leaked(self):
        """The process failed at exit only because of libfuse's own leak
        (drop_libfuse_leaks), with no other sanitizer report."""
        logs = [self.log] + sorted(self.env.logs.glob(f"san.{self.tag}.{self.pid}"))
        dropped_any = False
        for f in logs:
            try:
                text = f.read_text(errors="replace")
            except OSError:
                continue
            rest, dropped = drop_libfuse_leaks(text)
            dropped_any |= dropped
            if any(p in rest for p in SAN_PATTERNS):
                return False
        return dropped_any


class Daemon:
    """A podfsd we started."""

    external = False

    def __init__(self, env, listen="127.0.0.1:0", export=None, state_dir=None, key=None,
                 extra=(), tag=None):
        self.env = env
        self.export = Path(export or env.export)
        self.state_dir = Path(state_dir or env.root / "state")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.key = Path(key or env.key)
        self.extra = list(extra)
        self.listen_host, _, p = listen.rpartition(":")
        self.port = int(p)
        self.tag = tag or f"podfsd{len(env.daemons)}"
        self.nstarts = 0
        self.proc = None
        env.daemons.append(self)
        self.start()

    @property
    def host(self):
        return "127.0.0.1" if self.listen_host in ("0.0.0.0", "") else self.listen_host

    @property
    def addr(self):
        return f"{self.host}:{self.port}"

    def start(self):
        """Starts podfsd (again: on the same port and state dir)."""
        assert self.proc is None or not self.proc.alive()
        portfile = self.env.root / f"{self.tag}.port"
        if portfile.exists():
            portfile.unlink()
        argv = [PODFSD, "--listen", f"{self.listen_host}:{self.port}", "--key", self.key,
                "--state-dir", self.state_dir, "--port-file", portfile,
                "--log-level", os.environ.get("PODFS_TEST_LOG_LEVEL", "info"),
                *self.extra, self.export]
        self.proc = Proc(self.env, f"{self.tag}.{self.nstarts}", argv)
        self.nstarts += 1

        def port_ready():
            if not self.proc.alive():
                pytest.fail("podfsd died at start: " + self.proc.died_msg())
            t = portfile.read_text().strip()
            return int(t) if t else None
        port = wait_for(port_ready, START_TIMEOUT, what=f"{portfile} to name a port")
        assert 0 < port < 65536
        if self.port:
            assert port == self.port, f"podfsd wrote port {port}, asked for {self.port}"
        self.port = port
        return self

    def kill9(self):
        """SIGKILL, as a crash would. Teardown will not require exit 0."""
        self.proc.expect_rc = None
        self.proc.send(signal.SIGKILL)
        assert self.proc.wait(10) is not None, "podfsd survived SIGKILL"

    def stop(self):
        """SIGTERM; podfsd must exit 0."""
        err = self.proc.stop()
        assert err is None, err

    def log(self):
        return "".join(p.output() for p in self.env.procs if p.tag.startswith(self.tag + "."))

    def alive(self):
        return self.proc.alive()


class ExternalDaemon:
    """PODFS_TEST_DAEMON=host:port: a podfsd someone else runs."""

    external = True

    def __init__(self, env, addr):
        self.env = env
        self.host, _, p = addr.rpartition(":")
        self.port = int(p)
        self.addr = addr
        k = os.environ.get("PODFS_TEST_KEY")
        x = os.environ.get("PODFS_TEST_EXPORT")
        if not k or not x:
            pytest.fail("PODFS_TEST_DAEMON needs PODFS_TEST_KEY (its key file) and "
                        "PODFS_TEST_EXPORT (its scratch export dir, emptied per test)")
        self.key = Path(k)
        self.export = Path(x)
        for c in self.export.iterdir():
            if not c.is_symlink() and c.is_dir():
                shutil.rmtree(c)
            else:
                c.unlink()

    def alive(self):
        return True

    def log(self):
        return ""


class Mount:
    """A podfs -f mount. path is the mount point."""

    def __init__(self, env, daemon, path=None, opts="", netns=None, host=None, key=None,
                 tag=None):
        self.env = env
        self.daemon = daemon
        self.path = Path(path or env.mnt)
        self.path.mkdir(parents=True, exist_ok=True)
        self.netns = netns
        self.tag = tag or f"podfs{len(env.mounts)}"
        self.key = Path(key or daemon.key)
        h = host or daemon.host
        o = f"key={self.key}"
        if opts:
            o += "," + opts
        argv = [PODFS, f"{h}:{daemon.port}", self.path, "-f", "-o", o]
        if netns is not None:
            # Not `ip netns exec`: that makes a private mount namespace and the
            # mount would be invisible here. nsenter --net only switches the
            # network namespace, then execs podfs (same pid).
            argv = ["nsenter", f"--net=/var/run/netns/{netns.name}"] + argv
        self.proc = Proc(env, self.tag, argv)
        env.mounts.append(self)
        self.mounted = False

        def up():
            if not self.proc.alive():
                pytest.fail("podfs died before mounting: " + self.proc.died_msg())
            return is_mounted(self.path)
        wait_for(up, START_TIMEOUT, what=f"{self.path} to be mounted")
        self.mounted = True
        self.info = mountinfo(self.path)

    def __truediv__(self, other):
        return self.path / other

    def __str__(self):
        return str(self.path)

    def __fspath__(self):
        return str(self.path)

    def abort_connection(self):
        info = self.info or {}
        dev = info.get("devid", "")
        if ":" in dev:
            minor = dev.split(":")[1]
            p = Path(f"/sys/fs/fuse/connections/{minor}/abort")
            try:
                p.write_text("1")
            except OSError:
                pass

    def umount(self):
        """fusermount3 -u, then podfs must exit 0. Returns an error or None."""
        errs = []
        if is_mounted(self.path):
            deadline = time.monotonic() + 10
            while True:
                r = subprocess.run(["fusermount3", "-u", str(self.path)], text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   timeout=30)
                if r.returncode == 0 or not is_mounted(self.path):
                    break
                if time.monotonic() > deadline:
                    errs.append(f"fusermount3 -u {self.path} failed: {r.stdout.strip()}")
                    self.force_down()
                    break
                time.sleep(0.2)
        if self.proc.alive() and self.proc.wait(STOP_TIMEOUT) is None:
            errs.append(f"{self.tag} did not exit within {STOP_TIMEOUT}s after unmount")
            self.force_down()
        err = self.proc.check_rc() if not self.proc.alive() else \
            f"{self.tag} could not be stopped"
        if err:
            errs.append(err)
        self.mounted = False
        return "\n".join(errs) or None

    def force_down(self):
        subprocess.run(["fusermount3", "-uz", str(self.path)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30)
        self.abort_connection()
        self.proc.send(signal.SIGKILL)
        self.proc.wait(10)


# --- network namespaces ----------------------------------------------------------

_ns_counter = [0]


class NetNS:
    """A network namespace standing in for another host, joined to the main
    namespace by a veth pair: host side 10.201.K.1, namespace side
    10.201.K.2, default route via the host side (so the namespace can reach
    any address of the main namespace, e.g. another veth's host side)."""

    def __init__(self, env):
        _ns_counter[0] += 1
        uniq = f"{os.getpid() % 100000}x{_ns_counter[0]}"
        self.name = f"pfst{uniq}"
        self.hveth = f"pfh{uniq}"[:15]
        self.cveth = f"pfc{uniq}"[:15]
        used = run(["ip", "-o", "-4", "addr", "show"], timeout=10).stdout
        base = (os.getpid() * 7 + _ns_counter[0]) % 200
        for i in range(200):
            k = 20 + (base + i) % 200
            if f" 10.201.{k}." not in used:
                break
        self.host_ip = f"10.201.{k}.1"
        self.ip = f"10.201.{k}.2"
        env.netns.append(self)
        self.created = False
        for cmd in (
            ["ip", "netns", "add", self.name],
            ["ip", "link", "add", self.hveth, "type", "veth", "peer", "name", self.cveth],
            ["ip", "link", "set", self.cveth, "netns", self.name],
            ["ip", "addr", "add", f"{self.host_ip}/24", "dev", self.hveth],
            ["ip", "link", "set", self.hveth, "up"],
            ["ip", "-n", self.name, "addr", "add", f"{self.ip}/24", "dev", self.cveth],
            ["ip", "-n", self.name, "link", "set", self.cveth, "up"],
            ["ip", "-n", self.name, "link", "set", "lo", "up"],
            ["ip", "-n", self.name, "route", "add", "default", "via", self.host_ip],
        ):
            run(cmd, timeout=10)
            self.created = True
        # Recorded so scripts/test can delete it if pytest itself is killed.
        (TEST_ROOT / ".netns").mkdir(exist_ok=True)
        (TEST_ROOT / ".netns" / self.name).touch()

    def exec_argv(self, argv):
        return ["nsenter", f"--net=/var/run/netns/{self.name}"] + [str(a) for a in argv]

    def delete(self):
        subprocess.run(["ip", "link", "del", self.hveth], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=10)
        r = subprocess.run(["ip", "netns", "del", self.name], text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10)
        if r.returncode != 0 and os.path.exists(f"/var/run/netns/{self.name}"):
            return f"ip netns del {self.name}: {r.stdout.strip()}"
        (TEST_ROOT / ".netns" / self.name).unlink(missing_ok=True)
        return None


# --- the per-test environment ------------------------------------------------

class Env:
    def __init__(self, name):
        TEST_ROOT.mkdir(parents=True, exist_ok=True)
        os.chmod(TEST_ROOT, 0o755)
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:60]
        import tempfile
        self.root = Path(tempfile.mkdtemp(prefix=safe + "-", dir=TEST_ROOT))
        # Unprivileged test users must be able to reach the mount points.
        os.chmod(self.root, 0o755)
        self.export = self.root / "export"
        self.mnt = self.root / "mnt"
        self.logs = self.root / "logs"
        for d in (self.export, self.mnt, self.logs):
            d.mkdir()
        os.chmod(self.export, 0o755)
        self.key = self.root / "pod.key"
        self.procs = []
        self.daemons = []
        self.mounts = []
        self.netns = []
        self.external = None

    def genkey(self, path):
        run([PODFSD, "--genkey", path], timeout=30)
        return Path(path)

    def start_daemon(self, **kw):
        return Daemon(self, **kw)

    def mount(self, daemon, path=None, **kw):
        if path is None:
            path = self.mnt if not self.mounts else self.root / f"mnt{len(self.mounts)}"
        return Mount(self, daemon, path=path, **kw)

    def new_netns(self):
        return NetNS(self)

    def teardown(self):
        errors = []
        for m in reversed(self.mounts):
            try:
                e = m.umount()
            except Exception as ex:  # noqa: BLE001 - keep tearing down
                e = f"unmounting {m.path}: {ex!r}"
                m.force_down()
            if e:
                errors.append(e)
        for d in self.daemons:
            if d.proc is not None:
                e = d.proc.stop()
                if e:
                    errors.append(e)
        for p in self.procs:
            if p.alive():
                p.send(signal.SIGKILL)
                p.wait(10)
        for ns in self.netns:
            e = ns.delete()
            if e:
                errors.append(e)
        errors.extend(self.scan_logs())
        return errors

    def scan_logs(self):
        errs = []
        for f in sorted(self.logs.iterdir()):
            try:
                text = f.read_text(errors="replace")
            except OSError:
                continue
            sanlog = f.name.startswith("san.")
            text, _ = drop_libfuse_leaks(text)
            hits = [ln for ln in text.splitlines() if any(p in ln for p in SAN_PATTERNS)]
            if hits or (sanlog and text.strip("= \n")):
                errs.append(f"sanitizer report in {f}:\n" + "\n".join(text.splitlines()[:60]))
        return errs


@pytest.fixture
def env(request):
    _need_root()
    _need_bins()
    _ensure_fusectl()
    e = Env(request.node.name)
    ext = os.environ.get("PODFS_TEST_DAEMON")
    if ext:
        # Tests check results in env.export: make it the external daemon's.
        e.key = Path(os.environ.get("PODFS_TEST_KEY", ""))
        e.export = Path(os.environ.get("PODFS_TEST_EXPORT", e.export))
    else:
        e.genkey(e.key)
    yield e
    errors = e.teardown()
    failed = any(getattr(request.node, "rep_" + w, None) is not None and
                 getattr(request.node, "rep_" + w).failed for w in ("setup", "call"))
    still = [mt for mt in e.mounts if is_mounted(mt.path)]
    if still:
        errors.append("still mounted after teardown: " + ", ".join(str(mt.path) for mt in still))
    elif not errors and not failed and not os.environ.get("PODFS_TEST_KEEP"):
        shutil.rmtree(e.root, ignore_errors=True)
    else:
        # Keep the logs for the post-mortem, drop the (possibly huge) data.
        for d in e.root.iterdir():
            if d.name != "logs" and not is_mounted(d) and d.is_dir():
                shutil.rmtree(d, ignore_errors=True)
    if errors:
        pytest.fail("teardown found problems (logs kept in "
                    f"{e.logs}):\n" + "\n---\n".join(errors), pytrace=False)


@pytest.fixture
def daemon(env):
    ext = os.environ.get("PODFS_TEST_DAEMON")
    if ext:
        return ExternalDaemon(env, ext)
    return env.start_daemon()


@pytest.fixture
def mount(env, daemon):
    """mount(daemon=None, path=None, opts="", netns=None, host=None, key=None)"""
    def make(d=None, **kw):
        return env.mount(d or daemon, **kw)
    return make


@pytest.fixture
def m(mount):
    return mount()


class Pod:
    """A daemon and two client hosts A and B, each in its own network namespace."""

    def __init__(self, env, nclients=2, opts=""):
        self.env = env
        self.ns = [env.new_netns() for _ in range(nclients)]
        # The daemon listens only on the first namespace's host-side address;
        # the other namespaces reach it through their default route.
        self.daemon = env.start_daemon(listen=f"{self.ns[0].host_ip}:0")
        self.export = self.daemon.export
        self.mounts = [env.mount(self.daemon, path=env.root / f"mnt-{chr(97 + i)}",
                                 netns=ns, host=self.ns[0].host_ip, opts=opts,
                                 tag=f"podfs-{chr(97 + i)}")
                       for i, ns in enumerate(self.ns)]
        self.a = self.mounts[0]
        self.b = self.mounts[1] if nclients > 1 else None


@pytest.fixture
def pod(env):
    if os.environ.get("PODFS_TEST_DAEMON"):
        pytest.skip("multi-host tests start their own daemon")
    return Pod(env)
