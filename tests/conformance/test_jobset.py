"""The real JobSet controller v0.12.0 deployed as a real cluster gets it (the ``jobset``
fixture of conftest.py: manifests/jobset's Deployment on the real node, its webhooks called
through its Service) running its Jobs on the real node: each worker pod finds the launcher by
the stable DNS name JobSet gives it (``<jobset>-<job>-<index>-<pod>.<jobset>``, through its
headless Service and the node's CoreDNS) and reports to it over TCP; the launcher hears both,
and the JobSet completes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import RealCluster
from realpods import (
    PODS,
    TOOLS_REF,
    dns_state,
    logs,
    real_template,
    wait_default_service_account,
)

from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.jobset import JOBSETS
from jobcontroller.testing.waiting import wait_for

PORT = 7000
#: The launcher keeps one listening socket open (``-k``) until it holds both workers' reports.
#: Listening once per report lost one: openbsd nc without ``-k`` serves one connection and
#: exits, so a worker connecting while the first report is read waits in the listening
#: socket's backlog (the kernel accepts it; its nc sends and exits 0) and is reset unread.
LAUNCHER = (
    f": > /tmp/reports; nc -lk {PORT} >> /tmp/reports & "
    'until [ "$(grep -c . /tmp/reports)" -ge 2 ]; do sleep 0.2; done; '
    'cat /tmp/reports; kill "$!"'
)
#: A worker retries until the launcher's name resolves and it listens.
WORKER = (
    f'until echo "report from $(hostname)" | nc -N -w 5 ring-launcher-0-0.ring {PORT}; '
    "do sleep 0.5; done"
)


def _job(name: str, script: str, *, pods: int) -> dict[str, Any]:
    template = real_template(
        "main", ["/bin/sh", "-c", script], image=TOOLS_REF, restartPolicy="Never"
    )
    return {
        "name": name,
        "replicas": 1,
        "template": {
            "spec": {
                "parallelism": pods,
                "completions": pods,
                "backoffLimit": 0,
                "activeDeadlineSeconds": 240,
                "template": template,
            }
        },
    }


def _true(obj: dict[str, Any] | None, kind: str) -> bool:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)


async def test_workers_reach_the_launcher_by_its_jobset_dns_name_on_the_real_node(
    jobset: RealCluster, kube: KubeApi, namespace: str
) -> None:
    await wait_default_service_account(kube, namespace)
    body = {
        "apiVersion": JOBSETS.api_version,
        "kind": "JobSet",
        "metadata": {"name": "ring"},
        "spec": {
            "replicatedJobs": [
                _job("launcher", LAUNCHER, pods=1),
                _job("worker", WORKER, pods=2),
            ]
        },
    }
    created = await kube.create(JOBSETS, body, namespace=namespace)
    # Defaulted by the webhook, which the API server reached through JobSet's Service.
    assert created["spec"]["successPolicy"] == {"operator": "All"}
    done = await wait_for(
        kube,
        JOBSETS,
        "ring",
        namespace=namespace,
        until=lambda o: _true(o, "Completed") or _true(o, "Failed"),
        timeout=300,
    )
    pods, _ = await kube.list(PODS, namespace=namespace)
    outputs = {
        p["metadata"]["name"]: await logs(kube, namespace, p["metadata"]["name"]) for p in pods
    }
    if not _true(done, "Completed"):
        state = {
            "jobset": (done or {}).get("status"),
            "pods": {
                p["metadata"]["name"]: (
                    p["status"].get("phase"),
                    p["status"].get("podIP"),
                    p["spec"].get("hostname"),
                    p["spec"].get("subdomain"),
                )
                for p in pods
            },
            "logs": outputs,
        }
        try:
            state["dns"] = await dns_state(kube, namespace, ["ring", "ring-launcher-0-0.ring"])
        except Exception as exc:  # the failure above is the one to report
            state["dns"] = repr(exc)
        pytest.fail(f"the JobSet did not complete:\n{json.dumps(state, indent=1)}")
    assert {p["spec"]["nodeName"] for p in pods} == {"real-node-0"}
    (launcher,) = [p for p in pods if p["spec"]["hostname"] == "ring-launcher-0-0"]
    heard = sorted(outputs[launcher["metadata"]["name"]].splitlines())
    assert heard == ["report from ring-worker-0-0", "report from ring-worker-0-1"], heard
    # The controller that ran it: its Deployment's one pod, on the real node, never restarted.
    (controller,) = [
        p
        for p in (await kube.list(PODS, namespace="jobset-system"))[0]
        if p["metadata"]["name"].startswith("jobset-controller-manager-")
    ]
    assert controller["spec"]["nodeName"] == "real-node-0"
    assert [c["restartCount"] for c in controller["status"]["containerStatuses"]] == [0]
