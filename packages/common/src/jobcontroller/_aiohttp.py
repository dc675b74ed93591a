"""aiohttp, imported without the two default TLS contexts it fills at import (by importing
this module: ``jobcontroller`` does so first).

aiohttp's ``connector`` module builds its default ``SSLContext`` objects (verified and not)
when it is imported, each loading the system's trust store: about 40 ms of CPU and 2 MB
resident at every start, for contexts no client here uses: the Kubernetes client passes its
own context (the cluster's CA, or the system's for a kubeconfig that names none, built when
the kubeconfig is read), and so does every other client in this code base. The trust store's
paths are pointed at nothing while aiohttp is imported, and restored at once: a request that
does rely on aiohttp's defaults (``ssl=True``) fails verification (closed, not open).
"""

from __future__ import annotations

import os
import sys

_TRUST_STORE = ("SSL_CERT_FILE", "SSL_CERT_DIR")


def _import_without_default_trust() -> None:
    if "aiohttp" in sys.modules:
        return
    saved = {key: os.environ.get(key) for key in _TRUST_STORE}
    os.environ.update(dict.fromkeys(_TRUST_STORE, "/nonexistent"))
    try:
        import aiohttp.connector  # noqa: F401
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


_import_without_default_trust()
