"""Suspending an MPIJob suspends its launcher Job and removes its workers; resuming restores."""

from __future__ import annotations

from mpijob_fixtures import (
    MPIJOBS,
    condition,
    launcher_job,
    mpijob,
    wait_condition,
    worker_pods,
)

from jobcontroller.runtime.kube import CONFIGMAPS, JOBS, PODS, SECRETS, SERVICES, KubeApi
from jobcontroller.testing.operator import running
from jobcontroller.testing.waiting import wait_for, wait_for_list
from mpi_operator.controller import MPIJobController


def suspend(value: bool) -> dict[str, object]:
    return {"spec": {"runPolicy": {"suspend": value}}}


async def test_suspend_and_resume(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    async with running(kubeconfig, MPIJobController()):
        await kube.create(MPIJOBS, mpijob("pi", launcher_exit=None), namespace=ns)
        await wait_condition(kube, "pi", "Running", namespace=ns)
        secret = await kube.get(SECRETS, "pi-ssh", namespace=ns)

        await kube.merge_patch(MPIJOBS, "pi", suspend(True), namespace=ns)
        job = await wait_condition(kube, "pi", "Suspended", namespace=ns)
        running_cond = condition(job, "Running")
        assert running_cond is not None and running_cond["status"] == "False"
        await wait_for(
            kube,
            JOBS,
            "pi-launcher",
            namespace=ns,
            until=lambda j: j is not None and j["spec"].get("suspend") is True,
        )
        await wait_for_list(
            kube,
            PODS,
            namespace=ns,
            label_selector="training.kubeflow.org/job-name=pi",
            until=lambda items: not items,
        )
        # What does not use resources stays: Service, hostfile and the same SSH keys.
        await kube.get(SERVICES, "pi", namespace=ns)
        await kube.get(CONFIGMAPS, "pi-config", namespace=ns)
        assert (await kube.get(SECRETS, "pi-ssh", namespace=ns))["data"] == secret["data"]

        await kube.merge_patch(MPIJOBS, "pi", suspend(False), namespace=ns)
        await worker_pods(kube, ns, count=2, phase="Running")
        launcher = await launcher_job(kube, "pi", namespace=ns)
        await wait_for(
            kube,
            JOBS,
            "pi-launcher",
            namespace=ns,
            until=lambda j: j is not None and not j["spec"].get("suspend"),
        )
        assert (
            launcher["metadata"]["uid"]
            == (await kube.get(JOBS, "pi-launcher", namespace=ns))["metadata"]["uid"]
        )
        job = await wait_condition(kube, "pi", "Running", namespace=ns)
        suspended = condition(job, "Suspended")
        assert suspended is not None
        assert (suspended["status"], suspended["reason"]) == ("False", "MPIJobResumed")


async def test_created_suspended_gets_a_suspended_launcher_and_no_workers(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    async with running(kubeconfig, MPIJobController()):
        body = mpijob("pi", runPolicy={"suspend": True})
        await kube.create(MPIJOBS, body, namespace=ns)
        job = await wait_condition(kube, "pi", "Suspended", namespace=ns)
        assert "startTime" not in job["status"]
        launcher = await launcher_job(kube, "pi", namespace=ns)
        assert launcher["spec"]["suspend"] is True
        pods, _ = await kube.list(PODS, namespace=ns)
        assert pods == []
        await kube.merge_patch(MPIJOBS, "pi", suspend(False), namespace=ns)
        await wait_condition(kube, "pi", "Succeeded", namespace=ns)
