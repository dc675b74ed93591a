"""mpi-operator v0.8's own metrics, beside the training-operator's that every operator exports,
so dashboards built for mpi-operator keep working.

Names, types, labels and help texts are mpi-operator's (``pkg/controller/mpi_job_controller.go``
and ``cmd/mpi-operator/app/server.go`` at v0.8.0): three label-less job counters,
``mpi_operator_job_info{launcher, namespace}`` (1 per MPIJob that has a launcher) and
``mpi_operator_is_leader``. Unlike mpi-operator, ``job_info`` is computed from the cache at
scrape time, so a deleted job's series goes with it instead of staying at 1 for ever.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric

from jobcontroller import JobMetric, Obj
from mpi_operator.hostfile import LAUNCHER_SUFFIX

__all__ = ["MPIOperatorMetrics"]


class MPIOperatorMetrics:
    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        jobs: Callable[[], Iterable[Obj]],
        launcher_exists: Callable[[str, str], bool],
        is_leader: Callable[[], bool],
    ) -> None:
        self.created = Counter(
            "mpi_operator_jobs_created", "Counts number of MPI jobs created", registry=registry
        )
        self.successful = Counter(
            "mpi_operator_jobs_successful",
            "Counts number of MPI jobs successful",
            registry=registry,
        )
        self.failed = Counter(
            "mpi_operator_jobs_failed", "Counts number of MPI jobs failed", registry=registry
        )
        self._jobs, self._launcher_exists, self._is_leader = jobs, launcher_exists, is_leader

    def counted(self, metrics: tuple[JobMetric, ...]) -> None:
        counters = {
            JobMetric.CREATED: self.created,
            JobMetric.SUCCESSFUL: self.successful,
            JobMetric.FAILED: self.failed,
        }
        for metric in metrics:
            counter = counters.get(metric)
            if counter is not None:
                counter.inc()

    def families(self) -> list[Metric]:
        info = GaugeMetricFamily(
            "mpi_operator_job_info", "Information about MPIJob", labels=["launcher", "namespace"]
        )
        for job in self._jobs():
            meta: dict[str, Any] = job.get("metadata") or {}
            namespace, launcher = meta.get("namespace", ""), meta.get("name", "") + LAUNCHER_SUFFIX
            if self._launcher_exists(namespace, launcher):
                info.add_metric([launcher, namespace], 1)
        leader = GaugeMetricFamily(
            "mpi_operator_is_leader",
            "Is this client the leader of this mpi-operator client set?",
            value=1 if self._is_leader() else 0,
        )
        return [info, leader]
