"""``jobcontroller`` imports aiohttp with the system trust store pointed at nothing (its two
default TLS contexts are never used here and cost ~40 ms at every start): the environment is
as it was afterwards, and a context built later (a kubeconfig that names no CA) trusts what
it would have trusted without ``jobcontroller``: the system's store, or the user's own."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

from jobcontroller.runtime.servingcert import new_serving_cert

PROBE = """
import json, os, ssl, sys
if sys.argv[1] == "with":
    import jobcontroller
context = ssl.create_default_context()  # what a kubeconfig that names no CA gets
print(json.dumps({
    "env": {k: os.environ.get(k) for k in ("SSL_CERT_FILE", "SSL_CERT_DIR")},
    "trusted": sorted(str(c["subject"]) for c in context.get_ca_certs()),
    "aiohttp_imported": "aiohttp.connector" in sys.modules,
}))
"""


def _probe(env: dict[str, str], *, with_jobcontroller: bool) -> dict[str, object]:
    """What a context built afterwards trusts, in a fresh interpreter, with or without
    ``jobcontroller`` imported first."""
    clean = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, "with" if with_jobcontroller else "without"],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def test_a_context_built_after_the_import_trusts_what_it_would_have() -> None:
    with_it = _probe({}, with_jobcontroller=True)
    assert with_it["aiohttp_imported"] is True
    assert with_it["env"] == {"SSL_CERT_FILE": None, "SSL_CERT_DIR": None}
    # The same interpreter without jobcontroller: the system's store as is.
    assert with_it["trusted"] == _probe({}, with_jobcontroller=False)["trusted"]


def test_a_trust_store_the_user_named_is_kept_and_trusted(tmp_path: Path) -> None:
    bundle = tmp_path / "their-ca.pem"
    bundle.write_text(new_serving_cert(hosts=["x"], now=dt.datetime.now(dt.UTC)).ca_pem)
    seen = _probe(
        {"SSL_CERT_FILE": str(bundle), "SSL_CERT_DIR": str(tmp_path)}, with_jobcontroller=True
    )
    assert seen["env"] == {"SSL_CERT_FILE": str(bundle), "SSL_CERT_DIR": str(tmp_path)}
    assert seen["trusted"] == ["((('commonName', 'trainjob-status-ca'),),)"]
