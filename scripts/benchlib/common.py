"""The bench's bottom layer: progress log, errors, running short commands with
a timeout, sizes, ports, mount lookups and dropping the kernel's caches.
Everything here is stateless (but for the log offsets Ctx.spawn records) and
knows nothing of targets or workloads."""

import os
import socket
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def log(msg):
    ts = time.strftime("%H:%M:%S")
    print("[bench %s] %s" % (ts, msg), file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


class Interrupted(BaseException):
    pass


def parse_size(s):
    s = s.strip().upper().rstrip("B").rstrip("I")
    mult = 1
    for suf, m in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40)):
        if s.endswith(suf):
            mult = m
            s = s[:-1]
            break
    return int(float(s) * mult)


def fmt_size(n):
    for suf, m in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= m and n % m == 0:
            return "%d%s" % (n // m, suf)
    return str(n)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def listening(port):
    """True if something listens on TCP port (checked in /proc/net/tcp*, no connect)."""
    for fn in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(fn) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            pass
    return False


def unescape_mount(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 3 < len(s) + 0 and s[i + 1:i + 4].isdigit():
            out.append(chr(int(s[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def mount_fstype(path):
    """fstype of the mount whose mount point is exactly path (last one wins), or None.
    Only path's parent is resolved: resolving path itself would stat the
    mount's root, which waits for a FUSE daemon that does not answer."""
    path = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(path))), os.path.basename(path))
    found = None
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields = left.split()
                if len(fields) >= 5 and unescape_mount(fields[4]) == path:
                    found = right.split()[0]
    except OSError:
        pass
    return found


def ext4_without_journal(path):
    """The device name if path is on an ext4 filesystem without a journal,
    else None. There ext4 does not hand out a deleted inode again for 60 s
    (360 s while its inode table block is dirty: fs/ext4/ialloc.c,
    recently_deleted), and each new inode is found by looking at every
    recently deleted one first: creating files soon after many were
    deleted runs several times slower, on local disk as through any FUSE
    target. The kernel lists a journal in /proc/fs/jbd2 as DEV-N."""
    r = run(["findmnt", "-n", "-o", "SOURCE,FSTYPE", "-T", path], check=False)
    fields = r.stdout.decode().split()
    if r.returncode != 0 or len(fields) != 2 or fields[1] != "ext4":
        return None
    dev = os.path.basename(os.path.realpath(fields[0]))
    try:
        journals = os.listdir("/proc/fs/jbd2")
    except OSError:
        journals = []
    if not os.path.isdir("/proc/fs/ext4/" + dev) or any(j.startswith(dev + "-") for j in journals):
        return None
    return dev


NO_JOURNAL_WARNING = ("the export is on ext4 without a journal (%s): ext4 then reuses no deleted "
                      "inode for 60-360 s and looks at each recently deleted one before it finds a "
                      "free inode, so files created soon after another run's deletes (create, "
                      "smallfiles, untar, pip, git) cost several times more, local disk included, "
                      "and by how much depends on the order of the runs. Put --dir on a "
                      "filesystem with a journal (a loop-mounted mkfs.ext4 image will do)")


LOG_START = {}   # log path -> offset where the current process's output starts


def tail(path, n=8):
    """Last n non-empty lines the current process wrote to its log."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(LOG_START.get(path, 0), size - 4096))
            lines = [l.strip() for l in f.read().decode("utf-8", "replace").splitlines()
                     if l.strip() and not l.startswith("=== ")]
            return " | ".join(lines[-n:]) or "(no output)"
    except OSError:
        return ""


def rcstr(rc):
    return "killed by signal %d" % -rc if rc is not None and rc < 0 else "exited rc=%s" % rc


def run(cmd, timeout=60, check=True, **kw):
    """Run a short command; return CompletedProcess.  cwd=/ so we never pin a mount."""
    kw.setdefault("cwd", "/")
    kw.setdefault("stdout", subprocess.PIPE)
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        try:   # a process stuck in an uninterruptible FUSE wait may not die: don't hang with it
            p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            log("WARNING: pid %d (%s) unkillable, abandoned" % (p.pid, cmd[0]))
        raise BenchError("timeout after %gs: %s" % (timeout, " ".join(cmd)))
    except BaseException:
        p.kill()
        raise
    r = subprocess.CompletedProcess(cmd, p.returncode, out, err)
    if check and r.returncode != 0:
        text = r.stderr or b""
        if isinstance(r.stdout, bytes):
            text = r.stdout + b"\n" + text
        lines = [l.strip() for l in text.decode("utf-8", "replace").splitlines() if l.strip()]
        errs = [l for l in lines if "error" in l.lower()]
        msg = (errs or lines or [""])[-1 if not errs else 0]
        raise BenchError("%s failed (rc=%d): %s" % (os.path.basename(cmd[0]), r.returncode, msg[:300]))
    return r


def timed(cmd, timeout):
    """Wall seconds of run(cmd)."""
    t0 = time.monotonic()
    run(cmd, timeout=timeout)
    return time.monotonic() - t0


def safe_sync(timeout=300):
    """sync(2) in a child: a hung FUSE mount with dirty pages must not hang the bench."""
    try:
        run(["sync"], timeout=timeout)
        return True
    except BenchError as e:
        log("WARNING: %s" % e)
        return False


def drop_caches():
    if not safe_sync():
        return False
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError as e:
        if not getattr(drop_caches, "warned", False):
            log("WARNING: cannot drop caches (%s): 'cold' numbers are not cold" % e)
            drop_caches.warned = True
        return False
