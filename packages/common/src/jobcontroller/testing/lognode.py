"""A kwok node whose pods have logs, for tests of clients that read or follow pod logs.

The session's kwok nodes serve no logs: the API server reaches a node's kubelet at the node's
address (10.1.0.1, nowhere). This node is played by a second kwok process that advertises
127.0.0.1 and the port its own server listens on (HTTPS, a certificate from the cluster's
CA), so ``pods/log`` goes the whole real way: client -> kube-apiserver -> the node's kubelet
API (kwok's) -> a log file. kwok serves every container of the node's pods from that file
(CRI log format, as a kubelet reads containerd's); :meth:`LogNode.write` appends to it while a
client follows, and ``previous=true`` reads the previous container's file.

The node is tainted, so only pods that :meth:`LogNode.place` puts there run on it (the session's
other tests never see it), and :meth:`LogNode.stop` deletes it and stops its kwok.
"""

from __future__ import annotations

import datetime as dt
import time
import urllib.error
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from jobcontroller.testing.binaries import find_binaries
from jobcontroller.testing.controlplane import ControlPlane, ControlPlaneError
from jobcontroller.testing.ports import free_port

__all__ = ["LogNode"]

ANNOTATION = "kwok.x-k8s.io/node"
TAINT = "jobcontroller.testing/logs"


class LogNode:
    def __init__(self, plane: ControlPlane, *, directory: Path, name: str = "kwok-logs-0") -> None:
        self.plane = plane
        self.name = name
        self.directory = directory
        self.current = directory / "current.log"
        self.previous = directory / "previous.log"
        self._component = f"kwok-{name}"

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.current.touch()
        self.previous.touch()
        cert, key = self.plane.ca.serving().write(self.directory, "kubelet")
        stages = resources.files("jobcontroller.testing").joinpath("kwok-stages.yaml").read_text()
        logs = {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "ClusterLogs",
            "metadata": {"name": "every-pod"},
            "spec": {
                "selector": {},
                "logs": [
                    {
                        "logsFile": str(self.current),
                        "previousLogsFile": str(self.previous),
                        "follow": True,
                    }
                ],
            },
        }
        config = self.directory / "kwok.yaml"
        config.write_text(f"{stages}\n---\n{yaml.safe_dump(logs)}")
        port = free_port()
        argv = [
            find_binaries()["kwok"],
            f"--kubeconfig={self.plane.kubeconfig}",
            f"--config={config}",
            "--manage-all-nodes=false",
            f"--manage-single-node={self.name}",
            "--node-lease-duration-seconds=40",
            "--cidr=10.245.0.1/16",
            "--node-ip=127.0.0.1",
            f"--node-port={port}",
            f"--server-address=127.0.0.1:{port}",
            f"--tls-cert-file={cert}",
            f"--tls-private-key-file={key}",
        ]
        self.plane.start_component(
            self._component, argv, health_url=f"http://127.0.0.1:{port}/healthz"
        )
        try:
            self.plane.request("POST", "/api/v1/nodes", self._node())
        except urllib.error.HTTPError as exc:
            if exc.code != 409:  # a node of an earlier run: kwok takes it over
                raise
        self._wait_ready()

    def _node(self) -> dict[str, Any]:
        capacity = {"cpu": "64", "memory": "256Gi", "pods": "110"}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "annotations": {ANNOTATION: "logs", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {"type": "kwok-logs", "kubernetes.io/hostname": self.name},
            },
            "spec": {"taints": [{"key": TAINT, "value": "true", "effect": "NoSchedule"}]},
            "status": {"allocatable": capacity, "capacity": capacity},
        }

    def _wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            node = self.plane.request("GET", f"/api/v1/nodes/{self.name}")
            conditions = (node.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
                return
            time.sleep(0.2)
        raise ControlPlaneError(f"{self.name} not Ready:\n{self.plane.log_tail(self._component)}")

    def place(self, template: dict[str, Any]) -> dict[str, Any]:
        """Make a pod template's pods run on this node (a node selector and a toleration)."""
        spec = template.setdefault("spec", {})
        spec["nodeSelector"] = {"kubernetes.io/hostname": self.name}
        spec.setdefault("tolerations", []).append(
            {"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}
        )
        return template

    def write(self, *lines: str, previous: bool = False, stream: str = "stdout") -> None:
        """Append lines to the log kwok serves (the current container's, or the previous)."""
        path = self.previous if previous else self.current
        with path.open("a") as out:
            for line in lines:
                now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
                out.write(f"{now} {stream} F {line}\n")

    def stop(self) -> None:
        """Delete the node (its pods at once: nothing will run them) and stop its kwok."""
        pods = self.plane.request("GET", f"/api/v1/pods?fieldSelector=spec.nodeName={self.name}")
        for pod in pods.get("items") or []:
            meta = pod["metadata"]
            path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
            try:
                self.plane.request("DELETE", path, {"gracePeriodSeconds": 0})
            except urllib.error.HTTPError as exc:
                if exc.code != 404:
                    raise
        try:
            self.plane.request("DELETE", f"/api/v1/nodes/{self.name}")
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise
        self.plane.stop_component(self._component)
