"""One source for each replica rule: the API server and the operator judge alike.

Every kind declares its replica rules once (``REPLICA_RULES``); ``build_crd`` makes CEL of them
and the operator's validation checks them in Python. Here many replica maps of each kind go
through both: created on a real API server (the kind's CRD from ``build_crd``, under a group
of this test's own, so the kubeflow.org CRDs other tests share are not touched) and checked
by each declared rule in Python. Rule by rule, the API server's refusal names the rule's
message exactly when the Python check of that rule fails. Then the ratcheted rules: a job
stored before them (under a CRD without rules, as the Go operators' were) stays writable, a
job breaking a rule that is not ratcheted does not.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from jax_operator.api import JAXJob
from jobcontroller.api import (
    JobModel,
    JobSpec,
    ReplicaRule,
    ReplicaRules,
    build_crd,
    replica_specs_path,
)
from jobcontroller.runtime.kube import ApiError, KubeApi, Resource
from jobcontroller.testing.operator import install_crds
from mpi_operator.api import MPIJob
from paddle_operator.api import PaddleJob
from pytorch_operator.api import PyTorchJob
from tf_operator.api import TFJob
from xgboost_operator.api import XGBoostJob

GROUP = "replica-rules.example.com"
KINDS: list[type[JobModel[Any]]] = [TFJob, PyTorchJob, MPIJob, XGBoostJob, PaddleJob, JAXJob]

#: Replica-map keys to combine, per kind: its types, case variants, strangers.
KEYS = {
    "TFJob": ["Chief", "Master", "Worker", "PS", "Evaluator", "worker", "chief", "Trainer"],
    "PyTorchJob": ["Master", "Worker", "master", "Launcher"],
    "MPIJob": ["Launcher", "Worker", "worker", "Master"],
    "XGBoostJob": ["Master", "Worker", "master", "PS"],
    "PaddleJob": ["Master", "Worker", "worker", "PS"],
    "JAXJob": ["Worker", "worker", "PS"],
}
REPLICAS = [None, 0, 1, 2]
RESTART_POLICIES = [None, "Never", "OnFailure", "Always", "ExitCode"]


def _resource(model: type[JobModel[Any]]) -> Resource:
    return Resource(GROUP, model.VERSION, model.KIND, model.PLURAL)


def _crd(model: type[JobModel[Any]], *, rules: bool = True) -> dict[str, Any]:
    crd = build_crd(model, categories=())
    crd["metadata"]["name"] = f"{model.PLURAL}.{GROUP}"
    crd["spec"]["group"] = GROUP
    return crd if rules else _without_rules(crd)


def _without_rules(node: Any) -> Any:
    """A CRD without CEL rules, as the Go operators' CRDs were."""
    if isinstance(node, dict):
        return {k: _without_rules(v) for k, v in node.items() if k != "x-kubernetes-validations"}
    if isinstance(node, list):
        return [_without_rules(v) for v in node]
    return node


def _replica(model: type[JobModel[Any]], replicas: int | None, restart: str | None) -> Any:
    container = {"name": model.DEFAULT_CONTAINER_NAME or "main", "image": "busybox"}
    spec: dict[str, Any] = {"template": {"spec": {"containers": [container]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    if restart is not None:
        spec["restartPolicy"] = restart
    return spec


def _job(model: type[JobModel[Any]], name: str, specs: Any, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{model.VERSION}",
        "kind": model.KIND,
        "metadata": {"name": name},
        "spec": {_map_field(model): specs, **spec},
    }


def _map_field(model: type[JobModel[Any]]) -> str:
    """The replica map's JSON name (``tfReplicaSpecs``)."""
    spec_model = model.model_fields["spec"].annotation
    assert isinstance(spec_model, type) and issubclass(spec_model, JobSpec)
    return str(spec_model.model_fields[spec_model.replica_specs_field()].alias)


def _maps(model: type[JobModel[Any]]) -> list[dict[str, Any]]:
    """Every set of up to two keys (three for TFJob, whose rules relate three types), each
    with random draws of replicas (two; for MPIJob, with restart policies too, six), plus,
    for PyTorchJob, with and without an elasticPolicy. Seeded: the same maps on every run."""
    rng = random.Random(model.KIND)
    keys = KEYS[model.KIND]
    sizes = range(4 if model.KIND == "TFJob" else 3)
    restarts = RESTART_POLICIES if model.KIND == "MPIJob" else [None]
    jobs = []
    for combo in itertools.chain.from_iterable(itertools.combinations(keys, n) for n in sizes):
        for _ in range((6 if model.KIND == "MPIJob" else 2) if combo else 1):
            specs = {k: _replica(model, rng.choice(REPLICAS), rng.choice(restarts)) for k in combo}
            extra = [{}, {"elasticPolicy": {}}] if model.KIND == "PyTorchJob" else [{}]
            jobs += [{"specs": specs, "spec": e} for e in extra]
    return jobs


def _python_says(model: type[JobModel[Any]], rule: ReplicaRule, raw: dict[str, Any]) -> bool:
    """Whether the Python check of ``rule`` alone refuses the job."""
    rules = model.REPLICA_RULES
    assert rules is not None
    alone = ReplicaRules(rules=(rule,), exact=rules.exact, empty=None)
    job = model.parse(raw)
    present = {k for k, v in raw["spec"].items() if v is not None}
    errors = alone.errors(
        job.replica_specs(),
        path=replica_specs_path(job),
        known=model.REPLICA_TYPES,
        present=present,
    )
    return bool(errors)


@pytest_asyncio.fixture(loop_scope="session")
async def own_crds(kube: KubeApi, namespace: str, tmp_path: Path) -> AsyncIterator[Path]:
    """The six kinds' CRDs, with their rules, under this test's group."""
    await _install(kube, tmp_path, rules=True)
    for model in KINDS:
        await _refused_eventually(kube, model, namespace)
    yield tmp_path


async def _install(kube: KubeApi, directory: Path, *, rules: bool) -> None:
    """Create or replace the six CRDs (a replaced CRD's rules take effect a moment after it
    is Established: see :func:`_refused_eventually`)."""
    paths = []
    for model in KINDS:
        path = directory / f"{model.PLURAL}.yaml"
        path.write_text(yaml.safe_dump(_crd(model, rules=rules)))
        paths.append(path)
    await install_crds(kube, paths)


@pytest.mark.parametrize("model", KINDS, ids=lambda m: m.KIND)
async def test_admission_and_python_refuse_the_same_maps_for_the_same_rules(
    kube: KubeApi, own_crds: Path, namespace: str, model: type[JobModel[Any]]
) -> None:
    rules = model.REPLICA_RULES
    assert rules is not None
    declared = rules.declared(known=model.REPLICA_TYPES)
    resource = _resource(model)
    disagreements: list[str] = []
    refused_count = 0
    for i, case in enumerate(_maps(model)):
        raw = _job(model, f"r-{i}", case["specs"], **case["spec"])
        try:
            await kube.create(resource, copy.deepcopy(raw), namespace=namespace)
            refusal = ""
        except ApiError as exc:
            assert exc.status == 422, exc
            refusal = exc.message
            refused_count += 1
        for rule in declared:
            by_api = rule.message in refusal
            by_python = _python_says(model, rule, raw)
            if by_api != by_python:
                disagreements.append(
                    f"{rule.message!r} on {case}: API {by_api}, Python {by_python} ({refusal})"
                )
        # Nothing else is wrong with these jobs: refused exactly when a rule is broken.
        if bool(refusal) != any(rule.message in refusal for rule in declared):
            disagreements.append(f"{case}: refused for another reason: {refusal}")
    assert disagreements == []
    assert 0 < refused_count < len(_maps(model))  # the maps exercise both verdicts


# (kind, replica map a job was stored with, a later merge patch of its spec, the refusal
# expected: None where every rule the map breaks is ratcheted).
STORED: list[Any] = [
    ("TFJob", {"Trainer": 1, "Worker": 1}, {"Worker": 2}, None),
    ("TFJob", {"PS": 1}, {"PS": 2}, None),
    ("TFJob", {"Chief": 2, "Worker": 1}, {"Worker": 2}, None),
    ("TFJob", {"Chief": 1, "Master": 1, "Worker": 1}, {"Worker": 2}, "at most one of Chief"),
    ("TFJob", {"Worker": 1, "worker": 1}, {"Worker": 2}, "differ only in case"),
    ("PaddleJob", {}, None, None),
    ("PaddleJob", {"PS": 1, "Worker": 1}, {"Worker": 2}, "unsupported replica type"),
    ("JAXJob", {}, None, None),
    ("JAXJob", {"Worker": 1, "PS": 1}, {"Worker": 2}, "Unsupported value"),
    ("XGBoostJob", {"Worker": 1}, {"Worker": 2}, "Master: must be present"),
    ("MPIJob", {"Launcher": 2, "Worker": 1}, {"Worker": 2}, "Launcher replicas must be 1"),
    ("PyTorchJob", {"Master": 2}, {"Master": 3}, "Master replicas must be set"),
]
BY_KIND = {m.KIND: m for m in KINDS}


async def test_jobs_stored_before_the_rules_stay_writable_only_for_ratcheted_rules(
    kube: KubeApi, own_crds: Path, namespace: str
) -> None:
    await _install(kube, own_crds, rules=False)
    stored = []
    try:
        for i, (kind, specs, patch, refusal) in enumerate(STORED):
            model = BY_KIND[kind]
            replicas = {k: _replica(model, n, None) for k, n in specs.items()}
            raw = _job(model, f"s-{i}", replicas)
            await _admitted_eventually(kube, _resource(model), raw, namespace)
            stored.append((model, f"s-{i}", patch, refusal))
    finally:
        await _install(kube, own_crds, rules=True)
    for model in {m for m, *_ in stored}:
        await _refused_eventually(kube, model, namespace)

    for model, name, patch, refusal in stored:
        resource = _resource(model)
        field = _map_field(model)
        if patch is None:  # nothing in the map to change: change the spec beside it
            body: dict[str, Any] = {"spec": {"runPolicy": {"suspend": True}}}
        else:
            body = {"spec": {field: {k: {"replicas": n} for k, n in patch.items()}}}
        try:
            await kube.merge_patch(resource, name, body, namespace=namespace)
            outcome = None
        except ApiError as exc:
            assert exc.status == 422, exc
            outcome = exc.message
        if refusal is None:
            assert outcome is None, f"{model.KIND} {name}: {outcome}"
            status = {"status": {"conditions": [_condition()]}}
            await kube.merge_patch(
                resource, name, status, namespace=namespace, subresource="status"
            )
        else:
            assert outcome is not None and refusal in outcome, f"{model.KIND} {name}: {outcome}"


def _condition() -> dict[str, Any]:
    return {
        "type": "Created",
        "status": "True",
        "reason": "Created",
        "lastUpdateTime": "2024-01-01T00:00:00Z",
        "lastTransitionTime": "2024-01-01T00:00:00Z",
    }


async def _admitted_eventually(
    kube: KubeApi, resource: Resource, raw: dict[str, Any], namespace: str
) -> None:
    """Create once the API server has dropped the rules (it takes the CRD change in a moment)."""
    for _ in range(100):
        try:
            await kube.create(resource, copy.deepcopy(raw), namespace=namespace)
            return
        except ApiError as exc:
            if exc.status not in (404, 422):
                raise
        await asyncio.sleep(0.1)
    raise AssertionError(f"{raw} never admitted")


async def _refused_eventually(kube: KubeApi, model: type[JobModel[Any]], namespace: str) -> None:
    """Wait until the rules are back: an empty map (refused by every kind's rules but
    PyTorchJob's; for it, an unknown type) is refused again."""
    specs = {"Stranger": _replica(model, 1, None)} if model is PyTorchJob else {}
    resource = _resource(model)
    for i in range(100):
        probe = _job(model, f"probe-{i}", specs)
        try:
            await kube.create(resource, probe, namespace=namespace)
        except ApiError as exc:
            if exc.status == 422:
                return
            assert exc.status == 404, exc  # a CRD just created is not served yet
        await asyncio.sleep(0.1)
    raise AssertionError(f"{model.KIND}: the rules never came back")
