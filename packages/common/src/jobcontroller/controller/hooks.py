"""The hooks a framework overrides, with the defaults of a framework that needs nothing special.

``JobController[JobT]`` inherits them; a framework operator overrides the few that differ.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic

from jobcontroller.api.common import JobStatus
from jobcontroller.api.crd import build_crd
from jobcontroller.controller.watch import Caches
from jobcontroller.core.types import (
    Action,
    CreateObject,
    Event,
    JobMetric,
    JobT,
    LifecycleWords,
    Obj,
    Observed,
    PlanConfig,
    ReplicaPods,
)
from jobcontroller.runtime.metrics import Metrics

__all__ = ["FrameworkHooks", "Setup"]


@dataclass(frozen=True, slots=True)
class Setup:
    """What a framework's :meth:`~FrameworkHooks.on_setup` gets when its controller is wired."""

    caches: Caches
    """The controller's caches, read-only (its jobs; the objects of its owned kinds)."""
    metrics: Metrics | None
    """The operator's metrics (``registry``, ``on_scrape``); None when it serves none."""
    is_leader: Callable[[], bool]
    """Whether this replica leads now (always True without leader election)."""


class FrameworkHooks(Generic[JobT]):
    model: type[JobT]
    framework_name: ClassVar[str]
    """Metrics label: tensorflow, pytorch, mpi."""
    controller_name: ClassVar[str]
    """The operator-name label value and the work queue's name: tfjob-controller, ..."""

    def set_defaults(self, job: JobT) -> JobT:
        return job

    def validate(self, job: JobT) -> list[str]:
        return []

    def tolerated(self, job: JobT) -> list[str]:
        return []

    def pod_replica_types(self, job: JobT) -> list[str]:
        specs = job.replica_specs()
        ordered = [rt for rt in self.model.REPLICA_TYPES if rt in specs]
        return ordered + sorted(rt for rt in specs if rt not in ordered)

    def is_master_role(self, job: JobT, rtype: str, index: int) -> bool:
        return False

    def replica_index_offset(self, job: JobT, rtype: str) -> int:
        return 0

    def lifecycle_words(self, job: JobT) -> LifecycleWords:
        return LifecycleWords.training_operator(self.model.KIND, job.name)

    def delegates_run_policy(self, job: JobT) -> bool:
        return False

    def services_for(self, job: JobT, rtype: str) -> bool:
        return True

    def recreate_failed_pods(self, job: JobT, rtype: str) -> bool:
        return True

    def gang_objects(self, job: JobT, observed: Observed) -> list[tuple[str, Obj]]:
        return []

    def gang_pods(self, job: JobT, observed: Observed) -> list[tuple[str, Obj]]:
        return []

    def set_cluster_spec(
        self, job: JobT, template: Obj, *, rtype: str, index: int, config: PlanConfig
    ) -> None:
        return None

    def update_status(
        self,
        job: JobT,
        status: JobStatus,
        *,
        replicas: Mapping[str, ReplicaPods],
        now: dt.datetime,
    ) -> list[Event]:
        raise NotImplementedError(f"{type(self).__name__} must define its success/failure rule")

    def extra_objects(
        self, job: JobT, observed: Observed, status: JobStatus, *, now: dt.datetime
    ) -> tuple[list[Action], list[Event]]:
        return [], []

    def crd(self) -> dict[str, Any]:
        """The job kind's CustomResourceDefinition (``build_crd(model)``; override to add a
        scale subresource or categories)."""
        return build_crd(self.model)

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
