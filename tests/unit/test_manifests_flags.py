"""The Deployments in manifests/ start real console scripts with flags their parsers accept.

A typo in a Deployment's flags only shows when the pod crash-loops on a cluster; here every
overlay is rendered with ``kubectl kustomize`` (a local binary, no cluster) and each container's
command line goes through the operator's own argument parsing, with ``$(VAR)`` references
expanded the way the kubelet does. The probe, scrape and Service ports must then agree with the
ports the parsed flags make the operator listen on.
"""

from __future__ import annotations

import argparse
import importlib
import re
import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobcontroller.operator import add_job_flags
from jobcontroller.runtime.flags import Settings, parse_settings
from jobcontroller.testing import yamlfast
from jobcontroller.testing.binaries import find_binaries

ROOT = Path(__file__).resolve().parents[2]
#: Every install, as a path under manifests/: the default (base, all-in-one) and each overlay.
OVERLAYS = (
    "base",
    "overlays/standalone",
    "overlays/namespaced",
    "overlays/monitoring",
    "overlays/all-in-one",
    "overlays/per-framework",
    "overlays/per-framework-namespaced",
    "overlays/local-real-node",
)
#: The overlays whose operators watch only their own namespace.
NAMESPACED = {"overlays/namespaced", "overlays/per-framework-namespaced"}
PER_FRAMEWORK_OPERATORS = {
    "tf-operator",
    "pytorch-operator",
    "mpi-operator",
    "xgboost-operator",
    "paddle-operator",
    "jax-operator",
}
#: Overlays with one Deployment per framework; the others run every kind in one.
PER_FRAMEWORK = {"overlays/per-framework", "overlays/per-framework-namespaced"}


def deployed(name: str) -> set[str]:
    """The operator Deployments the install ``name`` has."""
    return PER_FRAMEWORK_OPERATORS if name in PER_FRAMEWORK else {"training-operator"}


Obj = dict[str, Any]


def console_scripts() -> dict[str, str]:
    """Console-script name -> entry point, over every workspace package."""
    scripts: dict[str, str] = {}
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        scripts.update(project.get("scripts", {}))
    return scripts


@pytest.fixture(scope="module", params=OVERLAYS)
def overlay(request: pytest.FixtureRequest) -> tuple[str, list[Obj]]:
    """(overlay name, its rendered objects)."""
    # kubectl renders the overlays as users do; `make test` and `make test-unit` build it first,
    # and BinariesNotFound says how to get it otherwise. A missing kubectl fails, never skips.
    kubectl = find_binaries()["kubectl"]
    name = str(request.param)
    out = subprocess.run(
        [kubectl, "kustomize", str(ROOT / "manifests" / name)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return name, yamlfast.load_all(out.stdout)


def _of_kind(objects: list[Obj], kind: str) -> list[Obj]:
    return [o for o in objects if o["kind"] == kind]


def _container(deployment: Obj) -> Obj:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, f"{deployment['metadata']['name']}: expected one container"
    return dict(containers[0])


_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' expansion of ``$(VAR)`` in command and args.

    The kubelet leaves an undefined reference as literal text, which then reaches the parser as
    a wrong value; treat that as the error it is.
    """

    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        var = match.group(1)
        assert var in env, f"{text!r} refers to ${var}, which the container does not define"
        return env[var]

    return _VAR_REF.sub(sub, text)


def _container_env(deployment: Obj) -> dict[str, str]:
    """The container's env as the kubelet would give it, downward-API fields resolved."""
    meta = deployment["metadata"]
    stand_ins = {"metadata.namespace": meta["namespace"], "metadata.name": f"{meta['name']}-0"}
    env: dict[str, str] = {}
    for var in _container(deployment).get("env", []):
        if "value" in var:
            env[var["name"]] = _expand(var["value"], env)
        else:
            field = var["valueFrom"]["fieldRef"]["fieldPath"]
            assert field in stand_ins, f"no stand-in for downward-API field {field}"
            env[var["name"]] = stand_ins[field]
    return env


def _argv(deployment: Obj) -> list[str]:
    container = _container(deployment)
    env = _container_env(deployment)
    return [_expand(a, env) for a in [*container["command"], *container.get("args", [])]]


def _operator_flags(script: str) -> Callable[[argparse.ArgumentParser], None]:
    """The flags the console script's ``main`` parses: every operator's, and its own
    ``add_flags`` where its ``__main__`` module has one (pytorch-operator's init container,
    training-operator's --enable-scheme and the PyTorch ones)."""
    module = importlib.import_module(console_scripts()[script].split(":")[0])
    own = getattr(module, "add_flags", None)

    def flags(parser: argparse.ArgumentParser) -> None:
        add_job_flags(parser)
        if own is not None:
            own(parser)

    return flags


def _settings(deployment: Obj, capsys: pytest.CaptureFixture[str]) -> Settings:
    """Parse the Deployment's command line exactly as its operator's ``main`` would."""
    script, *rest = _argv(deployment)
    try:
        return parse_settings(name=script, argv=rest, add_flags=_operator_flags(script), environ={})
    except SystemExit:
        error = capsys.readouterr().err.strip()
    pytest.fail(f"{script} rejects {rest}: {error}")


def _port(container: Obj, port: int | str) -> int:
    """A probe's or Service's port, resolved through the container's named ports."""
    if isinstance(port, int):
        return port
    named = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    assert port in named, f"no container port named {port!r}"
    return int(named[port])


def test_each_operator_runs_its_own_console_script(overlay: tuple[str, list[Obj]]) -> None:
    name, objects = overlay
    scripts = console_scripts()
    deployments = _of_kind(objects, "Deployment")
    assert {d["metadata"]["name"] for d in deployments} == deployed(name)
    for deployment in deployments:
        command = _container(deployment)["command"]
        assert command[0] in scripts, f"{command[0]} is no console script of packages/*"
        assert command[0] == deployment["metadata"]["name"]
        assert command[1:] == ["run"]


def test_every_flag_is_accepted_by_the_operator_parser(
    overlay: tuple[str, list[Obj]], capsys: pytest.CaptureFixture[str]
) -> None:
    name, objects = overlay
    for deployment in _of_kind(objects, "Deployment"):
        own_namespace = deployment["metadata"]["namespace"]
        settings = _settings(deployment, capsys)
        assert settings.leader_elect, "two replicas need leader election"
        assert settings.leader_election_namespace == own_namespace
        assert settings.log_format == "json"
        assert settings.namespace == (own_namespace if name in NAMESPACED else "")


def test_probes_and_ports_match_the_ports_the_flags_open(
    overlay: tuple[str, list[Obj]], capsys: pytest.CaptureFixture[str]
) -> None:
    _, objects = overlay
    for deployment in _of_kind(objects, "Deployment"):
        settings = _settings(deployment, capsys)
        container = _container(deployment)
        probes = {kind: container[f"{kind}Probe"]["httpGet"] for kind in ("liveness", "readiness")}
        assert probes["liveness"]["path"] == "/healthz"
        assert probes["readiness"]["path"] == "/readyz"
        for probe in probes.values():
            assert _port(container, probe["port"]) == settings.health_port
        assert _port(container, "metrics") == settings.metrics_port


def test_metrics_services_scrape_the_metrics_port(
    overlay: tuple[str, list[Obj]], capsys: pytest.CaptureFixture[str]
) -> None:
    _, objects = overlay
    # The metrics Services (the ServiceMonitor's label); the all-in-one's TrainJob progress
    # endpoint has a Service of its own.
    services = [
        s
        for s in _of_kind(objects, "Service")
        if s["metadata"]["labels"].get("app.kubernetes.io/component") == "metrics"
    ]
    for deployment in _of_kind(objects, "Deployment"):
        pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        selecting = [s for s in services if s["spec"]["selector"].items() <= pod_labels.items()]
        assert len(selecting) == 1, f"{deployment['metadata']['name']}: one metrics Service"
        service = selecting[0]
        metrics_port = _settings(deployment, capsys).metrics_port
        [port] = service["spec"]["ports"]
        assert _port(_container(deployment), port["targetPort"]) == metrics_port
        annotations = service["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert annotations["prometheus.io/port"] == str(port["port"])
        assert annotations["prometheus.io/path"] == "/metrics"


def test_each_operator_runs_as_its_own_bound_service_account(
    overlay: tuple[str, list[Obj]],
) -> None:
    name, objects = overlay
    accounts = {
        (a["metadata"]["namespace"], a["metadata"]["name"])
        for a in objects
        if a["kind"] == "ServiceAccount"
    }
    bound = {
        (s["namespace"], s["name"])
        for b in objects
        if b["kind"] in ("RoleBinding", "ClusterRoleBinding")
        for s in b["subjects"]
        if s["kind"] == "ServiceAccount"
    }
    used = set()
    for deployment in _of_kind(objects, "Deployment"):
        account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
        key = (deployment["metadata"]["namespace"], account)
        assert key in accounts, f"ServiceAccount {key} is not in the manifests"
        assert key in bound, f"ServiceAccount {key} is bound to no role"
        used.add(account)
    assert len(used) == len(deployed(name)), "operators must not share an identity"


def test_every_deployment_runs_the_image_the_base_sets(overlay: tuple[str, list[Obj]]) -> None:
    """The image is set once, in manifests/base; the per-framework Deployments take it too."""
    name, objects = overlay
    images = {_container(d)["image"] for d in _of_kind(objects, "Deployment")}
    if name == "overlays/local-real-node":
        assert images == {"jobcontroller.local/kubeflow-operators-py:local"}
    else:
        assert images == {"ghcr.io/example/kubeflow-operators-py:0.1.0"}


def test_every_install_has_the_trainer_crds_and_applies_in_one_go(
    overlay: tuple[str, list[Obj]],
) -> None:
    """Every install carries Kubeflow Trainer v2's CRDs, and no object of theirs: a
    ClusterTrainingRuntime in the same apply as its CRD is refused on a new cluster (the CRD is
    not established yet), so the runtimes are manifests/runtimes, applied after."""
    _, objects = overlay
    crds = {c["metadata"]["name"] for c in _of_kind(objects, "CustomResourceDefinition")}
    assert {
        f"{p}.trainer.kubeflow.org"
        for p in ("trainjobs", "trainingruntimes", "clustertrainingruntimes")
    } <= crds
    own = {"TrainJob", "TrainingRuntime", "ClusterTrainingRuntime"}
    assert not [o["metadata"]["name"] for o in objects if o["kind"] in own]


def test_the_runtimes_install_is_v2_3_0s_runtimes_but_torchtune() -> None:
    """manifests/runtimes installs what v2.3.0's overlays/runtimes installs but the torchtune
    ones (not served): its objects, the runtime images at the release tag, the labels it
    adds."""
    kubectl = find_binaries()["kubectl"]
    rendered = subprocess.run(
        [str(kubectl), "kustomize", str(ROOT / "manifests" / "runtimes")],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    objects = list(yamlfast.load_all(rendered))
    upstream = {
        doc["metadata"]["name"]: doc
        for path in sorted((ROOT / "tests/data/trainer-v2.3.0/runtimes").glob("*.yaml"))
        for doc in yamlfast.load_all(path.read_text())
    }
    runtimes = {r["metadata"]["name"]: r for r in _of_kind(objects, "ClusterTrainingRuntime")}
    assert sorted(runtimes) == [
        "deepspeed-distributed",
        "jax-distributed",
        "mlx-distributed",
        "torch-distributed",
        "xgboost-distributed",
    ]
    assert len(objects) == len(runtimes)
    for name, runtime in runtimes.items():
        labels = runtime["metadata"]["labels"]
        assert labels["trainer.kubeflow.org/webhook-validation"] == "disabled"
        assert (
            labels["trainer.kubeflow.org/framework"]
            == upstream[name]["metadata"]["labels"]["trainer.kubeflow.org/framework"]
        )
        expected = upstream[name]["spec"]
        for job in expected["template"]["spec"]["replicatedJobs"]:
            for container in job["template"]["spec"]["template"]["spec"]["containers"]:
                image = container["image"]
                if image.startswith("ghcr.io/kubeflow/trainer/") and ":" not in image:
                    container["image"] = f"{image}:v2.3.0"
        assert runtime["spec"] == expected
