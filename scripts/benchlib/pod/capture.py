"""The venv start of a pod, as a trace: the venv workload's interpreter
(the venv copy in the export, --venv-imports) run once on the export
itself under strace, its file accesses up to the end of the imports
written as a podfs-replay trace in the scratch dir (never committed),
reused by later runs with the same --venv-src and --venv-imports
(--recapture makes it again). The conversion is tests/tools/fstrace.py."""

import hashlib
import os
import shutil

from ..common import BenchError, log, run
from ..workloads.venv import venv_check_output, venv_cmd
from . import tools


def trace_path(a, scratch):
    key = hashlib.sha256(("%s\n%s" % (a.venv_src, a.venv_imports)).encode()).hexdigest()[:12]
    return os.path.join(scratch.dir, "pod-venv-%s-%s.trace" % (scratch.venv_name, key))


def trace_ops(path):
    """The number of calls in a trace file."""
    n = 0
    with open(path) as f:
        next(f)
        for line in f:
            if line.strip() and not line.startswith("#"):
                n += 1
    return n


def ensure_trace(a, scratch):
    """(path of the venv start's trace, its calls), captured if needed."""
    fstrace = tools.fstrace()
    path = trace_path(a, scratch)
    if os.path.exists(path) and not a.recapture:
        n = trace_ops(path)
        log("venv trace: %s (%d calls; --recapture makes it again)" % (path, n))
        return path, n
    if shutil.which("strace") is None:
        raise BenchError("the venv start is replayed from a capture that needs strace (apt-get install strace)")
    tree = os.path.join(scratch.export, scratch.venv_name)
    raw, pages = path + ".strace", path + ".pages"
    for f in (raw, pages):
        if os.path.exists(f):
            os.unlink(f)
    env = ["%s=%s" % kv for kv in sorted(fstrace.pages_env(tree, pages).items())]
    cmd = venv_cmd(scratch, a.venv_imports, scratch.export, before_check=fstrace.END_SNIPPET,
                   after=fstrace.PAGES_SNIPPET, env=env)
    log("capturing the venv start under strace (once): import %s" % a.venv_imports)
    r = run(fstrace.strace_argv(raw, cmd), timeout=900, check=False)
    modules = venv_check_output(r)
    with open(raw, errors="surrogateescape") as f:
        text = f.read()
    try:
        trace, stats = fstrace.convert(text, tree, cwd="/", pages=fstrace.load_pages(pages),
                                       comment="%s: import %s (%d modules), captured by scripts/bench --hosts"
                                       % (scratch.venv_name, a.venv_imports, modules))
    except fstrace.TraceError as e:
        raise BenchError("converting the venv capture %s: %s" % (raw, e))
    with open(path + ".tmp", "w") as f:
        f.write(trace)
    os.rename(path + ".tmp", path)
    log("venv trace: %s: %s" % (path, fstrace.summary(stats)))
    return path, stats["ops"]
