"""Which pod ``kfjob logs trainjob/NAME`` reads: the trainer step's pod of completion index 0
by default, another replicated job or index on request, labelled as JobSet v0.12.0 and the Job
controller label a TrainJob's pods (plain pod dicts: kwok's pods serve no logs)."""

from __future__ import annotations

from typing import Any

from kfjob.trainjobs import log_container, log_pod

Obj = dict[str, Any]


def pod(
    rjob: str,
    completion: int,
    *,
    job_index: int = 0,
    containers: tuple[str, ...] = ("node",),
    label: bool = True,
    name: str | None = None,
) -> Obj:
    """A pod of replicated job ``rjob``'s Job ``job_index``; its completion index as a label
    (Kubernetes 1.28+) or, with ``label=False``, only as the annotation older Jobs set."""
    index = {"batch.kubernetes.io/job-completion-index": str(completion)}
    return {
        "metadata": {
            "name": name or f"llm-{rjob}-{job_index}-{completion}-x",
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": "llm",
                "jobset.sigs.k8s.io/replicatedjob-name": rjob,
                "jobset.sigs.k8s.io/job-index": str(job_index),
                **(index if label else {}),
            },
            "annotations": index,
        },
        "spec": {"containers": [{"name": c, "image": "x"} for c in containers]},
    }


def name(p: Obj | None) -> str | None:
    return None if p is None else str(p["metadata"]["name"])


PODS = [
    pod("dataset-initializer", 0, containers=("dataset-initializer",)),
    pod("node", 2),
    pod("node", 1),
    pod("node", 0),
]


def test_default_is_the_trainer_pod_of_completion_index_0() -> None:
    assert name(log_pod(PODS)) == "llm-node-0-0-x"
    # The order the API server lists pods in does not matter.
    assert name(log_pod(list(reversed(PODS)))) == "llm-node-0-0-x"


def test_the_trainer_step_is_the_replicated_job_its_jobs_are_labelled_with() -> None:
    """A runtime whose trainer step is not called node: the replicated job the Jobs labelled
    ``trainjob-ancestor-step=trainer`` belong to."""
    pods = [pod("node", 0, containers=("sidecar",)), pod("trainer", 1), pod("trainer", 0)]
    assert name(log_pod(pods, trainer_jobs={"trainer"})) == "llm-trainer-0-0-x"
    assert name(log_pod(pods)) == "llm-node-0-0-x"  # no Jobs seen: node, as shipped runtimes


def test_replicated_job_and_index_on_request() -> None:
    assert name(log_pod(PODS, index=2)) == "llm-node-0-2-x"
    got = log_pod(PODS, replicated_job="dataset-initializer")
    assert name(got) == "llm-dataset-initializer-0-0-x"
    assert log_container(got) == "dataset-initializer"
    # Asked for what is not there: no pod, never another one instead.
    assert log_pod(PODS, index=3) is None
    assert log_pod(PODS, replicated_job="model-initializer") is None


def test_several_jobs_of_a_replicated_job_the_first_jobs_pod() -> None:
    pods = [pod("node", 0, job_index=1), pod("node", 0, job_index=0)]
    assert name(log_pod(pods)) == "llm-node-0-0-x"


def test_chosen_by_labels_not_by_name() -> None:
    """Names end in a random suffix and sort as text; the labels say which pod is which."""
    pods = [
        pod("node", 1, name="a-first-by-name"),
        pod("node", 0, job_index=1, name="b"),
        pod("node", 0, name="c-last-by-name"),
    ]
    assert name(log_pod(pods)) == "c-last-by-name"
    assert name(log_pod(pods, index=1)) == "a-first-by-name"


def test_completion_index_from_the_annotation_when_not_labelled() -> None:
    pods = [pod("node", 1, label=False), pod("node", 0, label=False)]
    assert name(log_pod(pods)) == "llm-node-0-0-x"


def test_no_trainer_pod_yet_falls_back_to_the_first_pod() -> None:
    """The initializers run before the trainer: by default their log, as v1's logs read the
    first pod when there is no master."""
    pods = [
        pod("model-initializer", 0, containers=("model-initializer",)),
        pod("dataset-initializer", 0, containers=("dataset-initializer",)),
    ]
    got = log_pod(pods)
    assert name(got) == "llm-dataset-initializer-0-0-x"
    assert log_container(got) == "dataset-initializer"
    assert log_pod([]) is None


def test_container_is_node_when_the_pod_has_one() -> None:
    assert log_container(pod("node", 0, containers=("istio-proxy", "node"))) == "node"
    assert log_container(None) is None
