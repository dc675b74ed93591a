"""Running a job controller in-process against a real apiserver, for integration tests.

``running(kubeconfig, controller)`` starts a :class:`~jobcontroller.runtime.manager.Manager`
with that one controller (its own API client, metrics registry and event recorder), waits
until its caches have synced, and stops it (draining in-flight reconciles) on exit. A test
then creates jobs with ``kube`` and waits for what the operator does, exactly as a user would.
``install_crds`` applies CRD manifests and waits until they are Established.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobcontroller.controller import Reconciler
from jobcontroller.runtime.events import EventRecorder
from jobcontroller.runtime.kube import CRDS, ApiError, KubeApi
from jobcontroller.runtime.manager import Manager
from jobcontroller.runtime.metrics import Metrics
from jobcontroller.testing import yamlfast
from jobcontroller.testing.waiting import wait_for

__all__ = ["RunningController", "install_crds", "running"]


@dataclass
class RunningController:
    controller: Reconciler[Any]
    manager: Manager
    api: KubeApi
    metrics: Metrics

    def crash(self) -> None:
        """Stop the operator as a SIGKILL would, as far as the API server can tell: in-flight
        reconciles are cancelled at their next await, so a write not yet sent is never sent.
        Call it from inside an API call (a wrapped client method) to crash at that instant."""
        self.manager.stop(force=True)

    def counter(self, name: str, **labels: str) -> float:
        """Current value of a metric sample (0 when absent), e.g. ``jobs_created_total``."""
        value = self.metrics.registry.get_sample_value(name, labels)
        return float(value or 0.0)

    async def settled_counter(
        self, name: str, expected: float, *, within: float = 10.0, **labels: str
    ) -> float:
        """The counter once it has reached ``expected`` (or after ``within`` seconds).

        A job's terminal counters are incremented when the operator has read back its own
        status write, which a test watching the API can see a moment earlier.
        """
        deadline = asyncio.get_running_loop().time() + within
        while self.counter(name, **labels) < expected:
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.05)
        return self.counter(name, **labels)


@contextlib.asynccontextmanager
async def running(
    kubeconfig: str,
    controller: Reconciler[Any],
    *,
    namespace: str = "",
    workers: int = 4,
    qps: float = 200.0,
    burst: int = 400,
) -> AsyncIterator[RunningController]:
    """``qps``/``burst``: the operator's client-side limit (a low one makes a backlog)."""
    metrics = Metrics()
    api = await KubeApi.from_config(kubeconfig=kubeconfig, qps=qps, burst=burst, metrics=metrics)
    events = EventRecorder(api, component=controller.controller_name, metrics=metrics)
    manager = Manager(
        api,
        component=controller.controller_name,
        metrics=metrics,
        namespace=namespace,
        workers=workers,
        events=events,
        drain_timeout=10.0,
    )
    manager.add(controller)
    task = asyncio.create_task(manager.run(), name="manager")
    try:
        while not manager.synced:
            if task.done():
                task.result()  # raises the startup error
            await asyncio.sleep(0.05)
        yield RunningController(controller=controller, manager=manager, api=api, metrics=metrics)
    finally:
        manager.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 30)
        await api.close()


def load_manifests(paths: Iterable[Path]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in paths:
        docs += yamlfast.load_all(path.read_text())
    return docs


async def install_crds(kube: KubeApi, paths: Iterable[Path]) -> list[str]:
    """Create (or update) the CRDs in ``paths`` and wait until each is Established."""
    names: list[str] = []
    for crd in load_manifests(paths):
        name = crd["metadata"]["name"]
        try:
            await kube.create(CRDS, crd)
        except ApiError as exc:
            if not exc.is_already_exists:
                raise
            current = await kube.get(CRDS, name)
            crd["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            await kube.replace(CRDS, crd)
        names.append(name)
    for name in names:
        await wait_for(
            kube,
            CRDS,
            name,
            until=lambda o: (
                o is not None
                and any(
                    c.get("type") == "Established" and c.get("status") == "True"
                    for c in (o.get("status") or {}).get("conditions") or []
                )
            ),
            timeout=30,
        )
    return names
