"""``kfjob ui``'s place in the ``kfjob`` command: its flags, and serving until interrupted.

The web server's modules are imported only when the command runs, so the other commands do
not load them.
"""

from __future__ import annotations

import argparse
import errno
import sys
from collections.abc import Callable
from typing import TextIO

__all__ = ["add_ui_command", "serve"]

#: kfjob's exit status for bad usage (``kfjob.cli``).
EXIT_USAGE = 2


def add_ui_command(add: Callable[[str, str, str], argparse.ArgumentParser]) -> None:
    """Add ``ui`` with ``add(name, help, description)``, the CLI's subcommand maker (which
    gives it the connection flags every command has)."""
    p = add(
        "ui",
        "a local web page of your jobs, live (prints its URL)",
        "Serve a web page of the training jobs you may see (your kubeconfig, so your RBAC): "
        "every kind the cluster serves, live; a job's conditions, pods, events, env, logs "
        "and YAML; suspend, resume and delete where your RBAC allows; and the offline render. "
        "It binds 127.0.0.1, prints the URL and opens no browser. With -n, only that "
        "namespace.",
    )
    p.add_argument("--port", type=int, default=8080, help="port (default 8080; 0: a free one)")
    p.add_argument(
        "--address",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1; another lets others act with your rights)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        serve(
            kubeconfig=args.kubeconfig,
            context=args.context,
            namespace=args.namespace,
            address=args.address,
            port=args.port,
        )
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        print(
            f"error: port {args.port} is in use on {args.address}: give --port "
            "(0 picks a free one)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except KeyboardInterrupt:
        pass
    return 0


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
    from kfjob.ui.cluster import Cluster
    from kfjob.ui.server import UiServer

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
        server.end_streams()
        server.server_close()
