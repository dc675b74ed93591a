"""Telemetry: what a job's reconciles tell people, as Events on the job (``kubectl describe``),
log lines and Prometheus metrics.

The log tells each job's story without drowning in it: every Event is logged (Warnings at
warning) except the per-object creations and deletions, which a pass counts in one line
(``created 4 pods``), so a job of any size costs a few lines per pass.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from prometheus_client.core import GaugeMetricFamily, Metric

from jobcontroller.core.types import POD, POD_GROUP, SERVICE, Event, JobMetric, Obj, Observed, Plan
from jobcontroller.runtime.events import EventRecorder
from jobcontroller.runtime.metrics import Metrics
from jobcontroller.runtime.store import Store

__all__ = ["LOGGER_NAME", "Telemetry", "parse_time"]

#: The controller's parts log as one component, under the name its log lines have always had.
LOGGER_NAME = "jobcontroller.controller"

log = structlog.get_logger(LOGGER_NAME)
_DEBUG = logging.getLogger(LOGGER_NAME)

#: Events about one created or deleted object: the log counts them per pass instead.
#: (``SuccessfulDeleteJob`` is the job's own TTL deletion, worth its line.)
_COUNTED_REASON = re.compile(r"^(SuccessfulCreate.|SuccessfulDelete(?!Job$).)")

#: The hook a framework with counters of its own gets after the job counters moved.
Counted = Callable[[Obj, tuple[JobMetric, ...]], None]


def parse_time(value: Any) -> float | None:
    """An RFC 3339 timestamp as epoch seconds, None when absent or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _counted(done: Mapping[str, int]) -> str:
    """``{"Pod": 4, "Service": 1}`` -> ``"4 pods, 1 service"``."""
    return ", ".join(f"{n} {kind.lower()}{'s' if n != 1 else ''}" for kind, n in done.items())


def _state_of(job: Obj) -> tuple[str, float | None]:
    """The job's state (its last True condition; Pending before it has one) and since when."""
    meta = job.get("metadata") or {}
    for cond in reversed((job.get("status") or {}).get("conditions") or ()):
        if cond.get("status") == "True":
            return str(cond.get("type")), parse_time(cond.get("lastTransitionTime"))
    return "Pending", parse_time(meta.get("creationTimestamp"))


def _log_condition_changes(old: Obj, new: Obj) -> None:
    """One info line per condition whose status changed (or appeared) in a status write."""
    before = {c.get("type"): c for c in old.get("conditions") or ()}
    for cond in new.get("conditions") or ():
        previous = before.get(cond.get("type"))
        was = previous.get("status") if previous else None
        if was == cond.get("status"):
            continue
        log.info(
            f"condition {cond.get('type')}: {was or 'absent'} -> {cond.get('status')}",
            condition=cond.get("type"),
            reason=cond.get("reason"),
            message=cond.get("message"),
        )


class Telemetry:
    """Events, log lines and metrics of one controller. Events and metrics go nowhere until
    :meth:`attach` (a controller built for its manifests only never runs)."""

    def __init__(
        self,
        *,
        framework: str,
        component: str,
        object_events: bool,
        clock: Callable[[], dt.datetime],
        counted: Counted,
    ) -> None:
        self.framework = framework
        """The ``framework`` label of the metrics."""
        self.component = component
        """The Events' source."""
        self.object_events = object_events
        """An Event per object created or deleted (the log counts them either way)."""
        self._clock = clock
        self._counted = counted
        self.events: EventRecorder | None = None
        self.metrics: Metrics | None = None
        self._jobs: Store | None = None

    def attach(self, *, events: EventRecorder | None, metrics: Metrics | None, jobs: Store) -> None:
        """Where Events and metrics go, and the job cache that the scrape-time gauges read."""
        self.events, self.metrics, self._jobs = events, metrics, jobs
        if metrics is not None:
            metrics.on_scrape(self.job_families)

    # ------------------------------------------------------------------------ events

    def record(self, job: Obj, event: Event) -> None:
        """Record the Event and tell the job's story in the log: every Event at info (Warnings
        at warning) but the per-object creations and deletions, which the pass counts."""
        per_object = bool(_COUNTED_REASON.match(event.reason))
        if not per_object:
            say = log.warning if event.type == "Warning" else log.info
            say(event.message, reason=event.reason)
        if self.events is not None and (self.object_events or not per_object):
            self.events.record(
                job,
                type=event.type,
                reason=event.reason,
                message=event.message,
                component=self.component,
            )

    def warn(self, job: Obj, reason: str, message: str) -> None:
        self.record(job, Event("Warning", reason, message))

    def report(
        self,
        job: Obj,
        result: Plan,
        *,
        unless_reasons: frozenset[str] = frozenset(),
        uncounted: JobMetric | None = None,
    ) -> None:
        """The plan's events (but those of ``unless_reasons``: conditions whose write is held)
        and metrics (but ``uncounted``: the count of such a condition). DELETED is counted by
        the deletion itself: a failed one is planned (and was counted) again on every retry."""
        for event in result.events:
            if event.reason not in unless_reasons:
                self.record(job, event)
        skip = (JobMetric.DELETED, uncounted)
        self.count(job, tuple(m for m in result.metrics if m not in skip))

    # ------------------------------------------------------------------------ logs

    def log_plan(
        self, raw: Obj, observed: Observed, result: Plan, *, cached: Callable[[], Mapping[str, int]]
    ) -> None:
        """At debug, what the plan decided: actions by kind, timers, events, cache sizes."""
        if not _DEBUG.isEnabledFor(logging.DEBUG):  # the summary costs a little; only when shown
            return
        actions = Counter(f"{type(a).__name__}:{getattr(a, 'kind', '')}" for a in result.actions)
        log.debug(
            "planned",
            actions=dict(actions),
            requeue_after=result.requeue_after,
            status_changed=result.status is not None
            and result.status.to_dict() != (raw.get("status") or {}),
            events=[e.reason for e in result.events],
            pods=len(observed.pods),
            services=len(observed.services),
            cached=dict(cached()),
        )

    def log_pass(self, done: Counter[tuple[str, str]]) -> None:
        """What one pass created and deleted: one line per verb, not one per object."""
        for verb in ("created", "deleted"):
            counts = {kind: n for (v, kind), n in sorted(done.items()) if v == verb}
            if counts:
                log.info(f"{verb} {_counted(counts)}", **{verb: counts})

    # ------------------------------------------------------------------------ metrics

    def count(self, job: Obj, metrics: tuple[JobMetric, ...]) -> None:
        """The training_operator_jobs_* counters, then the framework's own (``counted``)."""
        if self.metrics is None or not metrics:
            return
        labels = {
            "job_namespace": job["metadata"].get("namespace", ""),
            "framework": self.framework,
        }
        counters = {
            JobMetric.CREATED: self.metrics.jobs_created,
            JobMetric.SUCCESSFUL: self.metrics.jobs_successful,
            JobMetric.FAILED: self.metrics.jobs_failed,
            JobMetric.RESTARTED: self.metrics.jobs_restarted,
            JobMetric.DELETED: self.metrics.jobs_deleted,
        }
        for m in metrics:
            counters[m].labels(**labels).inc()
        self._counted(job, metrics)

    def count_object(self, kind: str, *, created: bool) -> None:
        """The training-operator's object counters."""
        m = self.metrics
        if m is None:
            return
        counter = {
            (POD, True): m.created_pods,
            (POD, False): m.deleted_pods,
            (SERVICE, True): m.succeeded_service_creation,
            (POD_GROUP, True): m.created_pod_groups,
            (POD_GROUP, False): m.deleted_pod_groups,
        }.get((kind, created))
        if counter is not None:
            counter.inc()

    def pod_failed(self) -> None:
        if self.metrics is not None:
            self.metrics.failed_pods.inc()

    def service_creation_failed(self) -> None:
        if self.metrics is not None:
            self.metrics.failed_service_creation.inc()

    def first_pods(self, job: Obj) -> None:
        """The job's first pods were created: how long it waited for them since its creation."""
        created = parse_time(job["metadata"].get("creationTimestamp"))
        if self.metrics is not None and created is not None:
            waited = max(0.0, self._clock().timestamp() - created)
            self.metrics.job_first_pod.labels(self.framework).observe(waited)

    def status_written(self, job: Obj, old: Obj, new: Obj) -> None:
        """A status write: the conditions that changed, in the log, and what users wait for,
        observed at the write that shows it: Running for the first time (creation to Running)
        and the end (start to completion, by final state)."""
        _log_condition_changes(old, new)
        m = self.metrics
        if m is None:
            return
        was = {c.get("type") for c in old.get("conditions") or () if c.get("status") == "True"}
        now = {c.get("type"): c for c in new.get("conditions") or () if c.get("status") == "True"}
        created = parse_time((job.get("metadata") or {}).get("creationTimestamp"))
        running = now.get("Running")
        ever_ran = any(c.get("type") == "Running" for c in old.get("conditions") or ())
        if running is not None and not ever_ran and created is not None:
            at = parse_time(running.get("lastTransitionTime"))
            if at is not None:
                m.job_queue_wait.labels(self.framework).observe(max(0.0, at - created))
        for state in ("Succeeded", "Failed"):
            if state in now and state not in was:
                start = parse_time(new.get("startTime")) or created
                end = parse_time(new.get("completionTime"))
                if start is not None and end is not None:
                    m.job_duration.labels(self.framework, state).observe(max(0.0, end - start))

    def job_families(self) -> list[Metric]:
        """Jobs by state (the last True condition, as the anchors' State column shows it) and
        how long the longest-waiting one has been in it, from the cache at scrape time."""
        jobs = GaugeMetricFamily(
            "jobcontroller_jobs",
            "Jobs in the cache by current state",
            labels=["framework", "state"],
        )
        oldest = GaugeMetricFamily(
            "jobcontroller_job_state_oldest_seconds",
            "Seconds the job longest in each state has been in it",
            labels=["framework", "state"],
        )
        counts: Counter[str] = Counter()
        ages: dict[str, float] = {}
        now = self._clock().timestamp()
        for job in self._jobs.list() if self._jobs is not None else ():
            state, since = _state_of(job)
            counts[state] += 1
            if since is not None:
                ages[state] = max(ages.get(state, 0.0), now - since)
        for state, n in sorted(counts.items()):
            jobs.add_metric([self.framework, state], n)
            if state in ages:
                oldest.add_metric([self.framework, state], ages[state])
        return [jobs, oldest]
