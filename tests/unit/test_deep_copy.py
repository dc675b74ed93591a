"""``deep_copy`` (jobcontroller.api.deepcopy), the planner's copy of statuses, jobs and
templates: the copy :func:`copy.deepcopy` makes, sharing nothing a writer could change."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict

from jobcontroller.api import deep_copy
from jobcontroller.runtime.projection import (
    POD_SHAPE,
    Projected,
    SharedDict,
    SharedList,
    SharedObjectWrite,
    guarded,
    project,
)
from mpi_operator.api import MPIJob, MPIReplicaType
from tf_operator.api import TFJob


def _tfjob() -> TFJob:
    return TFJob.parse(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": "j", "namespace": "ns", "labels": {"a": "b"}},
            "spec": {
                "runPolicy": {"cleanPodPolicy": "Running", "schedulingPolicy": {"queue": "q"}},
                "tfReplicaSpecs": {
                    "Worker": {
                        "replicas": 2,
                        "restartPolicy": "OnFailure",
                        "template": {
                            "spec": {
                                "containers": [
                                    {"name": "tensorflow", "image": "i", "env": [{"name": "X"}]}
                                ]
                            }
                        },
                    }
                },
            },
            "status": {
                "conditions": [
                    {
                        "type": "Created",
                        "status": "True",
                        "reason": "TFJobCreated",
                        "lastUpdateTime": "2026-01-01T00:00:00Z",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
                "replicaStatuses": {"Worker": {"active": 2, "labelSelector": {"k": ["v"]}}},
                "startTime": "2026-01-01T00:00:01Z",
            },
        }
    )


def test_a_job_copy_is_equal_and_shares_nothing_writable() -> None:
    job = _tfjob()
    dumped = job.to_dict()
    copied = deep_copy(job)
    assert type(copied) is TFJob
    assert copied == job == copy.deepcopy(job)
    assert copied.to_dict() == dumped
    assert copied.model_fields_set == job.model_fields_set
    # Write into every level of the copy: the job it came from does not change.
    worker = copied.spec.tf_replica_specs["Worker"]
    worker.replicas = 5
    worker.template["spec"]["containers"][0]["env"].append({"name": "Y"})
    worker.template["spec"]["containers"][0]["image"] = "other"
    copied.status.conditions[0].status = "False"
    copied.status.conditions.append(copied.status.conditions[0])
    copied.status.replica_statuses["Worker"].active = 0
    copied.status.replica_statuses["Worker"].label_selector["k"].append("w")  # type: ignore[index]
    copied.metadata["labels"]["a"] = "c"
    copied.status.start_time = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    assert job.to_dict() == dumped


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")
    inner: list[_Open] = []


def test_fields_a_model_does_not_declare_are_copied_too() -> None:
    model = _Open.model_validate({"inner": [{"x": {"kept": [1, 2]}}], "y": [3]})
    copied = deep_copy(model)
    assert copied == model and copied.model_extra == {"y": [3]}
    copied.model_extra["y"].append(4)  # type: ignore[index]
    copied.inner[0].model_extra["x"]["kept"].append(3)  # type: ignore[index]
    assert model.model_dump() == {"inner": [{"inner": [], "x": {"kept": [1, 2]}}], "y": [3]}


def test_enum_members_and_atoms_are_the_same_objects() -> None:
    job = MPIJob.parse(
        {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": {"name": "j", "namespace": "ns"},
            "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": {}}}},
        }
    )
    copied = deep_copy(job)
    launcher = copied.spec.mpi_replica_specs[MPIReplicaType.LAUNCHER]
    assert launcher.restart_policy is job.spec.mpi_replica_specs["Launcher"].restart_policy
    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    value = {"t": when, "s": "x", "n": 1, "f": 1.5, "b": True, "z": None}
    out = deep_copy(value)
    assert out == value and out is not value
    assert all(out[k] is value[k] for k in value)


def test_cached_objects_copy_as_copy_deepcopy_copies_them() -> None:
    """A cached (projected, read-only) pod: its copy is writable, of the types
    copy.deepcopy gives (the top and metadata still Projected, so PUT still refuses it)."""
    pod = project(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n"},
            "status": {"phase": "Running"},
        },
        POD_SHAPE,
    )
    assert isinstance(pod["spec"], SharedDict)
    assert isinstance(pod["spec"]["containers"], SharedList)
    copied = deep_copy(pod)
    reference = copy.deepcopy(pod)
    assert copied == reference == pod

    def types(value: Any) -> Any:
        if isinstance(value, dict):
            return (type(value), {k: types(v) for k, v in value.items()})
        if isinstance(value, list):
            return (type(value), [types(v) for v in value])
        return type(value)

    assert types(copied) == types(reference)
    assert type(copied) is Projected and type(copied["metadata"]) is Projected
    copied["spec"]["containers"][0]["name"] = "other"
    copied["spec"]["containers"].append({"name": "d"})
    copied["metadata"]["labels"]["a"] = "c"
    assert pod["spec"]["containers"] == [{"name": "c"}]
    assert pod["metadata"]["labels"] == {"a": "b"}
    try:
        pod["spec"]["nodeName"] = "m"
    except SharedObjectWrite:
        pass
    else:
        raise AssertionError("the cached pod took a write")


def test_a_guarded_mapping_copies_to_a_plain_dict() -> None:
    view = guarded({"spec": {"nodeName": "n", "dropped": 1}}, {"spec": {"nodeName": None}})
    copied = deep_copy(view)
    assert copied == copy.deepcopy(view) == {"spec": {"nodeName": "n"}}
    assert type(copied["spec"]) is dict


def test_a_part_reachable_twice_becomes_two_independent_copies() -> None:
    """The one difference from copy.deepcopy (whose memo keeps them one object): writing into
    one replica's copied template must not change another's."""
    resources = {"limits": {"cpu": "1"}}
    templates = {"a": {"resources": resources}, "b": {"resources": resources}}
    copied = deep_copy(templates)
    copied["a"]["resources"]["limits"]["cpu"] = "2"
    assert copied["b"]["resources"]["limits"]["cpu"] == "1"
    assert resources == {"limits": {"cpu": "1"}}


def test_other_types_go_to_copy_deepcopy() -> None:
    value = {"t": (1, [2]), "s": {3}}
    copied = deep_copy(value)
    assert copied == value
    copied["t"][1].append(4)
    copied["s"].add(5)
    assert value == {"t": (1, [2]), "s": {3}}
