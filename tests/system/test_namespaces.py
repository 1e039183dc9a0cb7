"""test_namespaces.py: a mount namespace made beside a mount lets it go.

A new mount namespace starts with a copy of every mount of the one it was
made from. A copy of a FUSE mount keeps that file system alive after the
mount itself is unmounted: its podfs does not see the unmount, and does
not end its session, until the namespace is gone. The daemon's handler
fuzzer makes such a namespace (for its scratch tmpfs), and so does any
test that runs a program in a namespace of its own beside the others
(helpers.private_mounts_argv, DETACH_FOREIGN_FUSE); each lets go of the
FUSE mounts it copied.
"""

import os
import subprocess
import time

from helpers import BUILD, REPO, wait_for

CORPUS = REPO / "tests" / "fuzz" / "corpus" / "handlers"


def fuse_mounts_of(pid):
    with open(f"/proc/{pid}/mounts") as f:
        return [ln.split()[1] for ln in f
                if ln.split()[2] in ("fuse", "fuseblk") or ln.split()[2].startswith("fuse.")]


def waits_on_a_fifo(pid):
    """Whether pid sleeps in open(2) of a FIFO no one writes to."""
    with open(f"/proc/{pid}/wchan") as f:
        return f.read().strip() == "wait_for_partner"


def test_the_handler_fuzzer_lets_a_mount_beside_it_go(env, m):
    """fuzz_handlers (its replay: the same set-up) holding its namespace
    open, waiting on a FIFO for its second input: the mount is unmounted
    meanwhile, and its podfs must end at once, not when the fuzzer does
    (before, it waited for the fuzzer: 20 s here, a whole fuzzing run in
    scripts/test's fuzz stage beside the tests that run alone)."""
    replay = BUILD / "tests" / "fuzz" / "fuzz_handlers_replay"
    first = sorted(p for p in CORPUS.iterdir() if p.is_file())[0]
    hold = env.root / "hold"
    os.mkfifo(hold)
    (m / "f").write_bytes(b"seen")
    log = open(env.logs / "replay.log", "wb")
    p = subprocess.Popen([str(replay), str(first), str(hold)], stdin=subprocess.DEVNULL,
                         stdout=log, stderr=subprocess.STDOUT)
    try:
        ours = os.readlink("/proc/self/ns/mnt")
        # Its set-up (the namespace, the detaches) is done once it waits
        # on the FIFO: its first input ran.
        wait_for(lambda: p.poll() is not None or waits_on_a_fifo(p.pid), 30,
                 what="the replay to wait on the FIFO")
        assert p.poll() is None, (env.logs / "replay.log").read_text()
        assert os.readlink(f"/proc/{p.pid}/ns/mnt") != ours
        assert str(m.path) in [ln.split()[1] for ln in open("/proc/self/mounts")]
        assert fuse_mounts_of(p.pid) == []
        t0 = time.monotonic()
        err = m.umount()
        assert err is None, err
        assert time.monotonic() - t0 < 10
    finally:
        deadline = time.monotonic() + 30
        while p.poll() is None and time.monotonic() < deadline:
            try:
                os.close(os.open(hold, os.O_WRONLY | os.O_NONBLOCK))  # its open returns
            except OSError:
                time.sleep(0.05)
                continue
            break
        try:
            rc = p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait(10)
        log.close()
    # The replay cannot size a FIFO: it says so and exits 1, the first
    # input having run clean.
    out = (env.logs / "replay.log").read_text()
    assert rc == 1 and out.splitlines() == [f"{hold}: read error", f"{replay}: ran 2 inputs"], out
    assert (env.export / "f").read_bytes() == b"seen"
