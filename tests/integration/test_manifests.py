"""The manifests on a real API server: every overlay is accepted as shipped, the operator pods
meet the ``restricted`` Pod Security Standard, and each operator's RBAC grants what it needs and
nothing more, as the RBAC authorizer itself answers.

The RBAC checks apply the overlay for real under a random name prefix and namespace (the same
kustomize machinery a user would use to re-home the operators), so they neither collide with
nor depend on an installation in ``kubeflow``. Both flavours are judged: the default install
(manifests/base, the all-in-one training-operator, whose one identity must hold the union of
the six operators' rules) and overlays/per-framework (each operator its own rules only), each
cluster-wide and namespaced, with and without gang scheduling.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobcontroller.testing import yamlfast
from jobcontroller.testing.binaries import find_binaries

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
#: Every install, as a path under manifests/: the default and each overlay.
INSTALLS = (
    "base",
    "overlays/standalone",
    "overlays/namespaced",
    "overlays/monitoring",
    "overlays/all-in-one",
    "overlays/per-framework",
    "overlays/per-framework-namespaced",
    "runtimes",
)
#: Each flavour's cluster-wide and namespaced install.
ALL_IN_ONE = ("base", "overlays/namespaced")
PER_FRAMEWORK = ("overlays/per-framework", "overlays/per-framework-namespaced")
NAMESPACED = {"overlays/namespaced", "overlays/per-framework-namespaced"}
PROMETHEUS_OPERATOR_CRDS = ROOT / "tests" / "data" / "prometheus-operator-crds.yaml"
RBAC_KINDS = {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
PLURALS = {
    "tf-operator": "tfjobs",
    "pytorch-operator": "pytorchjobs",
    "mpi-operator": "mpijobs",
    "xgboost-operator": "xgboostjobs",
    "paddle-operator": "paddlejobs",
    "jax-operator": "jaxjobs",
}

Obj = dict[str, Any]


@dataclass(frozen=True)
class Kubectl:
    binary: str
    kubeconfig: str

    def __call__(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [self.binary, f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and proc.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
        return proc

    def render(self, directory: Path) -> list[Obj]:
        out = self("kustomize", str(directory)).stdout
        return yamlfast.load_all(out)


@pytest.fixture(scope="module")
def kubectl(kubeconfig: str) -> Kubectl:
    return Kubectl(find_binaries()["kubectl"], kubeconfig)


@pytest.fixture(scope="module")
def kubeflow_namespace(kubectl: Kubectl) -> str:
    """The manifests' namespace must exist for a dry run of what goes in it.

    Left in place afterwards: other tests may use it too, and deleting a namespace is slow and
    asynchronous, so a later create could meet it half-deleted.
    """
    if kubectl("get", "namespace", "kubeflow", check=False).returncode != 0:
        kubectl("create", "namespace", "kubeflow")
    return "kubeflow"


@pytest.fixture(scope="module")
def prometheus_operator_crds(kubectl: Kubectl) -> Iterator[None]:
    kubectl("apply", "-f", str(PROMETHEUS_OPERATOR_CRDS))
    names = [f"crd/{p}.monitoring.coreos.com" for p in ("servicemonitors", "prometheusrules")]
    kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)
    yield
    kubectl("delete", "--wait=false", "--ignore-not-found", *names)


def _fresh_namespace(kubectl: Kubectl, *, stem: str, labels: dict[str, str]) -> str:
    name = f"{stem}-{uuid.uuid4().hex[:6]}"
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": labels},
    }
    kubectl("create", "-f", "-", stdin=json.dumps(namespace))
    return name


_APPLIED = re.compile(
    r"^([a-z]+)(?:\.[a-z0-9.-]+)?/(\S+) (serverside-applied|created|configured|unchanged)"
)


@pytest.mark.parametrize("overlay", INSTALLS)
def test_overlay_passes_a_server_side_dry_run(
    overlay: str,
    kubectl: Kubectl,
    kubeflow_namespace: str,
    kubeflow_crds: list[str],
    request: pytest.FixtureRequest,
) -> None:
    """Every object is accepted. The runtimes (manifests/runtimes) need their CRD established,
    which a dry run cannot do: the CRDs are installed first (``kubeflow_crds``), as the
    operator's install does before the runtimes' (README, "Install")."""
    if overlay == "overlays/monitoring":
        request.getfixturevalue("prometheus_operator_crds")
    expected = {
        (o["kind"].lower(), o["metadata"]["name"]) for o in kubectl.render(MANIFESTS / overlay)
    }

    # Server-side, as the README applies them: the CRDs, with the pod template schema, are
    # too large for client-side apply's last-applied annotation (so are the anchors'). The
    # TrainJob tests may have created the shipped runtimes in this cluster already (with their
    # untagged images, another field manager): acceptance is what is checked, not ownership.
    out = kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--dry-run=server",
        "-k",
        str(MANIFESTS / overlay),
    ).stdout
    lines = out.splitlines()
    assert all(line.endswith("(server dry run)") for line in lines), out
    applied = {(m[1], m[2]) for m in map(_APPLIED.match, lines) if m}
    assert applied == expected


@pytest.mark.parametrize("overlay", ["base", "overlays/per-framework"])
def test_operator_pods_meet_the_restricted_pod_security_standard(
    overlay: str, kubectl: Kubectl
) -> None:
    """Pod admission enforces the standard on pods only, so each Deployment's pod template is
    submitted as a pod to a namespace that enforces ``restricted``."""
    namespace = _fresh_namespace(
        kubectl, stem="pss", labels={"pod-security.kubernetes.io/enforce": "restricted"}
    )
    try:
        deployments = [d for d in kubectl.render(MANIFESTS / overlay) if d["kind"] == "Deployment"]
        assert deployments
        for deployment in deployments:
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": deployment["metadata"]["name"], "namespace": namespace},
                "spec": deployment["spec"]["template"]["spec"],
            }
            proc = kubectl(
                "create", "--dry-run=server", "-f", "-", stdin=json.dumps(pod), check=False
            )
            assert proc.returncode == 0, proc.stderr
    finally:
        kubectl("delete", "namespace", namespace, "--wait=false")


# ----------------------------------------------------------------------------------- RBAC


@dataclass(frozen=True)
class Access:
    """One question for the authorizer: may the operator ``verb`` this, and should it?"""

    verb: str
    resource: str
    group: str = ""
    where: str = "own"
    """``own``: the operator's namespace; ``other``: another one; ``cluster``: no namespace."""
    allowed: bool = True
    name: str = ""


def _expectations(operator: str, *, namespaced: bool, gang: bool) -> list[Access]:
    plural = PLURALS[operator]
    volcano_crd = "podgroups.scheduling.volcano.sh"
    elsewhere = not namespaced
    others = [p for p in PLURALS.values() if p != plural]
    return [
        Access("watch", plural, "kubeflow.org"),
        Access("patch", plural, "kubeflow.org", where="other", allowed=elsewhere),
        # Least privilege: the code PUTs only a job's status and PATCHes everything else (the
        # status too: the progress endpoint merge-patches the reported trainerStatus).
        Access("update", plural, "kubeflow.org", allowed=False),
        Access("create", plural, "kubeflow.org", allowed=False),
        Access("update", f"{plural}/status", "kubeflow.org"),
        Access("patch", f"{plural}/status", "kubeflow.org"),
        Access("patch", f"{others[0]}/status", "kubeflow.org", allowed=False),
        # The progress endpoint reviews the reporting pods' tokens (cluster-scoped) and reads
        # those pods; it keeps its certificate in a Secret (the pods carry its CA themselves).
        Access("create", "tokenreviews", "authentication.k8s.io", where="cluster"),
        Access("get", "pods"),
        Access("update", "podgroups", "scheduling.volcano.sh", allowed=False),
        Access("update", f"{plural}/finalizers", "kubeflow.org"),
        Access("update", others[0], "kubeflow.org", allowed=False),
        Access("create", "pods"),
        Access("delete", "pods", where="other", allowed=elsewhere),
        Access("update", "pods", allowed=False),
        Access("create", "pods/exec", allowed=False),
        Access("create", "services"),
        Access("patch", "events", where="other", allowed=elsewhere),
        # PodGroups only with the gang-scheduling component, following the job rules' binding.
        Access("create", "podgroups", "scheduling.volcano.sh", allowed=gang),
        Access("delete", "podgroups", "scheduling.x-k8s.io", allowed=gang),
        Access("delete", "podgroups", "scheduling.x-k8s.io", "other", gang and elsewhere),
        Access(
            "get", "customresourcedefinitions", "apiextensions.k8s.io", "cluster", gang, volcano_crd
        ),
        Access(
            "get",
            "customresourcedefinitions",
            "apiextensions.k8s.io",
            "cluster",
            False,
            "tfjobs.kubeflow.org",
        ),
        Access("list", "customresourcedefinitions", "apiextensions.k8s.io", "cluster", False),
        Access("create", "customresourcedefinitions", "apiextensions.k8s.io", "cluster", False),
        Access("watch", "priorityclasses", "scheduling.k8s.io", where="cluster", allowed=gang),
        Access("create", "priorityclasses", "scheduling.k8s.io", where="cluster", allowed=False),
        Access("update", "leases", "coordination.k8s.io"),
        Access("create", "leases", "coordination.k8s.io", where="other", allowed=False),
        # NodeLost reads nodes (cluster-scoped: a ClusterRoleBinding in either overlay).
        Access("list", "nodes", where="cluster"),
        Access("watch", "nodes", where="cluster"),
        Access("update", "nodes", where="cluster", allowed=False),
        Access("patch", "nodes", "", "cluster", False),
        Access("update", "nodes/status", where="cluster", allowed=False),
        Access("create", "secrets"),
        Access("list", "secrets", allowed=operator == "mpi-operator"),
        Access("delete", "secrets", allowed=operator == "mpi-operator"),
        Access("list", "configmaps", allowed=operator == "mpi-operator"),
        Access("update", "configmaps", allowed=False),
        Access("create", "jobs", "batch", allowed=operator == "mpi-operator"),
        Access(
            "create",
            "horizontalpodautoscalers",
            "autoscaling",
            allowed=operator == "pytorch-operator",
        ),
    ]


def _trainjob_expectations(*, namespaced: bool) -> list[Access]:
    """The TrainJob controller's gang rules (clusterrole-trainer-operator.yaml), the
    component or not: a runtime's podGroupPolicy chooses, as in v2.3.0."""
    crd = ("get", "customresourcedefinitions", "apiextensions.k8s.io", "cluster", True)
    return [
        Access("create", "podgroups", "scheduling.volcano.sh"),
        Access("delete", "podgroups", "scheduling.x-k8s.io"),
        Access("delete", "podgroups", "scheduling.x-k8s.io", "other", not namespaced),
        Access("update", "podgroups", "scheduling.volcano.sh", allowed=False),
        Access(*crd, "podgroups.scheduling.volcano.sh"),
        Access(*crd, "podgroups.scheduling.x-k8s.io"),
        Access("watch", "priorityclasses", "scheduling.k8s.io", where="cluster"),
        Access("create", "priorityclasses", "scheduling.k8s.io", where="cluster", allowed=False),
        # The progress endpoint: the reports' status patch and the pods' token reviews.
        Access("patch", "trainjobs/status", "trainer.kubeflow.org"),
        Access("create", "tokenreviews", "authentication.k8s.io", where="cluster"),
    ]


def _review(user: str, access: Access, *, namespace: str) -> Obj:
    resource, _, subresource = access.resource.partition("/")
    where = {"own": namespace, "other": "default", "cluster": ""}[access.where]
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"],
            "resourceAttributes": {
                "namespace": where,
                "verb": access.verb,
                "group": access.group,
                "resource": resource,
                "subresource": subresource,
                "name": access.name,
            },
        },
    }


def _decisions(kubectl: Kubectl, reviews: list[Obj]) -> list[bool]:
    batch = {"apiVersion": "v1", "kind": "List", "items": reviews}
    out = kubectl("create", "-f", "-", "-o", "json", stdin=json.dumps(batch)).stdout
    # kubectl prints one JSON document per created object, back to back.
    decoder = json.JSONDecoder()
    items: list[Obj] = []
    at = 0
    while (at := len(out) - len(out[at:].lstrip())) < len(out):
        item, at = decoder.raw_decode(out, at)
        items.append(item)
    assert len(items) == len(reviews), out
    return [bool(item["status"].get("allowed")) for item in items]


def _render_as(
    overlay: str,
    *,
    prefix: str,
    namespace: str,
    workdir: Path,
    kubectl: Kubectl,
    components: tuple[str, ...] = (),
) -> list[Obj]:
    """The install's objects (``overlay``: a path under manifests/) as a user re-homing it would
    get them: renamed and re-namespaced, with the given components (paths under manifests/)."""
    kustomization: Obj = {
        "namePrefix": prefix,
        "namespace": namespace,
        "resources": [os.path.relpath(MANIFESTS / overlay, workdir)],
    }
    if components:
        kustomization["components"] = [
            os.path.relpath(ROOT / "manifests" / c, workdir) for c in components
        ]
    (workdir / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return kubectl.render(workdir)


@pytest.mark.parametrize("overlay", [*ALL_IN_ONE, *PER_FRAMEWORK])
def test_monitoring_is_a_component_of_either_flavour(
    overlay: str, kubectl: Kubectl, tmp_path: Path
) -> None:
    """The ServiceMonitor, alerts and the dashboard come with whichever overlay adds them, and
    move with it when it is re-homed; the ServiceMonitor selects every operator's metrics
    Service, the all-in-one's or the six per-framework ones, and nothing else."""
    rendered = _render_as(
        overlay,
        prefix="p-",
        namespace="ops",
        workdir=tmp_path,
        kubectl=kubectl,
        components=("monitoring",),
    )
    kinds = [o["kind"] for o in rendered]
    assert kinds.count("PrometheusRule") == 1
    monitors = [o for o in rendered if o["kind"] == "ServiceMonitor"]
    services = [o for o in rendered if o["kind"] == "Service"]
    scraped = {
        s["metadata"]["name"]
        for s in services
        for m in monitors
        if m["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()
    }
    operators = PLURALS if overlay in PER_FRAMEWORK else ["training-operator"]
    assert scraped == {f"p-{name}-metrics" for name in operators}
    # Each operator's other Service is its training-progress endpoint's, not scraped.
    others = {s["metadata"]["name"] for s in services} - scraped
    assert others == {f"p-{name}" for name in operators}, others
    for service in services:
        if service["metadata"]["name"] in others:
            assert [p["name"] for p in service["spec"]["ports"]] == ["trainjob-status"]
    [dashboard] = [o for o in rendered if o["kind"] == "ConfigMap"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["kubeflow-operators-py.json"])["panels"]
    monitoring = [
        o for o in rendered if o["kind"] in ("ServiceMonitor", "PrometheusRule", "ConfigMap")
    ]
    assert {o["metadata"]["namespace"] for o in monitoring} == {"ops"}


@pytest.mark.parametrize("gang", [False, True], ids=["", "gang-scheduling"])
@pytest.mark.parametrize("overlay", PER_FRAMEWORK)
def test_rbac_grants_each_operator_what_it_needs_and_no_more(
    overlay: str, gang: bool, kubectl: Kubectl, tmp_path: Path
) -> None:
    namespace = _fresh_namespace(kubectl, stem="rbac-pf", labels={})
    prefix = f"t{uuid.uuid4().hex[:6]}-"
    rendered = _render_as(
        overlay,
        prefix=prefix,
        namespace=namespace,
        workdir=tmp_path,
        kubectl=kubectl,
        components=("components/gang-scheduling",) if gang else (),
    )
    rbac = [o for o in rendered if o["kind"] in RBAC_KINDS]
    deployments = [o for o in rendered if o["kind"] == "Deployment"]
    flags = [d["spec"]["template"]["spec"]["containers"][0]["args"] for d in deployments]
    assert len(flags) == len(PLURALS)
    assert all(("--gang-scheduler-name=volcano" in args) == gang for args in flags), flags
    manifest = yaml.safe_dump_all(rbac)
    kubectl("apply", "-f", "-", stdin=manifest)
    try:
        questions = [
            (operator, access)
            for operator in PLURALS
            for access in _expectations(operator, namespaced=overlay in NAMESPACED, gang=gang)
        ]
        _judge(kubectl, questions, prefix=prefix, namespace=namespace)
    finally:
        kubectl("delete", "-f", "-", "--wait=false", "--ignore-not-found", stdin=manifest)
        kubectl("delete", "namespace", namespace, "--wait=false")


def _judge(
    kubectl: Kubectl, questions: list[tuple[str, Access]], *, prefix: str, namespace: str
) -> None:
    """Ask the authorizer each (service account, access) question; every answer must match."""
    reviews = [
        _review(f"system:serviceaccount:{namespace}:{prefix}{sa}", a, namespace=namespace)
        for sa, a in questions
    ]
    expected = [a.allowed for _, a in questions]
    # The authorizer learns of new bindings through its informers: wait until every grant
    # has arrived before judging the denials, which would otherwise pass vacuously.
    deadline = time.monotonic() + 60
    decisions = _decisions(kubectl, reviews)
    while not all(d for d, e in zip(decisions, expected, strict=True) if e):
        assert time.monotonic() < deadline, "the RBAC grants never took effect"
        time.sleep(0.5)
        decisions = _decisions(kubectl, reviews)
    wrong = [
        f"{sa}: {a.verb} {a.resource}.{a.group or 'core'} ({a.where}) -> {d}, want {a.allowed}"
        for (sa, a), d in zip(questions, decisions, strict=True)
        if d != a.allowed
    ]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("gang", [False, True], ids=["", "gang-scheduling"])
@pytest.mark.parametrize("overlay", ALL_IN_ONE)
def test_all_in_one_identity_has_the_union_of_the_operators_rules(
    overlay: str, gang: bool, kubectl: Kubectl, tmp_path: Path
) -> None:
    """The default install's one ServiceAccount for every kind: allowed what some operator is,
    denied the rest."""
    namespace = _fresh_namespace(kubectl, stem="rbac-all", labels={})
    prefix = f"t{uuid.uuid4().hex[:6]}-"
    rendered = _render_as(
        overlay,
        prefix=prefix,
        namespace=namespace,
        workdir=tmp_path,
        kubectl=kubectl,
        components=("components/gang-scheduling",) if gang else (),
    )
    rbac = [o for o in rendered if o["kind"] in RBAC_KINDS]
    assert {o["metadata"]["name"] for o in rbac if o["kind"] == "ServiceAccount"} == {
        f"{prefix}training-operator"
    }
    [deployment] = [o for o in rendered if o["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert ("--gang-scheduler-name=volcano" in args) == gang, args
    manifest = yaml.safe_dump_all(rbac)
    kubectl("apply", "-f", "-", stdin=manifest)
    try:
        union: dict[Access, bool] = {}
        namespaced = overlay in NAMESPACED
        for operator in PLURALS:
            for access in _expectations(operator, namespaced=namespaced, gang=gang):
                key = dataclasses.replace(access, allowed=False)
                union[key] = union.get(key, False) or access.allowed
        for access in _trainjob_expectations(namespaced=namespaced):
            key = dataclasses.replace(access, allowed=False)
            union[key] = union.get(key, False) or access.allowed
        questions = [
            ("training-operator", dataclasses.replace(a, allowed=allowed))
            for a, allowed in union.items()
        ]
        assert sum(a.allowed for _, a in questions) > 10
        _judge(kubectl, questions, prefix=prefix, namespace=namespace)
    finally:
        kubectl("delete", "-f", "-", "--wait=false", "--ignore-not-found", stdin=manifest)
        kubectl("delete", "namespace", namespace, "--wait=false")


def test_users_bound_to_edit_can_submit_jobs_and_view_can_only_read(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    """The user roles aggregate into Kubernetes' own: a RoleBinding to `edit` in a namespace
    lets a user create and delete training jobs there, one to `view` only read them."""
    namespace = _fresh_namespace(kubectl, stem="users", labels={})
    roles = [
        o
        for o in kubectl.render(MANIFESTS / "base")
        if o["kind"] in ("ClusterRole", "ClusterRoleBinding")
        and o["metadata"]["name"].startswith(("kubeflow-training-", "kubeflow-trainer-"))
    ]
    assert sorted((r["kind"], r["metadata"]["name"]) for r in roles) == [
        ("ClusterRole", "kubeflow-trainer-runtimes-view"),
        ("ClusterRole", "kubeflow-training-admin"),
        ("ClusterRole", "kubeflow-training-edit"),
        ("ClusterRole", "kubeflow-training-view"),
        ("ClusterRoleBinding", "kubeflow-trainer-runtimes-view"),
    ]
    manifest = yaml.safe_dump_all(roles)
    kubectl("apply", "--server-side", "-f", "-", stdin=manifest)
    for user, role in (("alice", "edit"), ("bob", "view")):
        kubectl(
            "create",
            "rolebinding",
            f"{user}-{role}",
            f"--clusterrole={role}",
            f"--user={user}",
            f"--namespace={namespace}",
        )

    def review(
        user: str, verb: str, resource: str, where: str = namespace, group: str = "kubeflow.org"
    ) -> Obj:
        return {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": ["system:authenticated"],
                "resourceAttributes": {
                    "namespace": where,
                    "verb": verb,
                    "group": group,
                    "resource": resource,
                },
            },
        }

    questions = [
        (review("alice", "create", "tfjobs"), True),
        (review("alice", "delete", "mpijobs"), True),
        (review("alice", "watch", "pytorchjobs"), True),
        (review("bob", "get", "tfjobs"), True),
        (review("bob", "list", "mpijobs"), True),
        (review("bob", "create", "tfjobs"), False),
        (review("bob", "delete", "pytorchjobs"), False),
        (review("alice", "create", "tfjobs", where="default"), False),
        # Kubeflow Trainer v2: TrainJobs as the v1 jobs; the runtimes readable by everyone.
        (review("alice", "create", "trainjobs", group="trainer.kubeflow.org"), True),
        (review("alice", "list", "trainingruntimes", group="trainer.kubeflow.org"), True),
        (review("alice", "create", "trainingruntimes", group="trainer.kubeflow.org"), False),
        (review("bob", "watch", "trainjobs", group="trainer.kubeflow.org"), True),
        (review("bob", "delete", "trainjobs", group="trainer.kubeflow.org"), False),
        (
            review(
                "carol", "list", "clustertrainingruntimes", where="", group="trainer.kubeflow.org"
            ),
            True,
        ),
        (
            review(
                "carol", "create", "clustertrainingruntimes", where="", group="trainer.kubeflow.org"
            ),
            False,
        ),
    ]
    try:
        # The controller-manager aggregates the rules into edit and view in a moment.
        deadline = time.monotonic() + 60
        decisions = _decisions(kubectl, [q for q, _ in questions])
        while decisions != [allowed for _, allowed in questions]:
            assert time.monotonic() < deadline, list(zip(decisions, questions, strict=True))
            time.sleep(0.5)
            decisions = _decisions(kubectl, [q for q, _ in questions])
        # Applying again, as the README says to upgrade, meets the rules the controller-manager
        # aggregated into kubeflow-training-admin: our manifest must not claim them.
        kubectl("apply", "--server-side", "-f", "-", stdin=manifest)
    finally:
        kubectl("delete", "namespace", namespace, "--wait=false")


@pytest.mark.parametrize("overlay", ["base", "overlays/per-framework"])
def test_every_operator_deployment_has_a_disruption_budget(overlay: str, kubectl: Kubectl) -> None:
    """A node drain may take one of an operator's two replicas at a time, never both."""
    objects = kubectl.render(MANIFESTS / overlay)
    deployments = {
        o["metadata"]["name"]: o["spec"]["selector"]["matchLabels"]
        for o in objects
        if o["kind"] == "Deployment"
    }
    budgets = {
        o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "PodDisruptionBudget"
    }
    assert set(budgets) == set(deployments)
    for name, selector in deployments.items():
        assert budgets[name]["selector"]["matchLabels"] == selector
        assert budgets[name]["maxUnavailable"] == 1
