"""test_setup_script.py: scripts/setup, the quick start's script, where it
can be run without touching the host's own /run/podfs or packages."""

import os
import subprocess
import time

from helpers import REPO

SETUP = REPO / "scripts" / "setup"


def test_stop_signals_only_podfs_processes(env):
    """--stop reads pid files; one that names another program (stale, or
    planted) is removed, and that program is not signalled."""
    run = env.root / "run"
    run.mkdir()
    victim = subprocess.Popen(["sleep", "60"])
    try:
        for name in ("podfs", "podfsd"):
            (run / f"{name}.pid").write_text(f"{victim.pid}\n")
        r = subprocess.run([str(SETUP), "--stop", str(env.root / "export"),
                            str(env.root / "nomount")],
                           env=dict(os.environ, PODFS_RUN_DIR=str(run)),
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
        assert r.returncode == 0, r.stdout
        assert "stopping" not in r.stdout, r.stdout
        time.sleep(0.2)
        assert victim.poll() is None, "setup --stop signalled a process that is not podfs"
        assert not (run / "podfs.pid").exists() and not (run / "podfsd.pid").exists()
    finally:
        victim.kill()
        victim.wait(10)
