"""The shared job models: wire format, tolerant parsing, timestamps, the JobModel envelope."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from jobcontroller.api import (
    CleanPodPolicy,
    JobCondition,
    JobConditionType,
    JobStatus,
    ReplicaSpec,
    RestartPolicy,
    RunPolicy,
    canonical_replica_types,
    format_time,
    replica_port,
    set_default_port,
)
from tf_operator.api import TFJob


def _raw_job(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "mnist", "namespace": "team-a", "uid": "u-1", "generation": 3},
        "spec": {
            "tfReplicaSpecs": {
                "Worker": {
                    "replicas": 2,
                    "restartPolicy": "OnFailure",
                    "template": {"spec": {"containers": [{"name": "tensorflow", "image": "i"}]}},
                }
            },
            **spec,
        },
    }


def test_parse_reads_camel_case_and_dumps_it_back_without_nones() -> None:
    raw = _raw_job(runPolicy={"cleanPodPolicy": "All", "ttlSecondsAfterFinished": 30})
    job = TFJob.parse(raw)
    assert job.run_policy.clean_pod_policy is CleanPodPolicy.ALL
    assert job.run_policy.ttl_seconds_after_finished == 30
    out = job.to_dict()
    assert out["apiVersion"] == "kubeflow.org/v1" and out["kind"] == "TFJob"
    assert out["spec"]["runPolicy"] == {"cleanPodPolicy": "All", "ttlSecondsAfterFinished": 30}
    worker = out["spec"]["tfReplicaSpecs"]["Worker"]
    assert worker == raw["spec"]["tfReplicaSpecs"]["Worker"]
    assert "successPolicy" not in out["spec"]


def test_parse_ignores_unknown_fields_of_stored_objects() -> None:
    raw = _raw_job(someFutureField={"x": 1})
    raw["spec"]["runPolicy"] = {"futurePolicy": True}
    raw["status"] = {"futureStatus": 1, "conditions": []}
    job = TFJob.parse(raw)
    assert "someFutureField" not in job.to_dict()["spec"]


def test_pod_templates_are_kept_verbatim() -> None:
    template = {
        "metadata": {"labels": {"a": "b"}},
        "spec": {
            "containers": [{"name": "tensorflow", "image": "i", "futureField": [1, 2]}],
            "nodeSelector": {"gpu": "true"},
        },
    }
    raw = _raw_job()
    raw["spec"]["tfReplicaSpecs"]["Worker"]["template"] = template
    assert TFJob.parse(raw).to_dict()["spec"]["tfReplicaSpecs"]["Worker"]["template"] == template


def test_unknown_enum_values_are_rejected() -> None:
    with pytest.raises(ValidationError):
        ReplicaSpec.model_validate({"restartPolicy": "Sometimes"})


def test_snake_case_names_are_accepted_too() -> None:
    spec = ReplicaSpec(replicas=3, restart_policy=RestartPolicy.EXIT_CODE)
    assert spec.to_dict() == {"replicas": 3, "template": {}, "restartPolicy": "ExitCode"}


def test_metadata_helpers_read_the_raw_metadata() -> None:
    raw = _raw_job()
    raw["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    raw["metadata"]["labels"] = {"team": "a"}
    job = TFJob.parse(raw)
    assert (job.name, job.namespace, job.uid, job.key) == ("mnist", "team-a", "u-1", "team-a/mnist")
    assert job.generation == 3
    assert job.labels == {"team": "a"}
    assert job.annotations == {}
    assert job.deletion_timestamp == "2024-01-01T00:00:00Z"


def test_replica_specs_hook_reaches_the_framework_map() -> None:
    job = TFJob.parse(_raw_job())
    assert list(job.replica_specs()) == ["Worker"]
    assert job.replica_specs()["Worker"].replicas == 2


def test_explicit_api_version_and_kind_are_kept() -> None:
    raw = {**_raw_job(), "apiVersion": "kubeflow.org/v1", "kind": "TFJob"}
    assert TFJob.parse(raw).api_version == "kubeflow.org/v1"


@pytest.mark.parametrize(
    ("given", "wire"),
    [
        ("2020-08-23T01:05:31Z", "2020-08-23T01:05:31Z"),
        ("2020-08-23T01:05:31.987654Z", "2020-08-23T01:05:31Z"),
        ("2020-08-23T03:05:31+02:00", "2020-08-23T01:05:31Z"),
    ],
)
def test_times_are_written_as_utc_seconds(given: str, wire: str) -> None:
    cond = JobCondition.model_validate(
        {"type": "Running", "status": "True", "lastTransitionTime": given}
    )
    assert cond.to_dict()["lastTransitionTime"] == wire
    assert cond.last_transition_time is not None
    assert cond.last_transition_time.tzinfo is not None


def test_times_set_in_memory_equal_the_same_time_read_back() -> None:
    now = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    status = JobStatus(start_time=now)
    again = JobStatus.model_validate(status.to_dict())
    assert again == status
    # Naive datetimes are taken as UTC; other zones are converted.
    assert format_time(datetime(2024, 1, 1, 12)) == "2024-01-01T12:00:00Z"
    plus_two = timezone(timedelta(hours=2))
    assert format_time(datetime(2024, 1, 1, 12, tzinfo=plus_two)) == "2024-01-01T10:00:00Z"
    # Whole seconds, four-digit years, as Go's time.RFC3339 writes them.
    assert format_time(datetime(2024, 1, 1, 12, 0, 0, 999999, tzinfo=UTC)) == "2024-01-01T12:00:00Z"
    assert format_time(datetime(1, 1, 1, tzinfo=UTC)) == "0001-01-01T00:00:00Z"


def test_a_zone_at_utc_only_in_winter_is_still_converted_to_utc() -> None:
    """A stored `...Z` time is kept as parsed; a zone whose offset is 0 only part of the year
    is not UTC: arithmetic across its clock change would run on its wall time."""
    winter = datetime(2024, 1, 1, 12, tzinfo=ZoneInfo("Europe/London"))
    status = JobStatus(start_time=winter)
    assert status.start_time is not None and status.start_time.utcoffset() == timedelta(0)
    summer = status.start_time + timedelta(days=182)
    assert summer.utcoffset() == timedelta(0)  # UTC, not London's summer time
    parsed = JobStatus.model_validate({"startTime": "2024-01-01T12:00:00Z"}).start_time
    assert parsed == winter and format_time(parsed) == "2024-01-01T12:00:00Z"


def test_assignment_is_validated() -> None:
    cond = JobCondition(type="Running", status="True")
    cond.last_update_time = datetime(2024, 1, 1, 0, 0, 0, 999, tzinfo=UTC)
    assert cond.last_update_time.microsecond == 0
    with pytest.raises(ValidationError):
        RunPolicy().backoff_limit = -1


def test_status_condition_queries() -> None:
    status = JobStatus.model_validate(
        {
            "conditions": [
                {"type": "Created", "status": "True"},
                {"type": "Running", "status": "False"},
                {"type": "Succeeded", "status": "True"},
                {"type": "QuotaReserved", "status": "True"},
            ],
            "replicaStatuses": {"Worker": {"active": 1}},
        }
    )
    assert status.is_condition_true(JobConditionType.CREATED)
    assert not status.is_condition_true(JobConditionType.RUNNING)
    assert status.condition(JobConditionType.FAILED) is None
    assert status.is_finished()
    assert status.replica_statuses["Worker"].succeeded == 0
    assert not JobStatus().is_finished()


def test_canonical_replica_types_fixes_case_and_keeps_unknown_keys() -> None:
    specs = {"ps": ReplicaSpec(replicas=1), "WORKER": ReplicaSpec(replicas=2)}
    specs["tpu"] = ReplicaSpec(replicas=3)
    out = canonical_replica_types(specs, known=("Chief", "PS", "Worker"))
    assert {k: v.replicas for k, v in out.items()} == {"PS": 1, "Worker": 2, "tpu": 3}


def test_canonical_replica_types_prefers_the_exact_key() -> None:
    specs = {"Worker": ReplicaSpec(replicas=1), "worker": ReplicaSpec(replicas=9)}
    assert canonical_replica_types(specs, known=("Worker",))["Worker"].replicas == 1


def test_set_default_port_appends_to_the_named_container_only_when_missing() -> None:
    template: dict[str, Any] = {
        "spec": {"containers": [{"name": "sidecar"}, {"name": "tensorflow", "ports": []}]}
    }
    set_default_port(template, container_name="tensorflow", port_name="tfjob-port", port=2222)
    set_default_port(template, container_name="tensorflow", port_name="tfjob-port", port=2222)
    containers = template["spec"]["containers"]
    assert "ports" not in containers[0]
    assert containers[1]["ports"] == [{"name": "tfjob-port", "containerPort": 2222}]


def test_set_default_port_keeps_a_user_port_and_falls_back_to_container_zero() -> None:
    custom = {"name": "tfjob-port", "containerPort": 9999}
    named: dict[str, Any] = {"spec": {"containers": [{"name": "tensorflow", "ports": [custom]}]}}
    set_default_port(named, container_name="tensorflow", port_name="tfjob-port", port=2222)
    assert named["spec"]["containers"][0]["ports"] == [custom]
    other: dict[str, Any] = {"spec": {"containers": [{"name": "main"}, {"name": "side"}]}}
    set_default_port(other, container_name="tensorflow", port_name="tfjob-port", port=2222)
    assert other["spec"]["containers"][0]["ports"] == [
        {"name": "tfjob-port", "containerPort": 2222}
    ]
    empty: dict[str, Any] = {}
    set_default_port(empty, container_name="tensorflow", port_name="tfjob-port", port=2222)
    assert empty == {}


def _ported(*containers: dict[str, Any]) -> TFJob:
    template = {"spec": {"containers": list(containers)}}
    return TFJob.parse(_raw_job(tfReplicaSpecs={"Worker": {"template": template}}))


def test_replica_port_reads_the_named_port_of_the_default_container() -> None:
    def port(*containers: dict[str, Any]) -> int:
        job = _ported(*containers)
        return replica_port(job, "Worker", port_name="tfjob-port", default=2222)

    ports = [{"name": "other", "containerPort": 1}, {"name": "tfjob-port", "containerPort": 3000}]
    assert port({"name": "tensorflow", "ports": ports}) == 3000
    # Only the default container counts, as in v1.9, even where defaulting put the port on
    # the first one.
    assert port({"name": "main", "ports": ports}) == 2222
    assert port({"name": "tensorflow"}) == 2222
    # The first port of that name wins, whatever its number (v1.9 returns it as it is).
    zero = [{"name": "tfjob-port", "containerPort": 0}, {"name": "tfjob-port", "containerPort": 5}]
    assert port({"name": "tensorflow", "ports": zero}) == 0
    job = _ported({"name": "tensorflow"})
    assert replica_port(job, "Chief", port_name="tfjob-port", default=2222) == 2222
