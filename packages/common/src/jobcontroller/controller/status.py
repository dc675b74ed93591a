"""The status writer: PUTs a job's status subresource when it changed, keeps our own write in
the cache, and holds back writes that only inform: the replica counters while the job starts or
the operator's rate limiter is saturated, and the Running condition while it is saturated.

The PUT carries the cached resourceVersion, so a newer job (someone edited it, or our own
previous write is not in the cache yet) answers 409: the writer then lets the informer bring
the newer object and the job is planned again, rather than overwrite what it has not seen.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

from jobcontroller.controller.state import InFlightStatus, JobState, JobStates
from jobcontroller.controller.telemetry import LOGGER_NAME, Telemetry
from jobcontroller.core.replicas import is_terminating
from jobcontroller.core.types import POD, Obj, Observed, StatusDoc
from jobcontroller.runtime.informer import strip_managed_fields
from jobcontroller.runtime.kube import ApiError, KubeApi, Resource
from jobcontroller.runtime.store import Store, object_key

__all__ = [
    "BACKLOG_RECHECK_SECONDS",
    "RUNNING_BACKLOG_HOLD_SECONDS",
    "STARTING_KINDS",
    "STATUS_BACKLOG_HOLD_SECONDS",
    "STATUS_COALESCE_SECONDS",
    "StatusWriter",
    "after_own_patch",
    "news",
    "pods_starting",
    "running_since",
]

log = structlog.get_logger(LOGGER_NAME)

_BATCH_JOB = "Job"
#: Kinds whose creation starts something (a pod, or a batch Job that makes one): a pass that
#: created one has not seen the job's start end.
STARTING_KINDS = (POD, _BATCH_JOB)

#: While a job is still starting (some of its pods Pending, a Job it owns with no pod yet, or
#: the pass just created objects for it), a status write that would change nothing but the
#: replica counters is held back, for at most this long after the first such change, so the
#: steps of a start (workers scheduled, then running, then MPI's launcher created, then its
#: pod running) cost one write with the condition they lead to, not one each: an MPIJob is
#: written when Created, Running and finished, as mpi-operator's slower queue writes it.
#: Conditions, start and completion times are written at once, and so are the counters once
#: nothing is starting: what a client reads after the last pod started is complete.
STATUS_COALESCE_SECONDS = 5.0

#: While the operator's client has no request to spare (a burst of jobs at --kube-api-qps has
#: spent more than half its rate limiter's burst: ``KubeApi.backlog``, whose ``reserve`` is
#: left to the requests that start jobs), writes that only inform wait for it, for
#: at most STATUS_BACKLOG_HOLD_SECONDS in a row, looked at again together once the client has
#: requests to spare (controller/spare.py, SpareWaiters): replica counters, and a child's
#: patch declared able to wait (``Child.patch_can_wait``). The budget goes to the objects that
#: start jobs. A status whose only other news is the Running condition waits too, with its
#: Event (emitted by the pass that writes it), but RUNNING_BACKLOG_HOLD_SECONDS at most: a job
#: that finishes meanwhile is written once, Created to Succeeded, as mpi-operator's queue
#: writes a job it reaches late, and one that runs on shows Running a few seconds late at
#: worst. Only saturation holds a Running condition: a start never does. A new job's first
#: write, whose only news is the Created condition (with the start time and counters, and
#: Running if it runs already), waits the same way and as long, with its Events and its
#: jobs_created count (emitted by the pass that writes it): in a burst the budget goes to
#: creating the jobs' objects first, and a job that runs by then is written once, Created and
#: Running together (or Created to Succeeded).
STATUS_BACKLOG_HOLD_SECONDS = 30.0
RUNNING_BACKLOG_HOLD_SECONDS = 5.0

#: The jobs whose writes wait for the client are looked at again together, by one timer
#: (controller/spare.py), when it has requests to spare: it asks no more often than this.
#: Under a saturated client the queue ahead drains at its QPS, and a look every few
#: milliseconds would spend the CPU the burst needs.
BACKLOG_RECHECK_SECONDS = 1.0


def pods_starting(observed: Observed) -> bool:
    """Whether the job is still starting: some pod of the job, or of an object the job controls
    (MPI's launcher Job), is still Pending, or a batch Job it owns that has not finished is
    about to change (the Job controller has not made its pod yet, has not counted its pods
    yet, or its pods have all ended and its verdict is coming)."""
    pods = list(observed.pods)
    for kind, objects in observed.owned.items():
        for obj in objects:
            uid = str((obj.get("metadata") or {}).get("uid") or "")
            controlled = observed.controlled_by(POD, uid)
            if kind == _BATCH_JOB and _job_will_run(obj):
                live = sum(1 for pod in controlled if not _ended(pod) and not is_terminating(pod))
                if not live or live != ((obj.get("status") or {}).get("active") or 0):
                    return True
            pods += controlled
    return any((p.get("status") or {}).get("phase", "Pending") == "Pending" for p in pods)


def news(old: Obj, new: Obj, running: str | None, created: str | None = None) -> str | None:
    """What a status change from ``old`` to ``new`` brings when all of it may wait:
    ``"counters"`` (only ``replicaStatuses``), ``"running"`` (besides those, only the
    ``running`` condition turning True, retiring Restarting as it does), ``"created"`` (a
    status with no condition yet getting the ``created`` condition, and ``running`` at most,
    with the start and reconcile times a first pass stamps, and counters), else None."""
    if {k: v for k, v in old.items() if k != "replicaStatuses"} == {
        k: v for k, v in new.items() if k != "replicaStatuses"
    }:
        return "counters"
    if created is not None and first_news(old, new, created, running):
        return "created"
    if running is None:
        return None
    if {k: v for k, v in old.items() if k not in _COUNTED_OR_CONDITIONS} != {
        k: v for k, v in new.items() if k not in _COUNTED_OR_CONDITIONS
    }:
        return None
    if running_since(old, running) is not None or running_since(new, running) is None:
        return None
    skip = (running, _RESTARTING)
    was = [c for c in old.get("conditions") or () if c.get("type") not in skip]
    now = [c for c in new.get("conditions") or () if c.get("type") not in skip]
    return "running" if was == now else None


#: What a job's first pass stamps besides its conditions and counters.
_FIRST_STAMPS = ("replicaStatuses", "conditions", "startTime", "lastReconcileTime")


def first_news(old: Obj, new: Obj, created: str, running: str | None) -> bool:
    """Whether ``new`` is a job's first status that may wait: ``old`` has no condition, and
    ``new`` brings ``created`` True, ``running`` True at most besides, and the stamps of a
    first pass."""
    if old.get("conditions"):
        return False
    conditions = new.get("conditions") or ()
    types = [c.get("type") for c in conditions]
    if created not in types or len(set(types)) != len(types):
        return False
    if any(c.get("status") != "True" for c in conditions):
        return False
    if any(kind not in (created, running) for kind in types):
        return False
    return {k: v for k, v in old.items() if k not in _FIRST_STAMPS} == {
        k: v for k, v in new.items() if k not in _FIRST_STAMPS
    }


def running_since(status: Obj, running: str) -> Obj | None:
    """The ``running`` condition of ``status`` when it is True."""
    for c in status.get("conditions") or ():
        if c.get("type") == running and c.get("status") == "True":
            return dict(c)
    return None


def _forget_holds(state: JobState) -> None:
    state.status_held = state.status_backlogged = state.running_backlogged = None


_COUNTED_OR_CONDITIONS = ("replicaStatuses", "conditions")
_RESTARTING = "Restarting"


def _ended(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _job_will_run(job: Obj) -> bool:
    """A batch Job that is neither suspended nor finished."""
    if (job.get("spec") or {}).get("suspend"):
        return False
    return not any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or ()
    )


def after_own_patch(cached: Obj, patched: Obj | None) -> Obj:
    """The job to write the status against: ``cached``, moved to the resourceVersion of our
    own patch of it in the same reconcile.

    Without this, the status PUT after a ledger patch always answers 409 and the status planned
    with the restart (the Restarting condition) is lost: the next plan no longer sees the
    deleted pod. Moving on is safe only if the patch response shows nothing else we have not
    planned from: the same spec generation and the same status.
    """
    if patched is None:
        return cached
    meta, new_meta = cached.get("metadata") or {}, patched.get("metadata") or {}
    if new_meta.get("generation") != meta.get("generation") or (patched.get("status") or {}) != (
        cached.get("status") or {}
    ):
        return cached
    return {**cached, "metadata": {**meta, "resourceVersion": new_meta.get("resourceVersion")}}


class StatusWriter:
    def __init__(
        self,
        *,
        api: KubeApi,
        job_resource: Resource,
        jobs: Store,
        states: JobStates,
        telemetry: Telemetry,
        requeue: Callable[[str], None] | None = None,
        running: str | None = None,
        created: str | None = None,
        creations: KubeApi | None = None,
    ) -> None:
        """``requeue``: queues a job by key (see :class:`InFlightStatus`); ``running`` and
        ``created``: the kind's Running and Created conditions (None: it has none, or its
        first write never waits); ``creations``: the client the operator creates with, whose
        rate limiter's backlog holds writes that may wait (``api``)."""
        self._api = api
        self._running = running
        self._created = created
        self._creations = creations or api
        self._job_resource = job_resource
        self._jobs = jobs
        self._states = states
        self._telemetry = telemetry
        self._requeue = requeue

    def first(self, key: str) -> bool:
        """Whether the job's next write is the first of this process: it never waits
        (:meth:`wait`) unless the client has no request to spare, so it may be sent while the
        pass's actions are carried out when it has."""
        state = self._states.get(key)
        return state is None or state.status_written is None

    def backlogged(self) -> bool:
        """Whether the client has no request to spare (``KubeApi.backlog``: a request sent now
        would wait for its rate limiter, or take a token of its reserve)."""
        return self._creations.backlog() > 0

    def wait(self, key: str, job: Obj, status: StatusDoc, *, starting: Callable[[], bool]) -> float:
        """Seconds to hold back a status write that changes only the replica counters, while
        the job is still starting (see STATUS_COALESCE_SECONDS) or the operator's client has
        no request to spare, or only those and the Running condition, while that client has
        none (see STATUS_BACKLOG_HOLD_SECONDS), as does a new job's first write that brings
        only its Created condition (and Running at most: :func:`first_news`); 0 to write
        now. A hold for the client (``JobState.status_backlogged`` set) returns the seconds
        left to its bound: the job is looked at again once the client has a request to spare
        (:class:`SpareWaiters`).
        ``starting`` (called only when it matters): whether the job was starting in what
        ``status`` was derived from (:func:`pods_starting`), or this pass created pods or
        batch Jobs for it (what they become is still to come)."""
        state = self._states.get(key)
        old = job.get("status") or {}
        new = status.to_dict()
        if state is None or state.status_written is None:
            # The first write of this process never waits (see first), but a new job's
            # Created under a saturated client (below).
            if self._created is None or not first_news(old, new, self._created, self._running):
                return 0.0
            state = self._states.of(key)
        if new == old:
            _forget_holds(state)  # what was held is wanted no more: a later change starts anew
            return 0.0
        brings = news(old, new, self._running, self._created)
        if brings is None:
            return 0.0
        backlog = self._creations.backlog()
        now = time.monotonic()
        if backlog > 0:
            # Look again once the queue ahead has drained (or a bound is reached); the start's
            # own bound counts from then. Running's bound counts from the pass that first held
            # it, not from an earlier hold of the counters.
            state.status_held = None
            if state.status_backlogged is None:
                state.status_backlogged = now
            left = state.status_backlogged + STATUS_BACKLOG_HOLD_SECONDS - now
            if brings in ("running", "created"):
                if state.running_backlogged is None:
                    state.running_backlogged = now
                left = min(left, state.running_backlogged + RUNNING_BACKLOG_HOLD_SECONDS - now)
            return max(0.0, left)
        state.status_backlogged = state.running_backlogged = None
        if brings != "counters" or not starting():
            return 0.0
        if state.status_held is None:
            state.status_held = now
        return max(0.0, state.status_held + STATUS_COALESCE_SECONDS - now)

    async def write(self, job: Obj, status: StatusDoc) -> bool:
        """PUT the status subresource when it differs from the cached one; True when the job
        has that status now (False: the job is gone, or a newer one is on its way)."""
        new = status.to_dict()
        if new == (job.get("status") or {}):
            return True
        body = {**job, "status": new}
        meta = job["metadata"]
        key = object_key(job)
        in_flight = self._states.status_in_flight[key] = InFlightStatus(new)
        answered = False
        try:
            written = await self._api.replace(
                self._job_resource, body, namespace=meta.get("namespace"), subresource="status"
            )
            answered = True
        except ApiError as exc:
            if exc.is_not_found:
                return False
            if exc.is_conflict:
                log.debug("status conflict; waiting for the newer job", job=meta.get("name"))
                return False
            raise
        finally:
            # Answered: the echo has come already, or is dropped as the version cached below.
            self._states.status_in_flight.pop(key, None)
            if not answered and in_flight.echoed and self._requeue is not None:
                # The write took effect (its echo came) but this call failed: the reconciler
                # waits for the newer job, which was that echo.
                self._requeue(key)
        self._cache_own_write(job, written)
        state = self._states.of(key)
        state.status_written = time.monotonic()
        _forget_holds(state)
        self._telemetry.status_written(job, job.get("status") or {}, new)
        return True

    def _cache_own_write(self, job: Obj, written: Obj) -> None:
        """Put the job we just wrote into the cache (client-go's MutationCache idea).

        This reconcile's writes queue the job again at once (their pods' events), usually
        before the watch brings our status: a plan from the old status would finish the job a
        second time, counting jobs_failed/successful twice, and its write would only 409. The
        PUT succeeded against the cached resourceVersion, so nothing older than ``written`` is
        still on its way to the cache. Skipped when the cache has already moved on.
        """
        meta = job["metadata"]
        cached = self._jobs.get(meta.get("namespace"), meta["name"])
        if cached is not None and (cached.get("metadata") or {}).get("resourceVersion") == meta.get(
            "resourceVersion"
        ):
            self._jobs.upsert(strip_managed_fields(written, cached))
