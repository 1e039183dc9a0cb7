"""test_exports.py: export rules (podfsd --exports, --allow, --squash):
who may connect, and what the ids a client claims become.

Root squash by default: a root client cannot read another user's private
file, make a set-uid file, a device or a security.capability xattr, and
what it creates belongs to nobody (65534). A network no rule admits gets
no mount and one log line; rules per network (ro/rw, all_squash with
anonuid/anongid), the longest prefix winning; SIGHUP reloads the rules
without dropping the clients still admitted, disconnects the others, and
keeps the old rules when the file is bad. Bad files and options exit 2.

Other hosts are network namespaces (harness/netns.py); the daemon then
listens on 0.0.0.0 so both this host (127.0.0.1) and the namespaces
(their veth address) reach it.
"""

import errno
import os
import re
import signal
import stat
import struct

import pytest

import pfsproto as P

from helpers import PODFS, PODFSD, read_file, run, wait_for, write_file

pytestmark = pytest.mark.usefixtures("own_daemon")

NOBODY = 65534
# security.capability granting cap_setuid=ep: VFS_CAP_REVISION_2 with the
# effective flag, permitted CAP_SETUID (7).
CAP_SETUID_EP = struct.pack("<5I", 0x02000001, 1 << 7, 0, 0, 0)


@pytest.fixture
def own_daemon():
    if os.environ.get("PODFS_TEST_DAEMON"):
        pytest.skip("starts daemons with their own export rules")


def eno(fn, *a, **kw):
    """The errno fn(*a, **kw) fails with, or 0 (a file it opens is closed)."""
    try:
        r = fn(*a, **kw)
    except OSError as e:
        return e.errno
    if fn is os.open:
        os.close(r)
    return 0


def rules(env, text, name="exports"):
    p = env.root / name
    p.write_text(text)
    p.chmod(0o644)
    return p


def podfsd_exit(env, *args):
    """podfsd with args (and a key and export) that must exit at once."""
    return run([PODFSD, "--listen", "127.0.0.1:0", "--key", env.key, "--state-dir",
                env.root / "st-x", *args, env.export], timeout=30, check=False)


def mount_fails(env, daemon, ns):
    """podfs from namespace ns: must exit non-zero without mounting."""
    mnt = env.root / f"refused-{ns.name}"
    mnt.mkdir()
    r = run(ns.exec_argv([PODFS, f"{ns.host_ip}:{daemon.port}", mnt, "-f", "-o",
                          f"key={env.key}"]), timeout=60, check=False)
    assert r.returncode != 0, r.stdout + r.stderr
    assert not os.path.ismount(mnt)
    return r


def sighup(env, daemon, what):
    """SIGHUP to daemon; waits for its log to say `what` once more."""
    n = daemon.log().count(what)
    daemon.proc.send(signal.SIGHUP)
    wait_for(lambda: daemon.log().count(what) > n, 20, what=f"podfsd to log '{what}'")


def authenticated(daemon, peer):
    return len(re.findall(rf"conn \d+: {re.escape(peer)}:\d+ \(.*\) authenticated",
                          daemon.log()))


@pytest.mark.netns
def test_default_squashes_root(env):
    """No exports file, no flags: root is squashed to 65534 (another
    host's mount working all along)."""
    if os.path.exists("/etc/podfs/exports"):
        pytest.skip("/etc/podfs/exports exists: podfsd would use its rules")
    d = env.start_daemon(listen="0.0.0.0:0", squash=None)
    ns = env.new_netns()
    other = env.mount(d, netns=ns, host=ns.host_ip)
    m = env.mount(d)
    pub = env.export / "pub"
    pub.mkdir()
    pub.chmod(0o1777)
    priv = env.export / "private"
    priv.mkdir(mode=0o700)
    write_file(priv / "secret", b"uid 1000 only")
    os.chmod(priv / "secret", 0o600)
    os.chown(priv / "secret", 1000, 1000)
    os.chown(priv, 1000, 1000)
    sgid = pub / "sgid"
    sgid.mkdir()
    os.chown(sgid, NOBODY, 1234)
    sgid.chmod(0o2777)

    def other_works(tag):
        write_file(other / "pub" / tag, tag.encode())
        assert read_file(m / "pub" / tag) == tag.encode()

    other_works("before")
    # Another user's private file: not even root may look.
    assert eno(os.listdir, m / "private") == errno.EACCES
    assert eno(read_file, m / "private" / "secret") == errno.EACCES
    # What root makes belongs to nobody.
    write_file(m / "pub" / "f", b"made by root")
    st = os.stat(pub / "f")
    assert (st.st_uid, st.st_gid) == (NOBODY, NOBODY)
    os.mkdir(m / "pub" / "d")
    assert os.stat(pub / "d").st_uid == NOBODY
    # No set-id files: not at create, not by chmod, not by mknod.
    assert eno(os.open, m / "pub" / "suid", os.O_CREAT | os.O_WRONLY, 0o4755) == errno.EPERM
    assert eno(os.chmod, m / "pub" / "f", 0o4755) == errno.EPERM
    assert eno(os.chmod, m / "pub" / "f", 0o2755) == errno.EPERM
    assert eno(os.mknod, m / "pub" / "sfile", stat.S_IFREG | 0o4644) == errno.EPERM
    assert not (pub / "suid").exists() and not (pub / "sfile").exists()
    assert stat.S_IMODE(os.stat(pub / "f").st_mode) == 0o644
    os.chmod(m / "pub" / "f", 0o600)  # plain bits: fine
    assert stat.S_IMODE(os.stat(pub / "f").st_mode) == 0o600
    # No devices; fifos are fine.
    assert eno(os.mknod, m / "pub" / "blk", stat.S_IFBLK | 0o666, os.makedev(7, 0)) == \
        errno.EPERM
    assert eno(os.mknod, m / "pub" / "chr", stat.S_IFCHR | 0o666, os.makedev(1, 3)) == \
        errno.EPERM
    assert not (pub / "blk").exists() and not (pub / "chr").exists()
    os.mkfifo(m / "pub" / "fifo", 0o644)
    assert stat.S_ISFIFO(os.stat(pub / "fifo").st_mode)
    # No file capabilities, no trusted.* xattrs; user.* is fine.
    assert eno(os.setxattr, m / "pub" / "f", "security.capability", CAP_SETUID_EP) == \
        errno.EPERM
    assert eno(os.setxattr, m / "pub" / "f", "trusted.x", b"1") == errno.EPERM
    assert "security.capability" not in os.listxattr(pub / "f")
    os.setxattr(m / "pub" / "f", "user.note", b"ok")
    assert os.getxattr(pub / "f", "user.note") == b"ok"
    # chown is root's: not for nobody.
    assert eno(os.chown, m / "pub" / "f", 0, 0) == errno.EPERM
    # A set-group-id directory still passes its group and bit on.
    os.mkdir(m / "pub" / "sgid" / "sub")
    st = os.stat(sgid / "sub")
    assert st.st_gid == 1234 and st.st_mode & stat.S_ISGID
    write_file(m / "pub" / "sgid" / "g", b"x")
    assert os.stat(sgid / "g").st_gid == 1234
    other_works("after")
    # The other host is squashed too.
    assert os.stat(pub / "after").st_uid == NOBODY


@pytest.mark.netns
def test_network_not_allowed(env):
    """A namespace whose address no rule admits gets no mount, and the
    daemon logs one line naming it; an admitted one mounts."""
    bad, good = env.new_netns(), env.new_netns()
    f = rules(env, f"127.0.0.0/8 rw,no_root_squash\n{good.ip} rw,no_root_squash\n")
    d = env.start_daemon(listen="0.0.0.0:0", squash=None, extra=["--exports", f])
    r = mount_fails(env, d, bad)
    assert "export rule" in r.stderr, r.stderr
    lines = [ln for ln in d.log().splitlines() if f"refused {bad.ip}:" in ln]
    assert len(lines) == 1, d.log()
    assert "no export rule admits its address" in lines[0] and str(f) in lines[0], lines[0]
    assert authenticated(d, bad.ip) == 0
    mg = env.mount(d, netns=good, host=good.host_ip)
    write_file(mg / "g", b"admitted")
    assert read_file(env.export / "g") == b"admitted"
    assert os.stat(env.export / "g").st_uid == 0  # no_root_squash
    m = env.mount(d)
    assert read_file(m / "g") == b"admitted"


@pytest.mark.netns
def test_rules_per_network(env):
    """ro for one network, all_squash with anonuid/anongid for another,
    the longest prefix winning over a wider rule."""
    ro_ns, sq_ns = env.new_netns(), env.new_netns()
    f = rules(env, "# podfs test\n"
                   "*                 rw,no_root_squash\n"
                   f"{ro_ns.ip}/32    ro,no_root_squash\n"
                   f"{sq_ns.ip}       rw,all_squash,anonuid=1234,anongid=4321  # squashed\n")
    d = env.start_daemon(listen="0.0.0.0:0", squash=None, extra=["--exports", f])
    pub = env.export / "pub"
    pub.mkdir()
    pub.chmod(0o777)
    write_file(pub / "r", b"readable")
    m = env.mount(d)
    mro = env.mount(d, netns=ro_ns, host=ro_ns.host_ip)
    msq = env.mount(d, netns=sq_ns, host=sq_ns.host_ip)
    # ro: reads yes, any change EROFS.
    assert read_file(mro / "pub" / "r") == b"readable"
    assert eno(write_file, mro / "pub" / "w", b"x") == errno.EROFS
    assert eno(os.mkdir, mro / "pub" / "dd") == errno.EROFS
    assert eno(os.unlink, mro / "pub" / "r") == errno.EROFS
    assert eno(os.setxattr, mro / "pub" / "r", "user.x", b"1") == errno.EROFS
    assert not (pub / "w").exists() and (pub / "r").exists()
    # all_squash: root and any other uid become 1234:4321.
    write_file(msq / "pub" / "s", b"squashed")
    st = os.stat(pub / "s")
    assert (st.st_uid, st.st_gid) == (1234, 4321)
    r = run(["setpriv", "--reuid=1500", "--regid=1500", "--clear-groups", "sh", "-c",
             f"echo u > {msq / 'pub' / 'u'}"], timeout=30, check=False)
    assert r.returncode == 0, r.stderr
    st = os.stat(pub / "u")
    assert (st.st_uid, st.st_gid) == (1234, 4321)
    assert eno(os.mknod, msq / "pub" / "chr", stat.S_IFCHR | 0o666, os.makedev(1, 3)) == \
        errno.EPERM
    # "*": root stays root here.
    write_file(m / "pub" / "l", b"local")
    assert os.stat(pub / "l").st_uid == 0


@pytest.mark.netns
def test_sighup_reload(env):
    """SIGHUP: a client no rule admits any more is disconnected (and cannot
    come back); one whose rule changed gets it on its next request,
    without reconnecting; a bad file keeps the old rules."""
    gone = env.new_netns()
    f = rules(env, f"127.0.0.0/8 rw,no_root_squash\n{gone.ip} rw,no_root_squash\n")
    d = env.start_daemon(listen="0.0.0.0:0", squash=None, extra=["--exports", f])
    m = env.mount(d)
    mg = env.mount(d, netns=gone, host=gone.host_ip, opts="soft,timeo=2")
    write_file(m / "a", b"1")
    assert read_file(mg / "a") == b"1"
    local_conns, gone_conns = authenticated(d, "127.0.0.1"), authenticated(d, gone.ip)
    assert local_conns >= 1 and gone_conns >= 1

    rules(env, "127.0.0.0/8 ro,no_root_squash  # now read-only\n")
    sighup(env, d, "reloaded export rules")
    assert re.search(rf"reloaded export rules from {re.escape(str(f))}: 1 rules "
                     r"\(1 connections closed\)", d.log())
    wait_for(lambda: re.search(rf"{re.escape(gone.ip)}:\d+ \(.*\): no export rule admits it any"
                               " more", d.log()), 10, what="the excluded client's disconnection")
    # Still admitted: the new rule from its next request on, same
    # connection.
    assert eno(write_file, m / "b", b"2") == errno.EROFS
    assert read_file(m / "a") == b"1"
    assert authenticated(d, "127.0.0.1") == local_conns
    # The excluded client cannot come back: its requests fail (soft).
    write_file(env.export / "new", b"n")
    r = run(["cat", mg / "new"], timeout=60, check=False)
    assert r.returncode != 0
    assert authenticated(d, gone.ip) == gone_conns
    assert re.search(rf"refused {re.escape(gone.ip)}:\d+: no export rule", d.log())
    mg.proc.expect_rc = None
    mg.force_down()

    # A bad file: one error line naming FILE:LINE; the old rules stay
    # (a new local mount is admitted, read-only).
    rules(env, "127.0.0.0/8 rw\n10.0.0.0/33 rw\n")
    env.expect_log(r"SIGHUP: .*exports:2: prefix length over 32 in '10\.0\.0\.0/33'; "
                   r"keeping the export rules",
                   tag=d.tag)
    sighup(env, d, "keeping the export rules as they were")
    assert d.log().count("keeping the export rules as they were") == 1
    m2 = env.mount(d, path=env.root / "m2")
    assert read_file(m2 / "a") == b"1"
    assert eno(write_file, m2 / "c", b"3") == errno.EROFS
    assert eno(write_file, m / "c", b"3") == errno.EROFS


def test_bad_rules_and_options_exit_2(env):
    f = rules(env, "127.0.0.1 rw\n\n127.0.0.0/8 rw,nosuch\n")
    r = podfsd_exit(env, "--exports", f)
    assert r.returncode == 2
    assert r.stderr.strip() == f"podfsd: {f}:3: unknown option 'nosuch' (ro, rw, root_squash, " \
        "no_root_squash, all_squash, anonuid=N, anongid=N)", r.stderr
    f = rules(env, "* rw\n", "loose")
    f.chmod(0o664)
    r = podfsd_exit(env, "--exports", f)
    assert r.returncode == 2 and "writable by group or others" in r.stderr, r.stderr
    f.chmod(0o644)
    r = podfsd_exit(env, "--exports", f, "--squash=none")
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert "--squash cannot be used with the exports file" in r.stderr, r.stderr
    r = podfsd_exit(env, "--exports", env.root / "nosuch")
    assert r.returncode == 2 and "nosuch" in r.stderr, r.stderr
    for bad in (["--squash", "some"], ["--allow", "10.0.0.0/33"], ["--allow", ""],
                ["--anonuid", "-1"], ["--anongid", "4294967295"]):
        r = podfsd_exit(env, *bad)
        assert r.returncode == 2, (bad, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, (bad, r.stderr)


@pytest.mark.netns
def test_squash_options_on_the_command_line(env):
    """--allow with --squash=all --anonuid/--anongid: the one-export
    case without a file."""
    ns = env.new_netns()
    d = env.start_daemon(listen="0.0.0.0:0", squash="all",
                         extra=["--allow", "127.0.0.0/8,::1", "--anonuid", "2000",
                                "--anongid", "3000"])
    env.export.chmod(0o777)
    m = env.mount(d)
    write_file(m / "f", b"x")
    st = os.stat(env.export / "f")
    assert (st.st_uid, st.st_gid) == (2000, 3000)
    mount_fails(env, d, ns)
    assert re.search(rf"refused {re.escape(ns.ip)}:\d+: no export rule admits its address "
                     r"\(rules: --allow\)", d.log())


def test_default_exports_file(env):
    """/etc/podfs/exports is read when it exists (here: an overlay on /etc
    in a private mount namespace): its errors, its mode and rule flags
    beside it exit 2."""
    top = env.root / "etc-top"
    (top / "podfs").mkdir(parents=True)
    f = rules(env, "* rw\n\n10.0.0.0/33 rw\n")
    os.rename(f, top / "podfs" / "exports")
    f = top / "podfs" / "exports"
    script = 'mount -t overlay podfs-etc -o "lowerdir=$1:/etc" /etc || exit 99; shift; exec "$@"'

    def podfsd_in_ns(*args):
        return run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                    top, PODFSD, "--listen", "127.0.0.1:0", "--key", env.key, "--state-dir",
                    env.root / "st-x", *args, env.export], timeout=30, check=False)

    r = podfsd_in_ns()
    if r.returncode == 99:
        pytest.skip(f"no overlay mount on /etc here: {r.stderr.strip()}")
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == "podfsd: /etc/podfs/exports:3: prefix length over 32 in " \
        "'10.0.0.0/33'", r.stderr
    f.write_text("* rw\n")
    r = podfsd_in_ns("--allow", "127.0.0.1")
    assert r.returncode == 2, r.stderr
    assert "--allow cannot be used with the exports file /etc/podfs/exports" in r.stderr
    f.chmod(0o666)
    r = podfsd_in_ns()
    assert r.returncode == 2, r.stderr
    assert "/etc/podfs/exports is writable by group or others" in r.stderr, r.stderr
    assert not os.path.exists("/etc/podfs/exports")  # the overlay stayed private


def test_dual_stack_listener(env):
    """On [::], an IPv4 client arrives as ::ffff:127.0.0.1 and matches the
    IPv4 rule; ::1 is IPv6 and matches only its own rule."""
    f = rules(env, "127.0.0.0/8 rw,no_root_squash\n")
    d = env.start_daemon(listen="[::]:0", squash=None, extra=["--exports", f])
    m = env.mount(d, host="127.0.0.1")
    write_file(m / "v4", b"x")
    assert os.stat(env.export / "v4").st_uid == 0
    assert re.search(r"conn \d+: \[::ffff:127\.0\.0\.1\]:\d+ \(.*\) authenticated", d.log())
    mnt = env.root / "v6"
    mnt.mkdir()
    r = run([PODFS, f"[::1]:{d.port}", mnt, "-f", "-o", f"key={env.key}"], timeout=60,
            check=False)
    assert r.returncode != 0 and not os.path.ismount(mnt), r.stderr
    assert re.search(r"refused \[::1\]:\d+: no export rule admits its address", d.log())
    rules(env, "127.0.0.0/8 rw,no_root_squash\n::1 ro,no_root_squash\n")
    sighup(env, d, "reloaded export rules")
    m6 = env.mount(d, path=mnt, host="[::1]")
    assert read_file(m6 / "v4") == b"x"
    assert eno(write_file, m6 / "v6", b"y") == errno.EROFS


@pytest.mark.plaintext
def test_read_only_never_opens_for_writing(env):
    """On a read-only export, OPEN for writing is EROFS; a READ naming a
    fid the coordinator does not know (after a restart, the client's
    reopen) opens the file again, and then for reading only, whatever
    access mode the request names: a file open for writing on the
    coordinator would make an exec of it there fail with ETXTBSY."""
    d = env.start_daemon(extra=["--ro"])
    tool = d.export / "tool"
    write_file(tool, open("/bin/true", "rb").read())
    os.chmod(tool, 0o777)
    key = P.load_key(env.key)
    user = P.creds(1000, 1000)
    with P.connect(d.host, d.port, key) as c:
        h, _ = c.lookup(c.root, "tool", cr=user)
        with pytest.raises(P.PfsError) as e:
            c.open(h, flags=os.O_RDWR, fid=77, cr=user)
        assert e.value.status == errno.EROFS
        assert c.read(h, 77, 0, 4, flags=os.O_RDWR, cr=user) == b"\x7fELF"
        with pytest.raises(P.PfsError) as e:
            c.read(h, 78, 0, 4, flags=os.O_WRONLY, cr=user)
        assert e.value.status == errno.EROFS
        modes = []
        for n in os.listdir(f"/proc/{d.proc.pid}/fd"):
            try:
                if os.readlink(f"/proc/{d.proc.pid}/fd/{n}") == str(tool):
                    with open(f"/proc/{d.proc.pid}/fdinfo/{n}") as f:
                        flags = int(f.read().split("flags:")[1].split()[0], 8)
                    modes.append(flags & os.O_ACCMODE)
            except OSError:
                pass
        assert modes and all(m == os.O_RDONLY for m in modes), modes
        assert run([str(tool)], check=False).returncode == 0
