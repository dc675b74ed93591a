"""The two waiting primitives of the live pages.

:class:`Reflector` keeps one collection in step with the API server, as client-go's reflector
does: it lists, then watches from the list's resourceVersion; bookmarks move that version on;
a stream the server ends (its timeout) or that breaks (the server went away) is watched again
from the last version seen, so nothing is listed twice; only a 410 Gone (the version is older
than the server keeps) lists again. A thread runs it; :meth:`Reflector.abort` ends its stream
at once (closing a socket from another thread is the only way to wake a blocked read).

:class:`Waker` is what a page's stream waits on: another thread's :meth:`Waker.notify`, or the
browser hanging up. Waiting on the client's socket as well is what lets the watches behind a
page end the moment the page closes, not at the next heartbeat.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import urllib3

from kfjob.client import ApiFailure
from kfjob.ui.cluster import Cluster, abort

__all__ = ["DENIED", "Reflector", "ReflectorStats", "Waker"]

log = logging.getLogger("kfjob.ui")
Obj = dict[str, Any]

#: Answers that retrying cannot change: the user may not read this (or it is not served).
DENIED = frozenset({401, 403, 404})
MAX_BACKOFF = 30.0


class _Gone(Exception):
    """The watch's resourceVersion is too old (410): list again."""


@dataclass
class ReflectorStats:
    lists: int = 0
    """LIST calls made (the first, and one after each 410)."""
    watches: int = 0
    """Watch streams opened."""
    gone: int = 0
    """410 answers, each followed by a LIST."""
    broken: int = 0
    """Streams or calls that failed otherwise (each retried after a backoff)."""


class Reflector:
    """List, then watch ``path`` (with the selectors) until ``stop`` is set.

    ``on_reset(items)`` gets every LIST's items (the store replaces its contents), then
    ``on_event(type, object)`` each ADDED, MODIFIED and DELETED. ``on_denied(failure)`` gets a
    401, 403 or 404, after which the reflector ends (retrying cannot change that answer).
    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        path: str,
        on_reset: Callable[[list[Obj]], None],
        on_event: Callable[[str, Obj], None],
        on_denied: Callable[[ApiFailure], None],
        stop: threading.Event,
        label_selector: str = "",
        field_selector: str = "",
        backoff: float = 1.0,
    ) -> None:
        self.cluster = cluster
        self.path = path
        self.on_reset = on_reset
        self.on_event = on_event
        self.on_denied = on_denied
        self.stop = stop
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.backoff = backoff
        self.stats = ReflectorStats()
        self._seen = 0  # events delivered
        self._lock = threading.Lock()
        self._stream: urllib3.BaseHTTPResponse | None = None

    def abort(self) -> None:
        """End the open stream now (with ``stop`` set: end the reflector)."""
        with self._lock:
            stream = self._stream
        if stream is not None:
            abort(stream)

    def run(self) -> None:
        rv: str | None = None
        delay = self.backoff
        expired_at: int | None = None  # events seen at the last 410
        while not self.stop.is_set():
            try:
                if rv is None:
                    self.stats.lists += 1
                    items, rv = self.cluster.list(
                        self.path,
                        label_selector=self.label_selector,
                        field_selector=self.field_selector,
                    )
                    self.on_reset(items)
                rv = self._watch(rv)
                delay = self.backoff
                expired_at = None
                continue
            except (_Gone, ApiFailure) as exc:
                if isinstance(exc, ApiFailure) and exc.status != 410:
                    if exc.status in DENIED:
                        self.on_denied(exc)
                        return
                    self.stats.broken += 1
                    log.warning("watch %s: %s", self.path, exc.message)
                else:
                    self.stats.gone += 1
                    rv = None
                    # List again at once, as client-go does; but a server that answers 410
                    # to the fresh list's version too (no event in between) must not be
                    # asked in a hot loop.
                    again = expired_at == self._seen
                    expired_at = self._seen
                    if not again:
                        continue
            except Exception as exc:  # a broken stream or call: resume from rv, after a pause
                self.stats.broken += 1
                if not self.stop.is_set():
                    log.warning("watch %s: %s", self.path, exc)
            self.stop.wait(delay)
            delay = min(delay * 2, MAX_BACKOFF)

    def _watch(self, rv: str) -> str:
        """Watch from ``rv`` until the stream ends; the last version seen."""
        resp = self.cluster.watch(
            self.path,
            resource_version=rv,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
        )
        self.stats.watches += 1
        with self._lock:
            self._stream = resp
        try:
            if self.stop.is_set():  # stopped while the call was made: abort() missed it
                return rv
            for event in self.cluster.events_of(resp):
                etype, obj = str(event.get("type")), event.get("object") or {}
                if etype == "ERROR":
                    if obj.get("code") == 410:
                        raise _Gone
                    raise ApiFailure(int(obj.get("code") or 0), str(obj.get("message") or ""))
                rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                self._seen += 1
                if etype != "BOOKMARK":
                    self.on_event(etype, obj)
        finally:
            with self._lock:
                self._stream = None
            with contextlib.suppress(Exception):
                resp.release_conn()
        return rv


Woken = Literal["woken", "hangup", "timeout"]


class Waker:
    """Lets the thread serving a page's stream sleep until there is news or the page is gone.

    :meth:`notify` may be called from any thread, any number of times: wake-ups coalesce, so a
    burst of changes is sent as one update. Close it when the stream ends.
    """

    def __init__(self, client: socket.socket) -> None:
        self._read, self._write = socket.socketpair()
        self._read.setblocking(False)
        self._pending = False
        self._lock = threading.Lock()
        self._client = client
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._read, selectors.EVENT_READ, "woken")
        self._selector.register(client, selectors.EVENT_READ, "hangup")

    def notify(self) -> None:
        with self._lock:
            if self._pending:
                return
            self._pending = True
        with contextlib.suppress(OSError):  # closed: nobody waits any more
            self._write.send(b"!")

    def wait(self, timeout: float) -> Woken:
        """``"woken"`` (read the news after this returns), ``"hangup"`` (the client closed
        the connection, or sent something an event stream's client never sends: either way
        the stream is over) or ``"timeout"``."""
        ready = {key.data for key, _ in self._selector.select(timeout)}
        if "hangup" in ready:
            return "hangup"
        if "woken" in ready:
            with self._lock:
                self._pending = False
                with contextlib.suppress(BlockingIOError):
                    self._read.recv(64)
            return "woken"
        return "timeout"

    def close(self) -> None:
        self._selector.close()
        self._read.close()
        self._write.close()
