"""Failed-pod verdicts per restart policy and the backoff ledger kept in job annotations."""

from __future__ import annotations

import pytest

from jobcontroller.api.common import RestartPolicy
from jobcontroller.core import RESTART_COUNT_ANNOTATION, RESTARTED_PODS_ANNOTATION
from jobcontroller.core.restart import (
    FailedPodVerdict,
    RestartLedger,
    failed_pod_verdict,
    past_backoff_limit,
    pod_restart_policy,
)

K, R, F = FailedPodVerdict.KEEP, FailedPodVerdict.RESTART, FailedPodVerdict.FAIL_JOB


@pytest.mark.parametrize(
    ("policy", "code", "may_recreate", "verdict"),
    [
        (RestartPolicy.NEVER, 137, True, K),
        (RestartPolicy.ON_FAILURE, 1, True, R),
        (RestartPolicy.ALWAYS, 1, True, R),
        (RestartPolicy.ON_FAILURE, 1, False, K),
        (RestartPolicy.EXIT_CODE, 137, True, R),
        (RestartPolicy.EXIT_CODE, 0xBEEF, True, R),
        (RestartPolicy.EXIT_CODE, 137, False, K),
        (RestartPolicy.EXIT_CODE, 1, True, F),
        (RestartPolicy.EXIT_CODE, 127, False, F),
        (None, 1, True, K),
    ],
)
def test_verdicts(
    policy: RestartPolicy | None, code: int, may_recreate: bool, verdict: FailedPodVerdict
) -> None:
    assert failed_pod_verdict(policy=policy, exit_code=code, may_recreate=may_recreate) == verdict


def test_pod_restart_policy_maps_exit_code_to_never() -> None:
    assert pod_restart_policy(RestartPolicy.EXIT_CODE) == "Never"
    assert pod_restart_policy(RestartPolicy.ON_FAILURE) == "OnFailure"
    assert pod_restart_policy(None) is None


@pytest.mark.parametrize(
    ("limit", "restarts", "past"), [(0, 0, False), (0, 1, True), (3, 2, False), (3, 3, True)]
)
def test_past_backoff_limit(limit: int, restarts: int, past: bool) -> None:
    assert past_backoff_limit(limit=limit, restarts=restarts) is past


def failed(name: str, uid: str, restarts: int = 0) -> dict[str, object]:
    return {
        "metadata": {"name": name, "uid": uid},
        "status": {"containerStatuses": [{"name": "c", "restartCount": restarts}]},
    }


def test_ledger_records_each_pod_once() -> None:
    ledger = RestartLedger().record([failed("j-worker-0", "a", restarts=2)])
    assert ledger.count == 3
    again = ledger.record([failed("j-worker-0", "a", restarts=2), failed("j-worker-1", "b")])
    assert again.count == 4
    assert again.recorded(failed("j-worker-0", "a"))
    assert not again.recorded(failed("j-worker-0", "c"))


def test_ledger_live_restarts_skip_recorded_pods() -> None:
    ledger = RestartLedger().record([failed("j-worker-0", "a", restarts=2)])
    pods = [failed("j-worker-0", "a", restarts=2), failed("j-worker-1", "b", restarts=5)]
    assert ledger.live_restarts(pods) == 5


def test_ledger_round_trips_through_annotations() -> None:
    ledger = RestartLedger().record([failed("j-worker-0", "a")])
    assert RestartLedger.from_annotations(ledger.annotations()) == ledger
    assert ledger.annotations() == {
        RESTART_COUNT_ANNOTATION: "1",
        RESTARTED_PODS_ANNOTATION: '{"j-worker-0":"a"}',
    }


def test_ledger_tolerates_mangled_annotations() -> None:
    ledger = RestartLedger.from_annotations(
        {RESTART_COUNT_ANNOTATION: "many", RESTARTED_PODS_ANNOTATION: "[1"}
    )
    assert ledger == RestartLedger()
