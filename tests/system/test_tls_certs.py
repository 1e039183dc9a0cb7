"""TLS by certificate (README "Encryption"): the pod key's PSK lets every
key holder pose as the coordinator; a site that wants more gives podfsd a
certificate (--tls-cert, --tls-key) and its mounts a CA to check it with
(-o tls_ca=, tls_name=). Such a mount offers no PSK: the coordinator must
show a certificate that verifies for the name asked, or the mount fails.
The pod key still authenticates both ends inside TLS, and mounts without
tls_ca keep the PSK.

The certificates are made here with the openssl command: a pod CA, a
coordinator certificate it signs, and an impostor's."""

import os
import signal
import subprocess

import pytest

from harness import is_mounted
from helpers import PODFS, PODFSD, read_file, run, wait_for, write_file

pytestmark = pytest.mark.timeout(120)

NAME = "coord.test"


def openssl(*args):
    subprocess.run(["openssl", *[str(a) for a in args]], check=True, timeout=30,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE)


def new_key(path):
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-out", path)
    os.chmod(path, 0o600)
    return path


def make_ca(d, name):
    key = new_key(d / f"{name}.key")
    pem = d / f"{name}.pem"
    openssl("req", "-x509", "-new", "-key", key, "-out", pem, "-days", "30",
            "-subj", f"/CN={name}")
    return key, pem


def make_cert(d, name, ca, sans):
    """A certificate for sans (subjectAltName entries) signed by ca (key,
    pem), or self-signed if ca is None. Returns (key, pem)."""
    key = new_key(d / f"{name}.key")
    pem = d / f"{name}.pem"
    ext = d / f"{name}.ext"
    ext.write_text("subjectAltName=" + ",".join(sans) + "\n")
    if ca is None:
        openssl("req", "-x509", "-new", "-key", key, "-out", pem, "-days", "30",
                "-subj", f"/CN={name}", "-addext", "subjectAltName=" + ",".join(sans))
        return key, pem
    csr = d / f"{name}.csr"
    openssl("req", "-new", "-key", key, "-out", csr, "-subj", f"/CN={name}")
    openssl("x509", "-req", "-in", csr, "-CA", ca[1], "-CAkey", ca[0], "-CAcreateserial",
            "-out", pem, "-days", "30", "-extfile", ext)
    return key, pem


@pytest.fixture
def pki(env):
    d = env.root / "pki"
    d.mkdir()
    ca = make_ca(d, "podca")
    p = {"dir": d, "ca": ca[1],
         "coord": make_cert(d, "coord", ca, ["IP:127.0.0.1", f"DNS:{NAME}"])}
    return p


def cert_args(cert):
    return ["--tls-cert", cert[1], "--tls-key", cert[0]]


def failed_mount(env, addr, opts):
    r = run(["timeout", "60", PODFS, addr, env.root / "failmnt", "-f", "-o",
             f"key={env.key},retry=0," + opts], timeout=90, check=False)
    assert not is_mounted(env.root / "failmnt")
    return r


@pytest.fixture(autouse=True)
def failmnt(env):
    (env.root / "failmnt").mkdir()


def test_certificate_mount_verifies_the_coordinator(env, pki):
    """A mount with tls_ca checks the coordinator's certificate (by the
    address it was given, or by tls_name) and works as any mount; a
    mount with the PSK works beside it on the same coordinator."""
    d = env.start_daemon(extra=cert_args(pki["coord"]))
    wait_for(lambda: "TLS: certificate" in d.log(), 5, what="podfsd to log its certificate")
    line = [ln for ln in d.log().splitlines() if "TLS: certificate" in ln][0]
    assert "CN=coord" in line and "valid until" in line and "NOT VALID" not in line, line
    a = env.mount(d, opts=f"tls_ca={pki['ca']}")
    b = env.mount(d, path=env.root / "b", opts=f"tls_ca={pki['ca']},tls_name={NAME}")
    c = env.mount(d, path=env.root / "c")  # the pod key's PSK
    write_file(a / "f", b"by certificate")
    assert read_file(b / "f") == b"by certificate"
    assert read_file(c / "f") == b"by certificate"
    write_file(c / "g", b"by psk")
    assert read_file(a / "g") == b"by psk"


def test_key_holder_cannot_pose_as_the_coordinator(env, pki):
    """Another podfsd with the pod key: a mount with tls_ca refuses it,
    whether it has no certificate, a self-made one for the same name, or
    the real one for another name than the mount asked for; each with a
    one-line reason. The real coordinator's mounts keep working."""
    real = env.start_daemon(extra=cert_args(pki["coord"]))
    m = env.mount(real, opts=f"tls_ca={pki['ca']}")
    write_file(m / "f", b"real")
    exp2 = env.root / "impostor-export"
    exp2.mkdir()
    plain = env.start_daemon(export=exp2, state_dir=env.root / "st-plain", tag="nocert")
    r = failed_mount(env, plain.addr, f"tls_ca={pki['ca']}")
    assert r.returncode == 1, r.stderr
    assert "--tls-cert" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    # The same key holder's PSK mount works: that is what tls_ca is for.
    assert r.stderr.startswith("podfs: TLS handshake"), r.stderr

    evil = make_cert(pki["dir"], "evil", None, ["IP:127.0.0.1", f"DNS:{NAME}"])
    exp3 = env.root / "impostor-export2"
    exp3.mkdir()
    bad = env.start_daemon(export=exp3, state_dir=env.root / "st-evil", tag="evil",
                           extra=cert_args(evil))
    for opts in (f"tls_ca={pki['ca']}", f"tls_ca={pki['ca']},tls_name={NAME}"):
        r = failed_mount(env, bad.addr, opts)
        assert r.returncode == 1, r.stderr
        assert "did not verify" in r.stderr and "self-signed" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr

    # The right certificate, but not for the name the mount asked for.
    r = failed_mount(env, f"localhost:{real.port}", f"tls_ca={pki['ca']}")
    assert r.returncode == 1 and "hostname mismatch" in r.stderr, r.stderr
    r = failed_mount(env, real.addr, f"tls_ca={pki['ca']},tls_name=other.test")
    assert r.returncode == 1 and "hostname mismatch" in r.stderr, r.stderr
    # Another pod's CA does not vouch for it either.
    other_ca = make_ca(pki["dir"], "otherca")
    r = failed_mount(env, real.addr, f"tls_ca={other_ca[1]}")
    assert r.returncode == 1 and "did not verify" in r.stderr, r.stderr

    assert read_file(m / "f") == b"real"
    write_file(m / "g", b"still")
    assert (real.export / "g").read_bytes() == b"still"
    assert not (exp2 / "f").exists() and not (exp3 / "f").exists()


def test_sighup_reloads_the_certificate(env, pki):
    """A renewed certificate (here: from another CA) is taken on SIGHUP by
    new connections; mounts up keep theirs; a broken file on SIGHUP is
    logged and the old certificate stays."""
    key, pem = pki["dir"] / "live.key", pki["dir"] / "live.pem"
    key.write_bytes(pki["coord"][0].read_bytes())
    os.chmod(key, 0o600)
    pem.write_bytes(pki["coord"][1].read_bytes())
    d = env.start_daemon(extra=["--tls-cert", pem, "--tls-key", key])
    m = env.mount(d, opts=f"tls_ca={pki['ca']}")
    write_file(m / "f", b"1")

    new_ca = make_ca(pki["dir"], "newca")
    nk, npem = make_cert(pki["dir"], "renewed", new_ca, ["IP:127.0.0.1"])
    key.write_bytes(nk.read_bytes())
    pem.write_bytes(npem.read_bytes())
    d.proc.send(signal.SIGHUP)
    wait_for(lambda: "CN=renewed" in d.log(), 10, what="podfsd to reload its certificate")
    n = env.mount(d, path=env.root / "n", opts=f"tls_ca={new_ca[1]}")
    assert read_file(n / "f") == b"1"
    r = failed_mount(env, d.addr, f"tls_ca={pki['ca']}")
    assert r.returncode == 1 and "did not verify" in r.stderr, r.stderr
    write_file(m / "f", b"2")  # the old connection, under the old certificate
    assert read_file(n / "f") == b"2"

    pem.write_text("not a certificate\n")
    env.expect_log(r"SIGHUP: no certificate in .*live\.pem: .*; keeping the TLS certificate "
                   r"as it was", d.tag)
    d.proc.send(signal.SIGHUP)
    wait_for(lambda: "keeping the TLS certificate as it was" in d.log(), 10,
             what="podfsd to refuse the broken certificate")
    o = env.mount(d, path=env.root / "o", opts=f"tls_ca={new_ca[1]}")
    assert read_file(o / "f") == b"2"
    assert d.alive()


def podfsd_exit(env, extra):
    r = run([PODFSD, "--listen", "127.0.0.1:0", "--key", env.key, "--state-dir",
             env.root / "st-x", *extra, env.export], timeout=30, check=False)
    return r


def test_podfsd_certificate_errors(env, pki):
    """Each mistake is one line naming the file, before podfsd serves."""
    ck, cp = pki["coord"]
    open_key = pki["dir"] / "open.key"
    open_key.write_bytes(ck.read_bytes())
    os.chmod(open_key, 0o644)
    other_key = new_key(pki["dir"] / "other.key")
    cert_only = pki["dir"] / "cert-only.pem"
    cert_only.write_bytes(cp.read_bytes())
    os.chmod(cert_only, 0o600)
    cases = [
        (["--tls-key", ck], 2, "--tls-key needs --tls-cert"),
        (["--tls-cert", pki["dir"] / "nope.pem"], 1, "nope.pem"),
        (["--tls-cert", cp, "--tls-key", open_key], 1, "accessible by group or others"),
        (["--tls-cert", cp, "--tls-key", other_key], 1, "is not the certificate's"),
        (["--tls-cert", ck, "--tls-key", ck], 1, "no certificate in"),
        (["--tls-cert", cp], 1, "accessible by group or others"),
        (["--tls-cert", cert_only], 1, "no private key in"),
    ]
    for extra, code, want in cases:
        r = podfsd_exit(env, extra)
        assert r.returncode == code, (extra, r.returncode, r.stderr)
        assert want in r.stderr, (extra, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, (extra, r.stderr)
    # One PEM file holding both works (the key's mode then counts).
    both = pki["dir"] / "both.pem"
    both.write_bytes(cp.read_bytes() + ck.read_bytes())
    os.chmod(both, 0o600)
    d = env.start_daemon(extra=["--tls-cert", both], tag="both")
    m = env.mount(d, opts=f"tls_ca={pki['ca']}")
    write_file(m / "x", b"ok")


def test_podfs_certificate_option_errors(env, pki):
    d = env.start_daemon(extra=cert_args(pki["coord"]))
    for opts, code, want in [
        ("tls_name=x", 2, "tls_name needs tls_ca"),
        (f"tls=off,tls_ca={pki['ca']}", 2, "need tls=on"),
        ("tls_ca=", 2, "tls_ca needs"),
        (f"tls_ca={pki['dir'] / 'nope.pem'}", 1, "cannot open CA file"),
        (f"tls_ca={pki['coord'][0]}", 1, "no CA certificate in"),
    ]:
        r = failed_mount(env, d.addr, opts)
        assert r.returncode == code, (opts, r.returncode, r.stderr)
        assert want in r.stderr and len(r.stderr.strip().splitlines()) == 1, (opts, r.stderr)
