"""Kueue end to end, for every kind we ship: Kueue (built from its Go module by
hack/build-kueue.sh, run by the ``kueue`` fixture) queues, admits and preempts our jobs, and our
operators honour what it decides through ``runPolicy.suspend``.

Each test gets a ClusterQueue whose quota (1 CPU per pod) fits exactly one job of its kind, a
LocalQueue, and that kind's operator running in-process for its namespace.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
from kueue_kit import TIMEOUT, WORKLOADS, condition, is_true, timestamp, wait_workload, workload_of
from simulated_jobs import SimulatedJob, simulated_jobs

from jobcontroller.runtime.kube import PODS, KubeApi
from jobcontroller.testing.kueue import PRIORITY_LABEL, QUEUE_LABEL, Kueue
from jobcontroller.testing.operator import RunningController, running
from jobcontroller.testing.pods import sim_annotations
from jobcontroller.testing.waiting import wait_for, wait_for_list
from training_operator.__main__ import build_controllers

Obj = dict[str, Any]
JOBS = {job.resource.kind: job for job in simulated_jobs().values()}
KINDS = sorted(JOBS)


def _pods_per_job(sim: SimulatedJob) -> int:
    field = next(iter(sim.body["spec"]))
    return sum(int(r["replicas"]) for r in sim.body["spec"][field].values())


def _job(
    sim: SimulatedJob,
    name: str,
    queue: str,
    *,
    run_for: str,
    priority: str | None = None,
) -> Obj:
    """The kind's small job, 1 CPU per pod, each pod succeeding ``run_for`` after it starts."""
    body: Obj = copy.deepcopy(sim.body)
    body["metadata"] = {"name": name, "labels": {QUEUE_LABEL: queue}}
    if priority:
        body["metadata"]["labels"][PRIORITY_LABEL] = priority
    field = next(iter(body["spec"]))
    for spec in body["spec"][field].values():
        template = spec["template"]
        template["metadata"]["annotations"] = sim_annotations(0, run_for=run_for)
        for container in template["spec"]["containers"]:
            container["resources"] = {"requests": {"cpu": "1", "memory": "64Mi"}}
    return body


def _suspended(job: Obj | None) -> bool:
    return bool(((job or {}).get("spec") or {}).get("runPolicy", {}).get("suspend"))


async def _job_pods(kube: KubeApi, ns: str, name: str) -> list[Obj]:
    items, _ = await kube.list(PODS, namespace=ns)
    return [
        p
        for p in items
        if p["metadata"]["name"].startswith(f"{name}-")
        and not p["metadata"].get("deletionTimestamp")
    ]


async def _wait_pods_running(kube: KubeApi, ns: str, name: str, count: int) -> list[Obj]:
    def ok(items: list[Obj]) -> bool:
        mine = [
            p
            for p in items
            if p["metadata"]["name"].startswith(f"{name}-")
            and not p["metadata"].get("deletionTimestamp")
        ]
        return len(mine) == count and all(
            (p.get("status") or {}).get("phase") == "Running" for p in mine
        )

    return await wait_for_list(
        kube, PODS, namespace=ns, until=ok, timeout=TIMEOUT, what=f"{count} running pods of {name}"
    )


async def _wait_job(kube: KubeApi, sim: SimulatedJob, ns: str, name: str, ctype: str) -> Obj:
    got = await wait_for(
        kube,
        sim.resource,
        name,
        namespace=ns,
        until=lambda j: is_true(j, ctype),
        timeout=TIMEOUT,
        what=f"{sim.resource.kind} {name} {ctype}",
    )
    assert got is not None
    return got


@pytest_asyncio.fixture(loop_scope="session")
async def operator(
    request: pytest.FixtureRequest, kubeconfig: str, namespace: str
) -> AsyncIterator[RunningController]:
    kind: str = request.param
    (controller,) = build_controllers([f"--enable-scheme={kind.lower()}"])
    async with running(kubeconfig, controller, namespace=namespace) as op:
        yield op


@pytest.fixture
def kq(kubeflow_crds: list[str], kueue: Kueue) -> Kueue:
    """The session's Kueue, started after the kubeflow.org CRDs are in (so that its
    integrations start at once rather than after a backoff)."""
    return kueue


@pytest.fixture
def queue(kq: Kueue, namespace: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A LocalQueue in the test's namespace whose ClusterQueue fits exactly one job of the
    kind under test."""
    sim = JOBS[request.node.callspec.params["operator"]]
    name = kq.queue(namespace, cpu=_pods_per_job(sim))
    yield name
    kq.delete_queue(namespace)


@pytest.mark.parametrize("operator", KINDS, indirect=True)
async def test_a_queued_job_is_admitted_runs_and_frees_its_quota_for_the_next(
    kube: KubeApi, namespace: str, queue: str, operator: RunningController
) -> None:
    ns = namespace
    sim = JOBS[operator.controller.kind]
    pods = _pods_per_job(sim)

    # Kueue's webhook suspends the job at creation; admission unsuspends it.
    first = await kube.create(sim.resource, _job(sim, "first", queue, run_for="5s"), namespace=ns)
    assert _suspended(first), first["spec"]
    await wait_workload(kube, ns, first, "Admitted")
    await _wait_pods_running(kube, ns, "first", pods)
    running_first = await _wait_job(kube, sim, ns, "first", "Running")
    assert not _suspended(running_first)

    # A second one does not fit while the first holds the quota: it waits, suspended, no pods.
    second = await kube.create(sim.resource, _job(sim, "second", queue, run_for="1s"), namespace=ns)
    assert _suspended(second)
    wl = await workload_of(kube, ns, second)
    await asyncio.sleep(1.0)
    wl = await kube.get(WORKLOADS, wl["metadata"]["name"], namespace=ns)
    assert not is_true(wl, "QuotaReserved") and not is_true(wl, "Admitted"), wl.get("status")
    assert _suspended(await kube.get(sim.resource, "second", namespace=ns))
    assert await _job_pods(kube, ns, "second") == []

    # The first finishes; its Workload is Finished and the quota goes to the second.
    await _wait_job(kube, sim, ns, "first", "Succeeded")
    await wait_workload(kube, ns, first, "Finished")
    await wait_workload(kube, ns, second, "Admitted")
    done = await _wait_job(kube, sim, ns, "second", "Succeeded")
    assert not _suspended(done)
    await wait_workload(kube, ns, second, "Finished")


@pytest.mark.parametrize("operator", KINDS, indirect=True)
async def test_a_higher_priority_job_preempts_a_running_one_which_resumes_later(
    kube: KubeApi, kq: Kueue, namespace: str, queue: str, operator: RunningController
) -> None:
    ns = namespace
    sim = JOBS[operator.controller.kind]
    pods = _pods_per_job(sim)
    low_class = kq.priority_class("e2e-low", 100)
    high_class = kq.priority_class("e2e-high", 1000)

    low = await kube.create(
        sim.resource, _job(sim, "low", queue, run_for="8s", priority=low_class), namespace=ns
    )
    await wait_workload(kube, ns, low, "Admitted")
    await _wait_pods_running(kube, ns, "low", pods)
    started = (await _wait_job(kube, sim, ns, "low", "Running"))["status"]["startTime"]
    # startTime has one-second resolution: preempt in a later second, so a startTime that
    # was not reset on resume shows.
    await asyncio.sleep(
        max(0.0, (timestamp(started) - dt.datetime.now(dt.UTC)).total_seconds() + 1.05)
    )

    high = await kube.create(
        sim.resource, _job(sim, "high", queue, run_for="2s", priority=high_class), namespace=ns
    )
    # Kueue evicts the low one and suspends it; our operator stops its pods.
    evicted = condition(await wait_workload(kube, ns, low, "Evicted"), "Evicted")
    assert evicted is not None and evicted["reason"] == "Preempted", evicted
    suspended = await _wait_job(kube, sim, ns, "low", "Suspended")
    assert _suspended(suspended)
    await wait_for_list(
        kube,
        PODS,
        namespace=ns,
        until=lambda items: not [p for p in items if p["metadata"]["name"].startswith("low-")],
        timeout=TIMEOUT,
        what="the preempted job's pods gone",
    )
    await wait_workload(kube, ns, high, "Admitted")
    await _wait_job(kube, sim, ns, "high", "Succeeded")
    await wait_workload(kube, ns, high, "Finished")

    # Then the low one is admitted again, resumes with a fresh startTime, and succeeds.
    await wait_workload(kube, ns, low, "Admitted")
    await _wait_pods_running(kube, ns, "low", pods)
    resumed = await _wait_job(kube, sim, ns, "low", "Running")
    assert not _suspended(resumed)
    resumed_cond = condition(resumed, "Suspended")
    assert resumed_cond is not None and resumed_cond["status"] == "False", resumed_cond
    assert timestamp(resumed["status"]["startTime"]) > timestamp(started), (
        started,
        resumed["status"],
    )
    await _wait_job(kube, sim, ns, "low", "Succeeded")
    await wait_workload(kube, ns, low, "Finished")
