"""CPU of one reconcile's planning, per kind: µs per call of the planner (parse, default,
validate, children, status) on a job whose pods all run, the pass an operator makes most often.

Each kind's job (a TFJob of 1 PS + 3 workers, a PyTorchJob of 1 master + 3 workers, an MPIJob
of a launcher + 2 workers) is planned against the unit tests' fake cluster until its objects
exist, its pods are then marked Running, and the steady pass is timed: best of 3 runs of
``--number`` calls (``timeit``). The operator's CPU per job is mostly requests and watch
events; planning is the part that is ours alone (bench/results/plan.json).

Usage: ``uv run python bench/bench_plan.py [--number 2000] [--json bench/results/plan.json]``
"""

from __future__ import annotations

import argparse
import json
import sys
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from plan_fixtures import NOW, FakeCluster, kubeflow_job

from jobcontroller.core.planner import plan
from jobcontroller.core.types import PlanConfig
from mpi_operator.controller import MPIJobController
from pytorch_operator.controller import PyTorchJobController
from tf_operator.controller import TFJobController


def _replica(container: str, replicas: int = 1) -> dict[str, Any]:
    template = {
        "metadata": {"labels": {"team": "ml"}},
        "spec": {
            "containers": [
                {
                    "name": container,
                    "image": "registry.example/train:1.0",
                    "command": ["python", "train.py", "--epochs", "3"],
                    "env": [{"name": "LOG_LEVEL", "value": "info"}],
                    "resources": {"limits": {"cpu": "2", "memory": "4Gi"}},
                }
            ]
        },
    }
    return {"replicas": replicas, "template": template}


KINDS: dict[str, tuple[Any, str, dict[str, Any]]] = {
    "TFJob": (
        TFJobController,
        "v1",
        {"tfReplicaSpecs": {"PS": _replica("tensorflow"), "Worker": _replica("tensorflow", 3)}},
    ),
    "PyTorchJob": (
        PyTorchJobController,
        "v1",
        {"pytorchReplicaSpecs": {"Master": _replica("pytorch"), "Worker": _replica("pytorch", 3)}},
    ),
    "MPIJob": (
        MPIJobController,
        "v2beta1",
        {"mpiReplicaSpecs": {"Launcher": _replica("launcher"), "Worker": _replica("worker", 2)}},
    ),
}


def steady_us(kind: str, number: int) -> float:
    controller, version, spec = KINDS[kind]
    fw = controller()
    cluster = FakeCluster(kubeflow_job(kind, version, spec))
    config = PlanConfig()
    for _ in range(4):
        cluster.apply(plan(fw, cluster.job, cluster.observed(), now=NOW, config=config))
    for (what, _), obj in cluster.objects.items():
        if what == "Pod":
            obj["status"] = {
                "phase": "Running",
                "containerStatuses": [{"name": "c", "restartCount": 0, "state": {"running": {}}}],
            }
    for _ in range(3):
        cluster.apply(plan(fw, cluster.job, cluster.observed(), now=NOW, config=config))
    observed = cluster.observed()

    def once() -> None:
        plan(fw, cluster.job, observed, now=NOW, config=config)

    best = min(timeit.repeat(once, number=number, repeat=3))
    return round(best / number * 1e6, 1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--number", type=int, default=2000)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = {kind: steady_us(kind, args.number) for kind in KINDS}
    for kind, us in result.items():
        print(f"{kind:<11} {us:7.1f} µs per steady plan")
    if args.json:
        args.json.write_text(json.dumps({"us_per_plan": result}, indent=2) + "\n")


if __name__ == "__main__":
    main()
