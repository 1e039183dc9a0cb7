"""test_pod.py: `podfs pod up|status|down HOSTS_FILE`, a pod in one command.

Four "hosts" (harness/sshhosts.py: network namespaces on a bridge, each
with its own sshd and its own /etc/podfs, /usr/local, /run/podfs, mount
point and /etc/fstab) are taken from nothing to mounted by `podfs pod up`
(the build's programs, --from PODFS_BUILD; one host logged into as a user
who is not root, through sudo), a file written on one host is
read on another, `up` run again changes nothing, `status` shows them,
and `down` leaves no mount, no podfsd, no fstab line and no programs. An
address nobody answers in the hosts file gives a FAILED row and a
non-zero exit, within a bound.
"""

import re
import subprocess
import time
from pathlib import Path

import pytest

from harness.sshhosts import SshHosts
from helpers import BUILD, PODFS, Worker, run

POD_TIMEOUT = 120


@pytest.fixture
def hosts(env):
    h = SshHosts(env, 4, sudo_hosts=(2,))
    try:
        yield h
    finally:
        h.finish()


def pod(env, hosts, verb, hosts_file, *extra, expect=0):
    argv = [PODFS, "pod", verb, "--ssh-config", hosts.ssh_config,
            "--ssh-option", "ConnectTimeout=3", "--key", env.root / "pod-here" / "pod.key"]
    if verb == "up":
        argv += ["--from", BUILD]
    argv += list(extra) + [hosts_file]
    t0 = time.monotonic()
    r = subprocess.run(hosts.local_argv(argv), text=True, capture_output=True,
                       timeout=POD_TIMEOUT, stdin=subprocess.DEVNULL)
    out = r.stdout + r.stderr
    with open(env.logs / f"pod-{verb}.log", "a") as f:
        f.write(f"$ podfs pod {verb} ... (exit {r.returncode}, {time.monotonic() - t0:.1f} s)\n"
                f"{out}\n")
    if expect is not None:
        assert r.returncode == expect, f"podfs pod {verb}: exit {r.returncode}\n{out}"
    return r.returncode, out


def row(out, host):
    """The summary table's row of host, as its columns."""
    for line in out.splitlines():
        a = line.split()
        if a and a[0] == host:
            return a
    raise AssertionError(f"no row for {host} in:\n{out}")


def mounts(hosts, i):
    """The mounts at /mnt/podfs on host i: [(fstype, source)]."""
    out = hosts.ok(i, "cat /proc/self/mountinfo")
    res = []
    for line in out.splitlines():
        a = line.split()
        if a[4] == "/mnt/podfs":
            sep = a.index("-")
            res.append((a[sep + 1], a[sep + 2]))
    return [m for m in res if m[0] != "tmpfs"]


def only_sshd_left(hosts, i):
    """Waits (bounded) until only sshd runs in the background of host i:
    ({pid: exit status} of those that ended, [pids running])."""
    deadline = time.monotonic() + 20
    while True:
        ended, running = hosts.left_behind(i, 0.2)
        if len(running) <= 1 or time.monotonic() > deadline:
            return ended, running


HOSTS_FILE = """\
# the pod: worker 0 first
root@10.77.0.10   worker-0

10.77.0.11 worker-1     # a comment
  podfstest@10.77.0.12\tworker-2    # not root: through sudo
[fd77::d]
"""


@pytest.mark.netns
@pytest.mark.timeout(300)
def test_pod_up_status_down_on_four_hosts(env, hosts):
    hf = env.root / "hosts"
    hf.write_text(HOSTS_FILE)
    src = "10.77.0.10:7049"
    names = ["root@10.77.0.10", "10.77.0.11", "podfstest@10.77.0.12", "fd77::d"]

    # From nothing: the key is made here, everything changes everywhere.
    rc, out = pod(env, hosts, "up", hf)
    print(out)
    assert (env.root / "pod-here" / "pod.key").stat().st_mode & 0o777 == 0o600
    assert row(out, names[0])[1:] == ["coordinator", "changed", "changed", "changed", "changed"]
    for n in names[1:]:
        assert row(out, n)[1:] == ["client", "changed", "changed", "-", "changed"], out
    assert "4 of 4 hosts up" in out
    assert "will not come back after a reboot" in out, out
    key = (env.root / "pod-here" / "pod.key").read_bytes()
    for i in range(4):
        assert mounts(hosts, i) == [("fuse.podfs", src)], i
        assert hosts.ok(i, "stat -c %a /etc/podfs/pod.key").strip() == "600"
        assert hosts.ok(i, "cat /etc/podfs/pod.key").encode() == key
        fstab = hosts.ok(i, "cat /etc/fstab")
        assert fstab.count("fuse.podfs") == 1, fstab
        assert f"{src} /mnt/podfs fuse.podfs key=/etc/podfs/pod.key,_netdev" in fstab
        assert hosts.sh(i, f"cmp /usr/local/bin/podfs {PODFS}")[0] == 0, i
    exports = hosts.ok(0, "cat /etc/podfs/exports")
    for a in ("10.77.0.10/32", "10.77.0.11/32", "10.77.0.12/32", "10.77.0.13/32", "fd77::d/128"):
        assert re.search(rf"^{re.escape(a)} rw,root_squash$", exports, re.M), exports
    # Only the coordinator runs podfsd.
    assert hosts.ok(0, "cat /proc/$(cat /run/podfs/podfsd.pid)/comm").strip() == "podfsd"
    for i in (1, 2, 3):
        assert hosts.sh(i, "test -e /run/podfs/podfsd.pid")[0] != 0

    # The hosts share one directory (root is squashed: the directory
    # is made on the coordinator's export, as the README says).
    hosts.ok(0, "mkdir /srv/podfs/shared && chmod 1777 /srv/podfs/shared")
    hosts.ok(3, "echo 'written on host 3' > /mnt/podfs/shared/note")
    assert hosts.ok(1, "cat /mnt/podfs/shared/note") == "written on host 3\n"

    # Again: nothing changes, and it says so for each host.
    rc, out = pod(env, hosts, "up", hf)
    print(out)
    assert row(out, names[0])[1:] == ["coordinator", "ok", "ok", "ok", "ok"]
    for n in names[1:]:
        assert row(out, n)[1:] == ["client", "ok", "ok", "-", "ok"], out
    for n in names:
        assert f"{n}: up, nothing changed" in out, out
    for i in range(4):
        assert mounts(hosts, i) == [("fuse.podfs", src)], i
        assert hosts.ok(i, "grep -c fuse.podfs /etc/fstab").strip() == "1"

    rc, out = pod(env, hosts, "status", hf)
    print(out)
    assert "4 of 4 hosts up" in out
    assert re.search(r"podfsd: running pid \d+ podfsd \S+", out), out
    assert out.count("key: /etc/podfs/pod.key (mode 600)") == 4
    assert out.count(f"mount: /mnt/podfs from {src}") == 4
    assert len(re.findall(r"round trip \d+ us, connected since \d{4}-", out)) == 4, out

    # Host 1 remounted by hand with bg, from a port nobody answers on: a
    # podfs stays behind, trying to mount; down stops it (or it would
    # mount after down).
    hosts.ok(1, "fusermount3 -u /mnt/podfs && "
                "mount -t fuse.podfs -o key=/etc/podfs/pod.key,bg 10.77.0.10:7050 /mnt/podfs")
    assert mounts(hosts, 1) == []
    assert hosts.sh(1, "pgrep -x podfs")[0] == 0

    # Host 3's podfs is stopped: once unmounted, it cannot end its
    # session (commit, GOODBYE) until it runs again. down waits for it
    # before it stops podfsd, which would otherwise list that session
    # and make the next podfsd hold changes for a client that left.
    pid3 = hosts.ok(3, "for p in $(pgrep -x podfs); do [ \"$(readlink /proc/$p/ns/net)\" = "
                       "\"$(readlink /proc/self/ns/net)\" ] && echo $p; done; true").split()
    assert len(pid3) == 1, pid3
    hosts.ok(3, f"kill -STOP {pid3[0]}")
    try:
        w = Worker(pod, env, hosts, "down", hf)
        deadline = time.monotonic() + 60
        while mounts(hosts, 3) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert mounts(hosts, 3) == []
        time.sleep(1.0)
        assert hosts.sh(0, "kill -0 $(cat /run/podfs/podfsd.pid)")[0] == 0, \
            "podfsd stopped while host 3's podfs had not ended its session"
    finally:
        hosts.sh(3, f"kill -CONT {pid3[0]}")
    rc, out = w.join(POD_TIMEOUT + 10)
    print(out)
    assert re.search(r"^10\.77\.0\.11: down\n  warning: a podfs still waiting to mount "
                     r"/mnt/podfs \(the coordinator did not answer\) was stopped \(pid \d+\)$",
                     out, re.M), out
    assert row(out, names[0])[1:] == ["coordinator", "removed", "stopped", "removed", "kept"]
    for n in names[1:]:
        assert row(out, n)[1:] == ["client", "removed", "-", "removed", "kept"], out
    assert "4 of 4 hosts down" in out
    for i in range(4):
        assert mounts(hosts, i) == [], i
        assert "fuse.podfs" not in hosts.ok(i, "cat /etc/fstab")
        assert hosts.ok(i, "find /usr/local /etc/podfs -type f").split() == \
            ["/etc/podfs/pod.key"], i
        # Nothing of podfs runs: the sessions' background processes
        # (podfs, podfsd) ended, with exit status 0; sshd is left.
        ended, running = only_sshd_left(hosts, i)
        # (host 1's waiting podfs ended by SIGTERM)
        want = [-15] if i == 1 else []
        assert ended and sorted(ended.values()) == want + [0] * (len(ended) - len(want)), \
            (i, ended)
        assert len(running) == 1, (i, running)
        assert hosts.ok(i, f"cat /proc/{running[0]}/comm").strip() == "sshd"
    # The export's data stays.
    assert hosts.ok(0, "cat /srv/podfs/shared/note") == "written on host 3\n"
    # Every mount had ended its session when podfsd stopped: it lists
    # none, so a podfsd started on this state directory holds no change
    # for clients that left (down waits for each mount's podfs to exit).
    assert hosts.ok(0, "cat /var/lib/podfs/sessions").splitlines() == ["podfs sessions 1"]

    # Down again: nothing to do, still fine.
    rc, out = pod(env, hosts, "down", hf)
    assert row(out, names[1])[1:] == ["client", "none", "-", "none", "kept"], out


@pytest.mark.netns
@pytest.mark.timeout(300)
def test_pod_up_with_an_unreachable_host_fails_its_row(env, hosts):
    hf = env.root / "hosts"
    hf.write_text(f"10.77.0.10\n{SshHosts.DEAD}\n10.77.0.11\n")
    rc, out = pod(env, hosts, "up", hf, expect=1)
    print(out)
    r = row(out, SshHosts.DEAD)
    assert r[1:3] == ["client", "FAILED"], out
    assert re.search(rf"^{SshHosts.DEAD}: FAILED\n  unreachable", out, re.M), out
    assert "2 of 3 hosts up" in out
    # The others are up nonetheless.
    for i in (0, 1):
        assert mounts(hosts, i) == [("fuse.podfs", "10.77.0.10:7049")], i
    rc, out = pod(env, hosts, "status", hf, expect=1)
    assert f"{SshHosts.DEAD} (client):\n  unreachable" in out, out

    # An up for another export does not take the running podfsd (of the
    # first up's command line) for its own: it says so, and leaves it and
    # the exports file it reads as they were.
    pid = hosts.ok(0, "cat /run/podfs/podfsd.pid").strip()
    exports = hosts.ok(0, "cat /etc/podfs/exports")
    hf0 = env.root / "hosts0"
    hf0.write_text("10.77.0.10\n")  # (the coordinator alone: no dead host to wait for)
    rc, out = pod(env, hosts, "up", hf0, "--export", "/srv/other", expect=1)
    print(out)
    assert re.search(rf"^10\.77\.0\.10: FAILED\n  podfsd: podfsd \(pid {pid}\) already runs, "
                     r'as "[^"]* --state-dir /var/lib/podfs /srv/podfs": run podfs pod down first$',
                     out, re.M), out
    assert hosts.ok(0, "cat /run/podfs/podfsd.pid").strip() == pid
    assert hosts.ok(0, "cat /etc/podfs/exports") == exports

    # The dead host replaced by another, which holds a key of its own:
    # the exports file up wrote is rewritten and podfsd reloads it,
    # without a restart; the new host gets the programs, but its key is
    # not replaced (nor is it mounted) until --replace-key.
    pid = hosts.ok(0, "cat /run/podfs/podfsd.pid").strip()
    hosts.ok(2, "mkdir -m 700 -p /etc/podfs && echo other > /etc/podfs/pod.key && "
                "chmod 600 /etc/podfs/pod.key")
    hf.write_text("10.77.0.10\n10.77.0.11\n10.77.0.12\n")
    rc, out = pod(env, hosts, "up", hf, expect=1)
    print(out)
    assert row(out, "10.77.0.10")[1:] == ["coordinator", "ok", "ok", "changed", "ok"], out
    assert row(out, "10.77.0.12")[1:] == ["client", "changed", "FAILED", "-", "-"], out
    assert re.search(r"^10\.77\.0\.12: FAILED\n  /etc/podfs/pod.key there differs from .*"
                     r"\(--replace-key replaces it\)$", out, re.M), out
    assert "podfsd reloaded its export rules" in out
    assert hosts.ok(2, "cat /etc/podfs/pod.key") == "other\n"
    assert mounts(hosts, 2) == []
    rc, out = pod(env, hosts, "up", hf, "--replace-key")
    print(out)
    assert row(out, "10.77.0.12")[1:] == ["client", "ok", "changed", "-", "changed"], out
    assert hosts.ok(2, "cat /etc/podfs/pod.key").encode() == \
        (env.root / "pod-here" / "pod.key").read_bytes()
    assert hosts.ok(2, "stat -c %a /etc/podfs/pod.key; ls -A /etc/podfs").split() == \
        ["600", "pod.key", "pod.manifest"]
    exports = hosts.ok(0, "cat /etc/podfs/exports")
    assert "10.77.0.12/32 rw,root_squash" in exports and SshHosts.DEAD not in exports
    assert hosts.ok(0, "cat /run/podfs/podfsd.pid").strip() == pid
    assert mounts(hosts, 2) == [("fuse.podfs", "10.77.0.10:7049")]
    # An exports file of the administrator's own is left alone.
    hosts.ok(0, "echo '10.77.0.0/24 rw' > /etc/podfs/exports")
    hf.write_text("10.77.0.10\n10.77.0.11\n")
    rc, out = pod(env, hosts, "up", hf)
    assert "/etc/podfs/exports exists (not the one up wrote): left as it is" in out, out
    assert hosts.ok(0, "cat /etc/podfs/exports") == "10.77.0.0/24 rw\n"
    hf.write_text(f"10.77.0.10\n{SshHosts.DEAD}\n10.77.0.11\n10.77.0.12\n")
    # A busy mount is detached lazily, with a warning; --remove-key.
    hosts.ok(1, "(cd /mnt/podfs && exec sleep 120) </dev/null >/dev/null 2>&1 & "
                "echo $! > /run/podfs/busy.pid")
    # podfsd is left running while a host could not unmount cleanly (the
    # dead one, the busy one): their podfs could still have writes to send.
    rc, out = pod(env, hosts, "down", hf, "--remove-key", expect=1)
    print(out)
    assert "2 of 4 hosts down" in out
    assert row(out, "10.77.0.11")[1:] == ["client", "removed", "-", "removed", "removed"], out
    assert re.search(r"^10\.77\.0\.11: down\n  warning: /mnt/podfs was busy", out, re.M), out
    assert row(out, "10.77.0.10")[1:4] == ["coordinator", "removed", "kept"], out
    assert re.search(r"^10\.77\.0\.10: FAILED\n  podfsd left running: "
                     rf"{re.escape(SshHosts.DEAD)} 10\.77\.0\.11 not unmounted cleanly", out,
                     re.M), out
    assert hosts.ok(0, "cat /proc/$(cat /run/podfs/podfsd.pid)/comm").strip() == "podfsd"
    for i in (0, 1, 2):
        assert mounts(hosts, i) == [], i
    for i in (1, 2):
        assert hosts.sh(i, "test -e /etc/podfs/pod.key")[0] != 0, i
    # Its last user gone, the detached mount's podfs ends (waited for:
    # killed while its sanitizer checks for leaks at exit, it would leave
    # a report).
    hosts.ok(1, "kill $(cat /run/podfs/busy.pid)")
    ended, running = only_sshd_left(hosts, 1)
    assert len(running) == 1, running
    # Every host down: down stops podfsd.
    hf.write_text("10.77.0.10\n10.77.0.11\n10.77.0.12\n")
    rc, out = pod(env, hosts, "down", hf, "--remove-key")
    print(out)
    assert "3 of 3 hosts down" in out
    assert hosts.sh(0, "test -e /etc/podfs/pod.key")[0] != 0
    # The administrator's exports file stays.
    assert hosts.ok(0, "cat /etc/podfs/exports") == "10.77.0.0/24 rw\n"


FAKE_SYSTEMCTL = Path(__file__).parent / "harness" / "fake-systemctl"
ADMIN_DEFAULTS = '# mine\nPODFSD_OPTS="--listen 127.0.0.1:7777 /srv/mine"\n'


@pytest.mark.netns
@pytest.mark.timeout(300)
def test_pod_with_systemd_puts_the_administrators_files_back(env):
    """On a coordinator with systemd (faked: harness/fake-systemctl),
    up writes podfsd.service and /etc/default/podfsd, enables and starts
    the unit; an /etc/default/podfsd of the administrator's is saved, and
    down puts it back. (Before, up overwrote it and down deleted it.)"""
    hosts = SshHosts(env, 2)
    try:
        hosts.ok(0, f"install -D -m 755 {FAKE_SYSTEMCTL} /usr/local/sbin/systemctl && "
                    "mkdir -p /run/systemd/system && "
                    f"printf '{ADMIN_DEFAULTS}' > /etc/default/podfsd")
        hf = env.root / "hosts"
        hf.write_text("10.77.0.10\n10.77.0.11\n")
        rc, out = pod(env, hosts, "up", hf)
        print(out)
        assert row(out, "10.77.0.10")[1:] == ["coordinator", "changed", "changed", "changed",
                                              "changed"], out
        assert "/etc/default/podfsd was not written by podfs pod up: saved as " \
               "/etc/default/podfsd.podfs-saved (down puts it back)" in out, out
        assert "will not come back after a reboot" not in out, out
        assert hosts.ok(0, "cat /etc/default/podfsd.podfs-saved") == ADMIN_DEFAULTS
        assert "--exports /etc/podfs/exports" in hosts.ok(0, "cat /etc/default/podfsd")
        calls = hosts.ok(0, "cat /run/systemd/fake/calls")
        assert "enable podfsd.service" in calls and "start podfsd.service" in calls, calls
        for i in (0, 1):
            assert mounts(hosts, i) == [("fuse.podfs", "10.77.0.10:7049")], i
        hosts.ok(0, "mkdir /srv/podfs/shared && chmod 1777 /srv/podfs/shared")
        hosts.ok(1, "echo 'from host 1' > /mnt/podfs/shared/note")
        assert hosts.ok(0, "cat /mnt/podfs/shared/note") == "from host 1\n"
        pid = hosts.ok(0, "cat /run/systemd/fake/pid").strip()
        rc, out = pod(env, hosts, "status", hf)
        assert f"podfsd: running pid {pid} " in out, out

        rc, out = pod(env, hosts, "up", hf)
        assert "10.77.0.10: up, nothing changed" in out, out
        assert hosts.ok(0, "cat /run/systemd/fake/pid").strip() == pid

        rc, out = pod(env, hosts, "down", hf)
        print(out)
        assert row(out, "10.77.0.10")[1:] == ["coordinator", "removed", "stopped", "removed",
                                              "kept"], out
        assert "/etc/default/podfsd: put back as it was before up" in out, out
        assert hosts.ok(0, "cat /etc/default/podfsd") == ADMIN_DEFAULTS
        assert hosts.sh(0, "ls /etc/default/podfsd.podfs-saved "
                           "/etc/systemd/system/podfsd.service")[0] != 0
        assert hosts.sh(0, f"test -d /proc/{pid}")[0] != 0 or \
            "Z" in hosts.ok(0, f"grep State: /proc/{pid}/status")
        assert "disable --now podfsd.service" in hosts.ok(0, "cat /run/systemd/fake/calls")
    finally:
        hosts.finish()


def test_pod_usage_errors(env, tmp_path):
    hf = tmp_path / "hosts"
    for text, err in (("-oProxyCommand=x\n", "bad host"),
                      ("10.0.0.1:22\n", "bad host"),
                      ("a;reboot\n", "bad host"),
                      ("a\na\n", "listed twice"),
                      ("# nothing\n\n", "no hosts")):
        hf.write_text(text)
        r = subprocess.run([PODFS, "pod", "status", hf], text=True, capture_output=True,
                           timeout=30)
        assert r.returncode == 2 and err in r.stderr, (text, r.stderr)
        assert len(r.stderr.splitlines()) == 1
    for argv in (["up"], ["frob", hf], ["up", "--port", "0", hf], ["down", "--from", "/", hf],
                 ["up", "--mount", "rel/dir", hf], ["up", "--bogus", hf]):
        r = subprocess.run([PODFS, "pod"] + argv, text=True, capture_output=True, timeout=30)
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, (argv, r.stderr)
    for verb in ([], ["up"], ["down"], ["status"]):
        r = subprocess.run([PODFS, "pod"] + verb + ["--help"], text=True, capture_output=True,
                           timeout=30)
        assert r.returncode == 0 and r.stdout.startswith("usage: podfs pod"), (verb, r.stderr)
        assert "--ssh-option" in r.stdout


def test_installed_pod_finds_the_scripts_it_runs_on_hosts(env, tmp_path):
    """`meson install` puts podfs-pod beside podfs and the host scripts it
    sources in share/podfs; the installed `podfs pod` finds them (a bad
    hosts file is then its only complaint, exit 2), and without them it
    says which file is missing, exit 1."""
    dest = tmp_path / "dest"
    run(["meson", "install", "-C", str(BUILD), "--no-rebuild", "--destdir", str(dest)],
        timeout=120)
    [podfs] = [p for p in dest.rglob("podfs") if p.parent.name == "bin"]
    [hs] = list(dest.rglob("podfs-pod-hosts"))
    assert hs.parent == podfs.parent.parent / "share" / "podfs", hs
    assert (podfs.parent / "podfs-pod").is_file()
    hf = tmp_path / "hosts"
    hf.write_text("a;b\n")
    r = subprocess.run([podfs, "pod", "status", hf], text=True, capture_output=True, timeout=30)
    assert r.returncode == 2 and "bad host" in r.stderr, r.stderr
    hs.unlink()
    r = subprocess.run([podfs, "pod", "status", hf], text=True, capture_output=True, timeout=30)
    assert r.returncode == 1 and "podfs-pod-hosts" in r.stderr, r.stderr
