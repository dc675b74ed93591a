"""How a PyTorchJob ends on a real cluster: the Master decides; without one, the workers do;
Never fails the job on a failed replica, OnFailure restarts it; suspend and resume."""

from __future__ import annotations

from typing import Any

from jobcontroller.runtime.kube import PODS, KubeApi, Resource
from jobcontroller.testing.operator import running
from jobcontroller.testing.pods import set_pod_status, simulate
from jobcontroller.testing.waiting import wait_for, wait_for_list
from pytorch_operator.controller import PyTorchJobController

PYTORCHJOBS = Resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")


def replica(n: int, policy: str, exit_code: int | None = None, run_for: str = "1s") -> Any:
    """``exit_code`` None: the pods run until deleted (or until a test sets their status)."""
    template = {"spec": {"containers": [{"name": "pytorch", "image": "pt:1"}]}}
    if exit_code is not None:
        simulate(template, exit_code, run_for=run_for)
    return {"replicas": n, "restartPolicy": policy, "template": template}


def pytorchjob(name: str, specs: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": specs, **spec},
    }


def condition(job: dict[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    for c in ((job or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == ctype:
            return dict(c)
    return None


def is_true(ctype: str) -> Any:
    return lambda job: (condition(job, ctype) or {}).get("status") == "True"


async def test_master_success_finishes_the_job_while_workers_still_run(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    specs = {"Master": replica(1, "OnFailure", 0, "2s"), "Worker": replica(2, "OnFailure")}
    async with running(kubeconfig, PyTorchJobController()):
        await kube.create(PYTORCHJOBS, pytorchjob("m", specs), namespace=namespace)
        done = await wait_for(
            kube, PYTORCHJOBS, "m", namespace=namespace, until=is_true("Succeeded"), timeout=20
        )
    assert done is not None
    assert (condition(done, "Running") or {})["status"] == "False"
    statuses = done["status"]["replicaStatuses"]
    assert statuses["Master"]["succeeded"] == 1
    # cleanPodPolicy defaults to None: the workers are left as they are.
    pods, _ = await kube.list(PODS, namespace=namespace)
    phases = {p["metadata"]["name"]: p["status"].get("phase") for p in pods}
    assert phases == {"m-master-0": "Succeeded", "m-worker-0": "Running", "m-worker-1": "Running"}


async def test_without_master_the_job_succeeds_once_all_workers_have(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    async with running(kubeconfig, PyTorchJobController()):
        await kube.create(
            PYTORCHJOBS, pytorchjob("w", {"Worker": replica(2, "Never")}), namespace=namespace
        )
        await wait_for(kube, PYTORCHJOBS, "w", namespace=namespace, until=is_true("Running"))
        await set_pod_status(
            kube, namespace=namespace, name="w-worker-0", phase="Succeeded", exit_code=0
        )
        job = await wait_for(
            kube,
            PYTORCHJOBS,
            "w",
            namespace=namespace,
            until=lambda j: (
                (j or {})
                .get("status", {})
                .get("replicaStatuses", {})
                .get("Worker", {})
                .get("succeeded")
                == 1
            ),
        )
        assert not is_true("Succeeded")(job)
        await set_pod_status(
            kube, namespace=namespace, name="w-worker-1", phase="Succeeded", exit_code=0
        )
        await wait_for(kube, PYTORCHJOBS, "w", namespace=namespace, until=is_true("Succeeded"))


async def test_a_failed_worker_fails_the_job_under_never(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    specs = {"Master": replica(1, "Never"), "Worker": replica(2, "Never")}
    async with running(kubeconfig, PyTorchJobController()) as op:
        await kube.create(PYTORCHJOBS, pytorchjob("f", specs), namespace=namespace)
        await wait_for(kube, PYTORCHJOBS, "f", namespace=namespace, until=is_true("Running"))
        await set_pod_status(
            kube, namespace=namespace, name="f-worker-1", phase="Failed", exit_code=1
        )
        failed = await wait_for(
            kube, PYTORCHJOBS, "f", namespace=namespace, until=is_true("Failed"), timeout=20
        )
        assert (
            await op.settled_counter(
                "training_operator_jobs_failed_total",
                1,
                job_namespace=namespace,
                framework="pytorch",
            )
            == 1
        )
    cond = condition(failed, "Failed")
    assert cond is not None
    assert cond["reason"] == "PyTorchJobFailed"
    assert cond["message"] == ("PyTorchJob f is failed because 1 Worker replica(s) failed.")
    assert failed is not None and failed["status"].get("completionTime")


async def test_a_failed_worker_is_recreated_under_on_failure(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    specs = {"Master": replica(1, "OnFailure"), "Worker": replica(1, "OnFailure")}
    async with running(kubeconfig, PyTorchJobController()) as op:
        await kube.create(PYTORCHJOBS, pytorchjob("r", specs), namespace=namespace)
        await wait_for(kube, PYTORCHJOBS, "r", namespace=namespace, until=is_true("Running"))
        old = await set_pod_status(
            kube, namespace=namespace, name="r-worker-0", phase="Failed", exit_code=137
        )
        pods = await wait_for_list(
            kube,
            PODS,
            namespace=namespace,
            until=lambda items: any(
                p["metadata"]["name"] == "r-worker-0"
                and p["metadata"]["uid"] != old["metadata"]["uid"]
                and p["status"].get("phase") == "Running"
                for p in items
            ),
        )
        # The simulated pod is replaced within milliseconds, so Restarting may already have
        # given way to Running again; the restart ledger and the counter record it for good.
        job = await wait_for(
            kube, PYTORCHJOBS, "r", namespace=namespace, until=is_true("Running"), timeout=20
        )
        restarted = op.counter(
            "training_operator_jobs_restarted_total", job_namespace=namespace, framework="pytorch"
        )
    assert len(pods) == 2
    assert restarted == 1
    assert job is not None and condition(job, "Failed") is None
    assert job["metadata"]["annotations"]["training.kubeflow.org/restart-count"] == "1"


async def test_suspend_removes_the_pods_and_resume_brings_them_back(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    specs = {"Master": replica(1, "OnFailure"), "Worker": replica(2, "OnFailure")}
    async with running(kubeconfig, PyTorchJobController()):
        await kube.create(PYTORCHJOBS, pytorchjob("s", specs), namespace=namespace)
        await wait_for(kube, PYTORCHJOBS, "s", namespace=namespace, until=is_true("Running"))
        await kube.merge_patch(
            PYTORCHJOBS, "s", {"spec": {"runPolicy": {"suspend": True}}}, namespace=namespace
        )
        suspended = await wait_for(
            kube, PYTORCHJOBS, "s", namespace=namespace, until=is_true("Suspended"), timeout=20
        )
        await wait_for_list(kube, PODS, namespace=namespace, until=lambda i: not i, timeout=20)
        assert (condition(suspended, "Running") or {}).get("status") == "False"
        assert (condition(suspended, "Suspended") or {})["reason"] == "PyTorchJobSuspended"

        await kube.merge_patch(
            PYTORCHJOBS, "s", {"spec": {"runPolicy": {"suspend": False}}}, namespace=namespace
        )
        await wait_for_list(kube, PODS, namespace=namespace, until=lambda i: len(i) == 3)
        resumed = await wait_for(
            kube, PYTORCHJOBS, "s", namespace=namespace, until=is_true("Running"), timeout=20
        )
    cond = condition(resumed, "Suspended")
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "PyTorchJobResumed")
