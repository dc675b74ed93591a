"""Whole-gang restart (``runPolicy.restartScope: All``) for every kind, on kwok's pods.

One pod fails with a retryable exit code (137); the operator records the restart on the job,
deletes every pod of the gang (an MPIJob's launcher Job too) and creates them again in the next
generation: all new UIDs, the restart counted once against backoffLimit, a Warning event naming
the pod. The job then succeeds. Past backoffLimit gang restarts, the job fails and says why.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from jax_operator.controller import JAXJobController
from jobcontroller import (
    GANG_GENERATION_ANNOTATION,
    GANG_RESTART_ANNOTATION,
    RESTART_COUNT_ANNOTATION,
    JobController,
)
from jobcontroller.runtime.kube import EVENTS, JOBS, PODS, KubeApi, Resource
from jobcontroller.testing.operator import running
from jobcontroller.testing.pods import set_pod_status
from jobcontroller.testing.waiting import wait_for, wait_for_list
from mpi_operator.controller import MPIJobController
from paddle_operator.controller import PaddleJobController
from pytorch_operator.controller import PyTorchJobController
from tf_operator.controller import TFJobController
from xgboost_operator.controller import XGBoostJobController

Obj = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    kind: str
    version: str
    plural: str
    specs_field: str
    container: str
    replicas: dict[str, int]
    victim: str
    """The replica (``<rtype>-<index>``) whose pod fails."""
    framework: str
    controller: Callable[[], JobController[Any]]
    restart_policy: str = "ExitCode"

    @property
    def resource(self) -> Resource:
        return Resource("kubeflow.org", self.version, self.kind, self.plural)

    @property
    def pods(self) -> int:
        return sum(self.replicas.values())

    def job(self, name: str, **run_policy: Any) -> Obj:
        specs: Obj = {}
        for rtype, count in self.replicas.items():
            container = {"name": self.container, "image": "train:latest"}
            spec: Obj = {"replicas": count, "template": {"spec": {"containers": [container]}}}
            if rtype != "Launcher":
                spec["restartPolicy"] = self.restart_policy
            specs[rtype] = spec
        return {
            "apiVersion": f"kubeflow.org/{self.version}",
            "kind": self.kind,
            "metadata": {"name": name},
            "spec": {
                "runPolicy": {"restartScope": "All", **run_policy},
                self.specs_field: specs,
            },
        }


KINDS = [
    Kind(
        "TFJob", "v1", "tfjobs", "tfReplicaSpecs", "tensorflow", {"Worker": 2}, "worker-1",
        "tensorflow", TFJobController,
    ),
    Kind(
        "PyTorchJob", "v1", "pytorchjobs", "pytorchReplicaSpecs", "pytorch",
        {"Master": 1, "Worker": 1}, "worker-0", "pytorch", PyTorchJobController,
    ),
    Kind(
        "XGBoostJob", "v1", "xgboostjobs", "xgbReplicaSpecs", "xgboost",
        {"Master": 1, "Worker": 1}, "worker-0", "xgboost", XGBoostJobController,
    ),
    Kind(
        "PaddleJob", "v1", "paddlejobs", "paddleReplicaSpecs", "paddle", {"Worker": 2},
        "worker-1", "paddle", PaddleJobController,
    ),
    Kind(
        "JAXJob", "v1", "jaxjobs", "jaxReplicaSpecs", "jax", {"Worker": 2}, "worker-1", "jax",
        JAXJobController,
    ),
    Kind(
        "MPIJob", "v2beta1", "mpijobs", "mpiReplicaSpecs", "mpi", {"Launcher": 1, "Worker": 2},
        "worker-1", "mpi", MPIJobController, restart_policy="OnFailure",
    ),
]  # fmt: skip


def _live(items: list[Obj]) -> list[Obj]:
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


async def wait_gang(
    kube: KubeApi, ns: str, count: int, generation: str, *, timeout: float = 60
) -> dict[str, Obj]:
    """Exactly ``count`` live pods, all Running, all of ``generation``; by name."""

    def done(items: list[Obj]) -> bool:
        live = _live(items)
        return (
            len(items) == count
            and len(live) == count
            and all(p.get("status", {}).get("phase") == "Running" for p in live)
            and all(
                (p["metadata"].get("annotations") or {}).get(GANG_GENERATION_ANNOTATION)
                == generation
                for p in live
            )
        )

    items = await wait_for_list(
        kube, PODS, namespace=ns, until=done, timeout=timeout, what=f"gang {generation}"
    )
    return {p["metadata"]["name"]: p for p in items}


def _condition(job: Obj | None, ctype: str) -> Obj | None:
    for cond in ((job or {}).get("status") or {}).get("conditions") or []:
        if cond["type"] == ctype and cond["status"] == "True":
            return dict(cond)
    return None


async def wait_condition(
    kube: KubeApi, kind: Kind, ns: str, name: str, ctype: str, *, timeout: float = 60
) -> Obj:
    job = await wait_for(
        kube,
        kind.resource,
        name,
        namespace=ns,
        until=lambda job: _condition(job, ctype) is not None,
        timeout=timeout,
        what=f"{kind.kind} {name} {ctype}",
    )
    assert job is not None
    return job


async def launcher_uid(kube: KubeApi, ns: str, name: str) -> str | None:
    items, _ = await kube.list(JOBS, namespace=ns)
    return next(
        (j["metadata"]["uid"] for j in items if j["metadata"]["name"] == f"{name}-launcher"), None
    )


@pytest.mark.parametrize("kind", KINDS, ids=[k.kind for k in KINDS])
async def test_one_retryable_failure_restarts_the_whole_gang_once(
    kind: Kind, kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns, name = namespace, "gang"
    victim = f"{name}-{kind.victim}"
    labels = {"job_namespace": ns, "framework": kind.framework}
    async with running(kubeconfig, kind.controller()) as op:
        await kube.create(kind.resource, kind.job(name, backoffLimit=3), namespace=ns)
        first = await wait_gang(kube, ns, kind.pods, "0")
        first_launcher = await launcher_uid(kube, ns, name)
        assert all(p["spec"]["restartPolicy"] == "Never" for p in first.values())

        await set_pod_status(kube, namespace=ns, name=victim, phase="Failed", exit_code=137)

        second = await wait_gang(kube, ns, kind.pods, "1")
        assert not {p["metadata"]["uid"] for p in second.values()} & {
            p["metadata"]["uid"] for p in first.values()
        }
        if kind.kind == "MPIJob":
            assert await launcher_uid(kube, ns, name) not in (None, first_launcher)
        job = await kube.get(kind.resource, name, namespace=ns)
        annotations = job["metadata"]["annotations"]
        assert annotations[RESTART_COUNT_ANNOTATION] == "1"
        record = json.loads(annotations[GANG_RESTART_ANNOTATION])
        assert (record["generation"], record["pod"], record["exitCode"]) == (1, victim, 137)
        restarting = [
            e
            for e in (await kube.list(EVENTS, namespace=ns))[0]
            if e.get("reason") == f"{kind.kind}Restarting"
        ]
        assert [e["type"] for e in restarting] == ["Warning"]
        assert f"pod {victim}" in restarting[0]["message"]
        assert "exit code 137" in restarting[0]["message"]
        assert op.counter("training_operator_jobs_restarted_total", **labels) == 1

        # The new gang finishes the job.
        for pod_name, pod in sorted(second.items()):
            role = (pod["metadata"].get("labels") or {}).get("training.kubeflow.org/job-role")
            if kind.kind == "MPIJob" and role != "launcher":
                continue  # MPI's workers are sshd servers: the launcher decides
            await set_pod_status(kube, namespace=ns, name=pod_name, phase="Succeeded", exit_code=0)
        job = await wait_condition(kube, kind, ns, name, "Succeeded")
        assert _condition(job, "Failed") is None
        assert job["metadata"]["annotations"][RESTART_COUNT_ANNOTATION] == "1"
        assert op.counter("training_operator_jobs_restarted_total", **labels) == 1


@pytest.mark.parametrize("kind", [KINDS[0], KINDS[-1]], ids=["TFJob", "MPIJob"])
async def test_past_backoff_limit_gang_restarts_the_job_fails(
    kind: Kind, kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns, name = namespace, "flaky"
    victim = f"{name}-{kind.victim}"
    async with running(kubeconfig, kind.controller()):
        await kube.create(kind.resource, kind.job(name, backoffLimit=1), namespace=ns)
        await wait_gang(kube, ns, kind.pods, "0")
        await set_pod_status(kube, namespace=ns, name=victim, phase="Failed", exit_code=137)
        await wait_gang(kube, ns, kind.pods, "1")
        await set_pod_status(kube, namespace=ns, name=victim, phase="Failed", exit_code=137)

        job = await wait_condition(kube, kind, ns, name, "Failed")
        failed = _condition(job, "Failed")
        assert failed is not None
        assert failed["reason"] == f"{kind.kind}Failed"
        assert failed["message"] == (
            f"Job {name} has failed because it has reached the specified backoff limit: pod "
            f"{victim} (Worker) failed with exit code 137 (Error) after 1 whole-gang "
            f"restart(s), and runPolicy.backoffLimit allows 1"
        )
        assert job["metadata"]["annotations"][RESTART_COUNT_ANNOTATION] == "1"
        # Stopped by its run policy: no pod of the job keeps running, none is recreated.
        await wait_for_list(
            kube,
            PODS,
            namespace=ns,
            until=lambda items: all(
                p.get("status", {}).get("phase") != "Running"
                for p in _live(items)
                if (p["metadata"].get("labels") or {}).get("training.kubeflow.org/job-role")
                != "launcher"
            ),
            timeout=30,
            what="no running worker",
        )
