"""The hub behind ``kfjob ui``'s jobs page (one list+watch per kind and scope, shared by every
open page) against a real API server: a control plane of its own, since the tests restart the
API server and compact etcd.

- A row's restarts are its pods' container restarts (init containers too), kept as pods change.
- A watch that resumes from a version etcd no longer has (410 Gone) lists again, and the rows
  come out right: nothing lost, nothing left over, and no update for a job that did not change.
- The API server going away and coming back: the watches reconnect, no row is lost meanwhile,
  and what changed after is shown.

"The page" below is what a subscriber (a jobs page's stream) builds from the rows it got at
subscription and every update since.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest_asyncio

from jobcontroller.runtime.apitypes import NAMESPACES, PODS, Resource
from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.controlplane import ControlPlane
from jobcontroller.testing.operator import install_crds
from kfjob.ui.cluster import Cluster
from kfjob.ui.hub import Hub, Subscription
from kfjob.ui.model import JobRow

ROOT = Path(__file__).resolve().parents[2]
PYTORCHJOBS = Resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
Obj = dict[str, Any]


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def own_plane() -> AsyncIterator[ControlPlane]:
    plane = ControlPlane()  # no scheduler, no nodes: pods keep the status the test writes
    await asyncio.to_thread(plane.start)
    try:
        yield plane
    finally:
        await asyncio.to_thread(plane.stop)


@pytest_asyncio.fixture(loop_scope="session")
async def api(own_plane: ControlPlane) -> AsyncIterator[tuple[KubeApi, str]]:
    kube = await KubeApi.from_config(kubeconfig=str(own_plane.kubeconfig), qps=500, burst=500)
    crd = ROOT / "manifests" / "base" / "crds" / "kubeflow.org_pytorchjobs.yaml"
    await install_crds(kube, [crd])
    namespace = f"hub-{uuid.uuid4().hex[:6]}"
    await kube.create(NAMESPACES, {"metadata": {"name": namespace}})
    try:
        yield kube, namespace
    finally:
        await kube.close()


class GatedCluster(Cluster):
    """The real cluster client, whose watch calls wait while ``gate`` is closed (to hold a
    watch at its old resourceVersion while the test moves the server on)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = threading.Event()
        self.gate.set()
        self.held = threading.Event()

    def watch(self, path: str, **kwargs: Any) -> Any:
        if not self.gate.is_set():
            self.held.set()
            self.gate.wait()
        return super().watch(path, **kwargs)


class Page:
    """A subscriber's view: the rows at subscription, then each update applied."""

    def __init__(self, hub: Hub, namespace: str) -> None:
        self.namespace = namespace
        self.sub: Subscription
        self.sub, rows = hub.subscribe()
        self.rows: dict[str, JobRow] = {r.key: r for r in rows}
        self.updates: list[tuple[str, str]] = []

    def drain(self) -> None:
        while not self.sub.queue.empty():
            what, item = self.sub.queue.get_nowait()
            if what == "upsert":
                self.rows[item.key] = item
                self.updates.append((what, item.key))
            else:
                self.rows.pop(item, None)
                self.updates.append((what, item))
        assert not self.sub.dropped

    def shows(self) -> dict[str, tuple[str, int]]:
        self.drain()
        return {
            r.name: (r.state, r.restarts)
            for r in self.rows.values()
            if r.namespace == self.namespace  # the hub watches every namespace
        }


@contextmanager
def hub_on(plane: ControlPlane) -> Iterator[tuple[Hub, GatedCluster]]:
    cluster = GatedCluster(kubeconfig=str(plane.kubeconfig), context=None, namespace=None)
    hub = Hub(cluster, rediscover=3600, backoff=0.1)
    hub.start()
    try:
        assert hub.wait_discovered(30)
        yield hub, cluster
    finally:
        cluster.gate.set()
        hub.stop()
        for thread in hub.threads():
            thread.join(30)


def job(name: str) -> Obj:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "x"}]}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template}}},
    }


async def add_pod(kube: KubeApi, ns: str, job_name: str, pod: str) -> None:
    body = {
        "metadata": {"name": pod, "labels": {"training.kubeflow.org/job-name": job_name}},
        "spec": {
            "initContainers": [{"name": "init", "image": "x"}],
            "containers": [{"name": "pytorch", "image": "x"}],
        },
    }
    await kube.create(PODS, body, namespace=ns)


async def restarted(kube: KubeApi, ns: str, pod: str, *, init: int, main: int) -> None:
    def status(name: str, count: int) -> Obj:
        return {
            "name": name,
            "restartCount": count,
            "ready": False,
            "image": "x",
            "imageID": "",
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        }

    body = {
        "status": {
            "phase": "Running",
            "initContainerStatuses": [status("init", init)],
            "containerStatuses": [status("pytorch", main)],
        }
    }
    await kube.merge_patch(PODS, pod, body, namespace=ns, subresource="status")


async def set_state(kube: KubeApi, ns: str, name: str, state: str) -> None:
    conditions = [{"type": state, "status": "True", "reason": "Test", "message": ""}]
    await kube.merge_patch(
        PYTORCHJOBS,
        name,
        {"status": {"conditions": conditions}},
        namespace=ns,
        subresource="status",
    )


async def until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out: {what}"
        await asyncio.sleep(0.05)


async def test_restarts_are_the_pods_container_restarts(
    own_plane: ControlPlane, api: tuple[KubeApi, str]
) -> None:
    kube, ns = api
    await kube.create(PYTORCHJOBS, job("a"), namespace=ns)
    await kube.create(PYTORCHJOBS, job("b"), namespace=ns)
    with hub_on(own_plane) as (hub, _):
        page = Page(hub, ns)
        await until(lambda: page.shows() == {"a": ("Pending", 0), "b": ("Pending", 0)}, "rows")
        for pod in ("a-master-0", "a-worker-0"):
            await add_pod(kube, ns, "a", pod)
        await add_pod(kube, ns, "gone", "gone-master-0")  # its job is not there: no row
        await restarted(kube, ns, "a-master-0", init=1, main=2)
        await restarted(kube, ns, "a-worker-0", init=0, main=4)
        await restarted(kube, ns, "gone-master-0", init=0, main=9)
        await until(lambda: page.shows()["a"] == ("Pending", 7), "a's restarts summed")
        await restarted(kube, ns, "a-master-0", init=1, main=3)
        await until(lambda: page.shows()["a"] == ("Pending", 8), "a pod restarting again")
        await kube.delete(PODS, "a-worker-0", namespace=ns)
        await until(lambda: page.shows()["a"] == ("Pending", 4), "a pod deleted")
        await kube.create(PYTORCHJOBS, job("gone"), namespace=ns)
        await until(lambda: page.shows().get("gone") == ("Pending", 9), "a job for the pod")
        assert page.shows()["b"] == ("Pending", 0)
        assert set(hub.rows()) == set(page.rows.values())


async def test_a_watch_that_expires_lists_again_and_loses_nothing(
    own_plane: ControlPlane, api: tuple[KubeApi, str]
) -> None:
    kube, ns = api
    for name in ("keep", "change", "remove"):
        await kube.create(PYTORCHJOBS, job(name), namespace=ns)
    await add_pod(kube, ns, "keep", "keep-master-0")
    await restarted(kube, ns, "keep-master-0", init=0, main=1)
    with hub_on(own_plane) as (hub, cluster):
        page = Page(hub, ns)
        before = {"keep": ("Pending", 1), "change": ("Pending", 0), "remove": ("Pending", 0)}
        await until(lambda: page.shows() == before, "the rows")
        page.updates.clear()
        watches = {s: r.stats.watches for s, r in hub.reflectors.items()}

        # The open streams die with the server; the watches are held at their old versions
        # while the server moves on and etcd forgets those versions.
        cluster.gate.clear()
        await asyncio.to_thread(own_plane.restart_apiserver)
        await asyncio.to_thread(cluster.held.wait, 60)
        await kube.create(PYTORCHJOBS, job("new"), namespace=ns)
        await set_state(kube, ns, "change", "Running")
        await kube.delete(PYTORCHJOBS, "remove", namespace=ns)
        await add_pod(kube, ns, "new", "new-master-0")
        await restarted(kube, ns, "new-master-0", init=0, main=2)
        await asyncio.to_thread(own_plane.compact_etcd)
        cluster.gate.set()

        after = {"keep": ("Pending", 1), "change": ("Running", 0), "new": ("Pending", 2)}
        await until(lambda: page.shows() == after, "the rows after the 410")
        stats = {s: r.stats for s, r in hub.reflectors.items()}
        assert all(s.gone >= 1 and s.lists >= 2 for s in stats.values()), stats
        assert all(s.watches > watches[name] for name, s in stats.items()), stats
        # Only what changed was sent: nothing about "keep", "remove" deleted once.
        assert not [u for u in page.updates if u[1].endswith("/keep")], page.updates
        assert [u for u in page.updates if u[0] == "delete"] == [
            ("delete", f"pytorchjobs/{ns}/remove")
        ]
        assert sorted(r.name for r in hub.rows() if r.namespace == ns) == ["change", "keep", "new"]


async def test_the_watches_reconnect_when_the_api_server_drops_them(
    own_plane: ControlPlane, api: tuple[KubeApi, str]
) -> None:
    kube, ns = api
    for name in ("one", "two"):
        await kube.create(PYTORCHJOBS, job(name), namespace=ns)
    with hub_on(own_plane) as (hub, _):
        page = Page(hub, ns)
        await until(lambda: page.shows() == {"one": ("Pending", 0), "two": ("Pending", 0)}, "rows")
        page.updates.clear()
        watches = {s: r.stats.watches for s, r in hub.reflectors.items()}

        await asyncio.to_thread(own_plane.restart_apiserver)  # every open stream is cut
        await kube.create(PYTORCHJOBS, job("three"), namespace=ns)
        await set_state(kube, ns, "one", "Succeeded")
        await add_pod(kube, ns, "two", "two-master-0")
        await restarted(kube, ns, "two-master-0", init=0, main=3)

        after = {"one": ("Succeeded", 0), "two": ("Pending", 3), "three": ("Pending", 0)}
        await until(lambda: page.shows() == after, "the changes after the restart")
        stats = {s: r.stats for s, r in hub.reflectors.items()}
        assert all(s.watches > watches[name] for name, s in stats.items()), stats
        # No row went missing on the way (a delete, then the row again).
        assert not [u for u in page.updates if u[0] == "delete"], page.updates
