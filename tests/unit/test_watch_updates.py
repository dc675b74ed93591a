"""Which updates of cached objects wake a job (controller/watch.py): a change only to a field
no plan reads does not, and neither does the watch bringing back the status this process is
writing before the write's answer comes (tests/unit/test_cache_projection.py checks that no
plan reads those fields)."""

from __future__ import annotations

import copy
from typing import Any

from jobcontroller.controller.watch import own_status_echo, unread_change_only


def _launcher(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "pi-launcher", "namespace": "ns", "resourceVersion": "10"},
        "spec": {"suspend": False},
        "status": {"active": 1, "ready": 0, **status},
    }


def _moved(obj: dict[str, Any], **status: Any) -> dict[str, Any]:
    new = copy.deepcopy(obj)
    new["metadata"]["resourceVersion"] = "11"
    new["status"].update(status)
    return new


def test_a_batch_job_counting_its_ready_pod_wakes_no_one() -> None:
    old = _launcher()
    assert unread_change_only("Job", old, _moved(old, ready=1))


def test_a_batch_job_whose_counts_move_wakes_its_owner() -> None:
    old = _launcher()
    assert not unread_change_only("Job", old, _moved(old, ready=0, active=0, succeeded=1))
    assert not unread_change_only("Job", old, _moved(old, ready=1, failed=1))
    suspended = _moved(old)
    suspended["spec"]["suspend"] = True
    assert not unread_change_only("Job", old, suspended)


def test_a_pod_losing_its_tracking_finalizer_wakes_no_one() -> None:
    old = {
        "metadata": {
            "name": "pi-launcher-x",
            "resourceVersion": "5",
            "finalizers": ["batch.kubernetes.io/job-tracking"],
        },
        "status": {"phase": "Succeeded"},
    }
    new = copy.deepcopy(old)
    new["metadata"].update(resourceVersion="6", finalizers=[])
    assert unread_change_only("Pod", old, new)
    deleted = copy.deepcopy(new)
    deleted["metadata"]["deletionTimestamp"] = "2026-11-27T18:00:00Z"
    assert not unread_change_only("Pod", old, deleted)
    failed = copy.deepcopy(new)
    failed["status"]["phase"] = "Failed"
    assert not unread_change_only("Pod", old, failed)


def test_kinds_without_unread_fields_always_wake() -> None:
    old = {"metadata": {"name": "svc", "resourceVersion": "1"}, "spec": {}}
    new = copy.deepcopy(old)
    new["metadata"]["resourceVersion"] = "2"
    assert not unread_change_only("Service", old, new)


def _job(status: dict[str, Any], rv: str = "7") -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": "ns", "resourceVersion": rv, "generation": 1},
        "spec": {"slotsPerWorker": 1},
        "status": status,
    }


def test_the_echo_of_our_status_write_is_recognised() -> None:
    sent = {"conditions": [{"type": "Running", "status": "True"}]}
    old = _job({"conditions": [{"type": "Created", "status": "True"}]})
    echo = _job(copy.deepcopy(sent), rv="8")
    assert own_status_echo(old, echo, sent)


def test_anything_else_in_the_update_is_not_an_echo() -> None:
    sent = {"conditions": [{"type": "Running", "status": "True"}]}
    old = _job({"conditions": [{"type": "Created", "status": "True"}]})
    assert not own_status_echo(old, _job(copy.deepcopy(sent), rv="8"), None)
    other = _job({"conditions": [{"type": "Failed", "status": "True"}]}, rv="8")
    assert not own_status_echo(old, other, sent)
    edited = _job(copy.deepcopy(sent), rv="8")
    edited["spec"]["slotsPerWorker"] = 2
    edited["metadata"]["generation"] = 2
    assert not own_status_echo(old, edited, sent)
    labelled = _job(copy.deepcopy(sent), rv="8")
    labelled["metadata"]["labels"] = {"team": "a"}
    assert not own_status_echo(old, labelled, sent)
