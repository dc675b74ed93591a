"""manifests/jobset, the JobSet install for real clusters: upstream's own rendering at the
version the test kit runs, with the released image, and accepted by a real API server."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
from pathlib import Path
from typing import Any

import yaml

from jobcontroller.testing import images, yamlfast
from jobcontroller.testing.binaries import find_binaries
from jobcontroller.testing.controlplane import ControlPlane
from jobcontroller.testing.jobset import find_jobset

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "manifests" / "jobset"
GENERATOR = ROOT / "hack" / "gen-jobset-manifest.py"

Obj = dict[str, Any]


def _pinned_version() -> str:
    for line in (ROOT / "hack" / "build-jobset.sh").read_text().splitlines():
        if line.startswith("JOBSET_VERSION="):
            return line.split(":-", 1)[1].rstrip("}")
    raise AssertionError("hack/build-jobset.sh pins no JOBSET_VERSION")


def _rendered() -> list[Obj]:
    kubectl = find_binaries()["kubectl"]
    out = subprocess.run(
        [kubectl, "kustomize", str(INSTALL)], capture_output=True, text=True, check=True
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_the_committed_install_is_upstreams_rendering_at_the_pinned_version() -> None:
    done = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_the_install_runs_the_released_image_of_the_version_the_tests_run() -> None:
    version = _pinned_version()
    objects = _rendered()
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    assert [d["metadata"]["name"] for d in deployments] == ["jobset-controller-manager"]
    containers = deployments[0]["spec"]["template"]["spec"]["containers"]
    assert [c["image"] for c in containers] == [f"registry.k8s.io/jobset/jobset:v{version}"]
    # The real node's stand-in for it (built here, never pulled) carries the same name.
    assert containers[0]["image"] == images.JOBSET_REF
    # The CRD it installs is the one the test kit installs from the same build, but for the
    # conversion webhook the install's kustomization adds to the module's base CRD (its one
    # version never needs converting; the test kit, with no Service for it, installs the base).
    build = find_jobset()
    assert build.name == f"jobset-{version}"
    (kit_crd_file,) = sorted((build / "crd").glob("*.yaml"))
    kit_crd = yamlfast.load(kit_crd_file.read_text())
    (crd,) = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    assert crd["spec"].pop("conversion")["strategy"] == "Webhook"
    assert crd["spec"] == kit_crd["spec"]
    # Its webhooks are served by its own Service, the pod ones for JobSet's pods only.
    hooks = [
        h for o in objects if o["kind"].endswith("WebhookConfiguration") for h in o["webhooks"]
    ]
    assert {h["clientConfig"]["service"]["name"] for h in hooks} == {"jobset-webhook-service"}
    pod_hooks = [h for h in hooks if h["rules"][0]["resources"] == ["pods"]]
    assert len(pod_hooks) == 2
    for hook in pod_hooks:
        (expr,) = hook["objectSelector"]["matchExpressions"]
        assert expr == {"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}


def test_the_api_server_accepts_every_object_of_the_install(control_plane: ControlPlane) -> None:
    # Server-side dry run: every object validated and admitted, nothing stored (its webhooks
    # would otherwise name a Service with no controller behind it). The namespace is created
    # for real, since a dry run of objects in a namespace that does not exist fails.
    try:
        control_plane.request("POST", "/api/v1/namespaces", {"metadata": {"name": "jobset-system"}})
    except urllib.error.HTTPError as exc:
        assert exc.code == 409
    kubectl = find_binaries()["kubectl"]
    done = subprocess.run(
        [
            kubectl,
            f"--kubeconfig={control_plane.kubeconfig}",
            "apply",
            "--server-side",
            "--force-conflicts",
            "--dry-run=server",
            "-k",
            str(INSTALL),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    applied = [line for line in done.stdout.splitlines() if "serverside-applied" in line]
    assert len(applied) == len(_rendered()), done.stdout
