"""``JobController``: the base class a framework operator subclasses. It joins core to runtime.

Data flows one way. Informer events on the job, its pods, its services and its other owned
objects enqueue the job's key; ``reconcile(key)`` reads the job and what it owns from the
informer caches (never a LIST), asks the pure planner (:func:`jobcontroller.core.planner.plan`)
what to do, and carries the plan out: creates and deletes concurrently under expectations,
records events and metrics, and writes the status only when it changed. Timers in the plan
(deadline, TTL) come back as ``requeue_after`` so they fire on time with no event needed.

A framework subclass sets the class attributes (``model``, ``framework_name``,
``controller_name``) and overrides the few :class:`~jobcontroller.core.types.Framework` hooks that
differ from the defaults here: usually ``set_defaults``, ``validate``, ``set_cluster_spec`` and
``update_status``. Operators that own more kinds of objects list them in ``owned_resources``
and return actions on them from ``extra_objects``.

Expectations: before creating or deleting, the executor raises the expectation of the job's
per-kind key; informer events lower it. While any is pending the job is not re-planned (its
cache view is known to be stale), but a failed API call lowers the expectation at once and
every record expires after five minutes, so no job ever waits on a lost one (kubeflow #1306).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import logging
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Generic

import structlog
from prometheus_client.core import GaugeMetricFamily, Metric

from jobcontroller.api.common import JobStatus
from jobcontroller.api.crd import build_crd
from jobcontroller.core.conditions import is_finished
from jobcontroller.core.crashes import Standing
from jobcontroller.core.names import is_controlled_by
from jobcontroller.core.nodes import node_state
from jobcontroller.core.planner import plan
from jobcontroller.core.types import (
    POD,
    POD_GROUP,
    SERVICE,
    Action,
    CreateFailure,
    CreateObject,
    DeleteJob,
    DeleteObject,
    Event,
    JobMetric,
    JobT,
    LifecycleWords,
    NodeState,
    Obj,
    Observed,
    PatchObject,
    Plan,
    PlanConfig,
    ReplicaPods,
)
from jobcontroller.crashguard import CrashGuard
from jobcontroller.runtime.events import EventRecorder
from jobcontroller.runtime.expectations import Expectations
from jobcontroller.runtime.informer import (
    Informer,
    compact_node,
    compact_pod,
    strip_managed_fields,
)
from jobcontroller.runtime.kube import NODES, PODS, SERVICES, ApiError, KubeApi, Resource
from jobcontroller.runtime.manager import Manager
from jobcontroller.runtime.metrics import Metrics
from jobcontroller.runtime.store import object_key
from jobcontroller.runtime.workqueue import WorkQueue

__all__ = ["LABEL_JOB_NAME", "JobController", "pod_group_resource"]

log = structlog.get_logger(__name__)
_DEBUG = logging.getLogger(__name__)

#: Read for gang scheduling: a PodGroup's minResources counts replica types by priority.
PRIORITY_CLASSES = Resource(
    "scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", namespaced=False
)

#: Events about one created or deleted object: the log counts them per pass instead.
#: (``SuccessfulDeleteJob`` is the job's own TTL deletion, worth its line.)
_COUNTED_REASON = re.compile(r"^(SuccessfulCreate.|SuccessfulDelete(?!Job$).)")


def _counted(done: Mapping[str, int]) -> str:
    """``{"Pod": 4, "Service": 1}`` -> ``"4 pods, 1 service"``."""
    return ", ".join(f"{n} {kind.lower()}{'s' if n != 1 else ''}" for kind, n in done.items())


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def _parse_time(value: Any) -> float | None:
    """An RFC 3339 timestamp as epoch seconds, None when absent or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _state_of(job: Obj) -> tuple[str, float | None]:
    """The job's state (its last True condition; Pending before it has one) and since when."""
    meta = job.get("metadata") or {}
    for cond in reversed((job.get("status") or {}).get("conditions") or ()):
        if cond.get("status") == "True":
            return str(cond.get("type")), _parse_time(cond.get("lastTransitionTime"))
    return "Pending", _parse_time(meta.get("creationTimestamp"))


def _log_condition_changes(old: Obj, new: Obj) -> None:
    """One info line per condition whose status changed (or appeared) in a status write."""
    before = {c.get("type"): c for c in old.get("conditions") or ()}
    for cond in new.get("conditions") or ():
        previous = before.get(cond.get("type"))
        was = previous.get("status") if previous else None
        if was == cond.get("status"):
            continue
        log.info(
            f"condition {cond.get('type')}: {was or 'absent'} -> {cond.get('status')}",
            condition=cond.get("type"),
            reason=cond.get("reason"),
            message=cond.get("message"),
        )


LABEL_JOB_NAME = "training.kubeflow.org/job-name"
MANAGED_BY_US = "kubeflow.org/training-operator"

VOLCANO_POD_GROUPS = Resource("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups")
PLUGINS_POD_GROUPS = Resource("scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups")

#: Concurrent API writes per reconcile: parallel pod creation for big jobs (kubeflow #2361)
#: without one job taking the whole client-side QPS budget in a single burst.
_WRITE_CONCURRENCY = 16

#: The pod store's index on ``spec.nodeName``: a node's change wakes the jobs of its pods.
NODE_NAME_INDEX = "node-name"


def _pod_node_name(pod: Obj) -> list[str]:
    name = (pod.get("spec") or {}).get("nodeName")
    return [str(name)] if name else []


#: How often a job looks again at an object found in its way that the caches do not show (it
#: lacks the job-name label, so no watch event says when it goes).
_FOREIGN_RECHECK_SECONDS = 10.0


def _starting(observed: Observed) -> bool:
    """Whether some pod of the job (or of a Job it owns: MPI's launcher) is still Pending."""
    pods = list(observed.pods)
    for child in observed.owned.get("Job", ()):
        pods += observed.controlled_by(POD, str(child.get("metadata", {}).get("uid", "")))
    return any((p.get("status") or {}).get("phase", "Pending") == "Pending" for p in pods)


#: While some of a job's pods are still Pending, a status write that would change nothing but
#: the replica counters waits until this long after the job's previous status write, so pods
#: starting one after another cost one write, not one each (a client-go operator gets the same
#: from its slower queue). Conditions, start and completion times are written at once, and so
#: are the counters once no pod is Pending: what a client reads after the last pod started is
#: complete.
STATUS_COALESCE_SECONDS = 1.0


def pod_group_resource(gang_scheduler_name: str) -> Resource | None:
    if not gang_scheduler_name:
        return None
    return VOLCANO_POD_GROUPS if gang_scheduler_name == "volcano" else PLUGINS_POD_GROUPS


def _is_terminating(obj: Obj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def _finished(job: Obj) -> bool:
    """Whether the stored status of ``job`` has Succeeded or Failed True."""
    return any(
        c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or ()
    )


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


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _after_own_patch(cached: Obj, patched: Obj | None) -> Obj:
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


class JobController(Generic[JobT]):
    """Reconciles one job kind. See the module docstring; subclasses override hooks.

    Parametrised by the framework's job model (``class TFJobController(JobController[TFJob])``),
    so every hook receives that model, already defaulted: no casts.
    """

    model: type[JobT]
    framework_name: ClassVar[str]
    """Metrics label: tensorflow, pytorch, mpi."""
    controller_name: ClassVar[str]
    """The operator-name label value and the work queue's name: tfjob-controller, ..."""
    event_component: ClassVar[str | None] = None
    """The Events' source (``From:`` in ``kubectl describe``): the anchor's event recorder
    name; None means ``controller_name``."""
    object_events: ClassVar[bool] = True
    """An Event per object created or deleted (``SuccessfulCreatePod``...), as kubeflow/common
    records them; mpi-operator records none (the log still counts them)."""
    owned_resources: ClassVar[Mapping[str, Resource]] = {}
    """Kinds besides Pod, Service and PodGroup the framework creates (kind -> Resource)."""
    patched_children: ClassVar[frozenset[str]] = frozenset()
    """Pod or Service when the framework patches them (MPI's job-wide Service): the RBAC
    ``<operator> manifests`` generates grants ``patch`` on those only."""

    def __init__(
        self,
        *,
        config: PlanConfig | None = None,
        clock: Callable[[], dt.datetime] = _utcnow,
        expectations: Expectations | None = None,
    ) -> None:
        self.name = self.controller_name
        """The Controller protocol's name: the work queue's name and the metrics label."""
        self.kind = self.model.KIND
        """Bound into every reconcile's log context by the manager."""
        self.config = config or PlanConfig(
            cluster_domain=os.environ.get("CUSTOM_CLUSTER_DOMAIN", "")
        )
        self._clock = clock
        # Not ``or``: an Expectations with no pending keys is falsy (it has __len__).
        self.expectations = expectations if expectations is not None else Expectations()
        self.job_resource = Resource(
            self.model.GROUP, self.model.VERSION, self.model.KIND, self.model.PLURAL
        )
        self._resources: dict[str, Resource] = {
            POD: PODS,
            SERVICE: SERVICES,
            **self.owned_resources,
        }
        pg = pod_group_resource(self.config.gang_scheduler_name)
        if pg is not None and self.config.pod_group_available:
            self._resources[POD_GROUP] = pg
        self._informers: dict[str, Informer] = {}
        self._terminating: set[str] = set()
        """UIDs whose deletion was already counted when they started terminating."""
        self._api: KubeApi | None = None
        self._events: EventRecorder | None = None
        self._metrics: Metrics | None = None
        self._queue: WorkQueue[str] | None = None
        self._write_slots = asyncio.Semaphore(_WRITE_CONCURRENCY)
        # The job as returned by this reconcile's own patch of it (the restart ledger), by key;
        # one worker per key, so a reconcile only ever sees its own entry.
        self._patched_jobs: dict[str, Obj] = {}
        # Objects this pass created and deleted, per job key, for one log line per pass.
        self._tally: dict[str, Counter[tuple[str, str]]] = {}
        # Objects outside the caches that a create ran into, by job key then (kind, name).
        self._foreign: dict[str, dict[tuple[str, str], Obj]] = {}
        # The latest run of identical creation failures, by job key (one entry per job at
        # most, dropped by a successful creation and when the job goes).
        self._create_failures: dict[str, CreateFailure] = {}
        # When each job's status was last written by this process (monotonic seconds): one
        # entry per job at most, dropped when the job goes.
        self._status_written: dict[str, float] = {}
        self.crash_guard: CrashGuard | None = None
        """The process's crash-loop guard (jobcontroller/crashguard.py); None: no guard."""

    # ----------------------------------------------------------------- Framework defaults

    def set_defaults(self, job: JobT) -> JobT:
        return job

    def validate(self, job: JobT) -> list[str]:
        return []

    def tolerated(self, job: JobT) -> list[str]:
        return []

    def pod_replica_types(self, job: JobT) -> list[str]:
        specs = job.replica_specs()
        ordered = [rt for rt in self.model.REPLICA_TYPES if rt in specs]
        return ordered + sorted(rt for rt in specs if rt not in ordered)

    def is_master_role(self, job: JobT, rtype: str, index: int) -> bool:
        return False

    def replica_index_offset(self, job: JobT, rtype: str) -> int:
        return 0

    def lifecycle_words(self, job: JobT) -> LifecycleWords:
        return LifecycleWords.training_operator(self.kind, job.name)

    def delegates_run_policy(self, job: JobT) -> bool:
        return False

    def services_for(self, job: JobT, rtype: str) -> bool:
        return True

    def recreate_failed_pods(self, job: JobT, rtype: str) -> bool:
        return True

    def gang_objects(self, job: JobT, observed: Observed) -> list[tuple[str, Obj]]:
        return []

    def gang_pods(self, job: JobT, observed: Observed) -> list[tuple[str, Obj]]:
        return []

    def set_cluster_spec(
        self, job: JobT, template: Obj, *, rtype: str, index: int, config: PlanConfig
    ) -> None:
        return None

    def cluster_env_bytes(self, job: JobT, rtype: str, *, config: PlanConfig) -> int:
        return 0

    def update_status(
        self,
        job: JobT,
        status: JobStatus,
        *,
        replicas: Mapping[str, ReplicaPods],
        now: dt.datetime,
    ) -> list[Event]:
        raise NotImplementedError(f"{type(self).__name__} must define its success/failure rule")

    def extra_objects(
        self, job: JobT, observed: Observed, status: JobStatus, *, now: dt.datetime
    ) -> tuple[list[Action], list[Event]]:
        return [], []

    def crd(self) -> dict[str, Any]:
        """The job kind's CustomResourceDefinition (``build_crd(model)``; override to add a
        scale subresource or categories)."""
        return build_crd(self.model)

    # ------------------------------------------------------------------ executor hooks

    def materialize(self, action: CreateObject) -> CreateObject:
        """The object to send for a planned creation, called just before the API call.

        Plans are pure and deterministic, so content that must be fresh and random (MPI's SSH
        key pair) cannot be in them: the plan asks for the object and this hook fills it in.
        Whatever it adds goes to the apiserver only, never to logs or events.
        """
        return action

    # -------------------------------------------------------------------------- wiring

    def setup(self, manager: Manager, queue: WorkQueue[str]) -> None:
        """Watch the job kind and, filtered by the job-name label, what jobs own."""
        self._api, self._events, self._metrics, self._queue = (
            manager.api,
            manager.events,
            manager.metrics,
            queue,
        )
        jobs = manager.informer(self.job_resource)
        jobs.add_handlers(
            on_add=lambda o: self._enqueue_job(o),
            on_update=lambda old, new: self._enqueue_job(new),
            on_delete=self._job_deleted,
        )
        self._informers["job"] = jobs
        if self._metrics is not None:
            self._metrics.on_scrape(self._job_families)
        if self.config.pod_group_available:
            self._watch_priority_classes(manager.informer(PRIORITY_CLASSES))
        for kind, resource in self._resources.items():
            informer = manager.informer(
                resource,
                label_selector=LABEL_JOB_NAME,
                transform=compact_pod if kind == POD else None,
            )
            self._watch_owned(kind, informer)
            self._informers[kind] = informer
        if self.config.node_lost_grace_seconds > 0:
            self._watch_nodes(manager.informer(NODES, transform=compact_node))

    def _watch_nodes(self, informer: Informer) -> None:
        """NodeLost: keep each node's readiness (compacted: name and Ready condition only) and
        wake the jobs whose pods are on a node when its readiness changes or it goes. The pod
        store gets an index on ``spec.nodeName`` (shared by the controllers of one manager);
        a node's grace period ending needs no event: the plan's timer fires."""
        self._informers["node"] = informer
        pods = self._informers[POD].store
        with contextlib.suppress(ValueError):  # another controller added it to the shared store
            pods.add_index(NODE_NAME_INDEX, _pod_node_name)

        def wake(node: Obj) -> None:
            if self._queue is None:
                return
            name = str((node.get("metadata") or {}).get("name") or "")
            for pod in pods.by_index(NODE_NAME_INDEX, name):
                key, controlled = self._owner_job_key(pod)
                if key is not None and controlled:
                    self._queue.add(key)

        def on_update(old: Obj, new: Obj) -> None:
            if node_state(old) != node_state(new):
                wake(new)

        informer.add_handlers(on_update=on_update, on_delete=wake)

    def _watch_priority_classes(self, informer: Informer) -> None:
        """Keep ``config.priority_classes`` (name -> value) as the cluster has it, as v1.9
        reads PriorityClasses to fill a PodGroup's minResources highest priority first. A
        change wakes no job: it counts from the next PodGroup written, as in v1.9."""

        def refresh(*_: Obj) -> None:
            values = {
                str(pc["metadata"]["name"]): int(pc.get("value") or 0)
                for pc in informer.store.list()
            }
            self.config = dataclasses.replace(self.config, priority_classes=values)

        informer.add_handlers(on_add=refresh, on_update=refresh, on_delete=refresh)

    def _watch_owned(self, kind: str, informer: Informer) -> None:
        def on_add(obj: Obj) -> None:
            self._owned_changed(kind, obj, created=True)

        def on_update(old: Obj, new: Obj) -> None:
            # A deletion is observed when the object starts terminating, as upstream
            # controllers count it: a pod held by a finalizer or a long grace period must not
            # keep its job from being planned until the expectation expires.
            failed_now = _phase(new) == "Failed" != _phase(old)
            if (
                kind == POD
                and self._metrics is not None
                and failed_now
                and self._controlled_here(new)
            ):
                self._metrics.failed_pods.inc()
            uid = str((new.get("metadata") or {}).get("uid") or "")
            starts = _is_terminating(new) and not _is_terminating(old) and bool(uid)
            if starts:
                self._terminating.add(uid)
            self._owned_changed(kind, new, deleted=starts)

        def on_delete(obj: Obj) -> None:
            uid = str((obj.get("metadata") or {}).get("uid") or "")
            counted = uid in self._terminating
            self._terminating.discard(uid)
            self._owned_changed(kind, obj, deleted=not counted)

        informer.add_handlers(on_add=on_add, on_update=on_update, on_delete=on_delete)

    def resync(self) -> None:
        """A new leadership term after a lost one: the reconciles of the old term were
        cancelled wherever they stood, so expectations they raised may never be met. Start
        from a clean slate and look at every job again."""
        self.expectations.clear()
        for job in self._informers["job"].store.list():
            self._enqueue_job(job)

    def _enqueue_job(self, obj: Obj) -> None:
        assert self._queue is not None
        meta = obj.get("metadata", {})
        self._queue.add(f"{meta.get('namespace', '')}/{meta.get('name', '')}")

    def _job_deleted(self, obj: Obj) -> None:
        meta = obj.get("metadata", {})
        self._forget(f"{meta.get('namespace', '')}/{meta.get('name', '')}")

    def _forget(self, key: str) -> None:
        for kind in self._resources:
            self.expectations.delete(f"{key}/{kind}")
        self._foreign.pop(key, None)
        self._create_failures.pop(key, None)
        self._status_written.pop(key, None)
        if self.crash_guard is not None:
            self.crash_guard.forget(self.kind, key)

    def _owner_job_key(self, obj: Obj) -> tuple[str | None, bool]:
        """The key of the job that controls ``obj`` (and True), or, for other objects wearing
        our job-name label, the key of that job (and False): foreign objects may block its
        names, and objects of its own children (a launcher Job's pods) feed its status."""
        meta = obj.get("metadata", {})
        ns = meta.get("namespace", "")
        for ref in meta.get("ownerReferences") or ():
            group = str(ref.get("apiVersion", "")).split("/")[0]
            if (
                ref.get("controller")
                and ref.get("kind") == self.model.KIND
                and group == self.model.GROUP
            ):
                return f"{ns}/{ref.get('name')}", True
        job_name = (meta.get("labels") or {}).get(LABEL_JOB_NAME)
        return (f"{ns}/{job_name}" if job_name else None), False

    def _owned_changed(
        self, kind: str, obj: Obj, *, created: bool = False, deleted: bool = False
    ) -> None:
        key, controlled = self._owner_job_key(obj)
        if key is None or self._queue is None:
            return
        # Only objects the job controls settle its expectations: it raised them for those.
        if controlled and created:
            self.expectations.creation_observed(f"{key}/{kind}")
        elif controlled and deleted:
            self.expectations.deletion_observed(f"{key}/{kind}")
        self._queue.add(key)

    # -------------------------------------------------------------------------- reconcile

    def observe(self, job: Obj) -> Observed:
        """The job's slice of the caches: what it controls, and a by-name lookup."""
        meta = job["metadata"]
        ns, uid = meta.get("namespace", ""), meta["uid"]

        def owned(kind: str) -> tuple[Obj, ...]:
            informer = self._informers.get(kind)
            return tuple(informer.store.by_owner_uid(uid)) if informer else ()

        foreign = self._foreign.get(f"{ns}/{meta.get('name', '')}", {})

        def lookup(kind: str, name: str) -> Obj | None:
            informer = self._informers.get(kind)
            found = informer.store.get(ns, name) if informer else None
            return found if found is not None else foreign.get((kind, name))

        def controlled_by(kind: str, owner_uid: str) -> tuple[Obj, ...]:
            informer = self._informers.get(kind)
            return tuple(informer.store.by_owner_uid(owner_uid)) if informer else ()

        others = {k: owned(k) for k in self._resources if k not in (POD, SERVICE)}
        nodes = self._informers.get("node")

        def node(name: str) -> NodeState | None:
            assert nodes is not None
            found = nodes.store.get(None, name)
            return node_state(found) if found is not None else None

        return Observed(
            pods=owned(POD),
            services=owned(SERVICE),
            owned=others,
            lookup=lookup,
            controlled_by=controlled_by,
            create_failure=self._create_failures.get(f"{ns}/{meta.get('name', '')}"),
            crashes=(
                self.crash_guard.crashes(self.kind, f"{ns}/{meta.get('name', '')}", uid)
                if self.crash_guard is not None
                else 0
            ),
            # Before the node cache has synced, a missing node proves nothing.
            node=node if nodes is not None and nodes.has_synced else None,
        )

    async def reconcile(self, key: str) -> float | None:
        namespace, _, name = key.partition("/")
        store = self._informers["job"].store
        raw = store.get(namespace, name)
        if raw is None:
            # Also drops what a reconcile still in flight when the job went recorded after
            # the delete handler ran (an object in its way), which nothing else would drop.
            self._forget(key)
            return None
        if not all(self.expectations.satisfied(f"{key}/{k}") for k in self._resources):
            # Informer events will requeue the job as they arrive; the timer is the safety
            # net for an event that never comes (the record expires by then).
            return self.expectations.timeout
        if key in self._foreign:
            await self._recheck_foreign(key, namespace)
            raw = store.get(namespace, name)  # the job may have gone (or changed) meanwhile
            if raw is None:
                self._forget(key)
                return None
        with structlog.contextvars.bound_contextvars(uid=raw["metadata"].get("uid")):
            if self.crash_guard is None:
                return await self._reconcile_job(key, raw)
            async with self.crash_guard.working(self.kind, raw) as standing:
                if standing == Standing.ABANDONED:
                    return None
                return await self._reconcile_job(key, raw)

    async def _reconcile_job(self, key: str, raw: Obj) -> float | None:
        now = self._clock()
        observed = self.observe(raw)
        result = plan(self, raw, observed, now=now, config=self.config)
        if _DEBUG.isEnabledFor(logging.DEBUG):  # the summary costs a little; only when shown
            self._log_plan(raw, observed, result)
        finishing = result.status is not None and is_finished(result.status) and not _finished(raw)
        if finishing:
            assert result.status is not None
            # The terminal condition is stored before any clean-up is sent: an operator that
            # dies between deleting a finished job's pods and writing its status would find,
            # once restarted, an unfinished job with no pods and run it all again.
            if not await self._write_status(raw, result.status):
                return None  # a newer job is on its way to the cache; plan from that one
            self._report(raw, result)
        # Time to the first pod: no pod yet, and none ever ran (not a restart or a resumption).
        first_pods = not observed.pods and not any(
            c.get("type") == "Running" for c in (raw.get("status") or {}).get("conditions") or ()
        )
        errors, done = await self._execute(key, raw, result.actions)
        if first_pods and done[("created", POD)] and self._metrics is not None:
            created = _parse_time(raw["metadata"].get("creationTimestamp"))
            if created is not None:
                waited = max(0.0, self._clock().timestamp() - created)
                self._metrics.job_first_pod.labels(self.framework_name).observe(waited)
        patched = self._patched_jobs.pop(key, None)
        if not finishing:
            self._report(raw, result)
        requeue_after = result.requeue_after
        if result.status is not None and not finishing:
            # Even when some writes failed: the status is read from the caches, not from those
            # writes, and holding it back hid the outcome (a job whose clean-up keeps failing
            # never showed Failed) while every retry counted its metrics again.
            job = _after_own_patch(raw, patched)
            wait = self._status_wait(key, job, result.status, starting=_starting(observed))
            if wait > 0:
                # Nothing is lost by waiting: the next pass derives the status again from the
                # caches, and the timer makes sure there is one.
                requeue_after = wait if requeue_after is None else min(requeue_after, wait)
            else:
                await self._write_status(job, result.status)
        if errors:
            raise errors[0]
        if key in self._foreign:
            if result.status is not None and is_finished(result.status):
                del self._foreign[key]
            else:
                return min(requeue_after or _FOREIGN_RECHECK_SECONDS, _FOREIGN_RECHECK_SECONDS)
        return requeue_after

    def _status_wait(self, key: str, job: Obj, status: JobStatus, *, starting: bool) -> float:
        """Seconds to hold back a status write that changes only the replica counters while
        some of the job's pods are still starting (see STATUS_COALESCE_SECONDS); 0 to write
        now."""
        last = self._status_written.get(key)
        if last is None or not starting:
            return 0.0
        old = job.get("status") or {}
        new = status.to_dict()
        if {k: v for k, v in old.items() if k != "replicaStatuses"} != {
            k: v for k, v in new.items() if k != "replicaStatuses"
        }:
            return 0.0
        return max(0.0, last + STATUS_COALESCE_SECONDS - time.monotonic())

    def _log_plan(self, raw: Obj, observed: Observed, result: Plan) -> None:
        """At debug, what the plan decided: actions by kind, timers, events, cache sizes."""
        actions = Counter(f"{type(a).__name__}:{getattr(a, 'kind', '')}" for a in result.actions)
        log.debug(
            "planned",
            actions=dict(actions),
            requeue_after=result.requeue_after,
            status_changed=result.status is not None
            and result.status.to_dict() != (raw.get("status") or {}),
            events=[e.reason for e in result.events],
            pods=len(observed.pods),
            services=len(observed.services),
            cached={name: len(informer.store) for name, informer in self._informers.items()},
        )

    def _report(self, job: Obj, result: Plan) -> None:
        """The plan's events and metrics. DELETED is counted by the deletion itself: a failed
        one is planned (and was counted) again on every retry."""
        for event in result.events:
            self._record(job, event)
        self._count(job, tuple(m for m in result.metrics if m != JobMetric.DELETED))

    async def _execute(
        self, key: str, job: Obj, actions: tuple[Action, ...]
    ) -> tuple[list[Exception], Counter[tuple[str, str]]]:
        """Carry out ``actions`` concurrently, creations in slow-start batches; returns the
        errors (already reported) and what was created and deleted, by (verb, kind)."""
        if not actions:
            return [], Counter()
        creates = [a for a in actions if isinstance(a, CreateObject)]
        others = [a for a in actions if not isinstance(a, CreateObject)]
        self._tally[key] = tally = Counter[tuple[str, str]]()
        try:
            results = await asyncio.gather(
                *(self._act(key, job, action) for action in others),
                self._create_in_batches(key, job, creates),
                return_exceptions=True,
            )
        finally:
            del self._tally[key]
        for verb in ("created", "deleted"):
            done = {kind: n for (v, kind), n in sorted(tally.items()) if v == verb}
            if done:  # one line per pass, not one per object, for a job of any size
                log.info(f"{verb} {_counted(done)}", **{verb: done})
        errors: list[Exception] = []
        for r in results:
            if isinstance(r, list):
                errors.extend(r)
            elif isinstance(r, Exception):
                errors.append(r)
            elif isinstance(r, BaseException):
                raise r
        return errors, tally

    async def _create_in_batches(
        self, key: str, job: Obj, creates: list[CreateObject]
    ) -> list[Exception]:
        """Create in batches of 1, 2, 4... (the batch Job controller's slow start): a job
        whose objects the API server refuses costs one call per pass, not one per object.
        Stops at the first failed batch, and (checked before each creation) once the job is
        gone, terminating or suspended, or the operator is shutting down."""
        errors: list[Exception] = []
        size, start = 1, 0
        while start < len(creates) and not errors:
            if start and not self._still_wanted(job, creates[start].kind):
                break
            batch = creates[start : start + size]
            start, size = start + len(batch), size * 2
            results = await asyncio.gather(
                *(self._act(key, job, action) for action in batch), return_exceptions=True
            )
            for r in results:
                if isinstance(r, Exception):
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
            elif any(r is None for r in results):
                self._create_failures.pop(key, None)
        return errors

    def _still_wanted(self, job: Obj, kind: str) -> bool:
        """Whether an object of ``kind`` may still be created for ``job`` (read from the
        cache): not once the job is gone or terminating or the operator is shutting down, and
        no pod or Service once the job is suspended (a framework's own objects, such as MPI's
        suspended launcher Job, are planned for suspended jobs on purpose)."""
        if self._queue is not None and self._queue.shutting_down:
            return False
        meta = job["metadata"]
        current = self._informers["job"].store.get(meta.get("namespace", ""), meta["name"])
        if current is None or _is_terminating(current):
            return False
        if (current.get("metadata") or {}).get("uid") != meta.get("uid"):
            return False
        if kind not in (POD, SERVICE):
            return True
        run_policy = (current.get("spec") or {}).get("runPolicy") or {}
        return not run_policy.get("suspend")

    async def _act(self, key: str, job: Obj, action: Action) -> None:
        assert self._api is not None
        ns = job["metadata"].get("namespace", "")
        async with self._write_slots:
            if isinstance(action, CreateObject):
                await self._create(key, job, action, ns)
            elif isinstance(action, DeleteObject):
                await self._delete(key, job, action)
            elif isinstance(action, PatchObject):
                resource = (
                    self.job_resource
                    if action.kind == self.model.KIND
                    else self._resources[action.kind]
                )
                patched = await self._api.merge_patch(
                    resource, action.name, action.patch, namespace=action.namespace
                )
                if action.kind == self.model.KIND and action.name == job["metadata"]["name"]:
                    self._patched_jobs[key] = patched
            elif isinstance(action, DeleteJob):
                await self._delete_job(job)

    async def _create(self, key: str, job: Obj, action: CreateObject, ns: str) -> None:
        assert self._api is not None
        if not self._still_wanted(job, action.kind):
            return  # deleted, suspended or shutting down while this pass was under way
        exp = f"{key}/{action.kind}"
        self.expectations.expect_creations(exp, 1)
        try:
            body = self.materialize(action).body
            await self._api.create(self._resources[action.kind], body, namespace=ns)
        except ApiError as exc:
            self.expectations.lower_creations(exp, 1)
            # A same-named object appeared between our cache read and the create, or it is one
            # our caches cannot show: the job's own from before a swap (adopted), or another's.
            if exc.is_already_exists and await self._adopt_or_note_foreign(key, job, action, ns):
                return
            if action.kind == SERVICE and self._metrics is not None:
                self._metrics.failed_service_creation.inc()
            self._warn(
                job,
                f"FailedCreate{action.kind}",
                f"Error creating {action.kind.lower()} {action.name}: {exc.message}",
            )
            if not exc.is_already_exists:
                raise
            return
        except Exception:
            self.expectations.lower_creations(exp, 1)
            raise
        self._tally_done(key, "created", action.kind)
        self._count_object(action.kind, created=True)
        self._record(
            job,
            Event(
                "Normal",
                f"SuccessfulCreate{action.kind}",
                f"Created {action.kind.lower()}: {action.name}",
            ),
        )

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
        last = self._create_failures.get(key)
        if last is not None and last.same_cause(failure):
            failure = dataclasses.replace(failure, count=last.count + 1)
        self._create_failures[key] = failure

    async def _adopt_or_note_foreign(
        self, key: str, job: Obj, action: CreateObject, ns: str
    ) -> bool:
        """Look at the object in the way of a creation; True when it is the job's own.

        The job's own object (its controller reference names the job) is adopted: labels the
        planned object carries and it lacks are patched on, so the informers, which watch only
        what wears the job-name label, see it from then on. That is what objects created by
        the Go operators before a swap need (mpi-operator labels its Service, ConfigMap,
        Secret and launcher Job with ``app`` only; the training-operator's PodGroups carry no
        labels). Any other object is remembered, so the next plan (queued at once) reports the
        conflict and leaves it alone; without this, a job blocked by an object our caches
        cannot show said nothing.
        """
        assert self._api is not None
        resource = self._resources[action.kind]
        try:
            other = await self._api.get(resource, action.name, namespace=ns)
        except ApiError as exc:
            if exc.is_not_found:
                return True  # gone already: the next plan creates ours
            raise
        if not is_controlled_by(other, uid=str(job["metadata"]["uid"])):
            self._foreign.setdefault(key, {})[(action.kind, action.name)] = {
                "metadata": other.get("metadata") or {}
            }
            if self._queue is not None:
                self._queue.add(key)
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
        self.expectations.expect_creations(exp, 1)
        try:
            await self._api.merge_patch(
                resource,
                action.name,
                {"metadata": {"uid": meta.get("uid"), "labels": missing}},
                namespace=ns,
            )
        except ApiError as exc:
            self.expectations.lower_creations(exp, 1)
            if exc.is_not_found or exc.is_conflict or exc.status == 422:
                return True  # gone, or replaced by another object (uid): the next plan looks
            raise
        except Exception:
            self.expectations.lower_creations(exp, 1)
            raise
        log.info(
            "adopted an object the job controls that lacked its labels",
            kind=action.kind,
            object=action.name,
            labels=sorted(missing),
        )
        self._record(
            job,
            Event(
                "Normal",
                f"Adopted{action.kind}",
                f"Adopted {action.kind.lower()}: {action.name}",
            ),
        )
        return True

    async def _recheck_foreign(self, key: str, namespace: str) -> None:
        """Forget the objects in the job's way that are gone (or replaced) by now."""
        assert self._api is not None
        entries = self._foreign[key]
        for (kind, name), seen in list(entries.items()):
            try:
                current = await self._api.get(self._resources[kind], name, namespace=namespace)
            except ApiError as exc:
                if not exc.is_not_found:
                    raise
                current = None
            if current is None or current["metadata"].get("uid") != seen["metadata"].get("uid"):
                del entries[(kind, name)]
        if not entries and self._foreign.get(key) is entries:
            del self._foreign[key]  # (the job may have been deleted, and forgotten, meanwhile)

    async def _delete(self, key: str, job: Obj, action: DeleteObject) -> None:
        assert self._api is not None
        exp = f"{key}/{action.kind}"
        # Force-deleting a pod already seen terminating (on a lost node): its deletion was
        # observed then, and its going away will not be observed again.
        expect = action.uid not in self._terminating
        if expect:
            self.expectations.expect_deletions(exp, 1)
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
                self.expectations.lower_deletions(exp, 1)
            if exc.is_not_found or exc.is_conflict:
                return  # already gone, or replaced by a successor we must not touch
            self._warn(
                job,
                f"FailedDelete{action.kind}",
                f"Error deleting {action.kind.lower()} {action.name}: {exc.message}",
            )
            raise
        except Exception:
            if expect:
                self.expectations.lower_deletions(exp, 1)
            raise
        self._tally_done(key, "deleted", action.kind)
        self._count_object(action.kind, created=False)
        self._record(
            job,
            Event(
                "Normal",
                f"SuccessfulDelete{action.kind}",
                f"Deleted {action.kind.lower()}: {action.name}",
            ),
        )

    async def _delete_job(self, job: Obj) -> None:
        assert self._api is not None
        meta = job["metadata"]
        try:
            await self._api.delete(
                self.job_resource, meta["name"], namespace=meta.get("namespace"), uid=meta["uid"]
            )
        except ApiError as exc:
            if exc.is_not_found or exc.is_conflict:
                return
            self._warn(job, "FailedDeleteJob", f"Error deleting: {exc.message}")
            raise
        self._record(job, Event("Normal", "SuccessfulDeleteJob", f"Deleted job: {meta['name']}"))
        self._count(job, (JobMetric.DELETED,))

    async def _write_status(self, job: Obj, status: JobStatus) -> bool:
        """PUT the status subresource when it differs from the cached one; True when the job
        has that status now.

        The PUT carries the cached resourceVersion, so a newer job (someone edited it, or our
        own previous write is not in the cache yet) answers 409: we then let the informer
        bring the newer object and plan again rather than overwrite what we have not seen.
        """
        assert self._api is not None
        new = status.to_dict()
        if new == (job.get("status") or {}):
            return True
        body = {**job, "status": new}
        meta = job["metadata"]
        try:
            written = await self._api.replace(
                self.job_resource, body, namespace=meta.get("namespace"), subresource="status"
            )
        except ApiError as exc:
            if exc.is_not_found:
                return False
            if exc.is_conflict:
                log.debug("status conflict; waiting for the newer job", job=meta.get("name"))
                return False
            raise
        self._cache_own_write(job, written)
        self._status_written[object_key(job)] = time.monotonic()
        _log_condition_changes(job.get("status") or {}, new)
        self._observe_waits(job, job.get("status") or {}, new)
        return True

    def _cache_own_write(self, job: Obj, written: Obj) -> None:
        """Put the job we just wrote into the cache (client-go's MutationCache idea).

        This reconcile's writes queue the job again at once (their pods' events), usually
        before the watch brings our status: a plan from the old status would finish the job a
        second time, counting jobs_failed/successful twice, and its write would only 409. The
        PUT succeeded against the cached resourceVersion, so nothing older than ``written`` is
        still on its way to the cache. Skipped when the cache has already moved on.
        """
        store = self._informers["job"].store
        meta = job["metadata"]
        cached = store.get(meta.get("namespace"), meta["name"])
        if cached is not None and (cached.get("metadata") or {}).get("resourceVersion") == meta.get(
            "resourceVersion"
        ):
            store.upsert(strip_managed_fields(written))

    # ------------------------------------------------------------------ events and metrics

    def _tally_done(self, key: str, verb: str, kind: str) -> None:
        tally = self._tally.get(key)
        if tally is not None:
            tally[(verb, kind)] += 1

    def _record(self, job: Obj, event: Event) -> None:
        """Record the Event and tell the job's story in the log: every Event at info (Warnings
        at warning) but the per-object creations and deletions, which the pass counts."""
        per_object = bool(_COUNTED_REASON.match(event.reason))
        if not per_object:
            say = log.warning if event.type == "Warning" else log.info
            say(event.message, reason=event.reason)
        if self._events is not None and (self.object_events or not per_object):
            self._events.record(
                job,
                type=event.type,
                reason=event.reason,
                message=event.message,
                component=self.event_component or self.controller_name,
            )

    def _warn(self, job: Obj, reason: str, message: str) -> None:
        self._record(job, Event("Warning", reason, message))

    def _count_object(self, kind: str, *, created: bool) -> None:
        """The training-operator's object counters."""
        m = self._metrics
        if m is None:
            return
        counter = {
            (POD, True): m.created_pods,
            (POD, False): m.deleted_pods,
            (SERVICE, True): m.succeeded_service_creation,
            (POD_GROUP, True): m.created_pod_groups,
            (POD_GROUP, False): m.deleted_pod_groups,
        }.get((kind, created))
        if counter is not None:
            counter.inc()

    def _controlled_here(self, obj: Obj) -> bool:
        refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
        return any(r.get("controller") and r.get("kind") == self.model.KIND for r in refs)

    def _observe_waits(self, job: Obj, old: Obj, new: Obj) -> None:
        """What users wait for, at the status write that shows it: Running for the first time
        (creation to Running) and the end (start to completion, by final state)."""
        m = self._metrics
        if m is None:
            return
        was = {c.get("type") for c in old.get("conditions") or () if c.get("status") == "True"}
        now = {c.get("type"): c for c in new.get("conditions") or () if c.get("status") == "True"}
        created = _parse_time((job.get("metadata") or {}).get("creationTimestamp"))
        running = now.get("Running")
        ever_ran = any(c.get("type") == "Running" for c in old.get("conditions") or ())
        if running is not None and not ever_ran and created is not None:
            at = _parse_time(running.get("lastTransitionTime"))
            if at is not None:
                m.job_queue_wait.labels(self.framework_name).observe(max(0.0, at - created))
        for state in ("Succeeded", "Failed"):
            if state in now and state not in was:
                start = _parse_time(new.get("startTime")) or created
                end = _parse_time(new.get("completionTime"))
                if start is not None and end is not None:
                    m.job_duration.labels(self.framework_name, state).observe(max(0.0, end - start))

    def _job_families(self) -> list[Metric]:
        """Jobs by state (the last True condition, as the anchors' State column shows it) and
        how long the longest-waiting one has been in it, from the cache at scrape time."""
        jobs = GaugeMetricFamily(
            "jobcontroller_jobs",
            "Jobs in the cache by current state",
            labels=["framework", "state"],
        )
        oldest = GaugeMetricFamily(
            "jobcontroller_job_state_oldest_seconds",
            "Seconds the job longest in each state has been in it",
            labels=["framework", "state"],
        )
        counts: Counter[str] = Counter()
        ages: dict[str, float] = {}
        now = self._clock().timestamp()
        for job in self._informers["job"].store.list():
            state, since = _state_of(job)
            counts[state] += 1
            if since is not None:
                ages[state] = max(ages.get(state, 0.0), now - since)
        for state, n in sorted(counts.items()):
            jobs.add_metric([self.framework_name, state], n)
            if state in ages:
                oldest.add_metric([self.framework_name, state], ages[state])
        return [jobs, oldest]

    def _count(self, job: Obj, metrics: tuple[JobMetric, ...]) -> None:
        if self._metrics is None or not metrics:
            return
        labels = {
            "job_namespace": job["metadata"].get("namespace", ""),
            "framework": self.framework_name,
        }
        counters = {
            JobMetric.CREATED: self._metrics.jobs_created,
            JobMetric.SUCCESSFUL: self._metrics.jobs_successful,
            JobMetric.FAILED: self._metrics.jobs_failed,
            JobMetric.RESTARTED: self._metrics.jobs_restarted,
            JobMetric.DELETED: self._metrics.jobs_deleted,
        }
        for m in metrics:
            counters[m].labels(**labels).inc()
        self.counted(job, metrics)

    def counted(self, job: Obj, metrics: tuple[JobMetric, ...]) -> None:
        """After the training_operator_jobs_* counters moved: a framework with metrics of its
        own (mpi-operator's) counts them here. The default does nothing."""
