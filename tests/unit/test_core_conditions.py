"""Condition rules shared by every framework (anchor: kubeflow/common pkg/util/status.go)."""

from __future__ import annotations

import datetime as dt

from jobcontroller.api.common import JobStatus
from jobcontroller.core import is_failed, is_running, set_condition
from jobcontroller.core.conditions import new_reason, to_utc_seconds

T0 = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(minutes=5)


def put(
    status: JobStatus, type_: str, reason: str, *, now: dt.datetime = T0, value: bool = True
) -> bool:
    return set_condition(
        status, cond_type=type_, reason=reason, message=f"{type_} msg", now=now, value=value
    )


def test_new_reason_prefixes_the_kind() -> None:
    assert new_reason("TFJob", "Running") == "TFJobRunning"


def test_set_condition_records_both_times() -> None:
    status = JobStatus()
    assert put(status, "Created", "XCreated")
    cond = status.condition("Created")
    assert cond is not None
    assert (cond.status, cond.reason, cond.last_update_time, cond.last_transition_time) == (
        "True",
        "XCreated",
        T0,
        T0,
    )


def test_unchanged_status_and_reason_is_a_no_op_even_later() -> None:
    status = JobStatus()
    put(status, "Running", "XRunning")
    before = status.model_copy(deep=True)
    assert not put(status, "Running", "XRunning", now=T1)
    assert status == before


def test_new_reason_same_status_keeps_transition_time() -> None:
    status = JobStatus()
    put(status, "Suspended", "XSuspended")
    assert put(status, "Suspended", "XOther", now=T1)
    cond = status.condition("Suspended")
    assert cond is not None
    assert cond.last_transition_time == T0
    assert cond.last_update_time == T1


def test_status_flip_moves_transition_time() -> None:
    status = JobStatus()
    put(status, "Suspended", "XSuspended")
    put(status, "Suspended", "XResumed", now=T1, value=False)
    cond = status.condition("Suspended")
    assert cond is not None
    assert (cond.status, cond.last_transition_time) == ("False", T1)


def test_running_and_restarting_replace_each_other() -> None:
    status = JobStatus()
    put(status, "Running", "XRunning")
    put(status, "Restarting", "XRestarting")
    assert [c.type for c in status.conditions] == ["Restarting"]
    put(status, "Running", "XRunning")
    assert [c.type for c in status.conditions] == ["Running"]


def test_changed_condition_moves_to_the_end() -> None:
    status = JobStatus()
    put(status, "Created", "XCreated")
    put(status, "Running", "XRunning")
    assert [c.type for c in status.conditions] == ["Created", "Running"]


def test_succeeded_turns_running_false() -> None:
    status = JobStatus()
    put(status, "Running", "XRunning")
    put(status, "Succeeded", "XSucceeded", now=T1)
    running = status.condition("Running")
    assert running is not None
    assert (running.status, running.last_transition_time) == ("False", T1)
    assert not is_running(status)
    assert [c.type for c in status.conditions] == ["Running", "Succeeded"]


def test_nothing_changes_once_failed() -> None:
    status = JobStatus()
    put(status, "Failed", "XFailed")
    assert is_failed(status)
    assert not put(status, "Running", "XRunning")
    assert not put(status, "Succeeded", "XSucceeded")
    assert [c.type for c in status.conditions] == ["Failed"]


def test_times_are_truncated_to_seconds_and_utc() -> None:
    status = JobStatus()
    naive = dt.datetime(2024, 1, 1, 12, 0, 0, 999_999)
    put(status, "Created", "XCreated", now=naive)
    cond = status.condition("Created")
    assert cond is not None
    assert cond.last_update_time == T0
    assert to_utc_seconds(naive) == T0
