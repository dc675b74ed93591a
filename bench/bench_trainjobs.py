"""TrainJobs: the planner's speed, and a batch of TrainJobs run to Complete through the real
JobSet controller on kwok's simulated pods, with what the TrainJob controller wrote to do it.

1. Plans per second of the pure planner for a torch TrainJob of NODES nodes on the shipped
   torch-distributed runtime: its first pass (snapshot and JobSet built) and a steady pass (the
   JobSet exists and runs: only its status is read).
2. A control plane with kwok, the JobSet controller (testing/jobset.py) and the TrainJob
   controller in-process; COUNT TrainJobs of upstream's 01-multi-node example (3 nodes, pods
   succeeding after 1 s) created at once: seconds until every one is Complete, reconciles, and
   the controller's API writes by verb and resource (one snapshot and one JobSet created per
   TrainJob; status updates only when the status changes).

    uv run python bench/bench_trainjobs.py [COUNT] [NODES]
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from jobcontroller import Observed
from jobcontroller.runtime.kube import NAMESPACES, KubeApi, Resource
from jobcontroller.testing.controlplane import ControlPlane
from jobcontroller.testing.jobset import JobSetController
from jobcontroller.testing.operator import install_crds, running
from jobcontroller.testing.pods import sim_annotations
from trainer_operator.controller import TrainJobController
from trainer_operator.planner import plan_trainjob

ROOT = Path(__file__).resolve().parents[1]
TRAINJOBS = Resource("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs")
RUNTIMES = Resource(
    "trainer.kubeflow.org",
    "v1alpha1",
    "ClusterTrainingRuntime",
    "clustertrainingruntimes",
    namespaced=False,
)
Obj = dict[str, Any]


def _doc(path: Path) -> Obj:
    [doc] = [d for d in yaml.safe_load_all(path.read_text()) if d]
    return doc  # type: ignore[no-any-return]  # YAML


def _trainjob(name: str) -> Obj:
    body = _doc(ROOT / "tests" / "data" / "trainer-v2.3.0" / "examples" / "01-multi-node.yaml")
    body["metadata"]["name"] = name
    patch = {
        "manager": "sim.jobcontroller/kwok",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {
                                        "metadata": {
                                            "annotations": sim_annotations(0, run_for="1s")
                                        }
                                    }
                                }
                            },
                        }
                    ]
                }
            }
        },
    }
    body["spec"]["runtimePatches"] = [patch]
    return body


def _plans_per_second(nodes: int) -> tuple[float, float]:
    runtime = _doc(ROOT / "manifests" / "runtimes" / "torch_distributed.yaml")
    raw = _trainjob("bench")
    raw["metadata"].update(
        {"namespace": "default", "uid": "u", "creationTimestamp": "2026-01-01T00:00:00Z"}
    )
    raw["spec"]["trainer"]["numNodes"] = nodes
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    first = Observed(extra={"runtime": runtime})
    plan = plan_trainjob(raw, first, now=now)
    bodies = {a.kind: copy.deepcopy(a.body) for a in plan.actions}  # type: ignore[union-attr]
    for body in bodies.values():
        body["metadata"]["uid"] = "x"
    steady = Observed(owned={"JobSet": [bodies["JobSet"]], "ConfigMap": [bodies["ConfigMap"]]})
    rates = []
    for observed in (first, steady):
        count, started = 0, time.perf_counter()
        while time.perf_counter() - started < 2.0:
            plan_trainjob(raw, observed, now=now)
            count += 1
        rates.append(count / (time.perf_counter() - started))
    return rates[0], rates[1]


async def _batch(cp: ControlPlane, count: int) -> None:
    kube = await KubeApi.from_config(kubeconfig=str(cp.kubeconfig), qps=500.0, burst=1000)
    try:
        await install_crds(
            kube, sorted((ROOT / "manifests" / "base" / "crds").glob("trainer*.yaml"))
        )
        runtime = _doc(ROOT / "manifests" / "runtimes" / "torch_distributed.yaml")
        await kube.create(RUNTIMES, runtime)
        await kube.create(NAMESPACES, {"metadata": {"name": "bench"}})
        async with running(str(cp.kubeconfig), TrainJobController(), workers=4) as op:
            started = time.monotonic()
            await asyncio.gather(
                *(
                    kube.create(TRAINJOBS, _trainjob(f"tj-{i}"), namespace="bench")
                    for i in range(count)
                )
            )
            while True:
                items, _ = await kube.list(TRAINJOBS, namespace="bench")
                done = sum(
                    1
                    for t in items
                    if any(
                        c["type"] in ("Complete", "Failed") and c["status"] == "True"
                        for c in (t.get("status") or {}).get("conditions") or []
                    )
                )
                if done == count:
                    break
                await asyncio.sleep(0.5)
            elapsed = time.monotonic() - started
            await asyncio.sleep(2)  # anything the last events still cause
            registry = op.metrics.registry
            reconciles = sum(
                s.value
                for m in registry.collect()
                for s in m.samples
                if s.name == "controller_runtime_reconcile_total"
            )
            writes: dict[tuple[str, str], float] = {}
            for m in registry.collect():
                for s in m.samples:
                    if s.name != "jobcontroller_api_requests_total":
                        continue
                    verb, resource = s.labels["verb"], s.labels["resource"]
                    if verb in ("POST", "PUT", "PATCH", "DELETE"):
                        writes[(verb, resource)] = writes.get((verb, resource), 0) + s.value
        complete = sum(
            1
            for t in items
            if any(
                c["type"] == "Complete" and c["status"] == "True" for c in t["status"]["conditions"]
            )
        )
        print(f"{count} TrainJobs (3 simulated pods each): {complete} Complete in {elapsed:.1f} s")
        print(f"  reconciles: {reconciles:.0f} ({reconciles / count:.1f} per TrainJob)")
        for (verb, resource), n in sorted(writes.items()):
            print(f"  {verb} {resource}: {n:.0f} ({n / count:.2f} per TrainJob)")
    finally:
        await kube.close()


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    nodes = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    first, steady = _plans_per_second(nodes)
    print(
        f"planner, torch TrainJob of {nodes} nodes: {first:.0f} first passes/s, "
        f"{steady:.0f} steady passes/s"
    )
    with (
        ControlPlane(controller_manager=True, scheduler=True, kwok=True, nodes=4) as cp,
        JobSetController(cp),
    ):
        asyncio.run(_batch(cp, count))


if __name__ == "__main__":
    main()
