"""background.py: programs that go to the background on their own
(podfsd --daemon, podfs without -f): their exit status, their sanitizer
reports and their syslog, which the tests check like a Proc's.

* `adopting()`: while it lasts, this process is the child subreaper
  (prctl PR_SET_CHILD_SUBREAPER): a program started inside it that forks
  and lets its parent exit leaves its child to us, not to init, so that
  `wait_exit(pid)` can read the child's exit status.
* `procs.san_env(env.logs, tag)` in the program's environment puts its
  sanitizer reports in logs/ (the background child's stderr is
  /dev/null), where teardown scans them.
* `Syslog`: a datagram socket standing in for /dev/log, and `argv()`
  that runs a program in a private mount namespace (nothing mounted
  there is seen outside) whose /dev holds the real /dev's entries and
  /dev/log pointing to that socket. What the program logs to syslog lands
  in logs/<tag>.log in lib/log.c's format ("YYYY-MM-DDTHH:MM:SS.mmmZ podfsd:
  error: ..."), scanned at teardown like any log.
"""

import contextlib
import ctypes
import os
import re
import select
import socket
import threading
import time

from helpers import private_mounts_argv

_PR_SET_CHILD_SUBREAPER = 36
_LEVELS = ("emerg", "alert", "crit", "error", "warning", "notice", "info", "debug")


def _subreaper(on):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


@contextlib.contextmanager
def adopting():
    """This process adopts the orphans made inside the block."""
    _subreaper(True)
    try:
        yield
    finally:
        _subreaper(False)


def wait_exit(pid, timeout):
    """The exit status of adopted child pid as subprocess gives it (-N:
    killed by signal N), or None if it did not exit within timeout."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            p, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            raise AssertionError(f"pid {pid} is not a child of ours (not adopted?)") from None
        if p == pid:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def kill_and_reap(pid, timeout=10):
    """SIGKILL to adopted child pid if it still runs, and reap it."""
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
    return wait_exit(pid, timeout)


class Syslog:
    """A stand-in for /dev/log in env.root, copied to logs/<tag>.log by a
    thread until close()."""

    _LINE = re.compile(r"<(\d+)>(?:\w{3} [ \d]\d \d\d:\d\d:\d\d )?([^:\[]+)(?:\[\d+\])?: ?(.*)",
                       re.S)

    def __init__(self, env, tag):
        self.env = env
        self.path = env.root / f"{tag}.syslog.sock"
        self.log = env.logs / f"{tag}.log"
        self.realdev = env.root / f"{tag}.dev"
        self.realdev.mkdir()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.path))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._copy, daemon=True)
        self.thread.start()

    def _copy(self):
        with open(self.log, "a") as out:
            while True:
                r, _, _ = select.select([self.sock], [], [], 0.1)
                if not r:
                    if self.stop.is_set():
                        break
                    continue
                msg = self.sock.recv(65536).decode(errors="replace").rstrip("\n")
                m = self._LINE.match(msg)
                if m:
                    level = _LEVELS[int(m.group(1)) & 7]
                    now = time.time()
                    t = time.gmtime(now)
                    msg = f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}." \
                          f"{int(now % 1 * 1000):03d} " \
                          f"{m.group(2).strip()}: {level}: {m.group(3)}"
                out.write(msg + "\n")
                out.flush()

    def argv(self, argv):
        """argv run in a mount namespace of its own whose /dev/log is this
        socket (the rest of /dev as it is)."""
        script = ('set -e; mount --bind /dev "$1"; mount -t tmpfs -o mode=755,size=64k '
                  'podfs-test-dev /dev; for e in "$1"/* "$1"/.[!.]*; do '
                  '[ -e "$e" ] || [ -L "$e" ] || continue; ln -s "$e" "/dev/${e##*/}"; done; '
                  'rm -f /dev/log; ln -s "$2" /dev/log; shift 2; exec "$@"')
        return private_mounts_argv(self.env.root, ["sh", "-c", script, "sh", self.realdev,
                                                   self.path] + list(argv))

    def text(self):
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def close(self):
        """Copies what is left (a bounded wait) and closes the socket."""
        self.stop.set()
        self.thread.join(10)
        self.sock.close()
