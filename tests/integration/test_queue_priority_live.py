"""Issue 27: under a backlog of jobs not yet started, a started job whose pods came up is
marked Running before the backlog is worked off, not after every job's first pass."""

from __future__ import annotations

from tfjobs import JOB_NAME_LABEL, TFJOBS, replica, tfjob, wait_job

from jobcontroller.runtime.kube import PODS, KubeApi
from jobcontroller.testing.operator import running
from tf_operator.controller import TFJobController

JOBS = 60


async def test_a_job_is_running_before_the_backlog_has_its_pods(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    names = [f"j-{i:02d}" for i in range(JOBS)]
    for name in names:  # all there at start: the initial list queues them in name order
        await kube.create(TFJOBS, tfjob(name, {"Worker": replica(1)}), namespace=ns)
    # One worker and a low QPS: creating every job's pod and Service takes about 10 s, much
    # longer than the simulated kubelet needs to mark the first job's pod Running.
    async with running(kubeconfig, TFJobController(), workers=1, qps=20, burst=20):
        await wait_job(kube, ns, names[0], "Running", timeout=60)
        last, _ = await kube.list(
            PODS, namespace=ns, label_selector=f"{JOB_NAME_LABEL}={names[-1]}"
        )
        # In FIFO order the first job's second pass waited behind every first pass, so by the
        # time it was Running the last job had its pod already.
        assert last == []
        for name in names[-3:]:  # and the backlog is still served
            await wait_job(kube, ns, name, "Running", timeout=90)
