"""PyTorchJob on real processes beyond the static case: an elastic job grown from 2 workers to 3
with `kubectl scale`, and a worker killed with exit code 137 that the ExitCode policy restarts."""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid

from conftest import RealCluster
from realpods import PODS, logs, real_template, wait_default_service_account
from test_pytorch import PYTORCHJOBS, condition, finished, scripts_configmap

from jobcontroller.runtime.informer import Informer
from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.waiting import wait_for


async def test_elastic_job_grows_from_two_workers_to_three(
    operators: RealCluster, kube: KubeApi, namespace: str
) -> None:
    await wait_default_service_account(kube, namespace)
    cm = await scripts_configmap(kube, namespace, "elastic.py")
    # Debian's torch 1.13 predates Python 3.11, whose Flag enums iterate over single-bit
    # members only: torchrun's default "--redirects 0 --tee 0" (and 3, "both") parse to None
    # and crash it. Tee-ing local rank 0's stdout (1) parses, and keeps it on the console.
    torchrun = ["python3", "-m", "torch.distributed.run", "--redirects", "0:1", "--tee", "0:1"]
    template = real_template("pytorch", [*torchrun, "/scripts/elastic.py"], scripts=cm)
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "elastic"},
        "spec": {
            "elasticPolicy": {
                "rdzvBackend": "c10d",
                "minReplicas": 2,
                "maxReplicas": 3,
                "maxRestarts": 10,
                # One process per pod (torchrun's default, "auto", is one per CPU here).
                "nProcPerNode": 1,
            },
            "pytorchReplicaSpecs": {
                "Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": template}
            },
        },
    }
    await kube.create(PYTORCHJOBS, job, namespace=namespace)
    # Both workers train in a world of 2 before the job is scaled.
    for pod in ("elastic-worker-0", "elastic-worker-1"):
        await wait_for(
            kube,
            PODS,
            pod,
            namespace=namespace,
            until=lambda p: (p or {}).get("status", {}).get("phase") == "Running",
            timeout=300,
        )
    deadline = asyncio.get_running_loop().time() + 180
    while True:
        outs = [await logs(kube, namespace, f"elastic-worker-{i}", "pytorch") for i in (0, 1)]
        if all("world=2" in out for out in outs):
            break
        assert asyncio.get_running_loop().time() < deadline, outs
        await asyncio.sleep(2)
    scaled = await asyncio.to_thread(
        operators.kubectl, "-n", namespace, "scale", "pytorchjob/elastic", "--replicas=3"
    )
    assert "scaled" in scaled.stdout
    done = await wait_for(
        kube, PYTORCHJOBS, "elastic", namespace=namespace, until=finished, timeout=600
    )
    assert done is not None
    outputs = {i: await logs(kube, namespace, f"elastic-worker-{i}", "pytorch") for i in range(3)}
    assert condition(done, "Succeeded") is not None, (done["status"], outputs)
    for out in outputs.values():
        assert re.search(r"ELASTIC-DONE rank=\d world=3 sum=6", out), out
    # The first two restarted into the bigger world; the third joined it.
    assert "world=2" in outputs[0] and "world=2" in outputs[1]


async def test_worker_killed_with_137_is_restarted_and_the_job_succeeds(
    operators: RealCluster, kube: KubeApi, namespace: str
) -> None:
    await wait_default_service_account(kube, namespace)
    cm = await scripts_configmap(kube, namespace, "flaky.py")
    marker = {
        "name": "marker",
        "hostPath": {
            "path": f"/run/jobcontroller-conformance-{uuid.uuid4().hex[:8]}",
            "type": "DirectoryOrCreate",
        },
    }

    def template() -> dict:  # type: ignore[type-arg]
        # Under a shell, as most images' entrypoints are: PID 1 of a container cannot be
        # SIGKILLed from inside it, the training process can, and the shell passes on 137.
        command = ["/bin/sh", "-c", "python3 /scripts/flaky.py; exit $?"]
        t = real_template("pytorch", command, scripts=cm)
        t["spec"]["volumes"].append(marker)
        t["spec"]["containers"][0]["volumeMounts"].append(
            {"name": "marker", "mountPath": "/marker"}
        )
        return t

    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "flaky"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template()},
                "Worker": {"replicas": 1, "restartPolicy": "ExitCode", "template": template()},
            }
        },
    }
    # Every state each pod went through, as a watch reports it: the killed pod is deleted by
    # the operator within moments of failing, too fast for polling to see reliably.
    ends: dict[str, tuple[str, int]] = {}

    def seen(pod: dict) -> None:  # type: ignore[type-arg]
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            terminated = (status.get("state") or {}).get("terminated")
            if terminated and status["name"] == "pytorch":
                ends[pod["metadata"]["uid"]] = (pod["metadata"]["name"], terminated["exitCode"])

    informer = Informer(kube, PODS, namespace=namespace)
    informer.add_handlers(on_add=seen, on_update=lambda _, new: seen(new), on_delete=seen)
    watching = asyncio.create_task(informer.run())
    await informer.wait_synced()
    try:
        await kube.create(PYTORCHJOBS, job, namespace=namespace)
        done = await wait_for(
            kube, PYTORCHJOBS, "flaky", namespace=namespace, until=finished, timeout=600
        )
    finally:
        informer.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
    assert done is not None
    killed = [uid for uid, (name, code) in ends.items() if (name, code) == ("flaky-worker-0", 137)]
    assert len(killed) == 1, ends
    pods = {p["metadata"]["name"]: p for p in (await kube.list(PODS, namespace=namespace))[0]}
    outputs = {n: await logs(kube, namespace, n, "pytorch") for n in sorted(pods)}
    assert condition(done, "Succeeded") is not None, (done["status"], outputs)
    # A new pod took the killed one's place, and it trained with the master.
    assert pods["flaky-worker-0"]["metadata"]["uid"] != killed[0]
    assert ends[pods["flaky-worker-0"]["metadata"]["uid"]] == ("flaky-worker-0", 0)
    assert "FLAKY-DONE rank=1 sum=3" in outputs["flaky-worker-0"]
    assert "FLAKY-DONE rank=0 sum=3" in outputs["flaky-master-0"]
    annotations = done["metadata"].get("annotations") or {}
    assert annotations.get("training.kubeflow.org/restart-count") == "1"
