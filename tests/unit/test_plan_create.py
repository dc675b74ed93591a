"""A new job: pods and headless Services for every replica, named, labelled and owned."""

from __future__ import annotations

from plan_fixtures import (
    CONTAINER,
    KIND,
    NOW,
    DemoFramework,
    FakeCluster,
    condition,
    new_job,
    reasons,
    template,
)

from jobcontroller.core import (
    POD,
    SERVICE,
    CreateObject,
    JobMetric,
    Plan,
)

OWNER = {
    "apiVersion": "kubeflow.org/v1",
    "kind": KIND,
    "name": "demo",
    "uid": "uid-demo",
    "controller": True,
    "blockOwnerDeletion": True,
}


def creates(result: Plan, kind: str) -> dict[str, CreateObject]:
    return {a.name: a for a in result.actions if isinstance(a, CreateObject) and a.kind == kind}


def test_creates_one_pod_and_one_service_per_replica() -> None:
    result = FakeCluster(new_job()).plan(DemoFramework())
    expected = ["demo-chief-0", "demo-worker-0", "demo-worker-1"]
    assert sorted(creates(result, POD)) == expected
    assert sorted(creates(result, SERVICE)) == expected
    assert len(result.actions) == 6


def test_pod_labels_owner_and_template_metadata() -> None:
    pod = creates(FakeCluster(new_job()).plan(DemoFramework()), POD)["demo-worker-1"].body
    meta = pod["metadata"]
    assert meta["namespace"] == "ns"
    assert meta["labels"] == {
        "team": "ml",
        "training.kubeflow.org/operator-name": "demojob-controller",
        "training.kubeflow.org/job-name": "demo",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "1",
    }
    assert meta["annotations"] == {"note": "x"}
    assert meta["ownerReferences"] == [OWNER]
    assert pod["apiVersion"] == "v1"
    assert pod["kind"] == "Pod"


def test_master_role_label_only_on_the_master() -> None:
    pods = creates(FakeCluster(new_job()).plan(DemoFramework()), POD)
    roles = {
        n: a.body["metadata"]["labels"].get("training.kubeflow.org/job-role")
        for n, a in pods.items()
    }
    assert roles == {"demo-chief-0": "master", "demo-worker-0": None, "demo-worker-1": None}


def test_cluster_spec_hook_and_default_port_applied() -> None:
    pod = creates(FakeCluster(new_job()).plan(DemoFramework()), POD)["demo-worker-1"].body
    container = pod["spec"]["containers"][0]
    assert container["name"] == CONTAINER
    assert {"name": "DEMO_TASK", "value": "worker-1"} in container["env"]
    assert container["ports"] == [{"name": "demo-port", "containerPort": 2222}]


def test_template_is_not_mutated_across_pods() -> None:
    pods = creates(FakeCluster(new_job()).plan(DemoFramework()), POD)
    envs = [a.body["spec"]["containers"][0]["env"] for a in pods.values()]
    assert all(len(env) == 1 for env in envs)


def test_service_is_headless_with_selector_ports_and_owner() -> None:
    svc = creates(FakeCluster(new_job()).plan(DemoFramework()), SERVICE)["demo-chief-0"].body
    labels = {
        "training.kubeflow.org/operator-name": "demojob-controller",
        "training.kubeflow.org/job-name": "demo",
        "training.kubeflow.org/replica-type": "chief",
        "training.kubeflow.org/replica-index": "0",
    }
    assert svc["spec"] == {
        "clusterIP": "None",
        "selector": labels,
        "ports": [{"name": "demo-port", "port": 2222}],
    }
    assert svc["metadata"]["labels"] == labels
    assert svc["metadata"]["ownerReferences"] == [OWNER]


def test_no_services_when_the_framework_says_so() -> None:
    result = FakeCluster(new_job()).plan(DemoFramework(no_services={"Worker"}))
    assert sorted(creates(result, SERVICE)) == ["demo-chief-0"]


def test_expectation_keys_per_replica_type() -> None:
    result = FakeCluster(new_job()).plan(DemoFramework())
    keys = {(a.kind, a.name): a.expectation for a in result.actions if isinstance(a, CreateObject)}
    assert keys[(POD, "demo-worker-0")] == "ns/demo/worker/pods"
    assert keys[(SERVICE, "demo-chief-0")] == "ns/demo/chief/services"


def test_restart_policy_from_replica_spec_exit_code_becomes_never() -> None:
    for policy, pod_policy in [
        ("OnFailure", "OnFailure"),
        ("ExitCode", "Never"),
        ("Always", "Always"),
    ]:
        result = FakeCluster(new_job(restart_policy=policy)).plan(DemoFramework())
        assert {a.body["spec"]["restartPolicy"] for a in creates(result, POD).values()} == {
            pod_policy
        }


def test_template_restart_policy_is_overridden_with_one_warning_per_type() -> None:
    job = new_job(
        replicas={"Worker": 3},
        restart_policy="OnFailure",
        templates={"Worker": template(restartPolicy="Always")},
    )
    result = FakeCluster(job).plan(DemoFramework())
    assert {a.body["spec"]["restartPolicy"] for a in creates(result, POD).values()} == {"OnFailure"}
    assert reasons(result) == ["SetPodTemplateRestartPolicy"]


def test_created_condition_metric_and_start_time() -> None:
    result = FakeCluster(new_job()).plan(DemoFramework())
    created = condition(result, "Created")
    assert (created.status, created.reason, created.message) == (
        "True",
        "DemoJobCreated",
        "DemoJob demo is created.",
    )
    assert result.metrics == (JobMetric.CREATED,)
    assert result.status is not None
    assert result.status.start_time == NOW
    assert result.requeue_after is None


def test_replica_statuses_start_at_zero() -> None:
    result = FakeCluster(new_job()).plan(DemoFramework())
    assert result.status is not None
    assert result.status.to_dict()["replicaStatuses"] == {
        "Chief": {"active": 0, "succeeded": 0, "failed": 0},
        "Worker": {"active": 0, "succeeded": 0, "failed": 0},
    }
