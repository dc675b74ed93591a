"""Failed replicas: which exit codes are retried, and when retrying stops (backoffLimit).

ExitCode: 128 and above (a signal, e.g. 137 OOM-killed) is retryable, so the pod is recreated;
1-127 is the program's own verdict, so the job fails. OnFailure recreates every failed pod
until the job has restarted ``backoffLimit`` times, counting both recreations (kubeflow #2045:
the anchor only counted in-place container restarts) and the kubelet's in-place restarts.
"""

from __future__ import annotations

from tfjobs import (
    TFJOBS,
    Obj,
    condition,
    events,
    has,
    pods,
    replica,
    tfjob,
    uid,
    wait_event,
    wait_job,
    wait_pods,
)

from jobcontroller.runtime.kube import NODES, PODS, KubeApi
from jobcontroller.testing.operator import running
from jobcontroller.testing.pods import set_pod_status
from jobcontroller.testing.waiting import wait_for_list
from tf_operator.controller import TFJobController

BACKOFF_MESSAGE = "has failed because it has reached the specified backoff limit"


def _labels(ns: str) -> dict[str, str]:
    return {"job_namespace": ns, "framework": "tensorflow"}


async def test_retryable_exit_code_recreates_the_pod_and_the_job_goes_on(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    # The replacement pod waits for a node labelled for this test, so the job sits in
    # Restarting (the condition only lasts until the new pod runs) until the test adds one.
    capacity = f"sim.jobcontroller/{ns}"
    spec = {"Worker": replica(2, restart_policy="ExitCode")}
    async with running(kubeconfig, TFJobController()) as op:
        await kube.create(TFJOBS, tfjob("oom", spec), namespace=ns)
        first = await wait_pods(kube, ns, {"oom-worker-0", "oom-worker-1"}, phase="Running")
        await wait_job(kube, ns, "oom", "Running")
        selector = {"nodeSelector": {capacity: "yes"}}
        await kube.merge_patch(
            TFJOBS,
            "oom",
            {"spec": {"tfReplicaSpecs": {"Worker": {"template": {"spec": selector}}}}},
            namespace=ns,
        )
        await set_pod_status(kube, namespace=ns, name="oom-worker-1", phase="Failed", exit_code=137)

        # A new pod takes the slot; its sibling is untouched.
        def recreated(items: list[Obj]) -> bool:
            w1 = next((p for p in items if p["metadata"]["name"] == "oom-worker-1"), None)
            return w1 is not None and uid(w1) != uid(first["oom-worker-1"])

        await wait_for_list(kube, PODS, namespace=ns, until=recreated, timeout=30)
        now = await pods(kube, ns)
        assert uid(now["oom-worker-0"]) == uid(first["oom-worker-0"])

        job = await wait_job(kube, ns, "oom", "Restarting")
        assert not has(job, "Failed")
        assert not has(job, "Running")
        restarting = condition(job, "Restarting")
        assert restarting is not None
        assert restarting["reason"] == "TFJobRestarting"
        assert "Worker" in restarting["message"]
        event = await wait_event(kube, ns, "TFJobRestarting")
        assert event["type"] == "Warning"
        assert op.counter("training_operator_jobs_restarted_total", **_labels(ns)) == 1

        # Capacity arrives: the replacement runs, Running takes over from Restarting, and the
        # job still succeeds when worker 0 does.
        node = (await kube.list(NODES))[0][0]["metadata"]["name"]
        await kube.merge_patch(NODES, node, {"metadata": {"labels": {capacity: "yes"}}})
        try:
            await wait_pods(kube, ns, {"oom-worker-0", "oom-worker-1"}, phase="Running")
            job = await wait_job(kube, ns, "oom", "Running")
            assert not has(job, "Restarting")
            await set_pod_status(
                kube, namespace=ns, name="oom-worker-0", phase="Succeeded", exit_code=0
            )
            job = await wait_job(kube, ns, "oom", "Succeeded")
        finally:
            await kube.merge_patch(NODES, node, {"metadata": {"labels": {capacity: None}}})
        assert not has(job, "Failed")
        assert op.counter("training_operator_jobs_restarted_total", **_labels(ns)) == 1


async def test_permanent_exit_code_fails_the_job_and_keeps_the_pod(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    spec = {"Worker": replica(2, restart_policy="ExitCode")}
    async with running(kubeconfig, TFJobController()) as op:
        await kube.create(TFJOBS, tfjob("bug", spec), namespace=ns)
        first = await wait_pods(kube, ns, {"bug-worker-0", "bug-worker-1"}, phase="Running")
        await set_pod_status(kube, namespace=ns, name="bug-worker-0", phase="Failed", exit_code=1)

        job = await wait_job(kube, ns, "bug", "Failed")
        failed = condition(job, "Failed")
        assert failed is not None
        assert failed["reason"] == "TFJobFailed"
        assert "Worker" in failed["message"]
        assert not has(job, "Restarting")
        assert job["status"].get("completionTime")
        # Not retried: the failed pod is the one that ran (kept for its logs: cleanPodPolicy
        # defaults to None).
        now = await pods(kube, ns)
        assert uid(now["bug-worker-0"]) == uid(first["bug-worker-0"])
        assert now["bug-worker-0"]["status"]["phase"] == "Failed"
        assert op.counter("training_operator_jobs_restarted_total", **_labels(ns)) == 0
        assert (
            await op.settled_counter("training_operator_jobs_failed_total", 1, **_labels(ns)) == 1
        )
        assert await events(kube, ns, reason="TFJobRestarting") == []


async def test_on_failure_recreations_stop_at_the_backoff_limit(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    """Every pod fails after a second. As for in-place restarts, the job fails at the
    backoffLimit-th failure: two recreations, and the third failure ends it."""
    ns = namespace
    spec = {"Worker": replica(1, exit_code=1, run_for="1s", restart_policy="OnFailure")}
    job = tfjob("flaky", spec, run_policy={"backoffLimit": 3})
    async with running(kubeconfig, TFJobController()) as op:
        await kube.create(TFJOBS, job, namespace=ns)
        done = await wait_job(kube, ns, "flaky", "Failed", timeout=45)
        failed = condition(done, "Failed")
        assert failed is not None
        assert failed["reason"] == "TFJobFailed"
        assert failed["message"] == f"Job flaky {BACKOFF_MESSAGE}"
        assert op.counter("training_operator_jobs_restarted_total", **_labels(ns)) == 2
        assert (
            await op.settled_counter("training_operator_jobs_failed_total", 1, **_labels(ns)) == 1
        )
        annotations = done["metadata"].get("annotations") or {}
        assert annotations.get("training.kubeflow.org/restart-count") == "2"
        # Failed for good: no further pod is created for it.
        await wait_pods(kube, ns, {"flaky-worker-0"}, phase="Failed")


async def test_on_failure_in_place_container_restarts_reach_the_backoff_limit(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    """The kubelet restarts an OnFailure container in place; its restartCount counts too."""
    ns = namespace
    spec = {"Worker": replica(2, restart_policy="OnFailure")}
    job = tfjob("crashy", spec, run_policy={"backoffLimit": 3})
    async with running(kubeconfig, TFJobController()):
        await kube.create(TFJOBS, job, namespace=ns)
        await wait_pods(kube, ns, {"crashy-worker-0", "crashy-worker-1"}, phase="Running")
        # Neither pod alone reaches the limit; together they do.
        for name, restarts in (("crashy-worker-0", 2), ("crashy-worker-1", 1)):
            await set_pod_status(
                kube, namespace=ns, name=name, phase="Running", restart_count=restarts
            )
        done = await wait_job(kube, ns, "crashy", "Failed")
        failed = condition(done, "Failed")
        assert failed is not None
        assert failed["message"] == f"Job crashy {BACKOFF_MESSAGE}"
