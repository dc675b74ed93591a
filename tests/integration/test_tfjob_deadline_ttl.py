"""Timers: activeDeadlineSeconds and ttlSecondsAfterFinished fire by themselves.

In the anchor both were checked only when some other event arrived, because its "requeue after"
went to a fake queue (kubeflow #3358, #1533). Here the pods run quietly (no status change after
they start), so only the operator's own timer can end the job or delete it.
"""

from __future__ import annotations

from tfjobs import (
    TFJOBS,
    condition,
    events,
    has,
    replica,
    tfjob,
    wait_event,
    wait_job,
    wait_pods,
)

from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.operator import running
from jobcontroller.testing.waiting import wait_for
from tf_operator.controller import TFJobController


async def test_active_deadline_fails_a_quiet_job_on_its_own_timer(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    # Pods that never finish: after they are Running, nothing changes unless the timer fires.
    spec = {"Worker": replica(2)}
    job = tfjob("slow", spec, run_policy={"activeDeadlineSeconds": 3, "cleanPodPolicy": "All"})
    async with running(kubeconfig, TFJobController()) as op:
        await kube.create(TFJOBS, job, namespace=ns)
        await wait_pods(kube, ns, {"slow-worker-0", "slow-worker-1"}, phase="Running")
        done = await wait_job(kube, ns, "slow", "Failed", timeout=20)
        failed = condition(done, "Failed")
        assert failed is not None
        assert failed["reason"] == "TFJobFailed"
        assert failed["message"] == (
            "Job slow has failed because it was active longer than specified deadline"
        )
        assert not has(done, "Running")
        assert done["status"]["completionTime"] >= done["status"]["startTime"]
        # The deadline stops the training: with cleanPodPolicy All its pods are removed.
        await wait_pods(kube, ns, set())
        assert (
            await op.settled_counter(
                "training_operator_jobs_failed_total", 1, job_namespace=ns, framework="tensorflow"
            )
            == 1
        )


async def test_ttl_deletes_the_finished_job(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    spec = {"Worker": replica(1, exit_code=0, run_for="1s")}
    job = tfjob("short", spec, run_policy={"ttlSecondsAfterFinished": 2})
    async with running(kubeconfig, TFJobController()) as op:
        created = await kube.create(TFJOBS, job, namespace=ns)
        finished = await wait_job(kube, ns, "short", "Succeeded")
        assert finished["metadata"]["uid"] == created["metadata"]["uid"]
        await wait_for(
            kube,
            TFJOBS,
            "short",
            namespace=ns,
            until=lambda j: j is None,
            timeout=20,
            what="TFJob short deleted by its TTL",
        )
        # The Event goes out in the background, after the delete the wait above saw.
        await wait_event(kube, ns, "SuccessfulDeleteJob")
        assert [e["type"] for e in await events(kube, ns, reason="SuccessfulDeleteJob")] == [
            "Normal"
        ]
        assert (
            op.counter(
                "training_operator_jobs_deleted_total", job_namespace=ns, framework="tensorflow"
            )
            == 1
        )
