"""The JobSet controller on the local cluster: its manager as a process, its CRD, its webhooks.

The controller (the root package of module ``sigs.k8s.io/jobset``) is built by
``hack/build-jobset.sh`` into ``~/.cache/jobcontroller/bin/jobset-<version>/``, next to the
module's CRD (``crd/``) and webhook manifests (``webhook.yaml``). :class:`JobSetController` runs
it out of the cluster (kwok's nodes cannot run it) against a :class:`ControlPlane`, with the
batch Job controller of the plane's kube-controller-manager running the Jobs it creates, on
kwok's simulated pods or, in the conformance suite, on the real node:

- a Configuration (``<workdir>/config.yaml``): no leader election, no internal certificate
  management (it would write the certificate into a Secret and patch webhook configurations
  naming a Service that does not exist here), the webhook server, the health probes and the
  metrics server on free loopback ports;
- the webhook server and the metrics server use a serving certificate for ``127.0.0.1`` from a
  CA of the test kit (``testing/certs.py``); the API server calls the webhooks through
  configurations that name them by ``url``, with that CA as ``caBundle``. The pod webhooks get
  the ``objectSelector`` that upstream's kustomize patches give them
  (``config/components/webhook/patches``), so only JobSet's pods go through them;
- start is ready when ``/readyz`` answers (JobSet's check waits for its webhook server) and a
  dry-run JobSet passes both JobSet webhooks.

Its metrics (``jobset_completed_total``, ``jobset_failed_total``) are served over HTTPS behind
the API server's authentication and authorization, as in a real cluster: :meth:`metrics` reads
them with a token of a ServiceAccount allowed ``get`` on ``/metrics``.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from typing_extensions import override

from jobcontroller.runtime.kube import Resource
from jobcontroller.testing import addon
from jobcontroller.testing.certs import CertificateAuthority
from jobcontroller.testing.controlplane import ControlPlane, _die_with_parent
from jobcontroller.testing.ports import free_port

__all__ = [
    "ENV_VAR",
    "JOBSETS",
    "JOBSET_NAME_LABEL",
    "JobSetController",
    "JobSetNotFound",
    "find_jobset",
]

ENV_VAR = "JOBCONTROLLER_JOBSET_BIN"
GROUP = "jobset.x-k8s.io"
VERSION = "v1alpha2"
API = f"/apis/{GROUP}/{VERSION}"
JOBSETS = Resource(GROUP, VERSION, "JobSet", "jobsets")
#: The label JobSet puts on its Jobs and pods (and upstream's pod webhooks select on).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
#: Where the metrics reader's ServiceAccount lives (created on first :meth:`metrics` call).
SYSTEM_NAMESPACE = "jobset-system"
_METRICS_READER = "jobset-metrics-reader"


class JobSetNotFound(addon.BuildNotFound):
    """JobSet is not built yet."""


def find_jobset() -> Path:
    """The directory of ``hack/build-jobset.sh``'s build: ``$JOBCONTROLLER_JOBSET_BIN``, else
    the newest complete ``jobset-*`` in the cache, else built now from the checkout."""
    try:
        return addon.find_build(binary="jobset", env_var=ENV_VAR, script="build-jobset.sh")
    except addon.BuildNotFound as exc:
        raise JobSetNotFound(str(exc)) from None


@dataclass
class JobSetController(addon.AddonProcess):
    """JobSet's manager running against ``cp``; :meth:`start`, :meth:`stop`, or ``with``."""

    cp: ControlPlane
    directory: Path | None = None
    """The build (``find_jobset()`` when None)."""
    feature_gates: dict[str, bool] = field(default_factory=dict)
    """JobSet's feature gates (``InPlaceRestart``, ``RestartJob``, ``ElasticJobSet``...)."""
    die_with_parent: bool = True

    def __post_init__(self) -> None:
        self.popen: subprocess.Popen[bytes] | None = None
        self.webhook_port = 0
        self.health_port = 0
        self.metrics_port = 0
        self.workdir: Path | None = None
        self.ready_seconds = 0.0
        """From the process's start to ready (webhooks reachable through the API server)."""
        self._webhooks: list[addon.Registered] = []
        self._ca: CertificateAuthority | None = None
        self._token: str | None = None

    @property
    def version(self) -> str:
        return self.directory.name.removeprefix("jobset-") if self.directory else "?"

    @property
    @override
    def log(self) -> Path:
        return self.cp.logs / "jobset.log"

    # ----------------------------------------------------------------------------- lifecycle

    @override
    def start(self) -> None:
        """Install the CRD, start the manager, register its webhooks, wait until ready."""
        self.directory = self.directory or find_jobset()
        self.workdir = Path(tempfile.mkdtemp(prefix="jobset-", dir=self.cp.logs.parent))
        self.webhook_port, self.health_port, self.metrics_port = (
            free_port(),
            free_port(),
            free_port(),
        )
        self._ca = CertificateAuthority("jobcontroller-jobset-webhook-ca")
        certs = self.workdir / "certs"
        certs.mkdir()
        self._ca.serving().write(certs, "tls")
        addon.install_crds(self.cp, sorted((self.directory / "crd").glob("*.yaml")))
        config = self.workdir / "config.yaml"
        config.write_text(yaml.safe_dump(self._configuration(certs)))
        argv = [
            str(self.directory / "jobset"),
            f"--config={config}",
            f"--kubeconfig={self.cp.kubeconfig}",
            "--zap-devel=false",
            "--zap-log-level=2",
        ]
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        started = time.monotonic()
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
            self._webhooks = addon.register_webhooks(
                self.cp,
                self.directory / "webhook.yaml",
                port=self.webhook_port,
                ca_bundle=self._ca.pair.cert,
                prefix="jobset",
                adjust=_only_jobset_pods,
            )
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.ready_seconds = time.monotonic() - started

    def describe(self) -> list[str]:
        return [
            f"jobset v{self.version}: pid {self.popen.pid if self.popen else '-'}, webhooks "
            f"https://127.0.0.1:{self.webhook_port}, metrics "
            f"https://127.0.0.1:{self.metrics_port}/metrics, log {self.log}",
        ]

    # ------------------------------------------------------------------------------ metrics

    def metrics(self) -> str:
        """The controller's Prometheus metrics, read as a scraper would: HTTPS (verified against
        the test kit's CA), with a bearer token the controller checks with the API server."""
        assert self._ca is not None, "not started"
        token = self._token or self._metrics_token()
        self._token = token
        ctx = ssl.create_default_context()
        ctx.load_verify_locations(cadata=self._ca.pair.cert.decode())
        req = urllib.request.Request(f"https://127.0.0.1:{self.metrics_port}/metrics")
        req.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
            return str(resp.read().decode())

    def _metrics_token(self) -> str:
        addon.ensure_namespace(self.cp, SYSTEM_NAMESPACE)
        sa = {"metadata": {"name": _METRICS_READER, "namespace": SYSTEM_NAMESPACE}}
        rbac = "/apis/rbac.authorization.k8s.io/v1"
        role = {
            "metadata": {"name": _METRICS_READER},
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        }
        binding = {
            "metadata": {"name": _METRICS_READER},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": _METRICS_READER,
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": _METRICS_READER, "namespace": SYSTEM_NAMESPACE}
            ],
        }
        for path, body in (
            (f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/serviceaccounts", sa),
            (f"{rbac}/clusterroles", role),
            (f"{rbac}/clusterrolebindings", binding),
        ):
            try:
                self.cp.request("POST", path, body)
            except urllib.error.HTTPError as exc:
                if exc.code != 409:
                    raise
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
        path = f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/serviceaccounts/{_METRICS_READER}/token"
        return str(self.cp.request("POST", path, request)["status"]["token"])

    # ------------------------------------------------------------------------------ setup

    def _configuration(self, certs: Path) -> dict[str, Any]:
        return {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "webhook": {"port": self.webhook_port, "host": "127.0.0.1", "certDir": str(certs)},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{self.metrics_port}", "certDir": str(certs)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            **({"featureGates": dict(self.feature_gates)} if self.feature_gates else {}),
        }

    def _wait_ready(self) -> None:
        deadline = addon.wait_healthy(
            f"http://127.0.0.1:{self.health_port}/readyz",
            what="jobset",
            alive=self.alive,
            log_tail=self.log_tail,
        )
        # A dry-run JobSet goes through the mutating and validating webhooks (a namespace that
        # always exists; a dry run stores nothing).
        probe = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "JobSet",
            "metadata": {"name": "webhook-probe", "namespace": "default"},
            "spec": {"replicatedJobs": []},
        }
        addon.wait_admitted(
            self.cp,
            f"{API}/namespaces/default/jobsets",
            probe,
            what="jobset",
            deadline=deadline,
        )


def _only_jobset_pods(hook: dict[str, Any]) -> dict[str, Any]:
    """Upstream's kustomize patches limit the pod webhooks to JobSet's pods; so do we (without
    it every pod of the cluster would go through JobSet, failing when it is down)."""
    if any("pods" in r.get("resources", []) for r in hook["rules"]):
        hook["objectSelector"] = {
            "matchExpressions": [{"key": JOBSET_NAME_LABEL, "operator": "Exists"}]
        }
    return hook
