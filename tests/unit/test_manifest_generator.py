"""One path for what every operator ships: the committed RBAC and Deployments are exactly what
`<operator> manifests` generates from the controllers (each framework's ClusterRole in
manifests/base, its identity and Deployment in overlays/per-framework; the all-in-one's
Deployment, and its RBAC the union of the six ClusterRoles), and the subcommands print what an
author needs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jax_operator.controller import JAXJobController
from jobcontroller import JobController, ProgressSettings, Reconciler
from jobcontroller.manifests import cluster_role_rules, deployment, rbac, served_ports, service
from jobcontroller.testing import yamlfast
from mpi_operator.controller import MPIJobController
from paddle_operator.controller import PaddleJobController
from pytorch_operator.controller import PyTorchJobController
from tf_operator.controller import TFJobController
from trainer_operator.controller import TrainJobController
from training_operator.__main__ import build_controllers
from xgboost_operator.controller import XGBoostJobController

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
BASE = MANIFESTS / "base"
PER_FRAMEWORK = MANIFESTS / "overlays" / "per-framework"
OPERATORS: dict[str, type[JobController[Any]]] = {
    "tf-operator": TFJobController,
    "pytorch-operator": PyTorchJobController,
    "mpi-operator": MPIJobController,
    "xgboost-operator": XGBoostJobController,
    "paddle-operator": PaddleJobController,
    "jax-operator": JAXJobController,
}
#: The ClusterRoles the all-in-one is bound to: the six operators' and the TrainJob
#: controller's (which has no per-framework Deployment: the all-in-one serves TrainJobs).
BOUND: dict[str, type[Reconciler[Any]]] = {**OPERATORS, "trainer-operator": TrainJobController}


PROGRESS_PORTS = [("trainjob-status", 10443)]


def _as_deployed(controller: Reconciler[Any]) -> Reconciler[Any]:
    """As the operator commands build it: serving training progress (on by default)."""
    controller.enable_progress(ProgressSettings())
    return controller


def _docs(path: Path) -> list[dict[str, Any]]:
    return yamlfast.load_all(path.read_text())


@pytest.mark.parametrize("name", OPERATORS)
def test_committed_rbac_is_the_generated_rbac(name: str) -> None:
    """The rules, written once in the base for both flavours, and the per-framework identity
    are together what ``<operator> manifests`` generates."""
    controller = _as_deployed(OPERATORS[name]())
    [cluster_role] = _docs(BASE / f"clusterrole-{name}.yaml")
    account, *bindings = _docs(PER_FRAMEWORK / f"rbac-{name}.yaml")
    committed = [account, cluster_role, *bindings]
    assert committed == rbac(name, [controller], namespace="kubeflow")


@pytest.mark.parametrize("name", OPERATORS)
def test_committed_deployment_is_the_generated_deployment(name: str) -> None:
    docs = _docs(PER_FRAMEWORK / "deployments.yaml")
    committed = [d for d in docs if d["metadata"]["name"] == name]
    assert committed == [deployment(name, namespace="kubeflow", ports=PROGRESS_PORTS)]
    # The Service the job pods report progress through is the generated one.
    [front] = [d for d in _docs(PER_FRAMEWORK / "services.yaml") if d["metadata"]["name"] == name]
    assert front == service(name, namespace="kubeflow", ports=PROGRESS_PORTS)


def _grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str, str]]:
    """(group, resource, verb, name) for every grant of the rules, "" for any name."""
    return {
        (group, resource, verb, name)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
        for name in rule.get("resourceNames") or [""]
    }


NAME = "training-operator"


def test_committed_trainjob_rules_are_the_generated_ones() -> None:
    [cluster_role] = _docs(BASE / "clusterrole-trainer-operator.yaml")
    generated = rbac("trainer-operator", [_as_deployed(TrainJobController())], namespace="kubeflow")
    assert cluster_role == next(d for d in generated if d["kind"] == "ClusterRole")


def test_all_in_one_rbac_is_the_union_of_the_generated_rules() -> None:
    """The default install's training-operator is bound to the six frameworks' ClusterRoles
    and the TrainJob controller's: together they grant exactly what ``training-operator
    manifests`` generates as one ClusterRole, and its Lease Role and Deployment are the
    generated ones."""
    docs = _docs(BASE / "training-operator.yaml")
    generated = rbac("training-operator", build_controllers(), namespace="kubeflow")
    by_kind = {d["kind"]: d for d in generated}
    roles = {
        d["metadata"]["name"]: d
        for path in sorted(BASE.glob("clusterrole-*.yaml"))
        for d in _docs(path)
    }
    bindings = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    subject = by_kind["ClusterRoleBinding"]["subjects"]
    assert all(b["subjects"] == subject for b in bindings)
    bound = [roles[b["roleRef"]["name"]] for b in bindings]
    assert sorted(r["metadata"]["name"] for r in bound) == sorted(BOUND)
    union = _grants([rule for role in bound for rule in role["rules"]])
    assert union == _grants(by_kind["ClusterRole"]["rules"])
    for kind in ("ServiceAccount", "Role", "RoleBinding"):
        assert [d for d in docs if d["kind"] == kind] == [by_kind[kind]]
    [committed] = [d for d in docs if d["kind"] == "Deployment"]
    ports = served_ports(build_controllers())
    assert ports == PROGRESS_PORTS  # the progress endpoint, every kind's
    expected = deployment("training-operator", namespace="kubeflow", ports=ports)
    # Seven kinds' informers in one process: more memory than one operator's.
    container = expected["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["limits"]["memory"] = "768Mi"
    assert committed == expected
    # The Service the TrainJob pods report progress through is the generated one.
    [front] = [d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == NAME]
    assert front == service(NAME, namespace="kubeflow", ports=ports)


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
    return yamlfast.load_all(out)


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
        "Service",  # the training-progress endpoint's
    ]
    crds = [d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"]
    assert crds == ["xgboostjobs.kubeflow.org", "paddlejobs.kubeflow.org"]
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    granted = {res for rule in role["rules"] for res in rule["resources"]}
    assert {"xgboostjobs", "paddlejobs", "pods", "services", "events"} <= granted
    assert not granted & {"tfjobs", "mpijobs", "jobs"}
    # Secrets: only the progress endpoint's certificate, made once and read.
    assert {tuple(r["verbs"]) for r in role["rules"] if "secrets" in r["resources"]} == {
        ("get", "create")
    }
    deploy = docs[-2]
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
