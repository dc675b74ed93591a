"""Framework hooks: when extra_objects and update_status are consulted, and what happens to
actions when the status rule finishes the job."""

from __future__ import annotations

from typing import Any

from plan_fixtures import DemoFramework, FakeCluster, new_job, running_job

from jobcontroller.core import CreateObject, DeleteObject, JobMetric, Observed

CONFIG_MAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo-config"}}


def extra(calls: list[str]) -> Any:
    def hook(job: Any, observed: Observed) -> list[Any]:
        calls.append(job.name)
        return [CreateObject(kind="ConfigMap", body=CONFIG_MAP)]

    return hook


def test_extra_objects_join_the_plan_of_a_live_job() -> None:
    calls: list[str] = []
    result = FakeCluster(new_job()).plan(DemoFramework(extra=extra(calls)))
    assert calls == ["demo"]
    assert ("ConfigMap", "demo-config") in [
        (a.kind, a.name) for a in result.actions if isinstance(a, CreateObject)
    ]


def test_suspended_job_gets_extra_objects_but_no_status_rule() -> None:
    """A suspended job's framework objects still get a say (an HPA to remove, a launcher Job
    to suspend); the success/failure rule does not run."""
    calls: list[str] = []
    fw = DemoFramework(extra=extra(calls))
    FakeCluster(new_job(run_policy={"suspend": True})).plan(fw)
    assert calls == ["demo"] and fw.status_calls == 0


def test_finished_job_gets_extra_objects_but_no_status_rule() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job())
    running_job(fw, cluster)
    cluster.set_pod("Chief", 0, "Succeeded", exit_code=0)
    cluster.step(fw)
    calls: list[str] = []
    fw.extra = extra(calls)
    before = fw.status_calls
    cluster.plan(fw)
    assert calls == ["demo"] and fw.status_calls == before


def test_finishing_plan_creates_no_new_replicas() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job(run_policy={"cleanPodPolicy": "All"}))
    running_job(fw, cluster)
    cluster.set_pod("Chief", 0, "Succeeded", exit_code=0)
    del cluster.objects[("Pod", "demo-worker-1")]  # e.g. evicted and removed
    result = cluster.plan(fw)
    assert not [a for a in result.actions if isinstance(a, CreateObject) and a.kind == "Pod"]
    assert sorted(
        a.name for a in result.actions if isinstance(a, DeleteObject) and a.kind == "Pod"
    ) == [
        "demo-chief-0",
        "demo-worker-0",
    ]
    assert result.metrics == (JobMetric.SUCCESSFUL,)
