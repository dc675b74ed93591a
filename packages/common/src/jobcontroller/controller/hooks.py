"""The hooks a framework overrides, with the defaults of a framework that needs nothing special.

The planner's hooks (``set_defaults``, ``validate``, ``set_cluster_spec``, ``update_status``...)
are :class:`~jobcontroller.core.types.FrameworkOf`'s, pure. These are the ones the runtime
calls: the CRD, the object sent for a planned creation, the wiring of a framework's own
metrics. ``JobController[JobT]`` inherits all of them; mark an override ``@override``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from msgspec import Struct

from jobcontroller.api.crd import build_crd
from jobcontroller.controller.watch import Caches
from jobcontroller.core.types import CreateObject, FrameworkOf, JobMetric, JobT, Obj
from jobcontroller.runtime.kube import KubeApi
from jobcontroller.runtime.metrics import Metrics

__all__ = ["ControllerHooks", "RuntimeHooks", "Setup"]


class Setup(Struct, frozen=True):
    """What a framework's :meth:`~ControllerHooks.on_setup` gets when its controller is wired."""

    caches: Caches
    """The controller's caches, read-only (its jobs; the objects of its owned kinds)."""
    metrics: Metrics | None
    """The operator's metrics (``registry``, ``on_scrape``); None when it serves none."""
    is_leader: Callable[[], bool]
    """Whether this replica leads now (always True without leader election)."""
    api: KubeApi | None = None
    """The operator's API client (its rate limit and write gate are the reconcilers'):
    a framework endpoint that must write on every replica takes ``api.with_limits(...)``."""
    add_service: Callable[[str, Callable[[], Coroutine[Any, Any, None]]], None] | None = None
    """Runs a coroutine beside the controllers on every replica until shutdown (the
    manager's :meth:`~jobcontroller.runtime.manager.Manager.add_service`)."""


class RuntimeHooks:
    """The hooks the reconciler calls for any kind it serves (a v1 job's, a TrainJob's)."""

    def materialize(self, action: CreateObject) -> CreateObject:
        """The object to send for a planned creation, called just before the API call.

        Plans are pure and deterministic, so content that must be fresh and random (MPI's SSH
        key pair) cannot be in them: the plan asks for the object and this hook fills it in.
        Whatever it adds goes to the apiserver only, never to logs or events.
        """
        return action

    def on_setup(self, setup: Setup) -> None:
        """Called once when the controller is wired to its operator (its caches are registered,
        not yet synced): a framework with metrics of its own registers them here. The default
        does nothing."""

    def counted(self, job: Obj, metrics: tuple[JobMetric, ...]) -> None:
        """After the training_operator_jobs_* counters moved: a framework with metrics of its
        own (mpi-operator's) counts them here. The default does nothing."""


class ControllerHooks(RuntimeHooks, FrameworkOf[JobT]):
    """The hooks of a v1 job kind's controller: the planner's (``FrameworkOf``), the
    runtime's (``RuntimeHooks``) and its CRD."""

    def crd(self) -> dict[str, Any]:
        """The job kind's CustomResourceDefinition (``build_crd(model)``; override to add a
        scale subresource or categories)."""
        return build_crd(self.model)
