"""cleanPodPolicy when a job finishes, on success and on failure.

None keeps every pod, Running removes those still running (or pending), All removes all; a
Service goes with its pod. The failure path is the backoff limit, where the anchor deleted
every pod before failing the job and so ignored None and Running (kubeflow #3419).
"""

from __future__ import annotations

import pytest
from tfjobs import (
    TFJOBS,
    condition,
    live_pods,
    replica,
    services,
    tfjob,
    wait_job,
    wait_pods,
    wait_services,
)

from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.operator import running
from jobcontroller.testing.pods import set_pod_status
from tf_operator.controller import TFJobController

ALL = {"job-ps-0", "job-worker-0", "job-worker-1"}


@pytest.mark.parametrize(
    ("policy", "kept"),
    [
        ("None", ALL),
        # Worker 0 decides success; the PS and worker 1 are still running then.
        ("Running", {"job-worker-0"}),
        ("All", set()),
    ],
)
async def test_clean_pod_policy_on_success(
    kube: KubeApi,
    kubeconfig: str,
    kubeflow_crds: list[str],
    namespace: str,
    policy: str,
    kept: set[str],
) -> None:
    ns = namespace
    specs = {"PS": replica(1), "Worker": replica(2)}
    job = tfjob("job", specs, run_policy={"cleanPodPolicy": policy})
    async with running(kubeconfig, TFJobController()):
        await kube.create(TFJOBS, job, namespace=ns)
        await wait_pods(kube, ns, ALL, phase="Running")
        await wait_services(kube, ns, ALL)
        await set_pod_status(
            kube, namespace=ns, name="job-worker-0", phase="Succeeded", exit_code=0
        )
        await wait_job(kube, ns, "job", "Succeeded")
        left = await wait_pods(kube, ns, kept)
        await wait_services(kube, ns, kept)
        if "job-worker-0" in kept:
            assert left["job-worker-0"]["status"]["phase"] == "Succeeded"
        assert all(left[p]["status"]["phase"] == "Running" for p in kept - {"job-worker-0"})


@pytest.mark.parametrize(
    ("policy", "kept"),
    [
        # The backoff limit stops the running pods whatever the policy (as a batch/v1 Job);
        # the failed worker stays for its logs unless the policy is All.
        ("None", {"job-worker-1"}),
        ("Running", {"job-worker-1"}),
        ("All", set()),
    ],
)
async def test_clean_pod_policy_when_the_backoff_limit_fails_the_job(
    kube: KubeApi,
    kubeconfig: str,
    kubeflow_crds: list[str],
    namespace: str,
    policy: str,
    kept: set[str],
) -> None:
    ns = namespace
    specs = {"PS": replica(1), "Worker": replica(2, restart_policy="OnFailure")}
    job = tfjob("job", specs, run_policy={"cleanPodPolicy": policy, "backoffLimit": 0})
    async with running(kubeconfig, TFJobController()):
        await kube.create(TFJOBS, job, namespace=ns)
        await wait_pods(kube, ns, ALL, phase="Running")
        await wait_services(kube, ns, ALL)
        await set_pod_status(kube, namespace=ns, name="job-worker-1", phase="Failed", exit_code=1)
        done = await wait_job(kube, ns, "job", "Failed")
        failed = condition(done, "Failed")
        assert failed is not None
        assert "backoff limit" in failed["message"]
        left = await wait_pods(kube, ns, kept)
        await wait_services(kube, ns, kept)
        if "job-worker-1" in kept:
            assert left["job-worker-1"]["status"]["phase"] == "Failed"
        # Nothing is recreated after the job failed (the stopped pods may still be finishing).
        assert set(await live_pods(kube, ns)) == kept
        assert set(await services(kube, ns)) == kept
