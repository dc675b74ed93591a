"""What Kueue's TrainJob integration (v0.17.0) asks of the planner, beyond upstream's "update
JobSet when TrainJob is suspended" case: its admission and its preemption each write the
TrainJob twice (its runtime patch, then ``suspend``, or the other way round), and a reconcile may
see both writes at once. The JobSet must still end up as Kueue means it, in one patch JobSet's
webhook takes (pod-template changes are allowed while the JobSet is, or is getting, suspended).
"""

from __future__ import annotations

import copy
from typing import Any

from trainjob_fixtures import NODE, NOW, observed, pod_spec, runtime, stored, trainjob

from jobcontroller import CreateObject, PatchObject, Plan
from trainer_operator.planner import plan_trainjob

Obj = dict[str, Any]
RT = runtime(ml_policy={"numNodes": 2, "torch": {}})
KUEUE = "kueue.x-k8s.io/manager"
TOLERATION = {"key": "pool", "operator": "Exists", "effect": "NoSchedule"}


def _kueue_patch(placement: Obj | None) -> Obj:
    """Kueue's runtimePatches entry: the queue label always; the admitted flavor's placement
    for the trainer's pods while admitted (None: not admitted)."""
    spec: Obj = {}
    if placement is not None:
        spec["replicatedJobs"] = [
            {
                "name": NODE,
                "template": {
                    "spec": {
                        "template": {
                            "metadata": {"labels": {"kueue.x-k8s.io/podset": NODE}},
                            "spec": placement,
                        }
                    }
                },
            }
        ]
    return {
        "manager": KUEUE,
        "trainingRuntimeSpec": {
            "template": {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "lq"}}, "spec": spec}
        },
    }


def _trainjob(*, suspend: bool, placement: Obj | None) -> Obj:
    raw = trainjob(suspend=suspend)
    raw["spec"]["runtimePatches"] = [_kueue_patch(placement)]
    return raw


def _created(plan: Plan, kind: str) -> Obj:
    [body] = [a.body for a in plan.actions if isinstance(a, CreateObject) and a.kind == kind]
    return body


def _jobset_patch(plan: Plan) -> Obj:
    [patch] = [a.patch for a in plan.actions if isinstance(a, PatchObject) and a.kind == "JobSet"]
    return patch


def _admitted(placement: Obj) -> tuple[Obj, Obj]:
    """The running JobSet and the snapshot of a TrainJob admitted with ``placement``."""
    first = plan_trainjob(
        _trainjob(suspend=False, placement=placement), observed(runtime=RT), now=NOW
    )
    jobset = _created(first, "JobSet")
    assert jobset["spec"]["suspend"] is False
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq"
    return stored(jobset), stored(_created(first, "ConfigMap"), uid="cm-uid")


def test_preemption_seen_at_once_suspends_the_jobset_and_takes_the_placement_out() -> None:
    """Kueue suspends the TrainJob, then (once no Job is active) removes its placement; a
    reconcile that sees both suspends the running JobSet and removes the placement in the same
    patch, so the JobSet does not resume later on the old flavor's nodes."""
    placement = {"nodeSelector": {"pool": "a"}, "tolerations": [TOLERATION]}
    jobset, snapshot = _admitted(placement)
    assert pod_spec(jobset["spec"], NODE)["nodeSelector"] == {"pool": "a"}
    preempted = _trainjob(suspend=True, placement=None)
    plan = plan_trainjob(preempted, observed(jobsets=[jobset], configmaps=[snapshot]), now=NOW)
    patch = _jobset_patch(plan)
    assert patch["spec"]["suspend"] is True
    assert patch["metadata"] == {"resourceVersion": "5"}
    node = pod_spec(patch["spec"], NODE)
    assert "nodeSelector" not in node and "tolerations" not in node, node
    [rjob] = [r for r in patch["spec"]["replicatedJobs"] if r["name"] == NODE]
    labels = rjob["template"]["spec"]["template"].get("metadata", {}).get("labels") or {}
    assert "kueue.x-k8s.io/podset" not in labels, labels
    # The JobSet keeps the queue label (Kueue's patch keeps it).
    assert "metadata" not in patch or "labels" not in patch["metadata"]


def test_readmission_on_another_flavor_seen_at_once_moves_and_resumes_the_jobset() -> None:
    """Readmitted on another flavor: Kueue writes the new placement, then unsuspends; a
    reconcile that sees both puts the new placement on the suspended JobSet and resumes it
    in one patch."""
    jobset, snapshot = _admitted({"nodeSelector": {"pool": "a"}})
    suspended = copy.deepcopy(jobset)
    suspended["spec"]["suspend"] = True
    pod_spec(suspended["spec"], NODE).pop("nodeSelector")
    readmitted = _trainjob(suspend=False, placement={"nodeSelector": {"pool": "b"}})
    plan = plan_trainjob(readmitted, observed(jobsets=[suspended], configmaps=[snapshot]), now=NOW)
    patch = _jobset_patch(plan)
    assert patch["spec"]["suspend"] is False
    assert pod_spec(patch["spec"], NODE)["nodeSelector"] == {"pool": "b"}


def test_a_running_jobset_is_left_as_it_is_while_kueue_keeps_it_admitted() -> None:
    jobset, snapshot = _admitted({"nodeSelector": {"pool": "a"}})
    admitted = _trainjob(suspend=False, placement={"nodeSelector": {"pool": "a"}})
    plan = plan_trainjob(admitted, observed(jobsets=[jobset], configmaps=[snapshot]), now=NOW)
    assert [a for a in plan.actions if isinstance(a, PatchObject)] == []
