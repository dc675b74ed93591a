"""Footprint of each operator process: idle RSS and CPU from start to ready.

Starts a control plane with the CRDs, then each operator console script in turn (the six
per-framework ones and the all-in-one ``training-operator``) as its Deployment runs it, waits
until ``/readyz`` answers 200 (caches synced, Lease held), lets it idle for IDLE seconds and
prints its RSS (from /proc) and the CPU it used, with the time from exec to ready. The Go
training-operator v1.9 idles at about 45 MB with all its kinds in one process.

    uv run python bench/bench_footprint.py [IDLE]
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.controlplane import ControlPlane
from jobcontroller.testing.operator import install_crds
from jobcontroller.testing.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = (
    "tf-operator",
    "pytorch-operator",
    "mpi-operator",
    "xgboost-operator",
    "paddle-operator",
    "jax-operator",
    "training-operator",
)


def _proc_stats(pid: int) -> tuple[float, float]:
    """(RSS MiB, CPU seconds) of a live process."""
    rss_kb = next(
        int(line.split()[1])
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if line.startswith("VmRSS:")
    )
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return rss_kb / 1024, (int(fields[11]) + int(fields[12])) / ticks


def measure(script: str, kubeconfig: Path, idle: float) -> tuple[float, float, float]:
    metrics, health = free_port(), free_port()
    argv = [
        str(Path(sys.executable).parent / script),
        "run",
        f"--kubeconfig={kubeconfig}",
        "--leader-elect",
        "--leader-election-namespace=default",
        f"--leader-election-id=bench-{script}",
        "--log-format=json",
        f"--metrics-port={metrics}",
        f"--health-port={health}",
    ]
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            assert proc.poll() is None, f"{script} exited {proc.returncode}"
            try:
                url = f"http://127.0.0.1:{health}/readyz"
                with urllib.request.urlopen(url, timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.02)
        ready = time.monotonic() - started
        _, cpu_at_ready = _proc_stats(proc.pid)
        time.sleep(idle)
        rss, _ = _proc_stats(proc.pid)
        return rss, cpu_at_ready, ready
    finally:
        proc.terminate()
        proc.wait(30)


async def _install(kubeconfig: Path) -> None:
    async with await KubeApi.from_config(kubeconfig=str(kubeconfig)) as kube:
        await install_crds(kube, sorted((ROOT / "manifests" / "base" / "crds").glob("*.yaml")))


def main() -> None:
    idle = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    with ControlPlane() as plane:
        asyncio.run(_install(plane.kubeconfig))
        print(f"{'operator':20s} {'idle RSS':>10s} {'CPU to ready':>13s} {'start to ready':>15s}")
        for script in SCRIPTS:
            rss, cpu, ready = measure(script, plane.kubeconfig, idle)
            print(f"{script:20s} {rss:8.1f} MB {cpu:11.2f} s {ready:13.2f} s")


if __name__ == "__main__":
    main()
