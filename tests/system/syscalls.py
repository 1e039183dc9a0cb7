"""syscalls.py: ctypes wrappers for the system calls Python's os module
does not offer: renameat2, utimensat with UTIME_OMIT, fallocate modes,
name_to_handle_at, getdents64 (what a READDIR said, unfiltered),
inotify (what a process watching a directory sees), and mincore (which
pages of a file are in the page cache).
"""

import ctypes
import ctypes.util
import os
import struct

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2
FALLOC_FL_KEEP_SIZE = 1
FALLOC_FL_PUNCH_HOLE = 2
FALLOC_FL_ZERO_RANGE = 0x10


def _check(ret):
    if ret != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def renameat2(old, new, flags):
    _libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                                ctypes.c_char_p, ctypes.c_uint]
    _check(_libc.renameat2(AT_FDCWD, os.fsencode(old), AT_FDCWD, os.fsencode(new), flags))


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def utimensat(path, atime, mtime, flags=0):
    """atime/mtime: (sec, nsec) tuples, or UTIME_NOW / UTIME_OMIT."""
    def ts(v):
        if v in (UTIME_NOW, UTIME_OMIT):
            return _Timespec(0, v)
        return _Timespec(v[0], v[1])
    times = (_Timespec * 2)(ts(atime), ts(mtime))
    _libc.utimensat.argtypes = [ctypes.c_int, ctypes.c_char_p,
                                ctypes.POINTER(_Timespec), ctypes.c_int]
    _check(_libc.utimensat(AT_FDCWD, os.fsencode(path), times, flags))


def fallocate(fd, mode, offset, length):
    _libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    _check(_libc.fallocate(fd, mode, offset, length))


class _FileHandle(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int),
                ("f_handle", ctypes.c_ubyte * 128)]


def cached_pages(fd, size):
    """Which pages of the file fd (its first size bytes) are in the page
    cache: a list of bools (mincore of a shared mapping, which neither
    reads nor brings in a page)."""
    page = os.sysconf("SC_PAGE_SIZE")
    n = (size + page - 1) // page
    _libc.mmap.restype = ctypes.c_void_p
    _libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                           ctypes.c_int, ctypes.c_long]
    _libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    _libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    addr = _libc.mmap(None, n * page, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
    if addr in (None, ctypes.c_void_p(-1).value):
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    try:
        vec = ctypes.create_string_buffer(n)
        _check(_libc.mincore(addr, n * page, vec))
        return [bool(b & 1) for b in vec.raw[:n]]
    finally:
        _libc.munmap(addr, n * page)


def name_to_handle(path):
    """The kernel's persistent handle for path: (handle_type, bytes)."""
    h = _FileHandle()
    h.handle_bytes = 128
    mnt = ctypes.c_int()
    _libc.name_to_handle_at.argtypes = [ctypes.c_int, ctypes.c_char_p,
                                        ctypes.POINTER(_FileHandle),
                                        ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    _check(_libc.name_to_handle_at(AT_FDCWD, os.fsencode(path), ctypes.byref(h),
                                   ctypes.byref(mnt), 0))  # 0: do not follow a final symlink
    return h.handle_type, bytes(h.f_handle[:h.handle_bytes])


def getdents(path):
    """{name: (d_ino, d_type)} from getdents64 on path, "." and ".."
    included: what the file system's READDIR said (ls -i and os.stat would
    ask the kernel's dentries instead)."""
    nr = {"x86_64": 217, "aarch64": 61}[os.uname().machine]
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(1 << 16)
    out = {}
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        while True:
            n = libc.syscall(nr, fd, buf, len(buf))
            if n < 0:
                raise OSError(ctypes.get_errno(), "getdents64")
            if n == 0:
                return out
            raw, pos = buf.raw[:n], 0
            while pos < n:
                ino, _, reclen, typ = struct.unpack_from("<QqHB", raw, pos)
                name = raw[pos + 19:pos + reclen].split(b"\0", 1)[0].decode()
                assert name not in out, name
                out[name] = (ino, typ)
                pos += reclen
    finally:
        os.close(fd)


IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200


def inotify_watch(path, mask):
    """An inotify fd (non-blocking) watching directory path for mask."""
    fd = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    if _libc.inotify_add_watch(fd, os.fsencode(path), ctypes.c_uint32(mask)) < 0:
        e = ctypes.get_errno()
        os.close(fd)
        raise OSError(e, os.strerror(e))
    return fd


def inotify_events(fd):
    """The events queued on inotify fd now, as (mask, name) pairs."""
    out = []
    while True:
        try:
            buf = os.read(fd, 65536)
        except BlockingIOError:
            return out
        off = 0
        while off < len(buf):
            _wd, mask, _cookie, n = struct.unpack_from("iIII", buf, off)
            name = buf[off + 16:off + 16 + n].rstrip(b"\0").decode()
            out.append((mask, name))
            off += 16 + n
