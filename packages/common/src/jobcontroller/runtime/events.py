"""Kubernetes Events about the objects a controller manages, posted without blocking it.

``EventRecorder.record`` is called from reconciles, which must neither wait on the API server
nor fail because an Event could not be written. So ``record`` only decides, in memory, what
the Event should be and leaves it for a background sender task; it never raises.

The decision (:class:`EventCorrelator`) follows client-go's ``EventCorrelator``, since that is
what ``kubectl describe`` users are used to:

1. **Similar events are combined.** When one object gets more than ``max_similar`` (10)
   distinct messages with the same type and reason within ``similar_window`` (10 min), later
   ones share a single Event whose message is prefixed ``(combined from similar events):``.
2. **Repeats are counted.** A repeat of the same (object uid, type, reason, message) within
   ``repeat_window`` (10 min) of its last occurrence PATCHes the existing Event's ``count``
   and ``lastTimestamp`` instead of creating another Event.
3. **A per-object token bucket** (burst 25, one token back every 5 min, client-go's numbers)
   drops everything beyond that rate, so a crash-looping job cannot flood etcd. Counting
   continues while dropped, so the next Event that passes carries the true count.

The sender keeps one pending write per Event name (a newer count replaces an unsent older
one), in arrival order, bounded at ``max_pending``; when full, new Events are dropped (an
older ordinary Event makes room for a job's end or restart). Drops are counted
(``jobcontroller_events_total{outcome="dropped"}``) and logged at most once per
``DROP_LOG_SECONDS`` with the number since the last line: a burst of thousands of jobs sheds
thousands of Events, and a warning line for each would bury the log.

Event names are ``<object name>.<hex nanoseconds>`` like client-go's, chosen at record time so
a PATCH can follow a CREATE that has not been sent yet.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

import structlog
from msgspec import Struct
from prometheus_client.core import CounterMetricFamily, Metric

from jobcontroller.runtime.clock import Clock, monotonic
from jobcontroller.runtime.kube import EVENTS, ApiError, Resource
from jobcontroller.runtime.metrics import Metrics

__all__ = [
    "PRECIOUS_REASON_SUFFIXES",
    "CorrelatorSettings",
    "EventCorrelator",
    "EventRecorder",
    "EventRecorderStatistics",
    "EventType",
    "ObservedEvent",
]

log = structlog.get_logger(__name__)

EventType = Literal["Normal", "Warning"]

COMBINED_PREFIX = "(combined from similar events): "
#: At most one "event buffer full" warning per this many seconds, with the drops since the last.
DROP_LOG_SECONDS = 30.0
#: events.k8s.io/v1 caps notes at 1 kB; core/v1 does not, but etcd pays for every byte.
MAX_MESSAGE = 1024


class _EventApi(Protocol):
    """The slice of :class:`~jobcontroller.runtime.kube.KubeApi` the sender uses."""

    async def create(
        self,
        resource: Resource,
        body: dict[str, Any],
        *,
        namespace: str | None = None,
        decode: Literal[False],
    ) -> Any: ...

    async def merge_patch(
        self,
        resource: Resource,
        name: str,
        patch: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]: ...


class CorrelatorSettings(Struct, frozen=True, kw_only=True):
    """Aggregation and spam-filter limits (defaults are client-go's)."""

    burst: int = 25
    """Events one object may get at once before the spam filter drops."""

    refill_seconds: float = 300.0
    """Seconds per token regained by an object's bucket (client-go: qps 1/300)."""

    max_similar: int = 10
    """Distinct messages per (object, type, reason) before they are combined into one Event."""

    similar_window: float = 600.0
    """Seconds after the last similar event at which the distinct-message count restarts."""

    repeat_window: float = 600.0
    """Seconds after its last occurrence within which a repeat updates the same Event."""

    cache_size: int = 4096
    """Entries per cache (LRU), bounding memory for operators with many objects."""


class ObservedEvent(Struct, frozen=True):
    """What the correlator decided to write for one ``record`` call."""

    namespace: str
    name: str
    message: str
    count: int
    first_timestamp: str
    #: True for a new Event (CREATE); False for a repeat (PATCH count of an existing one).
    new: bool


class _Repeat(Struct):
    name: str
    count: int
    first_timestamp: str
    last_seen: float


class _Bucket(Struct):
    tokens: float
    at: float


class _Similar(Struct):
    messages: set[str]
    last_seen: float


class _Lru(OrderedDict[Any, Any]):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def touch(self, key: Any, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


class EventCorrelator:
    """The pure decision part of the recorder: no I/O, time passed in."""

    def __init__(self, *, settings: CorrelatorSettings | None = None) -> None:
        self.settings = settings or CorrelatorSettings()
        self._repeats = _Lru(self.settings.cache_size)
        self._buckets = _Lru(self.settings.cache_size)
        self._similar = _Lru(self.settings.cache_size)
        self._last_ns = 0

    def observe(
        self,
        *,
        ref: Mapping[str, str],
        type: EventType,
        reason: str,
        message: str,
        now: float,
        wall: datetime,
    ) -> ObservedEvent | None:
        """Decide the Event for one occurrence, or None when the spam filter drops it.

        ``ref`` is the involvedObject; ``now`` is monotonic seconds; ``wall`` stamps the Event.
        """
        s = self.settings
        obj_key = ref.get("uid") or (ref.get("kind"), ref.get("namespace"), ref.get("name"))

        similar_key = (obj_key, type, reason)
        similar = self._similar.get(similar_key)
        if similar is None or now - similar.last_seen > s.similar_window:
            similar = _Similar(messages=set(), last_seen=now)
        if len(similar.messages) <= s.max_similar:
            # Past the limit every message is combined anyway; remembering more would let a
            # job that keeps failing with new messages grow this set without bound.
            similar.messages.add(message)
        similar.last_seen = now
        self._similar.touch(similar_key, similar)
        if len(similar.messages) > s.max_similar:
            repeat_key: tuple[Any, ...] = (*similar_key, None)
            message = COMBINED_PREFIX + message
        else:
            repeat_key = (*similar_key, message)

        stamp = _timestamp(wall)
        repeat = self._repeats.get(repeat_key)
        new = repeat is None or now - repeat.last_seen > s.repeat_window
        if repeat is None or new:
            repeat = _Repeat(
                name=self._event_name(ref.get("name", "unknown")),
                count=1,
                first_timestamp=stamp,
                last_seen=now,
            )
        else:
            repeat.count += 1
            repeat.last_seen = now
        self._repeats.touch(repeat_key, repeat)

        if not self._take_token(obj_key, now):
            return None
        return ObservedEvent(
            namespace=ref.get("namespace") or "default",
            name=repeat.name,
            message=message,
            count=repeat.count,
            first_timestamp=repeat.first_timestamp,
            new=new,
        )

    def _take_token(self, obj_key: Any, now: float) -> bool:
        s = self.settings
        bucket = self._buckets.get(obj_key)
        if bucket is None:
            bucket = _Bucket(tokens=float(s.burst), at=now)
        else:
            bucket.tokens = min(
                float(s.burst), bucket.tokens + (now - bucket.at) / s.refill_seconds
            )
            bucket.at = now
        self._buckets.touch(obj_key, bucket)
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    def _event_name(self, obj_name: str) -> str:
        # Strictly increasing so two events in the same nanosecond still get distinct names.
        ns = max(time.time_ns(), self._last_ns + 1)
        self._last_ns = ns
        return f"{obj_name[:236]}.{ns:x}"


#: Reasons of the Events a full buffer never drops (it drops an older ordinary one instead):
#: a job's end, its restarts, its deadline and backoff limit (``TFJobSucceeded``,
#: ``PyTorchJobRestarting``, ``MPIJobFailed``...).
PRECIOUS_REASON_SUFFIXES = (
    "Succeeded",
    "Failed",
    "Restarting",
    "DeadlineExceeded",
    "BackoffLimitExceeded",
)


class EventRecorderStatistics(Struct, frozen=True):
    pending: int
    created_total: int
    patched_total: int
    #: Dropped by the per-object spam filter.
    filtered_total: int
    #: Dropped because the pending buffer was full, the recorder closed, or ``may_send`` said
    #: no (this replica no longer holds the Lease).
    dropped_total: int
    #: Writes the API server refused or that failed in transport.
    failed_total: int


class _Pending(Struct):
    body: dict[str, Any]
    new: bool


class EventRecorder:
    """Records Events for ``component``; see the module docstring.

    With ``metrics``, each scrape reads :meth:`statistics` into
    ``jobcontroller_events_total{outcome}`` (created, patched, filtered, dropped, failed):
    nothing is counted per Event beyond the integers the recorder keeps anyway.
    """

    def __init__(
        self,
        api: _EventApi,
        *,
        component: str,
        metrics: Metrics | None = None,
        host: str | None = None,
        max_pending: int = 1000,
        may_send: Callable[[], bool] | None = None,
        settings: CorrelatorSettings | None = None,
        clock: Clock = monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._api = api
        self.component = component
        self._host = host if host is not None else socket.gethostname()
        self._metrics = metrics
        self._max_pending = max_pending
        self.may_send = may_send
        """Asked before each write; False drops the Event (a replica that no longer holds the
        Lease must not write). Settable after construction, as the manager does."""
        self.correlator = EventCorrelator(settings=settings)
        self._clock = clock
        self._wall = wall
        #: Event name -> the latest write for it, in first-arrival order.
        self._pending: OrderedDict[tuple[str, str], _Pending] = OrderedDict()
        self._wakeup = asyncio.Event()
        #: Set while the sender has nothing left to send.
        self._idle = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._created = self._patched = self._filtered = self._dropped = self._failed = 0
        #: Buffer-full drops not yet logged, and when the last such line was written.
        self._unlogged_drops = 0
        self._drop_logged_at: float | None = None
        if metrics is not None:
            metrics.on_scrape(self._families)

    # -- recording ---------------------------------------------------------------------------

    def _evict_for(self, reason: str) -> tuple[str, str] | None:
        """Room for an Event a user must see (a job's end or restart) in a full buffer: the
        oldest unsent ordinary Event goes instead. None when ``reason`` is ordinary or every
        pending Event is one of those too."""
        if not reason.endswith(PRECIOUS_REASON_SUFFIXES):
            return None
        for key, pending in self._pending.items():
            if not str(pending.body.get("reason", "")).endswith(PRECIOUS_REASON_SUFFIXES):
                del self._pending[key]
                return str(pending.body.get("reason", "")), key[1]
        return None

    def record(
        self,
        obj: Mapping[str, Any],
        *,
        type: EventType,
        reason: str,
        message: str,
        component: str | None = None,
    ) -> None:
        """Queue an Event about ``obj`` (a dict with apiVersion, kind, metadata), reported by
        ``component`` (default: the recorder's). Never raises."""
        try:
            self._record(obj, type=type, reason=reason, message=message, component=component)
        except Exception:
            log.exception("failed to record event", reason=reason, event_message=message)

    def _record(
        self,
        obj: Mapping[str, Any],
        *,
        type: EventType,
        reason: str,
        message: str,
        component: str | None,
    ) -> None:
        if self._closing:
            self._dropped += 1
            log.debug("event recorder closed; event dropped", reason=reason)
            return
        meta = obj.get("metadata") or {}
        ref = {
            "apiVersion": str(obj.get("apiVersion", "")),
            "kind": str(obj.get("kind", "")),
            "namespace": str(meta.get("namespace", "")),
            "name": str(meta.get("name", "")),
            "uid": str(meta.get("uid", "")),
            "resourceVersion": str(meta.get("resourceVersion", "")),
        }
        if not ref["kind"] or not ref["name"]:
            log.warning("event about an object without kind or name dropped", reason=reason)
            self._dropped += 1
            return
        if len(message) > MAX_MESSAGE:
            message = message[: MAX_MESSAGE - 3] + "..."
        wall = self._wall()
        observed = self.correlator.observe(
            ref=ref, type=type, reason=reason, message=message, now=self._clock(), wall=wall
        )
        if observed is None:
            self._filtered += 1
            log.debug("event dropped by spam filter", reason=reason, object=ref["name"])
            return
        key = (observed.namespace, observed.name)
        pending = self._pending.get(key)
        if pending is None and len(self._pending) >= self._max_pending:
            evicted = self._evict_for(reason)
            self._dropped += 1
            if evicted is None:
                self._log_drop(reason=reason, event=observed.name)
                return
            self._log_drop(reason=evicted[0], event=evicted[1])
        body = self._body(
            ref,
            observed,
            type=type,
            reason=reason,
            last=_timestamp(wall),
            component=component or self.component,
        )
        # A newer count replaces an unsent older write; a still-unsent CREATE stays a CREATE.
        self._pending[key] = _Pending(body=body, new=observed.new or bool(pending and pending.new))
        self._idle.clear()
        self._wakeup.set()
        self._ensure_started()

    def _log_drop(self, *, reason: str, event: str) -> None:
        """One warning for the first drop, then at most one per ``DROP_LOG_SECONDS`` carrying
        how many were dropped since the line before (this one included)."""
        self._unlogged_drops += 1
        now = self._clock()
        if self._drop_logged_at is not None and now - self._drop_logged_at < DROP_LOG_SECONDS:
            return
        log.warning(
            "event buffer full; events dropped",
            dropped=self._unlogged_drops,
            dropped_total=self._dropped,
            last_reason=reason,
            last_event=event,
            max_pending=self._max_pending,
        )
        self._unlogged_drops = 0
        self._drop_logged_at = now

    def _families(self) -> list[Metric]:
        family = CounterMetricFamily(
            "jobcontroller_events",
            "Events by what became of them: created, patched (a repeat counted), filtered (the "
            "per-object spam filter), dropped (buffer full, closing, or no longer leading), "
            "failed (refused by the API server or lost in transit)",
            labels=["outcome"],
        )
        for outcome, value in (
            ("created", self._created),
            ("patched", self._patched),
            ("filtered", self._filtered),
            ("dropped", self._dropped),
            ("failed", self._failed),
        ):
            family.add_metric([outcome], value)
        return [family]

    def _body(
        self,
        ref: Mapping[str, str],
        observed: ObservedEvent,
        *,
        type: EventType,
        reason: str,
        last: str,
        component: str,
    ) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": observed.name, "namespace": observed.namespace},
            "involvedObject": {k: v for k, v in ref.items() if v},
            "type": type,
            "reason": reason,
            "message": observed.message,
            "source": {"component": component},
            "reportingComponent": component,
            "reportingInstance": self._host[:128],
            "firstTimestamp": observed.first_timestamp,
            "lastTimestamp": last,
            "count": observed.count,
        }

    # -- sending -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the sender task on the running loop (``record`` also starts it on demand)."""
        self._ensure_started()

    def _ensure_started(self) -> None:
        if self._task is None or self._task.done():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # no loop yet: the events wait in the buffer for start()
            self._task = loop.create_task(self._send_loop(), name="event-recorder")

    async def flush(self) -> None:
        """Wait until everything recorded so far has been sent (or has failed)."""
        self._ensure_started()
        if self._pending or not self._idle.is_set():
            await self._idle.wait()

    async def close(self, *, grace: float = 5.0) -> None:
        """Send what is pending (for at most ``grace`` seconds), then stop the sender."""
        self._closing = True
        self._wakeup.set()
        task = self._task
        if task is None:
            self._dropped += len(self._pending)
            self._pending.clear()
            return
        done, _ = await asyncio.wait({task}, timeout=grace)
        if not done:
            task.cancel()
            await asyncio.wait({task})
        if self._pending:
            log.warning("event recorder closed with unsent events", unsent=len(self._pending))
            self._dropped += len(self._pending)
            self._pending.clear()

    async def _send_loop(self) -> None:
        while True:
            if not self._pending:
                self._idle.set()
                if self._closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            _, item = self._pending.popitem(last=False)
            if self.may_send is not None and not self.may_send():
                self._dropped += 1
                continue
            try:
                await self._send(item)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._failed += 1
                meta = item.body["metadata"]
                log.warning(
                    "failed to write event",
                    event_name=f"{meta['namespace']}/{meta['name']}",
                    reason=item.body["reason"],
                    error=str(exc),
                )

    async def _send(self, item: _Pending) -> None:
        body = item.body
        ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
        if not item.new:
            patch = {k: body[k] for k in ("count", "lastTimestamp", "message")}
            try:
                await self._api.merge_patch(EVENTS, name, patch, namespace=ns)
            except ApiError as exc:
                # The Event expired (apiserver TTL, 1 h by default) or its CREATE was lost.
                if not exc.is_not_found:
                    raise
            else:
                self._patched += 1
                return
        try:
            await self._api.create(EVENTS, body, namespace=ns, decode=False)
        except ApiError as exc:
            if not exc.is_already_exists:
                raise
            await self._api.merge_patch(
                EVENTS, name, {k: body[k] for k in ("count", "lastTimestamp")}, namespace=ns
            )
            self._patched += 1
        else:
            self._created += 1

    def statistics(self) -> EventRecorderStatistics:
        return EventRecorderStatistics(
            pending=len(self._pending),
            created_total=self._created,
            patched_total=self._patched,
            filtered_total=self._filtered,
            dropped_total=self._dropped,
            failed_total=self._failed,
        )


def _timestamp(wall: datetime) -> str:
    """RFC 3339 in whole seconds with a ``Z``, as ``format_time`` writes it (isoformat: four
    digits of year always, and less CPU than strftime)."""
    return wall.astimezone(UTC).isoformat(timespec="seconds")[:19] + "Z"
