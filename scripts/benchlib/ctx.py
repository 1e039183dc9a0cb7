"""Everything a run starts and must stop: processes (each in its own session,
its output in a log file, stopped by pid) and mounts (unmounted, the FUSE
daemon killed if a mount hangs), plus the waits for a mount or a listening
port.  Ctx.cleanup() undoes it all; callers run it in a finally block."""

import datetime
import os
import shutil
import signal
import subprocess
import time

from .common import LOG_START, BenchError, listening, log, mount_fstype, rcstr, run, tail

MOUNT_TIMEOUT = 20.0


class Mount:
    def __init__(self, name, mnt, proc, logpath):
        self.name, self.mnt, self.proc, self.logpath = name, mnt, proc, logpath


class Ctx:
    """Everything started: processes (stopped by pid) and mounts (unmounted)."""

    def __init__(self, logdir):
        self.procs = []   # (name, Popen, logpath)
        self.mounts = []  # (mountpoint, Popen or None)
        self.logdir = logdir

    def spawn(self, name, cmd):
        logpath = os.path.join(self.logdir, name + ".log")
        lf = open(logpath, "ab")
        lf.write(("=== %s %s\n" % (datetime.datetime.now().isoformat(), " ".join(cmd))).encode())
        lf.flush()
        LOG_START[logpath] = lf.tell()
        # own session: a Ctrl-C on the terminal reaches us, not them, so we
        # can unmount before stopping the FUSE daemons.
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=lf, stderr=subprocess.STDOUT,
                             cwd="/", start_new_session=True)
        lf.close()
        self.procs.append((name, p, logpath))
        return p, logpath

    def stop(self, p, timeout=5.0):
        if p.poll() is not None:
            return
        try:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                log("WARNING: pid %d did not die after SIGKILL" % p.pid)
        except ProcessLookupError:
            pass

    def unmount(self, mnt, proc=None):
        if mount_fstype(mnt) is None:
            return True
        for cmd in (["fusermount3", "-u", mnt], ["fusermount", "-u", mnt], ["umount", mnt]):
            if shutil.which(cmd[0]) is None:
                continue
            try:
                if run(cmd, timeout=15, check=False).returncode == 0 and mount_fstype(mnt) is None:
                    return True
            except BenchError:
                pass
        # busy or hung: kill the FUSE daemon (aborts the connection), then retry lazily
        if proc is not None:
            self.stop(proc, timeout=3)
        for cmd in (["fusermount3", "-u", mnt], ["fusermount3", "-uz", mnt], ["umount", "-l", mnt]):
            try:
                if run(cmd, timeout=15, check=False).returncode == 0 and mount_fstype(mnt) is None:
                    return True
            except BenchError:
                pass
        log("WARNING: could not unmount %s" % mnt)
        return False

    def cleanup(self):
        for mnt, proc in reversed(self.mounts):
            self.unmount(mnt, proc)
            if proc is not None:
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        self.mounts = []
        for name, p, _ in reversed(self.procs):
            if p.poll() is None:
                log("stopping %s (pid %d)" % (name, p.pid))
            self.stop(p)
        self.procs = []


def wait_mount(mnt, proc, logpath, timeout=MOUNT_TIMEOUT):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        fst = mount_fstype(mnt)
        if fst is not None and fst.startswith("fuse"):
            return fst
        if proc.poll() is not None:
            raise BenchError("%s before mounting: %s" % (rcstr(proc.returncode), tail(logpath, 4)))
        time.sleep(0.05)
    raise BenchError("not mounted after %gs: %s" % (timeout, tail(logpath, 4)))


def wait_listen(port, proc, logpath, what, timeout=15.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if listening(port):
            return
        if proc.poll() is not None:
            raise BenchError("%s %s: %s" % (what, rcstr(proc.returncode), tail(logpath, 4)))
        time.sleep(0.05)
    raise BenchError("%s not listening on %d after %gs" % (what, port, timeout))
