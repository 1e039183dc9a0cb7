"""test_programs.py: real programs on a podfs mount (the pod's actual jobs):
a venv, a git repository, a large source tree, a 256 MiB file, and an
SQLite database that processes on two hosts change at once.
"""

import fnmatch
import hashlib
import os
import sqlite3
import stat
import subprocess
import sys

import pytest

from helpers import PYTHON, run, tree, wait_for


def sha256_file(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        while True:
            b = f.read(4 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


@pytest.mark.timeout(300)
def test_venv_on_mount(env, mount):
    a = mount()
    b = mount(path=env.root / "mnt-b")
    venv = a / "venv"
    run([PYTHON, "-m", "venv", "--without-pip", venv], timeout=240)
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = venv / "lib" / ver / "site-packages"
    assert site.is_dir()
    pkg = site / "podfs_probe"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .core import answer\n")
    (pkg / "core.py").write_text("def answer():\n    return 42\n")
    (a / "script.py").write_text(
        "import sys, podfs_probe\n"
        "print(podfs_probe.answer(), sys.prefix, podfs_probe.__file__)\n")
    r = run([venv / "bin" / "python", a / "script.py"], timeout=120)
    ans, prefix, mod = r.stdout.split()
    assert ans == "42"
    assert prefix == str(venv)
    assert mod.startswith(str(site))
    # The same venv from another mount (another host's view), compiled caches included.
    bv = b / "venv"
    wait_for(lambda: (bv / "bin" / "python").exists(), 5, what="venv on mount B")
    r = run([bv / "bin" / "python", "-c", "import podfs_probe, sys; "
             "print(podfs_probe.answer(), sys.prefix)"], timeout=120)
    assert r.stdout.split() == ["42", str(bv)]
    assert (env.export / "venv" / "pyvenv.cfg").is_file()


@pytest.mark.timeout(300)
def test_git_on_mount(env, m):
    repo = m / "repo"
    repo.mkdir()
    g = ["git", "-C", str(repo), "-c", "user.name=podfs", "-c", "user.email=t@podfs",
         "-c", "init.defaultBranch=main", "-c", "core.fsync=all"]
    run(g + ["init", "-q"])
    for i in range(50):
        d = repo / f"pkg{i % 5}"
        d.mkdir(exist_ok=True)
        (d / f"mod{i}.py").write_text(f"value = {i}\n" * (i + 1))
    (repo / "big.bin").write_bytes(os.urandom(2 << 20))
    run(g + ["add", "-A"])
    run(g + ["commit", "-q", "-m", "first"])
    assert run(g + ["status", "--porcelain"]).stdout == ""
    (repo / "pkg0" / "mod0.py").write_text("changed\n")
    os.rename(repo / "pkg1" / "mod1.py", repo / "pkg1" / "renamed.py")
    st = run(g + ["status", "--porcelain"]).stdout
    assert " M pkg0/mod0.py" in st and "pkg1/renamed.py" in st
    run(g + ["commit", "-q", "-a", "-m", "second"])
    run(g + ["add", "-A"])
    run(g + ["commit", "-q", "-m", "third"])
    log = run(g + ["log", "--oneline"]).stdout.splitlines()
    assert len(log) == 3 and log[0].endswith("third")
    assert run(g + ["status", "--porcelain"]).stdout == ""
    run(g + ["fsck", "--full", "--strict"], timeout=120)
    run(g + ["gc", "-q"], timeout=120)
    # The export holds a valid repository the server side can read.
    r = run(["git", "-c", f"safe.directory={env.export / 'repo'}", "-C",
             str(env.export / "repo"), "log", "--oneline"])
    assert r.stdout.splitlines() == log
    # Clone it from the mount to local disk and back to the mount.
    run(["git", "clone", "-q", str(repo), str(env.root / "clone")], timeout=120)
    run(["git", "clone", "-q", str(env.root / "clone"), str(m / "clone2")], timeout=120)
    assert (m / "clone2" / "big.bin").read_bytes() == (repo / "big.bin").read_bytes()


def tree_meta(root):
    return tree(root, lambda _, st: (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode),
                                     st.st_size if not stat.S_ISDIR(st.st_mode) else 0,
                                     st.st_mtime_ns // 10**9))


# /usr/include less the trees that only some hosts have (node's, llvm's,
# ICU's, X11's, Tcl's, valgrind's, NSS's: more than half its bytes here,
# absent on a fresh Debian 12 host), so that the test copies about the
# same tree everywhere, and less the kernel's (test_delegation copies
# that one) and C++'s (the same kind of files; the suite's time): ~1,800
# entries, with symlinks, of the C library and others.
TAR_SKIP = ("node", "llvm-*", "linux", "c++", "unicode", "X11", "tcl*", "valgrind", "nss",
            "nspr")


def skipped(rel):
    return any(fnmatch.fnmatch(rel.split(os.sep)[0], g) for g in TAR_SKIP)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_tar_usr_include(env, m):
    src = "/usr/include"
    tar = subprocess.Popen(["tar", "-C", "/usr", "-cf", "-"] +
                           [f"--exclude=include/{g}" for g in TAR_SKIP] + ["include"],
                           stdout=subprocess.PIPE)
    x = subprocess.run(["tar", "-C", str(m.path), "-xf", "-"], stdin=tar.stdout,
                       stderr=subprocess.PIPE, text=True, timeout=240)
    tar.stdout.close()
    assert tar.wait(60) == 0
    assert x.returncode == 0, x.stderr
    want = {k: v for k, v in tree_meta(src).items() if not skipped(k)}
    assert len(want) > 1000, "too small a tree to test with"
    r = run(["diff", "-r", "--no-dereference"] + [f"--exclude={g}" for g in TAR_SKIP] +
            [src, m / "include"], timeout=240, check=False)
    assert r.returncode == 0 and r.stdout == "", r.stdout[:3000] + r.stderr[:3000]
    assert tree_meta(m / "include") == want
    assert tree_meta(env.export / "include") == want


@pytest.mark.slow
@pytest.mark.plaintext
@pytest.mark.timeout(300)
def test_256mib_copy_in_and_out(env, mount):
    """256 MiB of random data (twice what write-behind holds): local -> mount A, then mount B -> local (B's
    cache is cold, so the bytes really come back from the daemon). Without
    TLS, which costs a third of this test's time in the sanitizer build:
    test_tls checks that TLS carries data byte-exact, and every other test
    runs over it."""
    a = mount(opts="tls=off")
    b = mount(path=env.root / "mnt-b", opts="tls=off")
    src = env.root / "src.bin"
    back = env.root / "back.bin"
    run(["dd", "if=/dev/urandom", f"of={src}", "bs=4M", "count=64", "status=none"],
        timeout=120)
    assert os.path.getsize(src) == 1 << 28
    want = sha256_file(src)
    run(["cp", src, a / "big.bin"], timeout=240)
    os.unlink(src)
    assert os.path.getsize(env.export / "big.bin") == 1 << 28
    wait_for(lambda: os.path.getsize(b / "big.bin") == 1 << 28, 5, what="size on B")
    run(["cp", b / "big.bin", back], timeout=240)
    assert sha256_file(back) == want
    os.unlink(back)
    assert sha256_file(env.export / "big.bin") == want
    os.unlink(a / "big.bin")
    assert not (env.export / "big.bin").exists()


SQLITE_TXNS = r"""
import sqlite3, sys
path, n, me = sys.argv[1], int(sys.argv[2]), sys.argv[3]
db = sqlite3.connect(path, timeout=120, isolation_level=None)
for i in range(n):
    db.execute("BEGIN IMMEDIATE")
    v = db.execute("SELECT v FROM counter").fetchone()[0]
    db.execute("UPDATE counter SET v = ?", (v + 1,))
    db.execute("INSERT INTO log(who, v, pad) VALUES (?, ?, randomblob(1500))", (me, v + 1))
    db.execute("COMMIT")
"""


@pytest.mark.timeout(300)
def test_sqlite_database_changed_from_two_hosts(pod):
    """Two processes on each of two hosts run transactions on one SQLite
    database in its default (rollback journal) mode, as NFS users do: each
    reads a counter and writes it back one higher, with a row of its own.
    SQLite's locks are fcntl locks on bytes past the end of the file, and
    after taking one it trusts the file's bytes to be current (it checks
    only a change counter in the first page): a lock granted across hosts
    while the other's journal or pages were not yet visible, or a page
    kept in a cache past another host's commit, loses an increment or
    corrupts the database."""
    n = 60
    path = pod.export / "db.sqlite"
    db = sqlite3.connect(str(path), isolation_level=None)
    db.execute("CREATE TABLE counter(v INTEGER)")
    db.execute("CREATE TABLE log(id INTEGER PRIMARY KEY, who TEXT, v INTEGER UNIQUE, pad BLOB)")
    db.execute("INSERT INTO counter VALUES (0)")
    db.close()
    procs = [subprocess.Popen([PYTHON, "-c", SQLITE_TXNS, str(host / "db.sqlite"), str(n), "%s%d" % (name, j)])
             for name, host in (("a", pod.a), ("b", pod.b)) for j in range(2)]
    try:
        for p in procs:
            assert p.wait(timeout=240) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    # Every increment, once each, and a sound database, on both hosts.
    for host in (pod.a, pod.b, pod.export):
        db = sqlite3.connect("file:%s?mode=ro" % (host / "db.sqlite"), uri=True)
        try:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            assert db.execute("SELECT v FROM counter").fetchone()[0] == 4 * n
            assert [r[0] for r in db.execute("SELECT v FROM log ORDER BY v")] == list(range(1, 4 * n + 1))
            assert sorted({r[0] for r in db.execute("SELECT who FROM log")}) == ["a0", "a1", "b0", "b1"]
        finally:
            db.close()
