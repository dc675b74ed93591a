"""Record what the real Go training-operator v1.9.4 creates for the docs' example jobs.

The recordings (``tests/data/anchor/v1.9.4/<kind>-<job-name>.json``) are the anchor our Python
re-implementation is compared against. Each file holds::

    {"job":       the job exactly as submitted,
     "pods":      the pods the operator created, as stored (sorted by name, normalised),
     "services":  the services, likewise,
     "job_status_after_creation": status.conditions of the job (timestamps dropped),
     "create_calls": [{"resource", "name", "code"}]: the operator's create calls for them, in
                  the order the API server's audit log saw them (the order is not a contract:
                  Go iterates the replica-spec map in random order),
     "job_stored": the job as stored afterwards (normalised), "recorder": how it was made}

"Normalised" means volatile or per-cluster fields are dropped: metadata.uid, resourceVersion,
creationTimestamp, managedFields, generation, ownerReferences[].uid, status, spec.nodeName, and
the timestamps of job conditions. Everything else is kept, including the fields the API server
defaults (terminationMessagePath, dnsPolicy, schedulerName, Service type/sessionAffinity/
targetPort/ipFamilies, ...): the operator talks protobuf to the API server and the audit log only
shows bodies after decoding (with scheme defaults), so what it sent byte for byte is not
recorded; a re-implementation's objects, stored by the same API server, compare like for like.

How it runs: a local control plane from the project's test kit (etcd + kube-apiserver only: pods
are created, never scheduled or run), v1.9.4's own CRDs from its source tree, and one operator
process per job kind started with only that ``--enable-scheme``. The v1.9 binary always runs a
cert rotator and a validating webhook server; out of a cluster it gets what a pod would have:
namespace ``kubeflow`` (``MY_POD_NAMESPACE``) with the empty Secret
``training-operator-webhook-cert`` that the rotator fills, and this script copies the Secret's
tls.crt/tls.key into ``/tmp/k8s-webhook-server/serving-certs`` (the kubelet's volume mount in a
real deployment; the path is hard-coded in the binary). The webhooks are really wired up too: the
API server runs with ``--enable-aggregator-routing`` so it calls Service
``kubeflow/training-operator`` through a hand-made Endpoints object pointing at this host's
address, and each kind's webhook is checked to reject an invalid job (a dry run).
``--no-webhooks`` skips that wiring (the rotator then only logs that the configuration is missing).

Prerequisites (the mirror lacks the blob of the prebuilt hack/swagger/swagger, hence the
exclude; cold build about 2 minutes on 2 cores; the first line puts a Go 1.26 first on PATH,
fetched when missing)::

    export PATH=$(bash hack/ensure-go.sh | tail -n1):$PATH
    git -C /work/.mirror/kubeflow+trainer/repo archive v1.9.4 \\
      -- . ':(exclude)hack/swagger/swagger' \\
      | tar -x -C ~/.cache/jobcontroller/anchor-src/training-operator-v1.9.4
    cd ~/.cache/jobcontroller/anchor-src/training-operator-v1.9.4 && \\
      nice -n 10 go build -o ~/.cache/jobcontroller/anchors/training-operator-v1.9.4 \\
      ./cmd/training-operator.v1

Rerun (about a minute)::

    JOBCONTROLLER_K8S_BIN=$(ls -d ~/.cache/jobcontroller/bin/k8s-* | grep -v partial) \\
      .venv/bin/python hack/anchor_record.py            # all examples
    .venv/bin/python hack/anchor_record.py --only jaxjob --keep   # one kind, keep logs

Not thread-safe against itself: two concurrent runs share the binary's fixed cert directory.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from jobcontroller.testing.controlplane import ControlPlane, free_port

VERSION = "v1.9.4"
CACHE = Path(os.environ.get("JOBCONTROLLER_CACHE", Path.home() / ".cache" / "jobcontroller"))
SRC = CACHE / "anchor-src" / f"training-operator-{VERSION}"
BINARY = CACHE / "anchors" / f"training-operator-{VERSION}"
REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "data" / "anchor" / VERSION

OPERATOR_NAMESPACE = "kubeflow"
CERT_SECRET = "training-operator-webhook-cert"
WEBHOOK_SERVICE = "training-operator"
WEBHOOK_CONFIGURATION = "validator.training-operator.kubeflow.org"
CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")  # hard-coded in pkg/cert/cert.go

GROUP = "kubeflow.org"
PLURAL = {
    "XGBoostJob": "xgboostjobs",
    "PaddleJob": "paddlejobs",
    "JAXJob": "jaxjobs",
    "TFJob": "tfjobs",
    "PyTorchJob": "pytorchjobs",
}
REPLICA_SPECS = {
    "XGBoostJob": "xgbReplicaSpecs",
    "PaddleJob": "paddleReplicaSpecs",
    "JAXJob": "jaxReplicaSpecs",
    "TFJob": "tfReplicaSpecs",
    "PyTorchJob": "pytorchReplicaSpecs",
}

AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "RequestResponse",
            "verbs": ["create"],
            "resources": [{"group": "", "resources": ["pods", "services"]}],
        },
        {"level": "None"},
    ],
}


# ------------------------------------------------------------------------------- examples


def _paddle_ps(job: dict[str, Any]) -> dict[str, Any]:
    """simple-cpu.yaml in parameter-server mode: 2 Master (servers) + 2 Worker (trainers)."""
    job["metadata"]["name"] = "paddle-simple-cpu-ps"
    specs = job["spec"]["paddleReplicaSpecs"]
    specs["Master"] = copy.deepcopy(specs["Worker"])
    specs["Master"]["replicas"] = 2
    return job


def _jax_3_workers(job: dict[str, Any]) -> dict[str, Any]:
    job["metadata"]["name"] = "jaxjob-simple-3workers"
    job["spec"]["jaxReplicaSpecs"]["Worker"]["replicas"] = 3
    return job


@dataclass(frozen=True)
class Example:
    path: str
    """YAML file in the v1.9.4 tree."""
    variant: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    def load(self) -> dict[str, Any]:
        job: dict[str, Any] = yaml.safe_load((SRC / self.path).read_text())
        if self.variant is not None:
            job = self.variant(job)
        job["metadata"].setdefault("namespace", "default")  # as `kubectl create -f` would
        return job


EXAMPLES = [
    Example("examples/xgboost/xgboostjob.yaml"),
    Example("examples/paddlepaddle/simple-cpu.yaml"),
    Example("examples/paddlepaddle/simple-cpu.yaml", _paddle_ps),
    Example("examples/jax/cpu-demo/demo.yaml"),
    Example("examples/jax/cpu-demo/demo.yaml", _jax_3_workers),
    Example("examples/tensorflow/simple.yaml"),
    Example("examples/tensorflow/dist-mnist/tf_job_mnist.yaml"),
    Example("examples/pytorch/simple.yaml"),
]


# ----------------------------------------------------------------------------- normalising

_VOLATILE_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
)


def normalise(obj: dict[str, Any]) -> dict[str, Any]:
    """A stored object minus what differs between clusters and runs."""
    obj = copy.deepcopy(obj)
    meta = obj.get("metadata", {})
    for key in _VOLATILE_METADATA:
        meta.pop(key, None)
    for ref in meta.get("ownerReferences", []):
        ref.pop("uid", None)
    obj.pop("status", None)
    obj.get("spec", {}).pop("nodeName", None)
    return obj


def conditions(job: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for c in (job.get("status") or {}).get("conditions") or []:
        out.append(
            {k: v for k, v in c.items() if k not in ("lastUpdateTime", "lastTransitionTime")}
        )
    return out


def job_stored(job: dict[str, Any]) -> dict[str, Any]:
    stored = normalise(job)
    status = copy.deepcopy(job.get("status") or {})
    status.pop("startTime", None)
    status.pop("lastReconcileTime", None)
    status["conditions"] = conditions(job)
    stored["status"] = status
    return stored


# ----------------------------------------------------------------------------- the cluster


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def host_address() -> str | None:
    """A non-loopback address of this host (Endpoints may not point at loopback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent for UDP connect
            addr = str(s.getsockname()[0])
        except OSError:
            return None
    return None if addr.startswith("127.") else addr


class Recorder:
    def __init__(self, cp: ControlPlane, workdir: Path, *, webhooks: bool, address: str | None):
        self.cp = cp
        self.workdir = workdir
        self.webhooks = webhooks
        self.address = address
        self.webhook_port = free_port()
        self.audit_log = workdir / "audit.log"

    # -- API helpers

    def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        try:
            return self.cp.request(method, path, body)
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            raise RuntimeError(f"{method} {path}: {e.code} {detail}") from None

    def apply(self, path: str, obj: dict[str, Any]) -> None:
        """Create, or do nothing if it exists."""
        try:
            self.cp.request("POST", path, obj)
        except urllib.error.HTTPError as e:
            if e.code != 409:
                raise RuntimeError(f"POST {path}: {e.code} {e.read().decode()}") from None

    def namespace(self, name: str) -> None:
        self.apply("/api/v1/namespaces", {"metadata": {"name": name}})

    # -- setup

    def install_crds(self) -> None:
        path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        names = []
        for plural in PLURAL.values():
            crd = yaml.safe_load((SRC / f"manifests/base/crds/{GROUP}_{plural}.yaml").read_text())
            self.apply(path, crd)
            names.append(crd["metadata"]["name"])
        deadline = time.monotonic() + 60
        for name in names:
            while True:
                crd = self.api("GET", f"{path}/{name}")
                conds = (crd.get("status") or {}).get("conditions") or []
                if any(c["type"] == "Established" and c["status"] == "True" for c in conds):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"CRD {name} not Established")
                time.sleep(0.2)

    def install_operator_prerequisites(self) -> None:
        """What the deployment's namespace, Secret, Service and webhook configuration provide."""
        self.namespace(OPERATOR_NAMESPACE)
        ns = OPERATOR_NAMESPACE
        self.apply(f"/api/v1/namespaces/{ns}/secrets", {"metadata": {"name": CERT_SECRET}})
        # Stale files would be served with a certificate of another CA: start clean.
        for name in ("tls.crt", "tls.key"):
            with contextlib.suppress(FileNotFoundError):
                (CERT_DIR / name).unlink()
        if not self.webhooks:
            return
        assert self.address is not None
        port = {"name": "webhook-server", "port": 443, "protocol": "TCP"}
        self.apply(
            f"/api/v1/namespaces/{ns}/services",
            {"metadata": {"name": WEBHOOK_SERVICE}, "spec": {"ports": [port]}},
        )
        self.apply(
            f"/api/v1/namespaces/{ns}/endpoints",
            {
                "metadata": {"name": WEBHOOK_SERVICE},
                "subsets": [
                    {
                        "addresses": [{"ip": self.address}],
                        "ports": [{"name": "webhook-server", "port": self.webhook_port}],
                    }
                ],
            },
        )
        self.apply(
            f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
            {
                "metadata": {
                    "name": f"{WEBHOOK_SERVICE}-manual",
                    "labels": {"kubernetes.io/service-name": WEBHOOK_SERVICE},
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": [self.address], "conditions": {"ready": True}}],
                "ports": [{"name": "webhook-server", "port": self.webhook_port, "protocol": "TCP"}],
            },
        )
        # manifests/base/webhook with its kustomize patch and the overlay's namespace applied.
        config = yaml.safe_load((SRC / "manifests/base/webhook/manifests.yaml").read_text())
        config["metadata"]["name"] = WEBHOOK_CONFIGURATION
        for hook in config["webhooks"]:
            hook["clientConfig"]["service"].update(name=WEBHOOK_SERVICE, namespace=ns)
        self.apply("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", config)

    # -- the operator

    @contextlib.contextmanager
    def operator(self, scheme: str) -> Iterator[subprocess.Popen[bytes]]:
        probe = free_port()
        log = self.cp.logs / f"training-operator-{scheme}.log"
        argv = [
            str(BINARY),
            f"--kubeconfig={self.cp.kubeconfig}",
            f"--enable-scheme={scheme}",
            "--metrics-bind-address=0",
            f"--health-probe-bind-address=127.0.0.1:{probe}",
            f"--webhook-server-port={self.webhook_port}",
            "--zap-log-level=info",
        ]
        env = dict(os.environ, MY_POD_NAMESPACE=OPERATOR_NAMESPACE)
        env.pop("KUBECONFIG", None)
        with log.open("ab") as out:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                preexec_fn=_die_with_parent,
            )
        try:
            self._wait_operator_ready(proc, probe, log)
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _wait_operator_ready(self, proc: subprocess.Popen[bytes], probe: int, log: Path) -> None:
        deadline = time.monotonic() + 120
        secret_path = f"/api/v1/namespaces/{OPERATOR_NAMESPACE}/secrets/{CERT_SECRET}"
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"operator exited ({proc.returncode}):\n{_tail(log)}")
            if not (CERT_DIR / "tls.key").exists():  # play the kubelet's secret volume
                data = self.api("GET", secret_path).get("data") or {}
                if data.get("tls.crt") and data.get("tls.key"):
                    CERT_DIR.mkdir(parents=True, exist_ok=True)
                    for name in ("tls.crt", "tls.key"):
                        (CERT_DIR / name).write_bytes(base64.b64decode(data[name]))
            with contextlib.suppress(OSError):
                url = f"http://127.0.0.1:{probe}/readyz"
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            if time.monotonic() > deadline:
                raise RuntimeError(f"operator not ready:\n{_tail(log)}")
            time.sleep(0.3)

    # -- one job

    def check_webhook(self, job: dict[str, Any]) -> str:
        """A dry-run create of an invalid copy (name not DNS-1035): the webhook must deny it."""
        bad = copy.deepcopy(job)
        bad["metadata"]["name"] = "0" + job["metadata"]["name"]
        ns, plural = job["metadata"]["namespace"], PLURAL[job["kind"]]
        try:
            self.cp.request("POST", f"/apis/{GROUP}/v1/namespaces/{ns}/{plural}?dryRun=All", bad)
        except urllib.error.HTTPError as e:
            message = str(json.loads(e.read()).get("message", ""))
            if "denied the request" in message:
                return message
            raise RuntimeError(f"webhook check: unexpected {e.code}: {message}") from None
        raise RuntimeError("webhook check: the invalid job was accepted (webhook not called?)")

    def record(self, job: dict[str, Any]) -> dict[str, Any]:
        ns, name, kind = job["metadata"]["namespace"], job["metadata"]["name"], job["kind"]
        self.namespace(ns)
        webhook_denial = self.check_webhook(job) if self.webhooks else None
        job_path = f"/apis/{GROUP}/v1/namespaces/{ns}/{PLURAL[kind]}"
        self.api("POST", job_path, job)
        expected = sum(int(s.get("replicas", 1)) for s in job["spec"][REPLICA_SPECS[kind]].values())

        def owned(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return sorted(
                (
                    o
                    for o in items
                    if any(
                        r["kind"] == kind and r["name"] == name
                        for r in o["metadata"].get("ownerReferences", [])
                    )
                ),
                key=lambda o: o["metadata"]["name"],
            )

        # Wait for the expected pods, then until nothing changes for 3 s (services, status).
        deadline, quiet_since, last = time.monotonic() + 60, None, None
        while True:
            pods = owned(self.api("GET", f"/api/v1/namespaces/{ns}/pods")["items"])
            services = owned(self.api("GET", f"/api/v1/namespaces/{ns}/services")["items"])
            stored = self.api("GET", f"{job_path}/{name}")
            snapshot = json.dumps(
                [[normalise(o) for o in pods + services], job_stored(stored)], sort_keys=True
            )
            if len(pods) >= expected and conditions(stored):
                if snapshot != last:
                    quiet_since, last = time.monotonic(), snapshot
                elif time.monotonic() - quiet_since >= 3:  # type: ignore[operator]
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{kind} {ns}/{name}: {len(pods)}/{expected} pods, "
                    f"conditions {conditions(stored)}"
                )
            time.sleep(0.5)

        return {
            "job": job,
            "pods": [normalise(p) for p in pods],
            "services": [normalise(s) for s in services],
            "job_status_after_creation": conditions(stored),
            "create_calls": self.create_calls(ns, kind, name),
            "job_stored": job_stored(stored),
            "recorder": {
                "operator": f"training-operator {VERSION} (cmd/training-operator.v1, built "
                "from source)",
                "script": "hack/anchor_record.py",
                "enable_scheme": kind.lower(),
                "webhook_denied_invalid_copy": webhook_denial,
            },
        }

    def create_calls(self, ns: str, kind: str, name: str) -> list[dict[str, Any]]:
        """The operator's create calls for this job's pods and services, in order, from the
        audit log, with the HTTP code of each answer (a failed or repeated create shows)."""
        calls = []
        for line in self.audit_log.read_text().splitlines():
            event = json.loads(line)
            ref = event.get("objectRef") or {}
            body = event.get("requestObject") or {}
            if (
                event.get("stage") != "ResponseComplete"
                or event.get("verb") != "create"
                or ref.get("namespace") != ns
                or ref.get("resource") not in ("pods", "services")
            ):
                continue
            owners = body.get("metadata", {}).get("ownerReferences", [])
            if any(r.get("kind") == kind and r.get("name") == name for r in owners):
                calls.append(
                    {
                        "resource": ref["resource"],
                        "name": body["metadata"].get("name"),
                        "code": (event.get("responseStatus") or {}).get("code"),
                    }
                )
        return calls


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def out_name(job: dict[str, Any]) -> str:
    return f"{job['kind'].lower()}-{job['metadata']['name']}.json"


# ---------------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        help="record only this kind (xgboostjob, paddlejob, ...); repeatable",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the work directory (logs, audit log) and print its path",
    )
    parser.add_argument(
        "--no-webhooks",
        action="store_true",
        help="do not wire the validating webhooks into the API server",
    )
    args = parser.parse_args()

    for needed in (BINARY, SRC / "manifests/base/crds"):
        if not needed.exists():
            sys.exit(f"missing {needed}: see this script's docstring")
    jobs = [e.load() for e in EXAMPLES]
    if args.only:
        wanted = {k.lower() for k in args.only}
        jobs = [j for j in jobs if j["kind"].lower() in wanted]

    address = None if args.no_webhooks else host_address()
    webhooks = address is not None
    if not webhooks and not args.no_webhooks:
        print("no non-loopback address: running without webhooks", file=sys.stderr)

    workdir = Path(tempfile.mkdtemp(prefix="anchor-record-"))
    policy = workdir / "audit-policy.yaml"
    policy.write_text(yaml.safe_dump(AUDIT_POLICY))
    extra = [
        f"--audit-policy-file={policy}",
        f"--audit-log-path={workdir / 'audit.log'}",
        "--audit-log-format=json",
        "--audit-log-mode=blocking",
    ]
    if webhooks:
        extra.append("--enable-aggregator-routing=true")
    cp = ControlPlane(workdir=workdir / "cluster", extra_apiserver_args=extra)
    made_cert_dir = not CERT_DIR.exists()
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        cp.start()
        rec = Recorder(cp, workdir, webhooks=webhooks, address=address)
        rec.install_crds()
        rec.install_operator_prerequisites()
        by_kind: dict[str, list[dict[str, Any]]] = {}
        for job in jobs:
            by_kind.setdefault(job["kind"], []).append(job)
        for kind, kind_jobs in by_kind.items():
            t0 = time.monotonic()
            with rec.operator(kind.lower()):
                ready = time.monotonic() - t0
                for job in kind_jobs:
                    result = rec.record(job)
                    path = args.out / out_name(job)
                    path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
                    print(
                        f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}: "
                        f"{len(result['pods'])} pods, {len(result['services'])} services "
                        f"(operator ready in {ready:.1f}s)"
                    )
    finally:
        cp.stop()
        if made_cert_dir:
            shutil.rmtree(CERT_DIR.parent, ignore_errors=True)
        if args.keep:
            print(f"kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
