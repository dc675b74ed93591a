"""The HorizontalPodAutoscaler of an elastic PyTorchJob with ``elasticPolicy.metrics``.

It scales the job through the CRD's scale subresource (Worker replicas) between
``minReplicas`` and ``maxReplicas``. It exists only while it can do something useful: it is
created for a live job, patched when the job's bounds or metrics change, and deleted when the
job is suspended (so nothing scales what a queue has parked), when it has finished (the anchor
leaves it, scaling a job that no longer runs), or when the metrics are removed from the spec.

The HPA is named after the job and carries the job-name label, so the operator's label-filtered
informer sees it. Drift is judged semantically: the apiserver rewrites quantities in canonical
form (``averageValue: 0.5`` comes back as ``500m``) and may add defaulted fields, neither of
which is a change worth a patch (a naive comparison would patch on every reconcile).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from jobcontroller import (
    JOB_NAME_LABEL,
    OPERATOR_NAME_LABEL,
    Action,
    CreateObject,
    DeleteObject,
    Event,
    Obj,
    Observed,
    PatchObject,
    is_controlled_by,
    is_terminating,
    owner_reference,
    parse_quantity,
)
from pytorch_operator.api import PyTorchJob

__all__ = ["HPA", "desired_hpa", "hpa_actions", "semantically_equal"]

#: The kind under which the controller knows HorizontalPodAutoscalers (``owned_resources``).
HPA = "HorizontalPodAutoscaler"


def desired_hpa(job: PyTorchJob, *, controller_name: str) -> Obj | None:
    """The HPA a defaulted job should have; None when it should have none."""
    elastic = job.spec.elastic_policy
    if elastic is None or not elastic.metrics or elastic.max_replicas is None:
        return None
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": job.api_version, "kind": job.kind, "name": job.name},
        "maxReplicas": elastic.max_replicas,
        "metrics": copy.deepcopy(elastic.metrics),
    }
    if elastic.min_replicas is not None:
        spec["minReplicas"] = elastic.min_replicas
    return {
        "apiVersion": "autoscaling/v2",
        "kind": HPA,
        "metadata": {
            "name": job.name,
            "namespace": job.namespace,
            "labels": {JOB_NAME_LABEL: job.name, OPERATOR_NAME_LABEL: controller_name},
            "ownerReferences": [owner_reference(job)],
        },
        "spec": spec,
    }


def semantically_equal(desired: Any, actual: Any) -> bool:
    """Whether ``actual`` (as the apiserver returned it) already says what ``desired`` says.

    Mappings: every key of ``desired`` must match (``actual`` may hold defaulted extras).
    Sequences: same length, pairwise equal. Scalars: equal, or equal as quantities.
    """
    if isinstance(desired, dict):
        return isinstance(actual, dict) and all(
            semantically_equal(value, actual.get(key)) for key, value in desired.items()
        )
    if isinstance(desired, list):
        return (
            isinstance(actual, list)
            and len(desired) == len(actual)
            and all(semantically_equal(d, a) for d, a in zip(desired, actual, strict=True))
        )
    if isinstance(desired, bool) or isinstance(actual, bool):
        return desired is actual  # True == 1 in Python, but not in JSON
    if desired == actual:
        return True
    quantities = (int, float, str)
    if isinstance(desired, quantities) and isinstance(actual, quantities):
        try:
            return parse_quantity(desired)[0] == parse_quantity(actual)[0]
        except (ValueError, ZeroDivisionError):
            return False
    return False


def _conflict_event(job: PyTorchJob) -> Event:
    return Event(
        "Warning",
        "ErrResourceExists",
        f'Resource "{job.name}" of Kind "{HPA}" already exists and is not managed by '
        f"{job.kind} {job.key}",
    )


def hpa_actions(
    job: PyTorchJob, observed: Observed, *, wanted: bool, controller_name: str
) -> tuple[list[Action], list[Event]]:
    """Create, patch or delete the job's HPA. ``wanted`` is False for a suspended or finished
    job: any HPA it owns goes."""
    owned: Sequence[Obj] = observed.owned.get(HPA, ())
    desired = desired_hpa(job, controller_name=controller_name) if wanted else None
    actions: list[Action] = []
    current: Obj | None = None
    for hpa in owned:
        meta = hpa.get("metadata") or {}
        if desired is not None and meta.get("name") == job.name and current is None:
            current = hpa
        elif not is_terminating(hpa):
            actions.append(
                DeleteObject(
                    kind=HPA,
                    namespace=str(meta.get("namespace") or job.namespace),
                    name=str(meta.get("name") or ""),
                    uid=str(meta.get("uid") or ""),
                    reason="hpa-not-wanted",
                )
            )
    if desired is None:
        return actions, []
    if current is None:
        other = observed.lookup(HPA, job.name)
        if other is not None:
            # Ours but not yet in the owned cache: wait. Someone else's: never touch it.
            events = [] if is_controlled_by(other, uid=job.uid) else [_conflict_event(job)]
            return actions, events
        actions.append(CreateObject(kind=HPA, body=desired))
        return actions, []
    if is_terminating(current):
        return actions, []
    if not semantically_equal(desired["spec"], current.get("spec") or {}):
        actions.append(
            PatchObject(
                kind=HPA, namespace=job.namespace, name=job.name, patch={"spec": desired["spec"]}
            )
        )
    return actions, []
