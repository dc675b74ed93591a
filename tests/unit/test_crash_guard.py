"""The crash-loop guard (issue 30, item 3): which jobs the operator died working on, and what
their next reconcile does. The decisions are pure (core/crashes.py); the guard around a
reconcile (jobcontroller/crashguard.py) is driven here with a state file in a temporary
directory, each "process" being a fresh ``CrashGuard.open`` on it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from plan_fixtures import DemoFramework, FakeCluster, condition, new_job

from jobcontroller.core import CreateObject, Observed, PlanConfig, plan
from jobcontroller.core.crashes import (
    MAX_RECORDED,
    REASON_OPERATOR_CRASHED,
    CrashRecord,
    Standing,
    crash_key,
    quarantine_plan,
)
from jobcontroller.crashguard import COMPACT_EVERY, STATE_FILE_NAME, CrashGuard

NOW = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
KEY = crash_key("DemoJob", "ns/demo")


# -- the record ------------------------------------------------------------------------------


def test_a_job_left_in_flight_counts_a_crash_at_each_restart() -> None:
    record = CrashRecord()
    record.begin(KEY, "u1")
    assert record.restarted() == [KEY]
    assert record.count(KEY, "u1") == 1
    assert Standing.of(1) == Standing.SUSPECT
    record.begin(KEY, "u1")
    record.restarted()
    assert Standing.of(record.count(KEY, "u1")) == Standing.QUARANTINED
    record.begin(KEY, "u1")
    record.restarted()
    assert Standing.of(record.count(KEY, "u1")) == Standing.ABANDONED


def test_a_completed_reconcile_clears_the_count_and_a_failed_one_keeps_it() -> None:
    record = CrashRecord(crashes={KEY: ("u1", 1)})
    record.begin(KEY, "u1")
    record.end(KEY, completed=False)
    assert record.count(KEY, "u1") == 1 and not record.in_flight
    record.begin(KEY, "u1")
    record.end(KEY, completed=True)
    assert record.count(KEY, "u1") == 0 and len(record) == 0


def test_a_new_job_under_the_same_name_starts_clean() -> None:
    record = CrashRecord(crashes={KEY: ("old-uid", 2)})
    assert record.count(KEY, "new-uid") == 0
    record.begin(KEY, "new-uid")
    record.restarted()
    assert record.count(KEY, "new-uid") == 1


def test_the_record_survives_its_text_and_refuses_garbage_quietly() -> None:
    record = CrashRecord(in_flight={KEY: "u1"}, crashes={"TFJob:a/b": ("u2", 2)})
    again = CrashRecord.from_text(record.to_text())
    assert again.in_flight == record.in_flight and again.crashes == record.crashes
    for text in ("", "{", '{"version": 99}', "[]", '{"version":1,"crashes":{"k":["u",true]}}'):
        assert len(CrashRecord.from_text(text)) <= 1


def test_the_record_is_bounded() -> None:
    record = CrashRecord()
    for i in range(MAX_RECORDED + 50):
        record.begin(f"k{i}", "u")
    assert len(record.in_flight) == MAX_RECORDED
    record.restarted()
    assert len(record.crashes) == MAX_RECORDED


# -- the planner's side ----------------------------------------------------------------------


def test_a_quarantined_job_fails_with_operator_crashed_unplanned() -> None:
    cluster = FakeCluster(new_job(replicas={"Worker": 3}))
    observed = Observed(crashes=2)
    result = plan(DemoFramework(), cluster.job, observed, now=NOW, config=PlanConfig())
    failed = condition(result, "Failed")
    assert failed.reason == REASON_OPERATOR_CRASHED
    assert "crashed 2 times" in failed.message and "--max-pods-per-job" in failed.message
    assert not result.actions
    assert [(e.type, e.reason) for e in result.events] == [("Warning", REASON_OPERATOR_CRASHED)]
    assert condition(result, "Created") is not None


def test_a_quarantined_job_is_not_even_parsed() -> None:
    raw: dict[str, Any] = {"metadata": {"name": "x", "uid": "u"}, "spec": "not a spec"}
    result = quarantine_plan(kind="DemoJob", raw_job=raw, crashes=2, now=NOW)
    assert result is not None and result.status is not None
    assert result.status.is_finished()


def test_a_finished_job_is_only_cleaned_up_never_rebuilt() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job(replicas={"Worker": 3}, run_policy={"cleanPodPolicy": "All"}))
    cluster.settle(fw)
    cluster.apply(plan(fw, cluster.job, Observed(crashes=2), now=NOW, config=PlanConfig()))
    del cluster.objects[("Pod", "demo-worker-1")]  # would be "missing" to a live plan
    result = cluster.plan(fw)
    assert not [a for a in result.actions if isinstance(a, CreateObject)]
    assert {a.kind for a in result.actions} == {"Pod", "Service"}  # deletions only
    again = plan(fw, cluster.job, Observed(crashes=2), now=NOW, config=PlanConfig())
    assert condition(again, "Failed").reason == REASON_OPERATOR_CRASHED


def test_a_suspect_is_planned_as_usual() -> None:
    cluster = FakeCluster(new_job(replicas={"Worker": 3}))
    result = plan(DemoFramework(), cluster.job, Observed(crashes=1), now=NOW, config=PlanConfig())
    assert condition(result, "Failed") is None
    assert result.actions


# -- the guard around reconciles -------------------------------------------------------------


def _job(name: str = "demo", uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "uid": uid}, "status": {}}


#: Contexts entered by "dead" processes: kept referenced, so that no finally clause runs.
_DIED_INSIDE: list[Any] = []


def _crash_inside(guard: CrashGuard, job: dict[str, Any]) -> None:
    """A plan the process dies in: the context is never left."""
    context = guard.planning("DemoJob", job)
    context.__enter__()
    _DIED_INSIDE.append(context)


def test_a_job_the_process_died_on_twice_is_quarantined(tmp_path: Path) -> None:
    for crashes in (1, 2):
        guard = CrashGuard.open(tmp_path)
        assert guard.crashes("DemoJob", "ns/demo", "u1") == crashes - 1
        _crash_inside(guard, _job())
    guard = CrashGuard.open(tmp_path)
    assert guard.crashes("DemoJob", "ns/demo", "u1") == 2
    with guard.planning("DemoJob", _job()) as standing:
        assert standing == Standing.QUARANTINED
    # The quarantine pass completed: the job is planned as usual from now on (it is Failed,
    # so that means its clean-up).
    assert guard.crashes("DemoJob", "ns/demo", "u1") == 0
    assert (tmp_path / STATE_FILE_NAME).exists()


def test_a_job_that_completes_a_reconcile_is_cleared(tmp_path: Path) -> None:
    _crash_inside(CrashGuard.open(tmp_path), _job())
    guard = CrashGuard.open(tmp_path)
    with guard.planning("DemoJob", _job()) as standing:
        assert standing == Standing.SUSPECT
    assert guard.crashes("DemoJob", "ns/demo", "u1") == 0
    assert CrashGuard.open(tmp_path).crashes("DemoJob", "ns/demo", "u1") == 0


def test_an_error_is_no_crash_and_clears_nothing(tmp_path: Path) -> None:
    _crash_inside(CrashGuard.open(tmp_path), _job())
    guard = CrashGuard.open(tmp_path)
    with pytest.raises(RuntimeError), guard.planning("DemoJob", _job()):
        raise RuntimeError("API error")
    assert guard.crashes("DemoJob", "ns/demo", "u1") == 1
    assert CrashGuard.open(tmp_path).crashes("DemoJob", "ns/demo", "u1") == 1


def test_only_the_job_being_planned_is_in_flight(tmp_path: Path) -> None:
    # Planning is synchronous: at any instant the record names at most the one job whose plan
    # is being made, so a death there is counted against that job alone.
    guard = CrashGuard.open(tmp_path)
    for name in ("a", "b", "c"):
        with guard.planning("DemoJob", _job(name, f"u{name}")):
            assert guard.statistics()["in_flight"] == 1
        assert guard.statistics()["in_flight"] == 0
    _crash_inside(guard, _job("b", "ub"))
    again = CrashGuard.open(tmp_path)
    assert [again.crashes("DemoJob", f"ns/{n}", f"u{n}") for n in "abc"] == [0, 1, 0]


def test_an_abandoned_job_is_never_touched(tmp_path: Path) -> None:
    for _ in range(3):
        _crash_inside(CrashGuard.open(tmp_path), _job())
    guard = CrashGuard.open(tmp_path)
    with guard.planning("DemoJob", _job()) as standing:
        assert standing == Standing.ABANDONED
    assert guard.statistics()["in_flight"] == 0
    guard.forget("DemoJob", "ns/demo")
    assert CrashGuard.open(tmp_path).crashes("DemoJob", "ns/demo", "u1") == 0


def test_an_unwritable_state_dir_turns_the_guard_off_without_failing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    guard = CrashGuard.open(blocker / "state")
    assert guard.crashes("DemoJob", "ns/demo", "u1") == 0

    with guard.planning("DemoJob", _job()) as standing:
        assert standing == Standing.CLEAR


def test_the_log_replays_appended_lines_and_ignores_a_torn_last_one() -> None:
    record = CrashRecord(crashes={"TFJob:a/b": ("u2", 1)})
    text = record.to_text()
    text += record.begin(KEY, "u1")
    text += record.end("TFJob:a/b", completed=True)
    text += record.begin("TFJob:a/c", "u3")
    text += record.end("TFJob:a/c", completed=False)
    text += '["in","TFJob:a/torn","u'  # the process died inside this write
    again = CrashRecord.from_text(text)
    assert again.in_flight == {KEY: "u1"}
    assert again.crashes == {}


def test_the_file_is_compacted_and_says_the_same_after(tmp_path: Path) -> None:
    guard = CrashGuard.open(tmp_path)
    for i in range(COMPACT_EVERY + 10):
        with guard.planning("DemoJob", _job(f"j{i % 7}", "u")):
            pass
    _crash_inside(guard, _job("last", "u9"))
    path = tmp_path / STATE_FILE_NAME
    assert path.stat().st_size < 4096  # compacted, not 4,000 lines
    reopened = CrashGuard.open(tmp_path)
    assert reopened.crashes("DemoJob", "ns/last", "u9") == 1
    assert reopened.crashes("DemoJob", "ns/j1", "u") == 0
