"""PodGroup spec (Volcano and scheduler-plugins), minResources, patches and pod decoration."""

from __future__ import annotations

from typing import Any

from plan_fixtures import DemoFramework, new_job, template

from jobcontroller.core import PlanConfig
from jobcontroller.core.podgroup import (
    decorate_template,
    delays_pod_creation,
    desired_pod_group,
    min_member,
    min_resources,
    pod_group_patch,
)

VOLCANO = PlanConfig(gang_scheduler_name="volcano", pod_group_available=True)
PLUGINS = PlanConfig(gang_scheduler_name="scheduler-plugins", pod_group_available=True)


def job(**kwargs: Any) -> Any:
    fw = DemoFramework()
    return fw.set_defaults(fw.model.parse(new_job(**kwargs)))


def resourced(
    cpu: str, *, priority: str | None = None, limits_only: bool = False
) -> dict[str, Any]:
    key = "limits" if limits_only else "requests"
    t = template(resources={key: {"cpu": cpu, "memory": "1Gi"}})
    if priority:
        t["spec"]["priorityClassName"] = priority
    return t


def test_min_member_is_total_replicas_or_min_available() -> None:
    assert min_member(job(replicas={"Chief": 1, "Worker": 3})) == 4
    assert min_member(job(run_policy={"schedulingPolicy": {"minAvailable": 2}})) == 2


def test_min_resources_sum_requests_falling_back_to_limits() -> None:
    j = job(
        replicas={"Chief": 1, "Worker": 2},
        templates={"Chief": resourced("1", limits_only=True), "Worker": resourced("500m")},
    )
    assert min_resources(j, members=3, priority_classes={}) == {"cpu": "2", "memory": "3Gi"}


def test_min_resources_takes_highest_priority_first() -> None:
    j = job(
        replicas={"Chief": 1, "Worker": 2},
        templates={"Chief": resourced("4"), "Worker": resourced("1", priority="high")},
    )
    # Only two members: both workers (priority 100) come before the chief (unknown class: 0).
    assert min_resources(j, members=2, priority_classes={"high": 100}) == {
        "cpu": "2",
        "memory": "2Gi",
    }


def test_volcano_spec_queue_priority_and_owner() -> None:
    j = job(
        run_policy={"schedulingPolicy": {"queue": "q1", "priorityClass": "pc", "minAvailable": 1}}
    )
    group = desired_pod_group(j, config=VOLCANO, existing=None)
    assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert group["kind"] == "PodGroup"
    assert group["metadata"]["name"] == "demo"
    assert group["metadata"]["ownerReferences"][0]["uid"] == "uid-demo"
    assert group["spec"] == {"minMember": 1, "queue": "q1", "priorityClassName": "pc"}


def test_volcano_queue_defaults_and_existing_queue_wins() -> None:
    j = job()
    assert desired_pod_group(j, config=VOLCANO, existing=None)["spec"]["queue"] == "default"
    existing = {"spec": {"queue": "team-a"}}
    assert desired_pod_group(j, config=VOLCANO, existing=existing)["spec"]["queue"] == "team-a"


def test_scheduler_plugins_spec_has_timeout_and_no_queue() -> None:
    j = job(
        run_policy={"schedulingPolicy": {"queue": "q", "scheduleTimeoutSeconds": 30}},
        templates={"Chief": resourced("1"), "Worker": resourced("1")},
    )
    group = desired_pod_group(j, config=PLUGINS, existing=None)
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert group["spec"] == {
        "minMember": 3,
        "scheduleTimeoutSeconds": 30,
        "minResources": {"cpu": "3", "memory": "3Gi"},
    }


def test_explicit_min_resources_are_used_as_given() -> None:
    j = job(run_policy={"schedulingPolicy": {"minResources": {"cpu": 8}}})
    assert desired_pod_group(j, config=PLUGINS, existing=None)["spec"]["minResources"] == {"cpu": 8}


def test_patch_only_for_differences_and_nulls_dropped_resources() -> None:
    desired = {"spec": {"minMember": 3, "minResources": {"cpu": "2"}}}
    assert (
        pod_group_patch(desired=desired, existing={"spec": dict(desired["spec"], extra=1)}) is None
    )
    existing = {"spec": {"minMember": 2, "minResources": {"cpu": "2", "memory": "1Gi"}}}
    assert pod_group_patch(desired=desired, existing=existing) == {
        "spec": {"minMember": 3, "minResources": {"cpu": "2", "memory": None}}
    }


def test_volcano_delays_until_admitted() -> None:
    assert delays_pod_creation(config=VOLCANO, pod_group=None)
    assert delays_pod_creation(config=VOLCANO, pod_group={"status": {"phase": "Pending"}})
    assert delays_pod_creation(config=VOLCANO, pod_group={})
    assert not delays_pod_creation(config=VOLCANO, pod_group={"status": {"phase": "Inqueue"}})
    assert not delays_pod_creation(config=PLUGINS, pod_group=None)


def test_decorate_volcano() -> None:
    t = template()
    assert not decorate_template(t, job_name="demo", rtype="Worker", config=VOLCANO)
    assert t["spec"]["schedulerName"] == "volcano"
    assert t["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "demo"
    assert t["metadata"]["annotations"]["volcano.sh/task-spec"] == "worker"


def test_decorate_scheduler_plugins_keeps_a_user_scheduler() -> None:
    t = template(schedulerName="custom")
    assert decorate_template(t, job_name="demo", rtype="Worker", config=PLUGINS)
    assert t["spec"]["schedulerName"] == "custom"
    assert t["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "demo"
