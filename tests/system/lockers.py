"""lockers.py: processes that take, hold, wait for and probe locks on a
mount, for the lock tests (each process is a lock owner of its own).

  Agent         takes commands on stdin, one reply line each (the
                `agents` fixture makes them); agents_on_lk sets up two
  Holder        locks a file at start, releases it on command; held_on_a
                makes one on host A of a pod
  WAITER        a script that blocks in a lock until it gets it
  try_lock      a non-blocking attempt from a new process: "GOT" or the errno
"""

import os
import select
import signal
import subprocess
import time

from helpers import PYTHON, wait_for, write_file

# B retries a blocked lock on its own only every RETRY seconds: waking well
# before that needs the daemon's LOCK_WAKE push.
RETRY = 30
PROMPT = 3.0


def readline(p, timeout):
    """One line of p's stdout within timeout, or '' (bounded)."""
    r, _, _ = select.select([p.stdout], [], [], timeout)
    if not r:
        return ""
    return p.stdout.readline().strip()


# One process = one POSIX lock owner; each open file is one flock owner.
# Commands on stdin, one reply line each: "ok T" or "err ERRNO T" (T: the
# monotonic clock when the call returned).
AGENT = r"""
import ctypes, errno, fcntl, os, signal, struct, sys, time
fds = {}
libc = ctypes.CDLL(None, use_errno=True)
signal.signal(signal.SIGUSR1, lambda s, f: None)
signal.siginterrupt(signal.SIGUSR1, True)
MODES = {"EX": fcntl.LOCK_EX, "SH": fcntl.LOCK_SH, "UN": fcntl.LOCK_UN}
print("ready", flush=True)
for line in sys.stdin:
    a = line.split()
    try:
        if a[0] == "open":
            fds[a[1]] = os.open(a[2], os.O_RDWR)
        elif a[0] in ("lockf", "flock"):
            op = MODES[a[2]] | (fcntl.LOCK_NB if "NB" in a[3:] else 0)
            (fcntl.lockf if a[0] == "lockf" else fcntl.flock)(fds[a[1]], op)
        elif a[0] == "range":  # range NAME EX|SH|UN START LEN [NB]
            op = MODES[a[2]] | (fcntl.LOCK_NB if "NB" in a[5:] else 0)
            fcntl.lockf(fds[a[1]], op, int(a[4]), int(a[3]))
        elif a[0] in ("setlkw", "setlk", "getlk-raw"):
            # Write lock of the whole file through libc: Python would
            # retry these after EINTR.
            cmd = {"setlkw": fcntl.F_SETLKW, "setlk": fcntl.F_SETLK,
                   "getlk-raw": fcntl.F_GETLK}[a[0]]
            fl = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
            buf = ctypes.create_string_buffer(fl, len(fl))
            if libc.fcntl(fds[a[1]], cmd, buf) != 0:
                raise OSError(ctypes.get_errno(), "fcntl")
        elif a[0] == "flock-raw":  # flock LOCK_EX|LOCK_NB through libc
            if libc.flock(fds[a[1]], fcntl.LOCK_EX | fcntl.LOCK_NB) != 0:
                raise OSError(ctypes.get_errno(), "flock")
        elif a[0] == "getlk":
            fl = struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
            fcntl.fcntl(fds[a[1]], fcntl.F_GETLK, fl)
        elif a[0] == "close":
            os.close(fds.pop(a[1]))
        print("ok", time.monotonic(), flush=True)
    except OSError as e:
        print("err", errno.errorcode.get(e.errno, str(e.errno)), time.monotonic(), flush=True)
"""

# The agent command of an exclusive lock of each kind.
LOCK_CMD = {"fcntl": "lockf", "flock": "flock"}


class Agent:
    def __init__(self):
        self.p = subprocess.Popen([PYTHON, "-c", AGENT], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        assert self.line(30) == "ready"

    def line(self, timeout):
        """One reply line within timeout seconds, or '' (bounded)."""
        return readline(self.p, timeout)

    def send(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()

    def reply(self, timeout=30):
        """(result, time): result is "ok" or the errno name; ("", None) on timeout."""
        ln = self.line(timeout)
        if not ln:
            return "", None
        w = ln.split()
        return (w[0], float(w[1])) if w[0] == "ok" else (w[1], float(w[2]))

    def interrupt(self, timeout=10):
        """Signals the agent (SIGUSR1, which interrupts its blocked call):
        (result, seconds from the signal to the reply)."""
        t_sig = time.monotonic()
        self.p.send_signal(signal.SIGUSR1)
        res, t_ret = self.reply(timeout)
        return res, (t_ret - t_sig if t_ret is not None else None)

    def do(self, cmd, timeout=30):
        self.send(cmd)
        res, _ = self.reply(timeout)
        assert res, f"no answer to {cmd!r} within {timeout}s"
        return res

    def finish(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(10)


def agents_on_lk(a, b, agents, lock="lockf f EX"):
    """Host A makes a file lk and host B sees it; an agent on A opens it
    as f and takes `lock`, an agent on B opens it as f. Returns the two
    agents (A's, B's)."""
    write_file(a / "lk", b"x")
    wait_for(lambda: os.path.exists(b / "lk"), 10, what="B to see lk")
    ha, hb = agents(), agents()
    assert ha.do("open f " + str(a / "lk")) == "ok"
    assert ha.do(lock) == "ok"
    assert hb.do("open f " + str(b / "lk")) == "ok"
    return ha, hb


HOLDER = r"""
import fcntl, os, sys, time, struct
path, kind = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDWR)
if kind == "fcntl":
    fcntl.lockf(fd, fcntl.LOCK_EX)
elif kind == "fcntl-rd":
    fcntl.lockf(fd, fcntl.LOCK_SH)
elif kind == "range":
    fcntl.lockf(fd, fcntl.LOCK_EX, 100, 0)  # bytes 0..99
else:
    fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
cmd = sys.stdin.readline().strip()
if cmd == "unlock":
    t = time.monotonic()
    if kind == "flock":
        fcntl.flock(fd, fcntl.LOCK_UN)
    elif kind == "range":
        fcntl.lockf(fd, fcntl.LOCK_UN, 100, 0)
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN)
    print("released", t, flush=True)
elif cmd == "close":
    t = time.monotonic()
    os.close(fd)
    print("released", t, flush=True)
elif cmd == "exit":
    os._exit(0)
sys.stdin.readline()
"""

TRY = r"""
import errno, fcntl, os, sys
path, kind = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDWR)
try:
    if kind == "fcntl":
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    elif kind == "fcntl-rd":
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    elif kind == "range-other":
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 100, 100)  # bytes 100..199
    elif kind == "range-overlap":
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 10, 95)
    elif kind == "range-last":
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 99)  # byte 99 only
    else:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("GOT")
except OSError as e:
    print(errno.errorcode[e.errno])
"""

WAITER = r"""
import fcntl, os, sys, time
path, kind = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDWR)
print("waiting", flush=True)
if kind == "fcntl":
    fcntl.lockf(fd, fcntl.LOCK_EX)   # F_SETLKW
else:
    fcntl.flock(fd, fcntl.LOCK_EX)
print("acquired", time.monotonic(), flush=True)
sys.stdin.readline()
"""


class Holder:
    """A process that holds a `kind` lock of path (see HOLDER) until
    told; as a context manager, it is finished at the end."""

    def __init__(self, path, kind):
        self.p = subprocess.Popen([PYTHON, "-c", HOLDER, str(path), kind],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = readline(self.p, 30)
        assert line == "locked", f"holder did not get the lock: {line!r}"

    def cmd(self, c):
        self.p.stdin.write(c + "\n")
        self.p.stdin.flush()
        if c == "exit":
            assert self.p.wait(30) == 0
            return None
        line = readline(self.p, 30)
        assert line.startswith("released"), line
        return float(line.split()[1])

    def finish(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.close()  # end of input: both its reads return, it exits
            except OSError:
                pass
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.finish()


def held_on_a(pod, kind, visible, data=b"x"):
    """Host A makes a file lk holding data; once host B sees it (within
    `visible` seconds), a Holder on A locks it (kind: see HOLDER)."""
    write_file(pod.a / "lk", data)
    wait_for(lambda: os.path.exists(pod.b / "lk"), visible, what="B to see lk")
    return Holder(pod.a / "lk", kind)


def try_lock(path, kind):
    """A non-blocking lock of path (kind: see TRY) from a new process:
    "GOT", or the name of the errno it failed with."""
    r = subprocess.run([PYTHON, "-c", TRY, str(path), kind], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()
