"""Prometheus metrics of an operator process.

One :class:`Metrics` object per process, bound to one registry, handed to every runtime
component that reports something. Components take ``metrics: Metrics | None`` so unit tests
can run without one.

Names and label sets follow the anchors, so existing dashboards keep working:

* the training-operator v1.9's ``training_operator_jobs_*_total{job_namespace, framework}`` and
  its pod, pod-group and service counters (``created_pods_total``...: label-less, as it defines
  them; v1.9 registers those in a registry it never serves, we serve them);
* controller-runtime's ``controller_runtime_reconcile_*{controller}``,
  ``controller_runtime_active_workers`` and ``controller_runtime_max_concurrent_reconciles``,
  its ``workqueue_*{name, controller}`` families and ``rest_client_requests_total{code, method,
  host}``;
* client-go's ``leader_election_master_status{name}``;
* mpi-operator v0.8's ``mpi_operator_*`` (the MPI operator registers those,
  :mod:`mpi_operator.controller`);
* prometheus_client's process, platform and GC collectors.

What the anchors lack carries the ``jobcontroller_`` prefix: API requests per resource, request
latency and rate-limiter wait, watch restarts, relists and cache sizes, jobs by state, and the
durations users wait for (to the first pod, to Running, to the end).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from typing_extensions import override

# The *_created companion series double every counter's exposition for a timestamp that
# nobody graphs; controller-runtime's Go metrics have none either.
disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus-client leaves it unannotated

_JOB_LABELS = ("job_namespace", "framework")
_QUEUE_LABELS = ("name", "controller")  # controller-runtime sets both to the controller's name

#: Buckets for reconcile and work durations: 1 ms to about 1 minute.
_DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
#: Buckets for queue latency (time between add and get): up to about 16 minutes.
_QUEUE_BUCKETS = (0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 1000)
#: Buckets for what users wait for (to the first pod, to Running, to the end): 1 s to 1 week.
_JOB_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400, 604800)

#: controller-runtime pre-sets every result to 0 when a controller starts.
RECONCILE_RESULTS = ("success", "error", "requeue", "requeue_after")

ScrapeCallback = Callable[[], Iterable[Metric]]
_C = TypeVar("_C")
_C_co = TypeVar("_C_co", covariant=True)


class _Labelled(Protocol[_C_co]):
    def labels(self, *values: str) -> _C_co: ...


class _OnScrape(Collector):
    """Families computed when Prometheus scrapes (queue ages, active workers, jobs by state),
    so nothing has to keep them up to date between scrapes."""

    def __init__(self) -> None:
        self.callbacks: list[ScrapeCallback] = []

    @override
    def collect(self) -> Iterable[Metric]:
        for callback in self.callbacks:
            yield from callback()

    def describe(self) -> Iterable[Metric]:
        return ()  # unchecked: the families depend on what is registered later


class _LoopFamily(Collector, Generic[_C]):
    """A family of the request path, updated from the event loop's thread only (the operator
    runs one; its ``/metrics`` is served on the same loop): each child is a plain number, not
    a value behind a lock as prometheus_client's, and ``labels()`` is one dict lookup. Every
    API request observes two histograms and counts in two counters; through
    prometheus_client that was 4 to 6% of the operator's CPU in a burst. The exposition is
    prometheus_client's own for the same observations (``tests/unit/test_metrics_children.py``
    compares them)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Iterable[str] = (),
        *,
        registry: CollectorRegistry,
    ) -> None:
        self._name, self._doc, self._labelnames = name, documentation, tuple(labelnames)
        self._children: dict[tuple[str, ...], _C] = {}
        if not self._labelnames:
            self._children[()] = self._new_child()  # shown from the start, as prometheus_client's
        registry.register(self)

    def _new_child(self) -> _C:
        raise NotImplementedError

    def _add(self, family: Any, values: tuple[str, ...], child: _C) -> None:
        raise NotImplementedError

    def _family(self) -> Any:
        raise NotImplementedError

    def labels(self, *values: str) -> _C:
        child = self._children.get(values)
        if child is None:
            if len(values) != len(self._labelnames):
                raise ValueError(f"{self._name}: {len(self._labelnames)} label values expected")
            key = tuple(str(v) for v in values)
            child = self._children.get(key)
            if child is None:
                child = self._children[key] = self._new_child()
            self._children[values] = child  # an alias when a value was not a str
        return child

    def describe(self) -> Iterable[Metric]:
        return [self._family()]

    @override
    def collect(self) -> Iterable[Metric]:
        family = self._family()
        for values, child in list(self._children.items()):
            if all(type(v) is str for v in values):  # not the aliases of non-str values
                self._add(family, values, child)
        return [family]


class LoopCounterChild:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        self.value += amount


class LoopCounter(_LoopFamily[LoopCounterChild]):
    """A counter (:class:`_LoopFamily`); exposed as ``<name>_total``."""

    @override
    def _new_child(self) -> LoopCounterChild:
        return LoopCounterChild()

    @override
    def _family(self) -> CounterMetricFamily:
        return CounterMetricFamily(self._name, self._doc, labels=self._labelnames)

    @override
    def _add(self, family: Any, values: tuple[str, ...], child: LoopCounterChild) -> None:
        family.add_metric(values, child.value)

    def inc(self, amount: float = 1) -> None:
        self._children[()].inc(amount)


class LoopHistogramChild:
    __slots__ = ("_bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self.counts = [0] * len(bounds)
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        self.sum += amount
        if amount != amount:  # NaN: in the sum, in no bucket, as prometheus_client does
            return
        # The first bucket whose upper bound is >= amount; the last bound is +Inf.
        self.counts[bisect_left(self._bounds, amount)] += 1


class LoopHistogram(_LoopFamily[LoopHistogramChild]):
    """A histogram (:class:`_LoopFamily`) with cumulative ``le`` buckets, ``_count`` and
    ``_sum``."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Iterable[str] = (),
        *,
        buckets: Iterable[float],
        registry: CollectorRegistry,
    ) -> None:
        bounds = [float(b) for b in buckets]
        if bounds != sorted(bounds):
            raise ValueError(f"{name}: buckets not in sorted order")  # as prometheus_client
        if not bounds or bounds[-1] != float("inf"):
            bounds.append(float("inf"))
        self._bounds = tuple(bounds)
        # prometheus_client's own rendering of a bound (``1.0``, ``+Inf``).
        self._les: tuple[str, ...] = tuple(floatToGoString(b) for b in bounds)  # type: ignore[no-untyped-call]
        super().__init__(name, documentation, labelnames, registry=registry)

    @override
    def _new_child(self) -> LoopHistogramChild:
        return LoopHistogramChild(self._bounds)

    @override
    def _family(self) -> HistogramMetricFamily:
        return HistogramMetricFamily(self._name, self._doc, labels=self._labelnames)

    @override
    def _add(self, family: Any, values: tuple[str, ...], child: LoopHistogramChild) -> None:
        total, buckets = 0, []
        for le, n in zip(self._les, child.counts, strict=True):
            total += n
            buckets.append((le, float(total)))
        family.add_metric(values, buckets, child.sum)

    def observe(self, amount: float) -> None:
        self._children[()].observe(amount)


class Metrics:
    """All metric families of one operator process, registered to ``registry``."""

    def __init__(
        self, registry: CollectorRegistry | None = None, *, process_collectors: bool = True
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        if process_collectors:
            # RSS, CPU, open fds, the Python version, GC: what a platform team graphs first.
            for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
                r.register(collector)
        self._on_scrape = _OnScrape()
        self._children: dict[tuple[object, tuple[str, ...]], Any] = {}
        r.register(self._on_scrape)

        # Job lifecycle, as kubeflow/training-operator names them.
        self.jobs_created = Counter(
            "training_operator_jobs_created", "Jobs created", _JOB_LABELS, registry=r
        )
        self.jobs_deleted = Counter(
            "training_operator_jobs_deleted", "Jobs deleted (TTL)", _JOB_LABELS, registry=r
        )
        self.jobs_successful = Counter(
            "training_operator_jobs_successful", "Jobs succeeded", _JOB_LABELS, registry=r
        )
        self.jobs_failed = Counter(
            "training_operator_jobs_failed", "Jobs failed", _JOB_LABELS, registry=r
        )
        self.jobs_restarted = Counter(
            "training_operator_jobs_restarted", "Jobs restarted", _JOB_LABELS, registry=r
        )
        # The training-operator's object counters (label-less, its help texts).
        self.created_pods = Counter("created_pods", "The total number of created pods", registry=r)
        self.deleted_pods = Counter("deleted_pods", "The total number of deleted pods", registry=r)
        self.failed_pods = Counter("failed_pods", "The total number of failed pods", registry=r)
        self.created_pod_groups = Counter(
            "created_pod_groups", "The total number of created pod groups", registry=r
        )
        self.deleted_pod_groups = Counter(
            "deleted_pod_groups", "The total number of deleted pod groups", registry=r
        )
        self.succeeded_service_creation = Counter(
            "succeeded_service_creation",
            "The total number of succeeded service creation",
            registry=r,
        )
        self.failed_service_creation = Counter(
            "failed_service_creation", "The total number of failed service creation", registry=r
        )
        # What users wait for, beyond the anchors.
        self.job_first_pod = Histogram(
            "jobcontroller_job_first_pod_seconds",
            "From a job's creation to its first pod created",
            ("framework",),
            buckets=_JOB_BUCKETS,
            registry=r,
        )
        self.job_queue_wait = Histogram(
            "jobcontroller_job_queue_wait_seconds",
            "From a job's creation to Running (all its pods running)",
            ("framework",),
            buckets=_JOB_BUCKETS,
            registry=r,
        )
        self.job_duration = Histogram(
            "jobcontroller_job_duration_seconds",
            "From a job's start to its end, by final state (Succeeded, Failed)",
            ("framework", "state"),
            buckets=_JOB_BUCKETS,
            registry=r,
        )

        # Reconciles (controller-runtime names).
        self.reconcile_total = LoopCounter(
            "controller_runtime_reconcile",
            "Reconciles per controller and result (success, error, requeue, requeue_after)",
            ("controller", "result"),
            registry=r,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors",
            "Reconciles that raised",
            ("controller",),
            registry=r,
        )
        self.reconcile_time = LoopHistogram(
            "controller_runtime_reconcile_time_seconds",
            "Time spent in one reconcile",
            ("controller",),
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.terminal_reconcile_errors = Counter(
            "controller_runtime_terminal_reconcile_errors",
            "Reconciles that ended in an error not worth retrying",
            ("controller",),
            registry=r,
        )
        self.reconcile_panics = Counter(
            "controller_runtime_reconcile_panics",
            "Reconciles that raised something unexpected (a bug, with a traceback in the log)",
            ("controller",),
            registry=r,
        )
        self.max_concurrent_reconciles = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ("controller",),
            registry=r,
        )

        # Work queue (client-go names).
        self.workqueue_depth = Gauge(
            "workqueue_depth", "Current depth of workqueue", _QUEUE_LABELS, registry=r
        )
        self.workqueue_adds = LoopCounter(
            "workqueue_adds", "Total number of adds handled by workqueue", _QUEUE_LABELS, registry=r
        )
        self.workqueue_queue_duration = LoopHistogram(
            "workqueue_queue_duration_seconds",
            "Time a key waits in the queue before a worker takes it",
            _QUEUE_LABELS,
            buckets=_QUEUE_BUCKETS,
            registry=r,
        )
        self.workqueue_work_duration = LoopHistogram(
            "workqueue_work_duration_seconds",
            "Time a worker holds a key",
            _QUEUE_LABELS,
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.workqueue_retries = LoopCounter(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            _QUEUE_LABELS,
            registry=r,
        )

        # API access.
        self.rest_client_requests = LoopCounter(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ("code", "method", "host"),
            registry=r,
        )
        self.api_requests = LoopCounter(
            "jobcontroller_api_requests",
            "API requests by verb, resource and HTTP code (code 'error': no answer)",
            ("verb", "resource", "code"),
            registry=r,
        )
        self.api_request_duration = LoopHistogram(
            "jobcontroller_api_request_duration_seconds",
            "API request latency (excluding watch streams)",
            ("verb", "resource"),
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.api_rate_limiter_wait = LoopHistogram(
            "jobcontroller_api_rate_limiter_wait_seconds",
            "Time requests waited on the client-side QPS limiter",
            (),
            buckets=_DURATION_BUCKETS,
            registry=r,
        )

        # Watches.
        self.watch_restarts = Counter(
            "informer_watch_restarts",
            "Watch streams re-opened (timeouts, errors, inactivity)",
            ("resource", "reason"),
            registry=r,
        )
        self.relists = Counter(
            "informer_relists", "Full LISTs (initial and after 410 Gone)", ("resource",), registry=r
        )
        self.informer_objects = Gauge(
            "informer_store_objects", "Objects held in an informer store", ("resource",), registry=r
        )

        # Leadership.
        self.leader = Gauge(
            "leader_election_master_status",
            "1 while this replica holds the lease",
            ("name",),
            registry=r,
        )

    def child(self, family: _Labelled[_C], *values: str) -> _C:
        """``family.labels(*values)``, looked up once per label set: ``labels()`` checks and
        locks on every call (3 to 9 µs measured here, three times per API request), a hit
        here is a dict lookup. Only for label values from finite sets (verbs, resources,
        codes, controller and informer names): the cache keeps every set it saw. Families
        whose children are ever removed must not be read through it."""
        key = (family, values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = family.labels(*values)
        return found

    def on_scrape(self, callback: ScrapeCallback) -> None:
        """Have ``callback`` compute some families at each scrape."""
        self._on_scrape.callbacks.append(callback)
