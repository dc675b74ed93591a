"""Resources, upstream objects and helpers shared by the trainer API's integration tests."""

from __future__ import annotations

import contextlib
import copy
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobcontroller.runtime.kube import ApiError, KubeApi, Resource

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = ROOT / "tests" / "data" / "trainer-v2.3.0"
SHIPPED = ROOT / "manifests" / "base" / "runtimes"

TRAINJOBS = Resource("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs")
RUNTIMES = Resource("trainer.kubeflow.org", "v1alpha1", "TrainingRuntime", "trainingruntimes")
CLUSTER_RUNTIMES = Resource(
    "trainer.kubeflow.org",
    "v1alpha1",
    "ClusterTrainingRuntime",
    "clustertrainingruntimes",
    namespaced=False,
)
RESOURCES = {r.kind: r for r in (TRAINJOBS, RUNTIMES, CLUSTER_RUNTIMES)}
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"

Obj = dict[str, Any]


def documents(path: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def upstream_runtime(name: str = "torch_distributed.yaml") -> Obj:
    [doc] = documents(UPSTREAM / "runtimes" / name)
    return doc


def trainjob(name: str = "job", **spec: Any) -> Obj:
    """A TrainJob on torch-distributed, with ``spec`` merged in."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, **copy.deepcopy(spec)},
    }


def replicated_jobs(runtime: Obj) -> list[Obj]:
    jobs: list[Obj] = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return jobs


def is_subset(small: Any, big: Any) -> bool:
    """Every field of ``small`` is in ``big`` with the same value (lists item by item)."""
    if isinstance(small, dict):
        return isinstance(big, dict) and all(
            k in big and is_subset(v, big[k]) for k, v in small.items()
        )
    if isinstance(small, list):
        return (
            isinstance(big, list)
            and len(small) == len(big)
            and all(is_subset(a, b) for a, b in zip(small, big, strict=True))
        )
    return bool(small == big)


class Objects:
    """Creates trainer objects: TrainJobs and TrainingRuntimes in the test's namespace,
    ClusterTrainingRuntimes under a unique name (deleted after the test)."""

    def __init__(self, kube: KubeApi, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.cluster_names: list[str] = []

    def where(self, kind: str) -> str | None:
        return None if kind == "ClusterTrainingRuntime" else self.namespace

    async def create(self, obj: Obj) -> Obj:
        obj = copy.deepcopy(obj)
        if obj["kind"] == "ClusterTrainingRuntime":
            obj["metadata"]["name"] = f"{obj['metadata']['name'][:40]}-{uuid.uuid4().hex[:6]}"
            self.cluster_names.append(obj["metadata"]["name"])
        created: Obj = await self.kube.create(
            RESOURCES[obj["kind"]], obj, namespace=self.where(obj["kind"])
        )
        return created

    async def patch(self, obj: Obj, patch: Obj) -> Obj:
        kind = obj["kind"]
        patched: Obj = await self.kube.merge_patch(
            RESOURCES[kind], obj["metadata"]["name"], patch, namespace=self.where(kind)
        )
        return patched

    async def refused(self, obj: Obj, *, patch: Obj | None = None) -> str:
        """The API server's message refusing the creation (or ``patch`` of ``obj``)."""
        with pytest.raises(ApiError) as caught:
            if patch is None:
                await self.create(obj)
            else:
                await self.patch(obj, patch)
        assert caught.value.status == 422, caught.value
        return caught.value.message

    async def cleanup(self) -> None:
        for name in self.cluster_names:
            try:
                await self.kube.delete(CLUSTER_RUNTIMES, name)
            except ApiError as exc:
                if not exc.is_not_found:
                    raise


@contextlib.asynccontextmanager
async def made_by_test(kube: KubeApi, namespace: str) -> AsyncIterator[Objects]:
    """An :class:`Objects` whose cluster-scoped objects are deleted afterwards."""
    made = Objects(kube, namespace)
    try:
        yield made
    finally:
        await made.cleanup()


Mutation = Callable[[Obj], Any]
