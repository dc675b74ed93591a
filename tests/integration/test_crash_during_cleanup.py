"""A finished job never runs again, wherever the operator dies.

The operator is crashed right after the API server accepted the first clean-up deletion of a
job that has just finished (cleanPodPolicy: All), on the success path and on the failure path
under restartPolicy Never. The operator that comes up next must find a finished job and create
nothing: before the terminal condition was stored ahead of the clean-up, it found an unfinished
job with its pods gone and started every replica again.
"""

from __future__ import annotations

from typing import Any

import pytest
from tfjobs import TFJOBS, has, pods, replica, tfjob, wait_job, wait_pods

from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.operator import running
from jobcontroller.testing.pods import set_pod_status
from jobcontroller.testing.waiting import wait_for_list
from tf_operator.controller import TFJobController

ALL = {"job-ps-0", "job-worker-0", "job-worker-1"}


@pytest.mark.parametrize(
    ("pod", "phase", "exit_code", "outcome"),
    [("job-worker-0", "Succeeded", 0, "Succeeded"), ("job-worker-1", "Failed", 1, "Failed")],
)
async def test_no_replica_runs_again_after_a_crash_in_the_clean_up(
    kube: KubeApi,
    kubeconfig: str,
    kubeflow_crds: list[str],
    namespace: str,
    pod: str,
    phase: str,
    exit_code: int,
    outcome: str,
) -> None:
    ns = namespace
    job = tfjob(
        "job",
        {"PS": replica(1), "Worker": replica(2, restart_policy="Never")},
        run_policy={"cleanPodPolicy": "All"},
    )
    crashed: list[str] = []
    async with running(kubeconfig, TFJobController()) as first:
        delete = first.api.delete

        async def delete_then_crash(resource: Any, name: str, **kwargs: Any) -> None:
            await delete(resource, name, **kwargs)
            if resource.kind == "Pod" and not crashed:
                crashed.append(name)
                first.crash()

        first.api.delete = delete_then_crash  # type: ignore[method-assign]
        await kube.create(TFJOBS, job, namespace=ns)
        before = await wait_pods(kube, ns, ALL, phase="Running")
        await set_pod_status(kube, namespace=ns, name=pod, phase=phase, exit_code=exit_code)
        await wait_for_list(
            kube, TFJOBS, namespace=ns, until=lambda _: bool(crashed), what="the first deletion"
        )
    assert crashed, "the operator never started the clean-up"

    async with running(kubeconfig, TFJobController()):
        done = await wait_job(kube, ns, "job", outcome)
        await wait_pods(kube, ns, set())
    assert has(done, outcome)
    assert not has(done, "Running")
    # Every pod that ever existed is one of the originals: none was created again.
    now = await pods(kube, ns)
    originals = {p["metadata"]["uid"] for p in before.values()}
    assert all(p["metadata"]["uid"] in originals for p in now.values())
