"""KubeApi over HTTP against a scripted local server: retries, verbs' wire format, watch streams.

The server is a fake (aiohttp.web on loopback); what a real apiserver does is covered in
tests/integration/test_kube_api.py. Here we pin behaviour a real server cannot be made to show on
demand: 429/5xx answers, stalls, ERROR events.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestServer

from jobcontroller.runtime.http1 import ConnectFailed
from jobcontroller.runtime.kube import (
    CONFIGMAPS,
    NAMESPACES,
    ApiError,
    ApiSettings,
    KubeApi,
    WatchInactive,
)
from jobcontroller.runtime.kubeconfig import ClusterConfig
from jobcontroller.runtime.metrics import Metrics

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

FAST = ApiSettings(backoff_base=0.001, backoff_max=0.002, max_attempts=3, read_timeout=5.0)


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


@dataclass
class FakeApiServer:
    """Answers every request with the next scripted handler (the last one repeats)."""

    script: list[Handler] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self.seen.append(
            Seen(
                method=request.method,
                path=request.path,
                query=dict(request.query),
                headers=dict(request.headers),
                body=json.loads(raw) if raw else None,
            )
        )
        handler = self.script[min(len(self.seen), len(self.script)) - 1]
        return await handler(request)


def status(code: int, reason: str = "", *, retry_after: str | None = None) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        body = {"kind": "Status", "apiVersion": "v1", "code": code, "reason": reason}
        headers = {"Retry-After": retry_after} if retry_after is not None else None
        return web.json_response(body, status=code, headers=headers)

    return handler


def ok(body: Any) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.json_response(body)

    return handler


def stream(lines: list[Any], *, stall: bool = False) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        for line in lines:
            await resp.write(json.dumps(line).encode() + b"\n")
        if stall:
            await asyncio.sleep(30)
        return resp

    return handler


@pytest_asyncio.fixture(loop_scope="session")
async def fake() -> AsyncIterator[tuple[FakeApiServer, KubeApi, Metrics]]:
    server = FakeApiServer()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.handle)
    test_server = TestServer(app, host="127.0.0.1")
    await test_server.start_server()
    metrics = Metrics()
    api = KubeApi(
        ClusterConfig(host=f"http://127.0.0.1:{test_server.port}"),
        qps=math.inf,
        burst=1,
        metrics=metrics,
        settings=FAST,
    )
    try:
        yield server, api, metrics
    finally:
        await api.close()
        await test_server.close()


Fake = tuple[FakeApiServer, KubeApi, Metrics]


class TestRetries:
    async def test_get_retries_5xx_then_succeeds(self, fake: Fake) -> None:
        server, api, metrics = fake
        server.script = [status(503), status(500), ok({"metadata": {"name": "a"}})]
        obj = await api.get(CONFIGMAPS, "a", namespace="ns")
        assert obj["metadata"]["name"] == "a"
        assert len(server.seen) == 3
        sample = metrics.registry.get_sample_value(
            "jobcontroller_api_requests_total",
            {"verb": "GET", "resource": "configmaps", "code": "503"},
        )
        assert sample == 1.0

    async def test_attempts_are_bounded(self, fake: Fake) -> None:
        server, api, _ = fake
        server.script = [status(503)]
        with pytest.raises(ApiError) as info:
            await api.get(CONFIGMAPS, "a", namespace="ns")
        assert info.value.status == 503
        assert len(server.seen) == FAST.max_attempts

    async def test_post_is_not_retried_on_5xx(self, fake: Fake) -> None:
        server, api, _ = fake
        server.script = [status(504), ok({})]
        with pytest.raises(ApiError) as info:
            await api.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace="ns")
        assert info.value.status == 504
        assert len(server.seen) == 1

    async def test_post_is_retried_on_429(self, fake: Fake) -> None:
        server, api, _ = fake
        server.script = [status(429, "TooManyRequests", retry_after="0"), ok({"kind": "x"})]
        assert await api.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace="ns") == {
            "kind": "x"
        }
        assert len(server.seen) == 2

    async def test_conflict_is_never_retried(self, fake: Fake) -> None:
        server, api, _ = fake
        server.script = [status(409, "Conflict"), ok({})]
        with pytest.raises(ApiError) as info:
            await api.replace(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace="ns")
        assert info.value.is_conflict
        assert len(server.seen) == 1

    async def test_retry_after_beyond_cap_is_raised_at_once(self, fake: Fake) -> None:
        server, api, _ = fake
        server.script = [status(429, retry_after="3600"), ok({})]
        with pytest.raises(ApiError) as info:
            await api.get(CONFIGMAPS, "a", namespace="ns")
        assert info.value.retry_after == 3600.0
        assert len(server.seen) == 1

    async def test_read_timeout_applies_and_is_retried_for_get(self, fake: Fake) -> None:
        server, api, _ = fake

        async def slow(request: web.Request) -> web.StreamResponse:
            await asyncio.sleep(2)
            return web.json_response({})

        server.script = [slow]
        impatient = KubeApi(
            api.config,
            qps=math.inf,
            burst=1,
            settings=ApiSettings(read_timeout=0.1, max_attempts=2, backoff_base=0.001),
        )
        try:
            with pytest.raises(TimeoutError):
                await impatient.get(CONFIGMAPS, "a", namespace="ns")
        finally:
            await impatient.close()
        assert len(server.seen) == 2

    async def test_connection_refused_surfaces_after_retries(self) -> None:
        api = KubeApi(
            ClusterConfig(host="http://127.0.0.1:9"),  # discard port: nothing listens
            qps=math.inf,
            burst=1,
            settings=FAST,
        )
        try:
            with pytest.raises(ConnectFailed):
                await api.create(NAMESPACES, {"metadata": {"name": "x"}})
        finally:
            await api.close()


class TestWireFormat:
    async def test_merge_patch_content_type(self, fake: Fake) -> None:
        server, api, _ = fake
        server.script = [ok({})]
        await api.merge_patch(CONFIGMAPS, "a", {"data": {"k": "v"}}, namespace="ns")
        seen = server.seen[0]
        assert seen.method == "PATCH"
        assert seen.path == "/api/v1/namespaces/ns/configmaps/a"
        assert seen.headers["Content-Type"] == "application/merge-patch+json"
        assert seen.body == {"data": {"k": "v"}}

    async def test_delete_sends_uid_precondition_and_propagation(self, fake: Fake) -> None:
        server, api, _ = fake
        server.script = [ok({})]
        await api.delete(CONFIGMAPS, "a", namespace="ns", uid="u-1")
        assert server.seen[0].body == {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": "Background",
            "preconditions": {"uid": "u-1"},
        }

    async def test_delete_does_not_swallow_not_found(self, fake: Fake) -> None:
        server, api, _ = fake
        server.script = [status(404, "NotFound")]
        with pytest.raises(ApiError) as info:
            await api.delete(CONFIGMAPS, "a", namespace="ns")
        assert info.value.is_not_found

    async def test_selectors_and_names_arrive_as_written(self, fake: Fake) -> None:
        server, api, _ = fake
        server.script = [ok({"metadata": {"resourceVersion": "1"}, "items": []})]
        selector = "app in (a b),tier!=web,training.kubeflow.org/job-name=x+y&z"
        await api.list(CONFIGMAPS, namespace="ns", label_selector=selector)
        server.script = [ok({})]
        await api.get(CONFIGMAPS, "odd name%", namespace="ns")
        listed, got = server.seen
        assert listed.query == {"labelSelector": selector}
        assert got.path == "/api/v1/namespaces/ns/configmaps/odd%20name%25"  # escaped once

    async def test_list_follows_continue_and_fills_kind(self, fake: Fake) -> None:
        server, api, _ = fake
        server.script = [
            ok({"metadata": {"continue": "t1", "resourceVersion": "5"}, "items": [{"a": 1}]}),
            ok({"metadata": {"resourceVersion": "5"}, "items": [{"a": 2}]}),
        ]
        items, rv = await api.list(
            CONFIGMAPS, namespace="ns", label_selector="x=y", resource_version="0", limit=1
        )
        assert rv == "5"
        assert [i["a"] for i in items] == [1, 2]
        assert all(i["kind"] == "ConfigMap" and i["apiVersion"] == "v1" for i in items)
        first, second = (s.query for s in server.seen)
        assert first == {"labelSelector": "x=y", "limit": "1", "resourceVersion": "0"}
        # The apiserver refuses resourceVersion together with continue.
        assert second == {"labelSelector": "x=y", "limit": "1", "continue": "t1"}


class TestWatch:
    async def test_yields_events_and_asks_for_bookmarks(self, fake: Fake) -> None:
        server, api, _ = fake
        events = [
            {"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "7"}}},
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}},
        ]
        server.script = [stream(events)]
        got = [
            e
            async for e in api.watch(
                CONFIGMAPS,
                namespace="ns",
                resource_version="5",
                timeout_seconds=300,
                inactivity_timeout=5,
            )
        ]
        assert got == events
        assert server.seen[0].query == {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": "5",
            "timeoutSeconds": "300",
        }

    async def test_an_event_of_a_large_object_is_one_line_read_whole(self, fake: Fake) -> None:
        """A pod of a 10,000-worker TFJob carries a TF_CONFIG of every host: megabytes."""
        server, api, _ = fake
        big = {"type": "ADDED", "object": {"metadata": {"name": "a"}, "data": "x" * 3_000_000}}
        server.script = [stream([big])]
        got = [
            e
            async for e in api.watch(
                CONFIGMAPS, resource_version="1", timeout_seconds=300, inactivity_timeout=5
            )
        ]
        assert got == [big]

    async def test_error_event_410_raises_gone(self, fake: Fake) -> None:
        server, api, _ = fake
        gone = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
        server.script = [stream([{"type": "ERROR", "object": gone}])]
        with pytest.raises(ApiError) as info:
            async for _ in api.watch(
                CONFIGMAPS, resource_version="1", timeout_seconds=300, inactivity_timeout=5
            ):
                pass
        assert info.value.is_gone

    async def test_silent_stream_raises_inactive(self, fake: Fake) -> None:
        server, api, _ = fake
        first = {"type": "ADDED", "object": {"metadata": {"name": "a"}}}
        server.script = [stream([first], stall=True)]
        got: list[dict[str, Any]] = []
        with pytest.raises(WatchInactive):
            async for event in api.watch(
                CONFIGMAPS, resource_version="1", timeout_seconds=300, inactivity_timeout=0.2
            ):
                got.append(event)
        assert got == [first]

    async def test_unanswered_watch_raises_inactive_without_waiting_for_its_timeout(
        self, fake: Fake
    ) -> None:
        """A watch whose answer never comes (a proxy lost it) is given up after the inactivity
        timeout, not after the socket read timeout of timeoutSeconds + margin (minutes)."""
        server, api, _ = fake

        async def never(request: web.Request) -> web.StreamResponse:
            await asyncio.sleep(30)
            return web.json_response({})

        server.script = [never]
        with pytest.raises(WatchInactive, match="no answer to a watch"):
            async for _ in api.watch(
                CONFIGMAPS, resource_version="1", timeout_seconds=300, inactivity_timeout=0.2
            ):
                pass

    async def test_error_response_raises(self, fake: Fake) -> None:
        server, api, _ = fake
        server.script = [status(403, "Forbidden")]
        with pytest.raises(ApiError) as info:
            async for _ in api.watch(
                CONFIGMAPS, resource_version="1", timeout_seconds=300, inactivity_timeout=5
            ):
                pass
        assert info.value.status == 403


class TestWriteGate:
    """A replica without the Lease sends no write but its Lease renewals, and still reads."""

    async def test_writes_are_refused_on_this_side_while_the_gate_is_closed(
        self, fake: Fake
    ) -> None:
        from jobcontroller.runtime.kube import LEASES, NotLeader

        server, api, _ = fake
        server.script = [ok({"metadata": {"name": "a"}})]
        holds = [False]
        api.write_gate = lambda: holds[0]
        try:
            with pytest.raises(NotLeader):
                await api.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace="ns")
            with pytest.raises(NotLeader):
                await api.delete(CONFIGMAPS, "a", namespace="ns")
            assert server.seen == []
            await api.get(CONFIGMAPS, "a", namespace="ns")
            lease = {"metadata": {"name": "op", "resourceVersion": "1"}}
            await api.replace(LEASES, lease, namespace="ns")
            assert [s.method for s in server.seen] == ["GET", "PUT"]
            holds[0] = True
            await api.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace="ns")
            assert [s.method for s in server.seen] == ["GET", "PUT", "POST"]
        finally:
            api.write_gate = None


async def test_requests_that_can_wait_leave_half_the_burst_to_the_others(fake: Fake) -> None:
    """``backlog`` and ``spare`` keep half the burst: once a burst of creations has spent
    half of it, a write that may wait (a status hold) waits, though a request would still get
    a token at once; the creations have the rest."""
    server, _, metrics = fake
    server.script = [ok({"metadata": {"name": "a"}})]
    api = KubeApi(fake[1].config, qps=0.1, burst=6, metrics=metrics, settings=FAST)
    try:
        assert api.reserve == 3
        assert (api.spare(), api.backlog()) == (3, 0.0)
        for _ in range(3):
            await api.get(CONFIGMAPS, "a", namespace="ns")
        assert api.spare() == 0
        assert api.backlog() > 9  # a token to refill at 0.1/s
        async with asyncio.timeout(1):  # the reserve is still there for requests
            await api.get(CONFIGMAPS, "a", namespace="ns")
        assert len(server.seen) == 4
        assert KubeApi(fake[1].config, qps=20, burst=1).reserve == 0  # nothing to keep
    finally:
        await api.close()


class TestOwnBudget:
    """``with_own_budget``: a second budget of the same size over the same connections."""

    async def test_a_spent_budget_does_not_hold_back_the_other(self, fake: Fake) -> None:
        server, _, metrics = fake
        server.script = [ok({"metadata": {"name": "a"}})]
        base = KubeApi(fake[1].config, qps=1.0, burst=1, metrics=metrics, settings=FAST)
        own = base.with_own_budget()
        try:
            await base.get(CONFIGMAPS, "a", namespace="ns")  # spends base's only token
            assert base.backlog() > 0.5
            async with asyncio.timeout(0.5):  # its own token: no wait behind base's
                await own.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace="ns")
            assert own._connections_pool() is base._connections_pool()
            await own.close()  # shares base's session: closing it closes nothing
            await base.get(CONFIGMAPS, "a", namespace="ns")
            assert [s.method for s in server.seen] == ["GET", "POST", "GET"]
        finally:
            await base.close()

    async def test_it_follows_the_owners_write_gate(self, fake: Fake) -> None:
        from jobcontroller.runtime.kube import NotLeader

        server, api, _ = fake
        server.script = [ok({"metadata": {"name": "a"}})]
        own = api.with_own_budget()
        holds = [True]
        api.write_gate = lambda: holds[0]  # set after the copy, as a later election would
        try:
            holds[0] = False
            with pytest.raises(NotLeader):
                await own.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace="ns")
            holds[0] = True
            await own.create(CONFIGMAPS, {"metadata": {"name": "a"}}, namespace="ns")
            assert [s.method for s in server.seen] == ["POST"]
        finally:
            api.write_gate = None
