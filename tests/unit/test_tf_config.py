"""TF_CONFIG as the training-operator v1.9 writes it, byte for byte."""

from __future__ import annotations

from typing import Any

from tf_operator.api import TFJob, default_tfjob
from tf_operator.tfconfig import tf_config


def _replica(n: int) -> dict[str, Any]:
    return {"replicas": n, "template": {"spec": {"containers": [{"name": "tensorflow"}]}}}


def _job(specs: dict[str, int], **spec: Any) -> TFJob:
    raw = {
        "metadata": {"name": "mnist", "namespace": "ns"},
        "spec": {"tfReplicaSpecs": {k: _replica(v) for k, v in specs.items()}, **spec},
    }
    return default_tfjob(TFJob.parse(raw))


def test_dense_form_sorted_with_the_cloud_environment() -> None:
    job = _job({"Worker": 2, "PS": 1})
    assert tf_config(job, rtype="Worker", index=1) == (
        '{"cluster":{"ps":["mnist-ps-0.ns.svc:2222"],'
        '"worker":["mnist-worker-0.ns.svc:2222","mnist-worker-1.ns.svc:2222"]},'
        '"task":{"type":"worker","index":1},"environment":"cloud"}'
    )


def test_sparse_form_for_dynamic_workers() -> None:
    job = _job({"Worker": 2, "PS": 2}, enableDynamicWorker=True)
    assert tf_config(job, rtype="Worker", index=1) == (
        '{"cluster":{"worker":{"1":"mnist-worker-1.ns.svc:2222"},'
        '"ps":["mnist-ps-0.ns.svc:2222","mnist-ps-1.ns.svc:2222"]},'
        '"task":{"type":"worker","index":1}}'
    )
    assert tf_config(job, rtype="PS", index=0) == (
        '{"cluster":{"worker":{},"ps":["mnist-ps-0.ns.svc:2222"]},"task":{"type":"ps","index":0}}'
    )


def test_sparse_form_without_ps_has_ps_null_as_go_marshals_a_nil_slice() -> None:
    job = _job({"Worker": 2}, enableDynamicWorker=True)
    assert tf_config(job, rtype="Worker", index=0) == (
        '{"cluster":{"worker":{"0":"mnist-worker-0.ns.svc:2222"},"ps":null},'
        '"task":{"type":"worker","index":0}}'
    )
