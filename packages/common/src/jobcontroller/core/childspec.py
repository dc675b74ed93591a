"""The declaration of a job's other children (see core/children.py, which reconciles it)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from msgspec import Struct

__all__ = ["Child", "Children"]


class Child(Struct, frozen=True):
    """One object a job should have."""

    kind: str
    """A kind the controller knows (its ``owned_resources``)."""
    name: str
    body: dict[str, Any]
    """apiVersion, kind and what the object says (spec, data...); its metadata may hold
    labels and annotations of its own. The base adds name, namespace, the job's labels and
    its controller reference."""
    drift: Sequence[str] = ("spec",)
    """Dotted paths (``spec``, ``spec.suspend``, ``data``) whose value is kept as declared:
    one that differs is patched back. Fields not listed are set at creation only."""
    prune: bool | Collection[str] = False
    """Mappings at the drift paths are data, compared exactly, and a drifted one also loses
    the keys the declaration lacks (a ConfigMap's stale entries, a selector's stray labels);
    otherwise extra keys (defaulted by the apiserver) are left alone and values are compared
    semantically. A collection of drift paths: those paths only."""
    conflict_blocks_creation: bool = False
    """A name conflict is shown on the job's Created condition (as for pods) rather than
    only as a Warning event."""
    create: bool = True
    """Create it when missing; False keeps an existing one in line without creating it (a
    finished job's launcher)."""
    valid: Callable[[dict[str, Any]], bool] | None = None
    """An existing object this says is unusable (a Secret someone emptied) is deleted, and
    created afresh once it is gone."""
    invalid_reason: str = "unusable"
    """Why such an object is deleted (the executor's log)."""
    operator_label: bool = True
    """Label it with the operator's name too (mpi-operator's objects carry only the job-name
    label, besides their own)."""
    replica_type: str | None = None
    """A batch Job child running this replica type: its counts (active, succeeded, failed)
    become the type's replica status before ``update_status`` runs."""
    decides: bool = False
    """A batch Job child whose end is the job's (a launcher): the job's state follows it
    (core/followjob.py), and the counts of ``replica_type`` are read as that rule says."""
    after: Sequence[tuple[str, str]] = ()
    """(kind, name) of sibling children it needs in place before it is created (the
    ConfigMap and Secret a launcher Job mounts, so its pod never starts without them). One
    the caches hold as the job's, and not going away, is in place; one missing is created
    first in the same pass, and this one only once that creation succeeded; one held by
    someone else, the job's own not cached yet, or one going away keeps this one from being
    created. The siblings named must not have needs of their own."""
    patch_can_wait: bool = False
    """Its drift patches wait while the API client's rate limiter is saturated (a burst of
    jobs), at most ``STATUS_BACKLOG_HOLD_SECONDS``, as replica counters do: the budget goes to
    the objects that start jobs. For data read by polling, such as MPI's
    ``discover_hosts.sh``; a patch no longer needed once the wait is over is never sent."""


class Children(Struct, frozen=True):
    """What :meth:`FrameworkOf.children` declares."""

    kinds: frozenset[str] = frozenset()
    """The kinds managed this way: an owned object of one of them that is not in ``wanted``
    is deleted."""
    wanted: Sequence[Child] = ()
    delete_unwanted: bool = True
    """False: owned objects of these kinds that are not wanted are left alone."""
    delete_reason: str = "not-wanted"
    """Why unwanted children are deleted (the executor's log)."""
