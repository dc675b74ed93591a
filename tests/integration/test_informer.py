"""The informer against the real kube-apiserver: store in step, restarts, 410 relists, bookmarks.

Tests that restart the API server or compact etcd use a control plane of their own (etcd and
kube-apiserver only), so the session's cluster is never disturbed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest_asyncio

from jobcontroller.runtime.informer import Informer, InformerSettings
from jobcontroller.runtime.kube import CONFIGMAPS, NAMESPACES, KubeApi
from jobcontroller.runtime.metrics import Metrics
from jobcontroller.testing.controlplane import ControlPlane

Obj = dict[str, Any]


async def until(predicate: Callable[[], bool], *, within: float = 60.0, what: str) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.05)


async def server_state(kube: KubeApi, namespace: str, selector: str) -> dict[str, str]:
    items, _ = await kube.list(CONFIGMAPS, namespace=namespace, label_selector=selector)
    return {f"{namespace}/{i['metadata']['name']}": i["metadata"]["resourceVersion"] for i in items}


def store_state(informer: Informer) -> dict[str, str]:
    return {
        f"{o['metadata']['namespace']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
        for o in informer.store.list()
    }


async def in_step(informer: Informer, kube: KubeApi, namespace: str, selector: str) -> None:
    """Wait until the store holds exactly what the server has (names and resourceVersions)."""
    expected = await server_state(kube, namespace, selector)
    await until(lambda: store_state(informer) == expected, what=f"store == {expected}")


class Calls:
    """Counts handler calls per (kind, name)."""

    def __init__(self, informer: Informer) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()
        informer.add_handlers(
            on_add=lambda o: self._hit("add", o),
            on_update=lambda old, new: self._hit("update", new),
            on_delete=lambda o: self._hit("delete", o),
        )

    def _hit(self, kind: str, obj: Obj) -> None:
        self.counts[(kind, obj["metadata"]["name"])] += 1


def cm(name: str, value: str = "0") -> Obj:
    return {"metadata": {"name": name, "labels": {"informer-test": "yes"}}, "data": {"v": value}}


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def own_plane() -> AsyncIterator[ControlPlane]:
    plane = ControlPlane()
    await asyncio.to_thread(plane.start)
    try:
        yield plane
    finally:
        await asyncio.to_thread(plane.stop)


@pytest_asyncio.fixture(loop_scope="session")
async def own_api(own_plane: ControlPlane) -> AsyncIterator[tuple[KubeApi, str]]:
    api = await KubeApi.from_config(kubeconfig=str(own_plane.kubeconfig), qps=500, burst=500)
    namespace = f"inf-{uuid.uuid4().hex[:6]}"
    await api.create(NAMESPACES, {"metadata": {"name": namespace}})
    try:
        yield api, namespace
    finally:
        await api.close()


async def running(informer: Informer) -> asyncio.Task[None]:
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(informer.wait_synced(), 30)
    return task


async def stopped(informer: Informer, task: asyncio.Task[None]) -> None:
    informer.stop()
    await asyncio.wait_for(task, 10)


async def test_store_follows_creates_updates_and_deletes(kube: KubeApi, namespace: str) -> None:
    await kube.create(CONFIGMAPS, cm("before"), namespace=namespace)
    metrics = Metrics()
    informer = Informer(
        kube, CONFIGMAPS, namespace=namespace, label_selector="informer-test=yes", metrics=metrics
    )
    calls = Calls(informer)
    task = await running(informer)
    try:
        assert set(store_state(informer)) == {f"{namespace}/before"}
        await asyncio.gather(
            *(kube.create(CONFIGMAPS, cm(f"c{i}"), namespace=namespace) for i in range(5))
        )
        await kube.merge_patch(CONFIGMAPS, "c1", {"data": {"v": "1"}}, namespace=namespace)
        await kube.merge_patch(CONFIGMAPS, "before", {"data": {"v": "1"}}, namespace=namespace)
        await kube.delete(CONFIGMAPS, "c2", namespace=namespace)
        # Not matching the selector: never seen.
        await kube.create(CONFIGMAPS, {"metadata": {"name": "other"}}, namespace=namespace)
        await in_step(informer, kube, namespace, "informer-test=yes")
        await until(lambda: calls.counts[("delete", "c2")] == 1, what="delete of c2")
    finally:
        await stopped(informer, task)
    assert informer.store.get(namespace, "c1")["data"] == {"v": "1"}  # type: ignore[index]
    assert calls.counts[("update", "c1")] == 1
    assert calls.counts[("update", "before")] == 1
    assert sum(n for (kind, _), n in calls.counts.items() if kind == "add") == 6
    assert ("add", "other") not in calls.counts
    gauge = metrics.registry.get_sample_value("informer_store_objects", {"resource": "configmaps"})
    assert gauge == 5


async def test_the_initial_state_is_streamed_on_one_watch_without_a_list(
    kubeconfig: str, kube: KubeApi, namespace: str
) -> None:
    """The server streams the initial state (sendInitialEvents, KEP-3157): one WATCH request
    and no LIST, and the same stream goes on with the changes."""
    for i in range(3):
        await kube.create(CONFIGMAPS, cm(f"s{i}"), namespace=namespace)
    metrics = Metrics()
    api = await KubeApi.from_config(kubeconfig=kubeconfig, qps=500, burst=500, metrics=metrics)
    informer = Informer(
        api, CONFIGMAPS, namespace=namespace, label_selector="informer-test=yes", metrics=metrics
    )
    calls = Calls(informer)
    try:
        task = await running(informer)
        try:
            assert set(store_state(informer)) == {f"{namespace}/s{i}" for i in range(3)}
            await kube.merge_patch(CONFIGMAPS, "s1", {"data": {"v": "1"}}, namespace=namespace)
            await until(lambda: calls.counts[("update", "s1")] == 1, what="the update of s1")
            await in_step(informer, kube, namespace, "informer-test=yes")
        finally:
            await stopped(informer, task)
    finally:
        await api.close()

    def requests(verb: str) -> float:
        labels = {"verb": verb, "resource": "configmaps", "code": "200"}
        return metrics.registry.get_sample_value("jobcontroller_api_requests_total", labels) or 0

    assert (requests("GET"), requests("WATCH")) == (0, 1)  # GET: a LIST
    assert [calls.counts[("add", f"s{i}")] for i in range(3)] == [1, 1, 1]
    stats = informer.statistics()
    assert (stats.lists, stats.watches, stats.events) == (1, 1, 1)


async def test_store_survives_an_apiserver_restart(
    own_plane: ControlPlane, own_api: tuple[KubeApi, str]
) -> None:
    api, namespace = own_api
    for i in range(3):
        await api.create(CONFIGMAPS, cm(f"a{i}"), namespace=namespace)
    informer = Informer(api, CONFIGMAPS, namespace=namespace, label_selector="informer-test=yes")
    calls = Calls(informer)
    task = await running(informer)
    try:
        await asyncio.to_thread(own_plane.restart_apiserver)
        await api.create(CONFIGMAPS, cm("after"), namespace=namespace)
        await api.merge_patch(CONFIGMAPS, "a0", {"data": {"v": "1"}}, namespace=namespace)
        await api.delete(CONFIGMAPS, "a1", namespace=namespace)
        await in_step(informer, api, namespace, "informer-test=yes")
    finally:
        await stopped(informer, task)
    assert informer.statistics().watch_restarts >= 1
    for name in ("a0", "a1", "a2", "after"):
        assert calls.counts[("add", name)] == 1, calls.counts
    assert calls.counts[("update", "a0")] == 1
    assert calls.counts[("delete", "a1")] == 1
    assert calls.counts[("update", "a2")] == 0


async def test_gone_relists_once_without_losing_or_repeating_events(
    own_plane: ControlPlane, own_api: tuple[KubeApi, str]
) -> None:
    """The informer is held inside a handler while the server moves on and etcd is compacted;
    when released, its watch resumes from a compacted resourceVersion and gets 410 Gone."""
    api, namespace = own_api
    for name in ("keep", "change", "remove"):
        await api.create(CONFIGMAPS, cm(name), namespace=namespace)
    metrics = Metrics()
    informer = Informer(
        api,
        CONFIGMAPS,
        namespace=namespace,
        label_selector="informer-test=yes",
        metrics=metrics,
        settings=InformerSettings(backoff_initial=0.1),
    )
    calls = Calls(informer)
    gate = asyncio.Event()
    held = asyncio.Event()

    async def hold(obj: Obj) -> None:
        if obj["metadata"]["name"] == "trigger":
            held.set()
            await gate.wait()

    informer.add_handlers(on_add=hold)
    task = await running(informer)
    try:
        await api.create(CONFIGMAPS, cm("trigger"), namespace=namespace)
        await asyncio.wait_for(held.wait(), 30)
        # The open stream dies with the server; what follows reaches the informer only by LIST.
        await asyncio.to_thread(own_plane.restart_apiserver)
        await api.create(CONFIGMAPS, cm("new"), namespace=namespace)
        await api.merge_patch(CONFIGMAPS, "change", {"data": {"v": "1"}}, namespace=namespace)
        await api.delete(CONFIGMAPS, "remove", namespace=namespace)
        await asyncio.to_thread(own_plane.compact_etcd)
        gate.set()
        await in_step(informer, api, namespace, "informer-test=yes")
    finally:
        await stopped(informer, task)

    relists = metrics.registry.get_sample_value(
        "informer_relists_total", {"resource": "configmaps"}
    )
    assert relists == 2  # the initial LIST and exactly one after 410
    gone = metrics.registry.get_sample_value(
        "informer_watch_restarts_total", {"resource": "configmaps", "reason": "gone"}
    )
    assert gone == 1
    assert calls.counts == Counter(
        {
            ("add", "keep"): 1,
            ("add", "change"): 1,
            ("add", "remove"): 1,
            ("add", "trigger"): 1,
            ("add", "new"): 1,
            ("update", "change"): 1,
            ("delete", "remove"): 1,
        }
    )


async def test_bookmarks_advance_the_resource_version(kube: KubeApi, namespace: str) -> None:
    """A bookmark carries the server's latest version even when nothing in our scope changed.

    The watch timeout is short because the server sends a bookmark 2 s before it ends a watch
    (besides the periodic one each minute).
    """
    other = f"{namespace[:50]}-b"
    await kube.create(NAMESPACES, {"metadata": {"name": other}})
    informer = Informer(
        kube,
        CONFIGMAPS,
        namespace=namespace,
        label_selector="informer-test=yes",
        settings=InformerSettings(min_watch_timeout=4, max_watch_timeout=4),
    )
    task = await running(informer)
    changes: list[int] = []

    async def change_elsewhere() -> None:
        # Repeatedly: the server drops a bookmark whose version the watch had already reached
        # (by skipping a filtered-out event), so one change alone may race the watch's start.
        for i in range(60):
            created = await kube.create(CONFIGMAPS, cm(f"e{i}"), namespace=other)
            changes.append(int(created["metadata"]["resourceVersion"]))
            await asyncio.sleep(0.5)

    changer = asyncio.create_task(change_elsewhere())
    try:
        start_rv = int(informer.resource_version)
        await until(lambda: bool(changes), what="a change elsewhere")
        assert changes[0] > start_rv
        await until(
            lambda: int(informer.resource_version) >= changes[0],
            within=30,
            what=f"resourceVersion >= {changes[0]}",
        )
    finally:
        changer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await changer
        await stopped(informer, task)
        await kube.delete(NAMESPACES, other)
    stats = informer.statistics()
    assert stats.bookmarks >= 1
    assert stats.events == 0  # only a bookmark can have moved it
    assert stats.objects == 0
