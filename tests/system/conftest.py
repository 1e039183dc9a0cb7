"""conftest.py: the pytest hooks and fixtures of the system tests; the
machinery they use (processes, daemon, mounts, namespaces, pods) is in
harness/, small utilities for the tests in helpers.py.

Per test (STYLE.md section 7):
  * `env`: a private directory /tmp/podfs-tests/<test>-XXXX with export/,
    mnt/, logs/ and a pod key (podfsd --genkey's, made once per pytest run).
    It owns every process, mount and network namespace the test starts, and
    tears them all down.
  * `daemon`: podfsd on 127.0.0.1 port 0 (the port is read from --port-file
    with a deadline; a daemon that dies at start fails the test at once with
    its stderr). PODFS_TEST_DAEMON=host:port reuses an external daemon
    instead (e.g. one under gdb); then PODFS_TEST_KEY names its key file and
    PODFS_TEST_EXPORT its (scratch!) export directory, which is emptied
    before each test.
  * `mount`: a factory starting `podfs -f`; poll /proc/self/mountinfo with a
    deadline, fail fast if podfs died. Several mounts per test are fine.
  * `m`: one mount of `daemon` at env.mnt.
  * `pod`: two "hosts": each client's podfs runs in its own network namespace
    (veth pair, 10.201.x.0/24) and reaches the daemon over it.
  * `agents`: a factory of lock agents (lockers.Agent), killed at the end.

Teardown, also when the test failed: fusermount3 -u every mount
(connection abort, lazy unmount and SIGKILL when that fails), SIGTERM every
process, wait with a bound, require exit status 0 from podfs and podfsd
(unless a test killed one on purpose), delete the namespaces, then scan the
processes' stderr and sanitizer logs for sanitizer reports and for error
lines ("podfs: error: ...") that the test did not declare with
env.expect_log(regex, tag). Any problem fails the test (as a teardown
error).

Every wait is bounded. A test that runs longer than its timeout (default
300 s, `@pytest.mark.timeout(N)`) is interrupted with a traceback.

Variables: PODFS_BUILD (the build directory), PODFS_TEST_DAEMON,
PODFS_TEST_KEY, PODFS_TEST_EXPORT (above), PODFS_TEST_TMP (the test root,
harness/settings.py), PODFS_TEST_LOG_LEVEL (podfsd's --log-level, default
info), PODFS_TEST_START_TIMEOUT (seconds, default 20), PODFS_TEST_KEEP=1
(keep every test's logs). tests/README.md says how to run them.
"""

import faulthandler
import os
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import DEFAULT_TEST_TIMEOUT, Env, ExternalDaemon, Pod, ensure_fusectl  # noqa: E402
from harness.settings import MOUNT_OPTS  # noqa: E402
from helpers import PODFS, PODFSD  # noqa: E402
from lockers import Agent  # noqa: E402


# --- pytest plumbing ---------------------------------------------------------

def pytest_configure(config):
    config.addinivalue_line("markers", "timeout(seconds): per-test time limit")
    config.addinivalue_line("markers", "slow: long-running test (still runs in CI)")
    config.addinivalue_line("markers", "netns: needs network namespaces (root)")
    config.addinivalue_line("markers", "plaintext: the test's daemons also accept plaintext "
                            "connections (podfsd --allow-plaintext), for pfsproto, which "
                            "cannot speak TLS with a PSK")

    config.addinivalue_line("markers", "delegation_limit(why): the test checks what "
                            "docs/delegation.md says a delegation defers (WHY); not run "
                            "when PODFS_TEST_MOUNT_OPTS gives every mount delegate")

    # `timeout` (scripts/test) sends SIGTERM: unwind like ^C so every
    # fixture still unmounts and stops what it started.
    def on_term(signum, frame):
        raise KeyboardInterrupt("SIGTERM")
    signal.signal(signal.SIGTERM, on_term)


def pytest_collection_modifyitems(config, items):
    """With every mount delegating (PODFS_TEST_MOUNT_OPTS has delegate,
    scripts/test's "delegate" configuration), the tests marked
    delegation_limit are deselected, not skipped: they check what a
    delegation defers by design (docs/delegation.md, Limits), and a skip
    would count as a failure there. So are the dpod cases of tests that
    also run on the pod fixture (the same test there)."""
    if "delegate" not in MOUNT_OPTS.split(","):
        return
    limited = [it for it in items if it.get_closest_marker("delegation_limit")]
    # There every mount delegates, so a test parametrized over the pod
    # and dpod fixtures runs the same twice: its dpod case is left out.
    plain = {_case(it) for it in items if "dpod" not in _params(it).values()}
    limited += [it for it in items if "dpod" in _params(it).values()
                and _case(it) in plain and it not in limited]
    if limited:
        config.hook.pytest_deselected(items=limited)
        items[:] = [it for it in items if it not in limited]


def _params(item):
    cs = getattr(item, "callspec", None)
    return dict(cs.params) if cs else {}


def _case(item):
    """The item's function and parameters, a dpod parameter read as pod:
    the same for a test's pod and dpod cases."""
    ps = {k: ("pod" if v == "dpod" else v) for k, v in _params(item).items()}
    return (item.fspath, item.originalname, tuple(sorted((k, repr(v)) for k, v in ps.items())))


class TestTimeout(Exception):
    pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    mk = item.get_closest_marker("timeout")
    limit = int(mk.args[0]) if mk else DEFAULT_TEST_TIMEOUT
    # One stuck test must leave the rest of scripts/test's budget its time.
    if limit > DEFAULT_TEST_TIMEOUT:
        pytest.fail(f"timeout({limit}) is above the {DEFAULT_TEST_TIMEOUT}s a test may have",
                    pytrace=False)

    def on_alarm(signum, frame):
        raise TestTimeout(f"test exceeded its {limit}s limit")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(limit)
    # A second, harder net: dump all stacks if even the alarm cannot act.
    faulthandler.dump_traceback_later(limit + 60, exit=False)
    try:
        yield
    finally:
        signal.alarm(0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, old)


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def _need_root():
    if os.geteuid() != 0:
        pytest.skip("system tests need root (FUSE mounts, setpriv, netns)")


def _need_bins():
    for b in (PODFSD, PODFS):
        if not os.access(b, os.X_OK):
            pytest.fail(f"{b} is not built (set PODFS_BUILD=<meson build dir>)")


# --- fixtures ------------------------------------------------------------------

@pytest.fixture
def env(request):
    _need_root()
    _need_bins()
    ensure_fusectl()
    e = Env(request.node.name)
    e.plaintext = request.node.get_closest_marker("plaintext") is not None
    e.make_key()
    yield e
    failed = any(getattr(request.node, "rep_" + w, None) is not None and
                 getattr(request.node, "rep_" + w).failed for w in ("setup", "call"))
    errors = e.finish(failed)
    if errors:
        pytest.fail("teardown found problems (logs kept in "
                    f"{e.logs}):\n" + "\n---\n".join(errors), pytrace=False)


@pytest.fixture
def daemon(env):
    ext = os.environ.get("PODFS_TEST_DAEMON")
    if ext:
        return ExternalDaemon(env, ext)
    return env.start_daemon()


@pytest.fixture
def mount(env, daemon):
    """mount(daemon=None, path=None, opts="", netns=None, host=None, key=None)"""
    def make(d=None, **kw):
        return env.mount(d or daemon, **kw)
    return make


@pytest.fixture
def m(mount):
    return mount()


def _pod(env, **kw):
    if os.environ.get("PODFS_TEST_DAEMON"):
        pytest.skip("multi-host tests start their own daemon")
    return Pod(env, **kw)


@pytest.fixture
def pod(env):
    return _pod(env)


@pytest.fixture
def dpod(env):
    """Two hosts with delegations on (podfsd --delegate, -o delegate)."""
    return _pod(env, opts="delegate", extra=["--delegate"])


@pytest.fixture
def agents():
    made = []

    def make():
        a = Agent()
        made.append(a)
        return a
    yield make
    for a in made:
        a.finish()
