"""harness: the machinery behind the system-test fixtures (conftest.py).

  settings    TEST_ROOT and the start/stop/test time limits
  sanitizers  sanitizer reports and error lines in the logs
  procs       programs under test as processes (Spawner, Proc)
  background  programs that go to the background: exit status, syslog
  daemon      podfsd: Daemon (ours), ExternalDaemon (PODFS_TEST_DAEMON)
  mount       podfs -f mounts, mountinfo, is_mounted
  netns       a network namespace standing in for another host
  env         one test's directory and everything it started
  pod         a daemon and clients A and B in namespaces of their own
"""

from .daemon import Daemon, ExternalDaemon
from .env import Env
from .mount import Mount, ensure_fusectl, is_mounted
from .netns import NetNS
from .pod import Pod
from .settings import DEFAULT_TEST_TIMEOUT

__all__ = ["DEFAULT_TEST_TIMEOUT", "Daemon", "Env", "ExternalDaemon", "Mount", "NetNS", "Pod",
           "ensure_fusectl", "is_mounted"]
