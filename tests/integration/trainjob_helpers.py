"""What the TrainJob integration tests share: the runtimes the default install ships, upstream's
examples, and kwok's pods made to finish by a runtime patch."""

from __future__ import annotations

import copy
from typing import Any

import pytest_asyncio
from trainer_fixtures import CLUSTER_RUNTIMES, SHIPPED, UPSTREAM, documents

from jobcontroller.runtime.kube import EVENTS, ApiError, KubeApi
from jobcontroller.testing.pods import sim_annotations

Obj = dict[str, Any]
RUNTIMES_DIR = SHIPPED
RUNTIME_FILES = (
    "torch_distributed.yaml",
    "jax_distributed.yaml",
    "xgboost_distributed.yaml",
    "deepspeed_distributed.yaml",
    "mlx_distributed.yaml",
)
TIMEOUT = 90.0


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def shipped_runtimes(kube: KubeApi, kubeflow_crds: list[str]) -> list[str]:
    """The ClusterTrainingRuntimes the default install ships, as it installs them (kept: they
    are cluster-wide and every test may use them)."""
    names = []
    for name in RUNTIME_FILES:
        [runtime] = documents(RUNTIMES_DIR / name)
        try:
            await kube.create(CLUSTER_RUNTIMES, runtime)
        except ApiError as exc:
            if not exc.is_already_exists:
                raise
        names.append(runtime["metadata"]["name"])
    return names


def example(name: str) -> Obj:
    [doc] = documents(UPSTREAM / "examples" / name)
    return doc


def finishing(
    trainjob: Obj, *, exit_code: int | None = 0, run_for: str = "1s", job: str = "node"
) -> Obj:
    """``trainjob`` with a runtime patch making the pods of its replicated job ``job`` (the
    trainer's) exit with ``exit_code`` after ``run_for`` on kwok (None: run until deleted)."""
    out = copy.deepcopy(trainjob)
    out["spec"].setdefault("runtimePatches", []).append(
        {
            "manager": "sim.jobcontroller/kwok",
            "trainingRuntimeSpec": {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {
                                "name": job,
                                "template": {
                                    "spec": {
                                        "template": {
                                            "metadata": {
                                                "annotations": sim_annotations(
                                                    exit_code, run_for=run_for
                                                )
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
    )
    return out


def condition(obj: Obj | None, ctype: str) -> Obj | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or ():
        if c.get("type") == ctype:
            return dict(c)
    return None


def is_true(obj: Obj | None, ctype: str) -> bool:
    found = condition(obj, ctype)
    return found is not None and found.get("status") == "True"


async def events_of(kube: KubeApi, namespace: str, name: str) -> list[Obj]:
    items, _ = await kube.list(
        EVENTS, namespace=namespace, field_selector=f"involvedObject.name={name}"
    )
    return [e for e in items if e["involvedObject"].get("kind") == "TrainJob"]
