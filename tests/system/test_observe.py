"""test_observe.py: `podfsd status` (the daemon's control socket) and the
Prometheus metrics endpoints of podfsd (--metrics) and podfs (-o
metrics=), checked against known traffic: the clients with their
addresses, requests and bytes, a held lock, a second client coming and
going; scrapes that parse as the text format and whose counters move by
exactly the traffic made; hostile HTTP; the socket refusing other users;
nothing listening unless asked; bad values refused."""

import fcntl
import os
import re
import socket
import stat
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from helpers import PODFS, PODFSD, as_user, wait_for

MIB = 1 << 20


def daemon_with(env, **kw):
    sock = env.root / "podfsd.sock"
    return env.start_daemon(extra=[f"--control-socket={sock}", "--metrics=127.0.0.1:0"],
                            **kw), sock


def pstatus(*args, timeout=30):
    return subprocess.run([PODFSD, "status", *map(str, args)], text=True, timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def raw(sock, verbose=False):
    """podfsd status --raw: (key -> value of its first line, client lines
    as dicts, lock lines as dicts)."""
    r = pstatus("--raw", *(["-v"] if verbose else []), "--control-socket", sock)
    assert r.returncode == 0, r.stderr
    keys, clients, locks = {}, [], []
    for line in r.stdout.splitlines():
        k, _, v = line.partition(" ")
        if k in ("client", "lock"):
            (clients if k == "client" else locks).append(
                dict(w.split("=", 1) for w in v.split(" ")))
        else:
            keys.setdefault(k, v)
    assert r.stdout.endswith("end\n"), r.stdout
    return keys, clients, locks


def ops(client):
    return {} if client["ops"] == "-" else {
        o: int(n) for o, n in (w.split(":") for w in client["ops"].split(","))}


# --- the text exposition format, checked line by line ---

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(rf"^({NAME})(?:\{{({LABEL}(?:,{LABEL})*)\}})? (\S+)$")


def parse_metrics(text, prefix):
    """Checks text as Prometheus text format 0.0.4 and returns
    {(name, frozenset(labels)): value}."""
    assert text.endswith("\n"), text[-200:]
    helped, typed, out = set(), {}, {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split(" ")[2]
            assert re.fullmatch(NAME, name) and name.startswith(prefix), line
            assert name not in helped, f"two HELP lines for {name}"
            helped.add(name)
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped"), line
            assert name in helped and name not in typed, line
            typed[name] = kind
            continue
        assert not line.startswith("#") and line, f"bad line {line!r}"
        m = SAMPLE.match(line)
        assert m, f"not a sample: {line!r}"
        name, labels, value = m[1], m[2], m[3]
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        family = base if typed.get(base) == "histogram" else name
        assert family in typed, f"sample before its TYPE: {line}"
        if typed[family] == "counter":
            assert name.endswith("_total"), line
        v = float(value)  # a number, +Inf or NaN
        if typed[family] == "counter":
            assert v >= 0, line
        lab = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', labels or ""))
        assert (name, lab) not in out, f"duplicate series {line}"
        out[(name, lab)] = v
    return out


def metric(ms, name, **labels):
    return ms.get((name, frozenset(labels.items())))


def scrape(addr, path="/metrics"):
    with urllib.request.urlopen(f"http://{addr}{path}", timeout=10) as r:
        assert r.status == 200
        ctype = r.headers["Content-Type"]
        assert ctype.startswith("text/plain; version=0.0.4"), ctype
        return r.read().decode()


def client_metrics_addr(mnt):
    out = subprocess.run([PODFS, "status", "-i", "0.1", str(mnt)], text=True, timeout=30,
                         stdout=subprocess.PIPE).stdout
    m = re.search(r"metrics on http://(\S+)/metrics", out)
    assert m, out
    return m[1]


def raw_http(addr, data, timeout=10):
    """Sends data, returns what comes back until the peer closes."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        if data:
            s.sendall(data)
        got = b""
        while True:
            b = s.recv(65536)
            if not b:
                return got
            got += b


def settle(mm):
    """Waits until the mount sends nothing more for a while (its own
    background requests done)."""
    os.listdir(mm)
    time.sleep(0.3)


# --- podfsd status ---

def test_podfsd_status_shows_clients_traffic_and_locks(env, mount):
    d, sock = daemon_with(env)
    a = mount(d)
    k0, c0, _ = raw(sock)
    assert len(c0) == 1 and c0[0]["state"] == "connected", c0
    assert c0[0]["addr"].startswith("127.0.0.1:"), c0
    base = ops(c0[0])
    for i in range(10):
        os.mkdir(a / f"d{i}")
    with open(a / "big", "wb") as f:
        f.write(os.urandom(MIB))
        os.fsync(f.fileno())
    k, c, _ = raw(sock)
    assert int(k["port"]) == d.port and k["listen"] == f"127.0.0.1:{d.port}", k
    assert k["export"] == str(d.export) and k["grace"] == "0", k
    assert re.fullmatch(r"[0-9a-f]{16}", k["boot_id"]), k
    assert int(k["now"]) - int(k["started"]) < 300
    (cl,) = c
    assert ops(cl).get("MKDIR", 0) - base.get("MKDIR", 0) == 10, cl
    assert int(cl["requests"]) >= int(c0[0]["requests"]) + 10 + 1, cl
    assert int(cl["wire_in"]) >= MIB and int(k["wire_in"]) >= MIB, cl
    assert int(k["req_MKDIR"]) == 10, k

    # A held lock shows in the list, with its file, range and type.
    with open(a / "locked", "wb") as f:
        fcntl.lockf(f, fcntl.LOCK_EX, 100, 10)
        k, c, locks = raw(sock, verbose=True)
        assert int(c[0]["lock_owners"]) >= 1, c
        mine = [x for x in locks if x["file"] == str(d.export / "locked")]
        assert len(mine) == 1, locks
        assert (mine[0]["type"], mine[0]["kind"], mine[0]["start"], mine[0]["end"]) == \
            ("WRITE", "posix", "10", "109"), mine
        assert mine[0]["addr"] == "127.0.0.1", mine
        human = pstatus("-v", "--control-socket", sock)
        assert human.returncode == 0, human.stderr
        assert re.search(rf"{re.escape(str(d.export / 'locked'))} +10-109 +WRITE +posix "
                         r"+127\.0\.0\.1", human.stdout), human.stdout
    wait_for(lambda: not raw(sock, verbose=True)[2], 10, what="the lock to go")

    # A second client appears, and goes once unmounted.
    b = mount(d, path=env.root / "mnt-b")
    os.listdir(b)
    _, c, _ = raw(sock)
    assert len(c) == 2 and len({x["id"] for x in c}) == 2, c
    human = pstatus("-i", "0.2", "--control-socket", sock).stdout
    assert human.count("127.0.0.1:") >= 3 and "MKDIR 10" in human, human
    assert len(re.findall(r"now: [\d.]+ requests/s, receiving .*/s, sending .*/s", human)) == 2, \
        human
    assert f"serving {d.export} on 127.0.0.1:{d.port}" in human, human
    b.umount()
    wait_for(lambda: len(raw(sock)[1]) == 1, 10, what="the second client to go")


@pytest.mark.timeout(120)
def test_podfsd_status_shows_the_grace_period(env, mount):
    sock = env.root / "podfsd.sock"
    d = env.start_daemon(extra=[f"--control-socket={sock}", "--grace=60"])
    a = mount(d)
    b = mount(d, path=env.root / "mnt-b")
    with open(b / "lb", "wb") as f:  # b becomes a lock holder...
        fcntl.lockf(f, fcntl.LOCK_EX)
    b.kill9()  # ...and never comes back
    with open(a / "la", "wb") as f:
        fcntl.lockf(f, fcntl.LOCK_EX)
        d.kill9()
        d.start()
        wait_for(lambda: raw(sock)[0].get("grace_reclaimed") == "1", 30,
                 what="A to reclaim its lock")
        k = raw(sock)[0]
        assert k["grace"] == "1" and k["grace_expected"] == "2", k
        assert 30 < int(k["grace_until"]) - int(k["now"]) <= 60, k
        assert int(k["locks_reclaimed"]) >= 1, k
        out = pstatus("--control-socket", sock).stdout
        assert "GRACE PERIOD until" in out and "1 of 2 lock holders came back" in out, out


def test_podfsd_control_socket_default_path_and_lifetime(env):
    d = env.start_daemon(own_control=False)
    path = f"/run/podfs/podfsd-{d.port}.sock"
    st = os.lstat(path)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    assert st.st_uid == 0
    r = pstatus("--port", d.port)
    assert r.returncode == 0 and f"on 127.0.0.1:{d.port}" in r.stdout, r.stdout + r.stderr
    assert "metrics: off" in r.stdout, r.stdout
    d.stop()
    assert not os.path.exists(path)
    # One left by a crash is replaced at the next start.
    d.start()
    d.kill9()
    assert os.path.exists(path)
    d.start()
    r = pstatus("--port", d.port)
    assert r.returncode == 0, r.stderr
    d.stop()
    assert not os.path.exists(path)
    r = pstatus("--port", d.port)
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr


def test_podfsd_stopping_leaves_a_control_socket_not_its_own(env):
    """A podfsd removes its control socket at stop only if the file is
    still the one it made: one that replaced it (here: after the file was
    removed by hand) keeps answering."""
    sock = env.root / "shared.sock"
    a = env.start_daemon(extra=[f"--control-socket={sock}"])
    os.unlink(sock)
    b = env.start_daemon(extra=[f"--control-socket={sock}"])
    r = pstatus("--control-socket", sock)
    assert r.returncode == 0 and f":{b.port}" in r.stdout, r.stdout + r.stderr
    a.stop()
    r = pstatus("--control-socket", sock)
    assert r.returncode == 0 and f":{b.port}" in r.stdout, r.stdout + r.stderr
    b.stop()
    assert not os.path.exists(sock)


def test_podfsd_control_socket_refuses_other_users(env):
    d, sock = daemon_with(env)
    r = as_user([PODFSD, "status", "--control-socket", sock])
    assert r.returncode == 1 and "Permission denied" in r.stderr, r.stderr
    # Even a socket opened to everyone answers only root and its user.
    os.chmod(sock, 0o666)
    r = as_user([PODFSD, "status", "--control-socket", sock])
    assert r.returncode == 1 and "permission denied" in r.stderr, r.stderr
    assert "client" not in r.stdout and "export" not in r.stdout, r.stdout
    assert "refused a peer of uid" in d.log()
    assert pstatus("--control-socket", sock).returncode == 0


def test_podfsd_control_socket_bad_requests(env):
    d, sock = daemon_with(env)
    for req in (b"nonsense\n", b"x" * 300, b"status"):
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(15)
            s.connect(str(sock))
            s.sendall(req)
            got = b""
            while (b := s.recv(4096)):
                got += b
        assert got.startswith(b"error ") or req == b"status", (req, got)
    # The one without its newline got nothing and was closed by the
    # timeout; the daemon still answers.
    assert pstatus("--control-socket", sock).returncode == 0


# --- metrics ---

def test_metrics_count_known_traffic(env, mount):
    d, sock = daemon_with(env)
    a = mount(d, opts="metrics=127.0.0.1:0")
    daddr = raw(sock)[0]["metrics"]
    caddr = client_metrics_addr(a)
    settle(a)
    ds0 = parse_metrics(scrape(daddr), "podfsd_")
    cs0 = parse_metrics(scrape(caddr), "podfs_")
    for i in range(10):
        os.mkdir(a / f"d{i}")
    with open(a / "big", "wb") as f:
        f.write(b"\1" * MIB)
        os.fsync(f.fileno())
    ds = parse_metrics(scrape(daddr), "podfsd_")
    cs = parse_metrics(scrape(caddr), "podfs_")
    mk = ("podfsd_requests_total", "MKDIR")
    assert (metric(ds, mk[0], op="MKDIR") or 0) - (metric(ds0, mk[0], op="MKDIR") or 0) == 10
    assert (metric(cs, "podfs_requests_total", op="MKDIR") or 0) - \
        (metric(cs0, "podfs_requests_total", op="MKDIR") or 0) == 10
    assert metric(ds, "podfsd_request_duration_seconds_count", op="MKDIR") >= 10
    assert metric(ds, "podfsd_request_duration_seconds_bucket", op="MKDIR", le="+Inf") >= 10
    assert metric(cs, "podfs_request_duration_seconds_count", op="MKDIR") >= 10
    assert metric(ds, "podfsd_wire_bytes_total", direction="in") >= MIB
    assert metric(cs, "podfs_wire_bytes_total", direction="out") >= MIB
    assert metric(cs, "podfs_file_written_bytes_total") >= MIB
    assert metric(ds, "podfsd_clients", state="connected") == 1
    per_client = [(k, v) for k, v in ds.items() if k[0] == "podfsd_client_wire_bytes_in_total"]
    assert len(per_client) == 1 and per_client[0][1] >= MIB, per_client
    assert dict(per_client[0][0][1])["client"] == "127.0.0.1", per_client
    # A session is named by its number, never by the id that resumes it
    # (whoever reads the metrics could take the session over).
    cid = raw(sock)[1][0]["id"]
    text = scrape(daddr)
    assert cid not in text and cid.lstrip("0") not in text, cid
    assert dict(per_client[0][0][1])["session"] == "1", per_client
    assert metric(cs, "podfs_reconnects_total") == 0
    # HEAD gets the head only.
    req = urllib.request.Request(f"http://{daddr}/metrics", method="HEAD")
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200 and r.read() == b""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("side", ["podfsd", "podfs"])
def test_metrics_refuse_bad_http_and_keep_serving(env, mount, side):
    d, sock = daemon_with(env)
    a = mount(d, opts="metrics=127.0.0.1:0")
    addr = raw(sock)[0]["metrics"] if side == "podfsd" else client_metrics_addr(a)
    cases = [
        (b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\0" * 40, b"400"),
        (b"GET /metrics HTTP/1.1\r\n folded: x\r\n\r\n", b"400"),
        (b"GET /metrics\r\n\r\n", b"400"),
        (b"POST /metrics HTTP/1.1\r\nContent-Length: 2\r\n\r\nab", b"405"),
        (b"GET /other HTTP/1.0\r\n\r\n", b"404"),
        (b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n", b"431"),
    ]
    for data, want in cases:
        got = raw_http(addr, data)
        assert got.startswith(b"HTTP/1.1 " + want + b" "), (data[:40], got[:100])
    # A client that sends nothing is closed after the read timeout.
    t0 = time.monotonic()
    assert raw_http(addr, b"", timeout=30) == b""
    assert 3 < time.monotonic() - t0 < 20
    # Still serving, and the mount still works.
    parse_metrics(scrape(addr), side + "_")
    os.mkdir(a / "after")
    assert (d.export / "after").is_dir()


def test_metrics_off_by_default(env, mount):
    d = env.start_daemon(own_control=False)
    a = mount(d)
    assert "metrics: off" in pstatus("--port", d.port).stdout
    out = subprocess.run([PODFS, "status", "-i", "0.1", str(a)], text=True, timeout=30,
                         stdout=subprocess.PIPE).stdout
    assert "metrics on" not in out, out
    # The only TCP socket either listens on is podfsd's own port.
    for pid in (d.proc.pid, a.proc.pid):
        assert listening_ports(pid) == ({d.port} if pid == d.proc.pid else set())


def listening_ports(pid):
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            t = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if t.startswith("socket:["):
            inodes.add(t[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as f:
            for line in f.readlines()[1:]:
                p = line.split()
                if p[3] == "0A" and p[9] in inodes:
                    ports.add(int(p[1].rsplit(":", 1)[1], 16))
    return ports


@pytest.mark.parametrize("value", ["nohost", "localhost:7050", "127.0.0.1:99999", "::1:80",
                                   "127.0.0.1:x", ""])
def test_bad_metrics_values_exit_2(env, value):
    r = subprocess.run([PODFSD, f"--metrics={value}", "--key", env.key, str(env.export)],
                       text=True, timeout=30, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--metrics" in r.stderr, r.stderr
    r = subprocess.run([PODFS, "127.0.0.1:1", str(env.mnt), "-f", "-o",
                        f"key={env.key},metrics={value}"], text=True, timeout=30,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "metrics" in r.stderr, r.stderr


def test_podfsd_status_usage(env):
    r = pstatus("--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: podfsd status"), r.stdout
    r = pstatus("--bogus")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    r = pstatus("--port", "0")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    r = pstatus("-i", "0")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    r = pstatus("--control-socket", env.root / "none.sock")
    assert r.returncode == 1 and "No such file" in r.stderr, r.stderr


def _thread_names(pid):
    names = []
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/comm") as f:
                names.append(f.read().strip())
        except FileNotFoundError:  # a thread that just ended
            pass
    return names


def test_threads_are_named(env, daemon, m):
    """Every thread of podfs says what it does, and podfsd's workers say
    they are its workers (top -H, ps -L, perf and gdb show these names):
    one request that reaches a worker, and each podfs thread that always
    runs is there by name."""
    (m / "f").write_bytes(b"x")
    assert (m / "f").read_bytes() == b"x"
    names = _thread_names(m.proc.pid)
    for want in ("pfs:fuse", "pfs:conn", "pfs:push", "pfs:ack", "pfs:revalidate",
                 "pfs:locks", "pfs:writeback", "pfs:signals"):
        assert want in names, names
    # The main thread keeps the program's name; so does ThreadSanitizer's
    # own background thread in that build.
    unnamed = [n for n in names if not n.startswith("pfs:")]
    with open(f"/proc/{m.proc.pid}/maps") as f:
        tsan = "libtsan" in f.read()
    assert unnamed == ["podfs"] * (2 if tsan else 1), names
    assert "pfs:worker" not in names
    wait_for(lambda: "pfsd:worker" in _thread_names(daemon.proc.pid), 5,
             what="a podfsd worker named")
