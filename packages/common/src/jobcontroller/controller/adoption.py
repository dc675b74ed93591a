"""Adoption: what to do about an object found in the way of a creation that the caches do not
show (it lacks the job-name label, so no informer holds it).

The job's own object (its controller reference names the job) is adopted: labels the planned
object carries and it lacks are patched on, so the informers see it from then on. That is what
objects created by the Go operators before a swap need (mpi-operator labels its Service,
ConfigMap, Secret and launcher Job with ``app`` only; the training-operator's PodGroups carry no
labels). Any other object is remembered in the job's state, so the next plan (queued at once)
reports the conflict and leaves it alone, and looked at again every few seconds, since no
watch event says when it goes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import structlog

from jobcontroller.controller.state import JobStates
from jobcontroller.controller.telemetry import LOGGER_NAME, Telemetry
from jobcontroller.controller.watch import LABEL_JOB_NAME
from jobcontroller.core.names import is_controlled_by
from jobcontroller.core.types import CreateObject, Event, Obj
from jobcontroller.runtime.kube import ApiError, KubeApi, Resource

__all__ = ["FOREIGN_RECHECK_SECONDS", "Adoption"]

log = structlog.get_logger(LOGGER_NAME)

#: How often a job looks again at an object found in its way that the caches do not show.
FOREIGN_RECHECK_SECONDS = 10.0


class Adoption:
    def __init__(
        self,
        *,
        api: KubeApi,
        resources: Mapping[str, Resource],
        states: JobStates,
        telemetry: Telemetry,
        requeue: Callable[[str], None],
    ) -> None:
        self._api = api
        self._resources = resources
        self._states = states
        self._telemetry = telemetry
        self._requeue = requeue

    async def adopt_or_note_foreign(
        self, key: str, job: Obj, action: CreateObject, ns: str
    ) -> bool:
        """Look at the object in the way of ``action`` (its create answered AlreadyExists);
        True when it is the job's own (adopted, or on its way to the caches), False when it
        is someone else's (remembered, and the job queued to report it)."""
        resource = self._resources[action.kind]
        try:
            other = await self._api.get(resource, action.name, namespace=ns)
        except ApiError as exc:
            if exc.is_not_found:
                return True  # gone already: the next plan creates ours
            raise
        if not is_controlled_by(other, uid=str(job["metadata"]["uid"])):
            self._states.of(key).foreign[(action.kind, action.name)] = {
                "metadata": other.get("metadata") or {}
            }
            self._requeue(key)
            return False
        have = (other.get("metadata") or {}).get("labels") or {}
        want = (action.body.get("metadata") or {}).get("labels") or {}
        missing = {k: v for k, v in want.items() if k not in have}
        if LABEL_JOB_NAME in have or not missing:
            return True  # ours and in the caches' view: the informer brings it
        meta = other["metadata"]
        # The uid makes the patch apply to this object only (the API server refuses a patch
        # whose uid differs, as a conflict or an invalid immutable field); the expectation is
        # met when the informer first sees it.
        exp = f"{key}/{action.kind}"
        expectations = self._states.expectations
        expectations.expect_creations(exp, 1)
        try:
            await self._api.merge_patch(
                resource,
                action.name,
                {"metadata": {"uid": meta.get("uid"), "labels": missing}},
                namespace=ns,
            )
        except ApiError as exc:
            expectations.lower_creations(exp, 1)
            if exc.is_not_found or exc.is_conflict or exc.status == 422:
                return True  # gone, or replaced by another object (uid): the next plan looks
            raise
        except Exception:
            expectations.lower_creations(exp, 1)
            raise
        log.info(
            "adopted an object the job controls that lacked its labels",
            kind=action.kind,
            object=action.name,
            labels=sorted(missing),
        )
        self._telemetry.record(
            job,
            Event(
                "Normal",
                f"Adopted{action.kind}",
                f"Adopted {action.kind.lower()}: {action.name}",
            ),
        )
        return True

    async def recheck_foreign(self, key: str, namespace: str) -> None:
        """Forget the objects in the job's way that are gone (or replaced) by now."""
        state = self._states.get(key)
        if state is None:
            return
        entries = state.foreign
        for (kind, name), seen in list(entries.items()):
            try:
                current = await self._api.get(self._resources[kind], name, namespace=namespace)
            except ApiError as exc:
                if not exc.is_not_found:
                    raise
                current = None
            if current is None or current["metadata"].get("uid") != seen["metadata"].get("uid"):
                del entries[(kind, name)]
