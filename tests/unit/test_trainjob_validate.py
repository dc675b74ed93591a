"""v2.3.0's webhook checks that need the runtime (plugins/jobset ``Validate``, plugins/torch and
plugins/xgboost ``Validate``; their test cases), made by the controller: a TrainJob that fails
one gets a Warning event with upstream's details and neither a JobSet nor a snapshot."""

from __future__ import annotations

from typing import Any

import pytest
from trainjob_fixtures import (
    DATASET,
    MODEL,
    NOW,
    container,
    jobset_spec,
    observed,
    runtime,
    trainjob,
)

from trainer_operator.planner import plan_trainjob

Obj = dict[str, Any]
PREFIX = "TrainJob resources reconciliation failed: "


def _refused(raw: Obj, rt: Obj) -> str:
    plan = plan_trainjob(raw, observed(runtime=rt), now=NOW)
    assert plan.actions == ()
    [event] = plan.events
    assert (event.type, event.reason) == ("Warning", "TrainJobResourcesCreationFailed")
    assert event.message.startswith(PREFIX)
    return event.message.removeprefix(PREFIX)


def _without(job: str) -> Obj:
    spec = jobset_spec()
    spec["replicatedJobs"] = [r for r in spec["replicatedJobs"] if r["name"] != job]
    return spec


DATASET_SOURCE = {"dataset": {"storageUri": "hf://dataset"}}
MODEL_SOURCE = {"model": {"storageUri": "hf://model"}}


def test_dataset_initializer_job_must_exist() -> None:
    """Upstream's "must have dataset initializer job when trainJob is configured with input
    datasetConfig"."""
    raw = trainjob(initializer=DATASET_SOURCE)
    assert _refused(raw, runtime(_without(DATASET))) == (
        "spec.runtimeRef: Invalid value: must have dataset-initializer job when trainJob is "
        "configured with input datasetConfig"
    )


def test_model_initializer_container_must_exist() -> None:
    """Upstream's "must have container with name - model initializer in the model initializer
    job"."""
    spec = jobset_spec()
    container(spec, MODEL, MODEL)["name"] = "other"
    assert _refused(trainjob(initializer=MODEL_SOURCE), runtime(spec)) == (
        "spec.runtimeRef: Invalid value: must have container with name - model-initializer in "
        "the model-initializer job"
    )


@pytest.mark.parametrize(("job", "source"), [(DATASET, DATASET_SOURCE), (MODEL, MODEL_SOURCE)])
def test_initializer_must_mount_the_initializer_volume(job: str, source: Obj) -> None:
    """Upstream's "must have volumeMount with name - initializer in the dataset/model initializer
    container"."""
    spec = jobset_spec()
    container(spec, job, job)["volumeMounts"] = [{"name": "other", "mountPath": "/x"}]
    assert _refused(trainjob(initializer=source), runtime(spec)) == (
        f"spec.runtimeRef: Invalid value: must have volumeMount with name - initializer in "
        f"container {job} of the {job} job"
    )


def test_initializers_that_are_there_pass() -> None:
    """Upstream's "valid dataset and model initializers together pass"; a runtime without them is
    fine for a TrainJob that has no sources."""
    raw = trainjob(initializer={**DATASET_SOURCE, **MODEL_SOURCE})
    assert plan_trainjob(raw, observed(runtime=runtime()), now=NOW).events == ()
    bare = trainjob()
    assert plan_trainjob(bare, observed(runtime=runtime(_without(DATASET))), now=NOW).events == ()


def test_torch_reserved_env() -> None:
    """Upstream's "reserved environment variable present"."""
    raw = trainjob(
        trainer={
            "env": [
                {"name": "test", "value": "x"},
                {"name": "PET_NPROC_PER_NODE", "value": "2"},
                {"name": "PET_MASTER_ADDR", "value": "a"},
            ]
        }
    )
    assert _refused(raw, runtime(ml_policy={"numNodes": 1, "torch": {}})) == (
        "spec.trainer.env: Invalid value: must not have reserved envs, invalid envs configured: "
        "[PET_MASTER_ADDR PET_NPROC_PER_NODE]"
    )


def test_xgboost_reserved_env() -> None:
    """Upstream's "multiple errors when using multiple reserved envs": one per variable, by
    index."""
    raw = trainjob(
        trainer={
            "numNodes": 1,
            "env": [
                {"name": "DMLC_TRACKER_URI", "value": "custom"},
                {"name": "DMLC_TASK_ID", "value": "0"},
            ],
        }
    )
    assert _refused(raw, runtime(ml_policy={"numNodes": 1, "xgboost": {}})) == (
        "spec.trainer.env[0]: Forbidden: DMLC_TRACKER_URI is reserved for the XGBoost runtime; "
        "spec.trainer.env[1]: Forbidden: DMLC_TASK_ID is reserved for the XGBoost runtime"
    )


def test_reserved_names_are_only_reserved_by_their_policy() -> None:
    raw = trainjob(trainer={"env": [{"name": "PET_NNODES", "value": "1"}]})
    plan = plan_trainjob(raw, observed(runtime=runtime(ml_policy={"numNodes": 1})), now=NOW)
    assert plan.events == ()


def test_a_deprecated_cluster_runtime_is_warned_about_once() -> None:
    """v2.3.0's admission warning for a ClusterTrainingRuntime labelled
    ``trainer.kubeflow.org/support: deprecated``, as an event when the snapshot is taken."""
    rt = runtime(kind="ClusterTrainingRuntime", name="old")
    rt["metadata"]["labels"] = {"trainer.kubeflow.org/support": "deprecated"}
    raw = trainjob(runtime_kind="ClusterTrainingRuntime", runtime_name="old")
    plan = plan_trainjob(raw, observed(runtime=rt), now=NOW)
    [event] = plan.events
    assert (event.type, event.reason) == ("Warning", "DeprecatedTrainingRuntime")
    assert event.message == (
        'Referenced ClusterTrainingRuntime "old" is deprecated and will be removed in a future '
        "release of Kubeflow Trainer. See runtime deprecation policy: https://trainer.kubeflow.org"
        "/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
    )
    snapshot = next(a.body for a in plan.actions if a.kind == "ConfigMap")  # type: ignore[union-attr]
    snapshot["metadata"]["uid"] = "cm"
    later = plan_trainjob(raw, observed(runtime=rt, configmaps=[snapshot]), now=NOW)
    assert later.events == ()
