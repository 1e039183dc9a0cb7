"""test_setup_script.py: scripts/setup, the quick start's script, where it
can be run without touching the host's own /run/podfs or packages: --stop
signals only podfs processes; --listen serves another host (a network
namespace) that mounts with --client; bad options are one line."""

import os
import shutil
import stat
import socket
import subprocess
import time

import pytest

from harness.sshhosts import write_sudo_user_files
from helpers import BUILD, DETACH_FOREIGN_FUSE, PODFS, REPO, wait_for

SETUP = REPO / "scripts" / "setup"


def test_stop_signals_only_podfs_processes(env):
    """--stop reads pid files; one that names another program (stale, or
    planted) is removed, and that program is not signalled."""
    run = env.root / "run"
    run.mkdir()
    victim = subprocess.Popen(["sleep", "60"])
    try:
        for name in ("podfs", "podfsd"):
            (run / f"{name}.pid").write_text(f"{victim.pid}\n")
        r = subprocess.run([str(SETUP), "--stop", str(env.root / "export"),
                            str(env.root / "nomount")],
                           env=dict(os.environ, PODFS_RUN_DIR=str(run)),
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
        assert r.returncode == 0, r.stdout
        assert "stopping" not in r.stdout, r.stdout
        time.sleep(0.2)
        assert victim.poll() is None, "setup --stop signalled a process that is not podfs"
        assert not (run / "podfs.pid").exists() and not (run / "podfsd.pid").exists()
    finally:
        victim.kill()
        victim.wait(10)


def free_port():
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


class Setup:
    """scripts/setup runs with their own run directory, key and state, on
    the test's build (PODFS_SETUP_BUILD), and a last --stop for each."""

    def __init__(self, env):
        self.env = env
        self.key = env.root / "etc-podfs" / "pod.key"
        self.stops = []

    def run(self, args, run_dir, netns=None, timeout=180):
        e = dict(os.environ, PODFS_RUN_DIR=str(run_dir), PODFS_SETUP_BUILD=str(BUILD))
        argv = [str(SETUP), *map(str, args), "--key", str(self.key),
                "--state-dir", str(self.env.root / "setup-state")]
        if netns is not None:
            argv = netns.exec_argv(argv)
        return subprocess.run(argv, env=e, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout)

    def finish(self):
        for args, run_dir, ns in reversed(self.stops):
            self.run(["--stop", *args], run_dir, ns, timeout=120)
        errors = []
        for args, run_dir, _ in self.stops:
            for log in run_dir.glob("*.log"):
                text = log.read_text(errors="replace")
                if "Sanitizer" in text or "runtime error:" in text:
                    errors.append(f"{log}:\n{text[-3000:]}")
        assert not errors, "\n".join(errors)


@pytest.fixture
def setup(env):
    s = Setup(env)
    try:
        yield s
    finally:
        s.finish()
        for p in env.root.iterdir():
            if os.path.ismount(p):
                subprocess.run(["umount", "-l", p], timeout=30)


@pytest.mark.netns
@pytest.mark.timeout(300)
def test_listen_serves_its_network_and_a_client_mounts(env, setup):
    """--listen ADDR: podfsd on that address, exporting to its network
    with root squashed; the lines it prints are the real commands for
    another host (this address, the port, the key's path); --client there
    mounts with the copied key; a host of another network is refused."""
    ns, other = env.new_netns(), env.new_netns()
    port = free_port()
    export, mnt, cmnt = env.root / "sexport", env.root / "smnt", env.root / "cmnt"
    srun, crun = env.root / "run-coord", env.root / "run-client"
    setup.stops.append(([export, mnt], srun, None))
    export.mkdir()
    os.chmod(export, 0o1777)  # root squashed elsewhere may still write here
    # The key in a directory of others' (as /tmp): its mode stays (setup
    # once made it root's only).
    setup.key.parent.mkdir()
    os.chmod(setup.key.parent, 0o1777)
    r = setup.run(["--listen", f"{ns.host_ip}:{port}", export, mnt], srun)
    assert r.returncode == 0, r.stdout
    assert stat.S_IMODE(os.stat(setup.key.parent).st_mode) == 0o1777
    assert stat.S_IMODE(os.stat(setup.key).st_mode) == 0o600
    net = ns.host_ip.rsplit(".", 1)[0] + ".0/24"
    assert f"podfsd on {ns.host_ip}:{port} to {net}" in r.stdout, r.stdout
    assert f"scp root@{ns.host_ip}:{setup.key} {setup.key}" in r.stdout, r.stdout
    assert f"scripts/setup --client {ns.host_ip}:{port} --key {setup.key} {mnt}" in r.stdout, \
        r.stdout
    assert "THIS_HOST" not in r.stdout and "HOST:" not in r.stdout, r.stdout
    assert os.path.ismount(mnt)

    # The client: without the key it says how to copy it; with it, mounts.
    setup.stops.append((["--client", f"{ns.host_ip}:{port}", cmnt], crun, ns))
    client_key = setup.key
    setup.key = env.root / "client" / "pod.key"
    r = setup.run(["--client", f"{ns.host_ip}:{port}", cmnt], crun, ns)
    assert r.returncode != 0, r.stdout
    assert f"scp root@{ns.host_ip}:{setup.key} {setup.key}" in r.stdout, r.stdout
    assert not os.path.ismount(cmnt)
    setup.key.parent.mkdir(mode=0o700)
    shutil.copy(client_key, setup.key)
    os.chmod(setup.key, 0o600)
    r = setup.run(["--client", f"{ns.host_ip}:{port}", cmnt], crun, ns)
    assert r.returncode == 0, r.stdout
    assert os.path.ismount(cmnt), r.stdout
    assert not (crun / "podfsd.pid").exists(), "--client started a daemon"

    # Both ways, and root is squashed (here too: this mount goes through
    # the network as well).
    (cmnt / "from-client").write_text("hello")
    assert (export / "from-client").read_text() == "hello"
    assert (export / "from-client").stat().st_uid == 65534
    (mnt / "from-coord").write_text("back")
    assert (export / "from-coord").stat().st_uid == 65534
    assert wait_for(lambda: (cmnt / "from-coord").read_text() == "back", 10,
                    what="the coordinator's write through the client")

    # A host outside the network: podfsd refuses it.
    omnt = env.root / "omnt"
    omnt.mkdir()
    r = subprocess.run(other.exec_argv([PODFS, f"{ns.host_ip}:{port}", omnt, "-o",
                                        f"key={client_key},retry=0"]),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and not os.path.ismount(omnt), r.stderr

    r = setup.run(["--stop", "--client", f"{ns.host_ip}:{port}", cmnt], crun, ns)
    assert r.returncode == 0 and not os.path.ismount(cmnt), r.stdout
    assert "the key" in r.stdout and "export" not in r.stdout, r.stdout


def test_setup_options_are_checked(env):
    """Bad combinations and values: one line, before anything is done."""
    for args, what in ((["--listen", "nonsense:port"], "bad --listen"),
                       (["--listen", "myhost"], "want an IP address"),
                       (["--client", "h", "--listen", "0.0.0.0"], "exclude each other"),
                       (["--allow", "10.0.0.0/8"], "--allow needs --listen"),
                       (["--client", "h", "a", "b"], "only a mount point"),
                       (["--listen", "0.0.0.0", "--allow", "10.0.0.0/8;rm"], "bad --allow")):
        r = subprocess.run([str(SETUP), *args], stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=30,
                           env=dict(os.environ, PODFS_RUN_DIR=str(env.root / "run")))
        assert r.returncode != 0 and what in r.stderr, (args, r.stderr)
        assert r.stderr.count("\n") == 1, (args, r.stderr)


SUDO_USER_SCRIPT = r"""
set -u
for f in passwd group shadow sudoers; do mount --bind "$D/$f" /etc/$f || exit 1; done
as_user() { runuser -u podfsuser -- env PODFS_RUN_DIR="$RUN" PODFS_SETUP_BUILD="$BUILD" "$@"; }
setup() { as_user "$SETUP" --key "$KEY" --state-dir "$STATE" --port "$PORT" "$@"; }
setup "$EXPORT" "$MNT"; echo "first=$?"
as_user sh -c 'echo from the user > "$1/by-user"' sh "$MNT"; echo "write=$?"
echo "owner=$(stat -c %u "$EXPORT/by-user")"
setup "$EXPORT" "$MNT"; echo "again=$?"
setup --listen "127.0.0.1:$PORT" "$EXPORT" "$MNT"; echo "other=$?"
pids="$(cat "$RUN/podfsd.pid") $(cat "$RUN/podfs.pid")"
setup --stop "$EXPORT" "$MNT"; echo "stop=$?"
mountpoint -q "$MNT"; echo "mounted=$?"
for p in $pids; do  # (a zombie has ended: this test's pytest reaps it)
	grep -q "^State:.*[^Z] (" /proc/$p/status 2>/dev/null && echo "left=$p $(cat /proc/$p/comm)"
done
echo end
"""


@pytest.mark.timeout(300)
def test_setup_run_by_a_user_with_sudo(env):
    """The quick start as most people run it: a user with sudo, not root.
    Its root parts (the key, podfsd, the mount, their logs in a root-only
    run directory) go through sudo; the user writes through the mount as
    themself; a run again changes nothing; a run with other options does
    not take the running podfsd for its own but says so; --stop stops
    both. (Before: the logs' redirections were the user's, and failed.)"""
    d = env.root / "sudo-etc"
    d.mkdir()
    u, uid = "podfsuser", 4243
    write_sudo_user_files(d, u, uid)
    export, mnt, run = env.root / "uexport", env.root / "umnt", env.root / "urun"
    export.mkdir()
    os.chmod(export, 0o1777)
    keydir = env.root / "ukeys"
    e = dict(os.environ, D=str(d), RUN=str(run), BUILD=str(BUILD), SETUP=str(SETUP),
             KEY=str(keydir / "pod.key"), STATE=str(env.root / "ustate"),
             PORT=str(free_port()), EXPORT=str(export), MNT=str(mnt))
    # (Other tests' FUSE mounts copied into the namespace go first: a
    # copy would keep such a mount alive past its unmount while this runs.)
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c",
                        DETACH_FOREIGN_FUSE + "\n" + SUDO_USER_SCRIPT, "bash", str(env.root)],
                       env=e, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    out = r.stdout
    print(out)
    for log in run.glob("*.log"):
        text = log.read_text(errors="replace")
        assert "Sanitizer" not in text and "runtime error:" not in text, f"{log}:\n{text}"
    assert out.rstrip().endswith("end"), out
    assert "first=0" in out and "podfs is up." in out, out
    assert "write=0" in out and f"owner={uid}" in out, out
    assert "again=0" in out and "podfsd already running" in out, out
    assert f"is already mounted (fuse.podfs 127.0.0.1:{e['PORT']})" in out, out
    assert "other=1" in out and "already runs with other options" in out, out
    assert "stop=0" in out and "mounted=0" not in out and "left=" not in out, out
    assert stat.S_IMODE(os.stat(keydir / "pod.key").st_mode) == 0o600
    assert os.stat(keydir).st_uid == 0 and os.stat(run / "podfsd.log").st_uid == 0
