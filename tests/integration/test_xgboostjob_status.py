"""How an XGBoostJob ends on a real cluster: the Master decides; a failed replica fails the job
under Never; under ExitCode a retryable exit code recreates the pod and a permanent one fails
the job, as v1.9 does."""

from __future__ import annotations

import asyncio
from typing import Any

from jobcontroller.runtime.kube import PODS, KubeApi, Resource
from jobcontroller.testing.operator import running
from jobcontroller.testing.pods import set_pod_status, simulate
from jobcontroller.testing.waiting import wait_for, wait_for_list
from xgboost_operator.controller import XGBoostJobController

XGBOOSTJOBS = Resource("kubeflow.org", "v1", "XGBoostJob", "xgboostjobs")
HOLD = "example.com/hold"


def replica(n: int, policy: str, exit_code: int | None = None, run_for: str = "1s") -> Any:
    """``exit_code`` None: the pods run until deleted (or until a test sets their status)."""
    template = {"spec": {"containers": [{"name": "xgboost", "image": "xgb:1"}]}}
    if exit_code is not None:
        simulate(template, exit_code, run_for=run_for)
    return {"replicas": n, "restartPolicy": policy, "template": template}


def xgboostjob(name: str, specs: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "XGBoostJob",
        "metadata": {"name": name},
        "spec": {"xgbReplicaSpecs": specs, **spec},
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
    specs = {"Master": replica(1, "Never", 0, "2s"), "Worker": replica(2, "Never")}
    async with running(kubeconfig, XGBoostJobController()):
        await kube.create(XGBOOSTJOBS, xgboostjob("m", specs), namespace=namespace)
        done = await wait_for(
            kube, XGBOOSTJOBS, "m", namespace=namespace, until=is_true("Succeeded"), timeout=20
        )
    assert done is not None
    assert (condition(done, "Running") or {})["status"] == "False"
    assert done["status"]["replicaStatuses"]["Master"]["succeeded"] == 1
    # cleanPodPolicy defaults to None: the workers are left as they are.
    pods, _ = await kube.list(PODS, namespace=namespace)
    phases = {p["metadata"]["name"]: p["status"].get("phase") for p in pods}
    assert phases == {"m-master-0": "Succeeded", "m-worker-0": "Running", "m-worker-1": "Running"}


async def test_workers_succeeding_do_not_finish_the_job(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    specs = {"Master": replica(1, "Never"), "Worker": replica(2, "Never", 0, "1s")}
    async with running(kubeconfig, XGBoostJobController()):
        await kube.create(XGBOOSTJOBS, xgboostjob("w", specs), namespace=namespace)
        job = await wait_for(
            kube,
            XGBOOSTJOBS,
            "w",
            namespace=namespace,
            until=lambda j: (
                (((j or {}).get("status") or {}).get("replicaStatuses", {}).get("Worker", {})).get(
                    "succeeded"
                )
                == 2
            ),
            timeout=20,
        )
        assert job is not None
        assert condition(job, "Succeeded") is None
        assert is_true("Running")(job)
        await set_pod_status(
            kube, namespace=namespace, name="w-master-0", phase="Succeeded", exit_code=0
        )
        await wait_for(kube, XGBOOSTJOBS, "w", namespace=namespace, until=is_true("Succeeded"))


async def test_a_failed_worker_fails_the_job_under_never(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    specs = {"Master": replica(1, "Never"), "Worker": replica(2, "Never")}
    async with running(kubeconfig, XGBoostJobController()) as op:
        await kube.create(XGBOOSTJOBS, xgboostjob("f", specs), namespace=namespace)
        await wait_for(kube, XGBOOSTJOBS, "f", namespace=namespace, until=is_true("Running"))
        await set_pod_status(
            kube, namespace=namespace, name="f-worker-1", phase="Failed", exit_code=1
        )
        failed = await wait_for(
            kube, XGBOOSTJOBS, "f", namespace=namespace, until=is_true("Failed"), timeout=20
        )
        assert (
            await op.settled_counter(
                "training_operator_jobs_failed_total",
                1,
                job_namespace=namespace,
                framework="xgboost",
            )
            == 1
        )
    cond = condition(failed, "Failed")
    assert cond is not None
    assert cond["reason"] == "XGBoostJobFailed"
    assert cond["message"] == "XGBoostJob f is failed because 1 Worker replica(s) failed."
    assert (condition(failed, "Running") or {}).get("status") == "False"
    assert failed is not None and failed["status"].get("completionTime")
    # Failed pods are not recreated under Never.
    pods, _ = await kube.list(PODS, namespace=namespace)
    assert len(pods) == 3


async def test_a_retryable_exit_code_recreates_the_worker_under_exit_code(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    worker = replica(1, "ExitCode")
    # Holds the failed pod while it is deleted, so the Restarting state can be looked at.
    worker["template"]["metadata"] = {"finalizers": [HOLD]}
    specs = {"Master": replica(1, "Never"), "Worker": worker}
    async with running(kubeconfig, XGBoostJobController()) as op:
        await kube.create(XGBOOSTJOBS, xgboostjob("r", specs), namespace=namespace)
        await wait_for(kube, XGBOOSTJOBS, "r", namespace=namespace, until=is_true("Running"))
        old = await set_pod_status(
            kube, namespace=namespace, name="r-worker-0", phase="Failed", exit_code=137
        )
        restarting = await wait_for(
            kube, XGBOOSTJOBS, "r", namespace=namespace, until=is_true("Restarting"), timeout=20
        )
        cond = condition(restarting, "Restarting")
        assert cond is not None
        assert (cond["reason"], cond["message"]) == (
            "XGBoostJobRestarting",
            "XGBoostJob r is restarting because 1 Worker replica(s) failed.",
        )
        # While the failed pod goes, the job stays Restarting: no flapping with Running.
        await asyncio.sleep(2)
        job = await kube.get(XGBOOSTJOBS, "r", namespace=namespace)
        assert condition(job, "Restarting") == cond
        assert condition(job, "Running") is None  # the two replace each other

        await kube.merge_patch(
            PODS, "r-worker-0", {"metadata": {"finalizers": None}}, namespace=namespace
        )
        await wait_for_list(
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
        job = await wait_for(
            kube, XGBOOSTJOBS, "r", namespace=namespace, until=is_true("Running"), timeout=20
        )
        restarted = op.counter(
            "training_operator_jobs_restarted_total", job_namespace=namespace, framework="xgboost"
        )
        await kube.merge_patch(
            PODS, "r-worker-0", {"metadata": {"finalizers": None}}, namespace=namespace
        )
    assert restarted == 1
    assert job is not None and condition(job, "Failed") is None
    assert condition(job, "Restarting") is None
    assert job["metadata"]["annotations"]["training.kubeflow.org/restart-count"] == "1"


async def test_a_permanent_exit_code_fails_the_job_under_exit_code(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    specs = {"Master": replica(1, "Never"), "Worker": replica(2, "ExitCode")}
    async with running(kubeconfig, XGBoostJobController()):
        await kube.create(XGBOOSTJOBS, xgboostjob("p", specs), namespace=namespace)
        await wait_for(kube, XGBOOSTJOBS, "p", namespace=namespace, until=is_true("Running"))
        await set_pod_status(
            kube, namespace=namespace, name="p-worker-0", phase="Failed", exit_code=1
        )
        failed = await wait_for(
            kube, XGBOOSTJOBS, "p", namespace=namespace, until=is_true("Failed"), timeout=20
        )
    cond = condition(failed, "Failed")
    assert cond is not None
    # The words of v1.9's common pod reconciler, which fails such a job before its status rule.
    assert (cond["reason"], cond["message"]) == (
        "XGBoostJobFailed",
        'job "p" is failing because "Worker" replica(s) failed.',
    )
    assert condition(failed, "Restarting") is None
