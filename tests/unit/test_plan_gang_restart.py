"""Whole-gang restart (``runPolicy.restartScope: All``): core/gang.py through ``plan()``."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from plan_fixtures import (
    KIND,
    NOW,
    DemoFramework,
    FakeCluster,
    condition,
    new_job,
    reasons,
    running_job,
)

from jobcontroller.core import (
    GANG_GENERATION_ANNOTATION,
    GANG_RESTART_ANNOTATION,
    POD,
    POD_GROUP,
    RESTART_COUNT_ANNOTATION,
    CreateObject,
    DeleteObject,
    JobMetric,
    PatchObject,
    Plan,
    PlanConfig,
)

WORKERS = ["demo-chief-0", "demo-worker-0", "demo-worker-1"]


def deleted(result: Plan) -> list[str]:
    return sorted(a.name for a in result.actions if isinstance(a, DeleteObject) and a.kind == POD)


def created(result: Plan) -> list[str]:
    return sorted(a.name for a in result.actions if isinstance(a, CreateObject) and a.kind == POD)


def generations(cluster: FakeCluster) -> dict[str, str]:
    return {
        pod["metadata"]["name"]: pod["metadata"]["annotations"][GANG_GENERATION_ANNOTATION]
        for pod in cluster.pods()
    }


def uids(cluster: FakeCluster) -> dict[str, str]:
    return {pod["metadata"]["name"]: pod["metadata"]["uid"] for pod in cluster.pods()}


def gang_job(policy: str = "OnFailure", **run_policy: Any) -> tuple[DemoFramework, FakeCluster]:
    fw = DemoFramework()
    cluster = FakeCluster(
        new_job(restart_policy=policy, run_policy={"restartScope": "All", **run_policy})
    )
    running_job(fw, cluster)
    return fw, cluster


def mark_running(cluster: FakeCluster) -> None:
    for pod in cluster.pods():
        pod["status"] = {
            "phase": "Running",
            "containerStatuses": [{"name": "trainer", "restartCount": 0, "state": {"running": {}}}],
        }


def test_pods_never_restart_in_place_and_carry_their_generation() -> None:
    _, cluster = gang_job()
    assert generations(cluster) == dict.fromkeys(WORKERS, "0")
    assert {pod["spec"]["restartPolicy"] for pod in cluster.pods()} == {"Never"}


def test_default_scope_keeps_per_pod_restarts_and_plain_pods() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job(restart_policy="OnFailure"))
    running_job(fw, cluster)
    assert {pod["spec"]["restartPolicy"] for pod in cluster.pods()} == {"OnFailure"}
    assert all(
        GANG_GENERATION_ANNOTATION not in (pod["metadata"].get("annotations") or {})
        for pod in cluster.pods()
    )


@pytest.mark.parametrize(("policy", "code"), [("OnFailure", 1), ("Always", 3), ("ExitCode", 137)])
def test_retryable_failure_first_records_the_restart_on_the_job_only(
    policy: str, code: int
) -> None:
    fw, cluster = gang_job(policy)
    uid = cluster.get(POD, "demo-worker-1")["metadata"]["uid"]
    cluster.set_pod("Worker", 1, "Failed", exit_code=code)
    result = cluster.plan(fw)
    assert len(result.actions) == 1  # nothing deleted before the restart is stored
    patch = result.actions[0]
    assert isinstance(patch, PatchObject)
    assert (patch.kind, patch.name) == (KIND, "demo")
    annotations = patch.patch["metadata"]["annotations"]
    assert annotations[RESTART_COUNT_ANNOTATION] == "1"
    assert json.loads(annotations[GANG_RESTART_ANNOTATION]) == {
        "generation": 1,
        "pod": "demo-worker-1",
        "uid": uid,
        "replicaType": "Worker",
        "exitCode": code,
        "reason": "",
    }
    message = (
        f"DemoJob demo is restarting its whole gang (restart 1) because pod demo-worker-1 "
        f"(Worker) failed with exit code {code}."
    )
    restarting = condition(result, "Restarting")
    assert (restarting.status, restarting.reason, restarting.message) == (
        "True",
        "DemoJobRestarting",
        message,
    )
    warnings = [e for e in result.events if e.reason == "DemoJobRestarting"]
    assert [(e.type, e.message) for e in warnings] == [("Warning", message)]
    assert result.metrics.count(JobMetric.RESTARTED) == 1
    assert condition(result, "Failed") is None


def test_the_whole_gang_is_deleted_then_recreated_in_the_next_generation() -> None:
    fw, cluster = gang_job()
    before = uids(cluster)
    cluster.set_pod("Worker", 1, "Failed", exit_code=1)
    cluster.step(fw)  # the ledger patch
    delete = cluster.step(fw)
    assert deleted(delete) == WORKERS  # the healthy ones too
    assert created(delete) == []
    assert reasons(delete) == []  # the event came with the patch, once
    assert condition(delete, "Restarting").status == "True"
    recreate = cluster.step(fw)
    assert created(recreate) == WORKERS
    assert generations(cluster) == dict.fromkeys(WORKERS, "1")
    assert not set(uids(cluster).values()) & set(before.values())
    mark_running(cluster)
    result = cluster.step(fw)
    assert condition(result, "Running").status == "True"
    assert condition(result, "Restarting") is None
    assert cluster.plan(fw).actions == ()
    assert cluster.job["metadata"]["annotations"][RESTART_COUNT_ANNOTATION] == "1"


def test_several_failures_at_once_are_one_gang_restart_named_by_the_first() -> None:
    fw, cluster = gang_job("ExitCode")
    cluster.set_pod("Worker", 0, "Failed", exit_code=143, finished_at="2024-01-01T11:00:05Z")
    cluster.set_pod("Worker", 1, "Failed", exit_code=137, finished_at="2024-01-01T11:00:01Z")
    result = cluster.step(fw)
    record = json.loads(cluster.job["metadata"]["annotations"][GANG_RESTART_ANNOTATION])
    assert (record["pod"], record["exitCode"]) == ("demo-worker-1", 137)
    assert result.metrics.count(JobMetric.RESTARTED) == 1
    plans = cluster.settle(fw)
    assert all(JobMetric.RESTARTED not in p.metrics for p in plans)
    assert cluster.job["metadata"]["annotations"][RESTART_COUNT_ANNOTATION] == "1"


def test_replanning_before_the_patch_is_seen_orders_the_same_restart() -> None:
    fw, cluster = gang_job()
    cluster.set_pod("Worker", 1, "Failed", exit_code=1)
    first, again = cluster.plan(fw), cluster.plan(fw)
    assert first.actions == again.actions  # the same patch: generation 1, count 1


def test_a_crash_mid_deletion_resumes_without_counting_again() -> None:
    fw, cluster = gang_job()
    cluster.set_pod("Worker", 1, "Failed", exit_code=1)
    cluster.step(fw)
    delete = cluster.plan(fw)
    # Only one of the deletions was sent before the operator died.
    first = next(a for a in delete.actions if isinstance(a, DeleteObject))
    cluster.apply(Plan(actions=(first,)))
    resumed = cluster.plan(fw)
    assert deleted(resumed) == sorted(set(WORKERS) - {first.name})
    assert created(resumed) == []
    assert JobMetric.RESTARTED not in resumed.metrics
    assert not any(isinstance(a, PatchObject) for a in resumed.actions)


def test_nothing_is_created_while_an_old_member_is_still_terminating() -> None:
    fw, cluster = gang_job()
    cluster.set_pod("Worker", 1, "Failed", exit_code=1)
    cluster.step(fw)
    # The chief's deletion was accepted but the pod takes its grace period.
    chief = cluster.get(POD, "demo-chief-0")
    for name in ("demo-worker-0", "demo-worker-1"):
        del cluster.objects[(POD, name)]
    chief["metadata"]["deletionTimestamp"] = "2024-01-01T11:59:00Z"
    waiting = cluster.plan(fw)
    assert waiting.actions == ()
    assert condition(waiting, "Restarting").status == "True"
    del cluster.objects[(POD, "demo-chief-0")]
    assert created(cluster.plan(fw)) == WORKERS


def test_replacement_pods_are_never_taken_for_the_old_gang() -> None:
    fw, cluster = gang_job()
    cluster.set_pod("Worker", 1, "Failed", exit_code=1)
    cluster.settle(fw)
    mark_running(cluster)
    cluster.settle(fw)
    replacements = uids(cluster)
    # The job is planned again and again (a status write, a resync): the new gang stays.
    for _ in range(3):
        assert cluster.step(fw).actions == ()
    assert uids(cluster) == replacements
    # A failure in the new gang is a second restart, of generation 2.
    cluster.set_pod("Worker", 0, "Failed", exit_code=1)
    cluster.settle(fw)
    assert generations(cluster) == dict.fromkeys(WORKERS, "2")
    assert cluster.job["metadata"]["annotations"][RESTART_COUNT_ANNOTATION] == "2"


def test_old_members_failing_during_the_restart_do_not_fail_the_job() -> None:
    fw, cluster = gang_job("ExitCode")
    cluster.set_pod("Worker", 1, "Failed", exit_code=137)
    cluster.step(fw)
    # Its peer gives up (exit 1, permanent under ExitCode) before the gang is deleted.
    cluster.set_pod("Worker", 0, "Failed", exit_code=1)
    result = cluster.step(fw)
    assert condition(result, "Failed") is None
    assert deleted(result) == WORKERS


def test_a_permanent_failure_still_fails_the_job() -> None:
    fw, cluster = gang_job("ExitCode")
    cluster.set_pod("Worker", 1, "Failed", exit_code=1)
    result = cluster.step(fw)
    failed = condition(result, "Failed")
    assert failed.status == "True"
    assert failed.message == 'job "demo" is failing because "Worker" replica(s) failed.'
    assert GANG_RESTART_ANNOTATION not in (cluster.job["metadata"].get("annotations") or {})


def test_never_leaves_the_failure_to_the_frameworks_rule() -> None:
    fw, cluster = gang_job("Never")
    cluster.set_pod("Worker", 1, "Failed", exit_code=1)
    result = cluster.step(fw)
    assert condition(result, "Failed").status == "True"
    assert not any(isinstance(a, PatchObject) for a in result.actions)


def test_backoff_limit_is_the_maximum_number_of_gang_restarts() -> None:
    fw, cluster = gang_job(backoffLimit=1)
    cluster.set_pod("Worker", 1, "Failed", exit_code=1)
    cluster.settle(fw)
    mark_running(cluster)
    cluster.settle(fw)
    assert cluster.job["metadata"]["annotations"][RESTART_COUNT_ANNOTATION] == "1"
    cluster.set_pod("Worker", 0, "Failed", exit_code=2)
    result = cluster.step(fw)
    failed = condition(result, "Failed")
    assert failed.status == "True"
    assert failed.message == (
        "Job demo has failed because it has reached the specified backoff limit: pod "
        "demo-worker-0 (Worker) failed with exit code 2 after 1 whole-gang restart(s), and "
        "runPolicy.backoffLimit allows 1"
    )
    # Stopped by its run policy: the pods still running are deleted whatever cleanPodPolicy.
    assert deleted(result) == ["demo-chief-0", "demo-worker-1"]
    assert cluster.job["metadata"]["annotations"][RESTART_COUNT_ANNOTATION] == "1"


def test_backoff_limit_zero_allows_no_gang_restart() -> None:
    fw, cluster = gang_job(backoffLimit=0)
    cluster.set_pod("Worker", 1, "Failed", exit_code=1)
    result = cluster.step(fw)
    assert "reached the specified backoff limit" in condition(result, "Failed").message


def test_the_pod_group_stays() -> None:
    config = PlanConfig(gang_scheduler_name="scheduler-plugins", pod_group_available=True)
    fw = DemoFramework()
    cluster = FakeCluster(new_job(restart_policy="OnFailure", run_policy={"restartScope": "All"}))
    running_job(fw, cluster, config=config)
    group = cluster.get(POD_GROUP, "demo")
    cluster.set_pod("Worker", 1, "Failed", exit_code=1)
    plans = cluster.settle(fw, config=config)
    assert all(
        not (isinstance(a, DeleteObject) and a.kind == POD_GROUP) for p in plans for a in p.actions
    )
    assert cluster.get(POD_GROUP, "demo")["metadata"]["uid"] == group["metadata"]["uid"]
    assert generations(cluster) == dict.fromkeys(WORKERS, "1")


def test_the_deadline_still_applies_during_a_gang_restart() -> None:
    fw, cluster = gang_job(activeDeadlineSeconds=60)
    cluster.set_pod("Worker", 1, "Failed", exit_code=1)
    cluster.step(fw)
    late = cluster.plan(fw, now=NOW + dt.timedelta(seconds=61))
    assert "active longer than specified deadline" in condition(late, "Failed").message


def test_a_mangled_record_reads_as_generation_zero() -> None:
    fw, cluster = gang_job()
    cluster.job["metadata"].setdefault("annotations", {})[GANG_RESTART_ANNOTATION] = "{oops"
    assert cluster.plan(fw).actions == ()


def test_a_lost_record_still_restarts_past_the_generation_of_the_pods() -> None:
    fw, cluster = gang_job()
    cluster.set_pod("Worker", 1, "Failed", exit_code=1)
    cluster.settle(fw)
    mark_running(cluster)
    cluster.settle(fw)
    del cluster.job["metadata"]["annotations"][GANG_RESTART_ANNOTATION]  # someone removed it
    cluster.set_pod("Worker", 0, "Failed", exit_code=1)
    cluster.settle(fw)
    assert generations(cluster) == dict.fromkeys(WORKERS, "2")
    assert cluster.job["metadata"]["annotations"][RESTART_COUNT_ANNOTATION] == "2"
