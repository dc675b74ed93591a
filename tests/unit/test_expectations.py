"""Expectations: the gate that keeps a reconcile from acting on a cache that lags its own writes."""

from __future__ import annotations

import pytest
import vtime

from jobcontroller.runtime.expectations import Expectations

PODS = "default/mnist/worker/pods"
SERVICES = "default/mnist/worker/services"


@pytest.fixture
def clock() -> vtime.FakeClock:
    return vtime.FakeClock()


@pytest.fixture
def exp(clock: vtime.FakeClock) -> Expectations:
    return Expectations(clock=clock)


def test_no_record_is_satisfied(exp: Expectations) -> None:
    assert exp.satisfied(PODS)
    assert exp.pending(PODS) == (0, 0)


def test_creations_gate_until_each_is_observed(exp: Expectations) -> None:
    exp.expect_creations(PODS, 2)
    assert not exp.satisfied(PODS)
    exp.creation_observed(PODS)
    assert not exp.satisfied(PODS)
    exp.creation_observed(PODS)
    assert exp.satisfied(PODS)
    assert len(exp) == 0


def test_deletions_and_creations_both_count(exp: Expectations) -> None:
    exp.expect_creations(PODS, 1)
    exp.expect_deletions(PODS, 1)
    exp.creation_observed(PODS)
    assert not exp.satisfied(PODS)
    assert exp.pending(PODS) == (0, 1)
    exp.deletion_observed(PODS)
    assert exp.satisfied(PODS)


def test_expecting_again_adds_to_what_is_pending(exp: Expectations) -> None:
    exp.expect_creations(PODS, 2)
    exp.expect_creations(PODS, 1)
    assert exp.pending(PODS) == (3, 0)


def test_keys_are_independent(exp: Expectations) -> None:
    exp.expect_creations(PODS, 1)
    assert exp.satisfied(SERVICES)
    exp.creation_observed(SERVICES)
    assert exp.pending(PODS) == (1, 0)


def test_failed_create_is_lowered_so_the_job_does_not_stall(exp: Expectations) -> None:
    """kubeflow #1306: a create that failed at the API must not wait five minutes for an event."""
    exp.expect_creations(PODS, 3)
    exp.lower_creations(PODS, 2)  # two creates were rejected
    assert not exp.satisfied(PODS)
    exp.creation_observed(PODS)
    assert exp.satisfied(PODS)
    assert exp.statistics().lowered_total == 2


def test_failed_delete_is_lowered(exp: Expectations) -> None:
    exp.expect_deletions(PODS, 1)
    exp.lower_deletions(PODS)
    assert exp.satisfied(PODS)


def test_expires_after_timeout(clock: vtime.FakeClock, exp: Expectations) -> None:
    exp.expect_creations(PODS, 1)
    clock.advance(299.9)
    assert not exp.satisfied(PODS)
    clock.advance(0.1)
    assert exp.satisfied(PODS)
    assert exp.pending(PODS) == (0, 0)
    assert exp.statistics().expired_total == 1


def test_custom_timeout(clock: vtime.FakeClock) -> None:
    exp = Expectations(timeout=10.0, clock=clock)
    exp.expect_deletions(PODS, 1)
    clock.advance(10.0)
    assert exp.satisfied(PODS)


def test_new_expectation_restarts_the_expiry(clock: vtime.FakeClock, exp: Expectations) -> None:
    exp.expect_creations(PODS, 1)
    clock.advance(200)
    exp.expect_creations(PODS, 1)
    clock.advance(150)  # 350 s after the first, 150 s after the latest
    assert not exp.satisfied(PODS)
    clock.advance(150)
    assert exp.satisfied(PODS)


def test_expired_debt_is_not_carried_into_new_writes(
    clock: vtime.FakeClock, exp: Expectations
) -> None:
    exp.expect_creations(PODS, 2)  # both events get lost
    clock.advance(301)
    exp.expect_creations(PODS, 1)
    assert exp.pending(PODS) == (1, 0)
    exp.creation_observed(PODS)
    assert exp.satisfied(PODS)
    assert exp.statistics().expired_total == 1


def test_unexpected_observations_do_not_prepay(exp: Expectations) -> None:
    exp.creation_observed(PODS)  # e.g. an adopted pod
    exp.expect_creations(PODS, 1)
    assert not exp.satisfied(PODS)
    exp.creation_observed(PODS)
    exp.creation_observed(PODS)  # duplicate delivery
    assert exp.satisfied(PODS)
    exp.expect_creations(PODS, 1)
    assert not exp.satisfied(PODS)


def test_delete_forgets_the_key(exp: Expectations) -> None:
    exp.expect_creations(PODS, 5)
    exp.delete(PODS)
    assert exp.satisfied(PODS)
    exp.delete(PODS)  # idempotent


def test_zero_is_a_no_op_and_negative_is_an_error(exp: Expectations) -> None:
    exp.expect_creations(PODS, 0)
    assert len(exp) == 0
    with pytest.raises(ValueError):
        exp.expect_deletions(PODS, -1)
    with pytest.raises(ValueError):
        exp.lower_creations(PODS, -1)
    with pytest.raises(ValueError):
        Expectations(timeout=0)


def test_statistics(clock: vtime.FakeClock, exp: Expectations) -> None:
    exp.expect_creations(PODS, 3)
    clock.advance(20)
    exp.expect_deletions(SERVICES, 2)
    clock.advance(5)
    exp.creation_observed(PODS)
    exp.deletion_observed(SERVICES)
    stats = exp.statistics()
    assert stats.pending_keys == 2
    assert stats.creations_pending == 2
    assert stats.deletions_pending == 1
    assert stats.oldest_pending_seconds == pytest.approx(25)
    assert stats.creations_observed_total == 1
    assert stats.deletions_observed_total == 1
    assert (stats.lowered_total, stats.expired_total) == (0, 0)
