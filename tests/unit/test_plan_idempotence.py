"""Level-triggered planning: executing a plan and planning again converges to nothing to do,
with an identical status (so the controller writes nothing)."""

from __future__ import annotations

import copy
import datetime as dt

from plan_fixtures import NOW, DemoFramework, FakeCluster, new_job, running_job

from jobcontroller.core import PlanConfig, plan

LATER = NOW + dt.timedelta(minutes=10)


def test_new_job_converges_in_two_plans() -> None:
    cluster = FakeCluster(new_job())
    plans = cluster.settle(DemoFramework())
    assert len(plans) == 2
    assert plans[-1].events == () and plans[-1].metrics == ()
    assert cluster.names("Pod") == ["demo-chief-0", "demo-worker-0", "demo-worker-1"]


def test_replanning_later_yields_an_identical_status() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job())
    cluster.settle(fw)
    stored = cluster.job["status"]
    again = cluster.plan(fw, now=LATER)
    assert again.actions == ()
    assert again.status is not None
    assert again.status.to_dict() == stored


def test_running_job_is_stable() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job())
    running_job(fw, cluster)
    stored = cluster.job["status"]
    assert [c["type"] for c in stored["conditions"]] == ["Created", "Running"]
    again = cluster.plan(fw, now=LATER)
    assert (again.actions, again.events, again.metrics) == ((), (), ())
    assert again.status is not None
    assert again.status.to_dict() == stored


def test_pending_pods_are_not_recreated() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job())
    cluster.step(fw)
    assert all(p["status"]["phase"] == "Pending" for p in cluster.pods())
    assert cluster.plan(fw).actions == ()


def test_plan_does_not_mutate_its_inputs() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job())
    cluster.step(fw)
    before = copy.deepcopy(cluster.objects)
    raw = copy.deepcopy(cluster.job)
    plan(fw, raw, cluster.observed(), now=NOW, config=PlanConfig())
    assert raw == cluster.job
    assert cluster.objects == before
