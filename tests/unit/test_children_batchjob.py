"""The base's child batch Job: suspended and resumed with the job, held while it waits,
stopped at clean-up, left alone once finished, its scheduling directives brought up to date
when it is resumed before it started, and its counts read back as a replica's status."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from jobcontroller import Children, Obj, Observed, PatchObject, batch_job_child, reconcile_children
from jobcontroller.api import JobStatus
from jobcontroller.core.batchjob import child_replica_statuses
from jobcontroller.core.conditions import set_condition
from tf_operator.api import TFJob

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
SPEC: Obj = {
    "template": {
        "metadata": {"labels": {"role": "launcher"}},
        "spec": {"containers": [{"name": "l", "image": "x"}], "restartPolicy": "Never"},
    }
}


def _job(*, suspend: bool = False, clean: str = "Running") -> TFJob:
    return TFJob.parse(
        {
            "metadata": {"name": "toy", "namespace": "ns", "uid": "u"},
            "spec": {
                "runPolicy": {"suspend": suspend, "cleanPodPolicy": clean},
                "tfReplicaSpecs": {"Worker": {"replicas": 1, "template": {}}},
            },
        }
    )


def _stored(*, suspend: bool, status: Obj | None = None, **template_spec: Any) -> Obj:
    spec = copy.deepcopy(SPEC)
    spec["suspend"] = suspend
    spec["template"]["spec"].update(template_spec)
    return {
        "metadata": {"name": "toy-launcher", "uid": "j", "ownerReferences": [{"uid": "u"}]},
        "spec": spec,
        "status": status or {},
    }


def _plan(job: TFJob, stored: Obj | None, status: JobStatus, **kwargs: Any) -> list[Any]:
    observed = Observed(owned={"Job": [stored] if stored else []}, lookup=lambda k, n: stored)
    child = batch_job_child(job, observed, status, name="toy-launcher", spec=SPEC, **kwargs)
    planned = reconcile_children(
        job, observed, Children(kinds=frozenset({"Job"}), wanted=[child]), controller_name="c"
    )
    return planned.actions


def _finished() -> JobStatus:
    status = JobStatus()
    set_condition(status, cond_type="Failed", reason="r", message="m", now=NOW)
    return status


def test_suspend_and_resume_follow_the_job() -> None:
    assert [a.patch for a in _plan(_job(suspend=True), _stored(suspend=False), JobStatus())] == [
        {"spec": {"suspend": True}}
    ]
    [resume] = _plan(_job(), _stored(suspend=True, status={"startTime": "t"}), JobStatus())
    assert isinstance(resume, PatchObject) and resume.patch == {"spec": {"suspend": False}}


def test_a_held_job_stays_suspended_and_a_forbidden_one_is_not_created() -> None:
    assert _plan(_job(), _stored(suspend=True), JobStatus(), hold=True) == []
    assert _plan(_job(), None, JobStatus(), create=False) == []


def test_resuming_before_start_brings_scheduling_directives_up_to_date() -> None:
    stored = _stored(suspend=True, nodeSelector={"zone": "a"}, tolerations=[{"key": "k"}])
    stored["spec"]["template"]["metadata"]["annotations"] = {"kueue": "yes"}
    [resume] = _plan(_job(), stored, JobStatus())
    assert resume.patch == {
        "spec": {
            "suspend": False,
            "template": {"spec": {"nodeSelector": {"zone": None}, "tolerations": None}},
        }
    }


def test_a_spec_given_as_a_function_is_built_only_where_it_is_read() -> None:
    """Creation and a resume that brings the template up to date build it, and plan as the
    spec itself does; a pass over a Job that only follows it builds nothing."""
    built: list[int] = []

    def build() -> Obj:
        built.append(1)
        return copy.deepcopy(SPEC)

    def plan_both(stored: Obj | None) -> tuple[list[Any], list[Any]]:
        observed = Observed(owned={"Job": [stored] if stored else []}, lookup=lambda k, n: stored)
        plans = []
        for spec in (SPEC, build):
            child = batch_job_child(_job(), observed, JobStatus(), name="toy-launcher", spec=spec)
            kinds = Children(kinds=frozenset({"Job"}), wanted=[child])
            plans.append(reconcile_children(_job(), observed, kinds, controller_name="c").actions)
        return plans[0], plans[1]

    eager, lazy = plan_both(None)
    assert lazy == eager and len(lazy) == 1 and built == [1]
    stored = _stored(suspend=True, nodeSelector={"zone": "a"})
    eager, lazy = plan_both(stored)
    assert lazy == eager and len(lazy) == 1 and built == [1, 1]
    eager, lazy = plan_both(_stored(suspend=False, status={"startTime": "t"}))
    assert lazy == eager == [] and built == [1, 1]
    eager, lazy = plan_both(_stored(suspend=True, status={"startTime": "t"}))
    assert lazy == eager and [a.patch for a in lazy] == [{"spec": {"suspend": False}}]
    assert built == [1, 1]


def test_clean_up_stops_a_running_child_and_a_finished_one_is_left_alone() -> None:
    assert [a.patch for a in _plan(_job(), _stored(suspend=False), _finished())] == [
        {"spec": {"suspend": True}}
    ]
    assert _plan(_job(clean="None"), _stored(suspend=False), _finished()) == []
    done = _stored(suspend=False, status={"conditions": [{"type": "Complete", "status": "True"}]})
    assert _plan(_job(suspend=True), done, JobStatus()) == []
    assert _plan(_job(), None, _finished()) == []


def test_counts_become_the_replica_status() -> None:
    stored = _stored(suspend=False, status={"active": 1, "failed": 2})
    observed = Observed(owned={"Job": [stored]})
    child = batch_job_child(
        _job(), observed, JobStatus(), name="toy-launcher", spec=SPEC, rtype="Launcher"
    )
    counts = child_replica_statuses([child], observed)["Launcher"]
    assert (counts.active, counts.succeeded, counts.failed) == (1, 0, 2)


def _carried(**run_policy: Any) -> Obj:
    job = TFJob.parse(
        {
            "metadata": {"name": "toy", "namespace": "ns", "uid": "u"},
            "spec": {
                "runPolicy": run_policy,
                "tfReplicaSpecs": {"Worker": {"replicas": 1, "template": {}}},
            },
        }
    )
    child = batch_job_child(
        job, Observed(), JobStatus(), name="toy-launcher", spec=SPEC, carries_run_policy=True
    )
    return child.body


def test_a_job_that_carries_the_run_policy_enforces_it() -> None:
    body = _carried(backoffLimit=2, activeDeadlineSeconds=30, ttlSecondsAfterFinished=60)
    spec = {k: v for k, v in body["spec"].items() if k != "template"}
    assert spec == {
        "backoffLimit": 2,
        "activeDeadlineSeconds": 30,
        "ttlSecondsAfterFinished": 60,
        "suspend": False,
    }
    assert "annotations" not in body["metadata"]
    assert set(_carried()["spec"]) == {"template", "suspend"}  # Kubernetes' defaults


def test_under_a_whole_gang_restart_the_base_counts_the_retries() -> None:
    body = _carried(backoffLimit=2, restartScope="All")
    # A failed pod fails the Job at once; the gang restart is the base's, under backoffLimit.
    assert body["spec"]["backoffLimit"] == 0
    assert body["metadata"]["annotations"] == {"training.kubeflow.org/gang-generation": "0"}
