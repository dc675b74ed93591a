"""``jobcontroller`` imports aiohttp with the system trust store pointed at nothing (its two
default TLS contexts are never used here and cost ~40 ms at every start): the environment is
as it was afterwards, and a context built later (a kubeconfig that names no CA) trusts the
system's store as before."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys

import pytest

PROBE = """
import json, os, ssl, sys
import jobcontroller
from jobcontroller.runtime.kubeconfig import _ssl_context
print(json.dumps({
    "env": {k: os.environ.get(k) for k in ("SSL_CERT_FILE", "SSL_CERT_DIR")},
    "later": _ssl_context().cert_store_stats()["x509_ca"] + len(_ssl_context().get_ca_certs()),
    "aiohttp_imported": "aiohttp.connector" in sys.modules,
}))
"""


def _probe(env: dict[str, str]) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def _system_cas() -> int:
    ctx = ssl.create_default_context()
    return len(ctx.get_ca_certs()) + ctx.cert_store_stats()["x509_ca"]


@pytest.mark.skipif(_system_cas() == 0, reason="this machine has no system CA certificates")
def test_a_context_built_after_the_import_still_trusts_the_system_store() -> None:
    seen = _probe({})
    assert seen["aiohttp_imported"] is True
    assert seen["env"] == {"SSL_CERT_FILE": None, "SSL_CERT_DIR": None}
    assert isinstance(seen["later"], int) and seen["later"] > 0


def test_a_trust_store_the_user_named_is_kept() -> None:
    bundle = ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt"
    seen = _probe({"SSL_CERT_FILE": bundle, "SSL_CERT_DIR": "/their/dir"})
    assert seen["env"] == {"SSL_CERT_FILE": bundle, "SSL_CERT_DIR": "/their/dir"}
