"""The binaries a run uses: a podfs meson build (podfsd and podfs, built up
to date with ninja, its buildtype checked), the source revision it was built
from (for the report), and latproxy, built from its C source for --rtt-us."""

import json
import os

from .common import REPO, BenchError, log, run


def ensure_build(build, no_build, notes, configure=True, extra=()):
    """(podfsd, podfs, info) of the meson build dir build, ninja'd up to date
    unless no_build, with the targets extra (paths in build) too;
    configure: meson-set it up (release) if it is none yet. Warnings go to
    notes (the report's list); info says the buildtype."""
    podfsd = os.path.join(build, "daemon", "podfsd")
    podfs = os.path.join(build, "fs", "podfs")
    have = all(os.access(os.path.join(build, b), os.X_OK)
               for b in ["daemon/podfsd", "fs/podfs"] + list(extra))
    if not have or not no_build:
        try:
            if not os.path.exists(os.path.join(build, "build.ninja")):
                if not configure:
                    raise BenchError("%s is not a meson build dir (no build.ninja)" % build)
                log("configuring %s (meson, release)" % build)
                run(["meson", "setup", build, "-Dbuildtype=release", "-Dwerror=false"],
                    timeout=300, cwd=REPO)
            log("building podfsd and podfs in %s (ninja)" % build)
            run(["ninja", "-C", build, "daemon/podfsd", "fs/podfs"] + list(extra), timeout=900, cwd=REPO)
        except BenchError as e:
            if not have:
                raise
            notes.append("WARNING: rebuilding failed (%s); benchmarked the existing, possibly stale, "
                         "binaries in %s" % (e, build))
            log("WARNING: build failed, using existing binaries: %s" % e)
    for b in [podfsd, podfs] + [os.path.join(build, x) for x in extra]:
        if not os.access(b, os.X_OK):
            raise BenchError("%s missing after build" % b)
    info = ""
    try:
        r = run(["meson", "introspect", "--buildoptions", build], timeout=60)
        opts = {o["name"]: o["value"] for o in json.loads(r.stdout)}
        bt, san = opts.get("buildtype"), opts.get("b_sanitize")
        info = "buildtype=%s b_sanitize=%s" % (bt, san)
        if san not in (None, "none") or bt in ("debug", "plain"):
            notes.append("WARNING: podfs build %s is not a benchmark build (%s)" % (build, info))
            log("WARNING: %s: %s (not meant for benchmarks)" % (build, info))
    except (BenchError, ValueError):
        pass
    return podfsd, podfs, info


def source_rev(src):
    """'HASH SUBJECT' of the last commit of the podfs sources in the checkout src,
    marked when daemon/ fs/ lib/ include/ have uncommitted changes."""
    rev = run(["git", "-C", src, "log", "-1", "--format=%h %s", "--", "daemon", "fs", "lib", "include",
               "meson.build"], check=False).stdout.decode().strip()
    dirty = run(["git", "-C", src, "status", "--porcelain", "--untracked-files=no", "--", "daemon", "fs", "lib",
                 "include"], check=False).stdout.strip()
    if dirty:
        rev += " (+ uncommitted changes in daemon/ fs/ lib/ include/)"
    return rev


def build_source(build):
    """The source dir a meson build dir was set up from (meson-info), or None."""
    try:
        with open(os.path.join(build, "meson-info", "meson-info.json")) as f:
            return json.load(f)["directories"]["source"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def ensure_latproxy(build):
    """Path of the latproxy binary in build, (re)built from its source when needed."""
    # ../shared/tools beside the checkout, or beside the directory that
    # holds it (a git worktree one level further down).
    cands = [os.path.normpath(os.path.join(REPO, *[".."] * k, "shared", "tools", "latproxy.c")) for k in (1, 2)]
    src = next((c for c in cands if os.path.exists(c)), cands[0])
    os.makedirs(build, exist_ok=True)
    exe = os.path.join(build, "latproxy")
    if not os.access(exe, os.X_OK) or (os.path.exists(src) and os.path.getmtime(src) > os.path.getmtime(exe)):
        if not os.path.exists(src):
            raise BenchError("--rtt-us needs latproxy, but %s does not exist" % src)
        log("building latproxy from %s" % src)
        run(["cc", "-O2", "-o", exe, src], timeout=120)
    return exe
