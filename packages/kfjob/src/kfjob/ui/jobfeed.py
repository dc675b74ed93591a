"""What one open job page follows: the job, its pods and their events, from watches.

Four reflectors (``watch``), each listing then watching only what the page shows:

- the job: its kind's collection in its namespace, ``fieldSelector=metadata.name=NAME``;
- its pods: ``labelSelector`` of the label its operator puts on them with the job's name
  (``training.kubeflow.org/job-name``; a TrainJob's JobSet pods carry
  ``jobset.sigs.k8s.io/jobset-name``);
- the job's events: ``fieldSelector=involvedObject.kind=KIND,involvedObject.name=NAME``;
- its pods' events: ``fieldSelector=involvedObject.kind=Pod`` in the namespace. Events select
  by one object's name or uid only, and a watch per pod would tie connections to the job's
  size; so one watch, keeping only events of pods named ``NAME-...`` (every pod a job's
  operator or JobSet creates is), shown when the pod is one of the job's.

The feed exists while its page's stream is open: :meth:`JobFeed.close` stops the reflectors and
ends their streams, and their threads with them. Each change calls ``notify`` (the page's
:class:`~kfjob.ui.watch.Waker`), which coalesces, so a burst of changes is one update.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kfjob.client import ApiFailure, pod_order
from kfjob.ui.cluster import Cluster
from kfjob.ui.model import ServedKind
from kfjob.ui.watch import Reflector

__all__ = ["JobFeed", "JobView"]

Obj = dict[str, Any]
SOURCES = ("job", "pods", "job events", "pod events")


@dataclass
class JobView:
    """The feed's state at one moment, for rendering."""

    job: Obj | None
    """None: the job does not exist (not yet listed: see ``synced``)."""
    pods: list[Obj]
    events: list[Obj]
    problems: dict[str, str] = field(default_factory=dict)
    """Per source that the API server refused, what it said."""
    synced: bool = False
    """Every source has listed (or been refused): the view is whole."""


class JobFeed:
    def __init__(
        self,
        cluster: Cluster,
        kind: ServedKind,
        namespace: str,
        name: str,
        *,
        notify: Callable[[], None] = lambda: None,
    ) -> None:
        self.kind, self.namespace, self.name = kind, namespace, name
        self.notify = notify
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._job: Obj | None = None
        self._pods: dict[str, Obj] = {}
        self._job_events: dict[str, Obj] = {}
        self._pod_events: dict[str, Obj] = {}
        self._seen_pods: set[str] = set()
        self._problems: dict[str, str] = {}
        self._synced: set[str] = set()
        self._threads: list[threading.Thread] = []
        base = f"/apis/{kind.group}/{kind.version}/namespaces/{namespace}/{kind.plural}"
        events = f"/api/v1/namespaces/{namespace}/events"
        stores = {
            "job": (self._set_job, self._job_changed),
            "pods": (self._set_pods, self._pod_changed),
            "job events": (self._keyed(self._job_events), self._keyed_event(self._job_events)),
            "pod events": (self._set_pod_events, self._pod_event_changed),
        }
        where = {
            "job": (base, "", f"metadata.name={name}"),
            "pods": (f"/api/v1/namespaces/{namespace}/pods", f"{kind.pod_label}={name}", ""),
            "job events": (
                events,
                "",
                f"involvedObject.kind={kind.kind},involvedObject.name={name}",
            ),
            "pod events": (events, "", "involvedObject.kind=Pod"),
        }
        self.reflectors: dict[str, Reflector] = {}
        for source in SOURCES:
            path, labels, fields = where[source]
            reset, event = stores[source]
            self.reflectors[source] = Reflector(
                cluster,
                path=path,
                label_selector=labels,
                field_selector=fields,
                on_reset=self._synced_after(source, reset),
                on_event=self._changed_by(event),
                on_denied=self._denied(source),
                stop=self.stop,
            )

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        for source, reflector in self.reflectors.items():
            thread = threading.Thread(
                target=reflector.run,
                name=f"kfjob-ui-job {self.namespace}/{self.name} {source}",
                daemon=True,
            )
            self._threads.append(thread)
            thread.start()

    def close(self) -> None:
        self.stop.set()
        for reflector in self.reflectors.values():
            reflector.abort()

    def threads(self) -> list[threading.Thread]:
        return list(self._threads)

    def load_once(self) -> JobView:
        """One LIST of each source, no watch: what a page shows when first loaded."""
        for source, reflector in self.reflectors.items():
            try:
                items, _ = reflector.cluster.list(
                    reflector.path,
                    label_selector=reflector.label_selector,
                    field_selector=reflector.field_selector,
                )
            except ApiFailure as exc:
                if source == "job":
                    raise
                reflector.on_denied(exc)
                continue
            reflector.on_reset(items)
        return self.view()

    # ------------------------------------------------------------------ state

    def view(self) -> JobView:
        with self._lock:
            pods = sorted(self._pods.values(), key=pod_order)
            shown = self._seen_pods
            events = [*self._job_events.values()] + [
                e
                for e in self._pod_events.values()
                if (e.get("involvedObject") or {}).get("name") in shown
            ]
            return JobView(
                job=self._job,
                pods=pods,
                events=events,
                problems=dict(self._problems),
                synced=len(self._synced) == len(SOURCES),
            )

    # ------------------------------------------------------------------ store updates

    def _synced_after(
        self, source: str, reset: Callable[[list[Obj]], None]
    ) -> Callable[[list[Obj]], None]:
        def on_reset(items: list[Obj]) -> None:
            with self._lock:
                reset(items)
                self._synced.add(source)
                self._problems.pop(source, None)
            self.notify()

        return on_reset

    def _changed_by(self, apply: Callable[[str, Obj], None]) -> Callable[[str, Obj], None]:
        def on_event(etype: str, obj: Obj) -> None:
            with self._lock:
                apply(etype, obj)
            self.notify()

        return on_event

    def _denied(self, source: str) -> Callable[[ApiFailure], None]:
        def on_denied(exc: ApiFailure) -> None:
            with self._lock:
                self._problems[source] = f"{source}: {exc.status} {exc.message}"
                self._synced.add(source)
            self.notify()

        return on_denied

    def _set_job(self, items: list[Obj]) -> None:
        self._job = next((i for i in items if _name(i) == self.name), None)

    def _job_changed(self, etype: str, obj: Obj) -> None:
        if _name(obj) == self.name:
            self._job = None if etype == "DELETED" else obj

    def _set_pods(self, items: list[Obj]) -> None:
        self._pods = {_name(p): p for p in items}
        self._seen_pods |= set(self._pods)

    def _pod_changed(self, etype: str, obj: Obj) -> None:
        if etype == "DELETED":
            self._pods.pop(_name(obj), None)
        else:
            self._pods[_name(obj)] = obj
            self._seen_pods.add(_name(obj))

    def _ours(self, event: Obj) -> bool:
        pod = str((event.get("involvedObject") or {}).get("name") or "")
        return pod.startswith(f"{self.name}-")

    def _set_pod_events(self, items: list[Obj]) -> None:
        self._pod_events = {_uid(e): e for e in items if self._ours(e)}

    def _pod_event_changed(self, etype: str, obj: Obj) -> None:
        if self._ours(obj):
            self._keyed_event(self._pod_events)(etype, obj)

    @staticmethod
    def _keyed(store: dict[str, Obj]) -> Callable[[list[Obj]], None]:
        def reset(items: list[Obj]) -> None:
            store.clear()
            store.update((_uid(i), i) for i in items)

        return reset

    @staticmethod
    def _keyed_event(store: dict[str, Obj]) -> Callable[[str, Obj], None]:
        def apply(etype: str, obj: Obj) -> None:
            if etype == "DELETED":
                store.pop(_uid(obj), None)
            else:
                store[_uid(obj)] = obj

        return apply


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _uid(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return str(meta.get("uid") or meta.get("name") or "")
