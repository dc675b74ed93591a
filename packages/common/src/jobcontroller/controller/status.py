"""The status writer: PUTs a job's status subresource when it changed, keeps our own write in
the cache, and holds back writes that would change only the replica counters while pods start.

The PUT carries the cached resourceVersion, so a newer job (someone edited it, or our own
previous write is not in the cache yet) answers 409: the writer then lets the informer bring
the newer object and the job is planned again, rather than overwrite what it has not seen.
"""

from __future__ import annotations

import time

import structlog

from jobcontroller.controller.state import JobStates
from jobcontroller.controller.telemetry import LOGGER_NAME, Telemetry
from jobcontroller.core.types import POD, Obj, Observed, StatusDoc
from jobcontroller.runtime.informer import strip_managed_fields
from jobcontroller.runtime.kube import ApiError, KubeApi, Resource
from jobcontroller.runtime.store import Store, object_key

__all__ = ["STATUS_COALESCE_SECONDS", "StatusWriter", "after_own_patch", "pods_starting"]

log = structlog.get_logger(LOGGER_NAME)

#: While some of a job's pods are still Pending, a status write that would change nothing but
#: the replica counters waits until this long after the job's previous status write, so pods
#: starting one after another cost one write, not one each (a client-go operator gets the same
#: from its slower queue). Conditions, start and completion times are written at once, and so
#: are the counters once no pod is Pending: what a client reads after the last pod started is
#: complete.
STATUS_COALESCE_SECONDS = 1.0


def pods_starting(observed: Observed) -> bool:
    """Whether some pod of the job, or of an object the job controls (MPI's launcher Job), is
    still Pending."""
    pods = list(observed.pods)
    for objects in observed.owned.values():
        for obj in objects:
            uid = str((obj.get("metadata") or {}).get("uid") or "")
            pods += observed.controlled_by(POD, uid)
    return any((p.get("status") or {}).get("phase", "Pending") == "Pending" for p in pods)


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
    ) -> None:
        self._api = api
        self._job_resource = job_resource
        self._jobs = jobs
        self._states = states
        self._telemetry = telemetry

    def wait(self, key: str, job: Obj, status: StatusDoc, *, observed: Observed) -> float:
        """Seconds to hold back a status write that changes only the replica counters while
        some of the job's pods are still starting (see STATUS_COALESCE_SECONDS); 0 to write
        now."""
        state = self._states.get(key)
        last = state.status_written if state is not None else None
        if last is None or not pods_starting(observed):
            return 0.0
        old = job.get("status") or {}
        new = status.to_dict()
        if {k: v for k, v in old.items() if k != "replicaStatuses"} != {
            k: v for k, v in new.items() if k != "replicaStatuses"
        }:
            return 0.0
        return max(0.0, last + STATUS_COALESCE_SECONDS - time.monotonic())

    async def write(self, job: Obj, status: StatusDoc) -> bool:
        """PUT the status subresource when it differs from the cached one; True when the job
        has that status now (False: the job is gone, or a newer one is on its way)."""
        new = status.to_dict()
        if new == (job.get("status") or {}):
            return True
        body = {**job, "status": new}
        meta = job["metadata"]
        try:
            written = await self._api.replace(
                self._job_resource, body, namespace=meta.get("namespace"), subresource="status"
            )
        except ApiError as exc:
            if exc.is_not_found:
                return False
            if exc.is_conflict:
                log.debug("status conflict; waiting for the newer job", job=meta.get("name"))
                return False
            raise
        self._cache_own_write(job, written)
        self._states.of(object_key(job)).status_written = time.monotonic()
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
            self._jobs.upsert(strip_managed_fields(written))
