"""Jobs the planner leaves alone (managedBy, deletion) and jobs it fails (invalid)."""

from __future__ import annotations

import pytest
from plan_fixtures import DemoFramework, FakeCluster, condition, new_job, reasons, running_job

from jobcontroller.core import CreateObject, JobMetric, Plan


@pytest.mark.parametrize("manager", ["kueue.x-k8s.io/multikueue", "someone-else"])
def test_job_managed_by_another_controller_is_skipped(manager: str) -> None:
    cluster = FakeCluster(new_job(run_policy={"managedBy": manager}))
    assert cluster.plan(DemoFramework()) == Plan()


def test_job_managed_by_us_explicitly_is_reconciled() -> None:
    cluster = FakeCluster(new_job(run_policy={"managedBy": "kubeflow.org/training-operator"}))
    assert len(cluster.plan(DemoFramework()).actions) == 6


def test_job_being_deleted_is_skipped() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job())
    running_job(fw, cluster)
    cluster.job["metadata"]["deletionTimestamp"] = "2024-01-01T12:00:00Z"
    cluster.set_pod("Worker", 0, "Failed", exit_code=1)
    assert cluster.plan(fw) == Plan()


def test_validation_failure_fails_the_job_without_pods() -> None:
    fw = DemoFramework(extra_errors=["spec.x: bad", "spec.y: worse"])
    cluster = FakeCluster(new_job())
    result = cluster.step(fw)
    assert result.actions == ()
    failed = condition(result, "Failed")
    assert (failed.reason, failed.message) == (
        "DemoJobFailedValidation",
        "DemoJob demo failed validation because spec.x: bad; spec.y: worse",
    )
    assert condition(result, "Created") is not None
    assert [(e.type, e.reason) for e in result.events] == [("Warning", "DemoJobFailedValidation")]
    assert result.metrics == (JobMetric.CREATED, JobMetric.FAILED)
    again = cluster.plan(fw)
    assert (again.actions, again.events, again.metrics) == ((), (), ())
    assert again.status is not None and again.status.to_dict() == cluster.job["status"]


def test_a_stored_job_breaking_only_tolerated_rules_runs_with_one_warning() -> None:
    """Rules the Go operator never checked: a job stored before the swap is warned about once
    (the annotation remembers it) and runs; a rule no job can run without still fails it."""
    fw = DemoFramework(tolerated_errors=["spec.x: stricter than v1.9"])
    cluster = FakeCluster(new_job())
    result = cluster.step(fw)
    assert condition(result, "Failed") is None
    warnings = [e for e in result.events if e.type == "Warning"]
    assert [(e.reason, e.message) for e in warnings] == [
        (
            "DemoJobToleratedValidation",
            "DemoJob demo breaks rules that new jobs must follow (it was stored before they "
            "applied) and runs as the Go operator ran it: spec.x: stricter than v1.9",
        )
    ]
    assert any(isinstance(a, CreateObject) and a.kind == "Pod" for a in result.actions)
    annotations = cluster.job["metadata"]["annotations"]
    assert "training.kubeflow.org/tolerated-rules" in annotations
    again = cluster.step(fw)
    assert not [e for e in again.events if e.type == "Warning"]
    # A different broken rule is reported again.
    fw.tolerated_errors.append("spec.y: also stricter")
    assert "DemoJobToleratedValidation" in reasons(cluster.step(fw))
    # A hard error among them fails the job, naming only the hard one.
    fw.extra_errors.append("spec.z: impossible")
    failed = condition(cluster.step(fw), "Failed")
    assert failed.message == "DemoJob demo failed validation because spec.z: impossible"


def test_unparseable_job_is_failed_not_raised() -> None:
    fw = DemoFramework()
    raw = new_job()
    raw["spec"]["demoReplicaSpecs"]["Worker"]["replicas"] = "many"
    cluster = FakeCluster(raw)
    result = cluster.step(fw)
    assert result.actions == ()
    failed = condition(result, "Failed")
    assert failed.reason == "DemoJobFailedValidation"
    assert "replicas" in failed.message
    assert reasons(result) == ["DemoJobFailedValidation"]
    again = cluster.plan(fw)
    assert (again.events, again.metrics) == ((), ())
    assert again.status is not None and again.status.to_dict() == cluster.job["status"]


def test_finished_job_is_not_revalidated() -> None:
    fw = DemoFramework()
    cluster = FakeCluster(new_job())
    running_job(fw, cluster)
    cluster.set_pod("Chief", 0, "Succeeded", exit_code=0)
    cluster.step(fw)
    fw.extra_errors.append("spec.z: now invalid")
    result = cluster.plan(fw)
    assert condition(result, "Failed") is None
    assert result.events == ()


def test_a_spec_found_valid_is_checked_again_only_when_its_generation_changes() -> None:
    # The checks read the spec (and the immutable name): the controller remembers the
    # (uid, generation) a pass found valid and the next passes skip them, until the spec
    # changes. A check that would now refuse (extra_errors) shows which passes ran it.
    fw = DemoFramework()
    cluster = FakeCluster(new_job())
    first = cluster.step(fw)
    assert first.valid_spec == ("uid-demo", 1)
    fw.extra_errors.append("spec.x: bad")
    same = cluster.step(fw)
    assert condition(same, "Failed") is None and same.valid_spec == ("uid-demo", 1)
    cluster.job["metadata"]["generation"] = 2  # the spec was edited
    failed = condition(cluster.step(fw), "Failed")
    assert failed is not None
    assert failed.message == "DemoJob demo failed validation because spec.x: bad"


def test_a_job_with_tolerated_rules_or_without_a_generation_is_checked_every_pass() -> None:
    fw = DemoFramework(tolerated_errors=["spec.x: stricter than v1.9"])
    cluster = FakeCluster(new_job())
    assert cluster.step(fw).valid_spec is None
    bare = new_job()
    del bare["metadata"]["generation"]
    assert FakeCluster(bare).step(DemoFramework()).valid_spec is None
