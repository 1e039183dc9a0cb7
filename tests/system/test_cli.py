"""test_cli.py: the command lines of podfsd and podfs.

Bad options exit 2 with exactly one line on stderr; --help exits 0; key
generation makes a 0600 file of 64 hex digits; start-up errors exit 1 and
say why. Every run is checked for its exact exit status and for sanitizer
reports in its output (exited()). The background modes (podfsd --daemon,
podfs without -f) are checked for their exit status, their sanitizer
reports and (podfsd) their syslog.
"""

import os
import re
import signal
import stat
import time

import pytest

from harness import is_mounted
from harness.background import Syslog, adopting, kill_and_reap, wait_exit
from harness.procs import san_env
from harness.sanitizers import sanitizer_lines
from helpers import BUILD, PODFS, PODFSD, run, wait_for


def exited(r, code):
    """r (helpers.run) exited with status code and printed no sanitizer
    report (an ASan abort or a leak at exit would otherwise pass a test
    that only wants a failure)."""
    assert r.returncode == code, (r.returncode, r.stderr)
    san = sanitizer_lines(r.stdout + r.stderr)
    assert not san, "sanitizer report:\n" + r.stderr


def one_line(r):
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {lines!r}"
    return lines[0]


@pytest.mark.parametrize("argv", [
    ["--bogus"],
    ["--threads"],              # missing value
    ["--threads", "abc", "/tmp"],
    ["--listen", "not-an-address", "--key", "/nonexistent", "/tmp"],
    ["--log-level", "shouting", "/tmp"],
    ["--lease", "-5", "/tmp"],
    ["--grace", "601", "/tmp"],
    ["--peer-chunk", "3M", "/tmp"],
    ["--peer-chunk", "128M", "/tmp"],
    ["--peer-min", "12Q", "/tmp"],
    ["--ack-timeout", "0", "/tmp"],
    ["--ack-timeout", "2001", "/tmp"],
    ["--ack-timeout", "30ms", "/tmp"],
], ids=["unknown", "missing-value", "bad-threads", "bad-listen", "bad-level", "bad-lease",
        "bad-grace", "peer-chunk-not-pow2", "peer-chunk-too-big", "bad-peer-min",
        "ack-timeout-0", "ack-timeout-big", "ack-timeout-unit"])
def test_podfsd_bad_option(env, argv):
    r = run([PODFSD] + argv, timeout=30, check=False)
    exited(r, 2)
    line = one_line(r)
    if argv[0] == "--ack-timeout":
        assert "--ack-timeout wants a number from 1 to 2000" in line, line


@pytest.mark.parametrize("argv", [
    ["--bogus"],
    ["127.0.0.1:1", "MNT", "-o", "bogus_option=1"],
    ["127.0.0.1:1", "MNT", "-o", "timeo=abc"],
    ["127.0.0.1:1", "MNT", "-o", "attr_timeout=-1"],
    ["127.0.0.1:1", "MNT", "-o", "log_level=loud"],
    ["127.0.0.1:1", "MNT", "-o", "lock_retry=0"],
    ["127.0.0.1:1", "MNT", "-o", "conns=0"],
    ["127.0.0.1:1", "MNT", "-o", "conns=17"],
    ["127.0.0.1:1", "MNT", "-o", "conns=2x"],
    ["127.0.0.1:1", "MNT", "-o", "spin=fast"],
    ["127.0.0.1:1", "MNT", "-o", "spin=-5"],
    ["127.0.0.1:1"],            # no mount point
    ["127.0.0.1:99999", "MNT"],  # bad port
    ["127.0.0.1:1", "MNT", "-o", "peer_cache=64M"],  # without peers
    ["127.0.0.1:1", "MNT", "-o", "peers,peer_cache=1M"],
    ["127.0.0.1:1", "MNT", "-o", "peers,peer_timeout=0"],
    ["127.0.0.1:1", "MNT", "-o", "peers,peer_port=70000"],
], ids=["unknown", "bad-o", "bad-timeo", "bad-attr-timeout", "bad-log-level", "bad-lock-retry",
        "conns-0", "conns-17", "conns-junk", "spin-word", "spin-negative", "no-mountpoint",
        "bad-port", "peer-option-without-peers", "peer-cache-too-small", "peer-timeout-0",
        "peer-port-too-big"])
def test_podfs_bad_option(env, argv):
    argv = [str(env.mnt) if a == "MNT" else a for a in argv]
    r = run([PODFS] + argv, timeout=30, check=False)
    exited(r, 2)
    one_line(r)
    assert not is_mounted(env.mnt)


@pytest.mark.parametrize("prog", ["podfsd", "podfs"])
def test_help(env, prog):
    b = PODFSD if prog == "podfsd" else PODFS
    r = run([b, "--help"], timeout=30, check=False)
    exited(r, 0)
    out = r.stdout + r.stderr
    assert "usage" in out.lower()


@pytest.mark.parametrize("argv", [["keygen", "--help"], ["keygen", "-h"], ["warm", "--help"],
                                  ["warm", "-h"]], ids=["keygen", "keygen-h", "warm", "warm-h"])
def test_subcommand_help(env, argv):
    """A subcommand's --help prints its usage and exits 0; it is never
    taken for a file name (a key file named --help, a tree to walk)."""
    r = run([PODFS] + argv, timeout=30, check=False, cwd=env.root)
    exited(r, 0)
    assert r.stdout.startswith("usage: podfs " + argv[0]), r.stdout
    assert not (env.root / argv[1]).exists()


@pytest.mark.parametrize("argv", [["keygen", "-x"], ["warm", "-q", "x"], ["warm"], ["keygen"]],
                         ids=["keygen-option", "warm-option", "warm-nothing", "keygen-nothing"])
def test_subcommand_bad_usage(env, argv):
    r = run([PODFS] + argv, timeout=30, check=False, cwd=env.root)
    exited(r, 2)
    assert "usage" in r.stderr or "unknown option" in r.stderr, r.stderr
    assert not (env.root / "-x").exists()


@pytest.mark.parametrize("prog", ["podfsd", "podfs"])
def test_version(env, prog):
    b = PODFSD if prog == "podfsd" else PODFS
    for flag in ("--version", "-V"):
        r = run([b, flag], timeout=30, check=False)
        exited(r, 0)
        assert re.match(prog + r" \d+\.\d+\.\d+ \(protocol \d+", r.stdout), r.stdout


@pytest.mark.parametrize("how", ["podfsd --genkey", "podfs keygen"])
def test_keygen_0600(env, how):
    p = env.root / "new.key"
    argv = [PODFSD, "--genkey", p] if how.startswith("podfsd") else [PODFS, "keygen", p]
    old = os.umask(0)  # the mode must not depend on the caller's umask
    try:
        exited(run(argv, timeout=30, check=False), 0)
    finally:
        os.umask(old)
    st = os.stat(p)
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert re.fullmatch(rb"[0-9a-f]{64}\n", p.read_bytes())
    # Two keys differ.
    p2 = env.root / "new2.key"
    exited(run(argv[:-1] + [p2], timeout=30, check=False), 0)
    assert p2.read_bytes() != p.read_bytes()
    # An existing file is never overwritten.
    before = p.read_bytes()
    r = run(argv, timeout=30, check=False)
    exited(r, 1)
    assert "exists" in r.stderr, r.stderr
    assert p.read_bytes() == before


def test_podfsd_missing_export(env):
    r = run([PODFSD, "--listen", "127.0.0.1:0", "--key", env.key, env.root / "nope"],
            timeout=30, check=False)
    exited(r, 1)
    assert "nope" in r.stderr


def test_podfsd_port_in_use(env, daemon):
    if daemon.external:
        pytest.skip("own daemon needed")
    r = run([PODFSD, "--listen", f"127.0.0.1:{daemon.port}", "--key", env.key,
             "--state-dir", daemon.state_dir, env.export], timeout=30, check=False)
    exited(r, 1)
    assert "address already in use" in r.stderr, r.stderr


def test_podfs_missing_mountpoint(env, daemon):
    r = run([PODFS, daemon.addr, env.root / "nope", "-f", "-o", f"key={env.key}"],
            timeout=30, check=False)
    exited(r, 1)
    assert "bad mount point" in r.stderr and "nope" in r.stderr, r.stderr


def test_podfsd_sigterm_exit_0(env, daemon):
    """The fixture requires exit 0 on SIGTERM; do it explicitly once, with a
    mount connected at the time."""
    if daemon.external:
        pytest.skip("own daemon needed")
    d2 = env.start_daemon(tag="extra")
    mm = env.mount(d2, path=env.root / "m2")
    (mm.path / "f").write_bytes(b"x")
    d2.stop()
    assert d2.proc.p.returncode == 0
    mm.proc.expect_rc = None  # podfs keeps waiting for its daemon; it is unmounted below


def test_podfsd_sigterm_right_after_the_port_file_exit_0(env):
    """SIGTERM the moment the port file names the port, as a test or a
    service manager may send it: podfsd exits 0, each of 10 times. (Its
    handlers came after the port file: the signal's default action ended
    it, exit status -15; CI met it once.)"""
    from harness.procs import Proc
    for i in range(10):  # the build before failed within the first five
        pf = env.root / f"early{i}.port"
        p = Proc(env, f"early{i}", [PODFSD, "--listen", "127.0.0.1:0", "--key", env.key,
                                     "--state-dir", env.root / "early.state",
                                     "--port-file", pf, "--squash=none",
                                     f"--control-socket={env.root}/early{i}.ctl", env.export])
        deadline = time.monotonic() + 30
        while not (pf.exists() and pf.read_text().strip()):
            assert p.alive() and time.monotonic() < deadline, p.died_msg()
            time.sleep(0.0002)
        p.send(signal.SIGTERM)
        assert p.wait(30) == 0, p.died_msg()


def test_podfsd_daemon_mode(env):
    """--daemon: podfsd goes to the background once listening; its pid and
    port files are 0644 whatever the umask (podfsd itself runs with umask
    0), and a symlink where a pid file goes is not written through. The
    background daemon logs to syslog (a stand-in /dev/log here: its lines
    are in logs/podfsd-bg.log and scanned at teardown), leaves its
    sanitizer reports in logs/, and exits 0 on SIGTERM."""
    pidfile = env.root / "d.pid"
    portfile = env.root / "d.port"
    pidfile.write_text("stale\n")
    pidfile.chmod(0o666)  # an old file keeps no wider mode either
    os.symlink(env.root / "victim", env.root / "link.pid")
    r = run([PODFSD, "--listen", "127.0.0.1:0", "--key", env.key, "--state-dir",
             env.root / "st", "--pidfile", env.root / "link.pid", env.export],
            timeout=60, check=False, env=san_env(env.logs, "podfsd-link"))
    exited(r, 1)
    assert "pid file" in r.stderr, r.stderr
    assert not (env.root / "victim").exists()
    log = Syslog(env, "podfsd-bg")
    pid = None
    try:
        with adopting():
            r = run(log.argv([PODFSD, "--listen", "127.0.0.1:0", "--key", env.key,
                              "--state-dir", env.root / "st", "--daemon", "--pidfile", pidfile,
                              "--port-file", portfile, env.export]),
                    timeout=60, check=False, env=san_env(env.logs, "podfsd-bg"))
        exited(r, 0)
        pid = wait_for(lambda: int(pidfile.read_text().strip() or 0), 20, what="pid file")
        port = wait_for(lambda: int(portfile.read_text().strip() or 0), 20, what="port file")
        assert 0 < port < 65536
        for f in (pidfile, portfile):
            assert stat.S_IMODE(os.stat(f).st_mode) == 0o644, f
        wait_for(lambda: "serving" in log.text(), 20, what="the daemon's syslog")
        os.kill(pid, signal.SIGTERM)
        rc = wait_exit(pid, 20)
        pid = None if rc is not None else pid
        assert rc == 0, f"podfsd --daemon exit status {rc}:\n{log.text()}"
        wait_for(lambda: "stopped" in log.text(), 10, what="the daemon's last log line")
    finally:
        if pid is not None:
            kill_and_reap(pid)
        log.close()


def test_podfs_background_mode_writes(env, daemon):
    """Without -f, podfs forks into the background after mounting: every
    helper thread (writers, pushes, the connection) must run in the child.
    Regression: write-behind threads started before the fork, so a
    daemonized mount queued writes that nothing ever sent. The background
    podfs leaves its sanitizer reports in logs/ and exits 0 once
    unmounted."""
    if daemon.external:
        pytest.skip("own daemon needed")
    mnt = env.root / "bg"
    mnt.mkdir()
    me = os.getpid()

    def bg_podfs():
        """The pid of our adopted podfs (mounting mnt), or None."""
        for p in os.listdir("/proc"):
            try:
                with open(f"/proc/{p}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    cmd = f.read()
            except (OSError, ValueError, IndexError):
                continue
            if ppid == me and str(mnt).encode() in cmd:
                return int(p)
        return None

    pid = None
    try:
        with adopting():
            r = run([PODFS, daemon.addr, mnt, "-o", f"key={env.key}"], timeout=30, check=False,
                    env=san_env(env.logs, "podfs-bg"))
        exited(r, 0)
        pid = wait_for(bg_podfs, 10, what="the background podfs")
        wait_for(lambda: is_mounted(mnt), 10, what="background mount")
        with open(mnt / "f", "wb") as f:
            f.write(b"x" * 100000)
            f.flush()
            os.fsync(f.fileno())
        assert (env.export / "f").read_bytes() == b"x" * 100000
        assert (mnt / "f").read_bytes() == b"x" * 100000
    finally:
        run(["fusermount3", "-u", mnt], timeout=30, check=False)
        if is_mounted(mnt):
            run(["fusermount3", "-uz", mnt], timeout=30, check=False)
        if pid is not None:
            # The background process leaves once unmounted, with status 0.
            rc = wait_exit(pid, 20)
            if rc is None:
                kill_and_reap(pid)
    assert rc == 0, f"background podfs exit status {rc}"


@pytest.mark.parametrize("spin", ["0", "50000", "auto"])
def test_request_loop_with_and_without_keeper(env, daemon, mount, spin):
    """The request loop (fs/loop.c) with no keeper, a forced one and the
    default: the log says what was chosen; many threads' requests at once
    all get the right answers; the unmount is clean (teardown checks
    podfs's exit status and sanitizer logs)."""
    import threading
    m = mount(opts=f"spin={spin}")
    for i in range(40):
        (m / f"f{i}").write_bytes(bytes([i]) * (1000 + i))
    errors = []

    def worker(k):
        try:
            for r in range(30):
                i = (k * 7 + r) % 40
                if (m / f"f{i}").read_bytes() != bytes([i]) * (1000 + i):
                    errors.append((k, i))
                os.stat(m / f"f{i}")
                assert not os.path.exists(m / f"missing{k}-{r}")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "requests hang"
    assert not errors, errors[:5]
    log = m.proc.output()
    if spin == "0":
        assert "keeper thread" not in log and "idle CPU takes" not in log
    elif spin == "auto":
        assert re.search(r"an idle CPU takes \d+ us|a CPU quota applies", log), log


# One process of the storm below: stats until the mount answers with an
# error (it went away), 60 s passed, or it made argv[2] of them (0: no
# limit).
STAT_STORM = r"""
import os, sys, time
d, limit, t0, n = sys.argv[1], int(sys.argv[2]), time.monotonic(), 0
while time.monotonic() - t0 < 60 and (limit == 0 or n < limit):
    try:
        os.stat("%s/f%d" % (d, n % 20))
    except OSError:
        break
    n += 1
"""


@pytest.mark.parametrize("when", ["idle", "busy"])
def test_sigterm_ends_the_request_threads(env, daemon, mount, when):
    """SIGTERM after (idle) or while (busy) several processes send requests
    (attr_timeout=0: each stat reaches podfs): the request threads, asleep
    in read() of /dev/fuse or busy with a request, all end (fs/loop.c
    interrupts the reads), podfs unmounts and exits 0, in every round."""
    import subprocess
    import sys
    import time
    for rnd in range(2):
        m = mount(path=env.root / f"{when}{rnd}", opts="attr_timeout=0,entry_timeout=0")
        for i in range(20):
            (m / f"f{i}").write_bytes(b"x")
        limit = "3000" if when == "idle" else "0"
        procs = [subprocess.Popen([sys.executable, "-c", STAT_STORM, str(m.path), limit])
                 for _ in range(4)]
        try:
            if when == "idle":
                # The pool grew to several threads, all asleep in read() now.
                for p in procs:
                    assert p.wait(60) == 0
                time.sleep(0.2)
            else:
                # The signal comes at a different point of the storm.
                time.sleep(0.2 + 0.3 * rnd)
                assert all(p.poll() is None for p in procs), "the storm ended early"
            m.proc.send(signal.SIGTERM)
            rc = m.proc.wait(30)
            assert rc == 0, f"round {rnd}: podfs exit status {rc} after SIGTERM"
            wait_for(lambda: not is_mounted(m.path), 10, what="the unmount")
            m.mounted = False
        finally:
            for p in procs:
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(10)


def test_man_pages_install_and_render(env):
    """meson install puts podfs(8), podfsd(8) and podfs-exports(5) in place,
    and man renders each without a warning."""
    dest = env.root / "dest"
    run(["meson", "install", "-C", str(BUILD), "--no-rebuild", "--destdir", str(dest)],
        timeout=120)
    pages = {p.name: p for p in dest.rglob("*") if p.parent.name in ("man5", "man8")}
    assert {"podfs.8", "podfsd.8", "podfs-exports.5"} <= set(pages), sorted(pages)
    for name, p in pages.items():
        r = run(["man", "--warnings", "-l", str(p)], timeout=60,
                env={**os.environ, "MANPAGER": "cat", "MANWIDTH": "80"})
        assert r.stderr.strip() == "", f"{name}: {r.stderr}"
        assert name.split(".")[0].upper() in r.stdout, r.stdout[:200]


def test_sigterm_ends_a_request_waiting_for_a_stopped_coordinator(env, daemon, mount):
    """A process waits in stat() for a coordinator that does not answer
    (SIGSTOPped: the connection stays up; a hard mount waits): SIGTERM to
    podfs still ends it within seconds. The request thread's wait for the
    coordinator gives up once the mount is over (killable_end), instead of
    holding podfs's exit until the coordinator answers; the caller gets an
    error, and podfs exits 0."""
    import subprocess
    import sys
    import time
    # Written beside podfs: no RELEASE of this mount commits it (a
    # commit at release has no caller and still waits; finish() commits).
    (env.export / "f").write_bytes(b"x")
    m = mount(opts="attr_timeout=0,entry_timeout=0")
    daemon.proc.send(signal.SIGSTOP)
    p = None
    try:
        p = subprocess.Popen([sys.executable, "-c",
                              "import os, sys\n"
                              "try:\n os.stat(sys.argv[1])\nexcept OSError:\n pass\n",
                              str(m / "f")])
        time.sleep(1.0)
        assert p.poll() is None, "the stat did not wait for the stopped coordinator"
        m.proc.send(signal.SIGTERM)
        rc = m.proc.wait(5)
        assert rc is not None, "podfs did not exit within 5 s of SIGTERM while a " \
                               "request waited for the stopped coordinator"
        assert rc == 0, f"podfs exit status {rc}"
        assert p.wait(15) is not None
        wait_for(lambda: not is_mounted(m.path), 10, what="the unmount")
        m.mounted = False
    finally:
        daemon.proc.send(signal.SIGCONT)
        if p is not None and p.poll() is None:
            p.kill()
            p.wait(10)
