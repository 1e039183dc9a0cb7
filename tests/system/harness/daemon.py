"""daemon.py: podfsd as the tests see it: one we start (Daemon: port 0
read from --port-file, restartable on the same port and state directory,
killable as a crash would, and, with machine=True, on a machine of its
own that can crash and boot again), or one someone else runs
(ExternalDaemon, PODFS_TEST_DAEMON=host:port, e.g. under gdb).
"""

import os
import random
import shutil
import signal
import socket
import uuid
from pathlib import Path

import pytest

from helpers import PODFSD, wait_for

from .procs import Proc
from .settings import DAEMON_ARGS, START_TIMEOUT


def quiet_port(host):
    """A port free on host now, below the kernel's range of ephemeral
    ports (0 if none is found): a podfsd started again on the port it had
    must find it free, and a port the kernel picked (--listen HOST:0) may
    meanwhile be the source port of another test's connection (podfsd
    then failed at a restart with "address already in use")."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for _ in range(100 if low > 10001 else 0):
        port = random.randrange(10000, low)
        with socket.socket(family, socket.SOCK_STREAM) as s:
            try:
                s.bind((host.strip("[]") or "0.0.0.0", port))
            except OSError:
                continue
        return port
    return 0


class Daemon:
    """A podfsd we started."""

    external = False

    def __init__(self, env, listen="127.0.0.1:0", export=None, state_dir=None, key=None,
                 extra=(), tag=None, squash="none", plaintext=None, own_control=True,
                 machine=False):
        """plaintext: start it with --allow-plaintext (None: if the test is
        marked plaintext, as pfsproto cannot speak TLS with a PSK).
        machine: podfsd runs in a mount namespace of its own whose kernel
        boot id (/proc/sys/kernel/random/boot_id, which podfsd makes its
        write verifier of) is a file of the test's, so that crash() can
        stand for a crash and reboot of its machine.
        own_control: its control socket in the test's directory (unless
        extra names one), so that a daemon the test kills leaves nothing
        in /run/podfs; False: podfsd's default, /run/podfs/podfsd-PORT.sock."""
        self.env = env
        self.plaintext = env.plaintext if plaintext is None else plaintext
        self.export = Path(export or env.export)
        self.state_dir = Path(state_dir or env.root / "state")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.key = Path(key or env.key)
        # The tests run as root on the mount and test POSIX behaviour, not
        # the trust model: root stays root (--squash none) unless a test
        # asks for squash=None (podfsd's default, root squash, or the
        # rules of an exports file) or another mode.
        self.extra = ([f"--squash={squash}"] if squash else []) + list(extra) + \
            [a for a in DAEMON_ARGS if a not in extra]
        self.tag = tag or f"podfsd{len(env.daemons)}"
        ctl = env.root / (self.tag + ".ctl")
        if own_control and not any(str(a).startswith("--control-socket") for a in self.extra) \
                and len(str(ctl)) < 100:  # sun_path: 108 bytes
            self.extra.append(f"--control-socket={ctl}")
        # Where `podfsd status` reads it (helpers.podfsd_status), if set here.
        self.control = next((str(a).split("=", 1)[1] for a in self.extra
                             if str(a).startswith("--control-socket=")), None)
        self.listen_host, _, p = listen.rpartition(":")
        self.port = int(p) or quiet_port(self.listen_host)
        self.nstarts = 0
        self.proc = None
        self.boot_file = None
        if machine:
            self.boot_file = env.root / f"{self.tag}.boot_id"
            self.boot_file.write_text(f"{uuid.uuid4()}\n")
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
                *(["--allow-plaintext"] if self.plaintext else []), *self.extra, self.export]
        if self.boot_file:
            # The namespace's copies of the FUSE mounts go: a copy would
            # keep a mount alive after its fusermount3 -u, and its podfs
            # waiting for the end of its session.
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                    'mount --bind "$0" /proc/sys/kernel/random/boot_id || exit 1\n'
                    'awk \'$3 == "fuse" || $3 ~ /^fuse\\./ {print $2}\' /proc/self/mounts |\n'
                    '  while read -r m; do umount -l "$m"; done\n'
                    'exec "$@"',
                    self.boot_file, *argv]
        self.proc = Proc(self.env, f"{self.tag}.{self.nstarts}", argv)
        self.nstarts += 1

        def port_ready():
            if not self.proc.alive():
                pytest.fail("podfsd died at start: " + self.proc.died_msg())
            t = portfile.read_text().strip()
            return int(t) if t else None
        # Polled finely: every test starts one (15-100 ms).
        port = wait_for(port_ready, START_TIMEOUT, interval=0.005, max_interval=0.01,
                        what=f"{portfile} to name a port")
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

    def crash(self, lose=None):
        """Its machine crashes and boots again (machine=True): podfsd is
        killed with -9, lose() runs while it is down (what the page cache
        lost: bytes zeroed on disk, say), the boot id changes, and podfsd
        starts again."""
        assert self.boot_file, "only a Daemon(machine=True) can crash"
        self.kill9()
        if lose:
            lose()
        self.boot_file.write_text(f"{uuid.uuid4()}\n")
        return self.start()

    def stop(self):
        """SIGTERM; podfsd must exit 0."""
        err = self.proc.stop()
        assert err is None, err

    def log(self):
        return "".join(p.output() for p in self.env.procs if p.tag.startswith(self.tag + "."))

    def alive(self):
        return self.proc.alive()


class ExternalDaemon:
    """PODFS_TEST_DAEMON=host:port: a podfsd someone else runs (with
    --allow-plaintext for the tests marked plaintext, which speak pfsproto)."""

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
