"""Builders and readers shared by the MPIJob integration tests (test_mpijob_*.py)."""

from __future__ import annotations

import copy
from typing import Any

from jobcontroller.runtime.kube import EVENTS, JOBS, PODS, KubeApi, Resource
from jobcontroller.testing.pods import simulate
from jobcontroller.testing.waiting import wait_for, wait_for_list

MPIJOBS = Resource("kubeflow.org", "v2beta1", "MPIJob", "mpijobs")
#: Keeps a pod Pending: no node has this label, so tests decide when it runs.
UNSCHEDULABLE = {"nodeSelector": {"mpijob-test/never": "true"}}


def mpijob(
    name: str,
    *,
    workers: int = 2,
    launcher_exit: int | None = 0,
    run_for: str = "2s",
    worker_spec: dict[str, Any] | None = None,
    launcher_restart: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """An MPIJob whose launcher exits with ``launcher_exit`` after ``run_for`` (None: runs
    until deleted) and whose workers run until deleted (their sshd never exits)."""
    launcher_template: dict[str, Any] = {
        "spec": {"containers": [{"name": "launcher", "image": "mpi:latest", "command": ["mpirun"]}]}
    }
    if launcher_exit is not None:
        simulate(launcher_template, launcher_exit, run_for=run_for)
    worker_template: dict[str, Any] = {
        "spec": {"containers": [{"name": "worker", "image": "mpi:latest"}], **(worker_spec or {})}
    }
    launcher: dict[str, Any] = {"replicas": 1, "template": launcher_template}
    if launcher_restart:
        launcher["restartPolicy"] = launcher_restart
    replica_specs: dict[str, Any] = {"Launcher": launcher}
    if workers:
        replica_specs["Worker"] = {"replicas": workers, "template": worker_template}
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {**copy.deepcopy(spec), "mpiReplicaSpecs": replica_specs},
    }


def condition(job: dict[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    for cond in ((job or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] == ctype:
            return dict(cond)
    return None


def is_true(job: dict[str, Any] | None, ctype: str) -> bool:
    cond = condition(job, ctype)
    return cond is not None and cond["status"] == "True"


async def wait_condition(
    kube: KubeApi, name: str, ctype: str, *, namespace: str, timeout: float = 30
) -> dict[str, Any]:
    job = await wait_for(
        kube,
        MPIJOBS,
        name,
        namespace=namespace,
        until=lambda j: is_true(j, ctype),
        timeout=timeout,
    )
    assert job is not None
    return job


async def worker_pods(
    kube: KubeApi, namespace: str, *, count: int, phase: str | None = None
) -> dict[str, dict[str, Any]]:
    """Wait for exactly ``count`` worker pods (all in ``phase`` when given), by name."""
    pods = await wait_for_list(
        kube,
        PODS,
        namespace=namespace,
        label_selector="training.kubeflow.org/job-role=worker",
        until=lambda items: (
            len(items) == count
            and all(phase is None or p.get("status", {}).get("phase") == phase for p in items)
        ),
        timeout=30,
    )
    return {p["metadata"]["name"]: p for p in pods}


async def launcher_job(kube: KubeApi, name: str, *, namespace: str) -> dict[str, Any]:
    job = await wait_for(
        kube, JOBS, f"{name}-launcher", namespace=namespace, until=lambda j: j is not None
    )
    assert job is not None
    return job


async def wait_for_event(kube: KubeApi, namespace: str, reason: str) -> None:
    """Wait until an Event with ``reason`` exists: the recorder sends Events from a background
    task, so they may trail the status write that the test saw first."""
    await wait_for_list(
        kube,
        EVENTS,
        namespace=namespace,
        until=lambda events: any(e.get("reason") == reason for e in events),
        timeout=20,
        what=f"an event with reason {reason}",
    )
