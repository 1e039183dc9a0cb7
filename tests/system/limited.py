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

def on_host(ns, env, daemon, body, *args, cid=None, timeout=60):
    """Runs body, Python with pfsproto imported as P and a session of
    daemon open as c (resuming client id cid if given), in network
    namespace ns (another host), with the strings of args as ARGS;
    returns its stdout."""
    script = ("import sys\nsys.path.insert(0, sys.argv[1])\nimport pfsproto as P\n"
              "ARGS = sys.argv[6:]\n"
              "kw = {'client_id': int(sys.argv[5])} if sys.argv[5] else {}\n"
              "with P.connect(sys.argv[2], int(sys.argv[3]), P.load_key(sys.argv[4]), **kw) as c:\n" +
              "".join("    " + ln + "\n" for ln in body.strip("\n").splitlines()))
    r = subprocess.run(ns.exec_argv([PYTHON, "-c", script, os.path.dirname(__file__), ns.host_ip,
                                     str(daemon.port), str(env.key), "" if cid is None else str(cid)] +
                                    [str(a) for a in args]),
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr
    return r.stdout


def another_host_works(env, daemon, m, tag):
    """The other host's mount opens, creates, writes and reads; a new
    login from that host works and its session may open a file."""
    data = os.urandom(50000)
    write_file(m / f"{tag}-new", data)
    assert read_file(m / f"{tag}-new") == data
    fd = os.open(m / "shared", os.O_RDONLY)
    os.close(fd)
    on_host(m.netns, env, daemon, """
h, _ = c.lookup(c.root, "shared")
fid = c.open(h)
assert c.read(h, fid, 0, 5) == b"share"
c.release(h, fid)
""")


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
