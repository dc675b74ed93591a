"""EventRecorder: aggregation of repeats, combining similar events, the spam filter, the sender."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import structlog.testing
from prometheus_client import generate_latest

from jobcontroller.runtime.events import (
    COMBINED_PREFIX,
    DROP_LOG_SECONDS,
    CorrelatorSettings,
    EventCorrelator,
    EventRecorder,
)
from jobcontroller.runtime.kube import EVENTS, ApiError, Resource
from jobcontroller.runtime.metrics import Metrics

WALL = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
JOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "TFJob",
    "metadata": {"namespace": "ns", "name": "mnist", "uid": "u-1", "resourceVersion": "7"},
}
REF = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "TFJob",
    "namespace": "ns",
    "name": "mnist",
    "uid": "u-1",
}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeSink:
    """Records the writes the recorder makes; the API server's Event store in one dict."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.events: dict[str, dict[str, Any]] = {}
        self.fail_with: Exception | None = None

    async def create(
        self,
        resource: Resource,
        body: dict[str, Any],
        *,
        namespace: str | None = None,
        decode: bool = True,
    ) -> dict[str, Any]:
        assert resource is EVENTS and namespace == body["metadata"]["namespace"]
        self.calls.append(("create", body["metadata"]["name"], body))
        if self.fail_with is not None:
            raise self.fail_with
        name = body["metadata"]["name"]
        if name in self.events:
            raise ApiError(status=409, reason="AlreadyExists")
        self.events[name] = dict(body)
        return body

    async def merge_patch(
        self,
        resource: Resource,
        name: str,
        patch: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        self.calls.append(("patch", name, patch))
        if self.fail_with is not None:
            raise self.fail_with
        if name not in self.events:
            raise ApiError(status=404, reason="NotFound")
        self.events[name].update(patch)
        return self.events[name]


def observe(c: EventCorrelator, clock: FakeClock, message: str = "m", reason: str = "R") -> Any:
    return c.observe(ref=REF, type="Normal", reason=reason, message=message, now=clock(), wall=WALL)


# -- the correlator ---------------------------------------------------------------------------


def test_repeats_update_one_event_with_a_growing_count() -> None:
    c, clock = EventCorrelator(), FakeClock()
    first = observe(c, clock)
    clock.now += 1
    second = observe(c, clock)
    third = observe(c, clock)
    assert first.new and not second.new and not third.new
    assert first.name == second.name == third.name
    assert first.name.startswith("mnist.")
    assert [first.count, second.count, third.count] == [1, 2, 3]
    assert third.first_timestamp == "2025-01-02T03:04:05Z"
    assert first.namespace == "ns"


def test_a_repeat_after_the_window_starts_a_new_event() -> None:
    c, clock = EventCorrelator(settings=CorrelatorSettings(repeat_window=600)), FakeClock()
    first = observe(c, clock)
    clock.now += 601
    later = observe(c, clock)
    assert later.new and later.count == 1 and later.name != first.name


def test_different_reasons_or_types_are_different_events() -> None:
    c, clock = EventCorrelator(), FakeClock()
    a = observe(c, clock, reason="A")
    b = observe(c, clock, reason="B")
    w = c.observe(ref=REF, type="Warning", reason="A", message="m", now=clock(), wall=WALL)
    assert len({a.name, b.name, w.name}) == 3


def test_spam_filter_allows_a_burst_then_one_per_refill_and_keeps_counting() -> None:
    c, clock = EventCorrelator(), FakeClock()  # burst 25, one token per 300 s
    results = [observe(c, clock) for _ in range(30)]
    passed = [r for r in results if r is not None]
    assert len(passed) == 25
    assert results[25:] == [None] * 5
    clock.now += 150
    assert observe(c, clock) is None  # half a token is not enough
    clock.now += 150
    after = observe(c, clock)
    assert after is not None and not after.new
    assert after.count == 32  # the dropped occurrences were still counted


def test_spam_filter_is_per_object() -> None:
    c, clock = EventCorrelator(settings=CorrelatorSettings(burst=2)), FakeClock()
    other = {**REF, "uid": "u-2", "name": "other"}
    assert observe(c, clock) and observe(c, clock) and observe(c, clock) is None
    got = c.observe(ref=other, type="Normal", reason="R", message="m", now=clock(), wall=WALL)
    assert got is not None and got.name.startswith("other.")


def test_many_distinct_messages_are_combined_into_one_event() -> None:
    c, clock = EventCorrelator(settings=CorrelatorSettings(max_similar=10)), FakeClock()
    results = [observe(c, clock, message=f"Created pod: mnist-worker-{i}") for i in range(13)]
    individual, combined = results[:10], results[10:]
    assert len({r.name for r in individual}) == 10
    assert all(not r.message.startswith(COMBINED_PREFIX) for r in individual)
    assert len({r.name for r in combined}) == 1
    assert [r.count for r in combined] == [1, 2, 3]
    assert combined[-1].message == COMBINED_PREFIX + "Created pod: mnist-worker-12"


def test_memory_of_distinct_messages_is_bounded_by_the_combine_limit() -> None:
    # A job failing with a new message every few seconds never leaves the similar window, so
    # remembering every message would grow without bound; past the limit they are combined anyway.
    settings = CorrelatorSettings(max_similar=10, burst=100_000)
    c, clock = EventCorrelator(settings=settings), FakeClock()
    for i in range(1000):
        clock.now += 5
        observe(c, clock, message=f"pod mnist-worker-{i} failed")
    (similar,) = c._similar.values()  # the one (object, type, reason) entry
    assert len(similar.messages) == 11
    again = observe(c, clock, message="pod mnist-worker-0 failed")
    assert again.message == COMBINED_PREFIX + "pod mnist-worker-0 failed"


def test_cluster_scoped_objects_get_events_in_default() -> None:
    c, clock = EventCorrelator(), FakeClock()
    node = {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "n"}
    got = c.observe(ref=node, type="Normal", reason="R", message="m", now=clock(), wall=WALL)
    assert got is not None and got.namespace == "default"


# -- the recorder and its sender --------------------------------------------------------------


def make_recorder(sink: FakeSink, **kwargs: Any) -> EventRecorder:
    clock = kwargs.pop("clock", FakeClock())
    return EventRecorder(
        sink, component="tf-operator", host="pod-1", clock=clock, wall=lambda: WALL, **kwargs
    )


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_first_occurrence_creates_a_full_event() -> None:
    sink = FakeSink()
    rec = make_recorder(sink)
    rec.record(JOB, type="Warning", reason="FailedCreatePod", message="quota exceeded")
    await rec.close()
    [(verb, name, body)] = sink.calls
    assert verb == "create"
    assert body["involvedObject"] == {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "namespace": "ns",
        "name": "mnist",
        "uid": "u-1",
        "resourceVersion": "7",
    }
    assert body["metadata"] == {"name": name, "namespace": "ns"}
    assert (body["type"], body["reason"], body["message"]) == (
        "Warning",
        "FailedCreatePod",
        "quota exceeded",
    )
    assert body["source"] == {"component": "tf-operator"}
    assert body["count"] == 1
    assert body["firstTimestamp"] == body["lastTimestamp"] == "2025-01-02T03:04:05Z"


async def test_repeats_queued_before_sending_coalesce_into_one_create() -> None:
    sink = FakeSink()
    rec = make_recorder(sink)
    for _ in range(5):
        rec.record(JOB, type="Normal", reason="R", message="same")
    await settle()
    assert [(c[0], c[2]["count"]) for c in sink.calls] == [("create", 5)]
    rec.record(JOB, type="Normal", reason="R", message="same")
    await rec.close()
    assert [(c[0], c[2]["count"]) for c in sink.calls] == [("create", 5), ("patch", 6)]
    [stored] = sink.events.values()
    assert stored["count"] == 6


async def test_a_patch_of_a_vanished_event_recreates_it() -> None:
    sink = FakeSink()
    rec = make_recorder(sink)
    rec.record(JOB, type="Normal", reason="R", message="m")
    await settle()
    sink.events.clear()  # the apiserver's event TTL expired
    rec.record(JOB, type="Normal", reason="R", message="m")
    await rec.close()
    assert [c[0] for c in sink.calls] == ["create", "patch", "create"]
    [stored] = sink.events.values()
    assert stored["count"] == 2


async def test_full_buffer_drops_new_events_without_blocking() -> None:
    sink = FakeSink()
    rec = make_recorder(sink, max_pending=2)
    for i in range(3):
        rec.record(
            {**JOB, "metadata": {**JOB["metadata"], "uid": f"u{i}"}},
            type="Normal",
            reason="R",
            message="m",
        )
    assert rec.statistics().pending == 2
    assert rec.statistics().dropped_total == 1
    await rec.close()
    assert rec.statistics().created_total == 2


def test_a_flood_of_drops_logs_a_line_per_period_with_the_count() -> None:
    """A burst of thousands of jobs sheds thousands of Events: one warning per period says how
    many, instead of a line each (the scale bench logged 22,732 of them)."""
    clock = FakeClock()
    rec = make_recorder(FakeSink(), max_pending=10, clock=clock)

    def record(first: int, count: int) -> None:
        for i in range(first, first + count):
            job = {**JOB, "metadata": {**JOB["metadata"], "uid": f"u{i}", "name": f"j{i}"}}
            rec.record(job, type="Normal", reason="SuccessfulCreatePod", message="m")

    with structlog.testing.capture_logs() as logs:
        record(0, 1_000)  # 10 buffered, 990 dropped
        clock.now += DROP_LOG_SECONDS
        record(1_000, 5)
    drops = [e for e in logs if e["event"] == "event buffer full; events dropped"]
    assert [(e["log_level"], e["dropped"], e["dropped_total"]) for e in drops] == [
        ("warning", 1, 1),  # the first drop is said at once
        ("warning", 989 + 1, 991),  # the next line, a period later, counts what came between
    ]
    assert drops[-1]["last_event"].startswith("j1000.")
    assert rec.statistics().dropped_total == 995


def test_what_became_of_the_events_is_a_metric() -> None:
    metrics = Metrics()
    sink = FakeSink()
    rec = EventRecorder(
        sink,
        component="tf-operator",
        host="pod-1",
        wall=lambda: WALL,
        max_pending=1,
        metrics=metrics,
    )
    for i in range(3):
        job = {**JOB, "metadata": {**JOB["metadata"], "uid": f"u{i}"}}
        rec.record(job, type="Normal", reason="R", message="m")
    text = generate_latest(metrics.registry).decode()
    assert 'jobcontroller_events_total{outcome="dropped"} 2.0' in text
    assert 'jobcontroller_events_total{outcome="created"} 0.0' in text


async def test_a_full_buffer_drops_an_ordinary_event_for_a_jobs_end() -> None:
    sink = FakeSink()
    rec = make_recorder(sink, max_pending=2)

    def record(i: int, reason: str) -> None:
        job = {**JOB, "metadata": {**JOB["metadata"], "uid": f"u{i}"}}
        rec.record(job, type="Normal", reason=reason, message="m")

    record(0, "SuccessfulCreatePod")
    record(1, "TFJobRestarting")
    record(2, "TFJobSucceeded")  # the created-pod Event makes room
    record(3, "TFJobFailed")  # nothing ordinary left: this one is dropped
    assert rec.statistics().pending == 2
    assert rec.statistics().dropped_total == 2
    await rec.close()
    assert sorted(e["reason"] for e in sink.events.values()) == [
        "TFJobRestarting",
        "TFJobSucceeded",
    ]


async def test_api_failures_never_reach_the_caller() -> None:
    sink = FakeSink()
    sink.fail_with = ApiError(status=403, reason="Forbidden", message="namespace terminating")
    rec = make_recorder(sink)
    rec.record(JOB, type="Normal", reason="R", message="m")
    rec.record({"metadata": {}}, type="Normal", reason="R", message="no kind")
    rec.record(None, type="Normal", reason="R", message="not even a dict")  # type: ignore[arg-type]
    await rec.close()
    stats = rec.statistics()
    assert stats.failed_total == 1
    assert stats.dropped_total == 1
    assert stats.created_total == 0


async def test_spam_filtered_events_are_not_sent() -> None:
    sink = FakeSink()
    rec = make_recorder(sink, settings=CorrelatorSettings(burst=3))
    for i in range(6):
        rec.record(JOB, type="Normal", reason="R", message=f"m{i}")
    await rec.close()
    assert len(sink.calls) == 3
    assert rec.statistics().filtered_total == 3


async def test_long_messages_are_truncated() -> None:
    sink = FakeSink()
    rec = make_recorder(sink)
    rec.record(JOB, type="Normal", reason="R", message="x" * 5000)
    await rec.close()
    message = sink.calls[0][2]["message"]
    assert len(message) == 1024 and message.endswith("...")


async def test_record_after_close_is_dropped() -> None:
    sink = FakeSink()
    rec = make_recorder(sink)
    await rec.close()
    rec.record(JOB, type="Normal", reason="R", message="late")
    await settle()
    assert sink.calls == []
    assert rec.statistics().dropped_total == 1


@pytest.mark.parametrize("status", [500, 422])
async def test_sender_keeps_going_after_a_failure(status: int) -> None:
    sink = FakeSink()
    real_create = sink.create

    async def create_failing_a(resource: Resource, body: dict[str, Any], **kw: Any) -> Any:
        if body["reason"] == "A":
            sink.calls.append(("create", body["metadata"]["name"], body))
            raise ApiError(status=status, reason="x")
        return await real_create(resource, body, **kw)

    sink.create = create_failing_a  # type: ignore[method-assign]
    rec = make_recorder(sink)
    rec.record(JOB, type="Normal", reason="A", message="m")
    rec.record(JOB, type="Normal", reason="B", message="m")
    await rec.close()
    assert [c[2]["reason"] for c in sink.calls] == ["A", "B"]
    assert [e["reason"] for e in sink.events.values()] == ["B"]
    assert rec.statistics().failed_total == 1


async def test_events_are_dropped_while_the_gate_says_no() -> None:
    """The manager sets the gate to the elector's ``holds_lease``: a replica that lost the
    Lease, or woke from a freeze past its renew deadline, writes no Event."""
    sink = FakeSink()
    allowed = [True]
    rec = make_recorder(sink, may_send=lambda: allowed[0])
    rec.record(JOB, type="Normal", reason="First", message="m")
    await settle()
    allowed[0] = False
    rec.record(JOB, type="Normal", reason="Second", message="m")
    await rec.close()
    assert [body["reason"] for _, _, body in sink.calls] == ["First"]
    assert rec.statistics().dropped_total == 1


def test_an_events_time_is_utc_in_whole_seconds_as_go_writes_it() -> None:
    """metav1.Time's form: UTC, whole seconds, a ``Z``, a four-digit year (Go's ``0001``)."""
    c, clock = EventCorrelator(), FakeClock()
    east = datetime(2025, 1, 2, 5, 4, 5, 999_999, tzinfo=timezone(timedelta(hours=2)))
    seen = c.observe(ref=REF, type="Normal", reason="R", message="m", now=clock(), wall=east)
    assert seen.first_timestamp == "2025-01-02T03:04:05Z"
    early = datetime(9, 1, 1, tzinfo=UTC)
    seen = c.observe(ref=REF, type="Normal", reason="S", message="m", now=clock(), wall=early)
    assert seen.first_timestamp == "0009-01-01T00:00:00Z"
