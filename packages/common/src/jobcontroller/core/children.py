"""A job's other children: the objects besides pods and Services that a framework wants.

A framework declares them (:meth:`FrameworkOf.children` returns :class:`Children`): which kinds
it manages this way, and the objects of those kinds the job should have now, each with the
fields that count for drift. :func:`reconcile_children` turns that declaration and what the
caches hold into actions, the same way for every framework:

- a wanted object that is missing is created, with the job's controller reference, its
  namespace and the job-name and operator-name labels (the informers select on them);
- a wanted object whose drift fields no longer say what the declaration says is patched back,
  field by field (a merge patch of those fields only);
- an owned object of a managed kind that is not wanted is deleted;
- a name held by an object the job does not control is never touched: a conflict (a Warning
  event), while one the job controls but the owned cache does not show yet is waited for.

Drift is judged semantically (:func:`semantically_equal`): the apiserver rewrites quantities
in canonical form (``0.5`` comes back as ``500m``) and adds defaulted fields, neither of which
is a change worth a patch. Creations go through the executor like pods: under expectations,
and adopted when the object in the way turns out to be the job's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from msgspec import Struct, field

from jobcontroller.api.common import JobModel
from jobcontroller.api.deepcopy import deep_copy
from jobcontroller.core.childspec import Child, Children
from jobcontroller.core.names import (
    JOB_NAME_LABEL,
    OPERATOR_NAME_LABEL,
    REPLICA_TYPE_LABEL,
    is_controlled_by,
    owner_reference,
)
from jobcontroller.core.quantity import parse_quantity
from jobcontroller.core.replicas import is_terminating
from jobcontroller.core.types import (
    SERVICE,
    Action,
    CreateObject,
    DeleteObject,
    Event,
    Obj,
    Observed,
    PatchObject,
)

__all__ = [
    "REASON_CHILD_EXISTS",
    "Child",
    "ChildPlan",
    "Children",
    "child_body",
    "reconcile_children",
    "semantically_equal",
]

#: The Warning event's reason when a child's name is held by an object the job does not own.
REASON_CHILD_EXISTS = "ErrResourceExists"


class ChildPlan(Struct, frozen=True):
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    conflicts: list[tuple[str, str]] = field(default_factory=list)
    """(kind, name) of children to show on the Created condition."""


def child_body(job: JobModel[Any], child: Child, *, controller_name: str) -> Obj:
    """The complete object to create for ``child``."""
    body = deep_copy(child.body)
    own = body.pop("metadata", None) or {}
    metadata: Obj = {
        "name": child.name,
        "namespace": job.namespace,
        "labels": {**(own.get("labels") or {}), JOB_NAME_LABEL: job.name},
        "ownerReferences": [owner_reference(job)],
    }
    if child.operator_label:
        metadata["labels"][OPERATOR_NAME_LABEL] = controller_name
    if own.get("annotations"):
        metadata["annotations"] = own["annotations"]
    head: Obj = {key: body.pop(key) for key in ("apiVersion", "kind") if key in body}
    return {**head, "metadata": metadata, **body}


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


def _at(obj: Any, path: Sequence[str]) -> Any:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _empty(value: Any) -> bool:
    return value is None or value is False or (isinstance(value, str | dict | list) and not value)


def _same(desired: Any, actual: Any, *, prune: bool) -> bool:
    # The apiserver drops false and empty values: they equal an absent one.
    if _empty(desired) and _empty(actual):
        return True
    if prune and isinstance(desired, dict | None) and isinstance(actual, dict):
        return (desired or {}) == actual
    if _empty(desired) and isinstance(desired, dict | None) and isinstance(actual, dict):
        return True  # an unpruned mapping keeps the keys others set; no keys: nothing to say
    return semantically_equal(desired, actual)


def drift_patch(child: Child, current: Obj) -> Obj | None:
    """A merge patch putting ``child``'s drift fields back on ``current``; None when none
    drifted."""
    patch: Obj = {}
    for dotted in child.drift:
        path = dotted.split(".")
        want, have = _at(child.body, path), _at(current, path)
        prune = child.prune if isinstance(child.prune, bool) else dotted in child.prune
        if _same(want, have, prune=prune):
            continue
        value = want
        if prune and isinstance(want, dict | None) and isinstance(have, dict):
            value = {**dict.fromkeys(have), **(want or {})}  # null drops the strays
        node = patch
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return patch or None


def _conflict_event(job: JobModel[Any], kind: str, name: str) -> Event:
    return Event(
        "Warning",
        REASON_CHILD_EXISTS,
        f'Resource "{name}" of Kind "{kind}" already exists and is not managed by '
        f"{job.kind} {job.key}",
    )


def _cached(observed: Observed, kind: str) -> Sequence[Obj]:
    """The job's objects of ``kind``; of its Services, only those that are not a replica's
    (the base keeps those)."""
    if kind == SERVICE:
        return [
            svc
            for svc in observed.services
            if REPLICA_TYPE_LABEL not in ((svc.get("metadata") or {}).get("labels") or {})
        ]
    return observed.owned.get(kind, ())


def reconcile_children(
    job: JobModel[Any], observed: Observed, children: Children, *, controller_name: str
) -> ChildPlan:
    """The actions that bring the job's children of ``children.kinds`` to ``children.wanted``."""
    plan = ChildPlan()
    wanted = {(c.kind, c.name): c for c in children.wanted}
    current: dict[tuple[str, str], Obj] = {}
    for kind in sorted(children.kinds):
        for obj in _cached(observed, kind):
            meta = obj.get("metadata") or {}
            name = str(meta.get("name") or "")
            if (kind, name) in wanted and (kind, name) not in current:
                current[(kind, name)] = obj
            elif children.delete_unwanted and not is_terminating(obj):
                plan.actions.append(
                    DeleteObject(
                        kind=kind,
                        namespace=str(meta.get("namespace") or job.namespace),
                        name=name,
                        uid=str(meta.get("uid") or ""),
                        reason=children.delete_reason,
                    )
                )
    # What this pass creates that others may need first (those with needs of their own never).
    creating = {
        key
        for key, child in wanted.items()
        if child.create and not child.after and key not in current
        if observed.lookup(*key) is None
    }
    for key, child in wanted.items():
        have = current.get(key)
        if have is None:
            other = observed.lookup(child.kind, child.name)
            if other is None:
                if not child.create:
                    continue
                after = tuple(
                    need
                    for need in child.after
                    if need not in current or is_terminating(current[need])
                )
                if any(need not in creating for need in after):
                    continue  # someone else's, the job's own not cached yet, or going away
                body = child_body(job, child, controller_name=controller_name)
                plan.actions.append(CreateObject(kind=child.kind, body=body, after=after))
            elif not is_controlled_by(other, uid=job.uid):
                # Someone else's: never touched. The job's own not yet in the owned cache: wait.
                if child.conflict_blocks_creation:
                    plan.conflicts.append(key)
                else:
                    plan.events.append(_conflict_event(job, *key))
            continue
        if is_terminating(have):
            continue
        if child.valid is not None and not child.valid(have):
            meta = have.get("metadata") or {}
            plan.actions.append(
                DeleteObject(
                    kind=child.kind,
                    namespace=job.namespace,
                    name=child.name,
                    uid=str(meta.get("uid") or ""),
                    reason=child.invalid_reason,
                )
            )
            continue
        patch = drift_patch(child, have)
        if patch is not None:
            plan.actions.append(
                PatchObject(
                    kind=child.kind,
                    namespace=job.namespace,
                    name=child.name,
                    patch=patch,
                    can_wait=child.patch_can_wait,
                )
            )
    return plan
