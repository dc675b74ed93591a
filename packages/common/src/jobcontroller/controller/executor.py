"""The executor: carries a plan's actions out against the API server.

Creations go one first, a probe, then all the others of the pass at once; one that gets its
write slot after another has failed is not sent. A job whose objects the API server refuses
(an invalid template, an admission webhook, a terminating namespace, a quota already used up)
costs one call per pass, not one per object; patches and deletions go at once. All of it runs
concurrently, at most ``_WRITE_CONCURRENCY`` calls at a time. Before creating or deleting, the
job's expectation for the kind is raised; a failed call lowers it at once (the informer lowers
it for a successful one).

A refused creation is remembered in the job's state (:class:`CreateFailure`, counting identical
refusals in a row) for the planner to act on; the next successful creation clears it.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import msgspec
from msgspec import Struct, field

from jobcontroller.controller.adoption import Adoption
from jobcontroller.controller.state import JobStates
from jobcontroller.controller.status import STATUS_BACKLOG_HOLD_SECONDS
from jobcontroller.controller.telemetry import Telemetry
from jobcontroller.controller.watch import is_terminating
from jobcontroller.core.types import (
    POD,
    SERVICE,
    Action,
    CreateFailure,
    CreateObject,
    DeleteJob,
    DeleteObject,
    Event,
    JobMetric,
    Obj,
    PatchObject,
)
from jobcontroller.runtime.clock import Clock, monotonic
from jobcontroller.runtime.kube import ApiError, KubeApi, Resource
from jobcontroller.runtime.ratelimit import Slots
from jobcontroller.runtime.store import Store

__all__ = ["Executed", "Executor", "unwatched_kinds"]

#: Concurrent API writes per reconcile: parallel pod creation for big jobs (kubeflow #2361)
#: without one job taking the whole client-side QPS budget in a single burst.
_WRITE_CONCURRENCY = 16

#: Phrases of the API server's messages when an admission plugin (a webhook, a
#: ValidatingAdmissionPolicy) refused an object: the object may be fine once the policy changes.
_ADMISSION_MARKERS = ("admission webhook", "ValidatingAdmissionPolicy", "denied request")


def _is_permanent_refusal(exc: ApiError) -> bool:
    """The object itself is invalid (400/422 from the API server's own validation), so the same
    object will never be accepted. Quotas (403), admission policies and server errors may pass."""
    if exc.status not in (400, 422):
        return False
    text = exc.message or str(exc)
    return not any(marker in text for marker in _ADMISSION_MARKERS)


class Executed(Struct):
    """What one pass did."""

    errors: list[Exception] = field(default_factory=list)
    """The failed calls' errors (already reported as events)."""
    done: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Objects created and deleted, by (``created`` or ``deleted``, kind)."""
    patched_job: Obj | None = None
    """The job as our own patch of it returned (the restart ledger), if the pass patched it."""
    wait: float = 0.0
    """Seconds left to the bound of the patches held back for the client
    (:meth:`Executor.hold_patches`); 0: none was."""


def unwatched_kinds(
    actions: Sequence[Action], resources: Mapping[str, Resource], *, job_kind: str
) -> list[str]:
    """Kinds the plan acts on that the controller has no Resource (and no informer) for: a
    framework's child whose kind is missing from ``owned_resources``."""
    kinds = {a.kind for a in actions if isinstance(a, CreateObject | DeleteObject | PatchObject)}
    return sorted(kinds - set(resources) - {job_kind})


class Executor:
    def __init__(
        self,
        *,
        api: KubeApi,
        job_resource: Resource,
        resources: Mapping[str, Resource],
        jobs: Store,
        states: JobStates,
        telemetry: Telemetry,
        adoption: Adoption,
        shutting_down: Callable[[], bool],
        seen_terminating: Callable[[str], bool],
        materialize: Callable[[CreateObject], CreateObject],
        clock: Clock = monotonic,
    ) -> None:
        self._api = api
        self._job_resource = job_resource
        self._resources = resources
        self._jobs = jobs
        self._states = states
        self._expectations = states.expectations
        self._telemetry = telemetry
        self._adoption = adoption
        self._shutting_down = shutting_down
        self._seen_terminating = seen_terminating
        self._materialize = materialize
        self._clock = clock
        self._write_slots = Slots(_WRITE_CONCURRENCY)

    async def execute(self, key: str, job: Obj, actions: tuple[Action, ...]) -> Executed:
        """Carry out ``actions`` concurrently, creations in batches after a probe."""
        done = Executed()
        unwatched = unwatched_kinds(actions, self._resources, job_kind=self._job_resource.kind)
        if unwatched:
            done.errors.append(
                ValueError(
                    f"the plan acts on objects of kind {', '.join(unwatched)}, which the "
                    "controller does not watch: list them in the framework's owned_resources"
                )
            )
            actions = tuple(a for a in actions if getattr(a, "kind", None) not in unwatched)
        actions, done.wait = self.hold_patches(key, actions)
        if not actions:
            return done
        creates = [a for a in actions if isinstance(a, CreateObject)]
        others = [a for a in actions if not isinstance(a, CreateObject)]
        results = await asyncio.gather(
            *(self._act(key, job, action, done) for action in others),
            self._create_in_batches(key, job, creates, done),
            return_exceptions=True,
        )
        self._telemetry.log_pass(done.done)
        for r in results:
            if isinstance(r, list):
                done.errors.extend(r)
            elif isinstance(r, Exception):
                done.errors.append(r)
            elif isinstance(r, BaseException):
                raise r
        return done

    def hold_patches(
        self, key: str, actions: tuple[Action, ...]
    ) -> tuple[tuple[Action, ...], float]:
        """Leave out the patches that may wait (``PatchObject.can_wait``) while the client's
        rate limiter has no request to spare (``KubeApi.backlog``: half its burst is kept for
        the requests that start jobs), for at most
        ``STATUS_BACKLOG_HOLD_SECONDS`` in a row; returns the actions to carry out and the
        seconds left to the held ones' bound (0: none held). The job is looked at again once
        the client has a request to spare (:class:`SpareWaiters`), or at that bound."""
        if not any(isinstance(a, PatchObject) and a.can_wait for a in actions):
            held = self._states.get(key)
            if held is not None:
                held.patches_backlogged = None  # what was held is wanted no more
            return actions, 0.0
        state = self._states.of(key)
        if self._api.backlog() <= 0:
            state.patches_backlogged = None
            return actions, 0.0
        now = self._clock()
        if state.patches_backlogged is None:
            state.patches_backlogged = now
        left = state.patches_backlogged + STATUS_BACKLOG_HOLD_SECONDS - now
        if left <= 0:
            state.patches_backlogged = None  # held long enough: sent with this pass
            return actions, 0.0
        kept = tuple(a for a in actions if not (isinstance(a, PatchObject) and a.can_wait))
        return kept, left

    async def _create_in_batches(
        self, key: str, job: Obj, creates: list[CreateObject], done: Executed
    ) -> list[Exception]:
        """Create a probe, then the rest (:meth:`_probe_then_rest`); stops after a failure, and
        (checked before each creation) once the job is gone, terminating or suspended, or the
        operator is shutting down. Creations that need others of the pass
        (``CreateObject.after``) come last, each only if all it needs were created."""
        errors: list[Exception] = []
        made: set[tuple[str, str]] = set()
        first = [c for c in creates if not c.after]
        await self._probe_then_rest(key, job, first, done, made, errors)
        then = [c for c in creates if c.after and all(need in made for need in c.after)]
        if then and not errors:
            await self._probe_then_rest(key, job, then, done, made, errors)
        return errors

    async def _probe_then_rest(
        self,
        key: str,
        job: Obj,
        creates: list[CreateObject],
        done: Executed,
        made: set[tuple[str, str]],
        errors: list[Exception],
    ) -> None:
        """Create ``creates``: one first, a probe, then all the others at once, at most
        ``_WRITE_CONCURRENCY`` calls in flight, and none that gets its write slot after one of
        them has failed (its errors are added to ``errors``) or once the job may not have the
        next object. Those already holding a slot are sent (some may still be waiting for the
        client's rate limiter): that is the bound on the calls a part-way refusal costs.

        The batch Job controller doubles its batches (1, 2, 4...) so that a project short of
        quota does not spam the API server with calls bound to fail. Here a refusal that
        concerns every object (an invalid template, an admission webhook, a terminating
        namespace, a quota used up: most do) ends the pass at the probe, as there; one that
        starts part-way (a quota running out) costs at most the calls in flight when the first
        refusal comes back, in a pass that created objects, and one call in each pass after
        it. A job's first pass takes two round trips instead of one per doubling (a TFJob's
        eight objects: four), which is what bounds a burst of jobs when the workers, not the
        client's QPS, are few (``make bench``, ``tfjobs-qps200``); a big job's objects stream
        through the write slots without waiting at each doubling."""
        if not creates:
            return
        errors += await self._create_batch(key, job, creates[:1], done, made)
        rest = creates[1:]
        if rest and not errors and self._still_wanted(job, rest[0].kind):
            errors += await self._create_batch(key, job, rest, done, made)

    async def _create_batch(
        self,
        key: str,
        job: Obj,
        batch: list[CreateObject],
        done: Executed,
        made: set[tuple[str, str]],
    ) -> list[Exception]:
        """Create ``batch`` at once, except a creation that gets its write slot after one of
        the batch failed (nothing is sent for it, and it returns None); adds what was created
        to ``made``."""
        errors: list[Exception] = []
        failed = False

        def stopped() -> bool:
            return failed

        async def create(action: CreateObject) -> bool | None:
            nonlocal failed
            try:
                return await self._act(key, job, action, done, stopped=stopped)
            except BaseException:
                failed = True
                raise

        results = await asyncio.gather(
            *(create(action) for action in batch), return_exceptions=True
        )
        for action, r in zip(batch, results, strict=True):
            if r is True:
                made.add((action.kind, action.name))
            elif isinstance(r, Exception):
                errors.append(r)
            elif isinstance(r, BaseException):
                raise r
        refused = next(
            (
                (action, r)
                for action, r in zip(batch, results, strict=True)
                if isinstance(r, ApiError)
            ),
            None,
        )
        if refused is not None:
            self._note_create_failure(key, *refused)  # once per pass: one retry each
        elif any(r is not None and not isinstance(r, BaseException) for r in results):
            state = self._states.get(key)
            if state is not None:
                state.create_failure = None
        return errors

    def _note_create_failure(self, key: str, action: CreateObject, exc: ApiError) -> None:
        """Count a refused creation for the planner (``Observed.create_failure``)."""
        failure = CreateFailure(
            kind=action.kind,
            name=action.name,
            code=exc.status,
            reason=exc.reason,
            message=exc.message or str(exc),
            permanent=_is_permanent_refusal(exc),
        )
        state = self._states.of(key)
        last = state.create_failure
        if last is not None and last.same_cause(failure):
            failure = msgspec.structs.replace(failure, count=last.count + 1)
        state.create_failure = failure

    def _still_wanted(self, job: Obj, kind: str) -> bool:
        """Whether an object of ``kind`` may still be created for ``job`` (read from the
        cache): not once the job is gone or terminating or the operator is shutting down, and
        no pod or Service once the job is suspended (a framework's own objects, such as MPI's
        suspended launcher Job, are planned for suspended jobs on purpose)."""
        if self._shutting_down():
            return False
        meta = job["metadata"]
        current = self._jobs.get(meta.get("namespace", ""), meta["name"])
        if current is None or is_terminating(current):
            return False
        if (current.get("metadata") or {}).get("uid") != meta.get("uid"):
            return False
        if kind not in (POD, SERVICE):
            return True
        run_policy = (current.get("spec") or {}).get("runPolicy") or {}
        return not run_policy.get("suspend")

    async def _act(
        self,
        key: str,
        job: Obj,
        action: Action,
        done: Executed,
        stopped: Callable[[], bool] | None = None,
    ) -> bool | None:
        """Carry out ``action``; True when it created an object, None when ``stopped`` said
        so once its write slot was free (nothing was sent)."""
        ns = job["metadata"].get("namespace", "")
        async with self._write_slots:
            if stopped is not None and stopped():
                return None
            if isinstance(action, CreateObject):
                return await self._create(key, job, action, ns, done)
            if isinstance(action, DeleteObject):
                await self._delete(key, job, action, done)
            elif isinstance(action, PatchObject):
                own = action.kind == self._job_resource.kind
                resource = self._job_resource if own else self._resources[action.kind]
                patched = await self._api.merge_patch(
                    resource, action.name, action.patch, namespace=action.namespace
                )
                if own and action.name == job["metadata"]["name"]:
                    done.patched_job = patched
            elif isinstance(action, DeleteJob):
                await self._delete_job(job)
        return False

    async def _create(
        self, key: str, job: Obj, action: CreateObject, ns: str, done: Executed
    ) -> bool:
        """Create ``action``'s object; True when this call created it (False when it was not
        wanted any more or was in the way: someone else's, or the job's own adopted)."""
        if not self._still_wanted(job, action.kind):
            return False  # deleted, suspended or shutting down while this pass was under way
        exp = f"{key}/{action.kind}"
        self._expectations.expect_creations(exp, 1)
        try:
            body = self._materialize(action).body
            await self._api.create(self._resources[action.kind], body, namespace=ns, decode=False)
        except ApiError as exc:
            self._expectations.lower_creations(exp, 1)
            # A same-named object appeared between our cache read and the create, or it is one
            # our caches cannot show: the job's own from before a swap (adopted), or another's.
            if exc.is_already_exists and await self._adoption.adopt_or_note_foreign(
                key, job, action, ns
            ):
                return False
            if action.kind == SERVICE:
                self._telemetry.service_creation_failed()
            self._telemetry.warn(
                job,
                f"FailedCreate{action.kind}",
                f"Error creating {action.kind.lower()} {action.name}: {exc.message}",
            )
            if not exc.is_already_exists:
                raise
            return False
        except Exception:
            self._expectations.lower_creations(exp, 1)
            raise
        done.done[("created", action.kind)] += 1
        self._telemetry.count_object(action.kind, created=True)
        self._telemetry.record(
            job,
            Event(
                "Normal",
                f"SuccessfulCreate{action.kind}",
                f"Created {action.kind.lower()}: {action.name}",
            ),
        )
        return True

    async def _delete(self, key: str, job: Obj, action: DeleteObject, done: Executed) -> None:
        exp = f"{key}/{action.kind}"
        # Force-deleting a pod already seen terminating (on a lost node): its deletion was
        # observed then, and its going away will not be observed again.
        expect = not self._seen_terminating(action.uid)
        if expect:
            self._expectations.expect_deletions(exp, 1)
        try:
            await self._api.delete(
                self._resources[action.kind],
                action.name,
                namespace=action.namespace,
                uid=action.uid,
                grace_period_seconds=action.grace_period_seconds,
            )
        except ApiError as exc:
            if expect:
                self._expectations.lower_deletions(exp, 1)
            if exc.is_not_found or exc.is_conflict:
                return  # already gone, or replaced by a successor we must not touch
            self._telemetry.warn(
                job,
                f"FailedDelete{action.kind}",
                f"Error deleting {action.kind.lower()} {action.name}: {exc.message}",
            )
            raise
        except Exception:
            if expect:
                self._expectations.lower_deletions(exp, 1)
            raise
        done.done[("deleted", action.kind)] += 1
        self._telemetry.count_object(action.kind, created=False)
        self._telemetry.record(
            job,
            Event(
                "Normal",
                f"SuccessfulDelete{action.kind}",
                f"Deleted {action.kind.lower()}: {action.name}",
            ),
        )

    async def _delete_job(self, job: Obj) -> None:
        meta = job["metadata"]
        try:
            await self._api.delete(
                self._job_resource, meta["name"], namespace=meta.get("namespace"), uid=meta["uid"]
            )
        except ApiError as exc:
            if exc.is_not_found or exc.is_conflict:
                return
            self._telemetry.warn(job, "FailedDeleteJob", f"Error deleting: {exc.message}")
            raise
        self._telemetry.record(
            job, Event("Normal", "SuccessfulDeleteJob", f"Deleted job: {meta['name']}")
        )
        self._telemetry.count(job, (JobMetric.DELETED,))
