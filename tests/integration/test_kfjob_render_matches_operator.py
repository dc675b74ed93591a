"""``kfjob render`` shows what the operator really creates: every example and seed job is
rendered offline, then created on the local cluster with its operator running, and each object
the operator created (as it was first stored, before later patches) is compared with the
rendered one. The operator is built here as its own ``main`` builds it, not through kfjob.

Only what the API server fills in or rewrites is ignored: uid, resourceVersion,
creationTimestamp, managedFields, status, fields the rendered object does not have (server
defaults such as ``dnsPolicy`` or a Service's ``clusterIPs``), zero values it drops (Go's
omitempty: ``publishNotReadyAddresses: false``), quantities it stores as strings (``1`` ->
``"1"``) and the tolerations its DefaultTolerationSeconds admission plugin appends. Lists must
otherwise match item by item. Secret values are random (MPI's SSH keys), so a Secret is
compared by its keys.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from jax_operator.controller import JAXJobController
from jobcontroller import (
    CONFIGMAPS,
    HPAS,
    JOBS,
    PODS,
    SECRETS,
    SERVICES,
    JobController,
    add_job_flags,
    plan_config,
)
from jobcontroller.runtime.flags import parse_settings
from jobcontroller.runtime.kube import KubeApi, Resource
from jobcontroller.testing.operator import running
from jobcontroller.testing.waiting import wait_for
from kfjob.render import PLACEHOLDER_UID, REDACTED, render_job
from paddle_operator.controller import PaddleJobController
from training_operator.__main__ import SCHEMES
from training_operator.__main__ import add_flags as training_operator_flags
from xgboost_operator.controller import XGBoostJobController

ROOT = Path(__file__).resolve().parents[2]
FILES = [
    *sorted(ROOT.glob("examples/*.yaml")),
    *sorted(ROOT.glob("examples/real/*.yaml")),
    *sorted(ROOT.glob("tests/data/seeds/*.yaml")),
]
CHILDREN = {r.kind: r for r in (PODS, SERVICES, CONFIGMAPS, SECRETS, JOBS, HPAS)}
SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation")


def operator_controller(kind: str) -> JobController[Any]:
    """The controller as the operator's main builds it from its default flags."""

    def flags(parser: argparse.ArgumentParser) -> None:
        add_job_flags(parser)
        training_operator_flags(parser)

    settings = parse_settings(name="training-operator", argv=[], add_flags=flags)
    config = plan_config(settings)
    scheme = kind.lower()
    if scheme in SCHEMES:
        return SCHEMES[scheme](config, settings)
    others: dict[str, type[JobController[Any]]] = {
        "xgboostjob": XGBoostJobController,
        "paddlejob": PaddleJobController,
        "jaxjob": JAXJobController,
    }
    return others[scheme](config=config)


#: Tolerations the DefaultTolerationSeconds admission plugin appends to every pod.
DEFAULT_TOLERATIONS = [
    {"key": f"node.kubernetes.io/{taint}", "operator": "Exists", "effect": "NoExecute"}
    for taint in ("not-ready", "unreachable")
]


def differences(want: Any, have: Any, path: str = "") -> list[str]:
    """Where ``have`` (stored) does not carry ``want`` (rendered): every rendered field must be
    there with the same value, lists item by item (see the module docstring for what the API
    server may change)."""
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return [f"{path}: rendered a mapping, stored {have!r}"]
        out: list[str] = []
        for key, value in want.items():
            if key not in have:
                if value not in (False, 0, "", [], {}):  # omitempty drops zero values
                    out.append(f"{path}.{key}: rendered {value!r}, not stored")
            else:
                out += differences(value, have[key], f"{path}.{key}")
        return out
    if isinstance(want, list):
        if path.endswith(".tolerations") and isinstance(have, list):
            added = have[len(want) :]
            if all(any(t.items() >= d.items() for d in DEFAULT_TOLERATIONS) for t in added):
                have = have[: len(want)]
        if not isinstance(have, list) or len(have) != len(want):
            return [f"{path}: rendered {want!r}, stored {have!r}"]
        return [d for i, w in enumerate(want) for d in differences(w, have[i], f"{path}[{i}]")]
    if ".resources." in path and isinstance(want, int) and str(want) == have:
        return []  # a Quantity, stored in its canonical string form
    return [] if want == have else [f"{path}: rendered {want!r}, stored {have!r}"]


async def first_versions(
    kube: KubeApi, namespace: str, since: dict[str, str], owner_uid: str
) -> dict[tuple[str, str], dict[str, Any]]:
    """Each object the job controls, as first stored (its ADDED event), replayed by a watch
    from before the job was created."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for kind, resource in CHILDREN.items():
        async for event in kube.watch(
            resource,
            namespace=namespace,
            resource_version=since[kind],
            timeout_seconds=1,
            inactivity_timeout=5,
        ):
            obj = event.get("object") or {}
            refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
            if event.get("type") != "ADDED" or not any(r.get("uid") == owner_uid for r in refs):
                continue
            found.setdefault((kind, obj["metadata"]["name"]), obj)
    return found


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
async def test_render_equals_what_the_operator_creates(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str, path: Path
) -> None:
    for doc in [d for d in yaml.safe_load_all(path.read_text()) if d]:
        doc["metadata"]["namespace"] = namespace  # some name `kubeflow`: the test's own here
        rendered = render_job(doc, namespace=namespace)
        assert rendered.objects, f"{path.name}: render shows nothing"
        kind = rendered.kind
        job_resource = Resource(kind.group, kind.version, kind.kind, kind.plural)
        since = {k: (await kube.list(r, namespace=namespace))[1] for k, r in CHILDREN.items()}
        async with running(kubeconfig, operator_controller(kind.kind), namespace=namespace):
            job = await kube.create(job_resource, doc, namespace=namespace)
            for obj in rendered.objects:
                await wait_for(
                    kube,
                    CHILDREN[obj["kind"]],
                    obj["metadata"]["name"],
                    namespace=namespace,
                    until=lambda o: o is not None,
                    timeout=30,
                )
            await asyncio.sleep(1.0)  # room for anything render did not show
        stored = await first_versions(kube, namespace, since, job["metadata"]["uid"])
        wanted = {(o["kind"], o["metadata"]["name"]): o for o in rendered.objects}
        assert sorted(stored) == sorted(wanted), "the operator created other objects"
        for key, want in wanted.items():
            want = yaml.safe_load(
                yaml.safe_dump(want).replace(PLACEHOLDER_UID, job["metadata"]["uid"])
            )
            have = stored[key]
            for field in SERVER_FIELDS:
                assert field not in want["metadata"], f"render sets {field}"
            if key[0] == "Secret":
                assert set(want["data"].values()) == {REDACTED}
                assert set(have["data"]) == set(want["data"])
                want = {**want, "data": {}}
                have = {**have, "data": {}}
            assert differences(want, have, f"{key[0]}/{key[1]}") == []
