"""Manager worker semantics with in-memory controllers (no informers, no API server)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest
import structlog
import structlog.testing
from prometheus_client import CollectorRegistry

from jobcontroller.runtime.events import EventRecorder
from jobcontroller.runtime.kube import ApiError, KubeApi
from jobcontroller.runtime.leader import LeaderElector, LeadershipLost
from jobcontroller.runtime.manager import Controller, Manager
from jobcontroller.runtime.metrics import Metrics
from jobcontroller.runtime.workqueue import WorkQueue

Reconcile = Callable[[str], Awaitable[float | None]]


class FakeController:
    def __init__(self, reconcile: Reconcile, *, name: str = "fake-controller") -> None:
        self.name = name
        self._reconcile = reconcile
        self.queue: WorkQueue[str] | None = None
        self.calls: list[str] = []
        self.contexts: list[dict[str, Any]] = []

    def setup(self, manager: Manager, queue: WorkQueue[str]) -> None:
        self.queue = queue

    async def reconcile(self, key: str) -> float | None:
        self.calls.append(key)
        self.contexts.append(structlog.contextvars.get_contextvars())
        return await self._reconcile(key)


class FakeElector:
    """Stands in for LeaderElector: acquire waits for ``grant``, hold raises on ``revoke``."""

    def __init__(self, log: list[str]) -> None:
        self.grant = asyncio.Event()
        self.revoke = asyncio.Event()
        self.is_leader = False
        self.log = log
        self.failure: Exception = LeadershipLost("revoked")

    async def acquire(self) -> None:
        await self.grant.wait()
        self.is_leader = True
        self.log.append("acquired")

    async def hold(self) -> None:
        await self.revoke.wait()
        if isinstance(self.failure, LeadershipLost):
            self.is_leader = False
        raise self.failure

    async def release(self) -> None:
        self.is_leader = False
        self.log.append("released")

    def holds_lease(self) -> bool:
        return self.is_leader


class NullSink:
    async def create(self, *a: Any, **kw: Any) -> dict[str, Any]:
        return {}

    async def merge_patch(self, *a: Any, **kw: Any) -> dict[str, Any]:
        return {}


def make_manager(
    *controllers: FakeController,
    workers: int = 4,
    elector: FakeElector | None = None,
    rejoin_election: bool = True,
) -> tuple[Manager, CollectorRegistry]:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    manager = Manager(
        cast(KubeApi, None),  # never used: no informers, and events go to the sink
        component="test",
        metrics=metrics,
        workers=workers,
        elector=cast(LeaderElector, elector),
        events=EventRecorder(NullSink(), component="test"),
        rejoin_election=rejoin_election,
    )
    for c in controllers:
        manager.add(cast(Controller, c))
    return manager, registry


def reconciles(registry: CollectorRegistry, result: str) -> float:
    labels = {"controller": "fake-controller", "result": result}
    return registry.get_sample_value("controller_runtime_reconcile_total", labels) or 0.0


async def until(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(5):
        while not predicate():  # noqa: ASYNC110 - polls state spread over several objects
            await asyncio.sleep(0.005)


async def stop(manager: Manager, running: asyncio.Task[None]) -> None:
    manager.stop()
    await asyncio.wait_for(running, timeout=5)


async def test_a_key_is_reconciled_with_its_log_context_and_counted() -> None:
    async def ok(key: str) -> None:
        return None

    c = FakeController(ok)
    manager, registry = make_manager(c)
    running = asyncio.create_task(manager.run())
    assert c.queue is not None
    c.queue.add("ns/a")
    c.queue.add("b")
    await until(lambda: reconciles(registry, "success") == 2)
    await stop(manager, running)
    assert sorted(c.calls) == ["b", "ns/a"]
    by_key = {ctx["key"]: ctx for ctx in c.contexts}
    assert by_key["ns/a"]["controller"] == "fake-controller"
    assert (by_key["ns/a"]["namespace"], by_key["ns/a"]["name"]) == ("ns", "a")
    assert by_key["b"]["namespace"] is None
    assert by_key["ns/a"]["reconcile_id"] != by_key["b"]["reconcile_id"]
    assert structlog.contextvars.get_contextvars() == {}  # nothing leaked into our context
    assert (
        registry.get_sample_value(
            "controller_runtime_reconcile_time_seconds_count", {"controller": "fake-controller"}
        )
        == 2
    )


async def test_errors_are_retried_with_backoff_and_forgotten_after_success() -> None:
    failures = 3

    async def flaky(key: str) -> None:
        nonlocal failures
        if failures:
            failures -= 1
            raise ApiError(status=409, reason="Conflict") if failures == 2 else RuntimeError("x")
        return

    c = FakeController(flaky)
    manager, registry = make_manager(c)
    running = asyncio.create_task(manager.run())
    assert c.queue is not None
    c.queue.add("ns/a")
    await until(lambda: reconciles(registry, "success") == 1)
    assert c.queue.num_requeues("ns/a") == 0
    await stop(manager, running)
    assert c.calls == ["ns/a"] * 4
    assert reconciles(registry, "error") == 3
    assert (
        registry.get_sample_value(
            "controller_runtime_reconcile_errors_total", {"controller": "fake-controller"}
        )
        == 3
    )


async def test_a_returned_delay_brings_the_key_back() -> None:
    answers: list[float | None] = [0.05, 0, None]

    async def later(key: str) -> float | None:
        return answers.pop(0)

    c = FakeController(later)
    manager, registry = make_manager(c)
    running = asyncio.create_task(manager.run())
    assert c.queue is not None
    c.queue.add("ns/a")
    await until(lambda: reconciles(registry, "success") == 1)
    await stop(manager, running)
    assert c.calls == ["ns/a"] * 3
    assert reconciles(registry, "requeue_after") == 1
    assert reconciles(registry, "requeue") == 1


async def test_workers_run_different_keys_concurrently_but_never_one_key_twice() -> None:
    in_flight: set[str] = set()
    overlap: list[str] = []
    all_four = asyncio.Event()

    async def slow(key: str) -> None:
        if key in in_flight:
            overlap.append(key)
        in_flight.add(key)
        if len(in_flight) == 4:
            all_four.set()
        await asyncio.wait_for(all_four.wait(), timeout=5)  # needs 4 concurrent workers
        await asyncio.sleep(0.01)
        in_flight.discard(key)
        return

    c = FakeController(slow)
    manager, registry = make_manager(c, workers=4)
    running = asyncio.create_task(manager.run())
    assert c.queue is not None
    for k in "abcd":
        c.queue.add(f"ns/{k}")
    await until(lambda: len(in_flight) == 4)
    for _ in range(3):
        c.queue.add("ns/a")  # while ns/a is being reconciled
    await until(lambda: reconciles(registry, "success") == 5)
    await stop(manager, running)
    assert overlap == []
    assert c.calls.count("ns/a") == 2  # the three adds during the reconcile coalesced into one


async def test_stop_drains_in_flight_reconciles_and_drops_queued_keys() -> None:
    started, release = asyncio.Event(), asyncio.Event()
    finished: list[str] = []

    async def blocking(key: str) -> None:
        started.set()
        await release.wait()
        finished.append(key)
        return

    c = FakeController(blocking)
    manager, _ = make_manager(c, workers=1)
    running = asyncio.create_task(manager.run())
    assert c.queue is not None
    c.queue.add("ns/a")
    await asyncio.wait_for(started.wait(), timeout=5)
    c.queue.add("ns/b")
    manager.stop()
    await asyncio.sleep(0.05)
    assert not running.done()  # waiting for the in-flight reconcile
    release.set()
    await asyncio.wait_for(running, timeout=5)
    assert finished == ["ns/a"]
    assert c.calls == ["ns/a"]


async def test_forced_stop_cancels_in_flight_reconciles() -> None:
    started = asyncio.Event()
    cancelled: list[str] = []

    async def forever(key: str) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(key)
            raise
        return

    c = FakeController(forever)
    manager, _ = make_manager(c, workers=1)
    running = asyncio.create_task(manager.run())
    assert c.queue is not None
    c.queue.add("ns/a")
    await asyncio.wait_for(started.wait(), timeout=5)
    manager.stop()
    await asyncio.sleep(0.01)
    manager.stop(force=True)
    await asyncio.wait_for(running, timeout=5)
    assert cancelled == ["ns/a"]


async def test_workers_start_only_with_the_lease_and_release_follows_the_drain() -> None:
    events: list[str] = []

    async def record(key: str) -> None:
        events.append(f"reconcile {key}")
        return

    c = FakeController(record)
    elector = FakeElector(events)
    manager, _ = make_manager(c, elector=elector)
    running = asyncio.create_task(manager.run())
    assert c.queue is not None
    c.queue.add("ns/a")
    await until(lambda: manager.synced)
    await asyncio.sleep(0.05)
    assert c.calls == []  # synced but not leader: caches warm, no reconciles
    assert manager.readiness() == {"synced": True, "leader": False, "informers": {}}
    elector.grant.set()
    await until(lambda: c.calls == ["ns/a"])
    assert manager.readiness()["leader"] is True
    await stop(manager, running)
    assert events == ["acquired", "reconcile ns/a", "released"]


async def test_losing_the_lease_cancels_workers_at_once_and_raises() -> None:
    started = asyncio.Event()
    cancelled: list[str] = []
    events: list[str] = []

    async def forever(key: str) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(key)
            raise
        return

    c = FakeController(forever)
    elector = FakeElector(events)
    elector.grant.set()
    manager, _ = make_manager(c, elector=elector, rejoin_election=False)
    manager.drain_timeout = 60  # must not be waited for
    running = asyncio.create_task(manager.run())
    assert c.queue is not None
    c.queue.add("ns/a")
    await asyncio.wait_for(started.wait(), timeout=5)
    elector.revoke.set()
    with pytest.raises(LeadershipLost):
        await asyncio.wait_for(running, timeout=5)
    assert cancelled == ["ns/a"]
    assert events == ["acquired"]  # not released: it is not ours any more
    assert not manager.healthy


async def test_losing_the_lease_while_draining_cancels_reconciles_and_raises() -> None:
    # The drain after SIGTERM may outlast the lease; once renewing stops, another replica may
    # take over within lease_duration - renew_deadline, so the drain must not go on.
    started = asyncio.Event()
    cancelled: list[str] = []
    events: list[str] = []

    async def forever(key: str) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(key)
            raise
        return

    c = FakeController(forever)
    elector = FakeElector(events)
    elector.grant.set()
    manager, _ = make_manager(c, elector=elector, rejoin_election=False)
    manager.drain_timeout = 60  # must not be waited for
    running = asyncio.create_task(manager.run())
    assert c.queue is not None
    c.queue.add("ns/a")
    await asyncio.wait_for(started.wait(), timeout=5)
    manager.stop()
    await asyncio.sleep(0.05)
    assert not running.done()  # draining
    elector.revoke.set()
    with pytest.raises(LeadershipLost):
        await asyncio.wait_for(running, timeout=5)
    assert cancelled == ["ns/a"]
    assert events == ["acquired"]  # not released
    assert not manager.healthy


async def test_a_renew_task_that_crashes_counts_as_a_lost_lease() -> None:
    # Nobody renews any more, so the lease will expire: no drain, no release.
    started = asyncio.Event()
    cancelled: list[str] = []
    events: list[str] = []

    async def forever(key: str) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(key)
            raise
        return

    c = FakeController(forever)
    elector = FakeElector(events)
    elector.grant.set()
    elector.failure = RuntimeError("renew crashed")
    manager, _ = make_manager(c, elector=elector)
    manager.drain_timeout = 60  # must not be waited for
    running = asyncio.create_task(manager.run())
    assert c.queue is not None
    c.queue.add("ns/a")
    await asyncio.wait_for(started.wait(), timeout=5)
    elector.revoke.set()
    with pytest.raises(RuntimeError, match="renew crashed"):
        await asyncio.wait_for(running, timeout=5)
    assert cancelled == ["ns/a"]
    assert events == ["acquired"]


async def test_stop_before_run_returns_promptly() -> None:
    async def ok(key: str) -> None:
        return None

    manager, _ = make_manager(FakeController(ok))
    manager.stop()
    await asyncio.wait_for(manager.run(), timeout=5)


def test_controller_names_must_be_unique() -> None:
    async def ok(key: str) -> None:
        return None

    with pytest.raises(ValueError, match="already"):
        make_manager(FakeController(ok), FakeController(ok))


class EventLog:
    """An event sink that notes each write in the shared log."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.hold: set[str] = set()

    async def create(self, resource: Any, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if body["reason"] in self.hold:
            await asyncio.Event().wait()
        self.log.append(f"event {body['reason']}")
        return body

    async def merge_patch(self, *a: Any, **kw: Any) -> dict[str, Any]:
        return {}


JOB = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "uid": "u"}}


def _manager_with_event_log(
    c: FakeController, log: list[str], elector: FakeElector
) -> tuple[Manager, EventRecorder]:
    recorder = EventRecorder(EventLog(log), component="test")
    manager = Manager(
        cast(KubeApi, None),
        component="test",
        elector=cast(LeaderElector, elector),
        events=recorder,
        rejoin_election=False,
    )
    manager.add(cast(Controller, c))
    return manager, recorder


async def test_a_graceful_stop_sends_pending_events_before_releasing_the_lease() -> None:
    log: list[str] = []
    recorder_box: list[EventRecorder] = []

    async def emit(key: str) -> None:
        recorder_box[0].record(JOB, type="Normal", reason="Done", message="m")

    c = FakeController(emit)
    elector = FakeElector(log)
    elector.grant.set()
    manager, recorder = _manager_with_event_log(c, log, elector)
    recorder_box.append(recorder)
    running = asyncio.create_task(manager.run())
    assert c.queue is not None
    c.queue.add("ns/a")
    await until(lambda: c.calls == ["ns/a"])
    await stop(manager, running)
    assert log == ["acquired", "event Done", "released"]


async def test_a_replica_that_lost_the_lease_sends_no_more_events() -> None:
    log: list[str] = []
    recorder_box: list[EventRecorder] = []
    started = asyncio.Event()

    async def emit_and_hang(key: str) -> None:
        recorder_box[0].record(JOB, type="Normal", reason="Slow", message="m")
        recorder_box[0].record(JOB, type="Normal", reason="Late", message="m")
        started.set()
        await asyncio.Event().wait()

    c = FakeController(emit_and_hang)
    elector = FakeElector(log)
    elector.grant.set()
    manager, recorder = _manager_with_event_log(c, log, elector)
    recorder_box.append(recorder)
    sink = cast(EventLog, recorder._api)
    sink.hold = {"Slow"}  # that write hangs, so "Late" is still pending when the lease goes
    running = asyncio.create_task(manager.run())
    assert c.queue is not None
    c.queue.add("ns/a")
    await asyncio.wait_for(started.wait(), timeout=5)
    elector.revoke.set()
    with pytest.raises(LeadershipLost):
        await asyncio.wait_for(running, timeout=5)
    assert log == ["acquired"]
    assert recorder.statistics().dropped_total >= 1


async def test_an_unreachable_api_server_never_delays_a_key_past_the_cap() -> None:
    """However many times a key failed while the server was away, it is tried again within a
    few seconds (client-go's per-key backoff would have grown to minutes)."""

    async def unreachable(key: str) -> None:
        raise ConnectionRefusedError("connect failed")

    c = FakeController(unreachable)
    manager, registry = make_manager(c)
    running = asyncio.create_task(manager.run())
    assert c.queue is not None
    # Twenty earlier failures: the limiter alone would wait 5 ms * 2**20, about 87 minutes.
    for _ in range(20):
        c.queue._limiter.when("ns/a")
    c.queue.add("ns/a")
    await until(lambda: reconciles(registry, "error") == 1)
    waiting = c.queue._waiting["ns/a"]
    assert waiting[0] - asyncio.get_running_loop().time() <= 5.0
    await stop(manager, running)


async def test_losing_the_lease_stands_by_with_warm_caches_and_rejoins_the_election() -> None:
    log: list[str] = []
    started = asyncio.Event()
    cancelled: list[str] = []
    calls = 0

    async def first_call_hangs(key: str) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(key)
                raise

    c = FakeController(first_call_hangs)
    elector = FakeElector(log)
    elector.grant.set()
    manager, _ = make_manager(c, elector=elector)
    manager.drain_timeout = 60  # must not be waited for
    running = asyncio.create_task(manager.run())
    assert c.queue is not None
    c.queue.add("ns/a")
    await asyncio.wait_for(started.wait(), timeout=5)
    elector.grant.clear()  # someone else holds it now: the next acquire waits
    elector.revoke.set()
    await until(lambda: cancelled == ["ns/a"])
    assert not running.done()  # standing by, not exiting
    assert manager.readiness()["leader"] is False
    assert log == ["acquired"]  # and not released: it was not ours any more
    elector.revoke.clear()
    elector.grant.set()
    await until(lambda: log.count("acquired") == 2)
    c.queue.add("ns/a")
    await until(lambda: calls == 2)
    await stop(manager, running)
    assert log == ["acquired", "acquired", "released"]


@pytest.mark.parametrize(
    ("error", "level", "traceback"),
    [
        (ConnectionRefusedError("connect failed"), "warning", False),
        (ApiError(status=503, reason="ServiceUnavailable"), "warning", False),
        (ApiError(status=422, reason="Invalid"), "error", False),
        (ApiError(status=409, reason="Conflict"), "info", False),
        (KeyError("bug"), "error", True),
    ],
)
def test_failed_reconciles_log_a_traceback_only_for_the_unexpected(
    error: Exception, level: str, traceback: bool
) -> None:
    """A transient connection error is a warning with the error, not an ERROR with a stack
    trace on every failed reconcile of every job while the API server is away."""
    with structlog.testing.capture_logs() as logs:
        Manager._log_failure(error, retries=3)
    [entry] = logs
    assert entry["log_level"] == level
    assert ("exc_info" in entry) is traceback


async def test_a_service_runs_on_every_replica_until_the_drain_is_done() -> None:
    """A framework's endpoint (TrainJob progress) serves while the replica stands by for the
    Lease too, and is stopped only after the in-flight reconciles drained."""
    log: list[str] = []
    release = asyncio.Event()

    async def slow(key: str) -> None:
        await release.wait()
        log.append(f"reconciled {key}")

    async def service() -> None:
        log.append("service started")
        try:
            await asyncio.Event().wait()
        finally:
            log.append("service stopped")

    controller = FakeController(slow)
    elector = FakeElector(log)
    manager, _ = make_manager(controller, elector=elector)
    manager.add_service("endpoint", service)
    running = asyncio.create_task(manager.run())
    await until(lambda: "service started" in log)
    assert "acquired" not in log  # serving before (and without) the Lease
    elector.grant.set()
    await until(lambda: "acquired" in log)
    assert controller.queue is not None
    controller.queue.add("ns/a")
    await until(lambda: controller.calls == ["ns/a"])
    manager.stop()
    await asyncio.sleep(0.05)
    assert "service stopped" not in log  # still draining
    release.set()
    await asyncio.wait_for(running, timeout=5)
    assert log.index("reconciled ns/a") < log.index("service stopped")


async def test_a_service_that_dies_is_fatal() -> None:
    async def ok(key: str) -> None:
        return None

    async def broken() -> None:
        raise OSError("address already in use")

    manager, _ = make_manager(FakeController(ok))
    manager.add_service("endpoint", broken)
    with pytest.raises(OSError, match="address already in use"):
        await asyncio.wait_for(manager.run(), timeout=5)
    assert not manager.healthy
