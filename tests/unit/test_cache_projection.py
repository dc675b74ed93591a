"""The pod and service caches' projections keep every field the controllers read, and no
controller writes into a cached object.

Each example job (examples/, the seeds) is walked through its pods' lives (pending, running,
a container killed and restarting, a pod failed, all succeeded) three times at each step: once
planned from whole objects, as the API server sends them, and once from the same objects
projected and guarded, so that looking up a dropped field raises, and once from the objects as
the caches store them (read-only: their parts are shared between objects). The plans must be
the same. A reader that starts to use a field the projection drops fails
here; the field then belongs in runtime/projection.py's shape.
"""

from __future__ import annotations

import copy
import datetime as dt
import itertools
from pathlib import Path
from typing import Any

import pytest
from plan_fixtures import merge_patch

from jax_operator.controller import JAXJobController
from jobcontroller import CreateObject, DeleteObject, Observed, PatchObject, Plan, plan
from jobcontroller.controller.reconciler import Reconciler
from jobcontroller.controller.watch import UNREAD_ON_UPDATE
from jobcontroller.core.types import POD, SERVICE
from jobcontroller.runtime.projection import (
    POD_SHAPE,
    SERVICE_SHAPE,
    DroppedFieldRead,
    Projected,
    SharedObjectWrite,
    guarded,
    pod_shape,
    project,
    project_pod,
    project_service,
)
from jobcontroller.testing import yamlfast
from mpi_operator.controller import MPIJobController
from paddle_operator.controller import PaddleJobController
from pytorch_operator.controller import PyTorchJobController
from tf_operator.controller import TFJobController
from xgboost_operator.controller import XGBoostJobController

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [
    *sorted(ROOT.glob("examples/*.yaml")),
    *sorted(ROOT.glob("examples/real/*.yaml")),
    *sorted(ROOT.glob("tests/data/seeds/*.yaml")),
]
CONTROLLERS: dict[str, type[Reconciler[Any]]] = {
    "TFJob": TFJobController,
    "PyTorchJob": PyTorchJobController,
    "MPIJob": MPIJobController,
    "XGBoostJob": XGBoostJobController,
    "PaddleJob": PaddleJobController,
    "JAXJob": JAXJobController,
}
START = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def _shape(kind: str, obj: dict[str, Any]) -> Any:
    """The shape the caches keep of ``obj`` (None for a kind kept whole)."""
    if kind == POD:
        return pod_shape(obj)
    return SERVICE_SHAPE if kind == SERVICE else None


def _unread_shape(kind: str, obj: dict[str, Any]) -> dict[str, Any] | None:
    """The cache's shape of ``obj`` (the whole object for a kind kept whole) less the fields
    whose change alone wakes no job (controller/watch.py's UNREAD_ON_UPDATE)."""
    unread = UNREAD_ON_UPDATE.get(kind, ())
    base = _shape(kind, obj)
    if base is None and not unread:
        return None
    shape: dict[str, Any] = dict(base) if base is not None else dict.fromkeys(obj)
    for top, leaf in unread:
        part = shape.get(top)
        if part is None:  # kept whole: every field of the object's own, but ``leaf``
            part = dict.fromkeys(obj.get(top) or {})
        shape[top] = {k: v for k, v in part.items() if k != leaf}
    return shape


def _stamp(minutes: int) -> str:
    return (START + dt.timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


class ApiServer:
    """The job's namespace as the API server holds it: whole objects, server defaults
    included (the fields the caches drop must be there to be dropped)."""

    def __init__(self, job: dict[str, Any], controller: Reconciler[Any]) -> None:
        self.job = job
        self.controller = controller
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._uids = itertools.count()
        self.minute = 0

    def add(self, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", "ns")
        meta.setdefault("uid", f"uid-{next(self._uids)}")
        meta["resourceVersion"] = str(next(self._uids))
        meta["creationTimestamp"] = _stamp(self.minute)
        meta["managedFields"] = [{"manager": "op", "operation": "Update", "fieldsV1": {}}]
        if kind == POD:
            spec = obj.setdefault("spec", {})
            spec.setdefault("restartPolicy", "Always")
            spec.update(dnsPolicy="ClusterFirst", schedulerName="default-scheduler")
            spec.setdefault("volumes", []).append({"name": "token", "projected": {"sources": []}})
            spec["tolerations"] = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}]
            for c in spec.get("containers") or []:
                c.update(terminationMessagePath="/dev/termination-log", imagePullPolicy="Always")
                c.setdefault("volumeMounts", []).append({"name": "token", "mountPath": "/t"})
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        elif kind == SERVICE:
            obj["spec"].update(type="ClusterIP", ipFamilies=["IPv4"], sessionAffinity="None")
            obj["status"] = {"loadBalancer": {}}
        self.objects[(kind, meta["name"])] = obj
        return obj

    def pods(self) -> list[dict[str, Any]]:
        return [o for (k, _), o in sorted(self.objects.items()) if k == POD]

    def observed(self, *, cached: str) -> Observed:
        """``cached``: "" whole objects, "guarded" projected ones that raise on a lookup of
        a dropped field, "unread" those that also raise on a field whose change wakes no job,
        "stored" the caches' own (shared parts, raising on a write)."""

        def view(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
            if cached == "unread":
                unread = _unread_shape(kind, obj)
                return obj if unread is None else guarded(obj, unread)
            shape = _shape(kind, obj)
            if not cached or not shape:
                return obj
            return guarded(obj, shape) if cached == "guarded" else project(obj, shape)

        def controlled(uid: str) -> list[tuple[str, dict[str, Any]]]:
            return [
                (kind, view(kind, o))
                for (kind, _), o in sorted(self.objects.items())
                if any(
                    r.get("uid") == uid and r.get("controller")
                    for r in o["metadata"].get("ownerReferences") or []
                )
            ]

        by_kind: dict[str, list[dict[str, Any]]] = {}
        for kind, obj in controlled(self.job["metadata"]["uid"]):
            by_kind.setdefault(kind, []).append(obj)
        return Observed(
            pods=by_kind.pop(POD, []),
            services=by_kind.pop(SERVICE, []),
            owned=by_kind,
            lookup=lambda kind, name: (
                view(kind, self.objects[(kind, name)]) if (kind, name) in self.objects else None
            ),
            controlled_by=lambda kind, uid: [o for k, o in controlled(uid) if k == kind],
        )

    def plan(self, *, cached: str) -> Plan:
        now = START + dt.timedelta(minutes=self.minute, seconds=30)
        config = self.controller.config
        observed = self.observed(cached=cached)
        return plan(self.controller, copy.deepcopy(self.job), observed, now=now, config=config)

    def step(self) -> Plan:
        """Plan from whole and from cached objects, check they agree, apply the plan."""
        whole = self.plan(cached="")
        assert self.plan(cached="guarded") == whole
        assert self.plan(cached="unread") == whole
        assert self.plan(cached="stored") == whole
        for action in whole.actions:
            if isinstance(action, CreateObject):
                self.add(action.kind, self.controller.materialize(action).body)
            elif isinstance(action, DeleteObject):
                self.objects.pop((action.kind, action.name), None)
            elif isinstance(action, PatchObject):
                target = self.objects.get((action.kind, action.name), self.job)
                merge_patch(target, action.patch)
        if whole.status is not None:
            self.job["status"] = whole.status.to_dict()
        self._launcher_pods()
        self.minute += 1
        return whole

    def _launcher_pods(self) -> None:
        """The Job controller's part: a pod for each batch Job (an MPI launcher), with its
        tracking finalizer, and the Job's status counting it."""
        for (kind, name), obj in list(self.objects.items()):
            if kind != "Job":
                continue
            pod = self.objects.get((POD, f"{name}-x"))
            if pod is None:
                template = copy.deepcopy(obj["spec"]["template"])
                ref = {"kind": "Job", "name": name, "uid": obj["metadata"]["uid"]}
                meta = {
                    **template.get("metadata", {}),
                    "name": f"{name}-x",
                    "ownerReferences": [{**ref, "controller": True}],
                    "finalizers": ["batch.kubernetes.io/job-tracking"],
                }
                self.add(POD, {**template, "metadata": meta})
                continue
            phase = pod["status"].get("phase")
            running = phase in ("Pending", "Running")
            obj["status"] = {
                "active": int(running),
                "ready": int(phase == "Running"),
                "succeeded": int(phase == "Succeeded"),
                "failed": int(phase == "Failed"),
                "terminating": 0,
            }


def _running(pod: dict[str, Any], minute: int, **container: Any) -> None:
    pod["spec"]["nodeName"] = "node-1"
    pod["status"] = {
        "phase": "Running",
        "startTime": _stamp(minute),
        "hostIP": "10.0.0.1",
        "podIP": "10.1.0.7",
        "podIPs": [{"ip": "10.1.0.7"}],
        "qosClass": "BestEffort",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": _stamp(minute)}],
        "containerStatuses": [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "sha256:abc",
                "containerID": "containerd://1",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": _stamp(minute)}},
                **container,
            }
            for c in pod["spec"]["containers"]
        ],
    }


def _pending(pod: dict[str, Any], minute: int, *, pulling: bool) -> None:
    """Pending: unschedulable (its conditions say why), or scheduled with its image not
    pulled (its container's status says why)."""
    scheduled = {"type": "PodScheduled", "status": "True", "lastTransitionTime": _stamp(minute)}
    pod["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
    if not pulling:
        pod["status"]["conditions"] = [
            {
                **scheduled,
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 Insufficient cpu.",
                "lastProbeTime": None,
            }
        ]
        return
    pod["spec"]["nodeName"] = "node-1"
    waiting = {"reason": "ErrImagePull", "message": "pull access denied"}
    pod["status"].update(
        startTime=_stamp(minute),
        conditions=[
            scheduled,
            {
                "type": "Ready",
                "status": "False",
                "reason": "ContainersNotReady",
                "message": "containers with unready status: [c]",
                "lastTransitionTime": _stamp(minute),
            },
        ],
        containerStatuses=[
            {
                "name": c["name"],
                "ready": False,
                "restartCount": 0,
                "image": c.get("image", ""),
                "state": {"waiting": waiting},
                "lastState": {},
            }
            for c in pod["spec"]["containers"]
        ],
    )


def _ended(pod: dict[str, Any], minute: int, code: int, *, phase: str | None = None) -> None:
    _running(pod, minute)
    terminated = {"exitCode": code, "reason": "Error" if code else "Completed"}
    for status in pod["status"]["containerStatuses"]:
        status.update(
            ready=False, state={"terminated": {**terminated, "finishedAt": _stamp(minute)}}
        )
    pod["status"]["phase"] = phase or ("Succeeded" if code == 0 else "Failed")


def _crashing(pod: dict[str, Any], minute: int) -> None:
    last = {"terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": _stamp(minute)}}
    waiting = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s"}}
    _running(pod, minute, restartCount=1, lastState=last, state=waiting, ready=False)


def _example_jobs() -> list[Any]:
    params = []
    for path in EXAMPLES:
        for doc in yamlfast.load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") in CONTROLLERS:
                name = f"{path.parent.name}/{path.name}"
                params.append(pytest.param(doc, id=name))
    return params


@pytest.mark.parametrize("raw", _example_jobs())
def test_plans_from_cached_pods_and_services_match_plans_from_whole_ones(
    raw: dict[str, Any],
) -> None:
    job = copy.deepcopy(raw)
    job["metadata"].update(namespace="ns", uid="job-uid", resourceVersion="1")
    server = ApiServer(job, CONTROLLERS[job["kind"]]())
    for _ in range(4):
        server.step()
    pods = server.pods()
    assert pods, "the example created no pods"
    for i, pod in enumerate(pods):
        _pending(pod, server.minute, pulling=i % 2 == 1)
    pending = server.step()
    if job["kind"] != "MPIJob":  # mpi-operator reports no abnormal pods
        assert any(e.reason == "Unschedulable" for e in pending.events), pending.events
        assert any(e.reason == "ErrImagePull" for e in pending.events), pending.events
    for pod in pods:
        _running(pod, server.minute)
    server.step()
    # A pod being deleted (evicted, drained), then gone.
    terminating = server.pods()[-1]
    terminating["metadata"]["deletionTimestamp"] = _stamp(server.minute)
    server.step()
    del server.objects[(POD, terminating["metadata"]["name"])]
    server.step()
    _crashing(server.pods()[0], server.minute)
    server.step()
    _ended(server.pods()[-1], server.minute, 1)
    for _ in range(3):
        server.step()
    for pod in server.pods():
        if pod["status"]["phase"] != "Failed":
            _ended(pod, server.minute, 0)
    for _ in range(3):
        server.step()


def test_the_guard_raises_on_a_dropped_field_only() -> None:
    pod = {
        "metadata": {"name": "p", "managedFields": [{}], "labels": {"a": "b"}},
        "spec": {"containers": [{"name": "c", "env": [{"name": "X"}]}], "volumes": []},
    }
    seen = guarded(pod, POD_SHAPE)
    assert seen["metadata"]["labels"] == {"a": "b"}
    assert seen["spec"].get("nodeName") is None  # absent from the object: not dropped
    with pytest.raises(DroppedFieldRead, match=r"spec\.volumes"):
        seen["spec"].get("volumes")
    with pytest.raises(DroppedFieldRead, match=r"containers\[\].env"):
        _ = "env" in seen["spec"]["containers"][0]
    with pytest.raises(DroppedFieldRead, match="managedFields"):
        seen["metadata"]["managedFields"]


def test_a_reader_of_a_dropped_field_fails_the_comparison() -> None:
    """The harness above catches a framework whose rule starts reading a dropped field."""

    class ReadsEnv(TFJobController):
        def update_status(self, job: Any, status: Any, **kwargs: Any) -> Any:
            for pods in kwargs["replicas"].values():
                for slot in pods.by_index.values():
                    for pod in slot:
                        _ = [c.get("env") for c in pod["spec"]["containers"]]
            return super().update_status(job, status, **kwargs)

    raw = _example_jobs()[0].values[0]
    job = copy.deepcopy(raw) if raw["kind"] == "TFJob" else _tfjob()
    job["metadata"].update(namespace="ns", uid="job-uid", resourceVersion="1")
    server = ApiServer(job, ReadsEnv())
    server.step()
    with pytest.raises(DroppedFieldRead, match="env"):
        server.step()


def _tfjob() -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "tensorflow", "image": "i", "env": []}]}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "t"},
        "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 2, "template": template}}},
    }


def test_projection_builds_a_new_marked_object_and_leaves_the_original() -> None:
    pod = {
        "kind": "Pod",
        "metadata": {"name": "p", "managedFields": [{}]},
        "spec": {"containers": [{"name": "c", "image": "i"}], "volumes": [{"name": "v"}]},
        "status": {"phase": "Running", "podIP": "1.2.3.4"},
    }
    before = copy.deepcopy(pod)
    kept = project_pod(pod)
    assert pod == before
    assert kept == {
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }
    assert isinstance(kept, Projected) and isinstance(kept["metadata"], Projected)
    svc = {"metadata": {"name": "s"}, "spec": {"clusterIP": "None", "ports": [{"port": 1}]}}
    assert project_service(svc) == {"metadata": {"name": "s"}, "spec": {"clusterIP": "None"}}


def test_repeated_strings_are_held_once() -> None:
    a = project_pod({"metadata": {"labels": {"job": "".join(["tr", "ain"])}}})
    b = project_pod({"metadata": {"labels": {"job": "".join(["tra", "in"])}}})
    assert a["metadata"]["labels"]["job"] is b["metadata"]["labels"]["job"]


def test_the_progress_ca_a_v1_pod_carries_is_not_cached() -> None:
    """Every pod of a v1 job carries the progress endpoint's CA (about 600 bytes) for the
    downward API; no controller reads it, so the cache keeps the other annotations only."""
    from jobcontroller.core.progress import CA_ANNOTATION

    pod = {
        "metadata": {
            "name": "p",
            "annotations": {CA_ANNOTATION: "-----BEGIN CERTIFICATE-----...", "mine": "kept"},
        }
    }
    assert project_pod(pod)["metadata"]["annotations"] == {"mine": "kept"}
    assert CA_ANNOTATION in pod["metadata"]["annotations"]  # the original is left as it is


def _pod(name: str, job_uid: str, *, ready: object = True) -> dict[str, Any]:
    owner = {"kind": "PyTorchJob", "name": "j", "uid": job_uid, "controller": True}
    status = {"name": "c", "ready": ready, "state": {"running": {"startedAt": _stamp(0)}}}
    return {
        "metadata": {"name": name, "uid": f"{name}-uid", "ownerReferences": [owner]},
        "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n"},
        "status": {"phase": "Running", "containerStatuses": [status]},
    }


def test_equal_parts_of_cached_objects_are_held_once() -> None:
    a, b = project_pod(_pod("a", "job-1")), project_pod(_pod("b", "job-1"))
    assert a["metadata"]["ownerReferences"] is b["metadata"]["ownerReferences"]
    assert a["spec"] is b["spec"] and a["status"] is b["status"]
    assert a["metadata"] is not b["metadata"] and a["metadata"]["uid"] == "a-uid"
    other = project_pod(_pod("c", "job-2"))
    assert other["metadata"]["ownerReferences"] != a["metadata"]["ownerReferences"]


def test_running_pods_started_at_different_times_share_one_status() -> None:
    """A started pod's cached status holds nothing of its own (no start times, no condition
    stamps, no run before a restart), so the pods in the same state hold one status however
    their starts spread; a Pending pod keeps its conditions whole for the warnings."""
    pods = []
    for minute in (0, 7):
        pod = _pod(f"p{minute}", "job-1")
        _running(pod, minute)
        pod["status"]["initContainerStatuses"] = [
            {
                "name": "init",
                "ready": True,
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": _stamp(minute),
                        "finishedAt": _stamp(minute),
                        "containerID": f"containerd://{minute}",
                    }
                },
            }
        ]
        pods.append(project_pod(pod))
    a, b = pods
    assert a["status"] is b["status"]
    assert a["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
    assert a["status"]["containerStatuses"][0]["state"] == {"running": {}}
    pending = _pod("q", "job-1")
    _pending(pending, 3, pulling=False)
    assert project_pod(pending)["status"]["conditions"][0]["reason"] == "Unschedulable"


def test_parts_equal_only_by_value_across_types_are_not_shared() -> None:
    """``1 == True``: a part holding one must not stand for a part holding the other."""
    as_bool = project_pod(_pod("a", "job-1", ready=True))
    as_int = project_pod(_pod("b", "job-1", ready=1))
    assert as_int["status"]["containerStatuses"][0]["ready"] is not True
    assert as_bool["status"]["containerStatuses"][0]["ready"] is True


def test_a_shared_part_is_never_one_of_a_different_type_further_down() -> None:
    """Parts are shared bottom-up and compared without walking children that are the same
    object: one whose children differ in type only (``[1]`` and ``[True]``), or in their keys'
    values, still stands alone."""
    shape = {"metadata": {"name": None}, "spec": {"a": None}}
    ints = project({"metadata": {"name": "x"}, "spec": {"a": {"n": [1], "m": 1.0}}}, shape)
    bools = project({"metadata": {"name": "y"}, "spec": {"a": {"n": [True], "m": 1.0}}}, shape)
    floats = project({"metadata": {"name": "z"}, "spec": {"a": {"n": [1], "m": 1}}}, shape)
    assert bools["spec"]["a"]["n"][0] is True and ints["spec"]["a"]["n"][0] is not True
    assert type(floats["spec"]["a"]["m"]) is int and type(ints["spec"]["a"]["m"]) is float
    again = project({"metadata": {"name": "w"}, "spec": {"a": {"n": [1], "m": 1.0}}}, shape)
    assert again["spec"] is ints["spec"]


def test_each_shape_projects_by_its_own_fields() -> None:
    """Shapes are prepared once per shape object; a new one each call is read afresh."""
    obj = {"metadata": {"name": "x", "uid": "u"}, "spec": {"a": 1, "b": 2}, "status": {}}
    for _ in range(3):
        assert project(obj, {"spec": {"a": None}}) == {"spec": {"a": 1}}
        assert project(obj, {"metadata": {"uid": None}, "spec": {"b": None}}) == {
            "metadata": {"uid": "u"},
            "spec": {"b": 2},
        }
    assert project(obj, {"spec": [{"a": None}], "status": {"x": None}}) == {
        "spec": {"a": 1, "b": 2},
        "status": {},
    }


def test_cached_objects_refuse_writes_and_their_copies_take_them() -> None:
    pod = project_pod(_pod("a", "job-1"))
    writes = [
        lambda: pod.__setitem__("spec", {}),
        lambda: pod["metadata"].setdefault("labels", {}),
        lambda: pod["metadata"]["ownerReferences"].append({}),
        lambda: pod["metadata"]["ownerReferences"][0].update(uid="x"),
        lambda: pod["status"]["containerStatuses"][0].pop("ready"),
        lambda: pod["spec"]["containers"].__setitem__(0, {}),
        lambda: setattr(pod["status"], "_hash", 0),  # a wrong hash would hide the part
        lambda: setattr(pod["spec"]["containers"], "_hash", 0),
    ]
    for write in writes:
        with pytest.raises(SharedObjectWrite):
            write()
    deep = copy.deepcopy(pod)
    deep["metadata"]["ownerReferences"][0]["uid"] = "x"
    deep["status"]["containerStatuses"].append({})
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "job-1"
    assert isinstance(deep, Projected) and isinstance(copy.copy(pod), Projected)
    shallow = copy.copy(pod)
    shallow["spec"] = {}
    assert pod["spec"] == {"containers": [{"name": "c"}], "nodeName": "n"}


def test_the_shared_parts_are_bounded_by_what_the_caches_hold() -> None:
    """Parts of objects no cache holds any more are let go: the table does not grow with
    every pod ever seen (a timestamp in each pod's conditions makes its parts unique)."""
    from jobcontroller.runtime.projection import shared_parts

    held = [project_pod(_pod(f"p{i}", f"job-{i}")) for i in range(100)]
    for i in range(20_000):
        project_pod(_pod(f"gone{i}", f"gone-job-{i}"))  # listed, then dropped at once
    assert shared_parts() < 10_000
    assert held[0]["metadata"]["ownerReferences"][0]["uid"] == "job-0"


def test_whole_cached_objects_hold_short_strings_once() -> None:
    """The caches that keep whole objects (jobs) intern their short strings on arrival,
    except values unique to one object."""
    from jobcontroller.runtime.informer import strip_managed_fields

    def job(uid: str) -> dict[str, Any]:
        spec = {"containers": [{"name": "c", "image": "".join(["reg/", "img:1"])}]}
        return {
            "metadata": {"name": "j", "uid": uid, "managedFields": [{}]},
            "spec": {"template": {"spec": spec}},
        }

    a = strip_managed_fields(job("".join(["u", "1"])))
    b = strip_managed_fields(job("".join(["u", "1"])))
    image = lambda o: o["spec"]["template"]["spec"]["containers"][0]["image"]  # noqa: E731
    assert image(a) is image(b) and image(a) == "reg/img:1"
    assert a["metadata"]["uid"] is not b["metadata"]["uid"]
    assert "managedFields" not in a["metadata"]


def test_an_update_of_a_whole_cached_object_lends_only_parts_equal_in_type_too() -> None:
    """``1 == 1.0 == True``: a part of the cached version stands for the new version's only
    when both are written alike, so a value's type never changes under a reader; an integer
    beyond 64 bits is never lent."""
    from jobcontroller.runtime.informer import strip_managed_fields

    def job(**spec: Any) -> dict[str, Any]:
        return {"metadata": {"name": "j", "managedFields": [{}]}, "spec": {"a": dict(spec)}}

    cached = strip_managed_fields(job(n=1, flag=True, big=2**70))
    for changed in ({"n": 1.0}, {"flag": 1}, {}):
        spec = {"n": 1, "flag": True, "big": 2**70, **changed}
        new = strip_managed_fields(job(**spec), cached)
        assert new["spec"]["a"] == spec
        assert [type(v) for v in new["spec"]["a"].values()] == [type(v) for v in spec.values()]
        assert new["spec"] is not cached["spec"]  # the big integer: never lent
    same = strip_managed_fields(job(n=1, flag=True), strip_managed_fields(job(n=1, flag=True)))
    assert "managedFields" not in same["metadata"]
    lent = strip_managed_fields(job(n=1, flag=True), same)
    assert lent["spec"] is same["spec"]
