"""MPIJob v2beta1 with OpenMPI: the launcher's mpirun reaches both workers over SSH with the
job's generated keys and hostfile, and an mpi4py allreduce gives the right sum on every rank."""

from __future__ import annotations

import re

from conftest import RealCluster
from realpods import PODS, logs, real_template, wait_default_service_account
from test_pytorch import condition, finished, scripts_configmap

from jobcontroller.runtime.apitypes import Resource
from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.waiting import wait_for

MPIJOBS = Resource("kubeflow.org", "v2beta1", "MPIJob", "mpijobs")


async def test_mpirun_over_ssh_allreduces_on_every_rank(
    operators: RealCluster, kube: KubeApi, namespace: str
) -> None:
    await wait_default_service_account(kube, namespace)
    cm = await scripts_configmap(kube, namespace, "allreduce_mpi.py")
    launcher = real_template(
        "mpi",
        ["mpirun", "--allow-run-as-root", "-np", "2", "python3", "/scripts/allreduce_mpi.py"],
        scripts=cm,
    )
    worker = real_template("mpi", ["/usr/sbin/sshd", "-De"], scripts=cm)
    job = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi"},
        "spec": {
            "slotsPerWorker": 1,
            "mpiImplementation": "OpenMPI",
            "launcherCreationPolicy": "WaitForWorkersReady",
            "runPolicy": {"cleanPodPolicy": "None"},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": launcher},
                "Worker": {"replicas": 2, "template": worker},
            },
        },
    }
    await kube.create(MPIJOBS, job, namespace=namespace)
    done = await wait_for(kube, MPIJOBS, "pi", namespace=namespace, until=finished, timeout=600)
    assert done is not None
    pods, _ = await kube.list(PODS, namespace=namespace)
    launchers = [p for p in pods if p["metadata"]["name"].startswith("pi-launcher")]
    outputs = {
        p["metadata"]["name"]: await logs(kube, namespace, p["metadata"]["name"]) for p in launchers
    }
    assert condition(done, "Succeeded") is not None, (done["status"], outputs)
    succeeded = [p for p in launchers if p["status"]["phase"] == "Succeeded"]
    assert len(succeeded) == 1
    out = outputs[succeeded[0]["metadata"]["name"]]
    ranks = re.findall(r"MPI rank=(\d) size=2 host=(\S+) sum=3 expected=3", out)
    # One rank on each worker, each found through the hostfile and reached over SSH.
    assert sorted(ranks) == [("0", "pi-worker-0"), ("1", "pi-worker-1")], out
