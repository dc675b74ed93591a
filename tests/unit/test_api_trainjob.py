"""The trainer models read Kubeflow Trainer v2.3.0's own YAML and write it back unchanged.

tests/data/trainer-v2.3.0 holds upstream's examples/yaml and manifests/runtimes at the
v2.3.0 tag, as published. The models ignore fields they do not know (as the v1 kinds' do), so
"written back unchanged" also says that they know every field upstream's objects use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from trainer_operator import (
    ClusterTrainingRuntime,
    JobSet,
    TrainingRuntime,
    TrainJob,
    TrainJobConditionType,
)
from trainer_operator.meta import TrainerObject

ROOT = Path(__file__).parents[2]
UPSTREAM = ROOT / "tests" / "data" / "trainer-v2.3.0"
SHIPPED = ROOT / "manifests" / "runtimes"
KINDS: dict[str, type[TrainerObject]] = {
    k.KIND: k for k in (TrainJob, TrainingRuntime, ClusterTrainingRuntime)
}


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


DOCUMENTS = [
    pytest.param(doc, id=f"{path.parent.name}/{path.name}:{doc['metadata']['name']}")
    for path in sorted(UPSTREAM.glob("*/*.yaml"))
    for doc in _documents(path)
]


def test_every_upstream_example_and_runtime_is_here() -> None:
    """Five examples (seven objects) and the nine runtimes v2.3.0 ships."""
    kinds = sorted(p.values[0]["kind"] for p in DOCUMENTS)
    assert kinds.count("TrainJob") == 5
    assert kinds.count("TrainingRuntime") == 1
    assert kinds.count("ClusterTrainingRuntime") == 10


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_upstream_objects_round_trip_unchanged(doc: dict[str, Any]) -> None:
    model = KINDS[doc["kind"]].parse(doc)
    assert model.to_dict() == doc


def test_the_examples_read_as_typed_objects() -> None:
    [job] = _documents(UPSTREAM / "examples" / "02-runtime-patches.yaml")
    train_job = TrainJob.parse(job)
    assert train_job.spec.runtime_ref.name == "torch-distributed"
    assert train_job.spec.trainer is not None and train_job.spec.trainer.num_nodes == 2
    [patch] = train_job.spec.runtime_patches or []
    assert patch.manager == "example.io/platform-team"
    spec = patch.training_runtime_spec
    assert spec is not None and spec.template is not None and spec.template.spec is not None
    [node] = spec.template.spec.replicated_jobs or []
    assert node.template is not None and node.template.spec is not None
    pod = node.template.spec.template
    assert pod is not None and pod.spec is not None
    assert pod.spec.service_account_name == "training-sa"
    assert train_job.managed_by == "trainer.kubeflow.org/trainjob-controller"
    assert not train_job.suspended


def test_a_runtime_reads_its_policy_and_jobset_template() -> None:
    runtime, _ = _documents(UPSTREAM / "examples" / "05-multi-step.yaml")
    parsed = TrainingRuntime.parse(runtime)
    spec = parsed.runtime_spec
    assert spec.ml_policy is not None and spec.ml_policy.policy() == "torch"
    assert spec.template is not None and spec.template.spec is not None
    node = spec.template.spec.replicated_job("node")
    assert node is not None and node.depends_on is not None
    assert [(d.name, d.status) for d in node.depends_on] == [("dataset-initializer", "Complete")]
    # Job templates stay raw dicts: the controller copies them into the JobSet whole.
    labels = node.template["metadata"]["labels"]
    assert labels == {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
    assert spec.template.spec.replicated_job("missing") is None


def test_shipped_runtimes_are_upstreams() -> None:
    """manifests/runtimes holds v2.3.0's torch, jax, xgboost, deepspeed and mlx runtimes,
    unchanged."""
    shipped = sorted(p.name for p in SHIPPED.glob("*.yaml") if p.name != "kustomization.yaml")
    assert shipped == [
        "deepspeed_distributed.yaml",
        "jax_distributed.yaml",
        "mlx_distributed.yaml",
        "torch_distributed.yaml",
        "xgboost_distributed.yaml",
    ]
    for name in shipped:
        assert _documents(SHIPPED / name) == _documents(UPSTREAM / "runtimes" / name)
    names = {ClusterTrainingRuntime.parse(d).name for n in shipped for d in _documents(SHIPPED / n)}
    assert names == {
        "torch-distributed",
        "jax-distributed",
        "xgboost-distributed",
        "deepspeed-distributed",
        "mlx-distributed",
    }


def test_status_written_by_the_controller_round_trips() -> None:
    raw = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "t", "namespace": "ns"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
        "status": {
            "conditions": [
                {
                    "type": "Complete",
                    "status": "True",
                    "reason": "JobSetCompleted",
                    "message": "jobset completed",
                    "lastTransitionTime": "2026-08-05T10:00:00Z",
                }
            ],
            "jobsStatus": [
                {
                    "name": "node",
                    "ready": 0,
                    "succeeded": 2,
                    "failed": 0,
                    "active": 0,
                    "suspended": 0,
                }
            ],
            "trainerStatus": {
                "progressPercentage": 100,
                "metrics": [{"name": "loss", "value": "0.01"}],
                "lastUpdatedTime": "2026-08-05T10:00:00Z",
            },
        },
    }
    job = TrainJob.parse(raw)
    assert job.to_dict() == raw
    assert job.trainjob_status.is_finished()
    assert job.trainjob_status.is_true(TrainJobConditionType.COMPLETE)
    assert job.key == "ns/t"


def test_unknown_fields_are_ignored_when_read() -> None:
    """As for the v1 kinds: the CRD is the gate, a model reads what it knows."""
    job = TrainJob.parse(
        {"metadata": {"name": "t"}, "spec": {"runtimeRef": {"name": "r"}, "podSpecOverrides": []}}
    )
    assert "podSpecOverrides" not in job.to_dict()["spec"]
    assert job.to_dict()["apiVersion"] == "trainer.kubeflow.org/v1alpha1"


def test_a_jobset_the_controller_reads() -> None:
    jobset = JobSet.parse(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "t", "namespace": "ns"},
            "spec": {
                "replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": {}}}],
                "network": {"enableDNSHostnames": True},
                "failurePolicy": {
                    "maxRestarts": 3,
                    "rules": [{"name": "r", "action": "FailJobSet"}],
                },
            },
            "status": {
                "restarts": 1,
                "terminalState": "Completed",
                "replicatedJobsStatus": [
                    {
                        "name": "node",
                        "ready": 0,
                        "succeeded": 1,
                        "failed": 0,
                        "active": 0,
                        "suspended": 0,
                    }
                ],
            },
        }
    )
    assert jobset.spec.network is not None and jobset.spec.network.enable_dns_hostnames
    assert jobset.to_dict()["spec"]["network"] == {"enableDNSHostnames": True}
    assert jobset.status is not None and jobset.status.terminal_state == "Completed"
    assert jobset.key == "ns/t"
