"""Training progress, the TrainJob's parts: what the trainer's pods are given (upstream's
env, token volume and CA) by the TrainJob planner."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from trainjob_fixtures import NODE, NOW, observed, runtime, trainjob

from jobcontroller import PROGRESS, CreateObject, Observed, PatchObject, ProgressEndpoint
from trainer_operator.planner import plan_trainjob
from trainer_operator.progress import token_audience

Obj = dict[str, Any]


# -- what the pods get ---------------------------------------------------------------------

ENDPOINT = ProgressEndpoint(url="https://op.kubeflow.svc:10443", ca_pem="PEM")


def _with_progress(obs: Observed, endpoint: ProgressEndpoint | None = ENDPOINT) -> Observed:
    return msgspec.structs.replace(obs, extra={**obs.extra, PROGRESS: endpoint})


def _node_pod(plan_actions: Any) -> Obj:
    [jobset] = [a.body for a in plan_actions if isinstance(a, CreateObject) and a.kind == "JobSet"]
    [rjob] = [r for r in jobset["spec"]["replicatedJobs"] if r["name"] == NODE]
    spec: Obj = rjob["template"]["spec"]["template"]["spec"]
    return spec


def test_the_trainer_gets_upstreams_env_token_volume_and_ca() -> None:
    raw = trainjob("tj", namespace="team")
    rt = runtime(ml_policy={"numNodes": 2, "torch": {}})
    plan = plan_trainjob(raw, _with_progress(observed(runtime=rt)), now=NOW)
    pod = _node_pod(plan.actions)
    [node] = [c for c in pod["containers"] if c["name"] == NODE]
    env = {e["name"]: e.get("value") for e in node["env"]}
    assert env["KUBEFLOW_TRAINER_SERVER_URL"] == (
        "https://op.kubeflow.svc:10443"
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/tj/status"
    )
    assert env["KUBEFLOW_TRAINER_SERVER_TOKEN"] == "/var/run/secrets/kubeflow/trainer/token"
    assert env["KUBEFLOW_TRAINER_SERVER_CA_CERT"] == "/var/run/secrets/kubeflow/trainer/ca.crt"
    assert {"name": "kubeflow-trainer-token", "mountPath": "/var/run/secrets/kubeflow/trainer",
            "readOnly": True} in node["volumeMounts"]  # fmt: skip
    [volume] = [v for v in pod["volumes"] if v["name"] == "kubeflow-trainer-token"]
    token, ca = volume["projected"]["sources"]
    assert token["serviceAccountToken"] == {
        "audience": token_audience("team", "tj"),
        "expirationSeconds": 3600,
        "path": "token",
    }
    assert ca["configMap"]["name"] == "tj-tls-config"
    # A projected token needs a named service account (admission names `default` anyway).
    assert pod["serviceAccountName"] == "default"
    [cm] = [
        a.body
        for a in plan.actions
        if isinstance(a, CreateObject) and a.body["metadata"]["name"] == "tj-tls-config"
    ]
    assert cm["data"] == {"ca.crt": "PEM"}
    assert cm["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"


def test_without_the_endpoint_the_pods_are_as_upstream_without_the_gate() -> None:
    raw = trainjob("tj")
    rt = runtime(ml_policy={"numNodes": 2, "torch": {}})
    plain = plan_trainjob(raw, observed(runtime=rt), now=NOW)
    off = plan_trainjob(raw, _with_progress(observed(runtime=rt), None), now=NOW)
    assert _node_pod(plain.actions) == _node_pod(off.actions)
    assert "kubeflow-trainer-token" not in json.dumps(_node_pod(off.actions))


def test_a_new_ca_is_brought_to_the_configmap() -> None:
    raw = trainjob("tj")
    rt = runtime(ml_policy={"numNodes": 1, "torch": {}})
    first = plan_trainjob(raw, _with_progress(observed(runtime=rt)), now=NOW)
    [cm] = [a.body for a in first.actions if isinstance(a, CreateObject)
            and a.body["metadata"]["name"] == "tj-tls-config"]  # fmt: skip
    renewed = msgspec.structs.replace(ENDPOINT, ca_pem="NEW")
    plan = plan_trainjob(raw, _with_progress(observed(runtime=rt, configmaps=[cm]), renewed),
                         now=NOW)  # fmt: skip
    [patch] = [a for a in plan.actions if isinstance(a, PatchObject) and a.kind == "ConfigMap"]
    assert patch.patch == {"data": {"ca.crt": "NEW"}}
