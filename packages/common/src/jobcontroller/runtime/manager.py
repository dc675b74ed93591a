"""The process-level join of the runtime: shared informers, controllers, workers, leadership.

One :class:`Manager` per operator process. Controllers register in :meth:`Manager.add`; each
gets a :class:`~jobcontroller.runtime.workqueue.WorkQueue` named after it and, in its
``setup``, asks the manager for shared informers and registers handlers that enqueue keys.

:meth:`Manager.run` then goes through the phases a controller-runtime manager does:

1. start every informer and wait until all have synced (on every replica, leader or not: a
   standby with warm caches takes over in one lease duration instead of one LIST per resource);
2. with leader election, wait to acquire the Lease, then keep renewing it;
3. start ``workers`` worker tasks per controller;
4. on :meth:`stop` (SIGTERM), shut the queues (no new keys), let in-flight reconciles finish
   (bounded by ``drain_timeout``), flush Events (bounded, while still leading), release the
   Lease, stop informers: all well within a Deployment's default 30 s grace period.

Losing the Lease cancels the workers at once (another replica may take over within
``lease_duration - renew_deadline`` seconds); the manager then stands by with warm caches and
rejoins the election under the same identity (``rejoin_election``; without it, and during a
graceful stop, the loss ends :meth:`run` with
:class:`~jobcontroller.runtime.leader.LeadershipLost`). Fatal conditions end :meth:`run` with an
exception after cleaning up: caches not syncing within ``cache_sync_timeout``, or any runtime
task dying. The runner turns them into a
non-zero exit so Kubernetes restarts the pod.

Worker semantics per key: a reconcile returning ``None`` is done (backoff forgotten); a
positive number asks for another look after that many seconds; zero or less asks for an
immediate, rate-limited retry (controller-runtime's ``Requeue: true``); raising is an error,
counted and retried with per-key exponential backoff.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

import structlog
from prometheus_client.core import GaugeMetricFamily, Metric

from jobcontroller.runtime.events import EventRecorder
from jobcontroller.runtime.informer import Informer, Transform, strip_managed_fields
from jobcontroller.runtime.kube import ApiError, KubeApi, NotLeader, Resource
from jobcontroller.runtime.leader import LeaderElector, LeadershipLost
from jobcontroller.runtime.metrics import RECONCILE_RESULTS, Metrics
from jobcontroller.runtime.workqueue import QueueShutDown, WorkQueue

__all__ = ["Controller", "Manager"]

log = structlog.get_logger(__name__)

_T = TypeVar("_T")

#: Failures that mean the API server could not be reached (refused, reset, timed out).
_UNREACHABLE = (OSError, TimeoutError)

#: The longest a key waits after such a failure: reconciling resumes within this of the API
#: server coming back, however long it was away.
_UNREACHABLE_RETRY_SECONDS = 5.0

#: How long a graceful stop may spend sending the Events still pending.
_EVENT_FLUSH_SECONDS = 3.0


class Controller(Protocol):
    """What the manager runs. ``name`` names the work queue and labels the metrics."""

    name: str

    def setup(self, manager: Manager, queue: WorkQueue[str]) -> None:
        """Register informers (through ``manager.informer``) and handlers that enqueue keys."""
        ...

    async def reconcile(self, key: str) -> float | None:
        """Bring ``key`` to its desired state; return seconds until another look, or None."""
        ...


_InformerKey = tuple[Resource, str | None, str | None, Transform | None]


class Manager:
    """Runs the informers and controllers of one operator process; see the module docstring.

    The manager does not own ``api``: whoever created it closes it after :meth:`run`.
    """

    def __init__(
        self,
        api: KubeApi,
        *,
        component: str,
        metrics: Metrics | None = None,
        namespace: str = "",
        workers: int = 4,
        elector: LeaderElector | None = None,
        events: EventRecorder | None = None,
        cache_sync_timeout: float = 120.0,
        drain_timeout: float = 15.0,
        rejoin_election: bool = True,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.api = api
        self.component = component
        self.metrics = metrics
        self.namespace = namespace
        """Default namespace of informers; empty means all namespaces."""
        self.workers = workers
        self.elector = elector
        self.events = events or EventRecorder(api, component=component, metrics=metrics)
        if elector is not None:
            # Writes stop with leadership: a replica that lost (or released) the Lease, or woke
            # from a freeze past its renew deadline, sends no Event and no other write.
            if self.events.may_send is None:
                self.events.may_send = elector.holds_lease
            if api is not None:
                api.write_gate = elector.holds_lease
        self.cache_sync_timeout = cache_sync_timeout
        self.drain_timeout = drain_timeout
        self.rejoin_election = rejoin_election
        """After losing the Lease, stand by and compete again instead of ending :meth:`run`."""

        self._informers: dict[_InformerKey, Informer] = {}
        self._controllers: dict[str, tuple[Controller, WorkQueue[str]]] = {}
        if metrics is not None:
            metrics.on_scrape(self._queue_families)
        self._informer_tasks: list[asyncio.Task[None]] = []
        self._services: list[tuple[str, Callable[[], Coroutine[Any, Any, None]]]] = []
        self._shared: dict[str, object] = {}
        self._service_tasks: list[asyncio.Task[None]] = []
        self._worker_tasks: list[asyncio.Task[None]] = []
        self._renew_task: asyncio.Task[None] | None = None
        self._running = False
        self._workers_started = False
        self._shutting_down = False
        self._stop_requested = False
        self._force = False
        self._failed = False
        self._stop: asyncio.Future[None] | None = None
        self._fatal: asyncio.Future[BaseException] | None = None

    # -- wiring ------------------------------------------------------------------------------

    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        transform: Transform | None = strip_managed_fields,
    ) -> Informer:
        """The shared informer for these parameters, created on first request.

        ``namespace`` None means the manager's namespace; ``""`` means all namespaces. It is
        ignored for cluster-scoped resources. Call before :meth:`run`, since handlers must be
        registered before the informer lists.
        """
        ns = self.namespace if namespace is None else namespace
        effective_ns = (ns or None) if resource.namespaced else None
        key: _InformerKey = (resource, effective_ns, label_selector, transform)
        existing = self._informers.get(key)
        if existing is not None:
            return existing
        if self._running:
            raise RuntimeError("informers must be created before Manager.run")
        name = resource.label
        if any(inf.name == name for inf in self._informers.values()):
            name = f"{name}[{effective_ns or '*'};{label_selector or ''};{len(self._informers)}]"
        informer = Informer(
            self.api,
            resource,
            namespace=effective_ns,
            label_selector=label_selector,
            transform=transform,
            metrics=self.metrics,
            name=name,
        )
        self._informers[key] = informer
        return informer

    def add(self, controller: Controller) -> WorkQueue[str]:
        """Register ``controller``: create its queue and call its ``setup``."""
        if self._running:
            raise RuntimeError("controllers must be added before Manager.run")
        if controller.name in self._controllers:
            raise ValueError(f"a controller named {controller.name!r} is registered already")
        queue: WorkQueue[str] = WorkQueue(name=controller.name, metrics=self.metrics)
        controller.setup(self, queue)
        self._controllers[controller.name] = (controller, queue)
        if self.metrics is not None:
            m, name = self.metrics, controller.name
            for result in RECONCILE_RESULTS:  # as controller-runtime: every series from 0
                m.reconcile_total.labels(name, result)
            for family in (m.reconcile_errors, m.terminal_reconcile_errors, m.reconcile_panics):
                family.labels(name)
            m.max_concurrent_reconciles.labels(name).set(self.workers)
        return queue

    def add_service(self, name: str, run: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``run()`` beside the informers on every replica, leader or not, from the start
        of :meth:`run` until shutdown (it is cancelled after the workers drained). It should
        run until cancelled: its end, or its error, is fatal, like an informer's. A framework's
        own endpoint (the TrainJob status server) is one."""
        if self._running:
            raise RuntimeError("services must be added before Manager.run")
        self._services.append((name, run))

    def shared(self, key: str, make: Callable[[], _T]) -> _T:
        """The one object of the process named ``key``, made by the first controller asking
        for it (the progress endpoint: one port, one certificate, every kind's reports)."""
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]  # type: ignore[return-value]  # make() of the first caller

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    @property
    def queues(self) -> dict[str, WorkQueue[str]]:
        return {name: queue for name, (_, queue) in self._controllers.items()}

    # -- state for probes --------------------------------------------------------------------

    @property
    def synced(self) -> bool:
        """True once running and every informer has listed."""
        return self._running and all(inf.has_synced for inf in self._informers.values())

    @property
    def is_leader(self) -> bool:
        """Whether this replica reconciles: the Lease holder, or (without election) running."""
        if self.elector is not None:
            return self.elector.is_leader
        return self._workers_started and not self._shutting_down

    @property
    def healthy(self) -> bool:
        """False once a fatal error happened (the process is about to exit)."""
        return not self._failed

    def readiness(self) -> dict[str, Any]:
        """The body of /readyz: synced caches make a replica ready, leader or not."""
        return {
            "synced": self.synced,
            "leader": self.is_leader,
            "informers": {inf.name: inf.has_synced for inf in self._informers.values()},
        }

    # -- running -----------------------------------------------------------------------------

    def stop(self, *, force: bool = False) -> None:
        """Ask :meth:`run` to shut down gracefully; ``force`` also cancels in-flight reconciles.

        Safe to call from a signal handler, more than once, or before :meth:`run`.
        """
        self._stop_requested = True
        if self._stop is not None and not self._stop.done():
            self._stop.set_result(None)
        if force:
            self._force = True
            if self._shutting_down:
                for task in self._worker_tasks:
                    task.cancel()

    async def run(self) -> None:
        """Run until :meth:`stop` (returns) or a fatal error (raises); cleans up either way."""
        if self._running:
            raise RuntimeError("Manager.run called twice")
        loop = asyncio.get_running_loop()
        self._running = True
        self._stop = loop.create_future()
        self._fatal = loop.create_future()
        if self._stop_requested:
            self._stop.set_result(None)
        failure: BaseException | None = None
        try:
            self.events.start()
            for name, run in self._services:
                self._service_tasks.append(self._spawn(run(), f"service:{name}"))
            for informer in self._informers.values():
                self._informer_tasks.append(
                    self._spawn(informer.run(), f"informer:{informer.name}")
                )
            if not await self._until(self._wait_synced()):
                return
            if self.elector is not None:
                if not await self._until(self.elector.acquire()):
                    return
                self._renew_task = self._spawn(self.elector.hold(), "leader-renew")
            self._start_workers()
            while True:
                stop_or_fatal: set[asyncio.Future[Any]] = {self._stop, self._fatal}
                await asyncio.wait(stop_or_fatal, return_when=asyncio.FIRST_COMPLETED)
                if not self._only_the_lease_lost():
                    break
                await self._stand_down()
                assert self.elector is not None
                if not await self._until(self.elector.acquire()):
                    return
                self._renew_task = self._spawn(self.elector.hold(), "leader-renew")
                self._resync()
                self._start_workers()
            self._raise_if_fatal()
        except BaseException as exc:
            failure = exc
            self._failed = not isinstance(exc, asyncio.CancelledError)
            raise
        finally:
            await self._shutdown(lost=isinstance(failure, LeadershipLost))
            if failure is None:
                # A runtime task that died during a graceful stop (the lease lost mid-drain)
                # still makes the exit non-zero.
                self._failed = self._fatal is not None and self._fatal.done()
                self._raise_if_fatal()

    def _only_the_lease_lost(self) -> bool:
        """The Lease was lost (not renewed in time, or taken) while running, and nothing else
        went wrong: the replica can stand by and rejoin the election."""
        if not self.rejoin_election or self._stop_requested or self._fatal is None:
            return False
        return self._fatal.done() and isinstance(self._fatal.result(), LeadershipLost)

    async def _stand_down(self) -> None:
        """Stop reconciling at once, as on any loss of the Lease, but keep the caches, the
        queues and the identity, and go back to the election as a warm standby. When the API
        server was only away, the Lease still names us and is taken back at once; when another
        replica took it, we wait as any standby does. (controller-runtime exits instead, and
        the restarted process, with a new identity, waits out the whole lease duration.)"""
        for task in self._worker_tasks:
            task.cancel()
        if self._worker_tasks:
            await asyncio.wait(self._worker_tasks)
        self._worker_tasks.clear()
        self._workers_started = False
        self._fatal = asyncio.get_running_loop().create_future()
        log.warning("workers stopped; rejoining the election")

    def _resync(self) -> None:
        """A new term: controllers forget what the cancelled reconciles left half-done and
        look at every object again."""
        for controller, _ in self._controllers.values():
            resync = getattr(controller, "resync", None)
            if resync is not None:
                resync()

    async def _wait_synced(self) -> None:
        try:
            async with asyncio.timeout(self.cache_sync_timeout):
                await asyncio.gather(*(inf.wait_synced() for inf in self._informers.values()))
        except TimeoutError:
            waiting = [inf.name for inf in self._informers.values() if not inf.has_synced]
            raise TimeoutError(
                f"caches did not sync within {self.cache_sync_timeout:g}s: {', '.join(waiting)}"
            ) from None
        log.info("caches synced", informers=len(self._informers))

    async def _until(self, aw: Awaitable[Any]) -> bool:
        """Await ``aw`` unless a stop or a fatal error comes first.

        True: ``aw`` finished. False: stop was requested. Raises the fatal error or ``aw``'s.
        """
        assert self._stop is not None and self._fatal is not None
        task = asyncio.ensure_future(aw)
        try:
            await asyncio.wait({task, self._stop, self._fatal}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not task.done():
                task.cancel()
                await asyncio.wait({task})
        self._raise_if_fatal()
        if task.done() and not task.cancelled():
            task.result()
            return True
        return False

    def _raise_if_fatal(self) -> None:
        if self._fatal is not None and self._fatal.done():
            raise self._fatal.result()

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """A runtime task whose death (other than at shutdown) is fatal for the process."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or self._fatal is None or self._fatal.done():
            return
        exc = task.exception()
        if exc is None:
            if self._shutting_down:
                return
            exc = RuntimeError(f"{task.get_name()} stopped unexpectedly")
        if not isinstance(exc, LeadershipLost):  # the elector logged that one already
            log.error("runtime task failed", task=task.get_name(), error=repr(exc), exc_info=exc)
        self._fatal.set_result(exc)

    def _queue_families(self) -> list[Metric]:
        """controller-runtime's active workers and client-go's unfinished-work gauges, read
        from the queues at scrape time (a worker holds one key while it reconciles)."""
        active = GaugeMetricFamily(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            labels=["controller"],
        )
        unfinished = GaugeMetricFamily(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by work_duration. Large values indicate stuck threads.",
            labels=["name", "controller"],
        )
        longest = GaugeMetricFamily(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            labels=["name", "controller"],
        )
        for name, (_, queue) in self._controllers.items():
            stats = queue.statistics()
            active.add_metric([name], stats.processing)
            unfinished.add_metric([name, name], stats.unfinished_work_seconds)
            longest.add_metric([name, name], stats.longest_running_processor_seconds)
        return [active, unfinished, longest]

    # -- workers -----------------------------------------------------------------------------

    def _start_workers(self) -> None:
        for controller, queue in self._controllers.values():
            for i in range(self.workers):
                name = f"worker:{controller.name}:{i}"
                self._worker_tasks.append(self._spawn(self._worker(controller, queue), name))
        self._workers_started = True
        log.info("workers started", controllers=list(self._controllers), workers=self.workers)

    async def _worker(self, controller: Controller, queue: WorkQueue[str]) -> None:
        while True:
            try:
                key, priority = await queue.get_with_priority()
            except QueueShutDown:
                return
            try:
                await self._process(controller, queue, key, priority)
            finally:
                queue.done(key)

    async def _process(
        self, controller: Controller, queue: WorkQueue[str], key: str, priority: int
    ) -> None:
        """Reconcile ``key``; a retry or requeue keeps the ``priority`` it was queued at."""
        namespace, _, name = key.rpartition("/")
        loop = asyncio.get_running_loop()
        with structlog.contextvars.bound_contextvars(
            controller=controller.name,
            kind=getattr(controller, "kind", None),
            key=key,
            namespace=namespace or None,
            name=name,
            # 64 random bits tell reconciles apart in the log; uuid4 would read the kernel's
            # entropy on every reconcile (a syscall each, a measurable share of a burst).
            reconcile_id=f"{random.getrandbits(64):016x}",
        ):
            started = loop.time()
            panicked = False
            try:
                after = await controller.reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                result = "error"
                panicked = not isinstance(exc, (ApiError, NotLeader, *_UNREACHABLE))
                self._log_failure(exc, retries=queue.num_requeues(key))
                unreachable = isinstance(exc, _UNREACHABLE)
                queue.add_rate_limited(
                    key,
                    max_delay=_UNREACHABLE_RETRY_SECONDS if unreachable else None,
                    priority=priority,
                )
            else:
                if after is None:
                    result = "success"
                    queue.forget(key)
                elif after <= 0:
                    result = "requeue"
                    queue.add_rate_limited(key, priority=priority)
                else:
                    result = "requeue_after"
                    queue.forget(key)
                    queue.add_after(key, after, priority=priority)
            if (m := self.metrics) is not None:
                ctl = controller.name
                m.child(m.reconcile_time, ctl).observe(loop.time() - started)
                m.child(m.reconcile_total, ctl, result).inc()
                if result == "error":
                    m.child(m.reconcile_errors, ctl).inc()
                    if panicked:
                        m.child(m.reconcile_panics, ctl).inc()

    @staticmethod
    def _log_failure(exc: Exception, *, retries: int) -> None:
        """A traceback only for the unexpected: API answers and an unreachable server are
        facts of life for a controller, reported with the error and retried."""
        if isinstance(exc, ApiError) and exc.is_conflict:
            # Expected under concurrency: the cache was behind; the retry reads a newer one.
            log.info("reconcile conflict; retrying", error=str(exc), retries=retries)
        elif isinstance(exc, ApiError) and (exc.status >= 500 or exc.status == 429):
            log.warning("reconcile failed", error=str(exc), status=exc.status, retries=retries)
        elif isinstance(exc, ApiError):
            log.error("reconcile failed", error=str(exc), status=exc.status, retries=retries)
        elif isinstance(exc, NotLeader):
            log.warning("reconcile stopped: the Lease is not held", error=str(exc))
        elif isinstance(exc, _UNREACHABLE):
            log.warning(
                "reconcile failed: API server unreachable",
                error=str(exc) or type(exc).__name__,
                retries=retries,
            )
        else:
            log.error("reconcile failed", error=repr(exc), retries=retries, exc_info=exc)

    # -- shutdown ----------------------------------------------------------------------------

    async def _shutdown(self, *, lost: bool) -> None:
        self._shutting_down = True
        for _, queue in self._controllers.values():
            queue.shutdown()
        renew = self._renew_task
        # A renew task that ended for any reason no longer guarantees the lease: treat it as lost.
        lost = lost or (renew is not None and renew.done())
        if self._worker_tasks:
            if lost or self._force:
                for task in self._worker_tasks:
                    task.cancel()
            else:
                await self._drain(renew)
            await asyncio.wait(self._worker_tasks)
        lost = lost or (renew is not None and renew.done())
        # Pending Events go out while the Lease is still held and renewed, or not at all.
        await self.events.close(grace=0.0 if lost else _EVENT_FLUSH_SECONDS)
        lost = lost or (renew is not None and renew.done())
        if renew is not None:
            renew.cancel()
            await asyncio.wait({renew})
        if self.elector is not None and not lost:
            await self.elector.release()
        for task in self._service_tasks:
            task.cancel()
        if self._service_tasks:
            await asyncio.wait(self._service_tasks)
        for informer in self._informers.values():
            informer.stop()
        if self._informer_tasks:
            await asyncio.wait(self._informer_tasks)
        log.info("manager stopped", leadership_lost=lost)

    async def _drain(self, renew: asyncio.Task[None] | None) -> None:
        """Let in-flight reconciles finish, for at most ``drain_timeout``, and only while the
        lease is renewed: if renewing stops mid-drain, another replica may take over within
        ``lease_duration - renew_deadline`` seconds, so the reconciles are cancelled at once."""
        drained = asyncio.ensure_future(asyncio.wait(self._worker_tasks))
        watched: set[asyncio.Future[Any]] = {drained}
        if renew is not None:
            watched.add(renew)
        try:
            await asyncio.wait(
                watched, timeout=self.drain_timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            drained.cancel()  # cancels only the wait, not the workers
        pending = [task for task in self._worker_tasks if not task.done()]
        if not pending:
            return
        if renew is not None and renew.done():
            log.error("lease lost while draining; cancelling reconciles", unfinished=len(pending))
        else:
            log.warning("drain timeout; cancelling reconciles", unfinished=len(pending))
        for task in pending:
            task.cancel()
