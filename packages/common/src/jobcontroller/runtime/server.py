"""The operator's HTTP endpoints: ``/metrics``, ``/healthz`` and ``/readyz``, on one server
(:mod:`jobcontroller.runtime.httpserver`).

The anchors serve metrics on :8080 and probes on :8081. Here one application serves all three
paths and listens on one or two sockets: on both ports when they differ (so the Deployment's
probe and scrape ports of the training-operator work unchanged), on one when they are equal.
Port 0 asks the OS for a free port; :attr:`OperatorServer.metrics_port` and
:attr:`OperatorServer.health_port` tell which ones were bound.

* ``/healthz`` answers 200 while the event loop runs (answering at all proves that) and 500
  once the manager hit a fatal error, i.e. while it is cleaning up before exiting.
* ``/readyz`` answers 200 when every informer has synced, 503 before; a standby replica with
  synced caches is ready. The JSON body reports ``synced``, ``leader`` and each informer.
* ``/metrics`` is the Prometheus text (or OpenMetrics, if asked) of the process registry.

Any other path is 404, a method other than GET or HEAD 405.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from jobcontroller.runtime.httpserver import HttpServer, Reply, Request, json_reply, text_reply

__all__ = ["OperatorServer"]

log = structlog.get_logger(__name__)


class OperatorServer:
    """Serves metrics and probes; start with :meth:`start`, stop with :meth:`stop`."""

    def __init__(
        self,
        *,
        registry: CollectorRegistry,
        readiness: Callable[[], Mapping[str, Any]],
        healthy: Callable[[], bool] = lambda: True,
        host: str = "0.0.0.0",
        metrics_port: int = 8080,
        health_port: int = 8081,
    ) -> None:
        """``readiness()`` returns a JSON-able mapping whose ``synced`` entry decides 200/503."""
        self._readiness = readiness
        self._healthy = healthy
        self._host = host
        self._requested = (metrics_port, health_port)
        self._ports: tuple[int, int] | None = None
        self._registry = registry
        self._server: HttpServer | None = None
        self._routes: dict[str, Callable[[Request], Reply]] = {
            "/metrics": self._metrics,
            "/healthz": self._healthz,
            "/readyz": self._readyz,
        }

    @property
    def metrics_port(self) -> int:
        """The bound port of /metrics (after :meth:`start`)."""
        return self._bound()[0]

    @property
    def health_port(self) -> int:
        """The bound port of /healthz and /readyz (after :meth:`start`)."""
        return self._bound()[1]

    async def start(self) -> None:
        # Probes and scrapes carry no body: none is read.
        server = HttpServer(self._handle, max_body=0)
        self._server = server
        try:
            metrics_port, health_port = self._requested
            metrics_sock = self._listen(metrics_port)
            ports = [metrics_sock.getsockname()[1]]
            sockets = [metrics_sock]
            if health_port != metrics_port or metrics_port == 0:
                health_sock = self._listen(health_port)
                sockets.append(health_sock)
                ports.append(health_sock.getsockname()[1])
            else:
                ports.append(ports[0])
            for sock in sockets:
                await server.listen(sock)
        except BaseException:
            await server.close()
            self._server = None
            raise
        self._ports = (ports[0], ports[1])
        log.info("serving", host=self._host, metrics_port=ports[0], health_port=ports[1])

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.close()
            self._server = None

    def _listen(self, port: int) -> socket.socket:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.create_server((self._host, port), family=family, reuse_port=False)
        sock.setblocking(False)
        return sock

    def _bound(self) -> tuple[int, int]:
        if self._ports is None:
            raise RuntimeError("server not started")
        return self._ports

    async def _handle(self, request: Request) -> Reply:
        route = self._routes.get(request.path)
        if route is None:
            return text_reply("404: Not Found\n", 404)
        if request.method not in ("GET", "HEAD"):
            return Reply(405, b"405: Method Not Allowed\n", headers={"Allow": "GET, HEAD"})
        return route(request)

    def _metrics(self, request: Request) -> Reply:
        encoder, content_type = choose_encoder(request.headers.get("Accept") or "")
        return Reply(200, encoder(self._registry), content_type)

    def _healthz(self, _: Request) -> Reply:
        if self._healthy():
            return text_reply("ok\n")
        return text_reply("fatal error; shutting down\n", 500)

    def _readyz(self, _: Request) -> Reply:
        body = dict(self._readiness())
        return json_reply(body, status=200 if body.get("synced") else 503)
