"""The base library's API for operator authors: replica rules, defaulting, shared validation,
the CRD a model completes by itself, the env helper and the stock success rules."""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

import pytest
from pydantic import Field

from jobcontroller import (
    ReplicaPods,
    all_workers,
    master_decides,
    set_env,
    set_replica_selectors,
    worker0_decides,
)
from jobcontroller.api import (
    JobModel,
    JobSpec,
    JobStatus,
    ReplicaRules,
    ReplicaSpec,
    ReplicaStatus,
    RestartPolicy,
    build_crd,
    default_job,
    job_errors,
)

NOW = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.UTC)


class ToySpec(JobSpec):
    toy_replica_specs: dict[str, ReplicaSpec] = Field(description="Master and Worker.")


class ToyJob(JobModel[ToySpec]):
    GROUP: ClassVar[str] = "example.com"
    VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "ToyJob"
    PLURAL: ClassVar[str] = "toyjobs"
    SINGULAR: ClassVar[str] = "toyjob"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = ("Master", "Worker")
    DEFAULT_CONTAINER_NAME: ClassVar[str | None] = "toy"
    REPLICA_RULES: ClassVar[ReplicaRules | None] = ReplicaRules(
        required=("Master",), single=("Master",)
    )
    MANAGED_BY_SELF: ClassVar[str] = "example.com/toy-operator"


def _replica(replicas: int | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "toy", "image": "t"}]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {**spec, **extra}


def _job(specs: dict[str, Any], **run_policy: Any) -> ToyJob:
    return ToyJob.parse(
        {
            "metadata": {"name": "toy", "namespace": "ns"},
            "spec": {"toyReplicaSpecs": specs, "runPolicy": run_policy},
        }
    )


def test_the_replica_map_is_found_by_its_type() -> None:
    job = _job({"Master": _replica()})
    assert ToySpec.replica_specs_field() == "toy_replica_specs"
    assert list(job.replica_specs()) == ["Master"]

    class TwoMaps(JobSpec):
        a: dict[str, ReplicaSpec]
        b: dict[str, ReplicaSpec]

    with pytest.raises(TypeError, match="exactly one dict"):
        TwoMaps.replica_specs_field()


def test_default_job_fills_what_every_kind_defaults_without_touching_its_input() -> None:
    job = _job({"master": _replica(), "Worker": _replica(3, restartPolicy="OnFailure")})
    defaulted = default_job(
        job, restart_policy=RestartPolicy.NEVER, port_name="toy-port", port=29500
    )
    assert list(job.replica_specs()) == ["master", "Worker"]  # the input is unchanged
    specs = defaulted.replica_specs()
    assert list(specs) == ["Master", "Worker"]
    assert specs["Master"].replicas == 1
    assert specs["Master"].restart_policy == RestartPolicy.NEVER
    assert specs["Worker"].restart_policy == RestartPolicy.ON_FAILURE
    ports = specs["Worker"].template["spec"]["containers"][0]["ports"]
    assert ports == [{"name": "toy-port", "containerPort": 29500}]
    assert defaulted.run_policy.suspend is False
    assert defaulted.run_policy.clean_pod_policy == "None"


def test_job_errors_speak_the_go_webhooks_words_at_the_wire_path() -> None:
    job = _job({"Worker": _replica(2), "Chief": _replica()}, managedBy="someone/else")
    errors = job_errors(default_job(job, restart_policy=RestartPolicy.NEVER))
    assert (
        'spec.toyReplicaSpecs[Chief]: Unsupported value: "Chief": supported values: '
        '"Master", "Worker"' in errors
    )
    assert "spec.toyReplicaSpecs[Master]: Required value: must be present" in errors
    assert any(e.startswith("spec.runPolicy.managedBy: 'someone/else'") for e in errors)
    two_masters = default_job(_job({"Master": _replica(2)}), restart_policy=RestartPolicy.NEVER)
    assert job_errors(two_masters) == [
        "spec.toyReplicaSpecs[Master].replicas: Forbidden: must be 1"
    ]
    mine = _job({"Master": _replica()}, managedBy="example.com/toy-operator")
    assert job_errors(default_job(mine, restart_policy=RestartPolicy.NEVER)) == []


def test_build_crd_completes_admission_from_the_model() -> None:
    crd = build_crd(ToyJob)
    assert crd["metadata"]["name"] == "toyjobs.example.com"
    assert "categories" not in crd["spec"]["names"]  # `kubeflow` is for kubeflow.org kinds
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]
    replica_map = spec["properties"]["toyReplicaSpecs"]
    assert replica_map["maxProperties"] == 16
    messages = [r["message"] for r in replica_map["x-kubernetes-validations"]]
    assert messages == [
        "replica types must not differ only in case",
        'replica types must be one of "Master", "Worker"',
        "a Master replica spec is required",
        "Master replicas must be 1",
    ]
    item_rules = replica_map["additionalProperties"]["x-kubernetes-validations"]
    assert [r["message"] for r in item_rules] == [
        "the pod template must have a container named 'toy'"
    ]
    assert any(r.get("fieldPath") == ".metadata.name" for r in schema["x-kubernetes-validations"])
    managed = [r for r in spec["x-kubernetes-validations"] if "managedBy" in r["rule"]]
    assert "example.com/toy-operator" in managed[0]["rule"]


def test_set_env_leaves_the_users_values_unless_told_to_override() -> None:
    def template() -> dict[str, Any]:
        return {
            "spec": {
                "initContainers": [{"name": "init"}],
                "containers": [
                    {"name": "toy", "env": [{"name": "RANK", "value": "7"}, {"name": "LR"}]},
                    {"name": "sidecar"},
                ],
            }
        }

    kept = template()
    set_env(kept, {"RANK": "0", "WORLD_SIZE": "2"})
    assert kept["spec"]["containers"][0]["env"] == [
        {"name": "RANK", "value": "7"},
        {"name": "LR"},
        {"name": "WORLD_SIZE", "value": "2"},
    ]
    assert "env" not in kept["spec"]["initContainers"][0]

    ours = template()
    pod_ip = {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    set_env(ours, [("RANK", "0"), pod_ip], containers="toy", override=True)
    assert ours["spec"]["containers"][0]["env"] == [
        {"name": "LR"},
        {"name": "RANK", "value": "0"},
        pod_ip,
    ]
    assert "env" not in ours["spec"]["containers"][1]


def _status(**counts: tuple[int, int, int]) -> JobStatus:
    return JobStatus(
        replica_statuses={
            rtype: ReplicaStatus(active=a, succeeded=s, failed=f)
            for rtype, (a, s, f) in counts.items()
        }
    )


def _conditions(status: JobStatus) -> list[tuple[str, str, str]]:
    return [(c.type, c.reason, c.message) for c in status.conditions if c.status == "True"]


def _defaulted(specs: dict[str, Any]) -> ToyJob:
    return default_job(_job(specs), restart_policy=RestartPolicy.NEVER)


def test_master_decides_success_in_v19s_words() -> None:
    job = _defaulted({"Master": _replica(), "Worker": _replica(2)})
    running = _status(Master=(1, 0, 0), Worker=(2, 0, 0))
    master_decides(job, running, now=NOW)
    assert _conditions(running) == [("Running", "ToyJobRunning", "ToyJob toy is running.")]
    done = _status(Master=(0, 1, 0), Worker=(2, 0, 0))
    master_decides(job, done, now=NOW)
    assert ("Succeeded", "ToyJobSucceeded", "ToyJob toy is successfully completed.") in (
        _conditions(done)
    )


def test_a_failed_replica_fails_the_job_under_never_and_restarts_it_otherwise() -> None:
    never = _defaulted({"Master": _replica(), "Worker": _replica(2)})
    status = _status(Master=(1, 0, 0), Worker=(1, 0, 1))
    master_decides(never, status, now=NOW)
    assert _conditions(status)[-1] == (
        "Failed",
        "ToyJobFailed",
        "ToyJob toy is failed because 1 Worker replica(s) failed.",
    )
    on_failure = _defaulted(
        {"Master": _replica(), "Worker": _replica(2, restartPolicy="OnFailure")}
    )
    status = _status(Master=(1, 0, 0), Worker=(1, 0, 1))
    master_decides(on_failure, status, now=NOW)
    assert _conditions(status)[-1] == (
        "Restarting",
        "ToyJobRestarting",
        "ToyJob toy is restarting because 1 Worker replica(s) failed.",
    )


def test_without_a_master_all_workers_decide() -> None:
    job = _defaulted({"Worker": _replica(2)})
    half = _status(Worker=(1, 1, 0))
    master_decides(job, half, now=NOW)  # no Master: the same as all_workers
    assert _conditions(half) == [("Running", "ToyJobRunning", "ToyJob ns/toy is running.")]
    done = _status(Worker=(0, 2, 0))
    all_workers(job, done, now=NOW)
    assert _conditions(done) == [
        ("Succeeded", "ToyJobSucceeded", "ToyJob ns/toy successfully completed.")
    ]


def _pod(index: int, phase: str, exit_code: int | None) -> dict[str, Any]:
    state = {"terminated": {"exitCode": exit_code}} if exit_code is not None else {"running": {}}
    return {
        "metadata": {"name": f"toy-worker-{index}"},
        "status": {"phase": phase, "containerStatuses": [{"name": "toy", "state": state}]},
    }


def test_worker0_decides_on_worker_0s_exit_code_in_the_default_container() -> None:
    job = _defaulted({"Worker": _replica(3)})
    status = _status(Worker=(2, 1, 0))
    pods = {0: [_pod(0, "Succeeded", 0)], 1: [_pod(1, "Running", None)]}
    worker0_decides(job, status, replicas={"Worker": ReplicaPods("Worker", 3, pods)}, now=NOW)
    assert _conditions(status)[-1][0] == "Succeeded"
    status = _status(Worker=(3, 0, 0))
    running = {0: [_pod(0, "Running", None)]}
    worker0_decides(job, status, replicas={"Worker": ReplicaPods("Worker", 3, running)}, now=NOW)
    assert [c[0] for c in _conditions(status)] == ["Running"]


def test_replica_selectors_are_what_a_scale_subresource_hands_an_hpa() -> None:
    status = _status(Worker=(1, 0, 0))
    set_replica_selectors(status, controller_name="toyjob-controller", job_name="toy")
    assert status.replica_statuses["Worker"].selector == (
        "training.kubeflow.org/job-name=toy,"
        "training.kubeflow.org/operator-name=toyjob-controller,"
        "training.kubeflow.org/replica-type=worker"
    )
