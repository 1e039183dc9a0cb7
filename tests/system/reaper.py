"""reaper.py: running programs that go to the background (podfsd
--daemon, podfs without -f, mount helpers) and still learning how they
end.

A program that daemonizes leaves its parent, and its exit status would go
to init. `Reaper` is a helper process made a child subreaper
(PR_SET_CHILD_SUBREAPER): it runs commands for the test, and every
process they leave behind becomes its child, so it can say which are
still running and collect their exit statuses. It runs in a network
namespace (`netns`) and a private mount namespace (`private_mounts`) if
asked: mounts made there are invisible outside and go with it. Its
environment sends sanitizer reports to the test's logs/ (scanned at
teardown), in case the programs keep the variables.

finish() (always call it: use it as a context manager) kills whatever is
left and ends the helper.
"""

import json
import select
import signal
import subprocess

from harness.procs import san_env
from helpers import PYTHON, private_mounts_argv

SCRIPT = r"""
import ctypes, json, os, signal, subprocess, sys, time
if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    sys.exit("prctl(PR_SET_CHILD_SUBREAPER) failed")
ended = {}
comm = {}  # pid -> its name, read while a zombie

def reap():
    while True:
        try:
            w = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if w is None:
            return
        try:
            with open(f"/proc/{w.si_pid}/comm") as f:
                comm[w.si_pid] = f.read().strip()
        except OSError:
            comm[w.si_pid] = "?"
        pid, st = os.waitpid(w.si_pid, 0)
        ended[pid] = os.waitstatus_to_exitcode(st)

def children(zombies=False):
    me, out = str(os.getpid()), []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                st = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if st[1] == me and (zombies or st[0] != "Z"):
            out.append(int(p))
    return out

def wait(timeout):
    deadline = time.monotonic() + timeout
    while True:
        reap()
        # Zombies too: one that ended after reap() is reaped next time.
        if not children(zombies=True):
            return []
        if time.monotonic() >= deadline:
            return children()
        time.sleep(0.05)

print(json.dumps("ready"), flush=True)
for line in sys.stdin:
    op, *a = json.loads(line)
    if op == "run":
        argv, timeout = a
        try:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=timeout)
            res = [r.returncode, r.stdout, r.stderr]
        except subprocess.TimeoutExpired as e:
            res = [None, "", f"timed out after {timeout}s (its output still open?)"]
    elif op == "wait":
        left = wait(a[0])
        res = [{str(k): v for k, v in ended.items()}, left,
               {str(k): v for k, v in comm.items()}]
    elif op == "kill":
        res = children()
        for p in res:
            os.kill(p, signal.SIGKILL)
        wait(10)
    print(json.dumps(res), flush=True)
"""


class Reaper:
    def __init__(self, env, tag, netns=None, private_mounts=False):
        argv = [PYTHON, "-c", SCRIPT]
        if private_mounts:
            argv = private_mounts_argv(env.root, argv)
        if netns is not None:
            argv = netns.exec_argv(argv)
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, env=san_env(env.logs, tag))
        assert self._reply(30) == "ready", "the reaper did not start"

    def _reply(self, timeout):
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        assert r, f"the reaper did not answer within {timeout}s"
        line = self.p.stdout.readline()
        assert line, "the reaper died"
        return json.loads(line)

    def _call(self, timeout, *req):
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        return self._reply(timeout + 10)

    def run(self, argv, timeout=60):
        """Runs argv to its end (bounded): (status, stdout, stderr);
        status None if it timed out (and was killed)."""
        return tuple(self._call(timeout, "run", [str(x) for x in argv], timeout))

    def sh(self, script, timeout=60):
        return self.run(["sh", "-ec", script], timeout)

    def left_behind(self, timeout):
        """Waits up to timeout for every process left behind to end:
        ({pid: exit status} of those that ended, [pids still running]).
        self.comm then names those that ended ({pid: name})."""
        ended, left, comm = self._call(timeout, "wait", timeout)
        self.comm = {int(k): v for k, v in comm.items()}
        return {int(k): v for k, v in ended.items()}, left

    def finish(self):
        """Kills whatever is still running, ends the helper. Returns the
        pids it had to kill (none if the test ended them all)."""
        killed = []
        if self.p.poll() is None:
            try:
                killed = self._call(10, "kill")
            except (AssertionError, OSError):
                pass
            self.p.stdin.close()
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.send_signal(signal.SIGKILL)
                self.p.wait(10)
        return killed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.finish()


def proc_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
