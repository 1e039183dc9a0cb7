"""gang.py: many podfs-replay processes (-g) started at once, as the hosts
of a pod start the same job at the same moment; shared by scripts/bench
--hosts and tests/system/test_pod_start.py.

    g = Gang([argv, ...], timeout=60)     # each prints "ready", then waits
    g.go()                                # all start: their stdin ends
    wall = g.wait()                       # until the last one is done
    g.results[i]  # {"rc", "out", "err", "end_s", and fstrace.results_of's keys}

Every process is started from the caller (cwd /, stdin the one shared
pipe), in its own session, and ended by pid (kill()) if it overstays;
wait() and start() never wait longer than their timeout.
"""

import os
import select
import signal
import subprocess
import tempfile
import time

try:
    from fstrace import results_of
except ImportError:  # imported as a package module
    from .fstrace import results_of


class GangError(Exception):
    pass


class Gang:
    def __init__(self, argvs, timeout=60.0, env=None):
        self.argvs = [[str(a) for a in argv] for argv in argvs]
        self.timeout = timeout
        self.env = env
        self.procs = []
        self.errs = []
        self.outs = []
        self.results = []
        self.t0 = None
        self._w = None
        self._start()

    def _start(self):
        r, self._w = os.pipe()
        try:
            for argv in self.argvs:
                ef = tempfile.TemporaryFile()
                self.errs.append(ef)
                self.procs.append(subprocess.Popen(argv, stdin=r, stdout=subprocess.PIPE, stderr=ef,
                                                   cwd="/", env=self.env, start_new_session=True))
                self.outs.append(b"")
        except BaseException:
            os.close(r)
            self.kill()
            raise
        os.close(r)
        # Each says "ready" once loaded; a process that ends instead failed.
        deadline = time.monotonic() + self.timeout
        waiting = {p.stdout.fileno(): i for i, p in enumerate(self.procs)}
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise GangError("%d of %d not ready after %gs" % (len(waiting), len(self.procs),
                                                                   self.timeout))
            rl, _, _ = select.select(list(waiting), [], [], min(left, 1.0))
            for fd in rl:
                i = waiting[fd]
                chunk = os.read(fd, 4096)
                self.outs[i] += chunk
                if b"ready\n" in self.outs[i]:
                    self.outs[i] = self.outs[i].replace(b"ready\n", b"", 1)
                    del waiting[fd]
                elif not chunk:
                    self.procs[i].wait(timeout=10)
                    msg = self._err(i)
                    self.kill()
                    raise GangError("%s exited %s before it was ready: %s"
                                    % (self.argvs[i][0], self.procs[i].returncode, msg))

    def _err(self, i):
        self.errs[i].seek(0)
        return self.errs[i].read().decode("utf-8", "replace").strip()[-500:]

    def go(self):
        """All start now."""
        self.t0 = time.monotonic()
        os.close(self._w)
        self._w = None

    def wait(self):
        """Seconds from go() until the last one ended; fills results."""
        ends = [None] * len(self.procs)
        fds = {p.stdout.fileno(): i for i, p in enumerate(self.procs)}
        deadline = self.t0 + self.timeout
        while fds:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise GangError("%d of %d still running after %gs" % (len(fds), len(self.procs),
                                                                       self.timeout))
            rl, _, _ = select.select(list(fds), [], [], min(left, 1.0))
            now = time.monotonic()
            for fd in rl:
                i = fds[fd]
                chunk = os.read(fd, 65536)
                if chunk:
                    self.outs[i] += chunk
                else:
                    ends[i] = now - self.t0
                    del fds[fd]
        wall = 0.0
        for i, p in enumerate(self.procs):
            try:
                p.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill()
                raise GangError("%s closed its output but did not exit" % self.argvs[i][0])
            p.stdout.close()
            out = self.outs[i].decode("utf-8", "replace")
            res = results_of(out) or {}
            res.update(rc=p.returncode, out=out, err=self._err(i), end_s=ends[i])
            self.errs[i].close()
            self.results.append(res)
            wall = max(wall, ends[i])
        return wall

    def kill(self):
        """Ends every process still running (by pid), and reaps them."""
        if self._w is not None:
            os.close(self._w)
            self._w = None
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            if p.stdout and not p.stdout.closed:
                p.stdout.close()
        for ef in self.errs:
            if not ef.closed:
                ef.close()


def problems(results, ops=None):
    """What went wrong in a gang's results, as strings: an exit status but
    0, no result line, errors, fewer ops than the trace's."""
    out = []
    for i, r in enumerate(results):
        if "errors" not in r:
            out.append("host %d: no result (exit %s): %s" % (i, r.get("rc"), (r.get("err") or "")[-300:]))
            continue
        if r["errors"] or r["rc"] != 0:
            out.append("host %d: %d errors (exit %s): %s" % (i, r["errors"], r["rc"],
                                                             " | ".join(r["mismatch_lines"][:3])))
        if ops is not None and r.get("ops") != ops:
            out.append("host %d: %s ops, the trace has %d" % (i, r.get("ops"), ops))
    return out
