"""Python SDKs against our operators on the local cluster.

kubeflow-training 1.9's ``TrainingClient`` (what notebooks use today) works with our operators:
``create_job``, ``wait_for_job_conditions``, ``get_job_pod_names``, ``is_job_succeeded``
(with the ``kubernetes`` client it supports: below 36, which the dev group pins). And kfjob's
``JobClient`` does the same with the operators' models, its progress callback, pods
master first, and suspend/resume. Both SDKs are synchronous: they run in a thread so the
operator's event loop keeps going.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubeflow.training import (
    KubeflowOrgV1PyTorchJob,
    KubeflowOrgV1PyTorchJobSpec,
    KubeflowOrgV1ReplicaSpec,
    KubeflowOrgV1RunPolicy,
    TrainingClient,
)
from kubernetes.client import V1Container, V1ObjectMeta, V1PodSpec, V1PodTemplateSpec

from jobcontroller.testing.operator import running
from jobcontroller.testing.pods import sim_annotations, simulate
from kfjob import JobClient, JobFailedError, Progress
from pytorch_operator.api import PyTorchJob
from pytorch_operator.controller import PyTorchJobController
from tf_operator.controller import TFJobController

SEEDS = Path(__file__).resolve().parents[1] / "data" / "seeds"


def sdk_pytorchjob(name: str, namespace: str, workers: int) -> KubeflowOrgV1PyTorchJob:
    """A PyTorchJob as kubeflow-training's docs build it, with kwok's simulation annotations
    (every pod exits 0 after 2 s)."""

    def replica(n: int) -> KubeflowOrgV1ReplicaSpec:
        return KubeflowOrgV1ReplicaSpec(
            replicas=n,
            restart_policy="OnFailure",
            template=V1PodTemplateSpec(
                metadata=V1ObjectMeta(annotations=sim_annotations(0, run_for="2s")),
                spec=V1PodSpec(containers=[V1Container(name="pytorch", image="pytorch:2")]),
            ),
        )

    return KubeflowOrgV1PyTorchJob(
        api_version="kubeflow.org/v1",
        kind="PyTorchJob",
        metadata=V1ObjectMeta(name=name, namespace=namespace),
        spec=KubeflowOrgV1PyTorchJobSpec(
            run_policy=KubeflowOrgV1RunPolicy(clean_pod_policy="None"),
            pytorch_replica_specs={"Master": replica(1), "Worker": replica(workers)},
        ),
    )


async def test_kubeflow_training_sdk_works_against_our_operator(
    kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    def use_the_sdk() -> tuple[Any, list[str], list[str], list[str], bool]:
        client = TrainingClient(config_file=kubeconfig, namespace=namespace)
        client.create_job(sdk_pytorchjob("mnist", namespace, workers=2))
        job = client.wait_for_job_conditions("mnist", timeout=30, polling_interval=1)
        return (
            job,
            client.get_job_pod_names("mnist"),
            client.get_job_pod_names("mnist", is_master=True),
            client.get_job_pod_names("mnist", replica_type="worker", replica_index=1),
            client.is_job_succeeded("mnist"),
        )

    async with running(kubeconfig, PyTorchJobController(), namespace=namespace):
        job, names, master, worker1, succeeded = await asyncio.to_thread(use_the_sdk)
    assert isinstance(job, KubeflowOrgV1PyTorchJob)
    assert job.status.conditions[-1].type == "Succeeded"
    assert job.status.replica_statuses["Worker"].succeeded == 2
    assert sorted(names) == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
    assert master == ["mnist-master-0"]
    assert worker1 == ["mnist-worker-1"]
    assert succeeded is True


async def test_job_client_creates_follows_and_lists(
    kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    job = yaml.safe_load((SEEDS / "distributed-tensorflow-job.yaml").read_text())
    specs = job["spec"]["tfReplicaSpecs"]
    simulate(specs["Worker"]["template"], 0, run_for="2s")
    seen: list[Progress] = []

    def use_the_sdk() -> tuple[Any, list[str], list[str], list[str]]:
        client = JobClient(config_file=kubeconfig, namespace=namespace, job_kind="TFJob")
        created = client.create(job)
        assert created.metadata["uid"]
        done = client.wait_for_conditions(
            created.name, timeout=30, polling_interval=0.5, callback=seen.append
        )
        names = client.get_pod_names(created.name)
        listed = [f"{j.kind}/{j.name}" for j in client.list(all_kinds=True)]
        return done, names, listed, client.get_conditions(created.name)

    async with running(kubeconfig, TFJobController(), namespace=namespace):
        done, names, listed, conditions = await asyncio.to_thread(use_the_sdk)
    assert type(done).__name__ == "TFJob" and done.status.is_finished()
    assert conditions[-1] == "Succeeded"
    # Master first (worker 0 has the master role in a TFJob without a chief), then by type
    # and index, numerically.
    assert names == [
        "distributed-tensorflow-job-worker-0",
        "distributed-tensorflow-job-ps-0",
        "distributed-tensorflow-job-ps-1",
        "distributed-tensorflow-job-worker-1",
        "distributed-tensorflow-job-worker-2",
        "distributed-tensorflow-job-worker-3",
    ]
    assert listed == ["TFJob/distributed-tensorflow-job"]
    states = [p.state for p in seen]
    assert "Running" in states and states[-1] == "Succeeded"
    assert seen[-1].elapsed >= seen[0].elapsed


def _active_workers(job: Any) -> int:
    worker = job.status.replica_statuses.get("Worker")
    return worker.active if worker is not None and worker.active else 0


async def test_job_client_wait_raises_with_the_reason_and_suspends(
    kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    job = yaml.safe_load((SEEDS / "distributed-pytorch-job.yaml").read_text())
    master = job["spec"]["pytorchReplicaSpecs"]["Master"]
    master["restartPolicy"] = "Never"
    simulate(master["template"], 2, run_for="1s")
    other = yaml.safe_load((SEEDS / "distributed-pytorch-job.yaml").read_text())
    other["metadata"]["name"] = "held"
    other["spec"]["runPolicy"] = {"suspend": True}

    def use_the_sdk() -> tuple[JobFailedError, list[str], PyTorchJob]:
        client = JobClient(config_file=kubeconfig, namespace=namespace)
        client.create(job)
        with pytest.raises(JobFailedError) as failed:
            client.wait_for_conditions("distributed-pytorch-job", timeout=30, polling_interval=0.5)
        held = client.create(other)
        assert client.wait_for_conditions(
            held.name, expected_conditions={"Suspended"}, timeout=30, polling_interval=0.5
        )
        no_pods = client.get_pod_names(held.name)
        client.resume(held.name)
        resumed = client.wait_for_conditions(
            held.name, expected_conditions={"Running"}, timeout=30, polling_interval=0.5
        )
        assert isinstance(resumed, PyTorchJob)
        # Running comes with the master's pod; the workers' count follows as their pods run.
        deadline = time.monotonic() + 30
        while _active_workers(resumed) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
            latest = client.get(held.name)
            assert isinstance(latest, PyTorchJob)
            resumed = latest
        return failed.value, no_pods, resumed

    async with running(kubeconfig, PyTorchJobController(), namespace=namespace):
        failed, no_pods, resumed = await asyncio.to_thread(use_the_sdk)
    assert failed.reason == "PyTorchJobFailed"
    assert "distributed-pytorch-job" in str(failed)
    assert no_pods == []
    assert resumed.status.replica_statuses["Worker"].active == 2
