"""How a TFJob's status follows its pods: Created -> Running -> Succeeded or Failed, the
replica counts, and the two success policies (worker 0 decides, or all workers must finish)."""

from __future__ import annotations

from tfjobs import (
    TFJOBS,
    Obj,
    condition,
    conditions,
    has,
    replica,
    replica_status,
    tfjob,
    wait_event,
    wait_job,
    wait_pods,
)

from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.operator import running
from jobcontroller.testing.pods import set_pod_status
from jobcontroller.testing.waiting import wait_for
from tf_operator.controller import TFJobController


def _workers(job: str, n: int) -> set[str]:
    return {f"{job}-worker-{i}" for i in range(n)}


async def _finish(kube: KubeApi, ns: str, name: str, exit_code: int) -> None:
    phase = "Succeeded" if exit_code == 0 else "Failed"
    await set_pod_status(kube, namespace=ns, name=name, phase=phase, exit_code=exit_code)


async def test_worker_zero_success_completes_the_job_by_default(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    async with running(kubeconfig, TFJobController()) as op:
        await kube.create(TFJOBS, tfjob("w0", {"Worker": replica(3)}), namespace=ns)
        await wait_pods(kube, ns, _workers("w0", 3), phase="Running")
        await wait_job(kube, ns, "w0", "Running")  # set once any worker runs
        # The status counts the third running pod once the operator's cache has seen it.
        running_job = await wait_for(
            kube,
            TFJOBS,
            "w0",
            namespace=ns,
            until=lambda j: j is not None and replica_status(j, "Worker").get("active") == 3,
            timeout=20,
            what="3 active workers in the status",
        )
        assert replica_status(running_job, "Worker")["active"] == 3
        running_cond = condition(running_job, "Running")
        assert running_cond is not None and running_cond["reason"] == "TFJobRunning"

        await _finish(kube, ns, "w0-worker-0", 0)
        done = await wait_job(kube, ns, "w0", "Succeeded")
        succeeded = condition(done, "Succeeded")
        assert succeeded is not None
        assert succeeded["reason"] == "TFJobSucceeded"
        assert succeeded["message"] == f"TFJob {ns}/w0 successfully completed."
        assert [(c["type"], c["status"]) for c in conditions(done)] == [
            ("Created", "True"),
            ("Running", "False"),
            ("Succeeded", "True"),
        ]
        # The workers still running when the job succeeded are counted as succeeded.
        assert replica_status(done, "Worker") == {"active": 0, "succeeded": 3, "failed": 0}
        assert done["status"]["completionTime"] >= done["status"]["startTime"]
        labels = {"job_namespace": ns, "framework": "tensorflow"}
        assert await op.settled_counter("training_operator_jobs_successful_total", 1, **labels) == 1


async def test_all_workers_policy_waits_for_every_worker(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    job = tfjob("all", {"Worker": replica(3)}, success_policy="AllWorkers")
    async with running(kubeconfig, TFJobController()):
        await kube.create(TFJOBS, job, namespace=ns)
        await wait_pods(kube, ns, _workers("all", 3), phase="Running")
        await _finish(kube, ns, "all-worker-0", 0)

        def counted(j: Obj | None) -> bool:
            return replica_status(j, "Worker").get("succeeded") == 1

        # The status shows worker 0's success (so the rule has run on it) and is not finished.
        seen = await wait_for(kube, TFJOBS, "all", namespace=ns, until=counted, timeout=30)
        assert has(seen, "Running")
        assert not has(seen, "Succeeded")

        await _finish(kube, ns, "all-worker-2", 0)
        await _finish(kube, ns, "all-worker-1", 0)
        done = await wait_job(kube, ns, "all", "Succeeded")
        assert replica_status(done, "Worker") == {"active": 0, "succeeded": 3, "failed": 0}


async def test_chief_decides_success(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    specs = {"Chief": replica(1), "Worker": replica(2)}
    async with running(kubeconfig, TFJobController()):
        await kube.create(TFJOBS, tfjob("boss", specs), namespace=ns)
        names = {"boss-chief-0", *_workers("boss", 2)}
        pods = await wait_pods(kube, ns, names, phase="Running")
        labels = pods["boss-chief-0"]["metadata"]["labels"]
        assert labels["training.kubeflow.org/job-role"] == "master"
        assert "training.kubeflow.org/job-role" not in pods["boss-worker-0"]["metadata"]["labels"]
        # Worker 0 finishing does not end a job that has a chief...
        await _finish(kube, ns, "boss-worker-0", 0)
        seen = await wait_for(
            kube,
            TFJOBS,
            "boss",
            namespace=ns,
            until=lambda j: replica_status(j, "Worker").get("succeeded") == 1,
            timeout=30,
        )
        assert not has(seen, "Succeeded")
        # ...the chief finishing does.
        await _finish(kube, ns, "boss-chief-0", 0)
        done = await wait_job(kube, ns, "boss", "Succeeded")
        assert replica_status(done, "Chief") == {"active": 0, "succeeded": 1, "failed": 0}


async def test_a_failed_worker_fails_the_job(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    specs = {"PS": replica(1), "Worker": replica(2)}
    async with running(kubeconfig, TFJobController()) as op:
        await kube.create(TFJOBS, tfjob("doomed", specs), namespace=ns)
        await wait_pods(kube, ns, {"doomed-ps-0", *_workers("doomed", 2)}, phase="Running")
        await wait_job(kube, ns, "doomed", "Running")
        await _finish(kube, ns, "doomed-worker-1", 2)
        done = await wait_job(kube, ns, "doomed", "Failed")
        failed = condition(done, "Failed")
        assert failed is not None
        assert failed["reason"] == "TFJobFailed"
        assert (
            failed["message"] == f"TFJob {ns}/doomed has failed because 1 Worker replica(s) failed."
        )
        assert [(c["type"], c["status"]) for c in conditions(done)] == [
            ("Created", "True"),
            ("Running", "False"),
            ("Failed", "True"),
        ]
        assert replica_status(done, "Worker") == {"active": 1, "succeeded": 0, "failed": 1}
        assert replica_status(done, "PS") == {"active": 1, "succeeded": 0, "failed": 0}
        labels = {"job_namespace": ns, "framework": "tensorflow"}
        assert await op.settled_counter("training_operator_jobs_failed_total", 1, **labels) == 1


async def test_a_pod_the_scheduler_cannot_place_is_reported_on_the_job(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    """v1.9's RecordAbnormalPods: the real scheduler marks the pod Unschedulable, and the job
    gets a Warning that names the pod and carries the scheduler's message."""
    ns = namespace
    worker = replica(1)
    worker["template"]["spec"]["nodeSelector"] = {"tfjob-test/never": "true"}
    async with running(kubeconfig, TFJobController()):
        await kube.create(TFJOBS, tfjob("stuck", {"Worker": worker}), namespace=ns)
        event = await wait_event(kube, ns, "Unschedulable")
        assert event["type"] == "Warning"
        assert event["involvedObject"]["kind"] == "TFJob"
        assert event["source"]["component"] == "tfjob-controller"  # v1.9's recorder name
        assert event["message"].startswith("Error pod stuck-worker-0 condition message: 0/")
        assert "node(s) didn't match" in event["message"]
