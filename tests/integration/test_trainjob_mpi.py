"""TrainJobs on the MPI policy (the shipped deepspeed-distributed runtime) on a real API server
with the real JobSet controller and kwok's pods: the SSH key Secret and the hostfile the
launcher mounts exist before its pods, and the TrainJob completes when its launcher does (the
runtime's success policy), while the nodes' sshd pods run on until the JobSet ends."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from trainer_fixtures import TRAINJOBS, Obj
from trainjob_helpers import (
    TIMEOUT,
    condition,
    events_of,
    finishing,
    is_true,
    shipped_runtimes,
)

from jobcontroller.runtime.kube import CONFIGMAPS, EVENTS, SECRETS, ApiError, KubeApi
from jobcontroller.testing.jobset import JOBSETS, JobSetController
from jobcontroller.testing.operator import RunningController, running
from jobcontroller.testing.waiting import wait_for, wait_for_list
from trainer_operator.controller import TrainJobController

__all__ = ["shipped_runtimes"]  # a fixture this module's tests use


@pytest_asyncio.fixture(loop_scope="session")
async def operator(
    kubeconfig: str, jobset: JobSetController, shipped_runtimes: list[str], namespace: str
) -> AsyncIterator[RunningController]:
    async with running(kubeconfig, TrainJobController(), namespace=namespace) as op:
        yield op


def _deepspeed(name: str, **trainer: object) -> Obj:
    body: Obj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "deepspeed-distributed"}, "trainer": dict(trainer)},
    }
    # The launcher (the trainer) finishes; the nodes' sshd runs until the JobSet ends.
    return finishing(body, job="launcher", run_for="2s")


async def test_deepspeed_trainjob_completes_with_its_keys_and_hostfile(
    kube: KubeApi, operator: RunningController, namespace: str
) -> None:
    body = _deepspeed("ds", numNodes=3, numProcPerNode=2, command=["mpirun", "python3", "t.py"])
    created = await kube.create(TRAINJOBS, body, namespace=namespace)
    done = await wait_for(
        kube,
        TRAINJOBS,
        "ds",
        namespace=namespace,
        timeout=TIMEOUT,
        until=lambda t: is_true(t, "Complete") or is_true(t, "Failed"),
        what="MPI TrainJob finished",
    )
    complete = condition(done, "Complete")
    assert complete is not None and complete["status"] == "True", done
    uid = created["metadata"]["uid"]

    secret = await kube.get(SECRETS, "ds-mpi-ssh-auth", namespace=namespace)
    assert (secret["type"], secret["immutable"]) == ("kubernetes.io/ssh-auth", True)
    private = base64.b64decode(secret["data"]["ssh-privatekey"])
    public = base64.b64decode(secret["data"]["ssh-publickey"])
    assert private.startswith(b"-----BEGIN EC PRIVATE KEY-----")
    assert public.startswith(b"ecdsa-sha2-nistp521 ")
    hostfile = await kube.get(CONFIGMAPS, "ds-mpi-hostfile", namespace=namespace)
    assert hostfile["data"]["hostfile"] == (
        "ds-node-0-0.ds slots=2\nds-node-0-1.ds slots=2\nds-launcher-0-0.ds slots=2\n"
    )
    for obj in (secret, hostfile):
        [ref] = obj["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["uid"], ref["controller"]) == ("TrainJob", uid, True)

    jobset = await kube.get(JOBSETS, "ds", namespace=namespace)
    jobs = {r["name"]: r for r in jobset["spec"]["replicatedJobs"]}
    assert jobs["node"]["template"]["spec"]["parallelism"] == 2
    launcher = jobs["launcher"]["template"]["spec"]["template"]["spec"]
    [container] = launcher["containers"]
    assert container["command"] == ["mpirun", "python3", "t.py"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert env["OMPI_MCA_orte_set_default_slots"] == "2"
    assert {v["name"] for v in launcher["volumes"]} == {"mpi-ssh-auth", "mpi-hostfile"}
    assert [e["reason"] for e in await events_of(kube, namespace, "ds")] == []


async def test_reserved_mpi_env_gets_a_warning_and_no_jobset(
    kube: KubeApi, operator: RunningController, namespace: str
) -> None:
    body = _deepspeed(
        "ds-env", numNodes=2, env=[{"name": "OMPI_MCA_plm_rsh_args", "value": "-p 22"}]
    )
    await kube.create(TRAINJOBS, body, namespace=namespace)
    events = await wait_for_list(
        kube,
        EVENTS,
        namespace=namespace,
        until=lambda items: any(e["involvedObject"]["name"] == "ds-env" for e in items),
        what="an event on the TrainJob",
    )
    [event] = [e for e in events if e["involvedObject"]["name"] == "ds-env"]
    assert (event["type"], event["reason"]) == ("Warning", "TrainJobResourcesCreationFailed")
    assert event["message"] == (
        "TrainJob resources reconciliation failed: spec.trainer.env: Invalid value: must not "
        "have reserved envs, invalid envs configured: [OMPI_MCA_plm_rsh_args]"
    )
    for resource, name in ((JOBSETS, "ds-env"), (SECRETS, "ds-env-mpi-ssh-auth")):
        with pytest.raises(ApiError) as missing:
            await kube.get(resource, name, namespace=namespace)
        assert missing.value.is_not_found
