"""Suspend and resume (Kueue's way of queueing a job), and jobs managed by another controller.

Suspending removes every pod and Service whatever the cleanPodPolicy, so the resources are
really given back; resuming starts the job again from its current spec, with a fresh
startTime so activeDeadlineSeconds counts from the resume.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json

from tfjobs import (
    TFJOBS,
    condition,
    env_of,
    has,
    pods,
    replica,
    replica_status,
    services,
    tfjob,
    wait_job,
    wait_pods,
    wait_services,
)

from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.operator import running
from jobcontroller.testing.waiting import wait_for
from tf_operator.controller import TFJobController

WORKERS = {"pausable-worker-0", "pausable-worker-1"}


async def _suspend(kube: KubeApi, ns: str, value: bool) -> None:
    patch = {"spec": {"runPolicy": {"suspend": value}}}
    await kube.merge_patch(TFJOBS, "pausable", patch, namespace=ns)


def _utcnow() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_suspend_removes_pods_and_resume_recreates_them_from_the_current_spec(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    async with running(kubeconfig, TFJobController()):
        await kube.create(TFJOBS, tfjob("pausable", {"Worker": replica(2)}), namespace=ns)
        await wait_pods(kube, ns, WORKERS, phase="Running")
        await wait_services(kube, ns, WORKERS)
        started = (await wait_job(kube, ns, "pausable", "Running"))["status"]["startTime"]

        await _suspend(kube, ns, True)
        suspended = await wait_job(kube, ns, "pausable", "Suspended")
        suspended_cond = condition(suspended, "Suspended")
        assert suspended_cond is not None and suspended_cond["reason"] == "TFJobSuspended"
        running_cond = condition(suspended, "Running")
        assert running_cond is not None and running_cond["status"] == "False"
        await wait_pods(kube, ns, set())
        await wait_services(kube, ns, set())
        job = await wait_for(
            kube,
            TFJOBS,
            "pausable",
            namespace=ns,
            until=lambda j: replica_status(j, "Worker").get("active") == 0,
            timeout=30,
        )
        assert job is not None

        # Edited while suspended: the new pods must use it.
        env = [{"name": "LEARNING_RATE", "value": "0.01"}]
        container = {"name": "tensorflow", "image": "tf:2", "env": env}
        template = {"spec": {"containers": [container]}}
        await kube.merge_patch(
            TFJOBS,
            "pausable",
            {"spec": {"tfReplicaSpecs": {"Worker": {"template": template}}}},
            namespace=ns,
        )
        assert await pods(kube, ns) == {}

        # startTime has one-second resolution: resume in a later second than the start, so a
        # startTime that was not reset shows.
        start = dt.datetime.strptime(started, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
        await asyncio.sleep(max(0.0, (start - dt.datetime.now(dt.UTC)).total_seconds() + 1.05))
        resumed_at = _utcnow()
        assert resumed_at > started
        await _suspend(kube, ns, False)
        back = await wait_pods(kube, ns, WORKERS, phase="Running")
        await wait_services(kube, ns, WORKERS)
        for pod in back.values():
            tf = next(c for c in pod["spec"]["containers"] if c["name"] == "tensorflow")
            assert tf["image"] == "tf:2"
            env_vars = env_of(pod)
            assert env_vars["LEARNING_RATE"] == "0.01"
            assert len(json.loads(env_vars["TF_CONFIG"])["cluster"]["worker"]) == 2
        job = await wait_job(kube, ns, "pausable", "Running")
        resumed = condition(job, "Suspended")
        assert resumed is not None
        assert (resumed["status"], resumed["reason"]) == ("False", "TFJobResumed")
        assert job["status"]["startTime"] >= resumed_at


async def test_a_job_created_suspended_gets_no_pods_until_resumed(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    job = tfjob("pausable", {"Worker": replica(2)}, run_policy={"suspend": True})
    async with running(kubeconfig, TFJobController()):
        await kube.create(TFJOBS, job, namespace=ns)
        queued = await wait_job(kube, ns, "pausable", "Suspended")
        assert has(queued, "Created")
        assert not has(queued, "Running")
        assert await pods(kube, ns) == {}
        assert await services(kube, ns) == {}
        await _suspend(kube, ns, False)
        await wait_pods(kube, ns, WORKERS, phase="Running")
        await wait_job(kube, ns, "pausable", "Running")


async def test_a_job_managed_by_multikueue_is_left_alone(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    elsewhere = tfjob(
        "remote", {"Worker": replica(2)}, run_policy={"managedBy": "kueue.x-k8s.io/multikueue"}
    )
    ours = tfjob("local", {"Worker": replica(1, exit_code=0)})
    async with running(kubeconfig, TFJobController()):
        await kube.create(TFJOBS, elsewhere, namespace=ns)
        await kube.create(TFJOBS, ours, namespace=ns)
        # The operator is demonstrably at work in this namespace...
        await wait_job(kube, ns, "local", "Succeeded")
        # ...and has not touched the other job: no pods, no Services, no status at all.
        assert set(await pods(kube, ns)) == {"local-worker-0"}
        assert set(await services(kube, ns)) == {"local-worker-0"}
        remote = await kube.get(TFJOBS, "remote", namespace=ns)
        assert "status" not in remote or remote["status"] in ({}, None)
