"""Reading pods: replica type and index, counts, exit codes and restarts."""

from __future__ import annotations

from typing import Any

import pytest

from jobcontroller.core import (
    NOT_TERMINATED_EXIT_CODE,
    abnormal_pod_events,
    count_replica_status,
    exit_code_of,
    group_by_index,
    is_retryable,
    pods_by_rtype,
    restart_count,
)


def pod(
    rtype: str = "worker",
    index: Any = 0,
    phase: str = "Running",
    *,
    terminating: bool = False,
    statuses: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": f"j-{rtype}-{index}",
        "labels": {
            "training.kubeflow.org/replica-type": rtype,
            "training.kubeflow.org/replica-index": str(index),
        },
    }
    if terminating:
        metadata["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {
        "metadata": metadata,
        "spec": {"containers": [{"name": "main"}, {"name": "sidecar"}]},
        "status": {"phase": phase, "containerStatuses": statuses or []},
    }


def test_pods_by_rtype_matches_lowercase_labels_and_drops_others() -> None:
    pods = [pod("worker"), pod("ps"), pod("evaluator")]
    grouped = pods_by_rtype(pods, rtypes=["Worker", "PS", "Chief"])
    assert {k: len(v) for k, v in grouped.items()} == {"Worker": 1, "PS": 1, "Chief": 0}


def test_pods_without_a_replica_type_label_are_classified_by_name() -> None:
    """mpi-operator's workers carry no replica-type label: after a swap they are still the
    job's workers, found by their names, with the index label they have."""
    unlabelled = pod("worker", 1)
    del unlabelled["metadata"]["labels"]["training.kubeflow.org/replica-type"]
    no_index = pod("worker", 3)
    no_index["metadata"]["labels"] = {}
    stray = pod("worker", 2)
    stray["metadata"]["labels"] = {}
    stray["metadata"]["name"] = "other-worker-2"
    odd = pod("worker", 4)
    odd["metadata"]["labels"] = {}
    odd["metadata"]["name"] = "j-worker-x"

    grouped = pods_by_rtype([unlabelled, no_index, stray, odd], rtypes=["Worker"], job_name="j")
    labels = [p["metadata"]["labels"] for p in grouped["Worker"]]
    assert labels == [
        {
            "training.kubeflow.org/replica-type": "worker",
            "training.kubeflow.org/replica-index": "1",
        },
        {
            "training.kubeflow.org/replica-type": "worker",
            "training.kubeflow.org/replica-index": "3",
        },
    ]
    assert "training.kubeflow.org/replica-type" not in unlabelled["metadata"]["labels"]
    # Without the job's name nothing is guessed.
    assert pods_by_rtype([unlabelled], rtypes=["Worker"]) == {"Worker": []}


def test_group_by_index_ignores_missing_or_bad_indices() -> None:
    pods = [pod(index=0), pod(index=2), pod(index="x"), pod(index=-1), pod(index=2)]
    assert {k: len(v) for k, v in group_by_index(pods).items()} == {0: 1, 2: 2}


def test_counts_by_phase() -> None:
    pods = [
        pod(phase="Running"),
        pod(phase="Running", terminating=True),
        pod(phase="Succeeded"),
        pod(phase="Failed"),
        pod(phase="Failed"),
        pod(phase="Pending"),
        pod(phase="Unknown"),
    ]
    counts = count_replica_status(pods)
    assert (counts.active, counts.succeeded, counts.failed) == (1, 1, 3)


def terminated(name: str, code: int) -> dict[str, Any]:
    return {"name": name, "state": {"terminated": {"exitCode": code}}}


def test_exit_code_read_from_the_named_container_only() -> None:
    p = pod(statuses=[terminated("sidecar", 1), terminated("main", 137)])
    assert exit_code_of(p, container="main") == 137
    assert exit_code_of(p, container="sidecar") == 1


def test_exit_code_defaults_to_first_container_when_unnamed() -> None:
    p = pod(statuses=[terminated("sidecar", 3), terminated("main", 2)])
    assert exit_code_of(p, container=None) == 2


def test_not_terminated_is_the_retryable_magic_code() -> None:
    p = pod(statuses=[{"name": "main", "state": {"running": {}}}])
    assert exit_code_of(p, container="main") == NOT_TERMINATED_EXIT_CODE == 0xBEEF
    assert exit_code_of(pod(), container="main") == NOT_TERMINATED_EXIT_CODE
    assert is_retryable(NOT_TERMINATED_EXIT_CODE)


@pytest.mark.parametrize(
    ("code", "retryable"), [(0, False), (1, False), (127, False), (128, True), (137, True)]
)
def test_retryable_exit_codes(code: int, retryable: bool) -> None:
    assert is_retryable(code) is retryable


def test_restart_count_sums_the_training_containers_only() -> None:
    p = pod(statuses=[{"name": "main", "restartCount": 2}, {"name": "sidecar", "restartCount": 1}])
    p["status"]["initContainerStatuses"] = [{"name": "init", "restartCount": 4}]
    assert restart_count(p) == 3
    p["status"]["phase"] = "Succeeded"
    assert restart_count(p) == 0


def test_abnormal_active_pods_are_worded_as_v1_9_records_them() -> None:
    pull = pod("worker", 0, "Pending")
    pull["status"]["containerStatuses"] = [
        {
            "name": "tensorflow",
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling"}},
        }
    ]
    crashed = pod("worker", 1, "Running")
    crashed["status"]["containerStatuses"] = [
        {
            "name": "tensorflow",
            "state": {"terminated": {"reason": "Error", "exitCode": 3, "message": "boom"}},
        }
    ]
    unschedulable = pod("worker", 2, "Pending")
    unschedulable["status"]["conditions"] = [
        {"type": "Initialized", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z"},
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/3 nodes are available",
            "lastTransitionTime": "2024-01-01T00:00:05Z",
        },
    ]
    init_waiting = pod("worker", 3, "Pending")
    init_waiting["status"]["initContainerStatuses"] = [
        {"name": "init-pytorch", "state": {"waiting": {"reason": "ErrImagePull", "message": "x"}}}
    ]
    healthy = pod("worker", 4, "Running")
    healthy["status"]["containerStatuses"] = [{"name": "tensorflow", "state": {"running": {}}}]
    finished = pod("worker", 5, "Failed")
    finished["status"]["containerStatuses"] = crashed["status"]["containerStatuses"]

    events = abnormal_pod_events([pull, crashed, unschedulable, init_waiting, healthy, finished])
    assert [(e.type, e.reason, e.message) for e in events] == [
        (
            "Warning",
            "ImagePullBackOff",
            "Error pod j-worker-0 container tensorflow waiting message: Back-off pulling",
        ),
        (
            "Warning",
            "Error",
            "Error pod j-worker-1 container tensorflow exitCode: 3 terminated message: boom",
        ),
        (
            "Warning",
            "Unschedulable",
            "Error pod j-worker-2 condition message: 0/3 nodes are available",
        ),
        (
            "Warning",
            "ErrImagePull",
            "Error pod j-worker-3 container init-pytorch waiting message: x",
        ),
    ]
