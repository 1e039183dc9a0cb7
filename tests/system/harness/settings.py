"""settings.py: the harness's knobs that the environment sets once per run.

Where the per-test directories go (PODFS_TEST_TMP), how long a program
may take to start (PODFS_TEST_START_TIMEOUT) or to stop, the default
time limit of one test, and options every daemon and mount of the run
gets (PODFS_TEST_DAEMON_ARGS: podfsd arguments, split at spaces;
PODFS_TEST_MOUNT_OPTS: -o options), to run tests with a feature that is
off by default (e.g. `--delegate` and `delegate`). PODFS_TEST_SPIN=US
is the keeper's window (-o spin=US) of every mount that does not choose
one itself: scripts/test sets 0 while three test files run at once on
two CPUs, where a keeper per mount only takes time from the others. The
binaries under test are named in helpers.py (PODFS_BUILD).
"""

import os
from pathlib import Path

TEST_ROOT = Path(os.environ.get("PODFS_TEST_TMP", "/tmp/podfs-tests"))
START_TIMEOUT = float(os.environ.get("PODFS_TEST_START_TIMEOUT", "20"))
STOP_TIMEOUT = 20.0
# How long a podfs whose mount was forced down may take to end by itself
# before it is killed (Mount.force_down).
FORCE_GRACE = 5.0
DEFAULT_TEST_TIMEOUT = 300
DAEMON_ARGS = os.environ.get("PODFS_TEST_DAEMON_ARGS", "").split()
MOUNT_OPTS = os.environ.get("PODFS_TEST_MOUNT_OPTS", "")
SPIN = os.environ.get("PODFS_TEST_SPIN", "")
