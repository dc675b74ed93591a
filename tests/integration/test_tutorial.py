"""docs/writing-an-operator.md, run: the tutorial's code blocks, as written, make a working
operator. Its file-named blocks are written into a temporary project and imported; the CRD its
``crd`` subcommand prints is installed on the real API server; its controller runs its example
ToyJob to Succeeded with the environment the tutorial promises; the invalid ToyJob it shows is
refused with the message it shows; the ``manifests`` subcommand's output passes a server-side
dry run and grants what the tutorial says; and the tutorial's own test passes.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import re
import subprocess
import sys
import tomllib
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import pytest_asyncio
import yaml

from jobcontroller.runtime.kube import CRDS, PODS, SERVICES, ApiError, KubeApi, Resource
from jobcontroller.testing.binaries import find_binaries
from jobcontroller.testing.operator import install_crds, running
from jobcontroller.testing.pods import simulate
from jobcontroller.testing.waiting import wait_for, wait_for_list

DOC = Path(__file__).resolve().parents[2] / "docs" / "writing-an-operator.md"
TOYJOBS = Resource("example.com", "v1", "ToyJob", "toyjobs")
IMAGE = "registry.example.com/toy-operator:0.1.0"

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_FILE_HEADER = re.compile(r"^# ([\w.-]+(?:/[\w.-]+)*)\n")


def code_blocks(markdown: str) -> list[str]:
    return [m.group(1) for m in _FENCE.finditer(markdown)]


def tutorial_files(markdown: str) -> dict[str, str]:
    """The file-named blocks (first line ``# path``), those of one file joined in order,
    without their header lines."""
    files: dict[str, list[str]] = {}
    for block in code_blocks(markdown):
        header = _FILE_HEADER.match(block)
        if header is not None and (
            "/" in header[1] or "." in header[1] or header[1] == "Dockerfile"
        ):
            files.setdefault(header[1], []).append(block[header.end() :])
    return {path: "\n".join(parts) for path, parts in files.items()}


def write_tutorial(markdown: str, root: Path) -> dict[str, str]:
    files = tutorial_files(markdown)
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return files


@dataclass(frozen=True)
class Tutorial:
    root: Path
    files: dict[str, str]
    main: Callable[[list[str]], int]
    controller: Callable[[], Any]
    api: ModuleType

    def run(self, *argv: str) -> str:
        """What ``toy-operator <argv>`` prints."""
        with contextlib.redirect_stdout(io.StringIO()) as out:
            assert self.main(list(argv)) == 0
        return out.getvalue()


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tutorial]:
    root = tmp_path_factory.mktemp("toy-operator")
    files = write_tutorial(DOC.read_text(), root)
    sys.path.insert(0, str(root))
    try:
        main_module = importlib.import_module("toy_operator.__main__")
        controller_module = importlib.import_module("toy_operator.controller")
        yield Tutorial(
            root=root,
            files=files,
            main=main_module.main,
            controller=controller_module.ToyJobController,
            api=importlib.import_module("toy_operator.api"),
        )
    finally:
        sys.path.remove(str(root))
        for name in [
            m for m in sys.modules if m == "toy_operator" or m.startswith("toy_operator.")
        ]:
            del sys.modules[name]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def toy_crd(kube: KubeApi, tutorial: Tutorial) -> AsyncIterator[str]:
    """``toy-operator crd``'s output, installed as the tutorial says, and removed after."""
    path = tutorial.root / "crd.yaml"
    path.write_text(tutorial.run("crd"))
    [name] = await install_crds(kube, [path])
    yield name
    with contextlib.suppress(ApiError):
        await kube.delete(CRDS, name)


def kubectl(kubeconfig: str, *args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [find_binaries()["kubectl"], f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    [container] = pod["spec"]["containers"]
    return {e["name"]: e["value"] for e in container.get("env", [])}


def succeeded(job: dict[str, Any] | None) -> bool:
    conditions = ((job or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Succeeded" and c["status"] == "True" for c in conditions)


def test_the_tutorial_names_every_file_of_the_operator(tutorial: Tutorial) -> None:
    assert set(tutorial.files) == {
        "pyproject.toml",
        "toy_operator/__init__.py",
        "toy_operator/api.py",
        "toy_operator/controller.py",
        "toy_operator/__main__.py",
        "examples/toyjob.yaml",
        "Dockerfile",
        "tests/test_toyjob.py",
    }
    project = tomllib.loads(tutorial.files["pyproject.toml"])["project"]
    assert project["scripts"] == {"toy-operator": "toy_operator.__main__:main"}
    assert 'CMD ["toy-operator", "run"]' in tutorial.files["Dockerfile"]
    crd = yaml.safe_load(tutorial.run("crd"))
    assert crd["metadata"]["name"] == "toyjobs.example.com"
    assert "categories" not in crd["spec"]["names"]


async def test_the_example_toyjob_succeeds_with_the_promised_environment(
    kube: KubeApi, kubeconfig: str, namespace: str, tutorial: Tutorial, toy_crd: str
) -> None:
    job = yaml.safe_load(tutorial.files["examples/toyjob.yaml"])
    for replica in job["spec"]["toyReplicaSpecs"].values():
        # The Master outlives the Workers, as its `sleep 5` would.
        run_for = "3s" if replica is job["spec"]["toyReplicaSpecs"]["Master"] else "1s"
        simulate(replica["template"], 0, run_for=run_for)
    async with running(kubeconfig, tutorial.controller()) as op:
        await kube.create(TOYJOBS, job, namespace=namespace)
        done = await wait_for(
            kube, TOYJOBS, "hello", namespace=namespace, until=succeeded, timeout=60
        )
        assert (
            await op.settled_counter(
                "training_operator_jobs_successful_total",
                1,
                framework="toy",
                job_namespace=namespace,
            )
            == 1
        )
    assert done is not None
    assert done["status"]["conditions"][-1]["type"] == "Succeeded"
    assert done["status"]["replicaStatuses"]["Master"]["succeeded"] == 1

    pods = {p["metadata"]["name"]: p for p in (await kube.list(PODS, namespace=namespace))[0]}
    assert sorted(pods) == ["hello-master-0", "hello-worker-0", "hello-worker-1"]
    # What the tutorial promises: MASTER_ADDR and WORLD_SIZE everywhere, the Master rank 0 and
    # Worker i rank i + 1.
    for name, rank in (("hello-master-0", 0), ("hello-worker-0", 1), ("hello-worker-1", 2)):
        assert env_of(pods[name]) == {
            "MASTER_ADDR": "hello-master-0",
            "RANK": str(rank),
            "WORLD_SIZE": "3",
        }, name
        assert pods[name]["spec"]["restartPolicy"] == "Never"
    master_labels = pods["hello-master-0"]["metadata"]["labels"]
    assert master_labels["training.kubeflow.org/job-role"] == "master"
    assert master_labels["training.kubeflow.org/operator-name"] == "toyjob-controller"
    assert "training.kubeflow.org/job-role" not in pods["hello-worker-0"]["metadata"]["labels"]

    services = await wait_for_list(kube, SERVICES, namespace=namespace, until=lambda s: len(s) == 3)
    master_svc = {s["metadata"]["name"]: s for s in services}["hello-master-0"]
    assert master_svc["spec"]["clusterIP"] == "None"
    assert [(p["name"], p["port"]) for p in master_svc["spec"]["ports"]] == [("toy-port", 29500)]


def _refused_example(markdown: str) -> tuple[str, str]:
    """The console block applying an invalid ToyJob: its YAML and the message shown."""
    [block] = [b for b in code_blocks(markdown) if "kind: ToyJob" in b and "<<EOF" in b]
    body = block.split("<<EOF\n", 1)[1]
    manifest, _, shown = body.partition("\nEOF\n")
    return manifest, shown.strip()


async def test_the_invalid_toyjob_is_refused_with_the_tutorial_message(
    kube: KubeApi, kubeconfig: str, namespace: str, tutorial: Tutorial, toy_crd: str
) -> None:
    manifest, shown = _refused_example(DOC.read_text())
    proc = kubectl(
        kubeconfig, "apply", "--server-side", f"-n={namespace}", "-f", "-", stdin=manifest
    )
    assert proc.returncode != 0
    assert proc.stderr.strip() == shown

    job = yaml.safe_load(manifest)
    with pytest.raises(ApiError) as refused:
        await kube.create(TOYJOBS, job, namespace=namespace)
    assert refused.value.status == 422
    assert "Master replicas must be 1" in str(refused.value)
    # The operator's own validation agrees (for jobs stored before the CRD had the rule).
    parsed = tutorial.api.ToyJob.parse(job)
    assert tutorial.api.validate_toyjob(tutorial.api.default_toyjob(parsed)) == [
        "spec.toyReplicaSpecs[Master].replicas: Forbidden: must be 1"
    ]


async def test_the_manifests_pass_a_server_side_dry_run_and_grant_what_the_tutorial_says(
    kubeconfig: str, namespace: str, tutorial: Tutorial
) -> None:
    out = tutorial.run("manifests", "--image", IMAGE, "--namespace", namespace)
    objects = [d for d in yaml.safe_load_all(out) if d]
    assert [o["kind"] for o in objects] == [
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
    ]
    by_kind = {o["kind"]: o for o in objects}
    assert by_kind["ClusterRole"]["rules"] == [
        {
            "apiGroups": ["example.com"],
            "resources": ["toyjobs"],
            "verbs": ["get", "list", "watch", "patch", "delete"],
        },
        {"apiGroups": ["example.com"], "resources": ["toyjobs/status"], "verbs": ["get", "update"]},
        {"apiGroups": ["example.com"], "resources": ["toyjobs/finalizers"], "verbs": ["update"]},
        {
            "apiGroups": [""],
            "resources": ["pods", "services"],
            "verbs": ["get", "list", "watch", "create", "delete"],
        },
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
        # Pods on lost nodes (--node-lost-grace-period, on by default) need the nodes.
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
        # Training progress (on by default): the reports' status patch, the reporting pods'
        # token reviews and reads, and the endpoint's certificate Secret.
        {"apiGroups": ["example.com"], "resources": ["toyjobs/status"], "verbs": ["patch"]},
        {
            "apiGroups": ["authentication.k8s.io"],
            "resources": ["tokenreviews"],
            "verbs": ["create"],
        },
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create"]},
    ]
    [lease_rule] = by_kind["Role"]["rules"]
    assert lease_rule["resources"] == ["leases"]
    deployment = by_kind["Deployment"]
    assert deployment["metadata"]["namespace"] == namespace
    assert deployment["spec"]["replicas"] == 2
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == IMAGE
    assert container["command"] == ["toy-operator", "run"]
    assert "--leader-elect" in container["args"]
    # The progress endpoint's Service: the pods report to it by name.
    [port] = by_kind["Service"]["spec"]["ports"]
    assert port["port"] == 10443
    assert container["securityContext"]["readOnlyRootFilesystem"] is True

    proc = kubectl(kubeconfig, "apply", "--server-side", "--dry-run=server", "-f", "-", stdin=out)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == len(objects)
    assert all(line.endswith("(server dry run)") for line in lines), proc.stdout


async def test_the_tutorial_test_passes(
    kube: KubeApi,
    kubeconfig: str,
    namespace: str,
    tutorial: Tutorial,
    toy_crd: str,
    tmp_path: Path,
) -> None:
    """The test the tutorial shows, called with this session's fixtures (it installs the CRD
    itself, again; ``toy_crd`` removes it at the end)."""
    spec = importlib.util.spec_from_file_location(
        "toy_tutorial_test", tutorial.root / "tests" / "test_toyjob.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    await module.test_toyjob_succeeds_when_its_master_does(kube, kubeconfig, namespace, tmp_path)
