"""A node's resources as Trainer v2.3.0 reads them (pkg/runtime: ``ExtractResourcePerNode
FromRuntime``, ``GetNumGPUPerNode``, ``GetNumCPUPerNode``): the ML policies size processes and
slots from them."""

from __future__ import annotations

from typing import Any

from jobcontroller import parse_quantity
from trainer_operator.info import NODE, TRAINER, Info

__all__ = ["node_resources", "num_cpu", "num_gpu"]

Obj = dict[str, Any]


def node_resources(info: Info) -> Obj | None:
    """The trainer container's resources in the runtime (``ExtractResourcePerNodeFromRuntime``):
    the ``node`` container of the first replicated job named ``node`` or the trainer's."""
    for rjob in info.spec.get("replicatedJobs") or ():
        template = rjob.get("template") or {}
        ancestor = ((template.get("metadata") or {}).get("labels") or {}).get(
            "trainer.kubeflow.org/trainjob-ancestor-step"
        )
        if rjob.get("name") != NODE and ancestor != TRAINER:
            continue
        pod_spec = ((template.get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in pod_spec.get("containers") or ():
            if container.get("name") == NODE and container.get("resources") is not None:
                res = container["resources"] or {}
                return {"limits": res.get("limits") or {}, "requests": res.get("requests") or {}}
    return None


def _whole(quantity: Any) -> int:
    """A quantity's integer value, rounded up (``Quantity.Value()``); 0 when unreadable."""
    try:
        value = parse_quantity(quantity)[0]
    except (ValueError, TypeError, ZeroDivisionError):
        return 0
    return int(-(-value.numerator // value.denominator))


def num_gpu(resources: Obj | None) -> int:
    """GPUs per node: the first resource whose name contains "gpu", requested, else limited."""

    def count(values: Any) -> int:
        for name, quantity in (values or {}).items():
            if "gpu" in str(name).lower():
                return _whole(quantity)
        return 0

    if not resources:
        return 0
    gpus = count(resources.get("requests"))
    limited = count(resources.get("limits"))
    return limited if gpus == 0 and limited > 0 else gpus


def num_cpu(resources: Obj) -> int:
    requested = (resources.get("requests") or {}).get("cpu")
    if requested is None or not _nonzero(requested):
        return _whole((resources.get("limits") or {}).get("cpu", 0))
    return _whole(requested)


def _nonzero(quantity: Any) -> bool:
    try:
        return parse_quantity(quantity)[0] != 0
    except (ValueError, TypeError, ZeroDivisionError):
        return False
