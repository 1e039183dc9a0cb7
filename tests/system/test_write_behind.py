"""test_write_behind.py: the memory write-behind may hold.

`-o wb_max=MIB` bounds the write data a mount holds, pending or not yet
committed: beyond it a writer waits, and the file holding the most
uncommitted data is committed to make room. Without it (default 128 MiB)
the same writes stay held until the file's release commits them.
What write-behind promises about errors and restarts is in
test_durability.py and test_disk_errors.py.
"""

import os

import pytest

from helpers import MiB, Worker, podfs_stats as stats, read_file, wait_for


@pytest.mark.timeout(120)
@pytest.mark.parametrize("wb_max", [None, 4], ids=["default", "wb_max=4"])
def test_wb_max_bounds_data_held(env, mount, wb_max):
    m = mount(opts=f"wb_max={wb_max}" if wb_max else "")
    total = 24
    data = os.urandom(total * MiB)

    def writer():
        most = 0
        fd = os.open(m / "f", os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            for i in range(total):
                os.write(fd, data[i * MiB:(i + 1) * MiB])
                most = max(most, stats(m)["wb_held"])
            # Every write reached the daemon (the size waits for them).
            assert os.fstat(fd).st_size == len(data)
            st = stats(m)
            return max(most, st["wb_held"]), st
        finally:
            os.close(fd)

    # A writer waiting for room that nobody makes would wait for ever,
    # and the kernel cannot interrupt it: bounded here.
    t = Worker(writer)
    try:
        most, st = t.join(60)
    except AssertionError:
        if t.is_alive():
            m.abort_connection()
            pytest.fail("the writer hangs: nobody made room for it")
        raise
    if wb_max:
        assert most <= wb_max * MiB, f"{most} bytes held with wb_max={wb_max} MiB"
        assert most >= MiB, most  # it does hold data
        assert st["commits"] >= 1, st  # commits made room before the release
    else:
        # Nothing needed room: everything stays held, uncommitted.
        assert st["wb_held"] == len(data) and st["commits"] == 0, st
    wait_for(lambda: stats(m)["wb_held"] == 0, 30, what="the release to commit")
    assert read_file(env.export / "f") == data


def _pieces(path, data, size, flags=0):
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | flags, 0o644)
    try:
        for off in range(0, len(data), size):
            assert os.write(fd, data[off:off + size]) == len(data[off:off + size])
    finally:
        os.close(fd)


def test_small_writes_leave_in_few_requests_and_land_whole(env, daemon, mount):
    """A program writing 8 KiB at a time: the pieces that continue the
    file's last queued write are appended to it, so the daemon gets far
    fewer WRITEs than the program made, and every byte lands where it
    was written, seen by the export and another mount. Pieces written
    backwards (none continues the one before) and appends (O_APPEND:
    never joined) land whole too. The replies come 5 ms late (a relay),
    so that pieces queue behind each WRITE however busy the machine: how
    many are joined depends on how many the program writes meanwhile
    (once, in CI without the relay, a third)."""
    from helpers import DelayRelay
    relay = DelayRelay((daemon.host, daemon.port), 0.005)
    m = None
    try:
        m = env.mount(relay.via(daemon))
        data = os.urandom(8 * MiB)
        n = len(data) // 8192
        before = stats(m)
        _pieces(m / "f", data, 8192)
        after = stats(m)
    finally:
        if m is not None:
            assert m.umount() is None  # before the relay goes
        relay.close()
    sent = after.get("req_WRITE", 0) - before.get("req_WRITE", 0)
    assert after["coalesced"] - before["coalesced"] >= n // 2, (after, before)
    assert sent + after["coalesced"] - before["coalesced"] == n, (sent, after)
    assert read_file(env.export / "f") == data
    m = mount()
    m2 = mount()
    assert read_file(m2 / "f") == data

    fd = os.open(m / "g", os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        for off in reversed(range(0, len(data), 8192)):
            os.pwrite(fd, data[off:off + 8192], off)
        # Over what is still queued: in order.
        os.pwrite(fd, b"z" * 20000, 100)
    finally:
        os.close(fd)
    want = data[:100] + b"z" * 20000 + data[20100:]
    assert read_file(env.export / "g") == want and read_file(m2 / "g") == want

    _pieces(m / "h", data[:MiB], 4096, os.O_APPEND)
    _pieces(m / "h", data[MiB:2 * MiB], 4096, os.O_APPEND)
    assert read_file(env.export / "h") == data[:2 * MiB]


def test_a_held_piece_goes_when_someone_waits_for_it(env, daemon, mount):
    """The pieces held to grow are sent as soon as anything needs them on
    the daemon: fsync, a read, a stat (its size), another mount's read
    after this close."""
    m = mount()
    m2 = mount()
    fd = os.open(m / "f", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        for i in range(64):
            os.write(fd, bytes([i]) * 8192)
        assert os.fstat(fd).st_size == 64 * 8192
        assert os.pread(fd, 8192, 63 * 8192) == bytes([63]) * 8192
        os.write(fd, b"x" * 100)
        os.fsync(fd)
        assert os.stat(env.export / "f").st_size == 64 * 8192 + 100
        os.write(fd, b"y" * 100)
    finally:
        os.close(fd)
    want = b"".join(bytes([i]) * 8192 for i in range(64)) + b"x" * 100 + b"y" * 100
    assert read_file(m2 / "f") == want
