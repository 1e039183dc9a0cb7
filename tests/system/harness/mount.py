"""mount.py: a podfs -f mount as the tests see it: started (in a network
namespace if asked), seen in /proc/self/mountinfo within a deadline,
unmounted with fusermount3 -u and checked for podfs's exit status, or
forced down (connection abort, lazy unmount, SIGKILL).
"""

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from helpers import PODFS, wait_for

from .procs import Proc
from .settings import FORCE_GRACE, MOUNT_OPTS, SPIN, START_TIMEOUT, STOP_TIMEOUT


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


def ensure_fusectl():
    """Mounts fusectl so a stuck FUSE connection can be aborted."""
    p = Path("/sys/fs/fuse/connections")
    if p.is_dir() and not os.path.ismount(p):
        subprocess.run(["mount", "-t", "fusectl", "none", str(p)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)


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
        if MOUNT_OPTS:
            o += "," + MOUNT_OPTS
        if SPIN and not re.search(r"(^|,)spin=", o):
            o += ",spin=" + SPIN
        argv = [PODFS, f"{h}:{daemon.port}", self.path, "-f", "-o", o]
        if netns is not None:
            argv = netns.exec_argv(argv)
        self.proc = Proc(env, self.tag, argv)
        env.mounts.append(self)
        self.mounted = False

        def up():
            if not self.proc.alive():
                pytest.fail("podfs died before mounting: " + self.proc.died_msg())
            return is_mounted(self.path)
        # Every test mounts: polled finely (a mount takes 20-100 ms).
        wait_for(up, START_TIMEOUT, interval=0.005, max_interval=0.01,
                 what=f"{self.path} to be mounted")
        self.mounted = True
        self.info = mountinfo(self.path)

    def __truediv__(self, other):
        return self.path / other

    def __str__(self):
        return str(self.path)

    def __fspath__(self):
        return str(self.path)

    def abort_connection(self):
        """Aborts this mount's FUSE connection, if it is still mounted. Once
        it is not, its device number (the connection's name in fusectl) is
        free, and the next FUSE mount on the machine gets it: another
        test's, running beside this one, whose mount an abort by the old
        number killed (ENOTCONN on its first write, one CI run; a read of
        /dev/fuse that failed with ECONNABORTED, another). So the abort
        file is opened first and the mount checked after: a file of
        fusectl's is tied to the connection it was opened for, and a write
        to it once that connection is gone does nothing (the kernel's
        fuse_ctl_file_conn_get finds none), however soon its number is
        taken again."""
        dev = (self.info or {}).get("devid", "")
        if ":" not in dev:
            return
        minor = dev.split(":")[1]
        try:
            fd = os.open(f"/sys/fs/fuse/connections/{minor}/abort", os.O_WRONLY)
        except OSError:
            return
        try:
            now = mountinfo(self.path)
            if now is not None and now["devid"] == dev:
                os.write(fd, b"1")
        except OSError:
            pass
        finally:
            os.close(fd)

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
        # The abort first: after the lazy unmount the device number is no
        # longer ours (abort_connection).
        self.abort_connection()
        subprocess.run(["fusermount3", "-uz", str(self.path)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30)
        # Its connection gone, podfs ends by itself: a SIGKILL at once
        # could land in its exit's leak check, whose tracer then reports
        # "Unable to get registers from thread N" (a sanitizer report:
        # test_sighup_reload, one CI run). Killed only if it has not ended.
        if self.proc.alive() and self.proc.wait(FORCE_GRACE) is None:
            self.proc.send(signal.SIGKILL)
            self.proc.wait(10)

    def kill9(self):
        """SIGKILL of podfs, as a crash of its host would; the mount goes
        with it (force_down). Teardown will not require exit 0."""
        self.proc.expect_rc = None
        self.proc.send(signal.SIGKILL)
        self.proc.wait(10)
        self.force_down()
