"""The targets of a run and their mounts: setting up local, podfs (and its A/B
twin podfs-b), bindfs and sshfs with their servers, the FUSE client command
line of each, fresh extra mounts for the workloads, remounts before cold
measurements, and whether a target is still alive."""

import os
import shutil
import subprocess
import time

from .build import ensure_build, ensure_latproxy
from .common import REPO, BenchError, drop_caches, free_port, log, mount_fstype, rcstr, run, tail
from .ctx import Mount, wait_listen, wait_mount
from .spec import AB_TARGET, PLAIN_TARGET, PODFS_TARGETS, TARGET_ORDER, ab_suffix


class Target:
    def __init__(self, name):
        self.name = name
        self.path = None
        self.error = None      # setup error: every cell is this error
        self.broken = None     # set after a timeout / dead mount: skip the rest
        self.proc = None       # FUSE daemon (mount targets)
        self.logpath = None
        self.info = ""
        self.mount_cmd = None
        self.remount_s = []
        self.port = None       # server port, direct (podfs, sshfs)
        self.port_rtt = None   # the same through latproxy (--rtt-us)
        self.server = None     # server Popen (podfsd, sshd): CPU accounting
        self.exe = None        # podfs targets: the podfs client binary
        self.key = None        # podfs targets: the key file podfsd made

    def alive(self):
        if self.error:
            return self.error
        if self.broken:
            return "%s: skipped, failed earlier (%s)" % (self.name, self.broken)
        if self.proc is not None:
            if self.proc.poll() is not None:
                self.broken = "%s %s: %s" % (self.name, rcstr(self.proc.returncode),
                                             tail(self.logpath, 3))
                return self.broken
            if mount_fstype(self.path) is None:
                self.broken = "mount disappeared"
                return self.broken
        return None


class Targets:
    """The targets of one run by name; their processes and mounts go to ctx,
    warnings for the report to notes."""

    def __init__(self, args, scratch, ctx, notes):
        self.a = args
        self.scratch = scratch
        self.export = scratch.export
        self.dir = scratch.dir
        self.ctx = ctx
        self.notes = notes
        self.build = args.build if os.path.isabs(args.build) else os.path.join(REPO, args.build)
        self.build_b = args.ab_build    # the build dir of podfs-b (absolute), or None
        self.by_name = {}
        self.latproxy = None
        self.sshfs_opts = None
        self.sshfs_optlist = []

    def names(self):
        """The names of the targets set up, in TARGET_ORDER."""
        return [n for n in TARGET_ORDER if n in self.by_name]

    def ensure_latproxy(self):
        if not self.latproxy:
            self.latproxy = ensure_latproxy(self.build)
        return self.latproxy

    def start_latproxy(self, name, target_port):
        exe = self.ensure_latproxy()
        port = free_port()
        half = self.a.rtt_us / 2.0
        p, lp = self.ctx.spawn("latproxy-" + name, [exe, "-l", "127.0.0.1:%d" % port,
                                                    "-t", "127.0.0.1:%d" % target_port,
                                                    "-d", "%gus" % half])
        wait_listen(port, p, lp, "latproxy")
        return port

    # ---------- setup ----------
    def setup_all(self):
        for name in self.a.targets:
            t = Target(name)
            self.by_name[name] = t
            log("setting up %s" % name)
            try:
                if name in PODFS_TARGETS:
                    self.setup_podfs(t)
                else:
                    getattr(self, "setup_" + name)(t)
                # the export must be visible through the target (subprocess: never hang here)
                r = run(["ls", os.path.join(t.path, self.scratch.treename)], timeout=30)
                n = len(r.stdout.split())
                if n != self.scratch.ndirs:
                    raise BenchError("%s/%s lists %d entries, expected %d"
                                     % (t.path, self.scratch.treename, n, self.scratch.ndirs))
                log("%s ready at %s" % (name, t.path))
            except BenchError as e:
                t.error = "setup: %s" % e
                log("ERROR %s: %s" % (name, t.error))
            except OSError as e:
                t.error = "setup: %s" % e
                log("ERROR %s: %s" % (name, t.error))
        ab = [self.by_name[n] for n in ("podfs", AB_TARGET) if n in self.by_name]
        if len(ab) == 2 and ab[0].info != ab[1].info:
            self.notes.append("WARNING: A/B of different builds: podfs %s, %s %s"
                              % (ab[0].info or "(unknown)", AB_TARGET, ab[1].info or "(unknown)"))

    def setup_local(self, t):
        t.path = self.export

    def setup_bindfs(self, t):
        if shutil.which("bindfs") is None:
            raise BenchError("bindfs not installed")
        mnt = os.path.join(self.dir, "mnt", "bindfs")
        self.mount_fuse(t, mnt, self.mount_cmd(t, mnt))

    def setup_sshfs(self, t):
        for exe in ("sshfs", "ssh-keygen"):
            if shutil.which(exe) is None:
                raise BenchError("%s not installed" % exe)
        sshd = "/usr/sbin/sshd"
        if not os.access(sshd, os.X_OK):
            raise BenchError("%s not installed (openssh-server)" % sshd)
        sd = os.path.join(self.dir, "ssh")
        os.makedirs(sd, exist_ok=True)
        os.chmod(sd, 0o700)
        hostkey, idkey = os.path.join(sd, "host_ed25519"), os.path.join(sd, "id_ed25519")
        for k in (hostkey, idkey):
            if not os.path.exists(k):
                run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", k], timeout=30)
        ak = os.path.join(sd, "authorized_keys")
        shutil.copyfile(idkey + ".pub", ak)
        os.chmod(ak, 0o600)
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)   # sshd's privsep dir
        port = free_port()
        sftp = "/usr/lib/openssh/sftp-server"
        if not os.access(sftp, os.X_OK):
            sftp = "internal-sftp"
        cfg = os.path.join(sd, "sshd_config")
        with open(cfg, "w") as f:
            f.write("\n".join([
                "Port %d" % port, "ListenAddress 127.0.0.1", "HostKey %s" % hostkey,
                "AuthorizedKeysFile %s" % ak, "PermitRootLogin prohibit-password",
                "PubkeyAuthentication yes", "PasswordAuthentication no",
                "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
                "PidFile %s" % os.path.join(sd, "sshd.pid"), "UseDNS no",
                "Subsystem sftp %s" % sftp, ""]))
        p, lp = self.ctx.spawn("sshd", [sshd, "-D", "-e", "-f", cfg])
        wait_listen(port, p, lp, "sshd")
        t.server, t.port = p, port
        if self.a.rtt_us > 0:
            port = t.port_rtt = self.start_latproxy("sshd", port)
        mnt = os.path.join(self.dir, "mnt", "sshfs")
        help_text = run(["sshfs", "-h"], timeout=10, check=False)
        opts = ["Ciphers=aes128-gcm@openssh.com"]
        if b"max_conns" in help_text.stdout + help_text.stderr:
            opts.append("max_conns=4")
        else:
            self.notes.append("sshfs does not support -o max_conns: mounted without it")
        opts += ["kernel_cache", "IdentityFile=%s" % idkey, "StrictHostKeyChecking=no",
                 "UserKnownHostsFile=/dev/null", "BatchMode=yes", "LogLevel=ERROR"]
        self.sshfs_opts = ",".join(o for o in opts if not o.startswith("IdentityFile"))
        self.sshfs_optlist = opts
        self.mount_fuse(t, mnt, self.mount_cmd(t, mnt, port))

    def setup_podfs(self, t):
        """podfs, or podfs-b from the --ab-build dir, or podfs-plain (without
        TLS: podfsd --allow-plaintext, mounts -o tls=off): its own podfsd (key,
        state dir, port), its own mount at DIR/mnt/NAME; all set up the same way."""
        b = t.name == AB_TARGET
        podfsd, t.exe, t.info = ensure_build(self.build_b if b else self.build, self.a.no_build, self.notes,
                                             configure=not b)
        sfx = ab_suffix(t.name)
        pd = os.path.join(self.dir, t.name)
        key = os.path.join(pd, "key")
        state = os.path.join(pd, "state")
        portfile = os.path.join(pd, "port")
        shutil.rmtree(pd, ignore_errors=True)
        os.makedirs(state)
        os.chmod(pd, 0o700)
        run([podfsd, "--genkey", key], timeout=30)
        if not os.path.exists(key):
            raise BenchError("podfsd --genkey did not create %s" % key)
        # Loopback only, run as root: root stays root on the mount, as
        # before export rules (a build without --squash has no squashing).
        helptext = run([podfsd, "--help"], timeout=30).stdout.decode()
        squash = ["--squash=none"] if "--squash" in helptext else []
        # A new state dir each run (and one per target) on the same export.
        squash += ["--new-handle-secret"] if "--new-handle-secret" in helptext else []
        cmd = [podfsd, "--listen", "127.0.0.1:0", "--port-file", portfile, "--key", key,
               "--state-dir", state] + squash + self.a.podfsd_arg + \
            (["--allow-plaintext"] if t.name == PLAIN_TARGET else []) + [self.export]
        p, lp = self.ctx.spawn("podfsd" + sfx, cmd)
        t0, port = time.monotonic(), None
        while time.monotonic() - t0 < 15:
            try:
                with open(portfile) as f:
                    txt = f.read().strip()
                if txt:
                    port = int(txt.rsplit(":", 1)[-1])
                    break
            except (OSError, ValueError):
                pass
            if p.poll() is not None:
                raise BenchError("podfsd %s: %s" % (rcstr(p.returncode), tail(lp, 4)))
            time.sleep(0.05)
        if port is None:
            raise BenchError("podfsd wrote no port file in 15s: %s" % tail(lp, 4))
        t.server, t.port = p, port
        t.key = key
        if self.a.rtt_us > 0:
            port = t.port_rtt = self.start_latproxy("podfsd" + sfx, port)
        mnt = os.path.join(self.dir, "mnt", t.name)
        os.makedirs(mnt, exist_ok=True)
        self.mount_fuse(t, mnt, self.mount_cmd(t, mnt, port))

    # ---------- mounts ----------
    def mount_cmd(self, t, mnt, port=None, extra=()):
        """Command line of a FUSE daemon (foreground) mounting target t at mnt."""
        if t.name == "bindfs":
            return ["bindfs", "-f", "--multithreaded", "-o", "kernel_cache,big_writes", self.export, mnt]
        if t.name == "sshfs":
            return ["sshfs", "-f", "-o", ",".join(list(self.sshfs_optlist) + list(extra)), "-p", str(port),
                    "root@127.0.0.1:" + self.export, mnt]
        if t.name in PODFS_TARGETS:
            opts = "key=" + t.key
            if self.a.podfs_opts:
                opts += "," + self.a.podfs_opts
            if extra:
                opts += "," + ",".join(extra)
            if t.name == PLAIN_TARGET:
                opts += ",tls=off"
            return [t.exe, "127.0.0.1:%d" % port, mnt, "-f", "-o", opts]
        raise BenchError("%s is not a FUSE target" % t.name)

    def mount_fuse(self, t, mnt, cmd):
        """Start a FUSE daemon in the foreground and wait for its mount."""
        p, lp = self.ctx.spawn(t.name, cmd)
        self.ctx.mounts.append((mnt, p))
        t.path, t.proc, t.logpath, t.mount_cmd = mnt, p, lp, cmd
        wait_mount(mnt, p, lp)

    def remount(self, t):
        """Fresh client mount (servers keep running): empties the FUSE daemon's own caches."""
        if t.proc is None or t.alive():
            return
        mnt, old = t.path, t.proc
        t0 = time.monotonic()
        self.ctx.unmount(mnt, old)
        try:
            old.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.ctx.stop(old)
        self.ctx.mounts = [(m, p) for (m, p) in self.ctx.mounts if p is not old]
        if mount_fstype(mnt) is not None:
            raise BenchError("remount: %s still mounted" % mnt)
        self.mount_fuse(t, mnt, t.mount_cmd)
        t.remount_s.append(time.monotonic() - t0)

    def make_cold(self, t):
        """Before a cold measurement: fresh FUSE mount (unless --cold drop), then drop caches."""
        if self.a.cold == "remount":
            self.remount(t)
        drop_caches()

    def open_mount(self, t, tag, port=None, extra=()):
        """An extra, fresh client mount of t at DIR/mnt/NAME-TAG (servers are shared)."""
        mnt = os.path.join(self.dir, "mnt", "%s-%s" % (t.name, tag))
        os.makedirs(mnt, exist_ok=True)
        if mount_fstype(mnt) is not None:
            self.ctx.unmount(mnt)
        p, lp = self.ctx.spawn("%s-%s" % (t.name, tag), self.mount_cmd(t, mnt, port, extra))
        self.ctx.mounts.append((mnt, p))
        m = Mount("%s-%s" % (t.name, tag), mnt, p, lp)
        try:
            wait_mount(mnt, p, lp)
        except BenchError:
            self.close_mount(m)
            raise
        return m

    def close_mount(self, m):
        if m is None:
            return
        self.ctx.unmount(m.mnt, m.proc)
        try:
            m.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.ctx.stop(m.proc)
        self.ctx.mounts = [(x, p) for (x, p) in self.ctx.mounts if p is not m.proc]
        if mount_fstype(m.mnt) is not None:
            raise BenchError("%s still mounted at %s" % (m.name, m.mnt))
