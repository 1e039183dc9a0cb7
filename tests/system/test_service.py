"""test_service.py: podfsd under a service manager, and the units meson
installs.

* podfsd speaks systemd's readiness protocol when NOTIFY_SOCKET is set
  (here a datagram socket of the test's own, with an abstract name as
  systemd uses too): READY=1 with STATUS= and MAINPID= once the port
  accepts connections, RELOADING=1 with MONOTONIC_USEC= then READY=1
  around a SIGHUP reload, STOPPING=1 at SIGTERM.
* `meson install` puts podfsd.service and the example /etc/default/podfsd
  where the options say, with ExecStart naming the installed podfsd, and
  `systemd-analyze verify` accepts the units (against the installed tree,
  with --root).
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from harness.procs import Proc
from helpers import BUILD, DETACH_FOREIGN_FUSE, PODFSD, REPO, wait_for


class Notify:
    """The service manager's end: an abstract datagram socket; messages()
    returns what came, each message a dict of its KEY=VALUE lines."""

    def __init__(self, env):
        self.name = f"@podfs-test-{os.getpid()}-{time.monotonic_ns()}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + self.name[1:])
        self.got = []

    def recv(self, timeout):
        """The next message, or None after timeout seconds."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(4096).decode()
        except socket.timeout:
            return None
        assert data.endswith("\n"), repr(data)
        msg = dict(line.split("=", 1) for line in data.splitlines())
        self.got.append(msg)
        return msg

    def close(self):
        self.sock.close()


@pytest.fixture
def notify(env, monkeypatch):
    n = Notify(env)
    monkeypatch.setenv("NOTIFY_SOCKET", n.name)
    yield n
    n.close()


def accepts(addr):
    host, _, port = addr.rpartition(":")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=2):
        return True


def start(env, *extra):
    """podfsd on a free port with NOTIFY_SOCKET from the environment (no
    port file: READY=1 is all the test waits for)."""
    argv = [PODFSD, "--listen", "127.0.0.1:0", "--key", env.key, "--state-dir",
            env.root / "state", *extra, env.export]
    return Proc(env, "podfsd-notify", argv)


def test_ready_after_listening_then_stopping(env, notify):
    """READY=1 comes once the port accepts connections, with the real
    address, the export and podfsd's pid; SIGTERM sends STOPPING=1 before
    podfsd exits 0."""
    p = start(env)
    msg = notify.recv(30)
    assert msg is not None, "no READY=1 from podfsd: " + p.tail()
    # At once: the listener is there before READY=1 is sent.
    m = re.fullmatch(r"serving (.*) on (127\.0\.0\.1:\d+)", msg.get("STATUS", ""))
    assert msg.get("READY") == "1" and m, msg
    assert accepts(m.group(2))
    assert m.group(1) == str(env.export), msg
    assert msg.get("MAINPID") == str(p.pid), (msg, p.pid)
    assert not m.group(2).endswith(":0"), "STATUS names port 0, not the port listened on"

    p.send(signal.SIGTERM)
    msg = notify.recv(30)
    assert msg == {"STOPPING": "1"}, msg
    assert p.wait(30) == 0, p.tail()
    assert notify.recv(0.2) is None, notify.got


def test_reload_is_announced(env, notify):
    """SIGHUP with an exports file: RELOADING=1 (with the monotonic clock
    in microseconds, as systemd wants it) and READY=1 again; also when the
    new file is bad (the old rules stay, podfsd is ready)."""
    rules = env.root / "exports"
    rules.write_text("127.0.0.0/8 rw,no_root_squash\n")
    p = start(env, "--exports", rules)
    assert notify.recv(30).get("READY") == "1", p.tail()
    for text in ("127.0.0.1/32 rw\n", "10.0.0.0/33 rw\n"):
        rules.write_text(text)
        before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        p.send(signal.SIGHUP)
        msg = notify.recv(30)
        after = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        assert msg is not None and msg.get("RELOADING") == "1", (msg, p.tail())
        assert before <= int(msg["MONOTONIC_USEC"]) <= after, (before, msg, after)
        msg = notify.recv(30)
        assert msg is not None and msg.get("READY") == "1", (msg, p.tail())
    env.expect_log(r"SIGHUP: .*prefix length over 32", "podfsd-notify")
    p.send(signal.SIGTERM)
    assert notify.recv(30) == {"STOPPING": "1"}
    assert p.wait(30) == 0, p.tail()


def test_ready_names_the_daemon_after_daemonizing(env, notify):
    """With --daemon, MAINPID is the process that serves (the one in the
    pid file), not the one systemd started."""
    pidfile = env.root / "podfsd.pid"
    p = start(env, "--daemon", "--pidfile", pidfile)
    # The parent writes the pid file and exits: then the child is known
    # and always stopped, whatever the checks say.
    assert p.wait(30) == 0, p.tail()
    pid = int(pidfile.read_text())
    try:
        msg = notify.recv(30)
        assert msg is not None and msg.get("READY") == "1", p.tail()
        assert msg["MAINPID"] == str(pid) and pid != p.pid, (msg, pid, p.pid)
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not os.path.exists(f"/proc/{pid}"), 30, what="podfsd to exit")
    assert notify.recv(1) == {"STOPPING": "1"}


def test_bad_notify_socket_is_logged(env, monkeypatch):
    """A NOTIFY_SOCKET that names no usable socket: podfsd serves anyway
    and says the manager will not hear it is ready."""
    monkeypatch.setenv("NOTIFY_SOCKET", "relative/name")
    env.expect_log(r"NOTIFY_SOCKET names no usable socket", "podfsd0")
    d = env.start_daemon()
    assert accepts(d.addr)
    assert "NOTIFY_SOCKET names no usable socket" in d.log()


# --- the units ---

def meson_install(env):
    """meson install --destdir into the test's directory. Returns the
    destdir and the build's options (prefix, sbindir, ...)."""
    dest = env.root / "dest"
    r = subprocess.run(["meson", "install", "-C", BUILD, "--no-rebuild", "--destdir", dest],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    info = subprocess.run(["meson", "introspect", "--buildoptions", BUILD],
                          capture_output=True, text=True, timeout=60, check=True).stdout
    opts = {o["name"]: o["value"] for o in json.loads(info)}
    for k in ("sbindir", "bindir", "datadir", "mandir"):
        opts[k] = os.path.join(opts["prefix"], opts[k])
    opts["unitdir"] = opts["systemdunitdir"] or os.path.join(opts["prefix"], "lib/systemd/system")
    return dest, opts


def under(dest, path):
    return dest / str(path).lstrip("/")


def test_units_install_and_name_the_installed_binaries(env):
    dest, opts = meson_install(env)
    svc = under(dest, opts["unitdir"]).joinpath("podfsd.service").read_text()
    assert f"ExecStart={opts['sbindir']}/podfsd $PODFSD_OPTS\n" in svc, svc
    assert under(dest, opts["sbindir"]).joinpath("podfsd").exists()
    for line in ("Type=notify", "Restart=on-failure", "StateDirectory=podfs",
                 "RuntimeDirectory=podfs", "EnvironmentFile=/etc/default/podfsd",
                 "ExecReload=/bin/kill -HUP $MAINPID", "NoNewPrivileges=yes",
                 "After=network-online.target", "Wants=network-online.target",
                 "LimitNOFILE=1048576"):
        assert line + "\n" in svc, (line, svc)
    # The capabilities it may have are exactly those podfsd keeps
    # (daemon/caps_i.h) and those it needs until it drops the rest.
    caps = re.search(r"^CapabilityBoundingSet=(.*)$", svc, re.M).group(1).split()
    table = (REPO / "daemon" / "caps_i.h").read_text().split("#define CAPS_KEEP", 1)[1]
    keep = re.findall(r"CAPS_BIT\((CAP_\w+)\)", table.split("/*", 1)[0])
    assert len(keep) >= 10 and set(keep) <= set(caps), (keep, caps)
    assert set(caps) - set(keep) == {"CAP_SYS_ADMIN", "CAP_NET_BIND_SERVICE", "CAP_SETPCAP"}, caps
    example = under(dest, opts["datadir"]) / "doc" / "podfs" / "podfsd.default"
    assert re.search(r"^#PODFSD_OPTS=\"--listen ", example.read_text(), re.M)


def verify(dest, opts, unit):
    """systemd-analyze verify of the installed unit, in a mount namespace
    where the installed sbindir and mandir stand over the real ones (so
    ExecStart's binary and the Documentation= pages are the installed
    ones, and the system's units are there for the dependencies)."""
    binds = " && ".join(f"mount --bind {under(dest, d)} {d}"
                        for d in (opts["sbindir"], opts["mandir"]) if os.path.isdir(d))
    return subprocess.run(["unshare", "-m", "sh", "-c",
                           DETACH_FOREIGN_FUSE + f"; {binds} && exec systemd-analyze verify {unit}",
                           "sh", str(dest)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed (scripts/test installs systemd)")
def test_systemd_analyze_verify_accepts_the_units(env):
    dest, opts = meson_install(env)
    unit = under(dest, opts["unitdir"]) / "podfsd.service"
    r = verify(dest, opts, unit)
    assert r.returncode == 0 and not r.stderr.strip(), r.stdout + r.stderr
    # It does look: without the installed podfsd, verify fails.
    under(dest, opts["sbindir"]).joinpath("podfsd").unlink()
    r = verify(dest, opts, unit)
    assert r.returncode != 0 and "podfsd is not executable" in r.stderr, r.stdout + r.stderr
