"""Parity with the real Go Kubeflow Trainer v2.3.0 controller: for every recording
(``tests/data/anchor/trainer-v2.3.0/*.json``, made by ``hack/anchor_record_trainer.py``), our
TrainJob controller, in-process, given the same runtime and the same TrainJob, makes the same
JobSet, the same runtime snapshot (and other owned objects), the same TrainJob conditions and
the same events, field for field.

Both sides are stored by the same kube-apiserver build behind the same JobSet v0.12.0 webhooks
(the ``jobset`` fixture here; the recorder ran them too), so what the CRD schemas and JobSet's
defaulting webhook fill in is compared like everything else. Dropped on both sides: uid,
resourceVersion, creationTimestamp, managedFields, generation, ownerReferences[].uid, the
objects' status, and the TrainJob's ``status.jobsStatus`` (JobSet's counts of the cluster's
pods: the recording's never ran, kwok runs ours). The recording's namespace is the test's.

Every field where we deliberately differ is in ``DOCUMENTED`` (the path, the cases, the reason),
also written in docs/trainjob.md ("Parity with the Go trainer v2.3.0"); an entry that no longer
matches a difference fails too. ``JOBCONTROLLER_PARITY_COUNTS=path`` appends each case's counts of
identical and different leaf fields to that file (how the docs' table is made).
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from trainer_fixtures import CLUSTER_RUNTIMES, RUNTIMES, TRAINJOBS, is_subset
from trainjob_helpers import events_of

from jobcontroller.runtime.kube import CONFIGMAPS, SECRETS, ApiError, KubeApi
from jobcontroller.testing.jobset import JOBSETS, JobSetController
from jobcontroller.testing.operator import running
from trainer_operator.controller import TrainJobController

ANCHOR = Path(__file__).parents[1] / "data" / "anchor" / "trainer-v2.3.0"
RECORDINGS = sorted(ANCHOR.glob("*.json"))
RECORDED_NAMESPACE = "anchor"

Obj = dict[str, Any]


@dataclass(frozen=True)
class Documented:
    path: str
    """A regular expression matched against a whole leaf path (``jobset.spec...``)."""
    cases: tuple[str, ...]
    """The recordings it applies to (each must show it); empty: every one with a JobSet."""
    reason: str
    order_only: bool = False
    """Only the order of the list (group ``list`` of ``path``) differs, its items are the same;
    upstream's order is random per process, so a recording need not show it."""


_POD = r"jobset\.spec\.replicatedJobs\[\d+\]\.template\.spec\.template"
_SNAPSHOT_TEMPLATE = r"configmaps\[\d+\]\.data\.runtime\.spec\.template"
_EVICTED = ("kueue-evict",)

# ONE table: every deliberate difference, each also in docs/trainjob.md ("Parity with the Go
# trainer v2.3.0").
DOCUMENTED: tuple[Documented, ...] = (
    Documented(
        r"(jobset|configmaps\[\d+\]|secrets\[0\])\.metadata\.labels"
        r"\.training\.kubeflow\.org/job-name",
        (),
        "the JobSet, the snapshot and the MPI policy's hostfile ConfigMap and SSH Secret carry "
        "training.kubeflow.org/job-name: the operator's informers select on it, so they cache "
        "only its own JobSets, ConfigMaps and Secrets",
    ),
    Documented(
        rf"{_SNAPSHOT_TEMPLATE}(\.spec\.replicatedJobs\[\d+\]\.template(\.spec\.template)?)?"
        r"\.metadata"
        rf"|{_SNAPSHOT_TEMPLATE}\.spec\.replicatedJobs\[\d+\]\.template\.spec\.template"
        r"\.spec\.(initContainers|containers)\[\d+\]\.resources",
        (),
        "the snapshot's YAML: Go writes its empty structs (a JobSet, Job or pod template's "
        "metadata, a container's resources) as {}, ours leaves them out; both read back as the "
        "same runtime",
    ),
    Documented(
        r"trainjob\.spec\.runtimePatches\[\d+\]\.time",
        ("runtime-patches", "torch-sidecars", "kueue-admit"),
        "no mutating webhook here: runtimePatches[].time is what the writer sets (v2.3.0's "
        "defaulter sets it to the admission time; nothing acts on it)",
    ),
    Documented(
        r"(?P<list>jobset\.spec\.replicatedJobs\[0\]\.template\.spec\.template\.spec"
        r"\.containers\[0\]\.env)\[\d+\]\..*",
        ("xgboost-gpus",),
        "XGBoost: upstream runs its plain and XGBoost plugins in Go map order, random per "
        "process, so the TrainJob's env comes before or after the tracker's; ours always before",
        order_only=True,
    ),
    Documented(
        rf"jobset\.spec\.suspend|{_POD}\.metadata(\.labels\.kueue\.x-k8s\.io/podset)?"
        rf"|{_POD}\.spec\.nodeSelector\.pool|events(\[0\]\.(type|reason|message))?",
        _EVICTED,
        "v2.3.0 cannot evict it: its apply sends the pod template's metadata as null once the "
        "patch that gave it labels is gone, the JobSet's CRD refuses that (an event, retried), "
        "and the JobSet runs on unsuspended with Kueue's node selector; ours suspends it and "
        "removes the patch's fields",
    ),
)


# ------------------------------------------------------------------------------ normalising

_VOLATILE = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation")


def normalise(obj: Obj | None, namespace: str) -> Obj | None:
    if obj is None:
        return None
    out = copy.deepcopy(obj)
    meta = out.get("metadata", {})
    for key in (*_VOLATILE, "selfLink"):
        meta.pop(key, None)
    if "namespace" in meta:
        meta["namespace"] = namespace
    for ref in meta.get("ownerReferences", []):
        ref.pop("uid", None)
    out.pop("status", None)
    for patch in (out.get("spec") or {}).get("runtimePatches") or []:
        if "time" in patch:
            patch["time"] = "<set>"
    return out


def trainjob_stored(obj: Obj, namespace: str) -> Obj:
    out = normalise(obj, namespace)
    assert out is not None
    out["status"] = {
        "conditions": [
            {k: v for k, v in c.items() if k != "lastTransitionTime"}
            for c in (obj.get("status") or {}).get("conditions") or []
        ]
    }
    return out


def owned_object(obj: Obj, kind: str, namespace: str) -> Obj:
    out = {"apiVersion": "v1", "kind": kind, **(normalise(obj, namespace) or {})}
    if kind == "Secret":
        out["data"] = dict.fromkeys(out.get("data") or {}, "<dropped>")
    elif "runtime" in (out.get("data") or {}):
        out["data"]["runtime"] = normalise(yaml.safe_load(out["data"]["runtime"]), namespace)
    return out


def leaves(value: Any, path: str = "") -> dict[str, Any]:
    """Every leaf field as ``path -> value`` (an empty object or list is a leaf)."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, sub in value.items():
            out.update(leaves(sub, f"{path}.{key}" if path else key))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, sub in enumerate(value):
            out.update(leaves(sub, f"{path}[{i}]"))
        return out
    return {path: value}


_ABSENT = "<absent>"


def compare(recorded: Obj, ours: Obj) -> tuple[int, dict[str, tuple[Any, Any]]]:
    """(identical leaf count, {path: (recorded, ours)} for each differing leaf)."""
    rec, got = leaves(recorded), leaves(ours)
    same = sum(1 for p in rec if p in got and rec[p] == got[p])
    diff = {
        p: (rec.get(p, _ABSENT), got.get(p, _ABSENT))
        for p in sorted(set(rec) | set(got))
        if rec.get(p, _ABSENT) != got.get(p, _ABSENT)
    }
    return same, diff


# ------------------------------------------------------------------------------------ setup


def _renamespaced(value: Any, namespace: str) -> Any:
    """``value`` with every ``metadata.namespace`` of the recording's namespace the test's."""
    if isinstance(value, list):
        return [_renamespaced(v, namespace) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: _renamespaced(v, namespace) for k, v in value.items()}
    meta = out.get("metadata")
    if isinstance(meta, dict) and meta.get("namespace") == RECORDED_NAMESPACE:
        meta["namespace"] = namespace
    return out


def _recorded(recording: Obj, namespace: str) -> Obj:
    """The recording's compared objects (normalised when recorded), in the test's namespace."""
    stored = copy.deepcopy(recording["trainjob_stored"])
    stored["status"].pop("jobsStatus", None)
    out: Obj = _renamespaced(
        {
            "jobset": recording["jobset"],
            "configmaps": recording.get("configmaps") or [],
            "secrets": recording.get("secrets") or [],
            "trainjob": stored,
            "events": recording.get("events") or [],
        },
        namespace,
    )
    return out


async def _runtime(kube: KubeApi, runtime: Obj, namespace: str) -> None:
    """The recorded runtime: a ClusterTrainingRuntime is created when missing (and kept, as the
    shipped ones are) or must be the recorded one; a TrainingRuntime goes in the namespace."""
    runtime = copy.deepcopy(runtime)
    if runtime["kind"] == "TrainingRuntime":
        runtime["metadata"]["namespace"] = namespace
        await kube.create(RUNTIMES, runtime, namespace=namespace)
        return
    try:
        await kube.create(CLUSTER_RUNTIMES, runtime)
    except ApiError as exc:
        if not exc.is_already_exists:
            raise
        there = await kube.get(CLUSTER_RUNTIMES, runtime["metadata"]["name"])
        # Stored, it has its CRD's defaults too (replicas, groupName).
        assert is_subset(runtime["spec"], there["spec"]), "not the recorded runtime"
        assert there["metadata"].get("labels") == runtime["metadata"].get("labels")


async def _ours(
    kube: KubeApi, name: str, namespace: str, kinds: dict[str, Any], after: Obj | None = None
) -> Obj:
    """Our objects once the JobSet is there (or a Warning event), they differ from ``after``
    and nothing changed for 3 s."""
    deadline, quiet_since, last = time.monotonic() + 60, 0.0, ""
    while True:
        tj = await kube.get(TRAINJOBS, name, namespace=namespace)
        try:
            jobset: Obj | None = await kube.get(JOBSETS, name, namespace=namespace)
        except ApiError as exc:
            if not exc.is_not_found:
                raise
            jobset = None
        owned = {}
        for key, (resource, kind) in kinds.items():
            items, _ = await kube.list(resource, namespace=namespace)
            owned[key] = [
                owned_object(o, kind, namespace)
                for o in sorted(items, key=lambda o: str(o["metadata"]["name"]))
                if any(
                    r["kind"] == "TrainJob" and r["name"] == name
                    for r in o["metadata"].get("ownerReferences") or []
                )
            ]
        events: list[Obj] = []  # each once, as recorded
        for e in await events_of(kube, namespace, name):
            seen = {"type": e["type"], "reason": e["reason"], "message": e["message"]}
            if seen not in events:
                events.append(seen)
        state: Obj = {
            "jobset": normalise(jobset, namespace),
            **owned,
            "trainjob": trainjob_stored(tj, namespace),
            "events": events,
        }
        snapshot = json.dumps(state, sort_keys=True)
        ready = jobset is not None or any(e["type"] == "Warning" for e in events)
        if ready and (after is None or state != after):
            if snapshot != last:
                quiet_since, last = time.monotonic(), snapshot
            elif time.monotonic() - quiet_since >= 3:
                return state
        assert time.monotonic() < deadline, f"{name}: no JobSet nor Warning event: {state}"
        await asyncio.sleep(0.3)


def _at(value: Any, path: str) -> Any:
    """The value at a path of :func:`leaves` whose keys hold no dots (``a.b[0].c``)."""
    for key, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path):
        value = value[int(index)] if index else value[key]
    return value


def _applies(entry: Documented, case: str) -> bool:
    return not entry.cases or case in entry.cases


def _write_counts(case: str, counts: dict[str, tuple[int, int]]) -> None:
    target = os.environ.get("JOBCONTROLLER_PARITY_COUNTS")
    if target:
        with open(target, "a") as out:
            out.write(json.dumps({"case": case, "counts": counts}) + "\n")


# ------------------------------------------------------------------------------------ test


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda path: path.stem)
async def test_same_objects_as_trainer_v2_3_0(
    recording: Path,
    kube: KubeApi,
    kubeconfig: str,
    kubeflow_crds: list[str],
    jobset: JobSetController,
    namespace: str,
) -> None:
    rec = json.loads(recording.read_text())
    case = rec["case"]
    job = copy.deepcopy(rec["trainjob"])
    job["metadata"]["namespace"] = namespace
    name = job["metadata"]["name"]
    await _runtime(kube, rec["runtime"], namespace)
    kinds = {"configmaps": (CONFIGMAPS, "ConfigMap"), "secrets": (SECRETS, "Secret")}
    async with running(kubeconfig, TrainJobController(), namespace=namespace):
        await kube.create(TRAINJOBS, job, namespace=namespace)
        ours = await _ours(kube, name, namespace, kinds)
        for patch in rec.get("then") or ():
            await kube.merge_patch(TRAINJOBS, name, patch, namespace=namespace)
            ours = await _ours(kube, name, namespace, kinds, after=ours)

    if rec["denied"]:
        # v2.3.0's webhook refused it; here the CRD takes it and the controller refuses it.
        detail = rec["denied"].split(": ")[-1]
        assert ours["jobset"] is None
        assert [(e["type"], e["reason"]) for e in ours["events"]] == [
            ("Warning", "TrainJobResourcesCreationFailed")
        ]
        assert detail in ours["events"][0]["message"]
        return

    expected = _recorded(rec, namespace)
    counts: dict[str, tuple[int, int]] = {}
    undocumented: list[str] = []
    seen: set[Documented] = set()
    for key in ("jobset", "configmaps", "secrets", "trainjob", "events"):
        same, diff = compare({key: expected[key]}, {key: ours[key]})
        counts[key] = (same, len(diff))
        for path, (want, got) in diff.items():
            entry = next(
                (
                    d
                    for d in DOCUMENTED
                    if _applies(d, case) and re.fullmatch(d.path, path) is not None
                ),
                None,
            )
            if entry is not None and entry.order_only:
                match = re.fullmatch(entry.path, path)
                assert match is not None
                lists = [_at(side, match["list"]) for side in (expected, ours)]
                same_items = [sorted(json.dumps(i, sort_keys=True) for i in x) for x in lists]
                entry = entry if same_items[0] == same_items[1] else None
            if entry is None:
                undocumented.append(f"{path}: v2.3.0 {json.dumps(want)} | ours {json.dumps(got)}")
            else:
                seen.add(entry)
    _write_counts(case, counts)
    print(f"{case}: " + ", ".join(f"{k} {s} same/{d} different" for k, (s, d) in counts.items()))
    assert not undocumented, "\n".join(undocumented)
    stale = [d.path for d in DOCUMENTED if _applies(d, case) and not d.order_only and d not in seen]
    assert not stale, f"documented differences not seen in {case}: {stale}"


async def test_takes_over_a_trainjob_the_go_controller_started(
    kube: KubeApi,
    kubeconfig: str,
    kubeflow_crds: list[str],
    jobset: JobSetController,
    namespace: str,
) -> None:
    """A cluster moving from the Go controller to ours: a suspended TrainJob that v2.3.0
    started (its JobSet and runtime snapshot as recorded, without our label) is adopted, not
    rebuilt: our controller labels the two objects (an ``Adopted<Kind>`` event each), reports
    no error, gives it v2.3.0's Suspended condition, and plans from v2.3.0's snapshot, not from
    the runtime as it is now (a pod label added since would reach the suspended JobSet)."""
    rec = json.loads((ANCHOR / "torch-runtime-resources.json").read_text())
    runtime = copy.deepcopy(rec["runtime"])
    [rjob] = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    rjob["template"]["spec"]["template"]["metadata"] = {"labels": {"added": "since"}}
    await _runtime(kube, runtime, namespace)
    job = copy.deepcopy(rec["trainjob"])
    job["metadata"]["namespace"] = namespace
    job["spec"]["suspend"] = True
    name = job["metadata"]["name"]
    created = await kube.create(TRAINJOBS, job, namespace=namespace)
    expected = _recorded(rec, namespace)
    owner = {**expected["jobset"]["metadata"]["ownerReferences"][0]}
    owner["uid"] = created["metadata"]["uid"]
    go_jobset = copy.deepcopy(expected["jobset"])
    go_jobset["metadata"]["ownerReferences"] = [owner]
    go_jobset["spec"]["suspend"] = True  # as v2.3.0 makes it for a suspended TrainJob
    await kube.create(JOBSETS, go_jobset, namespace=namespace)
    [go_snapshot] = copy.deepcopy(expected["configmaps"])
    go_snapshot["metadata"]["ownerReferences"] = [owner]
    go_snapshot["data"]["runtime"] = yaml.safe_dump(go_snapshot["data"]["runtime"])
    await kube.create(CONFIGMAPS, go_snapshot, namespace=namespace)
    kinds = {"configmaps": (CONFIGMAPS, "ConfigMap"), "secrets": (SECRETS, "Secret")}

    async with running(kubeconfig, TrainJobController(), namespace=namespace):
        ours = await _ours(kube, name, namespace, kinds)
        await asyncio.sleep(3)  # a plan that would rebuild or fail has had its time
        ours = await _ours(kube, name, namespace, kinds)

    assert sorted((e["type"], e["reason"]) for e in ours["events"]) == [
        ("Normal", "AdoptedConfigMap"),
        ("Normal", "AdoptedJobSet"),
    ]
    label = {"training.kubeflow.org/job-name": name}
    assert ours["jobset"] == {
        **go_jobset,
        "metadata": {**expected["jobset"]["metadata"], "labels": label},
    }
    [snapshot] = ours["configmaps"]
    assert snapshot["metadata"]["labels"] == label
    assert snapshot["data"] == expected["configmaps"][0]["data"]
    suspended = json.loads((ANCHOR / "suspended.json").read_text())["conditions"]
    assert ours["trainjob"]["status"]["conditions"] == suspended
