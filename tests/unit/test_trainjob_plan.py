"""One TrainJob reconcile, planned from plain data: what Trainer v2.3.0's TrainJobReconciler
does (pkg/controller/trainjob_controller.go, its integration tests' expectations) and where we
differ on purpose."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from trainjob_fixtures import (
    NODE,
    NOW,
    observed,
    runtime,
    set_container,
    stored,
    trainjob,
)

from jobcontroller import CreateObject, DeleteObject, Event, JobMetric, PatchObject, Plan
from trainer_operator.planner import plan_trainjob

Obj = dict[str, Any]
RT = runtime(ml_policy={"numNodes": 2, "torch": {}})


def _conditions(plan: Plan) -> list[Obj]:
    assert plan.status is not None
    return list(plan.status.to_dict().get("conditions") or [])


def _created(plan: Plan, kind: str) -> Obj:
    [body] = [a.body for a in plan.actions if isinstance(a, CreateObject) and a.kind == kind]
    return body


def _after(raw: Obj, plan: Plan) -> Obj:
    """``raw`` with the plan's status written."""
    out = copy.deepcopy(raw)
    assert plan.status is not None
    out["status"] = plan.status.to_dict()
    return out


def _existing(raw: Obj, **status: Any) -> tuple[Obj, Obj]:
    """The JobSet and snapshot of ``raw`` as the caches hold them after a first pass."""
    first = plan_trainjob(raw, observed(runtime=RT), now=NOW)
    jobset = stored(_created(first, "JobSet"), status=status or None)
    snapshot = stored(_created(first, "ConfigMap"), uid="cm-uid")
    return jobset, snapshot


def test_a_trainjob_managed_elsewhere_is_left_alone() -> None:
    raw = trainjob(managedBy="kueue.x-k8s.io/multikueue", suspend=True)
    assert plan_trainjob(raw, observed(runtime=RT), now=NOW) == Plan()


def test_an_unsupported_runtime_kind_fails_the_trainjob_once() -> None:
    raw = trainjob()
    raw["spec"]["runtimeRef"]["kind"] = "SlurmRuntime"
    plan = plan_trainjob(raw, observed(runtime=RT), now=NOW)
    assert plan.actions == ()
    assert _conditions(plan) == [
        {
            "type": "Failed",
            "status": "True",
            "reason": "TrainingRuntimeNotSupported",
            "message": "unsupported runtime: SlurmRuntime.trainer.kubeflow.org",
            "lastTransitionTime": "2026-08-10T12:00:00Z",
        }
    ]
    assert plan.metrics == (JobMetric.FAILED,)
    later = plan_trainjob(_after(raw, plan), observed(), now=NOW + dt.timedelta(minutes=5))
    assert later.status is not None and later.status.to_dict() == plan.status.to_dict()
    assert later.metrics == ()


def test_a_missing_runtime_is_an_event_not_a_failure() -> None:
    """Upstream's wording (the error of runtime.NewObjects in the Warning event); no condition, no
    timer: the runtime's informer plans the TrainJob again when the runtime appears."""
    plan = plan_trainjob(trainjob(runtime_name="alpha"), observed(runtime=None), now=NOW)
    assert plan.actions == ()
    assert plan.events == (
        Event(
            "Warning",
            "TrainJobResourcesCreationFailed",
            "TrainJob resources reconciliation failed: TrainingRuntime specified in TrainJob is "
            'not found: trainingruntimes.trainer.kubeflow.org "alpha" not found',
        ),
    )
    assert _conditions(plan) == []
    assert plan.requeue_after is None
    cluster = trainjob(runtime_kind="ClusterTrainingRuntime", runtime_name="torch")
    [event] = plan_trainjob(cluster, observed(runtime=None), now=NOW).events
    assert event.message.endswith(
        "not found ClusterTrainingRuntime specified in TrainJob: "
        'clustertrainingruntimes.trainer.kubeflow.org "torch" not found'
    )


def test_long_failure_messages_are_cut_as_upstream_cuts_them() -> None:
    raw = trainjob(runtime_name="r" * 1200)
    [event] = plan_trainjob(raw, observed(runtime=None), now=NOW).events
    prefix = "TrainJob resources reconciliation failed: "
    assert event.message.endswith(" ...")
    assert len(event.message) == len(prefix) + 950 + len(" ...")


def test_first_pass_snapshots_the_runtime_and_creates_the_jobset() -> None:
    plan = plan_trainjob(trainjob(), observed(runtime=RT), now=NOW)
    assert [(type(a).__name__, a.kind) for a in plan.actions] == [  # type: ignore[union-attr]
        ("CreateObject", "ConfigMap"),
        ("CreateObject", "JobSet"),
    ]
    snapshot = _created(plan, "ConfigMap")
    assert snapshot["metadata"]["name"] == "test-job-runtime-snapshot"
    assert set(snapshot["data"]) == {"runtime"}
    assert _conditions(plan) == []


def test_the_snapshot_not_the_runtime_shapes_the_jobset_afterwards() -> None:
    """KEP-2599: a runtime edited (or deleted) after the TrainJob's first reconcile changes
    nothing for it; a suspended TrainJob's JobSet is rebuilt from the snapshot."""
    raw = trainjob(suspend=True)
    first = plan_trainjob(raw, observed(runtime=RT), now=NOW)
    jobset, snapshot = stored(_created(first, "JobSet")), stored(_created(first, "ConfigMap"))
    edited = copy.deepcopy(RT)
    set_container(edited["spec"]["template"]["spec"], NODE, NODE, "new:image", ["x"], [], {})
    for now_runtime in (edited, None):
        later = plan_trainjob(
            _after(raw, first),
            observed(runtime=now_runtime, jobsets=[jobset], configmaps=[snapshot]),
            now=NOW,
        )
        assert later.actions == ()
        assert later.events == ()


def test_a_snapshot_of_someone_else_is_reported() -> None:
    _, snapshot = _existing(trainjob())
    snapshot["metadata"]["ownerReferences"][0]["uid"] = "other"
    plan = plan_trainjob(
        trainjob(),
        observed(runtime=RT, others={("ConfigMap", snapshot["metadata"]["name"]): snapshot}),
        now=NOW,
    )
    assert plan.actions == ()
    [event] = plan.events
    assert event.message == (
        "TrainJob resources reconciliation failed: unable to get runtime snapshot: invalid "
        "runtime snapshot: a snapshot configmap exists but is owned by another object"
    )


def test_a_running_jobset_is_not_touched_and_its_status_is_read() -> None:
    raw = trainjob()
    counts = {"name": NODE, "ready": 2, "succeeded": 0, "failed": 0, "active": 2, "suspended": 0}
    jobset, snapshot = _existing(raw, replicatedJobsStatus=[counts])
    patched = copy.deepcopy(raw)
    patched["spec"]["runtimePatches"] = [
        {
            "manager": "x.io/m",
            "trainingRuntimeSpec": {"template": {"metadata": {"labels": {"late": "label"}}}},
        }
    ]
    plan = plan_trainjob(
        patched, observed(runtime=RT, jobsets=[jobset], configmaps=[snapshot]), now=NOW
    )
    assert plan.actions == ()
    assert plan.status is not None
    assert plan.status.to_dict() == {"jobsStatus": [counts]}


def test_complete_and_failed_are_the_jobsets_conditions() -> None:
    raw = trainjob()
    done = {
        "type": "Completed",
        "status": "True",
        "reason": "AllJobsCompleted",
        "message": "jobset completed successfully",
        "lastTransitionTime": "2026-08-10T11:59:00Z",
    }
    jobset, snapshot = _existing(raw, conditions=[done])
    plan = plan_trainjob(raw, observed(jobsets=[jobset], configmaps=[snapshot]), now=NOW)
    assert _conditions(plan) == [{**done, "type": "Complete"}]
    assert plan.metrics == (JobMetric.SUCCESSFUL,)
    again = plan_trainjob(
        _after(raw, plan), observed(jobsets=[jobset], configmaps=[snapshot]), now=NOW
    )
    assert again.metrics == ()
    failed = {
        **done,
        "type": "Failed",
        "reason": "FailedJobs",
        "message": "jobset failed due to one or more job failures",
    }
    jobset["status"]["conditions"] = [failed]
    plan = plan_trainjob(raw, observed(jobsets=[jobset], configmaps=[snapshot]), now=NOW)
    assert _conditions(plan) == [failed]
    assert plan.metrics == (JobMetric.FAILED,)


def test_a_failed_trainjob_whose_jobset_is_gone_does_not_run_again() -> None:
    """Upstream drops Failed before each pass and would build the JobSet again once a TTL
    removed it; a finished TrainJob stays finished here."""
    raw = trainjob()
    raw["status"] = {
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "FailedJobs",
                "message": "jobset failed due to one or more job failures",
                "lastTransitionTime": "2026-08-10T11:00:00Z",
            }
        ]
    }
    plan = plan_trainjob(raw, observed(runtime=RT), now=NOW)
    assert plan.actions == ()
    assert plan.status is not None and plan.status.to_dict() == raw["status"]


def test_suspend_and_resume() -> None:
    """The integration test's conditions: Suspended=True (Suspended), then Suspended=False
    (Resumed); the JobSet is created suspended and resumed by one patch of ``suspend``."""
    raw = trainjob(suspend=True)
    first = plan_trainjob(raw, observed(runtime=RT), now=NOW)
    assert _created(first, "JobSet")["spec"]["suspend"] is True
    assert _conditions(first) == [
        {
            "type": "Suspended",
            "status": "True",
            "reason": "Suspended",
            "message": "TrainJob is suspended",
            "lastTransitionTime": "2026-08-10T12:00:00Z",
        }
    ]
    jobset, snapshot = stored(_created(first, "JobSet")), stored(_created(first, "ConfigMap"))
    resumed = _after(raw, first)
    resumed["spec"]["suspend"] = False
    later = NOW + dt.timedelta(minutes=1)
    plan = plan_trainjob(resumed, observed(jobsets=[jobset], configmaps=[snapshot]), now=later)
    assert plan.actions == (
        PatchObject(
            kind="JobSet", namespace="default", name="test-job", patch={"spec": {"suspend": False}}
        ),
    )
    assert _conditions(plan) == [
        {
            "type": "Suspended",
            "status": "False",
            "reason": "Resumed",
            "message": "TrainJob is resumed",
            "lastTransitionTime": "2026-08-10T12:01:00Z",
        }
    ]


def test_a_suspended_trainjobs_patches_reach_its_jobset() -> None:
    """Upstream's "Should succeeded to update JobSet when TrainJob is suspended": Kueue's node
    selector, through runtimePatches, while the JobSet is suspended: only the fields the JobSet
    webhook lets change, under the cached resourceVersion."""
    raw = trainjob(suspend=True)
    jobset, snapshot = _existing(raw)
    patched = copy.deepcopy(raw)
    patched["spec"]["runtimePatches"] = [
        {
            "manager": "kueue.x-k8s.io/manager",
            "trainingRuntimeSpec": {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {
                                "name": NODE,
                                "template": {
                                    "spec": {
                                        "template": {
                                            "spec": {"nodeSelector": {"updated": "selector"}}
                                        }
                                    }
                                },
                            }
                        ]
                    }
                }
            },
        }
    ]
    plan = plan_trainjob(patched, observed(jobsets=[jobset], configmaps=[snapshot]), now=NOW)
    [action] = plan.actions
    assert isinstance(action, PatchObject)
    assert action.patch["metadata"] == {"resourceVersion": "5"}
    jobs = action.patch["spec"]["replicatedJobs"]
    want = copy.deepcopy(jobset["spec"]["replicatedJobs"])
    want[2]["template"]["spec"]["template"]["spec"]["nodeSelector"] = {"updated": "selector"}
    assert jobs == want


def test_deadline_timer_then_failure_and_the_jobset_deleted() -> None:
    raw = trainjob(activeDeadlineSeconds=7200)  # created 11:00, now 12:00
    jobset, snapshot = _existing(raw)
    seen = observed(jobsets=[jobset], configmaps=[snapshot])
    plan = plan_trainjob(raw, seen, now=NOW)
    assert plan.requeue_after == 3600.0
    assert _conditions(plan) == []
    late = NOW + dt.timedelta(hours=1, seconds=1)
    plan = plan_trainjob(raw, seen, now=late)
    assert plan.actions == (
        DeleteObject(
            kind="JobSet",
            namespace="default",
            name="test-job",
            uid="jobset-uid",
            reason="deadline exceeded",
        ),
    )
    assert _conditions(plan) == [
        {
            "type": "Failed",
            "status": "True",
            "reason": "DeadlineExceeded",
            "message": "TrainJob exceeded its active deadline",
            "lastTransitionTime": "2026-08-10T13:00:01Z",
        }
    ]
    # A JobSet that reports failing as its pods are killed does not reword the deadline.
    jobset["status"] = {
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "FailedJobs",
                "message": "m",
                "lastTransitionTime": "2026-08-10T13:00:02Z",
            }
        ]
    }
    # Its deletion under way: nothing more to do.
    jobset["metadata"]["deletionTimestamp"] = "2026-08-10T13:00:02Z"
    after = plan_trainjob(
        _after(raw, plan), observed(jobsets=[jobset], configmaps=[snapshot]), now=late
    )
    assert _conditions(after) == _conditions(plan)
    assert after.actions == ()


def test_a_deadline_failure_whose_jobset_deletion_never_landed_deletes_it_later() -> None:
    """The Failed status written, the operator killed before the JobSet's deletion: the next
    process, even much later, deletes it (the Failed status alone says it is owed), and never
    creates a JobSet again."""
    raw = trainjob(activeDeadlineSeconds=7200)  # created 11:00, now 12:00
    jobset, snapshot = _existing(raw)
    late = NOW + dt.timedelta(hours=1, seconds=1)
    plan = plan_trainjob(raw, observed(jobsets=[jobset], configmaps=[snapshot]), now=late)
    failed = _after(raw, plan)
    for now in (late, late + dt.timedelta(days=1)):
        again = plan_trainjob(failed, observed(jobsets=[jobset], configmaps=[snapshot]), now=now)
        assert again.actions == plan.actions
        assert [type(a).__name__ for a in again.actions] == ["DeleteObject"]
    gone = plan_trainjob(failed, observed(configmaps=[snapshot]), now=late)
    assert gone.actions == ()
    assert _conditions(gone) == _conditions(plan)


def test_the_deadline_waits_while_suspended_and_restarts_on_resume() -> None:
    raw = trainjob(suspend=True, activeDeadlineSeconds=60)
    assert plan_trainjob(raw, observed(runtime=RT), now=NOW).requeue_after is None
    raw["spec"]["suspend"] = False
    raw["status"] = {
        "conditions": [
            {
                "type": "Suspended",
                "status": "False",
                "reason": "Resumed",
                "message": "TrainJob is resumed",
                "lastTransitionTime": "2026-08-10T11:59:30Z",
            }
        ]
    }
    assert plan_trainjob(raw, observed(runtime=RT), now=NOW).requeue_after == 30.0


def test_a_jobset_of_another_owner_is_never_touched() -> None:
    raw = trainjob()
    jobset, _ = _existing(raw)
    jobset["metadata"]["ownerReferences"] = []
    plan = plan_trainjob(
        raw, observed(runtime=RT, others={("JobSet", "test-job"): jobset}), now=NOW
    )
    assert [a.kind for a in plan.actions] == ["ConfigMap"]  # type: ignore[union-attr]
    [event] = plan.events
    assert event.reason == "ErrResourceExists"


def test_jobset_spec_defaults_do_not_count_as_drift() -> None:
    """A suspended JobSet as the API server and JobSet's webhook return it (defaults added,
    quantities rewritten) needs no patch."""
    raw = trainjob(suspend=True, trainer={"resourcesPerNode": {"requests": {"cpu": "0.5"}}})
    jobset, snapshot = _existing(raw)
    for rjob in jobset["spec"]["replicatedJobs"]:
        rjob["template"]["spec"]["completionMode"] = "Indexed"
        rjob["template"]["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    jobset["spec"]["network"] = {"enableDNSHostnames": True}
    node = jobset["spec"]["replicatedJobs"][2]["template"]["spec"]["template"]["spec"][
        "containers"
    ][0]
    node["resources"]["requests"]["cpu"] = "500m"
    plan = plan_trainjob(raw, observed(jobsets=[jobset], configmaps=[snapshot]), now=NOW)
    assert plan.actions == ()


def test_jobset_spec_of_the_example_runtime() -> None:
    """The shipped torch-distributed runtime's one replicated job, for 01-multi-node.yaml."""
    spec = {
        "replicatedJobs": [
            {
                "name": NODE,
                "template": {
                    "metadata": {
                        "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                    },
                    "spec": {
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": NODE,
                                        "image": "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime",
                                    }
                                ]
                            }
                        }
                    },
                },
            }
        ]
    }
    rt = runtime(
        spec,
        ml_policy={"numNodes": 1, "torch": {}},
        kind="ClusterTrainingRuntime",
        name="torch-distributed",
    )
    raw = trainjob(
        "multi-node-example",
        runtime_kind="ClusterTrainingRuntime",
        runtime_name="torch-distributed",
        trainer={"numNodes": 3, "command": ["torchrun", "train.py"]},
    )
    body = _created(plan_trainjob(raw, observed(runtime=rt), now=NOW), "JobSet")
    [job] = body["spec"]["replicatedJobs"]
    assert job["replicas"] == 1
    assert (job["template"]["spec"]["parallelism"], job["template"]["spec"]["completions"]) == (
        3,
        3,
    )
    [node] = job["template"]["spec"]["template"]["spec"]["containers"]
    assert node["command"] == ["torchrun", "train.py"]
    assert node["image"] == "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"
    assert [e["name"] for e in node["env"]] == [
        "PET_NNODES",
        "PET_NPROC_PER_NODE",
        "PET_NODE_RANK",
        "PET_MASTER_ADDR",
        "PET_MASTER_PORT",
    ]
    assert node["env"][3]["value"] == "multi-node-example-node-0-0.multi-node-example"


def test_a_running_trainjob_from_before_snapshots_gets_one() -> None:
    """KEP-2599's migration: a TrainJob whose JobSet runs but has no snapshot gets one from
    the runtime as it is now, and nothing else; without the runtime, the event says so."""
    raw = trainjob()
    jobset, _ = _existing(raw)
    plan = plan_trainjob(raw, observed(runtime=RT, jobsets=[jobset]), now=NOW)
    assert [(type(a).__name__, a.kind) for a in plan.actions] == [  # type: ignore[union-attr]
        ("CreateObject", "ConfigMap")
    ]
    gone = plan_trainjob(raw, observed(runtime=None, jobsets=[jobset]), now=NOW)
    assert gone.actions == ()
    assert [e.reason for e in gone.events] == ["TrainJobResourcesCreationFailed"]
