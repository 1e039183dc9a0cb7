"""The command line (documented in scripts/bench's docstring, handed in as
doc) and the run's life: prepare the scratch dir, set up the targets, run the
rounds, then stop and unmount everything (also on errors and Ctrl-C) before
the report."""

import argparse
import os
import shutil
import signal
import sys
import time

from .common import (NO_JOURNAL_WARNING, REPO, BenchError, Interrupted, ext4_without_journal, log,
                     parse_size)
from .report import Report
from .rounds import Bench
from .pod import run_pod, parse_hosts
from .pod.hosts import MAX_HOSTS
from .spec import AB_TARGET, ALL_TARGETS, ALL_WORKLOADS, META_WORKLOADS, add_rtt_rows

DEFAULT_VENV_SRC = "/root/.pyenv/versions/3.11.7"
DEFAULT_VENV_IMPORTS = ("boto3,botocore.session,IPython,cryptography.fernet,flask,pydantic,requests,yaml,"
                        "json,email,asyncio")


def parse_args(doc):
    ap = argparse.ArgumentParser(description="podfs vs local / bindfs / sshfs benchmark",
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=doc)
    ap.add_argument("--runs", type=int, default=None, help="rounds (default 5; --quick: 1)")
    ap.add_argument("--size", default=None, help="seq file size (default 1G; --quick: 64M)")
    ap.add_argument("--files", type=int, default=None, help="tree files (default 20000; --quick: 2000)")
    ap.add_argument("--create-files", type=int, default=2000, help="files for the create workload (default 2000)")
    ap.add_argument("--only", default=",".join(ALL_WORKLOADS), help="workloads: " + ",".join(ALL_WORKLOADS))
    ap.add_argument("--targets", default=",".join(ALL_TARGETS), help="default: " + ",".join(ALL_TARGETS))
    ap.add_argument("--rtt-us", type=int, default=0, help="added round trip (latproxy) for podfs and sshfs")
    ap.add_argument("--build", default="build", help="meson build dir (relative to the repo; default build)")
    ap.add_argument("--ab-build", default=None, metavar="DIR",
                    help="A/B: a second meson build dir of podfs (relative to the repo), run as target %s beside "
                         "podfs in the same rounds; the report adds podfs ÷ %s per row" % (AB_TARGET, AB_TARGET))
    ap.add_argument("--dir", default="/var/tmp/podfs-bench", help="scratch dir on local disk")
    ap.add_argument("--json", default=None, help="write all samples (and min/max/median) to this file")
    ap.add_argument("--quick", action="store_true", help="smoke test: size 64M, files 2000, runs 1")
    ap.add_argument("--podfs-opts", default="", help="extra -o options for the podfs mount")
    ap.add_argument("--podfsd-arg", action="append", default=[], help="extra podfsd argument (repeatable)")
    ap.add_argument("--cold", choices=["remount", "drop"], default="remount",
                    help="before cold runs: remount the FUSE clients and drop caches (default), "
                         "or only drop caches (keeps the FUSE daemons' user-space caches)")
    ap.add_argument("--no-build", action="store_true",
                    help="use the podfs binaries in --build as they are (default: ninja them up to date)")
    ap.add_argument("--clean", action="store_true", help="remove the scratch dir at the end")
    ap.add_argument("--venv-src", default=DEFAULT_VENV_SRC,
                    help="Python tree copied (once) into the export for the venv workload (default %s)"
                    % DEFAULT_VENV_SRC)
    ap.add_argument("--venv-imports", default=DEFAULT_VENV_IMPORTS, help="modules imported (default %s)"
                    % DEFAULT_VENV_IMPORTS)
    ap.add_argument("--no-count-requests", action="store_true",
                    help="do not count FUSE requests per import or walk (tracefs fuse_request_send)")
    ap.add_argument("--ckpt-size", default=None, help="single-stream checkpoint file (default 2G; --quick: 128M)")
    ap.add_argument("--shard-size", default=None, help="per-client shard (default 512M; --quick: 32M)")
    ap.add_argument("--clients", type=int, default=4, help="concurrent checkpoint clients (default 4)")
    ap.add_argument("--hosts", default=None, metavar="N[,N...]",
                    help="a pod on this machine: podfsd and N podfs hosts in network namespaces, for each N "
                         "(1..%d): the venv start (replayed) and a checkpoint read by all hosts at once"
                         % MAX_HOSTS)
    ap.add_argument("--recapture", action="store_true",
                    help="--hosts: capture the venv start's trace again (strace) even if one is kept")
    a = ap.parse_args()
    if a.hosts is not None:
        try:
            a.hosts = parse_hosts(a.hosts)
        except ValueError as e:
            ap.error(str(e))
        if a.ab_build is not None:
            ap.error("--hosts does not take --ab-build")
        if a.runs is None:
            a.runs = 1 if a.quick else 3
        if a.ckpt_size is None:
            a.ckpt_size = "32M" if a.quick else "256M"
    if a.runs is None:
        a.runs = 1 if a.quick else 5
    a.size = parse_size(a.size or ("64M" if a.quick else "1G"))
    if a.files is None:
        a.files = 2000 if a.quick else 20000
    if a.quick:
        a.create_files = min(a.create_files, 500)
    a.ckpt_size = parse_size(a.ckpt_size or ("128M" if a.quick else "2G")) >> 20 << 20
    a.shard_size = parse_size(a.shard_size or ("32M" if a.quick else "512M")) >> 20 << 20
    a.venv_src = os.path.normpath(a.venv_src)
    a.venv_imports = ", ".join(m.strip() for m in a.venv_imports.split(",") if m.strip())
    if a.ckpt_size < (1 << 20) or a.shard_size < (1 << 20) or a.clients < 1:
        ap.error("need --ckpt-size >= 1M, --shard-size >= 1M, --clients >= 1")
    if a.rtt_us > 0:
        add_rtt_rows(a.rtt_us)
    a.only = [w.strip() for w in a.only.split(",") if w.strip()]
    a.targets = [t.strip() for t in a.targets.split(",") if t.strip()]
    bad = [w for w in a.only if w not in ALL_WORKLOADS] + [t for t in a.targets if t not in ALL_TARGETS]
    if bad:
        ap.error("unknown workload/target: %s" % ", ".join(bad))
    if a.runs < 1 or a.size < (1 << 20) or a.files < 1:
        ap.error("need runs >= 1, size >= 1M, files >= 1")
    if a.ab_build is not None:
        if "podfs" not in a.targets:
            ap.error("--ab-build needs the podfs target (it runs beside podfs)")
        if not os.path.isabs(a.ab_build):
            a.ab_build = os.path.join(REPO, a.ab_build)
        if not os.path.isdir(a.ab_build):
            ap.error("--ab-build %s: no such directory" % a.ab_build)
        a.targets.insert(a.targets.index("podfs") + 1, AB_TARGET)
    return a


def main(doc):
    """Run the benchmark as the command line says; the exit status."""
    a = parse_args(doc)
    if a.hosts is not None:
        return run_pod(a)
    if os.geteuid() != 0:
        log("WARNING: not root: cannot drop caches, sshd as root login will fail")
    b = Bench(a)
    if a.rtt_us > 0:
        try:
            b.targets.ensure_latproxy()
        except BenchError as e:
            print("bench: %s" % e, file=sys.stderr)
            return 2

    def on_term(signum, frame):
        raise Interrupted()
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)

    interrupted = False
    t0 = time.monotonic()
    failed = None
    try:
        b.scratch.prepare_dirs(b.ctx.unmount)
        # Workloads that create many files suffer from ext4 without a
        # journal (common.ext4_without_journal): said here and in the report.
        dev = (ext4_without_journal(b.scratch.export)
               if set(a.only) & ({"create"} | set(META_WORKLOADS)) else None)
        b.fs_warning = NO_JOURNAL_WARNING % dev if dev else None
        if b.fs_warning:
            log("WARNING: " + b.fs_warning)
        b.scratch.prepare_space()
        b.scratch.prepare_source()
        b.scratch.prepare_tree()
        if "venv" in a.only or "walk" in a.only or set(a.only) & {"untar", "git"}:
            b.scratch.prepare_venv()   # walk and the metadata workloads take packages from it
        if "checkpoint" in a.only:
            b.scratch.prepare_ckpt()
        b.targets.setup_all()
        if set(a.only) & ({"venv", "walk"} | set(META_WORKLOADS)) and not a.no_count_requests:
            b.trace.setup()
            if b.trace.why:
                log(b.trace.why)
        b.run_rounds()
    except (KeyboardInterrupt, Interrupted):
        interrupted = True
        log("interrupted: cleaning up")
    except BenchError as e:
        failed = str(e)
        log("ERROR: %s" % e)
    finally:
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)   # a second Ctrl-C must not skip unmounting
        try:
            b.ctx.cleanup()
            b.trace.close()
            b.scratch.cleanup_files()
            if a.clean:
                shutil.rmtree(b.scratch.dir, ignore_errors=True)
        finally:
            signal.signal(signal.SIGINT, old)
    log("done in %.0f s" % (time.monotonic() - t0))
    if failed:
        print("bench: %s" % failed, file=sys.stderr)
        return 2
    Report(b, interrupted).write()
    return 130 if interrupted else 0
