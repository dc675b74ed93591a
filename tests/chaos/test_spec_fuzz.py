"""Property-based fuzzing of job specs for every kind, against the three operators as processes.

Hypothesis builds TFJobs, PyTorchJobs and MPIJobs from valid and invalid parts: replica counts
(0, huge, negative, past the 100,000 ceiling and int32), restart policies, replica types in
any case and unknown ones, pod templates with bad ports, duplicate containers, bad quantities,
missing images, run policies, nprocPerNode, slotsPerWorker and elastic maxReplicas values
(past their ceilings too), names near and past the length limits. Each job must be rejected at
admission with a message, or reach a terminal state with a reason, or run (it has pods and no
error); and no operator may die or restart. The operators run with ``--max-pods-per-job=40``
so a huge job is refused by the operator with a condition, not built.

The examples are derandomized, so a CI run is reproducible; ``FUZZ_EXAMPLES`` sets how many.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from harness import KINDS, AuditedPlane, terminal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from jobcontroller.testing.pods import sim_annotations
from jobcontroller.testing.processes import OperatorProcess

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "60"))
NAMESPACE = "fuzz"
GROUP = "kubeflow.org"
VERSIONS = {"TFJob": "v1", "PyTorchJob": "v1", "MPIJob": "v2beta1"}
PLURALS = {"TFJob": "tfjobs", "PyTorchJob": "pytorchjobs", "MPIJob": "mpijobs"}
SPECS_FIELD = {
    "TFJob": "tfReplicaSpecs",
    "PyTorchJob": "pytorchReplicaSpecs",
    "MPIJob": "mpiReplicaSpecs",
}
CONTAINERS = {"TFJob": "tensorflow", "PyTorchJob": "pytorch", "MPIJob": "mpi"}
RTYPES = {
    "TFJob": ["Worker", "worker", "PS", "Chief", "master", "Evaluator", "Trainer"],
    "PyTorchJob": ["Master", "Worker", "worker", "Launcher"],
    "MPIJob": ["Launcher", "Worker", "Driver"],
}

Obj = dict[str, Any]

#: What each submitted job came to, by name: "rejected", "terminal", "running" or "stuck".
OUTCOMES: dict[str, str] = {}
SUBMITTED: dict[str, str] = {}  # name -> kind


#: How wild a generated job is: "clean" draws only valid values; "template" lets the pod
#: template be one the API server refuses at pod creation (admission cannot see it: the CRD
#: keeps the template open); "any" mixes in values admission must refuse.
MODES = ("clean", "clean", "template", "any")


def _pick(draw: st.DrawFn, mode: str, good: list[Any], bad: list[Any], worse: list[Any]) -> Any:
    pool = good + (bad if mode != "clean" else []) + (worse if mode == "any" else [])
    return draw(st.sampled_from(pool))


def _container(kind: str, draw: st.DrawFn, mode: str) -> Obj:
    container: Obj = {"name": _pick(draw, mode, [CONTAINERS[kind]], [], ["main"])}
    image = _pick(draw, mode, ["img:1"], [], [None])
    if image is not None:
        container["image"] = image
    port = _pick(draw, mode, [None, 2222], [70000, 0], [])
    if port is not None:
        container["ports"] = [{"containerPort": port}]
    cpu = _pick(draw, mode, [None, "1"], ["abc", "-1"], [])
    if cpu is not None:
        container["resources"] = {"limits": {"cpu": cpu}}
    return container


@st.composite
def replica_spec(draw: st.DrawFn, kind: str, mode: str) -> Obj:
    containers = [_container(kind, draw, mode)]
    if mode != "clean" and draw(st.booleans()):
        containers.append(dict(containers[0]))  # a duplicate container name
    exit_code = draw(st.sampled_from([0, 0, 0, 1, 137]))
    template: Obj = {
        "metadata": {"annotations": sim_annotations(exit_code, run_for="1s")},
        "spec": {"containers": containers},
    }
    spec: Obj = {"template": template}
    # 1000 passes admission and is failed by --max-pods-per-job=40; past 100,000 admission
    # refuses (the replica ceiling, issue 30).
    replicas = _pick(draw, mode, [None, 1, 2, 3], [], [0, -1, 2**31, 2**31 - 1, 100_001, 1000])
    if replicas is not None:
        spec["replicas"] = replicas
    policy = _pick(
        draw, mode, [None, "Never", "OnFailure", "ExitCode"], [], ["Always", "Sometimes"]
    )
    if policy is not None:
        spec["restartPolicy"] = policy
    return spec


VALID_TYPES = {
    "TFJob": [["Worker"], ["PS", "Worker"], ["Chief", "Worker"], ["worker", "Evaluator"]],
    "PyTorchJob": [["Master", "Worker"], ["Master"], ["Worker"]],
    "MPIJob": [["Launcher", "Worker"], ["Launcher"]],
}


@st.composite
def job(draw: st.DrawFn) -> Obj:
    kind = draw(st.sampled_from(list(KINDS)))
    mode = draw(st.sampled_from(MODES))
    # Made unique when submitted: "{n}" becomes a running number.
    name = _pick(draw, mode, ["f{n}", "f{n}-" + "x" * 40], [], ["f{n}-" + "y" * 60, "Bad_{n}"])
    if mode == "any":
        rtypes = draw(st.lists(st.sampled_from(RTYPES[kind]), max_size=3, unique=True))
    else:
        rtypes = draw(st.sampled_from(VALID_TYPES[kind]))
    specs = {rtype: draw(replica_spec(kind, mode)) for rtype in rtypes}
    if kind == "PyTorchJob" and "Master" in specs:
        specs["Master"]["replicas"] = 1
    if kind == "MPIJob" and "Launcher" in specs:
        specs["Launcher"]["replicas"] = 1
        specs["Launcher"]["restartPolicy"] = "Never"
    if kind == "TFJob" and mode != "any":
        for rtype in ("Chief",):
            if rtype in specs:
                specs[rtype]["replicas"] = 1
    spec: Obj = {SPECS_FIELD[kind]: specs}
    run_policy: Obj = {}
    for key, good, worse in (
        ("backoffLimit", [None, 0, 2], [-1]),
        ("activeDeadlineSeconds", [None, 30], [-3]),
        ("cleanPodPolicy", [None, "All", "Running", "None"], ["Bogus"]),
    ):
        value = _pick(draw, mode, good, [], worse)
        if value is not None:
            run_policy[key] = value
    if run_policy:
        spec["runPolicy"] = run_policy
    if kind == "PyTorchJob":
        nproc = _pick(
            draw, mode, [None, "auto", "4", "1024"], [], ["abc", "0", "-1", "1025", "2147483647"]
        )
        if nproc is not None:
            spec["nprocPerNode"] = nproc
        backend = _pick(draw, mode, [None, "c10d"], [], ["zookeeper"])
        most = _pick(draw, mode, [3], [], [2**31 - 1, 100_001])
        if backend is not None and "Worker" in specs:
            spec["elasticPolicy"] = {"rdzvBackend": backend, "minReplicas": 1, "maxReplicas": most}
    if kind == "MPIJob":
        slots = _pick(draw, mode, [None, 1, 2, 1024], [], [0, 2**31, 1025, 100_000])
        if slots is not None:
            spec["slotsPerWorker"] = slots
    return {
        "apiVersion": f"{GROUP}/{VERSIONS[kind]}",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }


@pytest.fixture(scope="module")
def objects(audited: AuditedPlane) -> Iterator[client.CustomObjectsApi]:
    api_client = config.new_client_from_config(str(audited.plane.kubeconfig))
    core = client.CoreV1Api(api_client)
    ext = client.ApiextensionsV1Api(api_client)
    from harness import install_crds_sync

    install_crds_sync(ext)
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    yield client.CustomObjectsApi(api_client)
    api_client.close()


@pytest.fixture(scope="module")
def operators(audited: AuditedPlane, objects: client.CustomObjectsApi) -> Iterator[list[Any]]:
    ops = [
        audited.operator(kind, f"fuzz-{kind.lower()}", "--max-pods-per-job=40") for kind in KINDS
    ]
    for op in ops:
        op.start()
    yield ops
    for op in ops:
        op.close()


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(body=job())
def test_fuzzed_specs_are_refused_or_handled(
    body: Obj, objects: client.CustomObjectsApi, operators: list[OperatorProcess]
) -> None:
    kind = body["kind"]
    name = body["metadata"]["name"].format(n=len(SUBMITTED) + len(OUTCOMES))
    body["metadata"]["name"] = name
    try:
        objects.create_namespaced_custom_object(
            GROUP, VERSIONS[kind], NAMESPACE, PLURALS[kind], body
        )
    except ApiException as exc:
        assert exc.status in (400, 422), (exc.status, exc.body)
        assert exc.body and "message" in exc.body
        OUTCOMES[name] = "rejected"
        return
    SUBMITTED[name] = kind


def _outcome(objects: client.CustomObjectsApi, core: client.CoreV1Api, name: str, kind: str) -> str:
    job_obj = objects.get_namespaced_custom_object(
        GROUP, VERSIONS[kind], NAMESPACE, PLURALS[kind], name
    )
    if terminal(job_obj):
        conditions = (job_obj.get("status") or {}).get("conditions") or []
        done = next(c for c in conditions if c["type"] == terminal(job_obj))
        return "terminal" if done.get("reason") else "terminal without a reason"
    pods = core.list_namespaced_pod(
        NAMESPACE, label_selector=f"training.kubeflow.org/job-name={name}"
    ).items
    return "running" if pods else "stuck"


def test_every_accepted_job_ends_or_runs_and_no_operator_died(
    objects: client.CustomObjectsApi, operators: list[OperatorProcess]
) -> None:
    core = client.CoreV1Api(objects.api_client)
    deadline = time.monotonic() + 45
    pending = dict(SUBMITTED)
    while pending and time.monotonic() < deadline:
        for name, kind in list(pending.items()):
            outcome = _outcome(objects, core, name, kind)
            if outcome == "terminal":
                OUTCOMES[name] = outcome
                del pending[name]
        time.sleep(2)
    for name, kind in pending.items():
        OUTCOMES[name] = _outcome(objects, core, name, kind)
    counts: dict[str, int] = {}
    for outcome in OUTCOMES.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    print(f"\nchaos/fuzz: {len(OUTCOMES)} generated jobs: {counts}")
    assert all(op.alive and op.starts == 1 for op in operators), [op.tail() for op in operators]
    bad = {name: o for name, o in OUTCOMES.items() if o not in ("rejected", "terminal", "running")}
    assert not bad, bad
