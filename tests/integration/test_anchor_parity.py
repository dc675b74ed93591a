"""Parity with the real Go training-operator v1.9.4: for every recorded example job
(``tests/data/anchor/v1.9.4/*.json``, made by ``hack/anchor_record.py``), our operator for its
kind, running in-process, creates the same pods and Services and gives the job the same first
condition.

Both sides are stored objects of the same kube-apiserver build, so the API server's scheme
defaults (terminationMessagePath, dnsPolicy, Service ipFamilies, targetPort, ...) are the same
on both and are compared like everything else. What is dropped is only what one side's cluster
fills in and the operator never decides (see ``_ignore_cluster_fields``), plus the fields the
recorder already dropped (uid, resourceVersion, timestamps, managedFields, status, nodeName).
Everything the operator decides is compared exactly: names, labels, annotations, env (values
and order), ports, commands, restartPolicy, hostname/subdomain, init containers, the Service
spec (clusterIP None, selector, ports) and ownerReferences (kind, name, controller,
blockOwnerDeletion).

A field where we deliberately differ from v1.9 (documented in docs/<kind>.md) is asserted as
documented: ``DOCUMENTED`` rewrites the recording's value into ours, with the doc's reason.
The operators run as deployed, serving training progress (on by default): every pod carries
the progress env, token volume and mount, the extension docs/observability.md lists
(``_progress_extension``); everything else is v1.9.4's.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jax_operator.controller import JAXJobController
from jobcontroller import ProgressSettings
from jobcontroller.controller import JobController
from jobcontroller.runtime.kube import PODS, SERVICES, KubeApi, Resource
from jobcontroller.testing.operator import running
from jobcontroller.testing.waiting import wait_for, wait_for_list
from paddle_operator.controller import PaddleJobController
from pytorch_operator.controller import PyTorchJobController
from pytorch_operator.initcontainer import (
    DEFAULT_INIT_CONTAINER_IMAGE,
    DEFAULT_INIT_CONTAINER_MAX_TRIES,
    INIT_CONTAINER_NAME,
    WAIT_FOR_MASTER_SCRIPT,
)
from tf_operator.controller import TFJobController
from xgboost_operator.controller import XGBoostJobController

ANCHOR = Path(__file__).parents[1] / "data" / "anchor" / "v1.9.4"
RECORDINGS = sorted(ANCHOR.glob("*.json"))

Obj = dict[str, Any]

JOB_NAME = "training.kubeflow.org/job-name"
REPLICA_TYPE = "training.kubeflow.org/replica-type"


@dataclass(frozen=True)
class Kind:
    resource: Resource
    controller: Callable[[], JobController[Any]]


KINDS: dict[str, Kind] = {
    "TFJob": Kind(Resource("kubeflow.org", "v1", "TFJob", "tfjobs"), TFJobController),
    # As deployed: no flags, so the init container is the documented default (see DOCUMENTED).
    "PyTorchJob": Kind(
        Resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs"), PyTorchJobController
    ),
    "XGBoostJob": Kind(
        Resource("kubeflow.org", "v1", "XGBoostJob", "xgboostjobs"), XGBoostJobController
    ),
    "PaddleJob": Kind(
        Resource("kubeflow.org", "v1", "PaddleJob", "paddlejobs"), PaddleJobController
    ),
    "JAXJob": Kind(Resource("kubeflow.org", "v1", "JAXJob", "jaxjobs"), JAXJobController),
}


# ------------------------------------------------------------------------------ normalising

# Recorded volatile metadata (the recorder drops them too), and the owner's uid, which is the
# job's uid in each cluster.
_VOLATILE_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
)

# The tolerations the DefaultTolerationSeconds admission plugin adds to every pod that has none
# for these taints; the operator decides none of them.
_DEFAULT_TOLERATIONS = [
    {
        "effect": "NoExecute",
        "key": f"node.kubernetes.io/{key}",
        "operator": "Exists",
        "tolerationSeconds": 300,
    }
    for key in ("not-ready", "unreachable")
]


def _ignore_cluster_fields(obj: Obj, template_spec: Obj) -> None:
    """Drop, on both sides, what a cluster (its admission chain, scheduler or kubelet) fills in
    and the operator never decides. ``template_spec`` is the submitted replica template's pod
    spec: a field the user set there is the operator's to copy, so it is kept and compared.

    Ignored, and why:

    - ``status``: the cluster's. kwok runs the session's pods; the recording's never ran.
    - ``spec.nodeName``: set by the scheduler (the session cluster has one and kwok nodes; the
      recording's control plane had neither).
    - ``spec.serviceAccountName``/``serviceAccount`` and ``kube-api-access-*`` volumes with
      their ``volumeMounts``: the ServiceAccount admission plugin's. It was off when the
      recording was made and is off in the session cluster too (as in envtest); dropped so
      that a cluster with it on compares the same.
    - the two NoExecute ``tolerations`` for node.kubernetes.io/not-ready and unreachable (300
      s): the DefaultTolerationSeconds admission plugin adds them to every pod. Any other
      toleration came from the template through the operator and is compared.
    - ``spec.priority`` and ``spec.preemptionPolicy``: the Priority admission plugin resolves
      them from ``priorityClassName`` (or the cluster's default class) and refuses a pod that
      sets a different priority, so the operator cannot decide them; ``priorityClassName``,
      which it copies from the template or its schedulingPolicy, is compared.

    The session cluster's admission plugins add exactly what the recording's did (checked when
    this test was written), so nothing the operator writes is hidden by these. Everything the
    API server's scheme defaults (``enableServiceLinks``, ``dnsPolicy``,
    ``terminationMessagePath``, ``schedulerName``, ``securityContext: {}``, the Service's
    ``clusterIPs``/``ipFamilies``/``internalTrafficPolicy``/``targetPort``, ...) is the same
    apiserver build's on both sides and stays compared.
    """
    obj.pop("status", None)
    spec = obj.get("spec") or {}
    if "containers" not in spec:  # a Service
        return
    spec.pop("nodeName", None)
    for field in ("serviceAccountName", "serviceAccount"):
        if field not in template_spec:
            spec.pop(field, None)
    tokens = {
        v["name"] for v in spec.get("volumes") or [] if v["name"].startswith("kube-api-access-")
    }
    if tokens:
        spec["volumes"] = [v for v in spec["volumes"] if v["name"] not in tokens]
        if not spec["volumes"]:
            del spec["volumes"]
        for c in spec.get("initContainers", []) + spec["containers"]:
            mounts = [m for m in c.get("volumeMounts") or [] if m["name"] not in tokens]
            c.pop("volumeMounts", None)
            if mounts:
                c["volumeMounts"] = mounts
    if "tolerations" in spec:
        spec["tolerations"] = [t for t in spec["tolerations"] if t not in _DEFAULT_TOLERATIONS]
        if not spec["tolerations"]:
            del spec["tolerations"]
    for field in ("priority", "preemptionPolicy"):
        if field not in template_spec:
            spec.pop(field, None)


def _replace_strings(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_replace_strings(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _replace_strings(v, old, new) for k, v in value.items()}
    return value


def normalise(obj: Obj, *, template_spec: Obj, namespace: tuple[str, str] | None = None) -> Obj:
    """A comparable copy of a stored pod or Service. ``namespace`` (recorded, ours): the
    recording's namespace is replaced by the test's, in metadata and in the in-cluster DNS names
    the operator writes (TF_CONFIG's ``<pod>.<namespace>.svc``)."""
    out = copy.deepcopy(obj)
    out.pop("apiVersion", None)
    out.pop("kind", None)
    meta = out["metadata"]
    for field in _VOLATILE_METADATA:
        meta.pop(field, None)
    for ref in meta.get("ownerReferences", []):
        ref.pop("uid", None)
    _ignore_cluster_fields(out, template_spec)
    if namespace is not None:
        recorded, ours = namespace
        meta["namespace"] = ours
        out["spec"] = _replace_strings(out["spec"], f".{recorded}.svc", f".{ours}.svc")
    return out


def differences(recorded: Any, ours: Any, path: str = "") -> list[str]:
    """Each field that differs, as ``path: v1.9.4 <value> | ours <value>``."""
    if isinstance(recorded, dict) and isinstance(ours, dict):
        found: list[str] = []
        for key in sorted(set(recorded) | set(ours)):
            sub = f"{path}.{key}" if path else key
            if key not in ours:
                found.append(f"{sub}: v1.9.4 {json.dumps(recorded[key])} | ours absent")
            elif key not in recorded:
                found.append(f"{sub}: v1.9.4 absent | ours {json.dumps(ours[key])}")
            else:
                found += differences(recorded[key], ours[key], sub)
        return found
    if isinstance(recorded, list) and isinstance(ours, list) and len(recorded) == len(ours):
        found = []
        for i, (r, o) in enumerate(zip(recorded, ours, strict=True)):
            found += differences(r, o, f"{path}[{i}]")
        return found
    if recorded != ours:
        return [f"{path}: v1.9.4 {json.dumps(recorded)} | ours {json.dumps(ours)}"]
    return []


# ------------------------------------------------------------------ documented differences


def _pytorch_init_container(pod: Obj) -> None:
    """docs/pytorchjob.md: Workers of a job with a Master get ``init-pytorch`` with image
    ``--pytorch-init-container-image`` (default busybox:1.36, v1.9: alpine:3.10) that waits
    until the master's address resolves and its port accepts connections (``nc -z``), by
    default without a try limit, instead of v1.9's 100-try ``nslookup`` loop; host, port and
    tries are passed as env so the script is a constant. The container's name,
    imagePullPolicy and resources remain v1.9's and are compared."""
    for c in pod["spec"].get("initContainers", []):
        if c["name"] == INIT_CONTAINER_NAME:
            c["image"] = DEFAULT_INIT_CONTAINER_IMAGE
            c["command"] = ["sh", "-c", WAIT_FOR_MASTER_SCRIPT]
            c["env"] = [
                {"name": "MASTER_ADDR", "value": f"{pod['metadata']['labels'][JOB_NAME]}-master-0"},
                {"name": "MASTER_PORT", "value": _master_port(pod)},
                {"name": "MAX_TRIES", "value": str(DEFAULT_INIT_CONTAINER_MAX_TRIES)},
            ]


def _master_port(pod: Obj) -> str:
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env", [])}
    return str(env["MASTER_PORT"])


PROGRESS_URL = "https://op.kubeflow.svc:10443"
CA_ANNOTATION = "training.kubeflow.org/progress-ca"


def _progress_extension(pod: Obj, *, plural: str, ca: str) -> None:
    """docs/observability.md, "Training progress": an extension for the v1 kinds, on by
    default (``--no-v1-job-progress`` turns it off): every container gets Trainer v2's three
    env vars (the job's own URL on the operator's endpoint, the paths of the CA and token)
    and the mount of the projected volume holding a token for the job's audience and the
    endpoint's CA, which the pod carries in its ``training.kubeflow.org/progress-ca``
    annotation (``ca``) for the downward API to write; the pod gets that volume (and
    ``serviceAccountName: default`` where it named none, which the ServiceAccount admission
    plugin would set)."""
    namespace = pod["metadata"]["namespace"]
    name = pod["metadata"]["labels"][JOB_NAME]
    path = f"kubeflow.org/v1/namespaces/{namespace}/{plural}/{name}/status"
    where = "/var/run/secrets/kubeflow/trainer"
    for container in pod["spec"]["containers"]:
        container.setdefault("env", []).extend(
            [
                {"name": "KUBEFLOW_TRAINER_SERVER_URL", "value": f"{PROGRESS_URL}/apis/{path}"},
                {"name": "KUBEFLOW_TRAINER_SERVER_CA_CERT", "value": f"{where}/ca.crt"},
                {"name": "KUBEFLOW_TRAINER_SERVER_TOKEN", "value": f"{where}/token"},
            ]
        )
        container.setdefault("volumeMounts", []).append(
            {"name": "kubeflow-trainer-token", "mountPath": where, "readOnly": True}
        )
    sources = [
        {"serviceAccountToken": {"audience": path, "expirationSeconds": 3600, "path": "token"}},
        {
            "downwardAPI": {
                "items": [
                    {
                        "path": "ca.crt",
                        "fieldRef": {
                            "apiVersion": "v1",
                            "fieldPath": f"metadata.annotations['{CA_ANNOTATION}']",
                        },
                    }
                ]
            }
        },
    ]
    pod["metadata"].setdefault("annotations", {})["training.kubeflow.org/progress-ca"] = ca
    # defaultMode 420 (0644): the API server's default for a projected volume.
    pod["spec"].setdefault("volumes", []).append(
        {"name": "kubeflow-trainer-token", "projected": {"sources": sources, "defaultMode": 420}}
    )


# Per kind, rewrites of the recorded (expected) pods into our documented behaviour.
DOCUMENTED: dict[str, list[Callable[[Obj], None]]] = {
    "PyTorchJob": [_pytorch_init_container],
}


def _template_specs(job: Obj) -> dict[str, Obj]:
    """replica-type label value -> the submitted template's pod spec."""
    [specs] = [v for k, v in job["spec"].items() if k.endswith("ReplicaSpecs")]
    return {
        rtype.lower(): (s.get("template") or {}).get("spec") or {} for rtype, s in specs.items()
    }


# ------------------------------------------------------------------------------------ test


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda path: path.stem)
async def test_pods_and_services_match_v1_9_4(
    recording: Path, kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    anchor = json.loads(recording.read_text())
    job = copy.deepcopy(anchor["job"])
    kind = KINDS[job["kind"]]
    name = job["metadata"]["name"]
    # The recorder submitted each job to its manifest's namespace ("default" when it had none).
    recorded_ns = anchor["pods"][0]["metadata"]["namespace"]
    job["metadata"]["namespace"] = namespace
    templates = _template_specs(job)

    def template_of(obj: Obj) -> Obj:
        return templates[obj["metadata"]["labels"][REPLICA_TYPE]]

    n_pods, n_services = len(anchor["pods"]), len(anchor["services"])
    controller = kind.controller()
    controller.enable_progress(
        ProgressSettings(port=0, bind_address="127.0.0.1", namespace=namespace, url=PROGRESS_URL)
    )
    plural = kind.resource.plural

    ca: list[str] = []

    def progress_extension(pod: Obj) -> None:
        _progress_extension(pod, plural=plural, ca=ca[0])

    async with running(kubeconfig, controller, namespace=namespace):
        await kube.create(kind.resource, job, namespace=namespace)
        await wait_for_list(
            kube, PODS, namespace=namespace, until=lambda items: len(items) >= n_pods
        )
        await wait_for_list(
            kube, SERVICES, namespace=namespace, until=lambda items: len(items) >= n_services
        )
        stored = await wait_for(
            kube,
            kind.resource,
            name,
            namespace=namespace,
            until=lambda o: bool(o and ((o.get("status") or {}).get("conditions"))),
        )
        # Listed once the operator has written the job's status after its creations, so
        # anything it created beyond the recording is seen too.
        pods, _ = await kube.list(PODS, namespace=namespace)
        services, _ = await kube.list(SERVICES, namespace=namespace)
        # The CA is the endpoint's, made at the operator's start: whatever it is, every pod
        # carries the same one (test_v1_job_progress.py checks it is the one the endpoint
        # serves with).
        cas = {(p["metadata"].get("annotations") or {}).get(CA_ANNOTATION) for p in pods}
        assert len(cas) == 1, cas
        ca.append(str(cas.pop()))
        assert ca[0].startswith("-----BEGIN CERTIFICATE-----"), ca[0]

    problems: list[str] = []
    for what, recorded_items, our_items, rewrites in (
        ("pod", anchor["pods"], pods, [*DOCUMENTED.get(job["kind"], []), progress_extension]),
        ("service", anchor["services"], services, []),
    ):
        expected = {}
        for item in recorded_items:
            norm = normalise(
                item, template_spec=template_of(item), namespace=(recorded_ns, namespace)
            )
            for rewrite in rewrites:
                rewrite(norm)
            expected[item["metadata"]["name"]] = norm
        actual = {
            item["metadata"]["name"]: normalise(item, template_spec=template_of(item))
            for item in our_items
        }
        if sorted(expected) != sorted(actual):
            problems.append(f"{what} names: v1.9.4 {sorted(expected)} | ours {sorted(actual)}")
        for item_name in sorted(set(expected) & set(actual)):
            problems += [
                f"{what} {item_name}: {d}"
                for d in differences(expected[item_name], actual[item_name])
            ]

    assert stored is not None
    first = stored["status"]["conditions"][0]
    recorded_first = anchor["job_status_after_creation"][0]
    for field in ("type", "reason", "message"):
        if first.get(field) != recorded_first.get(field):
            problems.append(
                f"job condition[0].{field}: v1.9.4 {recorded_first.get(field)!r} | "
                f"ours {first.get(field)!r}"
            )

    assert not problems, "differences from v1.9.4:\n" + "\n".join(problems)
