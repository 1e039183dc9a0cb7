"""test_pod_start.py: a pod's job start, small: eight hosts (network
namespaces, harness.Pod) start the same program from one tree and read
one checkpoint at once, as `scripts/bench --hosts` does at up to 64.

The program (a Python import of a package tree in the export, with
names that do not exist, a listing, a data file, a symlink and an
extension module mapped from the tree) is captured once with strace on
the export itself and converted into a trace (tests/tools/fstrace.py);
podfs-replay (tests/tools/replay.c) then does the same calls on every
host's mount at once (tests/tools/gang.py) and checks each result
against the capture's. Every host must see what the capture saw, and
read the checkpoint byte for byte. A changed tree and a changed
checkpoint must be reported by the same checks (they can fail).
"""

import os
import shutil
import subprocess
import sys

import pytest

from harness import Pod
from helpers import PYTHON, REPLAY, REPO, run

sys.path.insert(0, str(REPO / "tests" / "tools"))
import fstrace  # noqa: E402
from gang import Gang, problems  # noqa: E402

HOSTS = 8
CKPT_SIZE = 8 << 20


def _need_replay():
    if not os.access(REPLAY, os.X_OK):
        pytest.fail(f"{REPLAY} is not built")


def make_tree(tree):
    """A package tree whose import does what a venv start does, small."""
    pkg = tree / "pkg"
    (pkg / "mods").mkdir(parents=True)
    (pkg / "sub").mkdir()
    for i in range(30):
        (pkg / "mods" / f"m{i:02d}.py").write_text(f"VALUE = {i}\n" + "# filler\n" * (i * 40))
    (pkg / "mods" / "__init__.py").write_text(
        "".join(f"from . import m{i:02d}\n" for i in range(30)))
    # Three more levels of small modules: 90 more files, each found after
    # lookups of the names a module could have and does not.
    for j in range(3):
        d = pkg / "sub" / f"s{j}"
        d.mkdir()
        for i in range(30):
            (d / f"k{i:02d}.py").write_text(f"K = {i * j}\n")
        (d / "__init__.py").write_text("".join(f"from . import k{i:02d}\n" for i in range(30)))
    (pkg / "sub" / "__init__.py").write_text("from . import s0, s1, s2\n")
    (pkg / "sub" / "c.py").write_text("C = 3\n")
    (pkg / "a.py").write_text("A = 1\n")
    os.symlink("a.py", pkg / "alias.py")
    (pkg / "data.bin").write_bytes(os.urandom(100_000))
    # An extension module of the tree (the tree comes first in sys.path):
    # the loader opens, reads and maps it.
    r = run([PYTHON, "-I", "-c", "import _queue; print(_queue.__file__)"], timeout=30)
    shutil.copy(r.stdout.strip(), tree)
    (pkg / "__init__.py").write_text(
        "import os\n"
        "from . import a, alias, mods\n"
        "from .sub import c\n"
        "import _queue\n"      # from the tree
        "import json, queue\n"  # looked up in the tree first: names that do not exist
        "with open(os.path.join(os.path.dirname(__file__), 'data.bin'), 'rb') as f:\n"
        "    DATA = f.read()\n"
        "NAMES = sorted(os.listdir(os.path.dirname(__file__)))\n")
    return tree


def capture(env, tree):
    """The program's trace: (path, calls, conversion stats)."""
    raw, pages = env.root / "capture.strace", env.root / "capture.pages"
    code = (f"import sys\nsys.path.insert(0, {str(tree)!r})\nimport pkg\n" + fstrace.END_SNIPPET +
            "print('ok', len(pkg.DATA), len(pkg.mods.m29.__name__))\n" + fstrace.PAGES_SNIPPET)
    e = dict(os.environ, **fstrace.pages_env(tree, pages))
    r = run(fstrace.strace_argv(raw, [PYTHON, "-I", "-B", "-c", code]), timeout=120, env=e, cwd="/")
    assert r.stdout.startswith("ok 100000"), r.stdout + r.stderr
    text, stats = fstrace.convert(raw.read_text(errors="surrogateescape"), tree, cwd="/",
                                  pages=fstrace.load_pages(pages), comment="test_pod_start")
    path = env.root / "start.trace"
    path.write_text(text)
    return path, stats["ops"], stats, text


def replay_all(argvs, timeout=120):
    g = Gang(argvs, timeout=timeout)
    try:
        g.go()
        g.wait()
    finally:
        g.kill()
    return g.results


@pytest.mark.netns
@pytest.mark.timeout(240)
def test_eight_hosts_start_one_tree_and_read_one_checkpoint_at_once(env):
    if os.environ.get("PODFS_TEST_DAEMON"):
        pytest.skip("multi-host tests start their own daemon")
    if not shutil.which("strace"):
        pytest.skip("needs strace (the capture)")
    _need_replay()
    tree = make_tree(env.export / "tree")
    trace, ops, stats, text = capture(env, tree)
    # The capture holds what a program start does: lookups of names that
    # do not exist, listings, reads with their bytes' hash, a mapped file.
    assert " -ENOENT" in text and "\nopen " in text and "\nfstat " in text
    assert stats["listings"] >= 3, stats
    assert stats["faults"] >= 1 and stats["fault_pages"] >= 1, stats
    assert any(ln.startswith("read ") and len(ln.split()) == 5 for ln in text.splitlines())
    assert "readlink" not in stats["dropped"], stats

    data = os.urandom(CKPT_SIZE)
    ref = env.root / "ckpt.ref"
    ref.write_bytes(data)
    (env.export / "ckpt.dat").write_bytes(data)

    pod = Pod(env, nclients=HOSTS)
    mnts = [m.path for m in pod.mounts]

    # Every host's start sees what the capture saw, call by call.
    res = replay_all([[REPLAY, "-g", m / "tree", trace] for m in mnts])
    assert problems(res, ops) == []
    assert all(r["mismatches"] == 0 and r["skipped"] == 0 and r["ops"] == ops for r in res)

    # Every host reads the checkpoint whole, byte for byte.
    res = replay_all([[REPLAY, "-g", "--read", m / "ckpt.dat", "--ref", ref] for m in mnts])
    assert problems(res, 1) == []
    assert [r["bytes"] for r in res] == [CKPT_SIZE] * HOSTS

    # The same checks fail when what a host sees differs: host B removes
    # a module and adds a name the program looked for and did not find,
    # and changes one byte of the checkpoint; host A must see all three.
    b = pod.mounts[1]
    os.unlink(b / "tree" / "pkg" / "mods" / "m03.py")
    assert "stat pkg/__init__.abi3.so -ENOENT" in text
    (b / "tree" / "pkg" / "__init__.abi3.so").write_text("")
    with open(b / "ckpt.dat", "r+b") as f:
        f.seek(12345)
        f.write(bytes([data[12345] ^ 0xff]))
    a = pod.mounts[0]
    (r,) = replay_all([[REPLAY, "-g", "-m", "1000", a / "tree", trace]])
    assert r["rc"] == 1 and r["errors"] > 0, r
    mism = "\n".join(r["mismatch_lines"])
    assert "open pkg/mods/m03.py: expected 3, got -ENOENT" in mism, mism
    assert "stat pkg/__init__.abi3.so: expected -ENOENT, got 0" in mism, mism
    assert "getdents fd 3: 30 names listed, expected 31" in mism, mism
    (r,) = replay_all([[REPLAY, "-g", "--read", a / "ckpt.dat", "--ref", ref]])
    assert r["rc"] == 1 and r["mismatches"] == 1 and r["first_bad"] == 12345, r


def test_strace_lines_become_a_trace(tmp_path):
    """fstrace.convert: calls on the tree kept in order with their results,
    others left out, a call split by another thread joined, a listing
    read to its end, reads with the hash of the bytes at the file's
    position, fds numbered by the trace's own slots."""
    tree = tmp_path / "tree"
    (tree / "d").mkdir(parents=True)
    (tree / "d" / "f.py").write_bytes(b"0123456789")
    (tree / "d" / "g.py").write_bytes(b"")
    t = str(tree)
    strace = "\n".join([
        f'10 execve("{t}/bin/py", ["py"], 0x7ff /* 3 vars */) = -1 ENOENT (No such file or directory)',
        '10 openat(-100, "/etc/ld.so.cache", 0x80000) = 3',
        f'10 newfstatat(-100, "{t}/d/nope.py", 0x7ffd, 0) = -1 ENOENT (No such file or directory)',
        f'10 openat(-100, "{t}/d", 0x90800) = 4',
        '10 getdents64(4, 0x55 /* 4 entries */, 32768) = 112',
        '10 getdents64(4, 0x55 /* 0 entries */, 32768) = 0',
        '10 close(4)                = 0',
        f'10 openat(-100, "{t}/d/f.py", 0x80000 <unfinished ...>',
        '11 newfstatat(-100, "/elsewhere", 0x7ffd, 0) = -1 ENOENT (No such file or directory)',
        '10 <... openat resumed>) = 5',
        '10 newfstatat(5, "", {st_mode=0100644, st_size=10, ...}, 0x1000) = 0',
        '10 ioctl(5, 0x5401, 0x7ffd) = -1 ENOTTY (Inappropriate ioctl for device)',
        '10 lseek(5, 0, 1) = 0',
        '10 read(5, ""..., 4) = 4',
        '10 read(5, ""..., 100) = 6',
        '10 read(5, "", 100) = 0',
        '10 close(5) = 0',
        '10 close(3) = 0',
        f'10 readlink("{t}/d/g.py", 0x7ffd, 4096) = -1 EINVAL (Invalid argument)',
        f'10 newfstatat(-100, "{fstrace.END_MARKER}", 0x7ffd, 0) = -1 ENOENT (No such file)',
        f'10 newfstatat(-100, "{t}/after/the/end", 0x7ffd, 0) = -1 ENOENT (No such file)',
        '10 +++ exited with 0 +++',
    ])
    text, stats = fstrace.convert(strace, tree)
    import hashlib

    def h(b):
        return hashlib.sha256(b).hexdigest()[:16]
    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert lines == [
        "podfs-trace 1",
        "exec bin/py -ENOENT",
        "stat d/nope.py -ENOENT",
        "open d 0x90800 3",
        "getdents 3 32768 2 " + h(b"f.py\ng.py\n"),
        "close 3 0",
        "open d/f.py 0x80000 3",
        "fstat 3 0 0100644 10",
        "ioctl 3 0x5401 -ENOTTY",
        "lseek 3 0 1 0",
        "read 3 4 4 " + h(b"0123"),
        "read 3 100 6 " + h(b"456789"),
        "read 3 100 0",
        "close 3 0",
        "readlink d/g.py 4096 -EINVAL",
    ]
    assert stats["listings"] == 1 and stats["ops"] == len(lines) - 1


def test_replay_refuses_a_malformed_trace(tmp_path):
    """podfs-replay names the line and the field of a malformed trace and
    exits 2 without doing any of it."""
    _need_replay()
    bad = tmp_path / "bad.trace"
    bad.write_text("podfs-trace 1\nstat a -ENOENT\nread 3 10 nine\n")
    r = subprocess.run([REPLAY, tmp_path, bad], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "line 3: read: RES nine is not a number or -ERRNO" in r.stderr, r.stderr
    assert "result" not in r.stdout
