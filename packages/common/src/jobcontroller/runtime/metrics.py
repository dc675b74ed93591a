"""Prometheus metrics of an operator process.

One :class:`Metrics` object per process, bound to one registry, handed to every runtime
component that reports something. Components take ``metrics: Metrics | None`` so unit tests
can run without one.

Names follow the anchors so existing dashboards keep working: the training-operator's
``training_operator_jobs_*_total{job_namespace, framework}`` counters, controller-runtime's
``controller_runtime_reconcile_*`` and client-go's ``workqueue_*`` and ``rest_client_*`` families.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

# The *_created companion series double every counter's exposition for a timestamp that
# nobody graphs; controller-runtime's Go metrics have none either.
disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus-client leaves it unannotated

_JOB_LABELS = ("job_namespace", "framework")

#: Buckets for reconcile and work durations: 1 ms to about 1 minute.
_DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
#: Buckets for queue latency (time between add and get): up to about 16 minutes.
_QUEUE_BUCKETS = (0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 1000)


class Metrics:
    """All metric families of one operator process, registered to ``registry``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry

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

        # Reconciles (controller-runtime names).
        self.reconcile_total = Counter(
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
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Time spent in one reconcile",
            ("controller",),
            buckets=_DURATION_BUCKETS,
            registry=r,
        )

        # Work queue (client-go names).
        self.workqueue_depth = Gauge(
            "workqueue_depth", "Keys waiting in the queue", ("name",), registry=r
        )
        self.workqueue_adds = Counter(
            "workqueue_adds", "Keys added to the queue", ("name",), registry=r
        )
        self.workqueue_queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "Time a key waits in the queue before a worker takes it",
            ("name",),
            buckets=_QUEUE_BUCKETS,
            registry=r,
        )
        self.workqueue_work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "Time a worker holds a key",
            ("name",),
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.workqueue_retries = Counter(
            "workqueue_retries", "Rate-limited re-adds", ("name",), registry=r
        )

        # API access.
        self.api_requests = Counter(
            "rest_client_requests",
            "API requests by verb, resource and HTTP code",
            ("verb", "resource", "code"),
            registry=r,
        )
        self.api_request_duration = Histogram(
            "rest_client_request_duration_seconds",
            "API request latency (excluding watch streams)",
            ("verb", "resource"),
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.api_rate_limiter_wait = Histogram(
            "rest_client_rate_limiter_duration_seconds",
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
