"""What the benchmark measures: the target and workload names, the report's
rows (which workload measures each, its unit and direction, which targets it
applies to) and the fixed parameters that the report states."""

ALL_TARGETS = ["local", "podfs", "podfs-plain", "bindfs", "sshfs"]
ALL_WORKLOADS = ["seq-write", "seq-read", "randread", "copy", "find", "stat", "create", "walk", "venv",
                 "checkpoint", "smallfiles", "untar", "git", "pip"]

# --ab-build adds "podfs-b": podfs from a second build, set up exactly like podfs
AB_TARGET = "podfs-b"
# podfs without TLS (podfsd --allow-plaintext, mount -o tls=off), same build:
# podfs vs podfs-plain is the cost of TLS
PLAIN_TARGET = "podfs-plain"
PODFS_TARGETS = ("podfs", AB_TARGET, PLAIN_TARGET)
# order of the targets in every round (rotated) and in the report's columns
TARGET_ORDER = ["local", "podfs", AB_TARGET, PLAIN_TARGET, "bindfs", "sshfs"]

# rows: (row id, workload, unit, higher_is_better)
ROWS = [
    ("seq-write", "seq-write", "MB/s", True),
    ("seq-read-cold", "seq-read", "MB/s", True),
    ("seq-read-warm", "seq-read", "MB/s", True),
    ("randread-4k", "randread", "ops/s", True),
    ("copy", "copy", "MB/s", True),
    ("find-cold", "find", "s", False),
    ("find-warm", "find", "s", False),
    ("stat-cold", "stat", "s", False),
    ("stat-warm", "stat", "s", False),
    ("create", "create", "s", False),
    ("delete", "create", "s", False),
    ("walk-find-cold", "walk", "s", False),
    ("walk-find-warm", "walk", "s", False),
    ("walk-ls-cold", "walk", "s", False),
    ("walk-ls-warm", "walk", "s", False),
    ("venv-cold", "venv", "s", False),
    ("venv-warm", "venv", "s", False),
    ("venv-pcache", "venv", "s", False),
    # venv-*@RTT rows are added by add_rtt_rows() when --rtt-us is given
    ("ckpt-rand-write", "checkpoint", "MB/s", True),
    ("ckpt-rand-read", "checkpoint", "MB/s", True),
    ("ckpt-float-write", "checkpoint", "MB/s", True),
    ("ckpt-float-read", "checkpoint", "MB/s", True),
    ("ckpt-multi-write", "checkpoint", "MB/s", True),
    ("ckpt-multi-read", "checkpoint", "MB/s", True),
    # metadata (workloads/meta.py); their @RTT rows come from add_rtt_rows()
    ("sf-create", "smallfiles", "ops/s", True),
    ("sf-stat", "smallfiles", "ops/s", True),
    ("sf-stat-remount", "smallfiles", "ops/s", True),
    ("sf-unlink", "smallfiles", "ops/s", True),
    ("untar", "untar", "s", False),
    ("git-status-cold", "git", "s", False),
    ("git-status-warm", "git", "s", False),
    ("pip-install", "pip", "s", False),
]
META_WORKLOADS = ("smallfiles", "untar", "git", "pip")
ROW_ONLY = {"venv-pcache": PODFS_TARGETS}   # rows measured for some targets only

PCACHE_SIZE = "2G"    # -o cache_size of the venv-pcache mounts
FILES_PER_DIR = 100   # layout of the find/stat tree
SMALL_MAX = 4096      # its files are 0-SMALL_MAX bytes


def ab_suffix(tname):
    """"-b" for podfs-b, "-plain" for podfs-plain, "" for podfs: added to the names of its daemon, its files and caches."""
    return tname[len("podfs"):] if tname in PODFS_TARGETS else ""


def rtt_suffix(rtt_us):
    """Suffix of the rows measured through latproxy."""
    return "@%dus" % rtt_us


def add_rtt_rows(rtt_us):
    """The venv and metadata rows at --rtt-us RTT (podfs and sshfs only), each
    after its 0-RTT row (the venv ones after venv-pcache)."""
    sfx = rtt_suffix(rtt_us)
    i = [r[0] for r in ROWS].index("venv-pcache") + 1
    ROWS[i:i] = [(n + sfx, "venv", "s", False) for n in ("venv-cold", "venv-warm", "venv-pcache")]
    ROW_ONLY.update({"venv-cold" + sfx: PODFS_TARGETS + ("sshfs",), "venv-warm" + sfx: PODFS_TARGETS + ("sshfs",),
                     "venv-pcache" + sfx: PODFS_TARGETS})
    for r in [r for r in ROWS if r[1] in META_WORKLOADS]:
        i = ROWS.index(r) + 1
        ROWS.insert(i, (r[0] + sfx, r[1], r[2], r[3]))
        ROW_ONLY[r[0] + sfx] = PODFS_TARGETS + ("sshfs",)


def rows_for(w, tname):
    return [r[0] for r in ROWS if r[1] == w and tname in ROW_ONLY.get(r[0], (tname,))]


def unit_of(row):
    return [r[2] for r in ROWS if r[0] == row][0]
