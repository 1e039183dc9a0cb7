"""test_mount_helper.py: mounting as the README shows, with mount(8).

`mount -t fuse.podfs worker0:/ MNT -o key=KEY` and the fstab line
`worker0:/ MNT fuse.podfs key=KEY,_netdev 0 0` (through `mount -a -T
FSTAB` and `mount -T FSTAB MNT`) mount podfs once `podfs` is where `meson
install` puts it (/usr/local/bin); the options of the line are honoured;
`umount` ends the podfs process with exit status 0.

All of it runs in a host of its own (a network namespace where the
daemon is `worker0` on the default port 7049) with a private mount
namespace: there /etc/hosts names worker0 and /usr/local/bin holds
podfs, and the mounts are seen only there. reaper.Reaper runs the
commands and follows the podfs processes they leave in the background.

With podfsd stopped, retry= and bg (as NFS's): a bg line returns at once
and mounts once the daemon is up, without a second podfs from a second
mount -a; a foreground mount gives up after retry= minutes; a bad retry=
is one line and exit status 2.
"""

import os
import time
import types

import pytest

from harness.mount import _unescape
from helpers import PODFS, REPO, read_file, wait_for
from reaper import Reaper


class Host:
    """The namespaces, the daemon (worker0:7049) and the reaper."""

    def __init__(self, env):
        self.env = env
        self.ns = env.new_netns()
        self.daemon = env.start_daemon(listen=f"{self.ns.host_ip}:7049")
        bindir = env.root / "usr-local-bin"
        bindir.mkdir()
        os.symlink(PODFS, bindir / "podfs")
        hosts = env.root / "hosts"
        hosts.write_text(read_file("/etc/hosts").decode() + f"\n{self.ns.host_ip} worker0\n")
        self.reaper = Reaper(env, "mount-helper", netns=self.ns, private_mounts=True)
        for src, dst in ((hosts, "/etc/hosts"), (bindir, "/usr/local/bin")):
            self.ok(["mount", "--bind", src, dst])

    def run(self, argv, timeout=60):
        rc, out, err = self.reaper.run(argv, timeout)
        return types.SimpleNamespace(rc=rc, out=out, err=err)

    def ok(self, argv, timeout=60):
        r = self.run(argv, timeout)
        assert r.rc == 0, f"{argv}: exit status {r.rc}\n{r.out}{r.err}"
        return r

    def mounts(self, path):
        """The mounts at path in the namespace: [(fstype, source,
        mount options, superblock options)], bottom first."""
        out = []
        for line in self.ok(["cat", "/proc/self/mountinfo"]).out.splitlines():
            a = line.split()
            if _unescape(a[4]) == str(path):
                sep = a.index("-")
                out.append((a[sep + 1], _unescape(a[sep + 2]), a[5].split(","),
                            a[sep + 3].split(",")))
        return out

    def umount_all(self, path):
        """Unmounts everything at path (umount(8)); returns the exit
        statuses of the podfs processes that ended."""
        for _ in range(4):
            if not self.mounts(path):
                break
            self.ok(["umount", path])
        assert not self.mounts(path), f"{path} still mounted"
        ended, running = self.reaper.left_behind(20)
        assert running == [], f"podfs still running after its unmount: {running}"
        return ended

    def finish(self):
        try:
            for line in self.run(["cat", "/proc/self/mountinfo"]).out.splitlines():
                a = line.split()
                if len(a) > 4 and a[4].startswith(str(self.env.root)):
                    self.run(["umount", "-l", _unescape(a[4])])
        finally:
            self.reaper.finish()


@pytest.fixture
def host(env):
    h = Host(env)
    try:
        yield h
    finally:
        h.finish()


def fstab(env, line, name="fstab"):
    p = env.root / name
    p.write_text("# podfs test\n" + line + "\n")
    return p


def readme_line(env, mnt, opts=None):
    """The README's fstab line, with this test's mount point and key."""
    return f"worker0:/ {mnt} fuse.podfs {opts or f'key={env.key},_netdev'} 0 0"


def check_mounted_once(host, env, mnt):
    ms = host.mounts(mnt)
    assert len(ms) == 1, ms
    fstype, source, mopts, sopts = ms[0]
    assert fstype == "fuse.podfs", ms
    # Every mount is allow_other,default_permissions.
    assert "allow_other" in sopts and "default_permissions" in sopts, ms
    # It works both ways.
    host.ok(["sh", "-c", f"printf hello > {mnt}/f"])
    assert read_file(env.export / "f") == b"hello"
    (env.export / "g").write_bytes(b"from the export")
    # Made beside podfs, g reaches the mount through the daemon's watch
    # of the export (a push), a moment later: the mount may have fetched
    # the directory's listing (its lookups do, for a small one) and
    # answers the lookup from it until then (docs/coherence.md).
    wait_for(lambda: host.run(["cat", f"{mnt}/g"]).out == "from the export", 5,
             what="the mount to see g, written in the export")
    return ms[0]


@pytest.mark.netns
@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["mount -t", "mount -a -T", "mount -T MNT"])
def test_mount_helper_and_fstab_line(env, host, how):
    mnt = env.root / "mnt-podfs"
    mnt.mkdir()
    if how == "mount -t":
        host.ok(["mount", "-t", "fuse.podfs", "worker0:/", mnt, "-o", f"key={env.key}"])
    elif how == "mount -a -T":
        host.ok(["mount", "-a", "-T", fstab(env, readme_line(env, mnt))])
    else:
        host.ok(["mount", "-T", fstab(env, readme_line(env, mnt)), mnt])
    check_mounted_once(host, env, mnt)
    ended = host.umount_all(mnt)
    assert list(ended.values()) == [0], f"podfs exit status: {ended}"


@pytest.mark.netns
@pytest.mark.timeout(120)
def test_fstab_options_honoured(env, host):
    """The key of the line is the key used (another key fails to mount,
    leaving nothing behind); ro, nosuid and podfs's own options apply;
    nofail and x-* options are accepted."""
    mnt = env.root / "mnt-podfs"
    mnt.mkdir()
    other = env.genkey(env.root / "other.key")
    r = host.run(["mount", "-T", fstab(env, readme_line(env, mnt, f"key={other},_netdev")), mnt])
    assert r.rc != 0, "mounted with a key the daemon does not have"
    assert host.mounts(mnt) == []
    ended, running = host.reaper.left_behind(5)
    assert running == [], running
    opts = f"key={env.key},ro,nosuid,conns=2,nofail,x-podfs.test=1,_netdev"
    host.ok(["mount", "-a", "-T", fstab(env, readme_line(env, mnt, opts), "fstab2")])
    ms = host.mounts(mnt)
    assert len(ms) == 1, ms
    assert "ro" in ms[0][2] and "nosuid" in ms[0][2], ms
    r = host.run(["sh", "-c", f"printf x > {mnt}/f"])
    assert r.rc != 0 and "Read-only" in r.err, (r.rc, r.err)
    assert not (env.export / "f").exists()
    stats = host.ok(["getfattr", "--only-values", "-n", "user.podfs.stats", mnt]).out
    assert "\nconns 2\n" in "\n" + stats, stats
    ended = host.umount_all(mnt)
    assert list(ended.values()) == [0], f"podfs exit status: {ended}"


@pytest.mark.netns
@pytest.mark.timeout(120)
def test_mount_a_twice_mounts_once(env, host):
    """The mount's source is fstab's (worker0:/), so mount(8) sees the
    line is mounted and a second mount -a does nothing."""
    mnt = env.root / "mnt-podfs"
    mnt.mkdir()
    tab = fstab(env, readme_line(env, mnt))
    host.ok(["mount", "-a", "-T", tab])
    try:
        assert [m[1] for m in host.mounts(mnt)] == ["worker0:/"], host.mounts(mnt)
        host.ok(["mount", "-a", "-T", tab])
        assert len(host.mounts(mnt)) == 1, host.mounts(mnt)
    finally:
        ended = host.umount_all(mnt)
    assert ended and all(v == 0 for v in ended.values()), f"podfs exit status: {ended}"


@pytest.mark.netns
@pytest.mark.timeout(120)
def test_mount_over_an_active_podfs_is_refused(env, host):
    """podfs by hand onto an active podfs mount point: one line, mount(8)'s
    failure status, and the first mount untouched."""
    mnt = env.root / "mnt-podfs"
    mnt.mkdir()
    host.ok(["mount", "-a", "-T", fstab(env, readme_line(env, mnt))])
    try:
        r = host.run(["podfs", "worker0:7049", str(mnt), "-o", f"key={env.key}"])
        assert r.rc == 32, (r.rc, r.out, r.err)
        assert "already a podfs mount point" in r.err and r.err.count("\n") == 1, r.err
        assert len(host.mounts(mnt)) == 1, host.mounts(mnt)
        host.ok(["sh", "-c", f"printf again > {mnt}/f"])
        assert read_file(env.export / "f") == b"again"
    finally:
        ended = host.umount_all(mnt)
    assert ended and all(v == 0 for v in ended.values()), f"podfs exit status: {ended}"


# --- retry= and bg: a host that boots before its coordinator ---

def lock_files(mnt):
    """The mount-point locks left in /run/podfs for mnt (podfs(8))."""
    name = "mount-" + str(mnt).strip("/").replace("-", "\\x2d").replace("/", "-") + ".lock"
    return [p for p in os.listdir("/run/podfs") if p == name] \
        if os.path.isdir("/run/podfs") else []


@pytest.mark.netns
@pytest.mark.timeout(180)
def test_bg_mount_waits_for_the_coordinator(env, host):
    """With podfsd down, an fstab line with bg makes mount -a return 0 at
    once and a background podfs keeps trying; a second mount -a meanwhile
    starts nothing; once podfsd is up the mount appears and works, once."""
    mnt = env.root / "mnt-podfs"
    mnt.mkdir()
    tab = fstab(env, readme_line(env, mnt, f"key={env.key},_netdev,bg"))
    host.daemon.stop()
    t = time.monotonic()
    r = host.ok(["mount", "-a", "-T", tab])
    assert time.monotonic() - t < 10, "mount -a with bg waited for the coordinator"
    assert "in the background" in r.err and "worker0:7049" in r.err, r.err
    assert host.mounts(mnt) == []
    _, running = host.reaper.left_behind(0.5)
    assert len(running) == 1, f"one podfs should retry in the background: {running}"
    assert lock_files(mnt), "no lock for the mount point while it retries"

    # mount -a again (another boot script, an impatient admin): no second podfs.
    r = host.ok(["mount", "-a", "-T", tab])
    assert "already being mounted in the background" in r.err, r.err
    r = host.run(["podfs", "worker0:/", mnt, "-o", f"key={env.key}"])
    assert r.rc == 32 and "already being mounted" in r.err, (r.rc, r.err)
    _, again = host.reaper.left_behind(0.5)
    assert again == running, (running, again)

    host.daemon.start()
    wait_for(lambda: host.mounts(mnt), 40, what="the bg mount to appear after podfsd started")
    check_mounted_once(host, env, mnt)
    assert not lock_files(mnt), "the lock outlived the mount's start"
    ended = host.umount_all(mnt)
    assert ended and all(v == 0 for v in ended.values()), f"podfs exit status: {ended}"


@pytest.mark.netns
@pytest.mark.timeout(120)
def test_foreground_mount_gives_up_after_retry(env, host):
    """Without bg, mount waits for the coordinator up to retry= minutes,
    then fails (not 0) with one last line naming the coordinator; nothing
    is left behind. A coordinator that answers and refuses (another key)
    is not retried."""
    mnt = env.root / "mnt-podfs"
    mnt.mkdir()
    host.daemon.stop()
    t = time.monotonic()
    r = host.run(["mount", "-T", fstab(env, readme_line(env, mnt, f"key={env.key},retry=0.05")),
                  mnt])
    took = time.monotonic() - t
    assert r.rc not in (0, None), (r.rc, r.err)
    assert took >= 2.5, f"gave up after {took:.1f}s, retry=0.05 is 3s"
    last = r.err.strip().splitlines()[-1]
    assert "gave up" in last and "coordinator worker0:7049" in last and "retry=0.05" in last, r.err
    assert host.mounts(mnt) == []
    _, running = host.reaper.left_behind(5)
    assert running == [], running
    assert not lock_files(mnt)

    host.daemon.start()
    other = env.genkey(env.root / "other.key")
    t = time.monotonic()
    r = host.run(["podfs", "worker0:/", mnt, "-o", f"key={other},retry=5"])
    assert r.rc == 1 and "wrong key" in r.err, (r.rc, r.err)
    assert time.monotonic() - t < 30, "a refusal was retried"
    assert "retrying" not in r.err, r.err


@pytest.mark.netns
@pytest.mark.parametrize("opt", ["retry=abc", "retry=", "retry=-1", "retry=1e9", "retry"])
def test_bad_retry_is_one_line(env, host, opt):
    mnt = env.root / "mnt-podfs"
    mnt.mkdir()
    r = host.run(["podfs", "worker0:/", mnt, "-o", f"key={env.key},{opt}"])
    assert r.rc == 2 and r.err.count("\n") == 1 and r.err.startswith("podfs: "), (r.rc, r.err)
    assert host.mounts(mnt) == []


@pytest.mark.netns
@pytest.mark.timeout(120)
def test_readme_fstab_lines_mount(env, host):
    """The fstab lines the README gives (with systemd, and with bg) mount
    as they are, once the coordinator answers."""
    lines = [ln for ln in (REPO / "README.md").read_text().splitlines()
             if ln.startswith("worker0:/ /mnt/podfs fuse.podfs ")]
    assert len(lines) >= 2 and any(",bg " in ln for ln in lines) and \
        any("retry=10000" in ln for ln in lines), lines
    for i, line in enumerate(lines):
        mnt = env.root / f"mnt-readme{i}"
        mnt.mkdir()
        line = line.replace("/mnt/podfs", str(mnt)).replace("/etc/podfs/pod.key", str(env.key))
        host.ok(["mount", "-a", "-T", fstab(env, line, f"fstab-readme{i}")])
        wait_for(lambda: host.mounts(mnt), 20, what=f"the README's line {i} to mount")
        check_mounted_once(host, env, mnt)
        ended = host.umount_all(mnt)
        assert ended and all(v == 0 for v in ended.values()), f"podfs exit status: {ended}"
