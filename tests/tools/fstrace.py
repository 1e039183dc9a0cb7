"""fstrace.py: a program's file accesses under one tree, captured once
with strace and written as a podfs-replay trace (its format: trace.h).

Shared by scripts/bench --hosts (a venv start) and
tests/system/test_pod_start.py (a small package tree); no dependency
beyond the standard library and strace.

    argv = strace_argv(raw_path, program_argv)      # run it (cwd, env: yours)
    text, stats = convert(open(raw_path).read(), root, cwd="/",
                          pages=load_pages(pages_path))

* Every call the program made on the tree, in order: stats (stat, lstat,
  newfstatat, statx: result, mode, and size of files and links), opens
  (flags, result), reads (size, result, and the SHA-256 of the bytes, read
  back from the tree at the file's position: the tree must not change
  between the capture and convert()), lseek, isatty's ioctl, listings
  (read to their end: the names' count and hash), readlink, access,
  close, execve. Names that do not exist are kept: most of a Python
  start's lookups are for them.
* Mappings: the pages of each file of the tree that the program had
  touched through its mappings at its end (its own /proc/self/pagemap,
  written by PAGES_SNIPPET run as the program's last code) become a
  "fault" line at the file's first mmap (the executable's right after
  its exec).
* Calls on other files (libc, /proc, the locale) are left out; so are
  the calls of a child process on files it inherited (a new process's
  own opens are kept). stats counts what was kept and left out.
"""

import hashlib
import json
import os
import re

TRACE_HEADER = "podfs-trace 1"
PAGE = 4096

STRACE_CALLS = ("execve,open,openat,stat,lstat,newfstatat,fstat,statx,access,faccessat,"
                "faccessat2,readlink,readlinkat,read,pread64,lseek,getdents64,close,mmap,"
                "ioctl,dup,dup2,dup3,fcntl,chdir,fchdir,clone,clone3,fork,vfork")

AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
AT_EMPTY_PATH = 0x1000
CLONE_FILES = 0x400
O_WRITE_FLAGS = 0o3 | 0o100 | 0o1000 | 0o2000 | 0o200 | 0o20000000  # ACCMODE CREAT TRUNC APPEND EXCL TMPFILE
TCGETS = 0x5401

# Run by the traced program where its trace should end (after the imports,
# before checks of its own): convert() stops at this lookup.
END_MARKER = "/.podfs-trace-end"
END_SNIPPET = """
try:
    __import__("os").stat(%r)
except OSError:
    pass
""" % END_MARKER

# Run as the traced program's last code (argv or -c text): writes
# {file: [page numbers touched]} of the mappings of files under
# $PODFS_TRACE_ROOT (resolved) to $PODFS_TRACE_PAGES. Reads only /proc.
PAGES_SNIPPET = r"""
def _podfs_trace_pages():
    import os as _o
    root = _o.environ.get("PODFS_TRACE_ROOT", "").rstrip("/") + "/"
    out = _o.environ.get("PODFS_TRACE_PAGES")
    if not out or root == "/":
        return
    found = {}
    maps = open("/proc/self/maps").read().splitlines()
    fd = _o.open("/proc/self/pagemap", _o.O_RDONLY)
    try:
        for line in maps:
            parts = line.split(None, 5)
            if len(parts) < 6 or not parts[5].startswith(root):
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            off = int(parts[2], 16)
            n = (hi - lo) // 4096
            raw = _o.pread(fd, 8 * n, (lo // 4096) * 8)
            pages = found.setdefault(parts[5], set())
            for i in range(len(raw) // 8):
                if raw[8 * i + 7] & 0x80:  # bit 63: present
                    pages.add(off // 4096 + i)
    finally:
        _o.close(fd)
    with open(out, "w") as f:
        f.write(repr({k: sorted(v) for k, v in found.items()}))
_podfs_trace_pages()
"""


class TraceError(Exception):
    pass


def strace_argv(out_path, argv):
    """argv run under strace -f, its calls (raw numbers, no data) to out_path."""
    return ["strace", "-f", "-qq", "-X", "raw", "-s", "0", "-e", "trace=" + STRACE_CALLS,
            "-o", str(out_path)] + [str(a) for a in argv]


def pages_env(root, pages_path):
    """The environment PAGES_SNIPPET needs."""
    return {"PODFS_TRACE_ROOT": os.path.realpath(root), "PODFS_TRACE_PAGES": str(pages_path)}


def load_pages(path):
    """What PAGES_SNIPPET wrote: {resolved path: [pages]}; {} if nothing."""
    import ast
    try:
        with open(path) as f:
            return ast.literal_eval(f.read() or "{}")
    except FileNotFoundError:
        return {}


# --- strace's text -------------------------------------------------------------

_LINE = re.compile(r"^(\d+) +(.*)$")
_DONE = re.compile(r"^(.*)\) += (-?\d+|0x[0-9a-f]+|\?)(?: (E[A-Z0-9]+) \(.*\))?.*$")
_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*)$")


def _split_args(s):
    """Top-level comma-separated arguments of a call's text."""
    out, depth, cur, i, quote = [], 0, [], 0, False
    while i < len(s):
        c = s[i]
        if quote:
            cur.append(c)
            if c == "\\":
                cur.append(s[i + 1])
                i += 1
            elif c == '"':
                quote = False
        elif c == '"':
            quote = True
            cur.append(c)
        elif s.startswith("/*", i):
            j = s.find("*/", i)
            j = len(s) if j < 0 else j + 2
            cur.append(s[i:j])
            i = j - 1
        elif c in "{[(":
            depth += 1
            cur.append(c)
        elif c in "}])":
            depth -= 1
            cur.append(c)
        elif c == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    if cur or out:
        out.append("".join(cur).strip())
    return out


_ESC = {"n": 10, "t": 9, "r": 13, "v": 11, "f": 12, "a": 7, "b": 8, "\\": 92, '"': 34, "'": 39}


def _cstring(arg):
    """The bytes of a quoted strace string (C escapes), or None if arg is
    no string (an address: strace prints one when it could not read it)."""
    if not arg.startswith('"'):
        return None
    end = arg.rfind('"')
    body, out, i = arg[1:end], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8", "surrogateescape")
            i += 1
            continue
        n = body[i + 1]
        if n == "x":
            out.append(int(body[i + 2:i + 4], 16))
            i += 4
        elif n in "01234567":
            j = i + 1
            while j < len(body) and j < i + 4 and body[j] in "01234567":
                j += 1
            out.append(int(body[i + 1:j], 8))
            i = j
        else:
            out.append(_ESC.get(n, ord(n)))
            i += 2
    return bytes(out)


def _num(arg):
    """An integer argument: decimal, hex, octal, or an OR of them (-X raw)."""
    v = 0
    for part in arg.split("|"):
        part = part.strip()
        if not part:   # statx's flags: "|0x1000" (the 0 of AT_STATX_SYNC_AS_STAT)
            continue
        v |= int(part, 0) if not (part.startswith("0") and part[1:2].isdigit()) else int(part, 8)
    return v


def _field(struct, name):
    m = re.search(r"\b%s=(0x[0-9a-f]+|-?\d+)" % name, struct)
    return None if m is None else _num(m.group(1))


def _calls(text):
    """(pid, name, [args], result, errno name or None) per finished call,
    unfinished ones joined with their resumption."""
    pending = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        pid, rest = int(m.group(1)), m.group(2)
        if rest.startswith("+++") or rest.startswith("---"):
            continue
        r = _RESUMED.match(rest)
        if r:
            head = pending.pop(pid, None)
            if head is None:
                continue
            rest = head + r.group(2)
        elif rest.endswith("<unfinished ...>"):
            pending[pid] = rest[:-len("<unfinished ...>")].rstrip()
            continue
        d = _DONE.match(rest)
        if not d or "(" not in d.group(1):
            continue
        name, _, argtext = d.group(1).partition("(")
        if d.group(2) == "?":
            continue
        yield pid, name, _split_args(argtext), _num(d.group(2)), d.group(3)


# --- the conversion -------------------------------------------------------------

def _enc(rel):
    """A trace PATH: bytes below '!', above '~' and '%' percent-encoded."""
    return "".join(chr(b) if 0x21 <= b <= 0x7e and b != 0x25 else "%%%02X" % b for b in rel)


def _h8(data):
    return hashlib.sha256(data).hexdigest()[:16]


def _res(val, err):
    return "-" + err if err else str(val)


class _File:
    def __init__(self, slot, rel, local):
        self.slot, self.rel, self.local = slot, rel, local
        self.pos = 0
        self.listing = None   # index in the output of its pending getdents line


class _Conv:
    def __init__(self, root, cwd, pages):
        self.roots = sorted({os.fsencode(os.path.abspath(root)).rstrip(b"/"),
                             os.fsencode(os.path.realpath(root)).rstrip(b"/")}, key=len, reverse=True)
        self.local_root = os.fsencode(os.path.realpath(root))
        self.cwd = {}              # pid -> cwd (bytes)
        self.default_cwd = os.fsencode(cwd)
        self.tables = {}           # pid -> {fd: _File or None (not ours)}
        self.free = []             # slots given back, and the next new one
        self.next_slot = 3
        self.out = []
        self.stats = {"calls": 0, "kept": 0, "outside": 0, "dropped": {}, "listings": 0,
                      "faults": 0, "fault_pages": 0, "read_bytes": 0}
        rr = os.path.realpath(root)
        self.pages = {os.fsencode(os.path.relpath(k, rr)): v for k, v in (pages or {}).items()
                      if k.startswith(rr.rstrip("/") + "/")}
        self.faulted = set()
        self.exec_index = None

    def drop(self, why):
        self.stats["dropped"][why] = self.stats["dropped"].get(why, 0) + 1

    def table(self, pid):
        return self.tables.setdefault(pid, {})

    def rel(self, pid, dirfd, path):
        """(relative path bytes, local path) if path (from dirfd) is in the tree, else None."""
        if path is None:
            return None
        if path.startswith(b"/"):
            full = path
        elif dirfd == AT_FDCWD:
            full = self.cwd.get(pid, self.default_cwd).rstrip(b"/") + b"/" + path
        else:
            f = self.table(pid).get(dirfd)
            if f is None:
                return None
            full = self.local_root + b"/" + f.rel + b"/" + path
        for r in self.roots + [self.local_root]:
            if full == r:
                return b".", self.local_root
            if full.startswith(r + b"/"):
                rel = full[len(r) + 1:].rstrip(b"/") or b"."
                depth = 0
                for c in rel.split(b"/"):
                    depth += -1 if c == b".." else (0 if c in (b"", b".") else 1)
                    if depth < 0:
                        return None
                return rel, os.path.join(self.local_root, rel)
        return None

    def emit(self, line):
        self.out.append(line)
        self.stats["kept"] += 1

    def slot(self):
        if self.free:
            self.free.sort()
            return self.free.pop(0)
        self.next_slot += 1
        return self.next_slot - 1

    def stat_tail(self, val, struct, mode_key, size_key):
        if val != 0 or struct is None or not struct.startswith("{"):
            return ""
        mode, size = _field(struct, mode_key), _field(struct, size_key)
        if mode is None:
            return ""
        fmt = mode & 0o170000
        keep = fmt in (0o100000, 0o120000) and size is not None
        return " 0%o %s" % (mode, size if keep else "-")

    def fd_file(self, pid, fd):
        return self.table(pid).get(fd)

    def fault(self, rel):
        if rel in self.faulted:
            return
        self.faulted.add(rel)
        pages = self.pages.get(rel)
        local = os.path.join(self.local_root, rel)
        try:
            npg = (os.stat(local).st_size + PAGE - 1) // PAGE
        except OSError:
            npg = 0
        pages = sorted(p for p in (pages or ()) if p < npg)
        runs, i = [], 0
        while i < len(pages):
            j = i
            while j + 1 < len(pages) and pages[j + 1] == pages[j] + 1:
                j += 1
            runs.append(str(pages[i]) if i == j else "%d-%d" % (pages[i], pages[j]))
            i = j + 1
        self.stats["faults"] += 1
        self.stats["fault_pages"] += len(pages)
        self.emit("fault %s %s" % (_enc(rel), ",".join(runs) or "-"))

    def call(self, pid, name, args, val, err):
        self.stats["calls"] += 1
        h = getattr(self, "c_" + name, None)
        if h is None:
            return
        try:
            h(pid, args, val, err)
        except (IndexError, ValueError) as e:
            raise TraceError("cannot read %s(%s) = %s: %s" % (name, ", ".join(args), val, e)) from e

    # processes and threads
    def c_clone(self, pid, args, val, err):
        if err or val <= 0:
            return
        flags = 0
        for a in args:
            if a.startswith("flags="):
                flags = _num(a[6:])
            elif a.startswith("{") and "flags=" in a:
                flags = _field(a, "flags") or 0
        if flags & CLONE_FILES:
            self.tables[val] = self.table(pid)
        else:
            # Its inherited fds are not followed: a new process's calls on
            # them are left out (counted).
            self.tables[val] = {fd: None for fd in self.table(pid)}
        self.cwd[val] = self.cwd.get(pid, self.default_cwd)

    c_clone3 = c_clone

    def c_fork(self, pid, args, val, err):
        self.c_clone(pid, ["flags=0"], val, err)

    c_vfork = c_fork

    def c_chdir(self, pid, args, val, err):
        p = _cstring(args[0])
        if not err and p is not None:
            self.cwd[pid] = p if p.startswith(b"/") else \
                self.cwd.get(pid, self.default_cwd).rstrip(b"/") + b"/" + p

    def c_fchdir(self, pid, args, val, err):
        if not err:
            self.drop("fchdir")

    # names
    def path_call(self, pid, dirfd, patharg):
        return self.rel(pid, dirfd, _cstring(patharg))

    def c_execve(self, pid, args, val, err):
        r = self.path_call(pid, AT_FDCWD, args[0])
        if r is None:
            self.stats["outside"] += 1
            return
        self.emit("exec %s %s" % (_enc(r[0]), _res(val, err)))
        if not err:
            self.exec_index = len(self.out)

    def stat_line(self, kind, rel, val, err, tail):
        self.emit("%s %s %s%s" % (kind, _enc(rel), _res(val, err), tail))

    def c_stat(self, pid, args, val, err, kind="stat"):
        r = self.path_call(pid, AT_FDCWD, args[0])
        if r is None:
            self.stats["outside"] += 1
            return
        self.stat_line(kind, r[0], val, err, self.stat_tail(val, args[1], "st_mode", "st_size"))

    def c_lstat(self, pid, args, val, err):
        self.c_stat(pid, args, val, err, "lstat")

    def c_fstat(self, pid, args, val, err):
        f = self.fd_file(pid, _num(args[0]))
        if f is None:
            self.stats["outside"] += 1
            return
        self.emit("fstat %d %s%s" % (f.slot, _res(val, err),
                                     self.stat_tail(val, args[1], "st_mode", "st_size")))

    def at_stat(self, pid, dirfd, path, flags, struct, val, err, mode_key, size_key):
        if path == b"" and flags & AT_EMPTY_PATH:
            f = self.fd_file(pid, dirfd)
            if f is None:
                self.stats["outside"] += 1
                return
            self.emit("fstat %d %s%s" % (f.slot, _res(val, err),
                                         self.stat_tail(val, struct, mode_key, size_key)))
            return
        r = self.rel(pid, dirfd, path)
        if r is None:
            self.stats["outside"] += 1
            return
        kind = "lstat" if flags & AT_SYMLINK_NOFOLLOW else "stat"
        self.stat_line(kind, r[0], val, err, self.stat_tail(val, struct, mode_key, size_key))

    def c_newfstatat(self, pid, args, val, err):
        self.at_stat(pid, _num(args[0]), _cstring(args[1]), _num(args[3]), args[2], val, err,
                     "st_mode", "st_size")

    def c_statx(self, pid, args, val, err):
        self.at_stat(pid, _num(args[0]), _cstring(args[1]), _num(args[2]), args[4], val, err,
                     "stx_mode", "stx_size")

    def c_access(self, pid, args, val, err):
        r = self.path_call(pid, AT_FDCWD, args[0])
        if r is None:
            self.stats["outside"] += 1
            return
        self.emit("access %s %d %s" % (_enc(r[0]), _num(args[1]), _res(val, err)))

    def c_faccessat(self, pid, args, val, err):
        r = self.path_call(pid, _num(args[0]), args[1])
        if r is None:
            self.stats["outside"] += 1
            return
        if len(args) > 3 and _num(args[3]) != 0:
            self.drop("faccessat2 with flags")
            return
        self.emit("access %s %d %s" % (_enc(r[0]), _num(args[2]), _res(val, err)))

    c_faccessat2 = c_faccessat

    def c_readlink(self, pid, args, val, err, dirfd=AT_FDCWD):
        r = self.path_call(pid, dirfd, args[0])
        if r is None:
            self.stats["outside"] += 1
            return
        self.emit("readlink %s %d %s" % (_enc(r[0]), _num(args[2]), _res(val, err)))

    def c_readlinkat(self, pid, args, val, err):
        self.c_readlink(pid, args[1:], val, err, dirfd=_num(args[0]))

    # files
    def c_openat(self, pid, args, val, err, dirfd=None):
        if dirfd is None:
            dirfd, args = _num(args[0]), args[1:]
        r = self.path_call(pid, dirfd, args[0])
        tab = self.table(pid)
        if r is None:
            self.stats["outside"] += 1
            if not err:
                tab[val] = None
            return
        flags = _num(args[1])
        if flags & O_WRITE_FLAGS:
            raise TraceError("the program opened %s to write (flags 0x%x): a replay only reads"
                             % (r[0].decode(errors="replace"), flags))
        if err:
            self.emit("open %s 0x%x -%s" % (_enc(r[0]), flags, err))
            return
        f = _File(self.slot(), r[0], r[1])
        tab[val] = f
        self.emit("open %s 0x%x %d" % (_enc(r[0]), flags, f.slot))

    def c_open(self, pid, args, val, err):
        self.c_openat(pid, args, val, err, dirfd=AT_FDCWD)

    def c_close(self, pid, args, val, err):
        fd = _num(args[0])
        tab = self.table(pid)
        if fd not in tab:
            return
        f = tab.pop(fd)
        if f is None:
            return
        if f.listing is not None and f.listing >= 0:
            self.out[f.listing] = None     # a listing not read to its end
            self.drop("listing not read to its end")
        self.emit("close %d %s" % (f.slot, _res(val, err)))
        self.free.append(f.slot)

    def data_hash(self, f, off, n):
        if n <= 0:
            return ""
        try:
            with open(f.local, "rb") as fh:
                fh.seek(off)
                data = fh.read(n)
        except OSError:
            return " -"
        if len(data) != n:
            return " -"
        self.stats["read_bytes"] += n
        return " " + _h8(data)

    def c_read(self, pid, args, val, err):
        f = self.fd_file(pid, _num(args[0]))
        if f is None:
            return
        size = _num(args[2])
        h = "" if err else self.data_hash(f, f.pos, val)
        self.emit("read %d %d %s%s" % (f.slot, size, _res(val, err), h))
        if not err:
            f.pos += val

    def c_pread64(self, pid, args, val, err):
        f = self.fd_file(pid, _num(args[0]))
        if f is None:
            return
        size, off = _num(args[2]), _num(args[3])
        h = "" if err else self.data_hash(f, off, val)
        self.emit("pread %d %d %d %s%s" % (f.slot, size, off, _res(val, err), h))

    def c_lseek(self, pid, args, val, err):
        f = self.fd_file(pid, _num(args[0]))
        if f is None:
            return
        self.emit("lseek %d %d %d %s" % (f.slot, _num(args[1]), _num(args[2]), _res(val, err)))
        if not err:
            f.pos = val

    def c_ioctl(self, pid, args, val, err):
        f = self.fd_file(pid, _num(args[0]))
        if f is None:
            return
        req = _num(args[1])
        if req != TCGETS:
            self.drop("ioctl 0x%x" % req)
            return
        self.emit("ioctl %d 0x%x %s" % (f.slot, req, _res(val, err)))

    def c_getdents64(self, pid, args, val, err):
        f = self.fd_file(pid, _num(args[0]))
        if f is None:
            return
        if err:
            self.drop("failed getdents64")
            return
        if f.listing is None and val > 0:
            # The whole listing is replayed at its first call.
            f.listing = len(self.out)
            self.out.append(None)
            self.stats["kept"] += 1
            f.listing_size = _num(args[2])
        elif f.listing is not None and val == 0:
            try:
                names = sorted(n for n in os.listdir(f.local))
            except OSError as e:
                raise TraceError("listing %s again: %s" % (f.local, e)) from e
            hsh = hashlib.sha256(b"".join(n + b"\n" for n in names)).hexdigest()[:16]
            self.out[f.listing] = "getdents %d %d %d %s" % (f.slot, f.listing_size, len(names), hsh)
            self.stats["listings"] += 1
            f.listing = -1     # read to its end: later calls are the replay's own
        elif f.listing is None and val == 0:
            # An empty directory's first call already ends it.
            self.out.append("getdents %d %d 0 %s" % (f.slot, _num(args[2]),
                                                     hashlib.sha256(b"").hexdigest()[:16]))
            self.stats["kept"] += 1
            self.stats["listings"] += 1
            f.listing = -1

    def c_mmap(self, pid, args, val, err):
        fd = _num(args[4])
        f = self.fd_file(pid, fd) if fd >= 0 else None
        if f is None or err:
            return
        self.fault(os.path.relpath(os.path.realpath(f.local), self.local_root))

    def c_dup(self, pid, args, val, err):
        if not err and self.fd_file(pid, _num(args[0])) is not None:
            self.drop("dup of a tree file")
            self.table(pid)[val] = None

    c_dup2 = c_dup
    c_dup3 = c_dup

    def c_fcntl(self, pid, args, val, err):
        if self.fd_file(pid, _num(args[0])) is None:
            return
        cmd = _num(args[1])
        if cmd in (0, 1030) and not err:   # F_DUPFD, F_DUPFD_CLOEXEC
            self.drop("dup of a tree file")
            self.table(pid)[val] = None

    def finish(self):
        for tab in self.tables.values():
            for f in tab.values():
                if f is not None and f.listing is not None and f.listing >= 0:
                    self.out[f.listing] = None
        # Files mapped without an mmap of ours (the executable, by exec).
        rest = [k for k in self.pages if k not in self.faulted]
        at = self.exec_index if self.exec_index is not None else 0
        extra, self.out = self.out[at:], self.out[:at]
        for rel in sorted(rest):
            self.fault(rel)
        self.out += extra
        lines = [ln for ln in self.out if ln is not None]
        self.stats["ops"] = len(lines)
        return lines


def convert(strace_text, root, cwd="/", pages=None, comment=None):
    """The trace (text) of the calls in strace_text (strace_argv's output)
    on files under root, up to END_SNIPPET's lookup if the program made
    it, and its stats {calls, kept, outside, dropped:
    {why: n}, listings, faults, fault_pages, read_bytes, ops}. pages:
    load_pages() of the run's PAGES_SNIPPET, or None. Raises TraceError
    for what a replay cannot do (a write) or a line it cannot read."""
    c = _Conv(root, cwd, pages)
    marker = '"%s"' % END_MARKER
    for pid, name, args, val, err in _calls(strace_text):
        if name in ("newfstatat", "stat", "statx") and marker in args[:2]:
            break
        c.call(pid, name, args, val, err)
    lines = c.finish()
    if not lines:
        raise TraceError("no call of the program touched %s" % root)
    head = [TRACE_HEADER]
    if comment:
        head += ["# " + ln for ln in comment.splitlines()]
    head.append("# %d calls on the tree, %d elsewhere; %d listings, %d mapped files (%d pages)"
                % (c.stats["kept"], c.stats["outside"], c.stats["listings"], c.stats["faults"],
                   c.stats["fault_pages"]))
    for why, n in sorted(c.stats["dropped"].items()):
        head.append("# left out: %d %s" % (n, why))
    return "\n".join(head + lines) + "\n", c.stats


def results_of(text):
    """The "result key=value ..." line of podfs-replay's output as a dict
    of ints (plus "mismatch_lines": its mismatch lines); None if it has none."""
    res, mism = None, []
    for line in text.splitlines():
        if line.startswith("mismatch "):
            mism.append(line)
        elif line.startswith("result "):
            res = {}
            for w in line.split()[1:]:
                k, _, v = w.partition("=")
                try:
                    res[k] = int(v)
                except ValueError:
                    res[k] = v
    if res is not None:
        res["mismatch_lines"] = mism
    return res


def summary(stats):
    """One line about a conversion's stats, for a log."""
    dropped = ", ".join("%d %s" % (n, w) for w, n in sorted(stats["dropped"].items())) or "none"
    return ("%d calls kept of %d (%d on other files), %d listings, %d mapped files (%d pages), "
            "%.1f MB read; left out: %s" % (stats["ops"], stats["calls"], stats["outside"],
                                            stats["listings"], stats["faults"],
                                            stats["fault_pages"], stats["read_bytes"] / 1e6,
                                            dropped))


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
