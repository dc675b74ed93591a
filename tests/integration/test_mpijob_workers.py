"""The launcher and the hosts follow the workers: WaitForWorkersReady, discover_hosts.sh."""

from __future__ import annotations

import asyncio

from mpijob_fixtures import (
    MPIJOBS,
    UNSCHEDULABLE,
    launcher_job,
    mpijob,
    wait_condition,
    worker_pods,
)

from jobcontroller.runtime.kube import CONFIGMAPS, JOBS, KubeApi
from jobcontroller.testing.operator import running
from jobcontroller.testing.pods import set_pod_status
from jobcontroller.testing.waiting import wait_for
from mpi_operator.controller import MPIJobController


async def test_wait_for_workers_ready_holds_the_launcher_back(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    async with running(kubeconfig, MPIJobController()):
        body = mpijob(
            "pi",
            launcher_exit=None,
            worker_spec=UNSCHEDULABLE,
            launcherCreationPolicy="WaitForWorkersReady",
        )
        await kube.create(MPIJOBS, body, namespace=ns)
        await worker_pods(kube, ns, count=2, phase="Pending")
        await wait_for(kube, CONFIGMAPS, "pi-config", namespace=ns, until=bool)
        await set_pod_status(kube, namespace=ns, name="pi-worker-0", phase="Running")
        await set_pod_status(kube, namespace=ns, name="pi-worker-1", phase="Running", ready=False)
        await wait_for(
            kube,
            MPIJOBS,
            "pi",
            namespace=ns,
            until=lambda j: (
                (j or {}).get("status", {}).get("replicaStatuses", {}).get("Worker")
                == {"active": 2, "succeeded": 0, "failed": 0}
            ),
        )
        await asyncio.sleep(1)  # several reconciles have seen both workers by now
        assert (await kube.list(JOBS, namespace=ns))[0] == []
        await set_pod_status(kube, namespace=ns, name="pi-worker-1", phase="Running")
        await launcher_job(kube, "pi", namespace=ns)
        await wait_condition(kube, "pi", "Running", namespace=ns)


async def test_suspended_job_waiting_for_workers_gets_no_launcher(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    """mpi-operator #615: a suspended job has no workers, so "all workers ready" holds
    trivially there and it created the launcher; it must wait for real workers."""
    ns = namespace
    async with running(kubeconfig, MPIJobController()):
        body = mpijob(
            "pi",
            launcher_exit=None,
            launcherCreationPolicy="WaitForWorkersReady",
            runPolicy={"suspend": True},
        )
        await kube.create(MPIJOBS, body, namespace=ns)
        await wait_condition(kube, "pi", "Suspended", namespace=ns)
        await wait_for(kube, CONFIGMAPS, "pi-config", namespace=ns, until=bool)
        await asyncio.sleep(1)
        assert (await kube.list(JOBS, namespace=ns))[0] == []
        await kube.merge_patch(
            MPIJOBS, "pi", {"spec": {"runPolicy": {"suspend": False}}}, namespace=ns
        )
        launcher = await launcher_job(kube, "pi", namespace=ns)
        assert not launcher["spec"].get("suspend")
        await wait_condition(kube, "pi", "Running", namespace=ns)


async def test_discover_hosts_follows_running_workers(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace

    def script(*workers: int) -> str:
        return "#!/bin/sh\n" + "".join(f"echo pi-worker-{i}.pi.{ns}.svc\n" for i in workers)

    async def hosts_become(*workers: int) -> None:
        await wait_for(
            kube,
            CONFIGMAPS,
            "pi-config",
            namespace=ns,
            until=lambda c: c is not None and c["data"]["discover_hosts.sh"] == script(*workers),
        )

    async with running(kubeconfig, MPIJobController()):
        body = mpijob("pi", workers=3, launcher_exit=None, worker_spec=UNSCHEDULABLE)
        await kube.create(MPIJOBS, body, namespace=ns)
        await worker_pods(kube, ns, count=3, phase="Pending")
        await hosts_become()
        await set_pod_status(kube, namespace=ns, name="pi-worker-2", phase="Running")
        await hosts_become(2)
        await set_pod_status(kube, namespace=ns, name="pi-worker-0", phase="Running")
        await hosts_become(0, 2)
        await set_pod_status(kube, namespace=ns, name="pi-worker-2", phase="Failed", exit_code=1)
        await hosts_become(0)
        # The hostfile lists every worker whatever its state.
        config = await kube.get(CONFIGMAPS, "pi-config", namespace=ns)
        assert config["data"]["hostfile"] == "".join(
            f"pi-worker-{i}.pi.{ns}.svc slots=1\n" for i in range(3)
        )
        # A failed worker is not recreated: retries are the launcher Job's.
        workers = await worker_pods(kube, ns, count=3)
        assert workers["pi-worker-2"]["status"]["phase"] == "Failed"
