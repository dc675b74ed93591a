"""Kueue on the local cluster: its manager as a process, its CRDs and its webhooks.

The manager (``sigs.k8s.io/kueue/cmd/kueue``) is built from its Go module by
``hack/build-kueue.sh`` into ``~/.cache/jobcontroller/bin/kueue-<version>/``, next to the
module's CRDs (``crd/``) and webhook manifests (``webhook.yaml``). :class:`Kueue` runs it out of
the cluster (kwok's nodes cannot run it) against a :class:`ControlPlane`:

- a Configuration (``<workdir>/config.yaml``) with the kubeflow integrations
  (``kubeflow.org/{tfjob,pytorchjob,xgboostjob,paddlejob,jaxjob,mpijob}``),
  ``manageJobsWithoutQueueName: false``, no leader election, no internal cert management, no
  visibility server (its fixed port would clash between sessions), the metrics server off;
- its webhook server on a free loopback port with a serving certificate for ``127.0.0.1`` from
  a CA of the test kit (``testing/certs.py``); the API server calls it through webhook
  configurations that name it by ``url`` (no Service, no aggregator routing), with that CA as
  ``caBundle``. Only the webhooks of Kueue's own kinds and of the kubeflow.org kinds are
  registered; ``namespace_label`` (the pytest fixture sets it) limits the kubeflow.org ones to
  namespaces carrying that label, so Kueue never stands in the way of the session's other tests;
- Kueue insists on a metrics certificate at ``/etc/kueue/metrics/certs`` when it does not
  manage its certificates itself (the path is hard-coded); one is written there when missing.

:meth:`Kueue.queue` gives a namespace a ClusterQueue (with preemption of lower priorities
within it) and a LocalQueue over the shared ResourceFlavor; :meth:`Kueue.priority_class`
creates a WorkloadPriorityClass.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from jobcontroller.testing import yamlfast
from jobcontroller.testing.certs import CertificateAuthority
from jobcontroller.testing.controlplane import (
    START_TIMEOUT,
    ControlPlane,
    _die_with_parent,
)
from jobcontroller.testing.ports import free_port

ENV_VAR = "JOBCONTROLLER_KUEUE_BIN"
GROUP = "kueue.x-k8s.io"
API = f"/apis/{GROUP}/v1beta2"
QUEUE_LABEL = f"{GROUP}/queue-name"
PRIORITY_LABEL = f"{GROUP}/priority-class"
FRAMEWORKS = [
    "kubeflow.org/tfjob",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/xgboostjob",
    "kubeflow.org/paddlejob",
    "kubeflow.org/jaxjob",
    "kubeflow.org/mpijob",
]
FLAVOR = "default-flavor"
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")  # hard-coded in cmd/kueue/main.go
_WEBHOOK_GROUPS = {GROUP, "kubeflow.org"}
_MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
_VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
_CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


class KueueNotFound(RuntimeError):
    """Kueue is not built yet."""


def _complete(directory: Path) -> bool:
    return (
        os.access(directory / "kueue", os.X_OK)
        and (directory / "crd").is_dir()
        and (directory / "webhook.yaml").is_file()
    )


def find_kueue() -> Path:
    """The directory of ``hack/build-kueue.sh``'s build: ``$JOBCONTROLLER_KUEUE_BIN``, else the
    newest complete ``kueue-*`` in the cache."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        path = Path(explicit).expanduser()
        if not _complete(path):
            raise KueueNotFound(f"{ENV_VAR}={explicit} lacks kueue, crd/ or webhook.yaml")
        return path
    cache = Path(os.environ.get("JOBCONTROLLER_CACHE", Path.home() / ".cache" / "jobcontroller"))
    candidates = sorted(
        (d for d in (cache / "bin").glob("kueue-*") if d.is_dir() and _complete(d)),
        key=lambda d: d.stat().st_mtime,
        reverse=True,
    )
    if candidates:
        return candidates[0]
    built = _build_from_checkout()
    if built is not None:
        return built
    raise KueueNotFound(
        f"no Kueue build in {cache / 'bin'}: run hack/build-kueue.sh (or `make kueue`), "
        f"or set {ENV_VAR}"
    )


def _build_from_checkout() -> Path | None:
    """In a checkout of this project, ``hack/build-kueue.sh``'s build, made now or, when ``make
    test`` started it in the background, waited for (the script holds a lock while it builds).
    None outside a checkout."""
    script = Path(__file__).resolve().parents[5] / "hack" / "build-kueue.sh"
    if not script.is_file():
        return None
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise KueueNotFound(f"{script} failed:\n{done.stderr[-4000:]}")
    path = Path(done.stdout.strip().splitlines()[-1])
    if not _complete(path):
        raise KueueNotFound(f"{script} printed {path}, which lacks kueue, crd/ or webhook.yaml")
    return path


def version_of(directory: Path) -> str:
    """``0.17.0`` for ``.../kueue-0.17.0``."""
    return directory.name.removeprefix("kueue-")


@dataclass
class Kueue:
    """Kueue's manager running against ``cp``; :meth:`start`, :meth:`stop`, or ``with``."""

    cp: ControlPlane
    namespace_label: str | None = None
    """Only namespaces with this label (any value) get Kueue's kubeflow.org webhooks; None:
    every namespace but kube-system and kueue-system."""
    directory: Path | None = None
    """The build (``find_kueue()`` when None)."""
    die_with_parent: bool = True
    frameworks: list[str] = field(default_factory=lambda: list(FRAMEWORKS))

    def __post_init__(self) -> None:
        self.popen: subprocess.Popen[bytes] | None = None
        self.webhook_port = 0
        self.health_port = 0
        self.workdir: Path | None = None
        self._webhook_names: list[tuple[str, str]] = []

    def __enter__(self) -> Kueue:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def version(self) -> str:
        return version_of(self.directory) if self.directory else "?"

    @property
    def log(self) -> Path:
        return self.cp.logs / "kueue.log"

    # ----------------------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Install the CRDs, start the manager, register its webhooks, wait until ready."""
        self.directory = self.directory or find_kueue()
        self.workdir = Path(tempfile.mkdtemp(prefix="kueue-", dir=self.cp.logs.parent))
        self.webhook_port, self.health_port = free_port(), free_port()
        ca = CertificateAuthority("jobcontroller-kueue-webhook-ca")
        certs = self.workdir / "certs"
        certs.mkdir()
        ca.serving().write(certs, "tls")
        self._metrics_cert(ca)
        self._install_crds()
        self._ensure_namespace("kueue-system")
        config = self.workdir / "config.yaml"
        config.write_text(yaml.safe_dump(self._configuration(certs)))
        argv = [
            str(self.directory / "kueue"),
            f"--config={config}",
            f"--kubeconfig={self.cp.kubeconfig}",
            "--zap-log-level=2",
        ]
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                preexec_fn=_die_with_parent if self.die_with_parent else None,
            )
        try:
            self._register_webhooks(ca.pair.cert)
            self._wait_ready()
            self._apply(f"{API}/resourceflavors", {"metadata": {"name": FLAVOR}}, "ResourceFlavor")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for path, name in self._webhook_names:
            with contextlib.suppress(Exception):
                self.cp.request("DELETE", f"{path}/{name}")
        self._webhook_names = []
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self.popen = None

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def describe(self) -> list[str]:
        return [
            f"kueue v{self.version}: pid {self.popen.pid if self.popen else '-'}, webhooks "
            f"https://127.0.0.1:{self.webhook_port}, log {self.log}",
        ]

    # ------------------------------------------------------------------------------ queues

    def queue(
        self,
        namespace: str,
        *,
        cpu: str | int,
        memory: str = "64Gi",
        name: str = "lq",
        preemption: str = "LowerPriority",
    ) -> str:
        """A ClusterQueue ``<namespace>`` (``cpu`` and ``memory`` of the shared flavor, only
        for workloads of ``namespace``, preempting ``preemption`` within it) and a LocalQueue
        ``name`` in ``namespace`` pointing at it; returns the LocalQueue's name."""
        if self.namespace_label:
            ns = self.cp.request("GET", f"/api/v1/namespaces/{namespace}")
            ns["metadata"].setdefault("labels", {})[self.namespace_label] = "true"
            self.cp.request("PUT", f"/api/v1/namespaces/{namespace}", ns)
        cq = {
            "apiVersion": f"{GROUP}/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": namespace},
            "spec": {
                "namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": namespace},
                },
                "preemption": {"withinClusterQueue": preemption},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": FLAVOR,
                                "resources": [
                                    {"name": "cpu", "nominalQuota": str(cpu)},
                                    {"name": "memory", "nominalQuota": memory},
                                ],
                            }
                        ],
                    }
                ],
            },
        }
        self._apply(f"{API}/clusterqueues", cq, "ClusterQueue")
        lq = {
            "apiVersion": f"{GROUP}/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": namespace},
        }
        self._apply(f"{API}/namespaces/{namespace}/localqueues", lq, "LocalQueue")
        return name

    def delete_queue(self, namespace: str) -> None:
        """Remove the ClusterQueue of :meth:`queue` (its LocalQueue goes with the namespace)."""
        with contextlib.suppress(urllib.error.HTTPError):
            self.cp.request("DELETE", f"{API}/clusterqueues/{namespace}")

    def priority_class(self, name: str, value: int) -> str:
        """A WorkloadPriorityClass (cluster-wide; kept if it exists)."""
        body = {
            "apiVersion": f"{GROUP}/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        self._apply(f"{API}/workloadpriorityclasses", body, "WorkloadPriorityClass")
        return name

    # ------------------------------------------------------------------------------ setup

    def _configuration(self, certs: Path) -> dict[str, Any]:
        return {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": "kueue-system",
            "manageJobsWithoutQueueName": False,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"port": self.webhook_port, "host": "127.0.0.1", "certDir": str(certs)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "clientConnection": {"qps": 100, "burst": 200},
            "featureGates": {"VisibilityOnDemand": False},
            "integrations": {"frameworks": list(self.frameworks)},
        }

    def _metrics_cert(self, ca: CertificateAuthority) -> None:
        if (METRICS_CERT_DIR / "tls.crt").exists() and (METRICS_CERT_DIR / "tls.key").exists():
            return
        try:
            METRICS_CERT_DIR.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(dir=METRICS_CERT_DIR))
            crt, key = ca.serving().write(tmp, "tls")
            crt.rename(METRICS_CERT_DIR / "tls.crt")
            key.rename(METRICS_CERT_DIR / "tls.key")
            tmp.rmdir()
        except OSError as exc:
            raise RuntimeError(
                f"Kueue needs a (any) certificate in {METRICS_CERT_DIR} (tls.crt, tls.key) when "
                f"it does not manage its own; could not write one: {exc}"
            ) from exc

    def _apply(self, path: str, body: dict[str, Any], kind: str) -> None:
        body = {"apiVersion": f"{GROUP}/v1beta2", "kind": kind, **body}
        try:
            self.cp.request("POST", path, body)
        except urllib.error.HTTPError as exc:
            if exc.code != 409:
                detail = exc.read().decode(errors="replace")
                raise RuntimeError(f"POST {path}: {exc.code} {detail}") from None

    def _ensure_namespace(self, name: str) -> None:
        try:
            self.cp.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
        except urllib.error.HTTPError as exc:
            if exc.code != 409:
                raise

    def _install_crds(self) -> None:
        assert self.directory is not None
        names = []
        for path in sorted((self.directory / "crd").glob("*.yaml")):
            crd = yamlfast.load(path.read_text())
            # The module's kustomization adds conversion webhooks; only v1beta2 is used here,
            # so the API server needs none (strategy None).
            crd["spec"].pop("conversion", None)
            try:
                self.cp.request("POST", _CRDS, crd)
            except urllib.error.HTTPError as exc:
                if exc.code != 409:
                    raise RuntimeError(f"CRD {path.name}: {exc.code} {exc.read()!r}") from None
            names.append(crd["metadata"]["name"])
        deadline = time.monotonic() + 60
        for name in names:
            while True:
                conds = (self.cp.request("GET", f"{_CRDS}/{name}").get("status") or {}).get(
                    "conditions"
                ) or []
                if any(c["type"] == "Established" and c["status"] == "True" for c in conds):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"CRD {name} not Established")
                time.sleep(0.1)

    def _register_webhooks(self, ca_bundle: bytes) -> None:
        import base64

        assert self.directory is not None
        bundle = base64.b64encode(ca_bundle).decode()
        suffix = f"{self.cp.apiserver_port}"
        for doc in yaml.safe_load_all((self.directory / "webhook.yaml").read_text()):
            if not doc:
                continue
            path = _MUTATING if doc["kind"] == "MutatingWebhookConfiguration" else _VALIDATING
            hooks = []
            for hook in doc["webhooks"]:
                groups = {g for r in hook["rules"] for g in r["apiGroups"]}
                if not groups <= _WEBHOOK_GROUPS:
                    continue
                svc = hook["clientConfig"].pop("service")
                hook["clientConfig"] = {
                    "url": f"https://127.0.0.1:{self.webhook_port}{svc['path']}",
                    "caBundle": bundle,
                }
                if "kubeflow.org" in groups:
                    if self.namespace_label:
                        hook["namespaceSelector"] = {
                            "matchExpressions": [
                                {"key": self.namespace_label, "operator": "Exists"}
                            ]
                        }
                    else:
                        hook["namespaceSelector"] = {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/metadata.name",
                                    "operator": "NotIn",
                                    "values": ["kube-system", "kueue-system"],
                                }
                            ]
                        }
                hooks.append(hook)
            name = f"kueue-{doc['metadata']['name']}-{suffix}"
            body = {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": doc["kind"],
                "metadata": {"name": name},
                "webhooks": hooks,
            }
            with contextlib.suppress(urllib.error.HTTPError):
                self.cp.request("DELETE", f"{path}/{name}")
            self.cp.request("POST", path, body)
            self._webhook_names.append((path, name))

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        url = f"http://127.0.0.1:{self.health_port}/readyz"
        while True:
            if not self.alive():
                raise RuntimeError(f"kueue exited during start:\n{self.log_tail()}")
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    break
            if time.monotonic() > deadline:
                tail = self.log_tail()
                raise RuntimeError(f"kueue not ready after {START_TIMEOUT:.0f}s:\n{tail}")
            time.sleep(0.2)
        # Ready means the webhook server listens; the API server must also reach it (a
        # dry-run ResourceFlavor goes through the mutating and validating webhooks).
        probe = {
            "apiVersion": f"{GROUP}/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "webhook-probe"},
        }
        while True:
            try:
                self.cp.request("POST", f"{API}/resourceflavors?dryRun=All", probe)
                return
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode(errors="replace")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"kueue webhooks not reachable: {detail}") from None
            time.sleep(0.2)
