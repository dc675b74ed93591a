"""``Reconciler``: the reconcile loop every kind we serve shares (watch -> gate -> plan ->
execute -> status), whatever its API.

Data flows one way. Informer events on the job, its pods, its services and its other owned
objects enqueue the job's key (the watch); ``reconcile(key)`` reads the job from the cache and
waits while its expectations are pending (the gate), asks the kind's pure planner
(:meth:`Reconciler.plan_job`) what to do with what the caches hold for it (never a LIST),
carries the plan out (the executor: creates and deletes concurrently under expectations,
events and metrics) and writes the status only when it changed (the status writer). Timers in
the plan (deadline, TTL) come back as ``requeue_after`` so they fire on time with no event
needed.

The v1 kinds' :class:`~jobcontroller.controller.base.JobController` plans with
:func:`jobcontroller.core.planner.plan` and the framework hooks; a kind with another API
(Trainer v2's TrainJob) subclasses the reconciler with a planner of its own and gets the
same watch, expectations, executor, adoption, status writer, crash guard and telemetry.

Expectations: before creating or deleting, the executor raises the expectation of the job's
per-kind key; informer events lower it. While any is pending the job is not re-planned (its
cache view is known to be stale), but a failed API call lowers the expectation at once and
every record expires after five minutes, so no job ever waits on a lost one (kubeflow #1306).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Generic, TypeVar

import structlog

from jobcontroller.controller.adoption import FOREIGN_RECHECK_SECONDS, Adoption
from jobcontroller.controller.executor import Executor
from jobcontroller.controller.hooks import RuntimeHooks, Setup
from jobcontroller.controller.podgroups import (
    PRIORITY_CLASSES,
    PriorityClasses,
    pod_group_resource,
)
from jobcontroller.controller.progress import (
    CertWait,
    endpoint_of,
    shared_progress_server,
    v1_pod_check,
)
from jobcontroller.controller.progressauth import PodCheck
from jobcontroller.controller.progressserver import ProgressServer, progress_rules
from jobcontroller.controller.spare import SpareWaiters
from jobcontroller.controller.state import JobStates
from jobcontroller.controller.status import (
    BACKLOG_RECHECK_SECONDS,
    STARTING_KINDS,
    StatusWriter,
    after_own_patch,
    pods_starting,
    running_since,
)
from jobcontroller.controller.telemetry import Telemetry
from jobcontroller.controller.watch import LABEL_JOB_NAME, Watch
from jobcontroller.core.crashes import Standing
from jobcontroller.core.progress import PROGRESS, ProgressTarget
from jobcontroller.core.types import (
    POD,
    POD_GROUP,
    SERVICE,
    Action,
    DeleteJob,
    JobMetric,
    Obj,
    Observed,
    PatchObject,
    Plan,
    PlanConfig,
    ServedKind,
    StatusDoc,
)
from jobcontroller.crashguard import CrashGuard
from jobcontroller.runtime.expectations import Expectations
from jobcontroller.runtime.informer import Transform, compact_node, strip_managed_fields
from jobcontroller.runtime.kube import NODES, PODS, SERVICES, Resource
from jobcontroller.runtime.manager import Manager
from jobcontroller.runtime.progressflags import ProgressSettings
from jobcontroller.runtime.projection import project_pod, project_service
from jobcontroller.runtime.workqueue import WorkQueue

__all__ = ["KindT", "Reconciler"]

#: What the caches of owned kinds keep: pods and services only what the readers use (they are
#: written back by merge patches only, never PUT); the few other children whole, since drift
#: checks compare their declared fields (runtime/projection.py).
_PROJECTIONS: dict[str, Transform] = {POD: project_pod, SERVICE: project_service}

KindT = TypeVar("KindT", bound=ServedKind)
"""The model of the kind a reconciler serves (``TFJob``, ``TrainJob``)."""


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _retrieved(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _has_condition(job: Obj, *types: str, true: bool = True) -> bool:
    """Whether the stored status of ``job`` has one of the condition ``types`` (True, or with
    any status when ``true`` is False)."""
    return any(
        c.get("type") in types and (not true or c.get("status") == "True")
        for c in (job.get("status") or {}).get("conditions") or ()
    )


class Reconciler(RuntimeHooks, Generic[KindT]):
    """Reconciles one kind: watch -> gate -> plan -> execute -> status.

    A subclass sets ``model``, ``framework_name`` and ``controller_name`` and implements
    :meth:`plan_job` and :meth:`crd`. The parts, built here and wired in :meth:`setup`, each
    own one concern: :attr:`watch` (informers, expectations from their events), :attr:`states`
    (what is remembered per job), :attr:`executor`, :attr:`adoption` (objects in a job's way),
    :attr:`status_writer` and :attr:`telemetry`.
    """

    model: type[KindT]
    framework_name: ClassVar[str]
    """The metrics label (``tensorflow``, ``pytorch``, ``mpi``, ``trainjob``)."""
    controller_name: ClassVar[str]
    """The work queue's name and, unless ``event_component`` says otherwise, the Events'
    source."""
    finished_conditions: ClassVar[tuple[str, ...]] = ("Succeeded", "Failed")
    """The condition types (True) that finish a job of this kind: its terminal status is
    stored before any clean-up is sent."""
    running_condition: ClassVar[str | None] = "Running"
    """The condition a job that ever ran has (None: the kind has none); the first pods'
    latency is measured for jobs without it."""
    created_condition: ClassVar[str | None] = "Created"
    """The condition a job's first write brings, which may wait with its Event and count
    while the client has no request to spare (status.py; None: the first write never
    waits)."""

    event_component: ClassVar[str | None] = None
    """The Events' source (``From:`` in ``kubectl describe``): the anchor's event recorder
    name; None means ``controller_name``."""
    object_events: ClassVar[bool] = True
    """An Event per object created or deleted (``SuccessfulCreatePod``...), as kubeflow/common
    records them; mpi-operator records none (the log still counts them)."""
    status_budget_of_its_own: ClassVar[bool] = False
    """Status writes through a QPS budget of their own (as large as the main client's), not
    the one pods are created through: the mpi-operator writes MPIJob status through a
    clientset of its own, so a burst of creations never waits behind status writes."""
    owned_resources: ClassVar[Mapping[str, Resource]] = {}
    """Kinds besides Pod, Service and PodGroup the framework creates (kind -> Resource)."""
    patched_children: ClassVar[frozenset[str]] = frozenset()
    """Pod or Service when the framework patches them (MPI's job-wide Service): the RBAC
    ``<operator> manifests`` generates grants ``patch`` on those only."""
    owns_pods: ClassVar[bool] = True
    """The kind's jobs create pods and Services themselves (every v1 kind). False for a kind
    whose pods another controller makes (a TrainJob's JobSet): no pod, Service, node or
    PodGroup informer, and no RBAC for them."""
    job_verbs: ClassVar[tuple[str, ...]] = ("get", "list", "watch", "patch", "delete")
    """What the controller does to its own kind's objects besides their status (the v1 kinds
    patch their restart ledger and delete jobs past their TTL)."""
    required_crds: ClassVar[tuple[str, ...]] = ()
    """CRDs (``<plural>.<group>``) the kind needs besides its own, which an operator may look
    up before serving it (TrainJob needs JobSet's): ``<operator> manifests`` grants ``get`` on
    those names."""
    read_resources: ClassVar[Mapping[str, Resource]] = {}
    """Kinds the controller only reads, through informers of its own (Trainer v2's runtimes):
    ``<operator> manifests`` grants get, list and watch on them."""
    optional_crds: ClassVar[tuple[str, ...]] = ()
    """CRDs the kind uses only where they are installed (a TrainJob's PodGroups), looked up
    before it starts: ``<operator> manifests`` grants ``get`` on those names too."""
    extra_rules: ClassVar[tuple[Obj, ...]] = ()
    """RBAC rules for what a framework's own components do besides reconciling (the TrainJob
    progress endpoint's TokenReviews): ``<operator> manifests`` grants them as written."""
    served_ports: ClassVar[tuple[tuple[str, int], ...]] = ()
    """(name, port) of endpoints the framework serves to the cluster's pods (the TrainJob
    progress endpoint): ``<operator> manifests`` opens them on the Deployment and puts a
    Service named after the operator in front."""

    progress_extension: ClassVar[bool] = False
    """Whether ``status.trainerStatus`` is this project's extension for the kind (the v1
    kinds; ``--no-v1-job-progress`` leaves it out) rather than upstream's (TrainJob)."""

    executor: Executor
    adoption: Adoption
    status_writer: StatusWriter
    spare_waiters: SpareWaiters

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
        base: dict[str, Resource] = {POD: PODS, SERVICE: SERVICES} if self.owns_pods else {}
        self._resources: dict[str, Resource] = {**base, **self.owned_kinds()}
        pg = pod_group_resource(self.config.gang_scheduler_name)
        if pg is not None and self.config.pod_group_available and self.owns_pods:
            self._resources[POD_GROUP] = pg
        self.states = JobStates(expectations=self.expectations, kinds=self._resources)
        self.crash_guard: CrashGuard | None = None
        """The process's crash-loop guard (jobcontroller/crashguard.py); None: no guard."""
        self.states.also_forget.append(self._forget_crashes)
        self.telemetry = Telemetry(
            framework=self.framework_name,
            component=self.event_component or self.controller_name,
            object_events=self.object_events,
            clock=clock,
            counted=self.counted,
        )
        self.watch = Watch(
            kind=self.model.KIND,
            group=self.model.GROUP,
            states=self.states,
            telemetry=self.telemetry,
        )
        self.priority_classes = PriorityClasses()
        self.progress_settings: ProgressSettings | None = None
        """Where the training-progress endpoint serves (None: it is not, and the pods get no
        env to report): :meth:`enable_progress`."""
        self.progress_server: ProgressServer | None = None
        self._cert_wait: CertWait | None = None

    # -------------------------------------------------------------------------- progress

    def enable_progress(self, settings: ProgressSettings) -> None:
        """Serve the kind's training progress (call before the controller is wired): the
        endpoint gets its URL, the pods the env, token and CA to report to it."""
        self.progress_settings = settings

    @property
    def progress_target(self) -> ProgressTarget:
        m = self.model
        return ProgressTarget(group=m.GROUP, version=m.VERSION, plural=m.PLURAL, kind=m.KIND)

    def progress_pod_check(self) -> PodCheck:
        """Which pods may report a job's progress (a v1 job's by default: see
        :func:`~jobcontroller.controller.progress.v1_pod_check`)."""
        return v1_pod_check(self.watch)

    def progress_rules(self) -> tuple[Obj, ...]:
        """The RBAC rules serving progress needs (none when it is not served): the status
        patch, the token reviews and pod reads, and the certificate's Secret where the kind
        does not own Secrets already (a v1 job's pods carry the CA themselves: no ConfigMap)."""
        if self.progress_settings is None:
            return ()
        owned = self.owned_resources
        rules = progress_rules(self.model.GROUP, self.model.PLURAL)
        if "Secret" not in owned:
            rules += ({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create"]},)
        return rules

    def progress_ports(self) -> tuple[tuple[str, int], ...]:
        """The endpoint's port for the manifests' Service (none when it is not served)."""
        if self.progress_settings is None:
            return ()
        return (("trainjob-status", self.progress_settings.port),)

    def _setup_progress(self, manager: Manager, requeue: Callable[[str], None]) -> None:
        settings = self.progress_settings
        if settings is None:
            return
        server = shared_progress_server(manager, settings)
        server.add_kind(
            self.progress_target,
            resource=self.job_resource,
            current=self.watch.job_store.get,
            pod_check=self.progress_pod_check(),
        )
        self.progress_server = server
        self._cert_wait = CertWait(server, requeue)

    def owned_kinds(self) -> Mapping[str, Resource]:
        """The kinds of :attr:`owned_resources` this controller watches and creates: all of
        them, unless a kind leaves out those whose CRD is not installed (called once, when the
        controller is built)."""
        return self.owned_resources

    # -------------------------------------------------------------------------- wiring

    def setup(self, manager: Manager, queue: WorkQueue[str]) -> None:
        """Watch the job kind and, filtered by the job-name label, what jobs own."""
        watch = self.watch
        watch.watch_jobs(manager.informer(self.job_resource), queue)
        self.telemetry.attach(events=manager.events, metrics=manager.metrics, jobs=watch.job_store)
        if self.config.pod_group_available and self.owns_pods:
            self.priority_classes.watch(manager.informer(PRIORITY_CLASSES))
        for kind, resource in self._resources.items():
            transform = _PROJECTIONS.get(kind, strip_managed_fields)
            informer = manager.informer(
                resource, label_selector=LABEL_JOB_NAME, transform=transform
            )
            watch.watch_owned(kind, informer)
        for kind, resource in self.read_resources.items():
            watch.watch_read(kind, manager.informer(resource), wake=self.read_changed)
        if self.config.node_lost_grace_seconds > 0 and self.owns_pods:
            watch.watch_nodes(manager.informer(NODES, transform=compact_node))
        self.adoption = Adoption(
            api=manager.api,
            resources=self._resources,
            states=self.states,
            telemetry=self.telemetry,
            requeue=queue.add,
        )
        self.executor = Executor(
            api=manager.api,
            job_resource=self.job_resource,
            resources=self._resources,
            jobs=watch.job_store,
            states=self.states,
            telemetry=self.telemetry,
            adoption=self.adoption,
            shutting_down=lambda: queue.shutting_down,
            seen_terminating=watch.seen_terminating,
            materialize=self.materialize,
        )
        self.status_writer = StatusWriter(
            api=manager.api.with_own_budget() if self.status_budget_of_its_own else manager.api,
            job_resource=self.job_resource,
            jobs=watch.job_store,
            states=self.states,
            telemetry=self.telemetry,
            requeue=queue.add,
            running=self.running_condition,
            created=self.created_condition,
            # The creations' budget: with a status budget of its own, the one that fills
            # during a burst is still the main client's.
            creations=manager.api,
        )
        self.spare_waiters = SpareWaiters(
            backlog=manager.api.backlog,
            spare=manager.api.spare,
            requeue=queue.add,
            recheck=BACKLOG_RECHECK_SECONDS,
        )
        self.states.also_forget.append(self.spare_waiters.drop)  # a deleted job waits no more
        self._setup_progress(manager, queue.add)
        elector = manager.elector
        # Without leader election the one replica leads.
        leads = (lambda: True) if elector is None else elector.holds_lease
        self.on_setup(
            Setup(
                caches=watch,
                metrics=manager.metrics,
                is_leader=leads,
                api=manager.api,
                add_service=manager.add_service,
            )
        )

    def resync(self) -> None:
        """A new leadership term after a lost one: the reconciles of the old term were
        cancelled wherever they stood, so expectations they raised may never be met. Start
        from a clean slate and look at every job again."""
        self.expectations.clear()
        self.watch.resync()

    # -------------------------------------------------------------------------- the kind

    @abstractmethod
    def plan_job(
        self, raw: Obj, observed: Observed, *, now: dt.datetime, config: PlanConfig
    ) -> Plan:
        """One reconcile of ``raw`` decided from ``observed`` (pure: no I/O, no clock); never
        raises for bad input."""

    @abstractmethod
    def crd(self) -> dict[str, Any]:
        """The kind's CustomResourceDefinition."""

    def finished(self, status: StatusDoc) -> bool:
        """Whether ``status`` finishes the job (one of :attr:`finished_conditions` is True)."""
        return any(status.is_condition_true(t) for t in self.finished_conditions)

    # -------------------------------------------------------------------------- reconcile

    def observe(self, job: Obj) -> Observed:
        """The job's slice of the caches, with what the controller remembers about it."""
        meta = job["metadata"]
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        guard = self.crash_guard
        return self.watch.observe(
            job,
            state=self.states.get(key),
            priority_classes=self.priority_classes.values,
            crashes=guard.crashes(self.kind, key, meta.get("uid", "")) if guard else 0,
            extra={**self.observed_extra(job), PROGRESS: endpoint_of(self.progress_server)},
        )

    def read_changed(self, kind: str, obj: Obj) -> Iterable[str]:
        """The keys of the jobs to plan again because ``obj``, of a kind of
        :attr:`read_resources`, appeared, changed or went. None by default."""
        return ()

    def observed_extra(self, job: Obj) -> Mapping[str, Any]:
        """What the planner needs of ``job`` from caches the kind's controller keeps itself
        (:attr:`Observed.extra`): read from informer stores, never the API. None by default."""
        return {}

    async def reconcile(self, key: str) -> float | None:
        if self._cert_wait is not None and self._cert_wait.holds(key):
            # The endpoint's certificate is loading (one API call at start): pods planned now
            # would lack the progress env (a suspended TrainJob's JobSet would lose it). The
            # job is queued again once that call is done; had it failed, or past the
            # deadline, jobs are planned without it: progress never holds training up.
            return None
        namespace, _, name = key.partition("/")
        jobs = self.watch.job_store
        raw = jobs.get(namespace, name)
        if raw is None:
            # Also drops what a reconcile still in flight when the job went recorded after
            # the delete handler ran (an object in its way), which nothing else would drop.
            self.states.forget(key)
            return None
        if not self.states.satisfied(key):
            # Informer events will requeue the job as they arrive; the timer is the safety
            # net for an event that never comes (the record expires by then).
            return self.expectations.timeout
        state = self.states.get(key)
        if state is not None and state.foreign:
            await self.adoption.recheck_foreign(key, namespace)
            raw = jobs.get(namespace, name)  # the job may have gone (or changed) meanwhile
            if raw is None:
                self.states.forget(key)
                return None
        with structlog.contextvars.bound_contextvars(uid=raw["metadata"].get("uid")):
            return await self._reconcile_job(key, raw)

    def _held_conditions(self, raw: Obj, status: StatusDoc) -> dict[str, str]:
        """Type to reason of the Running and Created conditions a held write brings: the pass
        that writes them emits their Events (and a job that finishes first, no Running one),
        and, for Created, counts the job created."""
        old, new = raw.get("status") or {}, status.to_dict()
        held: dict[str, str] = {}
        for kind in (self.running_condition, self.created_condition):
            if kind is None or running_since(old, kind) is not None:
                continue
            began = running_since(new, kind)
            if began is not None:
                held[kind] = str(began.get("reason") or "")
        return held

    def _first_status_write(
        self,
        key: str,
        raw: Obj,
        status: StatusDoc | None,
        actions: tuple[Action, ...],
        *,
        finishing: bool,
    ) -> asyncio.Task[bool] | None:
        """The job's first status write of this process, sent now, while the pass's actions
        are carried out, rather than after them: it never waits (``StatusWriter.wait``) and is
        derived before them, so it is the same write a round trip sooner (a new TFJob's first
        pass: its probe and the Created condition together, then the rest of its objects).
        None (written after the actions, as every other write is) when there is nothing to
        overlap (no actions, or the client has no request to spare: the write would take a
        token the creations need), when the job finishes (its terminal condition is stored
        before any clean-up is sent), or when the pass patches or deletes the job itself (the
        write carries the resourceVersion read before)."""
        if status is None or finishing or not actions or not self.status_writer.first(key):
            return None
        if self.status_writer.backlogged():
            return None  # nothing to overlap: it would only queue ahead of the creations
        own = self.job_resource.kind
        for action in actions:
            if isinstance(action, DeleteJob) or (
                isinstance(action, PatchObject) and action.kind == own
            ):
                return None
        task = asyncio.create_task(self.status_writer.write(raw, status))
        # The pass awaits it, unless it is cancelled first (the pass raised): its error is
        # then retrieved here rather than reported as never retrieved.
        task.add_done_callback(_retrieved)
        return task

    def _forget_crashes(self, key: str) -> None:
        if self.crash_guard is not None:
            self.crash_guard.forget(self.kind, key)

    async def _reconcile_job(self, key: str, raw: Obj) -> float | None:
        observed = self.observe(raw)
        if self.crash_guard is None:
            result = self.plan_job(raw, observed, now=self._clock(), config=self.config)
        else:
            with self.crash_guard.planning(self.kind, raw) as standing:
                if standing == Standing.ABANDONED:
                    return None
                result = self.plan_job(raw, observed, now=self._clock(), config=self.config)
        self.telemetry.log_plan(raw, observed, result, cached=self.watch.cache_sizes)
        if result.valid_spec != observed.valid_spec:
            self.states.of(key).valid_spec = result.valid_spec
        status = result.status
        finishing = (
            status is not None
            and self.finished(status)
            and not _has_condition(raw, *self.finished_conditions)
        )
        if finishing:
            assert status is not None
            # The terminal condition is stored before any clean-up is sent: an operator that
            # dies between deleting a finished job's pods and writing its status would find,
            # once restarted, an unfinished job with no pods and run it all again.
            if not await self.status_writer.write(raw, status):
                return None  # a newer job is on its way to the cache; plan from that one
            self.telemetry.report(raw, result)
        # Time to the first pod: no pod yet, and none ever ran (not a restart or a resumption).
        running = self.running_condition
        first_pods = not observed.pods and not (
            running is not None and _has_condition(raw, running, true=False)
        )
        # Read before the actions are carried out, from what the status was derived from: the
        # caches move on meanwhile (a launcher's pod starts while a patch waits for its turn).
        # A pass without actions awaits nothing, so it reads it only if the status asks.
        started_as: bool | None = None
        if status is not None and not finishing and result.actions:
            started_as = pods_starting(observed)
        early = self._first_status_write(key, raw, status, result.actions, finishing=finishing)
        try:
            executed = await self.executor.execute(key, raw, result.actions)
        except BaseException:
            if early is not None:
                early.cancel()
            raise
        if first_pods and executed.done[("created", POD)]:
            self.telemetry.first_pods(raw)
        requeue_after = result.requeue_after
        # Seconds left to the bound of writes held for the client (None: none are): the job
        # waits with the others for it to have a request to spare, not on a timer of its own.
        for_spare = executed.wait if executed.wait > 0 else None
        if status is None or finishing:
            if not finishing:
                self.telemetry.report(raw, result)
        elif early is not None:
            self.telemetry.report(raw, result)
            await early
        else:
            # Even when some writes failed: the status is read from the caches, not from those
            # writes, and holding it back hid the outcome (a job whose clean-up keeps failing
            # never showed Failed) while every retry counted its metrics again.
            job = after_own_patch(raw, executed.patched_job)
            created = sum(executed.done[("created", kind)] for kind in STARTING_KINDS)

            def starting() -> bool:
                if created:
                    return True
                return pods_starting(observed) if started_as is None else started_as

            wait = self.status_writer.wait(key, job, status, starting=starting)
            held = self._held_conditions(raw, status) if wait > 0 else {}
            self.telemetry.report(
                raw,
                result,
                unless_reasons=frozenset(held.values()),
                uncounted=JobMetric.CREATED if self.created_condition in held else None,
            )
            state = self.states.get(key)
            if wait <= 0:
                await self.status_writer.write(job, status)
            elif state is not None and state.status_backlogged is not None:
                # Nothing is lost by waiting: the next pass derives the status again from the
                # caches, and the spare waiters (or a timer) make sure there is one.
                for_spare = wait if for_spare is None else min(for_spare, wait)
            else:
                requeue_after = wait if requeue_after is None else min(requeue_after, wait)
        if for_spare is None:
            self.spare_waiters.drop(key)
        else:
            self.spare_waiters.wait(key, for_spare)
        if executed.errors:
            raise executed.errors[0]
        state = self.states.get(key)
        if state is not None and state.foreign:
            if status is not None and self.finished(status):
                state.foreign.clear()
            else:
                return min(requeue_after or FOREIGN_RECHECK_SECONDS, FOREIGN_RECHECK_SECONDS)
        return requeue_after
