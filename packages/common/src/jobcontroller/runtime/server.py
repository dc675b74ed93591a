"""The operator's HTTP endpoints: ``/metrics``, ``/healthz`` and ``/readyz``, on one aiohttp app.

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
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

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
        self._runner: web.AppRunner | None = None
        app = web.Application()
        app.router.add_get("/metrics", make_aiohttp_handler(registry))
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self._app = app

    @property
    def metrics_port(self) -> int:
        """The bound port of /metrics (after :meth:`start`)."""
        return self._bound()[0]

    @property
    def health_port(self) -> int:
        """The bound port of /healthz and /readyz (after :meth:`start`)."""
        return self._bound()[1]

    async def start(self) -> None:
        runner = web.AppRunner(self._app, access_log=None, handle_signals=False)
        await runner.setup()
        self._runner = runner
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
                await web.SockSite(runner, sock).start()
        except BaseException:
            await runner.cleanup()
            self._runner = None
            raise
        self._ports = (ports[0], ports[1])
        log.info("serving", host=self._host, metrics_port=ports[0], health_port=ports[1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _listen(self, port: int) -> socket.socket:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.create_server((self._host, port), family=family, reuse_port=False)
        sock.setblocking(False)
        return sock

    def _bound(self) -> tuple[int, int]:
        if self._ports is None:
            raise RuntimeError("server not started")
        return self._ports

    async def _healthz(self, _: web.Request) -> web.Response:
        if self._healthy():
            return web.Response(text="ok\n")
        return web.Response(status=500, text="fatal error; shutting down\n")

    async def _readyz(self, _: web.Request) -> web.Response:
        body = dict(self._readiness())
        return web.json_response(body, status=200 if body.get("synced") else 503)
