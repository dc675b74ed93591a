"""Each operator, run exactly as its Deployment runs it, under exactly the identity the
manifests give it, completes a job of its kind without a single forbidden (403) response.

The default install's all-in-one training-operator (manifests/base, and overlays/namespaced)
runs one job of every kind and the demo's jobs (hack/demo.py: examples/*.yaml, every framework)
under its one ServiceAccount, bound to the six frameworks' ClusterRoles; each per-framework
operator (overlays/per-framework, and per-framework-namespaced) runs a job of its own kind
under its own.

The install is re-homed with kustomize (a name prefix and a fresh namespace), so each test has
its own ServiceAccount, roles and bindings; the operator process gets the Deployment's command
line and a bound token of that ServiceAccount.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import re
import subprocess
import urllib.request
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anchor_metrics
import pytest
import pytest_asyncio
import yaml
from simulated_jobs import simulated_jobs

from jobcontroller.runtime.kube import NAMESPACES, PODS, ApiError, KubeApi, Resource
from jobcontroller.testing.binaries import find_binaries
from jobcontroller.testing.deployments import (
    LocalCommand,
    deployment_command,
    render_kustomize,
    token_kubeconfig,
)
from jobcontroller.testing.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
RBAC_KINDS = {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}


#: Operator -> (resource, job): each kind's simulated job.
JOBS: dict[str, tuple[Resource, dict[str, Any]]] = {
    operator: (job.resource, job.body) for operator, job in simulated_jobs("rbac-").items()
}


def _kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> str:
    cmd = [find_binaries()["kubectl"], "--kubeconfig", kubeconfig, *args]
    out = subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _demo_jobs() -> list[tuple[Resource, dict[str, Any]]]:
    """The v1 jobs `make demo` submits (every framework's examples, simulated), as it loads
    them. Its TrainJob needs the JobSet controller and the runtimes, which this test does not
    install (tests/integration/test_trainjob_controller.py runs TrainJobs beside v1 jobs)."""
    spec = importlib.util.spec_from_file_location("demo", ROOT / "hack" / "demo.py")
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    jobs = [(demo.KINDS[job["kind"]], job) for job in demo.load_jobs()]
    return [(resource, job) for resource, job in jobs if resource.group == "kubeflow.org"]


def _rehomed(install: str, *, prefix: str, namespace: str, workdir: Path) -> list[dict[str, Any]]:
    """The install (a path under manifests/) under a name prefix, in ``namespace``."""
    kustomization = {
        "namePrefix": prefix,
        "namespace": namespace,
        "resources": [os.path.relpath(ROOT / "manifests" / install, workdir)],
    }
    (workdir / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return render_kustomize(find_binaries()["kubectl"], workdir)


@pytest_asyncio.fixture(loop_scope="session")
async def operator_namespace(kube: KubeApi) -> AsyncIterator[str]:
    name = f"op-{uuid.uuid4().hex[:6]}"
    await kube.create(NAMESPACES, {"metadata": {"name": name}})
    try:
        yield name
    finally:
        await kube.delete(NAMESPACES, name)


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return str(r.read().decode())


async def _metrics_after_jobs(port: int, namespace: str, *, mpi: bool) -> str:
    """The operator's metrics once they count the jobs' ends. A job's end is counted when the
    operator has the answer to its status write, which can come after this test saw the
    write through its watch: scrape until it shows (the sample's absence fails the test)."""
    scraped = _metrics(port)
    for _ in range(100):
        if all(
            anchor_metrics.has_sample(scraped, name, job_namespace=namespace)
            for name in anchor_metrics.AFTER_A_JOB
        ) and (not mpi or anchor_metrics.has_sample(scraped, "mpi_operator_jobs_successful_total")):
            break
        await asyncio.sleep(0.1)
        scraped = _metrics(port)
    return scraped


def _forbidden_requests(metrics: str) -> list[str]:
    return [
        line
        for line in metrics.splitlines()
        if line.startswith("jobcontroller_api_requests_total") and 'code="403"' in line
    ]


def _other_than_pods_and_events(lines: list[str]) -> list[str]:
    return [line for line in lines if not re.search(r'resource="(pods|events)"', line)]


def _forbidden_in(log: Path, *, namespace: str) -> list[str]:
    """The operator's JSON log lines about a 403 in ``namespace``."""
    found = []
    for line in log.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("namespace") == namespace and (
            entry.get("status") == 403 or "403" in str(entry.get("error", ""))
        ):
            found.append(line)
    return found


SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "SubjectAccessReview", "subjectaccessreviews", namespaced=False
)


async def _wait_rbac_effective(
    kube: KubeApi, rbac: list[dict[str, Any]], *, service_account: str, namespace: str
) -> None:
    """Until the authorizer allows every rule of the applied roles to the ServiceAccount.

    RBAC objects reach the authorizer through its informers; on a loaded machine that took
    long enough for an operator that already led to be refused dozens of times.
    """
    user = f"system:serviceaccount:{namespace}:{service_account}"
    groups = [
        "system:serviceaccounts",
        f"system:serviceaccounts:{namespace}",
        "system:authenticated",
    ]
    bound = {
        (doc["roleRef"]["kind"], doc["roleRef"]["name"])
        for doc in rbac
        if doc["kind"] in ("RoleBinding", "ClusterRoleBinding")
        and any(
            s.get("kind") == "ServiceAccount" and s.get("name") == service_account
            for s in doc.get("subjects") or []
        )
    }
    checks = []
    for doc in rbac:
        if (doc["kind"], doc["metadata"]["name"]) not in bound:
            continue
        for rule in doc.get("rules") or []:
            for group in rule.get("apiGroups") or [""]:
                for resource in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        if "*" in (group, resource, verb):
                            continue
                        name, _, sub = resource.partition("/")
                        attrs = {"group": group, "resource": name, "verb": verb}
                        if sub:
                            attrs["subresource"] = sub
                        # A rule for some objects only is checked for each of them.
                        for named in rule.get("resourceNames") or [None]:
                            checks.append(attrs if named is None else {**attrs, "name": named})
    assert checks
    for _ in range(300):
        pending = []
        for attrs in checks:
            review = await kube.create(
                SUBJECT_ACCESS_REVIEWS,
                {
                    "spec": {
                        "user": user,
                        "groups": groups,
                        "resourceAttributes": {**attrs, "namespace": namespace},
                    }
                },
            )
            if not (review.get("status") or {}).get("allowed"):
                pending.append(attrs)
        if not pending:
            return
        checks = pending
        await asyncio.sleep(0.2)
    raise AssertionError(f"RBAC never allowed {user}: {checks}")


async def _wait_leading(proc: subprocess.Popen[bytes], command: LocalCommand, log: Path) -> None:
    for _ in range(300):
        assert proc.poll() is None, log.read_text()[-3000:]
        with contextlib.suppress(OSError):
            url = f"http://127.0.0.1:{command.health_port}/readyz"
            with urllib.request.urlopen(url, timeout=2) as r:
                if json.loads(r.read()).get("leader"):
                    return
        await asyncio.sleep(0.2)
    raise AssertionError(f"operator never became ready and leader:\n{log.read_text()[-3000:]}")


#: (operator, install under manifests/): the default install's all-in-one operator with every
#: kind's job and the demo's, cluster-wide and namespaced; each per-framework operator with its
#: kind's job, cluster-wide and namespaced.
DEPLOYED = [
    ("training-operator", "base"),
    ("training-operator", "overlays/namespaced"),
    *(
        (op, overlay)
        for overlay in ("overlays/per-framework", "overlays/per-framework-namespaced")
        for op in sorted(JOBS)
    ),
]
NAMESPACED = {"overlays/namespaced", "overlays/per-framework-namespaced"}


@pytest.mark.parametrize(("operator", "overlay"), DEPLOYED, ids=lambda v: str(v))
async def test_operator_completes_a_job_with_only_its_manifest_rbac(
    operator: str,
    overlay: str,
    kube: KubeApi,
    kubeconfig: str,
    kubeflow_crds: list[str],
    operator_namespace: str,
    tmp_path: Path,
) -> None:
    ns = operator_namespace
    prefix = f"t{uuid.uuid4().hex[:5]}-"
    docs = _rehomed(overlay, prefix=prefix, namespace=ns, workdir=tmp_path)
    rbac = [d for d in docs if d["kind"] in RBAC_KINDS]
    _kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump_all(rbac))
    deployment = next(
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == prefix + operator
    )
    sa = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    await _wait_rbac_effective(kube, rbac, service_account=sa, namespace=ns)
    token_kc = await token_kubeconfig(
        kube,
        admin_kubeconfig=Path(kubeconfig),
        service_account=sa,
        namespace=ns,
        out=tmp_path / "kubeconfig",
    )
    command = deployment_command(deployment, kubeconfig=token_kc)
    log = tmp_path / "operator.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(command.argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        # RBAC grants reach the authorizer through its informers: the operator may see a few
        # 403s while they propagate, so judge only what happens once it leads.
        await _wait_leading(proc, command, log)
        before = _forbidden_requests(_metrics(command.metrics_port))
        every_kind = operator == "training-operator"
        jobs = [*JOBS.values(), *_demo_jobs()] if every_kind else [JOBS[operator]]
        for resource, body in jobs:
            await kube.create(resource, body, namespace=ns)
        for resource, body in jobs:
            done = await wait_for(
                kube,
                resource,
                body["metadata"]["name"],
                namespace=ns,
                timeout=90,
                until=lambda j: (
                    j is not None
                    and any(
                        c["type"] in ("Succeeded", "Failed") and c["status"] == "True"
                        for c in ((j.get("status") or {}).get("conditions") or [])
                    )
                ),
            )
            assert done is not None
            states = [c["type"] for c in done["status"]["conditions"] if c["status"] == "True"]
            assert states[-1] == "Succeeded", (states, log.read_text()[-3000:])
        # A cluster-wide operator also meets other tests' jobs in namespaces being deleted,
        # where the API server refuses new pods and events with 403 ("being terminated"): the
        # metrics cannot tell those apart, so they judge every other resource, and the log
        # (API errors carry the job's namespace) judges the job's own namespace.
        serves_mpi = operator in ("mpi-operator", "training-operator")
        scraped = await _metrics_after_jobs(command.metrics_port, ns, mpi=serves_mpi)
        after = _forbidden_requests(scraped)
        assert _other_than_pods_and_events(after) == _other_than_pods_and_events(before)
        assert _forbidden_in(log, namespace=ns) == []
        # The anchors' metric names and label sets, so their dashboards keep working.
        expected = dict(anchor_metrics.TRAINING_OPERATOR)
        if serves_mpi:
            expected |= anchor_metrics.MPI_OPERATOR
        assert anchor_metrics.mismatches(scraped, expected) == []
        for name in anchor_metrics.AFTER_A_JOB:
            assert anchor_metrics.has_sample(scraped, name, job_namespace=ns), name
        if serves_mpi:
            assert anchor_metrics.has_sample(scraped, "mpi_operator_jobs_successful_total")
        # Every metric the dashboard and the alerts query is one this operator exports (the
        # mpi_operator_* ones only the MPI operator).
        queried = anchor_metrics.monitoring_metrics()
        if not serves_mpi:
            queried = {m for m in queried if not m.startswith("mpi_operator_")}
        assert queried - anchor_metrics.families(scraped) == set()
    finally:
        proc.terminate()
        proc.wait(30)
    assert proc.returncode == 0, log.read_text()[-3000:]

    if overlay in NAMESPACED:
        # The namespaced identity reaches nothing outside its namespace.
        async with await KubeApi.from_config(kubeconfig=str(token_kc)) as as_operator:
            with pytest.raises(ApiError) as denied:
                await as_operator.list(PODS, namespace="default")
            assert denied.value.status == 403
            with pytest.raises(ApiError) as denied_all:
                await as_operator.list(PODS)
            assert denied_all.value.status == 403
