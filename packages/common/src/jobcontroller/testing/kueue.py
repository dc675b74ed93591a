"""Kueue on the local cluster: its manager as a process, its CRDs and its webhooks.

The manager (``sigs.k8s.io/kueue/cmd/kueue``) is built from its Go module by
``hack/build-kueue.sh`` into ``~/.cache/jobcontroller/bin/kueue-<version>/``, next to the
module's CRDs (``crd/``) and webhook manifests (``webhook.yaml``). :class:`Kueue` runs it out of
the cluster (kwok's nodes cannot run it) against a :class:`ControlPlane`:

- a Configuration (``<workdir>/config.yaml``) with the kubeflow integrations
  (``kubeflow.org/{tfjob,pytorchjob,xgboostjob,paddlejob,jaxjob,mpijob}``,
  ``trainer.kubeflow.org/trainjob`` and ``jobset.x-k8s.io/jobset``),
  ``manageJobsWithoutQueueName: false``, no leader election, no internal cert management, no
  visibility server (its fixed port would clash between sessions), the metrics server off;
- its webhook server on a free loopback port with a serving certificate for ``127.0.0.1`` from
  a CA of the test kit (``testing/certs.py``); the API server calls it through webhook
  configurations that name it by ``url`` (no Service, no aggregator routing), with that CA as
  ``caBundle``. Only the webhooks of Kueue's own kinds and of the kubeflow.org,
  trainer.kubeflow.org and jobset.x-k8s.io kinds are registered; ``namespace_label`` (the
  pytest fixture sets it) limits the job ones to namespaces carrying that label, so Kueue
  never stands in the way of the session's other tests;
- the TrainJob integration's controller watches the JobSets TrainJobs own: without JobSet's
  CRD its cache never syncs and the manager exits two minutes after it started (seen with
  v0.17.0), so :meth:`Kueue.start` installs that CRD (from ``hack/build-jobset.sh``'s build)
  first when either integration is on. The trainer.kubeflow.org
  CRDs are the project's: install them before, as the kubeflow.org ones;
- Kueue insists on a metrics certificate at ``/etc/kueue/metrics/certs`` when it does not
  manage its certificates itself (the path is hard-coded); one is written there when missing.

:meth:`Kueue.queue` gives a namespace a ClusterQueue (with preemption of lower priorities
within it) and a LocalQueue over the shared ResourceFlavor (or one of :meth:`Kueue.flavor`,
whose node labels and tolerations Kueue puts on the pods it admits);
:meth:`Kueue.priority_class` creates a WorkloadPriorityClass.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import urllib.error
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from typing_extensions import override

from jobcontroller.testing import addon
from jobcontroller.testing.certs import CertificateAuthority
from jobcontroller.testing.controlplane import ControlPlane, _die_with_parent
from jobcontroller.testing.jobset import find_jobset
from jobcontroller.testing.ports import free_port

ENV_VAR = "JOBCONTROLLER_KUEUE_BIN"
GROUP = "kueue.x-k8s.io"
API = f"/apis/{GROUP}/v1beta2"
QUEUE_LABEL = f"{GROUP}/queue-name"
PRIORITY_LABEL = f"{GROUP}/priority-class"
TRAINJOB_FRAMEWORK = "trainer.kubeflow.org/trainjob"
#: On by default in Kueue's own install: a TrainJob's JobSet carries the TrainJob's queue label
#: and must be left to the TrainJob's Workload rather than queued again.
JOBSET_FRAMEWORK = "jobset.x-k8s.io/jobset"
#: The runtimePatches entry Kueue's TrainJob integration owns.
RUNTIME_PATCH_MANAGER = f"{GROUP}/manager"
FRAMEWORKS = [
    "kubeflow.org/tfjob",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/xgboostjob",
    "kubeflow.org/paddlejob",
    "kubeflow.org/jaxjob",
    "kubeflow.org/mpijob",
    TRAINJOB_FRAMEWORK,
    JOBSET_FRAMEWORK,
]
FLAVOR = "default-flavor"
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")  # hard-coded in cmd/kueue/main.go
_JOB_GROUPS = {"kubeflow.org", "trainer.kubeflow.org", "jobset.x-k8s.io"}
_WEBHOOK_GROUPS = {GROUP, *_JOB_GROUPS}


class KueueNotFound(addon.BuildNotFound):
    """Kueue is not built yet."""


def find_kueue() -> Path:
    """The directory of ``hack/build-kueue.sh``'s build: ``$JOBCONTROLLER_KUEUE_BIN``, else the
    newest complete ``kueue-*`` in the cache, else built now from the checkout."""
    try:
        return addon.find_build(binary="kueue", env_var=ENV_VAR, script="build-kueue.sh")
    except addon.BuildNotFound as exc:
        raise KueueNotFound(str(exc)) from None


def version_of(directory: Path) -> str:
    """``0.17.0`` for ``.../kueue-0.17.0``."""
    return directory.name.removeprefix("kueue-")


@dataclass
class Kueue(addon.AddonProcess):
    """Kueue's manager running against ``cp``; :meth:`start`, :meth:`stop`, or ``with``."""

    cp: ControlPlane
    namespace_label: str | None = None
    """Only namespaces with this label (any value) get Kueue's job webhooks; None:
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
        self._webhooks: list[addon.Registered] = []

    @property
    def version(self) -> str:
        return version_of(self.directory) if self.directory else "?"

    @property
    @override
    def log(self) -> Path:
        return self.cp.logs / "kueue.log"

    # ----------------------------------------------------------------------------- lifecycle

    @override
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
        if {TRAINJOB_FRAMEWORK, JOBSET_FRAMEWORK} & set(self.frameworks):
            addon.install_crds(self.cp, sorted((find_jobset() / "crd").glob("*.yaml")))
        addon.install_crds(self.cp, sorted((self.directory / "crd").glob("*.yaml")))
        addon.ensure_namespace(self.cp, "kueue-system")
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
        flavor: str = FLAVOR,
    ) -> str:
        """A ClusterQueue ``<namespace>`` (``cpu`` and ``memory`` of ``flavor``, only for
        workloads of ``namespace``, preempting ``preemption`` within it) and a LocalQueue
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
                                "name": flavor,
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

    def flavor(
        self,
        name: str,
        *,
        node_labels: dict[str, str] | None = None,
        tolerations: list[dict[str, Any]] | None = None,
    ) -> str:
        """A ResourceFlavor (cluster-wide; kept if it exists) whose ``node_labels`` and
        ``tolerations`` Kueue writes into the pods of the workloads it admits on it."""
        spec: dict[str, Any] = {}
        if node_labels:
            spec["nodeLabels"] = dict(node_labels)
        if tolerations:
            spec["tolerations"] = list(tolerations)
        self._apply(
            f"{API}/resourceflavors", {"metadata": {"name": name}, "spec": spec}, "ResourceFlavor"
        )
        return name

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

    def _register_webhooks(self, ca_bundle: bytes) -> None:
        assert self.directory is not None

        def adjust(hook: dict[str, Any]) -> dict[str, Any] | None:
            groups = {g for r in hook["rules"] for g in r["apiGroups"]}
            if not groups <= _WEBHOOK_GROUPS:
                return None
            if groups & _JOB_GROUPS:
                hook["namespaceSelector"] = {"matchExpressions": [self._kubeflow_namespaces()]}
            return hook

        self._webhooks = addon.register_webhooks(
            self.cp,
            self.directory / "webhook.yaml",
            port=self.webhook_port,
            ca_bundle=ca_bundle,
            prefix="kueue",
            adjust=adjust,
        )

    def _kubeflow_namespaces(self) -> dict[str, Any]:
        if self.namespace_label:
            return {"key": self.namespace_label, "operator": "Exists"}
        return {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", "kueue-system"],
        }

    def _wait_ready(self) -> None:
        deadline = addon.wait_healthy(
            f"http://127.0.0.1:{self.health_port}/readyz",
            what="kueue",
            alive=self.alive,
            log_tail=self.log_tail,
        )
        # A dry-run ResourceFlavor goes through the mutating and validating webhooks.
        probe = {
            "apiVersion": f"{GROUP}/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "webhook-probe"},
        }
        addon.wait_admitted(
            self.cp, f"{API}/resourceflavors", probe, what="kueue", deadline=deadline
        )
