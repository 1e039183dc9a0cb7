"""The workloads, one module per family: files (seq-write, seq-read,
randread, copy, find, stat, create), walk (find and ls -lR of the venv tree), venv, checkpoint
and meta (smallfiles, untar, git, pip)."""

from .checkpoint import Checkpoint
from .files import Files
from .meta import Meta
from .venv import Venv
from .walk import Walk


def workloads(bench):
    """{workload name (spec.ALL_WORKLOADS): fn(target, round)} for the run bench."""
    f, w, v, c, m = Files(bench), Walk(bench), Venv(bench), Checkpoint(bench), Meta(bench)
    return {"seq-write": f.seq_write, "seq-read": f.seq_read, "randread": f.randread, "copy": f.copy,
            "find": f.find, "stat": f.stat, "create": f.create, "walk": w.walk, "venv": v.venv,
            "checkpoint": c.checkpoint,
            "smallfiles": m.smallfiles, "untar": m.untar, "git": m.git, "pip": m.pip}
