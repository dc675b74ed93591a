"""Training progress for the v1 kinds (this project's extension), the pure parts: what a v1
job's pods are given when the endpoint serves (the same env names as a TrainJob's trainer, a
URL and token audience of the job's own kind, the CA in a pod annotation), which pods may
report, and nothing at all when the endpoint is off."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from jobcontroller import PROGRESS, CreateObject, Observed, PlanConfig, ProgressEndpoint, plan
from jobcontroller.controller.progress import v1_pod_check
from mpi_operator.controller import MPIJobController
from pytorch_operator.controller import PyTorchJobController

Obj = dict[str, Any]

NOW = dt.datetime(2026, 8, 10, 12, 0, tzinfo=dt.UTC)
ENDPOINT = ProgressEndpoint(url="https://op.kubeflow.svc:10443/", ca_pem="PEM")
URL = "https://op.kubeflow.svc:10443/apis/kubeflow.org/v1/namespaces/team/pytorchjobs/pt/status"


def _pytorchjob() -> Obj:
    container = {"name": "pytorch", "image": "torch", "env": [{"name": "A", "value": "1"}]}
    template = {"spec": {"containers": [container, {"name": "sidecar", "image": "s"}]}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "pt", "namespace": "team", "uid": "uid-pt"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template},
                "Worker": {"replicas": 1, "template": template},
            }
        },
    }


def _observed(endpoint: ProgressEndpoint | None) -> Observed:
    return Observed(extra={PROGRESS: endpoint})


def _created(actions: Any, kind: str) -> list[Obj]:
    return [a.body for a in actions if isinstance(a, CreateObject) and a.kind == kind]


def test_every_container_of_every_pod_gets_the_trainjob_env_names_with_its_kinds_url() -> None:
    result = plan(
        PyTorchJobController(), _pytorchjob(), _observed(ENDPOINT), now=NOW, config=PlanConfig()
    )
    pods = _created(result.actions, "Pod")
    assert len(pods) == 2
    for pod in pods:
        spec = pod["spec"]
        for container in spec["containers"]:
            env = {e["name"]: e.get("value") for e in container["env"]}
            assert env["KUBEFLOW_TRAINER_SERVER_URL"] == URL
            assert env["KUBEFLOW_TRAINER_SERVER_TOKEN"] == "/var/run/secrets/kubeflow/trainer/token"
            assert (
                env["KUBEFLOW_TRAINER_SERVER_CA_CERT"] == "/var/run/secrets/kubeflow/trainer/ca.crt"
            )
            assert {
                "name": "kubeflow-trainer-token",
                "mountPath": "/var/run/secrets/kubeflow/trainer",
                "readOnly": True,
            } in container["volumeMounts"]
        # The template's own env is kept, before ours.
        assert spec["containers"][0]["env"][0] == {"name": "A", "value": "1"}
        [volume] = [v for v in spec["volumes"] if v["name"] == "kubeflow-trainer-token"]
        token, ca = volume["projected"]["sources"]
        assert token["serviceAccountToken"] == {
            "audience": "kubeflow.org/v1/namespaces/team/pytorchjobs/pt/status",
            "expirationSeconds": 3600,
            "path": "token",
        }
        # The CA travels in the pod itself: an annotation the downward API writes as ca.crt.
        assert ca == {
            "downwardAPI": {
                "items": [
                    {
                        "path": "ca.crt",
                        "fieldRef": {
                            "fieldPath": "metadata.annotations['training.kubeflow.org/progress-ca']"
                        },
                    }
                ]
            }
        }
        assert pod["metadata"]["annotations"]["training.kubeflow.org/progress-ca"] == "PEM"
        assert spec["serviceAccountName"] == "default"
    # No object per job besides the pods and Services: no CA ConfigMap to create and keep.
    assert not _created(result.actions, "ConfigMap")


def test_a_named_service_account_is_kept() -> None:
    raw = _pytorchjob()
    for spec in raw["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["serviceAccountName"] = "trainer"
    result = plan(PyTorchJobController(), raw, _observed(ENDPOINT), now=NOW, config=PlanConfig())
    assert {p["spec"]["serviceAccountName"] for p in _created(result.actions, "Pod")} == {"trainer"}


def test_without_the_endpoint_the_pods_are_upstreams_v1_pods() -> None:
    fw = PyTorchJobController()
    plain = plan(fw, _pytorchjob(), Observed(), now=NOW, config=PlanConfig())
    off = plan(fw, _pytorchjob(), _observed(None), now=NOW, config=PlanConfig())
    assert _created(plain.actions, "Pod") == _created(off.actions, "Pod")
    assert "KUBEFLOW_TRAINER" not in json.dumps(_created(off.actions, "Pod"))
    assert not _created(off.actions, "ConfigMap")


def test_the_mpi_launcher_jobs_pods_get_the_env_with_the_v2beta1_url() -> None:
    raw = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": "team", "uid": "uid-pi"},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "l", "image": "mpi"}]}},
                },
                "Worker": {
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "w", "image": "mpi"}]}},
                },
            }
        },
    }
    fw = MPIJobController()
    # The launcher is created in the first pass, after its hostfile and SSH Secret.
    result = plan(fw, raw, _observed(ENDPOINT), now=NOW, config=PlanConfig())
    [launcher] = _created(result.actions, "Job")
    [container] = launcher["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["KUBEFLOW_TRAINER_SERVER_URL"] == (
        "https://op.kubeflow.svc:10443/apis/kubeflow.org/v2beta1/namespaces/team/mpijobs/pi/status"
    )
    annotations = launcher["spec"]["template"]["metadata"]["annotations"]
    assert annotations["training.kubeflow.org/progress-ca"] == "PEM"


class _Caches:
    """The two reads the pod check makes: the job, and an object it owns."""

    def __init__(self, job: Obj, owned: dict[tuple[str, str], Obj]) -> None:
        self.job_store = self
        self._job, self._owned = job, owned

    def get(self, *args: str) -> Obj | None:
        if len(args) == 2:
            namespace, name = args
            meta = self._job["metadata"]
            return self._job if (namespace, name) == (meta["namespace"], meta["name"]) else None
        kind, _, name = args
        return self._owned.get((kind, name))


def _pod(name: str, *, job: str, owner_kind: str, owner: str, uid: str) -> Obj:
    return {
        "metadata": {
            "name": name,
            "labels": {"training.kubeflow.org/job-name": job},
            "ownerReferences": [
                {"kind": owner_kind, "name": owner, "uid": uid, "controller": True}
            ],
        }
    }


def test_only_the_jobs_own_pods_may_report() -> None:
    job = {"metadata": {"name": "pi", "namespace": "team", "uid": "uid-pi"}}
    launcher = {
        "metadata": {
            "name": "pi-launcher",
            "uid": "uid-launcher",
            "ownerReferences": [{"kind": "MPIJob", "uid": "uid-pi", "controller": True}],
        }
    }
    check = v1_pod_check(_Caches(job, {("Job", "pi-launcher"): launcher}))  # type: ignore[arg-type]  # the two reads it makes
    own = _pod("pi-worker-0", job="pi", owner_kind="MPIJob", owner="pi", uid="uid-pi")
    assert check("team", "pi", own)
    via_launcher = _pod(
        "pi-launcher-x", job="pi", owner_kind="Job", owner="pi-launcher", uid="uid-launcher"
    )
    assert check("team", "pi", via_launcher)
    # Labelled as the job's but controlled by something else (a pod made by hand).
    stranger = _pod("fake", job="pi", owner_kind="MPIJob", owner="pi", uid="uid-other")
    assert not check("team", "pi", stranger)
    # Another job's pod, and a pod of a job that is gone.
    other = _pod("x", job="other", owner_kind="MPIJob", owner="pi", uid="uid-pi")
    assert not check("team", "pi", other)
    assert not check("team", "gone", own)


class _Api:
    """What wiring the endpoint asks of the operator's client: a rate-limited copy of it."""

    def __init__(self) -> None:
        self.copies = 0

    def with_limits(self, **_: Any) -> _Api:
        self.copies += 1
        return self

    def with_own_budget(self) -> _Api:  # the status writer's (not the endpoint's)
        return self

    def backlog(self) -> float:  # the spare waiters'
        return 0.0

    def spare(self) -> int:
        return 30


def test_one_process_serves_every_kind_from_one_endpoint() -> None:
    """The all-in-one: the TrainJob's and the v1 kinds' controllers share one endpoint (one
    port, one certificate, one metrics family), each kind at its own URL; a kind opted out
    gets none."""
    from jobcontroller import ProgressSettings
    from jobcontroller.runtime.events import EventRecorder
    from jobcontroller.runtime.manager import Manager
    from jobcontroller.runtime.metrics import Metrics
    from tf_operator.controller import TFJobController
    from trainer_operator.controller import TrainJobController

    api = _Api()
    manager = Manager(
        api,  # type: ignore[arg-type]  # only with_limits is called before run
        component="test",
        metrics=Metrics(),
        events=EventRecorder(None, component="test"),  # type: ignore[arg-type]  # nothing is sent
    )
    settings = ProgressSettings(port=0)
    served = [PyTorchJobController(), MPIJobController(), TrainJobController()]
    for controller in served:
        controller.enable_progress(settings)
    quiet = TFJobController()
    for controller in [*served, quiet]:
        manager.add(controller)
    servers = {id(c.progress_server) for c in served}
    assert len(servers) == 1 and served[0].progress_server is not None
    assert quiet.progress_server is None
    assert api.copies == 1  # one client of its own for the endpoint
    assert [name for name, _ in manager._services] == ["trainjob-status-server"]
    kinds = served[0].progress_server._kinds
    assert sorted(kinds) == [
        ("kubeflow.org", "v1", "pytorchjobs"),
        ("kubeflow.org", "v2beta1", "mpijobs"),
        ("trainer.kubeflow.org", "v1alpha1", "trainjobs"),
    ]


def test_the_flags_choose_which_kinds_report(monkeypatch: pytest.MonkeyPatch) -> None:
    """On by default for every kind; ``--no-v1-job-progress`` leaves the v1 kinds out and
    TrainJobs in; ``--trainjob-status-port=0`` turns it off for all."""
    from jobcontroller import add_job_flags, enable_progress, parse_settings
    from trainer_operator.controller import TrainJobController

    def served(*argv: str) -> list[bool]:
        settings = parse_settings(name="op", argv=list(argv), add_flags=add_job_flags)
        controllers = [PyTorchJobController(), TrainJobController()]
        enable_progress("op", controllers, settings)
        return [c.progress_settings is not None for c in controllers]

    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    assert served() == [True, True]
    assert served("--no-v1-job-progress") == [False, True]
    assert served("--trainjob-status-port", "0") == [False, False]
    settings = parse_settings(name="op", argv=[], add_flags=add_job_flags)
    controller = PyTorchJobController()
    enable_progress("op", [controller], settings)
    assert controller.progress_settings is not None
    assert controller.progress_settings.base_url() == "https://op.kubeflow.svc:10443"
