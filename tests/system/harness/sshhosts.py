"""sshhosts.py: hosts reached over ssh, for `podfs pod`: each "host" is a
network namespace on a bridge with an address of its own, running its own
sshd in a private mount namespace, so that every ssh session into it sees
that host's own /etc/podfs, /usr/local, /run/podfs, /run/mount,
/var/lib/podfs, /srv/podfs and root's home (tmpfs each), its own mounts at /mnt/podfs and
its own /etc/fstab (a per-host file bound over it); /dev/fuse and the
rest are shared.

The bridge lives in a namespace of its own (the "switch"); the test runs
`podfs pod` there (`SshHosts.local_argv`), so nothing is added to the
main namespace's network and no forwarding is needed. The hosts are
10.77.0.(10+i) and fd77::(10+i); SshHosts.DEAD (10.77.0.99) is an address
on the bridge that nobody answers.

Each sshd runs under a reaper.Reaper (a child subreaper in the host's
namespaces): whatever the ssh sessions leave in the background (podfsd
--daemon, podfs) becomes its child, so the test learns how it ended, and
finish() kills whatever is left. The sessions' sanitizer reports go to the
test's logs/ (sshd's SetEnv).
"""

import os
import subprocess
import time
from pathlib import Path

from helpers import run
from reaper import Reaper

from .netns import NamedNS, ip_batch, plug_in

# Where each host has a private tmpfs (mode), and its fstab.
PRIVATE = {
    "/etc/podfs": "700",
    "/usr/local": "755",
    "/run/podfs": "755",
    "/run/mount": "755",
    "/var/lib/podfs": "700",
    "/srv/podfs": "755",
    # No systemd on a host (its /run/systemd has no "system"), unless a
    # test fakes one there; nor the machine's units or defaults, which a
    # host's podfs pod up would otherwise write.
    "/run/systemd": "755",
    "/etc/systemd/system": "755",
    "/etc/default": "755",
    # sshd's privilege-separation directory: made by its init script or
    # unit, so missing on a host where neither has run since boot.
    "/run/sshd": "755",
    # sudo's timestamps (hosts with a sudo user).
    "/run/sudo": "711",
    # root's home: a fresh host's, without the dot files of this
    # machine's root (whose .bashrc, run by every ssh command, may start
    # a pyenv or conda and cost half a second each time).
    "/root": "700",
}
# The user a host with sudo_user logs in as (its own /etc/passwd, group,
# shadow and sudoers bound over the machine's, in its mount namespace).
SUDO_USER = "podfstest"
SUDO_UID = 4242
# The mount point: a directory of the main namespace (podfs mounts there
# are private to each host all the same).
MOUNT_POINT = "/mnt/podfs"

_counter = [0]


def write_sudo_user_files(d, user, uid):
    """Writes into directory d the machine's passwd, group, shadow with
    user (uid) added, and a sudoers that lets user run anything without
    a password: for a mount namespace to bind over /etc's. Returns their
    names."""
    files = {
        "passwd": (open("/etc/passwd").read() + f"{user}:x:{uid}:{uid}:podfs test:/:/bin/sh\n",
                   0o644),
        "group": (open("/etc/group").read() + f"{user}:x:{uid}:\n", 0o644),
        "shadow": (open("/etc/shadow").read() + f"{user}:*:19000:0:99999:7:::\n", 0o640),
        # The sanitizers' options reach the programs sudo runs.
        "sudoers": ("Defaults env_reset\n"
                    'Defaults env_keep += "ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS"\n'
                    "Defaults !requiretty, !lecture, !syslog\n"
                    "root ALL=(ALL:ALL) ALL\n"
                    f"{user} ALL=(ALL:ALL) NOPASSWD: ALL\n", 0o440),
    }
    for name, (text, mode) in files.items():
        (d / name).write_text(text)
        os.chmod(d / name, mode)
    return list(files)


class SshHosts:
    DEAD = "10.77.0.99"

    def __init__(self, env, n, sudo_hosts=()):
        """n hosts; those in sudo_hosts also have the user SUDO_USER, who
        may log in with the same key and run anything with `sudo -n`."""
        self.env = env
        self.sudo_hosts = set(sudo_hosts)
        self.hosts = []
        self.reapers = []
        self.made_dirs = []
        _counter[0] += 1
        uniq = f"{os.getpid() % 100000}s{_counter[0]}"
        self.switch = NamedNS(f"pfsw{uniq}")
        env.netns.append(self.switch)
        sw = self.switch.name
        ip_batch([
            ["link", "add", "br0", "type", "bridge"],
            ["addr", "add", "10.77.0.1/24", "dev", "br0"],
            ["addr", "add", "fd77::1/64", "dev", "br0", "nodad"],
            ["link", "set", "br0", "up"],
        ], netns=sw)

        d = env.root / "ssh"
        d.mkdir()
        os.chmod(d, 0o700)
        self.dir = d
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", d / "id"], timeout=30)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", d / "hostkey"], timeout=30)
        hostpub = (d / "hostkey.pub").read_text().split()[:2]
        (d / "authorized_keys").write_text((d / "id.pub").read_text())
        addrs = [self.addr(i) for i in range(n)] + [self.addr6(i) for i in range(n)] + [self.DEAD]
        (d / "known_hosts").write_text(",".join(addrs) + " " + " ".join(hostpub) + "\n")
        self.ssh_config = d / "config"
        self.ssh_config.write_text(
            "Host *\n"
            "  User root\n"
            f"  IdentityFile {d / 'id'}\n"
            "  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {d / 'known_hosts'}\n"
            "  StrictHostKeyChecking yes\n"
            "  ConnectTimeout 5\n")

        # The mount points of the hosts' tmpfs: made here if missing (with
        # the modes podfs would give them), removed again by finish().
        for p, mode in list(PRIVATE.items()) + [(MOUNT_POINT, "755")]:
            if not os.path.isdir(p):
                os.makedirs(p)
                os.chmod(p, int(mode, 8))
                self.made_dirs.append(p)
        try:
            for i in range(n):
                self._host(i)
        except BaseException:
            self.finish()
            raise

    @staticmethod
    def addr(i):
        return f"10.77.0.{10 + i}"

    @staticmethod
    def addr6(i):
        return f"fd77::{10 + i:x}"

    def _host(self, i):
        env, sw = self.env, self.switch.name
        ns = NamedNS(f"{self.switch.name}h{i}")
        self.env.netns.append(ns)
        plug_in(sw, f"v{i}", ns.name, [[f"{self.addr(i)}/24"], [f"{self.addr6(i)}/64", "nodad"]])

        hd = env.root / f"host{i}"
        hd.mkdir()
        fstab = hd / "fstab"
        fstab.write_text(f"# /etc/fstab of test host {i}\n")
        san = []
        for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
            if os.environ.get(var):
                san.append(f"{var}={os.environ[var]}:log_path={env.logs}/san.host{i}")
        conf = hd / "sshd_config"
        conf.write_text(
            f"ListenAddress {self.addr(i)}\n"
            f"ListenAddress {self.addr6(i)}\n"
            f"HostKey {self.dir / 'hostkey'}\n"
            f"PidFile {hd / 'sshd.pid'}\n"
            "PermitRootLogin prohibit-password\n"
            # A copy in the host's /run/sshd: sshd reads it as the user
            # logging in, who may not be root.
            "AuthorizedKeysFile /run/sshd/authorized_keys\n"
            "StrictModes no\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "UsePAM no\n"
            "PrintMotd no\n"
            "MaxStartups 100\n"
            "MaxSessions 100\n"
            + (f"SetEnv {' '.join(san)}\n" if san else ""))
        r = Reaper(env, f"host{i}", netns=ns, private_mounts=True)
        self.reapers.append(r)
        script = "".join(f"mount -t tmpfs -o mode={mode} podfs-test-host{i} {p}\n"
                         for p, mode in PRIVATE.items())
        script += f"mount --bind {fstab} /etc/fstab\n"
        script += (f"install -m 644 {self.dir / 'authorized_keys'} "
                   "/run/sshd/authorized_keys\n")
        if i in self.sudo_hosts:
            script += self._sudo_user(hd)
        script += f"/usr/sbin/sshd -f {conf} -E {env.logs}/sshd-host{i}.log\n"
        rc, out, err = r.sh(script, timeout=30)
        assert rc == 0, f"host {i}: {out}{err}"
        self.hosts.append(ns)
        self._wait_listening(ns, self.addr(i))

    @staticmethod
    def _sudo_user(hd):
        """Files for a host's sudo user in its directory hd, and the
        script lines that bind them over the machine's."""
        script = ""
        for name in write_sudo_user_files(hd, SUDO_USER, SUDO_UID):
            script += f"mount --bind {hd / name} /etc/{name}\n"
        return script

    def _wait_listening(self, ns, addr):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            r = subprocess.run(ns.exec_argv(["ss", "-Hltn", f"src {addr}:22"]), text=True,
                               capture_output=True, timeout=10)
            if r.stdout.strip():
                return
            time.sleep(0.1)
        raise AssertionError(f"sshd on {addr} is not listening after 20 s")

    def local_argv(self, argv):
        """argv run on the switch: the machine `podfs pod` runs on."""
        return self.switch.exec_argv(argv)

    def sh(self, i, script, timeout=60):
        """script run on host i (its namespaces, not over ssh): (rc, out, err)."""
        return self.reapers[i].sh(script, timeout)

    def ok(self, i, script, timeout=60):
        rc, out, err = self.sh(i, script, timeout)
        assert rc == 0, f"host {i}: {script!r}: exit status {rc}\n{out}{err}"
        return out

    def left_behind(self, i, timeout=20):
        """({pid: status} of the background processes of host i that ended,
        [pids still running]) (sshd is one of those running). sshd's own
        are left out of those that ended: the session of a user who is
        not root leaves one behind that ends with status 255."""
        r = self.reapers[i]
        ended, running = r.left_behind(timeout)
        return {p: s for p, s in ended.items() if r.comm.get(p) != "sshd"}, running

    def finish(self):
        """Detaches what is mounted on the hosts and kills whatever runs
        there (sshd, and podfsd and podfs if the test left them);
        returns what it had to kill beside sshd, per host."""
        killed = {}
        for i, r in enumerate(self.reapers):
            try:
                r.sh("fusermount3 -u -z /mnt/podfs 2>/dev/null || true", timeout=20)
            except AssertionError:
                pass
            pids = r.finish()
            sshd = (self.env.root / f"host{i}" / "sshd.pid")
            spid = int(sshd.read_text()) if sshd.exists() else None
            rest = [p for p in pids if p != spid]
            if rest:
                killed[i] = rest
        self.reapers = []
        for p in reversed(self.made_dirs):
            try:
                os.rmdir(p)
            except OSError:
                pass
        self.made_dirs = []
        return killed


def ssh_hosts_file(path: Path, lines):
    path.write_text("\n".join(lines) + "\n")
    return path
