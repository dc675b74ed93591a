"""PaddleJob (v1) with real PaddlePaddle: 2 Workers in collective mode, each running
``python -m paddle.distributed.launch`` with no flags, so the launchers take the job from the
env the operator injects (PADDLE_MASTER, PADDLE_NNODES, PADDLE_JOB_ID): they meet at worker 0,
which serves the rendezvous and hands out the ranks, then all-reduce and train one model over
gloo (PaddlePaddle's CPU wheel; on CPU the launcher picks gloo by itself)."""

from __future__ import annotations

import re

from conftest import RealCluster
from realpods import PODS, logs, real_template, wait_default_service_account
from test_pytorch import condition, finished, scripts_configmap

from jobcontroller.runtime.apitypes import Resource
from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.images import PADDLE_REF
from jobcontroller.testing.waiting import wait_for

PADDLEJOBS = Resource("kubeflow.org", "v1", "PaddleJob", "paddlejobs")


async def test_two_workers_meet_at_worker_0_allreduce_and_train_one_model(
    operators: RealCluster, kube: KubeApi, namespace: str
) -> None:
    await wait_default_service_account(kube, namespace)
    cm = await scripts_configmap(kube, namespace, "paddle_collective.py")
    template = real_template(
        "paddle",
        ["python3", "-m", "paddle.distributed.launch", "/scripts/paddle_collective.py"],
        image=PADDLE_REF,
        scripts=cm,
    )
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PaddleJob",
        "metadata": {"name": "pd"},
        "spec": {
            "paddleReplicaSpecs": {
                "Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": template}
            }
        },
    }
    await kube.create(PADDLEJOBS, job, namespace=namespace)
    done = await wait_for(kube, PADDLEJOBS, "pd", namespace=namespace, until=finished, timeout=600)
    assert done is not None
    pods = {p["metadata"]["name"]: p for p in (await kube.list(PODS, namespace=namespace))[0]}
    outputs = {name: await logs(kube, namespace, name, "paddle") for name in sorted(pods)}
    assert condition(done, "Succeeded") is not None, (done["status"], outputs)
    for name, out in outputs.items():
        print(f"--- {name}\n{out}")

    assert set(pods) == {"pd-worker-0", "pd-worker-1"}
    # The launchers read the job from the operator's env: worker 0 served the rendezvous at its
    # own pod IP (the kubelet expanded $(POD_IP_DUMMY)), worker 1 reached it through worker 0's
    # Service, on the default port, both as one job of two nodes.
    pod_ip = pods["pd-worker-0"]["status"]["podIP"]
    assert f"PADDLE_MASTER value: {pod_ip}:36543" in outputs["pd-worker-0"]
    assert "PADDLE_MASTER value: pd-worker-0:36543" in outputs["pd-worker-1"]
    ranks, weights = set(), set()
    for name, out in outputs.items():
        assert "Job: pd, mode collective, replicas 2[2:2]" in out, out
        reduced = re.search(
            r"ALLREDUCE rank=(\d) world=2 sum=3 expected=3 backend=gloo device=cpu "
            r"host=([\w-]+) hosts=([\w,-]+)",
            out,
        )
        assert reduced, out
        rank, host, hosts = int(reduced.group(1)), reduced.group(2), reduced.group(3)
        assert host == name, out
        # Gathered across the pods in rank order: each rank is a different pod.
        assert sorted(hosts.split(",")) == ["pd-worker-0", "pd-worker-1"], out
        assert hosts.split(",")[rank] == name, out
        ranks.add(rank)
        trained = re.search(
            rf"TRAINED rank={rank} first_loss=([\d.]+) final_loss=([\d.]+) "
            r"w=([-\d.]+) b=([-\d.]+)",
            out,
        )
        assert trained, out
        first, final, w, b = map(float, trained.groups())
        assert final < first / 100, out
        assert abs(w - 3) < 0.1 and abs(b - 2) < 0.1, out
        weights.add((w, b))
    assert ranks == {0, 1}
    assert len(weights) == 1, weights
