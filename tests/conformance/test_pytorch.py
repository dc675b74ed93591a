"""PyTorchJob with real torch.distributed: Master + 2 Workers form a gloo group from the env the
operator injects, all-reduce, and train with DDP until the loss has fallen; the Workers' init
container waits for the Master's port for real."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import RealCluster
from realpods import CONFIGMAPS, PODS, logs, real_template, wait_default_service_account

from jobcontroller.runtime.apitypes import Resource
from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.waiting import wait_for

PYTORCHJOBS = Resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
SCRIPTS = Path(__file__).parent / "scripts"


def finished(job: dict | None) -> bool:  # type: ignore[type-arg]
    conds = ((job or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] in ("Succeeded", "Failed") and c["status"] == "True" for c in conds)


def condition(job: dict, ctype: str) -> dict | None:  # type: ignore[type-arg]
    conds = (job.get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == ctype and c["status"] == "True"), None)


async def scripts_configmap(kube: KubeApi, namespace: str, *names: str) -> str:
    await kube.create(
        CONFIGMAPS,
        {
            "metadata": {"name": "scripts"},
            "data": {n: (SCRIPTS / n).read_text() for n in names},
        },
        namespace=namespace,
    )
    return "scripts"


async def test_ddp_master_and_two_workers_allreduce_and_train(
    operators: RealCluster, kube: KubeApi, namespace: str
) -> None:
    await wait_default_service_account(kube, namespace)
    cm = await scripts_configmap(kube, namespace, "ddp.py")
    template = real_template("pytorch", ["python3", "/scripts/ddp.py"], scripts=cm)
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "ddp"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template},
                "Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": template},
            }
        },
    }
    await kube.create(PYTORCHJOBS, job, namespace=namespace)
    done = await wait_for(
        kube, PYTORCHJOBS, "ddp", namespace=namespace, until=finished, timeout=600
    )
    assert done is not None
    pods = {p["metadata"]["name"]: p for p in (await kube.list(PODS, namespace=namespace))[0]}
    outputs = {name: await logs(kube, namespace, name, "pytorch") for name in sorted(pods)}
    assert condition(done, "Succeeded") is not None, (done["status"], outputs)

    assert set(pods) == {"ddp-master-0", "ddp-worker-0", "ddp-worker-1"}
    ranks = {}
    weights = set()
    for name, out in outputs.items():
        allreduce = re.search(r"ALLREDUCE rank=(\d) world=3 sum=6 expected=6", out)
        assert allreduce, out
        ranks[name] = int(allreduce.group(1))
        trained = re.search(
            r"TRAINED rank=\d first_loss=([\d.]+) final_loss=([\d.]+) w=([-\d.]+) b=([-\d.]+)", out
        )
        assert trained, out
        first, final, w, b = map(float, trained.groups())
        assert final < first / 100, out
        assert abs(w - 3) < 0.1 and abs(b - 2) < 0.1, out
        weights.add((w, b))
    assert ranks == {"ddp-master-0": 0, "ddp-worker-0": 1, "ddp-worker-1": 2}
    assert len(weights) == 1  # DDP kept every replica's model identical
    for worker in ("ddp-worker-0", "ddp-worker-1"):
        init = pods[worker]["status"]["initContainerStatuses"][0]
        assert init["name"] == "init-pytorch"
        assert init["state"]["terminated"]["exitCode"] == 0
        waited = await logs(kube, namespace, worker, "init-pytorch")
        assert "master ddp-master-0:23456 accepts connections" in waited
