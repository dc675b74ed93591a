"""A new framework that needs a ConfigMap and a child batch Job (relay_operator.py, nothing
outside its own module) gets them kept by the base: created with the job's labels and owner,
patched back when someone edits them, the Job suspended and resumed with the job and its
counts read back into the job's status, on a real API server."""

from __future__ import annotations

import ast
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
import yaml
from relay_operator import RelayJobController

from jobcontroller.runtime.kube import CONFIGMAPS, CRDS, JOBS, ApiError, KubeApi, Resource
from jobcontroller.testing.operator import install_crds, running
from jobcontroller.testing.pods import simulate
from jobcontroller.testing.waiting import wait_for

RELAYJOBS = Resource("example.com", "v1", "RelayJob", "relayjobs")
SOURCE = Path(__file__).with_name("relay_operator.py")


@pytest_asyncio.fixture(loop_scope="session")
async def relay_crd(kube: KubeApi, tmp_path: Path) -> AsyncIterator[str]:
    path = tmp_path / "crd.yaml"
    path.write_text(yaml.safe_dump(RelayJobController().crd()))
    [name] = await install_crds(kube, [path])
    yield name
    with contextlib.suppress(ApiError):
        await kube.delete(CRDS, name)


def _template(run_for: str | None) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "relay", "image": "busybox"}]}}
    return simulate(template, 0 if run_for else None, run_for=run_for)


def _condition(job: dict[str, Any] | None, ctype: str) -> bool:
    conditions = ((job or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == ctype and c["status"] == "True" for c in conditions)


def test_the_framework_imports_only_what_jobcontroller_exports() -> None:
    tree = ast.parse(SOURCE.read_text())
    modules = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    }
    assert {m for m in modules if m.startswith("jobcontroller")} <= {
        "jobcontroller",
        "jobcontroller.api",
    }


async def test_relayjob_children_follow_the_job(
    kube: KubeApi, kubeconfig: str, namespace: str, relay_crd: str
) -> None:
    ns, name = namespace, "relay"
    job = {
        "apiVersion": "example.com/v1",
        "kind": "RelayJob",
        "metadata": {"name": name},
        "spec": {
            "runPolicy": {"suspend": True},
            "relayReplicaSpecs": {
                "Launcher": {"template": _template("2s")},
                "Worker": {"replicas": 2, "template": _template(None)},
            },
        },
    }
    async with running(kubeconfig, RelayJobController()):
        created = await kube.create(RELAYJOBS, job, namespace=ns)
        uid = created["metadata"]["uid"]

        # Suspended: the launcher Job exists, suspended; the hostfile is there.
        launcher = await wait_for(
            kube, JOBS, f"{name}-launcher", namespace=ns, until=lambda o: o is not None
        )
        assert launcher is not None and launcher["spec"]["suspend"] is True
        [wait] = launcher["spec"]["template"]["spec"]["initContainers"]
        env = {e["name"]: e["value"] for e in wait["env"]}
        assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("relay-worker-0", "2222")
        hosts = await wait_for(
            kube, CONFIGMAPS, f"{name}-hosts", namespace=ns, until=lambda o: o is not None
        )
        assert hosts is not None
        assert hosts["data"] == {"hostfile": "relay-worker-0\nrelay-worker-1"}
        for child in (launcher, hosts):
            meta = child["metadata"]
            assert meta["labels"]["training.kubeflow.org/job-name"] == name
            assert meta["labels"]["training.kubeflow.org/operator-name"] == "relayjob-controller"
            [owner] = meta["ownerReferences"]
            assert (owner["uid"], owner["controller"]) == (uid, True)

        # An edit of the hostfile is undone, the stray key dropped.
        await kube.merge_patch(
            CONFIGMAPS, f"{name}-hosts", {"data": {"hostfile": "x", "extra": "y"}}, namespace=ns
        )
        await wait_for(
            kube,
            CONFIGMAPS,
            f"{name}-hosts",
            namespace=ns,
            until=lambda o: (o or {}).get("data") == hosts["data"],
        )

        # Resumed: the launcher runs, and its success is the job's.
        await kube.merge_patch(
            RELAYJOBS, name, {"spec": {"runPolicy": {"suspend": False}}}, namespace=ns
        )
        await wait_for(
            kube,
            JOBS,
            f"{name}-launcher",
            namespace=ns,
            until=lambda o: not (o or {}).get("spec", {}).get("suspend"),
        )
        done = await wait_for(
            kube,
            RELAYJOBS,
            name,
            namespace=ns,
            until=lambda o: _condition(o, "Succeeded"),
            timeout=90,
        )
        assert done is not None
        assert done["status"]["replicaStatuses"]["Launcher"]["succeeded"] == 1
        # The base's rule for a deciding child Job, in its words; no code of RelayJob's.
        [succeeded] = [c for c in done["status"]["conditions"] if c["type"] == "Succeeded"]
        assert (succeeded["reason"], succeeded["message"]) == (
            "RelayJobSucceeded",
            f"RelayJob {ns}/{name} successfully completed.",
        )
