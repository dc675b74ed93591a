"""How a PaddleJob ends on a real cluster (v1.9's UpdateJobStatus): the Master decides in
parameter-server mode, all workers in collective mode; a failed replica fails the job under
Never and restarts under OnFailure; under ExitCode only retryable exit codes restart."""

from __future__ import annotations

from typing import Any

from jobcontroller.runtime.kube import PODS, KubeApi, Resource
from jobcontroller.testing.operator import running
from jobcontroller.testing.pods import set_pod_status, simulate
from jobcontroller.testing.waiting import wait_for, wait_for_list
from paddle_operator.controller import PaddleJobController

PADDLEJOBS = Resource("kubeflow.org", "v1", "PaddleJob", "paddlejobs")


def replica(n: int, policy: str, exit_code: int | None = None, run_for: str = "1s") -> Any:
    """``exit_code`` None: the pods run until deleted (or until a test sets their status)."""
    template = {"spec": {"containers": [{"name": "paddle", "image": "pd:1"}]}}
    if exit_code is not None:
        simulate(template, exit_code, run_for=run_for)
    return {"replicas": n, "restartPolicy": policy, "template": template}


def paddlejob(name: str, specs: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PaddleJob",
        "metadata": {"name": name},
        "spec": {"paddleReplicaSpecs": specs},
    }


def condition(job: dict[str, Any] | None, ctype: str) -> dict[str, Any]:
    for c in ((job or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == ctype:
            return dict(c)
    return {}


def is_true(ctype: str) -> Any:
    return lambda job: condition(job, ctype).get("status") == "True"


def worker_succeeded(n: int) -> Any:
    return lambda job: (
        ((job or {}).get("status") or {})
        .get("replicaStatuses", {})
        .get("Worker", {})
        .get("succeeded")
        == n
    )


async def test_parameter_server_mode_master_success_finishes_the_job(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    specs = {"Master": replica(1, "OnFailure", 0, "2s"), "Worker": replica(2, "OnFailure")}
    async with running(kubeconfig, PaddleJobController()):
        await kube.create(PADDLEJOBS, paddlejob("m", specs), namespace=namespace)
        done = await wait_for(
            kube, PADDLEJOBS, "m", namespace=namespace, until=is_true("Succeeded"), timeout=20
        )
    succeeded = condition(done, "Succeeded")
    assert (succeeded["reason"], succeeded["message"]) == (
        "PaddleJobSucceeded",
        "PaddleJob m is successfully completed.",
    )
    running_ = condition(done, "Running")
    assert (running_["status"], running_["message"]) == ("False", "PaddleJob m is running.")
    # cleanPodPolicy defaults to None: the workers are left as they are.
    pods, _ = await kube.list(PODS, namespace=namespace)
    phases = {p["metadata"]["name"]: p["status"].get("phase") for p in pods}
    assert phases == {"m-master-0": "Succeeded", "m-worker-0": "Running", "m-worker-1": "Running"}


async def test_collective_mode_succeeds_once_every_worker_has(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    async with running(kubeconfig, PaddleJobController()):
        await kube.create(
            PADDLEJOBS, paddlejob("w", {"Worker": replica(2, "Never")}), namespace=namespace
        )
        await wait_for(kube, PADDLEJOBS, "w", namespace=namespace, until=is_true("Running"))
        await set_pod_status(
            kube, namespace=namespace, name="w-worker-0", phase="Succeeded", exit_code=0
        )
        job = await wait_for(kube, PADDLEJOBS, "w", namespace=namespace, until=worker_succeeded(1))
        assert not is_true("Succeeded")(job)
        await set_pod_status(
            kube, namespace=namespace, name="w-worker-1", phase="Succeeded", exit_code=0
        )
        done = await wait_for(
            kube, PADDLEJOBS, "w", namespace=namespace, until=is_true("Succeeded")
        )
    assert (
        condition(done, "Succeeded")["message"]
        == f"PaddleJob {namespace}/w successfully completed."
    )


async def test_a_failed_worker_fails_the_job_under_never(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    specs = {"Master": replica(1, "Never"), "Worker": replica(2, "Never")}
    async with running(kubeconfig, PaddleJobController()) as op:
        await kube.create(PADDLEJOBS, paddlejob("f", specs), namespace=namespace)
        await wait_for(kube, PADDLEJOBS, "f", namespace=namespace, until=is_true("Running"))
        await set_pod_status(
            kube, namespace=namespace, name="f-worker-1", phase="Failed", exit_code=1
        )
        failed = await wait_for(
            kube, PADDLEJOBS, "f", namespace=namespace, until=is_true("Failed"), timeout=20
        )
        failed_total = await op.settled_counter(
            "training_operator_jobs_failed_total", 1, job_namespace=namespace, framework="paddle"
        )
    cond = condition(failed, "Failed")
    assert cond["reason"] == "PaddleJobFailed"
    assert cond["message"] == "PaddleJob f is failed because 1 Worker replica(s) failed."
    assert failed is not None and failed["status"].get("completionTime")
    assert failed_total == 1


async def test_a_failed_worker_is_recreated_under_on_failure(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    specs = {"Worker": replica(2, "OnFailure")}
    async with running(kubeconfig, PaddleJobController()) as op:
        await kube.create(PADDLEJOBS, paddlejob("r", specs), namespace=namespace)
        await wait_for(kube, PADDLEJOBS, "r", namespace=namespace, until=is_true("Running"))
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
            kube, PADDLEJOBS, "r", namespace=namespace, until=is_true("Running"), timeout=20
        )
        restarted = await op.settled_counter(
            "training_operator_jobs_restarted_total", 1, job_namespace=namespace, framework="paddle"
        )
    assert restarted == 1
    assert condition(job, "Failed") == {}
    assert job is not None
    assert job["metadata"]["annotations"]["training.kubeflow.org/restart-count"] == "1"


async def test_exit_code_policy_restarts_retryable_codes_and_fails_on_permanent_ones(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    async with running(kubeconfig, PaddleJobController()):
        await kube.create(
            PADDLEJOBS, paddlejob("x", {"Worker": replica(2, "ExitCode")}), namespace=namespace
        )
        await wait_for(kube, PADDLEJOBS, "x", namespace=namespace, until=is_true("Running"))
        # 137 (SIGKILL, >= 128) is retryable: the pod is replaced.
        old = await set_pod_status(
            kube, namespace=namespace, name="x-worker-0", phase="Failed", exit_code=137
        )
        await wait_for_list(
            kube,
            PODS,
            namespace=namespace,
            until=lambda items: any(
                p["metadata"]["name"] == "x-worker-0"
                and p["metadata"]["uid"] != old["metadata"]["uid"]
                for p in items
            ),
        )
        # 1 is permanent: the job fails, the pod is kept for its logs.
        await set_pod_status(
            kube, namespace=namespace, name="x-worker-1", phase="Failed", exit_code=1
        )
        failed = await wait_for(
            kube, PADDLEJOBS, "x", namespace=namespace, until=is_true("Failed"), timeout=20
        )
    cond = condition(failed, "Failed")
    assert cond["reason"] == "PaddleJobFailed"
    assert "Worker" in cond["message"]
    pod = await kube.get(PODS, "x-worker-1", namespace=namespace)
    assert pod is not None and pod["status"]["phase"] == "Failed"
