"""Record what the real Go Kubeflow Trainer v2.3.0 controller creates for TrainJobs on the runtimes
it ships.

The recordings (``tests/data/anchor/trainer-v2.3.0/<case>.json``) are the anchor the Python
TrainJob controller is compared against (tests/integration/test_trainjob_anchor_parity.py).
Each file holds::

    {"case", "runtime":  the TrainingRuntime/ClusterTrainingRuntime as submitted,
     "trainjob":         the TrainJob as submitted (and a case's ``then``: merge patches
                         applied one by one, each once the last state settled; the rest of
                         the recording is the state after the last),
     "trainjob_stored":  the TrainJob as stored afterwards (normalised; its status is only the
                         conditions, without timestamps, and jobsStatus),
     "conditions":       status.conditions (no timestamps),
     "jobset":           the JobSet the controller made, as stored (normalised),
     "configmaps", "secrets": the other objects it made (those its TrainJob owns), normalised;
                         the runtime snapshot's ``runtime`` YAML is stored parsed, without the
                         runtime's volatile metadata, and Secret values are dropped (the MPI
                         policy's SSH keys are random),
     "events":           the TrainJob's events (type, reason, message), each once,
     "writes":           the controller's writes for the TrainJob, as the API server's audit
                         log saw them: each kind (verb, resource, name) once, first-seen order,
                         with the HTTP code of its first answer,
     "recorder":         how it was made}

"Normalised": metadata.uid, resourceVersion, creationTimestamp, managedFields, generation,
ownerReferences[].uid and status are dropped, and the admission-time ``runtimePatches[].time``
becomes ``"<set>"``. The namespace is ``anchor``. Everything else is kept, including what the API
server's CRD defaults and JobSet's defaulting webhook fill in: both sides of the comparison are
stored by the same API server build behind the same JobSet v0.12.0 webhooks.

How it runs: a local control plane from the test kit (etcd + kube-apiserver only: no pod is
ever created or run), Trainer v2.3.0's CRDs from its source tree, JobSet v0.12.0 as the test kit
runs it (its CRD, identical to the jobset mirror's config/components/crd/bases file, its webhooks
and its controller, which makes Jobs no controller runs), and the Go binary out of cluster with a
Configuration file: no leader election, metrics off, health probes and the webhook server on
free loopback ports, and ``certManagement.enable: false``: its certificate rotator would write a
Secret in ``kubeflow-system`` and patch the webhook configurations for a Service that does not
exist here. Instead, as the test kit does for JobSet, the webhook server gets a serving
certificate for 127.0.0.1 from a throw-away CA in controller-runtime's default certificate
directory (under ``$TMPDIR``, set to this run's work directory), and upstream's
manifests/base/webhook configurations, with their kustomize patches' objectSelectors, are
registered by URL with that CA. So the TrainJob defaulter (``runtimePatches[].time``) and the
validators are really called; each run checks that the validator denies an invalid TrainJob
(a dry run). Feature gates are left at their defaults (TrainJobStatus off).

Prerequisites (the build took 100 s on 2 shared cores, most modules already in the Go module
cache; the go.mod asks for Go 1.26, controller-runtime v0.24.1, k8s.io v0.36, JobSet v0.12.0)::

    export PATH=$(bash hack/ensure-go.sh | tail -n1):$PATH
    mkdir -p ~/.cache/jobcontroller/anchor-src/trainer-v2.3.0
    git -C /work/.mirror/kubeflow+trainer/repo archive v2.3.0 \\
      | tar -x -C ~/.cache/jobcontroller/anchor-src/trainer-v2.3.0   # no blob missing at v2.3.0
    cd ~/.cache/jobcontroller/anchor-src/trainer-v2.3.0 && \\
      nice -n 10 go build -o ~/.cache/jobcontroller/anchors/trainer-controller-manager-v2.3.0 \\
      ./cmd/trainer-controller-manager

Rerun (about 110 s for the 23 cases: 10 s to start, then 3 to 8 s a case, a case settling when
nothing changed for 3 s)::

    JOBCONTROLLER_K8S_BIN=$(bash hack/build-control-plane.sh | tail -n1) \\
      .venv/bin/python hack/anchor_record_trainer.py                 # every case
    .venv/bin/python hack/anchor_record_trainer.py --only torch-custom --keep   # one, keep logs
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from typing_extensions import override

from jobcontroller.testing import addon
from jobcontroller.testing.certs import CertificateAuthority
from jobcontroller.testing.controlplane import ControlPlane, _die_with_parent
from jobcontroller.testing.jobset import JobSetController
from jobcontroller.testing.ports import free_port

VERSION = "v2.3.0"
CACHE = Path(os.environ.get("JOBCONTROLLER_CACHE", Path.home() / ".cache" / "jobcontroller"))
SRC = CACHE / "anchor-src" / f"trainer-{VERSION}"
BINARY = CACHE / "anchors" / f"trainer-controller-manager-{VERSION}"
REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / f"trainer-{VERSION}"
CASES_FILE = "anchor_record_trainer_cases.yaml"
OUT = REPO / "tests" / "data" / "anchor" / f"trainer-{VERSION}"
NAMESPACE = "anchor"
GROUP = "trainer.kubeflow.org"
API = f"/apis/{GROUP}/v1alpha1"
USER_AGENT = "trainer-controller-manager"  # the binary's name, as client-go's default agent
Obj = dict[str, Any]

AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "resources": [{"group": "coordination.k8s.io"}]},
        {"level": "Metadata", "verbs": ["create", "update", "patch", "delete"]},
        {"level": "None"},
    ],
}


# ----------------------------------------------------------------------------------- cases


def _docs(path: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _example(file: str, kind: str) -> Obj:
    return next(d for d in _docs(DATA / "examples" / file) if d["kind"] == kind)


def _trainjob(name: str, spec: Obj) -> Obj:
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": spec,
    }


def _initializer_volume(runtime: Obj) -> None:
    """What v2.3.0's webhook asks of a dataset step: a volume ``initializer`` mounted in its
    container (and, for the data to reach it, the trainer's)."""
    for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = rjob["template"]["spec"]["template"]["spec"]
        pod["volumes"] = [{"name": "initializer", "emptyDir": {}}]
        for c in pod["containers"]:
            c["volumeMounts"] = [{"name": "initializer", "mountPath": "/workspace"}]


@dataclass(frozen=True)
class Case:
    """One entry of anchor_record_trainer_cases.yaml."""

    spec: Obj

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    def load(self) -> tuple[Obj, Obj]:
        rt = self.spec["runtime"]
        if "file" in rt:
            [runtime] = _docs(DATA / "runtimes" / rt["file"])
        elif "inline" in rt:
            runtime = copy.deepcopy(rt["inline"])
        else:
            runtime = _example(rt["example"], "TrainingRuntime")
            runtime["metadata"]["name"] = rt.get("name", runtime["metadata"]["name"])
            if rt.get("initializer_volume"):
                _initializer_volume(runtime)
        if "trainer" in self.spec:
            ref = {"name": runtime["metadata"]["name"]}
            job = _trainjob(
                self.name, {"runtimeRef": ref, "trainer": copy.deepcopy(self.spec["trainer"])}
            )
        else:
            tj = self.spec["trainjob"]
            job = (
                _example(tj["example"], "TrainJob") if "example" in tj else _trainjob(self.name, {})
            )
            job["metadata"]["name"] = tj.get("name", job["metadata"]["name"])
            job["spec"].update(copy.deepcopy(tj.get("spec") or {}))
        if runtime["kind"] == "TrainingRuntime":
            runtime["metadata"]["namespace"] = NAMESPACE
        job["metadata"]["namespace"] = NAMESPACE
        return runtime, job


CASES = [Case(c) for c in yaml.safe_load(Path(__file__).with_name(CASES_FILE).read_text())]


# ----------------------------------------------------------------------------- normalising

_VOLATILE = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation")


def normalise(obj: Obj) -> Obj:
    obj = copy.deepcopy(obj)
    meta = obj.get("metadata", {})
    for key in (*_VOLATILE, "selfLink"):
        meta.pop(key, None)
    for ref in meta.get("ownerReferences", []):
        ref.pop("uid", None)
    obj.pop("status", None)
    for patch in (obj.get("spec") or {}).get("runtimePatches") or []:
        if "time" in patch:
            patch["time"] = "<set>"
    return obj


def conditions(obj: Obj) -> list[Obj]:
    return [
        {k: v for k, v in c.items() if k != "lastTransitionTime"}
        for c in (obj.get("status") or {}).get("conditions") or []
    ]


def trainjob_stored(obj: Obj) -> Obj:
    out = normalise(obj)
    out["status"] = {"conditions": conditions(obj)}
    if (obj.get("status") or {}).get("jobsStatus"):
        out["status"]["jobsStatus"] = obj["status"]["jobsStatus"]
    return out


def other_object(obj: Obj, kind: str) -> Obj:
    out = {"apiVersion": "v1", "kind": kind, **normalise(obj)}
    if kind == "Secret":
        out["data"] = dict.fromkeys(out.get("data") or {}, "<dropped>")
    elif "runtime" in (out.get("data") or {}):
        out["data"]["runtime"] = normalise(yaml.safe_load(out["data"]["runtime"]))
    return out


# ------------------------------------------------------------------------------ the binary


class Trainer(addon.AddonProcess):
    """trainer-controller-manager v2.3.0 out of cluster, its webhooks registered by URL."""

    def __init__(self, cp: ControlPlane, workdir: Path) -> None:
        self.cp, self.workdir = cp, workdir
        self.popen: subprocess.Popen[bytes] | None = None
        self._webhooks: list[addon.Registered] = []
        self.port, self.health = free_port(), free_port()
        self.webhook_denial = ""

    @property
    @override
    def log(self) -> Path:
        return self.cp.logs / "trainer-controller-manager.log"

    @override
    def start(self) -> None:
        ca = CertificateAuthority("anchor-trainer-webhook-ca")
        tmp = self.workdir / "tmp"
        certs = tmp / "k8s-webhook-server" / "serving-certs"  # controller-runtime's default
        certs.mkdir(parents=True)
        ca.serving().write(certs, "tls")
        config = self.workdir / "trainer-config.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
                    "kind": "Configuration",
                    "webhook": {"port": self.port, "host": "127.0.0.1"},
                    "metrics": {"bindAddress": "0", "secureServing": False},
                    "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health}"},
                    "leaderElection": {"leaderElect": False},
                    "certManagement": {"enable": False},
                }
            )
        )
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env["TMPDIR"] = str(tmp)
        argv = [str(BINARY), f"--config={config}", f"--kubeconfig={self.cp.kubeconfig}"]
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                [*argv, "--zap-log-level=info"],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                preexec_fn=_die_with_parent,
            )
        try:
            self._webhooks = addon.register_webhooks(
                self.cp,
                SRC / "manifests/base/webhook/manifests.yaml",
                port=self.port,
                ca_bundle=ca.pair.cert,
                prefix="anchor",
                adjust=_upstream_selectors,
            )
            addon.wait_healthy(
                f"http://127.0.0.1:{self.health}/readyz",
                what="trainer",
                alive=self.alive,
                log_tail=self.log_tail,
            )
            self.webhook_denial = self._check_validator()
        except BaseException:
            self.stop()
            raise

    def _check_validator(self) -> str:
        """A dry-run TrainJob naming a runtime that does not exist: the validator denies it
        (retried while the server warms up)."""
        body = _trainjob("webhook-probe", {"runtimeRef": {"name": "no-such-runtime"}})
        deadline = time.monotonic() + 60
        while True:
            try:
                self.cp.request("POST", f"{API}/namespaces/default/trainjobs?dryRun=All", body)
            except urllib.error.HTTPError as exc:
                message = str(json.loads(exc.read()).get("message", ""))
                if "denied the request" in message:
                    return message
                if time.monotonic() > deadline:
                    raise RuntimeError(f"trainer webhook not reached: {message}") from None
            else:
                raise RuntimeError("the validator admitted a TrainJob on a missing runtime")
            time.sleep(0.5)


def _upstream_selectors(hook: Obj) -> Obj:
    """manifests/base/webhook/patch_validating.yaml: the runtimes' validators skip objects
    labelled ``trainer.kubeflow.org/webhook-validation: disabled``."""
    if hook["name"].startswith(("validator.clustertrainingruntime", "validator.trainingruntime")):
        hook["objectSelector"] = {
            "matchExpressions": [
                {
                    "key": f"{GROUP}/webhook-validation",
                    "operator": "NotIn",
                    "values": ["disabled"],
                }
            ]
        }
    return hook


# ----------------------------------------------------------------------------------- a case


class Recorder:
    def __init__(self, cp: ControlPlane, audit_log: Path) -> None:
        self.cp, self.audit_log = cp, audit_log

    def api(self, method: str, path: str, body: Obj | None = None) -> Any:
        try:
            return self.cp.request(method, path, body)
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"{method} {path}: {e.code} {e.read().decode()}") from None

    def create_runtime(self, runtime: Obj) -> None:
        if runtime["kind"] == "ClusterTrainingRuntime":
            path = f"{API}/clustertrainingruntimes"
        else:
            path = f"{API}/namespaces/{NAMESPACE}/trainingruntimes"
        try:
            self.cp.request("POST", path, runtime)
        except urllib.error.HTTPError as e:
            if e.code != 409:
                raise RuntimeError(f"runtime: {e.code} {e.read().decode()}") from None

    def owned(self, plural: str, name: str) -> list[Obj]:
        items = self.api("GET", f"/api/v1/namespaces/{NAMESPACE}/{plural}")["items"]
        return sorted(
            (
                o
                for o in items
                if any(
                    r["kind"] == "TrainJob" and r["name"] == name
                    for r in o["metadata"].get("ownerReferences", [])
                )
            ),
            key=lambda o: str(o["metadata"]["name"]),
        )

    def events(self, name: str) -> list[Obj]:
        items = self.api("GET", f"/api/v1/namespaces/{NAMESPACE}/events")["items"]
        out: list[Obj] = []  # each once: how often a retried error repeats is timing
        for e in sorted(items, key=lambda e: str(e["metadata"]["creationTimestamp"])):
            involved = e["involvedObject"]
            seen = {"type": e["type"], "reason": e["reason"], "message": e["message"]}
            if involved.get("kind") == "TrainJob" and involved["name"] == name and seen not in out:
                out.append(seen)
        return out

    def record(self, case: Case, trainer: Trainer) -> Obj:
        runtime, job = case.load()
        name = job["metadata"]["name"]
        self.create_runtime(runtime)
        head: Obj = {
            "case": case.name,
            "about": case.spec.get("about", ""),
            "runtime": runtime,
            "trainjob": job,
            "then": case.spec.get("then") or [],
        }
        recorder = {
            "controller": f"Kubeflow Trainer {VERSION} cmd/trainer-controller-manager, "
            "built from source",
            "jobset": "v0.12.0 (CRD, webhooks and controller)",
            "script": "hack/anchor_record_trainer.py",
            "webhook_denied_invalid_trainjob": trainer.webhook_denial,
        }
        try:
            self.cp.request("POST", f"{API}/namespaces/{NAMESPACE}/trainjobs", job)
        except urllib.error.HTTPError as e:  # upstream's own webhooks refuse it
            denied = json.loads(e.read()).get("message")
            return {**head, "denied": denied, "jobset": None, "recorder": recorder}
        state = self.settle(name, trainer)
        for patch in case.spec.get("then") or ():  # later changes, each once the last settled
            self.merge_patch(f"{API}/namespaces/{NAMESPACE}/trainjobs/{name}", patch)
            state = self.settle(name, trainer, after=state)
        return {**head, "denied": None, **state, "writes": self.writes(name), "recorder": recorder}

    def merge_patch(self, path: str, body: Obj) -> None:
        req = urllib.request.Request(
            self.cp.server + path, data=json.dumps(body).encode(), method="PATCH"
        )
        req.add_header("Content-Type", "application/merge-patch+json")
        # The test kit's admin TLS context (its request() sends JSON only).
        with urllib.request.urlopen(req, timeout=30, context=self.cp._ssl()) as resp:
            resp.read()

    def settle(self, name: str, trainer: Trainer, after: Obj | None = None) -> Obj:
        """The case's state once the JobSet (or a Warning) is there, differs from ``after``
        and nothing changed for 3 s."""
        jobset_path = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NAMESPACE}/jobsets/{name}"
        deadline, quiet_since, last = time.monotonic() + 60, 0.0, ""
        while True:
            stored = self.api("GET", f"{API}/namespaces/{NAMESPACE}/trainjobs/{name}")
            try:
                jobset: Obj | None = self.cp.request("GET", jobset_path)
            except urllib.error.HTTPError:
                jobset = None
            events = self.events(name)
            state: Obj = {
                "trainjob_stored": trainjob_stored(stored),
                "conditions": conditions(stored),
                "jobset": normalise(jobset) if jobset else None,
                "configmaps": [
                    other_object(o, "ConfigMap") for o in self.owned("configmaps", name)
                ],
                "secrets": [other_object(o, "Secret") for o in self.owned("secrets", name)],
                "events": events,
            }
            snapshot = json.dumps(state, sort_keys=True)
            ready = jobset is not None or any(e["type"] == "Warning" for e in events)
            if ready and (after is None or state != after):
                if snapshot != last:
                    quiet_since, last = time.monotonic(), snapshot
                elif time.monotonic() - quiet_since >= 3:
                    return state
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name}: did not settle:\n{trainer.log_tail()}")
            time.sleep(0.5)

    def writes(self, name: str) -> list[Obj]:
        """The controller's kinds of write (verb, resource, name) for objects named after the
        TrainJob, in first-seen order, with the first answer's code; how many times each was made
        depends on how many reconciles the JobSet's status changes caused, so it is not kept."""
        out: dict[tuple[str, str, str], int] = {}
        for line in self.audit_log.read_text().splitlines():
            event = json.loads(line)
            ref = event.get("objectRef") or {}
            if (
                event.get("stage") != "ResponseComplete"
                or not str(event.get("userAgent", "")).startswith(USER_AGENT)
                or ref.get("namespace") != NAMESPACE
                or not str(ref.get("name", "")).startswith(name)
            ):
                continue
            resource = ref.get("resource", "")
            if ref.get("subresource"):
                resource += "/" + ref["subresource"]
            if resource == "events":
                continue  # named <trainjob>.<random>; listed under "events"
            key = (event["verb"], resource, ref.get("name", ""))
            out.setdefault(key, (event.get("responseStatus") or {}).get("code", 0))
        return [
            {"verb": v, "resource": r, "name": n, "first_code": code}
            for (v, r, n), code in out.items()
        ]


# ---------------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--only", action="append", default=[], help="a case name; repeatable")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = parser.parse_args()
    for needed in (BINARY, SRC / "manifests/base/crds"):
        if not needed.exists():
            sys.exit(f"missing {needed}: see this script's docstring")
    cases = [c for c in CASES if not args.only or c.name in args.only]

    workdir = Path(tempfile.mkdtemp(prefix="anchor-trainer-"))
    policy = workdir / "audit-policy.yaml"
    policy.write_text(yaml.safe_dump(AUDIT_POLICY))
    audit = workdir / "audit.log"
    cp = ControlPlane(
        workdir=workdir / "cluster",
        extra_apiserver_args=[
            f"--audit-policy-file={policy}",
            f"--audit-log-path={audit}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
        ],
    )
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    try:
        cp.start()
        addon.install_crds(cp, sorted((SRC / "manifests/base/crds").glob(f"{GROUP}_*.yaml")))
        cp.request("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        with JobSetController(cp), Trainer(cp, workdir) as trainer:
            print(f"cluster, JobSet and trainer ready in {time.monotonic() - t0:.1f}s")
            rec = Recorder(cp, audit)
            for case in cases:
                result = rec.record(case, trainer)
                path = args.out / f"{case.name}.json"
                path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
                shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
                if result["denied"]:
                    print(f"{shown}: denied: {result['denied']}")
                    continue
                print(
                    f"{shown}: jobset={'yes' if result['jobset'] else 'no'}, "
                    f"{len(result['configmaps'])} configmaps, {len(result['secrets'])} secrets, "
                    f"{len(result['writes'])} writes, "
                    f"events {[e['reason'] for e in result['events']]}"
                )
    finally:
        cp.stop()
        print(f"total {time.monotonic() - t0:.1f}s", file=sys.stderr)
        if args.keep:
            print(f"kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
