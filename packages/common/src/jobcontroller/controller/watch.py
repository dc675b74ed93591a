"""The watch: informers on the job kind and on what jobs own, and what their events mean.

Owned objects are watched through the job-name label. An event on one queues the job that
controls it and settles that job's expectation for the kind: a creation when the object
appears, a deletion when it starts terminating (as upstream controllers count it: a pod held
by a finalizer or a long grace period must not keep its job from being planned until the
expectation expires) or, for an object deleted at once, when it goes. Objects that wear the
label without being controlled by the job (a launcher Job's pods, a foreign object) queue it
too, but settle nothing: the job raised its expectations for what it controls.

A reconcile reads the job's slice of these caches through :meth:`Watch.observe`, never a LIST.

A job's first sight (its creation, the initial list, a resync) is queued at low priority and
every later change at normal priority (see :mod:`jobcontroller.runtime.workqueue`): under a
backlog of new jobs, a started job whose pods came up is served before the backlog, so it is
marked Running while the backlog's pods are still being created, not after all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from jobcontroller.controller.nodes import NodeWatch
from jobcontroller.controller.state import JobState, JobStates
from jobcontroller.controller.telemetry import Telemetry
from jobcontroller.core.types import POD, SERVICE, Obj, Observed
from jobcontroller.runtime.informer import Informer
from jobcontroller.runtime.store import Store
from jobcontroller.runtime.workqueue import LOW, NORMAL, WorkQueue

__all__ = ["LABEL_JOB_NAME", "Caches", "Watch"]

LABEL_JOB_NAME = "training.kubeflow.org/job-name"

#: The key under which the job kind's own informer is kept (owned kinds go by their Kind).
JOB = "job"


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def is_terminating(obj: Obj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def _key(obj: Obj) -> str:
    meta = obj.get("metadata", {})
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class Caches(Protocol):
    """The controller's caches, read-only, for a framework's own metrics or helpers (see
    ``JobController.on_setup``)."""

    def jobs(self) -> list[Obj]:
        """Every job of the kind in the cache."""
        ...

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        """A cached object of an owned ``kind`` (Pod, Service, a kind of ``owned_resources``)
        that wears the job-name label, or of a kind the controller reads (``read_resources``;
        ``namespace`` "" for a cluster-scoped one); None when it is not cached."""
        ...


#: Fields of owned objects that no plan reads, by kind: a change to them alone (with the new
#: resourceVersion every change brings) wakes no job, though the cache takes the new object.
#: A batch Job (MPI's launcher) counts its ready pods, which moves as its pod passes its
#: readiness probe; the Job controller takes its tracking finalizer off a pod it has counted.
UNREAD_ON_UPDATE: dict[str, tuple[tuple[str, ...], ...]] = {
    "Job": (("status", "ready"),),
    POD: (("metadata", "finalizers"),),
}
_STATUS: tuple[tuple[str, ...], ...] = (("status",),)


def _without(obj: Obj, paths: tuple[tuple[str, ...], ...]) -> Obj:
    """A shallow copy of ``obj`` without its resourceVersion and the fields at ``paths`` (a
    top-level key, or a key of a top-level mapping)."""
    out = dict(obj)
    meta = obj.get("metadata") or {}
    out["metadata"] = {k: v for k, v in meta.items() if k != "resourceVersion"}
    for path in paths:
        if len(path) == 1:
            out.pop(path[0], None)
            continue
        top, leaf = path
        part = out.get(top)
        if isinstance(part, dict) and leaf in part:
            out[top] = {k: v for k, v in part.items() if k != leaf}
    return out


def unread_change_only(kind: str, old: Obj, new: Obj) -> bool:
    """Whether ``old`` and ``new`` differ only where no plan reads (:data:`UNREAD_ON_UPDATE`)."""
    paths = UNREAD_ON_UPDATE.get(kind)
    return paths is not None and _without(old, paths) == _without(new, paths)


def own_status_echo(old: Obj, new: Obj, sent: Obj | None) -> bool:
    """Whether ``new`` is ``old`` with only the status this process is writing (``sent``, the
    status PUT in flight) and the resourceVersion that write made: the watch brought our own
    write back before its answer, and the pass that wrote it planned from everything else."""
    if sent is None or new.get("status") != sent:
        return False
    return _without(old, _STATUS) == _without(new, _STATUS)


CHILD_UPDATE_BATCH_SECONDS = 0.2
"""A child's update (a pod scheduled, running, its container started...) queues its job this
much later, so the updates of one job's pods that land together are planned once, as the
Job controller of kube-controller-manager batches its pods' updates (for a second); a child
created or deleted settles expectations and queues its job at once."""


class Watch:
    """The informers of one job controller and their event handlers. Implements
    :class:`Caches`."""

    def __init__(self, *, kind: str, group: str, states: JobStates, telemetry: Telemetry) -> None:
        self._kind, self._group = kind, group
        self._states = states
        self._telemetry = telemetry
        self.informers: dict[str, Informer] = {}
        """The job kind's informer (under ``"job"``), then one per owned kind and ``"node"``."""
        self.queue: WorkQueue[str] | None = None
        self.nodes: NodeWatch | None = None
        self._terminating: set[str] = set()
        """UIDs whose deletion was already counted when they started terminating."""

    # ------------------------------------------------------------------------ wiring

    def watch_jobs(self, informer: Informer, queue: WorkQueue[str]) -> None:
        self.queue = queue
        self.informers[JOB] = informer
        informer.add_handlers(
            on_add=self.enqueue_new_job,
            on_update=self._job_updated,
            on_delete=self.job_deleted,
        )

    def watch_owned(self, kind: str, informer: Informer) -> None:
        self.informers[kind] = informer
        self.settle_on_events(kind, informer)

    def watch_read(
        self, kind: str, informer: Informer, *, wake: Callable[[str, Obj], Iterable[str]]
    ) -> None:
        """A kind the controller only reads (a TrainJob's runtimes): its objects are looked up
        with :meth:`get`, and ``wake`` names the jobs to queue when one changes."""
        self.informers[kind] = informer

        def changed(obj: Obj) -> None:
            if self.queue is not None:
                for key in wake(kind, obj):
                    self.queue.add(key)

        informer.add_handlers(
            on_add=changed, on_update=lambda old, new: changed(new), on_delete=changed
        )

    def watch_nodes(self, informer: Informer) -> None:
        """NodeLost: a node's readiness changing, or the node going, wakes its pods' jobs."""
        self.informers["node"] = informer
        self.nodes = NodeWatch(informer, pods=self.informers[POD].store, wake=self._wake_owner)

    def settle_on_events(self, kind: str, informer: Informer) -> None:
        """Queue the owner of each ``kind`` object that changes, settling its expectations."""

        def on_add(obj: Obj) -> None:
            self._owned_changed(kind, obj, created=True)

        def on_update(old: Obj, new: Obj) -> None:
            if kind == POD and _phase(new) == "Failed" != _phase(old) and self._ours(new):
                self._telemetry.pod_failed()
            uid = str((new.get("metadata") or {}).get("uid") or "")
            starts = is_terminating(new) and not is_terminating(old) and bool(uid)
            if starts:
                self._terminating.add(uid)
            elif unread_change_only(kind, old, new):
                return
            self._owned_changed(kind, new, deleted=starts)

        def on_delete(obj: Obj) -> None:
            uid = str((obj.get("metadata") or {}).get("uid") or "")
            counted = uid in self._terminating
            self._terminating.discard(uid)
            self._owned_changed(kind, obj, deleted=not counted)

        informer.add_handlers(on_add=on_add, on_update=on_update, on_delete=on_delete)

    # ------------------------------------------------------------------------ events

    def enqueue_job(self, obj: Obj, *, priority: int = NORMAL) -> None:
        assert self.queue is not None
        self.queue.add(_key(obj), priority=priority)

    def _job_updated(self, old: Obj, new: Obj) -> None:
        in_flight = self._states.status_in_flight.get(_key(new))
        if in_flight is not None and own_status_echo(old, new, in_flight.status):
            in_flight.echoed = True  # the writer queues the job if its PUT fails after all
            return
        self.enqueue_job(new)

    def enqueue_new_job(self, obj: Obj) -> None:
        """A job seen for the first time: it waits behind the changes to started jobs."""
        self.enqueue_job(obj, priority=LOW)

    def job_deleted(self, obj: Obj) -> None:
        self._states.forget(_key(obj))

    def resync(self) -> None:
        """Queue every cached job (a new leadership term looks at all of them again), at low
        priority, as controller-runtime queues its initial list: a change seen meanwhile
        still goes first."""
        for job in self.jobs():
            self.enqueue_new_job(job)

    def owner_job_key(self, obj: Obj) -> tuple[str | None, bool]:
        """The key of the job that controls ``obj`` (and True), or, for other objects wearing
        our job-name label, the key of that job (and False): foreign objects may block its
        names, and objects of its own children (a launcher Job's pods) feed its status."""
        meta = obj.get("metadata", {})
        ns = meta.get("namespace", "")
        for ref in meta.get("ownerReferences") or ():
            group = str(ref.get("apiVersion", "")).split("/")[0]
            if ref.get("controller") and ref.get("kind") == self._kind and group == self._group:
                return f"{ns}/{ref.get('name')}", True
        job_name = (meta.get("labels") or {}).get(LABEL_JOB_NAME)
        return (f"{ns}/{job_name}" if job_name else None), False

    def seen_terminating(self, uid: str) -> bool:
        """Whether the deletion of ``uid`` was observed already, when it started terminating."""
        return uid in self._terminating

    def _owned_changed(
        self, kind: str, obj: Obj, *, created: bool = False, deleted: bool = False
    ) -> None:
        key, controlled = self.owner_job_key(obj)
        if key is None or self.queue is None:
            return
        if not controlled and key not in self.job_store:
            # Another kind's child (every kind's pods wear the job-name label), or an object
            # of a job this controller has not seen: nothing to plan. A job that appears later
            # is queued by its own event and finds the object in the cache then.
            return
        expectations = self._states.expectations
        # Only objects the job controls settle its expectations: it raised them for those.
        if controlled and created:
            expectations.creation_observed(f"{key}/{kind}")
        elif controlled and deleted:
            expectations.deletion_observed(f"{key}/{kind}")
        if created or deleted:
            self.queue.add(key)
        else:
            self.queue.add_after(key, CHILD_UPDATE_BATCH_SECONDS)

    def _wake_owner(self, pod: Obj) -> None:
        key, controlled = self.owner_job_key(pod)
        if key is not None and controlled and self.queue is not None:
            self.queue.add(key)

    def _ours(self, obj: Obj) -> bool:
        refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
        return any(r.get("controller") and r.get("kind") == self._kind for r in refs)

    # ------------------------------------------------------------------------ reading

    @property
    def job_store(self) -> Store:
        return self.informers[JOB].store

    def jobs(self) -> list[Obj]:
        return self.job_store.list()

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        informer = self.informers.get(kind) if kind not in (JOB, "node") else None
        return informer.store.get(namespace, name) if informer is not None else None

    def cache_sizes(self) -> dict[str, int]:
        return {name: len(informer.store) for name, informer in self.informers.items()}

    def observe(
        self,
        job: Obj,
        *,
        state: JobState | None,
        priority_classes: Mapping[str, int],
        crashes: int = 0,
        extra: Mapping[str, Any] | None = None,
    ) -> Observed:
        """The job's slice of the caches: what it controls, and a by-name lookup that also
        sees the objects in its way that no cache holds (``state.foreign``)."""
        meta = job["metadata"]
        ns, uid = meta.get("namespace", ""), meta["uid"]
        foreign = state.foreign if state is not None else {}

        def controlled_by(kind: str, owner_uid: str) -> tuple[Obj, ...]:
            informer = self.informers.get(kind)
            return tuple(informer.store.by_owner_uid(owner_uid)) if informer else ()

        def lookup(kind: str, name: str) -> Obj | None:
            informer = self.informers.get(kind)
            found = informer.store.get(ns, name) if informer else None
            return found if found is not None else foreign.get((kind, name))

        owned_kinds = [k for k in self._states.kinds if k not in (POD, SERVICE)]
        return Observed(
            pods=controlled_by(POD, uid),
            services=controlled_by(SERVICE, uid),
            owned={kind: controlled_by(kind, uid) for kind in owned_kinds},
            lookup=lookup,
            controlled_by=controlled_by,
            create_failure=state.create_failure if state is not None else None,
            node=self.nodes.lookup() if self.nodes is not None else None,
            priority_classes=priority_classes,
            crashes=crashes,
            extra=extra or {},
            valid_spec=state.valid_spec if state is not None else None,
        )
