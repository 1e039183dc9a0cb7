"""env.py: one test's world: a private directory TEST_ROOT/<test>-XXXX
with export/, mnt/, logs/ and a pod key, and every process, mount and
network namespace the test started, all torn down at its end.
"""

import functools
import os
import re
import shutil
import signal
import tempfile
from pathlib import Path

from helpers import PODFSD, run

from .daemon import Daemon
from .mount import Mount, is_mounted
from .netns import NetNS
from .sanitizers import scan_logs
from .settings import TEST_ROOT


@functools.lru_cache(maxsize=None)
def _pod_key():
    """A pod key made by podfsd --genkey, once per pytest run: under the
    sanitizers a podfsd costs about 60 ms of CPU, about 30 s of the
    suite's if every test made its own. Tests that need keys of their
    own (another pod's, a wrong one) still make them (Env.genkey)."""
    d = Path(tempfile.mkdtemp(prefix="key-", dir=TEST_ROOT))
    try:
        run([PODFSD, "--genkey", d / "pod.key"], timeout=30)
        return (d / "pod.key").read_bytes()
    finally:
        shutil.rmtree(d, ignore_errors=True)


class Env:
    def __init__(self, name):
        TEST_ROOT.mkdir(parents=True, exist_ok=True)
        os.chmod(TEST_ROOT, 0o755)
        # The name's part is cut so that a socket in the directory (a
        # daemon's control socket, ROOT/podfsd0.ctl) fits in sun_path's
        # 108 bytes (harness/daemon.py takes it under 100) under a
        # longer PODFS_TEST_TMP too.
        keep = max(8, min(60, 70 - len(str(TEST_ROOT))))
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:keep]
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
        self.expected_logs = []
        self.plaintext = False  # daemons --allow-plaintext (the plaintext marker)

    def make_key(self):
        """The run's pod key (_pod_key) at self.key; with
        PODFS_TEST_DAEMON, the external daemon's key (PODFS_TEST_KEY) and
        export (PODFS_TEST_EXPORT) instead, as tests check results in
        self.export."""
        if os.environ.get("PODFS_TEST_DAEMON"):
            self.key = Path(os.environ.get("PODFS_TEST_KEY", ""))
            self.export = Path(os.environ.get("PODFS_TEST_EXPORT", self.export))
        else:
            fd = os.open(self.key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(_pod_key())

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

    def expect_log(self, regex, tag=None):
        """Declares that an error line (sanitizers.ERROR_LINE) matching
        regex (re.search) is expected in the log of program tag (a Proc
        tag such as "podfs-a", or a daemon's such as "podfsd0"; None: any):
        teardown does not fail the test for it. Keep both narrow: every
        other error line still fails the test."""
        self.expected_logs.append((regex, tag))

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
        errors.extend(scan_logs(self.logs, self.expected_logs))
        return errors

    def finish(self, failed):
        """teardown(), then removes the test's directory; after a failure
        (failed: the test failed), a problem or with PODFS_TEST_KEEP set it
        keeps logs/ for the post-mortem and drops the (possibly huge)
        data. Returns the problems found, as strings."""
        errors = self.teardown()
        still = [mt for mt in self.mounts if is_mounted(mt.path)]
        if still:
            errors.append("still mounted after teardown: " +
                          ", ".join(str(mt.path) for mt in still))
        elif not errors and not failed and not os.environ.get("PODFS_TEST_KEEP"):
            shutil.rmtree(self.root, ignore_errors=True)
        else:
            for d in self.root.iterdir():
                if d.name != "logs" and not is_mounted(d) and d.is_dir():
                    shutil.rmtree(d, ignore_errors=True)
        return errors
