"""limited.py: a podfsd with fair-use limits and a legitimate host beside
the attacker, for test_limits.py and test_limits_held.py, and
the daemon's resident memory.

The limits on what a client keeps count per host (all sessions from one
address), so the legitimate mount is another host: a network namespace,
while the attacks come from 127.0.0.1 (pfsproto.py).
"""

import os
import subprocess

from helpers import PYTHON, read_file, write_file

NEW_LOGIN = r"""
import sys
sys.path.insert(0, sys.argv[1])
import pfsproto as P
with P.connect(sys.argv[2], int(sys.argv[3]), P.load_key(sys.argv[4])) as c:
    h, _ = c.lookup(c.root, "shared")
    fid = c.open(h)
    assert c.read(h, fid, 0, 5) == b"share"
    c.release(h, fid)
"""


def another_host_works(env, daemon, m, tag):
    """The other host's mount opens, creates, writes and reads; a new
    login from that host works and its session may open a file."""
    data = os.urandom(50000)
    write_file(m / f"{tag}-new", data)
    assert read_file(m / f"{tag}-new") == data
    fd = os.open(m / "shared", os.O_RDONLY)
    os.close(fd)
    r = subprocess.run(m.netns.exec_argv([PYTHON, "-c", NEW_LOGIN, os.path.dirname(__file__),
                                          m.netns.host_ip, str(daemon.port), str(env.key)]),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def limited(env, limits):
    """A podfsd with --limits LIMITS and a legitimate mount of it on
    another host, which made the file "shared": (daemon, mount)."""
    daemon = env.start_daemon(listen="0.0.0.0:0", extra=["--limits", limits])
    ns = env.new_netns()
    m = env.mount(daemon, netns=ns, host=ns.host_ip)
    write_file(m / "shared", b"shared file")
    return daemon, m


def vmrss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")
