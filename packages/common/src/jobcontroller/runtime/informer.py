"""List-then-watch cache of one resource, with client-go reflector semantics.

The loop: read the initial state, replace the :class:`~jobcontroller.runtime.store.Store`, then
WATCH from its resourceVersion with bookmarks and a random server timeout in [5, 10] minutes,
re-watching from the last seen resourceVersion (bookmarks included) whenever the stream ends.

* **Streamed lists.** The initial state comes on the watch itself (``sendInitialEvents``,
  KEP-3157, as client-go's ``WatchListClient`` reads it): an ADDED event per object, then a
  bookmark annotated ``k8s.io/initial-events-end``, at which the store is replaced and the
  stream goes on with the changes. One request instead of a LIST and a WATCH, and one object
  decoded at a time. The version asked for is the one a LIST would ask for (below). A server
  that answers 400 or 422 (older than 1.27, or its ``WatchList`` gate off) is read with LISTs
  from then on; a watch cache still starting (429), a version gone (410) or a server error
  gets a LIST at once; a stream that ends before its bookmark is started again after a
  backoff, its objects dropped, and listed after a second such end (``Informer._streamed``).
* **Which LIST.** Every LIST is read in pages of 500 (``limit`` and ``continue``), each page
  transformed as it is decoded, so memory is bounded by a page, not by the cluster (a
  resourceVersion ``"0"`` list would be served whole: the watch cache ignores ``limit`` for
  it). The first LIST is a consistent read (resourceVersion ``""``); later relists ask for
  nothing older than the last seen version (``resourceVersionMatch=NotOlderThan``). The
  snapshottable watch cache (beta from Kubernetes 1.34) serves both, pages included; older
  servers read paged lists from etcd. When a LIST answers 410 Gone (a continue token or a
  version compacted away) or "too large resource version" (a freshly restarted server whose
  cache is behind), the next one is a consistent read again. The list's resourceVersion,
  which the watch starts from, is the one every page carries (the first page's snapshot).
* **410 Gone on the watch** means our version was compacted away: relist, emit ``on_delete``
  for objects that vanished, ``on_add`` for new ones (a name now held by an object with another
  UID is a delete and an add), and ``on_update`` only for objects whose resourceVersion
  changed (client-go would also emit no-op updates; reconciles are level-based, so unchanged
  objects need no event).
* **Dead streams.** A read timeout a margin above the server timeout, plus an inactivity timeout
  between two lines, after which the watch is re-opened at once: 2 minutes while no bookmark has
  come (the server sends none for a resource type that has had no event since it started, so
  silence alone is not an error), 75 s once bookmarks flow (about one a minute).
* **Errors** back off with jitter from 0.8 s to 5 s (2 s while the server cannot be reached at
  all; a server's Retry-After is obeyed, up to 30 s); the backoff resets as soon as a LIST
  succeeds or a watch stream delivers a line, and a 410 Gone relists at once (a second one in a
  row backs off; a LIST's own 410 goes straight to a quorum read), so an informer is back
  within a few seconds of its API server.

Handlers run in the informer's task, after the store is updated, one event at a time; they
should only enqueue keys. An exception in a handler is logged and counted, never fatal. A handler
may be a coroutine function; it is awaited, which holds back the next event.

**What the store keeps.** A ``transform`` runs on every object before it is stored. The default,
:func:`strip_managed_fields`, drops ``metadata.managedFields`` (server-side-apply bookkeeping,
often the largest part of a small object) and keeps everything else. Pods and services are
projected on arrival to the fields job controllers read (:mod:`jobcontroller.runtime.projection`:
:func:`~jobcontroller.runtime.projection.project_pod` keeps metadata, container names, the node
and the status minus images, IPs and, once a container has a status, the pod's own stamps).
:func:`compact_node` keeps of a Node only its name and Ready condition (status and transition
time). Objects in the store are shared: treat them as read-only.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import random
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import structlog
from msgspec import Struct

from jobcontroller.runtime.clock import Clock, monotonic
from jobcontroller.runtime.kube import ApiError, KubeApi, Resource, WatchInactive
from jobcontroller.runtime.metrics import Metrics
from jobcontroller.runtime.projection import intern_strings
from jobcontroller.runtime.store import (
    Obj,
    ReplaceDiff,
    Store,
    object_key,
    older_than_stored,
    resource_version,
    same_version,
)

log = structlog.get_logger(__name__)

AddHandler = Callable[[Obj], Awaitable[None] | None]
UpdateHandler = Callable[[Obj, Obj], Awaitable[None] | None]
DeleteHandler = Callable[[Obj], Awaitable[None] | None]
Transform = Callable[[Obj], Obj]

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
"""The annotation of the bookmark that ends a streamed list's initial events."""


def _falls_back(exc: ApiError) -> bool:
    """Whether a streamed list's error is one a LIST can get past (see Informer._streamed)."""
    if exc.status in (400, 422) or exc.status >= 500:
        return True
    if exc.is_gone or exc.is_too_large_resource_version:
        return True
    return exc.status == 429 and "initializing" in exc.message


def _uid(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def strip_managed_fields(obj: Obj, previous: Obj | None = None) -> Obj:
    """Drop ``metadata.managedFields`` and hold short strings once (in place: the object was
    just decoded for us). A job's kind, images, policies, reasons and timestamps repeat across
    thousands of jobs: interned, a PyTorchJob of ``scale-50k`` takes 5.1 KB instead of 6.5.
    ``previous``, the version cached before, lends its parts equal to the new ones (see
    :func:`intern_strings`)."""
    meta = obj.get("metadata")
    if meta is not None:
        meta.pop("managedFields", None)
    intern_strings(obj, like=previous)
    return obj


def compact_node(obj: Obj) -> Obj:
    """A Node reduced to what the NodeLost check reads: its name (uid, resourceVersion and
    creation time for the store) and its Ready condition's status and transition time. About
    300 bytes instead of several KB (images, addresses, capacity, every condition)."""
    meta = obj.get("metadata") or {}
    kept: Obj = {
        "metadata": {
            key: meta[key]
            for key in ("name", "uid", "resourceVersion", "creationTimestamp")
            if key in meta
        }
    }
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            ready = {k: cond[k] for k in ("type", "status", "lastTransitionTime") if k in cond}
            kept["status"] = {"conditions": [ready]}
            break
    return kept


class InformerSettings(Struct, frozen=True):
    """Timing of an :class:`Informer`; the defaults are client-go's."""

    min_watch_timeout: int = 300
    """Lower bound of the random server-side ``timeoutSeconds`` of a watch."""
    max_watch_timeout: int = 600
    """Upper bound of it; spreading reconnects keeps many informers from relisting together."""
    inactivity_timeout: float = 120.0
    """Seconds without any line before a stream is dead, while this informer has seen no
    bookmark (the server sends none for a resource type with no event since it started)."""
    bookmark_inactivity_timeout: float = 75.0
    """The same once a bookmark has come: the server sends one about every minute from then
    on, so a stream silent for longer is half-open (a proxy holding a dead connection) and
    re-opened instead of leaving the operator blind for the full ``inactivity_timeout``."""
    backoff_initial: float = 0.8
    """First delay after a failure."""
    backoff_max: float = 5.0
    """Longest delay. client-go's 30 s left operators idle for up to that long after an API
    server came back; a LIST or WATCH that fails fast costs next to nothing to retry."""
    unreachable_backoff_max: float = 2.0
    """Longest delay while the server cannot be reached at all (connection refused or reset)."""
    retry_after_max: float = 30.0
    """Longest pause honoured from a server's Retry-After (429 throttling)."""
    backoff_reset_after: float = 120.0
    """Seconds without a failure after which the delay starts again from ``backoff_initial``."""
    list_page_size: int = 500
    """Items per page of a LIST (client-go's pager's default); 0 lists in one answer. A page
    at a time is decoded and transformed, so a relist of 150,000 pods holds 500 of them
    whole (and the projections of the rest), never the whole list's body and items."""
    short_watch: float = 1.0
    """A stream that ends normally this soon without any event counts as a failure."""
    watch_list: bool = True
    """Read the initial state as a streaming list (a watch with ``sendInitialEvents``,
    KEP-3157, client-go's ``WatchListClient``) instead of a LIST: one request instead of two,
    and one object decoded at a time. A server that refuses it (400 or 422: before Kubernetes
    1.27, or the ``WatchList`` gate off) is read with paged LISTs from then on."""


class Backoff:
    """Jittered exponential backoff that forgets failures after a healthy period.

    Delay ``n`` (0-based) is ``initial * factor**n`` capped at ``maximum``, times a jitter
    factor in ``[1 - jitter/2, 1 + jitter/2)``, and never above ``maximum``.
    """

    def __init__(
        self,
        *,
        initial: float = 0.8,
        maximum: float = 30.0,
        factor: float = 2.0,
        jitter: float = 0.5,
        reset_after: float = 120.0,
        clock: Clock = monotonic,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self._initial = initial
        self._maximum = maximum
        self._factor = factor
        self._jitter = jitter
        self._reset_after = reset_after
        self._clock = clock
        self._rng = rng
        self._step = 0
        self._last_failure: float | None = None

    @property
    def failures(self) -> int:
        """Failures counted since the last reset."""
        return self._step

    def reset(self) -> None:
        """Forget the failures: the next delay is ``initial`` again (after a success)."""
        self._step = 0
        self._last_failure = None

    def next_delay(self) -> float:
        """Record a failure now and return how long to wait before trying again."""
        now = self._clock()
        if self._last_failure is not None and now - self._last_failure >= self._reset_after:
            self._step = 0
        self._last_failure = now
        base = min(self._maximum, self._initial * self._factor ** min(self._step, 64))
        self._step += 1
        return min(self._maximum, base * (1.0 + self._jitter * (self._rng() - 0.5)))


class InformerStatistics(Struct, frozen=True):
    """A snapshot of an :class:`Informer`."""

    resource: str
    namespace: str | None
    objects: int
    resource_version: str
    synced: bool
    lists: int
    """Initial states read (a streamed list or a LIST), the first one included."""
    watches: int
    """Watch streams opened."""
    watch_restarts: int
    """Streams that ended, for any reason."""
    events: int
    """ADDED/MODIFIED/DELETED events applied."""
    bookmarks: int
    handler_errors: int


class Informer:
    """Keeps a :class:`Store` of one resource in step with the API server and calls handlers."""

    def __init__(
        self,
        api: KubeApi,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Transform | None = strip_managed_fields,
        label_indexes: Iterable[str] = (),
        settings: InformerSettings | None = None,
        metrics: Metrics | None = None,
        name: str | None = None,
        clock: Clock = monotonic,
    ) -> None:
        self._api = api
        self.resource = resource
        self.namespace = namespace
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._transform = transform
        self._settings = settings or InformerSettings()
        self._metrics = metrics
        self.name = name or resource.label
        self._clock = clock
        self.store = Store()
        for label_key in label_indexes:
            self.store.add_label_index(label_key)
        self._backoff = Backoff(
            initial=self._settings.backoff_initial,
            maximum=self._settings.backoff_max,
            reset_after=self._settings.backoff_reset_after,
            clock=clock,
        )
        self._on_add: list[AddHandler] = []
        self._on_update: list[UpdateHandler] = []
        self._on_delete: list[DeleteHandler] = []
        self._rv = ""
        self._rv_unavailable = False
        self._gone_in_a_row = 0
        self._seen_bookmark = False
        self._need_list = True
        self._stream_list = self._settings.watch_list
        self._incomplete = 0  # streamed lists in a row that ended before their state was in
        self._synced = asyncio.Event()
        self._started = False
        self._stopping = False
        self._task: asyncio.Task[Any] | None = None
        self._lists = self._watches = self._restarts = 0
        self._events = self._bookmarks = self._handler_errors = 0

    # -- wiring -------------------------------------------------------------------------------

    def add_handlers(
        self,
        *,
        on_add: AddHandler | None = None,
        on_update: UpdateHandler | None = None,
        on_delete: DeleteHandler | None = None,
    ) -> None:
        """Register handlers; only before :meth:`run`, so none misses the initial list."""
        if self._started:
            raise RuntimeError(f"informer {self.name} already started; register handlers first")
        if on_add is not None:
            self._on_add.append(on_add)
        if on_update is not None:
            self._on_update.append(on_update)
        if on_delete is not None:
            self._on_delete.append(on_delete)

    @property
    def has_synced(self) -> bool:
        """True once the first initial state is in the store and its handlers have run."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    @property
    def resource_version(self) -> str:
        """The last resourceVersion seen (list, event or bookmark); a watch resumes from it."""
        return self._rv

    def statistics(self) -> InformerStatistics:
        return InformerStatistics(
            resource=self.name,
            namespace=self.namespace,
            objects=len(self.store),
            resource_version=self._rv,
            synced=self.has_synced,
            lists=self._lists,
            watches=self._watches,
            watch_restarts=self._restarts,
            events=self._events,
            bookmarks=self._bookmarks,
            handler_errors=self._handler_errors,
        )

    # -- lifecycle ----------------------------------------------------------------------------

    async def run(self) -> None:
        """List and watch until cancelled or :meth:`stop` (then it returns normally)."""
        if self._started:
            raise RuntimeError(f"informer {self.name} runs already")
        self._started = True
        self._task = asyncio.current_task()
        try:
            while not self._stopping:
                await self._cycle()
        except asyncio.CancelledError:
            task = self._task
            if self._stopping and task is not None and task.uncancel() == 0:
                return
            raise
        finally:
            self._task = None

    def stop(self) -> None:
        """Ask :meth:`run` to return; safe to call more than once or before it starts."""
        self._stopping = True
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()

    async def _cycle(self) -> None:
        """The initial state if needed (streamed, or a LIST) and one watch stream; failures
        are logged and waited out."""
        listing = self._need_list
        try:
            if listing and self._stream_list:
                reason = await self._streamed()
            else:
                if listing:
                    await self._list()
                reason = await self._watch()
        except ApiError as exc:
            if exc.is_gone:
                self._need_list = True
                # A LIST answering 410 switches to a quorum read, which cannot: retry at once.
                quorum_next = listing and self._rv_unavailable
                self._gone_in_a_row += 0 if quorum_next else 1
                if quorum_next or self._gone_in_a_row == 1:
                    # Our version was compacted away (or the server restarted): nothing is
                    # wrong with the server, so relist at once rather than after a backoff.
                    self._restart("gone")
                    log.info("informer.restart", resource=self.name, reason="gone", relist=True)
                    return
                reason = "gone"
            else:
                reason = "error"
            await self._failed(reason, exc)
            return
        except WatchInactive as exc:
            # Not a failure by itself: the server sends bookmarks only for resource types that
            # had an event since it started, so an idle type's stream is silent. Re-watch at
            # once; if the connection is really dead, the reconnect fails and backs off.
            self._restart("inactive")
            log.info("informer.restart", resource=self.name, reason="inactive", error=str(exc))
            return
        except Exception as exc:
            await self._failed("error", exc)
            return
        self._restart(reason)
        if reason in ("short", "incomplete"):
            await asyncio.sleep(self._backoff.next_delay())

    def _restart(self, reason: str) -> None:
        self._restarts += 1
        if self._metrics is not None:
            self._metrics.watch_restarts.labels(self.name, reason).inc()

    async def _failed(self, reason: str, exc: BaseException) -> None:
        self._restart(reason)
        delay = self._backoff.next_delay()
        if isinstance(exc, ApiError) and exc.retry_after:
            # The server said when to come back (429 throttling, "storage is initializing"
            # while it starts): it knows best, up to our longest pause.
            delay = min(exc.retry_after, self._settings.retry_after_max)
        elif not isinstance(exc, ApiError):
            # Not reached at all (refused, reset): a reconnect costs next to nothing, and the
            # sooner it succeeds the sooner the operator sees again.
            delay = min(delay, self._settings.unreachable_backoff_max)
        level = log.info if reason == "gone" else log.warning
        level(
            "informer.restart",
            resource=self.name,
            reason=reason,
            error=repr(exc),
            relist=self._need_list,
            delay=round(delay, 3),
        )
        await asyncio.sleep(delay)

    # -- list ---------------------------------------------------------------------------------

    async def _streamed(self) -> str:
        """A watch that streams the initial state, else a LIST and a watch at once, as client-go
        falls back, when the server answers it with:

        * 429 "storage is (re)initializing": the resource's watch cache is starting (a CRD's
          first request on a fresh API server), which a LIST without selectors is served
          past (from etcd);
        * 410 Gone or "too large resource version": ours cannot be served (a consistent LIST);
        * 5xx, or an ERROR event before the state is all in;
        * 400 or 422: the server cannot stream a list (older than 1.27, or its ``WatchList``
          gate off); this informer lists from then on.

        Anything else (401, 403, 404, other 429s) is an ordinary failure, backed off and
        streamed again. A stream that ends twice in a row before its state is all in (a
        watcher the server closed for falling behind, a proxy that caps connections) is
        listed the next time."""
        try:
            reason = await self._watch()
        except ApiError as exc:
            if not self._need_list or not _falls_back(exc):
                raise  # after the state came, as any watch may fail; or an ordinary failure
            if exc.status in (400, 422):
                self._stream_list = False
            elif exc.is_gone or exc.is_too_large_resource_version:
                self._rv_unavailable = True
            log.info(
                "informer.watch_list_failed",
                resource=self.name,
                error=str(exc),
                streams_again=self._stream_list,
            )
        else:
            if reason != "incomplete":
                self._incomplete = 0
                return reason
            self._incomplete += 1
            log.info("informer.watch_list_incomplete", resource=self.name, times=self._incomplete)
            if self._incomplete < 2:
                return reason
            self._restart(reason)
        await self._list()  # resets the count of early ends (_initial_state)
        return await self._watch()

    async def _list(self) -> None:
        rv, match = self._start_version()
        limit = self._settings.list_page_size or None
        try:
            items, list_rv = await self._api.list(
                self.resource,
                namespace=self.namespace,
                label_selector=self._label_selector,
                field_selector=self._field_selector,
                resource_version=rv,
                resource_version_match=match,
                limit=limit,
                each=self._transform,
            )
        except ApiError as exc:
            if exc.is_gone or exc.is_too_large_resource_version:
                self._rv_unavailable = True
            raise
        await self._initial_state(items, list_rv, streamed=False)

    def _start_version(self) -> tuple[str, str | None]:
        """Where an initial state is read from: nothing older than what this informer has
        seen (the watch cache's snapshot, on servers that page from it; etcd on older ones),
        or, the first time or when ours is gone, a consistent read."""
        if self._rv and not self._rv_unavailable:
            return self._rv, "NotOlderThan"
        return "", None

    async def _initial_state(self, items: list[Obj], rv: str, *, streamed: bool) -> None:
        """Replace the store with a LIST's (or a streamed list's) objects, in handlers' eyes
        the changes since what it held."""
        diff = self.store.replace(items)
        self._rv = rv
        self._rv_unavailable = False
        self._need_list = False
        self._incomplete = 0
        self._backoff.reset()
        self._lists += 1
        if self._metrics is not None:
            self._metrics.relists.labels(self.name).inc()
        self._set_gauge()
        log.debug(
            "informer.listed",
            resource=self.name,
            resource_version=rv,
            objects=len(items),
            streamed=streamed,
            added=len(diff.added),
            updated=len(diff.updated),
            deleted=len(diff.deleted),
        )
        await self._emit_diff(diff)
        self._synced.set()

    async def _emit_diff(self, diff: ReplaceDiff) -> None:
        replaced = [(old, new) for old, new in diff.updated if _uid(old) != _uid(new)]
        for obj in diff.deleted:
            await self._emit_delete(obj)
        # A name now held by another object (deleted and created again while the watch was
        # down) is a deletion and a creation, not an update: a controller counting its own
        # deletions and creations would otherwise wait for both until its expectations expire.
        for old, _ in replaced:
            await self._emit_delete(old)
        for obj in diff.added:
            await self._emit_add(obj)
        for _, new in replaced:
            await self._emit_add(new)
        for old, new in diff.updated:
            if _uid(old) == _uid(new):
                await self._emit_update(old, new)

    # -- watch --------------------------------------------------------------------------------

    async def _watch(self) -> str:
        """One stream; returns why it ended normally ("closed" or "short")."""
        settings = self._settings
        timeout = random.randint(settings.min_watch_timeout, settings.max_watch_timeout)
        started = self._clock()
        seen = 0
        self._watches += 1
        # A streamed list: the objects as of then, until the bookmark that ends them.
        initial: dict[str, Obj] | None = {} if self._need_list and self._stream_list else None
        stream = self._api.watch(
            self.resource,
            namespace=self.namespace,
            label_selector=self._label_selector,
            field_selector=self._field_selector,
            resource_version=self._start_version()[0] if initial is not None else self._rv,
            timeout_seconds=timeout,
            inactivity_timeout=(
                settings.bookmark_inactivity_timeout
                if self._seen_bookmark
                else settings.inactivity_timeout
            ),
            send_initial_events=initial is not None,
        )
        async with contextlib.aclosing(stream):
            async for event in stream:
                if not seen and initial is None:
                    # The stream works: whatever failed before is over (a streamed list's
                    # state counts once it is all in: _initial_state).
                    self._backoff.reset()
                    self._gone_in_a_row = 0
                seen += 1
                if initial is not None:
                    if self._collect(event, initial):
                        rv = resource_version(event.get("object") or {})
                        if not rv:
                            # Nowhere to watch on from: the state would miss what follows.
                            return "incomplete"
                        items = list(initial.values())
                        initial = None  # only the items stay alive while handlers run
                        await self._initial_state(items, rv, streamed=True)
                        del items
                else:
                    await self._apply(event)
                if self._stopping:  # stop() called by a handler, which it cannot cancel
                    break
        if initial is not None and not self._stopping:
            return "incomplete"  # ended before its state was all in
        if seen == 0 and self._clock() - started < settings.short_watch:
            return "short"
        return "closed"

    def _collect(self, event: Obj, initial: dict[str, Obj]) -> bool:
        """Take one event of a streamed list into ``initial``; True at its end."""
        kind = event.get("type")
        obj: Obj = event.get("object") or {}
        if kind == "BOOKMARK":
            self._bookmarks += 1
            self._seen_bookmark = True
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            return annotations.get(INITIAL_EVENTS_END) == "true"
        if kind == "DELETED":
            initial.pop(object_key(obj), None)
        elif kind in ("ADDED", "MODIFIED"):
            if self._transform is not None:
                obj = self._transform(obj)
            initial[object_key(obj)] = obj
        else:
            log.warning("informer.unknown_event", resource=self.name, type=kind)
        return False

    async def _apply(self, event: Obj) -> None:
        kind = event.get("type")
        obj: Obj = event.get("object") or {}
        rv = resource_version(obj)
        if kind == "BOOKMARK":
            self._bookmarks += 1
            self._seen_bookmark = True
            if rv:
                self._rv = rv
            return
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            log.warning("informer.unknown_event", resource=self.name, type=kind)
            return
        self._events += 1
        stored = self.store.get_by_key(object_key(obj))
        if kind != "DELETED" and same_version(obj, stored):
            # The cache holds this very version already: our own write, which the status
            # writer cached from its PUT's answer (a reconcile of the job then planned from
            # it), or the same event twice. Nothing changed: no transform, no handlers.
            self._rv = rv or self._rv
            return
        if self._transform is strip_managed_fields:
            # An update's parts equal to the cached version's are that version's.
            obj = strip_managed_fields(obj, stored)
        elif self._transform is not None:
            obj = self._transform(obj)
        if kind == "DELETED":
            self.store.remove(obj)
            self._rv = rv or self._rv
            self._set_gauge()
            await self._emit_delete(obj)
            return
        if older_than_stored(obj, stored):
            # Our own write of it is stored already (see older_than_stored); its own event
            # follows this one on the watch.
            self._rv = rv or self._rv
            return
        old = self.store.upsert(obj)
        self._rv = rv or self._rv
        if old is None:
            self._set_gauge()
            await self._emit_add(obj)
        else:
            await self._emit_update(old, obj)

    # -- handlers -----------------------------------------------------------------------------

    async def _emit_add(self, obj: Obj) -> None:
        for handler in self._on_add:
            await self._call("add", handler, obj)

    async def _emit_update(self, old: Obj, new: Obj) -> None:
        for handler in self._on_update:
            await self._call("update", handler, old, new)

    async def _emit_delete(self, obj: Obj) -> None:
        for handler in self._on_delete:
            await self._call("delete", handler, obj)

    async def _call(self, kind: str, handler: Callable[..., Any], *args: Obj) -> None:
        try:
            result = handler(*args)
            # Most handlers are plain functions: ``isawaitable`` asks an ABC (1.3% of an
            # MPIJob burst's CPU when called for every None).
            if result is not None and inspect.isawaitable(result):
                await result
        except asyncio.CancelledError:
            raise
        except Exception:
            self._handler_errors += 1
            meta = args[-1].get("metadata") or {}
            log.exception(
                "informer.handler_failed",
                resource=self.name,
                handler=kind,
                namespace=meta.get("namespace"),
                name=meta.get("name"),
            )

    def _set_gauge(self) -> None:
        if self._metrics is not None:
            m = self._metrics
            m.child(m.informer_objects, self.name).set(len(self.store))
