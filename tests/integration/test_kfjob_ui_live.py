"""``kfjob ui``'s job page live from watches, against the real API server (no operator: the
test writes the job, its pods and events as the operator and the kubelet would).

- One event stream per open job page carries the job's, its pods' and its events' changes,
  each seen by a watch (no look again every second): a pod created, the job's status
  changed, an event about the job and one about a pod all arrive on the open stream.
- The watches behind a page end when the page closes its stream: no thread and no API
  stream left behind; the same for the jobs page's subscription, and for a log panel's
  stream (its pod on a node that serves logs: ``jobcontroller.testing.lognode``).
- A deleted job ends its page's stream with "gone".
- The actions offered follow what the API server says the user may do
  (SelfSubjectAccessReview): a view-only user's buttons are disabled, saying why; an admin's
  are not.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from jobcontroller.runtime.apitypes import EVENTS, PODS, Resource
from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.binaries import find_binaries
from jobcontroller.testing.controlplane import ControlPlane
from jobcontroller.testing.lognode import LogNode
from jobcontroller.testing.waiting import wait_for
from kfjob.ui import streams
from kfjob.ui.cluster import Cluster
from kfjob.ui.jobfeed import JobFeed
from kfjob.ui.server import UiServer

PYTORCHJOBS = Resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
ROLES = Path(__file__).resolve().parents[2] / "manifests" / "base" / "user-roles.yaml"
Obj = dict[str, Any]


class Sse:
    """A page's event stream, read as a browser's EventSource does (one event at a time)."""

    def __init__(self, server: UiServer, path: str) -> None:
        host, port = server.server_address[:2]
        self.conn = http.client.HTTPConnection(str(host), int(port), timeout=60)
        self.conn.request("GET", path, headers={"Accept": "text/event-stream"})
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.read()

    def next(self) -> tuple[str, Any]:
        event, data = "", ""
        while True:
            line = self.resp.fp.readline().decode()
            assert line, "the stream ended"
            line = line.rstrip("\n")
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
            elif not line and event:
                return event, json.loads(data)

    def until(self, what: str, check: Callable[[str, Any], bool]) -> tuple[str, Any]:
        seen = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            event, data = self.next()
            seen.append(event)
            if check(event, data):
                return event, data
        raise AssertionError(f"{what}: not on the stream (saw {seen})")

    def close(self) -> None:
        self.resp.close()
        self.conn.close()


@contextlib.contextmanager
def ui(kubeconfig: str | Path, namespace: str | None = None) -> Iterator[UiServer]:
    cluster = Cluster(kubeconfig=str(kubeconfig), context=None, namespace=namespace)
    server = UiServer(cluster, address="127.0.0.1", port=0, context="test")
    server.start()
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}).start()
    try:
        yield server
    finally:
        server.close()


def until(check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.05)


def pytorchjob(name: str) -> Obj:
    container = {"name": "pytorch", "image": "pytorch/pytorch:2.3"}
    template = {"spec": {"containers": [container]}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template}}},
    }


def pod(job: str, name: str) -> Obj:
    return {
        "metadata": {"name": name, "labels": {"training.kubeflow.org/job-name": job}},
        # No node exists for it: it stays Pending, and nothing but the test changes it.
        "spec": {
            "containers": [{"name": "pytorch", "image": "x"}],
            "nodeSelector": {"kfjob-ui-test": "nowhere"},
        },
    }


def event(namespace: str, name: str, kind: str, about: str, reason: str) -> Obj:
    return {
        "metadata": {"name": name},
        "involvedObject": {"kind": kind, "name": about, "namespace": namespace},
        "reason": reason,
        "message": f"{reason} for {about}",
        "type": "Normal",
        "source": {"component": "test"},
        "lastTimestamp": "2026-01-01T00:00:00Z",
    }


@pytest.fixture(scope="module")
def log_node(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LogNode]:
    node = LogNode(
        control_plane, directory=tmp_path_factory.mktemp("lognode"), name="kwok-logs-ui-live"
    )
    node.start()
    try:
        yield node
    finally:
        node.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def job(kube: KubeApi, kubeflow_crds: list[str], namespace: str) -> AsyncIterator[str]:
    await kube.create(PYTORCHJOBS, pytorchjob("live"), namespace=namespace)
    await kube.create(PODS, pod("live", "live-master-0"), namespace=namespace)
    yield "live"


def sections(stream: Sse, check: Callable[[dict[str, str]], bool], what: str) -> dict[str, str]:
    _, data = stream.until(what, lambda e, d: e == "sections" and check(d))
    return dict(data)


async def test_the_job_page_follows_the_job_its_pods_and_events_over_one_stream(
    kube: KubeApi, kubeconfig: str, namespace: str, job: str
) -> None:
    with ui(kubeconfig) as server:
        stream = Sse(server, f"/jobs/pytorchjobs/{namespace}/{job}/stream")
        try:
            first = await asyncio.to_thread(
                sections, stream, lambda d: "pods" in d, "the first sections"
            )
            assert "live-master-0" in first["pods"]
            assert "Pending" in first["summary"]

            await kube.create(PODS, pod(job, "live-worker-0"), namespace=namespace)
            await asyncio.to_thread(
                sections, stream, lambda d: "live-worker-0" in d.get("pods", ""), "a new pod"
            )
            status = {"conditions": [{"type": "Created", "status": "True", "reason": "Made"}]}
            await kube.merge_patch(
                PYTORCHJOBS, job, {"status": status}, namespace=namespace, subresource="status"
            )
            await asyncio.to_thread(
                sections, stream, lambda d: "Created" in d.get("summary", ""), "the job's status"
            )
            await kube.create(
                EVENTS, event(namespace, "e1", "PyTorchJob", job, "JobReason"), namespace=namespace
            )
            await kube.create(
                EVENTS,
                event(namespace, "e2", "Pod", "live-worker-0", "PodReason"),
                namespace=namespace,
            )
            await kube.create(
                EVENTS, event(namespace, "e3", "Pod", "other-0", "NotOurs"), namespace=namespace
            )
            got = await asyncio.to_thread(
                sections,
                stream,
                lambda d: "PodReason" in d.get("events", "") and "JobReason" in d["events"],
                "both events",
            )
            assert "NotOurs" not in got["events"]

            await kube.delete(PYTORCHJOBS, job, namespace=namespace)
            _, gone = await asyncio.to_thread(stream.until, "gone", lambda e, d: e == "gone")
            assert "deleted" in gone["message"]
        finally:
            stream.close()


async def test_closing_the_page_ends_its_watches(
    kube: KubeApi, kubeconfig: str, namespace: str, job: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No heartbeat within the test: only the page hanging up can end the streams (a write to
    # a closed connection would end them too, later).
    monkeypatch.setattr(streams, "HEARTBEAT", 3600.0)
    with ui(kubeconfig) as server:
        feeds: list[JobFeed] = []
        server.on_feed = feeds.append
        before = {t.ident for t in threading.enumerate()}
        stream = Sse(server, f"/jobs/pytorchjobs/{namespace}/{job}/stream")
        await asyncio.to_thread(sections, stream, lambda d: "pods" in d, "the first sections")
        jobs = Sse(server, "/events/jobs")
        await asyncio.to_thread(jobs.until, "the rows", lambda e, d: e == "reset")
        [feed] = feeds
        threads = feed.threads()
        assert len(threads) == 4 and all(t.is_alive() for t in threads)
        # The page is sent once every source has listed; the watches open right after.
        await asyncio.to_thread(
            until,
            lambda: all(r.stats.watches >= 1 for r in feed.reflectors.values()),
            "the four watches open",
        )
        assert len(server.streams) == 2

        stream.close()
        jobs.close()
        await asyncio.to_thread(
            until, lambda: not any(t.is_alive() for t in threads), "the watch threads end"
        )
        await asyncio.to_thread(until, lambda: not server.streams, "both streams end")
        assert not server.hub._subs  # the jobs page's subscription too
        # Nothing else this page started is left: the threads now are those from before, and
        # the hub's (shared by every page, they outlive it).
        hub_threads = {t.ident for t in server.hub.threads()}
        left = {t for t in threading.enumerate() if t.ident not in before | hub_threads}
        assert not [t for t in left if t.name.startswith("kfjob-ui")], left


async def test_closing_the_log_panel_ends_the_logs_api_stream(
    kube: KubeApi,
    kubeconfig: str,
    namespace: str,
    log_node: LogNode,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(streams, "HEARTBEAT", 3600.0)  # only hanging up ends it
    body = {"metadata": {"name": "logs-0"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    await kube.create(PODS, log_node.place(body), namespace=namespace)
    await wait_for(
        kube,
        PODS,
        "logs-0",
        namespace=namespace,
        until=lambda p: p is not None and p["status"].get("phase") == "Running",
    )
    log_node.write("epoch 1")
    with ui(kubeconfig) as server:
        stream = Sse(server, f"/logs/{namespace}/logs-0?follow=1&container=c")
        try:
            await asyncio.to_thread(
                stream.until, "the log", lambda e, d: e == "lines" and "epoch 1" in d
            )
            log_node.write("epoch 2")  # followed: arrives on the open stream
            await asyncio.to_thread(
                stream.until, "a new line", lambda e, d: e == "lines" and "epoch 2" in d
            )
            [reader] = [t for t in threading.enumerate() if t.name.startswith("kfjob-ui-log")]
        finally:
            stream.close()
        await asyncio.to_thread(until, lambda: not reader.is_alive(), "the API stream ends")
        await asyncio.to_thread(until, lambda: not server.streams, "the page's stream ends")


async def test_actions_are_offered_as_rbac_allows(
    kube: KubeApi,
    kubeconfig: str,
    control_plane: ControlPlane,
    namespace: str,
    job: str,
) -> None:
    await _kubectl(kubeconfig, "apply", "-f", str(ROLES))  # the roles users are given
    user = f"viewer-{namespace}"
    await _kubectl(
        kubeconfig, "create", "rolebinding", "viewer", "--clusterrole=view", f"--user={user}",
        "-n", namespace,
    )  # fmt: skip
    viewer = control_plane.user_kubeconfig(user=user)
    # kubeflow-training-view reaches `view` through the controller-manager's aggregation.
    deadline = time.monotonic() + 60
    while "yes" not in await _kubectl(
        str(viewer), "auth", "can-i", "get", "pytorchjobs.kubeflow.org", "-n", namespace, ok=(0, 1)
    ):
        assert time.monotonic() < deadline, "view never aggregated kubeflow-training-view"
        await asyncio.sleep(0.2)
    for kubeconfig_, may in ((kubeconfig, True), (viewer, False)):
        with ui(kubeconfig_, namespace=namespace) as server:
            stream = Sse(server, f"/jobs/pytorchjobs/{namespace}/{job}/stream")
            try:
                summary = (
                    await asyncio.to_thread(
                        sections, stream, lambda d: "summary" in d, "the summary"
                    )
                )["summary"]
            finally:
                stream.close()
        buttons = summary.count("<button")
        assert buttons == 2  # suspend, delete
        if may:
            assert " disabled" not in summary, summary
        else:
            assert summary.count(" disabled") == 2, summary
            assert "your RBAC does not let you patch pytorchjobs.kubeflow.org" in summary
            assert "your RBAC does not let you delete pytorchjobs.kubeflow.org" in summary
        asked = server.access.asked
        assert asked == 2  # patch and delete, once each: the rest from the cache


async def _kubectl(kubeconfig: str, *args: str, ok: tuple[int, ...] = (0,)) -> str:
    proc = await asyncio.create_subprocess_exec(
        find_binaries()["kubectl"],
        f"--kubeconfig={kubeconfig}",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode in ok, err.decode()
    return out.decode()
