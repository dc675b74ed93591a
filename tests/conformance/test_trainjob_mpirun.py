"""A TrainJob on the MPI policy run for real: upstream's deepspeed-distributed runtime (its
launcher also a host, ``runLauncherAsNode``; non-root: user 1000, sshd on 2222 with
mpi-operator's base-image config) with only its image replaced by the project's OpenMPI one.
The launcher's ``mpirun`` finds the hosts in the hostfile the operator wrote, reaches the node
pods over SSH with the TrainJob's own generated keys (mounted 0640 for group 1000, as v2.3.0
mounts them), and an mpi4py allreduce gives the right sum on every rank; the TrainJob is
Complete when the launcher is (the runtime's success policy)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time

import pytest
from conftest import RealCluster
from realpods import PODS, TRAINER_REF, wait_default_service_account
from test_pytorch import scripts_configmap
from test_trainjob import (
    TRAINING_RUNTIMES,
    TRAINJOBS,
    LogKeeper,
    is_true,
    local_runtime,
)

from jobcontroller.runtime.apitypes import EVENTS
from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.waiting import wait_for


async def test_mpi_trainjob_mpirun_over_ssh_allreduces_on_every_rank(
    operators: RealCluster, kube: KubeApi, namespace: str
) -> None:
    await wait_default_service_account(kube, namespace)
    cm = await scripts_configmap(kube, namespace, "allreduce_mpi.py")
    runtime = local_runtime(
        "deepspeed_distributed.yaml", name="mpi-local", image=TRAINER_REF, scripts=cm
    )
    await kube.create(TRAINING_RUNTIMES, runtime, namespace=namespace)
    trainjob = {
        "apiVersion": TRAINJOBS.api_version,
        "kind": "TrainJob",
        "metadata": {"name": "mpi"},
        "spec": {
            "runtimeRef": {"name": "mpi-local", "kind": "TrainingRuntime"},
            "trainer": {
                # Three hosts (two nodes and the launcher), one slot each: three ranks.
                "numNodes": 3,
                "command": ["mpirun", "-np", "3", "python3", "/scripts/allreduce_mpi.py"],
            },
        },
    }
    await kube.create(TRAINJOBS, trainjob, namespace=namespace)
    started = time.monotonic()
    keeper = LogKeeper(kube, namespace, "mpi")
    reading = asyncio.create_task(keeper.run())
    try:
        done = await wait_for(
            kube,
            TRAINJOBS,
            "mpi",
            namespace=namespace,
            until=lambda o: is_true(o, "Complete") or is_true(o, "Failed"),
            timeout=600,
        )
    finally:
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reading
    await keeper.read()
    outputs = keeper.outputs
    if done is None or not is_true(done, "Complete"):
        events, _ = await kube.list(EVENTS, namespace=namespace)
        seen = [f"{e['involvedObject']['name']}: {e['reason']} {e.get('message')}" for e in events]
        pytest.fail(f"{(done or {}).get('status')}\n{outputs}\n" + "\n".join(seen))
    print(f"\nTrainJob mpi Complete {time.monotonic() - started:.0f}s after creation")
    for pod_name, out in sorted(outputs.items()):
        print(f"--- {pod_name}\n{out}")
    status = {s["name"]: s for s in done["status"]["jobsStatus"]}
    assert status["launcher"]["succeeded"] == 1 and status["launcher"]["failed"] == 0, status
    pods, _ = await kube.list(
        PODS, namespace=namespace, label_selector="jobset.sigs.k8s.io/jobset-name=mpi"
    )
    [launcher] = [p for p in pods if p["spec"]["hostname"] == "mpi-launcher-0-0"]
    assert launcher["status"]["phase"] == "Succeeded", launcher["status"]
    assert launcher["spec"]["nodeName"] == "real-node-0"
    out = outputs[launcher["metadata"]["name"]]
    ranks = re.findall(r"MPI rank=(\d) size=3 host=(\S+) sum=6 expected=6", out)
    # One rank on each host of the hostfile: the two nodes (reached over SSH with the
    # TrainJob's keys) and the launcher itself (Open MPI numbers mpirun's own host first).
    assert sorted(rank for rank, _ in ranks) == ["0", "1", "2"], out
    assert sorted(host for _, host in ranks) == [
        "mpi-launcher-0-0",
        "mpi-node-0-0",
        "mpi-node-0-1",
    ], out
