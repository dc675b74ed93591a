"""The HorizontalPodAutoscaler of an elastic PyTorchJob with ``elasticPolicy.metrics``.

It scales the job through the CRD's scale subresource (Worker replicas) between
``minReplicas`` and ``maxReplicas``. It exists only while it can do something useful: it is
created for a live job, patched when the job's bounds or metrics change, and deleted when the
job is suspended (so nothing scales what a queue has parked), when it has finished (the anchor
leaves it, scaling a job that no longer runs), or when the metrics are removed from the spec.
The base keeps it so (a child, core/children.py): named after the job, with the job's labels
and owner, its spec compared semantically.
"""

from __future__ import annotations

import copy
from typing import Any

from jobcontroller import (
    Action,
    Child,
    Children,
    Event,
    Obj,
    Observed,
    child_body,
    reconcile_children,
    semantically_equal,
)
from pytorch_operator.api import PyTorchJob

__all__ = ["HPA", "desired_hpa", "hpa_actions", "hpa_children", "semantically_equal"]

#: The kind under which the controller knows HorizontalPodAutoscalers (``owned_resources``).
HPA = "HorizontalPodAutoscaler"


def hpa_children(job: PyTorchJob, *, wanted: bool) -> Children:
    """The job's HPA, when it should have one; ``wanted`` is False for a suspended or
    finished job."""
    elastic = job.spec.elastic_policy
    if not wanted or elastic is None or not elastic.metrics or elastic.max_replicas is None:
        return Children(kinds=frozenset({HPA}), delete_reason="hpa-not-wanted")
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": job.api_version, "kind": job.kind, "name": job.name},
        "maxReplicas": elastic.max_replicas,
        "metrics": copy.deepcopy(elastic.metrics),
    }
    if elastic.min_replicas is not None:
        spec["minReplicas"] = elastic.min_replicas
    body = {"apiVersion": "autoscaling/v2", "kind": HPA, "spec": spec}
    child = Child(kind=HPA, name=job.name, body=body)
    return Children(kinds=frozenset({HPA}), wanted=[child], delete_reason="hpa-not-wanted")


def desired_hpa(job: PyTorchJob, *, controller_name: str) -> Obj | None:
    """The HPA a defaulted job should have; None when it should have none."""
    wanted = hpa_children(job, wanted=True).wanted
    return child_body(job, wanted[0], controller_name=controller_name) if wanted else None


def hpa_actions(
    job: PyTorchJob, observed: Observed, *, wanted: bool, controller_name: str
) -> tuple[list[Action], list[Event]]:
    """Create, patch or delete the job's HPA (what the base does with :func:`hpa_children`)."""
    planned = reconcile_children(
        job, observed, hpa_children(job, wanted=wanted), controller_name=controller_name
    )
    return planned.actions, planned.events
