"""How a JAXJob ends on a real cluster (v1.9's UpdateJobStatus): it succeeds when every worker
has; a failed worker fails it under Never and is recreated under OnFailure; under ExitCode a
signal (128+) is retried and the program's own exit code (1-127) fails the job."""

from __future__ import annotations

from typing import Any

from jax_operator.controller import JAXJobController
from jobcontroller.runtime.kube import PODS, KubeApi, Resource
from jobcontroller.testing.operator import running
from jobcontroller.testing.pods import set_pod_status
from jobcontroller.testing.waiting import wait_for, wait_for_list

JAXJOBS = Resource("kubeflow.org", "v1", "JAXJob", "jaxjobs")


def jaxjob(name: str, replicas: int, policy: str) -> dict[str, Any]:
    """Workers that run until deleted or until the test writes their status."""
    template = {"spec": {"containers": [{"name": "jax", "image": "jax:1"}]}}
    worker = {"replicas": replicas, "restartPolicy": policy, "template": template}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "JAXJob",
        "metadata": {"name": name},
        "spec": {"jaxReplicaSpecs": {"Worker": worker}},
    }


def condition(job: dict[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    for c in ((job or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == ctype:
            return dict(c)
    return None


def is_true(ctype: str) -> Any:
    return lambda job: (condition(job, ctype) or {}).get("status") == "True"


def succeeded_workers(n: int) -> Any:
    return lambda job: (
        (((job or {}).get("status") or {}).get("replicaStatuses", {}).get("Worker", {})).get(
            "succeeded"
        )
        == n
    )


def _labels(namespace: str) -> dict[str, str]:
    return {"job_namespace": namespace, "framework": "jax"}


async def test_the_job_succeeds_once_every_worker_has_not_when_the_coordinator_does(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    async with running(kubeconfig, JAXJobController()):
        await kube.create(JAXJOBS, jaxjob("w", 2, "Never"), namespace=namespace)
        await wait_for(kube, JAXJOBS, "w", namespace=namespace, until=is_true("Running"))
        await set_pod_status(
            kube, namespace=namespace, name="w-worker-0", phase="Succeeded", exit_code=0
        )
        job = await wait_for(kube, JAXJOBS, "w", namespace=namespace, until=succeeded_workers(1))
        assert not is_true("Succeeded")(job)
        assert is_true("Running")(job)
        await set_pod_status(
            kube, namespace=namespace, name="w-worker-1", phase="Succeeded", exit_code=0
        )
        done = await wait_for(kube, JAXJOBS, "w", namespace=namespace, until=is_true("Succeeded"))
    assert (condition(done, "Running") or {})["status"] == "False"


async def test_a_failed_worker_fails_the_job_under_never(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    async with running(kubeconfig, JAXJobController()) as op:
        await kube.create(JAXJOBS, jaxjob("f", 2, "Never"), namespace=namespace)
        await wait_for(kube, JAXJOBS, "f", namespace=namespace, until=is_true("Running"))
        await set_pod_status(
            kube, namespace=namespace, name="f-worker-1", phase="Failed", exit_code=1
        )
        failed = await wait_for(
            kube, JAXJOBS, "f", namespace=namespace, until=is_true("Failed"), timeout=20
        )
        total = await op.settled_counter(
            "training_operator_jobs_failed_total", 1, job_namespace=namespace, framework="jax"
        )
    cond = condition(failed, "Failed")
    assert cond is not None
    assert (cond["reason"], cond["message"]) == (
        "JAXJobFailed",
        "JAXJob f is failed because 1 Worker replica(s) failed.",
    )
    assert failed is not None and failed["status"].get("completionTime")
    assert total == 1
    # Never: the failed pod is not replaced, and the coordinator is left as it is
    # (cleanPodPolicy defaults to None).
    pods, _ = await kube.list(PODS, namespace=namespace)
    phases = {p["metadata"]["name"]: p["status"].get("phase") for p in pods}
    assert phases == {"f-worker-0": "Running", "f-worker-1": "Failed"}


async def test_a_failed_worker_is_recreated_under_on_failure(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    async with running(kubeconfig, JAXJobController()) as op:
        await kube.create(JAXJOBS, jaxjob("r", 2, "OnFailure"), namespace=namespace)
        await wait_for(kube, JAXJOBS, "r", namespace=namespace, until=is_true("Running"))
        old = await set_pod_status(
            kube, namespace=namespace, name="r-worker-1", phase="Failed", exit_code=1
        )
        await wait_for_list(
            kube,
            PODS,
            namespace=namespace,
            until=lambda items: any(
                p["metadata"]["name"] == "r-worker-1"
                and p["metadata"]["uid"] != old["metadata"]["uid"]
                and p["status"].get("phase") == "Running"
                for p in items
            ),
        )
        job = await wait_for(
            kube, JAXJOBS, "r", namespace=namespace, until=is_true("Running"), timeout=20
        )
        restarted = op.counter("training_operator_jobs_restarted_total", **_labels(namespace))
    assert restarted == 1
    assert job is not None and condition(job, "Failed") is None
    assert job["metadata"]["annotations"]["training.kubeflow.org/restart-count"] == "1"
    # The Restarting condition, if the replacement did not retire it already, has v1.9's words.
    restarting = condition(job, "Restarting")
    if restarting is not None:
        assert restarting["reason"] == "JAXJobRestarting"
        assert restarting["message"] == "JAXJob r is restarting because 1 Worker replica(s) failed."


async def test_exit_code_policy_retries_signals_and_fails_on_the_programs_exit_code(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    async with running(kubeconfig, JAXJobController()):
        await kube.create(JAXJOBS, jaxjob("e", 2, "ExitCode"), namespace=namespace)
        await wait_for(kube, JAXJOBS, "e", namespace=namespace, until=is_true("Running"))
        killed = await set_pod_status(
            kube, namespace=namespace, name="e-worker-1", phase="Failed", exit_code=137
        )
        pods = await wait_for_list(
            kube,
            PODS,
            namespace=namespace,
            until=lambda items: any(
                p["metadata"]["name"] == "e-worker-1"
                and p["metadata"]["uid"] != killed["metadata"]["uid"]
                and p["status"].get("phase") == "Running"
                for p in items
            ),
        )
        coordinator = next(p for p in pods if p["metadata"]["name"] == "e-worker-0")
        await set_pod_status(
            kube, namespace=namespace, name="e-worker-0", phase="Failed", exit_code=1
        )
        failed = await wait_for(
            kube, JAXJOBS, "e", namespace=namespace, until=is_true("Failed"), timeout=20
        )
    cond = condition(failed, "Failed")
    assert cond is not None
    assert (cond["reason"], cond["message"]) == (
        "JAXJobFailed",
        'job "e" is failing because "Worker" replica(s) failed.',
    )
    # Not retried: the failed pod is the one that ran.
    after, _ = await kube.list(PODS, namespace=namespace)
    worker0 = next(p for p in after if p["metadata"]["name"] == "e-worker-0")
    assert worker0["metadata"]["uid"] == coordinator["metadata"]["uid"]
    assert worker0["status"]["phase"] == "Failed"
