"""End-to-end operator throughput: many TFJobs on the local kwok cluster.

Starts the full local cluster, runs the TFJob controller in-process, submits JOBS jobs of
1 PS + WORKERS workers whose pods exit 0 after 2 s, and prints how long until every pod existed
and every job Succeeded, pods created per second, reconciles per job, API requests by verb, and
the process's peak RSS. The apiserver, scheduler and kwok share the same 2 cores, so the numbers
bound the whole system, not the operator alone.

    uv run python bench/bench_tfjobs.py [JOBS] [WORKERS]
"""

from __future__ import annotations

import asyncio
import resource
import sys
import time
from typing import Any

from jobcontroller.runtime.kube import NAMESPACES, PODS, KubeApi, Resource
from jobcontroller.testing.controlplane import ControlPlane
from jobcontroller.testing.operator import install_crds, running
from jobcontroller.testing.pods import simulate
from tf_operator.controller import TFJobController

TFJOBS = Resource("kubeflow.org", "v1", "TFJob", "tfjobs")
NS = "bench"


def job(name: str, workers: int) -> dict[str, Any]:
    def spec(n: int) -> dict[str, Any]:
        template = {"spec": {"containers": [{"name": "tensorflow", "image": "tf"}]}}
        return {"replicas": n, "template": simulate(template, 0, run_for="2s")}

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {"tfReplicaSpecs": {"PS": spec(1), "Worker": spec(workers)}},
    }


def succeeded(j: dict[str, Any]) -> bool:
    conds = j.get("status", {}).get("conditions", [])
    return any(c["type"] == "Succeeded" and c["status"] == "True" for c in conds)


async def main(jobs: int, workers: int) -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    print(f"starting the local cluster; {jobs} TFJobs x (1 PS + {workers} workers)")
    with ControlPlane(controller_manager=True, scheduler=True, kwok=True, nodes=4) as cp:
        async with await KubeApi.from_config(
            kubeconfig=str(cp.kubeconfig), qps=1000, burst=1000
        ) as kube:
            await install_crds(kube, sorted((root / "manifests/base/crds").glob("*.yaml")))
            await kube.create(NAMESPACES, {"metadata": {"name": NS}})
            async with running(str(cp.kubeconfig), TFJobController()) as op:
                start = time.monotonic()
                await asyncio.gather(
                    *(kube.create(TFJOBS, job(f"j{i}", workers), namespace=NS) for i in range(jobs))
                )
                submitted = time.monotonic() - start
                want_pods = jobs * (1 + workers)
                pods_at = None
                while True:
                    if pods_at is None:
                        pods, _ = await kube.list(PODS, namespace=NS)
                        if len(pods) >= want_pods:
                            pods_at = time.monotonic() - start
                    items, _ = await kube.list(TFJOBS, namespace=NS)
                    if len(items) == jobs and all(succeeded(j) for j in items):
                        break
                    await asyncio.sleep(0.25)
                done_at = time.monotonic() - start
                reconciles = sum(
                    op.counter(
                        "controller_runtime_reconcile_total",
                        controller="tfjob-controller",
                        result=r,
                    )
                    for r in ("success", "error", "requeue", "requeue_after")
                )
                requests: dict[str, float] = {}
                for metric in op.metrics.registry.collect():
                    if metric.name == "jobcontroller_api_requests":
                        for s in metric.samples:
                            if s.name.endswith("_total"):
                                verb = s.labels["verb"]
                                requests[verb] = requests.get(verb, 0) + s.value
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"submitted {jobs} jobs in {submitted:.2f}s")
    assert pods_at is not None
    print(f"all {want_pods} pods created after {pods_at:.2f}s ({want_pods / pods_at:.0f} pods/s)")
    print(f"all jobs Succeeded after {done_at:.2f}s (pods run 2 s)")
    print(f"reconciles: {reconciles:.0f} ({reconciles / jobs:.1f} per job)")
    print(
        "operator API requests: " + ", ".join(f"{v} {n:.0f}" for v, n in sorted(requests.items()))
    )
    print(f"peak RSS of this process (operator + benchmark client): {rss:.0f} MiB")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    asyncio.run(main(*(args + [50, 4][len(args) :])))
