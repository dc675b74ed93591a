"""What an MPIJob's life costs in status writes on a real API server: one per condition users
see (Created, Running, Succeeded), the replica counters riding along with them, as
mpi-operator's slower queue writes them; not one more per step of the start (workers running,
launcher Job created, its pod pending, its pod ended before the Job's verdict)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from mpijob_fixtures import MPIJOBS, mpijob, wait_condition

from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.operator import running
from mpi_operator.controller import MPIJobController


async def _statuses(kube: KubeApi, namespace: str, rv: str, out: list[dict[str, Any]]) -> None:
    """Each distinct status the job is stored with, in order."""
    async for event in kube.watch(
        MPIJOBS,
        namespace=namespace,
        resource_version=rv,
        timeout_seconds=300,
        inactivity_timeout=300,
    ):
        status = (event.get("object") or {}).get("status") or {}
        if event.get("type") in ("ADDED", "MODIFIED") and (not out or out[-1] != status):
            out.append(status)


def _true(status: dict[str, Any]) -> list[str]:
    return [c["type"] for c in status.get("conditions") or () if c["status"] == "True"]


async def test_an_mpijob_is_written_once_per_condition_it_reaches(
    kube: KubeApi,
    kubeconfig: str,
    kubeflow_crds: list[str],
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # However slow this machine is today, the start's steps fall within the hold.
    monkeypatch.setattr("jobcontroller.controller.status.STATUS_COALESCE_SECONDS", 120.0)
    ns = namespace
    _, rv = await kube.list(MPIJOBS, namespace=ns)
    seen: list[dict[str, Any]] = []
    watcher = asyncio.create_task(_statuses(kube, ns, rv, seen))
    try:
        async with running(kubeconfig, MPIJobController()):
            await kube.create(MPIJOBS, mpijob("pi", workers=2), namespace=ns)
            await wait_condition(kube, "pi", "Succeeded", namespace=ns)
            await asyncio.sleep(1.0)  # a write that trails the verdict would show by now
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    written = [s for s in seen if s]  # the job as created has no status
    assert [_true(s) for s in written] == [
        ["Created"],
        ["Created", "Running"],
        ["Created", "Succeeded"],
    ], written  # every status as stored, to tell a counter from a message or a second writer
    running_status = written[1]["replicaStatuses"]
    assert running_status["Worker"]["active"] == 2  # the counters came with Running
    assert running_status["Launcher"]["active"] == 1
