"""A keyed work queue for level-triggered controllers, with client-go's semantics.

Informer events do not carry work; they name a key ("namespace/name") whose state must be
reconciled. The queue's job is to turn a storm of events into as few reconciles as correctness
allows, and never two reconciles of one key at the same time:

* **Dedup** (the ``dirty`` set): a key added again before a worker takes it is queued once.
* **One worker per key** (the ``processing`` set): a key added while a worker holds it is not
  handed to a second worker; it is parked in ``dirty`` and queued again on :meth:`WorkQueue.done`,
  so the change that arrived mid-reconcile is not lost.
* **Delays** (:meth:`WorkQueue.add_after`): one loop timer per waiting key, no polling task. A key
  already waiting only ever moves sooner. As in client-go, a plain :meth:`WorkQueue.add` does not
  cancel a pending delayed add (a ``RequeueAfter`` for a TTL must survive unrelated events), so a
  later, spurious reconcile is possible and harmless for a level-triggered controller.
* **Backoff** (:meth:`WorkQueue.add_rate_limited`): the delay comes from a
  :class:`~jobcontroller.runtime.ratelimit.RateLimiter`, client-go's default unless given.
* **Priorities**, as controller-runtime's priority queue: every add names a priority (an int,
  higher first; :data:`NORMAL` unless told), a key is handed out from the highest level that
  holds one, FIFO within a level. A key added again at a higher priority than the one it is
  queued at moves to the end of that level; a lower one changes nothing (dedup across levels).
  A delayed add keeps the higher priority of the adds it merges. The controllers give a job's
  first sight (its creation, the initial list, a resync) :data:`LOW` and every later change
  (its children's events, its own updates) :data:`NORMAL`: under a backlog of new jobs, a job
  whose pods just came up is marked Running before the backlog's pods are all created, instead
  of after (issue 27).
* **No starvation**: strict priority alone would let a stream of changes to started jobs hold
  new jobs back for ever. After :attr:`WorkQueue.passed_over_limit` gets in a row that served a
  higher level while a lower one waited, the next get serves the key that has waited longest
  whatever its level, so a lower level gets at least one get in ``limit + 1``.

The canonical worker loop::

    while True:
        try:
            key = await queue.get()
        except QueueShutDown:
            return
        try:
            await reconcile(key)
        except Exception:
            queue.add_rate_limited(key)
        else:
            queue.forget(key)
        finally:
            queue.done(key)

Shutdown differs from client-go on purpose: after :meth:`WorkQueue.shutdown` no key is handed
out any more, even if some were queued (client-go drains them). The queue is shut down when the
process stops or loses leadership; reconciling then would race the next leader, and a
level-triggered controller loses nothing, since the next leader resyncs every object anyway.
:meth:`WorkQueue.get` raises :class:`QueueShutDown` (the name asyncio uses from Python 3.13) rather
than returning a sentinel, so a worker cannot mistake the sentinel for a key.

The queue belongs to one event loop and is not thread-safe; from another thread use
``loop.call_soon_threadsafe(queue.add, key)``. It reads time from that loop, so a virtual-time
loop in tests drives delays, durations and statistics alike.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Hashable
from typing import TYPE_CHECKING, Generic, TypeVar

import structlog
from msgspec import Struct

from jobcontroller.runtime.ratelimit import RateLimiter, default_controller_rate_limiter

if TYPE_CHECKING:
    from jobcontroller.runtime.metrics import Metrics

__all__ = ["LOW", "NORMAL", "QueueShutDown", "WorkQueue", "WorkQueueStatistics"]

K = TypeVar("K", bound=Hashable)

log = structlog.get_logger(__name__)

NORMAL = 0
"""The priority of an add that does not name one."""
LOW = -100
"""A job's first sight (controller-runtime's ``LowPriority`` for the initial list)."""

#: Gets in a row that may serve a higher level while a lower one waits (see the docstring).
PASSED_OVER_LIMIT = 8


class QueueShutDown(Exception):
    """Raised by :meth:`WorkQueue.get` once the queue is shut down: the worker should exit."""


class WorkQueueStatistics(Struct, frozen=True):
    """A snapshot of a :class:`WorkQueue`, for debugging endpoints and tests."""

    name: str
    #: Keys ready for a worker.
    depth: int
    #: Keys ready for a worker, by priority (highest first).
    depth_by_priority: tuple[tuple[int, int], ...]
    #: Keys held by a worker right now.
    processing: int
    #: Keys held by a worker that were added again meanwhile (queued again on ``done``).
    requeued_on_done: int
    #: Keys waiting on a delay timer (``add_after``/``add_rate_limited``).
    waiting_delayed: int
    #: ``get`` calls blocked for a key, i.e. idle workers.
    idle_workers: int
    #: Adds that made a key dirty (coalesced duplicates are not counted; this is the metric).
    adds_total: int
    #: Adds absorbed because the key was already dirty.
    coalesced_total: int
    #: Keys handed to workers.
    gets_total: int
    #: ``add_rate_limited`` calls.
    retries_total: int
    #: How long the oldest current processor has held its key, in seconds (0 if none).
    longest_running_processor_seconds: float
    #: Sum of the time current processors have held their keys, in seconds.
    unfinished_work_seconds: float
    shutting_down: bool


class WorkQueue(Generic[K]):
    """A deduplicating, delaying, rate-limited queue of keys; see the module docstring."""

    def __init__(
        self,
        *,
        name: str = "workqueue",
        rate_limiter: RateLimiter[K] | None = None,
        metrics: Metrics | None = None,
        passed_over_limit: int = PASSED_OVER_LIMIT,
    ) -> None:
        if passed_over_limit < 1:
            raise ValueError(f"passed_over_limit must be >= 1, got {passed_over_limit}")
        self.name = name
        self.passed_over_limit = passed_over_limit
        # The default bucket reads the loop's clock, the one its delays are timed on.
        self._limiter: RateLimiter[K] = (
            rate_limiter
            if rate_limiter is not None
            else default_controller_rate_limiter(clock=self._now)
        )
        self._loop: asyncio.AbstractEventLoop | None = None

        #: priority -> (sequence, key) in add order. A key moved to another level leaves a
        #: stale entry behind, skipped when reached: ``_queued`` has the one that counts.
        self._levels: dict[int, deque[tuple[int, K]]] = {}
        #: key -> (priority, sequence) of the keys ready for a worker.
        self._queued: dict[K, tuple[int, int]] = {}
        self._seq = 0
        #: Stale entries left in ``_levels`` by moves; compacted before they outnumber the keys.
        self._stale = 0
        #: Gets in a row that served a higher level while a lower one waited.
        self._passed_over = 0
        #: key -> priority, for keys added and not yet taken (queued, or held by a worker).
        self._dirty: dict[K, int] = {}
        #: key -> loop time its worker took it.
        self._processing: dict[K, float] = {}
        #: key -> loop time it became dirty; drives the queue-duration metric.
        self._added_at: dict[K, float] = {}
        #: key -> (ready-at loop time, the timer that will add it, its priority).
        self._waiting: dict[K, tuple[float, asyncio.TimerHandle, int]] = {}
        self._getters: deque[asyncio.Future[None]] = deque()
        self._drainers: list[asyncio.Future[None]] = []
        self._shutting_down = False

        self._adds = 0
        self._coalesced = 0
        self._gets = 0
        self._retries = 0

        if metrics is not None:
            self._m_depth = metrics.workqueue_depth.labels(name, name)
            self._m_adds = metrics.workqueue_adds.labels(name, name)
            self._m_queue_duration = metrics.workqueue_queue_duration.labels(name, name)
            self._m_work_duration = metrics.workqueue_work_duration.labels(name, name)
            self._m_retries = metrics.workqueue_retries.labels(name, name)
        self._metrics = metrics

    # -- adding -----------------------------------------------------------------------------

    def add(self, key: K, *, priority: int = NORMAL) -> None:
        """Mark ``key`` as needing a reconcile, at ``priority``. Ignored after shutdown."""
        if self._shutting_down:
            return
        queued_at = self._dirty.get(key)
        if queued_at is not None:
            self._coalesced += 1
            if priority > queued_at:
                self._dirty[key] = priority
                if key in self._queued:
                    self._push(key, priority, wake=False)
            return
        self._dirty[key] = priority
        self._added_at[key] = self._now()
        self._adds += 1
        if self._metrics is not None:
            self._m_adds.inc()
        if key not in self._processing:
            self._push(key, priority)

    def add_after(self, key: K, delay: float, *, priority: int = NORMAL) -> None:
        """Add ``key`` once ``delay`` seconds have passed; ``delay <= 0`` adds it now.

        If ``key`` is already waiting, it keeps the sooner of the two times and the higher of
        the two priorities.
        """
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key, priority=priority)
            return
        loop = self._bound_loop()
        ready_at = loop.time() + delay
        pending = self._waiting.get(key)
        if pending is not None:
            priority = max(priority, pending[2])
            if pending[0] <= ready_at:
                self._waiting[key] = (pending[0], pending[1], priority)
                return
            pending[1].cancel()
        self._waiting[key] = (ready_at, loop.call_at(ready_at, self._fire, key), priority)

    def add_rate_limited(
        self, key: K, *, max_delay: float | None = None, priority: int = NORMAL
    ) -> None:
        """Add ``key`` after the rate limiter's delay; counts as one more failure of ``key``.

        ``max_delay`` caps that delay, for failures that say nothing about the key itself (the
        API server could not be reached): the key is retried soon after the server is back
        instead of after a backoff grown by every failure during the outage."""
        if self._shutting_down:
            return
        self._retries += 1
        if self._metrics is not None:
            self._m_retries.inc()
        delay = self._limiter.when(key)
        delay = delay if max_delay is None else min(delay, max_delay)
        self.add_after(key, delay, priority=priority)

    def forget(self, key: K) -> None:
        """Reset ``key``'s backoff after a success. It does not remove a queued key."""
        self._limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        """Failures recorded for ``key`` since it was last forgotten."""
        return self._limiter.num_requeues(key)

    # -- working ----------------------------------------------------------------------------

    async def get(self) -> K:
        """Wait for a key and take it; the caller must call :meth:`done` with it.

        Raises :class:`QueueShutDown` once the queue is shut down, including for callers
        already waiting.
        """
        key, _ = await self.get_with_priority()
        return key

    async def get_with_priority(self) -> tuple[K, int]:
        """:meth:`get`, and the priority the key was queued at: a worker re-queues a failed
        key at that priority, as controller-runtime's does."""
        while not self._queued:
            if self._shutting_down:
                raise QueueShutDown(self.name)
            getter = self._bound_loop().create_future()
            self._getters.append(getter)
            try:
                await getter
            except BaseException:
                getter.cancel()
                with contextlib.suppress(ValueError):  # already popped by the wake-up
                    self._getters.remove(getter)
                # We were woken for a key but are leaving: pass the wake-up on, or it is lost.
                if self._queued and not getter.cancelled():
                    self._wake_one()
                raise
        key, priority = self._pop()
        now = self._now()
        self._processing[key] = now
        del self._dirty[key]
        added_at = self._added_at.pop(key, now)
        self._gets += 1
        if self._metrics is not None:
            self._m_depth.set(len(self._queued))
            self._m_queue_duration.observe(now - added_at)
        return key, priority

    def done(self, key: K) -> None:
        """Release ``key``; if it was added while held, it is queued again now.

        Raises ``ValueError`` for a key no worker holds: that is a double ``done`` or a ``done``
        without ``get``, and would otherwise let two workers share a key.
        """
        try:
            started = self._processing.pop(key)
        except KeyError:
            raise ValueError(
                f"{self.name}: done({key!r}) for a key that is not processing"
            ) from None
        if self._metrics is not None:
            self._m_work_duration.observe(self._now() - started)
        priority = self._dirty.get(key)
        if priority is not None:
            self._push(key, priority)
        elif not self._processing:
            for drainer in self._drainers:
                if not drainer.done():
                    drainer.set_result(None)
            self._drainers.clear()

    # -- stopping ---------------------------------------------------------------------------

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def shutdown(self) -> None:
        """Stop handing out keys: queued and delayed keys are dropped, waiting ``get`` calls and
        all later ones raise :class:`QueueShutDown`, adds are ignored. Keys being processed stay
        held until their ``done``, which no longer re-queues them. Idempotent.
        """
        if self._shutting_down:
            return
        self._shutting_down = True
        dropped = len(self._queued) + len(self._waiting)
        for _, timer, _ in self._waiting.values():
            timer.cancel()
        self._waiting.clear()
        self._levels.clear()
        self._queued.clear()
        self._stale = 0
        self._dirty.clear()
        self._added_at.clear()
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
        if self._metrics is not None:
            self._m_depth.set(0)
        log.debug("workqueue shut down", queue=self.name, dropped=dropped)

    async def shutdown_with_drain(self) -> None:
        """:meth:`shutdown`, then wait until every held key is ``done``.

        Cancelling the wait leaves the queue shut down; the workers are not touched.
        """
        self.shutdown()
        while self._processing:
            drainer = self._bound_loop().create_future()
            self._drainers.append(drainer)
            await drainer

    # -- introspection ----------------------------------------------------------------------

    def __len__(self) -> int:
        """Keys ready for a worker (client-go's ``Len``): not the processing or delayed ones."""
        return len(self._queued)

    def statistics(self) -> WorkQueueStatistics:
        now = self._loop.time() if self._loop is not None else 0.0
        running = [now - started for started in self._processing.values()]
        by_priority: dict[int, int] = {}
        for priority, _ in self._queued.values():
            by_priority[priority] = by_priority.get(priority, 0) + 1
        return WorkQueueStatistics(
            name=self.name,
            depth=len(self._queued),
            depth_by_priority=tuple(sorted(by_priority.items(), reverse=True)),
            processing=len(self._processing),
            requeued_on_done=sum(1 for key in self._processing if key in self._dirty),
            waiting_delayed=len(self._waiting),
            idle_workers=sum(1 for getter in self._getters if not getter.done()),
            adds_total=self._adds,
            coalesced_total=self._coalesced,
            gets_total=self._gets,
            retries_total=self._retries,
            longest_running_processor_seconds=max(running, default=0.0),
            unfinished_work_seconds=sum(running),
            shutting_down=self._shutting_down,
        )

    # -- internals --------------------------------------------------------------------------

    def _bound_loop(self) -> asyncio.AbstractEventLoop:
        """The loop this queue lives on, bound on first use, as asyncio's own primitives do."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise RuntimeError(f"{self.name}: work queue used from a second event loop")
        return loop

    def _now(self) -> float:
        loop = self._loop
        if loop is None:
            loop = self._bound_loop()
        return loop.time()

    def _push(self, key: K, priority: int, *, wake: bool = True) -> None:
        """Queue ``key`` at the end of ``priority``'s level (moving it there if it was queued
        at another: its old entry goes stale)."""
        if key in self._queued:
            self._stale += 1
            if self._stale > 2 * len(self._queued) + 64:
                self._compact()
        self._seq += 1
        self._queued[key] = (priority, self._seq)
        level = self._levels.get(priority)
        if level is None:
            level = self._levels[priority] = deque()
        level.append((self._seq, key))
        if self._metrics is not None:
            self._m_depth.set(len(self._queued))
        if wake:
            self._wake_one()

    def _pop(self) -> tuple[K, int]:
        """The next key (there is one): the head of the highest level, or the longest-waiting
        head once lower levels were passed over ``passed_over_limit`` times in a row."""
        heads: list[tuple[int, int, K]] = []  # (priority, sequence, key), highest level first
        for priority in sorted(self._levels, reverse=True):
            level = self._levels[priority]
            while level and self._queued.get(level[0][1]) != (priority, level[0][0]):
                level.popleft()  # stale: the key moved to another level
                self._stale -= 1
            if not level:
                del self._levels[priority]
                continue
            heads.append((priority, *level[0]))
        top = heads[0]
        if len(heads) == 1:
            self._passed_over = 0
        elif self._passed_over >= self.passed_over_limit:
            self._passed_over = 0
            top = min(heads, key=lambda head: head[1])
        else:
            self._passed_over += 1
        priority, _, key = top
        self._levels[priority].popleft()
        del self._queued[key]
        return key, priority

    def _wake_one(self) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return

    def _compact(self) -> None:
        """Drop the stale entries: the levels rebuilt from ``_queued``, in add order."""
        self._levels = {}
        for key, (priority, seq) in sorted(self._queued.items(), key=lambda kv: kv[1][1]):
            self._levels.setdefault(priority, deque()).append((seq, key))
        self._stale = 0

    def _fire(self, key: K) -> None:
        pending = self._waiting.pop(key, None)
        self.add(key, priority=pending[2] if pending is not None else NORMAL)
