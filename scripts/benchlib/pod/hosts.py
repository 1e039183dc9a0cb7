"""The hosts of a pod on one machine: one podfsd (the coordinator, in this
network namespace) and up to 64 hosts, each a network namespace of its
own joined to this one by a veth pair (as tests/system/harness/netns.py
makes them: host side 10.210.K.1, namespace side 10.210.K.2, default
route through the host side; the host sides forward, so the hosts reach
each other too), with its own podfs mount at
DIR/mnt/pod-hK; with --rtt-us, a latproxy inside each namespace adds the
round trip on that host's path to podfsd (its own source address, as a
real host's, so podfsd's per-source limits see N hosts, not one).

Everything started goes through the run's Ctx (stopped by pid, mounts
unmounted); the namespaces are deleted by delete(), which the caller runs
in its finally block after Ctx.cleanup(). Stale namespaces and mounts of
a killed earlier run are removed by create()."""

import os
import shutil
import subprocess
import time

from ..common import LOG_START, BenchError, log, mount_fstype, rcstr, run, tail
from ..ctx import wait_mount

NS_PREFIX = "pfspod"
MAX_HOSTS = 64
LAT_PORT = 7100          # latproxy's port on each namespace's loopback


def _ns_list():
    r = run(["ip", "netns", "list"], timeout=20, check=False)
    return [ln.split()[0] for ln in r.stdout.decode().splitlines() if ln.strip()]


def _del_ns(name, hveth):
    subprocess.run(["ip", "link", "del", hveth], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=20)
    r = subprocess.run(["ip", "netns", "del", name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=20)
    if r.returncode != 0 and os.path.exists("/var/run/netns/" + name):
        return "ip netns del %s: %s" % (name, r.stdout.decode().strip())
    return None


class Host:
    def __init__(self, i, dir_):
        self.i = i
        self.ns = "%s%d" % (NS_PREFIX, i)
        self.hveth = "pfpodh%d" % i
        self.cveth = "pfpodc%d" % i
        self.host_ip = "10.210.%d.1" % (i + 1)
        self.ip = "10.210.%d.2" % (i + 1)
        self.mnt = os.path.join(dir_, "mnt", "pod-h%d" % i)
        self.proc = None     # podfs, while mounted
        self.logpath = None
        self.log_start = 0
        self.created = False

    def argv(self, argv):
        """argv run in this host's network namespace (mounts stay visible here)."""
        return ["nsenter", "--net=/var/run/netns/" + self.ns] + [str(a) for a in argv]


class PodHosts:
    def __init__(self, a, scratch, ctx, podfsd, podfs, latproxy=None):
        self.a = a
        self.scratch = scratch
        self.ctx = ctx
        self.podfsd_exe, self.podfs_exe, self.latproxy_exe = podfsd, podfs, latproxy
        self.dir = os.path.join(scratch.dir, "pod")
        self.hosts = []
        self.daemon = None     # Popen of podfsd
        self.daemon_log = None
        self.daemon_log_start = 0
        self.port = 0          # podfsd's port, kept over restarts
        self.key = os.path.join(self.dir, "key")
        self.ctl = os.path.join(self.dir, "podfsd.ctl")
        self.nstarts = 0
        self.latproxies = {}   # host index -> Popen

    # ---------- namespaces ----------
    def create(self, n):
        if n > MAX_HOSTS:
            raise BenchError("at most %d hosts" % MAX_HOSTS)
        os.makedirs(self.dir, exist_ok=True)
        os.chmod(self.dir, 0o700)
        stale = [s for s in _ns_list() if s.startswith(NS_PREFIX) and s[len(NS_PREFIX):].isdigit()]
        for s in stale:
            log("deleting stale namespace %s" % s)
            _del_ns(s, "pfpodh" + s[len(NS_PREFIX):])
        for d in os.listdir(os.path.join(self.scratch.dir, "mnt")):
            m = os.path.join(self.scratch.dir, "mnt", d)
            if d.startswith("pod-h") and mount_fstype(m) is not None:
                log("unmounting stale mount %s" % m)
                run(["fusermount3", "-uz", m], timeout=20, check=False)
        used = run(["ip", "-o", "-4", "addr", "show"], timeout=20).stdout.decode()
        if " 10.210." in used:
            raise BenchError("addresses in 10.210.0.0/16 are in use here (ip addr): the pod's hosts need them")
        log("creating %d host namespaces" % n)
        for i in range(n):
            h = Host(i, self.scratch.dir)
            self.hosts.append(h)
            h.created = True
            for cmd in (["ip", "netns", "add", h.ns],
                        ["ip", "link", "add", h.hveth, "type", "veth", "peer", "name", h.cveth],
                        ["ip", "link", "set", h.cveth, "netns", h.ns],
                        ["ip", "addr", "add", h.host_ip + "/24", "dev", h.hveth],
                        ["ip", "link", "set", h.hveth, "up"],
                        ["ip", "-n", h.ns, "addr", "add", h.ip + "/24", "dev", h.cveth],
                        ["ip", "-n", h.ns, "link", "set", h.cveth, "up"],
                        ["ip", "-n", h.ns, "link", "set", "lo", "up"],
                        ["ip", "-n", h.ns, "route", "add", "default", "via", h.host_ip]):
                run(cmd, timeout=20)
            # The hosts reach each other through this namespace, as a
            # pod's hosts do (peer-assisted reads: -o peers): its links
            # to them forward (the input link's flag decides); the
            # machine's other interfaces keep theirs.
            with open("/proc/sys/net/ipv4/conf/%s/forwarding" % h.hveth, "w") as f:
                f.write("1")
            os.makedirs(h.mnt, exist_ok=True)

    def delete(self):
        """Deletes every namespace made (after Ctx.cleanup stopped what ran in them)."""
        for h in reversed(self.hosts):
            if h.created:
                e = _del_ns(h.ns, h.hveth)
                if e:
                    log("WARNING: %s" % e)
                h.created = False

    # ---------- the coordinator ----------
    @property
    def coord_ip(self):
        return self.hosts[0].host_ip

    def start_daemon(self):
        """A fresh podfsd on host 0's host-side address, the same port and
        state dir every time (a new state dir for the run: its first start
        takes the export with --new-handle-secret; no lock is ever held,
        so a restart has no grace period); waits for its port file."""
        if not os.path.exists(self.key):
            run([self.podfsd_exe, "--genkey", self.key], timeout=30)
        state = os.path.join(self.dir, "state")
        first = []
        if self.nstarts == 0:
            shutil.rmtree(state, ignore_errors=True)
            os.makedirs(state)
            first = ["--new-handle-secret"]
        portfile = os.path.join(self.dir, "port")
        if os.path.exists(portfile):
            os.unlink(portfile)
        cmd = [self.podfsd_exe, "--listen", "%s:%d" % (self.coord_ip, self.port), "--port-file", portfile,
               "--key", self.key, "--state-dir", state, "--squash=none", "--control-socket=" + self.ctl] + first + self.a.podfsd_arg + [self.scratch.export]
        p, lp = self.ctx.spawn("podfsd-%d" % self.nstarts, cmd)
        self.daemon_log_start = LOG_START.get(lp, 0)
        self.nstarts += 1
        t0 = time.monotonic()
        port = None
        while time.monotonic() - t0 < 20:
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
            raise BenchError("podfsd wrote no port file in 20s: %s" % tail(lp, 4))
        self.port = port
        self.daemon, self.daemon_log = p, lp

    def stop_daemon(self):
        if self.daemon is not None:
            self.ctx.stop(self.daemon, timeout=20)
            if self.daemon.returncode not in (0, None):
                log("WARNING: podfsd %s: %s" % (rcstr(self.daemon.returncode), tail(self.daemon_log, 4)))
            self.daemon = None

    def start_latproxies(self, n):
        """With --rtt-us: a latproxy in each of the first n namespaces, on its
        loopback, to podfsd (started once: podfsd keeps its port)."""
        if self.a.rtt_us <= 0:
            return
        for h in self.hosts[:n]:
            if h.i in self.latproxies and self.latproxies[h.i].poll() is None:
                continue
            cmd = h.argv([self.latproxy_exe, "-l", "127.0.0.1:%d" % LAT_PORT,
                          "-t", "%s:%d" % (self.coord_ip, self.port), "-d", "%gus" % (self.a.rtt_us / 2.0)])
            p, lp = self.ctx.spawn("latproxy-h%d" % h.i, cmd)
            self.latproxies[h.i] = p
            t0 = time.monotonic()
            while time.monotonic() - t0 < 15:
                r = run(h.argv(["ss", "-Hltn", "sport = :%d" % LAT_PORT]), timeout=10, check=False)
                if r.stdout.strip():
                    break
                if p.poll() is not None:
                    raise BenchError("latproxy on host %d %s: %s" % (h.i, rcstr(p.returncode), tail(lp, 3)))
                time.sleep(0.05)
            else:
                raise BenchError("latproxy on host %d not listening after 15s" % h.i)

    # ---------- mounts ----------
    def mount(self, n):
        """podfs on the first n hosts, all started at once, each waited for."""
        hs = self.hosts[:n]
        for h in hs:
            if mount_fstype(h.mnt) is not None:
                raise BenchError("%s is still mounted" % h.mnt)
            addr = ("127.0.0.1:%d" % LAT_PORT) if self.a.rtt_us > 0 else "%s:%d" % (self.coord_ip, self.port)
            opts = "key=" + self.key + ("," + self.a.podfs_opts if self.a.podfs_opts else "")
            p, lp = self.ctx.spawn("podfs-h%d" % h.i, h.argv([self.podfs_exe, addr, h.mnt, "-f", "-o", opts]))
            self.ctx.mounts.append((h.mnt, p))
            h.proc, h.logpath, h.log_start = p, lp, LOG_START.get(lp, 0)
        for h in hs:
            wait_mount(h.mnt, h.proc, h.logpath, timeout=60)
        # Mounted is not answering: the kernel lists a mount before its
        # daemon has answered INIT. A bounded stat of each root, in a child
        # (a stuck one must not hang the bench).
        for h in hs:
            try:
                run(["stat", "-c", "%i", h.mnt], timeout=60)
            except BenchError as e:
                raise BenchError("host %d: podfs mounted %s but does not answer (%s); its log: %s"
                                 % (h.i, h.mnt, e, tail(h.logpath, 3)))

    def unmount(self):
        """Unmounts every mounted host; podfs must exit 0."""
        bad = []
        for h in self.hosts:
            if h.proc is None:
                continue
            self.ctx.unmount(h.mnt, h.proc)
            try:
                h.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.ctx.stop(h.proc)
            if h.proc.returncode != 0:
                bad.append("host %d: podfs %s: %s" % (h.i, rcstr(h.proc.returncode), tail(h.logpath, 3)))
            self.ctx.mounts = [(m, p) for (m, p) in self.ctx.mounts if p is not h.proc]
            h.proc = None
        return bad

    def dead(self, n):
        """Hosts among the first n whose podfs ended or whose mount is gone."""
        out = []
        for h in self.hosts[:n]:
            if h.proc is None or h.proc.poll() is not None:
                out.append("host %d: podfs %s: %s" % (h.i, rcstr(h.proc.returncode if h.proc else None),
                                                      tail(h.logpath, 3) if h.logpath else ""))
            elif mount_fstype(h.mnt) is None:
                out.append("host %d: its mount disappeared" % h.i)
        return out
