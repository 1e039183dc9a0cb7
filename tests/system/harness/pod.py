"""pod.py: a pod of hosts for multi-host tests: one daemon, and clients
A and B that each run podfs in a network namespace of their own, so the
daemon sees distinct hosts. Both mounts live in this mount namespace, so
the test reads and writes both.
"""


class Pod:
    """A daemon and two client hosts A and B, each in its own network namespace.

    opts: the mount options of every client, or a sequence with one
    string per client; extra: more podfsd arguments."""

    def __init__(self, env, nclients=2, opts="", extra=()):
        self.env = env
        self.ns = [env.new_netns() for _ in range(nclients)]
        opts = [opts] * nclients if isinstance(opts, str) else list(opts)
        # The daemon listens only on the first namespace's host-side address;
        # the other namespaces reach it through their default route.
        self.daemon = env.start_daemon(listen=f"{self.ns[0].host_ip}:0", extra=list(extra))
        self.export = self.daemon.export
        self.mounts = [env.mount(self.daemon, path=env.root / f"mnt-{chr(97 + i)}",
                                 netns=ns, host=self.ns[0].host_ip, opts=opts[i],
                                 tag=f"podfs-{chr(97 + i)}")
                       for i, ns in enumerate(self.ns)]
        self.a = self.mounts[0]
        self.b = self.mounts[1] if nclients > 1 else None
