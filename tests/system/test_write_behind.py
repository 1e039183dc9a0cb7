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
