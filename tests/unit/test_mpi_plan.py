"""MPIJob reconciles planned from plain data: what is created when, and what the job becomes.

``Cluster`` applies a plan's actions the way the apiserver would (the Job controller and the
kubelet are the tests' hands), so each test walks a job through plan -> execute -> plan.
"""

from __future__ import annotations

import copy
import datetime as dt
import itertools
from typing import Any

from jobcontroller import CreateObject, DeleteJob, DeleteObject, Observed, PatchObject, Plan, plan
from mpi_operator.controller import MPIJobController

NOW = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
UID = "job-uid"


def mpijob(workers: int = 2, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": "ns", "uid": UID},
        "spec": {
            **spec,
            "mpiReplicaSpecs": {
                "Launcher": {"template": {"spec": {"containers": [{"name": "l", "image": "i"}]}}},
                "Worker": {
                    "replicas": workers,
                    "template": {"spec": {"containers": [{"name": "w", "image": "i"}]}},
                },
            },
        },
    }


def merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class Cluster:
    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._uids = itertools.count()
        self.deleted_job = False

    def add(self, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(body)
        obj["metadata"].setdefault("uid", f"uid-{next(self._uids)}")
        self.objects[(kind, obj["metadata"]["name"])] = obj
        return obj

    def get(self, kind: str, name: str) -> dict[str, Any]:
        return self.objects[(kind, name)]

    def observed(self) -> Observed:
        def controlled(uid: str) -> list[dict[str, Any]]:
            return [
                o
                for o in self.objects.values()
                if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences", []))
            ]

        mine = controlled(UID)
        by_kind: dict[str, list[dict[str, Any]]] = {}
        for (kind, _), obj in self.objects.items():
            if obj in mine:
                by_kind.setdefault(kind, []).append(obj)
        return Observed(
            pods=by_kind.pop("Pod", []),
            services=by_kind.pop("Service", []),
            owned=by_kind,
            lookup=lambda kind, name: self.objects.get((kind, name)),
            controlled_by=lambda kind, uid: [
                o for o in controlled(uid) if (kind, o["metadata"]["name"]) in self.objects
            ],
        )

    def plan(self, now: dt.datetime = NOW) -> Plan:
        controller = MPIJobController()
        return plan(controller, self.job, self.observed(), now=now, config=controller.config)

    def step(self, now: dt.datetime = NOW) -> Plan:
        """Plan, then apply the plan and the new status (as the executor would)."""
        result = self.plan(now)
        for action in result.actions:
            if isinstance(action, CreateObject):
                self.add(action.kind, MPIJobController().materialize(action).body)
            elif isinstance(action, DeleteObject):
                self.objects.pop((action.kind, action.name), None)
            elif isinstance(action, PatchObject):
                merge(self.get(action.kind, action.name), action.patch)
            elif isinstance(action, DeleteJob):
                self.deleted_job = True
        if result.status is not None:
            self.job["status"] = result.status.to_dict()
        return result

    def settle(self, now: dt.datetime = NOW) -> None:
        for _ in range(5):
            if not self.step(now).actions:
                return
        raise AssertionError("the plan does not converge")

    def set_pod(self, name: str, phase: str, *, ready: bool = True, reason: str = "") -> None:
        pod = self.get("Pod", name)
        pod["status"] = {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        }
        if reason:
            pod["status"]["reason"] = reason

    def set_launcher(self, **status: Any) -> None:
        self.get("Job", "pi-launcher")["status"] = status

    def launcher_pod(self, phase: str) -> None:
        job = self.get("Job", "pi-launcher")
        ref = {"kind": "Job", "uid": job["metadata"]["uid"], "controller": True}
        self.add("Pod", {"metadata": {"name": "pi-launcher-x", "ownerReferences": [ref]}})
        self.get("Pod", "pi-launcher-x")["status"] = {"phase": phase}


def kinds(result: Plan, action: type) -> list[tuple[str, str]]:
    return [(a.kind, a.name) for a in result.actions if isinstance(a, action)]


def conditions(cluster: Cluster) -> dict[str, tuple[str, str]]:
    return {
        c["type"]: (c["status"], c.get("reason", ""))
        for c in ((cluster.job.get("status") or {}).get("conditions") or [])
    }


def test_first_plan_creates_everything_the_launcher_after_its_mounts() -> None:
    cluster = Cluster(mpijob())
    first = cluster.step()
    assert sorted(kinds(first, CreateObject)) == [
        ("ConfigMap", "pi-config"),
        ("Job", "pi-launcher"),
        ("Pod", "pi-worker-0"),
        ("Pod", "pi-worker-1"),
        ("Secret", "pi-ssh"),
        ("Service", "pi"),
    ]
    # As mpi-operator's one sync: the launcher in the same pass, once the volumes it mounts
    # are created (the executor holds it back until they are).
    needs = {a.name: a.after for a in first.actions if isinstance(a, CreateObject)}
    assert needs["pi-launcher"] == (("ConfigMap", "pi-config"), ("Secret", "pi-ssh"))
    assert {name: after for name, after in needs.items() if after} == {
        "pi-launcher": needs["pi-launcher"]
    }
    cluster.settle()
    assert cluster.plan().actions == ()


def test_launcher_needs_only_the_mounts_not_yet_in_place() -> None:
    cluster = Cluster(mpijob())
    first = cluster.plan()
    config_map = next(a for a in first.actions if getattr(a, "kind", "") == "ConfigMap")
    cluster.add("ConfigMap", config_map.body)  # created in an earlier pass, its Secret not
    again = cluster.plan()
    launcher = next(a for a in again.actions if getattr(a, "name", "") == "pi-launcher")
    assert launcher.after == (("Secret", "pi-ssh"),)


def test_a_mount_going_away_holds_the_launcher_back_until_it_is_back() -> None:
    cluster = Cluster(mpijob())
    cluster.settle()
    del cluster.objects[("Job", "pi-launcher")]  # gone (a user deleted it)
    secret = cluster.get("Secret", "pi-ssh")
    secret["metadata"]["deletionTimestamp"] = "2024-01-01T12:00:00Z"  # and its Secret going
    assert ("Job", "pi-launcher") not in kinds(cluster.plan(), CreateObject)
    del cluster.objects[("Secret", "pi-ssh")]
    again = cluster.plan()
    assert ("Secret", "pi-ssh") in kinds(again, CreateObject)
    launcher = next(a for a in again.actions if getattr(a, "name", "") == "pi-launcher")
    assert launcher.after == (("Secret", "pi-ssh"),)


def test_a_foreign_object_in_a_mounts_place_holds_the_launcher_back() -> None:
    cluster = Cluster(mpijob())
    cluster.add("ConfigMap", {"metadata": {"name": "pi-config"}, "data": {"x": "y"}})
    for _ in range(3):
        cluster.step()
    assert ("Job", "pi-launcher") not in cluster.objects
    assert ("Pod", "pi-worker-0") in cluster.objects
    assert cluster.get("ConfigMap", "pi-config")["data"] == {"x": "y"}


def test_status_follows_the_launcher_and_workers_to_success() -> None:
    cluster = Cluster(mpijob(runPolicy={"ttlSecondsAfterFinished": 0}))
    cluster.settle()
    for name in ("pi-worker-0", "pi-worker-1"):
        cluster.set_pod(name, "Running")
    cluster.launcher_pod("Running")
    cluster.settle()
    assert conditions(cluster)["Running"] == ("True", "MPIJobRunning")
    cluster.set_launcher(
        conditions=[{"type": "Complete", "status": "True"}], completionTime="2024-01-01T11:59:00Z"
    )
    result = cluster.step()
    assert conditions(cluster)["Succeeded"] == ("True", "MPIJobSucceeded")
    assert cluster.job["status"]["completionTime"] == "2024-01-01T11:59:00Z"
    assert [e.reason for e in result.events].count("MPIJobSucceeded") == 1
    # The TTL is the launcher Job's: the MPIJob is never deleted by the operator.
    cluster.settle(NOW + dt.timedelta(hours=1))
    assert not cluster.deleted_job


def test_the_base_enforces_neither_deadline_nor_backoff_limit() -> None:
    cluster = Cluster(mpijob(runPolicy={"activeDeadlineSeconds": 1, "backoffLimit": 0}))
    cluster.settle()
    cluster.set_pod("pi-worker-0", "Failed")
    cluster.settle(NOW + dt.timedelta(minutes=5))
    assert "Failed" not in conditions(cluster)
    assert ("Pod", "pi-worker-0") in cluster.objects  # never recreated either


def test_wait_for_workers_ready() -> None:
    cluster = Cluster(mpijob(launcherCreationPolicy="WaitForWorkersReady"))
    cluster.settle()
    assert ("Job", "pi-launcher") not in cluster.objects
    cluster.set_pod("pi-worker-0", "Running")
    cluster.set_pod("pi-worker-1", "Running", ready=False)
    cluster.settle()
    assert ("Job", "pi-launcher") not in cluster.objects
    cluster.set_pod("pi-worker-1", "Running")
    cluster.settle()
    assert ("Job", "pi-launcher") in cluster.objects


def test_suspended_job_launcher_depends_on_the_creation_policy() -> None:
    at_startup = Cluster(mpijob(runPolicy={"suspend": True}))
    at_startup.settle()
    assert at_startup.get("Job", "pi-launcher")["spec"]["suspend"] is True
    assert not [k for k, _ in at_startup.objects if k == "Pod"]
    waiting = Cluster(
        mpijob(runPolicy={"suspend": True}, launcherCreationPolicy="WaitForWorkersReady")
    )
    waiting.settle()
    assert ("Job", "pi-launcher") not in waiting.objects  # mpi-operator #615


def test_suspend_and_resume_keep_the_service_and_toggle_the_launcher() -> None:
    cluster = Cluster(mpijob())
    cluster.settle()
    cluster.job["spec"]["runPolicy"] = {"suspend": True}
    suspended = cluster.step()
    assert sorted(kinds(suspended, DeleteObject)) == [
        ("Pod", "pi-worker-0"),
        ("Pod", "pi-worker-1"),
    ]
    assert kinds(suspended, PatchObject)[0] == ("Job", "pi-launcher")
    cluster.settle()
    assert cluster.get("Job", "pi-launcher")["spec"]["suspend"] is True
    assert ("Service", "pi") in cluster.objects and ("ConfigMap", "pi-config") in cluster.objects
    cluster.job["spec"]["runPolicy"] = {"suspend": False}
    cluster.settle()
    assert cluster.get("Job", "pi-launcher")["spec"]["suspend"] is False
    assert conditions(cluster)["Suspended"] == ("False", "MPIJobResumed")


def test_resume_brings_the_launchers_scheduling_directives_up_to_date() -> None:
    cluster = Cluster(mpijob(runPolicy={"suspend": True}))
    cluster.settle()
    template = cluster.job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
    template["spec"]["nodeSelector"] = {"zone": "a"}  # what a queue admitted the job to
    cluster.job["spec"]["runPolicy"] = {"suspend": False}
    cluster.settle()
    launcher = cluster.get("Job", "pi-launcher")
    assert launcher["spec"]["template"]["spec"]["nodeSelector"] == {"zone": "a"}


def test_eviction_fails_the_job_and_cleans_up_per_policy() -> None:
    cluster = Cluster(mpijob(runPolicy={"cleanPodPolicy": "Running"}))
    cluster.settle()
    cluster.set_pod("pi-worker-0", "Running")
    cluster.set_pod("pi-worker-1", "Failed", reason="Evicted")
    result = cluster.step()
    assert conditions(cluster)["Failed"] == ("True", "MPIJobEvicted")
    assert cluster.job["status"]["completionTime"]
    assert kinds(result, DeleteObject) == [("Pod", "pi-worker-0")]
    reasons = [e.reason for e in result.events]
    assert reasons.count("MPIJobEvicted") == 1 and "MPIJobFailed" not in reasons
    # The finished job's next pass stops the launcher, which would otherwise keep retrying.
    cluster.settle()
    assert cluster.get("Job", "pi-launcher")["spec"]["suspend"] is True
    assert ("Pod", "pi-worker-1") in cluster.objects


def test_finished_job_keeps_its_service_under_clean_pod_policy_all() -> None:
    cluster = Cluster(mpijob(runPolicy={"cleanPodPolicy": "All"}))
    cluster.settle()
    cluster.set_launcher(conditions=[{"type": "Failed", "status": "True", "reason": "R"}])
    cluster.settle()
    assert conditions(cluster)["Failed"] == ("True", "R")
    assert not [k for k, _ in cluster.objects if k == "Pod"]
    assert ("Service", "pi") in cluster.objects


def test_launcher_as_worker_offsets_worker_indices_stably() -> None:
    cluster = Cluster(mpijob(runLauncherAsWorker=True))
    cluster.settle()
    labels = [cluster.get("Pod", f"pi-worker-{i}")["metadata"]["labels"] for i in range(2)]
    assert [lab["training.kubeflow.org/replica-index"] for lab in labels] == ["1", "2"]
    assert cluster.plan().actions == ()


def test_foreign_launcher_job_is_a_conflict_and_never_touched() -> None:
    cluster = Cluster(mpijob())
    cluster.add("Job", {"metadata": {"name": "pi-launcher"}, "spec": {"suspend": False}})
    cluster.settle()
    created = conditions(cluster)["Created"]
    assert created == ("True", "ErrResourceExists")
    assert cluster.get("Job", "pi-launcher") == {
        "metadata": {"name": "pi-launcher", "uid": "uid-0"},
        "spec": {"suspend": False},
    }


def test_secret_with_missing_keys_is_replaced() -> None:
    cluster = Cluster(mpijob())
    cluster.settle()
    del cluster.get("Secret", "pi-ssh")["data"]["ssh-publickey"]
    assert kinds(cluster.step(), DeleteObject) == [("Secret", "pi-ssh")]
    cluster.settle()
    assert set(cluster.get("Secret", "pi-ssh")["data"]) == {"ssh-privatekey", "ssh-publickey"}


def test_config_map_edits_are_reverted() -> None:
    cluster = Cluster(mpijob())
    cluster.settle()
    want = copy.deepcopy(cluster.get("ConfigMap", "pi-config")["data"])
    cluster.get("ConfigMap", "pi-config")["data"] = {"hostfile": "x", "extra": "y"}
    cluster.settle()
    assert cluster.get("ConfigMap", "pi-config")["data"] == want


def test_managed_by_mpi_operator_is_ours_and_anything_else_is_not() -> None:
    ours = Cluster(mpijob(runPolicy={"managedBy": "kubeflow.org/mpi-operator"}))
    assert kinds(ours.plan(), CreateObject)
    theirs = Cluster(mpijob(runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"}))
    assert theirs.plan() == Plan()


def test_invalid_job_fails_without_objects() -> None:
    cluster = Cluster(mpijob(workers=11))
    cluster.job["metadata"]["name"] = "n" * 54
    result = cluster.step()
    assert result.actions == ()
    assert conditions(cluster)["Failed"] == ("True", "MPIJobFailedValidation")


def messages(cluster: Cluster) -> dict[str, tuple[str, str, str]]:
    return {
        c["type"]: (c["status"], c.get("reason", ""), c.get("message", ""))
        for c in ((cluster.job.get("status") or {}).get("conditions") or [])
    }


def test_created_suspended_and_resumed_in_mpi_operators_words() -> None:
    cluster = Cluster(mpijob(runPolicy={"suspend": True}))
    first = cluster.step()
    assert messages(cluster)["Created"] == ("True", "MPIJobCreated", "MPIJob ns/pi is created.")
    # v0.8 records the creation as an event too.
    assert [(e.type, e.reason, e.message) for e in first.events if e.reason == "MPIJobCreated"] == [
        ("Normal", "MPIJobCreated", "MPIJob ns/pi is created.")
    ]
    cluster.settle()
    # Suspended from the start: Running is False with v0.8's reason, though it never ran.
    assert messages(cluster)["Suspended"] == ("True", "MPIJobSuspended", "MPIJob suspended")
    assert messages(cluster)["Running"] == (
        "False",
        "MPIJobSuspended",
        "MPIJob ns/pi is suspended.",
    )
    cluster.job["spec"]["runPolicy"] = {"suspend": False}
    resumed = cluster.step()
    assert messages(cluster)["Suspended"] == ("False", "MPIJobResumed", "MPIJob resumed")
    assert ("Normal", "MPIJobResumed", "MPIJob resumed") in [
        (e.type, e.reason, e.message) for e in resumed.events
    ]
