"""/metrics, /healthz and /readyz of a Manager running in-process against the real API server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from jobcontroller.runtime.kube import CONFIGMAPS, KubeApi, Resource
from jobcontroller.runtime.manager import Manager
from jobcontroller.runtime.metrics import Metrics
from jobcontroller.runtime.server import OperatorServer
from jobcontroller.testing.ports import free_port

MISSING = Resource("nothing.test.jobcontroller.io", "v1", "Nothing", "nothings")


async def fetch(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}{path}") as resp:
        return resp.status, await resp.text()


@pytest.fixture
async def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
async def api(kubeconfig: str, metrics: Metrics) -> AsyncIterator[KubeApi]:
    # A client of its own, reporting to this test's metrics.
    client = await KubeApi.from_config(kubeconfig=kubeconfig, metrics=metrics, qps=100, burst=100)
    try:
        yield client
    finally:
        await client.close()


class Noop:
    name = "noop-controller"

    def setup(self, manager: Manager, queue: Any) -> None:
        manager.informer(CONFIGMAPS).add_handlers(on_add=lambda obj: queue.add("x/y"))

    async def reconcile(self, key: str) -> float | None:
        return None


async def serving(manager: Manager, *, metrics_port: int, health_port: int) -> OperatorServer:
    assert manager.metrics is not None
    server = OperatorServer(
        registry=manager.metrics.registry,
        readiness=manager.readiness,
        healthy=lambda: manager.healthy,
        host="127.0.0.1",
        metrics_port=metrics_port,
        health_port=health_port,
    )
    await server.start()
    return server


async def test_probes_and_metrics_on_separate_ports(
    api: KubeApi, metrics: Metrics, namespace: str
) -> None:
    manager = Manager(api, component="t", metrics=metrics, namespace=namespace, workers=1)
    manager.add(Noop())
    server = await serving(manager, metrics_port=0, health_port=0)
    try:
        assert server.metrics_port != server.health_port
        status, body = await fetch(server.health_port, "/readyz")
        assert status == 503 and json.loads(body)["synced"] is False  # not running yet
        assert (await fetch(server.health_port, "/healthz"))[0] == 200

        running = asyncio.create_task(manager.run())
        await asyncio.wait_for(manager.informers[0].wait_synced(), timeout=30)
        status, body = await fetch(server.health_port, "/readyz")
        assert status == 200
        assert json.loads(body) == {
            "synced": True,
            "leader": True,
            "informers": {"configmaps": True},
        }
        status, text = await fetch(server.metrics_port, "/metrics")
        assert status == 200
        assert any(
            line.startswith("jobcontroller_api_requests_total{") and 'resource="configmaps"' in line
            for line in text.splitlines()
        )
        assert "workqueue_depth" in text
        manager.stop()
        await asyncio.wait_for(running, timeout=30)
    finally:
        await server.stop()


async def test_one_port_serves_all_paths(api: KubeApi, metrics: Metrics, namespace: str) -> None:
    manager = Manager(api, component="t", metrics=metrics, namespace=namespace)
    port = free_port()
    server = await serving(manager, metrics_port=port, health_port=port)
    try:
        assert server.metrics_port == server.health_port == port
        for path in ("/metrics", "/healthz", "/readyz"):
            assert (await fetch(port, path))[0] in (200, 503)
        assert "leader_election_master_status" in (await fetch(port, "/metrics"))[1]
    finally:
        await server.stop()


async def test_caches_that_never_sync_keep_readyz_failing_then_stop_the_manager(
    api: KubeApi, metrics: Metrics, namespace: str
) -> None:
    manager = Manager(
        api, component="t", metrics=metrics, namespace=namespace, cache_sync_timeout=3
    )
    manager.informer(MISSING)  # the API server has no such resource: every LIST is a 404
    manager.informer(CONFIGMAPS)
    server = await serving(manager, metrics_port=0, health_port=0)
    try:
        running = asyncio.create_task(manager.run())
        await asyncio.wait_for(manager.informers[1].wait_synced(), timeout=30)
        status, body = await fetch(server.health_port, "/readyz")
        assert status == 503
        assert json.loads(body)["informers"] == {
            "nothings.nothing.test.jobcontroller.io": False,
            "configmaps": True,
        }
        with pytest.raises(TimeoutError, match="nothings"):
            await asyncio.wait_for(running, timeout=30)
        assert (await fetch(server.health_port, "/healthz"))[0] == 500
    finally:
        await server.stop()
