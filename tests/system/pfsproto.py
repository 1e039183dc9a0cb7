"""pfsproto: a small pure-Python client for the podfs wire protocol, v1.

It exists for hostile-input and confinement tests: it can speak the protocol
correctly (HELLO + AUTH, LOOKUP, GETATTR, OPEN, READ, READDIR, ...) and it
can break every rule on purpose (raw frames with any header, bad names,
forged handles, bad LZ4 blocks). It follows include/podfs/wire.h, codec.h
and auth.h; it needs only the standard library (hmac, hashlib, socket).

Errors: a reply with status != 0 raises PfsError(errno); a connection the
peer closed (or reset) raises Closed; a reply that does not arrive before
the deadline raises Timeout. Nothing here waits without a bound.
"""

import errno
import hashlib
import hmac
import os
import socket
import struct
import time

# --- constants from wire.h ------------------------------------------------

MAGIC = 0x31534650
VERSION = 2
HDR = struct.Struct("<IIQHHi")
HDR_SIZE = 24
assert HDR.size == HDR_SIZE

MAX_IO = 1 << 20
MAX_PAYLOAD = MAX_IO + 4096
MAX_WIRE = MAX_PAYLOAD + MAX_PAYLOAD // 255 + 16
MAX_HANDSHAKE = 512
FH_MAX = 160
NAME_MAX = 255
PATH_MAX = 4096
GROUPS_MAX = 64
HOSTNAME_MAX = 64
NONCE_LEN = 32
MAC_LEN = 32
KEY_LEN = 32

FF_REPLY = 1 << 0
FF_LZ4 = 1 << 1
FF_PUSH = 1 << 2
FF_ZR = 1 << 3

CAP_LZ4 = 1 << 0
CAP_PUSH = 1 << 1
CAP_ZR = 1 << 2
CAP_PUSH_ACK = 1 << 3  # the client acknowledges pushes (wire.h)
CAP_BULK = 1 << 4  # a bulk connection of an existing session (wire.h)
CAP_LIST_XATTR = 1 << 8  # listing items say which asked-for xattrs are absent
CAP_PEER = 1 << 9  # peer-assisted reads: CHUNK, CHUNK_REPORT (wire.h)
CAP_DIR_ATTR = 1 << 5  # directory attributes in the replies to changes
CAP_NEW_DIR = 1 << 6  # MKDIR's reply is mkdir_rep (wire.h)
CAP_DELEG = 1 << 10  # delegations (wire.h "Delegations")
CAP_LIST_COOKIES = 1 << 11  # listings carry READDIR cookies (wire_list.h)

# Opcodes (wire.h PFS_OPS).
OP_HELLO = 1
OP_AUTH = 2
OP_GOODBYE = 3
OP_PING = 4
OP_LOOKUP = 10
OP_GETATTR = 11
OP_SETATTR = 12
OP_READLINK = 13
OP_MKNOD = 14
OP_MKDIR = 15
OP_SYMLINK = 16
OP_UNLINK = 17
OP_RMDIR = 18
OP_RENAME = 19
OP_LINK = 20
OP_OPEN = 21
OP_CREATE = 22
OP_READ = 23
OP_WRITE = 24
OP_RELEASE = 25
OP_FSYNC = 26
OP_OPENDIR = 27
OP_READDIR = 28
OP_RELEASEDIR = 29
OP_STATFS = 30
OP_SETXATTR = 31
OP_GETXATTR = 32
OP_LISTXATTR = 33
OP_REMOVEXATTR = 34
OP_FALLOCATE = 35
OP_GETLK = 36
OP_SETLK = 37
OP_UNLOCK_OWNER = 38
OP_LSEEK = 39
OP_FORGET = 40
OP_REVALIDATE = 41
OP_LOOKUP_DATA = 42
OP_DELEG_DIR = 43
OP_DELEG_RETURN = 44
OP_SLOTS = 45
OP_COPY_RANGE = 50
MAX_COPY = 64 << 20
OP_LISTDIR = 61
OP_LISTDIRS = 63
OP_LISTDIR_PAGE = 62
OP_CHUNK = 64
OP_UNLINKS = 66
UNLINKS_MAX = 64
OP_CREATES = 67
CREATES_MAX = 64
CI_CLOSE, CI_SYNC, CI_ATTRS = 1, 2, 4  # a CREATES item's how
MK_EMPTY, MK_DELEG = 1, 4  # mkdir_rep's flags
RN_DELEG = 1 << 30  # RENAME's flags: answered under a directory delegation
SET_MODE, SET_UID, SET_GID, SET_SIZE, SET_ATIME, SET_MTIME = 1, 2, 4, 8, 16, 32
SLOTS_MAX = 64
SLOTS_PER_SESSION = 256
OP_CHUNK_REPORT = 65
OP_RECLAIM = 58
OP_RECLAIM_DONE = 59
OP_PUSH_ACK = 60
OP_PEER_HELLO = 70
OP_PEER_AUTH = 71
OP_PEER_GET = 72
OP_INVAL_INODE = 100
OP_INVAL_ENTRY = 101
OP_LOCK_WAKE = 102
OP_RECALL = 103
OP_MAX = 128

DE_HAS_ENTRY = 1
LK_RD, LK_WR, LK_UN = 0, 1, 2
LKF_FLOCK = 1 << 0
LKF_WAIT = 1 << 1
ST_GRACE = 85  # ERESTART: the server is in its grace period
AUTH_RESUMED = 1 << 0
AUTH_LOCKS_LOST = 1 << 1
LD_DATA = 1
LD_READABLE = 2
LD_NO_XATTRS = 0x3c  # LD_NO_CAPS | LD_NO_ACL_ACCESS | LD_NO_ACL_DEFAULT | LD_NO_SELINUX
LS_COMPLETE = 1
LS_MORE = 2
INLINE_MAX = 64 * 1024
BATCH_MAX = 4096
# Peer-assisted reads (wire.h).
DIGEST_LEN = 32
PEER_MAGIC = 0x50454550
CK_LOST = 1
CK_SERVER, CK_PEER, CK_HELD = 0, 1, 2
CKR_HAVE, CKR_PEER_BAD, CKR_PEER_MISSING = 1, 2, 4

ATTR_FIELDS = ("ino size blocks atime_s mtime_s ctime_s atime_ns mtime_ns "
               "ctime_ns mode nlink uid gid rdev blksize").split()
ATTR = struct.Struct("<QQQqqqIIIIIIIII")
assert ATTR.size == 3 * 8 + 3 * 8 + 9 * 4


class PfsError(Exception):
    """The server answered with a non-zero status (a positive errno)."""

    def __init__(self, status, op=None):
        self.status = status
        self.errno = status
        name = errno.errorcode.get(status, "?")
        super().__init__(f"status {status} ({name}) for op {op}")


class Closed(Exception):
    """The peer closed or reset the connection."""


class Timeout(Exception):
    """No complete frame arrived before the deadline."""


class BadReply(Exception):
    """The server sent something that breaks the protocol."""


# --- field encoders (no validation: callers may break rules on purpose) ----

def u8(v): return struct.pack("<B", v)
def u16(v): return struct.pack("<H", v)
def u32(v): return struct.pack("<I", v & 0xFFFFFFFF)
def u64(v): return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)
def i64(v): return struct.pack("<q", v)


def _b(s):
    return s.encode() if isinstance(s, str) else bytes(s)


def fh(h):
    h = bytes(h)
    return u8(len(h)) + h


def name(s):
    s = _b(s)
    return u16(len(s)) + s


path = name
xname = name


def host(s):
    return name(s)


def blob(b):
    b = bytes(b)
    return u32(len(b)) + b


def creds(uid=0, gid=0, groups=()):
    return u32(uid) + u32(gid) + u16(len(groups)) + b"".join(u32(g) for g in groups)


ROOT = creds(0, 0)


# --- field decoders --------------------------------------------------------

class Reader:
    def __init__(self, buf):
        self.buf = bytes(buf)
        self.pos = 0

    def take(self, n):
        if n > len(self.buf) - self.pos:
            raise BadReply(f"truncated: need {n} at {self.pos} of {len(self.buf)}")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def u8(self): return self.take(1)[0]
    def u16(self): return struct.unpack("<H", self.take(2))[0]
    def u32(self): return struct.unpack("<I", self.take(4))[0]
    def u64(self): return struct.unpack("<Q", self.take(8))[0]
    def i64(self): return struct.unpack("<q", self.take(8))[0]

    def fh(self):
        n = self.u8()
        if not 1 <= n <= FH_MAX:
            raise BadReply(f"fh length {n}")
        return self.take(n)

    def name(self):
        return self.take(self.u16())

    def bytes(self):
        return self.take(self.u32())

    def attr(self):
        return dict(zip(ATTR_FIELDS, ATTR.unpack(self.take(ATTR.size))))

    def entry(self):
        h = self.fh()
        return h, self.attr()

    def left(self):
        return len(self.buf) - self.pos

    def done(self):
        if self.left():
            raise BadReply(f"{self.left()} trailing bytes")


# --- zero-word coding (wire.h, PFS_FF_ZR) -----------------------------------

ZR_GROUP = 64


def zr_encode(data):
    """Zero-word codes data (always; the caller decides if it pays)."""
    nw, out = len(data) // 8, bytearray()
    for g in range(0, nw, ZR_GROUP):
        words = [data[8 * i:8 * i + 8] for i in range(g, min(nw, g + ZR_GROUP))]
        mask = sum(1 << i for i, w in enumerate(words) if any(w))
        out += u64(mask) + b"".join(w for w in words if any(w))
    return bytes(out + data[8 * nw:])


def zr_decode(src, raw_len):
    """Expands a zero-word block; raises BadReply if it breaks wire.h."""
    if not src or raw_len == 0:
        raise BadReply("zr empty block or raw_len 0")
    nw, dst, pos = raw_len // 8, bytearray(), 0
    for g in range(0, nw, ZR_GROUP):
        n = min(ZR_GROUP, nw - g)
        if len(src) - pos < 8:
            raise BadReply("zr truncated mask")
        mask = int.from_bytes(src[pos:pos + 8], "little")
        pos += 8
        if mask >> n:
            raise BadReply("zr mask bit past the last word")
        for i in range(n):
            if mask >> i & 1:
                if len(src) - pos < 8:
                    raise BadReply("zr missing word")
                dst += src[pos:pos + 8]
                pos += 8
            else:
                dst += bytes(8)
    if len(src) - pos != raw_len % 8:
        raise BadReply("zr block does not end with the tail")
    dst += src[pos:]
    return bytes(dst)


# --- LZ4 block format (enough for tests) -----------------------------------

def lz4_literals(data):
    """A valid LZ4 block holding data as one literal run (no matches)."""
    data = bytes(data)
    n = len(data)
    out = bytearray()
    if n >= 15:
        out.append(0xF0)
        r = n - 15
        while r >= 255:
            out.append(255)
            r -= 255
        out.append(r)
    else:
        out.append(n << 4)
    out += data
    return bytes(out)


def _lz4_length(src, i, n):
    """An LZ4 length that starts as n (a token's nibble) and, if that is
    15, goes on in bytes of src from i while they are 255: (length, the
    index after it). IndexError if src ends first."""
    if n == 15:
        while True:
            b = src[i]
            i += 1
            n += b
            if b != 255:
                break
    return n, i


def lz4_decompress(src, raw_len):
    """Decodes one LZ4 block; raises BadReply if it is malformed or its
    size is not exactly raw_len."""
    src = bytes(src)
    dst = bytearray()
    i, n = 0, len(src)
    try:
        while i < n:
            token = src[i]
            i += 1
            lit, i = _lz4_length(src, i, token >> 4)
            if i + lit > n:
                raise BadReply("lz4 literal run past end")
            dst += src[i:i + lit]
            i += lit
            if i >= n:
                break
            off = src[i] | (src[i + 1] << 8)
            i += 2
            ml, i = _lz4_length(src, i, token & 15)
            ml += 4
            if off == 0 or off > len(dst):
                raise BadReply("lz4 bad offset")
            start = len(dst) - off
            if off >= ml:
                dst += dst[start:start + ml]
            else:  # overlapping: the copy reads what it writes
                for k in range(ml):
                    dst.append(dst[start + k])
            if len(dst) > raw_len:
                raise BadReply("lz4 output too long")
    except IndexError:
        raise BadReply("lz4 truncated block")
    if len(dst) != raw_len:
        raise BadReply(f"lz4 produced {len(dst)} bytes, header said {raw_len}")
    return bytes(dst)


# --- auth ------------------------------------------------------------------

SERVER_LABEL = b"podfs server\0"  # lib/auth.c: the label includes its NUL
CLIENT_LABEL = b"podfs client\0"
PEER_SERVER_LABEL = b"podfs peer server\0"
PEER_CLIENT_LABEL = b"podfs peer client\0"


def load_key(p):
    """A key file: 32 raw bytes or 64 hex digits (+ optional newline)."""
    data = open(p, "rb").read()
    if len(data) == KEY_LEN:
        return data
    return bytes.fromhex(data.strip().decode())


def auth_mac(key, label, cnonce, snonce, client_id):
    msg = label + bytes(cnonce) + bytes(snonce) + u64(client_id)
    return hmac.new(key, msg, hashlib.sha256).digest()


# --- the connection ----------------------------------------------------------

class Frame:
    __slots__ = ("wire_len", "raw_len", "id", "op", "flags", "status", "payload")

    def __init__(self, wire_len, raw_len, id, op, flags, status, payload):
        self.wire_len, self.raw_len, self.id = wire_len, raw_len, id
        self.op, self.flags, self.status, self.payload = op, flags, status, payload

    def __repr__(self):
        return (f"Frame(id={self.id} op={self.op} flags={self.flags:#x} "
                f"status={self.status} len={len(self.payload)})")


def pack_hdr(wire_len, raw_len, id, op, flags=0, status=0):
    return HDR.pack(wire_len & 0xFFFFFFFF, raw_len & 0xFFFFFFFF,
                    id & 0xFFFFFFFFFFFFFFFF, op & 0xFFFF, flags & 0xFFFF, status)


class Conn:
    """One TCP connection to podfsd. All waits are bounded by `timeout`."""

    def __init__(self, host, port, timeout=10.0, source=None, rcvbuf=None):
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=timeout,
                                             source_address=source)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if rcvbuf:
            # A fixed receive buffer (no autotuning): what we do not
            # read backs up in the sender.
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.buf = bytearray()
        self.next_id = 1
        self.pushes = []
        self.root = None
        self.root_attr = None
        self.server_caps = None
        self.list_cookies = False
        self.cookies = {}  # with list_cookies: name -> cookie of the last listings read
        self.boot_id = None
        self.max_payload = None

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    # raw I/O
    def send_raw(self, data):
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError) as e:
            raise Closed(str(e))

    def send_frame(self, op, payload=b"", id=None, flags=0, status=0,
                   wire_len=None, raw_len=None):
        """Sends one frame; wire_len/raw_len may be forged. Returns the id."""
        if id is None:
            id = self.next_id
            self.next_id += 1
        payload = bytes(payload)
        wl = len(payload) if wire_len is None else wire_len
        rl = wl if raw_len is None else raw_len
        self.send_raw(pack_hdr(wl, rl, id, op, flags, status) + payload)
        return id

    def _fill(self, n, deadline):
        while len(self.buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout(f"waited {self.timeout}s for {n} bytes, have {len(self.buf)}")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(max(65536, n - len(self.buf)))
            except socket.timeout:
                continue
            except (ConnectionResetError, BrokenPipeError) as e:
                raise Closed(str(e))
            if not chunk:
                raise Closed("EOF")
            self.buf += chunk

    def recv_frame(self, timeout=None):
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        self._fill(HDR_SIZE, deadline)
        wl, rl, id, op, flags, status = HDR.unpack(bytes(self.buf[:HDR_SIZE]))
        if wl > MAX_WIRE or rl > MAX_PAYLOAD:
            raise BadReply(f"server frame too big: wire {wl} raw {rl}")
        self._fill(HDR_SIZE + wl, deadline)
        payload = bytes(self.buf[HDR_SIZE:HDR_SIZE + wl])
        del self.buf[:HDR_SIZE + wl]
        if flags & FF_LZ4 and flags & FF_ZR:
            raise BadReply("frame with both LZ4 and ZR")
        if flags & FF_LZ4:
            payload = lz4_decompress(payload, rl)
        elif flags & FF_ZR:
            if self.server_caps is not None and not self.server_caps & CAP_ZR:
                raise BadReply("ZR frame without CAP_ZR")
            payload = zr_decode(payload, rl)
        elif wl != rl:
            raise BadReply(f"raw frame with wire_len {wl} != raw_len {rl}")
        return Frame(wl, rl, id, op, flags, status, payload)

    def wait_closed(self, timeout=5.0):
        """True if the peer closes (EOF/RST) within timeout; replies that
        arrive meanwhile are returned in the second element."""
        got = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False, got
            try:
                got.append(self.recv_frame(timeout=left))
            except Closed:
                return True, got
            except Timeout:
                return False, got
            except BadReply:
                return True, got

    def call(self, op, payload=b"", timeout=None, flags=0):
        """Sends a request and returns the payload of its reply; raises
        PfsError on a non-zero status. Pushes are queued in self.pushes."""
        id = self.send_frame(op, payload, flags=flags)
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            left = max(0.001, deadline - time.monotonic())
            f = self.recv_frame(timeout=left)
            if f.flags & FF_PUSH:
                self.pushes.append(f)
                continue
            if f.id != id:
                raise BadReply(f"reply for unexpected id {f.id} (want {id})")
            if not f.flags & FF_REPLY:
                raise BadReply("frame without FF_REPLY")
            if f.op != op:
                raise BadReply(f"reply op {f.op} for request op {op}")
            if f.status:
                if f.payload:
                    raise BadReply("error reply with a payload")
                raise PfsError(f.status, op)
            return f.payload

    # handshake
    def hello(self, key, client_id=None, caps=0, hostname=b"pfsproto",
              version_min=VERSION, version_max=VERSION, check_server=True):
        """HELLO. Returns (snonce, server_mac). Raises BadReply if the
        server's MAC does not prove it knows `key` (when check_server)."""
        if client_id is None:
            client_id = int.from_bytes(os.urandom(8), "little") | 1
        self.client_id = client_id
        self.cnonce = os.urandom(NONCE_LEN)
        p = (u32(MAGIC) + u16(version_min) + u16(version_max) + u64(caps) +
             u64(client_id) + self.cnonce + host(hostname))
        r = Reader(self.call(OP_HELLO, p))
        version = r.u16()
        self.server_caps = r.u64()
        # Listings carry cookies if both sides asked (wire_list.h).
        self.list_cookies = bool(caps & self.server_caps & CAP_LIST_COOKIES)
        self.dots = None  # the dot cookies of the last listing read
        self.boot_id = r.u64()
        self.snonce = r.take(NONCE_LEN)
        smac = r.take(MAC_LEN)
        self.max_payload = r.u32()
        self.write_verf = r.u64()
        r.done()
        if version != VERSION:
            raise BadReply(f"server chose version {version}")
        if check_server and key is not None:
            want = auth_mac(key, SERVER_LABEL, self.cnonce, self.snonce, client_id)
            if not hmac.compare_digest(want, smac):
                raise BadReply("server MAC does not verify")
        return self.snonce, smac

    def auth(self, key, mac=None):
        if mac is None:
            mac = auth_mac(key, CLIENT_LABEL, self.cnonce, self.snonce, self.client_id)
        r = Reader(self.call(OP_AUTH, mac))
        self.root, self.root_attr = r.entry()
        self.auth_flags = r.u32()
        r.done()
        return self.root

    def login(self, key, **kw):
        self.hello(key, **kw)
        return self.auth(key)

    # operations (cr = encoded creds)
    def lookup(self, parent, nm, cr=ROOT):
        r = Reader(self.call(OP_LOOKUP, cr + fh(parent) + name(nm)))
        e = r.entry()
        r.done()
        return e

    def getattr(self, h, cr=ROOT):
        r = Reader(self.call(OP_GETATTR, cr + fh(h)))
        a = r.attr()
        r.done()
        return a

    def readlink(self, h, cr=ROOT):
        r = Reader(self.call(OP_READLINK, cr + fh(h)))
        t = r.name()
        r.done()
        return t

    def open(self, h, flags=os.O_RDONLY, fid=None, cr=ROOT):
        if fid is None:
            fid = self.next_id + 1000
        r = Reader(self.call(OP_OPEN, cr + fh(h) + u64(fid) + u32(flags)))
        r.attr()
        r.done()
        return fid

    def create(self, parent, nm, mode=0o644, flags=os.O_RDWR, fid=None, umask=0, cr=ROOT):
        """CREATE; returns (fh, attr, fid)."""
        if fid is None:
            fid = self.next_id + 3000
        r = Reader(self.call(OP_CREATE, cr + fh(parent) + name(nm) + u64(fid) +
                             u32(flags) + u32(mode) + u32(umask)))
        h, a = r.entry()
        r.done()
        return h, a, fid

    def write(self, h, fid, offset, data, flags=0, cr=ROOT):
        r = Reader(self.call(OP_WRITE, cr + fh(h) + u64(fid) + u32(flags) + u64(offset) +
                             blob(data)))
        n = r.u32()
        r.attr()
        r.done()
        return n

    def copy_range(self, src, src_fid, src_off, dst, dst_fid, dst_off, length,
                   src_flags=0, dst_flags=0, cr=ROOT):
        """COPY_RANGE; returns the bytes copied."""
        r = Reader(self.call(OP_COPY_RANGE, cr + fh(src) + u64(src_fid) + u32(src_flags) +
                             u64(src_off) + fh(dst) + u64(dst_fid) + u32(dst_flags) +
                             u64(dst_off) + u64(length)))
        n = r.u32()
        r.attr()
        r.done()
        return n

    def read(self, h, fid, offset, size, flags=0, cr=ROOT):
        r = Reader(self.call(OP_READ, cr + fh(h) + u64(fid) + u32(flags) +
                             u64(offset) + u32(size)))
        d = r.bytes()
        r.done()
        return d

    def chunk(self, h, fid, index, addr=b"", port=0, want=0, flags=0, cr=ROOT):
        """CHUNK: a dict of the reply (attr, shift, len, hash, source,
        peer, peer_gen, addr, port)."""
        r = Reader(self.call(OP_CHUNK, cr + fh(h) + u64(fid) + u32(flags) + u64(index) +
                             u32(want) + blob(addr) + u32(port)))
        d = dict(attr=r.attr(), shift=r.u32(), len=r.u32(), hash=r.take(DIGEST_LEN),
                 source=r.u32(), peer=r.u32(), peer_gen=r.u32(), addr=r.bytes(),
                 port=r.u32())
        r.done()
        return d

    def chunk_report(self, h, index, digest, status, peer=0xFFFF, peer_gen=0):
        self.call(OP_CHUNK_REPORT, fh(h) + u64(index) + digest + u32(status) + u32(peer) +
                  u32(peer_gen))

    def release(self, h, fid, cr=ROOT):
        self.call(OP_RELEASE, cr + fh(h) + u64(fid))

    def opendir(self, h, fid=None, cr=ROOT):
        if fid is None:
            fid = self.next_id + 2000
        r = Reader(self.call(OP_OPENDIR, cr + fh(h) + u64(fid) + u32(os.O_RDONLY)))
        r.attr()
        r.done()
        return fid

    def readdir(self, h, fid, offset=0, max_bytes=65536, plus=0, cr=ROOT):
        """Returns (eof, [dict(name, next_off, ino, mode, flags, fh, attr)])."""
        r = Reader(self.call(OP_READDIR, cr + fh(h) + u64(fid) + u64(offset) +
                             u32(max_bytes) + u32(plus)))
        eof = r.u8()
        out = []
        while r.left():
            d = dict(name=r.name(), next_off=r.u64(), ino=r.u64(), mode=r.u32(),
                     flags=r.u8())
            if d["flags"] & DE_HAS_ENTRY:
                d["fh"], d["attr"] = r.entry()
            out.append(d)
        return eof, out

    def listdir(self, h, cr=ROOT):
        fid = self.opendir(h, cr=cr)
        names, off = [], 0
        for _ in range(100000):
            eof, ents = self.readdir(h, fid, off, cr=cr)
            for d in ents:
                names.append(d["name"])
                off = d["next_off"]
            if eof or not ents:
                break
        self.call(OP_RELEASEDIR, cr + fh(h) + u64(fid))
        return names

    def ping(self, stamp=12345):
        r = Reader(self.call(OP_PING, u64(stamp)))
        s = r.u64()
        r.done()
        return s

    def statfs(self, h, cr=ROOT):
        return self.call(OP_STATFS, cr + fh(h))

    # caching (wire.h opcodes 40-42) and pushes
    def forget(self, handles):
        """FORGET: a packed list of fh."""
        self.call(OP_FORGET, blob(b"".join(fh(h) for h in handles)))

    def revalidate(self, items, cr=ROOT):
        """REVALIDATE [(fh, attr)...] -> [(index, status, attr)] of the changed
        or gone items (attr is None when status != 0)."""
        r = Reader(self.call(OP_REVALIDATE, cr + blob(b"".join(reval_item(h, a) for h, a in items))))
        res = Reader(r.bytes())
        r.done()
        out = []
        while res.left():
            i, st = res.u32(), res.u32()
            out.append((i, st, res.attr() if st == 0 else None))
        return out

    def lookup_data(self, parent, nm, max_inline=INLINE_MAX, cr=ROOT):
        """LOOKUP_DATA -> (fh, attr, flags, data)."""
        r = Reader(self.call(OP_LOOKUP_DATA, cr + fh(parent) + name(nm) + u32(max_inline)))
        h, a = r.entry()
        flags = r.u32()
        data = r.bytes()
        r.done()
        return h, a, flags, data

    def listdir_items(self, h, max_inline=INLINE_MAX, max_bytes=1 << 20, cr=ROOT):
        """LISTDIR -> (flags, {name: (fh, attr, item flags, data)})."""
        r = Reader(self.call(OP_LISTDIR, cr + fh(h) + u32(max_inline) + u32(max_bytes)))
        flags, items = r.u32(), {}
        self._dots(r)
        while r.left():
            nm = r.name()
            h2, a = r.entry()
            iflags = r.u32()
            self._cookie(r, nm)
            items[nm] = (h2, a, iflags, r.bytes())
        return flags, items

    def _dots(self, r):
        """With list_cookies: where a listing's header says "." and ".." are,
        to self.dots: ((before, own) of ".", (before, own) of "..")."""
        if self.list_cookies:
            self.dots = ((r.u64(), r.u64()), (r.u64(), r.u64()))

    def _cookie(self, r, name):
        """With list_cookies: an item's cookie, to self.cookies[name]."""
        if self.list_cookies:
            self.cookies[name] = r.u64()

    def listdirs(self, handles, max_dirs=None, max_bytes=1 << 20, cr=ROOT):
        """LISTDIRS -> [(fh, attr, status, flags, {name: (fh, attr, item
        flags, data)})] in the reply's order (flags and items only when
        status is 0)."""
        if max_dirs is None:
            max_dirs = len(handles)
        r = Reader(self.call(OP_LISTDIRS, cr + u32(max_bytes) + u32(max_dirs) +
                             blob(b"".join(fh(h) for h in handles))))
        out = []
        while r.left():
            h, a = r.entry()
            st = r.u32()
            lr = Reader(r.bytes())
            flags, items = None, {}
            if st == 0:
                flags = lr.u32()
                self._dots(lr)
                while lr.left():
                    nm = lr.name()
                    h2, a2 = lr.entry()
                    iflags = lr.u32()
                    self._cookie(lr, nm)
                    items[nm] = (h2, a2, iflags, lr.bytes())
            lr.done()
            out.append((h, a, st, flags, items))
        return out

    def listdir_page(self, h, cookie=0, max_inline=0, max_bytes=1 << 20, cr=ROOT):
        """LISTDIR_PAGE -> (flags, next cookie, [(name, fh, attr, item flags, data)])."""
        r = Reader(self.call(OP_LISTDIR_PAGE, cr + fh(h) + u32(max_inline) + u32(max_bytes) +
                             u64(cookie)))
        flags, nxt, items = r.u32(), r.u64(), []
        self._dots(r)
        while r.left():
            nm = r.name()
            h2, a = r.entry()
            iflags = r.u32()
            self._cookie(r, nm)
            items.append((nm, h2, a, iflags, r.bytes()))
        return flags, nxt, items

    def wait_pushes(self, timeout, until=None):
        """Collects push frames (decoded, see decode_push) for up to timeout
        seconds, or until until(list_so_far) is true. Pushes already queued by
        call() come first. Returns the list (and empties self.pushes)."""
        got = [decode_push(f) for f in self.pushes]
        self.pushes = []
        deadline = time.monotonic() + timeout
        while not (until and until(got)):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                f = self.recv_frame(timeout=left)
            except Timeout:
                break
            if not f.flags & FF_PUSH:
                raise BadReply(f"unexpected non-push frame {f!r}")
            got.append(decode_push(f))
        return got

    def pushes_before_pong(self, timeout=None):
        """Sends a PING and returns the pushes (decoded) queued by call()
        and those that arrive before its reply (and empties self.pushes).
        The daemon writes the pushes of a change before the change's reply
        (or, when this session had a request in flight, right after that
        request's reply; daemon/push.c), and PING is not held back: so
        once the author of a change has its reply and this session has
        the replies it was waiting for, every push of that change is
        here, with no waiting on the clock."""
        got = [decode_push(f) for f in self.pushes]
        self.pushes = []
        id = self.send_frame(OP_PING, u64(0x706f6e67))
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            f = self.recv_frame(timeout=max(0.001, deadline - time.monotonic()))
            if f.flags & FF_PUSH:
                got.append(decode_push(f))
                continue
            if f.id != id or f.op != OP_PING or f.status:
                raise BadReply(f"unexpected frame {f!r} while waiting for PING {id}")
            return got


def decode_push(f):
    """A push frame as a tuple: ("inode", fh, offset, length),
    ("entry", parent_fh, name), ("wake", fh) (LOCK_WAKE) or ("recall",
    fh) (RECALL)."""
    r = Reader(f.payload)
    if f.op == OP_INVAL_INODE:
        out = ("inode", r.fh(), r.i64(), r.i64())
    elif f.op == OP_INVAL_ENTRY:
        out = ("entry", r.fh(), r.name())
    elif f.op == OP_LOCK_WAKE:
        out = ("wake", r.fh())
    elif f.op == OP_RECALL:
        out = ("recall", r.fh())
    else:
        raise BadReply(f"unknown push op {f.op}")
    r.done()
    return out


def lock_req(h, fid, owner, type, start=0, end=(1 << 64) - 1, pid=0, flags=0, cr=ROOT):
    """Payload of GETLK, SETLK and RECLAIM (codec.h lock_req)."""
    return (cr + fh(h) + u64(fid) + u64(owner) + u32(type) + u64(start) + u64(end) +
            u32(pid) + u32(flags))


def reval_item(h, attr):
    """One packed REVALIDATE item from a handle and the attr dict we hold."""
    return (fh(h) + u64(attr["size"]) + i64(attr["mtime_s"]) + u32(attr["mtime_ns"]) +
            i64(attr["ctime_s"]) + u32(attr["ctime_ns"]))


def connect(host, port, key, timeout=10.0, rcvbuf=None, **kw):
    """A logged-in connection (HELLO + AUTH done)."""
    c = Conn(host, port, timeout=timeout, rcvbuf=rcvbuf)
    try:
        c.login(key, **kw)
    except BaseException:
        c.close()
        raise
    return c
