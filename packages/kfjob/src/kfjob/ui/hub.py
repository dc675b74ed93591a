"""The jobs page's live data: one list+watch per kind and namespace scope, shared by every
open page, and the subscribers that get each changed row.

A watcher thread runs a :class:`~kfjob.ui.watch.Reflector` (list, then watch from the list's
resourceVersion; a broken stream resumes from the last version, a 410 Gone lists again); its
store holds only what a row needs (a job's metadata and status, a pod's job and restarts), so
memory follows what exists. Every
``rediscover`` seconds the hub asks again which kinds are served and where the user may list
them, so a CRD installed after start (TrainJob's) shows up without a restart.

A subscriber gets the current rows, then every change (its ``notify`` is called after each);
one that cannot keep up (its queue full) is dropped, and the page's EventSource reconnects and
starts again from the rows.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kfjob.client import ApiFailure
from kfjob.ui.cluster import Cluster
from kfjob.ui.model import JobRow, ServedKind, job_row, restarts
from kfjob.ui.watch import Reflector

__all__ = ["Hub", "Subscription"]

log = logging.getLogger("kfjob.ui")
Obj = dict[str, Any]

QUEUE_SIZE = 5000


@dataclass(eq=False)
class Subscription:
    """What one open jobs page receives: ``("upsert", row)`` or ``("delete", key)``."""

    queue: queue.Queue[tuple[str, Any]] = field(
        default_factory=lambda: queue.Queue(maxsize=QUEUE_SIZE)
    )
    dropped: bool = False
    notify: Callable[[], None] = lambda: None


class Hub:
    def __init__(self, cluster: Cluster, *, rediscover: float = 30.0, backoff: float = 1.0) -> None:
        self.cluster = cluster
        self.rediscover = rediscover
        self.backoff = backoff
        self.kinds: list[ServedKind] = []
        self.scopes: dict[str, list[str]] = {}
        """Per kind, the namespaces watched (``""``: all)."""
        self.notes: dict[str, str] = {}
        self._lock = threading.Lock()
        self._jobs: dict[str, tuple[ServedKind, Obj, str]] = {}  # key -> kind, job, source
        self._pods: dict[tuple[str, str], tuple[str, str, int, str]] = {}
        # (namespace, pod) -> pod label, job name, restarts, source
        self._restarts: dict[tuple[str, str, str], int] = {}  # (label, namespace, job) -> sum
        self._rows: dict[str, JobRow] = {}
        self._subs: set[Subscription] = set()
        self._watchers: dict[str, threading.Thread] = {}
        self.reflectors: dict[str, Reflector] = {}
        """Per source (``pytorchjobs@ns``, ``pods:LABEL@ns``; ``@`` alone: every namespace)."""
        self._stop = threading.Event()
        self._discovered = threading.Event()

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        threading.Thread(target=self._discover_loop, name="kfjob-ui-discovery", daemon=True).start()

    def wait_discovered(self, timeout: float) -> bool:
        return self._discovered.wait(timeout)

    def stop(self) -> None:
        self._stop.set()
        for reflector in list(self.reflectors.values()):
            reflector.abort()

    def threads(self) -> list[threading.Thread]:
        return list(self._watchers.values())

    def _discover_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._discover()
            except Exception as exc:  # shown on the page; tried again
                self.notes["discovery"] = f"cannot read the cluster: {exc}"
                log.warning("discovery failed: %s", exc)
            else:
                self.notes.pop("discovery", None)
            self._discovered.set()
            self._stop.wait(self.rediscover)

    def _discover(self) -> None:
        kinds = self.cluster.served_kinds()
        scopes = {k.kind: self.cluster.namespaces(k) for k in kinds}
        self.kinds, self.scopes = kinds, scopes
        pod_scopes: set[tuple[str, str]] = set()
        for kind in kinds:
            for ns in scopes[kind.kind]:
                self._ensure(f"{kind.plural}@{ns}", self._watch_jobs, kind, ns)
                pod_scopes.add((kind.pod_label, ns))
            if not scopes[kind.kind]:
                self.notes[kind.kind] = f"{kind.kind}: you may list them in no namespace"
            else:
                self.notes.pop(kind.kind, None)
        for label, ns in pod_scopes:
            self._ensure(f"pods:{label}@{ns}", self._watch_pods, label, ns)

    def _ensure(self, source: str, target: Callable[..., None], *args: Any) -> None:
        thread = self._watchers.get(source)
        if thread is not None and thread.is_alive():
            return
        thread = threading.Thread(
            target=target, args=args, name=f"kfjob-ui-watch {source}", daemon=True
        )
        self._watchers[source] = thread
        thread.start()

    # ------------------------------------------------------------------ subscribers

    def subscribe(
        self, *, notify: Callable[[], None] = lambda: None
    ) -> tuple[Subscription, list[JobRow]]:
        sub = Subscription(notify=notify)
        with self._lock:
            self._subs.add(sub)
            return sub, newest_first(list(self._rows.values()))

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            self._subs.discard(sub)

    def rows(self) -> list[JobRow]:
        with self._lock:
            return newest_first(list(self._rows.values()))

    def _publish(self, message: tuple[str, Any]) -> None:
        for sub in list(self._subs):
            try:
                sub.queue.put_nowait(message)
            except queue.Full:
                sub.dropped = True
                self._subs.discard(sub)
            sub.notify()

    def _refresh(self, key: str) -> None:
        """Recompute one row (lock held) and tell the subscribers if it changed."""
        entry = self._jobs.get(key)
        if entry is None:
            if self._rows.pop(key, None) is not None:
                self._publish(("delete", key))
            return
        kind, job, _ = entry
        meta = job["metadata"]
        count = self._restarts.get((kind.pod_label, meta.get("namespace"), meta.get("name")), 0)
        row = job_row(kind, job, restarts=count)
        if self._rows.get(key) != row:
            self._rows[key] = row
            self._publish(("upsert", row))

    # ------------------------------------------------------------------ watching

    def _run(
        self,
        source: str,
        *,
        path: str,
        label: str,
        reset: Callable[[list[Obj]], None],
        apply: Callable[[str, Obj], None],
    ) -> None:
        def denied(exc: ApiFailure) -> None:
            reset([])
            # Rediscovery starts the watch again if access comes back.
            self.notes[source] = f"stopped watching {source}: {exc.message}"

        reflector = Reflector(
            self.cluster,
            path=path,
            label_selector=label,
            on_reset=reset,
            on_event=apply,
            on_denied=denied,
            stop=self._stop,
            backoff=self.backoff,
        )
        self.reflectors[source] = reflector
        reflector.run()

    def _watch_jobs(self, kind: ServedKind, namespace: str) -> None:
        source = f"{kind.plural}@{namespace}"
        prefix = f"/apis/{kind.group}/{kind.version}"
        path = (
            f"{prefix}/namespaces/{namespace}/{kind.plural}"
            if namespace
            else f"{prefix}/{kind.plural}"
        )

        def reset(items: list[Obj]) -> None:
            with self._lock:
                fresh = {_key(kind, j): _slim(j) for j in items}
                stale = [k for k, v in self._jobs.items() if v[2] == source and k not in fresh]
                for key in stale:
                    del self._jobs[key]
                    self._refresh(key)
                for key, job in fresh.items():
                    self._jobs[key] = (kind, job, source)
                    self._refresh(key)

        def apply(etype: str, obj: Obj) -> None:
            key = _key(kind, obj)
            with self._lock:
                if etype == "DELETED":
                    self._jobs.pop(key, None)
                else:
                    self._jobs[key] = (kind, _slim(obj), source)
                self._refresh(key)

        self._run(source, path=path, label="", reset=reset, apply=apply)

    def _set_pod(self, ident: tuple[str, str], value: tuple[str, str, int, str] | None) -> None:
        """Store a pod's entry (None: forget it), keep the per-job sums, refresh its job's row
        (lock held)."""
        before = self._pods.pop(ident, None)
        if value is not None:
            self._pods[ident] = value
        if before == value:
            return
        for entry, sign in ((before, -1), (value, 1)):
            if entry is None:
                continue
            label, job, count, _ = entry
            sums = (label, ident[0], job)
            self._restarts[sums] = self._restarts.get(sums, 0) + sign * count
            if not self._restarts[sums]:
                del self._restarts[sums]
            for kind in self.kinds:
                if kind.pod_label == label:
                    self._refresh(f"{kind.plural}/{ident[0]}/{job}")

    def _watch_pods(self, label: str, namespace: str) -> None:
        source = f"pods:{label}@{namespace}"
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"

        def entry(pod: Obj) -> tuple[tuple[str, str], tuple[str, str, int, str]]:
            meta = pod.get("metadata") or {}
            job = str((meta.get("labels") or {}).get(label) or "")
            ident = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            return ident, (label, job, restarts(pod), source)

        def reset(items: list[Obj]) -> None:
            with self._lock:
                new = dict(entry(p) for p in items)
                for ident in [k for k, v in self._pods.items() if v[3] == source]:
                    if ident not in new:
                        self._set_pod(ident, None)
                for ident, value in new.items():
                    self._set_pod(ident, value)

        def apply(etype: str, obj: Obj) -> None:
            ident, value = entry(obj)
            with self._lock:
                self._set_pod(ident, None if etype == "DELETED" else value)

        self._run(source, path=path, label=label, reset=reset, apply=apply)


def _key(kind: ServedKind, job: Obj) -> str:
    meta = job.get("metadata") or {}
    return f"{kind.plural}/{meta.get('namespace', '')}/{meta.get('name', '')}"


def _slim(job: Obj) -> Obj:
    """What a row needs of a job: its name, namespace, creation time and status."""
    meta = job.get("metadata") or {}
    return {
        "metadata": {k: meta.get(k) for k in ("name", "namespace", "creationTimestamp")},
        "status": job.get("status") or {},
    }


def newest_first(rows: list[JobRow]) -> list[JobRow]:
    """The page's order: newest first (creationTimestamps compare as text)."""
    return sorted(rows, key=lambda r: (r.created, r.namespace, r.kind, r.name), reverse=True)
