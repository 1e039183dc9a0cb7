"""The pieces the pod bench shares with the system tests, in tests/tools/:
fstrace (a strace capture as a replay trace), gang (replays started at
once) and podfs-replay (the C program, built in the meson build dir)."""

import importlib
import os
import sys

from ..common import REPO

TOOLS = os.path.join(REPO, "tests", "tools")


def _mod(name):
    if TOOLS not in sys.path:
        sys.path.insert(0, TOOLS)
    return importlib.import_module(name)


def fstrace():
    return _mod("fstrace")


def gang():
    return _mod("gang")


def replay_exe(build):
    return os.path.join(build, "tests", "tools", "podfs-replay")
