"""procs.py: the programs under test as processes: started from a helper
process (Spawner), with their output and sanitizer reports in the test's
logs/, stopped with a bound and checked for their exit status.
"""

import os
import signal
import subprocess
import time

from .settings import STOP_TIMEOUT


class Spawner:
    """Starts the programs under test from a helper process forked when
    this module is imported, before any test opens a file on a mount.

    Why: starting a program from the test process itself makes the child
    close every file it inherited (subprocess closes them; exec closes
    O_CLOEXEC ones), and closing a file of a podfs mount is a FLUSH, which
    waits for that file's writes to reach podfsd. A test that holds a file
    with unacknowledged writes while it restarts a killed podfsd would
    wait forever: the FLUSH waits for the daemon that the child was about
    to become (and subprocess's vfork keeps the test blocked meanwhile).
    The helper holds no file of any mount, so its children close nothing
    of ours. Its children are its own: it polls and waits for them on our
    behalf. It ends when this process closes its end of the socket."""

    def __init__(self):
        import socket
        from multiprocessing.connection import Connection
        a, b = socket.socketpair()
        pid = os.fork()
        if pid == 0:  # the helper
            a.close()
            code = 0
            try:
                self._serve(Connection(b.detach()))
            except BaseException:  # noqa: BLE001 - nothing to report to
                code = 1
            os._exit(code)
        b.close()
        self.pid = pid
        self.conn = Connection(a.detach())
        import threading
        self.lock = threading.Lock()
        import atexit
        atexit.register(self._end)

    def _end(self):
        """At exit: closes our end, so the helper ends, and reaps it
        (within 10 s), so that the time its children took counts as this
        process's children's (scripts/test's "cpu" figure per file)."""
        self.conn.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if os.waitpid(self.pid, os.WNOHANG)[0] == self.pid:
                    return
            except ChildProcessError:
                return
            time.sleep(0.02)

    @staticmethod
    def _serve(conn):
        procs = {}
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        while True:
            try:
                req = conn.recv()
            except (EOFError, OSError):
                break
            op, args = req[0], req[1:]
            try:
                if op == "spawn":
                    argv, env, log = args
                    with open(log, "ab") as lf:
                        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=lf,
                                             stderr=lf, env=env, start_new_session=True)
                    procs[p.pid] = p
                    conn.send(("ok", p.pid))
                elif op == "poll":
                    conn.send(("ok", procs[args[0]].poll()))
                elif op == "wait":
                    try:
                        conn.send(("ok", procs[args[0]].wait(timeout=args[1])))
                    except subprocess.TimeoutExpired:
                        conn.send(("ok", None))
                else:
                    conn.send(("error", f"unknown request {op!r}"))
            except Exception as e:  # noqa: BLE001 - reported to the caller
                conn.send(("error", f"{type(e).__name__}: {e}"))
        for p in procs.values():  # the test process is gone: leave nothing
            if p.poll() is None:
                p.kill()
                p.wait()

    def call(self, *req):
        with self.lock:
            self.conn.send(req)
            status, value = self.conn.recv()
        if status != "ok":
            raise RuntimeError("spawner: " + value)
        return value


SPAWNER = Spawner()


class RemoteProc:
    """The subprocess.Popen calls Proc uses, for a child of SPAWNER. wait()
    polls in short steps so that the lock is never held for long."""

    def __init__(self, argv, env, log):
        self.pid = SPAWNER.call("spawn", argv, env, str(log))
        self.returncode = None

    def poll(self):
        if self.returncode is None:
            self.returncode = SPAWNER.call("poll", self.pid)
        return self.returncode

    def wait(self, timeout):
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            rc = SPAWNER.call("wait", self.pid, min(left, 0.05))
            if rc is not None:
                self.returncode = rc
        return self.returncode


def san_env(logs, tag):
    """The environment for a program under test: sanitizer reports go to
    files in logs/ (scanned at teardown) in addition to the exit status."""
    e = dict(os.environ)
    # One log_path for all of them: the runtimes share the flag, the last
    # variable parsed wins. Reports land in logs/san.<tag>.<pid>.
    for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"):
        if var in e:
            e[var] = e[var] + f":log_path={logs}/san.{tag}"
    return e


class Proc:
    """A program under test with its stderr (and stdout) in a log file."""

    def __init__(self, env, tag, argv):
        self.env = env
        self.tag = tag
        self.argv = [str(a) for a in argv]
        self.log = env.logs / f"{tag}.log"
        self.expect_rc = 0
        with open(self.log, "ab") as lf:
            lf.write(("$ " + " ".join(self.argv) + "\n").encode())
        self.p = RemoteProc(self.argv, san_env(env.logs, tag), self.log)
        self.pid = self.p.pid
        env.procs.append(self)

    def output(self):
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, n=40):
        return "\n".join(self.output().splitlines()[-n:])

    def alive(self):
        return self.p.poll() is None

    def died_msg(self):
        return (f"{self.tag} (pid {self.pid}) exited with {self.p.returncode}; "
                f"its output:\n{self.tail()}")

    def send(self, sig):
        if self.alive():
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def wait(self, timeout):
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT):
        """Signals the process and waits (bounded); SIGKILL if it hangs.
        Returns an error string or None."""
        if self.alive():
            self.send(sig)
            if self.wait(timeout) is None:
                self.send(signal.SIGKILL)
                self.wait(10)
                return f"{self.tag} (pid {self.pid}) did not exit within {timeout}s of " \
                       f"signal {sig}; killed. Output:\n{self.tail()}"
        return self.check_rc()

    def check_rc(self):
        """An error string if the exit status is not expect_rc (None:
        any). A sanitizer's report ends the process with SIGABRT
        (abort_on_error=1) or its exitcode: never forgiven here; the
        report itself is in logs/ (Env.teardown shows it)."""
        rc = self.p.returncode
        if self.expect_rc is not None and rc != self.expect_rc:
            return f"{self.tag} (pid {self.pid}) exit status {rc}, expected " \
                   f"{self.expect_rc}. Output:\n{self.tail()}"
        return None
