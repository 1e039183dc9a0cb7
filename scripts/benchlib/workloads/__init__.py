"""The workloads, one module per family: files (seq-write, seq-read, find,
stat, create), venv, checkpoint and meta (smallfiles, untar, git, pip)."""

from .checkpoint import Checkpoint
from .files import Files
from .meta import Meta
from .venv import Venv


def workloads(bench):
    """{workload name (spec.ALL_WORKLOADS): fn(target, round)} for the run bench."""
    f, v, c, m = Files(bench), Venv(bench), Checkpoint(bench), Meta(bench)
    return {"seq-write": f.seq_write, "seq-read": f.seq_read, "find": f.find, "stat": f.stat,
            "create": f.create, "venv": v.venv, "checkpoint": c.checkpoint,
            "smallfiles": m.smallfiles, "untar": m.untar, "git": m.git, "pip": m.pip}
