"""The training-progress endpoint joined to the controllers: one server per process (the first
controller that serves progress makes it, every other registers its kind with it), what each
kind's pods must be to report, and what the planner is told of the endpoint.

A v1 job's reporting pod must be labelled with the job's name
(``training.kubeflow.org/job-name``, which the base sets on every pod) and controlled by the
job, or by an object the job controls (MPI's launcher Job). A TrainJob's pod check is its
controller's (its JobSet's labels).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from jobcontroller.controller.progressauth import PodCheck
from jobcontroller.controller.progressserver import ProgressServer
from jobcontroller.controller.watch import LABEL_JOB_NAME, Watch
from jobcontroller.core.progress import ProgressEndpoint
from jobcontroller.runtime.manager import Manager
from jobcontroller.runtime.progressflags import ProgressSettings

__all__ = [
    "CERT_WAIT_SECONDS",
    "CertWait",
    "endpoint_of",
    "shared_progress_server",
    "v1_pod_check",
]

Obj = dict[str, Any]

SHARED_KEY = "progress-server"
CERT_WAIT_SECONDS = 30.0
"""How long planning waits for the endpoint's certificate at start (one API call)."""


class CertWait:
    """The jobs whose planning waits for the endpoint's certificate at start (pods planned
    before it would lack the progress env), queued again together the moment the server has
    asked for it once, had or not, or at the deadline if that never comes: one callback and
    one timer for all of them, not a retry timer per job (which held a burst that came with
    the operator's start half a second after the certificate was there)."""

    def __init__(
        self,
        server: ProgressServer,
        requeue: Callable[[str], None],
        *,
        within: float = CERT_WAIT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._server = server
        self._requeue = requeue
        self._clock = clock
        self._deadline = clock() + within
        self._keys: dict[str, None] = {}  # in arrival order
        self._timer: asyncio.TimerHandle | None = None
        server.when_first_attempt_done(self._release)

    def __len__(self) -> int:
        return len(self._keys)

    def holds(self, key: str) -> bool:
        """Whether ``key`` must wait; it is then queued again once the wait is over."""
        if self._server.first_attempt_done or self._clock() >= self._deadline:
            return False
        self._keys[key] = None
        if self._timer is None:
            delay = max(0.0, self._deadline - self._clock())
            self._timer = asyncio.get_running_loop().call_later(delay, self._release)
        return True

    def _release(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        keys, self._keys = self._keys, {}
        for key in keys:
            self._requeue(key)


def shared_progress_server(manager: Manager, settings: ProgressSettings) -> ProgressServer:
    """The process's endpoint, made (with an API client of its own, so reports never spend
    the reconcilers' budget) and started as a manager service on first use."""

    def make() -> ProgressServer:
        api = manager.api.with_limits(
            qps=settings.qps, burst=settings.burst, user_agent="trainjob-status-server"
        )
        server = ProgressServer(
            settings=settings,
            api=api,
            registry=manager.metrics.registry if manager.metrics is not None else None,
        )
        manager.add_service("trainjob-status-server", server.run)
        return server

    return manager.shared(SHARED_KEY, make)


def endpoint_of(server: ProgressServer | None) -> ProgressEndpoint | None:
    """What the planners are told: None until the certificate is loaded (the pods then get
    no progress env: progress never holds training up)."""
    if server is None or server.cert is None:
        return None
    return ProgressEndpoint(url=server.base_url, ca_pem=server.cert.ca_pem)


def _controller(obj: Obj) -> Obj | None:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return next((r for r in refs if isinstance(r, dict) and r.get("controller")), None)


def v1_pod_check(caches: Watch) -> PodCheck:
    """A v1 job's pods: its name label, and controlled by the job or by one of its own
    objects (MPI's launcher Job, whose pods the Job controller makes)."""

    def check(namespace: str, name: str, pod: Obj) -> bool:
        job = caches.job_store.get(namespace, name)
        labels = (pod.get("metadata") or {}).get("labels") or {}
        owner = _controller(pod)
        if job is None or owner is None or labels.get(LABEL_JOB_NAME) != name:
            return False
        uid = job["metadata"].get("uid")
        if owner.get("uid") == uid:
            return True
        child = caches.get(str(owner.get("kind") or ""), namespace, str(owner.get("name") or ""))
        if child is None or child["metadata"].get("uid") != owner.get("uid"):
            return False
        parent = _controller(child)
        return parent is not None and parent.get("uid") == uid

    return check
