"""A real, local Kubernetes control plane for tests and the demo (an envtest in Python).

``ControlPlane`` starts etcd and kube-apiserver on free loopback ports with a PKI generated in
Python, and optionally kube-controller-manager (garbage collection, the batch Job controller,
service accounts), kube-scheduler and kwok with fake nodes whose pods are simulated by the stages
in ``kwok-stages.yaml``. It waits for each part to be ready and stops every process it started,
also when a test fails, the process is interrupted, or (through ``PR_SET_PDEATHSIG``) the Python
process is killed outright.

Choices, and why:

- etcd keeps its data on tmpfs (``/dev/shm``) with ``--unsafe-no-fsync``: test data need not
  survive a crash, and fsync on a shared disk is what makes envtest slow.
- The ServiceAccount admission plugin is disabled, as envtest does: pods here never run real
  containers, so they need no token volume, and a namespace's ``default`` ServiceAccount would
  otherwise race every test's first pod. Service accounts and tokens still work (the controller
  manager creates them; the TokenRequest API issues tokens).
- kube-controller-manager runs the default controllers, without leader election.
- Fake nodes carry the annotation ``kwok.x-k8s.io/node: fake`` and no taint, so unmodified
  job YAML schedules onto them.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from jobcontroller.testing.binaries import Binaries, find_binaries
from jobcontroller.testing.certs import CertificateAuthority, service_account_keys
from jobcontroller.testing.ports import free_port as free_port  # its old home: still importable
from jobcontroller.testing.realnode import NODE_IP, RealNode

_PR_SET_PDEATHSIG = 1
START_TIMEOUT = float(os.environ.get("JOBCONTROLLER_CONTROLPLANE_START_TIMEOUT", "90"))
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"

#: Capacity of each fake node: ample for every test and the demo.
NODE_CAPACITY = {"cpu": "64", "memory": "512Gi", "pods": "250", "nvidia.com/gpu": "8"}


class ControlPlaneError(RuntimeError):
    """A component did not start; the message ends with the tail of its log."""


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGKILL it when the process that started it dies."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _sweep_orphans() -> None:
    """Remove state left by control planes whose process was killed (SIGKILL skips cleanup).

    Directory names carry the pid of the process that made them.
    """
    for base in (Path("/dev/shm"), Path(tempfile.gettempdir())):
        for d in base.glob("jobcontroller-*-*-*"):
            try:
                pid = int(d.name.split("-")[2])
                os.kill(pid, 0)
            except ProcessLookupError:
                shutil.rmtree(d, ignore_errors=True)
            except (ValueError, IndexError, PermissionError, OSError):
                continue


@dataclass
class _Process:
    name: str
    argv: list[str]
    log: Path
    health_url: str | None
    popen: subprocess.Popen[bytes] | None = None

    def spawn(self, *, die_with_parent: bool) -> None:
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent if die_with_parent else None,
            )

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, timeout: float = 15.0) -> None:
        if self.popen is None:
            return
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self.popen = None

    def kill(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()
        self.popen = None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@dataclass
class ControlPlane:
    """etcd + kube-apiserver, and optionally the rest of a cluster with kwok's fake nodes.

    Use as a context manager (``with ControlPlane() as cp:``) or call :meth:`start` and
    :meth:`stop`. ``kubeconfig`` is an admin (system:masters) kubeconfig.
    """

    controller_manager: bool = False
    scheduler: bool = False
    kwok: bool = False
    nodes: int = 0
    extra_apiserver_args: list[str] = field(default_factory=list)
    extra_etcd_args: list[str] = field(default_factory=list)
    """E.g. a larger ``--quota-backend-bytes`` for a cluster of tens of thousands of pods."""
    workdir: Path | None = None
    """Where certificates, kubeconfig and logs go; a fresh temporary directory when None."""
    die_with_parent: bool = True
    """Kill the components when the starting process dies (off for a detached cluster)."""
    binaries: Binaries | None = None
    real_node: bool = False
    """Add one real worker node (kubelet, containerd, CNI, CoreDNS, kube-proxy): see
    ``testing/realnode.py``. Needs root and ``hack/build-node.sh``'s binaries."""
    node_images: list[Path] = field(default_factory=list)
    """OCI archives the real node's containerd imports (``testing/images.py``)."""

    def __post_init__(self) -> None:
        self.node: RealNode | None = None
        self._procs: dict[str, _Process] = {}
        self._owns_workdir = self.workdir is None
        self._etcd_dir: Path | None = None
        self.apiserver_port = 0
        self.etcd_port = 0
        self._started = False

    # ----------------------------------------------------------------------------- lifecycle

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def kubeconfig(self) -> Path:
        return self._dir / "kubeconfig"

    @property
    def logs(self) -> Path:
        return self._dir / "logs"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    def start(self) -> None:
        """Start every component and wait until each is ready."""
        if self._started:
            return
        self.binaries = self.binaries or find_binaries()
        if self.workdir is None:
            _sweep_orphans()
            self.workdir = Path(tempfile.mkdtemp(prefix=f"jobcontroller-cp-{os.getpid()}-"))
        self._dir = self.workdir
        self._dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        self._started = True
        atexit.register(self.stop)
        try:
            if self.real_node:
                self.node = RealNode(self, images=list(self.node_images))
                self.node.prepare()
            self._write_pki()
            self._start_etcd()
            self._start_apiserver()
            if self.controller_manager:
                self.start_component("kube-controller-manager", self._kcm_argv())
            if self.scheduler:
                self.start_component("kube-scheduler", self._scheduler_argv())
            if self.kwok:
                self._start_kwok()
            if self.nodes:
                self.add_nodes(self.nodes)
            if self.node is not None:
                self.node.start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every process (last started first) and remove all state."""
        if not self._started:
            return
        self._started = False
        for proc in reversed(list(self._procs.values())):
            proc.stop()
        self._procs.clear()
        if self.node is not None:
            self.node.stop()
        if self._etcd_dir is not None:
            shutil.rmtree(self._etcd_dir, ignore_errors=True)
        if self._owns_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)

    def pids(self) -> dict[str, int]:
        return {n: p.popen.pid for n, p in self._procs.items() if p.popen is not None}

    def log_tail(self, name: str, lines: int = 30) -> str:
        """The last ``lines`` of component ``name``'s log; empty when no such component ran."""
        proc = self._procs.get(name)
        return proc.log_tail(lines) if proc is not None else ""

    # ------------------------------------------------------------------------------- PKI

    def _write_pki(self) -> None:
        d = self._dir / "pki"
        d.mkdir(exist_ok=True)
        ca = CertificateAuthority()
        self.ca_file, _ = ca.pair.write(d, "ca")
        self.ca_key_file = d / "ca.key"
        ips = [NODE_IP] if self.real_node else []
        self.serving_cert, self.serving_key = ca.serving(ips=ips).write(d, "apiserver")
        self.admin_cert, self.admin_key = ca.client(user="admin", groups=["system:masters"]).write(
            d, "admin"
        )
        sa_private, sa_public = service_account_keys()
        self.sa_key = d / "sa.key"
        self.sa_key.write_bytes(sa_private)
        self.sa_pub = d / "sa.pub"
        self.sa_pub.write_bytes(sa_public)
        self.ca = ca
        """The cluster's certificate authority: serving and client certificates it trusts."""

    def user_kubeconfig(self, *, user: str, groups: list[str] | None = None) -> Path:
        """A kubeconfig authenticating as ``user`` (client certificate) in ``groups``."""
        pair = self.ca.client(user=user, groups=groups)
        path = self._dir / f"kubeconfig-{user.replace(':', '_')}"
        path.write_text(self.kubeconfig_text(pair.cert, pair.key, user=user))
        return path

    def kubeconfig_text(self, cert: bytes, key: bytes, *, user: str) -> str:
        """A kubeconfig for this API server authenticating with ``cert`` and ``key``."""

        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode()

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": b64(self.ca_file.read_bytes()),
                    },
                }
            ],
            "users": [
                {
                    "name": user,
                    "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)},
                }
            ],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
            "current-context": "local",
        }
        return yaml.safe_dump(config)

    # ---------------------------------------------------------------------------- etcd

    def _start_etcd(self) -> None:
        shm = Path("/dev/shm")
        base = shm if shm.is_dir() and os.access(shm, os.W_OK) else self._dir
        self._etcd_dir = Path(
            tempfile.mkdtemp(prefix=f"jobcontroller-etcd-{os.getpid()}-", dir=base)
        )
        self.etcd_port, peer = free_port(), free_port()
        assert self.binaries is not None
        argv = [
            self.binaries["etcd"],
            f"--data-dir={self._etcd_dir}",
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=default=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
            *self.extra_etcd_args,
        ]
        self.start_component("etcd", argv, health_url=f"{self.etcd_url}/health")

    def compact_etcd(self) -> int:
        """Compact etcd to its current revision, so older resourceVersions answer 410 Gone."""
        header = self._etcd_call("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})
        revision = int(header["header"]["revision"])
        self._etcd_call("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    def _etcd_call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(
            self.etcd_url + path, data=json.dumps(body).encode(), method="POST"
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            result: dict[str, Any] = json.loads(resp.read())
            return result

    # ------------------------------------------------------------------------ apiserver

    def _apiserver_argv(self) -> list[str]:
        assert self.binaries is not None
        if self.real_node:
            return self._real_node_apiserver_argv()
        return [
            self.binaries["kube-apiserver"],
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.apiserver_port}",
            f"--cert-dir={self._dir / 'pki'}",
            f"--tls-cert-file={self.serving_cert}",
            f"--tls-private-key-file={self.serving_key}",
            f"--client-ca-file={self.ca_file}",
            "--authorization-mode=RBAC",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            "--endpoint-reconciler-type=none",
            "--disable-admission-plugins=ServiceAccount",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self.sa_pub}",
            f"--service-account-signing-key-file={self.sa_key}",
            "--profiling=false",
            *self.extra_apiserver_args,
        ]

    def _real_node_apiserver_argv(self) -> list[str]:
        """With a real node: reachable from pods (bound to all addresses, the ``kubernetes``
        Service's endpoint is the node's bridge address), tokens mounted into pods (the
        ServiceAccount admission plugin), kubelets under the Node authorizer, and a client
        certificate for the apiserver's calls to the kubelet (logs, exec)."""
        d = self._dir / "pki"
        cert, key = self.ca.client(
            user="kube-apiserver-kubelet-client", groups=["system:masters"]
        ).write(d, "apiserver-kubelet-client")
        return [
            self.binaries["kube-apiserver"],  # type: ignore[index]
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=0.0.0.0",
            f"--advertise-address={NODE_IP}",
            f"--secure-port={self.apiserver_port}",
            f"--cert-dir={d}",
            f"--tls-cert-file={self.serving_cert}",
            f"--tls-private-key-file={self.serving_key}",
            f"--client-ca-file={self.ca_file}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            "--endpoint-reconciler-type=lease",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self.sa_pub}",
            f"--service-account-signing-key-file={self.sa_key}",
            f"--kubelet-client-certificate={cert}",
            f"--kubelet-client-key={key}",
            "--kubelet-preferred-address-types=InternalIP",
            "--profiling=false",
            *self.extra_apiserver_args,
        ]

    def _start_apiserver(self) -> None:
        self.apiserver_port = self.apiserver_port or free_port()
        self.start_component(
            "kube-apiserver", self._apiserver_argv(), health_url=f"{self.server}/readyz"
        )
        self.kubeconfig.write_text(
            self.kubeconfig_text(
                self.admin_cert.read_bytes(), self.admin_key.read_bytes(), user="admin"
            )
        )

    def stop_apiserver(self) -> None:
        """Stop kube-apiserver only (for tests of clients that must survive its restarts)."""
        self._procs["kube-apiserver"].stop()

    def start_apiserver(self) -> None:
        """Start kube-apiserver again on the same port and wait until it is ready."""
        proc = self._procs["kube-apiserver"]
        proc.spawn(die_with_parent=self.die_with_parent)
        self._wait_ready(proc)

    def restart_apiserver(self) -> None:
        self.stop_apiserver()
        self.start_apiserver()

    # ----------------------------------------------------------------- other components

    def _kcm_argv(self) -> list[str]:
        assert self.binaries is not None
        kc = str(self.kubeconfig)
        return [
            self.binaries["kube-controller-manager"],
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--leader-elect=false",
            f"--service-account-private-key-file={self.sa_key}",
            f"--root-ca-file={self.ca_file}",
            "--use-service-account-credentials=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            "--cluster-name=local",
        ]

    def _scheduler_argv(self) -> list[str]:
        assert self.binaries is not None
        kc = str(self.kubeconfig)
        return [
            self.binaries["kube-scheduler"],
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
        ]

    def _start_kwok(self) -> None:
        assert self.binaries is not None
        stages = self._dir / "kwok-stages.yaml"
        stages.write_text(
            resources.files("jobcontroller.testing").joinpath("kwok-stages.yaml").read_text()
        )
        port = free_port()
        argv = [
            self.binaries["kwok"],
            f"--kubeconfig={self.kubeconfig}",
            f"--config={stages}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}=fake",
            "--node-lease-duration-seconds=40",
            "--cidr=10.244.0.1/16",
            "--node-ip=10.1.0.1",
            f"--server-address=127.0.0.1:{port}",
        ]
        self.start_component("kwok", argv, health_url=f"http://127.0.0.1:{port}/healthz")

    def start_component(self, name: str, argv: list[str], health_url: str | None = None) -> None:
        """Start a process that stops with the plane and wait until ``health_url`` (default:
        its ``--secure-port``'s /healthz) answers; its log goes to ``logs/<name>.log``."""
        if health_url is None:
            port = next((a.split("=", 1)[1] for a in argv if a.startswith("--secure-port=")), None)
            health_url = f"https://127.0.0.1:{port}/healthz" if port else None
        proc = _Process(name=name, argv=argv, log=self.logs / f"{name}.log", health_url=health_url)
        self._procs[name] = proc
        proc.spawn(die_with_parent=self.die_with_parent)
        self._wait_ready(proc)

    def stop_component(self, name: str) -> None:
        """Stop a component started with :meth:`start_component` (SIGTERM, then SIGKILL)."""
        proc = self._procs.pop(name, None)
        if proc is not None:
            proc.stop()

    def _wait_ready(self, proc: _Process) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        delay = 0.05
        while True:
            if not proc.alive():
                raise ControlPlaneError(f"{proc.name} exited during start:\n{proc.log_tail()}")
            if proc.health_url is None or self._healthy(proc.health_url):
                return
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"{proc.name} not ready after {START_TIMEOUT:.0f}s:\n{proc.log_tail()}"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def _ssl(self, *, verify: bool = True) -> ssl.SSLContext:
        if not verify:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            return ctx
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        ctx.load_cert_chain(str(self.admin_cert), str(self.admin_key))
        return ctx

    def _healthy(self, url: str) -> bool:
        ours = url.startswith(self.server) if self.apiserver_port else False
        ctx = self._ssl(verify=ours) if url.startswith("https") else None
        try:
            with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError, ssl.SSLError):
            return False

    # ---------------------------------------------------------------------- admin calls

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """A blocking admin call to the apiserver (bootstrap only; tests use the async client)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=30, context=self._ssl()) as resp:
            return json.loads(resp.read() or b"null")

    def add_nodes(self, count: int, *, prefix: str = "kwok-node-") -> list[str]:
        """Create ``count`` fake nodes managed by kwok and wait until they are Ready."""
        existing = {n["metadata"]["name"] for n in self.request("GET", "/api/v1/nodes")["items"]}
        names: list[str] = []
        i = 0
        while len(names) < count:
            name = f"{prefix}{i}"
            i += 1
            if name in existing:
                continue
            self.request("POST", "/api/v1/nodes", _fake_node(name))
            names.append(name)
        if self.kwok:
            self._wait_nodes_ready(names)
        return names

    def _wait_nodes_ready(self, names: list[str]) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            items = self.request("GET", "/api/v1/nodes")["items"]
            ready = {
                n["metadata"]["name"]
                for n in items
                if any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in ((n.get("status") or {}).get("conditions") or [])
                )
            }
            if ready.issuperset(names):
                return
            time.sleep(0.2)
        raise ControlPlaneError(f"fake nodes not Ready in time:\n{self._procs['kwok'].log_tail()}")

    def describe(self) -> Iterator[str]:
        yield f"apiserver {self.server}"
        for name, pid in self.pids().items():
            yield f"{name:<24} pid {pid}"


def _fake_node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {FAKE_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        "status": {"allocatable": dict(NODE_CAPACITY), "capacity": dict(NODE_CAPACITY)},
    }
