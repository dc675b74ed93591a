"""``kfjob ui``: a local web page that shows training jobs live, with the user's own RBAC.

:func:`serve` starts :class:`~kfjob.ui.server.UiServer` (standard library only: the pages are
server-rendered HTML with one small script and one stylesheet shipped in the package) on
127.0.0.1 by default. The modules: ``model`` (what a row or a section shows, pure), ``html``,
``pages`` and ``renderpage`` (markup, pure), ``locate`` (an error's line in pasted YAML),
``cluster`` (the API calls), ``hub`` (the shared watches behind the jobs page), ``server``.
"""

from __future__ import annotations

import sys
from typing import TextIO

from kfjob.ui.cluster import Cluster
from kfjob.ui.server import UiServer

__all__ = ["UiServer", "serve"]


def serve(
    *,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    address: str = "127.0.0.1",
    port: int = 8080,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> None:
    """Serve until interrupted; prints the URL (and opens no browser)."""
    cluster = Cluster(kubeconfig=kubeconfig, context=context, namespace=namespace)
    server = UiServer(cluster, address=address, port=port, context=cluster.label)
    if address != "localhost" and (
        server.hosts is None or f"127.0.0.1:{server.server_address[1]}" not in server.hosts
    ):
        print(
            f"warning: serving on {address}: anyone who reaches this port acts on the cluster "
            "with your kubeconfig's rights",
            file=err,
            flush=True,
        )
    server.start()
    print(f"kfjob ui: {server.url}  ({cluster.label}; Ctrl-C stops it)", file=out, flush=True)
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.hub.stop()
        server.server_close()
