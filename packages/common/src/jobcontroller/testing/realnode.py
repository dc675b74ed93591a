"""One real worker node beside kwok's simulated ones: kubelet, containerd, CNI, CoreDNS, kube-proxy.

``ControlPlane(real_node=True)`` starts it after the control plane. The parts:

* a Linux bridge ``jcbr0`` with the node's address ``10.88.0.1/16``, made before anything else
  so that the API server, CoreDNS and the kubelet can bind to it; pods get addresses from the
  same /16 through Debian's CNI plugins (bridge + host-local, masquerade for the way out);
* containerd (Debian's package) with a configuration, root, state and socket of its own under
  the cluster's directory, runc as its runtime, the cgroupfs driver (the host has cgroup v1),
  and the images of ``testing/images.py`` imported before the kubelet starts (nothing is
  pulled: no registry can be reached);
* CoreDNS on ``10.88.0.1:53`` with its ``kubernetes`` plugin, so that headless Services and
  ``<hostname>.<subdomain>`` pod names resolve as in any cluster (the kubelet's ``clusterDNS``);
* kube-proxy in iptables mode, so that the ``kubernetes`` Service's ClusterIP reaches the API
  server (operators running as pods use the in-cluster configuration);
* the kubelet (``failCgroupV1: false``), authenticated as ``system:node:<name>`` under the Node
  authorizer, with the label ``jobcontroller.dev/real-node=true`` and the taint
  ``jobcontroller.dev/real-node=true:NoSchedule``: only pods that select and tolerate it land
  here, everything else keeps going to kwok's nodes.

One real node per machine at a time (the bridge, port 53 and the kubelet's port 10250 are the
host's): a second one fails at start with a message naming the first one's directory. Stopping
deletes every container (runc), network namespace, mount, iptables rule and directory it made.
Needs root.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from jobcontroller.testing.certs import CertificateAuthority
from jobcontroller.testing.ports import free_port

__all__ = [
    "BRIDGE",
    "NODE_IP",
    "POD_CIDR",
    "REAL_NODE_LABEL",
    "Plane",
    "RealNode",
    "RealNodeError",
    "find_node_binaries",
    "on_real_node",
]

BRIDGE = "jcbr0"
NODE_IP = "10.88.0.1"
POD_CIDR = "10.88.0.0/16"
REAL_NODE_LABEL = "jobcontroller.dev/real-node"
_LOCK = Path("/run/jobcontroller-real-node.lock")
_RUNC_ROOT = "/run/containerd/runc/k8s.io"
NODE_BINARIES = ("kubelet", "kube-proxy", "coredns", "pause")


class RealNodeError(RuntimeError):
    """The real node could not start; the message says which part and why."""


def find_node_binaries() -> Path:
    """The directory of kubelet, kube-proxy, coredns and pause (``hack/build-node.sh``)."""
    explicit = os.environ.get("JOBCONTROLLER_NODE_BIN")
    if explicit:
        return Path(explicit)
    cache = Path(os.environ.get("JOBCONTROLLER_CACHE", Path.home() / ".cache" / "jobcontroller"))
    found = sorted(
        (
            d
            for d in (cache / "bin").glob("node-*")
            if all(os.access(d / b, os.X_OK) for b in NODE_BINARIES)
        ),
        key=lambda d: d.stat().st_mtime,
    )
    if not found:
        raise RealNodeError(
            f"no node binaries under {cache / 'bin'}: run hack/build-node.sh (make conformance "
            "and make cluster-up REAL_NODE=1 do)"
        )
    return found[-1]


def on_real_node(pod_spec: dict[str, Any]) -> dict[str, Any]:
    """``pod_spec`` with the node selector and toleration that put a pod on the real node."""
    spec = dict(pod_spec)
    spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), REAL_NODE_LABEL: "true"}
    spec["tolerations"] = [
        *(spec.get("tolerations") or []),
        {"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"},
    ]
    return spec


def _run(*argv: str, check: bool = True, quiet: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv),
        check=check,
        text=True,
        stdout=subprocess.PIPE if quiet else None,
        stderr=subprocess.PIPE if quiet else None,
    )


class Plane(Protocol):
    """What a real node needs of the control plane it joins (``ControlPlane`` is one)."""

    @property
    def workdir(self) -> Path | None: ...

    @property
    def ca(self) -> CertificateAuthority: ...

    @property
    def ca_file(self) -> Path: ...

    def kubeconfig_text(self, cert: bytes, key: bytes, *, user: str) -> str: ...

    def start_component(
        self, name: str, argv: list[str], health_url: str | None = None
    ) -> None: ...

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any: ...

    def log_tail(self, name: str, lines: int = 30) -> str: ...


@dataclass
class RealNode:
    plane: Plane
    name: str = "real-node-0"
    images: list[Path] = field(default_factory=list)
    """OCI archives imported into containerd before the kubelet starts."""

    def __post_init__(self) -> None:
        self.bin = find_node_binaries()
        self._lock_fd: int | None = None
        self._started = False

    @property
    def dir(self) -> Path:
        assert self.plane.workdir is not None
        return self.plane.workdir / "node"

    @property
    def socket(self) -> Path:
        return self.dir / "containerd.sock"

    # ------------------------------------------------------------------------ network first

    def prepare(self) -> None:
        """Take the machine-wide lock and make the bridge (before the API server starts)."""
        if os.geteuid() != 0:
            raise RealNodeError("a real node needs root (kubelet, containerd, CNI)")
        for tool in ("containerd", "ctr", "runc", "iptables", "ip"):
            if shutil.which(tool) is None:
                raise RealNodeError(f"{tool} is missing: run hack/build-node.sh (it installs it)")
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = Path(_LOCK).read_text().strip()
            os.close(fd)
            raise RealNodeError(
                f"another real node is running on this machine ({holder}); stop it first"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(self.dir).encode())
        self._lock_fd = fd
        self._started = True
        # What a node killed outright left behind (the lock was free, so nothing uses it).
        self._clean_host()
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
        _run("ip", "addr", "add", f"{NODE_IP}/16", "dev", BRIDGE)
        _run("ip", "link", "set", BRIDGE, "up")
        Path("/proc/sys/net/ipv4/ip_forward").write_text("1")

    # ------------------------------------------------------------------------------ start

    def start(self) -> None:
        self._write_configs()
        self._start_containerd()
        self._import_images()
        self._start(
            "coredns",
            [str(self.bin / "coredns"), "-conf", str(self.dir / "Corefile")],
            health_url=f"http://127.0.0.1:{self._port('coredns-health')}/health",
        )
        self._start(
            "kube-proxy",
            [
                str(self.bin / "kube-proxy"),
                f"--config={self.dir / 'kube-proxy.yaml'}",
                f"--hostname-override={self.name}",
                "--v=1",
            ],
        )
        self._start(
            "kubelet",
            [
                str(self.bin / "kubelet"),
                f"--config={self.dir / 'kubelet.yaml'}",
                f"--kubeconfig={self.dir / 'kubelet.kubeconfig'}",
                f"--root-dir={self.dir / 'kubelet'}",
                f"--hostname-override={self.name}",
                f"--node-ip={NODE_IP}",
                f"--node-labels={REAL_NODE_LABEL}=true,type=real",
                "--v=1",
            ],
            health_url=f"http://127.0.0.1:{self._port('kubelet-health')}/healthz",
        )
        self._wait_ready()

    def _start(self, name: str, argv: list[str], health_url: str | None = None) -> None:
        self.plane.start_component(name, argv, health_url=health_url)

    def _write_configs(self) -> None:
        d = self.dir
        ca = self.plane.ca
        pki = d / "pki"
        pki.mkdir(parents=True, exist_ok=True)
        self.kubelet_cert, self.kubelet_key = ca.serving(hosts=[self.name], ips=[NODE_IP]).write(
            pki, "kubelet"
        )
        for user, groups, fname in (
            (f"system:node:{self.name}", ["system:nodes"], "kubelet.kubeconfig"),
            ("system:kube-proxy", ["system:node-proxier"], "kube-proxy.kubeconfig"),
            ("system:coredns", ["system:masters"], "coredns.kubeconfig"),
        ):
            pair = ca.client(user=user, groups=groups)
            (d / fname).write_text(self.plane.kubeconfig_text(pair.cert, pair.key, user=user))
        # containerd: everything of its own under d; no plugin we do not use.
        (d / "cni" / "net.d").mkdir(parents=True, exist_ok=True)
        (d / "containerd.toml").write_text(
            f"""version = 2
root = "{d / "containerd" / "root"}"
state = "{d / "containerd" / "state"}"
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
]
[grpc]
  address = "{self.socket}"
[ttrpc]
  address = "{self.socket}.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # This machine drops CAP_SYS_RESOURCE, so no process may lower its OOM score below ours
  # (the kubelet asks -998 for sandboxes): keep scores at or above containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{d / "cni" / "net.d"}"
"""
        )
        (d / "cni" / "net.d" / "10-jobcontroller.conflist").write_text(
            json.dumps(
                {
                    "cniVersion": "1.0.0",
                    "name": "jobcontroller",
                    "plugins": [
                        {
                            "type": "bridge",
                            "bridge": BRIDGE,
                            "isGateway": True,
                            "ipMasq": True,
                            "hairpinMode": True,
                            "ipam": {
                                "type": "host-local",
                                "ranges": [[{"subnet": POD_CIDR, "gateway": NODE_IP}]],
                                "routes": [{"dst": "0.0.0.0/0"}],
                                "dataDir": str(d / "cni" / "ipam"),
                            },
                        },
                        {"type": "portmap", "capabilities": {"portMappings": True}},
                    ],
                },
                indent=1,
            )
        )
        (d / "Corefile").write_text(
            f""".:53 {{
    bind {NODE_IP}
    errors
    health 127.0.0.1:{self._port("coredns-health")}
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {d / "coredns.kubeconfig"}
        pods insecure
        ttl 5
    }}
    cache 5
}}
"""
        )
        (d / "resolv.conf").write_text("nameserver 127.0.0.1\n")
        (d / "kube-proxy.yaml").write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
                    "kind": "KubeProxyConfiguration",
                    "clientConnection": {"kubeconfig": str(d / "kube-proxy.kubeconfig")},
                    "mode": "iptables",
                    "clusterCIDR": POD_CIDR,
                    "bindAddress": "127.0.0.1",
                    "healthzBindAddress": f"127.0.0.1:{self._port('kube-proxy-health')}",
                    "metricsBindAddress": f"127.0.0.1:{self._port('kube-proxy-metrics')}",
                    # Leave the host's conntrack sysctls alone.
                    "conntrack": {"maxPerCore": 0, "min": 0},
                }
            )
        )
        (d / "kubelet.yaml").write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kubelet.config.k8s.io/v1beta1",
                    "kind": "KubeletConfiguration",
                    # The host has cgroup v1, which 1.35+ refuses unless told otherwise.
                    "failCgroupV1": False,
                    "cgroupDriver": "cgroupfs",
                    "containerRuntimeEndpoint": f"unix://{self.socket}",
                    "address": NODE_IP,
                    "port": 10250,
                    "readOnlyPort": 0,
                    "healthzBindAddress": "127.0.0.1",
                    "healthzPort": self._port("kubelet-health"),
                    "tlsCertFile": str(self.kubelet_cert),
                    "tlsPrivateKeyFile": str(self.kubelet_key),
                    "authentication": {
                        "anonymous": {"enabled": False},
                        "webhook": {"enabled": False},
                        "x509": {"clientCAFile": str(self.plane.ca_file)},
                    },
                    "authorization": {"mode": "AlwaysAllow"},
                    "clusterDNS": [NODE_IP],
                    "clusterDomain": "cluster.local",
                    "resolvConf": str(d / "resolv.conf"),
                    "failSwapOn": False,
                    # Images here cannot be pulled again: never collect them.
                    "imageGCHighThresholdPercent": 100,
                    "imageGCLowThresholdPercent": 99,
                    "evictionHard": {
                        "memory.available": "100Mi",
                        "nodefs.available": "1%",
                        "imagefs.available": "1%",
                    },
                    "serializeImagePulls": False,
                    "podLogsDir": str(d / "pod-logs"),
                    "registerWithTaints": [
                        {"key": REAL_NODE_LABEL, "value": "true", "effect": "NoSchedule"}
                    ],
                    "maxPods": 110,
                    "shutdownGracePeriod": "0s",
                }
            )
        )

    def _port(self, name: str) -> int:
        ports: dict[str, int] = self.__dict__.setdefault("_ports", {})
        if name not in ports:
            ports[name] = free_port()
        return ports[name]

    def _start_containerd(self) -> None:
        self._start("containerd", ["containerd", f"--config={self.dir / 'containerd.toml'}"])
        deadline = time.monotonic() + 30
        while self._ctr("version", check=False, quiet=True).returncode != 0:
            if time.monotonic() > deadline:
                raise RealNodeError("containerd did not answer within 30 s")
            time.sleep(0.2)

    def _ctr(self, *args: str, check: bool = True, quiet: bool = False) -> Any:
        return _run(
            "ctr", f"--address={self.socket}", "--namespace=k8s.io", *args, check=check, quiet=quiet
        )

    def _import_images(self) -> None:
        for archive in self.images:
            started = time.monotonic()
            self._ctr("images", "import", "--no-unpack=false", str(archive), quiet=True)
            print(
                f"[real-node] imported {archive.name} in {time.monotonic() - started:.1f}s",
                flush=True,
            )

    def _wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        node: dict[str, Any] = {}
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                node = self.plane.request("GET", f"/api/v1/nodes/{self.name}")
                conds = (node.get("status") or {}).get("conditions") or []
                if any(c["type"] == "Ready" and c["status"] == "True" for c in conds):
                    return
            time.sleep(0.5)
        tail = self.plane.log_tail("kubelet", 40)
        raise RealNodeError(
            f"node {self.name} not Ready after {timeout:.0f}s; conditions: "
            f"{json.dumps((node.get('status') or {}).get('conditions'), indent=1)}\n{tail}"
        )

    # ------------------------------------------------------------------------------ stop

    def stop(self) -> None:
        """Delete what the node made (the plane stops its processes first)."""
        if not self._started:
            return
        self._started = False
        try:
            self._clean_host()
        finally:
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    def _clean_host(self) -> None:
        # Containers first: a killed shim leaves its container's processes running.
        listed = _run("runc", f"--root={_RUNC_ROOT}", "list", "-q", check=False, quiet=True)
        for cid in (listed.stdout or "").split():
            _run("runc", f"--root={_RUNC_ROOT}", "delete", "--force", cid, check=False, quiet=True)
        _run("pkill", "-KILL", "-f", "containerd-shim-runc-v2 -namespace k8s.io", check=False)
        # Mounts under the node's directories, deepest first, and the pods' network namespaces.
        mounts = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4]
            if point.startswith((f"{self.dir}/", "/run/netns/cni-")):
                mounts.append(point)
        for point in sorted(mounts, key=len, reverse=True):
            _run("umount", "-l", point, check=False, quiet=True)
        for ns in Path("/run/netns").glob("cni-*") if Path("/run/netns").is_dir() else ():
            with contextlib.suppress(OSError):
                ns.unlink()
        _run("ip", "link", "del", BRIDGE, check=False, quiet=True)
        self._clean_iptables()

    @staticmethod
    def _clean_iptables() -> None:
        """Drop the rules and chains kube-proxy and the CNI plugins added (KUBE-*, CNI-*)."""
        for table in ("nat", "filter", "mangle"):
            saved = _run("iptables-save", "-t", table, check=False, quiet=True).stdout or ""
            kept = [
                line for line in saved.splitlines() if "KUBE-" not in line and "CNI-" not in line
            ]
            if len(kept) != len(saved.splitlines()):
                subprocess.run(
                    ["iptables-restore"],
                    input="\n".join(kept) + "\n",
                    text=True,
                    check=False,
                    capture_output=True,
                )
