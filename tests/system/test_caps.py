"""test_caps.py: podfsd keeps only the capabilities it needs.

Once listening, podfsd drops every capability but those of the table in
README.md (daemon/caps_i.h) from all its sets, the bounding set too, and
sets no_new_privs; its worker threads have the same or fewer. A worker
acting for a client other than root also does without CAP_MKNOD and
CAP_SYS_RESOURCE: such a client makes no device nodes and cannot write
into the blocks an ext4 export reserves for root. Run by a user (with
CAP_DAC_READ_SEARCH, which it needs), podfsd serves that user only.
"""

import os
import shutil
import stat
from pathlib import Path

import pytest

from types import SimpleNamespace

from harness.procs import Proc
from helpers import (MiB, PODFSD, TEST_GID, TEST_UID, file_errno, read_file, run,
                     setpriv_argv, wait_for)

CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_FSETID = 0, 1, 2, 3, 4
CAP_SETGID, CAP_SETUID, CAP_SYS_RESOURCE, CAP_MKNOD, CAP_SETFCAP = 6, 7, 24, 27, 31
KEPT = sum(1 << c for c in (CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER,
                            CAP_FSETID, CAP_SETGID, CAP_SETUID, CAP_SYS_RESOURCE, CAP_MKNOD,
                            CAP_SETFCAP))


def status(path):
    """The Cap* and NoNewPrivs fields of a /proc status file, as ints."""
    out = {}
    for line in Path(path).read_text().splitlines():
        k, _, v = line.partition(":")
        if k.startswith("Cap"):
            out[k] = int(v.strip(), 16)
        elif k == "NoNewPrivs":
            out[k] = int(v.strip())
    return out


def own_bounding_set():
    return status("/proc/self/status")["CapBnd"]


def test_podfsd_keeps_only_its_capabilities(env, daemon, m):
    if daemon.external:
        pytest.skip("an external podfsd's process is not ours to read")
    # What the kernel lets this test's processes have at all (a container
    # may hold back some, e.g. CAP_SYS_RESOURCE).
    want = KEPT & own_bounding_set()
    st = status(f"/proc/{daemon.proc.pid}/status")
    assert st["CapEff"] == want, hex(st["CapEff"])
    assert st["CapPrm"] == want, hex(st["CapPrm"])
    assert st["CapBnd"] == want, hex(st["CapBnd"])
    assert st["CapInh"] == 0 and st["CapAmb"] == 0
    assert st["NoNewPrivs"] == 1
    assert "running as root with capabilities" in daemon.log()
    # Requests as root and as a user start the worker threads.
    (m / "pub").mkdir()
    os.chmod(m / "pub", 0o777)
    assert file_errno(f"open({str(m / 'pub' / 'f')!r}, 'wb').write(b'x')") == "OK"
    tasks = list(Path(f"/proc/{daemon.proc.pid}/task").iterdir())
    assert len(tasks) > 1, "no worker thread started"
    for t in tasks:
        try:
            ts = status(t / "status")
        except FileNotFoundError:
            continue  # gone meanwhile
        assert ts["CapEff"] & ~want == 0, (t.name, hex(ts["CapEff"]))
        assert ts["CapPrm"] & ~want == 0, (t.name, hex(ts["CapPrm"]))
        assert ts["CapBnd"] == want, (t.name, hex(ts["CapBnd"]))
        assert ts["NoNewPrivs"] == 1, t.name


def test_nonroot_client_makes_no_device_nodes(env, m):
    os.mkdir(m / "pub")
    os.chmod(m / "pub", 0o777)
    dev = os.makedev(1, 3)
    code = f"os.mknod({str(m / 'pub' / 'null')!r}, 0o666 | {stat.S_IFCHR}, {dev})"
    assert file_errno(code) == "EPERM"
    assert not os.path.lexists(env.export / "pub" / "null")
    # A FIFO needs no privilege; root may make the device.
    assert file_errno(f"os.mkfifo({str(m / 'pub' / 'fifo')!r})") == "OK"
    assert stat.S_ISFIFO(os.lstat(env.export / "pub" / "fifo").st_mode)
    os.mknod(m / "pub" / "rootnull", 0o600 | stat.S_IFCHR, dev)
    assert os.lstat(env.export / "pub" / "rootnull").st_rdev == dev


def write_mib(path, n):
    """A snippet writing n MiB to path, durably."""
    return (f"fd = os.open({str(path)!r}, os.O_CREAT | os.O_WRONLY, 0o644)\n"
            f"try:\n"
            f"    for i in range({n}):\n"
            f"        os.write(fd, b'\\x5a' * {MiB})\n"
            f"    os.fsync(fd)\n"
            f"finally:\n"
            f"    os.close(fd)")


@pytest.mark.timeout(180)
def test_nonroot_client_stays_out_of_reserved_blocks(env):
    """An ext4 export with half its blocks reserved for root: a user's
    40 MiB do not fit in the other half (ENOSPC), although podfsd, running
    as root with CAP_SYS_RESOURCE, could write there; a root client's do
    (ext4 lets fsuid 0, its resuid, have them). Where the test's container
    withholds CAP_SYS_RESOURCE from podfsd, the user's ENOSPC holds
    anyway."""
    for t in ("mkfs.ext4", "losetup"):
        if not shutil.which(t):
            pytest.skip(f"{t} is not installed (scripts/setup --deps-only installs it)")
    img = env.root / "ext4.img"
    path = env.root / "ext4"
    path.mkdir()
    with open(img, "wb") as f:
        f.truncate(72 * MiB)
    run(["mkfs.ext4", "-q", "-F", "-m", "50", img], timeout=120)
    loopdev = run(["losetup", "--find", "--show", img], timeout=30).stdout.strip()
    try:
        run(["mount", loopdev, path], timeout=60)
        try:
            os.chmod(path, 0o777)
            d = env.start_daemon(export=path, tag="podfsd-ext4")
            mm = env.mount(d, path=env.root / "mnt-ext4", tag="podfs-ext4")
            assert file_errno(write_mib(mm / "user", 40)) == "ENOSPC"
            os.unlink(mm / "user")
            wait_for(lambda: not os.path.exists(path / "user"), 10, what="user's file gone")
            assert file_errno(write_mib(mm / "root", 40), uid=0, gid=0) == "OK"
            for mnt in reversed(env.mounts):
                if mnt.umount():
                    mnt.force_down()
            d.proc.stop()
        finally:
            r = run(["umount", path], timeout=60, check=False)
            if r.returncode != 0:
                run(["umount", "-l", path], timeout=60, check=False)
    finally:
        run(["losetup", "-d", loopdev], timeout=30, check=False)


def test_podfsd_run_by_a_user_serves_that_user(env):
    """podfsd as uid TEST_UID with only CAP_DAC_READ_SEARCH (ambient, as a
    file capability would give it): it starts, says so, keeps that one
    capability, and serves its own uid's requests; root's fail (EPERM)."""
    home = env.root / "user"
    exp = home / "export"
    exp.mkdir(parents=True)
    key = home / "pod.key"
    key.write_bytes(read_file(env.key))
    os.chmod(key, 0o600)
    for p in (home, exp, key):
        os.chown(p, TEST_UID, TEST_GID)
    portfile = home / "port"
    argv = setpriv_argv() + ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search",
                             PODFSD, "--listen", "127.0.0.1:0", "--key", key, "--state-dir",
                             home / "state", "--port-file", portfile, exp]
    d = Proc(env, "podfsd-user", argv)

    def port():
        assert d.alive(), d.output()
        return int(portfile.read_text().strip() or 0)
    shim = SimpleNamespace(host="127.0.0.1", port=wait_for(port, 10, what="the port file"),
                           key=key)
    # The port file is written once it listens; the capabilities go
    # after, before its loop starts and it logs that it serves.
    wait_for(lambda: "serving " in d.output(), 10, what="podfsd's 'serving' notice")
    st = status(f"/proc/{d.pid}/status")
    assert st["CapEff"] == st["CapPrm"] == 1 << CAP_DAC_READ_SEARCH
    assert st["NoNewPrivs"] == 1
    assert f"running as uid {TEST_UID}, not root" in d.output()
    mm = env.mount(shim, path=env.root / "mnt-user", tag="podfs-user")
    assert file_errno(f"open({str(mm / 'mine')!r}, 'wb').write(b'mine')") == "OK"
    assert read_file(exp / "mine") == b"mine"
    assert os.stat(exp / "mine").st_uid == TEST_UID
    with pytest.raises(PermissionError):
        (mm / "roots").write_bytes(b"x")
    assert not (exp / "roots").exists()
    assert mm.umount() is None
    assert d.stop() is None
