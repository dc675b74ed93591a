"""LeaderElector against an in-memory Lease store with optimistic concurrency and a fake clock."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from jobcontroller.runtime.http1 import ConnectFailed, Disconnected
from jobcontroller.runtime.kube import LEASES, ApiError, KubeApi, Resource
from jobcontroller.runtime.leader import LeaderElectionConfig, LeaderElector, LeadershipLost
from jobcontroller.runtime.metrics import Metrics


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeLeases:
    """Leases in a dict; PUT needs the current resourceVersion, like the API server."""

    def __init__(self) -> None:
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}
        self.rv = 0
        self.fail_writes: Exception | None = None
        self.write_attempts = 0
        self.reached: dict[int, asyncio.Event] = {}

    def _bump(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        if self.rv in self.reached:
            self.reached[self.rv].set()
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.leases[(obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj
        return copy.deepcopy(obj)

    async def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> Any:
        assert resource is LEASES and namespace is not None
        try:
            return copy.deepcopy(self.leases[(namespace, name)])
        except KeyError:
            raise ApiError(status=404, reason="NotFound") from None

    async def create(self, resource: Resource, body: dict[str, Any], *, namespace: str) -> Any:
        self.write_attempts += 1
        if self.fail_writes is not None:
            raise self.fail_writes
        if (namespace, body["metadata"]["name"]) in self.leases:
            raise ApiError(status=409, reason="AlreadyExists")
        return self._bump(body)

    async def replace(self, resource: Resource, body: dict[str, Any], *, namespace: str) -> Any:
        self.write_attempts += 1
        if self.fail_writes is not None:
            raise self.fail_writes
        current = self.leases[(namespace, body["metadata"]["name"])]
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise ApiError(status=409, reason="Conflict")
        return self._bump(body)

    def spec(self) -> dict[str, Any]:
        return cast(dict[str, Any], self.leases[("ns", "op")]["spec"])


def elector(
    leases: FakeLeases,
    identity: str,
    clock: Callable[[], float],
    metrics: Metrics | None = None,
    **timing: float,
) -> LeaderElector:
    config = LeaderElectionConfig(namespace="ns", name="op", identity=identity, **timing)
    return LeaderElector(cast(KubeApi, leases), config, clock=clock, metrics=metrics)


async def test_first_candidate_creates_the_lease_and_the_second_waits() -> None:
    leases, clock = FakeLeases(), FakeClock()
    a, b = elector(leases, "a", clock), elector(leases, "b", clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    assert a.is_leader and not b.is_leader
    spec = leases.spec()
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert spec["renewTime"].endswith("Z") and "." in spec["renewTime"]


async def test_takeover_only_after_the_lease_stopped_changing_for_its_duration() -> None:
    leases, clock = FakeLeases(), FakeClock()
    a, b = elector(leases, "a", clock), elector(leases, "b", clock)
    await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()  # b observes the record now
    clock.now += 14.9
    assert not await b.try_acquire_or_renew()
    clock.now += 0.2
    assert await b.try_acquire_or_renew()
    spec = leases.spec()
    assert spec["holderIdentity"] == "b"
    assert spec["leaseTransitions"] == 1
    # The old leader's next renew conflicts, re-reads and sees b.
    assert not await a.try_acquire_or_renew()


async def test_renewals_keep_the_lease_however_long_it_is_held() -> None:
    leases, clock = FakeLeases(), FakeClock()
    a, b = elector(leases, "a", clock), elector(leases, "b", clock)
    await a.try_acquire_or_renew()
    for _ in range(20):  # 20 * 10 s, far beyond one lease duration in total
        clock.now += 10
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()
    assert leases.spec()["leaseTransitions"] == 0


async def test_expiry_is_judged_from_local_observation_not_the_remote_renew_time() -> None:
    leases, clock = FakeLeases(), FakeClock()
    a = elector(leases, "a", clock)
    await a.try_acquire_or_renew()
    leases.spec()["renewTime"] = "2000-01-01T00:00:00.000000Z"  # a skewed clock wrote this
    latecomer = elector(leases, "b", clock)
    assert not await latecomer.try_acquire_or_renew()


async def test_release_lets_a_successor_take_over_at_once() -> None:
    leases, clock = FakeLeases(), FakeClock()
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    a, b = elector(leases, "a", clock, metrics=metrics), elector(leases, "b", clock)
    await a.try_acquire_or_renew()
    assert registry.get_sample_value("leader_election_master_status", {"name": "op"}) == 1
    assert not await b.try_acquire_or_renew()
    await a.release()
    assert not a.is_leader
    assert registry.get_sample_value("leader_election_master_status", {"name": "op"}) == 0
    assert leases.spec()["holderIdentity"] == ""
    assert await b.try_acquire_or_renew()  # no waiting for expiry
    assert leases.spec()["holderIdentity"] == "b"
    assert leases.spec()["leaseTransitions"] == 1


async def test_simultaneous_candidates_for_an_expired_lease_get_one_winner() -> None:
    leases, clock = FakeLeases(), FakeClock()
    old = elector(leases, "old", clock)
    await old.try_acquire_or_renew()
    b, c = elector(leases, "b", clock), elector(leases, "c", clock)
    await b.try_acquire_or_renew()
    await c.try_acquire_or_renew()
    clock.now += 16
    results = await asyncio.gather(b.try_acquire_or_renew(), c.try_acquire_or_renew())
    assert sorted(results) == [False, True]
    assert leases.spec()["leaseTransitions"] == 1


async def test_hold_raises_when_renewals_fail_past_the_deadline() -> None:
    leases = FakeLeases()
    loop_time = asyncio.get_running_loop().time
    a = elector(leases, "a", loop_time, lease_duration=0.6, renew_deadline=0.4, retry_period=0.1)
    assert await a.try_acquire_or_renew()
    leases.fail_writes = ApiError(status=500, reason="InternalError")
    with pytest.raises(LeadershipLost, match="deadline"):
        await asyncio.wait_for(a.hold(), timeout=5)
    assert not a.is_leader


async def test_hold_survives_transport_errors_until_the_deadline() -> None:
    # A transport failure must not crash the renew loop (the manager would then drain workers
    # while nobody renews).
    leases = FakeLeases()
    loop_time = asyncio.get_running_loop().time
    a = elector(leases, "a", loop_time, lease_duration=0.6, renew_deadline=0.4, retry_period=0.1)
    assert await a.try_acquire_or_renew()
    leases.fail_writes = Disconnected("the API server closed the connection: EOF")
    with pytest.raises(LeadershipLost, match="deadline"):
        await asyncio.wait_for(a.hold(), timeout=5)
    assert leases.write_attempts > 2  # it kept trying


async def test_acquire_retries_after_transport_errors() -> None:
    leases = FakeLeases()
    loop_time = asyncio.get_running_loop().time
    a = elector(leases, "a", loop_time, lease_duration=0.6, renew_deadline=0.4, retry_period=0.05)
    leases.fail_writes = ConnectFailed("connecting to 10.0.0.1:6443: timed out")
    acquiring = asyncio.create_task(a.acquire())
    async with asyncio.timeout(5):
        while leases.write_attempts < 2:
            assert not acquiring.done(), acquiring.exception()
            await asyncio.sleep(0.01)
    leases.fail_writes = None
    await asyncio.wait_for(acquiring, timeout=5)
    assert a.is_leader


async def test_hold_raises_as_soon_as_another_holder_is_seen() -> None:
    leases = FakeLeases()
    loop_time = asyncio.get_running_loop().time
    a = elector(leases, "a", loop_time, lease_duration=6, renew_deadline=4, retry_period=0.05)
    assert await a.try_acquire_or_renew()
    stolen = leases.leases[("ns", "op")]
    stolen["spec"]["holderIdentity"] = "intruder"
    leases._bump(stolen)
    with pytest.raises(LeadershipLost, match="intruder"):
        await asyncio.wait_for(a.hold(), timeout=2)


async def test_hold_keeps_renewing_while_writes_succeed() -> None:
    leases = FakeLeases()
    loop_time = asyncio.get_running_loop().time
    a = elector(leases, "a", loop_time, lease_duration=6, renew_deadline=4, retry_period=0.02)
    assert await a.try_acquire_or_renew()
    first = leases.spec()["renewTime"]
    rv = leases.rv
    three_renewals = leases.reached[rv + 3] = asyncio.Event()
    holding = asyncio.create_task(a.hold())
    await asyncio.wait_for(three_renewals.wait(), timeout=5)
    holding.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holding
    assert a.is_leader
    assert leases.spec()["holderIdentity"] == "a"
    assert leases.spec()["renewTime"] >= first


@pytest.mark.parametrize(("lease", "renew", "retry"), [(10, 10, 2), (15, 10, 9), (5, 10, 2)])
def test_config_rejects_timings_that_allow_two_leaders(
    lease: float, renew: float, retry: float
) -> None:
    with pytest.raises(ValueError):
        LeaderElectionConfig(
            namespace="ns",
            name="op",
            lease_duration=lease,
            renew_deadline=renew,
            retry_period=retry,
        )


def test_default_identity_is_unique_per_elector() -> None:
    one = LeaderElectionConfig(namespace="ns", name="op")
    two = LeaderElectionConfig(namespace="ns", name="op")
    assert one.identity != two.identity


async def test_a_leader_frozen_past_its_renew_deadline_holds_nothing_when_it_wakes() -> None:
    """SIGSTOP, or a long pause: the renew loop has not run yet, so ``is_leader`` is still
    True, but another replica may hold the lease by now; ``holds_lease`` says no at once."""
    leases = FakeLeases()
    now = [100.0]
    a = elector(leases, "a", lambda: now[0])
    assert await a.try_acquire_or_renew()
    assert a.holds_lease()
    now[0] += 9.9
    assert a.holds_lease()
    now[0] += 0.2  # past the 10 s renew deadline
    assert a.is_leader
    assert not a.holds_lease()
    assert await a.try_acquire_or_renew()  # a renewal makes it hold the lease again
    assert a.holds_lease()
