"""test_listings_kept.py: a listing built for one session is kept and
served to the next session that asks for it with the same credentials
(daemon/lscache.c): the same bytes, the session's interest registered as
if it had been built (pushes follow), and never once anything changed
since it was built, through podfs or beside it. Its counters are podfsd
status's listings_served and listings_built.

Spoken with raw pfsproto sessions (no FUSE client), which have no TLS.
"""

import os
import time

import pytest

import pfsproto as P
from helpers import podfsd_status, write_file

pytestmark = pytest.mark.plaintext

DIRECT = 5.0  # a change beside podfs reaches the daemon (fanotify) within this


def session(daemon, env):
    return P.connect(daemon.host, daemon.port, P.load_key(env.key), caps=P.CAP_PUSH)


def counts(daemon):
    st, _ = podfsd_status(daemon)
    return int(st.get("listings_served", -1)), int(st.get("listings_built", -1))


def listing(c, name, **kw):
    h = c.lookup(c.root, name)[0]
    return h, c.listdir_items(h, **kw)


def fill(d, n=20):
    os.mkdir(d)
    for i in range(n):
        write_file(d / f"f{i}.py", b"v = %d\n" % i)


def test_listing_served_again_to_another_session(env, daemon):
    """The first listing of d is built and not kept (one host alone costs
    no copy); the second is built and kept; the third, on another
    session, is served from memory: the same bytes. Other credentials or
    another content limit make other listings, kept the same way."""
    fill(env.export / "d")
    a, b = session(daemon, env), session(daemon, env)
    try:
        served0, built0 = counts(daemon)
        assert served0 >= 0 and built0 >= 0, "podfsd status has no listings_* lines"
        _, la = listing(a, "d")
        assert la[0] & P.LS_COMPLETE and len(la[1]) == 20
        assert counts(daemon) == (served0, built0 + 1)
        assert listing(a, "d")[1] == la
        assert counts(daemon) == (served0, built0 + 2)
        assert listing(b, "d")[1] == la
        assert counts(daemon) == (served0 + 1, built0 + 2)
        # Another caller, another content limit: built (twice) for them.
        uc = P.creds(1000, 1000, (1000,))
        _, lu = listing(b, "d", cr=uc)
        _, ls = listing(b, "d", max_inline=0)
        assert set(lu[1]) == set(la[1])
        assert all(not it[2] & P.LD_DATA for it in ls[1].values())
        assert counts(daemon) == (served0 + 1, built0 + 4)
        # (Built again: its atimes may differ, the first read of the files
        # as another user than the owner updated them.)
        lu = listing(a, "d", cr=uc)[1]
        ls = listing(a, "d", max_inline=0)[1]
        assert counts(daemon) == (served0 + 1, built0 + 6)
        assert listing(b, "d", cr=uc)[1] == lu
        assert listing(b, "d", max_inline=0)[1] == ls
        assert counts(daemon) == (served0 + 3, built0 + 6)
    finally:
        a.close()
        b.close()


def test_kept_listing_registers_interest(env, daemon):
    """A session served a kept listing gets the pushes about the directory
    and its entries, as one that had it built."""
    fill(env.export / "d")
    a, b = session(daemon, env), session(daemon, env)
    try:
        hd, la = listing(a, "d")
        assert listing(a, "d")[1] == la  # kept from the second time
        served0, _ = counts(daemon)
        _, lb = listing(b, "d")
        assert lb == la and counts(daemon)[0] == served0 + 1
        b.wait_pushes(0.3)
        fh = la[1][b"f3.py"][0]
        fid = a.open(fh, os.O_RDWR)
        a.write(fh, fid, 0, b"changed = 1\n")
        assert any(p[0] == "inode" and p[1] == fh for p in b.pushes_before_pong())
        a.create(hd, "new.py")
        assert any(p[1] == hd for p in b.pushes_before_pong())
    finally:
        a.close()
        b.close()


def test_no_kept_listing_after_a_change(env, daemon):
    """A change through podfs (content, a new name) or beside it (fanotify):
    the next listing is built and shows it."""
    fill(env.export / "d")
    a, b = session(daemon, env), session(daemon, env)
    try:
        hd, la = listing(a, "d")
        fh = la[1][b"f1.py"][0]
        fid = a.open(fh, os.O_RDWR)
        assert listing(b, "d")[1] == la  # kept, then served
        a.write(fh, fid, 0, b"v = 'through podfs'\n")
        served0, built0 = counts(daemon)
        _, lb = listing(b, "d")
        assert lb[1][b"f1.py"][3] == b"v = 'through podfs'\n"
        assert lb[1][b"f1.py"][1]["size"] == len(b"v = 'through podfs'\n")
        assert counts(daemon) == (served0, built0 + 1)
        # Kept again from its second time: a third session is served it.
        assert listing(a, "d")[1] == lb
        c = session(daemon, env)
        try:
            assert listing(c, "d")[1] == lb
            assert counts(daemon) == (served0 + 1, built0 + 2)
            # A new name through podfs.
            a.create(hd, "g.py")
            assert b"g.py" in listing(c, "d")[1][1]
            # Beside podfs: the next listing after fanotify told the
            # daemon shows it (bounded wait; listed again each time).
            write_file(env.export / "d" / "f2.py", b"v = 'beside'\n")
            deadline = time.monotonic() + DIRECT
            while True:
                items = listing(c, "d")[1][1]
                if items[b"f2.py"][3] == b"v = 'beside'\n":
                    break
                assert time.monotonic() < deadline, "the change beside podfs never showed"
                time.sleep(0.05)
            os.unlink(env.export / "d" / "f3.py")
            deadline = time.monotonic() + DIRECT
            while b"f3.py" in listing(c, "d")[1][1]:
                assert time.monotonic() < deadline, "the unlink beside podfs never showed"
                time.sleep(0.05)
        finally:
            c.close()
    finally:
        a.close()
        b.close()


def test_no_kept_listing_once_nobody_caches_its_entries(env, daemon):
    """fanotify's events are pushed only for objects some session caches:
    once the only session that cached d's entries forgot them, a change
    beside podfs moves nothing, so the listing kept for d must already be
    gone. The next session's listing shows the change at once."""
    fill(env.export / "d")
    a = session(daemon, env)
    try:
        hd, la = listing(a, "d")
        assert listing(a, "d")[1] == la  # kept
        a.forget([it[0] for it in la[1].values()] + [hd])
        a.ping()  # the FORGET was handled before the reply to this
        write_file(env.export / "d" / "f4.py", b"v = 'beside, uncached'\n")
        b = session(daemon, env)
        try:
            assert listing(b, "d")[1][1][b"f4.py"][3] == b"v = 'beside, uncached'\n"
        finally:
            b.close()
    finally:
        a.close()
