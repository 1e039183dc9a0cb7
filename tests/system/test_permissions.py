"""test_permissions.py: permissions as an unprivileged user.

Unprivileged callers run as uid/gid 1500 (setpriv); the kernel on the
daemon's side must make the permission decisions: reads, writes, creates
and setattr of other users' files, supplementary groups, sticky
directories, set-id bits dropped by a non-owner's write (as locally, and
nothing more, also for a raw client).
"""

import errno
import os
import re
import stat
import subprocess
import time

import pytest

import pfsproto as P
from helpers import (OTHER_GID, OTHER_UID, PYTHON, SUPP_GID, TEST_GID, TEST_UID, file_errno,
                     podfsd_status, read_file, setpriv_argv, wait_for, write_file)


def test_nonroot_cannot_write_root_file(env, m):
    write_file(m / "f", b"root data")
    os.chmod(m / "f", 0o644)
    assert file_errno(f"open({str(m / 'f')!r}, 'rb').read()") == "OK"
    assert file_errno(f"open({str(m / 'f')!r}, 'ab')") == "EACCES"
    assert file_errno(f"os.truncate({str(m / 'f')!r}, 0)") == "EACCES"
    assert file_errno(f"os.unlink({str(m / 'f')!r})") == "EACCES"
    assert file_errno(f"open({str(m / 'new')!r}, 'wb')") == "EACCES"
    assert file_errno(f"os.mkdir({str(m / 'd')!r})") == "EACCES"
    assert read_file(env.export / "f") == b"root data"
    assert not os.path.exists(env.export / "new")


def test_nonroot_cannot_read_other_users_0600(env, m):
    write_file(m / "private", b"theirs")
    os.chown(m / "private", OTHER_UID, OTHER_GID)
    os.chmod(m / "private", 0o600)
    assert file_errno(f"open({str(m / 'private')!r}, 'rb').read()") == "EACCES"
    assert file_errno(f"open({str(m / 'private')!r}, 'rb').read()",
                      uid=OTHER_UID, gid=OTHER_GID) == "OK"
    # A private directory cannot be listed or traversed either.
    os.mkdir(m / "pdir")
    write_file(m / "pdir" / "inner", b"x")
    os.chown(m / "pdir", OTHER_UID, OTHER_GID)
    os.chmod(m / "pdir", 0o700)
    assert file_errno(f"os.listdir({str(m / 'pdir')!r})") == "EACCES"
    assert file_errno(f"os.stat({str(m / 'pdir' / 'inner')!r})") == "EACCES"


def test_nonroot_creates_in_0777_dir_owns_file(env, m):
    os.mkdir(m / "pub")
    os.chmod(m / "pub", 0o777)
    code = (f"fd = os.open({str(m / 'pub' / 'mine')!r}, os.O_CREAT | os.O_WRONLY, 0o640)\n"
            f"os.write(fd, b'mine')\nos.close(fd)\n"
            f"os.mkdir({str(m / 'pub' / 'mydir')!r})\n"
            f"os.symlink('mine', {str(m / 'pub' / 'mylink')!r})")
    assert file_errno(code) == "OK"
    for n in ("mine", "mydir", "mylink"):
        xs = os.lstat(env.export / "pub" / n)
        assert (xs.st_uid, xs.st_gid) == (TEST_UID, TEST_GID), n
        st = os.lstat(m / "pub" / n)
        assert (st.st_uid, st.st_gid) == (TEST_UID, TEST_GID), n
    assert read_file(env.export / "pub" / "mine") == b"mine"
    # The owner may chmod, and read back its own 0600 file; others may not read it.
    assert file_errno(f"os.chmod({str(m / 'pub' / 'mine')!r}, 0o600)") == "OK"
    assert stat.S_IMODE(os.stat(env.export / "pub" / "mine").st_mode) == 0o600
    assert file_errno(f"open({str(m / 'pub' / 'mine')!r}, 'rb').read()") == "OK"
    assert file_errno(f"open({str(m / 'pub' / 'mine')!r}, 'rb').read()",
                      uid=OTHER_UID, gid=OTHER_GID) == "EACCES"


def test_nonroot_chmod_chown_others_file_eperm(env, m):
    os.mkdir(m / "pub")
    os.chmod(m / "pub", 0o777)
    write_file(m / "pub" / "theirs", b"x")
    os.chown(m / "pub" / "theirs", OTHER_UID, OTHER_GID)
    os.chmod(m / "pub" / "theirs", 0o666)
    assert file_errno(f"os.chmod({str(m / 'pub' / 'theirs')!r}, 0o777)") == "EPERM"
    assert file_errno(f"os.chown({str(m / 'pub' / 'theirs')!r}, {TEST_UID}, -1)") == "EPERM"
    assert file_errno(f"os.utime({str(m / 'pub' / 'theirs')!r}, (1, 1))") == "EPERM"
    # Writable by all: writing works, and utime(None) (= now) is allowed.
    assert file_errno(f"open({str(m / 'pub' / 'theirs')!r}, 'ab').write(b'y')") == "OK"
    assert file_errno(f"os.utime({str(m / 'pub' / 'theirs')!r}, None)") == "OK"
    xs = os.stat(env.export / "pub" / "theirs")
    assert stat.S_IMODE(xs.st_mode) == 0o666 and xs.st_uid == OTHER_UID
    # Own file: chown to a group it is not in is EPERM too.
    assert file_errno(f"open({str(m / 'pub' / 'own')!r}, 'wb').close()\n"
                      f"os.chown({str(m / 'pub' / 'own')!r}, -1, 4242)") == "EPERM"
    # Sticky directory: cannot delete another user's file.
    os.chmod(m / "pub", 0o1777)
    assert file_errno(f"os.unlink({str(m / 'pub' / 'theirs')!r})") == "EPERM"
    assert os.path.exists(env.export / "pub" / "theirs")


def test_write_by_non_owner_drops_setid_bits(env, m, mount):
    """As on a local filesystem: a write or truncate by a user who may
    write but does not own a set-id file succeeds and drops S_ISUID and
    S_ISGID (with group exec); other hosts see the new mode. A root
    writer (CAP_FSETID) keeps them. chown(f, -1, -1) changes the ctime."""
    m2 = mount()
    os.mkdir(m / "sid")
    os.chmod(m / "sid", 0o777)
    for name in ("w", "t", "r"):
        write_file(m / "sid" / name, b"0123456789")
        os.chown(m / "sid" / name, OTHER_UID, OTHER_GID)
        os.chmod(m / "sid" / name, 0o6777)
        os.stat(m2 / "sid" / name)  # cached on the other host
    assert file_errno(f"f = open({str(m / 'sid' / 'w')!r}, 'r+b')\nf.write(b'x')\nf.close()") == "OK"
    assert file_errno(f"os.truncate({str(m / 'sid' / 't')!r}, 3)") == "OK"
    with open(m / "sid" / "r", "r+b") as f:
        f.write(b"root")
    for name, mode in (("w", 0o777), ("t", 0o777), ("r", 0o6777)):
        assert stat.S_IMODE(os.stat(env.export / "sid" / name).st_mode) == mode, name
        assert stat.S_IMODE(os.stat(m / "sid" / name).st_mode) == mode, name
        wait_for(lambda: stat.S_IMODE(os.stat(m2 / "sid" / name).st_mode) == mode, 2,
                 what=f"mode of {name} on the other host")
    assert read_file(env.export / "sid" / "w") == b"x123456789"
    assert os.path.getsize(env.export / "sid" / "t") == 3
    # ctime only
    c0 = os.stat(m / "sid" / "r").st_ctime_ns
    time.sleep(0.02)
    os.chown(m / "sid" / "r", -1, -1)
    assert os.stat(env.export / "sid" / "r").st_ctime_ns > c0
    assert os.stat(m / "sid" / "r").st_ctime_ns > c0


def raw_setattr(c, h, cr, valid, mode=0, uid=0, gid=0):
    """A raw SETATTR (pfsproto connection c) of the fields valid
    (1 mode, 2 uid, 4 gid) of h as cr: "OK" or the errno's name."""
    try:
        c.call(P.OP_SETATTR, cr + P.fh(h) + P.u64(0) + P.u32(valid) + P.u32(mode) +
               P.u32(uid) + P.u32(gid) + P.u64(0) + P.i64(0) + P.u32(0) + P.i64(0) + P.u32(0))
        return "OK"
    except P.PfsError as e:
        return errno.errorcode[e.status]


@pytest.mark.plaintext
def test_raw_setid_drop_is_not_a_chmod(env, daemon):
    """The daemon lets a non-owner drop set-id bits only as the kernel
    would on that user's write: exactly those bits, of a file the caller
    may write. Anything else stays EPERM (raw SETATTR)."""
    d = env.export / "rs"
    d.mkdir()
    os.chmod(d, 0o777)
    for name, mode in (("ro", 0o6755), ("rw", 0o6777), ("rw2", 0o6777), ("nogx", 0o2767)):
        (d / name).write_bytes(b"x")
        os.chown(d / name, OTHER_UID, OTHER_GID)
        os.chmod(d / name, mode)
    user = P.creds(TEST_UID, TEST_GID)
    with P.connect(daemon.host, daemon.port, P.load_key(env.key)) as c:
        hd, _ = c.lookup(c.root, b"rs")

        def setmode(name, mode):
            h, _ = c.lookup(hd, name)
            return raw_setattr(c, h, user, 1, mode=mode)
        assert setmode(b"ro", 0o755) == "EPERM"     # not writable by the caller
        assert setmode(b"rw", 0o775) == "EPERM"     # also drops o+w
        assert setmode(b"rw", 0o6777) == "EPERM"    # no change at all is a chmod
        assert setmode(b"nogx", 0o767) == "EPERM"   # S_ISGID without g+x is not a set-id bit
        assert setmode(b"rw2", 0o2777) == "OK"      # S_ISUID only
        assert setmode(b"rw", 0o777) == "OK"
    for name, mode in (("ro", 0o6755), ("rw", 0o777), ("rw2", 0o2777), ("nogx", 0o2767)):
        assert stat.S_IMODE(os.stat(d / name).st_mode) == mode, name


def test_supplementary_group_access(env, m):
    os.mkdir(m / "team")
    os.chown(m / "team", OTHER_UID, SUPP_GID)
    os.chmod(m / "team", 0o770)
    write_file(m / "team" / "doc", b"team doc")
    os.chown(m / "team" / "doc", OTHER_UID, SUPP_GID)
    os.chmod(m / "team" / "doc", 0o660)
    doc = str(m / "team" / "doc")
    assert file_errno(f"open({doc!r}, 'rb').read()") == "EACCES"
    assert file_errno(f"open({doc!r}, 'rb').read()", groups=[SUPP_GID]) == "OK"
    assert file_errno(f"open({doc!r}, 'ab').write(b'+')", groups=[4000, SUPP_GID]) == "OK"
    assert file_errno(f"open({str(m / 'team' / 'new')!r}, 'wb').close()",
                      groups=[SUPP_GID]) == "OK"
    assert read_file(env.export / "team" / "doc") == b"team doc+"
    assert os.stat(env.export / "team" / "new").st_uid == TEST_UID
    # The primary group counts too.
    assert file_errno(f"open({doc!r}, 'rb').read()", gid=SUPP_GID) == "OK"


def test_a_callers_groups_past_64_reach_the_coordinator_cut(env, m):
    """The coordinator acts with the first 64 of a caller's supplementary
    groups (the wire's PFS_GROUPS_MAX), where the kernel here checked
    them all (default_permissions): a create that the 64th group allows
    works; one that only the 65th allows is refused there, and podfs says
    why, once. (The kernel keeps a process's groups in ascending order.)"""
    os.mkdir(m / "team")
    os.chown(m / "team", OTHER_UID, SUPP_GID)
    os.chmod(m / "team", 0o770)
    others = [100 + i for i in range(70)]  # all below SUPP_GID

    def create(name, groups):
        return file_errno(f"open({str(m / 'team' / name)!r}, 'wb').close()", groups=groups)

    assert create("by-64th", others[:63] + [SUPP_GID]) == "OK"
    assert os.stat(env.export / "team" / "by-64th").st_uid == TEST_UID
    assert "supplementary groups" not in m.proc.output()
    assert create("by-65th", others[:64] + [SUPP_GID]) == "EACCES"
    assert create("by-71st", others + [SUPP_GID]) == "EACCES"
    assert sorted(os.listdir(env.export / "team")) == ["by-64th"]
    log = m.proc.output()
    assert re.search(rf"a caller \(uid {TEST_UID}\) is in 65 supplementary groups: podfs sends "
                     r"the coordinator the first 64", log), log
    assert log.count("supplementary groups") == 1, log


def test_nonroot_xattr_and_fifo_permissions(env, m):
    write_file(m / "f", b"x")
    os.chmod(m / "f", 0o644)
    assert file_errno(f"os.setxattr({str(m / 'f')!r}, 'user.a', b'1')") == "EACCES"
    os.setxattr(m / "f", "user.b", b"2")
    assert file_errno(f"assert os.getxattr({str(m / 'f')!r}, 'user.b') == b'2'") == "OK"


def setfacl(*args):
    subprocess.run(["setfacl", *[str(a) for a in args]], check=True, timeout=30,
                   stdin=subprocess.DEVNULL, capture_output=True)


def test_posix_acls_decide_on_every_host(env, m, mount):
    """An ACL entry grants what the mode alone would not, and another
    host's change of it counts at once there (the kernel caches each
    object's ACL, a push drops it); the owning group's own entry limits
    it even where the mode's group bits (the ACL's mask) say more."""
    m2 = mount(path=env.root / "m2")
    write_file(m / "f", b"acl")
    os.chmod(m / "f", 0o640)
    f, f2 = str(m / "f"), str(m2 / "f")
    assert file_errno(f"open({f2!r}, 'rb').read()") == "EACCES"
    setfacl("-m", f"u:{TEST_UID}:rw", m / "f")
    assert file_errno(f"open({f2!r}, 'rb').read()") == "OK"
    assert file_errno(f"open({f2!r}, 'ab').write(b'+')") == "OK"
    assert file_errno(f"open({f!r}, 'rb').read()") == "OK"
    assert file_errno(f"open({f2!r}, 'rb').read()", uid=OTHER_UID) == "EACCES"
    setfacl("-m", f"u:{TEST_UID}:r", m / "f")
    assert file_errno(f"open({f2!r}, 'ab').write(b'+')") == "EACCES"
    assert file_errno(f"open({f2!r}, 'rb').read()") == "OK"
    setfacl("-x", f"u:{TEST_UID}", m / "f")
    assert file_errno(f"open({f2!r}, 'rb').read()") == "EACCES"
    assert read_file(env.export / "f") == b"acl+"
    # group:: says no to the owning group, the mask (group bits) says rw.
    write_file(m / "g", b"g")
    os.chown(m / "g", OTHER_UID, TEST_GID)
    setfacl("-m", f"g::-,g:{SUPP_GID}:rw,m::rw,o::-", m / "g")
    assert stat.S_IMODE(os.stat(m2 / "g").st_mode) & 0o070 == 0o060
    g2 = str(m2 / "g")
    assert file_errno(f"open({g2!r}, 'rb').read()") == "EACCES"
    assert file_errno(f"open({g2!r}, 'rb').read()", groups=[SUPP_GID]) == "OK"


def test_default_acl_takes_the_place_of_the_umask(env, m):
    """In a directory with a default ACL a new object gets the ACL and the
    mode the local file system gives it: the creator's umask does not
    apply (POSIX.1e), so the named user keeps the access the ACL gives."""
    os.mkdir(m / "d")
    setfacl("-d", "-m", f"u:{TEST_UID}:rwx", m / "d")
    os.mkdir(env.export / "local")
    setfacl("-d", "-m", f"u:{TEST_UID}:rwx", env.export / "local")
    old = os.umask(0o077)
    try:
        for root in (m / "d", env.export / "local"):
            write_file(root / "f", b"x")
            os.mkdir(root / "sub")
    finally:
        os.umask(old)
    for name in ("f", "sub"):
        want = os.stat(env.export / "local" / name).st_mode
        assert os.stat(env.export / "d" / name).st_mode == want, name
        assert os.stat(m / "d" / name).st_mode == want, name
    assert stat.S_IMODE(os.stat(m / "d" / "f").st_mode) == 0o664
    assert file_errno(f"open({str(m / 'd' / 'f')!r}, 'ab').write(b'+')") == "OK"
    assert file_errno(f"open({str(m / 'd' / 'sub' / 'n')!r}, 'wb').close()") == "OK"


def _rights_taken_away(mine, other):
    """A user on the host of mount `mine` holds two files and a directory
    open (opened again, so without asking the daemon: it knows the user
    may read them); root on the host of mount `other` takes the rights
    away (chmod, and an ACL entry denying the user) and drops the
    machine's caches; the user's reads through what it holds: their
    output lines."""
    for n in ("f", "g"):
        write_file(other / n, b"contents " + n.encode())
        os.chmod(other / n, 0o644)
    os.mkdir(other / "d")
    write_file(other / "d" / "x", b"")
    os.chmod(other / "d", 0o755)
    code = ("import os, sys\n"
            f"paths = [{str(mine / 'f')!r}, {str(mine / 'g')!r}]\n"
            "for p in paths:\n"
            "    os.close(os.open(p, os.O_RDONLY))\n"
            f"os.listdir({str(mine / 'd')!r})\n"
            "fds = [os.open(p, os.O_RDONLY) for p in paths]\n"
            f"dfd = os.open({str(mine / 'd')!r}, os.O_RDONLY | os.O_DIRECTORY)\n"
            "print('open', flush=True)\n"
            "sys.stdin.readline()\n"
            "for fd in fds:\n"
            "    try:\n"
            "        print(os.pread(fd, 100, 0).decode(), flush=True)\n"
            "    except OSError as e:\n"
            "        print('error', e.errno, flush=True)\n"
            "try:\n"
            "    print(sorted(os.listdir(dfd)), flush=True)\n"
            "except OSError as e:\n"
            "    print('error', e.errno, flush=True)\n")
    p = subprocess.Popen(setpriv_argv(TEST_UID, TEST_GID, ()) + [PYTHON, "-c", code],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        assert p.stdout.readline().strip() == "open"
        os.chmod(other / "f", 0o600)
        setfacl("-m", f"u:{TEST_UID}:-", other / "g")
        os.chmod(other / "d", 0o700)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
        out, _ = p.communicate("go\n", timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return out.splitlines()


def test_rights_taken_away_on_this_host_keep_what_is_open(env, m):
    """Rights are checked at open, as locally: root takes away the rights
    of what a user holds open on the same host, and the user still reads
    it. Before, the daemon, which first heard of those opens at the
    read, refused it (EACCES)."""
    assert _rights_taken_away(m, m) == ["contents f", "contents g", "['x']"]
    assert file_errno(f"open({str(m / 'f')!r}, 'rb').read()") == "EACCES"
    assert file_errno(f"open({str(m / 'g')!r}, 'rb').read()") == "EACCES"


def test_rights_taken_away_on_another_host_keep_what_is_open(env, pod):
    """The same with the rights taken away on another host: the change is
    pushed to this host before it is made (rights_forewarned), and this
    host opens on the daemon what its user opened without it while the
    rights still hold. Before, the user's reads failed (EACCES). New
    opens are refused once the change is made. A user who may not make
    such a change pushes nothing to the others."""
    assert _rights_taken_away(pod.b, pod.a) == ["contents f", "contents g", "['x']"]
    for n in ("f", "g"):
        wait_for(lambda: file_errno(f"open({str(pod.b / n)!r}, 'rb').read()") == "EACCES", 10,
                 what=f"B to refuse a new open of {n}")
    assert int(podfsd_status(pod.daemon)[0]["rights_forewarned"]) >= 3


@pytest.mark.plaintext
def test_raw_rights_change_not_allowed_pushes_nothing(env, daemon):
    """A change of rights is pushed to the clients that cache the object
    before it is made only if the caller may make it: a client that
    cannot chmod, chown or set the ACL of a file does not make every
    client that caches it drop what it knows (raw SETATTR, SETXATTR)."""
    write_file(env.export / "h", b"h")
    os.chmod(env.export / "h", 0o644)
    user = P.creds(TEST_UID, TEST_GID)

    def forewarned():
        return int(podfsd_status(daemon)[0]["rights_forewarned"])

    key = P.load_key(env.key)
    with P.connect(daemon.host, daemon.port, key) as a, P.connect(daemon.host, daemon.port, key) as b:
        hb, _ = b.lookup(b.root, b"h")  # b caches h
        ha, _ = a.lookup(a.root, b"h")
        assert raw_setattr(a, ha, user, 1, mode=0o600) == "EPERM"
        assert raw_setattr(a, ha, user, 2, uid=TEST_UID) == "EPERM"
        try:
            a.call(P.OP_SETXATTR, user + P.fh(ha) + P.xname(b"system.posix_acl_access") +
                   P.blob(b"\x02\0\0\0") + P.u32(0))
        except P.PfsError as e:
            assert e.status in (errno.EPERM, errno.EINVAL), e.status
        assert forewarned() == 0
        # Root may: pushed first.
        assert raw_setattr(a, ha, P.ROOT, 1, mode=0o600) == "OK"
        assert forewarned() == 1
        # Bits added take nothing away: not pushed first.
        assert raw_setattr(a, ha, P.ROOT, 1, mode=0o644) == "OK"
        assert forewarned() == 1
