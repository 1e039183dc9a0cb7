"""switch.py: hosts that reach the coordinator and each other, for
peer-assisted reads: a bridge in a network namespace of its own (the
"switch"), each host a network namespace with one port on it, and the
main namespace (where the test's podfsd runs) on it too, through a veth
pair. Nothing is routed: hosts talk to each other at layer 2, as the
hosts of a pod on one network do, so no forwarding is needed in the main
namespace (it stays off).

Addresses: 10.78.K.1 (the main namespace's port: podfsd listens there)
and 10.78.K.(10+i) for host i, K chosen free. Everything is deleted with
the test's namespaces (env.netns).
"""

import os

from helpers import run

from .netns import NamedNS, ip_batch, plug_in

_counter = [0]


class _MainPort:
    """The main namespace's veth on the switch: deleting it (with the
    switch's end) is all the main namespace needs."""

    def __init__(self, name):
        self.name = name

    def delete(self):
        import subprocess
        subprocess.run(["ip", "link", "del", self.name], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=10)
        return None


class Switch:
    """n hosts on one switch with the main namespace. host(i) is the
    namespace of host i (for env.mount(netns=...)), ip(i) its address,
    coord_ip the main namespace's."""

    def __init__(self, env, n):
        _counter[0] += 1
        uniq = f"{os.getpid() % 100000}w{_counter[0]}"
        used = run(["ip", "-o", "-4", "addr", "show"], timeout=10).stdout
        base = (os.getpid() * 13 + _counter[0]) % 200
        for i in range(200):
            k = 20 + (base + i) % 200
            if f" 10.78.{k}." not in used:
                break
        self.net = f"10.78.{k}"
        self.coord_ip = f"{self.net}.1"
        self.switch = NamedNS(f"pfsw{uniq}")
        env.netns.append(self.switch)
        sw = self.switch.name
        ip_batch([["link", "add", "br0", "type", "bridge"], ["link", "set", "br0", "up"]],
                 netns=sw)
        main = f"pfsm{uniq}"[:15]
        port = _MainPort(main)
        env.netns.append(port)
        ip_batch([
            ["link", "add", main, "type", "veth", "peer", "name", "up0", "netns", sw],
            ["addr", "add", f"{self.coord_ip}/24", "dev", main],
            ["link", "set", main, "up"],
        ])
        ip_batch([["link", "set", "up0", "master", "br0", "up"]], netns=sw)
        self.hosts = []
        for i in range(n):
            ns = NamedNS(f"{sw}h{i}")
            env.netns.append(ns)
            plug_in(sw, f"v{i}", ns.name, [[f"{self.ip(i)}/24"]])
            self.hosts.append(ns)

    def ip(self, i):
        return f"{self.net}.{10 + i}"

    def host(self, i):
        return self.hosts[i]
