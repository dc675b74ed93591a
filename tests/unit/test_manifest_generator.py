"""One path for what every operator ships: the committed RBAC and Deployments of
manifests/base are exactly what `<operator> manifests` generates from the controllers, and the
subcommands print what an author needs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from jax_operator.controller import JAXJobController
from jobcontroller import JobController
from jobcontroller.manifests import cluster_role_rules, deployment, rbac
from mpi_operator.controller import MPIJobController
from paddle_operator.controller import PaddleJobController
from pytorch_operator.controller import PyTorchJobController
from tf_operator.controller import TFJobController
from xgboost_operator.controller import XGBoostJobController

BASE = Path(__file__).resolve().parents[2] / "manifests" / "base"
OPERATORS: dict[str, type[JobController[Any]]] = {
    "tf-operator": TFJobController,
    "pytorch-operator": PyTorchJobController,
    "mpi-operator": MPIJobController,
    "xgboost-operator": XGBoostJobController,
    "paddle-operator": PaddleJobController,
    "jax-operator": JAXJobController,
}


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.mark.parametrize("name", OPERATORS)
def test_committed_rbac_is_the_generated_rbac(name: str) -> None:
    controller = OPERATORS[name]()
    assert _docs(BASE / f"rbac-{name}.yaml") == rbac(name, [controller], namespace="kubeflow")


@pytest.mark.parametrize("name", OPERATORS)
def test_committed_deployment_is_the_generated_deployment(name: str) -> None:
    committed = [d for d in _docs(BASE / "deployments.yaml") if d["metadata"]["name"] == name]
    assert committed == [deployment(name, namespace="kubeflow")]


def test_rules_follow_what_a_controller_owns() -> None:
    rules = cluster_role_rules([MPIJobController()])
    by_resource = {(r["apiGroups"][0], res): r["verbs"] for r in rules for res in r["resources"]}
    # The launcher Job, hostfile ConfigMap and SSH Secret are owned: patched and deleted too.
    assert "patch" in by_resource[("batch", "jobs")]
    assert "patch" in by_resource[("", "secrets")]
    # MPI patches its job-wide Service's selector; nobody patches pods.
    assert "patch" in by_resource[("", "services")]
    assert "patch" not in by_resource[("", "pods")]
    assert ("", "services") in {
        (r["apiGroups"][0], res)
        for r in cluster_role_rules([JAXJobController()])
        for res in r["resources"]
    }
    assert "patch" not in {
        verb
        for r in cluster_role_rules([JAXJobController()])
        if r["apiGroups"] == [""] and "services" in r["resources"]
        for verb in r["verbs"]
    }


def _run(*argv: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", *argv], check=True, capture_output=True, text=True
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_crd_subcommand_prints_the_kind_served() -> None:
    docs = _run("jax_operator", "crd")
    assert [d["metadata"]["name"] for d in docs] == ["jaxjobs.kubeflow.org"]
    assert docs[0]["spec"]["versions"][0]["subresources"]["scale"]


def test_manifests_subcommand_installs_an_operator_in_a_namespace_of_ones_choice() -> None:
    docs = _run(
        "training_operator",
        "manifests",
        "--namespace",
        "ml",
        "--image",
        "reg/ops:1",
        "--enable-scheme",
        "xgboostjob,paddlejob",
    )
    kinds = [d["kind"] for d in docs]
    assert kinds == [
        "Namespace",
        "CustomResourceDefinition",
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
    ]
    crds = [d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"]
    assert crds == ["xgboostjobs.kubeflow.org", "paddlejobs.kubeflow.org"]
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    granted = {res for rule in role["rules"] for res in rule["resources"]}
    assert {"xgboostjobs", "paddlejobs", "pods", "services", "events"} <= granted
    assert not granted & {"tfjobs", "mpijobs", "secrets", "jobs"}
    deploy = docs[-1]
    assert deploy["metadata"]["namespace"] == "ml"
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "reg/ops:1"
    assert container["command"] == ["training-operator", "run"]
    # The flags that chose what is served are the Deployment's too.
    assert container["args"][-2:] == ["--enable-scheme", "xgboostjob,paddlejob"]
    binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "training-operator", "namespace": "ml"}
    ]
