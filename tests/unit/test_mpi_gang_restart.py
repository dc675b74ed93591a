"""Whole-gang restart of an MPIJob: the workers and the launcher Job go and come back together."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from test_mpi_plan import NOW, Cluster, merge, mpijob

from jobcontroller import (
    GANG_GENERATION_ANNOTATION,
    GANG_RESTART_ANNOTATION,
    RESTART_COUNT_ANNOTATION,
    CreateObject,
    DeleteObject,
    JobMetric,
    PatchObject,
    Plan,
)
from mpi_operator.controller import MPIJobController


class GangCluster(Cluster):
    def step(self, now: dt.datetime = NOW) -> Plan:
        """As the base cluster, plus the patches of the MPIJob itself (the gang ledger)."""
        result = self.plan(now)
        for action in result.actions:
            if isinstance(action, CreateObject):
                self.add(action.kind, MPIJobController().materialize(action).body)
            elif isinstance(action, DeleteObject):
                self.objects.pop((action.kind, action.name), None)
            elif isinstance(action, PatchObject) and action.kind == "MPIJob":
                merge(self.job, action.patch)
            elif isinstance(action, PatchObject):
                merge(self.get(action.kind, action.name), action.patch)
        if result.status is not None:
            self.job["status"] = result.status.to_dict()
        return result

    def launcher_failed(self, exit_code: int) -> None:
        self.launcher_pod("Failed")
        pod = self.get("Pod", "pi-launcher-x")
        pod["spec"] = {"containers": [{"name": "l", "image": "i"}]}
        pod["status"]["containerStatuses"] = [
            {"name": "l", "state": {"terminated": {"exitCode": exit_code, "reason": "Error"}}}
        ]


def gang_mpijob(**run_policy: Any) -> GangCluster:
    job = mpijob(runPolicy={"restartScope": "All", **run_policy})
    job["spec"]["mpiReplicaSpecs"]["Worker"]["restartPolicy"] = "OnFailure"
    cluster = GangCluster(job)
    cluster.settle()
    return cluster


def test_launcher_job_never_retries_alone_under_restart_scope_all() -> None:
    cluster = gang_mpijob(backoffLimit=3)
    launcher = cluster.get("Job", "pi-launcher")
    assert launcher["spec"]["backoffLimit"] == 0
    assert launcher["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert launcher["metadata"]["annotations"] == {GANG_GENERATION_ANNOTATION: "0"}
    assert (
        launcher["spec"]["template"]["metadata"]["annotations"][GANG_GENERATION_ANNOTATION] == "0"
    )
    worker = cluster.get("Pod", "pi-worker-0")
    assert worker["spec"]["restartPolicy"] == "Never"


def test_a_failed_worker_restarts_workers_and_launcher() -> None:
    cluster = gang_mpijob(backoffLimit=3)
    old_launcher = cluster.get("Job", "pi-launcher")["metadata"]["uid"]
    cluster.set_pod("pi-worker-1", "Failed")
    cluster.get("Pod", "pi-worker-1")["status"]["containerStatuses"] = [
        {"name": "w", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
    ]
    record = cluster.step()
    assert [a.kind for a in record.actions] == ["MPIJob"]
    assert record.metrics.count(JobMetric.RESTARTED) == 1
    assert [e.message for e in record.events if e.reason == "MPIJobRestarting"] == [
        "MPIJob pi is restarting its whole gang (restart 1) because pod pi-worker-1 (Worker) "
        "failed with exit code 137 (OOMKilled)."
    ]
    delete = cluster.step()
    assert sorted((a.kind, a.name) for a in delete.actions if isinstance(a, DeleteObject)) == [
        ("Job", "pi-launcher"),
        ("Pod", "pi-worker-0"),
        ("Pod", "pi-worker-1"),
    ]
    recreate = cluster.step()
    assert sorted((a.kind, a.name) for a in recreate.actions if isinstance(a, CreateObject)) == [
        ("Job", "pi-launcher"),
        ("Pod", "pi-worker-0"),
        ("Pod", "pi-worker-1"),
    ]
    cluster.settle()
    launcher = cluster.get("Job", "pi-launcher")
    assert launcher["metadata"]["uid"] != old_launcher
    assert launcher["metadata"]["annotations"] == {GANG_GENERATION_ANNOTATION: "1"}
    assert cluster.job["metadata"]["annotations"][RESTART_COUNT_ANNOTATION] == "1"
    assert ("Service", "pi") in cluster.objects and ("Secret", "pi-ssh") in cluster.objects


def test_a_failed_launcher_restarts_the_gang_and_its_failed_job_does_not_fail_the_mpijob() -> None:
    cluster = gang_mpijob()
    cluster.launcher_failed(1)  # OnFailure, the Launcher's default: any failure retries
    cluster.set_launcher(conditions=[{"type": "Failed", "status": "True"}])
    cluster.step()
    record = json.loads(cluster.job["metadata"]["annotations"][GANG_RESTART_ANNOTATION])
    assert (record["pod"], record["replicaType"], record["exitCode"]) == (
        "pi-launcher-x",
        "Launcher",
        1,
    )
    cluster.step()
    assert ("Job", "pi-launcher") not in cluster.objects
    cluster.objects.pop(("Pod", "pi-launcher-x"))  # the garbage collector's part
    cluster.settle()
    assert "Failed" not in {
        c["type"] for c in cluster.job["status"]["conditions"] if c["status"] == "True"
    }
    assert cluster.get("Job", "pi-launcher")["metadata"]["annotations"] == {
        GANG_GENERATION_ANNOTATION: "1"
    }


def test_the_backoff_limit_fails_the_mpijob() -> None:
    cluster = gang_mpijob(backoffLimit=0)
    cluster.launcher_failed(137)
    cluster.step()
    failed = next(c for c in cluster.job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "MPIJobFailed"
    assert "reached the specified backoff limit" in failed["message"]
    assert "pi-launcher-x (Launcher) failed with exit code 137" in failed["message"]
