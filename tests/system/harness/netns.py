"""netns.py: a network namespace standing in for another host (a veth
pair to the main namespace), created for one test and deleted at its end.
"""

import fcntl
import os
import subprocess

from helpers import run

from .settings import TEST_ROOT

_ns_counter = [0]
# Held while a NetNS picks its subnet and adds its addresses.
ADDR_LOCK = "/run/lock/podfs-tests-netns.lock" if os.path.isdir("/run/lock") \
    else "/tmp/podfs-tests-netns.lock"


def ip_batch(lines, netns=None, timeout=10):
    """Runs the `ip` commands lines (each without the leading "ip") in one
    process (`ip -batch`), in network namespace netns if given: a test
    host takes a dozen of them, and a process each cost more than the
    commands. The first that fails stops the rest and raises."""
    argv = ["ip"] + (["-n", netns] if netns else []) + ["-batch", "-"]
    run(argv, timeout=timeout, stdin=None,
        input="".join(" ".join(str(a) for a in line) + "\n" for line in lines))


def plug_in(switch, port, ns, addrs):
    """Joins network namespace ns to the bridge br0 of namespace switch:
    a veth pair, port on the switch's side, eth0 on ns's, up, with the
    addresses addrs on eth0 (each a list: "ADDR/LEN", then any options of
    `ip addr add`, e.g. "nodad")."""
    ip_batch([
        ["link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns],
        ["link", "set", port, "master", "br0", "up"],
    ], netns=switch)
    ip_batch([["addr", "add", a[0], "dev", "eth0"] + a[1:] for a in addrs] +
             [["link", "set", "eth0", "up"]], netns=ns)


class NamedNS:
    """A named network namespace (ip netns) with only its loopback up,
    deleted by delete(): the hosts of a test pod, joined by a switch."""

    def __init__(self, name):
        self.name = name
        ip_batch([["netns", "add", name]])
        (TEST_ROOT / ".netns").mkdir(exist_ok=True)
        (TEST_ROOT / ".netns" / name).touch()
        ip_batch([["link", "set", "lo", "up"]], netns=name)

    def exec_argv(self, argv):
        """argv in this network namespace, in the caller's mount namespace."""
        return ["nsenter", f"--net=/var/run/netns/{self.name}"] + [str(a) for a in argv]

    def delete(self):
        return delete_netns(self.name)


class NetNS:
    """A network namespace standing in for another host, joined to the main
    namespace by a veth pair: host side 10.201.K.1, namespace side
    10.201.K.2, default route via the host side (so the namespace can reach
    any address of the main namespace, e.g. another veth's host side)."""

    def __init__(self, env):
        _ns_counter[0] += 1
        uniq = f"{os.getpid() % 100000}x{_ns_counter[0]}"
        self.name = f"pfst{uniq}"
        self.hveth = f"pfh{uniq}"[:15]
        self.cveth = f"pfc{uniq}"[:15]
        env.netns.append(self)
        # The subnet is chosen and taken under a lock of the machine's:
        # pytest runs side by side (scripts/test) must not pick the same.
        with open(ADDR_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._create()

    def _create(self):
        used = run(["ip", "-o", "-4", "addr", "show"], timeout=10).stdout
        base = (os.getpid() * 7 + _ns_counter[0]) % 200
        for i in range(200):
            k = 20 + (base + i) % 200
            if f" 10.201.{k}." not in used:
                break
        self.host_ip = f"10.201.{k}.1"
        self.ip = f"10.201.{k}.2"
        # env.netns has it already: delete() removes whatever part was made.
        ip_batch([
            ["netns", "add", self.name],
            ["link", "add", self.hveth, "type", "veth", "peer", "name", self.cveth],
            ["link", "set", self.cveth, "netns", self.name],
            ["addr", "add", f"{self.host_ip}/24", "dev", self.hveth],
            ["link", "set", self.hveth, "up"],
        ])
        ip_batch([
            ["addr", "add", f"{self.ip}/24", "dev", self.cveth],
            ["link", "set", self.cveth, "up"],
            ["link", "set", "lo", "up"],
            ["route", "add", "default", "via", self.host_ip],
        ], netns=self.name)
        # Recorded so scripts/test can delete it if pytest itself is killed.
        (TEST_ROOT / ".netns").mkdir(exist_ok=True)
        (TEST_ROOT / ".netns" / self.name).touch()

    def exec_argv(self, argv):
        """argv run in this namespace. Not `ip netns exec`: that makes a
        private mount namespace and a mount made there would be invisible
        here. nsenter --net only switches the network namespace, then
        execs argv (same pid)."""
        return ["nsenter", f"--net=/var/run/netns/{self.name}"] + [str(a) for a in argv]

    def delete(self):
        subprocess.run(["ip", "link", "del", self.hveth], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=10)
        return delete_netns(self.name)


def delete_netns(name):
    """Deletes the network namespace name (and its record in TEST_ROOT);
    returns a problem as a string, or None."""
    r = subprocess.run(["ip", "netns", "del", name], text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10)
    if r.returncode != 0 and os.path.exists(f"/var/run/netns/{name}"):
        return f"ip netns del {name}: {r.stdout.strip()}"
    (TEST_ROOT / ".netns" / name).unlink(missing_ok=True)
    return None
