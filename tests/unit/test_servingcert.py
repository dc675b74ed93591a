"""The training-progress endpoint's certificate pair, made in a child process."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from jobcontroller.runtime import servingcert
from jobcontroller.runtime.servingcert import ServingCert, serving_cert_from_child

NOW = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)


def _handshake(cert: ServingCert, host: str, tmp: Path) -> str:
    """A TLS handshake in memory: the server serves ``cert``, the client trusts only its CA
    and checks ``host``. Returns the name the client verified against."""
    (tmp / "tls.crt").write_text(cert.cert_pem)
    (tmp / "tls.key").write_text(cert.key_pem)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp / "tls.crt", tmp / "tls.key")
    client_ctx = ssl.create_default_context(cadata=cert.ca_pem)
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=host)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(10):
        for name, side in (("client", client), ("server", server)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return host
    raise AssertionError("the handshake did not finish")


def test_the_pair_made_in_a_child_is_trusted_for_every_host(tmp_path: Path) -> None:
    cert = asyncio.run(serving_cert_from_child(hosts=["op.kubeflow.svc", "127.0.0.1"], now=NOW))
    assert _handshake(cert, "op.kubeflow.svc", tmp_path) == "op.kubeflow.svc"
    assert _handshake(cert, "127.0.0.1", tmp_path) == "127.0.0.1"
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(cert, "elsewhere.svc", tmp_path)


def test_the_operator_process_never_imports_cryptography_to_make_the_pair() -> None:
    """The point of the child: cryptography's memory stays out of the operator's process."""
    probe = (
        "import asyncio, datetime as dt, sys\n"
        "from jobcontroller.runtime.servingcert import serving_cert_from_child\n"
        "now = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)\n"
        "cert = asyncio.run(serving_cert_from_child(hosts=['a.svc'], now=now))\n"
        "assert cert.key_pem.startswith('-----BEGIN PRIVATE KEY-----'), cert\n"
        "print(sorted(n for n in sys.modules if n.startswith('cryptography')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_a_child_that_fails_is_an_oserror_with_its_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller (the progress server) retries on OSError; the message carries the child's
    stderr. Here the child is a shell, which refuses Python's ``-P``."""
    monkeypatch.setattr(servingcert.sys, "executable", "/bin/sh")
    with pytest.raises(OSError, match=r"making the serving certificate failed: .*-P"):
        asyncio.run(serving_cert_from_child(hosts=["a.svc"], now=NOW))


def test_an_operator_stopping_while_the_child_runs_leaves_no_child(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Cancelled (the operator stops) while the pair is being made: the child is killed and
    reaped, not left running past its parent."""
    pidfile = tmp_path / "pid"
    slow = tmp_path / "slow-python"
    slow.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 60\n")
    slow.chmod(0o755)
    monkeypatch.setattr(servingcert.sys, "executable", str(slow))

    async def stop_while_making() -> int:
        making = asyncio.ensure_future(serving_cert_from_child(hosts=["a.svc"], now=NOW))
        for _ in range(500):
            if pidfile.exists() and pidfile.read_text().strip():
                break
            await asyncio.sleep(0.01)
        making.cancel()
        with pytest.raises(asyncio.CancelledError):
            await making
        return int(pidfile.read_text())

    pid = asyncio.run(stop_while_making())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
