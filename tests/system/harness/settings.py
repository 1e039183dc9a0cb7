"""settings.py: the harness's knobs that the environment sets once per run.

Where the per-test directories go (PODFS_TEST_TMP), how long a program
may take to start (PODFS_TEST_START_TIMEOUT) or to stop, and the default
time limit of one test. The binaries under test are named in helpers.py
(PODFS_BUILD).
"""

import os
from pathlib import Path

TEST_ROOT = Path(os.environ.get("PODFS_TEST_TMP", "/tmp/podfs-tests"))
START_TIMEOUT = float(os.environ.get("PODFS_TEST_START_TIMEOUT", "20"))
STOP_TIMEOUT = 20.0
DEFAULT_TEST_TIMEOUT = 300
